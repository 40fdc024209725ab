"""Scaling plots and tables (matplotlib, PNG or SVG; SVG deterministic).

Strong and weak scaling: time (or XLA's memory figures) against device count,
one line per series, with the spread of each point (the pooled median's 95%
CI, or min to max) and the process grid beside each point; optionally the
ideal lines and a second panel of parallel efficiency.  Time against data
size: a panel per device count, sizes written as 128³ when cubic.  Measured
series come first in every legend, ideal lines after.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._errors import HloscopeError
from .._render._plot import _pyplot, plot_path, save_figure
from .._render._term import fit, safe
from .._render._text import table
from ._scaling import ScalingSeries

__all__ = ["MEMORY_KINDS", "UNITS", "plot_scaling", "scaling_table"]

_COLORS = ("#3b6ea8", "#d8572a", "#2a9d8f", "#8a5cd8", "#c9a227", "#c0392b", "#555555")
_STYLES = ("-", "--", ":", "-.", (0, (5, 1)))
MEMORY_KINDS = ("generated_code", "argument", "output", "temporary", "peak")
UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1024 ** 2,
         "GiB": 1024 ** 3}
_STAT_WORDS = {"median": "median of the pooled runs",
               "min": "fastest run (Run 0 included)", "mean": "mean of every run (Run 0 "
               "included)", "max": "slowest run (Run 0 included)",
               "jit": "JIT time (trace, lower, compile and the first run)"}


def _unit(series: Sequence[ScalingSeries], kinds: Sequence[str], unit: str | None) -> str:
    if unit is not None:
        if unit not in UNITS:
            raise HloscopeError(f"unknown unit {unit!r}", hint=f"use one of {', '.join(UNITS)}")
        return unit
    top = max((v or 0 for s in series for p in s.points for k, v in p.memory if k in kinds),
              default=0)
    return next(u for u in ("GiB", "MiB", "KiB", "B") if top >= UNITS[u] or u == "B")


def _x(s: ScalingSeries) -> list[int]:
    return [p.size if s.mode == "size" else p.devices for p in s.points]


def _legend(ax, handles=None, labels=None) -> None:  # type: ignore[no-untyped-def]
    """The legend with measured series first and ideal lines after (matplotlib lists
    plain lines before error bars otherwise)."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("ideal"))
    outside = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)} if len(labels) > 4 else {
        "loc": "best"}
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, **outside)


def scaling_table(series: list[ScalingSeries], *, width: int | None = None,
                  memory: Sequence[str] = (), unit: str | None = None) -> str:
    """The series as text: devices (or size), grid, time, spread, runs pooled, ideal,
    efficiency, and the memory figures asked for; in `width` columns (None: whole)."""
    lines: list[str] = []
    u = _unit(series, memory, unit) if memory else ""
    for s in series:
        size_mode = s.mode == "size"
        lines.append(f"{'time against size' if size_mode else s.mode + ' scaling'}: "
                     f"{safe(s.label)}")
        head = ["size" if size_mode else "devices", "grid", "time (ms)", "spread (ms)", "runs",
                "files"] + ([] if size_mode else ["ideal (ms)", "efficiency"])
        head += [f"{k} ({u})" for k in memory]
        rows = []
        for p in s.points:
            row = [p.label or f"{p.size:,}" if size_mode else p.devices, p.grid or "-",
                   f"{p.time * 1e3:.4f}", f"{p.low * 1e3:.4f}-{p.high * 1e3:.4f}", p.runs,
                   p.results]
            if not size_mode:
                row += [f"{p.ideal * 1e3:.4f}", f"{p.efficiency:.1%}"]
            mem = dict(p.memory)
            row += ["?" if mem.get(k) is None else f"{mem[k] / UNITS[u]:.4g}" for k in memory]
            rows.append(row)
        lines.append(table(head, rows, right=range(len(head)), width=width,
                           drop=("files", "ideal (ms)", "runs")))
        metric = sorted({p.metric for p in s.points})
        words = " / ".join(_STAT_WORDS.get(m, m) for m in metric)
        if s.stat == "median" and metric == ["mean"]:
            words = "mean of every run (Run 0 included: summary figures only)"
        lines.append(f"  time: {words}")
    return fit("\n".join(lines) + "\n", width)


def plot_scaling(series: list[ScalingSeries], path: str, *, efficiency: bool = False,
                 ideal: bool = False, title: str | None = None, xlabel: str | None = None,
                 ylabel: str | None = None, xscale: str | None = None,
                 yscale: str | None = None, figsize: tuple[float, float] | None = None,
                 memory: Sequence[str] = (), unit: str | None = None) -> str:
    """Write the plot to `path` (.png or .svg).  Returns the path.

    `memory`: plot these of XLA's figures (`MEMORY_KINDS`) instead of the time, in
    `unit` (`UNITS`; default: a readable one).  `xscale`/`yscale`: ``linear``, ``log``
    or ``symlog`` (default: log base 2 for devices and sizes; log for times that span
    more than ten times, else linear)."""
    ext = plot_path(path)
    if not series:
        raise HloscopeError("nothing to plot", hint="pass results at two or more device "
                                                    "counts, or plot against size (--size)")
    for k in memory:
        if k not in MEMORY_KINDS:
            raise HloscopeError(f"unknown memory figure {k!r}",
                                hint=f"use some of {', '.join(MEMORY_KINDS)}")
    for name, v in (("xscale", xscale), ("yscale", yscale)):
        if v is not None and v not in ("linear", "log", "symlog"):
            raise HloscopeError(f"unknown {name} {v!r}", hint="use linear, log or symlog")
    plt = _pyplot()
    mode = series[0].mode
    u = _unit(series, memory, unit) if memory else ""
    if mode == "size":
        panels = sorted({s.devices for s in series})
        cols = min(len(panels), 3)
        rows = -(-len(panels) // cols)
        size = figsize or (4.6 * cols, 3.8 * rows + 0.6)
        fig, axes = plt.subplots(rows, cols, figsize=size, dpi=110, squeeze=False,
                                 sharey=True)
        where = {d: axes[i // cols][i % cols] for i, d in enumerate(panels)}
        for i in range(len(panels), rows * cols):
            axes[i // cols][i % cols].set_visible(False)
    else:
        rows = 2 if efficiency else 1
        fig, axes = plt.subplots(rows, 1, figsize=figsize or (8, 4.2 * rows), dpi=110,
                                 squeeze=False)
        where = {}
    try:
        values: list[float] = []
        ideal_lines = []
        colour_of: dict[str, str] = {}  # one colour per series label, in every panel
        annotated: set[tuple[int, float, str]] = set()
        for s in series:
            ax = where[s.devices] if mode == "size" else axes[0][0]
            xs = _x(s)
            label = s.label if mode != "size" else s.label.rsplit(", ", 1)[0]
            c = colour_of.setdefault(label, _COLORS[len(colour_of) % len(_COLORS)])
            if memory:
                for j, k in enumerate(memory):
                    ys = [(dict(p.memory).get(k) or 0) / UNITS[u] for p in s.points]
                    values += ys
                    ax.plot(xs, ys, marker="o", color=c, linestyle=_STYLES[j % len(_STYLES)],
                            linewidth=1.4, label=f"{label}: {k}")
            else:
                ys = [p.time * 1e3 for p in s.points]
                values += ys
                err = [[max(0.0, (p.time - p.low) * 1e3) for p in s.points],
                       [max(0.0, (p.high - p.time) * 1e3) for p in s.points]]
                ax.errorbar(xs, ys, yerr=err, marker="o", color=c, capsize=3, linewidth=1.4,
                            label=label)
                if mode != "size":  # the grid beside each point, clear of marker and caps
                    for x, p in zip(xs, s.points):
                        # A point several strategies share (one device) is labelled once.
                        if p.grid and (x, p.time, p.grid) not in annotated:
                            annotated.add((x, p.time, p.grid))
                            ax.annotate(p.grid, (x, p.time * 1e3), xytext=(7, -3),
                                        textcoords="offset points", ha="left", va="top",
                                        fontsize=7, color=c)
                if ideal and mode != "size":
                    ideal_lines.append((ax, xs, [p.ideal * 1e3 for p in s.points], c, label))
            if efficiency and mode != "size":
                axes[1][0].plot(xs, [p.efficiency * 100 for p in s.points], marker="s",
                                color=c, label=label)
        # After every measured line; series that start from one point (the one-device run
        # several strategies share) have one ideal line, drawn once.
        shared: dict[tuple[float, float], list[tuple]] = {}
        for line in ideal_lines:
            shared.setdefault((line[1][0], line[2][0]), []).append(line)
        for group in shared.values():
            ax, xs, ys, c, label = group[0]
            if len(group) > 1:
                ideal_at = {x: y for _, gx, gy, _, _ in group for x, y in zip(gx, gy)}
                xs, ys = sorted(ideal_at), [ideal_at[x] for x in sorted(ideal_at)]
                c, label = "#888888", ", ".join(g[4] for g in group)
            ax.plot(xs, ys, linestyle="--", color=c, alpha=0.6, linewidth=1,
                    label=f"ideal ({label})")
        positive = [v for v in values if v > 0]
        spread = max(positive) / min(positive) if positive else 1.0
        ys_scale = yscale or ("log" if spread > 10 else "linear")
        all_axes = [a for r in axes for a in r if a.get_visible()]
        ticks = sorted({x for s in series for x in _x(s)})
        names = {}
        if mode == "size":
            names = {p.size: p.label or f"{p.size:,}" for s in series for p in s.points}
        for a in all_axes:
            if xscale in (None, "log"):
                a.set_xscale("log", base=2)
                a.minorticks_off()
            else:
                a.set_xscale(xscale)
            a.set_xticks(ticks)
            a.set_xticklabels([names.get(t, str(t)) for t in ticks])
            a.grid(alpha=0.3, which="both")
        for a in (all_axes if mode == "size" else [axes[0][0]]):  # efficiency stays linear
            a.set_yscale(ys_scale)
        what_y = (f"memory ({u})" if memory else "time per run (ms)" if series[0].stat != "jit"
                  else "JIT time (ms)")
        stat_note = "" if memory else f" ({_STAT_WORDS[series[0].stat]})"
        if mode == "size":
            for d, a in where.items():
                a.set_title(f"{d} device{'s' if d != 1 else ''}", fontsize=9)
                a.set_xlabel(xlabel or "data size")
            for r in axes:
                r[0].set_ylabel(ylabel or what_y)
            handles, labels = all_axes[0].get_legend_handles_labels()
            seen = dict(zip(labels, handles))
            for a in all_axes[1:]:
                h, lab = a.get_legend_handles_labels()
                seen.update({k: v for k, v in zip(lab, h) if k not in seen})
            _legend(all_axes[0], list(seen.values()), list(seen.keys()))
            fig.suptitle(title or f"{'memory' if memory else 'time'} against data size"
                         f"{stat_note}", fontsize=10)
        else:
            ax = axes[0][0]
            ax.set_ylabel(ylabel or what_y)
            ax.set_xlabel(xlabel or "devices")
            what = ("strong scaling: fixed problem size" if mode == "strong"
                    else "weak scaling: fixed size per device")
            if memory:
                what = "memory, " + what
            ax.set_title(title or what + stat_note, fontsize=10)
            _legend(ax)
            if efficiency:
                e = axes[1][0]
                e.axhline(100, color="#888888", linestyle="--", linewidth=1, label="ideal (100%)")
                e.set_ylim(0, max(110, max(p.efficiency * 100 for s in series
                                           for p in s.points) * 1.05))
                e.set_ylabel("parallel efficiency (%)")
                e.set_xlabel(xlabel or "devices")
                _legend(e)
        save_figure(fig, path, ext)
    finally:
        plt.close(fig)
    return path
