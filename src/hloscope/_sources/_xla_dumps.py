"""XLA's own memory files: buffer assignment, live ranges, memory-usage report, dump folders.

XLA writes these next to the module when compiled with ``--xla_dump_to``:
``module_NNNN.NAME.PHASE-buffer-assignment.txt`` (allocations with their
values, sizes and offsets, often followed by an ``HloLiveRange`` section),
``...-live-range.txt`` (the flattened schedule, each value's live range and
the values live at the peak), ``...-memory-usage-report.txt`` (per memory
space, the allocations largest first, each with the values at each of its
offsets).  The readers are tolerant: they take what they recognise and
ignore the rest, and raise `HloSourceError` only when a file has nothing
they recognise.  Sizes are bytes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .._errors import HloSourceError
from .._hlo._shape import ShapeSyntaxError, parse_shape
from .._repr import brief_repr

__all__ = [
    "AllocatedValue",
    "Allocation",
    "BufferAssignmentDump",
    "DumpModule",
    "LiveRangeDump",
    "MemorySpaceUsage",
    "MemoryUsageReport",
    "UsageAllocation",
    "UsageOffset",
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
    thread-local, preallocated-temp), the values placed in it, and its memory space
    (`color`: 0 is device memory; a TPU's on-chip memory is 1)."""

    __repr__ = brief_repr

    index: int
    size: int
    kind: str
    parameter: int | None
    maybe_live_out: bool
    values: tuple[AllocatedValue, ...]
    color: int = 0


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
        """The temp allocation in device memory (color 0): a TPU's on-chip and scalar
        memories have temp allocations of their own, not counted here."""
        return sum(a.size for a in self.allocations
                   if a.kind == "preallocated-temp" and a.color == 0)

    @property
    def value_sizes(self) -> dict[str, int]:
        return {v.label: v.size for a in self.allocations for v in a.values}


@dataclass(frozen=True, slots=True)
class UsageOffset:
    """One offset of an allocation in XLA's memory-usage report: the values placed there.

    `bytes` is the largest of them: XLA prints it rounded (``1.2KiB``); it is exact here
    when the shapes listed give a size that XLA would print the same way."""

    __repr__ = brief_repr

    bytes: int
    offset: int
    values: int
    shapes: str

    def to_dict(self) -> dict[str, object]:
        return {"bytes": self.bytes, "offset": self.offset, "values": self.values,
                "shapes": self.shapes}


@dataclass(frozen=True, slots=True)
class UsageAllocation:
    """One allocation of the report (`rank` 1 is the largest), its offsets largest first.
    `hidden_values` counts the values XLA left out of the list (the small ones).

    The older report format (``Total bytes used:``, ``Allocations sorted by size:``)
    names each allocation: its number in XLA's buffer assignment (`index`), its `size`
    as printed (rounded, ``54.2KiB``; exact when its shape gives a size XLA prints the
    same way) and what it holds (`description`: ``preallocated-temp``, ``parameter 2,
    shape |f32[128,64]| at ShapeIndex {}``, ``thread-local``...).  XLA lists the offsets of
    the larger ones only."""

    __repr__ = brief_repr

    rank: int
    offsets: tuple[UsageOffset, ...]
    hidden_values: int = 0
    index: int | None = None
    size: int | None = None
    description: str = ""

    @property
    def bytes(self) -> int:
        """The allocation's size where the report prints it, else where its last value
        ends (short only by the alignment padding after that value)."""
        if self.size is not None:
            return self.size
        return max((o.offset + o.bytes for o in self.offsets), default=0)

    @property
    def values(self) -> int:
        return sum(o.values for o in self.offsets) + self.hidden_values

    def to_dict(self) -> dict[str, object]:
        return {"rank": self.rank, "bytes": self.bytes, "values": self.values,
                "hidden_values": self.hidden_values, "index": self.index,
                "description": self.description,
                "offsets": [o.to_dict() for o in self.offsets]}


@dataclass(frozen=True, slots=True)
class MemorySpaceUsage:
    """One memory space of the report: its total and its allocations, largest first."""

    __repr__ = brief_repr

    name: str
    color: int
    total_bytes: int
    allocations: tuple[UsageAllocation, ...]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "color": self.color, "total_bytes": self.total_bytes,
                "allocations": [a.to_dict() for a in self.allocations]}


@dataclass(frozen=True, slots=True)
class MemoryUsageReport:
    """XLA's ``*-memory-usage-report.txt``: per memory space, the total bytes of its
    allocations and each allocation's offsets.  `total_bytes` is over every space; `rows`
    lists every offset as ``(bytes, offset, values, shapes)``, allocation after allocation."""

    __repr__ = brief_repr
    total_bytes: int
    rows: tuple[tuple[int, int, int, str], ...]  # (size, offset, used_by_n_values, shapes)
    spaces: tuple[MemorySpaceUsage, ...] = ()

    @property
    def allocations(self) -> tuple[UsageAllocation, ...]:
        """Every allocation listed, of every memory space."""
        return tuple(a for s in self.spaces for a in s.allocations)

    def to_dict(self) -> dict[str, object]:
        return {"total_bytes": self.total_bytes,
                "memory_spaces": [s.to_dict() for s in self.spaces]}


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


_ALLOC_RE = re.compile(r"^allocation ([0-9]+):(?: 0x[0-9a-f]+,)? size ([0-9]+)(.*?):?\s*$")
_VALUE_RE = re.compile(
    r"^ value: <([0-9]+) ([^\s>]+?)(\{[0-9,]*\})?(?: \(phi\))?(?: @[0-9]+)?> "
    r"\(size=([0-9]+),offset=([0-9]+)\): (.*)$")
_TOTAL_RE = re.compile(r"^Total bytes used: ([0-9]+)")
_RANGE_RE = re.compile(r"^\s+(\S+?):([0-9]+)-([0-9]+)$")
_SEQ_RE = re.compile(r"^\s+([0-9]+):(\S+)$")
_PEAK_HEAD_RE = re.compile(r"^\s*Live ranges at ([0-9]+) \(peak\):")
_PEAK_ROW_RE = re.compile(r"^\s+(\S+?): ([0-9]+) bytes")


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
    m = re.match(r"HloLiveRange \(max ([0-9]+)\)", lines[0])
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
    pm = re.search(r"parameter ([0-9]+)", rest)
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
    cm = re.search(r"\bcolor ([0-9]+)", rest)
    return Allocation(d["index"], d["size"], kind, int(pm.group(1)) if pm else None,
                      "maybe-live-out" in rest, tuple(d["values"]),
                      int(cm.group(1)) if cm else 0)


_SPACE_RE = re.compile(r"^Memory Space: (.*?) \(color=([0-9]+)\)\s*$")
_USAGE_TOTAL_RE = re.compile(r"^Total bytes: ([0-9]+)")
_USAGE_ROW_RE = re.compile(
    r"^\s*[0-9.]+\w*\(\s*[0-9.]+%\);\s*([0-9.]+)(\w*);\s*([0-9]+);\s*([0-9]+);\s*(.*)$")
_USAGE_REST_RE = re.compile(r"^\s*The rest ([0-9]+) values are less than")


_USED_TOTAL_RE = re.compile(r"^Total bytes used: ([0-9]+)", re.M)
_USAGE_ALLOC_RE = re.compile(r"^\s*(?:[0-9.]+\w*\(\s*[0-9.]+%\);\s*[0-9.]+\w*;\s*)?"
                             r"allocation ([0-9]+): size ([0-9.]+)(\w*), (.*?):?\s*$")
_ALLOC_SHAPE_RE = re.compile(r"shape \|([^|]*)\|")


def parse_memory_usage_report(text: str, *, filename: str = "<string>") -> MemoryUsageReport:
    """Read a ``*-memory-usage-report.txt`` dump (``BufferAssignment::MemoryUsageReport``
    in XLA's buffer_assignment.cc), in either of the formats XLA has written.

    Newer XLA (jaxlib 0.10): for each memory space a ``Memory Space:`` line, a ``Total
    bytes:`` line, then one block per allocation, largest first, whose rows are the
    offsets it holds (``cumulative_size; size; offset; used_by_n_values; shapes_list``).
    Older XLA (torch_xla 2.9's): ``Total bytes used:``, every allocation largest first
    under ``Allocations sorted by size:``, then under ``Allocations sorted by size with
    their values:`` each allocation's ``allocation N: size ..., what:`` line followed, for
    the larger ones, by the same offset rows; one memory space."""
    if _USED_TOTAL_RE.search(text) and not _SPACE_RE.search(text):
        return _parse_allocations_report(text, filename)
    spaces: list[MemorySpaceUsage] = []
    name, color, total = "default", 0, None
    allocs: list[UsageAllocation] = []
    cur: list[UsageOffset] | None = None
    hidden = 0

    def end_allocation() -> None:
        nonlocal cur, hidden
        if cur is not None:
            allocs.append(UsageAllocation(len(allocs) + 1, tuple(cur), hidden))
        cur, hidden = None, 0

    def end_space() -> None:
        nonlocal allocs
        end_allocation()
        if total is not None:
            spaces.append(MemorySpaceUsage(name, color, total, tuple(allocs)))
        allocs = []

    for line in text.splitlines():
        if "cumulative_size;" in line:
            end_allocation()
            cur = []
            continue
        r = _USAGE_ROW_RE.match(line)
        if r:
            if cur is None:
                cur = []
            shapes = r.group(5).strip()
            cur.append(UsageOffset(_offset_bytes(r.group(1), r.group(2), shapes),
                                   int(r.group(3)), int(r.group(4)), shapes))
            continue
        rest = _USAGE_REST_RE.match(line)
        if rest:
            hidden += int(rest.group(1))
            continue
        sm = _SPACE_RE.match(line)
        if sm:
            end_space()
            name, color, total = sm.group(1), int(sm.group(2)), None
            continue
        tm = _USAGE_TOTAL_RE.match(line)
        if tm:
            if total is not None:
                end_space()
            total = int(tm.group(1))
    end_space()
    if not spaces:
        raise HloSourceError("no 'Total bytes:' or 'Total bytes used:' line found",
                             hint="pass the *-memory-usage-report.txt file XLA writes",
                             path=filename)
    return _report(spaces)


def _report(spaces: list[MemorySpaceUsage]) -> MemoryUsageReport:
    rows = tuple((o.bytes, o.offset, o.values, o.shapes)
                 for sp in spaces for a in sp.allocations for o in a.offsets)
    return MemoryUsageReport(sum(sp.total_bytes for sp in spaces), rows, tuple(spaces))


def _parse_allocations_report(text: str, filename: str) -> MemoryUsageReport:
    """The older format (see `parse_memory_usage_report`)."""
    m = _USED_TOTAL_RE.search(text)
    assert m is not None
    total = int(m.group(1))
    found: dict[int, tuple[tuple[str, str], str, list[UsageOffset], list[int]]] = {}
    cur: tuple[tuple[str, str], str, list[UsageOffset], list[int]] | None = None
    for line in text.splitlines():
        a = _USAGE_ALLOC_RE.match(line)
        if a:
            idx, desc = int(a.group(1)), a.group(4).strip()
            if idx not in found:
                found[idx] = ((a.group(2), a.group(3)), desc, [], [0])
            # The summary line ("54.2KiB( 54%); ...; allocation 27: ...") opens no block.
            cur = None if "%);" in line.split("allocation", 1)[0] else found[idx]
            continue
        if cur is None:
            continue
        r = _USAGE_ROW_RE.match(line)
        if r:
            shapes = r.group(5).strip()
            cur[2].append(UsageOffset(_offset_bytes(r.group(1), r.group(2), shapes),
                                      int(r.group(3)), int(r.group(4)), shapes))
            continue
        rest = _USAGE_REST_RE.match(line)
        if rest:
            cur[3][0] += int(rest.group(1))
    if not found:
        raise HloSourceError("'Total bytes used:' but no 'allocation N: size ...' line found",
                             hint="pass the *-memory-usage-report.txt file XLA writes",
                             path=filename)
    allocs = tuple(UsageAllocation(rank, tuple(offs), hidden[0], idx,
                                   _allocation_bytes(printed, desc, offs), desc)
                   for rank, (idx, (printed, desc, offs, hidden)) in enumerate(found.items(), 1))
    return _report([MemorySpaceUsage("default", 0, total, allocs)])


def _allocation_bytes(printed: tuple[str, str], desc: str, offsets: list[UsageOffset]) -> int:
    """An allocation's size from its rounded print (``54.2KiB``): exact when the end of its
    last value, or its shape, gives a size XLA prints the same way."""
    end = max((o.offset + o.bytes for o in offsets), default=-1)
    if end >= 0 and _xla_human(end) == "".join(printed):
        return end
    shape = _ALLOC_SHAPE_RE.search(desc)
    return _offset_bytes(*printed, shape.group(1) if shape else "?")


def _offset_bytes(num: str, unit: str, shapes: str) -> int:
    """The bytes of an offset's largest value: from its shapes when XLA would print their
    size as `num` `unit` (sizes are printed rounded), else the rounded figure."""
    printed = human_bytes(num, unit)
    sizes = []
    for part in _split_shapes(shapes):
        head, sep, tail = part.partition("\u00d7")  # "2×f32[32,10]": two values of that shape
        text = tail if sep and head.strip().isdigit() else part
        try:
            sizes.append(parse_shape(text.strip()).byte_size)
        except (ShapeSyntaxError, ValueError):
            return printed
    exact = max(sizes, default=-1)
    return exact if exact >= 0 and _xla_human(exact) == f"{num}{unit}" else printed


def _split_shapes(text: str) -> list[str]:
    """The shapes of a ``shapes_list``, split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (x.strip() for x in parts) if p]


def _xla_human(n: int) -> str:
    """`n` bytes as tsl's HumanReadableNumBytes prints them (``128B``, ``1.2KiB``,
    ``1.06MiB``)."""
    if n < 1024:
        return f"{n}B"
    units = "KMGTPE"
    u = 0
    while n >= 1024 * 1024 and u < len(units) - 1:
        n //= 1024
        u += 1
    return f"{n / 1024:.{1 if u == 0 else 2}f}{units[u]}iB"


_UNITS = {"B": 1, "": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3, "TiB": 1024 ** 4,
          "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3, "TB": 1000 ** 4}


def human_bytes(num: str, unit: str) -> int:
    """``("256.00", "MiB")`` -> bytes, as XLA's logs and reports print sizes."""
    return round(float(num) * _UNITS.get(unit, 1))


# The platform prefix (cpu_, sm_8.0_gpu_, tpu_) starts with a letter, so that a module
# named SyncTensorsGraph.147 (torch_xla) keeps its number.
_DUMP_RE = re.compile(r"^(module_[0-9]+)\.(.+?)\."
                      r"((?:[A-Za-z][\w.]*_)?(?:after|before)_optimizations)"
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
        texts = sorted(n for n in names if n.endswith((".hlo", ".txt", ".md")))
        hint = ("compile with XLA_FLAGS=--xla_dump_to=DIR (or compiler_options="
                "{'xla_dump_to': DIR}) and pass DIR")
        if texts:
            hint = (f"give one of its files ({', '.join(texts[:3])}"
                    + (", ..." if len(texts) > 3 else "") + "), or " + hint)
        raise HloSourceError(
            "no XLA dump files (module_NNNN.NAME.*_optimizations*.txt) in this folder",
            hint=hint, path=path)
    return list(mods.values())
