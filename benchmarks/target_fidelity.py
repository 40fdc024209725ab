"""Targets: hloscope's memory figures against XLA's own, for GPU and TPU programs compiled
here without the hardware, and hloscope's time beyond XLA's compile.

    python benchmarks/target_fidelity.py

Needs the target extras (pip install -e '.[test]' installs them).  For each program and
target it prints hloscope's peak beside XLA's live-range peak (the reference: XLA's own
``*-live-range.txt`` dump of the same compile) and hloscope's temp estimate beside XLA's
temp allocation (``memory_analysis().temp_size_in_bytes``; on TPU, deviceless compiles
report 0 there, so the TPU column compares with the default-memory-space temp allocations
of XLA's buffer assignment).  Then the time of `hloscope inspect --target h100x8` on the
README's sharded training step: the whole command, and XLA's compile inside it.

Then the programs of issue 29 (tests/target_programs.py: MoE with all-to-all, tensor-parallel
MLPs on 8 to 64 devices, donated Adam, long-sequence attention, scanned remat, a llama-style
decoder block with FSDP, conv and ViT steps; on H100, H200, B200, A100 and TPU v4, v5e, v5p,
v6e), one row per compile: the peak beside XLA's live-range peak, the temp estimate beside the
temp allocation (device memory) of XLA's buffer assignment, and the kernels, collectives and
copies hloscope counts beside XLA's: on GPU the compiler's thunk sequence
(``*thunk_sequence.txt`` in the dump folder: each thunk that runs work once, an async pair's
collective once, a dynamic-slice fusion's inner copy as the fusion), on TPU the optimized HLO
(each instruction of the entry and of the computations it runs that launches work; an async
pair once).  ``summary``'s collective count must equal the kernel graph's.

    python benchmarks/target_fidelity.py --quick     # 8 of the new compiles only
    python benchmarks/target_fidelity.py --new       # all the new compiles only
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def programs():  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp

    def mlp(params, x):
        for w in params:
            x = jax.nn.relu(x @ w)
        return (x ** 2).mean()

    def step(params, x):
        loss, g = jax.value_and_grad(mlp)(params, x)
        return loss, [p - 0.1 * gg for p, gg in zip(params, g)]

    def attn(q, k, v):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / 8.0
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, -1), v)

    sys.path.insert(0, str(ROOT / "examples"))
    from train_step import train_step

    w = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)
    x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)
    q = jax.ShapeDtypeStruct((64, 512, 64), jnp.bfloat16)
    layers = jax.ShapeDtypeStruct((8, 4096, 4096), jnp.bfloat16)
    tokens = jax.ShapeDtypeStruct((1024, 4096), jnp.bfloat16)
    yield "MLP step, data parallel", step, ([w] * 4, x), {1: "data,None"}
    yield "MLP step, FSDP", step, ([w] * 4, x), {0: "data,None", 1: "data,None"}
    yield "attention", attn, (q, q, q), {0: "data", 1: "data", 2: "data"}
    yield "scan train step, FSDP", train_step, (layers, tokens), {0: "None,data,None",
                                                                   1: "data"}


def tpu_temp(buffer_assignment: str) -> int:
    return sum(int(m.group(1)) for m in re.finditer(
        r"^allocation \d+: size (\d+), preallocated-temp", buffer_assignment, re.M))


def new_programs(quick: bool) -> None:
    """The table of issue 29's programs (see the module docstring)."""
    import hloscope
    from hloscope._analysis._summary import summarize

    sys.path.insert(0, str(ROOT / "tests"))
    from target_programs import CASES, QUICK, hlo_counts, thunk_counts

    print(f"{'target':14} {'program':24} {'peak':>15} {'= XLA':>5} {'temp':>15} "
          f"{'XLA temp':>15} {'diff':>8} {'kernels':>9} {'collect.':>8} {'copies':>7}")
    temp_ok = peak_ok = counts_ok = n = 0
    for i, (name, target, build) in enumerate(CASES):
        if quick and i not in QUICK:
            continue
        fn, args, shard, mesh = build()
        with tempfile.TemporaryDirectory(prefix="hloscope-fidelity-") as dump:
            try:
                r = hloscope.inspect(fn, *args, target=target, shard=shard, mesh=mesh,
                                     compiler_options={"xla_dump_to": dump})
            except hloscope.HloscopeError as e:
                print(f"{target:14} {name:24} not compiled: {str(e).splitlines()[0][:80]}")
                continue
            thunks = sorted(Path(dump).glob("*thunk_sequence.txt"))
            gpu = r.target["platform"] != "tpu"
            if gpu:
                xk, xc, xcopy = thunk_counts(thunks[0].read_text())
            else:
                (xk, xc), xcopy = hlo_counts(r.hlo_after), None
        m = r.memory
        graph = r.kernels
        kernels, colls = len(graph.kernels), len(graph.collectives)
        copies = sum(k.category == "copy" for k in graph.kernels)
        summary_colls = len(summarize(r.module).collectives)
        xpeak, xtemp = m.xla.live_range_peak_bytes, m.xla.temp_bytes
        temp = m.temp_estimate_bytes
        diff = (temp / xtemp - 1) * 100 if xtemp else 0.0
        n += 1
        peak_ok += m.peak_bytes == xpeak
        temp_ok += abs(diff) <= 1.0
        same = kernels == xk and colls == xc == summary_colls and (xcopy is None
                                                                   or copies == xcopy)
        counts_ok += same
        exact = "yes" if m.peak_bytes == xpeak else "NO"
        print(f"{target:14} {name:24} {m.peak_bytes:>15,} {exact:>5} "
              f"{temp:>15,} {xtemp:>15,} {diff:>+7.2f}% {kernels:>4}/{xk:<4} {colls:>3}/{xc:<4} "
              + (f"{copies:>3}/{xcopy:<3}" if xcopy is not None else "    -  ")
              + ("" if same else "  <- counts differ")
              + ("" if colls == summary_colls else f" (summary: {summary_colls} collectives)"))
    print(f"{n} compiles: peak = XLA's on {peak_ok}, temp within 1% on {temp_ok}, "
          f"kernels, collectives and copies = XLA's on {counts_ok} (hloscope/XLA in each "
          "count column)")


def main() -> None:
    if "--quick" in sys.argv or "--new" in sys.argv:
        new_programs("--quick" in sys.argv)
        return
    old_programs()
    new_programs(False)


def old_programs() -> None:
    import hloscope

    rows = []
    for target in ("h100", "h100x8", "tpu-v5e", "tpu-v5e:2x4"):
        for name, fn, args, shard in programs():
            r = hloscope.inspect(fn, *args, target=target,
                                 shard=shard if "x" in target.split(":")[-1] else None)
            m = r.memory
            xla_peak = m.xla.live_range_peak_bytes
            xla_temp = (r.memory_analysis["temp_size_in_bytes"] if target.startswith("h")
                        else tpu_temp(r.buffer_assignment))
            rows.append((target, name, m.peak_bytes, xla_peak, m.temp_estimate_bytes, xla_temp))
    print(f"{'target':12} {'program':24} {'peak':>13} {'XLA peak':>13} {'diff':>7} "
          f"{'temp':>13} {'XLA temp':>13} {'diff':>7}")
    for target, name, peak, xpeak, temp, xtemp in rows:
        def pct(a: int, b: int) -> str:
            return f"{(a / b - 1) * 100:+.1f}%" if b else ("0" if a == 0 else "n/a")

        print(f"{target:12} {name:24} {peak:>13,} {xpeak:>13,} {pct(peak, xpeak):>7} "
              f"{temp:>13,} {xtemp:>13,} {pct(temp, xtemp):>7}")

    cmd = [sys.executable, "-m", "hloscope", "inspect", "examples/train_step.py:train_step",
           "--target", "h100x8", "--arg", "bf16[8,4096,4096]", "--arg", "bf16[1024,4096]",
           "--shard", "0=None,data,None", "--shard", "1=data"]
    for _ in range(3):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True,
                             env={**os.environ, "COLUMNS": "100"}).stdout
        wall = time.perf_counter() - t0
        compile_ms = float(re.search(r"compile ([\d.]+) ms", out).group(1))
        print(f"hloscope inspect --target h100x8 (scan train step): {wall:.2f} s in all, "
              f"XLA's compile {compile_ms / 1e3:.2f} s, hloscope and Python beyond it "
              f"{wall - compile_ms / 1e3:.2f} s (target: under 5 s)")


if __name__ == "__main__":
    main()
