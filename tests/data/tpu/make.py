"""Writes mlp_step_tpu_v5e.hlo: a small MLP training step compiled by libtpu for one TPU v5e
chip, without a TPU (hloscope's target compile).  Run from the repository root:

    python tests/data/tpu/make.py
"""

import jax
import jax.numpy as jnp

import hloscope


def step(w1, w2, x):
    def loss(w1, w2):
        h = jax.nn.relu(x @ w1)
        return jnp.mean((h @ w2) ** 2)

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 1e-3 * g1, w2 - 1e-3 * g2


if __name__ == "__main__":
    args = (jnp.zeros((256, 512), jnp.bfloat16), jnp.zeros((512, 128), jnp.bfloat16),
            jnp.zeros((64, 256), jnp.bfloat16))
    r = hloscope.inspect(step, *args, target="tpu-v5e")
    with open("tests/data/tpu/mlp_step_tpu_v5e.hlo", "w") as f:
        f.write(r.hlo_after)
    print(r.summary_line())
