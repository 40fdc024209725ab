"""Real torch_xla programs (tests/data/torch_xla, made by benchmarks/make_torch_xla_data.py
with torch_xla 2.9): the data is complete, every command reads every module, and
`hloscope run` reproduces torch's outputs from the saved inputs, without torch."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import hloscope
from conftest import DATA, run_cli

TXLA = DATA / "torch_xla"
PROGRAMS = ["mlp_forward", "mlp_train", "conv_net", "encoder_layer", "mlp_bf16",
            "dropout_train", "embedding_mask", "sharded_matmul_2x2", "sharded_train_8",
            "topk_sort", "int_mask_ops"]
SHARDED = {"sharded_matmul_2x2": 4, "sharded_train_8": 8}
RAW = TXLA / "raw"
SAVED_HLO = RAW / "mlp_train.graphs.hlo.txt.0"
SAVED_IR = RAW / "mlp_train.graphs.ir.txt.0"
STABLEHLO = RAW / "mlp_forward.stablehlo.mlir"
DUMP = RAW / "xla_dump_mlp_train"
_NP = {"f32": np.float32, "bf16": np.float32, "s64": np.int64, "pred": np.bool_}


def _modules() -> list:
    """Every HLO file of the data (the saved-tensors file holds four graphs)."""
    files = [TXLA / p / "program.hlo" for p in PROGRAMS]
    files += [TXLA / p / "partitioned.hlo" for p in SHARDED]
    return [*files, SAVED_HLO, DUMP, STABLEHLO]


def test_the_data_is_complete():
    readme = (TXLA / "README.md").read_text()
    assert sorted(p.name for p in TXLA.iterdir() if p.is_dir() and p.name != "raw") == \
        sorted(PROGRAMS)
    total = sum(f.stat().st_size for f in TXLA.rglob("*") if f.is_file())
    assert total < 5 * 1024**2, total
    for name in PROGRAMS:
        d = TXLA / name
        assert f"`{name}`" in readme, name
        meta = json.loads((d / "meta.json").read_text())
        assert meta["torch_xla"] == "2.9.0" and meta["torch"].startswith("2.9.0")
        m = hloscope.read(d / "program.hlo").module
        params = sorted(m.entry.parameters, key=lambda i: i.parameter_number)
        inputs = np.load(d / "inputs.npz")
        assert sorted(inputs.files, key=lambda k: int(k[1:])) == \
            [f"p{k}" for k in range(len(params))], name
        for k, p in enumerate(params):
            a = inputs[f"p{k}"]
            assert list(a.shape) == list(p.shape.dims), (name, k)
            assert a.dtype == _NP[p.shape.element_type], (name, k, a.dtype)
            assert meta["parameters"][k]["hlo_type"] == \
                f"{p.shape.element_type}[{','.join(map(str, p.shape.dims))}]"
        root = m.entry.root.shape
        leaves = [s for _, s in root.leaves()] if root.is_tuple else [root]
        for ref in ("expected.npz", "expected_cpu.npz"):
            if ref == "expected_cpu.npz" and not meta["expected_cpu"]:
                assert not (d / ref).exists()
                continue
            out = np.load(d / ref)
            assert out.files == [f"o{k}" for k in range(len(leaves))], (name, ref)
            for k, s in enumerate(leaves):
                assert list(out[f"o{k}"].shape) == list(s.dims), (name, ref, k)
                assert out[f"o{k}"].dtype == _NP[s.element_type], (name, ref, k)
        assert meta["spmd"] == (name in SHARDED)
        if name in SHARDED:
            assert meta["devices"] == SHARDED[name]
            assert len(meta["output_shardings"]) == len(leaves)
            part = hloscope.read(d / "partitioned.hlo").module
            ops = [i.opcode for c in part.computations for i in c.instructions
                   if i.opcode in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                   "collective-permute")]
            assert ops == [c["opcode"] for c in meta["collectives"]], name


def test_torch_and_torch_xla_agree():
    """The reference outputs: plain CPU torch against torch_xla, on the same inputs."""
    for name in PROGRAMS:
        d = TXLA / name
        if not (d / "expected_cpu.npz").exists():
            continue
        xla, cpu = np.load(d / "expected.npz"), np.load(d / "expected_cpu.npz")
        tol = 1e-2 if name == "mlp_bf16" else 1e-5
        for k in xla.files:
            np.testing.assert_allclose(xla[k], cpu[k], rtol=tol, atol=tol, err_msg=name)


def test_the_sharded_programs_carry_torch_xla_shardings():
    m = hloscope.read(TXLA / "sharded_matmul_2x2" / "program.hlo").module
    text = (TXLA / "sharded_matmul_2x2" / "program.hlo").read_text()
    assert "sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}" in text
    assert m.name.startswith("IrToHlo")
    meta = json.loads((TXLA / "sharded_train_8" / "meta.json").read_text())
    groups = {c["groups"] for c in meta["collectives"]}
    assert groups == {"replica_groups={{0,2,4,6},{1,3,5,7}}",
                      "replica_groups={{0,1},{2,3},{4,5},{6,7}}"}


def test_the_saved_graphs_are_four_of_which_three_are_one():
    hf = hloscope.read(SAVED_HLO)
    assert hf.format == "torch_xla" and len(hf.modules) == 4
    rows = json.loads(run_cli("summary", "--list", "--json", str(SAVED_HLO)).stdout)["modules"]
    assert [r["copies"] for r in rows] == [1, 3]
    assert rows[1]["graph_hash"] == "b81fe6dd80beb512dcd77f056b1a9419"
    assert re.match(r"run_raw \(.*make_torch_xla_data\.py:\d+\)", rows[1]["frame"])
    r = run_cli("kernels", str(SAVED_HLO))
    assert "holds 2 modules (4 in all, identical ones counted once); using 1:IrToHlo.147 " \
        "(the largest)" in r.stderr


@pytest.mark.parametrize("command", ["summary", "kernels", "memory", "lint", "report"])
def test_every_command_reads_every_module(command, tmp_path):
    for path in _modules():
        args = [command, str(path)]
        if command == "report":
            args += ["-o", str(tmp_path / "r.html")]
        r = run_cli(*args)
        assert r.returncode == 0, (command, path, r.stderr[-2000:])
        assert r.stdout.strip() or command == "report", (command, path)
        assert "Traceback" not in r.stderr, (command, path)


def test_torch_ir_text_is_refused_with_a_hint_for_torch_xla_users():
    r = run_cli("summary", str(SAVED_IR))
    assert r.returncode == 2
    assert "XLA_SAVE_TENSORS_FMT=hlo" in r.stderr and "_get_xla_tensors_hlo" in r.stderr


def _run_args(name: str) -> list[str]:
    d = TXLA / name
    return ["run", str(d / "program.hlo"), "--inputs", str(d / "inputs.npz"),
            "--expect", str(d / "expected.npz"), "-n", "0"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_run_reproduces_torch_xla(name):
    r = run_cli(*_run_args(name))
    assert r.returncode == 0, r.stderr[-2000:]


def _shard_shape(shape: list[int], sharding: str) -> list[int]:
    """The shape of one device's piece under a sharding as torch_xla prints it."""
    m = re.search(r"devices=\[([\d,]+)\]", sharding)
    if m is None:
        return list(shape)  # {replicated}, {maximal ...}
    tiles = [int(x) for x in m.group(1).split(",")]
    if "last_tile_dim_replicate" in sharding:
        tiles = tiles[:-1]
    return [-(-d // t) for d, t in zip(shape, tiles)]


def _leaves(shape: str) -> list[str]:
    """f32[4,8] for each array in a (tuple) shape, layouts dropped."""
    return sorted(re.sub(r"\{[^}]*\}", "", x) for x in re.findall(r"\w+\[[\d,]*\](?:\{[^}]*\})?",
                                                                shape))


@pytest.mark.parametrize("name", ["sharded_matmul_2x2", "sharded_train_8"])
def test_sharded_programs_run_torch_xla_collectives_and_output_shardings(name):
    """The sharded programs run as torch_xla runs them: the same kind of collectives over
    the same devices carrying the same arrays (XLA may combine several into one tuple
    all-reduce), and each output split as torch_xla's output sharding says."""
    meta = json.loads((TXLA / name / "meta.json").read_text())
    r = run_cli(*_run_args(name), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    mine = out["collectives"]
    assert {c["opcode"] for c in mine} == {c["opcode"] for c in meta["collectives"]}
    carried = sorted(x for c in mine for x in _leaves(c["shape"]))
    theirs = sorted(x for c in meta["collectives"] for x in _leaves(c["shape"]))
    assert carried == theirs
    assert ({str(sorted(map(tuple, c["groups"]))) for c in mine}
            == {str(sorted(tuple(int(d) for d in g.split(",")) for g in
                           re.findall(r"\{([\d,]+)\}", c["groups"])))
                for c in meta["collectives"]})
    assert len(out["outputs"]) == len(meta["output_shardings"])
    assert any(o.get("shards") for o in out["outputs"])
    for o, sharding in zip(out["outputs"], meta["output_shardings"]):
        for shard in o.get("shards") or []:
            assert shard["shape"] == _shard_shape(o["shape"], sharding), (o["index"], sharding)


def test_run_finds_a_wrong_output():
    d = TXLA / "mlp_forward"
    r = run_cli("run", str(d / "program.hlo"), "--inputs", str(d / "inputs.npz"),
                "--expect", str(TXLA / "conv_net" / "expected.npz"), "-n", "0")
    assert r.returncode == 1, r.stderr[-2000:]


def test_torch_sources_in_tables_show_the_package_path_and_the_file():
    """torch's frames live in site-packages: tables show torch/nn/functional.py:2901 (or
    its end when the column is narrow), never /work/txla-venv/lib/python3.11/site-…."""
    r = run_cli("kernels", str(TXLA / "encoder_layer" / "program.hlo"), columns=160)
    assert r.returncode == 0
    assert "torch/nn/functional.py:" in r.stdout and "site-packages" not in r.stdout
    narrow = run_cli("kernels", str(TXLA / "encoder_layer" / "program.hlo")).stdout
    assert re.search("\u2026\\S*functional\\.py:2901", narrow) and "site-packages" not in narrow
    wide = run_cli("kernels", "--wide", str(TXLA / "encoder_layer" / "program.hlo")).stdout
    assert "/site-packages/torch/nn/functional.py:2901" in wide  # --wide: whole
    listing = run_cli("summary", "--list", str(SAVED_HLO), columns=160).stdout
    assert re.search(r"run_raw \(\S*make_torch_xla_data\.py:\d+\)", listing)


def test_torch_xla_stablehlo_is_read_as_the_same_graph():
    """xm.get_stablehlo's text (with torch_xla's pretty locations, which no MLIR parser
    takes) is converted by XLA: the same parameters as program.hlo, in the same order."""
    from hloscope._sources._stablehlo import is_stablehlo, parseable_stablehlo

    text = STABLEHLO.read_text()
    assert is_stablehlo(text) and not is_stablehlo((TXLA / "mlp_forward" / "program.hlo")
                                                   .read_text())
    clean = parseable_stablehlo(text)
    assert clean.startswith("module @IrToHlo.24") and "#loc" not in clean
    assert "[unknown]" not in clean and "aten__relu" not in clean
    hf = hloscope.read(STABLEHLO)
    assert hf.format == "stablehlo" and hf.module.name == "IrToHlo.24"
    mine = sorted(hf.module.entry.parameters, key=lambda i: i.parameter_number)
    inputs = np.load(TXLA / "mlp_forward" / "inputs.npz")
    assert [list(p.shape.dims) for p in mine] == \
        [list(inputs[f"p{k}"].shape) for k in range(len(mine))]
    r = run_cli("summary", str(STABLEHLO))
    assert r.returncode == 0 and "StableHLO, converted to HLO by XLA" in r.stdout


def test_run_takes_stablehlo_and_reproduces_torch_xla(tmp_path):
    inputs = np.load(TXLA / "mlp_forward" / "inputs.npz")
    args = []
    for k in inputs.files:
        np.save(tmp_path / f"{k}.npy", inputs[k])
        args += ["--input", f"{k[1:]}={tmp_path / f'{k}.npy'}"]
    r = run_cli("run", str(STABLEHLO), "-n", "0", "--json", *args)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)["outputs"][0]
    want = np.load(TXLA / "mlp_forward" / "expected.npz")["o0"]
    assert out["shape"] == list(want.shape)
    np.testing.assert_allclose(out["first"], want.reshape(-1)[:len(out["first"])], rtol=1e-4)
    np.testing.assert_allclose([out["min"], out["max"]], [want.min(), want.max()], rtol=1e-4)


def test_stablehlo_from_jax_and_damaged_stablehlo(tmp_path):
    jax = pytest.importorskip("jax")
    p = tmp_path / "f.mlir"
    p.write_text(jax.jit(lambda x: (x * 2).sum()).lower(np.ones((4, 3), np.float32)).as_text())
    hf = hloscope.read(p)
    assert hf.format == "stablehlo" and hf.module.name.startswith("jit_")
    bad = tmp_path / "bad.mlir"
    bad.write_text(p.read_text().replace("stablehlo.multiply", "stablehlo.frobnicate"))
    r = run_cli("summary", str(bad))
    assert r.returncode == 2 and "XLA cannot read this StableHLO" in r.stderr, r.stderr
    assert "_get_xla_tensors_hlo" in r.stderr and "Traceback" not in r.stderr


def test_torch_xla_memory_usage_report_format_is_read():
    """torch_xla 2.9's XLA writes 'Total bytes used:' and 'Allocations sorted by size:'
    (jaxlib 0.10's writes 'Memory Space:' and 'Total bytes:')."""
    from hloscope._sources._xla_dumps import parse_memory_usage_report

    f = next(DUMP.glob("*-memory-usage-report.txt"))
    mu = parse_memory_usage_report(f.read_text(), filename=str(f))
    assert mu.total_bytes == 102552 and len(mu.spaces) == 1
    allocs = mu.allocations
    assert len(allocs) == 28 and sum(a.bytes for a in allocs) == mu.total_bytes
    top = allocs[0]
    # 54.2KiB as printed; exact from where its last value ends (as the buffer assignment says)
    assert (top.rank, top.index, top.bytes, top.description) == (1, 27, 55552,
                                                                 "preallocated-temp")
    assert len(top.offsets) == 7 and top.values == 12
    p3 = next(a for a in allocs if a.index == 1)
    assert p3.bytes == 8192 and p3.offsets == () and "parameter 3" in p3.description
    assert "size 55552, preallocated-temp" in next(DUMP.glob("*-buffer-assignment.txt")) \
        .read_text()
    r = run_cli("memory", str(f))
    assert r.returncode == 0 and "100.15 KiB (102,552 B), 28 allocations listed" in r.stdout
    assert "54.25 KiB (55,552 B)" in r.stdout and "parameter 3, shape |f32[32,64]|" in r.stdout
    data = json.loads(run_cli("memory", "--json", str(f)).stdout)
    assert '"description": "preallocated-temp"' in json.dumps(data)


def test_a_dump_folder_with_a_torch_xla_module_name_and_an_unreadable_file(tmp_path):
    """SyncTensorsGraph.147's files are one module (the number is not a platform prefix);
    a damaged file of the folder is skipped with a note and hides nothing."""
    rows = json.loads(run_cli("summary", "--list", "--json", str(DUMP)).stdout)["modules"]
    assert [(r["module"], r["phase"]) for r in rows] == [("SyncTensorsGraph.147", "optimized")]
    inputs = hloscope.read_memory_inputs(DUMP)
    [(m, figs)] = inputs.modules
    assert figs is not None and figs.memory_usage is not None and figs.buffer_assignment
    d = tmp_path / "dump"
    d.mkdir()
    for f in DUMP.iterdir():
        (d / f.name).write_text(f.read_text())
    bad = next(d.glob("*-memory-usage-report.txt"))
    bad.write_text("Nothing XLA wrote\n")
    (d / "module_0002.SyncTensorsGraph.9.cpu_after_optimizations-buffer-assignment.txt") \
        .write_text("BufferAssignment:\nallocation 0: garbled\n")
    inputs = hloscope.read_memory_inputs(d)
    assert len(inputs.modules) == 1 and inputs.modules[0][1].memory_usage is None
    assert any(bad.name in s for s in inputs.skipped), inputs.skipped
    for command in ("memory", "report"):
        args = [command, str(d)] + (["-o", str(tmp_path / "r.html")] if command == "report"
                                    else [])
        r = run_cli(*args)
        assert r.returncode == 0, (command, r.stderr)
        assert f"skipped {bad.name}" in r.stderr, (command, r.stderr)
    for f in d.iterdir():
        f.write_text("nothing\n")
    r = run_cli("memory", str(d))
    assert r.returncode == 2 and "no file of this dump folder could be read" in r.stderr


def test_summary_of_a_saved_graph_shows_its_hash_and_frames():
    r = run_cli("summary", "--module", "1", str(SAVED_HLO))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    k = lines.index("  torch_xla graph ScheduleSyncTensorsGraph, hash "
                    "b81fe6dd80beb512dcd77f056b1a9419")
    assert lines[k + 1] == "    at sync (torch_xla/torch_xla.py:87)"
    assert re.match(r"    at run_raw \(\S*make_torch_xla_data\.py:\d+\)$", lines[k + 4])
    s = json.loads(run_cli("summary", "--json", "--module", "0", str(SAVED_HLO)).stdout)
    tx = s["modules"][0]["torch_xla"] if "modules" in s else s["torch_xla"]
    assert tx["graph_hash"] == "1db2476f9847559f55924954e3b65716" and len(tx["frames"]) == 6
    assert "/site-packages/torch_xla/torch_xla.py:87" in tx["frames"][0]  # JSON: whole paths
    plain = json.loads(run_cli("summary", "--json", str(TXLA / "mlp_forward" / "program.hlo"))
                       .stdout)
    assert (plain["modules"][0] if "modules" in plain else plain)["torch_xla"] is None


def test_the_saved_graphs_file_named_without_torch_xla_ordinal():
    """XLA_SAVE_TENSORS_FILE=graphs.txt makes torch_xla write graphs.txt.0."""
    r = run_cli("summary", str(SAVED_HLO)[: -len(".0")])
    assert r.returncode == 2 and "No such file" in r.stderr
    assert "device ordinal appended: pass " in r.stderr and "graphs.hlo.txt.0" in r.stderr
