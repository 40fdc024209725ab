"""A distributed 3-D FFT on a pencil grid (as jaxDecomp does it), in plain JAX.

The input is split over a PX x PY device grid along its first two axes; XLA's
SPMD partitioner inserts the transposes (all-gathers) the FFT needs.

    hloscope bench examples/fft_pencil.py:do_fft --devices 8 \\
        --inputs 'make_input(128, 128, 128, 4, 2)' --param backend=gloo -o results/
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


@jax.jit
def do_fft(x):
    return jnp.fft.fftn(x.astype(jnp.complex64))


def make_input(nx: int = 128, ny: int = 128, nz: int = 128, px: int = 4, py: int = 2):
    """An nx x ny x nz float32 array split px ways along x and py ways along y."""
    mesh = Mesh(np.array(jax.devices()[: px * py]).reshape(px, py), ("x", "y"))
    x = jnp.arange(nx * ny * nz, dtype=jnp.float32).reshape(nx, ny, nz) / (nx * ny * nz)
    return jax.device_put(x, NamedSharding(mesh, P("x", "y", None)))
