"""Which module a command takes from a dump folder, a file of several modules, torch_xla's
saved graphs; what `summary --list` shows."""

from __future__ import annotations

import json
import shutil

import hloscope
from conftest import GENERATED, SEEDS, run_cli
from hloscope._sources._inputs import is_jax_helper, read_inputs


def _dump(tmp_path):
    """A dump folder with JAX's helper modules around the user's function."""
    src = GENERATED / "f_for_loop.dump"
    d = tmp_path / "dump"
    d.mkdir()
    small = (SEEDS / "lecture_01_jit_sigmoid.2.hlo").read_text()
    (d / "module_0001.jit__where.cpu_after_optimizations.txt").write_text(
        small.replace("jit_sigmoid.2", "jit__where"))
    for f in src.iterdir():
        shutil.copy(f, d / f.name.replace("module_0032", "module_0007"))
    (d / "module_0009.jit_convert_element_type.before_optimizations.txt").write_text(
        small.replace("jit_sigmoid.2", "jit_convert_element_type"))
    (d / "module_0011.jit_sigmoid.cpu_after_optimizations.txt").write_text(
        small.replace("jit_sigmoid.2", "jit_sigmoid"))
    (d / "module_0012.jit_broken.cpu_after_optimizations.txt").write_text("HloModule x\n\n")
    return d


def test_jax_helpers_are_recognised():
    assert is_jax_helper("jit__where") and is_jax_helper("jit_convert_element_type")
    assert is_jax_helper("jit_broadcast_in_dim.3")
    assert not is_jax_helper("jit_train_step") and not is_jax_helper("IrToHlo.11")
    # a user's lambda and partial (an open-world trial's test log labelled one a helper)
    assert not is_jax_helper("jit__lambda_") and not is_jax_helper(
        "pjit__unnamed_wrapped_function_")


def test_dump_folder_takes_the_last_compiled_that_is_not_a_helper(tmp_path):
    d = _dump(tmp_path)
    inputs = read_inputs(d)
    assert [e.module.name for e in inputs.modules] == [
        "jit__where", "jit_f", "jit_convert_element_type", "jit_sigmoid"]
    assert [e.phase for e in inputs.modules] == [
        "optimized", "optimized", "before optimizations", "optimized"]
    assert any("module_0012.jit_broken" in s for s in inputs.skipped)
    entry, why = inputs.select()
    assert entry.module.name == "jit_sigmoid" and "last compiled" in why
    assert inputs.select(function="f")[0].module.name == "jit_f"
    assert inputs.select(module="module_0007.jit_f")[0].xla is not None
    r = run_cli("memory", str(d), "--function", "f")
    assert r.returncode == 0 and "Module jit_f" in r.stdout and "same" in r.stdout
    assert "skipped module_0012.jit_broken" in r.stderr  # one bad file hides nothing


def test_list_of_a_dump_folder(tmp_path):
    d = _dump(tmp_path)
    r = run_cli("summary", "--list", str(d))
    assert r.returncode == 0, r.stderr
    assert "jit__where (JAX helper)" in r.stdout and "module_0007.jit_f" in r.stdout
    assert "before optimizations" in r.stdout


def test_torch_xla_saved_graphs_are_listed_with_their_frames(tmp_path):
    hlo = (SEEDS / "torch_xla_01_IrToHlo.11.hlo").read_text()
    big = (SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo").read_text()

    def block(text: str, h: str, fn: str) -> str:
        return ("[ScheduleSyncTensorsGraph]\nTensorsGraphInfo:\n"
                "  mark_step (/usr/lib/python3/site-packages/torch_xla/core/xla_model.py:1056)\n"
                f"  {fn} (train.py:42)\n  <module> (train.py:80)\n\nHashes: ({h})\n\n"
                f"## BEGIN_GRAPH\n{text}\n## END_GRAPH\n\n")

    p = tmp_path / "graphs.txt"
    p.write_text(block(hlo, "aa11", "step") * 3 + block(big, "bb22", "shard_step"))
    hf = hloscope.read(p)
    assert hf.format == "torch_xla" and len(hf.modules) == 4
    rows = json.loads(run_cli("summary", "--list", "--json", str(p)).stdout)["modules"]
    assert [(r["module"], r["copies"], r["graph_hash"]) for r in rows] == [
        ("IrToHlo.11", 3, "aa11"), ("IrToHlo.19", 1, "bb22")]
    assert rows[1]["frame"] == "shard_step (train.py:42)"
    text = run_cli("summary", "--list", str(p)).stdout
    assert "made by" in text and "step (train.py:42)" in text


def test_torch_ir_text_gets_a_torch_xla_hint(tmp_path):
    p = tmp_path / "ir.txt"
    p.write_text("[ScheduleSyncTensorsGraph]\nTensorsGraphInfo:\n  f (a.py:1)\n\nHashes: (1)\n\n"
                 "## BEGIN_GRAPH\nIR {\n  %0 = f32[] prim::Constant(), xla_shape=f32[]\n}\n"
                 "## END_GRAPH\n")
    r = run_cli("summary", str(p))
    assert r.returncode == 2 and "XLA_SAVE_TENSORS_FMT=hlo" in r.stderr


def test_check_command(tmp_path):
    r = run_cli("check", str(GENERATED / "f_for_loop.hlo"))
    assert r.returncode == 0 and "ok (6 computations, 29 instructions)" in r.stdout
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"
                   "  ROOT r = f32[2] frobnicate(p)\n}\n")
    r = run_cli("check", str(bad))
    assert r.returncode == 2 and ":4:19: expects opcode but sees: frobnicate" in r.stderr
    data = json.loads(run_cli("check", "--json", str(bad)).stdout)
    assert data["ok"] is False and (data["error"]["line"], data["error"]["column"]) == (4, 19)
    # The tolerant commands read the same text: an opcode from a newer XLA is shown as is.
    assert run_cli("summary", str(bad)).returncode == 0


def test_check_reads_every_module_of_a_file(tmp_path):
    """A file of several modules: each is checked (check read the first and stopped at its
    end, exit 0, whatever the others held), and each refused one is shown, located."""
    p = tmp_path / "four.hlo"
    p.write_text("HloModule a\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n\n"
                 "HloModule b\nENTRY e {\n  ROOT p = f32[] paramter(0)\n}\n\n"
                 "HloModule c\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n\n"
                 "HloModule d\nENTRY e {\n  ROOT p = f33[] parameter(0)\n}\n")
    r = run_cli("check", str(p))
    assert r.returncode == 2, r.stdout
    assert "four.hlo:1: module a: ok" in r.stdout and "four.hlo:11: module c: ok" in r.stdout
    assert ":8:18: expects opcode but sees: paramter" in r.stderr
    assert ":18:12: expects opcode but sees: f33" in r.stderr
    assert "2 of 4 modules XLA's parser would refuse" in r.stderr
    data = json.loads(run_cli("check", "--json", str(p)).stdout)
    assert data["ok"] is False and [m["module"] for m in data["modules"]] == ["a", "c"]
    assert [(e["line"], e["column"]) for e in data["errors"]] == [(8, 18), (18, 12)]
    assert (data["error"]["line"], data["error"]["column"]) == (8, 18)
    good = tmp_path / "two.hlo"
    good.write_text(p.read_text().split("HloModule b")[0] + "HloModule c" +
                    p.read_text().split("HloModule c")[1].split("HloModule d")[0])
    r = run_cli("check", str(good))
    assert r.returncode == 0 and r.stdout.count(": ok (") == 2, (r.stdout, r.stderr)


def test_list_and_check_json_are_documented(tmp_path):
    from conftest import ROOT

    doc = (ROOT / "docs" / "json.md").read_text()
    rows = json.loads(run_cli("summary", "--list", "--json", str(_dump(tmp_path))).stdout)
    assert rows["schema"] == "hloscope.modules/1"
    for k in rows["modules"][0]:
        assert f"`{k}`" in doc, k
    ok = json.loads(run_cli("check", "--json", str(GENERATED / "f_for_loop.hlo")).stdout)
    bad = json.loads(run_cli("check", "--json", str(ROOT / "examples" / "typo.hlo")).stdout)
    for k in list(ok) + list(ok["modules"][0]) + list(bad["error"]):
        assert f"`{k}`" in doc, k
