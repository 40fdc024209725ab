"""XLA's "Temporary Size", buffer by buffer.

`memory_analysis().temp_size_in_bytes` is the size of the scratch
allocation(s) XLA's buffer assignment made for values that are neither
arguments, outputs nor constants.  Values whose live ranges do not overlap
share bytes of it, so the values listed are more than the size: each row says
where in the allocation a value sits, how long it lives and which line of the
user's code made it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._hlo._module import Module
from .._sources._xla_dumps import BufferAssignmentDump, LiveRangeDump
from ._memory import _origin

__all__ = ["TempBreakdown", "TempBuffer", "temp_breakdown"]

_TEMP_KINDS = ("preallocated-temp",)


@dataclass(frozen=True, slots=True)
class TempBuffer:
    allocation: int
    offset: int
    bytes: int
    value: str
    shape: str
    live: tuple[int, int] | None
    opcode: str
    op_name: str
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"allocation": self.allocation, "offset": self.offset, "bytes": self.bytes,
                "value": self.value, "shape": self.shape,
                "live": list(self.live) if self.live else None, "opcode": self.opcode,
                "op_name": self.op_name, "source": self.source}


@dataclass(frozen=True, slots=True)
class TempBreakdown:
    total_bytes: int
    allocations: tuple[tuple[int, int], ...]   # (index, size)
    buffers: tuple[TempBuffer, ...]

    @property
    def value_bytes(self) -> int:
        """The sum of the values' sizes (more than `total_bytes` when bytes are reused)."""
        return sum(b.bytes for b in self.buffers)

    def to_dict(self) -> dict[str, Any]:
        return {"total_bytes": self.total_bytes, "value_bytes": self.value_bytes,
                "allocations": [list(a) for a in self.allocations],
                "buffers": [b.to_dict() for b in self.buffers]}


def temp_breakdown(module: Module, ba: BufferAssignmentDump,
                   live_range: LiveRangeDump | None = None) -> TempBreakdown:
    """The values in XLA's temporary allocation(s), by allocation and offset; live ranges
    (in steps of XLA's schedule) from `live_range` or the dump's own."""
    names = {i.name: i for i in module.instructions()}
    lr = live_range or ba.live_range
    ranges = lr.ranges if lr else {}
    allocs = [a for a in ba.allocations if a.kind in _TEMP_KINDS]
    rows: list[TempBuffer] = []
    for a in allocs:
        for v in sorted(a.values, key=lambda v: (v.offset, -v.size, v.label)):
            inst_name = v.label.split("{", 1)[0]
            inst = names.get(inst_name)
            op_name, source, opcode = "", None, ""
            if inst is not None:
                o = _origin(inst)
                op_name = o.metadata.op_name
                source = str(o.source) if o.source is not None else None
                opcode = inst.opcode
            rows.append(TempBuffer(a.index, v.offset, v.size, v.label, v.shape,
                                   ranges.get(v.label), opcode, op_name, source))
    return TempBreakdown(sum(a.size for a in allocs), tuple((a.index, a.size) for a in allocs),
                         tuple(rows))
