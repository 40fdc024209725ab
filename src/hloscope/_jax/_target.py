"""Compile for a GPU or TPU that is not here: topologies, meshes and abstract arguments.

JAX compiles ahead of time for a device description it does not have
(``jax.experimental.topologies``): for a GPU, JAX's CUDA plugin (``jax-cuda12-plugin``
or ``jax-cuda13-plugin``) reads one of XLA's target configs and CUDA's nvcc wheel
supplies ptxas; for a TPU, libtpu knows
every topology by name.  `prepare` turns a target name, a mesh and partition specs
into what `inspect` traces with: a `jax.sharding.Mesh` over the target's devices and
`ShapeDtypeStruct` arguments sharded on it.  Nothing runs and nothing is allocated.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import HloscopeError
from .._target._catalog import Target, chip_device, device_limit, gpu_config_text, parse_target
from .._target._gpu_spec import compute_capability, parse_textproto, strip_fields
from ._quiet import import_jax_quietly, quiet_native_stderr

__all__ = ["Prepared", "abstract_args", "check_mesh", "parse_mesh", "parse_spec", "prepare",
           "retarget_jit"]

GPU_EXTRA = "pip install 'hloscope[gpu-target]'"
TPU_EXTRA = "pip install 'hloscope[tpu-target]'"

# -- prerequisites ----------------------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# JAX's CUDA plugins, one per CUDA major version (`jax[cuda12]`, `jax[cuda13]`): either
# compiles for any of XLA's GPU target configs.
CUDA_PLUGINS = ("jax-cuda12-plugin", "jax-cuda13-plugin")
CUDA13_OLDEST = (7, 5)  # CUDA 13 dropped the GPUs before Turing (the V100 is 7.0)


def cuda_plugin(jax_version: str) -> tuple[str, str] | None:
    """The installed CUDA plugin, as (distribution, version): the one whose version is
    jax's where both are installed, else the first found; None where there is none."""
    found = [(d, v) for d in CUDA_PLUGINS if (v := _version(d)) is not None
             and importlib.util.find_spec(d.replace("-", "_")) is not None]
    return next((f for f in found if f[1] == jax_version), found[0] if found else None)


def _has_ptxas() -> bool:
    """Whether CUDA's ptxas is where JAX looks for it: the pip wheel of CUDA 13's nvcc
    (``nvidia/cu13/bin``), of CUDA 12's (``nvidia/cuda_nvcc/bin``), or on the PATH."""
    for package in ("nvidia.cu13", "nvidia.cuda_nvcc"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):  # no `nvidia` namespace at all
            spec = None
        for root in getattr(spec, "submodule_search_locations", None) or []:
            if os.access(os.path.join(root, "bin", "ptxas"), os.X_OK):
                return True
    return _on_path("ptxas")


def check_extras(target: Target, jax_version: str) -> dict[str, str]:
    """The versions of the packages the target needs; raises with the install line when
    one is missing or does not match JAX."""
    if target.platform == "gpu":
        found = cuda_plugin(jax_version)
        if found is None:
            raise HloscopeError(f"compiling for {target.name} needs JAX's CUDA plugin, "
                                "which is not installed", hint=GPU_EXTRA)
        dist, plugin = found
        if plugin != jax_version:
            raise HloscopeError(
                f"{dist} {plugin} does not match jax {jax_version}",
                hint=f"pip install '{dist}=={jax_version}' (the plugin's version "
                     "must equal jax's)")
        cc = compute_capability(parse_textproto(gpu_config_text(target.chip)))
        if dist == "jax-cuda13-plugin" and cc < CUDA13_OLDEST:
            raise HloscopeError(
                f"CUDA 13 does not compile for {target.name} (compute capability "
                f"{cc[0]}.{cc[1]}; CUDA 13 compiles for {CUDA13_OLDEST[0]}.{CUDA13_OLDEST[1]} "
                "and newer), and JAX's CUDA plugin here is CUDA 13's",
                hint="compile for it with CUDA 12's plugin, in an environment with jax[cuda12]: "
                     + GPU_EXTRA)
        pjrt_dist = dist.replace("-plugin", "-pjrt")
        pjrt = _version(pjrt_dist)
        if pjrt is not None and pjrt != jax_version:
            raise HloscopeError(f"{pjrt_dist} {pjrt} does not match jax {jax_version}",
                                hint=f"pip install '{pjrt_dist}=={jax_version}'")
        if not _has_ptxas():
            raise HloscopeError(f"compiling for {target.name} needs CUDA's ptxas, which is "
                                "not installed", hint=GPU_EXTRA)
        return {dist: plugin}
    libtpu = _version("libtpu")
    if libtpu is None or importlib.util.find_spec("libtpu") is None:
        raise HloscopeError(f"compiling for {target.name} needs libtpu, which is not "
                            "installed", hint=TPU_EXTRA)
    return {"libtpu": libtpu}


def _on_path(program: str) -> bool:
    return any(os.access(os.path.join(p, program), os.X_OK)
               for p in os.environ.get("PATH", "").split(os.pathsep) if p)


# -- topology ---------------------------------------------------------------------------

_NO_FIELD = re.compile(r'has no field named "([A-Za-z0-9_]+)"')


def _register_cuda_plugin_late() -> None:
    """When JAX started before hloscope could set JAX_SKIP_CUDA_CONSTRAINTS_CHECK (a
    notebook that used JAX first), the CUDA plugin's version check failed on this
    machine without CUDA and the plugin was not registered: register it now, for
    compiles only (JAX's backends, already started, stay as they are)."""
    try:
        from jax._src import xla_bridge as xb

        factories = getattr(xb, "_topology_factories", None)
        if factories is None or "cuda" in factories:
            return
        import jax

        found = cuda_plugin(jax.__version__)
        if found is None:
            return
        plugin = importlib.import_module(  # jax_plugins.xla_cuda12 or xla_cuda13
            "jax_plugins.xla_cuda" + found[0].split("-")[1].removeprefix("cuda"))
        with quiet_native_stderr(replay=False):
            plugin.initialize()
    except Exception:  # noqa: BLE001  (private APIs: the error below says what to do)
        return


def _gpu_topology(target: Target) -> tuple[Any, list[str]]:
    from jax.experimental import topologies

    _register_cuda_plugin_late()
    text = gpu_config_text(target.chip)
    stripped: list[str] = []
    for _ in range(32):
        with quiet_native_stderr(replay=False) as log:
            try:
                return topologies.get_topology_desc(
                    platform="cuda", target_config=text, topology=target.topology), stripped
            except Exception as e:  # noqa: BLE001  (XLA's errors have no common type)
                error = e
        m = _NO_FIELD.search("".join(log))
        if "not implemented" in str(error):
            raise HloscopeError(
                f"JAX started without its CUDA plugin, so it cannot compile for {target.name}",
                hint="set JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 (or JAX_PLATFORMS=cpu) before JAX "
                     "starts, or call hloscope.inspect(..., target=...) before JAX's first "
                     "use") from None
        if m is None or m.group(1) in stripped:
            raise HloscopeError(f"JAX's CUDA plugin cannot describe {target.name}: "
                                f"{str(error).splitlines()[0]}",
                                hint="check that JAX's CUDA plugin (jax-cuda12-plugin or "
                                     "jax-cuda13-plugin) matches jax") from None
        stripped.append(m.group(1))
        text = strip_fields(text, {m.group(1)})
    raise HloscopeError(f"JAX's CUDA plugin rejects the config of {target.name}")


def _tpu_topology(target: Target) -> Any:
    from jax.experimental import topologies

    kwargs: dict[str, Any] = {"num_slices": target.slices} if target.slices > 1 else {}
    with quiet_native_stderr(replay=False):
        try:
            return topologies.get_topology_desc(target.topology, "tpu", **kwargs)
        except Exception as e:  # noqa: BLE001
            first = str(e).splitlines()[0]
    if "chips_per_host_bounds" in first:
        # A slice smaller than one host (v5e:1x1, v6e:2x1): all its chips on one host.
        dims = tuple(int(d) for d in target.topology.partition(":")[2].split("x"))
        dims = (dims + (1, 1, 1))[:3]
        with quiet_native_stderr(replay=False):
            try:
                return topologies.get_topology_desc(target.topology, "tpu",
                                                    chips_per_host_bounds=dims, **kwargs)
            except Exception as e:  # noqa: BLE001
                first = str(e).splitlines()[0]
    if "lockfile" in first:
        raise HloscopeError(f"libtpu cannot describe {target.name}: another process holds "
                            "libtpu's lock file", hint="set ALLOW_MULTIPLE_LIBTPU_LOAD=1 before "
                            "JAX starts (hloscope sets it when it starts JAX itself)")
    raise HloscopeError(f"libtpu cannot describe {target.name}: {first}",
                        hint="give a topology libtpu knows, such as tpu-v5e:2x4 or "
                             "tpu-v5p:2x2x1")


# -- meshes and shardings ---------------------------------------------------------------

def parse_mesh(text: str | Mapping[str, int] | None, devices: int) -> dict[str, int]:
    """``data=8``, ``data=2,model=4`` or ``2x4:data,model`` (or a mapping) as axis sizes;
    the default is one axis ``data`` over every device."""
    if text is None or text == "":
        return {"data": devices}
    if isinstance(text, Mapping):
        axes = {str(k): int(v) for k, v in text.items()}
    else:
        axes = {}
        t = text.strip()
        if ":" in t:
            shape, _, names = t.partition(":")
            sizes = shape.split("x")
            parts = [n.strip() for n in names.split(",")]
            if len(sizes) != len(parts) or not all(s.isdigit() for s in sizes):
                raise HloscopeError(f"--mesh {text!r}: give SIZESxSIZES:NAME,NAME such as "
                                    "2x4:data,model, with one name per size")
            if len(set(parts)) != len(parts):
                raise HloscopeError(f"--mesh {text!r}: an axis is named twice",
                                    hint="name each axis once, such as 2x4:data,model")
            axes = dict(zip(parts, (int(s) for s in sizes)))
        else:
            for item in t.split(","):
                name, eq, size = item.partition("=")
                if not eq or not size.strip().isdigit() or not name.strip():
                    raise HloscopeError(f"--mesh {text!r}: give NAME=SIZE[,NAME=SIZE] such "
                                        "as data=2,model=4")
                if name.strip() in axes:
                    raise HloscopeError(f"--mesh {text!r}: the axis {name.strip()!r} is "
                                        "given twice", hint="name each axis once, such as "
                                                            "data=2,model=4")
                axes[name.strip()] = int(size)
    if any(not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", a) for a in axes):
        raise HloscopeError(f"mesh {text!r}: axis names are identifiers such as data")
    total = 1
    for size in axes.values():
        if size < 1:
            raise HloscopeError(f"mesh {text!r}: every axis needs at least one device")
        total *= size
    if total != devices:
        shape = " x ".join(f"{a}={s}" for a, s in axes.items())
        raise HloscopeError(f"the mesh {shape} has {total} devices but the target has "
                            f"{devices}", hint="make the axis sizes multiply to the number of "
                                               "devices, or choose another target")
    return axes


def parse_spec(text: Any) -> Any:
    """``data,None`` or ``(data,model),None`` as a `PartitionSpec` (one entry per array
    dimension); a `PartitionSpec` or a sequence is taken as it is."""
    from jax.sharding import PartitionSpec as P

    if isinstance(text, P):
        return text
    if text is None:
        return P()
    if isinstance(text, (tuple, list)):
        return P(*text)
    entries: list[Any] = []
    depth = 0
    for ch in str(text):
        depth += (ch == "(") - (ch == ")")
        if depth < 0 or depth > 1:
            break
    if depth != 0:
        raise HloscopeError(f"partition spec {str(text)!r}: its parentheses do not pair up",
                            hint="group the axes of one dimension in one pair, such as "
                                 "(data,model),None")
    for item in re.findall(r"\([^)]*\)|[^,]+", str(text)):
        item = item.strip()
        if item.startswith("("):
            names = tuple(n.strip() for n in item[1:-1].split(",") if n.strip())
            entries.append(names or None)
        elif item in ("None", "none", "-", ""):
            entries.append(None)
        else:
            entries.append(item)
    return P(*entries)


def _mesh_words(shape: Mapping[str, int]) -> str:
    total = 1
    for n in shape.values():
        total *= n
    axes = " x ".join(f"{a}={n}" for a, n in shape.items()) or "one device"
    return f"{axes} ({total} device{'' if total == 1 else 's'})"


def check_mesh(what: str, own: Any, spec: Any, mesh: Any, notes: list[str]) -> None:
    """A sharding built on the mesh `own` laid on the target's `mesh` with its partition
    spec: silent where both meshes are the same shape; a note where every axis the spec
    uses has the same size on the target (each device holds the same piece); else an
    error naming both meshes (the pieces would not be the ones the user built)."""
    own_shape = dict(getattr(own, "shape", {}) or {})
    target_shape = dict(mesh.shape)
    if not own_shape or own_shape == target_shape:
        return
    used = [n for e in spec for n in ((e,) if isinstance(e, str) else (e or ()))]
    if all(target_shape.get(n) == own_shape.get(n) for n in used):
        notes.append(f"{what} was sharded on the mesh {_mesh_words(own_shape)}; laid on the "
                     f"target's mesh {_mesh_words(target_shape)} with the same partition "
                     f"spec {tuple(spec)}, each device holds the same piece")
        return
    raise HloscopeError(
        f"{what} is sharded for the mesh {_mesh_words(own_shape)}, but the target's mesh is "
        f"{_mesh_words(target_shape)}: its pieces would not be the ones it was built with",
        hint="compile for a target with that mesh (--target with as many devices, --mesh "
             "with those axes), or give the argument's partition spec for this target with "
             "--shard (shard= in Python)")


def abstract_args(args: Sequence[Any], mesh: Any,
                  shard: Mapping[int, Any] | Sequence[Any] | None,
                  notes: list[str] | None = None) -> list[Any]:
    """Every array leaf of `args` as a `ShapeDtypeStruct` on `mesh`: with the partition
    spec given for its argument, else the spec of its own `NamedSharding` (which must be
    on a mesh of the target's shape, see `check_mesh`; notes go to `notes`), else
    replicated.  Other leaves (Python numbers, static values) pass unchanged."""
    notes = [] if notes is None else notes
    import jax
    from jax.sharding import NamedSharding

    specs: dict[int, Any] = {}
    if isinstance(shard, Mapping):
        specs = {int(k): parse_spec(v) for k, v in shard.items()}
    elif shard is not None:
        specs = {i: parse_spec(v) for i, v in enumerate(shard) if v is not None}
    bad = [i for i in specs if not 0 <= i < len(args)]
    if bad:
        raise HloscopeError(f"a partition spec names argument {bad[0]}, but the function "
                            f"gets {len(args)} argument(s)",
                            hint="number the arguments from 0")
    axes = set(mesh.axis_names)
    out = []
    sharded: list[int] = []
    for i, arg in enumerate(args):
        def leaf(path: Any, x: Any, i: int = i) -> Any:
            if not (hasattr(x, "shape") and hasattr(x, "dtype")):
                return x
            # a leaf of a pytree argument by its path: argument 1['step']
            where = f"argument {i}" + (jax.tree_util.keystr(path) if path else "")
            spec = specs.get(i)
            if spec is None:
                own = getattr(x, "sharding", None)
                spec = getattr(own, "spec", None)
                if spec is None:
                    from jax.sharding import PartitionSpec as P

                    spec = P()
                else:
                    check_mesh(f"argument {i}", getattr(own, "mesh", None), spec, mesh,
                               notes)
            used = {n for e in spec for n in ((e,) if isinstance(e, str) else (e or ()))}
            if used - axes:
                raise HloscopeError(
                    f"argument {i} is sharded over {', '.join(sorted(used - axes))}, which "
                    f"the mesh ({', '.join(mesh.axis_names)}) does not have",
                    hint="name the mesh axes with --mesh (mesh= in Python), such as "
                         "--mesh data=8")
            if len(spec) > len(x.shape):
                raise HloscopeError(
                    f"{where} has {len(x.shape)} dimension(s) but its partition spec "
                    f"{tuple(spec)} names {len(spec)}",
                    hint="--shard gives every array of a pytree argument the same spec; "
                         "shard its leaves one by one in make_inputs "
                         "(jax.ShapeDtypeStruct(shape, dtype, sharding=...))" if path else
                    "give one entry per dimension, or fewer")
            for d, e in enumerate(spec):
                names = (e,) if isinstance(e, str) else (e or ())
                parts = 1
                for n in names:
                    parts *= mesh.shape[n]
                if parts > 1 and x.shape[d] % parts:
                    raise HloscopeError(
                        f"{where}: dimension {d} of size {x.shape[d]} does not split "
                        f"into {parts} equal parts over {', '.join(names)}",
                        hint="choose sizes the mesh axes divide, or another partition spec")
            if any(e is not None and e != () for e in spec):
                sharded.append(i)
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, spec))

        out.append(jax.tree_util.tree_map_with_path(leaf, arg))
    if mesh.size > 1 and args and not sharded:
        notes.append(f"no argument is sharded over the target's {mesh.size} devices: unless "
                     "the function shards its values itself, every device holds every "
                     "argument whole (give a partition spec with --shard, shard= in Python)")
    return out


def retarget_jit(fn: Any, mesh: Any,
                 notes: list[str] | None = None) -> tuple[Any, dict[int, Any]]:
    """A function `jax.jit`-ted for real devices, made again for `mesh`: the same static
    and donated arguments, its `NamedSharding`s' partition specs laid on the target's mesh
    (returned per argument, for `abstract_args`), its output shardings too.  Anything
    else (not a jitted function, shardings of another kind, a JAX without these
    attributes) comes back as it was.  Shardings on a mesh of another shape than the
    target's are checked as `check_mesh` does (notes go to `notes`)."""
    notes = [] if notes is None else notes
    info = getattr(fn, "_jit_info", None)
    wrapped = getattr(fn, "__wrapped__", None)
    if info is None or wrapped is None:
        return fn, {}
    try:
        import jax
        from jax.sharding import NamedSharding

        def specs(treedef: Any, leaves: Any, what: str) -> Any:
            if not all(isinstance(leaf, NamedSharding) for leaf in leaves):
                return None
            for leaf in leaves:
                check_mesh(what, leaf.mesh, leaf.spec, mesh, notes)
            return jax.tree_util.tree_unflatten(treedef, [leaf.spec for leaf in leaves])

        in_specs = specs(info.in_shardings_treedef, info.in_shardings_leaves,
                         "an in_sharding of the jitted function") \
            if info.in_shardings_leaves else None
        out_specs = specs(info.out_shardings_treedef, info.out_shardings_leaves,
                          "an out_sharding of the jitted function") \
            if info.out_shardings_leaves else None
        kwargs: dict[str, Any] = {
            "static_argnums": info.static_argnums, "static_argnames": info.static_argnames,
            "donate_argnums": info.donate_argnums, "donate_argnames": info.donate_argnames}
        if out_specs is not None:
            kwargs["out_shardings"] = jax.tree_util.tree_map(
                lambda spec: NamedSharding(mesh, spec), out_specs,
                is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
        per_arg: dict[int, Any] = {}
        if isinstance(in_specs, (tuple, list)):
            per_arg = {i: spec for i, spec in enumerate(in_specs)
                       if isinstance(spec, jax.sharding.PartitionSpec)}
        return jax.jit(wrapped, **kwargs), per_arg
    except HloscopeError:
        raise
    except Exception:  # noqa: BLE001  (JAX's private attributes differ between versions)
        return fn, {}


@dataclass
class Prepared:
    """A target ready to trace for: its mesh and what the report records about it."""

    target: Target
    mesh: Any
    devices: list[Any]
    info: dict[str, Any] = field(default_factory=dict)


def prepare(name: str, mesh: str | Mapping[str, int] | None = None) -> Prepared:
    """Describe the target's devices (no hardware needed) and lay `mesh` over them."""
    target = parse_target(name)
    # The CUDA plugin registers itself for ahead-of-time compiles on a machine without
    # a GPU only when its constraints check is skipped; it is read when JAX starts.
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    # libtpu takes a lock file so that one process owns a machine's TPU chips; compiling
    # for a topology uses none, so other processes compiling at the same time may too.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    jax = import_jax_quietly()
    versions = check_extras(target, jax.__version__)
    stripped: list[str] = []
    if target.platform == "gpu":
        topo, stripped = _gpu_topology(target)
    else:
        topo = _tpu_topology(target)
    devices = list(topo.devices)
    axes = parse_mesh(mesh, len(devices))
    from jax.experimental import topologies

    try:
        jmesh = topologies.make_mesh(topo, tuple(axes.values()), tuple(axes))
    except Exception as e:  # noqa: BLE001
        if "megacore" in str(e):
            # Two devices per chip (TPU v4 and 7x here): JAX's mesh helper wants one; the
            # devices in their own order make a valid mesh.
            import numpy as np

            from jax.sharding import Mesh

            jmesh = Mesh(np.array(devices, dtype=object).reshape(tuple(axes.values())),
                         tuple(axes))
        else:
            raise HloscopeError(f"cannot lay the mesh {axes} over {target.name}: "
                                f"{str(e).splitlines()[0]}",
                                hint="choose axis sizes that tile the topology") from None
    device, hbm = chip_device(target.chip.key)
    per_chip = max(1, len(devices) // max(1, target.devices)) if target.platform == "tpu" else 1
    limit = device_limit(target.chip.key, devices_per_chip=per_chip)
    info = {
        "name": target.name, "chip": target.chip.key, "title": target.chip.title,
        "platform": target.platform, "topology": target.topology, "slices": target.slices,
        "devices": len(devices), "device_kind": devices[0].device_kind,
        "mesh": dict(axes), "hbm_bytes": hbm // per_chip, "limit_bytes": limit.bytes,
        "limit": limit.what, "limit_source": limit.source,
        "flops": {k: v / per_chip for k, v in sorted(device.flops.items())},
        "bandwidth": device.bandwidth / per_chip, "source": device.source,
        "devices_per_chip": per_chip, "stripped_fields": stripped, "packages": versions,
    }
    return Prepared(target, jmesh, devices, info)
