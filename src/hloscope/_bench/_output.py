"""Every file a benchmark result is written to: hloscope's JSON, its CSV row,
the Markdown and HTML reports, and a row of jax-hpc-profiler's CSV.

The end of the pipeline (measure -> result -> report data -> renderers ->
files): this module reads a `BenchResult` only through its attributes and
never imports it, so the result's `save`, `markdown` and `html` can call
here without an import circle.  Every text is made before any file is
written, and each file is replaced whole (`_write`): a run killed midway
leaves no half-written file.
"""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
from typing import TYPE_CHECKING

from .._errors import HloscopeError
from .._sources._saved import BENCH_SCHEMA
from .._write import locked, write_text
from ._columns import CANONICAL, CSV_COLUMNS, JHP_PRECISION, PARAM_COLS, SIZE_COLS
from ._html import bench_html
from ._markdown import bench_markdown
from ._report import bench_report_data

if TYPE_CHECKING:
    from ._result import BenchResult

__all__ = ["append_jhp_csv", "csv_text", "jhp_csv_row", "result_csv_row", "result_html",
           "result_markdown", "save_result", "write_csv"]


def result_markdown(r: BenchResult) -> str:
    """The report in Markdown (jax-hpc-profiler's sections first)."""
    return bench_markdown(bench_report_data(r))


def result_html(r: BenchResult) -> str:
    """The report as one self-contained HTML page, with plots of the runs."""
    return bench_html(bench_report_data(r))


def save_result(r: BenchResult, path: str, *, all_ranks: bool = False) -> list[str]:
    """Write `r` (see `BenchResult.save`); the paths written, in order."""
    if r.metadata.get("process_index", 0) and not all_ranks:
        return []
    if path.endswith((".md", ".json", ".html", ".csv")):
        targets = [path]
    else:
        os.makedirs(path, exist_ok=True)
        stem = os.path.join(path, r.file_stem())
        targets = [stem + ".md", stem + ".json", stem + ".html",
                   os.path.join(path, "results.csv")]
    # The data first (JSON, then the CSV row), the pages after: never a page without
    # its data.
    order = sorted(targets, key=lambda t: (not t.endswith(".json"), not t.endswith(".csv")))
    texts: dict[str, str] = {}
    for t in order:
        if t.endswith(".json"):
            texts[t] = json.dumps(r.to_dict(), indent=1) + "\n"
        elif t.endswith(".md"):
            texts[t] = result_markdown(r)
        elif t.endswith(".html"):
            texts[t] = result_html(r)
    for t in order:
        if t.endswith(".csv"):
            write_csv([r], t)  # read and written under its lock
        else:
            write_text(t, texts[t])
    return targets


def _f(x: float | None, scale: float = 1e3) -> str:
    return "" if x is None else repr(round(x * scale, 6))


def result_csv_row(r: BenchResult) -> dict[str, str]:
    s = r.stats
    m = r.metadata
    row: dict[str, str] = {"schema": BENCH_SCHEMA}
    for col, key in PARAM_COLS:
        row[col] = str(r.params.get(key, ""))
    ci = s.get("median_ci95") or [None, None]
    row.update({
        "devices": str(r.devices or ""), "processes": str(m.get("process_count", "") or ""),
        "device_kind": str(m.get("device_kind", "") or ""), "runs": str(s.get("runs", "")),
        "warmup": str(r.warmup), "trace_ms": _f(r.timings.get("trace")),
        "lower_ms": _f(r.timings.get("lower")), "compile_ms": _f(r.timings.get("compile")),
        "jit_ms": _f(r.timings.get("jit")), "first_run_ms": _f(r.first_run),
        "min_ms": _f(s.get("min")), "median_ms": _f(s.get("median")),
        "median_ci_low_ms": _f(ci[0]), "median_ci_high_ms": _f(ci[1]),
        "mean_ms": _f(s.get("mean")), "std_ms": _f(s.get("std")), "iqr_ms": _f(s.get("iqr")),
        "max_ms": _f(s.get("max")), "last_ms": _f(s.get("last")),
        "outliers": " ".join(str(i) for i in s.get("outliers", [])),
        "overhead_us": _f(r.overhead, 1e6),
        "checks_failed": " ".join(c["parameter"] for c in r.checks if not c["ok"]),
        "jax": str(m.get("jax", "") or ""), "jaxlib": str(m.get("jaxlib", "") or ""),
        "host": str(m.get("host", "") or ""), "time": str(m.get("time", "") or ""),
        "git_commit": str((m.get("git") or {}).get("commit", "")),
        "params": json.dumps({k: v for k, v in r.params.items() if k not in CANONICAL},
                             sort_keys=True, default=str),
        "times_ms": " ".join(_f(x) for x in r.times),
        "rank_times_ms": json.dumps([[round(x * 1e3, 6) for x in rr] for rr in r.ranks])
        if r.ranks else "",
    })
    for col, key in SIZE_COLS:
        v = r.sizes.get(key)
        row[col] = "" if v is None else str(v)
    return row


def csv_text(results: list[BenchResult], path: str, *, append: bool = True) -> str:
    """The CSV file at `path` with one row per result added (the header when the file is
    new or empty); `path` is only read."""
    previous = ""
    if append and os.path.exists(path) and os.path.getsize(path) > 0:
        try:
            with open(path, encoding="utf-8", newline="") as f:
                previous = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise HloscopeError(f"{path}: cannot read it to add a row ({e})",
                                hint="write to a new file") from None
        header = next(csv.reader(io.StringIO(previous)), [])
        if tuple(header) != CSV_COLUMNS:
            raise HloscopeError(f"{path}: has another header; not appending hloscope rows "
                                "to it", hint="write to a new file, or merge them with "
                                              "hloscope plot FILE1 FILE2 ...")
        if not previous.endswith("\n"):
            previous += "\n"
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    if not previous:
        w.writeheader()
    for r in results:
        w.writerow(result_csv_row(r))
    return previous + out.getvalue()


def write_csv(results: list[BenchResult], path: str, *, append: bool = True) -> str:
    """Write (or append) one row per result, with the header when the file is new; the
    file is replaced whole (`_write`), never left with half a row."""
    with locked(path):
        return write_text(path, csv_text(results, path, append=append))


def _param_of(r: BenchResult, key: str) -> object:
    """A parameter by jax-hpc-profiler's name, in any case (``X``, ``x``)."""
    for k, v in r.params.items():
        if str(k).lower() == key:
            return v
    return None


def jhp_csv_row(r: BenchResult) -> list[str]:
    """`r` as a row of jax-hpc-profiler's CSV (its 19 columns, no header), so its own
    scripts and plots read hloscope's measurements.  Times in milliseconds: its
    ``jit_time`` is trace, compile and the first run together (hloscope's phases plus the
    first run); min/max/mean/std/last are over the steady-state runs, and std is
    NumPy's default ``np.std`` (ddof=0) as jax-hpc-profiler computes it, not hloscope's
    sample standard deviation (ddof=1).  A size hloscope
    does not know is ``N/A``, as jax-hpc-profiler writes it; a complex precision is its
    parts' (complex64 is float32), as its `plot` expects."""
    s = r.stats
    # jax-hpc-profiler's Std is the population's (ddof=0); a summary read from its own
    # files already is.
    std = statistics.pstdev(r.times) if r.times else s.get("std")
    t = r.timings
    phases = [t[k] for k in ("trace", "lower", "compile") if k in t]
    jit = (sum(phases) + (r.first_run or 0.0)) if phases else t.get("jit")
    fn = _param_of(r, "function") or r.name
    px = _param_of(r, "px") or 1
    py = _param_of(r, "py") or 1
    nodes = _param_of(r, "nodes") or r.metadata.get("process_count") or 1
    backend = _param_of(r, "backend") or r.metadata.get("platform") or ""

    def ms(x: object) -> str:
        return "N/A" if not isinstance(x, (int, float)) else repr(float(x) * 1e3)

    def size(key: str) -> str:
        v = r.sizes.get(key)
        return "N/A" if v is None else str(int(v))

    precision = str(_param_of(r, "precision") or "")
    return [str(fn), JHP_PRECISION.get(precision.lower(), precision),
            *(str(_param_of(r, k) or 0) for k in ("x", "y", "z")), str(px), str(py),
            str(backend), str(nodes), ms(jit), ms(s.get("min")), ms(s.get("max")),
            ms(s.get("mean")), ms(std), ms(s.get("last")),
            size("generated_code"), size("argument"), size("output"), size("temporary")]


def append_jhp_csv(path: str, results: list[BenchResult]) -> str:
    """Add a row per result to jax-hpc-profiler's CSV at `path` (made if missing), whole
    or not at all, under a lock (several processes may add rows at once)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(jhp_csv_row(r) for r in results)
    with locked(path):
        try:
            with open(path, encoding="utf-8") as f:
                old = f.read()
        except FileNotFoundError:
            old = ""
        if old and not old.endswith("\n"):
            old += "\n"
        return write_text(path, old + buf.getvalue())
