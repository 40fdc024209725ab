"""Peak compute and memory bandwidth of common accelerators, for roofline estimates.

Each figure is the vendor's published peak (dense, without sparsity), with
where it comes from.  A user can describe any other device with `Device`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import HloModelError
from .._repr import brief_repr

__all__ = ["DEVICES", "Device", "device", "link_bandwidth", "module_device",
           "platform_of", "target_device", "target_label"]

T = 1e12


@dataclass(frozen=True, slots=True)
class Device:
    """`flops` maps an element type (``f32``, ``bf16``, ...) to peak FLOP/s; ``*`` is the
    fallback.  `bandwidth` is memory bandwidth in bytes/s."""

    __repr__ = brief_repr

    name: str
    flops: dict[str, float]
    bandwidth: float
    source: str = ""
    notes: dict[str, str] = field(default_factory=dict)

    def peak_flops(self, element_type: str) -> float:
        f = self.flops.get(element_type)
        if f is None:
            f = self.flops.get("*", 0.0)
        return f


DEVICES: dict[str, Device] = {d.name: d for d in (
    Device("a100", {"f64": 9.7 * T, "f32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T,
                    "f16": 312 * T, "s8": 624 * T, "*": 19.5 * T}, 2.039e12,
           "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): FP64 9.7, FP32 19.5, "
           "BF16/FP16 Tensor 312, INT8 624 TFLOPS dense; HBM2e 2,039 GB/s"),
    Device("h100", {"f64": 34 * T, "f32": 67 * T, "tf32": 494.5 * T, "bf16": 989.5 * T,
                    "f16": 989.5 * T, "f8e4m3fn": 1979 * T, "f8e5m2": 1979 * T, "*": 67 * T},
           3.35e12,
           "NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP64 34, FP32 67, BF16/FP16 "
           "Tensor 989.5, FP8 1,979 TFLOPS dense; HBM3 3.35 TB/s"),
    Device("v100", {"f64": 7.8 * T, "f32": 15.7 * T, "f16": 125 * T, "*": 15.7 * T}, 0.9e12,
           "NVIDIA V100 datasheet (SXM2): FP64 7.8, FP32 15.7, Tensor 125 TFLOPS; HBM2 "
           "900 GB/s"),
    Device("tpu-v4", {"bf16": 275 * T, "s8": 275 * T, "*": 275 * T}, 1.2e12,
           "Google Cloud TPU v4 documentation: 275 TFLOPS bf16/int8 per chip; HBM 1,200 GB/s"),
    Device("tpu-v5e", {"bf16": 197 * T, "s8": 394 * T, "*": 197 * T}, 0.819e12,
           "Google Cloud TPU v5e documentation: 197 TFLOPS bf16, 394 TOPS int8 per chip; "
           "HBM 819 GB/s"),
    Device("tpu-v5p", {"bf16": 459 * T, "s8": 918 * T, "*": 459 * T}, 2.765e12,
           "Google Cloud TPU v5p documentation: 459 TFLOPS bf16, 918 TOPS int8 per chip; "
           "HBM 2,765 GB/s"),
    Device("cpu", {"*": 1e11}, 2e10,
           "nominal figures for a CPU (100 GFLOP/s, 20 GB/s): they rank a CPU module's "
           "kernels, they do not predict a particular CPU's times"),
)}


def module_device(module: object) -> Device:
    """The device a module was compiled for, as far as its text says: a TPU v5e for a TPU
    module (tiled layouts), an H100 for a GPU module, else the nominal CPU."""
    from ._sharing import compiled_for_gpu, compiled_for_tpu

    if compiled_for_tpu(module):
        return DEVICES["tpu-v5e"]
    if compiled_for_gpu(module):
        return DEVICES["h100"]
    return DEVICES["cpu"]


# Bandwidth between devices, per device and direction, for a collective's time: NVLink 4
# on H100 SXM, 900 GB/s both directions (NVIDIA H100 datasheet); TPU v5e ICI, 1,600 Gbps
# per chip (Google Cloud TPU v5e documentation); CPU: nominal.
_LINK = {"gpu": 450e9, "tpu": 200e9, "cpu": 1e10}


def link_bandwidth(platform: str) -> float:
    """Bytes per second one device sends to the others (``gpu``, ``tpu`` or ``cpu``): the
    one figure the kernel table and the advisor price a collective's transfer with."""
    return _LINK.get(platform, _LINK["cpu"])


def platform_of(dev: Device) -> str:
    """``tpu`` for a TPU device (by name), else ``gpu``."""
    return "tpu" if dev.name.lower().startswith("tpu") else "gpu"


def target_device(target: Mapping[str, Any] | None) -> Device | None:
    """A compile target's peak rates per device (an inspect report's `target`) as a
    `Device`, named after its chip; None without a target or without its figures.  The
    one device `inspect`, and `lint` and `report` on its saved report, weigh findings
    with."""
    if not target or not isinstance(target.get("flops"), dict):
        return None
    try:
        return Device(str(target.get("chip") or target.get("name")),
                      {str(k): float(v) for k, v in target["flops"].items()},
                      float(target.get("bandwidth") or 0.0), str(target.get("source") or ""))
    except (TypeError, ValueError):
        return None


def target_label(target: Mapping[str, Any] | None, dev: Device) -> str:
    """How the advisor names a target's device: ``h100 (h100x8)``."""
    return f"{dev.name} ({(target or {}).get('name')})"


def device(name: str) -> Device:
    """A built-in device by name (``a100``, ``h100``, ``v100``, ``tpu-v4``, ``tpu-v5e``,
    ``tpu-v5p``, ``cpu``)."""
    try:
        return DEVICES[name.lower()]
    except KeyError:
        raise HloModelError(f"unknown device {name!r}",
                            hint=f"use one of {', '.join(sorted(DEVICES))}, or give "
                                 "--peak-flops and --bandwidth") from None
