"""Plots with matplotlib (the optional ``plot`` extra), imported only when a plot is asked for.

SVG output is deterministic: fixed hash salt, no date, no random ids.
"""

from __future__ import annotations

import os

from .._analysis._memory import MemoryReport
from .._errors import HloscopeError
from .._write import atomic_path
from ._text import format_bytes

__all__ = ["plot_memory_timeline"]

_SCALES = ((1024 ** 3, "GiB"), (1024 ** 2, "MiB"), (1024, "KiB"), (1, "B"))


def _pyplot():  # type: ignore[no-untyped-def]
    try:
        import matplotlib
    except ImportError:
        raise HloscopeError("plotting needs matplotlib, which is not installed",
                            hint="pip install 'hloscope[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_path(path: str) -> str:
    """The extension of a plot file (.png or .svg), or a clear error."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".svg"):
        raise HloscopeError(f"cannot write a plot to {path!r}: unknown file type",
                            hint="name the file .png or .svg")
    return ext


def save_figure(fig, path: str, ext: str) -> None:  # type: ignore[no-untyped-def]
    """Save deterministically (SVG: fixed hash salt, no date)."""
    from matplotlib import rcParams

    rcParams["svg.hashsalt"] = "hloscope"
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=ext[1:],
                    metadata={"Date": None} if ext == ".svg" else {"Software": "hloscope"})


def plot_memory_timeline(report: MemoryReport, path: str, *, labels: int = 4) -> str:
    """Write the live-bytes timeline to `path` (.png or .svg), the peak marked and its
    largest values labelled.  Returns the path."""
    ext = plot_path(path)
    plt = _pyplot()
    series = list(report.timeline) or [0]
    top = max(max(series), report.peak_bytes or 0)
    scale, unit = next((s, u) for s, u in _SCALES if top >= s or s == 1)
    ys = [v / scale for v in series]
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
    try:
        steps = list(range(len(ys) + 1))
        ys = ys + ys[-1:]  # the last step lasts one step too
        ax.step(steps, ys, where="post", color="#3b6ea8", linewidth=1.2)
        ax.fill_between(steps, ys, step="post", color="#3b6ea8", alpha=0.18)
        if report.peak_bytes is not None:
            px = report.peak_step
            py = report.peak_bytes / scale
            ax.axvline(px, color="#c0392b", linewidth=1, linestyle="--")
            ax.plot([px], [py], "o", color="#c0392b")
            right_half = px > len(ys) / 2
            ax.annotate(f"peak {format_bytes(report.peak_bytes)}\nstep {px}: "
                        f"{report.peak_instruction}", (px, py),
                        xytext=(-8 if right_half else 8, -4), textcoords="offset points",
                        fontsize=8, color="#c0392b", va="top",
                        ha="right" if right_half else "left",
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none",
                              "alpha": 0.85})
            names = [f"{b.label} {b.shape}: {format_bytes(b.bytes)}"
                     + (f" ({b.source})" if b.source else "")
                     for b in report.peak_values[:labels]]
            if names:
                ax.text(0.99, 0.02, "largest at the peak:\n" + "\n".join(names),
                        transform=ax.transAxes, ha="right", va="bottom", fontsize=7,
                        family="monospace",
                        bbox={"boxstyle": "round", "fc": "white", "ec": "#999999", "alpha": 0.9})
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("step of the flattened schedule")
        ax.set_ylabel(f"live bytes ({unit})")
        ax.set_title(f"{report.module}: memory over the schedule", fontsize=10)
        ax.set_xlim(0, max(1, len(ys) - 1))
        ax.set_ylim(0, top / scale * 1.12 if top else 1)
        ax.grid(alpha=0.3)
        save_figure(fig, path, ext)
    finally:
        plt.close(fig)
    return path
