"""The `hloscope` command.

Exit status: 0 on success; 2 when the input cannot be read (the error is
printed as one located message, never a traceback); 3 on an internal error
(a bug: rerun with HLOSCOPE_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path
from typing import NoReturn

import typer

from .. import _errors
from .._analysis._summary import SUMMARY_SCHEMA, summarize
from .._render._text import render_json, render_summary
from .._sources._reader import HloFile, read

app = typer.Typer(
    name="hloscope",
    help="See what XLA did to your program: kernels, memory, collectives, timings.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

EXIT_INPUT = 2
EXIT_INTERNAL = 3


def _fail(err: _errors.HloscopeError) -> NoReturn:
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(f"[bold red]error:[/] {escape(err.one_line())}")
    if isinstance(err, _errors.HloParseError):
        console.print(escape(err.get_context()))
        before = err.read_before()
        if before:
            console.print(f"read before the damage: {escape(before)}")
    if err.hint:
        console.print(f"[bold]hint:[/] {escape(err.hint)}")
    raise typer.Exit(EXIT_INPUT)


def _load(path: Path) -> HloFile:
    try:
        return read(path)
    except _errors.HloscopeError as e:
        _fail(e)


@app.command()
def summary(
    file: Path = typer.Argument(..., help="HLO text, a Markdown report, a glog log or notebook text."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.summary/1)."),
) -> None:
    """What is in a module: computations, opcodes, fusions, library calls, collectives,
    parameters and outputs with shapes, bytes and shardings."""
    hf = _load(file)
    try:
        summaries = [summarize(m) for m in hf.modules]
    except _errors.HloscopeError as e:
        _fail(e)
    if json_out:
        data = {"schema": SUMMARY_SCHEMA, "file": hf.path, "format": hf.format,
                "modules": [s.to_dict() for s in summaries]}
        sys.stdout.write(render_json(data))
        return
    sys.stdout.write("\n".join(render_summary(s) for s in summaries))


@app.command()
def demo() -> None:
    """Summarize a built-in example: a 3-D FFT sharded over 8 devices (from seed 000)."""
    data = resources.files("hloscope") / "_data" / "fft_pencil_4x2.hlo"
    with resources.as_file(data) as p:
        hf = _load(Path(p))
    s = summarize(hf.module)
    sys.stdout.write(render_summary(s).replace(str(p), "<built-in example fft_pencil_4x2.hlo>"))
    sys.stdout.write(
        "\nThis is `hloscope summary` on a built-in module: a 32x32x32 FFT that JAX sharded\n"
        "over a 4x2 mesh of CPU devices.  Try it on your own module:\n"
        "  python -c \"import jax, jax.numpy as jnp; "
        "print(jax.jit(jnp.sin).lower(jnp.ones(8)).compile().as_text())\" > my.hlo\n"
        "  hloscope summary my.hlo\n")


def main() -> None:
    """Entry point of the `hloscope` script."""
    try:
        app()
    except (typer.Exit, SystemExit):
        raise
    except _errors.HloscopeError as e:  # raised outside a command's own handling
        try:
            _fail(e)
        except typer.Exit as ex:
            sys.exit(ex.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as e:  # a bug in hloscope, not a problem with the input
        if os.environ.get("HLOSCOPE_DEBUG"):
            raise
        sys.stderr.write(f"internal error: {type(e).__name__}: {e} "
                         "(a bug in hloscope; rerun with HLOSCOPE_DEBUG=1 for the traceback "
                         "and please report it)\n")
        sys.exit(EXIT_INTERNAL)
