"""What changed between two versions of a program, by what the kernels compute.

`diff_modules` is a pure function from two modules to a `ModuleDiff`: plain
frozen data (JSON schema ``hloscope.diff/1``).  XLA renumbers instructions
from one compile to the next, so kernels are matched by what they compute,
never by name, in passes from strict to loose:

1. the same place (entry, loop body, branch, ...), kind, result shape,
   inputs, fused operations, op_name and source line;
2. the same but op_name and source line (the code moved);
3. the same place, kind and shapes, whatever is fused inside: a *changed*
   kernel when its fused operations differ, reported with the operations it
   gained and lost (one whose op_name alone changed is only counted);
4. the same place, kind, fused operations, op_name and source line on other
   shapes: a *resized* kernel (the same program on other sizes, or another
   batch), with the arrays passed between two resized kernels resized too.

What is left is removed (only in A) or added (only in B).  Arrays passed
between kernels, the values live at the peak, collectives and the advisor's
findings are compared the same way, by shapes and op_names.  Renaming alone
gives an empty diff.

Two variants of one function (``attn`` and ``attn_f32``) carry their names in
every op_name (``jit(attn)/dot_general`` against ``jit(attn_f32)/dot_general``)
and in the module's name: when the two sides' top-level names differ, op_names
are compared without them (`ModuleDiff.function_names` says so), and the
module names are never a change.  Every memory figure of `hloscope memory`
(see `_figures`) is put side by side, with the values live at the peak on one
side only.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._hlo._module import Module
from .._repr import clip, number
from .._units import format_bytes, format_count
from ._advisor import Finding, advise
from ._dataflow import analyze_dataflow
from ._kernels import Kernel, KernelGraph, kernel_graph
from ._liverange import LiveRanges, compute_live_ranges
from ._memory import MemoryReport, analyze_memory

__all__ = ["DIFF_SCHEMA", "KernelChange", "ModuleDiff", "diff_modules", "match_findings"]

DIFF_SCHEMA = "hloscope.diff/1"


@dataclass(frozen=True, slots=True)
class KernelChange:
    """A kernel matched across the versions whose fused operations (or op_name) changed."""

    a: str
    b: str
    place: str
    gained: tuple[tuple[str, int], ...]
    lost: tuple[tuple[str, int], ...]
    op_name_a: str
    op_name_b: str
    source_a: str | None
    source_b: str | None
    flops_a: int
    flops_b: int

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "place": self.place, "gained": dict(self.gained),
                "lost": dict(self.lost), "op_name_a": self.op_name_a,
                "op_name_b": self.op_name_b, "source_a": self.source_a,
                "source_b": self.source_b, "flops_a": self.flops_a, "flops_b": self.flops_b}


def _kernel_dict(k: Kernel, place: str) -> dict[str, Any]:
    return {"name": k.name, "place": place, "category": k.category,
            "fusion_kind": k.fusion_kind or None, "target": k.target or None, "shape": k.shape,
            "fused": dict(k.fused), "flops": k.flops, "op_name": k.op_name, "source": k.source}


@dataclass(frozen=True, slots=True)
class ModuleDiff:
    """What `hloscope diff` shows.  Each list holds plain dicts (see docs/json.md)."""

    a: KernelGraph
    b: KernelGraph
    headline: tuple[str, ...]
    removed: tuple[dict[str, Any], ...]
    added: tuple[dict[str, Any], ...]
    changed: tuple[KernelChange, ...]
    matched: int
    temporaries_removed: tuple[dict[str, Any], ...]
    temporaries_added: tuple[dict[str, Any], ...]
    peak_a: int | None
    peak_b: int | None
    peak_removed: tuple[dict[str, Any], ...]
    peak_added: tuple[dict[str, Any], ...]
    collectives_removed: tuple[dict[str, Any], ...]
    collectives_added: tuple[dict[str, Any], ...]
    math_lost: tuple[tuple[str, int], ...]
    math_gained: tuple[tuple[str, int], ...]
    findings_gone: tuple[Finding, ...]
    findings_new: tuple[Finding, ...]
    # Matched by rule and place whose evidence's shapes changed: (A's, B's).
    findings_changed: tuple[tuple[Finding, Finding], ...] = ()
    # Every memory figure side by side: key, label, source, a, b, change (see `_figure_rows`).
    figures: tuple[dict[str, Any], ...] = ()
    # The top-level names (``jit(attn)``, ``jit(attn_f32)``) left out of every op_name
    # before comparing, when the two sides' differ; None when they were compared whole.
    function_names: tuple[str, str] | None = None
    # Kernels matched with the same work inside whose op_name changed (not listed).
    op_name_changed: int = 0
    # Kernels matched by place, kind, work, op_name and source on other shapes (dicts: a,
    # b, place, shape_a, shape_b, flops_a, flops_b), and the arrays passed between them
    # (a, b, from_a, from_b, shape_a, shape_b, bytes_a, bytes_b).
    resized: tuple[dict[str, Any], ...] = ()
    temporaries_resized: tuple[dict[str, Any], ...] = ()
    # Every pair of kernels matched, by any pass (A's name, B's name), in A's order: what
    # a measured-time diff pairs too (`_profile._diff.time_diff`).
    pairs: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        return clip(f"ModuleDiff({self.a.module!r} -> {self.b.module!r}: "
                    f"{len(self.removed):,} kernels removed, {len(self.added):,} added, "
                    f"{len(self.changed):,} changed; peak {number(self.peak_a)} -> "
                    f"{number(self.peak_b)} B)")

    @property
    def flops(self) -> tuple[int, int]:
        return sum(k.flops for k in self.a.kernels), sum(k.flops for k in self.b.kernels)

    @property
    def bytes_accessed(self) -> tuple[int, int]:
        return (sum(k.bytes_accessed for k in self.a.kernels),
                sum(k.bytes_accessed for k in self.b.kernels))

    @property
    def same_work(self) -> frozenset[tuple[str, str]]:
        """The matched kernels (A's name, B's) that do the same work on both sides: not
        changed inside, not resized (a measured diff's control: what the change left
        alone should keep its time)."""
        other = {(c.a, c.b) for c in self.changed} | {(r["a"], r["b"]) for r in self.resized}
        return frozenset(p for p in self.pairs if p not in other)

    @property
    def is_empty(self) -> bool:
        """Nothing but names changed."""
        return not (self.removed or self.added or self.changed or self.resized
                    or self.temporaries_resized or self.temporaries_removed
                    or self.temporaries_added or self.peak_a != self.peak_b
                    or self.peak_removed or self.peak_added or self.collectives_removed
                    or self.collectives_added or self.findings_gone or self.findings_new
                    or self.findings_changed or any(r["change"] for r in self.figures)
                    or self.flops[0] != self.flops[1]
                    or self.bytes_accessed[0] != self.bytes_accessed[1])

    def to_dict(self) -> dict[str, Any]:
        fa, fb = self.flops
        ba, bb = self.bytes_accessed
        return {
            "a": {"module": self.a.module, "file": self.a.file},
            "b": {"module": self.b.module, "file": self.b.file},
            "empty": self.is_empty, "headline": list(self.headline),
            "kernels": {"a": len(self.a.kernels), "b": len(self.b.kernels),
                        "matched": self.matched, "op_name_changed": self.op_name_changed,
                        "removed": list(self.removed),
                        "added": list(self.added),
                        "changed": [c.to_dict() for c in self.changed],
                        "resized": list(self.resized)},
            "temporaries": {"a_bytes": self.a.temporary_bytes, "b_bytes": self.b.temporary_bytes,
                            "removed": list(self.temporaries_removed),
                            "added": list(self.temporaries_added),
                            "resized": list(self.temporaries_resized)},
            "peak": {"a": self.peak_a, "b": self.peak_b,
                     "removed": list(self.peak_removed), "added": list(self.peak_added)},
            "collectives": {"removed": list(self.collectives_removed),
                            "added": list(self.collectives_added)},
            "math": {"lost": dict(self.math_lost), "gained": dict(self.math_gained)},
            "flops": {"a": fa, "b": fb}, "bytes_accessed": {"a": ba, "b": bb},
            "findings": {"gone": [f.to_dict() for f in self.findings_gone],
                         "new": [f.to_dict() for f in self.findings_new],
                         "changed": [{"a": x.to_dict(), "b": y.to_dict()}
                                     for x, y in self.findings_changed]},
            "figures": list(self.figures),
            "function_names": (None if self.function_names is None else
                               {"a": self.function_names[0], "b": self.function_names[1]}),
        }


# ---------------------------------------------------------------------------


def _places(g: KernelGraph) -> dict[str, str]:
    """Computation name -> where it runs, without names: ``entry``, ``while body``, ..."""
    groups = {x.name: x for x in g.groups}
    out: dict[str, str] = {}

    def place(name: str, depth: int = 0) -> str:
        if name in out:
            return out[name]
        grp = groups.get(name)
        if grp is None or depth > 32:
            return "entry"
        parent = place(grp.parent, depth + 1)
        out[name] = grp.kind if parent == "entry" else f"{parent} / {grp.kind}"
        return out[name]

    for k in g.kernels:
        out[k.group] = place(k.group)
    return out


def _inputs(g: KernelGraph) -> dict[str, tuple[tuple[str, str], ...]]:
    acc: dict[str, list[tuple[str, str]]] = {}
    for e in g.edges:
        if e.dst != "result":
            acc.setdefault(e.dst, []).append((e.src_kind, e.shape))
    return {k: tuple(sorted(v)) for k, v in acc.items()}


def _keys(g: KernelGraph, op: Callable[[str], str]
          ) -> list[tuple[Kernel, str, tuple[Any, ...], tuple[Any, ...], tuple[Any, ...],
                          tuple[Any, ...], tuple[Any, ...]]]:
    """Each kernel with its place and its keys, strict to loose (`_match`'s levels 2 to
    6): with the work inside, op_name and source; with the work; the kind, output and
    input shapes alone; the work, op_name and source on any shapes; the kind, output and
    op_name alone (an edited kernel).  Every key holds the opcode (a compare is never
    matched with a slice) and default layouts are left out of shapes."""
    places = _places(g)
    ins = _inputs(g)
    out = []
    for k in g.kernels:
        place = places.get(k.group, "entry")
        shape = _plain_layout(k.shape)
        kind = (place, k.category, k.opcode, k.fusion_kind, k.target)
        base = (*kind, shape, tuple((w, _plain_layout(s)) for w, s in ins.get(k.name, ())))
        loose = base
        mid = (*base, k.fused)
        strict = (*mid, op(k.op_name), k.source)
        shapeless = (*kind, k.fused, op(k.op_name), k.source)
        edited = (*kind, shape, op(k.op_name))
        out.append((k, place, strict, mid, loose, shapeless, edited))
    return out


_LAYOUT = re.compile(r"\[([^\]]*)\]\{([0-9,]*)\}")


def _io_changes(ma: Module, mb: Module) -> list[str]:
    """In words, where the program's arguments or results differ in shape or type between
    the two modules (default layouts left out): the rest of a diff compares what runs, not
    what goes in and out (a trial's FFT whose result came out transposed read 'the same
    structure')."""
    out = []
    for what, sa, sb in (("arguments", [str(p.shape) for p in ma.entry.parameters],
                          [str(p.shape) for p in mb.entry.parameters]),
                         ("results", [str(leaf) for _, leaf in ma.entry.root.shape.leaves()],
                          [str(leaf) for _, leaf in mb.entry.root.shape.leaves()])):
        pa, pb = [_plain_layout(x) for x in sa], [_plain_layout(x) for x in sb]
        if pa == pb:
            continue
        if len(pa) != len(pb):
            out.append(f"the program's {what}: {len(pa)} became {len(pb)}")
            continue
        diffs = [(i, x, y) for i, (x, y) in enumerate(zip(pa, pb)) if x != y]
        i, x, y = diffs[0]
        more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
        out.append(f"the program's {what} changed: {what[:-1]} {i} {x} -> {y}{more}")
    return out


def _plain_layout(shape: str) -> str:
    """`shape` with each default layout left out (``f32[4,8]{1,0}`` is ``f32[4,8]``, the
    layout XLA gives a shape written without one), so a module printed with its layouts
    and the same without them compare equal; other layouts (``{0,1}``, tiles) stay."""
    def plain(m: re.Match[str]) -> str:
        rank = len([d for d in m.group(1).split(",") if d.strip()])
        default = ",".join(str(i) for i in range(rank - 1, -1, -1))
        return f"[{m.group(1)}]" if m.group(2) == default else m.group(0)

    return _LAYOUT.sub(plain, shape)


_MOST_PAIRS = 20_000  # candidate pairs of one key weighed by `near`; above, in order


def _match(a: list, b: list, level: int,
           near: Callable[[Any, Any], tuple[Any, ...]] | None = None,
           ) -> tuple[list[tuple[Any, Any]], list, list]:
    """Pair items of `a` and `b` with equal key `level`; return pairs and the rest.  Among
    several of one key, the pairs `near` scores lowest first (ties, and without `near`,
    in order): the attention's output projection in A goes with B's, not with a Q, K or
    V projection of the same shape that B fused into one."""
    pool: dict[Any, list[int]] = {}
    for j, item in enumerate(b):
        pool.setdefault(item[level], []).append(j)
    by_key: dict[Any, list[int]] = {}
    for i, item in enumerate(a):
        if item[level] in pool:
            by_key.setdefault(item[level], []).append(i)
    matched: list[tuple[int, int]] = []
    for key, xs in by_key.items():
        ys = pool[key]
        if near is None or len(xs) == 1 and len(ys) == 1 or len(xs) * len(ys) > _MOST_PAIRS:
            matched.extend(zip(xs, ys))
            continue
        ranked = sorted((near(a[i], b[j]), i, j) for i in xs for j in ys)
        used_a: set[int] = set()
        used_b: set[int] = set()
        for _, i, j in ranked:
            if i not in used_a and j not in used_b:
                used_a.add(i)
                used_b.add(j)
                matched.append((i, j))
    matched.sort()
    pairs = [(a[i], b[j]) for i, j in matched]
    in_a = {i for i, _ in matched}
    in_b = {j for _, j in matched}
    return (pairs, [x for i, x in enumerate(a) if i not in in_a],
            [y for j, y in enumerate(b) if j not in in_b])


def _line(source: str | None) -> int | None:
    """The line number of a kernel's ``file:line``, if it has one."""
    if not source:
        return None
    _, _, line = source.rpartition(":")
    return int(line) if line.isdigit() else None


def _nearness(op_a: Callable[[str], str], op_b: Callable[[str], str]
              ) -> Callable[[Any, Any], tuple[Any, ...]]:
    """How far apart two kernels of one key are: their op_names (without the function
    names) differ or not, then how many lines apart their source lines are (an edit
    moves lines by a few; the files may differ: a copy of the program)."""
    def near(x: Any, y: Any) -> tuple[Any, ...]:
        kx, ky = x[0], y[0]
        lx, ly = _line(kx.source), _line(ky.source)
        return (op_a(kx.op_name) != op_b(ky.op_name),
                abs(lx - ly) if lx is not None and ly is not None else float("inf"))
    return near


def _counter_diff(a: Counter[Any], b: Counter[Any]) -> tuple[list[Any], list[Any]]:
    removed = list((a - b).elements())
    added = list((b - a).elements())
    return removed, added


def _fused_total(g: KernelGraph) -> Counter[str]:
    c: Counter[str] = Counter()
    for k in g.kernels:
        for op, n in k.fused:
            c[op] += n
        if not k.fused and k.category not in ("fusion",):
            c[k.opcode] += 1
    return c


_TOP = re.compile(r"((?:p?jit|pmap|xla_pmap)\([^()/]*\))(?:/|$)")


def _top_name(m: Module) -> str | None:
    """The outer ``jit(NAME)`` (or ``pjit(NAME)``, ``pmap(NAME)``) most of the module's
    op_names start with; None when none does.  ``jit(f)/jit(main)/...`` gives ``jit(f)``."""
    c: Counter[str] = Counter()
    for comp in m.computations:
        for inst in comp.instructions:
            hit = _TOP.match(inst.metadata.op_name)
            if hit:
                c[hit.group(1)] += 1
    return c.most_common(1)[0][0] if c else None


def _without(top: str | None) -> Callable[[str], str]:
    """op_name -> the op_name without the leading `top` (everything after it kept)."""
    if top is None:
        return lambda op_name: _ADDRESS.sub("0x…", op_name)
    n = len(top)

    def strip(op_name: str) -> str:
        if op_name.startswith(top) and (len(op_name) == n or op_name[n] == "/"):
            op_name = op_name[n + 1:]
        return _ADDRESS.sub("0x…", op_name)

    return strip


# A Python object's address in an op_name (`<function f at 0x14df2cb3a170>`): another run
# prints another, so two versions are compared without it.
_ADDRESS = re.compile(r"0x[0-9a-f]{6,}")


def _function_names(a: Module, b: Module) -> tuple[str, str] | None:
    """The two top-level names to leave out of op_names, when both sides have one and
    they differ."""
    ta, tb = _top_name(a), _top_name(b)
    return (ta, tb) if ta is not None and tb is not None and ta != tb else None


def match_findings(fa: Sequence[Finding], fb: Sequence[Finding],
                   op_a: Callable[[str], str] = str, op_b: Callable[[str], str] = str,
                   ) -> tuple[list[Finding], list[Finding], list[tuple[Finding, Finding]]]:
    """Pair the advisor's findings of two versions by rule and place, never by kernel or
    instruction names (XLA renumbers them): in passes from strict to loose, the rule with
    each evidence item's kind, shape, op_name (through `op_a`/`op_b`, which leave out the
    function's name) and source line; without the source line (the code moved); the rule
    and the evidence's shapes alone; then the rule and the evidence's op_names alone,
    a finding whose shapes *changed*; and last one rule whose evidence is at least half
    the same (`_overlapping`: it grew or shrank), also *changed*.  Returns (gone, new,
    changed pairs).  Reads only
    `rule` and the evidence's `what`, `shape`, `op_name` and `source`."""
    def key(f: Finding, op: Callable[[str], str], level: int) -> tuple[Any, ...]:
        items = []
        for e in f.evidence:
            if level == 0:
                items.append((e.what, e.shape, op(e.op_name), e.source or ""))
            elif level == 1:
                items.append((e.what, e.shape, op(e.op_name)))
            elif level == 2:
                items.append((e.what, e.shape))
            else:
                items.append((e.what, op(e.op_name), e.source or ""))
        return (f.rule, tuple(sorted(items)))

    rest_a, rest_b = list(fa), list(fb)
    pairs_by_level: list[list[tuple[Finding, Finding]]] = []
    for level in range(4):
        pool: dict[Any, deque[Finding]] = {}
        for f in rest_b:
            pool.setdefault(key(f, op_b, level), deque()).append(f)
        pairs, left = [], []
        for f in rest_a:
            cands = pool.get(key(f, op_a, level))
            if cands:
                pairs.append((f, cands.popleft()))
            else:
                left.append(f)
        used = {id(y) for _, y in pairs}
        rest_a, rest_b = left, [f for f in rest_b if id(f) not in used]
        pairs_by_level.append(pairs)
    overlap, rest_a, rest_b = _overlapping(rest_a, rest_b, op_a, op_b)
    return rest_a, rest_b, pairs_by_level[3] + overlap


def _overlapping(fa: list[Finding], fb: list[Finding], op_a: Callable[[str], str],
                 op_b: Callable[[str], str],
                 ) -> tuple[list[Finding], list[Finding], list[tuple[Finding, Finding]]]:
    """The last pass of `match_findings`: one rule whose evidence grew or shrank (20 saved
    values against 21, most of them the same): findings of one rule whose evidence items
    (kind and op_name) are at least half the same (over the two sides' items together),
    the most alike first.  Returns (pairs, A's left, B's left)."""
    def items(f: Finding, op: Callable[[str], str]) -> Counter[tuple[str, str]]:
        return Counter((e.what, op(e.op_name)) for e in f.evidence if e.op_name)

    cands = []
    for i, x in enumerate(fa):
        ix = items(x, op_a)
        for j, y in enumerate(fb):
            if x.rule != y.rule:
                continue
            iy = items(y, op_b)
            union = sum((ix | iy).values())
            alike = sum((ix & iy).values()) / union if union else 0.0
            if alike >= 0.5:
                cands.append((-alike, i, j))
    pairs, used_a, used_b = [], set(), set()
    for _, i, j in sorted(cands):
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            pairs.append((fa[i], fb[j]))
    return (pairs, [f for i, f in enumerate(fa) if i not in used_a],
            [f for j, f in enumerate(fb) if j not in used_b])


def _figure_rows(a: MemoryReport, b: MemoryReport) -> tuple[dict[str, Any], ...]:
    """Every labelled memory figure of A and B side by side (A's order, then B's others):
    ``key``, ``label``, ``source``, ``a``, ``b`` (bytes; None where a side has none) and
    ``change`` (b - a; None unless both are known)."""
    fa = {f.key: f for f in a.figures.figures}
    fb = {f.key: f for f in b.figures.figures}
    keys = list(fa) + [k for k in fb if k not in fa]
    rows = []
    for k in keys:
        x, y = fa.get(k), fb.get(k)
        f = x if x is not None else y
        assert f is not None
        va = x.bytes if x is not None else None
        vb = y.bytes if y is not None else None
        rows.append({"key": k, "label": f.label, "source": f.source, "a": va, "b": vb,
                     "change": vb - va if va is not None and vb is not None else None})
    return tuple(rows)


def _two(a: int, b: int) -> tuple[str, str]:
    """Two sizes in words, exact where the rounded words would read the same."""
    x, y = format_bytes(a), format_bytes(b)
    return (f"{a:,} B", f"{b:,} B") if x == y and a != b else (x, y)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _where(module: Module, kernel: str, opcode: str) -> str:
    """``op_name, file:line`` of the first `opcode` fused inside `kernel` (empty if none)."""
    for comp in module.computations:
        inst = comp.by_name.get(kernel)
        if inst is None:
            continue
        stack = list(inst.called_computation_names)
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            for i in module.computation(name).instructions:
                if i.opcode == opcode:
                    loc = i.source
                    return ", ".join(x for x in (i.metadata.op_name, str(loc) if loc else "") if x)
                stack.extend(i.called_computation_names)
    return ""


_HELPER_OPS = frozenset({"broadcast", "constant", "parameter", "bitcast", "reshape"})


def diff_modules(a: Module, b: Module, *,
                 memory: tuple[MemoryReport, MemoryReport] | None = None) -> ModuleDiff:
    """Compare two versions of a program (see the module docstring).  `memory`: the two
    modules' memory reports when already made (`Report.memory` has XLA's own figures
    beside hloscope's); else they are computed here, hloscope's figures alone."""
    names = _function_names(a, b)
    op_a, op_b = (_without(names[0]), _without(names[1])) if names else (
        _without(None), _without(None))
    analyses = []
    for i, m in enumerate((a, b)):
        df = analyze_dataflow(m)
        lr = compute_live_ranges(df)
        g = kernel_graph(m, df=df, lr=lr)
        mem = memory[i] if memory is not None else analyze_memory(m, df=df, lr=lr, top=0)
        analyses.append((g, lr, advise(m, graph=g, df=df, lr=lr), mem))
    (ga, lra, fa, mem_a), (gb, lrb, fb, mem_b) = analyses

    ka, kb = _keys(ga, op_a), _keys(gb, op_b)
    near = _nearness(op_a, op_b)
    p1, ra, rb = _match(ka, kb, 2)
    p2, ra, rb = _match(ra, rb, 3, near)
    p3, ra, rb = _match(ra, rb, 4, near)
    changed = []
    relabelled = 0
    for x, y in p2 + p3:
        kx, ky = x[0], y[0]
        lost, gained = _counter_diff(Counter(dict(kx.fused)), Counter(dict(ky.fused)))
        if not lost and not gained:  # the same work: only its op_name or source line moved
            relabelled += op_a(kx.op_name) != op_b(ky.op_name)
            continue
        changed.append(KernelChange(
            kx.name, ky.name, x[1], tuple(sorted(Counter(gained).items())),
            tuple(sorted(Counter(lost).items())), kx.op_name, ky.op_name, kx.source,
            ky.source, kx.flops, ky.flops))
    p4, ra, rb = _match(ra, rb, 5, near)
    # Last, a kernel edited: the same place, kind, output and op_name, on other inputs
    # with other work inside (a fused QKV projection's gradient sliced inside each weight's
    # update; the source line nearest first)
    p6, ra, rb = _match(ra, rb, 6, near)
    p5: list[tuple[Any, Any]] = []
    for x, y in p6:
        kx, ky = x[0], y[0]
        lost, gained = _counter_diff(Counter(dict(kx.fused)), Counter(dict(ky.fused)))
        if not lost and not gained:  # the same work on other inputs (its line in another
            p4.append((x, y))        # file): resized
            continue
        p5.append((x, y))
        changed.append(KernelChange(
            kx.name, ky.name, x[1], tuple(sorted(Counter(gained).items())),
            tuple(sorted(Counter(lost).items())), kx.op_name, ky.op_name, kx.source,
            ky.source, kx.flops, ky.flops))
    resized = tuple({"a": x[0].name, "b": y[0].name, "place": x[1], "shape_a": x[0].shape,
                     "shape_b": y[0].shape, "flops_a": x[0].flops, "flops_b": y[0].flops}
                    for x, y in p4)
    matched = len(p1) + len(p2) + len(p3) + len(p4) + len(p5)
    removed = tuple(_kernel_dict(x[0], x[1]) for x in ra)
    added = tuple(_kernel_dict(y[0], y[1]) for y in rb)

    def temps(g: KernelGraph) -> Counter[tuple[str, int, str]]:
        names = set(g.temporaries)
        c: Counter[tuple[str, int, str]] = Counter()
        seen = set()
        for e in g.edges:
            if e.value in names and e.value not in seen:
                seen.add(e.value)
                c[(_plain_layout(e.shape), e.bytes, e.src_kind)] += 1
        return c

    t_removed, t_added = _counter_diff(temps(ga), temps(gb))
    by_value_a = {e.value: e for e in ga.edges}
    by_value_b = {e.value: e for e in gb.edges}

    def temp_rows(items: list, g: KernelGraph, by_value: dict) -> tuple[dict[str, Any], ...]:
        rows = []
        pool = [v for v in g.temporaries]
        for shape, size, src_kind in items:
            name = next((v for v in pool if _plain_layout(by_value[v].shape) == shape
                         and by_value[v].bytes == size and by_value[v].src_kind == src_kind), "?")
            if name in pool:
                pool.remove(name)
            e = by_value.get(name)
            rows.append({"value": name, "shape": e.shape if e else shape, "bytes": size,
                         "from": e.src if e else None, "src_kind": src_kind})
        return tuple(rows)

    def peak_only(mine: LiveRanges, theirs: LiveRanges, op_mine: Callable[[str], str],
                  op_theirs: Callable[[str], str]) -> tuple[dict[str, Any], ...]:
        """The values live at `mine`'s peak with no value of the same shape, op_name (without
        the function's name) and size live at `theirs`'s: largest first."""
        left = Counter((_plain_layout(str(v.shape)), op_theirs(v.inst.metadata.op_name), v.size)
                       for v in theirs.peak_values)
        rows = []
        for v in mine.peak_values:
            k = (_plain_layout(str(v.shape)), op_mine(v.inst.metadata.op_name), v.size)
            if left[k]:
                left[k] -= 1
            else:
                rows.append({"shape": str(v.shape), "op_name": v.inst.metadata.op_name,
                             "bytes": v.size})
        rows.sort(key=lambda r: (-r["bytes"], r["shape"], r["op_name"]))
        return tuple(rows)

    def coll_key(g: KernelGraph, op: Callable[[str], str]
                 ) -> Counter[tuple[str, str, int, str, str]]:
        # the devices each one spans too: a mesh's axes swapped changes the groups alone
        return Counter((c.opcode, _plain_layout(c.shape), c.sent_per_device, op(c.op_name),
                        c.replica_groups or "") for c in g.collectives)

    rows_removed = temp_rows(t_removed, ga, by_value_a)
    rows_added = temp_rows(t_added, gb, by_value_b)
    # An array between two kernels resized to another shape: the same array, resized.
    pair_of = {r["a"]: r["b"] for r in resized}
    added_by: dict[tuple[Any, str], deque[dict[str, Any]]] = {}
    for x in rows_added:
        added_by.setdefault((x["from"], x["src_kind"]), deque()).append(x)
    t_resized = []
    kept_removed = []
    used: set[int] = set()
    for r in rows_removed:
        cands = added_by.get((pair_of.get(r["from"]), r["src_kind"])) if r["from"] in pair_of \
            else None
        if not cands:
            kept_removed.append(r)
            continue
        y = cands.popleft()
        used.add(id(y))
        t_resized.append({"a": r["value"], "b": y["value"], "from_a": r["from"],
                          "from_b": y["from"], "shape_a": r["shape"], "shape_b": y["shape"],
                          "bytes_a": r["bytes"], "bytes_b": y["bytes"]})
    left_added = [x for x in rows_added if id(x) not in used]

    c_removed, c_added = _counter_diff(coll_key(ga, op_a), coll_key(gb, op_b))
    # shown as written (compared without default layouts)
    shown_a = {_plain_layout(c.shape): c.shape for c in ga.collectives}
    shown_b = {_plain_layout(c.shape): c.shape for c in gb.collectives}
    m_lost, m_gained = _counter_diff(_fused_total(ga), _fused_total(gb))
    gone, new, f_changed = match_findings(fa, fb, op_a, op_b)

    d = ModuleDiff(
        ga, gb, (), removed, added, tuple(changed), matched,
        tuple(kept_removed), tuple(left_added),
        lra.peak_bytes, lrb.peak_bytes,
        peak_only(lra, lrb, op_a, op_b), peak_only(lrb, lra, op_b, op_a),
        tuple({"opcode": o, "shape": shown_a.get(s, s), "sent_per_device": b, "op_name": n,
               "replica_groups": r} for o, s, b, n, r in c_removed),
        tuple({"opcode": o, "shape": shown_b.get(s, s), "sent_per_device": b, "op_name": n,
               "replica_groups": r} for o, s, b, n, r in c_added),
        tuple(sorted(Counter(m_lost).items())), tuple(sorted(Counter(m_gained).items())),
        tuple(gone), tuple(new), tuple(f_changed), _figure_rows(mem_a, mem_b), names,
        relabelled, resized, tuple(t_resized), _pairs(ga, p1 + p2 + p3 + p4 + p5))
    return _with_headline(d, a, b)


def _pairs(ga: KernelGraph, matched: list[tuple[Any, Any]]) -> tuple[tuple[str, str], ...]:
    """The matched kernels' names (A's, B's), in A's kernel order."""
    order = {k.name: i for i, k in enumerate(ga.kernels)}
    names = [(x[0].name, y[0].name) for x, y in matched]
    return tuple(sorted(names, key=lambda p: order.get(p[0], len(order))))


def _with_headline(d: ModuleDiff, ma: Module, mb: Module) -> ModuleDiff:
    lines: list[str] = []
    if d.function_names is not None:
        lines.append("op_names compared without the function names "
                     f"{d.function_names[0]} / {d.function_names[1]}")
    io = _io_changes(ma, mb)
    if d.is_empty and io:
        return _replace_headline(d, lines + io)
    if d.is_empty:
        same_names = ma.name == mb.name and all(x == y for x, y in d.pairs)
        lines.insert(0, ("no difference" if same_names else "no difference but names")
                     + ": the same kernels, arrays, peak and collectives")
        return _replace_headline(d, lines)
    lines.extend(io)
    a, b = d.a, d.b
    loops_a = [g for g in a.groups if g.kind == "while body"]
    loops_b = [g for g in b.groups if g.kind == "while body"]
    if len(loops_a) > len(loops_b):
        for g in loops_a[len(loops_b):]:
            per_iter = len(a.kernels_in(g.name)) + sum(
                len(a.kernels_in(x.name)) for x in a.groups
                if x.caller == g.caller and x.kind == "while condition")
            state = sum(e["bytes"] for e in d.temporaries_removed if e["src_kind"] == "loop state")
            lines.append(f"the loop {g.caller} ({per_iter} kernels per iteration"
                         + (f", its state of {format_bytes(state)} kept in memory" if state else "")
                         + ") is gone")
    elif len(loops_b) > len(loops_a):
        for g in loops_b[len(loops_a):]:
            lines.append(f"a loop {g.caller} appears ({len(b.kernels_in(g.name))} kernels in its body)")
    if len(a.kernels) != len(b.kernels):
        lines.append(f"{len(a.kernels)} kernels became {len(b.kernels)}")
    elif d.removed or d.added:  # as many, not the same ones
        lines.append(f"{_plural(len(a.kernels), 'kernel')} on each side, not all the same "
                     "ones")
    else:
        lines.append(f"the same structure: {_plural(len(a.kernels), 'kernel')} and "
                     f"{_plural(len(a.temporaries), 'array')} between kernels on each side")
    reshaped = [r for r in d.resized if r["shape_a"] != r["shape_b"]]
    if reshaped:
        r = reshaped[0]
        lines.append(f"{_plural(len(reshaped), 'kernel')} "
                     f"{'does' if len(reshaped) == 1 else 'do'} the same work on other shapes "
                     f"(e.g. {r['a']}: {r['shape_a']} -> {r['shape_b']})")
    alike = [r for r in d.resized if r["shape_a"] == r["shape_b"]]  # their own shapes
    rewired = [r for r in alike if r["flops_a"] == r["flops_b"]]  # what they read is not
    if rewired:
        r, n = rewired[0], len(rewired)
        lines.append(f"{_plural(n, 'kernel')} {'does' if n == 1 else 'do'} the same work "
                     f"on other inputs (e.g. {r['a']}"
                     + (f" -> {r['b']}" if r["b"] != r["a"] else "") + ")")
    if len(rewired) < len(alike):  # a convolution's window, a reduction's inputs: other work
        r = next(r for r in alike if r["flops_a"] != r["flops_b"])
        n = len(alike) - len(rewired)
        lines.append(f"{_plural(n, 'kernel')} of the same kind and shape "
                     f"{'does' if n == 1 else 'do'} other work (e.g. {r['a']}"
                     + (f" -> {r['b']}" if r["b"] != r["a"] else "")
                     + f": {format_count(r['flops_a'])} -> {format_count(r['flops_b'])} "
                       "flops)")
    if d.temporaries_resized:
        ta = sum(t["bytes_a"] for t in d.temporaries_resized)
        tb = sum(t["bytes_b"] for t in d.temporaries_resized)
        if ta == tb:  # other shapes of the same size (a transpose, axes swapped)
            t = d.temporaries_resized[0]
            lines.append(f"{_plural(len(d.temporaries_resized), 'array')} between them on "
                         f"other shapes of the same size (e.g. {t['a']}: {t['shape_a']} -> "
                         f"{t['shape_b']})")
        else:
            lines.append(f"{_plural(len(d.temporaries_resized), 'array')} between them "
                         f"resized: {format_bytes(ta)} -> {format_bytes(tb)}")
    if d.temporaries_removed:
        total = sum(e["bytes"] for e in d.temporaries_removed)
        n = len(d.temporaries_removed)
        lines.append(f"{_plural(n, 'array')} between kernels ({format_bytes(total)}) "
                     f"{'is' if n == 1 else 'are'} gone: " + ", ".join(f"{e['value']} {e['shape']}"
                                              for e in d.temporaries_removed[:4]))
    if d.temporaries_added:
        total = sum(e["bytes"] for e in d.temporaries_added)
        lines.append(f"{_plural(len(d.temporaries_added), 'new array')} between kernels ({format_bytes(total)}): "
                     + ", ".join(f"{e['value']} {e['shape']}" for e in d.temporaries_added[:4]))
    need = next((r for r in d.figures if r["key"] == "allocation" and r["change"]), None)
    if need is not None:
        na, nb = _two(need["a"], need["b"])
        lines.append(f"what the device needs (XLA's allocation) goes from {na} to {nb} "
                     f"({need['change']:+,} B)")
    if d.peak_a != d.peak_b and d.peak_a is not None and d.peak_b is not None:
        pa, pb = _two(d.peak_a, d.peak_b)
        lines.append(f"the memory peak goes from {pa} to {pb} ({d.peak_b - d.peak_a:+,} B)")
    others = [r for r in d.figures if r["change"]
              and r["key"] not in ("live_range_peak", "allocation")]
    if others:
        lines.append("memory figures that moved: " + ", ".join(
            f"{r['label']} {' -> '.join(_two(r['a'], r['b']))}" for r in others))
    lost = [(op, n) for op, n in d.math_lost if op not in _HELPER_OPS]
    gained = [(op, n) for op, n in d.math_gained if op not in _HELPER_OPS]
    if lost or gained:
        def where(items: list[tuple[str, int]], side: str) -> str:
            parts = []
            for op, n in items:
                kernels = [c for c in d.changed if op in dict(c.lost if side == "a" else c.gained)]
                k = (kernels[0].a if side == "a" else kernels[0].b) if kernels else ""
                at = _where(ma if side == "a" else mb, k, op) if k else ""
                parts.append(op + (f" x{n}" if n > 1 else "")
                             + (f" (in {k}: {at})" if k and at else f" (in {k})" if k else ""))
            return ", ".join(parts)
        if lost and gained:
            lines.append(f"the math changed: {where(lost, 'a')} became {where(gained, 'b')}")
        else:
            lines.append(f"the math {'lost' if lost else 'gained'}: "
                         f"{where(lost, 'a') if lost else where(gained, 'b')}")
    moved = []
    for c in d.changed:
        for op, _n in c.lost:
            if op in _HELPER_OPS:
                continue
            dest = [x for x in d.changed if x is not c and op in dict(x.gained)]
            if dest:
                moved.append(f"{op} moved from {c.a} into {dest[0].b}")
    if moved:
        lines.append("; ".join(moved))
    for f in d.findings_gone:
        lines.append(f"advisor: {f.rule} ({f.title}) no longer fires")
    for f in d.findings_new:
        lines.append(f"advisor: {f.rule} ({f.title}) now fires")
    for x, y in d.findings_changed:
        lines.append(f"advisor: {x.rule} ({x.title}) fires on both sides, on other evidence: "
                     + _evidence_change(x, y))
    return _replace_headline(d, lines)


def _evidence_change(x: Finding, y: Finding) -> str:
    """What differs between the evidence of two findings paired as changed: how many
    items and bytes, and the shapes one side has that the other has not
    (``20 items (5.77 MiB) became 21 (5.96 MiB); f32[128,128]{1,0} x3 became ...``)."""
    def size(f: Finding) -> tuple[int, int]:
        return len(f.evidence), sum(e.bytes for e in f.evidence)

    def shapes(c: Counter[str]) -> str:
        top = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
        said = ", ".join(s + (f" x{n}" if n > 1 else "") for s, n in top[:2])
        return said + (f" and {len(top) - 2} more" if len(top) > 2 else "")

    parts = []
    (na, ba), (nb, bb) = size(x), size(y)
    if (na, ba) != (nb, bb):
        parts.append(f"{na} item{'s' if na != 1 else ''} ({format_bytes(ba)}) became {nb} "
                     f"({format_bytes(bb)})")
    sa, sb = Counter(e.shape for e in x.evidence), Counter(e.shape for e in y.evidence)
    lost, gained = sa - sb, sb - sa
    if lost or gained:
        parts.append(f"{shapes(lost) or 'nothing'} became {shapes(gained) or 'nothing'}")
    for field, of in (("peak_bytes", "the peak"), ("footprint_bytes", "the footprint"),
                      ("traffic_bytes", "memory traffic")):
        va, vb = getattr(x.saving, field), getattr(y.saving, field)
        if va != vb:
            parts.append(f"it would save {format_bytes(vb)} of {of}, not {format_bytes(va)}")
            break
    return "; ".join(parts) or "the same shapes, other op_names or lines"


def _replace_headline(d: ModuleDiff, lines: list[str]) -> ModuleDiff:
    return replace(d, headline=tuple(lines))
