"""hloscope run: HLO from any frontend compiled and executed on JAX's PjRt runtime,
with SPMD partitioning (seed 001's torch_xla modules)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hloscope
from hloscope import HloscopeError
from hloscope._jax._run import run_module

from conftest import DATA, SEEDS, run_cli

RUN = DATA / "run"


def test_torch_xla_module_3_times_4_gives_12():
    m = hloscope.read(SEEDS / "torch_xla_01_IrToHlo.11.hlo").module
    r = run_module(m, inputs={"p0.1": "3", "p1.5": "4"}, iterations=2)
    assert r.partitions == 1 and not r.spmd
    (out,) = r.outputs
    assert out["shape"] == [1, 1] and out["first"] == [12.0]
    assert len(r.times) == 2


def test_sharded_torch_xla_module_on_2_devices_gives_7s():
    m = hloscope.read(SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo").module
    r = run_module(m, partitions=2, inputs={"0": "3", "1": "4"}, check=True)
    assert r.partitions == 2 and r.spmd
    np.testing.assert_array_equal(np.asarray(r.values[0]), np.full((2, 2), 7.0, np.float32))
    assert [s["device"] for s in r.outputs[0]["shards"]] == [0, 1]
    assert r.check["ok"] and r.check["max_relative_difference"] == 0.0
    # torch_xla lets XLA choose the output sharding: the sum stays split, no all-gather
    assert r.collectives == [] and r.plan["propagation_assumed"]
    assert [s["shape"] for s in r.outputs[0]["shards"]] == [[1, 2], [1, 2]]
    assert "num_partitions=2" in r.partitioned_text


def test_seed_001_sharded_matmul_partitions_over_4_devices_and_checks():
    m = hloscope.read(RUN / "sharded_matmul_512.hlo").module
    r = run_module(m, inputs={"p0.1": "random:1", "p1.7": "random:2"}, check=True)
    assert r.partitions == 4 and r.spmd  # from the devices=[2,2] annotations
    gathers = [c for c in r.collectives if c["opcode"] == "all-gather"]
    assert len(gathers) == 2
    assert all(c["group_size"] == 2 and c["sent_per_device"] == 256 * 256 * 4 for c in gathers)
    assert r.check["ok"]
    a = np.random.default_rng(1).standard_normal((512, 512), dtype=np.float32)
    b = np.random.default_rng(2).standard_normal((512, 512), dtype=np.float32)
    np.testing.assert_allclose(np.asarray(r.values[0]), a @ b, rtol=1e-4, atol=1e-3)
    assert [s["shape"] for s in r.outputs[0]["shards"]] == [[256, 256]] * 4
    assert r.memory_after["argument"] == r.memory_before["argument"] // 4
    assert r.memory_after["peak"] < r.memory_before["peak"]


def test_fft_module_of_seed_000_gets_a_clear_custom_call_error():
    m = hloscope.read(SEEDS / "fft_cont_2048_pencil8.after_opt.hlo").module
    with pytest.raises(HloscopeError) as e:
        run_module(m, partitions=8)
    text = str(e.value)
    assert "pfft3d" in text and "custom-call.4.0" in text and "(at %custom-call.4.0 = " in text
    assert "jaxDecomp" in e.value.hint


def test_a_module_xla_cannot_compile_draws_no_inputs(monkeypatch):
    """Its parameter is f32[1024,512,2048] (4 GiB, and twice that drawn as float64): the
    compile error must come before any input is made, not after (or instead of, when the
    machine runs out of memory)."""
    import hloscope._jax._run as run_mod

    def no_inputs(spec, inst):
        raise AssertionError(f"input {inst.name} drawn before the module compiled")

    monkeypatch.setattr(run_mod, "_fill", no_inputs)
    m = hloscope.read(SEEDS / "fft_cont_2048_pencil8.after_opt.hlo").module
    with pytest.raises(HloscopeError, match="pfft3d"):
        run_module(m, partitions=8)


def test_wrong_inputs_are_named(tmp_path):
    m = hloscope.read(SEEDS / "torch_xla_01_IrToHlo.11.hlo").module
    with pytest.raises(HloscopeError, match="(?s)no parameter .q..*p0.1"):
        run_module(m, inputs={"q": "1"})
    npy = tmp_path / "x.npy"
    np.save(npy, np.ones((3, 3), np.float32))
    with pytest.raises(HloscopeError, match=r"p0.1\): .*x.npy holds shape \(3, 3\).*f32\[1,1\]"):
        run_module(m, inputs={"p0.1": str(npy)})
    with pytest.raises(HloscopeError, match="not zeros, ones"):
        run_module(m, inputs={"p0.1": "lots"})
    with pytest.raises(HloscopeError, match="needs 64 devices"):
        run_module(m, partitions=64)


def test_unparsable_module_gets_xlas_message():
    text = (SEEDS / "torch_xla_01_IrToHlo.11.hlo").read_text().replace(
        "multiply(p1.5, p0.1)", "multiply(p1.5, p0.1), frobnicate={1}")
    m = hloscope.read_text(text).module  # hloscope keeps unknown attributes
    with pytest.raises(HloscopeError, match="XLA's parser refuses the module.*frobnicate"):
        run_module(m)


def test_xlas_reason_and_the_instruction_at_fault_are_named():
    """XLA's message starts with a generic line and says the reason after it, at the line
    its parser was reading (the next instruction): both the reason and the instruction
    that holds the fault are said."""
    m = hloscope.read_text(
        "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
        '  c = f32[4] custom-call(p), custom_call_target="foo", '
        "api_version=API_VERSION_UNSPECIFIED\n  ROOT n = f32[4] negate(c)\n}\n").module
    with pytest.raises(HloscopeError) as e:
        run_module(m)
    said = str(e.value)
    assert "XLA's parser refuses the module: Invalid API version: API_VERSION_UNSPECIFIED" in said
    assert "(at %c = f32[4] custom-call(%p)" in said and "Syntax error" not in said
    # what to do: XLA prints the attribute and refuses it (torch_xla's graphs have it)
    assert "delete that attribute from the custom-call" in e.value.hint
    from hloscope._sources._reader import check_text

    with pytest.raises(HloscopeError) as e:  # check names it too, where XLA points past it
        check_text("HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
                   '  c = f32[4] custom-call(p), custom_call_target="foo", '
                   "api_version=API_VERSION_UNSPECIFIED\n  ROOT n = f32[4] negate(c)\n}\n")
    assert "delete that attribute from c" in e.value.hint


def test_cli_run_text_and_json():
    out = run_cli("run", str(SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo"), "--devices", "2",
                  "--input", "p0.1=3", "--input", "p1.7=4", "--check", "numpy", "-n", "3")
    assert out.returncode == 0, out.stderr
    assert "SPMD-partitioned over 2 devices" in out.stdout and "--check numpy is the old name" in out.stdout
    assert "output 0: float32[2, 2] min 7 max 7" in out.stdout
    assert "device 1: float32[1, 2] min 7 max 7" in out.stdout
    assert "collectives the partitioner inserted: 0" in out.stdout and ": ok" in out.stdout
    assert "before partitioning" in out.stdout
    js = run_cli("run", str(RUN / "sharded_matmul_512.hlo"), "--devices", "4", "--json",
                 "-n", "2")
    d = json.loads(js.stdout)
    assert d["schema"] == "hloscope.run/1" and d["partitions"] == 4
    assert len([c for c in d["collectives"] if c["opcode"] == "all-gather"]) == 2


def test_cli_run_errors():
    out = run_cli("run", str(SEEDS / "fft_cont_2048_pencil8.after_opt.hlo"), "--devices", "8")
    assert out.returncode == 2 and "pfft3d" in out.stderr and "hint:" in out.stderr
    out = run_cli("run", str(SEEDS / "torch_xla_01_IrToHlo.11.hlo"), "--input", "p0.1")
    assert out.returncode == 2 and "NAME=SPEC" in out.stderr
    out = run_cli("run", str(SEEDS / "torch_xla_01_IrToHlo.11.hlo"), "--check", "scipy")
    assert out.returncode == 2 and "one-device" in out.stderr


def test_a_module_writing_into_its_inputs_is_timed_on_fresh_copies():
    """input_output_alias (XLA's own must-alias test): the first run takes the input over,
    so each timed run gets fresh copies ('Buffer has been deleted or donated' before)."""
    m = hloscope.parse("HloModule f, input_output_alias={{}: (0, {}, must-alias)}\n\n"
                       "ENTRY f {\n  a = s32[10] parameter(0)\n"
                       "  ROOT sum = s32[10] add(a, a)\n}\n")
    r = run_module(m, inputs={"a": "3"}, iterations=3)
    assert len(r.times) == 3 and r.outputs[0]["max"] == 6
    assert any("fresh copies" in n for n in r.notes)
