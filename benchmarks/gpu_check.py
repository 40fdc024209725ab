"""What a real NVIDIA GPU says of hloscope's answers made without one.

    python benchmarks/gpu_check.py fit OUT       # on a machine with one NVIDIA GPU, first
    python benchmarks/gpu_check.py device OUT    # then this, on the same machine
    python benchmarks/gpu_check.py compare OUT   # here, no GPU: the same compiled for "h100"

`fit` (on the GPU, from a process that never starts JAX): will it fit.  The pool JAX's
allocator really has (`memory_stats()["bytes_limit"]`) beside the limit hloscope assumes
for an H100 (`device_limit("h100")`), under the default memory fraction and under
XLA_PYTHON_CLIENT_MEM_FRACTION=.5; a program that needs 0.99, 0.995, 1.005 and 1.01 of
hloscope's limit (16 f32 arrays, 8 of them donated and overwritten: the arguments are the
whole need), each in a fresh process: does it run, or does the allocator refuse it?
(OUT/fit.json, read by `device`.)

`device` (on the GPU, JAX's own CUDA plugin):
- the program kinds of benchmarks/profile_accuracy.py (sized for a GPU) and the README's
  training step, each compiled by `hloscope.inspect` on the GPU: XLA's allocation
  (`memory_analysis()`), XLA's live-range peak beside hloscope's peak of the same compile,
  and the kernels hloscope counts; each report saved (OUT/modules/NAME.json) and the
  figures in OUT/device.json;
- `hloscope.bench` of a function that donates its argument.

`compare` (here): the same programs compiled for ``target="h100"`` with no GPU (jax's
version here may differ from the GPU machine's: said in the table), the kernels and XLA's
allocation beside the GPU's, and hloscope's peak of each GPU compile against XLA's
live-range peak of it; the fit verdicts for the probed needs against what the GPU did.

benchmarks/gpu_session.sh runs a whole lease (with benchmarks/gpu_capture.py, the
profiles, and benchmarks/profile_accuracy.py on the GPU); docs/targets.md has the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples"))
FACTORS = (0.99, 0.995, 1.005, 1.01)
PAIRS = 8  # arrays x and y of each pair; x donated and overwritten


SMALL = bool(os.environ.get("GPU_CHECK_SMALL"))  # a try of this script on a CPU


def _programs():  # type: ignore[no-untyped-def]
    from profile_accuracy import programs
    from train_step import make_inputs, train_step

    yield from ((n, f, a) for n, f, a in programs(not SMALL))
    yield "train step (README)", train_step, make_inputs(8, 1024, 512)


def _file(name: str) -> str:
    return name.replace(" ", "_").replace("/", "_").replace("(", "").replace(")", "")


def _figures(report) -> dict:  # type: ignore[no-untyped-def]
    m = report.memory
    ma = report.memory_analysis or {}
    return {"kernels": len(report.kernels.kernels),
            "hloscope_peak": m.all_spaces_peak_bytes,
            "xla_live_range_peak": m.xla.live_range_peak_bytes if m.xla else None,
            "temp_estimate": m.temp_estimate_bytes,
            "memory_analysis": {k: v for k, v in ma.items() if isinstance(v, int)}}


def _probe_need(need: int) -> None:
    """In a fresh process: make the arrays on the GPU and run the donating program."""
    import jax
    import jax.numpy as jnp

    n = need // (2 * PAIRS) // 4 // 1024 * 1024
    fn = jax.jit(lambda xs, ys: [x * 2 + y for x, y in zip(xs, ys)], donate_argnums=0)
    stats = jax.devices()[0].memory_stats() or {}
    out: dict = {"platform": jax.devices()[0].platform, "need": need, "elements": n,
                 "arguments": 2 * PAIRS * n * 4, "bytes_limit": stats.get("bytes_limit")}
    stage = "making the arguments"
    try:
        mk = jax.jit(lambda v: jnp.full((n,), v, jnp.float32))
        xs = [mk(float(i)) for i in range(PAIRS)]
        ys = [mk(float(i)) for i in range(PAIRS)]
        jax.block_until_ready(ys)
        stage = "compiling"
        compiled = fn.lower(xs, ys).compile()
        ma = compiled.memory_analysis()
        out["allocation"] = (ma.argument_size_in_bytes + ma.output_size_in_bytes
                             - ma.alias_size_in_bytes + ma.temp_size_in_bytes)
        stage = "running"
        jax.block_until_ready(compiled(xs, ys))
        out["ran"] = True
    except Exception as e:  # the allocator's refusal is what is measured
        out.update(ran=False, stage=stage, error=str(e).strip().splitlines()[0][:240])
    stats = jax.devices()[0].memory_stats() or {}
    out["peak_bytes_in_use"] = stats.get("peak_bytes_in_use")
    print("PROBE " + json.dumps(out))


def fit(out: Path) -> None:
    """The probes, each in a fresh process, from a process that never starts JAX (one that
    held the GPU would leave the probes too little memory to start on it)."""
    from hloscope._target._catalog import device_limit

    out.mkdir(parents=True, exist_ok=True)
    probes = []
    for fraction in ("", ".5"):
        env = dict(os.environ, JAX_PLATFORMS="cuda")
        env.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
        if fraction:
            env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = fraction
        limit = device_limit("h100", env)
        for factor in FACTORS if not fraction else (0.99, 1.01):
            need = int((2 << 20 if SMALL else limit.bytes) * factor)
            p = subprocess.run([sys.executable, __file__, "probe", str(need)], env=env,
                               capture_output=True, text=True, timeout=120)
            got = next((json.loads(line[6:]) for line in p.stdout.splitlines()
                        if line.startswith("PROBE ")),
                       {"ran": False, "stage": "process", "error": p.stderr[-400:]})
            got.update(fraction=fraction or "unset", factor=factor,
                       hloscope_limit=limit.bytes, returncode=p.returncode)
            probes.append(got)
            print(json.dumps(got), flush=True)
    (out / "fit.json").write_text(json.dumps(probes, indent=1))


def device(out: Path) -> None:
    import jax

    import hloscope

    (out / "modules").mkdir(parents=True, exist_ok=True)
    dev = jax.devices()[0]
    info = {"jax": jax.__version__, "device_kind": dev.device_kind, "platform": dev.platform,
            "memory_stats": {k: v for k, v in (dev.memory_stats() or {}).items()
                             if k in ("bytes_limit", "bytes_reservable_limit")}}
    print(json.dumps(info))
    rows = []
    for name, fn, args in _programs():
        t0 = time.perf_counter()
        try:
            r = hloscope.inspect(fn, *args)
            fig = _figures(r)
            r.save(str(out / "modules" / (_file(name) + ".json")))
        except Exception as e:  # noqa: BLE001 - recorded, the next program goes on
            fig = {"error": f"{type(e).__name__}: {e}"[:400]}
        fig.update(name=name, seconds=round(time.perf_counter() - t0, 2))
        rows.append(fig)
        print(json.dumps(fig), flush=True)
    info["programs"] = rows
    fit_file = out / "fit.json"
    info["fit"] = json.loads(fit_file.read_text()) if fit_file.exists() else []
    # bench of a donating function
    import jax.numpy as jnp

    step = jax.jit(lambda x: x * 0.5 + 1.0, donate_argnums=0)
    try:
        b = hloscope.bench(step, jnp.ones((8192, 8192)), iterations=20)
        import statistics

        info["bench_donated"] = {"median_s": statistics.median(b.times), "runs": len(b.times),
                                 "repr": repr(b)[:600]}
    except Exception as e:  # noqa: BLE001
        info["bench_donated"] = {"error": f"{type(e).__name__}: {e}"[:400]}
    print(json.dumps(info["bench_donated"]), flush=True)
    (out / "device.json").write_text(json.dumps(info, indent=1))


def _alloc(f: dict) -> int:
    ma = f.get("memory_analysis") or {}
    return (ma.get("argument_size_in_bytes", 0) + ma.get("output_size_in_bytes", 0)
            - ma.get("alias_size_in_bytes", 0) + ma.get("temp_size_in_bytes", 0))


def compare(out: Path) -> None:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    import hloscope
    from hloscope._target._catalog import device_limit

    info = json.loads((out / "device.json").read_text())
    gpu = {r["name"]: r for r in info["programs"]}
    print(f"GPU: {info['device_kind']}, jax {info['jax']}; here: jax {jax.__version__}, "
          "compiled for target h100 with no GPU\n")
    print("On the GPU: hloscope's peak of the GPU's compile against XLA's live-range peak "
          "of it; here: the same program compiled for h100 without the GPU")
    print(f"{'program':20} {'peak (hloscope)':>16} {'XLA peak':>14} {'=':>3} "
          f"{'kernels GPU/here':>17} {'XLA alloc GPU':>15} {'here':>15} {'diff':>7}")
    for name, fn, args in _programs():
        g = gpu.get(name)
        if g is None:  # a program of several devices, not run on one GPU
            continue
        if "error" in g:
            print(f"{name:20} GPU: {g['error'][:120]}")
            continue
        try:
            abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), args)
            here = _figures(hloscope.inspect(fn, *abstract, target="h100"))
        except Exception as e:  # noqa: BLE001
            print(f"{name:20} here: {type(e).__name__}: {e}"[:200])
            continue
        peak, xpeak = g.get("hloscope_peak"), g.get("xla_live_range_peak")
        a, b = _alloc(g), _alloc(here)
        print(f"{name:20} {'-' if peak is None else format(peak, ','):>16} "
              f"{'-' if xpeak is None else format(xpeak, ','):>14} "
              f"{'yes' if peak == xpeak and peak is not None else 'NO':>3} "
              f"{g.get('kernels', '-'):>8}/{here['kernels']:<8} {a:>15,} {b:>15,} "
              f"{(b - a) / a * 100 if a else 0:>+6.1f}%")
    print("\nwill it fit: JAX's allocator on the GPU against hloscope's verdict for target "
          "h100 (the need is the arguments: 16 f32 arrays, 8 donated and overwritten)")
    for p in info["fit"]:
        env = {} if p["fraction"] == "unset" else {"XLA_PYTHON_CLIENT_MEM_FRACTION":
                                                   p["fraction"]}
        limit = device_limit("h100", env)
        verdict = "fits" if p["arguments"] <= limit.bytes else "does NOT fit"
        hw = "ran" if p.get("ran") else f"refused ({p.get('stage')})"
        agree = "agree" if (verdict == "fits") == bool(p.get("ran")) else "DIFFER"
        print(f"fraction {p['fraction']:>5} x{p['factor']:<6} need {p['arguments']:>15,}: "
              f"hloscope {verdict:13} GPU {hw:32} {agree}; pool {p.get('bytes_limit')}, "
              f"hloscope's limit {limit.bytes:,}")


if __name__ == "__main__":
    what, arg = sys.argv[1], sys.argv[2]
    if what == "fit":
        fit(Path(arg))
    elif what == "probe":
        _probe_need(int(arg))
    elif what == "device":
        device(Path(arg))
    else:
        compare(Path(arg))
