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
from scipy.special import gammaln, logsumexp

from dpledger.accounting.numerics import log_target, solve_decreasing

MAX_SUPPORT = 1 << 21


def _group_support(eps: float, k: int) -> tuple[np.ndarray, np.ndarray]:
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
        (e0, k0), (e1, k1) = gs[0], gs[1]
        gs = [(e1, k0 + k1)] + gs[2:]
    return gs


class PureComposition:
    """The exact loss distribution of a pure-DP composition, ready for δ(ε) and ε(δ)."""

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
        self._loss = loss[keep]
        self._logw = logw[keep]

    def log_delta(self, epsilon: float) -> float:
        if epsilon >= self.basic:
            return -math.inf
        m = self._loss > epsilon
        if not m.any():
            return -math.inf
        terms = self._logw[m] + np.log(-np.expm1(epsilon - self._loss[m]))
        value = float(logsumexp(terms))
        return value + 1e-12 * abs(value) + 1e-15   # round the sum up

    def epsilon(self, delta: float) -> float:
        if not self.groups:
            return 0.0
        target = log_target(delta)
        return min(self.basic, solve_decreasing(self.log_delta, target, 0.0, self.basic))


def kov_epsilon(eps0: float, k: int, delta: float) -> float:
    """Optimal homogeneous composition (KOV Thm 3.3): ε(δ) of k ε₀-DP mechanisms."""
    return PureComposition([(eps0, k)]).epsilon(delta)


def zcdp_of_pure(epsilon: float) -> float:
    """Tight zCDP of ε-DP: ρ = ε·tanh(ε/2) (sup_α of randomized response's RDP / α)."""
    return epsilon * math.tanh(epsilon / 2.0)
