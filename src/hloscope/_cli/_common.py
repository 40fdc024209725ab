"""What every `hloscope` command shares: the Typer app, exit codes, the one-line error,
the input every command reads and the module the user means.

Command modules (`_commands`, `_run_cmd`, `_bench_cmds`) import from here;
`_app` imports them all and holds `main`.  Imports flow one way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import typer

from .. import _errors
from .._hlo._module import Module
from .._sources._inputs import Inputs, ModuleEntry, read_inputs

__all__ = ["app", "fail", "fail_user", "EXIT_INPUT", "EXIT_INTERNAL", "MODULE_HELP", "FUNCTION_HELP",
           "load_inputs", "pick", "pick_module"]

app = typer.Typer(
    name="hloscope",
    help="See what XLA did to your program: kernels, memory, collectives, timings.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

EXIT_INPUT = 2
EXIT_INTERNAL = 3

MODULE_HELP = ("Which module, when the input holds several: a name (or a dump's "
               "module_NNNN.name prefix) or an index from 'hloscope summary --list'.")
FUNCTION_HELP = "Pick the module JAX compiled for this function (jit_NAME)."


def fail(err: _errors.HloscopeError) -> NoReturn:
    """Print `err` as one located message (with the line and a caret for parse errors)
    and leave with status 2."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    console.print(f"[bold red]error:[/] {escape(err.one_line())}")
    if isinstance(err, _errors.UserCodeError):
        details = err.details()
        if details:
            console.print(escape(details))
    if isinstance(err, _errors.HloParseError):
        console.print(escape(err.get_context()))
        before = err.read_before()
        if before:
            console.print(f"read before the damage: {escape(before)}")
    if err.hint:
        console.print(f"[bold]hint:[/] {escape(err.hint)}")
    raise typer.Exit(EXIT_INPUT)


def fail_user(error: Exception, hint: str = "") -> NoReturn:
    """`error` raised by the user's code (marked by `_jax._user.user_code`) as their error,
    with `hint` when hloscope has none of its own; an `OSError` of hloscope's own writing
    as a failed write naming the path; any other exception is a bug in hloscope and goes
    on to `main`."""
    from .._jax._user import user_error

    err = user_error(error)
    if err is not None:
        if hint and not err.hint:
            err.hint = hint
        fail(err)
    if isinstance(error, OSError):
        where = f" {error.filename}" if error.filename else ""
        fail(_errors.HloscopeError(f"cannot write{where}: {error.strerror or error}"))
    raise error


def note(text: str) -> None:
    """A one-line note on stderr (which module was taken, what was skipped)."""
    sys.stderr.write(f"note: {text}\n")


def load_inputs(path: Path) -> Inputs:
    try:
        inputs = read_inputs(path)
    except _errors.HloscopeError as e:
        fail(e)
    for skipped in inputs.skipped:
        note(f"skipped {skipped}")
    return inputs


def pick(path: Path, module: str | None = None, function: str | None = None, *,
         inputs: Inputs | None = None) -> tuple[Inputs, ModuleEntry]:
    """The inputs at `path` (read unless given) and the one module the user means (see
    `Inputs.select`)."""
    if inputs is None:
        inputs = load_inputs(path)
    try:
        entry, why = inputs.select(module, function)
    except _errors.HloscopeError as e:
        fail(e)
    if why:
        note(why)
    return inputs, entry


def pick_module(path: Path, module: str | None = None, function: str | None = None) -> Module:
    return pick(path, module, function)[1].module
