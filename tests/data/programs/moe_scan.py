"""A mixture-of-experts (GShard-style, top-1 routing with a capacity per expert) in a
lax.scan over layers, trained one step: the experts' weights sharded over the mesh axis
`data` (expert parallelism), the token groups too.  XLA's partitioner inserts an
all-to-all to send each group's tokens to their experts' devices: every layer's compute
waits for it."""

import jax
import jax.numpy as jnp

E, C = 8, 256  # experts, capacity per expert


def layer(x, wg, w1, w2):
    # x: [G, S, D] groups of tokens; wg: [D, E]; w1: [E, D, F]; w2: [E, F, D]
    probs = jax.nn.softmax(jnp.einsum("gsd,de->gse", x, wg), axis=-1)
    onehot = jax.nn.one_hot(jnp.argmax(probs, axis=-1), E, dtype=x.dtype)  # [G, S, E]
    pos = (jnp.cumsum(onehot, axis=1) * onehot).sum(-1) - 1  # place in its expert's queue
    dispatch = onehot[..., None] * jax.nn.one_hot(pos, C, dtype=x.dtype)[:, :, None, :]
    xe = jnp.einsum("gsec,gsd->egcd", dispatch, x)
    h = jax.nn.relu(jnp.einsum("egcd,edf->egcf", xe, w1))
    ye = jnp.einsum("egcf,efd->egcd", h, w2)
    combine = dispatch * probs.max(-1)[..., None, None]
    return x + jnp.einsum("gsec,egcd->gsd", combine, ye)


def loss(params, x):
    x, _ = jax.lax.scan(lambda x, ws: (layer(x, *ws), None), x, params)
    return jnp.mean(x.astype(jnp.float32) ** 2)


@jax.jit
def step(wg, w1, w2, x):
    params = (wg, w1, w2)
    value, grads = jax.value_and_grad(loss)(params, x)
    return value, jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads)


def make_inputs(layers=2, groups=8, tokens=1024, d=1024, f=4096):
    sd, bf16 = jax.ShapeDtypeStruct, jnp.bfloat16
    return (sd((layers, d, E), bf16), sd((layers, E, d, f), bf16),
            sd((layers, E, f, d), bf16), sd((groups, tokens, d), bf16))
