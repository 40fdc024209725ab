"""An estimate of XLA's temporary allocation: temporaries packed in one heap.

XLA's buffer assignment gives entry parameters, constants and outputs their
own allocations.  Going through the buffers largest first, it lets a buffer
reuse an operand's allocation or an earlier output's (or donated
parameter's) allocation when their lives do not overlap; it packs every
other buffer into one ``preallocated-temp`` allocation with a heap
simulator, where a fused elementwise kernel may write its result over an
operand that dies at that step, offsets are aligned (64 bytes on CPU, 128
on GPU, 16 KiB on TPU, whose tuple pointer tables take 512 bytes), and of two
decreasing-size best-fit packings (by size, and by lifetime) the smaller wins (on a TPU,
whose packer sometimes leaves more room, the larger of the size-ordered and the
first-use-ordered packings).
Only values in the default memory space are packed: a TPU's on-chip memory
(``S(1)``) and the host have allocations of their own.  This module follows that recipe over
hloscope's own live ranges.  It is an estimate: XLA's packer also splits
and colocates in ways not visible in the HLO text.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import rshift, sub

from .._hlo._module import Instruction
from ._allocation import assign_allocations
from ._dataflow import Dataflow, Value
from ._liverange import LiveRanges
from ._passthrough import passes_through
from ._sharing import (ELEMENTWISE_OPCODES, Sharing, compiled_for_gpu, compiled_for_tpu,
                       never_shares)

__all__ = ["ELEMENTWISE_OPCODES", "HeapEstimate", "classify_buffers", "estimate_temp"]

# The longest chain of annotations looked through (a damaged module may hold a cycle).
_MAX_CHAIN = 64


@dataclass(frozen=True, slots=True)
class HeapEstimate:
    """The estimated temp allocation: `size` bytes holding `buffers` temporary buffers."""

    size: int
    alignment: int
    buffers: int
    offsets: dict[int, int]  # value id -> offset in the temp allocation


def classify_buffers(df: Dataflow) -> list[str]:
    """``parameter``, ``constant``, ``output`` or ``temporary`` (XLA's allocation kinds) of
    each buffer, by buffer id; computed once per dataflow (do not modify the result)."""
    if df.kinds is None:
        df.kinds = _classify(df)
    return df.kinds


def _classify(df: Dataflow) -> list[str]:
    entry = df.module.entry
    root = entry.root
    out: list[str] = []
    for buf in df.buffers:
        kind = "temporary"
        for v in buf.values:
            inst = v.inst
            if inst.opcode == "parameter" and inst.computation is entry:
                kind = "parameter"
                break
            if inst.opcode == "constant":
                kind = "constant"
            elif kind == "temporary" and any(p is root for p, _ in v.positions):
                kind = "output"
        out.append(kind)
    return out


# TPU: heap offsets on 16 KiB, a tuple's pointer table in 512 bytes (the granule every
# TPU buffer is rounded to), as XLA's TPU buffer assignment lays them out.
_TPU_ALIGNMENT = 16384
_TPU_TUPLE_BYTES = 512


def _alignment(df: Dataflow) -> int:
    if compiled_for_tpu(df.module):
        return _TPU_ALIGNMENT
    return 128 if compiled_for_gpu(df.module) else 64


def estimate_temp(df: Dataflow, lr: LiveRanges, kinds: Sequence[str] | None = None) -> HeapEstimate:
    """Pack the temporary buffers of `df` over the live ranges `lr` (see the module docstring)."""
    kinds = kinds if kinds is not None else classify_buffers(df)
    sharing = Sharing(lr.time_of)
    ranges = lr.ranges
    align = _alignment(df)
    tuple_bytes = _TPU_TUPLE_BYTES if align == _TPU_ALIGNMENT else 0
    in_allocation = assign_allocations(df, lr, kinds, sharing, tuples_in_heap=tuple_bytes > 0)
    buffer_of = df.buffer_of
    temp_values = [v for v in df.values if v.id in ranges and not v.memory_space
                   and kinds[buffer_of[v.id].id] == "temporary"
                   and not in_allocation[buffer_of[v.id].id]]
    group_of, groups = _share_groups(df, temp_values, ranges, sharing)
    items = []
    spans: dict[int, list[tuple[int, int]]] = {}
    # XLA's GPU buffer assignment reuses the gaps in a buffer's life (a loop's state
    # between the values that hold it: seen in a scan's dumps); its CPU one does not.
    gaps = align == 128
    for g, vals in groups.items():
        size = max(max(v.size, tuple_bytes) if v.shape.is_tuple else v.size for v in vals)
        if size <= 0:
            continue
        if tuple_bytes and any(v.shape.is_tuple for v in vals):
            # XLA's TPU buffer assignment keeps each tuple's pointer table in a slot of its
            # own for the whole program (seen in every TPU dump: 26 async slices' tables at
            # 26 distinct offsets though their lives do not overlap).
            start, end = 0, lr.end_time
        else:
            start = min(ranges[v.id][0] for v in vals)
            end = max(ranges[v.id][1] for v in vals)
        items.append((g, size, start, end))
        if gaps:
            own = _merged(ranges[v.id] for v in vals)
            if len(own) > 1:
                spans[g] = own
    by_size = sorted(items, key=lambda it: (-it[1], -(it[3] - it[2]), it[0]))
    if tuple_bytes:
        # XLA's TPU packing is not always the decreasing-size best fit: on most TPU
        # compiles of benchmarks/target_fidelity.py it matched it to the byte, on three
        # (MoE on v5p, scan remat on v4, a llama block on v5p) it was 3% to 30% larger,
        # close to a best fit in order of first use.  The larger of the two is within 1%
        # of XLA's on all of them but the llama block (+2.5%).
        best = max(_best_fit(by_size, align, lr.end_time, spans, top_gap=False),
                   _best_fit(sorted(items, key=lambda it: (it[2], -it[1], it[0])), align,
                             lr.end_time, spans, top_gap=False), key=lambda r: r[0])
    else:
        bound = _live_bound(items, lr.end_time, spans)
        best = _best_fit(by_size, align, lr.end_time, spans)
        if best[0] > bound:
            other = _best_fit(sorted(items, key=lambda it: (-(it[3] - it[2]), -it[1], it[0])),
                              align, lr.end_time, spans)
            best = min(best, other, key=lambda r: r[0])
    size, offsets = best
    value_offsets = {v.id: offsets.get(group_of[v.id], 0) for v in temp_values}
    buffers = len({buffer_of[v.id].id for v in temp_values})
    return HeapEstimate(size, align, buffers, value_offsets)


def _merged(pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Closed intervals merged where they overlap or touch."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(pairs):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _live_bound(items: list[tuple[int, int, int, int]], end_time: int,
                spans: dict[int, list[tuple[int, int]]] | None = None) -> int:
    """The most bytes live at one step: no packing can use less (when the first packing
    reaches it, the second cannot do better and is skipped)."""
    diff = [0] * (end_time + 3)
    for g, size, start, end in items:
        for lo, hi in (spans or {}).get(g, ((start, end),)):
            diff[lo] += size
            diff[hi + 1] -= size
    bound = live = 0
    for d in diff:
        live += d
        bound = max(bound, live)
    return bound


def _share_groups(df: Dataflow, temp_values: list[Value], ranges: dict[int, tuple[int, int]],
                  sharing: Sharing) -> tuple[dict[int, int], dict[int, list[Value]]]:
    """Groups of temporary values placed at one offset: the values of one buffer, and a
    result written over an operand that dies where it is made.  Returns value id -> group
    and group -> values (a group is named by its first value's id)."""
    temp_ids = {v.id for v in temp_values}
    temp_values = sorted(temp_values, key=lambda v: (ranges[v.id][0], ranges[v.id][1], v.id))
    taken: set[int] = set()  # operands a result was written over: no second one may be
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
            shared = _share_candidate(df, v, t, ranges, temp_ids, taken, sharing)
        if shared is not None:
            g = group_of[shared.id]
            taken.add(shared.id)
        else:
            g = v.id
            groups[g] = []
        group_of[v.id] = g
        groups[g].append(v)
    return group_of, groups


def _share_candidate(df: Dataflow, v: Value, t: int, ranges: dict[int, tuple[int, int]],
                     temp_ids: set[int], taken: set[int], sharing: Sharing) -> Value | None:
    """A temporary operand value of `v`'s instruction, dying at `t`, that `v` may be written
    over (XLA's heap simulator shares it)."""
    user = v.inst
    if never_shares(user):
        return None
    by_name = user.computation.by_name
    reads = dict.fromkeys(user.operand_names)
    for name in reads:
        operand = by_name.get(name)
        if operand is None:
            continue
        for ov in df.values_at(operand, ()):
            if ov.id not in temp_ids or len(df.buffer_of[ov.id].values) != 1:
                continue
            if ranges[ov.id][1] != t or ov.id in taken:
                continue
            if ov.size != v.size:
                continue
            # Read as it is, or through what XLA removes (`_passthrough`): XLA sees it read.
            if ov.inst.name in reads:
                read = ov.inst
            elif _passes_to(operand, ov.inst):
                read = operand
            else:
                continue
            if sharing.can_share(read, user, v.index):
                return ov
    return None


def _passes_to(inst: Instruction, source: Instruction) -> bool:
    """Whether `inst` is `source` seen through instructions that move no data."""
    seen = 0
    while inst is not source and passes_through(inst) and inst.operand_names \
            and seen < _MAX_CHAIN:
        nxt = inst.computation.by_name.get(inst.operand_names[0])
        if nxt is None:
            return False
        inst, seen = nxt, seen + 1
    return inst is source


def _occupy(r: list[int], lo: int, hi: int) -> bool:
    """Add the offsets [lo, hi) to `r`, disjoint occupied ranges kept merged and sorted as
    one flat list ``[start0, end0, start1, end1, ...]`` (strictly increasing: ranges that
    touch are merged), so that one bisection finds both ends.  A flat list, not an object
    with a list of starts and one of ends: a million-step heap has millions of tree nodes,
    most holding one range.  Returns whether `r` changed (not when a range held it)."""
    j = bisect.bisect_left(r, lo) >> 1          # first range ending at or after lo
    k = (bisect.bisect_right(r, hi) + 1) >> 1   # ranges starting at or before hi
    if j == k:  # meets none: a new range
        r[2 * j:2 * j] = (lo, hi)
    elif k == j + 1:  # meets one: it grows
        if lo >= r[2 * j] and hi <= r[2 * j + 1]:
            return False
        if lo < r[2 * j]:
            r[2 * j] = lo
        if hi > r[2 * j + 1]:
            r[2 * j + 1] = hi
    else:
        r[2 * j:2 * k] = (min(lo, r[2 * j]), max(hi, r[2 * k - 1]))
    return True


def _best_fit(items: list[tuple[int, int, int, int]], align: int, end_time: int,
              spans: dict[int, list[tuple[int, int]]] | None = None, top_gap: bool = True
              ) -> tuple[int, dict[int, int]]:
    """Place each (group, size, start, end) at the smallest aligned gap free over its
    lifetime, with `top_gap` the room between the highest chunk then and the heap's top
    included.

    A group whose values leave gaps in its lifetime (a loop's state, between the
    values that hold it) is free in those gaps where `spans` lists its parts (on GPU,
    as XLA's buffer assignment there does).

    Two segment trees over time find what is occupied during a lifetime: one
    holds each placed chunk at the nodes covering its lifetime (what is alive
    at the start), the other at the nodes above its start (what is born
    inside).  Each node keeps the union of its chunks' offset ranges, merged,
    so a query reads a few short lists however many chunks were placed.  Offsets
    are multiples of `align`, so a chunk is kept as reaching up to the next
    multiple: the gaps found are the same, and chunks packed side by side merge
    into one range however small they are (thousands of live scalars).  A node of the
    second tree holds what its children hold: going up a chunk's path, the first node
    that already holds its range ends the climb (every node above holds it too).
    """
    depth = 1
    while (1 << depth) < end_time + 2:
        depth += 1
    n = 1 << depth
    levels = range(depth + 1)  # a leaf's ancestors: leaf >> 0 (itself) ... leaf >> depth (root)
    alive: list[list[int] | tuple[int, int] | None] = [None] * (2 * n)
    born: list[list[int] | tuple[int, int] | None] = [None] * (2 * n)
    alive_at, born_at = alive.__getitem__, born.__getitem__
    offsets: dict[int, int] = {}
    heap_size = 0
    spans = spans or {}

    # While every chunk placed shares a step with every other (all live at once: the
    # steps [common_lo, common_hi]), each went on top of the last and a chunk that meets
    # those steps meets them all: nothing below the top is free over its lifetime.  The
    # trees are not read meanwhile: the stacked chunks go into them when the first chunk
    # that does not meet those steps comes (never, where all are live at once).
    stacked: list[tuple[int, int, int, int]] | None = []  # (start, end, offset, top)
    common_lo, common_hi = -1, end_time + 1
    stack_top = 0

    for g, size, start, end in items:
        if stacked is not None:
            if size > 0 and start <= common_hi and end >= common_lo and \
                    len(spans.get(g, ())) < 2:
                common_lo, common_hi = max(common_lo, start), min(common_hi, end)
                offsets[g] = best_off = stack_top
                heap_size = best_off + size  # above every chunk so far
                stack_top = -(-(best_off + size) // align) * align
                stacked.append((start, end, best_off, stack_top))
                continue
            for s_lo, s_hi, off, top in stacked:
                _insert(alive, born, n, ((s_lo, s_hi),),
                        [list(map(rshift, repeat(s_lo + n, depth + 1), levels))], off, top)
            stacked = None
        own = spans.get(g) or ((start, end),)
        paths = [list(map(rshift, repeat(s_lo + n, depth + 1), levels)) for s_lo, _ in own]
        parts: list[list[int] | tuple[int, int]] = []
        for (s_lo, s_hi), path in zip(own, paths):
            # What is alive at the start (on the path up from its leaf), and what is born
            # inside (the nodes covering the steps after it): lists gathered in C.
            parts += filter(None, map(alive_at, path))
            if s_hi > s_lo:
                parts += filter(None, map(born_at, _cover(s_lo + 1 + n, s_hi + n + 1)))
        # The free gaps between the occupied ranges: with the starts and the ends sorted
        # apart, the room below the k-th start is free where it is above the (k-1)-th end
        # (between two ranges that overlap, the difference is not positive).  Sorting ints
        # and a few passes in C, not a Python loop over every range; the gaps are listed
        # only when one is large enough (usually none is: what is live is packed tight).
        if len(parts) == 1:
            flat = list(parts[0])
            starts, below = flat[0::2], flat[1::2]
        else:
            flat = list(chain.from_iterable(parts))
            starts, below = flat[0::2], flat[1::2]
            starts.sort()
            below.sort()
        cur = below[-1] if below else 0  # offsets are aligned: so is every end (a chunk's top)
        below.insert(0, 0)
        best_gap = best_off = -1
        if starts:
            gaps = list(map(sub, starts, below))
            if max(gaps) >= size:
                best_gap = min(filter(size.__le__, gaps))  # the first smallest that fits
                best_off = below[gaps.index(best_gap)]
        # The room above the last chunk, up to the heap's present size, is a gap too:
        # XLA's best fit takes it where it is the smallest that fits (openxla/xla
        # heap_simulator.cc, GlobalDecreasingSizeBestFitHeap::FindChunkCandidate: the last
        # free chunk, offset to heap_size; a llama block on 8 H100s: -1.33% without it).
        # Not on TPU, whose packer differs (a llama block on a v5p: +4.5% with it, +2.5%
        # without).
        if top_gap and heap_size - cur >= size and (best_gap < 0 or heap_size - cur < best_gap):
            best_off = cur
        if best_off < 0:
            best_off = cur
        offsets[g] = best_off
        if best_off + size > heap_size:
            heap_size = best_off + size
        top = -(-(best_off + size) // align) * align
        _insert(alive, born, n, own, paths, best_off, top)
    return heap_size, offsets


def _insert(alive: list[list[int] | tuple[int, int] | None],
            born: list[list[int] | tuple[int, int] | None], n: int,
            own: Sequence[tuple[int, int]], paths: list[list[int]], best_off: int,
            top: int) -> None:
    """Record the chunk [best_off, top) over the lifetime parts `own` (their leaves'
    paths up in `paths`) in both trees of `_best_fit`."""
    # A node's first range is this one pair, shared (most nodes never get a second:
    # a list each would be a third of the memory); a list replaces it at the second.
    pair = (best_off, top)
    for (s_lo, s_hi), path in zip(own, paths):
        for tree, nodes, climb in ((alive, _cover(s_lo + n, s_hi + n + 1), False),
                                   (born, path, True)):
            for i in nodes:
                r = tree[i]
                if r is None:  # the usual cases without a call: a node's first range,
                    tree[i] = pair
                    continue
                if r.__class__ is tuple:
                    tree[i] = r = list(r)
                if r[-1] < best_off:  # a range above all others,
                    r.append(best_off)
                    r.append(top)
                elif r[-1] == best_off:  # or one meeting the highest
                    r[-1] = top
                elif not _occupy(r, best_off, top) and climb:
                    break  # held already, so by every node above (see the docstring)


def _cover(lo: int, hi: int) -> list[int]:
    """The nodes of a bottom-up segment tree that cover the leaves [lo, hi) exactly."""
    out = []
    while lo < hi:
        if lo & 1:
            out.append(lo)
            lo += 1
        if hi & 1:
            hi -= 1
            out.append(hi)
        lo >>= 1
        hi >>= 1
    return out
