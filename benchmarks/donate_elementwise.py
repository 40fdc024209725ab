"""One memory-bound elementwise kernel whose first argument is donated (a new user's
program, where `hloscope profile` gave a step about twice `bench`'s on a 2-core CPU):

    hloscope bench benchmarks/donate_elementwise.py:step --inputs 'make_inputs(1024)'
    hloscope profile benchmarks/donate_elementwise.py:step --inputs 'make_inputs(1024)'

benchmarks/gpu_session.sh takes both, alternately, on a GPU (n = 8192).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, donate_argnums=0)
def step(x, y):
    return x * 2.0 + y


def make_inputs(n: int = 1024):  # type: ignore[no-untyped-def]
    k1, k2 = jax.random.split(jax.random.key(0))
    return (jax.random.normal(k1, (n, n), jnp.float32),
            jax.random.normal(k2, (n, n), jnp.float32))
