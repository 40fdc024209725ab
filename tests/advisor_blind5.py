"""A fifth blind evaluation set for hloscope's advisor (issue 28, item 5).

Who wrote it: a helper session (``blind5``) that never read the advisor's rules, its
documentation (docs/advisor.md, docs/lint.md), its tests (tests/test_advisor*.py,
tests/test_checked*.py), the other labelled sets (tests/advisor_programs.py,
tests/advisor_heldout*.py), the checked-savings code (src/hloscope/_checked/),
benchmarks/advisor_*.py, /work/runs, or the README's advisor and lint sections, and never ran
the advisor (``hloscope lint``, ``hloscope report``, ``hloscope.lint``, ``Report.advice``,
findings or groups) on these programs. Of the four earlier blind sets it read only the module
docstrings, the definitions of ``KINDS``, ``BlindCase``, ``Program``, ``_s``, ``_jax``,
``_cpu_mesh`` and the ``case`` decorator, and the names of their cases (to write different
programs); not their ``TUNED`` or ``REVISED`` entries nor other case bodies. It also read issue
28, docs/targets.md (how to compile for targets) and the signature of ``hloscope.inspect``.
Nothing it should not have seen was seen.

Its programs are what practitioners write: Muon and tabular Q-learning updates, LoRA and
multi-LoRA, normalizing flows, int8 weight-only quantization, RoPE and sliding-window attention,
3-D video convolutions, U-Nets, optical-flow cost volumes, Kalman and particle filters, t-SNE,
point clouds, segmentation heads and GNN/R-GCN message passing, sharded programs (DQN and VAE
data parallel with accumulation, FSDP, tensor and pipeline parallel) on CPU meshes, H100s and
TPUs, neural ODEs, beam search, Gaussian processes, Legendre transforms, masked LMs and
node2vec, PPO rollouts, image augmentation, sphere tracing, option pricing (Monte Carlo,
implied volatility), k-means, DCN-v2 and split-step spectral solvers.
The labels below were written and committed BEFORE the advisor ran on them. Only the
optimized HLO (``Report.hlo_after``) and XLA's memory figures (``Report.memory_analysis``)
were looked at, to confirm that each labelled pattern is really in the compiled program and
to size it. Several first guesses were corrected that way before committing (3-D convolutions
run channels-first in XLA's H100 compile, so the NDHWC variant is the one with transposes; a
cost volume's transpose and a point cloud's minor 3 vanish in the compiled program; a TPU's
f32 matmul is single-pass bf16 by default, so an f32 score einsum there is not labelled).

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
(case name -> (new labels, reason)), empty when committed (two entries since, by the lead, after the advisor ran).
"""

from __future__ import annotations

from collections.abc import Callable

from advisor_blind import KINDS, BlindCase, Program, _cpu_mesh, _jax, _s

__all__ = ["CASES", "KINDS", "REVISED", "BlindCase", "Program"]

CASES: list[BlindCase] = []

# Corrections after the advisor ran: name -> (labels, reason). Empty when committed.
REVISED: dict[str, tuple[tuple[str, ...], str]] = {
    # By the lead, after the advisor ran (its blind figures are those of the labels above):
    # in both programs jax.grad of a replicated (unvarying) argument inside shard_map
    # transposes JAX's implicit pvary into a psum, so the compiled loop body holds an
    # all-reduce of the whole gradient in every microbatch (op_name
    # ".../while/body/closed_call/transpose(jvp(...))") besides the psum written after the
    # loop: the pattern the other case of each pair is labelled for.
    "dqn_accum_pmean_once_cpu8": (
        ("repeated-collective",),
        "the loop body's all-reduce of the gradients (from grad's transpose of pvary), 8 "
        "per step, is in the compiled HLO; the pmean after the loop is a second one"),
    "vae_accum_psum_after_cpu8": (
        ("repeated-collective",),
        "the loop body's all-reduce of the gradients (from grad's transpose of pvary), 4 "
        "per step, is in the compiled HLO; the psum after the loop is a second one"),
}

# Rules changed after looking at one of these programs: name -> what changed. Empty when
# committed; the blind figures are those measured before any of these.
TUNED: dict[str, str] = {
    "dqn_accum_pmean_once_cpu8":
        "HS122's words and fix where the loop's all-reduce is autodiff's own (jax.grad "
        "inside shard_map of a replicated argument): it says so and suggests the gradient "
        "of jax.lax.pcast(w, AXIS, to='varying'); when HS122 fires is unchanged "
        "(pattern: allreduce_per_microbatch_implicit, fix: "
        "allreduce_after_accumulation_pcast in tests/advisor_programs.py)",
    "gp_predict_refactors_training_kernel":
        "HS118 also fires where the build's result is small (a GP's weights) but the build "
        "makes a large array from constants that a matmul or a linear-algebra solver "
        "(Cholesky, triangular solve) in the build reads; solvers count as readers that "
        "do real work on the array (pattern: gp_weights_solved_every_call, fix: "
        "gp_weights_as_argument)",
}


def case(expect: tuple[str, ...] | list[str], why: str, target: str | None = None):
    def register(build: Callable[[], Program]) -> Callable[[], Program]:
        CASES.append(BlindCase(build.__name__, build, tuple(expect), why, target))
        return build
    return register


def _P():
    from jax.sharding import PartitionSpec
    return PartitionSpec


# -- donate -------------------------------------------------------------------------------

def _muon(params, moms, grads):
    jax, jnp = _jax()
    new_p, new_m = [], []
    for p, m, g in zip(params, moms, grads):
        m = 0.95 * m + g
        x = (m / (jnp.linalg.norm(m) + 1e-7)).astype(jnp.bfloat16)
        for _ in range(5):  # Newton-Schulz orthogonalisation (quintic), as in Muon
            a = x @ x.T
            x = 3.4445 * x - 4.7750 * (a @ x) + 2.0315 * (a @ (a @ x))
        new_p.append(p - 0.02 * x.astype(jnp.float32))
        new_m.append(m)
    return new_p, new_m


def _muon_args():
    shapes = [(2048, 2048)] * 6
    ps = [_s(s) for s in shapes]
    return ps, [_s(s) for s in shapes], [_s(s) for s in shapes]


@case(["donate"], "Muon step over six 2048x2048 f32 matrices returns new params and momenta "
      "(2 x 96 MiB) without donating them: XLA allocates 192 MiB of outputs beside the 192 MiB "
      "of inputs; donate_argnums=(0, 1) lets the updates alias (XLA's peak 504 -> 320 MiB).",
      target="gpu")
def muon_step_not_donated_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_muon), _muon_args(), "h100")


@case([], "The same Muon step with params and momenta donated; the Newton-Schulz matmuls "
      "run in bf16 as Muon's authors do.", target="gpu")
def muon_step_donated_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_muon, donate_argnums=(0, 1)), _muon_args(), "h100")


def _td_update(q, s, a, r, s2, done):
    jax, jnp = _jax()
    target = r + 0.99 * (1.0 - done) * q[s2].max(axis=-1)
    td = target - q[s, a]
    return q.at[s, a].add(0.1 * td), jnp.mean(td * td)


def _td_args():
    n = 65536
    return (_s((1 << 20, 32)), _s((n,), "int32"), _s((n,), "int32"), _s((n,)), _s((n,), "int32"),
            _s((n,)))


@case(["donate"], "Tabular Q-learning: a 128 MiB Q table [1M, 32] updated with a scatter-add "
      "of a 64k-transition batch and returned without donation: XLA copies the whole table "
      "into a new 128 MiB output every step; donating it makes the scatter in place (XLA's "
      "peak 257 -> 129 MiB).")
def qtable_td_update_not_donated() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_td_update), _td_args())


@case([], "The same Q-learning step with the table donated: the scatter runs in place.")
def qtable_td_update_donated() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_td_update, donate_argnums=0), _td_args())


# -- remat --------------------------------------------------------------------------------

def _lora_mlp_grads(remat):
    jax, jnp = _jax()

    def block(h, layer):
        w1, w2, a1, b1 = layer
        u = h @ w1 + (h @ a1) @ b1  # frozen bf16 base weight + rank-16 LoRA adapter
        h = h + jax.nn.gelu(u) @ w2
        return h, None

    body = jax.checkpoint(block) if remat else block

    def loss(adapters, base, x):
        h, _ = jax.lax.scan(body, x, (base[0], base[1], adapters[0], adapters[1]))
        return jnp.mean(jnp.square(h.astype(jnp.float32)))

    return jax.jit(jax.grad(loss))


def _lora_mlp_args():
    L, d, f, r = 16, 1024, 4096, 16
    bf = "bfloat16"
    return ((_s((L, d, r), bf), _s((L, r, f), bf)), (_s((L, d, f), bf), _s((L, f, d), bf)),
            _s((16384, d), bf))


@case(["remat"], "LoRA fine-tuning of a 16-layer scanned MLP stack on 16k tokens, no "
      "checkpointing: autodiff saves each layer's [16384, 4096] bf16 pre-activation and GELU "
      "output (128 MiB each, ~4 GiB over 16 layers) for the backward pass while the frozen "
      "weights are 256 MiB; jax.checkpoint on the scanned block keeps only the carry per layer "
      "(XLA's peak 11.3 GiB -> 1.23 GiB).",
      target="gpu")
def lora_mlp_scan_no_remat_h100() -> Program:
    return Program(_lora_mlp_grads(False), _lora_mlp_args(), "h100")


@case([], "The same LoRA gradient with the scanned block under jax.checkpoint.", target="gpu")
def lora_mlp_scan_remat_h100() -> Program:
    return Program(_lora_mlp_grads(True), _lora_mlp_args(), "h100")


def _flow_loss(params, x):
    jax, jnp = _jax()

    def coupling(z, p):
        w1, w2, w3 = p
        za, zb = jnp.split(z, 2, axis=-1)
        h = jnp.tanh(za @ w1)
        h = jnp.tanh(h @ w2)
        st = h @ w3
        s, t = jnp.split(st, 2, axis=-1)
        s = jnp.tanh(s)
        zb = zb * jnp.exp(s) + t
        return jnp.concatenate([zb, za], axis=-1), s.sum(-1)

    z, logdets = jax.lax.scan(coupling, x, params)
    logp = -0.5 * jnp.sum(z * z, -1) + logdets.sum(0)
    return -jnp.mean(logp)


@case(["remat"], "RealNVP flow, 24 affine couplings scanned over a 16k batch, trained without "
      "checkpointing: each coupling saves two [16384, 1024] f32 tanh activations (64 MiB each) "
      "plus its outputs, ~3.5 GiB of residuals against 200 MiB of weights; checkpointing the "
      "coupling keeps one [16384, 256] carry per layer (checked with jax.checkpoint on the "
      "coupling: XLA's peak 7.5 GiB -> 985 MiB).", target="gpu")
def realnvp_flow_scan_no_remat_h100() -> Program:
    jax, _ = _jax()
    L, d, h = 24, 256, 1024
    params = (_s((L, d // 2, h)), _s((L, h, h)), _s((L, h, d)))
    return Program(jax.jit(jax.value_and_grad(_flow_loss)), (params, _s((16384, d))), "h100")


# -- upcast -------------------------------------------------------------------------------

def _int8_args():
    return (_s((8192, 4096), "bfloat16"), _s((4096, 4096), "int8"), _s((4096,)))


@case(["upcast"], "Weight-only int8 quantisation dequantised to f32: bf16 activations "
      "[8192, 4096] and the int8 weight are both converted to f32 and multiplied in f32 on an "
      "H100 (an f32 GEMM, several times slower than bf16 tensor cores); dequantise to bf16 and "
      "use preferred_element_type=f32.", target="gpu")
def int8_weight_matmul_upcast_h100() -> Program:
    jax, jnp = _jax()

    def f(x, wq, scale):
        w = wq.astype(jnp.float32) * scale
        return jax.nn.silu(x.astype(jnp.float32) @ w).astype(jnp.bfloat16)

    return Program(jax.jit(f), _int8_args(), "h100")


@case([], "The same int8 layer as an expert writes it: the int8 weight converted to bf16, a "
      "bf16 GEMM accumulating in f32, the per-channel scale applied to the output.",
      target="gpu")
def int8_weight_matmul_bf16_h100() -> Program:
    jax, jnp = _jax()

    def f(x, wq, scale):
        y = jnp.dot(x, wq.astype(jnp.bfloat16), preferred_element_type=jnp.float32) * scale
        return jax.nn.silu(y).astype(jnp.bfloat16)

    return Program(jax.jit(f), _int8_args(), "h100")


def _rope(x, f32_scores):
    jax, jnp = _jax()
    T, D = x.shape[-2], x.shape[-1]
    inv = 1.0 / (10000.0 ** (jnp.arange(0, D, 2, dtype=jnp.float32) / D))
    ang = jnp.arange(T, dtype=jnp.float32)[:, None] * inv[None, :]
    cos, sin = jnp.cos(ang), jnp.sin(ang)
    xf = x.astype(jnp.float32)
    x1, x2 = xf[..., ::2], xf[..., 1::2]
    out = jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    return out if f32_scores else out.astype(x.dtype)


def _rope_attention(f32_scores):
    jax, jnp = _jax()

    def f(q, k, v):
        qr, kr = _rope(q, f32_scores), _rope(k, f32_scores)
        s = jnp.einsum("bhqd,bhkd->bhqk", qr, kr,
                       preferred_element_type=jnp.float32) / jnp.sqrt(128.0)
        p = jax.nn.softmax(s, axis=-1)
        return jnp.einsum("bhqk,bhkd->bhqd", p.astype(v.dtype), v)

    return jax.jit(f)


def _rope_args():
    return tuple(_s((4, 16, 2048, 128), "bfloat16") for _ in range(3))


@case(["upcast"], "RoPE attention whose rotated q and k stay f32 (the rotation is done in "
      "f32 and never cast back), so the [4, 16, 2048, 2048] score einsum is an f32 GEMM on the "
      "H100 (68 GFLOP off the bf16 tensor cores) reading f32 q, k; casting the rotated q, k "
      "back to bf16 keeps it a bf16 GEMM accumulating in f32.", target="gpu")
def rope_attention_f32_scores_h100() -> Program:
    return Program(_rope_attention(True), _rope_args(), "h100")


@case([], "RoPE applied in f32 and cast back to bf16 before the score einsum, which "
      "accumulates in f32; softmax in f32.", target="tpu")
def rope_attention_bf16_scores_tpu() -> Program:
    return Program(_rope_attention(False), _rope_args(), "tpu-v5e")


# -- layout-copy --------------------------------------------------------------------------

def _video_convs(layout):
    jax, jnp = _jax()
    dn = ("NCDHW", "OIDHW", "NCDHW") if layout == "NCDHW" else ("NDHWC", "DHWIO", "NDHWC")

    def f(x, w1, w2):
        h = jax.lax.conv_general_dilated(x, w1, (1, 1, 1), "SAME", dimension_numbers=dn)
        h = jax.nn.relu(h)
        h = jax.lax.conv_general_dilated(h, w2, (1, 1, 1), "SAME", dimension_numbers=dn)
        return jax.nn.relu(h)

    return jax.jit(f)


@case([], "A 3-D video conv pair in bf16 written channels-first (NCDHW/OIDHW): XLA's H100 "
      "compile hands both to cuDNN in that layout (bf012 dim labels), no transposes.",
      target="gpu")
def video_conv3d_ncdhw_h100() -> Program:
    bf = "bfloat16"
    return Program(_video_convs("NCDHW"),
                   (_s((8, 64, 16, 112, 112), bf), _s((64, 64, 3, 3, 3), bf),
                    _s((64, 64, 3, 3, 3), bf)), "h100")


@case(["layout-copy"], "The same 3-D convolutions written channels-last (NDHWC/DHWIO), the "
      "TensorFlow habit: XLA's H100 compile runs 3-D cuDNN convolutions channels-first, so it "
      "transposes the [8, 16, 112, 112, 64] bf16 input (196 MiB) in and the output out (two "
      "full copies, +196 MiB of temp, peak 588 -> 784 MiB); writing NCDHW avoids them.",
      target="gpu")
def video_conv3d_ndhwc_h100() -> Program:
    bf = "bfloat16"
    return Program(_video_convs("NDHWC"),
                   (_s((8, 16, 112, 112, 64), bf), _s((3, 3, 3, 64, 64), bf),
                    _s((3, 3, 3, 64, 64), bf)), "h100")


@case([], "RAFT-style all-pairs correlation with features [B, H, W, C], the cost volume "
      "built by einsum and moved to [B, u, v, h, w] for the lookup pyramid: XLA's H100 compile "
      "swaps the GEMM's operands and writes the volume in the transposed order directly (no "
      "copy), the pooling reads it once.", target="gpu")
def optical_flow_cost_volume_h100() -> Program:
    jax, jnp = _jax()

    def f(f1, f2):
        corr = jnp.einsum("bhwc,buvc->bhwuv", f1, f2) / jnp.sqrt(256.0)
        corr = jnp.transpose(corr, (0, 3, 4, 1, 2))  # [B, u, v, h, w] for the pyramid
        pooled = corr.reshape(8, 46, 62, 23, 2, 31, 2).mean(axis=(4, 6))
        return corr, pooled

    return Program(jax.jit(f), (_s((8, 46, 62, 256)), _s((8, 46, 62, 256))), "h100")


# -- f64 ----------------------------------------------------------------------------------

def _kalman(dtype):
    jax, jnp = _jax()

    def filt(F, Q, H, R, ys, x0, P0):
        def step(carry, y):
            x, P = carry
            x = F @ x
            P = F @ P @ F.T + Q
            S = H @ P @ H.T + R
            K = jnp.linalg.solve(S, H @ P).T
            x = x + K @ (y - H @ x)
            IKH = jnp.eye(P.shape[0], dtype=P.dtype) - K @ H
            P = IKH @ P @ IKH.T + K @ R @ K.T  # Joseph form
            P = 0.5 * (P + P.T)
            return (x, P), x

        run = jax.vmap(lambda ys_, x0_: jax.lax.scan(step, (x0_, P0), ys_)[1])
        return run(ys, x0)

    n, m, T, B = 64, 16, 256, 128
    args = (_s((n, n), dtype), _s((n, n), dtype), _s((m, n), dtype), _s((m, m), dtype),
            _s((B, T, m), dtype), _s((B, n), dtype), _s((n, n), dtype))
    return filt, args


@case(["f64"], "A batched Kalman filter (Joseph-form covariance update, 128 series x 256 "
      "steps, state 64) written with jax_enable_x64 on, so every matmul, solve and the "
      "[128, 64, 64] covariances run in f64; the Joseph form is stable in f32 and halves the "
      "memory and time.")
def kalman_filter_scan_f64() -> Program:
    jax, _ = _jax()
    with jax.enable_x64(True):
        f, args = _kalman("float64")
        lowered = jax.jit(f).lower(*args)
    return Program(lowered, ())


@case([], "The same Kalman filter in f32 (Joseph form, symmetrised covariance).")
def kalman_filter_scan_f32() -> Program:
    jax, _ = _jax()
    f, args = _kalman("float32")
    return Program(jax.jit(f), args)


@case(["f64"], "t-SNE gradient for 4096 points in f64 throughout (x64 on): the [4096, 4096] "
      "Student-t kernel, its normaliser and the attractive/repulsive terms are f64 arrays "
      "(128 MiB each); t-SNE is run in f32 everywhere else.")
def tsne_gradient_f64() -> Program:
    jax, jnp = _jax()

    def grad(y, p):
        d2 = jnp.sum((y[:, None, :] - y[None, :, :]) ** 2, -1)
        w = 1.0 / (1.0 + d2)
        w = w * (1.0 - jnp.eye(y.shape[0], dtype=y.dtype))
        q = w / jnp.sum(w)
        pq = (p - q) * w
        return 4.0 * (jnp.sum(pq, 1)[:, None] * y - pq @ y)

    with jax.enable_x64(True):
        lowered = jax.jit(grad).lower(_s((4096, 2), "float64"), _s((4096, 4096), "float64"))
    return Program(lowered, ())


# -- donate, on a TPU ---------------------------------------------------------------------

def _adafactor(params, vr, vc, grads):
    jax, jnp = _jax()
    new_p, new_r, new_c = [], [], []
    for p, r, c, g in zip(params, vr, vc, grads):
        g2 = g * g + 1e-30
        r = 0.999 * r + 0.001 * g2.mean(1)
        c = 0.999 * c + 0.001 * g2.mean(0)
        v = r[:, None] * c[None, :] / r.mean()
        u = g / jnp.sqrt(v)
        u = u / jnp.maximum(1.0, jnp.sqrt(jnp.mean(u * u)))
        new_p.append(p - 1e-2 * jnp.sqrt(jnp.mean(p * p)) * u)
        new_r.append(r)
        new_c.append(c)
    return new_p, new_r, new_c


@case(["donate"], "Adafactor step on a TPU for eight 4096x4096 f32 weight matrices (512 MiB) "
      "with factored second moments, returning the new parameters without donating them: "
      "XLA allocates a second 512 MiB of outputs beside the inputs; donate_argnums=(0, 1, 2) "
      "lets the parameters update in place (512 MiB of XLA's 1.6 GiB peak).", target="tpu")
def adafactor_step_not_donated_tpu() -> Program:
    jax, _ = _jax()
    shape = (4096, 4096)
    return Program(jax.jit(_adafactor),
                   ([_s(shape)] * 8, [_s((4096,))] * 8, [_s((4096,))] * 8, [_s(shape)] * 8),
                   "tpu-v5e")


# -- tpu-padding --------------------------------------------------------------------------

@case([], "Point-cloud augmentation and a PointNet first layer on points stored "
      "[64, 16384, 3]: XLA's TPU compile lays the points out with the 16384 axis minor "
      "({1,0,2}), so nothing is padded (24 MiB of arguments, 58 MiB peak).", target="tpu")
def point_cloud_augment_tpu() -> Program:
    jax, jnp = _jax()

    def f(pts, rot, jitter, w):
        c = pts - pts.mean(axis=1, keepdims=True)
        c = c / jnp.max(jnp.linalg.norm(c, axis=-1), axis=1)[:, None, None]
        c = jnp.einsum("bnk,bjk->bnj", c, rot) + 0.01 * jitter
        return jax.nn.relu(c @ w).max(axis=1)

    return Program(jax.jit(f), (_s((64, 16384, 3)), _s((64, 3, 3)), _s((64, 16384, 3)),
                                _s((3, 64))), "tpu-v5e")


def _gnn_layer(feat):
    jax, jnp = _jax()

    def f(h, e, src, dst, w_msg, w_upd):
        m = jax.nn.relu(h[src] @ w_msg + e)
        agg = jax.ops.segment_sum(m, dst, num_segments=h.shape[0])
        return jax.nn.relu(jnp.concatenate([h, agg], -1) @ w_upd)

    N, E = 131072, 524288
    args = (_s((N, feat)), _s((E, feat)), _s((E,), "int32"), _s((E,), "int32"),
            _s((feat, feat)), _s((2 * feat, feat)))
    return jax.jit(f), args


@case(["tpu-padding"], "GNN message passing with 4 features per node and edge on a TPU: the "
      "[512k, 4] f32 edge messages (8 MiB) and gathered sources are tiled to a minor dimension "
      "of 128 ({1,0:T(8,128)}), 256 MiB each, dominating the program (temp 259 MiB for "
      "14 MiB of arguments); packing features on the major axis or a "
      "wider hidden size avoids the 32x padding.", target="tpu")
def gnn_messages_4_features_tpu() -> Program:
    f, args = _gnn_layer(4)
    return Program(f, args, "tpu-v5e")


@case([], "The same message-passing layer with 128 features (a multiple of the TPU tile): "
      "gather, segment_sum and matmuls without padding.", target="tpu")
def gnn_messages_128_features_tpu() -> Program:
    f, args = _gnn_layer(128)
    return Program(f, args, "tpu-v5e")


@case(["tpu-padding"], "Semantic-segmentation head and loss on a TPU: a 1x1 convolution from "
      "64 features to 3 classes gives [8, 512, 512, 3] f32 logits; XLA's TPU layouts put the "
      "two small dimensions in the tiled pair ({0,3,2,1:T(4,128)}: batch 8 padded to 128), "
      "so the 24 MiB logits and the log-softmax arrays take ~16x their size (temp 1.6 GiB, "
      "peak 1.2 GiB for 264 MiB of arguments); classes on a major axis with a large minor "
      "dimension avoid the padding.", target="tpu")
def segmentation_head_3_classes_tpu() -> Program:
    jax, jnp = _jax()

    def loss(feat, w, labels):
        logits = jax.lax.conv_general_dilated(feat, w, (1, 1), "VALID",
                                              dimension_numbers=("NHWC", "HWIO", "NHWC"))
        logp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
        nll = -jnp.take_along_axis(logp, labels[..., None], -1)
        return nll.mean(), logp

    return Program(jax.jit(loss), (_s((8, 512, 512, 64), "bfloat16"),
                                   _s((1, 1, 64, 3), "bfloat16"),
                                   _s((8, 512, 512), "int32")), "tpu-v5e")


# -- layout-copy, 2-D ----------------------------------------------------------------------

def _unet(layout):
    jax, jnp = _jax()
    dn = ("NCHW", "OIHW", "NCHW") if layout == "NCHW" else ("NHWC", "HWIO", "NHWC")
    ch = 1 if layout == "NCHW" else 3

    def conv(x, w, stride=1):
        return jax.nn.relu(jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                                        dimension_numbers=dn))

    def up(x):
        return jnp.repeat(jnp.repeat(x, 2, axis=2 if ch == 1 else 1), 2,
                          axis=3 if ch == 1 else 2)

    def f(x, w1, w2, w3, w4):
        s1 = conv(x, w1)
        d = conv(s1, w2, 2)
        u = up(conv(d, w3))
        return conv(jnp.concatenate([s1, u], axis=ch), w4)

    return jax.jit(f)


@case(["layout-copy"], "A U-Net level (conv, strided conv, upsample, skip concat, conv) in bf16 "
      "written NCHW/OIHW on an H100: XLA runs 2-D bf16 convolutions channels-last, so it "
      "transposes the [16, 64, 256, 256] input (128 MiB) into NHWC before the first conv, a "
      "full extra copy (temp 288 -> 416 MiB, peak 544 -> 672 MiB) next to convolutions of "
      "~80 GFLOP each; NHWC avoids it.", target="gpu")
def unet_level_nchw_h100() -> Program:
    bf = "bfloat16"
    return Program(_unet("NCHW"), (_s((16, 64, 256, 256), bf), _s((64, 64, 3, 3), bf),
                                   _s((128, 64, 3, 3), bf), _s((64, 128, 3, 3), bf),
                                   _s((64, 128, 3, 3), bf)), "h100")


@case([], "The same U-Net level channels-last (NHWC/HWIO).", target="gpu")
def unet_level_nhwc_h100() -> Program:
    bf = "bfloat16"
    return Program(_unet("NHWC"), (_s((16, 256, 256, 64), bf), _s((3, 3, 64, 64), bf),
                                   _s((3, 3, 64, 128), bf), _s((3, 3, 128, 64), bf),
                                   _s((3, 3, 128, 64), bf)), "h100")


# -- sharded: repeated-collective, gathered-weights, exposed-collective -------------------

def _dqn_accum(psum_inside, mesh):
    jax, jnp = _jax()
    P = _P()

    def loss(params, obs, act, target):
        h = obs
        for w in params[:-1]:
            h = jax.nn.relu(h @ w)
        q = h @ params[-1]
        qa = jnp.take_along_axis(q, act[:, None], axis=1)[:, 0]
        return jnp.mean(huber(qa - target))

    def huber(x):
        a = jnp.abs(x)
        return jnp.where(a < 1.0, 0.5 * x * x, a - 0.5)

    def local(params, obs, act, target):
        obs = obs.reshape(8, -1, obs.shape[-1])
        act, target = act.reshape(8, -1), target.reshape(8, -1)

        def micro(acc, mb):
            g = jax.grad(loss)(params, *mb)
            if psum_inside:
                g = jax.lax.pmean(g, "data")
            return jax.tree.map(jnp.add, acc, g), None

        zero = jax.tree.map(jnp.zeros_like, params)
        g, _ = jax.lax.scan(micro, zero, (obs, act, target))
        if not psum_inside:
            g = jax.lax.pmean(g, "data")
        return jax.tree.map(lambda p, gi: p - 1e-3 * gi / 8, params, g)

    rep = [P()] * 4
    step = jax.shard_map(local, mesh=mesh, in_specs=(rep, P("data"), P("data"), P("data")),
                         out_specs=rep)
    return jax.jit(step, donate_argnums=0)


def _dqn_args(mesh):
    jax, _ = _jax()
    P = _P()
    rep = jax.sharding.NamedSharding(mesh, P())
    dat = jax.sharding.NamedSharding(mesh, P("data"))
    params = [_s((512, 2048), sharding=rep), _s((2048, 2048), sharding=rep),
              _s((2048, 2048), sharding=rep), _s((2048, 18), sharding=rep)]
    B = 8 * 8 * 256
    return (params, _s((B, 512), sharding=dat), _s((B,), "int32", dat), _s((B,), sharding=dat))


@case(["repeated-collective"], "DQN data-parallel step with 8-microbatch gradient "
      "accumulation in a scan, pmean-ing the 36 MiB of gradients inside every microbatch: 8 "
      "all-reduces per step where one after the loop gives the same sum.")
def dqn_accum_pmean_per_microbatch_cpu8() -> Program:
    mesh = _cpu_mesh()
    return Program(_dqn_accum(True, mesh), _dqn_args(mesh))


@case([], "The same DQN step accumulating local gradients and pmean-ing once after the scan.")
def dqn_accum_pmean_once_cpu8() -> Program:
    mesh = _cpu_mesh()
    return Program(_dqn_accum(False, mesh), _dqn_args(mesh))


def _vae_accum(psum_inside, mesh=None):
    jax, jnp = _jax()
    P = _P()

    def loss(p, x, eps):
        we, wmu, wlv, wd1, wd2 = p
        h = jax.nn.gelu(x @ we)
        mu, logvar = h @ wmu, h @ wlv
        z = mu + jnp.exp(0.5 * logvar) * eps
        xr = jax.nn.gelu(z @ wd1) @ wd2
        kl = -0.5 * jnp.sum(1 + logvar - mu * mu - jnp.exp(logvar), -1)
        return jnp.mean(jnp.sum((xr - x) ** 2, -1) + kl)

    def local(p, x, eps):
        xs = x.reshape(4, -1, x.shape[-1])
        es = eps.reshape(4, -1, eps.shape[-1])

        def micro(i, acc):
            g = jax.grad(loss)(p, xs[i], es[i])
            if psum_inside:
                g = jax.lax.psum(g, "data")
            return jax.tree.map(jnp.add, acc, g)

        g = jax.lax.fori_loop(0, 4, micro, jax.tree.map(jnp.zeros_like, p))
        if not psum_inside:
            g = jax.lax.psum(g, "data")
        return jax.tree.map(lambda a, b: a - 1e-4 * b, p, g)

    rep = tuple(P() for _ in range(5))
    f = jax.shard_map(local, mesh=mesh, in_specs=(rep, P("data"), P("data")), out_specs=rep)
    return jax.jit(f, donate_argnums=0)


def _vae_args(mesh=None, bf="bfloat16"):
    jax, _ = _jax()
    P = _P()
    rep = dat = None
    if mesh is not None:
        rep = jax.sharding.NamedSharding(mesh, P())
        dat = jax.sharding.NamedSharding(mesh, P("data"))
    d, h, z = 3072, 4096, 512
    p = tuple(_s(s, bf, rep) for s in ((d, h), (h, z), (h, z), (z, h), (h, d)))
    return (p, _s((8 * 4 * 512, d), bf, dat), _s((8 * 4 * 512, z), bf, dat))


@case(["repeated-collective"], "VAE data parallel over 8 H100s with a 4-step fori_loop of "
      "gradient accumulation that psums the 60 MiB of bf16 gradients inside every step: four "
      "all-reduces where one after the loop suffices (the all-reduces are a large share of "
      "this short step).", target="gpu")
def vae_accum_psum_in_fori_h100x8() -> Program:
    return Program(_vae_accum(True), _vae_args(), "h100x8",
                   {"shard": {1: "data", 2: "data"}})


@case([], "The same VAE step on 8 CPU devices, summing local gradients in the loop and "
      "psum-ing once after it, in f32 as a CPU wants (on a CPU mesh the final all-reduce's "
      "overlap is moot).")
def vae_accum_psum_after_cpu8() -> Program:
    mesh = _cpu_mesh()
    return Program(_vae_accum(False, mesh), _vae_args(mesh, "float32"))


def _fsdp_mlp(scanned, mesh):
    jax, jnp = _jax()
    P = _P()
    full = jax.sharding.NamedSharding(mesh, P())
    shard = jax.sharding.NamedSharding(mesh, P(None, "data", None))

    def block(h, w):
        w = jax.lax.with_sharding_constraint(w, full)  # gather this layer's weight
        return h + jax.nn.relu(h @ w), None

    def loss(ws, x):
        if scanned:  # rematerialised: the backward pass gathers each layer again
            h, _ = jax.lax.scan(jax.checkpoint(block), x, ws)
        else:
            h = x
            for i in range(ws.shape[0]):
                h, _ = block(h, ws[i])
        return jnp.mean(h * h)

    def step(ws, x):
        l, g = jax.value_and_grad(loss)(ws, x)
        g = jax.lax.with_sharding_constraint(g, shard)
        return ws - 1e-3 * g, l

    return jax.jit(step, donate_argnums=0)


def _fsdp_args(mesh):
    jax, _ = _jax()
    P = _P()
    ws = _s((12, 2048, 2048), sharding=jax.sharding.NamedSharding(mesh, P(None, "data", None)))
    x = _s((4096, 2048), sharding=jax.sharding.NamedSharding(mesh, P("data", None)))
    return ws, x


@case(["gathered-weights"], "FSDP residual MLP, 12 layers of 2048x2048 f32 sharded over 8 "
      "devices and applied in a Python loop: all 12 layers' weights are all-gathered (16 MiB "
      "each) and the gathered copies (and their transposes for the backward pass) stay alive "
      "together, 384 MiB of temp per device against 24 MiB of shards; a rematerialised scan "
      "over layers gathers one layer at a time (temp 132 MiB).")
def fsdp_residual_mlp_python_loop_cpu8() -> Program:
    mesh = _cpu_mesh()
    return Program(_fsdp_mlp(False, mesh), _fsdp_args(mesh))


@case([], "The same FSDP step with the layers in a scan under jax.checkpoint: one gathered "
      "layer alive at a time, re-gathered in the backward pass (temp 132 MiB).")
def fsdp_residual_mlp_scan_cpu8() -> Program:
    mesh = _cpu_mesh()
    return Program(_fsdp_mlp(True, mesh), _fsdp_args(mesh))


def _fsdp_swiglu():
    jax, jnp = _jax()
    P = _P()

    def loss(wi, wo, x):
        h = x
        for i in range(wi.shape[0]):
            a = jax.lax.with_sharding_constraint(wi[i], P())
            b = jax.lax.with_sharding_constraint(wo[i], P())
            g, u = jnp.split(h @ a, 2, axis=-1)
            h = h + (jax.nn.silu(g) * u) @ b
        return jnp.mean(jnp.square(h.astype(jnp.float32)))

    def step(wi, wo, x):
        l, (gi, go) = jax.value_and_grad(loss, argnums=(0, 1))(wi, wo, x)
        gi = jax.lax.with_sharding_constraint(gi, P(None, "data", None))
        go = jax.lax.with_sharding_constraint(go, P(None, "data", None))
        return wi - 1e-3 * gi, wo - 1e-3 * go, l

    return jax.jit(step, donate_argnums=(0, 1))


@case(["gathered-weights"], "FSDP over 8 H100s of an 8-layer SwiGLU stack (d 4096, hidden "
      "8192, bf16, 192 MiB of weights per layer) written as a Python loop: XLA gathers every "
      "layer's full weights and keeps the gathered copies for the backward pass, ~1.5 GiB of "
      "full weights alive per device where a rematerialised scan would hold one layer's "
      "192 MiB.", target="gpu")
def fsdp_swiglu_python_loop_h100x8() -> Program:
    bf = "bfloat16"
    return Program(_fsdp_swiglu(), (_s((8, 4096, 16384), bf), _s((8, 8192, 4096), bf),
                                    _s((8 * 1024, 4096), bf)), "h100x8",
                   {"shard": {0: "None,data,None", 1: "None,data,None", 2: "data,None"}})


def _tp_mlp():
    jax, jnp = _jax()
    P = _P()

    def local(x, w1, w2):
        for i in range(w1.shape[0]):
            h = jax.nn.gelu(x @ w1[i])
            x = x + jax.lax.psum(h @ w2[i], "model")
        return x

    f = jax.shard_map(local, in_specs=(P(), P(None, None, "model"), P(None, "model", None)),
                      out_specs=P())
    return jax.jit(f)


@case(["exposed-collective"], "Megatron tensor-parallel MLP stack (4 layers, d 8192, hidden "
      "32768 split over 8 H100s) at inference on 4096 replicated tokens: each layer ends in "
      "an all-reduce of the [4096, 8192] bf16 output (64 MiB) that the next layer's matmul "
      "waits for, with nothing to overlap it (the all-reduces are ~a third of the step); "
      "splitting the batch into two halves that interleave, or a collective matmul, hides them.",
      target="gpu")
def tensor_parallel_mlp_stack_h100x8() -> Program:
    bf = "bfloat16"
    return Program(_tp_mlp(), (_s((4096, 8192), bf), _s((4, 8192, 32768), bf),
                               _s((4, 32768, 8192), bf)), "h100x8",
                   {"mesh": "model=8", "shard": {1: "None,None,model", 2: "None,model,None"}})


def _pipeline():
    jax, jnp = _jax()
    P = _P()

    def local(ws, xs):
        w = ws[0]
        n_micro = xs.shape[0]
        stage = jax.lax.axis_index("stage")

        def tick(carry, t):
            buf, outs = carry
            inp = jnp.where(stage == 0, xs[jnp.minimum(t, n_micro - 1)], buf)
            y = jax.nn.gelu(inp @ w)
            buf = jax.lax.ppermute(y, "stage", [(i, (i + 1) % 8) for i in range(8)])
            outs = outs.at[jnp.clip(t - 7, 0, n_micro - 1)].set(y)
            return (buf, outs), None

        init = (jnp.zeros_like(xs[0]), jnp.zeros_like(xs))
        (_, outs), _ = jax.lax.scan(tick, init, jnp.arange(n_micro + 7))
        return outs

    f = jax.shard_map(local, in_specs=(P("stage"), P()), out_specs=P("stage"), check_vma=False)
    return jax.jit(f)


@case(["exposed-collective"], "A GPipe-style pipeline over 8 H100s (one 8192x8192 bf16 stage "
      "per GPU, 16 microbatches of [2048, 8192]): each tick's collective-permute of the "
      "32 MiB activation to the next stage starts after the stage's matmul and must finish "
      "before the next tick's matmul, so the transfers are serialised with the compute "
      "(~25% of each tick); double-buffering the send (permute the previous tick's output "
      "while computing) overlaps them.", target="gpu")
def gpipe_ppermute_per_tick_h100x8() -> Program:
    bf = "bfloat16"
    return Program(_pipeline(), (_s((8, 8192, 8192), bf), _s((16, 2048, 8192), bf)), "h100x8",
                   {"mesh": "stage=8", "shard": {0: "stage,None,None"}})


# -- unrolled-loop ------------------------------------------------------------------------

def _node_field(params, y):
    jax, jnp = _jax()
    w1, w2 = params
    return jnp.tanh(y @ w1) @ w2


def _rk4_step(params, y, dt):
    k1 = _node_field(params, y)
    k2 = _node_field(params, y + 0.5 * dt * k1)
    k3 = _node_field(params, y + 0.5 * dt * k2)
    k4 = _node_field(params, y + dt * k3)
    return y + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def _node_args():
    return ((_s((64, 256)), _s((256, 64))), _s((1024, 64)))


@case(["unrolled-loop"], "Neural-ODE forward pass integrated with RK4 for 100 steps in a "
      "Python for-loop: the compiled program holds 100 copies of the step (400 vector-field "
      "evaluations, ~800 dots), compile time and program size grow with the step count; "
      "jax.lax.fori_loop compiles one step.")
def neural_ode_rk4_python_loop() -> Program:
    jax, _ = _jax()

    def f(params, y0):
        y = y0
        for _ in range(100):
            y = _rk4_step(params, y, 0.01)
        return y

    return Program(jax.jit(f), _node_args())


@case([], "The same RK4 integration as a fori_loop over one step.")
def neural_ode_rk4_fori() -> Program:
    jax, _ = _jax()

    def f(params, y0):
        return jax.lax.fori_loop(0, 100, lambda i, y: _rk4_step(params, y, 0.01), y0)

    return Program(jax.jit(f), _node_args())


def _beam_step(params, state):
    jax, jnp = _jax()
    emb, U, W = params
    h, scores, _ = state  # h [B*K, d], scores [B, K]
    B, K = scores.shape
    logp = jax.nn.log_softmax((h @ W).astype(jnp.float32), -1)  # [B*K, V]
    V = logp.shape[-1]
    cand = (scores[..., None] + logp.reshape(B, K, V)).reshape(B, K * V)
    top, idx = jax.lax.top_k(cand, K)
    beam, tok = idx // V, idx % V
    h = h.reshape(B, K, -1)[jnp.arange(B)[:, None], beam].reshape(B * K, -1)
    h = jnp.tanh(emb[tok.reshape(-1)] + h @ U)
    return h, top, tok


def _beam_args():
    bf = "bfloat16"
    return ((_s((32000, 512), bf), _s((512, 512), bf), _s((512, 32000), bf)),
            _s((32 * 8, 512), bf), _s((32, 8)))


@case(["unrolled-loop"], "Beam search (32 sequences x 8 beams, vocabulary 32000) decoded for "
      "48 steps in a Python loop on an H100: 48 copies of the step (logits GEMM, log-softmax, "
      "top-k over 256k candidates, beam gather) in the program; a lax.scan over steps "
      "compiles one.", target="gpu")
def beam_search_python_loop_h100() -> Program:
    jax, jnp = _jax()

    def f(params, h, scores):
        toks = []
        state = (h, scores, None)
        for _ in range(48):
            state = _beam_step(params, state)
            toks.append(state[2])
        return jnp.stack(toks), state[1]

    return Program(jax.jit(f), _beam_args(), "h100")


@case([], "The same beam search with the step in a lax.scan that stacks the tokens.",
      target="gpu")
def beam_search_scan_h100() -> Program:
    jax, jnp = _jax()

    def f(params, h, scores):
        def body(carry, _):
            h, s = carry
            h, s, tok = _beam_step(params, (h, s, None))
            return (h, s), tok

        (h, s), toks = jax.lax.scan(body, (h, scores), None, length=48)
        return toks, s

    return Program(jax.jit(f), _beam_args(), "h100")


# -- constant-rebuilt ---------------------------------------------------------------------

def _rbf(a, b, ls=0.1):
    jnp = _jax()[1]
    d2 = jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, -1)
    return jnp.exp(-0.5 * d2 / ls ** 2)


@case(["constant-rebuilt"], "GP regression prediction whose 3000 training inputs and targets "
      "are fixed (a linspace grid and its sine) yet built inside the jitted function, so every "
      "call recomputes the [3000, 3000] kernel matrix, its Cholesky factorisation and the "
      "solve (~9 GFLOP of O(n^3) work) to predict 512 test points (a 3 MFLOP matmul); the "
      "factor and alpha belong outside, computed once.")
def gp_predict_refactors_training_kernel() -> Program:
    jax, jnp = _jax()

    def predict(xt):
        x = jnp.stack(jnp.meshgrid(jnp.linspace(0, 1, 60), jnp.linspace(0, 1, 50)), -1)
        x = x.reshape(-1, 2)
        y = jnp.sin(6.0 * x[:, 0]) * jnp.cos(4.0 * x[:, 1])
        K = _rbf(x, x) + 1e-3 * jnp.eye(x.shape[0])
        L = jnp.linalg.cholesky(K)
        alpha = jax.scipy.linalg.cho_solve((L, True), y)
        return _rbf(xt, x) @ alpha

    return Program(jax.jit(predict), (_s((512, 2)),))


@case([], "GP prediction with the training inputs and the precomputed weights alpha = K^-1 y "
      "passed in: one cross-kernel and a matvec per call.")
def gp_predict_precomputed_alpha() -> Program:
    jax, _ = _jax()

    def predict(xt, x, alpha):
        return _rbf(xt, x) @ alpha

    return Program(jax.jit(predict), (_s((512, 2)), _s((3000, 2)), _s((3000,))))


@case(["constant-rebuilt"], "Spherical-harmonic-style analysis on an H100: the Legendre basis "
      "P_l(x) for l < 512 on 4096 fixed Gauss-like nodes is rebuilt on every call by a "
      "512-step three-term recurrence in a fori_loop (512 dependent kernels writing an 8 MiB "
      "basis) before one [256, 4096] x [4096, 512] matmul; the basis depends only on "
      "constants and should be computed once and passed in.", target="gpu")
def legendre_basis_rebuilt_h100() -> Program:
    jax, jnp = _jax()

    def analyse(fields):
        n, L = 4096, 512
        x = jnp.cos(jnp.pi * (jnp.arange(n) + 0.5) / n)
        P = jnp.zeros((L, n)).at[0].set(1.0).at[1].set(x)

        def rec(l, P):
            nxt = ((2 * l - 1) * x * P[l - 1] - (l - 1) * P[l - 2]) / l
            return P.at[l].set(nxt)

        P = jax.lax.fori_loop(2, L, rec, P)
        return fields @ P.T

    return Program(jax.jit(analyse), (_s((256, 4096)),), "h100")


# -- onehot-gather ------------------------------------------------------------------------

def _mlm_embed(onehot):
    jax, jnp = _jax()

    def f(tokens, table, w):
        if onehot:
            e = jax.nn.one_hot(tokens, table.shape[0], dtype=table.dtype) @ table
        else:
            e = jnp.take(table, tokens, axis=0)
        h = jax.nn.gelu(e @ w)
        return (h @ table.T).astype(jnp.float32)  # tied output embedding

    return jax.jit(f)


def _mlm_args():
    bf = "bfloat16"
    return (_s((16, 512), "int32"), _s((50304, 1024), bf), _s((1024, 1024), bf))


@case(["onehot-gather"], "A masked-LM forward with the token embedding written as "
      "one_hot(tokens, 50304) @ table on an H100: XLA fuses the one-hot into the GEMM (no "
      "786 MiB array), but the lookup is still a 0.84 TFLOP matmul, as much as the tied output "
      "projection itself (half the program's flops), where a gather reads 16 MiB.", target="gpu")
def mlm_onehot_embedding_h100() -> Program:
    return Program(_mlm_embed(True), _mlm_args(), "h100")


@case([], "The same masked-LM forward with jnp.take for the embedding (the tied output "
      "projection is a real matmul).", target="gpu")
def mlm_take_embedding_h100() -> Program:
    return Program(_mlm_embed(False), _mlm_args(), "h100")


@case(["onehot-gather"], "Skip-gram (node2vec) scoring that looks up 2048 node embeddings in a "
      "[200000, 128] f32 table through one_hot(ids) @ table: a [2048, 200000] f32 one-hot "
      "(1.5 GiB) and a 105 GFLOP matmul on the CPU for a 1 MiB gather.")
def node2vec_onehot_lookup() -> Program:
    jax, jnp = _jax()

    def f(ids, ctx, table, ctx_table):
        e = jax.nn.one_hot(ids, table.shape[0]) @ table
        c = jnp.take(ctx_table, ctx, axis=0)  # [2048, 10, 128]
        return jax.nn.log_sigmoid(jnp.einsum("bd,bkd->bk", e, c)).sum()

    return Program(jax.jit(f), (_s((2048,), "int32"), _s((2048, 10), "int32"),
                                _s((200000, 128)), _s((200000, 128))))


@case([], "Protein MSA featurisation: one-hot of a 21-letter alphabet [64, 1024, 21] feeding a "
      "linear layer; with 21 classes the one-hot matmul is the standard, cheap formulation "
      "(not an embedding-table lookup to replace).")
def msa_onehot_21_letters() -> Program:
    jax, jnp = _jax()

    def f(msa, w, b):
        x = jax.nn.one_hot(msa, 21)
        return jax.nn.relu(x @ w + b).mean(axis=0)

    return Program(jax.jit(f), (_s((64, 1024), "int32"), _s((21, 256)), _s((256,))))


# -- host-transfer ------------------------------------------------------------------------

def _pf_args():
    return (_s((200, 64)), _s((65536, 4)), _s((2,), "uint32"))


def _pf_move(x, key):
    jax, jnp = _jax()
    return x + 0.1 * jnp.tanh(x[:, ::-1]) + 0.05 * jax.random.normal(key, x.shape)


def _pf_logw(x, y):
    jnp = _jax()[1]
    return -0.5 * jnp.sum((x[:, :2] @ jnp.ones((2, 64)) - y) ** 2, -1)


@case(["host-transfer"], "Bootstrap particle filter (65536 particles, 200 steps in a scan) "
      "that resamples with numpy's np.random.choice through jax.pure_callback: every step "
      "copies the 256 KiB of weights to the host, runs numpy and copies 256 KiB of indices "
      "back, a device-host round trip and sync per step; jax.random.categorical (or a "
      "systematic resample with searchsorted) stays on the device.")
def particle_filter_numpy_resample_callback() -> Program:
    jax, jnp = _jax()
    import numpy as np

    def host_resample(w):
        w = np.asarray(w, dtype=np.float64)
        return np.random.default_rng(0).choice(w.size, w.size, p=w / w.sum()).astype(np.int32)

    def run(ys, x0, key):
        key = jax.random.key(0)

        def step(carry, y):
            x, k = carry
            k, sub = jax.random.split(k)
            x = _pf_move(x, sub)
            w = jax.nn.softmax(_pf_logw(x, y))
            idx = jax.pure_callback(host_resample, jax.ShapeDtypeStruct(w.shape, jnp.int32), w)
            return (x[idx], k), jnp.sum(w[:, None] * x, 0)

        _, means = jax.lax.scan(step, (x0, key), ys)
        return means

    return Program(jax.jit(run), _pf_args())


@case([], "The same particle filter with systematic resampling on the device (cumsum of the "
      "weights and searchsorted of a stratified grid).")
def particle_filter_device_resample() -> Program:
    jax, jnp = _jax()

    def run(ys, x0, key):
        key = jax.random.key(0)
        n = x0.shape[0]

        def step(carry, y):
            x, k = carry
            k, s1, s2 = jax.random.split(k, 3)
            x = _pf_move(x, s1)
            w = jax.nn.softmax(_pf_logw(x, y))
            u = (jnp.arange(n) + jax.random.uniform(s2)) / n
            idx = jnp.clip(jnp.searchsorted(jnp.cumsum(w), u), 0, n - 1)
            return (x[idx], k), jnp.sum(w[:, None] * x, 0)

        _, means = jax.lax.scan(step, (x0, key), ys)
        return means

    return Program(jax.jit(run), _pf_args())


@case(["host-transfer"], "PPO rollout of a batched pendulum-like environment (4096 envs x "
      "256 steps in a scan) that logs the mean reward every step with jax.debug.callback: "
      "a host callback and device sync inside each of the 256 iterations of a loop whose "
      "steps are a few small kernels; returning the rewards as scan outputs avoids it.")
def ppo_rollout_debug_callback_each_step() -> Program:
    jax, jnp = _jax()

    def rollout(w1, w2, s0):
        key = jax.random.key(1)

        def step(carry, _):
            s, k = carry
            k, sub = jax.random.split(k)
            mu = jnp.tanh(jnp.tanh(s @ w1) @ w2)
            a = mu + 0.1 * jax.random.normal(sub, mu.shape)
            th, om = s[:, 0], s[:, 1]
            om = om + 0.05 * (-10.0 * jnp.sin(th) + a[:, 0])
            s = jnp.stack([th + 0.05 * om, om, jnp.sin(th), jnp.cos(th)], -1)
            r = -(th ** 2 + 0.1 * om ** 2)
            jax.debug.callback(lambda m: None, r.mean())
            return (s, k), (s, a, r)

        _, traj = jax.lax.scan(step, (s0, key), None, length=256)
        return traj

    return Program(jax.jit(rollout), (_s((4, 256)), _s((256, 1)), _s((4096, 4))))


# -- small-kernels ------------------------------------------------------------------------

def _augment_one(img, dy, dx, flip, gain):
    jax, jnp = _jax()
    crop = jax.lax.dynamic_slice(img, (dy, dx, 0), (224, 224, 3))
    crop = jnp.where(flip, crop[:, ::-1], crop)
    return jnp.clip(crop * gain, 0.0, 1.0)


def _augment_args():
    return (_s((128, 256, 256, 3)), _s((128,), "int32"), _s((128,), "int32"),
            _s((128,), "bool"), _s((128,)))


@case(["unrolled-loop"], "Random-crop/flip/brightness augmentation of 128 images written as "
      "a Python loop over images then jnp.stack, on an H100: XLA fuses the result into a few "
      "kernels, but the program holds 128 copies of the per-image code (3400 lines of "
      "optimised HLO against 80 for the vmapped twin, compile ~13 s against 0.4 s here); "
      "jax.vmap over the batch is the fix.", target="gpu")
def augment_per_image_python_loop_h100() -> Program:
    jax, jnp = _jax()

    def f(imgs, dy, dx, flip, gain):
        return jnp.stack([_augment_one(imgs[i], dy[i], dx[i], flip[i], gain[i])
                          for i in range(imgs.shape[0])])

    return Program(jax.jit(f), _augment_args(), "h100")


@case([], "The same augmentation vmapped over the batch.", target="gpu")
def augment_vmapped_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(jax.vmap(_augment_one)), _augment_args(), "h100")


def _lora_adam(params, grads, m, v):
    jax, jnp = _jax()
    m = jax.tree.map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
    v = jax.tree.map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
    p = jax.tree.map(lambda p, a, b: p - 1e-4 * a / (jnp.sqrt(b) + 1e-8), params, m, v)
    return p, m, v


@case(["small-kernels"], "Adam on 192 separate LoRA adapter leaves (96 layers x A [1024, 8] "
      "and B [8, 1024], 32 KiB each) updated leaf by leaf on an H100: the update is split into "
      "many tiny kernels that each move ~200 KiB; stacking the adapters per shape (or "
      "flattening the tree into one buffer) makes it a couple of kernels.", target="gpu")
def lora_adam_per_leaf_h100() -> Program:
    jax, _ = _jax()
    leaves = [_s((1024, 8)) if i % 2 == 0 else _s((8, 1024)) for i in range(192)]
    return Program(jax.jit(_lora_adam, donate_argnums=(0, 2, 3)),
                   (leaves, list(leaves), list(leaves), list(leaves)), "h100")


@case([], "The same LoRA Adam update on the adapters stacked per shape ([96, 1024, 8] and "
      "[96, 8, 1024]): a couple of kernels.", target="gpu")
def lora_adam_stacked_h100() -> Program:
    jax, _ = _jax()
    leaves = [_s((96, 1024, 8)), _s((96, 8, 1024))]
    return Program(jax.jit(_lora_adam, donate_argnums=(0, 2, 3)),
                   (leaves, list(leaves), list(leaves), list(leaves)), "h100")


def _rgcn(per_relation):
    jax, jnp = _jax()

    def f(h, w_rel, src, dst):
        R = w_rel.shape[0]
        if per_relation:  # src, dst: [R, E_r]
            agg = jnp.zeros_like(h)
            for r in range(R):
                agg = agg + jax.ops.segment_sum(h[src[r]] @ w_rel[r], dst[r],
                                                num_segments=h.shape[0])
        else:
            m = jnp.einsum("rec,rcd->red", h[src], w_rel)
            agg = jax.ops.segment_sum(m.reshape(-1, m.shape[-1]), dst.reshape(-1),
                                      num_segments=h.shape[0])
        return jax.nn.relu(h + agg)

    return jax.jit(f)


def _rgcn_args():
    return (_s((16384, 128)), _s((48, 128, 128)), _s((48, 2048), "int32"),
            _s((48, 2048), "int32"))


@case(["small-kernels"], "Relational GCN layer with 48 edge types written as a Python loop "
      "over relations on an H100: per relation a gather of 2048 rows, a [2048, 128] x "
      "[128, 128] matmul and a scatter-add into the node array: 68 kernels (48 small GEMMs of "
      "67 MFLOP, each a few microseconds, launch-bound) where one batched einsum over "
      "relations and one segment_sum need 4.", target="gpu")
def rgcn_per_relation_loop_h100() -> Program:
    return Program(_rgcn(True), _rgcn_args(), "h100")


@case([], "The same R-GCN layer batched over relations: one gather, one batched einsum, one "
      "segment_sum.", target="gpu")
def rgcn_batched_relations_h100() -> Program:
    return Program(_rgcn(False), _rgcn_args(), "h100")


# -- reduction-split ----------------------------------------------------------------------

def _multi_lora(split):
    jax, jnp = _jax()

    def f(x, w, a, b):
        base = jnp.dot(x, w, preferred_element_type=jnp.float32)
        z = jnp.einsum("bd,kdr->kbr", x, a)
        if split:
            delta = jnp.einsum("kbr,kro->kbo", z, b, preferred_element_type=jnp.float32).sum(0)
        else:
            delta = jnp.einsum("kbr,kro->bo", z, b, preferred_element_type=jnp.float32)
        return (base + delta).astype(jnp.bfloat16)

    return jax.jit(f)


def _multi_lora_args():
    bf = "bfloat16"
    return (_s((8192, 4096), bf), _s((4096, 4096), bf), _s((4, 4096, 16), bf),
            _s((4, 16, 4096), bf))


@case(["reduction-split"], "Four LoRA adapters applied at once (multi-LoRA serving) with "
      "einsum('kbr,kro->kbo') followed by .sum(0) over the 4 adapters on an H100: the GEMM "
      "writes a [4, 8192, 4096] f32 intermediate (512 MiB) that a separate reduce reads back; "
      "contracting k with r in the einsum ('kbr,kro->bo') folds the sum into the GEMM "
      "(XLA's peak 802 -> 417 MiB).", target="gpu")
def multi_lora_sum_after_einsum_h100() -> Program:
    return Program(_multi_lora(True), _multi_lora_args(), "h100")


@case([], "The same multi-LoRA layer contracting the adapter axis inside the einsum.",
      target="gpu")
def multi_lora_contracted_h100() -> Program:
    return Program(_multi_lora(False), _multi_lora_args(), "h100")


@case(["reduction-split"], "DCN-v2 cross layer with a mixture of 4 low-rank experts: each "
      "expert's output U_k (V_k x) is materialised as a [4, 16384, 1024] f32 array (256 MiB) "
      "by a batched matmul and then gate-weighted and summed over the 4 experts in a separate "
      "reduction; scaling the rank-64 intermediate by the gates and contracting experts and "
      "rank together in one matmul avoids the big intermediate.")
def dcn_mixture_experts_sum_after_matmul() -> Program:
    jax, jnp = _jax()

    def f(x, V, U, wg):
        g = jax.nn.softmax(x @ wg, -1)  # [B, K]
        z = jnp.tanh(jnp.einsum("bd,kdr->kbr", x, V))
        y = jnp.einsum("kbr,krd->kbd", z, U)
        return x + x * jnp.einsum("bk,kbd->bd", g, y)

    return Program(jax.jit(f), (_s((16384, 1024)), _s((4, 1024, 64)), _s((4, 64, 1024)),
                                _s((1024, 4))))


# -- loop-state ---------------------------------------------------------------------------

def _sphere_trace(unroll):
    jax, jnp = _jax()

    def f(o, d):  # o, d: [3, N]
        def sdf(x, y, z):
            sphere = jnp.sqrt(x * x + y * y + z * z) - 1.0
            qx, qy, qz = (jnp.maximum(jnp.abs(c - 1.5) - 0.5, 0.0) for c in (x, y, z))
            box = jnp.sqrt(qx * qx + qy * qy + qz * qz)
            return jnp.minimum(sphere, box)

        def step(i, t):
            return t + sdf(*(o[c] + t * d[c] for c in range(3)))

        t = jax.lax.fori_loop(0, 12, step, jnp.zeros(o.shape[1]), unroll=unroll)
        return jnp.exp(-0.1 * t)

    return jax.jit(f)


@case(["loop-state"], "Sphere tracing 4M rays for 12 steps in a fori_loop on an H100: each "
      "iteration is one elementwise kernel that reads the 96 MiB of ray origins and "
      "directions and reads and writes the 16 MiB distance array, 12 round trips through "
      "HBM (~1.3 GiB moved); unroll=True lets XLA fuse the 12 steps into one kernel that "
      "reads the rays once (checked: one fusion).",
      target="gpu")
def sphere_trace_fori_12_steps_h100() -> Program:
    return Program(_sphere_trace(False), (_s((3, 1 << 22)), _s((3, 1 << 22))), "h100")


@case([], "The same sphere tracer with the 12-step fori_loop unrolled, fused into one kernel.",
      target="gpu")
def sphere_trace_unrolled_h100() -> Program:
    return Program(_sphere_trace(True), (_s((3, 1 << 22)), _s((3, 1 << 22))), "h100")


@case(["loop-state"], "Black-Scholes implied volatility for 4M options by 8 Newton steps in "
      "a fori_loop on an H100: each step is one kernel that reads the five [4M] f32 inputs "
      "(80 MiB) and the volatility from memory and writes it back, 8 passes; unrolling the 8 "
      "steps lets XLA fuse them into one kernel and one pass (checked: one fusion).",
      target="gpu")
def implied_vol_newton_fori_h100() -> Program:
    jax, jnp = _jax()
    from jax.scipy.stats import norm

    def f(S, K, T, r, price):
        def step(i, sig):
            sq = jnp.sqrt(T)
            d1 = (jnp.log(S / K) + (r + 0.5 * sig * sig) * T) / (sig * sq)
            d2 = d1 - sig * sq
            call = S * norm.cdf(d1) - K * jnp.exp(-r * T) * norm.cdf(d2)
            vega = S * norm.pdf(d1) * sq
            return jnp.clip(sig - (call - price) / (vega + 1e-8), 1e-3, 5.0)

        return jax.lax.fori_loop(0, 8, step, jnp.full_like(S, 0.2))

    n = 1 << 22
    return Program(jax.jit(f), tuple(_s((n,)) for _ in range(5)), "h100")


@case([], "The same implied-volatility solver with the 8 Newton steps unrolled "
      "(fori_loop(..., unroll=True)): one fused kernel.", target="gpu")
def implied_vol_newton_unrolled_h100() -> Program:
    jax, jnp = _jax()
    from jax.scipy.stats import norm

    def f(S, K, T, r, price):
        def step(i, sig):
            sq = jnp.sqrt(T)
            d1 = (jnp.log(S / K) + (r + 0.5 * sig * sig) * T) / (sig * sq)
            d2 = d1 - sig * sq
            call = S * norm.cdf(d1) - K * jnp.exp(-r * T) * norm.cdf(d2)
            vega = S * norm.pdf(d1) * sq
            return jnp.clip(sig - (call - price) / (vega + 1e-8), 1e-3, 5.0)

        return jax.lax.fori_loop(0, 8, step, jnp.full_like(S, 0.2), unroll=True)

    n = 1 << 22
    return Program(jax.jit(f), tuple(_s((n,)) for _ in range(5)), "h100")


# -- side-by-side -------------------------------------------------------------------------

@case(["side-by-side"], "Monte Carlo Asian option over 1M paths x 252 days generated all at "
      "once: XLA fuses the draws, cumulative sum and exponential but still holds the whole "
      "[1M, 252] f32 path array (1 GiB; XLA's peak 1.1 GiB) for a result of two scalars, "
      "although the paths are independent; lax.map over path blocks (or a scan over days "
      "with a running average) runs them one after another with a fraction of the memory.",
      target="gpu")
def asian_option_all_paths_h100() -> Program:
    jax, jnp = _jax()

    def price(key, s0, sigma):
        k = jax.random.wrap_key_data(key)
        z = jax.random.normal(k, (1 << 20, 252))
        dt = 1.0 / 252
        logp = jnp.cumsum((0.03 - 0.5 * sigma ** 2) * dt + sigma * jnp.sqrt(dt) * z, axis=1)
        paths = s0 * jnp.exp(logp)
        avg = paths.mean(1)
        return jnp.exp(-0.03) * jnp.maximum(avg - s0, 0.0).mean(), paths[:, -1].std()

    return Program(jax.jit(price), (_s((2,), "uint32"), _s(()), _s(())), "h100")


def _kmeans_step(x, c):
    jnp = _jax()[1]
    d = jnp.sum(x * x, 1)[:, None] - 2 * x @ c.T + jnp.sum(c * c, 1)[None]
    a = jnp.argmin(d, 1)
    oh = (a[:, None] == jnp.arange(c.shape[0])[None]).astype(x.dtype)
    return (oh.T @ x) / jnp.maximum(oh.sum(0), 1.0)[:, None], d.min(1).sum()


@case(["side-by-side"], "k-means with 16 random restarts vmapped: each restart's [65536, 256] "
      "f32 distance matrix and one-hot assignment (64 MiB each) exist for all 16 restarts at "
      "once (~2 GiB at the peak against 8 MiB of data); lax.map over the restarts runs them "
      "one after another.")
def kmeans_restarts_vmapped() -> Program:
    jax, _ = _jax()
    f = jax.vmap(_kmeans_step, in_axes=(None, 0))
    return Program(jax.jit(f), (_s((65536, 32)), _s((16, 256, 32))))


@case([], "The same 16 k-means restarts with lax.map: one restart's distances alive at a "
      "time.")
def kmeans_restarts_lax_map() -> Program:
    jax, _ = _jax()

    def f(x, cs):
        return jax.lax.map(lambda c: _kmeans_step(x, c), cs)

    return Program(jax.jit(f), (_s((65536, 32)), _s((16, 256, 32))))


# -- recompute ----------------------------------------------------------------------------

def _split_step(stored):
    jax, jnp = _jax()
    n, dt = 256, 1e-3

    def k2():
        k = jnp.fft.fftfreq(n) * 2 * jnp.pi * n
        return k[:, None, None] ** 2 + k[None, :, None] ** 2 + k[None, None, :] ** 2

    def f(psi):
        phase = jnp.exp(-0.5j * dt * k2()).astype(jnp.complex64) if stored else None

        def step(i, psi):
            p = phase if stored else jnp.exp(-0.5j * dt * k2()).astype(jnp.complex64)
            psi = jnp.fft.ifftn(p * jnp.fft.fftn(psi))
            return psi * jnp.exp(-1j * dt * jnp.abs(psi) ** 2)

        return jax.lax.fori_loop(0, 20, step, psi)

    return jax.jit(f)


@case(["recompute"], "Split-step Fourier solver for the 3-D nonlinear Schroedinger equation "
      "(256^3, 20 steps) that precomputes the linear phase factor exp(-i k^2 dt/2) as a "
      "[256, 256, 256] complex64 array (128 MiB) outside the loop: it stays alive through the "
      "loop and is read every step, where rebuilding it from iota inside the multiply costs "
      "a few flops per element and frees 128 MiB (XLA's peak 512 -> 384 MiB).", target="gpu")
def nls_split_step_phase_stored_h100() -> Program:
    return Program(_split_step(True), (_s((256, 256, 256), "complex64"),), "h100")


@case([], "The same split-step solver computing the phase factor from the wavenumbers "
      "inside the step (fused into the multiply).", target="gpu")
def nls_split_step_phase_in_step_h100() -> Program:
    return Program(_split_step(False), (_s((256, 256, 256), "complex64"),), "h100")


def _local_attention(mask_outside):
    jax, jnp = _jax()
    T, W = 2048, 128

    def band():
        i = jnp.arange(T)[:, None]
        j = jnp.arange(T)[None, :]
        return jnp.where((j <= i) & (j > i - W), 0.0, -1e9).astype(jnp.float32)

    def f(x, wqkv, wo):
        bias = band() if mask_outside else None

        def layer(h, w):
            wq, wo_ = w
            q, k, v = jnp.split(h @ wq, 3, -1)
            q, k, v = (t.reshape(T, 4, 64).transpose(1, 0, 2) for t in (q, k, v))
            s = jnp.einsum("hqd,hkd->hqk", q, k, preferred_element_type=jnp.float32) / 8.0
            s = s + (bias if mask_outside else band())
            p = jax.nn.softmax(s, -1).astype(h.dtype)
            o = jnp.einsum("hqk,hkd->qhd", p, v).reshape(T, 256)
            return h + o @ wo_, None

        h, _ = jax.lax.scan(layer, x, (wqkv, wo))
        return h

    return jax.jit(f)


def _local_attention_args():
    bf = "bfloat16"
    return (_s((2048, 256), bf), _s((6, 256, 768), bf), _s((6, 256, 256), bf))


@case(["recompute", "other:dense-banded-attention"], "Sliding-window causal attention "
      "(window 128, 2048 tokens, batch 1, 4 heads, 6 scanned layers) whose additive band mask "
      "is built once outside the scan as an f32 [2048, 2048] array (16 MiB, peak 102 -> "
      "118 MiB) and read by every layer's softmax; built from iota inside the layer it fuses "
      "into the softmax and never touches memory (the scores are 64 MiB per layer, so the "
      "mask is a quarter of the softmax's reads). Second issue: the window of 128 is computed "
      "as dense [2048, 2048] scores, 16x the work of blocked local attention.", target="gpu")
def local_attention_mask_outside_scan_h100() -> Program:
    return Program(_local_attention(True), _local_attention_args(), "h100")


@case(["other:dense-banded-attention"], "The same local attention with the band mask built "
      "from iota inside each layer (fused, no stored mask); still dense [2048, 2048] scores "
      "for a window of 128, 16x the work of blocked local attention.", target="gpu")
def local_attention_mask_in_layer_h100() -> Program:
    return Program(_local_attention(False), _local_attention_args(), "h100")


# -- large-constant -----------------------------------------------------------------------

@case(["large-constant"], "k-means assignment step whose 65536 x 32 f32 dataset (8 MiB) was "
      "loaded with NumPy and is closed over by the jitted function: it is folded into the "
      "executable as a constant (program size, compile time, a second device copy) instead "
      "of being passed as an argument.")
def kmeans_numpy_dataset_closed_over() -> Program:
    jax, jnp = _jax()
    import numpy as np
    X = np.random.default_rng(0).standard_normal((65536, 32)).astype(np.float32)

    def f(c):
        x = jnp.asarray(X)
        return _kmeans_step(x, c)

    return Program(jax.jit(f), (_s((256, 32)),))


@case(["large-constant"], "A frozen base projection (2048 x 2048 f32, 16 MiB) read from a "
      "NumPy checkpoint and closed over in a LoRA forward on an H100: the weight is baked "
      "into the executable as a 16 MiB literal; pass it as an argument.", target="gpu")
def lora_forward_numpy_base_weight_h100() -> Program:
    jax, jnp = _jax()
    import numpy as np
    W = (np.random.default_rng(1).standard_normal((2048, 2048)) / 45.0).astype(np.float32)

    def f(x, a, b):
        return x @ jnp.asarray(W) + (x @ a) @ b

    return Program(jax.jit(f), (_s((4096, 2048)), _s((2048, 16)), _s((16, 2048))), "h100")


# -- donation-unused ----------------------------------------------------------------------

@case(["donation-unused"], "Shading 4M rays with the [3, 4M] origin and direction arrays "
      "(48 MiB each) donated, but the only output is a [4M] f32 image: no output can reuse "
      "the donated buffers, so the donation frees nothing and invalidates the caller's rays.",
      target="gpu")
def ray_shading_donates_rays_h100() -> Program:
    jax, jnp = _jax()

    def shade(o, d, light):
        p = o + 2.0 * d
        n = p / jnp.sqrt(jnp.sum(p * p, 0, keepdims=True))
        return jnp.maximum(jnp.sum(n * light[:, None], 0), 0.0)

    n = 1 << 22
    return Program(jax.jit(shade, donate_argnums=(0, 1)), (_s((3, n)), _s((3, n)), _s((3,))),
                   "h100")


@case(["donation-unused"], "k-means label assignment (128 centroids) that donates the "
      "[262144, 64] f32 points (64 MiB) while returning only int32 labels [262144] and the "
      "inertia: nothing aliases the donated buffer.")
def kmeans_assign_donates_points() -> Program:
    jax, jnp = _jax()

    def assign(x, c):
        d = jnp.sum(x * x, 1)[:, None] - 2 * x @ c.T + jnp.sum(c * c, 1)[None]
        return jnp.argmin(d, 1).astype(jnp.int32), d.min(1).sum()

    return Program(jax.jit(assign, donate_argnums=0), (_s((262144, 64)), _s((128, 64))))


@case([], "An EMA teacher update (DINO/BYOL) that donates the teacher parameters it "
      "returns: every donated buffer is aliased by its output.")
def ema_teacher_update_donated() -> Program:
    jax, _ = _jax()

    def ema(teacher, student):
        return jax.tree.map(lambda t, s: 0.996 * t + 0.004 * s, teacher, student)

    shapes = [(4096, 4096), (4096,), (4096, 1024), (1024,)]
    return Program(jax.jit(ema, donate_argnums=0),
                   ([_s(s) for s in shapes], [_s(s) for s in shapes]))


# -- a PINN, and an issue outside the vocabulary -----------------------------------------

def _pinn_residual(params, xt):
    jax, jnp = _jax()

    def u(p, x, t):
        h = jnp.stack([x, t])
        for w, b in p[:-1]:
            h = jnp.tanh(w @ h + b)
        w, b = p[-1]
        return (w @ h + b)[0]

    u_t = jax.grad(u, argnums=2)
    u_xx = jax.grad(jax.grad(u, argnums=1), argnums=1)
    u_x = jax.grad(u, argnums=1)
    x, t = xt[:, 0], xt[:, 1]
    v = lambda f: jax.vmap(f, in_axes=(None, 0, 0))(params, x, t)  # noqa: E731
    r = v(u_t) + v(u) * v(u_x) - 0.01 / jnp.pi * v(u_xx)  # viscous Burgers
    return jnp.mean(r * r)


def _pinn_params():
    sizes = [2, 256, 256, 256, 1]
    return [(_s((o, i)), _s((o,))) for i, o in zip(sizes[:-1], sizes[1:])]


@case([], "PINN training step for viscous Burgers (u_t, u_x, u_xx by jax.grad of grad on 16k "
      "collocation points, vmapped), jax.value_and_grad, parameters donated.")
def pinn_burgers_value_and_grad() -> Program:
    jax, _ = _jax()

    def step(params, xt):
        loss, g = jax.value_and_grad(_pinn_residual)(params, xt)
        return jax.tree.map(lambda p, gi: p - 1e-3 * gi, params, g), loss

    return Program(jax.jit(step, donate_argnums=0), (_pinn_params(), _s((16384, 2))))


@case(["other:broadcast-pairwise-distance"], "k-nearest-neighbour retrieval on an H100 with "
      "squared distances written as sum((q[:, None, :] - x[None, :, :])**2, -1) for 8192 "
      "queries x 16384 keys x 128 dims: XLA fuses it into one reduction kernel (no [8192, "
      "16384, 128] array) but evaluates 17G elementwise operations on CUDA cores; "
      "|q|^2 - 2 q.x + |x|^2 puts the work on a 34 GFLOP tensor-core GEMM.", target="gpu")
def knn_broadcast_distances_h100() -> Program:
    jax, jnp = _jax()

    def f(q, x):
        d = jnp.sum((q[:, None, :] - x[None, :, :]) ** 2, -1)
        return jax.lax.top_k(-d, 16)

    return Program(jax.jit(f), (_s((8192, 128), "bfloat16"), _s((16384, 128), "bfloat16")),
                   "h100")
