"""Values and buffers: which instruction outputs hold their own memory.

This follows XLA's `HloDataflowAnalysis` (in SSA form, bitcasts not defining
values) and `HloAliasAnalysis` closely enough that the live ranges built on it
(`_liverange`) reproduce XLA's own figures:

* a *value* is one array (or tuple pointer table) written by one instruction
  at one shape index.  Instructions that only pass data through (bitcast,
  get-tuple-element, tuple elements, while/call/conditional results, called
  computations' parameters, async and copy-start/done halves) define no new
  value; where several values can reach one place (a while loop's state, a
  conditional's result) a *phi* value stands for them, and phis that turn
  out to carry a single value are folded away as XLA does.
* a *buffer* is a set of values that must share memory: a while loop's
  state across its init, body and result; conditional branch results; an
  in-place operation's operand and result (dynamic-update-slice, scatter,
  fusions rooted at them, custom-calls and fusions with
  output_to_operand_aliasing); entry parameters aliased to outputs.

Only computations reached through control flow (entry, while bodies and
conditions, conditional branches, calls, async wrapped computations) take
part; fused and other embedded computations run inside one kernel.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from .._errors import HloModelError
from .._hlo._module import Computation, Instruction, Module
from .._hlo._shape import Shape
from ._inplace import in_place_pairs
from ._phigraph import PhiGraph

__all__ = [
    "CONTROL_FLOW_OPCODES",
    "Buffer",
    "Dataflow",
    "Value",
    "analyze_dataflow",
    "operand_positions",
]

Index = tuple[int, ...]

# Opcodes whose called computations run as part of the caller's dataflow.
CONTROL_FLOW_OPCODES = frozenset({"call", "while", "conditional", "async-start",
                                  "async-update", "async-done"})

_NO_VALUE_OPCODES = frozenset({"bitcast", "add-dependency", "while", "call", "conditional",
                               "get-tuple-element", "domain", "opt-barrier",
                               "copy-done", "all-reduce-done"})


class Value:
    """One SSA value: what `inst` writes at shape index `index`.

    `positions` are every (instruction, index) that holds the value, the
    defining one first; `uses` the (instruction, operand number, operand
    index) that read it, by XLA's rules.
    """

    __slots__ = ("_uses", "id", "index", "inst", "is_phi", "positions", "shape", "size")

    def __init__(self, vid: int, inst: Instruction, index: Index, is_phi: bool) -> None:
        self.id = vid
        self.inst = inst
        self.index = index
        self.is_phi = is_phi
        self.shape: Shape = inst.shape.subshape(index) if index else inst.shape
        self.size: int = self.shape.byte_size  # bytes (a tuple's pointer table for a tuple)
        self.positions: list[tuple[Instruction, Index]] = [(inst, index)]
        self._uses: list[tuple[Instruction, int, Index]] | None = None

    @property
    def label(self) -> str:
        """``name{index}`` as XLA's dumps print it."""
        return f"{self.inst.name}{{{','.join(map(str, self.index))}}}"

    def __repr__(self) -> str:
        return f"<Value {self.id} {self.label}{' (phi)' if self.is_phi else ''}>"

    @property
    def uses(self) -> list[tuple[Instruction, int, Index]]:
        if self._uses is None:
            self._uses = _compute_uses(self)
        return self._uses


def _may_use(user: Instruction, index: Index) -> bool:
    op = user.opcode
    if op == "get-tuple-element" or op == "copy":
        return not index
    return op != "tuple" and op != "domain"


_PASS_THROUGH = frozenset({"get-tuple-element", "copy", "tuple", "domain"})


def _compute_uses(value: Value, cache: dict[int, dict[str, list[int]]] | None = None,
                  readers: dict[int, tuple[Instruction, ...]] | None = None,
                  ) -> list[tuple[Instruction, int, Index]]:
    """The (user, operand number, operand index) that read `value`, by XLA's rules.

    A get-tuple-element, copy, tuple or domain reads only the top of its
    operand, so for a value inside a tuple only the other users (and the
    computation roots among the value's positions) are looked at; `readers`
    caches those per instruction, which keeps wide tuples linear.
    """
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
                                      and inst.name in r.operand_names
                                      and r.computation is inst.computation)
        else:
            users = inst.users
        for user in users:
            if id(user) in root_ids or _may_use(user, index):
                for i in operand_positions(user, cache).get(inst.name, ()):
                    uses.append((user, i, index))
    return uses


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
    value_sets: dict[int, dict[Index, list[Value]]]  # id(instruction) -> index -> values
    buffers: list[Buffer] = field(default_factory=list)
    buffer_of: dict[int, Buffer] = field(default_factory=dict)  # value id -> buffer

    def values_at(self, inst: Instruction, index: Index = ()) -> list[Value]:
        return self.value_sets[id(inst)].get(index, [])

    def defined_by(self, inst: Instruction) -> list[Value]:
        """Values `inst` defines, in shape-index order."""
        out = []
        for vals in self.value_sets[id(inst)].values():
            for v in vals:
                if v.inst is inst and v not in out:
                    out.append(v)
        return out


# ---------------------------------------------------------------------------
# Shape indices
# ---------------------------------------------------------------------------

_index_cache: dict[int, tuple[Shape, list[Index]]] = {}


def _indices(shape: Shape) -> list[Index]:
    """Every subshape index of `shape` in pre-order (``()`` first)."""
    if not shape.is_tuple:
        return [()]
    hit = _index_cache.get(id(shape))
    if hit is not None and hit[0] is shape:
        return hit[1]
    out: list[Index] = [()]
    for i, s in enumerate(shape.tuple_shapes):
        out.extend((i, *sub) for sub in _indices(s))
    _index_cache[id(shape)] = (shape, out)
    return out


# ---------------------------------------------------------------------------
# The analysis
# ---------------------------------------------------------------------------

class _Builder:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.sets: dict[int, dict[Index, list[Value]]] = {}
        self.values: dict[int, Value] = {}
        self.next_id = 0
        self.phis = PhiGraph()
        self.deleted: set[int] = set()
        self.comps = _control_flow_computations(module)
        self.callers: dict[str, list[Instruction]] = {
            c.name: [i for i in module.callers(c) if i.opcode in CONTROL_FLOW_OPCODES]
            for c in self.comps}

    def new_value(self, inst: Instruction, index: Index, is_phi: bool = False) -> Value:
        v = Value(self.next_id, inst, index, is_phi)
        self.next_id += 1
        self.values[v.id] = v
        return v

    # -- definitions -------------------------------------------------------------
    def initialize(self) -> None:
        for comp in self.comps:
            is_callee = bool(self.callers[comp.name])
            for inst in comp.instructions:
                idxs = _indices(inst.shape)
                vs: dict[Index, list[Value]] = {i: [] for i in idxs}
                self.sets[id(inst)] = vs
                for index in self._defined_indices(inst, idxs, is_callee):
                    vs[index].append(self.new_value(inst, index))

    @staticmethod
    def _defined_indices(inst: Instruction, idxs: list[Index], is_callee: bool) -> Iterable[Index]:
        op = inst.opcode
        shape = inst.shape
        if op in _NO_VALUE_OPCODES:
            return ()
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
                operand = inst.operands[1]
                if operand.shape.is_tuple:
                    out += [(1, i) for i in range(len(operand.shape.tuple_shapes))]
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
        vs = self.sets[id(inst)]
        cur = vs.get(index)
        if cur is None:
            return False
        new = sorted({v.id: v for v in new}.values(), key=lambda v: v.id)
        if [v.id for v in cur] == [v.id for v in new]:
            return False
        vs[index] = new
        return True

    def _forward(self, inst: Instruction, src: Instruction, src_prefix: Index = (),
                 dst_prefix: Index = (), skip_top: bool = False, arrays_only: bool = False) -> bool:
        """Copy `src`'s value sets under `src_prefix` to `inst` under `dst_prefix`."""
        changed = False
        ssets = self.sets[id(src)]
        n = len(src_prefix)
        for sidx, vals in ssets.items():
            if sidx[:n] != src_prefix:
                continue
            rest = sidx[n:]
            if skip_top and not rest and not dst_prefix:
                continue
            didx = dst_prefix + rest
            if arrays_only and inst.shape.subshape(didx).is_tuple:
                continue
            changed |= self._set(inst, didx, list(vals))
        return changed

    def _phi(self, inst: Instruction, inputs: list[Instruction]) -> bool:
        changed = False
        vs = self.sets[id(inst)]
        for index, cur_list in vs.items():
            current = cur_list[0] if cur_list else None
            ids: list[Value] = []
            for src in inputs:
                ids.extend(self.sets[id(src)].get(index, []))
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
            else:
                if current is None or not (defined_here and current.is_phi):
                    phi = self.new_value(inst, index, is_phi=True)
                    vs[index] = [phi]
                    self.phis.register(phi, ids)
                    changed = True
                elif not self.phis.inputs_equal(current, ids):
                    self.phis.register(current, ids)
                    changed = True
        return changed

    def update(self, inst: Instruction) -> bool:
        op = inst.opcode
        if op in ("bitcast", "add-dependency"):
            return self._forward(inst, inst.operands[0])
        if op in ("domain", "opt-barrier", "all-reduce-done"):
            return self._forward(inst, inst.operands[0])
        if op == "copy":
            return self._forward(inst, inst.operands[0], skip_top=True)
        if op == "get-tuple-element":
            return self._forward(inst, inst.operands[0], src_prefix=(int(inst.attr("index", "0") or 0),))
        if op == "tuple":
            changed = False
            for i, operand in enumerate(inst.operands):
                changed |= self._forward(inst, operand, dst_prefix=(i,))
            return changed
        if op == "parameter":
            return self._update_parameter(inst)
        if op == "call":
            comp = self._callee(inst)
            return self._forward(inst, comp.root) if comp is not None else False
        if op == "while":
            body = self._callee(inst, "body")
            if body is None:
                return False
            return self._phi(inst, [body.root, inst.operands[0]])
        if op == "conditional":
            roots = [c.root for c in inst.called_computations]
            return self._phi(inst, roots) if roots else False
        if op == "send":
            return self._forward(inst, inst.operands[0], dst_prefix=(0,))
        if op == "recv-done":
            return self._forward(inst, inst.operands[0], src_prefix=(0,), dst_prefix=(0,))
        if op == "copy-start":
            return self._forward(inst, inst.operands[0], dst_prefix=(1,), arrays_only=True)
        if op == "copy-done":
            return self._forward(inst, inst.operands[0], src_prefix=(0,))
        if op == "all-gather-start":
            changed = False
            ops = inst.operands
            for i, operand in enumerate(ops):
                dst = (0, i) if len(ops) > 1 else (0,)
                changed |= self._set(inst, dst, list(self.sets[id(operand)].get((), [])))
            return changed
        if op == "all-gather-done":
            return self._forward(inst, inst.operands[0], src_prefix=(1,), arrays_only=True)
        if op == "collective-permute-start":
            ops = inst.operands
            if len(ops) > 1 and len(ops) != 4:
                changed = False
                for i, operand in enumerate(ops):
                    changed |= self._set(inst, (0, i), list(self.sets[id(operand)].get((), [])))
                return changed
            return self._forward(inst, ops[0], dst_prefix=(0,), skip_top=False)
        if op == "collective-permute-done":
            return self._forward(inst, inst.operands[0], src_prefix=(1,), arrays_only=inst.shape.is_tuple)
        if op == "async-start":
            changed = False
            for i, operand in enumerate(inst.operands):
                changed |= self._forward(inst, operand, dst_prefix=(0, i), arrays_only=True)
            comp = self._callee(inst)
            if comp is not None:
                changed |= self._forward(inst, comp.root, dst_prefix=(1,), arrays_only=True)
            return changed
        if op == "async-update":
            return self._forward(inst, inst.operands[0], arrays_only=True)
        if op == "async-done":
            return self._forward(inst, inst.operands[0], src_prefix=(1,), arrays_only=True)
        return False

    def _callee(self, inst: Instruction, key: str | None = None) -> Computation | None:
        names = inst.called_computation_names
        if key is not None:
            v = inst.attr(key)
            names = (v.lstrip("%"),) if v else names
        if not names:
            return None
        try:
            return self.module.computation(names[0])
        except HloModelError:
            return None

    def _update_parameter(self, param: Instruction) -> bool:
        comp = param.computation
        callers = self.callers.get(comp.name, [])
        if not callers:
            return False
        inputs: list[Instruction] = []
        need_phi = False
        for call in callers:
            op = call.opcode
            if op == "while":
                inputs.append(call.operands[0])
                body = self._callee(call, "body")
                if body is not None and param is not body.root:
                    inputs.append(body.root)
                need_phi = True
            elif op == "conditional":
                branches = call.called_computation_names
                j = branches.index(comp.name) if comp.name in branches else 0
                inputs.append(call.operands[j + 1])
                need_phi = True
            elif op in ("call", "async-start"):
                if param.parameter_number < len(call.operand_names):
                    inputs.append(call.operands[param.parameter_number])
            else:  # async-update / async-done: the wrapped operands live in the chain tuple
                return self._forward(param, call.operands[0], src_prefix=(0, param.parameter_number))
        if need_phi:
            return self._phi(param, inputs)
        changed = False
        vs = self.sets[id(param)]
        for index in vs:
            union: list[Value] = []
            for src in inputs:
                union.extend(self.sets[id(src)].get(index, []))
            changed |= self._set(param, index, union)
        return changed

    def propagate(self) -> None:
        prio: dict[int, int] = {}
        _post_order(self.module.entry, prio, self.module, set())
        for comp in self.comps:  # computations not reached from the entry
            for inst in comp.instructions:
                prio.setdefault(id(inst), len(prio))
        heap: list[tuple[int, int]] = []
        inset: set[int] = set()
        by_key: dict[int, Instruction] = {}

        def add(inst: Instruction) -> None:
            k = id(inst)
            if k in self.sets and k not in inset:
                inset.add(k)
                by_key[k] = inst
                heapq.heappush(heap, (prio.get(k, 0), k))

        for comp in self.comps:
            for inst in comp.instructions:
                add(inst)
        while heap:
            _, k = heapq.heappop(heap)
            inset.discard(k)
            inst = by_key[k]
            if not self.update(inst):
                continue
            for user in inst.users:
                add(user)
                uop = user.opcode
                if uop == "conditional":
                    for j, branch in enumerate(user.called_computations):
                        if j + 1 < len(user.operand_names) and user.operand_names[j + 1] == inst.name:
                            for p in branch.parameters:
                                add(p)
                elif uop in ("async-update", "async-done"):
                    comp = self._callee(user)
                    if comp is not None:
                        for p in comp.parameters:
                            add(p)
                elif uop in CONTROL_FLOW_OPCODES:
                    positions = [i for i, n in enumerate(user.operand_names) if n == inst.name]
                    for called in user.called_computations:
                        params = called.parameters
                        for i in positions:
                            if uop == "while":
                                for p in params:
                                    add(p)
                            elif i < len(params):
                                add(_param(called, i))
            if inst.is_root:
                for call in self.callers.get(inst.computation.name, []):
                    add(call)
                    if call.opcode == "while":
                        for c in call.called_computations:
                            for p in c.parameters:
                                add(p)

    def optimize_phis(self) -> None:
        self.phis.optimize()
        for vs in self.sets.values():
            for index, vals in vs.items():
                if len(vals) == 1 and vals[0].is_phi:
                    new_id = self.phis.find(vals[0].id)
                    if new_id != vals[0].id:
                        self.deleted.add(vals[0].id)
                        vs[index] = [self.values[new_id]]

    def finish(self) -> Dataflow:
        for vid in self.deleted:
            self.values.pop(vid, None)
        for comp in self.comps:
            for inst in comp.instructions:
                for index, vals in self.sets[id(inst)].items():
                    for v in vals:
                        if v.inst is not inst:
                            v.positions.append((inst, index))
        values = sorted(self.values.values(), key=lambda v: v.id)
        cache: dict[int, dict[str, list[int]]] = {}
        readers: dict[int, tuple[Instruction, ...]] = {}
        for v in values:
            v._uses = _compute_uses(v, cache, readers)
        df = Dataflow(self.module, self.comps, values, self.sets)
        _build_buffers(df)
        return df


def _param(comp: Computation, number: int) -> Instruction:
    for p in comp.parameters:
        if p.parameter_number == number:
            return p
    return comp.parameters[number]


def _post_order(comp: Computation, prio: dict[int, int], module: Module, seen: set[str]) -> None:
    if comp.name in seen:
        return
    seen.add(comp.name)
    for inst in comp.instructions:
        op = inst.opcode
        if op in ("call", "async-start", "conditional"):
            for c in inst.called_computations:
                _post_order(c, prio, module, seen)
        elif op == "while":
            for key in ("condition", "body"):
                v = inst.attr(key)
                if v:
                    _post_order(module.computation(v.lstrip("%")), prio, module, seen)
        prio.setdefault(id(inst), len(prio))


def _control_flow_computations(module: Module) -> list[Computation]:
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


def _build_buffers(df: Dataflow) -> None:
    parent = {v.id: v.id for v in df.values}

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a: Value, vals: Iterable[Value]) -> None:
        ra = find(a.id)
        for b in vals:
            if b.id not in parent:
                continue
            rb = find(b.id)
            if rb != ra:
                lo, hi = (ra, rb) if ra < rb else (rb, ra)
                parent[hi] = lo
                ra = lo

    module = df.module
    entry = module.entry
    io_alias = module.input_output_alias
    entry_params = {p.parameter_number: p for p in entry.parameters}
    callers = {c.name: [i for i in module.callers(c) if i.opcode in CONTROL_FLOW_OPCODES]
               for c in df.computations}
    for v in df.values:
        for inst, index in v.positions:
            # Entry outputs aliased with parameters (donated buffers).
            if inst is entry.root:
                for out_idx, pnum, pidx, _kind in io_alias:
                    if out_idx == index and pnum in entry_params:
                        union(v, df.values_at(entry_params[pnum], pidx))
            # While loop state, conditional results.
            if inst.is_root:
                for call in callers.get(inst.computation.name, []):
                    if call.opcode == "while" and call.attr("body", "").lstrip("%") == inst.computation.name or call.opcode == "conditional":
                        union(v, df.values_at(call, index))
            # In-place operations.
            for opnum, opidx, outidx in in_place_pairs(inst) if inst.opcode in _IN_PLACE_OPS else ():
                if outidx == index and opnum < len(inst.operand_names):
                    union(v, df.values_at(inst.operands[opnum], opidx))
        for user, _opnum, opidx in v.uses:
            if user.opcode == "while":
                union(v, df.values_at(user, opidx))
        if v.inst.opcode == "parameter":
            for call in callers.get(v.inst.computation.name, []):
                if call.opcode == "while":
                    union(v, df.values_at(call, v.index))
    groups: dict[int, list[Value]] = {}
    for v in df.values:
        groups.setdefault(find(v.id), []).append(v)
    for i, (_root, vals) in enumerate(sorted(groups.items())):
        buf = Buffer(i, tuple(vals), max(v.size for v in vals))
        df.buffers.append(buf)
        for v in vals:
            df.buffer_of[v.id] = buf


_IN_PLACE_OPS = frozenset({"dynamic-update-slice", "scatter", "all-reduce-start", "collective-permute",
                           "collective-permute-start", "fusion", "custom-call", "async-start",
                           "set-dimension-size", "ragged-all-to-all"})


def analyze_dataflow(module: Module) -> Dataflow:
    """Values (SSA, with phis folded) and buffers of `module`'s control-flow computations."""
    b = _Builder(module)
    b.initialize()
    b.propagate()
    b.optimize_phis()
    return b.finish()
