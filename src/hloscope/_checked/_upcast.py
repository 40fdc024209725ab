"""The precision fix (HS112) applied mechanically: a matmul of two bf16/f16 values upcast
to f32 becomes the matmul of the narrow values with ``preferred_element_type=f32``.

The two compute the same thing: the product of two bf16 (or f16) numbers is exact in
f32, and both accumulate in f32; only the f32 copies and the f32-rate matmul go.  The
function's jaxpr is evaluated equation by equation with that one change (`jit` calls
inlined); a matmul whose operands are not both upcasts (a backward pass's cotangent)
stays as it was.  Where no such matmul is in reach (inside a scan body or a custom
rule), the finding stays estimated.
"""

from __future__ import annotations

from typing import Any

from .._analysis._findings import FindingGroup
from ._program import Fix, Program, rejit

__all__ = ["upcast_fix"]

_NARROW = ("bfloat16", "float16")


def upcast_fix(groups: list[FindingGroup], report: Any, program: Program) -> Any:
    fn = program.fn
    jitted = hasattr(fn, "_jit_info") and hasattr(fn, "__wrapped__")
    user = fn.__wrapped__ if jitted else fn
    nums = program.static_argnums
    static = set(fn._jit_info.static_argnums if jitted else
                 ((nums,) if isinstance(nums, int) else tuple(nums)))
    rewritten: list[int] = []

    def fixed(*args: Any, **kwargs: Any) -> Any:
        import jax

        dyn = [a for i, a in enumerate(args) if i not in static]

        def inner(*d: Any) -> Any:
            it = iter(d)
            full = [args[i] if i in static else next(it) for i in range(len(args))]
            return user(*full, **kwargs)

        closed, shape = jax.make_jaxpr(inner, return_shape=True)(*dyn)
        outs = _eval(closed.jaxpr, closed.consts, jax.tree_util.tree_leaves(dyn), rewritten)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), outs)

    return Fix("upcast", ("HS112",), "jnp.dot(a, b, preferred_element_type=jnp.float32) on "
               "the bf16/f16 operands instead of their f32 copies",
               program.with_fn(rejit(program, fixed)), "time", lambda: bool(rewritten))


def _eval(jaxpr: Any, consts: Any, args: list[Any], rewritten: list[int]) -> list[Any]:
    """`jaxpr` evaluated on `args`, matmuls of upcast operands rewritten (module
    docstring); `rewritten` gets one entry per rewritten matmul."""
    import jax.numpy as jnp
    from jax._src import source_info_util
    from jax.extend.core import Literal

    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    upcast: dict[Any, Any] = {}  # f32 var -> the bf16/f16 var it was converted from
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        invals = [read(v) for v in eqn.invars]
        tb = eqn.source_info.traceback
        with source_info_util.user_context(tb, name_stack=source_info_util.current_name_stack()
                                           + eqn.source_info.name_stack):
            if name == "convert_element_type" and not isinstance(eqn.invars[0], Literal) \
                    and str(eqn.invars[0].aval.dtype) in _NARROW \
                    and str(eqn.outvars[0].aval.dtype) == "float32":
                upcast[eqn.outvars[0]] = eqn.invars[0]
            if name == "dot_general" and all(not isinstance(v, Literal) and v in upcast
                                             for v in eqn.invars):
                params = dict(eqn.params, preferred_element_type=jnp.dtype("float32"))
                outs = [eqn.primitive.bind(*(env[upcast[v]] for v in eqn.invars), **params)]
                rewritten.append(1)
            elif name in ("pjit", "jit") and "jaxpr" in eqn.params:
                sub = eqn.params["jaxpr"]
                outs = _eval(sub.jaxpr, sub.consts, invals, rewritten)
            else:
                got = eqn.primitive.get_bind_params(eqn.params)
                # (subfuns, params) in older JAX, params alone in newer
                subfuns, params = got if isinstance(got, tuple) else ((), got)
                with eqn.ctx.manager:
                    ans = eqn.primitive.bind(*subfuns, *invals, **params)
                outs = list(ans) if eqn.primitive.multiple_results else [ans]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]
