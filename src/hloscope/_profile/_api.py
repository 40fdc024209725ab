"""`hloscope.profile(fn, *args)`: compile once with `inspect`, then `profile_report`."""

from __future__ import annotations

from typing import Any

from .._jax._inspect import inspect
from ._capture import MIN_TIME, Profile, profile_report

__all__ = ["profile"]


def profile(fn: Any, *args: Any, runs: int = 10, warmup: int = 3,
            min_time: float = MIN_TIME, static_argnums: int | tuple[int, ...] = (),
            keep: str | None = None, **kwargs: Any) -> Profile:
    """Compile `fn(*args)` once, run it `warmup` times (and more until 0.25 s of warm-up
    runs, unless `warmup` is 0, and once more under a throwaway trace), then at least
    `runs` times (and more until `min_time` seconds of runs) under JAX's profiler, in
    4 rounds a moment apart, and more rounds (up to 16) while theirs disagree (runs that
    touched new memory left out where `runs` others remain), and give each kernel its
    measured time (its median in each round averaged
    over the rounds, the spread over the runs, calls per run, share of the step,
    the roofline estimate beside it), time per source line and op_name scope, and the
    typical run's wall time taken apart into kernels, dispatch, idle and wait.  `keep`: a
    folder to keep the trace in (for XProf or TensorBoard).  See docs/profile.md."""
    report = inspect(fn, *args, static_argnums=static_argnums, static_argnames=tuple(kwargs),
                     **kwargs)
    skip = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    dynamic = [a for i, a in enumerate(args) if i not in skip]
    return profile_report(report, dynamic, runs=runs, warmup=warmup, min_time=min_time,
                          keep=keep)
