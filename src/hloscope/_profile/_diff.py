"""Measured time between two versions of a program: `time_diff`.

Kernels are paired by name first (a recompile of a similar program keeps
most names), then by what they compute (kind, fused operations and output
shape), in order; what is left on one side is listed alone.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .._analysis._kernels import Kernel, KernelGraph
from ._times import MeasuredTimes

__all__ = ["TimeDiff", "time_diff"]


@dataclass(frozen=True, slots=True)
class TimeDiff:
    """Per kernel, the measured time per run in A and in B (None: not on that side or
    never ran), the largest change first; and the two steps."""

    step_a: float
    step_b: float
    rows: tuple[tuple[str | None, str | None, float | None, float | None], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"step_seconds": [self.step_a, self.step_b],
                "kernels": [{"a": a, "b": b, "seconds_a": ta, "seconds_b": tb,
                             "change_seconds": (tb or 0.0) - (ta or 0.0)}
                            for a, b, ta, tb in self.rows]}


def _key(k: Kernel) -> tuple[Any, ...]:
    return (k.category, k.fusion_kind, k.fused, k.target, k.shape)


def time_diff(ga: KernelGraph, ta: MeasuredTimes, gb: KernelGraph,
              tb: MeasuredTimes) -> TimeDiff:
    """Each kernel's measured time in A and B (see the module docstring)."""
    sa, sb = ta.by_name(), tb.by_name()
    names_b = {k.name for k in gb.kernels}
    pairs: list[tuple[str | None, str | None]] = []
    left_a = []
    for k in ga.kernels:
        if k.name in names_b:
            pairs.append((k.name, k.name))
        else:
            left_a.append(k)
    used = {a for a, _ in pairs}
    pool: dict[tuple[Any, ...], deque[str]] = {}
    for k in gb.kernels:
        if k.name not in used:
            pool.setdefault(_key(k), deque()).append(k.name)
    for k in left_a:
        cands = pool.get(_key(k))
        pairs.append((k.name, cands.popleft() if cands else None))
    paired_b = {b for _, b in pairs if b}
    pairs += [(None, n) for q in pool.values() for n in q if n not in paired_b]

    def t(side: dict[str, Any], name: str | None) -> float | None:
        kt = side.get(name) if name else None
        return None if kt is None else kt.median

    rows = [(a, b, t(sa, a), t(sb, b)) for a, b in pairs]
    rows = [r for r in rows if r[2] is not None or r[3] is not None]
    rows.sort(key=lambda r: (-abs((r[3] or 0.0) - (r[2] or 0.0)), r[0] or "", r[1] or ""))
    return TimeDiff(ta.step, tb.step, tuple(rows))
