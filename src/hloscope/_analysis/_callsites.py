"""Where the values of a called computation's parameter come from (its call sites).

Used by the dataflow analysis (`_dataflow`): a computation run from many
places (a loop body shared by thousands of loops) has its parameters' values
updated from the call sites that changed only.
"""

from __future__ import annotations

from collections.abc import Collection

from .._hlo._module import Instruction
from ._values import NO_VALUES, Index, Value, as_dict

__all__ = ["CallSites"]


class CallSites:
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
        order = list(indices)
        n = len(order)
        counts_at = self.counts
        totals = self.totals
        snapshot = self.snapshot
        for k, src in self.dirty.items():
            src_sets = as_dict(sets.get(src))
            snap = snapshot.get(k)
            m = self.mult[k]
            if snap is None:  # the source's first values: nothing to take back
                news = [src_sets.get(index, NO_VALUES) for index in order]
                if not any(news):
                    continue  # nothing reaches the parameter from there yet
                snapshot[k] = news
                for index, new in zip(order, news):
                    if not new:
                        continue
                    counts = counts_at.get(index)
                    if counts is None:
                        counts = counts_at[index] = {}
                    for v in new:
                        counts[v.id] = counts.get(v.id, 0) + m
                    before = totals.get(index, 0)
                    total = totals[index] = before + m * len(new)
                    self.multi += (total > 1) - (before > 1)
                    touched[index] = None
            else:
                for i, index in enumerate(order):
                    new = src_sets.get(index, NO_VALUES)
                    old = snap[i]
                    if new is old or not (new or old):
                        continue
                    counts = counts_at.setdefault(index, {})
                    for v in old:
                        c = counts[v.id] - m
                        if c:
                            counts[v.id] = c
                        else:
                            del counts[v.id]
                    for v in new:
                        counts[v.id] = counts.get(v.id, 0) + m
                    before = totals.get(index, 0)
                    total = totals[index] = before + m * (len(new) - len(old))
                    self.multi += (total > 1) - (before > 1)
                    snap[i] = new
                    touched[index] = None
            if self.need_phi and self.multi == n:
                # Two or more inputs everywhere: a phi at every index, whatever the other
                # sources hold (the plan is then `frozen`, its inputs recounted at the end).
                self.dirty = {}
                return order
        self.dirty = {}
        return list(touched)

    def recount(self, sets: dict[Instruction, dict[Index, list[Value]] | Value],
                indices: Collection[Index]) -> None:
        """The distinct values that reach each index from every source (in the order of the
        sources), after propagation, for a `frozen` plan (`totals` are not kept)."""
        self.counts = counts_at = {index: {} for index in indices}
        for src in self.sources.values():
            stored = sets.get(src)
            if type(stored) is Value:
                counts = counts_at.get(())
                if counts is not None:
                    counts[stored.id] = 1
                continue
            for index, vals in as_dict(stored).items():
                if vals:
                    counts = counts_at.get(index)
                    if counts is not None:
                        for v in vals:
                            counts[v.id] = 1
