"""Run any HLO module on the PjRt runtime that JAX ships, and say what came out.

`run_module` takes a module from any frontend (JAX, torch_xla, TensorFlow) as it is:
`_exec` decides how it compiles (SPMD-partitioned, already one program per device, or
optimized already and compiled without XLA's passes) and holds the one route from HLO
text to an executable; `_values` makes the inputs (every element type, from specs or
files, conversions announced) and compares outputs.  Inputs are placed, and outputs
gathered, with the executable's shardings (or the module's, when it is already
partitioned); 64-bit types pass unchanged under a thread-local ``jax.enable_x64``, so the
user's own JAX setting is left alone.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

from .._errors import HloscopeError
from .._repr import clip
from .._hlo._module import Instruction, Module
from ._exec import Plan
from ._values import InputValue, compare_outputs, make_input, reduction_size

__all__ = ["RunResult", "run_module"]



@dataclass
class RunResult:
    """What `run_module` did: outputs (global values and per-device shards), times, the
    partitioned module, and memory before and after partitioning."""

    module: str
    partitions: int
    spmd: bool
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    times: list[float]
    compile_time: float
    partitioned_text: str
    memory_before: dict[str, int | None]
    memory_after: dict[str, int | None]
    collectives: list[dict[str, Any]] = field(default_factory=list)
    check: dict[str, Any] | None = None
    values: list[Any] = field(default_factory=list, repr=False)
    plan: dict[str, Any] = field(default_factory=dict)
    how: str = ""
    notes: list[str] = field(default_factory=list)
    expect: dict[str, Any] | None = None
    saved: str | None = None

    def __repr__(self) -> str:
        from .._bench._stats import time_stats

        timing = ""
        if self.times:
            s = time_stats(self.times)
            timing = f", median {s['median'] * 1e3:.4g} ms over {s['runs']} runs"
        check = "" if self.check is None else (
            ", check ok" if self.check.get("ok") else ", check FAILED")
        if self.expect is not None:
            check += ", expected outputs ok" if self.expect["ok"] else \
                ", expected outputs DIFFER"
        return clip(f"RunResult({self.module}: {self.partitions} partition(s)"
                    f"{', SPMD' if self.spmd else ''}, {len(self.outputs)} output(s)"
                    f"{timing}{check})")

    def to_dict(self) -> dict[str, Any]:
        from .._bench._stats import time_stats

        return {"schema": "hloscope.run/1", "module": self.module,
                "partitions": self.partitions, "spmd": self.spmd, "inputs": self.inputs,
                "outputs": self.outputs, "times": self.times,
                "stats": time_stats(self.times), "compile_time": self.compile_time,
                "memory_before": self.memory_before, "memory_after": self.memory_after,
                "collectives": self.collectives, "check": self.check,
                "expect": self.expect, "plan": self.plan, "how": self.how,
                "notes": self.notes, "saved_outputs": self.saved,
                "partitioned_module": self.partitioned_text}


def _memory_stats(exe: Any) -> dict[str, int | None]:
    try:
        s = exe.get_compiled_memory_stats()
    except Exception:  # noqa: BLE001
        return {}
    return {"argument": s.argument_size_in_bytes, "output": s.output_size_in_bytes,
            "temporary": s.temp_size_in_bytes, "alias": s.alias_size_in_bytes,
            "generated_code": s.generated_code_size_in_bytes}


def _summary(value: Any) -> dict[str, Any]:
    import numpy as np

    a = np.asarray(value)
    out: dict[str, Any] = {"shape": list(a.shape), "dtype": str(a.dtype)}
    if a.size and a.dtype != bool and not np.issubdtype(a.dtype, np.complexfloating):
        f = a.astype(np.float64)
        out.update({"min": float(f.min()), "max": float(f.max()), "mean": float(f.mean())})
    flat = a.reshape(-1)
    first = [x.item() if hasattr(x, "item") else x for x in flat[:6]]
    out["first"] = [str(x) if isinstance(x, complex) else x for x in first]
    return out


def _shardings(plan: Plan, exe: Any, m: Module, outputs: int) -> tuple[list[Any], list[Any]]:
    """The parameter and output shardings (XLA HloSharding objects, None: replicated):
    the executable's own after SPMD partitioning, else the module's annotations (an
    already-partitioned module keeps them on its parameters and root)."""
    from jax._src.lib import xla_client as xc

    params = m.entry.parameters
    if plan.spmd:
        def hlo(op: Any) -> Any:
            if op is None:
                return None
            s = op if isinstance(op, xc.HloSharding) else xc.HloSharding.from_proto(op)
            return s if s.is_tiled() else None

        return ([hlo(s) for s in exe.get_parameter_shardings() or [None] * len(params)],
                [hlo(s) for s in exe.get_output_shardings() or [None] * outputs])

    def parse(text: str | None) -> Any:
        if not text or not plan.partitioned:
            return None
        try:
            return xc.HloSharding.from_string(text)
        except Exception:  # noqa: BLE001  (a form this XLA does not read: replicated)
            return None

    ins = [parse(p.attr("sharding")) for p in params]
    root = parse(m.entry.root.attr("sharding"))
    if root is not None and m.entry.root.shape.is_tuple:
        elems = list(root.tuple_elements()) if root.tuple_elements() else []
        outs = [e if e.is_tiled() else None for e in elems]
    else:
        outs = [root if root is not None and root.is_tiled() else None]
    outs += [None] * (outputs - len(outs))
    return [s if s is not None and s.is_tiled() else None for s in ins], outs[:outputs]


def _place(host: list[Any], shardings: list[Any], devices: list[Any]) -> list[Any]:
    """The inputs on the devices, split as the shardings say (whole on each device where
    there is none)."""
    import jax
    from jax._src.lib import xla_client as xc
    from jax._src.sharding_impls import GSPMDSharding

    if len(devices) == 1:
        return [jax.device_put(h, devices[0]) for h in host]
    dl = xc.DeviceList(tuple(devices))
    return [jax.device_put(h, GSPMDSharding(dl, s if s is not None
                                            else xc.HloSharding.replicate()))
            for h, s in zip(host, shardings)]


def _execute(exe: Any, args: list[Any], name: str = "the module") -> list[list[Any]]:
    """One run on placed inputs, waited for: each output's per-device arrays."""
    import jax

    from ._exec import CompileError

    try:
        shards = exe.execute_sharded(args).disassemble_into_single_device_arrays()
        jax.block_until_ready(shards)
    except Exception as e:  # noqa: BLE001  (XlaRuntimeError: a RET_CHECK while running)
        msg = str(e).strip()
        raise CompileError(f"{name}: XLA compiled the module but cannot run it: "
                           + (msg.splitlines()[0][:500] if msg else type(e).__name__),
                           hint="see XLA's message; hloscope's own commands (summary, "
                                "memory, kernels) still read the module") from None
    return shards


def _assemble(shards: list[list[Any]], shardings: list[Any], leaves: list[Any],
              devices: list[Any], partitioned: bool) -> list[Any]:
    """Each output as one global array, from its shards and its sharding (device 0's
    value for an output with none)."""
    import jax
    from jax._src.lib import xla_client as xc
    from jax._src.sharding_impls import GSPMDSharding

    if len(devices) == 1:
        return [per_device[0] for per_device in shards]
    dl = xc.DeviceList(tuple(devices))
    out = []
    for k, per_device in enumerate(shards):
        s = shardings[k] if k < len(shardings) else None
        if s is None or k >= len(leaves) or not s.is_tiled():
            out.append(per_device[0])
            continue
        dims = tuple(per_device[0].shape)
        if partitioned:  # the shards' shapes times the tiles
            tiles = list(s.tile_assignment_dimensions())
            if s.replicate_on_last_tile_dim() or len(tiles) > len(dims):
                tiles = tiles[:len(dims)]
            dims = tuple(d * t for d, t in zip(dims, tiles))
        else:
            dims = tuple(leaves[k].dims)
        out.append(jax.make_array_from_single_device_arrays(dims, GSPMDSharding(dl, s),
                                                            per_device))
    return out


def _fill(spec: Any, inst: Instruction, dims: tuple[int, ...] | None = None,
          allow_lossy: bool = False) -> InputValue:
    return make_input(spec, inst, tuple(inst.shape.dims) if dims is None else dims,
                      allow_lossy=allow_lossy)


def before_optimizations_file(filename: str) -> str | None:
    """The module before optimization beside an optimized one: a dump's
    ``*.before_optimizations.txt`` of the same module number, or ``X.before.hlo``
    beside ``X.hlo``."""
    import os

    folder, base = os.path.split(filename)
    if not base or not os.path.isdir(folder or "."):
        return None
    m = re.match(r"(module_\d+\.[^/]*?)\.(?:\w+_)?after_optimizations\.txt$", base)
    candidates = []
    if m:
        candidates.append(f"{m.group(1)}.before_optimizations.txt")
    stem = re.sub(r"(\.after_opt(?:imizations)?)?\.(hlo|txt)$", "", base)
    candidates += [f"{stem}.before.hlo", f"{stem}.before_optimizations.txt",
                   f"{stem}.before_opt.hlo"]
    for c in candidates:
        path = os.path.join(folder, c)
        if c != base and os.path.isfile(path):
            return path
    return None


def _resolve_inputs(m: Module, inputs: dict[str, Any] | None, input_files: Any
                    ) -> tuple[list[Any], str | None]:
    """Each parameter's spec: the `inputs` given by name or number, else the array from
    `input_files`, else ``random:N``."""
    from ._values import load_input_files, match_inputs

    params = m.entry.parameters
    names = {p.name: p for p in params}
    specs: dict[int, Any] = {}
    source = None
    if input_files is not None:
        source = str(input_files)
        arrays = input_files if isinstance(input_files, dict) else load_input_files(
            input_files)
        specs.update(match_inputs(dict(arrays), params, source))
    for key, spec in (inputs or {}).items():
        key = str(key)
        if key in names:
            specs[names[key].parameter_number] = spec
        elif key.isdigit() and int(key) < len(params):
            specs[int(key)] = spec
        else:
            raise HloscopeError(f"no parameter {key!r} in {m.name}",
                                hint="its parameters: " + ", ".join(
                                    f"{p.parameter_number}={p.name} {p.shape}" for p in params))
    return [specs.get(p.parameter_number, f"random:{p.parameter_number}") for p in params], \
        source


def _device_memory(devices: list[Any]) -> int | None:
    """Bytes one accelerator can hold (None on CPU devices, which share the host's)."""
    if devices[0].platform == "cpu":
        return None
    try:
        return int((devices[0].memory_stats() or {}).get("bytes_limit") or 0) or None
    except Exception:  # noqa: BLE001
        return None


def run_module(m: Module, *, partitions: int | None = None,
               inputs: dict[str, Any] | None = None, input_files: Any = None,
               iterations: int = 1, check: bool = False, tolerance: float | None = None,
               expect: Any = None, save_outputs: str | None = None,
               allow_lossy: bool = False, isolate: bool | None = None,
               fallback: bool = True, _plan: Plan | None = None) -> RunResult:
    """Compile `m` as it asks (SPMD-partitioned when it has sharding annotations, one
    program per device when it is already partitioned, without XLA's passes when they
    already ran), run it `iterations` times after a first run, and return its outputs.

    `inputs`: parameter name or number -> ``zeros``, ``ones``, ``random[:SEED]``, a number,
    a ``.npy`` file or an array; `input_files`: an ``.npz`` file or a folder of ``.npy``
    (by parameter name or position); the rest ``random:N``.  Inputs of another dtype are
    converted with a note, and refused where values would change unless `allow_lossy`.
    `check` compares with the module compiled for one device, `expect` (an ``.npz``/``.npy``
    file or a list of arrays) with reference outputs, each under per-dtype tolerances
    scaled to the module's longest sum (`tolerance` overrides).  `save_outputs` writes the
    outputs to an ``.npz`` (``output0``, ``output1``, ...).  An optimized module XLA cannot
    compile again runs the module before optimization found beside it (`fallback`)."""
    import numpy as np

    try:
        import jax
    except ImportError:
        raise HloscopeError("hloscope run needs JAX (jaxlib's PjRt runtime)",
                            hint="pip install 'hloscope[jax]'") from None
    from ._exec import CompileError, compile_checked, defuse, plan_module, text_for
    from ._values import (check_sizes, describe_parameter, global_shape, memory_available)

    plan = _plan or plan_module(m, partitions)
    text = text_for(m, plan)
    again = dict(partitions=partitions, inputs=inputs, input_files=input_files,
                 iterations=iterations, check=check, tolerance=tolerance, expect=expect,
                 save_outputs=save_outputs, allow_lossy=allow_lossy, isolate=isolate)
    elided = [inst for inst in m.instructions()
              if inst.opcode == "constant" and (inst.literal or "").strip() == "{...}"]
    if elided:
        before = before_optimizations_file(m.filename) if fallback else None
        if before is None:
            raise HloscopeError(
                f"{m.name}: the values of constant {elided[0].name} ({elided[0].shape}) "
                f"are not in the text (printed as {{...}}; {len(elided)} constant(s) in all)",
                hint="dump the module with its constants: XLA_FLAGS='--xla_dump_to=DIR "
                     "--xla_dump_large_constants', or run its before_optimizations file")
        return _run_instead(before, f"{m.name}: the values of constant {elided[0].name} "
                            "are not in the text (printed as {...})", **again)
    n = plan.partitions
    have = jax.devices()
    if n > len(have):
        raise HloscopeError(f"{m.name}: needs {n} devices, JAX has {len(have)}",
                            hint=f"run with --devices {n} (virtual CPU devices) or fewer "
                                 "--partitions")
    devices = have[:n]
    params = m.entry.parameters
    chosen, source = _resolve_inputs(m, inputs, input_files)
    dims = [global_shape(p, plan.partitioned) for p in params]
    client = devices[0].client
    notes: list[str] = []
    exe: Any = None
    why = undone_why = ""
    try:
        exe, compile_time = compile_checked(client, m, text, plan, devices, isolate=isolate)
    except CompileError as e:
        if not plan.optimized or e.library or not fallback:
            raise
        first, why = e.message, e.message.split(": ", 1)[-1][:300]
        try:  # a second way: the fusions undone, XLA's passes on
            undone, plan_undone = defuse(m), replace(plan, optimized=False)
            exe, compile_time = compile_checked(client, m, undone, plan_undone, devices,
                                                isolate=True)
            notes.append(f"{m.name} is optimized, and XLA cannot take it as it is "
                         f"({why}): compiled with its "
                         "fusions undone (XLA's passes fuse it again)")
            text, plan = undone, plan_undone
        except CompileError as e2:
            exe, undone_why = None, e2.message.split(": ", 1)[-1][:300]
    if exe is None:
        before = before_optimizations_file(m.filename)
        if before is None:
            raise HloscopeError(
                first + ". The module is optimized (XLA's passes ran on it, for another "
                f"device or XLA version); with its fusions undone: {undone_why}",
                hint="run the module before optimization: its dump's "
                     "*.before_optimizations.txt (XLA_FLAGS=--xla_dump_to=DIR), or "
                     "jax.jit(f).lower(...).as_text() rather than compiled.as_text()") \
                from None
        return _run_instead(before, f"{m.name} is optimized, and XLA cannot take it as it "
                            f"is ({why})", **again)
    # Sizes before anything is made (after the compile, which allocates nothing and
    # gives a module it cannot take its own error): inputs and outputs on this machine,
    # XLA's figures per device on an accelerator.
    check_sizes(m, [(p.shape, d) for p, d in zip(params, dims)], memory_available())
    before_inputs_bytes = sum(p.shape.byte_size * (math.prod(d) // max(1, math.prod(
        p.shape.dims))) for p, d in zip(params, dims) if p.shape.is_array)
    stats = _memory_stats(exe)
    per_device = sum(v or 0 for k, v in stats.items() if k in ("argument", "output",
                                                                "temporary"))
    limit = _device_memory(devices)
    if limit is not None and per_device > limit:
        raise HloscopeError(f"{m.name}: needs {per_device:,} B per device (XLA: arguments, "
                            f"outputs, temporaries), the device holds {limit:,} B",
                            hint="run it on more devices or a smaller version")
    root = m.entry.root.shape
    leaves = [s for _, s in root.leaves()] if root.is_tuple else [root]
    with jax.enable_x64(True):  # s64, u64, f64, c128 pass unchanged; the user's setting stays
        try:
            made = [_fill(spec, p, d, allow_lossy) for p, spec, d in zip(params, chosen, dims)]
        except MemoryError:
            raise HloscopeError(f"{m.name}: this machine ran out of memory making the inputs "
                                f"(the module's parameters: {before_inputs_bytes:,} B)",
                                hint="run it on a machine with more memory, or a smaller "
                                     "version") from None
        host = [v.array for v in made]
        in_sh, out_sh = _shardings(plan, exe, m, len(leaves))
        try:
            args = _place(host, in_sh, devices)
        except Exception as e:  # noqa: BLE001  (RESOURCE_EXHAUSTED and friends)
            msg = str(e).strip()
            raise HloscopeError(f"{m.name}: the inputs cannot be placed on the devices: "
                                + (msg.splitlines()[0][:400] if msg else type(e).__name__),
                                hint="the devices' memory is the usual limit: run a smaller "
                                     "version, or on more devices") from None
        shards = _execute(exe, args, m.name)
        values = _assemble(shards, out_sh, leaves, devices, plan.partitioned)
        # A module that writes outputs into its inputs (input_output_alias) takes them
        # over: each run gets fresh copies, placed before its clock starts.
        aliased = bool(m.input_output_alias)
        if aliased and iterations > 0:
            notes.append("the module writes outputs into its inputs (input_output_alias), "
                         "which a run takes over: each timed run got fresh copies of the "
                         "inputs, placed before its clock started")
        else:
            del host
        times: list[float] = []  # execution only: the inputs stay on the devices
        for _ in range(max(0, iterations)):
            if aliased:
                args = _place(host, in_sh, devices)
                jax.block_until_ready(args)
            t0 = time.perf_counter()
            _execute(exe, args)
            times.append(time.perf_counter() - t0)
        values = [np.asarray(v) for v in values]
        outputs = []
        for k, v in enumerate(values):
            o = _summary(v)
            o["index"] = k
            o["shards"] = [{"device": d.id, **_summary(s)}
                           for d, s in zip(devices, shards[k])] if n > 1 else []
            outputs.append(o)
    if plan.partitioned and n > 1 and not m.entry.root.attr("sharding"):
        notes.append("the module does not say how its outputs are split over the devices "
                     "(its root has no sharding): each output is device 0's piece; every "
                     "device's piece is under its shards")
    described = [{"parameter": p.parameter_number, "name": p.name, "shape": str(p.shape),
                  "input": spec if isinstance(spec, str) else f"{source}",
                  "conversion": v.conversion, "about": describe_parameter(p)}
                 for p, spec, v in zip(params, chosen, made)]
    partitioned = exe.hlo_modules()[0].to_string()
    before, after_peak, collectives = _before_after(m, partitioned)
    result = RunResult(m.name, n, plan.spmd, described, outputs, times, compile_time,
                       partitioned, before, {**stats, "peak": after_peak},
                       collectives, values=values, plan=plan.to_dict(),
                       how=plan.describe(), notes=notes)
    k = reduction_size(m)
    if check:
        from ._exec import Plan

        one = Plan(1, False, False, plan.optimized)
        if plan.partitioned:
            result.notes.append("--check: the module is already one program per device; "
                                "there is no single-device version to compare with")
        else:
            ref_exe, _ = compile_checked(client, m, text, one, devices[:1], isolate=isolate)
            with jax.enable_x64(True):
                ref_host = [_fill(spec, p, d, allow_lossy).array
                            for p, spec, d in zip(params, chosen, dims)]
                ref = [np.asarray(v) for v in _assemble(
                    _execute(ref_exe, _place(ref_host, [None] * len(params), devices[:1])),
                    [], leaves, devices[:1], False)]
            rows = compare_outputs(values, ref, [f"output{i}" for i in range(len(values))],
                                   k=k, tolerance=tolerance)
            result.check = _verdict("the same module compiled for one device, unpartitioned",
                                    rows, k)
    if expect is not None:
        ref_arrays = _load_expected(expect, len(values))
        rows = compare_outputs(values, ref_arrays, [f"output{i}" for i in range(len(values))],
                               k=k, tolerance=tolerance)
        if plan.partitioned and n > 1:
            rows = _compare_pieces(rows, shards, ref_arrays, k, tolerance, result.notes)
        result.expect = _verdict(str(expect) if not isinstance(expect, list) else "arrays",
                                 rows, k)
    if save_outputs is not None:
        try:
            np.savez(save_outputs, **{f"output{i}": v for i, v in enumerate(values)})
        except OSError as e:
            raise HloscopeError(f"--save-outputs {save_outputs}: cannot write ({e})") from None
        result.saved = str(save_outputs)
    return result


def _compare_pieces(rows: list[dict[str, Any]], shards: list[list[Any]], refs: list[Any],
                    k: int, tolerance: float | None, notes: list[str]) -> list[dict[str, Any]]:
    """A module already one program per device, whose outputs do not match the reference
    as they came out (device 0's piece where the module does not say how they are split):
    its devices' pieces put together along the dimension where they make the reference's
    shape (in device order; where several could, the one that matches), or, where each
    device holds an output whole, each device's compared; the notes say which."""
    import numpy as np

    out = list(rows)
    for i, row in enumerate(rows):
        if i >= len(shards):
            continue
        pieces = [np.asarray(p) for p in shards[i]]
        ref = np.asarray(refs[i])
        shape, n, name = pieces[0].shape, len(pieces), f"output{i}"
        if any(p.shape != shape for p in pieces) or len(shape) != ref.ndim:
            continue
        if row["shape"] == list(ref.shape) and shape != ref.shape:
            continue  # put together already, by the module's own output sharding
        if shape == ref.shape:
            each = [compare_outputs([p], [ref], [name], k=k, tolerance=tolerance)[0]
                    for p in pieces]
            out[i] = max(each, key=lambda r: (not r["ok"], r["max_rel_error"] or 0.0))
            notes.append(f"--expect: {name}: every one of the {n} devices holds it whole "
                         f"(its pieces have the reference's shape): compared each device's")
            continue
        tried = []
        for axis in range(ref.ndim):
            if ref.shape[axis] == shape[axis] * n and all(
                    ref.shape[d] == shape[d] for d in range(ref.ndim) if d != axis):
                joined = np.concatenate(pieces, axis=axis)
                tried.append((axis, compare_outputs([joined], [ref], [name], k=k,
                                                    tolerance=tolerance)[0]))
        if not tried:
            continue
        axis, best = min(tried, key=lambda t: (not t[1]["ok"], t[1]["max_rel_error"] or 0.0))
        out[i] = best
        notes.append(f"--expect: {name}: the module is one program per device and its "
                     f"outputs are pieces {list(shape)}: put the {n} devices' pieces together "
                     f"along dimension {axis} (in device order) to compare with the "
                     f"reference {list(ref.shape)}")
    return out


def _run_instead(before: str, why: str, **kwargs: Any) -> RunResult:
    """`run_module` on the module before optimization at `before`, with a note that says
    why the module asked for was not run."""
    from .._sources._reader import read

    result = run_module(read(before).module, fallback=False, **kwargs)
    result.notes.insert(0, f"{why}: ran {before}, the same module before optimization")
    return result


def _verdict(reference: str, rows: list[dict[str, Any]], k: int) -> dict[str, Any]:
    rels = [r["max_rel_error"] for r in rows if r.get("max_rel_error") is not None]
    return {"reference": reference, "reduction_size": k, "outputs": rows,
            "max_relative_difference": max(rels, default=0.0),
            "tolerance": max((r["tolerance"] or 0.0 for r in rows), default=0.0),
            "ok": all(r["ok"] for r in rows)}


def _load_expected(expect: Any, count: int) -> list[Any]:
    """Reference outputs in output order: a list of arrays, an ``.npy`` (one output) or an
    ``.npz`` whose keys end in the output's number (``output0``, ``arr_0``, ...), else in
    the file's order."""
    import numpy as np

    if isinstance(expect, (list, tuple)):
        arrays = [np.asarray(a) for a in expect]
    else:
        path = str(expect)
        try:
            loaded = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise HloscopeError(f"--expect {path}: cannot read it ({e})",
                                hint="np.savez(path, *outputs) saves them in output order") \
                from None
        if isinstance(loaded, np.ndarray):
            arrays = [loaded]
        else:
            with loaded as z:
                keys = list(z.files)
                nums = [re.search(r"(\d+)$", key) for key in keys]
                if all(nums) and len({int(x.group(1)) for x in nums if x}) == len(keys):
                    keys = sorted(keys, key=lambda key: int(re.search(r"(\d+)$", key)
                                                            .group(1)))  # type: ignore[union-attr]
                arrays = [z[key] for key in keys]
    if len(arrays) != count:
        raise HloscopeError(f"--expect: {len(arrays)} reference array(s) for {count} "
                            "output(s)", hint="give one array per output, in output order")
    return arrays

def _before_after(m: Module, partitioned: str) -> tuple[dict[str, int | None], int | None,
                                                          list[dict[str, Any]]]:
    """The unpartitioned module's figures (one device holds everything), the per-device
    module's peak, and the collectives the partitioner inserted into it."""
    from .._analysis._kernels import kernel_graph
    from .._analysis._memory import analyze_memory
    from .._sources._reader import read_text

    r = analyze_memory(m)
    before: dict[str, int | None] = {"argument": r.argument_bytes, "output": r.output_bytes,
                                     "temporary": r.temp_estimate_bytes, "peak": r.peak_bytes}
    if r.sharded is not None:
        before["peak_per_device_estimate"] = r.sharded.per_device_bytes
    per_device = read_text(partitioned).module
    return (before, analyze_memory(per_device).peak_bytes,
            [c.to_dict() for c in kernel_graph(per_device).collectives])
