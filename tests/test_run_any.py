"""hloscope run on programs no one here wrote (issue 16): every element type, optimized and
already-partitioned modules, the header's sharding propagation, inputs and outputs from
files, comparisons with a reference, sizes checked first, device counts from the module."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import hloscope
from hloscope import HloscopeError
from hloscope._jax._exec import CompileError, compile_in_child, defuse, plan_module
from hloscope._jax._run import before_optimizations_file, run_module
from hloscope._jax._values import element_dtype, reduction_size, tolerance_for

from conftest import DATA, SEEDS, run_cli

RUN = DATA / "run"
GEN = DATA / "generated"
DUMP = DATA / "dumps" / "mlp_train"

TYPES = ["pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
         "f64", "c64", "c128", "s4", "u4", "s2", "u2", "f8e5m2", "f8e4m3", "f8e4m3fn",
         "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e3m4", "f4e2m1fn"]
WIDE = {"s64": np.array([2**40, -3, 2**62, 5, 7], np.int64),
        "u64": np.array([2**63 + 5, 3, 2**64 - 1, 5, 7], np.uint64),
        "f64": np.array([1e300, 1 / 3, -2.5e-300, 5, 7], np.float64),
        "c128": np.array([1e300 + 1j / 3, 1 / 3, -2.5e-300j, 5, 7], np.complex128)}


def _module(t: str, op: str) -> hloscope.Module:
    body = f"r = {t}[5] copy(p0)" if op == "copy" else f"r = {t}[5] add(p0, p0)"
    return hloscope.read_text(f"HloModule m_{t}\n\nENTRY e {{\n  p0 = {t}[5] parameter(0)\n"
                              f"  ROOT {body}\n}}\n").module


@pytest.mark.parametrize("t", TYPES)
def test_every_element_type_goes_in_and_comes_out_unchanged(t):
    """Issue 16.1: s64/u64/f64/c128 are not narrowed (JAX's x64 is off), the small types
    pass, and the user's own JAX setting is left as it was."""
    import jax

    dt = element_dtype(t)
    x = WIDE.get(t, np.array([1, 0, 1, 1, 0], bool) if t == "pred"
                 else np.arange(5).astype(np.float32).astype(dt))
    for op in ("copy", "add"):
        r = run_module(_module(t, op), inputs={"0": x}, iterations=0)
        (v,) = r.values
        assert v.dtype == dt, (t, op)
        want = x if op == "copy" else (x | x if t == "pred" else x + x)
        if dt.kind == "c" or t == "pred":
            np.testing.assert_array_equal(v, want)
        else:  # ml_dtypes' types compare through float64
            np.testing.assert_array_equal(v.astype(np.float64), want.astype(np.float64))
        assert r.inputs[0]["conversion"] is None
    assert jax.config.jax_enable_x64 is False


def test_torch_labels_and_seed_in_s64_and_u64():
    """A torch_xla module with s64 class labels and a u64 RNG seed (exit 3 before)."""
    m = hloscope.read(RUN / "torch_labels_seed_s64.hlo").module
    logits = np.random.default_rng(3).standard_normal((32, 10), dtype=np.float32)
    labels = np.random.default_rng(4).integers(0, 10, 32, dtype=np.int64)
    r = run_module(m, inputs={"p0.1": logits, "p1.2": labels, "p2.3": str(2**40)},
                   iterations=0)
    total, shifted = r.values
    assert shifted.dtype == np.int64
    np.testing.assert_array_equal(shifted, labels + 2**40)
    np.testing.assert_allclose(total, logits[np.arange(32), labels].sum(), rtol=1e-5)
    about = [i["about"] for i in r.inputs]  # what torch_xla says of each parameter
    assert "train.py:41" in about[0] and "train.py:42" in about[1]
    assert "op_type xla__device_data" in about[2]


def test_lossy_input_conversions_are_refused_unless_allowed(tmp_path):
    m = hloscope.read(RUN / "torch_labels_seed_s64.hlo").module
    labels = tmp_path / "labels.npy"
    np.save(labels, np.arange(32) + 0.5)
    with pytest.raises(HloscopeError, match=r"float64 into the parameter's int64 loses "
                                            r"information: values that are not whole"):
        run_module(m, inputs={"p1.2": str(labels)}, iterations=0)
    r = run_module(m, inputs={"p1.2": str(labels), "p2.3": "0"}, iterations=0,
                   allow_lossy=True)
    assert "truncated (allowed)" in r.inputs[1]["conversion"]
    np.testing.assert_array_equal(r.values[1], np.arange(32))
    logits = tmp_path / "logits.npy"  # float64 into f32: rounded, announced, accepted
    np.save(logits, np.full((32, 10), 1 / 3))
    r = run_module(m, inputs={"p0.1": str(logits)}, iterations=0)
    assert r.inputs[0]["conversion"].startswith("converted from float64 to float32 (rounded")
    with pytest.raises(HloscopeError, match="outside -128..127"):
        run_module(_module("s8", "copy"), inputs={"0": np.array([1, 2, 300, 4, 5])})


def test_inputs_from_npz_and_folder_by_position_and_name(tmp_path):
    m = hloscope.read(RUN / "torch_labels_seed_s64.hlo").module
    logits = np.ones((32, 10), np.float32)
    labels = np.full(32, 3, np.int64)
    seed = np.array(7, np.uint64)
    np.savez(tmp_path / "in.npz", logits, labels, seed)  # arr_0, arr_1, arr_2
    r = run_module(m, input_files=tmp_path / "in.npz", iterations=0)
    assert float(r.values[0]) == 32.0 and list(r.values[1][:2]) == [10, 10]
    assert [i["input"] for i in r.inputs] == [str(tmp_path / "in.npz")] * 3
    folder = tmp_path / "dir"
    folder.mkdir()
    np.save(folder / "p1.2.npy", labels)  # by name; the rest random
    np.save(folder / "2.npy", seed)  # by position
    r = run_module(m, input_files=folder, inputs={"0": "ones"}, iterations=0)
    assert float(r.values[0]) == 32.0 and r.inputs[0]["input"] == "ones"
    np.save(folder / "q9.npy", seed)
    with pytest.raises(HloscopeError, match="array 'q9' is for no parameter"):
        run_module(m, input_files=folder, iterations=0)


def test_save_outputs_and_expect_with_errors_per_output(tmp_path):
    m = hloscope.read(RUN / "torch_labels_seed_s64.hlo").module
    out = tmp_path / "out.npz"
    r = run_module(m, iterations=0, save_outputs=str(out))
    saved = np.load(out)
    assert sorted(saved.files) == ["output0", "output1"]
    assert saved["output1"].dtype == np.int64
    r = run_module(m, iterations=0, expect=str(out))
    assert r.expect["ok"] and [o["max_abs_error"] for o in r.expect["outputs"]] == [0.0, 0.0]
    bad = tmp_path / "bad.npz"
    np.savez(bad, saved["output0"] * 1.01, saved["output1"] + 1)
    r = run_module(m, iterations=0, expect=str(bad))
    rows = r.expect["outputs"]
    assert not r.expect["ok"] and not rows[0]["ok"] and not rows[1]["ok"]
    assert rows[1]["tolerance"] == 0.0 and rows[1]["max_abs_error"] == 1.0
    cli = run_cli("run", str(RUN / "torch_labels_seed_s64.hlo"), "-n", "0", "--expect", str(bad))
    assert cli.returncode == 1 and "output1 int64[32]: max abs error 1" in cli.stdout
    with pytest.raises(HloscopeError, match="1 reference array.*2 output"):
        run_module(m, iterations=0, expect=[saved["output0"]])


def test_check_tolerance_scales_with_the_reduction_size():
    """A correct f32 512x512 matmul differs by ~6e-5 between one device and four: the
    tolerance is f32's 1e-5 times sqrt(512)."""
    m = hloscope.read(RUN / "sharded_matmul_512.hlo").module
    assert reduction_size(m) == 512
    assert tolerance_for(np.dtype(np.float32), 512) == pytest.approx(1e-5 * 512 ** 0.5)
    assert tolerance_for(np.dtype(np.int64), 512) == 0.0
    r = run_module(m, check=True, iterations=0)
    assert r.check["ok"] and r.check["reduction_size"] == 512
    assert r.check["reference"].startswith("the same module compiled for one device")


def test_optimized_modules_run_without_xlas_passes_and_agree_with_before():
    for opt, before in [(GEN / "f_well_fused.hlo", GEN / "f_well_fused.before.hlo"),
                        (DUMP / "module_0008.jit__normal.cpu_after_optimizations.txt",
                         DUMP / "module_0008.jit__normal.before_optimizations.txt")]:
        m = hloscope.read(opt).module
        assert plan_module(m).optimized
        r = run_module(m, iterations=0)
        assert r.notes == [] and "compiled without its passes" in r.how
        ref = run_module(hloscope.read(before).module, iterations=0)
        r = run_module(m, iterations=0, expect=[np.asarray(v) for v in ref.values])
        assert r.expect["ok"] and r.expect["max_relative_difference"] == 0.0


def test_optimized_module_with_custom_fusions_runs_with_its_fusions_undone():
    """JAX's train step after optimization: its __ynn_fusion loses its backend config on
    the way through StableHLO ("Fusion must have backend config"), so it runs with the
    fusions undone, and agrees with the module before optimization."""
    opt = DUMP / "module_0030.jit_train_step.cpu_after_optimizations.txt"
    m = hloscope.read(opt).module
    r = run_module(m, iterations=0)
    assert "Fusion must have backend config" in r.notes[0] and "fusions undone" in r.notes[0]
    before = run_module(hloscope.read(before_optimizations_file(str(opt))).module,
                        iterations=0)
    for a, b in zip(r.values, before.values):
        np.testing.assert_array_equal(a, b)
    text = defuse(m)
    assert "fusion(" not in text and "is_scheduled" not in text
    hloscope.read_text(text)  # hloscope reads it back


def test_optimized_module_xla_cannot_run_takes_the_before_file_and_says_so(tmp_path):
    opt = GEN / "f_fft3d.hlo"  # without passes, its output's layout is not the entry's
    r = run_module(hloscope.read(opt).module, iterations=0)
    assert "layouts disagree: output 0" in r.notes[0] and "fusions undone" in r.notes[0]
    before = run_module(hloscope.read(GEN / "f_fft3d.before.hlo").module, iterations=0)
    np.testing.assert_array_equal(r.values[0], before.values[0])
    r = run_module(hloscope.read(GEN / "f_numpy_constant.hlo").module, iterations=0)
    assert "constant.1 are not in the text" in r.notes[0] and ".before.hlo" in r.notes[0]
    alone = tmp_path / "alone.hlo"  # no before file beside it: a clear error naming it
    alone.write_text((GEN / "f_numpy_constant.hlo").read_text())
    with pytest.raises(HloscopeError, match=r"constant.1 .*printed as \{\.\.\.\}") as e:
        run_module(hloscope.read(alone).module)
    assert "--xla_dump_large_constants" in e.value.hint
    gpu = DATA / "wild" / "old_tf" / "gpu_tests_all_reduce.hlo"  # neither way compiles
    alone.write_text(gpu.read_text())
    with pytest.raises(HloscopeError, match="Unsupported reduction.*module is optimized") as e:
        run_module(hloscope.read(alone).module)
    assert "before_optimizations" in e.value.hint
    # with a before file beside it (here a stand-in), that runs, and the note says so
    (tmp_path / "alone.before.hlo").write_text((SEEDS / "torch_xla_01_IrToHlo.11.hlo")
                                               .read_text())
    r = run_module(hloscope.read(alone).module, iterations=0)
    assert f"ran {tmp_path / 'alone.before.hlo'}, the same module before" in r.notes[0]
    assert before_optimizations_file(str(DUMP / "module_0030.jit_train_step."
                                         "cpu_after_optimizations.txt")).endswith(
        "module_0030.jit_train_step.before_optimizations.txt")


TRANSPOSE = """HloModule m, is_scheduled=true, entry_computation_layout={(f32[2,3]{1,0})->%s}

ENTRY %%e (p0.1: f32[2,3]) -> f32[3,2] {
  %%p0.1 = f32[2,3]{1,0} parameter(0)
  ROOT %%r = %s %s(f32[2,3]{1,0} %%p0.1)%s
}
"""


@pytest.mark.parametrize("root", [
    ("f32[3,2]{1,0}", "transpose", ", dimensions={1,0}"),  # logical: a transpose
    ("f32[3,2]{0,1}", "bitcast", ""),  # the same memory read column-major: a transpose too
])
def test_optimized_modules_keep_their_layout_semantics(root):
    """Through StableHLO the module's layouts are gone: a root transpose compiled without
    XLA's passes came back laid out {0,1} and was read as {1,0} (a silent reshape); a
    bitcast between layouts is a transpose in logical terms.  Both now give the
    transpose."""
    shape, op, attrs = root
    m = hloscope.read_text(TRANSPOSE % (shape, shape, op, attrs)).module
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = run_module(m, inputs={"0": x}, iterations=0)
    np.testing.assert_array_equal(r.values[0], x.T)
    assert "layouts disagree: output 0" in r.notes[0]


def test_a_bitcast_between_ranks_runs():
    """torch_xla's optimized modules failed with "layout minor_to_major field contains 2
    elements, but shape has 1 dimensions": a bitcast between ranks on the StableHLO
    route.  Written as a reshape, it runs."""
    m = hloscope.read_text("HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[2,3]) -> "
                           "f32[6] {\n  %p = f32[2,3]{1,0} parameter(0)\n  ROOT %b = f32[6]{0} "
                           "bitcast(f32[2,3]{1,0} %p)\n}\n").module
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = run_module(m, inputs={"0": x}, iterations=0)
    np.testing.assert_array_equal(r.values[0], x.reshape(6))
    assert r.notes == []
    undone = defuse(m)  # with XLA's passes (the way that failed): a reshape
    assert "bitcast(" not in undone and "reshape(%p)" in undone
    r = run_module(hloscope.read_text(undone).module, inputs={"0": x}, iterations=0,
                   _plan=replace(plan_module(m), optimized=False))
    np.testing.assert_array_equal(r.values[0], x.reshape(6))


def test_an_xla_check_failure_kills_a_child_not_the_process():
    """Compiled with XLA's passes, an optimized module's fusion stops XLA's CPU emitter on
    a CHECK (the process aborts): in the child, that is a clear error."""
    m = hloscope.read(GEN / "f_well_fused.hlo").module
    plan = replace(plan_module(m), optimized=False)
    with pytest.raises(CompileError, match=r"killed by signal 6.*Check failed") as e:
        compile_in_child(m, str(m), plan, "cpu")
    assert "hloscope is unharmed" in str(e.value)


def test_already_partitioned_module_runs_as_it_is_one_program_per_device():
    """torch_xla's per-device program with a cross-partition all-reduce (partitioned
    again, XLA said "Cross-partition allreduce must be in (partial) manual partitioning
    mode"); its inputs are split by their shardings."""
    m = hloscope.read(RUN / "partitioned_allreduce.hlo").module
    plan = plan_module(m)
    assert plan.partitioned and not plan.spmd and plan.partitions == 4
    x = np.random.default_rng(0).standard_normal((16, 8), dtype=np.float32)
    w = np.random.default_rng(1).standard_normal((8, 16), dtype=np.float32)
    r = run_module(m, inputs={"0": x, "1": w}, iterations=0)
    assert [c["opcode"] for c in r.collectives] == ["all-reduce"]
    want = sum(x[4 * i:4 * i + 4] @ w for i in range(4))
    np.testing.assert_allclose(r.values[0], want, rtol=1e-5, atol=1e-5)
    assert [s["shape"] for s in r.outputs[0]["shards"]] == [[4, 16]] * 4
    with pytest.raises(HloscopeError, match=r"holds shape \(4, 8\).*all devices together: "
                                            r"\[16, 8\]"):
        run_module(m, inputs={"0": x[:4]}, iterations=0)
    # JAX's own per-device programs (after optimization, SPMD-partitioned over 8)
    r = run_module(hloscope.read(GEN / "fft_cont_pencil_4x2.hlo").module, iterations=0)
    assert r.partitions == 8 and len(r.collectives) == 2
    assert "already partitioned" in r.how


def test_expect_on_a_partitioned_module_puts_the_pieces_together(tmp_path):
    """JAX's per-device program over 4 devices: the split output's pieces are put together
    along the dimension that makes the reference's shape, the replicated one compared on
    every device; the notes say which."""
    m = hloscope.read(RUN / "jax_partitioned_4.hlo").module
    x = (np.arange(128, dtype=np.float32) / 100).reshape(16, 8)
    y = np.ones((16, 8), np.float32)
    want = [np.tanh(x) * 2 + 1, y.sum(0)]
    r = run_module(m, inputs={"0": x, "1": y}, iterations=0, expect=want)
    assert r.expect["ok"] and [o["shape"] for o in r.expect["outputs"]] == [[16, 8], [8]]
    notes = " ".join(r.notes)
    assert "output0: the module is one program per device and its outputs are pieces " \
           "[4, 8]: put the 4 devices' pieces together along dimension 0" in notes
    assert "output1: every one of the 4 devices holds it whole" in notes
    wrong = [want[0][::-1], want[1]]  # the pieces in another order: not the reference
    assert not run_module(m, inputs={"0": x, "1": y}, iterations=0, expect=wrong).expect["ok"]


def test_output_sharding_propagation_reaches_the_compile_options(tmp_path):
    """torch_xla's sharded matmul: with allow_spmd_sharding_propagation_to_output={true} one
    all-reduce and a sharded output, as torch_xla runs it; without, an all-gather more."""
    path = RUN / "torch_sharded_matmul_allreduce.hlo"
    m = hloscope.read(path).module
    assert plan_module(m).propagate_to_output == (True,)
    r = run_module(m, iterations=0, check=True)
    assert [c["opcode"] for c in r.collectives] == ["all-reduce"]
    assert [s["shape"] for s in r.outputs[0]["shards"]] == [[32, 32]] * 4
    assert r.check["ok"]
    off = tmp_path / "off.hlo"
    off.write_text(path.read_text().replace("output={true}", "output={false}"))
    r = run_module(hloscope.read(off).module, iterations=0)
    assert sorted(c["opcode"] for c in r.collectives) == ["all-gather", "all-reduce"]
    # torch_xla's graph text leaves the flag out, and torch_xla compiles with it on
    plain = tmp_path / "plain.hlo"
    plain.write_text(path.read_text().replace(
        ", allow_spmd_sharding_propagation_to_output={true}", ""))
    r = run_module(hloscope.read(plain).module, iterations=0)
    assert r.plan["propagation_assumed"] and "as torch_xla compiles" in r.how
    assert [c["opcode"] for c in r.collectives] == ["all-reduce"]


def test_sizes_are_checked_before_anything_is_allocated(monkeypatch):
    import hloscope._jax._run as run_mod

    def no_inputs(*args, **kwargs):
        raise AssertionError("an input was made")

    monkeypatch.setattr(run_mod, "_fill", no_inputs)
    huge = hloscope.read_text("HloModule huge\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] "
                              "parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n\nENTRY e {\n  p0 = "
                              "f32[281474976710656] parameter(0)\n  z = f32[] constant(0)\n  "
                              "ROOT r = f32[] reduce(p0, z), dimensions={0}, to_apply=add\n}\n"
                              ).module
    with pytest.raises(HloscopeError, match=r"needs about .*PiB.*inputs 1.00 PiB.*available"):
        run_module(huge)
    broadcast = hloscope.read_text("HloModule big\n\nENTRY e {\n  p0 = f32[] parameter(0)\n"
                                   "  ROOT b = f32[1048576,1048576] broadcast(p0), "
                                   "dimensions={}\n}\n").module
    with pytest.raises(HloscopeError, match=r"outputs 4.00 TiB"):
        run_module(broadcast)


def test_cli_takes_the_device_count_from_the_module(tmp_path):
    out = run_cli("run", str(RUN / "torch_sharded_matmul_allreduce.hlo"), "-n", "0", "--json",
                  "--save-outputs", str(tmp_path / "o.npz"))
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["partitions"] == 4 and d["plan"]["spmd"] and d["saved_outputs"]
    assert np.load(tmp_path / "o.npz")["output0"].shape == (64, 32)
    out = run_cli("run", str(RUN / "torch_labels_seed_s64.hlo"), "-n", "0",
                  "--inputs", str(tmp_path / "nothing.npz"))
    assert out.returncode == 2 and "no such file" in out.stderr
    out = run_cli("run", str(SEEDS / "torch_xla_01_IrToHlo.11.hlo"), "-n", "0", "--input",
                  "p0.1=2.5", "--input", "p1.5=2")
    assert out.returncode == 0 and "first values 5" in out.stdout


def test_cli_makes_as_many_cpu_devices_as_the_module_has_partitions(monkeypatch):
    """Without --devices and without XLA_FLAGS, a 4-partition module gets 4 virtual CPU
    devices; --devices overrides (too few is a clear error)."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    out = run_cli("run", str(RUN / "partitioned_allreduce.hlo"), "-n", "0")
    assert out.returncode == 0, out.stderr
    assert "one program per device on 4 devices" in out.stdout
    assert "collectives in the per-device program: 1" in out.stdout
    out = run_cli("run", str(RUN / "partitioned_allreduce.hlo"), "-n", "0", "--devices", "2")
    assert out.returncode == 2 and "needs 4 devices, JAX has 2" in out.stderr


TXLA = DATA / "torch_xla"


@pytest.mark.parametrize("name", ["sharded_matmul_2x2", "sharded_train_8"])
def test_torch_xlas_sharded_programs_run_torch_xlas_collectives(name):
    """torch_xla 2.9's sharded programs (their text without the header flags): the 2x2
    matmul runs no collective and the 8-device step only all-reduces, as torch_xla's own
    partitioned modules do, and the outputs are torch_xla's."""
    d = TXLA / name
    r = run_module(hloscope.read(d / "program.hlo").module, input_files=d / "inputs.npz",
                   expect=d / "expected.npz", iterations=0)
    assert r.expect["ok"] and r.expect["max_relative_difference"] < 1e-6
    ours = {c["opcode"] for c in r.collectives}
    theirs = {i.opcode for i in hloscope.read(d / "partitioned.hlo").module.instructions()
              if i.opcode in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                              "collective-permute")}
    assert ours == theirs


def test_torch_xlas_partitioned_module_runs_as_it_is():
    """The module torch_xla compiled for the 8-device step (after SPMD partitioning and
    optimization): one program per device, its 8 all-reduces (parameters in the sync's
    own order, so the inputs here are random)."""
    m = hloscope.read(TXLA / "sharded_train_8" / "partitioned.hlo").module
    r = run_module(m, iterations=0)
    assert r.partitions == 8 and "already partitioned" in r.how
    assert {c["opcode"] for c in r.collectives} == {"all-reduce"}
