"""Strong and weak scaling plots (matplotlib, PNG or SVG; SVG deterministic).

Time against device count (log-log for strong scaling, log-x for weak), one
line per series with the spread of each point (the pooled median's 95% CI,
or min to max for summary-only results) and the process grid written at each
point; optionally the ideal lines and a second panel of parallel efficiency.
"""

from __future__ import annotations

from .._errors import HloscopeError
from .._render._plot import _pyplot, plot_path, save_figure
from .._render._term import fit, safe
from .._render._text import table
from ._scaling import ScalingSeries

__all__ = ["plot_scaling", "scaling_table"]

_COLORS = ("#3b6ea8", "#d8572a", "#2a9d8f", "#8a5cd8", "#c9a227", "#c0392b", "#555555")


def scaling_table(series: list[ScalingSeries], *, width: int | None = None) -> str:
    """The series as text: devices, grid, time, spread, runs pooled, ideal, efficiency; in
    `width` columns (None: every line whole)."""
    lines: list[str] = []
    for s in series:
        lines.append(f"{s.mode} scaling: {safe(s.label)}")
        rows = [[p.devices, p.grid or "-", f"{p.time * 1e3:.4f}",
                 f"{p.low * 1e3:.4f}-{p.high * 1e3:.4f}", p.runs, p.results,
                 f"{p.ideal * 1e3:.4f}", f"{p.efficiency:.1%}"] for p in s.points]
        lines.append(table(["devices", "grid", "time (ms)", "spread (ms)", "runs", "files",
                            "ideal (ms)", "efficiency"], rows, right=range(8), width=width,
                           drop=("files", "ideal (ms)", "runs")))
        metric = {p.metric for p in s.points}
        lines.append("  time: " + (" / ".join(sorted(metric))) + " of the pooled runs"
                     if metric == {"median"} else
                     "  time: " + " / ".join(sorted(metric)) + " (mean: summary figures only)")
    return fit("\n".join(lines) + "\n", width)


def plot_scaling(series: list[ScalingSeries], path: str, *, efficiency: bool = False,
                 ideal: bool = False, title: str | None = None) -> str:
    """Write the plot to `path` (.png or .svg).  Returns the path."""
    ext = plot_path(path)
    if not series:
        raise HloscopeError("nothing to plot", hint="pass results at two or more device "
                                                    "counts")
    plt = _pyplot()
    mode = series[0].mode
    rows = 2 if efficiency else 1
    fig, axes = plt.subplots(rows, 1, figsize=(8, 4.2 * rows), dpi=110, squeeze=False)
    ax = axes[0][0]
    try:
        for i, s in enumerate(series):
            c = _COLORS[i % len(_COLORS)]
            xs = [p.devices for p in s.points]
            ys = [p.time * 1e3 for p in s.points]
            err = [[max(0.0, (p.time - p.low) * 1e3) for p in s.points],
                   [max(0.0, (p.high - p.time) * 1e3) for p in s.points]]
            ax.errorbar(xs, ys, yerr=err, marker="o", color=c, capsize=3, linewidth=1.4,
                        label=s.label)
            for p in s.points:
                if p.grid:
                    ax.annotate(p.grid, (p.devices, p.time * 1e3), xytext=(0, 7),
                                textcoords="offset points", ha="center", fontsize=7, color=c)
            if ideal:
                ax.plot(xs, [p.ideal * 1e3 for p in s.points], linestyle="--", color=c,
                        alpha=0.6, linewidth=1, label=f"ideal ({s.label})")
            if efficiency:
                axes[1][0].plot(xs, [p.efficiency * 100 for p in s.points], marker="s",
                                color=c, label=s.label)
        for a in [r[0] for r in axes]:
            a.set_xscale("log", base=2)
        if mode == "strong":
            ax.set_yscale("log")
        devices = sorted({p.devices for s in series for p in s.points})
        for a in [r[0] for r in axes]:
            a.set_xticks(devices)
            a.set_xticklabels([str(d) for d in devices])
            a.grid(alpha=0.3, which="both")
        ax.set_ylabel("time per run (ms)")
        ax.set_xlabel("devices")
        what = ("strong scaling: fixed problem size" if mode == "strong"
                else "weak scaling: fixed size per device")
        ax.set_title(title or what, fontsize=10)
        ax.legend(fontsize=7, loc="best")
        if efficiency:
            e = axes[1][0]
            e.axhline(100, color="#888888", linestyle="--", linewidth=1)
            e.set_ylim(0, max(110, max(p.efficiency * 100 for s in series for p in s.points)
                              * 1.05))
            e.set_ylabel("parallel efficiency (%)")
            e.set_xlabel("devices")
        save_figure(fig, path, ext)
    finally:
        plt.close(fig)
    return path
