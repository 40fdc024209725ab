"""`hloscope.read_profile(DIR, module)`: a profile taken elsewhere, joined to its module.

The profile is an XProf/TensorBoard folder (``plugins/profile/<run>/*.xplane.pb``)
or one ``.xplane.pb`` file, from a CPU, GPU or TPU run.  The module is the one
given: a `Module`, HLO text, a compiled function (``compiled.as_text()`` is
read), or a path to anything `hloscope.read` reads (a file, an XLA dump
folder); when that holds several modules, the one the profile ran is taken.
JAX's reader (`jax.profiler.ProfileData`) does not give the HLO that GPU and
TPU profiles keep in their metadata plane, so the module must be given.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from .._analysis._devices import Device
from .._analysis._kernels import kernel_graph
from .._errors import HloscopeError
from .._hlo._module import Module
from .._repr import clip
from ._kept import read_kept, select_runs
from ._match import measure
from ._read import KEPT_MODULE, Trace, read_trace
from ._times import MeasuredTimes

__all__ = ["pick_profiled", "read_profile"]


def _modules(module: Any) -> list[Module]:
    from .._sources._reader import read, read_text

    if isinstance(module, Module):
        return [module]
    if hasattr(module, "as_text") and not isinstance(module, str):
        return list(read_text(module.as_text(), filename="<compiled.as_text()>").modules)
    if isinstance(module, (str, os.PathLike)):
        text = os.fspath(module)
        if "HloModule" in text:
            return list(read_text(text, filename="<text>").modules)
        if os.path.isdir(text):
            from .._sources._inputs import read_inputs

            return [e.module for e in read_inputs(text).modules]
        return list(read(text).modules)
    raise HloscopeError(f"read_profile: module= is a {type(module).__name__}",
                        hint="give a hloscope Module, HLO text, a compiled function or the "
                             "path of an HLO file or XLA dump")


def pick_profiled(trace: Trace, modules: list[Module]) -> Module:
    """The module of `modules` that `trace` ran (the first, to be refused by `measure`
    with both names, when it ran none of them)."""
    ran = trace.modules
    for m in modules:
        if m.name in ran:
            return m
    if not modules:
        raise HloscopeError("no HLO module to join the profile to",
                            hint="give the module the profile ran")
    return modules[0]


def _signature(module: Module) -> dict[str, str]:
    """Each instruction's shape, without layouts, by name: what two prints of one compile
    share (an XLA dump and compiled.as_text() differ in metadata, not in these)."""
    return {i.name: i.shape.without_layout() for c in module.computations
            for i in c.instructions}


def same_compile(module: Module, kept: str, path: str) -> None:
    """Refuse `module` for the profile at `path` where the module kept beside it
    (`kept`, written by ``hloscope profile --keep``) is another compile: a profile of
    other shapes, or of another version of the function, whose kernels may have the same
    names (a CPU's or GPU's trace states no shapes)."""
    from .._sources._reader import read

    try:
        theirs = next((k for k in read(kept).modules if k.name == module.name), None)
    except HloscopeError:  # a damaged module.hlo: the profile's own join decides
        return
    if theirs is None:
        return  # another module's name: measure refuses it, naming both
    ours, kept_sig = _signature(module), _signature(theirs)
    if ours == kept_sig:
        return
    shaped = sorted((n for n in ours.keys() & kept_sig.keys() if ours[n] != kept_sig[n]),
                    key=lambda n: (ours[n].startswith("("), n))  # an array's name first
    if shaped:
        n = shaped[0]
        what = (f"its {n} is {clip(kept_sig[n], 60)} there and {clip(ours[n], 60)} in the "
                f"module given ({len(shaped)} instruction{'s' if len(shaped) > 1 else ''} "
                "of other shapes)")
    else:
        only = sorted(ours.keys() ^ kept_sig.keys())
        what = f"{len(only)} instructions are in one and not the other ({', '.join(only[:3])})"
    raise HloscopeError(
        f"the profile {path} was taken of the module kept beside it ({kept}), and the "
        f"module given ({module.name}) is another compile: {what}",
        hint=f"give {kept} (or no module: it is read from the folder), or a profile of the "
             "module given")


def read_profile(path: str | os.PathLike[str], module: Any = None, *,
                 device: Device | None = None) -> MeasuredTimes:
    """The profile at `path` (a folder of ``*.xplane.pb`` or one file) joined to `module`:
    each kernel's measured time (median and spread over the runs, calls per run, share of
    the step, roofline estimate for `device` beside it), time by source line and op_name
    scope, and the step taken apart.  Raises `HloscopeError` naming both modules when the
    profile ran another module.  Without `module`, the module a folder kept by ``hloscope
    profile --keep`` holds (its module.hlo); from such a folder, the runs and rounds the
    profile measured (its runs.json, `_kept`), so that the figures are the profile's.  See
    docs/profile.md."""
    kept = os.path.join(os.fspath(path), KEPT_MODULE)
    if module is None and os.path.isfile(kept):
        module = kept
    if module is None:
        raise HloscopeError(
            f"read_profile({os.fspath(path)!r}): give the module the profile ran",
            hint="module=compiled.as_text(), an HLO file or an XLA dump folder (JAX's "
                 "profile reader does not give the HLO a profile keeps)")
    trace = read_trace(os.fspath(path))
    rounds = None
    kept_runs = read_kept(os.fspath(path)) if os.path.isdir(path) else None
    if kept_runs is not None:  # kept by hloscope profile: the runs it measured, its rounds
        trace, rounds = select_runs(trace, kept_runs[0], kept_runs[1])
    m = pick_profiled(trace, _modules(module))
    # A module given for a kept folder must be the one kept (the folder's own, taken
    # above, is: nothing to compare)
    if kept_runs is not None and module is not kept and os.path.isfile(kept):
        same_compile(m, kept, os.fspath(path))
    times = measure(trace, kernel_graph(m), m, device=device,
                    device_label=None if device is None else device.name, rounds=rounds)
    notes = kept_runs[2] if kept_runs is not None else ()
    return dataclasses.replace(times, notes=notes) if notes else times
