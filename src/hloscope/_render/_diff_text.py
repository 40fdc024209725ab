"""`hloscope diff` as text."""

from __future__ import annotations

from typing import Any

from .._analysis._diff import ModuleDiff
from .._analysis._kernels import KernelGraph
from ._kernels_text import format_count
from ._term import fit, safe
from ._text import format_bytes, table

__all__ = ["memory_lines", "render_diff"]


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


def _change(n: int | None) -> str:
    if n is None:
        return "-"
    if n == 0:
        return "="
    exact = f"{n:+,} B"
    words = ("+" if n > 0 else "-") + format_bytes(abs(n))
    return exact if words.replace(",", "") == exact.replace(",", "") else f"{words} ({exact})"


def _peak_rows(rows: tuple[dict[str, Any], ...]) -> list[list[str]]:
    """Values at the peak on one side only, one row per shape and op_name, with a count."""
    groups: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        groups.setdefault((r["shape"], r["op_name"]), []).append(r["bytes"])
    return [[s + (f" x{len(b)}" if len(b) > 1 else ""), o or "-", format_bytes(sum(b))]
            for (s, o), b in groups.items()]


def memory_lines(d: ModuleDiff, width: int | None) -> list[str]:
    """Every memory figure of `hloscope memory` for A and B and the change, then the values
    live at the peak on one side only (what moved)."""
    out = []
    if d.figures:
        # memory_analysis()'s host_* fields at 0 on both sides in one row, as hloscope
        # memory shows them.
        zero_host = [r for r in d.figures if r["label"].startswith("host_")
                     and r["key"].startswith("memory_analysis.") and not r["a"] and not r["b"]]
        rows = []
        for r in d.figures:
            if r in zero_host:
                if r is zero_host[0]:
                    rows.append([f"host_*_in_bytes (all {len(zero_host)})", "0 B", "0 B", "="])
                continue
            rows.append([r["label"], "-" if r["a"] is None else format_bytes(r["a"]),
                         "-" if r["b"] is None else format_bytes(r["b"]), _change(r["change"])])
        out.append("Memory (the figures of hloscope memory)")
        out.append(table(["figure", "A", "B", "change"], rows, right=(1, 2, 3), width=width))
    elif d.peak_a is not None and d.peak_b is not None:
        out.append(f"Memory peak: {format_bytes(d.peak_a)} -> {format_bytes(d.peak_b)} "
                   f"({d.peak_b - d.peak_a:+,} B)")
    for title, rows in (("Live at the peak in A only", d.peak_removed),
                        ("Live at the peak in B only", d.peak_added)):
        if rows:
            out.append(f"{title} ({format_bytes(sum(r['bytes'] for r in rows))})")
            out.append(table(["shape", "op_name", "bytes"], _peak_rows(rows), right=(2,),
                             width=width))
    return out


def render_diff(d: ModuleDiff, *, width: int | None = None) -> str:
    """`hloscope diff` as text, in `width` columns (None: every line whole)."""
    out = ["Diff", _side("A", d.a), _side("B", d.b), "", "In words"]
    out.extend(f"  - {safe(line)}" for line in d.headline)
    if d.is_empty:
        return fit("\n".join(out) + "\n", width)
    out.append("")
    notes = [f"{d.op_name_changed} with the same work under another op_name"
             if d.op_name_changed else "", f"{len(d.resized)} on other shapes" if d.resized else ""]
    notes = [n for n in notes if n]
    out.append(f"Kernels: {d.matched} matched" + (f" ({'; '.join(notes)})" if notes else "")
               + f", {len(d.removed)} removed, {len(d.added)} added, {len(d.changed)} changed")
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
        out.append("  changed (different work inside; matched by place, kind and shapes, or output "
                   "and op_name)")
        out.append(table(["A", "B", "place", "gained", "lost", "flops A -> B"],
                         [[c.a, c.b, c.place, _ops(c.gained), _ops(c.lost),
                           f"{format_count(c.flops_a)} -> {format_count(c.flops_b)}"]
                          for c in d.changed], width=width, drop=("place", "lost"),
                         indent="    "))
    if d.resized:
        out.append("  on other shapes or inputs (matched by place, kind, work inside, op_name "
                   "and source)")
        out.append(table(["A", "B", "place", "shape A", "shape B", "flops A -> B"],
                         [[r["a"], r["b"], r["place"], r["shape_a"], r["shape_b"],
                           f"{format_count(r['flops_a'])} -> {format_count(r['flops_b'])}"]
                          for r in d.resized], width=width, drop=("place", "B"),
                         indent="    "))
    if d.temporaries_resized:
        rows_r = d.temporaries_resized
        out.append("")
        ta, tb = (sum(r[k] for r in rows_r) for k in ("bytes_a", "bytes_b"))
        out.append("Arrays between kernels on other shapes"
                   + (f" ({format_bytes(ta)} each side)" if ta == tb else
                      f", resized ({format_bytes(ta)} -> {format_bytes(tb)})"))
        out.append(table(["array A", "array B", "shape A", "shape B", "bytes A", "bytes B"],
                         [[r["a"], r["b"], r["shape_a"], r["shape_b"], format_bytes(r["bytes_a"]),
                           format_bytes(r["bytes_b"])] for r in rows_r],
                         right=(4, 5), width=width, drop=("array B",)))
    for title, rows in (("Arrays between kernels gone", d.temporaries_removed),
                        ("Arrays between kernels new", d.temporaries_added)):
        if rows:
            out.append("")
            out.append(f"{title} ({format_bytes(sum(r['bytes'] for r in rows))})")
            out.append(table(["array", "from", "shape", "bytes"],
                             [[r["value"], r["from"] or "-", r["shape"], format_bytes(r["bytes"])]
                              for r in rows], right=(3,), width=width))
    out.append("")
    out.extend(memory_lines(d, width))
    # Where a gone and a new collective look alike, what tells them apart: their devices.
    alike = {(r["opcode"], r["shape"], r["sent_per_device"]) for r in d.collectives_removed} \
        & {(r["opcode"], r["shape"], r["sent_per_device"]) for r in d.collectives_added}
    for title, rows in (("Collectives gone", d.collectives_removed),
                        ("Collectives new", d.collectives_added)):
        if rows:
            out.append(f"{title}: " + ", ".join(
                f"{safe(r['opcode'])} {safe(r['shape'])} "
                f"({format_bytes(r['sent_per_device'])} per device"
                + (f", over {safe(r.get('replica_groups') or 'every device')}"
                   if (r["opcode"], r["shape"], r["sent_per_device"]) in alike else "")
                + ")" for r in rows))
    fa, fb = d.flops
    ba, bb = d.bytes_accessed
    out.append(f"Flops: {format_count(fa)} -> {format_count(fb)}; bytes accessed: "
               f"{format_bytes(ba)} -> {format_bytes(bb)}")
    for title, fs in (("Advisor findings gone", d.findings_gone),
                      ("Advisor findings new", d.findings_new)):
        if fs:
            out.append(f"{title}: " + "; ".join(safe(f"{f.rule} {f.title}") for f in fs))
    if d.findings_changed:
        out.append("Advisor findings on both sides, on other evidence: " + "; ".join(
            safe(f"{x.rule} {x.title}") for x, _y in d.findings_changed))
    return fit("\n".join(out) + "\n", width)
