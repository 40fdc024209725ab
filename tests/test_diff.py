"""Diffs of program versions: seed 004's changes in words, and renaming gives nothing."""

from __future__ import annotations

import json
import random
import re

import pytest
from conftest import GENERATED, ROOT, check_golden, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_memory_properties import scheduled_modules

import hloscope


def diff(a: str, b: str):
    return hloscope.diff_modules(hloscope.read(GENERATED / f"{a}.hlo").module,
                                 hloscope.read(GENERATED / f"{b}.hlo").module)


def test_for_loop_becomes_one_kernel():
    d = diff("f_for_loop", "f_for_unrolled")
    assert (len(d.a.kernels), len(d.b.kernels)) == (5, 1)
    assert d.headline[0] == ("the loop while.5 (3 kernels per iteration, its state of 1.00 MiB "
                             "kept in memory) is gone")
    assert "5 kernels became 1" in d.headline
    assert sum(t["bytes"] for t in d.temporaries_removed) == 1048576 + 8
    assert [f.rule for f in d.findings_gone] == ["HS105"]


def test_sum_jax_two_kernels_and_a_temporary_become_one_kernel():
    d = diff("f_sum_jax", "f_sum_explicit")
    assert "2 kernels became 1" in d.headline
    assert [(t["value"], t["bytes"]) for t in d.temporaries_removed] == [
        ("concatenate_convert_fusion{}", 1048576)]
    assert (d.peak_a - d.peak_b) == 1048576
    assert any("1 array between kernels (1.00 MiB) is gone" in line for line in d.headline)


def test_recalc_vs_stored_same_structure_math_changed():
    d = diff("f_recalc", "f_stored")
    assert not d.removed and not d.added
    assert d.headline[0].startswith("the same structure: 2 kernels and 1 array")
    assert d.math_lost == (("exponential", 1),) and d.math_gained == (("sine", 1),)
    math = next(line for line in d.headline if line.startswith("the math changed"))
    assert "exponential (in ynn_fusion: jit(f)/exp" in math
    assert "became sine (in power_sine_fusion: jit(f)/sin" in math


def _shuffle_names(module: hloscope.Module, seed: int) -> str:
    text = module.to_text()
    comps = {c.name for c in module.computations}
    names = [i.name for i in module.instructions() if i.name not in comps]
    perm = names[:]
    random.Random(seed).shuffle(perm)
    mapping = dict(zip(names, perm))
    return re.sub(r"%([\w.\-]+)", lambda m: "%" + mapping.get(m.group(1), m.group(1)), text)


@pytest.mark.parametrize("path", sorted(p for p in GENERATED.glob("*.hlo")
                                        if not p.name.endswith(".before.hlo")),
                         ids=lambda p: p.stem)
def test_a_module_against_itself_with_names_shuffled_is_empty(path):
    m = hloscope.read(path).module
    shuffled = hloscope.parse(_shuffle_names(m, 7))
    assert [i.name for i in shuffled.entry.instructions] != [i.name for i in m.entry.instructions] \
        or len(m.entry.instructions) < 3
    d = hloscope.diff_modules(m, shuffled)
    assert d.is_empty, d.headline
    assert d.headline == (
        "no difference but names: the same kernels, arrays, peak and collectives",)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduled_modules(), st.integers(0, 1000))
def test_renaming_never_shows_up(text, seed):
    m = hloscope.read_text(text).module
    assert hloscope.diff_modules(m, hloscope.parse(_shuffle_names(m, seed))).is_empty




@pytest.mark.parametrize("a,b", [("f_for_loop", "f_for_unrolled"), ("f_sum_jax", "f_sum_explicit"),
                                 ("f_recalc", "f_stored")])
def test_diff_text_golden(a, b):
    r = run_cli("diff", str(GENERATED / f"{a}.hlo"), str(GENERATED / f"{b}.hlo"))
    assert r.returncode == 0, r.stderr
    check_golden(f"diff/{a}__{b}.txt", r.stdout)


def test_diff_json_documented_and_bad_input(tmp_path):
    r = run_cli("diff", "--json", str(GENERATED / "f_recalc.hlo"), str(GENERATED / "f_stored.hlo"))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["schema"] == "hloscope.diff/1" and data["empty"] is False
    doc = (ROOT / "docs" / "json.md").read_text()
    for key in list(data) + list(data["kernels"]) + list(data["kernels"]["changed"][0]):
        assert f"`{key}`" in doc, f"docs/json.md does not document {key}"
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  ROOT x = f32[ parameter(0)\n}\n")
    r = run_cli("diff", str(bad), str(GENERATED / "f_stored.hlo"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and ":4:" in r.stderr
