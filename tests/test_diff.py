"""Diffs of program versions: seed 004's changes in words, and renaming gives nothing."""

from __future__ import annotations

import importlib.util
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


# ---------------------------------------------------------------------------
# Variants of one function (issue 18): names inside op_names are not changes.

VARIANTS = '''
import jax
import jax.numpy as jnp


def attn(q, k, v):
    s = q @ k.T / jnp.sqrt(q.shape[-1])
    p = jax.nn.softmax(s, axis=-1)
    return p @ v


def attn_f32(q, k, v):
    s = q @ k.T / jnp.sqrt(q.shape[-1])
    p = jax.nn.softmax(s.astype(jnp.float32), axis=-1)
    return p.astype(q.dtype) @ v


def attn_tanh(q, k, v):
    s = q @ k.T / jnp.sqrt(q.shape[-1])
    p = jax.nn.softmax(jnp.tanh(s), axis=-1)
    return p @ v


def _step(w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h
    return step


def rnn(h, xs, w):
    _, ys = jax.lax.scan(_step(w), h, xs)
    return jnp.sum(ys ** 2)


def rnn_remat(h, xs, w):
    _, ys = jax.lax.scan(jax.checkpoint(_step(w)), h, xs)
    return jnp.sum(ys ** 2)


def times2(x):
    return x * 2


def double(x):
    return x * 2


def times3_plus1(x):
    return x * 3 + 1


def broken(x):
    return x @ x


def proj3(x, wq, wk, wv, wo):
    x = jnp.sin(x)
    q = x @ wq
    k = x @ wk
    v = x @ wv
    return jnp.tanh(q * k + v) @ wo


def proj_fused(x, wqkv, wo):
    x = jnp.sin(x)
    q, k, v = jnp.split(x @ wqkv, 3, axis=1)
    return jnp.tanh(q * k + v) @ wo


def blur(x, k):
    return jnp.tanh(jax.scipy.signal.convolve2d(x, k, mode="same")).sum()
'''


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """The variants above as a module and as a file (for the CLI)."""
    import importlib.util

    path = tmp_path_factory.mktemp("variants") / "variants.py"
    path.write_text(VARIANTS)
    spec = importlib.util.spec_from_file_location("_hloscope_test_variants", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.PATH = path
    return mod


def _qkv(dtype="float32"):
    import jax.numpy as jnp

    q = jnp.zeros((128, 64), dtype)
    return q, q, q


def test_attention_and_one_more_operation_lists_only_that_kernel(variants):
    d = hloscope.diff(variants.attn, variants.attn_tanh, *_qkv())
    assert d.function_names == ("jit(attn)", "jit(attn_tanh)")
    assert d.headline[0] == ("op_names compared without the function names "
                             "jit(attn) / jit(attn_tanh)")
    assert not d.removed and not d.added
    assert [(c.gained, c.lost) for c in d.changed] == [((("tanh", 1),), ())]
    assert d.matched == len(d.a.kernels) == len(d.b.kernels) == 5
    assert d.op_name_changed == 0 and not d.peak_removed and not d.peak_added
    assert not d.findings_gone and not d.findings_new and not d.findings_changed
    assert d.math_gained == (("tanh", 1),) and not d.math_lost


def test_kernels_of_one_shape_pair_by_place_in_the_code(variants):
    """Q, K and V projections fused into one: the three are removed, and the output
    projection (the same shape and inputs as each of them) is matched with B's, by its
    source line, not taken by the first projection in order (a new user's diff listed
    the output projection removed)."""
    import jax
    import jax.numpy as jnp

    from hloscope._analysis._diff import diff_modules

    def module(fn, *shapes):
        args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
        return hloscope.read_text(jax.jit(fn).lower(*args).compile().as_text()).modules[0]

    a = module(variants.proj3, (64, 32), (32, 32), (32, 32), (32, 32), (32, 32))
    b = module(variants.proj_fused, (64, 32), (32, 96), (32, 32))
    d = diff_modules(a, b)
    line = {k.name: int(k.source.rpartition(":")[2]) for k in d.a.kernels if k.source}
    wo = max(line.values())  # the output projection's line, the last
    removed = {line.get(r["name"]) for r in d.removed if "dot" in r["fused"] or
               r["category"] == "matmul"}
    assert wo not in removed and removed, (removed, wo)


def test_a_kernel_of_one_shape_doing_other_work_is_said_so(variants):
    """A convolution of the same output shape with a 3x3 window instead of 9x9 does other
    work, not "the same work on other inputs" (a new user's blur: 169.87 M -> 18.87 M
    flops was called the same work); math only gained is said so, not "nothing
    became"."""
    import jax
    import jax.numpy as jnp

    from hloscope._analysis._diff import diff_modules

    def module(fn, *shapes):
        args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
        return hloscope.read_text(jax.jit(fn).lower(*args).compile().as_text()).modules[0]

    d = diff_modules(module(variants.blur, (64, 64), (9, 9)),
                     module(variants.blur, (64, 64), (3, 3)))
    assert "1 kernel of the same kind and shape does other work (e.g. convolution: " \
           "663.55 k -> 73.73 k flops)" in d.headline
    assert not any("the same work on other inputs" in w for w in d.headline)
    d = diff_modules(module(variants.times2, (8,)), module(variants.times3_plus1, (8,)))
    assert not any("nothing" in w for w in d.headline)


def test_rename_only_is_empty(variants):
    x = _qkv()[0]
    d = hloscope.diff(variants.times2, variants.double, x)
    assert d.is_empty
    assert d.headline == ("no difference but names: the same kernels, arrays, peak and "
                          "collectives",
                          "op_names compared without the function names jit(times2) / "
                          "jit(double)")
    assert d.to_dict()["function_names"] == {"a": "jit(times2)", "b": "jit(double)"}
    # An f32 upcast of f32 values changes nothing but the name.
    assert hloscope.diff(variants.attn, variants.attn_f32, *_qkv()).is_empty


def test_one_operation_changed_and_memory_figures(variants):
    x = _qkv()[0]
    d = hloscope.diff(variants.times2, variants.times3_plus1, x)
    assert len(d.changed) == 1 and not d.removed and not d.added
    assert ("add", 1) in d.changed[0].gained
    # Every matched pair is in `pairs`, which a measured-time diff pairs by too: the
    # changed kernel's row is one row, A's kernel beside B's, not one removed, one added.
    assert len(d.pairs) == d.matched and (d.changed[0].a, d.changed[0].b) in d.pairs
    from types import SimpleNamespace as NS

    from hloscope._profile._diff import time_diff

    def times(graph, seconds):
        by = {k.name: NS(median=seconds) for k in graph.kernels}
        return NS(step=seconds * len(by), steps=(), by_name=lambda: by,
                  kernels=list(by.values()))

    td = time_diff(d.a, times(d.a, 1e-6), d.b, times(d.b, 2e-6), d.pairs, d.same_work)
    assert (d.changed[0].a, d.changed[0].b, 1e-6, 2e-6) in td.rows
    assert len(td.rows) == d.matched
    # the control: the kernels left alone, not the changed one
    assert (d.changed[0].a, d.changed[0].b) not in d.same_work
    assert td.control[0] == len(d.same_work) == d.matched - len(d.changed) - len(d.resized)
    keys = [r["key"] for r in d.figures]
    # hloscope's figures, XLA's from its dumps and memory_analysis(), the footprint.
    for key in ("live_range_peak", "timeline_max", "arguments", "outputs", "constants",
                "temp_estimate", "xla_live_range_peak", "xla_temp",
                "memory_analysis.temp_size_in_bytes",
                "memory_analysis.peak_memory_in_bytes", "allocation"):
        assert key in keys, key
    peak = next(r for r in d.figures if r["key"] == "live_range_peak")
    assert (peak["a"], peak["b"], peak["change"]) == (65536, 65536, 0)
    # The output is live at the peak on each side, made by another operation.
    assert [(r["shape"], r["op_name"], r["bytes"]) for r in d.peak_removed] == [
        ("f32[128,64]{1,0}", "jit(times2)/mul", 32768)]
    assert [(r["shape"], r["op_name"], r["bytes"]) for r in d.peak_added] == [
        ("f32[128,64]{1,0}", "jit(times3_plus1)/add", 32768)]
    from hloscope._render._diff_html import render_diff_html

    page = render_diff_html(d)
    assert "<h2>Memory</h2>" in page and "temp_size_in_bytes" in page
    assert "jit(times3_plus1)/add" in page and "B only" in page


def test_bf16_attention_upcast_lists_only_kernels_with_other_work(variants):
    d = hloscope.diff(variants.attn, variants.attn_f32, *_qkv("bfloat16"))
    assert d.function_names == ("jit(attn)", "jit(attn_f32)")
    assert d.changed and all(c.gained or c.lost for c in d.changed)
    # XLA's temp (-32 KiB here) is reported beside the peak, which does not move.
    moved = {r["key"]: r["change"] for r in d.figures if r["change"]}
    assert "live_range_peak" not in moved
    assert moved["temp_estimate"] < 0 and moved["memory_analysis.temp_size_in_bytes"] < 0
    assert any(line.startswith("what the device needs (XLA's allocation) goes from")
               for line in d.headline)
    assert any(line.startswith("memory figures that moved: Temporaries") for line in d.headline)
    gone = {f.rule for f in d.findings_gone}
    assert not gone & {f.rule for f in d.findings_new}


def test_rnn_and_rnn_remat(variants):
    import jax
    import jax.numpy as jnp

    h, xs, w = jnp.zeros((8, 32)), jnp.zeros((16, 8, 32)), jnp.zeros((32, 32))
    ra = hloscope.inspect(jax.grad(variants.rnn, argnums=2), h, xs, w)
    rb = hloscope.inspect(jax.grad(variants.rnn_remat, argnums=2), h, xs, w)
    d = hloscope.diff(ra, rb)
    assert d.function_names == ("jit(rnn)", "jit(rnn_remat)")
    # The matched dots in the loop body moved under checkpoint's op_name: counted only.
    assert d.op_name_changed >= 1
    assert all(c.gained or c.lost for c in d.changed)
    fig = {r["key"]: r for r in d.figures}
    assert fig["live_range_peak"]["change"] < 0 and fig["temp_estimate"]["change"] < 0
    assert fig["memory_analysis.temp_size_in_bytes"]["a"] is not None
    # What moved at the peak: the scan's stacked f32[16,8,32] residuals, with bytes.
    assert sum(r["bytes"] for r in d.peak_removed) - sum(r["bytes"] for r in d.peak_added) \
        == -fig["live_range_peak"]["change"]
    assert any(r["shape"] == "f32[16,8,32]{2,1,0}" and r["bytes"] == 16384
               for r in d.peak_removed)
    # The same modules given as Modules: hloscope's figures alone.
    dm = hloscope.diff(ra.module, rb.module)
    assert not any(r["key"].startswith("memory_analysis.") for r in dm.figures)
    assert dm.headline[0] == d.headline[0]


def test_diff_of_bad_arguments(variants):
    m = hloscope.read(GENERATED / "f_recalc.hlo").module
    with pytest.raises(hloscope.HloscopeError, match="arguments only for two functions"):
        hloscope.diff(m, m, 1)
    with pytest.raises(hloscope.HloscopeError, match="cannot diff a int"):
        hloscope.diff(1, 2)


def _renamed(path, old: str, new: str, shift: int) -> hloscope.Module:
    """The module of `path` with its function renamed in every op_name, its source lines
    moved by `shift` and its instructions renamed."""
    m = hloscope.read(path).module
    text = _shuffle_names(m, 3).replace(old, new)
    text = re.sub(r"source_line=(\d+)", lambda x: f"source_line={int(x.group(1)) + shift}", text)
    return hloscope.parse(text)


@pytest.mark.parametrize("new", ["jit(f_v2)", "pjit(g)", "jit(f_v2)/jit(main)"])
def test_findings_are_matched_by_rule_and_place_not_by_names(new):
    path = GENERATED / "f_sum_jax.hlo"
    a = hloscope.read(path).module
    b = _renamed(path, "jit(f)", new, 40)
    assert {f.rule for f in hloscope.advise(a)} == {"HS101", "HS104"}
    d = hloscope.diff_modules(a, b)
    if new.endswith("jit(main)"):  # a nested jit(main) stays in the op_names: a change
        assert d.function_names == ("jit(f)", "jit(f_v2)") and d.op_name_changed == 2
        assert not d.findings_gone and not d.findings_new and not d.is_empty
        return
    assert d.function_names == ("jit(f)", new)
    assert not d.findings_gone and not d.findings_new and not d.findings_changed
    assert not d.changed and d.op_name_changed == 0 and d.is_empty, d.headline


def test_match_findings_passes():
    from hloscope._analysis._advisor import Evidence
    from hloscope._analysis._diff import _without, match_findings

    def f(rule, name, shape, op_name, source):
        return hloscope.Finding(rule, "t", "m", "s",
                                (Evidence(name, "kernel", shape, 4, op_name, source),))

    a = [f("HS101", "fusion.3", "f32[8]", "jit(attn)/dot", "p.py:4"),
         f("HS104", "fusion.1", "f32[8]", "jit(attn)/exp", "p.py:5"),
         f("HS102", "fusion.2", "f32[8]", "jit(attn)/sin", "p.py:6")]
    b = [f("HS101", "fusion.9", "f32[8]", "jit(attn_f32)/dot", "p.py:14"),  # moved code
         f("HS104", "fusion.7", "f32[16]", "jit(attn_f32)/exp", "p.py:5"),  # other shape
         f("HS103", "fusion.2", "f32[8]", "jit(attn_f32)/sin", "p.py:6")]   # other rule
    gone, new, changed = match_findings(a, b, _without("jit(attn)"), _without("jit(attn_f32)"))
    assert [x.rule for x in gone] == ["HS102"] and [x.rule for x in new] == ["HS103"]
    assert [(x.evidence[0].shape, y.evidence[0].shape) for x, y in changed] == [
        ("f32[8]", "f32[16]")]
    # Without leaving the function names out, the moved HS101 is still matched by shapes.
    gone, new, changed = match_findings(a[:1], b[:1])
    assert not gone and not new and not changed


def test_a_finding_whose_evidence_grew_is_changed_not_gone_and_new():
    """A trial: HS111 saw 20 saved values in A and 21 in B, in two files (other source
    paths), most of them the same op_names: one finding on other evidence, not one gone
    and one new (docs/diff.md says a finding is never both)."""
    from hloscope._analysis._advisor import Evidence, Saving
    from hloscope._analysis._diff import _evidence_change, match_findings

    def f(rule, ops, path, shape="f32[8]", peak=0):
        return hloscope.Finding(rule, "t", "m", "s", tuple(
            Evidence(f"v{i}", "array", shape, 4, op, f"{path}:{i}") for i, op in enumerate(ops)),
            Saving(peak_bytes=peak), place="residuals")

    ops = [f"jit(f)/jvp()/op{i}" for i in range(20)]
    a = [f("HS111", ops, "a.py", peak=3 << 20), f("HS101", ["jit(f)/x"], "a.py")]
    b = [f("HS111", ops[1:] + ["jit(f)/jvp()/concatenate", "jit(f)/jvp()/slice"], "b.py",
           peak=4 << 20),
         f("HS111", ["jit(f)/y", "jit(f)/z"], "b.py")]  # too unlike to pair: new
    gone, new, changed = match_findings(a, b)
    assert [x.rule for x in gone] == ["HS101"]
    assert [len(x.evidence) for x in new] == [2]
    assert [(len(x.evidence), len(y.evidence)) for x, y in changed] == [(20, 21)]
    said = _evidence_change(*changed[0])
    assert said.startswith("20 items (80 B) became 21 (84 B)")
    assert said.endswith("it would save 4.00 MiB of the peak, not 3.00 MiB")


def test_op_names_without_the_top_level_name():
    from hloscope._analysis._diff import _without

    strip = _without("jit(f)")
    assert strip("jit(f)/jit(main)/dot") == "jit(main)/dot"
    assert strip("jit(f)") == ""
    assert strip("jit(ff)/dot") == "jit(ff)/dot"
    assert strip("pjit(f)/dot") == "pjit(f)/dot"
    assert _without("pjit(g)")("pjit(g)/transpose(jvp())/mul") == "transpose(jvp())/mul"


def test_is_function_target(tmp_path):
    from hloscope._cli._targets import is_function_target

    hlo = tmp_path / "a:b"
    hlo.write_text("x")
    assert is_function_target("prog.py:attn") and is_function_target("pkg.mod:f")
    assert not is_function_target(str(hlo))          # an existing path is a file
    assert not is_function_target("prog.py") and not is_function_target("x.hlo")
    assert not is_function_target("dump.txt/x:1")
    assert not is_function_target("C:\\x\\y.hlo")


def test_cli_diff_two_functions(variants):
    prog = str(variants.PATH)
    r = run_cli("diff", f"{prog}:times2", f"{prog}:times3_plus1", "--arg", "f32[64,128]")
    assert r.returncode == 0, r.stderr
    assert "op_names compared without the function names jit(times2) / jit(times3_plus1)" \
        in r.stdout
    assert "Kernels: 1 matched, 0 removed, 0 added, 1 changed" in r.stdout
    assert "temp_size_in_bytes" in r.stdout and "Live at the peak in B only" in r.stdout
    r = run_cli("diff", "--json", f"{prog}:times2", f"{prog}:double", "--arg", "f32[64,128]")
    data = json.loads(r.stdout)
    assert data["empty"] is True and data["function_names"]["b"] == "jit(double)"
    assert any(x["key"] == "memory_analysis.temp_size_in_bytes" for x in data["figures"])


@pytest.mark.parametrize("args,message", [
    (["{prog}:times2", str(GENERATED / "f_stored.hlo")], "is a function and"),
    (["{prog}", "{prog}:times2"], "is a Python file, not HLO"),
    (["{prog}:times2", "{prog}:nope", "--arg", "f32[4]"], "has no 'nope'"),
    (["{prog}:times2", "{prog}:times3_plus1"], "takes 1 argument"),
    (["{prog}:times2", "{prog}:times2", "--arg", "f32[4]", "-m", "0"], "--module and --function"),
    ([str(GENERATED / "f_recalc.hlo"), str(GENERATED / "f_stored.hlo"), "--arg", "f32[4]"],
     "are for two functions"),
    (["{prog}:times2", "{prog}:broken", "--arg", "f32[64,128]"], "TypeError: dot_general"),
])
def test_cli_diff_mistakes_are_the_users(variants, args, message):
    prog = str(variants.PATH)
    r = run_cli("diff", *[a.format(prog=prog) for a in args])
    assert r.returncode == 2, r.stdout
    assert message in r.stderr and "bug in hloscope" not in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs JAX")
def test_diff_of_two_functions_takes_inspects_devices(tmp_path):
    """`diff` takes --devices (and --target, --mesh, --shard) as `inspect` does; on two
    files they are a mistake, said so (exit 2)."""
    src = tmp_path / "prog.py"
    src.write_text("import jax.numpy as jnp\n"
                   "def f(x):\n    return jnp.sin(x) * 2\n"
                   "def g(x):\n    return jnp.sin(x) * 2 + jnp.cos(x)\n")
    r = run_cli("diff", f"{src}:f", f"{src}:g", "--arg", "f32[64,8]", "--devices", "2")
    assert r.returncode == 0, r.stderr
    assert "kernels" in r.stdout
    r = run_cli("diff", str(GENERATED / "f_sum_jax.hlo"), str(GENERATED / "f_sum_explicit.hlo"),
                "--target", "h100")
    assert r.returncode == 2 and "for two functions" in r.stderr, r.stderr


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs JAX")
def test_diff_of_two_functions_of_one_name_labels_sides_by_file(tmp_path):
    for v, body in (("v1", "jnp.sin(x) * 2"), ("v2", "jnp.sin(x) * 2 + jnp.cos(x)")):
        (tmp_path / f"{v}.py").write_text(f"import jax.numpy as jnp\ndef step(x):\n"
                                          f"    return {body}\n")
    r = run_cli("diff", f"{tmp_path}/v1.py:step", f"{tmp_path}/v2.py:step", "--arg", "f32[8]")
    assert r.returncode == 0, r.stderr
    assert re.search(r"  A: \S*v1\.py:step ", r.stdout) and re.search(r"  B: \S*v2\.py:step ",
                                                                          r.stdout), r.stdout


def test_the_same_program_on_other_shapes_is_resized_not_removed_and_added(tmp_path):
    """One function compiled for two sizes: every kernel is matched as the same work on
    other shapes, the arrays between them resized, and nothing is said removed or added
    (the new-user trial: "the same structure" then "0 matched, 5 removed, 5 added")."""
    import jax
    import jax.numpy as jnp

    def chain(a, b):
        return jnp.tanh(jnp.tanh(a @ b) @ b) @ b

    paths = []
    for n in (16, 32):
        x = jnp.ones((n, n))
        p = tmp_path / f"chain{n}.hlo"
        p.write_text(jax.jit(chain).lower(x, x).compile().as_text())
        paths.append(str(p))
    r = run_cli("diff", "--json", *paths)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    k = data["kernels"]
    assert k["removed"] == [] and k["added"] == [] and k["matched"] == k["a"] == k["b"]
    assert len(k["resized"]) == k["a"] and {x["shape_b"][:11] for x in k["resized"]} == {
        "f32[32,32]{"}
    t = data["temporaries"]
    assert t["removed"] == [] and t["added"] == [] and t["resized"]
    assert all(x["bytes_b"] == 4 * x["bytes_a"] for x in t["resized"])
    text = run_cli("diff", *paths).stdout
    assert "do the same work on other shapes" in text and "0 removed, 0 added" in text


def test_a_default_layout_written_or_not_is_no_difference():
    """XLA gives a shape written without a layout the default one: the same module printed
    with and without layouts is no difference (an open-world trial: a 2019 module against
    XLA's own reprint of it read '8 kernels do the same work on other shapes')."""
    from hloscope._analysis._diff import _plain_layout

    text = "HloModule m\n\nENTRY main {\n  a = f32[4,8]{L} parameter(0)\n  b = f32[4,8]{L} " \
           "parameter(1)\n  n = f32[4,8]{L} negate(a)\n  ROOT c = f32[4,8]{L} add(n, b)\n}\n"
    plain, laid = (hloscope.parse(text.replace("{L}", x)) for x in ("", "{1,0}"))
    d = hloscope.diff_modules(plain, laid)
    assert d.is_empty and d.headline[0].startswith("no difference"), d.headline
    # another layout is a difference
    assert not hloscope.diff_modules(plain, hloscope.parse(text.replace("{L}", "{0,1}"))).is_empty
    assert _plain_layout("(f32[4,8]{1,0}, s32[]{}, bf16[2]{0:T(256)}, f32[3]{0})") == \
        "(f32[4,8], s32[], bf16[2]{0:T(256)}, f32[3])"


def test_kernels_of_other_opcodes_are_never_the_same_work():
    """An open-world trial (two torch_xla graphs): a compare was matched with a slice and an
    all-reduce with an all-gather, as 'the same work on other shapes', by op_name and line
    alone, while the same diff listed them as gone and new."""
    text = ("HloModule m\n\nENTRY main {{\n  a = f32[1,5]{{1,0}} parameter(0)\n"
            "  ROOT r = {shape} {op}, metadata={{op_name=\"xla_op\" source_file=\"r.py\" "
            "source_line=44}}\n}}\n")
    a = hloscope.parse(text.format(shape="f32[1,5]{1,0}", op="negate(a)"))
    b = hloscope.parse(text.format(shape="f32[1,4]{1,0}", op="slice(a), slice={[0:1], [0:4]}"))
    d = hloscope.diff_modules(a, b)
    assert not d.resized and not d.changed
    assert [r["name"] for r in d.removed] == ["r"] and [r["name"] for r in d.added] == ["r"]


def test_what_an_open_world_diff_left_unsaid():
    """Two versions of a distributed FFT (an open-world trial, jaxDecomp's A100 reports):
    the result came out transposed ('the same structure' was all it said), op_names that
    differ by a Python object's address only, and an all-to-all over other devices (listed
    gone and new with nothing to tell them apart)."""
    from hloscope._analysis._diff import diff_modules
    from hloscope._render._diff_text import render_diff

    def module(out: str, dims: str, groups: str, addr: str) -> str:
        return ("HloModule jit_f, is_scheduled=true, num_partitions=8\n\nENTRY main {\n"
                "  p = f32[8,4,2]{2,1,0} parameter(0)\n"
                "  a = f32[8,4,2]{2,1,0} all-to-all(p), channel_id=1, replica_groups="
                f"{groups}, dimensions={{0}}\n"
                f"  ROOT t = {out} transpose(a), dimensions={{{dims}}}, "
                f'metadata={{op_name="jit(f)/<function g at {addr}>"}}\n}}\n')

    a = hloscope.parse(module("f32[4,8,2]{2,1,0}", "1,0,2", "{{0,1,2,3},{4,5,6,7}}",
                              "0x14df2cb3a170"))
    b = hloscope.parse(module("f32[2,4,8]{2,1,0}", "2,1,0", "{{0,2,4,6},{1,3,5,7}}",
                              "0x7f00aa11bb22"))
    d = diff_modules(a, b)
    text = " ".join(render_diff(d).split())
    assert "the program's results changed: result 0 f32[4,8,2] -> f32[2,4,8]" in text
    assert "over {{0,1,2,3},{4,5,6,7}}" in text and "over {{0,2,4,6},{1,3,5,7}}" in text
    from hloscope._analysis._diff import _without

    same = _without(None)
    assert same("jit(f)/<function g at 0x14df2cb3a170>") == \
        same("jit(f)/<function g at 0x7f00aa11bb22>")
