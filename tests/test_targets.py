"""Hardware targets: names, XLA's GPU configs, compiles for GPUs and TPUs that are not
here (with the gpu-target and tpu-target extras the README's test command installs),
and whether a program fits in the target's HBM."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from conftest import HAVE_CUDA_PLUGIN, ROOT, check_golden, run_cli

from hloscope._errors import HloscopeError
from hloscope._target._catalog import CHIPS, chip_device, gpu_config_text, parse_target
from hloscope._target._gpu_spec import gpu_figures, parse_textproto, strip_fields

HAVE_GPU_PLUGIN = HAVE_CUDA_PLUGIN
HAVE_LIBTPU = importlib.util.find_spec("libtpu") is not None
# In CI the README's test command installs both extras: a missing one there is a failure.
needs_gpu = pytest.mark.skipif(not HAVE_GPU_PLUGIN and not os.environ.get("CI"),
                               reason="pip install 'hloscope[gpu-target]'")
needs_tpu = pytest.mark.skipif(not HAVE_LIBTPU and not os.environ.get("CI"),
                               reason="pip install 'hloscope[tpu-target]'")


# -- names ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, topology, devices, slices", [
    ("h100", "1x1x1", 1, 1), ("H100x8", "1x1x8", 8, 1), ("a100-80:2x4x8", "2x4x8", 64, 1),
    ("a100", "1x1x1", 1, 1), ("b200x8", "1x1x8", 8, 1), ("tpu-v5e", "v5e:1x1", 1, 1),
    ("tpu-v5e:2x4", "v5e:2x4", 8, 1), ("v5e:2x2*2", "v5e:2x2", 8, 2),
    ("tpu-v5p:4x4x4", "v5p:4x4x4", 64, 1), ("tpu-v4:2x2x1", "v4:2x2x1", 4, 1),
    ("ironwood:2x2x1", "tpu7x:2x2x1", 4, 1),
])
def test_target_names(name, topology, devices, slices):
    t = parse_target(name)
    assert (t.topology, t.devices, t.slices) == (topology, devices, slices)


@pytest.mark.parametrize("name, says", [
    ("h10", "did you mean h100"), ("rtx9090", "unknown target"), ("h100:2x8", "PARTITIONS"),
    ("tpu-v5e:2x4x1", "2 dimensions"), ("tpu-v5p:2x2", "3 dimensions"),
    ("tpu-v5ex8", "topology"), ("tpu-v5e:2x4*x", "slices"),
    # A known chip with a count out of range: the range, not another chip's name.
    ("h100x0", "from 1 to 16,384 GPUs, not 0"),
    ("h100x9000000", "h100xN takes from 1 to 16,384 GPUs, not 9,000,000"),
    ("h100:64x64x64", "262,144 GPUs; a target has from 1 to 16,384"),
])
def test_bad_target_names(name, says):
    with pytest.raises(HloscopeError) as e:
        parse_target(name)
    assert says in str(e.value)
    assert "did you mean" not in str(e.value) or "unknown" in str(e.value)
    if "unknown" in str(e.value):
        assert "tpu-v5e" in e.value.hint and "h100" in e.value.hint  # the known names


# -- the memory a device gives a program -------------------------------------------------

@pytest.mark.parametrize("env, fraction, says", [
    ({}, 0.75, "75% of the H100's 79.11 GiB that JAX's allocator takes by default "
               "(XLA_PYTHON_CLIENT_MEM_FRACTION)"),
    ({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}, 0.5,
     "50% of the H100's 79.11 GiB that JAX's allocator takes under "
     "XLA_PYTHON_CLIENT_MEM_FRACTION=.5"),
    ({"XLA_CLIENT_MEM_FRACTION": ".9", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, 0.9,
     "grows to under XLA_CLIENT_MEM_FRACTION=.9, XLA_PYTHON_CLIENT_PREALLOCATE=false"),
    ({"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}, 1.0, "XLA_PYTHON_CLIENT_ALLOCATOR=platform"),
])
def test_gpu_limit_is_what_jaxs_allocator_takes(env, fraction, says):
    from hloscope._target._catalog import device_limit

    limit = device_limit("h100", env)
    assert limit.hbm_bytes == 84942979072
    assert limit.bytes == int(84942979072 * fraction) and says in limit.what
    with pytest.raises(HloscopeError, match="between 0 and 1"):
        device_limit("h100", {"XLA_PYTHON_CLIENT_MEM_FRACTION": "75"})


def test_tpu_limit_is_xlas_available_hbm():
    """The figures XLA's TPU compiler prints when a program does not fit ("Used 15.75G of
    15.75G hbm"), per device; benchmarks/fit_verdict.py compiles just above and below
    each."""
    from hloscope._target._catalog import device_limit

    said = {"tpu-v2": 7.48, "tpu-v3": 15.48, "tpu-v4": 15.25, "tpu-v5e": 15.75,
            "tpu-v5p": 95.74, "tpu-v6e": 31.25, "tpu7x": 94.75}
    for chip in (c for c in CHIPS if c.platform == "tpu"):
        limit = device_limit(chip.key)
        assert round(limit.bytes / 2**30, 2) == said[chip.key]
        assert limit.bytes < limit.hbm_bytes and "libtpu" in limit.source


def test_gpu_configs_are_xlas_and_read_right():
    """Each shipped config parses; the H100's figures are the datasheet's (989 bf16
    TFLOP/s dense, 3.35 TB/s, 80 GB) derived from XLA's own unit rates."""
    for chip in CHIPS:
        if chip.platform == "gpu":
            fig = gpu_figures(parse_textproto(gpu_config_text(chip)))
            assert fig.hbm_bytes > 10 * 2**30 and fig.bandwidth > 5e11 and fig.cores > 0
            assert "Copyright" in gpu_config_text(chip)  # the upstream notice is kept
    dev, hbm = chip_device("h100")
    assert hbm == 84942979072
    assert dev.flops["bf16"] == pytest.approx(989.17e12, rel=1e-3)
    assert dev.bandwidth == 3352320000000
    a100, _ = chip_device("a100-80")
    assert a100.flops["bf16"] == 312e12  # no matrix table in XLA's config: the datasheet's
    assert "datasheet" in a100.source


def test_strip_fields_removes_scalars_and_blocks():
    text = ("a {\n  keep: 1\n  drop_me: 2\n  inner {\n    x: 1\n  }\n}\nb: \"s\"\n")
    out = strip_fields(text, {"drop_me", "inner"})
    assert parse_textproto(out) == {"a": [{"keep": [1]}], "b": ["s"]}


def test_textproto_errors_are_located():
    with pytest.raises(HloscopeError, match=r"cfg:2: cannot read"):
        parse_textproto("a: 1\n%%%\n", source="cfg")
    with pytest.raises(HloscopeError, match="not closed"):
        parse_textproto("a {\n b: 1\n", source="cfg")


def test_mesh_and_spec_text():
    pytest.importorskip("jax")
    from jax.sharding import PartitionSpec as P

    from hloscope._jax._target import parse_mesh, parse_spec

    assert parse_mesh(None, 8) == {"data": 8}
    assert parse_mesh("data=2,model=4", 8) == {"data": 2, "model": 4}
    assert parse_mesh("2x4:data,model", 8) == {"data": 2, "model": 4}
    for bad, says in (("data=3", "has 3 devices but the target has 8"), ("2x4:data", "one name"),
                      ("data", "NAME=SIZE"), ("1x=2", "identifiers")):
        with pytest.raises(HloscopeError, match=says):
            parse_mesh(bad, 8)
    assert parse_spec("data,None") == P("data", None)
    assert parse_spec("(data,model),None") == P(("data", "model"), None)
    assert parse_spec(None) == P()


def test_a_target_mesh_that_shards_no_argument_is_noted():
    """A newcomer gave --target h100x8 and no --shard: every device then holds the whole
    program, which hloscope says instead of leaving them to guess."""
    jax = pytest.importorskip("jax")
    import numpy as np
    from jax.sharding import Mesh

    from hloscope._jax._target import abstract_args

    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
    x = jax.ShapeDtypeStruct((64, 64), np.float32)
    notes: list[str] = []
    abstract_args([x, x], mesh, None, notes)
    assert notes and "no argument is sharded over the target's 8 devices" in notes[0]
    notes.clear()
    abstract_args([x, x], mesh, {0: "data,None"}, notes)
    assert notes == []


# -- compiling for a GPU --------------------------------------------------------------

def _mlp_step():
    import jax
    import jax.numpy as jnp

    def mlp(params, x):
        for w in params:
            x = jax.nn.relu(x @ w)
        return (x ** 2).mean()

    def step(params, x):
        loss, g = jax.value_and_grad(mlp)(params, x)
        return loss, [p - 0.1 * gg for p, gg in zip(params, g)]

    w = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)
    x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)
    return step, [w] * 4, x


def _fidelity(r, temp_within=0.01):
    m = r.memory
    temp = r.memory_analysis["temp_size_in_bytes"]
    assert m.peak_bytes == m.xla.live_range_peak_bytes
    assert abs(m.temp_estimate_bytes - temp) <= temp_within * temp


@needs_gpu
@pytest.mark.parametrize("target, shard, temp_within", [
    ("h100", None, 0.01),
    ("h100x8", {1: "data,None"}, 0.01),
    # FSDP: weights all-gathered and gradients reduce-scattered by async collectives.
    ("h100x8", {0: "data,None", 1: "data,None"}, 0.01),
])
def test_gpu_target_memory_matches_xla(target, shard, temp_within):
    """Peak equal to XLA's live-range peak and temp beside XLA's temp allocation, on one
    H100 and on 8 (data parallel: an all-reduce of the gradients; FSDP)."""
    import hloscope

    step, params, x = _mlp_step()
    r = hloscope.inspect(step, params, x, target=target, shard=shard)
    assert r.device["platform"] == "gpu" and r.device["kind"] == "NVIDIA H100 80GB HBM3"
    assert r.target["devices"] == (8 if "x8" in target else 1)
    assert r.target["hbm_bytes"] == 84942979072
    _fidelity(r, temp_within)
    assert r.fit.fits and r.fit.basis == "xla"
    if target == "h100x8":
        assert "all-reduce" in r.hlo_after
    # Saved and loaded back, the report keeps its target and its fit.
    back = hloscope.load(r.save(str(ROOT / "tests" / ".tmp_target_report.json")))
    os.remove(ROOT / "tests" / ".tmp_target_report.json")
    assert back.target == r.target and back.fit.need_bytes == r.fit.need_bytes


@needs_gpu
def test_gpu_fsdp_scan_step_from_the_readme():
    """The README's example: weights sharded over 8 H100s (FSDP) and a scan over layers;
    async all-gathers and reduce-scatters; peak exact, temp within 1% (and on one H100,
    where the loop's state leaves gaps that XLA's GPU heap reuses)."""
    import jax
    import jax.numpy as jnp

    import hloscope
    from hloscope._cli._targets import load_target

    fn = load_target(str(ROOT / "examples" / "train_step.py") + ":train_step")
    w = jax.ShapeDtypeStruct((8, 4096, 4096), jnp.bfloat16)
    x = jax.ShapeDtypeStruct((1024, 4096), jnp.bfloat16)
    _fidelity(hloscope.inspect(fn, w, x, target="h100"))
    r = hloscope.inspect(fn, w, x, target="h100x8", shard={0: "None,data,None", 1: "data"})
    _fidelity(r)
    assert "all-reduce" in r.hlo_after or "reduce-scatter" in r.hlo_after
    assert "NVIDIA H100" in str(r) and "fits with" in str(r)
    # What XLA made for the GPU: Triton matmuls, and async collectives overlapped with
    # the compute between their two halves.
    kinds = {k.kind: k.count for k in r.hardware.kernel_kinds}
    assert kinds.get("Triton", 0) + kinds.get("cuBLAS", 0) >= 1
    assert any(not a.exposed and a.between > 0 for a in r.hardware.async_pairs)
    assert "GPU kernels by kind" in str(r) and "Async collectives" in str(r)
    # The roofline uses the target's own peak rates.
    assert r.roofline_device().flops["bf16"] == pytest.approx(989.17e12, rel=1e-3)


@needs_gpu
def test_an_all_to_all_the_partitioner_put_on_a_loops_critical_path():
    """A MoE's experts sharded over 8 H100s in a scan over layers: XLA's partitioner
    inserts the tokens' all-to-all, and each layer waits for it.  HS113 says no unrolling
    hides it (it said "unroll the loop by 2") and that a sharding constraint removes a
    resharding not meant; lint's header names the target as inspect does, with
    --min-share too."""
    out = run_cli("lint", str(ROOT / "tests" / "data" / "programs" / "moe_scan.py") + ":step",
                  "--inputs", "make_inputs()", "--target", "h100x8", "--shard",
                  "1=None,data,None,None", "--shard", "2=None,data,None,None", "--shard",
                  "3=data,None,None", "--min-share", "0", "--no-check", "--json")
    groups = [g for m in json.loads(out.stdout)["modules"] for g in m["groups"]
              if g["rule"] == "HS113"]
    a2a = [f for g in groups for f in g["findings"] if f["message"].startswith("all-to-all")]
    assert a2a, [f["message"] for g in groups for f in g["findings"]]
    for f in a2a:
        assert "unrolling the loop hides nothing" in f["suggestion"]
        assert "with_sharding_constraint" in f["suggestion"]
        assert "unroll=2" not in f["suggestion"]
    text = run_cli("lint", str(ROOT / "tests" / "data" / "programs" / "moe_scan.py") + ":step",
                   "--inputs", "make_inputs()", "--target", "h100x8", "--shard",
                   "1=None,data,None,None", "--shard", "2=None,data,None,None", "--shard",
                   "3=data,None,None", "--min-share", "0", "--no-check").stdout
    assert "times estimated for h100 (h100x8)" in text


@needs_gpu
def test_weights_stacked_and_sharded_on_the_scanned_axis_are_advised_another_spec():
    """The README's step with its stacked weights sharded on the layer axis (P('data')
    where FSDP shards a weight's own dimension): each iteration gathers every layer to
    use one.  HS109 said "hoist it out of the loop", which holds every layer at once; it
    now says to shard another dimension, and by how much each iteration's gather
    shrinks."""
    out = run_cli("lint", "examples/train_step.py:train_step", "--arg", "bf16[8,1024,1024]",
                  "--arg", "bf16[256,1024]", "--target", "h100x8", "--shard", "0=data,None,None",
                  "--shard", "1=data", "--no-check", "--json")
    found = [f for m in json.loads(out.stdout)["modules"] for g in m["groups"]
             for f in g["findings"] if f["rule"] == "HS109"]
    assert found, out.stdout[-2000:]
    for f in found:
        assert "gathers all 8 slices of a stacked array" in f["message"]
        assert "14.00 MiB sent per device per iteration, where gathering only the slice it " \
            "uses would send 1.75 MiB" in f["message"]
        assert "P(None, 'data')" in f["suggestion"] and "hoist it out" not in f["suggestion"]


@needs_gpu
def test_inputs_made_on_a_mesh_of_virtual_devices_for_a_target():
    """--inputs code that builds a mesh of 8 devices: on one CPU the hint says --devices 8
    (tests/test_user_errors.py), and --devices 8 with --target works (it was refused: "give
    one of them"), the arrays' specs laid on the target's mesh."""
    prog = str(ROOT / "tests" / "data" / "programs" / "mesh_inputs.py") + ":step"
    r = run_cli("inspect", prog, "--inputs", "make_inputs()", "--target", "h100x8",
                "--devices", "8")
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert "mesh data=8" in flat and "fits, using" in flat and "8 x NVIDIA H100" in flat


@needs_gpu
def test_a_function_jitted_for_real_devices_works_unchanged():
    """Written for the 8 devices at hand (here: virtual CPUs), with in_shardings, a donated
    argument and a bare PartitionSpec constraint: compiled for 8 H100s as it is, its
    shardings and donation carried over to the target's mesh."""
    from functools import partial

    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import hloscope

    if jax.device_count() < 8:
        pytest.skip("needs 8 virtual CPU devices (XLA_FLAGS from conftest)")
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))

    @partial(jax.jit, in_shardings=(NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))),
             donate_argnums=(0,))
    def step(w, x):
        x = jax.lax.with_sharding_constraint(x, P("data"))
        return w - 0.1 * (x.T @ jnp.tanh(x @ w))

    w, x = jnp.zeros((512, 512)), jnp.zeros((1024, 512))
    r = hloscope.inspect(step, w, x, target="h100x8")
    assert r.device["kind"] == "NVIDIA H100 80GB HBM3"
    assert r.shardings["per_device_input_shapes"] == [[512, 512], [128, 512]]
    assert "input_output_alias" in r.hlo_after  # the donation kept


@needs_gpu
def test_sweep_and_compare_on_a_target():
    import jax
    import jax.numpy as jnp

    import hloscope

    def f(x, n):
        for _ in range(n):
            x = jnp.tanh(x @ x)
        return x

    x = jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16)
    sw = hloscope.sweep(f, x, n=[1, 2], target="h100x8", shard={0: "data,None"})
    assert [r.device["kind"] for r in sw.reports] == ["NVIDIA H100 80GB HBM3"] * 2
    cmp = hloscope.compare({"one": (f, (x,), {"n": 1, "static_argnames": ("n",)}),
                            "local": (f, (jnp.zeros((8, 8)),),
                                      {"n": 1, "static_argnames": ("n",), "target": None})},
                           target="h100")
    assert cmp.reports["one"].target["chip"] == "h100" and cmp.reports["local"].target is None


@needs_gpu
@pytest.mark.skipif(HAVE_CUDA_PLUGIN and importlib.util.find_spec("jax_cuda12_plugin") is None,
                    reason="CUDA 13's plugin does not compile for a V100")
def test_gpu_target_that_does_not_fit_says_what_is_largest():
    import jax
    import jax.numpy as jnp

    import hloscope

    def f(a, b):
        return jnp.tanh(a @ b)

    big = jax.ShapeDtypeStruct((65536, 65536), jnp.float32)  # 16 GiB each; a V100 has 16
    r = hloscope.inspect(f, big, big, target="v100")
    assert not r.fit.fits and r.fit.spare_bytes < -30 * 2**30
    text = str(r)
    assert "does NOT fit" in text and "the largest values at the peak" in text


@needs_gpu
def test_gpu_fit_names_the_workspace_cublas_may_add():
    """On an H100, XLA's autotuner gave float32 matmuls that a deviceless compile makes
    Triton fusions to cuBLAS, each call with a 32 MiB workspace (benchmarks/gpu_check.py):
    the fit says so, and a need within that much of the limit may not fit."""
    import jax
    import jax.numpy as jnp

    import hloscope
    from hloscope._render._target_text import render_fit
    from hloscope._target._catalog import device_limit

    x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)
    r = hloscope.inspect(lambda a, b: jnp.tanh(a @ b), x, x, target="h100")
    assert r.fit.autotune_bytes == 32 << 20 and r.fit.fits
    assert "may give the matmuls to cuBLAS, whose workspace adds up to 32.00 MiB" in str(r)
    assert r.fit.to_dict()["autotune_bytes"] == 32 << 20
    assert hloscope.inspect(lambda a, b: a + b, x, x, target="a100-40").fit.autotune_bytes == 0
    assert hloscope.inspect(lambda a, b: a @ b, x, x, target="a100-40").fit.autotune_bytes \
        == 4 << 20
    limit = device_limit("h100").bytes
    close = type(r.fit)(**{**{f: getattr(r.fit, f) for f in r.fit.__dataclass_fields__},
                           "need_bytes": limit - (1 << 20)})
    assert close.fits and "may NOT fit" in render_fit(close)


@needs_gpu
def test_cli_inspect_target_and_its_mistakes():
    script = str(ROOT / "examples" / "train_step.py") + ":train_step"
    r = run_cli("inspect", script, "--target", "h100x8", "--arg", "bf16[8,1024,1024]",
                "--arg", "bf16[256,1024]", "--shard", "0=None,data,None", "--shard", "1=data")
    assert r.returncode == 0, r.stderr
    assert "target h100x8: 8 x NVIDIA H100 80GB HBM3" in r.stdout
    assert "HBM per device: needs" in r.stdout and "fits with" in r.stdout
    assert "cudart_stub" not in r.stderr and "absl::InitializeLog" not in r.stderr
    for args, says in (
            (("--target", "h10"), "unknown target 'h10': did you mean h100"),
            (("--target", "h100x8", "--mesh", "data=3"), "has 3 devices but the target has 8"),
            (("--target", "h100x8", "--shard", "0=model"), "does not have"),
            (("--target", "h100x8", "--shard", "x=data"), "give ARGUMENT=SPEC"),
            (("--mesh", "data=8"), "give --target too"),
            (("--target", "h100x8", "--shard", "1=data,data,data"), "names 3"),
    ):
        bad = run_cli("inspect", script, "--arg", "bf16[8,1024,1024]", "--arg",
                      "bf16[256,1024]", *args)
        assert bad.returncode == 2 and says in bad.stderr, (args, bad.stderr)
        assert "Traceback" not in bad.stderr


@needs_gpu
def test_bench_times_here_and_says_what_the_target_makes(tmp_path):
    """`bench --target`: the runs are timed on this machine's devices (here 2 virtual CPU
    devices), the report adds the program compiled for 8 H100s, and keeps it when saved."""
    script = str(ROOT / "examples" / "train_step.py") + ":train_step"
    out = tmp_path / "res"
    r = run_cli("bench", script, "--arg", "bf16[2,256,256]", "--arg", "bf16[64,256]", "-n",
                "2", "--warmup", "0", "--devices", "2", "--target", "h100x8", "--shard",
                "0=None,data,None", "--shard", "1=data", "-o", str(out))
    assert r.returncode == 0, r.stderr
    # A step this small uses a sliver of the H100: said as the share it uses.
    assert "target h100x8: 8 x NVIDIA H100 80GB HBM3" in r.stdout and "fits, using" in r.stdout
    md = next(out.glob("*.md")).read_text()
    assert "## Target" in md and "HBM per device: needs" in md
    assert "<h2>Target</h2>" in next(out.glob("*.html")).read_text()
    import hloscope

    [res] = hloscope.load_results(str(out))
    # timed here on one of the 2 devices: the shardings are the target's, the arguments
    # here are unsharded (SingleDeviceSharding)
    assert res.metadata["device_count"] == 1 and res.metadata["visible_devices"] == 2
    assert res.target_report.target["name"] == "h100x8" and res.target_report.fit.fits
    assert res.target_report.device["kind"] == "NVIDIA H100 80GB HBM3"
    js = run_cli("bench", script, "--arg", "bf16[2,256,256]", "--arg", "bf16[64,256]", "-n",
                 "2", "--warmup", "0", "--target", "h100", "--json")
    assert js.returncode == 0, js.stderr
    d = json.loads(js.stdout)
    assert d["target"]["name"] == "h100" and d["target"]["fit"]["fits"] is True
    assert "target_report" not in d and "report" not in d
    bad = run_cli("bench", script, "--arg", "bf16[2,256,256]", "--arg", "bf16[64,256]",
                  "--mesh", "data=8")
    assert bad.returncode == 2 and "give --target too" in bad.stderr


@needs_gpu
def test_the_cuda_plugin_on_a_machine_without_cuda_is_quiet_in_hloscopes_commands():
    """With the gpu-target extra installed here (no GPU), JAX logs a plugin configuration
    traceback whenever it starts; hloscope's own commands keep it and the native
    no-driver lines out of their output."""
    env_before = os.environ.pop("JAX_PLATFORMS", None)
    try:
        r = run_cli("run", str(ROOT / "tests" / "data" / "seeds" / "torch_xla_01_IrToHlo.11.hlo"))
    finally:
        if env_before is not None:
            os.environ["JAX_PLATFORMS"] = env_before
    assert r.returncode == 0, r.stderr
    for noise in ("plugin configuration error", "Traceback", "cudart_stub",
                  "absl::InitializeLog"):
        assert noise not in r.stderr


# -- compiling for a TPU --------------------------------------------------------------

@needs_tpu
@pytest.mark.parametrize("target, devices, kind, shard", [
    ("tpu-v5e:2x4", 8, "TPU v5 lite", {1: "data,None"}),
    ("tpu-v5e", 1, "TPU v5 lite", None),
    ("tpu-v4:2x2x1", 8, "TPU v4", {1: "data,None"}),
    ("tpu-v5e:2x2", 4, "TPU v5 lite", {0: "data,None", 1: "data,None"}),  # FSDP
])
def test_tpu_target_compiles(target, devices, kind, shard):
    """TPU modules: tiled layouts, memory spaces; the peak equals XLA's live-range peak
    (values counted without tile padding, in every memory space, as XLA counts them), and
    the temp estimate XLA's temp allocation in HBM (async slices' and copies' pointer
    tables each in a 16 KiB slot of their own, as XLA's TPU buffer assignment keeps them)."""
    import re

    import hloscope

    step, params, x = _mlp_step()
    r = hloscope.inspect(step, params, x, target=target, shard=shard)
    assert r.memory.all_spaces_peak_bytes == r.memory.xla.live_range_peak_bytes
    # TPU compiles without a device report a temp of 0 in memory_analysis(): XLA's buffer
    # assignment's default-memory-space temp allocation is the reference.
    temp = sum(int(m.group(1)) for m in re.finditer(
        r"^allocation \d+: size (\d+), preallocated-temp", r.buffer_assignment, re.M))
    assert abs(r.memory.temp_estimate_bytes - temp) <= 0.01 * temp
    assert r.device == {"kind": kind, "platform": "tpu", "count": devices}
    assert ":T(8,128)" in r.hlo_after  # TPU tiled layouts
    per_chip = r.target["devices_per_chip"]
    assert r.target["hbm_bytes"] == (16 if "v5e" in target else 32) * 2**30 // per_chip
    assert r.fit.fits


@needs_tpu
def test_tpu_attention_with_on_chip_memory_peak_is_xlas():
    """A fused attention that XLA runs through the TPU's on-chip memory (S(1) layouts,
    copy-start/copy-done into it): the peak still equals XLA's."""
    import jax
    import jax.numpy as jnp

    import hloscope

    def attn(q, k, v):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / 8.0
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, -1), v)

    s = jax.ShapeDtypeStruct((16, 512, 64), jnp.bfloat16)
    r = hloscope.inspect(attn, s, s, s, target="tpu-v5e:2x2", shard={0: "data", 1: "data",
                                                                      2: "data"})
    assert "S(1)" in r.hlo_after
    m = r.memory
    # XLA's live-range peak counts the on-chip memory too; the peak hloscope leads with is
    # of HBM alone, and never above what XLA allocates.
    assert m.all_spaces_peak_bytes == m.xla.live_range_peak_bytes > m.peak_bytes
    assert m.peak_bytes <= m.figures.headline.bytes
    # The on-chip memory's peak (the most live at once) within XLA's VMEM allocation (color
    # 1 of its buffer assignment), which adds what its packing leaves between buffers:
    # equal on the scan step, 8% below on this one.
    import re

    vmem = [int(m.group(1)) for m in re.finditer(r"^allocation \d+: size (\d+), color 1,",
                                                  r.buffer_assignment, re.M)]
    spaces = {sp.space: sp.peak_bytes for sp in r.hardware.spaces}
    assert vmem and 0.9 * vmem[0] <= spaces[1] <= vmem[0]


@needs_tpu
def test_a_program_xlas_tpu_compiler_refuses_for_memory_is_a_clear_answer():
    script = str(ROOT / "examples" / "train_step.py") + ":train_step"
    r = run_cli("inspect", script, "--target", "tpu-v5e", "--arg", "bf16[32,16384,16384]",
                "--arg", "bf16[1024,16384]")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "train_step does not fit on tpu-v5e: XLA's compiler for it says: Ran out of " \
           "memory on HBM" in r.stderr
    assert "shard it over more devices" in r.stderr


@needs_tpu
def test_tpu_verdict_is_xlas_just_below_and_above_its_limit():
    """On one v5e chip: a program needing 0.5% less than XLA's available HBM compiles and
    fits; 0.5% more, XLA refuses and hloscope says it does not fit (the full table over
    every generation: benchmarks/fit_verdict.py)."""
    import jax
    import jax.numpy as jnp

    import hloscope
    from hloscope._target._catalog import device_limit

    step = jax.jit(lambda x, y: x * 2 + y, donate_argnums=0)
    limit = device_limit("tpu-v5e").bytes

    def args(need):
        return [jax.ShapeDtypeStruct((need // 8192 * 1024,), jnp.float32)] * 2

    r = hloscope.inspect(step, *args(int(limit * 0.995)), target="tpu-v5e")
    assert r.fit.fits and r.fit.limit_bytes == limit and r.fit.spare_bytes < limit * 0.006
    assert dict(r.fit.parts)["code"] > 0 and r.fit.aliased_bytes > 0
    text = str(r)
    assert "the HBM XLA's TPU compiler has available per device" in text
    assert "aliased to donated arguments, counted once" in text
    with pytest.raises(HloscopeError, match="does not fit on tpu-v5e"):
        hloscope.inspect(step, *args(int(limit * 1.005)), target="tpu-v5e")


@needs_gpu
def test_gpu_verdict_follows_the_memory_fraction(monkeypatch):
    """One program of 50 GiB on an H100: fits in JAX's default 75%, not in 50%; the
    verdict names the setting."""
    import jax
    import jax.numpy as jnp

    import hloscope

    x = jax.ShapeDtypeStruct((25 * 2**28,), jnp.float32)  # 25 GiB in, 25 GiB out
    r = hloscope.inspect(lambda a: a * 2, x, target="h100")
    assert r.fit.fits and "by default (XLA_PYTHON_CLIENT_MEM_FRACTION)" in str(r)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".5")
    r._cache.pop("fit")
    assert not r.fit.fits and "under XLA_PYTHON_CLIENT_MEM_FRACTION=.5" in str(r)


@needs_gpu
def test_a_sharding_built_for_other_devices_is_refused_or_noted():
    """8-device shardings onto 4 H100s: an error naming both meshes; a mesh whose axes the
    spec uses have the target's sizes: laid on it, with a note."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import hloscope

    if jax.device_count() < 8:
        pytest.skip("needs 8 virtual CPU devices (XLA_FLAGS from conftest)")
    x8 = jax.ShapeDtypeStruct((1024, 256), jnp.float32, sharding=NamedSharding(
        jax.make_mesh((8,), ("data",)), P("data")))
    with pytest.raises(HloscopeError) as e:
        hloscope.inspect(lambda a: a * 2, x8, target="h100x4")
    assert "mesh data=8 (8 devices), but the target's mesh is data=4 (4 devices)" \
        in str(e.value)
    x4x2 = jax.ShapeDtypeStruct((1024, 256), jnp.float32, sharding=NamedSharding(
        jax.make_mesh((4, 2), ("data", "model")), P("data")))
    r = hloscope.inspect(lambda a: a * 2, x4x2, target="h100x4")
    assert "laid on the target's mesh data=4 (4 devices)" in r.target_lines()[0]
    assert r.shardings["per_device_input_shapes"] == [[256, 256]]


# -- the listing ------------------------------------------------------------------------

def test_targets_command_lists_every_chip():
    r = run_cli("targets")
    assert r.returncode == 0, r.stderr
    check_golden("targets.txt", r.stdout)
    data = json.loads(run_cli("targets", "--json").stdout)
    assert [t["name"] for t in data["targets"]] == [c.key for c in CHIPS]
    assert all(t["source"] for t in data["targets"])


# -- the extras a target needs ------------------------------------------------------------

@pytest.mark.parametrize("target, versions, says, fix", [
    ("h100", {}, "needs JAX's CUDA plugin, which is not installed", "hloscope[gpu-target]"),
    ("h100", {"jax-cuda12-plugin": "0.4.1"}, "jax-cuda12-plugin 0.4.1 does not match jax 9.9",
     "jax-cuda12-plugin==9.9"),
    ("h100", {"jax-cuda12-plugin": "9.9", "jax-cuda12-pjrt": "0.4.1"},
     "jax-cuda12-pjrt 0.4.1 does not match jax 9.9", "jax-cuda12-pjrt==9.9"),
    ("h100", {"jax-cuda13-plugin": "0.4.1"}, "jax-cuda13-plugin 0.4.1 does not match jax 9.9",
     "jax-cuda13-plugin==9.9"),
    ("h100", {"jax-cuda13-plugin": "9.9", "jax-cuda13-pjrt": "0.4.1"},
     "jax-cuda13-pjrt 0.4.1 does not match jax 9.9", "jax-cuda13-pjrt==9.9"),
    ("tpu-v5e", {}, "needs libtpu, which is not installed", "hloscope[tpu-target]"),
])
def test_missing_or_mismatched_extras_say_the_fix(monkeypatch, target, versions, says, fix):
    """A missing plugin, or one whose version is not jax's, is one error with the install
    line, before JAX is asked to compile anything."""
    from hloscope._jax import _target

    monkeypatch.setattr(_target, "_version", versions.get)
    monkeypatch.setattr(_target.importlib.util, "find_spec", lambda name: object())
    with pytest.raises(HloscopeError) as e:
        _target.check_extras(parse_target(target), "9.9")
    assert says in str(e.value) and fix in str(e.value) + str(e.value.hint)


@pytest.mark.parametrize("versions, chosen", [
    ({"jax-cuda12-plugin": "9.9"}, "jax-cuda12-plugin"),
    ({"jax-cuda13-plugin": "9.9"}, "jax-cuda13-plugin"),
    ({"jax-cuda12-plugin": "0.4.1", "jax-cuda13-plugin": "9.9"}, "jax-cuda13-plugin"),
    ({"jax-cuda12-plugin": "9.9", "jax-cuda13-plugin": "0.4.1"}, "jax-cuda12-plugin"),
])
def test_either_cuda_plugin_compiles_for_a_gpu(monkeypatch, versions, chosen):
    """JAX's plugin for CUDA 12 or for CUDA 13 (jax[cuda13-local]) compiles for any GPU
    target; where both are installed, the one whose version is jax's is used."""
    from hloscope._jax import _target

    monkeypatch.setattr(_target, "_version", versions.get)
    monkeypatch.setattr(_target.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(_target, "_has_ptxas", lambda: True)
    assert _target.check_extras(parse_target("h100"), "9.9") == {chosen: "9.9"}


def test_cuda13_says_it_cannot_compile_for_a_v100(monkeypatch):
    """CUDA 13 compiles for compute capability 7.5 and newer: with only its plugin, a V100
    target is one error saying to use CUDA 12's, not XLA's "ptxas too old" at compile."""
    from hloscope._jax import _target

    monkeypatch.setattr(_target, "_version", {"jax-cuda13-plugin": "9.9"}.get)
    monkeypatch.setattr(_target.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(_target, "_has_ptxas", lambda: True)
    with pytest.raises(HloscopeError) as e:
        _target.check_extras(parse_target("v100"), "9.9")
    assert "CUDA 13 does not compile for v100 (compute capability 7.0" in str(e.value)
    assert "hloscope[gpu-target]" in str(e.value.hint)
    assert _target.check_extras(parse_target("a100-80"), "9.9") == {"jax-cuda13-plugin": "9.9"}


def test_the_spare_memory_never_reads_as_the_whole_limit():
    """A need below the limit's rounding (2 MiB of 59.33 GiB) is said as the share
    of the limit it uses, not as 'fits with 59.33 GiB to spare'; a larger need keeps the
    spare figure."""
    from hloscope._analysis._fit import HbmFit
    from hloscope._render._target_text import render_fit

    limit = int(59.33 * 2**30)

    def verdict(need: int) -> str:
        fit = HbmFit("H100", limit, need, "xla", (("arguments", need),), (),
                     limit_bytes=limit, limit="75% of it")
        return render_fit(fit).split("\n")[0].split(": ", 1)[1]

    assert verdict(2 * 2**20) == "needs 2.00 MiB of 59.33 GiB on H100: fits, using 0.0033% of it"
    assert verdict(int(7.47 * 2**20)) == ("needs 7.47 MiB of 59.33 GiB on H100: fits with "
                                          "59.32 GiB to spare")
    assert verdict(191 * 2**20) == ("needs 191.00 MiB of 59.33 GiB on H100: fits with "
                                    "59.14 GiB to spare")
    assert verdict(1024) == ("needs 1.00 KiB of 59.33 GiB on H100: fits, using under 0.001% "
                             "of it")
    assert "does NOT fit: needs 1.00 GiB more" in verdict(limit + 2**30)


def test_at_most_live_at_once_is_of_hbm_alone_on_a_tpu_module():
    """tests/data/tpu: libtpu's module keeps values in on-chip memory (S(1)); 'at most N
    live at once' counts HBM alone (800 KiB, under the 832.52 KiB allocation), and XLA's
    peak over every space (1.27 MiB) is a detail beside it."""
    from hloscope import analyze_memory, read
    from hloscope._render._memory_text import render_headline

    m = analyze_memory(read(ROOT / "tests" / "data" / "tpu" / "mlp_step_tpu_v5e.hlo").module)
    assert (m.peak_bytes, m.all_spaces_peak_bytes) == (819_200, 1_327_104)
    assert m.peak_bytes <= m.figures.headline.bytes == 852_496
    assert max(m.timeline) <= m.figures.headline.bytes
    assert not any("S(1)" in v.shape for v in m.peak_values)
    assert "at most 800.00 KiB (819,200 B) live at once in HBM" in render_headline(m.figures)[1]
    assert m.figures.get("all_spaces_peak").bytes == 1_327_104


def test_an_error_inside_xlas_compiler_is_said_as_xlas_with_what_to_try():
    """A blind trial's ViT on an H100 target: XLA's Triton emitter failed ("Couldn't find
    output tile sizes"), shown as the user's code's error with literal \\t escapes."""
    from hloscope._jax._inspect import _xla_failed

    e = RuntimeError("INTERNAL: Couldn't find output tile sizes that satisfy hlo: %dot.455 = "
                     "f32[75648,768]{1,0} dot(%a, %b)\\n\\tSymbolic tile with\\n\\toffset_map")
    err = _xla_failed(e, "train_step", "h100")
    assert str(err.message).startswith("XLA's compiler for h100 failed on train_step: "
                                       "Couldn't find output tile sizes")
    assert "\\t" not in err.message
    assert "--xla_gpu_enable_triton_gemm=false" in err.hint
    other = _xla_failed(RuntimeError("INTERNAL: something else"), "f", "b200")
    assert "not in your code" in other.hint


def test_a_fit_xla_reaches_by_recomputing_values_says_so():
    """XLA's rematerialization pass clones what it recomputes (``NAME.remat``): a blind
    trial's long-context model "fits with 854 MiB to spare" on an H100 only because XLA
    recomputes 8 matmuls' results (129.8 GiB as written, on a B200)."""
    import dataclasses

    import hloscope
    from hloscope._analysis._fit import HbmFit, recomputed
    from hloscope._render._target_text import render_fit

    m = hloscope.parse("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
                       "  a = f32[4] exponential(p)\n  a.remat = f32[4] exponential(p)\n"
                       "  b.remat2 = f32[4] negate(a.remat)\n"
                       "  ROOT r = f32[4] add(a, b.remat2)\n}\n")
    assert recomputed(m) == ("a.remat", "b.remat2")
    fit = HbmFit("NVIDIA H100 80GB HBM3", 80 << 30, 58 << 30, "xla", (("temp", 58 << 30),), (),
                 59 << 30, "75% of the H100's memory", recomputed=recomputed(m))
    text = render_fit(fit)
    assert "fits with 1.00 GiB to spare" in text
    assert "to fit, XLA recomputes 2 values instead of holding them (its rematerialization: " \
           "a.remat, b.remat2)" in text
    assert fit.to_dict()["recomputed"] == ["a.remat", "b.remat2"]
    assert "recomputes" not in render_fit(HbmFit("d", 1 << 30, 1, "xla", (), ()))
    over = dataclasses.replace(fit, need_bytes=60 << 30)
    assert "XLA recomputes 2 values instead of holding them to fit (its rematerialization: " \
           "a.remat, b.remat2), and it still does not" in render_fit(over)
