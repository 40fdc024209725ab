"""The token-level HLO grammar, for every statement that is not one canonical line.

XLA prints one instruction per line, and the parser reads such lines with one
regular expression each (see `hloscope._hlo._parser`).  Everything else
comes here, where the text is read token by token as XLA's own parser reads
it: statements continued over several lines, comments, indented or run-on
text, nested instructions (``add(f32[10] parameter(0), ...)``), compact
tuple-element operands (``%p0#1``), computations written inline as attribute
values, result shapes left out, the ``X-start``/``X-update``/``X-done``
shorthand for asynchronous ops, and module headers and computation
signatures spread over lines.

It builds the same model the fast path builds: nested instructions and
tuple elements become instructions of their own, named as XLA names them
(``parameter.anon``, ``p0_1``); inline computations become computations
(``_``, ``_.1``); the async shorthand becomes ``async-start``/``-update``/
``-done`` instructions around a wrapped computation (``async_wrapped``), as
XLA desugars it.  Attributes stay raw text (comments removed, line breaks
folded into spaces), so that printing gives one canonical line per
instruction.

In strict mode (``hloscope check``) each attribute value is also parsed by
its type and every instruction checked against XLA's rules for its opcode
(`hloscope._hlo._check`); in tolerant mode anything unknown is kept raw.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from ._infer import InferError, infer_shape
from ._lexer import Lexer, Tok, Token
from ._module import CALLED_COMPUTATION_KEYS, Computation, Instruction, StackFrameIndex
from ._names import NameUniquer
from ._opcodes import CAN_INFER_SHAPE, split_async_sugar
from ._shape import Shape, ShapeSyntaxError, parse_shape

if TYPE_CHECKING:
    from ._check import Checker

__all__ = ["Body", "Grammar", "GrammarError", "Scope", "clean_span", "MAX_DEPTH"]

# Nesting deeper than this (brackets, nested instructions, inline computations)
# is refused with XLA's own message, long before Python's stack runs out.
MAX_DEPTH = 200

_LIST_KEYS = frozenset({"branch_computations", "called_computations"})
_ASYNC_OPCODES = frozenset({"async-start", "async-update", "async-done"})
_BODY_START_RE = re.compile(r"\s*(?:ROOT\b|%?[^\W\d][\w.\-]*\s*=(?!=))")
_SCAN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|/\*.*?\*/|//[^\n]*|[{}\[\]()]',
                      re.S)
_COMMENT_OR_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|/\*.*?\*/|//[^\n]*|\s*\n\s*', re.S)
_CLOSERS = {"{": "}", "[": "]", "(": ")"}


class GrammarError(Exception):
    """A syntax error at `offset` in the module text."""

    def __init__(self, message: str, offset: int, hint: str = "") -> None:
        super().__init__(message)
        self.offset = offset
        self.hint = hint


def match_bracket(text: str, pos: int, stop: int) -> int:
    """Offset just after the bracket that closes the one at `pos`."""
    stack = [_CLOSERS[text[pos]]]
    finditer = _SCAN_RE.finditer
    for m in finditer(text, pos + 1, stop):
        tok = m.group()
        c = tok[0]
        if len(tok) > 1:
            if tok.startswith("/*") or tok.startswith("//"):
                continue
            continue  # a string
        if c in _CLOSERS:
            stack.append(_CLOSERS[c])
            if len(stack) > MAX_DEPTH:
                raise GrammarError("maximum recursion depth exceeded", m.start())
        elif c == stack[-1]:
            stack.pop()
            if not stack:
                return m.end()
        else:
            raise GrammarError(f"unexpected {c!r}: {stack[-1]!r} expected first", m.start())
    raise GrammarError(f"{text[pos]!r} is never closed", pos)


def clean_span(text: str, start: int, end: int) -> str:
    """`text[start:end]` with comments removed and line breaks folded into one space."""
    s = text[start:end]
    if "\n" not in s and "/*" not in s and "//" not in s and "\r" not in s:
        return s
    if "\r" in s:
        s = s.replace("\r\n", "\n").replace("\r", "\n")

    def repl(m: re.Match[str]) -> str:
        t = m.group()
        if t[0] == '"':
            return t
        if t.startswith("/*") or t.startswith("//"):
            return ""
        return " "

    out = _COMMENT_OR_STRING_RE.sub(repl, s)
    return re.sub(r"[ \t]{2,}", " ", out).strip()


class Body:
    """A computation being read: its instructions so far, by name."""

    __slots__ = ("name", "instructions", "by_name", "forward", "is_entry", "signature", "line",
                 "gte", "roots", "missing_as_parameters", "by_grammar", "parameter_numbers")

    def __init__(self, name: str, is_entry: bool, signature: str, line: int) -> None:
        self.name = name
        self.instructions: list[Instruction] = []
        self.by_name: dict[str, Instruction] = {}
        self.forward: list[Instruction] = []  # instructions naming an operand defined later
        self.is_entry = is_entry
        self.signature = signature
        self.line = line
        self.gte: dict[str, str] = {}  # "p0#1" -> the name of its get-tuple-element
        self.roots: list[Instruction] = []
        # One instruction read alone: an operand it names becomes a parameter.
        self.missing_as_parameters = False
        self.by_grammar = False  # whether the token grammar added instructions (not checked yet)
        self.parameter_numbers: dict[int, Instruction] = {}  # the fast path's check


class Scope:
    """The module being read: finished computations and the bodies open now."""

    __slots__ = ("computations", "comp_names", "stack", "generated")

    def __init__(self) -> None:
        self.computations: list[Computation] = []
        self.comp_names: dict[str, Computation] = {}
        self.stack: list[Body] = []
        self.generated: set[str] = set()

    @property
    def body(self) -> Body:
        return self.stack[-1]

    def instruction_taken(self, name: str) -> bool:
        if name in self.generated:
            return True
        if any(name in b.by_name for b in self.stack):
            return True
        return any(name in c.by_name for c in self.computations)

    def computation_taken(self, name: str) -> bool:
        return (name in self.comp_names or name in self.generated
                or any(b.name == name for b in self.stack))

    def unique(self, prefix: str, taken: Callable[[str], bool]) -> str:
        """`prefix`, or `prefix.N` with the first free N (XLA's NameUniquer for new names)."""
        uniquer = NameUniquer()
        name = uniquer.unique(prefix)
        while taken(name):
            name = uniquer.unique(prefix)
        self.generated.add(name)
        return name


class Grammar:
    """Reads statements token by token from one module's text.

    Each method starts at the lexer's current token and leaves the lexer on
    the first token after the statement.  Errors raise `GrammarError` with
    the offset of the offending token.
    """

    def __init__(self, text: str, scope: Scope, *, strict: bool = False,
                 checker: Checker | None = None, line_of: Callable[[int], int]) -> None:
        self.text = text
        self.scope = scope
        self.strict = strict
        self.checker = checker
        self.lx = Lexer(text, strict=strict)
        self.line_of = line_of  # offset -> 1-based line in the file
        self.depth = 0

    # -- token helpers ------------------------------------------------------------
    def at(self, offset: int) -> None:
        self.lx.reset(offset)

    @property
    def tok(self) -> Token:
        return self.lx.tok

    def fail(self, message: str, tok: Token | None = None, hint: str = "") -> NoReturn:
        t = tok if tok is not None else self.lx.tok
        if t[0] == Tok.ERROR and tok is None:
            message = f"{message} (but sees {t[3]})"
        raise GrammarError(message, t[1], hint)

    def expect(self, kind: int, message: str) -> Token:
        t = self.lx.tok
        if t[0] != kind:
            self.fail(message)
        self.lx.advance()
        return t

    def eat(self, kind: int) -> bool:
        if self.lx.tok[0] == kind:
            self.lx.advance()
            return True
        return False

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail("maximum recursion depth exceeded")

    # -- shapes --------------------------------------------------------------------
    def can_be_shape(self) -> bool:
        t = self.lx.tok
        k = t[0]
        if k == Tok.PRIMITIVE_TYPE or k == Tok.LPAREN:
            return True
        return k == Tok.IDENT and t[3] == "b" and self.lx.peek()[0] == Tok.LPAREN

    def shape(self) -> Shape:
        """A shape: ``f32[2,3]{1,0}``, a tuple ``(..)``, or a buffer ``b(..)``."""
        start = self.lx.tok[1]
        if self.checker is not None:
            self.checker.read_shape(self)
        else:
            self._skip_shape()
        end = self.lx.prev_end
        text = clean_span(self.text, start, end)
        try:
            return parse_shape(text)
        except ShapeSyntaxError as e:
            raise GrammarError(f"bad shape: {e}", start + min(e.offset, end - start)) from None

    def _skip_shape(self) -> None:
        lx = self.lx
        self._enter()
        try:
            t = lx.tok
            if t[0] == Tok.IDENT and t[3] == "b" and lx.peek()[0] == Tok.LPAREN:
                lx.advance()
                lx.advance()
                self._skip_shape()
                self.expect(Tok.RPAREN, "expects ')' at the end of buffer shape.")
                return
            if t[0] == Tok.LPAREN:
                lx.advance()
                if lx.tok[0] != Tok.RPAREN:
                    while True:
                        self._skip_shape()
                        if not self.eat(Tok.COMMA):
                            break
                self.expect(Tok.RPAREN, "expects ')' at the end of tuple.")
                return
            if t[0] != Tok.PRIMITIVE_TYPE:
                self.fail("expected primitive type, saw " + Tok.NAMES.get(t[0], "?"))
            lx.advance()
            self.expect(Tok.LSQUARE, "expects a list starting with '['")
            while lx.tok[0] != Tok.RSQUARE:
                if lx.tok[0] == Tok.LEQ:
                    lx.advance()
                if lx.tok[0] not in (Tok.INT, Tok.QUESTION):
                    self.fail("expects integer")
                lx.advance()
                if not self.eat(Tok.COMMA):
                    break
            self.expect(Tok.RSQUARE, "expects a list to end with ']'")
            if lx.tok[0] == Tok.LBRACE:
                # A layout, when '{' is followed by an integer or ':' (XLA's rule; an
                # empty '{}' right after the dimensions is an old scalar layout).
                p = lx.peek()[0]
                if p in (Tok.INT, Tok.COLON) or (
                        p == Tok.RBRACE and not self.strict and lx.tok[1] == lx.prev_end):
                    lx.reset(match_bracket(self.text, lx.tok[1], lx.stop))
        finally:
            self.depth -= 1

    # -- names ---------------------------------------------------------------------
    def name(self, what: str = "name") -> tuple[str, Token]:
        t = self.lx.tok
        if t[0] in (Tok.NAME, Tok.IDENT):
            self.lx.advance()
            return t[3], t
        if not self.strict and t[0] in (Tok.KEYWORD, Tok.PRIMITIVE_TYPE) and t[3] != "ROOT":
            self.lx.advance()
            return t[3], t
        self.fail(f"expects {what}")

    # -- values kept as raw text -------------------------------------------------------
    def skip_value(self, key: str = "") -> None:
        """Step over one attribute value: tokens and bracketed groups that touch (a
        custom-call's `literal=s32[] 1`: a shape, a space, and the literal)."""
        lx = self.lx
        t = lx.tok
        if t[0] == Tok.IDENT and t[3] in ("mesh", "maximal_mesh") and lx.peek()[0] == Tok.LSQUARE:
            self._skip_mesh_value()
            return
        self._skip_touching()
        if key == "literal" and lx.tok[0] not in (Tok.COMMA, Tok.RBRACE, Tok.RPAREN,
                                                  Tok.RSQUARE, Tok.EOF):
            self._skip_touching()

    def _skip_touching(self) -> None:
        """Step over tokens and bracketed groups that touch each other."""
        lx = self.lx
        first = True
        while True:
            t = lx.tok
            k = t[0]
            if not first and t[1] != lx.prev_end and k != Tok.LEQ:
                return
            if k in (Tok.LBRACE, Tok.LSQUARE, Tok.LPAREN):
                lx.reset(match_bracket(self.text, t[1], lx.stop))
            elif k in (Tok.COMMA, Tok.RBRACE, Tok.RPAREN, Tok.RSQUARE, Tok.EOF):
                if first:
                    self.fail("expects a value")
                return
            elif k == Tok.ERROR:
                self.fail(f"bad attribute value: {t[3]}", t)
            else:
                lx.advance()
            first = False

    def _skip_mesh_value(self) -> None:
        """Replica groups over a mesh: ``mesh['x'=4,'y'=2] {'y'}``, where a space parts the
        mesh from its axes, and a permuted mesh adds ``, device_ids=(...)`` between them."""
        lx = self.lx
        lx.advance()
        lx.reset(match_bracket(self.text, lx.tok[1], lx.stop))
        nxt = lx.peek()
        if lx.tok[0] == Tok.COMMA and nxt[0] == Tok.ATTRIBUTE_NAME and nxt[3] == "device_ids":
            lx.advance()
            lx.advance()
            if lx.tok[0] != Tok.LPAREN:
                self.fail("expected '(' for device_ids")
            lx.reset(match_bracket(self.text, lx.tok[1], lx.stop))
        if lx.tok[0] == Tok.LBRACE:
            lx.reset(match_bracket(self.text, lx.tok[1], lx.stop))

    # -- module header -----------------------------------------------------------------
    def module_header(self) -> tuple[str, list[tuple[str, str]]]:
        """``HloModule name[, attribute=value]*``; returns the name and the attributes."""
        self.expect(Tok.KEYWORD, "expects HloModule")
        name, _ = self.name("a module name after HloModule")
        attrs = self.attributes(None, header=True)
        return name, attrs

    # -- computations ----------------------------------------------------------------
    def computation_header(self) -> tuple[bool, str, str, Token]:
        """``[ENTRY] name [(params) -> shape] {``: is_entry, name, signature, name token."""
        is_entry = False
        if self.lx.tok[0] == Tok.KEYWORD and self.lx.tok[3] == "ENTRY":
            is_entry = True
            self.lx.advance()
        name, name_tok = self.name("a computation name")
        signature = ""
        if self.lx.tok[0] == Tok.LPAREN:
            start = self.lx.tok[1]
            self.param_list()
            self.expect(Tok.ARROW, "expects '->'")
            result = self.shape()
            signature = clean_span(self.text, start, self.lx.prev_end)
            if self.checker is not None:
                self.checker.signature_result(self, result, name)
        if self.lx.tok[0] != Tok.LBRACE:
            self.fail("expects '{' at the beginning of instruction list.")
        self.lx.advance()
        return is_entry, name, signature, name_tok

    def param_list(self) -> None:
        self.expect(Tok.LPAREN, "expects '(' at the beginning of param list")
        if self.lx.tok[0] != Tok.RPAREN:
            while True:
                t = self.lx.tok
                if t[0] == Tok.NAME:
                    self.lx.advance()
                elif t[0] == Tok.IDENT and self.lx.peek()[0] == Tok.COLON:
                    self.lx.advance()
                    self.lx.advance()
                else:
                    self.fail("expects name")
                self.shape()
                if not self.eat(Tok.COMMA):
                    break
        self.expect(Tok.RPAREN, "expects ')' at the end of param list")

    def computation_close(self) -> list[tuple[str, str]]:
        """``}`` and the computation's attributes (``, execution_thread="..."``)."""
        self.expect(Tok.RBRACE, "expects '}' at the end of instruction list.")
        return self.attributes(None, computation=True)

    def body_starts(self) -> bool:
        """Whether the text after the current ``{`` is a list of instructions."""
        t = self.lx.tok
        return _BODY_START_RE.match(self.text, t[2]) is not None

    def inline_computation(self, caller: str) -> str:
        """A computation written as an attribute value ``{ ... }``; returns its name."""
        scope = self.scope
        self._enter()
        try:
            name = scope.unique("_", scope.computation_taken)
            open_tok = self.lx.tok
            self.lx.advance()
            body = Body(name, False, "", self.line_of(open_tok[1]))
            scope.stack.append(body)
            while self.lx.tok[0] != Tok.RBRACE:
                if self.lx.tok[0] == Tok.EOF:
                    self.fail(f"the computation written inline in {caller} is never closed",
                              open_tok)
                self.instruction(body)
            self.lx.advance()
            scope.stack.pop()
            comp = finish_body(body, "", self)
            scope.computations.append(comp)
            scope.comp_names[comp.name] = comp
            return name
        finally:
            self.depth -= 1

    # -- instructions --------------------------------------------------------------------
    def instruction(self, body: Body) -> Instruction:
        """``[ROOT] name = [shape] opcode(operands)[, attributes]`` into `body`."""
        lx = self.lx
        is_root = False
        root_tok = lx.tok
        if root_tok[0] == Tok.KEYWORD and root_tok[3] == "ROOT":
            is_root = True
            lx.advance()
        name, name_tok = self.name("an instruction name such as 'x.1 = f32[] add(a, b)'")
        if lx.tok[0] != Tok.EQUAL:
            self.fail("expects '=' in instruction")
        lx.advance()
        if self.checker is not None:
            self.checker.instruction_name(self, name, name_tok)
        inst = self.rhs(body, name, name_tok, allow_attributes=True)
        if is_root:
            inst.is_root = True
            if body.roots:
                self.fail("one computation should have only one ROOT", root_tok)
            body.roots.append(inst)
        return inst

    def rhs(self, body: Body, name: str, name_tok: Token, *, allow_attributes: bool) -> Instruction:
        lx = self.lx
        self._enter()
        try:
            shape = self.shape() if self.can_be_shape() else None
            op_tok = lx.tok
            if op_tok[0] != Tok.IDENT:
                if op_tok[0] == Tok.PRIMITIVE_TYPE or op_tok[0] == Tok.LPAREN:
                    self.fail("expects opcode")
                self.fail("expects opcode" if shape is not None else
                          "expects a shape or an opcode")
            opcode = op_tok[3]
            sugar = split_async_sugar(opcode)
            if self.checker is not None:
                self.checker.opcode(self, opcode, op_tok, sugar)
            lx.advance()
            if shape is None and opcode not in CAN_INFER_SHAPE:
                self.fail(f"cannot infer shape for opcode: {opcode}", op_tok,
                          hint="write the result shape before the opcode")
            literal: str | None = None
            pnum = -1
            operands: list[str] = []
            if opcode == "parameter":
                self.expect(Tok.LPAREN, "expects '(' before parameter number")
                t = lx.tok
                if t[0] != Tok.INT:
                    self.fail("expects integer")
                pnum = t[3]
                if pnum < 0:
                    self.fail("parameter number must be >= 0")
                lx.advance()
                self.expect(Tok.RPAREN, "expects ')' after parameter number")
            elif opcode == "constant":
                if lx.tok[0] != Tok.LPAREN:
                    self.fail("expects '(' before constant literal")
                open_at = lx.tok[1]
                end = match_bracket(self.text, open_at, lx.stop)
                literal = clean_span(self.text, open_at + 1, end - 1)
                if self.checker is not None:
                    self.checker.literal(self, shape, open_at)
                lx.reset(end)
            else:
                operands = self.operands(body)
            chain = None
            if sugar is not None or opcode in _ASYNC_OPCODES:
                chain = self._async_operands(body, opcode, sugar, shape, operands, lx.tok)
            if self.checker is not None:
                self.checker.after_operands(self, body, opcode, operands, lx.tok)
            attrs = self.attributes(opcode, body=body, inst_name=name) if allow_attributes else []
            attr_text = ", ".join(f"{k}={v}" for k, v in attrs)
            if not name:
                name = self.scope.unique(f"{sugar[0] if sugar else opcode}.anon",
                                         self.scope.instruction_taken)
            if shape is None:
                shape = self._infer(body, opcode, operands, attrs, op_tok)
            inst = Instruction(name, shape, opcode, tuple(operands), attr_text, False,
                               self.line_of(name_tok[1]), literal, pnum)
            if sugar is not None:
                self._desugar(inst, sugar, attrs, chain)
            elif chain is not None and "calls" not in dict(attrs):
                inst.implicit_calls = (chain,)  # async-update/-done inherit the chain's
            if self.checker is not None:
                self.checker.instruction(self, body, inst, op_tok, attrs)
            add_instruction(body, inst, self, name_tok)
            return inst
        finally:
            self.depth -= 1

    def operands(self, body: Body) -> list[str]:
        lx = self.lx
        self.expect(Tok.LPAREN, "expects '(' at the beginning of operands")
        out: list[str] = []
        if lx.tok[0] == Tok.RPAREN:
            lx.advance()
            return out
        while True:
            start = lx.tok[1]
            try:
                name = self._plain_operand(body)
            except GrammarError as first:
                lx.reset(start)
                try:
                    nested = self.rhs(body, "", lx.tok, allow_attributes=False)
                except GrammarError as second:
                    raise (second if second.offset >= first.offset else first) from None
                name = nested.name
            out.append(name)
            if self.eat(Tok.COMMA):
                continue
            self.expect(Tok.RPAREN, "expects ')' at the end of operands")
            return out

    def _plain_operand(self, body: Body) -> str:
        """``[shape] name[#i[#j...]]`` followed by ',' or ')'; returns the operand's name."""
        lx = self.lx
        declared = self.shape() if self.can_be_shape() else None
        name, name_tok = self.name()
        indices: list[int] = []
        while lx.tok[0] == Tok.OCTOTHORP:
            lx.advance()
            t = lx.tok
            if t[0] != Tok.INT:
                self.fail("expects integer")
            indices.append(t[3])
            lx.advance()
        if lx.tok[0] not in (Tok.COMMA, Tok.RPAREN):
            self.fail("expects ',' or ')' after an operand")
        if body.missing_as_parameters and name not in body.by_name and self.depth <= 1:
            if declared is None:
                self.fail("Operand had no shape in HLO text; cannot create parameter for "
                          "single-instruction module.", name_tok)
            number = sum(1 for i in body.instructions if i.opcode == "parameter")
            add_instruction(body, Instruction(name, declared, "parameter", (), "", False,
                                              self.line_of(name_tok[1]), None, number), self,
                            name_tok)
        if indices:
            name = self._compact_gte(body, name, indices, name_tok, declared)
        elif self.checker is not None:
            self.checker.operand(self, body, name, name_tok, declared)
        return name

    def _compact_gte(self, body: Body, base: str, indices: list[int], tok: Token,
                     declared: Shape | None) -> str:
        """The get-tuple-element instructions that ``base#i#j`` stands for (made once)."""
        current = body.by_name.get(base)
        if current is None:
            self.fail(f"instruction does not exist: {base}", tok,
                      hint="a '#' element reference must name an instruction defined before it")
        key = base
        for index in indices:
            shape = current.shape
            if not shape.is_tuple:
                self.fail(f"GTE operand must be tuple, but has shape: {shape.without_layout()}",
                          tok)
            if not 0 <= index < len(shape.tuple_shapes):
                self.fail(f"GTE index {index} out of bounds for shape: "
                          f"{shape.without_layout()}", tok)
            key = f"{key}#{index}"
            made = body.gte.get(key)
            if made is None:
                made = self.scope.unique(key.replace("#", "_"), self.scope.instruction_taken)
                gte = Instruction(made, shape.tuple_shapes[index], "get-tuple-element",
                                  (current.name,), f"index={index}", False,
                                  self.line_of(tok[1]))
                add_instruction(body, gte, self, tok)
                body.gte[key] = made
            current = body.by_name[made]
        if declared is not None and self.checker is not None:
            self.checker.compatible(self, declared, current.shape, tok,
                                    "operand shape {0} does not match instruction shape {1}")
        return current.name

    def attributes(self, opcode: str | None, *, body: Body | None = None, inst_name: str = "",
                   header: bool = False, computation: bool = False) -> list[tuple[str, str]]:
        """``(, key=value)*``: each value as raw text, inline computations read."""
        lx = self.lx
        out: list[tuple[str, str]] = []
        seen: set[str] = set()
        first = lx.tok
        while lx.tok[0] == Tok.COMMA:
            nxt = lx.peek()
            if nxt[0] == Tok.ATTRIBUTE_NAME:
                lx.advance()
                key = nxt[3]
                key_tok = nxt
                lx.advance()
            elif not self.strict and nxt[0] == Tok.IDENT:
                lx.advance()
                key, key_tok = nxt[3], nxt
                lx.advance()
                if lx.tok[0] != Tok.EQUAL:
                    self.fail("expects attribute name", key_tok)
                lx.advance()
            else:
                lx.advance()
                self.fail("expects attribute name")
            if key in seen and self.strict:
                self.fail(f"attribute {key} already exists", key_tok)
            seen.add(key)
            start = lx.tok[1]
            if (key in CALLED_COMPUTATION_KEYS and lx.tok[0] == Tok.LBRACE
                    and self._inline_value(key, inst_name, out)):
                continue
            if self.checker is not None:
                self.checker.attribute(self, opcode, key, key_tok, header=header,
                                       computation=computation, body=body)
            else:
                self.skip_value(key)
            out.append((key, clean_span(self.text, start, lx.prev_end)))
        if self.checker is not None and not header and not computation:
            self.checker.end_attributes(self, opcode, seen, body, first)
        return out

    def _inline_value(self, key: str, inst_name: str, out: list[tuple[str, str]]) -> bool:
        """Read ``key={ instructions }`` (or a list of them); False when it is no body."""
        lx = self.lx
        caller = inst_name or "an instruction"
        if key in _LIST_KEYS:
            # {a, b} or {{...}, {...}}: inline bodies inside the braces.
            after = _BODY_START_RE.match(self.text, lx.peek()[2]) if lx.peek()[0] == Tok.LBRACE \
                else None
            if after is None:
                return False
            lx.advance()
            names = []
            while True:
                if lx.tok[0] == Tok.LBRACE:
                    names.append(self.inline_computation(caller))
                else:
                    names.append(self.name("a computation name")[0])
                if not self.eat(Tok.COMMA):
                    break
            self.expect(Tok.RBRACE, "expects a list to end with '}'")
            out.append((key, "{" + ", ".join("%" + n for n in names) + "}"))
            return True
        if not self.body_starts():
            return False
        out.append((key, "%" + self.inline_computation(caller)))
        return True

    # -- helpers for the model -------------------------------------------------------------
    def _infer(self, body: Body, opcode: str, operands: list[str],
               attrs: list[tuple[str, str]], op_tok: Token) -> Shape:
        shapes = []
        for n in operands:
            inst = body.by_name.get(n)
            if inst is None:
                self.fail(f"cannot infer the shape of {opcode}: its operand {n!r} is not "
                          "defined before it", op_tok, hint="write the result shape")
            shapes.append(inst.shape)
        amap = dict(attrs)

        def called(key: str) -> list[Shape] | None:
            v = amap.get(key)
            if not v:
                return None
            names = [x.strip().lstrip("%") for x in v.strip("{}").split(",") if x.strip()]
            comps = [self.scope.comp_names.get(x) for x in names]
            return [c.root.shape for c in comps if c is not None] or None

        try:
            return infer_shape(opcode, shapes, amap, called)
        except InferError as e:
            self.fail(f"failed to infer shape for opcode: {opcode}, error: {e}", op_tok)

    def _async_operands(self, body: Body, opcode: str, sugar: tuple[str, str] | None,
                        shape: Shape | None, operands: list[str], at: Token) -> str | None:
        """XLA's checks on an async op right after its operands (errors at `at`, the token
        after them, where XLA reports them); returns the chain's wrapped computation."""
        async_op = sugar[0] if sugar else opcode
        if shape is None:
            self.fail(f"Async op {async_op} must have an explicit shape.", at)
        if async_op in ("async-start", "async-update"):
            if not (shape.is_tuple and len(shape.tuple_shapes) >= 2
                    and shape.tuple_shapes[0].is_tuple):
                self.fail("AsyncStart and AsyncUpdate expect the shape to be in the form of "
                          "((operand0_shape, operand1_shape, ...), output_shape, ...).", at)
        if async_op == "async-start":
            return None
        if not operands:
            self.fail("No operand found for AsyncUpdate and AsyncDone", at)
        prev = body.by_name.get(operands[0])
        if prev is None or not prev.opcode.startswith("async-"):
            self.fail("AsyncUpdate and AsyncDone expect an asynchronous operation as their "
                      "first operand.", at)
        if prev.opcode == "async-done":
            self.fail("AsyncDone cannot be the first operand of an AsyncUpdate or AsyncDone.", at)
        calls = prev.called_computation_names
        chain = calls[0] if calls else None
        comp = self.scope.comp_names.get(chain) if chain else None
        if sugar is not None and comp is not None and comp.root.opcode != sugar[1]:
            self.fail(f"Expect async wrapped opcode to be {comp.root.opcode}, but got "
                      f"{sugar[1]}", at)
        return chain

    def _desugar(self, inst: Instruction, sugar: tuple[str, str],
                 attrs: list[tuple[str, str]], chain: str | None) -> None:
        """``X-start``/``-update``/``-done`` as XLA reads them: async ops around a
        computation that wraps X (made here for the start; inherited by the rest)."""
        async_op, wrapped = sugar
        inst.sugar = inst.opcode
        inst.opcode = async_op
        inst._calls = None  # decoded again from the new sugar and implicit_calls
        if async_op != "async-start":
            inst.implicit_calls = (chain,) if chain else ()
            return
        scope = self.scope
        shape = inst.shape
        comp_name = scope.unique("async_wrapped", scope.computation_taken)
        wbody = Body(comp_name, False, "", inst.line)
        names = []
        for i, ps in enumerate(shape.tuple_shapes[0].tuple_shapes):
            pname = "async_param" if i == 0 else f"async_param.{i}"
            names.append(pname)
            param = Instruction(pname, ps, "parameter", (), "", False, inst.line, None, i)
            wbody.instructions.append(param)
            wbody.by_name[pname] = param
        wrapped_attrs = ", ".join(f"{k}={v}" for k, v in attrs
                                  if k not in ("async_execution_thread",
                                               "output_to_operand_aliasing"))
        # Named after the start (`a2a.wrapped`): its value is what memory tables list, and
        # a name the text never printed (async_op) could not be found in it.
        op_name = scope.unique(f"{inst.name}.wrapped", scope.instruction_taken)
        op = Instruction(op_name, shape.tuple_shapes[1], wrapped, tuple(names), wrapped_attrs,
                         True, inst.line)
        wbody.instructions.append(op)
        wbody.by_name[op.name] = op
        comp = finish_body(wbody, "", self, implicit=True)
        scope.computations.append(comp)
        scope.comp_names[comp.name] = comp
        inst.implicit_calls = (comp_name,)


def add_instruction(body: Body, inst: Instruction, g: Grammar | None, tok: Token | None) -> None:
    """Append `inst` to `body`, refusing a name defined twice."""
    name = inst.name
    if name in body.by_name:
        if g is not None and tok is not None:
            g.fail(f"instruction {name!r} is defined twice in computation {body.name!r}", tok)
        raise GrammarError(f"instruction {name!r} is defined twice", 0)
    body.by_grammar = True
    ops = inst.operand_names
    if ops:
        by_name = body.by_name
        for op in ops:
            if op not in by_name:
                body.forward.append(inst)
                break
    body.by_name[name] = inst
    body.instructions.append(inst)


def finish_body(body: Body, attr_text: str, g: Grammar | None, *,
                implicit: bool = False) -> Computation:
    """The computation `body` holds, once its closing brace is read."""
    if not body.instructions:
        raise GrammarError(f"computation {body.name!r} has no instructions", 0)
    for inst in body.forward:
        for op in inst.operand_names:
            if op not in body.by_name:
                raise _UndefinedOperand(inst, op, body.name)
    comp = Computation(body.name, body.instructions, body.is_entry, body.signature, attr_text,
                       body.line, body.by_name)
    if implicit:
        comp.origin = "async"
    return comp


class _UndefinedOperand(GrammarError):
    def __init__(self, inst: Instruction, op: str, comp: str) -> None:
        super().__init__(f"instruction {inst.name!r} uses {op!r}, which computation {comp!r} "
                         "does not define", 0, "check for a typo, or that the module text is "
                         "complete")
        self.inst = inst
        self.operand = op


def stack_frame_tables(g: Grammar) -> StackFrameIndex:
    """``FileNames ... StackFrames`` tables read token by token."""
    lx = g.lx
    tables: dict[str, list] = {"FileNames": [], "FunctionNames": [], "FileLocations": [],
                               "StackFrames": []}
    order = list(tables)
    for k, key in enumerate(order):
        t = lx.tok
        if not (t[0] == Tok.KEYWORD and t[3] == key):
            if k == 0:
                return StackFrameIndex()
            g.fail(f"expects '{key}'")
        lx.advance()
        while lx.tok[0] == Tok.INT:
            lx.advance()
            if key in ("FileNames", "FunctionNames"):
                t = lx.tok
                if t[0] != Tok.STRING:
                    g.fail("expects string")
                tables[key].append(t[3])
                lx.advance()
            else:
                fields = _sub_attributes(g)
                if key == "FileLocations":
                    tables[key].append(tuple(fields.get(f, 0) for f in (
                        "file_name_id", "function_name_id", "line", "end_line", "column",
                        "end_column")))
                else:
                    tables[key].append((fields.get("file_location_id", 0),
                                        fields.get("parent_frame_id", 0)))
    return StackFrameIndex(tuple(tables["FileNames"]), tuple(tables["FunctionNames"]),
                           tuple(tables["FileLocations"]), tuple(tables["StackFrames"]))


def _sub_attributes(g: Grammar) -> dict[str, int]:
    g.expect(Tok.LBRACE, "expects '{' to start sub attributes")
    out: dict[str, int] = {}
    while g.lx.tok[0] != Tok.RBRACE:
        g.eat(Tok.COMMA)
        t = g.lx.tok
        if t[0] != Tok.ATTRIBUTE_NAME:
            g.fail("expects attribute name")
        g.lx.advance()
        v = g.lx.tok
        if v[0] != Tok.INT:
            g.fail("expects integer")
        out[t[3]] = v[3]
        g.lx.advance()
    g.lx.advance()
    return out


