"""The advisor's rules about memory and precision: what holds the peak up, and values
kept wider than the program needs.

Independent large values alive together at the peak (HS106), a donation that does not
take (HS107), f64 in an f32 program (HS108), arguments that come back updated without
being donated (HS110), values the forward pass keeps for the backward pass that dominate
the peak (HS111), and bf16/f16 values upcast to f32 by the user's code on the way to a
matmul or a reduction (HS112).
"""

from __future__ import annotations

import re

from .._hlo._module import Instruction
from .._units import format_bytes
from ._advice_context import AdviceContext, ev_inst, ev_kernel, trip_count
from ._findings import Evidence, Finding, place_key
from ._kernels import launches_work
from ._rules_kernels import fused_instructions

__all__ = ["donation_missing", "donation_unused", "f64", "precision_upcast", "remat",
           "side_by_side"]

# HS106 compares at most this many of the largest values at the peak, pairwise.
_MAX_SIDE_BY_SIDE = 16
# HS111: residuals must hold at least this share of the peak to dominate it.
REMAT_SHARE = 0.25
_NARROW = frozenset({"bf16", "f16"})
_ARG = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:$|[\[.])")


# -- HS106 -----------------------------------------------------------------------------

def side_by_side(ctx: AdviceContext) -> list[Finding]:
    """Three or more large temporaries (an eighth of the peak or more) made by kernels
    with no data path between them are alive together at the peak: computed one chain
    after another, each folded into the result before the next starts, two are alive at
    a time (an accumulator and the chain at hand), so the others' memory is saved.  Two
    alone save nothing (the step that combines them needs both).  Scheduled modules
    only: without XLA's schedule which values overlap is not known."""
    if not ctx.module.is_scheduled or not ctx.peak:
        return []
    big = [v for v in ctx.lr.peak_values if v.size >= ctx.peak // 8
           and launches_work(v.inst) and ctx.value_kind(v) == "temporary"]
    if len(big) < 2:
        return []
    big = big[:_MAX_SIDE_BY_SIDE]
    reach = _reachability(ctx, [v.inst.name for v in big])
    # The largest values that are independent of one another, largest first: folded
    # into the result one chain after another, two of them are alive at a time.
    chosen: list = []
    for v in big:
        if all(v.inst.name not in reach.get(c.inst.name, set())
               and c.inst.name not in reach.get(v.inst.name, set()) for c in chosen):
            chosen.append(v)
    if len(chosen) < 3 or _one_collective_reads_all(ctx, chosen):
        return []
    names = [v.inst.name for v in chosen]
    saved = sum(v.size for v in chosen[2:])
    ks = [k for n in names if (k := ctx.kernel(n))]
    return [Finding(
        "HS106", "independent large temporaries are alive together at the peak",
        f"at the memory peak ({format_bytes(ctx.peak)}), {len(names)} results of independent "
        f"chains ({', '.join(names)}) are held together though none needs another's: the "
        "schedule runs the chains side by side",
        "run the chains one after another, each folded into the result before the next "
        "starts: a lax.fori_loop (or lax.map) over them does it; a "
        "jax.lax.optimization_barrier between the steps may be scheduled away (XLA's CPU "
        "backend in jax 0.10 does), so check the peak after the change",
        tuple(ev_kernel(k) for k in ks), ctx.saving(peak=saved),
        place_key(ks[0].op_name if ks else "", ks[0].source if ks else None))]


def _one_collective_reads_all(ctx: AdviceContext, values: list) -> bool:  # type: ignore[type-arg]
    """Values held for one combined collective (XLA's combiner merges a step's
    reduce-scatters into one) wait for it, not for the schedule."""
    common = set.intersection(*({e.dst for e in ctx.edges_from.get(v.inst.name, ())}
                                for v in values))
    names = {c.name for c in ctx.graph.collectives}
    return bool(common & names)


def _reachability(ctx: AdviceContext, starts: list[str]) -> dict[str, set[str]]:
    """What each of `starts` reaches through the edges (one walk each), an optimization
    barrier ordering everything it takes before everything that reads it."""
    succ: dict[str, set[str]] = {}
    for e in ctx.graph.edges:
        succ.setdefault(e.src, set()).add(e.dst)
    for comp in ctx.module.computations:
        for inst in comp.instructions:
            if inst.opcode == "opt-barrier":
                after = _kernels_after(ctx, inst)
                for k in _kernels_before(ctx, inst):
                    succ.setdefault(k, set()).update(after)
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


_PASS = frozenset({"tuple", "get-tuple-element", "bitcast", "opt-barrier"})


def _kernels_before(ctx: AdviceContext, inst: Instruction) -> set[str]:
    out: set[str] = set()
    stack = list(inst.operands)
    while stack:
        i = stack.pop()
        if ctx.kernel(i.name) is not None:
            out.add(i.name)
        elif i.opcode in _PASS:
            stack.extend(i.operands)
    return out


def _kernels_after(ctx: AdviceContext, inst: Instruction) -> set[str]:
    out: set[str] = set()
    stack = list(inst.users)
    while stack:
        i = stack.pop()
        if ctx.kernel(i.name) is not None:
            out.add(i.name)
        elif i.opcode in _PASS:
            stack.extend(i.users)
    return out


# -- HS107 and HS110: donation ---------------------------------------------------------

def donation_unused(ctx: AdviceContext) -> list[Finding]:
    m = ctx.module
    aliased = {p for _o, p, _i, _k in m.input_output_alias}
    donors = [p for p, _idx in m.buffer_donors if p not in aliased]
    if not donors:
        return []
    params = {p.parameter_number: p for p in m.entry.parameters}
    ev = tuple(ev_inst(params[p], "parameter") for p in donors if p in params)
    size = sum(params[p].shape.total_byte_size for p in donors if p in params)
    return [Finding(
        "HS107", "a donated argument is not reused",
        f"argument(s) {', '.join(str(p) for p in donors)} were donated, but no output "
        "reuses their buffer, so the donation saves nothing",
        "an output can take a donated buffer only with the same shape, dtype and sharding: "
        "return the updated array in the same form, or stop donating it",
        ev, ctx.saving(peak=size), "donors")]


def donation_missing(ctx: AdviceContext) -> list[Finding]:
    """Several arguments come back updated, in the same shape and type, from an operation
    that reads them (a training step's parameters and optimizer state), and none is
    donated: each output needs memory of its own beside its argument."""
    m = ctx.module
    if m.input_output_alias or m.buffer_donors:
        return []  # the user donates: HS107 says whether it takes
    entry = m.entry
    root = entry.root
    outputs = list(root.operands) if root.opcode == "tuple" else [root]
    params = [p for p in entry.parameters if p.shape.is_array]
    free = {p.name: p for p in params}
    pairs: list[tuple[Instruction, Instruction]] = []
    for out in outputs:
        if not out.shape.is_array or out.opcode == "parameter":
            continue
        reads = _near(out)
        for name in list(free):
            p = free[name]
            if name in reads and _same_form(p, out):
                pairs.append((p, out))
                del free[name]
                break
    if len(pairs) < 2:
        return []
    size = sum(o.shape.total_byte_size for _, o in pairs)
    nums = ", ".join(str(p.parameter_number) for p, _ in pairs[:8]) + (
        ", ..." if len(pairs) > 8 else "")
    # JAX names each parameter by its argument's path (params[0]['w1']): the arguments.
    names = list(dict.fromkeys(m.group(1) for p, _ in pairs
                               if (m := _ARG.match(p.metadata.op_name))))
    how = (f"jax.jit(step, donate_argnames=({', '.join(repr(n) for n in names)},))"
           if names else "jax.jit(step, donate_argnums=...) (or donate_argnames)")
    return [Finding(
        "HS110", "updated arguments are not donated",
        f"{len(pairs)} arguments (parameters {nums}) come back updated in the same shape and "
        f"type, {format_bytes(size)} in all, and none is donated: XLA keeps each output in "
        "memory of its own beside the argument it replaces",
        f"donate them: {how}, when the caller does not use the old values afterwards (a "
        "training step's parameters and optimizer state)",
        tuple(ev_inst(p, "parameter") for p, _ in pairs[:6]), ctx.saving(peak=size),
        "donation")]


def _near(inst: Instruction) -> set[str]:
    """The instructions `inst` reads, looking through bitcasts, copies, and the copies and
    asynchronous slices into a TPU's on-chip memory (an update reads its parameter
    directly; a gradient reads activations)."""
    seen: set[str] = set()
    stack = list(inst.operands)
    while stack:
        o = stack.pop()
        if o.name in seen:
            continue
        seen.add(o.name)
        if o.opcode in ("bitcast", "copy", "copy-start", "copy-done", "reshape",
                        "async-start", "async-done", "custom-call"):
            stack.extend(o.operands)
    return seen


def _same_form(p: Instruction, out: Instruction) -> bool:
    a, b = p.shape, out.shape
    return a.element_type == b.element_type and a.dims == b.dims


# -- HS108 -----------------------------------------------------------------------------

def f64(ctx: AdviceContext) -> list[Finding]:
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
    at_peak = sum(v.size for v in ctx.lr.peak_values
                  if v.shape.is_array and v.shape.element_type in ("f64", "c128"))
    return [Finding(
        "HS108", "f64 arrays in an f32 program",
        f"{len(wide)} instruction(s) work in f64 ({format_bytes(total)}), among f32 arrays: "
        f"{', '.join(i.name for i in wide[:4])}",
        "double precision halves throughput and doubles memory (and is very slow on most "
        "GPUs and TPUs): check for a Python float or a NumPy float64 array that promoted the "
        "computation, or an accidental jax.config.update('jax_enable_x64', True)",
        tuple(ev_inst(i, "kernel" if ctx.kernel(i.name) else "array") for i in wide[:8]),
        ctx.saving(peak=at_peak // 2, traffic=total), "f64")]


# -- HS111 -----------------------------------------------------------------------------

def remat(ctx: AdviceContext) -> list[Finding]:
    """Values the forward pass made (op_name under ``jvp(``) that the backward pass
    (``transpose(``) reads hold a quarter of the peak or more: rematerializing them
    (jax.checkpoint) trades their memory for recomputing the forward."""
    if not ctx.peak:
        return []
    residuals = []
    seen: set[int] = set()
    for v in ctx.lr.peak_values:
        buf = ctx.df.buffer_of[v.id]
        if buf.id in seen or ctx.value_kind(v) != "temporary":
            continue
        seen.add(buf.id)
        made = [w for w in buf.values if "jvp(" in w.inst.metadata.op_name
                and "transpose(" not in w.inst.metadata.op_name]
        if made and any("transpose(" in u.metadata.op_name
                        for w in buf.values for u, _n, _i in ctx.df.uses_of(w)):
            residuals.append(v)
    total = sum(v.size for v in residuals)
    if total < REMAT_SHARE * ctx.peak:
        return []
    loops = [w.inst for v in residuals for w in ctx.df.buffer_of[v.id].values
             if w.inst.opcode == "while"]
    layers = max((trip_count(w) for w in loops), default=1)
    per_layer = (f", {format_bytes(total // layers)} per iteration of a {layers}-step loop"
                 if layers > 1 else "")
    ev = [Evidence(v.label, "array", str(v.shape), v.size, v.inst.metadata.op_name,
                   str(v.inst.source) if v.inst.source else None)
          for v in sorted(residuals, key=lambda v: (-v.size, v.label))[:6]]
    return [Finding(
        "HS111", "values saved for the backward pass dominate the peak",
        f"{len(residuals)} value(s) the forward pass saves for the backward pass hold "
        f"{format_bytes(total)} at the peak ({100 * total / ctx.peak:.0f}% of "
        f"{format_bytes(ctx.peak)}){per_layer}",
        "rematerialize: wrap the layer (the scan body) in jax.checkpoint, with a policy "
        "such as jax.checkpoint_policies.dots_with_no_batch_dims_saveable (keeps the "
        "matmul results) or nothing_saveable (keeps only the layer inputs); the backward "
        "pass then recomputes the forward instead of holding it",
        tuple(ev), ctx.saving(peak=total), "residuals")]


# -- HS112 -----------------------------------------------------------------------------

def precision_upcast(ctx: AdviceContext) -> list[Finding]:
    """The user's code converts bf16/f16 to f32 (op_name ``convert_element_type``) on the
    way to a matmul, a convolution or a reduction: the f32 copy costs memory traffic, and
    on a GPU or TPU the matmul runs at the f32 rate.  Quiet on a CPU module, where XLA
    computes bf16 matmuls in f32 itself (compile for a target to see it)."""
    if ctx.platform == "cpu":
        return []  # XLA's CPU backend computes bf16 matmuls in f32 itself: nothing to save
    out = []
    for k in ctx.graph.kernels:
        inst = ctx.inst(k)
        if inst is None:
            continue
        inner = list(fused_instructions(inst))
        ups = [c for c in inner if c.opcode == "convert" and c.operands
               and c.operands[0].shape.element_type in _NARROW
               and c.shape.element_type == "f32"
               and c.metadata.op_name.endswith("convert_element_type")]
        if not ups:
            continue
        heavy_here = any(i.opcode in ("dot", "convolution", "reduce") for i in inner)
        readers = [ctx.kernel(e.dst) for e in ctx.edges_from.get(k.name, ())]
        heavy_next = [r for r in readers if r is not None and (
            r.opcode in ("dot", "convolution") or dict(r.fused).keys() & {"dot", "convolution",
                                                                          "reduce"})]
        if not heavy_here and not heavy_next:
            continue
        runs = ctx.runs(k.group)
        wide = sum(c.shape.total_byte_size for c in ups)
        traffic = (wide + wide // 2) * runs if not heavy_here else 0
        flops = sum(r.flops for r in heavy_next) + (k.flops if heavy_here else 0)
        dev = ctx.device
        extra = flops * (1 / dev.peak_flops("f32") - 1 / dev.peak_flops("bf16")) * runs \
            if dev.peak_flops("f32") and dev.peak_flops("bf16") else 0.0
        c = ups[0]
        out.append(Finding(
            "HS112", "bf16/f16 values are upcast to f32 on the way to a matmul or reduction",
            f"{k.name} converts {c.operands[0].shape.element_type} {c.operands[0].shape} to "
            f"f32 ({format_bytes(wide)}) for "
            + ("its own matmul or reduction" if heavy_here
               else ", ".join(r.name for r in heavy_next[:3])),
            "keep the operands in bf16 and ask for an f32 result instead: jnp.dot(a, b, "
            "preferred_element_type=jnp.float32), or jnp.sum(x, dtype=jnp.float32) for a "
            "reduction; the matmul then runs at the bf16 rate and no f32 copy is written",
            (ev_inst(c, "array"), ev_kernel(k)),
            ctx.saving(traffic=traffic, seconds=max(0.0, extra)),
            place_key(c.metadata.op_name, str(c.source or ""), str(c.shape))))
    return out
