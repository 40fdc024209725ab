"""The advisor's rule about attention written out by hand (HS130): ``softmax(q @ k.T) @ v``
computed as kernels that pass the [batch, heads, queries, keys] scores through device
memory, where a fused attention kernel (flash attention: cuDNN's on a GPU, Pallas's splash
attention on a TPU) keeps each block of scores on the chip and never writes them.

An attention is found from its first matmul: a batched matmul (batch dimensions, one free
dimension on one side: the keys; XLA:GPU folds batch and heads into one, and may swap the
operands) whose contraction (the head dimension) is smaller than the keys and than the
queries (a decoding step's few queries make scores smaller than the keys), whose result
an exponential and a reduction over the keys read (the softmax), and that a second
batched matmul contracts over the keys (the probabilities times v); or, on a TPU, XLA's
``online-softmax`` kernel, which does both from the scores.  Every array of the scores'
element count that the matmuls making scores of that size (the layers', the backward
pass's) or the softmax write outside fusions is what the fused kernel does not write,
and so is a scan's stack of them for the backward pass: their bytes at the peak and their
writes and reads are the saving, never more time than the attention's kernels take.  A
fused kernel recomputes the scores in its backward pass: where the program has one, a
second Q·Kᵀ matmul's time is taken off; where the mask is causal (a comparison of two
iotas), it skips the masked half of the work.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .._hlo._module import Computation, Instruction
from .._hlo._shape import Shape
from .._units import format_bytes
from ._advice_context import AdviceContext, ev_inst
from ._findings import Evidence, Finding, place_key
from ._kernels import Kernel, gemm_contracting
from ._rules_algorithms import _outermost, _parameter
from ._rules_program import _gemm_call, _ints
from ._values import Value

__all__ = ["attention_scores"]

# The keys an attention must have for its scores to be worth a fused kernel's trouble
# (below, the [Tq, Tk] block fits a kernel's tile: XLA's own fusions are as good); the
# share of the program (`worth_it`) decides the rest.
MIN_KEYS = 256
# jax.nn.dot_product_attention's XLA implementation (its default, implementation=None)
# names its einsum so.
_XLA_PATH = "BTNH,BSNH->BNTS"
# The scores' arrays a finding shows (the largest), beside the Q·Kᵀ matmul.
MAX_SHOWN = 4
# A head dimension beyond this is not attention's (a batched matmul of two large arrays).
MAX_HEAD = 512

_THROUGH = frozenset({
    "bitcast", "copy", "convert", "reshape", "transpose", "get-tuple-element", "multiply",
    "divide", "add", "subtract", "select", "maximum", "minimum", "negate", "exponential",
    "exponential-minus-one", "tanh", "clamp", "and", "or", "compare", "log", "abs",
})


def attention_scores(ctx: AdviceContext) -> list[Finding]:
    """HS130: see the module docstring.  On a GPU or TPU only: the CPU has no fused
    attention kernel to point at."""
    if ctx.platform == "cpu":
        return []
    out: list[Finding] = []
    done: set[int] = set()  # the matmuls already counted in an attention
    dots = [i for c in ctx.module.computations for i in c.instructions
            if _batched(i) is not None]
    for d1 in dots:
        if id(d1) in done:
            continue
        found = _attention(d1)
        if found is None:
            continue
        n, tq, tk = found
        # Every matmul making scores of this size: the layers' (an unrolled model's), the
        # backward pass's (the gradient of the scores, P·V's transpose), in any loop.
        family = [d for d in dots if _scores_dims(d, n, tq, tk)]
        done.update(id(d) for d in family)
        out.extend(_finding(ctx, d1, family, n, tq, tk))
    return out


# -- finding the attention --------------------------------------------------------------

def _batched(inst: Instruction) -> tuple[int, int, int, int] | None:
    """(the result's element count, M, N, the contracted size) of a batched matmul whose
    result is [batch..., M..., N]: a dot or cuBLAS GEMM with batch dimensions and one free
    dimension on the right-hand side (the keys; the left may have several: grouped-query
    attention's groups and queries, M their product), or a TPU's matmul-convolution
    whose window dimensions are the batch; None for anything else."""
    if inst.opcode == "convolution":
        return _conv_batched(inst)
    if inst.opcode == "dot":
        batch = _ints(inst.attr("lhs_batch_dims"))
        lc, rc = _ints(inst.attr("lhs_contracting_dims")), _ints(inst.attr("rhs_contracting_dims"))
    elif _gemm_call(inst):
        config = inst.backend_config
        gemm = config.get("gemm_backend_config") if isinstance(config, dict) else None
        numbers = gemm.get("dot_dimension_numbers") if isinstance(gemm, dict) else None
        raw = numbers.get("lhs_batch_dimensions") if isinstance(numbers, dict) else None
        batch = tuple(int(x) for x in raw) if isinstance(raw, list) else ()
        lc, rc = gemm_contracting(inst, 0) or (), gemm_contracting(inst, 1) or ()
    else:
        return None
    if not batch or len(inst.operands) < 2:
        return None
    dims = _result(inst).dims
    lhs, rhs = inst.operands[0].shape.dims, inst.operands[1].shape.dims
    if len(rhs) - len(batch) - len(rc) != 1 or len(dims) < len(batch) + 2:
        return None
    k = math.prod(lhs[i] for i in lc if 0 <= i < len(lhs)) if lc else 0
    return math.prod(dims), math.prod(dims[len(batch):-1]), dims[-1], k


def _conv_batched(inst: Instruction) -> tuple[int, int, int, int] | None:
    """A TPU's batched matmul: a convolution XLA made of a ``dot_general`` (its op_name),
    whose window dimensions are the batch (``0b1f_0o1i->01bf``, each batch element picked
    by a base dilation as large as the window); M is the result's ``b``, N its ``f``, the
    contracted size the input's ``f``."""
    labels = inst.attr("dim_labels") or ""
    if "->" not in labels or "_" not in labels or len(inst.operands) < 2 \
            or "dot_general" not in inst.metadata.op_name.rsplit("/", 1)[-1]:
        return None
    lhs_rhs, out = labels.split("->", 1)
    lhs = lhs_rhs.split("_", 1)[0]
    dims, lhs_dims = _result(inst).dims, inst.operands[0].shape.dims
    if len(out) != len(dims) or len(lhs) != len(lhs_dims) or len(dims) < 3 \
            or not {"b", "f"} <= set(out) or "f" not in lhs:
        return None
    return (math.prod(dims), dims[out.index("b")], dims[out.index("f")],
            lhs_dims[lhs.index("f")])


def _result(inst: Instruction) -> Shape:
    s = inst.shape
    return s.tuple_shapes[0] if s.is_tuple and s.tuple_shapes else s


def _attention(d1: Instruction) -> tuple[int, int, int] | None:
    """(the scores' element count, Tq, Tk) where `d1` is an attention's Q·Kᵀ matmul.  The
    keys are either free dimension (XLA may swap the operands: k @ qᵀ): the one the
    softmax reduces and the P·V matmul contracts."""
    b = _batched(d1)
    if b is None:
        return None
    n, m, last, k = b
    reached: list[Instruction] | None = None
    for tq, tk in ((m, last), (last, m)):
        if tk < MIN_KEYS or not 0 < k <= MAX_HEAD or k >= tk or tq <= k:
            continue  # (fewer queries than the head dimension: decoding, whose scores
            # are smaller than the keys it reads anyway)
        if reached is None:
            reached = _forward(d1, n)
        readers = list(_readers(reached))
        if any(_online_softmax(i) for i in readers):
            return n, tq, tk  # XLA's TPU kernel: softmax and P·V at once, from the scores
        if any(i.opcode == "exponential" for i in reached) and \
                any(_reduces_keys(i, n, tk) for i in readers) and \
                any(_contracts_keys(i, n, tk) for i in readers):
            return n, tq, tk
    return None


def _online_softmax(i: Instruction) -> bool:
    """XLA's TPU kernel that computes softmax(scores) @ v in one pass over the scores
    (``tpu_custom_call``, named ``online-softmax``): the probabilities never reach
    memory, the scores still do."""
    return i.opcode == "custom-call" and (
        "online-softmax" in i.name or i.metadata.op_name.endswith("online-softmax"))


def _scores_dims(d: Instruction, n: int, tq: int, tk: int) -> bool:
    b = _batched(d)
    return b is not None and b[0] == n and {b[1], b[2]} == {tq, tk}


def _forward(start: Instruction, n: int) -> list[Instruction]:
    """The instructions `start`'s value reaches through elementwise work that keeps its
    `n` elements, across fusions' boundaries (a fusion's parameter, a fused root to the
    fusion); `start` first."""
    out: list[Instruction] = []
    seen: set[int] = set()
    stack = [start]
    while stack:
        i = stack.pop()
        if id(i) in seen:
            continue
        seen.add(id(i))
        out.append(i)
        comp = i.computation
        if comp is not None and comp.root is i or _root_tuple_operand(i):
            stack.extend(f for f in _fusions_of(comp))
        for u in i.users:
            if u.opcode == "fusion" and u.called_computations:
                for pos, o in enumerate(u.operands):
                    if o is i and (p := _parameter(u, pos)) is not None:
                        stack.append(p)
            elif u.opcode == "tuple":
                if comp is not None and comp.root is u:
                    stack.extend(_fusions_of(comp))
            elif u.opcode in _THROUGH and _elements(u) == n:
                stack.append(u)
    return out


def _readers(reached: list[Instruction]) -> Iterable[Instruction]:
    for i in reached:
        yield from i.users


def _reduces_keys(i: Instruction, n: int, tk: int) -> bool:
    """A reduction of an `n`-element operand over the keys: down to n / tk elements, or
    by a factor of them (XLA splits a long row's reduction in two: 16,384 keys reduced by
    128, then by 128 again)."""
    if i.opcode != "reduce" or not i.operands or _elements(i.operands[0]) != n:
        return False
    out = _elements(i)
    return out > 0 and n % out == 0 and n // out > 1 and tk % (n // out) == 0


def _contracts_keys(i: Instruction, n: int, tk: int) -> bool:
    """A batched matmul that contracts an `n`-element operand over `tk` (P·V), or over a
    part of it: XLA's split-K GEMM contracts the keys in pieces (2,048 keys as 4 x 512)
    and adds the pieces after."""
    b = _batched(i)
    return b is not None and 0 < b[3] <= tk and tk % b[3] == 0 \
        and any(_elements(o) == n for o in i.operands)


def _causal(reached: list[Instruction]) -> bool:
    """Whether a select on the way chooses by comparing two iotas (a causal mask), in its
    own kernel or in one that made the mask before it."""
    return any(j.opcode == "select" and j.operands and _iota_compare(j.operands[0])
               for i in reached for j in i.users)


def _iota_compare(pred: Instruction) -> bool:
    """Whether `pred` is (a broadcast of) a comparison of two iotas, followed out of a
    fusion's parameter and into a fusion's root."""
    for _ in range(12):
        if pred.opcode == "compare":
            return pred.attr("direction") in ("GE", "GT", "LE", "LT") and \
                len(pred.operands) == 2 and all(_from_iota(o) for o in pred.operands)
        if pred.opcode == "parameter":
            callers = _fusions_of(pred.computation)
            n = pred.parameter_number
            if len(callers) != 1 or n is None or n >= len(callers[0].operands):
                return False
            pred = callers[0].operands[n]
        elif pred.opcode == "fusion" and pred.called_computations:
            root = pred.called_computations[0].root
            if root is None:
                return False
            pred = root
        elif pred.opcode in ("broadcast", "bitcast", "copy", "reshape", "transpose",
                             "and") and pred.operands:
            pred = pred.operands[0]
        else:
            return False
    return False


def _from_iota(i: Instruction) -> bool:
    for _ in range(6):
        if i.opcode == "iota":
            return True
        if i.opcode not in ("broadcast", "convert", "add", "subtract", "bitcast", "reshape") \
                or not i.operands:
            return False
        i = next((o for o in i.operands if o.opcode != "constant"), i.operands[0])
    return False


# -- the finding ------------------------------------------------------------------------

def _finding(ctx: AdviceContext, d1: Instruction, family: list[Instruction], n: int,
             tq: int, tk: int) -> list[Finding]:
    reached: list[Instruction] = []
    for d in family:
        reached.extend(_forward(d, n))
    # The arrays in memory: the values of n elements that the instructions reached define
    # outside fusions, each with the times its computation runs per call.
    stored: dict[int, tuple[Value, int]] = {}
    for i in reached:
        comp = i.computation
        if comp is None or _fusions_of(comp):
            continue
        for v in ctx.df.defined_by(i):
            if math.prod(v.shape.dims) == n and v.size > 0:
                stored[v.id] = (v, ctx.runs(comp.name))
    # A scan's scores stacked for its backward pass: an update of n elements written into
    # a loop's array of several (`dynamic-update-slice`), one slice per iteration.
    stacks = {id(u): u for i in reached for u in i.users
              if u.opcode == "dynamic-update-slice" and len(u.operands) > 1
              and u.operands[1] is i and _elements(u) > n and _elements(u) % n == 0}
    if not stored and not stacks:
        return []
    stacked_dims = {(u.shape.dims, u.shape.element_type) for u in stacks.values()}
    at_peak = sum(v.size for v in ctx.lr.peak_values
                  if v.id in stored or (v.shape.dims, v.shape.element_type) in stacked_dims)
    labels = {v.label: runs for v, runs in stored.values()}
    reads = sum(e.bytes * labels[e.value] for e in ctx.graph.edges if e.value in labels)
    traffic = sum(v.size * runs for v, runs in stored.values()) + reads
    for u in stacks.values():  # written once per iteration, read once in the backward
        home = _outermost(u, u.computation)
        comp = home.computation
        each = u.shape.total_byte_size // (_elements(u) // n)
        traffic += 2 * each * ctx.runs(comp.name if comp is not None else "")
    backward = any("transpose(" in d.metadata.op_name for d in family)
    causal = _causal(reached)
    kernels = {k.name: k for k in _kernels(ctx, [*family, *(v.inst for v, _ in
                                                           stored.values())])}
    for e in ctx.graph.edges:
        if e.value in labels and (k := ctx.kernel(e.dst)) is not None:
            kernels[k.name] = k
    spent = sum(ctx.kernel_seconds(k) * ctx.runs(k.group) for k in kernels.values())
    moved = traffic / ctx.device.bandwidth
    extra = (_kernel_seconds(ctx, family) / 2 if causal else 0.0) - (
        _kernel_seconds(ctx, [d1]) if backward else 0.0)
    # What the attention's kernels take is the most a fused kernel can save.
    seconds = max(0.0, min(moved + extra, spent)) - moved
    batch = n // (tq * tk)
    scores = f"scores ({batch:,} x {tq:,} x {tk:,}, {_result(d1).element_type})"
    arrays = [v for v, _ in stored.values()]
    largest = max(arrays, key=lambda v: (v.size, v.label)) if arrays else None
    shown = (f", {len(arrays)} array{'s' if len(arrays) > 1 else ''} of them (the largest "
             f"{largest.shape}, {format_bytes(largest.size)})" if largest is not None else "")
    stacked = ("; a loop stacks them for the backward pass ("
               + ", ".join(sorted({str(u.shape) for u in stacks.values()})) + ")"
               if stacks else "")
    kept = (f"; {format_bytes(at_peak)} of them are live at the peak"
            + (" (the probabilities kept for the backward pass among them)" if backward
               else "") if at_peak else "")
    message = (f"attention over {tk:,} keys is written out: its {scores} go from the Q·Kᵀ "
               "matmul through the softmax to the P·V matmul"
               + (" and back through the backward pass" if backward else "")
               + f" by way of device memory{shown}{stacked}{kept}"
               + ("; the mask is causal, and the masked half is computed all the same"
                  if causal else ""))
    return [Finding(
        "HS130", "attention scores are written to memory", message,
        _suggestion(ctx, d1, causal, backward),
        (ev_inst(d1, "matmul (Q·Kᵀ)"),
         *(Evidence(v.label, "array", str(v.shape), v.size, v.inst.metadata.op_name,
                    str(v.inst.source) if v.inst.source is not None else None)
           for v in sorted(arrays, key=lambda v: (-v.size, v.label))[:MAX_SHOWN])),
        ctx.saving(peak=at_peak, traffic=traffic, seconds=seconds),
        place_key(d1.metadata.op_name, str(d1.source or ""), f"{n}:{tq}x{tk}"))]


def _suggestion(ctx: AdviceContext, d1: Instruction, causal: bool, backward: bool) -> str:
    recompute = (" (its backward pass recomputes the scores block by block instead of "
                 "reading them)" if backward else "")
    if ctx.platform == "tpu":
        return ("a fused (flash) attention kernel keeps each block of scores in VMEM: "
                + ("jax.experimental.pallas.ops.tpu.splash_attention with a CausalMask (or "
                   "flash_attention with causal=True), which also skips the masked blocks"
                   if causal else "jax.experimental.pallas.ops.tpu.splash_attention (or "
                   "flash_attention)") + recompute)
    wide = d1.operands[0].shape.element_type if d1.operands else ""
    cast = (" (cuDNN's kernel takes bf16 or f16 q, k and v: cast them, or use "
            "jax.experimental.pallas.ops.gpu.attention.mha)"
            if wide not in ("bf16", "f16") else "")
    if _XLA_PATH in d1.metadata.op_name:
        return ("jax.nn.dot_product_attention without implementation= runs its XLA "
                "implementation, which writes the scores out: pass implementation='cudnn' "
                f"for cuDNN's fused (flash) kernel, which keeps each block on the chip{cast}"
                f"{recompute}")
    mask = ("is_causal=True instead of the mask, which also skips the masked blocks"
            if causal else "the mask as mask= or bias=")
    return ("a fused (flash) attention kernel keeps each block of scores on the chip: "
            "jax.nn.dot_product_attention(q, k, v, implementation='cudnn') with q, k and v "
            f"as [batch, seq, heads, head_dim] and {mask}{cast}{recompute}")


# -- helpers ----------------------------------------------------------------------------

def _kernels(ctx: AdviceContext, insts: Iterable[Instruction]) -> list[Kernel]:
    """The kernels that run `insts` (each instruction's outermost fusion, or itself)."""
    return [k for i in insts if (k := ctx.kernel(_outermost(i, i.computation).name)) is not None]


def _kernel_seconds(ctx: AdviceContext, insts: Iterable[Instruction]) -> float:
    seen: dict[str, float] = {}
    for k in _kernels(ctx, insts):
        seen[k.name] = ctx.kernel_seconds(k) * ctx.runs(k.group)
    return sum(seen.values())


def _fusions_of(comp: Computation | None) -> list[Instruction]:
    module = comp.module if comp is not None else None
    if module is None:
        return []
    return [c for c in module.callers(comp) if c.opcode == "fusion"]


def _root_tuple_operand(i: Instruction) -> bool:
    comp = i.computation
    root = comp.root if comp is not None else None
    return root is not None and root.opcode == "tuple" and i in root.operands


def _elements(i: Instruction) -> int:
    s = i.shape
    if s.is_tuple:
        return -1
    return math.prod(s.dims)
