"""Replica groups of collectives, in every printed form.

XLA prints the devices that take part together in a collective as

* explicit lists: ``{{0,1},{2,3}}`` (``{}``: every device in one group);
* an iota tile assignment: ``[2,4]<=[8]`` (2 groups of 4), optionally
  transposed: ``[2,4]<=[4,2]T(1,0)``;
* a mesh with the axes that vary inside a group:
  ``mesh['axis_0'=4,'axis_1'=2] {'axis_1'}``.

`parse_replica_groups` turns each into a tuple of groups (tuples of device
ids); an empty tuple means "all devices, one group".
"""

from __future__ import annotations

import re
from functools import lru_cache

from .._errors import HloModelError
from ._sharding import iota_devices
from ._numbers import is_ascii_digits

__all__ = ["ReplicaGroupsError", "parse_replica_groups"]

# More devices than this in one set of replica groups is not a real program.
_MAX_DEVICES = 1 << 20


class ReplicaGroupsError(HloModelError, ValueError):
    """Replica groups hloscope cannot read; the message quotes them."""


_IOTA_RE = re.compile(r"^\[([0-9,\s]+)\]\s*<=\s*\[([0-9,\s]+)\](?:\s*T\(([0-9,\s]*)\))?$")
_MESH_RE = re.compile(r"^mesh\[([^\]]*)\]\s*\{([^}]*)\}$")
_AXIS_RE = re.compile(r"'?([\w\-.]+)'?\s*=\s*([0-9]+)")


def _ints(s: str) -> tuple[int, ...]:
    out = []
    for x in s.split(","):
        x = x.strip()
        if not x:
            continue
        if not is_ascii_digits(x) or len(x) > 9:
            raise ReplicaGroupsError(f"replica groups name device {x!r}, not a device number")
        out.append(int(x))
    return tuple(out)


@lru_cache(maxsize=4096)
def parse_replica_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """The groups of devices in `text` (see the module docstring)."""
    t = text.strip()
    m = _IOTA_RE.match(t)
    if m:
        dims = _ints(m.group(1))
        reshape = _ints(m.group(2))
        perm = _ints(m.group(3) or "") or tuple(range(len(reshape)))
        if len(dims) != 2 or sorted(perm) != list(range(len(reshape))):
            raise ReplicaGroupsError(f"cannot read iota replica groups {text!r}")
        try:
            devices = iota_devices(dims, reshape, perm)
        except ValueError as e:
            raise ReplicaGroupsError(str(e)) from None
        if dims[0] * dims[1] != len(devices):
            raise ReplicaGroupsError(f"replica groups {text!r}: {dims[0]} x {dims[1]} groups "
                                     f"but {len(devices)} devices")
        n, k = dims
        return tuple(tuple(devices[g * k:(g + 1) * k]) for g in range(n))
    m = _MESH_RE.match(t)
    if m:
        axes = [(a, int(n)) for a, n in _AXIS_RE.findall(m.group(1)) if len(n) < 10]
        total = 1
        for _a, n in axes:
            total *= n
        if total > _MAX_DEVICES:
            raise ReplicaGroupsError(f"replica groups {text!r} span {total} devices")
        inside = {a.strip().strip("'") for a in m.group(2).split(",") if a.strip()}
        return _mesh_groups(tuple(axes), frozenset(inside))
    if t.startswith("{"):
        inner = t[1:-1].strip() if t.endswith("}") else t[1:]
        if not inner:
            return ()
        groups = re.findall(r"\{([^{}]*)\}", inner)
        if not groups:
            raise ReplicaGroupsError(f"cannot read replica groups {text!r}")
        return tuple(_ints(g) for g in groups)
    raise ReplicaGroupsError(f"cannot read replica groups {text!r}")


def _mesh_groups(axes: tuple[tuple[str, int], ...],
                 inside: frozenset[str]) -> tuple[tuple[int, ...], ...]:
    sizes = [n for _, n in axes]
    strides = []
    s = 1
    for n in reversed(sizes):
        strides.append(s)
        s *= n
    strides.reverse()
    total = s
    groups: dict[tuple[int, ...], list[int]] = {}
    for dev in range(total):
        coords = [(dev // st) % n for st, n in zip(strides, sizes)]
        key = tuple(c for (a, _), c in zip(axes, coords) if a not in inside)
        groups.setdefault(key, []).append(dev)
    return tuple(tuple(g) for _, g in sorted(groups.items()))
