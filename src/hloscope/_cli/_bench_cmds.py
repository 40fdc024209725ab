"""`hloscope bench`: time a JAX function, write its report."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import typer

from .. import _errors
from .._jax._user import check_call
from ._common import WIDE_HELP, command, echo, fail, fail_user, text_width
from ._help import at_least
from ._supervise import SUPERVISED
from ._targets import (HW_MESH_HELP, HW_SHARD_HELP, HW_TARGET_HELP, array_args, call_inputs,
                       hardware_target, load_target, require_jax, static_hint, static_kwargs)


def _exit_now_if_distributed(code: int) -> None:
    """After an error on a multi-process run, leave at once: JAX's own shutdown would wait
    for the missing rank (its heartbeat timeout) and then abort."""
    from .._jax._quiet import jax_started

    if jax_started():  # (asking JAX its process count would start it)
        try:
            import jax

            if jax.process_count() > 1:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        except Exception:  # noqa: BLE001
            pass


def _then_leave(show: Callable[[], object]) -> NoReturn:
    """Print the error (`show` raises `typer.Exit`), then, with several processes, leave
    at once (see `_exit_now_if_distributed`)."""
    try:
        show()
    except typer.Exit as e:
        _exit_now_if_distributed(e.exit_code)
        raise
    raise AssertionError("unreachable: the error was not shown")  # pragma: no cover


@command("bench")
def bench_cmd(
    target: str = typer.Argument(..., metavar="TARGET", help="The function: FILE.py:FUNCTION "
                                 "or package.module:FUNCTION."),
    arg: list[str] = typer.Option([], "--arg", metavar="SHAPE", help="An argument's shape, "
                                  "e.g. f32[128,2] (zeros); repeat for each argument."),
    inputs: str | None = typer.Option(None, "--inputs", metavar="CALL", help="A call in the "
                                      "same file that returns the arguments, e.g. "
                                      "'make_input(128)' (for sharded inputs)."),
    static: list[str] = typer.Option([], "--static", metavar="NAME=VALUE", help="A static "
                                     "keyword argument (a Python literal); repeat."),
    param: list[str] = typer.Option([], "--param", metavar="NAME=VALUE", help="A benchmark "
                                    "parameter (precision, x, y, z, px, py, backend, nodes, "
                                    "or any); checked against the program; repeat."),
    iterations: int = typer.Option(10, "--iterations", "-n", metavar="N",
                                   callback=at_least(1), help="Timed runs."),
    warmup: int = typer.Option(3, "--warmup", metavar="N", callback=at_least(0),
                               help="Discarded runs after the first."),
    min_time: float | None = typer.Option(None, "--min-time", metavar="SECONDS",
                                          help="Keep timing until this many seconds are "
                                          "measured."),
    devices: int | None = typer.Option(None, "--devices", metavar="N",
                                       help="Run on N virtual CPU devices."),
    hw: str | None = typer.Option(None, "--target", metavar="NAME", help=HW_TARGET_HELP
                                  + " The times stay this machine's; the report adds what "
                                  "XLA makes for the target and whether it fits there."),
    mesh: str | None = typer.Option(None, "--mesh", metavar="AXES", help=HW_MESH_HELP),
    shard: list[str] = typer.Option([], "--shard", metavar="I=SPEC", help=HW_SHARD_HELP),
    distributed: bool = typer.Option(False, "--distributed", help="Call "
                                     "jax.distributed.initialize() first (cluster "
                                     "auto-detection or the three options below)."),
    coordinator: str | None = typer.Option(None, "--coordinator", metavar="HOST:PORT",
                                           help="The address of rank 0 (implies "
                                           "--distributed)."),
    num_processes: int | None = typer.Option(None, "--num-processes", metavar="N",
                                             help="How many processes take part (with "
                                             "--coordinator; default: detected)."),
    process_id: int | None = typer.Option(None, "--process-id", metavar="RANK",
                                          help="This process's rank, 0 to N-1 (with "
                                          "--coordinator; default: detected)."),
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS", help="How long to "
                                  "wait for the other ranks before giving up."),
    output: Path | None = typer.Option(None, "-o", "--output", metavar="PATH", help="A "
                                       "folder (report .md, .json, .html and a row in "
                                       "results.csv) or one file (.md, .json, .html, .csv)."),
    jhp_csv: Path | None = typer.Option(None, "--jhp-csv", metavar="FILE", help="Also add "
                                        "a row to jax-hpc-profiler's CSV (its 19 columns), "
                                        "for its own scripts and plots."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
) -> None:
    """Time a JAX function honestly, and write the report jax-hpc-profiler users know.

    The compile phases, the first run and the steady state are timed apart; the
    report adds memory, kernels and metadata.
    """
    import functools

    # Supervised when run as a command (the child gets the same arguments); when called
    # in-process with other arguments (a test runner), the rank runs here as it is.
    if (distributed or coordinator) and not os.environ.get(SUPERVISED) \
            and "bench" in sys.argv[1:2]:
        from ._supervise import supervise

        code = supervise(sys.argv[1:], process_id, num_processes, coordinator, timeout)
        raise typer.Exit(code)
    if os.environ.get(SUPERVISED):
        from ._supervise import follow_supervisor

        follow_supervisor()
    try:
        require_jax("bench")
        extra = hardware_target(hw, mesh, shard, None)  # --devices runs it here: both go
        if devices is not None:
            from .._jax._compare import use_cpu_devices

            use_cpu_devices(devices)
        if distributed or coordinator:
            import jax

            try:
                jax.distributed.initialize(coordinator_address=coordinator,
                                           num_processes=num_processes,
                                           process_id=process_id,
                                           initialization_timeout=int(max(timeout, 1)),
                                           # hloscope's own timeouts speak first
                                           heartbeat_timeout_seconds=int(2 * timeout + 10),
                                           shutdown_timeout_seconds=int(max(timeout, 1)))
            except Exception as e:  # noqa: BLE001  (JAX's runtime errors, ValueError)
                raise _errors.HloscopeError(
                    f"could not join the other processes"
                    f"{f' at {coordinator}' if coordinator else ''}: "
                    f"{str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__}",
                    hint="start every rank with the same --coordinator and --num-processes, "
                         "each with its own --process-id") from None
        from .._jax._quiet import start_jax_quietly

        start_jax_quietly()
        kwargs = static_kwargs(static)
        params = static_kwargs(param, "--param")
        fn = load_target(target)
        args = array_args(arg) + (call_inputs(target, inputs) if inputs else [])
        check_call(fn, len(args), kwargs, given="--arg" if not inputs else "argument(s)")
        if kwargs:
            fn = functools.partial(fn, **kwargs)
            functools.update_wrapper(fn, fn.func)
        from .._bench._measure import bench

        result = bench(fn, *args, warmup=warmup, iterations=iterations, min_time=min_time,
                       timeout=timeout, **extra, **params)
        written = result.save(str(output)) if output is not None else []
        if jhp_csv is not None and not result.metadata.get("process_index", 0):
            from .._bench._output import append_jhp_csv

            written.append(append_jhp_csv(str(jhp_csv), [result]))
    except _errors.HloscopeError as e:
        _then_leave(functools.partial(fail, e))
    except Exception as e:  # noqa: BLE001  (the user's code raised: theirs to see)
        _then_leave(functools.partial(fail_user, e, static_hint(static)))
    if as_json:
        d = result.to_dict()
        d.pop("report", None)
        tr = d.pop("target_report", None)
        if tr is not None:  # the target and its fit, not the whole report
            d["target"] = {**(tr.get("target") or {}), "fit": result.target_report.fit.to_dict()
                           if result.target_report.fit is not None else None}
        sys.stdout.write(json.dumps(d, indent=1, sort_keys=True) + "\n")
        return
    t = result.timings
    lines = [result.summary_line(),
             "compile phases: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in t.items())]
    sizes = result.sizes
    if sizes.get("temporary") is not None:
        lines.append(f"memory: argument {sizes.get('argument'):,} B, output "
                     f"{sizes.get('output'):,} B, temporary {sizes['temporary']:,} B, "
                     f"peak {sizes.get('peak') or 0:,} B")
    if result.target_report is not None:
        lines += result.target_report.target_lines()
    for c in result.checks:
        mark = "ok" if c["ok"] else "MISMATCH"
        lines.append(f"check {c['parameter']}: given {c['given']}, program "
                     f"{c['program']}: {mark} ({c['note']})")
    if result.metadata.get("busy_machine"):
        lines.append(f"note: {result.metadata['busy_machine']}")
    lines += [f"wrote {w}" for w in written]
    echo("\n".join(lines) + "\n", text_width(wide))
