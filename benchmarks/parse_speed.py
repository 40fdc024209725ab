"""Parse speed and memory of hloscope against jaxlib's C++ HLO parser, same run.

Generates unrolled transformer training steps with JAX on the CPU, sharded
over 8 virtual devices (64 layers: about 5 MB and 36,000 instructions; 256
layers: about 20 MB), then times, on the same text:

  jaxlib     jaxlib._hlo.hlo_module_from_text (XLA's C++ parser, with the
             shape inference and verification it does)
  hloscope   hloscope.read_text: the full model (every instruction with its
             shape, opcode, operands resolved and checked, called computations
             checked, attributes kept as text for lazy decoding)
  +decode    hloscope plus decoding every attribute of every instruction
             (metadata, sharding, backend_config, frontend attributes, source
             locations): the cost of touching every field

and prints the ratio jaxlib_time / hloscope_time (>= 1.0 means hloscope is at
least as fast).  Peak memory of the model is measured with tracemalloc and
given as a multiple of the text size.

Usage: python benchmarks/parse_speed.py [--layers 64 256] [--repeat 5] [--cache DIR]
Modules are cached in DIR (default: .bench_cache/) so reruns skip generation.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))

GENERATOR = r'''
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
L = int(sys.argv[1]); D, F, B, S = 256, 1024, 8, 128
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
def layer(p, x):
    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    a = jax.nn.softmax(jnp.einsum("bsd,btd->bst", q, k) / 16.0, axis=-1)
    x = x + jnp.einsum("bst,btd->bsd", a, v) @ p["wo"]
    x = x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]
    return x / (1e-5 + jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True)))
def loss(params, x):
    for p in params:
        x = layer(p, x)
    return jnp.mean(x ** 2)
def step(params, x):
    l, g = jax.value_and_grad(loss)(params, x)
    return l, jax.tree.map(lambda a, b: a - 1e-3 * b, params, g)
ws = NamedSharding(mesh, P(None, "model")); xs = NamedSharding(mesh, P("data"))
shapes = {"wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, D), "w1": (D, F), "w2": (F, D)}
params = [{k: jax.ShapeDtypeStruct(s, jnp.float32, sharding=ws) for k, s in shapes.items()}
          for _ in range(L)]
x = jax.ShapeDtypeStruct((B, S, D), jnp.float32, sharding=xs)
open(sys.argv[2], "w").write(jax.jit(step).lower(params, x).compile().as_text())
'''


def generate(layers: int, cache: str) -> str:
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, f"transformer_{layers}.hlo")
    if not os.path.exists(path):
        print(f"generating the {layers}-layer module with JAX ...", flush=True)
        subprocess.run([sys.executable, "-c", GENERATOR, str(layers), path], check=True)
    return path


def best_of(fn, repeat: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
        del result
        gc.collect()
    return statistics.median(times), times


def decode_everything(module) -> int:
    n = 0
    for inst in module.instructions():
        inst.attributes
        inst.metadata
        inst.sharding
        inst.backend_config
        inst.frontend_attributes
        inst.called_computation_names
        inst.source
        n += 1
    module.entry_computation_layout
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(HERE), ".bench_cache"))
    args = ap.parse_args()

    import hloscope
    from hloscope._hlo import _attrs, _shape, _sharding

    try:
        from jaxlib import _hlo as jax_hlo
    except ImportError:
        sys.exit("this benchmark needs jaxlib: pip install 'hloscope[jax]'")

    def clear_caches() -> None:
        _shape._shape_cache.clear()
        _shape._layout_cache.clear()
        _attrs._metadata_cache.clear()
        _sharding._sharding_cache.clear()
        _attrs._split_cache.clear()

    rows = []
    for layers in args.layers:
        path = generate(layers, args.cache)
        with open(path) as f:
            text = f.read()
        mb = len(text) / 1e6

        def ours():
            clear_caches()
            return hloscope.read_text(text, filename=path)

        def ours_decoded():
            clear_caches()
            h = hloscope.read_text(text, filename=path)
            decode_everything(h.module)
            return h

        def theirs():
            return jax_hlo.hlo_module_from_text(text)

        jt, jts = best_of(theirs, args.repeat)
        ht, hts = best_of(ours, args.repeat)
        dt, dts = best_of(ours_decoded, max(1, args.repeat // 2))
        module = ours().module
        n_inst = module.instruction_count
        jm = theirs()
        j_inst = sum(len(c.instructions()) for c in jm.computations())
        assert n_inst == j_inst, (n_inst, j_inst)

        clear_caches()
        gc.collect()
        tracemalloc.start()
        kept = hloscope.read_text(text, filename=path)
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del kept
        rows.append((layers, mb, n_inst, jt, ht, dt, peak / len(text), current / len(text)))
        print(f"{layers:4d} layers  {mb:6.1f} MB  {n_inst:7d} instructions  "
              f"jaxlib {jt:6.3f} s  hloscope {ht:6.3f} s  ratio {jt / ht:5.2f}  "
              f"(+decode all fields {dt:6.3f} s, ratio {jt / dt:5.2f})  "
              f"memory peak {peak / len(text):4.1f}x text, kept {current / len(text):4.1f}x",
              flush=True)
        print(f"     runs: jaxlib {', '.join(f'{t:.3f}' for t in jts)}; "
              f"hloscope {', '.join(f'{t:.3f}' for t in hts)}", flush=True)

    print()
    print("| layers | text MB | instructions | jaxlib s | hloscope s | ratio | +decode s | "
          "ratio | peak mem / text |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layers, mb, n, jt, ht, dt, peak, _ in rows:
        print(f"| {layers} | {mb:.1f} | {n} | {jt:.3f} | {ht:.3f} | {jt / ht:.2f} | {dt:.3f} | "
              f"{jt / dt:.2f} | {peak:.1f}x |")
    ok = all(jt / ht >= 1.0 and peak <= 10 for _, _, _, jt, ht, _, peak, _ in rows)
    print("\ntarget (ratio >= 1.0, peak memory <= 10x text):", "MET" if ok else "NOT MET")


if __name__ == "__main__":
    main()
