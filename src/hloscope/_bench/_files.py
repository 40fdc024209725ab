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
from ._columns import JHP_SOURCE, PARAM_COLS, SIZE_COLS
from ._jhp import drop_paired_csv_rows, read_jhp_csv, read_jhp_markdown
from ._result import RESULT_SCHEMA, BenchResult

__all__ = ["load_results", "read_csv"]

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
        return read_jhp_csv(text, path=path)
    out: list[BenchResult] = []
    for n, row in enumerate(csv.DictReader(io.StringIO(text)), 2):
        if row.get("schema") != RESULT_SCHEMA:
            raise HloscopeError(f"{path}:{n}: schema {row.get('schema')!r}, expected "
                                f"{RESULT_SCHEMA}", hint="re-create it with hloscope bench")
        try:
            params: dict[str, Any] = {}
            for col, key in PARAM_COLS:
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
            sizes = {key: (int(row[col]) if row[col] else None) for col, key in SIZE_COLS}
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


def _unique(results: list[BenchResult], notes: list[str] | None = None
            ) -> list[BenchResult]:
    """Drop a result seen twice (the same run in a folder's JSON and in its results.csv,
    or one CSV copied into a merged one); distinct runs of one point are all kept.  Of two
    copies the one with the program's reports (the JSON) is kept, wherever it was found.
    A jax-hpc-profiler CSV (one method) whose rows repeat another's would vanish from
    the plots: `notes` gets a line saying so."""
    seen: dict[str, int] = {}
    out: list[BenchResult] = []
    copies: dict[tuple[str, str], int] = {}  # (file, the file it repeats): rows
    rows: dict[str, int] = {}
    for r in results:
        f = _jhp_file(r)
        if f:
            rows[f] = rows.get(f, 0) + 1
        key = json.dumps([sorted((str(k), str(v)) for k, v in r.params.items()),
                          [round(x, 9) for x in r.times], round(r.first_run or 0.0, 9),
                          sorted((k, round(v, 9)) for k, v in r.summary.items()),
                          str(r.metadata.get("time", ""))])
        if key not in seen:
            seen[key] = len(out)
            out.append(r)
            continue
        kept = _jhp_file(out[seen[key]])
        if f and kept and f != kept:
            copies[f, kept] = copies.get((f, kept), 0) + 1
        elif _richness(r) > _richness(out[seen[key]]):
            out[seen[key]] = r
    if notes is not None:
        def stem(path: str) -> str:
            return os.path.splitext(os.path.basename(path))[0]

        for (f, kept), n in copies.items():
            whole = n == rows[f]
            notes.append(f"{f}: {'its' if whole else f'{n} of its'} {rows[f]} rows repeat "
                         f"{kept}'s: counted once, under {stem(kept)}" + (
                             f" ({stem(f)} has no series of its own: a copy of that file?)"
                             if whole else ""))
    return out


def _jhp_file(r: BenchResult) -> str:
    """The jax-hpc-profiler CSV file `r` is a row of ("" for anything else)."""
    f = r.metadata.get("file")
    return f if r.source == JHP_SOURCE and "line" in r.metadata and isinstance(f, str) else ""


def _richness(r: BenchResult) -> int:
    return (r.report is not None) + (r.target_report is not None)


def load_results(paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], *,
                 notes: list[str] | None = None) -> list[BenchResult]:
    """Every result in the given files and folders (one path or several): hloscope's JSON
    and CSV, jax-hpc-profiler's CSV and Markdown reports.  A result found twice counts
    once; `notes`, when given, gets a line for each jax-hpc-profiler CSV whose rows
    repeat another's (a method that would otherwise vanish without a word)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    files: list[str] = []
    found: set[str] = set()  # files found in folders, not named: other Markdown is skipped
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                more = [os.path.join(root, n) for n in sorted(names)
                        if n.endswith((".json", ".csv", ".md"))]
                files += more
                found.update(more)
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
            if "<!-- written by hloscope" in text or (
                    text.lstrip().startswith("# Reporting for")
                    and "(trace + lower + compile" in text):
                continue  # hloscope's own Markdown: its JSON/CSV beside it hold the data
            if f in found and "## Parameters" not in text:
                continue  # a README or notes in a results folder, not a report
            out.append(read_jhp_markdown(text, path=f))
    out = drop_paired_csv_rows(_unique(out, notes))
    if not out:
        raise HloscopeError(f"no results found in {', '.join(paths)}",
                            hint="hloscope bench -o DIR writes them; jax-hpc-profiler CSVs "
                                 "and Markdown reports are read too")
    return out
