"""The kernel graph as an SVG picture (and PNG through matplotlib), for small graphs.

Kernels are boxes listing what is fused inside (grey for fusions, coloured
for library calls, collectives, FFTs, copies); arrows are the arrays passed
between them, labelled with shape and size and styled by kind (argument,
temporary, output, constant); arrays live at the memory peak are drawn red
and thick; loops, branches and called computations are frames.  Every text
from the module is escaped; ids are derived from names, so the same module
gives the same file.
"""

from __future__ import annotations

import hashlib
import os
from xml.sax.saxutils import escape

from .._analysis._kernels import KernelGraph
from .._errors import HloscopeError
from .._hlo._module import Module
from .._write import atomic_path, write_text
from ._graph_layout import Picture, curves

__all__ = ["FILLS", "Drawing", "draw", "render_svg", "write_picture"]

FILLS = {
    "fusion": "#e4e4e4", "library call": "#fbd9b0", "collective": "#cfe0f5", "fft": "#e2d6f5",
    "copy": "#f5d0d0", "transpose": "#f5d0d0", "sort": "#d8efd2", "host transfer": "#f7f2c4",
    "argument": "#ffffff", "constant": "#ffffff", "loop state": "#ffffff", "result": "#ffffff",
}
_STROKES = {"argument": "#7a7a7a", "temporary": "#d07a12", "output": "#2a6fb0",
            "constant": "#9a9a9a"}
_DASH = {"argument": "5,3", "constant": "2,3"}


def _id(prefix: str, name: str) -> str:
    return prefix + hashlib.sha1(name.encode("utf-8", "replace")).hexdigest()[:12]


def render_svg(pic: Picture, fills: dict[str, str] | None = None) -> str:
    """The picture as SVG text; `fills` overrides the fill colour of boxes by id."""
    fills = fills or {}
    w, h = pic.width, pic.height
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
            f'viewBox="0 0 {w:.0f} {h:.0f}" font-family="DejaVu Sans Mono, Menlo, monospace" '
            'font-size="12">')
    out = [head, "<defs>"]
    for kind, color in sorted(_STROKES.items()) + [("peak", "#c0392b")]:
        out.append(f'<marker id="arrow-{kind}" viewBox="0 0 10 10" refX="10" refY="5" '
                   f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
                   f'<path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>')
    out.append("</defs>")
    out.append(f'<rect width="{w:.0f}" height="{h:.0f}" fill="#ffffff"/>')
    out.append(f'<text x="16" y="22" font-size="14" font-weight="bold">{escape(pic.title)}</text>')
    for f in pic.frames:
        out.append(f'<g id="{_id("g", f.name)}"><rect x="{f.x:.1f}" y="{f.y:.1f}" '
                   f'width="{f.w:.1f}" height="{f.h:.1f}" rx="6" fill="#fafafa" '
                   'stroke="#8a8a8a" stroke-dasharray="6,3"/>'
                   f'<text x="{f.x + 8:.1f}" y="{f.y + 15:.1f}" fill="#555555">'
                   f'{escape(f.title)}</text></g>')
    for a in pic.arrows:
        kind = "peak" if a.at_peak else a.kind
        color = "#c0392b" if a.at_peak else _STROKES.get(a.kind, "#555555")
        width = 2.6 if a.at_peak else 1.3
        dash = _DASH.get(a.kind, "")
        segments = curves(a.path())
        path = f"M{segments[0][0]:.1f},{segments[0][1]:.1f}" + "".join(
            f" C{ax:.1f},{ay:.1f} {bx:.1f},{by:.1f} {x1:.1f},{y1:.1f}"
            for _x0, _y0, ax, ay, bx, by, x1, y1 in segments)
        lx, ly = a.label_at
        out.append(f'<g class="array {a.kind}"><title>{escape(a.label)} ({a.kind}'
                   f'{", live at the peak" if a.at_peak else ""})</title>'
                   f'<path d="{path}" fill="none" stroke="{color}" stroke-width="{width}"'
                   + (f' stroke-dasharray="{dash}"' if dash else "")
                   + f' marker-end="url(#arrow-{kind})"/>'
                   f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="10" '
                   f'fill="{color}">{escape(a.label)}</text></g>')
    for b in pic.boxes:
        fill = fills.get(b.id) or FILLS.get(b.kind, "#eeeeee")
        rx = 14 if b.kind in ("argument", "constant", "loop state", "result") else 4
        out.append(f'<g id="{_id("n", b.id)}" class="box">'
                   + (f"<title>{escape(b.tooltip)}</title>" if b.tooltip else "")
                   + f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" '
                   f'rx="{rx}" fill="{fill}" stroke="#555555"/>')
        for i, line in enumerate(b.lines):
            weight = ' font-weight="bold"' if i == 0 else ""
            out.append(f'<text x="{b.x + 6:.1f}" y="{b.y + 17 + 15 * i:.1f}"{weight}>'
                       f"{escape(line)}</text>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_picture(pic: Picture, path: str) -> str:
    """Write `pic` to `path`: ``.svg`` directly, ``.png`` through matplotlib."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".svg":
        return write_text(path, render_svg(pic))
    if ext != ".png":
        raise HloscopeError(f"cannot write a graph to {path!r}: unknown file type",
                            hint="name the file .svg or .png")
    from ._plot import _pyplot

    plt = _pyplot()
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path as MplPath

    dpi = 100
    fig = plt.figure(figsize=(max(pic.width, 50) / dpi, max(pic.height, 50) / dpi), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, pic.width)
    ax.set_ylim(pic.height, 0)
    ax.axis("off")
    try:
        ax.text(16, 22, pic.title, fontsize=10, fontweight="bold", family="monospace")
        for fr in pic.frames:
            ax.add_patch(FancyBboxPatch((fr.x, fr.y), fr.w, fr.h, boxstyle="round,pad=0",
                                        fc="#fafafa", ec="#8a8a8a", ls="--"))
            ax.text(fr.x + 8, fr.y + 14, fr.title, fontsize=8, color="#555555",
                    family="monospace")
        for a in pic.arrows:
            color = "#c0392b" if a.at_peak else _STROKES.get(a.kind, "#555555")
            segments = curves(a.path())
            verts = [segments[0][:2]] + [(c[i], c[i + 1]) for c in segments for i in (2, 4, 6)]
            codes = [MplPath.MOVETO] + [MplPath.CURVE4] * (3 * len(segments))
            ax.add_patch(FancyArrowPatch(path=MplPath(verts, codes), arrowstyle="-|>",
                                         mutation_scale=10, color=color,
                                         lw=2.4 if a.at_peak else 1.1))
            ax.text(a.label_at[0], a.label_at[1], a.label, fontsize=7, color=color,
                    family="monospace")
        for b in pic.boxes:
            ax.add_patch(FancyBboxPatch((b.x, b.y), b.w, b.h, boxstyle="round,pad=0",
                                        fc=FILLS.get(b.kind, "#eeeeee"), ec="#555555"))
            for i, line in enumerate(b.lines):
                ax.text(b.x + 6, b.y + 14 + 15 * i, line, fontsize=8, family="monospace",
                        fontweight="bold" if i == 0 else "normal")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", metadata={"Software": "hloscope"})
    finally:
        plt.close(fig)
    return path


class Drawing:
    """A drawn kernel graph: shows itself in a notebook cell (SVG) and saves to a file."""

    __slots__ = ("picture", "svg")

    def __init__(self, picture: Picture) -> None:
        self.picture = picture
        self.svg = render_svg(picture)

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path: str) -> str:
        """Write ``.svg`` or ``.png``; returns the path."""
        return write_picture(self.picture, path)


def draw(graph_or_module: KernelGraph | Module) -> Drawing:
    """The picture of `hloscope graph` for a kernel graph or a module (display it in a
    notebook, or `.save("graph.svg")`)."""
    from .._analysis._kernels import kernel_graph
    from ._graph_layout import layout_graph

    g = graph_or_module if isinstance(graph_or_module, KernelGraph) else kernel_graph(graph_or_module)
    return Drawing(layout_graph(g))
