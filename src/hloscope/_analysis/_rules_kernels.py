"""The advisor's rules about kernels: what breaks fusion and what passes through memory.

They encode what seed 004 works out by staring at graphs, each made precise enough that
acting on a finding saves what it says: a reduction over a short axis split from its
producer (HS101), constants folded into the program (HS102), copies that only change
the layout next to library calls (HS103) and cheap values stored instead of recomputed
(HS104).  What loops do with their state (HS105, HS125-HS127) is in `_rules_loops`.
"""

from __future__ import annotations

from collections.abc import Iterator

from .._hlo._module import Instruction
from .._hlo._shape import Shape
from .._units import format_bytes
from ._advice_context import AdviceContext, ev_inst, ev_kernel
from ._findings import Finding, place_key
from ._kernels import Kernel
from ._rules_program import _multiplied, _onehot_operand, _solver
from ._walk import operand

__all__ = ["fused_instructions", "gathered_weight", "large_constant", "layout_copy",
           "recompute", "reduction_split"]

# HS101: a reduced axis this short can be written out as a sum by hand.
SHORT_AXIS = 8
# HS102: constants smaller than this are not worth a line.
LARGE_CONSTANT_BYTES = 512 * 1024
_CHEAP_OPS = frozenset({"iota", "broadcast", "constant", "add", "subtract", "multiply", "negate",
                        "convert", "compare", "select", "maximum", "minimum", "and", "or", "not",
                        "reshape", "concatenate", "slice", "abs", "xor", "shift-left",
                        "shift-right-logical", "shift-right-arithmetic", "clamp", "copy",
                        "bitcast"})
_LAYOUT_OPS = frozenset({"copy", "transpose", "bitcast", "reshape"})
# What a library runs: FFTs, matmuls and convolutions (on every backend), custom calls.
_LIBRARY = frozenset({"fft", "library call", "dot", "convolution"})


def fused_instructions(inst: Instruction) -> Iterator[Instruction]:
    """Every instruction inside fusion `inst` (nested fusions included); `inst` itself for
    an instruction that is not a fusion."""
    if inst.opcode != "fusion":
        yield inst
        return
    stack = list(inst.called_computations)
    while stack:
        comp = stack.pop()
        for i in comp.instructions:
            if i.opcode == "fusion":
                stack.extend(i.called_computations)
            else:
                yield i


def _layout_source(inst: Instruction, through: frozenset[str] = _LAYOUT_OPS) -> Instruction:
    """`inst` seen back through what only moves or re-lays its elements (`through`:
    bitcasts, copies, transposes, reshapes) and get-tuple-elements, and fusions of only
    those (XLA's copy of an all-gather's result into the layout a matmul reads)."""
    while inst.operands:
        if inst.opcode in through or inst.opcode == "get-tuple-element":
            inst = inst.operands[0]
            continue
        # A fusion of those, of one array (and scalars: a dynamic slice's indices).
        arrays = [o for o in inst.operands if o.opcode != "constant" and o.shape.dims]
        if inst.opcode == "fusion" and len(arrays) == 1 and all(
                i.opcode in through or i.opcode in ("parameter", "constant")
                for i in fused_instructions(inst)):
            inst = arrays[0]
        else:
            break
    return inst


# What a sharded weight passes through on its way to its all-gather: a layer's slice of
# the stacked weights, moved.
_SLICES = _LAYOUT_OPS | {"slice", "dynamic-slice"}


def gathered_weight(inst: Instruction) -> bool:
    """Whether `inst` is an all-gather's result, or XLA's copy of one in another layout,
    of an argument (a sharded weight, or a layer's slice of the stacked weights): FSDP's
    gathered weight, not an activation gathered for sequence or tensor parallelism.  A
    slice of one counts too: one weight of a layer's gathered weights (w[0], w[1]), each
    full, as XLA slices them out of one all-gather of the layer's stacked slice."""
    src = _layout_source(inst, _SLICES)
    while src.opcode in ("all-gather-done", "async-done") and src.operands:
        src = src.operands[0]
    if src.opcode == "async-start":
        wrapped = src.called_computations
        if not wrapped or not wrapped[0].instructions or \
                wrapped[0].root.opcode != "all-gather":
            return False
    elif src.opcode not in ("all-gather", "all-gather-start"):
        return False
    return bool(src.operands) and _layout_source(src.operands[0], _SLICES).opcode == "parameter"


def _is_library(k: Kernel | None) -> bool:
    if k is None:
        return False
    if k.category in _LIBRARY or k.opcode in ("dot", "convolution", "fft", "custom-call"):
        return True
    fused = dict(k.fused)
    return bool(fused.keys() & {"dot", "convolution", "fft"})


# -- HS101 -----------------------------------------------------------------------------

def reduction_split(ctx: AdviceContext) -> list[Finding]:
    """A kernel reduces over an axis of at most SHORT_AXIS elements what a fused kernel
    wrote to memory just for it: written out by hand, the sum fuses with its producer."""
    out = []
    for k in ctx.kernels_with.get("reduce", ()):
        if k.opcode == "reduce" and "reduce_" not in k.op_name.rsplit("/", 1)[-1]:
            continue  # (an unfused reduction: its op_name is the kernel's, below)
        inst = ctx.inst(k)
        if inst is None:
            continue
        # Reductions the user wrote (jnp.sum, mean, max: op_name reduce_*); XLA's own,
        # such as a split-K matmul's, are not the user's to write out.
        axes = [_reduced_elements(r) for r in fused_instructions(inst) if r.opcode == "reduce"
                and "reduce_" in r.metadata.op_name.rsplit("/", 1)[-1]]
        if not axes:
            continue
        feeds = [e for e in ctx.edges_to.get(k.name, ()) if e.src_kind == "kernel"
                 and e.kind != "argument"]
        producers, matmuls = [], []
        for e in feeds:
            p = ctx.kernel(e.src)
            readers = {x.dst for x in ctx.edges_from.get(e.src, ()) if x.value == e.value}
            if p is None or p.group != k.group or readers != {k.name}:
                continue
            if max(axes) <= SHORT_AXIS and p.category == "fusion" and not _is_library(p) \
                    and not set(dict(p.fused)) & _NOT_ELEMENTWISE \
                    and _reduces_from(inst, p.name):
                producers.append((p, e))
            elif _is_matmul(ctx, p) and _sums_linearly(inst, p.name):
                matmuls.append((p, e))
        if not producers and not matmuls:
            continue
        runs = ctx.runs(k.group)
        if not matmuls:
            moved = sum(e.bytes for _, e in producers)
            detail = "wrote to memory just for it"
            fix = ("the reduced axis is short: write the sum out (x[..., 0] + x[..., 1] + "
                   "...) instead of jnp.sum/mean over it, so XLA fuses it with what "
                   "produces x")
        else:
            # A sum over a short axis of a matmul's product (times weights that do not
            # depend on it): the matmul can contract that axis itself, and its larger
            # product is never written (experts' outputs summed with their gates, heads
            # projected and then summed).
            producers = matmuls
            moved = sum(e.bytes for _, e in producers)
            detail = ("wrote to memory just for it: a matmul's product summed over an "
                      "axis it did not contract")
            fix = ("contract that axis in the matmul instead of summing its product (a "
                   "weighted sum is linear): sum or average the weights over it first "
                   "(x @ w.mean(0)), or write one einsum that contracts it "
                   "(jnp.einsum('etf,efd,te->td', h, w, gates) for a gated sum over e), so "
                   "the larger product is never written")
        saving = ctx.saving(peak=sum(e.bytes for _, e in producers if e.live_at_peak),
                            traffic=2 * moved * runs, kernels=runs)
        out.append(Finding(
            "HS101", "a reduction splits what could be one kernel",
            f"{k.name} sums over an axis of {max(axes)} element(s) in its own kernel and "
            f"reads {format_bytes(moved)} that {', '.join(p.name for p, _ in producers)} "
            + detail, fix,
            tuple([ev_kernel(k)] + [ev_kernel(p) for p, _ in producers]), saving,
            place_key(k.op_name, k.source, k.shape)))
    return out


def _is_matmul(ctx: AdviceContext, k: Kernel) -> bool:
    """Whether kernel `k` is a matmul (a dot, a GEMM fusion, a cuBLAS call)."""
    inst = ctx.inst(k)
    if inst is None:
        return False
    if inst.opcode == "custom-call":
        return "gemm" in inst.custom_call_target.lower() or "matmul" in \
            inst.custom_call_target.lower()
    return any(i.opcode == "dot" for i in fused_instructions(inst))


# What a weighted sum passes through: the product times weights, moved or converted.
_LINEAR = frozenset({"multiply", "divide", "negate", "convert", "bitcast", "broadcast",
                     "reshape", "transpose", "copy", "get-tuple-element"})


def _sums_linearly(inst: Instruction, producer: str) -> bool:
    """Whether kernel `inst` only sums `producer`'s value, times factors that do not
    depend on it (a weighted sum: linear, so a matmul making that value could contract
    the summed axis itself): every path from it reaches an add-reduction through
    `_LINEAR` operations, each product or quotient with one side from it."""
    mine = [n for n, o in enumerate(inst.operands) if _moved(o).name == producer]
    if inst.opcode != "fusion" or not inst.called_computations or not mine:
        return False
    comp = inst.called_computations[0]
    derived = {id(i) for i in comp.instructions
               if i.opcode == "parameter" and i.parameter_number in mine}
    reached = False
    for i in comp.instructions:  # in the computation's order: operands first
        if id(i) in derived or not any(id(o) in derived for o in i.operands):
            continue
        if i.opcode == "reduce":
            root = i.called_computations[0].root if i.called_computations else None
            if root is None or root.opcode != "add" or id(i.operands[0]) not in derived \
                    or "reduce_" not in i.metadata.op_name.rsplit("/", 1)[-1] \
                    or len(i.dimensions) != 1 or len(i.shape.dims) < 2:
                # (Only a sum over one axis that keeps the product's rows and columns: a
                # loss summed over everything is not a contraction to move.)
                return False
            reached = True
            continue  # the sum: what follows it is after the reduction
        if i.opcode not in _LINEAR or (i.opcode in ("multiply", "divide") and (
                sum(id(o) in derived for o in i.operands) != 1
                or i.opcode == "divide" and id(i.operands[1]) in derived)):
            return False
        derived.add(id(i))
    return reached


# A producer that does more than elementwise work or gathers (a matmul, a sort, another
# reduction) is a kernel of its own whatever the sum is written as.  (A gather's rows
# summed over a short axis are not: the sum of the gathered slices fuses into the
# gathers, a TPU's gather kernel included.)
_NOT_ELEMENTWISE = frozenset({"scatter", "sort", "dot", "convolution", "fft", "reduce",
                              "reduce-window", "while", "call"})
_MOVES = frozenset({"bitcast", "get-tuple-element", "copy", "reshape"})


def _moved(inst: Instruction) -> Instruction:
    while inst.opcode in _MOVES and inst.operands:
        inst = inst.operands[0]
    return inst


def _reduces_from(inst: Instruction, producer: str) -> bool:
    """Whether kernel `inst` reduces what `producer` made: the producer's value reaches
    the reduction's input (through elementwise work), not only what the kernel does with
    the sum (an array added to it after the reduction splits nothing from it)."""
    mine = [n for n, o in enumerate(inst.operands) if _moved(o).name == producer]
    if inst.opcode != "fusion" or not inst.called_computations:
        return 0 in mine
    stack = [i for i in inst.called_computations[0].instructions
             if i.opcode == "parameter" and i.parameter_number in mine]
    seen: set[int] = set()
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        for u in i.users:
            if u.opcode == "reduce":
                n_in = len(u.operand_names) // 2
                if any(o is i for o in u.operands[:n_in]):
                    return True
                continue  # an init value, or past the reduction
            if u.opcode == "fusion":
                return True  # a nested fusion: not followed, taken as reaching it
            stack.append(u)
    return False


def _reduced_elements(reduce: Instruction) -> int:
    try:
        src = operand(reduce, 0)
        dims = src.shape.dims
        n = 1
        for d in reduce.dimensions:
            n *= dims[d] if 0 <= d < len(dims) else 1
        return n
    except Exception:  # a damaged reduce: not this rule's to judge  # noqa: BLE001
        return 1 << 30


# -- HS102 -----------------------------------------------------------------------------

def large_constant(ctx: AdviceContext) -> list[Finding]:
    out = []
    for comp in ctx.module.computations:
        for inst in comp.instructions:
            if inst.opcode != "constant":
                continue
            size = inst.shape.total_byte_size
            if size < LARGE_CONSTANT_BYTES:
                continue
            users = [u.name for u in inst.users]
            out.append(Finding(
                "HS102", "a large constant is folded into the program",
                f"{inst.name} is a {format_bytes(size)} constant ({inst.shape}) baked into "
                "the compiled program" + (f", read by {', '.join(users[:3])}" if users else ""),
                "pass the array as an argument instead of closing over a NumPy array or "
                "computing it from trace-time values: constants cost device memory, "
                "compile time and executable size",
                (ev_inst(inst, "constant"),),
                # XLA keeps a constant in device memory beside the peak, not in it, unless
                # it is among the values live there.
                ctx.saving(footprint=size) if inst.name in ctx.constants_outside_peak
                else ctx.saving(peak=size),
                place_key(inst.metadata.op_name, str(inst.source or ""), str(inst.shape))))
    return out


# -- HS103 -----------------------------------------------------------------------------

def layout_copy(ctx: AdviceContext) -> list[Finding]:
    """A kernel that only copies into another layout, next to a library call (an FFT, a
    matmul, a convolution): keeping the data in the order the library wants saves the
    copy.  Copies into another memory space (``copy-start``) are not layout changes."""
    out = []
    for k in ctx.graph.kernels:
        fused = set(dict(k.fused))
        is_copy = k.opcode in ("copy", "transpose") or (
            k.category == "fusion" and fused and fused <= _LAYOUT_OPS
            and fused & {"copy", "transpose"})
        if not is_copy:
            continue
        inst = ctx.inst(k)
        if inst is None or not inst.operand_names:
            continue
        src = operand(inst, 0)
        if not _moves_data(inst, src):
            continue
        if _space(src) != _space(inst):
            continue  # a move between memory spaces, not a layout change
        if src.shape.element_type != inst.shape.element_type:
            continue  # it converts too (XLA's precision for a TPU matmul): not only a layout
        if gathered_weight(src):
            continue  # the layout an all-gather made of a sharded weight: XLA's, not the code's
        if _solver(src) or any(_solver(u) for u in inst.users):
            continue  # a LAPACK/cuSOLVER call's column-major layout: JAX's, not the user's
        if _tile_padded(src.shape) or _tile_padded(inst.shape):
            # On a TPU, into or out of a layout that pads a short minor dimension to whole
            # tiles (f32[N,3,3]: the batch moved minor for the elementwise work, 3 minor
            # for the matmul): XLA works around the short dimension, which is HS115's
            # padding; its fix (no short minor dimension) removes the copy too.
            continue
        if not k.op_name or ("transpose(" in k.op_name
                             and k.op_name.rsplit("/", 1)[-1] != "transpose"):
            # XLA's own (no trace to the user's code), or autodiff's layout for the
            # backward pass: not a layout the user chose.  (The backward pass of the
            # user's own transpose, jnp.swapaxes, is: it is there because the code is.)
            continue
        before = [ctx.kernel(e.src) for e in ctx.edges_to.get(k.name, ()) if e.src_kind == "kernel"]
        after = [ctx.kernel(e.dst) for e in ctx.edges_from.get(k.name, ())]
        # The library calls that make the copy's source or read the copy as an operand
        # (not as an addend to their product: a bias a GEMM's epilogue adds is in the
        # product's order, the one the code asked for).
        libraries = [x for x in before if _is_library(x)] + [
            x for x in after if _is_library(x) and _operand_of_library(ctx, x, k)]
        if not libraries or all(_onehot_matmul(ctx, x) for x in libraries):
            # (Beside a one-hot matmul only: HS119's gather replaces that matmul and
            # reads the rows in whatever order the code indexes them.)
            continue
        runs = ctx.runs(k.group)
        out.append(Finding(
            "HS103", "a copy next to a library call changes the layout",
            f"{k.name} only moves {format_bytes(k.bytes_out)} into another layout "
            f"({src.shape} -> {inst.shape}) for a library call (FFT, matmul or "
            "convolution); it needs its own kernel and a second buffer",
            "keep the data in the order the library call reads it: choose the axes you "
            "transform or contract over (the last ones for an FFT; for a matmul, "
            "einsum/dot_general dimension orders that match), or store the array "
            "transposed once, outside the step",
            (ev_kernel(k),), ctx.saving(traffic=2 * k.bytes_out * runs, kernels=runs),
            place_key(k.op_name, k.source, k.shape)))
    return out


def _operand_of_library(ctx: AdviceContext, reader: Kernel | None, k: Kernel) -> bool:
    """Whether library kernel `reader` multiplies or transforms `k`'s array (its
    matmul's, convolution's or FFT's operand, through elementwise work), not only adds
    it to the result."""
    r = ctx.inst(reader) if reader is not None else None
    if r is None or r.opcode != "fusion" or not any(
            i.opcode in ("dot", "convolution") for i in fused_instructions(r)):
        return True  # a library call (an FFT, a custom call) reads its operands as they are
    return _multiplied(ctx, reader, k)


def _onehot_matmul(ctx: AdviceContext, k: Kernel | None) -> bool:
    """Whether library kernel `k` multiplies by a one-hot array (HS119's pattern)."""
    inst = ctx.inst(k) if k is not None else None
    if inst is None:
        return False
    dots = [i for i in fused_instructions(inst) if i.opcode in ("dot", "convolution")]
    return bool(dots) and all(_onehot_operand(ctx, d) is not None for d in dots)


def _moves_data(inst: Instruction, src: Instruction) -> bool:
    """Whether a copy or transpose kernel moves elements: a transpose with a permutation
    (even where the shapes print alike: NCHW to NHWC with C = H = W), a copy into another
    layout; inside a fusion, any such transpose or copy.  (Transposes that keep every
    element in place are bitcasts, which the kernel graph already leaves out.)"""
    if src.shape.dims != inst.shape.dims or src.shape.layout != inst.shape.layout:
        return True
    for i in fused_instructions(inst):
        if i.opcode == "transpose":
            dims = i.dimensions
            if dims != tuple(range(len(dims))):
                return True
        elif i.opcode == "copy" and i.operands and \
                i.operands[0].shape.layout != i.shape.layout:
            return True
    return False


def _tile_padded(shape: Shape) -> bool:
    """Whether a tiled layout (a TPU's) pads the array by half or more."""
    return bool(shape.is_array and shape.layout is not None and shape.layout.tiles
                and shape.byte_size - shape.logical_byte_size >= shape.logical_byte_size // 2)


def _space(inst: Instruction) -> int:
    layout = inst.shape.layout
    return layout.memory_space if layout is not None else 0


# -- HS104 -----------------------------------------------------------------------------

def recompute(ctx: AdviceContext) -> list[Finding]:
    """Fused kernels compute a large array from indices and constants alone (no argument,
    no other kernel's result but another such kernel's: a linspace broadcast into a grid)
    with cheap operations, and other fused kernels read it from memory: computing it
    inside each of them costs no memory at all."""
    out = []
    # Kernels of cheap operations on indices and constants alone (or on what other such
    # kernels made: a linspace broadcast into a grid), in the graph's order.
    # (Only kernels that read nothing but constants and such kernels can be.)
    free: dict[str, bool] = {}
    for k in ctx.constant_fed:
        fused = set(dict(k.fused))
        free[k.name] = (k.category == "fusion" and not k.transcendentals and bool(fused)
                        and fused <= _CHEAP_OPS and all(
                            e.src_kind == "constant" or e.src_kind == "kernel"
                            and free.get(e.src, False) for e in ctx.edges_to.get(k.name, ())))
    for k in ctx.constant_fed:
        if not free[k.name]:
            continue  # reads arguments or other kernels' results: not free to redo
        consumers = [e for e in ctx.edges_from.get(k.name, ()) if e.dst != "result"]
        readers = list(dict.fromkeys(e.dst for e in consumers))
        if any(free.get(name, False) for name in readers):
            continue  # not the last step of the build
        build = _free_build(ctx, k, free)
        fused = {op for x in build for op, _ in x.fused}
        if "iota" not in fused:
            continue
        if not readers or any((r := ctx.kernel(name)) is None or r.category != "fusion"
                              or _is_library(r) for name in readers):
            continue  # a matmul's kernel reads it: not the user's to fuse (see HS119)
        if not any(_fusible_into(ctx.inst(r), k.name) for name in readers
                   if (r := ctx.kernel(name)) is not None):
            # Read only by a library's reduction (XLA's CPU hands one to YNNPACK as a
            # kCustom fusion) that adds it to its result: an epilogue operand, read from
            # memory whatever the code does, as a GEMM's bias is.
            continue
        if any(r.group != k.group for name in readers if (r := ctx.kernel(name))) \
                and all(_hoisted(ctx.inst(x)) for x in build):
            # Read inside a loop, and the code builds it there (a mask from iota inside
            # the layer: its iotas' op_names are the loop body's) and XLA hoisted it out;
            # building it anywhere else changes nothing.  Built before the loop by the
            # code (its iotas outside the body), it is the user's to move in.
            continue
        runs = ctx.runs(k.group)
        live = any(e.live_at_peak for e in consumers)
        out.append(Finding(
            "HS104", "a cheap intermediate is stored instead of recomputed",
            f"{k.name} computes {format_bytes(k.bytes_out)} from nothing but indices and "
            f"constants ({', '.join(sorted(fused))}), and writes it to memory for "
            f"{', '.join(readers[:4])}" + (", ..." if len(readers) > 4 else ""),
            "XLA kept one copy (common-subexpression elimination) where recomputing it "
            "inside each kernel would cost no memory: build it inside each function that "
            "uses it, or from jnp.indices/lax.broadcasted_iota there, so it fuses",
            tuple([ev_kernel(k)] + [ev_kernel(kk) for r in readers[:4]
                                    if (kk := ctx.kernel(r))]),
            ctx.saving(peak=k.bytes_out if live else 0,
                       traffic=k.bytes_out * (1 + len(consumers)) * runs, kernels=runs),
            place_key(k.op_name, k.source, k.shape)))
    return out


def _fusible_into(inst: Instruction | None, build: str) -> bool:
    """Whether the build's array is computed into fused kernel `inst`'s work: any XLA
    fusion, or a library's (kCustom) reduction whose input it is part of, not an array
    the library only adds to its result."""
    return inst is None or inst.fusion_kind != "kCustom" or _reduces_from(inst, build)


def _free_build(ctx: AdviceContext, k: Kernel, free: dict[str, bool]) -> list[Kernel]:
    """`k` and the free kernels it is built from."""
    build, stack, seen = [], [k], {k.name}
    while stack:
        x = stack.pop()
        build.append(x)
        for e in ctx.edges_to.get(x.name, ()):
            if e.src_kind == "kernel" and e.src not in seen and free.get(e.src, False) \
                    and (p := ctx.kernel(e.src)) is not None:
                seen.add(e.src)
                stack.append(p)
    return build


def _hoisted(inst: Instruction | None) -> bool:
    """Whether every iota of fused kernel `inst` comes from a loop body's code (op_name
    under ``while/body``): XLA moved it out of the loop, the code did not."""
    if inst is None:
        return True
    iotas = [i.metadata.op_name for i in fused_instructions(inst) if i.opcode == "iota"]
    return not iotas or all("while/body" in n or not n for n in iotas)
