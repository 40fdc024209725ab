"""The HLO text parser.

Reads what ``HloModule::ToString`` prints, in both styles (with and without
``%`` sigils, with and without operand shapes), from lines that a source
reader has already cut out of a file (see `hloscope._sources`).

Speed comes from doing per line only what a model needs: one compiled regular
expression takes an instruction line apart (name, shape, opcode, operands,
attribute text); shapes are interned, so each distinct shape text is parsed
once; attributes stay raw text until asked for.  Lines the fast expression
does not cover (nested parentheses in operands, unusual spacing) go through a
careful character-level path that also produces the located errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._errors import HloParseError
from ._attrs import AttributeSyntaxError, check_balanced, split_top_level
from ._module import Computation, Instruction, Module, StackFrameIndex
from ._shape import Shape, ShapeSyntaxError, _shape_cache, parse_shape, split_shape_prefix

__all__ = ["LineSource", "parse_module_lines", "HEADER_RE"]

HEADER_RE = re.compile(r"\s*HloModule\s+([^\s,]+)\s*(?:,\s*(.*?))?\s*$")
_INST_RE = re.compile(
    r"\s+(ROOT\s+)?%?([\w.\-]+) = "
    r"([a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?|\((?:[^()]|\([^()]*\))*\)) "
    r"([a-z][a-z0-9\-]*)\(([^()]*)\)(?:, (.*))?$"
)
_COMP_RE = re.compile(r"(ENTRY\s+)?%?([^\s(){}=,]+)\s*(\(.*\)\s*->\s*.+?)?\s*\{\s*$")
_CLOSE_RE = re.compile(r"\s*\}\s*(?:,\s*(.*?))?\s*$")
_SIGIL_OPERAND_RE = re.compile(r"%([\w.\-]+)")
_NAME_RE = re.compile(r"[\w.\-]+$")
_TABLE_NAMES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_TABLE_STRING_RE = re.compile(r'\s*(\d+)\s+"((?:[^"\\]|\\.)*)"\s*$')
_TABLE_LOC_RE = re.compile(
    r"\s*(\d+)\s*\{file_name_id=(\d+)\s+function_name_id=(\d+)\s+line=(\d+)"
    r"(?:\s+end_line=(\d+))?(?:\s+column=(\d+))?(?:\s+end_column=(\d+))?\s*\}\s*$")
_TABLE_FRAME_RE = re.compile(r"\s*(\d+)\s*\{file_location_id=(\d+)\s+parent_frame_id=(\d+)\s*\}\s*$")
_OPCODE_RE = re.compile(r"[a-z][a-z0-9\-]*")
_HINT_REEXPORT = ("re-export the module from XLA (for example print(jax.jit(f).lower(x)"
                  ".compile().as_text()) into a file) and read that file")


@dataclass
class LineSource:
    """Lines of a file made ready for the parser, aligned 1:1 with the file's lines.

    `lines[i]` is line ``i + 1`` of the file after the reader removed any log
    prefix (of `col_offsets[i]` characters) or Markdown fence; `original`
    holds the lines as they were, for error messages.
    """

    filename: str
    lines: list[str]
    original: list[str]
    col_offsets: list[int] | None = None
    format: str = "hlo"

    def error(self, message: str, index: int, column: int, *, hint: str = "",
              partial: Module | None = None) -> HloParseError:
        """An error at 0-based line `index`, 0-based `column` of the cleaned line."""
        if index >= len(self.original):
            index = len(self.original) - 1
            column = len(self.lines[index]) if index >= 0 else 0
        off = self.col_offsets[index] if self.col_offsets else 0
        text = self.original[index] if index >= 0 else ""
        return HloParseError(message, filename=self.filename, line=index + 1,
                             column=off + column + 1, line_text=text, hint=hint,
                             partial=partial)


class _LineError(Exception):
    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column


def parse_module_lines(src: LineSource, start: int, stop: int) -> tuple[Module, int]:
    """Parse the module whose ``HloModule`` header is `src.lines[start]`.

    Reads until the module ends (the next ``HloModule``, `stop`, or a line that
    is not HLO after the entry computation) and returns the module and the
    index of the first line after it.
    """
    lines = src.lines
    m = HEADER_RE.match(lines[start])
    if m is None:
        raise src.error("expected 'HloModule NAME'", start, 0)
    name, header_attrs = m.group(1), m.group(2) or ""
    if header_attrs:
        try:
            check_balanced(header_attrs)
        except AttributeSyntaxError as e:
            raise src.error(f"bad module header: {e}", start,
                            lines[start].find(header_attrs) + e.offset, hint=_HINT_REEXPORT) from None

    computations: list[Computation] = []
    comp_names: set[str] = set()
    frames = StackFrameIndex()
    seen_entry = False

    def partial() -> Module | None:
        if not computations:
            return None
        return _make_module(name, header_attrs, computations, frames, src, start)

    i = start + 1
    while i < stop:
        line = lines[i]
        if not line or line.isspace():
            i += 1
            continue
        stripped = line.strip()
        if stripped in _TABLE_NAMES:
            if computations:
                raise src.error(f"'{stripped}' table after the first computation", i,
                                line.find(stripped), partial=partial())
            frames, i = _parse_tables(src, i, stop)
            continue
        cm = _COMP_RE.match(line) if stripped.endswith("{") else None
        if cm is None or " = " in line.split("(", 1)[0]:
            if HEADER_RE.match(line):
                break  # the next module
            if computations and seen_entry:
                break  # the module ended; what follows is not HLO (e.g. notebook text)
            if not computations:
                raise src.error("expected a computation such as 'ENTRY %main (...) -> ... {'",
                                i, len(line) - len(line.lstrip()), hint=_HINT_REEXPORT)
            raise src.error(
                "the module ends before its ENTRY computation: this line is not HLO",
                i, len(line) - len(line.lstrip()), hint=_HINT_REEXPORT, partial=partial())
        try:
            comp, i = _parse_computation(src, i, stop, cm, partial)
        except HloParseError as e:
            e.module_name = name
            if e.partial is None:
                e.partial = partial()
            raise
        if comp.name in comp_names:
            raise src.error(f"computation {comp.name!r} is defined twice", comp.line - 1, 0,
                            partial=partial())
        if comp.is_entry:
            if seen_entry:
                raise src.error("a module has only one ENTRY computation", comp.line - 1, 0,
                                partial=partial())
            seen_entry = True
        computations.append(comp)
        comp_names.add(comp.name)
    if not computations:
        raise src.error(f"module {name!r} has no computation", start, 0, hint=_HINT_REEXPORT)
    module = _make_module(name, header_attrs, computations, frames, src, start)
    _check_calls(module, src)
    return module, i


def _make_module(name: str, attrs: str, comps: list[Computation], frames: StackFrameIndex,
                 src: LineSource, start: int) -> Module:
    return Module(name, attrs, list(comps), frames, filename=src.filename,
                  first_line=start + 1, format=src.format)


_CALL_KEY_RE = re.compile(
    r"(?:^|, )(?:calls|to_apply|condition|body|select|scatter|comparator|true_computation|"
    r"false_computation)=%?([\w.\-]+)|(?:^|, )(?:branch_computations|called_computations)="
    r"\{([^}]*)\}")
# Opcodes that never call a computation (the check skips them).
_NEVER_CALLS = frozenset("""
parameter constant add subtract multiply divide maximum minimum power remainder and or xor not
negate abs exponential exponential-minus-one log log-plus-one sqrt rsqrt cbrt sine cosine tan
tanh logistic floor ceil round-nearest-afz round-nearest-even sign compare select clamp convert
bitcast bitcast-convert broadcast reshape transpose copy slice dynamic-slice dynamic-update-slice
concatenate pad reverse iota dot convolution get-tuple-element tuple gather all-gather
all-to-all collective-permute collective-permute-start collective-permute-done all-gather-start
all-gather-done copy-start copy-done partition-id replica-id after-all add-dependency
optimization-barrier real imag complex is-finite atan2 shift-left shift-right-arithmetic
shift-right-logical popcnt count-leading-zeros erf fft rng rng-bit-generator
reduce-precision send recv send-done recv-done infeed outfeed get-dimension-size
set-dimension-size domain
""".split())
_CALL_HINT_RE = re.compile(
    r"(?:calls|to_apply|condition|body|select|scatter|comparator|computation|computations)=")
_QUOTED_RE = re.compile(r'"(?:[^"\\]|\\.)*"')


def _check_calls(module: Module, src: LineSource) -> None:
    """Every computation an instruction calls must exist."""
    names = {c.name for c in module.computations}
    find = _CALL_KEY_RE.findall
    hint = _CALL_HINT_RE.search
    for comp in module.computations:
        for inst in comp.instructions:
            text = inst.attr_text
            if not text or inst.opcode in _NEVER_CALLS or hint(text) is None:
                continue
            if '"' in text:
                text = _QUOTED_RE.sub('""', text)
            called: list[str] = []
            for one, many in find(text):
                if one:
                    called.append(one)
                else:
                    called.extend(x.strip().lstrip("%") for x in many.split(",") if x.strip())
            for n in called:
                if n not in names:
                    line = src.lines[inst.line - 1]
                    col = max(line.find(n), 0)
                    raise src.error(f"instruction {inst.name!r} calls computation {n!r}, "
                                    "which the module does not define", inst.line - 1, col,
                                    hint="the module text may be incomplete; re-export it whole")


def _parse_tables(src: LineSource, i: int, stop: int) -> tuple[StackFrameIndex, int]:
    lines = src.lines
    tables: dict[str, list] = {k: [] for k in _TABLE_NAMES}
    current = ""
    while i < stop:
        line = lines[i]
        s = line.strip()
        if not s:
            i += 1
            continue
        if s in _TABLE_NAMES:
            current = s
            i += 1
            continue
        if current in ("FileNames", "FunctionNames"):
            m = _TABLE_STRING_RE.match(line)
            if m:
                from ._attrs import unescape
                tables[current].append(unescape(m.group(2)))
                i += 1
                continue
        elif current == "FileLocations":
            m = _TABLE_LOC_RE.match(line)
            if m:
                tables[current].append(tuple(int(x or 0) for x in m.groups()[1:]))
                i += 1
                continue
        elif current == "StackFrames":
            m = _TABLE_FRAME_RE.match(line)
            if m:
                tables[current].append((int(m.group(2)), int(m.group(3))))
                i += 1
                continue
        if s[0].isdigit():
            raise src.error(f"bad row in the {current} table", i, len(line) - len(line.lstrip()))
        break
    return StackFrameIndex(tuple(tables["FileNames"]), tuple(tables["FunctionNames"]),
                           tuple(tables["FileLocations"]), tuple(tables["StackFrames"])), i


def _parse_computation(src: LineSource, i: int, stop: int, cm: re.Match[str],
                       partial) -> tuple[Computation, int]:  # type: ignore[no-untyped-def]
    header_index = i
    comp_name = cm.group(2)
    insts: list[Instruction] = []
    by_name: dict[str, Instruction] = {}
    comp = Computation(comp_name, insts, cm.group(1) is not None,
                       (cm.group(3) or "").strip(), "", header_index + 1, by_name)
    forward: list[Instruction] = []  # instructions that use a name defined later
    try:
        return _parse_body(src, i, stop, comp, insts, by_name, forward, partial, header_index)
    except HloParseError as e:
        e.in_progress = (comp_name, len(insts))
        raise


def _parse_body(src: LineSource, i: int, stop: int, comp: Computation,  # type: ignore[no-untyped-def]
                insts: list[Instruction], by_name: dict[str, Instruction],
                forward: list[Instruction], partial, header_index: int) -> tuple[Computation, int]:
    lines = src.lines
    comp_name = comp.name
    match = _INST_RE.match
    shape_cache = _shape_cache
    sigil_findall = _SIGIL_OPERAND_RE.findall
    defined = by_name.__contains__
    append = insts.append
    i += 1
    while i < stop:
        line = lines[i]
        m = match(line)
        if m is not None:
            root, name, shape_text, opcode, operand_text, attr_text = m.groups()
            shape = shape_cache.get(shape_text)
            if shape is None:
                try:
                    shape = parse_shape(shape_text)
                except ShapeSyntaxError as e:
                    raise src.error(f"bad shape: {e}", i, m.start(3) + e.offset,
                                    partial=partial()) from None
            if "%" in operand_text and opcode != "constant":
                operands: tuple[str, ...] = tuple(sigil_findall(operand_text))
                literal = None
                pnum = -1
            else:
                try:
                    operands, literal, pnum = _decode_operands(opcode, operand_text)
                except _LineError as e:
                    raise src.error(str(e), i, m.start(5) + e.column,
                                    partial=partial()) from None
            if attr_text is None:
                attr_text = ""
            elif attr_text.count("{") != attr_text.count("}") or attr_text.count('"') & 1:
                try:
                    check_balanced(attr_text)
                except AttributeSyntaxError as e:
                    raise _cut_off(src, i, m.start(6) + e.offset, str(e), partial) from None
            inst = Instruction(name, shape, opcode, operands, attr_text, root is not None,
                               i + 1, literal, pnum, comp)
        else:
            if not line or line.isspace():
                i += 1
                continue
            cl = _CLOSE_RE.match(line)
            if cl is not None:
                comp.attr_text = cl.group(1) or ""
                break
            try:
                inst = _parse_instruction_slow(line, i + 1)
            except _LineError as e:
                raise _line_error(src, i, e, insts, comp_name, header_index, partial) from None
            inst.computation = comp
            name = inst.name
            operands = inst.operand_names
        if name in by_name:
            raise src.error(f"instruction {name!r} is defined twice in computation "
                            f"{comp_name!r}", i, max(line.find(name), 0), partial=partial())
        if operands and not all(map(defined, operands)):
            forward.append(inst)
        by_name[name] = inst
        append(inst)
        i += 1
    else:
        raise _ended_inside(src, i, insts, comp_name, header_index, partial)
    if not insts:
        raise src.error(f"computation {comp_name!r} has no instructions", i, 0,
                        partial=partial())
    for inst in forward:
        for op in inst.operand_names:
            if op not in by_name:
                line = lines[inst.line - 1]
                raise src.error(
                    f"instruction {inst.name!r} uses {op!r}, which computation "
                    f"{comp_name!r} does not define", inst.line - 1, _find_operand(line, op),
                    hint="check for a typo, or that the module text is complete",
                    partial=partial())
    roots = [x for x in insts if x.is_root]
    if len(roots) > 1:
        r = roots[1]
        raise src.error(f"computation {comp_name!r} has more than one ROOT", r.line - 1,
                        max(lines[r.line - 1].find("ROOT"), 0), partial=partial())
    return comp, i + 1


def _find_operand(line: str, name: str) -> int:
    paren = line.find("(", line.find("="))
    for pat in ("%" + name, name):
        j = line.find(pat, paren if paren >= 0 else 0)
        if j >= 0:
            return j
    return 0


def _cut_off(src: LineSource, i: int, col: int, why: str, partial) -> HloParseError:  # type: ignore[no-untyped-def]
    is_last = i + 1 >= len(src.lines) or not src.lines[i + 1].strip().startswith(
        ("%", "ROOT", "}")) and _INST_RE.match(src.lines[i + 1]) is None
    if is_last and "never closed" in why:
        return src.error(f"the instruction is cut off here: {why}", i, len(src.lines[i].rstrip()),
                         hint=_HINT_REEXPORT, partial=partial())
    return src.error(f"bad attributes: {why}", i, col, partial=partial())


def _ended_inside(src: LineSource, i: int, insts: list[Instruction], comp_name: str,
                  header_index: int, partial) -> HloParseError:  # type: ignore[no-untyped-def]
    last = insts[-1].line - 1 if insts else header_index
    return src.error(
        f"the text ends inside computation {comp_name!r} (opened at line "
        f"{header_index + 1}): its closing '}}' is missing", last,
        len(src.lines[last].rstrip()), hint=_HINT_REEXPORT, partial=partial())


def _line_error(src: LineSource, i: int, e: _LineError, insts: list[Instruction],
                comp_name: str, header_index: int, partial) -> HloParseError:  # type: ignore[no-untyped-def]
    # A line that is not HLO right after an instruction whose brackets do not
    # close: the module was cut off in that instruction.
    if insts:
        prev = insts[-1]
        if prev.line - 1 < i:
            try:
                check_balanced(prev.attr_text)
            except AttributeSyntaxError as err:
                j = prev.line - 1
                return src.error(
                    f"the module is cut off inside instruction {prev.name!r}: {err}", j,
                    len(src.lines[j].rstrip()), hint=_HINT_REEXPORT, partial=partial())
    between = any(not src.lines[k].strip() for k in range(insts[-1].line if insts else i, i))
    if between or not src.lines[i].startswith((" ", "\t")):
        return src.error(
            f"expected an instruction or the '}}' that closes computation {comp_name!r} "
            f"(opened at line {header_index + 1}); the module text seems to stop here",
            i, e.column, hint=_HINT_REEXPORT, partial=partial())
    return src.error(str(e), i, e.column, partial=partial())


def _decode_operands(opcode: str, text: str) -> tuple[tuple[str, ...], str | None, int]:
    """(operand names, constant literal, parameter number) from the text in parentheses."""
    if opcode == "parameter":
        try:
            return (), None, int(text)
        except ValueError:
            raise _LineError("parameter(N) needs a parameter number", 0) from None
    if opcode == "constant":
        return (), text, -1
    if "%" in text:
        return tuple(_SIGIL_OPERAND_RE.findall(text)), None, -1
    if text.strip():
        return _plain_operands(text), None, -1
    return (), None, -1


def _plain_operands(text: str) -> tuple[str, ...]:
    """Operand names from a list without sigils, e.g. ``a, b`` or ``f32[2,2]{1,0} a, s32[] b``."""
    if "/*" in text:
        text = re.sub(r"/\*.*?\*/", "", text)
    out = []
    for piece, start in split_top_level(text):
        piece = piece.strip()
        if not piece:
            raise _LineError("empty operand", start)
        name = piece.rsplit(None, 1)[-1]
        if not _NAME_RE.match(name):
            raise _LineError(f"expected an operand name, found {name!r}", start)
        out.append(name)
    return tuple(out)


def _match_paren(line: str, pos: int) -> int:
    """Index of the ')' closing the '(' at `pos`, skipping quoted strings."""
    depth = 0
    j = pos
    n = len(line)
    while j < n:
        c = line[j]
        if c == '"':
            j += 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise _LineError("'(' is never closed", pos)


def _parse_instruction_slow(line: str, line_no: int) -> Instruction:
    pos = len(line) - len(line.lstrip())
    is_root = False
    if line.startswith("ROOT", pos) and line[pos + 4 : pos + 5].isspace():
        is_root = True
        pos = len(line) - len(line[pos + 4 :].lstrip())
    m = re.compile(r"%?([^\s=(){},]+)\s*=\s*").match(line, pos)
    if m is None:
        raise _LineError("expected an instruction 'name = shape opcode(operands)'", pos)
    name = m.group(1)
    pos = m.end()
    try:
        shape, pos = split_shape_prefix(line, pos)
    except ShapeSyntaxError as e:
        raise _LineError(f"bad shape: {e}", e.offset) from None
    shape = _intern(line, m.end(), pos, shape)
    while pos < len(line) and line[pos].isspace():
        pos += 1
    om = _OPCODE_RE.match(line, pos)
    if om is None:
        raise _LineError("expected an opcode after the shape", pos)
    opcode = om.group()
    pos = om.end()
    if not line.startswith("(", pos):
        raise _LineError(f"expected '(' after opcode {opcode!r}", pos)
    close = _match_paren(line, pos)
    operand_text = line[pos + 1 : close]
    rest = line[close + 1 :].strip()
    if rest and not rest.startswith(","):
        raise _LineError("expected ',' before the attributes", close + 1)
    attr_text = rest[1:].strip() if rest else ""
    if attr_text:
        try:
            check_balanced(attr_text)
        except AttributeSyntaxError as e:
            raise _LineError(f"bad attributes: {e}", line.find(attr_text) + e.offset) from None
    try:
        operands, literal, pnum = _decode_operands(opcode, operand_text)
    except _LineError as e:
        raise _LineError(str(e), pos + 1 + e.column) from None
    return Instruction(name, shape, opcode, operands, attr_text, is_root, line_no, literal, pnum)


def _intern(line: str, start: int, end: int, shape: Shape) -> Shape:
    text = line[start:end].strip()
    cached = _shape_cache.get(text)
    if cached is not None:
        return cached
    try:
        return parse_shape(text)
    except ShapeSyntaxError:
        return shape
