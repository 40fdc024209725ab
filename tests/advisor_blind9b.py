"""Half of a ninth blind evaluation set for hloscope's advisor (issue 28, item 5).

Who wrote it: a helper session (``blind9b``) that never read the advisor's rules or code
(src/hloscope/_analysis/ modules named for rules, advisor, advice, findings, figures or
checks, src/hloscope/_checked/), its documentation (docs/advisor.md, docs/lint.md, the
README's advisor and lint sections), its tests (tests/test_advisor*.py,
tests/test_checked*.py), the other labelled sets (tests/advisor_programs.py,
tests/advisor_heldout*.py), benchmarks/advisor_*.py, /work/runs or other worktrees, and never
ran the advisor (``hloscope lint``, ``hloscope report``, ``hloscope.lint``, ``Report.advice``,
findings or groups) on these programs; every compile passed ``check=False``. It read issue
28, /work/wt/PREAMBLE.md, its task, the docstring and signature of ``hloscope.inspect``, a
grep of docs/targets.md, lines 1-95 and 139-166 of tests/advisor_blind.py (its docstring,
``KINDS``, ``Program``, ``BlindCase``, ``CASES``, ``REVISED``, the comment above ``TUNED``
but not the dict, ``case``, ``_jax``, ``_s``, ``_cpu_mesh``), lines 1-90 and 114-120 of
tests/advisor_blind7.py (its docstring, imports, ``CASES``, ``REVISED``, ``case``) and the
first and closing lines of that set's ``TUNED`` (a grep, no entry), the names of all earlier
sets' cases (``grep -n "^def "``) and the ``grep -n blind`` lines of
tests/test_advisor_blind_set.py.

What it saw that it should not have: a ``grep -n "io_callback\|pure_callback"`` over
tests/advisor_blind7.py printed two lines of one of that set's case bodies (an
``io_callback`` returning ``abs(a - b).sum()`` in a PageRank loop, line 849) and the start of
its ``why`` (line 859: "host: an io_callback copies both rank vectors to the host in every
iteration of"). No ``TUNED`` or ``REVISED`` entry, no rule, advisor code or advisor output
was seen.

This file is one half of the ninth set (the other half, tests/advisor_blind9.py, is by
another blind writer); its module-level helpers are prefixed ``_b_``. It has 30 programs:
20 flawed, each kind of its half labelled on exactly two programs (constant-rebuilt,
onehot-gather, host-transfer, small-kernels, reduction-split, loop-state, side-by-side,
recompute, large-constant, donation-unused); one program carries a second label, outside
the vocabulary (``other:pair-matrix-stored`` on the SPH callback program, found in its TPU
compile) and 10
clean ones written as an expert would, on CPU (plain and an 8-device mesh), H100, H100x8,
TPU v5e and a TPU v5e 2x4 slice. Domains: option pricing (COS method, Heston
characteristic-function calibration, Heston Monte Carlo and PDE, Barone-Adesi-Whaley, Asian
Monte Carlo), state-space models (Mamba, S4D), optical flow (correlation pyramids,
soft-argmax flow), object detection (anchor matching, NMS-free decoding heads),
normalizing flows (rotation flows, RealNVP, FFJORD), Bayesian inference (SVGD, mean-field
VI), smoothed-particle hydrodynamics, tabular transformers (FT-Transformer, PLR embeddings),
optimizers (ADMM, consensus ADMM, L-BFGS), kernel smoothers on time grids and pipe-network
hydraulics (Colebrook).

Changed before any advisor run, from the compiled HLO alone: an NMS-free decoder with a
Python loop of 80 per-class ``top_k`` on an H100 was dropped (XLA's compile took over 8
minutes); the SPH callback program moved from the H100 target to a TPU v5e (callbacks do not
compile for the GPU target here); a tabular inference program moved from TPU to CPU (a
3-minute TPU compile on this loaded machine); the clean S4D layer sums its Vandermonde
product instead of an einsum (the einsum materialized a 512 MiB complex array); the clean
detection head convolves in bf16 with OHWI weights (with ``preferred_element_type=f32`` XLA
upcast the convolution to f32, and HWIO weights were transposed every call); the clean SPH
program lost its viscosity term (with it XLA stored two [8192, 8192] pair arrays). Notes on
the clean programs: on the TPU the RealNVP input [8192, 256] is copied once into the
TPU's batch-minor layout in on-chip memory (XLA's layout choice for an argument; the code
has no transpose); the data-parallel detection head gathers its [64, 100] results (its
outputs are replicated by default). In the flawed FT-Transformer program the [1024, 16, 16]
f32 attention scores are laid out with 16 in the TPU's 128-lane dimension (1 MiB padded to
8 MiB); with 16 feature tokens this is the model's shape, not a fixable layout, so it is not
labelled. The SVGD and SPH callback programs were rewritten (before any advisor run) to
avoid [N, N, d] pair tensors, and the Heston calibration loop went from 40 to 16 maturities
(compile time).

Vocabulary and the meaning of a label: as in tests/advisor_blind.py (``KINDS``, plus
``other:<short-name>`` for a real issue outside it). A label means the pattern is present in
the compiled program and fixing it saves at least about 2-3% of the program's peak memory
or run time on its device; ``expect=()`` means an expert would flag nothing.

Each case builds a `Program`; compile it with
``hloscope.inspect(p.fn, *p.args, target=p.target, **p.kwargs)``. CPU programs with a mesh
need 8 host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``).

Labels are never edited after the advisor has run: a later correction goes into `REVISED`
(case name -> (new labels, reason)), empty when committed.
"""

from __future__ import annotations

from collections.abc import Callable

from advisor_blind import KINDS, BlindCase, Program, _cpu_mesh, _jax, _s

__all__ = ["CASES", "KINDS", "REVISED", "TUNED", "BlindCase", "Program"]

CASES: list[BlindCase] = []

# Corrections after the advisor ran: name -> (labels, reason). Empty when committed.
REVISED: dict[str, tuple[tuple[str, ...], str]] = {}

# Rules tuned to a program of this set after the advisor ran: name -> what changed.
TUNED: dict[str, str] = {}


def case(expect: tuple[str, ...] | list[str], why: str, target: str | None = None):
    def register(build: Callable[[], Program]) -> Callable[[], Program]:
        CASES.append(BlindCase(build.__name__, build, tuple(expect), why, target))
        return build
    return register


def _b_sh(mesh, *spec):
    import jax
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))


# -- constant-rebuilt ---------------------------------------------------------------------

def _b_cos_method_prices(coeffs, scale):
    # COS method (Fang-Oosterlee): value on a grid of log-moneyness x_j is
    # sum_k A_k cos(k pi (x_j - a) / (b - a)); the cosine basis is rebuilt on every call.
    jax, jnp = _jax()
    nk, nx, a, b = 512, 8192, -3.0, 3.0
    k = jnp.arange(nk, dtype=jnp.float32)[:, None]
    x = jnp.linspace(a, b, nx, dtype=jnp.float32)[None, :]
    basis = jnp.cos(k * jnp.pi * (x - a) / (b - a))
    return (coeffs @ basis) * scale


@case(["constant-rebuilt"],
      "COS-method option pricing on an H100: the [512, 8192] f32 cosine basis (16 MiB, 4M "
      "cosines) depends on nothing but iotas and is rebuilt in every call before the "
      "[2048, 512] x [512, 8192] matmul; passed in once (or cached) it costs nothing per call.",
      target="gpu")
def cos_method_basis_rebuilt_h100() -> Program:
    return Program(_b_cos_method_prices, (_s((2048, 512)), _s((8192,))), target="h100")


def _b_rotation_flow_loglik(x, log_scale, shift):
    # A linear flow: fixed random rotations (drawn and orthogonalised with QR in every call)
    # between learned per-dimension affine layers (ActNorm-style).
    jax, jnp = _jax()
    d = x.shape[-1]
    logdet = 0.0
    for i in range(4):
        q, _ = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(i), (d, d)))
        x = x @ q
        x = x * jnp.exp(log_scale[i]) + shift[i]
        logdet = logdet + log_scale[i].sum()
    logp = -0.5 * (x * x).sum(-1) - 0.5 * d * jnp.log(2 * jnp.pi)
    return (logp + logdet).mean()


@case(["constant-rebuilt"],
      "Rotation+ActNorm normalizing flow log-likelihood on CPU ([4096, 512] batch): each of "
      "the four fixed 512x512 rotations is drawn from a constant key and orthogonalised "
      "with a QR decomposition inside the jitted function, on every call (4 QRs and 1M "
      "normals per call, beside 4 [4096,512]x[512,512] matmuls); they are constants of the "
      "model and belong in its parameters.")
def flow_random_rotations_qr_rebuilt() -> Program:
    return Program(_b_rotation_flow_loglik,
                   (_s((4096, 512)), _s((4, 512)), _s((4, 512))))


# -- onehot-gather ------------------------------------------------------------------------

def _b_mamba_block(x, p):
    jax, jnp = _jax()
    d = x.shape[-1]
    xz = x @ p["w_in"]
    u, z = xz[..., :d], xz[..., d:]
    # causal depthwise conv, width 4
    up = jnp.pad(u, ((0, 0), (3, 0), (0, 0)))
    u = sum(up[:, i:i + u.shape[1]] * p["conv"][i] for i in range(4))
    u = jax.nn.silu(u)
    dt = jax.nn.softplus(u @ p["w_dt"])
    a = jnp.exp(-dt * jnp.exp(p["a_log"]))
    bu = dt * u

    def comb(l, r):
        return l[0] * r[0], r[0] * l[1] + r[1]
    _, h = jax.lax.associative_scan(comb, (a, bu), axis=1)
    y = (h + u * p["d"]) * jax.nn.silu(z)
    return x + (y @ p["w_out"]).astype(x.dtype)


def _b_mamba_params(d, dtype="bfloat16"):
    return {"w_in": _s((d, 2 * d), dtype), "conv": _s((4, d), dtype),
            "w_dt": _s((d, d), dtype), "a_log": _s((d,), dtype), "d": _s((d,), dtype),
            "w_out": _s((d, d), dtype)}


def _b_mamba_lm_onehot(tokens, table, p):
    jax, jnp = _jax()
    x = jax.nn.one_hot(tokens, table.shape[0], dtype=table.dtype) @ table
    return _b_mamba_block(x, p)


@case(["onehot-gather"],
      "A Mamba-style LM block on an H100 whose token embedding is one_hot(tokens, 50280) @ "
      "table: a [4, 1024, 50280] bf16 one-hot (393 MiB) and a 422 GFLOP matmul, several "
      "times the whole block's other work, where jnp.take(table, tokens, axis=0) reads "
      "4096 rows.", target="gpu")
def mamba_lm_onehot_embedding_h100() -> Program:
    return Program(_b_mamba_lm_onehot,
                   (_s((4, 1024), "int32"), _s((50280, 1024), "bfloat16"),
                    _b_mamba_params(1024)), target="h100")


def _b_ft_transformer_onehot(x_cat, x_num, table, w_num, wq, wo):
    jax, jnp = _jax()
    # 8 categorical columns hashed into one shared 65536-bucket vocabulary
    e_cat = jnp.einsum("bfv,vd->bfd", jax.nn.one_hot(x_cat, table.shape[0], dtype=table.dtype),
                       table)
    e_num = x_num[..., None].astype(table.dtype) * w_num
    t = jnp.concatenate([e_cat, e_num], axis=1)                      # [B, 16, 256]
    q = t @ wq
    s = jnp.einsum("bqd,bkd->bqk", q, t, preferred_element_type=jnp.float32) / 16.0
    att = jax.nn.softmax(s, -1).astype(t.dtype)
    h = t + jnp.einsum("bqk,bkd->bqd", att, t) @ wo
    return h.mean(1)


@case(["onehot-gather"],
      "FT-Transformer (tabular) forward on a TPU v5e: 8 categorical columns hashed into a "
      "shared 65536-bucket vocabulary are embedded as one_hot(x_cat) [1024, 8, 65536] bf16 "
      "(1 GiB) contracted with the [65536, 256] table: 69 GFLOP and a huge one-hot for a "
      "lookup of 8192 rows (jnp.take).", target="tpu")
def ft_transformer_hashed_onehot_tpu() -> Program:
    return Program(_b_ft_transformer_onehot,
                   (_s((1024, 8), "int32"), _s((1024, 8)), _s((65536, 256), "bfloat16"),
                    _s((8, 256), "bfloat16"), _s((256, 256), "bfloat16"),
                    _s((256, 256), "bfloat16")), target="tpu-v5e")


# -- host-transfer ------------------------------------------------------------------------

def _b_sph_run(pos, vel, n_steps=100):
    jax, jnp = _jax()
    from jax.experimental import io_callback
    import numpy as np
    h, mass, k_eos, rho0, dt = 0.02, 1.0 / pos.shape[0], 2.0, 1.0, 1e-4

    def frame_writer(step, p):
        np.asarray(p)  # stands for appending the frame to a trajectory file on the host
        return np.int32(0)

    def step(i, state):
        p, v = state
        d = p[:, None, :] - p[None, :, :]
        r2 = (d * d).sum(-1)
        rho = mass * (jnp.maximum(h * h - r2, 0.0) ** 3).sum(1)      # poly6 density
        pr = k_eos * (rho - rho0)
        gw = jnp.maximum(h * h - r2, 0.0) ** 2
        coef = mass * (pr[:, None] / rho[:, None] ** 2 + pr[None, :] / rho[None, :] ** 2) * gw
        acc = 6.0 * (coef[..., None] * d).sum(1) - jnp.array([0.0, 9.8])
        v = v + dt * acc
        p = p + dt * v
        io_callback(frame_writer, jax.ShapeDtypeStruct((), jnp.int32), i, p, ordered=True)
        return p, v

    return jax.lax.fori_loop(0, n_steps, step, (pos, vel))


@case(["host-transfer", "other:pair-matrix-stored"],
      "Weakly compressible SPH (8192 particles, all pairs) on a TPU v5e for 100 steps in a "
      "fori_loop, with an ordered io_callback in every step that copies the particle "
      "positions to the host to write a frame: a device-to-host send and a host round trip "
      "(the loop waits for Python) in each step; return the positions every k steps from a "
      "scan (or write frames after the loop) instead. Second issue: the TPU compile stores "
      "the [8192, 8192] f32 squared distances (256 MiB, nearly all of the peak) in every "
      "step and reads them back in the density and force passes; computing the pairs in "
      "row blocks (lax.map over blocks of particles) keeps them on chip.",
      target="tpu")
def sph_io_callback_each_step_tpu() -> Program:
    return Program(_b_sph_run, (_s((8192, 2)), _s((8192, 2))), target="tpu-v5e")


def _b_svgd_host_median(x, data, n_iter=50):
    jax, jnp = _jax()
    import numpy as np

    def median_host(d2):
        return np.float32(np.median(np.asarray(d2)))

    def logp(xi):
        # Bayesian logistic regression log-posterior for one particle
        z = data[:, :-1] @ xi
        y = data[:, -1]
        return (y * z - jax.nn.softplus(z)).sum() - 0.5 * (xi * xi).sum()

    grad_logp = jax.vmap(jax.grad(logp))

    def body(i, x):
        sq = (x * x).sum(1)
        d2 = jnp.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0)
        med = jax.pure_callback(median_host, jax.ShapeDtypeStruct((), jnp.float32), d2)
        h = med / jnp.log(x.shape[0] + 1.0)
        k = jnp.exp(-d2 / h)
        g = grad_logp(x)
        repulsive = (2.0 / h) * (x * k.sum(1, keepdims=True) - k @ x)
        phi = (k @ g + repulsive) / x.shape[0]
        return x + 1e-2 * phi

    return jax.lax.fori_loop(0, n_iter, body, x)


@case(["host-transfer"],
      "SVGD for Bayesian logistic regression on CPU (2048 particles, 32 dims, 50 iterations "
      "in a fori_loop): the median-heuristic bandwidth is computed with np.median through a "
      "pure_callback in every iteration, shipping the [2048, 2048] f32 squared-distance "
      "matrix (16 MiB) to the host and sorting 4M values there; jnp.median (or a "
      "quantile on device) keeps it in the program.")
def svgd_median_bandwidth_callback() -> Program:
    return Program(_b_svgd_host_median, (_s((2048, 32)), _s((4096, 33))))


# -- small-kernels ------------------------------------------------------------------------

def _b_heston_cf(u, t, p):
    jax, jnp = _jax()
    kappa, theta, sigma, rho, v0 = p[0], p[1], p[2], p[3], p[4]
    r, s0 = 0.02, 100.0
    iu = 1j * u
    b = kappa - rho * sigma * iu
    d = jnp.sqrt(b * b + sigma * sigma * (iu + u * u))
    g = (b - d) / (b + d)
    e = jnp.exp(-d * t)
    c = r * iu * t + kappa * theta / sigma ** 2 * (
        (b - d) * t - 2.0 * jnp.log((1 - g * e) / (1 - g)))
    dd = (b - d) / sigma ** 2 * (1 - e) / (1 - g * e)
    return jnp.exp(c + dd * v0 + iu * jnp.log(s0))


def _b_heston_calib_loss_loop(p, strikes, mats, market):
    jax, jnp = _jax()
    u = jnp.linspace(1e-3, 100.0, 256, dtype=jnp.float32)
    du = u[1] - u[0]
    loss = 0.0
    for i in range(strikes.shape[0]):               # one maturity slice at a time
        t = mats[i]
        phi = _b_heston_cf(u - 0.5j, t, p)                          # Lewis (2001)
        k = jnp.log(strikes[i])[:, None]
        integrand = jnp.real(jnp.exp(-1j * u[None, :] * k) * phi[None, :]) / (u * u + 0.25)
        price = 100.0 - jnp.sqrt(100.0 * strikes[i]) / jnp.pi * integrand.sum(1) * du
        loss = loss + ((price - market[i]) ** 2).mean()
    return loss


@case(["small-kernels"],
      "Heston calibration loss on an H100 (Lewis formula, 256 quadrature nodes) written as a "
      "Python loop over 16 maturity slices of 64 strikes: each slice is its own two or "
      "three kernels on [64, 256] complex arrays (tens of KiB), so the program is ~40 tiny "
      "launches; one vectorised pass over [16, 64, 256] does the same work in a few "
      "kernels.", target="gpu")
def heston_calibration_per_maturity_loop_h100() -> Program:
    return Program(_b_heston_calib_loss_loop,
                   (_s((5,)), _s((16, 64)), _s((16,)), _s((16, 64))), target="h100")


def _b_tabular_plr_loop(x_num, freq, w, b):
    jax, jnp = _jax()
    # periodic-linear-ReLU embeddings of 32 numeric features, one feature at a time
    embs = []
    for j in range(x_num.shape[1]):
        z = 2 * jnp.pi * x_num[:, j:j + 1] * freq[j][None, :]           # [B, 16]
        per = jnp.concatenate([jnp.sin(z), jnp.cos(z)], -1)              # [B, 32]
        embs.append(jax.nn.relu(per @ w[j] + b[j]))                      # [B, 64]
    return jnp.stack(embs, 1)                                            # [B, 32, 64]


@case(["small-kernels"],
      "Periodic (PLR) numeric-feature embeddings for a tabular transformer on an H100, "
      "written as a Python loop over the 32 features: each feature is its own [512, 32] x "
      "[32, 64] matmul plus its sin/cos kernel, so ~60-100 tiny kernels that each move tens of "
      "KiB; one einsum over a feature axis ('bfk,fkd->bfd') does it in two or three.",
      target="gpu")
def tabular_plr_embedding_per_feature_loop_h100() -> Program:
    return Program(_b_tabular_plr_loop,
                   (_s((512, 32)), _s((32, 16)), _s((32, 32, 64)), _s((32, 64))),
                   target="h100")


# -- reduction-split ----------------------------------------------------------------------

def _b_pooled_corr(f1, f2):
    jax, jnp = _jax()
    b, h, w, c = f2.shape
    corr = jnp.einsum("bpc,bqc->bpq", f1, f2.reshape(b, h * w, c)) / jnp.sqrt(c)
    # coarse level of the correlation pyramid: 2x2 average pool over the second image
    corr = corr.reshape(b, h * w, h // 2, 2, w // 2, 2).mean((3, 5))
    return corr.reshape(b, h * w, (h // 2) * (w // 2))


@case(["reduction-split"],
      "Optical flow (RAFT-style) coarse correlation level on an H100: the full all-pairs "
      "volume [4, 4096, 4096] f32 (256 MiB) comes out of the matmul and a separate "
      "reduction then averages it over 2x2 windows of the second image; the correlation is "
      "linear in f2, so pooling f2 first (or contracting the window into the dot) gives the "
      "[4, 4096, 1024] result without the 256 MiB volume.", target="gpu")
def flow_corr_pool_after_matmul_h100() -> Program:
    return Program(_b_pooled_corr, (_s((4, 4096, 256)), _s((4, 64, 64, 256))),
                   target="h100")


def _b_fd_greeks(x_bumped, beta, stencil):
    jax, jnp = _jax()
    # regression pricer: price = phi(x) @ beta, on 4 bumped copies of the market state
    feats = jnp.tanh(x_bumped)                                     # [B, 4, 512]
    prices = jnp.einsum("bjf,fk->bjk", feats, beta)                # [B, 4, 256]
    return jnp.einsum("bjk,j->bk", prices, stencil)                # FD gamma stencil


@case(["reduction-split"],
      "Finite-difference greeks on a TPU v5e from a regression (Longstaff-Schwartz-style) "
      "pricer: prices of 4 bumped states come out of the matmul as [65536, 4, 256] f32 "
      "(256 MiB) and a separate reduction applies the 4-point stencil; the pricer is "
      "linear in the features, so applying the stencil to the features before the matmul "
      "(or contracting j inside it) avoids the 4x output.", target="tpu")
def fd_greeks_stencil_after_matmul_tpu() -> Program:
    return Program(_b_fd_greeks, (_s((65536, 4, 512)), _s((512, 256)), _s((4,))),
                   target="tpu-v5e")


# -- loop-state ---------------------------------------------------------------------------

def _b_baw_critical_price(k, t, sigma, r):
    # Barone-Adesi-Whaley: critical stock price S* of an American call, Newton iterations
    jax, jnp = _jax()
    from jax.scipy.stats import norm
    q = 0.01
    m = 2.0 * r / sigma ** 2
    n = 2.0 * (r - q) / sigma ** 2
    kk = 1.0 - jnp.exp(-r * t)
    q2 = 0.5 * (-(n - 1.0) + jnp.sqrt((n - 1.0) ** 2 + 4.0 * m / kk))
    sq = sigma * jnp.sqrt(t)

    def newton(_, s):
        d1 = (jnp.log(s / k) + (r - q + 0.5 * sigma ** 2) * t) / sq
        c = s * jnp.exp(-q * t) * norm.cdf(d1) - k * jnp.exp(-r * t) * norm.cdf(d1 - sq)
        lhs = s - k
        rhs = c + (1.0 - jnp.exp(-q * t) * norm.cdf(d1)) * s / q2
        b = jnp.exp(-q * t) * norm.cdf(d1) * (1 - 1 / q2) + (
            1 - jnp.exp(-q * t) * norm.pdf(d1) / sq) / q2
        return jnp.maximum(s - (lhs - rhs) / (1 - b), 1e-3)       # Newton on lhs = rhs

    return jax.lax.fori_loop(0, 6, newton, 1.5 * k)


@case(["loop-state"],
      "Barone-Adesi-Whaley critical prices for 8M American calls on an H100: 6 Newton steps "
      "in a fori_loop, each a separate elementwise kernel that reads the iterate and the "
      "four [8M] f32 contract arrays (160 MiB) from memory and writes the iterate back; "
      "unrolled (unroll=True) XLA fuses the six steps into one pass over the inputs.",
      target="gpu")
def baw_critical_price_newton_fori_h100() -> Program:
    n = 8 * 1024 * 1024
    return Program(_b_baw_critical_price, (_s((n,)), _s((n,)), _s((n,)), _s((n,))),
                   target="h100")


def _b_colebrook(re, rel_rough):
    jax, jnp = _jax()
    f0 = 0.25 / jnp.log10(rel_rough / 3.7 + 5.74 / re ** 0.9) ** 2   # Swamee-Jain start

    def fixed_point(_, f):
        return (-2.0 * jnp.log10(rel_rough / 3.7 + 2.51 / (re * jnp.sqrt(f)))) ** -2

    return jax.lax.fori_loop(0, 4, fixed_point, f0)


@case(["loop-state"],
      "Colebrook-White friction factors for a 16M-pipe network model on a TPU v5e: 4 "
      "fixed-point iterations in a fori_loop, each one kernel that reads the friction "
      "factor, the Reynolds numbers and the roughness ([16M] f32, 64 MiB each) from HBM "
      "and writes the factor back; unrolled, the four steps fuse into one pass.",
      target="tpu")
def colebrook_friction_fixed_point_fori_tpu() -> Program:
    n = 16 * 1024 * 1024
    return Program(_b_colebrook, (_s((n,)), _s((n,))), target="tpu-v5e")


# -- side-by-side -------------------------------------------------------------------------

def _b_soft_argmax_flow(f1, f2):
    jax, jnp = _jax()
    h = w = 64
    ys, xs = jnp.meshgrid(jnp.arange(h, dtype=jnp.float32), jnp.arange(w, dtype=jnp.float32),
                          indexing="ij")
    grid = jnp.stack([xs.ravel(), ys.ravel()], -1)                # [4096, 2]

    def one_pair(a, b):
        corr = a @ b.T / 16.0                                       # [4096, 4096]
        p = jax.nn.softmax(corr, axis=-1)
        return p @ grid - grid

    return jax.vmap(one_pair)(f1, f2)


@case(["side-by-side"],
      "Soft-argmax optical flow for 8 frame pairs of a clip on an H100, vmapped over the "
      "pairs: the 8 correlation volumes and their softmaxes (each [8, 4096, 4096] f32, "
      "512 MiB; 1 GiB of temporaries) are alive together although each pair is "
      "independent; lax.map over the pairs "
      "(or a loop of 2-4 pairs at a time) keeps one 64 MiB volume at a time and cuts the "
      "peak several-fold at the same speed (each pair's matmul fills the GPU).",
      target="gpu")
def flow_soft_argmax_pairs_vmapped_h100() -> Program:
    return Program(_b_soft_argmax_flow, (_s((8, 4096, 256)), _s((8, 4096, 256))),
                   target="h100")


def _b_anchor_matching(anchors, gt):
    jax, jnp = _jax()

    def match(a, g):
        lt = jnp.maximum(a[:, None, :2], g[None, :, :2])
        rb = jnp.minimum(a[:, None, 2:], g[None, :, 2:])
        inter = jnp.prod(jnp.clip(rb - lt, 0.0), -1)
        area_a = jnp.prod(a[:, 2:] - a[:, :2], -1)
        area_g = jnp.prod(g[:, 2:] - g[:, :2], -1)
        iou = inter / (area_a[:, None] + area_g[None, :] - inter)   # [anchors, gt]
        best_gt = jnp.argmax(iou, 1)
        best_iou = jnp.max(iou, 1)
        best_anchor = jnp.argmax(iou, 0)                             # each gt keeps one
        pos = (best_iou > 0.5).at[best_anchor].set(True)
        return best_gt, pos

    return jax.vmap(match, in_axes=(None, 0))(anchors, gt)


@case(["side-by-side"],
      "Anchor-to-ground-truth matching for a batch of 16 images on CPU (32768 anchors x 256 "
      "boxes), vmapped: the IoU matrix is reduced along both axes (best box per anchor, "
      "best anchor per box), so it is materialized, and vmap makes all 16 images' IoU "
      "matrices ([16, 32768, 256] f32, 512 MiB) alive together; lax.map over images holds "
      "one 32 MiB matrix.")
def anchor_matching_iou_vmapped() -> Program:
    return Program(_b_anchor_matching, (_s((32768, 4)), _s((16, 256, 4))))


# -- recompute ----------------------------------------------------------------------------

def _b_heston_pde(u0, n_steps=200):
    jax, jnp = _jax()
    ns, nv = u0.shape
    kappa, theta, sigma, rho, r, dt = 1.5, 0.04, 0.3, -0.7, 0.02, 1e-5
    s = jnp.linspace(0.0, 400.0, ns, dtype=jnp.float32)
    v = jnp.linspace(0.0, 1.0, nv, dtype=jnp.float32)
    ds, dv = s[1] - s[0], v[1] - v[0]
    # coefficient fields of the Heston PDE, built once on the full grid
    a_ss = 0.5 * v[None, :] * s[:, None] ** 2 / ds ** 2
    a_sv = rho * sigma * v[None, :] * s[:, None] / (4 * ds * dv)
    a_vv = 0.5 * sigma ** 2 * v[None, :] * jnp.ones((ns, 1)) / dv ** 2
    a_s = r * s[:, None] * jnp.ones((1, nv)) / (2 * ds)
    a_v = kappa * (theta - v[None, :]) * jnp.ones((ns, 1)) / (2 * dv)

    def step(_, u):
        up = jnp.pad(u, 1, mode="edge")
        c = up[1:-1, 1:-1]
        uss = up[2:, 1:-1] - 2 * c + up[:-2, 1:-1]
        uvv = up[1:-1, 2:] - 2 * c + up[1:-1, :-2]
        usv = up[2:, 2:] - up[2:, :-2] - up[:-2, 2:] + up[:-2, :-2]
        us = up[2:, 1:-1] - up[:-2, 1:-1]
        uv = up[1:-1, 2:] - up[1:-1, :-2]
        return u + dt * (a_ss * uss + a_sv * usv + a_vv * uvv + a_s * us + a_v * uv - r * u)

    return jax.lax.fori_loop(0, n_steps, step, u0)


@case(["recompute"],
      "Explicit finite differences for the Heston PDE on a [2048, 1024] grid on an H100 "
      "(200 steps in a fori_loop): the five coefficient fields (outer products of the "
      "linspace S and v grids, 8 MiB each, 40 MiB) are materialized before the loop and "
      "read from memory in every step, five times the traffic of the 8 MiB solution "
      "itself; built from the 1-D grids inside the step they fuse into the stencil kernel "
      "for free.", target="gpu")
def heston_pde_coefficient_fields_stored_h100() -> Program:
    return Program(_b_heston_pde, (_s((2048, 1024)),), target="h100")


def _b_gp_fit_regular_grid(y, log_params, n_iter=16):
    jax, jnp = _jax()
    n = y.shape[0]
    t = jnp.arange(n, dtype=jnp.float32) / n
    lag2 = (t[:, None] - t[None, :]) ** 2                    # [n, n], stored once

    def nll_grad(lp):
        def nll(lp):
            ell, sf = jnp.exp(lp[0]), jnp.exp(lp[1])
            k = sf * jnp.exp(-0.5 * lag2 / ell ** 2) + 0.1 * jnp.eye(n)
            alpha = k @ y                                    # kernel smoother (no solve)
            return 0.5 * ((y - alpha) ** 2).sum()
        return jax.grad(nll)(lp)

    def body(_, lp):
        return lp - 1e-4 * nll_grad(lp)

    return jax.lax.fori_loop(0, n_iter, body, log_params)


@case(["recompute"],
      "Fitting a squared-exponential kernel smoother's lengthscale on a regular time grid on "
      "CPU (4096 points, 16 gradient steps in a fori_loop): the squared-lag matrix "
      "[4096, 4096] f32 (64 MiB, an outer difference of an iota) is built before the loop, "
      "and with the loop-invariant pieces XLA hoists beside it (the scaled lags, the "
      "0.1*eye term) three iota-only [4096, 4096] arrays (192 MiB) are carried and read "
      "from memory in every iteration; computed from the iota where the kernel is formed "
      "they cost nothing and the buffers go away.")
def gp_lag_matrix_stored_outside_loop() -> Program:
    return Program(_b_gp_fit_regular_grid, (_s((4096,)), _s((2,))))


# -- large-constant -----------------------------------------------------------------------

def _b_qmc_asian_pricer():
    jax, jnp = _jax()
    import numpy as np
    rng = np.random.default_rng(7)
    # "quasi-random" normals precomputed once in NumPy and closed over: [131072, 64] f32
    z = rng.standard_normal((65536, 64)).astype(np.float32)

    def price(s0, sigma, strikes):
        dt = 1.0 / 64
        logs = jnp.log(s0) + jnp.cumsum((0.02 - 0.5 * sigma ** 2) * dt
                                        + sigma * jnp.sqrt(dt) * z, axis=1)
        avg = jnp.exp(logs).mean(1)                                   # arithmetic Asian
        return jnp.exp(-0.02) * jnp.maximum(avg[None, :] - strikes[:, None], 0.0).mean(1)

    return price


@case(["large-constant"],
      "Asian option Monte Carlo on an H100 whose [65536, 64] f32 normal draws (16 MiB) are "
      "a NumPy array closed over by the jitted pricer: XLA folds them into the executable "
      "as a 16 MiB constant (a large share of the peak, recompiled if they change); passed as an "
      "argument (or drawn on device) they are an ordinary buffer.", target="gpu")
def asian_mc_numpy_normals_closed_over_h100() -> Program:
    return Program(_b_qmc_asian_pricer(), (_s(()), _s(()), _s((256,))), target="h100")


def _b_admm_lasso_closed_over():
    jax, jnp = _jax()
    import numpy as np
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2048, 1024)).astype(np.float32)          # design matrix
    rho = 1.0
    m_inv = np.linalg.inv(a.T @ a + rho * np.eye(1024)).astype(np.float32)

    def solve(b, lam):
        atb = a.T @ b

        def body(_, s):
            x, z, u = s
            x = m_inv @ (atb + rho * (z - u))
            z = jnp.sign(x + u) * jnp.maximum(jnp.abs(x + u) - lam / rho, 0.0)
            return x, z, u + x - z

        zeros = jnp.zeros(1024, jnp.float32)
        return jax.lax.fori_loop(0, 100, body, (zeros, zeros, zeros))[1]

    return solve


@case(["large-constant"],
      "ADMM for the lasso on CPU with the [2048, 1024] f32 design matrix (8 MiB) and the "
      "precomputed [1024, 1024] inverse (4 MiB) as NumPy arrays closed over by the jitted "
      "solver: 12 MiB of constants (nearly all of the program's memory) folded into the "
      "executable (and a recompile for every "
      "new data set); they should be arguments.")
def admm_lasso_numpy_design_closed_over() -> Program:
    return Program(_b_admm_lasso_closed_over(), (_s((2048,)), _s(())))


# -- donation-unused ----------------------------------------------------------------------

def _b_heston_mc_price(z_s, z_v, strikes):
    jax, jnp = _jax()
    kappa, theta, xi, rho, r, dt = 2.0, 0.04, 0.5, -0.7, 0.02, 1.0 / 128

    def step(state, zs):
        logs, v = state
        z1, z2 = zs
        vp = jnp.maximum(v, 0.0)
        w = rho * z1 + jnp.sqrt(1 - rho ** 2) * z2
        logs = logs + (r - 0.5 * vp) * dt + jnp.sqrt(vp * dt) * z1
        v = v + kappa * (theta - vp) * dt + xi * jnp.sqrt(vp * dt) * w
        return (logs, v), None

    n = z_s.shape[1]
    init = (jnp.full((n,), jnp.log(100.0)), jnp.full((n,), 0.04))
    (logs, _), _ = jax.lax.scan(step, init, (z_s, z_v))
    st = jnp.exp(logs)
    return jnp.exp(-r) * jnp.maximum(st[None, :] - strikes[:, None], 0.0).mean(1)


@case(["donation-unused"],
      "Heston Monte Carlo (full-truncation Euler, 128 steps, 262144 paths) on an H100 that "
      "donates its two [128, 262144] f32 normal-draw arrays (128 MiB each): the only output "
      "is a [64] price vector, so no output can reuse them; the donation only destroys the "
      "caller's draws (JAX warns that the donated buffers were not usable).", target="gpu")
def heston_mc_donates_normals_h100() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_b_heston_mc_price, donate_argnums=(0, 1)),
                   (_s((128, 262144)), _s((128, 262144)), _s((64,))), target="h100")


def _b_tabular_inference(x_cat, x_num, table, w1, w2):
    jax, jnp = _jax()
    e = jnp.take(table, x_cat, axis=0).reshape(x_cat.shape[0], -1)     # [B, 26*32]
    h = jax.nn.relu(jnp.concatenate([e, x_num.astype(table.dtype)], -1) @ w1)
    return jax.nn.log_softmax((h @ w2).astype(jnp.float32), -1)


@case(["donation-unused"],
      "Tabular click model inference on CPU that donates its input batch: the int32 "
      "[16384, 26] categorical ids and the f32 [16384, 128] numeric features (1.6 + 8 "
      "MiB) cannot be reused by the only output, f32 [16384, 2] log-probabilities (128 "
      "KiB), so the donation buys nothing and the caller loses its batch.")
def tabular_inference_donates_batch() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_b_tabular_inference, donate_argnums=(0, 1)),
                   (_s((16384, 26), "int32"), _s((16384, 128)), _s((100000, 32)),
                    _s((26 * 32 + 128, 512)), _s((512, 2))))


# -- clean: written the way an expert writes them -----------------------------------------

def _b_s4d_layer(x, log_dt, a_re, a_im, c_re, c_im, d):
    jax, jnp = _jax()
    length = x.shape[-1]
    dt = jnp.exp(log_dt)[:, None]                                        # [H, 1]
    a = -jnp.exp(a_re) + 1j * a_im                                        # [H, N]
    c = (c_re + 1j * c_im) * (jnp.exp(dt * a) - 1.0) / a
    vander = jnp.exp((dt * a)[..., None] * jnp.arange(length))            # [H, N, L]
    k = 2.0 * jnp.real((c[..., None] * vander).sum(1))                   # fused: [H, L]
    kf = jnp.fft.rfft(k, n=2 * length)
    xf = jnp.fft.rfft(x, n=2 * length)                                    # L is minor
    y = jnp.fft.irfft(xf * kf, n=2 * length)[..., :length]
    return jax.nn.gelu(y + x * d[:, None])


@case([], "An S4D layer on an H100 as its authors write it: the convolution kernel is "
          "computed from the (trained) diagonal state-space parameters in the call, and the "
          "long convolution over [16, 512, 4096] runs as FFTs along the minor (sequence) "
          "axis with the skip term and GELU fused.", target="gpu")
def s4d_fft_convolution_layer_h100() -> Program:
    h, n = 512, 32
    return Program(_b_s4d_layer, (_s((16, h, 4096)), _s((h,)), _s((h, n)), _s((h, n)),
                                  _s((h, n)), _s((h, n)), _s((h,))), target="h100")


def _b_realnvp_loglik(x, w1, b1, w2, b2):
    jax, jnp = _jax()
    half = x.shape[1] // 2
    logdet = jnp.zeros(x.shape[0], jnp.float32)
    for i in range(w1.shape[0]):
        x1, x2 = x[:, :half], x[:, half:]
        h = jax.nn.relu(jnp.dot(x1.astype(jnp.bfloat16), w1[i],
                                preferred_element_type=jnp.float32) + b1[i])
        st = jnp.dot(h.astype(jnp.bfloat16), w2[i], preferred_element_type=jnp.float32) + b2[i]
        s, t = jnp.tanh(st[:, :half]), st[:, half:]
        x = jnp.concatenate([x2 * jnp.exp(s) + t, x1], axis=1)
        logdet = logdet + s.sum(1)
    logp = -0.5 * (x * x).sum(1) - 0.5 * x.shape[1] * jnp.log(2 * jnp.pi)
    return -(logp + logdet).mean()


@case([], "RealNVP negative log-likelihood on a TPU v5e: 4 affine coupling layers on "
          "[8192, 256] data, bf16 matmuls with f32 accumulation, halves of 128 (a whole "
          "lane tile), the coupling's elementwise work fused around the matmuls.",
      target="tpu")
def realnvp_coupling_nll_tpu() -> Program:
    return Program(_b_realnvp_loglik,
                   (_s((8192, 256)), _s((4, 128, 1024), "bfloat16"), _s((4, 1024)),
                    _s((4, 1024, 256), "bfloat16"), _s((4, 256))), target="tpu-v5e")


def _b_heston_mc_onchip(key, strikes, sharded=False, n_paths=1 << 20, n_steps=128):
    jax, jnp = _jax()
    from jax.sharding import PartitionSpec as P
    kappa, theta, xi, rho, r = 2.0, 0.04, 0.5, -0.7, 0.02
    dt = 1.0 / n_steps

    def step(state, i):
        logs, v = state
        z = jax.random.normal(jax.random.fold_in(key, i), (2, n_paths))
        if sharded:
            z = jax.lax.with_sharding_constraint(z, P(None, "data"))
        vp = jnp.maximum(v, 0.0)
        w = rho * z[0] + jnp.sqrt(1 - rho ** 2) * z[1]
        logs = logs + (r - 0.5 * vp) * dt + jnp.sqrt(vp * dt) * z[0]
        v = v + kappa * (theta - vp) * dt + xi * jnp.sqrt(vp * dt) * w
        return (logs, v), None

    init = (jnp.full((n_paths,), jnp.log(100.0)), jnp.full((n_paths,), 0.04))
    if sharded:
        init = jax.lax.with_sharding_constraint(init, P("data"))
    (logs, _), _ = jax.lax.scan(step, init, jnp.arange(n_steps))
    st = jnp.exp(logs)
    return jnp.exp(-r) * jnp.maximum(st[None, :] - strikes[:, None], 0.0).mean(1)


@case([], "Heston Monte Carlo on an H100 as an expert writes it: 1M paths, 128 "
          "full-truncation Euler steps in a lax.scan, the normals drawn on device inside "
          "each step (fold_in of the step), and the payoffs for 64 strikes reduced at the "
          "end; the loop carries only the two [1M] path states.", target="gpu")
def heston_mc_scan_draws_on_device_h100() -> Program:
    return Program(_b_heston_mc_onchip, (_s((2,), "uint32"), _s((64,))), target="h100")


@case([], "The same on-device Heston Monte Carlo on a TPU v5e 2x4 slice, paths sharded "
          "over the 8 chips (partitionable threefry: each chip draws only its paths); the "
          "only collective is the final mean over paths of a [63] payoff vector.",
      target="tpu")
def heston_mc_paths_sharded_tpu_2x4() -> Program:
    import functools
    return Program(functools.partial(_b_heston_mc_onchip, sharded=True),
                   (_s((2,), "uint32"), _s((63,))),
                   target="tpu-v5e:2x4", kwargs={"mesh": "data=8"})


def _b_consensus_admm(mesh):
    jax, jnp = _jax()
    from jax.sharding import PartitionSpec as P
    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    rho, lam, n_dev = 1.0, 0.1, 8

    def local(a, b, m_inv):
        a, b, m_inv = a[0], b[0], m_inv[0]
        atb = a.T @ b

        def body(_, s):
            x, z, u = s
            x = m_inv @ (atb + rho * (z - u))
            w = jax.lax.psum(x + u, "data") / n_dev
            z = jnp.sign(w) * jnp.maximum(jnp.abs(w) - lam / (rho * n_dev), 0.0)
            return x, z, u + x - z

        zero = jnp.zeros(a.shape[1], jnp.float32)
        x0 = jax.lax.pcast(zero, "data", to="varying")
        return jax.lax.fori_loop(0, 100, body, (x0, zero, x0))[1][None]

    return jax.jit(shard_map(local, mesh=mesh, in_specs=(P("data"), P("data"), P("data")),
                             out_specs=P("data")))


@case([], "Consensus ADMM for a lasso split by rows over 8 CPU devices (shard_map): each "
          "device solves its local x-update with its own precomputed inverse, and the "
          "consensus average is one psum of a [512] vector per iteration, which the "
          "algorithm needs; 100 iterations in a fori_loop.")
def consensus_admm_lasso_shard_map_cpu8() -> Program:
    mesh = _cpu_mesh()
    sh = _b_sh(mesh, "data")
    return Program(_b_consensus_admm(mesh),
                   (_s((8, 2048, 512), sharding=sh), _s((8, 2048), sharding=sh),
                    _s((8, 512, 512), sharding=sh)))


def _b_detection_head(feat, w_cls, w_box):
    jax, jnp = _jax()
    dn = ("NHWC", "OHWI", "NHWC")                     # weights stored as cuDNN wants them
    # bf16 convolutions (cuDNN accumulates in f32), f32 from the scores on
    cls = jax.lax.conv_general_dilated(feat, w_cls, (1, 1), "SAME", dimension_numbers=dn)
    box = jax.lax.conv_general_dilated(feat, w_box, (1, 1), "SAME", dimension_numbers=dn)
    b = feat.shape[0]
    scores = jax.nn.sigmoid(cls.reshape(b, -1, 80).astype(jnp.float32))  # [B, anchors, 80]
    best = scores.max(-1)
    label = scores.argmax(-1)
    top, idx = jax.lax.top_k(best, 100)                             # NMS-free: top anchors
    boxes = jnp.take_along_axis(box.reshape(b, -1, 4), idx[..., None], axis=1).astype(jnp.float32)
    return top, jnp.take_along_axis(label, idx, axis=1), boxes


@case([], "A single-stage detection head at inference on 8 H100s, data parallel: NHWC bf16 "
          "features [64, 64, 64, 256] sharded by batch, the class and box 3x3 convolutions "
          "in bf16 (cuDNN, f32 accumulation), sigmoid/max over classes fused, and one "
          "batched top_k per image; weights replicated, no collective but the gather of the "
          "[64, 100] results.", target="gpu")
def detection_head_data_parallel_h100x8() -> Program:
    return Program(_b_detection_head,
                   (_s((64, 64, 64, 256), "bfloat16"), _s((9 * 80, 3, 3, 256), "bfloat16"),
                    _s((36, 3, 3, 256), "bfloat16")),
                   target="h100x8", kwargs={"mesh": "data=8", "shard": {0: "data"}})


def _b_lbfgs_logreg(x, y, w0, n_iter=20, m=8):
    jax, jnp = _jax()

    def loss(w):
        z = x @ w
        return (jax.nn.softplus(z) - y * z).mean() + 1e-3 * (w * w).sum()

    grad = jax.grad(loss)

    def direction(g, s_hist, y_hist, k):
        rho = 1.0 / jnp.maximum((s_hist * y_hist).sum(1), 1e-10)
        valid = jnp.arange(m) < k

        def first(i, carry):
            q, alpha = carry
            j = m - 1 - i
            a = jnp.where(valid[j], rho[j] * (s_hist[j] @ q), 0.0)
            return q - a * y_hist[j], alpha.at[j].set(a)

        q, alpha = jax.lax.fori_loop(0, m, first, (g, jnp.zeros(m)))
        last = (k - 1) % m
        gamma = jnp.where(k > 0, (s_hist[last] @ y_hist[last]) /
                          jnp.maximum(y_hist[last] @ y_hist[last], 1e-10), 1.0)
        r = gamma * q

        def second(j, r):
            beta = rho[j] * (y_hist[j] @ r)
            return r + jnp.where(valid[j], alpha[j] - beta, 0.0) * s_hist[j]

        return -jax.lax.fori_loop(0, m, second, r)

    def body(k, state):
        w, g, s_hist, y_hist = state
        d = direction(g, s_hist, y_hist, jnp.minimum(k, m))
        w_new = w + 0.5 * d
        g_new = grad(w_new)
        s_hist = jnp.roll(s_hist, -1, 0).at[-1].set(w_new - w)
        y_hist = jnp.roll(y_hist, -1, 0).at[-1].set(g_new - g)
        return w_new, g_new, s_hist, y_hist

    d = w0.shape[0]
    state = (w0, grad(w0), jnp.zeros((m, d)), jnp.zeros((m, d)))
    return jax.lax.fori_loop(0, n_iter, body, state)[0]


@case([], "L-BFGS (history 8, fixed step) for L2-regularised logistic regression on CPU: "
          "X [16384, 512] f32 passed in, 20 iterations in a fori_loop, the two-loop "
          "recursion over stacked [8, 512] histories in small fori_loops; the time is the "
          "two passes over X per gradient, as it must be.")
def lbfgs_logreg_stacked_history() -> Program:
    return Program(_b_lbfgs_logreg, (_s((16384, 512)), _s((16384,)), _s((512,))))


def _b_cnf_rk4(z, eps, w1, b1, w2, b2, n_steps=16):
    jax, jnp = _jax()

    def f(t, z):
        h = jnp.tanh(z @ w1 + b1 + t)
        return h @ w2 + b2

    def aug(t, state):
        z, _ = state
        dz, jvp_eps = jax.jvp(lambda zz: f(t, zz), (z,), (eps,))
        return dz, -(jvp_eps * eps).sum(-1)                        # Hutchinson divergence

    def rk4(i, state):
        dt = 1.0 / n_steps
        t = i * dt
        k1 = aug(t, state)
        k2 = aug(t + dt / 2, jax.tree.map(lambda s, k: s + dt / 2 * k, state, k1))
        k3 = aug(t + dt / 2, jax.tree.map(lambda s, k: s + dt / 2 * k, state, k2))
        k4 = aug(t + dt, jax.tree.map(lambda s, k: s + dt * k, state, k3))
        return jax.tree.map(lambda s, a, b, c, d: s + dt / 6 * (a + 2 * b + 2 * c + d),
                            state, k1, k2, k3, k4)

    zt, dlogp = jax.lax.fori_loop(0, n_steps, rk4, (z, jnp.zeros(z.shape[0])))
    return (-0.5 * (zt * zt).sum(-1) + dlogp).mean()


@case([], "Continuous normalizing flow (FFJORD-style) log-likelihood on CPU: RK4 with 16 "
          "steps in a fori_loop over an MLP vector field on [4096, 16] samples, the "
          "divergence by one Hutchinson probe through jax.jvp; the loop carries only the "
          "samples and the log-density change, and the matmuls dominate.")
def ffjord_rk4_hutchinson_fori() -> Program:
    return Program(_b_cnf_rk4, (_s((4096, 16)), _s((4096, 16)), _s((16, 512)), _s((512,)),
                                _s((512, 16)), _s((16,))))


def _b_sph_forces(pos):
    jax, jnp = _jax()
    h, mass, k_eos, rho0 = 0.02, 1.0 / pos.shape[0], 2.0, 1.0

    def pair(p):
        d = p[:, None, :] - p[None, :, :]
        return d, (d * d).sum(-1)

    d, r2 = pair(pos)
    rho = mass * (jnp.maximum(h * h - r2, 0.0) ** 3).sum(1)               # poly6 density
    pr = k_eos * (rho - rho0)
    gw = jnp.maximum(h * h - r2, 0.0) ** 2                                # poly6 gradient / r
    coef = mass * (pr[:, None] / rho[:, None] ** 2 + pr[None, :] / rho[None, :] ** 2) * gw
    return 6.0 * (coef[..., None] * d).sum(1)


@case([], "SPH density and symmetric pressure forces on an H100 for 8192 particles by all pairs "
          "(fine at this size on a GPU): the pair distances are recomputed inside the "
          "density and the force reductions (fused), so no [8192, 8192] array is stored.",
      target="gpu")
def sph_all_pairs_forces_h100() -> Program:
    return Program(_b_sph_forces, (_s((8192, 2)),), target="h100")


def _b_mfvi_step(params, opt, x, y, key):
    jax, jnp = _jax()

    def neg_elbo(p):
        mu, log_s = p
        eps = jax.random.normal(key, (4,) + mu.shape)
        w = mu + jnp.exp(log_s) * eps                                   # 4 samples
        z = x @ w.T                                                     # [B, 4]
        ll = (y[:, None] * z - jax.nn.softplus(z)).mean(1).sum()
        kl = 0.5 * (jnp.exp(2 * log_s) + mu * mu - 1.0 - 2 * log_s).sum()
        return -(ll * (1_000_000 / x.shape[0]) - kl)

    loss, g = jax.value_and_grad(neg_elbo)(params)
    m, v, t = opt
    t = t + 1
    m = jax.tree.map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
    v = jax.tree.map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
    params = jax.tree.map(lambda p, a, b: p - 1e-3 * (a / (1 - 0.9 ** t)) /
                          (jnp.sqrt(b / (1 - 0.999 ** t)) + 1e-8), params, m, v)
    return params, (m, v, t), loss


@case([], "Mean-field variational inference for Bayesian logistic regression, data parallel "
          "over 8 CPU devices: the [65536, 1024] batch is sharded, the variational "
          "parameters and Adam state replicated and donated; XLA makes one all-reduce per "
          "step (the [4, 1024] per-sample weight gradients with the loss), 4 "
          "reparameterised weight samples per step.")
def mean_field_vi_data_parallel_cpu8() -> Program:
    jax, _ = _jax()
    mesh = _cpu_mesh()
    rep, row = _b_sh(mesh), _b_sh(mesh, "data")
    pv = (_s((1024,), sharding=rep), _s((1024,), sharding=rep))
    return Program(jax.jit(_b_mfvi_step, donate_argnums=(0, 1)),
                   (pv, (pv, pv, _s((), "int32", sharding=rep)),
                    _s((65536, 1024), sharding=row), _s((65536,), sharding=row),
                    _s((2,), "uint32", sharding=rep)))
