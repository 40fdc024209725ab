"""Files jax-hpc-profiler wrote itself (tests/data/bench/jhp_fft_sweep, see its
SOURCE.md): its headerless CSV and, in a folder beside it, a Markdown report
per run, read as one measurement each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hloscope
from conftest import run_cli

SWEEP = Path(__file__).parent / "data" / "bench" / "jhp_fft_sweep"


def _key(r: hloscope.BenchResult) -> tuple[int, int, int]:
    return (r.params["X"], r.params["PX"], r.params["PY"])


def test_its_csv_and_its_reports_beside_it_are_one_measurement_each():
    csv_rows = hloscope.load_results(SWEEP / "fftn.csv")
    reports = hloscope.load_results(SWEEP / "fftn")
    both = hloscope.load_results(SWEEP)
    assert len(csv_rows) == len(reports) == 12
    assert sorted(map(_key, both)) == sorted(map(_key, reports))  # the rows paired away
    assert all(r.times for r in both)  # the reports, with every run, are kept
    rows = {_key(r): r for r in csv_rows}
    for rep in reports:
        row = rows[_key(rep)]
        written = rep.metadata["file_stats"]
        for k in ("min", "max", "mean", "std"):  # as the file says, to the CSV's 4 decimals
            assert row.summary[k] == pytest.approx(written[k], abs=5.1e-8)
        assert row.timings["jit"] == pytest.approx(rep.timings["jit"], abs=5.1e-8)
        for k, v in row.sizes.items():  # the report rounds them (32.00 MB)
            assert rep.sizes[k] == pytest.approx(v, rel=5e-3, abs=0), k


def test_a_note_in_a_results_folder_is_not_a_report_but_a_named_one_is_an_error():
    assert len(hloscope.load_results(SWEEP)) == 12  # SOURCE.md skipped
    with pytest.raises(hloscope.HloscopeError, match="Parameters"):
        hloscope.load_results(SWEEP / "SOURCE.md")


def test_strong_scaling_from_its_folder_counts_each_run_once():
    out = json.loads(run_cli("plot", str(SWEEP), "--strong", "--json").stdout)
    series = {s["size"]: s for s in out["series"]}
    assert sorted(series) == [32 ** 3, 64 ** 3, 128 ** 3]
    for s in series.values():
        assert [p["devices"] for p in s["points"]] == [1, 2, 4, 8]
        assert all(p["results"] == 1 and p["runs"] == 9 for p in s["points"])
        assert all(p["metric"] == "median" for p in s["points"])


def test_its_own_timer_writes_files_that_round_trip(tmp_path):
    jhp = pytest.importorskip("jax_hpc_profiler", reason="pip install '.[test]' installs it")
    import jax
    import jax.numpy as jnp

    from hloscope._bench._output import append_jhp_csv

    timer = jhp.JaxTimer()
    f = jax.jit(lambda a: jnp.sin(a) @ a)
    x = jnp.ones((32, 32))
    timer.chrono_jit(f, x)
    for _ in range(6):
        timer.chrono_fun(f, x)
    csv_path = tmp_path / "f.csv"
    timer.report(str(csv_path), function="f", x=32, y=32, z=1, precision="float32", px=1,
                 py=1, backend="cpu", nodes=1)
    (row,) = hloscope.load_results(csv_path)
    (report,) = hloscope.load_results(tmp_path / "f")
    assert len(hloscope.load_results(tmp_path)) == 1  # the pair is one measurement
    written = report.metadata["file_stats"]
    for k in ("min", "max", "mean", "std"):
        assert row.summary[k] == pytest.approx(written[k], abs=5.1e-8)
    assert len(report.times) == 5 and report.first_run is not None  # its Run 0 apart
    # Written back by hloscope as jax-hpc-profiler's CSV: the same row, to its precision.
    back = tmp_path / "back.csv"
    append_jhp_csv(str(back), [row])
    theirs = csv_path.read_text().strip().split(",")
    ours = back.read_text().strip().split(",")
    assert ours[:9] == theirs[:9] and len(ours) == len(theirs) == 19
    for a, b in zip(ours[9:15], theirs[9:15]):  # times in ms
        assert float(a) == pytest.approx(float(b), abs=1e-4)
    assert ours[15:] == theirs[15:]  # sizes in bytes
