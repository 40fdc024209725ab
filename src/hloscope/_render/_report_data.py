"""The data of the HTML report: plain JSON-ready dicts built from the analyses.

The kernel graph is organised as a tree of groups so that the page only
ever lays out what is open: the computations run by loops, branches and
calls; inside each, the name scopes of op_name (``jit(f)/layer_3/...``);
and, where a group holds too many items to read, consecutive chunks of its
kernels in schedule order.  Every group starts collapsed except the top.
"""

from __future__ import annotations

from typing import Any

from .._analysis._advisor import Finding
from .._analysis._kernels import KernelGraph
from .._analysis._memory import MemoryReport, XlaFigures
from .._analysis._summary import ModuleSummary
from .._hlo._module import Module

__all__ = ["CHUNK", "dump_report_data", "report_data"]

CHUNK = 40          # at most this many items shown in one group before chunking
TIMELINE_POINTS = 1500


def _hlo_text(module: Module, name: str, computation: str, limit: int = 6000) -> str:
    comp = module.computation(computation)
    inst = comp.by_name.get(name)
    if inst is None:
        return ""
    parts = [inst.to_text()]
    for called in inst.called_computation_names:
        if inst.opcode == "fusion":
            parts.append(module.computation(called).to_text())
    text = "\n\n".join(parts)
    return text if len(text) <= limit else text[:limit] + "\n... (cut; see the module file)"


def _scope(op_name: str) -> list[str]:
    parts = [p for p in op_name.split("/") if p]
    return parts[:-1]


def report_data(module: Module, summary: ModuleSummary, graph: KernelGraph, memory: MemoryReport,
                findings: list[Finding]) -> dict[str, Any]:
    """Everything the page shows, as plain data (see the module docstring)."""
    kernels = []
    index = {}
    for i, k in enumerate(graph.kernels):
        index[k.name] = i
        kernels.append({
            "name": k.name, "category": k.category, "fusion_kind": k.fusion_kind,
            "target": k.target, "fused": ", ".join(f"{op} x{n}" if n > 1 else op
                                                   for op, n in k.fused),
            "shape": k.shape, "bytes": k.bytes_out, "flops": k.flops,
            "bytes_accessed": k.bytes_accessed, "op_name": k.op_name, "source": k.source or "",
            "computation": k.group, "hlo": _hlo_text(module, k.name, k.group),
        })
    edges = []
    for e in graph.edges:
        if e.src_kind == "kernel" and e.src in index and e.dst in index:
            edges.append([index[e.src], index[e.dst], e.shape, e.bytes, e.kind,
                          1 if e.live_at_peak else 0])

    # The group tree.
    groups: list[dict[str, Any]] = []

    def new_group(title: str, kind: str, parent: int) -> int:
        groups.append({"title": title, "kind": kind, "parent": parent, "groups": [],
                       "kernels": [], "size": 0})
        gid = len(groups) - 1
        if parent >= 0:
            groups[parent]["groups"].append(gid)
        return gid

    top = new_group(f"module {module.name}", "module", -1)
    comp_group: dict[str, int] = {module.entry.name: top}
    pending = list(graph.groups)
    for _ in range(len(pending) + 1):
        rest = []
        for grp in pending:
            if grp.parent in comp_group:
                gid = new_group(f"{grp.kind} {grp.name} (of {grp.caller})", "computation",
                                comp_group[grp.parent])
                comp_group[grp.name] = gid
                groups[gid]["inputs"] = [index[name] for kind, name in grp.inputs
                                         if kind == "kernel" and name in index]
            else:
                rest.append(grp)
        if not rest or len(rest) == len(pending):
            break
        pending = rest
    scope_group: dict[tuple[int, tuple[str, ...]], int] = {}
    for i, k in enumerate(graph.kernels):
        base = comp_group.get(k.group, top)
        path = _scope(k.op_name)
        gid = base
        for depth in range(1, len(path) + 1):
            key = (base, tuple(path[:depth]))
            if key not in scope_group:
                scope_group[key] = new_group(path[depth - 1], "scope", gid)
            gid = scope_group[key]
        groups[gid]["kernels"].append(i)

    # Fold scopes with a single child group and no kernels; then chunk big groups.
    def fold(gid: int) -> None:
        g = groups[gid]
        for c in list(g["groups"]):
            fold(c)
        while (g["kind"] == "scope" and not g["kernels"] and len(g["groups"]) == 1
               and groups[g["groups"][0]]["kind"] == "scope"):
            child = groups[g["groups"][0]]
            g["title"] = g["title"] + "/" + child["title"]
            g["groups"], g["kernels"] = child["groups"], child["kernels"]
            child["groups"], child["kernels"] = [], []
            for c in g["groups"]:
                groups[c]["parent"] = gid

    fold(top)

    def chunk(gid: int) -> None:
        g = groups[gid]
        for c in list(g["groups"]):
            chunk(c)
        while len(g["kernels"]) + len(g["groups"]) > CHUNK:
            ks = g["kernels"]
            if len(ks) <= 1:
                break
            size = max(2, -(-len(ks) // CHUNK)) if len(ks) > CHUNK * CHUNK else CHUNK
            pieces = [ks[j:j + size] for j in range(0, len(ks), size)]
            g["kernels"] = []
            for piece in pieces:
                c = new_group(f"kernels {piece[0] + 1}-{piece[-1] + 1}", "chunk", gid)
                groups[c]["kernels"] = piece
                chunk(c)  # a big piece is cut again, so no open group shows too much
            if len(g["groups"]) > CHUNK:
                # Too many child groups: gather them, in order, under chunk groups.
                kids = g["groups"]
                g["groups"] = []
                step = -(-len(kids) // CHUNK)
                for j in range(0, len(kids), step):
                    c = new_group(f"groups {j + 1}-{min(j + step, len(kids))}", "chunk", gid)
                    groups[c]["groups"] = kids[j:j + step]
                    for kid in kids[j:j + step]:
                        groups[kid]["parent"] = c
                break

    chunk(top)
    for k_index, k in enumerate(kernels):
        k["group"] = -1
    for gid, g in enumerate(groups):
        for k_index in g["kernels"]:
            kernels[k_index]["group"] = gid

    def count(gid: int) -> int:
        g = groups[gid]
        g["size"] = len(g["kernels"]) + sum(count(c) for c in g["groups"])
        return g["size"]

    count(top)

    # The memory timeline, squeezed to at most TIMELINE_POINTS buckets (the max of each).
    tl = list(memory.timeline)
    n = len(tl)
    buckets = []
    if n:
        m = min(n, TIMELINE_POINTS)
        for b in range(m):
            lo, hi = b * n // m, max(b * n // m + 1, (b + 1) * n // m)
            j = max(range(lo, hi), key=lambda t: tl[t])
            buckets.append([lo, hi - 1, tl[j], memory.timeline_labels[j] if j < len(
                memory.timeline_labels) else ""])
    live_values = [[b.label, b.start, b.end, b.bytes, b.instruction, b.kind, b.source or ""]
                   for b in memory.largest]
    return {
        "schema": "hloscope.report/1",
        "module": module.name, "file": module.filename,
        "summary": {
            "partitioned": summary.partitioned, "num_partitions": summary.num_partitions,
            "instructions": summary.instructions, "computations": summary.computations,
            "kernels": len(graph.kernels), "temporaries": len(graph.temporaries),
            "temporary_bytes": graph.temporary_bytes,
            "flops": sum(k.flops for k in graph.kernels),
            "collectives": [[c.name, c.opcode, c.shape, c.sent_per_device, c.source or ""]
                            for c in graph.collectives],
            "arguments": summary.argument_bytes, "outputs": summary.output_bytes,
        },
        "memory": {
            "peak": memory.peak_bytes, "peak_step": memory.peak_step,
            "peak_instruction": memory.peak_instruction, "steps": memory.steps,
            "temp": memory.temp_estimate_bytes,
            "peak_values": [[b.label, b.shape, b.bytes, b.kind, b.instruction, b.op_name,
                             b.source or ""] for b in memory.peak_values],
            "timeline": buckets, "values": live_values,
        },
        "xla": _xla(memory.xla),
        "findings": [{"rule": f.rule, "title": f.title, "message": f.message,
                      "suggestion": f.suggestion,
                      "evidence": [e.name for e in f.evidence]} for f in findings],
        "kernels": kernels, "edges": edges, "groups": groups, "top": top,
    }


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
                   "peak_values": [[label, shapes.get(label, ""), size, "", label.split("{")[0],
                                    "", ""] for label, size in figs.live_range_peak_values],
                   "timeline": [], "values": []},
        "xla": _xla(figs), "findings": [], "kernels": [], "edges": [],
        "groups": [{"title": name, "kind": "module", "parent": -1, "groups": [],
                    "kernels": [], "size": 0}], "top": 0,
    }
