"""The HLO tokenizer: the tokens of XLA's ``HloLexer``, with their offsets.

The parser reads canonical lines (one instruction per line, as XLA prints
them) with one regular expression each; everything else (comments,
instructions or headers continued over several lines, nested instructions,
computations written inline, text pasted without a header) goes through this
tokenizer, which follows ``xla/hlo/parser/hlo_lexer.cc``:

- whitespace is space, tab, newline and carriage return; ``/* ... */`` and
  ``// ...`` comments are skipped (an unterminated ``/*`` is an error at its
  start);
- an identifier ``[a-zA-Z_][a-zA-Z0-9_.-]*`` directly followed by ``:`` is a
  *name* (``x:`` in a parameter list), directly followed by ``=`` an
  *attribute name*; primitive type names, keywords, ``nan`` and the
  convolution ``dim_labels`` pattern are told apart from other identifiers;
- ``%name`` is a name;
- numbers are decimals, integers (64-bit; larger is an error), ``-inf``, and
  the patterns ``3x3`` (*dxd*), ``0_1x2_3`` (*pad*) and ``b01f_01io->b01f``
  (*dim labels*);
- strings are single- or double-quoted with C escapes.

Tokens are ``(kind, start, end, value)`` tuples over one text; `Lexer`
produces them one at a time with a one-token lookahead.  In tolerant mode an
identifier may hold any Unicode letter (names XLA would never print are still
read); strict mode keeps XLA's ASCII rule.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from ._shape import PRIMITIVE_BITS

__all__ = ["Lexer", "Tok", "Token", "LexError", "line_starts", "position", "unescape_c"]


class Tok:
    """Token kinds (small ints, compared by identity in the parser's hot loops)."""

    EOF = 0
    ERROR = 1
    EQUAL = 2
    COMMA = 3
    COLON = 4
    ASTERISK = 5
    QUESTION = 6
    OCTOTHORP = 7
    PLUS = 8
    TILDE = 9
    LSQUARE = 10
    RSQUARE = 11
    LBRACE = 12
    RBRACE = 13
    LPAREN = 14
    RPAREN = 15
    DOTS = 16
    ARROW = 17
    LEQ = 18
    KEYWORD = 19  # value: the keyword
    NEG_INF = 20
    PRIMITIVE_TYPE = 21  # value: the type name
    NAME = 22  # value: the name without '%' or ':'
    ATTRIBUTE_NAME = 23  # value: the name without '='
    DIM_LABELS = 24
    DXD = 25
    PAD = 26
    IDENT = 27
    STRING = 28  # value: the unescaped string
    INT = 29  # value: int
    DECIMAL = 30  # value: float

    NAMES = {
        0: "end of text", 1: "an invalid token", 2: "'='", 3: "','", 4: "':'", 5: "'*'",
        6: "'?'", 7: "'#'", 8: "'+'", 9: "'~'", 10: "'['", 11: "']'", 12: "'{'", 13: "'}'",
        14: "'('", 15: "')'", 16: "'...'", 17: "'->'", 18: "'<='", 19: "a keyword",
        20: "'-inf'", 21: "a primitive type", 22: "a name", 23: "an attribute name",
        24: "dim labels", 25: "a dxd pattern", 26: "a padding pattern", 27: "an identifier",
        28: "a string", 29: "an integer", 30: "a decimal",
    }


Token = tuple  # (kind, start, end, value)

KEYWORDS = frozenset({
    "true", "false", "inf", "HloModule", "ENTRY", "ROOT", "FileLocations", "FileNames",
    "FunctionNames", "StackFrames", "maximal", "replicated", "manual",
    "last_tile_dim_replicate", "shard_as", "shard_like", "unknown", "unreduced",
})
_PRIMITIVE_TYPES = frozenset(PRIMITIVE_BITS) | {"token", "opaque"}
_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1

_SINGLE = {
    "=": Tok.EQUAL, ",": Tok.COMMA, ":": Tok.COLON, "*": Tok.ASTERISK, "#": Tok.OCTOTHORP,
    "+": Tok.PLUS, "~": Tok.TILDE, "[": Tok.LSQUARE, "]": Tok.RSQUARE, "{": Tok.LBRACE,
    "}": Tok.RBRACE, "(": Tok.LPAREN, ")": Tok.RPAREN,
}
_WS_RE = re.compile(r"[ \t\n\r]*")
_WS_TOLERANT_RE = re.compile(r"[ \t\n\r\f\v\u00a0\ufeff]*")
_IDENT_ASCII_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.\-]*")
_IDENT_UNICODE_RE = re.compile(r"[^\W\d][\w.\-]*")
_PERCENT_ASCII_RE = re.compile(r"%([a-zA-Z_][a-zA-Z0-9_.\-]*)")
_PERCENT_UNICODE_RE = re.compile(r"%([^\W\d][\w.\-]*)")
_FLOAT_RE = re.compile(
    r"-?(?:(?:[0-9]+|[0-9]+\.[0-9]*|[0-9]*\.[0-9]+)[eE][+-]?[0-9]+)"
    r"|-?(?:[0-9]+\.[0-9]*|[0-9]*\.[0-9]+)")
_DIM_LABELS_RE = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")
_DXD_RE = re.compile(r"[0-9]+(?:x[0-9]+)+")
_PAD_RE = re.compile(r"-?[0-9]+_-?[0-9]+(?:_[0-9]+)?(?:x-?[0-9]+_-?[0-9]+(?:_[0-9]+)?)*")
_INT_RE = re.compile(r"-?[0-9]+")
_NAN_PAYLOAD_RE = re.compile(r"\(0x([0-9a-fA-F]+)\)")
_STRING_DQ_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_STRING_SQ_RE = re.compile(r"'(?:[^'\\]|\\.)*'", re.S)
_NAN_PAYLOAD_MASK = (1 << 52) - 1


class LexError(Exception):
    """An invalid token: `offset` is where it starts."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def line_starts(text: str) -> list[int]:
    """Offsets at which each line of `text` starts (``\\n`` ends a line)."""
    starts = [0]
    find = text.find
    i = find("\n")
    append = starts.append
    while i >= 0:
        append(i + 1)
        i = find("\n", i + 1)
    return starts


def position(starts: list[int], offset: int) -> tuple[int, int]:
    """0-based (line, column) of `offset`, given `line_starts`."""
    line = bisect_right(starts, offset) - 1
    return line, offset - starts[line]


_C_ESCAPE_RE = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)", re.S)
_C_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "a": "\a",
             "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def unescape_c(raw: str) -> str | None:
    """absl::CUnescape of `raw`; None where XLA's lexer would refuse it."""
    if "\\" not in raw:
        return raw
    out = bytearray()
    pos = 0
    for m in _C_ESCAPE_RE.finditer(raw):
        out += raw[pos : m.start()].encode("utf-8", "surrogatepass")
        e = m.group(1)
        if e[0] == "x":
            v = int(e[1:], 16)
            if v > 0xFF:
                return None
            out.append(v)
        elif e[0] in "01234567":
            v = int(e, 8)
            if v > 0xFF:
                return None
            out.append(v)
        elif e in _C_SIMPLE:
            out += _C_SIMPLE[e].encode()
        else:
            return None
        pos = m.end()
    out += raw[pos:].encode("utf-8", "surrogatepass")
    return out.decode("utf-8", "replace")


class Lexer:
    """Tokens of `text[start:stop]`, one at a time: `tok` is the current token.

    `advance()` moves to the next token and returns it; `peek()` returns the
    token after the current one without moving.  An invalid token is a
    ``Tok.ERROR`` token whose value is the reason; the parser decides what to
    do with it (XLA reports it where the parser expected something else).
    """

    __slots__ = ("text", "pos", "stop", "tok", "prev_end", "_peeked", "_ident", "_percent", "_ws",
                 "strict")

    def __init__(self, text: str, start: int = 0, stop: int | None = None, *,
                 strict: bool = False) -> None:
        self.text = text
        self.pos = start
        self.stop = len(text) if stop is None else stop
        self.strict = strict
        self._ident = _IDENT_ASCII_RE if strict else _IDENT_UNICODE_RE
        self._percent = _PERCENT_ASCII_RE if strict else _PERCENT_UNICODE_RE
        self._ws = _WS_RE if strict else _WS_TOLERANT_RE
        self._peeked: Token | None = None
        self.prev_end = start
        self.tok: Token = self._lex()

    # -- navigation -----------------------------------------------------------
    def advance(self) -> Token:
        self.prev_end = self.tok[2]
        if self._peeked is not None:
            self.tok, self._peeked = self._peeked, None
        else:
            self.tok = self._lex()
        return self.tok

    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._lex()
        return self._peeked

    def reset(self, offset: int) -> Token:
        """Move to `offset` and lex the token there."""
        self.pos = offset
        self.prev_end = offset
        self._peeked = None
        self.tok = self._lex()
        return self.tok

    @property
    def kind(self) -> int:
        return self.tok[0]

    # -- lexing ---------------------------------------------------------------
    def _skip(self) -> int | Token:
        """Skip whitespace and comments; return the next offset, or an error token."""
        text = self.text
        stop = self.stop
        ws = self._ws.match
        pos = self.pos
        while True:
            pos = ws(text, pos, stop).end()
            if pos < stop and text[pos] == "/":
                nxt = text[pos + 1 : pos + 2]
                if nxt == "*":
                    end = text.find("*/", pos + 2, stop)
                    if end < 0:
                        return (Tok.ERROR, pos, stop, "a '/*' comment is never closed")
                    pos = end + 2
                    continue
                if nxt == "/":
                    end = pos
                    while end < stop and text[end] not in "\n\r":
                        end += 1
                    pos = end
                    continue
            return pos

    def _lex(self) -> Token:
        skipped = self._skip()
        if isinstance(skipped, tuple):
            self.pos = skipped[2]
            return skipped
        pos = skipped
        text = self.text
        stop = self.stop
        if pos >= stop:
            self.pos = stop
            return (Tok.EOF, stop, stop, None)
        c = text[pos]
        if c in _SINGLE:
            self.pos = pos + 1
            return (_SINGLE[c], pos, pos + 1, c)
        if "0" <= c <= "9" or c in "-?":
            if c == "-" and text.startswith(">", pos + 1):
                self.pos = pos + 2
                return (Tok.ARROW, pos, pos + 2, "->")
            tok = self._number(pos)
            if tok[0] == Tok.ERROR and c == "?":
                self.pos = pos + 1
                return (Tok.QUESTION, pos, pos + 1, "?")
            return tok
        if c == "%":
            m = self._percent.match(text, pos, stop)
            if m is None:
                self.pos = pos + 1
                return (Tok.ERROR, pos, pos + 1, "'%' must be followed by a name")
            self.pos = m.end()
            return (Tok.NAME, pos, m.end(), m.group(1))
        if c == '"' or c == "'":
            m = (_STRING_DQ_RE if c == '"' else _STRING_SQ_RE).match(text, pos, stop)
            if m is None:
                self.pos = stop
                return (Tok.ERROR, pos, stop, "a string is never closed")
            value = unescape_c(text[pos + 1 : m.end() - 1])
            self.pos = m.end()
            if value is None:
                return (Tok.ERROR, pos, m.end(), "a string has an invalid escape sequence")
            return (Tok.STRING, pos, m.end(), value)
        if c == "<":
            if text.startswith("=", pos + 1):
                self.pos = pos + 2
                return (Tok.LEQ, pos, pos + 2, "<=")
            self.pos = pos + 1
            return (Tok.ERROR, pos, pos + 1, "unexpected '<'")
        if c == ".":
            if text.startswith("...", pos):
                self.pos = pos + 3
                return (Tok.DOTS, pos, pos + 3, "...")
            self.pos = pos + 1
            return (Tok.ERROR, pos, pos + 1, "unexpected '.'")
        m = self._ident.match(text, pos, stop)
        if m is not None:
            return self._identifier(pos, m.end())
        self.pos = pos + 1
        return (Tok.ERROR, pos, pos + 1, f"unexpected character {c!r}")

    def _identifier(self, pos: int, end: int) -> Token:
        text = self.text
        nxt = text[end : end + 1]
        word = text[pos:end]
        if nxt == ":":
            self.pos = end + 1
            return (Tok.NAME, pos, end + 1, word)
        if nxt == "=":
            self.pos = end + 1
            return (Tok.ATTRIBUTE_NAME, pos, end + 1, word)
        if word in _PRIMITIVE_TYPES:
            self.pos = end
            return (Tok.PRIMITIVE_TYPE, pos, end, word)
        if word == "nan":
            payload = 0
            if nxt == "(":
                m = _NAN_PAYLOAD_RE.match(text, end, self.stop)
                if m is None or not 0 < int(m.group(1), 16) <= _NAN_PAYLOAD_MASK:
                    self.pos = end
                    return (Tok.ERROR, pos, end, "bad NaN payload")
                payload = int(m.group(1), 16)
                end = m.end()
            self.pos = end
            return (Tok.DECIMAL, pos, end, _Nan(False, payload))
        if word in KEYWORDS:
            self.pos = end
            return (Tok.KEYWORD, pos, end, word)
        m = _DIM_LABELS_RE.match(text, pos, self.stop)
        if m is not None:
            self.pos = m.end()
            return (Tok.DIM_LABELS, pos, m.end(), m.group())
        self.pos = end
        return (Tok.IDENT, pos, end, word)

    def _number(self, pos: int) -> Token:
        text = self.text
        stop = self.stop
        m = _FLOAT_RE.match(text, pos, stop)
        if m is not None:
            self.pos = m.end()
            return (Tok.DECIMAL, pos, m.end(), float(m.group()))
        for kind, rx in ((Tok.DIM_LABELS, _DIM_LABELS_RE), (Tok.DXD, _DXD_RE),
                         (Tok.PAD, _PAD_RE)):
            m = rx.match(text, pos, stop)
            if m is not None:
                self.pos = m.end()
                return (kind, pos, m.end(), m.group())
        m = _INT_RE.match(text, pos, stop)
        if m is not None:
            digits = m.group()
            if len(digits) > 21:
                self.pos = m.end()
                return (Tok.ERROR, pos, m.end(), "integer out of range for int64")
            v = int(digits)
            if v < _INT64_MIN or v > _UINT64_MAX:
                self.pos = m.end()
                return (Tok.ERROR, pos, m.end(), "integer out of range for int64")
            if v > 2**63 - 1:
                v -= 2**64  # XLA bit-casts uint64 values to int64
            self.pos = m.end()
            return (Tok.INT, pos, m.end(), v)
        if text.startswith("-inf", pos):
            self.pos = pos + 4
            return (Tok.NEG_INF, pos, pos + 4, float("-inf"))
        if text.startswith("-nan", pos):
            end = pos + 4
            payload = 0
            if text.startswith("(", end):
                m = _NAN_PAYLOAD_RE.match(text, end, stop)
                if m is None or not 0 < int(m.group(1), 16) <= _NAN_PAYLOAD_MASK:
                    self.pos = end
                    return (Tok.ERROR, pos, end, "bad NaN payload")
                payload = int(m.group(1), 16)
                end = m.end()
            self.pos = end
            return (Tok.DECIMAL, pos, end, _Nan(True, payload))
        self.pos = pos + 1
        return (Tok.ERROR, pos, pos + 1, f"unexpected character {text[pos]!r}")


class _Nan(float):
    """A NaN read from text, with its sign and payload (0: the quiet NaN)."""

    sign: bool
    payload: int

    def __new__(cls, sign: bool, payload: int) -> _Nan:
        self = super().__new__(cls, "nan")
        self.sign = sign
        self.payload = payload
        return self
