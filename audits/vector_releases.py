"""White-box audits of the vector, matrix and Wishart releases (the noise of the private
contextual policies), drawn from the compiled samplers the policies use
(:mod:`dpledger.mechanisms.matrix`), not from their scalar normal forms.

**The pair.**  The statistic is 0 on D and a *change* δ on D′ — in the layout the policies
draw (a vector; a symmetric matrix as its upper triangle row by row, one block per model):

* ``gaussian_vector`` (σ, Δ₂, d): δ = Δ₂·(1, …, 1)/√d, every entry moved, ‖δ‖₂ = Δ₂;
* ``gaussian_sym_matrix`` (σ, Δ_F, p, blocks): a record moved, Δ = v vᵀ − w wᵀ with
  ‖v‖ = ‖w‖ = a: with one block v ⊥ w (v = a(cos π/8, sin π/8, 0, …), w = a(−sin π/8, cos π/8,
  0, …): diagonal and off-diagonal entries both move), ‖Δ‖_F = √2·a²; with two or more blocks
  v vᵀ leaves block 0 and w wᵀ joins block 1 (the disjoint models' worst case), ‖Δ‖_F = √2·a²
  too; a = (Δ_F/√2)^½ so that ‖Δ‖_F = Δ_F.  With p = 1 and one block, Δ = Δ_F;
* ``laplace_vector`` (b, Δ₁, d): a record moved between two models: −Δ₁/2 on entry 0 and +Δ₁/2
  on entry 1 (d ≥ 2; Δ₁ on the only entry when d = 1), ‖δ‖₁ = Δ₁;
* ``wishart`` (p, k, L, δ): the Gram matrix of a record's row v (‖v‖ = L, v = L(1, …, 1)/√p)
  against the zero record: 0 on D, v vᵀ on D′.

**The score** is the log-likelihood ratio of the output vector (Neyman–Pearson), in the layout
drawn: Gaussian entries e of variance s_e² (σ², and 2σ² on a symmetric matrix's diagonal)
give Σ_e (y_e·δ_e − δ_e²/2)/s_e², whose law is N(±μ²/2, μ²) with μ² = Σ_e δ_e²/s_e² —
computed from the change itself (:func:`change_mu`) and checked in the tests against the
release's μ, a brute-force check of the release's formula; Laplace entries give
Σ_e (|y_e| − |y_e − δ_e|)/b.  For the Wishart release the likelihood ratio of Y is a monotone
function of q = 1/(vᵀY⁻¹v) (:func:`wishart_pair_epsilon`), which is the score.

**The Wishart release's limit** (its ``limit_reason``).  W ~ W_p(L²I, k): for a fixed v,
vᵀ(L²I)⁻¹v / vᵀW⁻¹v = 1/(vᵀW⁻¹v) ~ χ²_ν with ν = k − p + 1 (Muirhead 1982, Theorem 3.2.12),
and by Sherman–Morrison 1/(vᵀ(W + v vᵀ)⁻¹v) = 1 + 1/(vᵀW⁻¹v).  So q is χ²_ν on D and 1 + χ²_ν
on D′, exactly, and the pair's privacy profile has a closed form in χ² tails: the log-likelihood
ratio of D′ to D is (ν/2 − 1)·ln(1 − 1/q) + ½ for q > 1 (at most ½), and −∞ for q ≤ 1.  The
pair's exact ε at the release's δ is therefore computable; Sheffet 2015's ε (constant 28) is
far above it, so no audit of this pair can approach the certificate, and the audit reports
that ceiling as a computed ``limit_reason``.  The certificate is an (ε, δ) statement: the
audit's bound is the KOV bound at that δ (:mod:`dpledger.audits.stats`).
"""
from __future__ import annotations

import math

import numpy as np
from dpledger._jit import njit

from dpledger.errors import DpledgerError
from dpledger.mechanisms.matrix import block_draw

VECTOR_KINDS = ("laplace_vector", "gaussian_vector", "gaussian_sym_matrix")
ROTATION = math.pi / 8          # the angle of the one-block symmetric-matrix change
BATCH_FLOATS = 1 << 20          # noise entries drawn at once (8 MB)


def layout(release) -> tuple[int, int, int]:
    """(blocks, entries per block, p) of what ``release`` draws (p: the matrix size, else 0)."""
    from dpledger.mechanisms.matrix import packed_size
    if release.kind == "gaussian_sym_matrix":
        return int(release.blocks), packed_size(int(release.dim)), int(release.dim)
    if release.kind == "wishart":
        return 1, packed_size(int(release.dim)), int(release.dim)
    return 1, int(release.dim), 0


def noise_spec_of(release) -> tuple:
    """The compiled noise law of one block of ``release`` (:func:`~dpledger.mechanisms.matrix.
    noise_spec`), as the private policies build it."""
    from dpledger.mechanisms import matrix as mx
    blocks, E, p = layout(release)
    if release.kind == "gaussian_vector":
        return mx.noise_spec(mx.GAUSS_VEC, entries=E, sigma=float(release.sigma))
    if release.kind == "gaussian_sym_matrix":
        return mx.noise_spec(mx.GAUSS_SYM, entries=E, sigma=float(release.sigma), p=p)
    if release.kind == "laplace_vector":
        return mx.noise_spec(mx.LAPLACE, entries=E, scales=np.full(E, float(release.scale)))
    if release.kind == "wishart":
        return mx.noise_spec(mx.WISHART, entries=E, sigma=float(release.bound) ** 2,
                             k=int(release.k), p=p)
    raise DpledgerError(f"no vector sampler for release kind {release.kind!r}")


def _sym_packed(M: np.ndarray) -> np.ndarray:
    """The upper triangle of the symmetric matrix M, row by row (the drawn layout)."""
    p = M.shape[0]
    return np.concatenate([M[i, i:] for i in range(p)])


def worst_change(release) -> np.ndarray:
    """The change δ of the pair (module docstring), in the layout drawn (blocks × entries)."""
    blocks, E, p = layout(release)
    if release.kind == "gaussian_vector":
        return np.full(E, float(release.sensitivity) / math.sqrt(E))
    if release.kind == "laplace_vector":
        out = np.zeros(E)
        s = float(release.sensitivity)
        if E == 1:
            out[0] = s
        else:
            out[0], out[1] = -s / 2.0, s / 2.0
        return out
    if release.kind == "wishart":
        v = np.full(p, float(release.bound) / math.sqrt(p))
        return _sym_packed(np.outer(v, v))
    s = float(release.sensitivity)
    out = np.zeros(blocks * E)
    if p == 1 and blocks == 1:
        out[0] = s
        return out
    a = math.sqrt(s / math.sqrt(2.0))
    c, sn = math.cos(ROTATION), math.sin(ROTATION)
    v = np.zeros(p)
    w = np.zeros(p)
    if p == 1:
        v[0] = w[0] = a
    else:
        v[0], v[1] = a * c, a * sn
        w[0], w[1] = -a * sn, a * c
    if blocks == 1:
        out[:E] = _sym_packed(np.outer(v, v) - np.outer(w, w))
    else:
        out[:E] = -_sym_packed(np.outer(v, v))
        out[E:2 * E] = _sym_packed(np.outer(w, w))
    return out


def entry_variances(release) -> np.ndarray:
    """Variance of each drawn Gaussian entry: σ², and 2σ² on a symmetric matrix's diagonal."""
    from dpledger.mechanisms.matrix import diagonal_mask
    blocks, E, p = layout(release)
    var = np.full(blocks * E, float(release.sigma) ** 2)
    if release.kind == "gaussian_sym_matrix":
        var[np.tile(diagonal_mask(p), blocks)] *= 2.0
    return var


def change_mu(release, change: np.ndarray | None = None) -> float:
    """μ of the Gaussian pair 0 vs ``change`` (default :func:`worst_change`), computed entry by
    entry: √(Σ_e δ_e²/s_e²) — the brute-force value the release's μ formula must match."""
    d = worst_change(release) if change is None else np.asarray(change, dtype=np.float64)
    return float(math.sqrt(np.sum(d * d / entry_variances(release))))


@njit(cache=True)
def _noise_rows(rng, spec, n, blocks, E, out, A):
    """out[i] ← one draw of every block, for n trials (block by block, as a tree node)."""
    for i in range(n):
        row = out[i]
        for b in range(blocks):
            block_draw(rng, spec, row, b * E, A)


def noise_rows(release, rng: np.random.Generator, n: int) -> np.ndarray:
    """n draws (rows) of ``release``'s noise from the compiled sampler the policies use."""
    blocks, E, p = layout(release)
    out = np.empty((int(n), blocks * E))
    _noise_rows(rng, noise_spec_of(release), int(n), blocks, E, out,
                np.zeros((max(p, 1), max(p, 1))))
    return out


def _llr_rows(release, y: np.ndarray, change: np.ndarray) -> np.ndarray:
    if release.kind == "laplace_vector":
        nz = np.flatnonzero(change)
        mag = np.abs(change[nz])
        sy = y[:, nz] * np.sign(change[nz])
        # |y| − |y − δ| as a clip (cf. audits.mechanisms._release_llr): exact atoms ±|δ|/b
        return np.sum(np.clip(2.0 * sy - mag, -mag, mag), axis=1) / float(release.scale)
    var = entry_variances(release)
    return y @ (change / var) - 0.5 * float(np.sum(change * change / var))


def wishart_q(release, y: np.ndarray) -> np.ndarray:
    """q = 1/(vᵀY⁻¹v) of each row of packed outputs y (module docstring)."""
    _, E, p = layout(release)
    iu = np.triu_indices(p)
    Y = np.zeros((y.shape[0], p, p))
    Y[:, iu[0], iu[1]] = y
    Y[:, iu[1], iu[0]] = y
    v = np.full(p, float(release.bound) / math.sqrt(p))
    sol = np.linalg.solve(Y, np.broadcast_to(v, (y.shape[0], p))[..., None])[..., 0]
    return 1.0 / (sol @ v)


def vector_scores(release, side: int, rng: np.random.Generator, n: int) -> np.ndarray:
    """n scores of ``release`` on side 0 (clean 0) or 1 (clean = :func:`worst_change`): the
    log-likelihood ratio, or q for a Wishart release; drawn in batches of at most
    :data:`BATCH_FLOATS` noise entries (one stream: the batching does not change the draws)."""
    change = worst_change(release)
    D = change.size
    out = np.empty(int(n))
    step = max(1, BATCH_FLOATS // D)
    for i in range(0, int(n), step):
        m = min(step, int(n) - i)
        y = noise_rows(release, rng, m)
        if side:
            y += change
        out[i:i + m] = (wishart_q(release, y) if release.kind == "wishart"
                        else _llr_rows(release, y, change))
    return out


def draw_bytes(release) -> tuple[int, int]:
    """(bytes per trial, fixed bytes) the draws of one release hold: its scores, and at most
    :data:`BATCH_FLOATS` noise entries with their shifted copy and products."""
    blocks, E, p = layout(release)
    fixed = 4 * 8 * min(BATCH_FLOATS, max(1, BATCH_FLOATS // (blocks * E)) * blocks * E)
    if release.kind == "wishart":
        fixed += 8 * max(1, BATCH_FLOATS // E) * (2 * p * p + 2 * p)
    return 4 * 8, fixed


# ---- the Wishart pair's exact privacy profile ---------------------------------------------------

def _delta_of(eps: float, nu: int) -> float:
    """δ(ε) of the pair q ~ χ²_ν (D) vs 1 + χ²_ν (D′), the larger of the two directions.

    D′ against D: the likelihood ratio (ν/2 − 1)·ln(1 − 1/q) + ½ increases in q and is at most
    ½, so δ = P_D′(q > q*) − e^ε·P_D(q > q*) at the q* where it equals ε (0 for ε ≥ ½).
    D against D′: δ = P_D(q < q**) − e^ε·P_D′(q < q**) at the q** where the ratio is −ε (the
    region q ≤ 1, impossible on D′, included)."""
    from scipy.stats import chi2
    h = nu / 2.0 - 1.0
    best = 0.0
    if eps < 0.5:
        qs = 1.0 / -math.expm1((eps - 0.5) / h)
        best = float(chi2.sf(qs - 1.0, nu) - math.exp(eps) * chi2.sf(qs, nu))
    qss = 1.0 / -math.expm1(-(eps + 0.5) / h)
    rev = float(chi2.cdf(qss, nu) - math.exp(eps) * chi2.cdf(qss - 1.0, nu))
    return max(best, rev, 0.0)


def wishart_pair_epsilon(release, delta: float | None = None) -> float:
    """The exact ε at ``delta`` (default: the release's δ) of the Wishart pair of the module
    docstring — 0 vs v vᵀ, ‖v‖ = L — from χ² tails with ν = k − p + 1 (:func:`_delta_of`),
    by bisection, then 1e-9 relative above the bracket."""
    from dpledger.accounting.numerics import solve_increasing
    d = float(release.delta if delta is None else delta)
    nu = int(release.k) - int(release.dim) + 1
    if _delta_of(0.0, nu) <= d:
        return 0.0
    hi = 1.0
    while _delta_of(hi, nu) > d:
        hi *= 2.0
    # the largest ε with δ(ε) ≥ d (δ decreasing), then a step above it
    return solve_increasing(lambda e: -_delta_of(e, nu), -d, 0.0, hi) * (1.0 + 1e-9)


def wishart_limit_reason(release) -> str:
    """The computed ceiling of a Wishart audit's ratio (module docstring)."""
    exact = wishart_pair_epsilon(release)
    nu = int(release.k) - int(release.dim) + 1
    return (f"the pair's exact epsilon at delta = {release.delta:g} is {exact:.4g}, "
            f"{exact / release.epsilon:.3f} of the theorem's {release.epsilon:.4g}. "
            f"On this pair (a record's Gram v v^T against the zero record, |v| = L) the "
            f"likelihood ratio is a function of q = 1/(v^T Y^-1 v), which is chi2 with "
            f"nu = k - p + 1 = {nu} degrees of freedom on D and 1 + chi2_nu on D' (Muirhead "
            f"1982, Thm 3.2.12; Sherman-Morrison), so its privacy profile is exact in chi2 "
            f"tails; Sheffet 2015's constant 28 puts the certificate far above it")


__all__ = ["VECTOR_KINDS", "worst_change", "change_mu", "entry_variances", "noise_rows",
           "vector_scores", "wishart_q", "wishart_pair_epsilon", "wishart_limit_reason",
           "layout", "noise_spec_of", "draw_bytes"]
