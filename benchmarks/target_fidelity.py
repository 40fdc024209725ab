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
pair once; on GPU, the copy thunks XLA's emitter runs before a sort, which hloscope predicts
beside the kernels).  ``summary``'s collective count must equal the kernel graph's.  Each row
also has the fit: hloscope's verdict (`report.fit`) beside XLA's (on TPU: it compiled; on GPU:
JAX's allocator's rule, total memory x XLA_PYTHON_CLIENT_MEM_FRACTION, .75 unless set,
applied to XLA's allocation), and whether the most live at once in HBM is within the
allocation (what the headline says beside it).

Last, the verdict against XLA's at each limit: for every TPU generation hloscope lists, a
program (``x * 2 + y``, ``x`` donated: its output is written into ``x``) sized to need 0.5%
less and 0.5% more than the HBM XLA's TPU compiler has available per device, compiled for
one chip without the hardware: XLA's answer is whether it compiles; hloscope's verdict is
`report.fit` where it compiles and, where XLA refuses, hloscope's own estimate from the
module before XLA's passes (arguments + outputs - aliased + temp estimate, `hbm_fit` with no
compile at hand) against the same limit (`hloscope inspect` itself then says "does not fit"
with XLA's refusal).  For GPUs, XLA's compiler checks no memory: the answer comes at run
time from JAX's allocator, which takes total memory x memory fraction (openxla/xla
xla/pjrt/gpu/gpu_helpers.cc).  Without a GPU here, the reference is that product applied to
XLA's allocation (`memory_analysis()`), under XLA_PYTHON_CLIENT_MEM_FRACTION unset (0.75)
and .5; hloscope's verdict is `report.fit` under the same setting.

    python benchmarks/target_fidelity.py --quick     # 8 of the new compiles, the verdicts
    python benchmarks/target_fidelity.py --new       # all the new compiles, the verdicts
    python benchmarks/target_fidelity.py --fit       # the verdicts at each limit only
    python benchmarks/target_fidelity.py --probe     # find each TPU generation's limit again

`--probe` finds, by bisection, the largest need (arguments + outputs + temp + code) XLA
compiles on each TPU generation: the figures in src/hloscope/_target/_limits.py.
(benchmarks/fit_verdict.py runs the verdicts, or with --probe the probe, alone.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parent.parent
MARGIN = 0.005
GiB = 1 << 30
# The HBM per device hloscope compared with before it knew XLA's limits (the chip's HBM
# from Google's Cloud TPU pages, halved for two devices per chip): the "before" column.
BEFORE = {"tpu-v2": 8 * GiB, "tpu-v3": 16 * GiB, "tpu-v4": 16 * GiB, "tpu-v5e": 16 * GiB,
          "tpu-v5p": 95 * 10**9, "tpu-v6e": 32 * GiB, "tpu7x": 96 * 10**9}


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


def allocation(r) -> int:  # type: ignore[no-untyped-def]
    """What XLA allocates for a GPU compile: arguments + outputs - aliased + temp."""
    ma = r.memory_analysis or {}
    return (ma["argument_size_in_bytes"] + ma["output_size_in_bytes"]
            - ma.get("alias_size_in_bytes", 0) + ma["temp_size_in_bytes"])


def allocator_holds(r, hbm_bytes: int) -> bool:  # type: ignore[no-untyped-def]
    """JAX's allocator's answer on a GPU: total x memory fraction (gpu_helpers.cc), .75
    unless XLA_PYTHON_CLIENT_MEM_FRACTION says otherwise, against XLA's allocation."""
    fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION") or 0.75)
    return allocation(r) <= int(hbm_bytes * fraction)


def new_programs(quick: bool) -> None:
    """The table of issue 29's programs (see the module docstring)."""
    import hloscope
    from hloscope._analysis._summary import summarize

    sys.path.insert(0, str(ROOT / "tests"))
    from target_programs import CASES, QUICK, hlo_counts, thunk_counts

    print(f"{'target':14} {'program':24} {'peak':>15} {'= XLA':>5} {'temp':>15} "
          f"{'XLA temp':>15} {'diff':>8} {'kernels':>9} {'collect.':>8} {'copies':>7} "
          f"{'live<=need':>10}  fit (hloscope/XLA)")
    temp_ok = peak_ok = counts_ok = fit_ok = live_ok = n = 0
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
        # XLA's emitter's copies before sorts are thunks too: counted with the kernels.
        extra = len(graph.emitter_copies)
        kernels, colls = len(graph.kernels) + extra, len(graph.collectives)
        copies = sum(k.category == "copy" for k in graph.kernels) + extra
        summary_colls = len(summarize(r.module).collectives)
        # XLA's live-range dump counts every memory space (a TPU's VMEM too).
        peak, xpeak = m.all_spaces_peak_bytes, m.xla.live_range_peak_bytes
        temp, xtemp = m.temp_estimate_bytes, m.xla.temp_bytes
        diff = (temp / xtemp - 1) * 100 if xtemp else 0.0
        fit = r.fit
        xla_fits = allocator_holds(r, fit.hbm_bytes) if gpu else True  # it compiled
        live = m.peak_bytes is not None and m.peak_bytes <= fit.need_bytes
        n += 1
        peak_ok += peak == xpeak
        temp_ok += abs(diff) <= 1.0
        fit_ok += fit.fits == xla_fits
        live_ok += live
        same = kernels == xk and colls == xc == summary_colls and (xcopy is None
                                                                   or copies == xcopy)
        counts_ok += same
        exact = "yes" if peak == xpeak else "NO"
        verdict = (f"{'fits' if fit.fits else 'NO'}/"
                   + ("holds" if xla_fits and gpu else "compiles" if xla_fits else "OOM")
                   + ("" if fit.fits == xla_fits else " <- differs"))
        print(f"{target:14} {name:24} {peak:>15,} {exact:>5} "
              f"{temp:>15,} {xtemp:>15,} {diff:>+7.2f}% {kernels:>4}/{xk:<4} {colls:>3}/{xc:<4} "
              + (f"{copies:>3}/{xcopy:<3}" if xcopy is not None else "    -  ")
              + f" {'yes' if live else 'NO':>10}  {verdict}"
              + ("" if same else "  <- counts differ")
              + ("" if colls == summary_colls else f" (summary: {summary_colls} collectives)"),
              flush=True)
    print(f"{n} compiles: peak = XLA's on {peak_ok}, temp within 1% on {temp_ok}, "
          f"kernels, collectives and copies = XLA's on {counts_ok} (hloscope/XLA in each "
          f"count column), the most live at once in HBM within the allocation on {live_ok}, "
          f"the fit verdict = XLA's on {fit_ok}")


def main() -> None:
    flags = set(sys.argv[1:])
    if "--probe" in flags:
        probe()
        return
    if flags & {"--quick", "--new"}:
        new_programs("--quick" in flags)
    elif "--fit" not in flags:
        old_programs()
        new_programs(False)
    verdicts()


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
            rows.append((target, name, m.all_spaces_peak_bytes, xla_peak, m.temp_estimate_bytes,
                         xla_temp))
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


# -- the verdict against XLA's at each limit ----------------------------------------------

def _program():  # type: ignore[no-untyped-def]
    import jax

    return jax.jit(lambda x, y: x * 2 + y, donate_argnums=0)


def _args(need: int, mesh=None):  # type: ignore[no-untyped-def]
    """Two f32 arrays that together take `need` bytes (rounded to 4 KiB tiles)."""
    import jax
    import jax.numpy as jnp

    n = need // 2 // 4096 * 1024
    kw = {}
    if mesh is not None:
        from jax.sharding import NamedSharding, PartitionSpec

        kw["sharding"] = NamedSharding(mesh, PartitionSpec())
    return [jax.ShapeDtypeStruct((n,), jnp.float32, **kw) for _ in range(2)]


def _estimate_fit(fn, args, chip: str):  # type: ignore[no-untyped-def]
    """hloscope's verdict with no compile at hand: its estimate of the allocation from the
    module as lowered, against the target's limit."""
    from hloscope._analysis._fit import hbm_fit
    from hloscope._analysis._memory import analyze_memory
    from hloscope._sources._reader import read_text
    from hloscope._target._catalog import device_limit

    module = read_text(fn.lower(*args).as_text(dialect="hlo"), filename="<lowered>").module
    limit = device_limit(chip)
    return hbm_fit(analyze_memory(module), limit.hbm_bytes, chip, limit_bytes=limit.bytes,
                   limit=limit.what)


def tpu_rows() -> list[tuple[str, str, int, str, str, str]]:
    import hloscope
    from hloscope._errors import HloscopeError
    from hloscope._target._catalog import CHIPS, device_limit

    rows = []
    fn = _program()
    for chip in (c for c in CHIPS if c.platform == "tpu"):
        limit = device_limit(chip.key).bytes
        for side, factor in (("below", 1 - MARGIN), ("above", 1 + MARGIN)):
            need = int(limit * factor)
            args = _args(need)
            try:
                r = hloscope.inspect(fn, *args, target=chip.key)
            except HloscopeError as e:
                if "does not fit" not in str(e):
                    raise
                xla = "refuses"
                fit = _estimate_fit(fn, args, chip.key)
                ours = ("fits" if fit.fits else "does NOT fit") + " (estimate)"
            else:
                xla = "compiles"
                ours = "fits" if r.fit.fits else "does NOT fit"
            agree = (xla == "compiles") == ours.startswith("fits")
            before = "fits" if need <= BEFORE[chip.key] else "does NOT fit"
            if (before == "fits") != (xla == "compiles"):
                before += " (wrong)"
            rows.append((chip.key, side, need, xla, ours + ("" if agree else "  <- differs"),
                         before))
    return rows


def gpu_rows() -> list[tuple[str, str, int, str, str, str]]:
    import hloscope
    from hloscope._target._catalog import device_limit

    rows = []
    fn = _program()
    for fraction in ("", ".5"):
        if fraction:
            os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = fraction
        else:
            os.environ.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
        for chip in ("h100", "a100-40"):
            limit = device_limit(chip)
            for side, factor in (("below", 1 - MARGIN), ("above", 1 + MARGIN)):
                r = hloscope.inspect(fn, *_args(int(limit.bytes * factor)), target=chip)
                holds = allocator_holds(r, limit.hbm_bytes)
                xla = "allocator holds it" if holds else "allocator OOM"
                ours = "fits" if r.fit.fits else "does NOT fit"
                label = f"{chip} (fraction {fraction or 'unset: .75'})"
                before = "fits" if allocation(r) <= limit.hbm_bytes else "does NOT fit"
                if (before == "fits") != holds:
                    before += " (wrong)"
                rows.append((label, side, allocation(r), xla,
                             ours + ("" if holds == r.fit.fits else "  <- differs"), before))
    os.environ.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    return rows


def verdicts() -> None:
    """The verdict table (see the module docstring)."""
    rows = tpu_rows() + gpu_rows()
    print(f"{'target':30} {'program':8} {'need (B)':>16} {'XLA':19} {'hloscope':26} "
          "before (against the HBM)")
    for target, side, need, xla, ours, before in rows:
        print(f"{target:30} {side:8} {need:>16,} {xla:19} {ours:26} {before}")
    same = sum("differs" not in r[4] for r in rows)
    wrong = sum("wrong" in r[5] for r in rows)
    print(f"hloscope's verdict equals XLA's on {same} of {len(rows)} (before: "
          f"{len(rows) - wrong} of {len(rows)})")


def probe() -> None:
    """The largest need XLA compiles on one device of each TPU generation (8 KiB steps)."""
    import jax

    from hloscope._jax._target import prepare
    from hloscope._target._catalog import CHIPS

    fn = jax.jit(lambda a: a * 2)
    for chip in (c for c in CHIPS if c.platform == "tpu"):
        p = prepare(chip.key)
        mesh = jax.sharding.Mesh(p.devices[:1], ("d",))

        def need(k: int) -> int | None:
            x = _args(k * 8192, mesh)[0]
            try:
                m = fn.lower(x).compile().memory_analysis()
            except Exception:  # noqa: BLE001  (XLA's refusal: RESOURCE_EXHAUSTED)
                return None
            return (m.argument_size_in_bytes + m.output_size_in_bytes
                    + m.temp_size_in_bytes + m.generated_code_size_in_bytes)

        lo, hi, best = (1 << 30) // 8192, (256 << 30) // 8192, 0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            got = need(mid)
            if got is None:
                hi = mid
            else:
                lo, best = mid, got
        print(f"{chip.key:8} {p.info['device_kind']:14} largest need XLA compiles: "
              f"{best:,} B ({best / 2**30:.3f} GiB)", flush=True)


if __name__ == "__main__":
    main()
