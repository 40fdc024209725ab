"""What the advisor's rules read: the module, its kernel graph, dataflow and live ranges,
indexed as the rules ask, and the measures a finding's saving is weighed against.

Savings are estimated on one device: a target's chip when the report has one, the
`device` given to `advise`, else one assumed from the module (a GPU module: an H100; a
TPU module: a v5e chip; a CPU module: nominal figures used only to weigh findings against
each other, never printed as times).  Kernels in a loop body count once per iteration
where XLA knows the trip count.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from .._errors import HloModelError
from .._hlo._module import Instruction, Module
from ._dataflow import Dataflow
from ._devices import DEVICES, Device
from ._findings import Evidence, Finding, Saving
from ._hardware import HardwareView, hardware_view
from ._heap import classify_buffers
from ._kernels import Edge, Kernel, KernelGraph
from ._liverange import LiveRanges
from ._sharing import compiled_for_gpu, compiled_for_tpu

__all__ = ["AdviceContext", "Rule", "ev_inst", "ev_kernel"]

# Findings whose group saves less than this share of the program (of its peak, or of its
# estimated time) are not worth a user's attention.
MIN_SHARE = 0.01
# ... nor those that save less than this in absolute terms (a tiny test program).
MIN_PEAK_BYTES = 64 * 1024
MIN_TRAFFIC_BYTES = 256 * 1024

# Nominal CPU figures: they weigh findings on a CPU module against each other and are
# never printed as times.
_CPU = DEVICES["cpu"]  # nominal figures, for weighing findings
# Bandwidth between devices, per device and direction, for collectives' time:
# NVLink 4 on H100 SXM, 900 GB/s both directions (NVIDIA H100 datasheet); TPU v5e ICI,
# 1,600 Gbps per chip (Google Cloud TPU v5e documentation); CPU: nominal.
_LINK = {"gpu": 450e9, "tpu": 200e9, "cpu": 1e10}


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule: its id, short name, title, the check, and whether what it finds survives
    XLA's optimization (only such rules run on a module XLA has not optimized)."""

    id: str
    name: str
    title: str
    check: Callable[[AdviceContext], list[Finding]]
    before_optimization: bool = False


def ev_kernel(k: Kernel) -> Evidence:
    return Evidence(k.name, "kernel", k.shape, k.bytes_out, k.op_name, k.source)


def ev_inst(i: Instruction, what: str) -> Evidence:
    loc = i.source
    return Evidence(i.name, what, str(i.shape), i.shape.total_byte_size, i.metadata.op_name,
                    str(loc) if loc else None)


class AdviceContext:
    """See the module docstring."""

    def __init__(self, module: Module, graph: KernelGraph, df: Dataflow, lr: LiveRanges,
                 device: Device | None = None, device_label: str | None = None) -> None:
        self.module = module
        self.graph = graph
        self.df = df
        self.lr = lr
        self.platform = ("tpu" if compiled_for_tpu(module) else
                         "gpu" if compiled_for_gpu(module) else "cpu")
        if device is not None:
            self.device, self.device_label = device, device_label or device.name
        elif self.platform == "tpu":
            self.device, self.device_label = DEVICES["tpu-v5e"], "a TPU v5e chip (assumed)"
        elif self.platform == "gpu":
            self.device, self.device_label = DEVICES["h100"], "an H100 (assumed)"
        else:
            self.device, self.device_label = _CPU, None
        self.link_bandwidth = _LINK[self.platform]
        self.peak = lr.peak_bytes or 0

    # -- indexes ----------------------------------------------------------------------
    @cached_property
    def kernels_by_name(self) -> dict[str, Kernel]:
        return {k.name: k for k in self.graph.kernels}

    def kernel(self, name: str) -> Kernel | None:
        return self.kernels_by_name.get(name)

    @cached_property
    def edges_to(self) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for e in self.graph.edges:
            out.setdefault(e.dst, []).append(e)
        return out

    @cached_property
    def edges_from(self) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for e in self.graph.edges:
            out.setdefault(e.src, []).append(e)
        return out

    @cached_property
    def _edges_into_group(self) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for e in self.graph.edges:
            k = self.kernels_by_name.get(e.dst)
            if k is not None:
                out.setdefault(k.group, []).append(e)
        return out

    def edges_into_group(self, group: str) -> list[Edge]:
        return self._edges_into_group.get(group, [])

    @cached_property
    def hardware(self) -> HardwareView:
        """XLA's placement on the device (async collectives, tile padding), for the rules
        that read it."""
        return hardware_view(self.module, self.df, self.lr, self.graph, top=64)

    def inst(self, k: Kernel) -> Instruction | None:
        """The instruction of kernel `k` (looked up in its own computation)."""
        try:
            return self.module.computation(k.group).by_name.get(k.name)
        except HloModelError:
            return None

    @cached_property
    def buffer_kinds(self) -> list[str]:
        return classify_buffers(self.df)

    def value_kind(self, value: Any) -> str:
        """``parameter``, ``constant``, ``output`` or ``temporary``."""
        return self.buffer_kinds[self.df.buffer_of[value.id].id]

    # -- how often each computation runs ------------------------------------------------
    @cached_property
    def repeats(self) -> dict[str, int]:
        """Runs per call of the program of each computation that holds kernels: a loop
        body's known trip count times its caller's (1 where XLA does not know it)."""
        out: dict[str, int] = {}
        entry = self.module.entry
        stack: list[tuple[Any, int]] = [(entry, 1)]
        while stack:
            comp, n = stack.pop()
            if out.get(comp.name, 0) >= n:
                continue
            out[comp.name] = n
            for inst in comp.instructions:
                if inst.opcode == "fusion":
                    continue
                times = n * trip_count(inst) if inst.opcode == "while" else n
                for c in inst.called_computations:
                    stack.append((c, times))
        return out

    def runs(self, group: str) -> int:
        return self.repeats.get(group, 1)

    # -- what the program costs, and what a saving is worth -------------------------------
    @cached_property
    def total_traffic(self) -> int:
        return sum(k.bytes_accessed * self.runs(k.group) for k in self.graph.kernels)

    @cached_property
    def total_seconds(self) -> float:
        total = 0.0
        for k in self.graph.kernels:
            total += k.roofline_seconds(self.device, k.element_type) * self.runs(k.group)
        for c in self.graph.collectives:
            total += (c.sent_per_device or c.bytes) / self.link_bandwidth * self.runs(c.group)
        return total

    def saving(self, *, peak: int = 0, traffic: int = 0, kernels: int = 0,
               link_bytes: int = 0, seconds: float = 0.0) -> Saving:
        """A saving with its time on the context's device: `traffic` at its memory
        bandwidth, `link_bytes` at its link bandwidth, plus `seconds` given outright."""
        t = traffic / self.device.bandwidth + link_bytes / self.link_bandwidth + seconds
        return Saving(int(peak), int(traffic), int(kernels), t)

    def share(self, s: Saving) -> tuple[float, str]:
        """The larger of the peak saved over the peak and the time saved over the
        program's estimated time, and which of the two it is."""
        a = s.peak_bytes / self.peak if self.peak else 0.0
        b = s.seconds / self.total_seconds if self.total_seconds else 0.0
        return (a, "peak") if a >= b else (b, "estimated time")

    def worth_it(self, s: Saving, min_share: float = MIN_SHARE) -> bool:
        """Whether a (group's) saving is worth a user's attention (module docstring)."""
        big = (s.peak_bytes >= MIN_PEAK_BYTES or s.traffic_bytes >= MIN_TRAFFIC_BYTES
               or s.seconds >= MIN_TRAFFIC_BYTES / self.device.bandwidth)
        return big and self.share(s)[0] >= min_share


def trip_count(inst: Instruction) -> int:
    """A while loop's trip count as XLA knows it (``known_trip_count``), else 1."""
    cfg = inst.backend_config
    if isinstance(cfg, dict):
        n = cfg.get("known_trip_count")
        if isinstance(n, dict):
            try:
                return max(1, int(n.get("n", 1)))
            except (TypeError, ValueError):
                return 1
    return 1
