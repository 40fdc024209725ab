"""The cost of hloscope.bench's own harness per timed run, against its target.

Target (issue 7): under 5 microseconds per run, or under 1% of a 1 ms kernel.  The
reference measured in the same run: a 1 ms kernel (a matmul sized to take about 1 ms on
this machine), whose median bench time the overhead is divided by.

Usage: python benchmarks/bench_overhead.py
"""

from __future__ import annotations

import jax.numpy as jnp

import hloscope


def main() -> None:
    r = hloscope.bench(lambda x: x + 1, jnp.ones(8), iterations=200)
    n = 128
    while True:  # size a matmul to about 1 ms
        ref = hloscope.bench(lambda x: x @ x, jnp.ones((n, n)), iterations=30)
        if ref.stats["median"] >= 1e-3 or n >= 4096:
            break
        n = int(n * 1.4)
    over = r.stats["overhead_per_run"]
    print(f"harness overhead per run: {over * 1e6:.2f} us (target < 5 us)")
    print(f"reference kernel: {n}x{n} matmul, median {ref.stats['median'] * 1e3:.2f} ms; "
          f"overhead is {over / ref.stats['median'] * 100:.3f}% of it (target < 1%)")
    print(f"a trivial kernel (x + 1) measures {r.stats['median'] * 1e6:.1f} us median")


if __name__ == "__main__":
    main()
