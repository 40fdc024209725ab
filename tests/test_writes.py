"""Every file hloscope writes is written whole or not at all, and a failed write names
the path and exits 2 (never a traceback, never a truncated file)."""

from __future__ import annotations

import os
import random
import resource
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_cli

import hloscope
from hloscope._write import write_text

BIG = "tests/data/generated/fft_cont_pencil_4x2.hlo"


def test_a_failed_render_leaves_the_previous_file(tmp_path):
    path = tmp_path / "report.html"
    path.write_text("previous")

    def text():
        raise RuntimeError("render failed")

    with pytest.raises(RuntimeError):
        from hloscope._write import atomic_path

        with atomic_path(path) as tmp:
            with open(tmp, "w") as f:
                f.write("half")
            text()
    assert path.read_text() == "previous"
    assert os.listdir(tmp_path) == ["report.html"]  # the temporary file is gone


def test_write_errors_name_the_path(tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(hloscope.HloscopeError, match="cannot write .*a-folder: is a folder"):
        write_text(folder, "x")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(hloscope.HloscopeError, match=r"cannot write .*file/x.html"):
        write_text(blocker / "x.html", "x")


def test_permissions_are_kept(tmp_path):
    path = tmp_path / "r.html"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_text(path, "new")
    assert path.read_text() == "new" and (os.stat(path).st_mode & 0o777) == 0o640


def _limited(limit: int):
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


@pytest.mark.parametrize("argv", [
    ["report", BIG, "-o", "{out}/r.html"],
    ["graph", BIG, "-o", "{out}/g.svg"],
    ["diff", BIG, BIG, "-o", "{out}/d.html"],
])
def test_a_full_disk_is_a_clear_error_and_leaves_the_previous_file(tmp_path, argv):
    argv = [a.format(out=tmp_path) for a in argv]
    target = tmp_path / os.path.basename(argv[-1])
    target.write_text("previous")
    r = subprocess.run([sys.executable, "-m", "hloscope", *argv], capture_output=True,
                       text=True, timeout=120, cwd=ROOT, preexec_fn=_limited(4096))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"error: cannot write {target}: File too large"), r.stderr
    assert target.read_text() == "previous"
    assert sorted(os.listdir(tmp_path)) == [target.name]


def test_killing_report_never_leaves_a_damaged_file(tmp_path):
    out = tmp_path / "r.html"
    first = run_cli("report", BIG, "-o", str(out))
    assert first.returncode == 0, first.stderr
    complete = out.read_bytes()
    rng = random.Random(7)
    for _ in range(12):
        p = subprocess.Popen([sys.executable, "-m", "hloscope", "report", BIG, "-o", str(out)],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.5))
        p.kill()
        p.wait()
        assert out.read_bytes() == complete  # the old report or the same new one, whole
    assert sorted(os.listdir(tmp_path)) == ["r.html"] or all(
        n == "r.html" or n.endswith(".part") for n in os.listdir(tmp_path))


def test_bench_folder_rows_are_never_lost_or_cut(tmp_path):
    """Results written into one folder keep every row, each whole."""
    from hloscope._bench._output import write_csv
    from hloscope._bench._result import BenchResult

    path = tmp_path / "results.csv"
    for i in range(5):
        write_csv([BenchResult(name=f"f{i}", params={"Function": f"f{i}"}, times=[0.1])],
                  str(path))
    rows = hloscope.load_results(str(path))
    assert [r.name for r in rows] == [f"f{i}" for i in range(5)]
