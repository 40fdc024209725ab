"""The cost of `hloscope.timer` per use, active and inactive, against a bare
`with contextlib.nullcontext():` measured in the same run (the reference: what any
context manager costs).

Target (issue 20): an inactive timer costs nothing beyond that reference, and its
decorator nothing at all (it returns the function itself).  No JAX array is live here,
so the active timer's figure is its own bookkeeping plus the check for live arrays.

Usage: python benchmarks/timer_overhead.py
"""

from __future__ import annotations

import contextlib
import time

import hloscope


def per_use(make, n: int = 200_000, repeat: int = 5) -> float:
    """Best of `repeat` loops of `n` uses, in nanoseconds per use."""
    best = float("inf")
    for _ in range(repeat):
        ctx = make()
        t0 = time.perf_counter()
        for _ in range(n):
            with ctx:
                pass
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e9


def call_cost(fn, n: int = 200_000, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e9


def main() -> None:
    ref = per_use(contextlib.nullcontext)
    off = per_use(lambda: hloscope.timer("off", active=False))
    on = per_use(lambda: hloscope.timer("on"), n=20_000)

    def f() -> None:
        return None

    plain = call_cost(f)
    decorated = call_cost(hloscope.timer("off", active=False)(f))
    print(f"with nullcontext() (reference): {ref:8.1f} ns per use")
    print(f"with an inactive timer:         {off:8.1f} ns per use ({off / ref:.2f}x the "
          f"reference; target: at most 1x plus noise)")
    print(f"with an active timer:           {on:8.1f} ns per use (its bookkeeping, no "
          f"arrays live)")
    print(f"a call, plain / inactive decorator: {plain:.1f} / {decorated:.1f} ns (the "
          "decorator returns the function itself)")


if __name__ == "__main__":
    main()
