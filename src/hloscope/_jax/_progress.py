"""Saying what hloscope waits for: one progress line on a terminal while JAX traces and
lowers and XLA compiles, and a compile that Ctrl-C can interrupt.

The line goes to stderr only when stderr is a terminal (nothing in pipes, files or
tests' output), rewritten in place with the elapsed time (``XLA compiling f for h100x8
... 12 s``) and cleared when the phase ends.  It writes to its own copy of the
terminal's descriptor, so a target compile that captures native stderr does not
swallow it.

XLA's compile blocks the thread that calls it, and Python delivers Ctrl-C to the main
thread only between bytecodes: `wait_for` runs the compile in a worker thread and waits
on it in short steps.  After `slow_after()` seconds (``HLOSCOPE_SLOW_COMPILE``, default
30) it prints what the lowered module already shows (`describe_slow`), and Ctrl-C ends
the wait with `CompileInterrupted` (a `KeyboardInterrupt` carrying that text): the CLI
prints it and leaves with status 130 without waiting for XLA's thread.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["CompileInterrupted", "phase", "prefix", "slow_after", "wait_for"]

_T = TypeVar("_T")
_PREFIX: list[str] = []  # what the line says before the phase ("checking 2 fixes: donate")


class CompileInterrupted(KeyboardInterrupt):
    """Ctrl-C while XLA compiled: `report` is what the lowered module showed (may be
    empty), `phase` and `seconds` what was interrupted after how long."""

    def __init__(self, phase: str, seconds: float, report: str) -> None:
        super().__init__(f"interrupted while {phase} ({seconds:.0f} s)")
        self.phase = phase
        self.seconds = seconds
        self.report = report


def slow_after() -> float:
    """Seconds of XLA compile after which the lowered module is described
    (``HLOSCOPE_SLOW_COMPILE``; default 30)."""
    try:
        return max(0.0, float(os.environ.get("HLOSCOPE_SLOW_COMPILE", "30")))
    except ValueError:
        return 30.0


class _Line:
    """The status line: its own descriptor of the terminal, or None where stderr is not
    one."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.lock = threading.Lock()
        try:
            if sys.stderr is not None and sys.stderr.isatty():
                self.fd = os.dup(sys.stderr.fileno())
        except (OSError, ValueError, AttributeError):
            self.fd = None

    def _write(self, text: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:
            pass

    def show(self, text: str) -> None:
        width = max(20, _columns() - 1)
        with self.lock:
            self._write("\r" + text[:width] + "\x1b[K")

    def say(self, text: str) -> None:
        """Lines of their own (the slow-compile report), the status line cleared first."""
        with self.lock:
            self._write("\r\x1b[K" + text.rstrip("\n") + "\n")

    def close(self) -> None:
        with self.lock:
            self._write("\r\x1b[K")
            if self.fd is not None:
                try:
                    os.close(self.fd)
                except OSError:
                    pass
                self.fd = None


def _columns() -> int:
    try:
        n = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        n = 0
    if n <= 0:
        try:
            n = int(os.environ.get("COLUMNS", "0"))
        except ValueError:
            n = 0
    return n if n > 0 else 100


def _label(text: str) -> str:
    return f"{_PREFIX[-1]} ({text})" if _PREFIX else text


@contextmanager
def prefix(text: str) -> Iterator[None]:
    """What the line says before each phase while the block runs."""
    _PREFIX.append(text)
    try:
        yield
    finally:
        _PREFIX.pop()


@contextmanager
def phase(text: str) -> Iterator[None]:
    """``TEXT ... 1.2 s`` on the terminal while the block runs (a ticker thread rewrites
    it); nothing where stderr is not a terminal."""
    line = _Line()
    if line.fd is None:
        yield
        return
    stop = threading.Event()
    t0 = time.perf_counter()

    def tick() -> None:
        while not stop.wait(0.25):
            line.show(f"{_label(text)} ... {time.perf_counter() - t0:.1f} s")

    line.show(f"{_label(text)} ...")
    ticker = threading.Thread(target=tick, name="hloscope-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()
        line.close()


def wait_for(text: str, call: Callable[[], _T], *,
             describe_slow: Callable[[], str] | None = None) -> _T:
    """`call()` (XLA's compile) in a worker thread, waited on here so that Ctrl-C is
    delivered: the progress line meanwhile; after `slow_after()` seconds, what
    `describe_slow()` says; on Ctrl-C, `CompileInterrupted` with that text."""
    line = _Line()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001  (handed to the waiting thread)
            box["error"] = e

    try:
        err: int | None = os.dup(2)
    except OSError:
        err = None
    worker = threading.Thread(target=work, name="hloscope-compile", daemon=True)
    t0 = time.perf_counter()
    slow = slow_after()
    said: str | None = None
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
            elapsed = time.perf_counter() - t0
            if said is None and elapsed >= slow and describe_slow is not None \
                    and worker.is_alive():
                said = _described(describe_slow)
                if said:
                    line.say(f"{_label(text)}: {elapsed:.0f} s so far; {said}")
            line.show(f"{_label(text)} ... {elapsed:.0f} s" if elapsed >= 10
                      else f"{_label(text)} ... {elapsed:.1f} s")
    except KeyboardInterrupt:
        elapsed = time.perf_counter() - t0
        report = said if said is not None else (
            _described(describe_slow) if describe_slow is not None else "")
        line.close()
        # Said here, to the stderr this wait began with: a target's compile may hold
        # file descriptor 2 captured in XLA's thread.
        _write_fd(err, f"interrupted: {_label(text)} for {elapsed:.0f} s"
                       + (f"; {report}" if report else "") + "\n")
        raise CompileInterrupted(text, elapsed, report) from None
    finally:
        if err is not None:
            os.close(err)
    line.close()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _write_fd(fd: int | None, text: str) -> None:
    if fd is None:
        return
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    except OSError:
        pass


def _described(describe: Callable[[], str]) -> str:
    try:
        return describe()
    except Exception:  # noqa: BLE001  (a description must never stop the compile)
        return ""
