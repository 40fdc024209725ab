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
from collections.abc import Callable, Iterable

from .._errors import HloModelError
from .._hlo._module import Computation, Instruction, Module
from ._buffers import build_buffers
from ._callsites import CallSites
from ._check import check_module
from ._inplace import InPlacePairs
from ._passthrough import PASSING_OPCODES, forwarded_operands, passes_through
from ._phigraph import PhiGraph
from ._shapes import indices
from ._values import NO_VALUES, Buffer, Dataflow, Index, Value, as_dict, operand_positions
from ._walk import ENTER, INSTRUCTION, gte_index, operand, paused_gc, walk_schedule

__all__ = [
    "CONTROL_FLOW_OPCODES",
    "DEFINES_NOTHING",
    "Buffer",
    "Dataflow",
    "Value",
    "analyze_dataflow",
    "control_flow_computations",
    "operand_positions",
]

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
# Opcodes of the instructions that define no value at all (a while or a conditional defines
# none of its own but its phis).
DEFINES_NOTHING = _NO_VALUE_OPCODES - {"while", "conditional"}


class _Builder:
    """One dataflow analysis: value sets per instruction, propagated to a fixed point
    (`initialize`, `propagate`, `optimize_phis`, `finish`)."""

    def __init__(self, module: Module) -> None:
        self.module = module
        # Value sets by instruction (see `Dataflow.value_sets`); those of an instruction that
        # never takes values from others and defines one array (most) are that value.
        self.sets: dict[Instruction, dict[Index, list[Value]] | Value] = {}
        self.values: list[Value] = []  # by id (ids are dense, in creation order)
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
        self.callees: dict[tuple[str, str, tuple[str, ...], str | None],
                           Computation | None] = {}
        self.plans: dict[int, CallSites] = {}
        self.fed: dict[int, list[Instruction]] = {}  # id(source) -> parameters it feeds
        for comp in self.comps:
            callers = self.callers[comp.name]
            if callers:
                for inst in comp.instructions:
                    if inst.opcode == "parameter":
                        self._plan(inst, callers)

    def new_value(self, inst: Instruction, index: Index, is_phi: bool = False) -> Value:
        """A new value defined by `inst` at `index` (ids in creation order)."""
        v = Value(len(self.values), inst, index, is_phi)
        self.values.append(v)
        return v

    # -- parameters of called computations -------------------------------------------
    def _plan(self, param: Instruction, callers: list[Instruction]) -> None:
        """Where `param` (of a computation run by `callers`) takes its values from."""
        comp = param.computation
        number = param.parameter_number
        plan = self.plans[id(param)] = CallSites(param)
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
                    self.phis.register_ids(vals[0].id, list(plan.counts.get(index, ())))
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
                # Empty sets are one shared list (sets are replaced, never changed in place).
                vs: dict[Index, list[Value]] = dict.fromkeys(idxs, NO_VALUES)
                self.sets[inst] = vs
                for index in self._defined_indices(inst, idxs, is_callee):
                    vs[index] = [*vs[index], self.new_value(inst, index)]

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
        ssets = as_dict(stored)
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
        sets = self.sets
        vs = sets[inst]
        values = self.values
        register = self.phis.register_ids
        srcs = [as_dict(sets.get(src)) for src in inputs]
        for index, cur_list in vs.items():  # type: ignore[union-attr]
            ids: list[Value] = []
            for ssets in srcs:
                got = ssets.get(index)
                if got:
                    ids += got
            if not ids:
                continue
            current = cur_list[0] if cur_list else None
            defined_here = (current is not None and current.inst is inst
                            and current.index == index)
            if len(ids) == 1:
                new = ids[0]
                if current is None or current is not new:
                    if current is not None and defined_here:
                        self.deleted.add(current.id)
                    vs[index] = [new]  # type: ignore[index]
                    changed = True
            elif current is None or not (defined_here and current.is_phi):
                phi = Value(len(values), inst, index, True)  # `new_value`, inlined
                values.append(phi)
                vs[index] = [phi]  # type: ignore[index]
                register(phi.id, [v.id for v in ids])
                changed = True
            elif not self.phis.inputs_equal(current, ids):
                self.phis.register(current, ids)
        return changed

    def update(self, inst: Instruction) -> bool:
        """Recompute the value sets of `inst` from where its values come; whether they changed."""
        op = inst.opcode
        passing = self.passing.get(id(inst)) if op in PASSING_OPCODES else None
        if passing is not None:
            changed = False
            for dst, i in passing:
                changed |= self._forward(inst, operand(inst, i), dst_prefix=dst)
            return changed
        if op == "get-tuple-element":
            src = operand(inst, 0)
            stored = self.sets.get(src)
            if type(stored) is not dict:  # an array or nothing: no element to read
                return False
            dsets = self.sets[inst]
            if len(dsets) > 1:  # type: ignore[arg-type]
                return self._forward(inst, src, src_prefix=(gte_index(inst),))
            # An array element (most): its one set, shared.
            vals = stored.get((gte_index(inst),))
            if vals is None or dsets[()] == vals:  # type: ignore[index]
                return False
            dsets[()] = vals  # type: ignore[index]
            return True
        if op == "tuple":
            changed = False
            sets = self.sets
            dsets = sets[inst]
            by_name = inst.computation.by_name
            for i, name in enumerate(inst.operand_names):
                src = by_name.get(name)
                if src is None:
                    src = operand(inst, i)
                stored = sets.get(src)
                if type(stored) is Value:  # an array defined there (most): `_forward`, inlined
                    cur = dsets.get((i,))  # type: ignore[union-attr]
                    if cur is not None and not (len(cur) == 1 and cur[0] is stored):
                        dsets[(i,)] = [stored]  # type: ignore[index]
                        changed = True
                else:
                    changed |= self._forward(inst, src, dst_prefix=(i,))
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
            vals = as_dict(self.sets.get(operand(inst, i))).get((), [])
            changed |= self._set(inst, dst(i, n), list(vals))
        return changed

    def _callee(self, inst: Instruction, key: str | None = None) -> Computation | None:
        """The computation `inst` runs (its `key` attribute's, e.g. a while's body), found
        once per distinct attribute text."""
        # What decides the answer (the instruction's attributes and implied calls), not
        # the instruction: thousands of loops sharing a body and condition are one entry.
        cache_key = (inst.attr_text, inst.sugar, inst.implicit_calls, key)
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
        plans = self.plans
        callers = self.callers
        rank_of = rank.get
        push = heapq.heappush
        find = queued.find
        while True:
            nxt = find(1, sweep)
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
            for user in inst.computation.users(inst):  # `add`, inlined
                u = rank_of(user)
                if u is not None and not queued[u]:
                    queued[u] = 1
                    if u < sweep:
                        push(heap, u)
            k = id(inst)
            if k in fed:
                for param in fed[k]:
                    plan = plans[id(param)]
                    if not plan.frozen:
                        plan.dirty[k] = inst
                        add(param)
            if inst.is_root:
                for call in callers.get(inst.computation.name, ()):
                    add(call)
        self._register_parameter_phis()

    def optimize_phis(self) -> None:
        """Fold phis (`PhiGraph.optimize`) and put what each stands for in every value set."""
        self.phis.optimize()
        if not self.phis.folds:  # no phi folded: every set stays as it is
            self.phis.release()
            return
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
        sets = self.sets
        for comp in self.comps:
            for inst in comp.instructions:
                stored = sets[inst]
                if type(stored) is Value:
                    continue  # the instruction's own value, held there only
                for index, vals in stored.items():  # type: ignore[union-attr]
                    for v in vals:
                        if v.inst is not inst:  # `Value.add_position`, inlined
                            more = v._more
                            if more is None:
                                v._more = [(inst, index)]
                            else:
                                more.append((inst, index))
        deleted = self.deleted
        values = [v for v in self.values if v.id not in deleted] if deleted else self.values
        df = Dataflow(self.module, self.comps, values, self.sets)
        build_buffers(df, self.callers, self.in_place, self.deleted)
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


def analyze_dataflow(module: Module) -> Dataflow:
    """Values (SSA, with phis folded) and buffers of `module`'s control-flow computations."""
    with paused_gc():
        check_module(module)
        b = _Builder(module)
        b.initialize()
        b.propagate()
        b.optimize_phis()
        return b.finish()
