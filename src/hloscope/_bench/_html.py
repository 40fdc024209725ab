"""A benchmark report as one self-contained HTML page (no script, no network).

The same sections as the Markdown report, with two plots drawn as inline SVG:
every run's time in order (the median and its 95% confidence interval as a
band, outliers marked, the first run beside; one line per rank when there are
several processes) and the distribution of the times.
"""

from __future__ import annotations

import html
from typing import Any

from ._report import BenchReportData

__all__ = ["bench_html"]

_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;font-variant-numeric:tabular-nums;vertical-align:top}th{background:#f4f4f4}
.bad{color:#b00;font-weight:600}.ok{color:#070}pre{background:#f7f7f7;padding:8px;
overflow:auto;max-height:480px;font-size:12px}svg{display:block;margin:8px 0}
h2{border-bottom:1px solid #ddd;padding-bottom:2px;margin-top:28px}"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _table(head: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    h = "".join(f"<th>{_e(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _runs_svg(d: BenchReportData) -> str:
    times = [x for _, x, _ in d.runs]
    if not times:
        return ""
    r = d.result
    w, h, left, bottom, top = 760, 260, 70, 30, 14
    series = d.rank_runs if len(d.rank_runs) > 1 else [times]
    allv = [x for s in series for x in s] + times
    lo, hi = min(allv), max(allv)
    if hi <= lo:
        hi = lo * 1.1 + 1e-9
    pad = (hi - lo) * 0.08
    lo, hi = max(0.0, lo - pad), hi + pad
    n = len(times)

    def X(i: float) -> float:
        return left + (w - left - 10) * (i + 0.5) / n

    def Y(v: float) -> float:
        return top + (h - top - bottom) * (1 - (v - lo) / (hi - lo))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'role="img" aria-label="time of each run">',
             f'<rect x="{left}" y="{top}" width="{w - left - 10}" height="{h - top - bottom}" '
             'fill="none" stroke="#ccc"/>']
    s = r.stats if r is not None else {}
    if "median_ci95" in s:
        a, b = s["median_ci95"]
        parts.append(f'<rect x="{left}" y="{Y(b):.1f}" width="{w - left - 10}" '
                     f'height="{max(0.5, Y(a) - Y(b)):.1f}" fill="#cfe3ff" opacity="0.7"/>')
        parts.append(f'<line x1="{left}" x2="{w - 10}" y1="{Y(s["median"]):.1f}" '
                     f'y2="{Y(s["median"]):.1f}" stroke="#2a6ad8" stroke-dasharray="4 3"/>')
    colors = ("#444", "#d8572a", "#2a9d8f", "#8a5cd8", "#c9a227", "#2a6ad8")
    for k, ser in enumerate(series):
        pts = " ".join(f"{X(i):.1f},{Y(v):.1f}" for i, v in enumerate(ser[:n]))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colors[k % 6]}" '
                     'stroke-width="1.2"/>')
    outl = set(s.get("outliers", []))
    for i, v in enumerate(times):
        c = "#b00" if i in outl else "#222"
        parts.append(f'<circle cx="{X(i):.1f}" cy="{Y(v):.1f}" r="2.6" fill="{c}">'
                     f'<title>run {i}: {v * 1e3:.4f} ms</title></circle>')
    for frac in (0, 0.5, 1):
        v = lo + (hi - lo) * frac
        parts.append(f'<text x="{left - 6}" y="{Y(v) + 4:.1f}" font-size="11" '
                     f'text-anchor="end">{v * 1e3:.4g}</text>')
    parts.append(f'<text x="{left}" y="{h - 8}" font-size="11">run 0 .. {n - 1} '
                 '(ms; dashed: median, band: its 95% CI, red: outliers'
                 + (', one line per rank' if len(series) > 1 else '') + ')</text>')
    if r is not None and r.first_run is not None:
        parts.append(f'<text x="{w - 12}" y="{h - 8}" font-size="11" text-anchor="end">'
                     f'first run (not shown): {r.first_run * 1e3:.4g} ms</text>')
    parts.append("</svg>")
    return "".join(parts)


def _hist_svg(times: list[float]) -> str:
    if len(times) < 2:
        return ""
    w, h, bins = 760, 140, min(30, max(5, len(times) // 2))
    lo, hi = min(times), max(times)
    width = (hi - lo) / bins or 1e-12
    counts = [0] * bins
    for x in times:
        counts[min(bins - 1, int((x - lo) / width))] += 1
    cmax = max(counts)
    bw = (w - 80) / bins
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
             'aria-label="distribution of the times">']
    for i, c in enumerate(counts):
        bh = (h - 40) * c / cmax
        parts.append(f'<rect x="{70 + i * bw:.1f}" y="{h - 24 - bh:.1f}" width="{bw - 1:.1f}" '
                     f'height="{bh:.1f}" fill="#7aa7e8"><title>{c} runs in '
                     f'{(lo + i * width) * 1e3:.4g}-{(lo + (i + 1) * width) * 1e3:.4g} ms'
                     '</title></rect>')
    parts.append(f'<text x="70" y="{h - 8}" font-size="11">{lo * 1e3:.4g} ms</text>'
                 f'<text x="{w - 10}" y="{h - 8}" font-size="11" text-anchor="end">'
                 f'{hi * 1e3:.4g} ms</text></svg>')
    return "".join(parts)


def bench_html(d: BenchReportData) -> str:
    """The page (deterministic: the same result gives the same bytes)."""
    out = [f"<h1>{_e(d.title)}</h1>", "<h2>Parameters</h2>",
           _table(("Parameter", "Value"), d.params), "<h2>Profiling Data</h2>",
           _table(("Parameter", "Value"), d.profiling),
           f"<p class=note>{_e(d.profiling_note)}</p>" if d.profiling_note else "",
           "<h2>Iteration Runs</h2>",
           _runs_svg(d), _hist_svg([x for _, x, _ in d.runs])]
    if len(d.rank_runs) > 1:
        out.append(_table(("Iteration", "Slowest rank (ms)",
                           *[f"Rank {k}" for k in range(len(d.rank_runs))]),
                          [(lab, f"{x * 1e3:.4f}", *[f"{rr[i] * 1e3:.4f}" for rr in d.rank_runs])
                           for i, (lab, x, _) in enumerate(d.runs)]))
    else:
        out.append(_table(("Iteration", "Time (ms)", "Note"),
                          [(lab, f"{x * 1e3:.4f}", note) for lab, x, note in d.runs]))
    if d.checks:
        rows = "".join(
            f"<tr><td>{_e(c['parameter'])}</td><td>{_e(c['given'])}</td>"
            f"<td>{_e(c['program'])}</td><td class=\"{'ok' if c['ok'] else 'bad'}\">"
            f"{'ok' if c['ok'] else 'MISMATCH'}</td><td>{_e(c['note'])}</td></tr>"
            for c in d.checks)
        out.append("<h2>Checks</h2><table><tr><th>Parameter</th><th>Given</th><th>Program"
                   f"</th><th></th><th>What was compared</th></tr>{rows}</table>")
    if d.temp is not None:
        t = d.temp
        out.append("<h2>Temporary Size, buffer by buffer</h2>")
        out.append(f"<p>XLA's Temporary Size: {_e(t.get('xla_temp'))} B; its scratch "
                   f"allocation(s) hold {len(t['buffers'])} values "
                   f"({t['value_bytes']:,} B side by side, {t['total_bytes']:,} B with "
                   "reuse).</p>")
        out.append(_table(("Allocation", "Offset", "Bytes", "Value", "Shape", "Live",
                           "Made by", "Source"),
                          [(b["allocation"], b["offset"], f"{b['bytes']:,}", b["value"],
                            b["shape"], f"{b['live'][0]}-{b['live'][1]}" if b["live"] else "",
                            b["op_name"] or b["opcode"], b["source"] or "")
                           for b in t["buffers"]]))
    if d.peak is not None:
        out.append(f"<h2>Memory at the Peak</h2><p>{(d.peak['bytes'] or 0):,} B at "
                   f"<code>{_e(d.peak['instruction'])}</code></p>")
        out.append(_table(("Value", "Shape", "Bytes", "Kind", "Made by", "Source"),
                          [(v["value"], v["shape"], f"{v['bytes']:,}", v["kind"], v["op_name"],
                            v["source"] or "") for v in d.peak["values"]]))
    if d.kernels is not None:
        k = d.kernels
        out.append(f"<h2>Kernels</h2><p>{k['count']} kernels, {k['temporaries']} arrays "
                   f"between kernels ({k['temporary_bytes']:,} B)</p>")
        out.append(_table(("Kernel", "Kind", "Shape", "Bytes", "Flops", "Source"),
                          [(x["name"], x["category"], x["shape"], f"{x['bytes_accessed']:,}",
                            f"{x['flops']:,}", x["source"] or "") for x in k["top"]]))
        out.append("<h2>Collectives</h2>" + (_table(
            ("Collective", "Op", "Shape", "Groups", "Sent per device", "Received per device"),
            [(c["name"], c["opcode"], c["shape"], f"{len(c['groups'])} of {c['group_size']}",
              f"{c['sent_per_device']:,}", f"{c['received_per_device']:,}")
             for c in d.collectives]) if d.collectives else "<p>None.</p>"))
    if d.target:
        out.append("<h2>Target</h2><p>The same program compiled ahead of time for the target "
                   "(the times above are this machine's):</p><pre>"
                   + _e("\n".join(d.target)) + "</pre>")
    if d.processes:
        out.append("<h2>Processes</h2>" + _table(
            ("Rank", "Min (ms)", "Median (ms)", "Max (ms)"),
            [(k, f"{s['min'] * 1e3:.4f}", f"{s['median'] * 1e3:.4f}", f"{s['max'] * 1e3:.4f}")
             for k, s in d.processes]))
    if d.metadata:
        out.append("<h2>Metadata</h2>" + _table(("Parameter", "Value"), d.metadata))
    for title, _, text in d.code:
        if text:
            out.append(f"<h2>{_e(title)}</h2><details><summary>{len(text.splitlines())} lines"
                       f"</summary><pre>{_e(text)}</pre></details>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; img-src data:\">"
            f"<title>{_e(d.title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(out) + "</body></html>\n")
