"""A rank of a multi-process `hloscope bench`, run under a supervisor.

JAX ends a process from C++ (an abort with a stack trace, nothing a Python
handler sees) when its coordination service reports a problem: a rank that
never registered, a rank or the coordinator that died.  So the CLI runs each
rank as a child process and watches it: the child says which phase it is in
(`HLOSCOPE_PROGRESS`, written by `_bench._ranks.Ranks.phase`), and when it
ends by a signal the supervisor prints one clear error naming the rank, the
phase and the likely cause, and exits 2.  The child dies with its supervisor
(Linux's parent-death signal), so killing a rank kills both; and it stops with its
supervisor (`follow_supervisor`), so stopping a rank (SIGSTOP, Ctrl-Z) stops both,
and the other ranks see it stopped; the supervisor continued continues its child.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .. import _errors

__all__ = ["SUPERVISED", "follow_supervisor", "supervise"]

SUPERVISED = "HLOSCOPE_SUPERVISED"

# JAX's C++ log lines (glog: `F1122 10:07:49.183643 28878 client.h:80] ...`), stack
# traces and gRPC detail: shown only when nothing else explains an abort.
_GLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")
_NOISE = re.compile(r"^(\s+@ |\*\*\* |RPC: |Additional GRPC |:UNKNOWN:|terminate called"
                    r"|  what\(\)|The tasks have crashed)")


def _without_logs(lines: list[str]) -> list[str]:
    """`lines` without JAX's C++ log messages (a glog line and its continuation lines, up
    to a blank line) and stack traces: what the program itself printed."""
    out, in_log = [], False
    for ln in lines:
        if _GLOG.match(ln):
            in_log = True
        elif not ln.strip():
            in_log = False
        elif not in_log and not _NOISE.match(ln):
            out.append(ln)
    return out


def _die_with_parent() -> None:  # pragma: no cover  (runs in the child, before exec)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001  (not Linux: the child may outlive a killed parent)
        pass


def _stopped(pid: int) -> bool | None:
    """Whether process `pid` is stopped (Linux's /proc; None where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    return state in ("T", "t")


def follow_supervisor() -> None:
    """In a supervised rank: stop this process whenever its supervisor is stopped (a
    SIGSTOP sent to the rank's `hloscope` process), so that the whole rank stops and
    the other ranks notice; the supervisor sends SIGCONT when it is continued.  A
    thread looks four times a second (nothing to do where /proc is missing)."""
    parent = os.getppid()
    if _stopped(parent) is None:
        return

    def run() -> None:
        while True:
            time.sleep(0.25)
            if _stopped(parent) and os.getppid() == parent:
                os.kill(os.getpid(), signal.SIGSTOP)

    threading.Thread(target=run, name="hloscope-supervisor", daemon=True).start()


def _cause(text: str, coordinator: str | None, timeout: float) -> str:
    if "RegisterTask" in text or ("DEADLINE_EXCEEDED" in text and "connect" in text.lower()):
        return (f"not every process joined the coordinator{f' at {coordinator}' if coordinator else ''}"
                f" within {timeout:g} s: a rank was not started, died before joining, or was "
                "given another --coordinator or --num-processes")
    if "distributed service detected fatal errors" in text or "heartbeat" in text.lower():
        return ("the coordination service reported a process gone: another rank, or rank 0 "
                "that hosts the service, died or stopped answering")
    m = re.search(r"Check failed: [^\n]*", text)
    if m:
        return f"XLA failed an internal check ({m.group(0)[:200]})"
    return ""


def supervise(argv: list[str], rank: int | None, count: int | None,
              coordinator: str | None, timeout: float) -> int:
    """Run ``hloscope ARGV`` as a supervised child and return its exit status; when JAX
    ended it, print the error and leave with status 2 (`typer.Exit`)."""
    fd, progress = tempfile.mkstemp(prefix="hloscope-rank-", suffix=".txt")
    os.close(fd)
    env = {**os.environ, SUPERVISED: "1", "HLOSCOPE_PROGRESS": progress}
    try:
        child = subprocess.Popen([sys.executable, "-m", "hloscope", *argv], env=env,
                                 stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
        # Continued after a stop, continue the child, which stopped itself with us.
        signal.signal(signal.SIGCONT, lambda *_: child.send_signal(signal.SIGCONT))
        try:
            _, err = child.communicate()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            _, err = child.communicate()
        text = err.decode("utf-8", "replace")
        noisy = any(_GLOG.match(ln) or _NOISE.match(ln) for ln in text.splitlines())
        if child.returncode >= 0 and not noisy:
            sys.stderr.write(text)
            return child.returncode
        m = re.search(r"(?m)^error: ", text)  # hloscope's own message
        own = m.start() if m else -1
        if own >= 0:
            before = _without_logs(text[:own].splitlines(keepends=True))
            after = text[own:].splitlines(keepends=True)
            end = next((i for i, ln in enumerate(after) if i and (
                _GLOG.match(ln) or _NOISE.match(ln) or not ln.strip())), len(after))
            sys.stderr.write("".join(before + after[:end]))
            if after[end - 1:end] and not after[end - 1].endswith("\n"):
                sys.stderr.write("\n")
            return child.returncode if child.returncode > 0 else 2
        if child.returncode >= 0:
            sys.stderr.write(text)
            return child.returncode
        try:
            with open(progress, encoding="utf-8") as f:
                phases = [ln for ln in f.read().splitlines() if ln]
        except OSError:
            phases = []
        phase = phases[-1] if phases else "starting up"
        if not phases and ("RegisterTask" in text or "fatal errors" in text):
            phase = "joining the other processes"
        kept = _without_logs(text.splitlines(keepends=True))
        if kept:
            sys.stderr.write("".join(kept))
        sig = -child.returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        who = f"rank {rank} of {count}" if rank is not None and count else "this rank"
        cause = _cause(text, coordinator, timeout) or f"the process was ended by {name}"
        from ._common import fail

        by_jax = sig == signal.SIGABRT
        fail(_errors.HloscopeError(
            f"{who} ended ({phase}): {cause}",
            hint="check the other ranks' output; JAX ended this process (an abort), "
                 "hloscope reports it" if by_jax else
                 f"something outside killed it ({name}): the system's out-of-memory killer, "
                 "a scheduler or a user"))
    finally:
        try:
            os.unlink(progress)
        except OSError:
            pass
