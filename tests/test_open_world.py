"""What an open-world trial found on public HLO (tests/data/open_world/README.md names
each file's source), checked fixed: each test names the command a user ran."""

from __future__ import annotations

import os

import hloscope
from hloscope._analysis._diff import diff_modules

DATA = os.path.join(os.path.dirname(__file__), "data", "open_world")


def _module(name: str) -> hloscope.Module:
    return hloscope.read(os.path.join(DATA, name)).modules[0]


def _kinds(name: str) -> dict[str, str]:
    return {k.name: k.category for k in hloscope.kernel_graph(_module(name)).kernels}


def test_a_call_starts_computation_runs_under_the_start(tmp_path):
    """`kernels`: the computation a ``call-start`` runs is listed under it, not as a second
    entry; `graph` lays its kernels out (none left at the origin, on top of each other)."""
    from conftest import run_cli

    path = os.path.join(DATA, "09_xla_remat_async_call_offload.hlo")
    g = hloscope.kernel_graph(_module("09_xla_remat_async_call_offload.hlo"))
    groups = {gr.name: (gr.kind, gr.caller, gr.parent) for gr in g.groups}
    assert groups["offload_computation"] == ("async", "call-start", "main")
    r = run_cli("kernels", path)
    assert r.returncode == 0, r.stderr
    assert "async offload_computation (of call-start in main): 7 kernels" in r.stdout
    assert "entry offload_computation" not in r.stdout
    svg = tmp_path / "g.svg"
    r = run_cli("graph", path, "-o", str(svg))
    assert r.returncode == 0, r.stderr
    assert svg.read_text().count('<rect x="0.0" y="0.0"') == 0


def test_cross_replica_sum_is_all_reduce():
    """`summary`, `kernels`: a 2018 dump's ``cross-replica-sum`` is a collective."""
    from hloscope._analysis._summary import summarize

    s = summarize(_module("05_arcrs_2018_rewrite.hlo"))
    assert len(s.collectives) == 4
    assert set(_kinds("05_arcrs_2018_rewrite.hlo").values()) >= {"collective"}
    assert _kinds("05_arcrs_2018_rewrite.hlo")["cross-replica-sum.1"] == "collective"


def test_host_transfers_are_the_hosts_alone():
    """`kernels`: send/recv between devices are collectives (host transfers only with
    ``is_host_transfer=true``); a TPU's prefetch into on-chip memory is a copy, a copy to
    or from host memory (``S(5)``) a host transfer."""
    assert _kinds("08_parser2017_sendrecv_maximal.hlo") == {"recv": "collective",
                                                            "send": "collective"}
    assert _kinds("tpu_v5e_prefetch_libtpu.hlo")["copy-start"] == "copy"
    host = os.path.join(os.path.dirname(__file__), "data", "profiles", "tpu_v6e", "module.hlo")
    g = hloscope.kernel_graph(hloscope.read(host).modules[0])
    assert {k.category for k in g.kernels if k.opcode == "copy-start"} == {"host transfer"}
    text = ("HloModule h\nENTRY e {\n  t = token[] after-all()\n"
            "  r = (f32[4], u32[], token[]) recv(t), channel_id=1, is_host_transfer=true\n"
            "  ROOT d = (f32[4], token[]) recv-done(r), channel_id=1, is_host_transfer=true\n}\n")
    g = hloscope.kernel_graph(hloscope.read_text(text).modules[0])
    assert {k.name: k.category for k in g.kernels} == {"r": "host transfer"}


def test_diff_says_other_inputs_where_the_shape_is_the_same():
    """`diff`: a kernel matched with the same work and shape that reads something else is
    "on other inputs", not "on other shapes"; two identical modules differ in nothing."""
    a, b = _module("13_xla_kernel_reuse_cublas_a.hlo"), _module("14_xla_kernel_reuse_cublas_b.hlo")
    words = diff_modules(a, b).headline
    assert "1 kernel does the same work on other inputs (e.g. fusion -> fusion.2)" in words
    assert not any("other shapes" in w for w in words)
    assert diff_modules(a, a).headline[0].startswith("no difference: the same kernels")


def test_the_footprint_a_constant_saves_counts_constants():
    """`lint`: the device footprint a large constant's finding is a share of counts the
    constants, and says so."""
    findings = hloscope.advise(_module("16_xla_cpu_bench_graphsage_tf.hlo"))
    big = [f for f in findings if f.rule == "HS102"]
    assert big and "(arguments + outputs + temporaries + constants)" in \
        big[0].saving.describe()


def test_torch_xla_spmd_graphs_diff_by_opcode_and_say_partitioned():
    """`diff` of two torch_xla graphs (FSDP and Megatron sharding): kernels of other opcodes
    are removed and added, never "the same work on other shapes"; `summary` says the
    `_spmd` module is partitioned though it prints no num_partitions."""
    from hloscope._analysis._summary import summarize
    from hloscope._render._text import render_summary

    a, b = _module("20_neuron_sharding_fsdp.hlo"), _module("21_neuron_sharding_megatron.hlo")
    d = diff_modules(a, b)
    assert not d.resized, d.resized
    assert {r["name"] for r in d.removed} >= {"compare", "all-reduce"}
    assert {r["name"] for r in d.added} >= {"all-gather.1", "slice.1"}
    assert "partitioned (shapes are per device)" in render_summary(summarize(a))
    # collectives compared without default layouts, shown as written
    assert [c["shape"] for c in d.collectives_removed] == ["f32[1,5]{1,0}"]


def test_a_gpu_library_call_is_said_to_need_a_gpu():
    """`run` on an XLA:GPU module calling cuBLASLt: a GPU module, not a library to
    install."""
    from hloscope._jax._exec import _custom_call_hint

    m = _module("22_xla_cublaslt_backend_test.hlo")
    cause, hint = _custom_call_hint(m, "No registered implementation for custom call")
    assert "a library call of XLA's GPU backend" in cause and "jaxDecomp" not in hint
    assert "NVIDIA GPU" in hint


def test_padded_tpu_tiles_are_explained_as_padding():
    """`memory` on a TPU module of f32[3,6] in T(4,128) tiles: the timeline's 4 KiB and the
    peak's 144 B are at the same step, the same values sized two ways."""
    r = hloscope.analyze_memory(_module("23_tpu_jit_f_vmem_S1.hlo"))
    said = " ".join(e.text for e in r.figures.explanations)
    assert "the peak's own step" in said and "padded to its tiles" in said
    assert "can miss the highest moment" not in said
