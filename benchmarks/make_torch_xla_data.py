"""Make tests/data/torch_xla: real torch_xla programs, their HLO, inputs and torch's outputs.

Run with a Python that has torch_xla (not hloscope's test environment)::

    python -m venv /work/txla-venv
    /work/txla-venv/bin/pip install torch-xla==2.9.0 torch==2.9.0
    /work/txla-venv/bin/python benchmarks/make_torch_xla_data.py [--out tests/data/torch_xla]
                                                               [--only NAME ...]

Each program runs in a subprocess of its own, on torch_xla's CPU client
(``PJRT_DEVICE=CPU``; ``CPU_NUM_DEVICES`` and SPMD mode for the sharded ones),
and writes into ``OUT/<program>/``:

- ``program.hlo``: ``torch_xla._XLAC._get_xla_tensors_hlo(outputs)`` with
  ``XLA_HLO_DEBUG=1`` (op metadata and source lines), the graph torch_xla
  would compile for those outputs (before SPMD partitioning);
- ``inputs.npz``: the values of its parameters, key ``pN`` for ``parameter(N)``
  (the device-data nodes ``_get_tensors_xla_device_data_node`` lists are the
  parameters, in parameter order; checked against the HLO's shapes); bf16
  values are stored as float32 (exactly);
- ``expected.npz``: the outputs torch_xla computed, ``oK`` for the K-th
  element of the root tuple; ``expected_cpu.npz``: the same computed by plain
  CPU torch where that is meaningful (not for dropout: another RNG);
- ``meta.json``: versions, environment, the parameters and outputs (shape,
  HLO type, what they are), torch_xla's own step time, and for the sharded
  ones the output shardings and the collectives of the partitioned module;
- sharded programs also ``partitioned.hlo``: the module XLA compiled (after SPMD
  partitioning and optimization, from ``XLA_FLAGS=--xla_dump_to``).

``OUT/raw/`` holds files torch_xla writes itself (see the README there).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(os.path.dirname(HERE), "tests", "data", "torch_xla")

# name -> (devices, spmd, what it is)
PROGRAMS: dict[str, tuple[int, bool, str]] = {
    "mlp_forward": (1, False, "MLP forward: Linear(64,128) ReLU Linear(128,10), batch 32"),
    "mlp_train": (1, False, "MLP training step: cross-entropy loss, backward, SGD(lr=0.1) step; "
                  "outputs the loss and the updated parameters"),
    "conv_net": (1, False, "Conv2d(3,8,3) ReLU MaxPool2d(2) Conv2d(8,16,3) ReLU AdaptiveAvgPool "
                 "Flatten Linear(16,10) on 4x3x16x16"),
    "encoder_layer": (1, False, "nn.TransformerEncoderLayer(d_model=32, nhead=4, "
                      "dim_feedforward=64, batch_first=True) in eval mode on 2x8x32"),
    "mlp_bf16": (1, False, "the MLP forward in bfloat16 (model and input .to(torch.bfloat16))"),
    "dropout_train": (1, False, "MLP with Dropout(0.5) training step (cross-entropy, SGD); "
                      "torch_xla's RNG seed is a parameter"),
    "embedding_mask": (1, False, "nn.Embedding(100,16) on int64 ids with padding id 0, masked "
                       "mean over the sequence, Linear(16,4)"),
    "sharded_matmul_2x2": (4, True, "x[16,32] sharded ('x', None) @ w[32,24] sharded (None, 'y') "
                           "on a 2x2 mesh, plus a ReLU"),
    "sharded_train_8": (8, True, "MLP training step on a (4,2) ('data','model') mesh of 8 "
                        "devices: batch on 'data', hidden units on 'model'; loss and updated "
                        "parameters"),
    "topk_sort": (1, False, "own: sort, topk(5), cumsum and argmax on a 8x64 float tensor "
                  "(int64 indices as outputs)"),
    "int_mask_ops": (1, False, "own: int64 arithmetic, where, comparisons (bool output), "
                     "integer sum and a float mean over a mask"),
}


# --------------------------------------------------------------------------- programs
# Each program: setup(dev, spmd) -> state, step(state) -> list of output tensors.
# The same code runs on the XLA device and on plain CPU torch (the reference).


def _mlp(torch, d_in=64, hidden=128, d_out=10, dropout=0.0):
    nn = torch.nn
    layers = [nn.Linear(d_in, hidden), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(hidden, d_out))
    return nn.Sequential(*layers)


def _train_step(torch, model, x, y, lr=0.1):
    params = list(model.parameters())
    for p in params:
        p.grad = None
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in params:
            p.sub_(lr * p.grad)
    for p in params:
        p.grad = None  # not live at the sync: the graph is the loss and the parameters
    return [loss.detach()] + [p.detach() for p in params]


def setup(name, torch, dev, spmd):
    torch.manual_seed(0)
    s = {}
    if name in ("mlp_forward", "mlp_train", "mlp_bf16", "dropout_train"):
        s["model"] = _mlp(torch, dropout=0.5 if name == "dropout_train" else 0.0)
        s["x"] = torch.randn(32, 64)
        s["y"] = torch.randint(0, 10, (32,))
        if name == "mlp_bf16":
            s["model"] = s["model"].to(torch.bfloat16)
            s["x"] = s["x"].to(torch.bfloat16)
    elif name == "conv_net":
        nn = torch.nn
        s["model"] = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(8, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                   nn.Flatten(), nn.Linear(16, 10))
        s["x"] = torch.randn(4, 3, 16, 16)
    elif name == "encoder_layer":
        s["model"] = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                                      batch_first=True).eval()
        s["x"] = torch.randn(2, 8, 32)
    elif name == "embedding_mask":
        s["emb"] = torch.nn.Embedding(100, 16, padding_idx=0)
        s["head"] = torch.nn.Linear(16, 4)
        ids = torch.randint(1, 100, (4, 12))
        ids[0, 8:] = 0
        ids[2, 5:] = 0
        s["ids"] = ids
    elif name == "sharded_matmul_2x2":
        s["x"] = torch.randn(16, 32)
        s["w"] = torch.randn(32, 24)
    elif name == "sharded_train_8":
        s["model"] = _mlp(torch, d_in=32, hidden=64, d_out=8)
        s["x"] = torch.randn(16, 32)
        s["y"] = torch.randint(0, 8, (16,))
    elif name == "topk_sort":
        s["x"] = torch.randn(8, 64)
    elif name == "int_mask_ops":
        s["a"] = torch.randint(-50, 50, (6, 10))
        s["b"] = torch.randint(1, 20, (6, 10))
        s["v"] = torch.randn(6, 10)
    else:
        raise SystemExit(f"unknown program {name}")
    for k, v in list(s.items()):
        s[k] = v.to(dev)
    if spmd:
        import numpy as np
        import torch_xla.distributed.spmd as xs

        if name == "sharded_matmul_2x2":
            mesh = xs.Mesh(np.arange(4), (2, 2), ("x", "y"))
            xs.mark_sharding(s["x"], mesh, ("x", None))
            xs.mark_sharding(s["w"], mesh, (None, "y"))
        else:
            mesh = xs.Mesh(np.arange(8), (4, 2), ("data", "model"))
            lin1, lin2 = s["model"][0], s["model"][2]
            xs.mark_sharding(lin1.weight, mesh, ("model", None))
            xs.mark_sharding(lin1.bias, mesh, ("model",))
            xs.mark_sharding(lin2.weight, mesh, (None, "model"))
            xs.mark_sharding(s["x"], mesh, ("data", None))
            xs.mark_sharding(s["y"], mesh, ("data",))
    return s


def step(name, torch, s):
    F = torch.nn.functional
    if name in ("mlp_forward", "mlp_bf16", "conv_net", "encoder_layer"):
        with torch.no_grad():
            return [s["model"](s["x"])]
    if name in ("mlp_train", "dropout_train", "sharded_train_8"):
        s["model"].train()
        return _train_step(torch, s["model"], s["x"], s["y"])
    if name == "embedding_mask":
        with torch.no_grad():
            ids = s["ids"]
            mask = ids != 0
            e = s["emb"](ids) * mask.unsqueeze(-1).to(torch.float32)
            pooled = e.sum(1) / mask.sum(1, keepdim=True).clamp(min=1).to(torch.float32)
            return [s["head"](pooled), mask.sum(1)]
    if name == "sharded_matmul_2x2":
        return [F.relu(s["x"] @ s["w"])]
    if name == "topk_sort":
        x = s["x"]
        vals, idx = torch.sort(x, dim=1, descending=True)
        tv, ti = torch.topk(x, 5, dim=1)
        return [vals, idx, tv, ti, torch.cumsum(x, dim=1), torch.argmax(x, dim=1)]
    if name == "int_mask_ops":
        a, b, v = s["a"], s["b"], s["v"]
        q = torch.div(a, b, rounding_mode="floor") * 3 + a % b
        pos = a > 0
        picked = torch.where(pos, q, -a)
        m = (v * pos.to(v.dtype)).sum() / pos.sum().clamp(min=1).to(v.dtype)
        return [picked, pos, picked.sum(dim=1), m]
    raise SystemExit(f"unknown program {name}")


# --------------------------------------------------------------------------- one program

_PARAM_RE = re.compile(r"^\s*%?([\w.\-]+) = (\w+)\[([\d,]*)\]\S* parameter\((\d+)\)")
_TYPE = {"float32": "f32", "bfloat16": "bf16", "int64": "s64", "bool": "pred",
         "float16": "f16", "int32": "s32", "float64": "f64"}


def _entry_params(hlo: str) -> dict[int, tuple[str, str, list[int]]]:
    """parameter(N) -> (name, type, dims) of the ENTRY computation."""
    entry = hlo[hlo.index("\nENTRY "):]
    entry = entry[: entry.index("\n}")]
    out = {}
    for line in entry.splitlines():
        m = _PARAM_RE.match(line)
        if m:
            dims = [int(d) for d in m.group(3).split(",") if d]
            out[int(m.group(4))] = (m.group(1), m.group(2), dims)
    return out


def _np(torch, t):
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)  # numpy has no bfloat16: stored exactly as float32
    return t.numpy()


def run_one(name: str, out: str) -> None:
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    devices, spmd, what = PROGRAMS[name]
    if spmd:
        xr.use_spmd()
    dev = torch_xla.device()
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    X = torch_xla._XLAC

    s = setup(name, torch, dev, spmd)
    torch_xla.sync()
    outs = step(name, torch, s)
    ids, values = X._get_tensors_xla_device_data_node(outs)
    hlo = X._get_xla_tensors_hlo(outs)
    params = _entry_params(hlo)
    if sorted(params) != list(range(len(values))):
        raise SystemExit(f"{name}: {len(values)} device data nodes but parameters "
                         f"{sorted(params)}")
    inputs, pmeta = {}, []
    for k, v in enumerate(values):
        a = _np(torch, v)
        pname, ptype, pdims = params[k]
        if list(a.shape) != pdims or _TYPE.get(str(v.dtype).replace("torch.", "")) != ptype:
            raise SystemExit(f"{name}: device data {k} is {v.dtype}{list(a.shape)} but "
                             f"parameter({k}) is {ptype}{pdims}")
        inputs[f"p{k}"] = a
        hlo_type = f"{ptype}[{','.join(map(str, pdims))}]"
        pmeta.append({"parameter": k, "name": pname, "hlo_type": hlo_type,
                      "npz_dtype": str(a.dtype), "tensor_id": int(ids[k])})
    torch_xla.sync()
    xm.wait_device_ops()
    expected = {f"o{k}": _np(torch, t) for k, t in enumerate(outs)}
    shardings = []
    if spmd:
        shardings = [X._get_xla_sharding_spec(t) or "replicated" for t in outs]

    # torch_xla's own step time (trace, sync, run and wait) after warm-up.
    times = []
    for i in range(12):
        t0 = time.perf_counter()
        live = step(name, torch, s)  # kept alive: sync runs the graphs of live tensors
        torch_xla.sync()
        xm.wait_device_ops()
        del live
        if i >= 2:
            times.append(time.perf_counter() - t0)

    cpu = None
    if name != "dropout_train":
        s_cpu = setup(name, torch, "cpu", False)
        cpu = {f"o{k}": _np(torch, t) for k, t in enumerate(step(name, torch, s_cpu))}

    with open(os.path.join(d, "program.hlo"), "w") as f:
        f.write(hlo)
    np.savez(os.path.join(d, "inputs.npz"), **inputs)
    np.savez(os.path.join(d, "expected.npz"), **expected)
    if cpu is not None:
        np.savez(os.path.join(d, "expected_cpu.npz"), **cpu)
    meta = {
        "program": name, "what": what, "torch": torch.__version__,
        "torch_xla": torch_xla.__version__, "python": sys.version.split()[0],
        "env": {k: os.environ[k] for k in ("PJRT_DEVICE", "CPU_NUM_DEVICES", "XLA_HLO_DEBUG")
                if k in os.environ},
        "spmd": spmd, "devices": devices,
        "parameters": pmeta,
        "outputs": [{"output": k, "shape": list(v.shape), "npz_dtype": str(v.dtype),
                     "torch_dtype": str(t.dtype)} for k, (v, t) in
                    enumerate(zip(expected.values(), outs))],
        "output_shardings": shardings,
        "expected_cpu": cpu is not None,
        "torch_xla_step_seconds": {"median": statistics.median(times), "min": min(times),
                                   "runs": len(times)},
    }
    if spmd:
        meta.update(_partitioned(d))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def _partitioned(d: str) -> dict[str, object]:
    """Keep the module XLA compiled for the program's sync (after SPMD partitioning) and
    list its collectives."""
    dump = os.environ["XLA_DUMP_DIR"]
    files = sorted(glob.glob(os.path.join(dump, "*after_optimizations.txt")))
    # The program's step is the largest module that ran (the setup syncs are copies).
    best = max(files, key=os.path.getsize)
    text = open(best).read()
    with open(os.path.join(d, "partitioned.hlo"), "w") as f:
        f.write(text)
    colls = []
    for line in text.splitlines():
        m = re.search(r"= (\S+) (all-reduce|all-gather|reduce-scatter|all-to-all|"
                      r"collective-permute)(?:-start)?\(", line)
        if m:
            g = re.search(r"(replica_groups=\S+?|source_target_pairs=\S+?)(?:, |$)", line)
            colls.append({"opcode": m.group(2), "shape": m.group(1),
                          "groups": g.group(1) if g else ""})
    return {"partitioned_from": os.path.basename(best), "collectives": colls}


# --------------------------------------------------------------------------- raw files


def run_raw(kind: str, out: str) -> None:
    """Files torch_xla writes itself, from three MLP training steps."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    dev = torch_xla.device()
    s = setup("mlp_train", torch, dev, False)
    if kind == "stablehlo":
        s = setup("mlp_forward", torch, dev, False)
        torch_xla.sync()
        outs = step("mlp_forward", torch, s)
        with open(os.path.join(out, "mlp_forward.stablehlo.mlir"), "w") as f:
            f.write(xm.get_stablehlo(outs))
        return
    import warnings

    warnings.simplefilter("ignore", DeprecationWarning)  # xm.mark_step, as users still call it
    with torch.no_grad():
        probe = s["model"](s["x"]).sum()  # a second, smaller graph before the steps
    xm.mark_step()
    for _ in range(3):
        step("mlp_train", torch, s)
        xm.mark_step()
    del probe
    xm.wait_device_ops()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--raw", help=argparse.SUPPRESS)
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    if a.one:
        run_one(a.one, out)
        return
    if a.raw:
        run_raw(a.raw, os.path.join(out, "raw"))
        return
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "CPU_NUM"))}
    base.update(PJRT_DEVICE="CPU", XLA_HLO_DEBUG="1", TF_CPP_MIN_LOG_LEVEL="2")
    for name in a.only or PROGRAMS:
        devices, spmd, _ = PROGRAMS[name]
        env = dict(base, CPU_NUM_DEVICES=str(devices))
        with tempfile.TemporaryDirectory() as dump:
            if spmd:
                env.update(XLA_FLAGS=f"--xla_dump_to={dump}", XLA_DUMP_DIR=dump)
            print(f"{name} ...", flush=True)
            subprocess.run([sys.executable, __file__, "--out", out, "--one", name], env=env,
                           check=True)
    if a.only:
        return
    raw = os.path.join(out, "raw")
    env = dict(base, CPU_NUM_DEVICES="1")
    # Several graphs (setup sync, then three steps: the same graph each time), HLO format.
    subprocess.run([sys.executable, __file__, "--out", out, "--raw", "steps"], check=True,
                   env=dict(env, XLA_SAVE_TENSORS_FMT="hlo",
                            XLA_SAVE_TENSORS_FILE=os.path.join(raw, "mlp_train.graphs.hlo.txt")))
    # The same in torch_xla's default format (IR text).
    subprocess.run([sys.executable, __file__, "--out", out, "--raw", "steps"], check=True,
                   env=dict(env,
                            XLA_SAVE_TENSORS_FILE=os.path.join(raw, "mlp_train.graphs.ir.txt")))
    subprocess.run([sys.executable, __file__, "--out", out, "--raw", "stablehlo"], check=True,
                   env=env)
    # XLA's own dump of the training steps (torch_xla's XLA version writes its own
    # memory-usage-report format): the largest module's files only.
    with tempfile.TemporaryDirectory() as dump:
        subprocess.run([sys.executable, __file__, "--out", out, "--raw", "steps"], check=True,
                       env=dict(env, XLA_FLAGS=f"--xla_dump_to={dump}"))
        mods = sorted(glob.glob(os.path.join(dump, "module_*after_optimizations.txt")),
                      key=os.path.getsize)
        prefix = os.path.basename(mods[-1]).split(".")[0] + "."
        dest = os.path.join(raw, "xla_dump_mlp_train")
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        for f in sorted(os.listdir(dump)):
            if f.startswith(prefix) and f.endswith(".txt"):
                shutil.copy(os.path.join(dump, f), dest)


if __name__ == "__main__":
    main()
