"""Values and buffers: which instruction outputs hold their own memory.

This follows XLA's `HloDataflowAnalysis` (in SSA form, bitcasts not defining
values) and `HloAliasAnalysis` closely enough that the live ranges built on it
(`_liverange`) reproduce XLA's own figures:

* a *value* is one array (or tuple pointer table) written by one instruction
  at one shape index.  Instructions that only pass data through (bitcast,
  get-tuple-element, tuple elements, while/call/conditional results, called
  computations' parameters, async and copy-start/done halves, and what
  `_passthrough` finds moves no data: annotations, copies and transposes
  that are bitcasts) define no new value; where several values can reach
  one place (a while loop's state, a conditional's result) a *phi* value
  stands for them, and phis that turn out to carry a single value are
  folded away as XLA does.
* a *buffer* is a set of values that must share memory: a while loop's
  state across its init, body and result; conditional branch results; an
  in-place operation's operand and result (dynamic-update-slice, scatter,
  fusions rooted at them, custom-calls and fusions with
  output_to_operand_aliasing); entry parameters aliased to outputs.

Only computations reached through control flow (entry, while bodies and
conditions, conditional branches, calls, async wrapped computations) take
part; fused and other embedded computations run inside one kernel.

A computation run from several places (XLA clones such computations before
buffer assignment; hand-written text may not) is analysed once: its
parameters hold what every call site passes (a call's: the union of the
values; a loop's or branch's: a phi), as XLA's dataflow does on a call
graph that is not flat.

`analyze_dataflow` first checks the structure it relies on (`_check`), and
takes time in proportion to the module: parameters fed by many call sites
are updated from the call sites that changed only, and no per-instruction
structure is kept that the later analyses do not read.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from .._errors import HloModelError
from .._hlo._module import Computation, Instruction, Module
from .._hlo._shape import Shape
from ._check import check_module
from ._inplace import IN_PLACE_OPCODES, InPlacePairs
from ._passthrough import PASSING_OPCODES, forwarded_operands, passes_through
from ._phigraph import PhiGraph
from ._shapes import byte_size, indices
from ._walk import ENTER, INSTRUCTION, gte_index, operand, paused_gc, walk_schedule

__all__ = [
    "CONTROL_FLOW_OPCODES",
    "Buffer",
    "Dataflow",
    "Value",
    "analyze_dataflow",
    "control_flow_computations",
    "operand_positions",
]

Index = tuple[int, ...]

# Opcodes whose called computations run as part of the caller's dataflow.
CONTROL_FLOW_OPCODES = frozenset({"call", "while", "conditional", "async-start",
                                  "async-update", "async-done"})

# Opcodes whose value sets come from other instructions (`_Builder.update` has a rule for
# each); every other instruction only defines its own values, once.
_FORWARDING_OPCODES = frozenset({
    "bitcast", "add-dependency", "domain", "opt-barrier", "all-reduce-done", "copy",
    "get-tuple-element", "tuple", "parameter", "call", "while", "conditional", "send",
    "recv-done", "copy-start", "copy-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "async-start", "async-update",
    "async-done"})

_NO_VALUE_OPCODES = frozenset({"bitcast", "add-dependency", "while", "call", "conditional",
                               "get-tuple-element", "domain", "opt-barrier",
                               "copy-done", "all-reduce-done"})


class Value:
    """One SSA value: what `inst` writes at shape index `index`.

    `positions` are every (instruction, index) that holds the value, the
    defining one first; `uses` the (instruction, operand number, operand
    index) that read it, by XLA's rules.
    """

    __slots__ = ("_label", "_more", "id", "index", "inst", "is_phi", "shape", "size")

    def __init__(self, vid: int, inst: Instruction, index: Index, is_phi: bool) -> None:
        self.id = vid
        self.inst = inst
        self.index = index
        self.is_phi = is_phi
        self.shape: Shape = inst.shape.subshape(index) if index else inst.shape
        self.size: int = byte_size(self.shape)  # bytes (a tuple's pointer table for a tuple)
        self._more: list[tuple[Instruction, Index]] | None = None  # positions after the first
        self._label: str | None = None

    @property
    def memory_space(self) -> int:
        """The layout's memory space: 0 is device memory (HBM); a TPU's on-chip memory
        (``S(1)``), scalar memory (``S(2)``) and the host (``S(5)``) have allocations of
        their own, outside XLA's temp allocation (XLA's live-range peak counts every
        value, whatever its space)."""
        layout = self.shape.layout
        return layout.memory_space if layout is not None else 0

    @property
    def positions(self) -> list[tuple[Instruction, Index]]:
        """Every (instruction, index) that holds the value, the defining one first (a new
        list each time: most values have only the one, which is then not stored)."""
        first = (self.inst, self.index)
        return [first] if self._more is None else [first, *self._more]

    @property
    def other_positions(self) -> list[tuple[Instruction, Index]] | tuple[()]:
        """`positions` without the defining one."""
        return self._more or ()

    def add_position(self, inst: Instruction, index: Index) -> None:
        """Record that `inst` holds the value at `index` too."""
        if self._more is None:
            self._more = []
        self._more.append((inst, index))

    @property
    def label(self) -> str:
        """``name{index}`` as XLA's dumps print it."""
        if self._label is None:
            self._label = f"{self.inst.name}{{{','.join(map(str, self.index))}}}"
        return self._label

    def __repr__(self) -> str:
        return f"<Value {self.id} {self.label}{' (phi)' if self.is_phi else ''}>"

    @property
    def uses(self) -> list[tuple[Instruction, int, Index]]:
        """The (user, operand number, operand index) that read the value (computed on each
        use, not kept: a million values' uses are a lot of memory for what is read once)."""
        return _compute_uses(self)


def _may_use(user: Instruction, index: Index) -> bool:
    op = user.opcode
    if op == "get-tuple-element" or op == "copy":
        return not index
    return op != "tuple" and op != "domain"


_PASS_THROUGH = frozenset({"get-tuple-element", "copy", "tuple", "domain"})
# Users with more operands than this have their operand positions looked up once (cached).
_WIDE = 8


def _compute_uses(value: Value, cache: dict[int, dict[str, list[int]]] | None = None,
                  readers: dict[int, tuple[Instruction, ...]] | None = None,
                  root_reads: dict[int, frozenset[str]] | None = None,
                  ) -> list[tuple[Instruction, int, Index]]:
    """The (user, operand number, operand index) that read `value`, by XLA's rules.

    A get-tuple-element, copy, tuple or domain reads only the top of its
    operand, so for a value inside a tuple only the other users (and the
    computation roots among the value's positions) are looked at; `readers`
    caches those per instruction and `root_reads` each root's operand names,
    which keeps wide tuples linear.
    """
    if value._more is None and not value.index and not value.inst.is_root:
        return _array_uses(value.inst, cache)
    root_reads = root_reads if root_reads is not None else {}
    roots = [inst for inst, _ in value.positions if inst.is_root]
    root_ids = {id(r) for r in roots}
    uses: list[tuple[Instruction, int, Index]] = []
    for inst, index in value.positions:
        if index:
            key = id(inst)
            users = readers.get(key) if readers is not None else None
            if users is None:
                users = tuple(u for u in inst.users if u.opcode not in _PASS_THROUGH)
                if readers is not None:
                    readers[key] = users
            if roots:
                users = users + tuple(r for r in roots if r.opcode in _PASS_THROUGH
                                      and inst.name in _operand_names(r, root_reads)
                                      and r.computation is inst.computation)
        else:
            users = inst.users
        name = inst.name
        for user in users:
            if id(user) in root_ids or _may_use(user, index):
                names = user.operand_names
                if len(names) > _WIDE:
                    where: Iterable[int] = operand_positions(user, cache).get(name, ())
                else:
                    where = [i for i, n in enumerate(names) if n == name]
                for i in where:
                    uses.append((user, i, index))
    return uses


def _array_uses(inst: Instruction, cache: dict[int, dict[str, list[int]]] | None,
                ) -> list[tuple[Instruction, int, Index]]:
    """`_compute_uses` of a value held only where it is defined, an array, not at a root
    (most values): every user reads it, but a tuple or domain (which read only the top)."""
    name = inst.name
    uses: list[tuple[Instruction, int, Index]] = []
    for user in inst.users:
        if user.opcode == "tuple" or user.opcode == "domain":
            continue
        names = user.operand_names
        if len(names) > _WIDE:
            for i in operand_positions(user, cache).get(name, ()):
                uses.append((user, i, ()))
        else:
            for i, n in enumerate(names):
                if n == name:
                    uses.append((user, i, ()))
    return uses


def _operand_names(inst: Instruction, cache: dict[int, frozenset[str]]) -> frozenset[str]:
    names = cache.get(id(inst))
    if names is None:
        names = cache[id(inst)] = frozenset(inst.operand_names)
    return names


def operand_positions(user: Instruction, cache: dict[int, dict[str, list[int]]] | None = None,
                      ) -> dict[str, list[int]]:
    """Operand name -> the operand numbers where `user` reads it.

    `cache` (keyed by ``id(user)``; the caller keeps the instructions alive while
    it uses the cache) saves rescanning long operand lists.
    """
    if cache is not None:
        hit = cache.get(id(user))
        if hit is not None:
            return hit
    out: dict[str, list[int]] = {}
    for i, n in enumerate(user.operand_names):
        out.setdefault(n, []).append(i)
    if cache is not None:
        cache[id(user)] = out
    return out


@dataclass(frozen=True, slots=True)
class Buffer:
    """Values that must share one piece of memory (sorted by value id); `size` is the largest."""

    id: int
    values: tuple[Value, ...]
    size: int


@dataclass(slots=True)
class Dataflow:
    """The values and buffers of a module (see the module docstring)."""

    module: Module
    computations: list[Computation]          # the control-flow computations
    values: list[Value]                      # sorted by id
    # instruction -> index -> values; for an instruction that only defines one array value
    # (most), that value itself (see `values_at` and `sets_of`).
    value_sets: dict[Instruction, dict[Index, list[Value]] | Value]
    buffers: list[Buffer] = field(default_factory=list)
    buffer_of: dict[int, Buffer] = field(default_factory=dict)  # value id -> buffer
    kinds: list[str] | None = None  # allocation kind by buffer id (`classify_buffers`)
    _use_caches: tuple[dict[int, dict[str, list[int]]], dict[int, tuple[Instruction, ...]],
                       dict[int, frozenset[str]]] = field(default_factory=lambda: ({}, {}, {}))

    def values_at(self, inst: Instruction, index: Index = ()) -> Sequence[Value]:
        """The values that may be in `inst`'s output at `index` (none for an instruction
        outside the control-flow computations, or an index its shape lacks)."""
        sets = self.value_sets.get(inst)
        if sets is None:
            return _NO_VALUES
        if type(sets) is Value:
            return _NO_VALUES if index else (sets,)
        return sets.get(index, _NO_VALUES)  # type: ignore[union-attr]

    def sets_of(self, inst: Instruction) -> dict[Index, list[Value]]:
        """Shape index -> the values that may be there, for every index of `inst`."""
        return _as_dict(self.value_sets.get(inst))

    def defined_by(self, inst: Instruction) -> list[Value]:
        """Values `inst` defines, in shape-index order."""
        stored = self.value_sets.get(inst)
        if type(stored) is Value:
            return [stored]
        sets = _as_dict(stored)
        out = [v for vals in sets.values() for v in vals if v.inst is inst]
        if len(out) > 1 and len(set(map(id, out))) < len(out):  # held at two indices
            return list({v.id: v for v in out}.values())
        return out

    def uses_of(self, v: Value) -> list[tuple[Instruction, int, Index]]:
        """`v.uses`, with this dataflow's caches for wide instructions."""
        return _compute_uses(v, *self._use_caches)


_NO_VALUES: list[Value] = []
_NO_SETS: dict[Index, list[Value]] = {}


def _as_dict(sets: dict[Index, list[Value]] | Value | None) -> dict[Index, list[Value]]:
    """Value sets by shape index, from their stored form (a bare value: its own, at ``()``)."""
    if sets is None:
        return _NO_SETS
    if type(sets) is Value:
        return {(): [sets]}  # type: ignore[list-item]
    return sets  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# The analysis
# ---------------------------------------------------------------------------


class _Plan:
    """Where the values of a called computation's parameter come from.

    Either `forward` (an async-update's or async-done's chain tuple, at a prefix) or
    `sources`, the instructions whose values reach it: the callers' operands (and a
    loop body's root), each with how many times it is an input.  The union of their
    values is kept per shape index as counts, updated from the sources that changed
    (`dirty`) only, so a computation with thousands of call sites (a body shared by
    many loops) costs time in proportion to its call sites, not their square.  With
    `need_phi` (loops, branches) the parameter holds a phi when more than one input
    reaches it, else the union of the values (calls).
    """

    __slots__ = ("counts", "dirty", "forward", "frozen", "mult", "multi", "need_phi", "param",
                 "snapshot", "sources", "totals")

    def __init__(self, param: Instruction) -> None:
        self.param = param
        self.forward: tuple[Instruction, Index] | None = None
        self.need_phi = False
        # Set once every index holds the parameter's own phi (`_Builder._update_parameter`):
        # a phi stays a phi whatever else reaches it, so its sources are no longer followed
        # and its inputs are counted once, after propagation.
        self.frozen = False
        self.sources: dict[int, Instruction] = {}
        self.mult: dict[int, int] = {}
        self.dirty: dict[int, Instruction] = {}
        # Each source's values when last folded in, by position in the parameter's indices.
        self.snapshot: dict[int, list[list[Value]]] = {}
        self.counts: dict[Index, dict[int, int]] = {}
        self.totals: dict[Index, int] = {}
        self.multi = 0  # indices with two or more inputs

    def add_source(self, src: Instruction) -> None:
        """`src`'s values reach the parameter (once more, when it is already a source)."""
        k = id(src)
        if k not in self.sources:
            self.sources[k] = src
            self.mult[k] = 0
        self.mult[k] += 1

    def update(self, sets: dict[Instruction, dict[Index, list[Value]] | Value],
               indices: Collection[Index]) -> list[Index]:
        """Fold the dirty sources' current values into the counts; the indices that changed."""
        touched: dict[Index, None] = {}
        for k, src in self.dirty.items():
            src_sets = _as_dict(sets.get(src))
            snap = self.snapshot.get(k)
            if snap is None:
                if not any(src_sets.get(index) for index in indices):
                    continue  # nothing reaches the parameter from there yet
                snap = self.snapshot[k] = [_NO_VALUES] * len(indices)
            m = self.mult[k]
            for i, index in enumerate(indices):
                new = src_sets.get(index, _NO_VALUES)
                old = snap[i]
                if new is old or not (new or old):
                    continue
                counts = self.counts.setdefault(index, {})
                for v in old:
                    c = counts[v.id] - m
                    if c:
                        counts[v.id] = c
                    else:
                        del counts[v.id]
                for v in new:
                    counts[v.id] = counts.get(v.id, 0) + m
                before = self.totals.get(index, 0)
                total = self.totals[index] = before + m * (len(new) - len(old))
                self.multi += (total > 1) - (before > 1)
                snap[i] = new
                touched[index] = None
            if self.need_phi and self.multi == len(indices):
                # Two or more inputs everywhere: a phi at every index, whatever the other
                # sources hold (the plan is then `frozen`, its inputs recounted at the end).
                self.dirty = {}
                return list(indices)
        self.dirty = {}
        return list(touched)

    def recount(self, sets: dict[Instruction, dict[Index, list[Value]] | Value],
                indices: Collection[Index]) -> None:
        """The distinct values that reach each index from every source (in the order of the
        sources), after propagation, for a `frozen` plan (`totals` are not kept)."""
        src_sets = [_as_dict(sets.get(src)) for src in self.sources.values()]
        self.counts = {}
        for index in indices:
            counts = self.counts[index] = {}
            for ss in src_sets:
                for v in ss.get(index, _NO_VALUES):
                    counts[v.id] = 1


class _Builder:
    """One dataflow analysis: value sets per instruction, propagated to a fixed point
    (`initialize`, `propagate`, `optimize_phis`, `finish`)."""

    def __init__(self, module: Module) -> None:
        self.module = module
        # Value sets by instruction (see `Dataflow.value_sets`); those of an instruction that
        # never takes values from others and defines one array (most) are that value.
        self.sets: dict[Instruction, dict[Index, list[Value]] | Value] = {}
        self.values: dict[int, Value] = {}
        self.next_id = 0
        self.phis = PhiGraph()
        self.deleted: set[int] = set()
        self.comps = control_flow_computations(module)
        self.callers: dict[str, list[Instruction]] = {
            c.name: [i for i in module.callers(c) if i.opcode in CONTROL_FLOW_OPCODES]
            for c in self.comps}
        self.in_place = InPlacePairs()
        # Instructions that pass their operands through (`_passthrough`), by id: where
        # each output index comes from.
        self.passing: dict[int, tuple[tuple[Index, int], ...]] = {
            id(inst): fwd for comp in self.comps for inst in comp.instructions
            if inst.opcode in PASSING_OPCODES and passes_through(inst)
            and (fwd := forwarded_operands(inst))}
        self.callees: dict[tuple[int, str | None], Computation | None] = {}
        self.plans: dict[int, _Plan] = {}
        self.fed: dict[int, list[Instruction]] = {}  # id(source) -> parameters it feeds
        for comp in self.comps:
            callers = self.callers[comp.name]
            if callers:
                for inst in comp.instructions:
                    if inst.opcode == "parameter":
                        self._plan(inst, callers)

    def new_value(self, inst: Instruction, index: Index, is_phi: bool = False) -> Value:
        """A new value defined by `inst` at `index` (ids in creation order)."""
        v = Value(self.next_id, inst, index, is_phi)
        self.next_id += 1
        self.values[v.id] = v
        return v

    # -- parameters of called computations -------------------------------------------
    def _plan(self, param: Instruction, callers: list[Instruction]) -> None:
        """Where `param` (of a computation run by `callers`) takes its values from."""
        comp = param.computation
        number = param.parameter_number
        plan = self.plans[id(param)] = _Plan(param)
        for call in callers:
            op = call.opcode
            if op == "while":
                plan.add_source(operand(call, 0))
                body = self._callee(call, "body")
                if body is not None and body.instructions and param is not body.root:
                    plan.add_source(body.root)
                plan.need_phi = True
            elif op == "conditional":
                branches = call.called_computation_names
                for j in [j for j, n in enumerate(branches) if n == comp.name] or [0]:
                    if j + 1 < len(call.operand_names):
                        plan.add_source(operand(call, j + 1))
                plan.need_phi = True
            elif op in ("call", "async-start"):
                if 0 <= number < len(call.operand_names):
                    plan.add_source(operand(call, number))
            else:  # async-update / async-done: the wrapped operands live in the chain tuple
                plan.forward = (operand(call, 0), (0, number))
                plan.sources = {id(plan.forward[0]): plan.forward[0]}
                break
        for k, src in plan.sources.items():
            self.fed.setdefault(k, []).append(param)
        plan.dirty = dict(plan.sources)

    def _update_parameter(self, param: Instruction) -> bool:
        """Recompute a called computation's parameter from its plan; whether it changed."""
        plan = self.plans.get(id(param))
        if plan is None:
            return False
        if plan.forward is not None:
            src, prefix = plan.forward
            return self._forward(param, src, src_prefix=prefix)
        vs = self.sets[param]
        changed = False
        for index in plan.update(self.sets, vs):
            counts = plan.counts.get(index, {})
            if plan.need_phi:
                changed |= self._resolve_phi(param, index, counts, plan.totals.get(index, 0))
            else:
                changed |= self._set(param, index, [self.values[i] for i in counts])
        if plan.need_phi and all(len(vals) == 1 and vals[0].is_phi and vals[0].inst is param
                                 and vals[0].index == index for index, vals in vs.items()):
            plan.frozen = True
            plan.snapshot, plan.counts, plan.totals = {}, {}, {}
        return changed

    def _resolve_phi(self, inst: Instruction, index: Index, counts: dict[int, int],
                     total: int) -> bool:
        """XLA's Phi for one index of a parameter: `total` inputs (counting repeats) with
        the distinct values in `counts`.  A phi's inputs are registered after propagation."""
        vs = self.sets[inst]
        cur = vs.get(index)
        current = cur[0] if cur else None
        defined_here = current is not None and current.inst is inst and current.index == index
        if total <= 0:
            return False
        if total == 1:
            new = self.values[next(iter(counts))]
            if current is new:
                return False
            if current is not None and defined_here:
                self.deleted.add(current.id)
            vs[index] = [new]
            return True
        if current is not None and defined_here and current.is_phi:
            return False
        vs[index] = [self.new_value(inst, index, is_phi=True)]
        return True

    def _register_parameter_phis(self) -> None:
        """Give each parameter phi its final inputs in the phi graph (not registered while
        propagating: a shared loop body's phi has as many inputs as there are loops)."""
        for plan in self.plans.values():
            if not plan.need_phi:
                continue
            if plan.frozen:  # count every source's final values once
                plan.recount(self.sets, self.sets[plan.param])
            for index, vals in self.sets[plan.param].items():
                if len(vals) == 1 and vals[0].is_phi and vals[0].inst is plan.param \
                        and vals[0].index == index:
                    self.phis.register(vals[0], [self.values[i]
                                                 for i in plan.counts.get(index, {})])
        # Propagation is over: what fed the parameters (a snapshot of every call site's
        # values) is dropped before the phis are folded, the analysis's largest moment.
        self.plans = {}
        self.fed = {}
        self.callees = {}

    # -- definitions -------------------------------------------------------------
    def initialize(self) -> None:
        """Every instruction's own values (`_defined_indices`), before any propagation."""
        for comp in self.comps:
            is_callee = bool(self.callers[comp.name])
            for inst in comp.instructions:
                idxs = indices(inst.shape)
                if len(idxs) == 1 and inst.opcode not in _FORWARDING_OPCODES \
                        and id(inst) not in self.passing:
                    self.sets[inst] = self.new_value(inst, ())
                    continue
                vs: dict[Index, list[Value]] = {i: [] for i in idxs}
                self.sets[inst] = vs
                for index in self._defined_indices(inst, idxs, is_callee):
                    vs[index].append(self.new_value(inst, index))

    def _defined_indices(self, inst: Instruction, idxs: list[Index],
                         is_callee: bool) -> Iterable[Index]:
        op = inst.opcode
        shape = inst.shape
        if op in _NO_VALUE_OPCODES:
            return ()
        if id(inst) in self.passing:  # an array: its operand's; a tuple: its pointer table
            return ((),) if shape.is_tuple else ()
        if op == "parameter":
            return () if is_callee else idxs
        if op in ("copy", "tuple"):
            return ((),)
        if op == "async-start":
            return [i for i in idxs if shape.subshape(i).is_tuple or (i and i[0] > 1)]
        if op in ("async-update", "async-done"):
            return [i for i in idxs if shape.subshape(i).is_tuple]
        if op == "copy-start":
            return [i for i in idxs if i in ((), (0,), (2,))]
        if op == "all-gather-start":
            return [i for i in idxs if shape.subshape(i).is_tuple or (i and i[0] == 1)]
        if op in ("all-gather-done", "collective-permute-done"):
            return ((),) if shape.is_tuple else ()
        if op == "collective-permute-start":
            out = [i for i in idxs if len(i) <= 1 and i != (0,)]
            n = len(inst.operand_names)
            if n == 4:
                second = operand(inst, 1)
                if second.shape.is_tuple:
                    out += [(1, i) for i in range(len(second.shape.tuple_shapes))]
            elif n > 1:
                out += [(1, i) for i in range(n)]
            return [i for i in out if i in idxs]
        if op == "recv-done":
            return [i for i in idxs if i in ((), (1,))]
        if op == "send":
            return [i for i in idxs if i in ((), (1,), (2,))]
        return idxs

    # -- propagation ---------------------------------------------------------------
    def _set(self, inst: Instruction, index: Index, new: list[Value]) -> bool:
        """Set `inst`'s values at `index` (sorted, once each); whether they changed."""
        vs = self.sets[inst]
        cur = vs.get(index)
        if cur is None:
            return False
        if len(new) > 1:
            new = sorted({v.id: v for v in new}.values(), key=lambda v: v.id)
        if cur == new:  # one object per value: compared by identity
            return False
        vs[index] = new
        return True

    def _forward(self, inst: Instruction, src: Instruction, src_prefix: Index = (),
                 dst_prefix: Index = (), skip_top: bool = False, arrays_only: bool = False) -> bool:
        """Copy `src`'s value sets under `src_prefix` to `inst` under `dst_prefix`.

        Only the indices that can match are visited (those of the destination when
        reading one element of a tuple), so a get-tuple-element of a wide tuple costs
        the size of its own shape.
        """
        stored = self.sets.get(src)
        dsets = self.sets[inst]
        if type(stored) is Value:  # an array defined there (most operands): one value at ()
            if src_prefix or dst_prefix not in dsets or (skip_top and not dst_prefix) or (
                    arrays_only and inst.shape.subshape(dst_prefix).is_tuple):
                return False
            cur = dsets[dst_prefix]  # type: ignore[index]
            if len(cur) == 1 and cur[0] is stored:
                return False
            dsets[dst_prefix] = [stored]  # type: ignore[index]
            return True
        ssets = _as_dict(stored)
        if src_prefix and not dst_prefix:
            pairs: Iterable[tuple[Index, Index]] = ((src_prefix + d, d) for d in dsets)
        else:
            n = len(src_prefix)
            pairs = ((s, dst_prefix + s[n:]) for s in ssets if s[:n] == src_prefix)
        changed = False
        for sidx, didx in pairs:
            vals = ssets.get(sidx)
            if vals is None or didx not in dsets or (skip_top and not didx):
                continue
            if arrays_only and inst.shape.subshape(didx).is_tuple:
                continue
            if dsets[didx] != vals:  # type: ignore[index]
                # Stored sets are sorted and hold each value once: the list is shared (no
                # set is changed in place, only replaced).
                dsets[didx] = vals  # type: ignore[index]
                changed = True
        return changed

    def _phi(self, inst: Instruction, inputs: list[Instruction]) -> bool:
        """XLA's Phi at every index of `inst` (a while or a conditional).  New inputs of a
        phi that stays are registered but are no change: the value sets are the same."""
        changed = False
        vs = self.sets[inst]
        srcs = [_as_dict(self.sets.get(src)) for src in inputs]
        for index, cur_list in vs.items():
            current = cur_list[0] if cur_list else None
            ids: list[Value] = []
            for ssets in srcs:
                ids.extend(ssets.get(index, _NO_VALUES))
            defined_here = (current is not None and current.inst is inst
                            and current.index == index)
            if not ids:
                continue
            if len(ids) == 1:
                new = ids[0]
                if current is None or current is not new:
                    if current is not None and defined_here:
                        self.deleted.add(current.id)
                    vs[index] = [new]
                    changed = True
            elif current is None or not (defined_here and current.is_phi):
                phi = self.new_value(inst, index, is_phi=True)
                vs[index] = [phi]
                self.phis.register(phi, ids)
                changed = True
            elif not self.phis.inputs_equal(current, ids):
                self.phis.register(current, ids)
        return changed

    def update(self, inst: Instruction) -> bool:
        """Recompute the value sets of `inst` from where its values come; whether they changed."""
        op = inst.opcode
        passing = self.passing.get(id(inst))
        if passing is not None:
            changed = False
            for dst, i in passing:
                changed |= self._forward(inst, operand(inst, i), dst_prefix=dst)
            return changed
        if op == "get-tuple-element":
            return self._forward(inst, operand(inst, 0), src_prefix=(gte_index(inst),))
        if op == "tuple":
            changed = False
            by_name = inst.computation.by_name
            for i, name in enumerate(inst.operand_names):
                src = by_name.get(name)
                changed |= self._forward(inst, src if src is not None else operand(inst, i),
                                         dst_prefix=(i,))
            return changed
        if op == "while":
            body = self._callee(inst, "body")
            if body is None or not body.instructions:
                return False
            return self._phi(inst, [body.root, operand(inst, 0)])
        if op in ("bitcast", "add-dependency", "domain", "opt-barrier", "all-reduce-done"):
            return self._forward(inst, operand(inst, 0))
        if op == "copy":
            return self._forward(inst, operand(inst, 0), skip_top=True)
        if op == "parameter":
            return self._update_parameter(inst)
        if op == "call":
            comp = self._callee(inst)
            return self._forward(inst, comp.root) if comp is not None and comp.instructions \
                else False
        if op == "conditional":
            roots = [c.root for c in inst.called_computations if c.instructions]
            return self._phi(inst, roots) if roots else False
        if op == "send":
            return self._forward(inst, operand(inst, 0), dst_prefix=(0,))
        if op == "recv-done":
            return self._forward(inst, operand(inst, 0), src_prefix=(0,), dst_prefix=(0,))
        if op == "copy-start":
            return self._forward(inst, operand(inst, 0), dst_prefix=(1,), arrays_only=True)
        if op == "copy-done":
            return self._forward(inst, operand(inst, 0), src_prefix=(0,))
        if op == "all-gather-start":
            return self._gather_operands(inst, lambda i, n: (0, i) if n > 1 else (0,))
        if op == "all-gather-done":
            return self._forward(inst, operand(inst, 0), src_prefix=(1,), arrays_only=True)
        if op == "collective-permute-start":
            n = len(inst.operand_names)
            if n > 1 and n != 4:
                return self._gather_operands(inst, lambda i, _n: (0, i))
            return self._forward(inst, operand(inst, 0), dst_prefix=(0,))
        if op == "collective-permute-done":
            return self._forward(inst, operand(inst, 0), src_prefix=(1,),
                                 arrays_only=inst.shape.is_tuple)
        if op == "async-start":
            changed = False
            for i in range(len(inst.operand_names)):
                changed |= self._forward(inst, operand(inst, i), dst_prefix=(0, i),
                                         arrays_only=True)
            comp = self._callee(inst)
            if comp is not None and comp.instructions:
                changed |= self._forward(inst, comp.root, dst_prefix=(1,), arrays_only=True)
            return changed
        if op == "async-update":
            return self._forward(inst, operand(inst, 0), arrays_only=True)
        if op == "async-done":
            return self._forward(inst, operand(inst, 0), src_prefix=(1,), arrays_only=True)
        return False

    def _gather_operands(self, inst: Instruction, dst: Callable[[int, int], Index]) -> bool:
        """Each operand's top-level values to `inst` at ``dst(i, operand count)``."""
        changed = False
        n = len(inst.operand_names)
        for i in range(n):
            vals = _as_dict(self.sets.get(operand(inst, i))).get((), [])
            changed |= self._set(inst, dst(i, n), list(vals))
        return changed

    def _callee(self, inst: Instruction, key: str | None = None) -> Computation | None:
        """The computation `inst` runs (its `key` attribute's, e.g. a while's body), found
        once per instruction."""
        cache_key = (id(inst), key)
        if cache_key in self.callees:
            return self.callees[cache_key]
        names = inst.called_computation_names
        if key is not None:
            v = inst.attr(key)
            names = (v.lstrip("%"),) if v else names
        comp = None
        if names:
            try:
                comp = self.module.computation(names[0])
            except HloModelError:
                comp = None
        self.callees[cache_key] = comp
        return comp

    def propagate(self) -> None:
        """Update value sets until nothing changes, instructions in the order they run (a
        worklist ordered by the flattened schedule), only those that take values from others.

        Raises `HloModelError` if the sets keep changing far longer than any module needs
        (they cannot, on a module that passed `check_module`; this is the last guard)."""
        # The instructions that take values from others, in the order they run (their rank
        # there is their priority).  The worklist is a flag per rank, swept upwards, and a
        # heap of the ranks queued again behind the sweep.
        rank: dict[Instruction, int] = {}  # by the instruction itself: no id() int objects
        order: list[Instruction] = []
        passing = self.passing
        sets = self.sets
        steps = 0
        entered: set[str] = set()
        for event, inst, _caller in walk_schedule(self.module):
            if event == INSTRUCTION:
                steps += 1
                if (inst.opcode in _FORWARDING_OPCODES or id(inst) in passing) \
                        and inst in sets and inst not in rank:
                    rank[inst] = len(order)  # type: ignore[index]
                    order.append(inst)  # type: ignore[arg-type]
            elif event == ENTER:
                entered.add(inst.name)
        for comp in self.comps:  # computations not reached from the entry
            steps += len(comp.instructions)
            if comp.name not in entered:
                for inst in comp.instructions:
                    if (inst.opcode in _FORWARDING_OPCODES or id(inst) in passing) \
                            and inst not in rank:
                        rank[inst] = len(order)
                        order.append(inst)
        budget = 64 * (steps + len(self.values)) + 10_000
        queued = bytearray(b"\x01") * len(order)
        heap: list[int] = []
        sweep = 0  # every rank below it that is queued is in `heap`

        def add(inst: Instruction) -> None:
            r = rank.get(inst)
            if r is not None and not queued[r]:
                queued[r] = 1
                if r < sweep:
                    heapq.heappush(heap, r)

        update = self.update
        fed = self.fed
        while True:
            nxt = queued.find(1, sweep)
            if heap and (nxt < 0 or heap[0] < nxt):
                r = heapq.heappop(heap)
            elif nxt >= 0:
                r = nxt
                sweep = nxt + 1
            else:
                break
            queued[r] = 0
            inst = order[r]
            budget -= 1
            if budget < 0:
                raise HloModelError(f"the dataflow of module {self.module.name} does not "
                                    f"settle (still changing at {inst.name})",
                                    hint="the module text is inconsistent; re-export it from XLA")
            if not update(inst):
                continue
            for user in inst.computation.users(inst):
                add(user)
            k = id(inst)
            if k in fed:
                for param in fed[k]:
                    plan = self.plans[id(param)]
                    if not plan.frozen:
                        plan.dirty[k] = inst
                        add(param)
            if inst.is_root:
                for call in self.callers.get(inst.computation.name, ()):
                    add(call)
        self._register_parameter_phis()

    def optimize_phis(self) -> None:
        """Fold phis (`PhiGraph.optimize`) and put what each stands for in every value set."""
        self.phis.optimize()
        find = self.phis.find
        for vs in self.sets.values():
            if type(vs) is Value:
                continue  # an instruction's own value, never a phi
            for index, vals in vs.items():  # type: ignore[union-attr]
                if len(vals) == 1:
                    v = vals[0]
                    if v.is_phi:
                        new_id = find(v.id)
                        if new_id != v.id:
                            self.deleted.add(v.id)
                            vs[index] = [self.values[new_id]]
                elif any(v.is_phi for v in vals):
                    # A union (a computation called from several places) holding phis.
                    merged: dict[int, Value] = {}
                    for v in vals:
                        new_id = find(v.id) if v.is_phi else v.id
                        if new_id != v.id:
                            self.deleted.add(v.id)
                        merged[new_id] = self.values[new_id]
                    vs[index] = sorted(merged.values(), key=lambda v: v.id)
        self.phis.release()

    def finish(self) -> Dataflow:
        """Drop folded values, record every value's positions and build the buffers."""
        for vid in self.deleted:
            self.values.pop(vid, None)
        sets = self.sets
        for comp in self.comps:
            for inst in comp.instructions:
                stored = sets[inst]
                if type(stored) is Value:
                    continue  # the instruction's own value, held there only
                for index, vals in stored.items():  # type: ignore[union-attr]
                    for v in vals:
                        if v.inst is not inst:
                            v.add_position(inst, index)
        values = list(self.values.values())  # ids were given in increasing order
        df = Dataflow(self.module, self.comps, values, self.sets)
        _build_buffers(df, self.callers, self.in_place, self.deleted)
        return df


def control_flow_computations(module: Module) -> list[Computation]:
    """The entry and every computation it reaches through control flow, in printed order."""
    reached = {module.entry.name}
    work = [module.entry]
    while work:
        comp = work.pop()
        for inst in comp.instructions:
            if inst.opcode in CONTROL_FLOW_OPCODES:
                for name in inst.called_computation_names:
                    if name not in reached:
                        reached.add(name)
                        work.append(module.computation(name))
    return [c for c in module.computations if c.name in reached]


def _build_buffers(df: Dataflow, callers: dict[str, list[Instruction]],
                   in_place: InPlacePairs, deleted: set[int]) -> None:
    """Group the values into buffers (see the module docstring): a union-find over value
    ids in flat arrays, `joined` marking the values that share with another (every other
    value is a buffer of its own).

    Only the instructions whose values share with others are visited (the entry's root,
    computation roots, in-place operations, loop operands, loops' parameters), each index
    once with every value there: which values end up together does not depend on the
    order of the unions, and the root of each group is its lowest id.
    """
    size = df.values[-1].id + 1 if df.values else 0  # a larger id is a deleted value's
    parent = array("q", range(size))
    joined = bytearray(size)
    sets = df.value_sets

    def ids_at(inst: Instruction, index: Index) -> list[int]:
        stored = sets.get(inst)
        if stored is None:
            return []
        if type(stored) is Value:
            return [] if index else [stored.id]  # type: ignore[union-attr]
        return [v.id for v in stored.get(index, _NO_VALUES)  # type: ignore[union-attr]
                if v.id not in deleted]

    def join(ids: list[int]) -> None:
        """Put every value in `ids` in one buffer."""
        ra = -1
        for b in ids:
            while parent[b] != b:  # find, halving the path
                parent[b] = parent[parent[b]]
                b = parent[b]
            if ra < 0:
                ra = b
            elif b != ra:
                if b < ra:
                    ra, b = b, ra
                parent[b] = ra
                joined[ra] = joined[b] = 1

    def share(inst: Instruction, index: Index, others: Iterable[tuple[Instruction, Index]]
              ) -> None:
        """The values at `inst`'s `index` share memory with those at each of `others`."""
        here = ids_at(inst, index)
        if here:
            for other, oidx in others:
                here += ids_at(other, oidx)
            join(here)

    # (callers, index) -> a value of the group the callers' values at index were joined in
    # (None when they hold none): a computation run by thousands of loops is read once.
    groups: dict[tuple[int, Index], int | None] = {}

    def share_with_calls(here: list[int], calls: list[Instruction], index: Index) -> None:
        """The values `here` share memory with those of each of `calls` at `index`."""
        if not here:
            return
        key = (id(calls), index)
        if key in groups:
            rep = groups[key]
            if rep is not None:
                join([*here, rep])
            return
        there = [i for c in calls for i in ids_at(c, index)]
        groups[key] = there[0] if there else None
        join(here + there)

    module = df.module
    entry = module.entry
    entry_params = {p.parameter_number: p for p in entry.parameters}
    donated: dict[Index, list[tuple[Instruction, Index]]] = {}
    for out_idx, pnum, pidx, _kind in module.input_output_alias:
        if pnum in entry_params:
            donated.setdefault(out_idx, []).append((entry_params[pnum], pidx))
    # Entry outputs aliased with parameters (donated buffers).
    if entry.instructions and donated:
        root = entry.root
        for index in df.sets_of(root):
            if index in donated:
                share(root, index, donated[index])
    for comp in df.computations:
        calls = callers.get(comp.name, ())
        # While loop state, conditional results: a loop body's or a branch's root.
        sharers = [c for c in calls if c.opcode == "conditional" or (
            c.opcode == "while" and (c.attr("body", "") or "").lstrip("%") == comp.name)]
        loops = [c for c in calls if c.opcode == "while"]
        if loops == sharers:
            loops = sharers  # one group per index for both
        if sharers and comp.instructions:
            root = comp.root
            for index in df.sets_of(root):
                share_with_calls(ids_at(root, index), sharers, index)
        for inst in comp.instructions:
            op = inst.opcode
            # The parameters of a loop's computations hold the loop's state.
            if op == "parameter" and loops:
                for v in df.defined_by(inst):
                    if v.id not in deleted:
                        share_with_calls([v.id], loops, v.index)
            # In-place operations.
            if op in IN_PLACE_OPCODES:
                for index, pairs in in_place.by_output(inst).items():
                    share(inst, index, [(operand(inst, opnum), opidx) for opnum, opidx in pairs
                                        if opnum < len(inst.operand_names)])
            # A loop's operand: a while reads the whole of it.
            whiles = [u for u in inst.users if u.opcode == "while"]
            if whiles:
                for index in df.sets_of(inst):
                    share(inst, index, [(w, index) for w in whiles])
    # Buffers in the order of their first (lowest-id) value, which is the union's root.
    members: dict[int, list[Value]] = {}
    for v in df.values:
        if joined[v.id]:
            b = v.id
            while parent[b] != b:
                b = parent[b]
            members.setdefault(b, []).append(v)
    for v in df.values:
        if not joined[v.id]:
            vals: tuple[Value, ...] = (v,)
        elif v.id in members:
            vals = tuple(members.pop(v.id))
        else:
            continue  # in the buffer of a value that came before it
        buf = Buffer(len(df.buffers), vals, max(x.size for x in vals))
        df.buffers.append(buf)
        for x in vals:
            df.buffer_of[x.id] = buf


def analyze_dataflow(module: Module) -> Dataflow:
    """Values (SSA, with phis folded) and buffers of `module`'s control-flow computations."""
    with paused_gc():
        check_module(module)
        b = _Builder(module)
        b.initialize()
        b.propagate()
        b.optimize_phis()
        return b.finish()
