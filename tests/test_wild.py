"""HLO text nobody here wrote (tests/data/wild: XLA's and TensorFlow's test files, GPU and
TPU dumps, torch_xla logs, jax-hpc-profiler reports, issues users filed): every text XLA's
parser accepts is read and analysed; `check` agrees with XLA's parser; nothing crashes."""

from __future__ import annotations

import json

import pytest

import hloscope
from conftest import DATA
from hloscope._analysis._advisor import advise
from hloscope._analysis._kernels import kernel_graph
from hloscope._analysis._memory import analyze_memory
from hloscope._analysis._summary import summarize

MANIFEST = json.loads((DATA / "wild" / "manifest.json").read_text())["files"]


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["path"])
def test_wild_text(entry):
    path = DATA / entry["path"]
    accepts = entry.get("xla_accepts") or []
    try:
        hf = hloscope.read(path)
    except hloscope.HloscopeError as e:
        # Refused: only when XLA's parser refuses every module in it too, with a clear error.
        assert not any(accepts), f"XLA reads {path}, hloscope does not: {e}"
        assert e.one_line()
        return
    assert len(hf.modules) >= sum(accepts)
    for m in hf.modules:
        summarize(m)
        g = kernel_graph(m)
        names = {k.name for k in g.kernels}  # every array comes from a kernel it lists
        assert all(e.src in names for e in g.edges if e.src_kind == "kernel")
        analyze_memory(m)
        advise(m)
    if len(accepts) == 1:
        # One module: hloscope's strict check says what XLA's parser says.
        try:
            hloscope.check(path)
            ok = True
        except hloscope.HloParseError:
            ok = False
        assert ok == accepts[0]
