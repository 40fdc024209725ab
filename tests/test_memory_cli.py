"""`hloscope memory`: golden output, JSON keys documented, plots, bad input."""

from __future__ import annotations

import json

import pytest
from conftest import DATA, GENERATED, ROOT, SEEDS, check_golden, run_cli


@pytest.mark.parametrize("name,path", [
    ("dump_f_for_loop", GENERATED / "f_for_loop.dump"),
    ("f_filter_with_temp", GENERATED / "f_filter_with_temp.hlo"),
    ("seed_buffer_assignment", SEEDS / "gpu_auto_sharding.buffer-assignment.txt"),
    ("torch_xla_sharded", SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo"),
    ("spmd_log", SEEDS / "tpu_spmd_partitioner.log"),
    ("fft_pencil_partitioned", GENERATED / "fft_cont_pencil_4x2.hlo"),
    ("memory_usage_report", DATA / "dumps" / "mlp_train"
     / "module_0030.jit_train_step.cpu_after_optimizations-memory-usage-report.txt"),
])
def test_memory_text_golden(name, path):
    r = run_cli("memory", str(path))
    assert r.returncode == 0, r.stderr
    check_golden(f"memory/{name}.txt", r.stdout)


MODULE_KEYS = ["module", "file", "scheduled", "order", "steps", "value_count", "buffer_count",
               "needs_bytes", "peak_bytes", "peak_step", "peak_instruction", "peak_values",
               "peak_counted_again_bytes",
               "all_spaces_peak_bytes",
               "argument_bytes",
               "output_bytes", "alias_bytes", "constant_bytes", "temp_estimate_bytes",
               "timeline", "timeline_max_bytes", "timeline_max_step", "largest", "sharded",
               "xla", "comparisons", "optimized", "figures"]
VALUE_KEYS = ["value", "instruction", "index", "opcode", "computation", "shape", "bytes", "kind",
              "live_range", "op_name", "source", "buffer"]


def test_memory_json_is_stable_and_documented():
    path = str(GENERATED / "f_filter_with_temp.dump")
    r = run_cli("memory", "--json", path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["schema"] == "hloscope.memory/1"
    assert list(data) == ["schema", "file", "modules", "xla_dumps", "spmd_logs",
                          "oom_reports"]
    m = data["modules"][0]
    assert list(m) == MODULE_KEYS
    assert list(m["peak_values"][0]) == VALUE_KEYS
    assert m["peak_bytes"] == 4259844 == m["xla"]["live_range_peak_bytes"]
    doc = (ROOT / "docs" / "json.md").read_text()
    for k in MODULE_KEYS + VALUE_KEYS + list(m["xla"]):
        assert f"`{k}`" in doc, f"docs/json.md does not document {k}"
    assert run_cli("memory", "--json", path).stdout == r.stdout  # deterministic


def test_memory_plot_png_and_deterministic_svg(tmp_path):
    pytest.importorskip("matplotlib")
    path = str(GENERATED / "f_filter_with_temp.hlo")
    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    assert run_cli("memory", path, "--plot", str(png)).returncode == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert run_cli("memory", path, "--plot", str(svg)).returncode == 0
    first = svg.read_bytes()
    assert b"<svg" in first and b"peak" in first
    assert run_cli("memory", path, "--plot", str(svg)).returncode == 0
    assert svg.read_bytes() == first


@pytest.mark.parametrize("content,expect", [
    (b"", "empty"),
    (b"\x00\x01\x02binary" * 100, "binary"),
    (b"BufferAssignment:\nnothing here\n", "no 'allocation N: size"),
    (b"HloLiveRange (max 3):\n  InstructionSequence:\n", "live"),
    (b"just some words\n", "HloModule"),
])
def test_memory_bad_input_is_one_clear_line(tmp_path, content, expect):
    f = tmp_path / ("x-live-range.txt" if b"HloLiveRange" in content else "x.txt")
    f.write_bytes(content)
    r = run_cli("memory", str(f))
    if expect == "live":  # a live-range file with no ranges reads, and says so
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert expect.lower() in r.stderr.lower()


def test_memory_empty_folder_and_missing_path(tmp_path):
    r = run_cli("memory", str(tmp_path))
    assert r.returncode == 2 and "no XLA dump files" in r.stderr
    r = run_cli("memory", str(tmp_path / "nope.hlo"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_memory_plot_needs_a_module(tmp_path):
    r = run_cli("memory", str(SEEDS / "gpu_auto_sharding.buffer-assignment.txt"),
            "--plot", str(tmp_path / "x.png"))
    assert r.returncode == 2 and "--plot needs the module" in r.stderr


def test_a_partitioned_module_without_num_partitions_is_not_partitioned_again():
    """XLA's partitioner names the entry ..._spmd; torch_xla for AWS Neuron prints such
    modules with no num_partitions (openxla's default 1).  Their shapes are per device
    already: no per-device column halves them again, and the device count is the
    shardings'."""
    path = str(DATA / "partitioned" / "spmd_no_num_partitions.hlo")
    summary = run_cli("summary", path)
    assert summary.returncode == 0 and "f32[3,10]" in summary.stdout
    assert "bytes/device" not in summary.stdout and "f32[2,10]" not in summary.stdout
    assert "partitioned (shapes are per device)" in " ".join(summary.stdout.split())
    memory = run_cli("memory", path)
    assert memory.returncode == 0, memory.stderr
    assert "already partitioned for 2 devices" in memory.stdout
    assert "unpartitioned" not in memory.stdout


def test_a_dump_file_alone_reads_xlas_files_beside_it():
    """The module file of a dump folder passed alone gets XLA's buffer assignment beside it,
    as the folder does (a trial: hloscope's estimate for the file, XLA's temp for the
    folder)."""
    import glob

    folder = GENERATED / "f_filter_with_temp.dump"
    [after] = [f for f in glob.glob(str(folder / "*after_optimizations.txt"))
               if "buffer-assignment" not in f and "live-range" not in f
               and "memory-usage" not in f]
    alone, whole = run_cli("memory", "--json", after), run_cli("memory", "--json", str(folder))
    assert alone.returncode == whole.returncode == 0, alone.stderr
    a, w = json.loads(alone.stdout)["modules"][0], json.loads(whole.stdout)["modules"][0]
    assert a["needs_bytes"] == w["needs_bytes"] and a["xla"] is not None
    assert a["figures"]["figures"][0] == w["figures"]["figures"][0]
    assert w["figures"]["figures"][0]["source"] == "hloscope + XLA dump"
