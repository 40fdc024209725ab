# Per-example gradients: vmap of jax.grad of a per-example logistic-regression MLP loss (DP-SGD style clipping).
import jax
import jax.numpy as jnp


def _loss(params, x, y):
    w1, b1, w2, b2 = params
    h = jnp.tanh(x @ w1 + b1)
    logit = h @ w2 + b2
    return jnp.sum(jax.nn.softplus(logit) - y * logit)


def f(params, x, y):
    grads = jax.vmap(jax.grad(_loss), in_axes=(None, 0, 0))(params, x, y)
    # clip each example's gradient to norm 1, then average (DP-SGD style)
    sq = sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in grads)
    scale = jnp.minimum(1.0, 1.0 / jnp.sqrt(sq + 1e-12))
    return tuple(jnp.mean(g * scale.reshape((-1,) + (1,) * (g.ndim - 1)), axis=0) for g in grads)


def args():
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    B, D, H = 128, 64, 128
    w1 = jax.random.normal(k[0], (D, H), jnp.float32) / jnp.sqrt(D)
    b1 = jnp.zeros((H,), jnp.float32)
    w2 = jax.random.normal(k[1], (H, 1), jnp.float32) / jnp.sqrt(H)
    b2 = jnp.zeros((1,), jnp.float32)
    x = jax.random.normal(k[2], (B, D), jnp.float32)
    y = (jax.random.uniform(k[3], (B, 1)) > 0.5).astype(jnp.float32)
    return ((w1, b1, w2, b2), x, y)
