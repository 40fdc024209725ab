"""Two versions of one attention block, for `hloscope diff` (README, "Diff"):
`attn_tanh` differs from `attn` by its name and one operation (a tanh on the scores).

    hloscope diff examples/attention.py:attn examples/attention.py:attn_tanh \\
        --arg f32[128,64] --arg f32[128,64] --arg f32[128,64]
"""

import jax
import jax.numpy as jnp


def attn(q, k, v):
    s = q @ k.T / jnp.sqrt(q.shape[-1])
    p = jax.nn.softmax(s, axis=-1)
    return p @ v


def attn_tanh(q, k, v):
    s = q @ k.T / jnp.sqrt(q.shape[-1])
    p = jax.nn.softmax(jnp.tanh(s), axis=-1)
    return p @ v
