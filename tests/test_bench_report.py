"""The benchmark report: seed 000's sections and hloscope's additions, the
Temporary Size explained buffer by buffer, the parameter checks, the files
(JSON, CSV with header and schema, HTML), and jax-hpc-profiler's files read."""

from __future__ import annotations

import json
import re
import sys

import pytest
from conftest import DATA, ROOT, SEEDS, check_golden, run_cli

import hloscope
from hloscope import BenchResult, HloscopeError
from hloscope._bench._columns import CSV_COLUMNS
from hloscope._bench._files import load_results, read_csv
from hloscope._bench._output import write_csv
from hloscope._bench._jhp import read_jhp_csv, read_jhp_markdown

BENCH = DATA / "bench"
SEED_SECTIONS = ["Parameters", "Profiling Data", "Iteration Runs", "Compiled Code",
                 "Lowered Code", "JAXPR"]
ADDED = ["Checks", "Temporary Size, buffer by buffer", "Memory at the Peak", "Kernels",
         "Collectives", "Metadata"]


def _sections(md: str) -> list[str]:
    return re.findall(r"^## (.+)$", md, re.MULTILINE)


@pytest.fixture(scope="module")
def fft_result() -> BenchResult:
    sys.path.insert(0, str(ROOT / "examples"))
    from fft_pencil import do_fft, make_input

    return hloscope.bench(do_fft, make_input(64, 64, 64, 4, 2), iterations=6, warmup=1,
                          precision="float32", x=64, y=64, z=64, px=2, py=4, backend="gloo")


def test_sharded_fft_report_has_every_seed_section_then_the_additions(fft_result):
    md = fft_result.markdown()
    seed = _sections((SEEDS / "fft_cont_2048_pencil8.jax_hpc_profiler.md").read_text())
    assert seed == SEED_SECTIONS
    got = _sections(md)
    assert [s for s in got if s in SEED_SECTIONS] == SEED_SECTIONS  # same order
    for s in ADDED:
        assert s in got
    assert got.index("Iteration Runs") < got.index("Checks") < got.index("Compiled Code")
    for row in ("JIT Time", "Min Time", "Max Time", "Mean Time", "Std Time", "Last Time",
                "Generated Code", "Argument Size", "Output Size", "Temporary Size"):
        assert f"| {row} |" in md
    assert md.startswith("# Reporting for do_fft\n")
    assert "| First run |" in md and "not in the statistics" in md
    assert "| Devices | 8 |" in md and "| Mesh | x: 4, y: 2 |" in md
    assert "--xla_force_host_platform_device_count=8" in md


def test_temporary_size_is_explained_buffer_by_buffer(fft_result):
    from hloscope._bench._report import bench_report_data

    t = bench_report_data(fft_result).temp
    xla_temp = fft_result.report.memory_analysis["temp_size_in_bytes"]
    assert t["xla_temp"] == xla_temp == t["total_bytes"] == sum(s for _, s in t["allocations"])
    bufs = t["buffers"]
    assert bufs and all(b["live"] for b in bufs)
    sizes = dict(t["allocations"])
    for b in bufs:  # every value inside its allocation
        assert 0 <= b["offset"] and b["offset"] + b["bytes"] <= sizes[b["allocation"]]
    for i, a in enumerate(bufs):  # values sharing bytes never live at the same time
        for b in bufs[i + 1:]:
            overlap = a["offset"] < b["offset"] + b["bytes"] and \
                b["offset"] < a["offset"] + a["bytes"]
            if a["allocation"] == b["allocation"] and overlap:
                assert a["live"][1] <= b["live"][0] or b["live"][1] <= a["live"][0], (a, b)
    # the all-gathers the partitioner inserted are among them, with their source line
    assert any(b["value"].startswith("all-gather") and "fft_pencil.py" in (b["source"] or "")
               for b in bufs)


def test_collectives_and_kernels_sections(fft_result):
    md = fft_result.markdown()
    coll = md.split("## Collectives", 1)[1].split("\n---\n", 1)[0]
    assert "| all-gather |" in coll and "of" in coll
    assert "## Kernels\n" in md and "fft" in md.split("## Kernels", 1)[1]


def test_checks_name_every_mismatch(fft_result):
    checks = {c["parameter"]: c for c in fft_result.checks}
    assert checks["X"]["ok"] and checks["Precision"]["ok"]
    assert not checks["PX"]["ok"] and checks["PX"]["program"] == 4
    assert "swapped" in checks["PX"]["note"]
    import jax.numpy as jnp

    r = hloscope.bench(lambda a: a * 2, jnp.ones((8, 4)), iterations=2, warmup=0, x=16,
                       z=3, precision="float64")
    c = {c["parameter"]: c for c in r.checks}
    assert not c["X"]["ok"] and c["X"]["program"] == 8
    assert not c["Z"]["ok"] and c["Z"]["program"] is None and "no Z" in c["Z"]["note"]
    assert not c["Precision"]["ok"] and c["Precision"]["program"] == "float32"
    assert "MISMATCH" in r.markdown()


def test_jax_hpc_profilers_conventions_are_not_mismatches():
    import jax.numpy as jnp

    # A 2-D complex64 program, described as jax-hpc-profiler's users do: float32, x=y=z.
    r = hloscope.bench(lambda a: jnp.fft.fft2(a), jnp.ones((8, 8), jnp.complex64),
                       iterations=2, warmup=0, precision="float32", x=8, y=8, z=8, px=1, py=1)
    c = {c["parameter"]: c for c in r.checks}
    assert all(v["ok"] for v in c.values()), c
    assert "complex64 is float32" in c["Precision"]["note"]
    assert "z = x" in c["Z"]["note"]
    assert "MISMATCH" not in r.markdown()
    # What the program contradicts still is one: float64, a z that is not x, a real grid.
    r = hloscope.bench(lambda a: a * 2, jnp.ones((8, 8), jnp.complex64), iterations=2,
                       warmup=0, precision="float64", x=8, z=4, px=2, py=1)
    c = {c["parameter"]: c for c in r.checks}
    assert not c["Precision"]["ok"] and not c["Z"]["ok"] and not c["PX"]["ok"]
    assert c["PY"]["ok"]


def test_golden_markdown_and_html_from_a_saved_result():
    r = load_results([str(BENCH / "fft_pencil_64.json")])[0]
    md = r.markdown()
    check_golden("bench/fft_pencil_64.md", md)
    page = r.html()
    check_golden("bench/fft_pencil_64.html", page)
    assert r.markdown() == md and r.html() == page  # deterministic
    assert "<script" not in page and "default-src 'none'" in page


def test_json_round_trip_keeps_the_report(tmp_path, fft_result):
    p = tmp_path / "r.json"
    fft_result.save(str(p))
    back = load_results([str(p)])[0]
    assert back.times == fft_result.times and back.checks == fft_result.checks
    assert back.markdown() == fft_result.markdown()


def test_folder_output_writes_md_json_html_and_a_csv_row(tmp_path, fft_result):
    written = fft_result.save(str(tmp_path))
    names = sorted(p.rsplit("/", 1)[1] for p in written)
    assert names == sorted([f"{fft_result.file_stem()}{e}" for e in (".html", ".json", ".md")]
                           + ["results.csv"])
    fft_result.save(str(tmp_path))  # a second run appends a row
    lines = (tmp_path / "results.csv").read_text().splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS) and len(lines) == 3
    assert all(line.startswith("hloscope.bench/1,") for line in lines[1:])
    # the folder holds the run twice (JSON overwritten, CSV appended): read back once each
    rs = load_results([str(tmp_path)])
    assert len(rs) == 1


def test_csv_round_trip_keeps_raw_times_and_ranks(tmp_path):
    a = BenchResult("f", {"Function": "f", "X": 64, "PX": 2, "PY": 1, "mode": "fast"},
                    times=[0.001, 0.0012, 0.0011], first_run=0.01, warmup=2,
                    timings={"trace": 0.01, "lower": 0.002, "compile": 0.1},
                    sizes={"temporary": 1024, "argument": None},
                    ranks=[[0.001, 0.0012, 0.0011], [0.0009, 0.0011, 0.001]],
                    metadata={"device_count": 2, "process_count": 2})
    p = tmp_path / "r.csv"
    write_csv([a, a], str(p))
    back = read_csv(p.read_text(), path=str(p))
    assert len(back) == 2
    b = back[0]
    assert b.times == pytest.approx(a.times, abs=1e-12) and b.ranks == [
        pytest.approx(x, abs=1e-12) for x in a.ranks]
    assert b.params == a.params and b.sizes["temporary"] == 1024 and b.devices == 2
    assert b.timings == pytest.approx(a.timings)
    foreign = tmp_path / "other.csv"
    foreign.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(HloscopeError, match="another header"):
        write_csv([a], str(foreign))


def test_reads_jax_hpc_profiler_csv_19_and_20_columns():
    text = (BENCH / "jhp_headerless.csv").read_text()
    rs = read_jhp_csv(text, path="jhp.csv")
    assert len(rs) == 5
    r = rs[0]
    assert r.params == {"Function": "FFT", "Precision": "float32", "X": 256, "Y": 256,
                        "Z": 256, "PX": 1, "PY": 1, "Backend": "NCCL", "Nodes": 1}
    assert r.stats["mean"] == pytest.approx(0.0112) and r.timings["jit"] == pytest.approx(
        0.09075)
    assert r.sizes["temporary"] == 134217728 and "flops" not in r.metadata
    assert rs[4].metadata["flops"] == 1.5e9 and rs[4].devices == 8
    with_header = ",".join(
        ["function", "precision", "x", "y", "z", "px", "py", "backend", "nodes", "jit_time",
         "min_time", "max_time", "mean_time", "std_div", "last_time", "generated_code",
         "argument_size", "output_size", "temp_size"]) + "\n" + text.splitlines()[0] + "\n"
    assert len(read_jhp_csv(with_header)) == 1  # its concat's output reads back
    with pytest.raises(HloscopeError, match=r"jhp.csv:2: 7 columns"):
        read_jhp_csv(text.splitlines()[0] + "\nFFT,float32,1,1,1,1,1\n", path="jhp.csv")
    with pytest.raises(HloscopeError, match="not a finite number"):
        read_jhp_csv(text.splitlines()[0].replace("90.75", "fast"), path="jhp.csv")


def test_reads_jax_hpc_profiler_markdown_with_run_0_apart():
    p = SEEDS / "fft_cont_2048_pencil8.jax_hpc_profiler.md"
    r = read_jhp_markdown(p.read_text(), path=str(p))
    assert r.params["Function"] == "FFT-cont" and r.params["PX"] == 2 and r.devices == 8
    assert r.first_run == pytest.approx(0.250064) and len(r.times) == 9
    assert r.metadata["run0_over_median"] == pytest.approx(1.485, abs=0.01)
    assert r.sizes["argument"] == 4 * 1024**3 and r.sizes["temporary"] == 16 * 1024**3
    assert r.timings["jit"] == pytest.approx(8.323505)
    md = r.markdown()  # re-rendered by hloscope: the kernels come from its compiled code
    assert "## Kernels" in md and "pfft3d" in md and "## Compiled Code" in md
    # Its own figures stay as written, beside hloscope's view, each labelled; its JIT Time
    # is its own (trace, compile and the first run), not a sum of phases it never timed.
    assert "| Mean Time (as the file says: every run) | 176.4701 ms |" in md
    assert "| Min Time (as the file says: every run) | 167.6046 ms |" in md
    assert "| Mean Time (hloscope: the first run apart) | 168.2930 ms |" in md
    assert "| JIT Time | 8323.5050 ms (jax-hpc-profiler's: trace, compile and the first " \
        "run together) |" in md


@pytest.mark.parametrize("bad", ["", "not json", "[1, 2]", '{"schema": "other"}',
                                 '{"schema": "hloscope.bench/1"}'])
def test_bad_result_files_get_a_clear_error(tmp_path, bad):
    p = tmp_path / "r.json"
    p.write_text(bad)
    with pytest.raises(HloscopeError) as e:
        load_results([str(p)])
    assert "r.json" in str(e.value)


def test_binary_and_missing_result_files(tmp_path):
    p = tmp_path / "r.csv"
    p.write_bytes(b"\x00\xff\xfe" * 50)
    with pytest.raises(HloscopeError, match="not text"):
        load_results([str(p)])
    with pytest.raises(HloscopeError, match="no such file"):
        load_results([str(tmp_path / "missing.json")])


def test_hostile_strings_are_escaped_in_markdown_and_html():
    evil = "<script>alert(1)</script>|`x`"
    r = BenchResult(evil, {"Function": evil, "note": "a|b\nc"}, times=[1e-3, 2e-3, 1.5e-3],
                    metadata={"host": "<img src=x onerror=alert(1)>"})
    page = r.html()
    assert "<script>alert" not in page and "<img src=x" not in page
    md = r.markdown()
    assert "| note | a\\|b c |" in md


def test_json_written_is_valid_and_documented_keys(fft_result):
    d = json.loads(json.dumps(fft_result.to_dict()))
    for key in ("schema", "name", "params", "times", "first_run", "warmup", "overhead",
                "timings", "sizes", "checks", "metadata", "ranks", "stats", "report"):
        assert key in d
    assert d["schema"] == "hloscope.bench/1"


HOSTILE_MD = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>",
              "[click](javascript:alert(3))", "**bold** _em_ `code` ~~gone~~", "a|b",
              "&lt;already&gt;", "x\\y", "<http://evil>"]


def test_markdown_renders_user_text_as_text_in_a_commonmark_renderer():
    # rich depends on markdown-it-py, a CommonMark renderer: what a reader's viewer does.
    from markdown_it import MarkdownIt

    r = BenchResult(HOSTILE_MD[0], {f"p{i}": v for i, v in enumerate(HOSTILE_MD)},
                    times=[1e-3, 2e-3, 1.5e-3], metadata={"host": HOSTILE_MD[1]})
    html = MarkdownIt("commonmark").enable("table").render(r.markdown())
    for tag in ("<script", "<img", "<a ", "<strong", "<em", "<code", "<s>", "<del"):
        assert tag not in html, tag
    # Each value reads back as written once the renderer has done its work.
    import html as htmllib

    text = htmllib.unescape(re.sub(r"<[^>]+>", "", html))
    for v in HOSTILE_MD:
        assert v in text, v


def test_jax_hpc_profiler_rows_with_n_a_sizes_read_as_missing(tmp_path):
    # Its Timer(compile_info=False) and NumpyTimer write "N/A" where they have no size.
    row = "FFT,float32,256,256,256,1,1,NCCL,1,90.75,10.5,12.7,11.2,0.6,11.0,N/A,N/A,N/A,N/A"
    (r,) = read_jhp_csv(row + "\n", path="na.csv")
    assert r.sizes == {"generated_code": None, "argument": None, "output": None,
                       "temporary": None}
    assert r.stats["mean"] == pytest.approx(0.0112)
    (tmp_path / "na.csv").write_text(row + ",N/A\n")
    out = run_cli("plot", str(tmp_path / "na.csv"), "--size")  # one point: no scaling
    assert out.returncode == 0, out.stderr
    with pytest.raises(HloscopeError, match="not a finite number"):
        read_jhp_csv(row.replace("90.75", "N/A"), path="na.csv")  # times are not optional


def test_a_jax_hpc_profiler_csv_row_and_its_markdown_report_are_one_measurement(tmp_path):
    # Its default layout: results.csv, and the Markdown report of the same run in a folder
    # beside it.  hloscope keeps the report (it has every run) and drops the row.
    md = SEEDS / "fft_cont_2048_pencil8.jax_hpc_profiler.md"
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / md.name).write_text(md.read_text())
    same = ("FFT-cont,float32,2048,2048,2048,2,4,NCCL,1,8323.504990999936,167.60458374023438,"
            "250.06431579589844,176.47007751464844,24.532989501953125,170.0,0,4294967296,"
            "4294967296,17179869184")
    other = same.replace("176.47007751464844", "180.5")  # another run of the same point
    (tmp_path / "results.csv").write_text(same + "\n" + other + "\n")
    rs = load_results(str(tmp_path))
    assert len(rs) == 2
    assert sorted(len(r.times) for r in rs) == [0, 9]  # the report, and the other run
    assert [r.summary.get("mean") for r in rs if not r.times] == [pytest.approx(0.1805)]


def test_one_csv_per_method_keeps_a_series_per_method(tmp_path):
    # jax-hpc-profiler compares implementations with one CSV per method, often under one
    # function name: a series each, unless --pool-methods.
    row = "FFT,float32,256,256,256,{px},1,NCCL,1,90.0,{t},{t},{t},0.1,{t},0,0,0,0"
    for name, t1, t2 in (("implA", 10.0, 6.0), ("implB", 12.0, 9.0)):
        (tmp_path / f"{name}.csv").write_text(row.format(px=1, t=t1) + "\n"
                                              + row.format(px=2, t=t2) + "\n")
    data = json.loads(run_cli("plot", str(tmp_path), "--strong", "--json").stdout)
    series = {s["method"]: [p["time"] for p in s["points"]] for s in data["series"]}
    assert series == {"implA": [0.010, 0.006], "implB": [0.012, 0.009]}
    pooled = json.loads(run_cli("plot", str(tmp_path), "--strong", "--json",
                                "--pool-methods").stdout)["series"]
    assert len(pooled) == 1 and pooled[0]["method"] is None
    assert [p["results"] for p in pooled[0]["points"]] == [2, 2]


def test_a_result_written_as_jax_hpc_profiler_csv_reads_back(tmp_path):
    from hloscope._bench._output import append_jhp_csv

    r = load_results(str(BENCH / "fft_pencil_64.json"))[0]
    path = str(tmp_path / "do_fft.csv")
    append_jhp_csv(path, [r])
    append_jhp_csv(path, [r])  # appended, never rewritten from scratch
    rows = read_jhp_csv((tmp_path / "do_fft.csv").read_text(), path=path)
    assert len(rows) == 2
    back = rows[0]
    assert back.params == {"Function": "do_fft", "Precision": "float32", "X": 64, "Y": 64,
                           "Z": 64, "PX": 2, "PY": 4, "Backend": "gloo", "Nodes": 1}
    for k in ("min", "max", "mean"):
        assert back.summary[k] == pytest.approx(r.stats[k])
    # Its Std is NumPy's default (ddof=0); hloscope's own is the sample's (ddof=1).
    import statistics

    assert back.summary["std"] == pytest.approx(statistics.pstdev(r.times))
    assert back.summary["std"] < r.stats["std"]
    assert back.sizes["temporary"] == r.sizes["temporary"]
    # jax-hpc-profiler's jit_time is trace, compile and the first run together.
    jit = sum(r.timings[k] for k in ("trace", "lower", "compile")) + r.first_run
    assert back.timings["jit"] == pytest.approx(jit)


def test_jax_hpc_profiler_csv_writes_a_complex_precision_as_its_parts_and_leaves_no_lock(
        tmp_path):
    # jax-hpc-profiler's plot knows float32/float64 only: a complex64 FFT is float32.
    import dataclasses

    from hloscope._bench._output import append_jhp_csv

    r = load_results(str(BENCH / "fft_pencil_64.json"))[0]
    r = dataclasses.replace(r, params={**r.params, "Precision": "complex64"})
    path = str(tmp_path / "do_fft.csv")
    append_jhp_csv(path, [r])
    assert (tmp_path / "do_fft.csv").read_text().split(",")[1] == "float32"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["do_fft.csv"]  # no .lock left


def test_jax_hpc_profilers_own_plot_draws_a_complex_fft_sweep_hloscope_wrote(tmp_path):
    # The rows `hloscope bench --jhp-csv` adds (append_jhp_csv) for a complex64 FFT on
    # 1 to 8 devices: jax-hpc-profiler's `jhp plot` draws them (it dropped 'complex64').
    import dataclasses
    import os
    import shutil
    import subprocess

    from hloscope._bench._output import append_jhp_csv

    jhp = shutil.which("jhp", path=os.path.dirname(sys.executable))
    if jhp is None:
        pytest.skip("jax-hpc-profiler is not installed")
    r = load_results(str(BENCH / "fft_pencil_64.json"))[0]
    sweep = [dataclasses.replace(r, params={**r.params, "Precision": "complex64", "PX": px,
                                            "PY": py}, times=[t / px / py for t in r.times])
             for px, py in ((1, 1), (1, 2), (2, 2), (2, 4))]
    csv_path = tmp_path / "do_fft.csv"
    append_jhp_csv(str(csv_path), sweep)
    png = tmp_path / "sweep.png"
    out = subprocess.run([jhp, "plot", "-f", str(csv_path), "-pt", "mean_time", "-sc", "GPUs",
                          "-d", "64", "-pr", "float32", "-b", str(r.params["Backend"]),
                          "-o", str(png)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "No volumes to plot" not in out.stdout
    assert png.stat().st_size > 10_000


def test_sizes_come_from_the_largest_argument():
    """A layer norm `f(gain, x)`: X, Y and the precision are x's, not the gain's (a trial's
    benchmark was filed as X=128, the gain's length)."""
    import jax.numpy as jnp

    from hloscope._bench._metadata import program_params

    gain, x = jnp.ones((128,), jnp.bfloat16), jnp.ones((4096, 128))
    params, checks = program_params("ln", (gain, x), {"x": 4096})
    assert params["X"] == 4096 and params["Y"] == 128 and params["Precision"] == "float32"
    assert checks[0]["ok"] and checks[0]["note"] == "argument float32[4096, 128]"
