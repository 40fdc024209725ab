"""The SPMD partitioner's memory lists, read from a log.

With verbose logging, XLA's SPMD partitioner prints the largest
instructions before and after partitioning::

    ***** SPMD memory usage before partition *****
      ** Replicated instructions
      ** All instructions
      256.00MiB : %p1.7 = f32[8192,8192]{1,0} parameter(1), sharding={devices=[2,2]0,1,2,3}
    ***** SPMD memory usage after partition *****
      256.00MiB : %all-gather.2 = f32[4,4096,4096]{2,1,0} all-gather(...)

and TPU compilers add the device memory they plan to use ("program HBM
usage").  `read_spmd_log` collects both.  glog prefixes are removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._repr import brief_repr
from ._xla_dumps import human_bytes

__all__ = ["SpmdEntry", "SpmdMemoryLog", "SpmdSection", "is_spmd_log", "parse_spmd_log"]

_GLOG_RE = re.compile(r"^[IWEF][0-9]{4} [0-9:.]+\s+[0-9]+ [^\]]*\] ?")
_HEAD_RE = re.compile(r"\*{5} SPMD memory (usage before partition|usage after partition|"
                      r"during transformation) \*{5}")
_SUB_RE = re.compile(r"^\s*\*\* (.+?)\s*$")
_ENTRY_RE = re.compile(
    r"^\s*([0-9.]+)\s*([KMGT]?i?B)\s*:\s*%?([\w.\-]+)\s*=\s*(\S+?)\s+([\w\-]+)\(")
_HBM_RE = re.compile(r"(?i)hbm usage|hbm requirement|^Output size")


@dataclass(frozen=True, slots=True)
class SpmdEntry:
    __repr__ = brief_repr
    bytes: int
    name: str
    shape: str
    opcode: str
    line: int


@dataclass(frozen=True, slots=True)
class SpmdSection:
    __repr__ = brief_repr
    title: str
    entries: tuple[SpmdEntry, ...]


@dataclass(frozen=True, slots=True)
class SpmdMemoryLog:
    __repr__ = brief_repr
    path: str
    sections: tuple[SpmdSection, ...]
    hbm: tuple[str, ...]


def is_spmd_log(text: str) -> bool:
    return "SPMD memory usage" in text


def parse_spmd_log(text: str, *, path: str = "<string>") -> SpmdMemoryLog:
    sections: list[tuple[str, list[SpmdEntry]]] = []
    hbm: list[str] = []
    current: list[SpmdEntry] | None = None
    head = ""
    in_hbm = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = _GLOG_RE.sub("", raw)
        m = _HEAD_RE.search(line)
        if m:
            head = m.group(1).replace("usage ", "")
            current = []
            sections.append((head, current))
            continue
        sub = _SUB_RE.match(line)
        if sub and current is not None and head:
            current = []
            sections.append((f"{head}: {sub.group(1).lower()}", current))
            continue
        e = _ENTRY_RE.match(line)
        if e and current is not None:
            size = human_bytes(e.group(1), e.group(2))
            current.append(SpmdEntry(size, e.group(3), e.group(4), e.group(5), n))
            continue
        if _HBM_RE.search(line):
            hbm.append(line.rstrip())
            in_hbm = True
        elif in_hbm and line.startswith("  ") and line.strip():
            hbm.append(line.rstrip())
        else:
            in_hbm = False
    out = tuple(SpmdSection(t, tuple(es)) for t, es in sections
                if es or not any(t2.startswith(t + ":") for t2, _ in sections))
    return SpmdMemoryLog(path, out, tuple(hbm))
