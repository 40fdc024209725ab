"""An estimate of XLA's temporary allocation: temporaries packed in one heap.

XLA's buffer assignment gives entry parameters, constants and outputs their
own allocations.  Going through the buffers largest first, it lets a buffer
reuse an operand's allocation or an earlier output's (or donated
parameter's) allocation when their lives do not overlap; it packs every
other buffer into one ``preallocated-temp`` allocation with a heap
simulator, where a fused elementwise kernel may write its result over an
operand that dies at that step, offsets are aligned (64 bytes on CPU, 128
on GPU), and of two decreasing-size best-fit packings (by size, and by
lifetime) the smaller wins.  This module follows that recipe over
hloscope's own live ranges.  It is an estimate: XLA's packer also splits
and colocates in ways not visible in the HLO text.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from .._hlo._module import Computation, Instruction
from ._dataflow import Dataflow, Value, operand_positions
from ._inplace import in_place_pairs
from ._liverange import LiveRanges

__all__ = ["ELEMENTWISE_OPCODES", "HeapEstimate", "classify_buffers", "estimate_temp"]

ELEMENTWISE_OPCODES = frozenset({
    "abs", "round-nearest-afz", "round-nearest-even", "ceil", "count-leading-zeros", "convert",
    "bitcast-convert", "copy", "cosine", "erf", "exponential", "exponential-minus-one", "floor",
    "imag", "is-finite", "log", "log-plus-one", "not", "negate", "popcnt", "real",
    "reduce-precision", "rsqrt", "logistic", "sign", "sine", "sqrt", "cbrt", "tan", "tanh",
    "add", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "power",
    "remainder", "subtract", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "stochastic-convert", "select", "clamp", "map",
})


@dataclass(frozen=True, slots=True)
class HeapEstimate:
    """The estimated temp allocation: `size` bytes holding `buffers` temporary buffers."""

    size: int
    alignment: int
    buffers: int
    offsets: dict[int, int]  # value id -> offset in the temp allocation


def classify_buffers(df: Dataflow) -> dict[int, str]:
    """Buffer id -> ``parameter``, ``constant``, ``output`` or ``temporary`` (XLA's allocation kinds)."""
    entry = df.module.entry
    out: dict[int, str] = {}
    for buf in df.buffers:
        kind = "temporary"
        for v in buf.values:
            inst = v.inst
            if inst.opcode == "parameter" and inst.computation is entry:
                kind = "parameter"
                break
            if inst.opcode == "constant":
                kind = "constant"
            elif kind == "temporary" and any(p is entry.root for p, _ in v.positions):
                kind = "output"
        out[buf.id] = kind
    return out


def _alignment(df: Dataflow) -> int:
    for inst in df.module.entry.instructions:
        if inst.opcode == "custom-call":
            t = inst.custom_call_target
            if t.startswith(("__cublas", "__cudnn", "__cusolver", "__gpu", "__triton")):
                return 128
        elif inst.opcode == "fusion" and "fusion_backend_config" in inst.attr_text:
            return 128
    return 64


def _elementwise_uses_only(param: Instruction) -> bool:
    seen: set[int] = set()
    stack = [param]
    while stack:
        cur = stack.pop()
        seen.add(id(cur))
        for user in cur.users:
            if user.opcode != "tuple":
                for i, n in enumerate(user.operand_names):
                    if n == cur.name and not _elementwise_on(user, i):
                        return False
            if id(user) not in seen:
                stack.append(user)
    return True


def _elementwise_on(user: Instruction, operand: int) -> bool:
    if user.opcode == "dynamic-update-slice":
        return operand == 0
    return user.opcode in ELEMENTWISE_OPCODES


_SHARING_OPCODES = ELEMENTWISE_OPCODES | {
    "fusion", "while", "conditional", "dynamic-update-slice", "scatter", "set-dimension-size",
    "triangular-solve", "sort", "custom-call", "all-reduce-start", "collective-permute",
    "collective-permute-start", "async-start", "ragged-all-to-all"}


# Operand positions of the instructions seen during one `estimate_temp` (cleared after it).
_POSITIONS: dict[int, dict[str, list[int]]] = {}


def _never_shares(user: Instruction) -> bool:
    """`user` can never write over one of its operands (a quick test before `_can_share`)."""
    return user.opcode not in _SHARING_OPCODES


def _can_share(operand: Instruction, user: Instruction, user_index: tuple[int, ...]) -> bool:
    """May `user` write its output at `user_index` over `operand`'s buffer (XLA's rule, abridged)?"""
    if operand.opcode == "constant":
        return False
    user_shape = user.shape.subshape(user_index) if user_index else user.shape
    a, b = operand.shape, user_shape
    if a is not b and a != b:
        return False
    positions = operand_positions(user, _POSITIONS).get(operand.name, [])
    for opnum, opidx, outidx in in_place_pairs(user):
        if outidx == user_index and opnum in positions and not opidx:
            return True
    op = user.opcode
    if op == "fusion":
        if user.fusion_kind not in ("kLoop", "kInput") or len(positions) != 1:
            return False
        names = user.called_computation_names
        if not names:
            return False
        fused = user.computation.module.computation(names[0])
        params = [p for p in fused.parameters if p.parameter_number == positions[0]]
        return bool(params) and _elementwise_uses_only(params[0])
    if op in ("while", "conditional"):
        return True
    if op in ("dynamic-update-slice", "scatter", "set-dimension-size"):
        return positions == [0]
    if op == "triangular-solve":
        return positions == [1]
    if op == "sort":
        if len(operand.users) != 1:
            return False
        return len(user.operand_names) == 1 or (len(positions) == 1 and user_index[:1] == (positions[0],))
    if op == "call":
        return False
    return len(positions) == 1 and _elementwise_on(user, positions[0])


def estimate_temp(df: Dataflow, lr: LiveRanges, kinds: dict[int, str] | None = None) -> HeapEstimate:
    """Pack the temporary buffers of `df` over the live ranges `lr` (see the module docstring)."""
    try:
        return _estimate_temp(df, lr, kinds)
    finally:
        _POSITIONS.clear()


def _estimate_temp(df: Dataflow, lr: LiveRanges, kinds: dict[int, str] | None) -> HeapEstimate:
    kinds = kinds if kinds is not None else classify_buffers(df)
    ranges = lr.ranges
    in_allocation = _assign_allocations(df, lr, kinds)
    temp_values = [v for v in df.values if v.id in ranges and kinds[df.buffer_of[v.id].id] == "temporary"
                   and df.buffer_of[v.id].id not in in_allocation]
    temp_ids = {v.id for v in temp_values}
    temp_values.sort(key=lambda v: (ranges[v.id][0], ranges[v.id][1], v.id))
    freed_at: dict[int, set[int]] = {}
    for v in temp_values:
        freed_at.setdefault(ranges[v.id][1], set()).add(v.id)

    # Groups of values placed at one offset: aliased buffers, and results written over an operand.
    group_of: dict[int, int] = {}
    groups: dict[int, list[Value]] = {}
    first_in_buffer: dict[int, int] = {}
    for v in temp_values:
        buf = df.buffer_of[v.id]
        t = ranges[v.id][0]
        if buf.id in first_in_buffer:
            g = group_of[first_in_buffer[buf.id]]
            group_of[v.id] = g
            groups[g].append(v)
            continue
        first_in_buffer[buf.id] = v.id
        shared = None
        if len(buf.values) == 1 and v.inst.opcode != "copy":
            shared = _share_candidate(df, v, t, ranges, temp_ids, freed_at)
        if shared is not None:
            g = group_of[shared.id]
            freed_at[t].discard(shared.id)
        else:
            g = v.id
            groups[g] = []
        group_of[v.id] = g
        groups[g].append(v)

    align = _alignment(df)
    items = []
    for g, vals in groups.items():
        size = max(v.size for v in vals)
        if size <= 0:
            continue
        start = min(ranges[v.id][0] for v in vals)
        end = max(ranges[v.id][1] for v in vals)
        items.append((g, size, start, end))
    # No packing can use less than the most bytes live at one step; when the first order
    # reaches that bound the second cannot do better and is skipped.
    diff = [0] * (lr.end_time + 3)
    for _g, size, start, end in items:
        diff[start] += size
        diff[end + 1] -= size
    bound = 0
    live = 0
    for d in diff:
        live += d
        bound = max(bound, live)
    best: tuple[int, dict[int, int]] | None = None
    for key in (lambda it: (-it[1], -(it[3] - it[2]), it[0]),
                lambda it: (-(it[3] - it[2]), -it[1], it[0])):
        if best is not None and best[0] <= bound:
            break
        size, offsets = _best_fit(sorted(items, key=key), align, lr.end_time)
        if best is None or size < best[0]:
            best = (size, offsets)
    size, offsets = best if best is not None else (0, {})
    value_offsets = {v.id: offsets.get(group_of[v.id], 0) for v in temp_values}
    return HeapEstimate(size, align, len({df.buffer_of[v.id].id for v in temp_values}), value_offsets)


class _Allocation:
    __slots__ = ("mask", "names", "size", "spans", "starts", "writable")

    def __init__(self, size: int, writable: bool) -> None:
        self.size = size
        self.writable = writable
        self.mask = 0  # bit t set when a value in the allocation is live at step t
        self.starts: list[int] = []
        self.spans: list[tuple[int, int, Value]] = []
        self.names: set[tuple[int, str]] = set()  # (computation, instruction) holding a value

    def add(self, v: Value, r: tuple[int, int]) -> None:
        for p, _idx in v.positions:
            self.names.add((id(p.computation), p.name))
        i = bisect.bisect_left(self.starts, r[0])
        self.starts.insert(i, r[0])
        self.spans.insert(i, (r[0], r[1], v))
        self.mask |= ((1 << (r[1] - r[0] + 1)) - 1) << r[0]


class _BusyTree:
    """Which allocations are busy over a range of steps: a segment tree of allocation bitmasks
    (bit i = allocation i), with range-or updates and range-or queries."""

    __slots__ = ("agg", "lazy", "n")

    def __init__(self, steps: int) -> None:
        n = 1
        while n < steps + 2:
            n *= 2
        self.n = n
        self.agg = [0] * (2 * n)
        self.lazy = [0] * (2 * n)

    def add(self, lo: int, hi: int, bit: int) -> None:
        n, agg, lazy = self.n, self.agg, self.lazy
        lo += n
        hi += n + 1
        first, last = lo, hi - 1
        while lo < hi:
            if lo & 1:
                lazy[lo] |= bit
                agg[lo] |= bit
                lo += 1
            if hi & 1:
                hi -= 1
                lazy[hi] |= bit
                agg[hi] |= bit
            lo >>= 1
            hi >>= 1
        for i in (first >> 1, last >> 1):
            while i:
                agg[i] |= bit
                i >>= 1

    def query(self, lo: int, hi: int) -> int:
        if lo > hi:
            return 0
        n, agg, lazy = self.n, self.agg, self.lazy
        lo += n
        hi += n + 1
        first, last = lo, hi - 1
        res = 0
        while lo < hi:
            if lo & 1:
                res |= agg[lo]
                lo += 1
            if hi & 1:
                hi -= 1
                res |= agg[hi]
            lo >>= 1
            hi >>= 1
        for i in (first >> 1, last >> 1):
            while i:
                res |= lazy[i]
                i >>= 1
        return res


def _assign_allocations(df: Dataflow, lr: LiveRanges, kinds: dict[int, str]) -> set[int]:
    """XLA's first pass: buffers, largest first, reuse an operand's or an output's allocation.

    Returns the ids of temporary buffers that found room in an output (or
    donated parameter) allocation and so take no room in the temp heap.
    XLA tries every earlier allocation in turn, smallest first; hloscope asks
    a segment tree which allocations are free over the buffer's lifetime and
    checks exactly only those that meet it at an end point.
    """
    ranges = lr.ranges
    entry = df.module.entry
    aliased = {(p, idx) for _o, p, idx, _k in df.module.input_output_alias}
    # XLA's order: size, live-out first, then the earliest defining instruction in a
    # post order that visits the entry first and callees after their callers.
    position: dict[int, int] = {}
    for comp in [entry] + [c for c in reversed(df.computations) if c is not entry]:
        for inst in _post_order(comp):
            position[id(inst)] = len(position)
    first = {b.id: min(position.get(id(v.inst), 1 << 60) for v in b.values) for b in df.buffers}
    order = sorted(df.buffers, key=lambda b: (-b.size, kinds[b.id] != "output", first[b.id], b.id))
    alloc_of: dict[int, _Allocation] = {}
    reusable: list[_Allocation] = []  # bit i of a busy mask is reusable[i]
    bit_of: dict[int, int] = {}
    busy = _BusyTree(lr.end_time)
    moved: set[int] = set()

    # Per step, the reusable allocations with a value ending there, and those with a value
    # starting there that could be written over an operand: the only ones a buffer may meet
    # at an end point.  Every other allocation busy at a buffer's end points is ruled out
    # with bit operations, without the exact check.
    ends_at: dict[int, int] = {}
    sharing_starts_at: dict[int, int] = {}

    def mark(bit: int, v: Value, r: tuple[int, int]) -> None:
        busy.add(r[0], r[1], bit)
        ends_at[r[1]] = ends_at.get(r[1], 0) | bit
        if not _never_shares(v.inst):
            sharing_starts_at[r[0]] = sharing_starts_at.get(r[0], 0) | bit

    def place(a: _Allocation, vals: list[Value]) -> None:
        bit = bit_of.get(id(a))
        for v in vals:
            r = ranges[v.id]
            a.add(v, r)
            if bit is not None:
                mark(bit, v, r)

    def new_reusable(a: _Allocation) -> None:
        bit = bit_of[id(a)] = 1 << len(reusable)
        reusable.append(a)
        for s0, e0, v in a.spans:
            mark(bit, v, (s0, e0))

    for buf in order:
        kind = kinds[buf.id]
        vals = [v for v in buf.values if v.id in ranges]
        if kind == "constant" or not vals:
            continue
        if kind == "parameter":
            p = next(v for v in buf.values if v.inst.opcode == "parameter" and v.inst.computation is entry)
            writable = (p.inst.parameter_number, p.index) in aliased
            a = _Allocation(buf.size, writable)
            place(a, vals)
            alloc_of[buf.id] = a
            if writable:
                new_reusable(a)
            continue
        live_out = kind == "output"
        mask = 0
        ends = 0
        for v in vals:
            s0, e0 = ranges[v.id]
            mask |= ((1 << (e0 - s0 + 1)) - 1) << s0
            ends |= (1 << s0) | (1 << e0)

        is_copy = any(v.inst.opcode == "copy" for v in vals)
        placed = None
        tried: set[int] = set()
        for v in vals:
            if v.index or v.shape.is_tuple or placed is not None:
                continue
            for operand in v.inst.operands:
                for ov in df.values_at(operand, ()):
                    a = alloc_of.get(df.buffer_of[ov.id].id)
                    if a is not None and id(a) not in tried:
                        tried.add(id(a))
                        if _fits(a, buf.size, live_out, mask, ends, vals, lr):
                            placed = a
                            break
                if placed is not None:
                    break
        if placed is None and reusable:
            inner = 0
            edge = 0
            for v in vals:
                s0, e0 = ranges[v.id]
                inner |= busy.query(s0 + 1, e0 - 1)
                at_start, at_end = busy.query(s0, s0), busy.query(e0, e0)
                edge |= at_start | at_end
                if len(vals) == 1 and s0 < e0:
                    may_start = 0 if _never_shares(v.inst) else ends_at.get(s0, 0)
                    inner |= (at_start & ~may_start) | (at_end & ~sharing_starts_at.get(e0, 0))
            candidates = ((1 << len(reusable)) - 1) & ~inner
            while candidates:
                i = candidates.bit_length() - 1
                candidates ^= 1 << i
                a = reusable[i]
                if id(a) in tried:
                    continue
                if (edge >> i) & 1 or live_out or a.size < buf.size or is_copy:
                    if not _fits(a, buf.size, live_out, mask, ends, vals, lr):
                        continue
                elif not a.writable:
                    continue
                placed = a
                break
        if placed is not None:
            place(placed, vals)
            alloc_of[buf.id] = placed
            if not live_out:
                moved.add(buf.id)
        elif live_out:
            a = _Allocation(buf.size, True)
            place(a, vals)
            alloc_of[buf.id] = a
            new_reusable(a)
    return moved


def _post_order(comp: Computation) -> list[Instruction]:
    """Instructions in depth-first post order from each unused one, operands in order (XLA's)."""
    out: list[Instruction] = []
    done: set[int] = set()
    for start in comp.instructions:
        if start.users or id(start) in done:
            continue
        stack: list[tuple[Instruction, tuple[Instruction, ...], int]] = [
            (start, start.operands, 0)]
        while stack:
            inst, ops, i = stack.pop()
            if i < len(ops):
                stack.append((inst, ops, i + 1))
                op = ops[i]
                if id(op) not in done:
                    stack.append((op, op.operands, 0))
                continue
            if id(inst) not in done:
                done.add(id(inst))
                out.append(inst)
    for inst in comp.instructions:  # cycles or dangling names: keep every instruction
        if id(inst) not in done:
            out.append(inst)
    return out


def _fits(a: _Allocation, size: int, live_out: bool, mask: int, ends: int, vals: list[Value],
          lr: LiveRanges) -> bool:
    """May a buffer of `size` bytes whose values are live over `mask` go into `a`?"""
    if not a.writable or size > a.size or (live_out and a.size != size):
        return False
    overlap = a.mask & mask
    if overlap and (overlap & ~ends or not _touching_ok(a, vals, lr.ranges, lr)):
        return False
    return not _copy_conflict(a, vals)


def _touching_ok(a: _Allocation, vals: list[Value], ranges: dict[int, tuple[int, int]],
                 lr: LiveRanges) -> bool:
    """Values that meet the allocation's values only at an end point: may one overwrite the other?"""
    for v in vals:
        s, e = ranges[v.id]
        i = bisect.bisect_right(a.starts, e)
        for j in range(i - 1, -1, -1):
            s2, e2, w = a.spans[j]
            if e2 >= s:
                if e == s2:
                    if not _may_follow(v, w, lr):
                        return False
                elif e2 == s:
                    if not _may_follow(w, v, lr):
                        return False
                else:
                    return False
            elif s2 < s - 1 and j < i - 4:
                break
    return True


def _copy_conflict(a: _Allocation, vals: list[Value]) -> bool:
    """A copy never writes over the buffer it copies from."""
    for v in vals:
        if v.inst.opcode == "copy":
            comp = id(v.inst.computation)
            if any((comp, n) in a.names for n in v.inst.operand_names):
                return True
    return False


def _may_follow(operand: Value, user: Value, lr: LiveRanges) -> bool:
    """May `user` be written over `operand`, whose life ends where the user's begins?"""
    end_inst = operand.inst
    best = -1
    for p, _idx in operand.positions:
        t = lr.time_of.get(id(p), -1)
        if t > best:
            best, end_inst = t, p
    u = user.inst
    if _never_shares(u):
        return False
    return (u.opcode != "copy" and end_inst.name in u.operand_names
            and end_inst.computation is u.computation and _can_share(end_inst, u, user.index))


def _share_candidate(df: Dataflow, v: Value, t: int, ranges: dict[int, tuple[int, int]],
                     temp_ids: set[int], freed_at: dict[int, set[int]]) -> Value | None:
    user = v.inst
    if _never_shares(user):
        return None
    by_name = user.computation.by_name
    for name in dict.fromkeys(user.operand_names):
        for ov in df.values_at(by_name[name], ()):
            if ov.id not in temp_ids or len(df.buffer_of[ov.id].values) != 1:
                continue
            if ranges[ov.id][1] != t or ov.id not in freed_at.get(t, ()):
                continue
            if ov.size != v.size or ov.inst.name not in user.operand_names:
                continue
            if _can_share(ov.inst, user, v.index):
                return ov
    return None


class _Ranges:
    """Disjoint occupied offset ranges [start, end), kept merged and sorted."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, lo: int, hi: int) -> None:
        starts, ends = self.starts, self.ends
        j = bisect.bisect_left(ends, lo)      # first range ending at or after lo
        k = bisect.bisect_right(starts, hi)   # ranges starting at or before hi
        if j < k:
            lo = min(lo, starts[j])
            hi = max(hi, ends[k - 1])
        starts[j:k] = [lo]
        ends[j:k] = [hi]


def _best_fit(items: list[tuple[int, int, int, int]], align: int,
              end_time: int) -> tuple[int, dict[int, int]]:
    """Place each (group, size, start, end) at the smallest aligned gap free over its lifetime.

    Two segment trees over time find what is occupied during a lifetime: one
    holds each placed chunk at the nodes covering its lifetime (what is alive
    at the start), the other at the nodes above its start (what is born
    inside).  Each node keeps the union of its chunks' offset ranges, merged,
    so a query reads a few short lists however many chunks were placed.
    """
    n = 1
    while n < end_time + 2:
        n *= 2
    alive: list[_Ranges | None] = [None] * (2 * n)
    born: list[_Ranges | None] = [None] * (2 * n)
    offsets: dict[int, int] = {}
    heap_size = 0

    def put(tree: list[_Ranges | None], i: int, lo: int, hi: int) -> None:
        r = tree[i]
        if r is None:
            r = tree[i] = _Ranges()
        r.add(lo, hi)

    for g, size, start, end in items:
        parts: list[_Ranges] = []
        i = start + n
        while i:
            r = alive[i]
            if r is not None:
                parts.append(r)
            i >>= 1
        lo, hi = start + 1 + n, end + n + 1
        while lo < hi:
            if lo & 1:
                r = born[lo]
                if r is not None:
                    parts.append(r)
                lo += 1
            if hi & 1:
                hi -= 1
                r = born[hi]
                if r is not None:
                    parts.append(r)
            lo >>= 1
            hi >>= 1
        if len(parts) == 1:
            busy = list(zip(parts[0].starts, parts[0].ends))
        else:
            busy = sorted(pair for r in parts for pair in zip(r.starts, r.ends))
        best_off = -1
        best_gap = -1
        cur = 0
        for off, stop in busy:
            gap = off - cur
            if gap >= size and (best_gap < 0 or gap < best_gap):
                best_gap, best_off = gap, cur
            if stop > cur:
                cur = -(-stop // align) * align
        if best_off < 0:
            best_off = cur
        offsets[g] = best_off
        top = best_off + size
        heap_size = max(heap_size, top)
        lo, hi = start + n, end + n + 1
        while lo < hi:
            if lo & 1:
                put(alive, lo, best_off, top)
                lo += 1
            if hi & 1:
                hi -= 1
                put(alive, hi, best_off, top)
            lo >>= 1
            hi >>= 1
        i = start + n
        while i:
            put(born, i, best_off, top)
            i >>= 1
    return heap_size, offsets
