"""The temp estimate's best-fit packing (`_heap`), on hand-made modules and random lifetimes:
a buffer whose life starts later goes into a slot freed earlier, no two buffers live at
once overlap, and the heap is never larger than the buffers side by side."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import hloscope
from hloscope._analysis._dataflow import analyze_dataflow
from hloscope._analysis._heap import _best_fit, _live_bound, estimate_temp
from hloscope._analysis._liverange import compute_live_ranges

_ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""


def _estimate(body: str):  # type: ignore[no-untyped-def]
    module = hloscope.read_text(f"HloModule m, is_scheduled=true\n{_ADD}\nENTRY e {{\n{body}}}\n"
                                ).module
    df = analyze_dataflow(module)
    heap = estimate_temp(df, compute_live_ranges(df))
    return heap.size, {v.label: heap.offsets[v.id] for v in df.values if v.id in heap.offsets}


def test_a_later_buffer_takes_the_slot_of_one_that_died():
    size, offsets = _estimate("""
  p0 = f32[256,256]{1,0} parameter(0)
  zero = f32[] constant(0)
  a = f32[256,256]{1,0} negate(p0)
  b = f32[256]{0} reduce(a, zero), dimensions={1}, to_apply=add
  c = f32[256,256]{1,0} broadcast(b), dimensions={0}
  d = f32[256,256]{1,0} exponential(c)
  ROOT t = f32[] reduce(d, zero), dimensions={0,1}, to_apply=add
""")
    # a dies at b; c (made after) reuses a's 256 KiB; d is written over c (elementwise).
    assert offsets == {"a{}": 0, "b{}": 262144, "c{}": 0, "d{}": 0}
    assert size == 262144 + 1024


def test_on_a_tpu_an_all_reduce_writes_over_its_dying_operand():
    size, offsets = _estimate("""
  p0 = f32[1024]{0:T(1024)} parameter(0)
  zero = f32[] constant(0)
  a = f32[1024]{0:T(1024)} negate(p0)
  r = f32[1024]{0:T(1024)} all-reduce(a), replica_groups={}, to_apply=add
  ROOT t = f32[] reduce(r, zero), dimensions={0}, to_apply=add
""")
    assert offsets["r{}"] == offsets["a{}"] and size == 4096


_items = st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 40), st.integers(0, 12)),
                  min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(_items, st.sampled_from([1, 64, 128, 16384]))
def test_best_fit_never_overlaps_live_buffers_and_never_exceeds_no_reuse(raw, align):
    items = [(g, size, start, start + span) for g, (size, start, span) in enumerate(raw)]
    end_time = max(end for *_, end in items)
    order = sorted(items, key=lambda it: (-it[1], -(it[3] - it[2]), it[0]))
    heap, offsets = _best_fit(order, align, end_time)
    assert set(offsets) == {g for g, *_ in items}
    for g, size, start, end in items:
        assert offsets[g] % align == 0
        for h, size2, start2, end2 in items:
            if g < h and start <= end2 and start2 <= end:  # alive at one step
                assert offsets[g] + size <= offsets[h] or offsets[h] + size2 <= offsets[g]
    assert _live_bound(items, end_time) <= heap <= sum(-(-s // align) * align
                                                       for _, s, _, _ in items)
    assert heap == max(offsets[g] + size for g, size, _, _ in items)


def test_best_fit_takes_the_room_under_the_heaps_top_where_it_is_the_smallest_gap():
    """XLA's best fit counts the room above the last chunk live over a buffer's lifetime, up
    to the heap's present size, as a gap: a 40-byte buffer goes there (50 bytes) rather
    than into the 100-byte gap below (the heap stays 200 bytes either way)."""
    items = [(1, 100, 0, 1), (2, 50, 0, 10), (3, 50, 0, 1), (4, 40, 5, 10)]
    size, offsets = _best_fit(items, 1, 11)
    assert size == 200 and offsets == {1: 0, 2: 100, 3: 150, 4: 150}


def _reference_best_fit(items, align, spans, top_gap):  # type: ignore[no-untyped-def]
    """The best fit written plainly (every placed chunk checked against each buffer's
    lifetime): what `_best_fit`'s segment trees must give, offset for offset."""
    placed: list[tuple[list[tuple[int, int]], int, int]] = []
    offsets: dict[int, int] = {}
    heap = 0
    for g, size, start, end in items:
        own = spans.get(g) or [(start, end)]
        occupied = sorted((lo, hi) for parts, lo, hi in placed
                          if any(a <= d and c <= b for a, b in own for c, d in parts))
        gaps, reach = [], 0
        for lo, hi in occupied:
            if lo > reach:
                gaps.append((lo - reach, reach))
            reach = max(reach, hi)
        fitting = [gap for gap in gaps if gap[0] >= size]
        best = min(fitting) if fitting else None  # the smallest, the lowest of equals
        offset = reach if best is None else best[1]
        if top_gap and heap - reach >= size and (best is None or heap - reach < best[0]):
            offset = reach
        offsets[g] = offset
        heap = max(heap, offset + size)
        placed.append((own, offset, -(-(offset + size) // align) * align))
    return heap, offsets


# Sizes often equal (so that gaps of one size tie), lives in up to three parts.
_lives = st.lists(st.tuples(
    st.one_of(st.integers(1, 3000), st.sampled_from([64, 128, 256])),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 5)), min_size=1, max_size=3)),
    min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(_lives, st.sampled_from([1, 64, 16384]), st.booleans(), st.booleans())
def test_best_fit_equals_the_plain_best_fit(raw, align, top_gap, by_size):
    """The segment-tree packing against the plain one, on random lifetimes, some with gaps
    in them (a loop's state, on GPU)."""
    items, spans = [], {}
    for g, (size, steps) in enumerate(raw):
        parts, t = [], 0
        for skip, length in steps:  # parts at least one step apart
            parts.append((t + skip, t + skip + length))
            t += skip + length + 2
        items.append((g, size, parts[0][0], parts[-1][1]))
        if len(parts) > 1:
            spans[g] = parts
    end_time = max(end for *_, end in items)
    key = (lambda it: (-it[1], -(it[3] - it[2]), it[0])) if by_size else \
        (lambda it: (it[2], -it[1], it[0]))
    order = sorted(items, key=key)
    assert _best_fit(order, align, end_time, spans, top_gap=top_gap) == \
        _reference_best_fit(order, align, spans, top_gap)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 20), st.integers(0, 20)),
                min_size=1, max_size=60),
       st.sampled_from([1, 64, 16384]), st.booleans())
def test_best_fit_equals_the_plain_best_fit_when_many_are_live_at_once(raw, align, top_gap):
    """Lifetimes around one step (10) first, as temporaries all live at once are, then the
    rest: the packing that stacks the first ones without a search against the plain one."""
    items = [(g, size, min(a, 10), max(10, a + b) if g % 3 else a + b)
             for g, (size, a, b) in enumerate(raw)]
    order = sorted(items, key=lambda it: (-it[1], -(it[3] - it[2]), it[0]))
    end_time = max(end for *_, end in items)
    assert _best_fit(order, align, end_time, top_gap=top_gap) == \
        _reference_best_fit(order, align, {}, top_gap)
