"""The analyses on modules XLA would not produce but the parser accepts.

* computations run from several places (two calls in one loop body, a loop
  body and the entry, a fusion computation shared by two fusions, nested
  calls, conditional branches sharing a computation): no crash, and every
  analysis keyed by computation or instruction name stays consistent;
* odd but parseable modules: every analysis either handles them or raises an
  `HloscopeError` naming the instruction, never another exception, never
  unbounded recursion or a loop without end;
* shapes of module that used to take quadratic time.
"""

from __future__ import annotations

import re
import time

import pytest
from conftest import run_cli

import hloscope
from hloscope._analysis._advisor import advise, advise_groups
from hloscope._analysis._check import shard_shape
from hloscope._analysis._dataflow import analyze_dataflow
from hloscope._analysis._kernels import kernel_graph
from hloscope._analysis._liverange import compute_live_ranges
from hloscope._analysis._memory import analyze_memory
from hloscope._analysis._summary import summarize
from hloscope._hlo._sharding import Sharding
from hloscope._render._graph_layout import layout_graph
from hloscope._render._html import render_html
from hloscope._render._kernels_text import render_advice, render_kernels
from hloscope._render._memory_text import render_memory
from hloscope._render._report_data import report_data
from hloscope._render._svg import render_svg
from hloscope._render._text import render_summary

COND = """
%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %c = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}
"""
F = """
%f (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
"""


def loop_module(body: str, state: str = "%b", entry_extra: str = "") -> str:
    """A module whose while body runs `body` (reading %x, the loop's array) and carries
    `state` to the next iteration."""
    return f"""HloModule m, is_scheduled=true
{F}{COND}
%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {{
  %s = (s32[], f32[4]{{0}}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[4]{{0}} get-tuple-element(%s), index=1
{body}
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[4]{{0}}) tuple(%i2, {state})
}}

ENTRY %main (x: f32[4]) -> f32[4] {{
  %x = f32[4]{{0}} parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[4]{{0}}) tuple(%z, %x)
  %w = (s32[], f32[4]{{0}}) while(%init), condition=%cond, body=%body
  %r = f32[4]{{0}} get-tuple-element(%w), index=1
{entry_extra}
  ROOT %out = f32[4]{{0}} add(%r, %r)
}}
"""


TWO_CALLS = """  %a = f32[4]{0} call(%x), to_apply=%f
  %b = f32[4]{0} call(%a), to_apply=%f"""

SHARED = {
    "two calls in a loop body": loop_module(TWO_CALLS),
    # The loop's state passes through unchanged, so its phi folds away: the union of the
    # two call sites' values held a phi that no longer existed (the KeyError of issue).
    "two calls in a loop body, state passed through": loop_module(
        TWO_CALLS + "\n  %keep = f32[4]{0} add(%b, %x)", state="%x"),
    "called from a loop body and the entry": loop_module(
        "  %b = f32[4]{0} call(%x), to_apply=%f", state="%x",
        entry_extra="  %e = f32[4]{0} call(%r), to_apply=%f"),
    "called twice from the entry": """HloModule m, is_scheduled=true
%f (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %a = f32[4]{0} call(%x), to_apply=%f
  ROOT %b = f32[4]{0} call(%a), to_apply=%f
}
""",
    "a fusion computation shared by two fusions": """HloModule m, is_scheduled=true
%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %f1 = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused
  %f2 = f32[4]{0} fusion(%f1), kind=kLoop, calls=%fused
  ROOT %r = f32[4]{0} add(%f1, %f2)
}
""",
    "calls nested three deep, each computation called twice": """HloModule m, is_scheduled=true
%c3 (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
%c2 (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %a = f32[4]{0} call(%p), to_apply=%c3
  ROOT %b = f32[4]{0} call(%a), to_apply=%c3
}
%c1 (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %a = f32[4]{0} call(%p), to_apply=%c2
  ROOT %b = f32[4]{0} call(%a), to_apply=%c2
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %a = f32[4]{0} call(%x), to_apply=%c1
  ROOT %b = f32[4]{0} call(%a), to_apply=%c1
}
""",
    "conditional branches sharing a computation": """HloModule m, is_scheduled=true
%br (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
%other (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} exponential(%p)
}
ENTRY %main (i: s32[], x: f32[4], y: f32[4]) -> f32[4] {
  %i = s32[] parameter(0)
  %x = f32[4]{0} parameter(1)
  %y = f32[4]{0} parameter(2)
  %y2 = f32[4]{0} add(%y, %y)
  ROOT %c = f32[4]{0} conditional(%i, %x, %y2, %x), branch_computations={%br, %br, %other}
}
""",
}


def analyse_everything(text: str) -> None:
    """What summary, kernels, memory, lint and report compute and render."""
    for m in hloscope.read_text(text).modules:
        s = summarize(m)
        render_summary(s)
        df = analyze_dataflow(m)
        lr = compute_live_ranges(df)
        g = kernel_graph(m, df=df, lr=lr)
        render_kernels(g)
        mem = analyze_memory(m, df=df, lr=lr, top=1 << 30)
        render_memory(mem)
        advice = advise_groups(m, graph=g, df=df, lr=lr, min_share=0)
        render_advice(m.name, advice, top=None)
        render_html(report_data(m, s, g, mem, advice))


def check_consistent(m: hloscope.Module) -> None:
    """What the analyses produce fits together: every value set holds live values, every
    value has a range inside the schedule, every kernel and group appears once."""
    df = analyze_dataflow(m)
    live_ids = {v.id for v in df.values}
    for comp in df.computations:
        for inst in comp.instructions:
            for vals in df.sets_of(inst).values():
                assert {v.id for v in vals} <= live_ids
    assert {i for i, b in enumerate(df.buffer_of) if b is not None} == live_ids
    lr = compute_live_ranges(df)
    for vid, (start, end) in lr.ranges.items():
        assert 0 <= start <= end <= lr.end_time, (vid, start, end)
    g = kernel_graph(m, df=df, lr=lr)
    keys = [(k.group, k.name) for k in g.kernels]
    assert len(keys) == len(set(keys))
    names = [grp.name for grp in g.groups]
    assert len(names) == len(set(names)) and m.entry.name not in names
    mem = analyze_memory(m, df=df, lr=lr)
    assert mem.peak_bytes is not None and mem.peak_bytes >= 0 and mem.temp_estimate_bytes >= 0


@pytest.mark.parametrize("name", list(SHARED))
def test_computations_run_from_several_places(name):
    text = SHARED[name]
    analyse_everything(text)
    check_consistent(hloscope.parse(text))


@pytest.mark.parametrize("command", ["kernels", "memory", "lint", "summary"])
def test_two_call_sites_in_a_loop_body_from_the_command_line(tmp_path, command):
    path = tmp_path / "two_calls.hlo"
    path.write_text(SHARED["two calls in a loop body, state passed through"])
    r = run_cli(command, str(path))
    assert r.returncode == 0, r.stderr


def test_two_call_sites_in_a_loop_body_report(tmp_path):
    path = tmp_path / "two_calls.hlo"
    path.write_text(SHARED["two calls in a loop body, state passed through"])
    r = run_cli("report", str(path), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_a_shared_branch_reads_every_operand_given_to_it():
    # Branches 0 and 1 both run %br, on %x and on %y2: its parameter may hold either, a
    # phi of the two (it used to read only the first branch's operand, %x).
    m = hloscope.parse(SHARED["conditional branches sharing a computation"])
    df = analyze_dataflow(m)
    (v,) = df.values_at(m.computation("br").by_name["p"])
    assert v.is_phi and v.inst.name == "p"
    (other,) = df.values_at(m.computation("other").parameters[0])
    assert other.inst.name == "x"


def test_a_shared_fusion_computation_counts_for_each_fusion():
    g = kernel_graph(hloscope.parse(SHARED["a fusion computation shared by two fusions"]))
    fused = {k.name: dict(k.fused) for k in g.kernels if k.category == "fusion"}
    assert fused == {"f1": {"negate": 1}, "f2": {"negate": 1}}


def test_nested_calls_are_groups_of_groups():
    nested = SHARED["calls nested three deep, each computation called twice"]
    g = kernel_graph(hloscope.parse(nested))
    parent = {grp.name: grp.parent for grp in g.groups}
    assert parent == {"c1": "main", "c2": "c1", "c3": "c2"}
    assert [k.name for k in g.kernels] == ["n"]


def test_same_names_in_several_computations_keep_schedule_order():
    # %s and %i are names in both the condition and the body.
    m = hloscope.parse(loop_module("  %b = f32[4]{0} multiply(%x, %x)"))
    g = kernel_graph(m)
    lr = compute_live_ranges(analyze_dataflow(m))
    times = {(i.computation.name, i.name): t for t, i in enumerate(lr.sequence)}
    assert [times[(k.group, k.name)] for k in g.kernels] == sorted(
        times[(k.group, k.name)] for k in g.kernels)


# -- odd but parseable modules ----------------------------------------------------------------


def entry(body: str, params: str = "p: f32[4]", ret: str = "f32[4]", extra: str = "",
          head: str = "HloModule m, is_scheduled=true") -> str:
    return f"{head}\n{extra}\nENTRY %main ({params}) -> {ret} {{\n{body}\n}}\n"


SUM = """%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}"""

REJECTED = {
    "get-tuple-element past the end": (entry("""  %p = f32[4]{0} parameter(0)
  %t = (f32[4]{0}, f32[4]{0}) tuple(%p, %p)
  ROOT %g = f32[4]{0} get-tuple-element(%t), index=5"""), "g reads element 5 of a 2-element tuple"),
    "get-tuple-element of an array": (entry("""  %p = f32[4]{0} parameter(0)
  ROOT %g = f32[4]{0} get-tuple-element(%p), index=0"""),
        "g reads element 0 of p, which is not a tuple"),
    "get-tuple-element index not a number": (entry("""  %p = f32[4]{0} parameter(0)
  %t = (f32[4]{0}, f32[4]{0}) tuple(%p, %p)
  ROOT %g = f32[4]{0} get-tuple-element(%t), index=x"""), "index=x, not a number"),
    "bitcast without operands": (entry("""  %p = f32[4]{0} parameter(0)
  %b = f32[4]{0} bitcast()
  ROOT %r = f32[4]{0} add(%b, %p)"""), "b .bitcast. has 0 operand"),
    "copy without operands": (entry("""  %p = f32[4]{0} parameter(0)
  %c = f32[4]{0} copy()
  ROOT %r = f32[4]{0} add(%c, %p)"""), "c .copy. has 0 operand"),
    "an operand cycle": (entry("""  %p = f32[4]{0} parameter(0)
  %a = f32[4]{0} add(%p, %b)
  %b = f32[4]{0} negate(%a)
  ROOT %r = f32[4]{0} copy(%b)"""), "operand cycle"),
    "a computation calling itself": (entry("""  %p = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} call(%p), to_apply=%f""", extra="""%f (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} call(%x), to_apply=%f
}"""), "computation f runs itself"),
    "two computations calling each other": (entry("""  %p = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} call(%p), to_apply=%f""", extra="""%g (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} call(%x), to_apply=%f
}
%f (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} call(%x), to_apply=%g
}"""), "runs itself"),
    "a while without a body": (entry("""  %p = f32[4]{0} parameter(0)
  ROOT %w = f32[4]{0} while(%p), condition=%cond""", extra="""%cond (s: f32[4]) -> pred[] {
  %s = f32[4]{0} parameter(0)
  ROOT %c = pred[] constant(false)
}"""), "w .while. has no body="),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_odd_modules_are_rejected(name):
    """The parser may reject them first (HloParseError); else the analyses name the problem."""
    text, message = REJECTED[name]
    with pytest.raises(hloscope.HloscopeError) as info:
        analyse_everything(text)
    if isinstance(info.value, hloscope.HloModelError):
        assert re.search(message, str(info.value)), str(info.value)


# The same problems made in a module the parser accepted, so that the analyses' own checks
# are tested whatever the parser rejects: (valid text, change to the model, message).
VALID_LOOP = loop_module("  %b = f32[4]{0} negate(%x)")
VALID_CALL = SHARED["called twice from the entry"]


def _set_attrs(inst: hloscope.Instruction, text: str) -> None:
    inst.attr_text = text
    inst._attrs = inst._calls = None


def _set_operands(inst: hloscope.Instruction, *names: str) -> None:
    inst.operand_names = names
    inst.computation._users = None


CORRUPTED = {
    "get-tuple-element past the end": (
        VALID_LOOP, lambda m: _set_attrs(m.computation("body").by_name["x"], "index=5"),
        "x reads element 5 of a 2-element tuple"),
    "get-tuple-element of an array": (
        VALID_LOOP, lambda m: _set_operands(m.computation("body").by_name["x"],
                                            m.computation("body").by_name["b"].name),
        "x reads element 1 of b, which is not a tuple"),
    "get-tuple-element index not a number": (
        VALID_LOOP, lambda m: _set_attrs(m.computation("body").by_name["x"], "index=one"),
        "index=one, not a number"),
    "bitcast without operands": (
        VALID_CALL, lambda m: (_set_operands(m.entry.by_name["a"]),
                               setattr(m.entry.by_name["a"], "opcode", "bitcast")),
        "a .bitcast. has 0 operand"),
    "an operand cycle": (
        VALID_CALL, lambda m: _set_operands(m.entry.by_name["a"], "b"), "operand cycle"),
    "a computation calling itself": (
        VALID_CALL, lambda m: (_set_attrs(m.computation("f").root, "to_apply=%f"),
                               _set_operands(m.computation("f").root, "p"),
                               setattr(m.computation("f").root, "opcode", "call"),
                               setattr(m, "_callers", None)),
        "computation f runs itself"),
    "a while without a body": (
        VALID_LOOP, lambda m: _set_attrs(m.entry.by_name["w"], "condition=%cond"),
        "w .while. has no body="),
    "a while with two operands": (
        VALID_LOOP, lambda m: _set_operands(m.entry.by_name["w"], "init", "init"),
        "w .while. has 2 operands"),
}


@pytest.mark.parametrize("name", list(CORRUPTED))
def test_the_analyses_check_what_they_rely_on(name):
    text, corrupt, message = CORRUPTED[name]
    m = hloscope.parse(text)
    corrupt(m)
    for analysis in (analyze_dataflow, kernel_graph, analyze_memory, advise):
        with pytest.raises(hloscope.HloModelError, match=message):
            analysis(m)


def test_a_zero_tile_dimension_is_named():
    # Whatever the parser makes of such a sharding, a per-device shape is never computed
    # by dividing by zero.
    zero = Sharding("tiled", "{devices=[0,2]0,1}", tile_dims=(0, 2), devices=(0, 1))
    with pytest.raises(hloscope.HloModelError, match="p has sharding .* zero pieces"):
        shard_shape("p", zero, hloscope.parse_shape("f32[4,4]"))


HANDLED = {
    "a tuple where an array is expected": entry("""  %p = f32[4]{0} parameter(0)
  %t = (f32[4]{0}, f32[4]{0}) tuple(%p, %p)
  %a = f32[4]{0} add(%t, %p)
  %d = f32[4]{0} dot(%t, %t), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  %s = f32[4]{0} sort(%t), dimensions={0}, to_apply=%cmp
  ROOT %f = c64[4]{0} fft(%t), fft_type=FFT, fft_length={4}""",
        extra="""%cmp (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}"""),
    "an async-start that is not a tuple": entry("""  %p = f32[4]{0} parameter(0)
  %s = f32[4]{0} async-start(%p), calls=%wrapped
  ROOT %d = f32[4]{0} async-done(%s), calls=%wrapped""", extra="""%wrapped (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x)
}"""),
    "a loop whose body and condition take other shapes": entry("""  %p = f32[4]{0} parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[4]{0}) tuple(%z, %p)
  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body
  ROOT %r = f32[4]{0} get-tuple-element(%w), index=1""", extra="""%cond (s: (s32[])) -> pred[] {
  %s = (s32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %c = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}
%body (s: (s32[], f32[4], f32[8])) -> (s32[], f32[4], f32[8]) {
  %s = (s32[], f32[4]{0}, f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[4]{0} get-tuple-element(%s), index=1
  %y = f32[8]{0} get-tuple-element(%s), index=2
  ROOT %t = (s32[], f32[4]{0}, f32[8]{0}) tuple(%i, %x, %y)
}"""),
    "a loop on an array with a tuple body": entry("""  %p = f32[4]{0} parameter(0)
  %w = f32[4]{0} while(%p), condition=%cond, body=%body
  ROOT %r = f32[4]{0} negate(%w)""", extra="""%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]{0}) parameter(0)
  ROOT %c = pred[] constant(false)
}
%body (s: f32[4]) -> (s32[], f32[4]) {
  %s = f32[4]{0} parameter(0)
  %z = s32[] constant(0)
  ROOT %t = (s32[], f32[4]{0}) tuple(%z, %s)
}"""),
    "a parameter number repeated": entry("""  %p = f32[4]{0} parameter(0)
  %q = f32[4]{0} parameter(0)
  ROOT %r = f32[4]{0} add(%p, %q)""", params="p: f32[4], q: f32[4]"),
    "a parameter number skipped": entry("""  %p = f32[4]{0} parameter(0)
  %q = f32[4]{0} parameter(5)
  ROOT %r = f32[4]{0} add(%p, %q)""", params="p: f32[4], q: f32[4]"),
    "a called computation's parameter number past its operands": entry(
        """  %p = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} call(%p), to_apply=%f""", extra="""%f (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(3)
  ROOT %n = f32[4]{0} negate(%x)
}"""),
    "a sharding with a zero tile dimension": entry(
        """  %p = f32[4]{0} parameter(0), sharding={devices=[0]0}
  ROOT %r = f32[4]{0} negate(%p), sharding={devices=[2,0]0,1}""",
        head="HloModule m, num_partitions=2"),
    "replica groups that are not numbers": entry("""  %p = f32[4]{0} parameter(0)
  ROOT %r = f32[4]{0} all-reduce(%p), replica_groups={{a,b},{c}}, to_apply=%sum""",
                                                  extra=SUM, head="HloModule m, replica_count=2"),
    "iota replica groups that do not fit": entry("""  %p = f32[4]{0} parameter(0)
  ROOT %r = f32[4]{0} all-gather(%p), replica_groups=[2,2]<=[5], dimensions={0}""",
                                                  head="HloModule m, replica_count=4"),
    "a fusion computation fusing itself": entry("""  %p = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} fusion(%p), kind=kLoop, calls=%f""", extra="""%f (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} fusion(%x), kind=kLoop, calls=%f
}"""),
    "a conditional with fewer operands than branches": entry(
        """  %i = s32[] parameter(0)
  ROOT %c = f32[4]{0} conditional(%i), branch_computations={%b0, %b1}""", params="i: s32[]",
        extra="""%b0 (x: f32[4]) -> f32[4] {
  ROOT %x = f32[4]{0} parameter(0)
}
%b1 (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x)
}"""),
    "in-place ops without their operands": entry("""  %p = f32[4]{0} parameter(0)
  %d = f32[4]{0} dynamic-update-slice()
  ROOT %c = f32[4]{0} custom-call(%d), custom_call_target="foo",
      output_to_operand_aliasing={{5}: (9, {3})}"""),
    "aliases naming outputs and parameters that do not exist": entry(
        """  %p = f32[4]{0} parameter(0)
  ROOT %r = f32[4]{0} negate(%p)""",
        head="HloModule m, is_scheduled=true, "
             "input_output_alias={ {3}: (7, {2}, may-alias) }"),
    "a shape too large for a float": entry("""  %p = f32[4]{0} parameter(0)
  %b = f32[{0}]{{0}} broadcast(%p), dimensions={{0}}
  %e = f32[{0}]{{0}} exponential(%b)
  ROOT %s = f32[{0}]{{0}} sort(%e), dimensions={{0}}, to_apply=%cmp""".replace(
        "{0}", "9" * 400).replace("{{", "{").replace("}}", "}"), ret="f32[" + "9" * 400 + "]",
        extra="""%cmp (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}"""),
}


@pytest.mark.parametrize("name", list(HANDLED))
def test_odd_modules_are_analysed_or_rejected_cleanly(name):
    try:
        analyse_everything(HANDLED[name])
    except hloscope.HloscopeError:
        pass


def test_calls_nested_thousands_deep_need_no_deep_stack():
    n = 3000
    comps = []
    for i in range(n):
        inner = (f"  ROOT %n = f32[4]{{0}} call(%x), to_apply=%c{i + 1}" if i + 1 < n
                 else "  ROOT %n = f32[4]{0} negate(%x)")
        comps.append(f"%c{i} (x: f32[4]) -> f32[4] {{\n  %x = f32[4]{{0}} parameter(0)\n"
                     f"{inner}\n}}")
    text = entry("  %p = f32[4]{0} parameter(0)\n  %c = f32[4]{0} call(%p), to_apply=%c0\n"
                 "  ROOT %r = f32[4]{0} negate(%c)", extra="\n".join(reversed(comps)))
    analyse_everything(text)
    g = kernel_graph(hloscope.parse(text))
    assert len(g.groups) == n
    assert "c2999" in render_svg(layout_graph(g))  # the picture nests 3,000 frames


# -- shapes that took quadratic time -----------------------------------------------------------


def loops_sharing_a_body(k: int) -> str:
    """`k` while loops in a row sharing one body and one condition."""
    state = "(s32[], f32[8]{0})"
    lines = [loop_module("  %b = f32[4]{0} sine(%x)").split("ENTRY")[0].replace(
        "f32[4]", "f32[8]"), "ENTRY %main (p: f32[8]) -> f32[8] {",
             "  %r0 = f32[8]{0} parameter(0)", "  %zero = s32[] constant(0)"]
    for i in range(1, k + 1):
        lines.append(f"  %init{i} = {state} tuple(%zero, %r{i - 1})")
        lines.append(f"  %w{i} = {state} while(%init{i}), condition=%cond, body=%body")
        lines.append(f"  {'ROOT ' if i == k else ''}%r{i} = f32[8]{{0}} "
                     f"get-tuple-element(%w{i}), index=1")
    return "\n".join(lines) + "\n}\n"


def wide_tuple(k: int) -> str:
    """A `k`-element tuple parameter, a `k`-output fusion and a `k`-element result."""
    elem = "f32[8]{0}"
    tup = "(" + ", ".join([elem] * k) + ")"
    fused = [f"%fused ({', '.join(f'q{i}: f32[8]' for i in range(k))}) -> {tup} {{"]
    fused += [f"  %q{i} = {elem} parameter({i})" for i in range(k)]
    fused += [f"  %m{i} = {elem} multiply(%q{i}, %q{i})" for i in range(k)]
    fused += [f"  ROOT %mt = {tup} tuple({', '.join(f'%m{i}' for i in range(k))})", "}"]
    body = [f"  %p = {tup} parameter(0)"]
    body += [f"  %g{i} = {elem} get-tuple-element(%p), index={i}" for i in range(k)]
    body += [f"  %f = {tup} fusion({', '.join(f'%g{i}' for i in range(k))}), kind=kLoop, "
             "calls=%fused"]
    body += [f"  %o{i} = {elem} get-tuple-element(%f), index={i}" for i in range(k)]
    body += [f"  ROOT %r = {tup} tuple({', '.join(f'%o{i}' for i in range(k))})"]
    return entry("\n".join(body), params=f"p: {tup}", ret=tup, extra="\n".join(fused))


def live_scalars(k: int) -> str:
    """`k` scalar temporaries all live at once (each alone in 64 aligned bytes)."""
    body = ["  %p = f32[] parameter(0)"]
    body += [f"  %t{i} = f32[] add(%p, %p)" for i in range(k)]
    acc = "%p"
    for i in range(k):
        body.append(f"  {'ROOT ' if i == k - 1 else ''}%a{i} = f32[] add({acc}, %t{i})")
        acc = f"%a{i}"
    return entry("\n".join(body), params="p: f32[]", ret="f32[]")


@pytest.mark.parametrize("make,small,seconds", [
    (loops_sharing_a_body, 150, 30.0), (wide_tuple, 250, 30.0), (live_scalars, 500, 30.0)])
def test_no_quadratic_time(make, small, seconds):
    """Eight times the size takes well under 64 times as long (and little time at all)."""

    def timed(k: int) -> float:
        m = hloscope.parse(make(k))
        start = time.perf_counter()
        analyze_memory(m)
        kernel_graph(m)
        return time.perf_counter() - start

    timed(small)  # warm up
    t1 = min(timed(small) for _ in range(2))
    t8 = timed(8 * small)
    assert t8 < seconds
    assert t8 < 24 * max(t1, 0.01), (t1, t8)


def test_damaged_dimensions_are_a_model_error_not_a_value_error():
    # Found by benchmarks/fuzz.py (seed 12): a transpose whose dimensions= is garbage
    # reached int() in the bitcast-transpose check.
    text = ("HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n"
            "  ROOT t = f32[3,2]{1,0} transpose(p), dimensions={1({({})}),0}\n}\n")
    m = hloscope.read_text(text).module
    with pytest.raises(hloscope.HloscopeError, match="not a list of integers"):
        hloscope.kernel_graph(m)
