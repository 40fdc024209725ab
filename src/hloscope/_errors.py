"""The one error hierarchy of hloscope.

Every error the library raises on purpose derives from `HloscopeError`.  Each
message says what went wrong and how to fix it; parse errors also carry where
(file, line, column) and render the offending line with a caret under the spot,
in the manner of lark's ``UnexpectedInput.get_context``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._hlo._module import Module

__all__ = [
    "HloscopeError",
    "HloParseError",
    "HloSourceError",
    "HloModelError",
    "UserCodeError",
    "UserFrame",
]

# Lines longer than this are shown as a window around the error column.
_CONTEXT_WIDTH = 100


class HloscopeError(Exception):
    """Base class of every error hloscope raises on purpose.

    `message` says what went wrong; `hint` (may be empty) says how to fix it.
    """

    def __init__(self, message: str, *, hint: str = "") -> None:
        self.message = message
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return self.message + (f"\nhint: {self.hint}" if self.hint else "")

    def one_line(self) -> str:
        """The error as a single line, for logs and the CLI's first line."""
        return self.message


class HloSourceError(HloscopeError):
    """The input is not HLO text at all (binary, empty, unreadable, no module in it)."""

    def __init__(self, message: str, *, path: str | None = None, hint: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message, hint=hint)


class HloModelError(HloscopeError):
    """A request to the model that it cannot satisfy (unknown name, wrong kind)."""


class HloParseError(HloscopeError):
    """HLO text that cannot be read, located to a file, line and column.

    Attributes:
      filename: the file's path, or ``"<string>"`` for text given directly.
      line: 1-based line number in the original file.
      column: 1-based column in the original line.
      line_text: the original line (without its newline).
      partial: the part of the module read before the damage, when any
        computation was complete; `None` otherwise.
    """

    def __init__(
        self,
        message: str,
        *,
        filename: str,
        line: int,
        column: int,
        line_text: str,
        hint: str = "",
        partial: Module | None = None,
    ) -> None:
        self.filename = filename
        self.line = line
        self.column = max(1, column)
        self.line_text = line_text
        self.partial = partial
        self.reason = message
        # Set by the parser: the module's name and the computation being read
        # when the damage was found, with how many instructions it had.
        self.module_name: str | None = None
        self.in_progress: tuple[str, int] | None = None
        super().__init__(message, hint=hint)

    def one_line(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}: {self.reason}"

    def read_before(self) -> str | None:
        """What was read before the damage, in words; None when nothing was."""
        parts = []
        if self.partial is not None:
            comps = self.partial.computations
            names = ", ".join(c.name for c in comps[:6]) + (", ..." if len(comps) > 6 else "")
            parts.append(f"{len(comps)} complete computation(s) ({names}) with "
                         f"{self.partial.instruction_count} instructions")
        if self.in_progress is not None and self.in_progress[1]:
            name, n = self.in_progress
            parts.append(f"the first {n} instruction(s) of computation {name!r}")
        if not parts:
            return None
        head = f"module {self.module_name}: " if self.module_name else ""
        return head + "; ".join(parts)

    def get_context(self, width: int = _CONTEXT_WIDTH) -> str:
        """The offending line (a window of it when long) and a caret under the column."""
        text = self.line_text.expandtabs(1)
        text = "".join(ch if ch.isprintable() else "\N{REPLACEMENT CHARACTER}" for ch in text)
        col = self.column - 1
        start = 0
        if len(text) > width:
            start = max(0, min(col - width // 2, len(text) - width))
            shown = text[start : start + width]
            prefix = "..." if start > 0 else ""
            suffix = "..." if start + width < len(text) else ""
            text = prefix + shown + suffix
            col = col - start + len(prefix)
        return f"  {text}\n  {' ' * col}^"

    def __str__(self) -> str:
        out = f"{self.one_line()}\n{self.get_context()}"
        if self.hint:
            out += f"\nhint: {self.hint}"
        return out


@dataclass(frozen=True)
class UserFrame:
    """One frame of the user's own code: where it is and the line it ran."""

    file: str
    line: int
    function: str
    source: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


# The first lines of the user's message shown under the frames; the rest is cut.
_MESSAGE_LINES = 12


class UserCodeError(HloscopeError):
    """The user's own code raised while hloscope ran it (importing their file, calling
    their input function, JAX tracing their function, XLA compiling or running it).

    The CLI shows it as the user's error (their frames, exit 2), never as a bug in
    hloscope.  The Python API does not wrap: it re-raises the user's exception with a
    note saying what hloscope was doing.

    Attributes:
      phase: what hloscope was doing, e.g. ``"tracing f"``.
      error: the user's exception.
      frames: the frames of the traceback that are the user's code, outermost first
        (frames of Python, of installed packages and of hloscope left out).
    """

    def __init__(self, phase: str, error: BaseException, frames: list[UserFrame], *,
                 hint: str = "") -> None:
        self.phase = phase
        self.error = error
        self.frames = frames
        text = error.msg if isinstance(error, SyntaxError) and error.msg else str(error)
        lines = text.strip().splitlines() or [""]
        if len(lines) > 1 and "Traceback (most recent call last)" in text:
            # A runtime error quoting a Python traceback (a host callback that raised):
            # the traceback's last line is the cause; its frames were printed already.
            head = lines[0].partition("Traceback (most recent call last)")[0].rstrip(" :")
            lines = [f"{head}: {lines[-1].strip()}" if head else lines[-1].strip()]
        self.first_line = lines[0]
        self.more_lines = lines[1:]
        super().__init__(self.one_line(), hint=hint)

    def one_line(self) -> str:
        where = f"{self.frames[-1].file}:{self.frames[-1].line}: " if self.frames else ""
        text = f": {self.first_line}" if self.first_line else ""
        return f"{where}{type(self.error).__name__}{text} (while {self.phase})"

    def details(self) -> str:
        """The user's frames, each with its line, then the rest of their message."""
        out = []
        if self.frames:
            out.append("in your code (most recent call last):")
        for f in self.frames:
            out.append(f"  {f}")
            if f.source:
                out.append(f"    {f.source}")
        more = [ln for ln in self.more_lines if ln.strip()]
        out.extend(more[:_MESSAGE_LINES])
        if len(more) > _MESSAGE_LINES:
            out.append(f"... ({len(more) - _MESSAGE_LINES} more lines of the message)")
        return "\n".join(out)

    def __str__(self) -> str:
        details = self.details()
        out = self.one_line() + (f"\n{details}" if details else "")
        return out + (f"\nhint: {self.hint}" if self.hint else "")
