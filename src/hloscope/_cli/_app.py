"""The `hloscope` command: its entry point.

Exit status: 0 on success; 1 when a check the user asked for fails (lint
--fail-on, run --check); 2 when the input cannot be read or a user's mistake
stops the command (the error is printed as one located message, never a
traceback); 3 on an internal error (a bug: rerun with HLOSCOPE_DEBUG=1 for the
traceback).

The commands live in `_commands` (the ones that read HLO), `_diff_cmd`, `_inspect_cmds`,
`_profile_cmd`, `_run_cmd`, `_bench_cmds` and `_plot_cmd`; what they share in `_common`,
`_options` and `_functions`.  This module imports them all, so that each registers
with the one Typer app.
"""

from __future__ import annotations

import os
import sys

import typer

from .. import _errors
from .._render._term import safe_text
# Each registers its commands with the app.
from . import (_bench_cmds, _commands, _diff_cmd, _inspect_cmds, _plot_cmd,  # noqa: F401
               _profile_cmd, _run_cmd)
from ._common import EXIT_INTERNAL, app, fail

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `hloscope` script."""
    try:
        app()
    except (typer.Exit, SystemExit):
        raise
    except _errors.HloscopeError as e:  # raised outside a command's own handling
        try:
            fail(e)
        except typer.Exit as ex:
            sys.exit(ex.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as e:  # a bug in hloscope, unless the user's own code raised it
        from .._jax._user import user_error

        user = user_error(e)
        if user is not None:
            try:
                fail(user)
            except typer.Exit as ex:
                sys.exit(ex.exit_code)
        if os.environ.get("HLOSCOPE_DEBUG"):
            raise
        sys.stderr.write(f"internal error: {type(e).__name__}: {safe_text(str(e))} "
                         "(a bug in hloscope; rerun with HLOSCOPE_DEBUG=1 for the traceback "
                         "and please report it)\n")
        sys.exit(EXIT_INTERNAL)
