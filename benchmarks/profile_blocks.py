"""Blocks of plain runs, back to back and a moment apart: why a profile takes rounds.

For each program of benchmarks/profile_accuracy.py named (default: the scan and
attention), compiled once and warmed up, times 12 blocks of plain runs (0.15 s each,
as `bench` times a run) with no pause, 50 ms and 300 ms between blocks, and prints each
block's median and the spread of the medians (largest over smallest).  On a quiet
16-core machine (2026-11-26) the scan's blocks were within 5.2% of each other back to
back and 58% apart with 50 ms pauses: while runs follow each other XLA's CPU threads
stay in one state, so one block of runs measures one state (docs/profile.md, Rounds).

Usage: python benchmarks/profile_blocks.py [scan,attention]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import profile_accuracy  # noqa: E402

import hloscope  # noqa: E402


def blocks(compiled, args, pause: float, n: int = 12, seconds: float = 0.15) -> list[float]:  # type: ignore[no-untyped-def]
    """The median run of each of `n` blocks of `seconds` of runs, `pause` apart (the first
    two runs of a block left out)."""
    block, t = jax.block_until_ready, time.perf_counter
    out = []
    for _ in range(n):
        if pause:
            time.sleep(pause)
        wall, start = [], t()
        while t() - start < seconds:
            a = t()
            block(compiled(*args))
            wall.append(t() - a)
        out.append(statistics.median(wall[2:] or wall))
    return out


def main() -> None:
    only = (sys.argv[1] if len(sys.argv) > 1 else "scan,attention").split(",")
    print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs, jax {jax.__version__}")
    for name, fn, args in profile_accuracy.programs(False):
        if not any(w in name for w in only):
            continue
        compiled = hloscope.inspect(fn, *args)._cache["compiled"]
        blocks(compiled, args, 0.0, n=3)  # warm-up
        for pause in (0.0, 0.05, 0.3):
            meds = blocks(compiled, args, pause)
            print(f"{name:<16} pause {pause:.2f} s: "
                  + " ".join(f"{m * 1e6:.0f}" for m in meds)
                  + f" us  spread {max(meds) / min(meds) - 1:.1%}")


if __name__ == "__main__":
    main()
