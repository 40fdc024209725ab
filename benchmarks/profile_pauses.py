"""Do a profile's rounds (pauses between blocks of runs) measure the runs a user's loop
makes?  For each program of benchmarks/profile_accuracy.py, profiles taken three ways,
alternated so that each sees the same load, two profiles each, then `bench`'s timing of
the same compile:

- `pause`: the rounds as `hloscope profile` takes them (PAUSE seconds between rounds, SETTLE
  unmarked runs after each pause);
- `pause+settle`: the same, with at least --settle seconds of unmarked runs after each pause;
- `no pause`: the rounds back to back (one block).

Printed per program and way: the worst per-kernel change between the two profiles (kernels
over 5% of the step) and each profile's typical step over `bench`'s median (1.00: the
profile measured the runs a loop makes).  With --after-pause, first, for each program, plain
runs (no profiler) after a pause as long as a profile's, by their index after it, against
runs back to back.

    python benchmarks/profile_pauses.py [--runs N] [--min-time S] [--settle S] [--only fft]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_accuracy import _load, plain_median, programs  # noqa: E402  (sets JAX's env)

import jax  # noqa: E402

import hloscope  # noqa: E402
from hloscope._profile import _capture  # noqa: E402


INDICES = (0, 1, 2, 3, 5, 10, 20, 40)


def after_pause(compiled, args, pauses: int = 20) -> str:  # type: ignore[no-untyped-def]
    """Plain runs' medians by their index after a pause of PAUSE seconds (over `pauses`
    pauses), and the median of runs back to back after as many, in microseconds."""
    block, t = jax.block_until_ready, time.perf_counter
    for _ in range(50):
        block(compiled(*args))
    by: list[list[float]] = [[] for _ in range(INDICES[-1] + 1)]
    for _ in range(pauses):
        time.sleep(_capture.PAUSE)
        for i in range(len(by)):
            a = t()
            block(compiled(*args))
            by[i].append(t() - a)
    plain = []
    for _ in range(pauses * len(by)):
        a = t()
        block(compiled(*args))
        plain.append(t() - a)
    us = lambda xs: f"{statistics.median(xs) * 1e6:>7.0f}"  # noqa: E731
    return "".join(us(by[i]) for i in INDICES) + "  " + us(plain)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--settle", type=float, default=0.05)
    ap.add_argument("--only", default="")
    ap.add_argument("--after-pause", action="store_true")
    a = ap.parse_args()
    ways = {"pause": (_capture.PAUSE, 0.0), "pause+settle": (_capture.PAUSE, a.settle),
            "no pause": (0.0, 0.0)}
    platform = jax.devices()[0].platform
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}, {os.cpu_count()} CPUs, "
          f"load {_load()}; pause {_capture.PAUSE * 1e3:.0f} ms, settle {a.settle * 1e3:.0f} ms")
    only = [w for w in a.only.split(",") if w]
    chosen = [(n, f, x) for n, f, x in programs(platform == "gpu")
              if not only or any(w in n for w in only)]
    if a.after_pause:
        print("plain runs after a pause, median us by index after it; then back to back")
        print(f"{'program':<17}" + "".join(f"{i:>7}" for i in INDICES) + f"{'b2b':>9}")
        for name, fn, args in chosen:
            compiled = jax.jit(fn).lower(*args).compile()
            print(f"{name:<17}{after_pause(compiled, list(args))}", flush=True)
        print()
    print(f"{'program':<17}{'load':>5}" + "".join(f"{w:>26}" for w in ways))
    print(f"{'':<22}" + "".join(f"{'repeat  step/bench':>26}" for _ in ways))
    totals: dict[str, list[tuple[float, float, float]]] = {w: [] for w in ways}
    for name, fn, args in chosen:
        report = hloscope.inspect(fn, *args)
        compiled = report._cache["compiled"]
        dyn = list(args)
        cells = []
        for way, (pause, settle) in ways.items():
            _capture.PAUSE, _capture.SETTLE_TIME = pause, settle
            p1, p2 = (_capture.profile_report(report, dyn, runs=a.runs, warmup=3,
                                              min_time=a.min_time) for _ in range(2))
            bench = plain_median(compiled, dyn, a.runs, a.min_time)
            t1, m2 = p1.times, p2.times.by_name()
            big = [k for k in t1.kernels if k.share > 0.05 and k.name in m2]
            rep = max((abs(m2[k.name].median - k.median) / k.median for k in big), default=0)
            r1, r2 = t1.step / bench, p2.times.step / bench
            totals[way].append((rep, r1, r2))
            cells.append(f"{100 * rep:>9.1f}%  {r1:>5.2f} {r2:>5.2f}")
        print(f"{name:<17}{_load():>5}" + "".join(f"{c:>26}" for c in cells), flush=True)
    print()
    for way, xs in totals.items():
        reps = [x[0] for x in xs]
        ratios = [r for x in xs for r in x[1:]]
        print(f"{way:<14} repeat worst {100 * max(reps):.1f}%, {sum(r > 0.1 for r in reps)} of "
              f"{len(reps)} over 10%; step/bench median {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f} to {max(ratios):.2f})")


if __name__ == "__main__":
    main()
