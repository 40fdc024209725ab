"""Nothing is counted that is not there (issue 15, section 3).

Annotations (``Sharding``, ``SPMDFullToShardShape``, ``MoveToHost``, Shardy's
``xla.sdy.*``, ...) and copies or transposes that keep every element where it
is in memory are not kernels, hold no memory and draw no advice; XLA's own
memory-usage report, read alone, is shown as it is.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import DATA, GENERATED, SEEDS, run_cli

import hloscope
from hloscope._analysis._advisor import advise
from hloscope._analysis._dataflow import analyze_dataflow
from hloscope._analysis._kernels import kernel_count, kernel_graph
from hloscope._analysis._memory import analyze_memory
from hloscope._analysis._passthrough import (
    ANNOTATION_TARGETS,
    keeps_element_order,
    passes_through,
    same_physical_order,
)
from hloscope._analysis._summary import summarize
from hloscope._hlo._shape import parse_shape
from hloscope._sources._xla_dumps import parse_memory_usage_report

# A torch_xla-style module before optimization: inputs and outputs annotated for the SPMD
# partitioner, a manual region between SPMDFullToShardShape and SPMDShardToFullShape, and
# host offloading's MoveToHost/MoveToDevice around the result.
ANNOTATED = """\
HloModule SyncTensorsGraph.30, num_partitions=4

ENTRY %SyncTensorsGraph.30 (p0.1: f32[1024,512], p1.2: f32[512,256]) -> (f32[1024,256]) {
  %p0.1 = f32[1024,512]{1,0} parameter(0)
  %custom-call.3 = f32[1024,512]{1,0} custom-call(f32[1024,512]{1,0} %p0.1), custom_call_target="Sharding", sharding={devices=[4,1]0,1,2,3}
  %p1.2 = f32[512,256]{1,0} parameter(1)
  %custom-call.4 = f32[512,256]{1,0} custom-call(f32[512,256]{1,0} %p1.2), custom_call_target="Sharding", sharding={replicated}
  %dot.5 = f32[1024,256]{1,0} dot(f32[1024,512]{1,0} %custom-call.3, f32[512,256]{1,0} %custom-call.4), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %custom-call.6 = f32[1024,256]{1,0} custom-call(f32[1024,256]{1,0} %dot.5), custom_call_target="Sharding", sharding={devices=[4,1]0,1,2,3}
  %custom-call.7 = f32[256,256]{1,0} custom-call(f32[1024,256]{1,0} %custom-call.6), custom_call_target="SPMDFullToShardShape", sharding={manual}
  %multiply.8 = f32[256,256]{1,0} multiply(f32[256,256]{1,0} %custom-call.7, f32[256,256]{1,0} %custom-call.7)
  %custom-call.9 = f32[256,256]{1,0} custom-call(f32[256,256]{1,0} %multiply.8), custom_call_target="Sharding", sharding={manual}
  %custom-call.10 = f32[1024,256]{1,0} custom-call(f32[256,256]{1,0} %custom-call.9), custom_call_target="SPMDShardToFullShape", sharding={devices=[4,1]0,1,2,3}
  %custom-call.11 = f32[1024,256]{1,0} custom-call(f32[1024,256]{1,0} %custom-call.10), custom_call_target="MoveToHost"
  %custom-call.12 = f32[1024,256]{1,0} custom-call(f32[1024,256]{1,0} %custom-call.11), custom_call_target="MoveToDevice"
  %add.13 = f32[1024,256]{1,0} add(f32[1024,256]{1,0} %custom-call.12, f32[1024,256]{1,0} %dot.5)
  ROOT %tuple.14 = (f32[1024,256]{1,0}) tuple(f32[1024,256]{1,0} %add.13)
}
"""

# The same program with every annotation taken out, as XLA's passes leave it.
PLAIN = """\
HloModule SyncTensorsGraph.30, num_partitions=4

ENTRY %SyncTensorsGraph.30 (p0.1: f32[1024,512], p1.2: f32[512,256]) -> (f32[1024,256]) {
  %p0.1 = f32[1024,512]{1,0} parameter(0)
  %p1.2 = f32[512,256]{1,0} parameter(1)
  %dot.5 = f32[1024,256]{1,0} dot(f32[1024,512]{1,0} %p0.1, f32[512,256]{1,0} %p1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %multiply.8 = f32[256,256]{1,0} multiply(f32[1024,256]{1,0} %dot.5, f32[1024,256]{1,0} %dot.5)
  %add.13 = f32[1024,256]{1,0} add(f32[256,256]{1,0} %multiply.8, f32[1024,256]{1,0} %dot.5)
  ROOT %tuple.14 = (f32[1024,256]{1,0}) tuple(f32[1024,256]{1,0} %add.13)
}
"""

# Shardy's manual computation as XLA's own test prints it (shardy_xla_pass_test.cc): the
# tuple-shaped GlobalToLocalShape and LocalToGlobalShape around a call.
SHARDY = """\
HloModule sdy_rs_export

region_add {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT add = f32[] add(p0, p1)
}

xla.sdy.manual_computation_body.11 {
  Arg_0.12 = f32[4,8] parameter(0)
  ROOT rs = f32[4,4] reduce-scatter(Arg_0.12), dimensions={1}, replica_groups={{0,1},{2,3}}, channel_id=1, use_global_device_ids=true, to_apply=region_add
}

ENTRY main {
  p0 = f32[8,8] parameter(0), sharding={devices=[2,1]<=[2]}
  custom-call.2 = (f32[4,8]) custom-call(p0), custom_call_target="xla.sdy.GlobalToLocalShape"
  local_param = f32[4,8] get-tuple-element(custom-call.2), index=0
  call.1 = f32[4,4] call(local_param), to_apply=xla.sdy.manual_computation_body.11
  ROOT custom-call.3 = f32[8,8] custom-call(call.1), custom_call_target="xla.sdy.LocalToGlobalShape"
}
"""


def _module(text: str) -> hloscope.Module:
    return hloscope.parse(text)


# -- annotations ---------------------------------------------------------------


def test_annotations_are_not_kernels_nor_library_calls():
    m = _module(ANNOTATED)
    g = kernel_graph(m)
    assert [k.name for k in g.kernels] == ["dot.5", "multiply.8", "add.13"]
    assert kernel_count(m) == 3
    assert not [k for k in g.kernels if k.category == "library call"]
    # The arrays go from the kernel that wrote them, through the annotations, to the reader.
    into_add = {e.src for e in g.edges if e.dst == "add.13"}
    assert into_add == {"multiply.8", "dot.5"}
    assert {e.src for e in g.edges if e.dst == "dot.5"} == {"p0.1", "p1.2"}
    s = summarize(m)
    assert s.custom_calls == ()
    assert dict(s.annotations) == {"Sharding": 4, "SPMDFullToShardShape": 1,
                                   "SPMDShardToFullShape": 1, "MoveToHost": 1,
                                   "MoveToDevice": 1}
    assert s.to_dict()["custom_calls"] == {}


def test_annotations_hold_no_memory():
    m = _module(ANNOTATED)
    df = analyze_dataflow(m)
    assert not [v for v in df.values if v.inst.opcode == "custom-call"]
    r = analyze_memory(m)
    plain = analyze_memory(_module(PLAIN))
    assert r.peak_bytes == plain.peak_bytes
    assert r.timeline_max[0] == plain.timeline_max[0]
    # At its highest: p0.1, p1.2, dot.5, multiply.8 (one shard) and add.13 at add.13.
    assert r.timeline_max[0] == (2 + 0.5 + 1 + 0.25 + 1) * 2**20
    assert r.values == plain.values == 6
    assert r.temp_estimate_bytes == plain.temp_estimate_bytes
    assert not [b for b in r.peak_values if b.opcode == "custom-call"]
    assert not [b for b in r.largest if b.opcode == "custom-call"]


def test_annotations_draw_no_advice():
    m = _module(ANNOTATED)
    names = {e.name for f in advise(m) for e in f.evidence}
    assert not [n for n in names if n.startswith("custom-call")]


def test_shardy_tuple_annotations_forward_their_operands():
    m = _module(SHARDY)
    df = analyze_dataflow(m)
    entry = m.entry
    g2l, l2g = entry.by_name["custom-call.2"], entry.by_name["custom-call.3"]
    # GlobalToLocalShape holds p0 at {0} (its pointer table is its own); LocalToGlobalShape
    # is the call's result.
    assert [v.inst for v in df.values_at(g2l, (0,))] == [entry.parameters[0]]
    assert [v.label for v in df.defined_by(g2l)] == ["custom-call.2{}"]
    assert df.defined_by(l2g) == []
    assert [v.inst.name for v in df.values_at(l2g)] == ["rs"]
    assert [k.name for k in kernel_graph(m).kernels] == ["rs"]
    assert dict(summarize(m).annotations) == {"xla.sdy.GlobalToLocalShape": 1,
                                              "xla.sdy.LocalToGlobalShape": 1}


def test_annotation_targets_name_xlas():
    assert {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost",
            "MoveToDevice", "LayoutConstraint", "annotate_device_placement", "InspectSharding",
            "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape",
            "xla.sdy.FuncResultSharding", "xla.sdy.ShardingGroup"} <= ANNOTATION_TARGETS
    # Library calls stay library calls.
    assert not {"__cublas$gemm", "__cudnn$convForward", "pfft3d", "PadToStatic",
                "X64Combine", "AllocateBuffer"} & ANNOTATION_TARGETS


def test_annotation_without_operands_is_no_kernel_but_keeps_its_value():
    m = _module("""\
HloModule m

ENTRY e {
  p = f32[4] parameter(0)
  g = () custom-call(p), custom_call_target="xla.sdy.ShardingGroup", custom_call_has_side_effect=true
  ROOT n = f32[4] negate(p)
}
""")
    assert [k.name for k in kernel_graph(m).kernels] == ["n"]
    assert analyze_memory(m).peak_bytes == 32


# -- copies and transposes that are bitcasts --------------------------------------------


def _one(text: str, name: str) -> tuple[hloscope.Module, hloscope.Instruction]:
    m = _module(text)
    return m, m.entry.by_name[name]


LAYOUT_KEEPING = [
    # Only a size-1 dimension moves.
    "t = f32[1,8]{1,0} transpose(f32[8,1]{1,0} p), dimensions={1,0}",
    # Layouts that compensate the permutation (JAX's before-optimization modules).
    "t = f32[64,128]{0,1} transpose(f32[128,64]{1,0} p), dimensions={1,0}",
    # torch_xla: the operand's layout compensates.
    "t = f32[128,10,24,24]{3,2,1,0} transpose(f32[128,24,24,10]{2,1,3,0} p), dimensions={0,3,1,2}",
    # No permutation at all.
    "t = f32[8,4]{1,0} transpose(f32[8,4]{1,0} p), dimensions={0,1}",
    # A copy that only reorders a size-1 dimension in the layout.
    "t = f32[8,1]{0,1} copy(f32[8,1]{1,0} p)",
]
MOVING = [
    "t = f32[4,8]{1,0} transpose(f32[8,4]{1,0} p), dimensions={1,0}",
    "t = f32[8,4]{0,1} copy(f32[8,4]{1,0} p)",
    "t = f32[2,3,4]{2,1,0} transpose(f32[3,2,4]{2,1,0} p), dimensions={1,0,2}",
    # Same layout: a copy XLA's copy insertion placed, a real copy.
    "t = f32[8,4]{1,0} copy(f32[8,4]{1,0} p)",
    # Into another memory space (host offloading): a transfer.
    "t = f32[8,1]{0,1:S(5)} copy(f32[8,1]{1,0} p)",
]


def _wrap(line: str) -> str:
    """A module: parameter p, the instruction t of `line`, and r = negate(t) as the result."""
    operand = re.search(r"(?:copy|transpose)\((.*?) p\)", line).group(1)
    return (f"HloModule m\n\nENTRY e {{\n  p = {operand} parameter(0)\n  {line}\n"
            f"  ROOT r = {line.split(' = ', 1)[1].split(' ', 1)[0]} negate(t)\n}}\n")


@pytest.mark.parametrize("line", LAYOUT_KEEPING)
def test_layout_keeping_copy_or_transpose_is_a_bitcast(line):
    m, t = _one(_wrap(line), "t")
    assert keeps_element_order(t) and passes_through(t)
    assert [k.name for k in kernel_graph(m).kernels] == ["r"]
    assert not [f for f in advise(m) if f.rule == "HS103"]
    df = analyze_dataflow(m)
    assert df.defined_by(t) == [] and [v.inst.name for v in df.values_at(t)] == ["p"]
    size = t.shape.byte_size
    assert analyze_memory(m).peak_bytes == 2 * size  # p and r, nothing for t


@pytest.mark.parametrize("line", MOVING)
def test_data_moving_copy_or_transpose_stays_a_kernel(line):
    m, t = _one(_wrap(line), "t")
    assert not passes_through(t)
    assert [k.name for k in kernel_graph(m).kernels] == ["t", "r"]
    r = analyze_memory(m)
    assert r.all_spaces_peak_bytes == 3 * t.shape.byte_size  # p, t and r
    # A copy into another memory space (S(5): host memory; r, written with t's layout, is
    # there too) is not in the device's peak: p alone.
    assert r.peak_bytes == (1 if ":S(" in line else 3) * t.shape.byte_size


def test_real_transpose_is_still_a_kernel():
    m = _module("""\
HloModule m

ENTRY e {
  p = f32[8,4] parameter(0)
  a = f32[8,4] exponential(p)
  t = f32[4,8] transpose(a), dimensions={1,0}
  ROOT r = f32[4,8] negate(t)
}
""")
    assert "t" in [k.name for k in kernel_graph(m).kernels]
    # 128 bytes beside no library call: the advisor's layout rule has nothing worth saying
    # (tests/test_advisor_quality.py holds it to the transposes beside FFTs it is about).
    assert [f.rule for f in hloscope.advise_groups(m, min_share=0).findings] == []


def test_unoptimized_module_without_layouts_size_one_transposes():
    # torch_xla before optimization prints no layouts: the default (major-to-minor) holds.
    m = _module("""\
HloModule IrToHlo.30

ENTRY %IrToHlo.30 (p0.1: f32[1,300], p1.2: f32[1,300,3]) -> (f32[300,1], f32[300,1,3], f32[3,300]) {
  %p0.1 = f32[1,300] parameter(0)
  %exponential.3 = f32[1,300] exponential(f32[1,300] %p0.1)
  %transpose.27 = f32[300,1] transpose(f32[1,300] %exponential.3), dimensions={1,0}
  %p1.2 = f32[1,300,3] parameter(1)
  %log.4 = f32[1,300,3] log(f32[1,300,3] %p1.2)
  %transpose.25 = f32[300,1,3] transpose(f32[1,300,3] %log.4), dimensions={1,0,2}
  %reshape.5 = f32[300,3] reshape(f32[1,300,3] %log.4)
  %transpose.6 = f32[3,300] transpose(f32[300,3] %reshape.5), dimensions={1,0}
  ROOT %tuple.7 = (f32[300,1], f32[300,1,3], f32[3,300]) tuple(f32[300,1] %transpose.27, f32[300,1,3] %transpose.25, f32[3,300] %transpose.6)
}
""")
    kernels = [k.name for k in kernel_graph(m).kernels]
    assert "transpose.27" not in kernels and "transpose.25" not in kernels
    assert "transpose.6" in kernels  # a real one
    # Not optimized: the advisor judges only what survives compilation, not layouts.
    assert not hloscope.advise_groups(m, min_share=0).optimized
    labels = {b.label for b in analyze_memory(m).largest}
    assert "transpose.6{}" in labels
    assert not {"transpose.27{}", "transpose.25{}"} & labels


@pytest.mark.parametrize("src,dst,perm,same", [
    ("f32[8,1]{1,0}", "f32[1,8]{1,0}", (1, 0), True),
    ("f32[8,1]", "f32[1,8]", (1, 0), True),
    ("f32[8,4]", "f32[4,8]", (1, 0), False),
    ("f32[8,4]{1,0}", "f32[4,8]{0,1}", (1, 0), True),
    ("f32[0,4]{1,0}", "f32[4,0]{1,0}", (1, 0), True),  # no element to move
    ("f32[8,4]{1,0}", "s32[4,8]{0,1}", (1, 0), False),
    # Tiled layouts: tiles pad by dimension, so every dimension must keep its place.
    ("f32[8,128]{1,0:T(8,128)}", "f32[128,8]{0,1:T(8,128)}", (1, 0), True),
    ("f32[1,128]{1,0:T(8,128)}", "f32[128,1]{1,0:T(8,128)}", (1, 0), False),
    ("f32[8,1]{1,0}", "f32[1,8]{1,0:S(5)}", (1, 0), False),
])
def test_same_physical_order(src, dst, perm, same):
    assert same_physical_order(parse_shape(src), parse_shape(dst), perm) is same


# -- real modules ------------------------------------------------------------------------


def test_real_modules_before_optimization_count_only_what_is_there():
    # JAX before optimization: the two transposes of the backward pass are bitcasts.
    mlp = hloscope.read(DATA / "dumps/mlp_train/module_0030.jit_train_step"
                               ".before_optimizations.txt").module
    g = kernel_graph(mlp)
    assert len(g.kernels) == 47
    assert not [k for k in g.kernels if k.opcode == "transpose"]
    assert not [f for f in advise(mlp) if f.rule == "HS103"]
    fft = hloscope.read(GENERATED / "f_fft3d.before.hlo").module
    assert not [f for f in advise(fft) if f.rule == "HS103"]
    # torch_xla's Sharding annotations: no library call, no memory.
    torch = hloscope.read(SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo").module
    assert not [k for k in kernel_graph(torch).kernels if k.category == "library call"]
    assert summarize(torch).custom_calls == ()
    assert analyze_memory(torch).peak_bytes == 52  # was 80 B with the two annotations
    matmul = hloscope.read(DATA / "run" / "sharded_matmul_512.hlo").module
    assert [k.name for k in kernel_graph(matmul).kernels] == ["dot.18"]
    assert analyze_memory(matmul).peak_bytes == 3 * 2**20 + 8
    # Shardy's FuncResultSharding on JAX's result.
    for name in ("pjit_square_4x2.before.hlo", "fft_cont_pencil_4x2.before.hlo"):
        m = hloscope.read(GENERATED / name).module
        assert not [k for k in kernel_graph(m).kernels if k.opcode == "custom-call"]
        assert dict(summarize(m).annotations) == {"xla.sdy.FuncResultSharding": 1}


def test_optimized_modules_keep_their_copies_and_transposes():
    # After optimization XLA has already made bitcasts of what it could: every copy and
    # transpose left between kernels moves data (inside fusions they are the fusion's).
    for path in sorted(GENERATED.glob("*.hlo")):
        if ".before" in path.name:
            continue
        m = hloscope.read(path).module
        for comp in analyze_dataflow(m).computations:
            assert not [i.name for i in comp.instructions if passes_through(i)], path.name


# -- XLA's memory-usage report alone ----------------------------------------------------

USAGE = DATA / "dumps/mlp_train/module_0030.jit_train_step.cpu_after_optimizations-memory-usage-report.txt"


def test_memory_usage_report_alone_prints_what_it_says():
    r = run_cli("memory", str(USAGE))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "116.58 KiB (119,380 B), 23 allocations listed" in out
    assert "33.25 KiB (34,048 B)" in out and "f32[32,128], 2×f32[64,128]" in out
    assert "Largest values (27 offsets" in out  # the whole text: golden memory_usage_report
    data = json.loads(run_cli("memory", "--json", str(USAGE)).stdout)
    mu = data["xla_dumps"][0]["memory_usage"]
    assert mu["total_bytes"] == data["xla_dumps"][0]["total_bytes"] == 119380
    space = mu["memory_spaces"][0]
    assert (space["name"], space["color"], len(space["allocations"])) == ("default", 0, 23)
    assert sum(a["bytes"] for a in space["allocations"]) == 119380
    assert space["allocations"][0]["offsets"][0] == {
        "bytes": 16384, "offset": 0, "values": 1, "shapes": "f32[32,128]"}


def test_memory_usage_report_sizes_add_up_on_every_dump():
    for path in sorted(DATA.glob("**/*memory-usage-report.txt")):
        r = parse_memory_usage_report(path.read_text())
        assert sum(a.bytes for a in r.allocations) == r.total_bytes, path.name


def test_memory_usage_report_spaces_and_hidden_values():
    text = """\
Memory Space: default (color=0)
Total bytes: 3200 (3.1KiB)
  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
     2.0KiB( 67%);     2.0KiB;            0;                2; f32[512], s32[512]
     2.1KiB( 69%);       100B;         2048;                1; u8[100]
  The rest 7 values are less than 5% of the total size and not shown.

  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
     1.0KiB(100%);     1.0KiB;            0;                1; (f32[], f32[1,256])


Memory Space: host (color=4)
Total bytes: 1048576 (1.00MiB)
  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
    1.00MiB(100%);    1.00MiB;            0;                1; bf16[512,1024]

"""
    r = parse_memory_usage_report(text)
    assert r.total_bytes == 3200 + 1048576
    assert [(s.name, s.color, s.total_bytes, len(s.allocations)) for s in r.spaces] == [
        ("default", 0, 3200, 2), ("host", 4, 1048576, 1)]
    first = r.spaces[0].allocations[0]
    assert (first.bytes, first.values, first.hidden_values) == (2148, 10, 7)
    # A size printed rounded ("1.0KiB") is kept rounded when the shapes do not give it.
    assert r.spaces[0].allocations[1].offsets[0].bytes == 1024
    assert r.rows[-1] == (1048576, 0, 1, "bf16[512,1024]")


def test_sharded_view_counts_an_annotated_array_once():
    m = _module("""\
HloModule m, num_partitions=2

ENTRY e {
  p = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1]0,1}
  s = f32[8,4]{1,0} custom-call(p), custom_call_target="Sharding", sharding={devices=[2,1]0,1}
  ROOT n = f32[8,4]{1,0} negate(s), sharding={devices=[2,1]0,1}
}
""")
    view = analyze_memory(m).sharded
    assert [r.label for r in view.rows] == ["n", "p"]
    assert (view.replicated_bytes, view.per_device_bytes) == (256, 128)
