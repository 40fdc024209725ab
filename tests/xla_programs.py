"""Programs of many kinds, compiled with JAX, to check hloscope against XLA's own dumps.

`compile_with_dump(name, tmpdir)` compiles one program with
``xla_dump_to`` and returns (optimized HLO text, live-range dump text,
buffer-assignment text, memory_analysis fields).  The test that uses it
needs JAX; the programs cover control flow (cond, switch, nested loops,
scan), in-place updates (dynamic-update-slice, scatter), sorts, library
calls, donated arguments, tuple outputs and sharded programs with
collectives on 8 virtual CPU devices.
"""

from __future__ import annotations

import glob
import os

PROGRAMS: dict = {}


def program(fn):
    PROGRAMS[fn.__name__] = fn
    return fn


@program
def cond_branches():
    import jax
    import jax.numpy as jnp
    def f(p, x):
        return jax.lax.cond(p > 0, lambda x: jnp.sin(x) @ x, lambda x: jnp.cos(x) * 2, x)
    return jax.jit(f), (1.0, jnp.ones((64, 64)))


@program
def switch_three():
    import jax
    import jax.numpy as jnp
    def f(i, x):
        return jax.lax.switch(i, [jnp.sin, jnp.cos, lambda x: x @ x.T], x)
    return jax.jit(f), (1, jnp.ones((32, 32)))


@program
def nested_loops():
    import jax
    import jax.numpy as jnp
    def f(x):
        def outer(i, x):
            return jax.lax.fori_loop(0, 3, lambda j, y: jnp.tanh(y @ y) + i, x)
        return jax.lax.fori_loop(0, 4, outer, x)
    return jax.jit(f), (jnp.ones((48, 48)),)


@program
def scan_carry_and_stack():
    import jax
    import jax.numpy as jnp
    def f(xs, h):
        def step(h, x):
            h = jnp.tanh(h @ x)
            return h, h.sum(0)
        return jax.lax.scan(step, h, xs)
    return jax.jit(f), (jnp.ones((6, 32, 32)), jnp.ones((16, 32)))


@program
def dynamic_update_loop():
    import jax
    import jax.numpy as jnp
    def f(x):
        def body(i, acc):
            return jax.lax.dynamic_update_slice(acc, jnp.sin(jax.lax.dynamic_slice_in_dim(acc, i, 1) + i), (i, 0))
        return jax.lax.fori_loop(0, 8, body, x)
    return jax.jit(f), (jnp.ones((16, 256)),)


@program
def scatter_add():
    import jax
    import jax.numpy as jnp
    def f(x, idx, upd):
        return x.at[idx].add(upd) * 2
    return jax.jit(f), (jnp.ones((1000, 8)), jnp.arange(50) * 3, jnp.ones((50, 8)))


@program
def sort_and_topk():
    import jax
    import jax.numpy as jnp
    def f(x):
        s = jnp.sort(x, axis=-1)
        v, _ = jax.lax.top_k(x, 5)
        return s[:, :5] + v, jnp.argsort(x[0])
    return jax.jit(f), (jnp.linspace(0, 1, 4096).reshape(64, 64),)


@program
def linalg_calls():
    import jax
    import jax.numpy as jnp
    def f(a):
        q, r = jnp.linalg.qr(a)
        return jnp.linalg.solve(a @ a.T + 10 * jnp.eye(32), q) + r
    return jax.jit(f), (jnp.ones((32, 32)) + jnp.eye(32),)


@program
def donated_update():
    import jax
    import jax.numpy as jnp
    def f(params, grads):
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    p = {"w": jnp.ones((128, 128)), "b": jnp.ones((128,))}
    return jax.jit(f, donate_argnums=0), (p, p)


@program
def tuple_outputs_grad():
    import jax
    import jax.numpy as jnp
    def loss(w, x):
        h = jnp.tanh(x @ w["a"])
        return jnp.mean((h @ w["b"]) ** 2)
    w = {"a": jnp.ones((64, 128)), "b": jnp.ones((128, 8))}
    return jax.jit(jax.value_and_grad(loss)), (w, jnp.ones((32, 64)))


@program
def remat_scan_grad():
    import jax
    import jax.numpy as jnp
    def f(w, x):
        @jax.checkpoint
        def layer(x, w):
            return jnp.tanh(x @ w), None
        y, _ = jax.lax.scan(layer, x, w)
        return (y ** 2).sum()
    return jax.jit(jax.grad(f)), (jnp.ones((4, 32, 32)) * 0.01, jnp.ones((8, 32)))


@program
def random_and_cumsum():
    import jax
    import jax.numpy as jnp
    def f(key, x):
        noise = jax.random.normal(key, x.shape)
        return jnp.cumsum(x + noise, axis=0), jax.random.split(key)
    return jax.jit(f), (jax.random.key(0), jnp.ones((128, 16)))


@program
def while_with_cond_inside():
    import jax
    import jax.numpy as jnp
    def f(x):
        def body(c):
            i, x = c
            x = jax.lax.cond(i % 2 == 0, jnp.sin, jnp.cos, x)
            return i + 1, x * 1.5
        return jax.lax.while_loop(lambda c: c[0] < 5, body, (0, x))[1]
    return jax.jit(f), (jnp.ones((64, 64)),)


@program
def sharded_matmul_psum():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("x", "y"))
    f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum(0),
                in_shardings=(NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P("y", None))),
                out_shardings=NamedSharding(mesh, P()))
    return f, (jnp.ones((64, 32)), jnp.ones((32, 16)))


@program
def shard_map_collectives():
    from functools import partial

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]), ("i",))

    @partial(jax.shard_map, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    def f(x):
        s = jax.lax.psum(x, "i")
        g = jax.lax.all_gather(x, "i", tiled=True)
        p = jax.lax.ppermute(x, "i", [(k, (k + 1) % 8) for k in range(8)])
        return x * s + g[: x.shape[0]] + p + jax.lax.all_to_all(x, "i", 0, 0, tiled=True)
    return jax.jit(f), (jnp.ones((64, 16)),)


@program
def conv_and_reduce_window():
    import jax
    import jax.numpy as jnp
    def f(img, k):
        y = jax.lax.conv_general_dilated(img, k, (1, 1), "SAME")
        return jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    return jax.jit(f), (jnp.ones((2, 3, 32, 32)), jnp.ones((8, 3, 3, 3)))


@program
def transformer_layers():
    import jax
    import jax.numpy as jnp
    def layer(x, w):
        q, k, v = x @ w["q"], x @ w["k"], x @ w["v"]
        a = jax.nn.softmax(q @ k.T / 8.0) @ v
        x = jax.nn.gelu(x + a) @ w["o"]
        return x / jnp.linalg.norm(x, axis=-1, keepdims=True), None
    def loss(ws, x):
        for w in ws:
            x, _ = layer(x, w)
        return (x ** 2).mean()
    w = {k: jnp.ones((64, 64)) * 0.01 for k in "qkvo"}
    return jax.jit(jax.grad(loss)), ([w] * 3, jnp.ones((32, 64)))


def compile_with_dump(name: str, tmpdir: str):
    """Compile PROGRAMS[name] dumping XLA's files into `tmpdir`; return the texts."""
    fn, args = PROGRAMS[name]()
    compiled = fn.lower(*args).compile(
        compiler_options={"xla_dump_to": tmpdir, "xla_dump_hlo_pass_re": "NONE"})

    def one(pattern: str) -> str:
        found = sorted(glob.glob(os.path.join(tmpdir, pattern)))
        with open(found[-1]) as f:
            return f.read()

    ma = compiled.memory_analysis()
    figures = {k: getattr(ma, k) for k in dir(ma) if k.endswith("_in_bytes")} if ma else {}
    return (compiled.as_text(), one("*after_optimizations-live-range.txt"),
            one("*after_optimizations-buffer-assignment.txt"), figures)
