"""The advisor's rules about sharded training steps: what FSDP and gradient accumulation
cost when the program is not written for them.

Full (unsharded) weights or gradients of several layers alive together at the peak,
as FSDP gives without a scan over layers (HS116), and a gradient all-reduced once per
microbatch inside an accumulation loop instead of once after it (HS122).
"""

from __future__ import annotations

from .._hlo._module import Computation, Instruction
from .._units import format_bytes
from ._advice_context import AdviceContext, ev_inst, trip_count
from ._findings import Finding, place_key
from ._hardware import done_of, is_collective_start
from ._rules_kernels import gathered_weight
from ._walk import gte_index

__all__ = ["accumulated_collective", "gathered_weights"]

# HS116: at least this many full values at the peak, saving this share of it.
MIN_GATHERED = 3
MIN_GATHERED_SHARE = 0.10
# (a transpose too: autodiff's gradient of x @ w comes transposed, and the sum of
# transposes is the transpose of the sum)
_ACCUMULATE = frozenset({"add", "convert", "bitcast", "reshape", "copy", "multiply",
                         "divide", "broadcast", "constant", "parameter", "tuple",
                         "transpose"})
_THROUGH = frozenset({"bitcast", "copy", "convert", "reshape"})


def _collective(inst: Instruction) -> str:
    """The collective `inst` runs (``all-gather`` for an ``all-gather-done`` or an async
    pair wrapping one), or ``""``."""
    op = inst.opcode
    if op in ("async-start", "async-update", "async-done"):
        start = inst
        while start.opcode != "async-start" and start.operand_names:
            start = start.operands[0]
        wrapped = start.called_computations
        return wrapped[0].root.opcode if wrapped and wrapped[0].instructions else ""
    return op.removesuffix("-start").removesuffix("-done")


# -- HS116 -----------------------------------------------------------------------------

def gathered_weights(ctx: AdviceContext) -> list[Finding]:
    """Full (unsharded) values of several layers alive together at the peak: all-gathers'
    results (weights gathered for the layers) and values waiting for a reduce-scatter
    (full gradients), as FSDP without a scan over layers gives when XLA combines the
    layers' collectives.  A scan gathers one layer's weights at a time."""
    if not ctx.peak:
        return []
    gathered, waiting = [], []
    for v in ctx.lr.peak_values:
        if v.size < ctx.peak / 64:
            continue
        if not v.inst.opcode.endswith("-start") and (
                _collective(v.inst) == "all-gather" or gathered_weight(v.inst)):
            # (XLA's copy of a gathered weight into the layout its matmul reads counts:
            # it is the full weight, held in its place.)
            gathered.append(v)
        elif any(_collective(u) == "reduce-scatter" for u in v.inst.users):
            waiting.append(v)
    full = sorted(gathered + waiting, key=lambda v: -v.size)
    if len(full) < MIN_GATHERED:
        return []
    saved = sum(v.size for v in full[2:])
    if saved < MIN_GATHERED_SHARE * ctx.peak:
        return []
    total = sum(v.size for v in full)
    what = []
    if gathered:
        what.append(f"{len(gathered)} gathered by all-gathers "
                    f"({format_bytes(sum(v.size for v in gathered))})")
    if waiting:
        what.append(f"{len(waiting)} waiting for a reduce-scatter "
                    f"({format_bytes(sum(v.size for v in waiting))})")
    fix = ("scan over the layers (lax.scan over stacked weights) so XLA gathers one "
           "layer's weights at a time and reduce-scatters each layer's gradient as it is "
           "ready")
    if ctx.platform == "gpu":
        fix += (", with XLA_FLAGS='--xla_gpu_enable_pipelined_all_gather=true "
                "--xla_gpu_enable_pipelined_reduce_scatter=true "
                "--xla_gpu_enable_while_loop_double_buffering=true' to overlap them; or "
                "lower XLA's combine thresholds (--xla_gpu_all_gather_combine_threshold_bytes, "
                "--xla_gpu_reduce_scatter_combine_threshold_bytes) so it does not gather "
                "or reduce every layer at once")
    else:
        fix += "; or gather each layer's weights just before it uses them"
    first = full[0].inst
    return [Finding(
        "HS116", "full weights of several layers are alive together",
        f"{len(full)} full (unsharded) arrays of {format_bytes(total)} are alive together "
        f"at the {format_bytes(ctx.peak)} peak: {' and '.join(what)}; one or two layers' "
        f"at a time would hold {format_bytes(total - saved)}",
        fix, tuple(ev_inst(v.inst, "array") for v in full[:4]), ctx.saving(peak=saved),
        place_key("", None, "gathered", str(len(full))))]


# -- HS122 -----------------------------------------------------------------------------

def accumulated_collective(ctx: AdviceContext) -> list[Finding]:
    """An all-reduce or reduce-scatter in a loop body whose result is only added into
    the loop's state (gradient accumulation over microbatches reducing every
    microbatch's gradient): reduced once after the loop, the sum is the same.  Also
    all-reduced values only added together outside loops (`summed_collectives`)."""
    out = summed_collectives(ctx)
    moved = {c.name: c.sent_per_device or c.bytes for c in ctx.graph.collectives}
    for g in ctx.graph.groups:
        if g.kind != "while body":
            continue
        comp = ctx.module.computation(g.name)
        caller = ctx.module.computation(g.parent).by_name.get(g.caller)
        n = trip_count(caller) if caller is not None else 1
        if n < 2 or comp.root.opcode != "tuple":
            continue
        for inst in comp.instructions:
            what = _collective(inst)
            if what not in ("all-reduce", "reduce-scatter") or inst.opcode.endswith("-done") \
                    or inst.opcode == "async-done":
                continue
            result = done_of(inst) if is_collective_start(inst) or \
                inst.opcode == "async-start" else inst
            if result is None or not moved.get(inst.name) or _reads_state_only(inst) \
                    or not _only_accumulated(comp, result):
                continue
            nbytes = moved[inst.name]
            implicit = _from_grad_in_shard_map(inst)
            out.append(Finding(
                "HS122", "a collective reduces every iteration what is only summed",
                f"{what} {inst.name} ({format_bytes(nbytes)} per device) runs in each of "
                f"the {n} iterations of {g.caller}, and its result is only added into "
                "the loop's state: reducing the sum once after the loop gives the same "
                f"result with {n - 1} fewer {what}s ({format_bytes(nbytes * (n - 1))} per "
                "device less over the links)" + (_IMPLICIT if implicit else ""),
                _IMPLICIT_FIX if implicit else
                "accumulate locally and reduce once after the loop: in shard_map, psum the "
                "accumulated gradients after the scan; with jit's sharding, accumulate "
                "per-device gradients (shard_map over the step, or an accumulator sharded "
                "like the batch) and reduce them after the loop (the gradient of the "
                "summed loss over a scan is reduced in every step all the same)",
                (ev_inst(inst, "collective"),),
                ctx.saving(link_bytes=nbytes * (n - 1) * ctx.runs(g.parent)),
                place_key(inst.metadata.op_name, str(inst.source or ""), str(inst.shape))))
    return out


_IMPLICIT = (
    "; no psum in the code makes it: it is the gradient's, from jax.grad inside shard_map "
    "of an argument replicated over the mesh axis (JAX reduces such a gradient where it "
    "is taken: the transpose of the argument's implicit pvary), so a psum written after "
    "the loop is a second reduction, not this one")
_IMPLICIT_FIX = (
    "take the gradient with respect to a per-device copy, "
    "`wv = jax.lax.pcast(w, AXIS, to='varying')` (and start the accumulator from "
    "`jnp.zeros_like(wv)`), so each device keeps its own gradient in the loop, and psum "
    "the accumulated gradient once after it")


def _from_grad_in_shard_map(inst: Instruction) -> bool:
    """Whether a collective is one JAX's autodiff made inside shard_map: its op_name is
    the transpose of the differentiated function's implicit pvary (``.../transpose(jvp(
    ...))/psum_invariant``), not a psum the user wrote (``.../psum``)."""
    name = inst.metadata.op_name
    return ("shard_map" in name and "transpose(" in name
            and name.rsplit("/", 1)[-1].startswith("psum_invariant"))


def summed_collectives(ctx: AdviceContext) -> list[Finding]:
    """Two or more all-reduce results (of one combined all-reduce or several) that a
    kernel only adds together: the all-reduce of the sum is the same, one reduction
    instead of several (a Python loop over microbatches that psums each gradient before
    adding it: the unrolled form of what `accumulated_collective` finds in a loop)."""
    # result -> (collective, its bytes, what it reduced)
    sources: dict[str, tuple[Instruction, int, Instruction]] = {}
    moved = {c.name: c.sent_per_device or c.bytes for c in ctx.graph.collectives}
    for comp in ctx.module.computations:
        for inst in comp.instructions:
            if _collective(inst) != "all-reduce" or inst.opcode.endswith("-done") \
                    or inst.opcode == "async-done" or not moved.get(inst.name):
                continue
            result = done_of(inst) if is_collective_start(inst) or \
                inst.opcode == "async-start" else inst
            if result is None:
                continue
            leaves = [u for u in result.users if u.opcode == "get-tuple-element"] \
                if result.shape.is_tuple else [result]
            total = sum(x.shape.total_byte_size for x in leaves) or 1
            for x in leaves:
                k = gte_index(x) if x is not result else 0
                if 0 <= k < len(inst.operands):
                    sources[x.name] = (inst, moved[inst.name] * x.shape.total_byte_size
                                       // total, _past(inst.operands[k]))
    if len(sources) < 2:
        return []
    out = []
    seen: set[str] = set()
    for comp in ctx.module.computations:
        for inst in comp.instructions:
            if inst.opcode not in ("add", "fusion") or inst.name in seen:
                continue
            read = [(n, o) for n, o in enumerate(inst.operands)
                    if (src := _source_of(o)) is not None and src.name in sources]
            if len(read) < 2 or not _only_summed(inst, [n for n, _ in read]):
                continue
            seen.add(inst.name)
            parts = [sources[_source_of(o).name] for _, o in read]  # type: ignore[union-attr]
            # Copies of one computation (a microbatch's gradient, unrolled), not two
            # different values that happen to be reduced and added.
            made = [m for _, _, m in parts]
            if len({id(m) for m in made}) < len(made) or len(
                    {(m.opcode, m.metadata.op_name, str(m.source or "")) for m in made}) > 1:
                continue
            wasted = sum(b for _, b, _ in parts) - max(b for _, b, _ in parts)
            first = parts[0][0]
            out.append(Finding(
                "HS122", "a collective reduces every iteration what is only summed",
                f"{inst.name} adds {len(read)} all-reduced values together "
                f"({', '.join(dict.fromkeys(c.name for c, _, _ in parts))}): the all-reduce "
                f"of their sum is the same, with {format_bytes(wasted)} per device less "
                "over the links",
                "add first and reduce once: accumulate the microbatches' gradients "
                "locally (a lax.scan or a Python loop adding them) and psum the sum",
                (ev_inst(first, "collective"),),
                ctx.saving(link_bytes=wasted * ctx.runs(comp.name)),
                place_key(first.metadata.op_name, str(first.source or ""),
                          str(inst.shape))))
    return out


def _source_of(inst: Instruction) -> Instruction | None:
    inst = _past(inst)
    return inst if inst.opcode in ("get-tuple-element", "all-reduce", "all-reduce-done",
                                   "async-done") else None


def _only_summed(inst: Instruction, operands: list[int]) -> bool:
    """Whether operands `operands` of `inst` (an add, or a fusion) are only added to
    one another: each one's readers, past moves, are additions of such values."""
    if inst.opcode == "add":
        return True
    if not inst.called_computations:
        return False
    params = {i.parameter_number: i for i in inst.called_computations[0].instructions
              if i.opcode == "parameter"}
    summed: set[int] = {id(params[n]) for n in operands if n in params}
    if len(summed) < 2:
        return False
    changed = True
    while changed:  # adds of summed values are summed values too
        changed = False
        for i in inst.called_computations[0].instructions:
            if id(i) in summed:
                continue
            if (i.opcode == "add" and all(id(_past(o)) in summed for o in i.operands)) \
                    or (i.opcode in _THROUGH and i.operands and id(i.operands[0]) in summed):
                summed.add(id(i))
                changed = True
    for n in operands:
        p = params.get(n)
        if p is None or any(u.opcode not in _THROUGH and not (
                u.opcode == "add" and id(u) in summed) for u in _through(p)):
            return False
    return True


def _past(inst: Instruction) -> Instruction:
    while inst.opcode in _THROUGH and inst.operands:
        inst = inst.operands[0]
    return inst


def _reads_state_only(inst: Instruction) -> bool:
    """Whether every operand is loop state read as it is (HS109's case, not this one)."""
    return all(o.opcode == "get-tuple-element" and o.operands[0].opcode == "parameter"
               for o in inst.operands)


def _only_accumulated(body: Computation, result: Instruction) -> bool:
    """Whether every part of `result` flows, through bitcasts, copies and converts, only
    into additions to the loop state that go straight back to the loop state."""
    leaves = list(result.users) if result.shape.is_tuple else [result]
    if not leaves or any(x.opcode == "get-tuple-element" and x.computation is not body
                         for x in leaves):
        return False
    root = body.root
    for leaf in leaves:
        if result.shape.is_tuple and leaf.opcode != "get-tuple-element":
            return False
        consumers = _through(leaf)
        if not consumers or not all(_accumulates(c, root, body) for c in consumers):
            return False
    return True


def _through(inst: Instruction) -> list[Instruction]:
    out = []
    for u in inst.users:
        if u.opcode in _THROUGH:
            out.extend(_through(u))
        else:
            out.append(u)
    return out


def _accumulates(inst: Instruction, root: Instruction, body: Computation) -> bool:
    """`inst` adds a loop-state element and its result goes back into the state, and
    nothing else in the body reads that element: an accumulator.  (A residual stream,
    `x + all_reduce(h @ w2)` carried to the next layer, is added into the state too, but
    the next iteration computes with it: reducing once after the loop is not the same.)"""
    if inst.opcode == "fusion":
        ops = {i.opcode for c in inst.called_computations for i in c.instructions}
        if "add" not in ops or not ops <= _ACCUMULATE:
            return False
    elif inst.opcode != "add":
        return False
    outs = [inst] + [u for u in inst.users if u.opcode == "get-tuple-element"]
    slots = {i for i, name in enumerate(root.operand_names)
             if any(name == o.name for o in outs)}
    if not slots or any(u is not root and u.opcode != "get-tuple-element"
                        for u in inst.users):
        return False
    read = set()
    for o in inst.operands:
        while o.opcode in _THROUGH and o.operand_names:
            o = o.operands[0]
        if o.opcode == "get-tuple-element" and o.operands[0].opcode == "parameter":
            read.add(gte_index(o))
    kept = read & slots
    if not kept:
        return False
    for param in body.instructions:
        if param.opcode != "parameter":
            continue
        for g in param.users:
            if g.opcode == "get-tuple-element" and gte_index(g) in kept and any(
                    c is not inst and c is not root for c in _through(g)):
                return False
    return True
