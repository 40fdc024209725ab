"""`hloscope.bench(fn, *args)`: honest timings of a compiled function.

Trace, lower and compile are timed separately (by `inspect`, which also
gives the memory and kernel analyses; the compile timed is one without
XLA's dump files, which the analyses' compile writes); the first run is
timed on its own and never mixed into the statistics; warm-up runs are
discarded; every timed run ends with ``block_until_ready`` on every output
leaf.  The statistics are the minimum, median, mean, standard deviation,
interquartile range, maximum and last time, a distribution-free 95%
confidence interval for the median (order statistics), and the runs flagged
as outliers (beyond 1.5 IQR of the quartiles).  The harness's own cost per
run (two clock reads and the block_until_ready call on an already finished
array) is measured in the same process and reported.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from .._errors import HloscopeError
from .._jax._inspect import Report, inspect
from .._jax._user import user_code
from .._profile._contention import busy_machine, others, sample
from ._donate import Inputs
from ._ranks import Ranks
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


def _describe(args: list[Any]) -> str:
    """The arguments' types, shapes and shardings, to compare across ranks."""
    import jax

    parts = []
    for a in jax.tree.leaves(args):
        shape = getattr(a, "shape", None)
        if shape is None:
            parts.append(repr(a)[:40])
            continue
        spec = getattr(getattr(a, "sharding", None), "spec", None)
        parts.append(f"{getattr(a, 'dtype', '?')}[{','.join(map(str, shape))}]"
                     + (f" {spec}" if spec is not None else ""))
    return ", ".join(parts)


_METADATA = re.compile(r",? metadata=\{[^{}]*\}")


def _program_text(hlo: str) -> str:
    """The optimized module without what differs between identical programs on two hosts:
    metadata (source paths and lines) and the stack-frame tables."""
    lines = [ln for ln in hlo.splitlines() if "=" in ln or ln.startswith(("ENTRY", "%", "}"))]
    return "\n".join(_METADATA.sub("", ln) for ln in lines
                     if not ln.lstrip()[:1].isdigit())  # table rows: `1 {file_name_id=...}`


_MAX_RUNS = 1_000_000


@contextlib.contextmanager
def _guard(ranks: Ranks, phase: str, running: str,
           progress: list[float]) -> Iterator[Callable[[], None]]:
    """Run the user's program: its errors are theirs, unless another rank's leaving made
    its collectives fail (then the error says so); yields `check`, to call after each run,
    which raises when another rank stopped answering (see `Ranks.watch`)."""
    try:
        with ranks.watch(phase, progress) as check, user_code(running):
            yield check
    except HloscopeError:
        raise
    except Exception as e:  # noqa: BLE001
        peer = ranks.peer_failure(e, phase)
        if peer is not None:
            raise peer from None
        raise


def _more_runs(times: list[float], min_time: float | None) -> int:
    """How many more runs bring the timed total toward `min_time`, at the mean so far:
    half the way while more than a tenth is missing (the mean may drift), then all."""
    total = sum(times)
    if min_time is None or total >= min_time or len(times) >= _MAX_RUNS:
        return 0
    gap = min_time - total
    mean = max(total / len(times), 1e-9)
    more = gap / mean if gap <= min_time / 10 else gap / 2 / mean
    return min(_MAX_RUNS - len(times), max(1, math.ceil(more)))


def bench(fn: Any, *args: Any, warmup: int = 3, iterations: int = 10,
          min_time: float | None = None, static_argnums: int | tuple[int, ...] = (),
          name: str | None = None, timeout: float = 60.0, target: str | None = None,
          mesh: str | dict[str, int] | None = None,
          shard: dict[int, Any] | list[Any] | None = None, **params: Any) -> BenchResult:
    """Time `fn(*args)` compiled.

    Trace, lower and compile are timed apart (by `inspect`, whose report is kept for the
    memory and kernel sections; the compile is timed without XLA's dump files, then done
    again with them for the analyses); the first run is timed on its own; `warmup` runs
    are discarded; then `iterations` runs are timed, each ending with
    ``block_until_ready`` on every output leaf.  With `min_time` (seconds) runs continue
    until that much time is measured (on every rank, with several processes: they agree
    on the count).  `params` are the benchmark's parameters in jax-hpc-profiler's names
    (``precision=``, ``x=``, ``y=``, ``z=``, ``px=``, ``py=``, ``backend=``, ``nodes=``, or
    any other): hloscope fills the ones you leave out from the program and checks the
    ones you give against it (`BenchResult.checks`).

    A function that donates arguments (``donate_argnums``) gets fresh copies of the
    donated arrays for every run, made before the run's clock starts (said in the
    result's metadata, ``donated_arguments``).

    With several processes (`jax.distributed`), every rank waits at a barrier before
    timing, checks that every rank compiled the same program with the same arguments,
    parameters and run counts, and the ranks' times are gathered; `times` is the slowest
    rank's time per iteration and `ranks` keeps each rank's own times.  A rank that is
    missing for `timeout` seconds at any of these steps raises `HloscopeError` naming it
    and the step (and JAX's own shutdown at exit, which would wait for it and abort, is
    disarmed).  While the program runs, a rank that gives no sign of life (its pulse in the
    key-value store) for `timeout` seconds raises the same error, whatever the program
    does; when the program's collectives wait for it, nothing can interrupt them, and a
    watchdog prints the error and ends the process (exit status 2), as when no run
    finishes for `timeout` seconds.  So with several processes `timeout` is also the
    longest one run may take.  See docs/bench.md.

    `target` (with `mesh` and `shard`, as in `inspect`) also compiles the program for a GPU
    or TPU that need not be here, before anything is timed: the result's `target_report`
    says what XLA makes for it and whether it fits there (the times are this machine's).
    """
    ranks = Ranks(timeout)
    with ranks.pulse():
        return _bench(ranks, fn, args, warmup, iterations, min_time, static_argnums, name,
                      target, mesh, shard, params)


def _bench(ranks: Ranks, fn: Any, args: tuple[Any, ...], warmup: int, iterations: int,
           min_time: float | None, static_argnums: int | tuple[int, ...], name: str | None,
           target: str | None, mesh: str | dict[str, int] | None,
           shard: dict[int, Any] | list[Any] | None, params: dict[str, Any]) -> BenchResult:
    import jax

    from ._metadata import capture_metadata, program_params

    ranks.phase("tracing and compiling")
    report = inspect(fn, *args, static_argnums=static_argnums, _time_plain_compile=True)
    target_report = None
    if target is not None:
        ranks.phase(f"compiling for {target}")
        target_report = inspect(fn, *args, static_argnums=static_argnums, target=target,
                                mesh=mesh, shard=shard)
    label = name or report.name
    compiled = report._cache["compiled"]
    dynamic = [a for i, a in enumerate(args)
               if i not in ((static_argnums,) if isinstance(static_argnums, int)
                            else static_argnums)]
    inputs = Inputs(compiled, dynamic)
    fresh = inputs.fresh  # donated arguments: new copies before each run, not timed
    block = jax.block_until_ready
    t = time.perf_counter
    ranks.phase("waiting for the other ranks to compile")
    ranks.barrier("compiled")
    ranks.same("run counts", {"iterations": iterations, "warmup": warmup,
                              "min_time": min_time})
    ranks.same_program(_describe(dynamic), params, _program_text(report.hlo_after or ""))
    running = f"running {label}"

    def guarded(phase: str, runs: list[float]) -> Any:
        ranks.phase(phase)
        return _guard(ranks, phase, running, runs)

    def run(into: list[float], check: Callable[[], None]) -> None:
        run_args = fresh()
        a = t()
        block(compiled(*run_args))
        into.append(t() - a)
        check()

    progress: list[float] = []
    with guarded("first run", progress) as check:
        run(progress, check)
    first = progress[0]
    with guarded("warm-up runs", progress) as check:
        for _ in range(warmup + (min_time is not None)):  # and a probe run, for min_time
            run(progress, check)
    count = iterations
    if min_time is not None:  # half of min_time at the warm-up and probe runs' median
        per_run = max(statistics.median(progress[1:]), 1e-9)
        count = max(iterations, min(_MAX_RUNS, math.ceil(min_time / 2 / per_run)))
    # Every rank runs the same count (the program's collectives need it): the most any
    # rank asks for; then, for min_time, more rounds, sized by the mean of the timed runs
    # (a few runs' median misses a slow tail), until every rank's total reaches it.
    count = ranks.agree("iterations", count)
    ranks.phase("waiting for the other ranks to start timing")
    ranks.barrier("timing")
    times: list[float] = []
    before = sample()  # what other processes take while the runs are timed
    for round_ in itertools.count(1):
        with guarded("timed runs", times) as check:
            while len(times) < count:
                run(times, check)
        if min_time is None:
            break
        more = ranks.agree(f"more runs {round_}", _more_runs(times, min_time))
        if not more:
            break
        count += more
    after = sample()
    ranks.phase("gathering the times")
    probe = jax.numpy.zeros(())
    block(probe)
    overhead = _overhead(block, probe)
    per_rank = ranks.gather(times)
    slowest = [max(r[i] for r in per_rank) for i in range(len(times))]
    table, checks = program_params(label, dynamic, params)
    metadata = capture_metadata(fn, dynamic, report)
    metadata["other_processes_cpus"] = others(before, after)
    busy = busy_machine(before, after, "benchmark")
    if busy:  # its interval is of this run's conditions: said (a trial's four back to back
        metadata["busy_machine"] = busy  # disagreed beyond their 95% intervals)
    if inputs.donated:
        metadata["donated_arguments"] = (
            f"{inputs.donated} array(s) donated: fresh copies for every run, made outside "
            "the timed region")
    return BenchResult(name=label, params=table, times=slowest, first_run=first,
                       warmup=warmup, overhead=overhead, timings=dict(report.timings),
                       sizes=_sizes(report), checks=checks,
                       metadata=metadata,
                       ranks=per_rank if len(per_rank) > 1 else [], report=report,
                       target_report=target_report)
