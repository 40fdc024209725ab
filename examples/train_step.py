"""A small MLP training step written for real devices, used by the README to ask
"does it fit on 8 H100s?" without any GPU:

    hloscope inspect examples/train_step.py:train_step --target h100x8 \\
        --arg bf16[8,4096,4096] --arg bf16[1024,4096] --shard 0=None,data,None --shard 1=data
"""

import jax
import jax.numpy as jnp


def loss(weights, x):
    def layer(h, w):
        return jax.nn.gelu(h @ w), None

    h, _ = jax.lax.scan(layer, x, weights)
    return jnp.mean(h.astype(jnp.float32) ** 2)


def train_step(weights, x):
    """One SGD step: the loss and the updated weights (a stack of square layers)."""
    value, grads = jax.value_and_grad(loss)(weights, x)
    return value, weights - 1e-3 * grads.astype(weights.dtype)


def make_inputs(layers=4, width=256, batch=64):
    """The arguments as arrays, for `--inputs 'make_inputs(8)'` (a pytree works the same:
    return a dict of weights and the batch)."""
    return (jnp.zeros((layers, width, width), jnp.bfloat16),
            jnp.zeros((batch, width), jnp.bfloat16))
