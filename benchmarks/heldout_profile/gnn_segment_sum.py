# Graph neural network message-passing layer: edge messages aggregated with jax.ops.segment_sum (GCN-style, 2 layers).
import jax
import jax.numpy as jnp

N_NODES = 2048


def _layer(h, senders, receivers, edge_w, w_msg, w_self):
    msg = h[senders] @ w_msg * edge_w[:, None]
    agg = jax.ops.segment_sum(msg, receivers, num_segments=N_NODES)
    deg = jax.ops.segment_sum(jnp.ones_like(edge_w), receivers, num_segments=N_NODES)
    agg = agg / jnp.maximum(deg, 1.0)[:, None]
    return jax.nn.relu(h @ w_self + agg)


def f(h, senders, receivers, edge_w, params):
    for w_msg, w_self in params:
        h = _layer(h, senders, receivers, edge_w, w_msg, w_self)
    # graph-level readout
    return jnp.mean(h, axis=0), h


def args():
    k = jax.random.split(jax.random.PRNGKey(0), 8)
    E, D = 16384, 64
    h = jax.random.normal(k[0], (N_NODES, D), jnp.float32)
    senders = jax.random.randint(k[1], (E,), 0, N_NODES, jnp.int32)
    receivers = jax.random.randint(k[2], (E,), 0, N_NODES, jnp.int32)
    edge_w = jax.random.uniform(k[3], (E,), jnp.float32)
    params = [
        (jax.random.normal(k[4 + 2 * i], (D, D), jnp.float32) / 8,
         jax.random.normal(k[5 + 2 * i], (D, D), jnp.float32) / 8)
        for i in range(2)
    ]
    return (h, senders, receivers, edge_w, params)
