"""Other processes' CPU time while a profile ran (`_profile._contention`): the figure the
busy-machine note gives, not the load average, which counts the profile's own threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from hloscope._profile import _contention
from hloscope._profile._contention import CpuSample, busy_machine, others, sample

linux = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="no /proc/stat here")


def test_others_is_the_machines_busy_time_less_this_process():
    a = CpuSample(wall=10.0, busy=100.0, own=5.0)
    b = CpuSample(wall=12.0, busy=103.0, own=6.0)  # 3 CPU-s busy, 1 of them this process's
    assert others(a, b) == pytest.approx(1.0)
    assert others(a, CpuSample(12.0, 100.5, 6.0)) == 0.0  # ticks apart: never below zero
    assert others(a, CpuSample(10.1, 101.0, 5.0)) is None  # too short to judge
    assert others(CpuSample(10.0, None, 5.0), CpuSample(12.0, None, 6.0)) is None


def test_the_note_says_what_other_processes_took(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    a = CpuSample(0.0, 0.0, 0.0)
    assert busy_machine(a, CpuSample(1.0, 1.9, 1.8)) is None  # 0.1 CPU: quiet
    note = busy_machine(a, CpuSample(2.0, 4.0, 2.8))  # 0.6 CPUs' worth of others
    assert note.startswith("other processes used 0.60 of this machine's 2 CPUs while the "
                           "profile ran (2.00 s)")
    # 0.25 CPU is not a tenth of 64 CPUs
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert busy_machine(a, CpuSample(2.0, 4.0, 3.0)) is None
    assert busy_machine(a, CpuSample(2.0, 20.0, 3.0)).startswith("other processes used 8.50")


def test_without_proc_stat_the_load_average_is_said_for_what_it_is(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (7.5, 7.0, 6.0), raising=False)
    a, b = CpuSample(0.0, None, 0.0), CpuSample(2.0, None, 1.0)
    assert busy_machine(a, b).startswith("this machine was busy: load average 7.5 on 2 CPUs "
                                         "(this process's threads count too)")
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 1.0, 1.0), raising=False)
    assert busy_machine(a, b) is None
    # /proc/stat read, but a window too short to judge: no guess from the load average
    assert busy_machine(CpuSample(0.0, 1.0, 0.0), CpuSample(0.1, 1.0, 0.0)) is None


def test_an_unreadable_or_foreign_stat_file_gives_no_figure(tmp_path):
    bad = tmp_path / "stat"
    for text in ("", "cpu 1 2\n", "intr 1 2 3 4 5 6 7 8 9\n", "cpu a b c d e f g h\n"):
        bad.write_text(text)
        assert _contention._busy_seconds(str(bad)) is None
    assert _contention._busy_seconds(str(tmp_path / "missing")) is None
    bad.write_text("cpu  100 0 50 1000 5 0 10 40 0 0\n")  # user nice system idle ... steal
    assert _contention._busy_seconds(str(bad)) == pytest.approx(200 / os.sysconf("SC_CLK_TCK"))


@linux
def test_another_process_spinning_is_counted_and_this_ones_own_work_is_not():
    """A thread of this process spinning is this process's own; a child process spinning
    is another's."""
    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    a = sample()
    spin(0.6)  # this process's own work
    own = others(a, sample())
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nend = time.monotonic() + 0.8\n"
                              "while time.monotonic() < end: pass"])
    a = sample()
    t = threading.Thread(target=time.sleep, args=(0.6,))
    t.start()
    t.join()
    theirs = others(a, sample())
    child.wait()
    assert own is not None and theirs is not None
    assert theirs > own + 0.3  # the child spun most of the window on the other CPU


def test_the_machines_own_floor_runs():
    """benchmarks/machine_floor.py, the reference profile_accuracy.py prints beside its
    repeat figure, in a small size (the full one runs there)."""
    pytest.importorskip("numpy")
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "machine_floor.py")
    out = subprocess.run([sys.executable, script, "--pairs", "1", "--min-time", "0.02"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("the machine's own floor")
    assert [ln.split()[0] for ln in lines[1:]] == ["copy", "copy", "matmul"]
    assert all("within 10% in" in ln and "of 1 pairs" in ln for ln in lines[1:])
