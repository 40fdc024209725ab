"""Attribute text: splitting ``key=value, key=value`` lists and decoding the values.

The parser keeps each instruction's attributes as raw text and splits them only
when asked; values stay raw strings in `split_attributes`, and the typed views
(metadata, backend_config, frontend attributes, aliasing, ...) decode them.
Anything hloscope does not know stays raw text, never an error, so that
modules printed by older and newer XLA versions all load.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .._repr import brief_repr
from ._shape import Shape, ShapeSyntaxError, _parse_shape_at, _skip_ws
from ._numbers import ascii_int

__all__ = [
    "AttributeSyntaxError",
    "OpMetadata",
    "split_attributes",
    "shared_attributes",
    "split_top_level",
    "unescape",
    "unquote",
    "parse_metadata",
    "parse_frontend_attributes",
    "parse_backend_config",
    "parse_int_list",
    "parse_name_list",
    "parse_program_shape",
    "parse_input_output_alias",
    "parse_buffer_donors",
    "parse_bool",
]


class AttributeSyntaxError(ValueError):
    """Attribute text whose brackets or quotes do not balance; `offset` locates it."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


_SCAN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\'\n]*\'|[{}\[\]()",]')
_OPEN = {"{": "}", "[": "]", "(": ")"}
_CLOSE = {"}", "]", ")"}
_KEY_RE = re.compile(r"\s*([A-Za-z_][\w.\-]*)=")


def check_balanced(text: str) -> None:
    """Raise `AttributeSyntaxError` where brackets or quotes of `text` do not balance."""
    _scan(text)


def _scan(text: str) -> list[int]:
    """Offsets of the top-level commas of `text`; raises on imbalance."""
    stack: list[tuple[str, int]] = []
    commas: list[int] = []
    for m in _SCAN_RE.finditer(text):
        tok = m.group()
        c = tok[0]
        if len(tok) > 1:  # a quoted string
            continue
        if c == ",":
            if not stack:
                commas.append(m.start())
        elif c in _OPEN:
            stack.append((_OPEN[c], m.start()))
        elif c in _CLOSE:
            if not stack or stack[-1][0] != c:
                raise AttributeSyntaxError(f"unexpected {c!r}", m.start())
            stack.pop()
        elif c == '"':
            raise AttributeSyntaxError("string is never closed: the text ends inside it",
                                       m.start())
    if stack:
        closer, at = stack[-1]
        opener = {v: k for k, v in _OPEN.items()}[closer]
        raise AttributeSyntaxError(f"{opener!r} is never closed", at)
    return commas


def split_top_level(text: str) -> list[tuple[str, int]]:
    """Split `text` at commas outside brackets: ``[(piece, start_offset), ...]``."""
    parts: list[tuple[str, int]] = []
    depth = 0
    start = 0
    for j, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append((text[start:j], start))
            start = j + 1
    parts.append((text[start:], start))
    return parts


def _mesh_ids(before: str, piece: str) -> bool:
    """Whether `piece` is the ``device_ids=(...)`` of the mesh value that `before` ends."""
    return piece.lstrip().startswith("device_ids=(") and "mesh[" in before \
        and before.rstrip().endswith("]")


def split_attributes(text: str) -> dict[str, str]:
    """Split ``a=1, b={x, y}, c="s, t"`` into ``{"a": "1", "b": "{x, y}", "c": '"s, t"'}``.

    Values are raw text.  A piece without ``=`` is kept with an empty value.
    Raises `AttributeSyntaxError` when brackets or quotes do not balance.
    """
    out: dict[str, str] = {}
    if not text:
        return out
    commas = _scan(text)
    start = 0
    pieces: list[str] = []
    for c in commas:
        piece = text[start:c]
        # A comma followed by something that is not `key=` belongs to the value
        # (e.g. a mesh form with a space: mesh[...] {'a'}), as do a permuted mesh's
        # device ids (mesh[...], device_ids=(...) {'a'}).
        if pieces and (not _KEY_RE.match(piece) or _mesh_ids(pieces[-1], piece)):
            pieces[-1] += "," + piece
        else:
            pieces.append(piece)
        start = c + 1
    piece = text[start:]
    if pieces and (not _KEY_RE.match(piece) or _mesh_ids(pieces[-1], piece)):
        pieces[-1] += "," + piece
    else:
        pieces.append(piece)
    for piece in pieces:
        key, eq, value = piece.strip().partition("=")
        if not eq:
            key, value = piece.strip(), ""
        # Repeated keys are kept (the later one wins, as in XLA's parser a
        # repeated attribute is an error there, but hloscope is lenient).
        out[key.strip()] = value.strip()
    return out


# Split attribute lists, shared between instructions with the same text (unrolled
# layers repeat theirs); read-only, since they are shared.
_split_cache: dict[str, Mapping[str, str]] = {}
_SPLIT_CACHE_MAX = 500_000


def shared_attributes(text: str) -> Mapping[str, str]:
    """`split_attributes` as a read-only mapping, interned by text."""
    attrs = _split_cache.get(text)
    if attrs is None:
        attrs = MappingProxyType(split_attributes(text))
        if len(_split_cache) < _SPLIT_CACHE_MAX:
            _split_cache[text] = attrs
    return attrs


# -- strings -------------------------------------------------------------------

_ESCAPE_RE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\",
                   "a": "\a", "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def unescape(s: str) -> str:
    """Undo absl::CEscape (``\\"``, ``\\n``, octal ``\\000``, hex ``\\x1f``)."""
    if "\\" not in s:
        return s
    raw = bytearray()
    pos = 0
    for m in _ESCAPE_RE.finditer(s):
        raw += s[pos : m.start()].encode("utf-8", "surrogatepass")
        e = m.group(1)
        if e[0] == "x":
            raw.append(int(e[1:], 16))
        elif e[0] in "01234567":
            raw.append(int(e, 8) & 0xFF)
        else:
            raw += _SIMPLE_ESCAPES.get(e, "\\" + e).encode("utf-8", "surrogatepass")
        pos = m.end()
    raw += s[pos:].encode("utf-8", "surrogatepass")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")


def unquote(value: str) -> str:
    """The content of a quoted attribute value, unescaped; other values as they are."""
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return unescape(value[1:-1])
    return value


def parse_bool(value: str) -> bool:
    return value.strip() == "true"


def parse_int_list(value: str) -> tuple[int, ...]:
    """``{0,1,2}`` or ``0`` to a tuple of ints."""
    v = value.strip().strip("{}").strip()
    if not v:
        return ()
    return tuple(ascii_int(x) for x in v.split(","))


def parse_name_list(value: str) -> tuple[str, ...]:
    """``{%a, %b}`` or ``%a`` to computation names without sigils."""
    v = value.strip()
    if v.startswith("{"):
        v = v[1:-1]
    return tuple(x.strip().lstrip("%") for x in v.split(",") if x.strip())


# -- metadata ------------------------------------------------------------------

_META_RE = re.compile(r'([A-Za-z_]\w*)=("(?:[^"\\]|\\.)*"|\{[^}]*\}|[^\s}]+)')


@dataclass(frozen=True, slots=True)
class OpMetadata:
    """An instruction's ``metadata={...}``: where in the user's program it came from.

    `op_name` is the JAX name stack (``jit(f)/layer_3/dot_general``);
    `source_file`/`source_line` are printed by older XLA versions, newer ones
    print `stack_frame_id` into the module's stack-frame tables instead (see
    `Module.stack_frame`).  Unknown fields are kept in `extra`.
    """

    __repr__ = brief_repr

    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0
    source_end_line: int = 0
    source_column: int = 0
    source_end_column: int = 0
    stack_frame_id: int = 0
    extra: tuple[tuple[str, str], ...] = field(default=())

    @property
    def is_empty(self) -> bool:
        return self == _EMPTY_METADATA


_EMPTY_METADATA = OpMetadata()
_metadata_cache: dict[str, OpMetadata] = {}
_INT_FIELDS = {"source_line", "source_end_line", "source_column", "source_end_column",
               "stack_frame_id"}
_STR_FIELDS = {"op_type", "op_name", "source_file"}


def parse_metadata(value: str) -> OpMetadata:
    cached = _metadata_cache.get(value)
    if cached is not None:
        return cached
    kw: dict[str, object] = {}
    extra: list[tuple[str, str]] = []
    for m in _META_RE.finditer(value):
        k, v = m.group(1), m.group(2)
        if k in _STR_FIELDS:
            kw[k] = unquote(v)
        elif k in _INT_FIELDS:
            try:
                kw[k] = ascii_int(v)
            except ValueError:
                extra.append((k, v))
        else:
            extra.append((k, v))
    md = OpMetadata(extra=tuple(extra), **kw)  # type: ignore[arg-type]
    if len(_metadata_cache) < 500_000:
        _metadata_cache[value] = md
    return md


# -- frontend attributes, backend config -----------------------------------------

def parse_frontend_attributes(value: str) -> dict[str, str]:
    """``{a="1",b={"json":1}}`` to ``{"a": "1", "b": '{"json":1}'}``."""
    v = value.strip()
    if v.startswith("{") and v.endswith("}"):
        v = v[1:-1]
    return {k: unquote(x) for k, x in split_attributes(v).items()} if v.strip() else {}


def parse_backend_config(value: str) -> dict | str:
    """A backend_config as a dict when it is JSON, else the (unescaped) string."""
    v = value.strip()
    text = unquote(v) if v.startswith('"') else v
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            return text
        if isinstance(obj, dict):
            return obj
    return text


# -- module header -------------------------------------------------------------

def parse_program_shape(value: str) -> tuple[tuple[Shape, ...], Shape]:
    """``{(f32[2]{0}, /*index=1*/s32[])->f32[2]{0}}`` to (parameter shapes, result shape)."""
    v = value.strip()
    if v.startswith("{") and v.endswith("}"):
        v = v[1:-1]
    try:
        params, end = _parse_shape_at(v, 0)
        end = _skip_ws(v, end)
        if not v.startswith("->", end):
            raise ShapeSyntaxError("expected '->' in entry_computation_layout", end)
        result, end = _parse_shape_at(v, end + 2)
    except ShapeSyntaxError as e:
        raise AttributeSyntaxError(str(e), e.offset) from None
    return params.tuple_shapes, result


_ALIAS_RE = re.compile(
    r"\{([0-9,\s]*)\}\s*:\s*\(\s*([0-9]+)\s*,\s*\{([0-9,\s]*)\}\s*(?:,\s*([\w\-]+)\s*)?\)")
_DONOR_RE = re.compile(r"\(\s*([0-9]+)\s*,\s*\{([0-9,\s]*)\}\s*\)")


def _index(s: str) -> tuple[int, ...]:
    return tuple(ascii_int(x) for x in s.split(",") if x.strip())


def parse_input_output_alias(value: str) -> tuple[tuple[tuple[int, ...], int, tuple[int, ...], str], ...]:
    """``{ {0}: (0, {}, may-alias) }`` to ((output_index, param, param_index, kind), ...)."""
    return tuple(
        (_index(m.group(1)), int(m.group(2)), _index(m.group(3)), m.group(4) or "may-alias")
        for m in _ALIAS_RE.finditer(value)
    )


def parse_buffer_donors(value: str) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """``{ (0, {}), (1, {}) }`` to ((param, param_index), ...)."""
    return tuple((int(m.group(1)), _index(m.group(2))) for m in _DONOR_RE.finditer(value))
