"""Every headline memory figure is labelled, and every pair that looks contradictory is
explained, in the text, the JSON (and, in test_report_browser, the HTML report)."""

from __future__ import annotations

import json

import pytest
from conftest import GENERATED, SEEDS, run_cli

from hloscope._analysis._figures import memory_figures

BASE = dict(peak=1000, peak_at="step 3 (a)", timeline_max=1000, timeline_at="step 3 (a)",
            arguments=300, outputs=200, aliased=0, constants=0, temp_estimate=500,
            optimized=True)


def explained(figs, a, b):
    return next((e.text for e in figs.explanations if set(e.keys) == {a, b}), None)


def test_consistent_figures_need_no_explanation():
    figs = memory_figures(**BASE)
    assert figs.explanations == ()
    assert [f.key for f in figs.figures] == ["allocation", "live_range_peak", "timeline_max",
                                              "arguments", "outputs", "constants",
                                              "temp_estimate"]
    assert figs.headline.bytes == 1000 and figs.headline.source == "hloscope"


def test_timeline_above_the_peak_is_explained():
    figs = memory_figures(**{**BASE, "timeline_max": 1200, "timeline_at": "step 5 (b)"})
    text = explained(figs, "timeline_max", "live_range_peak")
    assert "step 5 (b)" in text and "1,200 B" not in text and "HloLiveRange" in text


def test_equal_looking_sizes_are_written_exactly():
    figs = memory_figures(**{**BASE, "peak": 2_097_176, "timeline_max": 2_097_177})
    assert "2,097,177 B" in explained(figs, "timeline_max", "live_range_peak")


def test_temp_above_the_peak_is_explained():
    figs = memory_figures(**{**BASE, "temp_estimate": 1500})
    assert "fragmentation" in explained(figs, "temp_estimate", "live_range_peak")


def test_peak_above_the_allocation_is_explained():
    figs = memory_figures(**{**BASE, "peak": 1400})
    assert "reuse the memory of an operand" in explained(figs, "live_range_peak",
                                                          "allocation")


def test_no_figure_points_at_more_than_the_allocation():
    """The issue's long-attention case: a timeline far above what XLA allocates; no
    sentence tells the user to plan for it."""
    figs = memory_figures(**{**BASE, "timeline_max": 5000, "timeline_at": "step 9 (x)"})
    assert figs.figures[0].key == "allocation"
    for text in [e.text for e in figs.explanations] + [f.meaning for f in figs.figures]:
        assert "plan for the" not in text or "not a size to plan for" in text


def test_the_allocation_counts_aliased_outputs_once_and_tpu_code():
    ma = {"argument_size_in_bytes": 300, "output_size_in_bytes": 200, "alias_size_in_bytes": 150,
          "temp_size_in_bytes": 0, "generated_code_size_in_bytes": 40}
    figs = memory_figures(**BASE, memory_analysis=ma, xla_temp=64, code_in_memory=True)
    head = figs.headline
    assert dict(head.parts) == {"arguments": 300, "outputs": 50, "temp": 64, "code": 40,
                                "aliased": 150}
    assert head.bytes == 300 + 50 + 64 + 40
    assert head.source == "memory_analysis() + XLA's buffer assignment"


def test_memory_analysis_fields_each_under_their_own_name():
    # The CPU backend's peak_memory_in_bytes: arguments + outputs, no temporaries (as the bf16
    # attention block of issue 15 showed: 4,194,308 B against a peak of 23,068,676 B).
    ma = {"argument_size_in_bytes": 300, "output_size_in_bytes": 200, "alias_size_in_bytes": 0,
          "temp_size_in_bytes": 520, "generated_code_size_in_bytes": 0,
          "peak_memory_in_bytes": 500, "host_temp_size_in_bytes": 0}
    figs = memory_figures(**BASE, memory_analysis=ma)
    keys = [f.key for f in figs.figures]
    for k in ma:
        assert f"memory_analysis.{k}" in keys
    foot = figs.headline
    assert foot.bytes == 300 + 200 + 520 and foot.source == "memory_analysis()"
    text = explained(figs, "memory_analysis.peak_memory_in_bytes", "live_range_peak")
    assert "equals arguments + outputs here, without temporaries" in text
    assert "+20 B" in explained(figs, "temp_estimate", "memory_analysis.temp_size_in_bytes") \
        or "-20 B" in explained(figs, "temp_estimate", "memory_analysis.temp_size_in_bytes")


def test_memory_text_and_json_show_the_labelled_block():
    path = str(GENERATED / "f_for_loop.dump")
    text = run_cli("memory", path).stdout
    head, details = text.split("Live at the peak")[0], text.split("Details")[1]
    assert head.split("\n")[5].startswith("Needs 2.00 MiB (2,097,281 B): what XLA allocates")
    assert "at most 2.00 MiB (2,097,176 B) live at once, at step 6" in head
    assert "The peak by line of code" in text and "argument x" in text
    for label in ("Peak ", "Timeline max ", "Arguments ", "Outputs ", "Constants ",
                  "Temporaries ", "XLA's peak ", "XLA's temp "):
        assert "\n  " + label in details, label
    assert "Why these figures differ" in details and "above the peak" in details
    data = json.loads(run_cli("memory", path, "--json").stdout)["modules"][0]
    figs = {f["key"]: f for f in data["figures"]["figures"]}
    assert figs["live_range_peak"]["bytes"] == data["peak_bytes"] == 2_097_176
    assert figs["timeline_max"]["bytes"] == data["timeline_max_bytes"]
    assert figs["xla_live_range_peak"]["source"] == "XLA dump"
    assert [e["figures"] for e in data["figures"]["explanations"]] == [
        ["timeline_max", "live_range_peak"]]


UNOPTIMIZED = [GENERATED / "f_barrier.before.hlo", SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo"]


@pytest.mark.parametrize("path", UNOPTIMIZED, ids=lambda p: p.name)
@pytest.mark.parametrize("command", ["summary", "kernels", "lint", "memory"])
def test_unoptimized_modules_say_so_in_every_command(command, path):
    out = run_cli(command, str(path)).stdout
    assert "not optimized" in "\n".join(out.splitlines()[:4])


@pytest.mark.parametrize("command", ["summary", "kernels", "lint", "memory"])
def test_optimized_modules_do_not(command):
    assert "not optimized" not in run_cli(command, str(GENERATED / "f_barrier.hlo")).stdout


def test_inspect_puts_memory_analysis_beside_the_peak():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import hloscope

    def attention(q, k, v):
        s = jnp.einsum("qd,kd->qk", q, k).astype(jnp.float32)
        return jnp.einsum("qk,kd->qd", jax.nn.softmax(s).astype(q.dtype), v)

    x = jnp.ones((256, 64), jnp.bfloat16)
    r = hloscope.inspect(attention, x, x, x)
    figs = r.memory.figures
    assert r.memory_analysis and figs.get("memory_analysis.temp_size_in_bytes") is not None
    assert figs.headline.source == "memory_analysis()"
    if "peak_memory_in_bytes" in r.memory_analysis and \
            r.memory_analysis["peak_memory_in_bytes"] != r.memory.peak_bytes:
        assert explained(figs, "memory_analysis.peak_memory_in_bytes", "live_range_peak")
