"""What a benchmark records about where and what it ran, and the check of the
user's parameters against the program's real shapes.

Parameters follow jax-hpc-profiler's names (Function, Precision, X, Y, Z, PX,
PY, Backend, Nodes) so its users find their table; hloscope fills each from
the program (its largest array argument's global shape, dtype and device grid)
and, when the user gave one too, checks that the two agree.
"""

from __future__ import annotations

import datetime
import os
import platform
import socket
import subprocess
import sys
from typing import Any

from ._columns import JHP_PRECISION

__all__ = ["capture_metadata", "program_params"]

# jax-hpc-profiler's parameter names, in its order.
CANONICAL = {"function": "Function", "precision": "Precision", "x": "X", "y": "Y", "z": "Z",
             "px": "PX", "py": "PY", "backend": "Backend", "nodes": "Nodes"}
_ENV_PREFIXES = ("XLA_", "JAX_", "NCCL_", "LIBTPU_", "TPU_", "CUDA_VISIBLE_DEVICES")


def _largest_array(args: Any) -> Any:
    """The argument array with the most elements (the first of those alike): the problem a
    benchmark is sized by, not a layer norm's gain or a scale that comes before it."""
    import jax

    best, most = None, -1
    for leaf in jax.tree_util.tree_leaves(args):
        shape = getattr(leaf, "shape", None)
        if shape is None or not hasattr(leaf, "dtype") or len(shape) == 0:
            continue
        n = 1
        for d in shape:
            n *= int(d)
        if n > most:
            best, most = leaf, n
    return best


def _grid(leaf: Any) -> list[int] | None:
    """How many parts the array is split into along each axis (None: not a jax.Array)."""
    sharding = getattr(leaf, "sharding", None)
    if sharding is None or not hasattr(sharding, "shard_shape"):
        return None
    shard = sharding.shard_shape(leaf.shape)
    return [(n // s if s else 1) for n, s in zip(leaf.shape, shard)]


def program_params(name: str, args: Any, given: dict[str, Any]) -> tuple[dict[str, Any],
                                                                         list[dict[str, Any]]]:
    """The parameter table (user-given values win, the program fills the rest) and the
    checks of each user-given size, precision or grid against the program."""
    import jax

    given = {CANONICAL.get(k.lower(), k): v for k, v in given.items()}
    leaf = _largest_array(args)
    real: dict[str, Any] = {"Function": name}
    where = ""
    if leaf is not None:
        real["Precision"] = str(leaf.dtype)
        where = f"argument {leaf.dtype}{list(leaf.shape)}"
        for axis, n in zip("XYZ", leaf.shape):
            real[axis] = int(n)
        grid = _grid(leaf)
        if grid is not None:
            real["PX"] = grid[0]
            real["PY"] = grid[1] if len(grid) > 1 else 1
    real["Backend"] = jax.devices()[0].platform
    real["Nodes"] = jax.process_count()
    params: dict[str, Any] = {}
    for key in ("Function", "Precision", "X", "Y", "Z", "PX", "PY", "Backend", "Nodes"):
        if key in given or key in real:
            params[key] = given.get(key, real.get(key))
    for key, v in given.items():
        params.setdefault(key, v)
    checks: list[dict[str, Any]] = []
    for key in ("Precision", "X", "Y", "Z", "PX", "PY", "Nodes"):
        if key not in given:
            continue
        actual = real.get(key)
        convention = _convention(key, given, real)
        if convention:
            checks.append({"parameter": key, "given": given[key], "program": actual,
                           "ok": True, "note": convention})
            continue
        if actual is None:
            checks.append({"parameter": key, "given": given[key], "program": None, "ok": False,
                           "note": f"the program has no {key}" + (f" ({where})" if where else
                                                                  " (no array argument)")})
            continue
        ok = str(given[key]).lower() == str(actual).lower()
        note = where if key in ("Precision", "X", "Y", "Z") else (
            "parts along the argument's first two axes" if key in ("PX", "PY")
            else "jax.process_count()")
        if not ok and key in ("PX", "PY") and _swapped(given, real):
            note += "; the grid is the other way round (PX and PY swapped)"
        checks.append({"parameter": key, "given": given[key], "program": actual, "ok": ok,
                       "note": note})
    return params, checks




def _convention(key: str, given: dict[str, Any], real: dict[str, Any]) -> str:
    """Why a given value that differs from the program is still right by jax-hpc-profiler's
    conventions ("" when it is not one of them): the precision of a complex type is its
    parts' (complex64 is float32); its `report` fills y and z with x for a program of
    fewer dimensions; an unsharded program runs on a 1 x 1 grid."""
    v, actual = str(given[key]).lower(), real.get(key)
    if key == "Precision" and JHP_PRECISION.get(str(actual)) == v:
        return f"{actual} is {v} precision (jax-hpc-profiler's convention)"
    if key in ("Y", "Z") and actual is None and "X" in real:
        if v == str(real["X"]) or v == str(given.get("X", "")).lower():
            dims = sum(1 for k in ("X", "Y", "Z") if k in real)
            return (f"the program has {dims} dimension{'s' if dims != 1 else ''}; "
                    f"jax-hpc-profiler writes {key.lower()} = x for it")
    if key in ("PX", "PY") and actual is None and "PX" not in real and v == "1":
        return "the program is not sharded: a 1 x 1 grid"
    return ""


def _swapped(given: dict[str, Any], real: dict[str, Any]) -> bool:
    try:
        return (int(given.get("PX", -1)), int(given.get("PY", -1))) == (real.get("PY"),
                                                                         real.get("PX"))
    except (TypeError, ValueError):
        return False


def _git(path: str | None) -> dict[str, Any] | None:
    """The commit (and whether the tree has changes) of the repository holding `path`."""
    if not path or not os.path.exists(path):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    try:
        head = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", folder, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=5)
        return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip()),
                "file": os.path.abspath(path)}
    except (OSError, subprocess.SubprocessError):
        return None


def devices_used(args: Any, report: Any) -> int:
    """The devices the program runs on, not those JAX sees: the devices its array
    arguments are placed on (together), or its module's partitions times replicas where
    that is more (a program that shards inside with a mesh of its own); with several
    processes whose arguments are their own (not global arrays), that on each process
    times the processes; 1 for a program on one device (with 8 CPU devices visible, a
    single-device program's results were plotted as an 8-device point of a scaling
    curve)."""
    import jax

    used: set[Any] = set()
    local = True  # every argument on this process's devices: each process runs its own
    for leaf in jax.tree_util.tree_leaves(args):
        sharding = getattr(leaf, "sharding", None)
        used |= set(getattr(sharding, "device_set", ()) or ())
        local = local and bool(getattr(leaf, "is_fully_addressable", True))
    module = getattr(report, "module", None)
    compiled = 1
    if module is not None:
        compiled = max(module.num_partitions, 1) * max(module.replica_count, 1)
    here = max(len(used), compiled, 1)
    return here * jax.process_count() if local else here


def capture_metadata(fn: Any, args: Any, report: Any) -> dict[str, Any]:
    """Devices, mesh and shardings, versions, XLA flags and environment, host, time, and
    the git commit of the file that defines `fn`."""
    import inspect as _inspect

    import jax

    from .. import __version__

    devices = jax.devices()
    leaf = _largest_array(args)
    mesh = None
    sharding = getattr(leaf, "sharding", None)
    if sharding is not None and hasattr(sharding, "mesh"):
        try:
            mesh = {str(k): int(v) for k, v in sharding.mesh.shape.items()}
        except Exception:  # noqa: BLE001  (mesh kinds vary across JAX versions)
            mesh = None
    try:
        source = _inspect.getsourcefile(getattr(fn, "__wrapped__", fn))
    except TypeError:
        source = None
    return {
        "device_kind": devices[0].device_kind, "platform": devices[0].platform,
        "device_count": devices_used(args, report), "visible_devices": len(devices),
        "local_device_count": jax.local_device_count(),
        "process_count": jax.process_count(), "process_index": jax.process_index(),
        "mesh": mesh, "input_shardings": report.shardings.get("inputs", []),
        "output_shardings": report.shardings.get("outputs", []),
        "per_device_input_shapes": report.shardings.get("per_device_input_shapes", []),
        "jax": report.versions.get("jax"), "jaxlib": report.versions.get("jaxlib"),
        "python": platform.python_version(), "hloscope": __version__,
        "environment": {k: v for k, v in sorted(os.environ.items())
                        if k.startswith(_ENV_PREFIXES)},
        "host": socket.gethostname(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv), "git": _git(source),
    }
