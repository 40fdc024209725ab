"""Shapes and layouts of HLO values, and their sizes in bytes as XLA counts them.

A `Shape` is an array (element type, dimensions, optional layout), a tuple of
shapes, a token, or an opaque value.  Shapes are immutable and interned by the
parser: equal shape texts in one module share one object.

Sizes follow XLA's ``ShapeUtil::ByteSizeOf``: an array takes its element count
(padded up to its tile when the layout is tiled) times the element width, where
sub-byte types (s4, u4, f4e2m1fn, ...) take a whole byte each unless the layout
packs them (``E(4)``); a tuple is a table of pointers, 8 bytes an element; a
token takes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .._repr import clip
from ._numbers import ascii_int

__all__ = ["NUMPY_DTYPES", "PRIMITIVE_BITS", "Layout", "Shape", "parse_shape", "parse_layout"]

# Bit width of every XLA primitive type (xla_data.proto).  `pred` is stored in
# a byte.  Names are the lower-case forms the HLO printer uses.
PRIMITIVE_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8, "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4,
    "c64": 64, "c128": 128,
}

# The NumPy dtype name of each primitive type that has one (for making inputs).
NUMPY_DTYPES: dict[str, str] = {
    "pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16",
    "bf16": "bfloat16", "f32": "float32", "f64": "float64", "c64": "complex64",
    "c128": "complex128",
}
# Element types that are not arrays of numbers.
_NON_ARRAY = {"token", "opaque", "tuple"}
POINTER_BYTES = 8
UNBOUNDED = -1  # the size of a '?' dimension


@dataclass(frozen=True, slots=True)
class Layout:
    """An array layout: ``{minor_to_major:D(..)T(..)L(..)#(..)*(..)E(..)S(..)SC(..)P(..)M(..)}``.

    Only the fields XLA prints are kept.  `tiles` holds each tile's dimensions
    (``-1`` for the combine dimension ``*``); `extra` keeps, verbatim, the rare
    parts hloscope does not model (dimension level types, split configs, a
    physical shape), so that printing gives back the same text.
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()
    tail_padding_alignment: int = 1
    index_type: str = ""
    pointer_type: str = ""
    element_size_in_bits: int = 0
    memory_space: int = 0
    dynamic_shape_metadata_prefix_bytes: int = 0
    extra: str = ""

    def __str__(self) -> str:
        out = ",".join(map(str, self.minor_to_major))
        parts = []
        if self.extra:
            parts.append(self.extra)
        if self.tiles:
            parts.append(
                "T" + "".join("(" + ",".join("*" if d == -1 else str(d) for d in t) + ")"
                              for t in self.tiles)
            )
        if self.tail_padding_alignment != 1:
            parts.append(f"L({self.tail_padding_alignment})")
        if self.index_type:
            parts.append(f"#({self.index_type})")
        if self.pointer_type:
            parts.append(f"*({self.pointer_type})")
        if self.element_size_in_bits:
            parts.append(f"E({self.element_size_in_bits})")
        if self.memory_space:
            parts.append(f"S({self.memory_space})")
        if self.dynamic_shape_metadata_prefix_bytes:
            parts.append(f"M({self.dynamic_shape_metadata_prefix_bytes})")
        if parts:
            out += ":" + "".join(parts)
        return "{" + out + "}"

    def __repr__(self) -> str:
        return clip(f"Layout({str(self)!r})")


@dataclass(frozen=True, slots=True)
class Shape:
    """The shape of an HLO value.

    `element_type` is a primitive type name (``f32``, ``s4``, ``pred``, ...),
    ``"tuple"``, ``"token"`` or ``"opaque"``.  `dims` are the dimension sizes
    (the bound for a dynamic ``<=N`` dimension, ``-1`` for ``?``); `dynamic`
    flags the dynamic ones (empty when none is).  `tuple_shapes` holds a
    tuple's elements.  `is_buffer` marks the ``b(...)`` buffer form.
    """

    element_type: str
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] = ()
    is_buffer: bool = False
    _text: str = field(default="", compare=False, repr=False)
    # The hash, computed on first use: shapes are dictionary keys all over the analyses,
    # and the generated hash walks every field (the layout's too) each time.
    _hash: int = field(default=0, init=False, compare=False, repr=False)

    def __hash__(self) -> int:
        h = self._hash
        if not h:
            h = hash((self.element_type, self.dims, self.dynamic, self.layout,
                      self.tuple_shapes, self.is_buffer)) or 1
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> list[object]:
        # Pickled without the hash: a string's hash differs from one process to the next.
        return [self.element_type, self.dims, self.dynamic, self.layout, self.tuple_shapes,
                self.is_buffer, self._text, 0]

    def __setstate__(self, state: list[object]) -> None:
        for name, value in zip(_SHAPE_FIELDS, state, strict=True):
            object.__setattr__(self, name, value)

    # -- kinds ---------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_array(self) -> bool:
        return self.element_type not in _NON_ARRAY

    @property
    def is_token(self) -> bool:
        return self.element_type == "token"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_dynamic(self) -> bool:
        return any(self.dynamic)

    # -- sizes ---------------------------------------------------------------
    @property
    def num_elements(self) -> int:
        """Elements of an array (bounds for dynamic dimensions); 0 for others."""
        if not self.is_array:
            return 0
        n = 1
        for d in self.dims:
            n *= max(d, 0)
        return n

    @property
    def element_bits(self) -> int:
        """Bits an element takes in memory (packed width when the layout says E(n))."""
        if self.layout is not None and self.layout.element_size_in_bits:
            return self.layout.element_size_in_bits
        bits = PRIMITIVE_BITS.get(self.element_type, 0)
        return 8 if 0 < bits < 8 else bits

    @property
    def byte_size(self) -> int:
        """Bytes of this value's own buffer as allocated: a tiled layout (TPU) pads the
        minor dimensions up to its tile.

        For a tuple this is its pointer table, not its elements: see
        `total_byte_size` for the sum over all leaves.
        """
        if self.is_tuple:
            return POINTER_BYTES * len(self.tuple_shapes)
        if not self.is_array:
            return 0
        n = self._allocated_elements()
        bits = self.element_bits
        return (n * bits + 7) // 8

    @property
    def logical_byte_size(self) -> int:
        """Bytes as XLA's ShapeUtil::ByteSizeOf counts them: the elements alone, without
        the padding of tiled layouts (XLA's live-range peak counts these)."""
        if self.is_tuple:
            return POINTER_BYTES * len(self.tuple_shapes)
        if not self.is_array:
            return 0
        return (self.num_elements * self.element_bits + 7) // 8

    @property
    def total_byte_size(self) -> int:
        """Bytes of every array leaf, plus tuple pointer tables."""
        if self.is_tuple:
            return self.byte_size + sum(s.total_byte_size for s in self.tuple_shapes)
        return self.byte_size

    def _allocated_elements(self) -> int:
        layout = self.layout
        if layout is None or not layout.tiles or not self.dims:
            return self.num_elements
        # Pad the most-minor dimensions up to the first tile, as tiled layouts do.
        physical = [max(self.dims[i], 0) for i in reversed(layout.minor_to_major)]
        tile = layout.tiles[0]
        k = min(len(tile), len(physical))
        for j in range(1, k + 1):
            t = tile[-j]
            if t > 0:
                physical[-j] = -(-physical[-j] // t) * t
        n = 1
        for d in physical:
            n *= d
        return n

    # -- views ---------------------------------------------------------------
    def leaves(self) -> list[tuple[tuple[int, ...], Shape]]:
        """``(shape_index, array_shape)`` for every non-tuple leaf, in order."""
        if not self.is_tuple:
            return [((), self)]
        out: list[tuple[tuple[int, ...], Shape]] = []
        for i, s in enumerate(self.tuple_shapes):
            out.extend(((i, *idx), leaf) for idx, leaf in s.leaves())
        return out

    def subshape(self, index: tuple[int, ...]) -> Shape:
        s = self
        for i in index:
            s = s.tuple_shapes[i]
        return s

    def without_layout(self) -> str:
        """The shape as text without layouts (the form computation signatures use)."""
        if self.is_tuple:
            return "(" + ", ".join(s.without_layout() for s in self.tuple_shapes) + ")"
        if not self.is_array:
            return f"{self.element_type}[]"
        return f"{self.element_type}[{self._dims_text()}]"

    def _dims_text(self) -> str:
        if not self.dynamic:
            return ",".join(map(str, self.dims))
        return ",".join(
            "?" if d == UNBOUNDED else (f"<={d}" if dyn else str(d))
            for d, dyn in zip(self.dims, self.dynamic)
        )

    def __str__(self) -> str:
        if self._text:
            return self._text
        return self.to_text()

    def __repr__(self) -> str:
        return clip(f"Shape({self.to_text()!r})")

    def to_text(self) -> str:
        """Canonical text of the shape, with layouts."""
        if self.is_tuple:
            inner = "(" + ", ".join(s.to_text() for s in self.tuple_shapes) + ")"
            return f"b({inner})" if self.is_buffer else inner
        out = f"{self.element_type}[{self._dims_text()}]"
        if self.layout is not None:
            out += str(self.layout)
        return f"b({out})" if self.is_buffer else out


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------

_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_INT_RE = re.compile(r"-?[0-9]+")
_LAYOUT_FIELD_RE = re.compile(
    r"D\((?P<D>[^)]*)\)|T(?P<T>(?:\([^)]*\))+)|L\((?P<L>[0-9]+)\)|#\((?P<idx>\w+)\)"
    r"|\*\((?P<ptr>\w+)\)|E\((?P<E>[0-9]+)\)|S\((?P<S>[0-9]+)\)|SC(?P<SC>(?:\([^)]*\))+)"
    r"|M\((?P<M>[0-9]+)\)"
)

_shape_cache: dict[str, Shape] = {}
_layout_cache: dict[str, Layout] = {}


_SHAPE_FIELDS = ("element_type", "dims", "dynamic", "layout", "tuple_shapes", "is_buffer",
                 "_text", "_hash")


class ShapeSyntaxError(ValueError):
    """Raised by `parse_shape` with the offset of the problem in the text."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def parse_layout(text: str) -> Layout:
    """Parse the text inside a layout's braces (without the braces)."""
    cached = _layout_cache.get(text)
    if cached is not None:
        return cached
    head, _, rest = text.partition(":")
    head = head.strip()
    try:
        m2m = tuple(ascii_int(x) for x in head.split(",")) if head else ()
    except ValueError:
        raise ShapeSyntaxError(f"bad minor_to_major list {{{head}}} in layout", 0) from None
    kw: dict[str, object] = {}
    extra = ""
    pos = 0
    rest = rest.strip()
    while pos < len(rest):
        m = _LAYOUT_FIELD_RE.match(rest, pos)
        if m is None:
            # Something newer than hloscope knows (e.g. a physical shape P(...)):
            # keep it verbatim.
            extra += rest[pos:]
            break
        g = m.lastgroup
        v = m.group(g)  # type: ignore[arg-type]
        if g == "T":
            kw["tiles"] = tuple(
                tuple(-1 if d.strip() == "*" else ascii_int(d) for d in t.split(",") if d.strip())
                for t in re.findall(r"\(([^)]*)\)", v)
            )
        elif g == "L":
            kw["tail_padding_alignment"] = int(v)
        elif g == "idx":
            kw["index_type"] = v
        elif g == "ptr":
            kw["pointer_type"] = v
        elif g == "E":
            kw["element_size_in_bits"] = int(v)
        elif g == "S":
            kw["memory_space"] = int(v)
        elif g == "M":
            kw["dynamic_shape_metadata_prefix_bytes"] = int(v)
        else:  # D(...) and SC(...) are kept verbatim
            extra += m.group(0)
        pos = m.end()
    layout = Layout(m2m, extra=extra, **kw)  # type: ignore[arg-type]
    _layout_cache[text] = layout
    return layout


def parse_shape(text: str) -> Shape:
    """Parse a shape's text, e.g. ``f32[8,128]{1,0}`` or ``(s32[], f32[2]{0})``.

    Raises `ShapeSyntaxError` (with the offset of the problem) on bad text.
    """
    cached = _shape_cache.get(text)
    if cached is not None:
        return cached
    shape, end = _parse_shape_at(text, 0)
    if text[end:].strip():
        raise ShapeSyntaxError(f"unexpected text after shape: {text[end:]!r}", end)
    shape = _with_text(shape, text)
    if len(_shape_cache) < 200_000:
        _shape_cache[text] = shape
    return shape


def _with_text(shape: Shape, text: str) -> Shape:
    canonical = shape.to_text()
    if canonical == text:
        object.__setattr__(shape, "_text", text)
    return shape


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t":
        pos += 1
    return pos


def _parse_shape_at(text: str, pos: int, depth: int = 0) -> tuple[Shape, int]:
    if depth > 64:
        raise ShapeSyntaxError("tuple shapes nested too deeply", pos)
    pos = _skip_ws(text, pos)
    if text.startswith("b(", pos):
        inner, end = _parse_shape_at(text, pos + 2, depth + 1)
        end = _skip_ws(text, end)
        if not text.startswith(")", end):
            raise ShapeSyntaxError("expected ')' to close buffer shape b(...)", end)
        return Shape(inner.element_type, inner.dims, inner.dynamic, inner.layout,
                     inner.tuple_shapes, True), end + 1
    if text.startswith("(", pos):
        elems: list[Shape] = []
        pos = _skip_ws(text, pos + 1)
        if text.startswith(")", pos):
            return Shape("tuple"), pos + 1
        while True:
            pos = _skip_comment(text, pos)
            s, pos = _parse_shape_at(text, pos, depth + 1)
            elems.append(s)
            pos = _skip_ws(text, pos)
            if text.startswith(",", pos):
                pos += 1
                continue
            if text.startswith(")", pos):
                return Shape("tuple", tuple_shapes=tuple(elems)), pos + 1
            raise ShapeSyntaxError("expected ',' or ')' in tuple shape", pos)
    m = _ARRAY_RE.match(text, pos)
    if m is None:
        raise ShapeSyntaxError("expected a shape such as f32[8,128]{1,0}", pos)
    etype = m.group(1)
    if etype not in PRIMITIVE_BITS and etype not in _NON_ARRAY:
        raise ShapeSyntaxError(f"unknown element type {etype!r}", pos)
    dims_text = m.group(2).strip()
    dims: list[int] = []
    dyn: list[bool] = []
    if dims_text:
        for part in dims_text.split(","):
            part = part.strip()
            if part == "?":
                dims.append(UNBOUNDED)
                dyn.append(True)
            elif part.startswith("<="):
                dims.append(_int(part[2:], text, pos))
                dyn.append(True)
            else:
                dims.append(_int(part, text, pos))
                dyn.append(False)
    _check_size(etype, dims, text, pos)
    pos = m.end()
    layout = None
    if text.startswith("{", pos):
        close = text.find("}", pos)
        if close < 0:
            raise ShapeSyntaxError("layout '{' is never closed", pos)
        inner = text[pos + 1 : close]
        # A physical shape P(...) inside a layout holds braces of its own.
        while inner.count("(") > inner.count(")"):
            nxt = text.find("}", close + 1)
            if nxt < 0:
                raise ShapeSyntaxError("layout '{' is never closed", pos)
            close = nxt
            inner = text[pos + 1 : close]
        layout = parse_layout(inner)
        m2m = layout.minor_to_major
        if len(m2m) != len(dims) and etype not in _NON_ARRAY:
            raise ShapeSyntaxError(
                f"layout {{{inner}}} has {len(m2m)} dimensions "
                f"but the shape has {len(dims)}", pos)
        if m2m and sorted(m2m) != list(range(len(m2m))):
            # XLA's parser reads it, but no compile does (its verifier refuses it), and
            # every analysis of layouts would index past the dimensions.
            raise ShapeSyntaxError(
                f"layout {{{inner}}} is not an order of the dimensions 0..{len(m2m) - 1}: "
                "its minor_to_major field has an out-of-bounds or duplicate value, which "
                "XLA's verifier refuses", pos)
        pos = close + 1
    return Shape(etype, tuple(dims), tuple(dyn) if any(dyn) else (), layout), pos


def _skip_comment(text: str, pos: int) -> int:
    pos = _skip_ws(text, pos)
    while text.startswith("/*", pos):
        end = text.find("*/", pos)
        if end < 0:
            raise ShapeSyntaxError("comment '/*' is never closed", pos)
        pos = _skip_ws(text, end + 2)
    return pos


def _int(s: str, text: str, pos: int) -> int:
    if len(s) > 19:
        raise ShapeSyntaxError(f"dimension size {s[:24]}... overflows int64", pos)
    try:
        return ascii_int(s)
    except ValueError:
        raise ShapeSyntaxError(f"bad dimension size {s!r}", pos) from None


_INT64_MAX = 2**63 - 1


def _count(n: int) -> str:
    """A huge count in words (a float cannot hold some of them)."""
    return f"{n:.3g}" if n < 1 << 1000 else f"about 2^{n.bit_length() - 1}"


def _check_size(etype: str, dims: list[int], text: str, pos: int) -> None:
    """XLA refuses shapes whose element count or byte size overflows int64."""
    n = 1
    for d in dims:
        if d < -1:
            raise ShapeSyntaxError(f"negative dimension size {d}", pos)
        n *= max(d, 1)
    bits = PRIMITIVE_BITS.get(etype, 8)
    if n > _INT64_MAX or n * bits // 8 > _INT64_MAX:
        raise ShapeSyntaxError(f"the shape {text[pos:pos + 60]} has {_count(n)} elements: its size "
                               "overflows int64, and XLA refuses it", pos)


def split_shape_prefix(text: str, pos: int = 0) -> tuple[Shape, int]:
    """Parse a shape starting at `pos` in a longer text; return it and where it ends."""
    return _parse_shape_at(text, pos)
