"""What a profile measured, joined to the module's kernels: `MeasuredTimes`.

Plain frozen data (JSON schema ``hloscope.profile/1``, docs/json.md), made by
`measure` (``_match``) and read by the renderers, the report and the advisor.
Every time is in seconds; a kernel's time is per run of the program (its
calls in one run summed), the median over the runs (of each round, averaged
over the middle half of the rounds, in hloscope's own profiles), averaged over the
devices that ran it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._repr import brief_repr, clip

__all__ = ["PROFILE_SCHEMA", "Gaps", "KernelTime", "MeasuredTimes", "PlaceTime"]

PROFILE_SCHEMA = "hloscope.profile/1"


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 12)


@dataclass(frozen=True, slots=True)
class KernelTime:
    """One kernel's measured time: `median` (seconds per run: its median over the runs,
    or, for hloscope's own profiles taken in rounds, its median in each round averaged
    over the middle half of the rounds), `spread` (the
    interquartile range over the runs), `calls` per run, its `share` of the step, and
    the roofline `estimate` for `device` beside it (None where there is no estimate)."""

    __repr__ = brief_repr

    name: str
    category: str
    group: str
    median: float
    spread: float
    minimum: float
    calls: float
    share: float
    estimate: float | None
    op_name: str
    source: str | None

    @property
    def roofline_fraction(self) -> float | None:
        """The estimate over the measurement: 1.0 runs at the roofline, 0.1 at a tenth."""
        if self.estimate is None or self.median <= 0:
            return None
        return self.estimate / self.median

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "category": self.category, "group": self.group,
                "median_seconds": _r(self.median), "spread_seconds": _r(self.spread),
                "min_seconds": _r(self.minimum), "calls_per_run": round(self.calls, 3),
                "share": round(self.share, 6), "estimate_seconds": _r(self.estimate),
                "roofline_fraction": None if self.roofline_fraction is None
                else round(self.roofline_fraction, 6),
                "op_name": self.op_name, "source": self.source}


@dataclass(frozen=True, slots=True)
class PlaceTime:
    """Measured time summed over the kernels of one source line or op_name scope."""

    place: str
    seconds: float
    share: float
    kernels: int

    def to_dict(self) -> dict[str, Any]:
        return {"place": self.place, "seconds": _r(self.seconds), "share": round(self.share, 6),
                "kernels": self.kernels}


@dataclass(frozen=True, slots=True)
class Gaps:
    """The wall time of the typical run (the run whose step is the median, the lower of
    the two middle runs for an even count; over rounds, the run nearest the interquartile
    mean of the rounds' median steps) taken apart, in seconds:
    ``step = kernels - concurrent + dispatch + idle + wait``, exactly for that run.
    `kernels` is the kernels' time summed; `concurrent` the part of it that ran at the
    same time as other kernels (the CPU runs independent kernels on several threads);
    `dispatch` from the start of the run to its first kernel (the host launching the
    program); `idle` between kernels with none running; `wait` from the last kernel to
    the end of the run (the host noticing the result).  Without the run's own start and
    end (a profile taken elsewhere) the step is its first kernel to its last and
    dispatch and wait are 0."""

    step: float
    kernels: float
    concurrent: float
    dispatch: float
    idle: float
    wait: float

    @property
    def explained(self) -> float:
        """What the parts add up to, to set beside `step`."""
        return self.kernels - self.concurrent + self.dispatch + self.idle + self.wait

    def to_dict(self) -> dict[str, Any]:
        return {"step_seconds": _r(self.step), "kernel_seconds": _r(self.kernels),
                "concurrent_seconds": _r(self.concurrent),
                "dispatch_seconds": _r(self.dispatch), "idle_seconds": _r(self.idle),
                "wait_seconds": _r(self.wait), "explained_seconds": _r(self.explained)}


@dataclass(frozen=True, slots=True)
class MeasuredTimes:
    """A profile of one module joined to its kernel graph (see the module docstring).

    `kernels`: each kernel that ran, the slowest first; `lines` and `scopes`: time per
    source line and per op_name scope; `collectives`: the collectives among `kernels`;
    `unmatched`: events of the module naming no kernel of it (name -> seconds per run);
    `matched_share`: the share of the module's device time given to its kernels;
    `steps`: each run's wall time; `runs` and `devices`: how many of each the profile
    holds; `device`: what the estimates are for; `notes`: what the profile said of its
    runs when it was taken, for a profile read again from a folder ``hloscope profile
    --keep`` wrote (a live `Profile` holds its notes itself)."""

    module: str
    source: str
    platform: str
    runs: int
    devices: int
    steps: tuple[float, ...]
    kernels: tuple[KernelTime, ...]
    lines: tuple[PlaceTime, ...]
    scopes: tuple[PlaceTime, ...]
    gaps: Gaps
    matched_share: float
    unmatched: tuple[tuple[str, float], ...]
    not_run: tuple[str, ...]
    device: str | None
    extra: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return clip(f"MeasuredTimes({self.module!r}: {len(self.kernels)} kernels over "
                    f"{self.runs} runs, step {self.gaps.step * 1e3:.3g} ms)")

    def __str__(self) -> str:
        """The profile as `hloscope profile` prints it: kernels by measured time, time by
        source line and op_name scope (``print(hloscope.read_profile(DIR, module))``)."""
        from .._render._profile_text import render_profile

        return render_profile(self, width=100)

    @property
    def step(self) -> float:
        """The wall time of the typical run (seconds): the median run, or over rounds the
        run nearest the interquartile mean of the rounds' medians (see `measure`)."""
        return self.gaps.step

    def by_name(self) -> dict[str, KernelTime]:
        return {k.name: k for k in self.kernels}

    def seconds(self, name: str) -> float | None:
        """The measured time per run of kernel `name` (None if it never ran)."""
        k = self.by_name().get(name)
        return None if k is None else k.median

    @property
    def collectives(self) -> tuple[KernelTime, ...]:
        return tuple(k for k in self.kernels if k.category == "collective")

    @classmethod
    def from_dict(cls, d: Any, path: str) -> MeasuredTimes:
        """The times `to_dict` wrote (a saved report's ``measured``), checked field by
        field: a damaged or crafted file raises `HloSourceError` naming the field."""
        from .._sources._saved import Fields

        f = Fields(d, path, what="report", where="measured")
        g = Fields(f.obj("gaps", optional=False), path, what="report", where="measured.gaps")
        gaps = Gaps(*(g.number(k, optional=False, minimum=0) or 0.0 for k in (
            "step_seconds", "kernel_seconds", "concurrent_seconds", "dispatch_seconds",
            "idle_seconds", "wait_seconds")))

        def kernel(i: int, x: dict[str, Any]) -> KernelTime:
            k = Fields(x, path, what="report", where=f"measured.kernels[{i}]")
            return KernelTime(k.text("name", default=None), k.text("category"), k.text("group"),
                              k.number("median_seconds", optional=False, minimum=0) or 0.0,
                              k.number("spread_seconds", minimum=0) or 0.0,
                              k.number("min_seconds", minimum=0) or 0.0,
                              k.number("calls_per_run", minimum=0) or 0.0,
                              k.number("share", minimum=0) or 0.0,
                              k.number("estimate_seconds", minimum=0), k.text("op_name"),
                              k.text("source", default="") or None)

        def places(key: str) -> tuple[PlaceTime, ...]:
            out = []
            for i, x in enumerate(f.objects(key)):
                p = Fields(x, path, what="report", where=f"measured.{key}[{i}]")
                out.append(PlaceTime(p.text("place"), p.number("seconds", minimum=0) or 0.0,
                                     p.number("share", minimum=0) or 0.0, p.integer("kernels")))
            return tuple(out)

        unmatched = []
        for i, x in enumerate(f.objects("unmatched")):
            u = Fields(x, path, what="report", where=f"measured.unmatched[{i}]")
            unmatched.append((u.text("name"), u.number("seconds", minimum=0) or 0.0))
        texts = []
        for key in ("not_run", "notes"):
            v = d.get(key) or []
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise f._bad(key, "a list of strings", v)
            texts.append(tuple(v))
        return cls(f.text("module"), f.text("source"), f.text("platform"),
                   f.integer("runs"), f.integer("devices", 1), tuple(f.times("step_seconds")),
                   tuple(kernel(i, x) for i, x in enumerate(f.objects("kernels"))),
                   places("lines"), places("scopes"), gaps,
                   f.number("matched_share", minimum=0) or 0.0, tuple(unmatched), texts[0],
                   f.text("device", default="") or None, notes=texts[1])

    def to_dict(self) -> dict[str, Any]:
        return {"schema": PROFILE_SCHEMA, "module": self.module, "source": self.source,
                "platform": self.platform, "runs": self.runs, "devices": self.devices,
                "device": self.device, "step_seconds": [_r(s) for s in self.steps],
                "gaps": self.gaps.to_dict(), "matched_share": round(self.matched_share, 6),
                "kernels": [k.to_dict() for k in self.kernels],
                "lines": [p.to_dict() for p in self.lines],
                "scopes": [p.to_dict() for p in self.scopes],
                "unmatched": [{"name": n, "seconds": _r(s)} for n, s in self.unmatched],
                "not_run": list(self.not_run),
                **({"notes": list(self.notes)} if self.notes else {}), **self.extra}
