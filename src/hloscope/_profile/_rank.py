"""The advisor's groups ranked by measured time: `rank_measured`.

Without a profile, the advisor ranks its groups by their share of the program
(the larger of the peak they save over the peak and the time they save over
the program's *estimated* time).  With one, a group's time share is the
measured time of the kernels its findings name over the measured step: the
groups about the kernels that take the time come first.  A group whose share
was of memory (the peak, the device footprint) keeps it where that is larger.
"""

from __future__ import annotations

import dataclasses
import re

from .._analysis._advisor import Advice
from .._analysis._findings import FindingGroup
from .._units import format_seconds
from ._times import MeasuredTimes

__all__ = ["MEASURED_BASIS", "group_seconds", "rank_measured"]

MEASURED_BASIS = "measured time in its kernels"
ESTIMATED_BASIS = "estimated time"  # the advisor's time basis; the others are of memory
_SUFFIX = re.compile(r"\{.*\}$")


def group_seconds(group: FindingGroup, measured: dict[str, float]) -> float:
    """The measured time per run of the distinct kernels `group`'s findings name."""
    names = {_SUFFIX.sub("", e.name) for f in group.findings for e in f.evidence}
    return sum(measured.get(n, 0.0) for n in names)


def rank_measured(advice: Advice, times: MeasuredTimes, *, min_share: float = 0.01) -> Advice:
    """`advice` (best computed with ``min_share=0``) ranked by measured time, the groups
    under `min_share` of both the peak and the measured step left out."""
    measured = {k.name: k.median for k in times.kernels}
    step = times.step
    groups = []
    for g in advice.groups:
        memory = 0.0 if g.basis == ESTIMATED_BASIS else g.share  # peak, device footprint
        t = group_seconds(g, measured) / step if step else 0.0
        share, basis = (memory, g.basis) if memory >= t else (t, MEASURED_BASIS)
        groups.append(dataclasses.replace(g, share=share, basis=basis))
    groups.sort(key=lambda g: (-g.share, g.rule, g.first.place, g.first.message))
    kept = [g for g in groups if g.share >= min_share]
    quiet = advice.quiet + sum(g.count for g in groups) - sum(g.count for g in kept)
    # Said even where nothing is found: that the profile was read, and what it measured
    # (a new user could not tell "0 findings" with a profile from one without).
    runs = f"{times.runs} run{'' if times.runs == 1 else 's'}"
    read = (f"ranked by the measured time of {times.source} ({runs}, step "
            f"{format_seconds(step)})")
    return Advice(kept, advice.device, advice.optimized, quiet, advice.notes + (read,),
                  advice.checked_out, explained=advice.explained)
