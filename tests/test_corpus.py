"""Every corpus module parses, round-trips, and summarizes; the damaged one is located."""

from __future__ import annotations

import json

import pytest

import hloscope
from hloscope._analysis._summary import summarize
from hloscope._render._text import render_json, render_summary

from conftest import SEEDS, TRUNCATED, check_golden, corpus_modules

FILES = corpus_modules()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_parses_and_round_trips(path):
    hf = hloscope.read(path)
    assert hf.modules
    for module in hf.modules:
        text = module.to_text()
        again = hloscope.parse(text)
        assert again == module
        assert again.to_text() == text
        # The printing style without sigils reads back to the same structure.
        plain = hloscope.parse(module.to_text(sigil=False))
        assert plain.structure_key()[3] == module.structure_key()[3]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_summary_golden(path):
    hf = hloscope.read(path)
    rel = path.relative_to(path.parents[1]).as_posix()
    for k, module in enumerate(hf.modules):
        module.filename = rel
        s = summarize(module)
        suffix = f".{k}" if k else ""
        check_golden(f"summary/{path.name}{suffix}.txt", render_summary(s))
        check_golden(f"summary/{path.name}{suffix}.json", render_json(s.to_dict()))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_same_instructions_as_xla(path):
    """Differential test: XLA's own C++ parser sees the same computations and instructions."""
    jax_hlo = pytest.importorskip("jaxlib._hlo")
    text = path.read_text()
    for module in hloscope.read(path).modules:
        if path.suffix == ".md":
            text = module.to_text()
        try:
            theirs = jax_hlo.hlo_module_from_text(text if path.suffix != ".md" else module.to_text())
        except Exception as e:  # XLA of this version may reject modules from other versions
            pytest.skip(f"jaxlib cannot parse it: {str(e)[:80]}")
        ours = {c.name: [i.name for i in c.instructions] for c in module.computations}
        xla = {c.name: sorted(i.name for i in c.instructions()) for c in theirs.computations()}
        assert {k: sorted(v) for k, v in ours.items()} == xla


def test_truncated_module_is_located(truncated_only):
    # Beside a whole module the damaged one is reported, not fatal; alone, it is the error.
    hf = hloscope.read(TRUNCATED)
    assert [m.name for m in hf.modules] == ["pjit_square.75"]
    assert [(d.line, d.column) for d in hf.damaged] == [(10, 82)]
    with pytest.raises(hloscope.HloParseError) as info:
        hloscope.read(truncated_only)
    e = info.value
    assert (e.line, e.column) == (10, 82)
    assert "cut off" in e.reason
    assert e.line_text.endswith("metadata={op_na")
    context = e.get_context().splitlines()
    assert context[1].index("^") == context[0].index("metadata={op_na") + len("metadata={op_na")
    assert e.in_progress == ("fused_computation", 6)
    assert "fused_computation" in e.read_before()


def test_markdown_report_module_matches_plain_file():
    md = hloscope.read(SEEDS / "fft_cont_2048_pencil8.jax_hpc_profiler.md")
    plain = hloscope.read(SEEDS / "fft_cont_2048_pencil8.after_opt.hlo")
    assert md.format == "markdown"
    assert md.module.structure_key()[1:] == plain.module.structure_key()[1:]
    # Line numbers point into the report itself.
    entry = md.module.entry
    lines = (SEEDS / "fft_cont_2048_pencil8.jax_hpc_profiler.md").read_text().splitlines()
    assert entry.root.name in lines[entry.root.line - 1]


def test_truth_files_are_consistent_with_parameters():
    """The corpus' XLA argument sizes equal the sum of the entry parameters' bytes."""
    from conftest import GENERATED

    for truth in sorted(GENERATED.glob("*.truth.json")):
        t = json.loads(truth.read_text())
        m = hloscope.read(GENERATED / (truth.name[: -len(".truth.json")] + ".hlo")).module
        assert sum(p.shape.total_byte_size for p in m.entry.parameters) == \
            t["argument_size_in_bytes"], truth.name
