"""The advisor's evaluation set: programs labelled with the findings an expert expects.

Each entry builds a module (a JAX function compiled here, on the CPU or for a GPU/TPU
target without the hardware, or a module file in tests/data) and names the rules that
must fire on it (`expect`); every other rule must stay quiet.  Most patterns come with
their fixed twin (the same program written the way the finding suggests), and programs
with nothing to fix (`expect=()`) check that the advisor is quiet where an expert would
be.  tests/test_advisor_quality.py holds every label; benchmarks/advisor_quality.py
prints precision and recall per rule over the set.

Why each label is right is said beside it: the rule's evidence is the pattern the
program was written to have, and the saving is large enough (sizes of 1 MiB or more) to
matter beside the program's peak.
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], Any]        # -> Module
    expect: tuple[str, ...]          # rules that must fire; all others must stay quiet
    why: str
    target: str | None = None        # "gpu" or "tpu" when it needs that extra


CASES: list[Case] = []


def registrar(cases: list[Case]):  # type: ignore[no-untyped-def]
    """A `case(expect, why, target)` decorator that adds the function to `cases`."""
    def case(expect: tuple[str, ...], why: str, target: str | None = None):  # type: ignore[no-untyped-def]
        def register(fn):  # type: ignore[no-untyped-def]
            cases.append(Case(fn.__name__, fn, expect, why, target))
            return fn
        return register
    return case


case = registrar(CASES)


def _compiled(fn: Any, *args: Any, target: str | None = None, **kw: Any) -> Any:
    import hloscope

    return hloscope.inspect(fn, *args, target=target, **kw).module


def _file(name: str) -> Any:
    import hloscope

    return hloscope.read(DATA / name).module


def _lowered(fn: Any, *args: Any) -> Any:
    """The module as JAX gives it to XLA, before optimization."""
    import jax

    import hloscope

    return hloscope.parse(jax.jit(fn).lower(*args).as_text(dialect="hlo"))


def _np():  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp
    import numpy as np

    return jax, jnp, np


# -- fusion: reductions (HS101), constants (HS102) ------------------------------------

@case(("HS101", "HS104"), "jnp.sum over an axis of 2 ends the fusion; kvm (from arange) "
      "is written to memory for the reduction instead of being computed inside it "
      "(seed 004's f_sum_jax)")
def sum_over_short_axis():
    jax, jnp, np = _np()

    def f(x):
        kvm = jnp.stack((jnp.arange(x.shape[0]), jnp.arange(x.shape[0])), axis=-1)
        return x * 2 + jnp.sum(kvm * x, axis=1, keepdims=True)
    return _compiled(f, jnp.ones((131072, 2)))


@case((), "the sum written out by hand fuses (seed 004's f_sum_explicit)")
def sum_written_out():
    jax, jnp, np = _np()

    def f(x):
        kvm = jnp.stack((jnp.arange(x.shape[0]), jnp.arange(x.shape[0])), axis=-1)
        return x * 2 + (kvm[..., 0] * x[..., 0] + kvm[..., 1] * x[..., 1])[:, None]
    return _compiled(f, jnp.ones((131072, 2)))


@case((), "a softmax reduces over 1,024 elements: nothing to write out by hand")
def softmax_long_axis():
    jax, jnp, np = _np()
    return _compiled(lambda x: jax.nn.softmax(x * 3.0, axis=-1), jnp.ones((512, 1024)))


@case((), "a layer norm reduces over 1,024 elements: XLA's kernels are right")
def layer_norm():
    jax, jnp, np = _np()

    def f(x, g):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * g
    return _compiled(f, jnp.ones((1024, 1024)), jnp.ones((1024,)))


@case(("HS102",), "a 1 MiB NumPy array closed over becomes a constant in the program")
def numpy_constant():
    jax, jnp, np = _np()
    table = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    return _compiled(lambda x: x @ table + 1.0, jnp.ones((256, 512)))


@case((), "the same table passed as an argument")
def constant_as_argument():
    jax, jnp, np = _np()
    return _compiled(lambda x, t: x @ t + 1.0, jnp.ones((256, 512)), jnp.ones((512, 512)))


@case(("HS102",), "the constant survives optimization: judged before it too")
def numpy_constant_before_optimization():
    jax, jnp, np = _np()
    table = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    return _lowered(lambda x: x @ table + 1.0, jnp.ones((256, 512)))


@case((), "before optimization the reduction's split is not yet XLA's decision: quiet")
def sum_over_short_axis_before_optimization():
    jax, jnp, np = _np()

    def f(x):
        kvm = jnp.stack((jnp.arange(x.shape[0]), jnp.arange(x.shape[0])), axis=-1)
        return x * 2 + jnp.sum(kvm * x, axis=1, keepdims=True)
    return _lowered(f, jnp.ones((131072, 2)))


# -- layouts (HS103) -------------------------------------------------------------------

@case(("HS103",), "a 3-D FFT over the leading axes transposes the data before and after "
      "the FFT (seed 004's f_fft3d)")
def fft_over_leading_axes():
    jax, jnp, np = _np()
    return _compiled(lambda x: jnp.fft.irfftn(jnp.fft.rfftn(x, axes=(0, 1, 2)), axes=(0, 1, 2)),
                     jnp.zeros((64, 64, 32, 2)))


@case((), "the FFT over the trailing axes needs no transpose (seed 004's f_fft3d_transposed)")
def fft_over_trailing_axes():
    jax, jnp, np = _np()
    return _compiled(lambda x: jnp.fft.irfftn(jnp.fft.rfftn(x, axes=(1, 2, 3)) * 2,
                                              axes=(1, 2, 3)) + 3, jnp.zeros((2, 64, 64, 32)))


@case((), "a chain of matmuls in their natural layout")
def matmul_chain():
    jax, jnp, np = _np()
    a = jnp.ones((512, 512))
    return _compiled(lambda a, b, c: jnp.tanh(a @ b) @ c, a, a, a)


@case((), "an MLP forward pass: XLA's kernels are the right ones")
def mlp_forward():
    jax, jnp, np = _np()

    def f(w1, w2, x):
        return jax.nn.relu(x @ w1) @ w2
    return _compiled(f, jnp.ones((512, 1024)), jnp.ones((1024, 512)), jnp.ones((256, 512)))


@case((), "a 2-D convolution with its bias and activation")
def conv_forward():
    jax, jnp, np = _np()

    def f(x, w, b):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y + b)
    return _compiled(f, jnp.ones((8, 64, 64, 32)), jnp.ones((3, 3, 32, 32)), jnp.ones((32,)))


@case((), "an attention block in f32: matmuls, a softmax over 256 keys")
def attention_f32():
    jax, jnp, np = _np()

    def f(q, k, v):
        a = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k) / 8.0, axis=-1)
        return jnp.einsum("bqk,bkd->bqd", a, v)
    x = jnp.ones((8, 256, 64))
    return _compiled(f, x, x, x)


# -- recompute (HS104) -----------------------------------------------------------------

@case(("HS104",), "a 1 MiB table from iota and cheap arithmetic is written once and read by "
      "two fused kernels; built inside each, it costs no memory")
def iota_table_stored():
    jax, jnp, np = _np()

    def f(x):
        im = (jnp.arange(x.size).reshape(x.shape) * 3 + 1).astype(jnp.float32)
        a = x + jnp.sum(im * x, axis=0, keepdims=True)
        return a * im
    return _compiled(f, jnp.ones((512, 512)))


@case((), "a bf16 weight converted to f32 for a matmul is not a cheap intermediate to "
      "recompute from indices")
def bf16_weight_convert_cpu():
    jax, jnp, np = _np()

    def f(w, x):
        return jnp.tanh(x @ w.astype(jnp.float32))
    return _compiled(f, jnp.ones((1024, 1024), jnp.bfloat16), jnp.ones((256, 1024)))


@case((), "a causal mask built from iota inside each scanned attention layer: XLA hoists it "
      "out of the loop and stores it, but the code already builds it where it is used: "
      "nothing for the user to change (issue 28's false alarm)")
def causal_mask_in_scan():
    jax, jnp, np = _np()

    def attn(x, w):
        s = (x @ w) @ jnp.swapaxes(x, -1, -2)
        n = x.shape[1]
        mask = (jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
                >= jax.lax.broadcasted_iota(jnp.int32, (n, n), 1))
        return jax.nn.softmax(jnp.where(mask, s, -1e9), -1) @ x
    return _compiled(lambda x, ws: jax.lax.scan(lambda x, w: (x + attn(x, w), None), x, ws)[0],
                     jnp.ones((8, 1024, 128)), jnp.ones((4, 128, 128)))


# -- loops (HS105) ---------------------------------------------------------------------

@case(("HS105",), "fori_loop of 4 cheap iterations reads and writes 1 MiB of state each "
      "time (seed 004's f_for)")
def short_loop():
    jax, jnp, np = _np()
    return _compiled(lambda x: jax.lax.fori_loop(0, 4, lambda i, x: x * x + 1, x),
                     jnp.ones((131072, 2)))


@case((), "the same loop unrolled is one kernel")
def short_loop_unrolled():
    jax, jnp, np = _np()
    return _compiled(lambda x: jax.lax.fori_loop(0, 4, lambda i, x: x * x + 1, x, unroll=4),
                     jnp.ones((131072, 2)))


@case((), "a scan of 64 steps that reads a 32 KiB slice of an 8 MiB input each step and "
      "runs a matmul: a long loop with a library call, not one to unroll")
def scan_reads_slices():
    jax, jnp, np = _np()

    def f(w, xs, h):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()
        return jax.lax.scan(step, h, xs)
    return _compiled(f, jnp.ones((128, 128)), jnp.ones((64, 64, 128)), jnp.ones((64, 128)))


@case((), "a loop of 100 cheap iterations: too long to unroll")
def long_loop():
    jax, jnp, np = _np()
    return _compiled(lambda x: jax.lax.fori_loop(0, 100, lambda i, x: x * 0.5 + 1, x),
                     jnp.ones((131072, 2)))


# -- the peak (HS106) ------------------------------------------------------------------

def _fft_multi(n: int, how: str):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def chain(x, i):
        return jnp.fft.irfftn((i + 2) * jnp.fft.rfftn(x + i, axes=(1, 2, 3)), axes=(1, 2, 3))

    def f(x):
        if how == "loop":
            return jax.lax.fori_loop(0, n, lambda i, r: r + chain(x, i) ** 2, jnp.zeros_like(x))
        res = 0
        for i in range(n):
            res = res + chain(x, i) ** (i + 2)
            if how == "barrier":
                res, x = jax.lax.optimization_barrier((res, x))
        return res
    return _compiled(f, jnp.zeros((4, 64, 64, 32)))


@case(("HS106",), "three independent FFT chains summed: XLA runs them side by side and "
      "their results are alive together at the peak (seed 004's f_fft_multi)")
def fft_chains_side_by_side():
    return _fft_multi(3, "python")


@case(("HS106",), "seed 004's fix, an optimization_barrier after each chain, does not take "
      "with jax 0.10 on the CPU: the schedule and the peak (10,878,976 B) are the same as "
      "without it, so the finding stands")
def fft_chains_with_barriers():
    return _fft_multi(3, "barrier")


@case((), "the chains in a fori_loop: one at a time (seed 004's f_fft_multi_for)")
def fft_chains_in_a_loop():
    return _fft_multi(3, "loop")


@case((), "fftn(a) * conj(fftn(b)): the product needs both transforms at once, so running "
      "them one after the other would save nothing")
def fft_product():
    jax, jnp, np = _np()

    def f(a, b):
        return (jnp.fft.fftn(a) * jnp.fft.fftn(b).conj()).real
    x = jnp.ones((64, 64, 64), jnp.float32)
    return _compiled(f, x, x)


@case((), "one FFT chain: nothing runs side by side")
def one_fft_chain():
    jax, jnp, np = _np()
    return _compiled(lambda a: jnp.fft.ifftn(jnp.fft.fftn(a) * 2).real,
                     jnp.ones((64, 64, 64), jnp.float32))


# -- donation (HS107, HS110) -----------------------------------------------------------

@case(("HS107",), "a donation XLA was given and could not alias (tests/data/advisor)")
def donation_unused():
    return _file("advisor/donation_unused.hlo")


@case((), "the donated parameter is aliased to the output")
def donation_used():
    return _file("advisor/donation_used.hlo")


def _inference(donate: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def forward(ws, x):
        for w in ws:
            x = jnp.tanh(x @ w)
        return x
    f = jax.jit(forward, donate_argnums=(0,) if donate else ())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX: "Some donated buffers were not usable"
        return _compiled(f, [jnp.ones((1024, 1024)) for _ in range(4)], jnp.ones((256, 1024)))


@case(("HS107",), "an inference function donates its 16 MiB of weights, which no output "
      "(the 1 MiB activations) can take: JAX drops the donation before XLA sees it and "
      "warns; the caller's weights are gone for nothing (issue 28's miss on the blind set's "
      "inference_donates_params)")
def inference_donates_weights():
    return _inference(True)


@case((), "the same inference function without donation")
def inference_keeps_weights():
    return _inference(False)


def _mlp_step(donate: bool, layers: int = 4, width: int = 512):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def loss(params, x):
        for w in params:
            x = jnp.tanh(x @ w)
        return (x ** 2).mean()

    def step(params, x):
        g = jax.grad(loss)(params, x)
        return [p - 0.01 * gp for p, gp in zip(params, g)]
    params = [jnp.ones((width, width)) for _ in range(layers)]
    fn = jax.jit(step, donate_argnums=(0,)) if donate else step
    return _compiled(fn, params, jnp.ones((64, width)))


@case(("HS110",), "an SGD step returns four updated 1 MiB weights without donating them")
def sgd_step_not_donated():
    return _mlp_step(False)


@case((), "the same step with donate_argnums=(0,)")
def sgd_step_donated():
    return _mlp_step(True)


def _kv_cache(donate: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def decode(cache, k, pos):
        return jax.lax.dynamic_update_slice(cache, k, (0, pos, 0, 0))
    fn = jax.jit(decode, donate_argnums=(0,)) if donate else decode
    return _compiled(fn, jnp.zeros((8, 2048, 16, 64)), jnp.ones((8, 1, 16, 64)), 5)


@case(("HS110",), "a 64 MiB KV cache updated with dynamic_update_slice and returned without "
      "donation: XLA copies it into a new buffer every step (issue 28: HS110 wanted an add)")
def kv_cache_not_donated():
    return _kv_cache(False)


@case((), "the same cache donated: updated in place")
def kv_cache_donated():
    return _kv_cache(True)


def _es_step(donate: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def step(theta, noise, fitness):
        w = jnp.argsort(jnp.argsort(fitness)).astype(jnp.float32) / 15.0 - 0.5
        return theta + 0.01 * jnp.einsum("p,pd->d", w, noise)
    fn = jax.jit(step, donate_argnums=(0,) if donate else ())
    return _compiled(fn, jnp.ones((1 << 22,)), jnp.ones((16, 1 << 22)), jnp.ones((16,)))


@case(("HS110",), "an evolution-strategy step returns theta advanced by a term made from "
      "the other arguments alone (theta + lr * noise^T w): the state updated, one array "
      "not donated (the sixth blind set's es_update_not_donated)")
def es_step_not_donated():
    return _es_step(False)


@case((), "the same step with theta donated")
def es_step_donated():
    return _es_step(True)


@case((), "a function of one array returns one array: whether the caller still needs x is "
      "not the advisor's to guess")
def elementwise_one_array():
    jax, jnp, np = _np()
    return _compiled(lambda x: jnp.sin(x) * 2 + x ** 2, jnp.ones((1024, 1024)))


# -- f64 (HS108), collectives in loops (HS109) -----------------------------------------

@case(("HS108",), "cumsum promoted to f64 among f32 arrays (tests/data/advisor)")
def f64_promoted():
    return _file("advisor/f64_promoted.hlo")


@case((), "the same in f32")
def f32_only():
    return _file("advisor/f32_only.hlo")


def _stencil(dtype: str):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def stencil(u):
        def step(i, u):
            return u + 0.1 * (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1)
                              + jnp.roll(u, -1, 1) - 4 * u)
        return jax.lax.fori_loop(0, 50, step, u)
    with jax.enable_x64(True):
        return _compiled(stencil, jnp.ones((1024, 1024), getattr(jnp, dtype)))


@case(("HS108",), "a heat-equation stencil in f64 throughout (jax_enable_x64 on, float64 "
      "arrays): in f32 it would hold and move half the bytes (issue 28: HS108 looked only "
      "for f64 among f32)")
def f64_stencil():
    return _stencil("float64")


@case((), "the same stencil in f32")
def f32_stencil():
    return _stencil("float32")


@case(("HS109",), "an all-gather in a while body of loop state the body never changes "
      "(written by hand: XLA hoists JAX's own version)")
def loop_invariant_collective():
    return _file("advisor/loop_invariant_collective.hlo")


@case((), "an all-gather of the loop's changing state")
def loop_varying_collective():
    return _file("advisor/loop_varying_collective.hlo")


# -- rematerialization (HS111) ---------------------------------------------------------

def _rnn_step(remat: str):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def cell(h, x, w, u):
        a = jnp.tanh(h @ w + x @ u)
        b = jax.nn.sigmoid(a @ w)
        return a * b

    def loss(w, u, xs, h):
        step = lambda h, x: (cell(h, x, w, u), None)  # noqa: E731
        if remat == "step":
            step = jax.checkpoint(step, policy=jax.checkpoint_policies.nothing_saveable)
        if remat == "segments":  # 8 checkpointed segments of 16 steps
            segment = jax.checkpoint(lambda h, xseg: (jax.lax.scan(step, h, xseg)[0], None))
            h, _ = jax.lax.scan(segment, h, xs.reshape(8, 16, *xs.shape[1:]))
        else:
            h, _ = jax.lax.scan(step, h, xs)
        return (h ** 2).mean()
    fn = jax.checkpoint(loss) if remat == "whole" else loss
    return _compiled(jax.grad(fn, argnums=(0, 1)), jnp.ones((256, 256)) * 0.01,
                     jnp.ones((256, 256)) * 0.01, jnp.ones((128, 64, 256)), jnp.ones((64, 256)))


@case(("HS111",), "a scan of 128 RNN steps saves its activations for the backward pass: "
      "they hold most of the peak")
def rnn_grad():
    return _rnn_step("none")


@case(("HS111",), "jax.checkpoint on the whole loss: the backward pass recomputes the "
      "forward scan and holds its activations whole; checkpointing the scan body instead "
      "recomputes one step at a time")
def rnn_grad_remat_whole():
    return _rnn_step("whole")


@case(("HS111",), "jax.checkpoint on the scan body keeps each step's input, 128 carries: "
      "still most of the peak, and checkpointing in segments cuts them")
def rnn_grad_remat_step():
    return _rnn_step("step")


@case((), "8 checkpointed segments of 16 steps: one carry per segment is kept")
def rnn_grad_remat_segments():
    return _rnn_step("segments")


@case((), "jax.checkpoint on the body of a scan over 8 MLP layers: what is left is each "
      "layer's input, most of the peak, but checkpointing 8 steps in segments would keep "
      "about 6 of them for a second recompute of the forward: the expert's way (issue 28's "
      "false alarm on the blind set's scan_mlp_train_remat_h100)")
def scan_mlp_remat_body():
    jax, jnp, np = _np()

    def loss(params, x):
        def body(h, p):
            w1, w2 = p
            return h + jnp.tanh(h @ w1) @ w2, None
        h, _ = jax.lax.scan(jax.checkpoint(body), x, params)
        return (h ** 2).mean()
    return _compiled(jax.value_and_grad(loss), (jnp.ones((8, 256, 1024)) * 0.01,
                                                jnp.ones((8, 1024, 256)) * 0.01),
                     jnp.ones((8192, 256)))


@case((), "a donated 4-layer tanh MLP step: what it saves for the backward pass are the "
      "layers' outputs, each the next layer's input, which any checkpoint keeps: remat "
      "would save nothing (issue 28's false alarm: 24 MiB of a 53 MiB peak)")
def mlp_step_layer_inputs():
    jax, jnp, np = _np()

    def loss(params, x):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return (x ** 2).mean()

    def step(params, x):
        g = jax.grad(loss)(params, x)
        return jax.tree.map(lambda p, gp: p - 0.01 * gp, params, g)
    params = [(jnp.ones((512, 512)), jnp.ones((512,))) for _ in range(4)]
    return _compiled(jax.jit(step, donate_argnums=(0,)), params, jnp.ones((4096, 512)))


@case((), "a forward pass saves nothing for a backward pass")
def rnn_forward_only():
    jax, jnp, np = _np()

    def f(w, xs, h):
        return jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x),) * 2, h, xs)[1]
    return _compiled(f, jnp.ones((256, 256)), jnp.ones((128, 64, 256)), jnp.ones((64, 256)))


# -- precision (HS112) -----------------------------------------------------------------

def _upcast(fixed: bool, target: str | None = None):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(x, w):
        if fixed:
            return jnp.tanh(jnp.dot(x, w, preferred_element_type=jnp.float32))
        return jnp.tanh(x.astype(jnp.float32) @ w.astype(jnp.float32))
    return _compiled(f, jnp.ones((4096, 4096), jnp.bfloat16), jnp.ones((4096, 4096), jnp.bfloat16),
                     target=target)


@case(("HS112",), "bf16 operands cast to f32 before a 4096^3 matmul on an H100: the matmul "
      "runs at the f32 rate", target="gpu")
def upcast_matmul_gpu():
    return _upcast(False, "h100")


@case((), "the same with preferred_element_type=f32", target="gpu")
def upcast_fixed_gpu():
    return _upcast(True, "h100")



@case((), "the forward pass casts an f32 activation to bf16 for a bf16 matmul; the backward "
      "pass converts the bf16 cotangent back to f32 for the f32 matmul before it: "
      "autodiff's convert (transpose(jvp())/convert_element_type), not the user's "
      "(issue 28's false alarm)", target="gpu")
def upcast_by_autodiff_gpu():
    jax, jnp, np = _np()

    def loss(w1, w2, x):
        h = (x @ w1).astype(jnp.bfloat16)
        return jnp.tanh(h @ w2).astype(jnp.float32).mean()
    return _compiled(jax.grad(loss, argnums=(0, 1)), jnp.ones((2048, 2048)),
                     jnp.ones((2048, 2048), jnp.bfloat16), jnp.ones((4096, 2048)),
                     target="h100")


@case((), "on the CPU XLA computes bf16 matmuls in f32 itself: nothing measurable to save")
def upcast_matmul_cpu():
    return _upcast(False)


# -- collectives on devices (HS113, HS114) ---------------------------------------------

def _sharded_matmul(target: str):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    return _compiled(lambda x, w: x @ w, jnp.ones((4096, 8192), jnp.bfloat16),
                     jnp.ones((8192, 4096), jnp.bfloat16), target=target, mesh="model=8",
                     shard={0: "None,model", 1: "model,None"})


@case((), "a matmul whose contraction is sharded ends in one all-reduce: on the CPU XLA "
      "runs collectives synchronously and nothing is to be done")
def sharded_matmul_cpu():
    jax, jnp, np = _np()
    import os
    if len(jax.devices()) < 8:  # pragma: no cover - the tests run with 8 CPU devices
        raise RuntimeError(f"needs 8 devices, XLA_FLAGS={os.environ.get('XLA_FLAGS')}")
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]), ("model",))
    x = jax.device_put(jnp.ones((1024, 2048)), NamedSharding(mesh, P(None, "model")))
    w = jax.device_put(jnp.ones((2048, 1024)), NamedSharding(mesh, P("model", None)))
    return _compiled(lambda x, w: x @ w, x, w)


@case(("HS114",), "the same all-reduce of the same array twice (written by hand: XLA's CSE "
      "merges JAX's own)")
def repeated_all_reduce():
    return _file("advisor/repeated_all_reduce.hlo")


@case(("HS114",), "torch_xla's form of it: each all-reduce has its own copy of the add "
      "computation and the second reads the array through a copy (written by hand after "
      "tests/data/torch_xla/sharded_train_8, whose two are 4 bytes)")
def repeated_all_reduce_torch_xla():
    return _file("advisor/repeated_all_reduce_torch_xla.hlo")


@case((), "two all-reduces of different arrays")
def two_different_all_reduces():
    return _file("advisor/two_all_reduces.hlo")


# -- TPU layouts (HS115) ---------------------------------------------------------------

def _tpu_lookup(rows: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    if rows:
        return _compiled(lambda t, i: t[i] * 2, jnp.ones((65536, 3)),
                         jnp.zeros((65536,), jnp.int32), target="tpu-v5e")
    return _compiled(lambda a, b, c, i: jnp.stack([a[i], b[i], c[i]]) * 2,
                     *[jnp.ones((65536,))] * 3, jnp.zeros((65536,), jnp.int32),
                     target="tpu-v5e")


@case(("HS115",), "gathering rows of an f32[65536,3] table on a TPU: XLA copies the table "
      "into a row-major tiled layout, each row padded to 128 lanes (32 MiB for 768 KiB)",
      target="tpu")
def tpu_row_gather_padded():
    return _tpu_lookup(True)


@case((), "the same table as three f32[65536] arrays (a structure of arrays), each gathered "
      "(a column gather from f32[3,65536] is padded as badly: XLA gathers rows inside)",
      target="tpu")
def tpu_column_gather():
    return _tpu_lookup(False)


@case((), "elementwise work on f32[65536,3] on a TPU: XLA lays it out column-major "
      "({0,1:T(4,128)}), a third padding at most", target="tpu")
def tpu_points_elementwise():
    jax, jnp, np = _np()
    return _compiled(lambda p, q: jnp.sin(p) * 2 + q, jnp.ones((65536, 3)), jnp.ones((65536, 3)),
                     target="tpu-v5e")


def _tpu_embeddings(width: int):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    return _compiled(lambda t, i, w: jnp.tanh(t[i] @ w), jnp.ones((32768, width)),
                     jnp.zeros((65536,), jnp.int32), jnp.ones((width, 256)), target="tpu-v5e")


@case(("HS115",), "embeddings of width 130 gathered on a TPU: the activations (and the "
      "table's copy) pad 130 to 256 lanes, x2.0 (issue 28: HS115 wanted a padding of 100% "
      "or more, and saw only the weights)", target="tpu")
def tpu_embeddings_130():
    return _tpu_embeddings(130)


@case((), "the same with width 128: no padding", target="tpu")
def tpu_embeddings_128():
    return _tpu_embeddings(128)


def _tpu_attention_scores(tokens: int):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
        a = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(q.dtype)
        return jnp.einsum("bhqk,bkhd->bqhd", a, v)
    x = jnp.ones((256, tokens, 8, 64), jnp.bfloat16)
    return _compiled(f, x, x, x, target="tpu-v5e")


@case(("HS115",), "attention over 129 tokens on a TPU v5e: the [256, 8, 129, 129] scores "
      "lay 129 on the 128 lanes, padded to 256, x2.2 (the eighth blind set's decision "
      "transformer; the batched matmuls, which a TPU runs as convolutions over dilated "
      "batch dimensions, were priced at every kernel tap, holes included, and hid it)",
      target="tpu")
def tpu_attention_129_tokens():
    return _tpu_attention_scores(129)


@case((), "the same attention over 128 tokens: the scores fill their tiles", target="tpu")
def tpu_attention_128_tokens():
    return _tpu_attention_scores(128)


@case((), "an attention block on a TPU v5e: async copies into on-chip memory (S(1)) are "
      "not layout changes", target="tpu")
def tpu_attention():
    jax, jnp, np = _np()

    def f(q, k, v):
        a = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k), axis=-1)
        return jnp.einsum("bqk,bkd->bqd", a, v)
    x = jnp.ones((8, 512, 128), jnp.bfloat16)
    return _compiled(f, x, x, x, target="tpu-v5e")


def _kernel_smoother(mapped: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def one(x, y):
        sq = jnp.sum(x * x, axis=-1)
        k = jnp.exp(-(sq[:, None] + sq[None, :] - 2.0 * x @ x.T))
        for _ in range(3):
            y = jnp.tanh(k @ y)
        return y

    def f(xs, ys):
        return jax.lax.map(lambda a: one(*a), (xs, ys)) if mapped else jax.vmap(one)(xs, ys)
    return _compiled(f, jnp.ones((8, 2048, 3)), jnp.ones((8, 2048, 16)))


@case(("HS128",), "a kernel smoother vmapped over 8 problems: the 8 [2048, 2048] kernels "
      "(128 MiB) are alive together at the peak, 16 MiB per problem (the seventh and eighth "
      "blind sets' vmapped kernel ridge, Sinkhorn, dense CRF and k-NN programs)")
def kernel_smoother_vmapped():
    return _kernel_smoother(False)


@case((), "the same with lax.map over the problems: one kernel at a time")
def kernel_smoother_mapped():
    return _kernel_smoother(True)


# -- whole programs --------------------------------------------------------------------

@case(("HS110",), "an MLP training step on a TPU v5e without donation", target="tpu")
def tpu_mlp_step():
    jax, jnp, np = _np()

    def loss(params, x):
        for w in params:
            x = jax.nn.relu(x @ w)
        return (x ** 2).mean()

    def step(params, x):
        g = jax.grad(loss)(params, x)
        return [p - 0.01 * gp for p, gp in zip(params, g)]
    params = [jnp.ones((2048, 2048), jnp.bfloat16) for _ in range(4)]
    return _compiled(step, params, jnp.ones((256, 2048), jnp.bfloat16), target="tpu-v5e")


@case(("HS116",), "the same step donated on 8 H100s with FSDP: the four layers' full "
      "gradients (32 MiB of the 36 MiB peak) wait together for one combined reduce-scatter "
      "(HS116: a scan over the layers holds one layer's at a time).  XLA also combines the "
      "four weights' all-gathers into one 21 MiB all-gather at the start that no kernel "
      "overlaps; HS113 once fired on it, but XLA's pipelining flags act only on loops "
      "(compiled, they saved nothing) and the fix is HS116's scan: quiet since the second "
      "blind set", target="gpu")
def gpu_fsdp_step_donated():
    jax, jnp, np = _np()

    def loss(params, x):
        for w in params:
            x = jax.nn.relu(x @ w)
        return (x ** 2).mean()

    def step(params, x):
        g = jax.grad(loss)(params, x)
        return [p - 0.01 * gp for p, gp in zip(params, g)]
    params = [jnp.ones((2048, 2048), jnp.bfloat16) for _ in range(4)]
    return _compiled(jax.jit(step, donate_argnums=(0,)), params,
                     jnp.ones((256, 2048), jnp.bfloat16), target="h100x8",
                     shard={0: "data", 1: "data"})


@case(("HS116",), "FSDP without a scan on 8 CPU devices: 8 layers' weights all-gathered "
      "in a Python loop and alive together from the forward into the backward pass; the "
      "gathered weights are HS116's, not independent chains for HS106 (issue 28's false "
      "alarm on the blind set's fsdp_unscanned_cpu8)")
def fsdp_unscanned_cpu():
    jax, jnp, np = _np()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
    rows = NamedSharding(mesh, P("data", None))

    def loss(ws, x):
        for w in ws:
            x = jax.nn.gelu(x @ w)
        return (x ** 2).mean()

    def step(ws, x):
        return jax.tree.map(lambda w, g: w - 1e-3 * g, ws, jax.grad(loss)(ws, x))
    ws = [jax.ShapeDtypeStruct((4096, 4096), jnp.float32, sharding=rows) for _ in range(8)]
    return _compiled(jax.jit(step, donate_argnums=(0,)), ws,
                     jax.ShapeDtypeStruct((2048, 4096), jnp.float32, sharding=rows))


def _residual_layers(sharded):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))

    def loss(ws, x):
        for i in range(ws.shape[0]):
            w = (jax.lax.with_sharding_constraint(ws[i], NamedSharding(mesh, P()))
                 if sharded else ws[i])
            x = x + jax.nn.gelu(x @ w[0]) @ w[1]
        return (x ** 2).mean()

    def step(ws, x):
        return ws - 1e-3 * jax.grad(loss)(ws, x)
    kw = ({"sharding": NamedSharding(mesh, P(None, None, "data", None))} if sharded else {})
    xs = ({"sharding": NamedSharding(mesh, P("data", None))} if sharded else {})
    return _compiled(jax.jit(step, donate_argnums=(0,)),
                     jax.ShapeDtypeStruct((16, 2, 512, 512), jnp.float32, **kw),
                     jax.ShapeDtypeStruct((256, 512), jnp.float32, **xs))


@case(("HS116",), "FSDP over a Python loop of 16 residual layers on 8 CPU devices: each "
      "layer's gathered weights kept for the backward pass (HS116), and the loop unrolled "
      "16 times; both have one fix, a scan over the layers, said once by HS116 (HS117 "
      "quiet: the sixth blind set's fsdp_mlp_unscanned_cpu8)")
def fsdp_python_loop_of_layers():
    return _residual_layers(True)


@case(("HS111", "HS117"), "the same 16 residual layers in a Python loop, unsharded: no "
      "gathered weights, so the unrolled loop is said by HS117 itself (and the forward "
      "values kept for the backward pass, 64% of the peak, by HS111)")
def python_loop_of_layers():
    return _residual_layers(False)


@case((), "a sort (every 128th of each sorted row kept: quantiles, which need the whole "
      "sort) and a gather (an embedding lookup): nothing to fix")
def sort_and_gather():
    jax, jnp, np = _np()

    def f(table, ids, x):
        return jnp.sort(x, axis=-1)[:, ::128] + table[ids].sum(-1, keepdims=True)
    return _compiled(f, jnp.ones((4096, 256)), jnp.zeros((512,), jnp.int32),
                     jnp.ones((512, 1024)))


@case((), "a tiny program: nothing is worth a line")
def tiny():
    jax, jnp, np = _np()
    return _compiled(lambda x: jnp.sum(jnp.stack([x, x], -1), -1), jnp.ones((4,)))


@case((), "seed 004's well-fused function: one kernel")
def well_fused():
    return _file("generated/f_well_fused.hlo")


@case((), "the distributed FFT of jax-hpc-profiler's report (seed 000), pencils 4x2: its "
      "transposes are the algorithm's all-to-alls")
def fft_pencil():
    return _file("generated/fft_cont_pencil_4x2.hlo")


# -- how the program is written (HS116-HS122) ------------------------------------------

@case(("HS113",), "gpu_fsdp_step_donated's step with 8 layers in a lax.scan over stacked "
      "weights: one layer's weights and gradient at a time (its per-layer all-gather is "
      "still exposed: HS113)", target="gpu")
def fsdp_layers_scanned_gpu():
    jax, jnp, np = _np()

    def loss(params, x):
        return (jax.lax.scan(lambda x, w: (jax.nn.relu(x @ w), None), x, params)[0] ** 2).mean()

    def step(params, x):
        return params - 0.01 * jax.grad(loss)(params, x)
    return _compiled(jax.jit(step, donate_argnums=(0,)), jnp.ones((8, 2048, 2048), jnp.bfloat16),
                     jnp.ones((256, 2048), jnp.bfloat16), target="h100x8",
                     shard={0: "None,data", 1: "data"})


@case(("HS113",), "fsdp_layers_scanned_gpu with jax.checkpoint on the scan body: the "
      "backward pass's step gathers its layer twice, once for the recompute and once for "
      "its own matmul, which is what the checkpoint recomputes, not a repeat to remove (no "
      "HS114: issue 28's false alarm on the blind set's fsdp_scanned_h100x8)", target="gpu")
def fsdp_layers_scanned_remat_gpu():
    jax, jnp, np = _np()

    def loss(params, x):
        body = jax.checkpoint(lambda x, w: (jax.nn.gelu(
            jnp.dot(x, w, preferred_element_type=jnp.float32).astype(x.dtype)), None))
        return (jax.lax.scan(body, x, params)[0].astype(jnp.float32) ** 2).mean()

    def step(params, x):
        return params - 0.01 * jax.grad(loss)(params, x)
    return _compiled(jax.jit(step, donate_argnums=(0,)), jnp.ones((8, 4096, 4096), jnp.bfloat16),
                     jnp.ones((2048, 4096), jnp.bfloat16), target="h100x8",
                     shard={0: "None,data", 1: "data"})


def _leapfrog(n: int, loop: bool, lowered: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def step(x, v):
        a = -jnp.sin(x) - 0.1 * v + 0.01 * jnp.cos(2.0 * x)
        v = v + 0.005 * a
        x = x + 0.01 * v
        a = -jnp.sin(x) - 0.1 * v + 0.01 * jnp.cos(2.0 * x)
        return x, v + 0.005 * a

    def f(x, v):
        if loop:
            return jax.lax.fori_loop(0, n, lambda i, s: step(*s), (x, v))
        for _ in range(n):
            x, v = step(x, v)
        return x, v
    a = jnp.ones((256, 256))
    return _lowered(f, a, a) if lowered else _compiled(f, a, a)


@case(("HS117",), "a Python loop of 100 leapfrog steps, as JAX gives it to XLA: 2,200 "
      "instructions, 99% of them copies of one step (judged before optimization: XLA's "
      "compile is what it costs)")
def python_loop_unrolled_before_optimization():
    return _leapfrog(100, False, True)


@case(("HS117",), "the same compiled: 99 copies of the step's fused kernels")
def python_loop_unrolled():
    return _leapfrog(100, False, False)


@case((), "the same steps in a fori_loop: one copy of the body")
def python_loop_as_fori_loop():
    return _leapfrog(100, True, False)


@case((), "the fori_loop before optimization")
def python_loop_as_fori_loop_before_optimization():
    return _leapfrog(100, True, True)


@case((), "an Adam update over 100 distinct parameters (jax.tree.map): 100 copies of the "
      "same update, each on its own parameter, none on another's result: per-parameter "
      "code, not a loop to scan (issue 28's false alarm on the blind set's "
      "clip_many_small_params_h100)")
def adam_per_parameter():
    jax, jnp, np = _np()

    def update(params, grads, m, v):
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)
        params = jax.tree.map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8),
                              params, m, v)
        return params, m, v
    tree = [jnp.ones((64, 64)) for _ in range(100)]
    return _compiled(jax.jit(update, donate_argnums=(0, 2, 3)), tree, tree, tree, tree)


def _dft(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    n = 1024

    def matrix():
        k = jnp.arange(n)
        return jnp.exp(-2j * jnp.pi * jnp.outer(k, k).astype(jnp.float32) / n)
    if fixed:
        return _compiled(lambda x, w: x.astype(jnp.complex64) @ w, jnp.ones((256, n)), matrix())
    return _compiled(lambda x: x.astype(jnp.complex64) @ matrix(), jnp.ones((256, n)))


@case(("HS118",), "a 1024-point DFT matrix (8 MiB) built from exp of an iota inside the "
      "function: its exp, cos and sin run on every call")
def dft_matrix_rebuilt():
    return _dft(False)


@case((), "the DFT matrix computed once and passed as an argument")
def dft_matrix_as_argument():
    return _dft(True)


def _gaussian_kernel(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def matrix():
        g = jnp.linspace(0.0, 1.0, 2048)
        return jnp.exp(-((g[:, None] - g[None, :]) ** 2) / 0.02)
    if fixed:
        return _compiled(lambda x, k: k @ x, jnp.ones((2048, 64)), matrix())
    return _compiled(lambda x: matrix() @ x, jnp.ones((2048, 64)))


@case(("HS118",), "a Gaussian kernel matrix (16 MiB) built with one exp per element inside "
      "the function and multiplied by: rebuilt on every call (issue 28's miss on the blind "
      "set's rbf_kernel_rebuilt)")
def gaussian_kernel_rebuilt():
    return _gaussian_kernel(False)


@case((), "the kernel matrix computed once and passed as an argument")
def gaussian_kernel_as_argument():
    return _gaussian_kernel(True)


def _gp_weights(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def rbf(a, b):  # type: ignore[no-untyped-def]
        return jnp.exp(-0.5 * jnp.sum((a[:, None] - b[None]) ** 2, -1) / 0.01)

    def train():  # fixed training inputs: the kernel matrix and the weights it solves for
        x = jnp.linspace(0.0, 1.0, 1024)[:, None]
        k = rbf(x, x) + 1e-3 * jnp.eye(1024)
        return x, jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(k), True), jnp.sin(6 * x[:, 0]))
    if fixed:
        x, alpha = train()
        return _compiled(lambda xt, x, a: rbf(xt, x) @ a, jnp.ones((64, 1)), x, alpha)

    def predict(xt):  # type: ignore[no-untyped-def]
        x, alpha = train()
        return rbf(xt, x) @ alpha
    return _compiled(predict, jnp.ones((64, 1)))


@case(("HS118",), "a Gaussian process's kernel matrix built from fixed inputs, factorized "
      "and solved on every call: the result (the weights) is small, the rebuilt matrix "
      "and its Cholesky are not (blind set 5's gp_predict_refactors_training_kernel)")
def gp_weights_solved_every_call():
    return _gp_weights(False)


@case((), "the weights solved once and passed as an argument")
def gp_weights_as_argument():
    return _gp_weights(True)


def _dct(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    n = 4096

    def basis():
        k = jnp.arange(n, dtype=jnp.float32)
        return jnp.cos(jnp.pi / n * (k[None, :] + 0.5) * k[:, None])
    if fixed:
        return _compiled(lambda x, b: b @ x, jnp.ones((n, 256)), basis(), target="h100")
    return _compiled(lambda x: basis() @ x, jnp.ones((n, 256)), target="h100")


@case(("HS118",), "a DCT basis (64 MiB) built from iota on an H100: XLA writes the angles to "
      "memory and fuses the cosine into the GEMM that reads them, so every call computes "
      "16M cosines and writes 64 MiB (issue 28's miss on the blind set's "
      "dct_basis_rebuilt_h100)", target="gpu")
def dct_basis_rebuilt_gpu():
    return _dct(False)


@case((), "the DCT basis computed once and passed as an argument", target="gpu")
def dct_basis_as_argument_gpu():
    return _dct(True)


def _embedding(onehot: bool, target: str | None = None):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    vocab, width, batch = 8192, 256, 2048

    def f(table, ids):
        rows = jax.nn.one_hot(ids, vocab) @ table if onehot else table[ids]
        return jnp.tanh(rows)
    return _compiled(f, jnp.ones((vocab, width)), jnp.zeros((batch,), jnp.int32), target=target)


@case(("HS119",), "an embedding lookup as one_hot(ids, 8192) @ table: a 64 MiB one-hot and "
      "an 8.6 GFLOP matmul for 2 MiB of rows")
def onehot_embedding():
    return _embedding(True)


@case(("HS119",), "the same on an H100: XLA fuses the compare into the matmul but stores the "
      "64 MiB iota it compares with", target="gpu")
def onehot_embedding_gpu():
    return _embedding(True, "h100")


@case((), "table[ids]: a gather of the rows")
def embedding_gather():
    return _embedding(False)


def _printing_loop(how: str):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(x):
        def body(x, _):
            x = jnp.tanh(x) * 1.01
            if how == "print":
                jax.debug.print("norm {n}", n=jnp.linalg.norm(x))
            if how == "callback":
                return x, jax.pure_callback(lambda a: np.asarray(a) * 2,
                                            jax.ShapeDtypeStruct((), jnp.float32), x.sum())
            return x, jnp.linalg.norm(x) if how == "collect" else None
        return jax.lax.scan(body, x, None, length=100)
    return _compiled(f, jnp.ones((1024, 1024)))


@case(("HS120",), "jax.debug.print in each of 100 scan steps: 100 stops for the host per call")
def debug_print_in_loop():
    return _printing_loop("print")


@case(("HS120",), "a pure_callback in each of 100 scan steps")
def callback_in_loop():
    return _printing_loop("callback")


@case((), "the norms collected as the scan's outputs, printed once by the caller")
def norms_collected_in_loop():
    return _printing_loop("collect")


def _many_sums(batched: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(xs):
        if batched:
            return (jnp.tanh(jnp.stack(xs)).sum(axis=1) * 2 + jnp.stack(xs)[:, 0])
        return jnp.stack([jnp.tanh(x).sum() * 2 + x[0] for x in xs])
    return _compiled(f, [jnp.ones((256,)) * i for i in range(160)], target="h100")


@case(("HS121",), "160 small arrays each reduced on its own on an H100 (a list "
      "comprehension over distinct arrays: copies that do not depend on each other, for "
      "stacking, not a loop for lax.scan, so no HS117): about 290 kernels of a few KiB "
      "each, launch-bound", target="gpu")
def many_small_reductions_gpu():
    return _many_sums(False)


@case((), "the same arrays stacked and reduced at once: a handful of kernels", target="gpu")
def stacked_reductions_gpu():
    return _many_sums(True)


def _accumulate(how: str):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    from jax.sharding import Mesh, PartitionSpec as P
    try:
        from jax import shard_map
        checks = {"check_vma": how in ("implicit", "pcast")}
    except ImportError:  # pragma: no cover - older JAX
        from jax.experimental.shard_map import shard_map
        checks = {"check_rep": how == "implicit"}
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))

    def loss(w, x):
        return (jnp.tanh(x @ w) ** 2).mean()

    def local(w, xs):
        # "pcast": the gradient of a per-device copy, so it stays per device in the loop
        wg = jax.lax.pcast(w, "data", to="varying") if how == "pcast" else w

        def body(acc, x):
            g = jax.grad(loss)(wg, x)
            return acc + (jax.lax.psum(g, "data") if how == "each" else g), None
        acc, _ = jax.lax.scan(body, jnp.zeros_like(wg), xs)
        return w - 0.01 * (jax.lax.psum(acc, "data") if how in ("after", "pcast") else acc)
    f = shard_map(local, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P(), **checks)
    return _compiled(jax.jit(f), jnp.ones((1024, 1024)), jnp.ones((16, 512, 1024)))


@case(("HS122",), "gradient accumulation over 16 microbatches on 8 devices that psums each "
      "microbatch's 4 MiB gradient inside the scan: 15 all-reduces too many")
def allreduce_per_microbatch():
    return _accumulate("each")


@case(("HS122",), "the gradient of a replicated weight inside shard_map with its checks on "
      "(check_vma): JAX's transpose psums it for each microbatch by itself, though the code "
      "writes no psum")
def allreduce_per_microbatch_implicit():
    return _accumulate("implicit")


def _accumulate_jit(per_device: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
    rep, dat = NamedSharding(mesh, P()), NamedSharding(mesh, P(None, "data"))

    def loss(w, x):
        return (jnp.tanh(x @ w[0]) @ w[1]).mean()

    def step(w, xs):
        if per_device:  # the whole batch at once: one all-reduce
            g = jax.grad(lambda w: loss(w, xs.reshape(-1, xs.shape[-1])))(w)
        else:
            g = jax.lax.scan(lambda a, x: (jax.tree.map(jnp.add, a, jax.grad(loss)(w, x)),
                                           None), jax.tree.map(jnp.zeros_like, w), xs)[0]
        return jax.tree.map(lambda p, gi: p - 1e-3 * gi, w, g)
    w = [jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=rep) for _ in range(2)]
    return _compiled(jax.jit(step, donate_argnums=(0,)), w,
                     jax.ShapeDtypeStruct((8, 1024, 1024), jnp.float32, sharding=dat))


@case(("HS122",), "gradient accumulation written with jit and shardings on 8 devices: XLA "
      "all-reduces each microbatch's gradient inside the scan and adds it, transposed, to "
      "the accumulator (issue 28's miss on the blind set's grad_accum_jit_cpu8)")
def allreduce_per_microbatch_jit():
    return _accumulate_jit(False)


@case((), "the same gradient over the whole batch at once, no accumulation loop: one "
      "all-reduce")
def allreduce_after_accumulation_jit():
    return _accumulate_jit(True)


@case(("HS111",), "a tensor-parallel residual stack in a scan on 8 H100s (w1 column-, w2 "
      "row-parallel; mesh data=2, model=4): each layer's all-reduce is added into the "
      "carried residual, which the next layer computes with, so it cannot be reduced once "
      "after the loop (a new user's trial: HS122 said it could); the saved activations "
      "are most of the peak (HS111)", target="gpu")
def allreduce_into_residual_stream():
    jax, jnp, np = _np()

    def layer(x, w):
        return x + jax.nn.gelu(x @ w[0]) @ w[1], None

    def loss(w1, w2, x):
        return jnp.mean(jax.lax.scan(layer, x, (w1, w2))[0] ** 2)
    return _compiled(jax.jit(jax.grad(loss, argnums=(0, 1))),
                     jax.ShapeDtypeStruct((8, 2048, 8192), jnp.bfloat16),
                     jax.ShapeDtypeStruct((8, 8192, 2048), jnp.bfloat16),
                     jax.ShapeDtypeStruct((4096, 2048), jnp.bfloat16), target="h100x8",
                     mesh="data=2,model=4",
                     shard={0: "None,None,model", 1: "None,model,None", 2: "data,None"})


@case((), "the accumulation reduced once, after the scan (check_vma off, so the gradients "
      "stay per device)")
def allreduce_after_accumulation():
    return _accumulate("after")


@case((), "the accumulation reduced once, after the scan, with check_vma on: the gradient "
      "is taken with respect to jax.lax.pcast(w, 'data', to='varying'), so it stays per "
      "device in the loop (HS122's fix for allreduce_per_microbatch_implicit)")
def allreduce_after_accumulation_pcast():
    return _accumulate("pcast")


# -- issue 28's second blind set (tests/advisor_blind2.py): its false alarms and misses,
# each as a pattern and its fixed twin (the set's TUNED says which program showed it).

def _tpu_classifier(classes: int):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def step(w, x, labels):
        def loss(w):
            lp = jax.nn.log_softmax(x @ w, axis=-1)
            return -jnp.mean(jnp.take_along_axis(lp, labels[:, None], 1))
        return w - 0.1 * jax.grad(loss)(w)
    return _compiled(jax.jit(step, donate_argnums=(0,)), jnp.ones((256, classes)),
                     jnp.ones((65536, 256)), jnp.zeros((65536,), jnp.int32),
                     target="tpu-v5e")


@case((), "a 10-class softmax step on a TPU: XLA keeps the padded f32[N,10] logits in the "
      "TPU's on-chip memory (S(1)), which holds no HBM and moves none: HS115 quiet "
      "(issue 28's false alarm on the second blind set's classifier_10_classes_tpu)",
      target="tpu")
def tpu_logits_on_chip():
    return _tpu_classifier(10)


@case(("HS115",), "a batched 3x3 product on a TPU: the f32[N,3,3] result pads its two minor "
      "dimensions to tiles (x57); XLA's copy that converts the operand to bf16 for the "
      "MXU is its precision, not a layout the user chose: HS103 quiet (the second blind "
      "set's rigid_body_batched_3x3_tpu)", target="tpu")
def tpu_batched_3x3():
    jax, jnp, np = _np()
    return _compiled(jax.jit(lambda r, w: r + 0.01 * jnp.einsum("nij,njk->nik", r, w),
                             donate_argnums=(0,)),
                     jnp.ones((32768, 3, 3)), jnp.ones((32768, 3, 3)), target="tpu-v5e")


def _gp_mean(inverse: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(x, y, xs):
        def k(a, b):
            d = jnp.sum(a * a, 1)[:, None] + jnp.sum(b * b, 1)[None, :] - 2 * a @ b.T
            return jnp.exp(-0.5 * d)
        kxx = k(x, x) + 1e-3 * jnp.eye(x.shape[0])
        if inverse:
            return k(xs, x) @ (jnp.linalg.inv(kxx) @ y)
        c = jax.scipy.linalg.cho_factor(kxx, lower=True)
        return k(xs, x) @ jax.scipy.linalg.cho_solve(c, y)
    return _compiled(f, jnp.ones((1024, 16)), jnp.ones((1024, 8)), jnp.ones((2048, 16)))


@case(("HS123",), "a Gaussian-process mean with jnp.linalg.inv(K) @ y: the 1024x1024 "
      "inverse is solved for against the identity and only multiplied by; the copy out "
      "of LAPACK's column-major layout is JAX's, not the user's: HS103 quiet (the second "
      "blind set's gp_posterior_explicit_inverse)")
def gp_explicit_inverse():
    return _gp_mean(True)


@case((), "the same mean with cho_factor and cho_solve: the solve runs for y's 8 columns")
def gp_cholesky_solve():
    return _gp_mean(False)


def _routing(top_k: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(logits):
        if top_k:
            return jax.lax.top_k(logits, 8)
        idx = jnp.argsort(-logits, axis=-1)[:, :8]
        return jnp.take_along_axis(logits, idx, axis=-1), idx
    return _compiled(f, jnp.ones((2048, 4096)))


@case(("HS124",), "the top 8 of 4096 scores per row with jnp.argsort(-x)[:, :8]: a full "
      "sort of keys and indices, 8 of 4096 kept; the sort's outputs are one kernel's, not "
      "independent chains: HS106 quiet (the second blind set's routing_argsort_topk_h100)")
def argsort_for_top_k():
    return _routing(False)


@case((), "the same with jax.lax.top_k(x, 8)")
def top_k_routing():
    return _routing(True)


def _gnn_checkpointed():  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def loss(ws, h, src, dst):
        @jax.checkpoint
        def layer(h, w):
            m = jax.nn.relu((h @ w)[src])
            return jnp.tanh(h + jax.ops.segment_sum(m, dst, num_segments=h.shape[0])), None
        return jnp.mean(jax.lax.scan(layer, h, ws)[0] ** 2)
    e = 65536
    return _compiled(jax.jit(jax.grad(loss)), jnp.ones((4, 128, 128)), jnp.ones((4096, 128)),
                     jnp.zeros((e,), jnp.int32), jnp.zeros((e,), jnp.int32))


@case((), "a GNN whose scanned layer is checkpointed: the backward loop recomputes one "
      "layer's messages at a time, which is what the checkpoint is for: HS111 quiet "
      "(the second blind set's gnn_scan_remat)")
def gnn_scan_checkpointed():
    return _gnn_checkpointed()


@case(("HS116",), "ZeRO-3 on 8 CPU devices with every layer's weights gathered up front "
      "(with_sharding_constraint to replicated): the gathered weights the backward pass "
      "reads are HS116's, not activations for HS111 (the second blind set's "
      "zero3_gather_all_upfront_cpu8)")
def zero3_gathered_up_front():
    jax, jnp, np = _np()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
    rows = NamedSharding(mesh, P("data", None))

    def step(ws, x):
        def loss(ws):
            ws = [jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P())) for w in ws]
            h = x
            for w in ws:
                h = jnp.tanh(h @ w)
            return jnp.mean(h ** 2)
        return [w - 1e-3 * g for w, g in zip(ws, jax.grad(loss)(ws))]
    ws = [jax.ShapeDtypeStruct((2048, 2048), jnp.float32, sharding=rows) for _ in range(6)]
    return _compiled(jax.jit(step, donate_argnums=(0,)), ws,
                     jax.ShapeDtypeStruct((1024, 2048), jnp.float32, sharding=rows))


def _masked_sweeps(inside: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def mask(n):  # type: ignore[no-untyped-def]
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        return ((i + j) % 2 == 0).astype(jnp.float32)

    def f(u, rhs):
        red = None if inside else mask(u.shape[0])

        def sweep(_, u):
            m = mask(u.shape[0]) if inside else red
            return u + m * 0.25 * (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 1) - rhs - u)
        return jax.lax.fori_loop(0, 20, sweep, u)
    return _compiled(jax.jit(f, donate_argnums=(0,)), jnp.ones((2048, 2048)),
                     jnp.ones((2048, 2048)))


@case(("HS104",), "a red-black mask built from iota before a fori_loop and read from memory "
      "in every sweep: the code builds it outside the loop (its iotas' op_names are not "
      "the loop body's), so building it inside the sweep fuses it (the second blind set's "
      "red_black_masks_materialized_h100)")
def mask_built_before_loop():
    return _masked_sweeps(False)


@case((), "the mask built inside the sweep: it fuses into the update")
def mask_built_in_loop():
    return _masked_sweeps(True)


def _hadamard(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def h(n):  # type: ignore[no-untyped-def]
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        return 1.0 - 2.0 * (jax.lax.population_count(i & j) & 1).astype(jnp.float32)
    if fixed:
        return _compiled(lambda x, m: m @ x, jnp.ones((2048, 256)), h(2048), target="h100")
    return _compiled(lambda x: h(x.shape[0]) @ x, jnp.ones((2048, 256)), target="h100")


@case(("HS118",), "a Walsh-Hadamard matrix (16 MiB) rebuilt from iota with popcounts on "
      "every call and multiplied by on an H100: no transcendental, but a fixed matrix a "
      "matmul reads (the second blind set's hadamard_rebuilt_h100)", target="gpu")
def hadamard_rebuilt_gpu():
    return _hadamard(False)


@case((), "the Hadamard matrix built once and passed as an argument", target="gpu")
def hadamard_as_argument_gpu():
    return _hadamard(True)


def _conv_upcast(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(x, w):
        if fixed:
            y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                             preferred_element_type=jnp.float32)
        else:
            y = jax.lax.conv_general_dilated(x.astype(jnp.float32), w.astype(jnp.float32),
                                             (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y).astype(jnp.bfloat16)
    return _compiled(f, jnp.ones((16, 64, 64, 128), jnp.bfloat16),
                     jnp.ones((3, 3, 128, 128), jnp.bfloat16), target="h100")


@case(("HS112",), "a convolution of bf16 activations and filters upcast to f32 on an H100: "
      "cuDNN's custom-call runs it in f32 on a 32 MiB f32 copy (the second blind set's "
      "conv_upcast_h100)", target="gpu")
def conv_upcast_gpu():
    return _conv_upcast(False)


@case((), "the bf16 convolution with preferred_element_type=f32", target="gpu")
def conv_bf16_gpu():
    return _conv_upcast(True)


@case(("HS119",), "one_hot(ids, 8192) @ table on a TPU: XLA runs the matmul as a "
      "convolution with the one-hot fused in (the second blind set's onehot_embedding_tpu)",
      target="tpu")
def onehot_embedding_tpu():
    return _embedding(True, "tpu-v5e")


@case((), "table[ids] on a TPU", target="tpu")
def embedding_gather_tpu():
    return _embedding(False, "tpu-v5e")


def _sharded_mlp(gather: str):  # type: ignore[no-untyped-def]
    """An MLP forward in shard_map on 8 H100s: `gather` "rows" all-gathers the sequence-
    sharded activations before the first matmul (sequence parallelism), "weights"
    all-gathers row-sharded weights along the axis the matmul contracts (FSDP)."""
    jax, jnp, np = _np()
    from jax.sharding import PartitionSpec as P

    def local(x, w1, w2):
        if gather == "rows":
            x = jax.lax.all_gather(x, "model", tiled=True)
        else:
            w1 = jax.lax.all_gather(w1, "model", tiled=True)
            w2 = jax.lax.all_gather(w2, "model", tiled=True)
        h = jax.nn.gelu(jnp.dot(x, w1, preferred_element_type=jnp.float32).astype(x.dtype))
        return jnp.dot(h, w2, preferred_element_type=jnp.float32).astype(x.dtype)
    rows = P("model", None)
    if gather == "rows":
        specs, out = (rows, P(None, "model"), P("model", None)), P(None, "model")
    else:
        specs, out = (rows, rows, rows), rows
    f = jax.jit(jax.shard_map(local, in_specs=specs, out_specs=out))
    shard = {0: "model,None", 1: "None,model" if gather == "rows" else "model,None",
             2: "model,None"}
    return _compiled(f, jnp.ones((16384, 2048), jnp.bfloat16),
                     jnp.ones((2048, 8192), jnp.bfloat16), jnp.ones((8192, 2048), jnp.bfloat16),
                     target="h100x8", mesh="model=8", shard=shard)


@case(("HS113",), "sequence parallelism on 8 H100s: the activations all-gathered (64 MiB) "
      "just before the matmul that keeps the gathered rows, nothing to overlap: a "
      "collective matmul hides it, estimated (XLA's pipelining flags act only on loops: "
      "the second blind set's sequence_parallel_mlp_h100x8)", target="gpu")
def sequence_parallel_gather_gpu():
    return _sharded_mlp("rows")


@case((), "FSDP's weights all-gathered along the axis the matmul contracts, outside any "
      "loop: XLA's flags change nothing there and prefetching weights is a scan's job "
      "(HS116 where several layers' are alive together): HS113 quiet (the second blind "
      "set's fsdp_shard_map_gathers_h100x8)", target="gpu")
def fsdp_weights_gathered_gpu():
    return _sharded_mlp("weights")


def _verlet_tpu(unroll: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(x, v, k):
        def step(_, s):
            x, v = s
            v = v - 0.005 * k * x
            x = x + 0.01 * v
            return x, v - 0.005 * k * x
        return jax.lax.fori_loop(0, 8, step, (x, v), unroll=unroll)
    a = jnp.ones((2048, 2048))
    return _compiled(jax.jit(f, donate_argnums=(0, 1)), a, a, a, target="tpu-v5e")


@case(("HS105",), "eight Verlet steps in a fori_loop on a TPU: the while carries no "
      "known_trip_count there (its count is read from the condition, i < 8, and the body's "
      "counter) and the counter's scalar add is a kernel of its own (the second blind "
      "set's verlet_short_fori_tpu)", target="tpu")
def short_loop_tpu():
    return _verlet_tpu(False)


@case((), "the same loop unrolled on a TPU: one fused pass", target="tpu")
def short_loop_unrolled_tpu():
    return _verlet_tpu(True)


def _accumulate_unrolled(each: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    from jax.sharding import Mesh, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))

    def loss(w, x):
        return (jnp.tanh(x @ w) ** 2).mean()

    def local(w, xs):
        wv = jax.lax.pcast(w, "data", to="varying")
        gs = [jax.grad(loss)(wv, xs[i]) for i in range(xs.shape[0])]
        if each:
            gs = [jax.lax.psum(g, "data") for g in gs]
        acc = sum(gs[1:], gs[0])
        return w - 0.01 * (acc if each else jax.lax.psum(acc, "data"))
    f = jax.shard_map(local, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P())
    return _compiled(jax.jit(f), jnp.ones((1024, 1024)), jnp.ones((4, 512, 1024)))


@case(("HS122",), "four microbatches in a Python loop, each gradient psummed before they "
      "are added: XLA combines the four all-reduces into one, which still reduces four "
      "gradients where the sum needs one (the second blind set's "
      "grad_accum_unrolled_psum_cpu8)")
def allreduce_per_microbatch_unrolled():
    return _accumulate_unrolled(True)


@case((), "the four gradients added first and psummed once")
def allreduce_after_unrolled_accumulation():
    return _accumulate_unrolled(False)


def _prefix_mean(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(x):
        t = x.shape[0]
        total = (jnp.cumsum(x, 0) if fixed
                 else jnp.tril(jnp.ones((t, t), jnp.float32)) @ x)
        return total / jnp.arange(1, t + 1, dtype=jnp.float32)[:, None]
    return _compiled(f, jnp.ones((2048, 256)))


@case((), "a running mean as tril(ones) @ x: the 16 MiB triangular mask is one compare per "
      "element, a mask and not a matrix worth passing in (HS118 quiet; the expert's fix, "
      "a cumsum, has no rule: the third blind set's running_mean_triangular_matmul_h100)")
def prefix_mean_triangular_matmul():
    return _prefix_mean(False)


@case((), "the same running mean with jnp.cumsum")
def prefix_mean_cumsum():
    return _prefix_mean(True)


def _kde(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(q, data):
        d2 = (jnp.sum(q * q, 1)[:, None] - 2 * q @ data.T
              + jnp.sum(data * data, 1)[None, :])
        return jnp.log(jnp.exp(-0.5 * d2).mean(1))
    if fixed:
        return _compiled(f, jnp.ones((2048, 8)), jnp.ones((4096, 8)))
    return _compiled(jax.jit(lambda qs, data: jnp.concatenate([f(q, data) for q in qs])),
                     [jnp.ones((2048, 8))] * 2, jnp.ones((4096, 8)))


@case((), "a kernel density estimate whose Gaussian kernel comes from the arguments: the "
      "only array built from constants is a broadcast scalar the fused matmul reads, not a "
      "matrix rebuilt (HS118 quiet: the third blind set's kde_blocks_concatenated)")
def kde_two_query_blocks():
    return _kde(False)


@case((), "the same density estimate for one query block")
def kde_one_query_block():
    return _kde(True)



def _conjugate_gradient(fixed: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def step(i, state):  # type: ignore[no-untyped-def]
        x, r, p, rr = state
        ap = 4 * p - sum(jnp.roll(p, s, a) for s in (1, -1) for a in (0, 1))
        alpha = rr / jnp.sum(p * ap)
        r = r - alpha * ap
        rr_new = jnp.sum(r * r)
        return x + alpha * p, r, r + (rr_new / rr) * p, rr_new

    def f(b):
        state = (jnp.zeros_like(b), b, b, jnp.sum(b * b))
        if fixed:
            return jax.lax.fori_loop(0, 48, step, state)[0]
        for i in range(48):
            state = step(i, state)
        return state[0]
    return _compiled(f, jnp.ones((1024, 1024)), target="h100")


@case(("HS117",), "conjugate gradient as a Python loop of 48 steps on an H100: its dot "
      "products and scalar updates are hundreds of tiny kernels, but each step waits for "
      "the one before, so batching cannot remove their launches (HS121 quiet; the loop is "
      "HS117's: the third blind set's conjugate_gradient_python_loop_h100)", target="gpu")
def conjugate_gradient_unrolled_gpu():
    return _conjugate_gradient(False)


@case((), "the same conjugate gradient as lax.fori_loop", target="gpu")
def conjugate_gradient_fori_gpu():
    return _conjugate_gradient(True)


def _sinkhorn(unroll: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def step(_, p):  # type: ignore[no-untyped-def]
        p = p / jnp.sum(p, 1, keepdims=True)
        return p / jnp.sum(p, 0, keepdims=True)
    return _compiled(lambda p: jax.lax.fori_loop(0, 6, step, p, unroll=unroll),
                     jnp.ones((1024, 1024)))


@case((), "six Sinkhorn normalizations in a short fori_loop: each iteration's row and "
      "column sums need the whole matrix the one before made, so unrolled XLA still ends "
      "a kernel at each reduction (HS105 quiet: the third blind set's "
      "mcmc_chain_thinned_outputs)")
def sinkhorn_short_loop():
    return _sinkhorn(False)


@case((), "the same loop unrolled")
def sinkhorn_unrolled():
    return _sinkhorn(True)


def _forcing(inside: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(u):
        n = u.shape[0]

        def grid():  # type: ignore[no-untyped-def]
            xs = jnp.linspace(0, 2 * jnp.pi, n)
            return jnp.meshgrid(xs, xs, indexing="ij")
        x, y = grid()

        def step(t, u):  # type: ignore[no-untyped-def]
            gx, gy = grid() if inside else (x, y)
            return 0.9 * u + 0.01 * jnp.sin(gx) * jnp.cos(gy + 0.1 * t)
        return jax.lax.fori_loop(0, 20, step, u)
    return _compiled(jax.jit(f, donate_argnums=(0,)), jnp.ones((4096, 4096)), target="h100")


@case(("HS104",), "coordinate grids from meshgrid(linspace) built before a fori_loop on an "
      "H100 and read from memory every step: a linspace kernel broadcast into two 64 MiB "
      "grids by a second kernel, all from indices (the third blind set's "
      "forcing_meshgrid_outside_loop_h100)", target="gpu")
def forcing_grid_outside_loop():
    return _forcing(False)


@case((), "the grids built inside the step, where they fuse into the update", target="gpu")
def forcing_grid_inside_loop():
    return _forcing(True)


def _bf16_mlp_f32_loss(f32_loss: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def loss(ws, x):  # type: ignore[no-untyped-def]
        h = x
        for w in ws:
            h = h + jax.nn.gelu(jnp.dot(h, w, preferred_element_type=jnp.float32)
                                ).astype(x.dtype)
        return jnp.mean((h.astype(jnp.float32) if f32_loss else h) ** 2).astype(jnp.float32)
    ws = [jnp.ones((2048, 2048), jnp.bfloat16)] * 2
    return _compiled(jax.grad(loss), ws, jnp.ones((4096, 2048), jnp.bfloat16), target="h100")


@case((), "a bf16 residual MLP on an H100 whose loss upcasts its output to f32 for the "
      "mean of squares: the loss's f32 gradient reaches the backward pass's matmuls, "
      "autodiff's doing, not an upcast for a matmul (HS112 quiet: the third blind set's "
      "fsdp_residual_mlp_unscanned_h100x8)", target="gpu")
def bf16_mlp_f32_loss_gpu():
    return _bf16_mlp_f32_loss(True)


@case((), "the same MLP with the loss in bf16", target="gpu")
def bf16_mlp_bf16_loss_gpu():
    return _bf16_mlp_f32_loss(False)


# -- what generalises across the blind sets (issue 28, the fourth set's false alarms) -----

def _heads_summed(contracted: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(x, w):
        if contracted:
            return jnp.einsum("bd,kdf->bf", x, w) / w.shape[0]
        return jnp.mean(jnp.einsum("bd,kdf->kbf", x, w), axis=0)
    return _compiled(f, jnp.ones((8192, 1024), jnp.bfloat16),
                     jnp.ones((8, 1024, 1024), jnp.bfloat16), target="h100")


@case(("HS101",), "an ensemble of 8 linear heads averaged after one batched matmul on an "
      "H100: the f32 product of every head is written and then summed over the head axis; "
      "by linearity the matmul contracts that axis itself (the blind sets' "
      "ensemble_heads_mean_after_matmul_h100, out_proj_per_head_then_sum_h100, "
      "moe_combine_sum_over_experts_h100)", target="gpu")
def heads_summed_after_matmul_gpu():
    return _heads_summed(False)


@case((), "the heads contracted in the matmul: one GEMM, nothing written for a sum",
      target="gpu")
def heads_contracted_in_matmul_gpu():
    return _heads_summed(True)


@case((), "the squares of a matmul's product summed over its head axis: not linear in the "
      "product, so no matmul could contract it (HS101 quiet)", target="gpu")
def heads_squared_after_matmul_gpu():
    jax, jnp, np = _np()
    return _compiled(lambda x, w: jnp.sum(jnp.einsum("bd,kdf->kbf", x, w) ** 2, axis=0),
                     jnp.ones((8192, 1024), jnp.bfloat16),
                     jnp.ones((8, 1024, 1024), jnp.bfloat16), target="h100")


@case((), "pairwise forces: a sum over the 3 coordinates of displacements that a second "
      "kernel also reads, plus an array gathered for it and added after the sum: the sum "
      "splits nothing from that array's kernel (it is not what is reduced), so HS101 is "
      "quiet (the fourth blind set's lennard_jones_forces_f32, where it is jnp.eye)")
def sum_plus_array_after_it():
    jax, jnp, np = _np()

    def f(pos, s, perm):
        d = pos[:, None, :] - pos[None, :, :]
        r2 = jnp.sum(d * d, -1) + jnp.take(s, perm, axis=0)
        return jnp.einsum("ij,ijk->ik", 1.0 / r2, d)
    return _compiled(f, jnp.ones((2048, 3)), jnp.ones((2048, 2048)),
                     jnp.zeros((2048,), jnp.int32))


def _outer_inner(nested: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(x):
        def outer(i, x):
            if nested:
                x = jax.lax.fori_loop(0, 20, lambda j, y: jnp.sin(y) * 0.99 + 0.01, x)
            return x * 0.99 + 0.01
        return jax.lax.fori_loop(0, 8, outer, x)
    return _compiled(f, jnp.ones((2048, 2048)))


@case((), "a short loop whose body runs a loop of its own (an inner scan): unrolled, each "
      "iteration still ends at the inner loop, so HS105 is quiet (the fourth blind set's "
      "langevin_md_scan_outputs)")
def short_loop_around_a_loop():
    return _outer_inner(True)


@case(("HS105",), "the same short loop with a cheap body and no inner loop")
def short_loop_cheap_body():
    return _outer_inner(False)


def _banded(banded: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(u):
        n = u.shape[0]
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        if banded:
            m = (4.0 * (i == j) + (jnp.abs(i - j) == 1)) / 6.0
        else:
            m = jnp.exp(-0.01 * ((i - j) ** 2).astype(jnp.float32))
        return m @ u
    return _compiled(f, jnp.ones((2048, 64)))


@case((), "a tridiagonal mass matrix built from index comparisons and multiplied by: "
      "constants chosen by where each element lies relative to the diagonal cost one "
      "compare per element to build; the fix is a banded operation, not passing the "
      "dense matrix in (HS118 quiet: the fourth blind set's fem_heat_dense_solve)")
def banded_matrix_from_indices():
    return _banded(True)


@case(("HS118",), "a Gaussian kernel matrix exp(-(i-j)^2) built from the indices and "
      "multiplied by: a transcendental per element, built on every call")
def gaussian_toeplitz_from_indices():
    return _banded(False)


@case((), "multi-head attention on the CPU with einsums over [batch, tokens, heads, "
      "head_dim]: q, k and v are three large values alive together, but one kernel reads "
      "them together (the attention), so no order of the chains frees one before the "
      "others are needed (HS106 quiet: the fourth blind set's attention_einsum_heads_cpu)")
def attention_heads_read_together():
    jax, jnp, np = _np()

    def f(x, wq, wk, wv, wo):
        q = jnp.einsum("btd,dhk->bthk", x, wq)
        k = jnp.einsum("btd,dhk->bthk", x, wk)
        v = jnp.einsum("btd,dhk->bthk", x, wv)
        p = jax.nn.softmax(jnp.einsum("bqhk,bshk->bhqs", q, k) / 8.0, -1)
        return jnp.einsum("bhqs,bshk,hkd->bqd", p, v, wo)
    w = jnp.ones((512, 8, 64))
    return _compiled(f, jnp.ones((8, 512, 512)), w, w, w, jnp.ones((8, 64, 512)))


def _fsdp_stacked(scanned: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
    rep, row = NamedSharding(mesh, P()), NamedSharding(mesh, P(None, "data", None))

    def f(ws, x):
        if scanned:
            @jax.checkpoint
            def body(h, w):
                return h + jnp.tanh(h @ jax.lax.with_sharding_constraint(w, rep)), None
            h, _ = jax.lax.scan(body, x, ws)
        else:
            h = x
            for i in range(ws.shape[0]):
                h = h + jnp.tanh(h @ jax.lax.with_sharding_constraint(ws[i], rep))
        return jnp.mean(h ** 2)
    return _compiled(jax.jit(jax.grad(f), out_shardings=row),
                     jax.ShapeDtypeStruct((8, 2048, 2048), jnp.float32, sharding=row),
                     jax.ShapeDtypeStruct((1024, 2048), jnp.float32,
                                          sharding=NamedSharding(mesh, P("data", None))))


@case(("HS116",), "FSDP on 8 CPU devices with the stacked weights sharded on their rows and "
      "each layer's weight constrained to replicated in a Python loop: XLA copies each "
      "gathered weight into the layout its matmul reads, and those copies are the gathered "
      "weights alive together (HS116), not a layout the code chose (HS103) nor activations "
      "to rematerialize (HS111) (the fourth blind set's fsdp_denoiser_gather_all_cpu8)")
def fsdp_stacked_gathered_copies():
    return _fsdp_stacked(False)


@case((), "the same FSDP step as a checkpointed lax.scan over the stacked layers")
def fsdp_stacked_scanned():
    return _fsdp_stacked(True)


def _accumulate_tpu(metric: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    from jax.sharding import PartitionSpec as P

    def local(w, xs):
        def body(carry, x):
            acc, nrm = carry
            g = jax.grad(lambda w: jnp.mean(jnp.dot(x, w, preferred_element_type=jnp.float32)
                                            ** 2))(w)
            g = jax.lax.psum(g, "data").astype(jnp.float32)
            return (acc + g, nrm + jnp.sum(g * g)), None
        (acc, nrm), _ = jax.lax.scan(body, (jnp.zeros(w.shape, jnp.float32),
                                            jnp.zeros((), jnp.float32)), xs)
        return (w - 1e-3 * acc).astype(w.dtype), nrm

    def gathered(ws, x):
        def body(h, w):
            return jnp.tanh(h @ jax.lax.all_gather(w, "data", tiled=True)), None
        return jax.lax.scan(body, x, ws)[0]

    if metric:
        f = jax.jit(jax.shard_map(local, in_specs=(P(), P(None, "data")),
                                  out_specs=(P(), P()), check_vma=False), donate_argnums=(0,))
        args = (jax.ShapeDtypeStruct((2048, 2048), jnp.bfloat16),
                jax.ShapeDtypeStruct((4, 4096, 2048), jnp.bfloat16))
        return _compiled(f, *args, target="tpu-v5e:2x4", mesh="data=8",
                         shard={1: "None,data,None"})
    f = jax.jit(jax.shard_map(gathered, in_specs=(P(None, "data"), P()), out_specs=P(),
                              check_vma=False))
    return _compiled(f, jax.ShapeDtypeStruct((8, 4096, 4096), jnp.bfloat16),
                     jax.ShapeDtypeStruct((256, 4096), jnp.bfloat16),
                     target="tpu-v5e:2x4", mesh="data=8", shard={0: "None,data,None"})


@case((), "a TPU v5e 2x4 accumulation scan whose per-microbatch gradient is all-reduced "
      "for the update and for a per-step norm metric: the loop's own use of the reduced "
      "value, whose fix is reducing once after the loop, not hiding the transfer (HS113 "
      "quiet; the norm of each reduced gradient needs each reduction, so HS122 is quiet "
      "too: the fourth blind set's moe_grad_psum_twice_in_scan_tpu_2x4)", target="tpu")
def accumulation_allreduce_with_metric_tpu():
    return _accumulate_tpu(True)


@case(("HS113",), "a TPU v5e 2x4 scan over layers all-gathering each layer's weight slice "
      "in the loop before a small matmul: a transfer the compute does not hide, where "
      "overlapping it with the next layer's compute is the fix", target="tpu")
def gathered_layers_in_scan_tpu():
    return _accumulate_tpu(False)


def _reduced_after_matmul_tpu(backward: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()
    from jax.sharding import PartitionSpec as P
    if backward:
        def loss(p, x, y):
            return jnp.mean((jax.nn.relu(x @ p["w1"]) @ p["w2"] - y) ** 2)
        step = jax.jit(lambda p, x, y: jax.tree.map(lambda a, g: a - 1e-3 * g, p,
                                                     jax.grad(loss)(p, x, y)),
                       donate_argnums=0)
        params = {"w1": jax.ShapeDtypeStruct((1024, 4096), jnp.float32),
                  "w2": jax.ShapeDtypeStruct((4096, 128), jnp.float32)}
        return _compiled(step, params, jax.ShapeDtypeStruct((8192, 1024), jnp.float32),
                         jax.ShapeDtypeStruct((8192, 128), jnp.float32),
                         target="tpu-v5e:2x4", shard={1: "data,None", 2: "data,None"})
    f = jax.jit(jax.shard_map(lambda x, w: jax.lax.psum(x @ w, "model"),
                              in_specs=(P(None, "model"), P("model", None)), out_specs=P(),
                              check_vma=False))
    return _compiled(f, jax.ShapeDtypeStruct((8192, 4096), jnp.bfloat16),
                     jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16),
                     target="tpu-v5e:2x4", mesh="model=8", shard={0: "None,model",
                                                                  1: "model,None"})


@case(("HS113",), "a TPU v5e 2x4 row-parallel matmul in the forward pass whose partial "
      "products are all-reduced with nothing to overlap: a collective matmul would hide it",
      target="tpu")
def row_parallel_allreduce_tpu():
    return _reduced_after_matmul_tpu(False)


@case((), "a data-parallel training step on a TPU v5e 2x4 written the usual way: the "
      "gradient's all-reduce is the backward pass's, reduced once it is made, with nothing "
      "after it but the update that reads it: no change hides it (the sixth blind set's "
      "tabular_data_parallel_tpu_2x4)", target="tpu")
def data_parallel_step_tpu():
    return _reduced_after_matmul_tpu(True)


def _heads_attention_gpu(b: int):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        p = jax.nn.softmax(s * 0.125, axis=-1).astype(q.dtype)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v)
    a = jnp.ones((b, 128, 32, 64), jnp.bfloat16)
    return _compiled(f, a, a, a, target="h100")


@case((), "attention over [batch, tokens, heads, head_dim] on an H100: XLA transposes q, "
      "k, v and the output for the batched GEMMs, 2 MiB each, about 1 us of traffic: less "
      "than launching one kernel, so no saving shown (the third blind set's "
      "attention_heads_batched_h100)", target="gpu")
def attention_heads_small_gpu():
    return _heads_attention_gpu(4)


@case(("HS103",), "the same attention over a batch of 256: each transpose moves 128 MiB, "
      "tens of microseconds beside the GEMMs", target="gpu")
def attention_heads_large_gpu():
    return _heads_attention_gpu(256)


def _relative_bias(onehot: bool):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def f(table, q, k):
        n = q.shape[1]
        bucket = jnp.clip(jnp.arange(n)[None, :] - jnp.arange(n)[:, None] + 128, 0, 255)
        if onehot:
            bias = jax.nn.one_hot(bucket, table.shape[0]) @ table      # [n, n, heads]
        else:
            bias = table[bucket]
        s = jnp.einsum("hqd,hkd->hqk", q, k) + bias.transpose(2, 0, 1)
        return jax.nn.softmax(s, axis=-1)
    return _compiled(f, jnp.ones((256, 16)), jnp.ones((16, 512, 64)), jnp.ones((16, 512, 64)))


@case(("HS119",), "a relative position bias built as one_hot(bucket) @ table and transposed "
      "to [heads, q, k] for the scores: the transpose sits beside the one-hot matmul, which "
      "HS119's gather replaces, and is added to the scores' product, not multiplied by "
      "(HS103 quiet: the third blind set's relative_bias_onehot)")
def relative_bias_onehot_transposed():
    return _relative_bias(True)


@case((), "the same bias gathered with table[bucket]")
def relative_bias_gathered_transposed():
    return _relative_bias(False)



@case((), "pairwise forces with jnp.eye added after a sum over the 3 coordinates: XLA's CPU "
      "hands the sum to YNNPACK (a kCustom fusion), which reads the eye only to add it to "
      "its result, from memory whatever the code does, as a GEMM's bias (HS104 quiet: the "
      "fourth blind set's lennard_jones_forces_f32; sum_over_short_axis and "
      "iota_table_stored are the twins, where the table is part of what is summed)")
def eye_added_after_short_sum():
    jax, jnp, np = _np()

    def f(pos):
        d = pos[:, None, :] - pos[None, :, :]
        r2 = jnp.sum(d * d, -1) + jnp.eye(pos.shape[0])
        return jnp.einsum("ij,ijk->ik", 1.0 / r2, d)
    return _compiled(f, jnp.ones((2048, 3)))


def _wave_leapfrog(rotated: bool):  # type: ignore[no-untyped-def]
    # A wave equation's leapfrog over 40 steps on a 512^2 grid (1 MiB fields).
    jax, jnp, np = _np()

    def new(u, u_prev):
        lap = (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1)
               + jnp.roll(u, -1, 1) - 4 * u)
        return 2 * u - u_prev + 0.1 * lap

    if rotated:
        def body(_, c):
            return new(*c), c[0]
        f = lambda u, v: jax.lax.fori_loop(0, 40, body, (u, v))  # noqa: E731
    else:
        def body2(_, c):
            u, u_prev = c
            u_prev = new(u, u_prev)
            return new(u_prev, u), u_prev
        f = lambda u, v: jax.lax.fori_loop(0, 20, body2, (u, v))  # noqa: E731
    return _compiled(jax.jit(f, donate_argnums=(0, 1)), jnp.ones((512, 512)),
                     jnp.ones((512, 512)))


@case(("HS125",), "a leapfrog whose fori_loop carry is rotated, (u, u_prev) -> (new, u): XLA "
      "copies the fields in every iteration (the seventh blind set's "
      "sine_gordon_carry_rotated)")
def leapfrog_carry_rotated():
    return _wave_leapfrog(True)


@case((), "the same leapfrog two steps per iteration, each new field overwriting the older")
def leapfrog_two_steps_in_place():
    return _wave_leapfrog(False)


def _column_norms(blocks: int):  # type: ignore[no-untyped-def]
    # The root-mean-square of each column of [65536, 256] f32 features on an H100.
    jax, jnp, np = _np()

    def f(x):
        if not blocks:
            return jnp.sqrt((x * x).mean(0))
        n = x.shape[0] // blocks

        def body(i, s):
            xb = jax.lax.dynamic_slice_in_dim(x, i * n, n)
            return s + (xb * xb).sum(0)
        return jnp.sqrt(jax.lax.fori_loop(0, blocks, body, jnp.zeros(x.shape[1]))
                        / x.shape[0])
    return _compiled(f, jnp.ones((65536, 256)), target="h100")


@case(("HS126",), "column norms of [65536, 256] f32 summed over 256 row blocks in a "
      "fori_loop on an H100: one fused reduction becomes 256 iterations of small kernels "
      "(the seventh blind set's batchnorm_stats_blocked_fori_h100)", target="gpu")
def column_norms_in_blocks_gpu():
    return _column_norms(256)


@case((), "the same column norms as one fused reduction", target="gpu")
def column_norms_one_pass_gpu():
    return _column_norms(0)


def _pair_energy(block: int):  # type: ignore[no-untyped-def]
    # A screened pair energy of 4096 charges on an H100: sum over all pairs of
    # q_i q_j exp(-r_ij) / r_ij, in one pass or over row blocks in a fori_loop.
    jax, jnp, np = _np()

    def rows(pi, qi, pos, q):
        d = pi[:, None, :] - pos[None, :, :]
        r = jnp.sqrt(jnp.sum(d * d, axis=-1) + 1e-3)
        return 0.5 * jnp.sum(qi[:, None] * q[None, :] * jnp.exp(-r) / r)

    def f(pos, q):
        if not block:
            return rows(pos, q, pos, q)

        def body(i, acc):
            pi = jax.lax.dynamic_slice_in_dim(pos, i * block, block)
            qi = jax.lax.dynamic_slice_in_dim(q, i * block, block)
            return acc + rows(pi, qi, pos, q)
        return jax.lax.fori_loop(0, pos.shape[0] // block, body, jnp.float32(0))
    return _compiled(f, jnp.ones((4096, 3)), jnp.ones((4096,)), target="h100")


@case(("HS126",), "a pair energy summed over row blocks of 32 charges in a fori_loop on an "
      "H100: each block's pair terms are written out and reduced in two more kernels, 128 "
      "iterations where one fused reduction over all pairs does it (the eighth blind set's "
      "ewald_real_space_fori_blocks_h100)", target="gpu")
def pair_energy_in_blocks_gpu():
    return _pair_energy(32)


@case((), "the same pair energy in one fused pass over all pairs", target="gpu")
def pair_energy_one_pass_gpu():
    return _pair_energy(0)


def _strip_sums(strips: int):  # type: ignore[no-untyped-def]
    # Per-class soft counts of [4, 1024, 1024, 8] f32 probabilities on an H100, summed over
    # row strips in a Python loop, or at once.
    jax, jnp, np = _np()

    def f(logits):
        if not strips:
            return jnp.sum(jax.nn.softmax(logits, -1), axis=(0, 1, 2))
        n = logits.shape[1] // strips
        total = 0.0
        for i in range(strips):
            total = total + jnp.sum(jax.nn.softmax(logits[:, n * i:n * (i + 1)], -1),
                                    axis=(0, 1, 2))
        return total
    return _compiled(f, jnp.ones((4, 1024, 1024, 8)), target="h100")


@case(("HS129",), "per-class sums over 16 row strips in a Python loop on an H100: 16 "
      "reductions of slices of one array (and their second stages) whose results are only "
      "added, where one reduction reads it once (the eighth blind set's "
      "dice_loss_row_strips_h100)", target="gpu")
def class_sums_in_strips_gpu():
    return _strip_sums(16)


@case((), "the same per-class sums as one reduction", target="gpu")
def class_sums_one_pass_gpu():
    return _strip_sums(0)


def _history_scan(ring: bool):  # type: ignore[no-untyped-def]
    # A streaming filter over 2048 frames of 128 channels whose scan state is the last 512
    # frames (256 KiB); each step reads 8 taps of the history.
    jax, jnp, np = _np()
    W = 512
    taps = jnp.arange(0, W, 64)

    def f(frames, w):
        if ring:
            def step(c, x):
                buf, i = c
                buf = jax.lax.dynamic_update_slice(buf, x[None], (i % W, 0))
                return (buf, i + 1), jnp.tanh(buf[(i - taps) % W].reshape(-1) @ w)
        else:
            def step(c, x):
                buf, i = c
                buf = jnp.concatenate([buf[1:], x[None]], 0)
                return (buf, i + 1), jnp.tanh(buf[W - 1 - taps].reshape(-1) @ w)
        return jax.lax.scan(step, (jnp.zeros((W, frames.shape[1])), 0), frames)[1]
    return _compiled(f, jnp.ones((2048, 128)), jnp.ones((8 * 128, 128)))


@case(("HS127",), "a scan whose state is a 512-frame history shifted by "
      "concatenate([buf[1:], x]) every step: each step rewrites 256 KiB to add 512 B (the "
      "seventh blind set's tcn_stream_shift_buffer)")
def history_shifted_in_scan():
    return _history_scan(False)


@case((), "the same history as a ring buffer written with dynamic_update_slice at i % W")
def history_ring_buffer_in_scan():
    return _history_scan(True)


def _ab3_scan(ring: bool):  # type: ignore[no-untyped-def]
    # Third-order Adams-Bashforth over 64 steps of a 512 x 512 field: the last three
    # tendencies (3 MiB) are the scan's state.
    jax, jnp, np = _np()
    coef = jnp.array([5.0, -16.0, 23.0]) / 12.0

    def f(h0):
        def step(c, _):
            h, hist, i = c
            t = jnp.tanh(h) - 0.1 * h
            if ring:
                hist = jax.lax.dynamic_update_slice(hist, t[None], (i % 3, 0, 0))
                w = jnp.roll(coef, (i + 1) % 3)
            else:
                hist = jnp.concatenate([hist[1:], t[None]], 0)
                w = coef
            return (h + 0.01 * jnp.tensordot(w, hist, 1), hist, i + 1), None
        return jax.lax.scan(step, (h0, jnp.zeros((3,) + h0.shape), 0), None, length=64)[0][0]
    return _compiled(f, jnp.ones((512, 512)))


@case(("HS127",), "an Adams-Bashforth history of three tendencies shifted by "
      "concatenate([hist[1:], t[None]]) every step: two thirds of it rewritten to move it "
      "(the eighth blind set's shallow_ice_ab3_history_concat_h100)")
def ab3_history_shifted_in_scan():
    return _ab3_scan(False)


@case((), "the same three tendencies in a ring indexed by step % 3")
def ab3_history_ring_in_scan():
    return _ab3_scan(True)


def _attention(t: int, *, causal: bool = True, grad: bool = False, keys: int | None = None,
               target: str = "h100", layers: int = 0):  # type: ignore[no-untyped-def]
    # Attention written by hand over [batch, heads, tokens, head_dim] (2 x 8 x t x 64, bf16,
    # the layout the batched GEMMs read: no transposes): the scores are [2, 8, t, keys]
    # (128 MiB in bf16 at 2048 tokens).
    jax, jnp, np = _np()
    s_len = keys or t

    def attend(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * 0.125
        if causal:
            s = jnp.where(jnp.arange(t)[:, None] >= jnp.arange(s_len)[None, :], s, -1e9)
        p = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(q.dtype)
        return jnp.einsum("bhqk,bhkd->bhqd", p, v)

    q = jnp.ones((2, 8, t, 64), jnp.bfloat16)
    kv = jnp.ones((2, 8, s_len, 64), jnp.bfloat16)
    if layers:
        def loss(ws, x):
            def layer(h, w):
                return h + attend(h * w, h, h), None
            return jnp.mean(jax.lax.scan(layer, x, ws)[0].astype(jnp.float32) ** 2)
        return _compiled(jax.grad(loss), jnp.ones((layers, 1, 1, 1, 64), jnp.bfloat16), q,
                         target=target)
    if grad:
        def loss(q, k, v):
            return jnp.mean(attend(q, k, v).astype(jnp.float32) ** 2)
        return _compiled(jax.grad(loss, argnums=(0, 1, 2)), q, kv, kv, target=target)
    return _compiled(attend, q, kv, kv, target=target)


@case(("HS130",), "causal self-attention over 2,048 tokens written as einsum, mask, softmax, "
      "einsum on an H100, with its gradient: the scores, probabilities and their gradients "
      "[2, 8, 2048, 2048] pass through memory (the eleventh blind set's q1, smaller)",
      target="gpu")
def attention_scores_gpu():
    return _attention(2048, grad=True)


@case(("HS130", "HS111"), "the same attention in a scan over 4 layers: the probabilities of "
      "every layer are stacked for the backward pass (the eleventh blind set's q4, smaller); "
      "a fused kernel never writes them, a checkpoint on the layer keeps one layer's: both "
      "fixes are an expert's", target="gpu")
def attention_scores_scanned_gpu():
    return _attention(1024, layers=4)


@case(("HS130", "HS115"), "the same attention on a TPU v5e, forward only: XLA's online "
      "softmax computes the probabilities and P·V in one kernel, but the scores still pass "
      "through memory; a head dimension of 64 is padded to 128 lanes", target="tpu")
def attention_scores_tpu():
    return _attention(2048, target="tpu-v5e")


@case((), "cross-attention of 2,048 queries to 77 text tokens: the scores are smaller than "
      "q, k and v together, nothing for a fused kernel to save (the eleventh blind set's q5)",
      target="gpu")
def cross_attention_short_keys_gpu():
    return _attention(2048, causal=False, keys=77)


def _contrastive(n: int):  # type: ignore[no-untyped-def]
    jax, jnp, np = _np()

    def loss(a, b):
        logits = (a @ b.T) * 10.0
        labels = jnp.arange(n)
        lp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(lp[labels, labels])
    x = jnp.ones((n, 512), jnp.bfloat16)
    return _compiled(jax.grad(loss), x, x, target="h100")


@case((), "a CLIP-style contrastive loss over a 4096 x 4096 similarity matrix: a softmax "
      "over a matmul's result that no second matmul contracts, not attention (the eleventh "
      "blind set's q8)", target="gpu")
def contrastive_softmax_gpu():
    return _contrastive(4096)


def _decode_step(donate: bool):  # type: ignore[no-untyped-def]
    # One token of grouped-query decoding (32 query heads over 8 key/value heads) with a
    # KV cache [batch, slots, kv heads, head_dim] written in place: XLA:GPU transposes each
    # cache for the attention's matmul, writes the new token into the transposed copy and
    # transposes it back (the eleventh blind set's q7, smaller).
    jax, jnp, np = _np()
    b, s, kv, d, g = 8, 4096, 8, 128, 4

    def step(x, k_cache, v_cache, pos, wq, wk, wv):
        q = (x @ wq).reshape(b, kv, g, d)
        k_cache = jax.lax.dynamic_update_slice(k_cache, (x @ wk).reshape(b, 1, kv, d),
                                               (0, pos, 0, 0))
        v_cache = jax.lax.dynamic_update_slice(v_cache, (x @ wv).reshape(b, 1, kv, d),
                                               (0, pos, 0, 0))
        sc = jnp.einsum("bkgd,bskd->bkgs", q, k_cache).astype(jnp.float32)
        sc = jnp.where(jnp.arange(s) <= pos, sc, -jnp.inf)
        p = jax.nn.softmax(sc, axis=-1).astype(x.dtype)
        return jnp.einsum("bkgs,bskd->bkgd", p, v_cache).reshape(b, -1), k_cache, v_cache
    bf = jnp.bfloat16
    cache = jnp.zeros((b, s, kv, d), bf)
    fn = jax.jit(step, donate_argnums=(1, 2) if donate else ())
    return _compiled(fn, jnp.zeros((b, 4096), bf), cache, cache, jnp.int32(100),
                     jnp.zeros((4096, kv * g * d), bf), jnp.zeros((4096, kv * d), bf),
                     jnp.zeros((4096, kv * d), bf), target="h100")


@case(("HS110",), "a decoding step's KV caches updated in place and returned, not donated, "
      "where XLA reaches each cache through a transpose and back: still the cache updated "
      "(the eleventh blind set's q7)", target="gpu")
def kv_cache_transposed_not_donated_gpu():
    return _decode_step(False)


@case((), "the same decoding step with both caches donated", target="gpu")
def kv_cache_transposed_donated_gpu():
    return _decode_step(True)


def _cache_in_loop(how: str, donate: bool = True):  # type: ignore[no-untyped-def]
    # 512 steps of a loop that writes row t of a [4096, 1024] f32 cache (16 MiB), donated.
    jax, jnp, np = _np()
    rows = 4096

    def f(cache, x):
        def body(t, c):
            new = jnp.tanh(x * t)
            if how == "where":
                return jnp.where((jnp.arange(rows) == t)[:, None], new[None, :], c)
            if how == "onehot":
                m = (jnp.arange(rows) == t).astype(c.dtype)[:, None]
                return c * (1 - m) + new[None, :] * m
            return jax.lax.dynamic_update_slice(c, new[None, :], (t, 0))
        return jax.lax.fori_loop(0, 512, body, cache)
    return _compiled(jax.jit(f, donate_argnums=(0,) if donate else ()),
                     jnp.zeros((rows, 1024)), jnp.ones((1024,)))


@case(("HS131",), "a cache row written each step by jnp.where(arange(n) == t, new, cache): "
      "the whole 16 MiB cache read and written 512 times to change one row (blind trial "
      "10's KV cache, P5)")
def cache_row_where_in_loop():
    return _cache_in_loop("where")


@case(("HS131",), "the same row written through a one-hot mask, cache * (1 - m) + new * m")
def cache_row_onehot_in_loop():
    return _cache_in_loop("onehot")


@case((), "the same row written in place with lax.dynamic_update_slice")
def cache_row_updated_in_place():
    return _cache_in_loop("dus")


@case(("HS110",), "the same cache, written in place by the loop and returned, not donated: "
      "XLA copies the argument into the loop's buffer (the twelfth blind set's r2)")
def cache_through_loop_not_donated():
    return _cache_in_loop("dus", donate=False)
