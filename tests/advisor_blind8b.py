"""Second half of an eighth blind evaluation set for hloscope's advisor (issue 28, item 5).

Who wrote it: a helper session (``blind8b``) that never read the advisor's rules, its
documentation (docs/advisor.md, docs/lint.md), its tests (tests/test_advisor*.py,
tests/test_checked*.py), the other labelled sets (tests/advisor_programs.py,
tests/advisor_heldout*.py), the checked-savings code (src/hloscope/_checked/),
benchmarks/advisor_*.py, /work/runs, other worktrees, or the README's advisor and lint
sections, and never ran the advisor (``hloscope lint``, ``hloscope report``, ``hloscope.lint``,
``Report.advice``, findings or groups) on these programs; every compile it made passed
``check=False``. Of the seven earlier blind sets it read the module docstring of set 7, the
definitions of ``KINDS``, ``BlindCase``, ``Program``, ``_s``, ``_jax``, ``_cpu_mesh`` and the
``case`` decorator (sets 1 and 7), the (empty) ``REVISED``/``TUNED`` declarations of set 7 and
the names of all sets' cases (to write different programs). It also read issue 28,
/work/wt/PREAMBLE.md, a grep of docs/targets.md, the signature of ``hloscope.inspect`` and
the ``grep -n blind`` lines of tests/test_advisor_blind_set.py.

What it saw that it should not have: printing tests/advisor_blind.py lines 148-170 (for
``_jax``, ``_s``, ``_cpu_mesh``) also printed the first four lines of set 1's ``_adam``
(its hyper-parameters and the first moment's update); printing tests/advisor_blind7.py lines
154-156 (meant to find ``_sh``) showed the last line of the ``why`` of set 7's
``seismic_wave_step_not_donated_h100`` (donating ``p_prev`` lets the step write in place, peak
~1 GiB -> ~768 MiB) and its ``target="gpu"``. No ``TUNED`` or ``REVISED`` entry, no rule,
advisor code or advisor output was seen.

It labels ten kinds, each on exactly two programs: constant-rebuilt, onehot-gather,
host-transfer, small-kernels, reduction-split, loop-state, side-by-side, recompute,
large-constant and donation-unused; ten programs are written the way an expert would write
them (``expect=()``). Domains: DFT-style basis grids, QAOA state vectors, recommender candidate
generation, k-mer embeddings, hydrology bucket and routing models, portfolio optimisation,
PointNet and DGCNN point clouds, propensity weighting, segmentation Dice losses, Ewald
real-space sums, shallow-ice models, dense-CRF post-processing, kriging, finite elements,
convolution reverb, CTC greedy decoding, on CPU (8-device mesh), H100 and TPU v5e (2x4).
Labels were written and committed BEFORE any advisor run. Only the optimized HLO
(``Report.hlo_after``) and XLA's memory figures (``Report.memory_analysis``) were looked at, to
confirm that each labelled pattern is really in the compiled program and to size it, and that
each clean program is clean.

Vocabulary and the meaning of a label: as in tests/advisor_blind.py (``KINDS``, plus
``other:<short-name>`` for a real issue outside it). A label means the pattern is present in
the compiled program and fixing it saves at least about 2-3% of the program's peak memory
or run time on its device; ``expect=()`` means an expert would flag nothing.

Each case builds a `Program` (the first set's type); compile it with
``hloscope.inspect(p.fn, *p.args, target=p.target, **p.kwargs)``. CPU programs with a mesh need
8 host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``, set by
tests/conftest.py). Module-level helpers carry a ``_b_`` prefix (this half is joined to
tests/advisor_blind8.py).

Labels are never edited after the advisor has run: a later correction goes into `REVISED`
(case name -> (new labels, reason)), empty when committed.
"""

from __future__ import annotations

from collections.abc import Callable

from advisor_blind import KINDS, BlindCase, Program, _cpu_mesh, _jax, _s

__all__ = ["CASES", "KINDS", "REVISED", "BlindCase", "Program"]

CASES: list[BlindCase] = []

# Corrections after the advisor ran: name -> (labels, reason). Empty when committed.
REVISED: dict[str, tuple[tuple[str, ...], str]] = {}

# Rules changed because of a program of this set: name -> what changed. Empty when committed.
TUNED: dict[str, str] = {}


def case(expect: tuple[str, ...] | list[str], why: str, target: str | None = None):
    def register(build: Callable[[], Program]) -> Callable[[], Program]:
        CASES.append(BlindCase(build.__name__, build, tuple(expect), why, target))
        return build
    return register


# --- constant-rebuilt ---------------------------------------------------------------------

def _b_gaussian_basis_on_grid():
    """Gaussian basis functions (512 centres on a fixed lattice) on a fixed 16384-point grid."""
    jax, jnp = _jax()
    g = jnp.arange(16384, dtype=jnp.float32)
    grid = jnp.stack([g % 32, (g // 32) % 32, g // 1024], axis=-1) * 0.25        # [G, 3]
    c = jnp.arange(512, dtype=jnp.float32)
    centres = jnp.stack([c % 8, (c // 8) % 8, c // 64], axis=-1) * 1.0 + 0.5      # [M, 3]
    d2 = jnp.sum((grid[:, None, :] - centres[None, :, :]) ** 2, axis=-1)
    return jnp.exp(-1.3 * d2)                                                     # [G, M]


def _b_density_on_grid(phi, dm):
    jax, jnp = _jax()
    # rho(r_g) = sum_{mu,nu} phi_g,mu P_mu,nu phi_g,nu  for a batch of density matrices
    return jnp.einsum("gm,bmn,gn->bg", phi, dm, phi)


@case(["constant-rebuilt"],
      "DFT-style density on a real-space grid: the Gaussian basis evaluated on a fixed "
      "16384-point grid at 512 fixed centres (a [16384, 512] f32 table, 32 MiB, 8.4M exps and "
      "a [16384, 512, 3] difference) depends on nothing the function is given, yet is rebuilt "
      "on every call before the two matmuls with the density matrices; building it is a "
      "sizeable share of the step (pass it in, or build it once outside jit).", target="gpu")
def dft_basis_on_grid_rebuilt_h100() -> Program:
    def density(dm):
        return _b_density_on_grid(_b_gaussian_basis_on_grid(), dm)
    return Program(density, (_s((2, 512, 512)),), "h100")


@case((), "Clean twin: the basis table is an argument, built once by the caller; the step is "
      "two matmuls and a fused product-reduce.", target="gpu")
def dft_basis_on_grid_argument_h100() -> Program:
    return Program(_b_density_on_grid, (_s((16384, 512)), _s((2, 512, 512))), "h100")


def _b_qaoa_expectation(gammas, betas, n=16):
    """Max-cut QAOA on a fixed 16-node graph with 3-nearest-neighbour ring edges (48 edges)."""
    jax, jnp = _jax()
    idx = jnp.arange(2 ** n, dtype=jnp.int32)
    bits = [(idx >> q) & 1 for q in range(n)]
    edges = [(i, (i + k) % n) for i in range(n) for k in (1, 2, 3)]
    cost = sum((bits[i] ^ bits[j]).astype(jnp.float32) for i, j in edges)     # [2^n] diagonal
    state = jnp.full((2 ** n,), 2.0 ** (-n / 2), jnp.complex64)
    for gamma, beta in zip(gammas, betas):
        state = state * jnp.exp(-1j * gamma * cost)
        c, s = jnp.cos(beta), -1j * jnp.sin(beta)
        for q in range(n):
            v = state.reshape(2 ** (n - q - 1), 2, 2 ** q)
            a, b = v[:, 0], v[:, 1]
            state = jnp.stack([c * a + s * b, s * a + c * b], axis=1).reshape(-1)
    return jnp.sum(jnp.abs(state) ** 2 * cost)


@case(["constant-rebuilt"],
      "QAOA max-cut energy: the cost Hamiltonian's diagonal over all 2^16 basis states "
      "(48 edges, ~48 shift/and/xor/convert/add steps per state) is the same for every "
      "call but rebuilt from iota each time, and used by each of the 3 phase layers and the "
      "final expectation; it is a large share of the work next to the mixer's 48 small "
      "passes (pass the diagonal in).")
def qaoa_cost_diagonal_rebuilt() -> Program:
    def energy(params):
        return _b_qaoa_expectation([params[i] for i in range(3)],
                                   [params[3 + i] for i in range(3)])
    return Program(energy, (_s((6,)),))


# --- onehot-gather --------------------------------------------------------------------------

def _b_candidate_gen(hist, table, w, onehot):
    jax, jnp = _jax()
    if onehot:
        emb = jax.nn.one_hot(hist, table.shape[0], dtype=table.dtype) @ table   # [B, L, D]
    else:
        emb = jnp.take(table, hist, axis=0)
    user = jnp.mean(emb, axis=1) @ w                                           # [B, D]
    scores = user @ table.T                                                    # [B, V]
    return jax.lax.top_k(scores, 128)


@case(["onehot-gather"],
      "Recommender candidate generation: the user's 64-item history is embedded with "
      "one_hot(hist, 32768) @ table: a [256, 64, 32768] bf16 one-hot (1 GiB) and a matmul "
      "that reads it, where a gather of 16384 rows of 256 B does it; the one-hot dominates "
      "peak and time (jnp.take(table, hist, axis=0)).", target="gpu")
def candidate_gen_history_onehot_h100() -> Program:
    def f(hist, table, w):
        return _b_candidate_gen(hist, table, w, True)
    return Program(f, (_s((256, 64), "int32"), _s((32768, 128), "bfloat16"),
                       _s((128, 128), "bfloat16")), "h100")


@case((), "Clean twin: history embedded with a gather; the scoring matmul against the whole "
      "catalogue and top_k are the real work.", target="gpu")
def candidate_gen_history_take_h100() -> Program:
    def f(hist, table, w):
        return _b_candidate_gen(hist, table, w, False)
    return Program(f, (_s((256, 64), "int32"), _s((32768, 128), "bfloat16"),
                       _s((128, 128), "bfloat16")), "h100")


def _b_kmer_classifier(seq, emb, w_conv, w_out, onehot, k=6):
    jax, jnp = _jax()
    # seq: [B, L] in {0,1,2,3}; k-mer index by a rolling base-4 code
    L = seq.shape[1] - k + 1
    code = sum(seq[:, i:i + L] * (4 ** (k - 1 - i)) for i in range(k))        # [B, L]
    if onehot:
        x = jax.nn.one_hot(code, 4 ** k, dtype=emb.dtype) @ emb               # [B, L, D]
    else:
        x = jnp.take(emb, code, axis=0)
    h = jax.lax.conv_general_dilated(x, w_conv, (1,), "SAME",
                                     dimension_numbers=("NWC", "WIO", "NWC"))
    h = jnp.max(jax.nn.relu(h), axis=1)
    return h @ w_out


@case(["onehot-gather"],
      "Genomics k-mer classifier: each 6-mer (4096 possible) is embedded by "
      "one_hot(code, 4096) @ emb: a [16, 4091, 4096] f32 one-hot (1 GiB) and a 17 GFLOP "
      "matmul where a row gather of 64 floats per position does it; it dominates the peak and "
      "the time next to the small conv (jnp.take(emb, code, axis=0)).")
def kmer_embedding_onehot() -> Program:
    def f(seq, emb, w_conv, w_out):
        return _b_kmer_classifier(seq, emb, w_conv, w_out, True)
    return Program(f, (_s((16, 4096), "int32"), _s((4096, 64)), _s((9, 64, 64)),
                       _s((64, 2))))


@case((), "Clean twin: the k-mer embedding is a gather; a conv and a max-pool follow.")
def kmer_embedding_take() -> Program:
    def f(seq, emb, w_conv, w_out):
        return _b_kmer_classifier(seq, emb, w_conv, w_out, False)
    return Program(f, (_s((16, 4096), "int32"), _s((4096, 64)), _s((9, 64, 64)),
                       _s((64, 2))))


# --- host-transfer ----------------------------------------------------------------------------

def _b_bucket_model(precip, temp, params, host_pet):
    """A daily bucket (soil-store) model for 65536 catchments over one year."""
    import numpy as np
    jax, jnp = _jax()

    def pet_numpy(t):  # Hargreaves-style potential evapotranspiration, in NumPy
        return (0.0023 * 2.5 * (np.asarray(t) + 17.8)).clip(0.0).astype(np.float32)

    def step(carry, xs):
        store, runoff = carry
        p, t = xs
        if host_pet:
            pet = jax.pure_callback(pet_numpy, jax.ShapeDtypeStruct(t.shape, t.dtype), t)
        else:
            pet = jnp.maximum(0.0023 * 2.5 * (t + 17.8), 0.0)
        store = store + p - jnp.minimum(pet, store)
        q = params[0] * jnp.maximum(store - params[1], 0.0)
        return (store - q, runoff + q), None

    c = precip.shape[1]
    (store, runoff), _ = jax.lax.scan(step, (jnp.zeros(c), jnp.zeros(c)), (precip, temp))
    return store, runoff


@case(["host-transfer"],
      "Hydrology bucket model: a jax.pure_callback to a NumPy evapotranspiration formula "
      "inside the scan body, so each of the 365 daily steps sends 256 KiB of temperatures to "
      "the host, waits, and copies 256 KiB back; the step's own work is a few fused "
      "elementwise ops on the same 65536 values, so the callback dominates (write the formula "
      "in jnp).")
def hydrology_bucket_pet_callback() -> Program:
    def f(precip, temp, params):
        return _b_bucket_model(precip, temp, params, True)
    return Program(f, (_s((365, 65536)), _s((365, 65536)), _s((2,))))


def _b_simplex_projection(v):
    """Euclidean projection of each column of v onto the probability simplex (sort-based)."""
    jax, jnp = _jax()
    n = v.shape[0]
    u = -jnp.sort(-v, axis=0)
    css = jnp.cumsum(u, axis=0) - 1.0
    k = jnp.arange(1, n + 1, dtype=v.dtype)[:, None]
    rho = jnp.sum((u - css / k) > 0, axis=0)
    theta = jnp.take_along_axis(css, (rho - 1)[None, :], axis=0) / rho
    return jnp.maximum(v - theta, 0.0)


def _b_portfolio_pgd(cov, mu, risk_aversion, host):
    import numpy as np
    jax, jnp = _jax()

    def proj_numpy(v):
        v = np.asarray(v)
        u = -np.sort(-v, axis=0)
        css = np.cumsum(u, axis=0) - 1.0
        k = np.arange(1, v.shape[0] + 1, dtype=v.dtype)[:, None]
        rho = np.sum((u - css / k) > 0, axis=0)
        theta = np.take_along_axis(css, (rho - 1)[None, :], axis=0) / rho
        return np.maximum(v - theta, 0.0).astype(np.float32)

    def body(_, w):
        g = risk_aversion[None, :] * (cov @ w) - mu[:, None]
        v = w - 1e-2 * g
        if host:
            return jax.pure_callback(proj_numpy, jax.ShapeDtypeStruct(v.shape, v.dtype), v)
        return _b_simplex_projection(v)

    n, k = mu.shape[0], risk_aversion.shape[0]
    return jax.lax.fori_loop(0, 200, body, jnp.full((n, k), 1.0 / n))


@case(["host-transfer"],
      "Efficient frontier by projected gradient (4096 assets, 32 risk-aversion levels, 200 "
      "iterations): the simplex projection is a jax.pure_callback to NumPy inside the "
      "fori_loop, so every iteration copies the [4096, 32] weights to the host and back and "
      "synchronises (send/recv pairs in the while body); the iteration's device work is one 64 MiB"
      " matvec-like matmul (~0.1 ms on a v5e), "
      "far less than the round trip (project on device with sort/cumsum).", target="tpu")
def portfolio_pgd_host_projection_tpu() -> Program:
    def f(cov, mu, ra):
        return _b_portfolio_pgd(cov, mu, ra, True)
    return Program(f, (_s((4096, 4096)), _s((4096,)), _s((32,))), "tpu-v5e")


@case((), "Clean twin: the same projected gradient with the simplex projection on device "
      "(sort, cumsum, a gather of the threshold); one matmul and a few fusions per iteration.",
      target="tpu")
def portfolio_pgd_device_projection_tpu() -> Program:
    def f(cov, mu, ra):
        return _b_portfolio_pgd(cov, mu, ra, False)
    return Program(f, (_s((4096, 4096)), _s((4096,)), _s((32,))), "tpu-v5e")


# --- small-kernels ----------------------------------------------------------------------------

def _b_pointnet_cloud(x, ws):
    jax, jnp = _jax()
    h = x
    for w, b in ws:
        h = jax.nn.relu(h @ w + b)
    return jnp.max(h, axis=-2)


def _b_pointnet_params():
    dims = [(3, 64), (64, 128), (128, 1024)]
    return [(_s(d, "bfloat16"), _s((d[1],), "bfloat16")) for d in dims]


@case(["small-kernels"],
      "PointNet classifier over a batch of 32 point clouds written as a Python loop over "
      "clouds: 32 x 3 small matmuls ([1024, 128] x [128, 1024] at most, a few us each) plus "
      "their bias/ReLU and max-pool fusions, ~200 launch-bound kernels each moving well under "
      "a MiB, where the batched form is 3 matmuls over [32768, *] (vmap the cloud function).",
      target="gpu")
def pointnet_per_cloud_loop_h100() -> Program:
    _, jnp = _jax()

    def f(clouds, ws, w_head):
        feats = jnp.stack([_b_pointnet_cloud(clouds[i], ws) for i in range(clouds.shape[0])])
        return feats @ w_head
    return Program(f, (_s((32, 1024, 3), "bfloat16"), _b_pointnet_params(),
                       _s((1024, 40), "bfloat16")), "h100")


@case((), "Clean twin: the PointNet layers applied to all 32 clouds at once (3 matmuls over "
      "32768 points, bias/ReLU fused, one max-pool).", target="gpu")
def pointnet_batched_clouds_h100() -> Program:
    def f(clouds, ws, w_head):
        return _b_pointnet_cloud(clouds, ws) @ w_head
    return Program(f, (_s((32, 1024, 3), "bfloat16"), _b_pointnet_params(),
                       _s((1024, 40), "bfloat16")), "h100")


@case(["small-kernels"],
      "Propensity-weighted treatment effect with 48 bootstrap propensity models, written as a "
      "Python loop over the bootstrap replicates: each is an [8192, 32] x [32] matvec, a "
      "sigmoid and a weighted mean (~3 kernels of ~1 MiB or less each, ~150 in all), where "
      "one [8192, 32] x [32, 48] matmul and one fused reduction do the same.", target="gpu")
def ipw_bootstrap_loop_h100() -> Program:
    jax, jnp = _jax()

    def f(x, treated, y, coef, counts):
        ates = []
        for b in range(coef.shape[0]):
            e = jnp.clip(jax.nn.sigmoid(x @ coef[b]), 0.01, 0.99)
            contrib = treated * y / e - (1.0 - treated) * y / (1.0 - e)
            ates.append(jnp.sum(counts[b] * contrib) / jnp.sum(counts[b]))
        return jnp.stack(ates)
    return Program(f, (_s((8192, 32)), _s((8192,)), _s((8192,)), _s((48, 32)),
                       _s((48, 8192))), "h100")


# --- reduction-split --------------------------------------------------------------------------

@case(["reduction-split"],
      "Multi-class soft Dice loss for segmentation, summed over 16 row strips of the "
      "[8, 512, 512, 8] logits in a Python loop (to 'save memory'): the three per-class sums "
      "become ~100 small reduction kernels of ~4 MiB or less each plus the adds of the partial sums, "
      "where one fused reduction over the 64 MiB reads it once.", target="gpu")
def dice_loss_row_strips_h100() -> Program:
    jax, jnp = _jax()

    def f(logits, labels):
        inter = psum = tsum = 0.0
        for i in range(16):
            p = jax.nn.softmax(logits[:, 32 * i:32 * (i + 1)], axis=-1)
            t = jax.nn.one_hot(labels[:, 32 * i:32 * (i + 1)], 8)
            inter = inter + jnp.sum(p * t, axis=(0, 1, 2))
            psum = psum + jnp.sum(p, axis=(0, 1, 2))
            tsum = tsum + jnp.sum(t, axis=(0, 1, 2))
        return 1.0 - jnp.mean((2.0 * inter + 1.0) / (psum + tsum + 1.0))
    return Program(f, (_s((8, 512, 512, 8)), _s((8, 512, 512), "int32")), "h100")


def _b_ewald_real_rows(pi, qi, pos, q, box=40.0, alpha=0.35):
    jax, jnp = _jax()
    d = pi[:, None, :] - pos[None, :, :]
    d = d - box * jnp.round(d / box)
    r2 = jnp.sum(d * d, axis=-1)
    r = jnp.sqrt(jnp.where(r2 > 0, r2, 1.0))
    e = qi[:, None] * q[None, :] * jax.scipy.special.erfc(alpha * r) / r
    return 0.5 * jnp.sum(jnp.where(r2 > 0, e, 0.0))


@case(["reduction-split"],
      "Ewald real-space energy of 8192 charges summed over row blocks of 32 atoms in a "
      "fori_loop: 256 iterations, each a [32, 8192] pair block reduced to a scalar (a few "
      "small kernels plus the loop's predicate round trip each), where one fused reduction "
      "over all 67M pairs (or blocks of ~1024 rows) does it; launch/loop bound.", target="gpu")
def ewald_real_space_fori_blocks_h100() -> Program:
    jax, jnp = _jax()

    def f(pos, q):
        def body(i, acc):
            pi = jax.lax.dynamic_slice_in_dim(pos, i * 32, 32)
            qi = jax.lax.dynamic_slice_in_dim(q, i * 32, 32)
            return acc + _b_ewald_real_rows(pi, qi, pos, q)
        return jax.lax.fori_loop(0, pos.shape[0] // 32, body, jnp.float32(0))
    return Program(f, (_s((8192, 3)), _s((8192,))), "h100")


@case((), "Clean twin: the Ewald real-space sum in one fused pass over all pairs (the "
      "[8192, 8192] pair terms are never stored).", target="gpu")
def ewald_real_space_one_pass_h100() -> Program:
    def f(pos, q):
        return _b_ewald_real_rows(pos, q, pos, q)
    return Program(f, (_s((8192, 3)), _s((8192,))), "h100")
