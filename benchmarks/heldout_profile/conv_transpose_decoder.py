# Transposed-convolution upsampling decoder (2 stride-2 conv_transpose layers with relu, then sigmoid).
import jax
import jax.numpy as jnp


def f(z, w1, w2, w3):
    # z: (N, H, W, C) latent feature map, NHWC layout
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.lax.conv_transpose(z, w1, strides=(2, 2), padding="SAME", dimension_numbers=dn)
    h = jax.nn.relu(h)
    h = jax.lax.conv_transpose(h, w2, strides=(2, 2), padding="SAME", dimension_numbers=dn)
    h = jax.nn.relu(h)
    h = jax.lax.conv_general_dilated(h, w3, window_strides=(1, 1), padding="SAME", dimension_numbers=dn)
    return jax.nn.sigmoid(h)


def args():
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    z = jax.random.normal(k[0], (4, 16, 16, 32), jnp.float32)
    w1 = jax.random.normal(k[1], (4, 4, 32, 16), jnp.float32) * 0.1
    w2 = jax.random.normal(k[2], (4, 4, 16, 8), jnp.float32) * 0.1
    w3 = jax.random.normal(k[3], (3, 3, 8, 3), jnp.float32) * 0.1
    return (z, w1, w2, w3)
