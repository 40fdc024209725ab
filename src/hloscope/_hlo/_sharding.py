"""HLO shardings in every printed form, and the per-device shapes they imply.

Forms read (XLA's ``HloSharding::ToString`` and ``NamedSharding``):
``{replicated}``, ``{maximal device=3}``, ``{manual}``, ``{unknown}``,
``{unreduced}``, ``{devices=[2,2]0,1,2,3}``, iota ``{devices=[4,2]<=[8]}`` and
``{devices=[4,2]<=[2,4]T(1,0)}``, ``last_tile_dim_replicate``,
``last_tile_dims={manual, replicated}``, ``shard_as``/``shard_like``, tuple
shardings ``{{replicated}, {devices=...}}``, and named shardings
``{mesh[x=4,y=2], [{x},{y}]}``.  ``metadata=`` inside a sharding is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._repr import brief_repr
from ._attrs import split_top_level
from ._shape import Shape

__all__ = ["Sharding", "parse_sharding", "iota_devices"]


@dataclass(frozen=True, slots=True)
class Sharding:
    """One sharding.

    `kind` is ``replicated``, ``maximal``, ``manual``, ``unknown``,
    ``unreduced``, ``tiled``, ``tuple`` or ``named``.  For ``tiled``:
    `tile_dims` is the tile-assignment shape (data dimensions first, then any
    subgroup dimensions named by `subgroup_types`), `devices` the device of
    each tile in row-major order.  For ``named``: `mesh_axes` are
    ``(name, size)`` pairs and `dim_axes` the axis names sharding each data
    dimension.  `text` is the sharding as printed.
    """

    __repr__ = brief_repr

    kind: str
    text: str = ""
    tile_dims: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()
    iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    subgroup_types: tuple[str, ...] = ()
    device: int | None = None
    elements: tuple[Sharding, ...] = ()
    mesh_axes: tuple[tuple[str, int], ...] = ()
    dim_axes: tuple[tuple[str, ...], ...] = ()

    # -- derived -----------------------------------------------------------------
    @property
    def is_replicated(self) -> bool:
        if self.kind == "named":
            return not any(self.dim_axes)
        return self.kind == "replicated"

    @property
    def data_tile_dims(self) -> tuple[int, ...]:
        """How many pieces each data dimension is cut into."""
        if self.kind == "tiled":
            n = len(self.tile_dims) - len(self.subgroup_types)
            return self.tile_dims[:n]
        if self.kind == "named":
            sizes = dict(self.mesh_axes)
            out = []
            for axes in self.dim_axes:
                p = 1
                for a in axes:
                    # A sub-axis is printed as name:(pre_size)size.
                    sub = _SUB_AXIS_RE.match(a)
                    p *= int(sub.group(3)) if sub else sizes.get(a, 1)
                out.append(p)
            return tuple(out)
        return ()

    @property
    def num_devices(self) -> int:
        """Devices the sharding spans (1 for replicated/maximal, which say nothing more)."""
        if self.kind == "tiled":
            p = 1
            for d in self.tile_dims:
                p *= d
            return p
        if self.kind == "named":
            p = 1
            for _, s in self.mesh_axes:
                p *= s
            return p
        if self.kind == "tuple":
            return max((e.num_devices for e in self.elements), default=1)
        return 1

    @property
    def num_shards(self) -> int:
        """Distinct pieces the data is cut into (devices / replication)."""
        p = 1
        for d in self.data_tile_dims:
            p *= d
        return p

    def device_list(self) -> tuple[int, ...]:
        """Device of each tile, row-major over `tile_dims` (expands iota forms)."""
        if self.kind != "tiled":
            return ()
        if self.iota is not None:
            return iota_devices(self.tile_dims, *self.iota)
        return self.devices

    def shard_shape(self, shape: Shape) -> Shape:
        """The per-device shape of a value of `shape` under this sharding.

        Tiled dimensions are divided, rounding up as XLA pads uneven shards.
        Tuple shardings apply element-wise; replicated, maximal and manual
        shardings leave the shape whole.
        """
        if shape.is_tuple:
            if self.kind == "tuple" and len(self.elements) == len(shape.leaves()):
                leaves = iter(self.elements)
                return _map_leaves(shape, lambda s: next(leaves).shard_shape(s))
            return _map_leaves(shape, self.shard_shape)
        tiles = self.data_tile_dims
        if not tiles or not shape.is_array or len(tiles) != len(shape.dims):
            return shape
        dims = tuple(-(-d // t) if d > 0 and t > 0 else d for d, t in zip(shape.dims, tiles))
        return Shape(shape.element_type, dims, shape.dynamic, shape.layout)

    def __str__(self) -> str:
        return self.text


def _map_leaves(shape: Shape, fn) -> Shape:  # type: ignore[no-untyped-def]
    if shape.is_tuple:
        return Shape("tuple", tuple_shapes=tuple(_map_leaves(s, fn) for s in shape.tuple_shapes))
    return fn(shape)


def iota_devices(tile_dims: tuple[int, ...], reshape: tuple[int, ...],
                 perm: tuple[int, ...]) -> tuple[int, ...]:
    """Devices of an iota tile assignment ``[tile_dims]<=[reshape]T(perm)``.

    That is ``arange(prod(reshape)).reshape(reshape).transpose(perm).ravel()``.
    """
    n = 1
    for d in reshape:
        n *= d
    if n > 1 << 20:
        raise ValueError(f"iota tile assignment of {n} devices is too large to expand")
    strides = [1] * len(reshape)
    for i in range(len(reshape) - 2, -1, -1):
        strides[i] = strides[i + 1] * reshape[i + 1]
    tdims = [reshape[p] for p in perm]
    tstrides = [strides[p] for p in perm]
    out: list[int] = []
    idx = [0] * len(tdims)
    for _ in range(n):
        out.append(sum(i * s for i, s in zip(idx, tstrides)))
        for k in range(len(idx) - 1, -1, -1):
            idx[k] += 1
            if idx[k] < tdims[k]:
                break
            idx[k] = 0
    return tuple(out)


# -- parsing ---------------------------------------------------------------------

_sharding_cache: dict[str, Sharding] = {}
_DEVICES_RE = re.compile(
    r"devices=\[([0-9,\s]*)\]\s*(?:<=\[([0-9,\s]*)\](?:T\(([0-9,\s]*)\))?|([0-9,\s]*))")
_DEVICE_RE = re.compile(r"device=([0-9]+)")
_LAST_TILE_DIMS_RE = re.compile(r"last_tile_dims=\{([^}]*)\}")
_MESH_RE = re.compile(r"(maximal_)?mesh\[([^\]]*)\]")
_SUB_AXIS_RE = re.compile(r"([\w\-.]+):\(([0-9]+)\)([0-9]+)")
_AXIS_RE = re.compile(r"'?([\w\-.]+)'?\s*=\s*([0-9]+)")


class _Unreadable(Exception):
    pass


def _ints(s: str | None) -> tuple[int, ...]:
    if not s:
        return ()
    out = tuple(int(x) if len(x) < 10 else -1 for x in s.replace(" ", "").split(",") if x)
    if any(v < 0 for v in out):
        raise _Unreadable
    return out


def parse_sharding(text: str) -> Sharding:
    """Parse a sharding's text (with its outer braces).  Unknown forms give kind ``unknown``
    with the text kept, never an error."""
    cached = _sharding_cache.get(text)
    if cached is not None:
        return cached
    try:
        s = _parse(text.strip())
    except (_Unreadable, ValueError):
        s = Sharding("unknown", text)
    if len(_sharding_cache) < 100_000:
        _sharding_cache[text] = s
    return s


def _strip_metadata(body: str) -> str:
    i = body.find("metadata=")
    return body[:i].rstrip(", ") if i >= 0 else body


def _split_top(body: str) -> list[str]:
    return [p.strip() for p, _ in split_top_level(body) if p.strip()]


def _parse(text: str, nested: bool = False) -> Sharding:
    if not (text.startswith("{") and text.endswith("}")):
        return Sharding("unknown", text)
    body = text[1:-1].strip()
    if body.startswith("{") or body == "":
        if nested:
            # A tuple sharding's elements are single shardings (XLA refuses a tuple in a
            # tuple): the whole text is unknown, however deep it goes (no recursion).
            raise _Unreadable
        return Sharding("tuple", text, elements=tuple(_parse(p, True) for p in _split_top(body)))
    if body.startswith(("mesh[", "maximal_mesh[")):
        return _parse_named(text, body)
    body = _strip_metadata(body)
    words = set(re.findall(r"[a-z_]+", re.sub(r"=\S*", "", body)))
    if "replicated" in words and "devices" not in body:
        return Sharding("replicated", text)
    if "maximal" in words:
        m = _DEVICE_RE.search(body)
        return Sharding("maximal", text, device=int(m.group(1)) if m else None)
    for kind in ("manual", "unreduced", "unknown"):
        if kind in words and "devices=" not in body:
            return Sharding(kind, text)
    m = _DEVICES_RE.search(body)
    if m is None:
        return Sharding("unknown", text)
    tile_dims = _ints(m.group(1))
    subgroups: tuple[str, ...] = ()
    if "last_tile_dim_replicate" in body:
        subgroups = ("replicated",)
    else:
        lt = _LAST_TILE_DIMS_RE.search(body)
        if lt:
            subgroups = tuple(x.strip() for x in lt.group(1).split(",") if x.strip())
    if not tile_dims or 0 in tile_dims:
        return Sharding("unknown", text)  # XLA refuses a zero tile dimension
    if m.group(2) is not None:
        reshape = _ints(m.group(2))
        perm = _ints(m.group(3)) if m.group(3) else tuple(range(len(reshape)))
        if sorted(perm) != list(range(len(reshape))):
            return Sharding("unknown", text)
        return Sharding("tiled", text, tile_dims=tile_dims, iota=(reshape, perm),
                        subgroup_types=subgroups)
    return Sharding("tiled", text, tile_dims=tile_dims, devices=_ints(m.group(4)),
                    subgroup_types=subgroups)


def _parse_named(text: str, body: str) -> Sharding:
    m = _MESH_RE.match(body)
    if m is None:
        return Sharding("unknown", text)
    if m.group(1):
        d = re.search(r"device_id=([0-9]+)", m.group(2))
        return Sharding("maximal", text, device=int(d.group(1)) if d else None)
    axes = tuple((a, int(n)) for a, n in _AXIS_RE.findall(m.group(2)) if len(n) < 10)
    rest = _strip_metadata(body[m.end():]).lstrip(", ")
    if rest.startswith(("replicated", "unreduced", "manual")) or not rest:
        kind = "named" if rest.startswith("replicated") or not rest else rest.split(",")[0].strip()
        return Sharding(kind if kind != "named" else "named", text, mesh_axes=axes)
    dims: list[tuple[str, ...]] = []
    if rest.startswith("["):
        depth, end = 0, 0
        for i, c in enumerate(rest):
            if c == "[":
                depth += 1
            elif c == "]":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        for group in re.findall(r"\{([^}]*)\}", rest[1:end]):
            names = []
            for ax in group.split(","):
                ax = ax.strip().strip("'")
                if not ax or ax == "?":
                    continue
                names.append(ax.replace("'", "").replace(" ", ""))
            dims.append(tuple(names))
    return Sharding("named", text, mesh_axes=axes, dim_axes=tuple(dims))
