"""Would another statistic of a profile's runs repeat better than hloscope's?

Each program of benchmarks/profile_accuracy.py is profiled three times in a row, as
`hloscope profile` takes a profile (rounds, at least --runs runs and --min-time seconds
of them).  For every kernel over 5% of the step in the earlier profile of each
consecutive pair, the kernel's time is taken from the same runs under several statistics,
and the worst change between the two profiles is printed per statistic, with the change
of the profiles' typical step beside:

- cur: hloscope's (the interquartile mean over the rounds of each round's median);
- med, mean, tm10, iqm: the median, mean, 10% trimmed mean and interquartile mean of all
  the runs, rounds ignored;
- r_tm10, r_mean, r_iqm: each round's 10% trimmed mean, mean or interquartile mean, then
  the interquartile mean over the rounds, as hloscope averages the rounds' medians.

A statistic that repeated much better than `cur` on the same runs would be the one to
use; where every statistic moves with the step, the machine moved, not the statistic.

Usage: python benchmarks/profile_statistics.py [--seconds 175] [--only fft,scan]
       [--runs 20] [--min-time 1]
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_accuracy  # noqa: E402

import hloscope  # noqa: E402
from hloscope._profile import _match  # noqa: E402
from hloscope._profile._capture import profile_report  # noqa: E402

Runs = tuple[list[float], list[int]]  # a kernel's time in each run, and each run's round
_calls: list[tuple[float, Runs]] = []  # each figure _mean_of_medians gave, from its runs
_own = _match._mean_of_medians


def _spy(xs: list[float], rounds: list[int]) -> float:
    """hloscope's own statistic, keeping the runs it was taken from."""
    v = _own(xs, rounds)
    _calls.append((v, (list(xs), list(rounds))))
    return v


def _iqm_over(values: list[float]) -> float:
    s = sorted(values)
    k = (len(s) + 1) // 4
    return statistics.fmean(s[k:len(s) - k])


def _trimmed(values: list[float], f: float) -> float:
    s = sorted(values)
    k = int(len(s) * f)
    return statistics.fmean(s[k:len(s) - k] or s)


def _by_round(xs: list[float], rounds: list[int]) -> list[list[float]]:
    by: dict[int, list[float]] = {}
    for x, r in zip(xs, rounds):
        by.setdefault(r, []).append(x)
    return list(by.values())


STATS: dict[str, Callable[[list[float], list[int]], float]] = {
    "cur": _own,
    "med": lambda xs, rr: statistics.median(xs),
    "mean": lambda xs, rr: statistics.fmean(xs),
    "tm10": lambda xs, rr: _trimmed(xs, 0.10),
    "iqm": lambda xs, rr: _trimmed(xs, 0.25),
    "r_tm10": lambda xs, rr: _iqm_over([_trimmed(v, 0.10) for v in _by_round(xs, rr)]),
    "r_mean": lambda xs, rr: _iqm_over([statistics.fmean(v) for v in _by_round(xs, rr)]),
    "r_iqm": lambda xs, rr: _iqm_over([_trimmed(v, 0.25) for v in _by_round(xs, rr)]),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=1e9,
                    help="start no program after this many seconds")
    ap.add_argument("--only", default="", help="comma-separated parts of program names")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=1.0)
    a = ap.parse_args()
    _match._mean_of_medians = _spy  # rounds are always taken here: measure calls it
    only = [w for w in a.only.split(",") if w]
    deadline = time.time() + a.seconds
    print(f"{'program':<17}pair " + "".join(f"{s:>8}" for s in STATS)
          + "    step  (worst change, kernels over 5% of the step)")
    for name, fn, args in profile_accuracy.programs(False):
        if only and not any(w in name for w in only):
            continue
        if time.time() > deadline:
            print("(the time given is up: the programs after this one were not run)")
            break
        report = hloscope.inspect(fn, *args)
        profiles = []
        for _ in range(3):
            _calls.clear()
            p = profile_report(report, list(args), runs=a.runs, warmup=3,
                               min_time=a.min_time)
            runs = {k.name: next(r for v, r in _calls if v == k.median)
                    for k in p.times.kernels if any(v == k.median for v, _ in _calls)}
            profiles.append((p, runs))
        for i in range(2):
            (p1, r1), (p2, r2) = profiles[i], profiles[i + 1]
            big = [k.name for k in p1.times.kernels
                   if k.share > 0.05 and k.name in r1 and k.name in r2]
            worst = {s: max((abs(f(*r2[k]) - f(*r1[k])) / f(*r1[k]) for k in big
                             if f(*r1[k])), default=0.0) for s, f in STATS.items()}
            step = abs(p2.times.step - p1.times.step) / p1.times.step
            print(f"{name:<17}{i + 1}-{i + 2}  "
                  + "".join(f"{100 * worst[s]:>7.1f}%" for s in STATS)
                  + f" {100 * step:>6.1f}%  rounds {p1.rounds}/{p2.rounds}", flush=True)


if __name__ == "__main__":
    main()
