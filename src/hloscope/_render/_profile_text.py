"""`hloscope profile` (and ``--profile DIR``) as text: each kernel's measured time beside
its estimate, time by source line and op_name scope, and the step taken apart."""

from __future__ import annotations

import statistics
import textwrap
from typing import TYPE_CHECKING

from ._term import fit, safe
from ._text import table, table_left_out

if TYPE_CHECKING:  # annotations only: MeasuredTimes prints itself with render_profile
    from .._profile._diff import TimeDiff
    from .._profile._times import MeasuredTimes

__all__ = ["format_time", "render_profile", "render_time_diff", "spread_line",
           "time_diff_line"]


def format_time(s: float | None) -> str:
    """Seconds with a unit: ``850 ns``, ``12.3 us``, ``4.56 ms``, ``1.23 s``."""
    if s is None:
        return "-"
    a = abs(s)
    for div, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if a >= div:
            return f"{s / div:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def render_profile(t: MeasuredTimes, *, top: int | None = 20, places: int = 10,
                   width: int | None = None) -> str:
    """The measured times of `t` in `width` columns (None: every line whole): the `top`
    kernels (None: all) and `places` source lines and op_name scopes."""
    g = t.gaps
    runs = f"{t.runs} run{'' if t.runs == 1 else 's'}"
    devs = f"{t.devices} {t.platform} device{'' if t.devices == 1 else 's'}"
    lo, hi = (min(t.steps), max(t.steps)) if t.steps else (0.0, 0.0)
    # Over rounds that ran at different speeds the typical run (the rounds' mean) can be
    # far from the median run: both are said.
    mid = statistics.median(t.steps) if t.steps else g.step
    median = (f"median run {format_time(mid)}, " if g.step and abs(mid / g.step - 1) > 0.05
              else "")
    head = (f"Profile of {safe(t.module)}: {runs} on {devs}, step {format_time(g.step)} "
            f"(typical; {median}min {format_time(lo)}, max {format_time(hi)})")
    out = [fit(head, width),
           f"  from {safe(t.source)}",
           f"  step = kernels {format_time(g.kernels)} - concurrent {format_time(g.concurrent)}"
           f" + dispatch {format_time(g.dispatch)} + idle {format_time(g.idle)} + wait "
           f"{format_time(g.wait)}",
           "  every event of the module in the trace names one of its kernels"
           if t.matched_share >= 0.9995 else
           f"  {_pct(t.matched_share)} of the module's traced time is in events naming its "
           "kernels; the rest is listed below (in the trace but not a kernel)",
           f"  estimated: the roofline of {t.device or '?'}; of roofline: estimated / measured",
           ""]
    rows = []
    shown = t.kernels if top is None else t.kernels[:top]
    for k in shown:
        frac = k.roofline_fraction
        calls = f"{k.calls:g}"
        rows.append([k.name, k.category, format_time(k.median), format_time(k.spread), calls,
                     _pct(k.share), format_time(k.estimate),
                     "-" if frac is None else f"{frac:.2g}", k.source or "-"])
    missing = ("" if not t.not_run else f"; not in the trace: {', '.join(t.not_run)}"
               if len(t.not_run) <= 3 else f", {len(t.not_run)} not in the trace")
    out.append(f"Kernels by measured time ({len(t.kernels)} ran{missing})")
    heads = ["kernel", "kind", "measured", "spread", "calls", "share", "estimated",
             "of roofline", "source"]
    droppable = ("kind", "spread", "calls", "of roofline")
    text, gone = table_left_out(heads, rows, right=(2, 3, 4, 5, 6, 7), width=width,
                                drop=droppable, whole="kernel")
    out.append(text)
    dropped = [h for h in gone if any(row[heads.index(h)] != "-" for row in rows)]
    if rows and dropped:
        out.append(f"  ({', '.join(dropped)} left out to fit {width} columns: --wide shows "
                   "them)")
    if top is not None and len(t.kernels) > top:
        out.append(f"  ... and {len(t.kernels) - top} more (see --json)")
    if t.kernels and g.step > 0:
        out.append(fit(_shares_line(t), width))
    out.append("")
    for title, rows_of, head in (("Time by source line", t.lines, "source"),
                                ("Time by op_name scope", t.scopes, "op_name scope")):
        rows = [[p.place, format_time(p.seconds), _pct(p.share), str(p.kernels)]
                for p in rows_of[:places]]
        if rows:
            out.append(title)
            out.append(table([head, "measured", "share", "kernels"], rows, right=(1, 2, 3),
                             width=width))
            if len(rows_of) > places:
                out.append(f"  ... and {len(rows_of) - places} more (see --json)")
            lost = next((p for p in rows_of if p.place == "(no source line)"), None)
            if head == "source" and lost is not None and lost.share >= 0.05:
                out.append(fit(f"  (no source line): {lost.kernels} kernel"
                               f"{'s' if lost.kernels != 1 else ''} XLA gave no source line "
                               "(its own copies, transposes and layout changes, or an "
                               "operation whose metadata a pass dropped); hloscope kernels "
                               "shows each with the kernels it reads from and feeds", width))
            out.append("")
    if t.collectives:
        out.append(f"Collectives measured ({len(t.collectives)})")
        rows = [[k.name, format_time(k.median), _pct(k.share), format_time(k.estimate),
                 k.source or "-"] for k in t.collectives]
        out.append(table(["collective", "measured", "share", "estimated", "source"], rows,
                         right=(1, 2, 3), width=width))
        out.append("")
    if t.unmatched:
        out.append("In the trace but not a kernel of the module (per run)")
        rows = [[n, format_time(s)] for n, s in t.unmatched[:10]]
        out.append(table(["event", "measured"], rows, right=(1,), width=width))
        out.append("")
    out.extend(_noted("when it was profiled", t.notes, width))
    return "\n".join(out)


def _noted(when: str, notes: tuple[str, ...], width: int | None) -> list[str]:
    """`notes` a profile gave, each on its own (wrapped) lines: ``note (WHEN): ...``."""
    said = [f"note ({when}): {safe(n)}" for n in notes]
    return [textwrap.fill(s, width, subsequent_indent="  ") if width else s for s in said]


def _shares_line(t: MeasuredTimes) -> str:
    """What the kernels' shares add up to, and where the rest of the step went (the step
    line's parts): time kernels ran at the same time counts once per kernel; where the
    medians' sum is clearly not a typical run's kernel time, both, and why they differ."""
    g = t.gaps
    medians = sum(k.share for k in t.kernels)
    run, both = g.kernels / g.step, g.concurrent / g.step
    said = f"  the kernels' shares add up to {_pct(medians)} of the step"
    if both >= 0.005:
        said += (f", the {format_time(g.concurrent)} ({_pct(both)}) in which kernels ran at "
                 "the same time counted once for each")
    if abs(run - medians) > 0.02:
        said += (f"; a typical run's kernels took {_pct(run)} (each kernel's median is of its "
                 "own runs, so the medians need not add up to one run's)")
    rest = (g.dispatch + g.idle + g.wait) / g.step
    return said + f"; dispatch, idle and wait took {_pct(rest)} (the step line above)"


def time_diff_line(d: TimeDiff) -> str:
    """``Measured time: step 17 ms -> 21.7 ms (+4.69 ms, +27.6%)``."""
    change = d.step_b - d.step_a
    rel = f", {'+' if change >= 0 else ''}{100 * change / d.step_a:.1f}%" if d.step_a else ""
    said = (f"Measured time: step {format_time(d.step_a)} -> {format_time(d.step_b)} "
            f"({'+' if change >= 0 else ''}{format_time(change)}{rel})")
    m = d.medians
    if m is not None and d.step_a > 0 and d.step_b > 0 and (
            abs(m[0] / d.step_a - 1) > 0.05 or abs(m[1] / d.step_b - 1) > 0.05):
        # the typical step of a profile in rounds can sit far from its median run
        said += f"; median run {format_time(m[0])} -> {format_time(m[1])}"
    return said


def spread_line(d: TimeDiff) -> str:
    """Whether the change of the step stands out of the runs' own spread: the middle half
    of each side's runs, and what to do where they overlap (empty: too few runs)."""
    q, m = d.quartiles, d.medians
    if q is None or m is None or min(m) <= 0:
        return ""
    (a0, a1), (b0, b1) = q
    halves = (f"the middle half of A's runs took {format_time(a0)} to {format_time(a1)}, "
              f"B's {format_time(b0)} to {format_time(b1)}")
    if d.within_spread:
        return (f"within the runs' own spread: {halves}; profile both again, or time them "
                "with hloscope bench, before taking the change as real")
    faster = m[1] < m[0]  # by the median runs
    ratio = m[0] / m[1] if faster else m[1] / m[0]
    c, (n, ca, _) = d.control_ratio, d.control
    if c is not None and d.machine_moved:
        step = m[1] / m[0]
        return (f"the machine changed between the profiles: the {n} kernels the change left "
                f"alone ({_pct(ca / d.kernels_a)} of A's kernel time) took {c:.3g}x their "
                f"time in A, the median run {step:.3g}x, so "
                + ("none of the step's change need be the program's"
                   if d.all_machine else
                   "part of the step's change is the machine's")
                + f" ({halves}); profile both again, one right after the other, on a quiet "
                "machine")
    interval = ""
    if (ri := d.ratio_interval) is not None:
        lo, hi = (1 / ri[1], 1 / ri[0]) if faster else ri
        interval = f" (95% interval {lo:.3g}x to {hi:.3g}x)"
    said = (f"B's median run is {ratio:.3g}x {'faster' if faster else 'slower'} than "
            f"A's{interval}, beyond the runs' spread: {halves}")
    if c is not None:
        said += f"; the {n} kernels the change left alone kept their time ({c:.3g}x)"
    return said


def render_time_diff(d: TimeDiff, *, top: int = 20, width: int | None = None) -> str:
    """Each kernel's measured time in A and B, the largest change first."""
    out = [fit(time_diff_line(d), width)]
    said = spread_line(d)
    if said:
        out.append(fit("  " + said, width))
    for side, notes in (("A", d.notes_a), ("B", d.notes_b)):
        out.extend("  " + n for n in _noted(f"{side}'s profile", notes,
                                            None if width is None else width - 2))
    rows = []
    for a, b, ta, tb in d.rows[:top]:
        diff = (tb or 0.0) - (ta or 0.0)
        rows.append([a or "-", b or "-", format_time(ta), format_time(tb),
                     ("+" if diff >= 0 else "") + format_time(diff)])
    out.append(table(["kernel in A", "kernel in B", "A", "B", "change"], rows,
                     right=(2, 3, 4), width=width))
    if len(d.rows) > top:
        out.append(f"  ... and {len(d.rows) - top} more (see --json)")
    return "\n".join(out) + "\n"
