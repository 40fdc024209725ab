"""Everything XLA's parser reads, read the same way: the forms beyond one line per instruction."""

from __future__ import annotations

import json

import pytest

import hloscope
from conftest import DATA

CASES = json.loads((DATA / "xla_parser" / "cases.json").read_text())["cases"]


def _read(text: str) -> hloscope.Module:
    m = hloscope.read_text(text, filename="t.hlo").module
    assert hloscope.parse(m.to_text()) == m  # every form round-trips
    return m


def test_comments_anywhere():
    m = _read("HloModule m // a module\n// between\n/* block\n   comment */\n"
              "ENTRY e { // open\n  a = f32[2] parameter(0) // trailing\n"
              "  /* inside */ b = f32[2] add(a, a)\n  ROOT c = f32[2] multiply(b, /* x */ a)  // end\n"
              "} // after\n")
    assert [i.name for i in m.entry] == ["a", "b", "c"]
    assert m.entry.root.operand_names == ("b", "a")


def test_a_literal_attribute_after_a_comment():
    """`literal=s32[] 1` (a shape, a space, the literal) read where a comment sends the
    reader to XLA's token grammar (XLA's MLIR import test; every command refused it)."""
    m = _read("HloModule m\nENTRY main {\n  a = f32[2,3] parameter(0)\n  // c\n"
              "  ROOT r = f32[2,3] custom-call(a), custom_call_target=\"SetBound\", "
              "literal=s32[] 1, backend_config=\"x\"\n}\n")
    r = m.entry.root
    assert r.opcode == "custom-call" and r.attr("literal") == "s32[] 1"
    assert r.attr("backend_config") in ('"x"', "x")


def test_statements_continued_over_lines():
    text = ('HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[3,3]{1,0}},\n'
            '  frontend_attributes={a="b"}\n\nENTRY %main\n    (p: f32[2,3]) -> f32[3,3] {\n'
            '  %p = f32[2,3]{1,0} parameter(0)\n  ROOT %d = f32[3,3]{1,0} dot(%p, %p),\n'
            '      lhs_contracting_dims={0},\n      rhs_contracting_dims={0},\n'
            '      backend_config={\n        "operation_queue_id": "0",\n'
            '        "wait_on_operation_queues": []\n      }\n}\n')
    m = _read(text)
    assert m.frontend_attributes == {"a": "b"}
    d = m.entry.root
    assert d.line == 7 and d.attributes["rhs_contracting_dims"] == "{0}"
    assert d.backend_config == {"operation_queue_id": "0", "wait_on_operation_queues": []}
    assert m.entry.signature == "(p: f32[2,3]) -> f32[3,3]"


@pytest.mark.parametrize("text", [
    "    HloModule m\n    ENTRY e {\n      a = f32[2] parameter(0)\n      ROOT b = f32[2] negate(a)\n    }\n",
    "HloModule m\r\rENTRY e {\r  a = f32[2] parameter(0)\r  ROOT b = f32[2] negate(a)\r}\r",
    "HloModule m\r\nENTRY e {\r\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] negate(a)\r\n}\r\n",
    "HloModule m\nENTRY e { a = f32[2] parameter(0) ROOT b = f32[2] negate(a) }\n",
], ids=["indented", "cr-only", "mixed-crlf", "one-line"])
def test_layouts_of_text(text):
    m = _read(text)
    assert m.entry.root.opcode == "negate" and m.entry.root.line in (1, 2, 4, 5)


def test_inline_computation_and_inferred_shape():
    m = _read("HloModule m\nENTRY e {\n  a = f32[8] parameter(0)\n  z = f32[] constant(0)\n"
              "  ROOT r = reduce(a, z), dimensions={0}, to_apply={\n    x = f32[] parameter(0)\n"
              "    y = f32[] parameter(1)\n    ROOT s = f32[] add(x, y)\n  }\n}\n")
    r = m.entry.root
    assert str(r.shape) == "f32[]" and r.called_computation_names == ("_",)
    assert m.computation("_").root.opcode == "add"


def test_nested_instructions_are_named_as_xla_names_them():
    m = _read("HloModule test\nENTRY test {\n  ROOT root = add(f32[10] parameter(0), "
              "multiply(f32[10] parameter(1), f32[10] parameter(2)))\n}")
    assert [i.name for i in m.entry] == ["parameter.anon", "parameter.anon.1",
                                         "parameter.anon.2", "multiply.anon", "root"]


def test_compact_tuple_elements_are_get_tuple_elements():
    m = _read("HloModule test\nENTRY test {\n  p0 = (f32[10], (f32[20], f32[30])) parameter(0)\n"
              "  ROOT root = ((f32[20], f32[30]), f32[20]) tuple((f32[20], f32[30]) %p0#1, "
              "f32[20] %p0#1#0)\n}")
    assert m.entry.root.operand_names == ("p0_1", "p0_1_0")
    gte = m.entry.by_name["p0_1_0"]
    assert gte.opcode == "get-tuple-element" and gte.operand_names == ("p0_1",)
    assert gte.attributes["index"] == "0" and str(gte.shape) == "f32[20]"


def test_async_shorthand_is_desugared_as_xla_does():
    text = ("HloModule m\n\nENTRY %e (p0: f32[10]) -> f32[20] {\n  %p0 = f32[10]{0} parameter(0)\n"
            "  %s = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(f32[10]{0} %p0), "
            'custom_call_target="foo"\n'
            "  %u = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(%s)\n"
            "  ROOT %d = f32[20]{0} custom-call-done(%u)\n}\n")
    m = _read(text)
    s, u, d = (m.entry.by_name[n] for n in "sud")
    assert (s.opcode, u.opcode, d.opcode) == ("async-start", "async-update", "async-done")
    assert s.called_computation_names == u.called_computation_names == ("async_wrapped",)
    wrapped = m.computation("async_wrapped")
    assert wrapped.origin == "async" and wrapped.root.custom_call_target == "foo"
    assert s.async_wrapped_opcode == "custom-call"
    assert "custom-call-start(%p0)" in m.to_text() and "async_wrapped" not in m.to_text()


def test_text_without_a_header():
    m = hloscope.read_text("Some prose first.\n\nENTRY main {\n  p = f32[4] parameter(0)\n"
                           "  ROOT n = f32[4] negate(p)\n}\n").module
    assert m.name == "module_main" and m.headerless
    bare = hloscope.read_text("%f (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n"
                              "  ROOT %n = f32[] negate(%p)\n}\n").module
    assert bare.name == "module_f" and bare.entry.name == "f"


def test_a_header_holding_a_module_in_a_string():
    case = next(c for c in CASES if c["id"] == "roundtrip_long/OriginalValueRecoveryTable")
    hf = hloscope.read_text(case["text"])
    assert [m.name for m in hf.modules] == ["module"]
    assert "HloModule recovery_module" in hf.module.attributes["origin_recovery_table"]


def test_duplicate_names_across_computations_are_made_unique_as_xla_does():
    m = _read("HloModule m\nc {\n  p0 = f32[] parameter(0)\n  ROOT n = f32[] negate(p0)\n}\n"
              "ENTRY e {\n  p0 = f32[] parameter(0)\n  ROOT r = f32[] call(p0), to_apply=c\n}\n")
    assert [i.name for i in m.entry] == ["p0.1", "r"]
    assert m.entry.root.operand_names == ("p0.1",)


@pytest.mark.parametrize("case", [c for c in CASES if c["expect"] == "valid"],
                         ids=lambda c: c["id"])
def test_xla_parser_valid_cases_are_read_and_checked(case):
    m = hloscope.read_text(case["text"], filename=case["id"]).module
    assert hloscope.parse(m.to_text()) == m
    hloscope.check_text(case["text"], filename=case["id"])


@pytest.mark.parametrize("case", [c for c in CASES if c["expect"] == "error"],
                         ids=lambda c: c["id"])
def test_xla_parser_error_cases_are_rejected_where_xla_rejects_them(case):
    with pytest.raises(hloscope.HloParseError) as info:
        hloscope.check_text(case["text"], filename=case["id"])
    e = info.value
    jax_line = (case["jaxlib"] or {}).get("line")
    newer = not all(s in ((case["jaxlib"] or {}).get("message") or "")
                    for s in case["error_substrings"])
    if jax_line is not None and not newer:
        assert e.line == jax_line, str(e)
    assert e.get_context().splitlines()[-1].strip() == "^"


def test_a_header_after_other_text_on_its_line():
    """A test's log printing ``name HLO graph f HloModule pjit_f, ...`` on one line: each
    such module is read (one of 16 was, under a made-up name, before), located at its line."""
    module = ("ENTRY %main.5 (p: f32[2]) -> f32[2] {\n"
              "  %p = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(f32[2]{0} %p)\n}\n")
    text = ("collected 2 items\n"
            "tests/test_a.py HLO graph f HloModule pjit_f, is_scheduled=true, "
            "num_partitions=1\n\n" + module + "\nPASSED\n"
            "The HLO graph is HloModule jit_g\n\n" + module.replace("main.5", "main.6")
            + "\nAll gathered True\n")
    f = hloscope.read_text(text, filename="log.txt")
    assert [m.name for m in f.modules] == ["pjit_f", "jit_g"]
    assert f.modules[0].is_scheduled and f.modules[0].first_line == 2
