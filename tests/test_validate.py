"""Text that would make an analysis wrong or loop is refused, located, before any analysis."""

from __future__ import annotations

import pytest

import hloscope

_E = "HloModule m\nENTRY e {\n%s\n}\n"


@pytest.mark.parametrize("body,line,needle", [
    ("  p = f32[] parameter(0)\n  a = f32[] add(p, c)\n  b = f32[] add(a, p)\n"
     "  c = f32[] add(b, p)\n  ROOT r = f32[] add(c, p)", 4, "cycle a -> c -> b -> a"),
    ("  p = f32[] parameter(0)\n  ROOT a = f32[] add(p, a)", 4, "cycle a -> a"),
    ("  p = (f32[], f32[]) parameter(0)\n  ROOT g = f32[] get-tuple-element(p), index=5", 4,
     "reads element 5 of p, a tuple of 2"),
    ("  ROOT g = f32[] get-tuple-element(p), index=3\n  p = (f32[]) parameter(0)", 3,
     "reads element 3 of p, a tuple of 1"),
    ("  p = f32[] parameter(0)\n  ROOT g = f32[] get-tuple-element(p), index=0", 4,
     "which is not a tuple"),
    ("  p = f32[] parameter(0)\n  ROOT g = f32[] bitcast()", 4, "bitcast takes 1 operand"),
    ("  p = f32[] parameter(0)\n  q = f32[] parameter(0)\n  ROOT g = f32[] add(p, q)", 4,
     "parameter number 0 is already p's"),
    ("  p = f32[] parameter(0)\n  ROOT s = f32[] async-start(p), calls=e", 4,
     "expect the shape to be in the form of ((operand0_shape"),
])
def test_refused_with_a_located_error(body, line, needle):
    with pytest.raises(hloscope.HloParseError) as info:
        hloscope.parse(_E % body)
    assert info.value.line == line and needle in info.value.reason


def test_a_computation_that_calls_itself():
    text = ("HloModule m\nf {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=g\n}\n"
            "g {\n  p = f32[] parameter(0)\n  ROOT w = f32[] while(p), condition=c, body=f\n}\n"
            "c {\n  p = f32[] parameter(0)\n  ROOT t = pred[] constant(true)\n}\n"
            "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=f\n}\n")
    with pytest.raises(hloscope.HloParseError, match="calls itself: f -> g -> f"):
        hloscope.parse(text)


@pytest.mark.parametrize("header,needle", [
    ("num_partitions={}", "num_partitions={} in the module header is not a count"),
    ("input_output_alias={ {}: 0 }", "input_output_alias={ {}: 0 } is not of the form"),
    ("buffer_donor={ (a, {}) }", "buffer_donor={ (a, {}) } is not of the form"),
])
def test_malformed_header_attributes(header, needle):
    with pytest.raises(hloscope.HloParseError, match=needle.replace("{", r"\{").replace(
            "(", r"\(").replace(")", r"\)").replace("}", r"\}")) as info:
        hloscope.parse(f"HloModule m, {header}\nENTRY e {{\n  ROOT p = f32[] parameter(0)\n}}\n")
    assert info.value.line == 1


def test_sizes_that_overflow_int64_are_refused():
    with pytest.raises(hloscope.HloParseError, match="overflows int64"):
        hloscope.parse(_E % "  ROOT p = f32[99999999999,99999999999,99999] parameter(0)")
    with pytest.raises(hloscope.HloParseError, match="overflows int64"):
        hloscope.parse(_E % ("  ROOT p = f32[" + "9" * 5000 + "] parameter(0)"))


def test_odd_shardings_and_replica_groups_never_crash():
    m = hloscope.parse(_E % "  ROOT p = f32[2] parameter(0), sharding={devices=[0]0,1}")
    assert m.entry.root.sharding.kind == "unknown"
    with pytest.raises(hloscope.HloscopeError, match="not a device number"):
        hloscope.parse_replica_groups("{{a,b}}")
    with pytest.raises(hloscope.HloscopeError, match="span"):
        hloscope.parse_replica_groups("mesh['a'=100000,'b'=100000] {'a'}")


def test_layout_constraints_without_layouts_are_read_as_xla_reads_them():
    """XLA's parser fills missing layouts (jaxlib 0.10.2 accepts this module from XLA's
    MLIR import tests); `check` refused it: 'Operand layout constraint shape f32[3,3] for
    operand 0 does not have a layout'."""
    from hloscope._sources._reader import check_text

    text = ("HloModule Cholesky\nENTRY main {\n  %param = f32[3,3] parameter(0)\n"
            "  ROOT %custom-call = (f32[3,3], f32[3], s32[]) custom-call(f32[3,3] %param),\n"
            "    custom_call_target=\"__cusolver$cholesky\", operand_layout_constraints="
            "{f32[3,3]}, backend_config=\"{\\\"lower\\\":true}\"\n}\n")
    m = check_text(text, filename="t.hlo").module
    assert m.entry.root.opcode == "custom-call"
