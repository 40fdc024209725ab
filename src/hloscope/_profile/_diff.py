"""Measured time between two versions of a program: `time_diff`.

Kernels are paired as `hloscope diff` pairs them (`ModuleDiff.pairs`: by place,
work, op_name and source, then on other shapes), so that the two tables agree;
what is left on one side is listed alone.  The kernels the change left alone (the
same work on both sides) are the control: where their time moved between the two
profiles, the machine ran at another speed, and the step's change is not (all) the
program's.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from .._analysis._kernels import KernelGraph
from .._bench._stats import median_ci
from ._times import MeasuredTimes

__all__ = ["CONTROL_MOVED", "CONTROL_SHARE", "TimeDiff", "time_diff"]

CONTROL_SHARE = 0.2  # the kernels left alone tell the machine's change from this share up
CONTROL_MOVED = 0.1  # ... and by more than this the machine, not the program, moved


@dataclass(frozen=True, slots=True)
class TimeDiff:
    """Per kernel, the measured time per run in A and in B (None: not on that side or
    never ran), the largest change first; the two typical steps, and each run's step on
    each side (`runs_a`, `runs_b`: what `verdict` weighs the change against)."""

    step_a: float
    step_b: float
    rows: tuple[tuple[str | None, str | None, float | None, float | None], ...]
    runs_a: tuple[float, ...] = ()
    runs_b: tuple[float, ...] = ()
    notes_a: tuple[str, ...] = ()  # what each profile said of its runs when it was taken
    notes_b: tuple[str, ...] = ()
    # The kernels the change left alone (the same work on both sides, timed on both): how
    # many, and their times summed in A and in B; with A's kernels' time summed, whose
    # share they make.  What they did between the profiles is the machine's, not the
    # program's.
    control: tuple[int, float, float] = (0, 0.0, 0.0)
    kernels_a: float = 0.0

    @property
    def control_ratio(self) -> float | None:
        """B's time over A's for the kernels the change left alone, where they are enough
        to tell (at least 2 kernels and a fifth of A's kernel time); else None."""
        n, ca, cb = self.control
        if n < 2 or ca <= 0 or self.kernels_a <= 0 or ca < CONTROL_SHARE * self.kernels_a:
            return None
        return cb / ca

    @property
    def machine_moved(self) -> bool:
        """Whether the kernels the change left alone moved by more than `CONTROL_MOVED`
        between the profiles: the machine ran at another speed, and the step's change is
        not (all) the program's."""
        c = self.control_ratio
        return c is not None and abs(c - 1) > CONTROL_MOVED

    @property
    def all_machine(self) -> bool:
        """Whether the machine's change (`machine_moved`) accounts for the median run's
        change within `CONTROL_MOVED`: none of it need be the program's."""
        c, m = self.control_ratio, self.medians
        return (self.machine_moved and c is not None and m is not None and m[0] > 0
                and abs(m[1] / m[0] / c - 1) <= CONTROL_MOVED)

    @property
    def quartiles(self) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """The middle half of each side's runs (first and third quartiles of their steps);
        None where a side has fewer than 4 runs."""
        if min(len(self.runs_a), len(self.runs_b)) < 4:
            return None
        qa = statistics.quantiles(self.runs_a, n=4, method="inclusive")
        qb = statistics.quantiles(self.runs_b, n=4, method="inclusive")
        return (qa[0], qa[2]), (qb[0], qb[2])

    @property
    def medians(self) -> tuple[float, float] | None:
        """Each side's median run (its steps' median; None with fewer than 4 runs a side):
        the verdict's footing, as a typical step over rounds can be pulled by slow
        rounds."""
        if min(len(self.runs_a), len(self.runs_b)) < 4:
            return None
        return statistics.median(self.runs_a), statistics.median(self.runs_b)

    @property
    def ratio_interval(self) -> tuple[float, float] | None:
        """Where B's median run over A's lies at 95%: the ratio of the sides' median
        intervals (order statistics of their runs, `median_ci`), each taken at its far
        end; None with fewer than 4 runs a side.  Runs of one profile are not independent
        (a round's runs share the machine's state), so this is the least the ratio is
        unsure by."""
        if self.medians is None:
            return None
        la, ha = median_ci(list(self.runs_a))
        lb, hb = median_ci(list(self.runs_b))
        if la <= 0 or ha <= 0:
            return None
        return lb / ha, hb / la

    @property
    def within_spread(self) -> bool | None:
        """Whether the middle halves of the two sides' runs overlap: the change of the
        step is then within what the runs of one side vary by (None: too few runs)."""
        q = self.quartiles
        if q is None:
            return None
        (a0, a1), (b0, b1) = q
        return a0 <= b1 and b0 <= a1

    def to_dict(self) -> dict[str, Any]:
        q = self.quartiles
        return {"step_seconds": [self.step_a, self.step_b],
                "run_quartiles_seconds": None if q is None else [list(q[0]), list(q[1])],
                "within_spread": self.within_spread,
                "median_ratio": None if (m := self.medians) is None or m[0] <= 0 else
                {"value": m[1] / m[0], "ci95": list(self.ratio_interval or ())},
                "notes": [list(self.notes_a), list(self.notes_b)],
                "unchanged_kernels": {"count": self.control[0],
                                      "seconds": [self.control[1], self.control[2]],
                                      "ratio": self.control_ratio},
                "kernels": [{"a": a, "b": b, "seconds_a": ta, "seconds_b": tb,
                             "change_seconds": (tb or 0.0) - (ta or 0.0)}
                            for a, b, ta, tb in self.rows]}


def time_diff(ga: KernelGraph, ta: MeasuredTimes, gb: KernelGraph, tb: MeasuredTimes,
              pairs: tuple[tuple[str, str], ...],
              same_work: frozenset[tuple[str, str]] = frozenset()) -> TimeDiff:
    """Each kernel's measured time in A and B, paired as `hloscope diff` paired them
    (`pairs`: `ModuleDiff.pairs`); a kernel no pair holds is listed alone.  `same_work`
    (`ModuleDiff.same_work`): the pairs the change left alone, the control."""
    d = _rows(ta, tb, ta.by_name(), tb.by_name(), _with_alone(ga, gb, list(pairs)))
    ka, kb = {k.name: k for k in ga.kernels}, {k.name: k for k in gb.kernels}
    n, ca, cb = 0, 0.0, 0.0
    for a, b, xa, xb in d.rows:
        if (a, b) in same_work and xa and xb and a in ka and b in kb and (
                ka[a].flops, ka[a].bytes_accessed) == (kb[b].flops, kb[b].bytes_accessed):
            n, ca, cb = n + 1, ca + xa, cb + xb
    return dataclasses.replace(d, control=(n, ca, cb),
                               kernels_a=sum(k.median for k in ta.kernels))


def _with_alone(ga: KernelGraph, gb: KernelGraph, pairs: list[tuple[str | None, str | None]],
                ) -> list[tuple[str | None, str | None]]:
    """`pairs`, then each kernel of A and of B that no pair holds, alone."""
    in_a = {a for a, _ in pairs}
    in_b = {b for _, b in pairs}
    return (pairs + [(k.name, None) for k in ga.kernels if k.name not in in_a]
            + [(None, k.name) for k in gb.kernels if k.name not in in_b])


def _rows(ta: MeasuredTimes, tb: MeasuredTimes, sa: dict[str, Any], sb: dict[str, Any],
          pairs: list[tuple[str | None, str | None]]) -> TimeDiff:
    """The rows of `pairs` with a time on either side, the largest change first."""

    def t(side: dict[str, Any], name: str | None) -> float | None:
        kt = side.get(name) if name else None
        return None if kt is None else kt.median

    rows = [(a, b, t(sa, a), t(sb, b)) for a, b in pairs]
    rows = [r for r in rows if r[2] is not None or r[3] is not None]
    rows.sort(key=lambda r: (-abs((r[3] or 0.0) - (r[2] or 0.0)), r[0] or "", r[1] or ""))
    return TimeDiff(ta.step, tb.step, tuple(rows), tuple(ta.steps), tuple(tb.steps),
                    tuple(getattr(ta, "notes", ())), tuple(getattr(tb, "notes", ())))
