"""`hloscope memory` as text: totals, the peak and what makes it up, a timeline sparkline."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

from .._analysis._figures import MemoryFigures, optimized_note, pct
from .._analysis._memory import BufferInfo, MemoryReport, XlaFigures, shared_again
from .._sources._spmd_log import SpmdMemoryLog
from .._sources._xla_dumps import BufferAssignmentDump, MemoryUsageReport
from ._term import fit, safe
from ._text import format_bytes, table

__all__ = ["by_source", "render_figures", "render_headline", "render_memory",
           "render_spmd_log", "render_xla_dump", "sparkline"]

_BLOCKS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[int], width: int = 64) -> str:
    """The series squeezed to `width` columns (each the max of its bucket), as block characters."""
    if not values:
        return ""
    n = len(values)
    cols = min(width, n)
    top = max(values) or 1
    out = []
    for c in range(cols):
        lo = c * n // cols
        hi = max(lo + 1, (c + 1) * n // cols)
        v = max(values[lo:hi])
        out.append(_BLOCKS[min(8, (v * 8 + top - 1) // top)] if v > 0 else _BLOCKS[0])
    return "".join(out)


def _exact(n: int | None) -> str:
    return "unknown" if n is None else f"{format_bytes(n)} ({n:,} B)" if n >= 1024 else f"{n} B"


def _same(ours: int | None, theirs: int | None, label: str = "") -> str:
    """How XLA's figure `theirs` compares with hloscope's `ours` (named `label`)."""
    if ours is None or theirs is None:
        return ""
    what = f" as {label}" if label else ""
    if ours == theirs:
        return f"same{what}"
    d = f" ({pct(ours, theirs)})" if theirs else ""
    return f"hloscope's {label or 'figure'} differs by {ours - theirs:+,} B{d}"


def _rows(items: Sequence[BufferInfo]) -> list[list[str]]:
    return [[b.label, b.shape, format_bytes(b.bytes), b.kind, f"{b.start}-{b.end}",
             b.op_name or "-", b.source or ("-" if b.where.startswith("(") else b.where)]
            for b in items]


_HEAD = ["value", "shape", "bytes", "kind", "live", "op_name", "source"]


# A figure from XLA compared with hloscope's own.
_VERSUS = {"xla_live_range_peak": "live_range_peak", "xla_temp": "temp_estimate",
           "memory_analysis.argument_size_in_bytes": "arguments",
           "memory_analysis.output_size_in_bytes": "outputs",
           "memory_analysis.alias_size_in_bytes": "aliased",
           "memory_analysis.temp_size_in_bytes": "temp_estimate"}
_SOURCE = {"memory_analysis()": "XLA's memory_analysis()",
           "memory_analysis() + XLA's buffer assignment":
               "XLA's memory_analysis(), temp from its buffer assignment",
           "hloscope + XLA dump": "temp from XLA's buffer assignment",
           "hloscope": "hloscope's estimate"}


def render_headline(figs: MemoryFigures, live: int | None = None,
                    padded: int | None = None, again: int = 0) -> list[str]:
    """The one figure a memory question is answered with, what the device must hold, and
    beside it the most that is live at once and where (`live`: how many values; `padded`:
    their allocated size, TPU tiles padded, where it is more than XLA's live-range
    figure, which sizes them without the padding; `again`: the bytes of values there in
    the buffer of another one there, which XLA's live-range peak counts twice).  Where the
    timeline goes higher than XLA's peak moment, the peak is not called the most."""
    head, peak = figs.headline, figs.get("live_range_peak")
    tmax = figs.get("timeline_max")
    out: list[str] = []
    if head is not None and head.bytes is not None:
        terms = [(k, b) for k, b in head.parts if k != "aliased"]
        aliased = dict(head.parts).get("aliased", 0)
        what = " + ".join(f"{k} {format_bytes(b)}" for k, b in terms)
        if aliased:
            what += (f"; outputs {format_bytes(aliased)} aliased to donated arguments, "
                     "counted once")
        each = " per device" if figs.per_device else ""
        out.append(f"Needs {_exact(head.bytes)}{each}: what XLA allocates "
                   f"({_SOURCE.get(head.source, head.source)}): {what}")
    if peak is not None and peak.bytes is not None:
        values = f": the {live} values below" if live else ""
        where = " in HBM" if figs.get("all_spaces_peak") is not None else ""
        most = _exact(peak.bytes)
        if padded is not None and padded > peak.bytes:
            most = (f"{_exact(padded)} (tiles padded; XLA's live-range peak, unpadded: "
                    f"{format_bytes(peak.bytes)})")
        # (a timeline a hundredth above the peak, a tuple's pointer table: Details say so)
        above = tmax is not None and tmax.bytes is not None and tmax.bytes > 1.01 * max(
            peak.bytes, padded or 0)
        if above:
            assert tmax is not None and tmax.bytes is not None
            out.append(f"  {most} live at once{where} at XLA's peak moment, {safe(peak.at)}"
                       f"{values}; the timeline goes up to {format_bytes(tmax.bytes)}, at "
                       f"{safe(tmax.at)} (Details below say why)")
        elif again:
            out.append(f"  {most} live at once by XLA's live-range peak{where}, at "
                       f"{safe(peak.at)}{values}")
        else:
            out.append(f"  at most {most} live at once{where}, at {safe(peak.at)}{values}")
        if again:
            held = max(peak.bytes, padded or 0) - again
            out.append(f"  held in {format_bytes(held)} of buffers: {format_bytes(again)} of it "
                       "are values written in place into the buffer of another value live "
                       "there (an in-place update, a loop's state, an output into a donated "
                       "argument), which XLA's live-range peak counts again")
        elif (head is not None and head.bytes is not None and peak.bytes > head.bytes
                and dict(head.parts).get("aliased", 0)):
            out.append("  (more than allocated: an output written into a donated argument "
                       "and that argument share one buffer, and each counts in XLA's "
                       "live-range peak)")
    return out


def render_figures(figs: MemoryFigures, width: int | None = None) -> list[str]:
    """Every figure but the headline, each with its meaning, and why they differ (see
    `memory_figures`); the explanations wrapped to `width` (None: 96 columns)."""
    out: list[str] = ["Details (every figure; docs/memory.md says where each comes from)"]
    xla = [f for f in figs.figures if f.key.startswith("memory_analysis.")]
    zero_host = [f for f in xla if f.label.startswith("host_") and not f.bytes]
    xla = [f for f in xla if f not in zero_host]
    for f in figs.figures:
        if f.key.startswith("memory_analysis.") or f.key == "allocation":
            continue
        note = (f"at {safe(f.at)}; " if f.at else "") + f.meaning
        if f.key in _VERSUS:
            # XLA's live-range dump counts every memory space: compared with that peak.
            other = (f.key == "xla_live_range_peak" and figs.get("all_spaces_peak")
                     or figs.get(_VERSUS[f.key]))
            note = _same(other.bytes if other else None, f.bytes, other.label if other else "")
        out.append(f"  {f.label:<14}{_exact(f.bytes):<25} {note}".rstrip())
    if xla:
        out.append("  XLA's memory_analysis()")
        for x in xla:
            other = figs.get(_VERSUS.get(x.key, ""))
            cmp = _same(other.bytes if other else None, x.bytes, other.label if other else "")
            out.append(f"    {x.label:<36}{_exact(x.bytes):<25} {cmp or x.meaning}".rstrip())
        if zero_host:
            out.append(f"    {'host_*_in_bytes':<36}0 B (all {len(zero_host)})")
    if figs.explanations:
        out.append("Why these figures differ")
        for e in figs.explanations:
            # A size and its unit stay on one line.
            text = re.sub(r"(\d) (B|KiB|MiB|GiB|TiB|PiB)\b", "\\1\u00a0\\2", safe(e.text))
            out.extend(line.replace("\u00a0", " ") for line in textwrap.wrap(
                text, min(width or 96, 96), initial_indent="  - ", subsequent_indent="    ",
                break_on_hyphens=False))
    return out


def by_source(values: Sequence[BufferInfo], top: int = 10) -> list[tuple[str, int, int]]:
    """The values live at the peak grouped by the line of code that made them (arguments
    by their name in the user's code): (where, bytes, values), largest first."""
    groups: dict[str, list[int]] = {}
    for b in values:
        g = groups.setdefault(b.where, [0, 0])
        g[0] += b.bytes
        g[1] += 1
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [(where, n, count) for where, (n, count) in ranked[:top]]


def render_memory(r: MemoryReport, *, top: int = 10, width: int | None = None) -> str:
    """`hloscope memory` for one module, in `width` columns (None: every line whole)."""
    out: list[str] = [f"Module {safe(r.module)}", f"  from {safe(r.file)}",
                      f"  order: {r.order}",
                      f"  {r.steps} steps, {r.values} values in {r.buffers} buffers", ""]
    if not r.optimized:
        out[2:2] = ["  " + optimized_note(False)]
    padded = sum(v.bytes for v in r.peak_values)
    out.extend(render_headline(r.figures, len(r.peak_values), padded, r.peak_counted_again))
    out.append("")
    total = _exact(r.peak_bytes)
    if r.peak_bytes is not None and padded > r.peak_bytes:
        total = f"{_exact(padded)} as allocated, tiles padded"
    out.append(f"Live at the peak ({len(r.peak_values)} values, {total})")
    shown = r.peak_values[:top]
    if shown:
        out.append(table(_HEAD, _rows(shown), right=(2,), width=width,
                         drop=("live", "kind")))
    if len(r.peak_values) > top:
        rest = r.peak_values[top:]
        out.append(f"  ... and {len(rest)} more ({format_bytes(sum(b.bytes for b in rest))}; "
                   "--top N shows more)")
    again = shared_again(r.peak_values)
    for b in shown:
        if b.label in again:
            out.append(f"  {safe(b.label)} is in the buffer of {safe(again[b.label])} "
                       "(written in place): counted twice above, held once")
    lines = by_source(r.peak_values, top)
    if lines:
        out.append("")
        out.append("The peak by line of code")
        out.append(table(["where", "bytes", "values"],
                         [[safe(w), format_bytes(n), c] for w, n, c in lines],
                         right=(1, 2), width=width))
    out.append("")
    out.extend(render_figures(r.figures, width))
    out.append("")
    tmax, tstep = r.timeline_max
    out.append(f"Timeline (bytes held per step, each buffer once; max {format_bytes(tmax)} "
               f"at step {tstep})")
    out.append(f"  |{sparkline(r.timeline)}|")
    out.append(f"   0{' ' * max(1, min(64, len(r.timeline)) - len(str(r.steps)) - 1)}{r.steps}")
    if r.sharded is not None:
        out.append("")
        out.extend(_sharded(r, width))
    return fit("\n".join(out) + "\n", width)


def _sharded(r: MemoryReport, width: int | None) -> list[str]:
    s = r.sharded
    assert s is not None
    if s.partitioned:
        return [(f"Sharding: the module is already partitioned for {s.devices} devices; "
                 "every size above is per device")]
    out = [(f"Sharding: {len(s.rows)} sharded values over {s.devices} devices: "
            f"{format_bytes(s.replicated_bytes)} on one device unpartitioned, "
            f"{format_bytes(s.per_device_bytes)} per device partitioned")]
    rows = [[x.label, x.shape, format_bytes(x.bytes), x.sharding, x.per_device_shape,
             format_bytes(x.per_device_bytes)] for x in s.rows[:20]]
    out.append(table(["value", "shape", "bytes", "sharding", "per device", "bytes/device"],
                     rows, right=(2, 5), width=width, drop=("shape", "sharding")))
    if len(s.rows) > 20:
        out.append(f"  ... and {len(s.rows) - 20} more (see --json)")
    return out


def render_xla_dump(path: str, ba: BufferAssignmentDump | None, figs: XlaFigures,
                    *, top: int = 20, width: int | None = None) -> str:
    """XLA's own files without a module: allocations, the live-range peak list, and the
    memory-usage report's totals, allocations and largest values, in `width` columns (None:
    every line whole)."""
    out = [f"XLA memory dump {safe(path)}"]
    if ba is not None:
        kinds: dict[str, tuple[int, int]] = {}
        for a in ba.allocations:
            n, b = kinds.get(a.kind, (0, 0))
            kinds[a.kind] = (n + 1, b + a.size)
        out.append(f"  {len(ba.allocations)} allocations"
                   + (f", {_exact(ba.total_bytes)} in all" if ba.total_bytes is not None else ""))
        out.append(table(["kind", "allocations", "bytes"],
                         [[k, n, _exact(b)] for k, (n, b) in sorted(kinds.items())],
                         right=(1, 2), width=width))
    if figs.live_range_peak_time is not None:
        out.append("")
        out.append(f"Live at the peak (step {figs.live_range_peak_time}): "
                   f"{len(figs.live_range_peak_values)} values, "
                   f"{_exact(figs.live_range_peak_bytes)}")
        if figs.recomputed_peak_bytes is not None:
            out.append("  hloscope, replaying the dump's live ranges: "
                       f"{_exact(figs.recomputed_peak_bytes)}, "
                       f"{_same(figs.recomputed_peak_bytes, figs.live_range_peak_bytes, 'peak')}")
        shapes = {v.label: v.shape for a in ba.allocations for v in a.values} if ba else {}
        rows = [[label, shapes.get(label, "-"), _exact(b)]
                for label, b in figs.live_range_peak_values[:top]]
        out.append(table(["value", "shape", "bytes"], rows, right=(2,), width=width))
        if len(figs.live_range_peak_values) > top:
            out.append(f"  ... and {len(figs.live_range_peak_values) - top} more")
    if figs.memory_usage is not None:
        if ba is not None or figs.live_range_peak_time is not None:
            out.append("")
        out.extend(_memory_usage(figs.memory_usage, top, width))
    return fit("\n".join(out) + "\n", width)


def _memory_usage(mu: MemoryUsageReport, top: int, width: int | None) -> list[str]:
    """XLA's memory-usage report: per memory space its total and its allocations, largest
    first; then the largest values (the largest at each offset of each allocation)."""
    out: list[str] = []
    multi = len(mu.spaces) > 1
    for sp in mu.spaces:
        listed = sum(a.bytes for a in sp.allocations)
        where = f" in memory space {sp.name} (color {sp.color})" if multi or sp.color else ""
        out.append(f"Total         {_exact(sp.total_bytes)}{where}, "
                   f"{len(sp.allocations)} allocations listed (XLA's memory-usage report)")
        rows = []
        for a in sp.allocations[:top]:
            first = a.offsets[0].shapes if a.offsets else (a.description or "-")
            rows.append([a.rank, _exact(a.bytes), a.values, len(a.offsets), first])
        if rows:
            out.append(table(["#", "bytes", "values", "offsets", "largest at one offset"],
                             rows, right=(0, 1, 2, 3), width=width))
        if len(sp.allocations) > top:
            rest = sp.allocations[top:]
            out.append(f"  ... and {len(rest)} more ({format_bytes(sum(a.bytes for a in rest))}"
                       "; --top N shows more)")
        if listed < sp.total_bytes:
            out.append(f"  {_exact(sp.total_bytes - listed)} not in the list: alignment "
                       "padding, or small allocations XLA leaves out")
        out.append("")
    values = sorted(((o, a.rank) for sp in mu.spaces for a in sp.allocations
                     for o in a.offsets), key=lambda x: (-x[0].bytes, x[1], x[0].offset))
    out.append(f"Largest values ({len(values)} offsets in the allocations listed)")
    rows = [[_exact(o.bytes), rank, o.offset, o.values, o.shapes] for o, rank in values[:top]]
    if rows:
        out.append(table(["bytes", "allocation", "offset", "values", "shapes"], rows,
                         right=(0, 1, 2, 3), width=width))
    if len(values) > top:
        out.append(f"  ... and {len(values) - top} more (--top N shows more)")
    return out


def render_spmd_log(log: SpmdMemoryLog, *, top: int = 10, width: int | None = None) -> str:
    """The SPMD partitioner's memory lists from a log, before and after partitioning, in
    `width` columns (None: every line whole)."""
    out = [f"SPMD partitioner memory lists in {safe(log.path)}"]
    for sec in log.sections:
        total = sum(e.bytes for e in sec.entries)
        out.append("")
        out.append(f"{safe(sec.title)} ({len(sec.entries)} instructions, "
                   f"{format_bytes(total)})")
        rows = [[format_bytes(e.bytes), e.name, e.shape, e.opcode] for e in sec.entries[:top]]
        if rows:
            out.append(table(["bytes", "instruction", "shape", "opcode"], rows, right=(0,),
                             width=width, drop=("opcode",)))
        if len(sec.entries) > top:
            out.append(f"  ... and {len(sec.entries) - top} more")
    if log.hbm:
        out.append("")
        out.append("Device memory the compiler reported")
        out.extend(f"  {safe(line)}" for line in log.hbm)
    return fit("\n".join(out) + "\n", width)
