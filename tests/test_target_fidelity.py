"""A sample of benchmarks/target_fidelity.py's new table (issue 29): target compiles of
programs a user would write, where hloscope's temp estimate is within 1% of XLA's buffer
assignment and its kernel, collective and copy counts equal XLA's (the GPU compiler's thunk
sequence, the copies its emitter runs before a sort included; on TPU the optimized HLO read
on its own)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from conftest import HAVE_CUDA_PLUGIN
from target_programs import CASES, hlo_counts, thunk_counts

import hloscope
from hloscope._analysis._summary import summarize

HAVE_GPU_PLUGIN = HAVE_CUDA_PLUGIN
HAVE_LIBTPU = importlib.util.find_spec("libtpu") is not None
_BY_KEY = {(name, target): build for name, target, build in CASES}


_NEEDS_GPU = pytest.mark.skipif(not HAVE_GPU_PLUGIN and not os.environ.get("CI"),
                                reason="no jax-cuda12-plugin")


@pytest.mark.parametrize("name, target", [
    pytest.param("Adam donated FSDP", "h100x8", marks=_NEEDS_GPU),
    pytest.param("MoE all-to-all", "h100x8", marks=_NEEDS_GPU),
    pytest.param("TP MLP data=2,model=4", "tpu-v5e:2x4", marks=pytest.mark.skipif(
        not HAVE_LIBTPU and not os.environ.get("CI"), reason="no libtpu")),
])
def test_temp_within_one_percent_and_counts_as_xla(name, target, tmp_path):
    fn, args, shard, mesh = _BY_KEY[(name, target)]()
    r = hloscope.inspect(fn, *args, target=target, shard=shard, mesh=mesh,
                         compiler_options={"xla_dump_to": str(tmp_path)})
    m = r.memory
    assert m.all_spaces_peak_bytes == m.xla.live_range_peak_bytes
    assert abs(m.temp_estimate_bytes - m.xla.temp_bytes) <= 0.01 * m.xla.temp_bytes
    # The most live at once in HBM (the headline's second figure) within the allocation.
    assert m.peak_bytes <= r.fit.need_bytes
    graph = r.kernels
    copies = sum(k.category == "copy" for k in graph.kernels) + len(graph.emitter_copies)
    kernels, collectives = len(graph.kernels) + len(graph.emitter_copies), len(graph.collectives)
    assert len(summarize(r.module).collectives) == collectives
    if target.startswith("tpu"):
        assert (kernels, collectives) == hlo_counts(r.hlo_after)
    else:
        thunks = next(Path(tmp_path).glob("*thunk_sequence.txt")).read_text()
        assert (kernels, collectives, copies) == thunk_counts(thunks)
