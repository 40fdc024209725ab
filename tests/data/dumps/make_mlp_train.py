"""Makes tests/data/dumps/mlp_train: an XLA dump folder of a small MLP training step,
with the small helper modules JAX compiles around it (random init, dtype conversion)."""
import os, shutil, sys
out = sys.argv[1]
shutil.rmtree(out, ignore_errors=True)
os.environ["XLA_FLAGS"] = f"--xla_dump_to={out} --xla_dump_hlo_as_text"
import jax, jax.numpy as jnp

def init(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (64, 128)) * 0.1, "w2": jax.random.normal(k2, (128, 10)) * 0.1}

def loss(params, x, y):
    h = jax.nn.relu(x @ params["w1"])
    logits = h @ params["w2"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))

@jax.jit
def train_step(params, x, y):
    l, g = jax.value_and_grad(loss)(params, x, y)
    return l, jax.tree.map(lambda p, d: p - 0.01 * d, params, g)

params = init(jax.random.PRNGKey(0))
x = jnp.ones((32, 64), jnp.float32)
y = jax.nn.one_hot(jnp.arange(32) % 10, 10).astype(jnp.bfloat16).astype(jnp.float32)
l, params = train_step(params, x, y)
print(float(l))
