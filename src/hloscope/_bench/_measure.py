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
import time
from typing import Any

from .._jax._inspect import Report, inspect
from .._jax._user import user_code
from ._result import BenchResult

__all__ = ["bench"]


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


def _sizes(report: Report) -> dict[str, int | None]:
    ma = report.memory_analysis or {}

    def get(key: str) -> int | None:
        v = ma.get(key)
        return int(v) if isinstance(v, (int, float)) else None

    return {"generated_code": get("generated_code_size_in_bytes"),
            "argument": get("argument_size_in_bytes"), "output": get("output_size_in_bytes"),
            "temporary": get("temp_size_in_bytes"), "alias": get("alias_size_in_bytes"),
            "peak": report.memory.peak_bytes}


def bench(fn: Any, *args: Any, warmup: int = 3, iterations: int = 10,
          min_time: float | None = None, static_argnums: int | tuple[int, ...] = (),
          name: str | None = None, timeout: float = 60.0, **params: Any) -> BenchResult:
    """Time `fn(*args)` compiled.

    Trace, lower and compile are timed apart (by `inspect`, whose report is kept for the
    memory and kernel sections); the first run is timed on its own; `warmup` runs are
    discarded; then `iterations` runs are timed, each ending with ``block_until_ready`` on
    every output leaf.  With `min_time` (seconds) runs continue until that much time is
    measured.  `params` are the benchmark's parameters in jax-hpc-profiler's names
    (``precision=``, ``x=``, ``y=``, ``z=``, ``px=``, ``py=``, ``backend=``, ``nodes=``, or
    any other): hloscope fills the ones you leave out from the program and checks the
    ones you give against it (`BenchResult.checks`).

    With several processes (`jax.distributed`), every rank waits at a barrier before
    timing, the ranks' times are gathered (raising after `timeout` seconds if a rank is
    missing, and when ranks ran different counts), and `times` is the slowest rank's time
    per iteration; `ranks` keeps each rank's own times.
    """
    import jax

    from ._metadata import capture_metadata, program_params
    from ._ranks import Ranks

    ranks = Ranks(timeout)
    report = inspect(fn, *args, static_argnums=static_argnums)
    label = name or report.name
    compiled = report._cache["compiled"]
    dynamic = [a for i, a in enumerate(args)
               if i not in ((static_argnums,) if isinstance(static_argnums, int)
                            else static_argnums)]
    block = jax.block_until_ready
    t = time.perf_counter
    ranks.barrier("compiled")
    ranks.same("run counts", {"iterations": iterations, "warmup": warmup,
                              "min_time": min_time})
    running = f"running {label}"
    with user_code(running):
        t0 = t()
        block(compiled(*dynamic))
        first = t() - t0
        for _ in range(warmup):
            block(compiled(*dynamic))
        count = iterations
        if min_time is not None:  # one probe run sizes the count; rank 0's count is everyone's
            a = t()
            block(compiled(*dynamic))
            probe_time = max(t() - a, 1e-9)
            count = max(iterations, min(1_000_000, math.ceil(min_time / probe_time)))
    count = ranks.agree("iterations", count)
    ranks.barrier("timing")
    times: list[float] = []
    total = 0.0
    # One process may keep going until min_time is reached; several keep rank 0's count.
    with user_code(running):
        while len(times) < count or (min_time is not None and ranks.count == 1
                                     and total < min_time and len(times) < 1_000_000):
            a = t()
            out = compiled(*dynamic)
            block(out)
            dt = t() - a
            times.append(dt)
            total += dt
    probe = jax.numpy.zeros(())
    block(probe)
    overhead = _overhead(block, probe)
    per_rank = ranks.gather(times)
    slowest = [max(r[i] for r in per_rank) for i in range(len(times))]
    table, checks = program_params(label, dynamic, params)
    return BenchResult(name=label, params=table, times=slowest, first_run=first,
                       warmup=warmup, overhead=overhead, timings=dict(report.timings),
                       sizes=_sizes(report), checks=checks,
                       metadata=capture_metadata(fn, dynamic, report),
                       ranks=per_rank if len(per_rank) > 1 else [], report=report)
