"""`hloscope diff`: two versions of a module (files, dumps, reports) or of a function
(compiled alike), every memory figure and kernel compared; with two profiles, each
kernel's measured time too."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .. import _errors
from .._render._text import format_bytes, render_json
from .._write import write_text
from ._common import (INPUT_HELP, MODULE_HELP, command, echo, fail, fail_user, pick,
                      text_width)
from ._functions import prepare_call
from ._options import FUNCTION_OPT, MESH_OPT, SHARD_OPT, WIDE_OPT
from ._profile_cmd import read_measured
from ._targets import HW_TARGET_HELP, is_function_target, static_hint

_DIFF_SIDE = ("The first version: " + INPUT_HELP[0].lower() + INPUT_HELP[1:-1] + "; or a JAX "
              "function, FILE.py:FUNCTION or package.module:FUNCTION (compiled with --arg).")


@command()
def diff(
    a: str = typer.Argument(..., metavar="A", help=_DIFF_SIDE),
    b: str = typer.Argument(..., metavar="B", help="The second version, of the same kind: "
                            "a file, or a function compiled with the same arguments."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.diff/1)."),
    output: Path | None = typer.Option(None, "-o", "--output", metavar="FILE", help="Also "
                                       "write an HTML page with the two kernel graphs, "
                                       "differences coloured."),
    module: str | None = typer.Option(None, "--module", "-m", metavar="NAME|INDEX",
                                      help=MODULE_HELP + " Applies to both inputs."),
    function: str | None = FUNCTION_OPT,
    arg: list[str] = typer.Option([], "--arg", metavar="SHAPE", help="With two functions: an "
                                  "argument's shape, e.g. f32[128,2] (zeros of that shape); "
                                  "repeat for each argument."),
    inputs: str | None = typer.Option(None, "--inputs", metavar="CALL", help="With two "
                                      "functions: a call in A's file that returns the "
                                      "arguments, e.g. 'make_inputs(8)'; after any --arg."),
    static: list[str] = typer.Option([], "--static", metavar="NAME=VALUE", help="With two "
                                     "functions: a static keyword argument (a Python "
                                     "literal); repeat."),
    devices: int | None = typer.Option(None, "--devices", metavar="N", help="With two "
                                       "functions: compile on N virtual CPU devices."),
    hw: str | None = typer.Option(None, "--target", metavar="NAME", help="With two "
                                  "functions: " + HW_TARGET_HELP),
    mesh: str | None = MESH_OPT,
    shard: list[str] = SHARD_OPT,
    profile: list[Path] = typer.Option([], "--profile", metavar="DIR", help="Twice, with "
                                       "two files: a profile of A's runs, then one of B's "
                                       "(see hloscope kernels --profile); adds each "
                                       "kernel's measured time change."),
    wide: bool = WIDE_OPT,
) -> None:
    """What changed between two versions of a program.

    Kernels matched by what they compute, arrays between kernels, every memory
    figure side by side and what is live at the peak on one side only,
    collectives, flops, and the advisor's findings.  A and B are two files, or
    two JAX functions (prog.py:attn prog.py:attn_f32 --arg bf16[128,64] ...)
    compiled here with the same arguments.
    """
    from .._analysis._diff import DIFF_SCHEMA, diff_modules
    from .._render._diff_text import render_diff

    timed = None
    try:
        if profile and (is_function_target(a) or is_function_target(b)):
            raise _errors.HloscopeError(
                "--profile is for two HLO files (the modules the profiles ran); A and B are "
                "functions",
                hint="profile each with hloscope profile FILE.py:F --keep DIR, then hloscope "
                     "diff A_DIR/module.hlo B_DIR/module.hlo --profile A_DIR --profile B_DIR")
        compile_options = (devices, hw, mesh, shard)
        result = _diff_functions(a, b, arg, inputs, static, module, function, compile_options)
        if result is None:
            if arg or inputs or static or devices is not None or hw or mesh or shard:
                raise _errors.HloscopeError("--arg, --inputs, --static, --devices, --target, "
                                            "--mesh and --shard are for two functions; A and "
                                            "B are files",
                                            hint="give FILE.py:FUNCTION for A and B")
            from .._analysis._memory import analyze_memory

            (_, ea), (_, eb) = pick(Path(a), module, function), pick(Path(b), module, function)
            ma, mb = ea.module, eb.module
            # XLA's own figures where a side carries them (a saved report's
            # memory_analysis(), a dump's buffer assignment), as `memory` gives them
            result = diff_modules(ma, mb, memory=tuple(  # type: ignore[arg-type]
                analyze_memory(e.module, xla=e.xla, memory_analysis=e.memory_analysis, top=0)
                for e in (ea, eb)))
        if profile:
            if len(profile) != 2:
                raise _errors.HloscopeError("--profile goes twice (A and B being two HLO "
                                            "files): A's profile folder, then B's",
                                            hint="hloscope diff a.hlo b.hlo --profile A_DIR "
                                                 "--profile B_DIR")
            from .._profile._diff import time_diff

            timed = time_diff(result.a, read_measured(profile[0], ma, side="A"), result.b,
                              read_measured(profile[1], mb, side="B"), result.pairs,
                              result.same_work)
        if output is not None:
            from .._render._diff_html import render_diff_html

            page = render_diff_html(result, timed)
            write_text(output, page)
    except _errors.HloscopeError as e:
        fail(e)
    except Exception as e:  # noqa: BLE001  (the user's code raised: theirs to see)
        fail_user(e, static_hint(static))
    if json_out:
        extra = {"measured": timed.to_dict()} if timed is not None else {}
        sys.stdout.write(render_json({"schema": DIFF_SCHEMA, **result.to_dict(), **extra}))
        return
    text = render_diff(result, width=text_width(wide))
    if timed is not None:
        from .._render._profile_text import render_time_diff

        text += "\n" + render_time_diff(timed, width=text_width(wide))
    if output is not None:
        text += f"wrote {output} ({format_bytes(len(page.encode('utf-8')))})\n"
    echo(text)




def _diff_functions(a: str, b: str, arg: list[str], inputs: str | None, static: list[str],
                    module: str | None, function: str | None,
                    compile_options: tuple):  # type: ignore[no-untyped-def,type-arg]
    """`hloscope diff` on two functions: both compiled with the same arguments (and
    `compile_options`: --devices, --target, --mesh, --shard, as inspect takes them) and
    compared with every memory figure; None when A and B are files."""
    from .._jax._compare import diff as diff_functions

    fa, fb = is_function_target(a), is_function_target(b)
    for side, is_fn in ((a, fa), (b, fb)):
        if not is_fn and side.endswith(".py") and not Path(side).is_dir():
            raise _errors.HloscopeError(
                f"{side} is a Python file, not HLO: name the function in it",
                hint=f"hloscope diff {side}:FUNCTION OTHER.py:FUNCTION --arg SHAPE ...")
    if not fa and not fb:
        return None
    if fa != fb:
        fn, path = (a, b) if fa else (b, a)
        raise _errors.HloscopeError(f"{fn} is a function and {path} a file: diff compares "
                                    "two of a kind",
                                    hint="give two functions (FILE.py:FUNCTION) or two HLO "
                                         "files")
    if module is not None or function is not None:
        raise _errors.HloscopeError("--module and --function pick a module in a file; A and "
                                    "B are functions")
    devices, hw, mesh, shard = compile_options
    fns, args, kwargs, extra = prepare_call("diff", [a, b], arg, inputs, static, devices, hw,
                                            mesh, shard)
    return diff_functions(*fns, *args, static_argnames=tuple(kwargs), **extra, **kwargs)
