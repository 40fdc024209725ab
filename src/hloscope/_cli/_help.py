"""How `hloscope --help` and `hloscope CMD --help` read.

Typer renders help with rich: it keeps the line breaks of a docstring's
paragraphs (the command list shows ragged lines), prints each option's type as
``<bool>`` or ``<int range> [x>=1]`` and each required argument as ``{path}``.
Here, the command and group classes and the helpers that tidy that up:

- `reflow` joins the lines of each paragraph of a docstring, so rich wraps it at
  the terminal's width; a paragraph of ``- `` items keeps one item a line;
- `HelpCommand` and `HelpGroup` show flags and arguments without a type, value
  options with the metavar their declaration gives (``--top N``), and
  arguments as their metavar (``PATH``) in the usage line;
- `at_least` checks a lower bound without the range text typer would print.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = ["HelpCommand", "HelpGroup", "at_least", "reflow"]


def reflow(doc: str | None) -> str:
    """`doc` with each paragraph on one line (items of a ``- `` list one a line), the
    paragraphs apart by a blank line."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    out = []
    for para in paragraphs:
        lines = [ln.strip() for ln in para.strip().splitlines()]
        if lines and lines[0].startswith("- "):
            items: list[str] = []
            for ln in lines:
                if ln.startswith("- ") or not items:
                    items.append(ln)
                else:
                    items[-1] += " " + ln
            out.append("\n".join(items))
        else:
            out.append(" ".join(lines))
    return "\n\n".join(p for p in out if p)


def at_least(low: int) -> Callable[[int], int]:
    """A Typer callback refusing values below `low` (``Invalid value for '--top'``)."""

    def check(value: int) -> int:
        if value is not None and value < low:
            raise typer.BadParameter(f"{value} is less than {low}")
        return value

    return check


def _quiet_types(params: list[Any]) -> None:
    """Flags (`--help` is one) and arguments show no type: an argument's metavar and help
    say what it is."""
    for p in params:
        if getattr(p, "is_flag", False) and getattr(p, "metavar", None) is None:
            p.metavar = ""
        elif getattr(p, "param_type_name", "") == "argument":
            p.display_type_rich = _no_type


def _no_type(*_args: Any, **_kwargs: Any) -> None:
    return None


def _unbrace(piece: str) -> str:
    """``{path}`` (Typer's required argument) -> ``path``."""
    if piece.startswith("{") and "}" in piece:
        name, _, rest = piece[1:].partition("}")
        return name + rest
    return piece


class HelpCommand(TyperCommand):
    """A command whose help shows metavars, not Python types, and PATH, not {path}."""

    def get_help_option(self, ctx: Any) -> Any:
        opt = super().get_help_option(ctx)
        if opt is not None:
            _quiet_types([opt])
        return opt

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _quiet_types(params)
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [_unbrace(p) for p in super().collect_usage_pieces(ctx)]


class HelpGroup(TyperGroup):
    """The `hloscope` group: its --help without a type."""

    def get_help_option(self, ctx: Any) -> Any:
        opt = super().get_help_option(ctx)
        if opt is not None:
            _quiet_types([opt])
        return opt
