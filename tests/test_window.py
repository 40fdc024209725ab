"""The one reader of HLO windows (``window={size=2x2 stride=2x2 ...}``) and what uses it:
shape inference, convolution taps and the flops of reduce-window and select-and-scatter."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hloscope
from hloscope._hlo._window import Window, WindowError, parse_window

_MAX = """max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""
_GE = """ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
"""


def _flops(entry: str, computations: str = _MAX) -> int:
    text = f"HloModule m\n\n{computations}\nENTRY e {{\n{entry}\n}}\n"
    (k,) = [k for k in hloscope.kernel_graph(hloscope.parse(text)).kernels
            if k.opcode in ("reduce-window", "select-and-scatter", "convolution")]
    return k.flops


@pytest.mark.parametrize("shape, window, out, flops", [
    # a 2x2 max-pool of 8x8: 16 outputs of 4 taps (priced 16 when `size=` went unread)
    ("f32[8,8]", "size=2x2 stride=2x2", "f32[4,4]", 16 * 4),
    # a 3x3 window padded by one: 64 outputs of 9 taps (the padding taps counted too)
    ("f32[8,8]", "size=3x3 pad=1_1x1_1", "f32[8,8]", 64 * 9),
    # a dilated window: 6x6 outputs of 4 taps, spread over 3x3
    ("f32[8,8]", "size=2x2 rhs_dilate=2x2", "f32[6,6]", 36 * 4),
    # a dilated input (the gradient of a sum-pool): 8x8 outputs, each window of 2x2
    # meets one input element and three holes
    ("f32[4,4]", "size=2x2 pad=1_1x1_1 lhs_dilate=2x2", "f32[8,8]", 64 * 1),
])
def test_reduce_window_flops_count_the_window_per_output(shape, window, out, flops):
    entry = (f"  p = {shape} parameter(0)\n  z = f32[] constant(0)\n"
             f"  ROOT r = reduce-window(p, z), window={{{window}}}, to_apply=max")
    m = hloscope.parse(f"HloModule m\n\n{_MAX}\nENTRY e {{\n{entry}\n}}\n")
    assert m.entry.root.shape.to_text() == out  # the shape inferred through the same reader
    assert _flops(entry) == flops


def test_select_and_scatter_flops_select_over_the_window_then_add():
    """A max-pool's gradient: each of the 16 source elements selects among 4 taps, then is
    added into the one selected (it was priced 0)."""
    entry = ("  p = f32[8,8] parameter(0)\n  s = f32[4,4] parameter(1)\n"
             "  z = f32[] constant(0)\n"
             "  ROOT r = f32[8,8] select-and-scatter(p, s, z), window={size=2x2 stride=2x2}, "
             "select=ge, scatter=add")
    add = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    assert _flops(entry, _GE + add) == 16 * (4 + 1)


def test_a_convolution_over_a_dilated_input_counts_the_taps_that_meet_it():
    """A TPU's batched matmul as a convolution: window 512 over an input dilated by 512,
    one tap of each window meets an element (2 x 512 x 64 x 64, not 512 times that)."""
    entry = ("  a = f32[1,64,64] parameter(0)\n  w = f32[512,64,64] parameter(1)\n"
             "  ROOT c = f32[512,64,64] convolution(a, w), window={size=512 pad=511_511 "
             "lhs_dilate=512}, dim_labels=0bf_0io->0bf")
    assert _flops(entry) == 2 * 512 * 64 * 64 * 64


@pytest.mark.parametrize("text, window", [
    ("{}", Window()),
    ("{size=2x2 stride=2x2}", Window(size=(2, 2), stride=(2, 2))),
    ("size=3", Window(size=(3,))),  # without its braces too
    ("{size=1x1x7x1 stride=1x4x1x1 pad=0_0x0_0x3_3x0_0}",
     Window(size=(1, 1, 7, 1), stride=(1, 4, 1, 1), pad=((0, 0), (0, 0), (3, 3), (0, 0)))),
    ("{size=2x2 pad=0_1x1_0}", Window(size=(2, 2), pad=((0, 1), (1, 0)))),
    ("{pad=-1_2 size=3}", Window(size=(3,), pad=((-1, 2),))),  # any order, negative padding
    ("{size=3x3 pad=1_2x1_2 lhs_dilate=2x2 rhs_reversal=1x1}",
     Window(size=(3, 3), pad=((1, 2), (1, 2)), lhs_dilate=(2, 2), rhs_reversal=(True, True))),
    ("{size=2x2 rhs_dilate=3x1 rhs_reversal=0x1}",
     Window(size=(2, 2), rhs_dilate=(3, 1), rhs_reversal=(False, True))),
])
def test_parse_window_reads_xlas_window_syntax(text, window):
    w = parse_window(text)
    assert w == window
    assert len(w.stride) == len(w.pad) == len(w.lhs_dilate) == len(w.rhs_reversal) == w.rank


@pytest.mark.parametrize("text, message", [
    ("{pad=1_1_0 size=1}", "not of the form 'pad=0_0x1_1'"),
    ("{size=2x2 stride=2}", "'stride=' has 1 entries and 'size=' has 2"),
    ("{size=2 size=2}", "given twice"),
    ("{size=2 window=3}", "unexpected window sub-attribute"),
    ("{size=2, stride=2}", "not of the form"),
    ("{size=２}", "not of the form"),  # a full-width digit: XLA reads ASCII digits only
    ("{size=2", "does not close"),
])
def test_parse_window_refuses_what_xla_refuses(text, message):
    with pytest.raises(WindowError, match=message):
        parse_window(text)


def test_inference_says_when_the_window_does_not_fit_the_input():
    text = f"""HloModule m

{_MAX}
ENTRY e {{
  p = f32[8,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = reduce-window(p, z), window={{size=2}}, to_apply=max
}}
"""
    with pytest.raises(hloscope.HloParseError, match="window has 1 dimension"):
        hloscope.parse(text)


_SIZES = st.integers(1, 9)


@st.composite
def windows(draw):
    n = draw(st.integers(0, 4))
    fields = {"size": tuple(draw(st.lists(_SIZES, min_size=n, max_size=n)))}
    for name in ("stride", "lhs_dilate", "rhs_dilate"):
        if draw(st.booleans()):
            fields[name] = tuple(draw(st.lists(_SIZES, min_size=n, max_size=n)))
    if draw(st.booleans()):
        pair = st.tuples(st.integers(-3, 9), st.integers(-3, 9))
        fields["pad"] = tuple(draw(st.lists(pair, min_size=n, max_size=n)))
    if draw(st.booleans()):
        fields["rhs_reversal"] = tuple(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return Window(**fields)


@settings(max_examples=200, deadline=None)
@given(windows(), st.randoms(use_true_random=False))
def test_a_window_printed_then_read_is_the_same_window(window, rnd):
    """XLA's printed form, and the same fields in any order (XLA's parser takes any)."""
    text = window.to_text()
    assert parse_window(text) == window
    parts = text.strip("{}").split()
    rnd.shuffle(parts)
    assert parse_window("{" + " ".join(parts) + "}") == window


@settings(max_examples=60, deadline=None)
@given(windows(), st.data())
def test_output_dims_are_the_shapes_jax_infers(window, data):
    """XLA's own shape inference for reduce-window (through jax.eval_shape, no compile)."""
    jax = pytest.importorskip("jax")
    pytest.importorskip("jax.numpy")
    if window.rank == 0:
        return
    dims = tuple(data.draw(st.lists(st.integers(1, 12), min_size=window.rank,
                                    max_size=window.rank)))
    expected = jax.eval_shape(
        lambda x: jax.lax.reduce_window(
            x, 0.0, jax.lax.add, window.size, window.stride, window.pad,
            base_dilation=window.lhs_dilate, window_dilation=window.rhs_dilate),
        jax.ShapeDtypeStruct(dims, jax.numpy.float32)).shape
    assert window.output_dims(dims) == tuple(expected)
