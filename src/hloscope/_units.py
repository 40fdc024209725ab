"""Sizes and times for people: shared by the analyses' messages and the renderers."""

from __future__ import annotations

__all__ = ["format_bytes", "format_count", "format_seconds"]

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


def format_count(n: int) -> str:
    """``1234567`` -> ``1.23 M``; exact below 10,000; ``about 2^k`` beyond floats."""
    if n < 10_000:
        return str(n)
    if n >= _FLOAT_LIMIT:
        return f"about 2^{n.bit_length() - 1}"
    for div, unit in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return str(n)


def format_seconds(t: float) -> str:
    """A time with a unit that shows it, three significant digits: ``4.2e-9`` -> ``4.20 ns``,
    ``1.5e-5`` -> ``15.0 us``, ``0.0123`` -> ``12.3 ms``; ``0`` -> ``0 s``."""
    if t <= 0:
        return "0 s"
    if t < 0.005e-9:
        return "<0.01 ns"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if t >= scale * 0.9995 or unit == "ns":
            x = t / scale
            return f"{x:.0f} {unit}" if x >= 99.95 else f"{x:.1f} {unit}" if x >= 9.995 \
                else f"{x:.2f} {unit}"
    raise AssertionError("unreachable")
