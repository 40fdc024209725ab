"""The memory report: what is alive at the peak, and which line of code put it there.

`analyze_memory` is a pure function from a `Module` (plus, optionally,
XLA's own dump files for it) to a `MemoryReport`: plain frozen data that the
renderers turn into text, JSON and plots.  JSON keys are documented in
docs/json.md (schema ``hloscope.memory/1``).

The figures:

* ``peak_bytes``: the bytes of the values live at the peak moment, by the
  same definition as XLA's HloLiveRange (see `_liverange`), so it equals the
  ``Live ranges at N (peak)`` total in XLA's ``*-live-range.txt`` dump.
* ``timeline``: bytes held at each step of the flattened schedule, each
  buffer counted once.
* ``temp_estimate_bytes``: XLA's temp allocation as hloscope's heap
  simulation estimates it (see `_heap`).
* argument, output, aliased and constant bytes as XLA's
  ``memory_analysis()`` counts them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from .._hlo._module import Instruction, Module
from .._repr import brief_repr, clip, number
from .._sources._xla_dumps import (
    BufferAssignmentDump,
    LiveRangeDump,
    MemoryUsageReport,
    XlaMemoryFiles,
)
from ._check import shard_shape
from ._dataflow import Dataflow, Value, analyze_dataflow
from ._heap import classify_buffers, estimate_temp
from ._liverange import LiveRanges, compute_live_ranges, xla_peak_moment
from ._figures import MemoryFigures, memory_figures
from ._summary import _is_partitioned, is_optimized
from ._walk import paused_gc

__all__ = [
    "MEMORY_SCHEMA",
    "BufferInfo",
    "Comparison",
    "MemoryReport",
    "ShardedRow",
    "ShardedView",
    "ValueSpans",
    "XlaFigures",
    "analyze_memory",
    "xla_figures",
]

MEMORY_SCHEMA = "hloscope.memory/1"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BufferInfo:
    """One value: the array (or tuple pointer table) an instruction writes.

    `kind` is where XLA puts it: ``parameter``, ``output``, ``constant`` or
    ``temporary``.  `start`/`end` are its live range in steps of the
    flattened schedule.  `op_name` and `source` say which line of the
    user's code made it (for values made by a loop's or branch's parameter,
    those of the loop or branch instruction).
    """

    __repr__ = brief_repr

    label: str
    instruction: str
    index: tuple[int, ...]
    opcode: str
    computation: str
    shape: str
    bytes: int
    kind: str
    start: int
    end: int
    op_name: str
    source: str | None
    buffer: int = -1   # the buffer it is in (values computed in place share one)

    @property
    def where(self) -> str:
        """The line of code that made it, else, for an argument, its name in the user's
        code (JAX names a parameter by its Python path: ``params['w1']``)."""
        if self.source:
            return self.source
        if self.kind == "parameter" and self.opcode == "parameter":
            return f"argument {self.op_name}" if self.op_name else "an argument"
        return "(no source line)"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.label, "instruction": self.instruction, "index": list(self.index),
                "opcode": self.opcode, "computation": self.computation, "shape": self.shape,
                "bytes": self.bytes, "kind": self.kind, "live_range": [self.start, self.end],
                "op_name": self.op_name, "source": self.source, "buffer": self.buffer}


@dataclass(frozen=True, slots=True)
class Comparison:
    """hloscope's figure beside XLA's for one quantity."""

    __repr__ = brief_repr

    name: str
    hloscope: int | None
    xla: int | None

    @property
    def equal(self) -> bool:
        return self.hloscope == self.xla

    @property
    def relative_difference(self) -> float | None:
        if self.hloscope is None or self.xla is None:
            return None
        if self.xla == 0:
            return 0.0 if self.hloscope == 0 else float("inf")
        return (self.hloscope - self.xla) / self.xla

    def to_dict(self) -> dict[str, Any]:
        rd = self.relative_difference
        return {"name": self.name, "hloscope": self.hloscope, "xla": self.xla,
                "equal": self.equal,
                "relative_difference": None if rd is None or rd == float("inf") else round(rd, 6)}


@dataclass(frozen=True, slots=True)
class ShardedRow:
    """A sharded value of a module not yet partitioned: its whole and per-device size."""

    label: str
    shape: str
    sharding: str
    bytes: int
    per_device_shape: str
    per_device_bytes: int
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.label, "shape": self.shape, "sharding": self.sharding,
                "bytes": self.bytes, "per_device_shape": self.per_device_shape,
                "per_device_bytes": self.per_device_bytes, "source": self.source}


@dataclass(frozen=True, slots=True)
class ShardedView:
    """Per-device memory of a module with sharding annotations.

    `partitioned` says the module is already SPMD-partitioned (its shapes
    are per device and `rows` is empty).  Otherwise `rows` lists every value
    whose instruction carries a sharding, largest first, with its shard
    shape, each array once (a ``Sharding`` annotation on a parameter that
    carries a sharding already adds no row: it holds the same data); the
    totals are over those values: all of it on one device
    (``replicated_bytes``) against one shard each (``per_device_bytes``),
    like the SPMD partitioner's "memory usage before/after partition" lists.
    """

    __repr__ = brief_repr

    devices: int
    partitioned: bool
    rows: tuple[ShardedRow, ...]

    @property
    def replicated_bytes(self) -> int:
        return sum(r.bytes for r in self.rows)

    @property
    def per_device_bytes(self) -> int:
        return sum(r.per_device_bytes for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"devices": self.devices, "partitioned": self.partitioned,
                "replicated_bytes": self.replicated_bytes,
                "per_device_bytes": self.per_device_bytes,
                "values": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True, slots=True)
class XlaFigures:
    """What XLA's own dump files say about the module (each part may be missing);
    `memory_usage` is XLA's memory-usage report as read, when it was among them."""

    __repr__ = brief_repr

    files: tuple[str, ...]
    live_range_peak_bytes: int | None
    live_range_peak_time: int | None
    live_range_peak_values: tuple[tuple[str, int], ...]
    temp_bytes: int | None
    argument_bytes: int | None
    output_bytes: int | None
    constant_bytes: int | None
    total_bytes: int | None
    allocations: int | None
    recomputed_peak_bytes: int | None = None
    memory_usage: MemoryUsageReport | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"files": list(self.files),
                "live_range_peak_bytes": self.live_range_peak_bytes,
                "live_range_peak_time": self.live_range_peak_time,
                "live_range_peak_values": [{"value": v, "bytes": b}
                                           for v, b in self.live_range_peak_values],
                "temp_bytes": self.temp_bytes, "argument_bytes": self.argument_bytes,
                "output_bytes": self.output_bytes, "constant_bytes": self.constant_bytes,
                "total_bytes": self.total_bytes, "allocations": self.allocations,
                "recomputed_peak_bytes": self.recomputed_peak_bytes,
                "memory_usage": (self.memory_usage.to_dict()
                                 if self.memory_usage is not None else None)}


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """What `hloscope memory` shows for one module.  See docs/json.md for each field."""

    module: str
    file: str
    scheduled: bool
    order: str
    steps: int
    values: int
    buffers: int
    peak_bytes: int | None
    peak_step: int
    peak_instruction: str
    peak_values: tuple[BufferInfo, ...]
    all_spaces_peak_bytes: int | None   # XLA's peak over every memory space (VMEM too)
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    constant_bytes: int
    temp_estimate_bytes: int
    timeline: tuple[int, ...]
    timeline_labels: Sequence[str]    # the instruction of each step (made on access)
    largest: Sequence[BufferInfo]     # the `top` largest values (made on access)
    spans: ValueSpans                 # every value's kind, live range and bytes, unranked
    sharded: ShardedView | None
    xla: XlaFigures | None
    comparisons: tuple[Comparison, ...]
    optimized: bool
    figures: MemoryFigures             # every headline figure, labelled, and their differences

    def __repr__(self) -> str:
        return clip(f"MemoryReport({self.module!r}: peak {number(self.peak_bytes)} B at step "
                    f"{self.peak_step} ({self.peak_instruction}), {len(self.peak_values):,} "
                    f"values live there; temp estimate {self.temp_estimate_bytes:,} B; "
                    f"{self.steps:,} steps)")

    @property
    def timeline_max(self) -> tuple[int, int]:
        """(bytes, step) of the highest point of the timeline."""
        return _highest(self.timeline)

    @property
    def peak_counted_again(self) -> int:
        """The bytes of the values live at the peak that are in the buffer of a larger one
        live there too (`shared_again`): counted in XLA's live-range peak, not held twice."""
        again = shared_again(self.peak_values)
        return sum(b.bytes for b in self.peak_values if b.label in again)

    def to_dict(self) -> dict[str, Any]:
        tmax, tstep = self.timeline_max
        return {
            "module": self.module, "file": self.file, "scheduled": self.scheduled,
            "order": self.order, "steps": self.steps, "value_count": self.values,
            "buffer_count": self.buffers,
            "needs_bytes": (self.figures.headline.bytes
                            if self.figures.headline is not None else None),
            "peak_bytes": self.peak_bytes, "peak_step": self.peak_step,
            "peak_instruction": self.peak_instruction,
            "peak_values": [b.to_dict() for b in self.peak_values],
            "peak_counted_again_bytes": self.peak_counted_again,
            "all_spaces_peak_bytes": self.all_spaces_peak_bytes,
            "argument_bytes": self.argument_bytes, "output_bytes": self.output_bytes,
            "alias_bytes": self.alias_bytes, "constant_bytes": self.constant_bytes,
            "temp_estimate_bytes": self.temp_estimate_bytes,
            "timeline": list(self.timeline), "timeline_max_bytes": tmax,
            "timeline_max_step": tstep,
            "largest": [b.to_dict() for b in self.largest],
            "sharded": self.sharded.to_dict() if self.sharded is not None else None,
            "xla": self.xla.to_dict() if self.xla is not None else None,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "optimized": self.optimized,
            "figures": self.figures.to_dict(),
        }


# ---------------------------------------------------------------------------


def _highest(timeline: Sequence[int]) -> tuple[int, int]:
    """(bytes, step) of a timeline's highest point, the earliest where it repeats."""
    if not timeline:
        return (0, 0)
    top = max(timeline)
    return top, timeline.index(top)


def _origin(inst: Instruction) -> Instruction:
    """The instruction whose metadata explains `inst` (a loop's or branch's parameter: its caller)."""
    if inst.opcode == "parameter" and not inst.computation.is_entry and not inst.attr("metadata"):
        callers = inst.computation.module.callers(inst.computation)
        if callers:
            return callers[0]
    return inst


def _info(v: Value, kind: str, r: tuple[int, int], buffer: int = -1) -> BufferInfo:
    o = _origin(v.inst)
    loc = o.source
    return BufferInfo(v.label, v.inst.name, v.index, v.inst.opcode, v.inst.computation.name,
                      str(v.shape), v.size, kind, r[0], r[1], o.metadata.op_name,
                      str(loc) if loc is not None else None, buffer)


def shared_again(values: Sequence[BufferInfo]) -> dict[str, str]:
    """Of `values` (largest first), each one in the buffer of one listed before it, and that
    one's label: an in-place update's result and its operand, a loop's state and the
    body's value written into it.  XLA's live-range peak counts both; the memory holds
    one."""
    first: dict[int, str] = {}
    again: dict[str, str] = {}
    for b in values:
        if b.buffer < 0:
            continue
        if b.buffer in first:
            again[b.label] = first[b.buffer]
        else:
            first[b.buffer] = b.label
    return again


def _sharded_view(module: Module, df: Dataflow) -> ShardedView | None:
    devices = max(module.num_partitions, module.replica_count)
    if _is_partitioned(module):
        if module.num_partitions <= 1:  # no num_partitions printed: the shardings say
            devices = max([devices] + [sh.num_devices or 1 for inst in module.instructions()
                                       if (sh := inst.sharding) is not None])
        return ShardedView(max(module.num_partitions, devices), True, ())
    rows: list[ShardedRow] = []
    listed: set[int] = set()  # values already in a row: an annotation on them adds none
    for comp in df.computations:
        for inst in comp.instructions:
            s = inst.sharding
            if s is None:
                continue
            shape = inst.shape
            if shape.is_tuple:
                leaves = shape.leaves()
                elems = s.elements if s.kind == "tuple" else (s,) * len(leaves)
                pairs = [(f"{inst.name}{{{','.join(map(str, idx))}}}", idx, leaf, e)
                         for (idx, leaf), e in zip(leaves, elems)]
            else:
                pairs = [(inst.name, (), shape, s)]
            loc = inst.source
            for label, idx, leaf, sh in pairs:
                devices = max(devices, sh.num_devices or 1)
                held = {v.id for v in df.values_at(inst, idx)}
                if held and held <= listed:
                    continue
                listed |= held
                dev = shard_shape(inst.name, sh, leaf)
                rows.append(ShardedRow(label, str(leaf), sh.text, leaf.byte_size, str(dev),
                                       dev.byte_size, str(loc) if loc is not None else None))
    if not rows:
        return None
    rows.sort(key=lambda r: (-r.bytes, r.label))
    return ShardedView(devices, False, tuple(rows))


def xla_figures(dump: XlaMemoryFiles) -> XlaFigures:
    """Collect XLA's own numbers from whichever of its memory files are at hand."""
    ba = dump.buffer_assignment
    memory_usage = dump.memory_usage
    files = dump.files
    lr = dump.live_range or (ba.live_range if ba is not None else None)
    recomputed = None
    if ba is not None and lr is not None and lr.ranges:
        recomputed = _recompute_peak(ba, lr)
    return XlaFigures(
        files=files,
        live_range_peak_bytes=lr.peak_bytes if lr is not None else None,
        live_range_peak_time=lr.peak_time if lr is not None else None,
        live_range_peak_values=lr.peak_values if lr is not None else (),
        temp_bytes=ba.temp_bytes if ba is not None else None,
        argument_bytes=ba.total("parameter") if ba is not None else None,
        output_bytes=ba.total("output") if ba is not None else None,
        constant_bytes=ba.total("constant") if ba is not None else None,
        total_bytes=(memory_usage.total_bytes if memory_usage is not None
                     else ba.total_bytes if ba is not None else None),
        allocations=len(ba.allocations) if ba is not None else None,
        recomputed_peak_bytes=recomputed,
        memory_usage=memory_usage,
    )


def _recompute_peak(ba: BufferAssignmentDump, lr: LiveRangeDump) -> int | None:
    """The peak by XLA's definition from the dump's own ranges and sizes (a consistency check)."""
    sizes = ba.value_sizes
    if any(label not in sizes for label in lr.ranges):
        return None
    end = max((e for _, e in lr.ranges.values()), default=0)
    # XLA's sweep sizes a value inside a tuple by the tuple's pointer table (its {} value).
    peak_t = xla_peak_moment(((s, e, sizes.get(label[:label.index("{")] + "{}", sizes[label]))
                              for label, (s, e) in lr.ranges.items()), end)
    return sum(sizes[label] for label, (s, e) in lr.ranges.items() if s <= peak_t <= e)


def analyze_memory(module: Module, *, xla: XlaMemoryFiles | XlaFigures | None = None,
                   top: int = 20, df: Dataflow | None = None,
                   lr: LiveRanges | None = None,
                   memory_analysis: Mapping[str, float] | None = None,
                   code_in_memory: bool = False) -> MemoryReport:
    """Buffers, live ranges, the peak and what makes it up, the temp estimate, per-device sizes.

    A module that is not scheduled (``is_scheduled=true`` missing, e.g. before
    optimization) is analysed in its printed instruction order, which XLA
    prints as a valid post order; the report says so in `order`.  `xla`
    (XLA's memory files for this module) puts XLA's figures beside
    hloscope's; `memory_analysis` (``compiled.memory_analysis()``'s fields, as
    `hloscope.inspect` keeps them) too, in `figures`; `top` is how many of the largest
    values to list.  `df` and `lr` reuse a dataflow and live ranges already computed for
    `module`.  `code_in_memory`: the compiled code takes device memory and counts in what
    the device must hold (a TPU's, with `memory_analysis`).
    """
    with paused_gc():
        df = df if df is not None else analyze_dataflow(module)
        lr = lr if lr is not None else compute_live_ranges(df)
        kinds = classify_buffers(df)
        heap = estimate_temp(df, lr, kinds)
        figs = xla_figures(xla) if isinstance(xla, XlaMemoryFiles) else xla
        return _report(module, df, lr, kinds, heap.size, figs, top, memory_analysis,
                       code_in_memory)


def _report(module: Module, df: Dataflow, lr: LiveRanges, kinds: Sequence[str], temp: int,
            xla: XlaFigures | None, top: int,
            memory_analysis: Mapping[str, float] | None = None,
            code_in_memory: bool = False) -> MemoryReport:
    entry = module.entry
    buffer_of = df.buffer_of
    ranges = lr.ranges

    def info(v: Value) -> BufferInfo:
        buf = buffer_of[v.id].id
        return _info(v, kinds[buf], ranges[v.id], buf)

    peak_values = tuple(info(v) for v in lr.peak_values)
    live = [v for v in df.values if v.id in ranges]
    largest = _Largest(live, top,
                       key=lambda v: (-v.size, ranges[v.id][0], v.inst.name, v.index),
                       make=info)
    spans = ValueSpans(live, kinds, buffer_of, ranges)
    argument_bytes = sum(p.shape.total_byte_size for p in entry.parameters)
    output_bytes = entry.root.shape.total_byte_size
    alias_bytes = sum(entry.root.shape.subshape(o).total_byte_size if o else
                      entry.root.shape.total_byte_size
                      for o, _p, _pi, _k in module.input_output_alias
                      if _valid_index(entry.root.shape, o))
    constant_bytes = sum(v.size for v in df.values if v.inst.opcode == "constant")
    scheduled = module.is_scheduled
    order = ("the module's schedule (is_scheduled=true), flattened through loops, branches "
             "and calls" if scheduled else
             "not scheduled: the printed instruction order (a valid post order) stands in "
             "for the schedule, so the peak is an estimate of the order XLA will choose")
    labels = _Lazy(lr.sequence, lambda inst: inst.name if inst.computation.is_entry
                   else f"{inst.computation.name}/{inst.name}")
    peak_inst = labels[lr.peak_time] if lr.peak_time < len(labels) else ""
    comparisons: list[Comparison] = []
    if xla is not None:
        if xla.live_range_peak_bytes is not None:
            comparisons.append(Comparison("peak_bytes", lr.all_spaces_peak_bytes,
                                          xla.live_range_peak_bytes))
        if xla.temp_bytes is not None:
            comparisons.append(Comparison("temp_bytes", temp, xla.temp_bytes))
        if xla.argument_bytes is not None:
            comparisons.append(Comparison("argument_bytes", argument_bytes, xla.argument_bytes))
    timeline = tuple(lr.live_bytes[:lr.end_time])
    tmax, tstep = _highest(timeline)
    sharded = _sharded_view(module, df)
    optimized = is_optimized(module)
    figures = memory_figures(
        peak=lr.peak_bytes, peak_at=f"step {lr.peak_time} ({peak_inst})",
        all_spaces_peak=lr.all_spaces_peak_bytes,
        timeline_max=tmax,
        timeline_at=f"step {tstep} ({labels[tstep] if tstep < len(labels) else ''})",
        arguments=argument_bytes, outputs=output_bytes, aliased=alias_bytes,
        constants=constant_bytes, temp_estimate=temp, optimized=optimized,
        per_device=sharded is not None and sharded.partitioned,
        xla_peak=xla.live_range_peak_bytes if xla is not None else None,
        xla_temp=xla.temp_bytes if xla is not None else None,
        memory_analysis=memory_analysis, code_in_memory=code_in_memory)
    return MemoryReport(
        module=module.name, file=module.filename, scheduled=scheduled, order=order,
        steps=lr.end_time, values=len(lr.ranges), buffers=len(df.buffers),
        peak_bytes=lr.peak_bytes, peak_step=lr.peak_time, peak_instruction=peak_inst,
        peak_values=peak_values, all_spaces_peak_bytes=lr.all_spaces_peak_bytes,
        argument_bytes=argument_bytes, output_bytes=output_bytes,
        alias_bytes=alias_bytes, constant_bytes=constant_bytes, temp_estimate_bytes=temp,
        timeline=timeline, timeline_labels=labels,
        largest=largest, spans=spans, sharded=sharded, xla=xla,
        comparisons=tuple(comparisons), optimized=optimized, figures=figures,
    )


class ValueSpans:
    """Every value with a live range, in value order (not ranked): its kind, first and last
    step and bytes, and on request the op_name that explains it; what a whole-program sum
    over the values reads (the report's stacked timeline) without a `BufferInfo` each."""

    __slots__ = ("_buffer_of", "_kinds", "_ranges", "_values")

    def __init__(self, values: list[Value], kinds: Sequence[str], buffer_of: Sequence[Any],
                 ranges: Mapping[int, tuple[int, int]]) -> None:
        self._values = values
        self._kinds = kinds
        self._buffer_of = buffer_of
        self._ranges = ranges

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[tuple[str, int, int, int]]:
        """(kind, start, end, bytes) of each value."""
        kinds, buffer_of, ranges = self._kinds, self._buffer_of, self._ranges
        for v in self._values:
            s, e = ranges[v.id]
            yield kinds[buffer_of[v.id].id], s, e, v.size

    def op_names(self) -> Iterator[str]:
        """Each value's op_name (that of `BufferInfo.op_name`), in the same order."""
        for v in self._values:
            yield _origin(v.inst).metadata.op_name

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ValueSpans):
            return NotImplemented
        return list(self) == list(other) and list(self.op_names()) == list(other.op_names())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ValueSpans({len(self)} values)"


class _Lazy(Sequence[T]):
    """A read-only sequence whose items are made from `source`'s on first access (a
    module's million schedule steps or values cost a row only where one is read)."""

    def __init__(self, source: Sequence[Any], make: Callable[[Any], T]) -> None:
        self._source = source
        self._make = make
        self._made: dict[int, T] = {}

    def __len__(self) -> int:
        return len(self._source)

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...

    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        hit = self._made.get(i)
        if hit is None:
            hit = self._made[i] = self._make(self._source[i])
        return hit

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, _Lazy)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} items)"


class _Largest(_Lazy[T]):
    """The `top` largest of `values` by `key`, made on access; a prefix is found without
    sorting every value (the report page reads the first few thousand of all of them)."""

    def __init__(self, values: list[Any], top: int, key: Callable[[Any], Any],
                 make: Callable[[Any], T]) -> None:
        super().__init__(values, make)
        self._top = max(0, min(top, len(values)))
        self._key = key
        self._ranked: list[Any] | None = None
        self._prefix: list[Any] = []

    def __len__(self) -> int:
        return self._top

    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:  # type: ignore[override]
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if not 0 <= i < self._top:
            raise IndexError(i)
        hit = self._made.get(i)
        if hit is None:
            hit = self._made[i] = self._make(self._value(i))
        return hit

    def _value(self, i: int) -> Any:
        if self._ranked is not None:
            return self._ranked[i]
        if i < len(self._prefix):
            return self._prefix[i]
        if i < 4096 and i < self._top // 4:
            self._prefix = heapq.nsmallest(min(max(4096, 2 * i), self._top), self._source,
                                           key=self._key)
            return self._prefix[i]
        self._ranked = sorted(self._source, key=self._key)[:self._top]
        return self._ranked[i]


def _valid_index(shape, index: tuple[int, ...]) -> bool:  # type: ignore[no-untyped-def]
    try:
        shape.subshape(index)
    except (IndexError, AttributeError):
        return False
    return True
