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

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .._analysis._kernels import Kernel, KernelGraph
from ._text import format_bytes

__all__ = ["Arrow", "Box", "Frame", "Picture", "curves", "layout_graph"]

CHAR_W = 7.4      # px per character of the 12 px monospace font (with some room)
LINE_H = 15.0
PAD = 6.0
H_GAP = 28.0
V_GAP = 46.0
FRAME_PAD = 14.0
FRAME_TITLE = 18.0
LANE_W = 14.0     # room a long arrow takes in a layer it passes through
LABEL_CHAR_W = 6.1  # px per character of an arrow's 10 px label
LABEL_H = 12.0


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
    # Where the arrow bends on its way (through layers between its ends, in lanes kept
    # free of boxes), from its start to its end.
    via: tuple[tuple[float, float], ...] = ()
    label_at: tuple[float, float] = (0.0, 0.0)   # the label's baseline, left

    def path(self) -> list[tuple[float, float]]:
        x1, y1, x2, y2 = self.points
        return [(x1, y1), *self.via, (x2, y2)]


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
    lines.append(f"{_plain(k.shape)}  {format_bytes(k.bytes_out)}")
    tip = "\n".join(x for x in (k.op_name, k.source or "") if x)
    return Box(f"k:{k.name}", k.category, lines, tip, k.group)


_LAYOUT = re.compile(r"\{[^{}]*\}")


def _plain(shape: str) -> str:
    """A shape without its layouts, tuples whole (``((c64[8,2]), c64[8,2])``; the text before
    the first layout cut a tuple in two: ``((c64[8,2]``)."""
    return _LAYOUT.sub("", shape)


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
        label = f"{_plain(e.shape)}  {format_bytes(e.bytes)}"
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

    for name in titles:
        if not members.get(name) and not children.get(name):
            titles[name] += ": no kernels"

    def outer(name: str) -> tuple[float, float]:
        """The size of the frame of group `name`, around its own layout and its title."""
        w, h = level_size[name]
        return (max(w + 2 * FRAME_PAD, len(titles.get(name, name)) * CHAR_W + 16),
                h + 2 * FRAME_PAD + FRAME_TITLE)

    frames: dict[str, Frame] = {}
    rel: dict[str, tuple[float, float]] = {}   # id -> offset inside its level
    # The lanes an arrow between two items of a level takes through the layers between
    # them (offsets inside the level), by level and (from, to) item; and which level and
    # items each arrow joins.
    lanes: dict[str, dict[tuple[int, int], list[tuple[float, float]]]] = {}
    joins: dict[int, tuple[str, tuple[int, int]]] = {}

    levels = _post_order(entry, children)  # every group after the groups inside it
    level_size: dict[str, tuple[float, float]] = {}

    def place(level: str) -> tuple[float, float]:
        items = list(members.get(level, [])) + [f"g:{c}" for c in children.get(level, [])]
        sizes: dict[str, tuple[float, float]] = {}
        for it in items:
            sizes[it] = outer(it[2:]) if it.startswith("g:") else (boxes[it].w, boxes[it].h)
        if not items:
            return 0.0, 0.0
        index = {it: i for i, it in enumerate(items)}
        links: set[tuple[int, int]] = set()
        for n, a in enumerate(arrows):
            ends = []
            for node in (a.src, a.dst):
                grp = group_of.get(node, entry)
                top = lift(grp, level)
                ends.append(node if top == "self" else top)
            if None in ends or ends[0] == ends[1]:
                continue
            if ends[0] in index and ends[1] in index:
                link = (index[ends[0]], index[ends[1]])
                links.add(link)
                joins[n] = (level, link)
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
        ordered = sorted(links)
        layers, order, routes = _layers(len(items), ordered)
        # Each layer's row: its items, and a lane for each long arrow passing through it,
        # in the order the layout found (fewest crossings).
        rows: dict[int, list[tuple[float, int, int, int]]] = {}
        for i in range(len(items)):
            rows.setdefault(layers[i], []).append((order[i], 0, i, 0))
        for e, route in enumerate(routes):
            for k, (x, layer) in enumerate(route):
                rows.setdefault(round(layer), []).append((x, 1, e, k))

        def size(entry_: tuple[float, int, int, int]) -> tuple[float, float]:
            return sizes[items[entry_[2]]] if entry_[1] == 0 else (LANE_W, 0.0)

        width = 0.0
        for r in rows.values():
            r.sort()
            width = max(width, sum(size(t)[0] for t in r) + H_GAP * (len(r) - 1))
        mine = lanes[level] = {}
        y = 0.0
        for layer in sorted(rows):
            r = rows[layer]
            row_w = sum(size(t)[0] for t in r) + H_GAP * (len(r) - 1)
            row_h = max(size(t)[1] for t in r)
            x = (width - row_w) / 2
            for t in r:
                w, h = size(t)
                if t[1] == 0:
                    rel[items[t[2]]] = (x, y + (row_h - h) / 2)
                else:  # down the lane, past the row's tallest box
                    points = mine.setdefault(ordered[t[2]], [])
                    points.append((x + w / 2, y))
                    if row_h > 0:
                        points.append((x + w / 2, y + row_h))
                x += w + H_GAP
            y += row_h + V_GAP
        return width, y - V_GAP

    for level in levels:
        level_size[level] = place(level)
    width, height = level_size[entry]
    origin: dict[str, tuple[float, float]] = {}

    def absolute(top: str, x0: float, y0: float) -> None:
        stack = [(top, x0, y0)]
        while stack:
            level, ox, oy = stack.pop()
            origin[level] = (ox, oy)
            for it in members.get(level, []):
                dx, dy = rel[it]
                boxes[it].x, boxes[it].y = ox + dx, oy + dy
            for c in children.get(level, []):
                dx, dy = rel.get(f"g:{c}", (0.0, 0.0))
                w, h = outer(c)
                frames[c] = Frame(c, titles.get(c, c), ox + dx, oy + dy, w, h)
                stack.append((c, ox + dx + FRAME_PAD, oy + dy + FRAME_PAD + FRAME_TITLE))

    margin = 16.0
    absolute(entry, margin, margin + 24.0)
    for n, a in enumerate(arrows):
        s, d = boxes[a.src], boxes[a.dst]
        a.points = (s.x + s.w / 2, s.y + s.h, d.x + d.w / 2, d.y)
        if n in joins:
            level, link = joins[n]
            ox, oy = origin[level]
            via = [(ox + x, oy + y) for x, y in lanes[level].get(link, ())]
            a.via = tuple(sorted(via, key=lambda p: p[1], reverse=a.points[3] < a.points[1]))
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
    _place_labels(arrows, boxes.values(), frames.values())
    n = len(g.kernels)
    title = f"{g.module}: {n} kernel{'' if n == 1 else 's'}"
    # The canvas holds every label whole (a label beside a narrow graph's arrow ran past
    # its right edge) and the title.
    right = max([width + 2 * margin, 16 + len(title) * 8.6 + margin]
                + [a.label_at[0] + len(a.label) * LABEL_CHAR_W + margin for a in arrows])
    pic = Picture(title, right,
                  height + 2 * margin + 24.0, sorted(boxes.values(), key=lambda b: b.id),
                  [frames[k] for k in sorted(frames)], arrows)
    return pic


def curves(path: list[tuple[float, float]]) -> list[tuple[float, ...]]:
    """The cubic Bezier segments an arrow through `path` is drawn with: (x0, y0, c1x, c1y,
    c2x, c2y, x1, y1) each, leaving and reaching each point vertically."""
    out: list[tuple[float, ...]] = []
    for (x1, y1), (x2, y2) in zip(path, path[1:]):
        dy = max(20.0, abs(y2 - y1) / 2)
        out.append((x1, y1, x1, y1 + dy, x2, y2 - dy, x2, y2))
    return out


def _along(path: list[tuple[float, float]], fraction: float) -> tuple[float, float]:
    """The point `fraction` of the way along the drawn arrow through `path`."""
    pts = [path[0]]
    for x0, y0, ax, ay, bx, by, x1, y1 in curves(path):
        for i in range(1, 17):
            t = i / 16
            u = 1 - t
            pts.append((u**3 * x0 + 3 * u * u * t * ax + 3 * u * t * t * bx + t**3 * x1,
                        u**3 * y0 + 3 * u * u * t * ay + 3 * u * t * t * by + t**3 * y1))
    if len(pts) < 2:
        return path[0]
    steps = [((b[0] - a[0]) ** 2 + (b[1] - a[1]) ** 2) ** 0.5 for a, b in zip(pts, pts[1:])]
    goal = sum(steps) * fraction
    for (a, b), d in zip(zip(pts, pts[1:]), steps):
        if goal <= d and d > 0:
            t = goal / d
            return a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t
        goal -= d
    return pts[-1]


# Where along its arrow a label may go, in the order tried (right of the arrow, then left).
_ALONG = (0.5, 0.35, 0.65, 0.2, 0.8, 0.1, 0.9, 0.45, 0.55, 0.28, 0.72)


def _place_labels(arrows: list[Arrow], boxes: Iterable[Box], frames: Iterable[Frame]) -> None:
    """Put each arrow's label where it covers the fewest boxes, frame titles and labels
    already placed: half-way along the arrow, else a little before or after, on its right,
    else on its left."""
    taken: list[tuple[float, float, float, float]] = [(b.x, b.y, b.w, b.h) for b in boxes]
    taken += [(f.x, f.y, len(f.title) * CHAR_W + 16, FRAME_TITLE) for f in frames]

    def covered(r: tuple[float, float, float, float]) -> float:
        x, y, w, h = r
        total = 0.0
        for tx, ty, tw, th in taken:
            dx = min(x + w, tx + tw) - max(x, tx)
            dy = min(y + h, ty + th) - max(y, ty)
            if dx > 0 and dy > 0:
                total += dx * dy
        return total

    for a in arrows:
        path = a.path()
        if not a.label:
            a.label_at = _along(path, 0.5)
            continue
        w = len(a.label) * LABEL_CHAR_W
        best: tuple[float, int, tuple[float, float]] | None = None
        for rank, (f, side) in enumerate((f, side) for side in (1, -1) for f in _ALONG):
            px, py = _along(path, f)
            at = (px + 4, py) if side > 0 else (max(px - 4 - w, 0.0), py)
            cost = covered((at[0], at[1] - LABEL_H + 2, w, LABEL_H))
            if best is None or cost < best[0]:
                best = (cost, rank, at)
            if cost == 0:
                break
        assert best is not None
        a.label_at = best[2]
        taken.append((best[2][0], best[2][1] - LABEL_H + 2, w, LABEL_H))


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


def _layers(n: int, links: list[tuple[int, int]]
            ) -> tuple[list[int], list[float], list[list[tuple[float, float]]]]:
    """Layer and in-layer order of `n` nodes joined by `links` (igraph's Sugiyama layout),
    and for each link the (order, layer) of the points it passes through in the layers
    between its ends (none where igraph does not give them)."""
    if n == 1:
        return [0], [0.0], [[] for _ in links]
    import igraph

    graph = igraph.Graph(n=n, edges=links, directed=True)
    coords = graph.layout_sugiyama()
    layers = [round(coords[i][1]) for i in range(n)]
    order = [float(coords[i][0]) for i in range(n)]
    routing = getattr(coords, "edge_routing", None) or [[] for _ in links]
    routes = [[(float(p[0]), float(p[1])) for p in r] for r in routing]
    return layers, order, routes
