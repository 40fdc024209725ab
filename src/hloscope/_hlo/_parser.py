"""The HLO text parser: one module, from lines a source reader prepared.

Reads what ``HloModule::ToString`` prints, in every style XLA has printed
(with and without ``%`` sigils and operand shapes, old and new), and what
people make of it: comments, statements continued over several lines,
indented or run-on text, modules without an ``HloModule`` line, nested
instructions, computations written inline, shapes left out, the async
shorthand.

Speed comes from doing per line only what a model needs.  A canonical line
(one instruction, as XLA prints it) is taken apart by one compiled regular
expression; shapes are interned; attributes stay raw text until asked for.
Every other statement is read token by token by `hloscope._hlo._syntax`,
which also makes the located errors.  In strict mode (``hloscope check``)
every statement goes through the token grammar and XLA's per-opcode checks.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import NoReturn

from .._errors import HloParseError
from ._attrs import AttributeSyntaxError, check_balanced, split_top_level, unescape
from ._lexer import Tok, line_starts, position
from ._module import Instruction, Module, StackFrameIndex
from ._names import NameUniquer
from ._validate import FIXED_ARITY, arity_problem, tuple_element_problem, validate
from ._opcodes import OPCODE_ARITY, split_async_sugar
from ._shape import ShapeSyntaxError, _shape_cache, parse_shape
from ._syntax import (
    Body,
    Grammar,
    GrammarError,
    Scope,
    _UndefinedOperand,
    finish_body,
    stack_frame_tables,
)
from ._numbers import is_ascii_digits

__all__ = ["LineSource", "parse_module_lines", "split_header", "COMPUTATION_START_RE"]

_HEADER_NAME_RE = re.compile(r"\s*HloModule\s+([^\s,]+)")
_INST_RE = re.compile(
    r"\s*(ROOT\s+)?%?([\w.\-]+) = "
    r"([a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?|\((?:[^()]|\([^()]*\))*\)) "
    r"([a-z][a-z0-9\-]*)\(([^()]*)\)(?:, (.*))?$"
)
_COMP_RE = re.compile(r"(ENTRY\s+)?%?([^\s(){}=,]+)\s*(\(.*\)\s*->\s*.+?)?\s*\{\s*$")
# A line that opens a computation (used to find modules written without a header).
COMPUTATION_START_RE = re.compile(
    r"\s*(?:ENTRY\b|%?[^\W\d][\w.\-]*\s*(?:\([^=]*\)\s*->\s*[^=]*)?\{\s*(?:$|//|/\*))")
_SIGIL_OPERAND_RE = re.compile(r"%([\w.\-]+)")
_NAME_RE = re.compile(r"[\w.\-]+$")
_TABLE_NAMES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_TABLE_STRING_RE = re.compile(r'\s*([0-9]+)\s+"((?:[^"\\]|\\.)*)"\s*$')
_TABLE_LOC_RE = re.compile(
    r"\s*([0-9]+)\s*\{file_name_id=([0-9]+)\s+function_name_id=([0-9]+)\s+line=([0-9]+)"
    r"(?:\s+end_line=([0-9]+))?(?:\s+column=([0-9]+))?(?:\s+end_column=([0-9]+))?\s*\}\s*$")
_TABLE_FRAME_RE = re.compile(
    r"\s*([0-9]+)\s*\{file_location_id=([0-9]+)\s+parent_frame_id=([0-9]+)\s*\}\s*$")
_ASYNC_TAIL = frozenset({"async-start", "async-update", "async-done"})
_INDEX = r"\{\s*(?:[0-9]+\s*(?:,\s*[0-9]+\s*)*)?\}"
_ALIAS_ENTRY = (_INDEX + r"\s*:\s*\(\s*[0-9]+\s*,\s*" + _INDEX
                + r"\s*(?:,\s*(?:may-alias|must-alias)\s*)?\)")
_ALIAS_VALUE_RE = re.compile(r"\{\s*(?:" + _ALIAS_ENTRY + r"(?:\s*,\s*" + _ALIAS_ENTRY
                             + r")*)?\s*\}")
_DONOR_ENTRY = r"\(\s*[0-9]+\s*,\s*" + _INDEX + r"\s*\)"
_DONOR_VALUE_RE = re.compile(r"\{\s*(?:" + _DONOR_ENTRY + r"(?:\s*,\s*" + _DONOR_ENTRY
                             + r")*)?\s*\}")
_INDEX_COMMENT_RE = re.compile(r"/\*index=[0-9]+\*/")
_HINT_REEXPORT = ("re-export the module from XLA (for example print(jax.jit(f).lower(x)"
                  ".compile().as_text()) into a file) and read that file")
_MAX_INT_DIGITS = 19


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
    # What the whole text holds at all, so that lines need not be searched for it one
    # by one: '//' or '/*' comments, '#' (compact tuple elements).
    slashes: bool = True
    hashes: bool = True

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


def parse_module_lines(src: LineSource, start: int, stop: int, *, strict: bool = False,
                       headerless: bool = False, limit: int | None = None,
                       single: bool = False) -> tuple[Module, int]:
    """Parse the module that starts at `src.lines[start]`.

    The module starts with its ``HloModule`` header, or, when `headerless`,
    with its first computation.  Reads until the module ends (the next
    ``HloModule``, `stop`, or text that is not HLO after the entry
    computation) and returns the module and the index of the first line after
    it.  `strict` reads every statement with XLA's rules (``hloscope check``).
    `limit`, when known, is the next line that looks like a module header.
    `single` reads one instruction alone, as XLA's parser does for text that is
    neither a module nor a computation: its operands (which must carry their
    shapes) become the parameters of a module named after it.
    """
    reader = _ModuleReader(src, start, stop, strict, limit)
    return reader.read_single() if single else reader.read(headerless)


class _ModuleReader:
    """The state of one module's parse: where we are, what has been read."""

    def __init__(self, src: LineSource, start: int, stop: int, strict: bool,
                 limit: int | None = None) -> None:
        self.src = src
        self.lines = src.lines
        self.start = start
        self.stop = stop
        self.strict = strict
        self.scope = Scope()
        self.name = ""
        self.attr_text = ""
        self.frames = StackFrameIndex()
        self.seen_entry = False
        self.headerless = False
        self.forward: set[str] = set()  # computations naming an operand before its definition
        self.checked: set[str] = set()  # computations whose instructions were checked as read
        self._g: Grammar | None = None
        self._starts: list[int] = []
        # One string object per distinct short attribute text (``index=0``, ``kind=kLoop,
        # calls=%f``: they repeat across a module), for this parse only.
        self._texts: dict[str, str] = {}
        # The token grammar sees the text up to the next line that looks like a module
        # header; a statement that runs past it (a header inside a string) widens it.
        self.limit = limit if limit is not None else self._next_header(start + 1)

    def _next_header(self, i: int) -> int:
        lines = self.lines
        for k in range(i, self.stop):
            line = lines[k]
            if "HloModule" in line and line.lstrip().startswith("HloModule"):
                return k
        return self.stop

    # -- the text, for the token grammar ------------------------------------------------
    def grammar(self) -> Grammar:
        g = self._g
        if g is None:
            text = "\n".join(self.lines[self.start : self.limit])
            self._starts = line_starts(text)
            checker = None
            if self.strict:
                from ._check import Checker

                checker = Checker()
            g = self._g = Grammar(text, self.scope, strict=self.strict, checker=checker,
                                  line_of=self.line_of)
        return g

    def widen(self) -> bool:
        """Let the token grammar see the rest of the text; False when it already does."""
        if self.limit >= self.stop:
            return False
        self.limit = self.stop
        g = self.grammar()
        text = "\n".join(self.lines[self.start : self.stop])
        self._starts = line_starts(text)
        g.text = text
        g.lx.text = text
        g.lx.stop = len(text)
        return True

    def offset(self, i: int) -> int:
        """Where line `i` starts in the grammar's text (its end for a line past it)."""
        g = self.grammar()
        k = i - self.start
        return self._starts[k] if k < len(self._starts) else len(g.text)

    def locate(self, offset: int) -> tuple[int, int]:
        line, col = position(self._starts, offset)
        return self.start + line, col

    def line_of(self, offset: int) -> int:
        return self.start + position(self._starts, offset)[0] + 1

    # -- errors ----------------------------------------------------------------------------
    def partial(self) -> Module | None:
        comps = [c for c in self.scope.computations if not c.origin]
        if not comps:
            return None
        return self._module()

    def error(self, message: str, i: int, col: int, hint: str = "") -> HloParseError:
        e = self.src.error(message, i, col, hint=hint, partial=self.partial())
        e.module_name = self.name or None
        body = self.scope.stack[0] if self.scope.stack else None
        if body is not None:
            e.in_progress = (body.name, len(body.instructions))
        return e

    def grammar_error(self, e: GrammarError, stmt_start: int | None = None) -> HloParseError:
        if isinstance(e, _UndefinedOperand):
            line = self.lines[e.inst.line - 1]
            return self.error(str(e), e.inst.line - 1, _find_operand(line, e.operand), e.hint)
        i, col = self.locate(e.offset)
        if stmt_start is not None:
            cut = self._cut_off(stmt_start, i, "never closed" in str(e))
            if cut is not None:
                return cut
        return self.error(str(e), i, col, e.hint)

    def _cut_off(self, stmt_start: int, err_line: int, never_closed: bool) -> HloParseError | None:
        """A statement whose brackets never close, followed by a blank line or the end
        of the text: the text was cut off inside it (a truncated paste or dump)."""
        first, _ = self.locate(stmt_start)
        last = first
        k = first + 1
        while k < self.stop and self.lines[k].strip():
            last = k
            k += 1
        if not (never_closed or err_line >= last):
            return None
        text = " ".join(self.lines[first : last + 1])
        try:
            check_balanced(text)
        except AttributeSyntaxError as err:
            if "never closed" in str(err):
                return self.error(f"the instruction is cut off here: {err}", last,
                                  len(self.lines[last].rstrip()), _HINT_REEXPORT)
        return None

    # -- the module --------------------------------------------------------------------------
    def _module(self) -> Module:
        comps = list(self.scope.computations)
        m = Module(self.name, self.attr_text, comps, self.frames, filename=self.src.filename,
                   first_line=self.start + 1, format=self.src.format)
        m.headerless = self.headerless
        return m

    def read_single(self) -> tuple[Module, int]:
        """One instruction alone (XLA's ParseSingleInstruction)."""
        self.headerless = True
        self.widen()
        g = self.grammar()
        g.at(self.offset(self.start))
        body = Body("_", True, "", self.start + 1)
        body.missing_as_parameters = True
        self.scope.stack.append(body)
        try:
            inst = g.instruction(body)
            if g.lx.tok[0] != Tok.EOF:
                raise GrammarError("Expected eof after parsing single instruction. Did you mean "
                                   "to write an HLO module and forget the \"HloModule\" header?",
                                   g.lx.tok[1])
        except GrammarError as e:
            raise self.grammar_error(e, self.offset(self.start)) from None
        self.scope.stack.pop()
        inst.is_root = True
        comp = finish_body(body, "", None)
        self.scope.computations.append(comp)
        self.scope.comp_names[comp.name] = comp
        self.name = "module_" + inst.name
        module = self._module()
        self._check_calls(module)
        return module, self.stop

    def read(self, headerless: bool) -> tuple[Module, int]:
        i = self.start
        mid: int | None = None  # an offset in the module text when a statement ends mid-line
        if headerless:
            self.headerless = True
        else:
            i, mid = self._header(i)
        i = self._body(i, mid)
        scope = self.scope
        if not [c for c in scope.computations if not c.origin]:
            raise self.error(f"module {self.name!r} has no computation", self.start, 0,
                             _HINT_REEXPORT)
        if self.headerless:
            entry = next((c for c in scope.computations if c.is_entry), None)
            if entry is None:
                entry = [c for c in scope.computations if not c.origin][-1]
            self.name = "module_" + entry.name
        module = self._module()
        self._check_header(module)
        _unique_names(module)
        calls = self._check_calls(module)
        problem = validate(module, self.forward, calls, self.checked)
        if problem is not None:
            self._raise(problem)
        if self.strict:
            from ._check import check_module

            found = check_module(module)
            if found is not None:
                message, inst = found
                raise self.error(message, inst.line - 1, 0)
        return module, i

    def _header(self, i: int) -> tuple[int, int | None]:
        line = self.lines[i]
        m = split_header(line)
        if m is not None and not self.strict:
            name, attrs = m
            if ("//" not in line and not attrs.endswith(",") and not self._continued(i)
                    and ("/*" not in line or "/*" not in _INDEX_COMMENT_RE.sub("", line))):
                try:
                    if attrs:
                        check_balanced(attrs)
                except AttributeSyntaxError:
                    pass
                else:
                    self.name = name.rstrip(":")
                    self.attr_text = attrs
                    return i + 1, None
        g = self.grammar()
        while True:
            g.at(self.offset(i))
            try:
                self.name, attrs_list = g.module_header()
            except GrammarError as e:
                if self.widen():
                    continue
                raise self.grammar_error(e, self.offset(i)) from None
            if g.lx.tok[0] == Tok.EOF and self.widen():
                continue
            break
        self.attr_text = ", ".join(f"{k}={v}" for k, v in attrs_list)
        return self._after(g)

    def _continued(self, i: int) -> bool:
        """Whether the statement on line `i` goes on at the next line that holds something,
        which starts with a comma (a header whose attributes continue on indented lines)."""
        lines = self.lines
        for k in range(i + 1, min(self.stop, i + 64)):
            s = lines[k].lstrip()
            if s:
                return s.startswith(",")
        return False

    def _after(self, g: Grammar) -> tuple[int, int | None]:
        """Where to go on after a statement the token grammar read."""
        t = g.lx.tok
        if t[0] == Tok.EOF:
            # The end of the text the grammar sees: the next module's header where it
            # stops there (the module may go on past it: `_body` widens it and reads on).
            return min(self.limit, self.stop), None
        i, col = self.locate(t[1])
        line = self.lines[i]
        if not line[:col].strip():
            return i, None
        return i, t[1]

    # -- computations and instructions ------------------------------------------------------
    def _body(self, i: int, mid: int | None) -> int:
        lines = self.lines
        stop = self.stop
        scope = self.scope
        body: Body | None = None
        strict = self.strict
        while i < stop:
            if mid is None and not strict:
                line = lines[i]
                if not line or line.isspace():
                    i += 1
                    continue
                if body is not None:
                    i = self._fast_instructions(body, i)
                    if i >= stop:
                        break
                    line = lines[i]
                    if not line or line.isspace():
                        continue
                    closing = _split_close(line)
                    if closing is not None and self._close_ok(closing):
                        self._close(body, closing, i)
                        body = None
                        i += 1
                        continue
                else:
                    stripped = line.strip()
                    if stripped in _TABLE_NAMES:
                        if scope.computations:
                            raise self.error(f"'{stripped}' table after the first computation",
                                             i, line.find(stripped))
                        self.frames, i = _parse_tables(self.src, i, stop)
                        continue
                    if split_header(line) is not None:
                        break  # the next module
                    cm = _COMP_RE.match(line) if stripped.endswith("{") else None
                    if cm is not None and " = " not in line.split("(", 1)[0]:
                        body = self._open(cm.group(2), cm.group(1) is not None,
                                          (cm.group(3) or "").strip(), i)
                        i += 1
                        continue
                    if self._module_ended(line):
                        break
            # The token grammar reads the statement that starts here.
            g = self.grammar()
            at = mid if mid is not None else self.offset(i)
            g.at(at)
            t = g.lx.tok
            if t[0] == Tok.EOF and self.widen():
                continue
            mark = len(scope.computations), (len(body.instructions) if body else 0)
            try:
                if t[0] == Tok.EOF:
                    if body is not None:
                        raise self._ended_inside(body)
                    return stop
                if body is None:
                    if t[0] == Tok.KEYWORD and t[3] == "HloModule":
                        break
                    if t[0] == Tok.KEYWORD and t[3] == "FileNames":
                        if scope.computations:
                            raise GrammarError("'FileNames' table after the first computation",
                                               t[1])
                        self.frames = stack_frame_tables(g)
                    else:
                        body = self._open_tokens(g, i, mid)
                        if body is None:
                            break
                elif t[0] == Tok.RBRACE:
                    attrs = g.computation_close()
                    self._close(body, ", ".join(f"{k}={v}" for k, v in attrs),
                                self.locate(t[1])[0])
                    body = None
                else:
                    if t[0] == Tok.KEYWORD and t[3] == "ENTRY" or (
                            t[0] == Tok.KEYWORD and t[3] == "HloModule"):
                        raise self._ended_inside(body, at=t[1])
                    g.instruction(body)
            except GrammarError as e:
                if body is not None and scope.stack:
                    scope.stack[:] = [body]
                if self.widen():
                    self._undo(mark, body)
                    continue  # read the statement again with the rest of the text
                raise self.grammar_error(e, at) from None
            i, mid = self._after(g)
        if body is not None:
            raise self._ended_inside(body)
        return i

    def _fast_instructions(self, body: Body, i: int) -> int:
        """Read canonical instruction lines from line `i` on, one regular expression
        each; return the index of the first line that is not one (blank, a closing
        brace, or anything the token grammar must read)."""
        lines = self.lines
        stop = self.stop
        match = _INST_RE.match
        shape_cache = _shape_cache
        sigil_findall = _SIGIL_OPERAND_RE.findall
        by_name = body.by_name
        defined = by_name.__contains__
        append = body.instructions.append
        forward = body.forward
        known = OPCODE_ARITY
        fixed = FIXED_ARITY.get
        slashes = self.src.slashes
        hashes = self.src.hashes
        params = body.parameter_numbers
        # The model shares strings rather than holding a copy per instruction: one per
        # opcode, the defining instruction's name for each operand, one per short
        # attribute text.
        intern = sys.intern
        same_text = self._texts.setdefault
        name_of = by_name.get
        while i < stop:
            line = lines[i]
            m = match(line)
            if m is None:
                return i
            root, name, shape_text, opcode, operand_text, attr_text = m.groups()
            opcode = intern(opcode)
            if opcode not in known and split_async_sugar(opcode) is not None or \
                    opcode in _ASYNC_TAIL:
                return i  # the async shorthand (the grammar desugars it), async chains
            if hashes and "#" in operand_text:
                return i  # a compact tuple element
            if attr_text is None:
                attr_text = ""
            elif not attr_text or attr_text[-1] == "," or slashes and (
                    "//" in attr_text or "/*" in attr_text):
                return i
            else:
                if attr_text.count("{") != attr_text.count("}") or attr_text.count('"') & 1:
                    try:
                        check_balanced(attr_text)
                    except AttributeSyntaxError:
                        return i  # continued on the next line, or cut off: the grammar decides
                if len(attr_text) < 96:
                    attr_text = same_text(attr_text, attr_text)
            shape = shape_cache.get(shape_text)
            if shape is None:
                try:
                    shape = parse_shape(shape_text)
                except ShapeSyntaxError as e:
                    raise self.error(f"bad shape: {e}", i, m.start(3) + e.offset) from None
            literal = None
            pnum = -1
            if opcode == "parameter" and is_ascii_digits(operand_text) and len(operand_text) < 10:
                operands: tuple[str, ...] = ()
                pnum = int(operand_text)
            elif opcode == "constant":
                operands = ()
                literal = operand_text
            elif "%" in operand_text:
                operands = tuple([o.name if (o := name_of(n)) is not None else n
                                  for n in sigil_findall(operand_text)])
            else:
                try:
                    operands, literal, pnum = _decode_operands(opcode, operand_text)
                except _LineError as e:
                    raise self.error(str(e), i, m.start(5) + e.column) from None
            inst = Instruction(name, shape, opcode, operands, attr_text, root is not None, i + 1,
                               literal, pnum)
            # What validate() would check, while the instruction is at hand.
            n = fixed(opcode)
            if n is not None and n != len(operands):
                self._raise(arity_problem(inst, n))
            if pnum >= 0:
                if pnum in params:
                    self._raise((f"{name}: parameter number {pnum} is already "
                                 f"{params[pnum].name}'s in computation {body.name!r}", inst))
                params[pnum] = inst
            elif opcode == "get-tuple-element" and operands[0] in by_name:
                problem = tuple_element_problem(inst, by_name)
                if problem is not None:
                    self._raise(problem)
            if name in by_name:
                raise self.error(f"instruction {name!r} is defined twice in computation "
                                 f"{body.name!r}", i, max(line.find(name), 0))
            if root is not None:
                if body.roots:
                    raise self.error(f"computation {body.name!r} has more than one ROOT", i,
                                     max(line.find("ROOT"), 0))
                body.roots.append(inst)
            if operands and not all(map(defined, operands)):
                forward.append(inst)
            by_name[name] = inst
            append(inst)
            i += 1
        return i

    def _undo(self, mark: tuple[int, int], body: Body | None) -> None:
        """Forget what a statement that failed had added (before reading it again)."""
        comps, insts = mark
        scope = self.scope
        for c in scope.computations[comps:]:
            scope.comp_names.pop(c.name, None)
            scope.generated.discard(c.name)
        del scope.computations[comps:]
        if body is not None:
            for inst in body.instructions[insts:]:
                body.by_name.pop(inst.name, None)
                scope.generated.discard(inst.name)
                if inst in body.roots:
                    body.roots.remove(inst)
            del body.instructions[insts:]
            body.forward[:] = [x for x in body.forward if x.name in body.by_name]

    def _close_ok(self, attrs: str) -> bool:
        if not attrs:
            return True
        if attrs.endswith(",") or "//" in attrs or "/*" in attrs:
            return False
        try:
            check_balanced(attrs)
        except AttributeSyntaxError:
            return False
        return True

    def _module_ended(self, line: str) -> bool:
        """After the entry computation, a line that is not HLO ends the module
        (a notebook's or a log's text around it)."""
        if not (self.scope.computations and self.seen_entry):
            return False
        s = line.lstrip()
        return not (s.startswith(("%", "ENTRY", "//", "/*")) or COMPUTATION_START_RE.match(line))

    def _open(self, name: str, is_entry: bool, signature: str, i: int) -> Body:
        if self.scope.computation_taken(name) and name not in self.scope.generated:
            raise self.error(f"computation {name!r} is defined twice", i, 0)
        if is_entry:
            if self.seen_entry:
                raise self.error("expects only one ENTRY", i, 0)
            self.seen_entry = True
        body = Body(name, is_entry, signature, i + 1)
        self.scope.stack.append(body)
        return body

    def _open_tokens(self, g: Grammar, i: int, mid: int | None) -> Body | None:
        t = g.lx.tok
        if t[0] not in (Tok.NAME, Tok.IDENT) and not (t[0] == Tok.KEYWORD and t[3] == "ENTRY"):
            if self._module_ended(self.lines[i]) and mid is None:
                return None
            if not self.scope.computations:
                raise GrammarError("expected a computation such as 'ENTRY %main (...) -> ... {'",
                                   t[1], _HINT_REEXPORT)
            raise GrammarError("the module ends before its ENTRY computation: this is not HLO",
                               t[1], _HINT_REEXPORT)
        try:
            is_entry, name, signature, name_tok = g.computation_header()
        except GrammarError:
            if self.seen_entry and mid is None and not self.strict:
                return None  # text after the module that merely starts like a name
            raise
        line = self.locate(name_tok[1])[0]
        if is_entry and self.seen_entry:
            raise GrammarError("expects only one ENTRY", t[1])
        if self.scope.computation_taken(name):
            raise GrammarError(f"computation {name!r} is defined twice", name_tok[1])
        if is_entry:
            self.seen_entry = True
        body = Body(name, is_entry, signature, line + 1)
        self.scope.stack.append(body)
        return body

    def _close(self, body: Body, attr_text: str, i: int) -> None:
        scope = self.scope
        scope.stack.pop()
        if body.forward:
            self.forward.add(body.name)
        if not body.by_grammar:
            self.checked.add(body.name)
        try:
            comp = finish_body(body, attr_text, None)
        except _UndefinedOperand as e:
            raise self.grammar_error(e) from None
        except GrammarError as e:
            raise self.error(str(e).replace("computation", "computation", 1), i, 0) from None
        if self.strict and self._g is not None and self._g.checker is not None:
            try:
                self._g.checker.computation(self._g, comp)
            except GrammarError as e:
                raise self.grammar_error(e) from None
        scope.computations.append(comp)
        scope.comp_names[comp.name] = comp

    def _ended_inside(self, body: Body, at: int | None = None) -> HloParseError:
        last = body.instructions[-1].line - 1 if body.instructions else body.line - 1
        return self.error(
            f"the text ends inside computation {body.name!r} (opened at line {body.line}): "
            "its closing '}' is missing", last, len(self.lines[last].rstrip()), _HINT_REEXPORT)

    def _raise(self, problem: tuple[str, Instruction]) -> NoReturn:
        message, inst = problem
        line = self.lines[inst.line - 1]
        raise self.error(message, inst.line - 1, max(line.find(inst.name), 0),
                         "XLA refuses such a module too; the text may be damaged")

    def _check_header(self, module: Module) -> None:
        """The header attributes analyses read must be what XLA prints."""
        try:
            attrs = module.attributes if module.attr_text else {}
        except AttributeSyntaxError as e:  # an unclosed string or brace in the header
            line = self.lines[self.start]
            raise self.error(f"the module header's attributes are damaged: {e}", self.start,
                             max(line.find(",") + 1, 0), _HINT_REEXPORT) from None
        for key in ("num_partitions", "replica_count"):
            v = attrs.get(key)
            if v is not None and not (is_ascii_digits(v) and 0 < len(v) < 10 and int(v) > 0):
                self._header_error(key, f"{key}={v[:40]} in the module header is not a count")
        for key, form, example in (
                ("input_output_alias", _ALIAS_VALUE_RE,
                 "{ {output index}: (parameter, {parameter index}[, may-alias|must-alias]) }"),
                ("buffer_donor", _DONOR_VALUE_RE, "{ (parameter, {parameter index}), ... }")):
            v = attrs.get(key)
            if v is not None and form.fullmatch(v) is None:
                self._header_error(key, f"{key}={v[:60]} is not of the form {example}")

    def _header_error(self, key: str, message: str) -> NoReturn:
        i = self.start
        for k in range(self.start, min(self.stop, self.start + 50)):
            if key + "=" in self.lines[k]:
                i = k
                break
        raise self.error(message, i, max(self.lines[i].find(key), 0),
                         "XLA refuses this header too; re-export the module")

    def _check_calls(self, module: Module) -> dict[str, list[tuple[str, Instruction]]]:
        """Every computation an instruction calls must exist; returns who calls what."""
        names = module._by_name
        keys_of = _CALL_KEYS_OF
        every = _CALL_ONE_KEYS
        edges: dict[str, list[tuple[str, Instruction]]] = {}
        for comp in module.computations:
            out: list[tuple[str, Instruction]] = []
            # Only the few instructions that may call anything are looked at one by one.
            for inst in [i for i in comp.instructions
                         if i.implicit_calls or keys_of.get(i.opcode, every)]:
                if inst.implicit_calls:
                    self._called_exist(inst, inst.implicit_calls, names)
                    out.extend((n, inst) for n in inst.implicit_calls)
                text = inst.attr_text
                if not text or inst.sugar:
                    continue
                called = _called_names(text, keys_of.get(inst.opcode, every))
                if called:
                    self._called_exist(inst, called, names)
                    out.extend((n, inst) for n in called)
            if out:
                edges[comp.name] = out
        return edges

    def _called_exist(self, inst: Instruction, called, names) -> None:  # type: ignore[no-untyped-def]
        for n in called:
            if n not in names:
                line = self.lines[inst.line - 1]
                raise self.error(
                    f"instruction {inst.name!r} calls computation {n!r}, which the "
                    "module does not define", inst.line - 1, max(line.find(n), 0),
                    "the module text may be incomplete; re-export it whole")


_CALL_ONE_KEYS = tuple(k + "=" for k in ("calls", "to_apply", "condition", "body", "select",
                                         "scatter", "comparator", "true_computation",
                                         "false_computation"))
_CALL_LIST_KEYS = ("branch_computations=", "called_computations=")
_CALLED_NAME_RE = re.compile(r"%?([\w.\-]+)")
_CALLED_LIST_RE = re.compile(r"\{([^}]*)\}")
_ESCAPED_QUOTE_RE = re.compile(r'(?<!\\)(?:\\\\)*\\"')


def _called_names(text: str, keys: tuple[str, ...] = _CALL_ONE_KEYS) -> list[str]:
    """Names after ``calls=``, ``to_apply=`` ... in an attribute text (outside strings)."""
    out: list[str] = []
    find = text.find
    for key in keys:
        j = find(key)
        while j >= 0:
            if (j == 0 or text[j - 2 : j] == ", ") and _outside_quotes(text, j):
                m = _CALLED_NAME_RE.match(text, j + len(key))
                if m is not None:
                    out.append(m.group(1))
            j = find(key, j + 1)
    if "_computations=" in text:
        for key in _CALL_LIST_KEYS:
            j = find(key)
            if j >= 0 and (j == 0 or text[j - 2 : j] == ", ") and _outside_quotes(text, j):
                m = _CALLED_LIST_RE.match(text, j + len(key))
                if m is not None:
                    out.extend(x.strip().lstrip("%") for x in m.group(1).split(",") if x.strip())
    return out


def _outside_quotes(text: str, j: int) -> bool:
    """Whether offset `j` of an attribute text lies outside every quoted string."""
    quotes = text.count('"', 0, j)
    if quotes and "\\" in text[:j]:
        quotes -= len(_ESCAPED_QUOTE_RE.findall(text, 0, j))
    return quotes % 2 == 0


# The attributes through which each known opcode may call a computation (none for most);
# an opcode not listed here (a newer XLA's) is searched for every such attribute.
_CALL_KEYS_OF: dict[str, tuple[str, ...]] = {op: () for op in OPCODE_ARITY}
_CALL_KEYS_OF.update({
    "fusion": ("calls=",), "call": ("to_apply=",), "while": ("condition=", "body="),
    "map": ("to_apply=",), "reduce": ("to_apply=",), "reduce-window": ("to_apply=",),
    "reduce-scatter": ("to_apply=",), "all-reduce": ("to_apply=",),
    "all-reduce-start": ("to_apply=",), "scatter": ("to_apply=",), "sort": ("to_apply=",),
    "scan": ("to_apply=",), "select-and-scatter": ("select=", "scatter="),
    "conditional": ("true_computation=", "false_computation=", "branch_computations="),
    "custom-call": ("to_apply=", "called_computations="),
    "async-start": ("calls=",), "async-update": ("calls=",), "async-done": ("calls=",),
})


def _unique_names(module: Module) -> None:
    """Make instruction names unique across the module, as XLA's HloModule does when
    it adds each computation: a name seen in an earlier computation gets the next free
    ``.N`` suffix, and the computation's references to it follow."""
    comps = module.computations
    seen: set[str] = set()
    total = 0
    for c in comps:
        seen.update(c.by_name)
        total += len(c.instructions)
    if len(seen) == total:
        return
    uniquer = NameUniquer()
    for c in comps:
        renamed: dict[str, str] = {}
        for inst in c.instructions:
            new = uniquer.unique(inst.name)
            if new != inst.name:
                renamed[inst.name] = new
        if not renamed:
            continue
        for inst in c.instructions:
            if inst.name in renamed:
                inst.name = renamed[inst.name]
            if any(n in renamed for n in inst.operand_names):
                inst.operand_names = tuple(renamed.get(n, n) for n in inst.operand_names)
            if "control-predecessors=" in inst.attr_text:
                inst.attr_text = _CONTROL_RE.sub(
                    lambda m: "control-predecessors={" + ", ".join(
                        ("%" if x.strip().startswith("%") else "")
                        + renamed.get(x.strip().lstrip("%"), x.strip().lstrip("%"))
                        for x in m.group(1).split(",")) + "}", inst.attr_text)
                inst._attrs = inst._calls = None
        c.by_name.clear()
        c.by_name.update((i.name, i) for i in c.instructions)
        c._users = None


_CONTROL_RE = re.compile(r"control-predecessors=\{([^}]*)\}")


def split_header(line: str) -> tuple[str, str] | None:
    """``(name, attributes)`` of a whole ``HloModule NAME[, attributes]`` line, else None.
    (String operations, not one regular expression: a line of spaces stays linear.)"""
    m = _HEADER_NAME_RE.match(line)
    if m is None:
        return None
    rest = line[m.end():].strip()
    if not rest:
        return m.group(1), ""
    if rest[0] != ",":
        return None
    return m.group(1), rest[1:].strip()


def _split_close(line: str) -> str | None:
    """The attributes of a line that closes a computation (``}`` or ``}, attrs``), else None."""
    s = line.strip()
    if not s.startswith("}"):
        return None
    rest = s[1:].lstrip()
    if not rest:
        return ""
    if rest[0] != ",":
        return None
    return rest[1:].strip()


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
                tables[current].append(unescape(m.group(2)))
                i += 1
                continue
        elif current == "FileLocations":
            m = _TABLE_LOC_RE.match(line)
            if m and all(len(x or "") <= _MAX_INT_DIGITS for x in m.groups()):
                tables[current].append(tuple(int(x or 0) for x in m.groups()[1:]))
                i += 1
                continue
        elif current == "StackFrames":
            m = _TABLE_FRAME_RE.match(line)
            if m and all(len(x) <= _MAX_INT_DIGITS for x in m.groups()):
                tables[current].append((int(m.group(2)), int(m.group(3))))
                i += 1
                continue
        if "0" <= s[0] <= "9":
            raise src.error(f"bad row in the {current} table", i, len(line) - len(line.lstrip()))
        break
    return StackFrameIndex(tuple(tables["FileNames"]), tuple(tables["FunctionNames"]),
                           tuple(tables["FileLocations"]), tuple(tables["StackFrames"])), i


def _find_operand(line: str, name: str) -> int:
    paren = line.find("(", line.find("="))
    for pat in ("%" + name, name):
        j = line.find(pat, paren if paren >= 0 else 0)
        if j >= 0:
            return j
    return 0


def _decode_operands(opcode: str, text: str) -> tuple[tuple[str, ...], str | None, int]:
    """(operand names, constant literal, parameter number) from the text in parentheses."""
    if opcode == "parameter":
        t = text.strip()
        if not is_ascii_digits(t) or len(t) > _MAX_INT_DIGITS:
            raise _LineError("parameter(N) needs a parameter number", 0)
        return (), None, int(t)
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

