"""What a GPU or TPU module says about its hardware (`hardware_view`), from HLO text
alone: kernels by kind, async collectives and their overlap, memory spaces, tile
padding."""

from __future__ import annotations

from hloscope._analysis._dataflow import analyze_dataflow
from hloscope._analysis._hardware import hardware_view
from hloscope._analysis._kernels import kernel_graph
from hloscope._analysis._liverange import compute_live_ranges
from hloscope._render._target_text import render_hardware
from hloscope._sources._reader import read_text


def _view(text: str):
    m = read_text(text).module
    df = analyze_dataflow(m)
    lr = compute_live_ranges(df)
    return hardware_view(m, df, lr, kernel_graph(m, df=df, lr=lr))


GPU = """HloModule m, is_scheduled=true, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused_gemm {
  p0 = f32[256,256]{1,0} parameter(0)
  p1 = f32[256,256]{1,0} parameter(1)
  ROOT d = f32[256,256]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

fused_neg {
  q = f32[256,256]{1,0} parameter(0)
  ROOT n = f32[256,256]{1,0} negate(q)
}

ENTRY e {
  x = f32[256,256]{1,0} parameter(0)
  ars = f32[256,256]{1,0} all-reduce-start(x), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=add
  g = f32[256,256]{1,0} fusion(x, x), kind=kCustom, calls=fused_gemm, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  c = f32[256,256]{1,0} custom-call(g, g), custom_call_target="__cublas$lt$matmul"
  ard = f32[256,256]{1,0} all-reduce-done(ars)
  ar2s = f32[256,256]{1,0} all-reduce-start(c), channel_id=2, replica_groups={{0,1,2,3}}, to_apply=add
  ar2d = f32[256,256]{1,0} all-reduce-done(ar2s)
  sync = f32[256,256]{1,0} all-reduce(ar2d), channel_id=3, replica_groups={{0,1,2,3}}, to_apply=add
  ROOT out = f32[256,256]{1,0} fusion(sync), kind=kLoop, calls=fused_neg
}
"""


def test_gpu_kernels_by_kind_and_async_overlap():
    v = _view(GPU)
    kinds = {k.kind: k.count for k in v.kernel_kinds}
    assert kinds["Triton"] == 1 and kinds["cuBLAS"] == 1 and kinds["XLA fusion"] == 1
    pairs = {a.start: a for a in v.async_pairs}
    assert pairs["ars"].between == 2 and not pairs["ars"].exposed  # the gemm and the cuBLAS call
    assert pairs["ar2s"].between == 0 and pairs["ar2s"].exposed
    assert v.blocking == ("sync",)
    text = render_hardware(v, "gpu")
    assert "1 Triton (kCustom(__triton_gemm) 1)" in text and "1 cuBLAS" in text
    assert "exposed (nothing runs while they move data): ar2s" in text
    assert "without an async form (1), which the compute waits for: sync" in text


TPU = """HloModule m, is_scheduled=true

ENTRY e {
  p = f32[4096,3]{1,0:T(8,128)} parameter(0)
  cs = (f32[4096,3]{1,0:T(8,128)S(1)}, f32[4096,3]{1,0:T(8,128)}, u32[]{:S(2)}) copy-start(p)
  cd = f32[4096,3]{1,0:T(8,128)S(1)} copy-done(cs)
  n = f32[4096,3]{1,0:T(8,128)S(1)} negate(cd)
  ROOT r = f32[4096,3]{1,0:T(8,128)} copy(n)
}
"""


def test_tpu_memory_spaces_and_tile_padding():
    v = _view(TPU)
    spaces = {s.space: s for s in v.spaces}
    # f32[4096,3] padded to 128 lanes: 2 MiB each; the async copy's two halves are one buffer.
    assert spaces[1].peak_bytes == 2 * 4096 * 128 * 4 and spaces[1].values == 2
    assert "VMEM" in spaces[1].name and spaces[2].peak_bytes == 4
    assert v.padded[0].shape.startswith("f32[4096,3]") and v.padded[0].bytes == 4096 * 128 * 4
    assert v.padded[0].logical_bytes == 4096 * 3 * 4
    assert v.peak_padding_bytes > 0
    # Each space over the schedule (p, cs, cd, n, r at steps 0-4), HBM beside the others:
    # the parameter all along, the copy's 24-byte pointer table while it runs, then r; the
    # copy's destination from its start, and n beside it while n is made.
    mib2 = 2 * 2**20
    assert spaces[0].name == "HBM, S(0)"
    assert spaces[0].timeline == (mib2, mib2 + 24, mib2 + 24, mib2, 2 * mib2)
    assert spaces[1].timeline == (0, mib2, mib2, 2 * mib2, mib2) and spaces[1].step == 3
    assert spaces[2].timeline == (0, 4, 4, 0, 0)
    text = render_hardware(v, "tpu")
    assert "  on-chip memory (TPU VMEM), S(1)  peak   4.00 MiB (2 buffers)  | ▄▄█▄|" in text
    assert "  HBM, S(0)" in text
    assert "(x42.7)" in text


def test_nothing_to_say_for_a_plain_module():
    v = _view("HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n")
    assert v.spaces == () and v.padded == () and v.async_pairs == () and v.blocking == ()
    assert render_hardware(v, "gpu").startswith("GPU kernels by kind: 1 other (negate 1)")
