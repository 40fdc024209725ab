# Einsum-heavy tensor contraction: Tucker-decomposition reconstruction plus a bilinear batched contraction.
import jax
import jax.numpy as jnp


def f(core, u1, u2, u3, x):
    # reconstruct a 3-way tensor T = core x1 u1 x2 u2 x3 u3
    t = jnp.einsum("abc,ia,jb,kc->ijk", core, u1, u2, u3)
    # batched bilinear form: out[n, k] = sum_ij x[n,i] T[i,j,k] x[n,j]
    out = jnp.einsum("ni,ijk,nj->nk", x, t, x)
    # project back onto factor space
    return jnp.einsum("nk,kc->nc", out, u3), jnp.einsum("ijk,ijk->", t, t)


def args():
    k = jax.random.split(jax.random.PRNGKey(0), 5)
    I, R, N = 64, 16, 128
    core = jax.random.normal(k[0], (R, R, R), jnp.float32)
    u1 = jax.random.normal(k[1], (I, R), jnp.float32) / 4
    u2 = jax.random.normal(k[2], (I, R), jnp.float32) / 4
    u3 = jax.random.normal(k[3], (I, R), jnp.float32) / 4
    x = jax.random.normal(k[4], (N, I), jnp.float32)
    return (core, u1, u2, u3, x)
