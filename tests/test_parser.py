"""The parser on the forms users hold: both printing styles, logs, reports, notebooks."""

from __future__ import annotations

import pytest

import hloscope
from conftest import GENERATED, SEEDS

NO_SIGIL = """HloModule pjit_dot.83

ENTRY main.7 {
  Arg_0.1 = f32[8,8]{1,0} parameter(0), sharding={devices=[8,1]0,1,2,3,4,5,6,7}
  Arg_1.2 = s32[8,1]{1,0} parameter(1), sharding={replicated}
  convert.3 = f32[8,1]{1,0} convert(Arg_1.2)
  dot.4 = f32[8,1]{1,0} dot(Arg_0.1, convert.3), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tuple.5 = (f32[8,1]{1,0}) tuple(dot.4)
  ROOT get-tuple-element.6 = f32[8,1]{1,0} get-tuple-element(tuple.5), index=0
}
"""


def test_no_sigil_style():
    m = hloscope.parse(NO_SIGIL)
    dot = m.entry.by_name["dot.4"]
    assert [o.name for o in dot.operands] == ["Arg_0.1", "convert.3"]
    assert dot.attributes["lhs_contracting_dims"] == "{1}"
    assert m.entry.root.name == "get-tuple-element.6"
    assert m.entry.parameters[0].sharding.tile_dims == (8, 1)


def test_operand_shapes_without_sigils():
    text = ("HloModule m\n\nENTRY e {\n  a = f32[2,2]{1,0} parameter(0)\n"
            "  t = (f32[2,2]{1,0}, s32[]) tuple(f32[2,2]{1,0} a, s32[] c)\n"
            "  c = s32[] constant(1)\n"
            "  ROOT d = f32[2,2]{1,0} add(f32[2,2]{1,0} a, f32[2,2]{1,0} a)\n}\n")
    m = hloscope.parse(text)  # a forward reference (c) is accepted
    assert m.entry.by_name["t"].operand_names == ("a", "c")


def test_glog_prefixed_module():
    body = NO_SIGIL.splitlines()
    log = "\n".join(f"I0615 14:52:19.273297 1044120 hlo_pass.cc:{100 + k}] {line}"
                    for k, line in enumerate(body)) + "\n"
    hf = hloscope.read_text(log, filename="run.log")
    assert hf.format == "glog"
    assert hf.module.entry.root.name == "get-tuple-element.6"
    bad = log.replace("convert(Arg_1.2)", "convert(Nope)")
    with pytest.raises(hloscope.HloParseError) as info:
        hloscope.read_text(bad, filename="run.log")
    e = info.value
    assert e.line == 6
    assert e.line_text[e.column - 1 :].startswith("Nope")


def test_notebook_text_with_prose_and_several_modules():
    text = ("In [18]:\nprint(ir.as_hlo_text())\n\nType = XlaComputation\n" + NO_SIGIL
            + "\n\nIn [19]:\nsome prose that is not HLO\n\n"
            + NO_SIGIL.replace("pjit_dot.83", "second") + "\nOut[19]: done\n")
    hf = hloscope.read_text(text)
    assert hf.format == "notebook"
    assert [m.name for m in hf.modules] == ["pjit_dot.83", "second"]
    assert hf.modules[1].first_line > hf.modules[0].first_line


def test_several_modules_in_one_file():
    hf = hloscope.read_text(NO_SIGIL + "\n" + NO_SIGIL.replace("pjit_dot.83", "b"))
    assert len(hf.modules) == 2
    with pytest.raises(hloscope.HloSourceError):
        hloscope.parse(NO_SIGIL + "\n" + NO_SIGIL)


def test_stack_frames_resolve_to_source_lines():
    m = hloscope.read(GENERATED / "f_for_loop.hlo").module
    body = m.computation("fused_computation")
    mul = body.by_name["mul.2"]
    loc = mul.source
    assert (loc.file, loc.line, loc.function) == ("generate.py", 95,
                                                  "f_for_loop.<locals>.f.<locals>.<lambda>")
    # JAX repeats a frame per nested call (closed_call, while): the table says so.
    assert [f.line for f in loc.frames] == [95, 95, 95, 95, 172, 200]
    assert loc.frames[-1].function == "<module>"
    assert m.stack_frames.file_names == ("generate.py",)


def test_old_metadata_source_fields():
    m = hloscope.read(SEEDS / "lecture_05_xla_computation_dot.65.hlo").module
    gemm = m.entry.by_name["cublas-gemm.1"]
    assert gemm.custom_call_target == "__cublas$gemm"
    assert gemm.backend_config["selected_algorithm"] == "9"
    assert gemm.source.line == 5 and gemm.source.file.endswith("1430351131.py")
    assert gemm.metadata.op_name.startswith("xla_computation(dot)")


def test_header_attributes():
    m = hloscope.read(SEEDS / "fft_cont_2048_pencil8.after_opt.hlo").module
    assert m.is_scheduled and m.num_partitions == 8
    params, result = m.entry_computation_layout
    assert [str(p) for p in params] == ["f32[1024,512,2048]{2,1,0}"]
    assert str(result) == "c64[256,1024,4096]{2,1,0}"
    assert m.frontend_attributes == {"fingerprint_before_lhs": "1f224a3a5a3eab15146f1648de1a59be"}
    cc = m.entry.by_name["custom-call.4.0"]
    assert cc.custom_call_target == "pfft3d"
    assert cc.attributes["output_to_operand_aliasing"] == "{{}: (0, {})}"
    assert isinstance(cc.backend_config, str)  # binary config stays a string
    fused = m.computation("fused_broadcast").root
    assert fused.shape.byte_size == 17179869184


def test_input_output_alias_and_donors():
    text = ("HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) },"
            " buffer_donor={ (2, {}) }\n\nENTRY e {\n  a = f32[2]{0} parameter(0)\n"
            "  b = f32[2]{0} parameter(1)\n  c = f32[2]{0} parameter(2)\n"
            "  ROOT t = (f32[2]{0}, f32[2]{0}) tuple(a, b)\n}\n")
    m = hloscope.parse(text)
    assert m.input_output_alias == (((0,), 0, (), "may-alias"), ((1,), 1, (), "must-alias"))
    assert m.buffer_donors == ((2, ()),)


def test_called_computations_and_callers():
    m = hloscope.read(GENERATED / "f_for_loop.hlo").module
    w = m.entry.by_name["while.5"]
    assert w.called_computation_names == ("region_1.3", "region_0.2")
    body = m.computation("region_0.2")
    assert m.callers(body) == [w]
    assert w.backend_config["known_trip_count"] == {"n": "4"}


def test_unknown_attributes_are_kept():
    text = ("HloModule m, brand_new_header_flag={x}\n\nENTRY e {\n"
            "  a = f32[2]{0} parameter(0), future_attr=\"v\", other={1,2}\n"
            "  ROOT b = f32[2]{0} brand-new-op(a), knob=kFast\n}\n")
    m = hloscope.parse(text)
    assert m.attributes["brand_new_header_flag"] == "{x}"
    assert m.entry.by_name["a"].attributes == {"future_attr": '"v"', "other": "{1,2}"}
    assert m.entry.root.opcode == "brand-new-op"
    assert hloscope.parse(m.to_text()) == m


def test_frontend_attributes_and_execution_thread():
    text = ('HloModule m\n\n%c (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n'
            '  ROOT %n = f32[] negate(%p), frontend_attributes={_xla_stream="1",k={"a":1}}\n'
            '}, execution_thread="host"\n\nENTRY %e {\n  %a = f32[] parameter(0)\n'
            '  ROOT %r = f32[] call(%a), to_apply=%c\n}\n')
    m = hloscope.parse(text)
    c = m.computation("c")
    assert c.execution_thread == "host"
    assert c.root.frontend_attributes == {"_xla_stream": "1", "k": '{"a":1}'}
    assert m.entry.root.called_computations == (c,)
    assert hloscope.parse(m.to_text()) == m


CONTINUED_HEADER = """HloModule jit_step, is_scheduled=true
    , entry_computation_layout={(f32[4]{0})->f32[4]{0}}
    , num_partitions=1

ENTRY e {
  p = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(p)
}
"""


def test_header_attributes_continued_on_indented_lines():
    # XLA reads a header whose attributes go on at the next lines (a comma first).
    for strict in (False, True):
        m = hloscope.read_text(CONTINUED_HEADER, strict=strict).module
        assert m.name == "jit_step" and m.is_scheduled
        assert m.attributes["entry_computation_layout"] == "{(f32[4]{0})->f32[4]{0}}"
        assert m.num_partitions == 1


SPLIT_INPUT = """// RUN: hlo-opt %s --split-input-file | FileCheck %s

// CHECK: negate
ENTRY e {
  p = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(p)
}

// -----

// CHECK: abs
e {
  p = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} abs(p)
}
"""


def test_split_input_file_modules_without_headers():
    # hlo-opt's --split-input-file format: each piece between '// -----' lines is a module.
    for strict in (False, True):
        hf = hloscope.read_text(SPLIT_INPUT, strict=strict)
        assert [m.entry.root.opcode for m in hf.modules] == ["negate", "abs"]
        assert [m.first_line for m in hf.modules] == [4, 12]
