"""A TPU module whose tiles pad its arrays 57-fold: XLA's live-range peak (unpadded) is
18 MiB while 524 MiB are allocated.  The memory headline and the advisor must use one
figure for what is live (found by the second blind set: 'tpu-padding 1397% of the peak')."""

from __future__ import annotations

from conftest import ROOT

import hloscope

HLO = ROOT / "tests" / "data" / "tpu" / "padded_3x3_tpu_v5e.hlo"


def test_memory_says_what_is_allocated_and_xlas_unpadded_figure() -> None:
    from hloscope._render._memory_text import render_memory

    r = hloscope.analyze_memory(hloscope.read(str(HLO)).module)
    assert r.peak_bytes == 18 * 2**20          # XLA's HloLiveRange figure, unpadded
    text = render_memory(r)
    assert "at most 524.00 MiB (549,453,824 B) (tiles padded; XLA's live-range peak, " \
           "unpadded: 18.00 MiB) live at once" in text
    assert "Live at the peak (5 values, 524.00 MiB (549,453,824 B) as allocated" in text


def test_no_finding_is_more_than_the_peak() -> None:
    groups = hloscope.advise_groups(hloscope.read(str(HLO)).module).groups
    assert groups and groups[0].kind == "tpu-padding"
    for g in groups:
        assert 0 < g.share <= 1, (g.rule, g.share)


def test_kernels_give_the_peak_memory_gives() -> None:
    """`kernels`' header gives the peak as `memory`'s headline does, padded, with XLA's
    unpadded figure beside it (it gave 18.00 MiB where `memory` said 524.00 MiB)."""
    from hloscope._render._kernels_text import render_kernels

    g = hloscope.kernel_graph(hloscope.read(str(HLO)).module)
    assert g.peak_bytes == 18 * 2**20 and g.peak_allocated_bytes == 549_453_824
    assert g.to_dict()["peak_allocated_bytes"] == 549_453_824
    header = render_kernels(g).splitlines()[2]
    assert header.endswith("memory peak 524.00 MiB (tiles padded; unpadded 18.00 MiB)")


def test_summary_outputs_add_up_to_memorys() -> None:
    """`summary`'s outputs and their tuple's pointer table are `memory`'s outputs (384.00
    KiB against 384.02 KiB, with nothing said, before)."""
    from hloscope._render._text import render_summary

    m = hloscope.read(str(ROOT / "tests" / "data" / "tpu" / "mlp_step_tpu_v5e.hlo")).module
    from hloscope._analysis._summary import summarize

    s = summarize(m)
    assert s.output_table_bytes == 16
    assert s.output_bytes + s.output_table_bytes == hloscope.analyze_memory(m).output_bytes
    assert "Outputs (2, 384.00 KiB + the tuple's 16 B pointer table)" in render_summary(s)
