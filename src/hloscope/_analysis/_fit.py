"""Does it fit?  The memory a compiled program needs per device, against the device's HBM.

The need is what XLA reserves when the program runs: its arguments, its outputs
(less those aliased to arguments) and its temp allocation, from XLA's own
``memory_analysis()`` where the report has it; otherwise (or where it is larger)
hloscope's peak of live values: of the values in HBM alone when the module places some
in other memory spaces (a TPU's on-chip memory, the host), at their allocated, tile-padded
sizes.  A program that does not fit is told how much more it needs and which values
are largest at the peak, with the lines of code that made them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._repr import brief_repr
from ._memory import BufferInfo, MemoryReport

__all__ = ["HbmFit", "hbm_fit"]


@dataclass(frozen=True, slots=True)
class HbmFit:
    """`need_bytes` per device against `hbm_bytes`; `basis` says where the need comes from
    (``xla`` allocation, hloscope's ``peak``, or its ``hbm-peak``: the peak of the values in
    HBM); `largest`: the values in HBM at the peak."""

    __repr__ = brief_repr

    device: str
    hbm_bytes: int
    need_bytes: int
    basis: str
    parts: tuple[tuple[str, int], ...]
    largest: tuple[BufferInfo, ...]

    @property
    def fits(self) -> bool:
        return self.need_bytes <= self.hbm_bytes

    @property
    def spare_bytes(self) -> int:
        """HBM left over (negative: what is missing)."""
        return self.hbm_bytes - self.need_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "hbm_bytes": self.hbm_bytes,
                "need_bytes": self.need_bytes, "basis": self.basis, "fits": self.fits,
                "spare_bytes": self.spare_bytes, "parts": dict(self.parts),
                "largest": [b.to_dict() for b in self.largest]}


def hbm_fit(memory: MemoryReport, hbm_bytes: int, device: str,
            memory_analysis: Mapping[str, float] | None = None, top: int = 5,
            hbm_peak: int | None = None) -> HbmFit:
    """The fit of one device's program (an SPMD module is one device's program).
    `hbm_peak`: the most bytes live at once in HBM, for a module with other memory spaces
    (`HardwareView.spaces`); without it the peak of every value counts."""
    ma = memory_analysis or {}
    peak, peak_basis = ((hbm_peak, "hbm-peak") if hbm_peak is not None
                        else (memory.peak_bytes, "peak"))
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")
    if all(k in ma for k in keys):
        alias = int(ma.get("alias_size_in_bytes", 0))
        parts = (("arguments", int(ma[keys[0]])),
                 ("outputs", max(0, int(ma[keys[1]]) - alias)),
                 ("temp", int(ma[keys[2]])))
        need, basis = sum(b for _, b in parts), "xla"
        if peak is not None and peak > need:
            need, basis = peak, peak_basis
    else:
        parts = ()
        need, basis = peak or 0, peak_basis
    in_hbm = [b for b in memory.peak_values if not _other_space(b.shape)]
    largest = tuple(sorted(in_hbm, key=lambda b: (-b.bytes, b.label))[:top])
    return HbmFit(device, int(hbm_bytes), int(need), basis, parts, largest)


_SPACE = re.compile(r"S\(([0-9]+)\)")


def _other_space(shape: str) -> bool:
    """Whether a value's shape text places it outside HBM (``{1,0:T(8,128)S(1)}``)."""
    brace = shape.rfind("{")
    m = _SPACE.search(shape, brace) if brace >= 0 and ":" in shape[brace:] else None
    return m is not None and m.group(1) != "0"
