"""Instruction and computation names as XLA makes and checks them.

`NameUniquer` is ``xla/service/name_uniquer.cc``: a name's numeric suffix
(``add.3``) is split off, and a name already taken gets the next free
suffix.  The parser uses it for the names it makes up (nested instructions,
``p0#1`` tuple elements, computations written inline, async wrappers), so
they come out as XLA's do: ``parameter.anon``, ``parameter.anon.1``,
``p0_1``, ``async_wrapped``.
"""

from __future__ import annotations

import re

from ._shape import PRIMITIVE_BITS
from ._numbers import is_ascii_digits

__all__ = ["NameUniquer", "sanitize"]

_NOT_ALLOWED_RE = re.compile(r"[^a-zA-Z0-9_.\-]")
_TYPE_NAMES = frozenset(PRIMITIVE_BITS) | {"token", "opaque"}


# A name `sanitize` leaves as it is (most are), but for the checks on whole names below.
_PLAIN_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.\-]*")


def sanitize(name: str) -> str:
    """XLA's ``NameUniquer::GetSanitizedName``."""
    if not name:
        return ""
    if _PLAIN_RE.fullmatch(name) and not name.startswith("__") and name not in _TYPE_NAMES:
        return name
    first = name[0]
    if not (first.isascii() and (first.isalpha() or first == "_")):
        name = "_" + name[1:]
    name = name[0] + _NOT_ALLOWED_RE.sub("_", name[1:])
    if name in _TYPE_NAMES:
        name += "_"
    if name.startswith("__") and not name.startswith("__xla_"):
        name = "a" + name[1:]
    return name


class _Ids:
    __slots__ = ("used", "next")

    def __init__(self) -> None:
        self.used: set[int] = set()
        self.next = 0

    def register(self, i: int) -> int:
        if i not in self.used:
            self.used.add(i)
            return i
        while self.next in self.used:
            self.next += 1
        self.used.add(self.next)
        self.next += 1
        return self.next - 1


class NameUniquer:
    """Hands out unique names with ``.N`` suffixes, as XLA's NameUniquer does."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[str, _Ids] = {}

    def unique(self, prefix: str) -> str:
        root = sanitize(prefix or "name")
        suffix = 0
        has_suffix = False
        dot = root.rfind(".")
        if 0 < dot < len(root) - 1:
            tail = root[dot + 1 :]
            if is_ascii_digits(tail) and len(tail) < 19:
                suffix = int(tail)
                has_suffix = True
                root = root[:dot]
        ids = self._ids.get(root)
        if ids is None:
            ids = self._ids[root] = _Ids()
        suffix = ids.register(suffix)
        if suffix == 0:
            return root + ".0" if has_suffix else root
        return f"{root}.{suffix}"
