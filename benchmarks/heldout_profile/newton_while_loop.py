# Newton's method for a batch of cubic roots, jax.lax.while_loop with a data-dependent convergence test.
import jax
import jax.numpy as jnp


def f(a, b, c):
    # solve x^3 + a x^2 + b x + c = 0 elementwise (one real root), stop when max |step| < tol
    def g(x):
        return ((x + a) * x + b) * x + c

    def dg(x):
        return (3.0 * x + 2.0 * a) * x + b

    def cond(state):
        x, step, it = state
        return (jnp.max(jnp.abs(step)) > 1e-5) & (it < 100)

    def body(state):
        x, _, it = state
        d = dg(x)
        d = jnp.where(jnp.abs(d) < 1e-6, 1e-6, d)
        step = jnp.clip(g(x) / d, -1.0, 1.0)
        return x - step, step, it + 1

    x0 = jnp.zeros_like(a) - a / 3.0 + 2.0
    x, _, it = jax.lax.while_loop(cond, body, (x0, jnp.full_like(a, jnp.inf), jnp.int32(0)))
    return x, it


def args():
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    shape = (512, 512)
    a = jax.random.uniform(k[0], shape, jnp.float32, -1.0, 1.0)
    b = jax.random.uniform(k[1], shape, jnp.float32, 0.5, 2.0)  # b > a^2/3 => monotone cubic, unique root
    c = jax.random.normal(k[2], shape, jnp.float32)
    return (a, b, c)
