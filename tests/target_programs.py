"""Programs a user would compile for a GPU or TPU they do not have: the set that
benchmarks/target_fidelity.py measures hloscope's temp estimate, peak and counts on, and
tests/test_target_fidelity.py samples.  Written for issue 29 before hloscope's packing was
measured on them; the rules the misses showed were then added (docs/memory.md).

`CASES` lists (name, target, builder); a builder returns (fn, args, shard, mesh) for
`hloscope.inspect(fn, *args, target=target, shard=shard, mesh=mesh)`.  JAX is imported
only when a builder runs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

Built = tuple[Callable[..., Any], tuple[Any, ...], dict[int, Any] | None, str | None]


def _jax():  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp

    return jax, jnp


def _sds(shape, dtype="bfloat16"):  # type: ignore[no-untyped-def]
    jax, jnp = _jax()
    return jax.ShapeDtypeStruct(shape, getattr(jnp, dtype))


# -- MoE with all-to-all (expert parallel over the data axis) ------------------------------
def moe(tokens: int = 8192, d: int = 1024, experts: int = 16, ff: int = 4096) -> Built:
    jax, jnp = _jax()
    from jax.sharding import PartitionSpec as P

    def layer(x, router, w_in, w_out):
        n = jax.lax.axis_size("data")
        experts_per_dev = w_in.shape[0]
        e = n * experts_per_dev
        cap = x.shape[0] // e
        logits = x @ router
        idx = jnp.argmax(logits, -1)
        order = jnp.argsort(idx)
        xs = x[order].reshape(e, cap, d)                  # [experts, capacity, d]
        xs = jax.lax.all_to_all(xs, "data", 0, 0, tiled=True)
        xs = xs.reshape(experts_per_dev, n * cap, d)
        h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", xs, w_in))
        y = jnp.einsum("ecf,efd->ecd", h, w_out).reshape(e, cap, d)
        y = jax.lax.all_to_all(y, "data", 0, 0, tiled=True)
        return y.reshape(-1, d)[jnp.argsort(order)]

    def loss(params, x):
        f = jax.shard_map(layer, in_specs=(P("data"), P(), P("data"), P("data")),
                          out_specs=P("data"))
        return (f(x, *params) ** 2).mean()

    def step(params, x):
        val, g = jax.value_and_grad(loss)(params, x)
        return val, jax.tree.map(lambda p, q: p - 1e-3 * q, params, g)

    def run(router, w_in, w_out, x):
        return step((router, w_in, w_out), x)

    return run, (_sds((d, experts)), _sds((experts, d, ff)), _sds((experts, ff, d)),
                 _sds((tokens, d))), {1: "data", 2: "data", 3: "data"}, None


# -- Tensor-parallel MLP (Megatron: first matmul by columns, second by rows) ---------------
def tp_mlp(batch: int = 4096, d: int = 4096, ff: int = 16384, layers: int = 2,
           mesh: str | None = None) -> Built:
    jax, jnp = _jax()
    from jax.sharding import PartitionSpec as P

    def fwd(ws, x):
        for w1, w2 in ws:
            h = jax.nn.gelu(x @ w1)
            h = jax.lax.with_sharding_constraint(h, P("data", "model"))
            x = x + h @ w2
            x = jax.lax.with_sharding_constraint(x, P("data", None))
        return (x.astype(jnp.float32) ** 2).mean()

    def step(w1s, w2s, x):
        ws = list(zip(w1s, w2s))
        val, g = jax.value_and_grad(fwd)(ws, x)
        return val, [(a - 1e-2 * ga, b - 1e-2 * gb) for (a, b), (ga, gb) in zip(ws, g)]

    return step, ([_sds((d, ff))] * layers, [_sds((ff, d))] * layers, _sds((batch, d))), \
        {0: "None,model", 1: "model,None", 2: "data,None"}, mesh


# -- Adam with donated parameters and moments ----------------------------------------------
def adam(shapes: tuple[tuple[int, ...], ...] = ((4096, 4096), (4096, 16384), (16384, 4096),
                                                 (50304, 4096)),
         batch: int = 1024, spec: str | None = None) -> Built:
    jax, jnp = _jax()

    def loss(params, x):
        h = x
        for w in params[:-1]:
            h = jax.nn.relu(h @ w) if w.shape[0] == h.shape[-1] else h
        return (h @ params[-1].T).astype(jnp.float32).mean()

    def step(params, m, v, x):
        g = jax.grad(loss)(params, x)
        m = [0.9 * a + 0.1 * b for a, b in zip(m, g)]
        v = [0.999 * a + 0.001 * b * b for a, b in zip(v, g)]
        params = [p - 1e-3 * a / (jnp.sqrt(b) + 1e-8) for p, a, b in zip(params, m, v)]
        return params, m, v

    f32 = [_sds(s, "float32") for s in shapes]
    fn = jax.jit(step, donate_argnums=(0, 1, 2))
    shard = {0: spec, 1: spec, 2: spec, 3: "data,None"} if spec else None
    return fn, (f32, f32, f32, _sds((batch, shapes[0][0]), "float32")), shard, None


# -- Long-sequence attention (forward and backward) -----------------------------------------
def long_attention(batch: int = 1, heads: int = 16, seq: int = 8192, hd: int = 128,
                   shard: bool = False) -> Built:
    jax, jnp = _jax()

    def attn(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(hd).astype(q.dtype)
        mask = jnp.tril(jnp.ones((seq, seq), bool))
        s = jnp.where(mask, s, -1e9)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)

    def step(q, k, v):
        return jax.grad(lambda q, k, v: attn(q, k, v).astype(jnp.float32).sum(),
                        argnums=(0, 1, 2))(q, k, v)

    a = _sds((batch, heads, seq, hd))
    return step, (a, a, a), ({0: "None,data", 1: "None,data", 2: "None,data"}
                             if shard else None), None


# -- Scan over layers with remat (a transformer-ish MLP stack) ------------------------------
def scan_remat(layers: int = 16, d: int = 2048, ff: int = 8192, tokens: int = 8192,
               fsdp: bool = True) -> Built:
    jax, jnp = _jax()

    def block(x, w):
        w1, w2 = w
        return x + jax.nn.gelu(x @ w1) @ w2, None

    def loss(ws, x):
        y, _ = jax.lax.scan(jax.checkpoint(block), x, ws)
        return (y.astype(jnp.float32) ** 2).mean()

    def step(w1, w2, x):
        val, (g1, g2) = jax.value_and_grad(loss)((w1, w2), x)
        return val, w1 - 1e-3 * g1, w2 - 1e-3 * g2

    shard = {0: "None,data,None", 1: "None,None,data", 2: "data,None"} if fsdp else None
    return step, (_sds((layers, d, ff)), _sds((layers, ff, d)), _sds((tokens, d))), shard, None


# -- Llama-style decoder block, FSDP ---------------------------------------------------------
def llama_block(batch: int = 8, seq: int = 2048, d: int = 4096, heads: int = 32,
                ff: int = 11008) -> Built:
    jax, jnp = _jax()
    hd = d // heads

    def rms(x, g):
        x32 = x.astype(jnp.float32)
        return (x32 * jax.lax.rsqrt((x32 ** 2).mean(-1, keepdims=True) + 1e-6)).astype(
            x.dtype) * g

    def rope(x):
        pos = jnp.arange(seq)[:, None] / (10000 ** (jnp.arange(hd // 2) / (hd // 2)))
        c, s = jnp.cos(pos).astype(x.dtype), jnp.sin(pos).astype(x.dtype)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return jnp.concatenate([x1 * c[:, None] - x2 * s[:, None],
                                x1 * s[:, None] + x2 * c[:, None]], -1)

    def block(p, x):
        h = rms(x, p["g1"])
        q = rope((h @ p["wq"]).reshape(batch, seq, heads, hd))
        k = rope((h @ p["wk"]).reshape(batch, seq, heads, hd))
        v = (h @ p["wv"]).reshape(batch, seq, heads, hd)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(hd).astype(x.dtype)
        s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -1e9)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v).reshape(batch, seq, d)
        x = x + o @ p["wo"]
        h = rms(x, p["g2"])
        return x + (jax.nn.silu(h @ p["w1"]) * (h @ p["w3"])) @ p["w2"]

    def step(p, x):
        val, g = jax.value_and_grad(lambda p, x: (block(p, x).astype(jnp.float32) ** 2)
                                    .mean())(p, x)
        return val, jax.tree.map(lambda a, b: a - 1e-4 * b, p, g)

    params = {"g1": _sds((d,)), "g2": _sds((d,)), "wq": _sds((d, d)), "wk": _sds((d, d)),
              "wv": _sds((d, d)), "wo": _sds((d, d)), "w1": _sds((d, ff)),
              "w3": _sds((d, ff)), "w2": _sds((ff, d))}

    def run(g1, g2, wq, wk, wv, wo, w1, w3, w2, x):
        p = dict(g1=g1, g2=g2, wq=wq, wk=wk, wv=wv, wo=wo, w1=w1, w3=w3, w2=w2)
        return step(p, x)

    names = ("g1", "g2", "wq", "wk", "wv", "wo", "w1", "w3", "w2")
    shard = {i: ("data,None" if len(params[n].shape) == 2 else None)
             for i, n in enumerate(names)}
    shard[len(names)] = "data,None,None"
    return run, (*(params[n] for n in names), _sds((batch, seq, d))), shard, None


# -- Conv net / ViT training steps -----------------------------------------------------------
def conv_step(batch: int = 64, size: int = 128, width: int = 128) -> Built:
    jax, jnp = _jax()

    def net(ws, x):
        for w in ws:
            x = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            x = jax.nn.relu(x)
        return x.astype(jnp.float32).mean()

    def step(ws, x):
        val, g = jax.value_and_grad(net)(ws, x)
        return val, [w - 0.01 * gw for w, gw in zip(ws, g)]

    ws = [_sds((3, 3, 3 if i == 0 else width, width)) for i in range(4)]
    return step, (ws, _sds((batch, size, size, 3))), {1: "data"}, None


def vit_step(batch: int = 64, img: int = 256, patch: int = 16, d: int = 768,
             layers: int = 4, heads: int = 12) -> Built:
    jax, jnp = _jax()
    n = (img // patch) ** 2
    hd = d // heads

    def fwd(p, x):
        b = x.shape[0]
        x = x.reshape(b, img // patch, patch, img // patch, patch, 3).transpose(
            0, 1, 3, 2, 4, 5).reshape(b, n, patch * patch * 3)
        h = x @ p["embed"]
        for wqkv, wo, w1, w2 in p["layers"]:
            y = jax.nn.standardize(h, axis=-1)
            q, k, v = jnp.split((y @ wqkv).reshape(b, n, 3 * heads, hd), 3, axis=2)
            a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0, -1)
            h = h + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, n, d) @ wo
            y = jax.nn.standardize(h, axis=-1)
            h = h + jax.nn.gelu(y @ w1) @ w2
        return (h.mean(1) @ p["head"]).astype(jnp.float32).mean()

    def step(p, x):
        val, g = jax.value_and_grad(fwd)(p, x)
        return val, jax.tree.map(lambda a, b: a - 1e-3 * b, p, g)

    p = {"embed": _sds((patch * patch * 3, d)), "head": _sds((d, 1000)),
         "layers": [(_sds((d, 3 * d)), _sds((d, d)), _sds((d, 4 * d)), _sds((4 * d, d)))
                    for _ in range(layers)]}
    return step, (p, _sds((batch, img, img, 3))), {1: "data"}, None


CASES: list[tuple[str, str, Callable[[], Built]]] = [
    # GPU
    ("MoE all-to-all", "h100x8", moe),
    ("MoE all-to-all", "h100x16", lambda: moe(tokens=16384)),
    ("TP MLP data=2,model=4", "h100x8", lambda: tp_mlp(mesh="data=2,model=4")),
    ("TP MLP model=8", "h100x8", lambda: tp_mlp(mesh="data=1,model=8")),
    ("TP MLP data=4,model=16", "h100x64", lambda: tp_mlp(batch=8192, mesh="data=4,model=16")),
    ("TP MLP data=8,model=8", "a100-80x64", lambda: tp_mlp(batch=8192, mesh="data=8,model=8")),
    ("Adam donated", "h100", adam),
    ("Adam donated", "a100-80", adam),
    ("Adam donated FSDP", "h100x8", lambda: adam(spec="data,None")),
    ("long attention 8k", "h200", long_attention),
    ("long attention 16k", "b200", lambda: long_attention(seq=16384, heads=8)),
    ("long attention heads/8", "h100x8", lambda: long_attention(batch=2, shard=True)),
    ("scan remat FSDP", "h100x8", scan_remat),
    ("scan remat FSDP", "h200x16", lambda: scan_remat(tokens=16384)),
    ("llama block FSDP", "h100x8", llama_block),
    ("llama block FSDP", "b200x8", llama_block),
    ("conv step DP", "h100x8", conv_step),
    ("ViT step", "a100-80", lambda: vit_step(batch=32)),
    ("ViT step DP", "h100x8", vit_step),
    # TPU
    ("MoE all-to-all", "tpu-v5e:2x4", moe),
    ("MoE all-to-all", "tpu-v5p:2x2x2", moe),
    ("TP MLP data=2,model=4", "tpu-v5e:2x4", lambda: tp_mlp(mesh="data=2,model=4")),
    ("TP MLP data=4,model=16", "tpu-v5p:4x4x4",
     lambda: tp_mlp(batch=8192, mesh="data=4,model=16")),
    ("TP MLP data=4,model=8", "tpu-v4:2x2x4", lambda: tp_mlp(mesh="data=4,model=8")),
    ("Adam donated", "tpu-v6e", lambda: adam(shapes=((2048, 2048), (2048, 8192),
                                                      (8192, 2048), (32000, 2048)))),
    ("Adam donated FSDP", "tpu-v5p:2x2x2", lambda: adam(spec="data,None")),
    ("long attention 8k", "tpu-v5p", long_attention),
    ("long attention 4k", "tpu-v5e", lambda: long_attention(seq=4096, heads=8)),
    ("scan remat FSDP", "tpu-v4:2x2x1", scan_remat),
    ("scan remat FSDP", "tpu-v6e:4x4", lambda: scan_remat(tokens=16384)),
    ("llama block FSDP", "tpu-v5p:2x2x2", lambda: llama_block(seq=1024)),
    ("llama block FSDP", "tpu-v4:2x2x2", lambda: llama_block(batch=16, seq=1024)),
    ("conv step DP", "tpu-v5e:2x4", conv_step),
    ("ViT step DP", "tpu-v6e:2x4", lambda: vit_step(batch=16, layers=2)),
    # more of the same kinds on other chips and counts
    ("TP MLP data=1,model=8", "h200x8", lambda: tp_mlp(mesh="data=1,model=8")),
    ("llama block FSDP", "a100-80x8", llama_block),
    ("Adam donated", "b200", adam),
    ("scan remat FSDP", "a100-40x8", lambda: scan_remat(layers=8)),
    ("MoE all-to-all", "tpu-v6e:2x4", moe),
    ("conv step DP", "tpu-v6e:2x4", conv_step),
    ("Adam donated FSDP", "tpu-v5e:2x4", lambda: adam(spec="data,None")),
]

# The sample `--quick` runs: GPU and TPU, each kind of program once.
QUICK = (0, 3, 6, 12, 19, 21, 25, 28)


# -- XLA's own counts ---------------------------------------------------------------------
_THUNK = re.compile(r"^(\s*)\d+: (k\w+)", re.M)
_THUNK_WRAPPERS = {"kAsyncStart", "kAsyncDone", "kWhile", "kConditional", "kCommandBuffer",
                   "kDynamicSliceFusion", "kSequential"}
_THUNK_COLLECTIVES = {"kAllGather", "kAllReduce", "kAllToAll", "kReduceScatter",
                      "kCollectivePermute", "kRaggedAllToAll", "kCollectiveBroadcast"}


def thunk_counts(text: str) -> tuple[int, int, int]:
    """(kernels, collectives, copies) of XLA's GPU thunk sequence: every thunk that does work
    (wrappers left out: an async pair's start and done, a loop, a dynamic-slice fusion, whose
    one inner thunk stands for the fusion)."""
    kinds: list[str] = []
    inner_of: int | None = None   # indentation of the dynamic-slice fusion being read
    for m in _THUNK.finditer(text):
        indent, kind = len(m.group(1)), m.group(2)
        if inner_of is not None and indent > inner_of:
            kinds.append("fusion")
            continue
        inner_of = indent if kind == "kDynamicSliceFusion" else None
        kinds.append(kind)
    c = Counter(kinds)
    return (sum(n for k, n in c.items() if k not in _THUNK_WRAPPERS),
            sum(c[k] for k in _THUNK_COLLECTIVES), c["kCopy"])


_NO_WORK = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
            "add-dependency", "opt-barrier", "partition-id", "replica-id", "while",
            "conditional", "call", "async-update", "domain"}
_HLO_COLLECTIVES = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                    "ragged-all-to-all", "collective-permute", "collective-broadcast"}
_INST = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*? ([a-z][a-z0-9\-]*)\((.*)$")
_COMP = re.compile(r"^(ENTRY )?%?([\w.\-]+) .*\{\s*$")


def hlo_counts(text: str) -> tuple[int, int]:
    """(kernels, collectives) of an optimized TPU module, read from its text on its own:
    the instructions of the entry and of the computations its loops, conditionals and calls
    run that launch work, an async pair once (its start)."""
    comps: dict[str, list[tuple[str, str, str]]] = {}
    entry = cur = ""
    for line in text.splitlines():
        m = _COMP.match(line)
        if m and not line[:1].isspace():
            cur = m.group(2)
            comps[cur] = []
            entry = cur if m.group(1) else entry
            continue
        m = _INST.match(line)
        if m and cur:
            comps[cur].append((m.group(1), m.group(2), m.group(3)))
    called = re.compile(r"(?:body|condition|to_apply|true_computation|false_computation)"
                        r"=%?([\w.\-]+)|branch_computations=\{([^}]*)\}")
    wrapped = re.compile(r"calls=%?([\w.\-]+)")
    run, work = [entry], [entry]
    while work:
        for _name, op, rest in comps.get(work.pop(), []):
            if op in ("while", "conditional", "call"):
                for one, many in called.findall(rest):
                    for c in [one] if one else re.split(r",\s*", many.replace("%", "")):
                        if c in comps and c not in run:
                            run.append(c)
                            work.append(c)
    kernels = collectives = 0
    for c in run:
        for _name, op, rest in comps[c]:
            if op in _NO_WORK or op.endswith("-done"):
                continue
            kernels += 1
            inner = op
            if op == "fusion":  # a TPU's collective fusion holds its collective
                m = wrapped.search(rest)
                body = [o for _n, o, _r in comps.get(m.group(1), [])] if m else []
                inner = next((o for o in body if o in _HLO_COLLECTIVES), op)
            elif op.endswith("-start"):
                m = wrapped.search(rest)
                inner = comps[m.group(1)][-1][1] if m and m.group(1) in comps else op[:-6]
            collectives += inner in _HLO_COLLECTIVES
    return kernels, collectives
