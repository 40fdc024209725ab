"""What every `hloscope` command shares: the Typer app, exit codes, the one-line error,
the input every command reads, the module the user means and the width of the text.

Command modules (`_commands`, `_diff_cmd`, `_inspect_cmds`, `_run_cmd`, ...) import from here;
`_app` imports them all and holds `main`.  Imports flow one way.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from .. import _errors
from .._hlo._module import Module
from .._render._term import fit, safe, safe_text, terminal_width
from .._sources._inputs import Inputs, ModuleEntry, read_inputs
from ._help import HelpCommand, HelpGroup, reflow

__all__ = ["app", "command", "echo", "fail", "fail_user", "note", "text_width", "EXIT_INPUT",
           "EXIT_INTERNAL", "INPUT_HELP", "MODULE_HELP", "FUNCTION_HELP", "WIDE_HELP",
           "load_inputs", "pick", "pick_module"]

_APP_HELP = """See what XLA did to your program: kernels, memory, collectives, timings.

Most commands read PATH: an HLO text file, an XLA dump folder (--xla_dump_to),
a Markdown report or a log with modules in it, torch_xla's saved graphs, or a
report saved by 'hloscope inspect --save' (JSON).  When PATH holds several
modules, --module NAME|INDEX picks one ('hloscope summary --list' shows them).

Text fits the terminal: $COLUMNS, else the terminal's width, else 100 columns
when the output goes to a pipe or a file; --wide shows every name whole.  --json
prints everything, unshortened.

Exit status: 0 done; 1 a check you asked for failed (lint --fail-on, run
--check); 2 the input cannot be read or the command line is wrong; 3 a bug in
hloscope (rerun with HLOSCOPE_DEBUG=1 for the traceback).

The words it prints (kLoop, ynn_fusion, wrapped_convert, intensity, roofline,
live range, aliasing, async pairs...) are explained in docs/glossary.md of hloscope's
sources; each command has a page in docs/ (README.md links them all)."""

app = typer.Typer(
    name="hloscope",
    cls=HelpGroup,
    help=reflow(_APP_HELP),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

EXIT_INPUT = 2
EXIT_INTERNAL = 3

INPUT_HELP = ("An HLO text file, an XLA dump folder (--xla_dump_to), a Markdown report or "
              "a log with modules in it, torch_xla's saved graphs (XLA_SAVE_TENSORS_FILE), "
              "or a report saved by 'hloscope inspect --save'.")
MODULE_HELP = ("Which module, when PATH holds several: a name (or a dump's "
               "module_NNNN.name prefix) or an index from 'hloscope summary --list'.")
FUNCTION_HELP = "Pick the module JAX compiled for this function (jit_NAME)."
WIDE_HELP = ("Show names and columns whole, however long the lines (by default lines "
             "fit $COLUMNS, else the terminal, else 100).")

_F = TypeVar("_F", bound=Callable[..., Any])


def command(name: str | None = None) -> Callable[[_F], _F]:
    """`app.command`, with the docstring reflowed for --help (see `_help`)."""

    def register(fn: _F) -> _F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except KeyboardInterrupt as e:
                _interrupted(e)

        return app.command(name, cls=HelpCommand, help=reflow(fn.__doc__))(run)  # type: ignore[return-value]

    return register


def _interrupted(e: KeyboardInterrupt) -> NoReturn:
    """Ctrl-C: status 130 without a traceback.  During XLA's compile (said already, with
    what the lowered module shows) the process leaves at once: XLA's thread cannot be
    stopped, and waiting for it at exit would wait for the compile."""
    import os

    from .._jax._progress import CompileInterrupted

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if isinstance(e, CompileInterrupted):
        os._exit(130)
    sys.stderr.write("interrupted\n")
    raise typer.Exit(130)


def text_width(wide: bool) -> int | None:
    """The width text output fits in (`terminal_width`), or None with ``--wide``."""
    return None if wide else terminal_width()


def echo(text: str, width: int | None = None) -> None:
    """Write `text` to stdout, made safe and (with a `width`) its long lines wrapped."""
    sys.stdout.write(fit(text, width))


def fail(err: _errors.HloscopeError) -> NoReturn:
    """Print `err` (`report_error`) and leave with status 2."""
    report_error(err)
    raise typer.Exit(EXIT_INPUT)


def report_error(err: _errors.HloscopeError) -> None:
    """Print `err` as one located message (with the line and a caret for parse errors).
    Text from the input in it (names, the quoted line, paths) is shown `safe`: escaped,
    never acted on by the terminal; lines are not wrapped."""
    from rich.console import Console
    from rich.markup import escape

    def shown(text: str) -> str:  # the input's text escaped, then rich's markup
        return escape(safe_text(text))

    console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    console.print(f"[bold red]error:[/] {escape(safe(err.one_line()))}")
    if isinstance(err, _errors.UserCodeError):
        details = err.details()
        if details:
            console.print(shown(details))
    if isinstance(err, _errors.HloParseError):
        console.print(shown(err.get_context()))
        before = err.read_before()
        if before:
            console.print(f"read before the damage: {shown(before)}")
    if err.hint:
        console.print(f"[bold]hint:[/] {shown(err.hint)}")


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
    """A one-line note on stderr (which module was taken, what was skipped), made safe
    but not wrapped: one note, one line."""
    sys.stderr.write(f"note: {safe(text)}\n")


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
