"""Run any HLO module on the PjRt runtime that JAX ships, with SPMD partitioning.

The one route from HLO text to an executable lives here (checked against
jaxlib 0.10): ``jaxlib._hlo.hlo_module_from_text`` parses the text with XLA's
own parser, ``HloModule.as_serialized_hlo_module_proto`` serializes it, and
``xla_client._xla.mlir.hlo_to_stablehlo`` turns the proto into StableHLO that
the client's ``compile_and_load`` compiles.  The partition count comes from the
flag, else the module header, else the sharding annotations; SPMD partitioning
is on when the module has sharding annotations (torch_xla's ``Sharding``
custom-calls included).  Inputs are placed by the executable's own parameter
shardings; outputs are gathered back with its output shardings.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from .._errors import HloscopeError
from .._repr import clip
from .._hlo._module import Instruction, Module
from .._hlo._shape import NUMPY_DTYPES

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

    def __repr__(self) -> str:
        from .._bench._stats import time_stats

        timing = ""
        if self.times:
            s = time_stats(self.times)
            timing = f", median {s['median'] * 1e3:.4g} ms over {s['runs']} runs"
        check = "" if self.check is None else (
            ", check ok" if self.check.get("ok") else ", check FAILED")
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
                "partitioned_module": self.partitioned_text}


def _has_sharding(m: Module) -> bool:
    for inst in m.instructions():
        if inst.attr("sharding") is not None:
            return True
        if inst.opcode == "custom-call" and inst.attr("custom_call_target") in (
                '"Sharding"', "Sharding", '"SPMDFullToShardShape"', '"SPMDShardToFullShape"'):
            return True
    return False


def _partitions_from_shardings(m: Module) -> int:
    most = 0
    for inst in m.instructions():
        text = inst.attr("sharding")
        if not text:
            continue
        try:
            from .._hlo._sharding import parse_sharding

            s = parse_sharding(text)
            most = max(most, max(s.device_list(), default=-1) + 1)
        except Exception:  # noqa: BLE001  (an odd form: fall back to the numbers in it)
            nums = [int(x) for x in re.findall(r"\d+", text.split("]", 1)[-1])]
            most = max(most, max(nums, default=-1) + 1)
    return most


def _fill(spec: str, inst: Instruction) -> Any:
    import numpy as np

    shape = inst.shape
    if shape.is_tuple or not shape.is_array:
        raise HloscopeError(f"parameter {inst.name} is {shape}: only array parameters can be "
                            "given", hint="run a module whose parameters are arrays")
    dtype = NUMPY_DTYPES.get(shape.element_type)
    if dtype is None:
        raise HloscopeError(f"parameter {inst.name}: element type {shape.element_type} is not "
                            "supported as an input")
    dims = tuple(shape.dims)
    if dtype == "bfloat16":
        import ml_dtypes

        np_dtype: Any = ml_dtypes.bfloat16
    else:
        np_dtype = np.dtype(dtype)
    if spec == "zeros":
        return np.zeros(dims, np_dtype)
    if spec == "ones":
        return np.ones(dims, np_dtype)
    if spec.startswith("random"):
        seed = int(spec.split(":", 1)[1]) if ":" in spec else 0
        rng = np.random.default_rng(seed)
        if np.issubdtype(np.dtype(dtype) if dtype != "bfloat16" else np.float32, np.integer):
            return rng.integers(0, 10, dims).astype(np_dtype)
        if dtype == "bool":
            return rng.integers(0, 2, dims).astype(bool)
        return rng.standard_normal(dims).astype(np_dtype)
    if spec.endswith(".npy"):
        try:
            arr = np.load(spec)
        except (OSError, ValueError) as e:
            raise HloscopeError(f"input {inst.name}: cannot read {spec} ({e})") from None
        if tuple(arr.shape) != dims:
            raise HloscopeError(f"input {inst.name}: {spec} holds shape {tuple(arr.shape)}, "
                                f"the parameter is {shape}",
                                hint="give an array of the parameter's shape")
        return arr.astype(np_dtype)
    try:
        value = float(spec)
    except ValueError:
        raise HloscopeError(f"input {inst.name}: {spec!r} is not zeros, ones, random[:SEED], "
                            "a number or a .npy file") from None
    return np.full(dims, value, np_dtype)


def _offending_line(module_text: str, message: str) -> str:
    """The module line XLA's message is about (a custom-call target, an instruction name)."""
    lines = module_text.splitlines()
    for pat in (r'custom[_ ]call[_ ]target[^"\']*["\']([^"\']+)["\']', r"target[: ]+\"?([\w.-]+)",
                r"%([\w.-]+)"):
        for m in re.finditer(pat, message):
            key = m.group(1)
            for n, line in enumerate(lines, 1):
                if key in line and ("custom_call_target" in line or f"%{key} " in line
                                    or f" {key} =" in line or line.strip().startswith(key)):
                    return f"line {n}: {line.strip()[:300]}"
    return ""


def _custom_call_hint(m: Module, message: str) -> tuple[str, str]:
    targets = sorted({(inst.attr("custom_call_target") or "").strip('"')
                      for inst in m.instructions() if inst.opcode == "custom-call"}
                     - {"", "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})
    named = [t for t in targets if t in message]
    if named or ("custom" in message.lower() and targets):
        t = (named or targets)[0]
        inst = next(i for i in m.instructions() if i.opcode == "custom-call"
                    and (i.attr("custom_call_target") or "").strip('"') == t)
        return (f"the module calls the custom-call target {t!r} ({inst.name}): library "
                "code that the installed XLA does not provide",
                "custom-calls are library code registered by the program that made the module "
                f"(e.g. jaxDecomp registers {t!r} for its GPU FFT); install and import that "
                "library, or run the module on the platform it was made for")
    return "", ""


def _compile(client: Any, m: Module, text: str, partitions: int, spmd: bool,
             devices: list[Any]) -> tuple[Any, float]:
    import numpy as np
    from jax._src.lib import xla_client as xc

    try:
        import jaxlib._hlo as jhlo

        from_text = jhlo.hlo_module_from_text
    except ImportError:  # older jaxlib: the same function in xla_client's extension
        from_text = xc._xla.hlo_module_from_text
    try:
        hm = from_text(text)
    except Exception as e:  # noqa: BLE001  (XLA's parser raises its own error type)
        msg = str(e).strip()
        where = _offending_line(text, msg)
        raise HloscopeError(f"{m.name}: XLA's parser refuses the module: "
                            f"{msg.splitlines()[0][:400]}" + (f" ({where})" if where else ""),
                            hint="the installed XLA is older or newer than the one that "
                                 "wrote the module; hloscope's own commands still read it")
    mlir = xc._xla.mlir.hlo_to_stablehlo(hm.as_serialized_hlo_module_proto())
    opts = xc.CompileOptions()
    opts.num_replicas = 1
    opts.num_partitions = partitions
    eb = opts.executable_build_options
    eb.num_replicas = 1
    eb.num_partitions = partitions
    eb.use_spmd_partitioning = spmd
    assignment = xc.DeviceAssignment.create(np.array([[d.id for d in devices]]))
    opts.device_assignment = assignment
    t0 = time.perf_counter()
    try:
        exe = client.compile_and_load(mlir, xc.DeviceList(tuple(devices)), opts)
    except Exception as e:  # noqa: BLE001  (XlaRuntimeError and friends)
        msg = str(e).strip()
        first = msg.splitlines()[0][:500] if msg else type(e).__name__
        cause, hint = _custom_call_hint(m, msg)
        where = _offending_line(text, msg)
        raise HloscopeError(f"{m.name}: XLA cannot compile the module: "
                            + (f"{cause}. XLA says: " if cause else "") + first
                            + (f" ({where})" if where else ""),
                            hint=hint or "see XLA's message; hloscope's own commands "
                                         "(summary, memory, kernels) still read the module")
    return exe, time.perf_counter() - t0


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
    out["first"] = [x.item() if hasattr(x, "item") else x for x in flat[:6]]
    return out


def _place(exe: Any, host: list[Any], devices: list[Any]) -> list[Any]:
    """The inputs on the devices, split as the executable's parameter shardings say."""
    import jax
    from jax._src.lib import xla_client as xc
    from jax._src.sharding_impls import GSPMDSharding

    if len(devices) == 1:
        return [jax.device_put(h, devices[0]) for h in host]
    dl = xc.DeviceList(tuple(devices))
    return [jax.device_put(h, GSPMDSharding(dl, s))
            for h, s in zip(host, exe.get_parameter_shardings() or [None] * len(host))]


def _execute(exe: Any, args: list[Any]) -> list[list[Any]]:
    """One run on placed inputs, waited for: each output's per-device arrays."""
    import jax

    shards = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    jax.block_until_ready(shards)
    return shards


def _assemble(exe: Any, m: Module, shards: list[list[Any]], devices: list[Any]) -> list[Any]:
    """Each output as one global array, from its shards and the output shardings."""
    import jax
    from jax._src.lib import xla_client as xc
    from jax._src.sharding_impls import GSPMDSharding

    if len(devices) == 1:
        return [per_device[0] for per_device in shards]
    dl = xc.DeviceList(tuple(devices))
    root = m.entry.root.shape
    leaves = [s for _, s in root.leaves()] if root.is_tuple else [root]
    out_sh = exe.get_output_shardings() or []
    return [jax.make_array_from_single_device_arrays(
                tuple(leaves[k].dims), GSPMDSharding(dl, out_sh[k]), per_device)
            if k < len(out_sh) and k < len(leaves) else per_device[0]
            for k, per_device in enumerate(shards)]


def run_module(m: Module, *, partitions: int | None = None, inputs: dict[str, str] | None = None,
               iterations: int = 1, check: bool = False, tolerance: float = 1e-5) -> RunResult:
    """Compile `m` (SPMD-partitioned over `partitions` devices when it has sharding
    annotations), run it on `inputs` (parameter name or number -> ``zeros``, ``ones``,
    ``random[:SEED]``, a number or a ``.npy`` file; ``random:N`` for parameter N by
    default) `iterations`
    times, and, with `check`, compare with the same module compiled for one device."""
    try:
        import jax
    except ImportError:
        raise HloscopeError("hloscope run needs JAX (jaxlib's PjRt runtime)",
                            hint="pip install 'hloscope[jax]'") from None
    import numpy as np

    text = str(m)
    spmd = _has_sharding(m)
    n = partitions or (m.num_partitions if m.num_partitions > 1 else 0) or \
        (_partitions_from_shardings(m) if spmd else 0) or 1
    have = jax.devices()
    if n > len(have):
        raise HloscopeError(f"{m.name}: needs {n} devices, JAX has {len(have)}",
                            hint=f"run with --devices {n} (virtual CPU devices) or fewer "
                                 "--partitions")
    devices = have[:n]
    params = m.entry.parameters
    specs = dict(inputs or {})
    names = {p.name: p for p in params}
    for key in specs:
        if key not in names and not (key.isdigit() and int(key) < len(params)):
            raise HloscopeError(f"no parameter {key!r} in {m.name}",
                                hint="its parameters: " + ", ".join(
                                    f"{p.parameter_number}={p.name} {p.shape}" for p in params))
    chosen = [(p, specs.get(p.name, specs.get(str(p.parameter_number),
                                              f"random:{p.parameter_number}")))
              for p in params]
    described = [{"parameter": p.parameter_number, "name": p.name, "shape": str(p.shape),
                  "input": spec} for p, spec in chosen]
    # Compile before making the inputs: a module XLA cannot compile gets its error at once,
    # not after gigabytes of random inputs are drawn for it (or the process is killed).
    client = devices[0].client
    exe, compile_time = _compile(client, m, text, n, spmd and n > 1, devices)
    host = [_fill(spec, p) for p, spec in chosen]
    args = _place(exe, host, devices)
    shards = _execute(exe, args)
    values = _assemble(exe, m, shards, devices)
    times: list[float] = []  # execution only: the inputs stay on the devices
    for _ in range(max(0, iterations)):
        t0 = time.perf_counter()
        _execute(exe, args)
        times.append(time.perf_counter() - t0)
    outputs = []
    for k, v in enumerate(values):
        o = _summary(v)
        o["index"] = k
        o["shards"] = [{"device": d.id, **_summary(s)}
                       for d, s in zip(devices, shards[k])] if n > 1 else []
        outputs.append(o)
    partitioned = exe.hlo_modules()[0].to_string()
    before, after_peak, collectives = _before_after(m, partitioned)
    result = RunResult(m.name, n, spmd and n > 1, described, outputs, times, compile_time,
                       partitioned, before, {**_memory_stats(exe), "peak": after_peak},
                       collectives, values=values)
    if check:
        ref_exe, _ = _compile(client, m, text, 1, False, devices[:1])
        ref = _assemble(ref_exe, m, _execute(ref_exe, _place(ref_exe, host, devices[:1])),
                        devices[:1])
        worst = 0.0
        for a, b in zip(values, ref):
            a_, b_ = np.asarray(a), np.asarray(b)
            if a_.shape != b_.shape:
                raise HloscopeError(f"output shapes differ: {a_.shape} partitioned, "
                                    f"{b_.shape} on one device")
            if a_.size:
                diff = np.abs(a_.astype(np.complex128) - b_.astype(np.complex128))
                scale = np.maximum(np.abs(b_.astype(np.complex128)), 1.0)
                worst = max(worst, float((diff / scale).max()))
        result.check = {"reference": "the same module compiled for one device",
                        "max_relative_difference": worst, "tolerance": tolerance,
                        "ok": worst <= tolerance}
    return result


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
