"""`hloscope run`: compile and execute any HLO module on JAX's PjRt runtime."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from .. import _errors
from ._common import (FUNCTION_HELP, MODULE_HELP, WIDE_HELP, command, echo, fail, pick_module,
                      text_width)
from ._help import at_least


def _fmt(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,} B"


@command("run")
def run_cmd(
    file: Path = typer.Argument(..., metavar="PATH", help="An HLO text file (any frontend: "
                                "JAX, torch_xla, TensorFlow), an XLA dump folder, a Markdown "
                                "report or a log with modules in it."),
    partitions: int | None = typer.Option(None, "--partitions", metavar="N", help="Partition "
                                          "count (default: the module header, else its "
                                          "sharding annotations, else 1)."),
    devices: int | None = typer.Option(None, "--devices", metavar="N", help="Run on N "
                                       "virtual CPU devices."),
    input_: list[str] = typer.Option([], "--input", metavar="NAME=SPEC", help="The value of "
                                     "a parameter (by name or number): SPEC is zeros, ones, "
                                     "random or random:SEED, a number, or a .npy file; "
                                     "repeat. Default random:N for parameter N."),
    iterations: int = typer.Option(10, "--iterations", "-n", metavar="N",
                                   callback=at_least(0), help="Timed runs after the first."),
    check: str | None = typer.Option(None, "--check", metavar="numpy", help="Compare with "
                                     "the same module compiled for one device (the only "
                                     "reference: numpy)."),
    tolerance: float = typer.Option(1e-5, "--tolerance", metavar="X", help="Largest relative "
                                    "difference the check accepts."),
    show_module: bool = typer.Option(False, "--show-module", help="Print the per-device "
                                     "module XLA produced."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON "
                                 "(schema hloscope.run/1)."),
    module: str | None = typer.Option(None, "--module", "-m", metavar="NAME|INDEX",
                                      help=MODULE_HELP),
    function: str | None = typer.Option(None, "--function", metavar="NAME",
                                        help=FUNCTION_HELP),
    wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
) -> None:
    """Compile an HLO module with SPMD partitioning, and run it.

    Shows its outputs (per device too), its timings, the collectives the
    partitioner inserted, and memory before and after partitioning.
    """
    from .._bench._stats import time_stats

    if check not in (None, "numpy"):
        fail(_errors.HloscopeError(f"--check {check!r}: the only reference is 'numpy' "
                                    "(the module compiled for one device)"))
    m = pick_module(file, module, function)
    try:
        if devices is not None:
            from .._jax._compare import use_cpu_devices

            use_cpu_devices(devices)
        specs: dict[str, str] = {}
        for item in input_:
            name, sep, spec = item.partition("=")
            if not sep or not name or not spec:
                raise _errors.HloscopeError(f"--input {item!r}: give NAME=SPEC, e.g. p0.1=3 "
                                            "or 0=random:1")
            specs[name] = spec
        from .._jax._quiet import start_jax_quietly
        from .._jax._user import jax_missing

        if not jax_missing():
            start_jax_quietly()
        from .._jax._run import run_module

        r = run_module(m, partitions=partitions, inputs=specs, iterations=iterations,
                       check=check is not None, tolerance=tolerance)
    except _errors.HloscopeError as e:
        fail(e)
    if as_json:
        sys.stdout.write(json.dumps(r.to_dict(), indent=1) + "\n")
        if r.check is not None and not r.check["ok"]:
            raise typer.Exit(1)
        return
    lines: list[str] = []
    w = lines.append
    w(f"{r.module}: {r.partitions} partition(s)"
      + (", SPMD-partitioned" if r.spmd else "") + f"; compiled in {r.compile_time * 1e3:.1f} ms\n")
    for i in r.inputs:
        w(f"  input {i['parameter']} {i['name']} {i['shape']}: {i['input']}\n")
    for o in r.outputs:
        stats = "" if "min" not in o else (f" min {o['min']:g} max {o['max']:g} mean "
                                           f"{o['mean']:g}")
        w(f"output {o['index']}: {o['dtype']}{o['shape']}{stats}; first values "
          f"{', '.join(f'{x:g}' if isinstance(x, float) else str(x) for x in o['first'])}\n")
        for s in o["shards"]:
            w(f"  device {s['device']}: {s['dtype']}{s['shape']}"
              + (f" min {s['min']:g} max {s['max']:g}" if "min" in s else "") + "\n")
    if r.times:
        s = time_stats(r.times)
        w(f"time: median {s['median'] * 1e3:.4f} ms (min {s['min'] * 1e3:.4f}, max "
          f"{s['max'] * 1e3:.4f}) over {s['runs']} runs after the first\n")
    if r.spmd:
        w(f"collectives the partitioner inserted: {len(r.collectives)}\n")
        for c in r.collectives:
            w(f"  {c['name']} ({c['opcode']}) {c['shape']}: {len(c['groups'])} group(s) of "
              f"{c['group_size']} {c['groups']}, {c['sent_per_device']:,} B sent and "
              f"{c['received_per_device']:,} B received per device\n")
    b, a = r.memory_before, r.memory_after
    w("memory             before partitioning (one device)   after (per device, XLA)\n")
    for key in ("argument", "output", "temporary", "peak"):
        w(f"  {key:<16} {_fmt(b.get(key)):>34}   {_fmt(a.get(key)):>22}\n")
    echo("".join(lines), text_width(wide))
    if show_module:  # XLA's text as it is (escaped), never wrapped: it stays HLO
        echo("\nper-device module:\n" + r.partitioned_text + "\n")
    if r.check is not None:
        c = r.check
        echo(f"check against {c['reference']}: largest relative difference "
             f"{c['max_relative_difference']:.3g} (tolerance {c['tolerance']:g}): "
             f"{'ok' if c['ok'] else 'FAILED'}\n", text_width(wide))
        if not c["ok"]:
            raise typer.Exit(1)
