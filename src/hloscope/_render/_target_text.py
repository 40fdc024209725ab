"""The text of what a report adds for a hardware target: which one, and whether it fits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._analysis._fit import HbmFit
from .._analysis._hardware import HardwareView
from .._analysis._memory import shared_again
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
    for note in info.get("notes") or []:
        line += f"\n  ({safe(str(note))})"
    if info.get("platform") == "gpu":
        line += ("\n  (GPU kernel tiles are XLA's defaults: autotuning needs a device, so "
                 "Triton and cuBLAS choices on a real GPU may differ)")
    return line


_BASIS = {"xla": "what XLA allocates (memory_analysis())",
          "xla+buffer-assignment": "what XLA allocates (memory_analysis(), its temp from "
                                   "XLA's buffer assignment)",
          "hloscope": "hloscope's estimate of what XLA allocates"}


def render_fit(fit: HbmFit) -> str:
    """``HBM per device: needs 1.23 GiB of 59.33 GiB on DEVICE: fits with 58.10 GiB to
    spare``, then what the need is made of and where the limit comes from; for a program
    that does not fit, the largest values at the peak."""
    head = (f"HBM per device: needs {format_bytes(fit.need_bytes)} of "
            f"{format_bytes(fit.usable_bytes)} on {safe(fit.device)}: ")
    verdict = (_spare(fit) if fit.fits
               else f"does NOT fit: needs {format_bytes(-fit.spare_bytes)} more")
    if fit.fits and fit.spare_bytes < fit.autotune_bytes:
        verdict += (f", less than the {format_bytes(fit.autotune_bytes)} cuBLAS's workspace "
                    "may add on the GPU: may NOT fit")
    terms = " + ".join(f"{k} {format_bytes(v)}" for k, v in fit.parts)
    if fit.aliased_bytes:
        terms += (f"; outputs {format_bytes(fit.aliased_bytes)} aliased to donated "
                  "arguments, counted once")
    lines = [head + verdict,
             f"  needs: {_BASIS.get(fit.basis, fit.basis)}: {terms}",
             f"  of: {safe(fit.limit) if fit.limit else 'the device HBM'}"]
    if fit.recomputed:
        n = len(fit.recomputed)
        shown = ", ".join(safe(x) for x in fit.recomputed[:3]) + (", ..." if n > 3 else "")
        values = f"{n} value{'s' if n > 1 else ''}"
        them = "them" if n > 1 else "it"
        lines.append(f"  to fit, XLA recomputes {values} instead of holding {them} (its "
                     f"rematerialization: {shown}): the program as written needs more, and "
                     "runs slower by the recompute (jax.checkpoint chooses what to recompute; "
                     "more memory or devices need none)" if fit.fits else
                     f"  XLA recomputes {values} instead of holding {them} to fit (its "
                     f"rematerialization: {shown}), and it still does not")
    if fit.autotune_bytes:
        lines.append(f"  on the GPU: XLA's autotuner, which runs only there, may give the "
                     f"matmuls to cuBLAS, whose workspace adds up to "
                     f"{format_bytes(fit.autotune_bytes)} (seen on an H100)")
    if not fit.fits and fit.largest:
        lines.append("  the largest values at the peak:")
        again = shared_again(fit.largest)
        for b in fit.largest:
            where = b.source or b.op_name or "-"
            same = (f"  (in the buffer of {safe(again[b.label])}: held once)"
                    if b.label in again else "")
            lines.append(f"    {format_bytes(b.bytes):>10}  {safe(b.label)}  {safe(b.shape)}  "
                         f"{safe(where)}{same}")
    return "\n".join(lines)


def _spare(fit: HbmFit) -> str:
    """``fits with 58.10 GiB to spare``; where the spare memory would read as the whole limit
    (a need below the limit's rounding), the share of it used instead."""
    spare = format_bytes(fit.spare_bytes)
    if spare != format_bytes(fit.usable_bytes) or not fit.usable_bytes:
        return f"fits with {spare} to spare"
    share = fit.need_bytes / fit.usable_bytes * 100
    return f"fits, using {share:.2g}% of it" if share >= 0.001 else "fits, using under 0.001% of it"


def render_catalog(rows: list[Mapping[str, Any]], width: int | None = None) -> str:
    """The table of `hloscope targets` and the grammar of target names."""
    body = [[str(r["name"]), str(r["platform"]), str(r["title"]),
             format_bytes(int(r["hbm_bytes"])),
             format_bytes(int(r.get("limit_bytes") or r["hbm_bytes"]))
             + ("" if int(r.get("devices_per_chip") or 1) == 1
                else f" x{r['devices_per_chip']}"),
             f"{float(r['bf16_flops']) / 1e12:,.0f}",
             f"{float(r['bandwidth']) / 1e9:,.0f}", str(r["example"])] for r in rows]
    gpu = next((r for r in rows if r["platform"] == "gpu"), None)
    lines = ["Targets (figures per chip; usable: per device)", table(
        ["name", "kind", "chip", "HBM", "usable", "bf16 TFLOP/s", "GB/s", "example"], body,
        right=(3, 4, 5, 6), width=width, drop=("example", "chip")), "",
        "Names: CHIP (one device), CHIPxN (N GPUs on one host), GPU:PxHxD (XLA's GPU topology:",
        "partitions x hosts x GPUs per host), TPU:AxB or TPU:AxBxC (a slice's chips), TPU:AxB*N",
        "(N slices).  GPU figures come from XLA's published target configs; TPU figures from",
        "Google's Cloud TPU documentation (hloscope targets --json names each source).",
        "Usable: what a program may use on one device, which 'does it fit?' compares with.",
        "TPU: the HBM XLA's TPU compiler has available (as its refusal prints it: 'Used",
        "15.75G of 15.75G hbm'), per device (x2: two per chip).  GPU: the share JAX's",
        "allocator takes, 75% unless XLA_PYTHON_CLIENT_MEM_FRACTION says otherwise (all of",
        "it with XLA_PYTHON_CLIENT_ALLOCATOR=platform); here: "
        + (safe(str(gpu.get("limit_share") or "-")) if gpu else "-") + ".",
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
