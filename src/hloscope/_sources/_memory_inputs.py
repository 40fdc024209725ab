"""What `hloscope memory` can read: HLO text, an XLA dump folder, XLA's memory files, SPMD
logs, XLA's out-of-memory reports.

`read_memory_inputs(path)` sorts out what `path` is and returns the modules
to analyse (each with XLA's figures for it when the dump has them), the XLA
memory files that come without a module, and SPMD partitioner logs.  A file of
a dump folder that cannot be read is skipped with the reason kept (`skipped`);
it never hides the others.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from .._errors import HloscopeError, HloSourceError
from .._repr import brief_repr
from .._hlo._module import Module
from ._inputs import read_file_text, read_xla_file, sniff_kind
from ._oom import OomReport, parse_oom_reports
from ._reader import read
from ._spmd_log import SpmdMemoryLog, parse_spmd_log
from ._xla_dumps import (
    XlaMemoryFiles,
    parse_buffer_assignment,
    parse_live_range,
    parse_memory_usage_report,
    read_dump_dir,
)

__all__ = ["MemoryInputs", "read_memory_inputs"]

T = TypeVar("T")


@dataclass(slots=True)
class MemoryInputs:
    __repr__ = brief_repr
    path: str
    modules: list[tuple[Module, XlaMemoryFiles | None]] = field(default_factory=list)
    dumps: list[tuple[str, XlaMemoryFiles]] = field(default_factory=list)
    spmd_logs: list[SpmdMemoryLog] = field(default_factory=list)
    oom_reports: list[OomReport] = field(default_factory=list)
    # Files of a dump folder that could not be read, each with the reason; they hide
    # nothing else.
    skipped: list[str] = field(default_factory=list)


def _tolerant(out: MemoryInputs, path: str | None, parse: Callable[..., T]) -> T | None:
    """`parse(text, filename=path)`, or None (the reason kept in `out.skipped`) when the file
    cannot be read."""
    if not path:
        return None
    try:
        return parse(read_file_text(path), filename=path)
    except HloscopeError as e:
        out.skipped.append(f"{os.path.basename(path)}: {e.one_line()}")
        return None


def read_memory_inputs(path: str | os.PathLike[str]) -> MemoryInputs:
    """Read `path` for `hloscope memory` (see the module docstring)."""
    p = os.fspath(path)
    out = MemoryInputs(p)
    if os.path.isdir(p):
        for dm in read_dump_dir(p):
            ba = _tolerant(out, dm.buffer_assignment, parse_buffer_assignment)
            lr = _tolerant(out, dm.live_range, parse_live_range)
            mu = _tolerant(out, dm.memory_usage, parse_memory_usage_report)
            files = tuple(os.path.basename(f) for f, v in
                          ((dm.buffer_assignment, ba), (dm.live_range, lr),
                           (dm.memory_usage, mu)) if f and v is not None)
            figs = XlaMemoryFiles(files, ba, lr, mu) if files else None
            after = _tolerant(out, dm.after, lambda _t, filename: read(filename).modules)
            before = None if after is not None or figs is not None else \
                _tolerant(out, dm.before, lambda _t, filename: read(filename).modules)
            if after is not None:
                out.modules.extend((m, figs) for m in after)
            elif figs is not None:
                out.dumps.append((dm.prefix, figs))
            elif before is not None:  # only the module before optimization: as printed
                out.modules.extend((m, None) for m in before)
        if not out.modules and not out.dumps and out.skipped:
            raise HloSourceError("no file of this dump folder could be read: "
                                 + "; ".join(out.skipped[:3]), path=p)
        return out
    kind = sniff_kind(p)
    if kind == "saved-json":
        kind = None  # read as text below, which says what it is (`hloscope memory` reads it)
    if kind == "spmd-log":
        out.spmd_logs.append(parse_spmd_log(read_file_text(p), path=p))
        return out
    if kind == "oom-report":
        out.oom_reports.extend(parse_oom_reports(read_file_text(p), path=p))
        return out
    if kind is not None:
        ba, lr, mu = read_xla_file(p, kind)
        out.dumps.append((p, XlaMemoryFiles((os.path.basename(p),), ba, lr, mu)))
        return out
    hf = read(p)
    out.modules.extend((m, None) for m in hf.modules)
    return out
