"""Shapes, layouts and byte sizes as XLA counts them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hloscope import parse_shape
from hloscope._hlo._shape import PRIMITIVE_BITS, ShapeSyntaxError


@pytest.mark.parametrize("text,size", [
    ("f32[131072,2]{1,0}", 1048576),
    ("pred[10]{0}", 10),
    ("s4[10]{0}", 10),              # unpacked: a byte per element
    ("s4[10]{0:E(4)}", 5),          # packed two to a byte
    ("u4[3]{0:E(4)}", 2),
    ("f4e2m1fn[8]{0:E(4)}", 4),
    ("c64[2,2]{1,0}", 32),
    ("c128[2]{0}", 32),
    ("f8e4m3fn[16]{0}", 16),
    ("bf16[3,5]{1,0}", 30),
    ("s32[]", 4),
    ("token[]", 0),
    ("(s32[], f32[131072,2]{1,0})", 16),  # a tuple is its pointer table
    ("()", 0),
    ("f32[3,5]{1,0:T(8,128)}", 8 * 128 * 4),  # padded to the tile
    ("f32[<=10,4]{1,0}", 160),
])
def test_byte_size(text, size):
    assert parse_shape(text).byte_size == size


def test_tuple_total_and_leaves():
    s = parse_shape("((f32[2]{0}, s8[3]{0}), pred[])")
    assert s.total_byte_size == 16 + 16 + 8 + 3 + 1
    assert [idx for idx, _ in s.leaves()] == [(0, 0), (0, 1), (1,)]
    assert s.subshape((0, 1)).element_type == "s8"


def test_layout_fields_round_trip():
    text = "f32[8,128]{1,0:T(8,128)(2,1)L(4)E(32)S(1)M(8)}"
    s = parse_shape(text)
    assert s.layout.tiles == ((8, 128), (2, 1))
    assert s.layout.memory_space == 1
    assert s.layout.element_size_in_bits == 32
    assert str(s) == text and s.to_text() == text


def test_dynamic_and_buffer_shapes():
    s = parse_shape("f32[<=4,?]{1,0}")
    assert s.dynamic == (True, True) and s.dims == (4, -1)
    assert s.to_text() == "f32[<=4,?]{1,0}"
    b = parse_shape("b(f32[4]{0})")
    assert b.is_buffer and b.to_text() == "b(f32[4]{0})"


@pytest.mark.parametrize("bad", ["f33[2]", "f32[2", "f32[a]", "f32[2]{1,0}", "(f32[]", "f32[2]{0"])
def test_bad_shapes(bad):
    with pytest.raises(ShapeSyntaxError):
        parse_shape(bad)


_etype = st.sampled_from(sorted(PRIMITIVE_BITS))


@st.composite
def array_shapes(draw):
    et = draw(_etype)
    dims = draw(st.lists(st.integers(0, 4096), max_size=5))
    text = f"{et}[{','.join(map(str, dims))}]"
    if draw(st.booleans()):
        perm = draw(st.permutations(range(len(dims))))
        text += "{" + ",".join(map(str, perm)) + "}"
    return text


@st.composite
def shapes(draw, depth=2):
    if depth == 0 or draw(st.booleans()):
        return draw(array_shapes())
    elems = draw(st.lists(shapes(depth=depth - 1), max_size=3))
    return "(" + ", ".join(elems) + ")"


@given(shapes())
def test_shape_text_round_trips(text):
    s = parse_shape(text)
    assert s.to_text() == text
    assert parse_shape(s.to_text()) == s
    assert s.byte_size >= 0


@given(array_shapes())
def test_array_size_is_elements_times_width(text):
    s = parse_shape(text)
    bits = PRIMITIVE_BITS[s.element_type]
    assert s.byte_size == s.num_elements * max(bits, 8) // 8
