"""What the advisor's rules read: the module, its kernel graph, dataflow and live ranges,
indexed as the rules ask, and the measures a finding's saving is weighed against.

Savings are estimated on one device: a target's chip when the report has one, the
`device` given to `advise`, else one assumed from the module (a GPU module: an H100; a
TPU module: a v5e chip; a CPU module: nominal figures used only to weigh findings against
each other, never printed as times).  Kernels in a loop body count once per iteration
where XLA knows the trip count.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import Any, Callable

from .._errors import HloModelError
from .._hlo._module import Instruction, Module
from ._dataflow import Dataflow
from ._devices import DEVICES, Device, link_bandwidth
from ._findings import Evidence, Finding, Saving
from ._hardware import HardwareView, hardware_view
from ._heap import classify_buffers
from ._kernels import Edge, Kernel, KernelGraph
from ._liverange import LiveRanges
from ._sharing import compiled_for_gpu, compiled_for_tpu
from ._trips import trip_count as trip_count  # where the rules import it from

__all__ = ["AdviceContext", "Rule", "ev_inst", "ev_kernel"]

# Findings whose group saves less than this share of the program (of its peak, or of its
# estimated time) are not worth a user's attention.
MIN_SHARE = 0.01
# ... nor those that save less than this in absolute terms (a tiny test program).
MIN_PEAK_BYTES = 64 * 1024
MIN_TRAFFIC_BYTES = 256 * 1024
# ... and a saving in program size (compile time) under this many instructions.
MIN_INSTRUCTIONS = 1000
# What launching one kernel costs on a GPU, assumed (a CUDA launch or a CUDA graph node
# with its gap: a few microseconds); a GPU program's estimated time includes it.
LAUNCH_SECONDS = {"gpu": 2e-6}

# Nominal CPU figures: they weigh findings on a CPU module against each other and are
# never printed as times.
_CPU = DEVICES["cpu"]  # nominal figures, for weighing findings


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule: its id, short name (the kind of issue it finds: `kind`), title, the check,
    and whether what it finds survives XLA's optimization (only such rules run on a
    module XLA has not optimized)."""

    id: str
    name: str
    title: str
    check: Callable[[AdviceContext], list[Finding]]
    before_optimization: bool = False

    @property
    def kind(self) -> str:
        return self.name


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
        self.link_bandwidth = link_bandwidth(self.platform)
        # The values live at XLA's peak moment, each at its allocated size: XLA's own
        # live-range figure sizes them without TPU tile padding, which the rules' sizes
        # include (a padded buffer must never be many times "the peak").
        self.peak = max(lr.peak_bytes or 0, sum(v.size for v in lr.peak_values))
        # Each rule's findings once it has run (by rule id, in the rules' order): a later
        # rule whose finding has the same root cause as an earlier one stays quiet.
        self.found: dict[str, list[Finding]] = {}

    # -- indexes ----------------------------------------------------------------------
    @cached_property
    def kernels_by_name(self) -> dict[str, Kernel]:
        kernels = self.graph.kernels
        return dict(zip(map(attrgetter("name"), kernels), kernels))

    def kernel(self, name: str) -> Kernel | None:
        return self.kernels_by_name.get(name)

    @cached_property
    def edges_to(self) -> dict[str, list[Edge]]:
        return self._edges_by_end[0]

    @cached_property
    def edges_from(self) -> dict[str, list[Edge]]:
        return self._edges_by_end[1]

    @cached_property
    def _edges_by_end(self) -> tuple[dict[str, list[Edge]], dict[str, list[Edge]]]:
        """The edges by their `dst` and by their `src`, in the graph's order (one pass)."""
        to: dict[str, list[Edge]] = {}
        from_: dict[str, list[Edge]] = {}
        get_to, get_from = to.get, from_.get
        for e in self.graph.edges:
            dst, src = e.dst, e.src
            if (into := get_to(dst)) is None:
                to[dst] = [e]
            else:
                into.append(e)
            if (out := get_from(src)) is None:
                from_[src] = [e]
            else:
                out.append(e)
        return to, from_

    @cached_property
    def kernels_with(self) -> dict[str, list[Kernel]]:
        """The kernels (in the graph's order) by each operation they run: a kernel's own
        opcode and, for a fusion, each opcode fused inside it (nested fusions opened).
        Built in one pass for the rules that look only at kernels running one operation
        (a reduction, a convert)."""
        out: dict[str, list[Kernel]] = {}
        for k in self.graph.kernels:
            out.setdefault(k.opcode, []).append(k)
            for op, _n in k.fused:
                if op != k.opcode:
                    out.setdefault(op, []).append(k)
        return out

    @cached_property
    def constant_fed(self) -> list[Kernel]:
        """The kernels (in the graph's order) that read only constants and such kernels
        before them: what HS104 and HS118 look for builds among (found once for both,
        forward from the kernels that read constants alone: few in most programs)."""
        kernels = self.graph.kernels
        reads_more = {e.dst for e in self.graph.edges if e.src_kind != "constant"}
        fed = {k.name for k in kernels if k.name not in reads_more}
        if fed:
            position = {k.name: n for n, k in enumerate(kernels)}
            heap = sorted({position[e.dst] for name in fed
                           for e in self.edges_from.get(name, ()) if e.dst in position})
            seen = set(heap)
            while heap:
                n = heapq.heappop(heap)
                k = kernels[n]
                if k.name in fed or not all(
                        e.src_kind == "constant" or (e.src_kind == "kernel" and e.src in fed
                                                     and position[e.src] < n)
                        for e in self.edges_to.get(k.name, ())):
                    continue
                fed.add(k.name)
                for e in self.edges_from.get(k.name, ()):
                    m = position.get(e.dst)
                    if m is not None and m > n and m not in seen:
                        seen.add(m)
                        heapq.heappush(heap, m)
        return [k for k in kernels if k.name in fed]

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
    @property
    def repeats(self) -> dict[str, int]:
        """Runs per call of the program of each computation that runs more than once: a
        loop body's known trip count times its caller's (absent: once).  The kernel graph
        counted them (`runs_per_call`); not again here."""
        return self.graph.runs

    def runs(self, group: str) -> int:
        return self.repeats.get(group, 1)

    # -- what the program costs, and what a saving is worth -------------------------------
    @cached_property
    def total_traffic(self) -> int:
        return sum(k.bytes_accessed * self.runs(k.group) for k in self.graph.kernels)

    @cached_property
    def total_seconds(self) -> float:
        """The program's estimated time: each kernel at its roofline, a collective at the
        larger of that and its transfer at the link bandwidth (as the kernel table)."""
        total = 0.0
        seconds: dict[tuple[str, int, int, str], float] = {}  # kernels repeat a lot
        runs = self.repeats
        sent = self._sent
        for k in self.graph.kernels:
            key = (k.shape, k.flops, k.bytes_accessed, k.name if k.name in sent else "")
            t = seconds.get(key)
            if t is None:
                t = seconds[key] = self.kernel_seconds(k)
            total += t * runs.get(k.group, 1)
        return total

    @cached_property
    def _sent(self) -> dict[str, int]:
        return {c.name: c.sent_per_device or c.bytes for c in self.graph.collectives}

    def kernel_seconds(self, k: Kernel) -> float:
        t = k.roofline_seconds(self.device, k.element_type)
        return max(t, self._sent.get(k.name, 0) / self.link_bandwidth)

    @cached_property
    def footprint(self) -> int:
        """The program's device footprint as the module shows it: arguments + outputs -
        aliased + temporaries (those live at the peak), at least the peak, plus the
        constants XLA keeps in device memory for the program's life that its peak does
        not count."""
        entry = self.module.entry
        args = sum(p.shape.total_byte_size for p in entry.parameters)
        outs = entry.root.shape.total_byte_size if entry.root is not None else 0
        temp = sum(v.size for v in self.lr.peak_values if self.value_kind(v) == "temporary")
        return max(self.peak, args + outs - self.aliased_bytes + temp) + sum(
            self.constants_outside_peak.values())

    @cached_property
    def constants_outside_peak(self) -> dict[str, int]:
        """The constants of the program (by instruction name, their bytes: XLA keeps them
        in device memory for the program's life) that are not among the values live at
        the peak."""
        at_peak = {v.inst.name for v in self.lr.peak_values}
        return {inst.name: inst.shape.total_byte_size
                for comp in self.module.computations for inst in comp.instructions
                if inst.opcode == "constant" and inst.name not in at_peak}

    @cached_property
    def aliased_bytes(self) -> int:
        entry = self.module.entry
        params = entry.parameters
        total = 0
        for _out, n, idx, _kind in self.module.input_output_alias:
            if 0 <= n < len(params):
                leaves = dict(params[n].shape.leaves())
                leaf = leaves.get(tuple(idx))
                total += leaf.total_byte_size if leaf is not None else 0
        return total

    @cached_property
    def launch_seconds(self) -> float:
        """The kernels' launches on a GPU (LAUNCH_SECONDS each), 0 elsewhere."""
        each = LAUNCH_SECONDS.get(self.platform, 0.0)
        return each * sum(self.runs(k.group) for k in self.graph.kernels) if each else 0.0

    def saving(self, *, peak: int = 0, traffic: int = 0, kernels: int = 0,
               link_bytes: int = 0, seconds: float = 0.0, footprint: int = 0,
               instructions: int = 0) -> Saving:
        """A saving with its time on the context's device: `traffic` at its memory
        bandwidth, `link_bytes` at its link bandwidth, plus `seconds` given outright."""
        t = traffic / self.device.bandwidth + link_bytes / self.link_bandwidth + seconds
        return Saving(int(peak), int(traffic), int(kernels), t, int(footprint),
                      int(link_bytes), int(instructions))

    def share(self, s: Saving) -> tuple[float, str]:
        """The largest of the peak saved over the peak, the footprint saved over the
        footprint, the time saved over the program's estimated time (with its launches
        on a GPU) and the instructions saved over the program's, and which."""
        a = s.peak_bytes / self.peak if self.peak else 0.0
        f = s.footprint_bytes / self.footprint if self.footprint else 0.0
        total = self.total_seconds + self.launch_seconds
        b = s.seconds / total if total else 0.0
        n = self.module.instruction_count
        c = s.instructions / n if n else 0.0
        return max((a, "peak"), (f, "device footprint"), (b, "estimated time"),
                   (c, "instructions"), key=lambda x: x[0])

    def worth_it(self, s: Saving, min_share: float = MIN_SHARE) -> bool:
        """Whether a (group's) saving is worth a user's attention (module docstring)."""
        # Time saved on a GPU counts from one kernel launch up: less is lost among the
        # launches around it (a 4 MiB copy beside a small program's matmuls).
        timed = (s.traffic_bytes >= MIN_TRAFFIC_BYTES
                 or s.seconds >= MIN_TRAFFIC_BYTES / self.device.bandwidth) \
            and s.seconds >= LAUNCH_SECONDS.get(self.platform, 0.0)
        big = (max(s.peak_bytes, s.footprint_bytes) >= MIN_PEAK_BYTES or timed
               or s.instructions >= MIN_INSTRUCTIONS)
        return big and self.share(s)[0] >= min_share
