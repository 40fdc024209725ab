"""The HTML report at scale, in headless Chromium, beside Graphviz on the same module.

For the unrolled transformer training steps of parse_speed.py (generated with
JAX and cached in --cache; 64 layers: ~37,000 instructions; 256 layers:
~146,000), this prints for `hloscope report`:

  generation  seconds to read the module and write the page (median of --repeat)
  size        bytes of the HTML file
  first paint seconds from navigation to the page being drawn, in Debian's chromium
              driven by Playwright (median of --repeat)
  open group  milliseconds to open the largest group on the first screen (and then
              one inside it), re-layout and redraw included
  errors      console errors

and, as the named reference, Graphviz's `dot` on the module's fusion-cluster graph
(XLA's own picture route) with a time limit, or that it is not installed.

Targets (issue 5): generation under 5 s / 20 s, HTML under 10 MB / 40 MB, first paint
under 2 s, opening a group under 200 ms, no console errors.

Usage: python benchmarks/report_speed.py [--layers 64 256] [--repeat 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from parse_speed import generate

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def graphviz(module_path: str, limit: float) -> str:
    dot = shutil.which("dot")
    if dot is None:
        return "not installed (no `dot` on PATH)"
    import hloscope

    g = hloscope.kernel_graph(hloscope.read(module_path).module)
    lines = ["digraph G {"]
    groups: dict[str, list[str]] = {}
    for k in g.kernels:
        groups.setdefault(k.group, []).append(k.name)
    for i, (name, ks) in enumerate(groups.items()):
        lines.append(f'subgraph cluster_{i} {{ label="{name}";')
        lines.extend(f'"{k}" [shape=box];' for k in ks)
        lines.append("}")
    lines.extend(f'"{e.src}" -> "{e.dst}";' for e in g.edges if e.src_kind == "kernel")
    lines.append("}")
    with tempfile.NamedTemporaryFile("w", suffix=".dot", delete=False) as f:
        f.write("\n".join(lines))
    t0 = time.perf_counter()
    try:
        r = subprocess.run([dot, "-Tsvg", f.name, "-o", os.devnull], capture_output=True,
                           timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        return f"gave up after {limit:.0f} s"
    dt = time.perf_counter() - t0
    if r.returncode == 0:
        return f"{dt:.1f} s"
    last = (r.stderr.decode(errors="replace").strip().splitlines() or [""])[-1][:80]
    return f"failed after {dt:.1f} s (exit status {r.returncode}) {last}".rstrip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(HERE), ".bench_cache"))
    ap.add_argument("--graphviz-limit", type=float, default=300.0)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("needs Debian's chromium: apt-get install chromium")
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        for layers in args.layers:
            src = generate(layers, args.cache)
            out = os.path.join(tempfile.gettempdir(), f"hloscope_report_{layers}.html")
            gen = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "hloscope", "report", src, "-o", out],
                               check=True, capture_output=True)
                gen.append(time.perf_counter() - t0)
            paint, opens, errors = [], [], []
            for _ in range(args.repeat):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.on("console", lambda m, errs=errors: errs.append(m.text)
                        if m.type == "error" else None)
                page.on("pageerror", lambda e, errs=errors: errs.append(str(e)))
                t0 = time.perf_counter()
                page.goto("file://" + out)
                page.wait_for_selector("body[data-ready='1']", timeout=120000)
                paint.append(time.perf_counter() - t0)
                times = page.evaluate("""() => {
                  const D = window.hloscope.data, out = [];
                  let g = D.groups[D.top].groups.slice().sort((a, b) => D.groups[b].size - D.groups[a].size)[0];
                  for (let i = 0; i < 2 && g !== undefined; i++) {
                    const t0 = performance.now(); window.hloscope.open(g); out.push(performance.now() - t0);
                    g = D.groups[g].groups.slice().sort((a, b) => D.groups[b].size - D.groups[a].size)[0];
                  }
                  return out;
                }""")
                opens.extend(times)
                page.close()
            rows.append((layers, statistics.median(gen), os.path.getsize(out),
                         statistics.median(paint), max(opens) if opens else 0.0, len(errors),
                         graphviz(src, args.graphviz_limit)))
        browser.close()
    print(f"{'layers':>6} {'generation s':>12} {'HTML MB':>8} {'first paint s':>13} "
          f"{'open group ms (max)':>19} {'errors':>6}  Graphviz dot")
    for layers, gen, size, paint, op, errs, gv in rows:
        print(f"{layers:>6} {gen:>12.2f} {size / 1e6:>8.1f} {paint:>13.2f} {op:>19.0f} "
              f"{errs:>6}  {gv}")


if __name__ == "__main__":
    main()
