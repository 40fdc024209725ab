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


def _needs(m: dict[str, int | None]) -> int | None:
    """Arguments + outputs - aliased + temporaries: what XLA allocates on a device."""
    parts = [m.get(k) for k in ("argument", "output", "temporary")]
    if any(p is None for p in parts):
        return None
    return sum(p or 0 for p in parts) - (m.get("alias") or 0)


def _fmt(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,} B"


def _errors_line(c: dict) -> list[str]:
    """One line per output of a comparison: max abs and relative error, tolerance."""
    out = []
    for r in c["outputs"]:
        if r.get("error"):
            out.append(f"  {r['output']}: {r['error']}: FAILED\n")
            continue
        out.append(f"  {r['output']} {r['dtype']}{r['shape']}: max abs error "
                   f"{r['max_abs_error']:.3g}, max relative error {r['max_rel_error']:.3g} "
                   f"(tolerance {r['tolerance']:.3g}): {'ok' if r['ok'] else 'FAILED'}\n")
    return out


@command("run")
def run_cmd(
    file: Path = typer.Argument(..., metavar="PATH", help="An HLO text file (any frontend: "
                                "JAX, torch_xla, TensorFlow; before or after XLA's "
                                "optimizations), an XLA dump folder, a Markdown report or a "
                                "log with modules in it."),
    partitions: int | None = typer.Option(None, "--partitions", metavar="N", help="Partition "
                                          "count (default: the module header, else its "
                                          "sharding annotations, else 1)."),
    devices: int | None = typer.Option(None, "--devices", metavar="N", help="Run on N "
                                       "virtual CPU devices (default: as many as the module "
                                       "has partitions)."),
    input_: list[str] = typer.Option([], "--input", metavar="NAME=SPEC", help="The value of "
                                     "a parameter (by name or number): SPEC is zeros, ones, "
                                     "random or random:SEED, a number, or a .npy file; "
                                     "repeat. Default random:N for parameter N."),
    inputs_file: Path | None = typer.Option(None, "--inputs", metavar="FILE.npz|DIR",
                                            help="All inputs at once: an .npz or a folder "
                                            "of .npy files, by parameter name or position "
                                            "(np.savez(path, *arrays) keeps parameter "
                                            "order); --input overrides single ones."),
    allow_lossy: bool = typer.Option(False, "--allow-lossy", help="Convert inputs into the "
                                     "parameter's type even where values change (floats "
                                     "truncated into integers, out-of-range values)."),
    iterations: int = typer.Option(10, "--iterations", "-n", metavar="N",
                                   callback=at_least(0), help="Timed runs after the first."),
    check: str | None = typer.Option(None, "--check", metavar="one-device", help="Compare "
                                     "with the same module compiled for one device, "
                                     "unpartitioned (the only reference; 'numpy', its old "
                                     "name, is still accepted)."),
    expect: Path | None = typer.Option(None, "--expect", metavar="REF.npz", help="Compare "
                                       "the outputs with reference outputs (e.g. torch's), "
                                       "in output order; exit 1 when they differ."),
    tolerance: float | None = typer.Option(None, "--tolerance", metavar="X", help="Largest "
                                           "relative error --check and --expect accept "
                                           "(default: per dtype, times sqrt of the module's "
                                           "longest sum)."),
    save_outputs: Path | None = typer.Option(None, "--save-outputs", metavar="OUT.npz",
                                             help="Write the outputs to an .npz (output0, "
                                             "output1, ...)."),
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
    """Compile an HLO module as it asks (SPMD-partitioned, already partitioned, or
    optimized already), and run it.

    Shows its outputs (per device too), its timings, the collectives in the per-device
    program, and memory before and after partitioning; compares with a reference.
    """
    from .._bench._stats import time_stats

    if check not in (None, "one-device", "numpy"):
        fail(_errors.HloscopeError(f"--check {check!r}: the only reference is 'one-device' "
                                    "(the same module compiled for one device)"))
    m = pick_module(file, module, function)
    try:
        from .._jax._exec import plan_module

        wanted = devices or plan_module(m, partitions).partitions
        if devices is not None or wanted > 1:
            from .._jax._compare import use_cpu_devices

            use_cpu_devices(wanted)
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

        r = run_module(m, partitions=partitions, inputs=specs, input_files=inputs_file,
                       iterations=iterations, check=check is not None, tolerance=tolerance,
                       expect=expect, allow_lossy=allow_lossy,
                       save_outputs=None if save_outputs is None else str(save_outputs))
    except _errors.HloscopeError as e:
        fail(e)
    failed = (r.check is not None and not r.check["ok"]) or (
        r.expect is not None and not r.expect["ok"])
    if as_json:
        sys.stdout.write(json.dumps(r.to_dict(), indent=1) + "\n")
        if failed:
            raise typer.Exit(1)
        return
    lines: list[str] = []
    w = lines.append
    for n_ in r.notes:
        w(f"note: {n_}\n")
    if check == "numpy":
        w("note: --check numpy is the old name of --check one-device: it compares with the "
          "module compiled for one device (NumPy computes nothing)\n")
    w(f"{r.module}: {r.how}; compiled in {r.compile_time * 1e3:.1f} ms\n")
    for i in r.inputs:
        w(f"  input {i['parameter']} {i['name']} {i['shape']}: {i['input']}"
          + (f" ({i['conversion']})" if i.get("conversion") else "")
          + (f" [{i['about']}]" if i.get("about") else "") + "\n")
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
    if r.partitions > 1:
        w(("collectives the partitioner inserted" if r.spmd else
           "collectives in the per-device program") + f": {len(r.collectives)}\n")
        for c in r.collectives:
            w(f"  {c['name']} ({c['opcode']}) {c['shape']}: {len(c['groups'])} group(s) of "
              f"{c['group_size']} {c['groups']}, {c['sent_per_device']:,} B sent and "
              f"{c['received_per_device']:,} B received per device\n")
    b, a = r.memory_before, r.memory_after
    w("memory             before partitioning (one device)   after (per device, XLA)\n")
    for key, label in (("needs", "needs"), ("argument", "argument"), ("output", "output"),
                       ("temporary", "temporary"), ("peak", "live at once")):
        w(f"  {label:<16} {_fmt(_needs(b) if key == 'needs' else b.get(key)):>34}   "
          f"{_fmt(_needs(a) if key == 'needs' else a.get(key)):>22}\n")
    w("  (needs: argument + output - aliased + temporary, what the device holds; live at "
      "once: hloscope's live-range peak of the module")
    if (a.get("peak") or 0) < (a.get("temporary") or 0):
        w(", here below the temporary allocation: XLA packs temporaries into one block, "
          "with gaps where values are never live together")
    w(")\n")
    if r.saved:
        w(f"outputs saved to {r.saved}\n")
    echo("".join(lines), text_width(wide))
    if show_module:  # XLA's text as it is (escaped), never wrapped: it stays HLO
        echo("\nper-device module:\n" + r.partitioned_text + "\n")
    for c in (r.check, r.expect):
        if c is None:
            continue
        echo(f"check against {c['reference']} (longest sum {c['reduction_size']:,} terms): "
             f"{'ok' if c['ok'] else 'FAILED'}\n" + "".join(_errors_line(c)), text_width(wide))
    if failed:
        raise typer.Exit(1)
