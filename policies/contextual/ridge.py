"""Ridge-regression models of the linear contextual policies, as plain arrays and compiled
functions (one rule, callable from the whole-run loop and later from a step form).

A *model* m is the ridge estimate of one statistic stream (one per arm for disjoint models, one
for a shared θ).  Its state is three arrays indexed by m:

* ``chol[m]`` (d, d): the lower Cholesky factor L of A_m = λ·I + Σ x xᵀ (Li et al. 2010,
  Algorithm 1, line 8: A_a ← I_d and A_a ← A_a + x xᵀ; λ = 1 there);
* ``bvec[m]`` (d,): b_m = Σ r·x;
* ``theta[m]`` (d,): θ̂_m = A_m⁻¹ b_m, recomputed after every update by two triangular solves.

One observation is a rank-1 Cholesky update of L (O(d²), numerically stable; no d×d solve per
round), so a round of a policy with K arms costs O(K·d²) for the selection and O(d²) per
delivered observation, whatever the round t: a run of T rounds costs O(T·K·d²) time and
O(M·d²) memory for the models.  The width √(xᵀA⁻¹x) = ‖L⁻¹x‖ is one forward substitution
(d²/2 multiply-adds), cheaper than xᵀ(A⁻¹x) with an explicit inverse (d²).
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.policies.rules import argmax_first, tie_break


def new_models(n_models: int, d: int, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chol, bvec, theta) of ``n_models`` fresh ridge models: A = λ·I, b = 0, θ̂ = 0."""
    chol = np.zeros((n_models, d, d))
    root = np.sqrt(lam)
    for m in range(n_models):
        np.fill_diagonal(chol[m], root)
    return chol, np.zeros((n_models, d)), np.zeros((n_models, d))


@njit(cache=True, inline="always")
def forward_solve(L, x, out):
    """out = L⁻¹x for lower-triangular L (forward substitution); returns ‖out‖²."""
    d = x.size
    sq = 0.0
    for i in range(d):
        s = x[i]
        for j in range(i):
            s -= L[i, j] * out[j]
        w = s / L[i, i]
        out[i] = w
        sq += w * w
    return sq


@njit(cache=True, inline="always")
def backward_solve(L, y, out):
    """out = L⁻ᵀy for lower-triangular L (back substitution on Lᵀ)."""
    d = y.size
    for i in range(d - 1, -1, -1):
        s = y[i]
        for j in range(i + 1, d):
            s -= L[j, i] * out[j]
        out[i] = s / L[i, i]


@njit(cache=True)
def cholesky_rank1_update(L, x, work):
    """L ← the Cholesky factor of LLᵀ + x xᵀ: the classical rank-1 update (Gill, Golub, Murray
    & Saunders 1974, "Methods for modifying matrix factorizations", Math. Comp. 28), O(d²),
    column by column r = √(L_kk² + w_k²), c = r/L_kk, s = w_k/L_kk; ``work`` (d,) is scratch."""
    d = x.size
    for i in range(d):
        work[i] = x[i]
    for k in range(d):
        lkk = L[k, k]
        r = np.sqrt(lkk * lkk + work[k] * work[k])
        c = r / lkk
        s = work[k] / lkk
        L[k, k] = r
        for i in range(k + 1, d):
            L[i, k] = (L[i, k] + s * work[i]) / c
            work[i] = c * work[i] - s * L[i, k]


@njit(cache=True)
def ridge_observe(chol, bvec, theta, m, x, r, work, work2):
    """Model m takes the observation (x, r): A_m += x xᵀ (rank-1 Cholesky update), b_m += r·x,
    θ̂_m = A_m⁻¹ b_m (Li et al. 2010, Algorithm 1, lines 12–13)."""
    L = chol[m]
    cholesky_rank1_update(L, x, work)
    b = bvec[m]
    for i in range(x.size):
        b[i] += r * x[i]
    forward_solve(L, b, work2)
    backward_solve(L, work2, theta[m])


@njit(cache=True, inline="always")
def dot(a, b):
    """Σ a_i·b_i in index order."""
    s = 0.0
    for i in range(a.size):
        s += a[i] * b[i]
    return s


@njit(cache=True, inline="always")
def ucb_score(L, th, x, width, work):
    """θ̂ᵀx + width·√(xᵀA⁻¹x) for the model with Cholesky factor L of A and estimate θ̂."""
    q = forward_solve(L, x, work)
    return dot(th, x) + width * np.sqrt(q)


@njit(cache=True)
def linucb_scores(chol, theta, ctx, shared, alpha, values, work):
    """values[a] = θ̂_mᵀx + α·√(xᵀA_m⁻¹x) for every arm a (Li et al. 2010, Algorithm 1, line 9),
    with m = a and x = ctx[0] for disjoint models (one context per round), m = 0 and x =
    ctx[a] for a shared θ (one context per arm; Chu et al. 2011)."""
    K = values.size
    for a in range(K):
        m = 0 if shared else a
        values[a] = ucb_score(chol[m], theta[m], ctx[a] if shared else ctx[0], alpha, work)


@njit(cache=True)
def linucb_scores_widths(chol, theta, ctx, shared, widths, values, work):
    """:func:`linucb_scores` with a width per model (``widths[m]``): the private policies whose
    confidence width depends on the model's own noisy Gram matrix (Shariff & Sheffet 2018)."""
    K = values.size
    for a in range(K):
        m = 0 if shared else a
        values[a] = ucb_score(chol[m], theta[m], ctx[a] if shared else ctx[0], widths[m], work)


@njit(cache=True)
def lints_scores(chol, theta, ctx, shared, v, values, work, work2, rng):
    """Linear Thompson sampling scores (Agrawal & Goyal 2013, Algorithm 1): θ̃ ~ N(θ̂, v²·A⁻¹)
    and values[a] = θ̃ᵀx_a.

    Shared θ: z ~ N(0, I_d) (d standard normals in coordinate order), θ̃ = θ̂ + v·L⁻ᵀz, whose
    covariance is v²·L⁻ᵀL⁻¹ = v²·A⁻¹.  Disjoint models: the arms' posteriors are independent, so
    the scores θ̃_aᵀx are independent N(θ̂_aᵀx, v²·xᵀA_a⁻¹x); one standard normal per arm in arm
    order gives that joint law exactly (the same law as drawing each θ̃_a in full) at O(d²) per
    arm instead of O(d³)."""
    K = values.size
    if shared:
        d = theta.shape[1]
        for i in range(d):
            work[i] = rng.standard_normal()
        backward_solve(chol[0], work, work2)
        for i in range(d):
            work2[i] = theta[0, i] + v * work2[i]
        for a in range(K):
            values[a] = dot(work2, ctx[a])
    else:
        x = ctx[0]
        for a in range(K):
            q = forward_solve(chol[a], x, work)
            values[a] = dot(theta[a], x) + v * np.sqrt(q) * rng.standard_normal()


@njit(cache=True, inline="always")
def pick(values, rng):
    """The argmax of ``values``, ties broken uniformly at random (one ``integers`` draw, only on
    a tie) — the K-armed policies' rule (policies/rules.py)."""
    a, tie = argmax_first(values)
    if tie:
        a = tie_break(values, a, rng)
    return a
