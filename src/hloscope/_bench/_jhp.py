"""Read jax-hpc-profiler's files, so its users bring their history.

Its CSV has no header: 19 columns (function, precision, x, y, z, px, py,
backend, nodes, jit_time, min_time, max_time, mean_time, std_div, last_time,
generated_code, argument_size, output_size, temp_size) or 20 (plus flops);
times in milliseconds, sizes in bytes.  Files written by its ``concat`` (which
adds a header row) are read too.  Its Markdown report has Parameters,
Profiling Data and Iteration Runs tables.

Its "Run 0" usually includes work the later runs do not (in its published
FFT reports it is often twice the median), so hloscope reads it as the first
run, apart from the statistics, as it does for its own measurements; its
"JIT Time" (trace, compile and a first execution together) is kept as it is,
under ``timings["jit"]``.
"""

from __future__ import annotations

import csv
import io
import math
import re

from .._errors import HloscopeError
from ._columns import JHP_COLUMNS, JHP_PARAMS, JHP_SOURCE
from ._result import BenchResult

__all__ = ["drop_paired_csv_rows", "read_jhp_csv", "read_jhp_markdown"]

def _num(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(text)
        return value
    except ValueError:
        raise HloscopeError(f"{where}: {what} is {text!r}, not a finite number",
                            hint="is this a jax-hpc-profiler CSV (19 or 20 columns: "
                                 "function, precision, x, y, z, px, py, backend, nodes, "
                                 "jit_time, ...)?") from None


# What jax-hpc-profiler writes where it has no figure: its Timer(compile_info=False) and its
# NumpyTimer leave the sizes (and flops) "N/A".
_MISSING = frozenset({"N/A", "NA", "n/a", ""})


def _num_or_missing(text: str, what: str, where: str) -> float | None:
    """A figure, or None where jax-hpc-profiler wrote that it has none (``N/A``)."""
    return None if text.strip() in _MISSING else _num(text, what, where)


def _param(key: str, v: str) -> object:
    if key in ("X", "Y", "Z", "PX", "PY", "Nodes"):
        try:
            return int(float(v))
        except (ValueError, OverflowError):
            return v
    return v


def read_jhp_csv(text: str, *, path: str = "<csv>") -> list[BenchResult]:
    """One `BenchResult` (summary figures only) per row."""
    out: list[BenchResult] = []
    for n, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not "".join(row).strip():
            continue
        if row[0].strip() == "function":  # the header its concat writes
            continue
        where = f"{path}:{n}"
        if len(row) not in (19, 20):
            raise HloscopeError(f"{where}: {len(row)} columns; a jax-hpc-profiler CSV row has "
                                "19 or 20", hint="check the file is not cut short or mixed "
                                                 "with another format")
        vals = dict(zip(JHP_COLUMNS, (c.strip() for c in row)))
        ms = {k: _num(vals[k], k, where) / 1e3 for k in ("jit_time", "min_time", "max_time",
                                                           "mean_time", "std_div", "last_time")}
        sizes = {k2: None if v is None else int(v) for k, k2 in (
            ("generated_code", "generated_code"), ("argument_size", "argument"),
            ("output_size", "output"), ("temp_size", "temporary"))
            for v in (_num_or_missing(vals[k], k, where),)}
        params = {k2: _param(k2, vals[k]) for k, k2 in JHP_PARAMS}
        meta: dict[str, object] = {"file": path, "line": n}
        if "flops" in vals and vals["flops"] not in _MISSING:
            meta["flops"] = _num(vals["flops"], "flops", where)
        out.append(BenchResult(
            name=str(params["Function"]), params=params, timings={"jit": ms["jit_time"]},
            sizes=sizes, metadata=meta, source=JHP_SOURCE,
            summary={"min": ms["min_time"], "max": ms["max_time"], "mean": ms["mean_time"],
                     "std": ms["std_div"], "last": ms["last_time"]}))
    return out


_ROW = re.compile(r"^\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$")
_SIZE = re.compile(r"^([\d.]+)\s*(B|KB|MB|GB|TB)$")


def _size(text: str) -> int | None:
    m = _SIZE.match(text.strip())
    if not m:
        return None
    scale = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}[m.group(2)]
    return round(float(m.group(1)) * scale)


def read_jhp_markdown(text: str, *, path: str = "<markdown>") -> BenchResult:
    """A jax-hpc-profiler Markdown report: parameters, figures, every iteration."""
    section = ""
    tables: dict[str, list[tuple[str, str]]] = {}
    code: dict[str, list[str]] = {}
    fence = None
    for line in text.splitlines():
        if fence is not None:
            if line.startswith(fence):
                fence = None
            else:
                code.setdefault(section, []).append(line)
            continue
        if line.startswith("```"):
            fence = "```"
            continue
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        m = _ROW.match(line)
        if m and not set(m.group(1)) <= set("-: "):
            tables.setdefault(section, []).append((m.group(1), m.group(2)))
    params_rows = tables.get("Parameters", [])[1:]  # skip the header row
    prof = dict(tables.get("Profiling Data", [])[1:])
    runs = tables.get("Iteration Runs", [])[1:]
    if not params_rows or not prof:
        raise HloscopeError(f"{path}: no 'Parameters' and 'Profiling Data' tables",
                            hint="pass a report written by jax-hpc-profiler's Timer.report")
    mapping = dict((k2.lower(), k2) for _, k2 in JHP_PARAMS)
    params = {mapping.get(k.lower(), k): _param(mapping.get(k.lower(), k), v)
              for k, v in params_rows}
    times: list[float] = []
    for label, v in runs:
        times.append(_num(v, label, path) / 1e3)
    first = times[0] if times else None
    sizes = {k2: _size(prof.get(k, "")) for k, k2 in (
        ("Generated Code", "generated_code"), ("Argument Size", "argument"),
        ("Output Size", "output"), ("Temporary Size", "temporary"))}
    timings = {"jit": _num(prof["JIT Time"], "JIT Time", path) / 1e3} if "JIT Time" in prof \
        else {}
    # The file's own statistics, as written (over every run, Run 0 included): what its CSV
    # row of the same measurement holds, and what its users have been reading.
    file_stats = {k: _num(prof[label], label, path) / 1e3 for k, label in (
        ("min", "Min Time"), ("max", "Max Time"), ("mean", "Mean Time"), ("std", "Std Time"))
        if prof.get(label, "").strip() not in _MISSING}
    result = BenchResult(name=str(params.get("Function", "?")), params=params,
                         times=times[1:], first_run=first, timings=timings, sizes=sizes,
                         metadata={"file": path, "file_stats": file_stats}, source=JHP_SOURCE)
    if len(times) > 2:
        import statistics

        med = statistics.median(times[1:])
        if med > 0:
            result.metadata["run0_over_median"] = round(times[0] / med, 3)
    if code:
        from .._jax._inspect import Report

        def block(name: str) -> str:
            return "\n".join(code.get(name, [])) + ("\n" if code.get(name) else "")

        result.report = Report(name=result.name, hlo_after=block("Compiled Code"),
                               stablehlo=block("Lowered Code"), jaxpr=block("JAXPR"))
    return result


def drop_paired_csv_rows(results: list[BenchResult]) -> list[BenchResult]:
    """Leave out the jax-hpc-profiler CSV rows that are the same measurement as one of its
    Markdown reports among `results`: its default layout writes both (the report in a
    folder beside the CSV), and pooling them would count one measurement twice.  A row
    pairs with a report of the same parameters whose written min, max and mean it
    repeats; the report is kept (it has every run)."""
    reports = [r for r in results if r.source == JHP_SOURCE and "file_stats" in r.metadata]
    if not reports:
        return results

    def same(a: float, b: float) -> bool:
        # The CSV rounds to 4 decimals of a millisecond (``:.4f``); the report keeps
        # every digit.  Seconds here: half a unit of the CSV's last digit is 5e-8 s.
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=5.1e-8)

    def paired(row: BenchResult) -> bool:
        for rep in reports:
            fs = rep.metadata["file_stats"]
            if rep.params == row.params and all(
                    k in fs and k in row.summary and same(fs[k], row.summary[k])
                    for k in ("min", "max", "mean")):
                return True
        return False

    return [r for r in results if not (r.source == JHP_SOURCE and "file_stats" not in
                                       r.metadata and r.summary and paired(r))]
