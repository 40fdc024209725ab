"""Strong and weak scaling: pooling, efficiency, ideal lines, plots, the CLI."""

from __future__ import annotations

import json
import os

import pytest
from conftest import DATA, run_cli

from hloscope import BenchResult, HloscopeError
from hloscope._bench._scaling import scaling
from hloscope._bench._plot import plot_scaling, scaling_table
from hloscope._bench._files import load_results


def _r(devices: int, n: int, times: list[float], px: int | None = None) -> BenchResult:
    px = px or devices
    return BenchResult("f", {"Function": "f", "Precision": "float32", "X": n, "Y": n, "Z": 1,
                             "PX": px, "PY": devices // px, "Backend": "cpu"},
                       times=times, metadata={"device_count": devices})


def test_strong_scaling_efficiency_and_ideal():
    rs = [_r(1, 64, [8.0, 8.2, 7.9]), _r(2, 64, [4.4, 4.3, 4.5]), _r(4, 64, [2.5, 2.6, 2.4])]
    (s,) = scaling(rs, "strong")
    assert [p.devices for p in s.points] == [1, 2, 4]
    assert [p.time for p in s.points] == [8.0, 4.4, 2.5]
    assert s.points[1].efficiency == pytest.approx(8.0 / (2 * 4.4))
    assert s.points[2].ideal == pytest.approx(2.0)
    assert "strong scaling" in scaling_table([s])


def test_weak_scaling_groups_by_size_per_device():
    rs = [_r(1, 64, [1.0]), _r(4, 128, [1.25]), _r(4, 64, [0.5])]
    series = scaling(rs, "weak", keep_single=True)
    by_size = {s.size: s for s in series}
    assert set(by_size) == {64 * 64, 64 * 64 // 4}
    # A series of one device count scales nothing: left out unless asked for.
    assert [s.size for s in scaling(rs, "weak")] == [64 * 64]
    big = by_size[4096]
    assert [p.devices for p in big.points] == [1, 4]
    assert big.points[1].efficiency == pytest.approx(0.8) and big.points[1].ideal == 1.0


def test_repeated_runs_are_pooled_not_dropped():
    rs = [_r(2, 64, [1.0, 1.0, 1.0]), _r(2, 64, [3.0, 3.0, 3.0, 3.0]), _r(1, 64, [2.0])]
    (s,) = scaling(rs, "strong")
    p = s.points[1]
    assert p.results == 2 and p.runs == 7 and p.time == 3.0  # the median of all 7 runs


def test_fastest_grid_kept_unless_by_grid():
    rs = [_r(1, 64, [4.0]), _r(4, 64, [1.0], px=2), _r(4, 64, [2.0], px=4)]
    (s,) = scaling(rs, "strong")
    assert s.points[1].grid == "2x2" and s.points[1].time == 1.0
    series = scaling(rs, "strong", by_grid=True)
    assert sorted(s.decomposition for s in series) == ["pencils", "slab_yz"]
    assert all(s.points[0].devices == 1 for s in series)


def test_jax_hpc_profiler_rows_pool_by_mean():
    rs = load_results([str(DATA / "bench" / "jhp_headerless.csv")])
    series = scaling(rs, "strong")
    pts = {p.devices: p for s in series for p in s.points}
    assert pts[1].results == 2 and pts[1].metric == "mean"
    assert pts[1].time == pytest.approx((0.0112 + 0.0110) / 2)
    assert pts[8].devices == 8 and pts[4].efficiency == pytest.approx(
        pts[1].time / (4 * pts[4].time))


def test_errors():
    with pytest.raises(HloscopeError, match="device count"):
        scaling([BenchResult("f", {"Function": "f"}, times=[1.0])])
    with pytest.raises(HloscopeError, match="strong"):
        scaling([], "diagonal")


def test_plots_png_and_deterministic_svg(tmp_path):
    rs = [_r(1, 64, [8.0, 8.1]), _r(2, 64, [4.4, 4.2]), _r(4, 64, [2.5, 2.7])]
    series = scaling(rs, "strong")
    png = plot_scaling(series, str(tmp_path / "s.png"), efficiency=True, ideal=True)
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG" and png.endswith(".png")
    a = (tmp_path / "a.svg")
    b = (tmp_path / "b.svg")
    plot_scaling(series, str(a), efficiency=True, ideal=True)
    plot_scaling(series, str(b), efficiency=True, ideal=True)
    assert a.read_text() == b.read_text() and "parallel efficiency" in a.read_text()
    with pytest.raises(HloscopeError, match="png or .svg"):
        plot_scaling(series, str(tmp_path / "s.jpg"))


def test_cli_bench_at_several_device_counts_then_plot_strong_and_weak(tmp_path):
    for px, py in ((1, 1), (2, 1), (4, 2)):
        n = px * py
        strong = run_cli("bench", "examples/fft_pencil.py:do_fft", "--devices", str(n),
                         "--inputs", f"make_input(32, 32, 32, {px}, {py})", "-n", "4",
                         "--warmup", "1", "-o", str(tmp_path / "strong"),
                         "--jhp-csv", str(tmp_path / "jhp" / "do_fft.csv"))
        assert strong.returncode == 0, strong.stderr
        assert "wrote" in strong.stdout and "first run" in strong.stdout
        weak = run_cli("bench", "examples/fft_pencil.py:do_fft", "--devices", str(n),
                       "--inputs", f"make_input({16 * px}, {16 * py}, 16, {px}, {py})", "-n",
                       "4", "--warmup", "1", "-o", str(tmp_path / "weak"))
        assert weak.returncode == 0, weak.stderr
    out = run_cli("plot", str(tmp_path / "strong"), "--strong", "--efficiency", "--ideal",
                  "-o", str(tmp_path / "strong.png"))
    assert out.returncode == 0, out.stderr
    assert "strong scaling: do_fft cpu float32, size 32³" in out.stdout
    assert (tmp_path / "strong.png").stat().st_size > 10_000
    # The same measurements as jax-hpc-profiler's CSV (19 columns, no header) read back as
    # the same strong-scaling series.
    rows = (tmp_path / "jhp" / "do_fft.csv").read_text().splitlines()
    assert len(rows) == 3 and all(len(r.split(",")) == 19 for r in rows)
    ours = json.loads(run_cli("plot", str(tmp_path / "strong"), "--strong", "--json").stdout)
    theirs = json.loads(run_cli("plot", str(tmp_path / "jhp"), "--strong", "--json").stdout)
    (a,), (b,) = ours["series"], theirs["series"]
    assert [p["devices"] for p in a["points"]] == [p["devices"] for p in b["points"]]
    assert (a["function"], a["size"]) == (b["function"], b["size"])
    js = run_cli("plot", str(tmp_path / "weak"), "--weak", "--json")
    (s,) = json.loads(js.stdout)["series"]
    assert [p["devices"] for p in s["points"]] == [1, 2, 8]
    assert s["size"] == 16 ** 3 and s["points"][0]["efficiency"] == 1.0
    assert all(0 < p["efficiency"] for p in s["points"])
    svg = run_cli("plot", str(tmp_path / "weak"), "--weak", "--efficiency", "-o",
                  str(tmp_path / "weak.svg"))
    assert svg.returncode == 0 and (tmp_path / "weak.svg").exists()
    _jax_hpc_profiler_plots_it(tmp_path / "jhp" / "do_fft.csv", tmp_path)


def _jax_hpc_profiler_plots_it(csv_path, tmp_path):
    """jax-hpc-profiler's own `jhp plot` (the test extra installs it) reads hloscope's
    --jhp-csv: against devices and against data size, each a picture, no error."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("jax_hpc_profiler") is None:
        pytest.skip("jax-hpc-profiler is not installed (pip install '.[test]' installs it)")
    for scaling_axis in ("g", "d"):
        png = tmp_path / f"jhp_{scaling_axis}.png"
        out = subprocess.run(
            [sys.executable, "-c", "from jax_hpc_profiler.main import main; main()", "plot",
             "-f", str(csv_path), "-b", "cpu", "-sc", scaling_axis, "-pt", "mean_time",
             "-o", str(png)], capture_output=True, text=True, timeout=300,
            env={**os.environ, "MPLBACKEND": "Agg"})
        assert out.returncode == 0, out.stderr[-2000:]
        assert png.stat().st_size > 5_000, out.stdout


def test_cli_plot_errors():
    out = run_cli("plot", "nowhere.json", "--strong")
    assert out.returncode == 2 and "no such file" in out.stderr
    out = run_cli("plot", str(DATA / "bench" / "jhp_headerless.csv"))
    assert out.returncode == 2 and "--strong, --weak or --size" in out.stderr


def test_cli_bench_errors():
    out = run_cli("bench", "examples/fft_pencil.py:nothing")
    assert out.returncode == 2 and "has no 'nothing'" in out.stderr
    out = run_cli("bench", "examples/fft_pencil.py:do_fft", "--inputs", "os.system('x')")
    assert out.returncode == 2 and "literal arguments" in out.stderr
    out = run_cli("bench", "examples/fft_pencil.py:do_fft", "--param", "novalue")
    assert out.returncode == 2 and "NAME=VALUE" in out.stderr
