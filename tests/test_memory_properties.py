"""Property-based tests of the memory analysis on generated scheduled modules."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hloscope
from hloscope._analysis._dataflow import analyze_dataflow
from hloscope._analysis._heap import classify_buffers, estimate_temp
from hloscope._analysis._liverange import compute_live_ranges
from test_properties import modules

_DIMS = st.sampled_from(["[8]", "[4,4]", "[16]", "[2,8]", "[]"])
_UNARY = st.sampled_from(["negate", "exponential", "copy", "tanh"])
_BINARY = st.sampled_from(["add", "multiply", "subtract", "maximum"])


@st.composite
def scheduled_modules(draw):
    """A scheduled module: elementwise ops, tuples, get-tuple-element, and maybe a while loop."""
    dims = draw(_DIMS)
    shape = f"f32{dims}"
    n_params = draw(st.integers(1, 3))
    lines = [f"  p{i} = {shape} parameter({i})" for i in range(n_params)]
    names = [f"p{i}" for i in range(n_params)]
    comps = []
    for k in range(draw(st.integers(1, 12))):
        kind = draw(st.integers(0, 4))
        a = draw(st.sampled_from(names))
        b = draw(st.sampled_from(names))
        name = f"v{k}"
        if kind <= 1:
            lines.append(f"  {name} = {shape} {draw(_UNARY)}({a})")
        elif kind == 2:
            lines.append(f"  {name} = {shape} {draw(_BINARY)}({a}, {b})")
        elif kind == 3:
            lines.append(f"  t{k} = ({shape}, {shape}) tuple({a}, {b})")
            lines.append(f"  {name} = {shape} get-tuple-element(t{k}), index={draw(st.integers(0, 1))}")
        else:
            body, cond = f"body{k}", f"cond{k}"
            comps.append(  # names unique in the module, as XLA keeps them
                f"{cond} {{\n  c{k}c = (s32[], {shape}) parameter(0)\n"
                f"  i{k}c = s32[] get-tuple-element(c{k}c), index=0\n  n{k}c = s32[] constant(3)\n"
                f"  ROOT lt{k}c = pred[] compare(i{k}c, n{k}c), direction=LT\n}}\n")
            comps.append(
                f"{body} {{\n  c{k}b = (s32[], {shape}) parameter(0)\n"
                f"  i{k}b = s32[] get-tuple-element(c{k}b), index=0\n  one{k} = s32[] constant(1)\n"
                f"  j{k} = s32[] add(i{k}b, one{k})\n  x{k} = {shape} get-tuple-element(c{k}b), index=1\n"
                f"  y{k} = {shape} {draw(_UNARY)}(x{k})\n  ROOT r{k} = (s32[], {shape}) tuple(j{k}, y{k})\n}}\n")
            lines.append(f"  z{k} = s32[] constant(0)")
            lines.append(f"  i{k} = (s32[], {shape}) tuple(z{k}, {a})")
            lines.append(f"  w{k} = (s32[], {shape}) while(i{k}), condition={cond}, body={body}")
            lines.append(f"  {name} = {shape} get-tuple-element(w{k}), index=1")
        names.append(name)
    out = draw(st.sampled_from(names[n_params - 1:]))
    lines.append(f"  ROOT out = {shape} copy({out})")
    text = "HloModule m, is_scheduled=true\n\n" + "".join(comps) + "ENTRY main {\n" + \
        "\n".join(lines) + "\n}\n"
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduled_modules())
def test_memory_invariants(text):
    module = hloscope.read_text(text).module
    df = analyze_dataflow(module)
    lr = compute_live_ranges(df)
    steps = lr.end_time
    for v in df.values:
        s, e = lr.ranges[v.id]
        assert 0 <= s <= e <= steps
        if v.inst.opcode == "parameter" and v.inst.computation.is_entry:
            # lives the whole program, unless it shares a buffer (fed to a loop without the
            # copy XLA would insert) and so hands over to the next value in the buffer
            assert s == 0 and (e == steps or len(df.buffer_of[v.id].values) > 1)
    assert lr.peak_bytes == sum(v.size for v in lr.peak_values)
    live_at_peak = {v.id for v in df.values if lr.ranges[v.id][0] <= lr.peak_time <= lr.ranges[v.id][1]}
    assert live_at_peak == {v.id for v in lr.peak_values}
    assert len(lr.live_bytes) == steps + 1 and min(lr.live_bytes) >= 0
    kinds = classify_buffers(df)
    heap = estimate_temp(df, lr, kinds)
    temps = [b for b in df.buffers if kinds[b.id] == "temporary"]
    assert 0 <= heap.size <= sum(-(-b.size // 64) * 64 for b in temps)
    r1 = hloscope.analyze_memory(module).to_dict()
    r2 = hloscope.analyze_memory(hloscope.read_text(text).module).to_dict()
    r1.pop("file"), r2.pop("file")
    assert r1 == r2


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_memory_analysis_of_arbitrary_modules_never_crashes(text):
    """Any module that parses (fusions, custom-calls and tuples wired at random, scheduled or
    not) gets a memory report or an HloscopeError, never another exception."""
    module = hloscope.parse(text)
    try:
        r = hloscope.analyze_memory(module)
    except hloscope.HloscopeError:
        return
    assert r.peak_bytes is None or r.peak_bytes >= 0
    assert len(r.timeline) == r.steps
