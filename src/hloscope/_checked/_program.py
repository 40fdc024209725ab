"""What was compiled: the user's function with its arguments and how it was compiled, the
same function jitted again with one change (`rejit`), and a fix: a changed `Program`.

`inspect` compiles a `Program`; a fix is another `Program` (the function donated, or
compiled with XLA options, or its scan bodies checkpointed), compiled the same way, for
the same device or target.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Callable
from typing import Any

__all__ = ["Fix", "Program", "rejit"]


@dataclass(frozen=True)
class Program:
    """A function and everything `hloscope.inspect` was given to compile it."""

    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    static_argnums: int | tuple[int, ...] = ()
    static_argnames: str | tuple[str, ...] = ()
    compiler_options: dict[str, Any] | None = None
    target: str | None = None
    mesh: Any = None
    shard: Any = None

    def inspect(self, **more: Any) -> Any:
        """The `Report` of this program (no check of its own advice)."""
        from .._jax._inspect import inspect

        return inspect(self.fn, *self.args, static_argnums=self.static_argnums,
                       static_argnames=self.static_argnames,
                       compiler_options=self.compiler_options, target=self.target,
                       mesh=self.mesh, shard=self.shard, **more, **self.kwargs)

    def with_options(self, options: dict[str, Any]) -> Program:
        return replace(self, compiler_options={**(self.compiler_options or {}), **options})

    def with_fn(self, fn: Any) -> Program:
        return replace(self, fn=fn)


def _tuple(x: int | str | tuple[Any, ...] | None) -> tuple[Any, ...]:
    if x is None:
        return ()
    return x if isinstance(x, tuple) else (x,)


def rejit(program: Program, fun: Any | None = None, **changes: Any) -> Any:
    """The program's function jitted again with `changes` (``donate_argnums=(0,)``), the
    Python function `fun` in place of the user's where given.  A `jax.jit`-ted function
    keeps its static arguments, donations and shardings; a plain one gets the static
    arguments `inspect` was given."""
    import jax

    fn = program.fn
    info = getattr(fn, "_jit_info", None)
    wrapped = getattr(fn, "__wrapped__", None)
    if info is None or wrapped is None:
        kwargs: dict[str, Any] = {"static_argnums": _tuple(program.static_argnums),
                                  "static_argnames": _tuple(program.static_argnames)}
        return jax.jit(fun if fun is not None else fn, **{**kwargs, **changes})
    kwargs = {"static_argnums": info.static_argnums, "static_argnames": info.static_argnames,
              "donate_argnums": info.donate_argnums, "donate_argnames": info.donate_argnames,
              "keep_unused": info.keep_unused}
    for key in ("donate_argnums", "donate_argnames"):
        if key in changes:
            changes[key] = tuple(dict.fromkeys(tuple(kwargs[key]) + tuple(changes[key])))
    body = fun if fun is not None else wrapped
    try:
        shardings: dict[str, Any] = {}
        if info.user_specified_in_shardings:
            shardings["in_shardings"] = jax.tree_util.tree_unflatten(
                info.in_shardings_treedef, info.in_shardings_leaves)
        if any(type(x).__name__ != "UnspecifiedValue" for x in info.out_shardings_leaves):
            shardings["out_shardings"] = jax.tree_util.tree_unflatten(
                info.out_shardings_treedef, info.out_shardings_leaves)
        return jax.jit(body, **kwargs, **shardings, **changes)
    except Exception:  # noqa: BLE001  (JAX's private fields differ between versions)
        return jax.jit(body, **{**kwargs, **changes})


@dataclass(frozen=True)
class Fix:
    """One kind's fix: the `rules` it answers, what was changed (`fix`, in words), the
    changed `program`, the `figure` it is judged by (``footprint``, ``peak``,
    ``exposed``, ``time``) and `reached()`: whether tracing applied the change."""

    kind: str
    rules: tuple[str, ...]
    fix: str
    program: Program
    figure: str
    reached: Callable[[], bool] = field(default=lambda: True)
