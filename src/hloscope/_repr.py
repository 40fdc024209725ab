"""Short reprs for hloscope's public objects.

A result object holds whole modules, HLO texts and thousands of rows; its repr
must stay a line a person reads in a REPL or a log.  `brief_repr` is the
generic one: a dataclass's scalar fields as they are, long strings cut with
their length, containers as their size, nested objects by their own short repr
or their type.  The main objects (Report, BenchResult, Sweep, MemoryReport,
KernelGraph, ...) give their own one-line summary instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["REPR_LIMIT", "brief", "brief_repr", "clip", "number"]

# No repr of an hloscope object is longer than this.
REPR_LIMIT = 300
_TEXT = 80
_NESTED = 100


def clip(text: str, limit: int = REPR_LIMIT) -> str:
    """`text` cut to `limit` characters with an ellipsis in the middle."""
    if len(text) <= limit:
        return text
    keep = limit - 3
    return text[: keep - keep // 3] + "..." + text[len(text) - keep // 3:]


def number(n: int | None) -> str:
    """``1,234``, or ``unknown`` for None."""
    return "unknown" if n is None else f"{n:,}"


def brief(value: Any) -> str:
    """A short text for one field's value."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        if len(value) <= _TEXT:
            return repr(value)
        return f"{value[:_TEXT - 10]!r}...<{len(value):,} chars>"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        n = len(value)
        if n <= 3:
            items = value.items() if isinstance(value, dict) else value
            parts = [f"{brief(k)}: {brief(v)}" for k, v in items] if isinstance(
                value, dict) else [brief(v) for v in items]
            text = ", ".join(parts)
            if len(text) <= _NESTED and not any(p.startswith("<") and p.endswith(
                    ("items>", "entries>")) for p in parts):
                if isinstance(value, dict):
                    return "{" + text + "}"
                if isinstance(value, tuple):
                    return "(" + text + ("," if n == 1 else "") + ")"
                return "[" + text + "]"
        kind = ("entry" if n == 1 else "entries") if isinstance(value, dict) else (
            "item" if n == 1 else "items")
        return f"<{n:,} {kind}>"
    text = repr(value)
    return text if len(text) <= _NESTED else f"<{type(value).__name__}>"


def brief_repr(self: Any) -> str:
    """``Name(field=value, ...)`` over a dataclass's repr fields, each kept short."""
    parts = [f"{f.name}={brief(getattr(self, f.name))}" for f in dataclasses.fields(self)
             if f.repr]
    return clip(f"{type(self).__name__}({', '.join(parts)})")
