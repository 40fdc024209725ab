"""XLA's first buffer-assignment pass: which buffers reuse an output's allocation.

Going through the buffers largest first, XLA lets a buffer reuse an
operand's allocation, or an earlier output's (or donated parameter's)
allocation, when their lives do not overlap (touching at one step is allowed
where the later value may be written over the earlier); outputs that find
none get their own.  XLA tries every earlier allocation in turn, smallest
first.  hloscope gives the same answer without trying every one: an
allocation is a candidate only if it can be free over the buffer's lifetime,
which a segment tree over the allocations answers (per subtree: the latest
first busy step, the earliest last busy step, the longest gap inside), and
only candidates are checked exactly.  So a module with a hundred thousand
outputs costs about a logarithm per buffer, not a hundred thousand tries.

An allocation's values and busy steps are kept in sorted lists made for
insertion anywhere (`sortedcontainers.SortedList`): values arrive in buffer
order, not in schedule order (the bodies of a thousand while loops come last
first), and a plain list's insert moved every later element each time
(quadratic: 428 s for a million values in one allocation).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Sequence
from itertools import chain

from sortedcontainers import SortedList

from .._hlo._module import Computation, Instruction
from ._dataflow import Buffer, Dataflow, Value
from ._liverange import LiveRanges
from ._sharing import Sharing, never_shares

__all__ = ["assign_allocations"]

# What XLA's TPU buffer assignment never puts into an output's allocation.
_TPU_TEMP_ONLY = frozenset({"all-gather", "all-gather-start", "all-to-all", "collective-permute",
                            "collective-permute-start"})

_NONE = -(1 << 62)
_ALL = 1 << 62
# A value's key in its allocation: its first step times _SPAN plus _SPAN - 1 - its
# number (values that start at the same step: the latest added first).
_SPAN = 1 << 32


class _SortedInts:
    """Sorted ints with insertion and removal anywhere: a plain list while each change
    moves few of its elements (bisect on a list is the fastest there: values mostly come
    in schedule order), a `SortedList` from the first change that would move many (a
    list's insert moves every later element: quadratic for a million values added out of
    order, as the bodies of a thousand while loops are).  A SortedList is searched by value
    only: a search by position rebuilds its index after every change."""

    __slots__ = ("items", "big")

    _BIG = 1024

    def __init__(self) -> None:
        self.items: list[int] | SortedList = []
        self.big = False

    def __iter__(self) -> Iterator[int]:
        return iter(self.items)

    def first(self) -> int:
        return self.items[0]

    def last(self) -> int:
        return self.items[-1]

    def add(self, x: int) -> None:
        items = self.items
        if not self.big:
            i = bisect.bisect_right(items, x)
            if len(items) - i <= self._BIG:
                items.insert(i, x)
                return
            items = self._grow()
        items.add(x)

    def remove(self, x: int) -> None:
        items = self.items
        if not self.big:
            i = bisect.bisect_left(items, x)
            if len(items) - i <= self._BIG:
                del items[i]
                return
            items = self._grow()
        items.remove(x)

    def _grow(self) -> SortedList:
        self.items = SortedList(self.items)
        self.big = True
        return self.items

    def down_from(self, x: int) -> Iterator[int]:
        """The items at most `x`, largest first."""
        items = self.items
        if self.big:
            return items.irange(maximum=x, reverse=True)
        return (items[j] for j in range(bisect.bisect_right(items, x) - 1, -1, -1))

    def floor(self, x: int) -> int | None:
        """The largest item at most `x`, if any."""
        if self.big:
            return next(self.items.irange(maximum=x, reverse=True), None)
        i = bisect.bisect_right(self.items, x)
        return self.items[i - 1] if i else None

    def between(self, lo: int, hi: int) -> Iterator[int]:
        """The items in [lo, hi], smallest first."""
        items = self.items
        if self.big:
            return items.irange(lo, hi)
        return (items[j] for j in range(bisect.bisect_left(items, lo),
                                        bisect.bisect_right(items, hi)))


class _Steps:
    """Occupied steps of the schedule: disjoint closed intervals, merged when they overlap
    or touch (steps t and t + 1): their first steps sorted, each one's last step in a
    dictionary."""

    __slots__ = ("hi_of", "los")

    def __init__(self) -> None:
        self.los = _SortedInts()
        self.hi_of: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self.hi_of)

    def first(self) -> int:
        return self.los.first()

    def last(self) -> int:
        return self.hi_of[self.los.last()]

    def add(self, lo: int, hi: int) -> None:
        los, hi_of = self.los, self.hi_of
        a = los.floor(hi + 1)
        if a is not None and a <= lo and hi_of[a] >= lo - 1:
            # The only interval [lo, hi] meets (those before `a` end before a - 1): it
            # grows at its end (the usual case).
            if hi > hi_of[a]:
                hi_of[a] = hi
            return
        met = []  # the intervals [lo, hi] overlaps or touches, latest first
        for a in los.down_from(hi + 1):
            if hi_of[a] < lo - 1:
                break
            met.append(a)
        if met:
            hi = max(hi, hi_of[met[0]])
            lo = min(lo, met[-1])
            for a in met:
                los.remove(a)
                del hi_of[a]
        los.add(lo)
        hi_of[lo] = hi

    def overlaps(self, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """The occupied parts of [lo, hi], in order."""
        hi_of = self.hi_of
        a = self.los.floor(hi)
        if a is None:
            return
        if a <= lo:  # the only interval that may meet [lo, hi]
            if hi_of[a] >= lo:
                yield lo, min(hi_of[a], hi)
            return
        before = self.los.floor(lo)
        start = before if before is not None and hi_of[before] >= lo else lo
        for a in self.los.between(start, hi):
            yield max(a, lo), min(hi_of[a], hi)

    def is_free(self, lo: int, hi: int) -> bool:
        """Whether no step of [lo, hi] is occupied: the last interval starting at or
        before `hi` ends before `lo`."""
        a = self.los.floor(hi)
        return a is None or self.hi_of[a] < lo

    def longest_gap(self) -> int:
        """The most free steps between two occupied intervals."""
        hi_of = self.hi_of
        gap, prev = -1, None
        for a in self.los:
            if prev is not None:
                gap = max(gap, a - hi_of[prev] - 1)
            prev = a
        return gap


class _Allocation:
    """An allocation and the values in it: their spans sorted by start (for the exact
    check of values that meet at one step) and the steps they occupy."""

    __slots__ = ("busy", "ends", "gap", "gap_exact", "index", "size", "spans", "starts",
                 "values", "writable")

    def __init__(self, size: int, writable: bool) -> None:
        self.size = size
        self.writable = writable
        self.index = -1  # position among the reusable allocations
        self.busy = _Steps()
        self.gap = -1          # an upper bound of busy.longest_gap()
        self.gap_exact = True
        # The values in the order they came, their first and last steps; `spans` sorts
        # their numbers by first step (see _SPAN): arrays, not a list of triples (memory).
        self.values: list[Value] = []
        self.starts = array("q")
        self.ends = array("q")
        self.spans = _SortedInts()

    def add(self, v: Value, r: tuple[int, int]) -> None:
        self.spans.add(r[0] * _SPAN + _SPAN - 1 - len(self.values))
        self.values.append(v)
        self.starts.append(r[0])
        self.ends.append(r[1])
        busy = self.busy
        if busy.hi_of:
            first = busy.los.items[0]
            last = busy.hi_of[busy.los.items[-1]]
            if r[1] < first - 1:
                self.gap = max(self.gap, first - r[1] - 1)
            elif r[0] > last + 1:
                self.gap = max(self.gap, r[0] - last - 1)
            else:
                self.gap_exact = False  # may have shrunk a gap: `gap` stays an upper bound
        busy.add(r[0], r[1])

    def tighten_gap(self) -> bool:
        """Make `gap` exact; whether it changed."""
        if self.gap_exact:
            return False
        self.gap_exact = True
        new = self.busy.longest_gap()
        changed = new != self.gap
        self.gap = new
        return changed


class _FreeTree:
    """A segment tree over the reusable allocations (by index) that finds, latest first,
    those that may be free over a range of steps: free before their first busy step, after
    their last, or in a gap inside (by an upper bound of the longest)."""

    __slots__ = ("cap", "count", "first", "gap", "last")

    def __init__(self) -> None:
        self.cap = 1
        self.count = 0
        self.first = [_NONE] * 2   # max over the subtree of the first busy step
        self.last = [_ALL] * 2     # min over the subtree of the last busy step
        self.gap = [-1] * 2        # max over the subtree of the gap bound

    def append(self, a: _Allocation) -> None:
        if self.count == self.cap:
            self._grow()
        self.count += 1
        self.update(a)

    def _grow(self) -> None:
        old, cap = self.cap, self.cap * 2
        first, last, gap = [_NONE] * (2 * cap), [_ALL] * (2 * cap), [-1] * (2 * cap)
        first[cap:cap + old] = self.first[old:2 * old]
        last[cap:cap + old] = self.last[old:2 * old]
        gap[cap:cap + old] = self.gap[old:2 * old]
        for i in range(cap - 1, 0, -1):
            first[i] = max(first[2 * i], first[2 * i + 1])
            last[i] = min(last[2 * i], last[2 * i + 1])
            gap[i] = max(gap[2 * i], gap[2 * i + 1])
        self.cap, self.first, self.last, self.gap = cap, first, last, gap

    def update(self, a: _Allocation) -> None:
        i = a.index + self.cap
        self.first[i], self.last[i], self.gap[i] = a.busy.first(), a.busy.last(), a.gap
        i >>= 1
        first, last, gap = self.first, self.last, self.gap
        while i:
            left, right = 2 * i, 2 * i + 1
            f = first[left] if first[left] > first[right] else first[right]
            la = last[left] if last[left] < last[right] else last[right]
            g = gap[left] if gap[left] > gap[right] else gap[right]
            if f == first[i] and la == last[i] and g == gap[i]:
                break  # the nodes above are made of these: unchanged too
            first[i], last[i], gap[i] = f, la, g
            i >>= 1

    def search(self, lo: int, hi: int, low_index: int) -> Iterator[int]:
        """Indices >= `low_index`, highest first, of allocations that may be free over the
        steps [lo, hi] (a superset: each must still be checked)."""
        need = hi - lo + 1
        first, last, gap = self.first, self.last, self.gap
        stack = [(1, 0, self.cap - 1)]
        while stack:
            node, a, b = stack.pop()
            if b < low_index or a >= self.count:
                continue
            if not (first[node] > hi or last[node] < lo or gap[node] >= need):
                continue
            if a == b:
                yield a
                continue
            mid = (a + b) // 2
            stack.append((2 * node, a, mid))
            stack.append((2 * node + 1, mid + 1, b))


class _StepIndex:
    """Allocation indices by schedule step: the first at each step in a flat array (most
    steps have one; a million steps of dictionary entries would be a lot of memory), the
    others in a dictionary."""

    __slots__ = ("first", "more")

    def __init__(self, steps: int) -> None:
        self.first = array("q", [-1]) * (steps + 2)
        self.more: dict[int, list[int]] = {}

    def add(self, step: int, i: int) -> None:
        f = self.first[step]
        if f < 0:
            self.first[step] = i
        elif f != i:
            extra = self.more.setdefault(step, [])
            if not extra or extra[-1] != i:
                extra.append(i)

    def get(self, step: int) -> list[int]:
        if not 0 <= step < len(self.first) or self.first[step] < 0:
            return []
        return [self.first[step], *self.more.get(step, ())]


class _Reusable:
    """The allocations later buffers may reuse (outputs, donated parameters) in creation
    order (largest first), and what finds candidates among them for a buffer."""

    def __init__(self, steps: int) -> None:
        self.allocs: list[_Allocation] = []
        self.neg_sizes: list[int] = []  # non-decreasing: allocations come largest first
        self.tree = _FreeTree()
        # Per step, the allocations with a value ending there, and those with a value
        # starting there that could be written over an operand: the only ones a value
        # starting or ending at that step may meet (touch) there.
        self.ends_at = _StepIndex(steps)
        self.sharing_starts_at = _StepIndex(steps)

    def __bool__(self) -> bool:
        return bool(self.allocs)

    def can_hold(self, size: int) -> bool:
        """Whether one of the allocations is as large as `size` (the first is the largest)."""
        return bool(self.neg_sizes) and -self.neg_sizes[0] >= size

    def add(self, a: _Allocation) -> None:
        a.index = len(self.allocs)
        self.allocs.append(a)
        self.neg_sizes.append(-a.size)
        self.tree.append(a)
        for s0, e0, v in zip(a.starts, a.ends, a.values):
            self.mark(a.index, v, s0, e0)

    def mark(self, i: int, v: Value, s0: int, e0: int) -> None:
        """`v` was put in the reusable allocation `i` over the steps [s0, e0] (its entry in
        `tree` is brought up to date by the caller, once for all the buffer's values)."""
        self.ends_at.add(e0, i)
        if not never_shares(v.inst):
            self.sharing_starts_at.add(s0, i)

    def candidates(self, size: int, live_out: bool, vals: list[Value],
                   ranges: dict[int, tuple[int, int]]) -> Iterator[_Allocation]:
        """Allocations that may take a buffer of `size` bytes whose values are `vals`,
        smallest (latest) first; every allocation that can take it is among them."""
        low = bisect.bisect_left(self.neg_sizes, -size) if live_out else 0
        if len(vals) == 1:
            s0, e0 = ranges[vals[0].id]
        else:
            s0, e0 = max((ranges[v.id] for v in vals), key=lambda r: (r[1] - r[0], -r[0]))
        if e0 - s0 >= 2:
            # No value of the buffer may share a step inside a value's life with another
            # allocation's value: those steps hold no end point of the buffer's values.
            yield from self._free_over(s0 + 1, e0 - 1, low)
        elif len(vals) == 1:
            touch = set(self.sharing_starts_at.get(e0))
            if not never_shares(vals[0].inst):
                touch.update(self.ends_at.get(s0))
            if touch:
                yield from self._merge(self._free_over(s0, e0, low),
                                       sorted((i for i in touch if i >= low), reverse=True))
            else:
                yield from self._free_over(s0, e0, low)
        else:
            yield from (self.allocs[i] for i in range(len(self.allocs) - 1, low - 1, -1))

    def _free_over(self, lo: int, hi: int, low: int) -> Iterator[_Allocation]:
        """Allocations free over the steps [lo, hi], latest first."""
        for i in self.tree.search(lo, hi, low):
            a = self.allocs[i]
            if a.busy.is_free(lo, hi):
                yield a
            elif a.tighten_gap():
                self.tree.update(a)

    def _merge(self, free: Iterator[_Allocation], touching: list[int]) -> Iterator[_Allocation]:
        """The allocations of both streams (each latest first), latest first, once each."""
        nxt = next(free, None)
        k = 0
        while nxt is not None or k < len(touching):
            if k < len(touching) and (nxt is None or touching[k] >= nxt.index):
                i = touching[k]
                k += 1
                if nxt is not None and nxt.index == i:
                    nxt = next(free, None)
                yield self.allocs[i]
            else:
                assert nxt is not None
                yield nxt
                nxt = next(free, None)


def assign_allocations(df: Dataflow, lr: LiveRanges, kinds: Sequence[str],
                       sharing: Sharing, *, tuples_in_heap: bool = False) -> bytearray:
    """XLA's first pass (see the module docstring).

    Returns, by buffer id, 1 for the temporary buffers that found room in an
    output (or donated parameter) allocation and so take no room in the temp
    heap, else 0.  With `tuples_in_heap` (XLA's TPU buffer assignment) a temporary
    tuple's pointer table never goes into another allocation.
    """
    ranges = lr.ranges
    entry = df.module.entry
    aliased = {(p, idx) for _o, p, idx, _k in df.module.input_output_alias}
    order = _buffer_order(df, kinds)
    alloc_of: dict[int, _Allocation] = {}
    reusable = _Reusable(lr.end_time)
    moved = bytearray(len(df.buffers))  # by buffer id: 1 when in an output's allocation
    read_only = _Allocation(0, False)  # the entry's parameters that are not donated

    neg_sizes = reusable.neg_sizes
    mark, update = reusable.mark, reusable.tree.update

    def place(a: _Allocation, vals: list[Value]) -> None:
        for v in vals:
            r = ranges[v.id]
            a.add(v, r)
            if a.index >= 0:
                mark(a.index, v, *r)
        if a.index >= 0:
            update(a)

    for buf in order:
        kind = kinds[buf.id]
        if kind == "temporary" and not (neg_sizes and -neg_sizes[0] >= buf.size):
            continue  # only reusable allocations (writable, none smaller) can take it
        if kind == "constant":
            continue
        bv = buf.values
        if len(bv) == 1:
            if bv[0].id not in ranges:
                continue
            vals = bv
        else:
            vals = [v for v in bv if v.id in ranges]
            if not vals:
                continue
        if kind == "parameter":
            p = next(v for v in buf.values
                     if v.inst.opcode == "parameter" and v.inst.computation is entry)
            if (p.inst.parameter_number, p.index) in aliased:
                a = _Allocation(buf.size, True)
                place(a, vals)
                alloc_of[buf.id] = a
                reusable.add(a)
            else:
                # No buffer ever goes into it: one shared allocation stands for all of
                # them (a million arguments' steps and values would be a lot of memory).
                alloc_of[buf.id] = read_only
            continue
        live_out = kind == "output"
        if tuples_in_heap and not live_out and buf.values[0].shape.is_tuple:
            continue
        if not live_out and (vals[0].memory_space if len(vals) == 1 else
                             any(v.memory_space for v in vals)):
            continue  # another memory space (a TPU's VMEM): allocations of its own colour
        if tuples_in_heap and not live_out and any(
                v.inst.opcode in _TPU_TEMP_ONLY for v in vals):
            continue  # XLA's TPU assignment keeps these in temp (seen in its dumps)
        fits = _Fit(buf.size, live_out, vals, lr, sharing, df, alloc_of)
        tried: set[int] = set()
        placed = _operand_allocation(df, vals, alloc_of, tried, fits)
        if placed is None and reusable:
            placed = next((a for a in reusable.candidates(buf.size, live_out, vals, ranges)
                           if id(a) not in tried and fits(a)), None)
        if placed is not None:
            place(placed, vals)
            alloc_of[buf.id] = placed
            if not live_out:
                moved[buf.id] = 1
        elif live_out:
            a = _Allocation(buf.size, True)
            place(a, vals)
            alloc_of[buf.id] = a
            reusable.add(a)
    return moved


def _buffer_order(df: Dataflow, kinds: Sequence[str]) -> list[Buffer]:
    """XLA's order: size (largest first), live-out first, then the earliest defining
    instruction in a post order that visits the entry first and callees after their callers,
    then id.  Stable sorts of buffer ids (a buffer's id is its position) from the last key
    to the first, each key read from a flat array: no key tuples, no per-buffer key calls in
    Python, and no map from instruction to position (a million of any is a lot of memory)."""
    entry = df.module.entry
    buffer_of = df.buffer_of
    sets = df.value_sets
    defined_by = df.defined_by
    first_of = array("q", [1 << 60]) * len(df.buffers)  # by buffer id
    pos = 0
    for comp in [entry] + [c for c in reversed(df.computations) if c is not entry]:
        for inst in _post_order(comp):
            stored = sets.get(inst)
            if stored is not None:
                # One array value (most instructions) without the general walk.
                for v in (stored,) if type(stored) is Value else defined_by(inst):
                    b = buffer_of[v.id].id
                    if pos < first_of[b]:
                        first_of[b] = pos
            pos += 1
    order = list(range(len(df.buffers)))
    order.sort(key=first_of.__getitem__)
    order.sort(key=bytes(kind != "output" for kind in kinds).__getitem__)
    order.sort(key=[b.size for b in df.buffers].__getitem__, reverse=True)  # stable too
    return list(map(df.buffers.__getitem__, order))


def _operand_allocation(df: Dataflow, vals: list[Value], alloc_of: dict[int, _Allocation],
                        tried: set[int], fits: _Fit) -> _Allocation | None:
    """The allocation of an operand of the buffer's (array) values that can take it."""
    sets = df.value_sets
    buffer_of = df.buffer_of
    for v in vals:
        if v.index or v.shape.is_tuple:
            continue
        by_name = v.inst.computation.by_name
        for name in v.inst.operand_names:
            stored = sets.get(by_name.get(name))  # `df.values_at(operand)`, inlined
            if stored is None:
                continue
            for ov in (stored,) if type(stored) is Value else stored.get((), ()):
                a = alloc_of.get(buffer_of[ov.id].id)
                if a is not None and id(a) not in tried:
                    tried.add(id(a))
                    if fits(a):
                        return a
    return None


class _Fit:
    """Whether a buffer (its size, whether it is live out, its values) may go into an
    allocation: XLA's exact rule."""

    __slots__ = ("alloc_of", "df", "ends", "live_out", "lr", "sharing", "size", "vals")

    def __init__(self, size: int, live_out: bool, vals: list[Value], lr: LiveRanges,
                 sharing: Sharing, df: Dataflow, alloc_of: dict[int, _Allocation]) -> None:
        self.df = df
        self.alloc_of = alloc_of
        self.size = size
        self.live_out = live_out
        self.vals = vals
        self.lr = lr
        self.sharing = sharing
        self.ends: set[int] | None = None  # the values' first and last steps, on first use

    def __call__(self, a: _Allocation) -> bool:
        if not a.writable or self.size > a.size or (self.live_out and a.size != self.size):
            return False
        ranges = self.lr.ranges
        busy = a.busy
        if len(self.vals) == 1:
            # One value over [s, e] may meet the allocation's only at s or e.
            s, e = ranges[self.vals[0].id]
            if e - s >= 2 and not busy.is_free(s + 1, e - 1):
                return False
            touching = not busy.is_free(s, e)
        else:
            ends = self.ends
            if ends is None:
                ends = self.ends = {t for v in self.vals for t in ranges[v.id]}
            touching = False
            for v in self.vals:
                for lo, hi in busy.overlaps(*ranges[v.id]):
                    # Values may meet the allocation's only at their own end points.
                    if hi - lo >= len(ends) or any(t not in ends for t in range(lo, hi + 1)):
                        return False
                    touching = True
        if touching and not self._touching_ok(a):
            return False
        return not self._copy_conflict(a)

    def _copy_conflict(self, a: _Allocation) -> bool:
        """A copy never writes over the buffer it copies from: is a value its operand holds
        in `a`?"""
        df, alloc_of, ranges = self.df, self.alloc_of, self.lr.ranges
        for v in self.vals:
            if v.inst.opcode != "copy":
                continue
            by_name = v.inst.computation.by_name
            for name in v.inst.operand_names:
                src = by_name.get(name)
                for held in df.sets_of(src).values():
                    for w in held:
                        if w.id in ranges and alloc_of.get(df.buffer_of[w.id].id) is a:
                            return True
        return False

    def _touching_ok(self, a: _Allocation) -> bool:
        """Values that meet the allocation's values only at an end point: may one
        overwrite the other?"""
        ranges = self.lr.ranges
        may_follow = self.sharing.may_follow
        starts, ends, values = a.starts, a.ends, a.values
        last = _SPAN - 1
        spans = a.spans
        for v in self.vals:
            s, e = ranges[v.id]
            # The allocation's values that start at or before `e`, latest start first.
            top = (e + 1) * _SPAN - 1
            if spans.big:
                keys: Iterator[int] = spans.items.irange(maximum=top, reverse=True)
            else:
                items = spans.items
                keys = map(items.__getitem__,
                           range(bisect.bisect_right(items, top) - 1, -1, -1))
            n = 0
            for key in keys:
                k = last - (key & last)
                e2 = ends[k]
                if e2 >= s:
                    if e == starts[k]:
                        if not may_follow(v, values[k]):
                            return False
                    elif e2 == s:
                        if not may_follow(values[k], v):
                            return False
                    else:
                        return False
                elif n >= 4 and starts[k] < s - 1:
                    break
                n += 1
        return True


def _post_order(comp: Computation) -> list[Instruction]:
    """Instructions in depth-first post order from each unused one, operands in order (XLA's)."""
    insts = comp.instructions
    by_name = comp.by_name
    out: list[Instruction] = []
    append = out.append
    # The names of the instructions on the path or out (names are unique in a computation:
    # no id() per operand, and an operand already seen is not even looked up).
    done: set[str] = set()
    used = set(chain.from_iterable(inst.operand_names for inst in insts))
    for start in insts:
        name = start.name
        if name in used or name in done:
            continue
        done.add(name)
        stack = [(start, iter(start.operand_names))]
        while stack:
            inst, names = stack[-1]
            for name in names:
                if name in done:
                    continue
                op = by_name.get(name)
                if op is not None:
                    done.add(name)
                    if op.operand_names:
                        stack.append((op, iter(op.operand_names)))
                        break
                    append(op)  # a leaf: out at once
            else:
                stack.pop()
                append(inst)
    if len(out) < len(insts):  # cycles or dangling names: keep every one
        out.extend(inst for inst in insts if inst.name not in done)
    return out
