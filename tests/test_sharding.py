"""Shardings in every printed form and the shard shapes they imply."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from hloscope import parse_shape, parse_sharding
from hloscope._hlo._sharding import iota_devices


def test_simple_kinds():
    assert parse_sharding("{replicated}").is_replicated
    m = parse_sharding("{maximal device=3}")
    assert m.kind == "maximal" and m.device == 3
    assert parse_sharding("{manual}").kind == "manual"
    assert parse_sharding("{unknown}").kind == "unknown"


def test_explicit_devices():
    s = parse_sharding("{devices=[2,2]0,1,2,3}")
    assert s.kind == "tiled" and s.tile_dims == (2, 2) and s.device_list() == (0, 1, 2, 3)
    assert str(s.shard_shape(parse_shape("f32[8192,8192]{1,0}"))) == "f32[4096,4096]{1,0}"


def test_iota_forms():
    s = parse_sharding("{devices=[4,2,1]<=[8]}")
    assert s.device_list() == tuple(range(8))
    assert s.shard_shape(parse_shape("f32[4096,1024,2048]")).dims == (1024, 512, 2048)
    t = parse_sharding("{devices=[4,2]<=[2,4]T(1,0)}")
    assert t.device_list() == (0, 4, 1, 5, 2, 6, 3, 7)


def test_subgroups():
    s = parse_sharding("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}")
    assert s.subgroup_types == ("replicated",)
    assert s.data_tile_dims == (2, 1) and s.num_devices == 4 and s.num_shards == 2
    ltd = parse_sharding("{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}")
    assert ltd.subgroup_types == ("manual", "replicated") and ltd.data_tile_dims == (2,)


def test_tuple_sharding_applies_per_leaf():
    s = parse_sharding("{{replicated}, {devices=[2,1]0,1}}")
    assert s.kind == "tuple" and len(s.elements) == 2
    shape = parse_shape("(f32[4,4]{1,0}, f32[4,4]{1,0})")
    assert s.shard_shape(shape).to_text() == "(f32[4,4]{1,0}, f32[2,4]{1,0})"


def test_named_mesh_form():
    s = parse_sharding("{mesh[x=4,y=2], [{x},{y}]}")
    assert s.kind == "named" and s.mesh_axes == (("x", 4), ("y", 2))
    assert s.data_tile_dims == (4, 2)
    assert s.shard_shape(parse_shape("f32[8,4]")).dims == (2, 2)
    sub = parse_sharding("{mesh[x=4], [{x:(1)2}, {}]}")
    assert sub.data_tile_dims == (2, 1)


def test_uneven_shards_round_up():
    s = parse_sharding("{devices=[4]0,1,2,3}")
    assert s.shard_shape(parse_shape("f32[10]")).dims == (3,)


def test_unknown_form_is_kept_not_an_error():
    s = parse_sharding("{something_new=1}")
    assert s.kind == "unknown" and s.text == "{something_new=1}"


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4).flatmap(
    lambda dims: st.tuples(st.just(tuple(dims)), st.permutations(range(len(dims))))))
def test_iota_matches_reshape_transpose(args):
    dims, perm = args
    n = 1
    for d in dims:
        n *= d
    # Reference: reshape arange(n) to dims, transpose by perm, flatten.
    tdims = [dims[p] for p in perm]
    ref = []
    for idx in itertools.product(*[range(d) for d in tdims]):
        src = [0] * len(dims)
        for k, p in enumerate(perm):
            src[p] = idx[k]
        flat = 0
        for d, i in zip(dims, src):
            flat = flat * d + i
        ref.append(flat)
    assert iota_devices((n,), tuple(dims), tuple(perm)) == tuple(ref)
