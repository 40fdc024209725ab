"""The text of what a report adds for a hardware target: which one, and whether it fits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._analysis._fit import HbmFit
from .._analysis._hardware import HardwareView
from .._units import format_bytes
from ._memory_text import sparkline
from ._term import safe
from ._text import table

__all__ = ["render_catalog", "render_fit", "render_hardware", "render_target"]


def render_target(info: Mapping[str, Any]) -> str:
    """One line: the target, its devices and mesh, and where its figures come from."""
    mesh = info.get("mesh") or {}
    mesh_text = " x ".join(f"{a}={n}" for a, n in mesh.items()) or "-"
    per = "" if info.get("devices_per_chip", 1) == 1 else (
        f" ({info['devices_per_chip']} devices per chip)")
    stripped = info.get("stripped_fields") or []
    line = (f"target {safe(str(info.get('name')))}: {info.get('devices')} x "
            f"{safe(str(info.get('device_kind')))}{per}, topology {info.get('topology')}, "
            f"mesh {mesh_text}; compiled ahead of time, no device used")
    if stripped:
        line += (f"\n  (fields of XLA's target config this plugin does not know, removed: "
                 f"{', '.join(stripped)})")
    if info.get("platform") == "gpu":
        line += ("\n  (GPU kernel tiles are XLA's defaults: autotuning needs a device, so "
                 "Triton and cuBLAS choices on a real GPU may differ)")
    return line


def render_fit(fit: HbmFit) -> str:
    """``HBM: needs 1.23 GiB of 79.11 GiB per device: fits with 77.88 GiB to spare``, or
    what is missing and the largest values at the peak."""
    what = ("XLA's allocation: " + " + ".join(f"{k} {format_bytes(v)}" for k, v in fit.parts)
            if fit.basis == "xla" else "hloscope's peak of the values in HBM, tiles padded"
            if fit.basis == "hbm-peak" else "hloscope's peak of live values")
    head = (f"HBM per device: needs {format_bytes(fit.need_bytes)} ({what}) of "
            f"{format_bytes(fit.hbm_bytes)} on {safe(fit.device)}: ")
    if fit.fits:
        return head + f"fits with {format_bytes(fit.spare_bytes)} to spare"
    lines = [head + f"does NOT fit: needs {format_bytes(-fit.spare_bytes)} more"]
    if fit.largest:
        lines.append("  the largest values at the peak:")
        for b in fit.largest:
            where = b.source or b.op_name or "-"
            lines.append(f"    {format_bytes(b.bytes):>10}  {safe(b.label)}  {safe(b.shape)}  "
                         f"{safe(where)}")
    return "\n".join(lines)


def render_catalog(rows: list[Mapping[str, Any]], width: int | None = None) -> str:
    """The table of `hloscope targets` and the grammar of target names."""
    body = [[str(r["name"]), str(r["platform"]), str(r["title"]),
             format_bytes(int(r["hbm_bytes"])), f"{float(r['bf16_flops']) / 1e12:,.0f}",
             f"{float(r['bandwidth']) / 1e9:,.0f}", str(r["example"])] for r in rows]
    lines = ["Targets (figures per chip)", table(
        ["name", "kind", "chip", "HBM", "bf16 TFLOP/s", "GB/s", "example"], body,
        right=(3, 4, 5), width=width, drop=("example", "chip")), "",
        "Names: CHIP (one device), CHIPxN (N GPUs on one host), GPU:PxHxD (XLA's GPU topology:",
        "partitions x hosts x GPUs per host), TPU:AxB or TPU:AxBxC (a slice's chips), TPU:AxB*N",
        "(N slices).  GPU figures come from XLA's published target configs; TPU figures from",
        "Google's Cloud TPU documentation (hloscope targets --json names each source).",
        "GPUs need pip install 'hloscope[gpu-target]', TPUs pip install 'hloscope[tpu-target]'."]
    return "\n".join(lines) + "\n"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def render_hardware(view: HardwareView, platform: str = "") -> str:
    """Kernels by kind, async collectives and their overlap, memory spaces and tile
    padding: a line or two each, only those the module has."""
    lines: list[str] = []
    if view.kernel_kinds:
        parts = []
        for k in view.kernel_kinds:
            detail = ", ".join(f"{d} {n}" for d, n in k.detail[:3]) + (
                ", ..." if len(k.detail) > 3 else "")
            kind = k.kind + ("s" if k.count != 1 and k.kind in (
                "XLA fusion", "collective", "library call") else "")
            parts.append(f"{k.count} {kind} ({safe(detail)})")
        title = {"gpu": "GPU kernels", "tpu": "TPU kernels"}.get(platform, "Kernels")
        lines.append(f"{title} by kind: " + "; ".join(parts))
    if view.async_pairs:
        hidden = [a for a in view.async_pairs if not a.exposed]
        exposed = [a for a in view.async_pairs if a.exposed]
        line = f"Async collectives: {_count(len(view.async_pairs), 'pair')}"
        if hidden:
            line += ", overlapped: " + ", ".join(
                f"{a.collective} {format_bytes(a.bytes)} with {_count(a.between, 'kernel')}"
                for a in hidden[:4]) + (", ..." if len(hidden) > 4 else "")
        if exposed:
            line += "; exposed (nothing runs while they move data): " + ", ".join(
                f"{safe(a.start)} {format_bytes(a.bytes)}"
                + (" (synchronous)" if a.sync else "") for a in exposed[:4]) + (
                ", ..." if len(exposed) > 4 else "")
        lines.append(line)
    if view.blocking:
        lines.append(f"Collectives without an async form ({len(view.blocking)}), which the "
                     "compute waits for: " + ", ".join(safe(b) for b in view.blocking[:5])
                     + (", ..." if len(view.blocking) > 5 else ""))
    if view.spaces:
        lines.append("Memory spaces (allocated sizes, tiles padded; each over the schedule):")
        width = max(len(sp.name) for sp in view.spaces)
        counts = [f"({_count(sp.values, 'buffer')})" for sp in view.spaces]
        cwidth = max(len(c) for c in counts)
        # The sparkline takes what is left of 96 columns (at least 16).
        spark = max(16, 96 - (2 + width + 2 + 16 + cwidth + 2 + 2))
        for sp, c in zip(view.spaces, counts):
            lines.append(f"  {sp.name:<{width}}  peak {format_bytes(sp.peak_bytes):>10} "
                         f"{c:<{cwidth}}  |{sparkline(sp.timeline, spark)}|")
    if view.peak_padding_bytes or view.padded:
        line = (f"Tile padding: {format_bytes(view.peak_padding_bytes)} of the values live at "
                "the peak is padding of tiled layouts")
        lines.append(line)
        for p in view.padded[:3]:
            times = p.bytes / p.logical_bytes if p.logical_bytes else 0.0
            lines.append(f"  {safe(p.value)} {safe(p.shape)}: {format_bytes(p.bytes)} for "
                         f"{format_bytes(p.logical_bytes)} of elements (x{times:.1f})"
                         + (f"  {safe(p.source)}" if p.source else ""))
    return "\n".join(lines)
