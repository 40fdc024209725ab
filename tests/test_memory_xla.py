"""The memory analysis against XLA itself, on programs of many kinds compiled in this run.

Each program (tests/xla_programs.py) is compiled with the installed JAX and
``xla_dump_to``; hloscope reads only the optimized HLO text and must give the
same live range for every value and the same peak as XLA's HloLiveRange
dump, and a temp estimate within 5% of ``memory_analysis()``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from xla_programs import PROGRAMS, compile_with_dump

import hloscope
from hloscope._analysis._dataflow import analyze_dataflow
from hloscope._analysis._heap import estimate_temp
from hloscope._analysis._liverange import compute_live_ranges
from hloscope._sources._xla_dumps import parse_live_range


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_xla(name, tmp_path):
    import jax

    if name.startswith(("sharded", "shard_map")) and len(jax.devices()) < 8:
        pytest.skip("needs 8 devices: XLA_FLAGS=--xla_force_host_platform_device_count=8 "
                    "before JAX starts")
    hlo, live_range, _ba, figures = compile_with_dump(name, str(tmp_path))
    module = hloscope.read_text(hlo).module
    df = analyze_dataflow(module)
    lr = compute_live_ranges(df)
    dump = parse_live_range(live_range)
    assert {v.label: lr.ranges[v.id] for v in df.values if v.id in lr.ranges} == dump.ranges
    assert lr.peak_bytes == dump.peak_bytes
    temp = figures["temp_size_in_bytes"]
    assert abs(estimate_temp(df, lr).size - temp) <= 0.05 * temp


def test_collectives_of_a_shard_map_program(tmp_path):
    import jax

    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    hlo, _lr, _ba, _fig = compile_with_dump("shard_map_collectives", str(tmp_path))
    g = hloscope.kernel_graph(hloscope.read_text(hlo).module)
    ops = {c.opcode for c in g.collectives}
    assert {"all-reduce", "all-gather", "collective-permute", "all-to-all"} <= ops
    for c in g.collectives:
        assert c.sent_per_device > 0 and c.received_per_device > 0
        assert c.group_size in (2, 8)
        if c.opcode == "all-gather":  # each device holds 8x16x4 B and gathers the other 7 shards
            assert c.received_per_device == 7 * 8 * 16 * 4
