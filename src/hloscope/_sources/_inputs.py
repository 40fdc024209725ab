"""What every command reads, and which module the user means.

A command is given a path: an HLO text file, an XLA dump folder
(``--xla_dump_to``), a Markdown report, a log, torch_xla's saved graphs, one
of XLA's memory files, or a log of the SPMD partitioner's memory lists.
`read_inputs` sorts out what it is and returns every module in it (each with
its phase and, from a dump, XLA's own memory figures), the XLA memory files
that come without a module, and SPMD logs.  A file in a dump folder that
cannot be read is skipped with the reason kept; it never hides the others.

Most commands work on one module.  `Inputs.select` picks it:

- ``--module NAME`` picks the module of that name (or the dump file prefix,
  ``module_0012.jit_train_step``); ``--module INDEX`` the INDEXth module as
  ``hloscope summary --list`` numbers them (from 0);
- ``--function NAME`` picks the module JAX compiled for that function
  (``jit_NAME``, also ``pjit_NAME`` and ``xla_computation_NAME``);
- otherwise, in a dump folder, the last-compiled module that is not one of
  JAX's small helper computations (``jit__where``, ``jit_convert_element_type``,
  ...); in a file with several modules, the largest such module (torch_xla
  saves the training step's graph next to small ones); identical modules
  count once.

The choice is reported in one line naming the others, so a user never
analyses a module without knowing it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any

from .._errors import HloscopeError, HloSourceError
from .._repr import brief_repr
from .._hlo._module import Module
from ._reader import read, read_text
from ._oom import OomReport, is_oom_report, parse_oom_reports
from ._saved import is_saved_json, saved_report
from ._spmd_log import SpmdMemoryLog, is_spmd_log, parse_spmd_log
from ._torch_xla import user_frame
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
from ._xla_dumps import _DUMP_RE as _DUMP_NAME_RE

__all__ = ["Inputs", "ModuleEntry", "is_jax_helper", "read_file_text", "read_inputs",
           "read_xla_file", "sniff_kind"]

_SNIFF = 1 << 16
# Names JAX gives the small computations it compiles for primitives applied
# outside jit (jit_convert_element_type, jit_broadcast_in_dim, ...).
_JAX_PRIMITIVES = frozenset("""
abs add and argmax argmin atan2 broadcast_in_dim ceil clamp concatenate convert_element_type
cos cumsum div dot_general dynamic_slice dynamic_update_slice eq exp expand_dims floor gather
ge gt integer_pow iota le log lt max min mul ne neg not or pad pow reduce_max reduce_min
reduce_sum rem reshape rev round rsqrt scatter scatter-add select_n select_and_scatter_add
sign sin slice sort sqrt squeeze sub tanh transpose xor copy copy_p device_put
multiply subtract divide true_divide floor_divide remainder power negative maximum minimum
equal not_equal less less_equal greater greater_equal where clip sum mean prod stack unstack
stage array asarray zeros ones full zeros_like ones_like full_like arange astype take
""".split())
_JIT_NAME_RE = re.compile(r"^(?:jit|pjit)_(.+?)(?:\.[0-9]+)?$")


def is_jax_helper(name: str) -> bool:
    """Whether `name` is one of the small modules JAX compiles for a primitive or a
    private helper (``jit__where``, ``jit_convert_element_type``)."""
    m = _JIT_NAME_RE.match(name)
    if m is None:
        return False
    fn = m.group(1)
    if fn in ("_lambda_", "_unnamed_wrapped_function_"):  # a user's lambda or partial
        return False
    return fn.startswith("_") or fn in _JAX_PRIMITIVES


@dataclass(slots=True)
class ModuleEntry:
    """One module found in the input, with what is known about where it came from."""

    __repr__ = brief_repr

    module: Module
    index: int
    phase: str = ""  # "optimized", "before optimizations", or "" when the source does not say
    xla: XlaMemoryFiles | None = None
    file: str = ""
    order: int = 0  # compile order in a dump folder, position in a file
    copies: int = 1
    dump_prefix: str = ""
    # `compiled.memory_analysis()` as saved in an inspect report, field by field.
    memory_analysis: dict[str, float] | None = None
    # The compile target of an inspect report (`Report.target`), None for other inputs.
    target: dict[str, Any] | None = None
    # What compiling the advisor's fixes found when the report was saved
    # (`saved_checks`), as saved; None for other inputs.
    advice_checks: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return self.module.name + (f" ({self.phase})" if self.phase else "")


@dataclass(slots=True)
class Inputs:
    """Everything read from one path (see the module docstring)."""

    __repr__ = brief_repr

    path: str
    kind: str  # "file" or "dump"
    modules: list[ModuleEntry] = field(default_factory=list)
    dumps: list[tuple[str, XlaMemoryFiles]] = field(default_factory=list)
    spmd_logs: list[SpmdMemoryLog] = field(default_factory=list)
    # XLA's out-of-memory reports in a log or an error message (`_oom`).
    oom_reports: list[OomReport] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def listing(self) -> list[dict[str, object]]:
        """One row per module for ``hloscope summary --list`` (schema hloscope.modules/1)."""
        rows: list[dict[str, object]] = []
        for e in self.modules:
            m = e.module
            prov = m.provenance
            frames = prov.get("frames") or ()
            frame = user_frame(frames)
            rows.append({
                "index": e.index, "module": m.name, "phase": e.phase or None,
                "instructions": m.instruction_count,
                "computations": len([c for c in m.computations if not c.origin]),
                "copies": e.copies, "file": e.file, "line": m.first_line,
                "dump": e.dump_prefix or None,
                "jax_helper": is_jax_helper(m.name),
                "graph": prov.get("torch_xla_graph"), "graph_hash": prov.get("graph_hash"),
                "frame": None if frame is None else f"{frame[0]} ({frame[1]}:{frame[2]})",
            })
        return rows

    def select(self, module: str | None = None, function: str | None = None
               ) -> tuple[ModuleEntry, str | None]:
        """The module the user means and, when there was a choice, a note saying which
        was taken and what else there is."""
        entries = self.modules
        if not entries:
            raise HloscopeError(f"{self.path}: no HLO module to analyse",
                                hint=self._no_module_hint())
        if module is not None:
            return self._by_name(module), None
        if function is not None:
            return self._by_function(function), None
        if len(entries) == 1:
            return entries[0], None
        chosen, rule = self._default()
        others = [e for e in entries if e is not chosen]
        shown = ", ".join(f"{e.index}:{e.module.name}" for e in others[:8])
        more = f" and {len(others) - 8} more" if len(others) > 8 else ""
        phase = f", {chosen.phase}" if chosen.phase else ""
        saved = sum(e.copies for e in entries)
        copies = (f" ({saved} in all, identical ones counted once)"
                  if saved > len(entries) else "")
        note = (f"{self.path} holds {len(entries)} modules{copies}; using {chosen.index}:"
                f"{chosen.module.name} ({rule}{phase}); the others: {shown}{more}. Pick one "
                "with --module NAME|INDEX (hloscope summary --list shows them all)")
        return chosen, note

    def _default(self) -> tuple[ModuleEntry, str]:
        entries = self.modules
        main = [e for e in entries if not is_jax_helper(e.module.name)] or entries
        if self.kind == "dump":
            best = max(main, key=lambda e: e.order)
            return best, "the last compiled that is not a JAX helper"
        best = max(main, key=lambda e: (e.module.instruction_count, e.order))
        return best, "the largest" + (" that is not a JAX helper" if len(main) < len(entries)
                                      else "")

    def _by_name(self, wanted: str) -> ModuleEntry:
        entries = self.modules
        if wanted.isdigit():
            k = int(wanted)
            if 0 <= k < len(entries):
                return entries[k]
        exact = [e for e in entries if wanted in (e.module.name, e.dump_prefix)]
        if len(exact) == 1:
            return exact[0]
        if len(exact) > 1:
            optimized = [e for e in exact if e.phase == "optimized"]
            if len(optimized) == 1:
                return optimized[0]
        near = [e for e in entries if wanted in e.module.name]
        if len(near) == 1 and not exact:
            return near[0]
        names = ", ".join(f"{e.index}:{e.module.name}" for e in entries[:20])
        why = "matches several modules" if exact or near else "matches no module"
        raise HloscopeError(f"{self.path}: --module {wanted} {why}",
                            hint=f"the modules are {names}; give a name or an index")

    def _by_function(self, fn: str) -> ModuleEntry:
        names = {f"jit_{fn}", f"pjit_{fn}", f"xla_computation_{fn}", fn}
        found = [e for e in self.modules
                 if e.module.name in names or _JIT_NAME_RE.sub(r"\1", e.module.name) == fn]
        if found:
            return max(found, key=lambda e: (e.phase == "optimized", e.order))
        names_ = ", ".join(e.module.name for e in self.modules[:20])
        raise HloscopeError(f"{self.path}: no module was compiled for function {fn!r}",
                            hint=f"the modules are {names_}")

    def _no_module_hint(self) -> str:
        if self.dumps:
            return "it holds XLA's memory files only: hloscope memory reads those"
        if self.oom_reports:
            return "it holds XLA's out-of-memory report: hloscope memory reads it"
        if self.skipped:
            return "files skipped: " + "; ".join(self.skipped[:3])
        return "pass HLO text, an XLA dump folder or a file that holds a module"


def read_file_text(path: str) -> str:
    """The file's text (undecodable bytes replaced), or HloSourceError naming it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise HloSourceError(f"cannot read the file ({e.strerror})", path=path) from None
    return data.decode("utf-8", errors="replace")


def read_xla_file(path: str, kind: str) -> tuple[BufferAssignmentDump | None, LiveRangeDump | None,
                                                 MemoryUsageReport | None]:
    """One of XLA's memory files, parsed by its `kind` (from `sniff_kind`)."""
    text = read_file_text(path)
    if kind == "buffer-assignment":
        return parse_buffer_assignment(text, filename=path), None, None
    if kind == "live-range":
        return None, parse_live_range(text, filename=path), None
    return None, None, parse_memory_usage_report(text, filename=path)


def sniff_kind(path: str) -> str | None:
    """What a file holds when it is not HLO text: ``buffer-assignment``, ``live-range``,
    ``memory-usage-report``, ``spmd-log``, ``oom-report``, ``saved-json``; None for anything
    else."""
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
    if (stripped.startswith("Memory Space:") and "Total bytes:" in head) or \
            stripped.startswith("Total bytes used:"):
        return "memory-usage-report"
    if is_spmd_log(head) and "HloModule" not in head:
        return "spmd-log"
    if is_oom_report(head) and "HloModule" not in head:
        return "oom-report"
    if is_saved_json(head):
        return "saved-json"
    return None


def _optimized_guess(m: Module) -> str:
    if m.is_scheduled:
        return "optimized"
    return ""


def read_inputs(path: str | os.PathLike[str]) -> Inputs:
    """Read `path` (see the module docstring)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        try:
            return _read_dump(p)
        except HloSourceError:
            kept = os.path.join(p, "module.hlo")  # a folder `hloscope profile --keep` wrote
            if not os.path.isfile(kept):
                raise
            return read_inputs(kept)
    out = Inputs(p, "file")
    kind = sniff_kind(p)
    if kind == "spmd-log":
        out.spmd_logs.append(parse_spmd_log(read_file_text(p), path=p))
        return out
    if kind == "oom-report":
        out.oom_reports.extend(parse_oom_reports(read_file_text(p), path=p))
        return out
    if kind == "saved-json":
        _read_saved(p, out)
        return out
    if kind is not None:
        ba, lr, mu = read_xla_file(p, kind)
        out.dumps.append((p, XlaMemoryFiles((os.path.basename(p),), ba, lr, mu)))
        return out
    try:
        hf = read(p)
    except HloSourceError:  # no module: a log or an error message with XLA's OOM report?
        text = read_file_text(p) if os.path.isfile(p) else ""
        if not is_oom_report(text):
            raise
        out.oom_reports.extend(parse_oom_reports(text, path=p))
        return out
    beside = _files_beside(p, out) if len(hf.modules) == 1 else None
    _add_unique(out, [(m, _phase_from_name(p) or _optimized_guess(m), beside, p, k, "")
                      for k, m in enumerate(hf.modules)])
    out.skipped.extend(f"a damaged module: {e.one_line()}" for e in hf.damaged)
    return out


def _files_beside(p: str, out: Inputs) -> XlaMemoryFiles | None:
    """For a module file of an XLA dump folder passed alone (``module_0004.jit_f.
    cpu_after_optimizations.txt``), XLA's memory files of the same module beside it (its
    buffer assignment, live ranges): read as the folder would be (a trial's `memory` of
    the file alone gave hloscope's estimate where the folder gave XLA's temp)."""
    m = _DUMP_NAME_RE.match(os.path.basename(p))
    if m is None or not m.group(3).endswith("after_optimizations"):
        return None
    try:
        found = read_dump_dir(os.path.dirname(p) or ".")
    except HloSourceError:
        return None
    same = os.path.abspath(p)
    for dm in found:
        if dm.after and os.path.abspath(dm.after) == same:
            return _dump_figures(dm, out)
    return None


def _read_saved(p: str, out: Inputs) -> None:
    """The optimized module of a saved inspect report, with XLA's files and figures."""
    fields = saved_report(p)
    m = read_text(fields["hlo_after"], filename=f"{p} (hlo_after)").module
    ba = parse_buffer_assignment(fields["buffer_assignment"], filename=f"{p} (buffer_assignment)"
                                 ) if fields["buffer_assignment"] else None
    lr = parse_live_range(fields["live_range"], filename=f"{p} (live_range)"
                          ) if fields["live_range"] else None
    names = tuple(n for n, v in (("buffer-assignment", ba), ("live-range", lr)) if v)
    entry = ModuleEntry(m, 0, "optimized", XlaMemoryFiles(names, ba, lr) if names else None,
                        p, memory_analysis=fields["memory_analysis"], target=fields["target"],
                        advice_checks=fields.get("advice_checks"))
    out.modules.append(entry)


def _phase_from_name(path: str) -> str:
    base = os.path.basename(path)
    if "after_optimizations" in base:
        return "optimized"
    if "before_optimizations" in base:
        return "before optimizations"
    return ""


def _read_dump(p: str) -> Inputs:
    out = Inputs(p, "dump")
    found: list[tuple[Module, str, XlaMemoryFiles | None, str, int, str]] = []
    for order, dm in enumerate(read_dump_dir(p)):
        figs = _dump_figures(dm, out)
        # The optimized module, with XLA's figures; the module before optimization
        # when that is all the dump holds (it is then analysed as printed).
        for file, phase in ((dm.after, "optimized"), (dm.before, "before optimizations")):
            if not file:
                continue
            try:
                mods = read(file).modules
            except HloscopeError as e:
                out.skipped.append(f"{os.path.basename(file)}: {e.one_line()}")
                continue
            found.extend((m, phase, figs if phase == "optimized" else None, file, order,
                          dm.prefix) for m in mods)
            break
        else:
            if figs is not None:
                out.dumps.append((dm.prefix, figs))
    _add_unique(out, found)
    if not out.modules and not out.dumps and out.skipped:
        raise HloSourceError("no file of this dump folder could be read: "
                             + "; ".join(out.skipped[:3]), path=p)
    return out


def _dump_figures(dm, out: Inputs) -> XlaMemoryFiles | None:  # type: ignore[no-untyped-def]
    parsed: dict[str, object] = {}
    names = []
    for attr, parse in (("buffer_assignment", parse_buffer_assignment),
                        ("live_range", parse_live_range),
                        ("memory_usage", parse_memory_usage_report)):
        file = getattr(dm, attr)
        if not file:
            continue
        try:
            parsed[attr] = parse(read_file_text(file), filename=file)
            names.append(os.path.basename(file))
        except HloscopeError as e:
            out.skipped.append(f"{os.path.basename(file)}: {e.one_line()}")
    if not names:
        return None
    return XlaMemoryFiles(tuple(names), parsed.get("buffer_assignment"),  # type: ignore[arg-type]
                          parsed.get("live_range"), parsed.get("memory_usage"))  # type: ignore[arg-type]


def _add_unique(out: Inputs, found: list[tuple[Module, str, XlaMemoryFiles | None, str, int,
                                               str]]) -> None:
    """Add modules, counting identical ones (torch_xla saves a graph per step) once."""
    seen: dict[str, ModuleEntry] = {}
    for m, phase, figs, file, order, prefix in found:
        # Each module of a dump is its own compilation; in a file, the same graph saved
        # again (under another name, IrToHlo.12 then IrToHlo.17) is a copy.
        key = prefix or (_fingerprint(m, phase) if len(found) > 1 else "")
        if key in seen:
            seen[key].copies += 1
            continue
        entry = ModuleEntry(m, len(out.modules), phase, figs, file, order, 1, prefix)
        seen[key] = entry
        out.modules.append(entry)


def _fingerprint(m: Module, phase: str) -> str:
    """Identical modules, whatever their names (IrToHlo.12 and IrToHlo.17)."""
    h = m.provenance.get("graph_hash")
    if h:
        return f"{phase}|hash:{h}"
    digest = hashlib.sha1(phase.encode())
    for c in m.computations:
        for inst in c.instructions:
            digest.update(f"{inst.opcode} {inst.shape} {len(inst.operand_names)} "
                          f"{inst.attr_text.split('metadata=')[0]}\n".encode("utf-8",
                                                                              "replace"))
    return digest.hexdigest()
