"""What an out-of-memory report of XLA's says, put together (`oom_summary`).

A report (`_sources._oom`) lists XLA's totals and its largest buffers one by one; a user
wants to know how far over the program is, which lines of their code made what fills
the memory, and how much of it is the TPU tiles' padding.  `oom_summary` gives those:
the need and the capacity (where the report says them), the totals under the names the
rest of hloscope uses (arguments, outputs, temporaries, constants), the listed buffers
grouped by the source line XLA names (entry parameters together), and the padding with
the dimensions it pads (a minor dimension padded to the 128 lanes of a tile).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from .._hlo._shape import ShapeSyntaxError, parse_shape
from .._repr import brief_repr
from .._sources._oom import OomBuffer, OomReport

__all__ = ["OomPlace", "OomSummary", "operation", "oom_summary"]

# The GPU report's totals, under the names the rest of hloscope uses.
_GPU_PARTS = (("parameter allocation", "arguments"), ("maybe_live_out allocation", "outputs"),
              ("preallocated temp allocation", "temporaries"),
              ("constant allocation", "constants"))


@dataclass(frozen=True, slots=True)
class OomPlace:
    """The listed buffers one place made: a source line (`source`), or, where XLA names
    none, the op_name's last part; `parameters` for the program's entry parameters."""

    __repr__ = brief_repr
    source: str
    what: str  # the operation (the op_name's last part, without its parameters)
    bytes: int
    buffers: int
    parameters: bool = False

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "what": self.what, "bytes": self.bytes,
                "buffers": self.buffers, "parameters": self.parameters}


@dataclass(frozen=True, slots=True)
class OomSummary:
    """See the module docstring.  `need`: what the program needs (the GPU's total
    allocation; the TPU's used); `capacity`: what the device has for it, where the report
    says (a TPU's); `parts`: (name, bytes) in hloscope's names; `padding`: the bytes the
    listed buffers' tiles add, `padded`: (buffer, what is padded) for each."""

    __repr__ = brief_repr
    report: OomReport
    need: int | None
    capacity: int | None
    over: int | None
    parts: tuple[tuple[str, int | None], ...]
    listed: int
    places: tuple[OomPlace, ...]
    padding: int
    padded: tuple[tuple[OomBuffer, str], ...]

    def to_dict(self) -> dict[str, object]:
        return {**self.report.to_dict(), "need_bytes": self.need,
                "capacity_bytes": self.capacity, "over_bytes": self.over,
                "listed_bytes": self.listed,
                "by_source": [p.to_dict() for p in self.places],
                "padding_bytes": self.padding,
                "padded": [{"rank": b.rank, "what": what} for b, what in self.padded]}


def operation(op_name: str) -> str:
    """``jit(dot)/jit(main)/dot_general[dimension_numbers=...]`` -> ``dot_general``; the
    first of several names XLA joined with ``;``."""
    last = op_name.split(";", 1)[0].split("[", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return last or op_name[:40]


def _places(buffers: tuple[OomBuffer, ...]) -> tuple[OomPlace, ...]:
    sizes: dict[tuple[str, str, bool], list[int]] = defaultdict(list)
    for b in buffers:
        if b.parameter:
            key = ("", "arguments (entry parameters)", True)
        else:
            key = (b.source, operation(b.op_name) if b.op_name else
                   b.label.split(" ", 1)[0].lstrip("%"), False)
        sizes[key].append(b.size)
    out = [OomPlace(src, what, sum(v), len(v), param) for (src, what, param), v in sizes.items()]
    return tuple(sorted(out, key=lambda p: (-p.bytes, p.source, p.what)))


def _padded_dims(shape_text: str) -> str:
    """Which dimensions a TPU tiled layout pads: ``f32[4,128,128,9,18]{4,3,0,2,1:T(8,128)}``
    -> ``its minor dimension 18 padded to 128, the next one (9) to 8``; "" where the
    layout says no tile."""
    try:
        shape = parse_shape(shape_text.split(" ", 1)[0])
    except ShapeSyntaxError:
        return ""
    if shape.is_tuple:  # a fusion's several results: the largest tiled one
        arrays = [s for s in shape.tuple_shapes if s.layout is not None and s.layout.tiles]
        shape = max(arrays, key=lambda s: math.prod(s.dims), default=shape)
    layout = shape.layout
    if layout is None or not layout.tiles or not layout.minor_to_major:
        return ""
    tile = layout.tiles[0]
    order = layout.minor_to_major
    said = []
    for k, t in enumerate(reversed(tile)):  # the tile's last dimension is the most minor
        if k >= len(order):
            break
        d = shape.dims[order[k]]
        padded = -(-d // t) * t
        if padded != d:
            said.append((d, padded))
    if not said:
        return ""
    first = f"its minor dimension {said[0][0]} padded to {said[0][1]}"
    if len(said) > 1:
        first += f", the next one ({said[1][0]}) to {said[1][1]}"
    return first


def oom_summary(report: OomReport) -> OomSummary:
    """See the module docstring."""
    if report.kind == "gpu":
        need = report.part("total allocation")
        parts = tuple((name, report.part(key)) for key, name in _GPU_PARTS
                      if any(k == key for k, _ in report.parts))
        capacity = over = None
    else:
        need, capacity, over = report.used, report.capacity, report.exceeded
        parts = report.parts
    padded = tuple((b, _padded_dims(b.shape)) for b in report.buffers if b.padding)
    return OomSummary(report, need, capacity, over, parts,
                      sum(b.size for b in report.buffers), _places(report.buffers),
                      sum(b.padding for b in report.buffers), padded)
