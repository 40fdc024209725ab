"""`hloscope profile`: run a JAX function under JAX's profiler and show each kernel's
measured time; and ``--profile DIR`` for the commands that read a module (kernels, lint,
report): a profile taken elsewhere, joined to the module given."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .. import _errors
from .._render._text import render_json
from ._common import WIDE_HELP, command, echo, fail, fail_user, text_width
from ._help import at_least
from ._targets import (array_args, call_inputs, load_target, require_jax, static_hint,
                       static_kwargs)

PROFILE_HELP = ("A profile of this module's runs: the folder jax.profiler.trace or "
                "TensorBoard's profiler wrote (plugins/profile/<run>/*.xplane.pb), or one "
                ".xplane.pb file; times are then measured, not estimated.")


def profile_of(path: Path | str, profile: Path | None) -> Path | None:
    """`--profile DIR` where given; else PATH itself where it is a folder ``hloscope
    profile --keep`` wrote (its module.hlo and runs.json): the module and its profile are
    read together (a trial: 'hloscope report KEEP_DIR' left the folder's profile out)."""
    if profile is not None:
        return profile
    from .._profile._kept import KEPT_RUNS
    from .._profile._read import KEPT_MODULE

    p = Path(path)
    if p.is_dir() and (p / KEPT_MODULE).is_file() and (p / KEPT_RUNS).is_file():
        return p
    return None


def read_measured(profile: Path, module, device=None, *,  # type: ignore[no-untyped-def]
                  side: str = ""):
    """The measured times of `profile` joined to `module`, estimates for `device` beside
    (the CLI's error on failure, said of `side`'s profile where given: A's, B's); as
    `read_profile` gives them, so a folder ``hloscope profile --keep`` wrote gives the
    profile's own runs and rounds."""
    from .._profile._load import read_profile

    try:
        require_jax("--profile")
        from .._jax._quiet import start_jax_quietly

        start_jax_quietly()
        return read_profile(str(profile), module, device=device)
    except _errors.HloscopeError as e:
        fail(_errors.HloscopeError(f"{side}'s profile: {e.message}", hint=e.hint) if side
             else e)


def _cpu_only_here() -> None:
    """On a machine with no GPU or TPU (and JAX_PLATFORMS unset), start JAX on the CPU
    alone: libtpu, where it is installed, would otherwise load and its profiler join the
    trace, keeping most of a core busy (docs/profile.md)."""
    import os

    from .._jax._quiet import import_jax_quietly

    if sys.platform != "linux" or os.environ.get("JAX_PLATFORMS") or any(
            os.path.exists(p) for p in ("/proc/driver/nvidia/version", "/dev/kfd")):
        return  # libtpu is Linux's; a GPU's plugin stays JAX's choice
    jax = import_jax_quietly()
    try:
        from jax._src import hardware_utils, xla_bridge

        if xla_bridge._backends or hardware_utils.num_available_tpu_chips_and_device_id()[0]:
            return
    except (ImportError, AttributeError):  # another JAX: leave its choice alone
        return
    jax.config.update("jax_platforms", "cpu")


@command("profile")
def profile_cmd(
    target: str = typer.Argument(..., metavar="TARGET", help="The function: FILE.py:FUNCTION "
                                 "or package.module:FUNCTION."),
    arg: list[str] = typer.Option([], "--arg", metavar="SHAPE", help="An argument's shape, "
                                  "e.g. f32[128,2] (zeros of that shape); repeat for each "
                                  "argument."),
    inputs: str | None = typer.Option(None, "--inputs", metavar="CALL", help="A call in the "
                                      "same file that returns the arguments, e.g. "
                                      "'make_inputs(8)'; after any --arg."),
    static: list[str] = typer.Option([], "--static", metavar="NAME=VALUE", help="A static "
                                     "keyword argument (a Python literal); repeat."),
    runs: int = typer.Option(10, "--runs", "-n", metavar="N", callback=at_least(1),
                             help="Profiled runs (at least)."),
    min_time: float = typer.Option(0.25, "--min-time", metavar="SECONDS", callback=at_least(0),
                                   help="Profile more runs until this long (at most "
                                        "2000 runs), in 4 rounds a moment apart, and more "
                                        "rounds (up to 16) while theirs disagree; 0: the "
                                        "runs asked for only."),
    warmup: int = typer.Option(3, "--warmup", metavar="N", callback=at_least(0),
                               help="Runs before profiling (after the first; and more "
                                    "until 0.25 s of them, then the same under a "
                                    "throwaway trace; none of it with 0)."),
    devices: int | None = typer.Option(None, "--devices", metavar="N",
                                       help="Run on N virtual CPU devices."),
    top: int = typer.Option(20, "--top", metavar="N", callback=at_least(1),
                            help="How many kernels to list."),
    keep: Path | None = typer.Option(None, "--keep", metavar="DIR", help="Keep the trace in "
                                     "DIR, with the module as DIR/module.hlo (for XProf or "
                                     "TensorBoard; hloscope kernels DIR/module.hlo "
                                     "--profile DIR reads it again)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema "
                                  "hloscope.profile/1)."),
    wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
) -> None:
    """Run a JAX function under JAX's profiler: each kernel's measured time.

    Compiled once, warmed up, run at least N times (and for at least --min-time)
    under jax.profiler; each kernel of its kernel graph gets its median time and
    spread over the runs, calls per run, share of the step and its roofline estimate
    beside it; time by source line and op_name scope; and the typical run's wall time
    taken apart (kernels, dispatch, idle, wait): the runs are taken in rounds, and the
    typical run is the one nearest the mean of the rounds' middle half (the median run
    is said beside it where the two differ).
    """
    from .._jax._user import check_call

    try:
        require_jax("profile")
        if devices is not None:
            from .._jax._compare import use_cpu_devices

            use_cpu_devices(devices)
        from .._jax._quiet import start_jax_quietly

        _cpu_only_here()
        start_jax_quietly()
        kwargs = static_kwargs(static)
        fn = load_target(target)
        args = array_args(arg) + (call_inputs(target, inputs) if inputs else [])
        check_call(fn, len(args), kwargs, given="--arg" if not inputs else "argument(s)")
        from .._profile._api import profile

        result = profile(fn, *args, runs=runs, warmup=warmup, min_time=min_time,
                         keep=str(keep) if keep is not None else None, **kwargs)
    except _errors.HloscopeError as e:
        fail(e)
    except Exception as e:  # noqa: BLE001  (the user's code raised: theirs to see)
        fail_user(e, static_hint(static))
    if json_out:
        sys.stdout.write(render_json(result.to_dict()))
        return
    from .._render._profile_text import render_profile

    width = text_width(wide)
    text = render_profile(result.times, top=top, width=width)
    if keep is not None:
        text += f"kept the trace in {keep}\n"
    text += "".join(f"note: {n}\n" for n in result.notes)
    echo(text, width)
