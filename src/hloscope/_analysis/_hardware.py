"""What a module compiled for a GPU or TPU says about that hardware.

`hardware_view` reads four things off an optimized module, each a pure function of the
model and the analyses already made for it:

* **kernels by kind**: Triton kernels, cuBLAS and cuDNN calls, XLA's own fusions,
  collectives (on a GPU, what XLA chose for each matmul);
* **memory spaces**: the peak of each memory space other than the device's main memory
  (a TPU's on-chip VMEM, ``S(1)``; its scalar memory, ``S(2)``; the host, ``S(5)``, for
  offloaded values): what lives there is not in the HBM figures;
* **tile padding**: bytes a tiled layout (``{1,0:T(8,128)}`` on a TPU) adds to the
  values live at the peak, and the values that waste most (an ``f32[4096,3]`` padded to
  128 lanes takes 43 times its size);
* **async collectives**: for each ``-start``/``-done`` pair, how many kernels XLA
  scheduled between the two halves (the overlap it achieved); a pair with nothing
  between, a synchronous one, or a collective without an async form is exposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from .._hlo._module import Instruction, Module
from .._repr import brief_repr
from ._dataflow import Dataflow
from ._kernels import KernelGraph
from ._liverange import LiveRanges
from ._shapes import logical_byte_size
from ._summary import COLLECTIVE_OPCODES, fusion_kind_detail, wraps_collective

__all__ = ["AsyncPair", "HardwareView", "KindCount", "PaddedValue", "SpacePeak", "done_of",
           "hardware_view", "is_collective_start"]

_SPACE_NAMES = {1: "on-chip memory (TPU VMEM), S(1)", 2: "scalar memory (TPU SMEM), S(2)",
                5: "host memory, S(5)"}


@dataclass(frozen=True, slots=True)
class KindCount:
    """Kernels of one kind (``Triton``, ``cuBLAS``, ``cuDNN``, ``XLA fusion``, ...)."""

    __repr__ = brief_repr

    kind: str
    count: int
    detail: tuple[tuple[str, int], ...]  # (fusion kind or call target, count)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "detail": dict(self.detail)}


@dataclass(frozen=True, slots=True)
class SpacePeak:
    """The most bytes live at once in one memory space, and when."""

    __repr__ = brief_repr

    space: int
    name: str
    peak_bytes: int
    step: int
    values: int
    timeline: tuple[int, ...] = ()  # bytes its buffers hold at each step of the schedule

    def to_dict(self, points: int | None = None) -> dict[str, Any]:
        """With `points`, the timeline squeezed to at most that many buckets (the most of
        each), as ``[first step, last step, bytes]``."""
        tl: list[Any] = list(self.timeline)
        if points is not None:
            n, m = len(tl), min(len(tl), points)
            tl = [[b * n // m, max(b * n // m + 1, (b + 1) * n // m) - 1,
                   max(self.timeline[b * n // m:max(b * n // m + 1, (b + 1) * n // m)])]
                  for b in range(m)]
        return {"space": self.space, "name": self.name, "peak_bytes": self.peak_bytes,
                "step": self.step, "values": self.values, "timeline": tl}


@dataclass(frozen=True, slots=True)
class PaddedValue:
    """A value whose tiled layout makes it larger than its elements."""

    __repr__ = brief_repr

    value: str
    shape: str
    bytes: int
    logical_bytes: int
    source: str | None

    @property
    def padding_bytes(self) -> int:
        return self.bytes - self.logical_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "shape": self.shape, "bytes": self.bytes,
                "logical_bytes": self.logical_bytes, "padding_bytes": self.padding_bytes,
                "source": self.source}


@dataclass(frozen=True, slots=True)
class AsyncPair:
    """An asynchronous collective: `between` kernels run while it moves `bytes`."""

    __repr__ = brief_repr

    start: str
    done: str
    collective: str
    bytes: int
    between: int
    between_flops: int
    sync: bool
    source: str | None

    @property
    def exposed(self) -> bool:
        return self.sync or self.between == 0

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "done": self.done, "collective": self.collective,
                "bytes": self.bytes, "between": self.between,
                "between_flops": self.between_flops, "sync": self.sync,
                "exposed": self.exposed, "source": self.source}


@dataclass(frozen=True, slots=True)
class HardwareView:
    """See the module docstring.  `peak_padding_bytes`: tile padding in the values live at
    the peak; `blocking`: collectives with no async form (they hold the stream)."""

    __repr__ = brief_repr

    kernel_kinds: tuple[KindCount, ...]
    spaces: tuple[SpacePeak, ...]
    peak_padding_bytes: int
    padded: tuple[PaddedValue, ...]
    async_pairs: tuple[AsyncPair, ...]
    blocking: tuple[str, ...]

    def to_dict(self, points: int | None = None) -> dict[str, Any]:
        """`points`: see `SpacePeak.to_dict`."""
        return {"kernel_kinds": [k.to_dict() for k in self.kernel_kinds],
                "memory_spaces": [s.to_dict(points) for s in self.spaces],
                "peak_padding_bytes": self.peak_padding_bytes,
                "padded": [p.to_dict() for p in self.padded],
                "async_collectives": [a.to_dict() for a in self.async_pairs],
                "blocking_collectives": list(self.blocking)}


def _where(inst: Instruction) -> str | None:
    loc = inst.source
    return str(loc) if loc is not None else None


# -- kernels by kind -------------------------------------------------------------------

def _kind(inst: Instruction) -> tuple[str, str]:
    op = inst.opcode
    if op == "fusion":
        detail = fusion_kind_detail(inst)
        low = detail.lower()
        if "triton" in low:
            return "Triton", detail
        if "cudnn" in low:
            return "cuDNN", detail
        return "XLA fusion", detail
    if op == "custom-call":
        target = inst.custom_call_target
        low = target.lower()
        if low.startswith("__cublas"):
            return "cuBLAS", target
        if low.startswith("__cudnn"):
            return "cuDNN", target
        if "triton" in low:
            return "Triton", target
        return "library call", target
    if op in COLLECTIVE_OPCODES or (op == "async-start" and wraps_collective(inst)):
        return "collective", op
    return "other", op


def _kernel_kinds(module: Module, graph: KernelGraph) -> tuple[KindCount, ...]:
    counts: dict[str, dict[str, int]] = {}
    for k in graph.kernels:
        try:
            inst = module.computation(k.group).by_name.get(k.name)
        except Exception:  # noqa: BLE001  (a kernel outside a named computation)
            inst = None
        kind, detail = _kind(inst) if inst is not None else ("other", k.opcode)
        per = counts.setdefault(kind, {})
        per[detail] = per.get(detail, 0) + 1
    order = ["Triton", "cuBLAS", "cuDNN", "library call", "XLA fusion", "collective", "other"]
    return tuple(KindCount(kind, sum(per.values()),
                           tuple(sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))))
                 for kind in order if (per := counts.get(kind)))


# -- memory spaces ---------------------------------------------------------------------

def _spaces(df: Dataflow, lr: LiveRanges, tpu: bool) -> tuple[SpacePeak, ...]:
    """Per memory space, the bytes its buffers hold at each step and the most at once (each
    buffer once, over the span of the values that share it: an async copy's two halves are
    one buffer, at its allocated, tile-padded size).  The default space (HBM) is listed
    beside the others when a module has any; a module with none gets nothing."""
    if not any(buf.values and buf.values[0].memory_space for buf in df.buffers):
        return ()
    deltas: dict[int, list[int]] = {}
    counts: dict[int, int] = {}
    steps = lr.end_time
    for buf in df.buffers:
        if not buf.values:
            continue
        space = buf.values[0].memory_space
        spans = [lr.ranges[v.id] for v in buf.values if v.id in lr.ranges]
        if not spans:
            continue
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        diff = deltas.get(space)
        if diff is None:
            diff = deltas[space] = [0] * (steps + 2)
        diff[min(start, steps + 1)] += buf.size
        diff[min(end + 1, steps + 1)] -= buf.size
        counts[space] = counts.get(space, 0) + 1
    out = []
    for space in sorted(deltas):
        timeline = list(accumulate(deltas[space][:steps]))
        best = max(timeline, default=0)
        when = timeline.index(best) if timeline else 0
        name = _SPACE_NAMES.get(space) if (tpu or space == 5) else None
        if space == 0:
            name = "HBM, S(0)" if tpu else "device memory, S(0)"
        out.append(SpacePeak(space, name or f"memory space S({space})", best, when,
                             counts[space], tuple(timeline)))
    return tuple(out)


# -- tile padding ----------------------------------------------------------------------

def _padding(df: Dataflow, lr: LiveRanges, top: int) -> tuple[int, tuple[PaddedValue, ...]]:
    at_peak = sum(v.size - logical_byte_size(v.shape) for v in lr.peak_values
                  if v.shape.is_array)
    worst: dict[str, PaddedValue] = {}
    for v in df.values:
        shape = v.shape
        if not shape.is_array or shape.layout is None or not shape.layout.tiles:
            continue
        logical = logical_byte_size(shape)
        if v.size - logical <= max(0, logical // 4):  # under 25% is not worth a line
            continue
        key = str(shape)
        if key in worst and worst[key].padding_bytes >= v.size - logical:
            continue
        worst[key] = PaddedValue(v.label, key, v.size, logical, _where(v.inst))
    ranked = sorted(worst.values(), key=lambda p: (-p.padding_bytes, p.value))
    return at_peak, tuple(ranked[:top])


# -- async collectives -----------------------------------------------------------------

def is_collective_start(inst: Instruction) -> bool:
    op = inst.opcode
    return op in ("all-gather-start", "all-reduce-start", "collective-permute-start") or (
        op == "async-start" and wraps_collective(inst))


def done_of(start: Instruction) -> Instruction | None:
    inst = start
    for _ in range(64):
        nxt = [u for u in inst.users if u.opcode.endswith("-done") or u.opcode == "async-update"]
        if not nxt:
            return None
        inst = nxt[0]
        if inst.opcode.endswith("-done"):
            return inst
    return None


def _async_pairs(module: Module, graph: KernelGraph) -> tuple[tuple[AsyncPair, ...],
                                                              tuple[str, ...]]:
    kernels = {(k.group, k.name): k for k in graph.kernels}
    moved = {c.name: c.sent_per_device or c.bytes for c in graph.collectives}
    pairs: list[AsyncPair] = []
    blocking: list[str] = []
    wrapped = {c.name for comp in module.computations for inst in comp.instructions
               if inst.opcode == "async-start" for c in inst.called_computations}
    for comp in module.computations:
        order = {id(inst): i for i, inst in enumerate(comp.instructions)}
        for inst in comp.instructions:
            if inst.opcode in COLLECTIVE_OPCODES and not inst.opcode.endswith("-start") \
                    and inst.opcode not in ("send", "recv") and comp.name not in wrapped \
                    and (comp.name, inst.name) in kernels:
                blocking.append(inst.name)
            if not is_collective_start(inst):
                continue
            done = done_of(inst)
            if done is None or id(done) not in order:
                continue
            lo, hi = order[id(inst)], order[id(done)]
            between = [kernels[(comp.name, i.name)] for i in comp.instructions[lo + 1:hi]
                       if (comp.name, i.name) in kernels and i.opcode != "async-update"]
            inner = inst.called_computations[0].root.opcode if (
                inst.opcode == "async-start" and inst.called_computations
                and inst.called_computations[0].instructions) else inst.opcode[:-len("-start")]
            pairs.append(AsyncPair(
                inst.name, done.name, inner, moved.get(inst.name, 0), len(between),
                sum(k.flops for k in between), '"is_sync":true' in inst.attr_text,
                _where(inst)))
    return tuple(pairs), tuple(blocking)


def hardware_view(module: Module, df: Dataflow, lr: LiveRanges, graph: KernelGraph,
                  *, top: int = 5) -> HardwareView:
    """See the module docstring; `top` values of the worst tile padding are kept."""
    tpu = any(v.shape.is_array and v.shape.layout is not None and v.shape.layout.tiles
              for v in df.values[:2000])
    at_peak, padded = _padding(df, lr, top)
    pairs, blocking = _async_pairs(module, graph)
    return HardwareView(_kernel_kinds(module, graph), _spaces(df, lr, tpu), at_peak, padded,
                        pairs, blocking)
