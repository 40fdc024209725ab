"""The command line: output, exit codes, and errors without tracebacks."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import GENERATED, SEEDS, TRUNCATED, check_golden
from conftest import run_cli as run


def test_summary_text_golden():
    r = run("summary", "tests/data/seeds/fft_cont_2048_pencil8.jax_hpc_profiler.md")
    assert r.returncode == 0, r.stderr
    check_golden("cli/summary_fft_report.txt", r.stdout)


def test_summary_json_is_stable_and_documented():
    r = run("summary", "--json", str(GENERATED / "pjit_square_4x2.hlo"))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["schema"] == "hloscope.summary/1"
    m = data["modules"][0]
    keys = ["module", "source", "is_scheduled", "optimized", "partitioned", "num_partitions",
            "replica_count", "entry_computation", "computation_count", "instruction_count",
            "opcodes", "fusions", "custom_calls", "collectives", "parameters", "outputs",
            "argument_bytes", "output_bytes", "output_table_bytes", "input_output_alias",
            "annotations", "torch_xla"]
    assert list(m) == keys
    doc = open("docs/json.md").read()
    for k in keys:
        assert f"`{k}`" in doc, f"docs/json.md does not document {k}"
    again = run("summary", "--json", str(GENERATED / "pjit_square_4x2.hlo"))
    assert again.stdout == r.stdout  # deterministic


def test_demo():
    r = run("demo")
    assert r.returncode == 0, r.stderr
    assert "Module jit__lambda" in r.stdout and "all-gather" in r.stdout
    for part in ("==> hloscope summary", "==> hloscope kernels", "==> hloscope memory",
                 "==> hloscope lint"):
        assert part in r.stdout
    check_golden("cli/demo.txt", r.stdout)


def test_a_damaged_module_beside_a_whole_one_is_noted(truncated_only):
    r = run("summary", str(TRUNCATED))
    assert r.returncode == 0 and "Module pjit_square.75" in r.stdout
    assert "skipped a damaged module" in r.stderr and ":10:82: the instruction is cut off" \
        in r.stderr
    r = run("summary", str(truncated_only))
    assert r.returncode == 2 and ":10:82: the instruction is cut off" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("path,needle", [
    ("tests/data/seeds/gpu_auto_sharding.buffer-assignment.txt", "no HLO module"),
    ("tests/does-not-exist.hlo", "cannot read"),
    ("tests/data", "folder"),
])
def test_bad_input_exits_2_without_traceback(path, needle):
    r = run("summary", path)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_truncated_says_what_was_read(truncated_only):
    r = run("summary", str(truncated_only))
    assert "read before the damage" in r.stderr and "fused_computation" in r.stderr
    assert "^" in r.stderr


def test_usage_errors_exit_2():
    r = run("summary")
    assert r.returncode == 2
    r = run("no-such-command")
    assert r.returncode == 2


def test_several_modules_one_is_picked_and_named(tmp_path):
    small = (SEEDS / "lecture_01_jit_sigmoid.2.hlo").read_text()
    big = (GENERATED / "f_for_loop.hlo").read_text()
    p = tmp_path / "two.txt"
    p.write_text("notes\n" + small + "\nmore notes\n" + big + "\n" + small)
    r = run("summary", "--json", str(p))
    assert [m["module"] for m in json.loads(r.stdout)["modules"]] == ["jit_f"]
    assert "holds 2 modules (3 in all, identical ones counted once); using 1:jit_f " \
        "(the largest, optimized)" in r.stderr
    assert "0:jit_sigmoid.2" in r.stderr and "--module" in r.stderr
    r = run("summary", "--json", "--module", "jit_sigmoid.2", str(p))
    assert [m["module"] for m in json.loads(r.stdout)["modules"]] == ["jit_sigmoid.2"]
    assert r.stderr == ""
    assert json.loads(run("summary", "--json", "-m", "0", str(p)).stdout)["modules"][0][
        "module"] == "jit_sigmoid.2"
    r = run("summary", "--module", "nope", str(p))
    assert r.returncode == 2 and "matches no module" in r.stderr
    listing = run("summary", "--list", "--wide", str(p))  # the tmp path may be long
    assert listing.returncode == 0
    assert "2 module(s) (3 with identical copies counted)" in listing.stdout
    rows = json.loads(run("summary", "--list", "--json", str(p)).stdout)["modules"]
    assert [(x["module"], x["copies"]) for x in rows] == [("jit_sigmoid.2", 2), ("jit_f", 1)]


def test_every_reading_command_honours_module(tmp_path):
    small = (SEEDS / "lecture_01_jit_sigmoid.2.hlo").read_text()
    big = (GENERATED / "f_for_loop.hlo").read_text()
    p = tmp_path / "two.hlo"
    p.write_text(big + "\n" + small)
    for cmd in (["summary"], ["kernels"], ["memory"], ["lint"],
                ["graph", "-o", str(tmp_path / "g.svg")],
                ["report", "-o", str(tmp_path / "r.html")]):
        r = run(*cmd, "--module", "jit_sigmoid.2", str(p))
        assert r.returncode == 0, (cmd, r.stderr)
        assert "holds 2 modules" not in r.stderr
        r = run(*cmd, str(p))
        assert r.returncode == 0 and "holds 2 modules; using 0:jit_f" in r.stderr, (cmd, r.stderr)


PLUGIN_NOISE = ("cudart_stub", "Could not find cuda drivers", "plugin configuration error",
                "Unable to load CUDA", "Source Location Trace", "absl::InitializeLog",
                "Traceback")


def test_commands_print_no_plugin_noise(tmp_path):
    """With JAX's CUDA plugin and libtpu installed (the test extras) and no GPU or TPU,
    hloscope's commands print nothing of what the plugins say on a machine without them."""
    hlo = tmp_path / "fft.hlo"
    runs = [run("demo", "--save", str(hlo)), run("demo"), run("summary", str(hlo)),
            run("kernels", str(hlo)), run("lint", str(hlo))]
    if importlib.util.find_spec("jax") is not None:
        runs.append(run("inspect", "examples/train_step.py:train_step",
                        "--arg", "f32[2,8,8]", "--arg", "f32[4,8]"))
    for r in runs:
        assert r.returncode == 0, r.stderr
        for noise in PLUGIN_NOISE:
            assert noise not in r.stderr, f"{r.args}: stderr has {noise!r}:\n{r.stderr}"


def test_report_estimates_times_on_the_modules_own_device(tmp_path):
    """A CPU module's report gives CPU estimates; another device only when asked."""
    import re

    out = tmp_path / "r.html"
    for args, want in (([], "cpu"), (["--device", "h100"], "h100")):
        r = run("report", str(GENERATED / "f_sum_jax.hlo"), "-o", str(out), *args)
        assert r.returncode == 0, r.stderr
        m = re.search(r'"roofline":\s*\{"device":\s*"([^"]+)"', out.read_text())
        assert m and m.group(1) == want, (args, m and m.group(0))


def test_kernels_sort_and_top():
    """--sort time lists the longest first on the module's own device (a CPU module: the
    nominal CPU), times with a unit that shows them; --top keeps N and says how many more."""
    import re

    r = run("kernels", str(GENERATED / "fft_cont_pencil_4x2.hlo"), "--sort", "time", "--top", "3")
    assert r.returncode == 0, r.stderr
    assert "Kernels with the longest estimated time: 3 of 6 (cpu estimates)" in r.stdout
    times = re.findall(r"  (\d+(?:\.\d+)?) (ns|us|ms) ", r.stdout)
    assert len(times) == 3 and "0.00" not in r.stdout.split("Arrays passed")[0]
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3}
    secs = [float(x) * scale[u] for x, u in times]
    assert secs == sorted(secs, reverse=True)
    assert "... and 3 more kernels (--top N shows more)" in r.stdout
    r = run("kernels", str(GENERATED / "fft_cont_pencil_4x2.hlo"), "--sort", "size")
    assert r.returncode == 2 and "order, time, bytes, flops" in r.stderr


def test_the_tpu_module_in_tests_data_reads_as_a_tpu_module():
    """tests/data/tpu: a module libtpu compiled for a TPU v5e (its README says how)."""
    path = "tests/data/tpu/mlp_step_tpu_v5e.hlo"
    assert run("check", path).returncode == 0
    r = run("kernels", path, "--sort", "time", "--top", "3")
    assert r.returncode == 0 and "(tpu-v5e estimates)" in r.stdout, r.stdout + r.stderr
