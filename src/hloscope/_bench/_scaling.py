"""Strong and weak scaling, and time against data size, from many benchmark results.

Results are grouped by function, backend, precision and decomposition
(jax-hpc-profiler's names: ``slab_yz`` for a PX x 1 grid, ``slab_xy`` for 1 x PY,
``pencils`` for both above 1), then by problem size: the global size for
strong scaling, the size per device for weak scaling; against data size
(`mode="size"`), by device count, the size along x.  Results measured at
the same point (same group, size, device count and grid) are pooled: their
raw run times are put together and the point's time is the median of all of
them, not the last file's figure.  Results that carry only summary figures
(jax-hpc-profiler CSV rows) are pooled by their means.  Where several grids
were measured at one device count the fastest is kept and named.

Files that compare implementations (jax-hpc-profiler's way: one CSV per
method, often under one function name) keep a series per method, named by
the file's stem, wherever one function was measured in several such files;
`pool_methods` puts them together.

The statistic of a point (`stat`): by default the median of the pooled raw
runs after the first (the mean for summary-only results); or the min, mean or
max of every run, the first (jax-hpc-profiler's Run 0) included, as a
jax-hpc-profiler CSV row's figures are, whatever the file; or ``jit``, the
time to the first result (jax-hpc-profiler's JIT time: trace, lower, compile
and the first run).

Parallel efficiency: strong, T(N0)·N0 / (T(N)·N); weak, T(N0) / T(N), N0 the
smallest device count of the series.  The ideal time: T(N0)·N0/N (strong),
T(N0) (weak).  A strong or weak series needs two device counts: one-point
series are left out (`scaling` says how many in `dropped`), and when none is
left the error says what the results hold.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import HloscopeError
from ._stats import median_ci

if TYPE_CHECKING:
    from ._result import BenchResult

__all__ = ["MODES", "STATS", "STRATEGIES", "ScalingPoint", "ScalingSeries", "decomposition",
           "scaling", "size_label"]

MODES = ("strong", "weak", "size")
STATS = ("median", "min", "mean", "max", "jit")
STRATEGIES = ("fastest", "all", "slab_yz", "slab_xy", "pencils")


@dataclass(frozen=True, slots=True)
class ScalingPoint:
    devices: int
    size: int
    grid: str
    time: float
    low: float
    high: float
    metric: str         # "median" (pooled raw runs) or "mean" (summary figures only)
    runs: int
    results: int        # how many results were pooled into this point
    efficiency: float
    ideal: float
    label: str = ""     # the size as written: 128³, 128x64x32 ("" when unknown)
    memory: tuple[tuple[str, int | None], ...] = ()  # XLA's sizes, bytes

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["memory"] = dict(self.memory)
        return d


@dataclass(frozen=True, slots=True)
class ScalingSeries:
    mode: str           # "strong" or "weak"
    function: str
    backend: str
    precision: str
    decomposition: str
    size: int           # the global size (strong) or the size per device (weak)
    points: tuple[ScalingPoint, ...]
    method: str = ""    # the file a method's results came from, when several compete
    stat: str = "median"
    devices: int = 0    # mode "size": the device count of the series

    @property
    def label(self) -> str:
        fn = f"{self.function} ({self.method})" if self.method else self.function
        parts = [fn, self.backend, self.precision, self.decomposition]
        head = " ".join(p for p in parts if p)
        if self.mode == "size":
            return head + f", {self.devices} device{'s' if self.devices != 1 else ''}"
        if self.mode == "strong" and self.points and self.points[0].label:
            return head + f", size {self.points[0].label}"
        what = "size" if self.mode == "strong" else "size per device"
        return head + (f", {what} {self.size:,}" if self.size else "")

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "label": self.label, "function": self.function,
                "backend": self.backend, "precision": self.precision,
                "decomposition": self.decomposition, "size": self.size,
                "method": self.method or None, "stat": self.stat,
                "devices": self.devices or None, "points": [p.to_dict() for p in self.points]}


def _size(r: BenchResult) -> int:
    dims = [r.params.get(k) for k in ("X", "Y", "Z")]
    dims = [int(d) for d in dims if isinstance(d, (int, float)) or str(d).isdigit()]
    if dims:
        n = 1
        for d in dims:
            n *= d
        return n
    for k in ("size", "Size", "N", "n"):
        if k in r.params:
            try:
                return int(r.params[k])
            except (TypeError, ValueError):
                pass
    return 0


def _dims(r: BenchResult) -> list[int]:
    dims = [r.params.get(k) for k in ("X", "Y", "Z")]
    return [int(d) for d in dims if isinstance(d, (int, float)) or str(d).isdigit()]


def size_label(r: BenchResult) -> str:
    """The size as a person writes it: 128³ when cubic, else 128x64x32."""
    dims = _dims(r)
    if len(dims) == 3 and len(set(dims)) == 1:
        return f"{dims[0]}³"
    return "x".join(map(str, dims)) if dims else (str(_size(r)) if _size(r) else "")


def decomposition(r: BenchResult) -> str:
    """jax-hpc-profiler's name for the grid: ``slab_yz`` (PX x 1), ``slab_xy`` (1 x PY),
    ``pencils`` (both above 1); "" for one device or no grid."""
    try:
        a, b = int(r.params.get("PX")), int(r.params.get("PY"))
    except (TypeError, ValueError):
        return ""
    if a * b <= 1:
        return ""
    return "slab_yz" if b == 1 else "slab_xy" if a == 1 else "pencils"


def _grid(r: BenchResult) -> tuple[str, str]:
    try:
        a, b = int(r.params.get("PX")), int(r.params.get("PY"))
    except (TypeError, ValueError):
        return "", ""
    return f"{a}x{b}", decomposition(r)


def _jit(r: BenchResult) -> float | None:
    t = r.timings
    if "jit" in t:
        return t["jit"]
    phases = [t[k] for k in ("trace", "lower", "compile") if k in t]
    return sum(phases) + (r.first_run or 0.0) if phases else None


def _pool(rs: list[BenchResult], stat: str = "median") -> tuple[float, float, float, str, int]:
    """A point's (time, low, high, metric, values) from its results."""
    if stat == "jit":
        jits = [j for j in map(_jit, rs) if j is not None]
        if not jits:
            raise HloscopeError(f"{rs[0].name}: no JIT time to plot",
                                hint="these results have no compile timings; use --stat "
                                     "median, min, mean or max")
        return statistics.median(jits), min(jits), max(jits), "jit", len(jits)
    if stat == "median":
        raw = [x for r in rs for x in r.times]
        if raw and all(r.times for r in rs):
            lo, hi = median_ci(raw)
            return statistics.median(raw), lo, hi, "median", len(raw)
        stat = "mean"
    # min, mean and max are over every run, the first (Run 0) included, whatever the
    # file: a jax-hpc-profiler CSV row's figures include it and cannot be taken apart, so
    # its Markdown report and hloscope's results are read the same way.
    pick = {"min": min, "max": max, "mean": statistics.fmean}[stat]
    if all(r.times for r in rs):
        raw = [x for r in rs for x in _every_run(r)]
        return pick(raw), min(raw), max(raw), stat, len(raw)
    values, lows, highs = [], [], []
    for r in rs:
        runs = _every_run(r)
        if runs:
            values.append(pick(runs))
            lows.append(min(runs))
            highs.append(max(runs))
        elif r.stats.get(stat) is not None:
            values.append(r.stats[stat])
            lows.append(r.stats.get("min", values[-1]))
            highs.append(r.stats.get("max", values[-1]))
    if not values:
        raise HloscopeError(f"{rs[0].name}: a result with no times to plot",
                            hint="check the result files were written completely")
    return statistics.fmean(values), min(lows), max(highs), stat, len(values)


def _every_run(r: BenchResult) -> list[float]:
    """Every run of `r`, the first included; empty for summary figures only."""
    if not r.times:
        return []
    return ([r.first_run] if r.first_run is not None else []) + list(r.times)


def _csv_method(r: BenchResult) -> str:
    """The method a jax-hpc-profiler CSV row measured: its file's stem (``implA.csv``)."""
    f = r.metadata.get("file")
    if r.source != "jax-hpc-profiler" or "line" not in r.metadata or not isinstance(f, str):
        return ""
    return os.path.splitext(os.path.basename(f))[0]


def scaling(results: list[BenchResult], mode: str = "strong", *,
            by_grid: bool = False, pool_methods: bool = False, stat: str = "median",
            strategy: str = "fastest", keep_single: bool = False) -> list[ScalingSeries]:
    """The strong or weak scaling series in `results`, or time against data size (`mode`
    ``"size"``: a series per device count); see the module docstring.  `strategy`
    ``fastest`` keeps each point's fastest grid; ``all`` (or `by_grid`) makes a series per
    decomposition (each starting from the one-device point, if any); ``slab_yz``,
    ``slab_xy`` or ``pencils`` keep that decomposition (and one device).  A function
    measured in several jax-hpc-profiler CSV files gets a series per file (method),
    unless `pool_methods`.  Strong and weak series of one point are left out unless
    `keep_single`."""
    if mode not in MODES:
        raise HloscopeError(f"unknown scaling mode {mode!r}",
                            hint="use 'strong', 'weak' or 'size'")
    if stat not in STATS:
        raise HloscopeError(f"unknown statistic {stat!r}", hint=f"use one of {', '.join(STATS)}")
    if strategy not in STRATEGIES:
        raise HloscopeError(f"unknown grid strategy {strategy!r}",
                            hint=f"use one of {', '.join(STRATEGIES)}")
    if by_grid:
        strategy = "all"
    if strategy not in ("fastest", "all"):
        kept = [r for r in results if decomposition(r) in ("", strategy)]
        if not any(decomposition(r) == strategy for r in kept):
            found = sorted({decomposition(r) for r in results} - {""}) or ["none"]
            raise HloscopeError(f"no {strategy} results (grids here: {', '.join(found)})",
                                hint="slab_yz is a PX x 1 grid, slab_xy 1 x PY, pencils "
                                     "both above 1")
        results = kept
    methods: dict[str, set[str]] = {}
    for r in results:
        methods.setdefault(str(r.params.get("Function", r.name)), set()).add(_csv_method(r))
    kinds_here = sorted({decomposition(x) for x in results} - {""})
    points: dict[tuple[Any, ...], list[BenchResult]] = {}
    for r in results:
        devices = r.devices
        if not devices:
            raise HloscopeError(f"{r.name}: the device count is unknown",
                                hint="results need a device count (hloscope records it; "
                                     "jax-hpc-profiler rows give PX and PY)")
        grid, decomp = _grid(r)
        size = _size(r)
        fn = str(r.params.get("Function", r.name))
        method = "" if pool_methods or len(methods[fn] - {""}) < 2 else _csv_method(r)
        base = (fn, method, str(r.params.get("Backend", "")), str(r.params.get("Precision", "")))
        kinds = [decomp if strategy == "all" else ""]
        if strategy == "all" and not decomp:  # the one-device point starts every series
            kinds = kinds_here or [""]
        for kind in kinds:
            if mode == "size":
                group, x = (*base, kind, devices), size
            else:
                group, x = (*base, kind, size if mode == "strong" else size // devices), devices
            points.setdefault((group, x, grid, size), []).append(r)
    series: dict[tuple[Any, ...], dict[int, tuple[ScalingPoint, list[BenchResult]]]] = {}
    for (group, x, grid, size), rs in sorted(points.items(), key=lambda kv: str(kv[0])):
        t, lo, hi, metric, runs = _pool(rs, stat)
        best = series.setdefault(group, {}).get(x)
        if best is None or t < best[0].time:
            memory = tuple((k, rs[0].sizes.get(k)) for k in
                           ("generated_code", "argument", "output", "temporary", "peak"))
            series[group][x] = (ScalingPoint(rs[0].devices or 0, size, grid, t, lo, hi,
                                             metric, runs, len(rs), 0.0, 0.0,
                                             size_label(rs[0]), memory), rs)
    out: list[ScalingSeries] = []
    for group, by_x in sorted(series.items(), key=lambda kv: kv[0]):
        pts = [by_x[x][0] for x in sorted(by_x)]
        fn, method, backend, precision, decomp, fixed = group
        if mode == "size":
            out.append(ScalingSeries(mode, fn, backend, precision, decomp, 0, tuple(pts),
                                     method, stat, fixed))
            continue
        n0, t0 = pts[0].devices, pts[0].time
        done = []
        for p in pts:
            if mode == "strong":
                eff, ideal = (t0 * n0) / (p.time * p.devices), t0 * n0 / p.devices
            else:
                eff, ideal = t0 / p.time, t0
            done.append(ScalingPoint(p.devices, p.size, p.grid, p.time, p.low, p.high,
                                     p.metric, p.runs, p.results, eff, ideal, p.label,
                                     p.memory))
        out.append(ScalingSeries(mode, fn, backend, precision, decomp, fixed, tuple(done),
                                 method, stat))
    if mode != "size" and not keep_single:
        many = [s for s in out if len(s.points) > 1]
        if out and not many:
            sizes = sorted({s.size for s in out})
            what = "size" if mode == "strong" else "size per device"
            raise HloscopeError(
                f"no {mode} scaling series: no {what} was measured at two device counts "
                f"({what}s here: {', '.join(f'{x:,}' for x in sizes[:8])}"
                f"{', ...' if len(sizes) > 8 else ''})",
                hint="measure one size on several device counts (strong), one size per "
                     "device (weak), or plot time against size (--size)")
        out = many
    return out
