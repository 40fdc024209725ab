"""The user's JAX function(s) named on the command line (FILE.py:FUNCTION), with the
command line's arguments, ready to compile: `prepare_call` (JAX started, the functions
loaded, their arguments made and checked) and `compile_function` (`hloscope.inspect` on
one of them), for inspect, lint and diff."""

from __future__ import annotations

from typing import Any

from ._targets import (array_args, call_inputs, hardware_target, load_target, require_jax,
                       static_kwargs)


def prepare_call(command_name: str, targets: list[str], arg: list[str], inputs: str | None,
                 static: list[str], devices: int | None, hw: str | None, mesh: str | None,
                 shard: list[str]) -> tuple[list[Any], list[Any], dict[str, Any],
                                            dict[str, Any]]:
    """JAX started (on `devices` virtual CPU devices, for the target `hw` with `mesh` and
    `shard`), the functions `targets` loaded and checked against the arguments (--arg
    shapes, then the --inputs call in the first target's file): the functions, the
    arguments, the static keyword arguments, and `inspect`'s target keywords.  Raises
    `HloscopeError`, or the user's own exception."""
    from .._jax._user import check_call

    require_jax(command_name)
    extra = hardware_target(hw, mesh, shard, devices)
    if devices is not None:
        from .._jax._compare import use_cpu_devices

        use_cpu_devices(devices)
    from .._jax._quiet import start_jax_quietly

    start_jax_quietly()
    kwargs = static_kwargs(static)
    fns = [load_target(t) for t in targets]
    args = array_args(arg, abstract=hw is not None) + (
        call_inputs(targets[0], inputs) if inputs else [])
    for fn in fns:
        check_call(fn, len(args), kwargs, given="--arg" if not inputs else "argument(s)")
    return fns, args, kwargs, extra


def compile_function(command_name: str, target: str, arg: list[str], inputs: str | None,
                     static: list[str], devices: int | None, hw: str | None,
                     mesh: str | None, shard: list[str], check: bool) -> Any:
    """`hloscope.inspect` on the function FILE.py:FUNCTION with the command line's
    arguments (raises `HloscopeError`, or the user's own exception)."""
    (fn,), args, kwargs, extra = prepare_call(command_name, [target], arg, inputs, static,
                                              devices, hw, mesh, shard)
    from .._checked._api import inspect as run_inspect

    return run_inspect(fn, *args, check=check, static_argnames=tuple(kwargs), **extra,
                       **kwargs)
