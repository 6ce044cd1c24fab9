"""G-optimal designs over a finite arm set (issue 32: the phased-elimination policies; shared —
any policy that needs a design imports it from here).

A design π is a probability vector over the arms a ∈ A ⊂ R^d; V(π) = Σ_a π(a)·a aᵀ and
g(π) = max_a ‖a‖²_{V(π)⁻¹}.  Kiefer & Wolfowitz (1960): min_π g(π) = dim span(A), attained by
the D-optimal design (Lattimore & Szepesvári 2020, Theorem 21.1).  :func:`g_optimal_design`
runs Frank–Wolfe on log det V(π) (Todd 2016, the Fedorov–Wynn step with its exact line
search) from the uniform design until g(π) ≤ (1 + tol)·r, r the rank, and returns the g it
reached: callers use that g (public, computed from the arm set alone), so an unconverged
design is a sound design of a stated quality, never a silent approximation.

Arms that do not span R^d: the design lives in span(A) — coordinates in an orthonormal basis
of it (the arms' SVD, singular values above 1e-10 of the largest), where V(π) is invertible.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpledger.errors import DpledgerError

DESIGN_TOL = 0.05          # g(π) ≤ (1 + tol)·rank: L&S's phases need g ≤ 2d; ours are tighter
DESIGN_MAX_ITER = 100_000
PRUNE = 1e-9               # weights below this are dropped (and the design renormalised)


@dataclass(frozen=True, eq=False)
class Design:
    """A design over the rows of an arm matrix: ``weights`` (one per row, summing to 1),
    ``g`` = max_a ‖a‖²_{V(π)⁻¹} it reached, ``rank`` of the arm set, ``basis`` (d, rank) the
    orthonormal basis of span(A) the coordinates ``coords`` (rows, rank) are in, and the
    Frank–Wolfe ``iterations``."""

    weights: np.ndarray
    g: float
    rank: int
    basis: np.ndarray
    coords: np.ndarray
    iterations: int

    @property
    def support(self) -> np.ndarray:
        """Row indices with positive weight, in row order."""
        return np.flatnonzero(self.weights > 0)


def span_coordinates(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(basis, coords): an orthonormal basis (d, r) of the rows' span and the rows in it."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1:
        raise DpledgerError(f"a design needs an (arms, d) matrix, got shape {X.shape}")
    _, s, vt = np.linalg.svd(X, full_matrices=False)
    if s.size == 0 or not s[0] > 0:
        raise DpledgerError("a design needs at least one non-zero arm")
    r = int(np.sum(s > 1e-10 * s[0]))
    basis = vt[:r].T
    return basis, X @ basis


def _g_values(Z: np.ndarray, w: np.ndarray) -> np.ndarray:
    V = (Z * w[:, None]).T @ Z
    Vi = np.linalg.inv(V)
    return np.einsum("ij,jk,ik->i", Z, Vi, Z)


def g_optimal_design(X: np.ndarray, tol: float = DESIGN_TOL,
                     max_iter: int = DESIGN_MAX_ITER) -> Design:
    """A design over the rows of X with g(π) ≤ (1 + tol)·rank (module docstring), deterministic
    (ties: the lowest row)."""
    basis, Z = span_coordinates(X)
    n, r = Z.shape
    w = np.full(n, 1.0 / n)
    it = 0
    g = _g_values(Z, w)
    while it < max_iter:
        k = int(np.argmax(g))
        gk = float(g[k])
        if gk <= (1.0 + tol) * r:
            break
        held = np.flatnonzero(w > 0)
        j = int(held[np.argmin(g[held])])
        gj = float(g[j])
        if gk - r >= r - gj or held.size == 1:
            # toward e_k with the exact line search of log det (Fedorov 1972; Todd 2016)
            k_move, step = k, (gk / r - 1.0) / (gk - 1.0)
        else:
            # away from e_j (Wolfe's away step, Todd & Yildirim 2007): the line search's step,
            # or the whole weight of j (a drop step, which keeps the support small)
            floor = -w[j] / (1.0 - w[j])
            step = max((gj / r - 1.0) / (gj - 1.0), floor) if gj > 1.0 else floor
            k_move = j
        w *= 1.0 - step
        w[k_move] += step
        if w[k_move] < PRUNE:
            w[k_move] = 0.0
        it += 1
        g = _g_values(Z, w)
    w = np.where(w < PRUNE, 0.0, w)
    w /= w.sum()
    g = _g_values(Z, w)
    return Design(w, float(g.max()), r, basis, Z, it)


def design_counts(design: Design, n: float) -> np.ndarray:
    """Pulls of every arm in a phase of size n: ⌈π(a)·n⌉ on the support (so V ⪰ n·V(π) and
    ‖x‖²_{V⁻¹} ≤ g/n for every arm x), 0 elsewhere (Lattimore & Szepesvári 2020, §22)."""
    return np.where(design.weights > 0, np.ceil(design.weights * n), 0).astype(np.int64)
