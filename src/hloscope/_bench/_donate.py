"""Running a function that donates its arguments more than once.

A compiled function with ``donate_argnums`` takes its donated arrays' memory
for its results: after one run they are deleted, and the next run fails with
XLA's "Buffer has been deleted or donated".  `Inputs` gives each run fresh
copies of the donated arrays (the others as they are), made when asked, so
the caller makes them outside its timed region.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Inputs"]


class Inputs:
    """The arguments of `compiled` for one run each: `fresh()`."""

    def __init__(self, compiled: Any, args: list[Any]) -> None:
        import jax

        self._args = args
        info = getattr(compiled, "args_info", None)
        try:
            flags = [bool(getattr(a, "donated", False))
                     for a in jax.tree.leaves(info[0] if isinstance(info, tuple) else info)]
        except Exception:  # noqa: BLE001  (a JAX without args_info: nothing donated)
            flags = []
        leaves, self._tree = jax.tree.flatten(args)
        shapes_only = [i for i, x in enumerate(leaves) if isinstance(x, jax.ShapeDtypeStruct)]
        if shapes_only:
            from .._errors import HloscopeError

            x = leaves[shapes_only[0]]
            raise HloscopeError(
                f"{len(shapes_only)} of the arguments' {len(leaves)} arrays are "
                f"jax.ShapeDtypeStruct (shapes, no data: the first {x.dtype}"
                f"{list(x.shape)}), and running the program needs arrays",
                hint="make arrays of them (jnp.zeros(s.shape, s.dtype)), or give --arg "
                     "SHAPE and hloscope fills them; inspect, memory and lint take shapes "
                     "alone")
        self._donated = [i for i, f in enumerate(flags) if f and i < len(leaves)
                         and hasattr(leaves[i], "copy")]
        self._leaves = [leaves[i].copy() if i in self._donated else x
                        for i, x in enumerate(leaves)]  # originals stay the caller's

    @property
    def donated(self) -> int:
        """How many argument arrays the function donates."""
        return len(self._donated)

    def fresh(self) -> list[Any]:
        """The arguments for one run: new copies of the donated arrays, computed."""
        if not self._donated:
            return self._args
        import jax

        leaves = list(self._leaves)
        for i in self._donated:
            leaves[i] = self._leaves[i].copy()
        jax.block_until_ready([leaves[i] for i in self._donated])
        return jax.tree.unflatten(self._tree, leaves)
