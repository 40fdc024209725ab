"""Numbers in HLO text: ASCII digits only, as XLA's lexer reads them.

Python's ``int()`` also reads ``１２`` (full-width), ``٣`` (Arabic-Indic), ``1_000``,
``+5`` and surrounding white space, and ``str.isdigit()`` is true for ``²``, which
``int()`` then refuses.  Every number hloscope reads from a user's text goes through
`ascii_int` (or a regular expression written with ``[0-9]``, never ``\\d``, which
matches every Unicode digit), so that what XLA would refuse is refused here too,
instead of being read as a number XLA never saw.
"""

from __future__ import annotations

import re

__all__ = ["ascii_int", "is_ascii_digits"]

_INT_RE = re.compile(r"-?[0-9]+")


def ascii_int(text: str) -> int:
    """The integer `text` writes (an optional '-' then ASCII digits, spaces around it
    allowed); ValueError for anything else."""
    t = text.strip(" \t")
    if _INT_RE.fullmatch(t) is None:
        raise ValueError(f"not an integer: {text[:40]!r}")
    return int(t)


def is_ascii_digits(text: str) -> bool:
    """Whether `text` is one or more ASCII digits and nothing else."""
    return text.isascii() and text.isdigit()
