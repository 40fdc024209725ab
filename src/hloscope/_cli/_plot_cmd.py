"""`hloscope plot`: strong and weak scaling, or time against data size, from many
benchmark results (hloscope's and jax-hpc-profiler's files)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from .. import _errors
from ._common import WIDE_HELP, command, echo, fail, text_width


def _figsize(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        w, h = (float(x) for x in text.lower().replace("x", ",").split(","))
    except ValueError:
        raise _errors.HloscopeError(f"--figsize {text!r}: not WIDTH,HEIGHT",
                                    hint="give inches, e.g. --figsize 10,6") from None
    if not (0 < w <= 100 and 0 < h <= 100):
        raise _errors.HloscopeError(f"--figsize {text!r}: out of range",
                                    hint="give inches between 0 and 100, e.g. 10,6")
    return w, h


def _memory(text: str | None) -> list[str]:
    if not text:
        return []
    from .._bench._plot import MEMORY_KINDS

    kinds = [k.strip() for k in text.split(",") if k.strip()]
    aliases = {"argument_size": "argument", "output_size": "output", "temp_size": "temporary",
               "temp": "temporary"}
    kinds = [aliases.get(k, k) for k in kinds]
    bad = [k for k in kinds if k not in MEMORY_KINDS]
    if bad:
        raise _errors.HloscopeError(f"--memory: unknown figure {bad[0]!r}",
                                    hint=f"use some of {', '.join(MEMORY_KINDS)}, "
                                         "separated by commas")
    return kinds


@command("plot")
def plot_cmd(
    results: list[Path] = typer.Argument(..., metavar="RESULTS", help="Result files or "
                                         "folders: hloscope's .json/.csv, jax-hpc-profiler's "
                                         ".csv/.md."),
    strong: bool = typer.Option(False, "--strong", help="Time against devices at a fixed "
                                "problem size."),
    weak: bool = typer.Option(False, "--weak", help="Time against devices at a fixed size "
                              "per device."),
    by_size: bool = typer.Option(False, "--size", help="Time against data size, a panel "
                                 "per device count."),
    stat: str = typer.Option("median", "--stat", metavar="STAT", help="What a point shows: "
                             "median (of the pooled runs; the default), min, mean, max, or "
                             "jit (trace, lower, compile and the first run)."),
    memory: str | None = typer.Option(None, "--memory", metavar="FIGURES", help="Plot XLA's "
                                      "memory figures instead of time, comma-separated: "
                                      "generated_code, argument, output, temporary, "
                                      "peak."),
    units: str | None = typer.Option(None, "--units", metavar="UNIT", help="Memory units: B, "
                                     "KB, MB, GB, KiB, MiB, GiB (default: a readable one)."),
    function: list[str] = typer.Option([], "--function", metavar="NAME", help="Keep only "
                                       "this function (repeat for several)."),
    precision: list[str] = typer.Option([], "--precision", metavar="P", help="Keep only this "
                                        "precision, e.g. float32 (repeat)."),
    only_size: list[str] = typer.Option([], "--only-size", metavar="SIZE", help="Keep only "
                                        "this data size: 128 (X) or 128x128x128 (repeat)."),
    only_devices: list[int] = typer.Option([], "--devices", metavar="N", help="Keep only "
                                           "this device count (repeat)."),
    backend: list[str] = typer.Option([], "--backend", metavar="NAME", help="Keep only this "
                                      "backend (repeat)."),
    grid: list[str] = typer.Option([], "--grid", metavar="PXxPY", help="Keep only this "
                                   "process grid, e.g. 2x4 (repeat)."),
    strategy: str = typer.Option("fastest", "--strategy", metavar="WHICH", help="Grids: "
                                 "fastest (at each point; the default), all (a series per "
                                 "decomposition), slab_yz (PX x 1), slab_xy (1 x PY), "
                                 "pencils."),
    efficiency: bool = typer.Option(False, "--efficiency", help="Add a panel of parallel "
                                    "efficiency."),
    ideal: bool = typer.Option(False, "--ideal", help="Draw the ideal lines."),
    by_grid: bool = typer.Option(False, "--by-grid", help="The same as --strategy all."),
    pool_methods: bool = typer.Option(False, "--pool-methods", help="Pool a function's "
                                      "results from several jax-hpc-profiler CSV files "
                                      "(default: a series per file, one method each)."),
    xscale: str | None = typer.Option(None, "--xscale", metavar="SCALE", help="linear, log "
                                      "or symlog (default: log base 2)."),
    yscale: str | None = typer.Option(None, "--yscale", metavar="SCALE", help="linear, log "
                                      "or symlog (default: log when values span over 10x)."),
    title: str | None = typer.Option(None, "--title", metavar="TEXT", help="The plot's "
                                     "title."),
    xlabel: str | None = typer.Option(None, "--xlabel", metavar="TEXT", help="The x axis "
                                      "label."),
    ylabel: str | None = typer.Option(None, "--ylabel", metavar="TEXT", help="The y axis "
                                      "label."),
    figsize: str | None = typer.Option(None, "--figsize", metavar="W,H", help="Figure size "
                                       "in inches, e.g. 10,6."),
    output: Path | None = typer.Option(None, "-o", "--output", metavar="FILE",
                                       help="Write the plot (.png or .svg)."),
    as_json: bool = typer.Option(False, "--json", help="Print the series as JSON."),
    wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
) -> None:
    """Strong or weak scaling, or time against data size, from many benchmark results,
    as a table and a plot.

    Repeated runs of one point are pooled, never dropped; filters, a choice of
    statistic and of grids, memory figures, efficiency and ideal lines on request.
    """
    from .._bench._files import load_results
    from .._bench._plot import plot_scaling, scaling_table
    from .._bench._scaling import scaling
    from .._bench._select import select

    dropped = 0
    notes: list[str] = []
    try:
        if strong + weak + by_size != 1:
            raise _errors.HloscopeError("say --strong, --weak or --size (one of them)")
        mode = "strong" if strong else "weak" if weak else "size"
        kinds = _memory(memory)
        size = _figsize(figsize)
        chosen = select(load_results([str(r) for r in results], notes=notes),
                        functions=function,
                        precisions=precision, sizes=only_size, devices=only_devices,
                        backends=backend, grids=grid)
        every = scaling(chosen, mode, by_grid=by_grid, pool_methods=pool_methods, stat=stat,
                        strategy=strategy, keep_single=True)
        series = scaling(chosen, mode, by_grid=by_grid, pool_methods=pool_methods,
                         stat=stat, strategy=strategy)
        dropped = len(every) - len(series)
        if output is not None:
            plot_scaling(series, str(output), efficiency=efficiency, ideal=ideal, title=title,
                         xlabel=xlabel, ylabel=ylabel, xscale=xscale, yscale=yscale,
                         figsize=size, memory=kinds, unit=units)
        text = scaling_table(series, width=text_width(wide), memory=kinds, unit=units)
    except _errors.HloscopeError as e:
        fail(e)
    except OSError as e:
        fail(_errors.HloscopeError(f"cannot write: {e.strerror} ({e.filename})"))
    if as_json:
        sys.stdout.write(json.dumps({"schema": "hloscope.scaling/1", "mode": mode,
                                     "stat": stat, "left_out_single_points": dropped,
                                     "notes": notes, "series": [s.to_dict() for s in series]},
                                    indent=1, sort_keys=True) + "\n")
        return
    width = text_width(wide)
    note = (f"(left out: {dropped} series with one device count, nothing to scale)\n"
            if dropped else "") + "".join(f"note: {n}\n" for n in notes)
    echo(text + note + (f"wrote {output}\n" if output is not None else ""), width)
