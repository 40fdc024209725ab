"""Many processes for real: two processes on this machine, each with its own CPU
devices, joined by jax.distributed.initialize on localhost."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "bench_worker.py"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _run(mode: str, out: Path) -> list[str]:
    port = str(_port())
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(r), "2", port, mode, str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=150)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"a rank hung in mode {mode}")
    return outs


def test_two_processes_gather_every_rank_and_report_the_slowest(tmp_path):
    r0, r1 = _run("ok", tmp_path)
    assert "2 processes, 4 devices, 2 local" in r0, r0
    assert "RESULT" in r0 and "RESULT" in r1, r0 + r1
    assert "rank 0: WROTE 4" in r0 and "rank 1: WROTE 0" in r1  # one writer
    (js,) = tmp_path.glob("*.json")
    d = json.loads(js.read_text())
    assert len(d["ranks"]) == 2 and all(len(r) == 5 for r in d["ranks"])
    slowest = [max(a, b) for a, b in zip(*d["ranks"])]
    assert d["times"] == slowest
    # each of the 2 processes runs the program on one device of its own: 2 devices in all
    # (4 visible)
    assert d["metadata"]["process_count"] == 2 and d["metadata"]["device_count"] == 2
    assert d["metadata"]["visible_devices"] == 4
    md = next(tmp_path.glob("*.md")).read_text()
    assert "## Processes" in md and "| Rank 1 |" in md


def test_a_missing_rank_gives_a_clear_error_within_the_timeout(tmp_path):
    r0, _ = _run("die", tmp_path)
    line = next((x for x in r0.splitlines() if "HLOSCOPE-ERROR" in x), None)
    assert line is not None, r0
    assert "rank 1 did not reach the 'compiled' barrier" in line
    elapsed = float(line.split(" after ", 1)[1].split(" s:", 1)[0])
    assert elapsed < 8 + 15, line  # the 8 s timeout, plus compile time before the barrier


def test_ranks_that_disagree_on_the_iteration_count_are_an_error(tmp_path):
    r0, r1 = _run("disagree", tmp_path)
    for out in (r0, r1):
        assert "HLOSCOPE-ERROR" in out and "disagree" in out and "iterations=6" in out, out


def test_min_time_is_measured_on_every_rank(tmp_path):
    r0, r1 = _run("mintime", tmp_path)
    line = next((x for x in r0.splitlines() if "TOTALS" in x), None)
    assert line is not None, r0 + r1
    totals = [float(t) for t in line.split("TOTALS", 1)[1].split()]
    # Every rank's timed runs last min_time=3 s, and not many times more (the ranks run
    # one count, topped up in rounds sized from the runs so far: where the machine slows
    # down meanwhile, the last round runs over: 3.41 s seen on a loaded 2-core machine,
    # 6.17 s once during a full suite).  The bound catches rounds that never stop, not
    # the machine's speed (timings are benchmarks' business, not tests').
    assert len(totals) == 2 and all(3.0 <= t <= 9.0 for t in totals), line
