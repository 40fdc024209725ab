"""A user's program with the mistakes new users make (tests/test_user_errors.py)."""
import jax
import jax.numpy as jnp

SCALE = 3


def matmul(x, y):
    return jnp.dot(x, y)


def shape_bug(x):
    w = jnp.ones((5, 7))
    return project(x, w)


def project(x, w):
    return x @ w


def branchy(x):
    if x.sum() > 0:
        return x
    return -x


def reshaper(x, n):
    return x.reshape(n)


def make_inputs(n):
    return jnp.ones((n, n)), jnp.ones((n, n))


def broken_inputs(n):
    return jnp.ones((n,)) + jnp.ones((n + 1,))


def _fail_on_host(v):
    raise ValueError("bad value seen at run time")


def runtime_bug(x):
    jax.debug.callback(_fail_on_host, x)
    return x * 2


def make_sharded(n):
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((8,), ("data",))
    return (jax.device_put(jnp.ones((8 * n, n)), NamedSharding(mesh, P("data"))),)


def shard_by_hand(n):
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
    return (jax.device_put(jnp.ones((8 * n, n)), NamedSharding(mesh, P("data"))),)


def double(x):
    return x * 2
