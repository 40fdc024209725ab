"""The content of a benchmark report, computed once for every renderer.

Sections follow jax-hpc-profiler's report (Parameters, Profiling Data,
Iteration Runs, Compiled Code, Lowered Code, JAXPR) so its users feel at
home; hloscope adds, between the runs and the code: the checks of the
parameters against the program, XLA's Temporary Size buffer by buffer, what
is live at the peak, the kernels, the collectives, the processes and the
metadata.  Values here are plain numbers and strings; the renderers only
format them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._result import BenchResult

__all__ = ["PROFILING_NOTE", "BenchReportData", "bench_report_data"]

PROFILING_NOTE = (
    "Std is hloscope's sample standard deviation (ddof=1); jax-hpc-profiler writes "
    "NumPy's np.std (ddof=0), smaller by sqrt((n-1)/n). JIT Time in hloscope is trace + "
    "lower + compile, each timed apart, with the first run apart; jax-hpc-profiler's is one "
    "wall time around the first call (trace, lower, compile and the first run together). "
    "See docs/bench.md.")


@dataclass
class BenchReportData:
    title: str
    params: list[tuple[str, Any]]
    profiling: list[tuple[str, str]]
    runs: list[tuple[str, float, str]]          # (label, seconds, note)
    rank_runs: list[list[float]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    temp: dict[str, Any] | None = None
    peak: dict[str, Any] | None = None
    kernels: dict[str, Any] | None = None
    collectives: list[dict[str, Any]] = field(default_factory=list)
    processes: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    metadata: list[tuple[str, str]] = field(default_factory=list)
    code: list[tuple[str, str, str]] = field(default_factory=list)  # (section, fence, text)
    target: list[str] = field(default_factory=list)  # what the target report says, as text
    profiling_note: str = ""
    result: BenchResult | None = None


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.4f} ms"


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    x, unit = float(n), "B"
    for u in ("KB", "MB", "GB", "TB"):  # jax-hpc-profiler's 1024-based units
        if x < 1024:
            break
        x, unit = x / 1024, u
    head = f"{n} B" if unit == "B" else f"{x:.2f} {unit}"
    return head if unit == "B" else f"{head} ({n:,} B)"


def bench_report_data(r: BenchResult, *, top: int = 12) -> BenchReportData:
    s = r.stats
    t = r.timings
    phases = [k for k in ("trace", "lower", "compile") if k in t]
    prof: list[tuple[str, str]] = []
    if phases:
        jit = sum(t[k] for k in phases)
        prof.append(("JIT Time", f"{_ms(jit)} (trace + lower + compile; the first run is "
                                 "not in it)"))
        prof += [(f"{k.capitalize()} Time", _ms(t[k])) for k in phases]
    elif "jit" in t:  # jax-hpc-profiler's own figure, kept as it measured it
        prof.append(("JIT Time", f"{_ms(t['jit'])} (jax-hpc-profiler's: trace, compile and "
                                 "the first run together)"))
    if r.first_run is not None:
        prof.append(("First Run", f"{_ms(r.first_run)} (not in the statistics)"))
    written = r.metadata.get("file_stats")
    if isinstance(written, dict):
        # A jax-hpc-profiler report: its own figures as written (over every run, the first
        # included), then hloscope's (the first run apart), each labelled.
        for label, key in (("Min Time", "min"), ("Max Time", "max"), ("Mean Time", "mean"),
                           ("Std Time", "std")):
            if isinstance(written.get(key), (int, float)):
                note = ", ddof=0" if key == "std" else ""
                prof.append((f"{label} (as the file says: every run{note})",
                             _ms(written[key])))
    view = " (hloscope: the first run apart)" if isinstance(written, dict) else ""
    for label, key in (("Min Time", "min"), ("Max Time", "max"), ("Mean Time", "mean"),
                       ("Std Time", "std"), ("Last Time", "last"), ("Median Time", "median"),
                       ("IQR", "iqr")):
        if s.get(key) is not None and not (key == "std" and "runs" not in s):
            prof.append((label + view, _ms(s[key])))
        elif key == "std" and s.get(key) is not None:  # a jax-hpc-profiler CSV row's own
            prof.append(("Std Time (jax-hpc-profiler's, ddof=0)", _ms(s[key])))
    if "median_ci95" in s:
        lo, hi = s["median_ci95"]
        prof.append(("Median 95% CI", f"{_ms(lo)} to {_ms(hi)}"))
    if "runs" in s:
        prof.append(("Runs", f"{s['runs']} timed after {r.warmup} warm-up runs (discarded)"))
        prof.append(("Outliers", (", ".join(f"run {i}" for i in s["outliers"]) or "none")
                     + " (beyond 1.5 IQR)"))
    if r.overhead is not None:
        prof.append(("Harness Overhead", f"{r.overhead * 1e6:.2f} us per run"))
    if len(r.ranks) > 1:
        prof.append(("Processes", f"{len(r.ranks)}; times are the slowest rank's per "
                                  "iteration"))
    for label, key in (("Generated Code", "generated_code"), ("Argument Size", "argument"),
                       ("Output Size", "output"), ("Temporary Size", "temporary"),
                       ("Peak Memory", "peak")):
        if key in r.sizes:
            prof.append((label, _bytes(r.sizes[key])))
    outliers = set(s.get("outliers", []))
    runs = [(f"Run {i}", x, "outlier" if i in outliers else "") for i, x in enumerate(r.times)]
    data = BenchReportData(title=f"Reporting for {r.params.get('Function', r.name)}",
                           params=list(r.params.items()), profiling=prof, runs=runs,
                           rank_runs=r.ranks, checks=r.checks, result=r,
                           profiling_note=PROFILING_NOTE)
    if len(r.ranks) > 1:
        data.processes = [(k, {"min": min(x), "median": sorted(x)[len(x) // 2],
                               "max": max(x)}) for k, x in enumerate(r.ranks)]
    _program_sections(data, r, top)
    if r.target_report is not None:
        t = r.target_report
        data.target = [t.summary_line(), *t.target_lines()]
    data.metadata = _metadata_rows(r.metadata)
    return data


def _program_sections(data: BenchReportData, r: BenchResult, top: int) -> None:
    rep = r.report
    if rep is None or not rep.hlo_after:
        return
    from .._analysis._temp import temp_breakdown
    from .._sources._xla_dumps import parse_buffer_assignment, parse_live_range

    if rep.buffer_assignment:
        ba = parse_buffer_assignment(rep.buffer_assignment)
        lr = parse_live_range(rep.live_range) if rep.live_range else None
        tb = temp_breakdown(rep.module, ba, lr)
        data.temp = {"xla_temp": r.sizes.get("temporary"), **tb.to_dict()}
    mem = rep.memory
    data.peak = {"bytes": mem.peak_bytes, "instruction": mem.peak_instruction,
                 "values": [v.to_dict() for v in mem.peak_values[:top]],
                 "more": max(0, len(mem.peak_values) - top)}
    g = rep.kernels
    ranked = sorted(g.kernels, key=lambda k: (-k.bytes_accessed, k.name))
    data.kernels = {"count": len(g.kernels), "temporaries": len(g.temporaries),
                    "temporary_bytes": g.temporary_bytes,
                    "flops": sum(k.flops for k in g.kernels),
                    "bytes_accessed": sum(k.bytes_accessed for k in g.kernels),
                    "top": [k.to_dict() for k in ranked[:top]],
                    "more": max(0, len(ranked) - top)}
    data.collectives = [c.to_dict() for c in g.collectives]
    data.code = [("Compiled Code", "hlo", rep.hlo_after), ("Lowered Code", "mlir",
                                                           rep.stablehlo),
                 ("JAXPR", "haskell", rep.jaxpr)]


def _metadata_rows(m: dict[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    names = (("device_kind", "Device kind"), ("platform", "Platform"),
             ("device_count", "Devices"), ("local_device_count", "Devices per process"),
             ("process_count", "Processes"), ("mesh", "Mesh"),
             ("input_shardings", "Input shardings"), ("output_shardings", "Output shardings"),
             ("per_device_input_shapes", "Per-device input shapes"), ("jax", "JAX"),
             ("jaxlib", "jaxlib"), ("python", "Python"), ("hloscope", "hloscope"),
             ("host", "Host"), ("time", "Time (UTC)"), ("command", "Command"))
    for key, label in names:
        if m.get(key) not in (None, "", [], {}):
            v = m[key]
            if isinstance(v, dict):
                v = ", ".join(f"{k}: {n}" for k, n in v.items())
            elif isinstance(v, list):
                v = "; ".join(str(x) for x in v)
            rows.append((label, str(v)))
    env = m.get("environment") or {}
    rows.append(("XLA flags", env.get("XLA_FLAGS", "") or "(none)"))
    for k, v in env.items():
        if k != "XLA_FLAGS":
            rows.append((k, v))
    git = m.get("git")
    if git:
        dirty = " (uncommitted changes)" if git["dirty"] else ""
        rows.append(("Git commit", f"{git['commit']}{dirty} of {git['file']}"))
    elif "git" in m:
        rows.append(("Git commit", "(the function's file is not in a git repository)"))
    return rows
