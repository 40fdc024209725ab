#!/usr/bin/env python3
"""Extract a conformance data set from XLA's own HLO parser unit tests.

Input
-----
A copy of ``xla/hlo/parser/hlo_parser_test.cc`` from the openxla/xla
repository (https://github.com/openxla/xla).  The committed data set was made
from upstream commit 94460d78aad2f43e9fad6b1b26a32f5cf723575e (2026-07-24).
Fetch that file yourself, for example::

    curl -LO https://raw.githubusercontent.com/openxla/xla/94460d78aad2f43e9fad6b1b26a32f5cf723575e/xla/hlo/parser/hlo_parser_test.cc

The .cc file itself (Apache-2.0, Copyright The OpenXLA Authors) is *not*
committed to this repository; only the extracted cases
(``tests/data/xla_parser/cases.json``) are.

Usage
-----
::

    python benchmarks/extract_xla_parser_cases.py PATH/hlo_parser_test.cc \
        -o tests/data/xla_parser/cases.json \
        [--source-commit SHA] [--no-jaxlib]

What it does
------------
* Tokenises the C++ source (comments, raw strings ``R"(...)"`` and
  ``R"delim(...)delim"`` kept verbatim, ordinary literals with their escapes
  decoded, adjacent literals concatenated).
* ``CreateTestCases()`` / ``CreateShortTestCases()`` entries become groups
  ``roundtrip_long`` / ``roundtrip_short`` (valid, verified, with the entry's
  replica_count); ``CreateNonRoundtripTestCases()`` entries become
  ``non_roundtrip`` (valid, verified, with ``expected_output``).
* Every ``TEST_F``/``TEST`` body is scanned for calls of
  ``ParseAndReturnUnverifiedModule`` / ``ParseAndReturnVerifiedModule`` /
  ``ParseHloModule``.  The module string argument is evaluated when it is a
  literal, a local string constant, or ``absl::StrCat`` / ``absl::StrFormat``
  (``%s`` only) / ``+`` of such pieces.  The expectation (valid / error) is
  read from the assertions on the call or on the variable that holds its
  result; ``HasSubstr`` / ``ExpectHasSubstr`` / ``StrContains`` strings on the
  status message become ``error_substrings``.
* Everything that is not a whole-module parse (ParseShape, ParseSharding,
  single-instruction texts, ...) or cannot be evaluated statically goes to
  ``skipped`` with a reason.
* Unless ``--no-jaxlib`` is given, every case text is fed to jaxlib's own HLO
  parser (``jaxlib._hlo.hlo_module_from_text``, parser only, no verifier) in a
  separate worker process and its verdict is recorded.

The output is deterministic: same input file (and same jaxlib) give a
byte-identical JSON file.

Only the Python standard library is needed (jaxlib is optional).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

SOURCE_REPO = "openxla/xla"
SOURCE_PATH = "xla/hlo/parser/hlo_parser_test.cc"
DEFAULT_COMMIT = "94460d78aad2f43e9fad6b1b26a32f5cf723575e"
LICENSE = "Apache-2.0"

MODULE_PARSE_FUNCS = {
    "ParseAndReturnUnverifiedModule": False,
    "ParseAndReturnVerifiedModule": True,
    "ParseHloModule": False,
}

LIST_FUNCS = (
    ("CreateTestCases", "roundtrip_long"),
    ("CreateShortTestCases", "roundtrip_short"),
    ("CreateNonRoundtripTestCases", "non_roundtrip"),
)


# ---------------------------------------------------------------------------
# C++ tokenizer
# ---------------------------------------------------------------------------


@dataclass
class Tok:
    kind: str  # "str", "chr", "ident", "num", "punct"
    value: str
    line: int
    # For merged string tokens: number of literal pieces and whether any
    # piece was a raw string.
    pieces: int = 1
    raw: bool = False
    delim: str = ""


_SIMPLE_ESC = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "?": "?",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}

_PUNCT3 = ("<<=", ">>=", "...", "->*")
_PUNCT2 = ("::", "->", "+=", "-=", "*=", "/=", "==", "!=", "<=", ">=", "&&",
           "||", "++", "--", "<<", "|=", "&=", "^=", "%=")

_RAW_RE = re.compile(r'(?:u8|u|U|L)?R"([^()\\ \t\n]{0,16})\(')
_STR_RE = re.compile(r'(?:u8|u|U|L)?"')
_CHR_RE = re.compile(r"(?:u8|u|U|L)?'")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUM_RE = re.compile(r"\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.']|)*")


def _decode_escapes(body: str, line: int) -> str:
    """Decode the escapes of an ordinary C++ string/char literal body."""
    out = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError(f"line {line}: dangling backslash in literal")
        e = body[i + 1]
        if e in _SIMPLE_ESC:
            out.append(_SIMPLE_ESC[e])
            i += 2
        elif e in "01234567":
            j = i + 1
            while j < n and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1:j], 8)))
            i = j
        elif e == "x":
            j = i + 2
            while j < n and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                raise ValueError(f"line {line}: bad \\x escape")
            out.append(chr(int(body[i + 2:j], 16)))
            i = j
        elif e in "uU":
            k = 4 if e == "u" else 8
            out.append(chr(int(body[i + 2:i + 2 + k], 16)))
            i += 2 + k
        else:
            raise ValueError(f"line {line}: unknown escape \\{e}")
    return "".join(out)


def tokenize(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i = 0
    n = len(src)
    line = 1
    at_line_start = True
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "#" and at_line_start:
            # Preprocessor directive: skip to end of line (with continuations).
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    line += 1
                    i += 2
                    continue
                i += 1
            continue
        at_line_start = False
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j < 0:
                raise ValueError(f"line {line}: unterminated comment")
            line += src.count("\n", i, j + 2)
            i = j + 2
            continue
        m = _RAW_RE.match(src, i)
        if m:
            delim = m.group(1)
            end_marker = ")" + delim + '"'
            j = src.find(end_marker, m.end())
            if j < 0:
                raise ValueError(f"line {line}: unterminated raw string")
            value = src[m.end():j]
            toks.append(Tok("str", value, line, raw=True, delim=delim))
            line += src.count("\n", i, j + len(end_marker))
            i = j + len(end_marker)
            continue
        m = _STR_RE.match(src, i)
        if m:
            j = m.end()
            while True:
                if j >= n or src[j] == "\n":
                    raise ValueError(f"line {line}: unterminated string")
                if src[j] == "\\":
                    j += 2
                    continue
                if src[j] == '"':
                    break
                j += 1
            toks.append(Tok("str", _decode_escapes(src[m.end():j], line),
                            line))
            i = j + 1
            continue
        m = _CHR_RE.match(src, i)
        if m:
            j = m.end()
            while True:
                if j >= n or src[j] == "\n":
                    raise ValueError(f"line {line}: unterminated char literal")
                if src[j] == "\\":
                    j += 2
                    continue
                if src[j] == "'":
                    break
                j += 1
            toks.append(Tok("chr", _decode_escapes(src[m.end():j], line),
                            line))
            i = j + 1
            continue
        m = _IDENT_RE.match(src, i)
        if m:
            toks.append(Tok("ident", m.group(0), line))
            i = m.end()
            continue
        m = _NUM_RE.match(src, i)
        if m:
            toks.append(Tok("num", m.group(0), line))
            i = m.end()
            continue
        for p in _PUNCT3 + _PUNCT2:
            if src.startswith(p, i):
                toks.append(Tok("punct", p, line))
                i += len(p)
                break
        else:
            toks.append(Tok("punct", c, line))
            i += 1
    return _merge_adjacent_strings(toks)


def _merge_adjacent_strings(toks: list[Tok]) -> list[Tok]:
    out: list[Tok] = []
    for t in toks:
        if t.kind == "str" and out and out[-1].kind == "str":
            prev = out[-1]
            out[-1] = Tok("str", prev.value + t.value, prev.line,
                          pieces=prev.pieces + t.pieces,
                          raw=prev.raw or t.raw,
                          delim=prev.delim or t.delim)
        else:
            out.append(t)
    return out


def match_brackets(toks: list[Tok]) -> dict[int, int]:
    pairs = {"(": ")", "[": "]", "{": "}"}
    closers = {v: k for k, v in pairs.items()}
    stack: list[int] = []
    match: dict[int, int] = {}
    for i, t in enumerate(toks):
        if t.kind != "punct":
            continue
        if t.value in pairs:
            stack.append(i)
        elif t.value in closers:
            if not stack or toks[stack[-1]].value != closers[t.value]:
                raise ValueError(f"line {t.line}: unbalanced {t.value!r}")
            j = stack.pop()
            match[j] = i
            match[i] = j
    if stack:
        raise ValueError(f"line {toks[stack[-1]].line}: unclosed bracket")
    return match


def is_p(t: Tok, v: str) -> bool:
    return t.kind == "punct" and t.value == v


def is_id(t: Tok, v: str | None = None) -> bool:
    return t.kind == "ident" and (v is None or t.value == v)


def split_commas(toks: list[Tok], lo: int, hi: int,
                 match: dict[int, int]) -> list[tuple[int, int]]:
    """Split toks[lo:hi] on top-level commas; returns (start, end) spans."""
    spans = []
    start = lo
    i = lo
    while i < hi:
        t = toks[i]
        if t.kind == "punct" and t.value in "([{":
            i = match[i] + 1
            continue
        if is_p(t, ","):
            spans.append((start, i))
            start = i + 1
        i += 1
    if start < hi:
        spans.append((start, hi))
    return spans


def snippet(toks: list[Tok], lo: int, hi: int, limit: int = 80) -> str:
    parts = []
    for t in toks[lo:hi]:
        if t.kind == "str":
            v = t.value if len(t.value) <= 20 else t.value[:17] + "..."
            parts.append(json.dumps(v))
        else:
            parts.append(t.value)
    s = " ".join(parts)
    s = re.sub(r" ?(::|\.|->) ?", r"\1", s)
    s = re.sub(r" ?([()\[\],]) ?", lambda m: m.group(1) + (" " if m.group(1) == "," else ""), s)
    return s if len(s) <= limit else s[:limit - 3] + "..."


# ---------------------------------------------------------------------------
# Static evaluation of string expressions
# ---------------------------------------------------------------------------


@dataclass
class StrVal:
    value: str
    line: int          # line of the first literal that contributes
    how: str           # "raw", "literal", "strcat", ...


@dataclass
class Unevaluable:
    reason: str


class Evaluator:
    def __init__(self, toks: list[Tok], match: dict[int, int],
                 variables: dict[str, StrVal | Unevaluable]):
        self.toks = toks
        self.match = match
        self.vars = variables

    def eval(self, lo: int, hi: int) -> StrVal | Unevaluable:
        toks = self.toks
        # Strip a wrapping std::string(...) / absl::string_view(...).
        if hi - lo == 1:
            t = toks[lo]
            if t.kind == "str":
                how = "raw" if t.raw else "literal"
                if t.pieces > 1:
                    how += f" ({t.pieces} adjacent literals)"
                return StrVal(t.value, t.line, how)
            if t.kind == "ident":
                if t.value in self.vars:
                    return self.vars[t.value]
                return Unevaluable(f"'{t.value}' is not a string constant "
                                   "defined in the test")
        # Top-level '+' chain.
        plus = self._split_top(lo, hi, "+")
        if len(plus) > 1:
            return self._concat(plus, "operator+")
        # Function-call forms.
        name, args_lo, args_hi = self._call(lo, hi)
        if name in ("std::string", "string", "absl::string_view",
                    "std::string_view"):
            return self.eval(args_lo, args_hi)
        if name == "absl::StrCat":
            spans = split_commas(toks, args_lo, args_hi, self.match)
            return self._concat(spans, "absl::StrCat")
        if name == "absl::StrFormat":
            spans = split_commas(toks, args_lo, args_hi, self.match)
            if not spans:
                return Unevaluable("empty absl::StrFormat")
            fmt = self.eval(*spans[0])
            if isinstance(fmt, Unevaluable):
                return fmt
            args = [self.eval(*s) for s in spans[1:]]
            for a in args:
                if isinstance(a, Unevaluable):
                    return a
            convs = re.findall(r"%(.)", fmt.value.replace("%%", ""))
            if any(cv != "s" for cv in convs) or len(convs) != len(args):
                return Unevaluable("absl::StrFormat with conversions other "
                                   "than a matching number of %s")
            it = iter(a.value for a in args)
            out = re.sub(r"%%|%s",
                         lambda m: "%" if m.group(0) == "%%" else next(it),
                         fmt.value)
            return StrVal(out, fmt.line, "absl::StrFormat")
        if name in ("absl::StrReplaceAll", "absl::Substitute"):
            return Unevaluable(f"built with {name}")
        return Unevaluable("not a constant string expression: "
                           + snippet(toks, lo, hi))

    def _concat(self, spans, how) -> StrVal | Unevaluable:
        vals = []
        for s in spans:
            v = self.eval(*s)
            if isinstance(v, Unevaluable):
                return Unevaluable(f"{how} with a non-constant piece ({v.reason})")
            vals.append(v)
        if not vals:
            return StrVal("", self.toks[spans[0][0]].line if spans else 0, how)
        return StrVal("".join(v.value for v in vals), vals[0].line, how)

    def _split_top(self, lo, hi, op):
        spans = []
        start = lo
        i = lo
        while i < hi:
            t = self.toks[i]
            if t.kind == "punct" and t.value in "([{":
                i = self.match[i] + 1
                continue
            if is_p(t, op):
                spans.append((start, i))
                start = i + 1
            i += 1
        spans.append((start, hi))
        return spans

    def _call(self, lo, hi):
        """Recognise `a::b::f(args)` spanning exactly [lo, hi)."""
        toks = self.toks
        i = lo
        parts = []
        while i < hi and (is_id(toks[i]) or is_p(toks[i], "::")):
            parts.append(toks[i].value)
            i += 1
        if not parts or i >= hi or not is_p(toks[i], "("):
            return None, 0, 0
        close = self.match[i]
        if close != hi - 1:
            return None, 0, 0
        return "".join(parts), i + 1, close


# ---------------------------------------------------------------------------
# Test-list functions (CreateTestCases & co.)
# ---------------------------------------------------------------------------


def find_function_body(toks, match, fname):
    for i, t in enumerate(toks):
        if (is_id(t, fname) and i + 3 < len(toks) and is_p(toks[i + 1], "(")
                and is_p(toks[i + 2], ")") and is_p(toks[i + 3], "{")):
            return i + 3, match[i + 3]
    raise ValueError(f"function {fname}() not found")


def parse_list(toks, match, fname, group):
    lo, hi = find_function_body(toks, match, fname)
    i = lo + 1
    while i < hi and not is_id(toks[i], "return"):
        i += 1
    # return std::vector<T>({ ... });
    while i < hi and not is_p(toks[i], "{"):
        i += 1
    if i >= hi:
        raise ValueError(f"{fname}: initializer list not found")
    list_lo, list_hi = i, match[i]
    cases = []
    for s, e in split_commas(toks, list_lo + 1, list_hi, match):
        if s == e:
            continue
        if not is_p(toks[s], "{") or match[s] != e - 1:
            raise ValueError(f"{fname}: unexpected entry at line {toks[s].line}")
        items = split_commas(toks, s + 1, e - 1, match)
        vals = []
        for a, b in items:
            if b - a != 1:
                raise ValueError(f"{fname}: complex entry item at line "
                                 f"{toks[a].line}: {snippet(toks, a, b)}")
            vals.append(toks[a])
        strs = [v for v in vals if v.kind == "str"]
        nums = [v for v in vals if v.kind == "num"]
        if len(strs) + len(nums) != len(vals):
            raise ValueError(f"{fname}: unexpected item at line {vals[0].line}")
        if group == "non_roundtrip":
            if len(strs) != 3 or nums:
                raise ValueError(f"{fname}: bad entry at line {vals[0].line}")
            name, text, expected = strs
        else:
            if len(strs) != 2 or len(nums) > 1:
                raise ValueError(f"{fname}: bad entry at line {vals[0].line}")
            name, text = strs
            expected = None
        replica_count = int(nums[0].value) if nums else 1
        cases.append({
            "id": f"{group}/{name.value}",
            "group": group,
            "cc_line": text.line,
            "text": text.value,
            "expected_output": expected.value if expected else None,
            "expect": "valid",
            "verified": True,
            "replica_count": replica_count,
            "error_substrings": [],
        })
    return cases


# ---------------------------------------------------------------------------
# TEST_F / TEST bodies
# ---------------------------------------------------------------------------

ASSERT_OK_MACROS = {"TF_ASSERT_OK", "TF_EXPECT_OK", "ASSERT_OK", "EXPECT_OK"}
ASSIGN_MACROS = {"ASSERT_OK_AND_ASSIGN", "TF_ASSERT_OK_AND_ASSIGN"}
EQ_MACROS = {"EXPECT_EQ", "ASSERT_EQ"}
NE_MACROS = {"EXPECT_NE", "ASSERT_NE"}
TRUE_MACROS = {"EXPECT_TRUE", "ASSERT_TRUE"}
FALSE_MACROS = {"EXPECT_FALSE", "ASSERT_FALSE"}
THAT_MACROS = {"EXPECT_THAT", "ASSERT_THAT"}


@dataclass
class Statement:
    lo: int
    hi: int
    in_loop: bool


@dataclass
class Markers:
    valid: list = field(default_factory=list)
    weak_valid: list = field(default_factory=list)
    error: list = field(default_factory=list)
    substrings: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def find_tests(toks, match):
    tests = []
    for i, t in enumerate(toks):
        if not (is_id(t) and t.value in ("TEST_F", "TEST")):
            continue
        if i + 1 >= len(toks) or not is_p(toks[i + 1], "("):
            continue
        close = match[i + 1]
        args = split_commas(toks, i + 2, close, match)
        if len(args) != 2:
            continue
        suite = toks[args[0][0]].value
        name = toks[args[1][0]].value
        if close + 1 >= len(toks) or not is_p(toks[close + 1], "{"):
            continue
        body_lo = close + 1
        tests.append({
            "macro": t.value,
            "suite": suite,
            "name": name,
            "line": t.line,
            "body": (body_lo, match[body_lo]),
        })
    return tests


def split_statements(toks, lo, hi):
    """Split the tokens strictly inside body braces (lo, hi) into statements.

    Statement boundaries: ';' and block braces at parenthesis depth 0.
    Tracks whether a statement lies inside a for/while loop body.
    """
    stmts = []
    block_stack = []  # True for loop blocks
    start = lo + 1
    depth = 0
    i = lo + 1
    pending_loop = False
    while i < hi:
        t = toks[i]
        if t.kind == "punct":
            if t.value in "([":
                depth += 1
            elif t.value in ")]":
                depth -= 1
            elif depth == 0 and t.value in ";{}":
                if i > start:
                    stmt_is_loop = is_id(toks[start]) and toks[start].value in (
                        "for", "while")
                    stmts.append(Statement(start, i, any(block_stack)))
                    pending_loop = stmt_is_loop
                else:
                    pending_loop = False
                if t.value == "{":
                    block_stack.append(pending_loop)
                elif t.value == "}":
                    if block_stack:
                        block_stack.pop()
                pending_loop = False
                start = i + 1
        i += 1
    if start < hi:
        stmts.append(Statement(start, hi, any(block_stack)))
    return stmts


def top_level_assign(toks, st: Statement):
    """Return (lhs_name, op_index, op) for `... NAME = rhs` / `NAME += rhs`."""
    depth = 0
    for i in range(st.lo, st.hi):
        t = toks[i]
        if t.kind == "punct":
            if t.value in "([{":
                depth += 1
            elif t.value in ")]}":
                depth -= 1
            elif depth == 0 and t.value in ("=", "+="):
                j = i - 1
                if j >= st.lo and is_p(toks[j], "]"):
                    # `char text[] = ...`
                    while j >= st.lo and not is_p(toks[j], "["):
                        j -= 1
                    j -= 1
                if j >= st.lo and is_id(toks[j]):
                    return toks[j].value, i, t.value
                return None, i, t.value
    return None, None, None


def macro_calls(toks, match, lo, hi):
    """Yield (macro_name, args_lo, args_hi) for macro-like calls in range."""
    for i in range(lo, hi):
        t = toks[i]
        if is_id(t) and i + 1 < hi and is_p(toks[i + 1], "("):
            yield t.value, i + 2, match[i + 1]


def _contains_ident(toks, lo, hi, names):
    return any(is_id(toks[k]) and toks[k].value in names for k in range(lo, hi))


def _ends_with_ok_call(toks, lo, hi):
    # ... . ok ( )
    return (hi - lo >= 4 and is_p(toks[hi - 1], ")") and is_p(toks[hi - 2], "(")
            and is_id(toks[hi - 3], "ok")
            and (is_p(toks[hi - 4], ".") or is_p(toks[hi - 4], "->")))


def analyse_markers(toks, match, ev: Evaluator, st: Statement, m: Markers):
    """Collect success/failure evidence from the assertion macros in st."""
    for name, a_lo, a_hi in macro_calls(toks, match, st.lo, st.hi):
        where = f"line {toks[a_lo - 2].line}: {name}"
        if name in ASSERT_OK_MACROS:
            m.valid.append(where)
        elif name in ASSIGN_MACROS:
            m.valid.append(where)
        elif name in EQ_MACROS | NE_MACROS:
            if _contains_ident(toks, a_lo, a_hi, {"OkStatus"}):
                (m.valid if name in EQ_MACROS else m.error).append(where)
        elif name in TRUE_MACROS | FALSE_MACROS:
            negated = is_p(toks[a_lo], "!")
            if _ends_with_ok_call(toks, a_lo, a_hi):
                ok = (name in TRUE_MACROS) != negated
                (m.valid if ok else m.error).append(where)
        elif name in THAT_MACROS:
            if _contains_ident(toks, a_lo, a_hi, {"IsOk"}):
                m.valid.append(where)
            elif _contains_ident(toks, a_lo, a_hi, {"StatusIs"}):
                k = next(k for k in range(a_lo, a_hi) if is_id(toks[k], "StatusIs"))
                s_args = split_commas(toks, k + 2, match[k + 1], match)
                code_ok = s_args and _contains_ident(
                    toks, s_args[0][0], s_args[0][1], {"OK", "kOk"})
                (m.valid if code_ok else m.error).append(where)
            elif (_contains_ident(toks, a_lo, a_hi, {"HasSubstr"})
                  and _contains_ident(toks, a_lo, a_hi, {"message", "status"})):
                m.error.append(where)
        elif name == "ExpectHasSubstr":
            args = split_commas(toks, a_lo, a_hi, match)
            if len(args) == 2 and _contains_ident(toks, args[0][0], args[0][1],
                                                  {"message", "status"}):
                m.error.append(where)
                _add_substring(ev, args[1], m, where)
        elif name == "StrContains":
            args = split_commas(toks, a_lo, a_hi, match)
            if len(args) == 2 and _contains_ident(toks, args[0][0], args[0][1],
                                                  {"message", "status"}):
                m.error.append(where)
                _add_substring(ev, args[1], m, where)
        elif name == "HasSubstr":
            # Only counted when the enclosing assertion is about the status.
            if _contains_ident(toks, st.lo, st.hi, {"message", "status"}):
                _add_substring(ev, (a_lo, a_hi), m, where)
    # `.value()` / `*result` used directly on the result => success expected.
    for k in range(st.lo, st.hi - 2):
        if (is_p(toks[k], ".") and is_id(toks[k + 1], "value")
                and is_p(toks[k + 2], "(")):
            m.weak_valid.append(f"line {toks[k].line}: .value()")


def _add_substring(ev, span, m, where):
    v = ev.eval(*span)
    if isinstance(v, StrVal):
        if v.value not in m.substrings:
            m.substrings.append(v.value)
    else:
        m.notes.append(f"{where}: substring not evaluable ({v.reason})")


_HLO_NAME_RE = re.compile(r"%?[A-Za-z_][A-Za-z0-9_.\-]*")


def _skip_hlo_ws(text, i):
    n = len(text)
    while i < n:
        if text[i] in " \t\r\n":
            i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        else:
            break
    return i


def looks_like_module(text: str) -> bool:
    """Mirror HloParserImpl::Run's choice between module and single op.

    XLA parses the text as a module when the first token is `HloModule` or
    `ENTRY`, or when the second token is `{` (a bare computation); otherwise
    it parses a single instruction.
    """
    i = _skip_hlo_ws(text, 0)
    m = _HLO_NAME_RE.match(text, i)
    if not m:
        return False
    if m.group(0) in ("HloModule", "ENTRY"):
        return True
    j = _skip_hlo_ws(text, m.end())
    return j < len(text) and text[j] == "{"


def analyse_test(toks, match, test):
    """Return (cases, skipped) for one TEST/TEST_F."""
    body_lo, body_hi = test["body"]
    name = test["name"]
    stmts = split_statements(toks, body_lo, body_hi)
    variables: dict[str, StrVal | Unevaluable] = {}
    ev = Evaluator(toks, match, variables)

    calls = []  # dicts describing module-parse calls, in order
    for si, st in enumerate(stmts):
        lhs, op_i, op = top_level_assign(toks, st)
        # Module parse calls in this statement.
        st_calls = []
        for k in range(st.lo, st.hi):
            t = toks[k]
            if (is_id(t) and t.value in MODULE_PARSE_FUNCS and k + 1 < st.hi
                    and is_p(toks[k + 1], "(")):
                args = split_commas(toks, k + 2, match[k + 1], match)
                st_calls.append((k, args))
        # String variable bookkeeping.
        if lhs is not None and not st_calls:
            if op == "+=" or st.in_loop:
                variables[lhs] = Unevaluable(
                    f"'{lhs}' is built at run time (+= / loop)")
            else:
                variables[lhs] = ev.eval(op_i + 1, st.hi)
        for k, args in st_calls:
            func = toks[k].value
            if not args:
                continue
            a_lo, a_hi = args[0]
            extra = [snippet(toks, s, e) for s, e in args[1:]]
            if _contains_ident(toks, a_lo, a_hi, {"ToString"}):
                # Re-parse of the printed module: not a source module string.
                continue
            value = ev.eval(a_lo, a_hi)
            # Which variable holds the result?
            result_var = None
            first = toks[st.lo]
            if is_id(first) and first.value in ASSIGN_MACROS:
                margs = split_commas(toks, st.lo + 2, match[st.lo + 1], match)
                if margs:
                    s, e = margs[0]
                    if is_id(toks[e - 1]):
                        result_var = toks[e - 1].value
            elif lhs is not None and op_i is not None and op_i < k:
                result_var = lhs
            calls.append({
                "tok": k, "func": func, "stmt": si, "value": value,
                "extra_args": extra, "result_var": result_var,
                "arg": snippet(toks, a_lo, a_hi),
            })

    cases, skipped = [], []
    if not calls:
        funcs = sorted({toks[k].value for k in range(body_lo, body_hi)
                        if is_id(toks[k]) and (toks[k].value.startswith("Parse")
                                               or toks[k].value.startswith("Lexes"))
                        and k + 1 < body_hi and is_p(toks[k + 1], "(")})
        what = ", ".join(funcs) if funcs else "no parser entry point"
        skipped.append({"test": name, "cc_line": test["line"],
                        "reason": f"not a module (calls {what})"})
        return cases, skipped

    uses_depth_limit = any(
        is_id(toks[k], "set_max_recursion_depth")
        for k in range(body_lo, body_hi))
    n_case = 0
    for ci, call in enumerate(calls):
        value = call["value"]
        disabled = name.startswith("DISABLED_")
        if isinstance(value, Unevaluable):
            reason = f"module string not statically evaluable: {value.reason}"
            if disabled:
                reason = "test is DISABLED_; " + reason
            if call["extra_args"]:
                reason += f"; parsed with extra arguments ({', '.join(call['extra_args'])})"
            if uses_depth_limit:
                reason += ("; the expected error also depends on a "
                           "non-default HloParserOptions max_recursion_depth")
            skipped.append({"test": name, "cc_line": toks[call["tok"]].line,
                            "reason": reason})
            continue
        if disabled:
            skipped.append({"test": name, "cc_line": value.line,
                            "reason": "test is DISABLED_"})
            continue
        if not looks_like_module(value.value) and value.value != "":
            skipped.append({
                "test": name, "cc_line": value.line,
                "reason": "not a module (single-instruction text: XLA parses "
                          "it with the single-instruction path, not as an "
                          "HloModule)"})
            continue
        # Evidence: the call statement plus later statements that use the
        # result variable (until it is re-bound by another parse call).
        m = Markers()
        st = stmts[call["stmt"]]
        analyse_markers(toks, match, ev, st, m)
        rv = call["result_var"]
        if rv:
            later_bind = [c["stmt"] for c in calls[ci + 1:]
                          if c["result_var"] == rv]
            stop = later_bind[0] if later_bind else len(stmts)
            for st2 in stmts[call["stmt"] + 1:stop]:
                if _contains_ident(toks, st2.lo, st2.hi, {rv}):
                    analyse_markers(toks, match, ev, st2, m)
        if m.error and m.valid:
            skipped.append({"test": name, "cc_line": value.line,
                            "reason": "conflicting assertions: success ("
                                      + "; ".join(m.valid) + ") and failure ("
                                      + "; ".join(m.error) + ")"})
            continue
        if m.error:
            expect = "error"
        elif m.valid or m.weak_valid:
            expect = "valid"
        else:
            skipped.append({"test": name, "cc_line": value.line,
                            "reason": "no assertion on the parse result found"})
            continue
        n_case += 1
        cid = f"test_f/{name}" if n_case == 1 else f"test_f/{name}#{n_case}"
        cases.append({
            "id": cid,
            "group": "test_f",
            "cc_line": value.line,
            "text": value.value,
            "expected_output": None,
            "expect": expect,
            "verified": MODULE_PARSE_FUNCS[call["func"]],
            "replica_count": 1,
            "error_substrings": list(m.substrings) if expect == "error" else [],
            "_how": value.how,
            "_extra_args": call["extra_args"],
            "_notes": m.notes,
        })
    return cases, skipped


# ---------------------------------------------------------------------------
# jaxlib verdicts
# ---------------------------------------------------------------------------

_WORKER = r"""
import json, sys
import jaxlib._hlo as h
for line in sys.stdin:
    text = json.loads(line)
    try:
        h.hlo_module_from_text(text)
        out = {"ok": True}
    except Exception as e:  # RuntimeError on parse errors
        out = {"ok": False, "msg": str(e), "type": type(e).__name__}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""

_POS_RE = re.compile(r"was parsing (\d+):(\d+): error: ")


def jaxlib_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("jaxlib")
    except Exception:
        return None


_CHECK_RE = re.compile(r"\] (Check failed: [^\n]*)")


def _crash_message(rc: int, stderr_text: str) -> str:
    try:
        sig = signal.Signals(-rc).name if rc < 0 else f"exit status {rc}"
    except ValueError:
        sig = f"rc={rc}"
    msg = f"jaxlib crashed the process ({sig}); no verdict"
    checks = _CHECK_RE.findall(stderr_text)
    if checks:
        msg += ": " + checks[-1]
    return msg


def jaxlib_verdicts(texts: list[str], python: str) -> list[dict]:
    """Run jaxlib's HLO parser on every text in a worker process.

    A text that kills the worker (CHECK failure, segfault) is recorded as
    not accepted, with line/column null and a "jaxlib crashed" message; the
    worker is then restarted for the remaining texts.
    """
    results: list[dict] = []
    proc = None
    errf = None

    def start():
        f = tempfile.TemporaryFile(mode="w+", encoding="utf-8",
                                   errors="replace")
        p = subprocess.Popen([python, "-c", _WORKER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=f, text=True,
                             encoding="utf-8")
        return p, f

    for text in texts:
        if proc is None:
            proc, errf = start()
        try:
            proc.stdin.write(json.dumps(text) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            rc = proc.wait()
            errf.seek(0)
            results.append({"accepts": False, "line": None, "column": None,
                            "message": _crash_message(rc, errf.read())})
            errf.close()
            proc = errf = None
            continue
        out = json.loads(line)
        if out["ok"]:
            results.append({"accepts": True, "line": None, "column": None,
                            "message": None})
        else:
            msg = out["msg"]
            if out["type"] != "RuntimeError":
                msg = f"{out['type']}: {msg}"
            pm = _POS_RE.search(msg)
            results.append({
                "accepts": False,
                "line": int(pm.group(1)) if pm else None,
                "column": int(pm.group(2)) if pm else None,
                "message": msg,
            })
    if proc is not None:
        proc.stdin.close()
        proc.wait()
        errf.close()
    return results


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def extract(src: str):
    toks = tokenize(src)
    match = match_brackets(toks)
    cases = []
    for fname, group in LIST_FUNCS:
        cases.extend(parse_list(toks, match, fname, group))
    skipped = []
    test_cases = []
    for test in find_tests(toks, match):
        c, s = analyse_test(toks, match, test)
        test_cases.extend(c)
        skipped.extend(s)
    cases.extend(test_cases)
    ids = [c["id"] for c in cases]
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        raise ValueError(f"duplicate case ids: {dups}")
    return cases, skipped


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cc_file", help="path to a copy of hlo_parser_test.cc")
    ap.add_argument("-o", "--output", required=True, help="output JSON path")
    ap.add_argument("--source-commit", default=DEFAULT_COMMIT,
                    help="upstream openxla/xla commit the file comes from")
    ap.add_argument("--no-jaxlib", action="store_true",
                    help="do not record jaxlib's parser verdicts")
    ap.add_argument("--python", default=sys.executable,
                    help="python interpreter with jaxlib (default: this one)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print per-case extraction notes")
    args = ap.parse_args(argv)

    with open(args.cc_file, encoding="utf-8", newline="") as f:
        src = f.read()
    cases, skipped = extract(src)

    if args.verbose:
        for c in cases:
            if c["group"] == "test_f":
                extra = f" extra_args={c['_extra_args']}" if c["_extra_args"] else ""
                print(f"{c['id']}: {c['expect']} via {c['_how']}{extra}",
                      file=sys.stderr)
                for note in c["_notes"]:
                    print(f"  note: {note}", file=sys.stderr)

    version = None
    if args.no_jaxlib:
        verdicts = [None] * len(cases)
    else:
        version = jaxlib_version()
        if version is None:
            print("jaxlib not importable; use --no-jaxlib", file=sys.stderr)
            return 2
        verdicts = jaxlib_verdicts([c["text"] for c in cases], args.python)

    out_cases = []
    for c, v in zip(cases, verdicts):
        out_cases.append({
            "id": c["id"],
            "group": c["group"],
            "cc_line": c["cc_line"],
            "text": c["text"],
            "expected_output": c["expected_output"],
            "expect": c["expect"],
            "verified": c["verified"],
            "replica_count": c["replica_count"],
            "error_substrings": c["error_substrings"],
            "jaxlib": v,
        })
    doc = {
        "source": {"repo": SOURCE_REPO, "path": SOURCE_PATH,
                   "commit": args.source_commit, "license": LICENSE},
        "jaxlib_version": version,
        "cases": out_cases,
        "skipped": skipped,
    }
    data = json.dumps(doc, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        f.write(data)

    # Summary.
    groups = {}
    for c in out_cases:
        g = groups.setdefault(c["group"], {"valid": 0, "error": 0})
        g[c["expect"]] += 1
    print(f"wrote {len(out_cases)} cases, {len(skipped)} skipped -> {args.output}",
          file=sys.stderr)
    for g, d in groups.items():
        print(f"  {g}: valid={d['valid']} error={d['error']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
