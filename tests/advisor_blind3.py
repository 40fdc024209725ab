"""A third blind evaluation set for hloscope's advisor (issue 28, item 5).

Who wrote it: a helper session (``blind3``) that never read the advisor's rules, its
documentation (docs/advisor.md), its tests (tests/test_advisor*.py, tests/test_checked.py),
the other labelled sets (tests/advisor_programs.py, tests/advisor_heldout*.py), the
checked-savings code (src/hloscope/_checked/), benchmarks/advisor_*.py, or the README's
advisor and lint sections, and never ran the advisor (``hloscope lint``, ``hloscope.lint``,
``Report.advice``, findings or groups, ``hloscope report``) on these programs. It read only
the first two blind sets (tests/advisor_blind.py and tests/advisor_blind2.py, written by
other blind helpers) for their structure and vocabulary, and wrote different programs (other
domains, other ways of making each mistake). The labels below were written and committed
BEFORE the advisor ran on them. Only the optimized HLO (``Report.hlo_after``) and XLA's
memory figures (``Report.memory_analysis``) were looked at, to confirm that each labelled
pattern is really in the compiled program and to size it. Where the compiled program showed
that XLA had already removed a feared pattern, the program was kept as a clean case saying
so; where a pattern was absent from a labelled program, the program was changed (or dropped)
before committing; the advisor was never run.

Vocabulary and the meaning of a label: as in tests/advisor_blind.py (``KINDS``, plus
``other:<short-name>`` for a real issue outside it). A label means the pattern is present in
the compiled program and fixing it saves at least about 2-3% of the program's peak memory
or run time on its device; ``expect=()`` means an expert would flag nothing.

Each case builds a `Program` (the first set's type); compile it with
``hloscope.inspect(p.fn, *p.args, target=p.target, **p.kwargs)``. Programs that need f64 are
a ``Lowered`` built under ``jax.enable_x64`` (``args`` empty). CPU programs with a mesh need 8
host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``, set by
tests/conftest.py).

Labels are never edited after the advisor has run: a later correction goes into `REVISED`
(case name -> (new labels, reason)), which is empty now.
"""

from __future__ import annotations

from collections.abc import Callable

from advisor_blind import KINDS, BlindCase, Program, _cpu_mesh, _jax, _s

__all__ = ["CASES", "KINDS", "REVISED", "BlindCase", "Program"]

CASES: list[BlindCase] = []

# Corrections after the advisor ran: name -> (labels, reason). Empty when committed.
REVISED: dict[str, tuple[tuple[str, ...], str]] = {}

# Changes to hloscope made after seeing this set's results (case -> what and why).  The
# blind figures are those measured before any of them.
TUNED: dict[str, str] = {
    "relative_bias_onehot": "HS118 skips an array of two constants chosen by comparing "
    "indices (a one-hot, a triangular or band mask): as cheap to build as to read, and its "
    "fix is a gather (HS119's) or a cumsum, not passing it in; HS118 no longer fires here. "
    "Later (with the fourth set's fixes): HS103 counts as the library call beside a copy "
    "only one that makes its source or multiplies by it, and not a one-hot matmul (HS119's "
    "gather replaces it): the bias transpose, made by the one-hot matmul and only added to "
    "the scores' product, no longer fires",
    "running_mean_triangular_matmul_h100": "HS118 skips a two-valued mask from a compare "
    "(the triangular tril(ones)); it no longer fires here (the cumsum has no rule)",
    "kde_blocks_concatenated": "HS118 skips a build that only broadcasts a constant (no "
    "iota: a splat a fused matmul reads); it no longer fires on the scalar XLA broadcast",
    "conjugate_gradient_python_loop_h100": "HS121 counts as batchable only the small "
    "kernels of one kind that do not wait on each other (count less the kind's longest "
    "chain of dependencies): a solver's steps cannot be batched; it no longer fires here",
    "mcmc_chain_thinned_outputs": "HS105 skips a short loop whose body reduces (a row's "
    "log-density): unrolled, XLA still ends a kernel at each reduction, so the state "
    "still goes to memory; it no longer fires on the inner thinning scan",
    "forcing_meshgrid_outside_loop_h100": "HS104 follows a build of cheap kernels from "
    "indices through several kernels (a linspace kernel broadcast into a grid by another), "
    "not only one kernel with no inputs; it now fires here",
    "fsdp_residual_mlp_unscanned_h100x8": "HS112 (a kernel whose f32 output a matmul "
    "reads) needs a path from the user's upcast to that output that neither narrows again "
    "nor passes into the backward pass: a loss's f32 upcast reaching the backward "
    "matmuls is autodiff's; it no longer fires here (gathered-weights is still missed)",
    # With the fourth set's fixes (helper advise5), from this set's leftovers:
    "attention_heads_batched_h100": "on a GPU a saving in time counts (for the default "
    "threshold) only from one kernel launch (2 us) up: XLA's 2 MiB head transposes save "
    "about 1 us each, less than the launches around them; HS103 no longer shows here",
    "out_proj_per_head_then_sum_h100": "HS101 also finds a matmul's product summed over an "
    "axis the matmul did not contract, times weights that do not depend on it (linear, so "
    "the matmul contracts that axis itself; any length of axis); it now fires here "
    "(taught by the fourth set's moe_combine_sum_over_experts_h100 and this program)",
}


def case(expect: tuple[str, ...] | list[str], why: str, target: str | None = None):
    def register(build: Callable[[], Program]) -> Callable[[], Program]:
        CASES.append(BlindCase(build.__name__, build, tuple(expect), why, target))
        return build
    return register


def _P():
    import jax
    return jax.sharding.PartitionSpec


# ===================================== donate =============================================

def _rmsprop(params, ms, grads):
    jax, jnp = _jax()
    ms = jax.tree.map(lambda s, g: 0.99 * s + 0.01 * g * g, ms, grads)
    params = jax.tree.map(lambda p, s, g: p - 1e-3 * g / (jnp.sqrt(s) + 1e-8),
                          params, ms, grads)
    return params, ms


def _rmsprop_args():
    p = {"embed": _s((32768, 1024)), "proj": [_s((1024, 4096)) for _ in range(4)],
         "out": _s((4096, 1024))}
    return (p, p, p)


@case(["donate"], "RMSProp on an H100 over a 128 MiB embedding, 4 f32[1024,4096] "
      "projections and an f32[4096,1024] output weight (208 MiB of params, as much "
      "second-moment state and gradients) returns new params and state without donating: "
      "416 MiB of fresh outputs beside 624 MiB of arguments; donating params and state "
      "brings XLA's peak from 1.09 GB to 0.65 GB.", target="gpu")
def rmsprop_step_not_donated_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_rmsprop), _rmsprop_args(), target="h100")


@case([], "The same RMSProp step with params and second moments donated: updated in place; "
      "clean.", target="gpu")
def rmsprop_step_donated_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_rmsprop, donate_argnums=(0, 1)), _rmsprop_args(), target="h100")


def _replay_insert(buf, prio, obs, p_new, pos):
    jax, _ = _jax()
    buf = jax.lax.dynamic_update_slice_in_dim(buf, obs, pos, axis=0)
    prio = jax.lax.dynamic_update_slice_in_dim(prio, p_new, pos, axis=0)
    return buf, prio


def _replay_args():
    return (_s((524288, 256)), _s((524288,)), _s((1024, 256)), _s((1024,)), _s((), "int32"))


@case(["donate"], "Inserting a batch of 1024 transitions into an RL replay buffer on the CPU "
      "(observations f32[524288,256], 512 MiB, and priorities) with dynamic_update_slice, "
      "returning the buffer undonated: XLA copies the whole 512 MiB buffer every call to "
      "write 1 MiB into it and holds old and new buffers (peak ~1 GiB); donating the "
      "buffer makes the update in place.")
def replay_buffer_insert_not_donated() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_replay_insert), _replay_args())


@case([], "The same replay-buffer insert with the buffer and priorities donated: an in-place "
      "dynamic_update_slice of 1 MiB; clean.")
def replay_buffer_insert_donated() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_replay_insert, donate_argnums=(0, 1)), _replay_args())


# ===================================== remat ==============================================

def _vit_loss(params, x, remat):
    jax, jnp = _jax()

    def ln(h):
        h32 = h.astype(jnp.float32)
        mu = h32.mean(-1, keepdims=True)
        return ((h32 - mu) * jax.lax.rsqrt(((h32 - mu) ** 2).mean(-1, keepdims=True) + 1e-6)
                ).astype(h.dtype)

    def block(h, p):
        wqkv, wo, w1, w2 = p
        b, s, d = h.shape
        q, k, v = jnp.split(ln(h) @ wqkv, 3, -1)
        q, k, v = (t.reshape(b, s, 16, d // 16) for t in (q, k, v))
        a = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        a = jax.nn.softmax(a / 8.0, axis=-1).astype(h.dtype)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, d)
        h = h + o @ wo
        h = h + jax.nn.gelu(ln(h) @ w1) @ w2
        return h, None

    if remat:
        block = jax.checkpoint(block)
    h, _ = jax.lax.scan(block, x, params)
    return jnp.mean(h.astype(jnp.float32) ** 2)


def _vit_args():
    d = 1024
    return ((_s((12, d, 3 * d), "bfloat16"), _s((12, d, d), "bfloat16"),
             _s((12, d, 4 * d), "bfloat16"), _s((12, 4 * d, d), "bfloat16")),
            _s((64, 256, d), "bfloat16"))


@case(["remat"], "Training a 12-layer ViT-L-sized encoder (d=1024, 16 heads, batch 64 x 256 "
      "patches, bf16, layers scanned) on an H100 without checkpointing: each layer saves "
      "its attention scores and probabilities (f32 and bf16 [64,16,256,256]), the MLP's 4d "
      "hidden before and after GELU and the qkv and norms for the backward (~1.7 GiB per "
      "layer against 32 MiB layer inputs and 300 MiB of weights): XLA's peak is 21.5 GB; "
      "jax.checkpoint on the block keeps only the layer inputs (peak 2.0 GB).",
      target="gpu")
def vit_encoder_scan_no_remat_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(jax.grad(lambda p, x: _vit_loss(p, x, False))), _vit_args(),
                   target="h100")


@case([], "The same ViT encoder training step with jax.checkpoint on the scanned block: "
      "only the 32 MiB layer inputs are saved; clean.", target="gpu")
def vit_encoder_scan_remat_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(jax.grad(lambda p, x: _vit_loss(p, x, True))), _vit_args(),
                   target="h100")


@case(["remat"], "Training a 8-block wide residual MLP on the CPU (batch 8192, width 256, "
      "hidden 4096, f32, blocks scanned) without checkpointing: each block saves its "
      "f32[8192,4096] pre-activation and SiLU output (2 x 128 MiB) for the backward "
      "(XLA's temporaries 4.7 GB) against 8 MiB block inputs; checkpointing the block "
      "keeps the inputs and recomputes one block's hidden at a time.")
def wide_mlp_scan_no_remat() -> Program:
    jax, jnp = _jax()

    def loss(ws, x):
        def block(h, w):
            w1, w2 = w
            return h + jax.nn.silu(h @ w1) @ w2, None
        h, _ = jax.lax.scan(block, x, ws)
        return jnp.mean(h ** 2)

    return Program(jax.jit(jax.grad(loss)),
                   ((_s((8, 256, 4096)), _s((8, 4096, 256))), _s((8192, 256))))


# ===================================== upcast =============================================

def _lm_head_upcast(h, w):
    jax, jnp = _jax()
    logits = h.astype(jnp.float32) @ w.astype(jnp.float32)
    return jax.nn.logsumexp(logits, axis=-1)


def _lm_head_args():
    return (_s((8192, 2048), "bfloat16"), _s((2048, 32768), "bfloat16"))


@case([], "The LM head of a decoder on a TPU v5e casts the bf16 final hidden states "
      "(bf16[8192,2048]) and the bf16 unembedding (bf16[2048,32768]) to f32 before the "
      "logits matmul. An expert would fear an f32 matmul on f32 copies, but checked in the "
      "compiled program XLA's TPU compiler folds both converts into the matmul: it reads "
      "the bf16 operands and produces f32 logits (bf16 products are exact in f32), with "
      "the logsumexp fused; nothing to fix; clean.", target="tpu")
def lm_head_cast_folded_tpu() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_lm_head_upcast), _lm_head_args(), target="tpu-v5e")


@case(["upcast"], "The same LM head on an H100: XLA's GPU compiler keeps the converts "
      "(fused into the operands of a Triton GEMM whose dot is f32 x f32), so the 1.1 TFLOP "
      "logits matmul runs as an f32 GEMM (TF32 at best, half the bf16 tensor-core rate or "
      "less); bf16 operands with preferred_element_type=f32 give the same f32 logits.",
      target="gpu")
def lm_head_upcast_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_lm_head_upcast), _lm_head_args(), target="h100")


@case(["upcast"], "A mixture-of-experts FFN on an H100 with 8 experts' bf16 weights "
      "(2 x bf16[8,2048,8192], 512 MiB) and bf16 dispatched tokens (bf16[8,4096,2048]) "
      "casts weights and tokens to f32 for the expert einsums: the compiled GEMMs are f32 "
      "dots on converted operands, ~1.1 TFLOP at f32 rate instead of bf16 tensor-core "
      "rate; bf16 operands with "
      "preferred_element_type=f32 keep the f32 accumulation.", target="gpu")
def moe_experts_upcast_h100() -> Program:
    jax, jnp = _jax()

    def f(x, w1, w2):
        h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", x.astype(jnp.float32),
                                   w1.astype(jnp.float32)))
        return jnp.einsum("ecf,efd->ecd", h, w2.astype(jnp.float32)).astype(jnp.bfloat16)

    return Program(jax.jit(f), (_s((8, 4096, 2048), "bfloat16"),
                                _s((8, 2048, 8192), "bfloat16"),
                                _s((8, 8192, 2048), "bfloat16")), target="h100")


@case([], "The same MoE expert FFN with bf16 operands and preferred_element_type=f32, GELU "
      "in f32 and cast back to bf16 before the second einsum: clean.", target="gpu")
def moe_experts_bf16_h100() -> Program:
    jax, jnp = _jax()

    def f(x, w1, w2):
        h = jnp.einsum("ecd,edf->ecf", x, w1, preferred_element_type=jnp.float32)
        h = jax.nn.gelu(h).astype(jnp.bfloat16)
        return jnp.einsum("ecf,efd->ecd", h, w2,
                          preferred_element_type=jnp.float32).astype(jnp.bfloat16)

    return Program(jax.jit(f), (_s((8, 4096, 2048), "bfloat16"),
                                _s((8, 2048, 8192), "bfloat16"),
                                _s((8, 8192, 2048), "bfloat16")), target="h100")


# ===================================== layout-copy ========================================

@case(["layout-copy"], "Audio feature encoder on an H100: three 1-D convolutions over "
      "bf16[64,256,16000] waveform features written channels-first (NCW / OIW): cuDNN's "
      "bf16 convolutions want channels last, so XLA transposes each input and output "
      "(bf16[64,256,16000], ~500 MiB) around the convolutions; keeping the features "
      "NWC from the start removes the transposes.", target="gpu")
def audio_conv1d_ncw_h100() -> Program:
    jax, _ = _jax()

    def f(ws, x):
        for w in ws:
            x = jax.nn.gelu(jax.lax.conv_general_dilated(
                x, w, (1,), "SAME", dimension_numbers=("NCW", "OIW", "NCW")))
        return x

    ws = [_s((256, 256, 5), "bfloat16") for _ in range(3)]
    return Program(jax.jit(f), (ws, _s((64, 256, 16000), "bfloat16")), target="h100")


@case(["layout-copy"], "A 2-D spectral filter on the CPU over a stack of fields stored "
      "f32[1024,1024,32] (the field index last, 128 MiB): jnp.fft.fft2 over axes (0, 1) "
      "moves the transformed axes last, so the compiled program transposes the complex "
      "array (256 MiB) before the FFT and back after the inverse; storing the fields "
      "f32[32,1024,1024] avoids both.")
def fields_fft2_leading_axes() -> Program:
    jax, jnp = _jax()

    def f(u):
        kx = jnp.fft.fftfreq(u.shape[0])[:, None, None]
        ky = jnp.fft.fftfreq(u.shape[1])[None, :, None]
        uh = jnp.fft.fft2(u, axes=(0, 1))
        return jnp.fft.ifft2(uh * jnp.exp(-100.0 * (kx * kx + ky * ky)), axes=(0, 1)).real

    return Program(jax.jit(f), (_s((1024, 1024, 32)),))


@case([], "The same spectral filter over fields stored f32[32,1024,1024] (transformed axes "
      "last), the filter built from fftfreq where it is used: no transposes; clean.")
def fields_fft2_trailing_axes() -> Program:
    jax, jnp = _jax()

    def f(u):
        kx = jnp.fft.fftfreq(u.shape[1])[:, None]
        ky = jnp.fft.fftfreq(u.shape[2])[None, :]
        uh = jnp.fft.fft2(u, axes=(1, 2))
        return jnp.fft.ifft2(uh * jnp.exp(-100.0 * (kx * kx + ky * ky)), axes=(1, 2)).real

    return Program(jax.jit(f), (_s((32, 1024, 1024)),))


# ===================================== f64 ================================================

@case(["f64"], "Direct-sum gravitational accelerations for 4096 bodies on the CPU computed "
      "in f64 under jax_enable_x64 (pairwise f64[4096,4096] displacement, distance and "
      "force arrays, 128 MiB each): a softened N-body step needs no f64 (f32 with the "
      "softening is the standard); f32 halves every pairwise array and doubles the SIMD "
      "width.")
def nbody_direct_sum_f64() -> Program:
    jax, jnp = _jax()

    def f(pos, mass):
        d = pos[None, :, :] - pos[:, None, :]
        r2 = jnp.sum(d * d, -1) + 1e-4
        inv = mass[None, :] * r2 ** -1.5
        return jnp.einsum("ij,ijk->ik", inv, d)

    with jax.enable_x64(True):
        lowered = jax.jit(f).lower(_s((4096, 3), "float64"), _s((4096,), "float64"))
    return Program(lowered, ())


@case(["f64"], "Metropolis sweeps of a 2-D Ising model on the CPU (f32 spins on a "
      "2048x2048 lattice, 20 checkerboard sweeps in a fori_loop) draws its acceptance "
      "uniforms as f64 under jax_enable_x64 (jax.random.uniform defaults to f64 there: "
      "f64[2048,2048], 32 MiB per half-sweep, and f64 exponentials): comparing against "
      "exp(-2 beta dE) needs no f64; f32 uniforms halve the random bits generated and the "
      "bytes moved.")
def ising_metropolis_f64_uniforms() -> Program:
    jax, jnp = _jax()

    def f(key, s, beta):
        n = s.shape[0]
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)

        def half(s, key, colour):
            nb = (jnp.roll(s, 1, 0) + jnp.roll(s, -1, 0) + jnp.roll(s, 1, 1)
                  + jnp.roll(s, -1, 1))
            de = 2.0 * s * nb
            u = jax.random.uniform(key, s.shape)
            flip = (u < jnp.exp(-beta * de)) & ((i + j) % 2 == colour)
            return jnp.where(flip, -s, s)

        def sweep(t, s):
            k1, k2 = jax.random.split(jax.random.fold_in(key, t))
            return half(half(s, k1, 0), k2, 1)
        return jax.lax.fori_loop(0, 20, sweep, s)

    with jax.enable_x64(True):
        lowered = jax.jit(f, donate_argnums=(1,)).lower(
            jax.random.key(0), _s((2048, 2048), "float32"), _s((), "float64"))
    return Program(lowered, ())


@case([], "The same Ising sweeps with f32 uniforms and an f32 temperature (no x64): clean.")
def ising_metropolis_f32() -> Program:
    jax, jnp = _jax()

    def f(key, s, beta):
        n = s.shape[0]

        def half(s, key, colour):
            i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
            j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
            nb = (jnp.roll(s, 1, 0) + jnp.roll(s, -1, 0) + jnp.roll(s, 1, 1)
                  + jnp.roll(s, -1, 1))
            u = jax.random.uniform(key, s.shape, dtype=jnp.float32)
            flip = (u < jnp.exp(-beta * 2.0 * s * nb)) & ((i + j) % 2 == colour)
            return jnp.where(flip, -s, s)

        def sweep(t, s):
            k1, k2 = jax.random.split(jax.random.fold_in(key, t))
            return half(half(s, k1, 0), k2, 1)
        return jax.lax.fori_loop(0, 20, sweep, s)

    return Program(jax.jit(f, donate_argnums=(1,)),
                   (jax.random.key(0), _s((2048, 2048)), _s(())))


# ===================================== tpu-padding ========================================

@case(["tpu-padding"], "A DeiT-style encoder block's attention on a TPU v5e over 130 tokens "
      "(128 patches, a class and a distillation token), 12 heads of 64, batch 128: the "
      "f32[128,12,130,130] scores and bf16 probabilities have both minor dimensions 130, "
      "tiled as 136 x 256 on the TPU (nearly 2x the bytes of every score array, and the "
      "MXU passes padded alike); 128 patches with pooled (not appended) class tokens, or "
      "256 tokens, keep the tiles full.", target="tpu")
def deit_attention_130_tokens_tpu() -> Program:
    jax, jnp = _jax()

    def f(x, wqkv, wo):
        b, s, d = x.shape
        q, k, v = jnp.split(jnp.dot(x, wqkv, preferred_element_type=jnp.float32)
                            .astype(x.dtype), 3, -1)
        q, k, v = (t.reshape(b, s, 12, 64) for t in (q, k, v))
        a = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        p = jax.nn.softmax(a * 0.125, axis=-1).astype(x.dtype)
        o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, s, d)
        return x + jnp.dot(o, wo, preferred_element_type=jnp.float32).astype(x.dtype)

    return Program(jax.jit(f), (_s((128, 130, 768), "bfloat16"), _s((768, 2304), "bfloat16"),
                                _s((768, 768), "bfloat16")), target="tpu-v5e")


@case(["tpu-padding"], "A pose-estimation head on a TPU v5e: a 1x1 convolution maps bf16"
      "[64,64,48,256] NHWC features to 17 keypoint heatmaps, followed by a spatial "
      "soft-argmax. With 17 keypoints last, XLA lays the f32[64,64,48,17] heatmaps out "
      "with the batch of 64 in the 128 lanes and the 17 keypoints in the sublanes "
      "({0,3,2,1:T(8,128)}: 128 x 24 tiles for 64 x 17 values, 2.8x their 12.75 MiB, "
      "~36 MiB for the returned heatmaps and as much for each temporary, against a "
      "166 MB peak); keypoints-major heatmaps [64,17,64*48] (H x W in the lanes) are "
      "dense.",
      target="tpu")
def pose_heatmaps_17_keypoints_tpu() -> Program:
    jax, jnp = _jax()

    def f(feat, w):
        hm = jax.lax.conv_general_dilated(feat, w, (1, 1), "VALID",
                                          dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                          preferred_element_type=jnp.float32)
        b, h, wd, k = hm.shape
        p = jax.nn.softmax(hm.reshape(b, h * wd, k), axis=1).reshape(b, h, wd, k)
        ys = jnp.einsum("bhwk,h->bk", p, jnp.arange(h, dtype=jnp.float32))
        xs = jnp.einsum("bhwk,w->bk", p, jnp.arange(wd, dtype=jnp.float32))
        return jnp.stack([xs, ys], -1), hm

    return Program(jax.jit(f), (_s((64, 64, 48, 256), "bfloat16"),
                                _s((1, 1, 256, 17), "bfloat16")), target="tpu-v5e")


# ===================================== repeated-collective ================================

@case(["exposed-collective"], "Sequence-parallel gated MLP on 8 H100s (shard_map) whose "
      "code all-gathers the sequence-sharded input separately for the gate and for the up "
      "projection (two all_gather calls on the same bf16[4096,4096] shard). The feared "
      "repeat is not in the compiled program (XLA merges the two into one all-gather "
      "feeding both matmuls), but that all-gather (bf16[32768,4096], 256 MiB gathered) and "
      "the reduce-scatter of the bf16[32768,4096] output each run with nothing to overlap "
      "(start and done adjacent in the schedule), ~1 ms of NVLink traffic beside ~1.8 ms "
      "of matmuls; a collective matmul (chunked gather/reduce-scatter overlapped with "
      "partial matmuls) hides most of it.", target="gpu")
def gated_mlp_gather_called_twice_h100x8() -> Program:
    jax, jnp = _jax()
    P = _P()

    def local(x, wg, wu, wd):
        g = jnp.dot(jax.lax.all_gather(x, "model", tiled=True), wg,
                    preferred_element_type=jnp.float32)
        u = jnp.dot(jax.lax.all_gather(x, "model", tiled=True), wu,
                    preferred_element_type=jnp.float32)
        h = (jax.nn.silu(g) * u).astype(x.dtype)
        y = jnp.dot(h, wd, preferred_element_type=jnp.float32).astype(x.dtype)
        return jax.lax.psum_scatter(y, "model", tiled=True)

    f = jax.jit(jax.shard_map(local, in_specs=(P("model"), P(None, "model"),
                                               P(None, "model"), P("model", None)),
                              out_specs=P("model")))
    return Program(f, (_s((32768, 4096), "bfloat16"), _s((4096, 14336), "bfloat16"),
                       _s((4096, 14336), "bfloat16"), _s((14336, 4096), "bfloat16")),
                   target="h100x8",
                   kwargs={"mesh": "model=8", "shard": {0: "model,None", 1: "None,model",
                                                        2: "None,model", 3: "model,None"}})


def _scan_accum(psum_inside):
    jax, jnp = _jax()
    P = _P()

    def loss(w, x, y):
        h = jax.nn.relu(jnp.dot(x, w[0], preferred_element_type=jnp.float32))
        return jnp.mean((jnp.dot(h.astype(x.dtype), w[1],
                                 preferred_element_type=jnp.float32) - y) ** 2)

    def local(w, xs, ys):
        wv = jax.lax.pcast(w, "data", to="varying")

        def body(acc, xy):
            g = jax.grad(loss)(wv, *xy)
            if psum_inside:
                g = jax.lax.pmean(g, "data")
            return jax.tree.map(lambda a, b: a + b / 8, acc, g), None

        zeros = jax.tree.map(lambda a: jnp.zeros_like(a, jnp.float32),
                             w if psum_inside else wv)
        acc, _ = jax.lax.scan(body, zeros, (xs, ys))
        if not psum_inside:
            acc = jax.lax.pmean(acc, "data")
        return jax.tree.map(lambda p, g: (p - 1e-4 * g).astype(p.dtype), w, acc)

    sm = jax.shard_map(local, in_specs=(P(), P(None, "data"), P(None, "data")),
                       out_specs=P())
    return jax.jit(sm, donate_argnums=(0,))


def _scan_accum_args():
    w = (_s((4096, 8192), "bfloat16"), _s((8192, 4096), "bfloat16"))
    return (w, _s((8, 8192, 4096), "bfloat16"), _s((8, 8192, 4096)))


_SA_KW = {"mesh": "data=8", "shard": {1: "None,data,None", 2: "None,data,None"}}


@case(["repeated-collective"], "Gradient accumulation on 8 H100s over 8 microbatches in a "
      "lax.scan (shard_map, data parallel) pmeans the bf16 gradients of two "
      "bf16[4096,8192] weights (2 x 64 MiB) inside the scan body: the compiled loop body "
      "holds both all-reduces, 8 rounds of 128 MiB per step where one pmean after the scan "
      "gives the same mean (7/8 of the NVLink traffic wasted).", target="gpu")
def grad_accum_scan_psum_inside_h100x8() -> Program:
    return Program(_scan_accum(True), _scan_accum_args(), target="h100x8", kwargs=_SA_KW)


@case([], "The same scanned accumulation with one pmean after the scan, weights donated: "
      "clean.", target="gpu")
def grad_accum_scan_psum_after_h100x8() -> Program:
    return Program(_scan_accum(False), _scan_accum_args(), target="h100x8", kwargs=_SA_KW)


@case(["repeated-collective"], "Gradient accumulation on 8 CPU devices with jit and "
      "shardings (batch sharded, weights replicated): the scan over 4 microbatches "
      "constrains each microbatch's gradients to be replicated (with_sharding_constraint "
      "to P()) before adding them to the accumulator, so XLA all-reduces the 2 x "
      "f32[2048,2048] gradients (32 MiB) in every iteration: 4 all-reduces where one on "
      "the accumulated (unconstrained) sum after the loop gives the same result.")
def grad_accum_constrained_per_microbatch_cpu8() -> Program:
    jax, jnp = _jax()
    P = _P()
    mesh = _cpu_mesh()
    NS = jax.sharding.NamedSharding
    rep = NS(mesh, P())

    def step(w, xs, ys):
        def loss(w, x, y):
            return jnp.mean((jax.nn.softplus(x @ w[0]) @ w[1] - y) ** 2)

        def body(acc, xy):
            g = jax.grad(loss)(w, *xy)
            g = jax.lax.with_sharding_constraint(g, rep)
            return jax.tree.map(jnp.add, acc, g), None
        acc, _ = jax.lax.scan(body, jax.tree.map(jnp.zeros_like, w), (xs, ys))
        return jax.tree.map(lambda p, g: p - 1e-3 * g, w, acc)

    dat = NS(mesh, P(None, "data", None))
    return Program(jax.jit(step, donate_argnums=(0,)),
                   ((_s((2048, 2048), sharding=rep), _s((2048, 2048), sharding=rep)),
                    _s((4, 8192, 2048), sharding=dat), _s((4, 8192, 2048), sharding=dat)))


# ===================================== gathered-weights ===================================

@case(["gathered-weights"], "FSDP training of a residual MLP on 8 H100s (shard_map) that "
      "all-gathers each layer's row-sharded bf16[8192,8192] weight inside the "
      "differentiated loss with an unscanned Python loop over 8 layers: every gathered "
      "128 MiB weight is a residual of its layer's matmul, so all 8 (~1 GiB per GPU "
      "against 16 MiB shards) stay alive from the forward into the backward (XLA's "
      "temporaries 1.8 GiB per GPU, the timeline's top 1.97 GiB where the forward turns "
      "into the backward); gathering "
      "inside a jax.checkpoint'ed lax.scan body keeps one layer's weight.", target="gpu")
def fsdp_residual_mlp_unscanned_h100x8() -> Program:
    jax, jnp = _jax()
    P = _P()

    def local(ws, x):
        def loss(ws):
            h = x
            for w in ws:
                wf = jax.lax.all_gather(w, "data", tiled=True)
                h = h + jax.nn.gelu(jnp.dot(h, wf, preferred_element_type=jnp.float32)
                                    ).astype(x.dtype)
            return jnp.mean(h.astype(jnp.float32) ** 2)
        g = jax.grad(loss)(ws)
        return [w - (1e-3 * gi).astype(w.dtype) for w, gi in zip(ws, g)]

    f = jax.jit(jax.shard_map(local, in_specs=(P("data"), P("data")), out_specs=P("data")),
                donate_argnums=(0,))
    ws = [_s((8192, 8192), "bfloat16") for _ in range(8)]
    return Program(f, (ws, _s((16384, 8192), "bfloat16")), target="h100x8",
                   kwargs={"mesh": "data=8", "shard": {0: "data,None", 1: "data,None"}})


@case(["gathered-weights"], "A 6-layer FSDP tanh MLP on 8 CPU devices written with "
      "shard_map: every layer's row-sharded f32[4096,4096] weight is all_gather'ed at the "
      "start of the step, before the forward loop (64 MiB each, 384 MiB per device alive "
      "together through the forward and backward); gathering inside a checkpointed scan "
      "body keeps one layer's weight at a time.")
def fsdp_gather_all_first_cpu8() -> Program:
    jax, jnp = _jax()
    P = _P()
    mesh = _cpu_mesh()
    NS = jax.sharding.NamedSharding

    def local(ws, x):
        full = [jax.lax.all_gather(w, "data", tiled=True) for w in ws]

        def loss(full):
            h = x
            for w in full:
                h = jnp.tanh(h @ w)
            return jnp.mean(h ** 2)
        g = jax.grad(loss)(full)
        return [w - 1e-3 * jax.lax.psum_scatter(gi, "data", tiled=True) / 8
                for w, gi in zip(ws, g)]

    f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P("data"), P("data")),
                              out_specs=P("data")), donate_argnums=(0,))
    sh = NS(mesh, P("data", None))
    return Program(f, ([_s((4096, 4096), sharding=sh) for _ in range(6)],
                       _s((1024, 4096), sharding=sh)))


@case([], "FSDP done the expert's way on 8 CPU devices (shard_map): stacked row-sharded "
      "weights f32[6,4096,4096], a lax.scan whose jax.checkpoint'ed body all-gathers its "
      "own layer's weight, gradients reduce-scattered, weights donated: one gathered "
      "layer alive at a time; clean.")
def fsdp_scan_gather_in_body_cpu8() -> Program:
    jax, jnp = _jax()
    P = _P()
    mesh = _cpu_mesh()
    NS = jax.sharding.NamedSharding

    def local(ws, x):
        def loss(ws):
            @jax.checkpoint
            def layer(h, w):
                return jnp.tanh(h @ jax.lax.all_gather(w, "data", axis=0, tiled=True)), None
            h, _ = jax.lax.scan(layer, x, ws)
            return jnp.mean(h ** 2)
        g = jax.grad(loss)(ws)
        return ws - 1e-3 * g

    f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(None, "data"), P("data")),
                              out_specs=P(None, "data")), donate_argnums=(0,))
    return Program(f, (_s((6, 4096, 4096), sharding=NS(mesh, P(None, "data", None))),
                       _s((1024, 4096), sharding=NS(mesh, P("data", None)))))


# ===================================== exposed-collective =================================

@case(["exposed-collective"], "CLIP-style contrastive loss on 8 H100s (shard_map): each "
      "GPU all-gathers the image and text embeddings (bf16[4096,1024] per GPU, 64 MiB "
      "gathered each) and only then computes its f32[4096,32768] similarity block and "
      "the cross-entropy: the gathers sit on the critical path with no independent "
      "compute to overlap them; gathering in chunks and scoring each chunk as it arrives "
      "(or a ring) hides most of the transfer.", target="gpu")
def clip_loss_allgather_h100x8() -> Program:
    jax, jnp = _jax()
    P = _P()

    def local(img, txt):
        all_txt = jax.lax.all_gather(txt, "data", tiled=True)
        all_img = jax.lax.all_gather(img, "data", tiled=True)
        li = jnp.dot(img, all_txt.T, preferred_element_type=jnp.float32) * 14.3
        lt = jnp.dot(txt, all_img.T, preferred_element_type=jnp.float32) * 14.3
        idx = jax.lax.axis_index("data") * img.shape[0] + jnp.arange(img.shape[0])
        lse = jax.nn.logsumexp(li, -1) + jax.nn.logsumexp(lt, -1)
        pos = jnp.take_along_axis(li, idx[:, None], 1)[:, 0]
        return jax.lax.pmean(jnp.mean(lse - 2 * pos), "data")

    f = jax.jit(jax.shard_map(local, in_specs=(P("data"), P("data")), out_specs=P()))
    return Program(f, (_s((32768, 1024), "bfloat16"), _s((32768, 1024), "bfloat16")),
                   target="h100x8", kwargs={"mesh": "data=8",
                                            "shard": {0: "data,None", 1: "data,None"}})


@case(["exposed-collective"], "Megatron-style tensor-parallel attention output on a TPU "
      "v5e 2x4 slice (shard_map): each chip's heads are projected by its row shard of "
      "W_o and the partial bf16[16384,4096] outputs (128 MiB) are psum'ed before the "
      "residual add and the next layer norm, which need the full sum: the all-reduce is "
      "on the critical path with nothing to overlap it; a reduce-scatter into "
      "sequence-parallel norms (or a collective matmul) halves and hides it.",
      target="tpu")
def tp_attention_out_allreduce_tpu_2x4() -> Program:
    jax, jnp = _jax()
    P = _P()

    def local(o, wo, x):
        y = jnp.dot(o, wo, preferred_element_type=jnp.float32).astype(x.dtype)
        h = x + jax.lax.psum(y, "model")
        h32 = h.astype(jnp.float32)
        return (h32 * jax.lax.rsqrt(jnp.mean(h32 * h32, -1, keepdims=True) + 1e-6)
                ).astype(x.dtype)

    f = jax.jit(jax.shard_map(local, in_specs=(P(None, "model"), P("model", None), P()),
                              out_specs=P()))
    return Program(f, (_s((16384, 4096), "bfloat16"), _s((4096, 4096), "bfloat16"),
                       _s((16384, 4096), "bfloat16")), target="tpu-v5e:2x4",
                   kwargs={"mesh": "model=8", "shard": {0: "None,model", 1: "model,None"}})


@case([], "A data-parallel PPO value/policy update on 8 CPU devices (jit with shardings): "
      "batch of 65536 observations sharded over the devices, a 3-layer MLP replicated, "
      "one gradient all-reduce that XLA inserts after the backward, params donated: "
      "clean.")
def ppo_update_data_parallel_cpu8() -> Program:
    jax, jnp = _jax()
    P = _P()
    mesh = _cpu_mesh()
    NS = jax.sharding.NamedSharding

    def step(params, obs, act, adv, logp_old):
        def loss(params):
            h = obs
            for w in params[:-1]:
                h = jnp.tanh(h @ w)
            logits = h @ params[-1]
            logp = jnp.take_along_axis(jax.nn.log_softmax(logits), act[:, None], 1)[:, 0]
            ratio = jnp.exp(logp - logp_old)
            return -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv))
        g = jax.grad(loss)(params)
        return [p - 3e-4 * gi for p, gi in zip(params, g)]

    rep = NS(mesh, P())
    dat = NS(mesh, P("data"))
    params = [_s((256, 512), sharding=rep), _s((512, 512), sharding=rep),
              _s((512, 512), sharding=rep), _s((512, 16), sharding=rep)]
    return Program(jax.jit(step, donate_argnums=(0,)),
                   (params, _s((65536, 256), sharding=NS(mesh, P("data", None))),
                    _s((65536,), "int32", sharding=dat), _s((65536,), sharding=dat),
                    _s((65536,), sharding=dat)))


# ===================================== unrolled-loop ======================================

def _laplace_matvec(p):
    _, jnp = _jax()
    return (4 * p - jnp.roll(p, 1, 0) - jnp.roll(p, -1, 0) - jnp.roll(p, 1, 1)
            - jnp.roll(p, -1, 1))


def _cg_step(state):
    _, jnp = _jax()
    x, r, p, rr = state
    ap = _laplace_matvec(p)
    alpha = rr / jnp.sum(p * ap)
    x = x + alpha * p
    r = r - alpha * ap
    rr_new = jnp.sum(r * r)
    return x, r, r + (rr_new / rr) * p, rr_new


@case(["unrolled-loop"], "Conjugate gradient for a 2-D Poisson problem on an H100 "
      "(f32[2048,2048] grid) written as a Python loop of 40 iterations: 40 copies of the "
      "stencil matvec, the two dot products and the three vector updates in the program "
      "(program size and compile time growing with the iteration count); lax.fori_loop "
      "(or while_loop on the residual) gives one body.", target="gpu")
def conjugate_gradient_python_loop_h100() -> Program:
    jax, jnp = _jax()

    def f(b):
        state = (jnp.zeros_like(b), b, b, jnp.sum(b * b))
        for _ in range(40):
            state = _cg_step(state)
        return state[0]

    return Program(jax.jit(f), (_s((2048, 2048)),), target="h100")


@case([], "The same conjugate gradient as a lax.fori_loop over the 40 iterations: one "
      "body; clean.", target="gpu")
def conjugate_gradient_fori_h100() -> Program:
    jax, jnp = _jax()

    def f(b):
        state = (jnp.zeros_like(b), b, b, jnp.sum(b * b))
        return jax.lax.fori_loop(0, 40, lambda _, s: _cg_step(s), state)[0]

    return Program(jax.jit(f), (_s((2048, 2048)),), target="h100")


@case(["unrolled-loop"], "Greedy decoding of 32 tokens on the CPU with a 2-layer MLP "
      "language model (vocab 8192, width 512, batch 256) written as a Python loop over "
      "the positions: 32 copies of the embedding gather, both layers, the 8192-way logits "
      "matmul and the argmax in the program; lax.scan over the positions gives one body.")
def greedy_decode_python_loop() -> Program:
    jax, jnp = _jax()

    def f(emb, w1, w2, tok):
        out = []
        h = jnp.zeros((tok.shape[0], emb.shape[1]))
        for _ in range(32):
            h = jnp.tanh(emb[tok] + h @ w1)
            tok = jnp.argmax(h @ w2, axis=-1)
            out.append(tok)
        return jnp.stack(out, 1)

    return Program(jax.jit(f), (_s((8192, 512)), _s((512, 512)), _s((512, 8192)),
                                _s((256,), "int32")))


@case([], "The same greedy decoder as a lax.scan over the 32 positions: one body; clean.")
def greedy_decode_scan() -> Program:
    jax, jnp = _jax()

    def f(emb, w1, w2, tok):
        def step(carry, _):
            h, tok = carry
            h = jnp.tanh(emb[tok] + h @ w1)
            tok = jnp.argmax(h @ w2, axis=-1)
            return (h, tok), tok
        _, toks = jax.lax.scan(step, (jnp.zeros((tok.shape[0], emb.shape[1])), tok), None,
                               length=32)
        return toks.T

    return Program(jax.jit(f), (_s((8192, 512)), _s((512, 512)), _s((512, 8192)),
                                _s((256,), "int32")))


# ===================================== constant-rebuilt ===================================

def _blur_matrix(n, sigma):
    jax, jnp = _jax()
    i = jax.lax.broadcasted_iota(jnp.float32, (n, n), 0)
    j = jax.lax.broadcasted_iota(jnp.float32, (n, n), 1)
    k = jnp.exp(-0.5 * ((i - j) / sigma) ** 2)
    return k / jnp.sum(k, axis=1, keepdims=True)


@case(["constant-rebuilt"], "A separable Gaussian blur on the CPU applied as two matmuls "
      "with a dense f32[4096,4096] blur matrix (64 MiB) that the function rebuilds from "
      "iota on every call (16M exponentials and a row normalization) before blurring a "
      "f32[4096,4096] image; the matrix depends on nothing passed in: build it once and "
      "pass it as an argument.")
def gaussian_blur_matrix_rebuilt() -> Program:
    jax, _ = _jax()

    def f(img):
        k = _blur_matrix(img.shape[0], 12.0)
        return k @ img @ k.T

    return Program(jax.jit(f), (_s((4096, 4096)),))


@case([], "The same blur with the blur matrix built once and passed in as an argument: "
      "clean.")
def gaussian_blur_matrix_as_argument() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(lambda k, img: k @ img @ k.T), (_s((4096, 4096)), _s((4096, 4096))))


@case(["constant-rebuilt"], "A real DFT done as matmuls (as is common for short transforms) "
      "on an H100: the cosine and sine matrices f32[4096,4096] (64 MiB "
      "each, 33M transcendentals) are rebuilt from iota on every call before multiplying "
      "the f32[4096,2048] signals; they never change: build them once and pass them in.",
      target="gpu")
def dft_matrices_rebuilt_h100() -> Program:
    jax, jnp = _jax()

    def f(x):
        n = x.shape[0]
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        ang = (2 * jnp.pi / n) * ((i * j) % n).astype(jnp.float32)
        return jnp.cos(ang) @ x, -jnp.sin(ang) @ x

    return Program(jax.jit(f), (_s((4096, 2048)),), target="h100")


# ===================================== onehot-gather ======================================

@case(["onehot-gather"], "A VQ-VAE decoder input on an H100 looks up its codebook "
      "(bf16[16384,512]) as one_hot(codes, 16384) @ codebook for 64 x 1024 codes: a "
      "bf16[65536,16384] one-hot (2 GiB, or a 1.1 TFLOP matmul where XLA fuses it) to copy "
      "64 MiB of rows; jnp.take(codebook, codes, axis=0) is a gather.", target="gpu")
def vq_codebook_onehot_h100() -> Program:
    jax, jnp = _jax()

    def f(codebook, codes, w):
        z = jax.nn.one_hot(codes, codebook.shape[0], dtype=codebook.dtype) @ codebook
        return jax.nn.gelu(jnp.dot(z, w, preferred_element_type=jnp.float32)
                           ).astype(codebook.dtype)

    return Program(jax.jit(f), (_s((16384, 512), "bfloat16"), _s((64, 1024), "int32"),
                                _s((512, 512), "bfloat16")), target="h100")


@case([], "The same VQ-VAE decoder input with jnp.take(codebook, codes, axis=0): a "
      "gather; clean.", target="gpu")
def vq_codebook_take_h100() -> Program:
    jax, jnp = _jax()

    def f(codebook, codes, w):
        z = jnp.take(codebook, codes, axis=0)
        return jax.nn.gelu(jnp.dot(z, w, preferred_element_type=jnp.float32)
                           ).astype(codebook.dtype)

    return Program(jax.jit(f), (_s((16384, 512), "bfloat16"), _s((64, 1024), "int32"),
                                _s((512, 512), "bfloat16")), target="h100")


@case(["onehot-gather"], "T5-style relative position bias on the CPU built as "
      "one_hot(bucket, 256) @ table for a 1024 x 1024 attention with 16 heads: a "
      "f32[1024,1024,256] one-hot (1 GiB) and a matmul to read one of 256 rows per "
      "query-key pair; table[bucket] (a gather, or 16 heads x 1M lookups) does it without "
      "the one-hot.")
def relative_bias_onehot() -> Program:
    jax, jnp = _jax()

    def f(table, q, k):
        n = q.shape[1]
        rel = jnp.arange(n)[None, :] - jnp.arange(n)[:, None]
        bucket = jnp.clip(rel + 128, 0, 255)
        bias = jax.nn.one_hot(bucket, table.shape[0]) @ table          # [n, n, heads]
        s = jnp.einsum("hqd,hkd->hqk", q, k) + bias.transpose(2, 0, 1)
        return jax.nn.softmax(s, axis=-1)

    return Program(jax.jit(f), (_s((256, 16)), _s((16, 1024, 64)), _s((16, 1024, 64))))


# ===================================== host-transfer ======================================

@case(["host-transfer"], "A random-walk Metropolis MCMC chain on the CPU (4096 parallel "
      "chains in 256 dimensions, 500 steps in a lax.scan) sends every step's samples "
      "(f32[4096,256], 4 MiB) to Python with jax.debug.callback to append them to a list: "
      "a host callback, a 4 MiB transfer and a synchronization per step; returning thinned "
      "samples from the scan (its ys) keeps the loop on the device.")
def mcmc_chain_host_logging() -> Program:
    jax, jnp = _jax()
    samples: list = []

    def logp(x):
        return -0.5 * jnp.sum(x * x, -1) - 0.1 * jnp.sum(x ** 4, -1)

    def f(key, x0):
        def step(x, k):
            k1, k2 = jax.random.split(k)
            prop = x + 0.1 * jax.random.normal(k1, x.shape)
            acc = jnp.log(jax.random.uniform(k2, x.shape[:1])) < logp(prop) - logp(x)
            x = jnp.where(acc[:, None], prop, x)
            jax.debug.callback(lambda s: samples.append(s), x)
            return x, None
        x, _ = jax.lax.scan(step, x0, jax.random.split(key, 500))
        return x

    return Program(jax.jit(f), (jax.random.key(0), _s((4096, 256))))


@case([], "The same MCMC chain returning every 10th step's chain means from the scan "
      "(nested scan: 50 x 10 steps), no callback: clean.")
def mcmc_chain_thinned_outputs() -> Program:
    jax, jnp = _jax()

    def logp(x):
        return -0.5 * jnp.sum(x * x, -1) - 0.1 * jnp.sum(x ** 4, -1)

    def f(key, x0):
        def step(x, k):
            k1, k2 = jax.random.split(k)
            prop = x + 0.1 * jax.random.normal(k1, x.shape)
            acc = jnp.log(jax.random.uniform(k2, x.shape[:1])) < logp(prop) - logp(x)
            return jnp.where(acc[:, None], prop, x), None

        def block(x, ks):
            x, _ = jax.lax.scan(step, x, ks)
            return x, jnp.mean(x, 0)
        return jax.lax.scan(block, x0, jax.random.split(key, 500).reshape(50, 10))

    return Program(jax.jit(f), (jax.random.key(0), _s((4096, 256))))


@case(["host-transfer"], "A training loop of 100 SGD steps in a lax.fori_loop on the CPU "
      "whose data augmentation calls a NumPy function through jax.pure_callback in every "
      "step (f32[1024,3072] image batch, 12 MiB, out to the host and back each step): "
      "100 host round trips and synchronizations inside the loop; writing the "
      "augmentation in jnp keeps the loop on the device.")
def sgd_loop_numpy_augment_callback() -> Program:
    jax, jnp = _jax()
    import numpy as np

    def augment(x, i):
        x = np.asarray(x)
        return (np.roll(x, int(i), axis=1) * np.float32(0.9)).copy()

    def f(w, x, y):
        def step(i, w):
            xa = jax.pure_callback(augment, jax.ShapeDtypeStruct(x.shape, x.dtype), x, i)
            g = jax.grad(lambda w: jnp.mean((jnp.tanh(xa @ w[0]) @ w[1] - y) ** 2))(w)
            return jax.tree.map(lambda p, gi: p - 1e-2 * gi, w, g)
        return jax.lax.fori_loop(0, 100, step, w)

    return Program(jax.jit(f, donate_argnums=(0,)),
                   ((_s((3072, 512)), _s((512, 10))), _s((1024, 3072)), _s((1024, 10))))


# ===================================== small-kernels ======================================

@case(["small-kernels"], "Multi-head attention on an H100 for a short sequence (batch 4, "
      "128 tokens, 32 heads of 64) written as a Python loop over the heads: 32 tiny QK^T "
      "and PV matmuls (8 MFLOP each) and 32 softmaxes, ~190 kernels in the compiled "
      "program (7 for the batched twin), each moving a few KiB (launch-bound, a few us "
      "each for well under 1 us of work); one batched einsum over the heads does it in a "
      "handful of kernels.", target="gpu")
def attention_heads_python_loop_h100() -> Program:
    jax, jnp = _jax()

    def f(q, k, v):
        outs = []
        for h in range(q.shape[2]):
            s = jnp.einsum("bqd,bkd->bqk", q[:, :, h], k[:, :, h],
                           preferred_element_type=jnp.float32)
            p = jax.nn.softmax(s * 0.125, axis=-1).astype(q.dtype)
            outs.append(jnp.einsum("bqk,bkd->bqd", p, v[:, :, h]))
        return jnp.stack(outs, 2)

    a = _s((4, 128, 32, 64), "bfloat16")
    return Program(jax.jit(f), (a, a, a), target="h100")


@case([], "The same attention as one einsum over all heads (batched QK^T, softmax, PV): "
      "clean.", target="gpu")
def attention_heads_batched_h100() -> Program:
    jax, jnp = _jax()

    def f(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        p = jax.nn.softmax(s * 0.125, axis=-1).astype(q.dtype)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v)

    a = _s((4, 128, 32, 64), "bfloat16")
    return Program(jax.jit(f), (a, a, a), target="h100")


@case(["small-kernels"], "Per-segment statistics on an H100 for 32 fixed segments of a "
      "f32[32768,64] feature array written as a Python loop: each segment's mean and max "
      "is its own slice and reductions over 1024 rows (256 KiB each): the compiled "
      "program has 32 reduction kernels (XLA fuses each segment's mean and max) and a "
      "concatenation, each launch a few us for well under 1 us of work; reshaping to "
      "[32,1024,64] and reducing axis 1 does it in one kernel.", target="gpu")
def segment_stats_python_loop_h100() -> Program:
    jax, jnp = _jax()

    def f(x, w):
        outs = []
        for s in range(32):
            seg = x[s * 1024:(s + 1) * 1024]
            outs.append(jnp.concatenate([seg.mean(0), seg.max(0)]) * w[s])
        return jnp.stack(outs)

    return Program(jax.jit(f), (_s((32768, 64)), _s((32, 128))), target="h100")


# ===================================== reduction-split ====================================

@case(["reduction-split"], "The attention output projection on an H100 written per head "
      "and summed: einsum('bshd,hdm->bshm') of the bf16[16,1024,16,128] head outputs with "
      "W_o bf16[16,128,2048] writes f32[16,1024,16,2048] (2 GiB) and then reduces the "
      "16-head axis in a separate pass; contracting the heads in the matmul "
      "(einsum('bshd,hdm->bsm')) needs no temporary and a single GEMM.", target="gpu")
def out_proj_per_head_then_sum_h100() -> Program:
    jax, jnp = _jax()

    def f(o, wo):
        y = jnp.einsum("bshd,hdm->bshm", o, wo, preferred_element_type=jnp.float32)
        return y.sum(2).astype(o.dtype)

    return Program(jax.jit(f), (_s((16, 1024, 16, 128), "bfloat16"),
                                _s((16, 128, 2048), "bfloat16")), target="h100")


@case([], "The same output projection contracting heads and head dimension in one einsum "
      "('bshd,hdm->bsm'): one GEMM; clean.", target="gpu")
def out_proj_heads_contracted_h100() -> Program:
    jax, jnp = _jax()

    def f(o, wo):
        return jnp.einsum("bshd,hdm->bsm", o, wo,
                          preferred_element_type=jnp.float32).astype(o.dtype)

    return Program(jax.jit(f), (_s((16, 1024, 16, 128), "bfloat16"),
                                _s((16, 128, 2048), "bfloat16")), target="h100")


@case(["reduction-split"], "A smoothed-particle density estimate on the CPU gathers each of "
      "262144 particles' 4 neighbour feature rows (f32[262144,4,128], 512 MiB) as one "
      "array, weights them and sums the size-4 axis in a second pass; summing the 4 "
      "weighted gathered slices (w[:, j] * feat[nbr[:, j]]) fuses into the gathers without "
      "the temporary.")
def sph_neighbour_weighted_sum() -> Program:
    jax, _ = _jax()

    def f(feat, nbr, w):
        return (feat[nbr] * w[:, :, None]).sum(1)

    return Program(jax.jit(f), (_s((262144, 128)), _s((262144, 4), "int32"), _s((262144, 4))))


# ===================================== loop-state =========================================

@case(["loop-state"], "Per-element bisection on an H100 for the root of a monotone "
      "function over f32[8192,8192] intervals: 6 iterations in a lax.fori_loop whose "
      "state is (lo, hi) (256 MiB each) plus the target array: every iteration reads "
      "three 256 MiB arrays and writes two for a few flops per element (~6 GiB of HBM "
      "traffic); unrolled (unroll=True) the 6 iterations fuse into one pass (~1 GiB).",
      target="gpu")
def bisection_short_fori_h100() -> Program:
    jax, jnp = _jax()

    def f(lo, hi, y):
        def step(_, s):
            lo, hi = s
            mid = 0.5 * (lo + hi)
            below = mid * mid * mid + mid < y
            return jnp.where(below, mid, lo), jnp.where(below, hi, mid)
        lo, hi = jax.lax.fori_loop(0, 6, step, (lo, hi))
        return 0.5 * (lo + hi)

    a = _s((8192, 8192))
    return Program(jax.jit(f, donate_argnums=(0,)), (a, a, a), target="h100")


@case([], "The same 6 bisection iterations with unroll=True: XLA fuses them into one "
      "elementwise pass; clean.", target="gpu")
def bisection_unrolled_h100() -> Program:
    jax, jnp = _jax()

    def f(lo, hi, y):
        def step(_, s):
            lo, hi = s
            mid = 0.5 * (lo + hi)
            below = mid * mid * mid + mid < y
            return jnp.where(below, mid, lo), jnp.where(below, hi, mid)
        lo, hi = jax.lax.fori_loop(0, 6, step, (lo, hi), unroll=True)
        return 0.5 * (lo + hi)

    a = _s((8192, 8192))
    return Program(jax.jit(f, donate_argnums=(0,)), (a, a, a), target="h100")


@case(["loop-state"], "Four iterations of a gamma-correction refinement (x <- x - "
      "(x^2.2 - y) / (2.2 x^1.2)) for a batch of f32[64,1024,1024] images (256 MiB) on "
      "the CPU in a lax.scan over 4 steps: each step reads the image and the target and "
      "writes the image (768 MiB of traffic per step) for a pow and a few flops per pixel; "
      "unrolled, the 4 steps fuse into one pass.")
def gamma_newton_short_scan() -> Program:
    jax, jnp = _jax()

    def f(y):
        def step(x, _):
            return x - (x ** 2.2 - y) / (2.2 * x ** 1.2 + 1e-6), None
        x, _ = jax.lax.scan(step, jnp.sqrt(y) + 0.1, None, length=4)
        return x

    return Program(jax.jit(f), (_s((64, 1024, 1024)),))


# ===================================== side-by-side =======================================

@case(["side-by-side"], "Test-time augmentation for a classifier with a 65536-way head on "
      "an H100: vmap over 8 augmented copies computes all 8 f32[2048,65536] logit "
      "matrices (512 MiB each, 4 GiB together) before the per-copy softmax and the "
      "average, although each copy's probabilities could be added to a running sum "
      "before the next copy's logits are made; lax.map (or a scan with an accumulator) "
      "keeps one at a time (XLA's peak 5.0 GB -> 1.25 GB).", target="gpu")
def tta_logits_vmap_h100() -> Program:
    jax, jnp = _jax()

    def f(xs, w):
        def probs(x):
            return jax.nn.softmax(jnp.dot(x, w, preferred_element_type=jnp.float32), -1)
        return jax.vmap(probs)(xs).mean(0)

    return Program(jax.jit(f), (_s((8, 2048, 1024), "bfloat16"),
                                _s((1024, 65536), "bfloat16")), target="h100")


@case([], "The same test-time augmentation as a lax.scan adding each copy's probabilities "
      "to a running f32[2048,65536] sum: one logit matrix alive at a time; clean.",
      target="gpu")
def tta_logits_scan_accumulate_h100() -> Program:
    jax, jnp = _jax()

    def f(xs, w):
        def body(acc, x):
            return acc + jax.nn.softmax(jnp.dot(x, w, preferred_element_type=jnp.float32),
                                        -1), None
        acc, _ = jax.lax.scan(body, jnp.zeros((xs.shape[1], w.shape[1])), xs)
        return acc / xs.shape[0]

    return Program(jax.jit(f), (_s((8, 2048, 1024), "bfloat16"),
                                _s((1024, 65536), "bfloat16")), target="h100")


@case(["side-by-side"], "A kernel density estimate on the CPU for 4 independent query "
      "blocks: each block's f32[4096,16384] Gaussian kernel matrix (256 MiB) is built, "
      "the 4 are concatenated (1 GiB) and then summed over the data axis, so all four are "
      "alive together although each block's row sums could finish before the next block "
      "is built; summing per block (or lax.map) keeps one (~256 MiB).")
def kde_blocks_concatenated() -> Program:
    jax, jnp = _jax()

    def f(qs, data):
        ks = []
        for q in qs:
            d2 = (jnp.sum(q * q, 1)[:, None] - 2 * q @ data.T
                  + jnp.sum(data * data, 1)[None, :])
            ks.append(jnp.exp(-0.5 * d2))
        return jnp.log(jnp.concatenate(ks).mean(1))

    return Program(jax.jit(f), ([_s((4096, 8))] * 4, _s((16384, 8))))


# ===================================== recompute ==========================================

@case(["recompute"], "A RetNet-style retention stack on the CPU (4 layers scanned, 8 heads, "
      "1024 tokens, batch 4): the decay matrix D[h,i,j] = gamma_h^(i-j) for i >= j is "
      "built from iota before the scan as f32[8,1024,1024] (32 MiB) and read from memory "
      "by every layer; built from iota inside the layer it fuses into the masking of the "
      "scores (32 MiB less, a read of it saved per layer).")
def retention_decay_outside_scan() -> Program:
    jax, jnp = _jax()

    def f(ws, x):
        n = x.shape[1]
        i = jax.lax.broadcasted_iota(jnp.float32, (8, n, n), 1)
        j = jax.lax.broadcasted_iota(jnp.float32, (8, n, n), 2)
        g = 1.0 - 2.0 ** (-5.0 - jax.lax.broadcasted_iota(jnp.float32, (8, n, n), 0))
        decay = jnp.where(i >= j, g ** (i - j), 0.0)

        def layer(h, w):
            b, s, d = h.shape
            q, k, v = (t.reshape(b, s, 8, d // 8) for t in jnp.split(h @ w, 3, -1))
            a = jnp.einsum("bqhd,bkhd->bhqk", q, k) * decay
            return h + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, d), None
        h, _ = jax.lax.scan(layer, x, ws)
        return h

    return Program(jax.jit(f), (_s((4, 512, 1536)), _s((4, 1024, 512))))


@case(["recompute"], "A 2-D advection-forcing step on an H100 (f32[8192,8192] fields, 50 "
      "steps in a fori_loop): the coordinate grids X and Y from jnp.meshgrid of linspace "
      "are built before the loop (256 MiB each) and read from memory in every step for "
      "the forcing sin(X) cos(Y + t); built from iota inside the step they fuse into the "
      "update (512 MiB less, two of the step's four array reads saved).", target="gpu")
def forcing_meshgrid_outside_loop_h100() -> Program:
    jax, jnp = _jax()

    def f(u):
        n = u.shape[0]
        xs = jnp.linspace(0, 2 * jnp.pi, n)
        x, y = jnp.meshgrid(xs, xs, indexing="ij")

        def step(t, u):
            lap = (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1)
                   + jnp.roll(u, -1, 1) - 4 * u)
            return u + 0.1 * lap + 0.01 * jnp.sin(x) * jnp.cos(y + 0.1 * t)
        return jax.lax.fori_loop(0, 50, step, u)

    return Program(jax.jit(f, donate_argnums=(0,)), (_s((8192, 8192)),), target="h100")


# ===================================== large-constant =====================================

@case(["large-constant"], "A PCA whitening step on the CPU closes over a NumPy projection "
      "basis (f32[4096,512], 8 MiB) and NumPy per-feature means (computed offline): both "
      "are folded into the program as constants, held by the executable and copied "
      "through lowering and compile, and new statistics mean a recompile; passing them as "
      "arguments keeps the program small.")
def pca_basis_closed_over() -> Program:
    jax, jnp = _jax()
    import numpy as np
    rng = np.random.default_rng(7)
    basis = rng.standard_normal((4096, 512), dtype=np.float32) / 64
    mean = rng.standard_normal((4096,), dtype=np.float32)

    def f(x):
        return (x - jnp.asarray(mean)) @ jnp.asarray(basis)

    return Program(jax.jit(f), (_s((2048, 4096)),))


@case([], "The same PCA whitening with the basis and means passed as arguments: clean.")
def pca_basis_as_arguments() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(lambda x, mean, basis: (x - mean) @ basis),
                   (_s((2048, 4096)), _s((4096,)), _s((4096, 512))))


@case(["large-constant"], "A speech front end on an H100 closes over a NumPy mel filterbank "
      "and a precomputed f32[4096,512] random-feature projection (8.5 MiB of NumPy arrays "
      "in all): both are baked into the program as constants (held by the executable, "
      "copied through lowering and compile, a recompile for any new filterbank); "
      "passing them as arguments avoids it.", target="gpu")
def speech_frontend_numpy_constants_h100() -> Program:
    jax, jnp = _jax()
    import numpy as np
    rng = np.random.default_rng(11)
    proj = rng.standard_normal((4096, 512), dtype=np.float32) / 64
    mel = np.abs(rng.standard_normal((512, 128), dtype=np.float32))

    def f(frames):
        spec = jnp.abs(frames @ jnp.asarray(proj))
        return jnp.log(spec @ jnp.asarray(mel) + 1e-6)

    return Program(jax.jit(f), (_s((4096, 4096)),), target="h100")


# ===================================== donation-unused ====================================

@case(["donation-unused"], "An image preprocessing step on the CPU donates its uint8 batch "
      "(uint8[256,3,512,512], 192 MiB) but returns normalized f32 images "
      "(f32[256,512,512,3]): no output has the input's dtype and shape, so the donation "
      "cannot be used (JAX warns) and only invalidates the caller's batch; drop "
      "donate_argnums.")
def preprocess_donates_uint8_batch() -> Program:
    jax, jnp = _jax()

    def f(img, mean, std):
        x = img.astype(jnp.float32).transpose(0, 2, 3, 1) / 255.0
        return (x - mean) / std

    return Program(jax.jit(f, donate_argnums=(0,)),
                   (_s((256, 3, 512, 512), "uint8"), _s((3,)), _s((3,))))


@case(["donation-unused"], "An evaluation step on an H100 donates the bf16 model weights "
      "(4 x bf16[4096,16384], 512 MiB) although it only reads them and returns a scalar "
      "loss and f32 accuracy: nothing reuses the 512 MiB of donated buffers, and the "
      "caller's weights are destroyed by an eval call; drop the donation.", target="gpu")
def eval_step_donates_weights_h100() -> Program:
    jax, jnp = _jax()

    def f(ws, x, y):
        h = x
        for i, w in enumerate(ws):
            h = jnp.dot(h, w if i % 2 == 0 else w.T, preferred_element_type=jnp.float32)
            h = jax.nn.gelu(h).astype(x.dtype)
        loss = jnp.mean((h.astype(jnp.float32) - y) ** 2)
        return loss, jnp.mean(jnp.abs(h.astype(jnp.float32) - y) < 0.1)

    ws = [_s((4096, 16384), "bfloat16") for _ in range(4)]
    return Program(jax.jit(f, donate_argnums=(0,)),
                   (ws, _s((8192, 4096), "bfloat16"), _s((8192, 4096))), target="h100")


# ===================================== other ==============================================

@case(["other:diag-of-matmul"], "Per-example Mahalanobis-style scores on the CPU computed "
      "as jnp.diag(X @ M @ X.T) for 4096 examples: the full f32[4096,4096] product (64 "
      "MiB, 2 x 4096^2 x 1024 flops for the second matmul) is built to read its diagonal; "
      "jnp.einsum('ij,ij->i', X @ M, X) gives the same 4096 numbers with 4096x fewer "
      "flops in the second step.")
def mahalanobis_diag_of_matmul() -> Program:
    jax, jnp = _jax()
    return Program(jax.jit(lambda x, m: jnp.diag(x @ m @ x.T)),
                   (_s((4096, 1024)), _s((1024, 1024))))


@case([], "The same Mahalanobis-style scores with einsum('ij,ij->i', X @ M, X): one matmul "
      "and a row-wise reduction; clean.")
def mahalanobis_rowwise_einsum() -> Program:
    jax, jnp = _jax()
    return Program(jax.jit(lambda x, m: jnp.einsum("ij,ij->i", x @ m, x)),
                   (_s((4096, 1024)), _s((1024, 1024))))


@case(["other:quadratic-cumsum"], "A running mean over the time axis on an H100 computed as "
      "tril(ones(T, T)) @ x for T = 8192 steps and 1024 channels: a 0.14 TFLOP matmul "
      "(and a 256 MiB triangular matrix) for what jnp.cumsum (or an associative scan) "
      "does in one pass over 32 MiB (the triangular matrix, rebuilt every call, goes with "
      "the same fix).", target="gpu")
def running_mean_triangular_matmul_h100() -> Program:
    jax, jnp = _jax()

    def f(x):
        t = x.shape[0]
        tri = jnp.tril(jnp.ones((t, t), jnp.float32))
        return (tri @ x) / jnp.arange(1, t + 1, dtype=jnp.float32)[:, None]

    return Program(jax.jit(f), (_s((8192, 1024)),), target="h100")


# ===================================== more clean programs ================================

@case([], "A CNN training step on an H100 written the expert's way: NHWC bf16 activations "
      "(batch 128, 56x56, 128 channels, 98 MiB each), HWIO bf16 filters, f32 loss, 4 "
      "conv+ReLU layers, params donated. The backward keeps each layer's ReLU output, "
      "which is the next layer's input (what any remat keeps), so checkpointing saves "
      "nothing; the peak (0.93 GB) is far from the device's limit: clean.", target="gpu")
def cnn_nhwc_bf16_train_h100() -> Program:
    jax, jnp = _jax()

    def loss(ws, x):
        for w in ws:
            x = jax.nn.relu(jax.lax.conv_general_dilated(
                x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
        return jnp.mean(x.astype(jnp.float32) ** 2)

    def step(ws, x):
        g = jax.grad(loss)(ws, x)
        return [w - (1e-3 * gi).astype(w.dtype) for w, gi in zip(ws, g)]

    ws = [_s((3, 3, 128, 128), "bfloat16") for _ in range(4)]
    return Program(jax.jit(step, donate_argnums=(0,)),
                   (ws, _s((128, 56, 56, 128), "bfloat16")), target="h100")


@case([], "A 2-D acoustic wave solver on the CPU (f32[4096,4096] current and previous "
      "pressure, 200 leapfrog steps in a lax.fori_loop, a 5-point stencil fused into one "
      "update per step, state donated): clean.")
def acoustic_wave_leapfrog_fori() -> Program:
    jax, jnp = _jax()

    def f(p, p_prev):
        def step(_, s):
            p, q = s
            lap = (jnp.roll(p, 1, 0) + jnp.roll(p, -1, 0) + jnp.roll(p, 1, 1)
                   + jnp.roll(p, -1, 1) - 4 * p)
            return 2 * p - q + 0.1 * lap, p
        return jax.lax.fori_loop(0, 200, step, (p, p_prev))

    a = _s((4096, 4096))
    return Program(jax.jit(f, donate_argnums=(0, 1)), (a, a))


@case(["other:scan-rewrites-cache"], "A KV-cache decode step for a 4-layer bf16 decoder on a "
      "TPU v5e, caches bf16[4,16,8,4096,128] (K and V, 512 MiB each) donated, layers in a "
      "lax.scan that takes each layer's cache slice as xs and returns the updated slice "
      "as ys: the scan writes the whole 1 GiB of caches into fresh ys buffers every token "
      "to change 64 KiB per layer (XLA's temporaries 1.9 GB, peak 2.6 GB against 1.1 GB "
      "of arguments, 1 GiB aliased); carrying the caches and updating them with "
      "dynamic_update_slice at [layer, ..., pos] keeps the update in place.", target="tpu")
def kv_decode_scan_cache_as_ys_tpu() -> Program:
    jax, jnp = _jax()

    def f(kc, vc, x, ws, pos):
        def layer(h, inp):
            k_l, v_l, w = inp
            q, k, v = jnp.split(jnp.dot(h, w, preferred_element_type=jnp.float32)
                                .astype(h.dtype), 3, -1)
            b = h.shape[0]
            q, k, v = (t.reshape(b, 8, 128) for t in (q, k, v))
            k_l = jax.lax.dynamic_update_slice(k_l, k[:, :, None], (0, 0, pos, 0))
            v_l = jax.lax.dynamic_update_slice(v_l, v[:, :, None], (0, 0, pos, 0))
            s = jnp.einsum("bhd,bhsd->bhs", q, k_l, preferred_element_type=jnp.float32)
            p = jax.nn.softmax(s * 128 ** -0.5, -1).astype(h.dtype)
            o = jnp.einsum("bhs,bhsd->bhd", p, v_l).reshape(b, 1024)
            return h + o, (k_l, v_l)
        h, (kc, vc) = jax.lax.scan(layer, x, (kc, vc, ws))
        return h, kc, vc

    c = _s((4, 16, 8, 4096, 128), "bfloat16")
    return Program(jax.jit(f, donate_argnums=(0, 1)),
                   (c, c, _s((16, 1024), "bfloat16"), _s((4, 1024, 3072), "bfloat16"),
                    _s((), "int32")), target="tpu-v5e")
