"""Bad input: one clear error, located where possible; never a hang or a traceback."""

from __future__ import annotations

import os
import time

import pytest

import hloscope
from conftest import GENERATED, TRUNCATED, run_cli

GOOD = (GENERATED / "f_for_loop.hlo").read_text()


def test_empty_file(tmp_path):
    p = tmp_path / "empty.hlo"
    p.write_text("")
    with pytest.raises(hloscope.HloSourceError, match="empty"):
        hloscope.read(p)
    p.write_text("\n   \n\t\n")
    with pytest.raises(hloscope.HloSourceError, match="empty"):
        hloscope.read(p)


def test_binary_file(tmp_path):
    p = tmp_path / "module.pb"
    p.write_bytes(b"\x08\x01\x12\x00" + os.urandom(4000))
    with pytest.raises(hloscope.HloSourceError, match="binary"):
        hloscope.read(p)
    q = tmp_path / "noise.bin"
    q.write_bytes(bytes(range(1, 256)) * 40)  # binary without NUL bytes
    with pytest.raises(hloscope.HloSourceError, match="binary"):
        hloscope.read(q)


def test_gzip_file(tmp_path):
    import gzip

    p = tmp_path / "m.hlo.gz"
    p.write_bytes(gzip.compress(GOOD.encode()))
    with pytest.raises(hloscope.HloSourceError, match="gunzip"):
        hloscope.read(p)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(hloscope.HloSourceError, match="cannot read"):
        hloscope.read(tmp_path / "nope.hlo")
    with pytest.raises(hloscope.HloSourceError, match="folder"):
        hloscope.read(tmp_path)


def test_garbage_text():
    with pytest.raises(hloscope.HloSourceError, match="no HLO module"):
        hloscope.read_text("hello\nworld\n" * 100)


def test_stablehlo_gets_a_hint():
    with pytest.raises(hloscope.HloSourceError) as info:
        hloscope.read_text("module @jit_f {\n  func.func public @main() {\n  }\n}\n")
    assert "StableHLO" in info.value.hint


def test_header_only():
    with pytest.raises(hloscope.HloParseError, match="no computation"):
        hloscope.read_text("HloModule lonely\n")


@pytest.mark.parametrize("mutate,expect", [
    (lambda t: t.replace("%copy.6)", "%cpy.6)"), "does not define"),
    (lambda t: t.replace("f32[131072,2]{1,0} copy", "f33[131072,2]{1,0} copy"), "shape"),
    (lambda t: t.replace("calls=%fused_computation", "calls=%nowhere"), "does not define"),
    (lambda t: t.replace("ROOT %tuple.3", "ROOT %tuple.3x").replace(
        "%wrapped_add = ", "ROOT %wrapped_add = "), "more than one ROOT"),
    (lambda t: t.replace("%constant.4 = s32[] constant(1)",
                         "%constant.4 = s32[] constant(1)\n  %constant.4 = s32[] constant(2)"),
     "defined twice"),
    (lambda t: t.rsplit("}", 1)[0], "closing '}'"),
    (lambda t: t.replace("parameter(0), metadata={op_name=\"x\"}", "parameter(x)"),
     "parameter number"),
])
def test_damaged_modules_are_located(mutate, expect):
    bad = mutate(GOOD)
    assert bad != GOOD
    with pytest.raises(hloscope.HloParseError, match=expect) as info:
        hloscope.read_text(bad, filename="bad.hlo")
    e = info.value
    assert e.filename == "bad.hlo"
    lines = bad.split("\n")
    assert e.line_text == lines[e.line - 1]
    assert str(e).count("^") == 1


def test_truncated_everywhere_never_crashes():
    """Cut the module after every line: a located error or a valid shorter module."""
    lines = GOOD.split("\n")
    for k in range(len(lines)):
        text = "\n".join(lines[:k])
        try:
            hloscope.read_text(text)
        except hloscope.HloscopeError as e:
            assert e.one_line()


def test_hostile_strings():
    evil = GOOD.replace('op_name="x"', 'op_name="<script>alert(1)</script>\\"onload=\\u202e\\x00"')
    m = hloscope.parse(evil)
    assert "<script>" in m.entry.by_name["x.1"].metadata.op_name
    assert hloscope.parse(m.to_text()) == m
    # Non-ASCII names are read leniently (XLA would not print them) and round-trip.
    weird = hloscope.parse(GOOD.replace("%copy.6", "%c\u00f6py.6"))
    assert "c\u00f6py.6" in weird.entry.by_name
    assert hloscope.parse(weird.to_text()) == weird


def test_control_characters_in_context_are_replaced():
    bad = GOOD.replace("%copy.6)", "%cpy\x07.6)")
    with pytest.raises(hloscope.HloParseError) as info:
        hloscope.read_text(bad)
    assert "\x07" not in info.value.get_context()


def test_very_long_line_context_is_windowed():
    long_name = "a" * 50_000
    bad = GOOD.replace("%copy.6)", f"%{long_name})")
    with pytest.raises(hloscope.HloParseError) as info:
        hloscope.read_text(bad)
    ctx = info.value.get_context()
    assert max(len(x) for x in ctx.splitlines()) < 200


def test_deep_nesting_does_not_recurse_forever():
    deep = "(" * 5000 + "f32[]" + ")" * 5000
    text = f"HloModule m\n\nENTRY e {{\n  ROOT a = {deep} parameter(0)\n}}\n"
    with pytest.raises(hloscope.HloParseError):
        hloscope.read_text(text)


def test_huge_garbage_is_refused_quickly(tmp_path):
    """100 MB of non-HLO text: a clear error within seconds (a 1 GB file is the same path)."""
    p = tmp_path / "huge.txt"
    with open(p, "w") as f:
        block = "this is not hlo at all, just a long log line\n" * 20_000
        for _ in range(110):
            f.write(block)
    t = time.perf_counter()
    with pytest.raises(hloscope.HloSourceError, match="no HLO module"):
        hloscope.read(p)
    assert time.perf_counter() - t < 60


def test_size_limit(tmp_path):
    p = tmp_path / "big.hlo"
    with open(p, "w") as f:
        f.write(GOOD)
        f.truncate(3 * 1024**3)  # a sparse 3 GiB file: refused before reading
    with pytest.raises(hloscope.HloSourceError, match="GiB"):
        hloscope.read(p)


def test_lazy_attribute_damage_is_located():
    text = GOOD.replace('backend_config={"outer_dimension_partitions":["2"]}',
                        'backend_config={"outer_dimension_partitions":["2"]]}')
    with pytest.raises(hloscope.HloParseError):
        m = hloscope.parse(text)
        for inst in m.instructions():
            inst.attributes


def test_truncated_file_error_text(truncated_only):
    with pytest.raises(hloscope.HloParseError) as info:
        hloscope.read(truncated_only)
    text = str(info.value)
    assert "lecture_06" in text and ":10:82:" in text and "hint:" in text
    damaged = hloscope.read(TRUNCATED).damaged[0]
    assert ":10:82:" in str(damaged) and "cut off" in damaged.reason


def test_an_unclosed_string_in_the_header_is_a_located_error():
    # Found by benchmarks/fuzz.py (seed 14): one byte of a header flipped to a quote.
    text = ('HloModule jit_f, entry_computation_layout={(f32[4,2]{1"0})->f32[4,2]{1,0}}\n\n'
            "ENTRY main {\n  ROOT p = f32[4,2]{1,0} parameter(0)\n}\n")
    with pytest.raises(hloscope.HloParseError, match="header's attributes are damaged") as e:
        hloscope.read_text(text)
    assert e.value.line == 1


# -- issue 31: texts that crashed a command (exit 3) or took minutes ----------------------------

SMALL = """HloModule m, entry_computation_layout={(f32[4,2]{1,0})->f32[4,2]{1,0}}

ENTRY e {
  p = f32[4,2]{1,0} parameter(0)
  ROOT n = f32[4,2]{1,0} copy(p)
}
"""


def _every_command(text: str) -> None:
    """Read `text` and run what summary, kernels, memory and lint run (as fuzz.py does)."""
    from hloscope._analysis._summary import summarize
    from hloscope._render._kernels_text import render_advice, render_kernels
    from hloscope._render._memory_text import render_memory
    from hloscope._render._text import render_summary

    for m in hloscope.read_text(text).modules:
        render_summary(summarize(m))
        g = hloscope.kernel_graph(m)
        render_kernels(g, scheduled=m.is_scheduled)
        render_memory(hloscope.analyze_memory(m))
        render_advice(m.name, hloscope.advise_groups(m, graph=g))


def test_blank_lines_before_a_module_are_not_an_empty_file(tmp_path):
    p = tmp_path / "m.hlo"
    p.write_text("\n" * 65_536 + SMALL)
    assert hloscope.read(p).module.entry.root.name == "n"
    p.write_text("\n" * 70_000)
    with pytest.raises(hloscope.HloSourceError, match="empty"):
        hloscope.read(p)


def test_deeply_nested_sharding_is_no_recursion_error():
    text = SMALL.replace("copy(p)", "copy(p), sharding=" + "{" * 20_000 + "}" * 20_000)
    _every_command(text)  # an unknown sharding, as for any form hloscope does not read
    sharding = hloscope.parse(text).entry.root.sharding
    assert sharding.kind == "unknown"
    # XLA refuses a tuple sharding inside a tuple sharding: `check` says where.
    with pytest.raises(hloscope.HloParseError) as e:
        hloscope.check_text(text)
    assert e.value.line == 5


@pytest.mark.parametrize("text", ["ROOT \n```hlo", "```hlo\nROOT", "ROOT x\n```hlo\n\n",
                                  "ROOT x\nENTRY e {"])  # the last: fuzz.py, seed 31
def test_an_unclosed_fence_with_only_root_is_a_clear_error(text):
    for strict in (False, True):
        with pytest.raises(hloscope.HloscopeError):
            hloscope.read_text(text, strict=strict)


@pytest.mark.parametrize("layout", ["{5,0}", "{1,1}", "{2,0}"])
def test_a_layout_index_past_the_rank_is_a_located_error(layout):
    text = SMALL.replace("f32[4,2]{1,0} copy", f"f32[4,2]{layout} copy")
    for strict in (False, True):
        with pytest.raises(hloscope.HloParseError, match="not an order of the dimensions") as e:
            hloscope.read_text(text, strict=strict)
        assert (e.value.line, e.value.column) == (5, 20)


@pytest.mark.parametrize("old,new", [
    ("f32[4,2]{1,0} copy", "f32[4,2]{１,０} copy"),   # full-width layout
    ("f32[4,2]{1,0} copy", "f32[４,2]{1,0} copy"),    # full-width dimension
    ("f32[4,2]{1,0} copy", "f32[٤,2]{1,0} copy"),     # Arabic-Indic dimension
    ("f32[4,2]{1,0} copy", "f32[4,2]{1_0,0} copy"),   # int() reads 1_0 as 10
    ("parameter(0)", "parameter(０)"),
    ("parameter(0)", "parameter(²)"),                 # isdigit() is true, int() refuses
    ("HloModule m,", "HloModule m, num_partitions=２,"),
])
def test_numbers_are_ascii_digits_only(old, new):
    text = SMALL.replace(old, new)
    assert text != SMALL
    for strict in (False, True):
        with pytest.raises(hloscope.HloParseError):
            hloscope.read_text(text, strict=strict)


def test_non_ascii_digits_in_attributes_do_not_crash_the_analyses():
    text = """HloModule m

ENTRY e {
  p = (f32[4]{0}, f32[4]{0}) parameter(0)
  g = f32[4]{0} get-tuple-element(p), index=１
  ROOT r = f32[4]{0} reduce-window(g, g), window={size=２}, to_apply=e
}
"""
    with pytest.raises(hloscope.HloscopeError):
        _every_command(text)


def test_stablehlo_sniffing_is_linear_in_blank_lines():
    t = time.perf_counter()
    with pytest.raises(hloscope.HloSourceError, match="no HLO module"):
        hloscope.read_text("\n" * 65_536 + "module @m")
    with pytest.raises(hloscope.HloSourceError):
        hloscope.read_text("\n" * 65_536 + " x = 1\n")
    assert time.perf_counter() - t < 10  # was 12-16 s, quadratic; now milliseconds


def test_reading_an_xla_dump_folder():
    from conftest import DATA

    hf = hloscope.read(DATA / "dumps" / "mlp_train")
    assert hf.format == "dump" and len(hf.modules) > 1
    assert all(m.filename.endswith("_optimizations.txt") for m in hf.modules)


def test_an_hlo_module_proto_in_text_format_is_named(tmp_path):
    """An HloModuleProto in protobuf text format (XLA's import tests): said so, not
    'this looks like StableHLO/MLIR'."""
    f = tmp_path / "m.hlo"
    f.write_text("# RUN: xla-translate -hlo-to-mlir-hlo %s | FileCheck %s\n"
                 "# CHECK-LABEL: module @main attributes\n\nhlo_module       {\n"
                 '  name: "main"\n  entry_computation_name: "main.3"\n  computations {\n'
                 '    name: "main.3"\n  }\n}\n')
    r = run_cli("summary", str(f))
    assert r.returncode == 2
    assert "HloModuleProto in protobuf text format" in r.stderr and "StableHLO" not in r.stderr
