"""Hardware targets: the GPUs and TPUs hloscope can compile for without having one.

A target name says which chip and how many::

    h100            one H100 (SXM)              tpu-v5e          one v5e chip
    h100x8          8 H100s on one host          tpu-v5e:2x4      a v5e 2x4 slice (8 chips)
    a100-80:2x4x8   XLA's GPU topology:          tpu-v5p:4x4x4    a v5p 4x4x4 slice
                    2 partitions x 4 hosts       tpu-v5e:2x4*2    two 2x4 slices (multislice)
                    x 8 GPUs per host

GPU chips come from XLA's published target configs (``_data/gpu_targets``); TPU chips
from libtpu's own topologies, with HBM size and peak figures per chip from Google's
Cloud TPU documentation (each `Chip` names its source).  This module is data and
parsing only: compiling for a target is `hloscope._jax._target`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from .._analysis._devices import DEVICES, Device
from .._errors import HloscopeError
from ._gpu_spec import gpu_figures, parse_textproto
from ._limits import Limit, gpu_limit, tpu_limit

__all__ = ["CHIPS", "MAX_DEVICES", "Chip", "Target", "chip_device", "device_limit",
           "gpu_config_text", "targets", "parse_target"]

T = 1e12
GiB = 1 << 30
# The most devices a target may have: more makes meshes too large to trace in reasonable
# time (JAX's CUDA plugin itself takes any count).
MAX_DEVICES = 16384
_SPECS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "_data", "gpu_targets")


@dataclass(frozen=True, slots=True)
class Chip:
    """One kind of accelerator.  GPU figures are read from `spec` (an XLA target config
    in ``_data/gpu_targets``); TPU figures are per chip, from `source`."""

    key: str
    platform: str  # "gpu" or "tpu"
    title: str
    aliases: tuple[str, ...] = ()
    spec: str = ""  # GPU: file name of the XLA target config
    tpu_name: str = ""  # TPU: libtpu's name of the version ("v5e")
    hbm_bytes: int = 0  # TPU: per chip
    flops: tuple[tuple[str, float], ...] = ()  # TPU: per chip
    bandwidth: float = 0.0  # TPU: per chip, bytes/s
    source: str = ""
    three_d: bool = False  # TPU: topologies are AxBxC
    devices_per_chip: int = 1  # TPU: libtpu's devices per chip (two TensorCores on some)


_CLOUD = "Google Cloud TPU documentation, system architecture of"
CHIPS: tuple[Chip, ...] = (
    Chip("h100", "gpu", "NVIDIA H100 80GB HBM3 (SXM)", ("h100-sxm",), spec="h100_sxm.txtpb"),
    Chip("h100-pcie", "gpu", "NVIDIA H100 PCIe", spec="h100_pcie.txtpb"),
    Chip("h200", "gpu", "NVIDIA H200 141GB HBM3e", spec="h200.txtpb"),
    Chip("b200", "gpu", "NVIDIA B200", spec="b200.txtpb"),
    Chip("a100-80", "gpu", "NVIDIA A100-SXM4-80GB", ("a100", "a100-sxm-80"),
         spec="a100_sxm_80.txtpb"),
    Chip("a100-40", "gpu", "NVIDIA A100-SXM4-40GB", ("a100-sxm-40",), spec="a100_sxm_40.txtpb"),
    Chip("a100-pcie-80", "gpu", "NVIDIA A100 80GB PCIe", spec="a100_pcie_80.txtpb"),
    Chip("v100", "gpu", "NVIDIA Tesla V100-SXM2-16GB", spec="v100.txtpb"),
    Chip("tpu-v2", "tpu", "TPU v2", ("v2",), tpu_name="v2", hbm_bytes=16 * GiB,
         flops=(("bf16", 45 * T),), bandwidth=600e9, source=f"{_CLOUD} TPU v2",
         devices_per_chip=2),
    Chip("tpu-v3", "tpu", "TPU v3", ("v3",), tpu_name="v3", hbm_bytes=32 * GiB,
         flops=(("bf16", 123 * T),), bandwidth=900e9, source=f"{_CLOUD} TPU v3",
         devices_per_chip=2),
    Chip("tpu-v4", "tpu", "TPU v4", ("v4",), tpu_name="v4", hbm_bytes=32 * GiB,
         flops=(("bf16", 275 * T), ("s8", 275 * T)), bandwidth=1200e9,
         source=f"{_CLOUD} TPU v4", three_d=True, devices_per_chip=2),
    Chip("tpu-v5e", "tpu", "TPU v5e", ("v5e", "tpu-v5-lite", "v5litepod"), tpu_name="v5e",
         hbm_bytes=16 * GiB, flops=(("bf16", 197 * T), ("s8", 394 * T)), bandwidth=819e9,
         source=f"{_CLOUD} TPU v5e"),
    Chip("tpu-v5p", "tpu", "TPU v5p", ("v5p",), tpu_name="v5p", hbm_bytes=96 * GiB,
         flops=(("bf16", 459 * T), ("s8", 918 * T)), bandwidth=2765e9,
         source=f"{_CLOUD} TPU v5p; HBM 96 GiB as libtpu counts it (95.74 GiB available to "
         "XLA plus its reserve)", three_d=True),
    Chip("tpu-v6e", "tpu", "TPU v6e (Trillium)", ("v6e", "trillium"), tpu_name="v6e",
         hbm_bytes=32 * GiB, flops=(("bf16", 918 * T), ("s8", 1836 * T)), bandwidth=1640e9,
         source=f"{_CLOUD} TPU v6e"),
    Chip("tpu7x", "tpu", "TPU7x (Ironwood)", ("tpu-v7x", "ironwood", "v7x"), tpu_name="tpu7x",
         hbm_bytes=192 * GiB, flops=(("bf16", 2307 * T), ("f8e4m3fn", 4614 * T)),
         bandwidth=7370e9, source=f"{_CLOUD} TPU7x (Ironwood); HBM 192 GiB as libtpu counts "
         "it (94.75 GiB available to XLA per device, two per chip, plus its reserve)",
         three_d=True, devices_per_chip=2),
)
_BY_NAME = {n: c for c in CHIPS for n in (c.key, *c.aliases)}


def gpu_config_text(chip: Chip) -> str:
    """The XLA target config of a GPU chip, as published."""
    with open(os.path.join(_SPECS, chip.spec), encoding="utf-8") as f:
        return f.read()


@lru_cache(maxsize=None)
def chip_device(key: str) -> tuple[Device, int]:
    """The roofline `Device` of a chip (per device for GPUs, per chip for TPUs) and its
    HBM bytes."""
    chip = _BY_NAME[key]
    if chip.platform == "gpu":
        fig = gpu_figures(parse_textproto(gpu_config_text(chip), source=chip.spec))
        flops = dict(fig.flops)
        source = (f"XLA's GPU target config {chip.spec} (openxla/xla xla/backends/gpu/"
                  "target_config/specs): unit rates x cores x clock x 2 per FMA; "
                  "memory_bandwidth")
        sheet = DEVICES.get(chip.key.split("-")[0])
        if sheet is not None and "bf16" not in flops:
            # Configs without matrix-unit tables: the vendor's tensor-core peaks.
            for dtype, value in sheet.flops.items():
                flops.setdefault(dtype, value)
            source += f"; tensor-core peaks from the {sheet.source}"
        flops.setdefault("*", flops.get("f32", 0.0))
        return Device(chip.key, flops, fig.bandwidth, source), fig.hbm_bytes
    flops = dict(chip.flops)
    flops.setdefault("*", flops["bf16"])
    return Device(chip.key, flops, chip.bandwidth, chip.source + " (per chip)"), chip.hbm_bytes


def device_limit(key: str, env: Mapping[str, str] | None = None,
                 devices_per_chip: int | None = None) -> Limit:
    """The memory one device of chip `key` gives a program: XLA's available HBM on a TPU,
    what JAX's allocator takes under the settings in `env` (default: this process's
    environment) on a GPU (see `_limits`)."""
    chip = _BY_NAME[key]
    _device, hbm = chip_device(key)
    if chip.platform == "gpu":
        return gpu_limit(chip.key.upper(), hbm, env)
    return tpu_limit(chip.tpu_name, hbm // (devices_per_chip or chip.devices_per_chip))


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed target name: the chip, XLA's topology and the number of devices."""

    name: str
    chip: Chip
    topology: str  # GPU: "PxHxD"; TPU: "v5e:2x4"
    devices: int  # chips x devices per chip is known only after compiling; here: chips
    slices: int = 1

    @property
    def platform(self) -> str:
        return self.chip.platform


def _dims(text: str) -> tuple[int, ...] | None:
    parts = text.split("x")
    if not parts or not all(p.isdigit() and 0 < len(p) < 6 for p in parts):
        return None
    dims = tuple(int(p) for p in parts)
    return dims if all(d > 0 for d in dims) else None


def _known() -> str:
    gpus = ", ".join(c.key for c in CHIPS if c.platform == "gpu")
    tpus = ", ".join(c.key for c in CHIPS if c.platform == "tpu")
    return f"GPUs: {gpus}; TPUs: {tpus} (hloscope targets lists them)"


def parse_target(text: str) -> Target:
    """Read a target name (see the module docstring); raises `HloscopeError` naming the
    known chips when the name is not one."""
    raw = text.strip()
    name = raw.lower()
    chip_name, colon, topo = name.partition(":")
    count = 1
    m = re.fullmatch(r"(.+?)x(\d+)", chip_name)
    if chip_name not in _BY_NAME and m and m.group(1) in _BY_NAME:
        chip_name, count = m.group(1), int(m.group(2))
        known = _BY_NAME[chip_name]
        if known.platform == "gpu" and not 0 < count <= MAX_DEVICES:
            raise HloscopeError(
                f"target {raw!r}: {known.key}xN takes from 1 to {MAX_DEVICES:,} GPUs, "
                f"not {count:,}", hint=f"such as {known.key}x8, or several hosts as XLA's "
                f"topology PARTITIONSxHOSTSxGPUS_PER_HOST, such as {known.key}:1x4x8")
    chip = _BY_NAME.get(chip_name)
    if chip is None:
        close = difflib.get_close_matches(chip_name, list(_BY_NAME), n=3, cutoff=0.5)
        raise HloscopeError(f"unknown target {raw!r}" + (
            f": did you mean {' or '.join(close)}?" if close else ""), hint=_known())
    if count < 1:
        raise HloscopeError(f"target {raw!r} asks for no devices")
    if chip.platform == "gpu":
        if colon:
            dims = _dims(topo)
            if dims is None or len(dims) != 3 or count != 1:
                raise HloscopeError(
                    f"target {raw!r}: a GPU topology is PARTITIONSxHOSTSxGPUS_PER_HOST, "
                    f"such as {chip.key}:1x2x8", hint=f"or {chip.key}x8 for 8 GPUs on one host")
            if dims[0] * dims[1] * dims[2] > MAX_DEVICES:
                raise HloscopeError(f"target {raw!r}: {dims[0] * dims[1] * dims[2]:,} GPUs; "
                                    f"a target has from 1 to {MAX_DEVICES:,}")
            return Target(raw, chip, topo, dims[0] * dims[1] * dims[2])
        return Target(raw, chip, f"1x1x{count}", count)
    # TPU
    if count != 1:
        raise HloscopeError(f"target {raw!r}: a TPU slice is named by its chips' topology",
                            hint=f"such as {chip.key}:" + (
                                "2x2x2" if chip.three_d else "2x4") + " for 8 chips")
    slices = 1
    if "*" in topo:
        topo, _, n = topo.partition("*")
        if not n.isdigit() or not 0 < int(n) < 10000:
            raise HloscopeError(f"target {raw!r}: after '*' give the number of slices")
        slices = int(n)
    if not topo:
        topo = "1x1x1" if chip.three_d else "1x1"
    dims = _dims(topo)
    want = 3 if chip.three_d else 2
    if dims is None or len(dims) != want:
        example = "2x2x1" if chip.three_d else "2x4"
        raise HloscopeError(f"target {raw!r}: a {chip.title} topology has {want} dimensions, "
                            f"such as {chip.key}:{example}")
    chips = 1
    for d in dims:
        chips *= d
    if chips * slices > MAX_DEVICES:
        raise HloscopeError(f"target {raw!r}: {chips * slices:,} chips; a target has from 1 "
                            f"to {MAX_DEVICES:,}")
    return Target(raw, chip, f"{chip.tpu_name}:{topo}", chips * slices, slices)


def targets() -> list[dict[str, object]]:
    """The GPUs and TPUs that `inspect(..., target=NAME)` compiles for, one dict per chip:
    `name` (and `aliases`), `platform`, `title`, `hbm_bytes`, `bf16_flops` and `bandwidth`
    (bytes/s), all per chip (a TPU v2, v3, v4 or 7x chip holds two devices), an `example`
    target name and the `source` of the figures; `limit_bytes`, the memory a program may
    use per device (XLA's available HBM on a TPU, JAX's allocator's share on a GPU under
    this process's settings), with `limit` (in words) and `limit_source`.  What
    ``hloscope targets`` prints."""
    rows: list[dict[str, object]] = []
    for chip in CHIPS:
        device, hbm = chip_device(chip.key)
        limit = device_limit(chip.key)
        example = (f"{chip.key}x8" if chip.platform == "gpu"
                   else f"{chip.key}:{'2x2x1' if chip.three_d else '2x4'}")
        rows.append({"name": chip.key, "aliases": list(chip.aliases), "platform": chip.platform,
                     "title": chip.title, "hbm_bytes": hbm,
                     "bf16_flops": device.flops.get("bf16", device.flops.get("*", 0.0)),
                     "bandwidth": device.bandwidth, "example": example,
                     "source": device.source, "devices_per_chip": chip.devices_per_chip,
                     "limit_bytes": limit.bytes, "limit": limit.what,
                     "limit_source": limit.source, "limit_share": limit.share or None})
    return rows
