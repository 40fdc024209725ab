"""The options several commands share (typer.Option objects: one definition, one help
text for each)."""

from __future__ import annotations

import typer

from ._common import FUNCTION_HELP, MODULE_HELP, WIDE_HELP
from ._targets import HW_MESH_HELP, HW_SHARD_HELP, HW_TARGET_HELP

MODULE_OPT = typer.Option(None, "--module", "-m", metavar="NAME|INDEX", help=MODULE_HELP)
FUNCTION_OPT = typer.Option(None, "--function", metavar="NAME", help=FUNCTION_HELP)
WIDE_OPT = typer.Option(False, "--wide", help=WIDE_HELP)
TARGET_HELP = "The function: FILE.py:FUNCTION or package.module:FUNCTION."
NO_CHECK_OPT = typer.Option(False, "--no-check", help="Do not compile the advisor's "
                         "mechanical fixes to check their savings (they stay estimated).")
ARG_OPT = typer.Option([], "--arg", metavar="SHAPE", help="An argument's shape, e.g. f32[128,2] "
                    "(zeros of that shape); repeat for each argument.")
INPUTS_OPT = typer.Option(None, "--inputs", metavar="CALL", help="A call in the same file that "
                       "returns the arguments (one, or a tuple of them: pytrees, sharded "
                       "arrays), e.g. 'make_inputs(8)'; after any --arg.")
STATIC_OPT = typer.Option([], "--static", metavar="NAME=VALUE", help="A static keyword "
                       "argument (a Python literal); repeat.")
HW_OPT = typer.Option(None, "--target", metavar="NAME", help=HW_TARGET_HELP)
MESH_OPT = typer.Option(None, "--mesh", metavar="AXES", help=HW_MESH_HELP)
SHARD_OPT = typer.Option([], "--shard", metavar="I=SPEC", help=HW_SHARD_HELP)
DEVICES_OPT = typer.Option(None, "--devices", metavar="N", help="Run on N virtual CPU devices.")
