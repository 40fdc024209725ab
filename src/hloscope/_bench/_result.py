"""Benchmark results as plain data: what `hloscope.bench` measured, or what a
jax-hpc-profiler CSV or Markdown report says, in one shape.

A `BenchResult` holds the steady-state run times (seconds; with many
processes, the slowest rank's time per iteration), the first run apart, the
phases of compilation apart, XLA's sizes, the parameters (user-given and
read from the program), the checks of the one against the other, metadata,
and every rank's raw times.  It needs no JAX: results are saved as JSON or
CSV rows, loaded back, pooled and plotted on any machine.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from .._errors import HloscopeError
from .._repr import clip
from .._sources._saved import BENCH_SCHEMA
from ._stats import time_stats

__all__ = ["RESULT_SCHEMA", "BenchResult"]

RESULT_SCHEMA = BENCH_SCHEMA


@dataclass
class BenchResult:
    """One benchmark: a function at one set of parameters on one set of devices.

    Times are in seconds, sizes in bytes.  `times` are the steady-state runs (warm-ups
    and the first run excluded); with several processes they are the slowest rank's
    time per iteration and `ranks` keeps every rank's own series.  `summary` stands in
    for `times` when only summary figures are known (a jax-hpc-profiler CSV row).
    `report` is the `inspect` report of the program when it was measured here;
    `target_report` its report compiled for a target (``bench(..., target=)``), if asked.
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    first_run: float | None = None
    warmup: int = 0
    overhead: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int | None] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    ranks: list[list[float]] = field(default_factory=list)
    summary: dict[str, float] = field(default_factory=dict)
    source: str = "hloscope"
    report: Any = None
    target_report: Any = None

    # -- statistics ---------------------------------------------------------------------
    @property
    def stats(self) -> dict[str, Any]:
        """The statistics of `times` (see `time_stats`) plus the first run, the warm-up
        count and the harness overhead; from `summary` when there are no raw times."""
        s = time_stats(self.times) if self.times else {k: v for k, v in self.summary.items()}
        s.update({"first_run": self.first_run, "warmup": self.warmup,
                  "overhead_per_run": self.overhead})
        if len(self.ranks) > 1:
            n = min(len(r) for r in self.ranks)
            s["rank_medians"] = [statistics.median(r) for r in self.ranks]
            s["mean_over_ranks"] = [statistics.fmean(r[i] for r in self.ranks)
                                    for i in range(n)]
            s["slowest_rank"] = [max(range(len(self.ranks)), key=lambda k: self.ranks[k][i])
                                 for i in range(n)]
        return s

    @property
    def devices(self) -> int | None:
        d = self.metadata.get("device_count")
        if d:
            return int(d)
        px, py = self.params.get("PX"), self.params.get("PY")
        if px and py:
            return int(px) * int(py)
        return None

    def summary_line(self) -> str:
        """One line: median with its 95% CI, min, mean ± std, max, runs, first run."""
        s = self.stats
        ms = 1e3

        def f(x: float | None) -> str:
            return "?" if x is None else f"{x * ms:.4g}"

        if "median" not in s:
            return (f"{self.name}: mean {f(s.get('mean'))} ms +- {f(s.get('std'))}, min "
                    f"{f(s.get('min'))}, max {f(s.get('max'))} (summary figures only)")
        lo, hi = s["median_ci95"]
        line = (f"{self.name}: median {f(s['median'])} ms (95% CI {f(lo)}-{f(hi)}), min "
                f"{f(s['min'])}, mean {f(s['mean'])} +- {f(s['std'])}, max {f(s['max'])} over "
                f"{s['runs']} runs ({len(s['outliers'])} outliers)")
        if self.first_run is not None:
            line += f"; first run {f(self.first_run)} ms"
        if self.overhead is not None:
            line += f", harness overhead {self.overhead * 1e6:.2f} us/run"
        if len(self.ranks) > 1:
            line += f"; {len(self.ranks)} processes, slowest rank per iteration"
        if self.metadata.get("donated_arguments"):
            line += "; donated arguments copied fresh for each run, outside the timed region"
        return line

    # -- saving -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (schema ``hloscope.bench/1``, documented in docs/json.md)."""
        return {"schema": RESULT_SCHEMA, "name": self.name, "source": self.source,
                "params": self.params, "times": self.times, "first_run": self.first_run,
                "warmup": self.warmup, "overhead": self.overhead, "timings": self.timings,
                "sizes": self.sizes, "checks": self.checks, "metadata": self.metadata,
                "ranks": self.ranks, "summary": self.summary,
                "stats": {k: v for k, v in self.stats.items()
                          if k not in ("first_run", "warmup", "overhead_per_run")},
                "report": self.report.to_dict() if self.report is not None else None,
                "target_report": (self.target_report.to_dict()
                                  if self.target_report is not None else None)}

    def file_stem(self) -> str:
        """A file name for this result from its parameters (function, sizes, grid, ...)."""
        import re

        p = self.params
        parts = [str(p.get("Function", self.name))]
        dims = [str(p[k]) for k in ("X", "Y", "Z") if k in p]
        if dims:
            parts.append("x".join(dims))
        if "PX" in p and "PY" in p:
            parts.append(f"{p['PX']}x{p['PY']}")
        parts += [str(p[k]) for k in ("Backend", "Precision") if k in p]
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))[:120] or "bench"

    def save(self, path: str, *, all_ranks: bool = False) -> list[str]:
        """Write the result.  `path` ending in ``.md``, ``.json``, ``.html`` or ``.csv``
        writes that one file (a CSV is appended to); any other path is a folder that gets
        ``<stem>.md``, ``<stem>.json`` and ``<stem>.html`` and one more row in
        ``results.csv``.  With several processes only rank 0 writes (unless `all_ranks`);
        the others return an empty list.  Each file is written whole or not at all."""
        from ._output import save_result

        return save_result(self, path, all_ranks=all_ranks)

    def markdown(self) -> str:
        """The report in Markdown (jax-hpc-profiler's sections first)."""
        from ._output import result_markdown

        return result_markdown(self)

    def html(self) -> str:
        """The report as one self-contained HTML page, with plots of the runs."""
        from ._output import result_html

        return result_html(self)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.summary_line())}</pre>"

    def __repr__(self) -> str:
        return clip(f"BenchResult({self.summary_line()})")

    def __str__(self) -> str:
        return self.summary_line()

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, path: str = "<dict>") -> BenchResult:
        """A result from its JSON data, checked field by field (`HloSourceError` naming
        the file and field on anything hloscope bench never writes)."""
        from .._sources._saved import Fields, report_fields

        if not isinstance(d, dict) or d.get("schema") != RESULT_SCHEMA:
            got = d.get("schema") if isinstance(d, dict) else type(d).__name__
            raise HloscopeError(f"{path}: not a hloscope benchmark result (schema {got!r})",
                                hint=f"pass a file written by hloscope bench (schema "
                                     f"{RESULT_SCHEMA})")
        f = Fields(d, path, what="benchmark result")
        report = target_report = None
        if f.has("report") or f.has("target_report"):
            from .._jax._inspect import Report

            if f.has("report"):
                report = Report(**report_fields(d["report"], path))
            if f.has("target_report"):
                target_report = Report(**report_fields(d["target_report"], path))
        params = f.obj("params") or {}
        for k, v in params.items():
            if not isinstance(v, (str, int, float, bool)) and v is not None:
                raise Fields(params, path, what="benchmark result", where="params")._bad(
                    k, "a string or a number", v)
        return cls(name=f.text("name", default=None), params=dict(params),
                   times=f.times("times"), first_run=f.number("first_run", minimum=0),
                   warmup=f.integer("warmup"), overhead=f.number("overhead", minimum=0),
                   timings=f.numbers("timings", minimum=0) or {}, sizes=f.sizes("sizes"),
                   checks=f.objects("checks"), metadata=f.obj("metadata") or {},
                   ranks=f.time_lists("ranks"), summary=f.numbers("summary") or {},
                   source=f.text("source") or "hloscope", report=report,
                   target_report=target_report)
