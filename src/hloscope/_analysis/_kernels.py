"""The kernel graph: what launches work, what it computes, and the arrays between kernels.

`kernel_graph` is a pure function from a `Module` to a `KernelGraph`: plain
frozen data (JSON schema ``hloscope.kernels/1``, docs/json.md).

* A *kernel* is an instruction of a control-flow computation (the entry,
  while bodies and conditions, conditional branches, called and async
  computations) that launches work: a fusion (with its kind and the
  operations fused inside), a library call (custom-call), an FFT, a sort, a
  copy or transpose, a collective, a host transfer, or any other
  computation.  Parameters, constants, bitcasts, tuples and
  get-tuple-elements launch nothing; while, conditional and call are
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
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .._hlo._module import Computation, Instruction, Module
from .._hlo._replica_groups import ReplicaGroupsError, parse_replica_groups
from .._hlo._shape import Shape
from ._dataflow import CONTROL_FLOW_OPCODES, Dataflow, Value, analyze_dataflow
from ._devices import Device
from ._heap import ELEMENTWISE_OPCODES, classify_buffers
from ._liverange import LiveRanges, compute_live_ranges
from ._summary import COLLECTIVE_OPCODES, _wraps_collective

__all__ = [
    "KERNELS_SCHEMA",
    "NOT_KERNELS",
    "CollectiveTraffic",
    "Edge",
    "Group",
    "Kernel",
    "KernelGraph",
    "kernel_graph",
]

KERNELS_SCHEMA = "hloscope.kernels/1"

NOT_KERNELS = frozenset({
    "parameter", "constant", "bitcast", "get-tuple-element", "tuple", "after-all",
    "add-dependency", "opt-barrier", "domain", "partition-id", "replica-id", "while",
    "conditional", "call", "all-gather-done", "all-reduce-done", "collective-permute-done",
    "async-done", "async-update", "copy-done", "send-done", "recv-done",
})
# What moves data between devices and launches work (send/recv are host transfers here).
_COLLECTIVES = COLLECTIVE_OPCODES - {"send", "recv"}
_HOST = frozenset({"send", "recv", "infeed", "outfeed", "copy-start"})
_TRANSCENDENTAL = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "sine", "cosine", "tan",
    "tanh", "logistic", "rsqrt", "sqrt", "cbrt", "power", "erf", "atan2",
})
_NOT_COUNTED = frozenset({"parameter", "tuple", "get-tuple-element", "bitcast"})


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
        return self.flops / self.bytes_accessed if self.bytes_accessed else 0.0

    def roofline_seconds(self, dev: Device, element_type: str = "f32") -> float:
        peak = dev.peak_flops(element_type)
        compute = self.flops / peak if peak else 0.0
        memory = self.bytes_accessed / dev.bandwidth if dev.bandwidth else 0.0
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
class KernelGraph:
    """What `hloscope kernels` shows for one module.  See docs/json.md for each field."""

    module: str
    file: str
    kernels: tuple[Kernel, ...]
    edges: tuple[Edge, ...]
    groups: tuple[Group, ...]
    collectives: tuple[CollectiveTraffic, ...]
    peak_bytes: int | None
    extra: dict[str, Any] = field(default_factory=dict)

    def _passed(self) -> dict[str, int]:
        seen: dict[str, int] = {}
        for e in self.edges:
            if e.src_kind in ("kernel", "loop state") and e.dst != "result" \
                    and e.kind not in ("argument", "constant"):
                seen[e.value] = e.bytes
        return seen

    @property
    def temporaries(self) -> tuple[str, ...]:
        """Arrays one kernel writes to memory for another to read (a loop's state included)."""
        return tuple(self._passed())

    @property
    def temporary_bytes(self) -> int:
        return sum(self._passed().values())

    def kernels_in(self, group: str) -> tuple[Kernel, ...]:
        return tuple(k for k in self.kernels if k.group == group)

    def to_dict(self) -> dict[str, Any]:
        return {"module": self.module, "file": self.file,
                "kernel_count": len(self.kernels), "temporaries": list(self.temporaries),
                "temporary_bytes": self.temporary_bytes, "peak_bytes": self.peak_bytes,
                "flops": sum(k.flops for k in self.kernels),
                "bytes_accessed": sum(k.bytes_accessed for k in self.kernels),
                "kernels": [k.to_dict() for k in self.kernels],
                "edges": [e.to_dict() for e in self.edges],
                "groups": [g.to_dict() for g in self.groups],
                "collectives": [c.to_dict() for c in self.collectives]}


# ---------------------------------------------------------------------------


def _category(inst: Instruction) -> str:
    op = inst.opcode
    if op == "fusion":
        return "fusion"
    if op == "custom-call":
        return "library call"
    if op in _COLLECTIVES or (op == "async-start" and _wraps_collective(inst)):
        return "collective"
    if op in _HOST:
        return "host transfer"
    if op in ("fft", "sort", "copy", "transpose"):
        return op
    if op in ("dot", "convolution"):
        return "matmul" if op == "dot" else "convolution"
    if op in ("reduce", "reduce-window", "scatter", "gather", "select-and-scatter"):
        return op
    return "op"


def _elements(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_elements(s) for s in shape.tuple_shapes)
    return shape.num_elements


def _op_flops(inst: Instruction) -> tuple[int, int]:
    """(flops, transcendentals) of one instruction, from its shapes."""
    op = inst.opcode
    out = _elements(inst.shape)
    if op in _TRANSCENDENTAL:
        return out, out
    if op in ELEMENTWISE_OPCODES and op not in ("copy", "convert", "bitcast-convert"):
        return out, 0
    if op == "dot":
        lhs = inst.operands[0].shape if inst.operand_names else None
        dims = inst.attr("lhs_contracting_dims")
        k = 1
        if lhs is not None and dims:
            for d in dims.strip("{}").split(","):
                if d.strip().isdigit() and int(d) < len(lhs.dims):
                    k *= max(lhs.dims[int(d)], 1)
        return 2 * out * k, 0
    if op == "convolution" and len(inst.operand_names) >= 2:
        rhs = inst.operands[1].shape
        labels = inst.attr("dim_labels") or ""
        kernel = labels.split("_")[1] if labels.count("_") >= 2 else ""
        o_pos = kernel.find("o")
        out_features = rhs.dims[o_pos] if 0 <= o_pos < len(rhs.dims) else 1
        per_output = _elements(rhs) // max(out_features, 1)
        return 2 * out * per_output, 0
    if op in ("reduce", "reduce-window", "reduce-scatter", "all-reduce", "all-reduce-start"):
        src = inst.operands[0].shape if inst.operand_names else inst.shape
        if op == "reduce-window":
            w = inst.attr("window") or ""
            size = 1
            for part in w.split():
                if part.startswith("size="):
                    for x in part[5:].split("x"):
                        size *= int(x) if x.isdigit() else 1
            return out * size, 0
        return _elements(src), 0
    if op == "fft":
        lengths = inst.attr("fft_length") or ""
        n = 1
        for x in lengths.strip("{}").split(","):
            if x.strip().isdigit():
                n *= int(x)
        total = max(_elements(inst.operands[0].shape), out) if inst.operand_names else out
        batch = max(total // max(n, 1), 1)
        return int(5 * n * math.log2(n) * batch) if n > 1 else 0, 0
    if op == "sort":
        d = inst.operands[0].shape.dims if inst.operand_names else ()
        dim = inst.dimensions[0] if inst.dimensions else (len(d) - 1)
        n = d[dim] if 0 <= dim < len(d) else 1
        return int(out * math.log2(n)) if n > 1 else 0, 0
    if op == "custom-call":
        t = inst.custom_call_target.lower()
        if ("gemm" in t or "matmul" in t) and len(inst.operand_names) >= 2:
            lhs = inst.operands[0].shape
            k = lhs.dims[-1] if lhs.dims else 1
            res = inst.shape.tuple_shapes[0] if inst.shape.is_tuple else inst.shape
            return 2 * _elements(res) * k, 0
    return 0, 0


def _fused(inst: Instruction) -> tuple[Counter[str], int, int]:
    """Opcodes inside a fusion (nested fusions opened) and their flops and transcendentals."""
    ops: Counter[str] = Counter()
    flops = trans = 0
    stack = [inst]
    seen: set[str] = set()
    module = inst.computation.module
    while stack:
        f = stack.pop()
        for name in f.called_computation_names:
            if name in seen:
                continue
            seen.add(name)
            for i in module.computation(name).instructions:
                if i.opcode == "fusion":
                    stack.append(i)
                    continue
                if i.opcode in _NOT_COUNTED:
                    continue
                ops[i.opcode] += 1
                a, b = _op_flops(i)
                flops += a
                trans += b
    return ops, flops, trans


def _groups(module: Module, comps: list[Computation]) -> list[Group]:
    names = {c.name for c in comps}
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
    seen: set[str] = set()
    uniq = []
    for g in out:
        if g.name not in seen:
            seen.add(g.name)
            uniq.append(g)
    return uniq


def _traffic(inst: Instruction, group: str) -> CollectiveTraffic:
    op = inst.opcode
    text = inst.attr("replica_groups")
    try:
        groups = parse_replica_groups(text) if text else ()
    except ReplicaGroupsError:
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
    in_bytes = sum(o.shape.total_byte_size for o in inst.operands)
    frac = (n - 1) / n if n > 1 else 0.0
    if op in ("all-gather", "all-gather-start"):
        sent = recv = int(out_bytes * frac)
    elif op == "reduce-scatter":
        sent = recv = int(in_bytes * frac)
    elif op in ("all-reduce", "all-reduce-start"):
        sent = recv = int(2 * in_bytes * frac)
    elif op in ("all-to-all", "ragged-all-to-all"):
        sent = recv = int(in_bytes * frac)
    elif op in ("collective-permute", "collective-permute-start", "collective-broadcast"):
        sent = recv = in_bytes
    else:
        sent = recv = out_bytes
    loc = inst.source
    return CollectiveTraffic(inst.name, op, group, str(inst.shape), out_bytes, text, groups, n,
                             sent, recv, inst.metadata.op_name, str(loc) if loc else None)


def kernel_graph(module: Module, *, df: Dataflow | None = None,
                 lr: LiveRanges | None = None) -> KernelGraph:
    """The kernels of `module`, the arrays between them, their cost and the collectives."""
    df = df if df is not None else analyze_dataflow(module)
    lr = lr if lr is not None else compute_live_ranges(df)
    kinds = classify_buffers(df)
    peak_ids = {v.id for v in lr.peak_values}
    entry = module.entry
    kernels: list[Kernel] = []
    edges: list[Edge] = []
    collectives: list[CollectiveTraffic] = []
    is_kernel: dict[int, bool] = {}
    for comp in df.computations:
        for inst in comp.instructions:
            is_kernel[id(inst)] = inst.opcode not in NOT_KERNELS

    def source_of(v: Value) -> tuple[str, str]:
        inst = v.inst
        if is_kernel.get(id(inst)):
            return inst.name, "kernel"
        if inst.opcode == "parameter" and inst.computation is entry:
            return inst.name, "argument"
        if inst.opcode == "constant":
            return inst.name, "constant"
        if v.is_phi or inst.opcode in ("parameter", "while", "conditional"):
            return inst.name, "loop state"
        return inst.name, "other"

    def edge(v: Value, dst: str) -> Edge:
        src, src_kind = source_of(v)
        kind = kinds[df.buffer_of[v.id].id]
        kind = {"parameter": "argument"}.get(kind, kind)
        return Edge(src, src_kind, dst, v.label, str(v.shape), v.size, kind, v.id in peak_ids)

    for comp in df.computations:
        for inst in comp.instructions:
            if not is_kernel[id(inst)]:
                continue
            cat = _category(inst)
            if inst.opcode == "fusion":
                fused, flops, trans = _fused(inst)
            else:
                fused = Counter()
                flops, trans = _op_flops(inst)
            seen_vals: set[int] = set()
            in_bytes = 0
            for operand in dict.fromkeys(inst.operands):
                for idx, leaf in operand.shape.leaves():
                    in_bytes += leaf.byte_size
                    for v in df.values_at(operand, idx):
                        if v.id not in seen_vals and v.size > 0:
                            seen_vals.add(v.id)
                            edges.append(edge(v, inst.name))
            out_bytes = sum(leaf.byte_size for _, leaf in inst.shape.leaves())
            loc = inst.source
            kernels.append(Kernel(
                inst.name, cat, inst.opcode, inst.fusion_kind, inst.custom_call_target,
                comp.name, str(inst.shape), out_bytes, in_bytes + out_bytes, flops, trans,
                tuple(sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))),
                inst.metadata.op_name, str(loc) if loc else None))
            if cat == "collective":
                collectives.append(_traffic(inst, comp.name))
    # Kernels in the order they run (the flattened schedule), edges in the same order.
    order = {name: t for t, name in enumerate(i.name for i in lr.sequence)}
    kernels.sort(key=lambda k: order.get(k.name, len(order)))
    edges.sort(key=lambda e: order.get(e.dst, len(order)))
    root = entry.root
    for idx, _leaf in root.shape.leaves():
        for v in df.values_at(root, idx):
            if v.size > 0:
                edges.append(edge(v, "result"))
    groups = []
    for grp in _groups(module, df.computations):
        caller = module.computation(grp.parent).by_name.get(grp.caller)
        inputs: list[tuple[str, str]] = []
        if caller is not None:
            for operand in dict.fromkeys(caller.operands):
                for idx, _leaf in operand.shape.leaves():
                    for v in df.values_at(operand, idx):
                        src, kind = source_of(v)
                        if (kind, src) not in inputs and v.size > 0:
                            inputs.append((kind, src))
        groups.append(Group(grp.name, grp.kind, grp.caller, grp.parent, tuple(inputs)))
    return KernelGraph(module.name, module.filename, tuple(kernels), tuple(edges),
                       tuple(groups), tuple(collectives), lr.peak_bytes)
