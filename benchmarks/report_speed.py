"""The HTML report at scale, in headless Chromium, beside Graphviz on the same module.

For the unrolled transformer training steps of parse_speed.py (generated with
JAX and cached in --cache; 64 layers: ~37,000 instructions; 256 layers:
~146,000), this prints for `hloscope report`:

  generation  seconds to read the module and write the page (median of --repeat)
  size        bytes of the HTML file
  first paint seconds from navigation to the overview drawn (the page's script done and
              the next frame painted), in Debian's chromium driven by Playwright, in
              a 1500x1000 window (median of --repeat)
  views       milliseconds to open each view the first time (its build included) and
              the next frame: memory, kernels, graph, collectives, advisor, source
  interactions milliseconds, each to the next frame: sort the kernel table by time,
              filter it, hover the memory timeline, select a value at the peak, open
              the largest closed group of the graph, search the graph
  errors      console errors

and, as the named reference, Graphviz's `dot` on the module's fusion-cluster graph
(XLA's own picture route) with a time limit, or that it is not installed.

Targets (issues 5 and 19): generation under 5 s / 20 s, HTML under 10 MB / 40 MB, first
paint under 1 s (64 layers) / 2 s (256 layers), every interaction under 200 ms, no
console errors.

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
            paint, times, errors = [], {}, []
            for _ in range(args.repeat):
                page = browser.new_page(viewport={"width": 1500, "height": 1000})
                page.on("console", lambda m, errs=errors: errs.append(m.text)
                        if m.type == "error" else None)
                page.on("pageerror", lambda e, errs=errors: errs.append(str(e)))
                page.goto("file://" + out)
                page.wait_for_selector("body[data-ready='1']", timeout=120000)
                paint.append(page.evaluate(FIRST_PAINT) / 1000)
                for name, ms in page.evaluate(INTERACTIONS).items():
                    times.setdefault(name, []).append(ms)
                page.close()
            rows.append((layers, statistics.median(gen), os.path.getsize(out),
                         statistics.median(paint),
                         {k: statistics.median(v) for k, v in times.items()}, len(errors),
                         graphviz(src, args.graphviz_limit)))
        browser.close()
    print(f"{'layers':>6} {'generation s':>12} {'HTML MB':>8} {'first paint s':>13} "
          f"{'slowest interaction ms':>22} {'errors':>6}  Graphviz dot")
    for layers, gen, size, paint, times, errs, gv in rows:
        slowest = max(times.items(), key=lambda kv: kv[1]) if times else ("", 0.0)
        print(f"{layers:>6} {gen:>12.2f} {size / 1e6:>8.1f} {paint:>13.2f} "
              f"{slowest[1]:>14.0f} ({slowest[0]}) {errs:>6}  {gv}")
    print("\ninteractions, ms (median of --repeat), to the next frame:")
    names = list(rows[0][4]) if rows else []
    print(f"{'layers':>6} " + " ".join(f"{n:>14}" for n in names))
    for layers, *_rest in rows:
        times = _rest[3]
        print(f"{layers:>6} " + " ".join(f"{times.get(n, 0.0):>14.0f}" for n in names))


# Milliseconds from navigation start to the frame after the script drew the overview.
FIRST_PAINT = """() => new Promise(r => requestAnimationFrame(() => setTimeout(
  () => r(performance.now()), 0)))"""

# Each user action timed to the next painted frame (a view opened for the first time
# includes building it).
INTERACTIONS = """async () => {
  const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const out = {};
  async function time(name, act, ready) {
    const t0 = performance.now();
    act();
    for (let i = 0; i < 600 && ready && !ready(); i++) await frame();
    await frame();
    out[name] = performance.now() - t0;
  }
  const view = v => () => document.querySelector(`#main[data-view='${v}']`);
  for (const v of ["memory", "kernels", "graph", "collectives", "advisor", "source"])
    await time("open " + v, () => window.hloscope.go(v), view(v));
  await time("open memory again", () => window.hloscope.go("memory"), view("memory"));
  const svg = document.getElementById("timeline-svg");
  if (svg) {
    const r = svg.getBoundingClientRect();
    await time("hover timeline", () => svg.dispatchEvent(new MouseEvent("mousemove",
      {clientX: r.left + r.width * 0.4, clientY: r.top + r.height / 2, bubbles: true})));
  }
  const row = document.querySelector("#peak-values tbody tr");
  if (row) await time("select a value", () => row.click());
  window.hloscope.go("kernels"); await frame(); await frame();
  const th = Array.from(document.querySelectorAll("#kernel-table th")).find(t => t.textContent.startsWith("time"));
  if (th) await time("sort kernels", () => th.click());
  const f = document.getElementById("kernel-filter");
  if (f) await time("filter kernels", () => { f.value = "fusion"; f.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter"})); });
  window.hloscope.go("graph"); await frame(); await frame();
  const closed = Array.from(document.querySelectorAll("#graph-svg g.group.closed"));
  closed.sort((a, b) => window.hloscope.data.groups[b.dataset.group].size - window.hloscope.data.groups[a.dataset.group].size);
  if (closed.length) await time("open a group", () => closed[0].querySelector("text.title").dispatchEvent(new MouseEvent("click", {bubbles: true})));
  const s = document.getElementById("search");
  if (s) await time("search graph", () => { s.value = "all-reduce"; s.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter"})); });
  return out;
}"""


if __name__ == "__main__":
    main()
