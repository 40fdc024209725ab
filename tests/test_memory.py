"""The memory analysis against XLA's own figures: exact live ranges and peak, temp estimate."""

from __future__ import annotations

import json
import re

import pytest
from conftest import GENERATED, SEEDS

import hloscope
from hloscope._analysis._dataflow import analyze_dataflow
from hloscope._analysis._liverange import compute_live_ranges
from hloscope._analysis._memory import analyze_memory
from hloscope._sources._memory_inputs import read_memory_inputs
from hloscope._sources._xla_dumps import parse_live_range

CORPUS = sorted(p for p in GENERATED.glob("*.hlo") if not p.name.endswith(".before.hlo"))
_RANGE_RE = re.compile(r"^    (\S+\{[\d,]*\}):(\d+)-(\d+)$", re.MULTILINE)


def _truth(path):
    return json.loads(path.with_suffix(".truth.json").read_text())


def _live_range_dump(path):
    return next(path.with_suffix(".dump").glob("*after_optimizations-live-range.txt")).read_text()


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_peak_equals_xla_live_range_peak(path):
    report = analyze_memory(hloscope.read(path).module)
    assert report.peak_bytes == _truth(path)["live_range_peak_bytes"]


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_every_live_range_and_the_peak_list_match_xla(path):
    module = hloscope.read(path).module
    df = analyze_dataflow(module)
    lr = compute_live_ranges(df)
    dump = parse_live_range(_live_range_dump(path))
    ours = {v.label: lr.ranges[v.id] for v in df.values if v.id in lr.ranges}
    assert ours == dump.ranges
    assert lr.end_time == dump.end_time
    assert [i.name for i in lr.sequence] == list(dump.sequence)
    assert lr.peak_time == dump.peak_time
    assert [(v.label, v.size) for v in lr.peak_values] == list(dump.peak_values)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_temp_estimate_within_five_percent_and_totals_exact(path):
    truth = _truth(path)
    r = analyze_memory(hloscope.read(path).module)
    xla_temp = truth["temp_size_in_bytes"]
    assert abs(r.temp_estimate_bytes - xla_temp) <= 0.05 * xla_temp
    assert r.argument_bytes == truth["argument_size_in_bytes"]
    assert r.output_bytes == truth["output_size_in_bytes"]
    assert r.alias_bytes == truth["alias_size_in_bytes"]


def test_dump_folder_puts_xla_figures_beside_hloscope():
    inputs = read_memory_inputs(GENERATED / "f_filter_with_temp.dump")
    (module, files), = inputs.modules
    r = analyze_memory(module, xla=files)
    assert r.xla is not None and r.xla.live_range_peak_bytes == 4259844
    assert {c.name: c.equal for c in r.comparisons} == {
        "peak_bytes": True, "temp_bytes": True, "argument_bytes": True}


def test_seed_buffer_assignment_shows_the_18_peak_values_and_total():
    inputs = read_memory_inputs(SEEDS / "gpu_auto_sharding.buffer-assignment.txt")
    assert not inputs.modules
    (_name, files), = inputs.dumps
    from hloscope._analysis._memory import xla_figures
    figs = xla_figures(files)
    assert figs.live_range_peak_time == 18
    assert [v for v, _ in figs.live_range_peak_values] == [
        "add.2{}", "param.1{}", "param.2{}", "param.3{}", "param.4{}", "cublas-gemm.7{}",
        "cublas-gemm.9{}", "input_fusion_scatter{}"]
    assert figs.live_range_peak_bytes == 30724
    assert figs.recomputed_peak_bytes == 30724  # replaying the dump's ranges gives the same
    assert figs.temp_bytes == 13456 and figs.total_bytes == 30920 and figs.allocations == 14


def test_unscheduled_module_says_so_and_still_has_a_peak():
    r = analyze_memory(hloscope.read(GENERATED / "f_sum_jax.before.hlo").module)
    assert not r.scheduled and r.order.startswith("not scheduled")
    assert r.peak_bytes and r.peak_bytes >= r.argument_bytes


def test_sharded_view_before_partitioning():
    r = analyze_memory(hloscope.read(SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo").module)
    s = r.sharded
    assert s is not None and not s.partitioned and s.devices == 2
    assert [(x.bytes, x.per_device_bytes, x.per_device_shape) for x in s.rows] == [
        (16, 8, "f32[1,2]{1,0}"), (16, 8, "f32[1,2]{1,0}")]
    assert (s.replicated_bytes, s.per_device_bytes) == (32, 16)
    before = analyze_memory(hloscope.read(GENERATED / "pjit_square_4x2.before.hlo").module)
    assert before.sharded is not None and before.sharded.devices == 8
    assert before.sharded.per_device_bytes * 8 == before.sharded.replicated_bytes


def test_partitioned_module_says_shapes_are_per_device():
    r = analyze_memory(hloscope.read(GENERATED / "fft_cont_pencil_4x2.hlo").module)
    assert r.sharded is not None and r.sharded.partitioned and r.sharded.devices == 8


def test_peak_values_name_their_source_line():
    r = analyze_memory(hloscope.read(GENERATED / "f_filter_with_temp.hlo").module)
    top = r.peak_values[0]
    assert top.label == "exponential_convert_fusion{}" and top.kind == "temporary"
    assert top.source == "generate.py:131" and "convert_element_type" in top.op_name


def test_report_is_deterministic_json():
    m = hloscope.read(GENERATED / "f_for_loop.hlo").module
    a = json.dumps(analyze_memory(m).to_dict())
    b = json.dumps(analyze_memory(hloscope.read(GENERATED / "f_for_loop.hlo").module).to_dict())
    assert a == b


def test_dump_folder_groups_files_by_module_gpu_names_included(tmp_path):
    from hloscope._sources._xla_dumps import read_dump_dir

    names = ["module_0007.jit_f.sm_8.0_gpu_after_optimizations.txt",
             "module_0007.jit_f.sm_8.0_gpu_after_optimizations-buffer-assignment.txt",
             "module_0007.jit_f.sm_8.0_gpu_after_optimizations-memory-usage-report.txt",
             "module_0007.jit_f.before_optimizations.txt", "module_0007.jit_f.ir-no-opt.ll",
             "module_0008.jit_g.cpu_after_optimizations.txt", "notes.txt"]
    for n in names:
        (tmp_path / n).write_text("x")
    mods = read_dump_dir(str(tmp_path))
    assert [(m.prefix, bool(m.after), bool(m.buffer_assignment), bool(m.memory_usage),
             bool(m.before)) for m in mods] == [
        ("module_0007.jit_f", True, True, True, True), ("module_0008.jit_g", True, False, False, False)]


def test_memory_usage_report_reads():
    from hloscope._sources._xla_dumps import parse_memory_usage_report

    path = next((GENERATED / "fft_cont_pencil_4x2.dump").glob("*memory-usage-report.txt"))
    r = parse_memory_usage_report(path.read_text())
    assert r.total_bytes == 573508
    assert r.rows[0] == (262144, 0, 2, "c64[32,32,32], c64[8,32,32]")


def test_a_value_written_in_place_is_said_to_be_counted_twice():
    """A custom-call whose output is written into its operand's buffer
    (output_to_operand_aliasing): XLA's live-range peak counts both values, the memory
    holds one buffer (an open-world trial's FFT read 'at most 4.50 GiB live at once' where
    3.50 GiB are allocated, with no word why)."""
    from hloscope._render._memory_text import render_memory

    text = """HloModule m, is_scheduled=true

ENTRY main {
  p = f32[256]{0} parameter(0)
  c = f32[256]{0} negate(p)
  ROOT cc = f32[256]{0} custom-call(c), custom_call_target="foo", output_to_operand_aliasing={{}: (0, {})}
}
"""
    r = hloscope.analyze_memory(hloscope.read_text(text, filename="t.hlo").module)
    assert r.peak_bytes == 3072 and r.peak_counted_again == 1024
    out = render_memory(r)
    assert "3.00 KiB (3,072 B) live at once by XLA's live-range peak" in out
    assert "held in 2.00 KiB of buffers: 1.00 KiB of it are values written in place" in out
    assert "cc{} is in the buffer of c{} (written in place): counted twice above" in out
    assert "at most" not in out.split("Live at the peak")[0]


def test_the_peak_is_not_called_the_most_where_the_timeline_goes_higher():
    """XLA's peak moment (its own sweep) can miss the timeline's highest step: the headline
    then says both, not 'at most' (an open-world trial: 'at most 56 B' over a timeline of
    80 B)."""
    from hloscope._render._memory_text import render_memory

    r = hloscope.analyze_memory(
        hloscope.read(SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo").module)
    head = render_memory(r).split("Live at the peak")[0]
    assert r.timeline_max[0] > r.peak_bytes
    assert "live at once at XLA's peak moment" in head and "the timeline goes up to" in head
