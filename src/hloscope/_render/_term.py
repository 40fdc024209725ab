"""Text for a terminal: what a module's own text may not do there, and how wide lines get.

A module is somebody else's text.  Its names, ``op_name`` and ``source_file``
strings, custom-call targets and the paths it came from can hold control
characters (an HLO string ``"\\033[2J"`` decodes to a real ESC), carriage
returns and Unicode bidi overrides.  Printed raw they drive the terminal:
clear it, retitle it, hide text or reorder it.  `safe` shows every such
character as a Python-style escape (``\\x1b``, ``\\n``, ``\\u202e``), and every
text renderer passes what it prints through it; `safe_text` does the same for
a whole text but keeps its line breaks, the last step before stdout or stderr.

The escaped characters are those `str.isprintable` refuses: the C0 and C1
controls and DEL (Unicode category Cc), format characters such as the bidi
overrides and zero-width spaces (Cf), line and paragraph separators (Zl, Zp),
surrogates, private-use and unassigned code points, and every space but the
ASCII one.  A backslash stays as it is, so Windows paths read as written.

Width: text output fits `terminal_width` columns: ``$COLUMNS`` when set, else
the terminal's width when stdout is one, else `DEFAULT_WIDTH` (100), and never
less than `MIN_WIDTH`.  Tables cut their widest columns in the middle with an
ellipsis and leave out their least useful columns (`fit_columns`); other lines are
wrapped, a name or path too long for a line cut in the middle (`fit`).
``--wide`` (a width of `None`) shows everything whole.
Lengths are counted in code points: HLO names, shapes and paths are ASCII.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Collection, Sequence

__all__ = ["DEFAULT_WIDTH", "ELLIPSIS", "MIN_CELL", "MIN_WIDTH", "escape_char", "fit",
           "fit_columns", "middle", "safe", "safe_text", "short_paths", "tail", "terminal_width"]

# The width of text output when stdout is not a terminal and $COLUMNS is not set.
DEFAULT_WIDTH = 100
# Narrower than this, tables cannot show their columns; a smaller $COLUMNS is raised to it.
MIN_WIDTH = 40
# A table column is not cut below this (or its header's width, when that is wider).
MIN_CELL = 8
ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"

_SIMPLE = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_char(ch: str) -> str:
    """One character as an escape: ``\\n``, ``\\r``, ``\\t``, ``\\xNN``, ``\\uNNNN``
    or ``\\UNNNNNNNN``."""
    if ch in _SIMPLE:
        return _SIMPLE[ch]
    n = ord(ch)
    if n < 0x100:
        return f"\\x{n:02x}"
    if n < 0x10000:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def safe(text: str) -> str:
    """`text` with every character a terminal could act on shown escaped (see the module
    docstring); printable text comes back as it is."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else escape_char(ch) for ch in text)


def safe_text(text: str) -> str:
    """`safe` applied line by line: the line breaks of `text` stay, nothing else
    unprintable does."""
    if text.isprintable():
        return text
    return "\n".join(safe(line) for line in text.split("\n"))


def middle(text: str, width: int) -> str:
    """`text` cut to `width` characters with an ellipsis in the middle, keeping its start
    and its end (``fusion.12…multiply.3``)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[len(text) - tail:] if tail else "")


def tail(text: str, width: int) -> str:
    """`text` cut to `width` characters at its start, keeping its end: for a ``file:line``,
    the file's name and the line (``…/functional.py:3458``)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    return ELLIPSIS + text[len(text) - width + 1:]


_PACKAGES_RE = re.compile(r"[^\s()]*[/\\](?:site|dist)-packages[/\\]")


def short_paths(text: str, cwd: str | None = None) -> str:
    """`text` (a ``file:line`` or ``function (file:line)``) with each installed package's
    path written from its package (``torch/nn/functional.py:3458``, not
    ``/venv/lib/python3.11/site-packages/torch/...``) and a path under `cwd` (default:
    the working directory) relative to it, so that a table cut to the terminal's width
    keeps the part that says where."""
    if "/" not in text and "\\" not in text:
        return text  # no path in it ("-", a name)
    out = _PACKAGES_RE.sub("", text)
    if out == text:
        here = (cwd if cwd is not None else os.getcwd()).rstrip("/\\") + os.sep
        if len(here) > 1 and here in text:
            out = text.replace(here, "")
    return out


def terminal_width(stream: object = None) -> int:
    """The columns text output may use: ``$COLUMNS`` when it is a positive number, else the
    width of the terminal when `stream` (default stdout) is one, else `DEFAULT_WIDTH`
    (output to a pipe or a file); at least `MIN_WIDTH`."""
    env = os.environ.get("COLUMNS", "").strip()
    width = int(env) if env.isdigit() else 0
    if width <= 0:
        stream = sys.stdout if stream is None else stream
        try:
            if stream.isatty():  # type: ignore[attr-defined]
                width = os.get_terminal_size(stream.fileno()).columns  # type: ignore[attr-defined]
        except (AttributeError, OSError, ValueError):
            width = 0
    return max(MIN_WIDTH, width if width > 0 else DEFAULT_WIDTH)


def fit(text: str, width: int | None) -> str:
    """`text` made safe (`safe_text`) and, with a `width`, every longer line wrapped at
    spaces, the continuation indented two more spaces than the line.  A word too long
    for a line of its own (a name, a path) is cut in the middle with an ellipsis.  With
    `width` None the lines stay whole."""
    text = safe_text(text)
    if width is None:
        return text
    lines = text.split("\n")
    if all(len(line) <= width for line in lines):
        return text
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        body = line.lstrip(" ")
        lead = line[: len(line) - len(body)][: width // 2]
        room = max(MIN_CELL, width - len(lead) - 2)  # a continuation line's
        body = " ".join(middle(w, room) for w in body.split(" "))
        out.extend(textwrap.wrap(body, width, initial_indent=lead,
                                 subsequent_indent=lead + "  ", break_long_words=True,
                                 break_on_hyphens=False) or [line[:width]])
    return "\n".join(out)


def fit_columns(headers: Sequence[str], natural: Sequence[int], room: int, *,
                fixed: Collection[int] = (), drop: Sequence[int] = (),
                gap: int = 2, whole: int | None = None) -> tuple[list[int], list[int]]:
    """Which columns of a table to show, and how wide, in `room` characters.

    `natural` is each column's widest cell; columns in `fixed` (numbers) keep it.  When
    the table is too wide, the columns in `drop` are left out in that order while the
    characters it would otherwise lose to cutting outnumber the next one's width (a
    column goes when it holds less than the cuts would take), and for as long as even
    the narrowest widths do not fit.  Then the widest of the other columns are cut to a
    common width, never below `MIN_CELL` or their header's width.  Returns the columns
    kept (in order) and their widths; when nothing more can go, the table is as narrow
    as it can be, maybe wider than `room`.  Column `whole` (a kernel's name, which the
    user looks for in XLA's text) is kept whole while a column of `drop` can go instead.
    """
    keep = list(range(len(natural)))
    pending = [k for k in drop if k < len(natural)]

    def over() -> int:
        return sum(natural[k] for k in keep) + gap * (len(keep) - 1) - room

    while pending and len(keep) > 1 and over() > natural[pending[0]]:
        k = pending.pop(0)
        if k in keep:
            keep.remove(k)
    cap = _cap(headers, natural, keep, room, fixed, gap)
    while cap == -1 and pending and len(keep) > 1 or (
            whole is not None and cap is not None and pending and whole in keep
            and _width(headers, natural, whole, fixed, cap) < natural[whole]):
        k = pending.pop(0)
        if k in keep:
            keep.remove(k)
        cap = _cap(headers, natural, keep, room, fixed, gap)
    if cap is None:
        return keep, [natural[k] for k in keep]
    widths = [_width(headers, natural, k, fixed, cap) for k in keep]
    spare = room - sum(widths) - gap * (len(keep) - 1)
    for i, k in enumerate(keep):  # what the cap leaves over, to the leftmost cut columns
        if spare <= 0:
            break
        if widths[i] < natural[k]:
            widths[i] += 1
            spare -= 1
    return keep, widths


def _width(headers: Sequence[str], natural: Sequence[int], k: int, fixed: Collection[int],
           cap: int) -> int:
    if k in fixed:
        return natural[k]
    return max(min(natural[k], max(len(headers[k]), MIN_CELL)), min(natural[k], cap))


def _cap(headers: Sequence[str], natural: Sequence[int], keep: list[int], room: int,
         fixed: Collection[int], gap: int) -> int | None:
    """The widest a cut column may be for the `keep` columns to fit in `room`: None when
    nothing needs cutting, -1 when even the narrowest widths do not fit."""
    def total(cap: int) -> int:
        return sum(_width(headers, natural, k, fixed, cap) for k in keep) \
            + gap * (len(keep) - 1)

    top = max((natural[k] for k in keep), default=0)
    if total(top) <= room:
        return None
    lo, hi = -1, top
    while lo < hi:  # the largest cap that fits
        mid = (lo + hi + 1) // 2
        if total(mid) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo
