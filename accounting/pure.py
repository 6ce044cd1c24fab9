"""Optimal composition of pure-DP releases at δ > 0.

k mechanisms that are each ε_i-DP compose, at best, like k binary randomized-response
mechanisms (Kairouz–Oh–Viswanath 2015, Thm 3.3; Murtagh–Vadhan 2016 for heterogeneous ε_i).
The composed privacy loss is L = Σ_i ε_i·(k_i − 2·B_i) with B_i ~ Binomial(k_i, q_i),
q_i = 1/(1+e^{ε_i}), and

    δ(ε) = E[(1 − e^{ε−L})₊] = Σ_l P(L = l)·(1 − e^{ε−l})₊ .

Computed exactly in log space (log-binomial weights and logsumexp): no overflow at k = 1e6
(dp-accounting's ``advanced_composition`` overflows at k ≈ 1000) and δ down to 1e-300.  When
the support Π(k_i + 1) would exceed 2^21 points, groups are made coarser by replacing ε_i with a
larger value (ε-DP ⊂ ε'-DP for ε ≤ ε', so the bound stays valid): first by rounding ε_i up to a
geometric grid of ratio 1 + 2^-6, then by merging the smallest group into the next.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from dpledger.accounting.numerics import ULP, log_target, solve_decreasing

MAX_SUPPORT = 1 << 21


def _group_support(eps: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.special import gammaln     # imported on use (0.2 s a non-private run skips)
    l = np.arange(k + 1, dtype=np.float64)
    log_p = -math.log1p(math.exp(-eps))          # log e^ε/(1+e^ε)
    log_q = -eps + log_p                         # log 1/(1+e^ε)
    logw = gammaln(k + 1.0) - gammaln(l + 1.0) - gammaln(k - l + 1.0) + (k - l) * log_p + l * log_q
    return (k - 2.0 * l) * eps, logw


def _coarsen(groups: list[tuple[float, int]]) -> list[tuple[float, int]]:
    def support(gs):
        n = 1
        for _, k in gs:
            n *= k + 1
        return n

    gs = sorted(groups)
    if support(gs) <= MAX_SUPPORT:
        return gs
    ratio = 1.0 + 2.0 ** -6
    merged: dict[float, int] = {}
    for e, k in gs:
        up = ratio ** math.ceil(math.log(e) / math.log(ratio))
        up = max(up, e)
        merged[up] = merged.get(up, 0) + k
    gs = sorted(merged.items())
    while support(gs) > MAX_SUPPORT and len(gs) > 1:
        (_, k0), (e1, k1) = gs[0], gs[1]
        gs = [(e1, k0 + k1)] + gs[2:]
    return gs


class PureComposition:
    """The exact loss distribution of a pure-DP composition, ready for δ(ε) and ε(δ).

    With the positive support sorted downwards, L_0 > L_1 > …, and cumulative log-sums
    A_j = log Σ_{i≤j} p_i and B_j = log Σ_{i≤j} p_i e^{−L_i}, for ε in [L_{j+1}, L_j)

        δ(ε) = e^{A_j} − e^{ε + B_j},      so   ε(δ) = log(e^{A_j} − δ) − B_j

    in closed form on each segment: O(log n) per query instead of a pass over the support.
    The subtraction is guarded: its floating-point error is bounded from the magnitudes
    involved and added to δ; where that bound is not small, the direct sum is used instead.
    """

    def __init__(self, groups: Sequence[tuple[float, int]]):
        groups = [(float(e), int(k)) for e, k in groups if k > 0]
        self.basic = math.fsum(e * k for e, k in groups)
        self.groups = _coarsen(groups) if groups else []
        loss = np.zeros(1)
        logw = np.zeros(1)
        for e, k in self.groups:
            gl, gw = _group_support(e, k)
            loss = (loss[:, None] + gl[None, :]).ravel()
            logw = (logw[:, None] + gw[None, :]).ravel()
        keep = loss > 0
        order = np.argsort(-loss[keep], kind="stable")
        self._loss = loss[keep][order]                     # descending
        self._logw = logw[keep][order]
        self._A = np.logaddexp.accumulate(self._logw) if self._loss.size else self._loss
        self._B = np.logaddexp.accumulate(self._logw - self._loss) if self._loss.size else self._loss
        self._neg = -self._loss                             # ascending, for searchsorted

    def _direct(self, epsilon: float) -> float:
        m = self._loss > epsilon
        from scipy.special import logsumexp
        terms = self._logw[m] + np.log(-np.expm1(epsilon - self._loss[m]))
        value = float(logsumexp(terms))
        return value + 1e-12 * abs(value) + 1e-15   # round the sum up

    def log_delta(self, epsilon: float) -> float:
        if epsilon >= self.basic or self._loss.size == 0:
            return -math.inf
        j = int(np.searchsorted(self._neg, -epsilon, side="left")) - 1   # last index with L > ε
        if j < 0:
            return -math.inf
        a, b = float(self._A[j]), float(self._B[j])
        x = epsilon + b - a                                  # log(e^ε S2 / S1) < 0
        err = 8 * ULP * (abs(a) + abs(b) + abs(epsilon) + 1.0) + 4 * ULP * (j + 1)
        if x >= -4 * err:
            return self._direct(epsilon)
        value = a + math.log(-math.expm1(x)) + math.log1p(err / -x)
        return value + 1e-12 * abs(value) + 1e-15

    def epsilon(self, delta: float) -> float:
        if not self.groups or self._loss.size == 0:
            return 0.0
        target = log_target(delta)
        if self.log_delta(0.0) <= target:
            return 0.0
        # segment: δ at the support points rises as the points fall; find the first point L_k
        # (descending) with log δ(L_k) > target: the answer lies in [L_k, L_{k-1}).
        lo_i, hi_i = 0, self._loss.size - 1
        if self.log_delta(float(self._loss[hi_i])) <= target:
            lo_eps, hi_eps = 0.0, float(self._loss[hi_i])
        else:
            while hi_i - lo_i > 1:
                mid = (lo_i + hi_i) // 2
                if self.log_delta(float(self._loss[mid])) > target:
                    hi_i = mid
                else:
                    lo_i = mid
            lo_eps, hi_eps = float(self._loss[hi_i]), float(self._loss[lo_i])
        # closed form on the segment, then verified (and bisected if rounding disagrees)
        j = hi_i - 1 if self.log_delta(float(self._loss[hi_i])) > target else hi_i
        guess = hi_eps
        if j >= 0:
            a, b = float(self._A[j]), float(self._B[j])
            if target < a:
                guess = a + math.log(-math.expm1(target - a)) - b
                guess = min(max(guess * (1 + 1e-12) + 1e-15, lo_eps), hi_eps)
        if self.log_delta(guess) <= target:
            return min(self.basic, solve_decreasing(self.log_delta, target, lo_eps, guess,
                                                    max_iter=8) if guess > lo_eps else guess)
        return min(self.basic, solve_decreasing(self.log_delta, target, guess, hi_eps))


def kov_epsilon(eps0: float, k: int, delta: float) -> float:
    """Optimal homogeneous composition (KOV Thm 3.3): ε(δ) of k ε₀-DP mechanisms."""
    return PureComposition([(eps0, k)]).epsilon(delta)


def zcdp_of_pure(epsilon: float) -> float:
    """Tight zCDP of ε-DP: ρ = ε·tanh(ε/2) (sup_α of randomized response's RDP / α)."""
    return epsilon * math.tanh(epsilon / 2.0)
