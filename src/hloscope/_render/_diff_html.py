"""`hloscope diff -o diff.html`: the differences in words and tables, and the two kernel
graphs side by side with what changed coloured (removed red, added green, changed amber).

The pictures are the SVG of `hloscope graph`, inline; every text is escaped and the page
needs no network.  Modules with more kernels than a picture can show get the tables only.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .._analysis._diff import ModuleDiff
from ._graph_layout import layout_graph
from ._profile_text import format_time, spread_line, time_diff_line
from ._svg import render_svg
from ._text import format_bytes

if TYPE_CHECKING:  # annotations only: the profile room renders through this layer
    from .._profile._diff import TimeDiff

__all__ = ["MAX_PICTURE_KERNELS", "render_diff_html"]

MAX_PICTURE_KERNELS = 300
REMOVED, ADDED, CHANGED = "#e8776c", "#8fd18a", "#f7c04a"  # apart from the kinds' colours

_CSS = """body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; } h2 { font-size: 15px; margin-top: 18px; }
table { border-collapse: collapse; font-family: monospace; font-size: 12px; }
td, th { padding: 1px 8px; border-bottom: 1px solid #eee; text-align: left; }
.pics { display: flex; gap: 16px; align-items: flex-start; overflow: auto; }
.pic { border: 1px solid #ddd; } .legend span { padding: 1px 6px; margin-right: 8px; }
"""


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _measured(t: TimeDiff, top: int = 30) -> str:
    """The measured time section: the step's change, whether it stands out of the runs'
    spread, and the kernels whose time changed most."""
    esc = html.escape
    rows = [[a or "-", b or "-", format_time(ta), format_time(tb),
             ("+" if (tb or 0.0) >= (ta or 0.0) else "") + format_time((tb or 0.0) - (ta or 0.0))]
            for a, b, ta, tb in t.rows[:top]]
    said = spread_line(t)
    more = f"<p>... and {len(t.rows) - top} more (see --json)</p>" if len(t.rows) > top else ""
    noted = "".join(f"<p>note ({side}'s profile): {esc(n)}</p>"
                    for side, notes in (("A", t.notes_a), ("B", t.notes_b)) for n in notes)
    return (f"<h2>Measured time</h2><p>{esc(time_diff_line(t))}</p>"
            + (f"<p>{esc(said)}</p>" if said else "") + noted
            + _table(["kernel in A", "kernel in B", "A", "B", "change"], rows) + more)


def render_diff_html(d: ModuleDiff, timed: TimeDiff | None = None) -> str:
    """The page; with `timed` (two profiles' measured times), a section of them."""
    esc = html.escape
    parts = [f"<h1>Diff: {esc(d.a.module)} &rarr; {esc(d.b.module)}</h1>",
             f"<div>A: {esc(d.a.file)}<br>B: {esc(d.b.file)}</div>",
             "<h2>In words</h2><ul>" + "".join(f"<li>{esc(x)}</li>" for x in d.headline) + "</ul>"]
    if timed is not None:
        parts.append(_measured(timed))
    if d.removed:
        parts.append("<h2>Kernels only in A</h2>" + _table(
            ["kernel", "place", "kind", "shape", "source"],
            [[r["name"], r["place"], r["category"], r["shape"], r["source"] or "-"]
             for r in d.removed]))
    if d.added:
        parts.append("<h2>Kernels only in B</h2>" + _table(
            ["kernel", "place", "kind", "shape", "source"],
            [[r["name"], r["place"], r["category"], r["shape"], r["source"] or "-"]
             for r in d.added]))
    if d.changed:
        parts.append("<h2>Kernels changed</h2>" + _table(
            ["A", "B", "place", "gained", "lost"],
            [[c.a, c.b, c.place, ", ".join(f"{o} {n}" for o, n in c.gained) or "-",
              ", ".join(f"{o} {n}" for o, n in c.lost) or "-"] for c in d.changed]))
    if d.resized:
        parts.append("<h2>Kernels on other shapes</h2>" + _table(
            ["A", "B", "place", "shape A", "shape B"],
            [[r["a"], r["b"], r["place"], r["shape_a"], r["shape_b"]] for r in d.resized]))
    rows = [[t["value"], t["shape"], format_bytes(t["bytes"]), "gone"]
            for t in d.temporaries_removed]
    rows += [[f"{t['a']} / {t['b']}", f"{t['shape_a']} -> {t['shape_b']}",
              f"{format_bytes(t['bytes_a'])} -> {format_bytes(t['bytes_b'])}", "resized"]
             for t in d.temporaries_resized]
    rows += [[t["value"], t["shape"], format_bytes(t["bytes"]), "new"]
             for t in d.temporaries_added]
    if rows:
        parts.append("<h2>Arrays between kernels</h2>" + _table(
            ["array", "shape", "bytes", ""], rows))
    if d.figures:
        parts.append("<h2>Memory</h2>" + _table(
            ["figure", "A", "B", "change"],
            [[r["label"], "-" if r["a"] is None else format_bytes(r["a"]),
              "-" if r["b"] is None else format_bytes(r["b"]),
              "-" if r["change"] is None else f"{r['change']:+,} B"] for r in d.figures]))
    rows = [[r["shape"], r["op_name"] or "-", format_bytes(r["bytes"]), "A only"]
            for r in d.peak_removed]
    rows += [[r["shape"], r["op_name"] or "-", format_bytes(r["bytes"]), "B only"]
             for r in d.peak_added]
    if rows:
        parts.append("<h2>Live at the peak on one side only</h2>" + _table(
            ["shape", "op_name", "bytes", ""], rows))
    if len(d.a.kernels) <= MAX_PICTURE_KERNELS and len(d.b.kernels) <= MAX_PICTURE_KERNELS:
        changed_a = {f"k:{c.a}": CHANGED for c in d.changed}
        changed_b = {f"k:{c.b}": CHANGED for c in d.changed}
        fills_a = {f"k:{r['name']}": REMOVED for r in d.removed} | changed_a
        fills_b = {f"k:{r['name']}": ADDED for r in d.added} | changed_b
        parts.append(
            "<h2>The two kernel graphs</h2><div class=\"legend\">"
            f"<span style=\"background:{REMOVED}\">only in A</span>"
            f"<span style=\"background:{ADDED}\">only in B</span>"
            f"<span style=\"background:{CHANGED}\">changed</span></div>"
            "<div class=\"pics\">"
            f"<div class=\"pic\">{render_svg(layout_graph(d.a), fills_a)}</div>"
            f"<div class=\"pic\">{render_svg(layout_graph(d.b), fills_b)}</div></div>")
    else:
        parts.append(f"<p>No pictures: more than {MAX_PICTURE_KERNELS} kernels on a side; "
                     "see hloscope report for each version.</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc('hloscope diff: ' + d.a.module)}</title>\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'\">\n"
            f"<style>\n{_CSS}</style>\n</head>\n<body>\n" + "\n".join(parts)
            + "\n</body>\n</html>\n")
