"""A second blind evaluation set for hloscope's advisor (issue 28, item 5).

Who wrote it: a helper session (``blind2``) that never read the advisor's rules, its
documentation (docs/advisor.md), its tests (tests/test_advisor*.py, tests/test_checked.py),
the other labelled sets (tests/advisor_programs.py, tests/advisor_heldout*.py), the
checked-savings code (src/hloscope/_checked/), benchmarks/advisor_*.py, or the README's
advisor and lint sections, and never ran the advisor (``hloscope lint``, ``hloscope.lint``,
``Report.advice``, findings or groups) on these programs. It read only the first blind set
(tests/advisor_blind.py, written by another blind helper) for its structure and its
vocabulary, and wrote different programs (other domains, other ways of making each mistake).
The labels below were written and committed BEFORE the advisor ran on them. Only the
optimized HLO (``Report.hlo_after``) and XLA's memory figures (``Report.memory_analysis``)
were looked at, to confirm that each labelled pattern is really in the compiled program and
to size it. Where the compiled program showed that XLA had already removed a feared pattern
(logits padded on a TPU, score matrices alive together, 4x4 transforms padded), the program
was kept as a clean case saying so; where a pattern was absent from a labelled program, the
program was changed (or dropped) before committing; the advisor was never run.

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
    "rigid_body_batched_3x3_tpu": "the advisor's 'share of the peak' counts the values live "
    "at XLA's peak moment at their allocated size (TPU tiles padded), not XLA's unpadded "
    "live-range figure: HS115 said 1397% of the peak here (a 256 MiB padded buffer against "
    "an 18 MiB unpadded peak); memory's 'at most live at once' says both figures; and "
    "HS103 leaves out a copy that also converts (XLA's f32 -> bf16 copy for the TPU's MXU "
    "at default precision is its precision, not a layout the user chose): "
    "tests/advisor_programs.py tpu_batched_3x3",
    "classifier_10_classes_tpu": "HS115 leaves out values in the TPU's on-chip memory "
    "(S(1), VMEM) whose padding comes from XLA's layout putting a short dimension minor "
    "(here the logits laid out {0,1}) rather than the program's own minor dimension "
    "(an f32[N,3], embeddings of width 130 still fire): they hold no HBM; also "
    "scoring_donates_read_only_cache_tpu, a copy XLA laid out {1,2,0} "
    "(tpu_logits_on_chip)",
    "gp_posterior_explicit_inverse": "HS103 leaves out a copy into or out of a LAPACK or "
    "cuSOLVER call's column-major layout (JAX's lowering, not the user's); the new HS123 "
    "(inverse-instead-of-solve) fires on a triangular solve against the identity (two "
    "iotas compared) whose result a matmul reads (gp_explicit_inverse, gp_cholesky_solve)",
    "routing_argsort_topk_h100": "HS106 counts a multi-output kernel's results (a sort's "
    "keys and indices) as one chain, not independent ones; the new HS124 (sort-for-top-k) "
    "fires on a sort over 512 or more elements whose results are only sliced to their "
    "first sixteenth or less (argsort_for_top_k, top_k_routing)",
    "gnn_scan_remat": "HS111 leaves out a checkpoint's recompute inside the backward loop's "
    "body (one step's forward recomputed there is what checkpointing a scan body does) "
    "(gnn_scan_checkpointed)",
    "zero3_gather_all_upfront_cpu8": "HS111 leaves out values a collective made (weights "
    "all-gathered for the layers are HS116's, not activations) (zero3_gathered_up_front)",
    "red_black_masks_materialized_h100": "HS104 now fires on an iota-built array read "
    "inside a loop when its iotas' op_names are outside the loop body (the code built it "
    "before the loop); it stays quiet where they are the body's (XLA hoisted it); also "
    "wave_sponge_profile_materialized (mask_built_before_loop, mask_built_in_loop)",
    "hadamard_rebuilt_h100": "HS118 takes a matrix a matmul multiplies by, computed from "
    "indices with more than an iota (popcounts, index arithmetic), as rebuilt whatever "
    "its per-element cost (hadamard_rebuilt_gpu, hadamard_as_argument_gpu)",
    "conv_upcast_h100": "HS112 reads cuDNN's convolution and cuBLAS's GEMM custom-calls as "
    "the matmuls an upcast feeds (conv_upcast_gpu, conv_bf16_gpu)",
    "onehot_embedding_tpu": "HS119 reads the TPU's matmul-convolution (window size 1) as a "
    "matmul, its contracting dimensions from dim_labels, and no longer takes a fusion "
    "nested inside the matmul's for a one-hot stored in memory (onehot_embedding_tpu, "
    "embedding_gather_tpu)",
    "verlet_short_fori_tpu": "trip_count reads a loop's count from its condition and "
    "counter where XLA gives no known_trip_count (a TPU's while), and HS105 leaves the "
    "counter's scalar add (a kernel of its own on a TPU) out of the body's kernels "
    "(short_loop_tpu, short_loop_unrolled_tpu)",
    "grad_accum_unrolled_psum_cpu8": "HS122 also fires outside loops where a kernel only "
    "adds all-reduced values that copies of one computation made (a microbatch's "
    "gradient, unrolled): reducing their sum once is the same (XLA combined the 8 "
    "all-reduces into one here) (allreduce_per_microbatch_unrolled, "
    "allreduce_after_unrolled_accumulation)",
    "sequence_parallel_mlp_h100x8": "HS113 names XLA's pipelining flags only where XLA's "
    "collective pipeliner acts (a loop's all-gather of a slice of loop-invariant state, "
    "a loop's reduction written into a slice of its output); a forward all-gather or "
    "reduce-scatter beside one matmul that keeps the gathered axis gets a collective "
    "matmul, estimated; other GPU collectives of those kinds are quiet (the flags change "
    "nothing there: grad_accum_pmean_once_h100x8, fsdp_shard_map_gathers_h100x8 and "
    "grad_accum_pmean_per_microbatch_h100x8 showed it)",
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

def _lion(params, mom, grads):
    jax, jnp = _jax()
    b1, b2, lr, wd = 0.9, 0.99, 1e-4, 0.1
    upd = jax.tree.map(lambda m, g: jnp.sign(b1 * m + (1 - b1) * g), mom, grads)
    params = jax.tree.map(lambda p, u: p - lr * (u + wd * p), params, upd)
    mom = jax.tree.map(lambda m, g: b2 * m + (1 - b2) * g, mom, grads)
    return params, mom


def _lion_args():
    p = [_s((4096, 4096)) for _ in range(6)]
    return (p, p, p)


@case(["donate"], "A Lion optimizer step on a TPU v5e over 6 f32[4096,4096] weights (384 MiB "
      "of params, 384 MiB of momentum, 384 MiB of gradients) returns new params and "
      "momentum without donating them: 768 MiB of fresh outputs beside 1152 MiB of "
      "arguments; donating params and momentum brings XLA's peak from ~2.0 GiB to ~1.2 GiB.",
      target="tpu")
def lion_step_not_donated_tpu() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_lion), _lion_args(), target="tpu-v5e")


@case([], "The same Lion step with params and momentum donated: updated in place; clean.",
      target="tpu")
def lion_step_donated_tpu() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_lion, donate_argnums=(0, 1)), _lion_args(), target="tpu-v5e")


def _paged_decode(k_pages, v_pages, q, k_new, v_new, page_ids, slots, block_table):
    jax, jnp = _jax()
    k_pages = k_pages.at[page_ids, slots].set(k_new)
    v_pages = v_pages.at[page_ids, slots].set(v_new)
    k = k_pages[block_table]                       # [B, pages, page, H, D]
    v = v_pages[block_table]
    b, npg, pg, h, d = k.shape
    k = k.reshape(b, npg * pg, h, d)
    v = v.reshape(b, npg * pg, h, d)
    s = jnp.einsum("bhd,bshd->bhs", q, k, preferred_element_type=jnp.float32) / 128 ** 0.5
    p = jax.nn.softmax(s, axis=-1).astype(jnp.bfloat16)
    o = jnp.einsum("bhs,bshd->bhd", p, v, preferred_element_type=jnp.float32)
    return o.astype(jnp.bfloat16), k_pages, v_pages


def _paged_args():
    pages = _s((8192, 16, 8, 128), "bfloat16")       # 256 MiB each
    t = _s((32, 8, 128), "bfloat16")
    return (pages, pages, t, t, t, _s((32,), "int32"), _s((32,), "int32"),
            _s((32, 64), "int32"))


@case(["donate"], "A paged-attention decode step on an H100 scatters one new token per "
      "sequence into bf16[8192,16,8,128] K and V page pools (256 MiB each) and returns the "
      "pools undonated: XLA copies both 256 MiB pools every token to scatter 64 KiB into "
      "them and holds old and new pools (~1 GiB peak); donating the pools makes the "
      "scatter in place (~0.6 GiB, the 512 MiB copy gone).", target="gpu")
def paged_kv_decode_not_donated_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_paged_decode), _paged_args(), target="h100")


@case([], "The same paged-attention decode step with both page pools donated: in-place "
      "scatter, bf16 reads with f32 accumulation; clean.", target="gpu")
def paged_kv_decode_donated_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_paged_decode, donate_argnums=(0, 1)), _paged_args(),
                   target="h100")


# ===================================== remat ==============================================

def _resnet_loss(params, x, remat):
    jax, jnp = _jax()

    def conv(h, w):
        return jax.lax.conv_general_dilated(h, w, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def block(h, p):
        w1, w2 = p
        y = jax.nn.relu(conv(h, w1))
        return jax.nn.relu(h + conv(y, w2)), None

    if remat:
        block = jax.checkpoint(block)
    h, _ = jax.lax.scan(block, x, params)
    return jnp.mean(h.astype(jnp.float32) ** 2)


def _resnet_args():
    w = _s((8, 3, 3, 256, 256), "bfloat16")
    return ((w, w), _s((32, 64, 64, 256), "bfloat16"))


@case(["remat"], "Training a ResNet-style stack of 8 residual conv blocks (bf16 NHWC, "
      "batch 32, 64x64, 256 channels, scanned) on an H100 without checkpointing: each block "
      "saves its conv outputs and ReLU masks (~3 x 64 MiB) for the backward, ~1.5 GiB "
      "against 18 MiB of weights; jax.checkpoint on the block keeps only the 64 MiB block "
      "inputs and nearly halves XLA's peak (1.9 -> 1.0 GiB).", target="gpu")
def resnet_scan_no_remat_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(jax.grad(lambda p, x: _resnet_loss(p, x, False))), _resnet_args(),
                   target="h100")


@case([], "The same ResNet-style training step with jax.checkpoint on the scanned block: "
      "only the block inputs are saved; clean.", target="gpu")
def resnet_scan_remat_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(jax.grad(lambda p, x: _resnet_loss(p, x, True))), _resnet_args(),
                   target="h100")


@case(["remat"], "Training a 4-layer message-passing GNN on the CPU (16384 nodes x 128 "
      "features, 262144 edges, layers scanned): each layer gathers f32[262144,128] edge "
      "messages (128 MiB) and saves them (and what their ReLU needs) for the backward, "
      "against 8 MiB node states; checkpointing the layer keeps the node states only and "
      "recomputes one layer's messages at a time (XLA's temporaries 489 -> 329 MiB).")
def gnn_scan_no_remat() -> Program:
    jax, jnp = _jax()

    def loss(ws, h, src, dst, ew):
        def layer(h, w):
            m = jax.nn.relu((h @ w)[src] * ew[:, None])
            agg = jax.ops.segment_sum(m, dst, num_segments=h.shape[0])
            return jnp.tanh(h + agg), None
        h, _ = jax.lax.scan(layer, h, ws)
        return jnp.mean(h ** 2)

    e = 262144
    return Program(jax.jit(jax.grad(loss)),
                   (_s((4, 128, 128)), _s((16384, 128)), _s((e,), "int32"),
                    _s((e,), "int32"), _s((e,))))


# ===================================== upcast =============================================

@case(["upcast"], "Two 3x3 convolutions on an H100 whose bf16 input (bf16[32,128,128,128], "
      "128 MiB) and bf16 filters are cast to f32 first: the convolutions run in f32 on f32 "
      "copies (256 MiB activations) instead of bf16 tensor-core convolutions; bf16 "
      "operands with preferred_element_type=f32 keep the f32 accumulation.", target="gpu")
def conv_upcast_h100() -> Program:
    jax, jnp = _jax()

    def f(x, w1, w2):
        def conv(h, w):
            return jax.lax.conv_general_dilated(h, w, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jax.nn.relu(conv(x.astype(jnp.float32), w1.astype(jnp.float32)))
        return conv(h, w2.astype(jnp.float32)).astype(jnp.bfloat16)

    w = _s((3, 3, 128, 128), "bfloat16")
    return Program(jax.jit(f), (_s((32, 128, 128, 128), "bfloat16"), w, w), target="h100")


@case(["upcast"], "A GRU over 64 steps on an H100 (batch 2048, hidden 2048) keeps bf16 "
      "weights (2 x bf16[2048,6144]) but casts them and the inputs to f32 inside the scan "
      "body: every step converts the weights and runs both matmuls in f32 (~100 GFLOP per "
      "step at f32 rather than bf16 tensor-core rate); bf16 operands with "
      "preferred_element_type=f32 do the same accumulation several times faster.",
      target="gpu")
def gru_scan_upcast_h100() -> Program:
    jax, jnp = _jax()

    def f(wx, wh, xs, h0):
        def step(h, x):
            zx = x.astype(jnp.float32) @ wx.astype(jnp.float32)
            zh = h @ wh.astype(jnp.float32)
            zr, zz, zn = jnp.split(zx, 3, -1)
            hr, hz, hn = jnp.split(zh, 3, -1)
            r = jax.nn.sigmoid(zr + hr)
            z = jax.nn.sigmoid(zz + hz)
            n = jnp.tanh(zn + r * hn)
            h = (1 - z) * n + z * h
            return h, h.astype(jnp.bfloat16)
        return jax.lax.scan(step, h0, xs)

    w = _s((2048, 6144), "bfloat16")
    return Program(jax.jit(f), (w, w, _s((64, 2048, 2048), "bfloat16"), _s((2048, 2048))),
                   target="h100")


# ===================================== layout-copy ========================================

@case(["layout-copy"], "A 4-layer CNN forward on an H100 written in NCHW/OIHW "
      "(bf16[64,128,64,64], 64 MiB activations): cuDNN runs bf16 convolutions in NHWC, so "
      "XLA transposes the input into NHWC and the result back (and the filters), 64 MiB "
      "transposes beside the convolutions; keeping the data NHWC from the start removes "
      "them.", target="gpu")
def cnn_nchw_h100() -> Program:
    jax, _ = _jax()

    def f(ws, x):
        for w in ws:
            x = jax.nn.relu(jax.lax.conv_general_dilated(
                x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")))
        return x

    ws = [_s((128, 128, 3, 3), "bfloat16") for _ in range(4)]
    return Program(jax.jit(f), (ws, _s((64, 128, 64, 64), "bfloat16")), target="h100")


@case(["layout-copy"], "A batched spectral low-pass filter on the CPU over complex64"
      "[32,4096,256] (256 MiB) transformed along the middle axis: jnp.fft moves the axis "
      "last, so the compiled program transposes and copies the 256 MiB array around the "
      "FFTs (2 transposes and 2 copies); storing the signals with time last "
      "(complex64[32,256,4096]) avoids them.")
def fft_middle_axis_filter() -> Program:
    jax, jnp = _jax()

    def f(x):
        n = x.shape[1]
        keep = (jnp.abs(jnp.fft.fftfreq(n)) < 0.1)[None, :, None]
        return jnp.fft.ifft(jnp.where(keep, jnp.fft.fft(x, axis=1), 0), axis=1)

    return Program(jax.jit(f), (_s((32, 4096, 256), "complex64"),))


@case([], "A pseudo-spectral viscous Burgers solver on the CPU: 256 independent f32[4096] "
      "signals with the transformed axis last, 100 steps of rfft/irfft in a fori_loop, "
      "wavenumbers from iota where they are used, state donated: clean.")
def burgers_spectral_fori() -> Program:
    jax, jnp = _jax()

    def f(u):
        n = u.shape[-1]
        def step(_, u):
            k = jnp.fft.rfftfreq(n) * 2 * jnp.pi * n
            uh = jnp.fft.rfft(u, axis=-1)
            ux = jnp.fft.irfft(1j * k * uh, n=n, axis=-1)
            uxx = jnp.fft.irfft(-k * k * uh, n=n, axis=-1)
            return u + 1e-5 * (0.01 * uxx - u * ux)
        return jax.lax.fori_loop(0, 100, step, u)

    return Program(jax.jit(f, donate_argnums=(0,)), (_s((256, 4096)),))


# ===================================== f64 ================================================

@case(["f64"], "Monte Carlo pricing of a European call on the CPU under jax_enable_x64: "
      "1M paths of 16 time steps drawn and evolved in f64 (f64[16,1048576] normals, 128 "
      "MiB, and f64 paths); the Monte Carlo error (~1e-3 relative) is far above f32's "
      "rounding, so f32 halves the bytes and doubles the SIMD width for the same answer.")
def monte_carlo_option_f64() -> Program:
    jax, jnp = _jax()

    def price(key, s0, sigma):
        z = jax.random.normal(key, (16, 1048576), dtype=jnp.float64)
        dt = 1.0 / 16
        logs = jnp.log(s0) + jnp.cumsum((0.05 - 0.5 * sigma ** 2) * dt
                                        + sigma * jnp.sqrt(dt) * z, axis=0)
        payoff = jnp.maximum(jnp.exp(logs[-1]) - 100.0, 0.0)
        return jnp.exp(-0.05) * jnp.mean(payoff)

    with jax.enable_x64(True):
        lowered = jax.jit(price).lower(jax.random.key(0), _s((), "float64"),
                                       _s((), "float64"))
    return Program(lowered, ())


@case(["f64"], "An ensemble of 2M damped pendulums integrated with RK4 for 200 steps on the "
      "CPU, all in f64 under jax_enable_x64 (state f64[2,2097152], 32 MiB): a dissipative "
      "ensemble at dt=0.01 needs no f64; in f32 each step moves half the bytes at twice the "
      "SIMD width.")
def pendulum_ensemble_rk4_f64() -> Program:
    jax, jnp = _jax()

    def f(y, damp):
        def rhs(y):
            return jnp.stack([y[1], -jnp.sin(y[0]) - damp * y[1]])

        def step(_, y):
            dt = 0.01
            k1 = rhs(y)
            k2 = rhs(y + 0.5 * dt * k1)
            k3 = rhs(y + 0.5 * dt * k2)
            k4 = rhs(y + dt * k3)
            return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return jax.lax.fori_loop(0, 200, step, y)

    with jax.enable_x64(True):
        lowered = jax.jit(f, donate_argnums=(0,)).lower(_s((2, 2097152), "float64"),
                                                        _s((2097152,), "float64"))
    return Program(lowered, ())


@case([], "A Gaussian-process posterior mean on the CPU: RBF kernel over 2048 training "
      "points (f32, with jitter), Cholesky factorization and two triangular solves "
      "(jax.scipy.linalg.cho_solve), then the cross-kernel product for 4096 test points: "
      "the expert's way; clean.")
def gp_posterior_cholesky() -> Program:
    jax, jnp = _jax()

    def f(x, y, xs):
        def k(a, b):
            d = jnp.sum(a * a, 1)[:, None] + jnp.sum(b * b, 1)[None, :] - 2 * a @ b.T
            return jnp.exp(-0.5 * d)
        kxx = k(x, x) + 1e-3 * jnp.eye(x.shape[0])
        c = jax.scipy.linalg.cho_factor(kxx, lower=True)
        alpha = jax.scipy.linalg.cho_solve(c, y)
        return k(xs, x) @ alpha

    return Program(jax.jit(f), (_s((2048, 16)), _s((2048, 8)), _s((4096, 16))))


@case(["other:inverse-instead-of-solve"], "The same Gaussian-process posterior mean on the "
      "CPU computed with jnp.linalg.inv(K + jitter) @ y: forming the explicit inverse of the "
      "2048x2048 kernel matrix costs about three times the flops of a Cholesky factorization "
      "and solve (and is less accurate); cho_factor/cho_solve (or jnp.linalg.solve) does "
      "the same with a fraction of the work.")
def gp_posterior_explicit_inverse() -> Program:
    jax, jnp = _jax()

    def f(x, y, xs):
        def k(a, b):
            d = jnp.sum(a * a, 1)[:, None] + jnp.sum(b * b, 1)[None, :] - 2 * a @ b.T
            return jnp.exp(-0.5 * d)
        kinv = jnp.linalg.inv(k(x, x) + 1e-3 * jnp.eye(x.shape[0]))
        return k(xs, x) @ (kinv @ y)

    return Program(jax.jit(f), (_s((2048, 16)), _s((2048, 8)), _s((4096, 16))))


# ===================================== tpu-padding ========================================

@case([], "A softmax classifier training step on a TPU v5e with 10 classes for 262144 "
      "f32 examples, weights donated. An expert would fear the logits' minor dimension of 10 "
      "padding to 128 lanes, but checked in the compiled program XLA lays the f32[262144,10] "
      "logits out {0,1} (the example axis minor) and fuses the loss into the matmuls: "
      "nothing padded, nothing to fix; clean.", target="tpu")
def classifier_10_classes_tpu() -> Program:
    jax, jnp = _jax()

    def step(w, x, labels):
        def loss(w):
            logits = x @ w
            lp = jax.nn.log_softmax(logits, axis=-1)
            return -jnp.mean(jnp.take_along_axis(lp, labels[:, None], 1))
        return w - 0.1 * jax.grad(loss)(w)

    return Program(jax.jit(step, donate_argnums=(0,)),
                   (_s((256, 10)), _s((262144, 256)), _s((262144,), "int32")),
                   target="tpu-v5e")


@case(["tpu-padding"], "Attitude integration of 131072 rigid bodies on a TPU v5e: the "
      "rotation matrices are f32[131072,3,3] and updated with a batched 3x3 matmul "
      "(einsum 'nij,njk->nik'): XLA tiles the two minor 3x3 dimensions of the product to "
      "4x128, so 4.5 MiB of data takes a 512 MiB temporary (over 100x); storing the "
      "matrices component-major (f32[3,3,N]) and writing the 3x3 product as 27 "
      "elementwise multiply-adds keeps them dense.", target="tpu")
def rigid_body_batched_3x3_tpu() -> Program:
    jax, jnp = _jax()

    def f(r, w):
        return r + 0.01 * jnp.einsum("nij,njk->nik", r, w)

    return Program(jax.jit(f, donate_argnums=(0,)), (_s((131072, 3, 3)), _s((131072, 3, 3))),
                   target="tpu-v5e")


@case([], "A data-parallel MLP inference on a TPU v5e 2x4 slice: bf16 tokens [32768,1024] "
      "sharded over the 8 chips by batch, replicated weights 1024x4096 and 4096x1024 with "
      "f32 accumulation, every dimension a multiple of 128, no collective needed: clean.",
      target="tpu")
def mlp_data_parallel_tpu_2x4() -> Program:
    jax, jnp = _jax()

    def f(w1, w2, x):
        h = jax.nn.gelu(jnp.dot(x, w1, preferred_element_type=jnp.float32)).astype(x.dtype)
        return jnp.dot(h, w2, preferred_element_type=jnp.float32).astype(x.dtype)

    return Program(jax.jit(f), (_s((1024, 4096), "bfloat16"), _s((4096, 1024), "bfloat16"),
                                _s((32768, 1024), "bfloat16")), target="tpu-v5e:2x4",
                   kwargs={"mesh": "data=8", "shard": {2: "data,None"}})


# ===================================== repeated-collective ================================

def _microbatch_step(psum_inside):
    jax, jnp = _jax()
    P = _P()

    def loss(w, x, y):
        return jnp.mean((jax.nn.gelu(x @ w[0]) @ w[1] - y) ** 2)

    def local(w, xs, ys):
        wv = jax.lax.pcast(w, "data", to="varying")
        n = xs.shape[0]

        def body(i, acc):
            g = jax.grad(loss)(wv, xs[i], ys[i])
            if psum_inside:
                g = jax.lax.pmean(g, "data")
            return jax.tree.map(jnp.add, acc, g)

        zeros = jax.tree.map(jnp.zeros_like, w if psum_inside else wv)
        acc = jax.lax.fori_loop(0, n, body, zeros)
        if not psum_inside:
            acc = jax.lax.pmean(acc, "data")
        return jax.tree.map(lambda p, g: p - 1e-3 * g / n, w, acc)

    sm = jax.shard_map(local, in_specs=(P(), P(None, "data"), P(None, "data")),
                       out_specs=P())
    return jax.jit(sm, donate_argnums=(0,))


def _microbatch_args():
    w = (_s((4096, 4096)), _s((4096, 4096)))
    return (w, _s((16, 8192, 4096), "float32"), _s((16, 8192, 4096)))


_MB_KW = {"mesh": "data=8", "shard": {1: "None,data,None", 2: "None,data,None"}}


@case(["repeated-collective"], "Gradient accumulation over 16 microbatches on 8 H100s "
      "(shard_map, data parallel, a fori_loop) pmeans the 2 x f32[4096,4096] gradients "
      "(128 MiB) inside the loop, once per microbatch: 16 rounds of 128 MiB all-reduces "
      "where one after the loop gives the same mean (15/16 of the NVLink traffic wasted, "
      "each round ~0.5 ms).", target="gpu")
def grad_accum_pmean_per_microbatch_h100x8() -> Program:
    return Program(_microbatch_step(True), _microbatch_args(), target="h100x8",
                   kwargs=_MB_KW)


@case([], "The same accumulation with one pmean after the loop, weights donated: "
      "clean.", target="gpu")
def grad_accum_pmean_once_h100x8() -> Program:
    return Program(_microbatch_step(False), _microbatch_args(), target="h100x8",
                   kwargs=_MB_KW)


@case(["repeated-collective"], "Gradient accumulation over 4 microbatches on 8 CPU "
      "devices (shard_map) written as a Python loop that psums each microbatch's gradients "
      "(2 x f32[2048,2048]) before adding them: XLA combines the 8 all-reduces into one, "
      "but it still reduces 4 x 32 MiB where psumming the accumulated sum once reduces "
      "32 MiB (3/4 of the collective traffic wasted).")
def grad_accum_unrolled_psum_cpu8() -> Program:
    jax, jnp = _jax()
    P = _P()

    def loss(w, x, y):
        return jnp.mean((jnp.tanh(x @ w[0]) @ w[1] - y) ** 2)

    def local(w, xs, ys):
        wv = jax.lax.pcast(w, "data", to="varying")
        acc = None
        for i in range(xs.shape[0]):
            g = jax.lax.psum(jax.grad(loss)(wv, xs[i], ys[i]), "data")
            acc = g if acc is None else jax.tree.map(jnp.add, acc, g)
        return jax.tree.map(lambda p, g: p - 1e-3 * g, w, acc)

    mesh = _cpu_mesh()
    NS = jax.sharding.NamedSharding
    rep, dat = NS(mesh, P()), NS(mesh, P(None, "data"))
    f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), P(None, "data"),
                                                           P(None, "data")), out_specs=P()),
                donate_argnums=(0,))
    return Program(f, ((_s((2048, 2048), sharding=rep), _s((2048, 2048), sharding=rep)),
                       _s((4, 4096, 2048), sharding=dat), _s((4, 4096, 2048), sharding=dat)))


# ===================================== gathered-weights ===================================

@case(["gathered-weights"], "A hand-written FSDP training step on 8 H100s (shard_map): "
      "6 layers of f32[4096,4096] weights, each shard all_gather'ed in a Python loop "
      "(64 MiB per gathered layer) inside the differentiated loss, so every gathered "
      "weight is saved for the backward: ~384 MiB of gathered weights alive together per "
      "GPU; gathering inside a checkpointed scan body keeps one.", target="gpu")
def fsdp_shard_map_gathers_h100x8() -> Program:
    jax, jnp = _jax()
    P = _P()

    def local(ws, x):
        def loss(ws):
            h = x
            for w in ws:
                wf = jax.lax.all_gather(w, "data", tiled=True)
                h = jnp.tanh(h @ wf)
            return jnp.mean(h ** 2)
        g = jax.grad(loss)(ws)
        return [w - 1e-3 * gi for w, gi in zip(ws, g)]

    f = jax.jit(jax.shard_map(local, in_specs=(P("data"), P("data")), out_specs=P("data")),
                donate_argnums=(0,))
    ws = [_s((4096, 4096)) for _ in range(6)]
    return Program(f, (ws, _s((8192, 4096))), target="h100x8",
                   kwargs={"mesh": "data=8", "shard": {0: "data,None", 1: "data,None"}})


@case(["gathered-weights"], "A ZeRO-3-style training step on 8 CPU devices with jit and "
      "shardings: 6 f32[4096,4096] weights are sharded by rows (8 MiB per device each), "
      "but the loss first constrains every weight to be replicated (with_sharding_constraint "
      "to P()) before a Python loop over the layers: all 6 full weights (384 MiB per "
      "device) are gathered up front and alive together through the forward and backward "
      "(XLA's temporaries 768 MiB per device); gathering each layer where it is used, "
      "inside a checkpointed scan, keeps one.")
def zero3_gather_all_upfront_cpu8() -> Program:
    jax, jnp = _jax()
    P = _P()
    mesh = _cpu_mesh()
    NS = jax.sharding.NamedSharding

    def step(ws, x):
        def loss(ws):
            ws = [jax.lax.with_sharding_constraint(w, NS(mesh, P())) for w in ws]
            h = x
            for w in ws:
                h = jnp.tanh(h @ w)
            return jnp.mean(h ** 2)
        g = jax.grad(loss)(ws)
        return [w - 1e-3 * gi for w, gi in zip(ws, g)]

    ws = [_s((4096, 4096), sharding=NS(mesh, P("data", None))) for _ in range(6)]
    return Program(jax.jit(step, donate_argnums=(0,)),
                   (ws, _s((2048, 4096), sharding=NS(mesh, P("data", None)))))


# ===================================== exposed-collective =================================

@case(["exposed-collective"], "Sequence-parallel MLP forward on 8 H100s (shard_map): the "
      "sequence-sharded activations are all-gathered to bf16[32768,4096] (256 MiB) before the "
      "column-parallel matmul, and the row-parallel output is reduce-scattered after the "
      "second matmul; each collective sits between the matmuls with nothing to overlap "
      "(~1 ms of NVLink traffic beside ~1.5 ms of matmuls); a collective matmul (chunked "
      "all-gather/reduce-scatter overlapped with partial matmuls) hides most of it.",
      target="gpu")
def sequence_parallel_mlp_h100x8() -> Program:
    jax, jnp = _jax()
    P = _P()

    def local(x, w1, w2):
        xf = jax.lax.all_gather(x, "model", tiled=True)
        h = jax.nn.gelu(jnp.dot(xf, w1, preferred_element_type=jnp.float32)
                        .astype(jnp.bfloat16))
        y = jnp.dot(h, w2, preferred_element_type=jnp.float32).astype(jnp.bfloat16)
        return jax.lax.psum_scatter(y, "model", tiled=True)

    f = jax.jit(jax.shard_map(local, in_specs=(P("model"), P(None, "model"),
                                               P("model", None)), out_specs=P("model")))
    return Program(f, (_s((32768, 4096), "bfloat16"), _s((4096, 16384), "bfloat16"),
                       _s((16384, 4096), "bfloat16")), target="h100x8",
                   kwargs={"mesh": "model=8", "shard": {0: "model,None", 1: "None,model",
                                                        2: "model,None"}})


@case(["exposed-collective"], "Expert-parallel MoE layer on 8 H100s (shard_map): tokens "
      "already grouped per expert, bf16[8,2048,2048] per GPU (64 MiB), go through an "
      "all_to_all to their experts, a 2-matmul FFN, and an all_to_all back; both "
      "all-to-alls are on the critical path with nothing overlapping them; splitting the "
      "capacity into chunks and pipelining dispatch with the expert matmuls hides them.",
      target="gpu")
def moe_all_to_all_h100x8() -> Program:
    jax, jnp = _jax()
    P = _P()

    def local(x, w1, w2):
        # x: [experts=8, capacity, d] on each device; w1/w2: this device's expert.
        y = jax.lax.all_to_all(x, "expert", 0, 0, tiled=True)     # [8, cap, d] from peers
        h = jax.nn.gelu(jnp.einsum("scd,df->scf", y, w1[0],
                                   preferred_element_type=jnp.float32).astype(x.dtype))
        o = jnp.einsum("scf,fd->scd", h, w2[0],
                       preferred_element_type=jnp.float32).astype(x.dtype)
        return jax.lax.all_to_all(o, "expert", 0, 0, tiled=True)

    f = jax.jit(jax.shard_map(local, in_specs=(P("expert"), P("expert"), P("expert")),
                              out_specs=P("expert")))
    return Program(f, (_s((64, 2048, 2048), "bfloat16"), _s((8, 2048, 8192), "bfloat16"),
                       _s((8, 8192, 2048), "bfloat16")), target="h100x8",
                   kwargs={"mesh": "expert=8", "shard": {0: "expert,None,None",
                                                         1: "expert,None,None",
                                                         2: "expert,None,None"}})


@case([], "Data-parallel EMA of model weights on 8 CPU devices: 4 f32[4096,4096] weights "
      "and their EMA copies sharded by rows, the EMA donated and updated elementwise, no "
      "collective needed: clean.")
def ema_update_sharded_cpu8() -> Program:
    jax, _ = _jax()
    P = _P()
    mesh = _cpu_mesh()
    sh = jax.sharding.NamedSharding(mesh, P("data", None))
    ws = [_s((4096, 4096), sharding=sh) for _ in range(4)]

    def f(ema, ws):
        return jax.tree.map(lambda e, w: 0.999 * e + 0.001 * w, ema, ws)

    return Program(jax.jit(f, donate_argnums=(0,)), (ws, ws))


# ===================================== unrolled-loop ======================================

def _denoiser(x, t, w1, w2):
    jax, jnp = _jax()
    h = jax.nn.silu(jnp.dot(x, w1, preferred_element_type=jnp.float32) + t)
    return jnp.dot(h.astype(x.dtype), w2, preferred_element_type=jnp.float32)


def _ddim_update(x, eps, a, a_next):
    _, jnp = _jax()
    x0 = (x.astype(jnp.float32) - jnp.sqrt(1 - a) * eps) / jnp.sqrt(a)
    return (jnp.sqrt(a_next) * x0 + jnp.sqrt(1 - a_next) * eps).astype(x.dtype)


def _ddim_args():
    return (_s((4096, 1024), "bfloat16"), _s((1024, 4096), "bfloat16"),
            _s((4096, 1024), "bfloat16"))


@case(["unrolled-loop"], "A 48-step DDIM sampler on an H100 written as a Python loop over "
      "the timesteps: 48 copies of the denoiser (2 matmuls, ~70 GFLOP each step) and of the "
      "update in the program, compile time and program size growing with the step count; "
      "lax.fori_loop over the steps (alphas from an array) gives one body.", target="gpu")
def ddim_sampler_python_loop_h100() -> Program:
    jax, _ = _jax()
    import numpy as np
    alphas = np.cos(np.linspace(0.0, 1.5, 49)) ** 2 * 0.999 + 1e-3

    def f(x, w1, w2):
        for i in range(48):
            eps = _denoiser(x, float(i) / 48, w1, w2)
            x = _ddim_update(x, eps, float(alphas[i]), float(alphas[i + 1]))
        return x

    return Program(jax.jit(f, donate_argnums=(0,)), _ddim_args(), target="h100")


@case([], "The same 48-step DDIM sampler as a lax.fori_loop with the alphas built from iota "
      "inside the step: one loop body, the sample donated; clean.", target="gpu")
def ddim_sampler_fori_h100() -> Program:
    jax, jnp = _jax()

    def f(x, w1, w2):
        def step(i, x):
            alpha = lambda j: jnp.cos(1.5 * j / 48) ** 2 * 0.999 + 1e-3
            eps = _denoiser(x, i / 48, w1, w2)
            return _ddim_update(x, eps, alpha(i), alpha(i + 1))
        return jax.lax.fori_loop(0, 48, step, x)

    return Program(jax.jit(f, donate_argnums=(0,)), _ddim_args(), target="h100")


def _cartpole(s, a):
    _, jnp = _jax()
    x, v, th, om = s
    force = jnp.where(a > 0, 10.0, -10.0)
    acc_th = (9.8 * jnp.sin(th) - jnp.cos(th) * (force + 0.05 * om * om * jnp.sin(th))) / 0.7
    acc = force - 0.05 * acc_th * jnp.cos(th)
    return (x + 0.02 * v, v + 0.02 * acc, th + 0.02 * om, om + 0.02 * acc_th)


def _policy(p, s):
    _, jnp = _jax()
    w1, w2 = p
    return (jnp.tanh(jnp.stack(s, 1) @ w1) @ w2)[:, 0]


def _rollout_args():
    v = _s((16384,))
    return ((_s((4, 256)), _s((256, 1))), (v, v, v, v), _s((32, 16384)))


@case(["unrolled-loop"], "An RL rollout on the CPU of 32 steps of 16384 vectorized "
      "cart-pole environments with an MLP policy, written as a Python loop: 32 copies of "
      "the policy and the dynamics in the program (~11k lines of optimized HLO; ~20 s of "
      "compile here against ~2 s for the scan, growing with the horizon); lax.scan over "
      "the steps gives one body.")
def cartpole_rollout_python_loop() -> Program:
    jax, jnp = _jax()

    def f(p, s, noise):
        thetas = []
        for t in range(noise.shape[0]):
            s = _cartpole(s, _policy(p, s) + noise[t])
            thetas.append(s[2])
        return s, jnp.cos(jnp.stack(thetas))

    return Program(jax.jit(f), _rollout_args())


@case([], "The same cart-pole rollout as a lax.scan over the 32 steps, returning the "
      "final state and the rewards: one body; clean.")
def cartpole_rollout_scan() -> Program:
    jax, jnp = _jax()

    def f(p, s, noise):
        def step(s, n):
            s = _cartpole(s, _policy(p, s) + n)
            return s, s[2]
        s, thetas = jax.lax.scan(step, s, noise)
        return s, jnp.cos(thetas)

    return Program(jax.jit(f), _rollout_args())


# ===================================== constant-rebuilt ===================================

@case(["constant-rebuilt"], "A fast-JL style projection on an H100 multiplies by a "
      "Walsh-Hadamard matrix f32[8192,8192] that it rebuilds from iota on every call "
      "((-1)^popcount(i&j): 64M popcounts and a 256 MiB array written each call) before "
      "the matmul with x f32[8192,512]; the matrix never changes: build it once and pass "
      "it in (or apply the fast transform).", target="gpu")
def hadamard_rebuilt_h100() -> Program:
    jax, jnp = _jax()

    def f(x):
        n = x.shape[0]
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        h = 1.0 - 2.0 * (jax.lax.population_count(i & j) & 1).astype(jnp.float32)
        return (h @ x) / jnp.sqrt(jnp.float32(n))

    return Program(jax.jit(f), (_s((8192, 512)),), target="h100")


@case(["constant-rebuilt"], "A Chebyshev least-squares fit on the CPU rebuilds the "
      "Vandermonde-like basis T_k(x_i) = cos(k arccos x_i) at 8192 fixed Chebyshev nodes for "
      "1024 degrees (f32[8192,1024], 32 MiB, 8M cosines) on every call to project 64 "
      "signals on it; the basis depends on nothing passed in: compute it once and pass "
      "it.")
def chebyshev_basis_rebuilt() -> Program:
    jax, jnp = _jax()

    def f(y):
        n, deg = y.shape[0], 1024
        x = jnp.cos(jnp.pi * (jnp.arange(n, dtype=jnp.float32) + 0.5) / n)
        t = jnp.cos(jnp.arange(deg, dtype=jnp.float32)[None, :] * jnp.arccos(x)[:, None])
        return (2.0 / n) * (t.T @ y)

    return Program(jax.jit(f), (_s((8192, 64)),))


# ===================================== onehot-gather ======================================

@case(["onehot-gather"], "Token embedding on a TPU v5e written as one_hot(ids, 65536) @ "
      "table with a bf16[65536,2048] table (256 MiB) for 8192 tokens: XLA fuses the "
      "[8192,65536] one-hot into the matmul (it is not written), but the matmul still "
      "does ~2.2 TFLOP (~11 ms of MXU time at peak) to read 32 MiB of rows; "
      "jnp.take(table, ids, axis=0) is a gather of a fraction of that time.", target="tpu")
def onehot_embedding_tpu() -> Program:
    jax, jnp = _jax()

    def f(table, ids):
        return jnp.dot(jax.nn.one_hot(ids, table.shape[0], dtype=table.dtype), table)

    return Program(jax.jit(f), (_s((65536, 2048), "bfloat16"), _s((16, 512), "int32")),
                   target="tpu-v5e")


def _gnn_args():
    return (_s((8192, 256), "bfloat16"), _s((256, 256), "bfloat16"),
            _s((65536,), "int32"), _s((65536,), "int32"))


@case(["onehot-gather"], "A graph convolution on an H100 gathers source-node features "
      "as one_hot(src, 8192) @ x: a bf16[65536,8192] one-hot (1 GiB) and a 0.27 TFLOP "
      "matmul to read 32 MiB of rows; x[src] (a gather) followed by segment_sum does it "
      "without the one-hot.", target="gpu")
def gnn_onehot_gather_h100() -> Program:
    jax, jnp = _jax()

    def f(x, w, src, dst):
        xs = jax.nn.one_hot(src, x.shape[0], dtype=x.dtype) @ x
        m = jax.nn.relu(jnp.dot(xs, w, preferred_element_type=jnp.float32))
        return jax.ops.segment_sum(m, dst, num_segments=x.shape[0]).astype(x.dtype)

    return Program(jax.jit(f), _gnn_args(), target="h100")


@case([], "The same graph convolution with the transform applied to the 8192 nodes first, "
      "then a gather of the transformed rows and a segment_sum: clean.", target="gpu")
def gnn_gather_segment_sum_h100() -> Program:
    jax, jnp = _jax()

    def f(x, w, src, dst):
        xw = jnp.dot(x, w, preferred_element_type=jnp.float32)
        m = jax.nn.relu(xw[src])
        return jax.ops.segment_sum(m, dst, num_segments=x.shape[0]).astype(x.dtype)

    return Program(jax.jit(f), _gnn_args(), target="h100")


# ===================================== host-transfer ======================================

@case(["host-transfer"], "A leapfrog integrator of 1M harmonic oscillators on the CPU "
      "(state f32[2,1048576]) runs 200 steps in a fori_loop and calls jax.debug.print of "
      "the energy in every step: a host callback and a synchronization per step (200 "
      "round trips through Python); returning the energies from a scan (or printing every "
      "N steps outside the loop) keeps the loop in the compiled program.")
def integrator_debug_print() -> Program:
    jax, jnp = _jax()

    def f(y):
        def step(i, y):
            q, p = y[0], y[1]
            p = p - 0.005 * q
            q = q + 0.01 * p
            p = p - 0.005 * q
            jax.debug.print("step {i} energy {e}", i=i, e=jnp.sum(p * p + q * q))
            return jnp.stack([q, p])
        return jax.lax.fori_loop(0, 200, step, y)

    return Program(jax.jit(f, donate_argnums=(0,)), (_s((2, 1048576)),))


@case(["host-transfer"], "An RL rollout on the CPU that steps a NumPy environment through "
      "jax.experimental.io_callback inside a 64-step lax.scan: the f32[8192,64] actions "
      "(2 MiB) go to the host and the observations back in every step, with a "
      "synchronization each time; writing the environment in jnp keeps the scan on the "
      "device.")
def rollout_numpy_env_io_callback() -> Program:
    jax, jnp = _jax()
    import numpy as np
    from jax.experimental import io_callback

    def env_step(obs, act):
        return np.tanh(np.asarray(obs) + 0.1 * np.asarray(act)).astype(np.float32)

    def f(w, obs):
        def step(obs, _):
            act = jnp.tanh(obs @ w)
            obs = io_callback(env_step, jax.ShapeDtypeStruct(obs.shape, obs.dtype), obs, act)
            return obs, jnp.mean(obs)
        return jax.lax.scan(step, obs, None, length=64)

    return Program(jax.jit(f), (_s((64, 64)), _s((8192, 64))))


# ===================================== small-kernels ======================================

@case(["small-kernels"], "A block-sparse matrix product on an H100 written as a Python "
      "loop over its 48 nonzero 128x128 blocks, each multiplied with a bf16[128,256] block "
      "of x and added into its output block row: 48 tiny GEMMs (8 MFLOP each, a few us of "
      "launch each for well under 1 us of work) and their adds; gathering the blocks into a "
      "batched einsum (one GEMM) and a segment_sum does it in two or three kernels.",
      target="gpu")
def block_sparse_python_loop_h100() -> Program:
    jax, jnp = _jax()
    import numpy as np
    rng = np.random.default_rng(2)
    rows = rng.integers(0, 16, 48)
    cols = rng.integers(0, 16, 48)

    def f(blocks, x):
        xb = x.reshape(16, 128, x.shape[1])
        out = [jnp.zeros((128, x.shape[1]), jnp.float32) for _ in range(16)]
        for k in range(48):
            out[rows[k]] = out[rows[k]] + jnp.dot(blocks[k], xb[cols[k]],
                                                  preferred_element_type=jnp.float32)
        return jnp.concatenate(out).astype(x.dtype)

    return Program(jax.jit(f), (_s((48, 128, 128), "bfloat16"), _s((2048, 256), "bfloat16")),
                   target="h100")


# ===================================== reduction-split ====================================

@case(["reduction-split"], "An ensemble of 8 linear heads averaged on an H100: "
      "einsum('bd,kdf->kbf') of x bf16[16384,4096] with W bf16[8,4096,4096] writes the 8 "
      "head outputs (f32[8,16384,4096], 2 GiB) and then reduces the size-8 axis in a "
      "separate pass; by linearity, averaging the weights first (x @ W.mean(0)) needs one "
      "matmul and no 2 GiB temporary.", target="gpu")
def ensemble_heads_mean_after_matmul_h100() -> Program:
    jax, jnp = _jax()

    def f(x, w):
        y = jnp.einsum("bd,kdf->kbf", x, w, preferred_element_type=jnp.float32)
        return jnp.mean(y, axis=0).astype(x.dtype)

    return Program(jax.jit(f), (_s((16384, 4096), "bfloat16"), _s((8, 4096, 4096), "bfloat16")),
                   target="h100")


@case(["reduction-split"], "Point-cloud max-pooling over 8 nearest neighbours on the CPU: "
      "feat[idx].max(1) with feat f32[131072,256] and idx int32[131072,8] materializes the "
      "gathered f32[131072,8,256] (1 GiB) and reduces its size-8 axis in a second pass; "
      "the max of the 8 gathered slices (feat[idx[:, j]]) fuses into the gathers without "
      "the temporary.")
def pointcloud_neighbour_max() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(lambda feat, idx: jax.nn.relu(feat[idx].max(1))),
                   (_s((131072, 256)), _s((131072, 8), "int32")))


@case([], "The same neighbour max-pooling as the max of the 8 gathered slices: fused, no "
      "temporary; clean.")
def pointcloud_neighbour_max_fused() -> Program:
    jax, jnp = _jax()

    def f(feat, idx):
        out = feat[idx[:, 0]]
        for j in range(1, idx.shape[1]):
            out = jnp.maximum(out, feat[idx[:, j]])
        return jax.nn.relu(out)

    return Program(jax.jit(f), (_s((131072, 256)), _s((131072, 8), "int32")))


# ===================================== loop-state =========================================

@case(["loop-state"], "Eight velocity-Verlet steps of pointwise harmonic oscillators on a "
      "TPU v5e in a lax.fori_loop over (x, v) f32[8192,8192] (256 MiB each): each "
      "iteration reads x, v and the stiffness and writes x and v (~1.25 GiB of HBM traffic "
      "per step, ~10 GiB in all) for a handful of flops per element; unrolled "
      "(unroll=True) the 8 steps fuse into one pass (~1.25 GiB).", target="tpu")
def verlet_short_fori_tpu() -> Program:
    jax, _ = _jax()

    def f(x, v, k):
        def step(_, s):
            x, v = s
            v = v - 0.005 * k * x
            x = x + 0.01 * v
            return x, v - 0.005 * k * x
        return jax.lax.fori_loop(0, 8, step, (x, v))

    a = _s((8192, 8192))
    return Program(jax.jit(f, donate_argnums=(0, 1)), (a, a, a), target="tpu-v5e")


@case([], "A Lorenz-63 ensemble (f32[3,4194304], 48 MiB) integrated with RK4 for 2000 steps "
      "in a lax.fori_loop on an H100, state donated: a long loop whose body is one fused "
      "kernel; clean.", target="gpu")
def lorenz63_ensemble_fori_h100() -> Program:
    jax, jnp = _jax()

    def f(y):
        def rhs(y):
            x, yy, z = y[0], y[1], y[2]
            return jnp.stack([10.0 * (yy - x), x * (28.0 - z) - yy, x * yy - 8.0 / 3.0 * z])

        def step(_, y):
            dt = 0.001
            k1 = rhs(y)
            k2 = rhs(y + 0.5 * dt * k1)
            k3 = rhs(y + 0.5 * dt * k2)
            k4 = rhs(y + dt * k3)
            return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return jax.lax.fori_loop(0, 2000, step, y)

    return Program(jax.jit(f, donate_argnums=(0,)), (_s((3, 4194304)),), target="h100")


# ===================================== side-by-side =======================================

@case(["side-by-side"], "Nearest-neighbour retrieval on an H100 for 4 independent query "
      "batches (bf16[4096,512] each) against 65536 keys: the code scores every batch, "
      "stacks the 4 f32[4096,65536] score matrices (1 GiB each) and takes one argmax over "
      "the stack, so all 4 GiB are alive together although each batch's argmax could "
      "finish before the next batch is scored; lax.map over the batches keeps one "
      "(peak ~4 -> ~1 GiB).", target="gpu")
def retrieval_scores_side_by_side_h100() -> Program:
    jax, jnp = _jax()

    def f(qs, keys):
        scores = jnp.stack([jnp.dot(q, keys.T, preferred_element_type=jnp.float32)
                            for q in qs])
        return jnp.argmax(scores, axis=-1)

    return Program(jax.jit(f), ([_s((4096, 512), "bfloat16")] * 4,
                                _s((65536, 512), "bfloat16")), target="h100")


@case([], "The same retrieval written as a list of per-batch scores and argmaxes. An "
      "expert might fear the 4 score matrices (1 GiB each) alive together, but checked in "
      "the compiled program XLA schedules each argmax right after its matmul: one 1 GiB "
      "matrix at a time; clean.", target="gpu")
def retrieval_scores_per_batch_h100() -> Program:
    jax, jnp = _jax()

    def f(qs, keys):
        scores = [jnp.dot(q, keys.T, preferred_element_type=jnp.float32) for q in qs]
        return jnp.stack([jnp.argmax(s, axis=1) for s in scores])

    return Program(jax.jit(f), ([_s((4096, 512), "bfloat16")] * 4,
                                _s((65536, 512), "bfloat16")), target="h100")


def _kmeans_assign(x, c):
    _, jnp = _jax()
    d = jnp.sum(x * x, 1)[:, None] - 2 * x @ c.T + jnp.sum(c * c, 1)[None, :]
    a = jnp.argmin(d, axis=1)
    return a, jnp.min(d, axis=1).mean()


@case(["side-by-side"], "K-means assignment for 8 independent datasets on the CPU via "
      "vmap: the 8 f32[32768,1024] distance matrices (128 MiB each, 1 GiB together) are "
      "computed as one batched array alive at once, though each dataset's argmin only needs "
      "its own; lax.map over the datasets keeps one at a time (~128 MiB).")
def kmeans_assign_vmap() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(jax.vmap(_kmeans_assign)),
                   (_s((8, 32768, 64)), _s((8, 1024, 64))))


@case([], "The same k-means assignment with lax.map over the 8 datasets: one distance "
      "matrix alive at a time; clean.")
def kmeans_assign_lax_map() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(lambda x, c: jax.lax.map(lambda a: _kmeans_assign(*a), (x, c))),
                   (_s((8, 32768, 64)), _s((8, 1024, 64))))


# ===================================== recompute ==========================================

def _sor_sweep(u, f, mask):
    _, jnp = _jax()
    nb = 0.25 * (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1)
                 + jnp.roll(u, -1, 1) - f)
    return u + mask * 1.5 * (nb - u)


@case(["recompute"], "Red-black SOR for a Poisson problem on an H100 (f32[8192,8192] grid, "
      "100 sweeps in a fori_loop): the two colour masks ((i+j)%2) are built from iota "
      "outside the loop as f32[8192,8192] arrays (256 MiB each) and read from memory in "
      "every half-sweep; built from iota inside the sweep they fuse into the update kernel "
      "(XLA's peak 1280 -> 832 MiB, a third less traffic per sweep).", target="gpu")
def red_black_masks_materialized_h100() -> Program:
    jax, jnp = _jax()

    def f(u, rhs):
        n = u.shape[0]
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        red = ((i + j) % 2 == 0).astype(jnp.float32)
        black = 1.0 - red

        def sweep(_, u):
            return _sor_sweep(_sor_sweep(u, rhs, red), rhs, black)
        return jax.lax.fori_loop(0, 100, sweep, u)

    return Program(jax.jit(f, donate_argnums=(0,)), (_s((8192, 8192)), _s((8192, 8192))),
                   target="h100")


@case([], "The same red-black SOR with the colour masks built from iota inside the sweep "
      "(fused into the update), grid donated: clean.", target="gpu")
def red_black_masks_in_sweep_h100() -> Program:
    jax, jnp = _jax()

    def f(u, rhs):
        n = u.shape[0]

        def sweep(_, u):
            i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
            j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
            red = ((i + j) % 2 == 0).astype(jnp.float32)
            return _sor_sweep(_sor_sweep(u, rhs, red), rhs, 1.0 - red)
        return jax.lax.fori_loop(0, 100, sweep, u)

    return Program(jax.jit(f, donate_argnums=(0,)), (_s((8192, 8192)), _s((8192, 8192))),
                   target="h100")


# ===================================== large-constant =====================================

@case(["large-constant"], "A CNN inference on an H100 closes over four NumPy f32 "
      "[3,3,256,256] filter banks (9 MiB, 4.5 MiB as bf16): they are folded into the program "
      "as constants, held by the executable and copied through lowering and compile, and "
      "any new weights mean a recompile; passing them as arguments keeps the program "
      "small.", target="gpu")
def numpy_filters_closed_over_h100() -> Program:
    jax, jnp = _jax()
    import numpy as np
    rng = np.random.default_rng(3)
    ws = [rng.standard_normal((3, 3, 256, 256), dtype=np.float32) * 0.02 for _ in range(4)]

    def f(x):
        for w in ws:
            x = jax.nn.relu(jax.lax.conv_general_dilated(
                x, jnp.asarray(w, jnp.bfloat16), (1, 1), "SAME",
                dimension_numbers=("NHWC", "HWIO", "NHWC")))
        return x

    return Program(jax.jit(f), (_s((16, 64, 64, 256), "bfloat16"),), target="h100")


@case(["large-constant"], "A CPU function maps values through a NumPy lookup table "
      "(a precomputed f32[2097152] transfer curve, 8 MiB) closed over: the table is baked "
      "into the program as an 8 MiB constant; passing it as an argument avoids it.")
def numpy_lookup_table_closed_over() -> Program:
    jax, jnp = _jax()
    import numpy as np
    table = np.tanh(np.linspace(-4, 4, 2097152, dtype=np.float32)) ** 3

    def f(x):
        idx = jnp.clip(((x + 4) / 8 * (table.shape[0] - 1)).astype(jnp.int32), 0,
                       table.shape[0] - 1)
        return jnp.asarray(table)[idx]

    return Program(jax.jit(f), (_s((1024, 1024)),))


# ===================================== donation-unused ====================================

@case(["donation-unused"], "A quantization step on an H100 donates its f32[8192,8192] input "
      "(256 MiB) but returns int8[8192,8192] values and f32 scales: no output has the "
      "input's shape and dtype, so the donation is unusable (JAX warns) and only destroys "
      "the caller's array; drop donate_argnums.", target="gpu")
def quantize_donates_input_h100() -> Program:
    jax, jnp = _jax()

    def f(w):
        scale = jnp.max(jnp.abs(w), axis=1, keepdims=True) / 127.0
        return jnp.round(w / scale).astype(jnp.int8), scale

    return Program(jax.jit(f, donate_argnums=(0,)), (_s((8192, 8192)),), target="h100")


@case(["donation-unused"], "Scoring candidate continuations on a TPU v5e donates the "
      "bf16[16,4096,8,128] K and V caches (128 MiB each) although the function only reads "
      "them and returns f32[16,8,4096] scores: nothing reuses the 256 MiB of donated buffers, "
      "the caller's caches are lost; drop the donation.", target="tpu")
def scoring_donates_read_only_cache_tpu() -> Program:
    jax, jnp = _jax()

    def f(k, v, q):
        s = jnp.einsum("bhd,bshd->bhs", q, k, preferred_element_type=jnp.float32)
        p = jax.nn.softmax(s / 128 ** 0.5, axis=-1)
        o = jnp.einsum("bhs,bshd->bhd", p.astype(v.dtype), v)
        return p, o

    c = _s((16, 4096, 8, 128), "bfloat16")
    return Program(jax.jit(f, donate_argnums=(0, 1)), (c, c, _s((16, 8, 128), "bfloat16")),
                   target="tpu-v5e")


# ===================================== other ==============================================

@case(["other:sort-for-top-k"], "MoE-style routing on an H100 picks the top 8 of 16384 "
      "scores per token for 16384 tokens with jnp.argsort (a full sort of f32[16384,16384], "
      "1 GiB, with its index array) and keeps 8 columns; jax.lax.top_k does it without "
      "sorting every row.", target="gpu")
def routing_argsort_topk_h100() -> Program:
    jax, jnp = _jax()

    def f(logits):
        idx = jnp.argsort(-logits, axis=-1)[:, :8]
        return jnp.take_along_axis(logits, idx, axis=-1), idx

    return Program(jax.jit(f), (_s((16384, 16384)),), target="h100")


@case([], "The same routing with jax.lax.top_k(logits, 8): clean.", target="gpu")
def routing_top_k_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(lambda logits: jax.lax.top_k(logits, 8)), (_s((16384, 16384)),),
                   target="h100")


@case([], "A Shampoo-style preconditioner statistics update on an H100 for 4 f32"
      "[2048,2048] gradients: L += G G^T and R += G^T G (matmuls), the statistics donated "
      "and updated in place: clean.", target="gpu")
def shampoo_stats_update_h100() -> Program:
    jax, _ = _jax()

    def f(ls, rs, gs):
        ls = [l + g @ g.T for l, g in zip(ls, gs)]
        rs = [r + g.T @ g for r, g in zip(rs, gs)]
        return ls, rs

    m = [_s((2048, 2048)) for _ in range(4)]
    return Program(jax.jit(f, donate_argnums=(0, 1)), (m, m, m), target="h100")


@case([], "A GNN training step with jax.checkpoint on the scanned layer on the CPU (the "
      "twin of gnn_scan_no_remat): only node states are saved; clean.")
def gnn_scan_remat() -> Program:
    jax, jnp = _jax()

    def loss(ws, h, src, dst, ew):
        @jax.checkpoint
        def layer(h, w):
            m = jax.nn.relu((h @ w)[src] * ew[:, None])
            agg = jax.ops.segment_sum(m, dst, num_segments=h.shape[0])
            return jnp.tanh(h + agg), None
        h, _ = jax.lax.scan(layer, h, ws)
        return jnp.mean(h ** 2)

    e = 262144
    return Program(jax.jit(jax.grad(loss)),
                   (_s((4, 128, 128)), _s((16384, 128)), _s((e,), "int32"),
                    _s((e,), "int32"), _s((e,))))


# ===================================== more: loop-state, recompute, small-kernels, padding =

@case(["loop-state"], "Five fixed-point iterations of Kepler's equation E = M + e sin E for "
      "16M orbits on the CPU in a lax.fori_loop (f32[4096,4096], 64 MiB): each iteration "
      "reads M, e and E and writes E (256 MiB of traffic per iteration) for a sine and two "
      "flops per element; unrolled (unroll=True) the five iterations fuse into one pass.")
def kepler_fixed_point_fori() -> Program:
    jax, jnp = _jax()

    def f(m, e):
        return jax.lax.fori_loop(0, 5, lambda i, ea: m + e * jnp.sin(ea), m)

    a = _s((4096, 4096))
    return Program(jax.jit(f), (a, a))


@case(["recompute"], "A 2-D wave equation on the CPU (f32[4096,4096] fields, 100 steps in a "
      "fori_loop) with an absorbing sponge layer: the damping profile (a quadratic ramp "
      "over the 32 cells next to each edge) is built from iota before the loop as a "
      "f32[4096,4096] array (64 MiB) and read from memory in every step; built from iota "
      "inside the step it fuses into the update (64 MiB less, a fifth less traffic per "
      "step).")
def wave_sponge_profile_materialized() -> Program:
    jax, jnp = _jax()

    def f(u, v):
        n = u.shape[0]
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        edge = jnp.minimum(jnp.minimum(i, n - 1 - i), jnp.minimum(j, n - 1 - j))
        damp = 0.1 * (jnp.maximum(0, 32 - edge).astype(jnp.float32) / 32) ** 2

        def step(_, s):
            u, v = s
            lap = (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1)
                   + jnp.roll(u, -1, 1) - 4 * u)
            v = (1 - damp) * v + 0.2 * lap
            return u + 0.5 * v, v
        return jax.lax.fori_loop(0, 100, step, (u, v))

    a = _s((4096, 4096))
    return Program(jax.jit(f, donate_argnums=(0, 1)), (a, a))


@case(["small-kernels"], "Per-task Gaussian-process factorizations on an H100 written as a "
      "Python loop over 64 tasks, each jnp.linalg.cholesky of its own f32[64,64] matrix "
      "and a triangular solve: 64 separate tiny factorizations and 64 solves (16 KiB each, "
      "launch-bound); stacking the matrices (f32[64,64,64]) gives one batched Cholesky and "
      "one batched solve.", target="gpu")
def per_task_cholesky_loop_h100() -> Program:
    jax, jnp = _jax()

    def f(ks, ys):
        out = []
        for t in range(ks.shape[0]):
            c = jnp.linalg.cholesky(ks[t] + 1e-3 * jnp.eye(ks.shape[1]))
            out.append(jax.scipy.linalg.solve_triangular(c, ys[t], lower=True))
        return jnp.stack(out)

    return Program(jax.jit(f), (_s((64, 64, 64)), _s((64, 64, 8))), target="h100")


@case([], "Applying per-point 4x4 homogeneous transforms to 4M points on a TPU v5e 2x4 "
      "slice (sharded over the points): f32[4194304,4,4] transforms and a batched matvec "
      "(einsum 'nij,nj->ni'). An expert would fear the 4x4 minor dimensions padding to "
      "TPU tiles, but checked in the compiled program XLA lays the transforms out with the "
      "point axis minor ({0,2,1:T(4,128)}) and makes the contraction one elementwise "
      "fusion: 32 MiB per chip as the data is, nothing to fix; clean.", target="tpu")
def point_transforms_batched_4x4_tpu_2x4() -> Program:
    jax, jnp = _jax()

    def f(t, p):
        return jnp.einsum("nij,nj->ni", t, p)

    return Program(jax.jit(f), (_s((4194304, 4, 4)), _s((4194304, 4))), target="tpu-v5e:2x4",
                   kwargs={"mesh": "data=8", "shard": {0: "data,None,None", 1: "data,None"}})
