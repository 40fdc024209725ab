"""Comparing variants of a program, sweeping a parameter, and virtual CPU devices.

`compare` puts several reports in one table (kernels, arrays between kernels,
temp bytes, peak, flops, compile time); `diff` says what changed between two
variants of a function (`diff_modules` on their optimized modules); `sweep`
inspects a function for each value of one static parameter, and its `plot`
draws a figure against the parameter, hloscope's and XLA's side by side (seed
004's "temporary memory vs n" for its FFT variants); `use_cpu_devices` sets up N
virtual CPU devices, which must happen before JAX starts its backends.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .._analysis._diff import ModuleDiff, diff_modules
from .._errors import HloscopeError
from .._hlo._module import Module
from .._repr import clip
from ._inspect import Report, inspect
from ._quiet import jax_started

__all__ = ["Comparison", "Sweep", "compare", "diff", "plot_sweeps", "sweep", "use_cpu_devices"]

COLUMNS = ("kernels", "arrays between kernels", "temp bytes (hloscope)", "temp bytes (XLA)",
           "peak bytes", "flops", "compile s")


def _row(r: Report) -> tuple[Any, ...]:
    ma = r.memory_analysis or {}
    return (len(r.kernels.kernels), len(r.kernels.temporaries), r.memory.temp_estimate_bytes,
            ma.get("temp_size_in_bytes"), r.memory.peak_bytes,
            sum(k.flops for k in r.kernels.kernels), r.timings.get("compile"))


@dataclass(frozen=True, slots=True)
class Comparison:
    """Reports side by side; `rows` are (name, *COLUMNS)."""

    reports: dict[str, Report]

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        return [(name, *_row(r)) for name, r in self.reports.items()]

    def table(self) -> str:
        from .._render._text import table

        def cell(v: Any) -> str:
            if isinstance(v, float):
                return f"{v:.3f}"
            return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)

        return table(["variant", *COLUMNS], [[cell(c) for c in row] for row in self.rows],
                     right=tuple(range(1, len(COLUMNS) + 1))) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"columns": ["variant", *COLUMNS], "rows": [list(r) for r in self.rows]}

    def _repr_html_(self) -> str:
        import html

        head = "".join(f"<th>{html.escape(c)}</th>" for c in ("variant", *COLUMNS))
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row)
                       + "</tr>" for row in self.rows)
        return f"<table><tr>{head}</tr>{body}</table>"

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return clip(f"Comparison({len(self.reports)} variant(s): "
                    f"{', '.join(self.reports)}; print() it for the table)")


def compare(variants: Mapping[str, Any] | Iterable[Report], *, target: str | None = None,
            mesh: Any = None, shard: Any = None) -> Comparison:
    """`{"name": (fn, args) or (fn, args, kwargs) or Report}`, or a list of reports.
    `target`, `mesh` and `shard` (see `inspect`) compile every variant that does not name
    its own for that GPU or TPU."""
    reports: dict[str, Report] = {}
    items = variants.items() if isinstance(variants, Mapping) else (
        (r.name, r) for r in variants)
    for name, v in items:
        if isinstance(v, Report):
            reports[str(name)] = v
        elif isinstance(v, tuple) and len(v) in (2, 3) and callable(v[0]):
            kwargs = dict(v[2]) if len(v) == 3 else {}
            if target is not None and "target" not in kwargs:
                kwargs.update(target=target, mesh=mesh, shard=shard)
            reports[str(name)] = inspect(v[0], *v[1], **kwargs)
        else:
            raise HloscopeError(f"cannot compare {name!r}: give a Report or (fn, args[, kwargs])")
    return Comparison(reports)


def diff(a: Any, b: Any, *args: Any, **kwargs: Any) -> ModuleDiff:
    """What changed between two variants of a program: ``hloscope.diff(attn, attn_f32, q,
    k, v)`` compiles both functions with `inspect` (`args` and `kwargs` are `inspect`'s,
    the same for both) and compares their optimized modules, with every memory figure
    (XLA's `memory_analysis()` fields among them) side by side.  Also takes two `Report`s
    or two `Module`s (then no other argument).  See `diff_modules`."""
    def side(x: Any) -> Report | Module:
        if isinstance(x, (Report, Module)):
            if args or kwargs:
                raise HloscopeError("diff takes arguments only for two functions",
                                    hint="give two functions and their arguments, or two "
                                         "Reports or Modules alone")
            return x
        if callable(x):
            return inspect(x, *args, **kwargs)
        raise HloscopeError(f"cannot diff a {type(x).__name__}: give two functions, two "
                            "Reports or two Modules")

    ra, rb = side(a), side(b)
    if isinstance(ra, Report) and isinstance(rb, Report):
        d = diff_modules(ra.module, rb.module, memory=(ra.memory, rb.memory))
    else:
        d = diff_modules(ra.module if isinstance(ra, Report) else ra,
                         rb.module if isinstance(rb, Report) else rb)
    if d.a.file == d.b.file and callable(a) and callable(b):
        # two functions of one name (train_step in two files): each side by its file
        d = replace(d, a=replace(d.a, file=_where(a)), b=replace(d.b, file=_where(b)))
    return d


def _where(fn: Any) -> str:
    """``path/to/file.py:name`` for a function (its path relative to here when below)."""
    import inspect as pyinspect

    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    try:
        path = pyinspect.getsourcefile(pyinspect.unwrap(fn)) or "?"
    except TypeError:
        return f"<{name}>"
    rel = os.path.relpath(path)
    return f"{rel if not rel.startswith('..') else path}:{name}"


@dataclass(frozen=True, slots=True)
class Sweep:
    """Reports of one function for each value of a parameter."""

    name: str
    parameter: str
    values: tuple[Any, ...]
    reports: tuple[Report, ...]

    def figure(self, what: str = "temp") -> list[int | None]:
        """``temp`` (hloscope's estimate), ``xla_temp`` (memory_analysis), ``peak``,
        ``kernels``, or any memory_analysis field name."""
        out: list[int | None] = []
        for r in self.reports:
            ma = r.memory_analysis or {}
            if what == "temp":
                out.append(r.memory.temp_estimate_bytes)
            elif what == "xla_temp":
                out.append(ma.get("temp_size_in_bytes"))
            elif what == "peak":
                out.append(r.memory.peak_bytes)
            elif what == "kernels":
                out.append(len(r.kernels.kernels))
            else:
                out.append(ma.get(what))
        return out

    def plot(self, path: str, what: str = "temp") -> str:
        return plot_sweeps({self.name: self}, path, what)

    def __repr__(self) -> str:
        shown = ", ".join(repr(v) for v in self.values[:6]) + (
            ", ..." if len(self.values) > 6 else "")
        return clip(f"Sweep({self.name} over {self.parameter} = {shown}: "
                    f"{len(self.reports)} report(s); print() it for the table)")

    def __str__(self) -> str:
        """One row per value: kernels, hloscope's and XLA's temp, the peak, compile time."""
        return Comparison({f"{self.parameter}={v!r}": r
                           for v, r in zip(self.values, self.reports)}).table()


def sweep(fn: Any, *args: Any, target: str | None = None, mesh: Any = None, shard: Any = None,
          **params: Iterable[Any]) -> Sweep:
    """`inspect(fn, *args, name=value)` for each value of one parameter (a static
    keyword argument of `fn`): ``hloscope.sweep(f, x, n=range(1, 10))``; with `target`
    (and `mesh`, `shard`: see `inspect`) for that GPU or TPU."""
    if len(params) != 1:
        raise HloscopeError("sweep takes exactly one parameter to vary, as name=values",
                            hint="for example hloscope.sweep(f, x, n=range(1, 10))")
    (name, values), = params.items()
    values = tuple(values)
    on = {"target": target, "mesh": mesh, "shard": shard} if target is not None else {}
    reports = tuple(inspect(fn, *args, static_argnames=(name,), **on, **{name: v})
                    for v in values)
    return Sweep(getattr(fn, "__name__", "f"), name, values, reports)


def plot_sweeps(sweeps: Mapping[str, Sweep], path: str, what: str = "temp") -> str:
    """Draw `what` against the swept parameter for each sweep (hloscope's figure as a solid
    line, XLA's as dots where it has one) to a .png or .svg file."""
    from .._render._plot import _pyplot, plot_path, save_figure

    ext = plot_path(path)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    try:
        for i, (label, s) in enumerate(sweeps.items()):
            ys = [(y or 0) / 1e6 for y in s.figure(what)]
            line, = ax.plot(s.values, ys, marker="o", label=f"{label} (hloscope)",
                            ls="dashed" if i == 2 else "solid")
            if what == "temp":
                xs = [(y or 0) / 1e6 for y in s.figure("xla_temp")]
                ax.plot(s.values, xs, "x", color=line.get_color(), label=f"{label} (XLA)")
        first = next(iter(sweeps.values()))
        ax.set_xlabel(first.parameter)
        ax.set_ylabel({"temp": "temporary memory [MB]", "peak": "peak memory [MB]"}.get(
            what, what))
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        save_figure(fig, path, ext)
    finally:
        plt.close(fig)
    return path


def use_cpu_devices(n: int) -> None:
    """Give JAX `n` virtual CPU devices (to try shardings without hardware).  Must be
    called before JAX starts its backends; raises a clear error when it is too late."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise HloscopeError(f"{n!r} CPU devices: a program runs on at least one",
                            hint="ask for 1 or more devices (--devices 8 for a mesh of 8)")
    if jax_started():
        import jax

        have = jax.device_count()
        if have == n:
            return
        raise HloscopeError(
            f"JAX has already started with {have} device(s); it is too late to ask for {n}",
            hint="call hloscope.use_cpu_devices(n) before any JAX computation (first thing "
                 "in the notebook or script), or set XLA_FLAGS="
                 f"--xla_force_host_platform_device_count={n} before starting Python")
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    flags.append(f"--xla_force_host_platform_device_count={n}")
    os.environ["XLA_FLAGS"] = " ".join(flags)
