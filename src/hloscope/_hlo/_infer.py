"""Result shapes XLA infers when the text leaves them out (``ROOT r = add(a, b)``).

XLA's parser lets the shape be omitted for the opcodes in
`CAN_INFER_SHAPE` and works it out with ``ShapeInference``; this module
does the same for what real text leaves out: elementwise ops, comparisons,
broadcasts, tuples and their elements, dots, reductions, transposes, pads,
concatenations, slices of windows, calls, loops and branches.  Inferred
shapes carry no layout, as XLA's do before layout assignment.  Anything it
cannot work out raises `InferError` saying what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from ._shape import Shape
from ._numbers import ascii_int
from ._window import WindowError, parse_window

__all__ = ["InferError", "infer_shape"]


class InferError(ValueError):
    """The shape cannot be inferred; the message says why."""


_UNARY_SAME = frozenset("""
acos acosh asin asinh atanh exponential-minus-one log log-plus-one logistic sqrt cbrt rsqrt
tanh erf sine sinh cosine cosh tan exponential round-nearest-afz round-nearest-even ceil
count-leading-zeros copy opt-barrier floor not negate popcnt sign cholesky domain
""".split())
_BINARY = frozenset("""
add divide multiply mulhi subtract atan2 maximum minimum power remainder and or xor shift-left
shift-right-arithmetic shift-right-logical
""".split())
_COMPLEX_PART = {"c64": "f32", "c128": "f64"}
_INTS_RE = re.compile(r"-?[0-9]+")


def _ints(v: str | None) -> list[int]:
    return [int(x) for x in _INTS_RE.findall(v)] if v else []


def _array(shape: Shape, what: str) -> Shape:
    if not shape.is_array:
        raise InferError(f"{what} must be an array, not {shape.to_text()}")
    return shape


def _with(shape: Shape, dims: Sequence[int], etype: str | None = None) -> Shape:
    return Shape(etype or shape.element_type, tuple(dims))


def _same_dims(a: Shape, b: Shape, opcode: str) -> None:
    if a.dims != b.dims:
        raise InferError(f"{opcode} needs operands of the same dimensions, got "
                         f"{a.without_layout()} and {b.without_layout()}")


def infer_shape(opcode: str, operands: Sequence[Shape], attrs: Mapping[str, str],
                called: Callable[[str], Sequence[Shape] | None]) -> Shape:
    """The result shape of `opcode` applied to `operands` with attributes `attrs`.

    `called(key)` returns the root shapes of the computations an attribute
    names (for calls, loops, branches and reductions), or None.
    """
    n = len(operands)

    def need(k: int) -> None:
        if n < k:
            raise InferError(f"{opcode} needs {k} operand(s) to infer its shape, has {n}")

    if opcode in _UNARY_SAME:
        need(1)
        return _strip(operands[0])
    if opcode in ("abs", "real", "imag"):
        need(1)
        s = _array(operands[0], "the operand")
        return _with(s, s.dims, _COMPLEX_PART.get(s.element_type))
    if opcode == "is-finite":
        need(1)
        return _with(_array(operands[0], "the operand"), operands[0].dims, "pred")
    if opcode in _BINARY:
        need(2)
        a, b = _array(operands[0], "lhs"), _array(operands[1], "rhs")
        _same_dims(a, b, opcode)
        return _strip(a)
    if opcode == "compare":
        need(2)
        _same_dims(operands[0], operands[1], opcode)
        return _with(operands[0], operands[0].dims, "pred")
    if opcode == "complex":
        need(2)
        a = _array(operands[0], "the real part")
        etype = {"f32": "c64", "f64": "c128"}.get(a.element_type)
        if etype is None:
            raise InferError(f"complex needs f32 or f64 parts, got {a.element_type}")
        return _with(a, a.dims, etype)
    if opcode in ("select", "clamp"):
        need(3)
        return _strip(operands[1])
    if opcode == "add-dependency":
        need(1)
        return _strip(operands[0])
    if opcode == "after-all":
        return Shape("token")
    if opcode in ("partition-id", "replica-id"):
        return Shape("u32")
    if opcode == "get-dimension-size":
        return Shape("s32")
    if opcode == "set-dimension-size":
        need(1)
        return _strip(operands[0])
    if opcode == "tuple":
        return Shape("tuple", tuple_shapes=tuple(operands))
    if opcode == "get-tuple-element":
        need(1)
        index = _ints(attrs.get("index"))
        src = operands[0]
        if not src.is_tuple:
            raise InferError(f"get-tuple-element needs a tuple operand, got {src.to_text()}")
        if len(index) != 1 or not 0 <= index[0] < len(src.tuple_shapes):
            raise InferError(f"index={attrs.get('index')} is not an element of {src.to_text()}")
        return src.tuple_shapes[index[0]]
    if opcode == "broadcast":
        need(1)
        sizes = _ints(attrs.get("dimensions"))
        return _with(operands[0], tuple(sizes) + operands[0].dims)
    if opcode == "transpose":
        need(1)
        perm = _ints(attrs.get("dimensions"))
        s = operands[0]
        if sorted(perm) != list(range(s.rank)):
            raise InferError(f"dimensions={attrs.get('dimensions')} is not a permutation of "
                             f"the {s.rank} dimensions of {s.without_layout()}")
        return _with(s, [s.dims[p] for p in perm])
    if opcode == "reverse":
        need(1)
        return _strip(operands[0])
    if opcode == "concatenate":
        need(1)
        (dim,) = _ints(attrs.get("dimensions"))[:1] or (None,)
        if dim is None or not 0 <= dim < operands[0].rank:
            raise InferError("concatenate needs dimensions={d} naming one dimension")
        dims = list(operands[0].dims)
        dims[dim] = sum(s.dims[dim] for s in operands)
        return _with(operands[0], dims)
    if opcode == "pad":
        need(1)
        s = operands[0]
        cfg = attrs.get("padding", "")
        parts = [p for p in cfg.split("x")] if cfg else []
        if len(parts) != s.rank:
            raise InferError(f"padding={cfg} does not have one entry per dimension of "
                             f"{s.without_layout()}")
        dims = []
        for d, part in zip(s.dims, parts):
            lo, hi, *interior = (ascii_int(x) for x in part.split("_"))
            inner = interior[0] if interior else 0
            dims.append(d + lo + hi + max(d - 1, 0) * inner)
        return _with(s, dims)
    if opcode == "dot":
        need(2)
        return _dot(operands[0], operands[1], attrs)
    if opcode in ("reduce", "reduce-window"):
        need(2)
        return _reduce(opcode, operands, attrs, called)
    if opcode in ("call", "map", "conditional", "while", "sort", "scatter",
                  "select-and-scatter", "fft", "triangular-solve", "batch-norm-inference",
                  "batch-norm-training", "batch-norm-grad", "topk"):
        return _structured(opcode, operands, attrs, called)
    raise InferError(f"hloscope cannot infer the result shape of {opcode}; "
                     "write the shape before the opcode")


def _strip(s: Shape) -> Shape:
    if s.layout is None or not s.is_array:
        return s
    return Shape(s.element_type, s.dims, s.dynamic)


def _dot(lhs: Shape, rhs: Shape, attrs: Mapping[str, str]) -> Shape:
    lb, rb = _ints(attrs.get("lhs_batch_dims")), _ints(attrs.get("rhs_batch_dims"))
    lc, rc = _ints(attrs.get("lhs_contracting_dims")), _ints(attrs.get("rhs_contracting_dims"))
    for d in lb + lc:
        if not 0 <= d < lhs.rank:
            raise InferError(f"dot names dimension {d} of lhs {lhs.without_layout()}")
    for d in rb + rc:
        if not 0 <= d < rhs.rank:
            raise InferError(f"dot names dimension {d} of rhs {rhs.without_layout()}")
    dims = [lhs.dims[d] for d in lb]
    dims += [x for i, x in enumerate(lhs.dims) if i not in lb and i not in lc]
    dims += [x for i, x in enumerate(rhs.dims) if i not in rb and i not in rc]
    return Shape(lhs.element_type, tuple(dims))


def _reduce(opcode: str, operands: Sequence[Shape], attrs: Mapping[str, str],
            called: Callable[[str], Sequence[Shape] | None]) -> Shape:
    if len(operands) % 2:
        raise InferError(f"{opcode} needs an even number of operands (inputs, then inits)")
    k = len(operands) // 2
    inputs, inits = operands[:k], operands[k:]
    if opcode == "reduce":
        drop = set(_ints(attrs.get("dimensions")))
        dims = [d for i, d in enumerate(inputs[0].dims) if i not in drop]
    else:
        dims = _window_dims(inputs[0], attrs.get("window", ""))
    outs = [Shape(init.element_type, tuple(dims)) for init in inits]
    return outs[0] if k == 1 else Shape("tuple", tuple_shapes=tuple(outs))


def _window_dims(s: Shape, window: str) -> list[int]:
    try:
        return list(parse_window(window).output_dims(s.dims))
    except WindowError as e:
        raise InferError(f"window={window}: {e}") from None


def _structured(opcode: str, operands: Sequence[Shape], attrs: Mapping[str, str],
                called: Callable[[str], Sequence[Shape] | None]) -> Shape:
    def root(key: str) -> Shape:
        shapes = called(key)
        if not shapes:
            raise InferError(f"{opcode} calls no computation hloscope can see through "
                             f"{key}=; write the shape before the opcode")
        return shapes[0]

    if opcode == "call":
        return root("to_apply")
    if opcode == "map":
        r = root("to_apply")
        return Shape(r.element_type, operands[0].dims)
    if opcode == "conditional":
        key = "branch_computations" if "branch_computations" in attrs else "true_computation"
        return root(key)
    if opcode == "while":
        return operands[0]
    if opcode in ("sort", "scatter"):
        k = len(operands) if opcode == "sort" else len(operands) // 2
        outs = tuple(_strip(s) for s in operands[:k])
        return outs[0] if len(outs) == 1 else Shape("tuple", tuple_shapes=outs)
    if opcode == "select-and-scatter":
        return _strip(operands[0])
    if opcode == "triangular-solve":
        return _strip(operands[1])
    if opcode == "batch-norm-inference":
        return _strip(operands[0])
    if opcode in ("batch-norm-training", "batch-norm-grad"):
        s = operands[0]
        feature = _ints(attrs.get("feature_index"))
        f = s.dims[feature[0]] if feature and 0 <= feature[0] < s.rank else 0
        vec = Shape(s.element_type, (f,))
        return Shape("tuple", tuple_shapes=(_strip(s), vec, vec))
    if opcode == "topk":
        s = operands[0]
        k = _ints(attrs.get("k"))
        dims = s.dims[:-1] + (k[0] if k else 0,)
        return Shape("tuple", tuple_shapes=(Shape(s.element_type, dims), Shape("s32", dims)))
    if opcode == "fft":
        s = operands[0]
        kind = attrs.get("fft_type", "")
        lengths = _ints(attrs.get("fft_length"))
        if kind == "RFFT":
            dims = s.dims[:-1] + (lengths[-1] // 2 + 1,) if lengths else s.dims
            return Shape({"f32": "c64", "f64": "c128"}.get(s.element_type, "c64"), dims)
        if kind == "IRFFT":
            dims = s.dims[: len(s.dims) - len(lengths)] + tuple(lengths)
            return Shape(_COMPLEX_PART.get(s.element_type, "f32"), dims)
        return _strip(s)
    raise InferError(f"hloscope cannot infer the result shape of {opcode}")
