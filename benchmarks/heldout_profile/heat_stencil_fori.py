# 1-D finite-difference PDE (reaction-diffusion / Fisher-KPP) explicit time stepping with jax.lax.fori_loop.
import jax
import jax.numpy as jnp

N_STEPS = 200


def f(u0, diff):
    # u0: (batch, nx) batch of 1-D fields with periodic boundaries
    dx, dt, rate = 1.0, 0.2, 0.02

    def step(_, u):
        lap = (jnp.roll(u, 1, axis=1) - 2.0 * u + jnp.roll(u, -1, axis=1)) / dx**2
        return u + dt * (diff[:, None] * lap + rate * u * (1.0 - u))

    return jax.lax.fori_loop(0, N_STEPS, step, u0)


def args():
    k = jax.random.split(jax.random.PRNGKey(0), 2)
    u0 = jax.random.uniform(k[0], (32, 1024), jnp.float32) * 0.1
    diff = jax.random.uniform(k[1], (32,), jnp.float32, 0.1, 1.0)
    return (u0, diff)
