"""What `hloscope inspect` and `hloscope bench` run: a function named FILE.py:FUNCTION
or package.module:FUNCTION, its arguments from shapes (``--arg f32[128,2]``) or from
a call (``--inputs 'make_inputs(8)'``), static keyword arguments, and the hardware to
compile for (``--target h100x8 --mesh data=8 --shard 0=data``)."""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import os
import sys
from typing import Any

from .._errors import HloscopeError
from .._hlo._shape import NUMPY_DTYPES
from .._jax._user import INSTALL_JAX, jax_missing, user_code

__all__ = ["HW_MESH_HELP", "HW_SHARD_HELP", "HW_TARGET_HELP", "array_args", "call_inputs",
           "hardware_target", "is_function_target", "load_target", "require_jax", "static_hint",
           "static_kwargs"]

HW_TARGET_HELP = ("Compile for a GPU or TPU that need not be here: h100x8, a100-80:2x4x8, "
                  "tpu-v5e:2x4, ... (hloscope targets lists them).")
HW_MESH_HELP = ("With --target: the device mesh, data=8 or 2x4:data,model (default: one axis "
                "'data' over every device).")
HW_SHARD_HELP = ("With --target: argument I's partition spec over the mesh axes, e.g. "
                 "0=data,None or 1=(data,model); repeat. Others are replicated.")

_modules: dict[str, Any] = {}


def require_jax(command: str) -> None:
    """Stop with the install command when JAX is missing, before the user's file is read."""
    if jax_missing():
        raise HloscopeError(f"JAX is not installed: hloscope {command} compiles with JAX",
                            hint=INSTALL_JAX)
    from .._jax._quiet import import_jax_quietly

    import_jax_quietly()


def _module(where: str) -> Any:
    if where in _modules:
        return _modules[where]
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise HloscopeError(f"{where}: no such file", hint="give FILE.py:FUNCTION with "
                                "the path of your Python file")
        spec = importlib.util.spec_from_file_location("_hloscope_target", where)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        folder = os.path.dirname(os.path.abspath(where))
        if folder not in sys.path:
            sys.path.insert(0, folder)
        with user_code(f"importing {where}"):
            spec.loader.exec_module(module)  # type: ignore[union-attr]
    else:
        try:
            found = importlib.util.find_spec(where)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise HloscopeError(f"no module named {where!r}",
                                hint="give FILE.py:FUNCTION, or package.module:FUNCTION for "
                                     "a module Python can import from here")
        keep = tuple(found.submodule_search_locations or ()) or (
            (os.path.dirname(found.origin),) if found.origin else ())
        with user_code(f"importing {where}", keep=keep):
            module = importlib.import_module(where)
    _modules[where] = module
    return module


def _functions(module: Any) -> list[str]:
    """The public callables defined in `module` (not the ones it imported)."""
    out = []
    for key, value in vars(module).items():
        if key.startswith("_") or not callable(value) or isinstance(value, type):
            continue
        home = getattr(value, "__module__", None) or getattr(
            getattr(value, "__wrapped__", None), "__module__", None)
        if home in (module.__name__, None):
            out.append(key)
    return sorted(out)


def is_function_target(arg: str) -> bool:
    """Whether a command-line argument names a function (FILE.py:FUNCTION or
    package.module:FUNCTION) rather than a file: an existing path is always a file; else
    it is a function when it ends in ``:NAME`` (a Python name) after a ``.py`` path or a
    dotted module name."""
    if os.path.exists(arg):
        return False
    where, sep, name = arg.rpartition(":")
    if not sep or not where or not name.isidentifier():
        return False
    return where.endswith(".py") or all(p.isidentifier() for p in where.split("."))


def _listing(where: str, functions: list[str]) -> str:
    """A hint naming a module's functions (the first 12)."""
    if not functions:
        return f"{where} defines no function"
    return f"its functions: {', '.join(functions[:12])}" + (
        ", ..." if len(functions) > 12 else "")


def load_target(target: str) -> Any:
    """The function FILE.py:FUNCTION or package.module:FUNCTION."""
    where, _, name = target.rpartition(":")
    if not where or not name:
        if target.endswith(".py") and os.path.isfile(target):  # the file, no function named
            raise HloscopeError(f"{target}: name the function, as {target}:FUNCTION",
                                hint=_listing(target, _functions(_module(target))))
        raise HloscopeError(f"cannot find {target!r}: give FILE.py:FUNCTION or "
                            "package.module:FUNCTION")
    module = _module(where)
    if not hasattr(module, name):
        functions = _functions(module)
        close = difflib.get_close_matches(name, functions, n=3)
        if close:
            hint = "did you mean " + " or ".join(f"{where}:{c}" for c in close) + "?"
        else:
            hint = _listing(where, functions)
        raise HloscopeError(f"{where} has no {name!r}", hint=hint)
    return _callable(module, name, target)


def _callable(module: Any, name: str, target: str) -> Any:
    """`module`'s `name`, which must be a function (`target` names it in the error)."""
    fn = getattr(module, name)
    if not callable(fn):
        kind = type(fn).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise HloscopeError(f"{target} is {article} {kind}, not a function",
                            hint="name a function defined in the file")
    return fn


# NumPy's names of the element types, as users write them in --arg (float32[8]).
_NUMPY_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
                "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64", "uint8": "u8",
                "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "pred",
                "complex64": "c64", "complex128": "c128"}


def array_args(shapes: list[str], *, abstract: bool = False) -> list[Any]:
    """Zeros of each shape (``f32[128,2]``); with `abstract`, `ShapeDtypeStruct`s (nothing
    allocated: a target's arrays may not fit here)."""
    from .._hlo._shape import parse_shape

    try:
        import jax.numpy as jnp
    except ImportError:
        raise HloscopeError("JAX is not installed: running a function needs it",
                            hint=INSTALL_JAX) from None
    out = []
    for a in shapes:
        head, bracket, rest = a.partition("[")
        text = _NUMPY_NAMES.get(head.strip(), head) + bracket + rest  # float32[8] too
        try:
            shape = parse_shape(text)
        except ValueError:
            raise HloscopeError(f"--arg {a!r} is not a shape like f32[128,2]",
                                hint="an element type (f32, bf16, s32, ... or NumPy's "
                                     "float32, int32, ...) and the dimensions in brackets"
                                ) from None
        if any(d < 0 for d in shape.dims):
            raise HloscopeError(f"--arg {a!r}: a dimension below 0",
                                hint="each dimension is a size of 0 or more, as in f32[128,2]")
        if shape.element_type not in NUMPY_DTYPES:
            raise HloscopeError(f"--arg {a!r}: unsupported element type",
                                hint="use one of " + ", ".join(NUMPY_DTYPES))
        dtype = NUMPY_DTYPES[shape.element_type]
        if abstract:
            import jax

            out.append(jax.ShapeDtypeStruct(tuple(shape.dims), dtype))
        else:
            try:
                out.append(jnp.zeros(shape.dims, dtype=dtype))
            except Exception as e:  # noqa: BLE001  (XLA's errors have no common type)
                if "RESOURCE_EXHAUSTED" not in str(e) and not isinstance(e, MemoryError):
                    raise
                from .._units import format_bytes

                raise HloscopeError(
                    f"--arg {a!r}: {format_bytes(shape.byte_size)} does not fit in the "
                    "memory of JAX's device here",
                    hint="give smaller shapes, or --target NAME to compile for a GPU or TPU "
                         "without running (hloscope inspect)") from None
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
        if isinstance(out[name], str) and out[name] == value:
            import difflib

            near = difflib.get_close_matches(value, ("True", "False", "None"), n=1,
                                             cutoff=0.6)
            if near or value.lower() in ("true", "false", "none"):
                meant = near[0] if near else value.capitalize()
                raise HloscopeError(
                    f"{flag} {item!r}: {value!r} is no Python literal, so it would pass the "
                    f"string {value!r}; did you mean {meant}?",
                    hint=f"write {name}={meant}, or {name}='{value}' for the string")
    return out


def unquoted(items: list[str]) -> list[str]:
    """The NAME=VALUE items whose VALUE is not a Python literal (taken as a string)."""
    out = []
    for item in items:
        value = item.partition("=")[2]
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out.append(item)
    return out


def static_hint(items: list[str]) -> str:
    """A hint when a --static value was taken as a string, which may be the mistake."""
    loose = unquoted(items)
    if not loose:
        return ""
    name, _, value = loose[0].partition("=")
    return (f"--static {loose[0]} passed the string {value!r} (not a Python literal); "
            f"if {name} should be a number or a tuple, write it as one")


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
        raise HloscopeError(f"--inputs {call!r}: give a call like make_inputs(8) with "
                            "literal arguments") from None
    name = node.func.id
    module = _module(where)
    if not hasattr(module, name):
        close = difflib.get_close_matches(name, _functions(module), n=3)
        after = call[call.index("("):] if "(" in call else "()"
        raise HloscopeError(
            f"--inputs {call!r}: {where} has no {name!r}",
            hint=("did you mean " + " or ".join(f"--inputs '{c}{after}'" for c in close) + "?")
            if close else _listing(where, _functions(module)))
    fn = _callable(module, name, f"{where}:{name}")  # the file is run once, not again
    with user_code(f"calling --inputs {call}"):
        out = fn(*args, **kwargs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def hardware_target(hw: str | None, mesh: str | None, shard: list[str],
                    devices: int | None) -> dict[str, Any]:
    """``--target``, ``--mesh`` and ``--shard`` checked before the user's file is read, as
    `inspect`'s keyword arguments (empty without ``--target``)."""
    shards: dict[int, str] = {}
    for item in shard:
        index, eq, spec = item.partition("=")
        if not eq or not index.strip().isdigit():
            raise HloscopeError(f"--shard {item!r}: give ARGUMENT=SPEC such as 0=data,None "
                                "(argument numbers start at 0)")
        shards[int(index)] = spec
    if hw is None:
        if mesh is not None or shards:
            raise HloscopeError("--mesh and --shard lay the arguments on a target's devices",
                                hint="give --target too, such as --target h100x8")
        return {}
    from .._target._catalog import parse_target

    parse_target(hw)  # an unknown name fails before the user's file is read
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    return {"target": hw, "mesh": mesh, "shard": shards}
