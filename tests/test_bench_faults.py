"""Faults in many processes, for real: two `hloscope bench` ranks (or two plain Python
scripts) joined by jax.distributed on localhost, one of them killed, stopped, never
started or given other arguments.  Each case must end with a clear error naming the
rank and the phase, within the timeout and a few seconds, exit 2, never an abort or a
hang, and no partial file in the output folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TARGET = HERE / "fault_target.py"
TIMEOUT = 6
# Startup, tracing and compiling before the first wait, on a busy 2-core machine, plus
# the 10 s the issue allows past the timeout.
LIMIT = TIMEOUT + 10 + 15


def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    src = str(HERE.parent / "src")
    return {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
            "JAX_PLATFORMS": "cpu", "PYTHONPATH": src + os.pathsep + str(HERE),
            "COLUMNS": "200", **extra}


def _rank(rank: int, port: int, out: Path, *args: str, env: dict[str, str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "hloscope", "bench", f"{TARGET}:f", "--coordinator",
           f"localhost:{port}", "--num-processes", "2", "--process-id", str(rank),
           "--timeout", str(TIMEOUT), "-o", str(out / f"rank{rank}"), *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _finish(p: subprocess.Popen, limit: float = LIMIT) -> tuple[int, str, float]:
    t0 = time.monotonic()
    try:
        out, err = p.communicate(timeout=limit + 30)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("a rank hung")
    return p.returncode, out + err, time.monotonic() - t0


def _assert_clean_error(code: int, text: str, *needles: str) -> None:
    assert code == 2, text
    errors = [ln for ln in text.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, text
    for n in needles:
        assert n in errors[0], text
    for bad in ("internal error", "Check failure", "Traceback", "@     0x", "F1"):
        assert bad not in text, text


def _no_partial_files(out: Path) -> None:
    for p in out.rglob("*"):
        assert p.is_dir() or not p.name.startswith(".") and ".tmp" not in p.name, p
        assert p.is_dir() or p.stat().st_size > 0, p


def _two(tmp_path: Path, args0: tuple[str, ...], args1: tuple[str, ...], **env: str
         ) -> tuple[tuple[int, str, float], tuple[int, str, float]]:
    port = _port()
    e = _env(**env)
    p0 = _rank(0, port, tmp_path, *args0, env=e)
    p1 = _rank(1, port, tmp_path, *args1, env=e)
    return _finish(p0), _finish(p1)


INPUTS = ("--inputs", "make(32)")


def test_a_rank_killed_before_the_compiled_barrier(tmp_path):
    (c0, t0, s0), (c1, t1, _) = _two(tmp_path, INPUTS, INPUTS, DIE_AT="trace")
    _assert_clean_error(c0, t0, "rank 0 of 2", "rank 1 did not reach the 'compiled' barrier",
                        f"within {TIMEOUT} s")
    assert s0 < LIMIT
    assert c1 == 2 and "SIGKILL" in t1, t1  # its own supervisor saw it killed
    assert not (tmp_path / "rank0").exists()


MANY = ("-n", "1000000")


@pytest.mark.parametrize("inputs, sig, who", [
    ("make(32)", "SIGKILL", "rank 1"),  # the program's collectives fail, or wait
    ("make(32)", "SIGSTOP", "rank 1"),  # they wait: the watchdog ends the survivor
    ("local(32)", "SIGKILL", "rank 1"),  # no collective: only the pulse tells
    ("local(32)", "SIGSTOP", "rank 1"),
    ("local(32)", "SIGSTOP", "rank 0"),  # the store's host: reading the pulses waits
    ("local(32)", "SIGSTOP", "parent"),  # rank 1's `hloscope` process: the rank stops too
])
def test_a_rank_killed_or_stopped_during_the_timed_runs(tmp_path, inputs, sig, who):
    stamp = tmp_path / "fault-time"
    port = _port()
    dead = 0 if who == "rank 0" else 1
    e = _env(DIE_AT="timed", DIE_SIG=sig, DIE_STAMP=str(stamp), DIE_RANK=str(dead),
             **({"DIE_PID": "parent"} if who == "parent" else {}))
    args = ("--inputs", inputs, *MANY)
    ps = [_rank(r, port, tmp_path, *args, env=e) for r in (0, 1)]
    try:
        code, text, _ = _finish(ps[1 - dead])
        ended = time.time()
    finally:
        ps[dead].kill()  # a stopped rank's child dies with it
        ps[dead].communicate()
    assert stamp.exists(), text  # the fault came during the timed runs
    _assert_clean_error(code, text, f"rank {1 - dead} of 2", "timed runs",
                        "rank 0, which hosts the coordination service, stopped answering"
                        if dead == 0 else "rank 1 stopped answering")
    assert ended - float(stamp.read_text()) < TIMEOUT + 5, text
    _no_partial_files(tmp_path)


def test_the_coordinator_killed_during_the_timed_runs(tmp_path):
    many = (*INPUTS, *MANY)
    _, (c1, t1, s1) = _two(tmp_path, many, many, DIE_AT="timed", DIE_RANK="0")
    _assert_clean_error(c1, t1, "rank 1 of 2")
    assert "timed runs" in t1 or "coordination service" in t1, t1
    assert s1 < LIMIT


def test_a_rank_that_never_started(tmp_path):
    code, text, took = _finish(_rank(0, _port(), tmp_path, *INPUTS, env=_env()))
    _assert_clean_error(code, text, "rank 0 of 2", "not every process joined the coordinator")
    assert took < LIMIT


@pytest.mark.parametrize("args1, needle", [
    (("--arg", "f32[32,32]"), "disagree on the program"),
    (("--arg", "f32[64,64]", "--param", "x=32"), "disagree on the program"),
    (("--arg", "f32[64,64]", "-n", "6"), "disagree on the run counts"),
    (("--arg", "f32[64,64]", "--warmup", "1"), "disagree on the run counts"),
])
def test_ranks_given_different_arguments(tmp_path, args1, needle):
    args0 = ("--arg", "f32[64,64]", *(("--param", "x=64") if "--param" in args1 else ()))
    (c0, t0, _), (c1, t1, _) = _two(tmp_path, args0, args1)
    _assert_clean_error(c0, t0, needle, "rank 0:", "rank 1:")
    _assert_clean_error(c1, t1, needle)
    assert not (tmp_path / "rank0").exists()


def test_the_python_api_raises_and_the_script_exits_without_hanging(tmp_path):
    port = str(_port())
    worker = str(HERE / "fault_api_worker.py")
    env = _env(DIE="1")
    p0 = subprocess.Popen([sys.executable, worker, "0", port], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p1 = subprocess.Popen([sys.executable, worker, "1", port], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    code, text, took = _finish(p0)
    p1.communicate()
    assert "HLOSCOPE-ERROR" in text and "rank 1 did not reach the 'compiled' barrier" in text
    assert code == 1, text  # the uncaught HloscopeError, not an abort (134) or a hang
    assert "Check failure" not in text and code != -signal.SIGABRT
    assert took < LIMIT


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _state(pid: int) -> str:
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")
def test_a_stopped_supervisor_stops_its_rank_and_continued_continues_it(tmp_path):
    code = ("import sys; from hloscope._cli._supervise import supervise; "
            f"sys.exit(supervise(['bench', {str(TARGET)!r} + ':f', '--inputs', 'local(8)', "
            "'--min-time', '4'], 0, 1, None, 6.0))")
    p = subprocess.Popen([sys.executable, "-c", code], env=_env(), text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _children(p.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        (child,) = _children(p.pid)
        time.sleep(1)
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(1.5)
        stopped = _state(child)
        os.kill(p.pid, signal.SIGCONT)
        time.sleep(1)
        continued = _state(child)
        code_, text, _ = _finish(p)
    finally:
        p.kill()
    assert stopped in "Tt" and continued not in "Tt", (stopped, continued)
    assert code_ == 0, text


def test_rank_0_stopped_is_told_from_its_pulse_and_the_store_together():
    """Rank 0's pulse last rose up to a beat before the store last answered, so when
    rank 0 is stopped its pulse is past the timeout first (the CI run of 2026-11-27 said
    "rank 0 stopped answering" there): a store that went quiet too names the service."""
    from hloscope._bench._ranks import _SERVICE_STOPPED, _quiet

    now = 100.0
    stopped = {-1: ("", now - 5.7), 0: ("41", now - 6.2)}  # rank 0 stopped 6.2 s ago
    assert _quiet(stopped, now, 6.0) == _SERVICE_STOPPED
    stuck = {-1: ("", now - 0.3), 0: ("41", now - 6.2)}  # its service still answers
    assert _quiet(stuck, now, 6.0) == "rank 0 stopped answering"
    gone = {-1: ("", now - 6.5), 0: ("41", now - 6.9), 2: ("9", now - 0.1)}
    assert _quiet(gone, now, 6.0) == _SERVICE_STOPPED
    rank_1 = {-1: ("", now - 0.2), 0: ("41", now - 0.4), 1: ("7", now - 6.1)}
    assert _quiet(rank_1, now, 6.0) == "rank 1 stopped answering"
    assert _quiet({-1: ("", now - 0.2), 1: ("7", now - 0.4)}, now, 6.0) == ""
