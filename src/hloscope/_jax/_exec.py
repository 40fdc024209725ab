"""From HLO text to a loaded PjRt executable: the one route, and how each kind of module
takes it.

``jaxlib._hlo.hlo_module_from_text`` parses the text with XLA's own parser,
``xla_client._xla.mlir.hlo_to_stablehlo`` turns the module into StableHLO, and the
client's ``compile_and_load`` compiles it (checked against jaxlib 0.10).  What differs
between modules is the compile options, chosen once by `plan_module`:

- a module with sharding annotations (JAX's, torch_xla's ``Sharding`` custom-calls) is
  SPMD-partitioned over the partitions its header or annotations ask for; the header's
  ``allow_spmd_sharding_propagation_to_output`` / ``..._to_parameters`` reach the
  compile options, so the output keeps the sharding the frontend let XLA choose;
- an already-partitioned module (one program per device: it holds cross-partition
  collectives, or XLA's passes already ran on it) is compiled as it is, with the SPMD
  partitioner and sharding propagation switched off (the PjRt CPU client wants
  ``use_spmd_partitioning`` whenever there are several partitions);
- an optimized module (``compiled.as_text()``, ``*after_optimizations*`` dumps: scheduled,
  or holding fusions) is compiled with ``xla_disable_all_hlo_passes``: the passes that
  made it cannot take their own output again (XLA's CPU fusion emitter aborts the process
  on a fusion it did not make).  StableHLO keeps no layouts, so its bitcasts are first
  written as the reshapes and transposes they are (`rewrite`), and a compile whose root
  or parameters come back in another layout than the entry's is refused
  (`boundary_mismatch`: the runtime would read them in the wrong order).  The caller
  then tries `defuse` (the fusions undone, XLA's passes on).

XLA reports some bad input with a CHECK that aborts the process.  `compile_checked` first
compiles a module that can hit one (an optimized or already-partitioned module) in a child
process (``python -m hloscope._jax._run_child``) and turns a killed child into an
`HloscopeError` with XLA's log line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from .._errors import HloscopeError
from .._hlo._module import Module

__all__ = ["Plan", "compile_checked", "compile_plan", "plan_module"]

# Collectives that only an already-partitioned module holds between partitions.
_CROSS_PARTITION = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                    "collective-permute", "collective-broadcast", "ragged-all-to-all",
                    "all-reduce-start", "all-gather-start", "collective-permute-start"}
_ANNOTATIONS = ('"Sharding"', "Sharding", '"SPMDFullToShardShape"', '"SPMDShardToFullShape"',
                "SPMDFullToShardShape", "SPMDShardToFullShape")
# Passes that would partition an already-partitioned module again.
_PARTITIONER_PASSES = ("spmd-partitioning,sharding-propagation,shardy-xla,"
                       "sharding-remover,spmd-prepare")


@dataclass(frozen=True, slots=True)
class Plan:
    """How a module is compiled: over how many partitions, SPMD-partitioned or already
    one program per device, with XLA's passes or without (an optimized module), and
    which shardings XLA may choose (the header's propagation flags)."""

    partitions: int
    spmd: bool
    partitioned: bool
    optimized: bool
    propagate_to_output: tuple[bool, ...] = ()
    propagate_to_parameters: tuple[bool, ...] = ()
    shardy: bool = False
    propagation_assumed: bool = False

    @property
    def needs_child(self) -> bool:
        """Whether XLA can stop the process with a CHECK on this module (it was made by
        XLA's passes, for another device or XLA version)."""
        return self.optimized or self.partitioned

    def describe(self) -> str:
        if self.partitioned:
            how = f"already partitioned: one program per device on {self.partitions} devices"
        elif self.spmd:
            how = f"SPMD-partitioned over {self.partitions} devices"
        else:
            how = f"{self.partitions} partition(s)"
        if self.optimized:
            how += "; optimized by XLA already, compiled without its passes"
        if self.spmd and any(self.propagate_to_output):
            how += ("; output sharding chosen by XLA (allow_spmd_sharding_propagation_to_output"
                    + (", as torch_xla compiles its graphs; their text does not say so)"
                       if self.propagation_assumed else ")"))
        return how

    def to_dict(self) -> dict[str, Any]:
        return {"partitions": self.partitions, "spmd": self.spmd,
                "partitioned": self.partitioned, "optimized": self.optimized,
                "propagate_to_output": list(self.propagate_to_output),
                "propagate_to_parameters": list(self.propagate_to_parameters),
                "shardy": self.shardy, "propagation_assumed": self.propagation_assumed}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(d["partitions"], d["spmd"], d["partitioned"], d["optimized"],
                   tuple(d["propagate_to_output"]), tuple(d["propagate_to_parameters"]),
                   bool(d.get("shardy")), bool(d.get("propagation_assumed")))


def _bools(text: str | None) -> tuple[bool, ...]:
    if not text:
        return ()
    return tuple(w == "true" for w in re.findall(r"true|false", text))


def has_sharding(m: Module) -> bool:
    """Whether the module carries sharding annotations (attributes or torch_xla's
    ``Sharding`` custom-calls)."""
    for inst in m.instructions():
        if inst.attr("sharding") is not None:
            return True
        if inst.opcode == "custom-call" and inst.attr("custom_call_target") in _ANNOTATIONS:
            return True
    return False


def partitions_from_shardings(m: Module) -> int:
    """The number of devices the sharding annotations name (0 without any)."""
    from .._hlo._sharding import parse_sharding

    most = 0
    for inst in m.instructions():
        text = inst.attr("sharding")
        if not text:
            continue
        try:
            most = max(most, max(parse_sharding(text).device_list(), default=-1) + 1)
        except Exception:  # noqa: BLE001  (an odd form: fall back to the numbers in it)
            nums = [int(x) for x in re.findall(r"\d+", text.split("]", 1)[-1])]
            most = max(most, max(nums, default=-1) + 1)
    return most


def _is_torch_xla(m: Module) -> bool:
    """Whether torch_xla made the module: its graphs are named ``IrToHlo.N`` or
    ``SyncTensorsGraph.N``, hold its ``Sharding`` custom-calls, or name their parameters'
    op ``xla__device_data`` (with ``XLA_HLO_DEBUG=1``)."""
    if re.fullmatch(r"(IrToHlo|SyncTensorsGraph)\.\d+", m.name):
        return True
    for inst in m.instructions():
        if inst.opcode == "custom-call" and inst.attr("custom_call_target") in (
                '"Sharding"', "Sharding"):
            return True
        if inst.opcode == "parameter" and 'op_type="xla__device_data"' in inst.attr_text:
            return True
    return False


def plan_module(m: Module, partitions: int | None = None) -> Plan:
    """How `m` is compiled; `partitions` overrides the count the module asks for (its
    header's ``num_partitions``, else its sharding annotations, else 1)."""
    from .._analysis._summary import is_optimized

    spmd = has_sharding(m)
    n = partitions or (m.num_partitions if m.num_partitions > 1 else 0) or \
        (partitions_from_shardings(m) if spmd else 0) or 1
    optimized = is_optimized(m)
    cross = any(inst.opcode in _CROSS_PARTITION for inst in m.instructions())
    partitioned = n > 1 and (optimized or cross or m.entry.name.endswith("_spmd"))
    attrs = m.attributes
    # JAX's modules before optimization carry Shardy's annotations (xla.sdy.* custom-calls
    # and frontend attributes): Shardy partitions them.
    shardy = "xla.sdy" in attrs.get("frontend_attributes", "") or any(
        inst.opcode == "custom-call" and "xla.sdy." in (inst.attr("custom_call_target") or "")
        for inst in m.instructions())
    to_output = _bools(attrs.get("allow_spmd_sharding_propagation_to_output"))
    # torch_xla compiles every SPMD graph with propagation to the output allowed, but the
    # text of its graphs (_get_xla_tensors_hlo) leaves the header flag out.
    assumed = spmd and not to_output and \
        "allow_spmd_sharding_propagation_to_output" not in attrs and _is_torch_xla(m)
    if assumed:
        to_output = (True,)
    return Plan(n, spmd and n > 1 and not partitioned, partitioned, optimized, to_output,
                _bools(attrs.get("allow_spmd_sharding_propagation_to_parameters")),
                shardy and not partitioned, assumed)


def compile_options(plan: Plan, device_ids: list[int]) -> Any:
    """XLA's compile options for `plan` on the devices `device_ids`."""
    import numpy as np
    from jax._src.lib import xla_client as xc

    opts = xc.CompileOptions()
    opts.num_replicas = 1
    opts.num_partitions = plan.partitions
    eb = opts.executable_build_options
    eb.num_replicas = 1
    eb.num_partitions = plan.partitions
    # PjRt's CPU client refuses several partitions without SPMD partitioning: an
    # already-partitioned module keeps the flag and loses the partitioner's passes.
    eb.use_spmd_partitioning = plan.partitions > 1
    if plan.shardy:
        eb.use_shardy_partitioner = True
    if plan.spmd:
        if plan.propagate_to_output:
            eb.allow_spmd_sharding_propagation_to_output = list(plan.propagate_to_output)
        if plan.propagate_to_parameters:
            eb.allow_spmd_sharding_propagation_to_parameters = list(
                plan.propagate_to_parameters)
    overrides: list[tuple[str, Any]] = []
    if plan.optimized:
        overrides.append(("xla_disable_all_hlo_passes", True))
    elif plan.partitioned:
        overrides.append(("xla_disable_hlo_passes", _PARTITIONER_PASSES))
    if overrides:
        opts.env_option_overrides = overrides
    opts.device_assignment = xc.DeviceAssignment.create(np.array([device_ids]))
    return opts


def _offending_line(module_text: str, message: str) -> str:
    """The module line XLA's message is about (a custom-call target, an instruction name),
    as "at LINE"."""
    lines = module_text.splitlines()
    for pat in (r"Invalid API version: (\w+)", r"custom call to ([\w$.-]+)",
                r'custom[_ ]call[_ ]target[^"\']*["\']([^"\']+)["\']', r"target[: ]+\"?([\w.-]+)",
                r"%([\w.-]+)"):
        for mt in re.finditer(pat, message):
            key = mt.group(1)
            for line in lines:
                if key in line and ("custom_call_target" in line or f"api_version={key}" in line
                                    or f"%{key} " in line
                                    or f" {key} =" in line or line.strip().startswith(key)):
                    text = line.strip()
                    return f"at {text if len(text) <= 160 else text[:159] + '…'}"
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
        low = t.lower()
        if low.startswith(("__cublas", "__cudnn", "__cusolver", "__triton", "__gpu")):
            return (f"the module calls {t!r} ({inst.name}), a library call of XLA's GPU "
                    "backend: this is a module compiled for a GPU",
                    "run it on a machine with an NVIDIA GPU and jax[cuda12], or give "
                    "hloscope run the module before optimizations (XLA's dump "
                    "*.before_optimizations.txt), which any backend compiles")
        return (f"the module calls the custom-call target {t!r} ({inst.name}): library "
                "code that the installed XLA does not provide",
                "custom-calls are library code registered by the program that made the module "
                "(jaxDecomp, for one, registers its own for its GPU FFT); install and import "
                "that library, or run the module on the platform it was made for")
    return "", ""


class CompileError(HloscopeError):
    """XLA refused (or aborted on) the module.  `library` is set when a custom-call the
    installed XLA does not provide is the cause (no other version of the module helps)."""

    library = False


def _parse(text: str) -> Any:
    from jax._src.lib import xla_client as xc

    try:
        import jaxlib._hlo as jhlo

        from_text = jhlo.hlo_module_from_text
    except ImportError:  # older jaxlib: the same function in xla_client's extension
        from_text = xc._xla.hlo_module_from_text
    return from_text(text)


def compile_plan(client: Any, m: Module, text: str, plan: Plan,
                 devices: list[Any]) -> tuple[Any, float]:
    """Compile `text` (the module `m`) as `plan` says, in this process: the executable and
    the seconds XLA took."""
    from jax._src.lib import xla_client as xc

    from .._analysis._repeats import describe_lowered
    from ._progress import wait_for

    try:
        hm = _parse(text)
    except Exception as e:  # noqa: BLE001  (XLA's parser raises its own error type)
        msg = str(e).strip()
        # XLA's message: a generic first line, then "was parsing L:C: error: REASON", the
        # line it was reading and a caret.
        # (Its line numbers count lines of the text hloscope printed for XLA, not the file's.)
        said = re.search(r"\d+:\d+: error: ([^\n]+)\n?([^\n]*)", msg)
        reason = said.group(1) if said else msg.splitlines()[0]
        where = _offending_line(text, reason) or (
            f"XLA stopped at {said.group(2).strip()[:200]}" if said and said.group(2) else "")
        hint = ("the installed XLA is older or newer than the one that wrote the module "
                "(hloscope check FILE names the line as XLA does); hloscope's own commands "
                "still read it")
        if "API_VERSION_UNSPECIFIED" in reason:  # XLA prints it, and refuses it
            hint = ("XLA's printer writes api_version=API_VERSION_UNSPECIFIED (torch_xla's "
                    "saved graphs have it) and its parser refuses it: delete that attribute "
                    "from the custom-call; hloscope's own commands read the module as it is")
        raise HloscopeError(f"{m.name}: XLA's parser refuses the module: {reason[:400]}"
                            + (f" ({where})" if where else ""), hint=hint)
    t0 = time.perf_counter()
    try:
        mlir = xc._xla.mlir.hlo_to_stablehlo(hm.as_serialized_hlo_module_proto())
        opts = compile_options(plan, [d.id for d in devices])
        exe = wait_for(f"XLA compiling {m.name}",
                       lambda: client.compile_and_load(mlir, xc.DeviceList(tuple(devices)),
                                                       opts),
                       describe_slow=lambda: describe_lowered(m, f"module {m.name}"))
        if plan.optimized:
            where = boundary_mismatch(exe.hlo_modules()[0].to_string())
            if where:
                raise RuntimeError(f"without XLA's passes the layouts disagree: {where}")
    except Exception as e:  # noqa: BLE001  (XlaRuntimeError and friends)
        msg = str(e).strip()
        first = msg.splitlines()[0][:500] if msg else type(e).__name__
        cause, hint = _custom_call_hint(m, msg)
        where = _offending_line(text, msg)
        err = CompileError(f"{m.name}: XLA cannot compile the module: "
                           + (f"{cause}. XLA says: " if cause else "") + first
                           + (f" ({where})" if where else ""),
                           hint=hint or "see XLA's message; hloscope's own commands "
                                        "(summary, memory, kernels) still read the module")
        err.library = bool(cause)
        raise err from None
    return exe, time.perf_counter() - t0


def _child_env(n: int, platform: str) -> dict[str, str]:
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    if platform == "cpu":
        flags.append(f"--xla_force_host_platform_device_count={max(n, 1)}")
        env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = " ".join(flags)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


_FATAL = re.compile(r"^(?:F\d{4} [\d:.]+\s+\d+ \S+\].*|.*Check failed.*|.*RET_CHECK failure.*)$",
                    re.M)


def compile_in_child(m: Module, text: str, plan: Plan, platform: str,
                     timeout: float = 600.0) -> float:
    """Compile and run once (on zeros) in a child process, so that an XLA CHECK failure
    kills the child and not the caller: returns the child's compile seconds, or raises
    `CompileError` with XLA's message (its fatal log line when the child was killed)."""
    payload = json.dumps({"text": text, "plan": plan.to_dict(), "name": m.name})
    try:
        p = subprocess.run([sys.executable, "-m", "hloscope._jax._run_child"],
                           input=payload, capture_output=True, text=True, timeout=timeout,
                           env=_child_env(plan.partitions, platform))
    except subprocess.TimeoutExpired:
        raise CompileError(f"{m.name}: XLA did not finish compiling the module in "
                           f"{timeout:.0f} s", hint="try the module before optimization") \
            from None
    last = p.stdout.strip().splitlines()[-1:] if p.stdout.strip() else []
    if p.returncode == 0 and last:
        d = json.loads(last[0])
        if d.get("ok"):
            return float(d["seconds"])
        if not d.get("compile", True):  # the module is fine; the inputs or sizes are not
            raise HloscopeError(d["error"], hint=d.get("hint") or "")
        err = CompileError(d["error"], hint=d.get("hint") or "")
        err.library = bool(d.get("library"))
        raise err
    fatal = _FATAL.findall(p.stderr or "")
    line = fatal[0].strip() if fatal else (p.stderr or "").strip().splitlines()[-1:] or [""]
    line = line if isinstance(line, str) else line[0]
    line = re.sub(r"^[FEW]\d{4} [\d:.]+\s+\d+ ", "", line.strip())  # glog's prefix
    how = (f"killed by signal {-p.returncode}" if p.returncode < 0
           else f"exit status {p.returncode}")
    raise CompileError(f"{m.name}: XLA aborted while compiling or running the module "
                       f"({how}, in a child process; hloscope is unharmed): {line[:500]}",
                       hint="XLA stops on a CHECK when a module breaks one of its "
                            "assumptions; an optimized module made for another device or "
                            "XLA version is the usual cause: run the module before "
                            "optimization")


def compile_checked(client: Any, m: Module, text: str, plan: Plan, devices: list[Any], *,
                    isolate: bool | None = None) -> tuple[Any, float]:
    """`compile_plan`, after a trial compile in a child process where XLA may CHECK-fail
    (`isolate` None: for optimized or already-partitioned modules; True: always)."""
    if isolate or (isolate is None and plan.needs_child):
        compile_in_child(m, text, plan, devices[0].platform)
    return compile_plan(client, m, text, plan, devices)


def _major_to_minor(shape: Any) -> tuple[int, ...]:
    rank = len(shape.dims)
    lay = shape.layout
    if lay is None or len(lay.minor_to_major) != rank:
        return tuple(range(rank))
    return tuple(reversed(lay.minor_to_major))


def _bitcast_lines(inst: Any, name: str, operand: str, root: bool) -> list[str] | None:
    """A bitcast as the reshape, or the transposes and reshape, it is in logical terms
    (None for one that changes the element type).  An optimized module's bitcast reads
    its operand's memory in its own layout; StableHLO keeps no layouts, and XLA's way
    back from it fails on a bitcast between ranks ("layout minor_to_major field contains
    2 elements, but shape has 1 dimensions")."""
    x, y = inst.operands[0].shape, inst.shape
    if not (x.is_array and y.is_array) or x.element_type != y.element_type:
        return None
    xo, yo = _major_to_minor(x), _major_to_minor(y)
    et = y.element_type
    if xo == tuple(range(len(x.dims))) and yo == tuple(range(len(y.dims))):
        return [f"  {'ROOT ' if root else ''}%{name} = {y} reshape(%{operand})"]
    px = [x.dims[d] for d in xo]
    py = [y.dims[d] for d in yo]
    inverse = [yo.index(j) for j in range(len(yo))]
    dims = ",".join
    return [f"  %{name}.memory = {et}[{dims(map(str, px))}] transpose(%{operand}), "
            f"dimensions={{{dims(map(str, xo))}}}",
            f"  %{name}.reshaped = {et}[{dims(map(str, py))}] reshape(%{name}.memory)",
            f"  {'ROOT ' if root else ''}%{name} = {y} transpose(%{name}.reshaped), "
            f"dimensions={{{dims(map(str, inverse))}}}"]


def _needs_rewrite(m: Module) -> bool:
    """Whether `m` holds a bitcast to write in logical terms (see `_bitcast_lines`)."""
    return any(inst.opcode == "bitcast" and inst.operands
               and _bitcast_lines(inst, "x", "y", False) is not None
               for inst in m.instructions())


def boundary_mismatch(compiled_text: str) -> str:
    """Where a module compiled without XLA's passes disagrees with its own entry layout
    (its root or a parameter in another layout than the executable's): there, the
    runtime would read the outputs (or write the inputs) in the wrong order.  The way
    through StableHLO drops the module's layouts, and without layout assignment nothing
    reconciles the root's new layout with the entry's.  Empty when they agree."""
    from .._sources._reader import read_text

    cm = read_text(compiled_text).module
    ecl = cm.entry_computation_layout
    if ecl is None:
        return ""
    params, result = ecl

    def leaves(shape: Any) -> list[Any]:
        return [x for _, x in shape.leaves()] if shape.is_tuple else [shape]

    def lay(shape: Any) -> tuple[int, ...] | None:
        return None if shape.layout is None else tuple(shape.layout.minor_to_major)

    root = cm.entry.root
    for k, (want, got) in enumerate(zip(leaves(result), leaves(root.shape))):
        if got.is_array and len(got.dims) > 1 and lay(want) != lay(got):
            return (f"output {k} is laid out as {got} in the compiled module and read as "
                    f"{want}")
    for p in cm.entry.parameters:
        if p.parameter_number < len(params):
            want = params[p.parameter_number]
            if p.shape.is_array and len(p.shape.dims) > 1 and lay(want) != lay(p.shape):
                return (f"parameter {p.parameter_number} is laid out as {p.shape} in the "
                        f"compiled module and written as {want}")
    return ""


def rewrite(m: Module, *, unfuse: bool) -> str:
    """The module's text with layout-dependent bitcasts made logical (transposes and a
    reshape: the StableHLO route keeps no layouts), and with `unfuse` every fusion
    replaced by the instructions it fuses and the schedule dropped, so that XLA's passes
    can take it again and make their own fusions (a fusion's backend config does not
    survive the trip through StableHLO, and XLA's CPU emitter wants one for its custom
    fusions)."""
    fused = {name for inst in m.instructions() if inst.opcode == "fusion"
             for name in inst.called_computation_names} if unfuse else set()

    def line(inst: Any, name: str, operands: list[str], root: bool) -> list[str]:
        if inst.opcode == "bitcast" and len(operands) == 1:
            lines = _bitcast_lines(inst, name, operands[0], root)
            if lines is not None:
                return lines
        if inst.literal is not None:
            inner = inst.literal
        elif inst.opcode == "parameter":
            inner = str(inst.parameter_number)
        else:
            inner = ", ".join("%" + o for o in operands)
        attrs = inst.attr_text
        if unfuse and inst.opcode != "custom-call":
            attrs = re.sub(r",?\s*backend_config=(\{.*\}|\"[^\"]*\")\s*$", "", attrs)
        return [f"  {'ROOT ' if root else ''}%{name} = {inst.shape} "
                f"{inst.sugar or inst.opcode}({inner})" + (f", {attrs}" if attrs else "")]

    def expand(fusion: Any, outer: dict[str, str], root: bool, out: list[str]) -> None:
        comp = m.computation(fusion.called_computation_names[0])
        names: dict[str, str] = {}
        for inst in comp.instructions:
            if inst.opcode == "parameter":
                names[inst.name] = outer[fusion.operand_names[inst.parameter_number]]
        for inst in comp.instructions:
            if inst.opcode == "parameter" and not inst.is_root:
                continue
            new = outer[fusion.name] if inst.is_root else f"{fusion.name}.{inst.name}"
            if inst.opcode == "parameter":  # the fusion passes a parameter through
                out.append(f"  {'ROOT ' if root else ''}%{new} = {inst.shape} "
                           f"copy(%{names[inst.name]})")
                continue
            names[inst.name] = new
            if inst.opcode == "fusion":
                expand(inst, {**names, inst.name: new}, root and inst.is_root, out)
            else:
                out.extend(line(inst, new, [names[o] for o in inst.operand_names],
                                root and inst.is_root))

    header = m.attr_text
    if unfuse:
        header = re.sub(r",?\s*is_scheduled=true", "", header).strip().lstrip(",").strip()
    parts = [f"HloModule {m.name}" + (f", {header}" if header else "")]
    if m.stack_frames_text():
        parts.append(m.stack_frames_text())
    for comp in m.computations:
        if comp.origin or comp.name in fused:
            continue
        body: list[str] = []
        ident = {inst.name: inst.name for inst in comp.instructions}
        for inst in comp.instructions:
            if inst.opcode == "fusion" and unfuse:
                expand(inst, ident, inst.is_root, body)
            else:
                body.extend(line(inst, inst.name, list(inst.operand_names), inst.is_root))
        head = f"{'ENTRY ' if comp.is_entry else ''}%{comp.name}"
        if comp.signature:
            head += " " + comp.signature
        parts.append(head + " {\n" + "\n".join(body) + "\n}"
                     + (", " + comp.attr_text if comp.attr_text else ""))
    return "\n\n".join(parts) + "\n"


def defuse(m: Module) -> str:
    """`rewrite` with the fusions undone."""
    return rewrite(m, unfuse=True)


def text_for(m: Module, plan: Plan) -> str:
    """The text that compiles as `m` runs: for an optimized module, its layout-dependent
    bitcasts made logical (the module as it is otherwise)."""
    if plan.optimized and _needs_rewrite(m):
        return rewrite(m, unfuse=False)
    return str(m)
