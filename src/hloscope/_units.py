"""Sizes for people: shared by the analyses' messages and the renderers."""

from __future__ import annotations

__all__ = ["format_bytes"]

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


_FLOAT_LIMIT = 1 << 1000


def format_bytes(n: int) -> str:
    """``1048576`` -> ``1.00 MiB``; exact below 1 KiB.

    Sizes beyond a float (a damaged module's eighteen dimensions of 10^18)
    are written as a power of two: ``about 2^1234 B``.
    """
    if n < 1024:
        return f"{n} B"
    if n >= _FLOAT_LIMIT:
        return f"about 2^{n.bit_length() - 1} B"
    x = float(n)
    for unit in _UNITS[1:]:
        x /= 1024.0
        if x < 1024.0 or unit == _UNITS[-1]:
            return f"{x:.2f} {unit}"
    raise AssertionError("unreachable")
