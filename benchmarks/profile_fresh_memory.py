"""Where a traced run's buffers land: the addresses of a program's output buffer over
plain runs, then over runs inside a first `jax.profiler.trace`, plain runs again, and a
second trace (docs/profile.md, How far to trust it: memory the profiler makes new).

The program is profile_accuracy.py's gather/scatter (its first output, a 1 MiB copy of
the table with the updates added, is written by a `copy` kernel every run).  For each
block of --runs runs: the distinct addresses of that output, how far apart, and the runs
that took page faults (first touches of memory: more than 16 pages, 64 KiB).

Usage: python benchmarks/profile_fresh_memory.py [--runs N]
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
from collections import Counter  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300, help="runs per block")
    n = ap.parse_args().runs
    k = jax.random.key(0)
    table = jax.random.normal(k, (4096, 64))
    idx = jnp.arange(0, 4096, 3)
    upd = jax.random.normal(k, (len(idx), 64))
    f = jax.jit(lambda t, i, u: (t.at[i].add(u * 2.0), t[i].sum(0)))
    for _ in range(50):
        jax.block_until_ready(f(table, idx, upd))

    def block(label: str) -> None:
        addresses, faulted = [], 0
        for _ in range(n):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            out = jax.block_until_ready(f(table, idx, upd))
            faulted += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before > 16
            addresses.append(out[0].unsafe_buffer_pointer())
            del out
        steps = Counter(abs(b - a) for a, b in zip(addresses, addresses[1:]) if b != a)
        step = f"{steps.most_common(1)[0][0] / 2**20:.2f} MiB" if steps else "none"
        print(f"{label:<14} {len(set(addresses)):>4} addresses over {n} runs, the commonest "
              f"move from one run to the next {step}; {faulted} runs took page faults",
              flush=True)

    print(f"jax {jax.__version__}: the 1 MiB output of gather/scatter, {n} runs a block")
    block("plain")
    folder = tempfile.mkdtemp(prefix="hloscope-fresh-")
    try:
        with jax.profiler.trace(folder):
            block("first trace")
        block("plain again")
        with jax.profiler.trace(folder):
            block("second trace")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
