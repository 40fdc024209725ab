"""The machine's own floor for profile_accuracy.py's repeat target: how far the same work's
time moves from one measurement to the next on this machine, with no XLA and no profiler.

NumPy work on one thread (run it with OPENBLAS_NUM_THREADS=1, as profile_accuracy.py
does): a 4 MiB copy (held by the L3 cache), a 64 MiB copy (from memory) and a 128x128
matmul (in the L1 and L2 caches), each timed as `hloscope profile` times a kernel: 4
rounds 50 ms apart over --min-time seconds, each round's median, the interquartile mean
of those (hloscope's own estimator, `_mean_of_medians`); --pairs
such measurements taken in pairs one after the other, and each pair's change printed
against the 10% the target allows a kernel.

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/machine_floor.py [--min-time S] [--pairs K]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from hloscope._profile._match import _mean_of_medians

ROUNDS, PAUSE = 4, 0.05  # as hloscope's profiles (hloscope._profile._capture)


def measured(f: Callable[[], object], min_time: float) -> float:
    """The interquartile mean over ROUNDS rounds, PAUSE seconds apart, of each round's
    median time of `f` (at least 5 calls and min_time / ROUNDS seconds of them, after one
    unmeasured)."""
    t = time.perf_counter
    medians = []
    for r in range(ROUNDS):
        if r:
            time.sleep(PAUSE)
        f()
        xs: list[float] = []
        start = t()
        while len(xs) < 5 or t() - start < min_time / ROUNDS:
            s0 = t()
            f()
            xs.append(t() - s0)
        medians.append(statistics.median(xs))
    return _mean_of_medians(medians, list(range(len(medians))))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds per measurement")
    ap.add_argument("--pairs", type=int, default=5, help="pairs of measurements per work")
    a = ap.parse_args()
    a4, b4 = np.ones(1 << 20, np.float32), np.empty(1 << 20, np.float32)
    a64, b64 = np.ones(16 << 20, np.float32), np.empty(16 << 20, np.float32)
    m = np.ones((128, 128), np.float32)
    work: list[tuple[str, Callable[[], object]]] = [
        ("copy 4 MiB", lambda: np.copyto(b4, a4)), ("copy 64 MiB", lambda: np.copyto(b64, a64)),
        ("matmul 128", lambda: m @ m)]
    print(f"the machine's own floor (load {os.getloadavg()[0]:.1f}; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '')!r}): NumPy work, no XLA, no profiler, "
          f"timed as a profile times a kernel ({ROUNDS} rounds over {a.min_time:g} s, the "
          f"interquartile mean of the rounds' medians), {a.pairs} pairs one after the other; "
          "each pair's change (the target allows a kernel 10%)")
    for name, f in work:
        changes = []
        for _ in range(a.pairs):
            x, y = measured(f, a.min_time), measured(f, a.min_time)
            changes.append(abs(y - x) / x)
        print(f"  {name:<12} within 10% in {sum(c <= 0.10 for c in changes)} of {a.pairs} "
              f"pairs; changes {' '.join(f'{100 * c:.1f}%' for c in changes)}", flush=True)


if __name__ == "__main__":
    main()
