"""Inputs and outputs of `hloscope run`: every HLO element type as a NumPy dtype, inputs
from specs, ``.npz`` files and folders of ``.npy``, conversions that are announced (and
refused where they lose information), sizes checked before anything is allocated, and
outputs compared with a reference under per-dtype tolerances scaled to the reduction size.

Pure NumPy (and ml_dtypes, which JAX brings): nothing here starts JAX.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import HloscopeError
from .._hlo._module import Instruction, Module
from .._hlo._shape import Shape

__all__ = ["InputValue", "compare_outputs", "element_dtype", "load_input_files",
           "make_input", "memory_available", "reduction_size", "tolerance_for"]

# HLO element type -> (module with the dtype, its name there).
_DTYPES: dict[str, tuple[str, str]] = {
    "pred": ("numpy", "bool_"), "s8": ("numpy", "int8"), "s16": ("numpy", "int16"),
    "s32": ("numpy", "int32"), "s64": ("numpy", "int64"), "u8": ("numpy", "uint8"),
    "u16": ("numpy", "uint16"), "u32": ("numpy", "uint32"), "u64": ("numpy", "uint64"),
    "f16": ("numpy", "float16"), "f32": ("numpy", "float32"), "f64": ("numpy", "float64"),
    "c64": ("numpy", "complex64"), "c128": ("numpy", "complex128"),
    "bf16": ("ml_dtypes", "bfloat16"), "s4": ("ml_dtypes", "int4"),
    "u4": ("ml_dtypes", "uint4"), "s2": ("ml_dtypes", "int2"), "u2": ("ml_dtypes", "uint2"),
    "f8e5m2": ("ml_dtypes", "float8_e5m2"), "f8e4m3": ("ml_dtypes", "float8_e4m3"),
    "f8e4m3fn": ("ml_dtypes", "float8_e4m3fn"),
    "f8e4m3b11fnuz": ("ml_dtypes", "float8_e4m3b11fnuz"),
    "f8e5m2fnuz": ("ml_dtypes", "float8_e5m2fnuz"),
    "f8e4m3fnuz": ("ml_dtypes", "float8_e4m3fnuz"), "f8e3m4": ("ml_dtypes", "float8_e3m4"),
    "f8e8m0fnu": ("ml_dtypes", "float8_e8m0fnu"), "f4e2m1fn": ("ml_dtypes", "float4_e2m1fn"),
}
# Relative tolerance per element type for one rounding step; scaled by sqrt(reduction size).
_BASE_TOLERANCE = {"f64": 1e-12, "c128": 1e-12, "f32": 1e-5, "c64": 1e-5, "f16": 2e-3,
                   "bf16": 1.6e-2}


def element_dtype(element_type: str) -> Any:
    """The NumPy dtype of an HLO element type (ml_dtypes' for bf16, f8, int4, ...)."""
    import numpy as np

    where = _DTYPES.get(element_type)
    if where is None:
        raise HloscopeError(f"element type {element_type} has no NumPy dtype",
                            hint="only array element types can be inputs and outputs")
    if where[0] == "numpy":
        return np.dtype(getattr(np, where[1]))
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, where[1]))


def _kind(dtype: Any) -> str:
    """b (bool), i, u, f (any float, ml_dtypes' included) or c."""
    import numpy as np

    if dtype == np.bool_:
        return "b"
    if dtype.kind in "iuc":
        return dtype.kind
    if dtype.kind == "f":
        return "f"
    name = dtype.name
    if name.startswith(("float", "bfloat")):
        return "f"
    if name.startswith("uint"):
        return "u"
    if name.startswith("int"):
        return "i"
    return "?"


@dataclass(frozen=True, slots=True)
class InputValue:
    """One parameter's input: the host array, where it came from, and what was done to it."""

    array: Any
    source: str
    conversion: str | None = None

    def describe(self) -> str:
        return self.source + (f" ({self.conversion})" if self.conversion else "")


def global_shape(inst: Instruction, partitioned: bool) -> tuple[int, ...]:
    """The parameter's full shape: its own, or for an already-partitioned module the
    per-device shape times its sharding's tiles."""
    dims = tuple(inst.shape.dims)
    text = inst.attr("sharding")
    if not partitioned or not text:
        return dims
    from .._hlo._sharding import parse_sharding

    try:
        tiles = parse_sharding(text).data_tile_dims if text else ()
    except Exception:  # noqa: BLE001
        return dims
    if not tiles:
        return dims
    return tuple(d * (tiles[k] if k < len(tiles) else 1) for k, d in enumerate(dims))


def convert(arr: Any, dtype: Any, what: str, *, allow_lossy: bool) -> tuple[Any, str | None]:
    """`arr` as `dtype`, with a note when it changed type; refused (unless `allow_lossy`)
    where values change: floats into integers that are not whole or do not fit, integers
    out of range, complex numbers with an imaginary part into reals."""
    import numpy as np

    if arr.dtype == dtype:
        return arr, None
    if arr.dtype.kind == "V" and arr.dtype.itemsize == dtype.itemsize:
        # .npy/.npz keep ml_dtypes' types (bfloat16, float8, int4) as raw bytes
        return arr.view(dtype), f"raw {arr.dtype} bytes read as {dtype}"
    src, dst = _kind(arr.dtype), _kind(dtype)
    lost = ""
    if arr.size:
        if src == "c" and dst != "c" and np.any(np.imag(arr) != 0):
            lost = "the imaginary parts are dropped"
        elif src in "fc" and dst in "iub":
            real = np.real(arr)
            if not np.all(np.isfinite(real)) or np.any(real != np.trunc(real)):
                lost = "values that are not whole numbers are truncated"
        if not lost and dst in "iu" and src in "iuf":
            lo, hi = _int_range(dtype)
            real = np.real(arr)
            if real.min() < lo or real.max() > hi:
                lost = f"values outside {lo}..{hi} wrap around"
        if not lost and dst == "b" and src != "b" and np.any((arr != 0) & (arr != 1)):
            lost = "values other than 0 and 1 become true"
    out = arr.astype(dtype)
    note = f"converted from {arr.dtype} to {dtype}"
    if lost:
        if not allow_lossy:
            raise HloscopeError(f"{what}: {arr.dtype} into the parameter's {dtype} loses "
                                f"information: {lost}",
                                hint="give an array of the parameter's type, or allow the "
                                     "conversion (--allow-lossy, allow_lossy=True)")
        note += f": {lost} (allowed)"
    elif src == "f" and dst == "f" and dtype.itemsize < arr.dtype.itemsize and arr.size:
        back = out.astype(np.float64)
        err = float(np.max(np.abs(back - arr.astype(np.float64))))
        note += f" (rounded: largest change {err:.3g})"
    return out, note


def _int_range(dtype: Any) -> tuple[int, int]:
    """The smallest and largest value of an integer dtype (ml_dtypes' int4 and int2 too)."""
    import ml_dtypes
    import numpy as np

    try:
        info = np.iinfo(dtype)
    except ValueError:
        info = ml_dtypes.iinfo(dtype)
    return int(info.min), int(info.max)


def _random(rng: Any, dims: tuple[int, ...], dtype: Any) -> Any:
    """Random values drawn in the parameter's own type (no float64 copy of a big input)."""
    import numpy as np

    k = _kind(dtype)
    if k == "b":
        return rng.integers(0, 2, dims, dtype=np.int8).astype(bool)
    if k in "iu":
        hi = 10 if dtype.itemsize >= 1 and dtype.name not in ("int2", "uint2") else 2
        small = np.int64 if dtype.itemsize == 8 else np.int32 if dtype.itemsize == 4 else \
            np.int16 if dtype.itemsize == 2 else np.int8
        return rng.integers(0, hi, dims, dtype=small).astype(dtype, copy=False)
    if k == "c":
        part = np.float64 if dtype.itemsize == 16 else np.float32
        out = np.empty(dims, dtype)
        out.real = rng.standard_normal(dims, dtype=part)
        out.imag = rng.standard_normal(dims, dtype=part)
        return out
    if dtype == np.float64:
        return rng.standard_normal(dims, dtype=np.float64)
    return rng.standard_normal(dims, dtype=np.float32).astype(dtype, copy=False)


def make_input(spec: Any, inst: Instruction, dims: tuple[int, ...], *,
               allow_lossy: bool = False) -> InputValue:
    """The input of parameter `inst` (full shape `dims`) from `spec`: ``zeros``, ``ones``,
    ``random[:SEED]``, a number, a ``.npy`` file, or an array (from ``--inputs``)."""
    import numpy as np

    shape = inst.shape
    if shape.is_tuple or not shape.is_array:
        raise HloscopeError(f"parameter {inst.name} is {shape}: only array parameters can be "
                            "given", hint="run a module whose parameters are arrays")
    dtype = element_dtype(shape.element_type)
    what = f"input {inst.parameter_number} ({inst.name})"
    if not isinstance(spec, str):
        return _from_array(np.asarray(spec), inst, dims, dtype, what, "array",
                           allow_lossy)
    if spec == "zeros":
        return InputValue(np.zeros(dims, dtype), spec)
    if spec == "ones":
        return InputValue(np.ones(dims, dtype), spec)
    if spec.startswith("random"):
        try:
            seed = int(spec.split(":", 1)[1]) if ":" in spec else 0
        except ValueError:
            raise HloscopeError(f"{what}: {spec!r}: the seed must be a whole number") from None
        return InputValue(_random(np.random.default_rng(seed), dims, dtype), spec)
    if spec.endswith(".npy"):
        try:
            arr = np.load(spec, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise HloscopeError(f"{what}: cannot read {spec} ({e})") from None
        return _from_array(arr, inst, dims, dtype, what, spec, allow_lossy)
    try:
        value: Any = int(spec) if re.fullmatch(r"[-+]?[0-9]+", spec) else float(spec)
    except ValueError:
        raise HloscopeError(f"{what}: {spec!r} is not zeros, ones, random[:SEED], "
                            "a number or a .npy file") from None
    arr, note = convert(np.asarray(value), dtype, what, allow_lossy=allow_lossy)
    return InputValue(np.full(dims, arr, dtype), spec,
                      note if note and "loses" in note or (note and "allowed" in note)
                      else None)


def _from_array(arr: Any, inst: Instruction, dims: tuple[int, ...], dtype: Any, what: str,
                source: str, allow_lossy: bool) -> InputValue:
    if tuple(arr.shape) != dims:
        if arr.size == math.prod(dims) and tuple(d for d in arr.shape if d != 1) == tuple(
                d for d in dims if d != 1):
            arr = arr.reshape(dims)
        else:
            raise HloscopeError(f"{what}: {source} holds shape {tuple(arr.shape)}, "
                                f"the parameter is {inst.shape}"
                                + (f" (all devices together: {list(dims)})"
                                   if tuple(dims) != tuple(inst.shape.dims) else ""),
                                hint="give an array of the parameter's shape")
    out, note = convert(arr, dtype, what, allow_lossy=allow_lossy)
    return InputValue(out, source, note)


def load_input_files(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Arrays by key from an ``.npz`` file or a folder of ``.npy`` files (key: the file
    name without ``.npy``).  Keys are parameter names or positions (``0``, ``arg0``,
    ``p0``-style names are matched by `match_inputs`)."""
    import numpy as np

    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.npy"))
        if not files:
            raise HloscopeError(f"--inputs {p}: the folder holds no .npy files",
                                hint="save one .npy per parameter, named by parameter name "
                                     "or position (0.npy, 1.npy, ...)")
        out: dict[str, Any] = {}
        for f in files:
            try:
                out[f.stem] = np.load(f, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise HloscopeError(f"--inputs: cannot read {f} ({e})") from None
        return out
    try:
        with np.load(p, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                return {"0": np.asarray(z)}
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise HloscopeError(f"--inputs {p}: no such file or folder") from None
    except (OSError, ValueError) as e:
        raise HloscopeError(f"--inputs {p}: not an .npz or .npy file ({e})",
                            hint="np.savez(path, *arrays) saves them in parameter order") \
            from None


def match_inputs(arrays: dict[str, Any], params: list[Instruction], source: str
                 ) -> dict[int, Any]:
    """Which parameter each array is for: by parameter name, else by position (``0``,
    ``arr_0`` as ``np.savez`` names them, ``arg0``, ``p0``); an array that fits none is an
    error naming the parameters."""
    by_name = {p.name: p.parameter_number for p in params}
    by_name.update({p.name.lstrip("%"): p.parameter_number for p in params})
    out: dict[int, Any] = {}
    for key, arr in arrays.items():
        if key in by_name:
            num = by_name[key]
        else:
            mt = re.fullmatch(r"(?:arr_|arg|p|param|input)?_?([0-9]+)", key)
            num = int(mt.group(1)) if mt else -1
            if not 0 <= num < len(params):
                raise HloscopeError(
                    f"{source}: array {key!r} is for no parameter",
                    hint="name arrays by parameter name or position; the parameters: "
                         + ", ".join(f"{p.parameter_number}={p.name}" for p in params))
        out[num] = arr
    return out


def describe_parameter(inst: Instruction) -> str:
    """What the module says about a parameter: its op_name, op_type and source line
    (torch_xla writes them with ``XLA_HLO_DEBUG=1``), its sharding."""
    parts: list[str] = []
    try:
        md = inst.metadata
    except Exception:  # noqa: BLE001  (damaged metadata: say nothing)
        md = None
    if md is not None:
        if md.op_type:
            parts.append(f"op_type {md.op_type}")
        if md.op_name:
            parts.append(f"op_name {md.op_name!r}")
    loc = inst.source
    if loc is not None:
        parts.append(f"at {loc}")
    sh = inst.attr("sharding")
    if sh:
        parts.append(f"sharding {sh}")
    return "; ".join(parts)


def memory_available() -> int | None:
    """Bytes of memory the machine can still give (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # not there, or not as Linux writes it
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _human(n: int) -> str:
    for unit, size in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
                       ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _leaves(shape: Shape) -> list[Shape]:
    return [s for _, s in shape.leaves()] if shape.is_tuple else [shape]


def check_sizes(m: Module, input_dims: list[tuple[Shape, tuple[int, ...]]],
                available: int | None, where: str = "this machine") -> int:
    """Raise a clear error when the inputs and outputs cannot fit in `available` bytes,
    before anything is allocated; returns the bytes needed.  The host holds each input
    and output once; the devices (this machine's memory, for CPU devices) once more."""
    def nbytes(shape: Shape, dims: tuple[int, ...]) -> int:
        from .._hlo._shape import PRIMITIVE_BITS

        bits = PRIMITIVE_BITS.get(shape.element_type, 8)
        return (math.prod(dims) * bits + 7) // 8

    ins = sum(nbytes(s, d) for s, d in input_dims)
    outs = sum(nbytes(s, tuple(s.dims)) for s in _leaves(m.entry.root.shape) if s.is_array)
    need = 2 * (ins + outs)
    if available is not None and need > available:
        raise HloscopeError(
            f"{m.name}: running it needs about {_human(need)} ({need:,} B: inputs "
            f"{_human(ins)} and outputs {_human(outs)}, each on the host and on "
            f"the devices), {where} has {_human(available)} available",
            hint="run it on a machine with more memory, or a smaller version of the "
                 "program; `hloscope memory` reads its figures without running it")
    return need


def reduction_size(m: Module) -> int:
    """The longest sum in the module: the largest dot contraction or reduce extent (1 when
    nothing is summed), which scales how far two correct results may differ."""
    most = 1
    for inst in m.instructions():
        if inst.opcode == "dot" and inst.operands:
            dims = re.findall(r"[0-9]+", inst.attr("lhs_contracting_dims") or "")
            lhs = inst.operands[0].shape
            if lhs.is_array:
                most = max(most, math.prod(lhs.dims[int(d)] for d in dims
                                           if int(d) < len(lhs.dims)))
        elif inst.opcode in ("reduce", "reduce-window", "all-reduce", "reduce-scatter"):
            op = inst.operands[0].shape if inst.operands else None
            if inst.opcode == "reduce" and op is not None and op.is_array:
                dims = re.findall(r"\d+", inst.attr("dimensions") or "")
                most = max(most, math.prod(op.dims[int(d)] for d in dims
                                           if int(d) < len(op.dims)))
        elif inst.opcode == "convolution" and inst.operands:
            rhs = inst.operands[1].shape if len(inst.operands) > 1 else None
            if rhs is not None and rhs.is_array and rhs.dims:
                most = max(most, math.prod(rhs.dims) // max(rhs.dims))
    return most


def tolerance_for(dtype: Any, k: int) -> float:
    """The relative difference two correct results of type `dtype` may show after sums of
    `k` terms: one rounding step of the type (integers and booleans: exact) times
    sqrt(k), the growth of rounding errors in a sum."""
    name = {"float64": "f64", "complex128": "c128", "float32": "f32", "complex64": "c64",
            "float16": "f16", "bfloat16": "bf16"}.get(str(dtype))
    if _kind(dtype) in "iub":
        return 0.0
    base = _BASE_TOLERANCE.get(name or "", 0.25)  # f8 and f4 types: a quarter
    return base * math.sqrt(max(1, k))


def compare_outputs(values: list[Any], reference: list[Any], names: list[str], *,
                    k: int, tolerance: float | None = None) -> list[dict[str, Any]]:
    """Per output: the largest absolute difference, the largest relative difference
    (against the reference's largest magnitude, so that values near zero do not blow it
    up), the tolerance (per dtype, scaled to `k`, unless `tolerance` is given) and ok."""
    import numpy as np

    rows: list[dict[str, Any]] = []
    for name, a, b in zip(names, values, reference):
        a_, b_ = np.asarray(a), np.asarray(b)
        if b_.dtype.kind == "V" and b_.dtype.itemsize == a_.dtype.itemsize:
            b_ = b_.view(a_.dtype)  # an ml_dtypes type saved to .npz as raw bytes
        row: dict[str, Any] = {"output": name, "dtype": str(a_.dtype), "shape": list(a_.shape)}
        if a_.shape != b_.shape:
            rows.append({**row, "ok": False, "error": f"shape {list(a_.shape)}, reference "
                         f"{list(b_.shape)}", "max_abs_error": None, "max_rel_error": None,
                         "tolerance": tolerance})
            continue
        tol = tolerance if tolerance is not None else tolerance_for(a_.dtype, k)
        if not a_.size:
            rows.append({**row, "max_abs_error": 0.0, "max_rel_error": 0.0, "tolerance": tol,
                         "ok": True})
            continue
        wide = np.complex128 if _kind(a_.dtype) == "c" or _kind(b_.dtype) == "c" else \
            np.float64
        x, y = a_.astype(wide), b_.astype(wide)
        # equal values (infinities of one sign included) and NaN beside NaN agree
        agree = (x == y) | (np.isnan(x) & np.isnan(y))
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(agree, 0.0, np.abs(x - y))
        worst = float(diff.max())
        if np.isnan(worst):
            worst = math.inf
        finite = np.abs(y[np.isfinite(y)])
        scale = float(finite.max()) if finite.size else 1.0
        rel = worst / scale if scale > 0 else (0.0 if worst == 0 else math.inf)
        rows.append({**row, "max_abs_error": worst, "max_rel_error": rel, "tolerance": tol,
                     "ok": rel <= tol})
    return rows
