"""`hloscope bench` (time a JAX function, write its report) and `hloscope plot`
(strong and weak scaling from many results)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer

from .. import _errors
from .._jax._user import check_call
from ._common import app, fail, fail_user
from ._targets import (array_args, call_inputs, load_target, require_jax, static_hint,
                       static_kwargs)


def _exit_now_if_distributed(code: int) -> None:
    """After an error on a multi-process run, leave at once: JAX's own shutdown would wait
    for the missing rank (its heartbeat timeout) and then abort."""
    if "jax" in sys.modules:
        try:
            import jax

            if jax.process_count() > 1:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        except Exception:  # noqa: BLE001
            pass


@app.command("bench")
def bench_cmd(
    target: str = typer.Argument(..., help="The function: FILE.py:FUNCTION or "
                                 "package.module:FUNCTION."),
    arg: list[str] = typer.Option([], "--arg", help="An argument's shape, e.g. f32[128,2] "
                                  "(zeros); repeat for each argument."),
    inputs: str | None = typer.Option(None, "--inputs", help="A call in the same file that "
                                      "returns the arguments, e.g. 'make_input(128)' (for "
                                      "sharded inputs)."),
    static: list[str] = typer.Option([], "--static", help="A static keyword argument, "
                                     "NAME=VALUE; repeat."),
    param: list[str] = typer.Option([], "--param", help="A benchmark parameter, NAME=VALUE "
                                    "(precision, x, y, z, px, py, backend, nodes, or any); "
                                    "checked against the program."),
    iterations: int = typer.Option(10, "--iterations", "-n", min=1, help="Timed runs."),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Discarded runs after the first."),
    min_time: float | None = typer.Option(None, "--min-time", help="Keep timing until this "
                                          "many seconds are measured."),
    devices: int | None = typer.Option(None, "--devices", help="Run on N virtual CPU devices."),
    distributed: bool = typer.Option(False, "--distributed", help="Call "
                                     "jax.distributed.initialize() first (cluster "
                                     "auto-detection or the options below)."),
    coordinator: str | None = typer.Option(None, "--coordinator", help="HOST:PORT of rank 0."),
    num_processes: int | None = typer.Option(None, "--num-processes"),
    process_id: int | None = typer.Option(None, "--process-id"),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds to wait for the other "
                                  "ranks before giving up."),
    output: Path | None = typer.Option(None, "-o", "--output", help="A folder (report .md, "
                                       ".json, .html and a row in results.csv) or one file "
                                       "(.md, .json, .html, .csv)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Time a JAX function honestly (compile phases, first run and steady state apart) and
    write the report jax-hpc-profiler users know, with memory, kernels and metadata."""
    import functools

    try:
        require_jax("bench")
        if devices is not None:
            from .._jax._compare import use_cpu_devices

            use_cpu_devices(devices)
        if distributed or coordinator:
            import jax

            jax.distributed.initialize(coordinator_address=coordinator,
                                       num_processes=num_processes, process_id=process_id,
                                       initialization_timeout=int(max(timeout, 1)))
        kwargs = static_kwargs(static)
        params = static_kwargs(param, "--param")
        fn = load_target(target)
        args = array_args(arg) + (call_inputs(target, inputs) if inputs else [])
        check_call(fn, len(args), kwargs, given="--arg" if not inputs else "argument(s)")
        if kwargs:
            fn = functools.partial(fn, **kwargs)
            functools.update_wrapper(fn, fn.func)
        from .._jax._bench import bench

        result = bench(fn, *args, warmup=warmup, iterations=iterations, min_time=min_time,
                       timeout=timeout, **params)
        written = result.save(str(output)) if output is not None else []
    except _errors.HloscopeError as e:
        _exit_now_if_distributed(2)
        fail(e)
    except Exception as e:  # noqa: BLE001  (the user's code raised: theirs to see)
        _exit_now_if_distributed(2)
        fail_user(e, static_hint(static))
    if as_json:
        d = result.to_dict()
        d.pop("report", None)
        sys.stdout.write(json.dumps(d, indent=1, sort_keys=True) + "\n")
        return
    t = result.timings
    sys.stdout.write(result.summary_line() + "\n")
    sys.stdout.write("compile phases: " + ", ".join(f"{k} {v * 1e3:.1f} ms"
                                                    for k, v in t.items()) + "\n")
    sizes = result.sizes
    if sizes.get("temporary") is not None:
        sys.stdout.write(f"memory: argument {sizes.get('argument'):,} B, output "
                         f"{sizes.get('output'):,} B, temporary {sizes['temporary']:,} B, "
                         f"peak {sizes.get('peak') or 0:,} B\n")
    for c in result.checks:
        mark = "ok" if c["ok"] else "MISMATCH"
        sys.stdout.write(f"check {c['parameter']}: given {c['given']}, program "
                         f"{c['program']}: {mark} ({c['note']})\n")
    for w in written:
        sys.stdout.write(f"wrote {w}\n")


@app.command("plot")
def plot_cmd(
    results: list[Path] = typer.Argument(..., help="Result files or folders: hloscope's "
                                         ".json/.csv, jax-hpc-profiler's .csv/.md."),
    strong: bool = typer.Option(False, "--strong", help="Time against devices at a fixed "
                                "problem size."),
    weak: bool = typer.Option(False, "--weak", help="Time against devices at a fixed size "
                              "per device."),
    efficiency: bool = typer.Option(False, "--efficiency", help="Add a panel of parallel "
                                    "efficiency."),
    ideal: bool = typer.Option(False, "--ideal", help="Draw the ideal lines."),
    by_grid: bool = typer.Option(False, "--by-grid", help="Separate series for slab and "
                                 "pencil grids (default: the fastest grid at each count)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the plot (.png or "
                                       ".svg)."),
    as_json: bool = typer.Option(False, "--json", help="Print the series as JSON."),
) -> None:
    """Strong or weak scaling from many results: repeated runs of one point are pooled,
    never dropped; efficiency and ideal lines on request."""
    from .._analysis._scaling import scaling
    from .._render._scaling_plot import plot_scaling, scaling_table
    from .._results._files import load_results

    try:
        if strong == weak:
            raise _errors.HloscopeError("say --strong or --weak (one of them)")
        series = scaling(load_results([str(r) for r in results]),
                         "strong" if strong else "weak", by_grid=by_grid)
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
    sys.stdout.write(scaling_table(series))
    if output is not None:
        sys.stdout.write(f"wrote {output}\n")
