"""Run a compiled function under JAX's profiler and give each kernel of its kernel graph
its measured time (`profile_report`, for `hloscope.profile` and `inspect(profile=...)`).

The function is compiled once (by `inspect`, which also gives the module and its kernel
graph), run once and `warmup` more times, and more until `WARMUP_TIME` seconds have
passed (unless `warmup` is 0; a program's first quarter second of runs is often its
slowest: docs/profile.md), then the same once under a throwaway trace (not with `warmup`
0: under a trace, runs land on memory never touched before until an earlier trace has
touched it), then, with Python's collector paused, under ``jax.profiler.trace`` into a
temporary folder: `SETTLE` unmarked runs first (the profiler's first runs are slower
while it starts; they are traced but not measured), then at least `runs` runs and more
until `min_time` seconds have passed (at most `MAX_RUNS`), each marked with an
``hloscope.run`` annotation from before the call to after its outputs are ready (its
wall time). Spreading the runs over `min_time` keeps one burst of another process's work
from landing on most of them. The runs are taken in `ROUNDS` rounds, `PAUSE` seconds
apart, each after its own `SETTLE` runs (and `SETTLE_TIME` seconds of them, none by
default: benchmarks/profile_pauses.py measures what a pause costs): on a CPU, XLA's
threads stay in one state for as long as runs follow each other (on a quiet 16-core
machine, blocks of a scan's plain runs were within 5% of each other back to back, and
from 394 to 624 us a step with 50 ms between them: benchmarks/profile_blocks.py), so one
block of runs measures one state; each kernel's time is the interquartile mean over the
rounds of its median in each round (`measure`). Where the rounds' medians have not settled after
`ROUNDS` rounds (their standard error over `STEADY` of their mean: a machine moving
between states), more rounds of the same size follow, up to `MAX_ROUNDS`, and a note
says so where they never settle. Functions that donate arguments get fresh copies for
every run, made outside the marked region. The process's page faults are counted around
each run, and the runs that touched new memory are left out (`clean_runs`); no run
is taken once the process's peak memory has grown by `memory_budget` (a quarter of the
memory available), which some programs do every run under the profiler. Right after
the trace, a round's worth of runs is timed without the profiler, as `bench` times them:
the profile's own check of what profiling cost (`Profile.slowdown`, and a note, `slowed`,
over `SLOWED`). The trace is read back (`read_trace`) and joined to the kernel graph
(`measure`).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

try:
    import resource
except ImportError:  # not on Windows: no page faults counted there
    resource = None  # type: ignore[assignment]

from .._errors import HloscopeError
from .._jax._user import user_code
from .._jax._values import memory_available
from .._units import format_bytes, format_seconds
from ._contention import busy_machine, others, sample
from ._kept import select_runs, write_kept_runs
from ._match import measure, round_medians
from ._read import KEPT_MODULE, RUN_ANNOTATION, read_trace
from ._times import MeasuredTimes

__all__ = ["IDLE_TPU_PROFILER", "MAX_ROUNDS", "MAX_RUNS", "MEMORY_SHARE", "MIN_TIME", "PAUSE",
           "ROUNDS", "SETTLE", "SETTLE_TIME", "SLOWED", "STEADY", "TRACED_KERNEL_CPU",
           "WARMUP_TIME", "Profile", "donated_copies", "idle_tpu_profiler",
           "last_round_median", "many_kernels", "memory_budget", "memory_stop", "profile_report",
           "run_cap", "settled", "slowed", "unsettled", "virtual_devices"]

MIN_TIME = 0.25  # seconds of profiled runs, by default
MAX_RUNS = 2000  # however short the run: the trace of a run is read back whole
SETTLE = 2
SETTLE_TIME = 0.0  # seconds of unmarked runs after each pause, at least
ROUNDS = 4  # blocks of runs, each measured, PAUSE seconds apart (see the docstring)
MAX_ROUNDS = 16  # rounds at most, while the rounds' medians have not settled
STEADY = 0.025  # settled: the standard error of the rounds' medians within 2.5% of their mean
PAUSE = 0.05  # seconds: long enough for XLA's idle threads to sleep
WARMUP_TIME = 0.25  # seconds of warm-up runs, at least, when there is any warm-up


@dataclass
class Profile:
    """What `profile` measured: `times` (each kernel's measured time, see
    `MeasuredTimes`), `report` (the `inspect` report of the compile: module, memory,
    kernels, advice), `wall` (each profiled run's wall time, seconds), `trace_seconds`
    (how long reading the trace took), `trace_dir` (where the trace was kept, if
    asked), `plain_wall` (the runs timed without the profiler right after the trace,
    `slowdown`) and `others_cpu` (other processes' CPU time while the traced runs ran, in
    CPUs' worth: ``_contention``; None where the machine's clock cannot be read)."""

    name: str
    times: MeasuredTimes
    report: Any  # the `inspect` Report
    wall: list[float] = field(default_factory=list)
    read_seconds: float = 0.0
    trace_dir: str | None = None
    donated: int = 0
    notes: tuple[str, ...] = ()
    page_faults: float | None = None  # per measured run, the whole process's (Unix)
    left_out: int = 0  # runs left out for touching new memory (`clean_runs`)
    rounds: int = 0  # rounds of runs taken (`settled`)
    plain_wall: list[float] = field(default_factory=list)  # unprofiled runs after the trace
    others_cpu: float | None = None  # other processes' CPUs' worth during the trace

    @property
    def plain_step(self) -> float | None:
        """The median wall time of the unprofiled runs taken right after the trace (as
        `bench` times them): what the step is without the profiler."""
        return statistics.median(self.plain_wall) if self.plain_wall else None

    @property
    def slowdown(self) -> float | None:
        """The profiled runs' median wall time over the unprofiled runs' (`plain_step`):
        what profiling cost this run (1.0: nothing)."""
        plain = self.plain_step
        return statistics.median(self.wall) / plain if plain and self.wall else None

    def to_dict(self) -> dict[str, Any]:
        d = self.times.to_dict()
        d.update({"name": self.name, "wall_seconds": [round(w, 12) for w in self.wall],
                  "donated_arguments": self.donated, "rounds": self.rounds,
                  "unprofiled_wall_seconds": [round(w, 12) for w in self.plain_wall],
                  "other_processes_cpus": None if self.others_cpu is None
                  else round(self.others_cpu, 3),
                  "trace_dir": self.trace_dir,
                  "notes": list(self.notes)})
        return d

    def __str__(self) -> str:
        return str(self.times) + "".join(
            textwrap.fill(f"note: {n}", 100, subsequent_indent="  ") + "\n"
            for n in self.notes)

    def __repr__(self) -> str:
        return f"Profile({self.name!r}: {self.times!r})"


IDLE_TPU_PROFILER = (
    "JAX loaded libtpu, and no TPU is here: libtpu's profiler ran beside this trace, "
    "keeping most of a CPU core busy (0.7 CPU-s per s measured on a 2-core machine) and "
    "slowing the runs where cores are few; set JAX_PLATFORMS=cpu before JAX starts "
    "(hloscope profile does when this machine has no GPU or TPU)")


def idle_tpu_profiler() -> bool:
    """Whether JAX loaded libtpu's plugin (whose profiler joins every trace) without a TPU
    backend: it does so wherever libtpu is installed, TPU or not."""
    try:
        from jax._src import xla_bridge
        from jax._src.lib import xla_client

        return bool(xla_client.pjrt_plugin_loaded("tpu")) and "tpu" not in getattr(
            xla_bridge, "_backends", {"tpu": None})
    except (ImportError, AttributeError):  # another JAX: no note rather than a wrong one
        return False


def donated_copies(donated: int) -> str | None:
    """A note saying that the function donates arguments, which get fresh copies."""
    if not donated:
        return None
    return (f"the function donates {donated} argument{'' if donated == 1 else 's'}: each run "
            f"got fresh copies, made outside the profiled region")


TRACED_KERNEL_CPU = 1.5e-6  # XLA's recording of one kernel run on the CPU (docs/profile.md)


def many_kernels(times: MeasuredTimes) -> str | None:
    """A note when XLA's recording of each kernel run on the CPU (two trace events, about
    1.1 to 1.7 us of CPU, measured on a 2-core machine) is over a tenth of the step."""
    calls = sum(k.calls for k in times.kernels)
    cost = calls * TRACED_KERNEL_CPU
    if times.platform != "cpu" or not times.step or cost <= 0.1 * times.step:
        return None
    plural = "" if round(calls) == 1 else "s"
    return (f"this program runs {calls:.0f} kernel{plural} per run; XLA records each under the "
            f"profiler (about {TRACED_KERNEL_CPU * 1e6:.1f} us of CPU each on the CPU "
            f"backend), which may add about {cost / times.step:.0%} to its step; plain "
            "runs (hloscope bench) show the step without it (docs/profile.md, Overhead)")


def virtual_devices(times: MeasuredTimes) -> str | None:
    """A note where collectives took a tenth of the step or more on several CPU devices:
    XLA's virtual devices (--xla_force_host_platform_device_count) share this machine's
    CPUs, so a collective waits for the devices that have not reached it yet (a trial:
    'all-gather 39.8%' read as the program's communication)."""
    if times.platform != "cpu" or times.devices < 2 or times.step <= 0:
        return None
    share = sum(k.median for k in times.collectives) / times.step
    if share < 0.1:
        return None
    cpus = os.cpu_count() or 1
    return (f"collectives took {share:.0%} of the step on {times.devices} CPU devices that "
            f"share this machine's {cpus} CPU{'s' if cpus != 1 else ''} (XLA's virtual "
            "devices): a collective's time is mostly waiting for the devices that have not "
            "reached it yet, not moving data; on a GPU or TPU the same program's collectives "
            "cost what the links take (hloscope inspect --target estimates them)")


def settled(medians: list[float]) -> bool:
    """Whether the rounds' medians (each round's median run) have settled: their mean's
    standard error within `STEADY` of it.  A machine that runs every round alike settles
    at the fewest rounds; one that moves between states (docs/profile.md, Rounds) takes
    more, whose mean moves less from one profile to the next."""
    n = len(medians)
    if n < 2:
        return False
    mean = statistics.fmean(medians)
    return statistics.stdev(medians) / n ** 0.5 <= STEADY * mean


def unsettled(wall: list[float], round_of: list[int]) -> str | None:
    """A note where the rounds of runs never settled (`settled`): how far apart their
    medians were, and what that means for comparing two profiles."""
    medians = round_medians(wall, round_of)
    if len(medians) < 2 or settled(medians):
        return None
    lo, hi = min(medians), max(medians)
    return (f"the step's median moved from {format_seconds(lo)} to {format_seconds(hi)} "
            f"between the {len(medians)} rounds of runs (this machine runs the program at "
            "different speeds at different times); each kernel's time is the mean over the "
            "middle half of the rounds, and two profiles may differ by more than a tenth "
            "(docs/profile.md, Rounds)")


def _usage() -> tuple[int, int]:
    """The process's minor page faults so far (first touches of memory) and its peak
    resident memory in bytes (0 and 0 without `resource`, as on Windows)."""
    if resource is None:
        return 0, 0
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_minflt, u.ru_maxrss * (1 if sys.platform == "darwin" else 1024)


FRESH_PAGES = 16  # page faults in a run above which it touched new memory (64 KiB)
MEMORY_SHARE = 0.25  # of the memory available at the start, the most a profile may grow


def memory_budget() -> int:
    """Bytes by which a profile's traced runs may raise the process's peak memory:
    `MEMORY_SHARE` of the memory available now.  Under JAX's profiler on the CPU a
    run's buffers can land on new memory every run and the process grow without end
    (XLA's FFT: megabytes a run, docs/profile.md, Overhead); past this, the profile stops
    taking runs rather than let the machine run out of memory and kill the process."""
    available = memory_available()
    if available is None:  # nothing to go by: no limit
        return 1 << 62
    return max(int(available * MEMORY_SHARE), 64 << 20)


def memory_stop(grown: int, runs: int, asked: int) -> str:
    """The note where the traced runs stopped after `runs` (of at least `asked`) because
    the process's peak memory grew by `grown` bytes, past `memory_budget`."""
    short = f", fewer than the {asked} asked" if runs < asked else ""
    return (f"the profile stopped after {runs} runs{short}: under the profiler this "
            f"process's memory grew by {format_bytes(grown)}, and a profile takes at most a "
            "quarter of the memory available when it starts; JAX's profiler on the CPU "
            "makes some programs (FFTs) take new memory every run (docs/profile.md, "
            "Overhead)")


def fresh_memory(faults: float | None, plain: float | None = None) -> str | None:
    """A note when the measured runs kept touching memory never touched before (each
    page's first touch is a page fault the kernel that touches it pays), saying whether
    the unprofiled runs after the trace did too (`plain`, their median): the program's own
    cost then (large buffers the allocator hands back after each run), else the
    profiler's."""
    if faults is None or faults <= FRESH_PAGES:
        return None
    said = (f"the measured runs touched {faults:.0f} new pages of memory each (page faults, "
            f"{faults * 4 / 1024:.1f} MiB at 4 KiB)")
    if plain is None:
        return (f"{said}; the kernels that first wrote them paid for it, which plain runs "
                "may not (docs/profile.md, How far to trust it)")
    if plain >= faults / 2:
        return (f"{said}, and the unprofiled runs after the trace {plain:.0f}: this "
                "program's runs take new memory profiled or not (large buffers the "
                "allocator gives back after each run), and its kernels pay for it "
                "(docs/profile.md, How far to trust it)")
    return (f"{said}, the unprofiled runs after the trace {plain:.0f}: the profiler's "
            "doing, and the kernels that first wrote them paid for it (docs/profile.md, "
            "How far to trust it)")


def clean_runs(faults: list[int], runs: int) -> list[int]:
    """The runs (indices) to measure: those that touched no more new memory than the
    fewest did (within FRESH_PAGES), where at least `runs` did; else all of them.  Under
    a trace, a run's buffers now and then land on memory never touched before, and the
    first kernel to write them pays a page fault per 4 KiB page, which plain runs do not
    (measured: the process's resident memory grows by about a run's
    buffers per run under a trace while the memory in use stays flat; docs/profile.md,
    How far to trust it)."""
    least = min(faults, default=0)
    clean = [i for i, f in enumerate(faults) if f <= least + FRESH_PAGES]
    return clean if len(clean) >= runs else list(range(len(faults)))


@contextmanager
def _trace(folder: str, options: Any) -> Iterator[None]:
    """``jax.profiler.trace`` into `folder`; where a trace is already on in this process
    (the caller's own), one clear error instead of JAX's."""
    import jax

    try:
        tracing = jax.profiler.trace(folder, profiler_options=options)
        tracing.__enter__()
    except RuntimeError as e:
        if "already" not in str(e):
            raise
        raise HloscopeError("a JAX profiler trace is already on in this process (a "
                            "jax.profiler.trace or start_trace of yours): hloscope's profile "
                            "takes its own", hint="profile outside your trace, or read yours "
                            "with hloscope.read_profile(DIR, module)") from None
    try:
        yield
    except BaseException:
        tracing.__exit__(*sys.exc_info())
        raise
    tracing.__exit__(None, None, None)


def last_round_median(wall: list[float], faults: list[int], done: int) -> float:
    """The median wall time of the last `done` runs, over those `clean_runs` would keep
    as far as can be told so far (page faults within FRESH_PAGES of the fewest yet), so
    that rounds settle (`settled`) on the runs that will be measured; over all `done`
    where none would be kept."""
    least = min(faults)
    mine = range(len(wall) - done, len(wall))
    quiet = [wall[i] for i in mine if faults[i] <= least + FRESH_PAGES]
    return statistics.median(quiet or wall[-done:])


SLOWED = 1.2  # profiled over unprofiled runs above which a note says so


def slowed(wall: list[float], plain_wall: list[float]) -> str | None:
    """A note where the profiled runs' median wall time is more than `SLOWED` times the
    unprofiled runs' taken right after the trace: profiling slowed this program, and
    each kernel's measured time holds its share of that.  Not from fewer than 3
    unprofiled runs (one slow run is not a slowdown)."""
    if not wall or len(plain_wall) < 3:
        return None
    traced, plain = statistics.median(wall), statistics.median(plain_wall)
    if traced <= SLOWED * plain:
        return None
    n = len(plain_wall)
    return (f"profiling slowed this program: its profiled runs took {format_seconds(traced)} "
            f"(median) against {format_seconds(plain)} for {n} unprofiled run"
            f"{'' if n == 1 else 's'} right after the trace (timed as hloscope bench times "
            f"them), {traced / plain:.2f}x; each kernel's measured time holds its share of "
            "the difference (docs/profile.md, Overhead)")


def run_cap(taken: int, seconds: float, min_time: float) -> str | None:
    """A note where the runs stopped at MAX_RUNS before `min_time` seconds of them."""
    if taken < MAX_RUNS or seconds >= 0.9 * min_time:
        return None
    return (f"the runs stopped at {taken:,}, the most a profile takes (its trace holds "
            f"every run's events), after {format_seconds(seconds)} of runs, short of the "
            f"{min_time:g} s of min_time")


def runs_left_out(left_out: int, total: int) -> str | None:
    """A note saying how many runs `clean_runs` left out."""
    if not left_out:
        return None
    one = left_out == 1
    return (f"{left_out} of {total} runs {'is' if one else 'are'} left out: "
            f"{'it' if one else 'they'} touched new memory under the profiler (page faults "
            "the kernels paid; docs/profile.md, How far to trust it)")


def profile_report(report: Any, args: list[Any], *, runs: int = 10, warmup: int = 3,
                   min_time: float = MIN_TIME, keep: str | None = None,
                   rounds: int = ROUNDS, max_rounds: int = MAX_ROUNDS) -> Profile:
    """Profile the function `report` compiled (`inspect`), on its dynamic `args`: after a
    first run and `warmup` more (and more until `WARMUP_TIME` seconds, if `warmup` > 0),
    at least `runs` runs, and more until `min_time` seconds of them (at most `MAX_RUNS`),
    in `rounds` rounds (at most `runs`), and more rounds alike, up to `max_rounds`, while
    the rounds' medians have not settled (`settled`; not where one round, or `min_time`
    0, is asked)."""
    import jax

    from .._bench._donate import Inputs

    if runs < 1 or warmup < 0 or not min_time >= 0 or rounds < 1:
        raise HloscopeError(f"profile: runs={runs}, warmup={warmup}, min_time={min_time}",
                            hint="profile at least one run, after zero or more warm-up "
                                 "runs, for zero or more seconds, in one or more rounds")
    compiled = report._cache.get("compiled")
    if compiled is None:
        raise HloscopeError(f"{report.name}: this report holds no compiled program to run",
                            hint="profile the function itself: hloscope.profile(fn, *args)")
    if keep is not None and os.path.exists(keep) and not os.path.isdir(keep):
        raise HloscopeError(f"keep={os.fspath(keep)!r} is a file: a trace is kept in a folder",
                            hint="give a folder to keep the trace in (made if it is not there)")
    if not report.kernels.kernels:
        raise HloscopeError(f"{report.name} runs no kernel: XLA compiled it to nothing that "
                            "runs on the device (its outputs are its inputs, constants or "
                            "nothing), so there is nothing to profile",
                            hint="hloscope inspect shows what it compiles to")
    inputs = Inputs(compiled, list(args))
    block = jax.block_until_ready
    t = time.perf_counter
    with user_code(f"running {report.name}"):
        block(compiled(*inputs.fresh()))
        start, done = t(), 0
        while done < warmup or (warmup and t() - start < WARMUP_TIME):
            block(compiled(*inputs.fresh()))
            done += 1
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # the Python tracer costs ~a microsecond per call
    annotate = jax.profiler.TraceAnnotation

    nround = min(rounds, runs)
    # More rounds than asked only for a profile sized by time: `min_time` 0 asks for a
    # count of runs, and one round for one block.
    most = max(nround, max_rounds) if nround > 1 and min_time > 0 else nround
    per_round = -(-runs // nround)

    def quota(r: int) -> int:
        """The runs round `r` takes at least: the `runs` asked, shared by the first
        `nround` rounds; a round more, as many as the largest of them."""
        return runs // nround + (r < runs % nround) if r < nround else per_round

    def room(r: int) -> int:
        """The runs taken by the end of round `r` past which time asks for no more: the
        first rounds share MAX_RUNS, so that a short program's runs are not all in the
        first round; a round more, what is left of it."""
        return MAX_RUNS * (r + 1) // nround if r < nround else MAX_RUNS

    def traced(folder: str, limit: int, until_settled: bool = True,
               ) -> tuple[list[float], list[int], list[int]]:
        """`nround` rounds PAUSE seconds apart (more, up to `most`, until their medians
        settle, if `until_settled`), each of SETTLE unmarked runs then marked ones,
        together at least `runs` and more until `min_time` seconds of them (at most
        MAX_RUNS), and none once the process's peak memory is past `limit` bytes
        (`memory_budget`): each marked run's wall time, page faults and round."""
        last = most if until_settled else nround
        wall: list[float] = []
        faults: list[int] = []
        round_of: list[int] = []
        medians: list[float] = []
        peak = 0
        with _trace(folder, options), user_code(f"running {report.name}"):
            r = 0
            while peak <= limit and (r < nround or (r < last and len(wall) < MAX_RUNS
                                                    and not settled(medians))):
                if r:
                    time.sleep(PAUSE)
                s0, n = t(), 0
                while n < SETTLE or t() - s0 < SETTLE_TIME:
                    block(compiled(*inputs.fresh()))
                    n += 1
                start, done = t(), 0
                while peak <= limit and (done < quota(r) or (t() - start < min_time / nround
                                                             and len(wall) < room(r))):
                    run_args = inputs.fresh()
                    f = _usage()[0]
                    with annotate(RUN_ANNOTATION):
                        a = t()
                        block(compiled(*run_args))
                        wall.append(t() - a)
                    f1, peak = _usage()
                    faults.append(f1 - f)
                    round_of.append(r)
                    done += 1
                if done:
                    medians.append(last_round_median(wall, faults, done))
                r += 1
        return wall, faults, round_of

    plain_faults: list[int] = []  # each unprofiled run's page faults

    def plain() -> list[float]:
        """One round's worth of runs without the profiler (after SETTLE unmarked ones),
        timed as `bench` times them: the reference for what profiling cost this run."""
        wall: list[float] = []
        with user_code(f"running {report.name}"):
            for _ in range(SETTLE):
                block(compiled(*inputs.fresh()))
            start = t()
            while len(wall) < quota(0) or (t() - start < min_time / nround
                                           and len(wall) < room(0)):
                run_args = inputs.fresh()
                f = _usage()[0]
                a = t()
                block(compiled(*run_args))
                wall.append(t() - a)
                plain_faults.append(_usage()[0] - f)
        return wall

    # For both traces together (the memory a trace's runs took stays with the process),
    # at most half of it in the first.
    peak0, budget = _usage()[1], memory_budget()

    if warmup:  # a throwaway trace first: the measured one reuses the memory it touched
        scratch = tempfile.mkdtemp(prefix="hloscope-primer-")
        try:  # it only touches the memory
            traced(scratch, peak0 + budget // 2, until_settled=False)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    folder = keep or tempfile.mkdtemp(prefix="hloscope-profile-")
    collecting = gc.isenabled()
    try:
        gc.collect()
        gc.disable()  # no collection of the caller's garbage inside a measured run
        try:
            before = sample()
            wall, faults, round_of = traced(folder, peak0 + budget)
            after = sample()
            grown = _usage()[1] - peak0
            plain_wall = plain()
        finally:
            if collecting:
                gc.enable()
        capped = run_cap(len(wall), sum(wall), min_time)
        t0 = t()
        trace = read_trace(folder)
        keep_runs = clean_runs(faults, runs)
        if len(trace.windows) != len(wall):  # not each run's mark: none can be left out
            keep_runs = list(range(len(wall)))
        if keep is not None:  # beside the trace, what read_profile(keep) needs to give the
            # same figures: the module, and (below) which runs were measured in which round
            with open(os.path.join(keep, KEPT_MODULE), "w", encoding="utf-8") as f:
                f.write(compiled.as_text())
        marked_rounds = round_of
        trace, rounds = select_runs(trace, round_of, keep_runs)
        wall = [wall[i] for i in keep_runs]
        round_of = [round_of[i] for i in keep_runs]
        times = measure(trace, report.kernels, report.module, rounds=rounds)
        read = t() - t0
        if keep is None:
            ran = f"{len(wall)} run{'s' if len(wall) != 1 else ''}"
            times = dataclasses.replace(times, source=f"jax.profiler.trace of {ran} here")
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    left_out = len(faults) - len(keep_runs)
    kept_faults = statistics.mean(faults[i] for i in keep_runs)
    plain_fresh = statistics.median(plain_faults)  # (one odd run does not move it)
    notes = ((IDLE_TPU_PROFILER,) if idle_tpu_profiler() else ()) + tuple(
        n for n in (donated_copies(inputs.donated), busy_machine(before, after),
                    slowed(wall, plain_wall), many_kernels(times), virtual_devices(times),
                    fresh_memory(kept_faults, plain_fresh),
                    runs_left_out(left_out, len(faults)), unsettled(wall, round_of),
                    capped, memory_stop(grown, len(faults), runs) if grown > budget
                    else None) if n)
    if keep is not None:
        write_kept_runs(keep, marked_rounds, keep_runs, notes)
    return Profile(report.name, times, report, wall, read, os.path.abspath(keep) if keep else None,
                   inputs.donated, notes, kept_faults, left_out, len(set(round_of)),
                   plain_wall, others(before, after))
