"""What `hloscope inspect` and `hloscope bench` run: a function named FILE.py:FUNCTION
or package.module:FUNCTION, its arguments from shapes (``--arg f32[128,2]``) or from
a call (``--inputs 'make_input(128)'``), and static keyword arguments."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
from typing import Any

from .._errors import HloscopeError
from .._hlo._shape import NUMPY_DTYPES

__all__ = ["array_args", "call_inputs", "load_target", "static_kwargs"]

_modules: dict[str, Any] = {}


def _module(where: str) -> Any:
    if where in _modules:
        return _modules[where]
    if where.endswith(".py"):
        if not os.path.exists(where):
            raise HloscopeError(f"{where}: no such file")
        spec = importlib.util.spec_from_file_location("_hloscope_target", where)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    else:
        module = importlib.import_module(where)
    _modules[where] = module
    return module


def load_target(target: str) -> Any:
    """The function FILE.py:FUNCTION or package.module:FUNCTION."""
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise HloscopeError(f"cannot find {target!r}: give FILE.py:FUNCTION or "
                            "package.module:FUNCTION")
    module = _module(where)
    try:
        return getattr(module, name)
    except AttributeError:
        raise HloscopeError(f"{where} has no {name!r}") from None


def array_args(shapes: list[str]) -> list[Any]:
    """Zeros of each shape (``f32[128,2]``)."""
    from .._hlo._shape import parse_shape

    try:
        import jax.numpy as jnp
    except ImportError:
        raise HloscopeError("running a function needs JAX",
                            hint="pip install 'hloscope[jax]'") from None
    out = []
    for a in shapes:
        try:
            shape = parse_shape(a)
        except ValueError:
            raise HloscopeError(f"--arg {a!r} is not a shape like f32[128,2]") from None
        if shape.element_type not in NUMPY_DTYPES:
            raise HloscopeError(f"--arg {a!r}: unsupported element type",
                                hint="use one of " + ", ".join(NUMPY_DTYPES))
        out.append(jnp.zeros(shape.dims, dtype=NUMPY_DTYPES[shape.element_type]))
    return out


def _literal(value: str) -> Any:
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def static_kwargs(items: list[str], flag: str = "--static") -> dict[str, Any]:
    """NAME=VALUE pairs (values as Python literals, else strings)."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise HloscopeError(f"{flag} {item!r}: give NAME=VALUE")
        out[name] = _literal(value)
    return out


def call_inputs(target: str, call: str) -> list[Any]:
    """The arguments returned by ``NAME(literal, key=literal)``, NAME in the target's module."""
    where = target.rpartition(":")[0]
    try:
        node = ast.parse(call, mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    except (ValueError, SyntaxError):
        raise HloscopeError(f"--inputs {call!r}: give a call like make_input(128) with "
                            "literal arguments") from None
    fn = load_target(f"{where}:{node.func.id}")
    out = fn(*args, **kwargs)
    return list(out) if isinstance(out, (tuple, list)) else [out]
