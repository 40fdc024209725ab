"""`hloscope plot`'s options, on files jax-hpc-profiler wrote itself
(tests/data/bench/jhp_fft_sweep: 32³ to 128³ on 1, 2, 4 and 8 devices)."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, run_cli
from hloscope import HloscopeError
from hloscope._bench._files import load_results
from hloscope._bench._plot import plot_scaling, scaling_table
from hloscope._bench._scaling import decomposition, scaling
from hloscope._bench._select import select

SWEEP = DATA / "bench" / "jhp_fft_sweep"


def _json(*args: str) -> dict:
    out = run_cli("plot", str(SWEEP), *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_time_against_size_has_a_series_per_device_count():
    d = _json("--size")
    assert d["mode"] == "size"
    assert [s["devices"] for s in d["series"]] == [1, 2, 4, 8]
    for s in d["series"]:
        assert [p["label"] for p in s["points"]] == ["32³", "64³", "128³"]
        times = [p["time"] for p in s["points"]]
        assert times == sorted(times)  # a bigger FFT takes longer


def test_the_statistic_is_chosen_and_said():
    med = _json("--strong", "--only-size", "128")["series"][0]["points"]
    lo = _json("--strong", "--only-size", "128", "--stat", "min")["series"][0]["points"]
    hi = _json("--strong", "--only-size", "128", "--stat", "max")["series"][0]["points"]
    jit = _json("--strong", "--only-size", "128", "--stat", "jit")["series"][0]["points"]
    for a, b, c, j in zip(lo, med, hi, jit):
        assert a["time"] <= b["time"] <= c["time"]
        assert a["metric"] == "min" and c["metric"] == "max" and j["metric"] == "jit"
        assert j["time"] > c["time"]  # the first call compiles
    text = run_cli("plot", str(SWEEP), "--strong", "--stat", "min").stdout
    assert "time: fastest run" in text


def test_filters_keep_what_they_name_and_say_what_there_is():
    rs = load_results(SWEEP)
    assert {r.params["X"] for r in select(rs, sizes=["64"])} == {64}
    assert {r.params["X"] for r in select(rs, sizes=["64x64x64"])} == {64}
    assert {r.devices for r in select(rs, devices=[2, 8])} == {2, 8}
    assert {f"{r.params['PX']}x{r.params['PY']}" for r in select(rs, grids=["2x2"])} == {"2x2"}
    assert len(select(rs, backends=["CPU"], functions=["fftn"], precisions=["float32"])) == 12
    with pytest.raises(HloscopeError, match=r"no result with precision float64 \(here: float32\)"):
        select(rs, precisions=["float64"])
    out = run_cli("plot", str(SWEEP), "--strong", "--devices", "3")
    assert out.returncode == 2 and "here: 1, 2, 4, 8" in out.stderr


def test_strategies_follow_jax_hpc_profilers_names():
    rs = load_results(SWEEP)
    assert {decomposition(r) for r in rs} == {"", "slab_yz", "pencils"}
    slabs = scaling(rs, "strong", strategy="slab_yz")
    assert all(p.grid in ("1x1", "2x1") for s in slabs for p in s.points)
    every = scaling(rs, "strong", strategy="all")
    assert sorted({s.decomposition for s in every}) == ["pencils", "slab_yz"]
    assert all(s.points[0].devices == 1 for s in every)  # one device starts each series
    fastest = scaling(rs, "strong")
    assert {s.decomposition for s in fastest} == {""}
    with pytest.raises(HloscopeError, match="no slab_xy results"):
        scaling(rs, "strong", strategy="slab_xy")


def test_weak_scaling_leaves_out_one_point_series_and_says_so():
    d = _json("--weak")
    assert d["left_out_single_points"] == 8
    # 32³ on 1 device and 64³ on 8; 64³ on 1 and 128³ on 8: the same size per device.
    assert [[p["label"] for p in s["points"]] for s in d["series"]] == [["32³", "64³"],
                                                                      ["64³", "128³"]]
    assert all([p["devices"] for p in s["points"]] == [1, 8] for s in d["series"])
    text = run_cli("plot", str(SWEEP), "--weak").stdout
    assert "left out: 8 series with one device count" in text
    out = run_cli("plot", str(SWEEP), "--weak", "--only-size", "128")
    assert out.returncode == 2 and "no weak scaling series" in out.stderr


def test_memory_figures_in_chosen_units():
    text = run_cli("plot", str(SWEEP), "--strong", "--only-size", "128", "--memory",
                   "argument,temporary", "--units", "MB").stdout
    assert "argument (MB)" in text and "16.78" in text  # 128³ complex64 on one device
    out = run_cli("plot", str(SWEEP), "--strong", "--memory", "heap")
    assert out.returncode == 2 and "unknown figure 'heap'" in out.stderr


@pytest.mark.parametrize("args", [
    ("--size",), ("--strong", "--efficiency", "--ideal", "--strategy", "all"),
    ("--strong", "--memory", "argument,output,temporary", "--units", "KiB"),
    ("--weak", "--xscale", "linear", "--yscale", "linear", "--title", "t", "--xlabel", "x",
     "--ylabel", "y", "--figsize", "6,4"),
])
def test_plots_are_written_and_svgs_byte_identical(tmp_path, args):
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    for p in (a, b):
        out = run_cli("plot", str(SWEEP), *args, "-o", str(p))
        assert out.returncode == 0, out.stderr
    assert a.read_bytes() == b.read_bytes() and b"<svg" in a.read_bytes()


def test_the_legend_lists_measured_series_before_ideal_lines(tmp_path):
    series = scaling(load_results(SWEEP), "strong", strategy="all")
    path = plot_scaling(series, str(tmp_path / "p.svg"), ideal=True)
    text = (tmp_path / "p.svg").read_text()
    first_ideal = text.index("ideal (")
    assert all(text.index(s.label.replace("³", "")[:20]) < first_ideal for s in series)
    assert path.endswith(".svg")


def test_bad_options_are_one_clear_line():
    for args, needle in [(("--strong", "--stat", "p99"), "unknown statistic"),
                         (("--strong", "--strategy", "slabs"), "unknown grid strategy"),
                         (("--strong", "--figsize", "big"), "--figsize"),
                         (("--strong", "--xscale", "cubic", "-o", "x.png"), "unknown xscale"),
                         (("--strong", "--units", "parsecs", "--memory", "output"),
                          "unknown unit")]:
        out = run_cli("plot", str(SWEEP), *args)
        assert out.returncode == 2 and needle in out.stderr, (args, out.stderr)
        assert len([ln for ln in out.stderr.splitlines() if ln.startswith("error:")]) == 1


def test_the_table_names_mode_and_statistic():
    series = scaling(load_results(SWEEP), "size")
    text = scaling_table(series)
    assert text.startswith("time against size: fftn cpu float32, 1 device")
    assert "time: median of the pooled runs" in text


def test_a_series_has_one_colour_in_every_panel(tmp_path):
    # Time against size: one panel per device count, one legend: a method is one colour.
    from hloscope._bench._plot import _COLORS

    series = scaling(load_results(SWEEP), "size")
    assert len({s.label.rsplit(", ", 1)[0] for s in series}) == 1 < len(series)
    plot_scaling(series, str(tmp_path / "p.svg"))
    text = (tmp_path / "p.svg").read_text()
    assert [c for c in _COLORS if c in text] == [_COLORS[0]]


def test_strategy_all_draws_the_shared_one_device_point_once(tmp_path):
    import re

    series = scaling(load_results(SWEEP), "strong", strategy="all")
    starts = {(s.points[0].devices, s.points[0].time) for s in series}
    assert len(series) > len(starts)  # strategies share their one-device run
    plot_scaling(series, str(tmp_path / "p.svg"), ideal=True)
    text = (tmp_path / "p.svg").read_text()
    assert len(re.findall(r"<!-- ideal \(", text)) == len(starts)


@pytest.mark.parametrize("stat", ["min", "mean", "max"])
def test_a_statistic_means_the_same_for_a_csv_row_and_its_markdown_report(stat):
    # jax-hpc-profiler's CSV row holds its figures over every run, Run 0 included; its
    # Markdown report of the same measurement has every run: both give the same point.
    def points(path):
        rs = load_results(path)
        (s,) = [x for x in scaling(rs, "size", stat=stat) if x.devices == 8]
        return [(p.label, p.time, p.metric) for p in s.points]

    rows, reports = points(SWEEP / "fftn.csv"), points(SWEEP / "fftn")
    assert [(a, m) for a, _, m in rows] == [(a, m) for a, _, m in reports]
    for (_, t_row, _), (_, t_report, _) in zip(rows, reports):
        assert t_row == pytest.approx(t_report, abs=1e-6)  # the reports keep 3 decimals of ms
    text = run_cli("plot", str(SWEEP), "--size", "--stat", stat).stdout
    assert "(Run 0 included)" in text


def test_a_method_file_that_repeats_another_is_noted_not_dropped_silently(tmp_path):
    rows = (SWEEP / "fftn.csv").read_text()
    (tmp_path / "implA.csv").write_text(rows)
    (tmp_path / "implB.csv").write_text(rows)  # a copy: one measurement, counted once
    out = run_cli("plot", str(tmp_path), "--strong", "--only-size", "128")
    assert out.returncode == 0, out.stderr
    assert "implB.csv: its 12 rows repeat" in out.stdout and "implB has no series" in out.stdout
    notes = json.loads(run_cli("plot", str(tmp_path), "--strong", "--json").stdout)["notes"]
    assert len(notes) == 1 and "counted once, under implA" in notes[0]
    assert json.loads(run_cli("plot", str(SWEEP), "--strong", "--json").stdout)["notes"] == []
