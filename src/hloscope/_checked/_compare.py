"""Every saving checked where it can be: the fixes compiled and XLA's figures compared.

For the advice of a compiled function, `check_advice` compiles one fixed variant per
kind of finding (`_fixes.plan`), on the same device or target, and compares the figure
the finding's saving is about on the two compiles:

- ``footprint`` (donation): XLA's `memory_analysis()`, arguments + outputs + temp −
  aliased: what the executable needs on the device;
- ``peak`` (remat): XLA's peak, from its live-range dump (hloscope's peak where there
  is none);
- ``exposed`` (overlap flags): the time the collectives' transfers are not hidden by
  compute on XLA's schedule (hloscope's roofline over each compile's kernels, at the
  findings' places);
- ``time`` (precision): the program's estimated time (the same roofline over every
  kernel of each compile, each matmul at the rate of the type it multiplies in).

The group's saving becomes the difference (its estimate stays beside, in its `Check`);
a group whose checked saving is under the advisor's threshold is dropped with a note.
Groups without a mechanical fix keep their estimate and say how it was made.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from .._analysis._advice_context import AdviceContext
from .._analysis._advisor import Advice, advise_groups
from .._analysis._findings import Check, FindingGroup, Saving
from .._analysis._rules_kernels import fused_instructions
from .._jax._progress import prefix
from .._jax._quiet import quiet_native_stderr
from ._fixes import ESTIMATED, plan
from ._program import Fix, Program

__all__ = ["check_advice", "checked_groups", "figures"]

FIGURES = {
    "footprint": "XLA's footprint",
    "peak": "XLA's peak",
    "exposed": "exposed collective time",
    "time": "estimated time",
}


def _flow(report: Any) -> Any:
    return report._flow()  # noqa: SLF001  (the report's own cached analyses)


def _context(report: Any) -> AdviceContext:
    df, lr = _flow(report)
    dev = report.roofline_device()
    return AdviceContext(report.module, report.kernels, df, lr, dev)


def figures(report: Any) -> dict[str, float]:
    """The figures a fix is judged by, on one compile (module docstring); a figure the
    compile does not give is missing."""
    out: dict[str, float] = {}
    ma = report.memory_analysis or {}
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
            "alias_size_in_bytes")
    if all(k in ma for k in keys) and not report._tpu_without_temp():  # noqa: SLF001
        out["footprint"] = (ma[keys[0]] + ma[keys[1]] + ma[keys[2]] - ma[keys[3]])
    files = report._xla_files()  # noqa: SLF001
    peak = files.live_range.peak_bytes if files is not None and files.live_range else None
    out["peak"] = float(peak if peak is not None else report.memory.peak_bytes)
    out["peak_source"] = 1.0 if peak is not None else 0.0
    return out


def _exposed(report: Any, places: set[str] | None) -> float:
    """The exposed time of HS113's findings on `report` (at `places` when given)."""
    df, lr = _flow(report)
    advice = advise_groups(report.module, graph=report.kernels, df=df, lr=lr,
                           device=report.roofline_device(), min_share=0)
    return sum(f.saving.seconds for g in advice.groups if g.rule == "HS113"
               for f in g.findings if places is None or f.place in places)


def check_advice(report: Any, program: Program, advice: Advice | None = None) -> Advice:
    """`report`'s advice with every group checked where a fix is mechanical (module
    docstring); `report.timings['check']` gets the seconds it took."""
    t0 = time.perf_counter()
    if advice is None:
        report._cache.pop("check", None)  # noqa: SLF001  (checked here, not again)
        advice = report.advice
    kept: list[FindingGroup] = []
    dropped: list[str] = []
    places: list[tuple[str, str]] = []
    left_out = promoted = 0  # findings dropped here (each with its note); raised
    # The groups left out under the threshold whose check may find more (`RECHECKED`) are
    # checked too: kept where it does (no longer left out), silent where it does not.
    was = list(advice.groups) + list(advice.pending)
    both = Advice(was, advice.device, advice.optimized, advice.quiet, advice.notes,
                  advice.checked_out)
    for k, (g, worth) in enumerate(checked_groups(report, program, both)):
        if k >= len(advice.groups):  # one of `pending`
            if worth and g.check is not None and g.check.status == "checked":
                kept.append(g)
                promoted += g.count
            continue
        if worth:
            kept.append(g)
            continue
        places.append((g.rule, g.first.place))
        c = g.check
        assert c is not None
        left_out += g.count
        dropped.append(f"{g.rule} {g.title}: the fix compiled ({c.fix}) saves "
                       f"{c.amount(c.saved)} of {c.figure}, under the threshold: left out "
                       f"(estimated {c.estimate.describe(advice.device)})")
    kept.sort(key=lambda g: -g.share)
    report.timings["check"] = time.perf_counter() - t0
    return Advice(kept, advice.device, advice.optimized, advice.quiet + left_out - promoted,
                  advice.notes + tuple(dropped), advice.checked_out + tuple(places),
                  explained=advice.explained + left_out)


def checked_groups(report: Any, program: Program,
                   advice: Advice) -> list[tuple[FindingGroup, bool]]:
    """Each group of `advice` with its `Check` (where checked, its saving XLA's
    difference) and whether it is still worth a user's attention."""
    groups = list(advice.groups)
    fixes, why = plan(groups, report, program)
    checks: dict[int, Check] = {}
    ctx = _context(report)
    before = figures(report) if fixes else {}
    for n, fix in enumerate(fixes, 1):
        label = f"checking {len(fixes)} fix{'' if len(fixes) == 1 else 'es'}: {fix.kind}"
        if len(fixes) > 1:
            label += f" ({n} of {len(fixes)})"
        with prefix(label), quiet_native_stderr(logs=False):
            # (XLA's warnings on the fixed program, not the user's: held back)
            try:
                variant = fix.program.inspect()
            except Exception as e:  # noqa: BLE001  (the fix does not compile: say so)
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
                for rule in fix.rules:
                    why[rule] = f"the fixed program did not compile ({first})"
                continue
        if not fix.reached():
            for rule in fix.rules:
                why[rule] = f"{fix.kind}: nothing in reach of the fix when traced"
            continue
        mine = [i for i, g in enumerate(groups) if g.rule in fix.rules]
        for i in mine:
            checks[i] = _check(fix, groups[i], report, variant, before, ctx,
                               together=len(mine))
    out: list[tuple[FindingGroup, bool]] = []
    for i, g in enumerate(groups):
        c = checks.get(i)
        if c is None:
            how = ESTIMATED.get(g.rule, "from the compiled module")
            reason = why.get(g.rule)
            out.append((dataclasses.replace(g, check=Check(
                "estimated", how + (f"; not compiled: {reason}" if reason else ""),
                estimate=g.saving)), True))
            continue
        saving = _saving(c)
        share, basis = ctx.share(saving)
        if c.unit == "bytes" and c.before > 0:  # its share of the figure it was checked on
            share = max(0.0, c.saved) / c.before
            basis = ("footprint, as XLA counts it" if c.figure == FIGURES["footprint"]
                     else "peak, as XLA counts it")
        out.append((dataclasses.replace(g, saving=saving, share=share, basis=basis, check=c),
                    ctx.worth_it(saving)))
    return out


def _check(fix: Fix, g: FindingGroup, report: Any, variant: Any, before: dict[str, float],
           ctx: AdviceContext, together: int) -> Check:
    after = figures(variant)
    key = fix.figure
    note = f"{fix.fix}" + (f"; all {together} groups of {fix.kind} fixed together"
                           if together > 1 else "")
    if key == "footprint" and "footprint" not in before:
        key = "peak"
    if key in ("footprint", "peak"):
        peak = FIGURES["peak"] if before.get("peak_source") else "hloscope's peak"
        name = FIGURES[key] if key == "footprint" else peak
        # What the device must hold is the footprint; the peak it moved is said beside.
        moved = ((peak, int(before["peak"]), int(after["peak"])),) if key == "footprint" \
            and fix.kind == "remat" else ()
        return Check("checked", "", note, name, "bytes", before[key], after[key], g.saving,
                     moved, _fits(report, variant))
    # A fix for time may cost memory (XLA's flags hold two iterations' data): said too.
    peak = FIGURES["peak"] if before.get("peak_source") else "hloscope's peak"
    also = ((peak, int(before["peak"]), int(after["peak"])),)
    if key == "exposed":
        places = {f.place for f in g.findings}
        return Check("checked", "", note, FIGURES[key], "seconds", g.saving.seconds,
                     _exposed(variant, places), g.saving, also)
    return Check("checked", "", note, FIGURES[key], "seconds", _seconds(ctx),
                 _seconds(_context(variant)), g.saving, also)


def _fits(report: Any, variant: Any) -> str:
    """On a target where the program does not fit: whether the fixed one does, in words."""
    was, now = getattr(report, "fit", None), getattr(variant, "fit", None)
    if was is None or now is None or was.fits:
        return ""
    from .._units import format_bytes

    verdict = "fits" if now.fits else "does NOT fit either"
    return (f"the fixed program {verdict} on {now.device}: it needs "
            f"{format_bytes(now.need_bytes)} of {format_bytes(now.usable_bytes)}")


def _seconds(ctx: AdviceContext) -> float:
    """The program's estimated time with each matmul or convolution at the rate of the
    type it multiplies in (XLA fuses a bf16->f32 convert into the matmul's kernel, whose
    result is f32 either way: the operands say which rate it runs at)."""
    total = 0.0
    for k in ctx.graph.kernels:
        inst = ctx.inst(k)
        kind = k.element_type
        if inst is not None:
            for i in fused_instructions(inst):
                if i.opcode in ("dot", "convolution") and i.operands:
                    kind = i.operands[0].shape.element_type or kind
                    break
        total += k.roofline_seconds(ctx.device, kind) * ctx.runs(k.group)
    for c in ctx.graph.collectives:
        total += (c.sent_per_device or c.bytes) / ctx.link_bandwidth * ctx.runs(c.group)
    return total


def _saving(c: Check) -> Saving:
    saved = max(0.0, c.saved)
    if c.unit == "bytes" and c.figure == FIGURES["footprint"]:
        return Saving(footprint_bytes=int(saved))
    if c.unit == "bytes":
        return Saving(peak_bytes=int(saved))
    return Saving(seconds=saved)
