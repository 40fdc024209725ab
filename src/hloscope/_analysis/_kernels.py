"""The kernel graph: what launches work, what it computes, and the arrays between kernels.

`kernel_graph` is a pure function from a `Module` to a `KernelGraph`: plain
frozen data (JSON schema ``hloscope.kernels/1``, docs/json.md).

* A *kernel* is an instruction of a control-flow computation (the entry,
  while bodies and conditions, conditional branches, called and async
  computations) that launches work: a fusion (with its kind and the
  operations fused inside), a library call (custom-call), an FFT, a sort, a
  copy or transpose, a collective, a host transfer, or any other
  computation.  Parameters, constants, bitcasts, tuples and
  get-tuple-elements launch nothing, nor do annotations (custom-calls
  such as ``Sharding``) or copies and transposes that are bitcasts
  (`_passthrough`); while, conditional and call are
  *groups* holding the kernels of the computations they run; the ``-done``
  half of an async pair is a wait.
* An *edge* is an array passed to a kernel: from another kernel (a
  temporary, or an output when it ends in the result), from the arguments,
  a constant, or a loop's state; and from the kernels to the result.  Each
  has its shape, bytes, kind and whether it is live at the memory peak.
* *Cost*: flops, transcendental operations and bytes accessed per kernel,
  estimated from shapes and opcodes (dot and convolution from their
  contracting sizes, FFTs as 5 N log2 N, elementwise one per element,
  reductions one per input element); arithmetic intensity; and, for a
  `Device`, a roofline time.
* *Collectives*: replica groups in every printed form and the bytes each
  device sends and receives (ring algorithms).
* *Emitter copies* (GPU): copies XLA's GPU emitter runs that no instruction
  stands for.  A sort works in place in its output buffer, so the emitter
  first copies each operand it reads from another buffer into the output
  (openxla/xla xla/backends/gpu/codegen/sort.cc: one device-to-device copy
  thunk per sort operand that is a fusion parameter, unless the buffer
  assignment gave both one slice; an iota operand is generated in place).
  XLA's GPU buffer sharing never gives a sort fusion's output its operand's
  buffer (the path through a sort is not elementwise:
  xla/service/gpu/buffer_sharing.cc), and hloscope's buffers agree.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, TypeVar

from .._hlo._module import Computation, Instruction, Module
from .._hlo._replica_groups import ReplicaGroupsError, parse_replica_groups
from .._repr import brief_repr, clip, number
from ._dataflow import (
    CONTROL_FLOW_OPCODES,
    Dataflow,
    Value,
    analyze_dataflow,
    control_flow_computations,
)
from ._devices import Device
from ._trips import runs_per_call
from ._heap import ELEMENTWISE_OPCODES, classify_buffers
from ._liverange import LiveRanges, compute_live_ranges
from ._passthrough import passes_through
from ._sharing import compiled_for_gpu
from ._summary import COLLECTIVE_OPCODES, async_computations, async_starts, wraps_collective
from ._shapes import elements, leaf_bytes, leaf_indices, leaves
from ._walk import operand, paused_gc
from .._hlo._numbers import is_ascii_digits
from .._hlo._window import Window, read_window
from .._hlo._shape import Shape

__all__ = [
    "CollectiveTraffic",
    "Edge",
    "EmitterCopy",
    "Group",
    "KERNELS_SCHEMA",
    "Kernel",
    "KernelGraph",
    "NOT_KERNELS",
    "gemm_contracting",
    "kernel_count",
    "kernel_graph",
    "launches_work",
    "ratio",
]

KERNELS_SCHEMA = "hloscope.kernels/1"
T = TypeVar("T")

NOT_KERNELS = frozenset({
    "parameter", "constant", "bitcast", "get-tuple-element", "tuple", "after-all",
    "add-dependency", "opt-barrier", "domain", "partition-id", "replica-id", "while",
    "conditional", "call", "all-gather-done", "all-reduce-done", "collective-permute-done",
    "async-done", "async-update", "copy-done", "send-done", "recv-done",
})
# What moves data between devices and launches work (send and recv: `_category`).
_COLLECTIVES = COLLECTIVE_OPCODES - {"send", "recv"}
_HOST = frozenset({"infeed", "outfeed"})
HOST_MEMORY_SPACE = 5  # XLA's Layout::kHostMemorySpace: S(5) in a layout
_TRANSCENDENTAL = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "sine", "cosine", "tan",
    "tanh", "logistic", "rsqrt", "sqrt", "cbrt", "power", "erf", "atan2",
})
_NOT_COUNTED = frozenset({"parameter", "tuple", "get-tuple-element", "bitcast"})
_HUGE_COUNT = int(1.7976931348623157e308)


def launches_work(inst: Instruction) -> bool:
    """Whether `inst` is a kernel: not one of `NOT_KERNELS`, and not an instruction that
    moves no data (an annotation, a copy or transpose that is a bitcast: `_passthrough`)."""
    return inst.opcode not in NOT_KERNELS and not passes_through(inst)


@dataclass(frozen=True, slots=True)
class Group:
    """A computation run by a while, conditional, call or async instruction."""

    name: str
    kind: str          # "while body", "while condition", "branch N", "call", "async"
    caller: str        # the instruction that runs it
    parent: str        # the computation the caller is in
    inputs: tuple[tuple[str, str], ...] = ()  # (src_kind, name) of what the caller reads

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "caller": self.caller,
                "parent": self.parent, "inputs": [list(i) for i in self.inputs]}


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel (see the module docstring).  `fused` counts the operations inside a
    fusion (nested fusions included); `group` is the computation it runs in."""

    __repr__ = brief_repr

    name: str
    category: str      # fusion, library call, fft, sort, copy, transpose, collective, ...
    opcode: str
    fusion_kind: str
    target: str        # the custom-call target
    group: str
    shape: str
    bytes_out: int
    bytes_accessed: int
    flops: int
    transcendentals: int
    fused: tuple[tuple[str, int], ...]
    op_name: str
    source: str | None

    @property
    def intensity(self) -> float:
        return ratio(self.flops, self.bytes_accessed)

    @property
    def element_type(self) -> str:
        """The element type of its (first) result: ``f32`` of ``(f32[8], s32[])``."""
        return self.shape.split("[", 1)[0].lstrip("(")

    def roofline_seconds(self, dev: Device, element_type: str = "f32") -> float:
        compute = ratio(self.flops, dev.peak_flops(element_type))
        memory = ratio(self.bytes_accessed, dev.bandwidth)
        return max(compute, memory)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "category": self.category, "opcode": self.opcode,
                "fusion_kind": self.fusion_kind or None, "target": self.target or None,
                "group": self.group, "shape": self.shape, "bytes_out": self.bytes_out,
                "bytes_accessed": self.bytes_accessed, "flops": self.flops,
                "transcendentals": self.transcendentals,
                "intensity": round(self.intensity, 4), "fused": dict(self.fused),
                "op_name": self.op_name, "source": self.source}


@dataclass(frozen=True, slots=True)
class Edge:
    """An array passed from `src` to `dst`.  `src` is a kernel name, or ``argument``,
    ``constant`` or ``loop state`` (with `src_detail` naming it); `dst` is a kernel name
    or ``result``."""

    __repr__ = brief_repr

    src: str
    src_kind: str      # kernel, argument, constant, loop state
    dst: str
    value: str
    shape: str
    bytes: int
    kind: str          # argument, temporary, output, constant
    live_at_peak: bool

    def to_dict(self) -> dict[str, Any]:
        return {"src": self.src, "src_kind": self.src_kind, "dst": self.dst,
                "value": self.value, "shape": self.shape, "bytes": self.bytes,
                "kind": self.kind, "live_at_peak": self.live_at_peak}


@dataclass(frozen=True, slots=True)
class CollectiveTraffic:
    """A collective: who takes part and what each device sends and receives."""

    __repr__ = brief_repr

    name: str
    opcode: str
    group: str
    shape: str
    bytes: int
    replica_groups: str | None
    groups: tuple[tuple[int, ...], ...]
    group_size: int
    sent_per_device: int
    received_per_device: int
    op_name: str
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "opcode": self.opcode, "group": self.group,
                "shape": self.shape, "bytes": self.bytes, "replica_groups": self.replica_groups,
                "groups": [list(g) for g in self.groups], "group_size": self.group_size,
                "sent_per_device": self.sent_per_device,
                "received_per_device": self.received_per_device,
                "op_name": self.op_name, "source": self.source}


@dataclass(frozen=True, slots=True)
class EmitterCopy:
    """A copy XLA's GPU emitter runs before the sort `kernel` (see the module docstring):
    its operand `operand` (`value`, `bytes`) copied into its output, where it sorts."""

    kernel: str
    operand: int
    value: str
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "operand": self.operand, "value": self.value,
                "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class KernelGraph:
    """What `hloscope kernels` shows for one module.  See docs/json.md for each field."""

    module: str
    file: str
    kernels: tuple[Kernel, ...]
    edges: tuple[Edge, ...]
    groups: tuple[Group, ...]
    collectives: tuple[CollectiveTraffic, ...]
    peak_bytes: int | None
    emitter_copies: tuple[EmitterCopy, ...] = ()
    # The values live at the peak at their allocated size (TPU tiles padded), where that
    # is more than `peak_bytes` (XLA's live-range peak sizes them unpadded); else None.
    peak_allocated_bytes: int | None = None
    # Runs per call of the program of each group that runs more than once (a loop body:
    # its trip count, as XLA knows it or its counter says, times its caller's).
    runs: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    # The kernels of each group, filled on the first `kernels_in` (a loop per group would
    # make a module of many loops quadratic).
    _by_group: dict[str, tuple[Kernel, ...]] = field(default_factory=dict, init=False,
                                                     repr=False, compare=False)
    # What `_passed` found, made on its first call (a walk over every edge).
    _passed_of: dict[str, int] = field(default_factory=dict, init=False, repr=False,
                                       compare=False)

    def __repr__(self) -> str:
        return clip(f"KernelGraph({self.module!r}: {len(self.kernels):,} kernels, "
                    f"{len(self.edges):,} edges, {len(self.collectives):,} collectives, "
                    f"peak {number(self.peak_bytes)} B)")

    def _passed(self) -> dict[str, int]:
        seen = self._passed_of
        if not seen:
            for e in self.edges:
                if e.src_kind in ("kernel", "loop state") and e.dst != "result" \
                        and e.kind not in ("argument", "constant"):
                    seen[e.value] = e.bytes
        return seen

    def runs_of(self, group: str) -> int:
        """How many times the kernels of `group` run per call of the program."""
        return self.runs.get(group, 1)

    @property
    def per_run(self) -> tuple[int, int]:
        """(flops, bytes accessed) per call of the program: each kernel as many times as
        its group runs (the totals of `to_dict` count each kernel once)."""
        runs = self.runs
        return (sum(k.flops * runs.get(k.group, 1) for k in self.kernels),
                sum(k.bytes_accessed * runs.get(k.group, 1) for k in self.kernels))

    @property
    def temporaries(self) -> tuple[str, ...]:
        """Arrays one kernel writes to memory for another to read (a loop's state included)."""
        return tuple(self._passed())

    @property
    def temporary_bytes(self) -> int:
        return sum(self._passed().values())

    def kernels_in(self, group: str) -> tuple[Kernel, ...]:
        by_group = self._by_group
        if not by_group and self.kernels:
            lists: dict[str, list[Kernel]] = {}
            for k in self.kernels:
                lists.setdefault(k.group, []).append(k)
            by_group.update((g, tuple(ks)) for g, ks in lists.items())
        return by_group.get(group, ())

    def to_dict(self) -> dict[str, Any]:
        return {"module": self.module, "file": self.file,
                "kernel_count": len(self.kernels), "temporaries": list(self.temporaries),
                "temporary_bytes": self.temporary_bytes, "peak_bytes": self.peak_bytes,
                "peak_allocated_bytes": self.peak_allocated_bytes,
                "runs": dict(sorted(self.runs.items())),
                "flops_per_run": self.per_run[0], "bytes_accessed_per_run": self.per_run[1],
                "flops": sum(k.flops for k in self.kernels),
                "bytes_accessed": sum(k.bytes_accessed for k in self.kernels),
                "kernels": [k.to_dict() for k in self.kernels],
                "edges": [e.to_dict() for e in self.edges],
                "groups": [g.to_dict() for g in self.groups],
                "collectives": [c.to_dict() for c in self.collectives],
                "emitter_copies": [c.to_dict() for c in self.emitter_copies]}


# ---------------------------------------------------------------------------


def ratio(a: float, b: float) -> float:
    """a / b, 0 when b is 0, infinite when too large for a float (an absurd shape)."""
    if not b:
        return 0.0
    try:
        return a / b
    except OverflowError:
        return math.inf


def _category(inst: Instruction, gpu: bool = False) -> str:
    op = inst.opcode
    if op == "fusion":
        if _fused_collective(inst) is not None:
            return "collective"  # a TPU's collective fusion (all-gather, all-reduce-scatter)
        return "copy" if gpu and _is_memcpy_fusion(inst) else "fusion"
    if op == "custom-call":
        return "library call"
    if op in _COLLECTIVES or (op == "async-start" and wraps_collective(inst)):
        return "collective"
    if op in ("send", "recv"):  # to another device, unless XLA marks it the host's
        return "host transfer" if inst.attr("is_host_transfer") == "true" else "collective"
    if op == "copy-start":  # a copy to or from host memory, or within the device
        return "host transfer" if _touches_host_memory(inst) else "copy"
    if op in _HOST:
        return "host transfer"
    if op in ("fft", "sort", "copy", "transpose"):
        return op
    if op in ("dot", "convolution"):
        return "matmul" if op == "dot" else "convolution"
    if op in ("reduce", "reduce-window", "scatter", "gather", "select-and-scatter"):
        return op
    return "op"


def _touches_host_memory(inst: Instruction) -> bool:
    """Whether a copy-start's source or destination is in host memory (``S(5)``): a
    host offload, not a copy within the device (a TPU's prefetch into ``S(1)``)."""
    try:
        shapes = [inst.shape] + [o.shape for o in inst.operands]
    except KeyError:  # an operand the computation does not define: its result alone
        shapes = [inst.shape]
    return any(leaf.layout is not None and leaf.layout.memory_space == HOST_MEMORY_SPACE
               for s in shapes for _, leaf in s.leaves())


def _fused_collective(inst: Instruction) -> Instruction | None:
    """The collective a fusion runs (TPU's async collective fusions hold one), if any."""
    try:
        stack = list(inst.called_computations)
    except Exception:  # an unresolvable callee: no collective known
        return None
    while stack:
        for i in stack.pop().instructions:
            if i.opcode in COLLECTIVE_OPCODES:
                return i
            if i.opcode == "fusion":
                stack.extend(i.called_computations)
    return None




def _is_memcpy_fusion(inst: Instruction) -> bool:
    """Whether XLA's GPU emitter runs the fusion `inst` as a memcpy (a copy thunk, no
    kernel): a loop fusion that copies, or slices one contiguous run of, a parameter in
    its own layout (XLA's `wrapped_slice` of a 1-D buffer, seen as ``kCopy`` in the
    compiler's thunk sequence)."""
    if inst.fusion_kind != "kLoop" or not inst.called_computations:
        return False
    root = inst.called_computations[0].root
    if root.opcode not in ("slice", "copy") or root.shape.is_tuple:
        return False
    src = root.computation.by_name.get(root.operand_names[0]) if root.operand_names else None
    if src is None or src.opcode != "parameter":
        return False
    out, arg = root.shape, src.shape
    if out.element_type != arg.element_type or len(out.dims) != len(arg.dims):
        return False
    order = (arg.layout.minor_to_major if arg.layout is not None and arg.layout.minor_to_major
             else tuple(range(len(arg.dims) - 1, -1, -1)))
    if (out.layout.minor_to_major if out.layout is not None and out.layout.minor_to_major
            else tuple(range(len(out.dims) - 1, -1, -1))) != order:
        return False
    if root.opcode == "slice":
        bounds = root.slice_bounds
        if len(bounds) != len(arg.dims) or any(st != 1 for _, _, st in bounds):
            return False
    # Contiguous: whole dimensions from the most minor up to one partial one, then size 1.
    partial = False
    for d in order:
        if partial and out.dims[d] != 1:
            return False
        if out.dims[d] != arg.dims[d]:
            partial = True
    return True


def _holes(window: Window | None) -> int:
    """How many of a convolution's kernel taps meet a hole of its dilated input, per tap
    that meets an element: ``lhs_dilate=d`` puts d - 1 holes between the input's elements,
    so a window of w taps meets ceil(w / d) of them (a TPU's batched matmul lowered as a
    convolution dilates its batch dimensions: window 512, lhs_dilate 512, one tap each)."""
    return max(window.elements // max(window.taps_met, 1), 1) if window is not None else 1


def _op_flops(inst: Instruction) -> tuple[int, int]:
    """(flops, transcendentals) of one instruction, from its shapes."""
    op = inst.opcode
    out = elements(inst.shape)
    if op in _TRANSCENDENTAL:
        return out, out
    if op in ELEMENTWISE_OPCODES and op not in ("copy", "convert", "bitcast-convert"):
        return out, 0
    if op == "dot":
        lhs = operand(inst, 0).shape if inst.operand_names else None
        dims = inst.attr("lhs_contracting_dims")
        k = 1
        if lhs is not None and dims:
            for d in dims.strip("{}").split(","):
                if is_ascii_digits(d.strip()) and int(d) < len(lhs.dims):
                    k *= max(lhs.dims[int(d)], 1)
        return 2 * out * k, 0
    if op == "convolution" and len(inst.operand_names) >= 2:
        return _conv_flops(inst, out, operand(inst, 1).shape), 0
    if op in ("reduce-window", "select-and-scatter"):
        # One op per window tap that meets the input, per output element (reduce-window)
        # or per element of the source it scatters (select-and-scatter selects over its
        # window, then adds the source element into the selected one).
        window = read_window(inst.attr("window"))
        taps = window.taps_met if window is not None else 1
        if op == "reduce-window":
            return out * taps, 0
        source = elements(operand(inst, 1).shape) if len(inst.operand_names) > 1 else 0
        return source * (taps + 1), 0
    if op in ("reduce", "reduce-scatter", "all-reduce", "all-reduce-start",
              "cross-replica-sum"):
        src = operand(inst, 0).shape if inst.operand_names else inst.shape
        return elements(src), 0
    if op == "fft":
        lengths = inst.attr("fft_length") or ""
        n = 1
        for x in lengths.strip("{}").split(","):
            if is_ascii_digits(x.strip()):
                n *= int(x)
        total = max(elements(operand(inst, 0).shape), out) if inst.operand_names else out
        batch = max(total // max(n, 1), 1)
        return _count(lambda: 5 * n * math.log2(n) * batch) if n > 1 else 0, 0
    if op == "sort":
        d = operand(inst, 0).shape.dims if inst.operand_names else ()
        dim = inst.dimensions[0] if inst.dimensions else (len(d) - 1)
        n = d[dim] if 0 <= dim < len(d) else 1
        return _count(lambda: out * math.log2(n)) if n > 1 else 0, 0
    if op == "custom-call":
        t = inst.custom_call_target.lower()
        res = inst.shape.tuple_shapes[0] if inst.shape.is_tuple and inst.shape.tuple_shapes \
            else inst.shape
        if ("gemm" in t or "matmul" in t) and len(inst.operand_names) >= 2:
            return 2 * elements(res) * _gemm_contracted(inst, operand(inst, 0).shape), 0
        if t.startswith("__cudnn$conv") and len(inst.operand_names) >= 2:
            # XLA:GPU's convolutions keep the forward convolution's window and dim_labels;
            # its shapes are (input, filter, output) as GpuHloCostAnalysis reads them:
            # forward (operand 0, operand 1, result), backward input (result, operand 1,
            # operand 0), backward filter (operand 0, result, operand 1)
            if "backwardfilter" in t:
                return _conv_flops(inst, elements(operand(inst, 1).shape), res), 0
            if "backwardinput" in t:
                return _conv_flops(inst, elements(operand(inst, 0).shape),
                                   operand(inst, 1).shape), 0
            return _conv_flops(inst, elements(res), operand(inst, 1).shape), 0
    return 0, 0


def gemm_contracting(inst: Instruction, side: int) -> tuple[int, ...] | None:
    """The dimensions XLA:GPU's GEMM custom-call `inst` contracts on operand `side`, as its
    backend config's `gemm_backend_config.dot_dimension_numbers` names them; None where
    it names none."""
    config = inst.backend_config
    gemm = config.get("gemm_backend_config") if isinstance(config, dict) else None
    numbers = gemm.get("dot_dimension_numbers") if isinstance(gemm, dict) else None
    dims = numbers.get("lhs_contracting_dimensions" if side == 0 else
                       "rhs_contracting_dimensions") if isinstance(numbers, dict) else None
    if not isinstance(dims, list) or not dims:
        return None
    out = []
    for d in dims:
        if isinstance(d, int) or (isinstance(d, str) and is_ascii_digits(d)):
            out.append(int(d))
    return tuple(out)


def _gemm_contracted(inst: Instruction, lhs: Shape) -> int:
    """The contracted size of a GEMM custom-call: the product of the left-hand side's
    contracting dimensions (`gemm_contracting`; the last dimension where the config names
    none: cuBLAS's own layout; a gradient's GEMM contracts dimension 0)."""
    dims = gemm_contracting(inst, 0)
    if dims is None:
        return lhs.dims[-1] if lhs.dims else 1
    k = 1
    for i in dims:
        if 0 <= i < len(lhs.dims):
            k *= max(lhs.dims[i], 1)
    return k


def _conv_flops(inst: Instruction, out: int, kernel_shape: Shape) -> int:
    """A convolution's flops: 2 per tap of its kernel that meets the input, for each
    element of its output (`out` elements; `kernel_shape`, the filter's): the taps per
    output element are the kernel's elements over its output features (``dim_labels``,
    LHS_RHS->OUT, e.g. ``b01f_01io->b01f``: the kernel's labels are RHS)."""
    lhs_rhs = (inst.attr("dim_labels") or "").split("->", 1)[0]
    kernel = lhs_rhs.split("_", 1)[1] if "_" in lhs_rhs else ""
    o_pos = kernel.find("o")
    dims = kernel_shape.dims
    out_features = dims[o_pos] if 0 <= o_pos < len(dims) else 1
    per_output = elements(kernel_shape) // max(out_features, 1)
    return 2 * out * per_output // _holes(read_window(inst.attr("window")))


def _count(estimate: Callable[[], float]) -> int:
    """An operation count computed in floating point, as an int; counts of absurd shapes,
    too large for a float, are capped at the largest float."""
    try:
        return int(estimate())
    except OverflowError:
        return _HUGE_COUNT


class _FusedCosts:
    """What each fused computation holds (opcodes, flops, transcendentals, the fused
    computations nested in it), counted once however many fusions call it."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self._own: dict[str, tuple[Counter[str], int, int, tuple[str, ...]]] = {}
        self._reads: dict[str, dict[int, int]] = {}

    def _computation(self, name: str) -> tuple[Counter[str], int, int, tuple[str, ...]]:
        hit = self._own.get(name)
        if hit is None:
            ops: Counter[str] = Counter()
            flops = trans = 0
            nested: list[str] = []
            for i in self.module.computation(name).instructions:
                if i.opcode == "fusion":
                    nested.extend(i.called_computation_names)
                    continue
                if i.opcode in _NOT_COUNTED:
                    continue
                ops[i.opcode] += 1
                a, b = _op_flops(i)
                flops += a
                trans += b
            hit = self._own[name] = (ops, flops, trans, tuple(nested))
        return hit

    def reads(self, inst: Instruction) -> dict[int, int]:
        """The bytes fusion `inst` reads of each operand (by operand index) that it does not
        read whole: one whose parameter is only sliced inside (`slice`, `dynamic-slice`, the
        buffer a `dynamic-update-slice` writes in place), as XLA's cost analysis counts it
        (`FusionParameterReadBytes`, xla/service/hlo_cost_analysis.cc): a scan's step
        reads one slice of its stacked input, not all of it."""
        names = inst.called_computation_names
        if len(names) != 1:
            return {}
        hit = self._reads.get(names[0])
        if hit is None:
            hit = self._reads[names[0]] = _sliced_reads(self.module.computation(names[0]))
        return hit

    def written(self, inst: Instruction) -> int:
        """The bytes fusion `inst` writes: its result, or where its root is a
        `dynamic-update-slice` (a buffer updated in place) the update alone, as XLA's cost
        analysis counts it."""
        names = inst.called_computation_names
        if len(names) == 1:
            root = self.module.computation(names[0]).root
            if root.opcode == "dynamic-update-slice" and len(root.operand_names) > 1:
                return leaf_bytes(root.computation.by_name[root.operand_names[1]].shape)
        return leaf_bytes(inst.shape)

    def __call__(self, inst: Instruction) -> tuple[Counter[str], int, int]:
        """Opcodes inside fusion `inst` (nested fusions opened), its flops and transcendentals."""
        ops: Counter[str] = Counter()
        flops = trans = 0
        stack = list(inst.called_computation_names)
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            own, a, b, nested = self._computation(name)
            ops.update(own)
            flops += a
            trans += b
            stack.extend(reversed(nested))
        return ops, flops, trans


_SLICING = frozenset({"slice", "dynamic-slice"})


def _sliced_reads(comp: Computation) -> dict[int, int]:
    """Parameter number -> bytes read, for each parameter of fused computation `comp` read
    only through slices (see `_FusedCosts.reads`)."""
    out: dict[int, int] = {}
    for p in comp.parameters:
        users = p.users
        if not users:
            continue
        size = 0
        for u in users:
            first = u.operand_names[:1] == (p.name,)
            if u.opcode in _SLICING and first and p.name not in u.operand_names[1:]:
                size += leaf_bytes(u.shape)
            elif u.opcode == "dynamic-update-slice" and first and len(u.operand_names) > 1 \
                    and p.name not in u.operand_names[1:]:
                size += leaf_bytes(comp.by_name[u.operand_names[1]].shape)
            else:
                break
        else:
            full = leaf_bytes(p.shape)
            if size < full:
                out[p.parameter_number] = size
    return out


def _groups(module: Module, comps: list[Computation]) -> list[Group]:
    """The computations run by loops, branches, calls and async ops, each once (where it is
    first run, in printed order), each under a computation already listed or the entry."""
    names = {c.name for c in comps}
    every = {c.name: c for c in module.computations}
    out: list[Group] = []
    for comp in comps:
        for inst in comp.instructions:
            if inst.opcode not in CONTROL_FLOW_OPCODES:
                continue
            if inst.opcode == "while":
                for key, kind in (("condition", "while condition"), ("body", "while body")):
                    v = (inst.attr(key) or "").lstrip("%")
                    if v in names:
                        out.append(Group(v, kind, inst.name, comp.name))
            elif inst.opcode == "conditional":
                for j, n in enumerate(inst.called_computation_names):
                    if n in names:
                        out.append(Group(n, f"branch {j}", inst.name, comp.name))
            elif inst.opcode in ("call", "async-start"):
                for n in inst.called_computation_names:
                    if n in names:
                        out.append(Group(n, "call" if inst.opcode == "call" else "async",
                                         inst.name, comp.name))
                    elif inst.opcode == "async-start" and n in every:
                        # The one op the start runs (not a kernel graph computation) is
                        # a call (``call-start``): what it calls runs under the start.
                        out.extend(Group(m, "async", inst.name, comp.name)
                                   for op in every[n].instructions
                                   if op.opcode == "call"
                                   for m in op.called_computation_names if m in names)
    seen: set[str] = {module.entry.name}
    uniq = []
    for g in out:
        if g.name not in seen:
            seen.add(g.name)
            uniq.append(g)
    return uniq


# Starts whose tuple holds their operands first (aliased: the operands' own buffers), then
# what they write: async-start ((operands), result, context), all-gather-start (operand,
# result), collective-permute-start (operand, result, context).
_OPERANDS_FIRST = frozenset({"async-start", "all-gather-start", "collective-permute-start"})


def _written_by(inst: Instruction) -> int:
    """The bytes `inst` writes: its result's arrays, less a start's operands, which its
    tuple holds in their own buffers (an all-to-all-start of 8 GiB wrote 16 GiB before)."""
    shape = inst.shape
    if inst.opcode in _OPERANDS_FIRST and shape.is_tuple and len(shape.tuple_shapes) >= 2:
        return sum(leaf_bytes(t) for t in shape.tuple_shapes[1:])
    return leaf_bytes(shape)


def _traffic(start: Instruction, group: str) -> CollectiveTraffic:
    # An async-start's traffic is its collective's (the root of the computation it runs).
    inst = start
    if start.opcode == "async-start" and start.called_computations:
        inst = start.called_computations[0].root
    elif start.opcode == "fusion":
        inst = _fused_collective(start) or start
    op = inst.opcode
    text = inst.attr("replica_groups")
    try:
        groups = parse_replica_groups(text) if text else ()
    except (ReplicaGroupsError, ValueError):  # unreadable groups: all devices, one group
        groups = ()
    module = inst.computation.module
    n = len(groups[0]) if groups else max(module.num_partitions, module.replica_count, 1)
    if op == "collective-permute" or op == "collective-permute-start":
        pairs = inst.attr("source_target_pairs") or ""
        n = 2 if pairs else n
    out_shape = inst.shape
    if op.endswith("-start") and out_shape.is_tuple and out_shape.tuple_shapes:
        out_shape = out_shape.tuple_shapes[-1] if op != "all-reduce-start" else out_shape
    out_bytes = out_shape.total_byte_size if not out_shape.is_tuple else sum(
        leaf.byte_size for _, leaf in out_shape.leaves())
    in_bytes = sum(operand(inst, i).shape.total_byte_size for i in range(len(inst.operand_names)))
    frac = (n - 1) / n if n > 1 else 0.0
    if op in ("all-gather", "all-gather-start"):
        sent = recv = int(out_bytes * frac)
    elif op == "reduce-scatter":
        sent = recv = int(in_bytes * frac)
    elif op in ("all-reduce", "all-reduce-start", "cross-replica-sum"):
        sent = recv = int(2 * in_bytes * frac)
    elif op in ("all-to-all", "ragged-all-to-all"):
        sent = recv = int(in_bytes * frac)
    elif op in ("collective-permute", "collective-permute-start", "collective-broadcast"):
        sent = recv = in_bytes
    else:
        sent = recv = out_bytes
    loc = start.source
    # An async-start XLA printed as `all-to-all-start` is named so, with its collective's
    # result shape (not the async tuple of operands, result and context).
    shown = str(out_shape) if start.opcode == "async-start" and inst is not start \
        else str(start.shape)
    return CollectiveTraffic(start.name, start.sugar or start.opcode, group, shown, out_bytes,
                             text, groups, n, sent, recv, start.metadata.op_name,
                             str(loc) if loc else None)


def kernel_count(module: Module) -> int:
    """How many kernels `kernel_graph` finds in `module`, in one cheap pass (no dataflow):
    what a command that refuses large graphs checks before doing any work."""
    wrappers = async_computations(module)
    return sum(1 for comp in control_flow_computations(module) if comp.name not in wrappers
               for inst in comp.instructions if launches_work(inst))


def kernel_graph(module: Module, *, df: Dataflow | None = None,
                 lr: LiveRanges | None = None) -> KernelGraph:
    """The kernels of `module`, the arrays between them, their cost and the collectives."""
    with paused_gc():
        df = df if df is not None else analyze_dataflow(module)
        lr = lr if lr is not None else compute_live_ranges(df)
        return _Builder(module, df, lr).build()


class _Builder:
    """Builds one `KernelGraph` (see `kernel_graph`)."""

    def __init__(self, module: Module, df: Dataflow, lr: LiveRanges) -> None:
        self.module = module
        self.df = df
        self.lr = lr
        self.kinds = classify_buffers(df)
        self.peak_ids = {v.id for v in lr.peak_values}
        self.entry = module.entry
        self.fused = _FusedCosts(module)
        # Computations async-starts run (one op each): the start is the kernel.
        self.starts = async_starts(module)
        self.wrappers = frozenset(self.starts)
        self.gpu = compiled_for_gpu(module)
        self.same_ints: dict[int, int] = {}

    def source_of(self, v: Value) -> tuple[str, str]:
        """(name, kind) of where a value comes from: a kernel, an argument, ..."""
        inst = v.inst
        start = self.starts.get(inst.computation.name) if self.starts else None
        if start is not None:  # made by the op an async-start runs: the start's kernel
            return start.name, "kernel"
        if launches_work(inst):
            return inst.name, "kernel"
        if inst.opcode == "parameter" and inst.computation is self.entry:
            return inst.name, "argument"
        if inst.opcode == "constant":
            return inst.name, "constant"
        if v.is_phi or inst.opcode in ("parameter", "while", "conditional"):
            return inst.name, "loop state"
        return inst.name, "other"

    def edge(self, v: Value, dst: str) -> Edge:
        src, src_kind = self.source_of(v)
        kind = self.kinds[self.df.buffer_of[v.id].id]
        return _make_edge(src, src_kind, dst, v.label, str(v.shape), v.size,
                          "argument" if kind == "parameter" else kind, v.id in self.peak_ids)

    def kernel(self, inst: Instruction, comp: Computation) -> tuple[Kernel, list[Edge]]:
        """The kernel `inst` and the arrays passed to it (each value once)."""
        if inst.opcode == "fusion":
            fused, flops, trans = self.fused(inst)
            ops = tuple(sorted(fused.items(), key=lambda kv: (-kv[1], kv[0])))
        else:
            ops = ()
            flops, trans = _op_flops(inst)
        edges: list[Edge] = []
        seen_vals: set[int] = set()
        in_bytes = 0
        values_at = self.df.values_at
        names = inst.operand_names
        # Operands a fusion only slices (each passed once): the bytes it reads of them.
        # (An index past the operands: a fusion calling a computation of more parameters.)
        sliced = {names[i]: b for i, b in self.fused.reads(inst).items()
                  if i < len(names) and names.count(names[i]) == 1} \
            if inst.opcode == "fusion" else {}
        for name in (names if len(names) < 2 else dict.fromkeys(names)):
            src = comp.by_name[name]
            size, idxs = leaf_indices(src.shape)
            in_bytes += sliced.get(name, size)
            for idx in idxs:
                for v in values_at(src, idx):
                    if v.size > 0 and v.id not in seen_vals:
                        seen_vals.add(v.id)
                        edges.append(self.edge(v, inst.name))
        out_bytes = _written_by(inst)
        written = self.fused.written(inst) if inst.opcode == "fusion" else out_bytes
        md = inst.metadata
        loc = inst.source if md.source_file or md.stack_frame_id else None
        same = self.same_ints  # one int object per distinct figure (they repeat a lot)
        accessed = in_bytes + written
        kernel = _make_kernel(
            inst.name, _category(inst, self.gpu), inst.opcode, inst.fusion_kind,
            inst.custom_call_target, comp.name, str(inst.shape), out_bytes,
            same.setdefault(accessed, accessed), same.setdefault(flops, flops), trans, ops,
            md.op_name, str(loc) if loc else None)
        return kernel, edges

    def group_inputs(self, grp: Group) -> tuple[tuple[str, str], ...]:
        """What the instruction that runs a group reads: (source kind, name) once each."""
        caller = self.module.computation(grp.parent).by_name.get(grp.caller)
        inputs: dict[tuple[str, str], None] = {}
        if caller is not None:
            for name in dict.fromkeys(caller.operand_names):
                src = caller.computation.by_name[name]
                for idx, _leaf in leaves(src.shape):
                    for v in self.df.values_at(src, idx):
                        if v.size > 0:
                            src_name, kind = self.source_of(v)
                            inputs[(kind, src_name)] = None
        return tuple(inputs)

    def build(self) -> KernelGraph:
        # Kernels in the order they run (the flattened schedule), edges in the same order.
        time_of = self.lr.time_of
        unscheduled = len(self.lr.sequence)
        kernels: list[Kernel] = []
        kernel_times: list[int] = []
        copies: list[EmitterCopy] = []
        edges: list[Edge] = []
        edge_times: list[int] = []
        collectives: list[CollectiveTraffic] = []
        comps = [c for c in self.df.computations if c.name not in self.wrappers]
        for comp in comps:
            for inst in comp.instructions:
                if not launches_work(inst):
                    continue
                t = time_of.get(id(inst), unscheduled)
                kernel, into = self.kernel(inst, comp)
                kernels.append(kernel)
                kernel_times.append(t)
                edges.extend(into)
                edge_times.extend([t] * len(into))
                if kernel.category == "collective":
                    collectives.append(_traffic(inst, comp.name))
                if self.gpu:
                    copies.extend(self.sort_copies(inst, comp))
        kernels = _in_order(kernels, kernel_times)
        edges = _in_order(edges, edge_times)
        root = self.entry.root
        for idx, _leaf in leaves(root.shape):
            for v in self.df.values_at(root, idx):
                if v.size > 0:
                    edges.append(self.edge(v, "result"))
        groups = tuple(Group(g.name, g.kind, g.caller, g.parent, self.group_inputs(g))
                       for g in _groups(self.module, comps))
        peak = self.lr.peak_bytes
        allocated = sum(v.size for v in self.lr.peak_values)
        runs = {g: n for g, n in runs_per_call(self.module).items() if n > 1}
        return KernelGraph(self.module.name, self.module.filename, tuple(kernels), tuple(edges),
                           groups, tuple(collectives), peak, tuple(copies),
                           allocated if peak is not None and allocated > peak else None, runs)

    def sort_copies(self, inst: Instruction, comp: Computation) -> list[EmitterCopy]:
        """The copies XLA's GPU emitter runs before the sort `inst` (a fusion whose root is
        a sort, or a sort): one per operand held in another buffer than its output's."""
        sort, fused = inst, False
        if inst.opcode == "fusion":
            called = inst.called_computations
            if not called or called[0].root.opcode != "sort":
                return []
            sort, fused = called[0].root, True
        elif inst.opcode != "sort":
            return []
        out: list[EmitterCopy] = []
        buffer_of, values_at = self.df.buffer_of, self.df.values_at
        names = sort.operand_names
        for i, name in enumerate(names):
            src = sort.computation.by_name.get(name)
            if src is None or src.opcode == "iota":
                continue  # generated in place by the sort kernel
            if fused:
                if src.opcode != "parameter" or src.parameter_number < 0:
                    continue
                src = comp.by_name.get(inst.operand_names[src.parameter_number])
                if src is None:
                    continue
            dst = {buffer_of[v.id].id for v in values_at(inst, (i,) if len(names) > 1 else ())}
            held = values_at(src, ())
            if held and any(buffer_of[v.id].id not in dst for v in held):
                out.append(EmitterCopy(inst.name, i, held[0].label, src.shape.byte_size))
        return out


def _maker(cls: type[T]) -> Callable[..., T]:
    """A constructor of the frozen dataclass `cls` (fields by position) that makes an
    instance of a plain class with the same slots and gives it `cls` as its class: the
    same object, made 2-3x faster than through `cls`'s own ``__init__``, whose frozen
    check costs an ``object.__setattr__`` per field (a graph of a million kernels makes
    millions of kernels and edges)."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    plain = make_dataclass(f"_{cls.__name__}", names, slots=True, repr=False, eq=False)

    def make(*args: Any) -> T:
        obj = plain(*args)
        obj.__class__ = cls
        return obj  # type: ignore[no-any-return]

    return make


_make_kernel = _maker(Kernel)
_make_edge = _maker(Edge)


def _in_order(items: list[T], times: list[int]) -> list[T]:
    """`items` sorted by `times` (stable), without sorting when they are in order already."""
    if all(a <= b for a, b in zip(times, times[1:])):
        return items
    return [items[i] for i in sorted(range(len(items)), key=times.__getitem__)]
