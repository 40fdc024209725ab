"""What `hloscope memory` can read: HLO text, an XLA dump folder, XLA's memory files, SPMD logs.

`read_memory_inputs(path)` sorts out what `path` is and returns the modules
to analyse (each with XLA's figures for it when the dump has them), the XLA
memory files that come without a module, and SPMD partitioner logs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .._errors import HloSourceError
from .._repr import brief_repr
from .._hlo._module import Module
from ._reader import read
from ._spmd_log import SpmdMemoryLog, is_spmd_log, parse_spmd_log
from ._xla_dumps import (
    BufferAssignmentDump,
    LiveRangeDump,
    MemoryUsageReport,
    XlaMemoryFiles,
    parse_buffer_assignment,
    parse_live_range,
    parse_memory_usage_report,
    read_dump_dir,
    xla_file_kind,
)

__all__ = ["MemoryInputs", "read_memory_inputs"]

_SNIFF = 1 << 16


@dataclass(slots=True)
class MemoryInputs:
    __repr__ = brief_repr
    path: str
    modules: list[tuple[Module, XlaMemoryFiles | None]] = field(default_factory=list)
    dumps: list[tuple[str, XlaMemoryFiles]] = field(default_factory=list)
    spmd_logs: list[SpmdMemoryLog] = field(default_factory=list)


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise HloSourceError(f"cannot read the file ({e.strerror})", path=path) from None
    return data.decode("utf-8", errors="replace")


def _xla_file(path: str, kind: str) -> tuple[BufferAssignmentDump | None, LiveRangeDump | None,
                                             MemoryUsageReport | None]:
    text = _read_text(path)
    if kind == "buffer-assignment":
        return parse_buffer_assignment(text, filename=path), None, None
    if kind == "live-range":
        return None, parse_live_range(text, filename=path), None
    return None, None, parse_memory_usage_report(text, filename=path)


def _sniff_kind(path: str) -> str | None:
    kind = xla_file_kind(path)
    if kind is not None:
        return kind
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF).decode("utf-8", errors="replace")
    except OSError:
        return None
    stripped = head.lstrip()
    if stripped.startswith(("BufferAssignment:", "allocation 0:")):
        return "buffer-assignment"
    if stripped.startswith("HloLiveRange (max "):
        return "live-range"
    if stripped.startswith("Memory Space:") and "Total bytes:" in head:
        return "memory-usage-report"
    if is_spmd_log(head) and "HloModule" not in head:
        return "spmd-log"
    return None


def read_memory_inputs(path: str | os.PathLike[str]) -> MemoryInputs:
    """Read `path` for `hloscope memory` (see the module docstring)."""
    p = os.fspath(path)
    out = MemoryInputs(p)
    if os.path.isdir(p):
        for dm in read_dump_dir(p):
            ba = parse_buffer_assignment(_read_text(dm.buffer_assignment),
                                         filename=dm.buffer_assignment) \
                if dm.buffer_assignment else None
            lr = parse_live_range(_read_text(dm.live_range), filename=dm.live_range) \
                if dm.live_range else None
            mu = parse_memory_usage_report(_read_text(dm.memory_usage), filename=dm.memory_usage) \
                if dm.memory_usage else None
            files = tuple(os.path.basename(f) for f in
                          (dm.buffer_assignment, dm.live_range, dm.memory_usage) if f)
            figs = XlaMemoryFiles(files, ba, lr, mu) if files else None
            if dm.after:
                for m in read(dm.after).modules:
                    out.modules.append((m, figs))
            elif figs is not None:
                out.dumps.append((dm.prefix, figs))
            elif dm.before:  # only the module before optimization: analysed as printed
                out.modules.extend((m, None) for m in read(dm.before).modules)
        return out
    kind = _sniff_kind(p)
    if kind == "spmd-log":
        out.spmd_logs.append(parse_spmd_log(_read_text(p), path=p))
        return out
    if kind is not None:
        ba, lr, mu = _xla_file(p, kind)
        out.dumps.append((p, XlaMemoryFiles((os.path.basename(p),), ba, lr, mu)))
        return out
    hf = read(p)
    out.modules.extend((m, None) for m in hf.modules)
    return out
