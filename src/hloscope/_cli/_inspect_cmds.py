"""The commands that compile a JAX function or show a built-in example: inspect (one
compile, everything hloscope shows), targets (the GPUs and TPUs inspect compiles for),
demo (a built-in module through summary, kernels, memory and lint)."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import typer

from .. import _errors
from .._analysis._summary import is_optimized, summarize
from .._render._text import render_json, render_summary
from .._write import write_text
from ._common import command, echo, fail, fail_user, text_width
from ._functions import compile_function
from ._options import (ARG_OPT, DEVICES_OPT, HW_OPT, INPUTS_OPT, MESH_OPT, NO_CHECK_OPT,
                       SHARD_OPT, STATIC_OPT, TARGET_HELP, WIDE_OPT)
from ._targets import static_hint


@command("inspect")
def inspect_cmd(
    target: str = typer.Argument(..., metavar="TARGET", help=TARGET_HELP),
    arg: list[str] = ARG_OPT,
    inputs: str | None = INPUTS_OPT,
    static: list[str] = STATIC_OPT,
    devices: int | None = DEVICES_OPT,
    hw: str | None = HW_OPT,
    mesh: str | None = MESH_OPT,
    shard: list[str] = SHARD_OPT,
    output: Path | None = typer.Option(None, "-o", "--output", metavar="FILE",
                                       help="Write the HTML report."),
    save: Path | None = typer.Option(None, "--save", metavar="FILE", help="Save the report "
                                     "as JSON (hloscope.load and every command read it)."),
    no_check: bool = NO_CHECK_OPT,
    wide: bool = WIDE_OPT,
) -> None:
    """Compile a JAX function once and show what XLA did.

    Its kernels, its memory (beside XLA's own figures), the advisor's findings
    (each saving checked by compiling its fix where the fix is mechanical), and the
    time of each compile phase.  With --target, for a GPU or TPU that need not be
    here, and whether it fits in that device's memory.
    """
    from .._render._kernels_text import render_advice, render_kernels
    from .._render._memory_text import render_memory

    try:
        rep = compile_function("inspect", target, arg, inputs, static, devices, hw, mesh,
                               shard, not no_check)
        advice = rep.advice  # checked now (its time among the timings)
        if output is not None:
            write_text(output, rep.html())
        if save is not None:
            rep.save(str(save))
    except _errors.HloscopeError as e:
        fail(e)
    except Exception as e:  # noqa: BLE001  (the user's code raised: theirs to see)
        fail_user(e, static_hint(static))
    t = rep.timings
    width = text_width(wide)
    m = rep.module
    head = "".join(line + "\n" for line in rep.target_lines())
    device = rep.roofline_device()
    echo(rep.summary_line() + "\n" + head
         + "timings: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in t.items())
         + f"; {rep.device.get('count')} {rep.device.get('kind')} device(s); "
         f"jax {rep.versions.get('jax')}\n\n"
         + render_kernels(rep.kernels, device=device, scheduled=is_optimized(m), width=width)
         + "\n" + render_memory(rep.memory, width=width) + "\n"
         + render_advice(m.name, advice, width=width),
         width)


@command()
def targets(
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    wide: bool = WIDE_OPT,
) -> None:
    """List the GPUs and TPUs that inspect --target compiles for, with their memory and
    peak figures per device and where those come from."""
    from .._render._target_text import render_catalog
    from .._target._catalog import targets as catalog

    rows = catalog()
    if json_out:
        sys.stdout.write(render_json({"schema": "hloscope.targets/1", "targets": rows}))
        return
    echo(render_catalog(rows, width=text_width(wide)), text_width(wide))


@command()
def demo(
    wide: bool = WIDE_OPT,
    save: Path | None = typer.Option(None, "--save", metavar="FILE",
                                     help="Write the built-in module to FILE instead, to try "
                                          "the other commands on it."),
) -> None:
    """Run hloscope on a built-in example: a 3-D FFT sharded over 8 devices.

    Shows what is in it, its kernels, its memory peak, and the advisor's
    findings: summary, kernels, memory and lint in turn.
    """
    from .._analysis._advisor import advise_groups
    from .._analysis._kernels import kernel_graph
    from .._analysis._memory import analyze_memory
    from .._render._kernels_text import render_advice, render_kernels
    from .._render._memory_text import render_memory

    from .._sources._reader import read_text

    data = resources.files("hloscope") / "_data" / "fft_pencil_4x2.hlo"
    if save is not None:
        try:
            write_text(save, data.read_text(encoding="utf-8"))
        except _errors.HloscopeError as e:
            fail(e)
        echo(f"wrote {save}: try hloscope report {save} -o fft.html\n")
        return
    name = "<built-in example fft_pencil_4x2.hlo>"
    data = resources.files("hloscope") / "_data" / "fft_pencil_4x2.hlo"
    m = read_text(data.read_text(encoding="utf-8"), filename=name).module
    width = text_width(wide)
    parts = [
        ("hloscope summary", render_summary(summarize(m), width=width)),
        ("hloscope kernels", render_kernels(kernel_graph(m), scheduled=is_optimized(m),
                                            width=width)),
        ("hloscope memory", render_memory(analyze_memory(m), top=5, width=width)),
        ("hloscope lint", render_advice(m.name, advise_groups(m), width=width)),
    ]
    echo("".join(f"==> {title} {name}\n\n{text}\n" for title, text in parts), width)
    echo("This is hloscope on a built-in module: a 32x32x32 FFT that JAX sharded over a\n"
         "4x2 mesh of CPU devices (source generate.py:159 is the line of the script that\n"
         "built it, jnp.fft.fftn(...); your own modules point into your files).  Next, the\n"
         "HTML report of the same module (opens from disk):\n"
         "  hloscope demo --save fft.hlo && hloscope report fft.hlo -o fft.html\n"
         "Then your own module: any HLO text works (compiled.as_text(), an XLA dump\n"
         "folder, a log); with JAX installed (pip install 'hloscope[jax]'), straight from\n"
         "a function:\n"
         "  hloscope inspect my_model.py:loss --arg f32[128,784] -o loss.html\n"
         "and whether it fits on 8 H100s (or a TPU slice), compiled for them without them\n"
         "(pip install 'hloscope[gpu-target]'; hloscope targets lists the chips):\n"
         "  hloscope inspect my_model.py:train_step --target h100x8 --arg bf16[8192,4096] \\\n"
         "      --shard 0=data\n", width)
