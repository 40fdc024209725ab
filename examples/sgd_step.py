"""A small SGD training step that returns its updated weights without donating them,
used by docs/advisor.md to show a saving checked by compiling the fix:

    hloscope lint examples/sgd_step.py:sgd_step --inputs 'make_inputs()'
"""

import jax
import jax.numpy as jnp


def loss(params, x):
    for w in params:
        x = jnp.tanh(x @ w)
    return (x ** 2).mean()


def sgd_step(params, x):
    """One SGD step: the updated weights (four 512 x 512 layers)."""
    g = jax.grad(loss)(params, x)
    return [p - 0.01 * gp for p, gp in zip(params, g)]


def make_inputs(layers=4, width=512, batch=64):
    return [jnp.ones((width, width)) for _ in range(layers)], jnp.ones((batch, width))
