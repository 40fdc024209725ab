"""The kernel graph, collectives, cost, and the advisor's rules on their twins."""

from __future__ import annotations

import json

import pytest
from conftest import DATA, GENERATED, ROOT, check_golden, run_cli
from hypothesis import HealthCheck, given, settings
from test_memory_properties import scheduled_modules
from test_properties import modules

import hloscope
from hloscope._analysis._kernels import kernel_graph
from hloscope._hlo._replica_groups import ReplicaGroupsError, parse_replica_groups

ADVISOR = DATA / "advisor"


def graph(path):
    return kernel_graph(hloscope.read(path).module)


# -- seed 004's examples ------------------------------------------------------


@pytest.mark.parametrize("name,kernels,temps", [
    ("f_well_fused", 1, 0), ("f_sum_explicit", 1, 0), ("f_sum_jax", 2, 1),
    ("f_for_unrolled", 1, 0), ("f_barrier", 1, 0), ("f_recalc", 2, 1), ("f_stored", 2, 1),
])
def test_kernel_counts_and_temporaries_of_seed_004(name, kernels, temps):
    g = graph(GENERATED / f"{name}.hlo")
    assert len(g.kernels) == kernels
    assert len(g.temporaries) == temps


def test_sum_jax_passes_a_1mib_temporary_live_at_the_peak():
    g = graph(GENERATED / "f_sum_jax.hlo")
    (e,) = [e for e in g.edges if e.value == "concatenate_convert_fusion{}"]
    assert (e.src, e.dst, e.bytes, e.kind, e.live_at_peak) == (
        "concatenate_convert_fusion", "ynn_fusion", 1048576, "temporary", True)
    k = {k.name: k for k in g.kernels}["ynn_fusion"]
    assert k.category == "fusion" and k.fusion_kind == "kCustom" and "reduce" in dict(k.fused)


def test_for_loop_is_a_group_of_three_kernels_with_its_state_in_memory():
    g = graph(GENERATED / "f_for_loop.hlo")
    loop = [k for k in g.kernels if k.group in {x.name for x in g.groups}]
    assert len(loop) == 3
    assert {x.kind for x in g.groups} == {"while body", "while condition"}
    assert "arg_tuple.1{1}" in g.temporaries


def test_fused_ops_and_flops():
    g = graph(GENERATED / "f_well_fused.hlo")
    (k,) = g.kernels
    assert k.category == "fusion" and k.fusion_kind == "kLoop" and k.flops > 0
    assert k.bytes_accessed == 2 * 1048576


def test_dot_flops_from_contracting_size():
    m = hloscope.parse("""HloModule m, is_scheduled=true
ENTRY e {
  a = f32[64,128]{1,0} parameter(0)
  b = f32[128,32]{1,0} parameter(1)
  ROOT d = f32[64,32]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
    (k,) = kernel_graph(m).kernels
    assert k.flops == 2 * 64 * 32 * 128
    assert k.bytes_accessed == (64 * 128 + 128 * 32 + 64 * 32) * 4
    a100 = hloscope.DEVICES["a100"]
    assert k.roofline_seconds(a100, "f32") == pytest.approx(
        max(k.flops / 19.5e12, k.bytes_accessed / 2.039e12))


def test_a_fusion_reads_only_the_slices_it_takes_and_writes_only_its_update():
    """As XLA's cost analysis counts a fusion (FusionParameterReadBytes): a scan's step
    reads one slice of its stacked input, and an in-place update writes the update; on an
    H100 the step's kernel was priced 22 times its measured time when read whole."""
    m = hloscope.parse("""HloModule m, is_scheduled=true
f {
  xs = f32[256,1024]{1,0} parameter(0)
  i = s32[] parameter(1)
  z = s32[] constant(0)
  row = f32[1,1024]{1,0} dynamic-slice(xs, i, z), dynamic_slice_sizes={1,1024}
  ROOT t = f32[1,1024]{1,0} tanh(row)
}
g {
  buf = f32[256,1024]{1,0} parameter(0)
  upd = f32[1,1024]{1,0} parameter(1)
  j = s32[] parameter(2)
  z = s32[] constant(0)
  ROOT d = f32[256,1024]{1,0} dynamic-update-slice(buf, upd, j, z)
}
ENTRY e {
  xs = f32[256,1024]{1,0} parameter(0)
  buf = f32[256,1024]{1,0} parameter(1)
  i = s32[] parameter(2)
  step = f32[1,1024]{1,0} fusion(xs, i), kind=kLoop, calls=f
  ROOT put = f32[256,1024]{1,0} fusion(buf, step, i), kind=kLoop, calls=g
}""")
    k = {k.name: k for k in kernel_graph(m).kernels}
    assert k["step"].bytes_accessed == 4096 + 4 + 4096  # the row, the index, the result
    assert k["put"].bytes_accessed == 4096 + 4096 + 4 + 4096  # update read, written
    assert k["put"].bytes_out == 256 * 1024 * 4  # its result is still the whole buffer


# -- collectives ---------------------------------------------------------------


def test_collectives_of_the_sharded_fft_with_bytes_per_device():
    g = graph(GENERATED / "fft_cont_pencil_4x2.hlo")
    rows = [(c.name, c.opcode, c.group_size, c.bytes, c.sent_per_device, c.received_per_device)
            for c in g.collectives]
    assert rows == [("all-gather", "all-gather", 2, 65536, 32768, 32768),
                    ("all-gather.1", "all-gather", 4, 262144, 196608, 196608)]
    assert g.collectives[0].groups == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert g.collectives[0].source == "generate.py:159"


def test_seed_gpu_fft_communicates_inside_its_library_call():
    g = graph(DATA / "seeds" / "fft_cont_2048_pencil8.after_opt.hlo")
    assert not g.collectives  # jaxDecomp's pfft3d does its all-to-alls itself
    (call,) = [k for k in g.kernels if k.category == "library call"]
    assert call.target == "pfft3d" and call.bytes_out == 8 * 1024 * 512 * 2048


@pytest.mark.parametrize("text,groups", [
    ("{{0,1},{2,3}}", ((0, 1), (2, 3))),
    ("{}", ()),
    ("[2,4]<=[8]", ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("[4,2]<=[2,4]T(1,0)", ((0, 4), (1, 5), (2, 6), (3, 7))),
    ("mesh['x'=4,'y'=2] {'y'}", ((0, 1), (2, 3), (4, 5), (6, 7))),
    ("mesh['x'=4,'y'=2] {'x'}", ((0, 2, 4, 6), (1, 3, 5, 7))),
])
def test_replica_groups_in_every_printed_form(text, groups):
    assert parse_replica_groups(text) == groups


@pytest.mark.parametrize("bad", ["[2,4]<=[8]T(0,0)", "nonsense", "[3]<=[3]"])
def test_bad_replica_groups(bad):
    with pytest.raises(ReplicaGroupsError):
        parse_replica_groups(bad)


# -- the advisor ---------------------------------------------------------------

PAIRS = [
    ("HS101", GENERATED / "f_sum_jax.hlo", GENERATED / "f_sum_explicit.hlo"),
    ("HS102", GENERATED / "f_numpy_constant.hlo", GENERATED / "f_sum_explicit.hlo"),
    ("HS103", GENERATED / "f_fft3d.hlo", GENERATED / "f_fft3d_transposed.hlo"),
    ("HS104", GENERATED / "f_recalc.hlo", GENERATED / "f_stored.hlo"),
    ("HS105", GENERATED / "f_for_loop.hlo", GENERATED / "f_for_unrolled.hlo"),
    ("HS107", ADVISOR / "donation_unused.hlo", ADVISOR / "donation_used.hlo"),
    ("HS108", ADVISOR / "f64_promoted.hlo", ADVISOR / "f32_only.hlo"),
    ("HS109", ADVISOR / "loop_invariant_collective.hlo", ADVISOR / "loop_varying_collective.hlo"),
    ("HS114", ADVISOR / "repeated_all_reduce.hlo", ADVISOR / "two_all_reduces.hlo"),
]
# The other rules fire on JAX programs compiled in tests/test_advisor_quality.py (each with
# its fixed twin); these module files are read without JAX.


@pytest.mark.parametrize("rule,trigger,clean", PAIRS, ids=[p[0] for p in PAIRS])
def test_rule_fires_on_its_trigger_and_stays_quiet_on_its_twin(rule, trigger, clean):
    fired = [f for f in hloscope.advise(hloscope.read(trigger).module) if f.rule == rule]
    assert fired, f"{rule} did not fire on {trigger.name}"
    f = fired[0]
    assert f.title and f.message and f.suggestion and f.evidence
    assert not [f for f in hloscope.advise(hloscope.read(clean).module) if f.rule == rule]


def test_every_rule_is_tested_and_documented():
    from advisor_programs import CASES

    fired = {p[0] for p in PAIRS} | {r for c in CASES for r in c.expect}
    assert {r.id for r in hloscope.RULES} == fired
    doc = (ROOT / "docs" / "advisor.md").read_text()
    for r in hloscope.RULES:
        assert r.id in doc and r.name in doc


def test_evidence_names_the_source_line():
    (f,) = [f for f in hloscope.advise(hloscope.read(GENERATED / "f_recalc.hlo").module)
            if f.rule == "HS104"]
    assert f.evidence[0].name == "add_convert_fusion" and f.evidence[0].source


# -- the command line -------------------------------------------------------------




@pytest.mark.parametrize("name,path,extra", [
    ("f_for_loop", GENERATED / "f_for_loop.hlo", ()),
    ("fft_pencil_a100", GENERATED / "fft_cont_pencil_4x2.hlo", ("--device", "a100")),
    ("f_sum_jax", GENERATED / "f_sum_jax.hlo", ()),
])
def test_kernels_text_golden(name, path, extra):
    r = run_cli("kernels", str(path), *extra)
    assert r.returncode == 0, r.stderr
    check_golden(f"kernels/{name}.txt", r.stdout)


def test_lint_text_golden_and_exit_status():
    r = run_cli("lint", str(GENERATED / "f_recalc.hlo"))
    assert r.returncode == 0, r.stderr
    check_golden("kernels/lint_f_recalc.txt", r.stdout)
    assert run_cli("lint", str(GENERATED / "f_recalc.hlo"), "--fail-on", "HS104").returncode == 1
    assert run_cli("lint", str(GENERATED / "f_recalc.hlo"), "--fail-on", "loop-state").returncode == 0
    assert run_cli("lint", str(GENERATED / "f_well_fused.hlo"), "--fail-on", "all").returncode == 0
    bad = run_cli("lint", str(GENERATED / "f_recalc.hlo"), "--fail-on", "HS999")
    assert bad.returncode == 2 and "unknown rule" in bad.stderr


def test_kernels_and_lint_json_documented():
    doc = (ROOT / "docs" / "json.md").read_text()
    r = run_cli("kernels", "--json", "--device", "h100", str(GENERATED / "fft_cont_pencil_4x2.hlo"))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["schema"] == "hloscope.kernels/1"
    m = data["modules"][0]
    for key in list(m) + list(m["kernels"][0]) + list(m["edges"][0]) + list(m["collectives"][0]):
        assert f"`{key}`" in doc, f"docs/json.md does not document {key}"
    r2 = run_cli("lint", "--json", str(GENERATED / "f_sum_jax.hlo"))
    data2 = json.loads(r2.stdout)
    assert data2["schema"] == "hloscope.lint/3"
    mod = data2["modules"][0]
    g = mod["groups"][0]
    f = g["findings"][0]
    for key in (list(mod) + list(g) + list(g["places"][0]) + list(f) + list(f["evidence"][0])
                + list(f["saving"])):
        assert f"`{key}`" in doc, f"docs/json.md does not document {key}"
    assert run_cli("kernels", "--json", str(GENERATED / "f_sum_jax.hlo")).stdout == \
        run_cli("kernels", "--json", str(GENERATED / "f_sum_jax.hlo")).stdout


def test_kernels_bad_device_and_bad_input(tmp_path):
    r = run_cli("kernels", str(GENERATED / "f_sum_jax.hlo"), "--device", "abacus")
    assert r.returncode == 2 and "unknown device" in r.stderr
    r = run_cli("kernels", str(GENERATED / "f_sum_jax.hlo"), "--peak-flops", "1e12")
    assert r.returncode == 2 and "--bandwidth" in r.stderr
    f = tmp_path / "x.hlo"
    f.write_bytes(b"\x00\xff" * 50)
    r = run_cli("lint", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr


# -- properties ---------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_kernel_graph_and_advisor_never_crash(text):
    m = hloscope.parse(text)
    try:
        g = kernel_graph(m)
        findings = hloscope.advise(m, graph=g)
    except hloscope.HloscopeError:
        return
    names = {k.name for k in g.kernels}
    assert all(e.dst in names or e.dst == "result" for e in g.edges)
    assert all(e.src in names for e in g.edges if e.src_kind == "kernel")
    assert all(k.flops >= 0 and k.bytes_accessed >= 0 for k in g.kernels)
    assert all(f.rule in {r.id for r in hloscope.RULES} for f in findings)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduled_modules())
def test_every_array_passed_between_kernels_comes_from_a_kernel_or_the_loop(text):
    g = kernel_graph(hloscope.read_text(text).module)
    passed = set(g.temporaries)
    for e in g.edges:
        if e.value in passed:
            assert e.src_kind in ("kernel", "loop state")
    assert len(g.to_dict()["kernels"]) == len(g.kernels)


ASYNC_WRAPPER = """HloModule m, is_scheduled=true

%wrapped (p: f32[64]) -> f32[64] {
  %p = f32[64]{0} parameter(0)
  ROOT %ar = f32[64]{0} all-reduce(%p), replica_groups={}, to_apply=%add
}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[64]) -> f32[64] {
  %x = f32[64]{0} parameter(0)
  %n = f32[64]{0} negate(%x)
  %st = ((f32[64]{0}), f32[64]{0}) async-start(%n), calls=%wrapped
  %d = f32[64]{0} async-done(%st)
  ROOT %e = f32[64]{0} exponential(%d)
}
"""


def test_an_array_made_by_an_async_op_comes_from_its_start(tmp_path):
    """The op an async-start runs is not a kernel of its own (the start is): what it
    makes is passed on from the start.  (`graph` failed with a KeyError on such modules,
    e.g. tests/data/wild/jhp's all-to-all-start.)"""
    g = kernel_graph(hloscope.parse(ASYNC_WRAPPER))
    assert [(e.src, e.src_kind, e.dst) for e in g.edges if e.dst == "e"] == \
        [("st", "kernel", "e")]
    p = tmp_path / "m.hlo"
    p.write_text(ASYNC_WRAPPER)
    r = run_cli("graph", str(p), "-o", str(tmp_path / "g.svg"))
    assert r.returncode == 0, r.stderr
    r = run_cli("graph", str(DATA / "wild/jhp/jaxfft_256_4_4_NCCL_float32_FFT.md"), "-o",
                str(tmp_path / "j.svg"))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("labels, rhs, flops", [
    # NHWC input, 3x3 HWIO kernel of 8 -> 16 features: 2 x output x (3 x 3 x 8)
    ("b01f_01io->b01f", "f32[3,3,8,16]", 2 * (2 * 6 * 6 * 16) * 72),
    # a matmul as TPU compiles it: dim_labels=bf_io->bf, 2 x output x contraction
    ("bf_io->bf", "f32[8,16]", None),
])
def test_convolution_flops_read_dim_labels(labels, rhs, flops):
    """dim_labels is LHS_RHS->OUT with one underscore: the kernel's output-feature label
    is found in RHS (it was not, and every convolution counted its whole kernel per
    output element: a TPU matmul's flops were 2^42 for 2^31)."""
    if labels == "bf_io->bf":
        text = f"""HloModule m
ENTRY e {{
  a = f32[32,8] parameter(0)
  w = {rhs} parameter(1)
  ROOT c = f32[32,16] convolution(a, w), dim_labels={labels}
}}
"""
        flops = 2 * 32 * 16 * 8
    else:
        text = f"""HloModule m
ENTRY e {{
  a = f32[2,6,6,8] parameter(0)
  w = {rhs} parameter(1)
  ROOT c = f32[2,6,6,16] convolution(a, w), window={{size=3x3 pad=1_1x1_1}}, dim_labels={labels}
}}
"""
    (k,) = hloscope.kernel_graph(hloscope.parse(text)).kernels
    assert k.flops == flops


_GPU_SORT = """HloModule jit_argsort, is_scheduled=true

%cmp (a: s32[], b: s32[], c: s32[], d: s32[]) -> pred[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  %c = s32[] parameter(2)
  %d = s32[] parameter(3)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}

%fused_sort (param_0: s32[1024]) -> (s32[1024], s32[1024]) {
  %param_0 = s32[1024]{0} parameter(0)
  %iota = s32[1024]{0} iota(), iota_dimension=0
  ROOT %sort = (s32[1024]{0}, s32[1024]{0}) sort(%param_0, %iota), dimensions={0}, to_apply=%cmp
}

%fused_neg (p: s32[1024]) -> s32[1024] {
  %p = s32[1024]{0} parameter(0)
  ROOT %n = s32[1024]{0} negate(%p)
}

ENTRY %main (x: s32[1024]) -> s32[1024] {
  %x = s32[1024]{0} parameter(0)
  %neg = s32[1024]{0} fusion(%x), kind=kLoop, calls=%fused_neg, QUEUE
  %sorted = (s32[1024]{0}, s32[1024]{0}) fusion(%neg), kind=kCustom, calls=%fused_sort, QUEUE
  ROOT %idx = s32[1024]{0} get-tuple-element(%sorted), index=1
}
""".replace("QUEUE", 'backend_config={"operation_queue_id":"0"}')


def test_a_gpu_sort_fusion_has_the_copy_thunk_xlas_emitter_runs_before_it():
    """An argsort on a GPU: XLA's emitter copies the keys (a fusion parameter in another
    buffer) into the sort's output before sorting there; the indices (an iota) are made in
    place. The copy is counted beside the kernels and said in `kernels`' text; the same
    module read as a CPU's (no stream in its backend configs) has none."""
    from hloscope._render._kernels_text import render_kernels

    g = kernel_graph(hloscope.parse(_GPU_SORT))
    assert [k.name for k in g.kernels] == ["neg", "sorted"]
    assert [c.to_dict() for c in g.emitter_copies] == [
        {"kernel": "sorted", "operand": 0, "value": "neg{}", "bytes": 4096}]
    assert ("and 1 copy thunk XLA's GPU emitter runs before sorts, which sort in place in "
            "their output: neg{} into sorted (4.00 KiB)") in render_kernels(g)
    cpu = _GPU_SORT.replace(', backend_config={"operation_queue_id":"0"}', "")
    assert kernel_graph(hloscope.parse(cpu)).emitter_copies == ()


def test_kernels_and_edges_are_frozen_and_equal_to_ones_made_plainly():
    """The graph makes its kernels and edges through a faster constructor (`_maker`): they
    are the same frozen, hashable objects as the classes' own."""
    import dataclasses

    from hloscope._analysis._kernels import Edge, Kernel

    module = hloscope.read_text("HloModule m, is_scheduled=true\nENTRY e {\n"
                                "  p = f32[8]{0} parameter(0)\n  n = f32[8]{0} negate(p)\n"
                                "  ROOT x = f32[8]{0} exponential(n)\n}\n").module
    g = kernel_graph(module)
    for obj, cls in [(g.kernels[0], Kernel), (g.edges[0], Edge)]:
        assert type(obj) is cls
        plain = cls(*(getattr(obj, f.name) for f in dataclasses.fields(cls)))
        assert obj == plain and hash(obj) == hash(plain) and repr(obj) == repr(plain)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, dataclasses.fields(cls)[0].name, "other")


def test_the_kernel_table_lists_at_most_max_rows_without_top(monkeypatch):
    """A module of more kernels than MAX_ROWS lists the first MAX_ROWS and says how many
    more there are (a million rows is more than anyone reads); --top still lists N."""
    from hloscope._render import _kernels_text

    m = hloscope.parse("HloModule m, is_scheduled=true\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
                  "  %p = f32[8]{0} parameter(0)\n  %a = f32[8]{0} negate(%p)\n"
                  "  %b = f32[8]{0} abs(%a)\n  ROOT %c = f32[8]{0} exponential(%b)\n}\n")
    g = kernel_graph(m)
    monkeypatch.setattr(_kernels_text, "MAX_ROWS", 2)
    text = _kernels_text.render_kernels(g)
    assert "  a " in text and "  b " in text and "  c " not in text
    assert "... and 1 more kernels (--top N shows more)" in text
    assert "  c " in _kernels_text.render_kernels(g, top=3)


def test_a_fusion_calling_a_computation_of_more_parameters_than_it_passes(tmp_path):
    """Fuzzing (seed 59: a fusion's callee renamed to one of two parameters) found the
    sliced-operand reads indexing past the fusion's operands: exit 3, now analysed."""
    text = """HloModule m

fused_computation {
  p0 = f32[8,4]{1,0} parameter(0)
  p1 = f32[8,4]{1,0} parameter(1)
  s = f32[1,4]{1,0} slice(p1), slice={[0:1], [0:4]}
  ROOT n = f32[1,4]{1,0} negate(s)
}

ENTRY main {
  a = f32[8,4]{1,0} parameter(0)
  ROOT f = f32[1,4]{1,0} fusion(a), kind=kLoop, calls=fused_computation
}
"""
    graph = kernel_graph(hloscope.read_text(text).module)
    assert [k.name for k in graph.kernels] == ["f"]
    path = tmp_path / "m.hlo"
    path.write_text(text)
    for command in ("kernels", "memory", "lint"):
        assert run_cli(command, str(path)).returncode == 0


@pytest.mark.parametrize("target,operands,result", [
    ("__cudnn$convForward", "f32[1,32,32,1]{3,2,1,0} x, f32[8,3,3,1]{3,2,1,0} w",
     "f32[1,32,32,8]{3,2,1,0}"),
    ("__cudnn$convBiasActivationForward", "f32[1,32,32,1]{3,2,1,0} x, f32[8,3,3,1]{3,2,1,0} w",
     "f32[1,32,32,8]{3,2,1,0}"),
    ("__cudnn$convBackwardInput", "f32[1,32,32,8]{3,2,1,0} x, f32[8,3,3,1]{3,2,1,0} w",
     "f32[1,32,32,1]{3,2,1,0}"),
    ("__cudnn$convBackwardFilter", "f32[1,32,32,1]{3,2,1,0} x, f32[1,32,32,8]{3,2,1,0} w",
     "f32[8,3,3,1]{3,2,1,0}"),
])
def test_cudnn_convolutions_cost_what_the_convolution_does(target, operands, result):
    """XLA:GPU's convolution custom-calls keep the forward convolution's window and
    dim_labels; their flops are the convolution's (an open-world trial: 0 flops, so the
    whole module read 0.97 flop/byte and the convolution ranked on bytes alone).  All four
    here are one 3x3 convolution of 1 feature into 8 on 32x32: 2 x 8,192 x 9 flops."""
    (s0, a), (s1, b) = (p.split() for p in operands.split(", "))
    text = (f"HloModule m\n\nENTRY main {{\n  {a} = {s0} parameter(0)\n  {b} = {s1} "
            f"parameter(1)\n  cc = ({result}, u8[0]{{0}}) custom-call({a}, {b}), "
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_o01i->b01f, "
            f"custom_call_target=\"{target}\"\n  ROOT g = {result} get-tuple-element(cc), "
            "index=0\n}\n")
    g = hloscope.kernel_graph(hloscope.parse(text))
    assert [k.flops for k in g.kernels if k.name == "cc"] == [2 * 8192 * 9]


def test_a_gemm_custom_call_contracts_the_dimensions_its_config_names():
    """XLA:GPU's cuBLAS GEMM of a gradient contracts the left side's dimension 0 (its
    backend config says so): 2 x 6 x 4 x 8 flops, not the last dimension's 6 (a new
    user's V100 step read 134.76 T flops where it does 8.61 T)."""
    text = """HloModule m, is_scheduled=true

ENTRY main {
  a = f32[8,6]{1,0} parameter(0)
  b = f32[4,8]{0,1} parameter(1)
  ROOT g = (f32[6,4]{1,0}, s8[1024]{0}) custom-call(a, b), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["0"],"rhs_contracting_dimensions":["1"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}
}
"""
    g = hloscope.kernel_graph(hloscope.read_text(text, filename="t.hlo").module)
    (k,) = [k for k in g.kernels if k.name == "g"]
    assert k.flops == 2 * 6 * 4 * 8
