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

It labels ten kinds on two programs each: constant-rebuilt, onehot-gather, host-transfer,
small-kernels, reduction-split, loop-state, side-by-side, recompute, large-constant and
donation-unused; reduction-split is also on a third (``pointnet_per_cloud_loop_h100``,
written for small-kernels: XLA merged its per-cloud matmuls, and what stays split is the
per-cloud max-pool, so it carries both labels). Ten programs are written the way an expert
would write them (``expect=()``). 30 programs; the whole set compiled in ~100 s on this
loaded 2-core machine (the slowest, 14-16 s, are the Dice strips and the TPU sort). Domains: DFT-style basis grids, QAOA state vectors, recommender candidate
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
    # rho(r_g) = sum_{mu,nu} phi_g,mu P_mu,nu phi_g,nu
    return jnp.einsum("gm,mn,gn->g", phi, dm, phi)


@case(["constant-rebuilt"],
      "DFT-style density on a real-space grid: the Gaussian basis evaluated on a fixed "
      "16384-point grid at 512 fixed centres (a [16384, 512] f32 table, 32 MiB, 8.4M exps and "
      "a [16384, 512, 3] difference) depends on nothing the function is given, yet is rebuilt "
      "on every call before the matmul with the density matrix; building it is a "
      "sizeable share of the step (pass it in, or build it once outside jit).", target="gpu")
def dft_basis_on_grid_rebuilt_h100() -> Program:
    def density(dm):
        return _b_density_on_grid(_b_gaussian_basis_on_grid(), dm)
    return Program(density, (_s((512, 512)),), "h100")


@case((), "Clean twin: the basis table is an argument, built once by the caller; the step is "
      "one matmul and a fused product-reduce.", target="gpu")
def dft_basis_on_grid_argument_h100() -> Program:
    return Program(_b_density_on_grid, (_s((16384, 512)), _s((512, 512))), "h100")


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
      "passes (pass the diagonal in). The mixer's Python loop over qubits is 16 different "
      "reshapes per layer, not one body a scan could take, and is not labelled.")
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
    """Euclidean projection of each row of v onto the probability simplex (sort-based)."""
    _, jnp = _jax()
    n = v.shape[-1]
    u = -jnp.sort(-v, axis=-1)
    css = jnp.cumsum(u, axis=-1) - 1.0
    k = jnp.arange(1, n + 1, dtype=v.dtype)
    rho = jnp.sum((u - css / k) > 0, axis=-1, keepdims=True)
    theta = jnp.take_along_axis(css, rho - 1, axis=-1) / rho
    return jnp.maximum(v - theta, 0.0)


def _b_portfolio_pgd(cov, mu, risk_aversion, host):
    import numpy as np
    jax, jnp = _jax()

    def proj_numpy(v):
        v = np.asarray(v)
        u = -np.sort(-v, axis=-1)
        css = np.cumsum(u, axis=-1) - 1.0
        k = np.arange(1, v.shape[-1] + 1, dtype=v.dtype)
        rho = np.sum((u - css / k) > 0, axis=-1, keepdims=True)
        theta = np.take_along_axis(css, rho - 1, axis=-1) / rho
        return np.maximum(v - theta, 0.0).astype(np.float32)

    def body(_, w):                                   # w: [levels, assets]
        g = risk_aversion[:, None] * (w @ cov) - mu[None, :]
        v = w - 1e-2 * g
        if host:
            return jax.pure_callback(proj_numpy, jax.ShapeDtypeStruct(v.shape, v.dtype), v)
        return _b_simplex_projection(v)

    n, k = mu.shape[0], risk_aversion.shape[0]
    return jax.lax.fori_loop(0, 200, body, jnp.full((k, n), 1.0 / n))


@case(["host-transfer"],
      "Efficient frontier by projected gradient (4096 assets, 32 risk-aversion levels, 200 "
      "iterations): the simplex projection is a jax.pure_callback to NumPy inside the "
      "fori_loop, so every iteration copies the [32, 4096] weights to the host and back and "
      "synchronises (send/recv pairs in the while body); the iteration's device work is "
      "one read of the 64 MiB covariance (~80 us on a v5e), less than a host round trip "
      "with a Python callback (project on device with sort/cumsum).", target="tpu")
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


@case(["small-kernels", "reduction-split"],
      "PointNet classifier over a batch of 32 point clouds written as a Python loop over "
      "clouds. XLA merges the per-cloud matmuls (they share the weights) into 3 gemms over "
      "32768 points, but the per-cloud ReLU and max-pool stay split: a 32-output fusion "
      "writing 32 separate [1024, 1024] bf16 buffers and 32 max-reduction kernels of 2 MiB "
      "each (launch-bound), and the split raises XLA's peak from ~76 MB (batched) to ~135 MB; "
      "vmap the cloud function (one fused ReLU+max over [32, 1024, 1024]).", target="gpu")
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
      "one [8192, 32] x [32, 48] matmul and one fused reduction do the same (and read the "
      "covariates once, not 48 times). The 48-copy Python loop is the same issue: its fix "
      "is batching, not a scan.", target="gpu")
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


# --- loop-state -------------------------------------------------------------------------------

def _b_routing(runoff, uh):
    """Unit-hydrograph routing of daily runoff for 65536 catchments over 240 lag days."""
    jax, jnp = _jax()
    c = runoff.shape[1]

    def step(buf, r):
        buf = buf + uh[:, None] * r[None, :]                  # spread today's runoff over lags
        out = buf[0]
        buf = jnp.concatenate([buf[1:], jnp.zeros((1, c))])  # shift the lag buffer by a day
        return buf, out

    _, q = jax.lax.scan(step, jnp.zeros((uh.shape[0], c)), runoff)
    return jnp.mean(q, axis=1)


@case(["loop-state"],
      "Hydrological routing: the scan carries a [240, 65536] f32 lag buffer (60 MiB) and "
      "shifts it by one row with a concatenate every day, so each of the 365 steps rewrites "
      "the whole buffer into a new one (and the loop copies it back into its carry) besides "
      "the add; a ring buffer indexed by t % 240 (or an FFT convolution over time) keeps the "
      "state in place.")
def hydrology_routing_lag_buffer_shift() -> Program:
    return Program(_b_routing, (_s((365, 65536)), _s((240,))))


def _b_shallow_ice_rhs(h, bed):
    """Shallow-ice approximation: dH/dt = div(D grad s), D = c H^5 |grad s|^2."""
    jax, jnp = _jax()
    s = h + bed
    sx = (jnp.roll(s, -1, 1) - s)
    sy = (jnp.roll(s, -1, 0) - s)
    hm = 0.5 * (h + jnp.roll(h, -1, 1))
    d = 1e-3 * hm ** 5 * (sx ** 2 + sy ** 2)
    fx, fy = d * sx, d * sy
    return (fx - jnp.roll(fx, 1, 1)) + (fy - jnp.roll(fy, 1, 0))


@case(["loop-state"],
      "Shallow-ice model stepped with third-order Adams-Bashforth for 200 steps on a "
      "2048 x 2048 grid: the last three tendencies are carried as one [3, 2048, 2048] array "
      "(48 MiB) shifted with jnp.concatenate([hist[1:], f[None]]) every step, which rewrites "
      "all three fields (and the loop copies the new history into its carry), a large share "
      "of each step's memory traffic; keep the three tendencies in a ring indexed by step % 3 "
      "(or unroll the loop by 3 so the fields rotate by name).", target="gpu")
def shallow_ice_ab3_history_concat_h100() -> Program:
    jax, jnp = _jax()

    def f(h, bed):
        def body(_, carry):
            h, hist = carry
            hist = jnp.concatenate([hist[1:], _b_shallow_ice_rhs(h, bed)[None]], axis=0)
            h = h + 0.1 * (23.0 * hist[2] - 16.0 * hist[1] + 5.0 * hist[0]) / 12.0
            return jnp.maximum(h, 0.0), hist
        hist0 = jnp.zeros((3,) + h.shape)
        return jax.lax.fori_loop(0, 200, body, (h, hist0))[0]
    return Program(jax.jit(f, donate_argnums=0), (_s((2048, 2048)), _s((2048, 2048))), "h100")


# --- side-by-side -----------------------------------------------------------------------------

def _b_dense_crf(unary, feats, compat):
    """Five mean-field iterations of a dense CRF over one 64 x 64 image (4096 pixels)."""
    jax, jnp = _jax()
    sq = jnp.sum(feats * feats, axis=-1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * feats @ feats.T
    kern = jnp.exp(-0.5 * d2) * (1.0 - jnp.eye(feats.shape[0], dtype=feats.dtype))
    q = jax.nn.softmax(-unary, axis=-1)
    for _ in range(5):
        q = jax.nn.softmax(-unary - (kern @ q) @ compat, axis=-1)
    return q


@case(["side-by-side"],
      "Dense-CRF post-processing of a batch of 16 segmentations (64 x 64 pixels, 21 classes) "
      "with jax.vmap: the [4096, 4096] f32 pairwise kernel (64 MiB) of all 16 images is "
      "materialised side by side (~1 GiB of the peak) although each image's kernel is needed "
      "only for its own five mean-field steps; lax.map over images keeps one at a time.",
      target="gpu")
def dense_crf_meanfield_vmapped_h100() -> Program:
    jax, _ = _jax()

    def f(unary, feats, compat):
        return jax.vmap(_b_dense_crf, in_axes=(0, 0, None))(unary, feats, compat)
    return Program(f, (_s((16, 4096, 21)), _s((16, 4096, 5)), _s((21, 21))), "h100")


@case((), "Clean twin: lax.map over the 16 images, one 64 MiB pairwise kernel alive at a "
      "time; each image's work (a [4096, 4096] x [4096, 21] matmul per step) is large enough "
      "that the sequential map costs little.", target="gpu")
def dense_crf_meanfield_lax_map_h100() -> Program:
    jax, _ = _jax()

    def f(unary, feats, compat):
        return jax.lax.map(lambda a: _b_dense_crf(a[0], a[1], compat), (unary, feats))
    return Program(f, (_s((16, 4096, 21)), _s((16, 4096, 5)), _s((21, 21))), "h100")


@case(["side-by-side"],
      "DGCNN edge features: the k=20 nearest-neighbour graph of 16 point clouds of 4096 points "
      "built with jax.vmap, so all 16 [4096, 4096] f32 distance matrices (1 GiB) exist side "
      "by side before top_k; mapping over clouds (lax.map) needs 64 MiB at a time.")
def dgcnn_knn_graph_vmapped() -> Program:
    jax, jnp = _jax()

    def knn_edges(x, w):
        sq = jnp.sum(x * x, axis=-1)
        d2 = sq[:, None] + sq[None, :] - 2.0 * x @ x.T
        _, idx = jax.lax.top_k(-d2, 20)
        nbr = x[idx]                                               # [N, 20, 3]
        e = jnp.concatenate([jnp.broadcast_to(x[:, None], nbr.shape), nbr - x[:, None]], -1)
        return jnp.max(jax.nn.relu(e @ w), axis=1)                 # [N, 64]

    def f(clouds, w):
        return jax.vmap(knn_edges, in_axes=(0, None))(clouds, w)
    return Program(f, (_s((16, 4096, 3)), _s((6, 64))))


# --- recompute --------------------------------------------------------------------------------

def _b_laplace(u):
    jax, jnp = _jax()
    p = jnp.pad(u, 1)
    return 4.0 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]


@case(["recompute"],
      "Matrix-free conjugate gradient for a 2048 x 2048 Poisson problem (150 iterations): "
      "each iteration recomputes the residual b - A x with a second stencil application "
      "besides A p (a fusion reading b and x and writing r), although r can be carried and "
      "updated as r - alpha A p; the extra pass is ~15% or more of each iteration's memory "
      "traffic. (The optimized loop also copies the new p, 16 MiB, into its carry every "
      "iteration; that copy comes from XLA's multi-output fusion of the x and p updates, "
      "not from a choice in the code, and is not labelled.)", target="gpu")
def poisson_cg_recomputes_residual_h100() -> Program:
    jax, jnp = _jax()

    def f(b):
        def body(_, s):
            x, p = s
            r = b - _b_laplace(x)                      # recomputed from x every iteration
            ap = _b_laplace(p)
            rr = jnp.sum(r * r)
            alpha = rr / jnp.sum(p * ap)
            x = x + alpha * p
            r_new = r - alpha * ap
            p = r_new + (jnp.sum(r_new * r_new) / rr) * p
            return x, p
        return jax.lax.fori_loop(0, 150, body, (jnp.zeros_like(b), b))[0]
    return Program(f, (_s((2048, 2048)),), "h100")


@case(["recompute"],
      "MALA sampler for a Bayesian logistic propensity model (16384 units, 256 covariates, "
      "500 steps): every step evaluates the log-density and its gradient at the current point "
      "and at the proposal, although the current point's values were computed in the previous "
      "step (as its proposal or its own point); carrying (theta, logp, grad) halves the "
      "[16384, 256] matvec pairs per step.")
def mala_propensity_grad_recomputed() -> Program:
    jax, jnp = _jax()

    def logp(beta, x, t):
        z = x @ beta
        return jnp.sum(t * z - jax.nn.softplus(z)) - 0.5 * jnp.sum(beta * beta)

    def f(beta0, x, t, key):
        vg = jax.value_and_grad(logp)
        eps = 1e-3

        def body(i, carry):
            beta, acc = carry
            k1, k2 = jax.random.split(jax.random.fold_in(key, i))
            lp, g = vg(beta, x, t)
            prop = beta + eps * g + jnp.sqrt(2 * eps) * jax.random.normal(k1, beta.shape)
            lp_p, g_p = vg(prop, x, t)
            fwd = -jnp.sum((prop - beta - eps * g) ** 2) / (4 * eps)
            bwd = -jnp.sum((beta - prop - eps * g_p) ** 2) / (4 * eps)
            accept = jnp.log(jax.random.uniform(k2)) < lp_p - lp + bwd - fwd
            return jnp.where(accept, prop, beta), acc + accept
        return jax.lax.fori_loop(0, 500, body, (beta0, 0))
    return Program(f, (_s((256,)), _s((16384, 256)), _s((16384,)), _s((2,), "uint32")))


# --- large-constant ---------------------------------------------------------------------------

def _b_bem_operator(targets=2048, panels=1024):
    """2-D Laplace single-layer potential from panels on an ellipse to field points (NumPy)."""
    import numpy as np
    th = 2 * np.pi * (np.arange(panels) + 0.5) / panels
    src = np.stack([2.0 * np.cos(th), np.sin(th)], -1)
    rng = np.random.default_rng(1)
    fld = rng.uniform(-4.0, 4.0, (targets, 2)) + np.array([0.0, 3.5])
    d = np.linalg.norm(fld[:, None, :] - src[None, :, :], axis=-1)
    ds = 2 * np.pi * 1.5 / panels
    return (-np.log(d) * ds / (2 * np.pi)).astype(np.float32)         # [targets, panels]


@case(["large-constant"],
      "Boundary-element potential flow: the [2048, 1024] single-layer evaluation operator "
      "(8 MiB f32) is built once in NumPy (good) but closed over, so it is an 8 MiB constant "
      "in the program; the call itself is one matmul with 32 panel-strength vectors "
      "(128 KiB in, 256 KiB out), so the constant is most of the program's memory; pass it "
      "as an argument.")
def bem_potential_operator_closed_over() -> Program:
    _, jnp = _jax()
    op = _b_bem_operator()

    def potential(sigma):
        phi = op @ sigma
        return phi, jnp.max(jnp.abs(phi), axis=0)
    return Program(potential, (_s((1024, 32)),))


def _b_reverb_ir_spectrum(channels=8, n_fft=2 ** 19):
    """A synthetic room's impulse responses (decaying noise, 5.5 s at 48 kHz), as spectra."""
    import numpy as np
    rng = np.random.default_rng(0)
    t = np.arange(2 ** 18) / 48000.0
    ir = rng.standard_normal((channels, t.size)) * np.exp(-t / 0.9)
    return np.fft.rfft(ir, n=n_fft).astype(np.complex64)            # [8, 262145]


def _b_reverb(dry, ir_spec, wet=0.3, n_fft=2 ** 19):
    _, jnp = _jax()
    spec = jnp.fft.rfft(dry, n=n_fft)
    tail = jnp.fft.irfft(spec * ir_spec, n=n_fft)[:, :dry.shape[1]]
    return (1.0 - wet) * dry + wet * tail


@case(["large-constant"],
      "Convolution reverb of 8 channels of 5.5 s: the room's impulse-response spectra "
      "(complex64 [8, 262145], 16 MiB) are computed in NumPy and closed over, so they are a "
      "16 MiB constant in the program, a large share next to the ~64 MiB of audio and FFT "
      "buffers; pass them as an argument.", target="gpu")
def reverb_ir_spectrum_closed_over_h100() -> Program:
    spec = _b_reverb_ir_spectrum()

    def f(dry):
        return _b_reverb(dry, spec)
    return Program(f, (_s((8, 2 ** 18)),), "h100")


@case((), "Clean twin: the impulse-response spectra are an argument; two FFTs, a product "
      "and the mix.", target="gpu")
def reverb_ir_spectrum_argument_h100() -> Program:
    return Program(_b_reverb, (_s((8, 2 ** 18)), _s((8, 2 ** 18 + 1), "complex64")), "h100")


# --- donation-unused --------------------------------------------------------------------------

def _b_ctc_greedy(logits, blank=0):
    """CTC greedy decoding: best class per frame, collapse repeats, drop blanks, left-pack."""
    jax, jnp = _jax()

    def one(row):
        best = jnp.argmax(row, axis=-1).astype(jnp.int32)                      # [T]
        prev = jnp.concatenate([jnp.full((1,), -1, jnp.int32), best[:-1]])
        keep = (best != prev) & (best != blank)
        pos = jnp.where(keep, jnp.cumsum(keep) - 1, best.shape[0])
        out = jnp.full(best.shape, blank, jnp.int32).at[pos].set(best, mode="drop")
        return out, jnp.sum(keep)
    return jax.vmap(one)(logits)


@case(["donation-unused"],
      "OCR CTC greedy decoding on a TPU: the [128, 1024, 256] f32 logits (128 MiB) are "
      "donated, but the outputs are int32 [128, 1024] ids and [128] lengths, so no output can "
      "reuse the donated buffer: the donation frees nothing and only invalidates the "
      "caller's logits (drop donate_argnums).", target="tpu")
def ctc_greedy_decode_donates_logits_tpu() -> Program:
    jax, _ = _jax()
    return Program(jax.jit(_b_ctc_greedy, donate_argnums=0), (_s((128, 1024, 256)),),
                   "tpu-v5e")


@case((), "Clean: the same CTC greedy decoder, batch-sharded over a TPU v5e 2x4 slice, no "
      "donation; argmax, a cumsum and a scatter per row, no communication.", target="tpu")
def ctc_greedy_decode_sharded_tpu_2x4() -> Program:
    return Program(_b_ctc_greedy, (_s((128, 1024, 256)),), "tpu-v5e:2x4",
                   {"shard": {0: "data,None,None"}})


@case(["donation-unused"],
      "Inverse-propensity-weighted effect estimate on an H100: the covariates "
      "[1048576, 64] f32 (256 MiB) are donated, but the outputs are the [1048576] weights and "
      "two scalars, none of the covariates' shape, so XLA cannot use the donated buffer; the "
      "donation saves nothing and destroys the caller's data.", target="gpu")
def ipw_effect_donates_covariates_h100() -> Program:
    jax, jnp = _jax()

    def f(x, treated, y, coef):
        e = jnp.clip(jax.nn.sigmoid(x @ coef), 0.01, 0.99)
        w = treated / e + (1.0 - treated) / (1.0 - e)
        ate = jnp.sum(treated * y / e) / jnp.sum(treated / e) \
            - jnp.sum((1.0 - treated) * y / (1.0 - e)) / jnp.sum((1.0 - treated) / (1.0 - e))
        return w, ate, jnp.max(w)
    return Program(jax.jit(f, donate_argnums=0),
                   (_s((1048576, 64)), _s((1048576,)), _s((1048576,)), _s((64,))), "h100")


# --- clean data-parallel training on a CPU mesh ----------------------------------------------

def _b_pointseg_loss(params, pts, labels):
    jax, jnp = _jax()
    (w1, b1), (w2, b2), (w3, b3) = params
    b, n, _ = pts.shape
    h = jax.nn.relu(pts.reshape(b * n, 3) @ w1 + b1)                  # [B*N, 128]
    g = jnp.max(jax.nn.relu(h @ w2 + b2).reshape(b, n, -1), axis=1)   # [B, 512] global feature
    logits = h @ w3[:128] + jnp.repeat(g @ w3[128:], n, axis=0) + b3  # [B*N, 16]
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels.reshape(-1, 1), axis=-1))


@case((), "Clean: PointNet part-segmentation training step, data parallel over an 8-device "
      "CPU mesh with jit and shardings (batch split, parameters replicated): one gradient "
      "all-reduce per parameter (XLA may combine them), SGD with momentum, parameters and "
      "momentum donated and updated in place.")
def pointseg_data_parallel_train_cpu8() -> Program:
    jax, jnp = _jax()
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _cpu_mesh()
    rep, bat = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))

    def step(params, mom, pts, labels):
        loss, grads = jax.value_and_grad(_b_pointseg_loss)(params, pts, labels)
        mom = jax.tree.map(lambda m, g: 0.9 * m + g, mom, grads)
        params = jax.tree.map(lambda p, m: p - 1e-2 * m, params, mom)
        return params, mom, loss

    dims = [(3, 128), (128, 512), (640, 16)]
    params = [(_s(d, sharding=rep), _s((d[1],), sharding=rep)) for d in dims]
    return Program(jax.jit(step, donate_argnums=(0, 1)),
                   (params, params, _s((64, 2048, 3), sharding=bat),
                    _s((64, 2048), "int32", sharding=bat)))
