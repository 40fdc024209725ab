"""An HLO window: the ``window={size=3x3 stride=2x2 pad=0_1x0_1 ...}`` attribute of
convolution, reduce-window and select-and-scatter.

`parse_window` is the one reader of that text; shape inference and the cost estimates
use the `Window` it returns.  The syntax is XLA's (``HloParserImpl::ParseWindow``,
openxla/xla xla/hlo/parser/hlo_parser.cc): sub-attributes separated by white space, in
any order, each at most once: ``size=``, ``stride=``, ``lhs_dilate=``, ``rhs_dilate=``
and ``rhs_reversal=`` take one non-negative integer per dimension joined by ``x``
(``3x3``), ``pad=`` a ``low_high`` pair per dimension (``0_1x1_0``, negative allowed).
Each given field has one entry per entry of ``size=``; without ``size=`` the window has
no dimensions.  A field left out takes XLA's default: stride 1, pad 0_0, dilations 1,
no reversal (``rhs_reversal=1`` reverses a dimension, any other value does not).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Window", "WindowError", "parse_window", "read_window"]


class WindowError(ValueError):
    """A window attribute hloscope cannot read, or a window that does not fit a shape."""


_DXD_RE = re.compile(r"[0-9]+(?:x[0-9]+)*")
_PAD_RE = re.compile(r"-?[0-9]+_-?[0-9]+(?:x-?[0-9]+_-?[0-9]+)*")
_FIELDS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal")


@dataclass(frozen=True, slots=True)
class Window:
    """One entry per window dimension in each field; a field left empty takes XLA's
    default (stride 1, pad (0, 0), dilations 1, no reversal) for every dimension."""

    size: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    pad: tuple[tuple[int, int], ...] = ()
    lhs_dilate: tuple[int, ...] = ()
    rhs_dilate: tuple[int, ...] = ()
    rhs_reversal: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", tuple(self.size))
        n = len(self.size)
        defaults = {"stride": 1, "pad": (0, 0), "lhs_dilate": 1, "rhs_dilate": 1,
                    "rhs_reversal": False}
        for name, default in defaults.items():
            value = tuple(getattr(self, name))
            if not value:
                value = (default,) * n
            elif len(value) != n:
                raise WindowError(f"'{name}=' has {len(value)} entries and 'size=' has {n}; "
                                  "a window has one entry per dimension in each")
            object.__setattr__(self, name, value)

    @property
    def rank(self) -> int:
        """Number of window dimensions."""
        return len(self.size)

    @property
    def elements(self) -> int:
        """Taps of the window: the product of its sizes (1 for a window of no dimensions)."""
        return math.prod(self.size)

    @property
    def taps_met(self) -> int:
        """The most taps of one window position that meet an element of the input rather
        than a hole of its dilation: ``lhs_dilate=d`` leaves d - 1 holes between the
        input's elements, so w taps meet at most ceil(w / d) of them (padding is not taken
        off: it is at the edges only)."""
        return math.prod(-(-w // d) if d > 1 else w
                         for w, d in zip(self.size, self.lhs_dilate, strict=True))

    def output_dims(self, dims: Sequence[int]) -> tuple[int, ...]:
        """The dimensions of a window's result over an input of dimensions `dims`
        (XLA's ``ShapeInference::InferWindowOutputShape``): the input dilated and
        padded, the window dilated, positions every stride; WindowError when the window
        does not fit `dims`."""
        if len(dims) != self.rank:
            raise WindowError(f"the window has {self.rank} dimension(s) and the input "
                              f"{len(dims)}; it needs one window dimension per input "
                              "dimension")
        out = []
        for i, (n, w, s, (lo, hi), bd, wd) in enumerate(zip(
                dims, self.size, self.stride, self.pad, self.lhs_dilate, self.rhs_dilate)):
            for what, v in (("size", w), ("stride", s), ("lhs_dilate", bd),
                            ("rhs_dilate", wd)):
                if v <= 0:
                    raise WindowError(f"window dimension {i} has {what} {v}; it must be "
                                      "positive")
            base = lo + hi + ((n - 1) * bd + 1 if n > 0 else 0)
            span = (w - 1) * wd + 1
            out.append((base - span) // s + 1 if span <= base else 0)
        return tuple(out)

    def to_text(self) -> str:
        """The attribute value as XLA prints it (fields at their defaults left out)."""
        parts = []
        if self.size:
            parts.append("size=" + _dxd(self.size))
        if any(s != 1 for s in self.stride):
            parts.append("stride=" + _dxd(self.stride))
        if any(p != (0, 0) for p in self.pad):
            parts.append("pad=" + "x".join(f"{lo}_{hi}" for lo, hi in self.pad))
        if any(d != 1 for d in self.lhs_dilate):
            parts.append("lhs_dilate=" + _dxd(self.lhs_dilate))
        if any(d != 1 for d in self.rhs_dilate):
            parts.append("rhs_dilate=" + _dxd(self.rhs_dilate))
        if any(self.rhs_reversal):
            parts.append("rhs_reversal=" + _dxd(tuple(map(int, self.rhs_reversal))))
        return "{" + " ".join(parts) + "}"


def _dxd(values: tuple[int, ...]) -> str:
    return "x".join(map(str, values))


@lru_cache(maxsize=4096)
def parse_window(text: str) -> Window:
    """The `Window` of a ``window=`` attribute value, with or without its braces
    (``{size=2x2 stride=2x2}``); WindowError saying what is wrong for anything XLA's
    parser would refuse."""
    body = text.strip()
    if body.startswith("{"):
        if not body.endswith("}"):
            raise WindowError(f"window {text[:60]!r} opens a '{{' it does not close")
        body = body[1:-1]
    seen: dict[str, str] = {}
    for part in body.split():
        name, eq, value = part.partition("=")
        if not eq or name not in _FIELDS:
            raise WindowError(f"unexpected window sub-attribute {part[:40]!r}; a window "
                              f"has {', '.join(f + '=' for f in _FIELDS)}")
        if name in seen:
            raise WindowError(f"window sub-attribute '{name}=' is given twice")
        pattern = _PAD_RE if name == "pad" else _DXD_RE
        if pattern.fullmatch(value) is None:
            example = "0_0x1_1" if name == "pad" else "2x2"
            raise WindowError(f"window '{name}={value[:40]}' is not of the form "
                              f"'{name}={example}'")
        seen[name] = value
    fields: dict[str, tuple] = {}
    for name, value in seen.items():
        if name == "pad":
            fields[name] = tuple((int(lo), int(hi)) for lo, hi in
                                 (p.split("_") for p in value.split("x")))
        elif name == "rhs_reversal":
            fields[name] = tuple(int(x) == 1 for x in value.split("x"))
        else:
            fields[name] = tuple(int(x) for x in value.split("x"))
    return Window(**fields)


def read_window(text: str | None) -> Window | None:
    """`parse_window` for estimates, which never fail on odd text: None where there is no
    window or it cannot be read."""
    if text is None:
        return None
    try:
        return parse_window(text)
    except WindowError:
        return None
