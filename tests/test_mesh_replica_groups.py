"""Collectives whose replica groups are printed over a mesh, as XLA prints them since
2025 for GPU modules: ``replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}`` (a space
between the mesh and its axes), or with a permuted mesh ``mesh[...], device_ids=(...)``."""

from __future__ import annotations

from hloscope._analysis._kernels import kernel_graph
from hloscope._sources._reader import read_text

MODULE = """HloModule m, num_partitions=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[16] parameter(0)
  ar = f32[16] all-reduce(p), channel_id=1, replica_groups=mesh['x'=4,'y'=2] {'y'}, use_global_device_ids=true, to_apply=add
  ag = f32[64] all-gather(ar), channel_id=2, replica_groups=mesh['x'=4,'y'=2] {'x'}, dimensions={0}, use_global_device_ids=true
  ROOT r = f32[64] negate(ag)
}
"""


def test_mesh_replica_groups_with_a_space_read_in_every_mode():
    for strict in (False, True):
        m = read_text(MODULE, strict=strict).module
        ar = m.entry.by_name["ar"]
        assert ar.attr("replica_groups") == "mesh['x'=4,'y'=2] {'y'}"
        assert ar.attr("use_global_device_ids") == "true"  # the next attribute is intact
    coll = {c.name: c for c in kernel_graph(m).collectives}
    assert coll["ar"].group_size == 2 and coll["ag"].group_size == 4


def test_permuted_mesh_keeps_its_device_ids():
    text = MODULE.replace("mesh['x'=4,'y'=2] {'y'}",
                          "mesh['x'=4,'y'=2], device_ids=(1,0,3,2,5,4,7,6) {'y'}")
    m = read_text(text).module
    assert m.entry.by_name["ar"].attr("replica_groups") == (
        "mesh['x'=4,'y'=2], device_ids=(1,0,3,2,5,4,7,6) {'y'}")
    assert m.entry.by_name["ar"].attr("use_global_device_ids") == "true"
