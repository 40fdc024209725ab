"""What `hloscope memory` can read: HLO text, an XLA dump folder, XLA's memory files, SPMD logs.

`read_memory_inputs(path)` sorts out what `path` is and returns the modules
to analyse (each with XLA's figures for it when the dump has them), the XLA
memory files that come without a module, and SPMD partitioner logs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .._repr import brief_repr
from .._hlo._module import Module
from ._inputs import read_file_text, read_xla_file, sniff_kind
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


@dataclass(slots=True)
class MemoryInputs:
    __repr__ = brief_repr
    path: str
    modules: list[tuple[Module, XlaMemoryFiles | None]] = field(default_factory=list)
    dumps: list[tuple[str, XlaMemoryFiles]] = field(default_factory=list)
    spmd_logs: list[SpmdMemoryLog] = field(default_factory=list)


def read_memory_inputs(path: str | os.PathLike[str]) -> MemoryInputs:
    """Read `path` for `hloscope memory` (see the module docstring)."""
    p = os.fspath(path)
    out = MemoryInputs(p)
    if os.path.isdir(p):
        for dm in read_dump_dir(p):
            ba = parse_buffer_assignment(read_file_text(dm.buffer_assignment),
                                         filename=dm.buffer_assignment) \
                if dm.buffer_assignment else None
            lr = parse_live_range(read_file_text(dm.live_range), filename=dm.live_range) \
                if dm.live_range else None
            mu = parse_memory_usage_report(read_file_text(dm.memory_usage), filename=dm.memory_usage) \
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
    kind = sniff_kind(p)
    if kind == "saved-json":
        kind = None  # read as text below, which says what it is (`hloscope memory` reads it)
    if kind == "spmd-log":
        out.spmd_logs.append(parse_spmd_log(read_file_text(p), path=p))
        return out
    if kind is not None:
        ba, lr, mu = read_xla_file(p, kind)
        out.dumps.append((p, XlaMemoryFiles((os.path.basename(p),), ba, lr, mu)))
        return out
    hf = read(p)
    out.modules.extend((m, None) for m in hf.modules)
    return out
