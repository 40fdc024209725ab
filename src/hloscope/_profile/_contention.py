"""What else ran on the machine while a profile took its runs: other processes' CPU time.

The load average cannot say: it counts this process's own threads (XLA's thread pool is
runnable while a program runs), and on a 2-core machine a profile alone lifts it to 2 or
3 with nothing else running.  What the other processes took is the machine's busy CPU time
(Linux's /proc/stat: every CPU's time not idle, and the time the hypervisor gave to other
machines, `steal`) less this process's own (`os.times`), over the same wall time:
`others`, in CPUs' worth (0.5: half a CPU on average).  Where /proc/stat is not there
(macOS, Windows) there is no such figure, and `busy_machine` falls back on the load
average, saying what it counts.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from .._units import format_seconds

__all__ = ["BUSY_CPUS", "BUSY_SHARE", "CpuSample", "busy_machine", "others", "sample"]

BUSY_CPUS = 0.25  # other processes' CPUs' worth from which a profile says so, at least
BUSY_SHARE = 0.10  # ... and this share of the machine's CPUs
SHORTEST = 0.2  # seconds: shorter windows are not judged (/proc/stat counts 10 ms ticks)


@dataclass(frozen=True, slots=True)
class CpuSample:
    """The clocks at one moment: `wall` (monotonic seconds), `busy` (seconds of CPU time
    all CPUs spent busy since boot, None where /proc/stat cannot be read) and `own` (this
    process's CPU seconds, every thread's, user and system)."""

    wall: float
    busy: float | None
    own: float


def _busy_seconds(path: str = "/proc/stat") -> float | None:
    """Seconds all CPUs spent busy since boot: user, nice, system, irq, softirq and steal
    (guest time is in user already), from the first line of /proc/stat."""
    try:
        with open(path, encoding="ascii") as f:
            fields = f.readline().split()
        ticks = [int(v) for v in fields[1:9]]
        if fields[0] != "cpu" or len(ticks) < 8:
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux, or unreadable
        return None


def sample() -> CpuSample:
    """The machine's and this process's CPU clocks now."""
    t = os.times()
    return CpuSample(time.monotonic(), _busy_seconds(), t.user + t.system)


def others(a: CpuSample, b: CpuSample) -> float | None:
    """Other processes' CPU time between `a` and `b`, in CPUs' worth (seconds of CPU per
    second of wall time): None where the machine's clock was not read or the window is
    too short to judge (`SHORTEST`)."""
    wall = b.wall - a.wall
    if a.busy is None or b.busy is None or wall < SHORTEST:
        return None
    return max(0.0, ((b.busy - a.busy) - (b.own - a.own)) / wall)


def busy_machine(a: CpuSample, b: CpuSample, what: str = "profile") -> str | None:
    """A note when other processes took `BUSY_CPUS` or more CPUs' worth, and `BUSY_SHARE`
    or more of the machine's CPUs, while the profile (`what`) took its runs (`a` to `b`): the
    kernels shared the CPUs, and their caches and memory, with them.  Where there is no
    /proc/stat, from the load average (which counts this process's threads too) over the
    number of CPUs."""
    cpus = os.cpu_count() or 1
    used = others(a, b)
    if used is not None:
        if used < max(BUSY_CPUS, BUSY_SHARE * cpus):
            return None
        return (f"other processes used {used:.2f} of this machine's {cpus} CPUs while the "
                f"{what} ran ({format_seconds(b.wall - a.wall)}); each time includes "
                f"sharing the CPUs, their caches and memory with them, and two {what}s can "
                "differ by tens of percent (docs/profile.md, How far to trust it)")
    if a.busy is not None:  # the window was too short to judge
        return None
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this system
        return None
    if load <= cpus:
        return None
    return (f"this machine was busy: load average {load:.1f} on {cpus} CPUs (this "
            "process's threads count too); each time may include waiting for a CPU, and "
            f"two {what}s can differ by tens of percent (docs/profile.md, How far to "
            "trust it)")
