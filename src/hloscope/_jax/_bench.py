"""`hloscope.bench(fn, *args)`: honest timings of a compiled function.

Trace, lower and compile are timed separately (by `inspect`, which also
gives the memory and kernel analyses); the first run is timed on its own and
never mixed into the statistics; warm-up runs are discarded; every timed run
ends with ``block_until_ready`` on every output leaf.  The statistics are
the minimum, median, mean, standard deviation, interquartile range, maximum
and last time, a distribution-free 95% confidence interval for the median
(order statistics), and the runs flagged as outliers (beyond 1.5 IQR of the
quartiles).  The harness's own cost per run (two clock reads and the
block_until_ready call on an already finished array) is measured in the same
process and reported.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from ._inspect import Report, inspect

__all__ = ["BenchResult", "Timer", "bench", "timer"]


def _median_ci(xs: list[float], z: float = 1.959964) -> tuple[float, float]:
    """95% confidence interval of the median from order statistics (no distribution assumed)."""
    n = len(xs)
    s = sorted(xs)
    if n < 3:
        return s[0], s[-1]
    lo = max(0, math.floor(n / 2 - z * math.sqrt(n) / 2) - 1)
    hi = min(n - 1, math.ceil(1 + n / 2 + z * math.sqrt(n) / 2) - 1)
    return s[lo], s[hi]


@dataclass
class BenchResult:
    """What `bench` measured (seconds).  `report` is the `inspect` report of the program."""

    name: str
    params: dict[str, Any]
    times: list[float]
    first_run: float
    warmup: int
    overhead: float
    report: Report | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        xs = self.times
        if not xs:
            return
        q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
        iqr = q[2] - q[0]
        lo, hi = _median_ci(xs)
        self.stats = {
            "runs": len(xs), "min": min(xs), "median": statistics.median(xs),
            "mean": statistics.fmean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "iqr": iqr, "max": max(xs), "last": xs[-1], "median_ci95": [lo, hi],
            "outliers": [i for i, x in enumerate(xs) if x < q[0] - 1.5 * iqr or x > q[2] + 1.5 * iqr],
            "first_run": self.first_run, "warmup": self.warmup,
            "overhead_per_run": self.overhead,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "hloscope.bench/1", "name": self.name, "params": self.params,
                "times": self.times, "stats": self.stats,
                "timings": self.report.timings if self.report else {}}

    def summary(self) -> str:
        s = self.stats
        us = 1e6
        return (f"{self.name}: median {s['median'] * us:.1f} us (95% CI {s['median_ci95'][0] * us:.1f}-"
                f"{s['median_ci95'][1] * us:.1f}), min {s['min'] * us:.1f}, mean {s['mean'] * us:.1f} "
                f"+- {s['std'] * us:.1f}, max {s['max'] * us:.1f} over {s['runs']} runs "
                f"({len(s['outliers'])} outliers); first run {self.first_run * us:.1f} us, "
                f"harness overhead {self.overhead * us:.2f} us/run")


def _overhead(block: Any, probe: Any, n: int = 2000) -> float:
    t = time.perf_counter
    best = float("inf")
    for _ in range(3):
        t0 = t()
        for _ in range(n):
            a = t()
            block(probe)
            _ = t() - a
        best = min(best, (t() - t0) / n)
    return best


def bench(fn: Any, *args: Any, warmup: int = 3, iterations: int = 10,
          min_time: float | None = None, static_argnames: tuple[str, ...] = (),
          **kwargs: Any) -> BenchResult:
    """Time `fn(*args, **kwargs)` compiled (see the module docstring).  With `min_time`
    (seconds), runs continue past `iterations` until that much time is measured."""
    import jax

    report = inspect(fn, *args, static_argnames=static_argnames, **kwargs)
    compiled = report._cache["compiled"]
    dynamic = list(args)
    block = jax.block_until_ready
    t = time.perf_counter
    t0 = t()
    block(compiled(*dynamic))
    first = t() - t0
    for _ in range(warmup):
        block(compiled(*dynamic))
    times: list[float] = []
    total = 0.0
    while len(times) < iterations or (min_time is not None and total < min_time):
        a = t()
        out = compiled(*dynamic)
        block(out)
        dt = t() - a
        times.append(dt)
        total += dt
        if len(times) > 1_000_000:
            break
    probe = jax.numpy.zeros(())
    block(probe)
    overhead = _overhead(block, probe)
    return BenchResult(report.name, {k: v for k, v in kwargs.items()}, times, first, warmup,
                       overhead, report)


class Timer:
    """Time a region of a training loop: ``with hloscope.timer("step") as t: ...``;
    every use appends to `t.times`.  Pass `sync` (an array or pytree) to wait for it."""

    def __init__(self, name: str = "region") -> None:
        self.name = name
        self.times: list[float] = []
        self._t0 = 0.0
        self.sync: Any = None

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.sync is not None:
            import jax

            jax.block_until_ready(self.sync)
            self.sync = None
        self.times.append(time.perf_counter() - self._t0)

    def __call__(self, fn: Any) -> Any:
        """As a decorator: time every call, waiting for the result."""
        import functools

        @functools.wraps(fn)
        def wrapped(*a: Any, **k: Any) -> Any:
            with self:
                out = fn(*a, **k)
                self.sync = out
            return out

        return wrapped


_timers: dict[str, Timer] = {}


def timer(name: str = "region") -> Timer:
    """The named `Timer` (created on first use)."""
    return _timers.setdefault(name, Timer(name))
