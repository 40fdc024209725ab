"""`hloscope memory` as text: totals, the peak and what makes it up, a timeline sparkline."""

from __future__ import annotations

from collections.abc import Sequence

from .._analysis._memory import BufferInfo, MemoryReport, XlaFigures
from .._sources._spmd_log import SpmdMemoryLog
from .._sources._xla_dumps import BufferAssignmentDump
from ._term import fit, safe
from ._text import format_bytes, table

__all__ = ["render_memory", "render_spmd_log", "render_xla_dump", "sparkline"]

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


def _same(a: int | None, b: int | None) -> str:
    if a is None or b is None:
        return ""
    if a == b:
        return "same"
    d = (a - b) / b * 100 if b else float("inf")
    return f"differs by {a - b:+,} B ({d:+.1f}%)"


def _rows(items: Sequence[BufferInfo]) -> list[list[str]]:
    return [[b.label, b.shape, format_bytes(b.bytes), b.kind, f"{b.start}-{b.end}",
             b.op_name or "-", b.source or "-"] for b in items]


_HEAD = ["value", "shape", "bytes", "kind", "live", "op_name", "source"]


def render_memory(r: MemoryReport, *, top: int = 10, width: int | None = None) -> str:
    """`hloscope memory` for one module, in `width` columns (None: every line whole)."""
    out: list[str] = [f"Module {safe(r.module)}", f"  from {safe(r.file)}",
                      f"  order: {r.order}",
                      f"  {r.steps} steps, {r.values} values in {r.buffers} buffers", ""]
    peak_line = (f"Peak          {_exact(r.peak_bytes)} at step {r.peak_step} "
                 f"({safe(r.peak_instruction)})")
    out.append(peak_line)
    x = r.xla
    if x is not None and x.live_range_peak_bytes is not None:
        out.append(f"  XLA's live-range peak {_exact(x.live_range_peak_bytes)} at step "
                   f"{x.live_range_peak_time}: {_same(r.peak_bytes, x.live_range_peak_bytes)}")
    tmax, tstep = r.timeline_max
    if r.peak_bytes is not None and tmax > r.peak_bytes:
        out.append(f"  note: the timeline is higher at step {tstep} ({tmax:,} B); the peak "
                   "above is the moment XLA's HloLiveRange picks (docs/memory.md)")
    out.append(f"Arguments     {_exact(r.argument_bytes)}")
    out.append(f"Outputs       {_exact(r.output_bytes)}"
               + (f", {_exact(r.alias_bytes)} of them reuse donated arguments"
                  if r.alias_bytes else ""))
    out.append(f"Constants     {_exact(r.constant_bytes)}")
    temp = f"Temporaries   {_exact(r.temp_estimate_bytes)} (hloscope's estimate of XLA's temp " \
           "allocation)"
    out.append(temp)
    if x is not None and x.temp_bytes is not None:
        out.append(f"  XLA's temp allocation {_exact(x.temp_bytes)}: "
                   f"{_same(r.temp_estimate_bytes, x.temp_bytes)}")
    out.append("")
    out.append(f"Live at the peak ({len(r.peak_values)} values, {_exact(r.peak_bytes)})")
    shown = r.peak_values[:top]
    if shown:
        out.append(table(_HEAD, _rows(shown), right=(2,), width=width,
                         drop=("live", "kind")))
    if len(r.peak_values) > top:
        rest = r.peak_values[top:]
        out.append(f"  ... and {len(rest)} more ({format_bytes(sum(b.bytes for b in rest))}; "
                   "--top N shows more)")
    out.append("")
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
    """XLA's own files without a module: allocations and the live-range peak list, in
    `width` columns (None: every line whole)."""
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
                       f"{_same(figs.recomputed_peak_bytes, figs.live_range_peak_bytes)}")
        shapes = {v.label: v.shape for a in ba.allocations for v in a.values} if ba else {}
        rows = [[label, shapes.get(label, "-"), _exact(b)]
                for label, b in figs.live_range_peak_values[:top]]
        out.append(table(["value", "shape", "bytes"], rows, right=(2,), width=width))
        if len(figs.live_range_peak_values) > top:
            out.append(f"  ... and {len(figs.live_range_peak_values) - top} more")
    return fit("\n".join(out) + "\n", width)


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
