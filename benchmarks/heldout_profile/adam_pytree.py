# Optimizer step: gradient of an MLP loss plus a hand-written Adam update over a dict pytree of parameters.
import jax
import jax.numpy as jnp


def _loss(params, x, y):
    h = x
    for i in range(3):
        h = jax.nn.relu(h @ params[f"w{i}"] + params[f"b{i}"])
    pred = h @ params["w_out"] + params["b_out"]
    return jnp.mean((pred - y) ** 2)


def f(params, m, v, step, x, y):
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 1e-4
    loss, g = jax.value_and_grad(_loss)(params, x, y)
    t = step + 1
    m = jax.tree_util.tree_map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
    v = jax.tree_util.tree_map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
    bc1 = 1 - b1 ** t.astype(jnp.float32)
    bc2 = 1 - b2 ** t.astype(jnp.float32)
    params = jax.tree_util.tree_map(
        lambda p, m_, v_: p - lr * ((m_ / bc1) / (jnp.sqrt(v_ / bc2) + eps) + wd * p), params, m, v)
    return params, m, v, t, loss


def args():
    k = jax.random.split(jax.random.PRNGKey(0), 10)
    D, H, O, B = 128, 256, 16, 256
    dims = [(D, H), (H, H), (H, H)]
    params = {}
    for i, (a, b) in enumerate(dims):
        params[f"w{i}"] = jax.random.normal(k[i], (a, b), jnp.float32) / jnp.sqrt(a)
        params[f"b{i}"] = jnp.zeros((b,), jnp.float32)
    params["w_out"] = jax.random.normal(k[3], (H, O), jnp.float32) / jnp.sqrt(H)
    params["b_out"] = jnp.zeros((O,), jnp.float32)
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    x = jax.random.normal(k[4], (B, D), jnp.float32)
    y = jax.random.normal(k[5], (B, O), jnp.float32)
    return (params, m, v, jnp.int32(0), x, y)
