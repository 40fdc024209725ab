"""A 3-D FFT timed by jax-hpc-profiler itself, at several sizes and device counts.

Its own `JaxTimer` writes its own files (a headerless CSV per method and a
Markdown report per run in a folder beside it), exactly as its users make
them; `hloscope plot` then reads those files:

    pip install jax-hpc-profiler
    python examples/jhp_fft_sweep.py results/jhp          # 1, 2, 4, 8 devices; 32³ to 128³
    hloscope plot results/jhp --strong --only-size 128 -o strong.png
    hloscope plot results/jhp --size -o by_size.png

Each device count runs in its own process (`XLA_FLAGS` must be set before JAX
starts); the FFT is sharded over a PX x PY grid of virtual CPU devices, the
input split along its first two axes (pencils; slabs when PX or PY is 1).
"""

from __future__ import annotations

import os
import subprocess
import sys

GRIDS = {1: (1, 1), 2: (2, 1), 4: (2, 2), 8: (4, 2)}
SIZES = (32, 64, 128)


def one(out: str, devices: int, iterations: int) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    from jax_hpc_profiler import JaxTimer

    px, py = GRIDS[devices]
    mesh = Mesh(np.array(jax.devices()[:devices]).reshape(px, py), ("x", "y"))
    sharding = NamedSharding(mesh, P("x", "y"))
    fft = jax.jit(jnp.fft.fftn, out_shardings=sharding)
    for n in SIZES:
        x = jax.device_put(jnp.ones((n, n, n), jnp.complex64), sharding)
        timer = JaxTimer()
        timer.chrono_jit(fft, x)
        for _ in range(iterations):
            timer.chrono_fun(fft, x)
        timer.report(os.path.join(out, "fftn.csv"), function="fftn", x=n, y=n, z=n,
                     precision="float32", px=px, py=py, backend="cpu", nodes=1)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "results/jhp"
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    os.makedirs(out, exist_ok=True)
    for devices in GRIDS:
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
        subprocess.run([sys.executable, __file__, "--one", out, str(devices), str(iterations)],
                       env=env, check=True)
        print(f"{devices} device(s): done", flush=True)


if __name__ == "__main__":
    main()
