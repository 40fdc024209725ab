"""The memory figures a user compares, each under one name with one meaning, and why they differ.

A module's memory has several honest answers, and users meet them side by
side: hloscope's "Peak", the highest point of its timeline, XLA's
``compiled.memory_analysis()`` fields (whose ``peak_memory_in_bytes`` is a
different figure on each backend), XLA's temp allocation.  `memory_figures`
leads with one of them, the headline a memory question is answered with: what
the device must hold, XLA's allocation (`MemoryFigures.headline`); the rest
follow in one labelled list, with an explanation for every pair that looks
contradictory (the timeline above the peak, a temp allocation above the peak,
``peak_memory_in_bytes`` far from the peak), so that the text, the JSON and the
HTML report all say the same thing.  docs/memory.md defines each.

Pure: plain numbers in, frozen data out; it imports nothing from the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._units import format_bytes

__all__ = ["dump_figures", "pct", "Explanation", "Figure", "MemoryFigures", "memory_figures", "optimized_note"]

# `memory_analysis()` fields, in the order JAX's CompiledMemoryStats lists them; others
# (a newer JAX's) follow in name order.
_MA_ORDER = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
             "temp_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes",
             "host_argument_size_in_bytes", "host_output_size_in_bytes",
             "host_alias_size_in_bytes", "host_temp_size_in_bytes",
             "host_generated_code_size_in_bytes")

_MA_MEANING = {
    "argument_size_in_bytes": "the arguments' buffers",
    "output_size_in_bytes": "the outputs' buffers",
    "alias_size_in_bytes": "outputs written into donated arguments (counted in both above)",
    "temp_size_in_bytes": "XLA's temp allocation: every temporary, packed into one block",
    "generated_code_size_in_bytes": "the compiled code (and, on some backends, constants)",
    "peak_memory_in_bytes": "the runtime's own peak figure; its definition differs by backend",
}


def optimized_note(optimized: bool) -> str:
    """The sentence every command prints first about a module XLA has not optimized."""
    if optimized:
        return ""
    return ("not optimized: XLA has not fused or scheduled it; what runs is in "
            "compiled.as_text()")


@dataclass(frozen=True, slots=True)
class Figure:
    """One labelled figure: `key` is stable (JSON), `label` is what the text shows, `source`
    says who computed it (``hloscope``, ``XLA dump``, ``memory_analysis()``)."""

    key: str
    label: str
    bytes: int | None
    source: str
    meaning: str
    at: str = ""  # where on the timeline, for the peak and the timeline's max
    parts: tuple[tuple[str, int], ...] = ()  # the allocation's terms

    def to_dict(self) -> dict[str, Any]:
        out = {"key": self.key, "label": self.label, "bytes": self.bytes,
               "source": self.source, "meaning": self.meaning, "at": self.at or None}
        if self.parts:
            out["parts"] = dict(self.parts)
        return out


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why two figures that look contradictory are both right (`keys` names them)."""

    keys: tuple[str, str]
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"figures": list(self.keys), "text": self.text}


@dataclass(frozen=True, slots=True)
class MemoryFigures:
    """The headline figures of one module, and the explanations of their differences."""

    figures: tuple[Figure, ...]
    explanations: tuple[Explanation, ...]
    optimized: bool
    per_device: bool

    def get(self, key: str) -> Figure | None:
        return next((f for f in self.figures if f.key == key), None)

    @property
    def headline(self) -> Figure | None:
        """What the device must hold: XLA's allocation (None for XLA's files alone)."""
        return self.get("allocation")

    def to_dict(self) -> dict[str, Any]:
        return {"optimized": self.optimized, "per_device": self.per_device,
                "headline": "allocation" if self.headline is not None else None,
                "figures": [f.to_dict() for f in self.figures],
                "explanations": [e.to_dict() for e in self.explanations]}

    def __repr__(self) -> str:
        return (f"MemoryFigures({len(self.figures)} figures, "
                f"{len(self.explanations)} explanations)")


def _b(n: int | float) -> str:
    return format_bytes(int(n))


def _two(a: int, b: int) -> tuple[str, str]:
    """Two sizes in words, exact where the rounded words would read the same."""
    x, y = _b(a), _b(b)
    return (f"{a:,} B", f"{b:,} B") if x == y and a != b else (x, y)


def pct(ours: int, theirs: int) -> str:
    """``+1.5%``; small differences keep their digits (``-0.02%``, never ``-0.0%``)."""
    if not theirs:
        return ""
    d = (ours - theirs) / theirs * 100
    return f"{d:+.1f}%" if abs(d) >= 0.1 or d == 0 else f"{d:+.2g}%"


def memory_figures(*, peak: int | None, peak_at: str, timeline_max: int, timeline_at: str,
                   all_spaces_peak: int | None = None,
                   arguments: int, outputs: int, aliased: int, constants: int,
                   temp_estimate: int, optimized: bool, per_device: bool = False,
                   xla_peak: int | None = None, xla_temp: int | None = None,
                   memory_analysis: Mapping[str, float] | None = None,
                   code_in_memory: bool = False) -> MemoryFigures:
    """The labelled figures and explanations (see the module docstring): first the
    headline, ``allocation`` (what the device must hold), then the live-range peak, then
    the details.

    `peak`/`peak_at`: hloscope's live-range peak (device memory) and where;
    `all_spaces_peak`: the same over every memory space (a TPU's VMEM too), where it
    differs; `timeline_max`/`timeline_at`:
    the timeline's highest point; the sizes as hloscope counts them; `xla_peak`/`xla_temp`:
    XLA's dump files' figures; `memory_analysis`: ``compiled.memory_analysis()``'s fields;
    `code_in_memory`: the generated code takes device memory too (a TPU's), and counts.
    """
    ma = {k: int(v) for k, v in (memory_analysis or {}).items()}
    each = " (each device)" if per_device else ""
    figs = [_allocation(ma, arguments, outputs, aliased, temp_estimate, xla_temp,
                        code_in_memory, each),
            Figure("live_range_peak", "Peak", peak, "hloscope",
                   "the most live at one moment (XLA's HloLiveRange peak"
                   + (", in HBM alone" if all_spaces_peak not in (None, peak) else "")
                   + "): where memory is tightest; not what XLA reserves", peak_at),
            Figure("timeline_max", "Timeline max", timeline_max, "hloscope",
                   "the top of the timeline below (each buffer once): where the program "
                   "is busiest, not a size to plan for", timeline_at)]
    if all_spaces_peak not in (None, peak):
        figs.append(Figure("all_spaces_peak", "All spaces", all_spaces_peak, "hloscope",
                           "XLA's HloLiveRange peak over every memory space: HBM and the "
                           "on-chip memory (VMEM, S(1)), which has allocations of its own "
                           "outside the device memory"))
    figs += [Figure("arguments", "Arguments", arguments, "hloscope", "the entry's parameters"),
             Figure("outputs", "Outputs", outputs, "hloscope", "the entry's result")]
    if aliased:
        figs.append(Figure("aliased", "Aliased", aliased, "hloscope",
                           "outputs written into donated arguments (counted in both above, "
                           "once in the allocation)"))
    figs.append(Figure("constants", "Constants", constants, "hloscope",
                       "literals in the module (stored with the executable)"))
    figs.append(Figure("temp_estimate", "Temporaries", temp_estimate, "hloscope",
                       "hloscope's estimate of XLA's temp allocation (one packed block)"))
    if xla_peak is not None:
        figs.append(Figure("xla_live_range_peak", "XLA's peak", xla_peak, "XLA dump",
                           "the peak in XLA's *-live-range.txt dump"))
    if xla_temp is not None:
        figs.append(Figure("xla_temp", "XLA's temp", xla_temp, "XLA dump",
                           "the preallocated-temp allocation in XLA's buffer assignment"))
    names = [k for k in _MA_ORDER if k in ma] + sorted(k for k in ma if k not in _MA_ORDER)
    for k in names:
        figs.append(Figure(f"memory_analysis.{k}", k, ma[k], "memory_analysis()",
                           _MA_MEANING.get(k, "as XLA reports it")))
    return MemoryFigures(tuple(figs), tuple(_explain(figs, ma, optimized)), optimized,
                         per_device)


def _allocation(ma: dict[str, int], arguments: int, outputs: int, aliased: int,
                temp_estimate: int, xla_temp: int | None, code_in_memory: bool,
                each: str) -> Figure:
    """What the device must hold: arguments + outputs - aliased + temp (+ code where it
    takes device memory), from XLA's `memory_analysis()` where given (its temp from XLA's
    buffer assignment where it reports 0, as deviceless TPU compiles do), else with XLA's
    dumped temp or hloscope's estimate."""
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")
    if all(k in ma for k in keys):
        arguments, outputs = ma[keys[0]], ma[keys[1]]
        aliased, temp = ma.get("alias_size_in_bytes", 0), ma[keys[2]]
        source = "memory_analysis()"
        if not temp and xla_temp:
            temp, source = xla_temp, "memory_analysis() + XLA's buffer assignment"
    elif xla_temp is not None:
        temp, source = xla_temp, "hloscope + XLA dump"
    else:
        temp, source = temp_estimate, "hloscope"
    parts = [("arguments", arguments), ("outputs", max(0, outputs - aliased)), ("temp", temp)]
    if code_in_memory and ma.get("generated_code_size_in_bytes"):
        parts.append(("code", ma["generated_code_size_in_bytes"]))
    if aliased:
        parts.append(("aliased", aliased))  # the outputs written into donated arguments
    total = sum(b for k, b in parts if k != "aliased")
    return Figure("allocation", "Needs", total, source,
                  "what the device must hold: XLA's allocation, arguments + outputs (less "
                  "those written into donated arguments) + temp" + (" + code" if any(
                      k == "code" for k, _ in parts) else "") + each, parts=tuple(parts))


def dump_figures(*, peak: int | None, peak_step: int | None, arguments: int | None,
                 outputs: int | None, constants: int | None, temp: int | None,
                 total: int | None) -> MemoryFigures:
    """The figures of XLA's memory files alone (no module): each as the files state it."""
    rows = [("xla_live_range_peak", "XLA's peak", peak, "the peak in XLA's *-live-range.txt dump",
             f"step {peak_step}" if peak_step is not None else ""),
            ("arguments", "Arguments", arguments, "the parameters' allocations", ""),
            ("outputs", "Outputs", outputs, "the output allocations", ""),
            ("constants", "Constants", constants, "the constants' allocations", ""),
            ("xla_temp", "XLA's temp", temp, "the preallocated-temp allocation", ""),
            ("xla_total", "XLA's total", total, "every allocation of the buffer assignment", "")]
    figs = tuple(Figure(k, label, b, "XLA dump", meaning, at)
                 for k, label, b, meaning, at in rows if b is not None)
    return MemoryFigures(figs, (), True, False)


def _explain(figs: list[Figure], ma: dict[str, int], optimized: bool) -> list[Explanation]:
    f = {x.key: x for x in figs}
    peak = f["live_range_peak"].bytes
    out: list[Explanation] = []
    if not optimized:
        out.append(Explanation(("live_range_peak", "temp_estimate"), (
            "The module is not optimized: these are the figures of the module as written, in "
            "its printed order. XLA's fusion, scheduling and buffer reuse change them; for the "
            "figures of what runs, read the optimized module (compiled.as_text(), or the "
            "*after_optimizations* dump files).")))
    tmax = f["timeline_max"].bytes or 0
    if peak is not None and tmax > peak:
        t_s, p_s = _two(tmax, peak)
        at = f["timeline_max"].at
        why = (f"the peak's own step, where the peak is {p_s}: the same values, sized two "
               "ways. The timeline counts each buffer at the size it takes (on a TPU, padded "
               "to its tiles: f32[3,6] in T(4,128) tiles takes 2 KiB, not 72 B; a tuple's "
               "pointer table), XLA's HloLiveRange each value by its shape's elements"
               ) if at and at == f["live_range_peak"].at else (
               f"above the peak {p_s}: XLA's HloLiveRange picks the peak moment with its own "
               "sweep, which sizes each value by its defining instruction's whole shape (for "
               "a value inside a tuple, the tuple's pointer table) and can miss the highest "
               "moment; the timeline counts every buffer at its real size at every step")
        out.append(Explanation(("timeline_max", "live_range_peak"), (
            f"The timeline reaches {t_s} at {at}, {why}. Neither is what XLA reserves: the "
            "device needs the allocation.")))
    temp = f["temp_estimate"].bytes or 0
    xla_temp = f["xla_temp"].bytes if "xla_temp" in f else ma.get("temp_size_in_bytes")
    for key, t in (("temp_estimate", temp), ("xla_temp", xla_temp)):
        if peak is not None and t is not None and t > peak:
            out.append(Explanation((key, "live_range_peak"), (
                f"The temp allocation ({_b(t)}) is larger than the peak ({_b(peak)}), though "
                "the peak counts more than temporaries: XLA packs all temporaries into one "
                "block at fixed offsets, so gaps between buffers that are never live together "
                "(fragmentation) and alignment make the block larger than what is live at any "
                "one moment.")))
            break
    foot = f["allocation"].bytes
    if peak is not None and foot is not None and peak > foot:
        out.append(Explanation(("live_range_peak", "allocation"), (
            f"The peak ({_b(peak)}) is above the allocation ({_b(foot)}): the live-range peak "
            "counts every value live at that moment at its own size, but a result written in "
            "place into an operand's buffer (a dynamic-update-slice, a custom-call's "
            "output_to_operand_aliasing, a loop's state, an output into a donated argument) "
            "shares that buffer, XLA lets a result reuse the memory of an operand that dies "
            "at the same instruction, and constants live with the code, so the allocations "
            "hold less than the live values add up to.")))
    if "peak_memory_in_bytes" in ma and peak is not None:
        out.append(_peak_memory(ma, peak, f["constants"].bytes or 0))
    est = f["temp_estimate"].bytes
    if "temp_size_in_bytes" in ma and est is not None and est != ma["temp_size_in_bytes"]:
        x = ma["temp_size_in_bytes"]
        rel = f" ({pct(est, x)})" if x else ""
        out.append(Explanation(("temp_estimate", "memory_analysis.temp_size_in_bytes"), (
            f"hloscope's temp estimate ({_b(est)}) differs from XLA's temp_size_in_bytes "
            f"({_b(x)}) by {est - x:+,} B{rel}: hloscope simulates XLA's heap packing, XLA ran it; XLA's figure "
            "is the one the executable uses.")))
    return out


def _peak_memory(ma: dict[str, int], peak: int, constants: int) -> Explanation:
    """What `memory_analysis().peak_memory_in_bytes` equals here, in words."""
    pm = ma["peak_memory_in_bytes"]
    a, o = ma.get("argument_size_in_bytes", 0), ma.get("output_size_in_bytes", 0)
    al, t = ma.get("alias_size_in_bytes", 0), ma.get("temp_size_in_bytes", 0)
    known = [("arguments + outputs + temp − aliased", a + o + t - al),
             ("arguments + outputs + temp", a + o + t),
             ("arguments + outputs − aliased", a + o - al),
             ("arguments + outputs", a + o),
             ("arguments + outputs + constants", a + o + constants),
             ("arguments + outputs + constants − aliased", a + o + constants - al),
             ("the live-range peak", peak)]
    if not al:  # the same sums: name them without "− aliased"
        known = [(name, v) for name, v in known if "aliased" not in name]
    what = next((name for name, v in known if v == pm), None)
    if what == "the live-range peak":
        text = f"peak_memory_in_bytes ({_b(pm)}) equals the live-range peak here."
    else:
        equals = (f"it equals {what} here" if what is not None
                  else "it matches none of the sums of the other fields here")
        if what is not None and "temp" not in what:
            equals += ", without temporaries"
        text = (f"memory_analysis().peak_memory_in_bytes ({_b(pm)}) is not the live-range "
                f"peak ({_b(peak)}): it is the runtime's own figure, defined differently by "
                f"each backend ({equals}). "
                "Compare the peak with XLA's live-range dump, and the allocation with what the "
                "device has.")
    return Explanation(("memory_analysis.peak_memory_in_bytes", "live_range_peak"), text)
