"""What the advisor says: findings, what acting on each would save, and findings grouped.

A `Finding` is one place where a rule fired, with its evidence and a `Saving`: bytes of
peak memory, bytes of memory traffic per run, kernels per run and the time those bytes
take on the device the estimate is for.  The same rule on the same pattern (one per
layer of an unrolled 64-layer model) is one `FindingGroup`: a count, the summed saving
and the places (op_name scopes and source lines).  Groups are ranked by their share of
the program (`share`), the larger of the peak saved over the peak and the time saved
over the program's estimated time.  Plain frozen data: no analysis, no printing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._repr import brief_repr
from .._units import format_bytes

__all__ = ["Check", "Evidence", "Finding", "FindingGroup", "Saving", "group_findings",
           "place_key"]


@dataclass(frozen=True, slots=True)
class Saving:
    """What acting on a finding would save: `peak_bytes` of the live-range peak,
    `traffic_bytes` of memory traffic per run, `kernels` launched per run, `seconds` per
    run on the device the estimate is for (the traffic at its bandwidth; collectives at
    its link bandwidth; flops at its peak rate), `footprint_bytes` of the device footprint
    where the peak need not move (arguments + outputs + temporaries + the constants XLA
    keeps in device memory: a donation, a constant),
    `link_bytes` sent between devices per run (per device), and `instructions` of the
    program XLA compiles (its compile time and size, not its run: an unrolled loop)."""

    __repr__ = brief_repr

    peak_bytes: int = 0
    traffic_bytes: int = 0
    kernels: int = 0
    seconds: float = 0.0
    footprint_bytes: int = 0
    link_bytes: int = 0
    instructions: int = 0

    def __add__(self, other: Saving) -> Saving:
        return Saving(self.peak_bytes + other.peak_bytes,
                      self.traffic_bytes + other.traffic_bytes,
                      self.kernels + other.kernels, self.seconds + other.seconds,
                      self.footprint_bytes + other.footprint_bytes,
                      self.link_bytes + other.link_bytes,
                      self.instructions + other.instructions)

    def __bool__(self) -> bool:
        return bool(self.peak_bytes or self.traffic_bytes or self.kernels or self.seconds
                    or self.footprint_bytes or self.link_bytes or self.instructions)

    def describe(self, device: str | None = None) -> str:
        """``2.00 MiB of peak memory, 12.00 MiB of memory traffic per run (~3.6 us on
        h100), 2 kernels per run``; `device` None leaves the time out."""
        parts = []
        if self.peak_bytes:
            parts.append(f"{format_bytes(self.peak_bytes)} of peak memory")
        if self.footprint_bytes > self.peak_bytes:
            parts.append(f"{format_bytes(self.footprint_bytes)} of the device footprint "
                         "(arguments + outputs + temporaries + constants)")
        timed = [(n, w) for n, w in ((self.traffic_bytes, "of memory traffic"),
                                     (self.link_bytes, "sent between devices")) if n]
        for k, (n, what) in enumerate(timed):
            t = f"{format_bytes(n)} {what} per run"
            if k == len(timed) - 1 and device and self.seconds:
                t += f" (~{_duration(self.seconds)} on {device})"
            parts.append(t)
        if not timed and device and self.seconds:
            parts.append(f"~{_duration(self.seconds)} per run on {device}")
        if self.kernels:
            parts.append(f"{self.kernels:,} kernel{'' if self.kernels == 1 else 's'} per run")
        if self.instructions:
            parts.append(f"{self.instructions:,} instructions to compile")
        return ", ".join(parts) or "nothing measurable"

    def to_dict(self) -> dict[str, Any]:
        return {"peak_bytes": self.peak_bytes, "footprint_bytes": self.footprint_bytes,
                "traffic_bytes": self.traffic_bytes, "link_bytes": self.link_bytes,
                "kernels": self.kernels, "seconds": self.seconds,
                "instructions": self.instructions}

    @classmethod
    def from_dict(cls, d: Any) -> Saving:
        """`to_dict`'s output back (ValueError naming the field where it is not that)."""
        if not isinstance(d, dict):
            raise ValueError("a saving is not an object")
        out: dict[str, Any] = {}
        for name in ("peak_bytes", "footprint_bytes", "traffic_bytes", "link_bytes",
                     "kernels", "instructions"):
            v = d.get(name, 0)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"saving.{name} is not a count")
            out[name] = v
        sec = d.get("seconds", 0.0)
        if not isinstance(sec, (int, float)) or isinstance(sec, bool) or not sec >= 0:
            raise ValueError("saving.seconds is not a time")
        return cls(seconds=float(sec), **out)


def _duration(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


@dataclass(frozen=True, slots=True)
class Check:
    """Whether a group's saving was checked by compiling its fix (`hloscope._checked`):
    `status` ``checked`` (the fix was compiled: `figure` is what was compared, `before`
    and `after` its values on the two compiles, in bytes or seconds as `unit` says) or
    ``estimated`` (`how`: what the estimate is, or why no fix was compiled).  `fix`:
    the change that was compiled; `estimate`: the advisor's own saving, kept beside."""

    __repr__ = brief_repr

    status: str
    how: str = ""
    fix: str = ""
    figure: str = ""
    unit: str = "bytes"
    before: float = 0.0
    after: float = 0.0
    estimate: Saving = field(default_factory=Saving)
    also: tuple[tuple[str, int, int], ...] = ()  # other figures it moved (name, bytes)
    # On a target: whether the fixed program fits in its memory, in words ("" elsewhere).
    fit: str = ""

    @property
    def saved(self) -> float:
        return self.before - self.after

    def amount(self, value: float) -> str:
        """`value` in the figure's unit (``2.62 MiB``, ``198.0 us``)."""
        sign, value = ("-", -value) if value < 0 else ("", value)
        return sign + (format_bytes(int(value)) if self.unit == "bytes" else _duration(value))

    def describe(self) -> str:
        """``checked: XLA's peak 12.45 GiB -> 1.95 GiB with FIX`` or ``estimated HOW``
        (``from the outputs' bytes; not compiled: ...``)."""
        if self.status != "checked":
            return "estimated" + (f" {self.how}" if self.how else "")
        also = "".join(f"; {name} {format_bytes(a)} -> {format_bytes(b)}"
                       for name, a, b in self.also)
        return (f"checked: {self.figure} {self.amount(self.before)} -> "
                f"{self.amount(self.after)}{also}" + (f" with {self.fix}" if self.fix else "")
                + (f"; {self.fit}" if self.fit else ""))

    @classmethod
    def from_dict(cls, d: Any) -> Check:
        """`to_dict`'s output back (ValueError naming the field where it is not that)."""
        if not isinstance(d, dict) or d.get("status") not in ("checked", "estimated"):
            raise ValueError("check.status is not 'checked' or 'estimated'")

        def text(key: str) -> str:
            v = d.get(key) or ""
            if not isinstance(v, str):
                raise ValueError(f"check.{key} is not text")
            return v

        def num(key: str) -> float:
            v = d.get(key, 0.0)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v:
                raise ValueError(f"check.{key} is not a number")
            return float(v)

        also = []
        for a in d.get("also") or []:
            if not isinstance(a, dict) or not isinstance(a.get("figure"), str) or not all(
                    isinstance(a.get(k), int) for k in ("before", "after")):
                raise ValueError("check.also is not a list of figures")
            also.append((a["figure"], a["before"], a["after"]))
        unit = text("unit") or "bytes"
        if unit not in ("bytes", "seconds"):
            raise ValueError("check.unit is not 'bytes' or 'seconds'")
        return cls(d["status"], text("how"), text("fix"), text("figure"), unit,
                   num("before"), num("after"), Saving.from_dict(d.get("estimate") or {}),
                   tuple(also), text("fit"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "how": self.how}
        if self.status == "checked":
            out.update(fix=self.fix, figure=self.figure, unit=self.unit, before=self.before,
                       after=self.after, saved=self.saved,
                       also=[{"figure": n, "before": a, "after": b} for n, a, b in self.also],
                       fit=self.fit or None)
        out["estimate"] = self.estimate.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class Evidence:
    """A kernel, array or instruction a finding points at."""

    __repr__ = brief_repr

    name: str
    what: str          # "kernel", "array", "constant", "collective", "parameter", "output"
    shape: str
    bytes: int
    op_name: str
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "shape": self.shape, "bytes": self.bytes,
                "op_name": self.op_name, "source": self.source}


@dataclass(frozen=True, slots=True)
class Finding:
    """One piece of advice: the rule, what it saw (`evidence`), what to try, what acting on
    it would save, its `place` (the key findings of one pattern share: op_name with
    numbers masked, source line, shapes) and its `kind` (the kind of issue: the rule's
    name, ``donate``, ``remat``, ...; docs/advisor.md lists them)."""

    __repr__ = brief_repr

    rule: str
    title: str
    message: str
    suggestion: str
    evidence: tuple[Evidence, ...]
    saving: Saving = field(default_factory=Saving)
    place: str = ""
    kind: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "kind": self.kind, "title": self.title,
                "message": self.message, "suggestion": self.suggestion,
                "saving": self.saving.to_dict(), "place": self.place,
                "evidence": [e.to_dict() for e in self.evidence]}


@dataclass(frozen=True, slots=True)
class FindingGroup:
    """The findings of one rule on one pattern: `count` of them, their `kind` (the rule's
    kind of issue), their summed `saving`, its `share` of the program (see the module
    docstring), and `places`: each distinct (op_name, source line) with how many findings
    are there, most first."""

    __repr__ = brief_repr

    rule: str
    title: str
    saving: Saving
    share: float
    basis: str
    findings: tuple[Finding, ...]
    places: tuple[tuple[str, str | None, int], ...]
    check: Check | None = None  # set where the fix was compiled (hloscope._checked)

    @property
    def kind(self) -> str:
        return self.first.kind

    @property
    def count(self) -> int:
        return len(self.findings)

    @property
    def share_text(self) -> str:
        """The group's share as said beside its saving: ``35.6% of the program's peak``;
        ranked by a profile (its `basis` is then measured time), ``the kernels it names
        take 4.1% of the measured step`` (a share of time taken, not of time saved)."""
        pct = f"{100 * self.share:.1f}%"
        if self.basis.startswith("measured"):
            return f"the kernels it names take {pct} of the measured step"
        return f"{pct} of the program's {self.basis}"

    def check_line(self, device: str | None = None) -> str:
        """``checked: XLA's peak 8.25 MiB -> 5.25 MiB (the fix); estimated 4.00 MiB of
        peak memory`` where the fix was compiled, else ``estimated`` (with how)."""
        c = self.check
        if c is None:
            return "estimated"
        if c.status != "checked":
            return c.describe()
        return f"{c.describe()}; estimated {c.estimate.describe(device)}"

    @property
    def first(self) -> Finding:
        return self.findings[0]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "kind": self.kind, "title": self.title, "count": self.count,
                "saving": self.saving.to_dict(), "share": round(self.share, 6),
                "basis": self.basis,
                "message": self.first.message, "suggestion": self.first.suggestion,
                "places": [{"op_name": o, "source": s, "count": n} for o, s, n in self.places],
                "check": (self.check.to_dict() if self.check is not None else
                          {"status": "estimated", "how": "", "estimate": self.saving.to_dict()}),
                "findings": [f.to_dict() for f in self.findings]}


_NUMBER = re.compile(r"[0-9]+")


def place_key(op_name: str, source: str | None, *shapes: str) -> str:
    """The place findings of one pattern share: the op_name with its numbers masked
    (``layer_12`` and ``layer_13`` are one scope), the source line and the shapes."""
    return "|".join((_NUMBER.sub("#", op_name), source or "", *shapes))


def group_findings(findings: Iterable[Finding],
                   share: Callable[[Saving], tuple[float, str]]) -> list[FindingGroup]:
    """Findings of one rule at one place as groups, ranked by their share of the program,
    `share(saving)` -> (share, what it is of), largest first, then rule and place
    (deterministic)."""
    by_key: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        by_key.setdefault((f.rule, f.place or f.message), []).append(f)
    groups = []
    for (_rule, _place), fs in by_key.items():
        fs.sort(key=lambda f: (-_weight(f.saving), f.message))
        total = sum((f.saving for f in fs), Saving())
        part, basis = share(total)
        groups.append(FindingGroup(fs[0].rule, fs[0].title, total, float(part), basis,
                                   tuple(fs), _places(fs)))
    groups.sort(key=lambda g: (-g.share, -_weight(g.saving), g.rule, g.first.place,
                               g.first.message))
    return groups


def _weight(s: Saving) -> float:
    return s.seconds + max(s.peak_bytes, s.footprint_bytes) * 1e-12 + s.traffic_bytes * 1e-15


def _places(fs: Sequence[Finding]) -> tuple[tuple[str, str | None, int], ...]:
    counts: dict[tuple[str, str | None], int] = {}
    for f in fs:
        ev = f.evidence[0] if f.evidence else None
        key = (ev.op_name, ev.source) if ev is not None else ("", None)
        counts[key] = counts.get(key, 0) + 1
    return tuple((o, s, n) for (o, s), n in sorted(counts.items(),
                                                     key=lambda kv: (-kv[1], kv[0][0],
                                                                     kv[0][1] or "")))
