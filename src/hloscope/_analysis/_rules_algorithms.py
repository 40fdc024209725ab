"""The advisor's rules about the algorithm the program asks for where a cheaper one gives
the same result: an explicit matrix inverse that is only multiplied by (HS123: a solve
does it with a third of the work), and a full sort of which only the first few elements
are kept (HS124: top-k does it without sorting every row).
"""

from __future__ import annotations

import re

from .._hlo._module import Computation, Instruction
from .._units import format_bytes
from ._advice_context import AdviceContext, ev_inst
from ._findings import Finding, place_key
from ._rules_kernels import fused_instructions

__all__ = ["inverse_instead_of_solve", "sort_for_top_k"]

# HS123: a smaller inverse is cheap whatever computes it.
MIN_INVERSE_ORDER = 256
# HS124: a sort over fewer elements is cheap; keeping more than this share of them is not
# a top-k.
MIN_SORTED = 512
TOP_K_SHARE = 1 / 16

_TRSM = re.compile(r"trsm|triangularsolve|triangular_solve", re.IGNORECASE)
_MATMUL = re.compile(r"gemm|matmul|dot", re.IGNORECASE)
_THROUGH = frozenset({"bitcast", "copy", "transpose", "get-tuple-element", "reshape"})


# -- HS123 -----------------------------------------------------------------------------

def inverse_instead_of_solve(ctx: AdviceContext) -> list[Finding]:
    """A triangular solve whose right-hand side is the identity (an n x n matrix made by
    comparing two iotas: ``jnp.linalg.inv`` solves A X = I) and whose result a matmul
    reads: the program forms A^-1 to multiply by it.  Solving for the vectors it is
    multiplied by (``jnp.linalg.solve``, ``cho_solve``) skips the n right-hand sides of
    the identity: the solves' n^3 flops per triangle."""
    out = []
    for comp in ctx.module.computations:
        for inst in comp.instructions:
            if not _is_trsm(inst) or len(inst.operands) < 2:
                continue
            a, b = inst.operands[0].shape.dims, inst.shape.dims
            if len(a) < 2 or len(b) < 2 or b[-1] != b[-2] or b[-1] != a[-1] \
                    or b[-1] < MIN_INVERSE_ORDER:
                continue
            if any(_is_trsm(u) for u in _users_through(inst)):
                continue  # the first of the two triangles: the second one reports
            if not _from_identity(inst.operands[1]) or not _read_by_matmul(inst):
                continue
            n = b[-1]
            batch = max(1, inst.shape.num_elements // (n * n))
            # Two triangles, each n^2 multiply-adds per right-hand side, for n of them.
            flops = 2 * batch * n ** 3
            et = inst.shape.element_type
            rate = ctx.device.peak_flops(et) or 1.0
            size = inst.shape.total_byte_size
            out.append(Finding(
                "HS123", "an explicit inverse is computed only to be multiplied by",
                f"{inst.name} solves against the {n}x{n} identity (jnp.linalg.inv: "
                f"{format_bytes(size)}, about {flops / 1e9:.1f} GFLOP of triangular "
                "solves for the n right-hand sides of I) and a matmul then multiplies by "
                "the inverse",
                "solve for what the inverse multiplies instead: jnp.linalg.solve(A, y) (or, "
                "for a symmetric positive definite A, jax.scipy.linalg.cho_factor and "
                "cho_solve): the factorization is the same, the solves run for the "
                "columns of y instead of n, and it is more accurate",
                (ev_inst(inst, "triangular solve"),),
                # (The program's estimate counts a solver call's bytes, not its flops:
                # the saving, the inverse's traffic and the solves' flops, is held to that
                # estimate's whole.)
                ctx.saving(traffic=2 * size, seconds=max(0.0, min(
                    flops / rate, ctx.total_seconds - 2 * size / ctx.device.bandwidth))),
                place_key(inst.metadata.op_name, str(inst.source or ""), str(inst.shape))))
    return out


def _is_trsm(inst: Instruction) -> bool:
    return inst.opcode == "triangular-solve" or (
        inst.opcode == "custom-call" and bool(_TRSM.search(inst.custom_call_target)))


def _users_through(inst: Instruction) -> list[Instruction]:
    out, stack, seen = [], list(inst.users), set()
    while stack:
        u = stack.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        out.append(u)
        if u.opcode in _THROUGH or _copy_fusion(u):
            stack.extend(u.users)
    return out


def _copy_fusion(inst: Instruction) -> bool:
    return inst.opcode == "fusion" and all(
        i.opcode in _THROUGH or i.opcode == "parameter" for i in fused_instructions(inst))


def _from_identity(b: Instruction) -> bool:
    """Whether right-hand side `b` is (a permutation of) the identity: traced back through
    layout changes and earlier solves to a computation that compares two iotas."""
    for _ in range(8):
        if _is_trsm(b) and len(b.operands) >= 2:
            b = b.operands[1]
        elif b.opcode in _THROUGH and b.operands:
            b = b.operands[0]
        else:
            break
    iotas = compares = 0
    for i in fused_instructions(b):
        iotas += i.opcode == "iota"
        compares += i.opcode == "compare" and i.attr("direction") == "EQ"
    return iotas >= 1 and compares >= 1


def _read_by_matmul(inst: Instruction) -> bool:
    for u in _users_through(inst):
        if u.opcode == "dot" or (u.opcode == "custom-call"
                                 and _MATMUL.search(u.custom_call_target)):
            return True
        if u.opcode == "fusion" and any(i.opcode in ("dot", "convolution")
                                        for i in fused_instructions(u)):
            return True
    return False


# -- HS124 -----------------------------------------------------------------------------

def sort_for_top_k(ctx: AdviceContext) -> list[Finding]:
    """A sort over a long axis (512 elements or more) whose every result is only sliced
    to its first few elements along that axis (a sixteenth or fewer): ``jnp.argsort(x)
    [..., :k]`` or ``jnp.sort(x)[..., :k]``.  ``jax.lax.top_k`` finds them without
    sorting the rest and without writing the whole sorted array (and its indices) to
    memory.  Not XLA's own lowering of ``top_k`` (op_name ``top_k``)."""
    out = []
    for comp in ctx.module.computations:
        for inst in comp.instructions:
            if inst.opcode != "sort" or "top_k" in inst.metadata.op_name:
                continue
            dims = inst.dimensions
            shape = inst.operands[0].shape if inst.operands else inst.shape
            if len(dims) != 1 or not 0 <= dims[0] < len(shape.dims):
                continue
            d, n = dims[0], shape.dims[dims[0]]
            if n < MIN_SORTED:
                continue
            kept = _kept(inst, d, 0)
            if kept is None or kept > n * TOP_K_SHARE:
                continue
            outer = _outermost(inst, comp)
            size = outer.shape.total_byte_size
            at_peak = sum(v.size for v in ctx.lr.peak_values if v.inst is outer)
            out.append(Finding(
                "HS124", "a full sort where only the top k are kept",
                f"{outer.name} sorts {n:,} elements per row ({shape}) and only the first "
                f"{kept} of each are used: the whole sorted array"
                f"{' and its indices' if len(inst.operands) > 1 else ''} "
                f"({format_bytes(size)}) is written to memory for them",
                f"jax.lax.top_k(x, {kept}) (of -x for the smallest) returns the {kept} "
                "largest values and their indices without sorting the rest",
                (ev_inst(outer, "sort"),),
                ctx.saving(peak=at_peak, traffic=2 * size),
                place_key(inst.metadata.op_name, str(inst.source or ""), str(shape))))
    return out


def _fusion_of(comp: Computation) -> Instruction | None:
    """The fusion instruction that runs `comp`, where one does."""
    module = comp.module
    if module is None:
        return None
    return next((c for c in module.callers(comp) if c.opcode == "fusion"), None)


def _outermost(inst: Instruction, comp: Computation) -> Instruction:
    while (f := _fusion_of(comp)) is not None and f.computation is not None:
        inst, comp = f, f.computation
    return inst


def _kept(inst: Instruction, d: int, depth: int) -> int | None:
    """How many leading elements along axis `d` the readers of `inst` keep (the most any
    of them keeps), or None where one reads more than a leading slice (or reads it in a
    way not followed here)."""
    if depth > 12:
        return None
    kept = 0
    users = list(inst.users)
    comp = inst.computation
    if comp is not None and comp.root is inst and (f := _fusion_of(comp)) is not None:
        users += list(f.users)  # a fusion's result: its readers outside
    if not users:
        return None
    for u in users:
        if u.opcode == "slice":
            k = _leading(u, d)
        elif u.opcode in ("get-tuple-element", "tuple", "bitcast", "copy") and \
                (u.opcode != "bitcast" or u.shape.dims == inst.shape.dims):
            k = _kept(u, d, depth + 1)
        elif u.opcode == "fusion":
            k = 0
            for n, o in enumerate(u.operands):
                if o is not inst:
                    continue
                p = _parameter(u, n)
                pk = _kept(p, d, depth + 1) if p is not None else None
                if pk is None:
                    return None
                k = max(k, pk)
        else:
            return None
        if k is None:
            return None
        kept = max(kept, k)
    return kept


def _leading(s: Instruction, d: int) -> int | None:
    bounds = s.slice_bounds
    if d >= len(bounds):
        return None
    start, limit, _ = bounds[d]
    return limit if start == 0 else None


def _parameter(fusion: Instruction, n: int) -> Instruction | None:
    if not fusion.called_computations:
        return None
    for i in fusion.called_computations[0].instructions:
        if i.opcode == "parameter" and i.parameter_number == n:
            return i
    return None
