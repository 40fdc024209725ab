"""The summary of a module: what is in it, at a glance.

`summarize` is a pure function from a `Module` to a `ModuleSummary` (plain,
frozen data); renderers turn that into text or JSON.  The JSON keys are
stable and documented in docs/json.md (schema ``hloscope.summary/1``).
"""

from __future__ import annotations

import re

from collections import Counter
from dataclasses import dataclass
from typing import Any

from .._hlo._module import Instruction, Module
from .._hlo._shape import Shape
from ._check import shard_shape
from ._passthrough import ANNOTATION_TARGETS

__all__ = ["is_optimized", "ValueInfo", "CollectiveInfo", "ModuleSummary", "summarize", "COLLECTIVE_OPCODES",
           "fusion_kind_detail", "wraps_collective", "async_computations", "async_starts",
           "SUMMARY_SCHEMA"]

SUMMARY_SCHEMA = "hloscope.summary/1"

# Opcodes that move data between devices.  The -done halves of async pairs
# are not counted again.  ``cross-replica-sum`` is all-reduce's name in XLA before 2019
# (TensorFlow's dumps of that time; the parser keeps opcodes as printed).
COLLECTIVE_OPCODES = frozenset({
    "all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter",
    "all-to-all", "ragged-all-to-all", "collective-permute", "collective-permute-start",
    "collective-broadcast", "send", "recv", "cross-replica-sum",
})


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """A parameter or output of the entry computation.

    `shape`/`bytes` are as printed in the module.  `per_device_shape` and
    `per_device_bytes` are what one device holds: the shard shape when the
    module is not yet partitioned and the value carries a tiled sharding,
    else the printed shape (a partitioned module already holds per-device
    shapes).
    """

    index: int
    name: str
    shape: str
    bytes: int
    sharding: str | None
    per_device_shape: str
    per_device_bytes: int
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "name": self.name, "shape": self.shape, "bytes": self.bytes,
            "sharding": self.sharding, "per_device_shape": self.per_device_shape,
            "per_device_bytes": self.per_device_bytes, "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class CollectiveInfo:
    """One collective instruction: its kind, the data it moves and who asked for it."""

    name: str
    opcode: str
    computation: str
    shape: str
    bytes: int
    replica_groups: str | None
    op_name: str
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "opcode": self.opcode, "computation": self.computation,
            "shape": self.shape, "bytes": self.bytes, "replica_groups": self.replica_groups,
            "op_name": self.op_name, "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class ModuleSummary:
    """What `hloscope summary` shows.  See docs/json.md for each field."""

    name: str
    file: str
    format: str
    first_line: int
    is_scheduled: bool
    optimized: bool
    partitioned: bool
    num_partitions: int
    replica_count: int
    entry: str
    computations: int
    instructions: int
    opcodes: tuple[tuple[str, int], ...]
    fusions: tuple[tuple[str, int], ...]
    custom_calls: tuple[tuple[str, int], ...]   # library calls (annotations left out)
    collectives: tuple[CollectiveInfo, ...]
    parameters: tuple[ValueInfo, ...]
    outputs: tuple[ValueInfo, ...]
    input_output_alias: tuple[tuple[str, int, str, str], ...]
    annotations: tuple[tuple[str, int], ...] = ()  # custom-calls to `ANNOTATION_TARGETS`
    # A graph torch_xla saved (XLA_SAVE_TENSORS_FILE): its name, hash and the Python
    # frames that made it, innermost first, as "function (file:line)".
    torch_xla_graph: str = ""
    graph_hash: str = ""
    frames: tuple[str, ...] = ()
    # The pointer tables of a tuple result (8 B an element on XLA's targets): XLA counts
    # them in its output size (`memory_analysis().output_size_in_bytes`, `hloscope memory`).
    output_table_bytes: int = 0

    @property
    def argument_bytes(self) -> int:
        return sum(p.bytes for p in self.parameters)

    @property
    def output_bytes(self) -> int:
        return sum(o.bytes for o in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the documented, stable keys (one entry of ``modules``
        in schema ``hloscope.summary/1``, docs/json.md)."""
        return {
            "module": self.name,
            "source": {"file": self.file, "format": self.format, "line": self.first_line},
            "is_scheduled": self.is_scheduled,
            "optimized": self.optimized,
            "partitioned": self.partitioned,
            "num_partitions": self.num_partitions,
            "replica_count": self.replica_count,
            "entry_computation": self.entry,
            "computation_count": self.computations,
            "instruction_count": self.instructions,
            "opcodes": dict(self.opcodes),
            "fusions": dict(self.fusions),
            "custom_calls": dict(self.custom_calls),
            "collectives": [c.to_dict() for c in self.collectives],
            "parameters": [p.to_dict() for p in self.parameters],
            "outputs": [o.to_dict() for o in self.outputs],
            "argument_bytes": self.argument_bytes,
            "output_bytes": self.output_bytes,
            "output_table_bytes": self.output_table_bytes,
            "input_output_alias": [
                {"output_index": o, "parameter": p, "parameter_index": pi, "kind": k}
                for o, p, pi, k in self.input_output_alias
            ],
            "annotations": dict(self.annotations),
            "torch_xla": {"graph": self.torch_xla_graph, "graph_hash": self.graph_hash,
                          "frames": list(self.frames)} if self.frames or self.graph_hash
            else None,
        }


def _is_partitioned(module: Module) -> bool:
    """Whether shapes in the module are already per device (after SPMD partitioning): XLA's
    partitioner names the entry ``..._spmd`` (kept where a frontend printed no
    ``num_partitions``, as torch_xla for AWS Neuron does), and a scheduled module with
    several partitions has been through it."""
    if module.entry.name.endswith("_spmd"):
        return True
    return module.num_partitions > 1 and module.is_scheduled


def is_optimized(module: Module) -> bool:
    """Whether XLA's passes have run on `module`: it is scheduled, or holds fusions (an
    older XLA's optimized dumps are not always scheduled).  A module before optimization
    (``lowered.as_text()``, ``*before_optimizations*`` dumps, torch_xla's graphs) has
    neither."""
    if module.is_scheduled:
        return True
    return any(inst.opcode == "fusion" for comp in module.computations
               for inst in comp.instructions)


def _source(inst: Instruction) -> str | None:
    loc = inst.source
    return str(loc) if loc is not None else None


def _tables(shape: Shape) -> int:
    """The bytes of the pointer tables of the tuple `shape` and of the tuples inside it."""
    if not shape.is_tuple:
        return 0
    return shape.byte_size + sum(_tables(t) for t in shape.tuple_shapes)


def _value(index: int, name: str, shape: Shape, sharding, partitioned: bool,  # type: ignore[no-untyped-def]
           source: str | None) -> ValueInfo:
    dev = shape
    if sharding is not None and not partitioned:
        dev = shard_shape(name, sharding, shape)
    return ValueInfo(index, name, str(shape), shape.total_byte_size,
                     sharding.text if sharding is not None else None, str(dev),
                     dev.total_byte_size, source)


_BACKEND_KIND = re.compile(r'"fusion_backend_config"\s*:\s*\{[^{}]*?"kind"\s*:\s*"([^"]{1,60})"')


def fusion_kind_detail(inst: Instruction) -> str:
    """XLA's fusion kind; a GPU's custom fusions say what they are: ``kCustom(__triton_gemm)``
    (a Triton matmul), ``kCustom(__cudnn$fusion)``, ..."""
    kind = inst.fusion_kind or "unknown"
    if kind == "kCustom" and "fusion_backend_config" in inst.attr_text:
        m = _BACKEND_KIND.search(inst.attr_text)
        if m is not None:
            return f"kCustom({m.group(1)})"
    return kind


def summarize(module: Module) -> ModuleSummary:
    """Summarize `module`: counts, fusions, library calls (annotations such as ``Sharding``
    counted apart), collectives, parameters, outputs."""
    partitioned = _is_partitioned(module)
    opcodes: Counter[str] = Counter()
    fusions: Counter[str] = Counter()
    custom: Counter[str] = Counter()
    annotations: Counter[str] = Counter()
    collectives: list[CollectiveInfo] = []
    wrappers = async_computations(module)
    for comp in module.computations:
        made = comp.origin == "async"  # made by reading `X-start` as XLA does: not printed
        for inst in comp.instructions:
            op = inst.opcode
            if not made:  # counted as printed: all-to-all-start, not async-start
                opcodes[inst.sugar or op] += 1
            if op == "fusion":
                fusions[fusion_kind_detail(inst)] += 1
            elif op == "custom-call":
                target = inst.custom_call_target
                if target in ANNOTATION_TARGETS:
                    annotations[target] += 1
                else:
                    custom[target or "?"] += 1
            # An async collective once, as its start (XLA runs one thunk for the pair).
            if (op in COLLECTIVE_OPCODES and comp.name not in wrappers) or (
                    op == "async-start" and wraps_collective(inst)):
                shape, groups = inst.shape, inst.attr("replica_groups")
                if op == "async-start" and inst.called_computations:
                    wrapped = inst.called_computations[0].root  # the collective it runs
                    shape, groups = wrapped.shape, wrapped.attr("replica_groups")
                collectives.append(CollectiveInfo(
                    inst.name, inst.sugar or op, comp.name, str(shape), _moved_bytes(inst),
                    groups, inst.metadata.op_name, _source(inst)))

    entry = module.entry
    params = tuple(
        _value(p.parameter_number, p.name, p.shape, p.sharding, partitioned, _source(p))
        for p in entry.parameters
    )
    root = entry.root
    rs = root.sharding
    outputs: list[ValueInfo] = []
    if root.shape.is_tuple:
        elem_shardings = rs.elements if rs is not None and rs.kind == "tuple" else ()
        for k, (idx, leaf) in enumerate(root.shape.leaves()):
            s = elem_shardings[k] if k < len(elem_shardings) else (
                rs if rs is not None and rs.kind != "tuple" else None)
            label = f"{root.name}{{{','.join(map(str, idx))}}}"
            outputs.append(_value(k, label, leaf, s, partitioned, _source(root)))
    else:
        outputs.append(_value(0, root.name, root.shape, rs, partitioned, _source(root)))

    alias = tuple(
        ("{" + ",".join(map(str, o)) + "}", p, "{" + ",".join(map(str, pi)) + "}", k)
        for o, p, pi, k in module.input_output_alias
    )
    return ModuleSummary(
        name=module.name, file=module.filename, format=module.format,
        first_line=module.first_line, is_scheduled=module.is_scheduled, optimized=is_optimized(module), partitioned=partitioned,
        num_partitions=module.num_partitions, replica_count=module.replica_count,
        entry=entry.name, computations=len(module.computations),
        instructions=module.instruction_count,
        opcodes=_by_count(opcodes), fusions=_by_count(fusions),
        custom_calls=_by_count(custom),
        collectives=tuple(collectives), parameters=params, outputs=tuple(outputs),
        input_output_alias=alias, annotations=_by_count(annotations),
        output_table_bytes=_tables(root.shape), **_torch_xla_provenance(module),
    )


def _torch_xla_provenance(module: Module) -> dict[str, Any]:
    prov = module.provenance
    frames = prov.get("frames") or ()
    return {"torch_xla_graph": str(prov.get("torch_xla_graph") or ""),
            "graph_hash": str(prov.get("graph_hash") or ""),
            "frames": tuple(f"{fn} ({file}:{line})" for fn, file, line in frames)}


def _by_count(counts: Counter[str]) -> tuple[tuple[str, int], ...]:
    """(name, count) pairs, most frequent first, ties by name."""
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def wraps_collective(inst: Instruction) -> bool:
    """Whether an async-start runs a collective (a reduce-scatter-start, say)."""
    try:
        return any(i.opcode in COLLECTIVE_OPCODES
                   for c in inst.called_computations for i in c.instructions)
    except Exception:  # an unresolvable async wrapper is simply not counted
        return False


def async_computations(module: Module) -> frozenset[str]:
    """Names of the computations async-starts run.  Each holds one op (a collective, a
    TPU's slice) that XLA runs once for the pair: it is counted once, as the async-start
    (`all-to-all-start`, `reduce-scatter-start`, `slice-start` are async-starts)."""
    return frozenset(async_starts(module))


def async_starts(module: Module) -> dict[str, Instruction]:
    """Each computation an async-start runs (`async_computations`), with the first
    async-start, in printed order, that runs it: the kernel that stands for its op."""
    out: dict[str, Instruction] = {}
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode == "async-start":
                for n in inst.called_computation_names:
                    out.setdefault(n, inst)
    return out


def _moved_bytes(inst: Instruction) -> int:
    """Bytes of the collective's result (per device); for async starts, the largest leaf."""
    shape = inst.shape
    if shape.is_tuple:
        return max((leaf.byte_size for _, leaf in shape.leaves()), default=0)
    return shape.byte_size
