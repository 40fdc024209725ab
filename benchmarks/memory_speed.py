"""Speed and accuracy of hloscope's memory analysis on transformer training steps of 4 sizes.

Generates (with JAX, on the CPU, sharded over 8 virtual devices; cached in
--cache) the unrolled transformer training step of parse_speed.py at several
depths, compiling each with ``xla_dump_to`` to keep XLA's own figures: the
peak of its HloLiveRange and ``memory_analysis().temp_size_in_bytes``.
Then, for each module, it times `hloscope.analyze_memory` on a freshly
read module (median of --repeat runs; parsing excluded, decoding the
attributes the analysis reads included) and prints instructions, time, time per
1,000 instructions (flat when the analysis is linear), and hloscope's peak
and temp estimate against XLA's.

The reference for "linear": the time per instruction of the smallest
module, measured in the same run; the ratio column is each module's time
per instruction over that (fastest of the runs, the least disturbed by other
work on a shared machine; the median is printed too).

Usage: python benchmarks/memory_speed.py [--layers 8 16 32 64] [--repeat 7] [--cache DIR]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from parse_speed import GENERATOR

DUMPING = GENERATOR.replace(
    'open(sys.argv[2], "w").write(jax.jit(step).lower(params, x).compile().as_text())',
    '''import json, tempfile, glob, re
with tempfile.TemporaryDirectory() as d:
    c = jax.jit(step).lower(params, x).compile(compiler_options={"xla_dump_to": d,
                                                                  "xla_dump_hlo_pass_re": "NONE"})
    lr = open(sorted(glob.glob(d + "/*after_optimizations-live-range.txt"))[-1]).read()
    m = re.search(r"Stack trace breakdown for peak usage: ([\\d ]+) bytes", lr)
    peak = int(m.group(1).replace(" ", "")) if m else None
open(sys.argv[2], "w").write(c.as_text())
ma = c.memory_analysis()
json.dump({"temp_size_in_bytes": ma.temp_size_in_bytes, "live_range_peak_bytes": peak},
          open(sys.argv[2] + ".truth.json", "w"))''')


def generate(layers: int, cache: str) -> str:
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, f"memory_transformer_{layers}.hlo")
    if not os.path.exists(path) or not os.path.exists(path + ".truth.json"):
        print(f"generating the {layers}-layer module with JAX ...", flush=True)
        subprocess.run([sys.executable, "-c", DUMPING, str(layers), path], check=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(HERE), ".bench_cache"))
    args = ap.parse_args()
    import hloscope
    from hloscope._analysis._dataflow import analyze_dataflow
    from hloscope._analysis._liverange import compute_live_ranges
    from hloscope._analysis._memory import analyze_memory

    from hloscope._hlo import _attrs

    def fresh(path: str):  # type: ignore[no-untyped-def]
        """The module as a user has it right after reading: no attribute decoded yet."""
        _attrs._split_cache.clear()
        _attrs._metadata_cache.clear()
        return hloscope.read(path).module

    modules = {}
    for layers in args.layers:
        path = generate(layers, args.cache)
        with open(path + ".truth.json") as f:
            truth = json.load(f)
        modules[layers] = (path, truth)
    analyze_memory(fresh(modules[args.layers[0]][0]))  # warm up the imports
    rows = []
    for layers, (path, truth) in modules.items():
        times = []
        peak_times = []
        report = None
        module = None
        for _ in range(args.repeat):
            module = fresh(path)  # parsing is not timed; decoding what the analysis reads is
            t0 = time.perf_counter()
            report = analyze_memory(module)
            times.append(time.perf_counter() - t0)
            module = fresh(path)
            gc.disable()  # as analyze_memory does
            t0 = time.perf_counter()
            compute_live_ranges(analyze_dataflow(module))
            peak_times.append(time.perf_counter() - t0)
            gc.enable()
        assert module is not None
        assert report is not None
        rows.append((layers, module.instruction_count, statistics.median(times), min(times),
                     max(times), min(peak_times), report, truth))

    base = rows[0][3] / rows[0][1]
    pbase = rows[0][5] / rows[0][1]
    print(f"{'layers':>6} {'instructions':>12} {'median s':>9} {'min-max s':>13} "
          f"{'us/instr':>8} {'ratio':>5} {'peak-only s':>11} {'ratio':>5}  "
          f"{'peak (hloscope / XLA)':>27}  {'temp (hloscope / XLA)':>27}")
    for layers, n, med, lo, hi, pmed, r, truth in rows:
        xp, xt = truth.get("live_range_peak_bytes"), truth.get("temp_size_in_bytes")
        peak_ok = "=" if r.peak_bytes == xp else "!="
        tdiff = (r.temp_estimate_bytes - xt) / xt * 100 if xt else 0.0
        print(f"{layers:>6} {n:>12,} {med:>9.3f} {lo:>6.3f}-{hi:<6.3f} {lo / n * 1e6:>8.1f} "
              f"{lo / n / base:>5.2f} {pmed:>11.3f} {pmed / n / pbase:>5.2f}  {r.peak_bytes:>12,} {peak_ok} {xp or 0:<12,}  "
              f"{r.temp_estimate_bytes:>12,} {tdiff:+6.2f}%")
    print("\nus/instr and ratio use the fastest run (the least disturbed on a shared machine); "
          "ratio = time per instruction / that of the smallest module (1.0 = linear); "
          "peak-only (fastest run) = values, buffers, live ranges and the peak, without the "
          "temp estimate")


if __name__ == "__main__":
    main()
