"""XLA's own memory files: buffer assignment, live ranges, memory-usage report, dump folders.

XLA writes these next to the module when compiled with ``--xla_dump_to``:
``module_NNNN.NAME.PHASE-buffer-assignment.txt`` (allocations with their
values, sizes and offsets, often followed by an ``HloLiveRange`` section),
``...-live-range.txt`` (the flattened schedule, each value's live range and
the values live at the peak), ``...-memory-usage-report.txt`` (allocations
by size).  The readers are tolerant: they take what they recognise and
ignore the rest, and raise `HloSourceError` only when a file has nothing
they recognise.  Sizes are bytes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .._errors import HloSourceError
from .._repr import brief_repr

__all__ = [
    "AllocatedValue",
    "Allocation",
    "BufferAssignmentDump",
    "DumpModule",
    "LiveRangeDump",
    "MemoryUsageReport",
    "XlaMemoryFiles",
    "parse_buffer_assignment",
    "parse_live_range",
    "parse_memory_usage_report",
    "read_dump_dir",
    "xla_file_kind",
]


@dataclass(frozen=True, slots=True)
class AllocatedValue:
    """One value in an allocation: ``<id name{index} @color> (size=..,offset=..): shape``."""

    __repr__ = brief_repr

    id: int
    label: str
    size: int
    offset: int
    shape: str


@dataclass(frozen=True, slots=True)
class Allocation:
    """One allocation: its index, size, what it is (parameter, output, constant,
    thread-local, preallocated-temp) and the values placed in it."""

    __repr__ = brief_repr

    index: int
    size: int
    kind: str
    parameter: int | None
    maybe_live_out: bool
    values: tuple[AllocatedValue, ...]


@dataclass(frozen=True, slots=True)
class LiveRangeDump:
    """An ``HloLiveRange`` section: the flattened schedule, ranges and the peak list."""

    __repr__ = brief_repr

    end_time: int
    sequence: tuple[str, ...]
    ranges: dict[str, tuple[int, int]]
    peak_time: int | None
    peak_values: tuple[tuple[str, int], ...]

    @property
    def peak_bytes(self) -> int | None:
        return sum(b for _, b in self.peak_values) if self.peak_time is not None else None


@dataclass(frozen=True, slots=True)
class BufferAssignmentDump:
    __repr__ = brief_repr
    allocations: tuple[Allocation, ...]
    total_bytes: int | None
    live_range: LiveRangeDump | None

    def total(self, kind: str) -> int:
        return sum(a.size for a in self.allocations if a.kind == kind)

    @property
    def temp_bytes(self) -> int:
        return self.total("preallocated-temp")

    @property
    def value_sizes(self) -> dict[str, int]:
        return {v.label: v.size for a in self.allocations for v in a.values}


@dataclass(frozen=True, slots=True)
class MemoryUsageReport:
    __repr__ = brief_repr
    total_bytes: int
    rows: tuple[tuple[int, int, int, str], ...]  # (size, offset, used_by_n_values, shapes)


@dataclass(frozen=True, slots=True)
class XlaMemoryFiles:
    """XLA's memory files for one module, read (each may be missing)."""

    __repr__ = brief_repr

    files: tuple[str, ...]
    buffer_assignment: BufferAssignmentDump | None = None
    live_range: LiveRangeDump | None = None
    memory_usage: MemoryUsageReport | None = None


@dataclass(slots=True)
class DumpModule:
    """The files of one module in an XLA dump folder."""

    __repr__ = brief_repr

    prefix: str
    name: str
    after: str | None = None
    before: str | None = None
    buffer_assignment: str | None = None
    live_range: str | None = None
    memory_usage: str | None = None
    extra: list[str] = field(default_factory=list)


_ALLOC_RE = re.compile(r"^allocation (\d+):(?: 0x[0-9a-f]+,)? size (\d+)(.*?):?\s*$")
_VALUE_RE = re.compile(
    r"^ value: <(\d+) ([^\s>]+?)(\{[\d,]*\})?(?: \(phi\))?(?: @\d+)?> "
    r"\(size=(\d+),offset=(\d+)\): (.*)$")
_TOTAL_RE = re.compile(r"^Total bytes used: (\d+)")
_RANGE_RE = re.compile(r"^\s+(\S+?):(\d+)-(\d+)$")
_SEQ_RE = re.compile(r"^\s+(\d+):(\S+)$")
_PEAK_HEAD_RE = re.compile(r"^\s*Live ranges at (\d+) \(peak\):")
_PEAK_ROW_RE = re.compile(r"^\s+(\S+?): (\d+) bytes")


def _label(name: str, index: str | None) -> str:
    return name + (index or "{}")


def parse_live_range(text: str, *, filename: str = "<string>") -> LiveRangeDump:
    """Read an ``HloLiveRange (max N):`` section (a ``-live-range.txt`` file or the end of a
    buffer-assignment file)."""
    start = text.find("HloLiveRange (max ")
    if start < 0:
        raise HloSourceError("no 'HloLiveRange' section found",
                             hint="pass an XLA *-live-range.txt or *-buffer-assignment.txt dump",
                             path=filename)
    lines = text[start:].splitlines()
    m = re.match(r"HloLiveRange \(max (\d+)\)", lines[0])
    end_time = int(m.group(1)) if m else 0
    seq: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    peak_time: int | None = None
    peak: list[tuple[str, int]] = []
    section = ""
    for line in lines[1:]:
        s = line.strip()
        if s == "InstructionSequence:":
            section = "seq"
            continue
        if s == "BufferLiveRange:":
            section = "ranges"
            continue
        pm = _PEAK_HEAD_RE.match(line)
        if pm:
            section = "peak"
            peak_time = int(pm.group(1))
            continue
        if s.startswith("Stack trace breakdown") or (line and not line.startswith(" ")):
            if section == "peak":
                break
            section = ""
            continue
        if section == "seq":
            mm = _SEQ_RE.match(line)
            if mm:
                seq.append(mm.group(2))
        elif section == "ranges":
            mm = _RANGE_RE.match(line)
            if mm:
                label = mm.group(1) if "{" in mm.group(1) else mm.group(1) + "{}"
                ranges[label] = (int(mm.group(2)), int(mm.group(3)))
        elif section == "peak":
            mm = _PEAK_ROW_RE.match(line)
            if mm:
                label = mm.group(1) if "{" in mm.group(1) else mm.group(1) + "{}"
                peak.append((label, int(mm.group(2))))
    return LiveRangeDump(end_time, tuple(seq), ranges, peak_time, tuple(peak))


def parse_buffer_assignment(text: str, *, filename: str = "<string>") -> BufferAssignmentDump:
    """Read a ``*buffer-assignment.txt`` dump (allocations and, if present, live ranges)."""
    allocs: list[Allocation] = []
    cur: dict | None = None
    total = None
    for line in text.splitlines():
        m = _ALLOC_RE.match(line)
        if m:
            if cur is not None:
                allocs.append(_allocation(cur))
            cur = {"index": int(m.group(1)), "size": int(m.group(2)), "rest": m.group(3),
                   "values": []}
            continue
        v = _VALUE_RE.match(line)
        if v and cur is not None:
            cur["values"].append(AllocatedValue(int(v.group(1)), _label(v.group(2), v.group(3)),
                                                int(v.group(4)), int(v.group(5)), v.group(6)))
            continue
        t = _TOTAL_RE.match(line)
        if t:
            total = int(t.group(1))
            if cur is not None:
                allocs.append(_allocation(cur))
                cur = None
    if cur is not None:
        allocs.append(_allocation(cur))
    if not allocs:
        raise HloSourceError("no 'allocation N: size ...' lines found",
                             hint="pass the *-buffer-assignment.txt file XLA writes with "
                                  "--xla_dump_to", path=filename)
    live = parse_live_range(text, filename=filename) if "HloLiveRange (max " in text else None
    return BufferAssignmentDump(tuple(allocs), total, live)


def _allocation(d: dict) -> Allocation:
    rest = d["rest"]
    pm = re.search(r"parameter (\d+)", rest)
    if pm:
        kind = "parameter"
    elif "preallocated-temp" in rest:
        kind = "preallocated-temp"
    elif "constant" in rest:
        kind = "constant"
    elif "thread-local" in rest:
        kind = "thread-local"
    elif "output shape" in rest or "maybe-live-out" in rest:
        kind = "output"
    else:
        kind = "other"
    return Allocation(d["index"], d["size"], kind, int(pm.group(1)) if pm else None,
                      "maybe-live-out" in rest, tuple(d["values"]))


def parse_memory_usage_report(text: str, *, filename: str = "<string>") -> MemoryUsageReport:
    """Read a ``*-memory-usage-report.txt`` dump."""
    m = re.search(r"Total bytes: (\d+)", text)
    if not m:
        raise HloSourceError("no 'Total bytes:' line found",
                             hint="pass the *-memory-usage-report.txt file XLA writes",
                             path=filename)
    rows = []
    for r in re.finditer(r"^\s*[\d.]+\w*\(\s*\d+%\);\s*([\d.]+)(\w*);\s*(\d+);\s*(\d+);\s*(.*)$",
                         text, re.MULTILINE):
        rows.append((human_bytes(r.group(1), r.group(2)), int(r.group(3)), int(r.group(4)),
                     r.group(5).strip()))
    return MemoryUsageReport(int(m.group(1)), tuple(rows))


_UNITS = {"B": 1, "": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3, "TiB": 1024 ** 4,
          "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3, "TB": 1000 ** 4}


def human_bytes(num: str, unit: str) -> int:
    """``("256.00", "MiB")`` -> bytes, as XLA's logs and reports print sizes."""
    return round(float(num) * _UNITS.get(unit, 1))


_DUMP_RE = re.compile(r"^(module_\d+)\.(.+?)\.((?:[\w.]+_)?(?:after|before)_optimizations)"
                      r"(-buffer-assignment|-live-range|-memory-usage-report)?\.txt$")


def xla_file_kind(path: str) -> str | None:
    """``buffer-assignment``, ``live-range``, ``memory-usage-report``, or None, from the name
    or, failing that, the first lines."""
    base = os.path.basename(path)
    for kind in ("buffer-assignment", "live-range", "memory-usage-report"):
        if base.endswith((f"-{kind}.txt", f".{kind}.txt")):
            return kind
    return None


def read_dump_dir(path: str) -> list[DumpModule]:
    """Group the files of an ``--xla_dump_to`` folder by module (in name order)."""
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise HloSourceError(f"cannot list the folder ({e.strerror})", path=path) from None
    mods: dict[str, DumpModule] = {}
    for n in names:
        m = _DUMP_RE.match(n)
        if not m:
            continue
        prefix = f"{m.group(1)}.{m.group(2)}"
        dm = mods.setdefault(prefix, DumpModule(prefix, m.group(2)))
        full = os.path.join(path, n)
        phase, kind = m.group(3), m.group(4)
        if kind == "-buffer-assignment":
            dm.buffer_assignment = full
        elif kind == "-live-range":
            dm.live_range = full
        elif kind == "-memory-usage-report":
            dm.memory_usage = full
        elif phase.endswith("after_optimizations"):
            dm.after = full
        elif phase.endswith("before_optimizations"):
            dm.before = full
        else:
            dm.extra.append(full)
    if not mods:
        raise HloSourceError(
            "no XLA dump files (module_NNNN.NAME.*_optimizations*.txt) in this folder",
            hint="compile with XLA_FLAGS=--xla_dump_to=DIR (or compiler_options="
                 "{'xla_dump_to': DIR}) and pass DIR", path=path)
    return list(mods.values())
