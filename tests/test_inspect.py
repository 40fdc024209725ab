"""hloscope.inspect: one compile, XLA's figures, the same analyses as reading the text."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

from xla_programs import PROGRAMS

import hloscope


@pytest.mark.parametrize("name", ["cond_branches", "scan_carry_and_stack", "dynamic_update_loop",
                                  "tuple_outputs_grad", "sharded_matmul_psum"])
def test_inspect_matches_xla_and_the_text(name):
    if name.startswith("sharded") and len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    fn, args = PROGRAMS[name]()
    r = hloscope.inspect(fn, *args)
    assert set(r.timings) == {"trace", "lower", "compile"} and min(r.timings.values()) >= 0
    assert r.jaxpr and r.stablehlo and r.hlo_before and "is_scheduled=true" in r.hlo_after
    assert r.memory.xla is not None  # XLA's dump files were read from the one compile
    assert r.memory.peak_bytes == r.memory.xla.live_range_peak_bytes
    xla_temp = r.memory_analysis["temp_size_in_bytes"]
    assert abs(r.memory.temp_estimate_bytes - xla_temp) <= 0.05 * xla_temp
    again = hloscope.kernel_graph(hloscope.read_text(r.hlo_after).module)
    assert [k.name for k in r.kernels.kernels] == [k.name for k in again.kernels]
    assert r.versions["jax"] == jax.__version__ and r.device["count"] == len(jax.devices())


def test_report_saves_and_loads(tmp_path):
    fn, args = PROGRAMS["remat_scan_grad"]()
    r = hloscope.inspect(fn, *args)
    path = r.save(str(tmp_path / "r.json"))
    back = hloscope.load(path)
    assert back.to_dict() == r.to_dict()
    assert back.memory.peak_bytes == r.memory.peak_bytes
    assert [f.rule for f in back.findings] == [f.rule for f in r.findings]


def test_lowered_is_accepted_and_compiled_is_refused_clearly():
    fn, args = PROGRAMS["cond_branches"]()
    r = hloscope.inspect(fn.lower(*args))
    assert r.hlo_after and "trace" not in r.timings
    with pytest.raises(hloscope.HloscopeError, match="Compiled"):
        hloscope.inspect(fn.lower(*args).compile())


def test_notebook_html_embeds_the_report_page():
    fn, args = PROGRAMS["cond_branches"]()
    html = hloscope.inspect(fn, *args)._repr_html_()
    assert html.startswith("<div><b>") and "<iframe srcdoc=" in html and "sandbox=" in html
    assert "<script>" not in html.split("srcdoc=")[0]


def test_load_rejects_other_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "something/1"}')
    with pytest.raises(hloscope.HloscopeError, match="not an hloscope report"):
        hloscope.load(str(bad))
    with pytest.raises(hloscope.HloscopeError, match="cannot read"):
        hloscope.load(str(tmp_path / "missing.json"))
