"""Make the CPU profiles in this folder (run from the repository root):

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/data/profiles/make_profiles.py

and, on a machine with an NVIDIA GPU, the GPU one (`gpu_scan`, the same `scan_mlp`):

    python tests/data/profiles/make_profiles.py --gpu [FOLDER]

Each folder holds the optimized module (module.hlo, compiled.as_text()) and what
jax.profiler.trace wrote for 3 runs of it (plugins/profile/<run>/*.xplane.pb; the
.trace.json.gz beside it is removed), taken with JAX's own capture and no
hloscope annotation, as a user would.
"""

import glob
import os
import shutil
import sys

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

HERE = os.path.dirname(os.path.abspath(__file__))


def scan_mlp(x, w):
    def body(h, _):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(body, x, None, length=4)
    return jnp.fft.fft(h).real.sum()


def sharded_matmul(x, w):
    return jnp.sin(x @ w).sum(axis=0)


def capture(name, fn, *args, root=HERE):
    out = os.path.join(root, name)
    shutil.rmtree(out, ignore_errors=True)
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    with jax.profiler.trace(out):
        for _ in range(3):
            jax.block_until_ready(compiled(*args))
    for junk in glob.glob(os.path.join(out, "**", "*.trace.json.gz"), recursive=True):
        os.remove(junk)
    for f in glob.glob(os.path.join(out, "plugins", "profile", "*", "*.xplane.pb")):
        os.rename(f, os.path.join(os.path.dirname(f), "host.xplane.pb"))
    with open(os.path.join(out, "module.hlo"), "w") as f:
        f.write(compiled.as_text())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--gpu"]:
        assert jax.devices()[0].platform == "gpu", jax.devices()
        capture("gpu_scan", scan_mlp, jnp.ones((64, 128)), jnp.full((128, 128), 0.01),
                root=sys.argv[2] if len(sys.argv) > 2 else HERE)
        sys.exit()
    capture("cpu_scan", scan_mlp, jnp.ones((64, 128)), jnp.full((128, 128), 0.01))
    if jax.device_count() < 8:
        sys.exit("set XLA_FLAGS=--xla_force_host_platform_device_count=8 for the sharded one")
    mesh = jax.make_mesh((8,), ("data",))
    x = jax.device_put(jnp.ones((256, 64)), NamedSharding(mesh, P("data", None)))
    w = jax.device_put(jnp.ones((64, 64)), NamedSharding(mesh, P()))
    capture("cpu_sharded8", sharded_matmul, x, w)
