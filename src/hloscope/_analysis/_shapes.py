"""Per-shape facts the analyses ask for millions of times, computed once per shape.

The parser interns shapes (equal shape texts share one object), so a large
module holds few distinct shapes; caching by object identity turns a
size computation per value, edge and kernel into a dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .._hlo._shape import Shape

__all__ = ["byte_size", "elements", "indices", "leaf_bytes", "leaf_indices", "leaves",
           "logical_byte_size", "total_byte_size"]

Index = tuple[int, ...]
T = TypeVar("T")
_LIMIT = 100_000


def _cached(compute: Callable[[Shape], T]) -> Callable[[Shape], T]:
    """`compute(shape)` remembered per shape object (the cache holds the shape alive, so an
    id is never reused while its entry is kept)."""
    cache: dict[int, tuple[Shape, T]] = {}

    def lookup(shape: Shape) -> T:
        hit = cache.get(id(shape))
        if hit is not None and hit[0] is shape:
            return hit[1]
        value = compute(shape)
        if len(cache) >= _LIMIT:
            cache.clear()
        cache[id(shape)] = (shape, value)
        return value

    lookup.__doc__ = compute.__doc__
    return lookup


@_cached
def byte_size(shape: Shape) -> int:
    """Bytes of the value's own buffer (a tuple's pointer table for a tuple)."""
    return shape.byte_size


@_cached
def logical_byte_size(shape: Shape) -> int:
    """Bytes without tile padding, as XLA's live-range peak counts them."""
    return shape.logical_byte_size


@_cached
def total_byte_size(shape: Shape) -> int:
    """Bytes of every array leaf, plus tuple pointer tables."""
    return shape.total_byte_size


@_cached
def leaves(shape: Shape) -> list[tuple[Index, Shape]]:
    """``(shape_index, array_shape)`` for every non-tuple leaf, in order (do not modify)."""
    return shape.leaves()


@_cached
def elements(shape: Shape) -> int:
    """Elements of an array, or of all the leaves of a tuple."""
    return sum(leaf.num_elements for _idx, leaf in leaves(shape))


@_cached
def indices(shape: Shape) -> list[Index]:
    """Every subshape index of `shape` in pre-order (``()`` first; do not modify)."""
    out: list[Index] = []
    stack: list[tuple[Index, Shape]] = [((), shape)]
    while stack:
        index, s = stack.pop()
        out.append(index)
        if s.is_tuple:
            stack.extend(((*index, i), sub) for i, sub in reversed(list(enumerate(s.tuple_shapes))))
    return out


@_cached
def leaf_bytes(shape: Shape) -> int:
    """Bytes of the array leaves (a tuple's pointer tables left out)."""
    return sum(byte_size(leaf) for _idx, leaf in leaves(shape))


@_cached
def leaf_indices(shape: Shape) -> tuple[int, tuple[Index, ...]]:
    """(`leaf_bytes`, the index of every leaf): what reading a whole value touches."""
    return leaf_bytes(shape), tuple(idx for idx, _leaf in leaves(shape))
