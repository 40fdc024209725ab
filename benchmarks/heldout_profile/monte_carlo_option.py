# Random-number-heavy Monte Carlo: price a European call and an Asian option by simulating GBM paths with jax.random inside jit.
import jax
import jax.numpy as jnp

N_PATHS = 8192
N_STEPS = 64


def f(key, s0, strike, sigma):
    r, T = 0.03, 1.0
    dt = T / N_STEPS
    k1, k2 = jax.random.split(key)
    z = jax.random.normal(k1, (N_PATHS, N_STEPS), jnp.float32)
    # antithetic variates
    z = jnp.concatenate([z, -z], axis=0)
    log_inc = (r - 0.5 * sigma**2) * dt + sigma * jnp.sqrt(dt) * z
    paths = s0 * jnp.exp(jnp.cumsum(log_inc, axis=1))
    disc = jnp.exp(-r * T)
    euro = disc * jnp.mean(jnp.maximum(paths[:, -1] - strike, 0.0))
    asian = disc * jnp.mean(jnp.maximum(jnp.mean(paths, axis=1) - strike, 0.0))
    # random barrier knock-out check with uniform jitter
    u = jax.random.uniform(k2, (2 * N_PATHS,))
    knocked = jnp.max(paths, axis=1) * (1.0 + 0.01 * u) > 1.5 * s0
    barrier = disc * jnp.mean(jnp.where(knocked, 0.0, jnp.maximum(paths[:, -1] - strike, 0.0)))
    return euro, asian, barrier


def args():
    return (jax.random.PRNGKey(0), jnp.float32(100.0), jnp.float32(105.0), jnp.float32(0.2))
