"""`hloscope diff` as text."""

from __future__ import annotations

from typing import Any

from .._analysis._diff import ModuleDiff
from .._analysis._kernels import KernelGraph
from ._kernels_text import format_count
from ._term import fit, safe
from ._text import format_bytes, table

__all__ = ["render_diff"]


def _side(label: str, g: KernelGraph) -> str:
    n = len(g.temporaries)
    k = len(g.kernels)
    return (f"  {label}: {safe(g.file)} (module {safe(g.module)}): "
            f"{k} kernel{'s' if k != 1 else ''}, "
            f"{n} array{'s' if n != 1 else ''} between kernels "
            f"({format_bytes(g.temporary_bytes)})"
            + (f", peak {format_bytes(g.peak_bytes)}" if g.peak_bytes is not None else ""))


def _fused(d: dict[str, Any]) -> str:
    if d["target"]:
        return d["target"]
    items = sorted(d["fused"].items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} {n}" if n > 1 else op for op, n in items[:4]) or "-"


def _ops(items: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{op} {n}" if n > 1 else op for op, n in items) or "-"


def render_diff(d: ModuleDiff, *, width: int | None = None) -> str:
    """`hloscope diff` as text, in `width` columns (None: every line whole)."""
    out = ["Diff", _side("A", d.a), _side("B", d.b), "", "In words"]
    out.extend(f"  - {safe(line)}" for line in d.headline)
    if d.is_empty:
        return fit("\n".join(out) + "\n", width)
    out.append("")
    out.append(f"Kernels: {d.matched} matched, {len(d.removed)} removed, {len(d.added)} added, "
               f"{len(d.changed)} changed")
    for title, rows in (("removed (only in A)", d.removed), ("added (only in B)", d.added)):
        if rows:
            out.append(f"  {title}")
            out.append(table(["kernel", "place", "kind", "fused / target", "shape", "flops",
                              "source"],
                             [[r["name"], r["place"], r["category"]
                               + (f" {r['fusion_kind']}" if r["fusion_kind"] else ""),
                               _fused(r), r["shape"], format_count(r["flops"]),
                               r["source"] or "-"] for r in rows],
                             right=(5,), width=width, drop=("place", "kind"),
                             indent="    "))
    if d.changed:
        out.append("  changed (matched by place, kind and shapes; different work inside)")
        out.append(table(["A", "B", "place", "gained", "lost", "flops A -> B"],
                         [[c.a, c.b, c.place, _ops(c.gained), _ops(c.lost),
                           f"{format_count(c.flops_a)} -> {format_count(c.flops_b)}"]
                          for c in d.changed], width=width, drop=("place", "lost"),
                         indent="    "))
    for title, rows in (("Arrays between kernels gone", d.temporaries_removed),
                        ("Arrays between kernels new", d.temporaries_added)):
        if rows:
            out.append("")
            out.append(f"{title} ({format_bytes(sum(r['bytes'] for r in rows))})")
            out.append(table(["array", "from", "shape", "bytes"],
                             [[r["value"], r["from"] or "-", r["shape"], format_bytes(r["bytes"])]
                              for r in rows], right=(3,), width=width))
    out.append("")
    pa, pb = d.peak_a, d.peak_b
    if pa is not None and pb is not None:
        out.append(f"Memory peak: {format_bytes(pa)} -> {format_bytes(pb)} ({pb - pa:+,} B)")
    for title, rows in (("  no longer live at the peak", d.peak_removed),
                        ("  newly live at the peak", d.peak_added)):
        if rows:
            out.append(title + ": " + ", ".join(
                safe(r["shape"]) + (f" ({safe(r['op_name'])})" if r["op_name"] else "")
                for r in rows[:6]))
    for title, rows in (("Collectives gone", d.collectives_removed),
                        ("Collectives new", d.collectives_added)):
        if rows:
            out.append(f"{title}: " + ", ".join(
                f"{safe(r['opcode'])} {safe(r['shape'])} "
                f"({format_bytes(r['sent_per_device'])} per device)"
                for r in rows))
    fa, fb = d.flops
    ba, bb = d.bytes_accessed
    out.append(f"Flops: {format_count(fa)} -> {format_count(fb)}; bytes accessed: "
               f"{format_bytes(ba)} -> {format_bytes(bb)}")
    for title, fs in (("Advisor findings gone", d.findings_gone),
                      ("Advisor findings new", d.findings_new)):
        if fs:
            out.append(f"{title}: " + "; ".join(safe(f"{f.rule} {f.title}") for f in fs))
    return fit("\n".join(out) + "\n", width)
