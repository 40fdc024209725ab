"""Finding HLO modules in whatever text a user holds.

A file may be a plain module as XLA prints it, a Markdown report with
```` ```hlo ```` fences (jax-hpc-profiler), a glog log whose lines carry
``I0615 14:52:19.273297 1044120 file.cc:123]`` prefixes, or text copied out of
a notebook with prose and other outputs around the module.  It may hold
several modules.  The reader turns each into lines aligned with the file's
own lines (so errors point at the right place) and hands them to the parser.
"""

from __future__ import annotations

import gc
import os
import re
from dataclasses import dataclass, field

from .._errors import HloParseError, HloSourceError
from .._gc import paused_gc
from .._repr import brief_repr
from .._hlo._module import Module
from .._hlo._parser import COMPUTATION_START_RE, LineSource, parse_module_lines
from ._stablehlo import is_stablehlo, stablehlo_to_hlo_text
from ._torch_xla import TORCH_IR_HINT, graph_blocks
from ._xla_dumps import read_dump_dir

__all__ = ["HloFile", "read", "read_text", "parse", "check", "check_text", "MAX_BYTES"]

# Larger inputs are refused with a clear error rather than exhausting memory:
# the parsed model takes a few times the text's size.
MAX_BYTES = 2 * 1024**3
_SNIFF = 64 * 1024
_GLOG_RE = re.compile(
    r"[IWEF][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+\s+[0-9]+\s+[^\s\]]+:[0-9]+\] ?")
_FENCE_RE = re.compile(r"\s*(```+|~~~+)\s*([\w+\-]*)")
_HEADER_START_RE = re.compile(r"\s*HloModule\s+\S")
# A header after other text on its line (a test's log: ``tests/x.py HLO graph f HloModule
# pjit_f, is_scheduled=true, ...``): the name, then its attributes or the line's end.
_HEADER_INSIDE_RE = re.compile(r"\S\s+(HloModule\s+[\w.\-]+\s*(?:,\s*\w+=|$))")
_INSTRUCTION_LIKE_RE = re.compile(r"\s*(?:ROOT\s+)?%?[^\W\d][\w.\-]*\s*=\s*\S")
_COMMENT_LINE_RE = re.compile(r"\s*(?://|/\*.*\*/\s*$)")
# Signs, anywhere in a text, that it may hold HLO without a header line.
_HEADERLESS_HINT_RE = re.compile(
    r"^[^\S\n]*(?:ENTRY\b|ROOT\s|%?[^\W\d][\w.\-]*\s*=\s*(?:[a-z][a-z0-9]*\[|\())", re.M)


@dataclass
class HloFile:
    """The HLO modules found in one file or text.

    `format` says how they were found: ``hlo`` (plain text), ``markdown``
    (fenced blocks), ``glog`` (log-line prefixes removed), ``notebook``
    (modules among other text), ``torch_xla`` (graphs saved by
    ``XLA_SAVE_TENSORS_FILE``; each module's `provenance` names its graph,
    Python frames and hash), ``stablehlo`` (MLIR text, converted to HLO by
    XLA's converter in jaxlib: JAX must be installed) or ``dump`` (an
    ``--xla_dump_to`` folder: each module's optimized file, or its file before
    optimizations when that is all the folder holds).
    """

    __repr__ = brief_repr

    path: str
    format: str
    modules: list[Module] = field(default_factory=list)
    # Modules that could not be read where the text holds several (each error located);
    # the others are in `modules`.
    damaged: list[HloParseError] = field(default_factory=list)

    @property
    def module(self) -> Module:
        """The first module (most files hold one)."""
        return self.modules[0]


def read(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES,
         strict: bool = False, keep_going: bool = False) -> HloFile:
    """Read every HLO module in the file at `path` (or in the ``--xla_dump_to`` folder).

    Raises `HloSourceError` for a file that is missing, empty, binary, too
    large or holds no module, and `HloParseError` (located) for damaged HLO.
    """
    p = os.fspath(path)
    try:
        if os.path.isdir(p):
            return _read_dump_folder(p, max_bytes, strict, keep_going)
        size = os.path.getsize(p)
        with open(p, "rb") as f:
            head = f.read(_SNIFF)
            data = None
            if not head.strip() and len(head) < size <= max_bytes:
                # White space first (65,536 blank lines before a module): sniff past it.
                data = head + f.read()
                head = data.lstrip()[:_SNIFF]
            _check_bytes(head, p, size, max_bytes)
            if data is None:
                data = head + f.read()
    except HloSourceError:
        raise
    except OSError as e:
        hint = "check the path and its permissions"
        if not os.path.exists(p) and os.path.isfile(p + ".0"):
            hint = (f"torch_xla writes XLA_SAVE_TENSORS_FILE with its device ordinal "
                    f"appended: pass {p}.0")
        elif not os.path.exists(p) and re.fullmatch(r".+\.py:\w+", p):
            hint = ("this command reads HLO text; a function (FILE.py:FUNCTION) goes to "
                    "hloscope inspect, lint, bench or profile")
        raise HloSourceError(f"cannot read the file: {e.strerror or e}", path=p,
                             hint=hint) from None
    return read_text(data.decode("utf-8", errors="replace"), filename=p, strict=strict,
                     keep_going=keep_going)


def _read_dump_folder(path: str, max_bytes: int, strict: bool, keep_going: bool) -> HloFile:
    """The modules of an ``--xla_dump_to`` folder, as the commands read it: each module's
    optimized file, or its file before optimizations when that is all the dump holds."""
    try:
        dumped = read_dump_dir(path)
    except HloSourceError:
        raise HloSourceError("is a folder without XLA dump files "
                             "(module_NNNN.NAME.*_optimizations.txt)", path=path,
                             hint="pass an --xla_dump_to folder, or one of the .txt or "
                                  ".hlo files inside it") from None
    out = HloFile(path, "dump")
    for dm in dumped:
        file = dm.after or dm.before
        if file is None:
            continue  # only XLA's memory figures for this module
        try:
            hf = read(file, max_bytes=max_bytes, strict=strict, keep_going=keep_going)
        except HloParseError as e:
            if strict and not keep_going:
                raise
            out.damaged.append(e)
            continue
        out.modules.extend(hf.modules)
        out.damaged.extend(hf.damaged)
    if not out.modules:
        if out.damaged and not keep_going:
            raise out.damaged[0]
        raise HloSourceError("no HLO module in this dump folder (only XLA's memory files)",
                             path=path, hint="dump with XLA_FLAGS=--xla_dump_to=DIR and pass DIR")
    return out


def _check_bytes(head: bytes, path: str, size: int, max_bytes: int) -> None:
    if size == 0 or not head.strip():
        raise HloSourceError("the file is empty", path=path,
                             hint="write the module into it, e.g. open(p, 'w').write(compiled.as_text())")
    if size > max_bytes:
        raise HloSourceError(
            f"the file is {size / 1024**3:.1f} GiB, over the {max_bytes / 1024**3:.1f} GiB "
            "hloscope reads", path=path,
            hint="split it into one file per module, or pass a larger max_bytes")
    if head[:2] == b"\x1f\x8b":
        raise HloSourceError("the file is gzip-compressed", path=path,
                             hint=f"decompress it first: gunzip -k {path}")
    if b"\x00" in head or _mostly_binary(head):
        raise HloSourceError(
            "the file is binary, not HLO text (a serialized HloModuleProto?)", path=path,
            hint="hloscope reads HLO text: dump it with --xla_dump_to=DIR "
                 "(the .txt files) or print compiled.as_text()")


def _mostly_binary(head: bytes) -> bool:
    """More than a tenth of the first bytes are neither text nor valid UTF-8."""
    sample = head[:8192]
    text = sample.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") + sum(1 for c in text if c < " " and c not in "\n\r\t\f")
    return bad > len(text) // 10


def read_text(text: str, *, filename: str = "<string>", strict: bool = False,
              keep_going: bool = False) -> HloFile:
    """Every HLO module in `text` (plain, Markdown, glog or notebook text).

    `strict` reads each module with XLA's own rules (what ``hloscope check``
    does): anything XLA's parser would refuse raises a located `HloParseError`; with
    `keep_going` too, each module XLA's parser would refuse is in `damaged` instead, and
    the others are read (what ``hloscope check`` of several modules reports).
    """
    with paused_gc():
        return _read_text(text, filename, strict, keep_going)


def _read_text(text: str, filename: str, strict: bool, keep_going: bool = False) -> HloFile:
    if not text or text.isspace():
        raise HloSourceError("the text is empty", path=None if filename == "<string>" else filename)
    if "\x00" in text[:_SNIFF]:
        raise HloSourceError("the text is binary, not HLO", path=filename)
    if "HloModule" not in text and is_stablehlo(text):
        return _read_stablehlo(text, filename, strict, keep_going)
    if "HloModule" not in text and _HEADERLESS_HINT_RE.search(text) is None:
        # Fail fast, before splitting a huge text into lines.
        raise _no_module_error(text, filename)
    if "\r" in text:
        # CRLF is a line break; so is a lone CR in text that has no LF at all (the old
        # Mac convention).  Elsewhere a lone CR is whitespace, as for XLA's lexer.
        text = text.replace("\r\n", "\n")
        if "\n" not in text:
            text = text.replace("\r", "\n")
    original = text.split("\n")
    if original and original[-1] == "":
        original.pop()
    lines, offsets, fmt = original, None, "hlo"
    # Text that starts with its HloModule line is plain HLO: no log prefixes, fences or
    # saved graphs to look for (each would be another scan of the whole text).
    plain = _HEADER_START_RE.match(text) is not None
    hashes = "#" in text
    if not plain and (_GLOG_RE.match(text) or "] HloModule " in text):
        stripped, offs = [], []
        hits = 0
        for ln in original:
            m = _GLOG_RE.match(ln)
            if m:
                hits += 1
                stripped.append(ln[m.end():])
                offs.append(m.end())
            else:
                stripped.append(ln)
                offs.append(0)
        if hits:
            lines, offsets, fmt = stripped, offs, "glog"

    if not plain and " HloModule " in text:
        lines, offsets, fmt = _headers_inside(lines, offsets, fmt)

    ranges: list[tuple[int, int]]
    provenance: list[dict[str, object]] = []
    blocks = graph_blocks(lines) if not plain and hashes and "## BEGIN_GRAPH" in text else []
    fences = _hlo_fences(lines) if not plain and fmt == "hlo" and not blocks and (
        "`" in text and "```" in text or "~" in text and "~~~" in text) else []
    if blocks:
        fmt = "torch_xla"
        ranges = [(b.start, b.stop) for b in blocks]
        provenance = [b.provenance() for b in blocks]
    elif fences:
        fmt = "markdown"
        ranges = fences
    else:
        ranges = [(0, len(lines))]
    if "// -----" in text:
        ranges = _split_input_file(lines, ranges)
    src = LineSource(filename, lines, original, offsets, fmt, hashes=hashes)

    modules: list[Module] = []
    damaged: list[HloParseError] = []
    for r, (lo, hi) in enumerate(ranges):
        if blocks and not any(
                "HloModule" in lines[i] or COMPUTATION_START_RE.match(lines[i])
                for i in range(lo, min(hi, lo + 8))):
            continue  # a graph saved as torch IR text or StableHLO, not HLO
        starts = [(i, False) for i in range(lo, hi) if "HloModule" in lines[i]
                  and _HEADER_START_RE.match(lines[i])]
        first = _first_content(lines, lo, hi)
        if not starts or starts[0][0] != first:
            headerless = _headerless_start(lines, lo, hi if not starts else starts[0][0],
                                           anywhere=fmt == "hlo" and not starts)
            if headerless is not None:
                starts.insert(0, (headerless, True))
        if not starts and _single_instruction(lines, first, hi):
            starts = [(first, None)]  # one instruction alone, as XLA reads it
        if fmt == "hlo" and starts and (starts[0][0] != first):
            fmt = src.format = "notebook"
        done = lo  # where the previous module's text ended
        for k, (s, no_header) in enumerate(starts):
            if s < done:
                continue  # a header line inside the previous module (in a string)
            limit = next((x for x, _ in starts[k + 1 :] if x > s), hi)
            # Building the model creates no garbage; pausing the cyclic collector
            # spares it rescanning hundreds of thousands of new objects.
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                module, done = parse_module_lines(src, s, hi, headerless=bool(no_header),
                                                  limit=limit, strict=strict,
                                                  single=no_header is None)
            except HloParseError as e:
                # One damaged module among several (a truncated paste in an issue, a bad
                # block of a report) does not hide the others; alone, it is the error.
                if (strict and not keep_going) or (len(starts) == 1 and len(ranges) == 1):
                    raise
                damaged.append(e)
                done = limit
                continue
            finally:
                if gc_was_enabled:
                    gc.enable()
            if provenance:
                module.provenance.update(provenance[r])
            modules.append(module)
    if not modules:
        if damaged and not keep_going:
            raise damaged[0]
        if not damaged:
            raise _no_module_error(text, filename)
    for m in modules:
        m.format = src.format
    return HloFile(filename, src.format, modules, damaged)


def _headers_inside(lines: list[str], offsets: list[int] | None, fmt: str
                    ) -> tuple[list[str], list[int] | None, str]:
    """`lines` with the text before an ``HloModule`` header on its line cut off, as a log
    line's prefix is (the offsets kept for located errors), where the next line with text
    starts a computation or the header carries attributes; else as they were."""
    cut: dict[int, int] = {}
    for i, ln in enumerate(lines):
        if "HloModule" not in ln or _HEADER_START_RE.match(ln):
            continue
        m = _HEADER_INSIDE_RE.search(ln)
        if m is None:
            continue
        if "=" not in m.group(1):  # a bare name: HLO must follow
            nxt = next((x for x in lines[i + 1:i + 4] if x.strip()), "")
            if not (COMPUTATION_START_RE.match(nxt) or nxt.lstrip().startswith("ENTRY")):
                continue
        cut[i] = m.start(1)
    if not cut:
        return lines, offsets, fmt
    base = offsets or [0] * len(lines)
    new_lines = [ln[cut[i]:] if i in cut else ln for i, ln in enumerate(lines)]
    new_offsets = [base[i] + cut.get(i, 0) for i in range(len(lines))]
    return new_lines, new_offsets, "glog" if fmt == "glog" else "notebook"


def _split_input_file(lines: list[str], ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges` cut at ``// -----`` lines: the split-input-file format of XLA's
    ``hlo-opt`` and its tests, where each piece is a module of its own (often without an
    ``HloModule`` line)."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        start = lo
        for i in range(lo, hi):
            if lines[i].strip() == "// -----":
                out.append((start, i))
                start = i + 1
        out.append((start, hi))
    return [(lo, hi) for lo, hi in out if any(ln.strip() for ln in lines[lo:hi])]


def _read_stablehlo(text: str, filename: str, strict: bool, keep_going: bool) -> HloFile:
    """A StableHLO module, read as the HLO text XLA converts it to (its lines are those of
    the converted text, not of the file)."""
    hf = _read_text(stablehlo_to_hlo_text(text, filename=filename), filename, strict,
                    keep_going)
    hf.format = "stablehlo"
    for m in hf.modules:
        m.format = "stablehlo"
    return hf


def _first_content(lines: list[str], lo: int, hi: int | None = None) -> int:
    """The first line in lines[lo:hi] that holds something other than space or comments."""
    for i in range(lo, len(lines) if hi is None else hi):
        if lines[i].strip() and not _COMMENT_LINE_RE.match(lines[i]):
            return i
    return lo


def _single_instruction(lines: list[str], first: int, hi: int) -> bool:
    """Whether lines[first:hi] hold one instruction and nothing else (a line pasted from a
    module: XLA's parser reads it alone, its operands becoming parameters)."""
    if first >= hi or not _INSTRUCTION_LIKE_RE.match(lines[first]):
        return False
    rest = [ln for ln in lines[first + 1 : hi] if ln.strip()]
    return len(rest) <= 3 and all(ln.startswith((" ", "\t")) and "=" not in ln.split("(")[0]
                                  for ln in rest)


def _headerless_start(lines: list[str], lo: int, hi: int, *, anywhere: bool) -> int | None:
    """Where HLO written without an ``HloModule`` line starts in lines[lo:hi]: a line
    that opens a computation (``ENTRY main {``, ``%f (p: f32[]) -> f32[] {``)
    followed by an instruction.  Only the first content line is considered unless
    `anywhere` (a whole file of prose around one fragment)."""
    first = _first_content(lines, lo, hi)
    if first >= hi:
        return None  # nothing there (a fence opened on the last line)
    candidates = range(first, hi) if anywhere else (first,)
    for i in candidates:
        line = lines[i]
        if not COMPUTATION_START_RE.match(line):
            continue
        if line.rstrip().endswith("}"):
            return i  # a whole computation on one line
        nxt = _first_content(lines, i + 1, hi)
        if i < nxt < hi and _INSTRUCTION_LIKE_RE.match(lines[nxt]):
            return i
        if "{" not in line and i < nxt < hi and lines[nxt].lstrip().startswith("("):
            return i  # ENTRY %main then its signature on the next line
    return None


def _hlo_fences(lines: list[str]) -> list[tuple[int, int]]:
    """(first, end) line ranges inside Markdown fences that hold HLO."""
    out: list[tuple[int, int]] = []
    i = 0
    n = len(lines)
    while i < n:
        m = _FENCE_RE.match(lines[i])
        if m is None:
            i += 1
            continue
        marker, lang = m.group(1), m.group(2).lower()
        j = i + 1
        while j < n and not lines[j].strip().startswith(marker[:3]):
            j += 1
        body = (i + 1, j)
        first = _first_content(lines, i + 1, j)
        if lang == "hlo" or (first < j and (lines[first].lstrip().startswith("HloModule")
                                            or _headerless_start(lines, i + 1, j,
                                                                 anywhere=False) is not None
                                            or _single_instruction(lines, first, j))):
            out.append(body)
        i = j + 1
    return out


def _no_module_error(text: str, filename: str) -> HloSourceError:
    return HloSourceError("no HLO module found (no 'HloModule' line, and no computation such "
                          "as 'ENTRY main {')",
                          path=None if filename == "<string>" else filename,
                          hint=_no_module_hint(text, filename))


# An instruction line: ``name = f32[2]{0} opcode(``.
_INSTRUCTION_LINE = re.compile(
    r"^[ \t]*(?:ROOT[ \t]+)?%?[\w.-]+[ \t]*=[ \t]*\(?[a-z]\w*\[[^\n=]*?[ \t][a-z][\w-]*\(", re.M)


def _no_module_hint(text: str, filename: str = "<string>") -> str:
    head = text[:_SNIFF]
    if filename.endswith(".py") or re.search(r"^(import|from) \w+|^def \w+\(", head, re.M):
        where = filename if filename.endswith(".py") else "FILE.py"
        return (f"this is Python, not HLO: name a function in it, as {where}:FUNCTION, to "
                "hloscope inspect, lint, bench or profile (they compile it and read its HLO)")
    if "## BEGIN_GRAPH" in head or ("IR {" in head and ("aten::" in head or "xla::" in head)):
        return TORCH_IR_HINT
    if re.search(r"^[ \t]*(?:hlo_module[ \t]*\{|computations[ \t]*\{|"
                 r"entry_computation_name:)", head, re.M):
        return ("this is an HloModuleProto in protobuf text format (hlo_module { ... }), not "
                "HLO text: print the text with compiled.as_text(), or convert it with "
                "XLA's tools (hlo-opt, or HloModule::ToString on the proto)")
    if "module @" in head or "func.func" in head or "stablehlo." in head:
        return ("this looks like StableHLO/MLIR, not HLO text: print HLO with "
                "jax.jit(f).lower(x).as_text(dialect='hlo') or compile(...).as_text()")
    if "{ lambda" in head:
        return "this looks like a jaxpr: print HLO with jax.jit(f).lower(x).compile().as_text()"
    if "BufferAssignment:" in head or "HloLiveRange" in head:
        return "this is an XLA buffer-assignment dump: read it with 'hloscope memory'"
    if len(_INSTRUCTION_LINE.findall(head)) >= 2:
        return ("these are HLO instructions without the computation around them (an "
                "excerpt, as pasted in an issue): hloscope reads whole modules, which "
                "compiled.as_text() prints and XLA_FLAGS=--xla_dump_to=DIR writes")
    return ("hloscope reads HLO text as printed by compiled.as_text() or written by "
            "XLA_FLAGS=--xla_dump_to=DIR")


def parse(text: str, *, filename: str = "<string>") -> Module:
    """Parse HLO text holding one module and return it.

    For text with several modules use `read_text`.
    """
    f = read_text(text, filename=filename)
    if len(f.modules) > 1:
        raise HloSourceError(
            f"the text holds {len(f.modules)} modules, parse() takes one",
            hint="use hloscope.read_text(text).modules")
    return f.module


def check(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES,
          keep_going: bool = False) -> HloFile:
    """Read the file at `path` with XLA's own rules, as ``hloscope check`` does.

    Returns the modules when XLA's parser would accept every one of them;
    raises a located `HloParseError` naming the first problem XLA's parser
    would name, on the line it would name.  (The other readers are tolerant:
    they read text newer XLA versions print and keep what they do not know.)
    With `keep_going`, a file of several modules is checked module by module: the
    problem of each module XLA's parser would refuse is in the result's `damaged`.
    """
    try:
        return read(path, max_bytes=max_bytes, strict=True, keep_going=keep_going)
    except HloSourceError as e:
        if os.path.isfile(os.fspath(path)):
            raise _located(e, os.fspath(path)) from None
        raise


def check_text(text: str, *, filename: str = "<string>") -> HloFile:
    """`check` for text held in memory."""
    try:
        return read_text(text, filename=filename, strict=True)
    except HloSourceError as e:
        raise _located(e, filename, text) from None


def _located(e: HloSourceError, filename: str, text: str | None = None) -> HloParseError:
    """A source error (empty, binary, no module) as XLA reports it: at line 1."""
    first = ""
    if text is None:
        try:
            with open(filename, "rb") as f:
                first = f.read(4096).decode("utf-8", "replace").split("\n", 1)[0]
        except OSError:
            pass
    else:
        first = text.split("\n", 1)[0]
    reason = e.message[len(filename) + 2 :] if e.message.startswith(filename + ": ") \
        else e.message
    return HloParseError(reason, filename=filename, line=1, column=1, line_text=first,
                         hint=e.hint)
