"""Inputs made on the devices at hand: a mesh of 8 and arrays sharded on it (as a user's
script does before calling its step)."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


@jax.jit
def step(x, w):
    return jnp.tanh(x @ w).sum(0)


def make_inputs(n=1024, d=256):
    mesh = jax.make_mesh((8,), ("data",))
    x = jax.device_put(jnp.ones((n, d)), NamedSharding(mesh, P("data", None)))
    w = jax.device_put(jnp.ones((d, d)), NamedSharding(mesh, P()))
    return x, w
