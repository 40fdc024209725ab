"""The data of the HTML report: plain JSON-ready dicts built from the analyses.

The kernel graph is organised as a tree of groups so that the page only
ever lays out what is open: the computations run by loops, branches and
calls; inside each, the name scopes of op_name (``jit(f)/layer_3/...``);
and, where a group holds too many items to read, consecutive chunks of its
kernels in schedule order.  Every group starts collapsed except the top.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from .._analysis._advisor import Advice
from .._analysis._check import shard_shape
from .._analysis._devices import Device, module_device
from .._analysis._figures import dump_figures, optimized_note
from .._analysis._kernels import Group, KernelGraph
from .._analysis._memory import MemoryReport, ValueSpans, XlaFigures
from .._analysis._summary import ModuleSummary
from .._analysis._walk import paused_gc
from .._hlo._module import Module

__all__ = ["CHUNK", "dump_report_data", "report_data"]

CHUNK = 40          # at most this many items shown in one group before chunking
TIMELINE_POINTS = 1500
# Caps that keep the page small enough for a browser on any module (the page says what
# was cut; `hloscope kernels --json` and `hloscope memory --json` list everything).
MAX_KERNELS = 20_000      # kernels drawn in the graph, the first in schedule order
MAX_HLO_CHARS = 6_000     # HLO text of one kernel
MAX_HLO_TOTAL = 4 << 20   # HLO text of all kernels together
MAX_VALUES = 2_000        # the largest values, for "what is live" under the timeline
MAX_PEAK_VALUES = 500     # values listed as live at the peak
MAX_COLLECTIVES = 2_000
MAX_SCOPES = 6            # op_name scopes stacked apart in the memory timeline (the rest: other)
KINDS = ("parameter", "output", "temporary", "constant")  # XLA's allocation kinds


def _hlo_text(module: Module, name: str, computation: str, limit: int = MAX_HLO_CHARS) -> str:
    inst = module.computation(computation).by_name.get(name)
    if inst is None:
        return ""
    parts = [inst.to_text()]
    size = len(parts[0])
    if inst.opcode == "fusion":
        for called in inst.called_computation_names:
            if size > limit:
                break
            parts.append(module.computation(called).to_text())
            size += len(parts[-1])
    text = "\n\n".join(parts)
    return text if len(text) <= limit else text[:limit] + "\n... (cut; see the module file)"


def _scope(op_name: str) -> list[str]:
    parts = [p for p in op_name.split("/") if p]
    return parts[:-1]


class _Groups:
    """The group tree of the page: computations, op_name scopes and chunks (see the module
    docstring).  Every walk over it is iterative: calls may nest thousands deep."""

    def __init__(self) -> None:
        self.groups: list[dict[str, Any]] = []

    def new(self, title: str, kind: str, parent: int) -> int:
        self.groups.append({"title": title, "kind": kind, "parent": parent, "groups": [],
                            "kernels": [], "size": 0})
        gid = len(self.groups) - 1
        if parent >= 0:
            self.groups[parent]["groups"].append(gid)
        return gid

    def post_order(self, top: int) -> list[int]:
        """Group ids below `top` (itself included), children before their parent."""
        out: list[int] = []
        stack = [(top, False)]
        while stack:
            gid, expanded = stack.pop()
            if expanded:
                out.append(gid)
                continue
            stack.append((gid, True))
            stack.extend((c, False) for c in reversed(self.groups[gid]["groups"]))
        return out

    def fold(self, top: int) -> None:
        """Fold scopes with a single child scope and no kernels into that child."""
        groups = self.groups
        for gid in self.post_order(top):
            g = groups[gid]
            while (g["kind"] == "scope" and not g["kernels"] and len(g["groups"]) == 1
                   and groups[g["groups"][0]]["kind"] == "scope"):
                child = groups[g["groups"][0]]
                g["title"] = g["title"] + "/" + child["title"]
                g["groups"], g["kernels"] = child["groups"], child["kernels"]
                child["groups"], child["kernels"] = [], []
                for c in g["groups"]:
                    groups[c]["parent"] = gid

    def chunk(self, top: int) -> None:
        """Cut groups holding more than CHUNK items into chunks, and big chunks again."""
        stack = [self._chunk_steps(top)]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
            else:
                stack.append(self._chunk_steps(nxt))

    def _chunk_steps(self, gid: int) -> Iterator[int]:
        """Chunk one group, yielding each group to chunk in its turn (its children first,
        then each new chunk as it is made): a recursion on an explicit stack."""
        groups = self.groups
        g = groups[gid]
        yield from list(g["groups"])
        while len(g["kernels"]) + len(g["groups"]) > CHUNK:
            ks = g["kernels"]
            if len(ks) <= 1:
                break
            size = max(2, -(-len(ks) // CHUNK)) if len(ks) > CHUNK * CHUNK else CHUNK
            pieces = [ks[j:j + size] for j in range(0, len(ks), size)]
            g["kernels"] = []
            for piece in pieces:
                c = self.new(f"kernels {piece[0] + 1}-{piece[-1] + 1}", "chunk", gid)
                groups[c]["kernels"] = piece
                yield c  # a big piece is cut again, so no open group shows too much
            if len(g["groups"]) > CHUNK:
                # Too many child groups: gather them, in order, under chunk groups.
                kids = g["groups"]
                g["groups"] = []
                step = -(-len(kids) // CHUNK)
                for j in range(0, len(kids), step):
                    c = self.new(f"groups {j + 1}-{min(j + step, len(kids))}", "chunk", gid)
                    groups[c]["groups"] = kids[j:j + step]
                    for kid in kids[j:j + step]:
                        groups[kid]["parent"] = c
                break

    def count(self, top: int) -> None:
        """Each group's size: the kernels in it and below it."""
        groups = self.groups
        for gid in self.post_order(top):
            g = groups[gid]
            g["size"] = len(g["kernels"]) + sum(groups[c]["size"] for c in g["groups"])


def _computation_groups(tree: _Groups, graph: KernelGraph, top: int, entry: str,
                        index: dict[str, int]) -> dict[str, int]:
    """A group per computation run by a loop, branch or call, under its caller's group
    (each group's children in the order `graph.groups` lists them)."""
    comp_group: dict[str, int] = {entry: top}
    children: dict[str, list[Group]] = {}
    for grp in graph.groups:
        children.setdefault(grp.parent, []).append(grp)
    stack = [entry]
    while stack:
        parent = stack.pop()
        for grp in children.get(parent, ()):
            if grp.name in comp_group:
                continue
            gid = tree.new(f"{grp.kind} {grp.name} (of {grp.caller})", "computation",
                           comp_group[parent])
            comp_group[grp.name] = gid
            tree.groups[gid]["inputs"] = [index[name] for kind, name in grp.inputs
                                          if kind == "kernel" and name in index]
            stack.append(grp.name)
    return comp_group


def report_data(module: Module, summary: ModuleSummary, graph: KernelGraph, memory: MemoryReport,
                advice: Advice, device: Device | None = None,
                times: MeasuredTimes | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain data (see the module docstring).  `device`: the
    chip whose peak rates give each kernel's estimated time (a roofline: the larger of its
    flops over the peak rate and its bytes over the bandwidth); where None, the device the
    module was compiled for (`module_device`: the nominal CPU for a CPU module).
    `times`: a profile's measured times (each kernel's ``measured``, and ``profile``),
    which the page ranks by where it has them."""
    with paused_gc():
        data = _report_data(module, summary, graph, memory, advice,
                            device or module_device(module))
        if times is not None:
            add_measured(data, times)
        return data


def add_measured(data: dict[str, Any], times: MeasuredTimes) -> None:
    """Each kernel's measured time per run (None where it did not run) and the profile's
    figures, into the page's data."""
    by_name = times.by_name()
    for k in data["kernels"]:
        kt = by_name.get(k["name"])
        k["measured"] = None if kt is None else float(f"{kt.median:.4g}")
    g = times.gaps
    data["profile"] = {"source": times.source, "runs": times.runs, "devices": times.devices,
                       "platform": times.platform, "step": g.step,
                       "matched_share": times.matched_share, "gaps": g.to_dict()}
    # what a kept profile said of its runs when it was taken, as the text says it
    known = data.setdefault("notes", [])
    known.extend(n for n in (f"The profile: {x}" for x in times.notes) if n not in known)


def _report_data(module: Module, summary: ModuleSummary, graph: KernelGraph,
                 memory: MemoryReport, advice: Advice, dev: Device) -> dict[str, Any]:
    notes: list[str] = []
    shown = graph.kernels[:MAX_KERNELS]
    if len(graph.kernels) > MAX_KERNELS:
        notes.append(f"The kernel graph shows the first {MAX_KERNELS:,} of "
                     f"{len(graph.kernels):,} kernels, in schedule order; "
                     "hloscope kernels --json lists them all.")
    kernels = []
    index = {}
    hlo_budget = MAX_HLO_TOTAL
    for i, k in enumerate(shown):
        index[k.name] = i
        hlo = _hlo_text(module, k.name, k.group) if hlo_budget > 0 else ""
        hlo_budget -= len(hlo)
        kernels.append({
            "name": k.name, "category": k.category, "fusion_kind": k.fusion_kind,
            "target": k.target, "fused": ", ".join(f"{op} x{n}" if n > 1 else op
                                                   for op, n in k.fused),
            "shape": k.shape, "bytes": k.bytes_out, "flops": k.flops,
            "bytes_accessed": k.bytes_accessed,
            "bytes_in": max(0, k.bytes_accessed - k.bytes_out),
            "time": float(f"{k.roofline_seconds(dev, k.element_type):.3g}"),
            "op_name": k.op_name, "source": k.source or "",
            "computation": k.group, "hlo": hlo,
        })
    if hlo_budget <= 0:
        without = sum(1 for k in kernels if not k["hlo"])
        notes.append(f"The HLO text is shown for the first kernels only ({MAX_HLO_TOTAL >> 20} "
                     f"MiB of it); {without:,} kernels show none: see the module file.")
    edges = []
    for e in graph.edges:
        if e.src_kind == "kernel" and e.src in index and e.dst in index:
            edges.append([index[e.src], index[e.dst], e.shape, e.bytes, e.kind,
                          1 if e.live_at_peak else 0])

    # The group tree.
    tree = _Groups()
    top = tree.new(f"module {module.name}", "module", -1)
    comp_group = _computation_groups(tree, graph, top, module.entry.name, index)
    scope_group: dict[tuple[int, tuple[str, ...]], int] = {}
    for i, k in enumerate(shown):
        base = comp_group.get(k.group, top)
        path = _scope(k.op_name)
        gid = base
        for depth in range(1, len(path) + 1):
            key = (base, tuple(path[:depth]))
            if key not in scope_group:
                scope_group[key] = tree.new(path[depth - 1], "scope", gid)
            gid = scope_group[key]
        tree.groups[gid]["kernels"].append(i)
    tree.fold(top)
    tree.chunk(top)
    groups = tree.groups
    for k in kernels:
        k["group"] = -1
    for gid, g in enumerate(groups):
        for k_index in g["kernels"]:
            kernels[k_index]["group"] = gid
    tree.count(top)

    live_values = [[b.label, b.start, b.end, b.bytes, b.instruction, b.kind, b.source or "",
                    b.shape, b.op_name] for b in memory.largest[:MAX_VALUES]]
    if len(memory.largest) > MAX_VALUES:
        notes.append(f"Hovering the timeline lists what is live among the {MAX_VALUES:,} largest "
                     f"of {len(memory.largest):,} values.")
    peak_values = memory.peak_values[:MAX_PEAK_VALUES]
    if len(memory.peak_values) > MAX_PEAK_VALUES:
        notes.append(f"{len(memory.peak_values):,} values are live at the peak; the page keeps "
                     f"the {MAX_PEAK_VALUES:,} largest.")
    collectives = graph.collectives[:MAX_COLLECTIVES]
    if len(graph.collectives) > MAX_COLLECTIVES:
        notes.append(f"The first {MAX_COLLECTIVES:,} of {len(graph.collectives):,} collectives "
                     "are listed.")
    if not summary.optimized:
        notes.insert(0, optimized_note(False))
    sampled = _sampled_steps(memory)
    return {
        "schema": "hloscope.report/1",
        "module": module.name, "file": module.filename, "optimized": summary.optimized,
        "summary": {
            "partitioned": summary.partitioned, "num_partitions": summary.num_partitions,
            "instructions": summary.instructions, "computations": summary.computations,
            "kernels": len(graph.kernels), "temporaries": len(graph.temporaries),
            "temporary_bytes": graph.temporary_bytes,
            "flops": sum(k.flops for k in graph.kernels),
            "collectives": [[c.name, c.opcode, c.shape, c.sent_per_device, c.source or "",
                             c.replica_groups or "", c.group_size, c.received_per_device,
                             c.op_name, c.group] for c in collectives],
            "arguments": summary.argument_bytes, "outputs": summary.output_bytes,
        },
        "memory": {
            "peak": memory.peak_bytes, "peak_step": memory.peak_step,
            "peak_instruction": memory.peak_instruction, "steps": memory.steps,
            "temp": memory.temp_estimate_bytes,
            "figures": memory.figures.to_dict(),
            "peak_values": [[b.label, b.shape, b.bytes, b.kind, b.instruction, b.op_name,
                             b.source or ("" if b.where.startswith("(") else b.where)]
                            for b in peak_values],
            "peak_count": len(memory.peak_values),  # all of them (the page keeps the largest)
            "timeline": _timeline(memory, sampled), "values": live_values,
            "stacks": _stacks(memory, sampled),
        },
        "roofline": {"device": dev.name, "source": dev.source},
        "xla": _xla(memory.xla),
        "findings": [{"rule": g.rule, "kind": g.kind, "title": g.title, "count": g.count,
                      "message": g.first.message, "suggestion": g.first.suggestion,
                      "saving": (f"{g.check.amount(g.check.saved)} of {g.check.figure}"
                                 if g.check is not None and g.check.status == "checked"
                                 else g.saving.describe(advice.device))
                                + f" ({g.share_text})",
                      "check": g.check_line(advice.device),
                      "places": [[o, s or "", n] for o, s, n in g.places[:5]],
                      "evidence": [e.name for e in g.first.evidence]} for g in advice.groups],
        "kernels": kernels, "edges": edges, "groups": groups, "top": top,
        "shardings": _shardings(module),
        "notes": notes,
    }


def _shardings(module: Module) -> dict[str, Any]:
    """The entry's parameters and result with their shardings and per-device shapes
    (``[name, shape, sharding, per-device shape]``), and the mesh where one is named."""
    entry = module.entry
    mesh = ""

    def rows(inst: Any, name: str) -> list[list[str]]:
        nonlocal mesh
        sh = inst.sharding
        if sh is None:
            return []
        shape = inst.shape
        if shape.is_tuple:
            leaves = shape.leaves()
            elems = sh.elements if sh.kind == "tuple" else (sh,) * len(leaves)
            pairs = [(f"{name}{{{','.join(map(str, idx))}}}", leaf, e)
                     for (idx, leaf), e in zip(leaves, elems)]
        else:
            pairs = [(name, shape, sh)]
        out = []
        for label, leaf, e in pairs:
            if e.mesh_axes and not mesh:
                mesh = ", ".join(f"{a}={n}" for a, n in e.mesh_axes)
            try:
                dev = str(shard_shape(inst.name, e, leaf))
            except Exception:  # a sharding hloscope cannot apply: shown as written
                dev = ""
            out.append([label, str(leaf), e.text, dev])
        return out

    inputs = [r for p in entry.parameters for r in rows(p, p.name)]
    outputs = rows(entry.root, "result")
    return {"mesh": mesh, "inputs": inputs, "outputs": outputs}


def _sampled_steps(memory: MemoryReport) -> list[tuple[int, int, int]]:
    """The timeline's buckets (at most TIMELINE_POINTS): (first step, last step, the step
    of the bucket's most bytes, the earliest of equals)."""
    tl = memory.timeline
    n = len(tl)
    m = min(n, TIMELINE_POINTS)
    at = tl.__getitem__
    out = []
    for b in range(m):
        lo, hi = b * n // m, max(b * n // m + 1, (b + 1) * n // m)
        out.append((lo, hi - 1, max(range(lo, hi), key=at)))
    return out


def _timeline(memory: MemoryReport, sampled: list[tuple[int, int, int]]) -> list[list[Any]]:
    """The memory timeline squeezed to the buckets `sampled` (the max of each):
    [first step, last step, bytes, the instruction at the bucket's highest step]."""
    tl = memory.timeline
    labels = memory.timeline_labels
    return [[lo, last, tl[j], labels[j] if j < len(labels) else ""] for lo, last, j in sampled]


def _stacks(memory: MemoryReport, sampled: list[tuple[int, int, int]]) -> dict[str, Any]:
    """The timeline's buckets split by kind and by op_name scope: for each way, the series'
    names and, per bucket of `_timeline`, the bytes of each series at the bucket's highest
    step (so a bucket's bands add up to its point on the timeline; what no listed value
    explains is the series "other")."""
    tl = memory.timeline
    n = len(tl)
    m = len(sampled)
    steps = [j for _lo, _last, j in sampled]
    at_peak: dict[str, int] = {}
    for v in memory.peak_values:
        at_peak[_top_scope(v.op_name)] = at_peak.get(_top_scope(v.op_name), 0) + v.bytes
    scopes = [s for s, _ in sorted(at_peak.items(), key=lambda kv: (-kv[1], kv[0]))
              if s][:MAX_SCOPES]
    spans = memory.spans if n else None
    ways = (("kind", list(KINDS)), ("scope", scopes))
    # Per series, the differences between consecutive sampled steps (a value counts at
    # the steps of `steps` within its live range), summed up after; with no names, "other"
    # is what remains below.
    diffs = [[[0] * (m + 1) for _ in range(len(names) + 1)] for _way, names in ways]
    if spans is not None:
        _add_spans(spans, steps, n, diffs, [names for _way, names in ways])
    out: dict[str, Any] = {}
    for (way, names), diff in zip(ways, diffs):
        other = len(names)
        series = [list(accumulate(row[:m])) for row in diff]
        # What the listed values leave out of the timeline (values not listed, aliasing).
        series[other] = [max(0, tl[t] - sum(s[j] for s in series[:other]))
                         for j, t in enumerate(steps)]
        out[way] = {"names": names + ["other"],
                    "series": [s if any(s) else [] for s in series]}
    return out


def _add_spans(spans: ValueSpans, steps: list[int], n: int, diffs: list[list[list[int]]],
               ways: list[list[str]]) -> None:
    """Each value of `spans` into `diffs` (per way of `ways`: by kind, by scope): its bytes
    added at the first sampled step of `steps` within its live range and taken off after
    the last, in its series' row (the last row: "other").  One pass over the values; which
    sampled steps a range covers read off a table by step rather than searched for."""
    # below[t]: how many sampled steps come before step t (t from 0 to n).
    below: list[int] = []
    for i, step in enumerate(steps):
        below.extend([i] * (step + 1 - len(below)))
    below.extend([len(steps)] * (n + 1 - len(below)))
    (kinds, scopes), (kind_diff, scope_diff) = ways, diffs
    kind_col = {name: i for i, name in enumerate(kinds)}
    scope_col = {name: i for i, name in enumerate(scopes)}
    kind_other, scope_other = len(kinds), len(scopes)
    op_names = spans.op_names() if scopes else None
    for kind, start, end, size in spans:
        op_name = next(op_names) if op_names is not None else ""
        lo = below[min(max(0, start), n)]
        hi = below[max(0, min(n - 1, end) + 1)]
        if lo < hi:
            row = kind_diff[kind_col.get(kind, kind_other)]
            row[lo] += size
            row[hi] -= size
            if op_names is not None:
                row = scope_diff[scope_col.get(_top_scope(op_name), scope_other)]
                row[lo] += size
                row[hi] -= size


def _top_scope(op_name: str) -> str:
    """The first scope under the function's name: ``jvp()`` of ``jit(step)/jvp()/dot``."""
    path = _scope(op_name)
    if len(path) >= 2 and path[0].startswith(("jit(", "pjit(")):
        return path[1]
    return path[0] if path else ""


def _xla(figs: XlaFigures | None) -> dict[str, Any] | None:
    if figs is None:
        return None
    return {"files": list(figs.files), "peak": figs.live_range_peak_bytes,
            "peak_step": figs.live_range_peak_time, "temp": figs.temp_bytes,
            "total": figs.total_bytes, "allocations": figs.allocations,
            "recomputed_peak": figs.recomputed_peak_bytes}


def dump_report_data(name: str, figs: XlaFigures,
                     shapes: dict[str, str] | None = None) -> dict[str, Any]:
    """The page for XLA's memory files without a module: its figures and the peak list."""
    shapes = shapes or {}
    return {
        "schema": "hloscope.report/1", "module": name, "file": name,
        "summary": {"partitioned": False, "num_partitions": 1, "instructions": 0,
                    "computations": 0, "kernels": 0, "temporaries": 0, "temporary_bytes": 0,
                    "flops": 0, "collectives": [], "arguments": figs.argument_bytes or 0,
                    "outputs": figs.output_bytes or 0},
        "memory": {"peak": figs.live_range_peak_bytes, "peak_step": figs.live_range_peak_time,
                   "peak_instruction": "", "steps": 0, "temp": figs.temp_bytes,
                   "figures": dump_figures(
                       peak=figs.live_range_peak_bytes, peak_step=figs.live_range_peak_time,
                       arguments=figs.argument_bytes, outputs=figs.output_bytes,
                       constants=figs.constant_bytes, temp=figs.temp_bytes,
                       total=figs.total_bytes).to_dict(),
                   "peak_values": [[label, shapes.get(label, ""), size, "", label.split("{")[0],
                                    "", ""] for label, size in figs.live_range_peak_values],
                   "timeline": [], "values": [], "stacks": {}},
        "xla": _xla(figs), "findings": [], "kernels": [], "edges": [],
        "groups": [{"title": name, "kind": "module", "parent": -1, "groups": [],
                    "kernels": [], "size": 0}], "top": 0, "notes": [],
    }
