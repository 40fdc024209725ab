"""Benchmark results on disk: hloscope's JSON and CSV, and every format
`load_results` accepts (jax-hpc-profiler's CSV and Markdown included).

hloscope's CSV has a header row and a ``schema`` column (``hloscope.bench/1``)
in every row, times in milliseconds and sizes in bytes, and the raw times of
every run (and of every rank) so that merged files can be pooled, not just
averaged.  Appending to a CSV with another header is an error, never a silent
mix.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable
from typing import Any

from .._errors import HloscopeError
from .._sources._saved import load_json
from ._result import RESULT_SCHEMA, BenchResult

__all__ = ["CSV_COLUMNS", "csv_text", "load_results", "read_csv", "result_csv_row",
           "write_csv"]

CSV_COLUMNS = (
    "schema", "function", "precision", "x", "y", "z", "px", "py", "backend", "nodes",
    "devices", "processes", "device_kind", "runs", "warmup", "trace_ms", "lower_ms",
    "compile_ms", "jit_ms", "first_run_ms", "min_ms", "median_ms", "median_ci_low_ms",
    "median_ci_high_ms", "mean_ms", "std_ms", "iqr_ms", "max_ms", "last_ms", "outliers",
    "overhead_us", "generated_code_bytes", "argument_bytes", "output_bytes", "temp_bytes",
    "peak_bytes", "checks_failed", "jax", "jaxlib", "host", "time", "git_commit", "params",
    "times_ms", "rank_times_ms")
_PARAM_COLS = (("function", "Function"), ("precision", "Precision"), ("x", "X"), ("y", "Y"),
               ("z", "Z"), ("px", "PX"), ("py", "PY"), ("backend", "Backend"),
               ("nodes", "Nodes"))
_CANONICAL = frozenset(k for _, k in _PARAM_COLS)
_SIZE_COLS = (("generated_code_bytes", "generated_code"), ("argument_bytes", "argument"),
              ("output_bytes", "output"), ("temp_bytes", "temporary"), ("peak_bytes", "peak"))


def _f(x: float | None, scale: float = 1e3) -> str:
    return "" if x is None else repr(round(x * scale, 6))


def result_csv_row(r: BenchResult) -> dict[str, str]:
    s = r.stats
    m = r.metadata
    row: dict[str, str] = {"schema": RESULT_SCHEMA}
    for col, key in _PARAM_COLS:
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
        "params": json.dumps({k: v for k, v in r.params.items() if k not in _CANONICAL},
                             sort_keys=True, default=str),
        "times_ms": " ".join(_f(x) for x in r.times),
        "rank_times_ms": json.dumps([[round(x * 1e3, 6) for x in rr] for rr in r.ranks])
        if r.ranks else "",
    })
    for col, key in _SIZE_COLS:
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
    from .._write import locked, write_text

    with locked(path):
        return write_text(path, csv_text(results, path, append=append))


def _finite(x: str) -> float:
    """A time or size from a CSV cell: a finite number >= 0 (never NaN)."""
    v = float(x)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{x!r} is not a time (a finite number >= 0)")
    return v


def _opt(x: str, scale: float = 1e3) -> float | None:
    return _finite(x) / scale if x not in ("", None) else None


def read_csv(text: str, *, path: str = "<csv>") -> list[BenchResult]:
    """hloscope's CSV (with its header), or jax-hpc-profiler's (19 or 20 columns)."""
    first = text.split("\n", 1)[0].strip()
    if not first.startswith("schema,"):
        from .._sources._jhp import read_jhp_csv

        return read_jhp_csv(text, path=path)
    out: list[BenchResult] = []
    for n, row in enumerate(csv.DictReader(io.StringIO(text)), 2):
        if row.get("schema") != RESULT_SCHEMA:
            raise HloscopeError(f"{path}:{n}: schema {row.get('schema')!r}, expected "
                                f"{RESULT_SCHEMA}", hint="re-create it with hloscope bench")
        try:
            params: dict[str, Any] = {}
            for col, key in _PARAM_COLS:
                v = row[col]
                if v != "":
                    params[key] = int(v) if v.lstrip("-").isdigit() else v
            params.update(json.loads(row["params"] or "{}"))
            times = [_finite(x) / 1e3 for x in row["times_ms"].split()]
            ranks = [[_finite(x) / 1e3 for x in rr] for rr in json.loads(row["rank_times_ms"])] \
                if row["rank_times_ms"] else []
            timings = {k: v for k, v in (("trace", _opt(row["trace_ms"])),
                                         ("lower", _opt(row["lower_ms"])),
                                         ("compile", _opt(row["compile_ms"])),
                                         ("jit", _opt(row["jit_ms"]))) if v is not None}
            sizes = {key: (int(row[col]) if row[col] else None) for col, key in _SIZE_COLS}
            meta: dict[str, Any] = {k: row[k] for k in ("device_kind", "jax", "jaxlib", "host",
                                                        "time") if row[k]}
            if row["devices"]:
                meta["device_count"] = int(row["devices"])
            if row["processes"]:
                meta["process_count"] = int(row["processes"])
            summary = {} if times else {k: v for k, v in (
                ("min", _opt(row["min_ms"])), ("max", _opt(row["max_ms"])),
                ("mean", _opt(row["mean_ms"])), ("std", _opt(row["std_ms"])),
                ("last", _opt(row["last_ms"]))) if v is not None}
            out.append(BenchResult(
                name=str(params.get("Function", "?")), params=params, times=times,
                first_run=_opt(row["first_run_ms"]), warmup=int(row["warmup"] or 0),
                overhead=_opt(row["overhead_us"], 1e6), timings=timings, sizes=sizes,
                checks=[{"parameter": p, "ok": False, "given": None, "program": None,
                         "note": "from CSV"} for p in row["checks_failed"].split()],
                metadata=meta, ranks=ranks, summary=summary))
        except (KeyError, ValueError, TypeError, RecursionError) as e:
            raise HloscopeError(f"{path}:{n}: a malformed hloscope CSV row ({e})",
                                hint="re-create it with hloscope bench") from None
    return out


def _unique(results: list[BenchResult]) -> list[BenchResult]:
    """Drop a result seen twice (the same run in a folder's JSON and in its results.csv,
    or one CSV copied into a merged one); distinct runs of one point are all kept."""
    seen: set[str] = set()
    out = []
    for r in results:
        key = json.dumps([sorted((str(k), str(v)) for k, v in r.params.items()),
                          [round(x, 9) for x in r.times], round(r.first_run or 0.0, 9),
                          sorted((k, round(v, 9)) for k, v in r.summary.items()),
                          str(r.metadata.get("time", ""))])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def load_results(paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]
                 ) -> list[BenchResult]:
    """Every result in the given files and folders (one path or several): hloscope's JSON
    and CSV, jax-hpc-profiler's CSV and Markdown reports."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                files += [os.path.join(root, n) for n in sorted(names)
                          if n.endswith((".json", ".csv", ".md"))]
        elif os.path.exists(p):
            files.append(p)
        else:
            raise HloscopeError(f"{p}: no such file or folder",
                                hint="pass result files (.json, .csv, .md) or folders")
    out: list[BenchResult] = []
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
        except UnicodeDecodeError:
            raise HloscopeError(f"{f}: not text (binary data)",
                                hint="pass result files (.json, .csv, .md)") from None
        if f.endswith(".json"):
            data = load_json(f, text, what="benchmark result")
            items = data if isinstance(data, list) else [data]
            out += [BenchResult.from_dict(d, path=f) for d in items]
        elif f.endswith(".csv"):
            out += read_csv(text, path=f)
        else:
            if text.lstrip().startswith("# Reporting for") and "(trace + lower + compile" in text:
                continue  # hloscope's own Markdown: its JSON/CSV beside it hold the data
            from .._sources._jhp import read_jhp_markdown

            out.append(read_jhp_markdown(text, path=f))
    from .._sources._jhp import drop_paired_csv_rows

    out = drop_paired_csv_rows(_unique(out))
    if not out:
        raise HloscopeError(f"no results found in {', '.join(paths)}",
                            hint="hloscope bench -o DIR writes them; jax-hpc-profiler CSVs "
                                 "and Markdown reports are read too")
    return out
