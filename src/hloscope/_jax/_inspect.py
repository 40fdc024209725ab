"""`hloscope.inspect(fn, *args)`: compile a function once and keep everything XLA says.

JAX is imported here, lazily: reading and analysing HLO files never needs it.
The function is traced, lowered and compiled separately (each phase timed);
the compile writes XLA's dump files (buffer assignment, live ranges) into a
temporary folder through ``compiler_options={'xla_dump_to': ...}``, so the
module is compiled once.  The `Report` is plain data: the texts of every IR
level, XLA's figures and the timings; hloscope's analyses (memory, kernels,
advice) are computed from the optimized module's text on first use, so a
report saved as JSON and loaded back (`load`) gives the same analyses.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from .._errors import HloscopeError
from .._repr import clip
from .._sources._saved import INSPECT_SCHEMA
from ._progress import phase, wait_for
from ._user import INSTALL_JAX, hide_own_frames_from_jax, user_code

__all__ = ["REPORT_SCHEMA", "Report", "inspect", "load", "show"]

REPORT_SCHEMA = INSPECT_SCHEMA


@dataclass
class Report:
    """What `inspect` captured.  Texts: `jaxpr`, `stablehlo`, `hlo_before`, `hlo_after`;
    XLA's files: `buffer_assignment`, `live_range` (may be empty); XLA's figures:
    `memory_analysis`, `cost_analysis` (None when this JAX version has none); `timings`
    in seconds (trace, lower, compile); `shardings` and per-device shapes; `device` and
    `versions`; `target`: the GPU or TPU compiled for (chip, topology, mesh, HBM and peak
    figures per device; see `hloscope targets`), None for the local devices; `donated`:
    the entry parameters the function donates (JAX's donate_argnums), those no output
    can take included (JAX drops them before XLA sees them)."""

    name: str
    jaxpr: str = ""
    stablehlo: str = ""
    hlo_before: str = ""
    hlo_after: str = ""
    buffer_assignment: str = ""
    live_range: str = ""
    memory_analysis: dict[str, int] | None = None
    cost_analysis: dict[str, float] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    shardings: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    target: dict[str, Any] | None = None
    donated: list[int] = field(default_factory=list)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # -- analyses (from the optimized module's text) ----------------------------------
    @property
    def module(self):  # type: ignore[no-untyped-def]
        if "module" not in self._cache:
            from .._sources._reader import read_text

            module = read_text(self.hlo_after, filename=f"<{self.name}>").module
            module.donated = tuple(self.donated)
            self._cache["module"] = module
        return self._cache["module"]

    def _flow(self):  # type: ignore[no-untyped-def]
        """The dataflow and live ranges of the module, computed once for all analyses."""
        if "flow" not in self._cache:
            from .._analysis._dataflow import analyze_dataflow
            from .._analysis._liverange import compute_live_ranges

            df = analyze_dataflow(self.module)
            self._cache["flow"] = (df, compute_live_ranges(df))
        return self._cache["flow"]

    def _xla_files(self):  # type: ignore[no-untyped-def]
        from .._sources._xla_dumps import XlaMemoryFiles, parse_buffer_assignment, parse_live_range

        ba = parse_buffer_assignment(self.buffer_assignment) if self.buffer_assignment else None
        lr = parse_live_range(self.live_range) if self.live_range else None
        files = tuple(n for n, t in (("buffer-assignment", self.buffer_assignment),
                                     ("live-range", self.live_range)) if t)
        return XlaMemoryFiles(files, ba, lr) if files else None

    @property
    def memory(self):  # type: ignore[no-untyped-def]
        """hloscope's memory report, with XLA's figures beside (see `analyze_memory`)."""
        if "memory" not in self._cache:
            from .._analysis._memory import analyze_memory

            df, lr = self._flow()
            self._cache["memory"] = analyze_memory(self.module, xla=self._xla_files(), df=df,
                                                   lr=lr, memory_analysis=self.memory_analysis,
                                                   code_in_memory=self._on_tpu())
        return self._cache["memory"]

    @property
    def kernels(self):  # type: ignore[no-untyped-def]
        """The kernel graph (see `kernel_graph`)."""
        if "kernels" not in self._cache:
            from .._analysis._kernels import kernel_graph

            df, lr = self._flow()
            self._cache["kernels"] = kernel_graph(self.module, df=df, lr=lr)
        return self._cache["kernels"]

    @property
    def measured(self):  # type: ignore[no-untyped-def]
        """Each kernel's measured time (`MeasuredTimes`) when inspected with
        ``profile=True`` (or loaded from a report saved so); None otherwise."""
        p = self._cache.get("profile")
        return self._cache.get("measured") if p is None else p.times  # saved: read back

    @property
    def profile(self):  # type: ignore[no-untyped-def]
        """The whole profile (`hloscope.Profile`: `measured` and the runs' wall times,
        what profiling cost and its notes; ``print`` shows every kernel) when inspected
        with ``profile=True``; None otherwise."""
        return self._cache.get("profile")

    @property
    def advice(self):  # type: ignore[no-untyped-def]
        """The advisor's findings, grouped and ranked (see `advise_groups`); times
        estimated for the target's chip where the report has one; ranked by measured time
        when the report was profiled.  From `hloscope.inspect(..., check=True)`, each group
        checked by compiling its fix (on first use: see `hloscope._checked`)."""
        if "advice" not in self._cache:
            from .._analysis._advisor import advise_groups

            from .._analysis._devices import target_label

            df, lr = self._flow()
            dev = self.roofline_device()
            times = self.measured
            advice = advise_groups(
                self.module, graph=self.kernels, df=df, lr=lr, device=dev,
                device_label=target_label(self.target, dev) if dev else None,
                min_share=None if times is None else 0)
            advice = self._unrolled(advice)
            fit = self.fit
            if fit is not None:  # memory traded for time is not worth it with room to spare
                from .._analysis._advisor import with_room  # (so its fix is not compiled)

                advice = with_room(advice, fit.need_bytes, fit.usable_bytes, fit.device)
            check = self._cache.get("check")  # hloscope.inspect(check=True): the fixes
            if check is not None:
                advice = check(advice)
                self._cache["checked"] = advice  # saved with the report
            if times is not None:
                from .._profile._rank import rank_measured

                advice = rank_measured(advice, times)
            self._cache["advice"] = advice
        return self._cache["advice"]

    def _unrolled(self, advice):  # type: ignore[no-untyped-def]
        """HS117 read on the module JAX gave XLA too, where the optimized one hides the
        copies (`unrolled_before_optimization`)."""
        if not self.hlo_before or any(g.rule == "HS117" for g in advice.groups):
            return advice
        from .._analysis._advisor import unrolled_before_optimization
        from .._sources._reader import parse

        try:
            lowered = parse(self.hlo_before)
        except HloscopeError:  # text this parser refuses: the advice without it
            return advice
        return unrolled_before_optimization(advice, lowered)

    @property
    def findings(self):  # type: ignore[no-untyped-def]
        """The advisor's findings, the most valuable first (see `advise`)."""
        return self.advice.findings

    @property
    def fit(self):  # type: ignore[no-untyped-def]
        """Whether the program fits in what the target gives it per device (see `hbm_fit`):
        XLA's available HBM on a TPU, JAX's allocator's share on a GPU; None when the
        report was not compiled for a target."""
        t = self.target
        if not t or not isinstance(t.get("hbm_bytes"), int) or t["hbm_bytes"] <= 0:
            return None
        if "fit" not in self._cache:
            from .._analysis._fit import hbm_fit

            limit, what = t.get("limit_bytes"), t.get("limit")
            autotune = 0
            if t.get("platform") == "gpu" and t.get("chip"):
                # JAX's allocator's share under the settings of this process, not of the
                # one that compiled (a report loaded back is judged here).
                from .._analysis._fit import cublas_workspace
                from .._target._catalog import device_limit

                got = device_limit(str(t["chip"]))
                limit, what = got.bytes, got.what
                autotune = cublas_workspace(self.kernels.kernels, str(t["chip"]))
            from .._analysis._fit import recomputed

            self._cache["fit"] = hbm_fit(
                self.memory, t["hbm_bytes"], str(t.get("device_kind") or t.get("name")),
                limit_bytes=int(limit or 0), limit=str(what or ""), autotune_bytes=autotune,
                recomputed=recomputed(self.module))
        return self._cache["fit"]

    @property
    def hardware(self):  # type: ignore[no-untyped-def]
        """Kernels by kind, async collectives, memory spaces and tile padding (see
        `hardware_view`)."""
        if "hardware" not in self._cache:
            from .._analysis._hardware import hardware_view

            df, lr = self._flow()
            self._cache["hardware"] = hardware_view(self.module, df, lr, self.kernels)
        return self._cache["hardware"]

    def _on_tpu(self) -> bool:
        """Compiled for a TPU (a target or the local devices): its code is in HBM."""
        return (self.target or self.device or {}).get("platform") == "tpu"

    def _tpu_without_temp(self) -> bool:
        """A TPU target's deviceless compile reports a temp of 0 whatever the program
        needs (the memory report's headline takes XLA's buffer assignment's instead)."""
        return bool(self.target and self.target.get("platform") == "tpu"
                    and not (self.memory_analysis or {}).get("temp_size_in_bytes"))

    def target_lines(self) -> list[str]:
        """What the report says about its target, as text: which hardware, whether the
        program fits, and what XLA made for it (empty without a target)."""
        if not self.target:
            return []
        from .._render._target_text import render_fit, render_hardware, render_target

        lines = [render_target(self.target)]
        if self.fit is not None:
            lines.append(render_fit(self.fit))
        hw = render_hardware(self.hardware, str(self.target.get("platform") or ""))
        return lines + ([hw] if hw else [])

    def roofline_device(self):  # type: ignore[no-untyped-def]
        """The target's peak rates per device as a roofline `Device` (None without a
        target)."""
        from .._analysis._devices import target_device

        return target_device(self.target)

    # -- saving -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (the analyses are not stored: they are recomputed)."""
        out: dict[str, Any] = {"schema": REPORT_SCHEMA}
        for name in self.__dataclass_fields__:
            if name != "_cache":
                out[name] = getattr(self, name)
        checked = self._cache.get("checked")
        if checked is not None:  # what compiling the fixes found, kept with the report
            from .._analysis._advisor import saved_checks

            out["advice_checks"] = saved_checks(checked)
        times = self.measured
        if times is not None:  # the profile's figures and what it said of its runs
            notes = self.profile.notes if self.profile is not None else times.notes
            out["measured"] = {**times.to_dict(), "notes": list(notes)}
        return out

    def save(self, path: str) -> str:
        """Write the report as JSON (load it back with `hloscope.load`)."""
        from .._write import write_text

        write_text(path, json.dumps(self.to_dict(), indent=1, sort_keys=True))
        return path

    def html(self) -> str:
        """The page of `hloscope report` for this program."""
        from .._analysis._summary import summarize
        from .._render._html import render_html
        from .._render._report_data import TIMELINE_POINTS, report_data

        from .._analysis._memory import analyze_memory

        df, lr = self._flow()
        # Every value (not only the largest 20 of `memory`): the timeline stacked by kind.
        mem = analyze_memory(self.module, xla=self._xla_files(), top=1 << 30, df=df, lr=lr,
                             memory_analysis=self.memory_analysis,
                             code_in_memory=self._on_tpu())
        data = report_data(self.module, summarize(self.module), self.kernels, mem,
                           self.advice, device=self.roofline_device(), times=self.measured)
        data["inspect"] = {"timings": self.timings, "versions": self.versions,
                           "device": self.device}
        if self.profile is not None:  # what may have disturbed the measurement, said
            data["notes"] = data["notes"] + [
                n for n in (f"The profile: {x}" for x in self.profile.notes)
                if n not in data["notes"]]
        data["texts"], cut = {}, []
        for key in ("jaxpr", "stablehlo", "hlo_before", "hlo_after"):
            text = getattr(self, key) or ""
            if len(text) > MAX_TEXT:
                cut.append(key)
                text = text[:MAX_TEXT] + "\n... (cut: report.save() keeps the whole text)"
            data["texts"][key] = text
        if cut:
            data["texts_cut"] = (f"{', '.join(cut)} cut to {MAX_TEXT >> 20} MiB each; "
                                 "report.save(path) keeps every text whole.")
        if self.shardings.get("inputs") or self.shardings.get("outputs"):
            data["shardings"] = _jax_shardings(self.shardings, data.get("shardings") or {})
        if self.target:
            # Said first, at the top of the page: which hardware, and whether it fits.
            lines = [line for text in self.target_lines() for line in text.split("\n")]
            data["notes"] = [" ".join(t.split()) for t in lines if t.strip()] + list(
                data.get("notes") or [])
            data["target"] = self.target
            data["fit"] = self.fit.to_dict() if self.fit is not None else None
            data["hardware"] = self.hardware.to_dict(points=TIMELINE_POINTS)
        return render_html(data)

    def summary_line(self) -> str:
        """One line: what the device must hold (XLA's allocation), the most live at once,
        the kernels and the compile time."""
        from .._units import format_bytes

        m = self.memory
        head = m.figures.headline
        each = " per device" if m.figures.per_device else ""
        t = self.timings
        nk, nt = len(self.kernels.kernels), len(self.kernels.temporaries)
        peak, again = m.peak_bytes or 0, m.peak_counted_again
        tmax = m.timeline_max[0]
        allocated = max(peak, sum(v.bytes for v in m.peak_values))  # TPU tiles padded
        if again:
            held = allocated - again
            live = (f"{format_bytes(peak)} live at once by XLA's count, "
                    f"{format_bytes(held)} of buffers (it counts values written in place "
                    "twice)")
        elif tmax > 1.01 * allocated:
            live = (f"{format_bytes(peak)} live at once at XLA's peak moment (the timeline "
                    f"goes up to {format_bytes(tmax)})")
        else:
            over = (" (more than allocated: an output written into a donated argument and "
                    "that argument share one buffer, and each counts in XLA's live-range "
                    "peak)" if head.bytes is not None and peak > head.bytes
                    and dict(head.parts).get("aliased", 0) else "")
            live = f"at most {format_bytes(peak)} live at once{over}"
        parts = [f"{self.name}: needs {format_bytes(head.bytes or 0)}{each} (what XLA "
                 f"allocates), {live}",
                 f"{nk} kernel{'' if nk == 1 else 's'}",
                 f"{nt} array{'' if nt == 1 else 's'} between kernels"]
        if "compile" in t:
            parts.append(f"compile {t['compile'] * 1e3:.0f} ms")
        return "; ".join(parts)

    def __repr__(self) -> str:
        t = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.timings.items())
        dev = self.device
        where = f" on {dev.get('count')} {dev.get('kind')} device(s)" if dev else ""
        return clip(f"Report({self.name!r}: {len(self.hlo_after):,} characters of optimized "
                    f"HLO{where}{'; ' + t if t else ''})")

    def __str__(self) -> str:
        """The summary line and the time of each phase: what ``print(report)`` shows."""
        t = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.timings.items())
        dev = self.device
        lines = [self.summary_line()]
        lines += self.target_lines()
        if t or dev:
            lines.append("timings: " + (t or "-") + (
                f"; {dev.get('count')} {dev.get('kind')} device(s)" if dev else "")
                + (f"; jax {self.versions['jax']}" if self.versions.get("jax") else ""))
        measured = self.measured
        if measured is not None:
            from .._units import format_seconds

            top = measured.kernels[0] if measured.kernels else None
            lines.append(f"measured: step {format_seconds(measured.step)} (typical of "
                         f"{measured.runs} profiled runs)" + (
                             f", slowest kernel {top.name} {format_seconds(top.median)}"
                             if top else "") + "; print(report.profile) for every kernel"
                         + (f" and {_n_notes(len(self.profile.notes))}" if self.profile.notes
                            else ""))
        lines.append("(report.html() for the page, report.show() to display it, "
                     "report.memory / .kernels / .findings for the analyses)")
        return "\n".join(lines)

    def show(self) -> None:
        """Display the report: in a notebook, the page; elsewhere, the summary printed and
        the page written to an HTML file whose path is printed."""
        if _in_notebook():
            from IPython.display import display

            display(self)
            return
        from .._write import write_text

        page = self.html()
        digest = hashlib.sha1(page.encode("utf-8")).hexdigest()[:10]
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.name)[:60]
        path = os.path.join(tempfile.gettempdir(), "hloscope", f"{safe}-{digest}.html")
        write_text(path, page)
        print(f"{self}\nwrote {path}")

    def _repr_html_(self) -> str:
        import html as _html

        page = self.html()
        levels = "".join(
            f"<details><summary>{_html.escape(title)} ({len(text):,} characters)</summary>"
            f"<pre style=\"max-height:400px;overflow:auto\">{_html.escape(text)}</pre></details>"
            for title, text in (("jaxpr", self.jaxpr), ("StableHLO", self.stablehlo),
                                ("HLO before optimization", self.hlo_before),
                                ("HLO after optimization", self.hlo_after)) if text)
        return (f"<div><b>{_html.escape(self.summary_line())}</b></div>"
                f"<iframe srcdoc=\"{_html.escape(page, quote=True)}\" "
                "style=\"width:100%;height:900px;border:1px solid #ddd\" "
                "sandbox=\"allow-scripts\"></iframe>" + levels)


MAX_TEXT = 2 << 20  # characters of each program text (jaxpr, StableHLO, HLO) in the page


def _jax_shardings(jax_sh: dict[str, Any], module_sh: dict[str, Any]) -> dict[str, Any]:
    """The page's shardings as JAX names them (``NamedSharding(mesh=Mesh('data': 8), spec=
    P('data'))``), with the shapes and per-device shapes of the module's entry."""
    import re

    def rows(names: list[Any], mod: list[list[str]], label: str) -> list[list[str]]:
        out = []
        for i, text in enumerate(names):
            m = mod[i] if i < len(mod) else ["", "", "", ""]
            out.append([m[0] or f"{label} {i}", m[1], str(text), m[3]])
        return out

    mesh = ""
    for text in list(jax_sh.get("inputs") or []) + list(jax_sh.get("outputs") or []):
        found = re.search(r"Mesh\(((?:'[^']*': \d+(?:, )?)+)", str(text))
        if found:
            mesh = found.group(1).rstrip(", ")
            break
    return {"mesh": mesh or module_sh.get("mesh", ""),
            "inputs": rows(list(jax_sh.get("inputs") or []), module_sh.get("inputs") or [],
                           "argument"),
            "outputs": rows(list(jax_sh.get("outputs") or []), module_sh.get("outputs") or [],
                            "result")}


def load(path: str) -> Report:
    """A report saved with `Report.save` (or ``hloscope inspect --save``), checked field
    by field: a damaged or crafted file raises `HloscopeError` naming the file and field."""
    from .._sources._saved import load_json, report_fields

    d = load_json(path, what="report")
    report = Report(**report_fields(d, path))
    if isinstance(d, dict) and d.get("advice_checks") is not None:  # its checked advice
        from .._analysis._advisor import apply_saved_checks
        from .._errors import HloSourceError

        saved = d["advice_checks"]
        if not isinstance(saved, dict):
            raise HloSourceError("field 'advice_checks' is not an object", path=path)

        from .._analysis._advisor import Advice

        try:  # checked now, at load time, as every other field
            apply_saved_checks(Advice([], None, True, 0), saved)
        except ValueError as e:
            raise HloSourceError(f"field {e}", path=path,
                                 hint="re-create it with hloscope inspect --save") from None
        report._cache["check"] = lambda advice: apply_saved_checks(advice, saved)
    if isinstance(d, dict) and d.get("measured") is not None:  # a profiled report
        from .._profile._times import MeasuredTimes

        report._cache["measured"] = MeasuredTimes.from_dict(d["measured"], path)
    return report


def _figures(obj: Any) -> dict[str, Any] | None:
    if obj is None:
        return None
    if isinstance(obj, (list, tuple)):  # some JAX versions give one dict per device
        obj = obj[0] if obj else None
        if obj is None:
            return None
    if isinstance(obj, dict):
        return {str(k): (float(v) if isinstance(v, (int, float)) else v) for k, v in obj.items()
                if isinstance(v, (int, float))}
    return {k: getattr(obj, k) for k in dir(obj)
            if k.endswith("_in_bytes") and isinstance(getattr(obj, k), int)}


def inspect(fn: Any, *args: Any, static_argnums: int | tuple[int, ...] = (),
            static_argnames: str | tuple[str, ...] = (),
            compiler_options: dict[str, Any] | None = None, target: str | None = None,
            mesh: str | dict[str, int] | None = None,
            shard: dict[int, Any] | list[Any] | None = None, profile: bool | int = False,
            _time_plain_compile: bool = False, **kwargs: Any) -> Report:
    """Trace, lower and compile `fn` on `args` once, keeping every IR level, XLA's memory
    and cost figures and dump files, the time of each phase, shardings and versions.

    `fn` may be a plain function, a `jax.jit` wrapped one, a `Lowered` or a `Compiled`.

    `target` compiles for hardware that need not be here: ``"h100x8"``,
    ``"a100-80:2x4x8"``, ``"tpu-v5e:2x4"`` (``hloscope targets`` lists the names).  The
    arguments (arrays, or `jax.ShapeDtypeStruct`s: nothing is allocated) are laid on
    `mesh` (``"data=8"``, ``"2x4:data,model"`` or ``{"data": 2, "model": 4}``; default
    one axis ``data`` over every device) with `shard`: a partition spec per argument
    (``{0: "data,None"}`` or `PartitionSpec`s); arguments without one keep the spec of
    their own `NamedSharding`, or are replicated.  The function runs under that mesh, so
    bare `PartitionSpec`s in sharding constraints work unchanged.

    `profile` (True, or a number of runs; not with `target`) then runs the compiled
    function under JAX's profiler (see `hloscope.profile`): `report.measured` holds each
    kernel's measured time, and the advice and page rank by it; `report.profile` is the
    whole `Profile` (its notes are on the page too).

    The compile's time includes writing XLA's dump files; `_time_plain_compile` (for
    `hloscope.bench`) compiles once more without them, first, and times that one.
    """
    try:
        import jax
    except ImportError:
        raise HloscopeError("JAX is not installed: hloscope.inspect compiles with JAX",
                            hint=INSTALL_JAX) from None
    prepared = None
    if profile and target is not None:
        raise HloscopeError("profile= runs the function here; target= compiles it for "
                            "hardware that need not be here",
                            hint="profile without target=, or read a profile taken on the "
                                 "target with hloscope.read_profile")
    if target is not None:
        from ._target import abstract_args, parse_spec, prepare, retarget_jit

        prepared = prepare(target, mesh)
        # A function jitted for real devices: the same function, jitted for the target.
        notes: list[str] = []
        fn, own_specs = retarget_jit(fn, prepared.mesh, notes)
        given = shard if isinstance(shard, dict) else dict(enumerate(shard or ()))
        if any(not isinstance(k, int) or isinstance(k, bool) for k in given):
            raise HloscopeError("shard= maps argument numbers to partition specs",
                                hint="for example shard={0: 'data,None'} or a list, one "
                                     "spec (or None) per argument")
        specs = {**own_specs, **{k: parse_spec(v) for k, v in given.items() if v is not None}}
        args = tuple(abstract_args(args, prepared.mesh, specs, notes))
        if notes:
            prepared.info["notes"] = notes
    elif mesh is not None or shard is not None:
        raise HloscopeError("mesh= and shard= lay arguments on a target's devices",
                            hint="give target= too, such as target='h100x8'")
    timings: dict[str, float] = {}
    jaxpr = ""
    name = getattr(fn, "__name__", type(fn).__name__)
    kind = type(fn).__name__
    if kind == "Compiled":
        raise HloscopeError("a Compiled object has no dump files to read",
                            hint="pass the function or its Lowered (jax.jit(f).lower(...)) "
                                 "so hloscope compiles it once with xla_dump_to")
    if kind == "Lowered":
        lowered = fn
    else:
        jitted = fn if hasattr(fn, "trace") else jax.jit(
            fn, static_argnums=static_argnums, static_argnames=static_argnames)
        hide_own_frames_from_jax()
        t0 = time.perf_counter()
        with phase(f"tracing {name}"), user_code(f"JAX traced {name}"), \
                _mesh_context(prepared):
            traced = jitted.trace(*args, **kwargs)
        timings["trace"] = time.perf_counter() - t0
        jaxpr = str(traced.jaxpr)
        t0 = time.perf_counter()
        with phase(f"lowering {name}"), user_code(f"JAX lowered {name}"):
            lowered = traced.lower()
        timings["lower"] = time.perf_counter() - t0
    where = f" for {prepared.target.name}" if prepared is not None else ""

    def compile_with(options: dict[str, Any]) -> Any:
        def compile_it() -> Any:
            with user_code(f"XLA compiled {name}"), _target_stderr(prepared):
                return lowered.compile(compiler_options=options)

        return wait_for(f"XLA compiling {name}{where}", compile_it,
                        describe_slow=lambda: _describe_lowered(lowered))

    plain = None
    if _time_plain_compile:  # the compile the program pays for, without the dump files
        t0 = time.perf_counter()
        plain = compile_with(dict(compiler_options or {}))
        timings["compile"] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="hloscope-", ignore_cleanup_errors=True) as dump:
        options = dict(compiler_options or {})
        options.setdefault("xla_dump_to", dump)
        t0 = time.perf_counter()
        try:
            compiled = compile_with(options)
        except Exception as e:
            if prepared is not None and "RESOURCE_EXHAUSTED" in str(e):
                # The answer to "does it fit?" when the target's compiler refuses it.
                said = str(e).strip().splitlines()[0].replace("RESOURCE_EXHAUSTED: ", "")
                said = said.rstrip(".")
                raise HloscopeError(
                    f"{name} does not fit on {prepared.target.name}: XLA's compiler for it "
                    f"says: {said}" + _estimate(lowered, prepared),
                    hint="shard it over more devices (a larger topology, with --shard), "
                         "donate arguments (donate_argnums), or rematerialize "
                         "(jax.checkpoint)") from None
            if prepared is not None and "INTERNAL:" in str(e):
                raise _xla_failed(e, name, prepared.target.name) from None
            raise
        timings.setdefault("compile", time.perf_counter() - t0)

        def newest(pattern: str) -> str:
            found = sorted(glob.glob(os.path.join(options["xla_dump_to"], pattern)),
                           key=os.path.getmtime)
            if not found:
                return ""
            with open(found[-1], encoding="utf-8", errors="replace") as f:
                return f.read()

        buffer_assignment = newest("*after_optimizations-buffer-assignment.txt")
        live_range = newest("*after_optimizations-live-range.txt")
    try:
        in_sh, out_sh = compiled.input_shardings, compiled.output_shardings
        shardings = {"inputs": [str(s) for s in jax.tree_util.tree_leaves(in_sh)],
                     "outputs": [str(s) for s in jax.tree_util.tree_leaves(out_sh)]}
        avals = jax.tree_util.tree_leaves(getattr(compiled, "in_avals", ()))
        leaves = jax.tree_util.tree_leaves(in_sh)
        shardings["per_device_input_shapes"] = [
            list(s.shard_shape(a.shape)) for s, a in zip(leaves, avals) if hasattr(a, "shape")]
    except Exception:  # noqa: BLE001  (sharding details vary across JAX versions)
        shardings = {}
    devices = prepared.devices if prepared is not None else jax.devices()
    import jaxlib

    report = Report(
        name=name, jaxpr=jaxpr, stablehlo=lowered.as_text(),
        hlo_before=lowered.as_text(dialect="hlo"), hlo_after=compiled.as_text(),
        buffer_assignment=buffer_assignment, live_range=live_range,
        memory_analysis=_figures(compiled.memory_analysis()),
        cost_analysis=_figures(compiled.cost_analysis()), timings=timings,
        shardings=shardings,
        device={"kind": devices[0].device_kind,
                "platform": prepared.target.platform if prepared else devices[0].platform,
                "count": len(devices)},
        versions={"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                  "python": platform.python_version(),
                  **(prepared.info["packages"] if prepared else {})},
        target=prepared.info if prepared is not None else None,
        donated=_donated(lowered),
    )
    report._cache["compiled"] = compiled if plain is None else plain  # for bench; not saved
    if profile:
        from .._profile._capture import profile_report

        skip = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        runs = 10 if profile is True else int(profile)
        report._cache["profile"] = profile_report(
            report, [a for i, a in enumerate(args) if i not in skip], runs=runs)
    return report


def _n_notes(n: int) -> str:
    return f"{n} note{'' if n == 1 else 's'}"


def _donated(lowered: Any) -> list[int]:
    """The entry parameters `lowered` donates, as the user asked (JAX keeps only those an
    output can take in the module; an argument JAX pruned as unused has no parameter)."""
    import jax

    try:
        flags = [bool(a.donated) for a in jax.tree_util.tree_leaves(lowered.args_info)]
        kept = lowered._lowering.compile_args.get("kept_var_idx")  # noqa: SLF001
    except Exception:  # noqa: BLE001  (JAX versions differ: no donations known)
        return []
    order = sorted(kept) if kept is not None else range(len(flags))
    return [n for n, i in enumerate(order) if i < len(flags) and flags[i]]


def _describe_lowered(lowered: Any) -> str:
    """What the module JAX gave XLA already shows (its size, an unrolled loop)."""
    from .._analysis._repeats import describe_lowered
    from .._sources._reader import read_text

    try:  # with source lines, where this JAX gives them
        text = lowered.as_text(dialect="hlo", debug_info=True)
    except TypeError:
        text = lowered.as_text(dialect="hlo")
    return describe_lowered(read_text(text,
                                      filename="<lowered>").module)


def _xla_failed(e: Exception, name: str, target: str) -> HloscopeError:
    """XLA's compiler for a target failed inside itself (``INTERNAL:``): not the user's
    code's error; said as XLA's, its escaped tabs as spaces, with what to try."""
    text = str(e).replace("\\t", "  ").strip()
    first = text.splitlines()[0].replace("INTERNAL: ", "")
    hint = ("this is an error inside XLA's compiler, not in your code: try another version "
            "of jax and jaxlib, or report it to XLA with the module XLA_FLAGS=--xla_dump_to=DIR "
            "writes")
    if "tile sizes" in first or "triton" in first.lower():
        hint = ("XLA's Triton matmul emitter could not tile a matmul (without a GPU it "
                "cannot autotune): with XLA_FLAGS=--xla_gpu_enable_triton_gemm=false XLA "
                "gives the matmuls to cuBLAS, as a GPU's autotuner often does")
    return HloscopeError(f"XLA's compiler for {target} failed on {name}: "
                         f"{first[:300]}", hint=hint)


def _estimate(lowered: Any, prepared: Any) -> str:
    """For a program XLA refuses on one device: hloscope's own figure beside XLA's words,
    its estimate of the allocation from the module before XLA's passes, and the target's
    limit (nothing for several devices: that module is not yet one device's)."""
    if len(prepared.devices) != 1:
        return ""
    try:
        from .._analysis._memory import analyze_memory
        from .._sources._reader import read_text
        from .._units import format_bytes

        module = read_text(lowered.as_text(dialect="hlo"), filename="<lowered>").module
        need = analyze_memory(module).figures.headline.bytes or 0
        limit = int(prepared.info["limit_bytes"])
    except Exception:  # noqa: BLE001  (XLA's own answer stands without it)
        return ""
    return (f"; hloscope's estimate before XLA's passes (fusion and buffer reuse lower it): "
            f"about {format_bytes(need)} of the {format_bytes(limit)} it may use")


def _mesh_context(prepared: Any) -> Any:
    """The target's mesh as JAX's current mesh while the function is traced."""
    import contextlib

    if prepared is None:
        return contextlib.nullcontext()
    import jax

    setter = getattr(jax, "set_mesh", None) or getattr(jax.sharding, "use_mesh", None)
    return setter(prepared.mesh) if setter is not None else contextlib.nullcontext()


def _target_stderr(prepared: Any) -> Any:
    """Compiling for a target: the plugins' no-hardware chatter kept off stderr."""
    import contextlib

    if prepared is None:
        return contextlib.nullcontext()
    from ._target import quiet_native_stderr

    return quiet_native_stderr()


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (a terminal IPython shows text, not HTML)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show(fn: Any, *args: Any, **kwargs: Any) -> Report:
    """`inspect` and display the report (see `Report.show`)."""
    report = inspect(fn, *args, **kwargs)
    report.show()
    return report
