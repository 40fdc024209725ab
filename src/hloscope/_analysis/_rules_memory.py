"""The advisor's rules about memory and precision: what holds the peak up, and values
kept wider than the program needs.

Independent large values alive together at the peak (HS106), a donation that does not
take (HS107), f64 in an f32 program (HS108), arguments that come back updated without
being donated (HS110), values the forward pass keeps for the backward pass that dominate
the peak (HS111), and bf16/f16 values upcast to f32 by the user's code on the way to a
matmul or a reduction (HS112).
"""

from __future__ import annotations

import math
import re

from .._hlo._module import Computation, Instruction
from .._hlo._shape import Shape
from .._units import format_bytes
from ._advice_context import AdviceContext, ev_inst, ev_kernel, trip_count
from ._findings import Evidence, Finding, place_key
from ._dataflow import Value
from ._kernels import launches_work
from ._walk import gte_index, operand
from ._rules_kernels import fused_instructions, gathered_weight
from ._rules_loops import _selected_positions

__all__ = ["donation_missing", "donation_unused", "f64", "precision_upcast", "remat",
           "side_by_side", "upcast_note"]

# HS106 compares at most this many of the largest values at the peak, pairwise.
_MAX_SIDE_BY_SIDE = 16
# HS111: residuals must hold at least this share of the peak to dominate it.
REMAT_SHARE = 0.25
# ... and 40% where the program uses jax.checkpoint already.
CHECKPOINTED_SHARE = 0.4
_NARROW = frozenset({"bf16", "f16"})
_ARG = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:$|[\[.])")


# -- HS106 -----------------------------------------------------------------------------

def side_by_side(ctx: AdviceContext) -> list[Finding]:
    """Three or more large temporaries (an eighth of the peak or more; not a constant XLA
    broadcast into memory, not a value waiting for a collective nor one a collective
    made: weights gathered together are HS116's) made by kernels with no
    data path between them are alive together at the peak: computed one chain
    after another, each folded into the result before the next starts, two are alive at
    a time (an accumulator and the chain at hand), so the others' memory is saved.  Two
    alone save nothing (the step that combines them needs both).  Scheduled modules
    only: without XLA's schedule which values overlap is not known."""
    if not ctx.module.is_scheduled or not ctx.peak:
        return []
    bodies = {c.name for c in ctx.df.computations} - {ctx.module.entry.name}
    # Values made inside a loop (a scan's stacked outputs written in place every step)
    # are one recurrence's state: no schedule runs them one after another.
    collectives = {c.name for c in ctx.graph.collectives}
    big = [v for v in ctx.lr.peak_values if v.size >= ctx.peak // 8
           and launches_work(v.inst) and ctx.value_kind(v) == "temporary"
           and _computation_of(ctx, v.inst) not in bodies
           and _computed(ctx, v.inst.name)
           and v.inst.name not in collectives and not v.inst.opcode.endswith("-done")
           and not {e.dst for e in ctx.edges_from.get(v.inst.name, ())} & collectives]
    if len(big) < 3:
        return []  # (three chains or more are needed below: see `chains`)
    big = big[:_MAX_SIDE_BY_SIDE]
    reach = _reachability(ctx, [v.inst.name for v in big])
    # The largest values that are independent of one another, largest first: folded
    # into the result one chain after another, two of them are alive at a time.
    chosen: list = []
    for v in big:
        # A multi-output kernel's results (a sort's keys and indices) are one chain's.
        if all(v.inst.name != c.inst.name and v.inst.name not in reach.get(c.inst.name, set())
               and c.inst.name not in reach.get(v.inst.name, set()) for c in chosen):
            chosen.append(v)
    # Results one matmul reads together (attention's q, k and v in one fused kernel, the
    # two operands of a product) are needed at the same moment: one chain's, not chains
    # that could be folded into the result one after another.  (Results only stacked or
    # combined elementwise can be.)
    chains = _read_together(ctx, chosen)
    if len(chains) < 3:
        return []
    names = [v.inst.name for v in chosen]
    saved = sum(sorted((sum(v.size for v in c) for c in chains), reverse=True)[2:])
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


def _read_together(ctx: AdviceContext, values: list) -> list[list]:  # type: ignore[type-arg]
    """`values` in groups: those a matmul's (or convolution's) kernel reads together are
    one group."""
    root = {v.inst.name: v.inst.name for v in values}

    def find(n: str) -> str:
        while root[n] != n:
            n = root[n]
        return n
    readers: dict[str, list[str]] = {}
    for v in values:
        for e in ctx.edges_from.get(v.inst.name, ()):
            readers.setdefault(e.dst, []).append(v.inst.name)
    for name, read in readers.items():
        r = ctx.inst(ctx.kernel(name)) if ctx.kernel(name) is not None else None
        if r is None or not any(
                i.opcode in ("dot", "convolution") or i.opcode == "custom-call" and any(
                    t in i.custom_call_target.lower() for t in ("gemm", "matmul", "conv"))
                for i in fused_instructions(r)):
            continue
        for n in read[1:]:
            root[find(n)] = find(read[0])
    out: dict[str, list] = {}  # type: ignore[type-arg]
    for v in values:
        out.setdefault(find(v.inst.name), []).append(v)
    return list(out.values())


def _computed(ctx: AdviceContext, name: str) -> bool:
    """Whether kernel `name` computes on arguments or other kernels' results (a constant
    XLA broadcast into memory is no chain of the user's)."""
    return any(e.src_kind in ("kernel", "argument", "loop state")
               for e in ctx.edges_to.get(name, ()))


def _computation_of(ctx: AdviceContext, inst: Instruction) -> str:
    k = ctx.kernel(inst.name)
    return k.group if k is not None else ctx.module.entry.name


def _reachability(ctx: AdviceContext, starts: list[str]) -> dict[str, set[str]]:
    """What each of `starts` reaches through the edges (one walk each), an optimization
    barrier ordering everything it takes before everything that reads it."""
    barrier: dict[str, set[str]] = {}  # kernel -> what a barrier orders after it
    for comp in ctx.module.computations:
        for inst in comp.instructions:
            if inst.opcode == "opt-barrier":
                after = _kernels_near(ctx, inst, after=True)
                for k in _kernels_near(ctx, inst, after=False):
                    barrier.setdefault(k, set()).update(after)
    edges_from = ctx.edges_from
    out: dict[str, set[str]] = {}
    for n in dict.fromkeys(starts):
        acc: set[str] = set()
        stack = [e.dst for e in edges_from.get(n, ())]
        stack.extend(barrier.get(n, ()))
        while stack:
            m = stack.pop()
            if m in acc:
                continue
            acc.add(m)
            stack.extend(e.dst for e in edges_from.get(m, ()))
            stack.extend(barrier.get(m, ()))
        out[n] = acc
    return out


_PASS = frozenset({"tuple", "get-tuple-element", "bitcast", "opt-barrier"})


def _kernels_near(ctx: AdviceContext, inst: Instruction, after: bool) -> set[str]:
    """The kernels `inst` reads (or, `after`, that read it), through tuples,
    get-tuple-elements, bitcasts and other barriers."""
    out: set[str] = set()
    stack = list(inst.users if after else inst.operands)
    while stack:
        i = stack.pop()
        if ctx.kernel(i.name) is not None:
            out.add(i.name)
        elif i.opcode in _PASS:
            stack.extend(i.users if after else i.operands)
    return out


# -- HS107 and HS110: donation ---------------------------------------------------------

def donation_unused(ctx: AdviceContext) -> list[Finding]:
    """Arguments donated (buffer donors in the module, or donated to JAX, which drops a
    donation no output can take before XLA sees it: `Module.donated`) that no output
    aliases: the donation saves nothing, and the caller's arrays are gone all the same."""
    m = ctx.module
    aliased = {p for _o, p, _i, _k in m.input_output_alias}
    donors = sorted(({p for p, _idx in m.buffer_donors} | set(m.donated)) - aliased)
    if not donors:
        return []
    params = {p.parameter_number: p for p in m.entry.parameters}
    ev = tuple(ev_inst(params[p], "parameter") for p in donors if p in params)
    size = sum(params[p].shape.total_byte_size for p in donors if p in params)
    return [Finding(
        "HS107", "a donated argument is not reused",
        f"argument(s) {', '.join(str(p) for p in donors)} were donated, but no output "
        "reuses their buffer, so the donation saves nothing"
        + (" (JAX dropped it before XLA saw it: no output has their shape and type; it "
           "warns 'Some donated buffers were not usable')"
           if set(donors) - {p for p, _idx in m.buffer_donors} else ""),
        "an output can take a donated buffer only with the same shape, dtype and sharding: "
        "return the updated array in the same form, or stop donating it",
        ev, ctx.saving(peak=size), "donors")]


def donation_missing(ctx: AdviceContext) -> list[Finding]:
    """Arguments come back updated, each as an output of the same shape and type computed
    by an update of it (two or more added to or subtracted from: a training step's
    parameters and optimizer state; or one written in place, ``dynamic_update_slice`` or
    ``scatter``: a cache), and none is donated: each output needs memory of its own beside
    its argument.  What donation changes is the device footprint (arguments + outputs +
    temporaries); the live-range peak falls only by the outputs live at the peak."""
    m = ctx.module
    if m.input_output_alias or m.buffer_donors:
        return []  # the user donates: HS107 says whether it takes
    entry = m.entry
    root = entry.root
    outputs = list(root.operands) if root.opcode == "tuple" else [root]
    params = [p for p in entry.parameters if p.shape.is_array]
    free = {p.name: p for p in params}
    order = {p.name: i for i, p in enumerate(params)}
    pairs: list[tuple[Instruction, Instruction]] = []
    in_place = looped = 0
    through: dict[int, set[str]] = {}  # the outputs of one multi-output fusion read alike
    for out in outputs:
        if not free:
            break
        if not out.shape.is_array or out.opcode == "parameter":
            continue
        carried = _carried(out)
        if carried is not None and carried.name in free and _same_form(carried, out):
            pairs.append((carried, out))  # a loop's state, started from the argument
            looped += 1
            del free[carried.name]
            continue
        reads = _near(out, through)
        # The free parameters `out` reads, in parameter order (only those can be updated).
        for name in sorted((n for n in reads if n in free), key=order.__getitem__):
            p = free[name]
            how = _updates(out, p) if _same_form(p, out) else None
            if how:
                pairs.append((p, out))
                in_place += how == "in place"
                del free[name]
                break
    if len(pairs) < 2 and not in_place and not looped and not (
            pairs and _advanced_by_the_rest(entry, *pairs[0])):
        return []
    size = sum(o.shape.total_byte_size for _, o in pairs)
    at_peak = _at_peak(ctx, [o for _, o in pairs])
    nums = ", ".join(str(p.parameter_number) for p, _ in pairs[:8]) + (
        ", ..." if len(pairs) > 8 else "")
    # JAX names each parameter by its argument's path (params[0]['w1']): the arguments.
    names = list(dict.fromkeys(arg.group(1) for p, _ in pairs
                               if (arg := _ARG.match(p.metadata.op_name))))
    # JAX names the module jit_<function>: the function to jit (a trial: 'jax.jit(step,
    # ...' of a module jit_train_step)
    fn = re.sub(r"^p?jit_", "", m.name) if re.fullmatch(r"p?jit_[A-Za-z_]\w*", m.name) \
        else "step"
    how = (f"jax.jit({fn}, donate_argnames=({', '.join(repr(n) for n in names)},))"
           if names else f"jax.jit({fn}, donate_argnums=...) (or donate_argnames)")
    many = len(pairs) > 1
    what = (f"{len(pairs)} argument{'s' if many else ''} (parameter{'s' if many else ''} "
            f"{nums}) come{'' if many else 's'} back updated"
            + (" in place (dynamic_update_slice or scatter)" if in_place == len(pairs)
               else " by a loop" if looped == len(pairs)
               else "") + f" in the same shape and type, {format_bytes(size)} in all, and "
            "none is donated: XLA keeps each output in memory of its own beside the argument "
            "it replaces")
    peak = (f"; {format_bytes(at_peak)} of them are live at the memory peak"
            if at_peak else "; the outputs are made after the memory peak, so donating "
            "lowers the memory the program holds, not its peak")
    return [Finding(
        "HS110", "updated arguments are not donated", what + peak,
        f"donate them: {how}, when the caller does not use the old values afterwards (a "
        "training step's parameters and optimizer state, a cache)",
        tuple(ev_inst(p, "parameter") for p, _ in pairs[:6]),
        ctx.saving(peak=at_peak, footprint=size), "donation")]


def _carried(out: Instruction) -> Instruction | None:
    """The parameter a loop starts element k of its state from, where output `out` is that
    element after the loop and the loop's body writes part of it, keeping the rest (a
    cache or a buffer written step by step, in place or by HS131's select of one
    position: without donation XLA copies the argument into the loop's own buffer first);
    None elsewhere (a state the loop computes anew each step is the caller's to keep or
    give)."""
    x = out
    while x.operands and (x.opcode in ("copy", "bitcast") or _moves(x)):
        x = operand(x, 0)  # (XLA may keep a loop's state in another layout)
    if x.opcode != "get-tuple-element" or not x.operands or x.operands[0].opcode != "while":
        return None
    loop, k = x.operands[0], gte_index(x)
    init = loop.operands[0] if loop.operands else None
    if init is None or init.opcode != "tuple" or not 0 <= k < len(init.operands):
        return None
    src = init.operands[k]
    while src.operands and (src.opcode in ("copy", "bitcast") or _moves(src)):
        src = operand(src, 0)
    if src.opcode != "parameter":
        return None
    bodies = [c for c in loop.called_computations if c.root is not None
              and c.root.opcode == "tuple" and len(c.root.operands) == len(init.operands)]
    if len(bodies) != 1:
        return None
    new = bodies[0].root.operands[k]
    while new.opcode in ("copy", "bitcast") and new.operands:
        new = operand(new, 0)
    # Part of it written, the rest kept: a buffer or a cache filled step by step (not a
    # state replaced by a select over all of it: an accepted proposal, a masked field).
    fills = _computed_by(new).opcode in ("dynamic-update-slice", "scatter") \
        or _selected_positions(new, k) is not None
    return src if fills else None


def _computed_by(inst: Instruction) -> Instruction:
    """The operation that computes `inst`: inside a fusion its fused root (of a
    multi-output fusion, the root's element), through converts, bitcasts, copies,
    reshapes and transposes."""
    root = inst
    if inst.opcode == "get-tuple-element" and inst.operands \
            and inst.operands[0].opcode == "fusion":
        fusion = inst.operands[0]
        froot = fusion.called_computations[0].root if fusion.called_computations else None
        idx = gte_index(inst)
        if froot is not None and froot.opcode == "tuple" and 0 <= idx < len(froot.operands):
            root = froot.operands[idx]
    elif inst.opcode == "fusion" and inst.called_computations \
            and inst.called_computations[0].root is not None:
        root = inst.called_computations[0].root
    while root.opcode in ("convert", "bitcast", "copy", "reshape", "transpose") \
            and root.operands:
        root = root.operands[0]
    return root


def _at_peak(ctx: AdviceContext, outs: list[Instruction]) -> int:
    """The bytes of the outputs `outs` live at the memory peak (beside their arguments,
    which are live throughout)."""
    live = {(v.inst.name, v.index) for v in ctx.lr.peak_values}
    total = 0
    for o in outs:
        key = ((o.operands[0].name, (gte_index(o),)) if o.opcode == "get-tuple-element"
               and o.operands else (o.name, ()))
        if key in live:
            total += o.shape.total_byte_size
    return total


_LOOK_THROUGH = frozenset({"bitcast", "copy", "copy-start", "copy-done", "reshape",
                           "async-start", "async-done", "custom-call"})


def _near(inst: Instruction, through: dict[int, set[str]]) -> set[str]:
    """The instructions `inst` reads, looking through bitcasts, copies, the copies and
    asynchronous slices into a TPU's on-chip memory (an update reads its parameter
    directly; a gradient reads activations), and an output of a multi-output fusion.
    `through` caches what a tuple (a multi-output fusion) reads, by its id: each of its
    many outputs reads the same."""
    operands = inst.operands
    if inst.opcode == "get-tuple-element" and operands:
        tup = operands[0]
        reads = through.get(id(tup))
        if reads is None:
            reads = through[id(tup)] = _closure(tup.operands, {tup.name})
        return reads
    return _closure(operands, set())


def _closure(operands: tuple[Instruction, ...], seen: set[str]) -> set[str]:
    """`seen` with the names of `operands` and of what they read through `_LOOK_THROUGH`."""
    stack = list(operands)
    while stack:
        o = stack.pop()
        if o.name in seen:
            continue
        seen.add(o.name)
        if o.opcode in _LOOK_THROUGH or _moves(o):
            stack.extend(o.operands)
    return seen


def _moves(inst: Instruction) -> bool:
    """A kernel that only moves its one operand into another layout: a transpose, or a
    fusion of one (XLA:GPU's ``wrapped_transpose``: a cache transposed for a matmul,
    updated in place, and transposed back is still the cache updated)."""
    if inst.opcode == "transpose":
        return True
    if inst.opcode != "fusion" or len(inst.operands) != 1 or not inst.called_computations:
        return False
    return all(i.opcode in ("parameter", "transpose", "copy", "bitcast")
               for i in inst.called_computations[0].instructions)


_UPDATE_PATH = frozenset({"multiply", "divide", "convert", "bitcast", "copy", "reshape",
                          "negate", "copy-start", "copy-done", "async-start", "async-done",
                          "custom-call"})


def _updates(out: Instruction, p: Instruction) -> str | None:
    """How `out` is `p` updated: ``"added"`` where its last operation (inside a fusion,
    the fused root; of a multi-output fusion, the root's element) adds to or subtracts
    from `p` (scaled at most: ``p - lr * g``, ``b1 * m + ...``), as an optimizer or an
    integrator does; ``"in place"`` where it writes into `p` (``dynamic-update-slice``,
    ``scatter``: a cache); None otherwise (forces or gradients computed from `p`)."""
    fusion, root = out, out
    if out.opcode == "get-tuple-element" and out.operands \
            and out.operands[0].opcode == "fusion":
        fusion = out.operands[0]
        froot = fusion.called_computations[0].root if fusion.called_computations else None
        idx = gte_index(out)
        if froot is None or froot.opcode != "tuple" or not 0 <= idx < len(froot.operands):
            return None
        root = froot.operands[idx]
    elif out.opcode == "fusion" and out.called_computations:
        root = out.called_computations[0].root
    args = list(fusion.operands)
    while root.opcode in ("convert", "bitcast", "copy", "reshape", "transpose") \
            and root.operands:
        root = root.operands[0]
    if root.opcode in ("dynamic-update-slice", "scatter") and root.operands:
        how, stack = "in place", [(root.operands[0], 0)]
    elif root.opcode in ("add", "subtract"):
        how, stack = "added", [(o, 0) for o in root.operands]
    else:
        return None
    while stack:
        i, depth = stack.pop()
        if i.opcode == "parameter" and fusion.opcode == "fusion" and i is not root:
            n = i.parameter_number
            src = args[n] if n is not None and 0 <= n < len(args) else None
            while src is not None and src is not p and src.operands \
                    and (src.opcode in _UPDATE_PATH or _moves(src)):
                src = src.operands[0]
            if src is p:
                return how
            continue
        if i is p:
            return how
        if depth < 2 and i.opcode in _UPDATE_PATH:
            stack.extend((o, depth + 1) for o in i.operands)
    return None


def _advanced_by_the_rest(entry: Computation, p: Instruction, out: Instruction) -> bool:
    """Whether `out` is `p` plus or minus a term that the other arguments alone make by
    a matmul or a reduction (``theta + lr * step(noise, fitness)``): the state advanced
    by what the step computed, which replaces it; not a function of `p` itself (``sin(x)
    * 2 + x``, whose caller may well keep `x`), nor an elementwise mix of two arrays."""
    if out.opcode == "fusion" and out.called_computations:
        comp, args = out.called_computations[0], list(out.operands)
        root = comp.root
    elif out.opcode in ("add", "subtract"):
        comp, args, root = None, [], out
    else:
        return False
    while root.opcode in ("convert", "bitcast", "copy", "reshape") and root.operands:
        root = root.operands[0]
    if root.opcode not in ("add", "subtract") or len(root.operands) != 2:
        return False
    # What each side of the add reads from outside the fusion.
    sides = []
    for side in root.operands:
        reads, stack, seen = [], [side], set()
        while stack:
            i = stack.pop()
            if id(i) in seen:
                continue
            seen.add(id(i))
            if comp is not None and i.opcode == "parameter":
                n = i.parameter_number
                if n is not None and 0 <= n < len(args):
                    reads.append(args[n])
            elif comp is None and i is not root:
                reads.append(i)
            else:
                stack.extend(i.operands)
        sides.append(reads)
    state = [k for k, reads in enumerate(sides)
             if reads and all(_past_moves(r) is p for r in reads)]
    if len(state) != 1:
        return False
    term = sides[1 - state[0]]
    # ... and a term the step computed by a contraction (a matmul or a reduction: a
    # gradient, an estimate): an elementwise mix of two same-shaped arrays (`sin(p) * 2 +
    # q`) says nothing about which of them is the state.  (What reads `p` is walked
    # last: in a long program it is most of the program.)
    if not term or not any(_contracts(_past_moves(r)) for r in term):
        return False
    from_p = _descendants(entry, p)
    return not any(r is p or id(r) in from_p for r in term)


_CONTRACTIONS = frozenset({"dot", "convolution", "reduce"})


def _contracts(inst: Instruction) -> bool:
    if inst.opcode == "fusion":
        return any(i.opcode in _CONTRACTIONS for i in fused_instructions(inst))
    return inst.opcode in _CONTRACTIONS or (
        inst.opcode == "custom-call" and "gemm" in inst.custom_call_target.lower())


def _past_moves(inst: Instruction) -> Instruction:
    while inst.opcode in _UPDATE_PATH and inst.operands:
        inst = inst.operands[0]
    return inst


def _descendants(comp: Computation, p: Instruction) -> set[int]:
    """The ids of the instructions of `comp` that read `p`, directly or not."""
    out: set[int] = set()
    stack = list(p.users)
    while stack:
        i = stack.pop()
        if id(i) not in out:
            out.add(id(i))
            stack.extend(i.users)
    return out


def _same_form(p: Instruction, out: Instruction) -> bool:
    a, b = p.shape, out.shape
    return a.element_type == b.element_type and a.dims == b.dims


# -- HS108 -----------------------------------------------------------------------------

def f64(ctx: AdviceContext) -> list[Finding]:
    """f64/c128 arrays: among f32/bf16/f16 arrays (a Python float or a NumPy float64 that
    promoted part of the program), or throughout (the program computes in f64: in f32 it
    would hold and move half the bytes; on a GPU or TPU f64 arithmetic is also far
    slower, where it runs at all)."""
    wide: list[Instruction] = []
    narrow = 0
    # Per shape (a module repeats a few shapes): whether a leaf is a wide array, and how
    # many leaves are narrow.
    kinds: dict[Shape, tuple[bool, int]] = {}
    for comp in ctx.df.computations:
        for inst in comp.instructions:
            if inst.opcode in ("tuple", "get-tuple-element", "bitcast"):
                continue  # they only pass arrays on
            kind = kinds.get(inst.shape)
            if kind is None:
                kind = kinds[inst.shape] = _precisions(inst.shape)
            if kind[0]:
                wide.append(inst)
            narrow += kind[1]
    if not wide:
        return []
    wide = list(dict.fromkeys(wide))
    total = sum(i.shape.total_byte_size for i in wide)
    at_peak = sum(v.size for v in ctx.lr.peak_values
                  if v.shape.is_array and v.shape.element_type in ("f64", "c128"))
    ev = tuple(ev_inst(i, "kernel" if ctx.kernel(i.name) else "array") for i in wide[:8])
    if narrow:
        return [Finding(
            "HS108", "f64 arrays in an f32 program",
            f"{len(wide)} instruction(s) work in f64 ({format_bytes(total)}), among f32 "
            f"arrays: {', '.join(i.name for i in wide[:4])}",
            "double precision halves throughput and doubles memory (and is very slow on "
            "most GPUs and TPUs): check for a Python float or a NumPy float64 array that "
            "promoted the computation, or an accidental "
            "jax.config.update('jax_enable_x64', True)",
            ev, ctx.saving(peak=at_peak // 2, traffic=total), "f64")]
    # f64 throughout: f32 would halve what the kernels move (and, on a GPU or TPU, run
    # the arithmetic at the f32 rate).
    moved = sum(k.bytes_accessed * ctx.runs(k.group) for k in ctx.graph.kernels
                if k.element_type in ("f64", "c128"))
    slow = 0.0
    if ctx.platform != "cpu" and ctx.device.peak_flops("f64") and ctx.device.peak_flops("f32"):
        per_flop = 1 / ctx.device.peak_flops("f64") - 1 / ctx.device.peak_flops("f32")
        slow = max(0.0, per_flop) * sum(k.flops * ctx.runs(k.group) for k in ctx.graph.kernels
                                         if k.element_type in ("f64", "c128"))
    where = ("on the CPU f32 halves the memory and the memory traffic" if ctx.platform == "cpu"
             else "f32 halves the memory and the memory traffic, and f64 arithmetic runs at "
             "a fraction of the f32 rate on a GPU (emulated in software on a TPU)")
    return [Finding(
        "HS108", "the program computes in f64 throughout",
        f"the program computes in f64 throughout: {len(wide)} instruction(s) make "
        f"{format_bytes(total)} of f64 arrays ({format_bytes(at_peak)} at the peak); {where}",
        "if f32 is precise enough (compare a run in f32 against this one: a stencil or a "
        "solver that converges usually is), compute in f32: leave jax_enable_x64 off or "
        "create the arrays as jnp.float32; keep f64 only where an accumulation needs it",
        ev, ctx.saving(peak=at_peak // 2, traffic=moved // 2, seconds=slow), "f64")]


def _precisions(shape: Shape) -> tuple[bool, int]:
    """Whether a leaf of `shape` is an f64 or c128 array (more than one element), and how
    many of its leaves are f32, bf16, f16 or c64."""
    wide, narrow = False, 0
    for _idx, leaf in shape.leaves():
        if leaf.element_type in ("f64", "c128"):
            wide = wide or leaf.num_elements > 1
        elif leaf.element_type in ("f32", "bf16", "f16", "c64"):
            narrow += 1
    return wide, narrow


# -- HS111 -----------------------------------------------------------------------------

def remat(ctx: AdviceContext) -> list[Finding]:
    """Values the forward pass made (op_name under ``jvp(``, or a forward the backward
    pass recomputes) that the backward pass (``transpose(``) reads hold much of the peak:
    rematerializing them (jax.checkpoint, per layer or per scan step) trades their memory
    for recomputing the forward.  What a checkpoint drops is counted, not the layer inputs
    any checkpoint keeps (a scan's carry, a value every later forward step goes
    through); the advice is given only where that is a quarter of the peak or more (40% of
    it where the program checkpoints already, and then only where checkpointing in
    segments of about sqrt(L) of the L steps drops a quarter of the peak), and names the
    scan or the layer."""
    if not ctx.peak:
        return []
    residuals = []
    seen: set[int] = set()
    collectives = {c.name for c in ctx.graph.collectives}
    bodies = {c.name for c in ctx.df.computations} - {ctx.module.entry.name}
    for v in ctx.lr.peak_values:
        buf = ctx.df.buffer_of[v.id]
        if buf.id in seen or ctx.value_kind(v) != "temporary":
            continue
        seen.add(buf.id)
        if not any(_forward(w.inst.metadata.op_name) for w in buf.values):
            continue  # (the cheapest test first: most values are no forward pass's)
        if v.inst.name in collectives or v.inst.opcode.startswith("all-gather") \
                or gathered_weight(v.inst):
            # Weights gathered for the layers (or XLA's copy of them in the layout the
            # matmul reads): HS116's (gathered-weights).
            continue
        if "rematted_computation" in v.inst.metadata.op_name \
                and _computation_of(ctx, v.inst) in bodies \
                and all(w.inst.computation is v.inst.computation
                        and w.inst.opcode not in ("parameter", "while") for w in buf.values):
            continue  # one step's recompute, used within the step: the checkpoint works
        if any(_backward(u.metadata.op_name)
               for w in buf.values for u, _n, _i in ctx.df.uses_of(w)):
            residuals.append(v)
    total = sum(v.size for v in residuals)
    if total < REMAT_SHARE * ctx.peak:
        return []
    # Where the program checkpoints already, what is left is what the checkpoints keep:
    # worth a finding only where it still holds much of the peak.  (Looked for only here:
    # it reads every instruction's metadata.)
    checkpointed = any("rematted_computation" in i.metadata.op_name
                       for i in ctx.module.instructions())
    if checkpointed and total < CHECKPOINTED_SHARE * ctx.peak:
        return []
    loops = [w.inst for v in residuals for w in ctx.df.buffer_of[v.id].values
             if w.inst.opcode == "while"]
    layers = max((trip_count(w) for w in loops), default=1)
    per_layer = (f", {format_bytes(total // layers)} per iteration of a {layers}-step loop"
                 if layers > 1 else "")

    def evidence(vs):  # type: ignore[no-untyped-def]
        return tuple(Evidence(v.label, "array", str(v.shape), v.size, v.inst.metadata.op_name,
                              str(v.inst.source) if v.inst.source else None)
                     for v in sorted(vs, key=lambda v: (-v.size, v.label))[:6])
    rematted = sum(v.size for v in residuals
                   if "rematted_computation" in v.inst.metadata.op_name)
    if rematted * 2 > total:
        # jax.checkpoint is there, but XLA holds what it recomputes across the backward
        # pass all the same (it recomputes every layer's forward before their backward).
        return [Finding(
            "HS111", "values saved for the backward pass dominate the peak",
            f"{len(residuals)} value(s) that jax.checkpoint recomputes are held whole for "
            f"the backward pass: {format_bytes(total)} at the peak "
            f"({100 * total / ctx.peak:.0f}% of {format_bytes(ctx.peak)}){per_layer}",
            "checkpoint at a finer grain: jax.checkpoint on the scan body, or on each layer "
            "inside a lax.scan over the layers, so the backward pass recomputes one step at "
            "a time (XLA may recompute an unrolled model's checkpointed layers all ahead of "
            "their backward passes); or checkpoint in segments (nested scans)",
            evidence(residuals), ctx.saving(peak=total), "residuals")]
    if checkpointed:
        # The program checkpoints already: what is left is what each checkpoint keeps,
        # one input per step.  Segments of about sqrt(L) steps keep about 2 sqrt(L) of
        # the L inputs for a second recompute of the forward: worth a line only where
        # that drops a quarter of the peak (on 8 layers it keeps 6 of the 8).
        kept_all = total
        total = int(total * (1 - 2 / math.sqrt(layers)))
        if total < REMAT_SHARE * ctx.peak:
            return []
        return [Finding(
            "HS111", "values saved for the backward pass dominate the peak",
            f"{len(residuals)} value(s) the forward pass keeps for the backward pass though "
            f"the program uses jax.checkpoint hold {format_bytes(kept_all)} at the peak "
            f"({100 * kept_all / ctx.peak:.0f}% of {format_bytes(ctx.peak)}){per_layer}: "
            f"what each checkpoint keeps (its inputs, one per step); segments of about "
            f"{round(math.sqrt(layers))} steps would keep about {2 * math.sqrt(layers):.0f} "
            f"of the {layers}",
            "checkpoint in segments: an outer lax.scan over segments of k steps with "
            "jax.checkpoint on each segment (an inner scan) keeps one input per segment "
            "instead of one per step",
            evidence(residuals), ctx.saving(peak=total), "residuals")]
    cuts = _Cuts(ctx)
    inputs = _inputs_of_layers([v for v in residuals if _layer_input(ctx, v, cuts)])
    kept = sum(v.size for v in inputs)
    dropped = [v for v in residuals if v not in inputs]
    saved = total - kept
    if saved < REMAT_SHARE * ctx.peak:
        return []
    where = _where_to_wrap(ctx, dropped, loops)
    return [Finding(
        "HS111", "values saved for the backward pass dominate the peak",
        f"{len(residuals)} value(s) the forward pass saves for the backward pass hold "
        f"{format_bytes(total)} at the peak ({100 * total / ctx.peak:.0f}% of "
        f"{format_bytes(ctx.peak)}){per_layer}; a checkpoint would drop "
        f"{format_bytes(saved)} of them"
        + (f" (the other {format_bytes(kept)} are layer inputs, which any checkpoint keeps)"
           if kept else ""),
        f"rematerialize: wrap {where} in jax.checkpoint, with a policy such as "
        "jax.checkpoint_policies.dots_with_no_batch_dims_saveable (keeps the matmul "
        "results) or nothing_saveable (keeps only the layer inputs); the backward pass then "
        "recomputes the forward instead of holding it",
        evidence(dropped), ctx.saving(peak=saved), "residuals")]


def _where_to_wrap(ctx: AdviceContext, dropped: list, loops: list[Instruction]) -> str:
    """What to put under jax.checkpoint: the scan whose body makes the values, or the
    layer (the source lines) that makes the largest of them."""
    big = sorted(dropped, key=lambda v: -v.size)
    scans = [w for v in big for w in (x.inst for x in ctx.df.buffer_of[v.id].values)
             if w.opcode == "while"]
    if scans:
        w = scans[0]
        at = f" at {w.source}" if w.source else ""
        return f"the body of the scan{at} (the function given to lax.scan)"
    lines = list(dict.fromkeys(str(v.inst.source) for v in big if v.inst.source))[:2]
    return ("the layer function that computes them (at " + ", ".join(lines) + ")"
            if lines else "each layer function")


_CARRY_PATH = frozenset({"bitcast", "copy", "reshape", "broadcast", "convert"})


def _layer_input(ctx: AdviceContext, v: Value, cuts: _Cuts) -> bool:
    """Whether residual `v` is what any checkpoint keeps: a scan's carry stacked for the
    backward pass (the loop writes its state at the start of each step into the stack),
    or, outside loops, a value that every later step of the forward pass goes through
    (no other activation of its size is made before it and read by the forward after)."""
    for w in ctx.df.buffer_of[v.id].values:
        if w.inst.opcode == "while" and w.index:
            return _stacks_carry(w.inst, w.index[0])
    return _forward_cut(ctx, v, cuts)


def _stacks_carry(loop: Instruction, i: int) -> bool:
    body = loop.called_computations[-1] if loop.called_computations else None
    if body is None or body.root.opcode != "tuple" or not 0 <= i < len(body.root.operands):
        return False
    root = body.root
    out = root.operands[i]
    while out.opcode in ("bitcast", "copy") and out.operands:
        out = out.operands[0]
    args: list[Instruction] = []
    inner = out
    if out.opcode == "fusion" and out.called_computations:
        inner, args = out.called_computations[0].root, list(out.operands)
    if inner.opcode != "dynamic-update-slice" or len(inner.operands) < 2:
        return False
    upd = inner.operands[1]
    for _ in range(8):
        if upd.opcode == "parameter" and args:
            n = upd.parameter_number
            if n is None or not 0 <= n < len(args):
                return False
            upd, args = args[n], []
        elif upd.opcode in _CARRY_PATH and upd.operands:
            upd = upd.operands[0]
        else:
            break
    if upd.opcode != "get-tuple-element" or not upd.operands \
            or upd.operands[0].opcode != "parameter":
        return False
    j = gte_index(upd)
    if j == i or not 0 <= j < len(root.operands):
        return False
    nxt = root.operands[j]
    # The state that changes from step to step: the carry (not a loop-invariant input).
    return not (nxt.opcode == "get-tuple-element" and gte_index(nxt) == j
                and nxt.operands and nxt.operands[0].opcode == "parameter")


def _inputs_of_layers(found: list[Value]) -> list[Value]:
    """Of the residuals `_layer_input` found, those that are the layers' inputs: not more
    than twice the smallest of them (of those at least a hundredth of the largest).  A
    layer's largest temporary (attention's [batch, heads, T, T] scores, 64 times its
    [batch, T, d] input at T=2048) has no forward value of half its size crossing it, so
    it looks like a cut; what every layer goes through is the smaller residual stream
    (a new user's unrolled long-context model was told nothing: 93% of its residuals were
    counted as inputs)."""
    if not found:
        return found
    top = max(v.size for v in found)
    floor = min(v.size for v in found if v.size * 100 >= top)
    return [v for v in found if v.size <= 2 * floor]


def _forward_cut(ctx: AdviceContext, v: Value, cuts: _Cuts) -> bool:
    """Whether no other forward value at least half `v`'s size is made before `v` and
    read by the forward pass after it: every later forward step goes through `v`."""
    t = cuts.order.get(id(v.inst))
    return t is not None and cuts.crossing(t, v.size // 2) <= t


class _Cuts:
    """The entry's schedule as HS111 reads it: each instruction's position, and for the
    forward pass's values, the last position a forward instruction reads them."""

    def __init__(self, ctx: AdviceContext) -> None:
        comp = ctx.module.entry
        self.order = {id(x): n for n, x in enumerate(comp.instructions)}
        self._made: list[tuple[int, int]] = []  # (size, last forward read) per position
        skip = ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")
        for n, x in enumerate(comp.instructions):
            last = -1
            if x.opcode not in skip and _forward(x.metadata.op_name):
                last = max((self.order.get(id(u), -1) for u in x.users
                            if u.opcode != "tuple" and _forward(u.metadata.op_name)),
                           default=-1)
            self._made.append((x.shape.total_byte_size, last))
        self._prefix: dict[int, list[int]] = {}

    def crossing(self, t: int, size: int) -> int:
        """The last forward read of a value of at least `size` bytes made before `t`."""
        pre = self._prefix.get(size)
        if pre is None:
            pre, best = [], -1
            for nbytes, last in self._made:
                pre.append(best)
                if nbytes >= size:
                    best = max(best, last)
            self._prefix[size] = pre
        return pre[t] if 0 <= t < len(pre) else -1


def _forward(op_name: str) -> bool:
    """Made by the forward pass: under ``jvp(`` and not by the backward pass, or by a
    forward the backward pass recomputes (``rematted_computation``)."""
    return "jvp(" in op_name and ("transpose(" not in op_name
                                  or "rematted_computation" in op_name)


def _backward(op_name: str) -> bool:
    return "transpose(" in op_name and "rematted_computation" not in op_name


# -- HS112 -----------------------------------------------------------------------------

def _upcasts(ctx: AdviceContext):  # type: ignore[no-untyped-def]
    """(kernel, the user's converts in it, whether it runs the matmul itself, the
    matmul or reduction kernels that read its f32 result) for each upcast on the way."""
    for k in ctx.kernels_with.get("convert", ()):
        inst = ctx.inst(k)
        if inst is None:
            continue
        inner = list(fused_instructions(inst))
        ups = [c for c in inner if c.opcode == "convert" and c.operands
               and c.operands[0].shape.element_type in _NARROW
               and c.shape.element_type == "f32"
               and c.metadata.op_name.endswith("convert_element_type")
               and "transpose(" not in c.metadata.op_name]  # autodiff's, not the user's
        if not ups:
            continue
        # A matmul in this kernel that reads an upcast value; else the f32 value must leave
        # the kernel (its output is f32) for a matmul that reads it.  An upcast for a
        # reduction or a softmax is numerics the user chose (f32 sums), not a cost.
        upcast = {c.name for c in ups}
        matmul_here = any(i.opcode in ("dot", "convolution")
                          and any(o.name in upcast or _from_upcast(o, upcast)
                                  for o in i.operands) for i in inner)
        heavy_next = []
        if not matmul_here and k.element_type == "f32" and _leaves_wide(inst, ups):
            readers = [ctx.kernel(e.dst) for e in ctx.edges_from.get(k.name, ())]
            heavy_next = [r for r in readers if r is not None and _f32_matmul(ctx, r, k.name)]
        if matmul_here or heavy_next:
            yield k, ups, matmul_here, heavy_next


def _leaves_wide(inst: Instruction, ups: list[Instruction]) -> bool:
    """Whether an upcast value leaves fused kernel `inst` in f32 as the forward pass's: some
    path from it to the kernel's result that no convert narrows again and no backward-pass
    operation (op_name under ``transpose(``) takes over.  (The f32 a loss upcast for its
    reduction feeds into the backward pass's matmuls is autodiff's, not an upcast for a
    matmul.)"""
    if inst.opcode != "fusion" or not inst.called_computations:
        return True
    root = inst.called_computations[0].root
    stack, seen = list(ups), set()
    while stack:
        i = stack.pop()
        if i is root:
            return True
        if id(i) in seen:
            continue
        seen.add(id(i))
        stack.extend(u for u in i.users
                     if not (u.opcode == "convert" and u.shape.element_type in _NARROW)
                     and "transpose(" not in u.metadata.op_name)
    return False


def _from_upcast(inst: Instruction, upcast: set[str], depth: int = 3) -> bool:
    """Whether `inst` is an upcast seen through bitcasts, reshapes and transposes."""
    for _ in range(depth):
        if inst.opcode not in ("bitcast", "reshape", "transpose", "copy") or not inst.operands:
            return False
        inst = inst.operands[0]
        if inst.name in upcast:
            return True
    return False


_MOVES = frozenset({"bitcast", "reshape", "transpose", "copy", "get-tuple-element"})


def _f32_matmul(ctx: AdviceContext, k, source: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether kernel `k` runs a matmul or convolution whose f32 operand is kernel
    `source`'s result as it is (moved or reshaped at most, not computed on: a softmax of
    the upcast value is numerics the user chose, not an upcast for the matmul)."""
    inst = ctx.inst(k)
    if inst is None:
        return False
    for i in fused_instructions(inst):
        if i.opcode not in ("dot", "convolution") and not _library_matmul(i):
            continue
        for o in i.operands:
            if o.shape.element_type != "f32":
                continue
            while o.opcode in _MOVES and o.operands:
                o = o.operands[0]
            if o.opcode == "parameter" and inst.opcode == "fusion":
                n = o.parameter_number
                o = inst.operands[n] if 0 <= n < len(inst.operands) else o
                while o.opcode in _MOVES and o.operands:
                    o = o.operands[0]
            if o.name == source:
                return True
    return False


def _library_matmul(inst: Instruction) -> bool:
    """A matmul or convolution XLA hands to a library (cuDNN's convolutions, cuBLAS's
    GEMMs: custom-calls), whose operands are the values it multiplies."""
    t = inst.custom_call_target.lower() if inst.opcode == "custom-call" else ""
    return "conv" in t or "gemm" in t or "matmul" in t


def _size(inst: Instruction) -> int:
    return inst.shape.total_byte_size


def upcast_note(ctx: AdviceContext) -> str | None:
    """On a CPU module, what HS112 would say elsewhere: a note, not a finding."""
    if ctx.platform != "cpu":
        return None
    n = sum(1 for _ in _upcasts(ctx))
    if not n:
        return None
    return (f"{n} place(s) convert bf16/f16 to f32 for a matmul (HS112): on the "
            "CPU XLA computes bf16 matmuls in f32 itself, so nothing is saved here; on a GPU "
            "or TPU it may cost time and memory (compile for a target: --target h100)")


def precision_upcast(ctx: AdviceContext) -> list[Finding]:
    """The user's code converts bf16/f16 to f32 (op_name ``convert_element_type``) on the
    way to a matmul or a convolution: the f32 copy costs memory traffic, and on a GPU or
    TPU the matmul runs at the f32 rate.  On a CPU module XLA computes bf16 matmuls in f32
    itself: a note (`upcast_note`), not a finding."""
    if ctx.platform == "cpu":
        return []
    out = []
    dev = ctx.device
    slow = (1 / dev.peak_flops("f32") - 1 / dev.peak_flops("bf16")
            if dev.peak_flops("f32") and dev.peak_flops("bf16") else 0.0)
    # A device without faster bf16 matmuls (a V100: no bf16 in its tensor cores) gets its
    # bf16 matmuls computed in f32 by XLA itself, as a CPU does: keeping the operands in
    # bf16 saves nothing there (a new user's V100 step was told to).
    no_bf16 = ctx.platform == "gpu" and not (
        dev.peak_flops("bf16") > 1.5 * dev.peak_flops("f32"))
    for k, ups, matmul_here, heavy_next in _upcasts(ctx):
        if no_bf16 and all(c.operands[0].shape.element_type == "bf16" for c in ups):
            continue
        runs = ctx.runs(k.group)
        wide = sum(c.shape.total_byte_size for c in ups)
        traffic = (wide + wide // 2) * runs if not matmul_here else 0
        # Only a matmul that reads the f32 value runs at the f32 rate (a reduction never
        # runs on the matrix units).
        flops = sum(r.flops for r in heavy_next)
        flops += k.flops if matmul_here else 0
        c = ups[0]
        more = (f" and {len(ups) - 1} more array(s) ({format_bytes(wide - _size(c))} in f32)"
                if len(ups) > 1 else "")
        # The f32 copy written to memory holds up the peak where it is live there.
        held = 0 if matmul_here else max(
            (e.bytes for e in ctx.edges_from.get(k.name, ()) if e.live_at_peak), default=0)
        out.append(Finding(
            "HS112", "bf16/f16 values are upcast to f32 on the way to a matmul",
            f"{k.name} converts {c.operands[0].shape.element_type} {c.operands[0].shape} to "
            f"f32 (a {format_bytes(_size(c))} f32 copy){more} for "
            + ("its own matmul" if matmul_here
               else ", ".join(r.name for r in heavy_next[:3])),
            "keep the operands in bf16 and ask for an f32 result instead: jnp.dot(a, b, "
            "preferred_element_type=jnp.float32) (or jnp.einsum(..., "
            "preferred_element_type=...)); the matmul then runs at the bf16 rate with f32 "
            "accumulation, and no f32 copy is written",
            (ev_inst(c, "array"), ev_kernel(k)),
            ctx.saving(peak=held, traffic=traffic,
                       seconds=max(0.0, flops * slow * runs)),
            place_key(c.metadata.op_name, str(c.source or ""), str(c.shape))))
    return out
