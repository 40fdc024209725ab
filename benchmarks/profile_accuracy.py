"""How far `hloscope profile` can be trusted, on CPU programs of different kinds.

Each program is compiled once (`inspect`) and profiled twice, one profile after the
other, each of at least --runs runs and --min-time seconds of runs.  Targets (issue 30),
each printed with its figure, the 1-minute load average (`uptime`) at the time (which
counts this process's own threads: a profile alone lifts it to 2 or 3 on a 2-core machine)
and `others`, the CPU time other processes took while the two profiles ran, in CPUs'
worth (`Profile.others_cpu`; near 0: a quiet machine):
- match: the kernels of at least 95% of the profiled device time are kernels of the module;
- repeat: the per-kernel medians of the two profiles agree within 10% for the kernels
  over 5% of the step; the same for each kernel's minimum over the runs beside it (the
  statistic least moved by other processes); and, as the machine's own reference, the
  change of the step's median between the two profiles and between two plain timings
  of the same compile (as `bench` times it, sized alike: --runs and --min-time, after
  the same warm-up) taken one after the other right after them, and more such plain
  timings back to back (`plain ok`: of --plain-pairs pairs, those within 10%, and the
  worst change); below the table, the machine's own floor with no XLA at all
  (benchmarks/machine_floor.py, in a process of its own; --no-floor skips it); `2nd/1st`: the second
  profile's step over the first's (below 1: the first was slower); `faults`: the page
  faults per measured run of each profile (memory touched for the first time, which the
  kernel touching it pays) and the runs each left out for them (`clean_runs`);
- reconcile: on the median run (the run whose step is the median), the kernels' time and
  the named gaps (dispatch, idle, wait; minus the time kernels ran concurrently), all
  from the trace, against that run's wall time on the host's clock (perf_counter), within
  5%; the sum of the table's per-kernel medians is printed beside, not reconciled (each
  is the median over all runs, so their sum is no run's);
- overhead: a profiled run's wall time against the same compiled function timed as
  `bench` times it (perf_counter around the call and block_until_ready), in the same
  process, at most 20% more: 5 rounds of 10 plain runs then 10 profiled runs, alternated
  so that both see the same load, median against median (`overhead`: each 10 profiled runs
  a profile as `hloscope profile` takes them, in rounds with pauses between; `1 block`: in
  one block, back to back like the plain runs: the tracer's own cost); the process's CPU
  time per run
  plain and profiled beside, and what an empty trace costs (the profiler's own threads);
  the kernel events per run (XLA records each kernel it runs, and the end of each, on
  the CPU: a cost per event, not per second) and the wall time and CPU time a trace
  added per event (`us/ev`, `CPU/ev`; the CPU time is the less moved by the load); and
  `prof/bench`, what a user sees: the first profile's typical step over the first plain
  timing's median; `own`, the profile's own check (`Profile.slowdown`: its runs' median
  over unprofiled runs it takes right after its trace; a note says it where over 1.2);
- read: reading a ~100 MB trace (read_trace and measure) in under 10 s (CPU time beside
  the wall time, which the load inflates);
- and the estimate against the measurement per kernel kind (docs/profile.md's table).

Usage: python benchmarks/profile_accuracy.py [--runs N] [--min-time S] [--no-big]
       [--only fft,scan] [--files benchmarks/heldout_profile]
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
# As `hloscope profile` starts JAX on a machine with no GPU or TPU: libtpu, where it is
# installed, would otherwise load and its profiler keep most of a core busy during every
# trace (JAX_PLATFORMS= on the command line measures that case).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import glob  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import hloscope  # noqa: E402
from hloscope._profile import _capture  # noqa: E402
from hloscope._profile._capture import (  # noqa: E402
    MAX_ROUNDS, ROUNDS, WARMUP_TIME, profile_report)
from hloscope._profile._match import measure  # noqa: E402
from hloscope._profile._read import read_trace  # noqa: E402


def programs(big: bool = False):  # type: ignore[no-untyped-def]
    """The programs, sized for a CPU; `big`: each dimension scaled for a GPU (the sharded
    ones only where there are 8 devices)."""
    k = jax.random.key(0)
    g = 8 if big else 1
    r = lambda *s: jax.random.normal(k, tuple(d * g if d > 8 else d for d in s),  # noqa: E731
                                     jnp.float32)

    def matmul_chain(x, a, b, c):
        return jnp.tanh(jnp.tanh(x @ a) @ b) @ c

    def conv(x, w):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y).mean(axis=(1, 2))

    def fft2(x):
        return jnp.abs(jnp.fft.fft2(x)).sum(axis=0)

    def scan_rnn(h, w, xs):
        def body(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()
        return jax.lax.scan(body, h, xs)

    def attention(q, kk, v):
        s = jax.nn.softmax(q @ kk.T / 8.0, axis=-1)
        return s @ v

    def layernorm_mlp(x, w1, w2):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        h = (x - m) * jax.lax.rsqrt(v + 1e-5)
        return jax.nn.gelu(h @ w1) @ w2

    def sort_topk(x):
        return jnp.sort(x, axis=-1)[:, -8:], jnp.argsort(x[:, 0])

    def gather_scatter(table, idx, upd):
        g = table[idx]
        return table.at[idx].add(upd * 2.0), g.sum(0)

    def cumsum_reduce(x):
        return jnp.cumsum(x, axis=1).max(axis=0), jnp.exp(x).sum()

    def sharded_mlp(x, w1, w2):
        return jnp.tanh(x @ w1) @ w2

    def sharded_fft(x):
        return jnp.fft.fft(x, axis=1).real.sum(axis=0)

    idx = jnp.arange(0, 4096 * g, 3)
    single = [
        ("matmul chain", matmul_chain, (r(256, 512), r(512, 512), r(512, 512), r(512, 256))),
        ("convolution", conv, (r(8, 32, 32, 16), r(3, 3, 16, 32))),
        ("fft2", fft2, (r(256, 256),)),
        ("scan (rnn)", scan_rnn, (r(32, 128), r(128, 128), r(32, 32, 128))),
        ("attention", attention, (r(256, 64), r(256, 64), r(256, 64))),
        ("layernorm + mlp", layernorm_mlp, (r(256, 256), r(256, 512), r(512, 256))),
        ("sort", sort_topk, (r(256, 512),)),
        ("gather/scatter", gather_scatter, (r(4096, 64), idx,
                                            jax.random.normal(k, (len(idx), 64 * g)))),
        ("cumsum + reduce", cumsum_reduce, (r(512, 512),)),
    ]
    if jax.device_count() < 8:
        return single
    mesh = jax.make_mesh((8,), ("data",))
    sh = lambda a, spec: jax.device_put(a, NamedSharding(mesh, spec))  # noqa: E731
    return single + [
        ("sharded mlp x8", sharded_mlp, (sh(r(512, 256), P("data", None)), sh(r(256, 512), P()),
                                         sh(r(512, 256), P()))),
        ("sharded fft x8", sharded_fft, (sh(r(256, 512), P("data", None)),)),
    ]


def from_files(folder: str):  # type: ignore[no-untyped-def]
    """The programs of `folder`'s *.py files, in name order: each file's `f` and the
    arguments its `args()` gives."""
    import importlib.util

    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(f"heldout_{name}", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        yield name[:17], module.f, module.args()


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _load() -> str:
    """The 1-minute load average (`uptime`), printed beside every figure."""
    return f"{os.getloadavg()[0]:.1f}"


def plain_median(compiled: Any, args: list[Any], runs: int, min_time: float) -> float:
    """The median wall time of plain runs timed as `bench` times them, after the same
    warm-up as a profile's, at least `runs` runs and `min_time` seconds of them."""
    block, t = jax.block_until_ready, time.perf_counter
    start = t()
    while t() - start < WARMUP_TIME:
        block(compiled(*args))
    wall: list[float] = []
    start = t()
    while len(wall) < runs or t() - start < min_time:
        a = t()
        block(compiled(*args))
        wall.append(t() - a)
    return statistics.median(wall)


def _others(*profiles: Any) -> str:
    """Other processes' CPU time while the profiles' runs ran, in CPUs' worth (the most of
    them; `Profile.others_cpu`, from /proc/stat: the load average counts this process's
    threads too)."""
    xs = [p.others_cpu for p in profiles if p.others_cpu is not None]
    return f"{max(xs):.2f}" if xs else "-"


def _faults(p: Any) -> str:
    """A profile's page faults per measured run, and the runs it left out for them."""
    return f"{p.page_faults or 0:.0f} ({p.left_out})"


def _change(a: float, b: float) -> float:
    return abs(b - a) / a


def idle_profiler_cpu() -> float:
    """CPU seconds per second that an empty `jax.profiler.trace` costs this process (the
    profiler's own threads; libtpu's, where it is installed, spin while a trace is on)."""
    folder = tempfile.mkdtemp(prefix="hloscope-idle-")
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    with jax.profiler.trace(folder, profiler_options=options):
        c0, t0 = time.process_time(), time.perf_counter()
        time.sleep(1.0)
        cpu = (time.process_time() - c0) / (time.perf_counter() - t0)
    shutil.rmtree(folder, ignore_errors=True)
    return cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="profiled runs, at least")
    ap.add_argument("--min-time", type=float, default=1.0,
                    help="seconds of profiled runs per profile, at least")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help="rounds of runs per profile (default: hloscope's, %(default)s)")
    ap.add_argument("--max-rounds", type=int, default=MAX_ROUNDS,
                    help="rounds at most, while they have not settled (default: hloscope's, "
                         "%(default)s; --rounds for none more)")
    ap.add_argument("--no-big", action="store_true")
    ap.add_argument("--plain-pairs", type=int, default=4, metavar="K",
                    help="back-to-back pairs of plain timings per program, the machine's "
                         "own repeatability (default %(default)s)")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the machine's own floor (NumPy work timed as a profile is)")
    ap.add_argument("--only", default="", help="comma-separated parts of program names")
    ap.add_argument("--big", action="store_true", help="programs sized for a GPU (each "
                    "dimension x8; the default on a GPU)")
    ap.add_argument("--files", default="", metavar="DIR",
                    help="the programs of DIR/*.py instead (each an `f` and an `args()` "
                         "giving its arguments: benchmarks/heldout_profile)")
    a = ap.parse_args()
    platform = jax.devices()[0].platform
    big = a.big or platform == "gpu"
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout
          .strip())
    print(f"jax {jax.__version__}, {jax.device_count()} {platform} devices "
          f"({jax.devices()[0].device_kind}{', programs sized x8' if big else ''}; JAX_PLATFORMS="
          f"{os.environ.get('JAX_PLATFORMS', '')!r}); each profile: at least {a.runs} runs "
          f"and {a.min_time:g} s of runs in {a.rounds} rounds (up to {a.max_rounds} until "
          f"they settle); {os.cpu_count()} CPUs")
    print(f"an empty trace costs this process {idle_profiler_cpu():.2f} CPU-s per second "
          f"(load {_load()})\n")
    kinds: dict[str, list[float]] = defaultdict(list)
    head = (f"{'program':<17}{'load':>5}{'others':>7}{'kernels':>8}{'matched':>8}{'runs':>10}"
            f"{'step':>10}{'rounds':>7}{'repeat':>8}{'worst':>8}{'min rep':>9}{'step rep':>9}"
            f"{'bench rep':>10}{'plain ok':>9}{'worst':>7}"
            f"{'2nd/1st':>8}{'faults (left out)':>22}"
            f"{'overhead':>9}{'1 block':>8}{'prof/bench':>11}{'own':>6}{'events':>7}{'us/ev':>8}"
            f"{'CPU/ev':>8}{'CPU/run':>16}")
    print(head)
    fails: dict[str, int] = defaultdict(int)
    worst_match, worst_rep, worst_rec, over, recs = 1.0, 0.0, 0.0, [], []
    over1: list[float] = []
    users: list[float] = []
    owns: list[float] = []  # each first profile's own check (`Profile.slowdown`)
    step_reps, bench_reps, orders = [], [], []
    plain_ok: list[int] = []  # per program: back-to-back plain pairs within 10%
    plain_worst: list[float] = []
    only = [w for w in a.only.split(",") if w]
    for name, fn, args in (from_files(a.files) if a.files else programs(big)):
        if only and not any(w in name for w in only):
            continue
        report = hloscope.inspect(fn, *args)
        dyn = list(args)
        load = _load()
        p1, p2 = (profile_report(report, dyn, runs=a.runs, warmup=3, min_time=a.min_time,
                                 rounds=a.rounds, max_rounds=a.max_rounds)
                  for _ in range(2))
        compiled = report._cache["compiled"]
        blocks = [plain_median(compiled, dyn, a.runs, a.min_time)
                  for _ in range(a.plain_pairs + 1)]
        b1, b2 = blocks[:2]
        pairs = [_change(x, y) for x, y in zip(blocks, blocks[1:])]
        plain_ok.append(sum(c <= 0.10 for c in pairs))
        plain_worst.append(max(pairs))
        step_reps.append(_change(p1.times.step, p2.times.step))
        bench_reps.append(_change(b1, b2))
        orders.append(p2.times.step / p1.times.step)
        ov, ov1, cpu_plain, cpu_prof, added = overhead(report, dyn)
        over1.append(ov1)
        users.append(p1.times.step / b1)
        owns.append(p1.slowdown or 0.0)
        t1, t2 = p1.times, p2.times
        events = 2 * sum(k.calls for k in t1.kernels)  # each kernel's start and end
        big = [k for k in t1.kernels if k.share > 0.05]
        m2 = t2.by_name()
        diffs = [abs(m2[k.name].median - k.median) / k.median for k in big if k.name in m2]
        rep_ok = sum(d <= 0.10 for d in diffs)
        worst = max(diffs, default=0.0)
        mins = [abs(m2[k.name].minimum - k.minimum) / k.minimum for k in big if k.name in m2]
        min_ok = sum(d <= 0.10 for d in mins)
        fails["repeat (min)"] += min_ok < len(mins)
        worst_match = min(worst_match, t1.matched_share)
        worst_rep = max(worst_rep, worst)
        fails["match"] += t1.matched_share < 0.95
        fails["repeat"] += rep_ok < len(diffs)
        over.append(ov)
        fails["overhead"] += ov > 0.20
        print(f"{name:<17}{load:>5}{_others(p1, p2):>7}{len(t1.kernels):>8}"
              f"{_pct(t1.matched_share):>8}"
              f"{t1.runs:>5}/{t2.runs:<4}{t1.step * 1e3:>8.3f}ms{p1.rounds:>4}/{p2.rounds:<3}"
              f"{rep_ok:>4}/{len(diffs):<3}"
              f"{_pct(worst):>8}{min_ok:>6}/{len(mins):<2}{_pct(step_reps[-1]):>9}"
              f"{_pct(bench_reps[-1]):>10}{plain_ok[-1]:>6}/{a.plain_pairs:<2}"
              f"{_pct(plain_worst[-1]):>7}{orders[-1]:>8.2f}"
              f"{_faults(p1):>11}{_faults(p2):>11}{_pct(ov):>9}{_pct(ov1):>8}{users[-1]:>11.2f}"
              f"{p1.slowdown or 0.0:>6.2f}{events:>7.0f}"
              f"{added / events * 1e6 if events else 0.0:>+8.2f}"
              f"{(cpu_prof - cpu_plain) / events * 1e6 if events else 0.0:>+8.2f}"
              f"{cpu_plain * 1e3:>7.2f}/{cpu_prof * 1e3:<6.2f}ms")
        # Reconciliation, on the median run of the first profile: its kernels and gaps
        # (from the trace) against its wall time on the host's clock (perf_counter).
        g = t1.gaps
        wall = p1.wall[t1.steps.index(g.step)]  # the runs in the same order
        rec = abs(g.explained - wall) / wall
        worst_rec = max(worst_rec, rec)
        fails["reconcile"] += rec > 0.05
        recs.append((name, g, wall, rec, t1))
        for k in t1.kernels:
            if k.estimate is not None and k.median > 2e-6:
                kinds[k.category].append(k.estimate / k.median)
    print("\nreconciliation, on each program's median run (the run whose step is the median "
          "of the first profile's runs): the kernels' time and the named gaps, from the "
          "trace, against the same run's wall time on the host's clock (perf_counter); and "
          "the sum of the table's per-kernel medians (each the median over all runs, so "
          "not one run's), beside it")
    print(f"{'program':<17}{'wall':>10}{'kernels':>10}{'concurr.':>10}{'dispatch':>10}"
          f"{'idle':>10}{'wait':>10}{'= parts':>10}{'residual':>9}{'medians':>10}")
    us = lambda x: f"{x * 1e6:.0f}us"  # noqa: E731
    for name, g, wall, rec, t in recs:
        medians = sum(k.median for k in t.kernels) + sum(v for _, v in t.unmatched)
        print(f"{name:<17}{us(wall):>10}{us(g.kernels):>10}{us(g.concurrent):>10}"
              f"{us(g.dispatch):>10}{us(g.idle):>10}{us(g.wait):>10}{us(g.explained):>10}"
              f"{_pct(rec):>9}{us(medians):>10}")
    print()
    print(f"match: worst {_pct(worst_match)} of device time matched (target >= 95%); "
          f"{fails['match']} programs under")
    print(f"repeat: worst per-kernel median change {_pct(worst_rep)} for kernels over 5% of "
          f"the step (target <= 10%); {fails['repeat']} of {len(over)} programs with one "
          f"over; with each kernel's minimum instead: {fails['repeat (min)']} programs with "
          "one over")
    print(f"  the machine's own repeatability, for reference: the step's median changed by "
          f"{_pct(statistics.median(step_reps))} (median over programs; worst "
          f"{_pct(max(step_reps))}) between the two profiles, and by "
          f"{_pct(statistics.median(bench_reps))} (worst {_pct(max(bench_reps))}) between "
          f"two plain timings sized alike; the second profile's step over the first's: "
          f"median {statistics.median(orders):.2f} (from {min(orders):.2f} to "
          f"{max(orders):.2f})")
    print(f"  the same compile's plain step in {a.plain_pairs} back-to-back pairs of plain "
          f"timings per program (sized alike): {sum(plain_ok)} of {a.plain_pairs * len(plain_ok)} "
          f"pairs within 10%; every pair within 10% in {sum(k == a.plain_pairs for k in plain_ok)}"
          f" of {len(plain_ok)} programs; worst change {_pct(max(plain_worst))}")
    print(f"reconcile: kernels + gaps of the median run vs its wall clock: worst "
          f"{_pct(worst_rec)} (target <= 5%); {fails['reconcile']} programs over")
    print(f"overhead: a profiled run vs a plain one (as bench times it, alternated), median "
          f"over programs {_pct(statistics.median(over))}, worst {_pct(max(over))} (target "
          f"<= 20%); {fails['overhead']} programs over; profiled in one block like the plain "
          f"runs (the tracer's own cost): median {_pct(statistics.median(over1))}, worst "
          f"{_pct(max(over1))}, {sum(o > 0.20 for o in over1)} programs over")
    print(f"  a profile's typical step over bench's median, as a user sees them: median "
          f"{statistics.median(users):.2f} (from {min(users):.2f} to {max(users):.2f})")
    print(f"  a profile's own check (its runs over unprofiled ones right after its trace, "
          f"the figure its note gives over {_capture.SLOWED:.1f}): median "
          f"{statistics.median(owns):.2f} (from {min(owns):.2f} to {max(owns):.2f})")
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout
          .strip())
    print("\nestimate / measured per kernel kind (" + (
        "the H100's roofline" if platform == "gpu" else
        "the nominal CPU roofline: 100 GFLOP/s, 20 GB/s") + ")")
    print(f"{'kind':<16}{'kernels':>8}{'median':>10}{'min':>10}{'max':>10}")
    for kind, xs in sorted(kinds.items()):
        print(f"{kind:<16}{len(xs):>8}{statistics.median(xs):>10.3g}{min(xs):>10.3g}"
              f"{max(xs):>10.3g}")
    if not a.no_floor:
        host_floor(a.min_time)
    if not a.no_big:
        big_trace()


def overhead(report: Any, args: list[Any], rounds: int = 5,
             n: int = 10) -> tuple[float, float, float, float, float]:
    """A profiled run against a plain one (timed as `bench` times it: perf_counter around
    the call and block_until_ready), alternated in `rounds` of `n` runs each so that both
    see the same load: the median profiled run over the median plain run, less 1, with the
    profiled runs in a profile's rounds and in one block (``rounds=1``); the process's CPU
    time per run, plain and under a trace (the profiler's own threads and
    its recording of each event included); and the seconds a trace added to the median."""
    compiled = report._cache["compiled"]
    block, t, cpu = jax.block_until_ready, time.perf_counter, time.process_time
    plain_all, prof_all, block_all, c_plain = [], [], [], 0.0
    for _ in range(rounds):
        c0 = cpu()
        for _ in range(n):
            a = t()
            block(compiled(*args))
            plain_all.append(t() - a)
        c_plain += cpu() - c0
        prof_all += profile_report(report, args, runs=n, warmup=0, min_time=0).wall
        block_all += profile_report(report, args, runs=n, warmup=0, min_time=0,
                                    rounds=1).wall
    folder = tempfile.mkdtemp(prefix="hloscope-cpu-")
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # as profile_report traces
    with jax.profiler.trace(folder, profiler_options=options):
        for _ in range(2):
            block(compiled(*args))
        c0 = cpu()
        for _ in range(n):
            block(compiled(*args))
        c_prof = (cpu() - c0) / n
    shutil.rmtree(folder, ignore_errors=True)
    med = statistics.median
    return (med(prof_all) / med(plain_all) - 1, med(block_all) / med(plain_all) - 1,
            c_plain / len(plain_all), c_prof,
            med(prof_all) - med(plain_all))


def host_floor(min_time: float) -> None:
    """The machine's own floor with no XLA and no profiler: benchmarks/machine_floor.py,
    in a process of its own (NumPy on one thread), sized as a profile here."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    print(flush=True)  # before the child's lines, where stdout is a file
    subprocess.run([sys.executable, os.path.join(here, "machine_floor.py"), "--min-time",
                    str(min_time)], env=env, check=False)


def big_trace(target_mb: float = 100.0) -> None:
    """Profile many runs of a many-kernel program into a trace of ~100 MB; time reading."""
    def many(x):
        def body(h, _):
            for i in range(8):
                h = jnp.sin(h) * (i + 1.0) + jnp.cos(h[::-1])
            return h, None
        return jax.lax.scan(body, x, None, length=64)[0]

    x = jnp.ones(256)
    folder = tempfile.mkdtemp(prefix="hloscope-bigtrace-")
    runs = 400
    while True:
        t0 = time.perf_counter()
        p = hloscope.profile(many, x, runs=runs, warmup=1, keep=folder)
        took = time.perf_counter() - t0
        files = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        newest = max(files, key=os.path.getmtime)
        size = os.path.getsize(newest) / 1e6
        if size >= target_mb * 0.9 or runs > 50_000:
            break
        runs = int(runs * target_mb / max(size, 1e-3) * 1.05)
        for f in files:
            os.remove(f)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    c0, t0 = time.process_time(), time.perf_counter()
    trace = read_trace(newest)
    c1 = time.process_time()
    times = measure(trace, p.report.kernels, p.report.module)
    c2, t2 = time.process_time(), time.perf_counter()
    print(f"\nread: a {size:.0f} MB trace ({len(trace.events):,} kernel events, {runs} runs of "
          f"{len(times.kernels)} kernels; profiling them took {took:.1f} s)")
    print(f"  CPU time: read_trace {c1 - c0:.2f} s + measure {c2 - c1:.2f} s = {c2 - c0:.2f} s "
          f"(target < 10 s)")
    print(f"  wall time: {t2 - t0:.2f} s, at {load}")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
