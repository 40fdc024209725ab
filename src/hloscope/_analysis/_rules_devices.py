"""The advisor's rules about devices: collectives and the TPU's tiled memory.

A collective in a loop that moves the same data every iteration (HS109), asynchronous
collectives XLA could not overlap with any kernel on a GPU or TPU (HS113), the same
collective run twice on the same data (HS114), and TPU values whose tiled layout pads
them far beyond their elements (HS115).
"""

from __future__ import annotations

import re

from .._hlo._attrs import parse_int_list
from .._hlo._module import Computation, Instruction
from .._units import format_bytes
from ._advice_context import AdviceContext, ev_inst, trip_count
from ._findings import Evidence, Finding, place_key
from ._hardware import done_of, is_collective_start
from ._walk import gte_index, operand

__all__ = ["exposed_collective", "loop_collective", "repeated_collective", "tile_padding"]

# HS115: padding under this share of a value's elements is not worth a line (a minor
# dimension of 130 padded to 256 lanes: 97%).
PADDING_RATIO = 0.5
_SPACE_RE = re.compile(r"S\(([0-9]+)\)")
_SPACE = {1: "the TPU's on-chip memory, S(1)", 5: "host memory, S(5)"}


# -- HS109 -----------------------------------------------------------------------------

def loop_collective(ctx: AdviceContext) -> list[Finding]:
    out = []
    bodies = {g.name: g for g in ctx.graph.groups if g.kind == "while body"}
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
        if not srcs or not all(s is not None and s in invariant for s in srcs):
            continue
        g = bodies[c.group]
        caller = ctx.module.computation(g.parent).by_name.get(g.caller)
        n = trip_count(caller) if caller is not None else 1
        moved = c.sent_per_device or c.bytes
        layers = _stacked_axis_gathered(inst)
        if layers:
            # Hoisting would hold every layer's weights at once: the spec is the fix.
            each = moved // layers
            out.append(Finding(
                "HS109", "a collective in a loop moves the same data every iteration",
                f"{c.name} gathers all {layers} slices of a stacked array along its "
                f"dimension 0 (the axis the loop steps through, the one its spec shards) in "
                "each of the loop's " + (f"{n} iterations" if n > 1 else "iterations")
                + f" to use one: {format_bytes(moved)} sent per device per iteration, where "
                f"gathering only the slice it uses would send {format_bytes(each)}",
                "shard another dimension of the stacked array, not the one the scan steps "
                "through: for weights stacked [layers, ...], a spec such as P(None, 'data') "
                "(FSDP) instead of P('data'), so each iteration gathers only its own layer "
                "(and XLA can start the next one's during this one); hoisting the gather out "
                "of the loop would hold every layer's full weights at once",
                (ev_inst(inst, "collective"),),
                ctx.saving(link_bytes=(moved - each) * max(1, n) * ctx.runs(g.parent)),
                place_key(inst.metadata.op_name, str(inst.source or ""), str(inst.shape))))
            continue
        out.append(Finding(
            "HS109", "a collective in a loop moves the same data every iteration",
            f"{c.name} ({c.opcode}, {format_bytes(moved)} sent per device) runs on loop "
            "state the body never changes, so each of the loop's "
            + (f"{n} iterations" if n > 1 else "iterations") + " repeats the same "
            "communication",
            "hoist it out of the loop: do the all-gather/all-reduce once before the loop "
            "and pass the result in",
            (ev_inst(inst, "collective"),),
            # All but one iteration's transfer (one at least, where the count is unknown).
            ctx.saving(link_bytes=moved * max(1, n - 1) * ctx.runs(g.parent)),
            place_key(inst.metadata.op_name, str(inst.source or ""), str(inst.shape))))
    return out


def _stacked_axis_gathered(inst: Instruction) -> int:
    """For an all-gather in a loop body whose result the body only dynamic-slices along
    the gathered dimension 0 (a scan's stacked weights, sharded on the axis the scan
    steps through): how many slices it gathers (0 where it is not such a gather)."""
    if inst.opcode not in ("all-gather", "all-gather-start") or inst.dimensions != (0,):
        return 0
    result = done_of(inst) if inst.opcode == "all-gather-start" else inst
    if result is None or not result.shape.dims or result.shape.dims[0] < 2:
        return 0
    readers = _through(result.users, users=True)
    if not readers or not all("dynamic-slice" in _fused_ops(r) for r in readers):
        return 0
    for r in readers:
        if r.shape.is_tuple or not r.shape.dims or r.shape.dims[0] >= result.shape.dims[0]:
            return 0
    return result.shape.dims[0]


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


# -- HS113 and HS115 read XLA's placement on the device ---------------------------------

def exposed_collective(ctx: AdviceContext) -> list[Finding]:
    """On a GPU or TPU, a collective whose transfer the compute does not hide: an
    asynchronous one whose start and done enclose kernels that take less time than the
    transfer (the rest of it is exposed), or a synchronous one (the compute waits for
    all of it)."""
    if ctx.platform == "cpu":
        return []  # XLA's CPU backend runs every collective synchronously
    moved = {c.name: c.sent_per_device or c.bytes for c in ctx.graph.collectives}
    view = ctx.hardware
    blocking = set(view.blocking)
    # Loop bodies, whether or not XLA knows the trip count.
    bodies = {g.name for g in ctx.graph.groups if g.kind == "while body"}
    out = []
    for comp in ctx.module.computations:
        order = {id(inst): n for n, inst in enumerate(comp.instructions)}
        for inst in comp.instructions:
            nbytes = moved.get(inst.name, 0)
            if not nbytes:
                continue
            transfer = nbytes / ctx.link_bandwidth
            if inst.name in blocking:
                hidden, done, sync = 0.0, None, True
            elif is_collective_start(inst):
                done = done_of(inst)
                if done is None or id(done) not in order:
                    continue
                between = [k for i in comp.instructions[order[id(inst)] + 1:order[id(done)]]
                           if (k := ctx.kernel(i.name)) is not None and k.group == comp.name
                           and not i.opcode.startswith("async-update")]
                hidden = sum(k.roofline_seconds(ctx.device, k.element_type) for k in between)
                sync = '"is_sync":true' in inst.attr_text
            else:
                continue
            exposed = max(0.0, transfer - hidden)
            if exposed <= 0.0:
                continue
            runs = ctx.runs(comp.name)
            what = inst.opcode.removesuffix("-start")
            if what == "async":
                wrapped = inst.called_computations
                what = wrapped[0].root.opcode if wrapped and wrapped[0].instructions else what
            fix, partner = _gpu_fix(ctx, comp, inst, done, what,
                                    runs > 1 or comp.name in bodies)
            if fix is None:
                continue
            if fix == "pipeline":
                # XLA's pipeliner starts the next iteration's transfer during this one:
                # it hides at most one iteration's compute.
                exposed = min(exposed, _body_compute(ctx, comp))
            elif partner is not None and (k := ctx.kernel(partner.name)) is not None:
                # A collective matmul hides the transfer behind that matmul, at most.
                exposed = min(exposed, k.roofline_seconds(ctx.device, k.element_type))
            how = ("it has no asynchronous form here: the compute waits for all of it"
                   if done is None else
                   f"the kernels between {inst.name} and {done.name} hide "
                   f"{100 * hidden / transfer:.0f}% of it"
                   + (" (XLA made it synchronous)" if sync else ""))
            out.append(Finding(
                "HS113", "a collective is not overlapped with compute",
                f"{what} {inst.name} moves {format_bytes(nbytes)} per device; {how}",
                _overlap_fix(ctx, what, runs > 1, fix),
                (ev_inst(inst, "collective"),), ctx.saving(seconds=exposed * runs),
                place_key(inst.metadata.op_name, str(inst.source or ""), what)))
    return out


_PIPELINED = {"all-gather": "all_gather", "reduce-scatter": "reduce_scatter",
              "all-reduce": "all_reduce"}


def _gpu_fix(ctx: AdviceContext, comp: Computation, inst: Instruction,
             done: Instruction | None, what: str,
             in_loop: bool) -> tuple[str | None, Instruction | None]:
    """On a GPU, for an all-gather, reduce-scatter or all-reduce, what can hide it, or
    None where nothing an expert would change does: ``pipeline`` where XLA's collective
    pipeliner would act (XLA's flags: a loop's all-gather of a slice of loop-invariant
    state, a loop's reduce-scatter or all-reduce whose result is written into a slice of
    the loop's output: FSDP's scan over layers), ``matmul`` outside loops where one matmul
    reads what it gathers or makes what it reduces in the forward pass (a collective
    matmul).  Elsewhere (a loop's accumulation, a gradient reduced after the step's
    last compute, weights of several layers gathered in one combined collective) XLA's
    scheduler already overlaps what it can and the flags change nothing.  Other
    platforms and collectives: ``other`` (the generic advice)."""
    if what not in _PIPELINED or ctx.platform not in ("gpu", "tpu"):
        # A loop's collective on the path from the state one iteration reads to the state
        # the next computes with (a MoE layer's all-to-all in a scan over layers): every
        # kernel of the next iteration waits for it, and unrolling gives XLA nothing to
        # overlap.  What the partitioner inserted to change a sharding can go (a sharding
        # that agrees); one the user wrote stays.
        critical = in_loop and _carried_through(comp, inst, done)
        if _partitioner_made(inst):
            return ("reshard-critical" if critical else "reshard"), None
        return (None if critical else "other"), None
    if ctx.platform == "tpu":
        # In a loop, a reduction the loop does not write into a slice of its output is
        # the loop's own use of it (a microbatch's gradient accumulated, a metric):
        # reducing once after the loop is the fix (HS122's), not hiding it.
        if in_loop and what != "all-gather" and not _pipelinable(comp, inst, done, what):
            return None, None
        # Outside loops, the backward pass's collective (a data-parallel gradient
        # reduced once it is made) has nothing after it but what reads it: XLA already
        # overlaps what it can, and no change the user makes hides it (as on a GPU).
        if not in_loop and "transpose(" in inst.metadata.op_name:
            return None, None
        return "other", None
    if in_loop:
        return ("pipeline" if _pipelinable(comp, inst, done, what) else None), None
    if "transpose(" in inst.metadata.op_name or not inst.operands:
        return None, None
    if what == "all-gather":
        near = _through(done.users if done is not None else inst.users, users=True)
    else:
        near = _through(inst.operands, users=False)
    if len(near) == 1 and _matmul(near[0]) and "transpose(" not in near[0].metadata.op_name \
            and (what != "all-gather" or _gathers_free_axis(inst, done, near[0])):
        # (A gradient's matmul, reduced after it, is the backward pass's: a gradient is
        # reduced once it is made, and XLA already overlaps what follows.)
        return "matmul", near[0]
    return None, None


def _gathers_free_axis(ag: Instruction, done: Instruction | None, reader: Instruction) -> bool:
    """Whether the matmul `reader` keeps the all-gather's gathered axis (sequence
    parallelism: rows gathered, each chunk of rows multiplied on its own: a collective
    matmul) rather than contracting over it (FSDP's weights gathered along the
    contraction: prefetching the next layer's weights is the fix, HS116's)."""
    result = done if done is not None else ag
    gathered = ag.dimensions
    if len(gathered) != 1:
        return False
    dot, value = reader, result
    if reader.opcode == "fusion" and reader.called_computations:
        params = {i.parameter_number: i for i in reader.called_computations[0].instructions
                  if i.opcode == "parameter"}
        hits = [params.get(n) for n, o in enumerate(reader.operands)
                if o is result or result in _through((o,), users=False) or o in
                _through(result.users, users=True) or _reaches(result, o)]
        inner = [d for p in hits if p is not None
                 for d in _through(p.users, users=True) if d.opcode == "dot"]
        if len(inner) != 1 or hits[0] is None:
            return False
        dot, value = inner[0], hits[0]
    if dot.opcode != "dot":
        return False
    for side, key in ((0, "lhs_contracting_dims"), (1, "rhs_contracting_dims")):
        o = dot.operands[side] if side < len(dot.operands) else None
        if o is None or not (o is value or _reaches(value, o)):
            continue
        if o.shape.dims != result.shape.dims:
            return False  # reshaped on the way: the axes do not line up
        try:
            contracting = parse_int_list(dot.attr(key) or "")
        except ValueError:
            return False
        return gathered[0] not in contracting
    return False


def _reaches(src: Instruction, dst: Instruction) -> bool:
    """Whether `dst` is `src` seen through moves (bitcasts, copies, converts)."""
    while dst is not src and dst.opcode in _MOVE and dst.operands:
        dst = dst.operands[0]
    return dst is src


_MOVE = frozenset({"bitcast", "copy", "convert", "reshape", "transpose", "get-tuple-element"})


def _through(start: tuple[Instruction, ...], users: bool) -> list[Instruction]:
    """The instructions `start` leads to (its users', or its operands' way) past moves."""
    out: list[Instruction] = []
    stack = list(start)
    seen: set[int] = set()
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        if not users and i.opcode == "get-tuple-element" and i.operands:
            # Through a tuple (or an optimization barrier's) to the element it takes.
            t, k = i.operands[0], gte_index(i)
            while t.opcode == "opt-barrier" and t.operands:
                t = t.operands[0]
            stack.append(t.operands[k] if t.opcode == "tuple" and 0 <= k < len(t.operands)
                         else t)
        elif i.opcode in _MOVE:
            stack.extend(i.users if users else i.operands)
        else:
            out.append(i)
    return out


def _matmul(inst: Instruction) -> bool:
    if inst.opcode in ("dot", "convolution"):
        return True
    if inst.opcode == "custom-call":
        t = inst.custom_call_target.lower()
        return "gemm" in t or "matmul" in t or "conv" in t
    return inst.opcode == "fusion" and any(
        i.opcode in ("dot", "convolution") for c in inst.called_computations
        for i in c.instructions)


def _fused_ops(inst: Instruction) -> set[str]:
    if inst.opcode != "fusion":
        return {inst.opcode}
    return {i.opcode for c in inst.called_computations for i in c.instructions}


def _pipelinable(comp: Computation, inst: Instruction, done: Instruction | None,
                 what: str) -> bool:
    """Whether XLA's collective pipeliner moves this loop's collective to the iteration
    before (an all-gather of a dynamic slice of loop-invariant state) or after (a
    reduction whose result is written by a dynamic-update-slice into loop state)."""
    if what == "all-gather":
        if "trivially_pipelineable" in inst.attr_text:
            return True
        invariant = _loop_invariant_indices(comp)
        for src in _through(inst.operands, users=False):
            if "dynamic-slice" in _fused_ops(src) and any(
                    (n := _param_index(o)) is not None and n in invariant
                    for o in _through(src.operands, users=False) + list(src.operands)):
                return True
        return False
    return any("dynamic-update-slice" in _fused_ops(u)
               for u in _through(done.users if done is not None else inst.users,
                                 users=True))


# The primitives of JAX's collectives, as the last part of an op_name names them: a
# collective whose op_name ends in another primitive (``dot_general``, ``transpose``) is
# one XLA's partitioner inserted to change a value's sharding.
_COLLECTIVE_PRIMITIVES = ("all_to_all", "ragged_all_to_all", "psum", "pmax", "pmin",
                          "all_gather", "reduce_scatter", "psum_scatter", "ppermute",
                          "pshuffle", "pswapaxes", "pbroadcast", "all_reduce")


def _partitioner_made(inst: Instruction) -> bool:
    """Whether JAX's op_name says no collective primitive of the user's made `inst`: XLA's
    SPMD partitioner inserted it between two operations sharded differently."""
    name = inst.metadata.op_name
    if not name.startswith(("jit(", "pjit(")):
        return False  # not JAX's (torch_xla, TensorFlow): who made it is not said
    return not name.rsplit("/", 1)[-1].startswith(_COLLECTIVE_PRIMITIVES)


def _carried_through(body: Computation, inst: Instruction, done: Instruction | None) -> bool:
    """Whether the loop body's collective reads loop state that changes every iteration
    and its result goes back into state that the body computes with (not only a buffer a
    dynamic-update-slice writes each iteration's slice into, a scan's stacked output):
    the next iteration's kernels all wait for it."""
    root = body.root
    if root.opcode != "tuple":
        return False
    invariant = _loop_invariant_indices(body)
    computed: set[int] = set()  # state elements the body computes with
    for i in body.instructions:
        k = _param_index(i)
        if k is None or k in invariant:
            continue
        if any(u is not root and not _buffer_only(u, i) for u in i.users):
            computed.add(k)
    if not computed:
        return False
    seen: set[int] = set()
    stack = list(inst.operands)
    reads = False
    while stack and not reads:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        k = _param_index(i)
        if k is not None:  # an element of the state: changed every iteration, or not
            reads = k in computed
        elif i.opcode == "parameter":  # the whole state, read as one
            reads = True
        else:
            stack.extend(i.operands)
    if not reads:
        return False
    slots = {id(root.operands[k]) for k in computed if k < len(root.operands)}
    seen.clear()
    stack = [done if done is not None else inst]
    while stack:
        i = stack.pop()
        if id(i) in slots:
            return True
        if id(i) not in seen:
            seen.add(id(i))
            stack.extend(i.users)
    return False


def _buffer_only(user: Instruction, value: Instruction) -> bool:
    """Whether `user` only writes a slice into `value` (a dynamic-update-slice's buffer,
    or a fusion of one taking it as its buffer): no computation reads it."""
    if user.opcode == "dynamic-update-slice":
        return user.operands[0] is value and value not in user.operands[1:]
    return (user.opcode == "fusion" and "dynamic-update-slice" in _fused_ops(user)
            and user.operands.count(value) == 1)


def _body_compute(ctx: AdviceContext, comp: Computation) -> float:
    """One iteration's kernels' time on the roofline: what can hide a transfer."""
    return sum(k.roofline_seconds(ctx.device, k.element_type)
               for k in ctx.graph.kernels_in(comp.name) if k.category != "collective")


def _overlap_fix(ctx: AdviceContext, what: str, in_loop: bool, fix: str) -> str:
    """What to try for an exposed collective: in a loop whose collective XLA's pipeliner
    moves (`fix` ``pipeline``), XLA's flags (the only mechanical fix: checked by
    compiling); outside loops next to a matmul, a collective matmul; else give XLA
    independent work to overlap."""
    if fix == "pipeline":
        return (f"let XLA start the next iteration's {what} during this one: "
                f"XLA_FLAGS='--xla_gpu_enable_pipelined_{_PIPELINED[what]}=true "
                "--xla_gpu_enable_while_loop_double_buffering=true' (it holds two "
                "iterations' data at once: more memory; on the README's FSDP scan step it "
                "hid 57% of the all-gathers and raised the peak by 42%); or unroll the scan "
                "by 2 (lax.scan(..., unroll=2)) so one layer's compute can hide the next "
                "one's transfer")
    if fix.startswith("reshard"):
        return (("each iteration needs its result before it goes on, so unrolling the loop "
                 "hides nothing; " if fix == "reshard-critical" else "")
                + f"XLA's partitioner inserted this {what} to change a value's sharding "
                "between the operation that makes it and the one that reads it (no "
                f"{what.replace('-', '_')} in the code): where the change is not one you "
                "meant, pin the value's sharding with jax.lax.with_sharding_constraint where "
                f"it is made (or give both operations' operands the same spec), and the "
                f"{what} goes; where it is the exchange the algorithm needs (expert "
                "parallelism's token dispatch), split the batch into chunks so one chunk's "
                f"{what} overlaps another's compute")
    if fix == "matmul":
        return (f"overlap the {what} with the matmul beside it (a collective matmul): "
                f"split the matmul into chunks along the sharded axis and run each "
                f"chunk's {what} while the previous chunk multiplies (in shard_map, a "
                "loop of ppermute and partial matmuls), so the transfer hides behind it")
    if in_loop:
        return ("give XLA compute to hide it behind: unroll the loop by 2 (lax.scan(..., "
                "unroll=2)) so one iteration's transfer overlaps the other's compute")
    return ("give XLA independent work to overlap it with: gather the next layer's weights "
            "while this layer computes (a lax.scan over layers lets XLA's scheduler "
            "pipeline them), reduce gradients as each layer's are ready, or split a "
            "tensor-parallel matmul so its reduction overlaps the next part (a collective "
            "matmul)")


def tile_padding(ctx: AdviceContext) -> list[Finding]:
    """On a TPU, a value whose tiled layout (``T(8,128)``) more than doubles its size: a
    short minor dimension is padded to 128 lanes (an ``f32[N,3]``)."""
    if ctx.platform != "tpu":
        return []
    out = []
    at_peak = {v.label for v in ctx.lr.peak_values}
    by_name = {i.name: i for i in ctx.module.instructions()}
    for p in ctx.hardware.padded:
        if p.padding_bytes < PADDING_RATIO * p.logical_bytes:
            continue
        m = _SPACE_RE.search(p.shape)
        space = int(m.group(1)) if m else 0
        if space and not _own_minor_padded(p.shape):
            # On-chip (VMEM, S(1)) and padded only where XLA's layout put a short
            # dimension minor (logits laid out {0,1}, a copy transposed for a matmul):
            # no HBM held, and the program's own minor dimension is not the one padded.
            continue
        out.append(Finding(
            "HS115", "a TPU tiled layout pads a value far beyond its elements",
            f"{p.value} {p.shape} holds {format_bytes(p.logical_bytes)} of elements in "
            f"{format_bytes(p.bytes)} (x{p.bytes / max(1, p.logical_bytes):.1f}"
            + (f", in {_SPACE.get(space, f'memory space S({space})')}" if space else "")
            + "): its minor dimensions are padded to whole tiles",
            _CONV_FIX if _near_convolution(by_name.get(p.value.split("{")[0])) else
            "keep a short dimension out of the minor position: store f32[N, 3] as three "
            "f32[N] arrays (a structure of arrays) and gather or compute on each, or pack "
            "small trailing dimensions together so the minor one is a multiple of 128",
            (Evidence(p.value, "array", p.shape, p.bytes, "", p.source),),
            ctx.saving(peak=p.padding_bytes if p.value in at_peak else 0,
                       traffic=2 * p.padding_bytes),
            place_key("", p.source, p.shape)))
    return out


# A convolution's operand or result padded: XLA lays its feature dimension in the lanes.
_CONV_FIX = (
    "XLA lays a convolution's feature (channel) dimension in the TPU's 128 lanes: give the "
    "layers channel counts that are multiples of 128 (64 channels fill half of each tile); "
    "for an input of a few channels (an RGB image), space-to-depth (2x2 patches as 12 "
    "channels) or a first layer written as a matmul over patches uses the lanes better")


def _near_convolution(inst: Instruction | None) -> bool:
    """Whether `inst` computes a convolution, or a convolution reads it (through moves):
    a conv net's feature map, whose minor dimension XLA chose, not the program's."""
    if inst is None:
        return False

    def convolves(i: Instruction) -> bool:
        if i.opcode == "convolution":
            return True
        return i.opcode == "fusion" and any(
            x.opcode == "convolution" for c in i.called_computations for x in c.instructions)

    if convolves(inst):
        return True
    seen, stack = set(), list(inst.users)
    while stack:
        u = stack.pop()
        if id(u) in seen or len(seen) > 64:
            continue
        seen.add(id(u))
        if convolves(u):
            return True
        if u.opcode in ("bitcast", "copy", "copy-start", "copy-done", "reshape",
                        "get-tuple-element", "transpose"):
            stack.extend(u.users)
    return False


_DIMS_RE = re.compile(r"\[([0-9,]*)\]\{([0-9,]*)")


def _own_minor_padded(shape: str) -> bool:
    """Whether the array's last dimension (the program's minor one) is laid out minor
    and pads to whole 128-lane tiles (an f32[N,3]: 3 of 128 lanes used)."""
    m = _DIMS_RE.search(shape)
    if m is None or not m.group(1) or not m.group(2):
        return True
    dims = [int(x) for x in m.group(1).split(",")]
    order = [int(x) for x in m.group(2).split(",")]
    return order[0] == len(dims) - 1 and dims[-1] % 128 != 0


# -- HS114 -----------------------------------------------------------------------------

def repeated_collective(ctx: AdviceContext) -> list[Finding]:
    """The same collective (opcode, replica groups, dimensions, reduction) on the same
    operands twice in one computation: the second moves data already there.  Not a
    weight gathered again after the first copy's readers ran (`_regathered`), nor the
    copy a jax.checkpoint recompute makes beside the backward pass's (`_rematted`)."""
    out = []
    by_group: dict[str, list] = {}
    for c in ctx.graph.collectives:
        by_group.setdefault(c.group, []).append(c)
    for group, cs in by_group.items():
        if len(cs) < 2:
            continue
        comp = ctx.module.computation(group)
        seen: dict[tuple, Instruction] = {}
        for c in cs:
            inst = comp.by_name.get(c.name)
            if inst is None or not inst.operand_names:
                continue
            key = (inst.opcode, tuple(_source(o).name for o in inst.operands),
                   str(inst.shape), _attrs(inst))
            first = seen.get(key)
            if first is None:
                seen[key] = inst
                continue
            if _regathered(comp, first, inst) or _rematted(first) != _rematted(inst):
                seen[key] = inst
                continue
            moved = c.sent_per_device or c.bytes
            out.append(Finding(
                "HS114", "the same collective runs twice on the same data",
                f"{inst.name} repeats {first.name}: {inst.opcode} of the same operands over "
                f"the same devices ({format_bytes(moved)} per device again)",
                "compute it once and reuse the result (the two calls likely come from two "
                "places in your code that gather or reduce the same array: share it)",
                (ev_inst(inst, "collective"), ev_inst(first, "collective")),
                ctx.saving(link_bytes=moved * ctx.runs(group)),
                place_key(inst.metadata.op_name, str(inst.source or ""), str(inst.shape))))
    return out


def _regathered(comp: Computation, first: Instruction, second: Instruction) -> bool:
    """Whether `second` gathers again what `first` gathered and every reader of `first`
    ran before it: the gathered array was freed in between (FSDP gathers each layer's
    weights for the forward pass and again for the backward pass), so reusing it would
    hold it alive across, trading memory for the transfer: not a repeat to remove."""
    if not first.opcode.startswith("all-gather"):
        return False
    order = {i.name: k for k, i in enumerate(comp.instructions)}
    values = [first] + [u for u in first.users if u.opcode.endswith("-done")]
    readers = [u for v in values for u in v.users if not u.opcode.endswith("-done")]
    return bool(readers) and max(order.get(u.name, 1 << 62) for u in readers) \
        < order.get(second.name, -1)


def _rematted(inst: Instruction) -> bool:
    """Whether `inst` is part of a forward pass jax.checkpoint recomputes: the backward
    pass's own copy of a collective is what the checkpoint trades for memory (it
    recomputes the layer, its gathers included), not a repeat to remove."""
    return "rematted_computation" in inst.metadata.op_name


def _attrs(inst: Instruction) -> tuple[str | None, ...]:
    """What makes two collectives the same besides their operands: devices, dimensions,
    and the reduction by what it computes (two copies of one add computation, as
    torch_xla emits for each call, are the same reduction)."""
    reduction = None
    if inst.called_computations:
        comp = inst.called_computations[0]
        reduction = " ".join(f"{i.opcode}:{i.shape}" for i in comp.instructions)
    return tuple(inst.attr(k) for k in ("replica_groups", "dimensions",
                                        "use_global_device_ids", "source_target_pairs")
                 ) + (reduction,)


def _source(inst: Instruction) -> Instruction:
    """The value `inst` passes on: through copies, bitcasts, reshapes and an element of a
    tuple made right there (the same array reached two ways)."""
    for _ in range(16):
        if inst.opcode in ("copy", "bitcast", "reshape") and inst.operands:
            inst = inst.operands[0]
        elif inst.opcode == "get-tuple-element" and inst.operands \
                and inst.operands[0].opcode == "tuple":
            tup, n = inst.operands[0], gte_index(inst)
            if not 0 <= n < len(tup.operands):
                break
            inst = tup.operands[n]
        else:
            break
    return inst
