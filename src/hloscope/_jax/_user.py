"""The user's own code, run by hloscope: their exceptions stay theirs.

hloscope runs code it did not write: the user's file when it imports it, the
function that makes their inputs, their function while JAX traces it, and XLA
compiling and running what came out.  Whatever that code raises is the user's
problem to fix, not a bug in hloscope.  `user_code` marks such exceptions (with a
note saying what hloscope was doing) and lets them go on unchanged, so the Python
API raises the user's own exception; the CLI turns a marked exception into a
`UserCodeError` (`user_error`) that shows only the user's frames, and exits 2.

`check_call` catches the commonest mistake before any code runs: the number of
``--arg`` values, or a ``--static`` name the function does not have.
"""

from __future__ import annotations

import inspect as _inspect
import logging
import math
import os
import re
import site
import sys
import sysconfig
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._errors import HloscopeError, UserCodeError, UserFrame

__all__ = ["check_call", "describe", "hide_own_frames_from_jax", "jax_missing", "user_code",
           "user_error", "user_frames"]

_MARK = "_hloscope_while"
INSTALL_JAX = "pip install 'hloscope[jax]'"


def _note(error: BaseException, text: str) -> None:
    add = getattr(error, "add_note", None)  # Python 3.11+
    if add is not None:
        add(text)


# JAX's loggers that log a host callback's exception (with its traceback) before XLA
# raises its own error, which holds the message alone: jax.debug.callback, pure_callback,
# io_callback.
_CALLBACK_LOGGERS = ("jax._src.debugging", "jax._src.callback")
_CALLBACK = "_hloscope_callback"


class _Callbacks(logging.Filter):
    """Keeps the exceptions of the user's host callbacks that JAX logs, and keeps JAX from
    printing them (the error the run raises is shown instead, pointing at them)."""

    def __init__(self) -> None:
        super().__init__()
        self.raised: list[BaseException] = []

    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        if info and isinstance(info[1], Exception):
            self.raised.append(info[1])
            return False
        return True


@contextmanager
def user_code(phase: str, *, keep: tuple[str, ...] = ()) -> Iterator[None]:
    """Run a block of the user's code.  An exception it raises goes on unchanged, with a
    note ``hloscope: raised while PHASE`` and a mark that `user_error` reads.  `keep` are
    paths whose frames are the user's even inside site-packages (an installed target).
    An exception of a host callback (``jax.debug.callback``) that JAX logged is kept with
    the error XLA raised for it, so that the error points at the callback's line."""
    callbacks = _Callbacks()
    loggers = [logging.getLogger(n) for n in _CALLBACK_LOGGERS]
    for log in loggers:
        log.addFilter(callbacks)
    try:
        yield
    except HloscopeError:
        raise
    except Exception as e:
        if getattr(e, _MARK, None) is None:
            try:
                setattr(e, _MARK, (phase, keep))
                if callbacks.raised and "callback" in str(e).lower():
                    setattr(e, _CALLBACK, callbacks.raised[-1])
                    if e.__cause__ is None:  # Python shows it, traceback and all
                        e.__cause__ = callbacks.raised[-1]
            except (AttributeError, TypeError):  # an exception type without a __dict__
                pass
            _note(e, f"hloscope: raised while {phase}")
        raise
    finally:
        for log in loggers:
            log.removeFilter(callbacks)


def _not_user_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    try:
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except AttributeError:  # some virtualenvs' site module lacks these
        pass
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # hloscope itself
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


def _shown_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith(os.pardir + os.sep) else rel


def user_frames(error: BaseException, keep: tuple[str, ...] = ()) -> list[UserFrame]:
    """The frames of `error`'s traceback that are the user's code, outermost first;
    for a SyntaxError, the place of the bad syntax."""
    not_user = _not_user_roots()
    kept = tuple(os.path.realpath(k) for k in keep)
    out = []
    for fs in traceback.extract_tb(error.__traceback__):
        name = fs.filename
        if not name or name.startswith("<"):
            continue
        real = os.path.realpath(name)
        if real.startswith(not_user) and not real.startswith(kept):
            continue
        out.append(UserFrame(_shown_path(name), fs.lineno or 0, fs.name, (fs.line or "").strip()))
    if isinstance(error, SyntaxError) and error.filename and not error.filename.startswith("<"):
        out.append(UserFrame(_shown_path(error.filename), error.lineno or 0, "<module>",
                             (error.text or "").strip()))
    return out


_HIDDEN: set[str] = set()


def hide_own_frames_from_jax() -> None:
    """Tell JAX that frames of hloscope (and of the CLI's typer and click, and Python's
    frozen modules: runpy; the ``hloscope`` console script) are not the user's, so a
    kernel's source line is never one of hloscope's own: JAX names the innermost frame
    outside its exclusions, which for a library function given as the target
    (``jax.numpy:sin``) was hloscope's call of it. Nothing where JAX has no such hook."""
    try:
        from jax._src import source_info_util
    except ImportError:
        return
    register = getattr(source_info_util, "register_exclusion", None)
    if register is None:
        return
    roots = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    roots += [os.path.dirname(os.path.abspath(m.__file__)) for m in
              (sys.modules.get("typer"), sys.modules.get("click"))
              if m is not None and getattr(m, "__file__", None)]
    paths = [os.path.join(root, "") for root in roots] + ["<frozen "]  # runpy, for -m
    script = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    if os.path.basename(script) in ("hloscope", "hloscope.exe", "hloscope-script.py"):
        paths.append(os.path.abspath(script))  # the console script pip made
    for path in paths:
        if path not in _HIDDEN:
            _HIDDEN.add(path)
            register(path)


def jax_missing() -> bool:
    """JAX cannot be imported here."""
    import importlib.util

    try:
        return importlib.util.find_spec("jax") is None
    except (ImportError, ValueError):
        return True


def _hint(error: BaseException) -> str:
    kind = type(error).__name__
    if isinstance(error, ModuleNotFoundError):
        top = (error.name or "").partition(".")[0]
        if top in ("jax", "jaxlib"):
            return f"JAX is not installed: {INSTALL_JAX}"
        if top:
            return (f"your code imports {top!r}, which is not installed in this Python "
                    f"({sys.executable}): install it, or run hloscope where it is")
    if kind in ("TracerBoolConversionError", "ConcretizationTypeError",
                "TracerIntegerConversionError", "TracerArrayConversionError"):
        return ("your function uses a traced value where Python needs a concrete one (an "
                "if, a loop bound, a shape): use jnp.where or jax.lax.cond, or make that "
                "argument static (--static NAME=VALUE)")
    if kind in ("XlaRuntimeError", "JaxRuntimeError") and "RESOURCE_EXHAUSTED" in str(error):
        return "the program needs more device memory than there is: run hloscope memory on it"
    return ""


_MESH_SHAPE = re.compile(r"product of mesh_shape \(([\d, ]+)\)")


def _devices_hint(error: BaseException, frames: list[UserFrame]) -> str:
    """Where code that builds a mesh or picks devices failed while JAX has one CPU device
    here: the hint to run on virtual CPU devices (``--devices N``)."""
    from ._quiet import jax_started

    if not jax_started():  # (asking JAX its devices would start it)
        return ""
    import jax

    try:
        if jax.device_count() != 1 or jax.default_backend() != "cpu":
            return ""
    except Exception:  # noqa: BLE001  (no backend at all: nothing to hint)
        return ""
    text = str(error)
    lines = " ".join(f.source for f in frames[-2:])
    if not re.search(r"\b(mesh|devices)\b", f"{text} {lines}", re.IGNORECASE):
        return ""
    m = _MESH_SHAPE.search(text)
    n = math.prod(int(d) for d in m.group(1).replace(" ", "").split(",") if d) if m else 8
    return (f"JAX has one CPU device here; a program sharded over {n} devices runs on "
            f"virtual CPU devices: --devices {n}")


def user_error(error: BaseException) -> UserCodeError | None:
    """The `UserCodeError` for an exception `user_code` marked, else None (a bug)."""
    mark = getattr(error, _MARK, None)
    if mark is None:
        return None
    phase, keep = mark
    frames = user_frames(error, keep)
    callback = getattr(error, _CALLBACK, None)
    if callback is not None:  # the host callback's own frames: where it raised
        frames = frames + user_frames(callback, keep)
    return UserCodeError(phase, error, frames,
                         hint=_hint(error) or _devices_hint(error, frames))


def describe(fn: Any) -> str:
    """``NAME (FILE:LINE)`` for a function, as much as can be told."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    code = getattr(_inspect.unwrap(fn), "__code__", None) if callable(fn) else None
    if code is None:
        return name
    return f"{name} ({_shown_path(code.co_filename)}:{code.co_firstlineno})"


def _arity(params: list[_inspect.Parameter]) -> tuple[int, int | None]:
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    low = sum(1 for p in positional if p.default is p.empty)
    high = None if any(p.kind == p.VAR_POSITIONAL for p in params) else len(positional)
    return low, high


def check_call(fn: Any, n_args: int, kwargs: dict[str, Any], *,
               given: str = "--arg") -> None:
    """Raise `HloscopeError` when `fn` cannot take `n_args` positional arguments and the
    keyword arguments `kwargs`, saying what it takes and what was given."""
    try:
        sig = _inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or an odd callable: let the call decide
        return
    params = list(sig.parameters.values())
    names = [p.name for p in params]
    shown = ", ".join(
        ("*" + p.name) if p.kind == p.VAR_POSITIONAL else ("**" + p.name)
        if p.kind == p.VAR_KEYWORD else p.name + ("=..." if p.default is not p.empty else "")
        for p in params)
    what = describe(fn)
    var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    for key in kwargs:
        if key not in names and not var_kw:
            raise HloscopeError(f"{what} has no parameter {key!r} (it takes {shown or 'none'})",
                                hint="--static NAME=VALUE names one of the function's "
                                     "parameters")
    try:
        sig.bind(*([None] * n_args), **kwargs)
    except TypeError as e:
        static_positional = sum(1 for p in params[:n_args] if p.name in kwargs)
        low, high = _arity([p for p in params if p.name not in kwargs])
        if static_positional:
            raise HloscopeError(f"{what}: {e}", hint=f"give each argument once: by {given} "
                                "in order, or by --static NAME=VALUE") from None
        takes = (f"{low}" if high == low else f"{low} or more" if high is None
                 else f"{low} to {high}")
        plural = "" if high == low == 1 else "s"
        raise HloscopeError(
            f"{what} takes {takes} argument{plural} ({shown}); {n_args} {given} given",
            hint=f"give one {given} per argument, in order" + (
                "; an argument that is a dict, a list or another pytree (weights, an "
                "optimizer state) comes from a call in the same file that returns the "
                "arguments: --inputs 'make_inputs()'" if given == "--arg" else "")) from None
