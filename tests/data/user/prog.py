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
