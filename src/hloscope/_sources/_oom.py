"""XLA's out-of-memory reports, read from a log, an error message or an issue's paste.

Two reports, as XLA prints them when a program does not fit:

* on a GPU (CUDA or ROCm), when the run cannot allocate what the buffer assignment asks
  for, ``RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes.`` and
  ``BufferAssignment OOM Debugging.``: the assignment's totals (parameters, constants,
  outputs that may live out, the preallocated temporaries, fragmentation) and its
  ``Peak buffers``, each with its size, the operator's metadata (op_name, source file
  and line), XLA's label (the opcode) and its shape, or ``Entry Parameter Subshape``;
* on a TPU, when the compiler cannot fit the program, ``Ran out of memory in memory
  space hbm. Used U of C hbm. Exceeded hbm capacity by E.``, the total (reserved,
  program, arguments), the program's requirement (global, scoped, HLO temp) and its
  ``Largest program allocations``, each with its size, operator, shape, unpadded size,
  the memory the tiles' padding adds (and by how many times), XLA's label and the
  allocation's type; or, earlier in the compile, one line (``Ran out of memory on HBM,
  the total memory required for HLO temporaries (X) exceeds available HBM (Y)``,
  ``Requires X, has Y available``).

`parse_oom_reports(text, path)` finds every such report (a log often prints one twice:
once as logged, once in the Python traceback; the copies are counted, not repeated),
tolerating glog prefixes, tabs or spaces, and lines a terminal wrapped mid-word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._repr import brief_repr
from ._xla_dumps import human_bytes

__all__ = ["OomBuffer", "OomReport", "is_oom_report", "parse_oom_reports"]

_GLOG_RE = re.compile(r"^(?:[IWEF][0-9]{4} [0-9:.]+\s+[0-9]+ [^\]]*\] ?|"
                      r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+: [IWEF] [^\]]*\] ?)")
_GPU_START = "BufferAssignment OOM Debugging"
_TPU_RE = re.compile(r"Ran out of memory in memory space (\w+)\.(?: Used ([0-9.]+[KMGT]?i?B?) "
                     r"of ([0-9.]+[KMGT]?i?B?) \w+\. Exceeded \w+ capacity by "
                     r"([0-9.]+[KMGT]?i?B?)\.)?")
_EARLY_RES = (
    re.compile(r"Ran out of memory on (\w+), the total memory required for HLO temporaries "
               r"\(([0-9.]+[KMGT]?i?B?)\) exceeds available \w+ \(([0-9.]+[KMGT]?i?B?)\)"),
    re.compile(r"unlikely to have enough memory\. Requires ([0-9.]+[KMGT]?i?B?), has "
               r"([0-9.]+[KMGT]?i?B?) available"),
)
_REQUEST_RES = (re.compile(r"trying to allocate ([0-9]+) bytes"),
                re.compile(r"request for [0-9.]+\w+ \(([0-9]+)B\)"))
_SIZE_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?i?B?)$")
_STAT_RE = re.compile(r"^\s*([a-z_ ]+?) (allocation|fragmentation):\s+(\S+)")
_KEY_RE = re.compile(r"^\s*(Size|Operator|XLA [Ll]abel|Shape|Entry Parameter Subshape|"
                     r"Unpadded size|Extra memory due to padding|Allocation type):\s?(.*)$")
_GPU_BUFFER_RE = re.compile(r"^\s*Buffer ([0-9]+):\s*$")
_TPU_BUFFER_RE = re.compile(r"^\s*([0-9]+)\.\s+Size:\s*(\S+)")
_METADATA_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"|(\w+)=([0-9]+)')
_EXPANSION_RE = re.compile(r"^(\S+) \(([0-9.]+)x expansion\)")
_TOTAL_RE = re.compile(r"^\s*Total (\w+) usage >= (\S+):")
_REQUIREMENT_RE = re.compile(r"^\s*Program (\w+) requirement (\S+):")
_PART_RE = re.compile(r"^\s{2,}([A-Za-z][A-Za-z ]*?)\s{2,}(unknown size|[0-9.]+[KMGT]?i?B?)\b")


@dataclass(frozen=True, slots=True)
class OomBuffer:
    """One buffer of a report's list (`rank`: its number there)."""

    __repr__ = brief_repr
    rank: int
    size: int
    line: int  # in the file, 1-based
    op_name: str = ""
    op_type: str = ""
    source: str = ""  # "file:line" of the code that made it, where XLA names one
    label: str = ""  # XLA's label: the opcode (GPU), the instruction (TPU)
    shape: str = ""
    parameter: bool = False  # an entry parameter (GPU's "Entry Parameter Subshape")
    unpadded: int | None = None  # TPU: its size without the tiles' padding
    padding: int = 0  # TPU: what the padding adds
    expansion: float | None = None  # TPU: size / unpadded, as XLA prints it
    allocation: str = ""  # TPU: "HLO temp", ...

    def to_dict(self) -> dict[str, object]:
        return {"rank": self.rank, "bytes": self.size, "line": self.line,
                "op_name": self.op_name, "op_type": self.op_type, "source": self.source,
                "label": self.label, "shape": self.shape, "parameter": self.parameter,
                "unpadded_bytes": self.unpadded, "padding_bytes": self.padding,
                "expansion": self.expansion, "allocation": self.allocation}


@dataclass(frozen=True, slots=True)
class OomReport:
    """One out-of-memory report (see the module docstring).  `kind`: ``gpu`` (the buffer
    assignment's report), ``tpu`` (the compiler's), ``tpu-early`` (its one line).
    `parts`: the totals as printed, (name, bytes or None where XLA printed "unknown").
    `printed`: how many times the log holds this same report."""

    __repr__ = brief_repr
    path: str
    line: int
    kind: str
    headline: str
    memory_space: str = ""
    requested: int | None = None  # GPU: the allocation that failed
    used: int | None = None  # TPU: what the program needs
    capacity: int | None = None  # TPU: what the device has for it
    exceeded: int | None = None
    parts: tuple[tuple[str, int | None], ...] = ()
    requirement: tuple[tuple[str, int | None], ...] = ()  # TPU: the program's own parts
    buffers: tuple[OomBuffer, ...] = ()
    printed: int = 1

    def part(self, name: str) -> int | None:
        return next((v for k, v in self.parts if k == name), None)

    def to_dict(self) -> dict[str, object]:
        return {"file": self.path, "line": self.line, "kind": self.kind,
                "headline": self.headline, "memory_space": self.memory_space,
                "requested_bytes": self.requested, "used_bytes": self.used,
                "capacity_bytes": self.capacity, "exceeded_bytes": self.exceeded,
                "parts": [{"name": k, "bytes": v} for k, v in self.parts],
                "requirement": [{"name": k, "bytes": v} for k, v in self.requirement],
                "buffers": [b.to_dict() for b in self.buffers], "printed": self.printed}


def is_oom_report(text: str) -> bool:
    """Whether `text` (a file's first part) holds an out-of-memory report of XLA's."""
    return (_GPU_START in text or "Ran out of memory in memory space" in text
            or any(r.search(text) for r in _EARLY_RES))


def _bytes(text: str) -> int | None:
    """``6.00MiB``, ``17.60G``, ``12.0K``, ``0B`` -> bytes (XLA's units are binary);
    None for what is not a size (``unknown size``)."""
    m = _SIZE_RE.match(text.strip())
    if m is None:
        return None
    unit = m.group(2)
    if unit and not unit.endswith("B"):
        unit += "iB"  # the TPU report's G, M, K
    elif unit in ("KB", "MB", "GB", "TB"):
        unit = unit[0] + "iB"  # XLA's HumanReadableNumBytes: binary, whatever it prints
    return human_bytes(m.group(1), unit)


def _metadata(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _METADATA_RE.finditer(text):
        if m.group(1):
            out[m.group(1)] = m.group(2)
        else:
            out[m.group(3)] = m.group(4)
    return out


def parse_oom_reports(text: str, *, path: str = "<string>") -> list[OomReport]:
    """Every out-of-memory report in `text` (see the module docstring), in order."""
    lines = [_GLOG_RE.sub("", ln.rstrip("\r")) for ln in text.split("\n")]
    found: list[OomReport] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if _GPU_START in ln:
            report, i = _gpu(lines, i, path)
        elif (m := _TPU_RE.search(ln)) is not None:
            report, i = _tpu(lines, i, m, path)
        elif any(r.search(ln) for r in _EARLY_RES):
            report, i = _early(lines, i, path), i + 1
        else:
            i += 1
            continue
        same = next((k for k, r in enumerate(found) if _same(r, report)), None)
        if same is None:
            found.append(report)
        else:
            r = found[same]
            found[same] = OomReport(**{**_fields(r), "printed": r.printed + 1})
    return found


def _fields(r: OomReport) -> dict[str, object]:
    return {f: getattr(r, f) for f in OomReport.__dataclass_fields__}


def _same(a: OomReport, b: OomReport) -> bool:
    """The same report printed again (in the log and again in the traceback)."""
    def key(r: OomReport) -> tuple[object, ...]:
        return (r.kind, r.requested, r.used, r.parts,
                tuple((x.rank, x.size, x.op_name, x.shape) for x in r.buffers))
    return key(a) == key(b)


def _headline(lines: list[str], i: int) -> str:
    """The error line before a GPU report (``RESOURCE_EXHAUSTED: Out of memory while
    trying to allocate N bytes.``), within the three lines above it."""
    for k in range(i - 1, max(-1, i - 4), -1):
        if "RESOURCE_EXHAUSTED" in lines[k] or "Out of memory" in lines[k]:
            return lines[k].strip()
    return ""


def _gpu(lines: list[str], i: int, path: str) -> tuple[OomReport, int]:
    start = i
    headline = _headline(lines, i)
    requested = None
    for r in _REQUEST_RES:
        if (m := r.search(headline)) is not None:
            requested = int(m.group(1))
            break
    parts: list[tuple[str, int | None]] = []
    i += 1
    while i < len(lines) and not lines[i].strip().startswith("Peak buffers"):
        m = _STAT_RE.match(lines[i])
        if m is not None:
            parts.append((f"{m.group(1).strip()} {m.group(2)}", _bytes(m.group(3))))
        elif lines[i].strip() and not lines[i].strip().startswith("BufferAssignment stats"):
            return OomReport(path, start + 1, "gpu", headline or lines[start].strip(),
                             requested=requested, parts=tuple(parts)), i
        i += 1
    buffers, i = _buffers(lines, i + 1, _GPU_BUFFER_RE)
    return OomReport(path, start + 1, "gpu", headline or lines[start].strip(),
                     requested=requested, parts=tuple(parts), buffers=tuple(buffers)), i


def _tpu(lines: list[str], i: int, m: re.Match[str], path: str) -> tuple[OomReport, int]:
    start = i
    space = m.group(1)
    used, capacity, exceeded = (_bytes(g) if g else None for g in m.group(2, 3, 4))
    headline = lines[i][m.start():].strip()
    parts: list[tuple[str, int | None]] = []
    requirement: list[tuple[str, int | None]] = []
    target: list[tuple[str, int | None]] | None = None
    i += 1
    while i < len(lines):
        ln = lines[i]
        if "Largest program allocations" in ln:
            buffers, i = _buffers(lines, i + 1, _TPU_BUFFER_RE)
            return OomReport(path, start + 1, "tpu", headline, space, None, used, capacity,
                             exceeded, tuple(parts), tuple(requirement), tuple(buffers)), i
        if _TOTAL_RE.match(ln):
            target = parts
        elif _REQUIREMENT_RE.match(ln):
            target = requirement
        elif (pm := _PART_RE.match(ln)) is not None and target is not None:
            target.append((pm.group(1).strip(), _bytes(pm.group(2))))
        elif ln.strip().startswith("Output size"):
            pass
        elif ln.strip() and target is None:
            break  # the report ended after its first line
        elif ln.strip() and not ln.startswith((" ", "\t")):
            break
        i += 1
    return OomReport(path, start + 1, "tpu", headline, space, None, used, capacity, exceeded,
                     tuple(parts), tuple(requirement)), i


def _early(lines: list[str], i: int, path: str) -> OomReport:
    ln = lines[i]
    for r in _EARLY_RES:
        m = r.search(ln)
        if m is None:
            continue
        space = m.group(1) if m.re is _EARLY_RES[0] else "hbm"
        need, have = m.group(m.re.groups - 1), m.group(m.re.groups)
        used, capacity = _bytes(need), _bytes(have)
        over = used - capacity if used is not None and capacity is not None else None
        return OomReport(path, i + 1, "tpu-early", ln[m.start():].strip().rstrip("."),
                         space.lower(), None, used, capacity, over)
    raise AssertionError("not an early report")  # pragma: no cover (checked by the caller)


def _buffers(lines: list[str], i: int, start_re: re.Pattern[str]
             ) -> tuple[list[OomBuffer], int]:
    """The list of buffers from line `i`: each starts with `start_re` (its number; the
    TPU's also its size) and holds ``Key: value`` lines up to ``=====``; a line that is
    none of these continues the value before it (a terminal wrapped it)."""
    out: list[OomBuffer] = []
    fields: dict[str, str] = {}
    rank, at = 0, 0
    last = ""

    def close() -> None:
        if rank and "Size" in fields:
            out.append(_buffer(rank, at, fields))

    while i < len(lines):
        ln = lines[i]
        s = ln.strip()
        m = start_re.match(ln)
        if m is not None:
            close()
            fields, rank, at, last = {}, int(m.group(1)), i + 1, ""
            if m.re.groups > 1:
                fields["Size"], last = m.group(2), "Size"
        elif s.startswith("====="):
            close()
            fields, rank, last = {}, 0, ""
        elif (k := _KEY_RE.match(ln)) is not None and rank:
            last = k.group(1).replace("label", "Label")
            fields[last] = k.group(2).strip()
        elif not s:
            pass  # a blank line between buffers, or inside one
        elif rank and last:
            fields[last] += s  # wrapped by the terminal mid-word: no space added
        elif not rank and out:
            break  # the text after the list
        i += 1
    close()
    return out, i


def _buffer(rank: int, line: int, f: dict[str, str]) -> OomBuffer:
    md = _metadata(f.get("Operator", ""))
    source = ""
    if md.get("source_file"):
        source = md["source_file"] + (f":{md['source_line']}" if md.get("source_line") else "")
    padding, expansion = 0, None
    if (m := _EXPANSION_RE.match(f.get("Extra memory due to padding", ""))) is not None:
        padding, expansion = _bytes(m.group(1)) or 0, float(m.group(2))
    param = "Entry Parameter Subshape" in f
    return OomBuffer(rank, _bytes(f["Size"]) or 0, line, md.get("op_name", ""),
                     md.get("op_type", ""), source, f.get("XLA Label", ""),
                     f.get("Entry Parameter Subshape") or f.get("Shape", ""), param,
                     _bytes(f["Unpadded size"]) if "Unpadded size" in f else None,
                     padding, expansion, f.get("Allocation type", ""))
