"""Geometry of a kernel-graph picture: boxes, groups and arrows with coordinates.

Each group (a loop body or condition, a branch, a called computation) is
laid out on its own, inside out, and then stands as one box in its parent's
layout, the way a reader opens a graph one group at a time.  Within a
group, igraph's layered (Sugiyama) layout assigns layers and orders the
boxes in each layer to reduce crossings; hloscope then sizes the boxes for
their text and places them.  igraph is imported only here, when a picture
is drawn.  The result is plain data for the SVG and PNG writers; the same
module gives the same picture.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._analysis._kernels import Kernel, KernelGraph
from ._text import format_bytes

__all__ = ["Arrow", "Box", "Frame", "Picture", "layout_graph"]

CHAR_W = 7.4      # px per character of the 12 px monospace font (with some room)
LINE_H = 15.0
PAD = 6.0
H_GAP = 28.0
V_GAP = 46.0
FRAME_PAD = 14.0
FRAME_TITLE = 18.0


@dataclass(slots=True)
class Box:
    """A kernel, or where an array comes from (an argument, a constant, a loop's state),
    or the result."""

    id: str
    kind: str          # kernel category, or "argument", "constant", "loop state", "result"
    lines: list[str]
    tooltip: str
    group: str
    w: float = 0.0
    h: float = 0.0
    x: float = 0.0     # top-left, absolute
    y: float = 0.0


@dataclass(slots=True)
class Frame:
    """A group drawn as a frame around its boxes."""

    name: str
    title: str
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0


@dataclass(slots=True)
class Arrow:
    src: str
    dst: str
    label: str
    kind: str          # argument, temporary, output, constant
    at_peak: bool
    points: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


@dataclass(slots=True)
class Picture:
    title: str
    width: float
    height: float
    boxes: list[Box] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)


def _kernel_box(k: Kernel) -> Box:
    kind = k.category + (f" {k.fusion_kind}" if k.fusion_kind else "")
    lines = [k.name, kind]
    if k.target:
        lines.append(k.target)
    ops = [f"{op} x{n}" if n > 1 else op for op, n in k.fused]
    while ops:
        lines.append(", ".join(ops[:3]))
        ops = ops[3:]
        if len(lines) >= 6 and ops:
            lines.append(f"+{len(ops)} more")
            break
    lines.append(f"{k.shape.split('{')[0]}  {format_bytes(k.bytes_out)}")
    tip = "\n".join(x for x in (k.op_name, k.source or "") if x)
    return Box(f"k:{k.name}", k.category, lines, tip, k.group)


def _size(box: Box) -> None:
    box.w = max(len(s) for s in box.lines) * CHAR_W + 2 * PAD
    box.h = len(box.lines) * LINE_H + 2 * PAD - 3


def layout_graph(g: KernelGraph, *, small_constants: bool = False) -> Picture:
    """Lay out `g` (see the module docstring).  Scalar constants are left out unless
    `small_constants`."""
    boxes: dict[str, Box] = {}
    for k in g.kernels:
        boxes[f"k:{k.name}"] = _kernel_box(k)
    entry = _entry_group(g)
    arrows: list[Arrow] = []
    for e in g.edges:
        dst = "result" if e.dst == "result" else f"k:{e.dst}"
        if dst not in boxes and dst != "result":
            continue
        if e.src_kind == "kernel":
            src = f"k:{e.src}"
        else:
            if e.src_kind == "constant" and e.bytes <= 8 and not small_constants:
                continue
            group = boxes[dst].group if dst in boxes else entry
            if e.src_kind == "argument":
                group = entry
            src = f"{e.src_kind}:{group}:{e.src}"
            if src not in boxes:
                boxes[src] = Box(src, e.src_kind, [e.src, e.src_kind], e.value, group)
        if dst == "result" and "result" not in boxes:
            boxes["result"] = Box("result", "result", ["result"], "the module's result", entry)
        label = f"{e.shape.split('{')[0]}  {format_bytes(e.bytes)}"
        arrows.append(Arrow(src, dst, label, e.kind, e.live_at_peak))
    for b in boxes.values():
        _size(b)

    children: dict[str, list[str]] = {}
    titles: dict[str, str] = {}
    for grp in g.groups:
        children.setdefault(grp.parent, []).append(grp.name)
        titles[grp.name] = f"{grp.kind} {grp.name} (of {grp.caller})"
    members: dict[str, list[str]] = {}
    for b in boxes.values():
        members.setdefault(b.group, []).append(b.id)
    group_of = {b.id: b.group for b in boxes.values()}
    parent = {grp.name: grp.parent for grp in g.groups}

    def lift(node_group: str, level: str) -> str | None:
        """The child of `level` that contains `node_group` (or itself), else None."""
        cur = node_group
        seen = 0
        while cur != level:
            p = parent.get(cur)
            if p is None or seen > 64:
                return None
            if p == level:
                return f"g:{cur}"
            cur = p
            seen += 1
        return "self"

    frames: dict[str, Frame] = {}
    rel: dict[str, tuple[float, float]] = {}   # id -> offset inside its level

    levels = _post_order(entry, children)  # every group after the groups inside it
    level_size: dict[str, tuple[float, float]] = {}

    def place(level: str) -> tuple[float, float]:
        items = list(members.get(level, [])) + [f"g:{c}" for c in children.get(level, [])]
        sizes: dict[str, tuple[float, float]] = {}
        for it in items:
            if it.startswith("g:"):
                w, h = level_size[it[2:]]
                sizes[it] = (w + 2 * FRAME_PAD, h + 2 * FRAME_PAD + FRAME_TITLE)
            else:
                sizes[it] = (boxes[it].w, boxes[it].h)
        if not items:
            return 0.0, 0.0
        index = {it: i for i, it in enumerate(items)}
        links: set[tuple[int, int]] = set()
        for a in arrows:
            ends = []
            for node in (a.src, a.dst):
                grp = group_of.get(node, entry)
                top = lift(grp, level)
                ends.append(node if top == "self" else top)
            if None in ends or ends[0] == ends[1]:
                continue
            if ends[0] in index and ends[1] in index:
                links.add((index[ends[0]], index[ends[1]]))
        # What feeds a loop, branch or call comes before its frame; what it gives back after.
        for grp in g.groups:
            if grp.parent != level or f"g:{grp.name}" not in index:
                continue
            gi = index[f"g:{grp.name}"]
            for kind, name in grp.inputs:
                node = f"k:{name}" if kind == "kernel" else f"{kind}:{level}:{name}"
                if node in index:
                    links.add((index[node], gi))
            out = f"loop state:{level}:{grp.caller}"
            if out in index:
                links.add((gi, index[out]))
        layers, order = _layers(len(items), sorted(links))
        rows: dict[int, list[int]] = {}
        for i in range(len(items)):
            rows.setdefault(layers[i], []).append(i)
        width = 0.0
        for r in rows.values():
            r.sort(key=lambda i: (order[i], i))
            width = max(width, sum(sizes[items[i]][0] for i in r) + H_GAP * (len(r) - 1))
        y = 0.0
        for layer in sorted(rows):
            r = rows[layer]
            row_w = sum(sizes[items[i]][0] for i in r) + H_GAP * (len(r) - 1)
            row_h = max(sizes[items[i]][1] for i in r)
            x = (width - row_w) / 2
            for i in r:
                w, h = sizes[items[i]]
                rel[items[i]] = (x, y + (row_h - h) / 2)
                x += w + H_GAP
            y += row_h + V_GAP
        return width, y - V_GAP

    for level in levels:
        level_size[level] = place(level)
    width, height = level_size[entry]

    def absolute(top: str, x0: float, y0: float) -> None:
        stack = [(top, x0, y0)]
        while stack:
            level, ox, oy = stack.pop()
            for it in members.get(level, []):
                dx, dy = rel[it]
                boxes[it].x, boxes[it].y = ox + dx, oy + dy
            for c in children.get(level, []):
                dx, dy = rel.get(f"g:{c}", (0.0, 0.0))
                w, h = place_sizes[c]
                frames[c] = Frame(c, titles.get(c, c), ox + dx, oy + dy, w + 2 * FRAME_PAD,
                                  h + 2 * FRAME_PAD + FRAME_TITLE)
                stack.append((c, ox + dx + FRAME_PAD, oy + dy + FRAME_PAD + FRAME_TITLE))

    # Sizes of each group's own layout, for the frames (computed once more, cheaply).
    place_sizes: dict[str, tuple[float, float]] = {}

    def sizes_of(level: str) -> None:
        xs = [rel[it] for it in members.get(level, [])] + [rel[f"g:{c}"] for c in children.get(level, [])]
        if not xs:
            place_sizes[level] = (0.0, 0.0)
            return
        w = h = 0.0
        for it in members.get(level, []):
            dx, dy = rel[it]
            w, h = max(w, dx + boxes[it].w), max(h, dy + boxes[it].h)
        for c in children.get(level, []):
            dx, dy = rel[f"g:{c}"]
            cw, ch = place_sizes[c]
            w = max(w, dx + cw + 2 * FRAME_PAD)
            h = max(h, dy + ch + 2 * FRAME_PAD + FRAME_TITLE)
        place_sizes[level] = (w, h)

    for level in levels:
        sizes_of(level)
    margin = 16.0
    absolute(entry, margin, margin + 24.0)
    for a in arrows:
        s, d = boxes[a.src], boxes[a.dst]
        a.points = (s.x + s.w / 2, s.y + s.h, d.x + d.w / 2, d.y)
    # Arrays into a loop, branch or call go to its frame; what a loop gives back leaves it.
    drawn: set[tuple[str, str]] = set()
    for grp in g.groups:
        fr = frames.get(grp.name)
        if fr is None or (grp.caller, grp.parent) in drawn:
            continue
        same_caller = [frames[x.name] for x in g.groups
                       if x.caller == grp.caller and x.name in frames]
        left = min(f.x for f in same_caller)
        right = max(f.x + f.w for f in same_caller)
        top = min(f.y for f in same_caller)
        bottom = max(f.y + f.h for f in same_caller)
        drawn.add((grp.caller, grp.parent))
        for kind, name in grp.inputs:
            node = f"k:{name}" if kind == "kernel" else f"{kind}:{grp.parent}:{name}"
            b = boxes.get(node)
            if b is None:
                continue
            label = b.lines[-1] if kind == "kernel" else name
            arrows.append(Arrow(node, f"g:{grp.name}", label,
                                "argument" if kind == "argument" else "temporary", False,
                                (b.x + b.w / 2, b.y + b.h, (left + right) / 2, top)))
        out = boxes.get(f"loop state:{grp.parent}:{grp.caller}")
        if out is not None:
            arrows.append(Arrow(f"g:{grp.name}", out.id, "", "output", False,
                                ((left + right) / 2, bottom, out.x + out.w / 2, out.y)))
    n = len(g.kernels)
    pic = Picture(f"{g.module}: {n} kernel{'' if n == 1 else 's'}", width + 2 * margin,
                  height + 2 * margin + 24.0, sorted(boxes.values(), key=lambda b: b.id),
                  [frames[k] for k in sorted(frames)], arrows)
    return pic


def _entry_group(g: KernelGraph) -> str:
    """The computation at the top of the group tree (the module's entry)."""
    names = {x.name for x in g.groups}
    for grp in g.groups:
        if grp.parent not in names:
            return grp.parent
    return next((k.group for k in g.kernels if k.group not in names), "")


def _post_order(top: str, children: dict[str, list[str]]) -> list[str]:
    """`top` and the groups below it, each after its children (no recursion: calls may
    nest thousands deep)."""
    out: list[str] = []
    stack = [(top, False)]
    seen = {top}
    while stack:
        level, expanded = stack.pop()
        if expanded:
            out.append(level)
            continue
        stack.append((level, True))
        for c in reversed(children.get(level, [])):
            if c not in seen:
                seen.add(c)
                stack.append((c, False))
    return out


def _layers(n: int, links: list[tuple[int, int]]) -> tuple[list[int], list[float]]:
    """Layer and in-layer order of `n` nodes joined by `links` (igraph's Sugiyama layout)."""
    if n == 1:
        return [0], [0.0]
    import igraph

    graph = igraph.Graph(n=n, edges=links, directed=True)
    coords = graph.layout_sugiyama()
    layers = [round(coords[i][1]) for i in range(n)]
    order = [float(coords[i][0]) for i in range(n)]
    return layers, order
