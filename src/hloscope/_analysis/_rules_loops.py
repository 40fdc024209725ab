"""The advisor's rules about loops and their state: what an iteration passes to the next
through memory that it need not.

A short loop whose cheap body reads its state from memory every iteration (HS105:
unroll it), a reduction written as a loop over blocks of an array (HS126: one reduction
over the whole array is one kernel), a carry rotated every iteration (HS125: XLA copies
it; compute as many steps per iteration as the rotation is long) and a window shifted
by rewriting the whole state to add a piece (HS127: a ring buffer writes the piece
only), and one position of the state written by choosing over all of it (HS131: a
`dynamic_update_slice` writes the slice in place).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from .._hlo._module import Instruction
from .._units import format_bytes
from ._advice_context import LAUNCH_SECONDS, AdviceContext, ev_inst, ev_kernel, trip_count
from ._findings import Finding, place_key
from ._rules_kernels import _is_library, fused_instructions
from ._walk import gte_index, operand

__all__ = ["loop_state", "reduction_in_blocks", "reduction_in_pieces", "rotated_carry",
           "selected_state", "shifted_state"]

# HS105: loops longer than this, or whose body runs library calls, are not unrolled.
SHORT_LOOP = 16

# HS125: a rotated carry's copies under this share of the program are not worth
# restructuring the loop for.
ROTATION_SHARE = 0.1


# -- HS105 -----------------------------------------------------------------------------

def loop_state(ctx: AdviceContext) -> list[Finding]:
    """A short loop (a known trip count of at most SHORT_LOOP) whose body runs only fused
    kernels reads its state from memory every iteration: unrolled, XLA fuses the
    iterations and the state never leaves the kernel."""
    out = []
    for g in ctx.graph.groups:
        if g.kind != "while body":
            continue
        caller = _caller(ctx, g)
        n = trip_count(caller) if caller is not None else 1
        # (Not the loop counter's scalar add, a kernel of its own on a TPU.)
        kernels = [k for k in ctx.graph.kernels_in(g.name) if k.bytes_out > 64]
        if n < 2 or n > SHORT_LOOP or not kernels \
                or any(k.category != "fusion" or _is_library(k) for k in kernels):
            continue
        if _runs_loops(ctx, g.name):
            # A loop inside the body (an inner scan whose results the outer one stacks):
            # unrolled, each iteration still ends at the inner loop; XLA fuses nothing
            # across it.
            continue
        if any(op == "reduce" for k in kernels for op, _ in k.fused):
            # A reduction (a row's log-density, a norm) needs the whole of what the
            # iteration before made: unrolled, XLA still ends a kernel at each one.
            continue
        state = [e for e in ctx.edges_into_group(g.name) if e.src_kind == "loop state"]
        values = list(dict.fromkeys((e.value, e.bytes, e.shape) for e in state))
        total = sum(b for _, b, _ in values)
        if not values:
            continue
        runs = ctx.runs(g.parent)
        out.append(Finding(
            "HS105", "a short loop keeps its state in memory between iterations",
            f"the body of {g.caller} runs {len(kernels)} kernel(s) in each of its {n} "
            f"iterations and reads its state ({', '.join(f'{v} {s}' for v, _, s in values)}, "
            f"{format_bytes(total)}) from memory each time",
            "the loop is short and its body cheap: unroll it (lax.fori_loop(..., "
            f"unroll={n}) or a Python for loop) so XLA fuses the iterations into one kernel",
            tuple(ev_kernel(k) for k in kernels),
            ctx.saving(traffic=2 * total * (n - 1) * runs,
                       kernels=(len(kernels) * n - 1) * runs),
            place_key(caller.metadata.op_name if caller is not None else g.caller,
                      str(caller.source or "") if caller is not None else "")))
    return out


# -- HS126 -----------------------------------------------------------------------------

def reduction_in_blocks(ctx: AdviceContext) -> list[Finding]:
    """A loop that reduces a block of an array its body never changes (a dynamic slice
    of loop state passed through unchanged) with elementwise work only, and adds the
    result into its state: one reduction over the whole array, written as a sum in
    blocks.  XLA fuses the elementwise work into one reduction kernel over the whole
    array, which keeps nothing larger than the result, so the blocks save no memory and
    cost a kernel launch or more per block."""
    launch = LAUNCH_SECONDS.get(ctx.platform)
    if launch is None:
        return []
    out = []
    for g in ctx.graph.groups:
        if g.kind != "while body" or _runs_loops(ctx, g.name):
            continue
        try:
            body = ctx.module.computation(g.name)
        except Exception:  # noqa: BLE001
            continue
        root = body.root
        if root.opcode != "tuple":
            continue
        caller = _caller(ctx, g)
        n = trip_count(caller) if caller is not None else 1
        kernels = ctx.graph.kernels_in(g.name)
        if n < 2 or not kernels or any(k.category != "fusion" or _is_library(k)
                                       for k in kernels):
            continue
        state = {j: _state_index(body.by_name[name]) for j, name in enumerate(root.operand_names)}
        invariant = {j for j, i in state.items() if i == j}
        reductions = [i for i in body.instructions if _reduces_block(i, invariant)]
        accumulated = [j for j, name in enumerate(root.operand_names)
                       if _accumulates(body.by_name[name], j, reductions)]
        if not reductions or not accumulated:
            continue
        runs = ctx.runs(g.parent)
        saved = (len(kernels) + 1) * n - 1  # each iteration's kernels and its condition
        read: dict[str, int] = {}
        for r in reductions:
            _block_of_state(r, invariant, {}, read)
        whole = sum(read.values())
        out.append(Finding(
            "HS126", "a reduction is computed in blocks by a loop",
            f"the body of {g.caller} reduces a block of an array it never changes "
            f"({format_bytes(whole)} in all) and adds the result into its state, in each "
            f"of {n} iterations ({len(kernels)} kernel(s) each): one reduction over the "
            "whole array is one kernel, and keeps nothing larger than its result",
            "reduce the whole array at once (x.sum(0), (x * x).sum(0)): XLA fuses the "
            "elementwise work into the reduction",
            tuple(ev_inst(r, "reduction of a block") for r in reductions),
            ctx.saving(kernels=saved * runs, seconds=saved * launch * runs),
            place_key(caller.metadata.op_name if caller is not None else g.caller,
                      str(caller.source or "") if caller is not None else "")))
    return out


def _reduces_block(inst: Instruction, invariant: set[int]) -> bool:
    """A fusion that reduces, with elementwise work only, a dynamic slice of loop state
    the body passes through unchanged (its other operands scalars: the block's index),
    directly or through the body's elementwise fusions (a pair block of a slice and the
    whole array, written out and then reduced)."""
    if inst.opcode != "fusion" or "reduce" not in {i.opcode for i in fused_instructions(inst)}:
        return False
    return _block_of_state(inst, invariant, {}, {}) is True


def _block_of_state(inst: Instruction, invariant: set[int], seen: dict[str, bool | None],
                    read: dict[str, int]) -> bool | None:
    """Whether fusion `inst` computes, with elementwise work and reductions only, from
    loop state passed through unchanged: True where a dynamic slice of it is among its
    work or its producers', None where none is, False where anything else comes in.
    `read`: the state arrays it reads, with their bytes."""
    return _sliced_from(inst, lambda o: o.opcode != "copy" and _state_index(o) in invariant,
                        _DYNAMIC_SLICE, seen, read)


def _sliced_from(inst: Instruction, is_root: Callable[[Instruction], bool],
                 slicing: frozenset[str], seen: dict[str, bool | None],
                 read: dict[str, int]) -> bool | None:
    """Whether fusion `inst` computes, with elementwise work and reductions only (in its
    own kernel or the fusions before it), from the arrays `is_root` accepts: True where
    it (or a fusion before it) slices with an op of `slicing`, None where it reads them
    whole, False where other work comes in.  `read` gets those arrays with their bytes."""
    if inst.name in seen:
        return seen[inst.name]
    seen[inst.name] = False
    ops = {i.opcode for i in fused_instructions(inst)}
    if inst.opcode != "fusion" or ops & _NOT_BLOCK_WORK:
        return False
    sliced: bool | None = True if ops & slicing else None
    for o in inst.operands:
        if not o.shape.rank:
            continue
        if is_root(o):
            read[o.name] = o.shape.total_byte_size
            continue
        up = _sliced_from(o, is_root, slicing, seen, read)
        if up is False:
            return False
        sliced = sliced or up
    seen[inst.name] = sliced
    return sliced


_NOT_BLOCK_WORK = frozenset({
    "dot", "convolution", "fft", "custom-call", "gather", "scatter", "sort", "while",
    "reduce-window", "dynamic-update-slice"})
_DYNAMIC_SLICE = frozenset({"dynamic-slice"})
_SLICES = frozenset({"slice", "dynamic-slice"})
_OUTSIDE = frozenset({"parameter", "get-tuple-element", "bitcast", "copy"})


def _accumulates(out: Instruction, j: int, reductions: list[Instruction]) -> bool:
    """Whether `out` (element `j` of the body's result) is element `j` of the state
    plus a block's reduction."""
    ops = [operand(o, 0) if o.opcode == "get-tuple-element" else o for o in out.operands]
    if not any(o in reductions for o in ops) \
            or not any(_state_index(o) == j for o in out.operands):
        return False
    if out.opcode == "add":
        return True
    if out.opcode != "fusion":
        return False
    fused = list(fused_instructions(out))
    # The sum added as it is or scaled by a constant (0.5 * the block's sum).
    return {i.opcode for i in fused} <= {"add", "parameter", "bitcast", "reshape",
                                         "broadcast", "convert", "multiply", "constant"} \
        and all(any(_constant(o) for o in i.operands) for i in fused if i.opcode == "multiply")


def _constant(inst: Instruction) -> bool:
    while inst.opcode in ("broadcast", "convert", "bitcast", "reshape") and inst.operands:
        inst = operand(inst, 0)
    return inst.opcode == "constant"


# -- HS129 -----------------------------------------------------------------------------

# HS129: fewer pieces than this are not a loop's worth of kernels.
MIN_PIECES = 4
_SUMS_ONLY = frozenset({"reduce", "add", "parameter", "constant", "bitcast", "reshape",
                        "convert", "copy"})
_THROUGH_SUM = frozenset({"bitcast", "reshape", "convert", "copy", "get-tuple-element"})


def reduction_in_pieces(ctx: AdviceContext) -> list[Finding]:
    """Outside loops, on a GPU: copies of one computation (the same fused work, op_name
    and line) each reduce, with elementwise work only, a slice of the same arrays, and
    their results are only added together: one reduction written in pieces, a Python
    loop over strips or chunks.  XLA cannot merge the pieces; one reduction over the
    whole array is one kernel (or two) where the pieces launch their own each."""
    launch = LAUNCH_SECONDS.get(ctx.platform)
    if launch is None:
        return []
    entry = ctx.module.entry
    kinds: dict[tuple[object, ...], list[Instruction]] = {}
    for k in ctx.graph.kernels_in(entry.name):
        inst = ctx.inst(k)
        if inst is None or inst.opcode != "fusion":
            continue
        if "reduce" not in {i.opcode for i in fused_instructions(inst)}:
            continue
        roots: dict[str, int] = {}
        if _slice_of(inst, roots, {}):
            kinds.setdefault((k.op_name, k.source, k.fused, tuple(sorted(roots))),
                             []).append(inst)
    # A reduction's second stage is its piece's, not a piece of its own.
    later = {x.name for insts in kinds.values() for i in insts for x in _chain(i)[1:]}
    pieces = [kept for insts in kinds.values()
              if len(kept := [i for i in insts if i.name not in later]) >= MIN_PIECES
              and all(_only_summed(i, set()) for i in kept)]
    if not pieces:
        return []
    # Each piece's kernels: the slice's reduction and the reductions of its result
    # (XLA's second stage) before the sums.
    chains = [_chain(i) for insts in pieces for i in insts]
    saved = sum(len(c) for c in chains) - sum(len(_chain(insts[0])) for insts in pieces)
    runs = ctx.runs(entry.name)
    if any(f.place.endswith("|" + entry.name) and f.saving.kernels >= saved * runs
           for f in ctx.found.get("HS121", ())):
        # HS121 batches the entry's small kernels, these pieces among them: the same
        # kernels and the same fix (one operation over the whole array), said once there.
        return []
    first = pieces[0][0]
    read = {r: size for insts in pieces for r, size in _roots(insts[0]).items()}
    return [Finding(
        "HS129", "one reduction is computed in pieces",
        f"{sum(len(x) for x in pieces)} kernels reduce slices of the same array(s) "
        f"({format_bytes(sum(read.values()))} in all), {len(pieces)} computation(s) "
        f"{', '.join(str(len(x)) for x in pieces)} times each, and their results are only "
        "added together: one reduction written in pieces (a loop over strips or chunks), "
        f"{sum(len(c) for c in chains)} kernels where one reduction over the whole array "
        "is one or two",
        "reduce the whole array at once (jnp.sum(f(x), axis=...)): XLA fuses the "
        "elementwise work into one reduction, which keeps nothing larger than its result "
        "(the pieces save no memory)",
        tuple(ev_inst(i, "reduction of a slice") for i in (x[0] for x in pieces)),
        ctx.saving(kernels=saved * runs, seconds=saved * launch * runs),
        place_key(first.metadata.op_name if first.metadata else "",
                  str(first.source or "")))]


def _slice_of(inst: Instruction, roots: dict[str, int],
              seen: dict[str, bool | None]) -> bool | None:
    """Whether fusion `inst` computes, with elementwise work and reductions only (in its
    own kernel or the fusions before it), from arrays it does not compute: True where it
    slices them (or a fusion before it does), None where it reads them whole, False
    where other work comes in.  `roots` gets those arrays with their bytes."""
    return _sliced_from(inst, lambda o: o.opcode in _OUTSIDE, _SLICES, seen, roots)


def _roots(inst: Instruction) -> dict[str, int]:
    roots: dict[str, int] = {}
    _slice_of(inst, roots, {})
    return roots


def _only_summed(inst: Instruction, seen: set[str]) -> bool:
    """Whether `inst`'s result is only added to others (through reductions of it, XLA's
    second stage, and bitcasts, converts and tuples), nothing else done with it."""
    if inst.name in seen:
        return True
    seen.add(inst.name)
    if not inst.users:
        return False
    for u in inst.users:
        if u.opcode in _THROUGH_SUM or _second_stage(u):
            if not _only_summed(u, seen):
                return False
        elif u.opcode == "add":
            continue
        elif u.opcode != "fusion" or not _added_in(u, inst):
            return False
    return True


def _second_stage(inst: Instruction) -> bool:
    """A fusion that only reduces its input further (XLA's second stage of a reduction)."""
    ops = {i.opcode for i in fused_instructions(inst)} if inst.opcode == "fusion" else set()
    return "reduce" in ops and ops <= _SUMS_ONLY - {"add"}


def _added_in(fusion: Instruction, value: Instruction) -> bool:
    """Whether fusion `fusion` only adds `value` (its parameter for it) to something."""
    numbers = {n for n, o in enumerate(fusion.operands) if o is value}
    for comp in fusion.called_computations:
        for p in comp.parameters:
            if p.parameter_number not in numbers:
                continue
            stack = list(p.users)
            while stack:
                u = stack.pop()
                if u.opcode in _THROUGH_SUM:
                    stack.extend(u.users)
                elif u.opcode != "add":
                    return False
    return bool(numbers)


def _chain(inst: Instruction) -> list[Instruction]:
    """`inst` and the reductions of its result before the sums (XLA's second stage)."""
    out = [inst]
    while len(inst.users) == 1 and _second_stage(inst.users[0]):
        inst = inst.users[0]
        out.append(inst)
    return out


# -- HS125 -----------------------------------------------------------------------------

def rotated_carry(ctx: AdviceContext) -> list[Finding]:
    """A loop whose body returns an element of its state at another index of the state
    (`(u, u_prev) -> (new, u)`: a carry rotated): the new value cannot be written over
    the old one, so XLA copies the state in the body every iteration.  Computing as many
    steps per iteration as the rotation is long lets each new value overwrite the oldest
    in place."""
    out = []
    for g in ctx.graph.groups:
        if g.kind != "while body":
            continue
        try:
            body = ctx.module.computation(g.name)
        except Exception:  # noqa: BLE001
            continue
        root = body.root
        if root.opcode != "tuple":
            continue
        moved = []
        for j, name in enumerate(root.operand_names):
            i = _state_index(body.by_name[name])
            if i is not None and i != j:
                moved.append((i, j))
        # The rotated elements' copies (not one into another layout, nor the counter's).
        rotated = {x for pair in moved for x in pair}
        copies = [c for c in body.instructions
                  if c.opcode == "copy" and _state_index(c) in rotated
                  and str(c.shape) == str(operand(c, 0).shape) and c.shape.total_byte_size > 64]
        copies.sort(key=lambda c: not c.metadata.op_name)  # one that names the code first
        if not moved or not copies:
            continue
        size = sum(c.shape.total_byte_size for c in copies)
        caller = _caller(ctx, g)
        n = trip_count(caller) if caller is not None else 1
        runs = ctx.runs(g.name)
        saving = ctx.saving(traffic=2 * size * runs, kernels=len(copies) * runs)
        if ctx.share(saving)[0] < ROTATION_SHARE:
            continue  # restructuring the loop for a few percent: not worth a line
        out.append(Finding(
            "HS125", "a loop's state is rotated and copied every iteration",
            f"the body of {g.caller} returns its state rotated ("
            + ", ".join(f"element {i} as element {j}" for i, j in moved)
            + f"), so XLA copies the state in every iteration ({len(copies)} copies, "
            f"{format_bytes(size)}" + (f", {n} iterations" if n > 1 else "") + ")",
            "compute as many steps per iteration as the rotation is long (lax.fori_loop(..., "
            "unroll=2) for `(new, u)`), so each new value overwrites the oldest in place",
            tuple(ev_inst(c, "copy of the loop state") for c in copies), saving,
            place_key(caller.metadata.op_name if caller is not None else g.caller,
                      str(caller.source or "") if caller is not None else "")))
    return out


def _body_results(ctx: AdviceContext, through: tuple[str, ...]
                  ) -> Iterator[tuple[Any, int, Instruction, list[Instruction]]]:
    """Each while body's results: (its kernel group, the element's index in the state,
    the instruction that computes it, XLA's copies of it on the way to the root), seen
    through the opcodes `through` (copies among them are counted)."""
    for g in ctx.graph.groups:
        if g.kind != "while body":
            continue
        try:
            body = ctx.module.computation(g.name)
        except Exception:  # noqa: BLE001
            continue
        root = body.root
        if root.opcode != "tuple":
            continue
        for j, name in enumerate(root.operand_names):
            new = body.by_name[name]
            copies = []
            while new.opcode in through and new.operands:
                if new.opcode == "copy":
                    copies.append(new)
                new = operand(new, 0)
            yield g, j, new, copies


# -- HS127 -----------------------------------------------------------------------------

def shifted_state(ctx: AdviceContext) -> list[Finding]:
    """A loop whose body writes an element of its state whole as a concatenation of a
    slice of that element and a small new piece (`concatenate([buf[1:], x])`: a window
    shifted by one step): each iteration rewrites the whole element to add the piece,
    where a ring buffer (`dynamic_update_slice` at `i % n`) writes only the piece."""
    out = []
    for g, j, new, copies in _body_results(ctx, through=("copy",)):
        piece = _shifted_piece(new, j)
        if piece is None:
            continue
        size = new.shape.total_byte_size
        caller = _caller(ctx, g)
        n = trip_count(caller) if caller is not None else 1
        runs = ctx.runs(g.name)
        moved = size - piece + sum(c.shape.total_byte_size for c in copies)
        out.append(Finding(
            "HS127", "a loop shifts its state to add a piece of it",
            f"the body of {g.caller} writes element {j} of its state "
            f"({new.shape}, {format_bytes(size)}) whole, as a slice of itself and a new "
            f"piece of {format_bytes(piece)}"
            + (f" (and XLA copies it: {len(copies)} cop{'y' if len(copies) == 1 else 'ies'})"
               if copies else "") + (f", in each of {n} iterations" if n > 1 else ""),
            "keep the window as a ring buffer: write the new piece with "
            "lax.dynamic_update_slice at i % n and read the window at indices from "
            "(i - k) % n, so each iteration writes the piece only",
            tuple([ev_inst(new, "state rewritten whole")]
                  + [ev_inst(c, "copy of the state") for c in copies]),
            ctx.saving(traffic=2 * moved * runs, kernels=len(copies) * runs),
            place_key(new.metadata.op_name, str(new.source or ""), str(new.shape))))
    return out


def _shifted_piece(inst: Instruction, j: int) -> int | None:
    """The bytes of the new piece where `inst` (element `j` of a loop body's result)
    concatenates a slice of element `j` of the state with pieces no larger than what it
    keeps of it (the window's older part, rewritten to move it by a step); None where it
    does not."""
    if inst.opcode == "fusion" and inst.called_computations:
        fused = inst.called_computations[0].root
        params = inst.operands
    else:
        fused, params = inst, None
    if fused.opcode != "concatenate":
        return None

    def state_of(x: Instruction) -> int | None:
        if params is None:
            return _state_index(x)
        if x.opcode == "parameter" and 0 <= x.parameter_number < len(params):
            return _state_index(params[x.parameter_number])
        return None

    kept, piece = 0, 0
    for o in fused.operands:
        src = o
        while src.opcode in ("bitcast", "reshape"):
            src = operand(src, 0)
        if src.opcode == "slice" and state_of(operand(src, 0)) == j:
            kept += o.shape.total_byte_size
        else:
            piece += o.shape.total_byte_size
    if not kept or not piece or piece > kept:
        return None
    return piece


# -- HS131 -----------------------------------------------------------------------------

def selected_state(ctx: AdviceContext) -> list[Finding]:
    """A loop whose body writes one position of an element of its state by choosing over
    all of it: ``jnp.where(positions == t, new, cache)``, or a one-hot mask multiplied in
    (``cache * (1 - onehot) + new * onehot``, ``cache + onehot * new``): each iteration
    reads and writes the whole element to change one slice of it, where
    ``lax.dynamic_update_slice`` (``cache.at[:, t].set(new)``) writes the slice in place."""
    out = []
    for g, j, new, copies in _body_results(ctx, through=("copy", "bitcast")):
        positions = _selected_positions(new, j)
        if positions is None:
            continue
        size = new.shape.total_byte_size
        piece = size // positions
        caller = _caller(ctx, g)
        n = trip_count(caller) if caller is not None else 1
        runs = ctx.runs(g.name)
        moved = size - piece + sum(c.shape.total_byte_size for c in copies)
        out.append(Finding(
            "HS131", "a loop writes one slice of its state by choosing over all of it",
            f"the body of {g.caller} writes element {j} of its state ({new.shape}, "
            f"{format_bytes(size)}) whole to change one of its {positions:,} positions: "
            "it chooses between the new value and the old one at every element (a mask "
            "of one position, from comparing an iota with the step), reading and "
            "writing all of it" + (f" in each of {n} iterations" if n > 1 else ""),
            "write the slice in place: lax.dynamic_update_slice(state, new[None], "
            "(t, 0, ...)), or state.at[t].set(new) (on the axis of the mask), which XLA "
            "updates in place in the loop, writing only the slice",
            tuple([ev_inst(new, "state rewritten whole")]
                  + [ev_inst(c, "copy of the state") for c in copies]),
            ctx.saving(traffic=2 * moved * runs, kernels=len(copies) * runs),
            place_key(new.metadata.op_name, str(new.source or ""), str(new.shape))))
    return out


def _selected_positions(inst: Instruction, j: int) -> int | None:
    """How many positions element `j` of a loop body's state has along the axis where
    `inst` (that element's new value) keeps all but one of them from the state and takes
    one from elsewhere, by a select or a one-hot product whose mask compares an iota
    along that axis with one position; None where it does not."""
    root: Instruction | None
    if inst.opcode == "get-tuple-element" and inst.operands \
            and inst.operands[0].opcode == "fusion":  # one result of a multi-output fusion
        fusion = inst.operands[0]
        froot = fusion.called_computations[0].root if fusion.called_computations else None
        idx = gte_index(inst)
        if froot is None or froot.opcode != "tuple" or not 0 <= idx < len(froot.operands):
            return None
        root, params = froot.operands[idx], fusion.operands
    elif inst.opcode == "fusion" and inst.called_computations:
        root, params = inst.called_computations[0].root, inst.operands
    else:
        root, params = inst, None
    if root is None:
        return None

    def is_state(x: Instruction) -> bool:
        while x.opcode in ("bitcast", "reshape", "copy", "convert") and x.operands:
            x = operand(x, 0)
        if params is not None:
            n = x.parameter_number if x.opcode == "parameter" else None
            if n is None or not 0 <= n < len(params):
                return False
            x = params[n]
            while x.opcode == "bitcast" and x.operands:
                x = operand(x, 0)
        return _state_index(x) == j

    while root.opcode in ("bitcast", "reshape", "convert") and root.operands:
        root = operand(root, 0)
    if root.shape.dims != inst.shape.dims and \
            math.prod(root.shape.dims) != math.prod(inst.shape.dims):
        return None
    if root.opcode == "select" and len(root.operands) == 3:
        kept = [o for o in root.operands[1:] if is_state(o)]
        if len(kept) != 1:
            return None
        return _one_position(root.operands[0], root.shape.dims)
    if root.opcode == "add" and len(root.operands) == 2:
        # cache * (1 - onehot) + new * onehot, or cache + onehot * new
        a, b = root.operands
        for state, other in ((a, b), (b, a)):
            if is_state(state) and other.opcode == "multiply":
                masks = [_one_position(o, root.shape.dims) for o in other.operands]
            elif state.opcode == "multiply" and any(is_state(o) for o in state.operands) \
                    and other.opcode == "multiply":
                masks = [_one_position(o, root.shape.dims)
                         for o in (*state.operands, *other.operands) if not is_state(o)]
            else:
                continue
            found = [m for m in masks if m is not None]
            if found:
                return found[0]
    return None


def _one_position(mask: Instruction, dims: tuple[int, ...]) -> int | None:
    """The length of the axis along which `mask` (of an array of `dims`) picks one
    position: a comparison for equality of an iota along it with anything not from an
    iota (through broadcasts, converts and ``1 - m``); None for any other mask."""
    for _ in range(12):
        mask = _across_fusions(mask)
        if mask.opcode in ("broadcast", "convert", "bitcast", "reshape") and mask.operands:
            mask = operand(mask, 0)
        elif mask.opcode == "subtract" and len(mask.operands) == 2 \
                and mask.operands[0].opcode in ("constant", "broadcast"):
            mask = mask.operands[1]
        else:
            break
    if mask.opcode != "compare" or mask.attr("direction") not in ("EQ", "NE") \
            or len(mask.operands) != 2:
        return None
    iotas = [_iota_of(o) for o in mask.operands]
    if sum(i is not None for i in iotas) != 1:
        return None
    iota = next(i for i in iotas if i is not None)
    length = iota.shape.dims[_iota_axis(iota)] if iota.shape.dims else 0
    return length if length >= 2 and length in dims else None


def _iota_of(x: Instruction) -> Instruction | None:
    for _ in range(8):
        x = _across_fusions(x)
        if x.opcode == "iota":
            return x
        if x.opcode == "get-tuple-element" and (init := _invariant_init(x)) is not None:
            x = init  # an iota made before the loop and passed through it
            continue
        if x.opcode not in ("broadcast", "convert", "bitcast", "reshape") or not x.operands:
            return None
        x = operand(x, 0)
    return None


def _across_fusions(x: Instruction) -> Instruction:
    """`x` seen across kernels' boundaries: a fused computation's parameter as its fusion's
    operand, a fusion's result as its fused root (an element of a multi-output fusion's):
    XLA may compute a mask, or its iota, in a kernel of its own."""
    for _ in range(8):
        comp = x.computation
        if x.opcode == "parameter" and comp is not None and comp.module is not None:
            callers = [c for c in comp.module.callers(comp) if c.opcode == "fusion"]
            n = x.parameter_number
            if len(callers) != 1 or n is None or not 0 <= n < len(callers[0].operands):
                return x
            x = callers[0].operands[n]
        elif x.opcode == "fusion" and x.called_computations \
                and x.called_computations[0].root is not None:
            x = x.called_computations[0].root
        elif x.opcode == "get-tuple-element" and x.operands \
                and x.operands[0].opcode == "fusion" and x.operands[0].called_computations:
            root = x.operands[0].called_computations[0].root
            idx = gte_index(x)
            if root is None or root.opcode != "tuple" or not 0 <= idx < len(root.operands):
                return x
            x = root.operands[idx]
        else:
            return x
    return x


def _invariant_init(x: Instruction) -> Instruction | None:
    """Where `x` is an element of a loop body's state that the body passes through
    unchanged, the value the loop starts it with; else None."""
    comp = x.computation
    if not x.operands or x.operands[0].opcode != "parameter" or comp is None \
            or comp.module is None or comp.root is None or comp.root.opcode != "tuple":
        return None
    idx = gte_index(x)
    if not 0 <= idx < len(comp.root.operands) or _state_index(comp.root.operands[idx]) != idx:
        return None
    loops = [c for c in comp.module.callers(comp) if c.opcode == "while" and c.operands]
    if len(loops) != 1:
        return None
    init = loops[0].operands[0]
    return init.operands[idx] if init.opcode == "tuple" and idx < len(init.operands) else None


def _iota_axis(iota: Instruction) -> int:
    text = (iota.attr("iota_dimension") or "0").strip("{}")
    try:
        return int(text)
    except ValueError:
        return 0


def _state_index(inst: Instruction) -> int | None:
    """Which element of a loop body's state `inst` is, unchanged (through copies)."""
    while inst.opcode == "copy":
        inst = operand(inst, 0)
    if inst.opcode == "get-tuple-element" and operand(inst, 0).opcode == "parameter":
        return gte_index(inst)
    return None


def _runs_loops(ctx: AdviceContext, name: str) -> bool:
    """Whether computation `name` runs a loop or a conditional of its own."""
    try:
        comp = ctx.module.computation(name)
    except Exception:  # noqa: BLE001
        return False
    return any(i.opcode in ("while", "conditional") for i in comp.instructions)


def _caller(ctx: AdviceContext, g) -> Instruction | None:  # type: ignore[no-untyped-def]
    try:
        return ctx.module.computation(g.parent).by_name.get(g.caller)
    except Exception:  # noqa: BLE001
        return None
