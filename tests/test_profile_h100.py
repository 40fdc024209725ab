"""Real NVIDIA H100 profiles (tests/data/profiles/h100, jax 0.11.2): kernels XLA launched
inside its command buffers (CUDA graphs) name the buffer or nothing, and are named by
their own kernel names and the order XLA runs them in (`_profile/_commands.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jax")

from hloscope import read  # noqa: E402
from hloscope._analysis._kernels import kernel_graph  # noqa: E402
from hloscope._profile._commands import kernel_function_name  # noqa: E402
from hloscope._profile._match import measure  # noqa: E402
from hloscope._profile._read import read_trace  # noqa: E402

H100 = Path(__file__).parent / "data" / "profiles" / "h100"


def _measured(name: str):  # type: ignore[no-untyped-def]
    module = read(str(H100 / name / "module.hlo")).module
    trace = read_trace(str(H100 / name))
    assert (trace.platform, trace.vendor) == ("gpu", "Nvidia")
    return trace, measure(trace, kernel_graph(module), module)


def test_kernel_function_name_is_xlas():
    assert kernel_function_name("loop_add_fusion.1") == "loop_add_fusion_1"
    assert kernel_function_name("cudnn-conv.1.0") == "cudnn_conv_1_0"
    assert kernel_function_name("1st") == "_1st"
    assert kernel_function_name("a$b") == "a$b"


def test_command_buffer_with_cublas_and_a_shared_kernel():
    """One command buffer: three cuBLAS gemms (kernels named sm90_xmma_gemm_..., no
    instruction) and two tanh fusions that share one kernel (``wrapped_tanh``)."""
    trace, t = _measured("matmul_chain")
    assert {e.op for e in trace.events} == {"command_buffer_1"}
    calls = {k.name: k.calls for k in t.kernels}
    assert calls == {"custom-call.0": 1, "custom-call.1": 1, "custom-call.2": 1,
                     "wrapped_tanh": 1, "wrapped_tanh.1": 1}
    assert t.runs == 3 and t.matched_share == 1.0 and t.unmatched == ()
    by = t.by_name()
    # the gemm of twice the flops takes about twice the time
    assert 1.5 < by["custom-call.0"].median / by["custom-call.1"].median < 2.5


def test_sorts_library_kernels_go_to_their_sort():
    _, t = _measured("sort")
    assert t.runs == 3 and t.matched_share == 1.0 and t.not_run == ()
    calls = {k.name: k.calls for k in t.kernels}
    # each sort: the copy XLA's emitter runs before it, then the sort's kernel
    assert calls == {"fusion": 2, "fusion.1": 2, "wrapped_slice": 1, "wrapped_slice.1": 1}


def test_loop_kernels_without_hlo_op():
    """A scan's body kernels carry no hlo_op at all: named by their kernel names."""
    _, t = _measured("scan")
    calls = {k.name: k.calls for k in t.kernels}
    assert calls["gemm_fusion_dot"] == calls["loop_add_fusion"] == 4  # 4 steps a run
    assert calls["fft.0.0"] == 1  # cuFFT's kernel, placed by order
    assert t.runs == 3 and t.matched_share == 1.0


def test_cli_kernels_with_h100_profile():
    from conftest import run_cli

    d = H100 / "matmul_chain"
    r = run_cli("kernels", str(d / "module.hlo"), "--profile", str(d))
    assert r.returncode == 0, r.stderr
    assert "Kernels by measured time (5 ran)" in r.stdout
