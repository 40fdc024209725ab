"""The command line: output, exit codes, and errors without tracebacks."""

from __future__ import annotations

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
    keys = ["module", "source", "is_scheduled", "partitioned", "num_partitions",
            "replica_count", "entry_computation", "computation_count", "instruction_count",
            "opcodes", "fusions", "custom_calls", "collectives", "parameters", "outputs",
            "argument_bytes", "output_bytes", "input_output_alias"]
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


@pytest.mark.parametrize("path,needle", [
    (str(TRUNCATED), ":10:82: the instruction is cut off"),
    ("tests/data/seeds/gpu_auto_sharding.buffer-assignment.txt", "no HLO module"),
    ("tests/does-not-exist.hlo", "cannot read"),
    ("tests/data", "folder"),
])
def test_bad_input_exits_2_without_traceback(path, needle):
    r = run("summary", path)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_truncated_says_what_was_read():
    r = run("summary", str(TRUNCATED))
    assert "read before the damage" in r.stderr and "fused_computation" in r.stderr
    assert "^" in r.stderr


def test_usage_errors_exit_2():
    r = run("summary")
    assert r.returncode == 2
    r = run("no-such-command")
    assert r.returncode == 2


def test_several_modules_all_summarized(tmp_path):
    text = (SEEDS / "lecture_01_jit_sigmoid.2.hlo").read_text()
    p = tmp_path / "two.txt"
    p.write_text("notes\n" + text + "\nmore notes\n" + text.replace("jit_sigmoid.2", "other"))
    r = run("summary", "--json", str(p))
    assert [m["module"] for m in json.loads(r.stdout)["modules"]] == ["jit_sigmoid.2", "other"]
