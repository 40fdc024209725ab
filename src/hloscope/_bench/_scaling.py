"""Strong and weak scaling from many benchmark results.

Results are grouped by function, backend, precision and decomposition (slab:
a 1-D device grid; pencil: 2-D), then by problem size: the global size for
strong scaling, the size per device for weak scaling.  Results measured at
the same point (same group, size, device count and grid) are pooled: their
raw run times are put together and the point's time is the median of all of
them, not the last file's figure.  Results that carry only summary figures
(jax-hpc-profiler CSV rows) are pooled by their means.  Where several grids
were measured at one device count the fastest is kept and named.

Files that compare implementations (jax-hpc-profiler's way: one CSV per
method, often under one function name) keep a series per method, named by
the file's stem, wherever one function was measured in several such files;
`pool_methods` puts them together.

Parallel efficiency: strong, T(N0)·N0 / (T(N)·N); weak, T(N0) / T(N), N0 the
smallest device count of the series.  The ideal time: T(N0)·N0/N (strong),
T(N0) (weak).
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

__all__ = ["ScalingPoint", "ScalingSeries", "scaling"]


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

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


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

    @property
    def label(self) -> str:
        what = "size" if self.mode == "strong" else "size per device"
        fn = f"{self.function} ({self.method})" if self.method else self.function
        parts = [fn, self.backend, self.precision, self.decomposition]
        return " ".join(p for p in parts if p) + (f", {what} {self.size:,}" if self.size else "")

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "label": self.label, "function": self.function,
                "backend": self.backend, "precision": self.precision,
                "decomposition": self.decomposition, "size": self.size,
                "method": self.method or None, "points": [p.to_dict() for p in self.points]}


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


def _grid(r: BenchResult) -> tuple[str, str]:
    px, py = r.params.get("PX"), r.params.get("PY")
    try:
        a, b = int(px), int(py)
    except (TypeError, ValueError):
        return "", ""
    kind = "slab" if a == 1 or b == 1 else "pencil"
    return f"{a}x{b}", (kind if a * b > 1 else "")


def _pool(rs: list[BenchResult]) -> tuple[float, float, float, str, int]:
    raw = [x for r in rs for x in r.times]
    if raw and all(r.times for r in rs):
        lo, hi = median_ci(raw)
        return statistics.median(raw), lo, hi, "median", len(raw)
    means = [r.stats.get("mean") for r in rs if r.stats.get("mean") is not None]
    if not means:
        raise HloscopeError(f"{rs[0].name}: a result with no times to plot",
                            hint="check the result files were written completely")
    lows = [r.stats.get("min", m) for r, m in zip(rs, means)]
    highs = [r.stats.get("max", m) for r, m in zip(rs, means)]
    return statistics.fmean(means), min(lows), max(highs), "mean", len(means)


def _csv_method(r: BenchResult) -> str:
    """The method a jax-hpc-profiler CSV row measured: its file's stem (``implA.csv``)."""
    f = r.metadata.get("file")
    if r.source != "jax-hpc-profiler" or "line" not in r.metadata or not isinstance(f, str):
        return ""
    return os.path.splitext(os.path.basename(f))[0]


def scaling(results: list[BenchResult], mode: str = "strong", *,
            by_grid: bool = False, pool_methods: bool = False) -> list[ScalingSeries]:
    """The strong or weak scaling series in `results` (see the module docstring).  By
    default each device count keeps its fastest grid; with `by_grid`, slab and pencil
    grids make separate series (each starting from the one-device point, if any).  A
    function measured in several jax-hpc-profiler CSV files gets a series per file
    (method), unless `pool_methods`."""
    if mode not in ("strong", "weak"):
        raise HloscopeError(f"unknown scaling mode {mode!r}", hint="use 'strong' or 'weak'")
    methods: dict[str, set[str]] = {}
    for r in results:
        methods.setdefault(str(r.params.get("Function", r.name)), set()).add(_csv_method(r))
    points: dict[tuple[Any, ...], list[BenchResult]] = {}
    for r in results:
        devices = r.devices
        if not devices:
            raise HloscopeError(f"{r.name}: the device count is unknown",
                                hint="results need a device count (hloscope records it; "
                                     "jax-hpc-profiler rows give PX and PY)")
        grid, decomp = _grid(r)
        size = _size(r)
        fixed = size if mode == "strong" else size // devices
        fn = str(r.params.get("Function", r.name))
        method = "" if pool_methods or len(methods[fn] - {""}) < 2 else _csv_method(r)
        base = (fn, method, str(r.params.get("Backend", "")), str(r.params.get("Precision", "")))
        kinds = [decomp if by_grid else ""]
        if by_grid and not decomp:  # the one-device point starts every grid's series
            kinds = sorted({_grid(x)[1] for x in results} - {""}) or [""]
        for kind in kinds:
            points.setdefault(((*base, kind, fixed), devices, grid, size), []).append(r)
    series: dict[tuple[Any, ...], dict[int, ScalingPoint]] = {}
    for (group, devices, grid, size), rs in sorted(points.items(), key=lambda kv: str(kv[0])):
        t, lo, hi, metric, runs = _pool(rs)
        best = series.setdefault(group, {}).get(devices)
        if best is None or t < best.time:
            series[group][devices] = ScalingPoint(devices, size, grid, t, lo, hi, metric, runs,
                                                  len(rs), 0.0, 0.0)
    out: list[ScalingSeries] = []
    for group, by_devices in sorted(series.items(), key=lambda kv: str(kv[0])):
        pts = [by_devices[n] for n in sorted(by_devices)]
        n0, t0 = pts[0].devices, pts[0].time
        done = []
        for p in pts:
            if mode == "strong":
                eff, ideal = (t0 * n0) / (p.time * p.devices), t0 * n0 / p.devices
            else:
                eff, ideal = t0 / p.time, t0
            done.append(ScalingPoint(p.devices, p.size, p.grid, p.time, p.low, p.high,
                                     p.metric, p.runs, p.results, eff, ideal))
        fn, method, backend, precision, decomp, fixed = group
        out.append(ScalingSeries(mode, fn, backend, precision, decomp, fixed, tuple(done),
                                 method))
    return out
