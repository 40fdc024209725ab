"""The allocation pass's pieces (`_allocation`) against plain references on random inputs:
XLA's post order of a computation, and the rule that one value may meet an allocation's
values only at its own first or last step."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from hloscope._analysis._allocation import _post_order, _Steps


def _reference_post_order(insts):  # type: ignore[no-untyped-def]
    """Depth-first post order from each instruction no other one reads, operands in order,
    written recursively; then whatever a cycle or a dangling name left out."""
    by_name = {i.name: i for i in insts}
    used = {n for i in insts for n in i.operand_names}
    out, done = [], set()

    def visit(inst):  # type: ignore[no-untyped-def]
        for name in inst.operand_names:
            op = by_name.get(name)
            if op is not None and op.name not in done:
                done.add(op.name)
                visit(op)
        out.append(inst)

    for inst in insts:
        if inst.name not in used and inst.name not in done:
            done.add(inst.name)
            visit(inst)
    return out + [i for i in insts if i.name not in done]


# Each instruction reads up to four names: earlier ones (a DAG), sometimes a later one (a
# cycle, as a damaged module may hold) or one not defined.
_graphs = st.lists(st.lists(st.integers(-2, 30), max_size=4), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(_graphs)
def test_post_order_equals_the_recursive_one(raw):
    insts = []
    for k, reads in enumerate(raw):
        names = []
        for r in reads:
            if r == -1:
                names.append("missing")
            elif r == -2:
                names.append(f"i{(k + 3) % len(raw)}")  # maybe a later one: a cycle
            elif k:
                names.append(f"i{r % k}")
        insts.append(SimpleNamespace(name=f"i{k}", operand_names=tuple(names)))
    comp = SimpleNamespace(instructions=insts, by_name={i.name: i for i in insts})
    assert [i.name for i in _post_order(comp)] == \
        [i.name for i in _reference_post_order(insts)]


_intervals = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6)), max_size=12)


@settings(max_examples=500, deadline=None)
@given(_intervals, st.integers(0, 45), st.integers(0, 5))
def test_one_values_fit_read_off_free_steps(busy_raw, s, length):
    """`_Fit` decides for one value over [s, e] with two free-step checks: the value fits
    where the allocation's occupied steps inside [s, e] are among {s, e}, and it touches
    the allocation's values where any is."""
    busy, occupied = _Steps(), set()
    for lo, span in busy_raw:
        busy.add(lo, lo + span)
        occupied.update(range(lo, lo + span + 1))
    e = s + length
    inside = {t for t in occupied if s <= t <= e}
    fits = not (e - s >= 2 and not busy.is_free(s + 1, e - 1))
    touching = not busy.is_free(s, e)
    assert fits == (inside <= {s, e})
    assert touching == bool(inside)
