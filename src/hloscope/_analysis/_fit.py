"""Does it fit?  The memory a compiled program needs per device, against what the device
really gives it.

The need is what XLA allocates when the program runs (the memory report's headline,
`MemoryFigures.headline`): its arguments, its outputs (less those written into donated
arguments), its temp allocation and, on a TPU, its code, from XLA's own
``memory_analysis()`` (on a TPU whose deviceless compile reports a temp of 0, the temp
of XLA's buffer assignment); without those, hloscope's estimate of the same sum.  The
limit is the one XLA or the runtime applies (`hloscope._target._limits`: XLA's
available HBM on a TPU, JAX's allocator's share on a GPU), not the HBM printed on the
box.  A program that does not fit is told how much more it needs and which values are
largest at the peak, with the lines of code that made them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._hlo._module import Module
from .._repr import brief_repr
from ._kernels import Kernel
from ._memory import BufferInfo, MemoryReport

__all__ = ["HbmFit", "cublas_workspace", "hbm_fit", "recomputed"]


@dataclass(frozen=True, slots=True)
class HbmFit:
    """`need_bytes` per device against `limit_bytes`, the memory a program may use there
    (`limit`: where that figure comes from, in words; `hbm_bytes`: the device's HBM).
    `basis` says where the need comes from (``xla``: `memory_analysis()`; ``xla+buffer-
    assignment``: its temp from XLA's buffer assignment; ``hloscope``: hloscope's
    estimate); `parts` its terms; `aliased_bytes` the outputs written into donated
    arguments (not counted twice); `largest`: the values in HBM at the peak."""

    __repr__ = brief_repr

    device: str
    hbm_bytes: int
    need_bytes: int
    basis: str
    parts: tuple[tuple[str, int], ...]
    largest: tuple[BufferInfo, ...]
    limit_bytes: int = 0
    limit: str = ""
    aliased_bytes: int = 0
    autotune_bytes: int = 0  # a GPU compiled for without one: see `cublas_workspace`
    # The instructions XLA's rematerialization pass cloned to recompute values instead of
    # holding them (`recomputed`): the program fits this limit only by recomputing them.
    recomputed: tuple[str, ...] = ()

    @property
    def usable_bytes(self) -> int:
        """The bytes the program may use (the HBM where no limit is known)."""
        return self.limit_bytes or self.hbm_bytes

    @property
    def fits(self) -> bool:
        return self.need_bytes <= self.usable_bytes

    @property
    def spare_bytes(self) -> int:
        """Usable memory left over (negative: what is missing)."""
        return self.usable_bytes - self.need_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "hbm_bytes": self.hbm_bytes,
                "limit_bytes": self.usable_bytes, "limit": self.limit,
                "need_bytes": self.need_bytes, "basis": self.basis, "fits": self.fits,
                "spare_bytes": self.spare_bytes, "parts": dict(self.parts),
                "aliased_bytes": self.aliased_bytes, "autotune_bytes": self.autotune_bytes,
                "recomputed": list(self.recomputed),
                "largest": [b.to_dict() for b in self.largest]}


_BASIS = {"memory_analysis()": "xla",
          "memory_analysis() + XLA's buffer assignment": "xla+buffer-assignment"}


# cuBLAS's recommended workspace (NVIDIA's cuBLAS documentation, cublasSetWorkspace): 32 MiB
# from Hopper (compute capability 9) on, 4 MiB before; XLA gives each cuBLAS call such a
# workspace (an H100 compile's calls each return an s8[33554432] beside their result).
_BEFORE_HOPPER = ("a100", "v100")


def cublas_workspace(kernels: Sequence[Kernel], chip: str) -> int:
    """What a GPU program compiled for `chip` without one (no autotuning) may need beyond its
    allocation when it runs there: XLA's autotuner, which only runs on the GPU, may give
    its matmuls, compiled here as Triton fusions, to cuBLAS, whose workspace is allocated
    beside them (seen on an H100: 32 MiB more than the deviceless compile of the same
    program).  0 when the program has no matmul fusion or already calls cuBLAS."""
    if any("cublas" in k.target for k in kernels):
        return 0
    if not any(name == "dot" for k in kernels for name, _ in k.fused):
        return 0
    return (4 if chip.lower().startswith(_BEFORE_HOPPER) else 32) << 20


# XLA's rematerialization pass names each clone it makes after the instruction it
# recomputes: ``gemm_fusion_dot.309.remat``, ``.remat2`` for a second one.
_REMAT = re.compile(r"\.remat[0-9]*$")


def recomputed(module: Module) -> tuple[str, ...]:
    """The instructions XLA's rematerialization pass added to `module` to fit a memory
    limit: values recomputed before a later use instead of held from their first (on a
    GPU target, the limit is the device's; a new user's long-context model needed 58.5 GiB
    on an H100 and 129.8 GiB on a B200, as written)."""
    return tuple(i.name for c in module.computations for i in c.instructions
                 if _REMAT.search(i.name))


def hbm_fit(memory: MemoryReport, hbm_bytes: int, device: str, top: int = 5, *,
            limit_bytes: int = 0, limit: str = "", autotune_bytes: int = 0,
            recomputed: tuple[str, ...] = ()) -> HbmFit:
    """The fit of one device's program (an SPMD module is one device's program): what it
    must hold (`MemoryFigures.headline`, XLA's allocation) against `limit_bytes`, the
    memory it may use (`limit`: where that figure comes from; default all of
    `hbm_bytes`).  The need is the allocation, never a peak larger than it: XLA reserves
    the allocation, and a peak of live values above it only means that results reuse
    their operands' memory."""
    head = memory.figures.headline
    terms = dict(head.parts) if head is not None else {}
    aliased = terms.pop("aliased", 0)
    parts = tuple(terms.items())
    need = head.bytes if head is not None and head.bytes is not None else 0
    basis = _BASIS.get(head.source if head is not None else "", "hloscope")
    in_hbm = [b for b in memory.peak_values if not _other_space(b.shape)]
    largest = tuple(sorted(in_hbm, key=lambda b: (-b.bytes, b.label))[:top])
    return HbmFit(device, int(hbm_bytes), int(need), basis, parts, largest,
                  int(limit_bytes), limit, int(aliased), int(autotune_bytes), recomputed)


_SPACE = re.compile(r"S\(([0-9]+)\)")


def _other_space(shape: str) -> bool:
    """Whether a value's shape text places it outside HBM (``{1,0:T(8,128)S(1)}``)."""
    brace = shape.rfind("{")
    m = _SPACE.search(shape, brace) if brace >= 0 and ":" in shape[brace:] else None
    return m is not None and m.group(1) != "0"
