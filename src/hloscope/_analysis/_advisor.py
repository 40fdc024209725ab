"""The advisor: rules that read the kernel graph and the memory analysis for the user.

Each rule has an id, a one-line title, and for each finding the evidence
(kernels and arrays, with their source lines) and a change to try in the
user's code.  They encode what seed 004 works out by staring at graphs:
reductions split kernels, folded constants bloat memory, layout changes
cost copies, cheap intermediates are kept instead of recomputed, loops keep
their state in memory, independent large ops raise the peak together,
donations that do not take, stray f64, and collectives that move the same
data on every loop iteration.  `advise` is a pure function; `RULES` lists
the rules (docs/advisor.md explains each).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .._errors import HloModelError
from .._hlo._module import Computation, Instruction, Module
from ._dataflow import Dataflow, analyze_dataflow
from ._kernels import Edge, Kernel, KernelGraph, kernel_graph, launches_work
from ._liverange import LiveRanges, compute_live_ranges
from .._repr import brief_repr
from .._units import format_bytes
from ._walk import gte_index, operand, paused_gc

__all__ = ["ADVICE_SCHEMA", "RULES", "Evidence", "Finding", "Rule", "advise"]

ADVICE_SCHEMA = "hloscope.lint/1"

LARGE_CONSTANT_BYTES = 512 * 1024
LARGE_ARRAY_BYTES = 64 * 1024
# HS106 compares at most this many of the largest values at the peak, pairwise.
_MAX_SIDE_BY_SIDE = 16
_CHEAP_OPS = frozenset({"iota", "broadcast", "constant", "add", "subtract", "multiply", "negate",
                        "convert", "compare", "select", "maximum", "minimum", "and", "or", "not",
                        "reshape", "concatenate", "slice", "abs", "xor", "shift-left",
                        "shift-right-logical", "shift-right-arithmetic", "clamp", "copy"})
_HEAVY_OPS = frozenset({"reduce", "dot", "convolution", "fft", "sort", "scatter", "gather",
                        "reduce-window", "custom-call"})
_LAYOUT_OPS = frozenset({"copy", "transpose", "bitcast", "reshape"})


@dataclass(frozen=True, slots=True)
class Evidence:
    """A kernel, array or instruction a finding points at."""

    name: str
    what: str          # "kernel", "array", "constant", "collective", "parameter"
    shape: str
    bytes: int
    op_name: str
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "shape": self.shape, "bytes": self.bytes,
                "op_name": self.op_name, "source": self.source}


@dataclass(frozen=True, slots=True)
class Finding:
    """One piece of advice: the rule, what it saw (`evidence`) and what to try."""

    __repr__ = brief_repr

    rule: str
    title: str
    message: str
    suggestion: str
    evidence: tuple[Evidence, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "title": self.title, "message": self.message,
                "suggestion": self.suggestion, "evidence": [e.to_dict() for e in self.evidence]}


class _Context:
    """What the rules read, with the kernel graph indexed by name (each index built when a
    rule first asks: on a large module most rules find nothing to look at)."""

    def __init__(self, module: Module, graph: KernelGraph, df: Dataflow, lr: LiveRanges) -> None:
        self.module = module
        self.graph = graph
        self.df = df
        self.lr = lr

    @cached_property
    def _kernels(self) -> dict[str, Kernel]:
        return {k.name: k for k in self.graph.kernels}

    @cached_property
    def edges_to(self) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for e in self.graph.edges:
            out.setdefault(e.dst, []).append(e)
        return out

    @cached_property
    def edges_from(self) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for e in self.graph.edges:
            out.setdefault(e.src, []).append(e)
        return out

    @cached_property
    def _edges_into_group(self) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for e in self.graph.edges:
            k = self._kernels.get(e.dst)
            if k is not None:
                out.setdefault(k.group, []).append(e)
        return out

    def kernel(self, name: str) -> Kernel | None:
        return self._kernels.get(name)

    def inst(self, k: Kernel) -> Instruction | None:
        """The instruction of kernel `k` (looked up in its own computation)."""
        try:
            return self.module.computation(k.group).by_name.get(k.name)
        except HloModelError:
            return None

    def edges_into_group(self, group: str) -> list[Edge]:
        """Edges into the kernels of computation `group`."""
        return self._edges_into_group.get(group, [])


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    name: str
    title: str
    check: Callable[[_Context], list[Finding]]


def _ev_kernel(k: Kernel) -> Evidence:
    return Evidence(k.name, "kernel", k.shape, k.bytes_out, k.op_name, k.source)


def _ev_inst(i: Instruction, what: str) -> Evidence:
    loc = i.source
    return Evidence(i.name, what, str(i.shape), i.shape.total_byte_size, i.metadata.op_name,
                    str(loc) if loc else None)


# -- the rules ----------------------------------------------------------------


def _reduction_split(ctx: _Context) -> list[Finding]:
    out = []
    for k in ctx.graph.kernels:
        fused = dict(k.fused)
        if not (k.opcode == "reduce" or "reduce" in fused):
            continue
        feeds = [e for e in ctx.edges_to.get(k.name, ()) if e.src_kind == "kernel"
                 and e.kind != "argument"]
        producers = [ctx.kernel(e.src) for e in feeds]
        producers = [p for p in producers if p is not None and p.category == "fusion"
                     and p.group == k.group]
        if not producers:
            continue
        moved = sum(e.bytes for e in feeds)
        out.append(Finding(
            "HS101", "a reduction splits what could be one kernel",
            f"{k.name} reduces in its own kernel and reads {format_bytes(moved)} that "
            f"{', '.join(p.name for p in producers)} wrote to memory first",
            "reductions (jnp.sum, mean, norm) end a fusion: where the reduced axis is short, "
            "write the sum out (x[..., 0] + x[..., 1] + ...) so XLA can fuse it with its "
            "producers",
            tuple([_ev_kernel(k)] + [_ev_kernel(p) for p in producers])))
    return out


def _large_constant(ctx: _Context) -> list[Finding]:
    out = []
    for comp in ctx.module.computations:
        for inst in comp.instructions:
            if inst.opcode == "constant" and inst.shape.total_byte_size >= LARGE_CONSTANT_BYTES:
                users = [u.name for u in inst.users]
                out.append(Finding(
                    "HS102", "a large constant is folded into the program",
                    f"{inst.name} is a {format_bytes(inst.shape.total_byte_size)} constant "
                    f"({inst.shape}) baked into the compiled program"
                    + (f", read by {', '.join(users[:3])}" if users else ""),
                    "pass the array as an argument instead of closing over a NumPy array or "
                    "computing it from trace-time values: constants cost device memory, "
                    "compile time and executable size",
                    (_ev_inst(inst, "constant"),)))
    return out


def _layout_copy(ctx: _Context) -> list[Finding]:
    out = []
    for k in ctx.graph.kernels:
        fused = set(dict(k.fused))
        is_copy = k.category in ("copy", "transpose") or (
            k.category == "fusion" and fused and fused <= _LAYOUT_OPS
            and fused & {"copy", "transpose"})
        if not is_copy:
            continue
        inst = ctx.inst(k)
        if inst is None or not inst.operand_names:
            continue
        src = operand(inst, 0)
        if src.shape.dims == inst.shape.dims and (src.shape.layout == inst.shape.layout):
            continue
        out.append(Finding(
            "HS103", "a copy between kernels changes the layout",
            f"{k.name} only moves {format_bytes(k.bytes_out)} into another layout ({src.shape} -> "
            f"{inst.shape}); it needs its own kernel and a second buffer",
            "transposes and layout changes between library calls (FFTs, matmuls) and fused "
            "kernels cost a full copy: keep the data in the order the consumer wants (choose "
            "the axes you transform over, or transpose once at the start)",
            (_ev_kernel(k),)))
    return out


def _recompute(ctx: _Context) -> list[Finding]:
    out = []
    for k in ctx.graph.kernels:
        if k.category != "fusion" or k.transcendentals:
            continue
        fused = set(dict(k.fused))
        if not fused or not fused <= _CHEAP_OPS or fused & _HEAVY_OPS:
            continue
        inputs = ctx.edges_to.get(k.name, [])
        if any(e.src_kind == "kernel" for e in inputs):
            continue  # computed from other kernels' results: not free to redo
        consumers = [e for e in ctx.edges_from.get(k.name, ()) if e.src_kind == "kernel"
                     and e.dst != "result"]
        if not consumers or k.bytes_out < LARGE_ARRAY_BYTES:
            continue
        readers = list(dict.fromkeys(e.dst for e in consumers))
        # Only a fused kernel can recompute it inside; a library call (an FFT, a matmul)
        # needs its input in memory anyway.
        if any((r := ctx.kernel(name)) is None or r.category != "fusion" for name in readers):
            continue
        out.append(Finding(
            "HS104", "a cheap intermediate is stored instead of recomputed",
            f"{k.name} computes {format_bytes(k.bytes_out)} from "
            + ("nothing but indices and constants" if not inputs else "the arguments")
            + f" with only cheap operations ({', '.join(sorted(fused))}), and writes it to "
            f"memory for {', '.join(readers)}",
            "XLA kept one copy (common-subexpression elimination) where recomputing inside "
            "each kernel would cost no memory: compute it inside the function that uses it "
            "(each use in its own scope), or derive it from jnp.indices so it fuses",
            tuple([_ev_kernel(k)] + [e for r in readers if (kk := ctx.kernel(r))
                                     for e in (_ev_kernel(kk),)])))
    return out


def _loop_state(ctx: _Context) -> list[Finding]:
    out = []
    body_groups = {g.name: g for g in ctx.graph.groups if g.kind == "while body"}
    for name, g in body_groups.items():
        state = [e for e in ctx.edges_into_group(name) if e.src_kind == "loop state"
                 and e.bytes >= LARGE_ARRAY_BYTES]
        if not state:
            continue
        values = list(dict.fromkeys((e.value, e.bytes, e.shape) for e in state))
        kernels = ctx.graph.kernels_in(name)
        total = sum(b for _, b, _ in values)
        out.append(Finding(
            "HS105", "a loop keeps its state in memory between kernels",
            f"the body of {g.caller} runs {len(kernels)} kernel(s) per iteration and reads "
            f"its state ({', '.join(f'{v} {s}' for v, _, s in values)}, {format_bytes(total)}) "
            "from memory each time",
            "if the loop is short and its body cheap, unroll it (a Python for loop, or "
            "lax.fori_loop(..., unroll=True)) so XLA fuses the iterations into one kernel",
            tuple(_ev_kernel(k) for k in kernels)))
    return out


def _side_by_side(ctx: _Context) -> list[Finding]:
    if not ctx.module.is_scheduled:
        return []  # without XLA's schedule, which operations overlap is not known
    peak = ctx.lr.peak_bytes or 0
    big = [v for v in ctx.lr.peak_values if v.size >= max(LARGE_ARRAY_BYTES, peak // 8)
           and launches_work(v.inst)]  # made by a kernel
    if len(big) < 2:
        return []
    # Keep the pairs with no data path between them (neither needs the other).
    big = big[:_MAX_SIDE_BY_SIDE]
    reach = _reachability(ctx, [v.inst.name for v in big])
    independent = [(a, b) for i, a in enumerate(big) for b in big[i + 1:]
                   if b.inst.name not in reach.get(a.inst.name, set())
                   and a.inst.name not in reach.get(b.inst.name, set())]
    if not independent:
        return []
    names = list(dict.fromkeys(x.inst.name for pair in independent for x in pair))
    ks = [k for n in names if (k := ctx.kernel(n))]
    return [Finding(
        "HS106", "independent large operations are alive together at the peak",
        f"at the memory peak ({format_bytes(peak)}), {', '.join(names)} are held together though "
        "none needs another's result; the schedule runs them side by side",
        "compute and consume one before starting the next (e.g. a lax.fori_loop over them, "
        "or jax.lax.optimization_barrier between the steps) so their buffers can be reused",
        tuple(_ev_kernel(k) for k in ks))]


def _reachability(ctx: _Context, starts: list[str]) -> dict[str, set[str]]:
    """What each of `starts` reaches through the edges (one walk each)."""
    succ: dict[str, set[str]] = {}
    for e in ctx.graph.edges:
        succ.setdefault(e.src, set()).add(e.dst)
    out: dict[str, set[str]] = {}
    for n in dict.fromkeys(starts):
        acc: set[str] = set()
        stack = list(succ.get(n, ()))
        while stack:
            m = stack.pop()
            if m in acc:
                continue
            acc.add(m)
            stack.extend(succ.get(m, ()))
        out[n] = acc
    return out


def _donation(ctx: _Context) -> list[Finding]:
    m = ctx.module
    aliased = {p for _o, p, _i, _k in m.input_output_alias}
    donors = [p for p, _idx in m.buffer_donors if p not in aliased]
    if not donors:
        return []
    params = {p.parameter_number: p for p in m.entry.parameters}
    ev = tuple(_ev_inst(params[p], "parameter") for p in donors if p in params)
    return [Finding(
        "HS107", "a donated argument is not reused",
        f"argument(s) {', '.join(str(p) for p in donors)} were donated, but no output "
        "reuses their buffer, so the donation saves nothing",
        "an output can take a donated buffer only with the same shape, dtype and sharding: "
        "return the updated array in the same form, or stop donating it",
        ev)]


def _f64(ctx: _Context) -> list[Finding]:
    wide: list[Instruction] = []
    narrow = 0
    for comp in ctx.df.computations:
        for inst in comp.instructions:
            if inst.opcode in ("tuple", "get-tuple-element", "bitcast"):
                continue  # they only pass arrays on
            for _idx, leaf in inst.shape.leaves():
                if leaf.element_type in ("f64", "c128"):
                    if leaf.num_elements > 1:
                        wide.append(inst)
                elif leaf.element_type in ("f32", "bf16", "f16", "c64"):
                    narrow += 1
    if not wide or not narrow:
        return []
    wide = list(dict.fromkeys(wide))
    total = sum(i.shape.total_byte_size for i in wide)
    return [Finding(
        "HS108", "f64 arrays in an f32 program",
        f"{len(wide)} instruction(s) work in f64 ({format_bytes(total)}), among f32 arrays: "
        f"{', '.join(i.name for i in wide[:4])}",
        "double precision halves throughput and doubles memory (and is very slow on most "
        "GPUs and TPUs): check for a Python float or a NumPy float64 array that promoted the "
        "computation, or an accidental jax.config.update('jax_enable_x64', True)",
        tuple(_ev_inst(i, "kernel" if ctx.kernel(i.name) else "array") for i in wide[:8]))]


def _loop_collective(ctx: _Context) -> list[Finding]:
    out = []
    bodies = {g.name for g in ctx.graph.groups if g.kind == "while body"}
    invariants: dict[str, set[int]] = {}
    for c in ctx.graph.collectives:
        if c.group not in bodies:
            continue
        comp = ctx.module.computation(c.group)
        inst = comp.by_name[c.name]
        if c.group not in invariants:
            invariants[c.group] = _loop_invariant_indices(comp)
        invariant = invariants[c.group]
        srcs = [_param_index(comp.by_name[n]) for n in inst.operand_names]
        if srcs and all(s is not None and s in invariant for s in srcs):
            out.append(Finding(
                "HS109", "a collective in a loop moves the same data every iteration",
                f"{c.name} ({c.opcode}, {format_bytes(c.sent_per_device)} sent per device) runs on "
                "loop state the body never changes, so each iteration repeats the same "
                "communication",
                "hoist it out of the loop: do the all-gather/all-reduce once before the loop "
                "and pass the result in",
                (_ev_inst(inst, "collective"),)))
    return out


def _param_index(inst: Instruction) -> int | None:
    """Which element of the loop state `inst` reads unchanged (through get-tuple-element)."""
    if inst.opcode == "get-tuple-element" and operand(inst, 0).opcode == "parameter":
        return gte_index(inst)
    return None


def _loop_invariant_indices(body: Computation) -> set[int]:
    root = body.root
    if root.opcode != "tuple":
        return set()
    return {i for i, n in enumerate(root.operand_names) if _param_index(body.by_name[n]) == i}


RULES: tuple[Rule, ...] = (
    Rule("HS101", "reduction-split", "a reduction splits what could be one kernel", _reduction_split),
    Rule("HS102", "large-constant", "a large constant is folded into the program", _large_constant),
    Rule("HS103", "layout-copy", "a copy between kernels changes the layout", _layout_copy),
    Rule("HS104", "recompute", "a cheap intermediate is stored instead of recomputed", _recompute),
    Rule("HS105", "loop-state", "a loop keeps its state in memory between kernels", _loop_state),
    Rule("HS106", "side-by-side", "independent large operations are alive together at the peak",
         _side_by_side),
    Rule("HS107", "donation", "a donated argument is not reused", _donation),
    Rule("HS108", "f64", "f64 arrays in an f32 program", _f64),
    Rule("HS109", "loop-collective", "a collective in a loop moves the same data every iteration",
         _loop_collective),
)


def advise(module: Module, *, graph: KernelGraph | None = None, df: Dataflow | None = None,
           lr: LiveRanges | None = None) -> list[Finding]:
    """Every finding of every rule on `module`, in rule order."""
    with paused_gc():
        df = df if df is not None else analyze_dataflow(module)
        lr = lr if lr is not None else compute_live_ranges(df)
        graph = graph if graph is not None else kernel_graph(module, df=df, lr=lr)
        ctx = _Context(module, graph, df, lr)
        out: list[Finding] = []
        for rule in RULES:
            out.extend(rule.check(ctx))
        return out
