"""Attribute values, shapes and literals read with XLA's exact grammar (``hloscope check``).

Each reader starts at the grammar's current token, consumes one value and
raises `GrammarError` with the message XLA's parser gives for the same
mistake, at the token XLA's parser points at.  The readers follow
``xla/hlo/parser/hlo_parser.cc`` (attribute kinds ``kBool``, ``kInt64``,
``kWindow``, ``kSharding``, ... and ``ParseShape``, ``ParseLiteral``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ._lexer import Tok
from ._shape import PRIMITIVE_BITS
from ._syntax import Grammar, GrammarError, match_bracket

__all__ = ["VALUE_READERS", "read_shape", "read_literal", "TYPE_TOKEN_NAMES"]

TYPE_TOKEN_NAMES = {
    Tok.EOF: "kEof", Tok.ERROR: "kError", Tok.EQUAL: "kEqual", Tok.COMMA: "kComma",
    Tok.COLON: "kColon", Tok.ASTERISK: "kAsterisk", Tok.QUESTION: "kQuestionMark",
    Tok.OCTOTHORP: "kOctothorp", Tok.PLUS: "kPlus", Tok.TILDE: "kTilde",
    Tok.LSQUARE: "kLsquare", Tok.RSQUARE: "kRsquare", Tok.LBRACE: "kLbrace",
    Tok.RBRACE: "kRbrace", Tok.LPAREN: "kLparen", Tok.RPAREN: "kRparen", Tok.DOTS: "kDots",
    Tok.ARROW: "kArrow", Tok.LEQ: "kLeq", Tok.NEG_INF: "kNegInf",
    Tok.PRIMITIVE_TYPE: "kPrimitiveType", Tok.NAME: "kName",
    Tok.ATTRIBUTE_NAME: "kAttributeName", Tok.DIM_LABELS: "kDimLabels", Tok.DXD: "kDxD",
    Tok.PAD: "kPad", Tok.IDENT: "kIdent", Tok.STRING: "kString", Tok.INT: "kInt",
    Tok.DECIMAL: "kDecimal",
}


def _kind(g: Grammar) -> int:
    return g.lx.tok[0]


def _is_kw(g: Grammar, word: str) -> bool:
    t = g.lx.tok
    return t[0] == Tok.KEYWORD and t[3] == word


# -- scalars ---------------------------------------------------------------------

def read_bool(g: Grammar) -> bool:
    t = g.lx.tok
    if t[0] != Tok.KEYWORD or t[3] not in ("true", "false"):
        g.fail("expects true or false")
    g.lx.advance()
    return t[3] == "true"


def read_int(g: Grammar) -> int:
    t = g.lx.tok
    if t[0] != Tok.INT:
        g.fail("expects integer")
    g.lx.advance()
    return t[3]


def _read_int32(g: Grammar) -> int:
    t = g.lx.tok
    v = read_int(g)
    if not -(2**31) <= v < 2**31:
        g.fail("value out of range for int32_t", t)
    return v


def read_double(g: Grammar) -> float:
    t = g.lx.tok
    k = t[0]
    if k == Tok.DECIMAL:
        v = t[3]
        if math.isinf(v):
            g.fail("Constant is out of range for double (+/-1.79769e+308) and so is unparsable.")
    elif k == Tok.INT:
        v = float(t[3])
    elif k == Tok.KEYWORD and t[3] == "inf":
        v = math.inf
    elif k == Tok.NEG_INF:
        v = -math.inf
    else:
        g.fail("expects decimal or integer")
    g.lx.advance()
    return v


def _read_float(g: Grammar) -> float:
    t = g.lx.tok
    v = read_double(g)
    if abs(v) > 3.4028234663852886e38 and not math.isinf(v):
        g.fail("value out of range for float", t)
    return v


def read_string(g: Grammar) -> str:
    t = g.lx.tok
    if t[0] != Tok.STRING:
        g.fail("expects string")
    g.lx.advance()
    return t[3]


def _read_string_or_json(g: Grammar) -> None:
    k = _kind(g)
    if k == Tok.STRING:
        g.lx.advance()
    elif k == Tok.LBRACE:
        _read_json_dict(g)
    else:
        g.fail("expects string")


def _read_json_dict(g: Grammar) -> None:
    """A JSON object as XLA's LexJsonDict takes it: braces counted, strings skipped."""
    start = g.lx.tok[1]
    text = g.text
    depth = 0
    i = start
    n = g.lx.stop
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                g.fail("expects JSON dict")
            i = j + 1
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                g.lx.reset(i + 1)
                return
        i += 1
    g.fail("expects JSON dict")


def _enum(values: frozenset[str], what: str, *, lower: bool = False,
          error: str = "") -> Callable[[Grammar], None]:
    def read(g: Grammar) -> None:
        t = g.lx.tok
        if t[0] != Tok.IDENT:
            g.fail(f"expects {what}")
        v = t[3].lower() if lower else t[3]
        if v not in values:
            detail = f", error: {error}" if error else ""
            g.fail(f"expects {what} but sees: {t[3]}{detail}")
        g.lx.advance()
    return read


# -- lists ---------------------------------------------------------------------------

def _list(g: Grammar, start: int, end: int, delim: int, item: Callable[[], object]) -> list:
    names = TYPE_TOKEN_NAMES
    g.expect(start, f"expects a list starting with {names[start]}")
    out = []
    if _kind(g) != end:
        while True:
            out.append(item())
            if not g.eat(delim):
                break
    g.expect(end, f"expects a list to end with {names[end]}")
    return out


def read_int_list(g: Grammar, start: int = Tok.LBRACE, end: int = Tok.RBRACE,
                  delim: int = Tok.COMMA) -> list[int]:
    names = TYPE_TOKEN_NAMES
    g.expect(start, f"expects a list to end with {names[end]}")
    out: list[int] = []
    if _kind(g) != end:
        while True:
            out.append(read_int(g))
            if _kind(g) != delim:
                break
            g.lx.advance()
    g.expect(end, f"expects a list to end with {names[end]}")
    return out


def read_int_list_list(g: Grammar) -> list[list[int]]:
    return _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: read_int_list(g))


def _read_shape_index(g: Grammar) -> list[int]:
    g.expect(Tok.LBRACE, "Expects '{' at the start of ShapeIndex")
    out = []
    while _kind(g) != Tok.RBRACE:
        out.append(read_int(g))
        if not g.eat(Tok.COMMA):
            break
    g.expect(Tok.RBRACE, "Expects '}' at the end of ShapeIndex")
    return out


# -- shapes ------------------------------------------------------------------------

def read_shape(g: Grammar) -> None:
    """A shape token by token (XLA's ParseShape), with its layout checks."""
    lx = g.lx
    g._enter()
    try:
        t = lx.tok
        if t[0] == Tok.IDENT and t[3] == "b" and lx.peek()[0] == Tok.LPAREN:
            lx.advance()
            lx.advance()
            read_shape(g)
            g.expect(Tok.RPAREN, "expects ')' at the end of buffer shape.")
            return
        if t[0] == Tok.LPAREN:
            lx.advance()
            if _kind(g) != Tok.RPAREN:
                while True:
                    read_shape(g)
                    if not g.eat(Tok.COMMA):
                        break
            g.expect(Tok.RPAREN, "expects ')' at the end of tuple.")
            return
        if t[0] != Tok.PRIMITIVE_TYPE:
            g.fail(f"expected primitive type, saw {TYPE_TOKEN_NAMES.get(t[0], 'kError')}")
        lx.advance()
        dims: list[int] = []

        def dim() -> None:
            if _kind(g) == Tok.QUESTION:
                lx.advance()
                dims.append(-1)
                return
            dynamic = g.eat(Tok.LEQ)
            v = read_int(g)
            if v < 0 and not dynamic:
                g.fail(f"invalid dimension size {v}")
            dims.append(v)

        _list(g, Tok.LSQUARE, Tok.RSQUARE, Tok.COMMA, dim)
        if _kind(g) == Tok.LBRACE and lx.peek()[0] in (Tok.INT, Tok.COLON):
            m2m, physical = _read_layout(g)
            if len(m2m) != len(dims):
                g.fail(f"Dimensions size is {len(dims)}, but minor to major size is "
                       f"{len(m2m)}.")
            if physical:
                g.fail("Layout has physical shape, but is not for a sparse array")
    finally:
        g.depth -= 1


def _read_layout(g: Grammar) -> tuple[list[int], bool]:
    lx = g.lx
    g.expect(Tok.LBRACE, "expects layout to start with kLbrace")
    m2m: list[int] = []
    physical = False
    if _kind(g) != Tok.RBRACE:
        if _kind(g) == Tok.INT:
            while True:
                m2m.append(read_int(g))
                if not g.eat(Tok.COMMA):
                    break
        if g.eat(Tok.COLON):
            if _ident(g, "D"):
                lx.advance()
                _read_dim_level_types(g)
            if _ident(g, "T"):
                lx.advance()
                while True:
                    _list(g, Tok.LPAREN, Tok.RPAREN, Tok.COMMA, lambda: _tile_dim(g))
                    if _kind(g) != Tok.LPAREN:
                        break
            if _ident(g, "L"):
                lx.advance()
                _paren_int(g, "multiple padded to in elements")
            if g.eat(Tok.OCTOTHORP):
                g.expect(Tok.LPAREN, "expects kOctothorp to be followed by kLparen")
                _unsigned_type(g)
                g.expect(Tok.RPAREN, "expects index primitive type to be followed by kRparen")
            if g.eat(Tok.ASTERISK):
                g.expect(Tok.LPAREN, "expects kAsterisk to be followed by kLparen")
                _unsigned_type(g)
                g.expect(Tok.RPAREN, "expects pointer primitive type to be followed by kRparen")
            if _ident(g, "E"):
                lx.advance()
                _paren_int(g, "element size in bits")
            if _ident(g, "S"):
                lx.advance()
                _paren_int(g, "memory space")
            if _ident(g, "SC"):
                lx.advance()
                while True:
                    g.expect(Tok.LPAREN, "expects split configs to start with kLparen")
                    read_int(g)
                    _list(g, Tok.COLON, Tok.RPAREN, Tok.COMMA, lambda: read_int(g))
                    if _kind(g) != Tok.LPAREN:
                        break
            if _ident(g, "P"):
                lx.advance()
                physical = True
                g.expect(Tok.LPAREN, "expects physical shape to start with kLparen")
                read_shape(g)
                g.expect(Tok.RPAREN, "expects physical shape to end with kRparen")
            if _ident(g, "M"):
                lx.advance()
                _paren_int(g, "dynamic shape metadata prefix bytes")
    g.expect(Tok.RBRACE, "expects layout to end with kRbrace")
    return m2m, physical


def _ident(g: Grammar, word: str) -> bool:
    t = g.lx.tok
    return t[0] == Tok.IDENT and t[3] == word


def _paren_int(g: Grammar, what: str) -> None:
    g.expect(Tok.LPAREN, f"expects {what} to start with kLparen")
    read_int(g)
    g.expect(Tok.RPAREN, f"expects {what} to end with kRparen")


def _tile_dim(g: Grammar) -> None:
    if _kind(g) == Tok.ASTERISK:
        g.lx.advance()
        return
    read_int(g)


def _unsigned_type(g: Grammar) -> None:
    t = g.lx.tok
    if t[0] != Tok.PRIMITIVE_TYPE:
        g.fail(f"expected primitive type, saw {TYPE_TOKEN_NAMES.get(t[0], 'kError')}")
    if not t[3].startswith("u"):
        g.fail("expecting an unsigned integer type")
    g.lx.advance()


def _read_dim_level_types(g: Grammar) -> None:
    def item() -> None:
        t = g.lx.tok
        if t[0] == Tok.IDENT and t[3] in ("D", "C", "S", "H"):
            g.lx.advance()
            g.eat(Tok.PLUS)
            g.eat(Tok.TILDE)
            return
        g.fail("expected a DimLevelType abbreviation (D, C, or S)")

    _list(g, Tok.LPAREN, Tok.RPAREN, Tok.COMMA, item)


# -- literals ------------------------------------------------------------------------

# Largest finite value and the spacing of values at that magnitude, per float type: a
# value rounds to a finite number of the type when it is below max + spacing / 2.
_FLOAT_RANGE = {
    "f16": (65504.0, 32.0), "bf16": (3.3895313892515355e38, 2.0**120),
    "f32": (3.4028234663852886e38, 2.0**104), "f64": (1.7976931348623157e308, 0.0),
    "f8e5m2": (57344.0, 8192.0), "f8e4m3fn": (448.0, 32.0), "f8e4m3": (240.0, 16.0),
    "f8e4m3fnuz": (240.0, 16.0), "f8e4m3b11fnuz": (30.0, 2.0), "f8e5m2fnuz": (57344.0, 8192.0),
    "f8e3m4": (15.5, 0.5), "f8e8m0fnu": (1.7014118346046923e38, 2.0**127), "f4e2m1fn": (6.0, 2.0),
}
# Bits a NaN payload may use, per float type (0: the type has no NaN payloads).
_NAN_PAYLOAD_BITS = {"f64": 52, "f32": 23, "f16": 10, "bf16": 7, "f8e5m2": 2, "f8e4m3": 3,
                     "f8e3m4": 4}
_COMPLEX_PART = {"c64": "f32", "c128": "f64"}
_UPPER = str.upper


def _int_range(etype: str) -> tuple[int, int]:
    bits = PRIMITIVE_BITS[etype]
    if etype.startswith("u"):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _fmt(v: float) -> str:
    return f"{v:g}"


def _check_value(g: Grammar, etype: str, value: object, tok: tuple, index: int,
                 shape_text: str) -> None:
    if etype == "pred":
        return
    if etype[0] in "su" and etype != "pred":
        lo, hi = _int_range(etype)
        v = int(value)  # type: ignore[call-overload]
        if etype.startswith("u"):
            uv = v & (2**64 - 1)
            if uv > hi:
                g.fail(f"value {v} is out of range for literal's primitive type "
                       f"{_UPPER(etype)} namely [0, {hi}].", tok)
        elif not lo <= v <= hi:
            g.fail(f"value {v} is out of range for literal's primitive type {_UPPER(etype)} "
                   f"namely [{lo}, {hi}].", tok)
        return
    if etype in _COMPLEX_PART:
        part = _COMPLEX_PART[etype]
        mx = _FLOAT_RANGE[part][0]
        for name, v in (("real", value[0]), ("imaginary", value[1])):  # type: ignore[index]
            if math.isfinite(v) and abs(v) > mx:
                g.fail(f"{name} part {_fmt(v)} is out of range for literal's primitive type "
                       f"{_UPPER(etype)}, namely [{_fmt(-mx)}, {_fmt(mx)}].", tok)
        return
    v = float(value)  # type: ignore[arg-type]
    mx, ulp = _FLOAT_RANGE.get(etype, (math.inf, 0.0))
    if math.isfinite(v) and abs(v) >= mx + ulp / 2 and (ulp or abs(v) > mx):
        g.fail(f"value {_fmt(v)} is out of range for literal's primitive type {_UPPER(etype)} "
               f"namely [{_fmt(-mx)}, {_fmt(mx)}].", tok)
    if math.isnan(v):
        payload = getattr(value, "payload", 0)
        if payload:
            bits = _NAN_PAYLOAD_BITS.get(etype, 0)
            if bits == 0:
                g.fail(f"tries to set NaN payload {hex(payload)} to a literal in shape "
                       f"{shape_text} at linear index {index}, but {etype} does not support "
                       "payloads", tok)
            if payload > (1 << bits) - 1:
                g.fail(f"tries to set NaN payload {hex(payload)} to a literal in shape "
                       f"{shape_text} at linear index {index}, but the NaN payload is out of "
                       f"range ({hex((1 << bits) - 1)})", tok)


def read_literal(g: Grammar, etype: str, dims: tuple[int, ...], tuple_shapes: tuple | None,
                 shape_text: str) -> None:
    """A constant's literal for a shape (XLA's ParseLiteral with a known shape)."""
    if tuple_shapes is not None:
        g._enter()
        try:
            g.expect(Tok.LPAREN, "expects '(' in front of tuple elements")
            if _kind(g) != Tok.RPAREN:
                for i, s in enumerate(tuple_shapes):
                    if i > 0:
                        g.expect(Tok.COMMA, "expects ',' to separate tuple elements")
                    if s.is_tuple:
                        read_literal(g, "tuple", (), s.tuple_shapes, s.to_text())
                    else:
                        read_literal(g, s.element_type, s.dims, None, s.without_layout())
            g.expect(Tok.RPAREN, "expects ')' at the end of the tuple")
        finally:
            g.depth -= 1
        return
    _dense_literal(g, etype, dims, shape_text)


def _dense_literal(g: Grammar, etype: str, dims: tuple[int, ...], shape_text: str) -> None:
    lx = g.lx
    rank = len(dims)
    nest = 0
    linear = 0
    seen = [0] * rank

    def index_str(d: int) -> str:
        return "[" + ",".join(str(x - 1) for x in seen[:d]) + "]"

    def one_elem() -> None:
        if rank > 0:
            if nest != rank:
                g.fail(f"expects nested array in rank {rank}, but sees {nest}")
            seen[rank - 1] += 1
            if seen[rank - 1] > dims[rank - 1]:
                g.fail(f"expects {dims[rank - 1]} elements on the minor-most dimension, but "
                       "sees more")

    is_complex = etype in _COMPLEX_PART
    is_int = etype[0] in "su" or etype == "pred"
    while True:
        t = lx.tok
        k = t[0]
        if k == Tok.LBRACE:
            nest += 1
            if nest > rank:
                g.fail(f"expects nested array in rank {rank}, but sees larger")
            if nest > 1:
                seen[nest - 2] += 1
                if seen[nest - 2] > dims[nest - 2]:
                    g.fail(f"expects {dims[nest - 2]} elements in the {index_str(nest - 2)}th "
                           "element, but sees more")
            lx.advance()
        elif k == Tok.RBRACE:
            if nest == 0:
                g.fail("unexpected '}' token")
            nest -= 1
            if seen[nest] != dims[nest]:
                g.fail(f"expects {dims[nest]} elements in the {index_str(nest)}th element, "
                       f"but sees {seen[nest]}")
            seen[nest] = 0
            lx.advance()
        elif k == Tok.LPAREN:
            if not is_complex:
                g.fail("unexpected '(' in literal. Parens are only valid for complex literals")
            one_elem()
            lx.advance()
            re_ = read_double(g)
            if _kind(g) != Tok.COMMA:
                g.fail("expect comma after real part of complex literal")
            lx.advance()
            im = read_double(g)
            if _kind(g) != Tok.RPAREN:
                g.fail("expect ')' after complex number")
            lx.advance()
            _check_value(g, etype, (re_, im), t, linear, shape_text)
            linear += 1
        elif k == Tok.DOTS:
            if nest != 1:
                g.fail(f"expects `...` at nest level 1, but sees it at nest level {nest}")
            seen[0] = dims[0]
            lx.advance()
        elif k == Tok.COMMA:
            lx.advance()
        elif k in (Tok.INT, Tok.DECIMAL, Tok.NEG_INF) or (
                k == Tok.KEYWORD and t[3] in ("true", "false", "inf")):
            one_elem()
            if k == Tok.KEYWORD and t[3] in ("true", "false"):
                if etype != "pred":
                    g.fail(f"expects integer for primitive type: {_UPPER(etype)}")
                lx.advance()
            elif is_int:
                if k != Tok.INT:
                    g.fail(f"expects integer for primitive type: {_UPPER(etype)}")
                lx.advance()
                _check_value(g, etype, t[3], t, linear, shape_text)
            elif etype in _FLOAT_RANGE:
                v = read_double(g)
                _check_value(g, etype, t[3] if k == Tok.DECIMAL else v, t, linear, shape_text)
            else:
                g.fail(f"unsupported primitive type {_UPPER(etype)}")
            linear += 1
        else:
            g.fail("unexpected token type in a literal")
        if nest <= 0:
            return


# -- structured values -----------------------------------------------------------------

def _read_computation(g: Grammar) -> None:
    t = g.lx.tok
    if t[0] == Tok.LBRACE:
        g.fail("expects computation name")  # inline bodies are read by the grammar
    if t[0] not in (Tok.NAME, Tok.IDENT):
        g.fail("expects computation name")
    g.lx.advance()
    if t[3] not in g.scope.comp_names:
        g.fail(f"computation does not exist: {t[3]}", t)


def _read_computation_list(g: Grammar) -> None:
    _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: _read_computation(g))


def _read_window(g: Grammar) -> None:
    start = g.lx.tok
    g.expect(Tok.LBRACE, "expected '{' to start window attribute")
    sizes: dict[str, int] = {}
    while _kind(g) != Tok.RBRACE:
        t = g.lx.tok
        if t[0] != Tok.ATTRIBUTE_NAME:
            g.fail("expects sub-attributes in window")
        field = t[3]
        g.lx.advance()
        if field in sizes:
            g.fail(f"sub-attribute '{field}=' already exists", t)
        if field in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            v = g.lx.tok
            if v[0] == Tok.INT:
                sizes[field] = 1
            elif v[0] == Tok.DXD:
                sizes[field] = v[3].count("x") + 1
            else:
                g.fail("expects token type kInt or kDxD")
            g.lx.advance()
        elif field == "pad":
            v = g.lx.tok
            if v[0] != Tok.PAD:
                g.fail("expects window pad pattern, e.g., '0_0x3_3'")
            for part in v[3].split("x"):
                if len(part.split("_")) != 2:
                    g.fail("expects padding_low and padding_high separated by '_'", v)
            sizes[field] = v[3].count("x") + 1
            g.lx.advance()
        else:
            g.fail(f"unexpected attribute name: {field}", t)
    n = sizes.get("size", 0)
    for field in ("stride", "lhs_dilate", "rhs_dilate", "pad"):
        if field in sizes and sizes[field] != n:
            g.fail(f"expects '{field}=' has the same size as 'size='", start)
    g.lx.advance()


def _read_dim_labels(g: Grammar) -> None:
    t = g.lx.tok
    if t[0] != Tok.DIM_LABELS:
        g.fail("expects dim labels pattern, e.g., 'bf0_0io->0bf'")
    lhs, rest = t[3].split("_", 1)
    rhs, out = rest.split("->", 1)
    counts = []
    for part, which, letters in ((lhs, "lhs", "bf"), (rhs, "rhs", "io"), (out, "output", "bf")):
        chars = [c for c in part if c != "?"]
        if len(set(chars)) != len(chars):
            g.fail(f"expects unique {which} dimension numbers, but sees {part}")
        for c in part:
            if c == "?" or c in letters:
                continue
            if not ("0" <= c < chr(ord("0") + len(part))):
                g.fail(f"expects [0-{len(part) - 1}{letters}?] in {which} dimension numbers")
        counts.append(sum(1 for c in part if c not in letters and c != "?"))
    if not counts[0] == counts[1] == counts[2]:
        g.fail("input, kernel, and output must have same number of spatial dimensions, but "
               f"got {counts[0]}, {counts[1]}, {counts[2]}, respectively.")
    g.lx.advance()


def _read_slice_ranges(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "expects '{' to start ranges")
    if _kind(g) == Tok.RBRACE:
        g.lx.advance()
        return
    while True:
        t = g.lx.tok
        r = read_int_list(g, Tok.LSQUARE, Tok.RSQUARE, Tok.COLON)
        if len(r) not in (2, 3):
            g.fail(f"expects [start:limit:step] or [start:limit], but sees {len(r)} elements.",
                   t)
        if not g.eat(Tok.COMMA):
            break
    g.expect(Tok.RBRACE, "expects '}' to end ranges")


def _read_padding_config(g: Grammar) -> None:
    t = g.lx.tok
    if t[0] != Tok.PAD:
        g.fail("expects padding config, e.g., '0_0_0x3_3_1'")
    for part in t[3].split("x"):
        if len(part.split("_")) not in (2, 3):
            g.fail("expects padding config pattern like 'low_high_interior' or 'low_high'")
    g.lx.advance()


def _sub_attributes(g: Grammar, fields: dict[str, Callable[[Grammar], object]],
                    required: tuple[str, ...] = ()) -> None:
    start = g.lx.tok
    g.expect(Tok.LBRACE, "expects '{' to start sub attributes")
    seen: set[str] = set()
    while _kind(g) != Tok.RBRACE:
        g.eat(Tok.COMMA)
        t = g.lx.tok
        if t[0] != Tok.ATTRIBUTE_NAME:
            g.fail("expects attribute name")
        g.lx.advance()
        if t[3] in seen:
            g.fail(f"attribute {t[3]} already exists", t)
        seen.add(t[3])
        reader = fields.get(t[3])
        if reader is None:
            allowed = ", ".join(sorted(fields))
            g.fail(f'unexpected attribute "{t[3]}". Allowed attributes: {allowed}', t)
        reader(g)
    for r in required:
        if r not in seen:
            g.fail(f"sub-attribute {r} is expected but not seen", start)
    g.lx.advance()


_METADATA_FIELDS: dict[str, Callable[[Grammar], object]] = {
    "op_type": read_string, "op_name": read_string, "source_file": read_string,
    "source_line": _read_int32, "source_end_line": _read_int32, "source_column": _read_int32,
    "source_end_column": _read_int32, "profile_type": read_int_list,
    "deduplicated_name": read_string, "scheduling_name": read_string,
    "stack_frame_id": _read_int32, "metadata_payload": read_string,
}


def read_metadata(g: Grammar) -> None:
    _sub_attributes(g, _METADATA_FIELDS)


def _read_single_or_list_metadata(g: Grammar) -> None:
    if _kind(g) == Tok.LBRACE and g.lx.peek()[0] == Tok.LBRACE:
        _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: read_metadata(g))
        return
    read_metadata(g)


def read_sharding(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "expected '{' to start sharding attribute")
    if _kind(g) not in (Tok.LBRACE, Tok.RBRACE):
        _single_sharding(g, pre_lexed=True)
        return
    if _kind(g) != Tok.RBRACE:
        while True:
            _single_sharding(g, pre_lexed=False)
            if not g.eat(Tok.COMMA):
                break
    g.expect(Tok.RBRACE, "expected '}' to end sharding attribute")


def _single_sharding(g: Grammar, *, pre_lexed: bool) -> None:
    lx = g.lx
    if not pre_lexed:
        g.expect(Tok.LBRACE, "expected '{' to start sharding attribute")
    t = lx.tok
    if t[0] == Tok.IDENT and t[3] in ("mesh", "maximal_mesh"):
        _named_sharding(g)
        return
    start = t
    kinds: set[str] = set()
    devices = 0
    tile = False
    iota = False
    while _kind(g) != Tok.RBRACE:
        t = lx.tok
        k = t[0]
        if k == Tok.KEYWORD and t[3] in ("maximal", "replicated", "manual", "unknown",
                                          "unreduced", "last_tile_dim_replicate"):
            kinds.add(t[3])
            lx.advance()
        elif k == Tok.KEYWORD and t[3] in ("shard_as", "shard_like"):
            lx.advance()
            read_int(g)
        elif k == Tok.ATTRIBUTE_NAME:
            lx.advance()
            if t[3] == "device":
                if _kind(g) != Tok.INT:
                    g.fail("device= attribute must be an integer")
                devices = 1
                lx.advance()
            elif t[3] == "devices":
                tile = True
                read_int_list(g, Tok.LSQUARE, Tok.RSQUARE)
                if _kind(g) == Tok.LEQ:
                    lx.advance()
                    iota = True
                    _iota_array(g)
                else:
                    devices = 0
                    while True:
                        read_int(g)
                        devices += 1
                        if not g.eat(Tok.COMMA):
                            break
            elif t[3] == "metadata":
                _read_single_or_list_metadata(g)
            elif t[3] == "last_tile_dims":
                _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: _sharding_type(g))
            else:
                g.fail("unknown attribute in sharding: expected device=, devices= metadata= or "
                       "last_tile_dims= ", t)
        else:
            g.fail("unexpected token")
    if kinds & {"replicated", "manual", "unknown", "unreduced"} and devices:
        kind = next(iter(kinds & {"replicated", "manual", "unknown", "unreduced"}))
        g.fail(f"{kind} shardings should not have any devices assigned", start)
    if "maximal" in kinds and devices != 1:
        g.fail("maximal shardings should have exactly one device assigned", start)
    if not kinds - {"last_tile_dim_replicate"}:
        if not tile:
            g.fail("non-maximal shardings must have a tile assignment list including "
                   "dimensions", start)
        if not iota and devices <= 1:
            g.fail("non-maximal shardings must have more than one device assigned", start)
    lx.advance()


def _sharding_type(g: Grammar) -> None:
    t = g.lx.tok
    if t[0] == Tok.KEYWORD and t[3] in ("maximal", "replicated", "manual", "unreduced"):
        g.lx.advance()
        return
    g.fail("expected a sharding type")


def _iota_array(g: Grammar) -> None:
    reshape = read_int_list(g, Tok.LSQUARE, Tok.RSQUARE)
    if not reshape:
        g.fail("expected non-empty iota_reshape_dims")
    if len(reshape) > 1:
        if not _ident(g, "T"):
            g.fail("expected 'T(' to start sharding devices iota_transpose_perm")
        g.lx.advance()
        perm = read_int_list(g, Tok.LPAREN, Tok.RPAREN)
        for d in perm:
            if d >= len(reshape):
                g.fail(f"Out of range iota minor_to_major value {d}, expecting value in range "
                       f"[0, {len(reshape)})")
        if len(perm) != len(reshape):
            g.fail("iota_transpose_perm should have the same rank as iota_reshape_dims : "
                   f"expected {len(reshape)}, saw {len(perm)}.")


def _mesh(g: Grammar) -> list[str]:
    """``mesh['a'=2, 'b'=4]`` (optionally ``, device_ids=(...)``); returns the axis names."""
    lx = g.lx
    kind = lx.tok[3]
    lx.advance()
    if kind == "maximal_mesh":
        g.expect(Tok.LSQUARE, "expected '[' after maximal_mesh")
        t = lx.tok
        if t[0] != Tok.ATTRIBUTE_NAME or t[3] != "device_id":
            g.fail("expected device_id= attribute in maximal_mesh")
        lx.advance()
        read_int(g)
        g.expect(Tok.RSQUARE, "expected ']' to end maximal_mesh")
        return []
    g.expect(Tok.LSQUARE, "expected '[' after mesh")
    names: list[str] = []
    sizes: list[int] = []
    if _kind(g) != Tok.RSQUARE:
        while True:
            names.append(read_string(g))
            g.expect(Tok.EQUAL, "expects '=' after axis name")
            sizes.append(read_int(g))
            if not g.eat(Tok.COMMA):
                break
    g.expect(Tok.RSQUARE, "expected ']' to end mesh axes")
    if names and _kind(g) == Tok.COMMA and lx.peek()[0] == Tok.ATTRIBUTE_NAME \
            and lx.peek()[3] == "device_ids":
        lx.advance()
        lx.advance()
        g.expect(Tok.LPAREN, "expected '(' for device_ids")
        if _kind(g) == Tok.LSQUARE:
            _iota_array(g)
        else:
            count = 0
            if _kind(g) != Tok.RPAREN:
                while True:
                    read_int(g)
                    count += 1
                    if not g.eat(Tok.COMMA):
                        break
            total = math.prod(sizes)
            if count != total:
                g.fail(f"Expected {total} device_ids based on mesh axes, but got {count}")
        g.expect(Tok.RPAREN, "expected ')' to end device_ids")
    return names


def _axis_ref(g: Grammar, names: list[str]) -> None:
    t = g.lx.tok
    axis = read_string(g)
    if axis in names:
        index = names.index(axis)
    else:
        try:
            index = int(axis)
        except ValueError:
            g.fail(f"axis '{axis}' is not a valid axis name or index in mesh", t)
    if not 0 <= index < len(names):
        g.fail(f"axis index {index} is out of bounds for mesh which has {len(names)} axes", t)
    if g.eat(Tok.COLON):
        g.expect(Tok.LPAREN, "expected '(' before pre_size in sub axis")
        read_int(g)
        g.expect(Tok.RPAREN, "expected ')' after pre_size in sub axis")
        read_int(g)


def _named_sharding(g: Grammar) -> None:
    lx = g.lx
    is_maximal = lx.tok[3] == "maximal_mesh"
    names = _mesh(g)

    def metadata_if_present() -> None:
        if g.eat(Tok.COMMA):
            t = lx.tok
            if t[0] != Tok.ATTRIBUTE_NAME or t[3] != "metadata":
                g.fail("expects attribute name")
            lx.advance()
            _read_single_or_list_metadata(g)

    if is_maximal:
        metadata_if_present()
        g.expect(Tok.RBRACE, "expected '}' to end sharding attribute")
        return
    g.eat(Tok.COMMA)
    t = lx.tok
    if t[0] == Tok.KEYWORD and t[3] in ("replicated", "manual"):
        lx.advance()
        metadata_if_present()
        g.expect(Tok.RBRACE, "expected '}' to end sharding attribute")
        return
    if (t[0] == Tok.ATTRIBUTE_NAME and t[3] == "unreduced") or _is_kw(g, "unreduced"):
        lx.advance()
        if t[0] == Tok.KEYWORD:
            g.eat(Tok.EQUAL)
        if _kind(g) in (Tok.IDENT, Tok.ATTRIBUTE_NAME) and lx.tok[3] in ("sum", "max", "min"):
            lx.advance()
        if _kind(g) == Tok.LBRACE:
            _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: _axis_ref(g, names))
        metadata_if_present()
        g.expect(Tok.RBRACE, "expected '}' to end sharding attribute")
        return

    def dim_sharding() -> None:
        def item() -> None:
            if _kind(g) == Tok.QUESTION:
                lx.advance()
                return
            _axis_ref(g, names)
        _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, item)

    _list(g, Tok.LSQUARE, Tok.RSQUARE, Tok.COMMA, dim_sharding)
    while _kind(g) != Tok.RBRACE:
        g.expect(Tok.COMMA, "expected ',' before next attribute")
        t = lx.tok
        if t[0] != Tok.ATTRIBUTE_NAME:
            g.fail("expects attribute name")
        lx.advance()
        if t[3] in ("replicated", "manual"):
            _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: _axis_ref(g, names))
        elif t[3] == "unreduced":
            if _kind(g) in (Tok.IDENT, Tok.ATTRIBUTE_NAME) and lx.tok[3] in ("sum", "max", "min"):
                lx.advance()
            _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: _axis_ref(g, names))
        elif t[3] == "metadata":
            _read_single_or_list_metadata(g)
        else:
            g.fail("unknown attribute in named sharding: expected replicated, unreduced, "
                   "manual or metadata", t)
    lx.advance()


def read_device_list(g: Grammar) -> None:
    """``replica_groups=``: ``{{0,1},{2,3}}``, iota ``[2,2]<=[4]``, or a mesh form."""
    lx = g.lx
    if _kind(g) == Tok.LBRACE:
        read_int_list_list(g)
        return
    t = lx.tok
    if t[0] == Tok.IDENT and t[3] in ("mesh", "maximal_mesh"):
        names = _mesh(g)
        _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: _axis_ref(g, names))
        return
    dims = read_int_list(g, Tok.LSQUARE, Tok.RSQUARE)
    if _kind(g) != Tok.LEQ:
        g.fail("Caller expected iota tile assignment when parsing, which should not have any "
               "manual device entries.")
    lx.advance()
    _iota_array(g)
    if len(dims) != 2:
        g.fail("expected the iota replica groups to have 2 dimensions", t)


def _read_frontend_attributes(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "expected '{' to start frontend attributes")
    if _kind(g) != Tok.RBRACE:
        while True:
            t = g.lx.tok
            if t[0] != Tok.ATTRIBUTE_NAME:
                g.fail("expects attribute name")
            g.lx.advance()
            if _kind(g) == Tok.STRING:
                g.lx.advance()
            elif _kind(g) == Tok.LBRACE:
                _read_json_dict(g)
            else:
                g.fail("expects string")
            if not g.eat(Tok.COMMA):
                break
    g.expect(Tok.RBRACE, "expects '}' at the end of frontend attributes")


def _read_statistics(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "expected '{' to start statistics")
    if _kind(g) != Tok.RBRACE:
        if _kind(g) != Tok.ATTRIBUTE_NAME:
            g.fail("expects attribute name")
        g.lx.advance()
        read_int(g)
        while g.eat(Tok.COMMA):
            if _kind(g) != Tok.ATTRIBUTE_NAME:
                g.fail("expects attribute name")
            g.lx.advance()
            if _kind(g) not in (Tok.INT, Tok.DECIMAL):
                g.fail("expects decimal or integer")
            g.lx.advance()
    g.expect(Tok.RBRACE, "expects '}' at the end of statistics")


def _read_bool_list(g: Grammar) -> list[bool]:
    g.expect(Tok.LBRACE, "expected '{' to start parameter_replication attribute")
    out = []
    if _kind(g) != Tok.RBRACE:
        while True:
            out.append(read_bool(g))
            if not g.eat(Tok.COMMA):
                break
    g.expect(Tok.RBRACE, "expected '}' to end parameter_replication attribute")
    return out


def _read_bool_list_or_bool(g: Grammar) -> None:
    if _is_kw(g, "true") or _is_kw(g, "false"):
        g.lx.advance()
        return
    if _kind(g) != Tok.LBRACE:
        g.fail("Expected list of booleans or true/false value")
    _read_bool_list(g)


def _read_instruction_names(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "expects '{' at the beginning of instruction name list")
    body = g.scope.stack[-1] if g.scope.stack else None
    while True:
        t = g.lx.tok
        if t[0] not in (Tok.NAME, Tok.IDENT):
            g.fail("expects a instruction name")
        g.lx.advance()
        if body is None or t[3] not in body.by_name:
            g.fail(f"instruction '{t[3]}' is not defined", g.lx.tok)
        if not g.eat(Tok.COMMA):
            break
    g.expect(Tok.RBRACE, "expects '}' at the end of instruction name list")


def _read_domain(g: Grammar) -> None:
    _sub_attributes(g, {"kind": read_string, "entry": read_sharding, "exit": read_sharding},
                    ("entry", "exit", "kind"))


def _read_precision_list(g: Grammar) -> None:
    reader = _enum(frozenset({"default", "high", "highest", "packed_nibble"}), "precision",
                   lower=True, error="Unknown precision")
    _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: reader(g))


def _read_shape_list(g: Grammar) -> None:
    _list(g, Tok.LBRACE, Tok.RBRACE, Tok.COMMA, lambda: read_shape(g))


def _read_instruction_aliasing(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "Expects '{' at the start of instruction aliasing description")
    msg = ("Expected format: <output_shape_index>: (<operand_index>, "
           "<operand_shape_index>)")
    while _kind(g) != Tok.RBRACE:
        _read_shape_index(g)
        g.expect(Tok.COLON, msg)
        g.expect(Tok.LPAREN, msg)
        read_int(g)
        g.expect(Tok.COMMA, msg)
        _read_shape_index(g)
        g.expect(Tok.RPAREN, msg)
        if not g.eat(Tok.COMMA):
            break
    g.expect(Tok.RBRACE, "Expects '}' at the end of instruction aliasing description")


def read_module_aliasing(g: Grammar) -> list[tuple[list[int], int, list[int]]]:
    g.expect(Tok.LBRACE, "Expects '{' at the start of aliasing description")
    msg = ("Expected format: <output_shape_index>: (<input_param>, "
           "<input_param_shape_index>) OR <output_shape_index>: <input_param>")
    out = []
    while _kind(g) != Tok.RBRACE:
        index = _read_shape_index(g)
        g.expect(Tok.COLON, msg)
        g.expect(Tok.LPAREN, msg)
        param = read_int(g)
        g.expect(Tok.COMMA, msg)
        pindex = _read_shape_index(g)
        if g.eat(Tok.COMMA):
            t = g.lx.tok
            if t[0] not in (Tok.NAME, Tok.IDENT) or t[3] not in ("must-alias", "may-alias"):
                g.fail("Unexpected aliasing kind; expected SYSTEM or USER")
            g.lx.advance()
        g.expect(Tok.RPAREN, msg)
        out.append((index, param, pindex))
        if not g.eat(Tok.COMMA):
            break
    g.expect(Tok.RBRACE, "Expects '}' at the end of aliasing description")
    return out


def read_buffer_donors(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "Expects '{' at the start of buffer donor description")
    msg = "Expected format: (<input_param>, <input_param_shape_index>)"
    while _kind(g) != Tok.RBRACE:
        g.expect(Tok.LPAREN, msg)
        read_int(g)
        g.expect(Tok.COMMA, msg)
        _read_shape_index(g)
        g.expect(Tok.RPAREN, msg)
        if not g.eat(Tok.COMMA):
            break
    g.expect(Tok.RBRACE, "Expects '}' at the end of buffer donor description")


def _read_computation_layout(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "Expects '{' at the start of aliasing description")
    g.expect(Tok.LPAREN, "Expects ( before parameter shape list")
    while _kind(g) != Tok.RPAREN:
        read_shape(g)
        if _kind(g) == Tok.RPAREN:
            break
        g.expect(Tok.COMMA, "Expects , between parameter shapes")
    g.expect(Tok.RPAREN, "Expects ) at end of parameter shape list")
    g.expect(Tok.ARROW, "Expects -> before result shape")
    read_shape(g)
    g.expect(Tok.RBRACE, "Expects '}' at the end of computation layouts")


def _read_result_accuracy(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "expected '{' to start result precision list")
    t = g.lx.tok
    if t[0] != Tok.ATTRIBUTE_NAME:
        g.fail("expects attribute name")
    g.lx.advance()
    if t[3] == "mode":
        _enum(frozenset({"default", "highest", "tolerance"}), "ResultAccuracy type", lower=True,
              error="Unknown accuracy mode")(g)
    elif t[3] == "tolerance":
        g.expect(Tok.LBRACE, "expected '{' to start result accuracy list")
        if _kind(g) != Tok.RBRACE:
            while True:
                f = g.lx.tok
                if f[0] != Tok.ATTRIBUTE_NAME:
                    g.fail("expects string for result_accuracy tolerance type")
                g.lx.advance()
                if f[3] not in ("ulps", "rtol", "atol"):
                    g.fail(f"invalid attribute name: {f[3]}")
                read_double(g)
                if not g.eat(Tok.COMMA):
                    break
        g.expect(Tok.RBRACE, "expects '}' at the end of result precision")
    else:
        g.fail(f"invalid attribute name: {t[3]}")
    g.expect(Tok.RBRACE, "expected '}' to end result_accuracy")


def _read_sparsity(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "expected '{' to start SparsityConfig")
    while _kind(g) != Tok.RBRACE:
        t = g.lx.tok
        if t[0] != Tok.ATTRIBUTE_NAME:
            g.fail("expects attribute name")
        g.lx.advance()
        if t[3] not in ("lhs", "rhs"):
            g.fail("unknown attribute")
        g.expect(Tok.LBRACE, "expected '{' to start TensorSparsityConfig")
        while _kind(g) != Tok.RBRACE:
            f = g.lx.tok
            if f[0] != Tok.ATTRIBUTE_NAME:
                g.fail("expects attribute name")
            g.lx.advance()
            v = g.lx.tok
            if f[3] == "sparsity":
                if v[0] != Tok.DXD or v[3].count("x") != 1:
                    g.fail("expects 'num_non_zero:block_size'")
            elif f[3] in ("dimension", "stride"):
                if v[0] != Tok.INT:
                    g.fail("expects int64_t")
            else:
                g.fail("unknown attribute")
            g.lx.advance()
        g.lx.advance()
    g.lx.advance()


def _read_original_value(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "Expects '{' to start original value")
    if g.eat(Tok.LSQUARE):
        if not _ident(g, "synthetic_call"):
            g.fail("Expects 'synthetic_call' after '[' for a synthetic_call value.")
        g.lx.advance()
        g.expect(Tok.RSQUARE, "Expects ']' to end '[synthetic_call]'")
        g.expect(Tok.RBRACE, "Expects '}' to end original value")
        return
    depth = 0
    while _kind(g) != Tok.RBRACE:
        k = _kind(g)
        if k == Tok.LPAREN:
            depth += 1
            g.lx.advance()
        elif k == Tok.RPAREN:
            depth -= 1
            g.lx.advance()
        elif k == Tok.COMMA:
            g.lx.advance()
        elif k == Tok.LBRACE:
            _read_original_array(g)
        else:
            g.fail("Expects '[synthetic]' or a tuple tree of original arrays in "
                   "original_value field.")
    g.lx.advance()


def _read_original_array(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "Expects '{'")
    if _kind(g) == Tok.STRING:
        g.lx.advance()
        if _kind(g) == Tok.LBRACE:
            _read_shape_index(g)
    g.expect(Tok.RBRACE, "Expects '} at end of OriginalArray'")


def _read_recovery_table(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "Expects '{'")
    msg = "Expected format: <original_array>: <original_array>, <HloModule>"
    while _kind(g) != Tok.RBRACE:
        _read_original_array(g)
        g.expect(Tok.COLON, msg)
        _read_original_array(g)
        if _kind(g) == Tok.COMMA:
            g.lx.advance()
            read_string(g)
    g.lx.advance()


def _read_debug_attributes(g: Grammar) -> None:
    g.expect(Tok.LBRACE, "Expects '{' to start debug_attributes")
    if _kind(g) == Tok.RBRACE:
        g.lx.advance()
        return

    def one() -> None:
        g.expect(Tok.LBRACE, "Expects '{' to start debug attributes")
        while True:
            t = g.lx.tok
            if t[0] != Tok.ATTRIBUTE_NAME:
                g.fail("Expects attribute name in debug attributes")
            g.lx.advance()
            if t[3] == "log_mode":
                v = g.lx.tok
                if v[0] not in (Tok.NAME, Tok.IDENT):
                    g.fail("expects name")
                if v[3] not in ("default", "fusion_debugger"):
                    g.fail(f"Invalid debug_log_mode value: {v[3]}")
                g.lx.advance()
            elif t[3] in ("callback_id", "op_id"):
                read_int(g)
            elif t[3] == "partitioned":
                read_bool(g)
            else:
                g.fail(f"Unknown debug attribute: {t[3]}", t)
            if not g.eat(Tok.COMMA):
                break
        g.expect(Tok.RBRACE, "Expects '}' to end debug attributes")

    while True:
        _read_original_array(g)
        g.expect(Tok.COLON, "Expects ':' in debug_attributes entry")
        if g.eat(Tok.LPAREN):
            if _kind(g) != Tok.RPAREN:
                while True:
                    one()
                    if not g.eat(Tok.COMMA):
                        break
            g.expect(Tok.RPAREN, "Expects ')' after list of debug_attributes")
        else:
            one()
        if not g.eat(Tok.COMMA):
            break
    g.expect(Tok.RBRACE, "Expects '}' to end debug_attributes")


def _read_literal_attr(g: Grammar) -> None:
    """``literal=`` of a custom-call: a shape then its literal, or a tuple of those."""
    if _kind(g) == Tok.LPAREN:
        g._enter()
        try:
            g.lx.advance()
            while _kind(g) != Tok.RPAREN:
                _read_literal_attr(g)
                if _kind(g) != Tok.RPAREN:
                    g.expect(Tok.COMMA, "expects ',' to separate tuple elements")
            g.lx.advance()
        finally:
            g.depth -= 1
        return
    start = g.lx.tok[1]
    read_shape(g)
    from ._shape import parse_shape
    from ._syntax import clean_span

    s = parse_shape(clean_span(g.text, start, g.lx.prev_end))
    if s.is_tuple:
        read_literal(g, "tuple", (), s.tuple_shapes, s.to_text())
    else:
        read_literal(g, s.element_type, s.dims, None, s.without_layout())


def skip_raw(g: Grammar) -> None:
    """A value read only for its extent (kept raw)."""
    t = g.lx.tok
    if t[0] in (Tok.LBRACE, Tok.LSQUARE, Tok.LPAREN):
        g.lx.reset(match_bracket(g.text, t[1], g.lx.stop))
    else:
        g.skip_value()


_PRECISION_ALGORITHMS = frozenset("""
unset alg_unset dot_any_f8_any_f8_f32 dot_any_f8_any_f8_f32_fast_accum dot_f16_f16_f16
dot_f16_f16_f32 dot_bf16_bf16_bf16 dot_bf16_bf16_f32 dot_bf16_bf16_f32_x3 dot_bf16_bf16_f32_x6
dot_bf16_bf16_f32_x9 dot_tf32_tf32_f32 dot_tf32_tf32_f32_x3 dot_f32_f32_f32 dot_f64_f64_f64
dot_any_f8_any_f8_any
""".split())

VALUE_READERS: dict[str, Callable[[Grammar], object]] = {
    "bool": read_bool,
    "int64": read_int,
    "int32": _read_int32,
    "float": _read_float,
    "string": read_string,
    "string_or_json": _read_string_or_json,
    "ints": read_int_list,
    "intss": read_int_list_list,
    "comp": _read_computation,
    "comps": _read_computation_list,
    "fft_type": _enum(frozenset({"FFT", "IFFT", "RFFT", "IRFFT"}), "fft type"),
    "padding_type": _enum(frozenset({"PADDING_INVALID", "PADDING_VALID", "PADDING_SAME"}),
                          "padding type"),
    "comparison_direction": _enum(frozenset({"EQ", "NE", "GE", "GT", "LE", "LT"}),
                                  "comparison direction"),
    "comparison_type": _enum(frozenset({"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}),
                             "comparison type"),
    "window": _read_window,
    "dim_labels": _read_dim_labels,
    "sharding": read_sharding,
    "device_list": read_device_list,
    "frontend_attributes": _read_frontend_attributes,
    "statistics": _read_statistics,
    "parameter_replication": _read_bool_list,
    "instruction_list": _read_instruction_names,
    "fusion_kind": _enum(frozenset({"kLoop", "kInput", "kOutput", "kCustom"}), "fusion kind",
                         error="Unknown fusion kind"),
    "conv_kind": _enum(frozenset({"fprop", "wgrad", "dgrad", "unset"}), "convolution kind"),
    "slice_ranges": _read_slice_ranges,
    "padding_config": _read_padding_config,
    "metadata": read_metadata,
    "distribution": _enum(frozenset({"rng_invalid", "rng_uniform", "rng_normal"}),
                          "random distribution", lower=True, error="Unknown distribution"),
    "domain": _read_domain,
    "precision_list": _read_precision_list,
    "shape": read_shape,
    "shape_list": _read_shape_list,
    "random_algorithm": _enum(frozenset({"rng_default", "rng_three_fry", "rng_philox"}),
                              "random algorithm", lower=True, error="Unknown algorithm"),
    "precision_algorithm": _enum(_PRECISION_ALGORITHMS, "algorithm", lower=True,
                                 error="Unknown algorithm"),
    "result_accuracy": _read_result_accuracy,
    "instruction_aliasing": _read_instruction_aliasing,
    "module_aliasing": read_module_aliasing,
    "buffer_donor": read_buffer_donors,
    "computation_layout": _read_computation_layout,
    "custom_call_schedule": _enum(frozenset({"schedule_none", "schedule_latest",
                                             "schedule_earliest"}), "custom-call schedule",
                                  lower=True, error="Unknown schedule"),
    "api_version": _enum(frozenset({"api_version_unspecified", "api_version_original",
                                    "api_version_status_returning",
                                    "api_version_status_returning_unified",
                                    "api_version_typed_ffi"}), "custom-call API version",
                         lower=True, error="Unknown API version"),
    "sparsity": _read_sparsity,
    "original_value": _read_original_value,
    "recovery_table": _read_recovery_table,
    "debug_attributes": _read_debug_attributes,
    "mode": _enum(frozenset({"cross_replica", "cross_partition", "cross_replica_and_partition",
                             "flattened_id"}), "collective op group mode",
                  error="Invalid collective op group mode"),
    "literal": _read_literal_attr,
    "bool_list_or_bool": _read_bool_list_or_bool,
    "enum": _enum(frozenset({"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT", "TRANSPOSE_INVALID"}),
                  "an enumeration value"),
    "raw": skip_raw,
}

__all__ += ["GrammarError"]
