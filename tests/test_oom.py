"""XLA's out-of-memory reports read by `hloscope memory`: public GPU (CUDA, ROCm) and TPU
reports (tests/data/oom/README.md names each one's source)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT, check_golden, run_cli

from hloscope._analysis._oom import oom_summary
from hloscope._sources._oom import parse_oom_reports

OOM = ROOT / "tests" / "data" / "oom"
GiB = 1024 ** 3


def _read(name: str):  # type: ignore[no-untyped-def]
    return parse_oom_reports((OOM / name).read_text(), path=name)


def test_a_gpu_report_printed_twice_in_a_log_is_one_report():
    (r,) = _read("gpu_gemma_v100.log")
    assert (r.kind, r.line, r.printed, r.requested) == ("gpu", 4, 2, 2110783616)
    assert [b.rank for b in r.buffers] == [1, 2, 3, 4, 5, 6]
    assert r.buffers[0].shape == "f32[5104,257152]" and r.buffers[0].label == "custom-call"
    assert r.buffers[0].source.endswith("big_vision/models/ppp/gemma.py:175")
    assert [b.parameter for b in r.buffers] == [False, False, True, True, False, False]
    s = oom_summary(r)
    assert s.need == round(7.88 * GiB)
    assert [(p.what, p.buffers) for p in s.places] == [
        ("dot_general", 4), ("arguments (entry parameters)", 2)]
    assert dict(s.parts)["temporaries"] == round(1.97 * GiB)


def test_a_rocm_report_whose_lines_a_terminal_wrapped():
    """The op_names and a source path are cut mid-word across lines: joined again."""
    (r,) = _read("rocm_colabfold_mi250.txt")
    assert r.requested == 165425291480 and len(r.buffers) == 3
    first, second, third = r.buffers
    assert first.op_name.count(";") == 7 and "\n" not in first.op_name
    assert "triangle_multiplication_incoming/div" in first.op_name and first.source == ""
    assert second.source == "/opt/miniconda3/bin/colabfold_batch:8"
    assert third.op_name.endswith("dot_general[dimension_numbers=(((2,), (0,)), ((), ())) "
                                  "precision=None preferred_element_type=bfloat16]")
    assert oom_summary(r).places[0].what == "add"


def test_a_gpu_report_with_spaces_and_an_entry_parameter():
    (r,) = _read("gpu_concatenate_jax13428.txt")
    assert r.requested == 6291456 and [b.size for b in r.buffers] == [6291456, 393216]
    assert r.buffers[1].parameter and r.buffers[1].shape == "f32[256,128,3]"
    assert r.buffers[0].source.endswith("internal/models.py:689")


def test_a_tpu_report_and_the_dimensions_its_tiles_pad():
    (r,) = _read("tpu_v3_resnet152_tf.log")
    assert (r.kind, r.memory_space) == ("tpu", "hbm")
    assert (r.used, r.capacity) == (round(17.60 * GiB), 16 * GiB)
    assert dict(r.parts)["arguments"] is None  # "unknown size"
    assert dict(r.requirement)["HLO temp"] == round(17.08 * GiB)
    assert [b.rank for b in r.buffers] == [1, 2, 3, 4, 7, 16]
    s = oom_summary(r)
    assert s.padding == round(471.5 * 2 ** 20) + 2 * 128 * 2 ** 20
    one_hot = dict((b.rank, what) for b, what in s.padded)[1]
    assert one_hot == "its minor dimension 18 padded to 128, the next one (9) to 16"
    assert r.buffers[0].expansion == 12.6 and r.buffers[0].op_type == "OneHot"


def test_the_tpu_compilers_early_answer():
    (r,) = _read("tpu_v5e_early_libtpu.txt")
    s = oom_summary(r)
    assert r.kind == "tpu-early" and not r.buffers
    assert (s.need, s.capacity) == (round(22.89 * GiB), round(15.75 * GiB))


def test_memory_shows_an_oom_report_and_its_json():
    out = run_cli("memory", str(OOM / "tpu_v3_resnet152_tf.log"))
    assert out.returncode == 0, out.stderr
    check_golden("memory/oom_tpu_v3_resnet152_tf.txt", out.stdout)
    out = run_cli("memory", str(OOM / "gpu_gemma_v100.log"))
    assert out.returncode == 0, out.stderr
    check_golden("memory/oom_gpu_gemma_v100.txt", out.stdout)
    data = json.loads(run_cli("memory", "--json", str(OOM / "gpu_gemma_v100.log")).stdout)
    (rep,) = data["oom_reports"]
    assert rep["printed"] == 2 and rep["need_bytes"] == round(7.88 * GiB)
    doc = (ROOT / "docs" / "json.md").read_text()
    keys = (list(rep) + list(rep["buffers"][0]) + list(rep["by_source"][0])
            + list(rep["parts"][0]))
    for k in keys:
        assert f"`{k}`" in doc, k


def test_other_commands_point_an_oom_log_to_memory(tmp_path):
    out = run_cli("summary", str(OOM / "gpu_gemma_v100.log"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "hloscope memory reads it" in out.stderr
    # A long log whose report comes after the first 64 KiB is read too.
    log = tmp_path / "long.log"
    log.write_text("I0101 00:00:00.000000 1 x.cc:1] step\n" * 3000
                   + (OOM / "gpu_concatenate_jax13428.txt").read_text())
    out = run_cli("memory", str(log))
    assert out.returncode == 0 and "the allocation that failed: 6.00 MiB" in out.stdout


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(p.name for p in OOM.iterdir() if p.suffix != ".md")),
       st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=200))
def test_a_cut_or_damaged_report_never_breaks_the_reader(name, cut, junk):
    """A report cut anywhere (a paste that stops short) or with a line of garbage in it
    reads what is there, without an exception."""
    text = (OOM / name).read_text()
    text = text[:cut % (len(text) + 1)]
    at = junk % (len(text) + 1)
    for t in (text, text[:at] + "\n\tSize: 12.5QB ==== Buffer x:\n" + text[at:]):
        for r in parse_oom_reports(t):
            s = oom_summary(r)
            assert s.listed >= 0 and all(b.size >= 0 for b in r.buffers)
