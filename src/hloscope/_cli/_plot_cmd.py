"""`hloscope plot`: strong and weak scaling from many benchmark results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from .. import _errors
from ._common import WIDE_HELP, command, echo, fail, text_width


@command("plot")
def plot_cmd(
    results: list[Path] = typer.Argument(..., metavar="RESULTS", help="Result files or "
                                         "folders: hloscope's .json/.csv, jax-hpc-profiler's "
                                         ".csv/.md."),
    strong: bool = typer.Option(False, "--strong", help="Time against devices at a fixed "
                                "problem size."),
    weak: bool = typer.Option(False, "--weak", help="Time against devices at a fixed size "
                              "per device."),
    efficiency: bool = typer.Option(False, "--efficiency", help="Add a panel of parallel "
                                    "efficiency."),
    ideal: bool = typer.Option(False, "--ideal", help="Draw the ideal lines."),
    by_grid: bool = typer.Option(False, "--by-grid", help="Separate series for slab and "
                                 "pencil grids (default: the fastest grid at each count)."),
    pool_methods: bool = typer.Option(False, "--pool-methods", help="Pool a function's "
                                      "results from several jax-hpc-profiler CSV files "
                                      "(default: a series per file, one method each)."),
    output: Path | None = typer.Option(None, "-o", "--output", metavar="FILE",
                                       help="Write the plot (.png or .svg)."),
    as_json: bool = typer.Option(False, "--json", help="Print the series as JSON."),
    wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
) -> None:
    """Strong or weak scaling from many benchmark results, as a table and a plot.

    Repeated runs of one point are pooled, never dropped; efficiency and ideal
    lines on request.
    """
    from .._bench._files import load_results
    from .._bench._plot import plot_scaling, scaling_table
    from .._bench._scaling import scaling

    try:
        if strong == weak:
            raise _errors.HloscopeError("say --strong or --weak (one of them)")
        series = scaling(load_results([str(r) for r in results]),
                         "strong" if strong else "weak", by_grid=by_grid,
                         pool_methods=pool_methods)
        if output is not None:
            plot_scaling(series, str(output), efficiency=efficiency, ideal=ideal)
    except _errors.HloscopeError as e:
        fail(e)
    except OSError as e:
        fail(_errors.HloscopeError(f"cannot write: {e.strerror} ({e.filename})"))
    if as_json:
        sys.stdout.write(json.dumps({"schema": "hloscope.scaling/1",
                                     "series": [s.to_dict() for s in series]},
                                    indent=1, sort_keys=True) + "\n")
        return
    width = text_width(wide)
    echo(scaling_table(series, width=width)
         + (f"wrote {output}\n" if output is not None else ""), width)
