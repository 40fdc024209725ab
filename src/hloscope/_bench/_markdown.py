"""A benchmark report in Markdown, in jax-hpc-profiler's section order.

Parameters, Profiling Data and Iteration Runs come first, as in its
reports; hloscope's additions follow (checks, Temporary Size buffer by
buffer, memory at the peak, kernels, collectives, processes, metadata); the
Compiled Code, Lowered Code and JAXPR close the report, as they do there.
"""

from __future__ import annotations

import re
from typing import Any

from ._report import BenchReportData
from .._units import format_bytes

__all__ = ["MARKER", "bench_markdown"]


# Markdown's inline markup, escaped with a backslash (CommonMark allows it before any ASCII
# punctuation); HTML's three characters become entities, so no text from the user (a
# --param value, a named_scope, a path) can open a tag, a link or an emphasis.  Brackets
# stay (shapes read float32[64, 64]); a link needs "](", whose "(" is escaped.
_MD_ESCAPES = str.maketrans({c: "\\" + c for c in "\\`*|~"} | {
    "<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ", "\r": " "})
_EMPHASIS_RE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _cell(x: Any) -> str:
    """`x` as the text of a table cell or a heading: shown as written, never as markup."""
    text = _EMPHASIS_RE.sub(r"\\_", str(x).translate(_MD_ESCAPES))
    return text.replace("](", "]\\(")


def _table(head: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _fence(text: str) -> str:
    n = 3
    while "`" * n in text:
        n += 1
    return "`" * n


def _b(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,} B"


MARKER = "<!-- written by hloscope; its data is in the .json and results.csv beside it -->"


def bench_markdown(d: BenchReportData) -> str:
    out: list[str] = [f"# {_cell(d.title)}", "## Parameters"]
    out += _table(("Parameter", "Value"), [(k, v) for k, v in d.params])
    out += ["---", "## Profiling Data"]
    out += _table(("Parameter", "Value"), d.profiling)
    if d.profiling_note:
        out += ["", _cell(d.profiling_note), ""]
    out += ["---", "## Iteration Runs"]
    r = d.result
    first = [("First run", f"{r.first_run * 1e3:.4f}", "not in the statistics")] \
        if r is not None and r.first_run is not None else []
    if len(d.rank_runs) > 1:
        head = ("Iteration", "Time (ms, slowest rank)", *[f"Rank {k}" for k in
                                                          range(len(d.rank_runs))], "Note")
        rows = [(lab, f"{x * 1e3:.4f}", *[f"{rr[i] * 1e3:.4f}" for rr in d.rank_runs], note)
                for i, (lab, x, note) in enumerate(d.runs)]
        out += _table(head, rows)
    else:
        out += _table(("Iteration", "Time (ms)", "Note"),
                      first + [(lab, f"{x * 1e3:.4f}", note) for lab, x, note in d.runs])
    if d.checks:
        out += ["---", "## Checks", "Each parameter you gave, against the program's real "
                "shapes, dtype and device grid."]
        out += _table(("Parameter", "Given", "Program", "", "What was compared"),
                      [(c["parameter"], c["given"], "n/a" if c["program"] is None
                        else c["program"], "ok" if c["ok"] else "MISMATCH", c["note"])
                       for c in d.checks])
    if d.temp is not None:
        out += ["---", "## Temporary Size, buffer by buffer"]
        t = d.temp
        xla = t.get("xla_temp")
        agree = ("equal to" if xla == t["total_bytes"] else "not equal to")
        out.append(
            f"XLA's Temporary Size is {_b(xla)}: the scratch allocation(s) "
            + ", ".join(f"{i} ({_b(s)})" for i, s in t["allocations"])
            + f" of its buffer assignment, {_b(t['total_bytes'])} in all ({agree} XLA's "
            f"figure). {len(t['buffers'])} values live in it, {_b(t['value_bytes'])} if laid "
            "side by side: values whose live ranges do not overlap share the same bytes. "
            "Live ranges are steps of XLA's schedule.")
        out += _table(("Allocation", "Offset", "Size", "Value", "Shape", "Live", "Made by",
                       "Source"),
                      [(b["allocation"], b["offset"], _b(b["bytes"]), b["value"], b["shape"],
                        f"{b['live'][0]}-{b['live'][1]}" if b["live"] else "",
                        b["op_name"] or b["opcode"], b["source"] or "")
                       for b in t["buffers"]])
    if d.peak is not None:
        p = d.peak
        out += ["---", "## Memory at the Peak",
                f"Peak {_b(p['bytes'])} ({format_bytes(p['bytes'] or 0)}) at "
                f"`{p['instruction']}`; live there:"]
        out += _table(("Value", "Shape", "Size", "Kind", "Made by", "Source"),
                      [(v["value"], v["shape"], _b(v["bytes"]), v["kind"], v["op_name"],
                        v["source"] or "") for v in p["values"]])
        if p["more"]:
            out.append(f"... and {p['more']} smaller values.")
    if d.kernels is not None:
        k = d.kernels
        out += ["---", "## Kernels",
                f"{k['count']} kernels; {k['temporaries']} arrays passed between kernels "
                f"through memory ({_b(k['temporary_bytes'])}); {k['flops']:,} flops and "
                f"{_b(k['bytes_accessed'])} read and written in all (estimates). The largest "
                "by bytes:"]
        out += _table(("Kernel", "Kind", "Shape", "Bytes", "Flops", "Fused", "Source"),
                      [(x["name"], x["category"] + (f" ({x['target']})" if x["target"] else ""),
                        x["shape"], _b(x["bytes_accessed"]), f"{x['flops']:,}",
                        ", ".join(f"{o} x{n}" if n > 1 else o for o, n in x["fused"].items()),
                        x["source"] or "") for x in k["top"]])
        if k["more"]:
            out.append(f"... and {k['more']} more kernels.")
    if d.kernels is not None:
        out += ["---", "## Collectives"]
        if d.collectives:
            out += _table(("Collective", "Op", "Shape", "Groups", "Sent per device",
                           "Received per device", "Source"),
                          [(c["name"], c["opcode"], c["shape"],
                            f"{len(c['groups'])} of {c['group_size']}", _b(c["sent_per_device"]),
                            _b(c["received_per_device"]), c["source"] or "")
                           for c in d.collectives])
        else:
            out.append("None: the program moves no data between devices.")
    if d.target:
        text = "\n".join(d.target)
        f = _fence(text)
        out += ["---", "## Target",
                "The same program compiled ahead of time for the target (the times above are "
                "this machine's):", f + "text", text, f]
    if d.processes:
        out += ["---", "## Processes",
                "Each rank's own times; the Iteration Runs above take the slowest rank of "
                "each iteration."]
        out += _table(("Rank", "Min (ms)", "Median (ms)", "Max (ms)"),
                      [(k, f"{s['min'] * 1e3:.4f}", f"{s['median'] * 1e3:.4f}",
                        f"{s['max'] * 1e3:.4f}") for k, s in d.processes])
    if d.metadata:
        out += ["---", "## Metadata"]
        out += _table(("Parameter", "Value"), d.metadata)
    for title, lang, text in d.code:
        if text:
            f = _fence(text)
            out += ["---", f"## {title}", f + lang, text.rstrip("\n"), f]
    out += ["", MARKER]  # invisible when rendered; load_results skips the page by it
    return "\n".join(out) + "\n"
