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

One group of more than 2^16 copies is bounded by :class:`HugeGroup` at O(1) cost in k (a
windowed tangent-line bound on the binomial sum, certified at 113-bit precision); next to
other groups, the composition is also bounded by splitting δ among the parts, and the smaller
value is used.  Every support point, log-weight and sum carries its rounding error (R6): each
δ is an upper bound and each ε satisfies δ(ε) ≤ δ exactly (tests check both at 50 digits).
"""
from __future__ import annotations

import math
from itertools import pairwise
from typing import Sequence

import numpy as np

from dpledger.accounting.numerics import (ULP, libm_up, log_target, mul_up, solve_decreasing,
                                         float_up, sum_up, up, verified_epsilon)

MAX_SUPPORT = 1 << 21
EXACT_MAX_COUNT = 1 << 16     # one group with more copies: HugeGroup's windowed bound


def _group_support(eps: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.special import gammaln     # imported on use (0.2 s a non-private run skips)
    l = np.arange(k + 1, dtype=np.float64)
    log_p = -math.log1p(math.exp(-eps))          # log e^ε/(1+e^ε)
    log_q = -eps + log_p                         # log 1/(1+e^ε)
    logw = gammaln(k + 1.0) - gammaln(l + 1.0) - gammaln(k - l + 1.0) + (k - l) * log_p + l * log_q
    return (k - 2.0 * l) * eps, logw


def _support(gs) -> int:
    n = 1
    for _, k in gs:
        n *= k + 1
    return n


def _coarsen(groups: list[tuple[float, int]]) -> list[tuple[float, int]]:
    support = _support

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
        merged: dict[float, int] = {}
        for e, k in groups:                                       # equal ε: one group, exactly
            if int(k) > 0:
                merged[float(e)] = merged.get(float(e), 0) + int(k)
        groups = sorted(merged.items())
        self.basic = sum_up((k, e) for e, k in groups)          # Σ k·ε exactly, rounded up
        self.groups = _coarsen(groups) if groups else []
        self._huge = None
        # Heterogeneous with a group of more than 2^16 copies, too big to enumerate: coarsening
        # merges groups into the larger ε (loose).  A second bound, also valid: each huge group
        # by its own KOV bound and the rest by its optimal composition, each at δ/(parts), added
        # (basic composition of (ε_i, δ_i)-DP parts, Dwork–Roth Thm 3.16); ``epsilon`` takes the
        # smaller.
        self._split = None
        huge = [(e, k) for e, k in groups if k > EXACT_MAX_COUNT]
        if len(groups) > 1 and huge and _support(groups) > MAX_SUPPORT:
            rest = [(e, k) for e, k in groups if k <= EXACT_MAX_COUNT]
            self._split = [HugeGroup(e, k) for e, k in huge] + ([PureComposition(rest)] if rest else [])
        if len(self.groups) == 1 and self.groups[0][1] > EXACT_MAX_COUNT:
            self._huge = HugeGroup(*self.groups[0])
            self._loss = np.zeros(0)
            return
        loss = np.zeros(1)
        logw = np.zeros(1)
        wmag = 0.0
        for e, k in self.groups:
            gl, gw = _group_support(e, k)
            loss = (loss[:, None] + gl[None, :]).ravel()
            logw = (logw[:, None] + gw[None, :]).ravel()
            from scipy.special import gammaln
            wmag += 3.0 * float(gammaln(k + 1.0)) + k * (e + 2.0) + 1.0   # |log p|+|log q| ≤ ε+2
        # Rounding, made safe (R6): each support point Σ ε_i(k_i − 2l_i) is within
        # (2G + 2) ulps of Σ ε_i k_i of its exact value, so it is raised by that much (δ(ε)
        # increases with every support point); each log-weight is within 8 ulps of the
        # magnitudes summed into it, which ``_log_w_err`` adds to every log δ.
        n_groups = len(self.groups)
        loss = loss + (2 * n_groups + 2) * ULP * math.fsum(e * k for e, k in self.groups)
        self._log_w_err = 8.0 * ULP * wmag
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
        n = int(np.count_nonzero(m))
        # the sum of n terms, each within a few ulps: relative error ≤ (n + 8) ulps
        value += self._log_w_err + (n + 8) * 4 * ULP + 8 * ULP * abs(value)
        return value + 1e-12 * abs(value) + 1e-15   # round the sum up

    def log_delta(self, epsilon: float) -> float:
        """An upper bound on log δ(ε)."""
        if epsilon >= self.basic:
            return -math.inf
        if self._huge is not None:     # certified at high precision, then rounded up
            value = self._huge.log_delta_hp(epsilon)
            return float_up(value + 1e-20) if value != -math.inf else -math.inf
        if self._loss.size == 0:
            return -math.inf
        j = int(np.searchsorted(self._neg, -epsilon, side="left")) - 1   # last index with L > ε
        if j < 0:
            return -math.inf
        a, b = float(self._A[j]), float(self._B[j])
        x = epsilon + b - a                                  # log(e^ε S2 / S1) < 0
        # A_j and B_j accumulate j + 1 log-additions, each within a few ulps of their magnitude
        err = 8 * ULP * (abs(a) + abs(b) + abs(epsilon) + 1.0) * (j + 2)
        if x >= -4 * err:
            return self._direct(epsilon)
        value = a + math.log(-math.expm1(x)) + math.log1p(err / -x) + self._log_w_err
        return value + 1e-12 * abs(value) + 1e-15

    def epsilon(self, delta: float) -> float:
        """An upper bound on the smallest ε with δ(ε) ≤ δ, never above Σ k·ε (rounded up)."""
        value = self._epsilon(delta)
        if self._split:
            share = delta / len(self._split)
            value = min(value, sum_up((1, part.epsilon(share)) for part in self._split))
        return min(self.basic, value)

    def _epsilon(self, delta: float) -> float:
        if self._huge is not None:
            return min(self.basic, self._huge.epsilon(delta))
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
    """Tight zCDP of ε-DP: ρ = ε·tanh(ε/2) (sup_α of randomized response's RDP / α), rounded
    up: tanh stepped up by ``LIBM_ULPS`` (glibc: ≤ 2 ulp; checked against mpmath in tests),
    capped at 1 (tanh ≤ 1 exactly), times ε exactly and rounded up."""
    half = epsilon * 0.5
    if half * 2.0 != epsilon:          # subnormal ε: ε/2 inexact, round it up (tanh increases)
        half = up(half)
    t = min(1.0, libm_up(math.tanh(half)))
    return mul_up(epsilon, t)


# -- one group of many copies: a windowed, certified sum -------------------------------------------
def _phi1_f(u: float) -> float:
    """Scalar float φ₁ (as :func:`_phi1_np`)."""
    if abs(u) < 0.01:
        acc, term = 0.0, u * u
        for n in range(2, 12):
            acc += term / (n * (n - 1))
            term = -term * u
        return acc
    return (1.0 + u) * math.log1p(u) - u


def _phi1_np(u: np.ndarray) -> np.ndarray:
    """φ₁(u) = (1+u)·log(1+u) − u ≥ 0 (u > −1), without cancellation for small |u|: the series
    Σ_{n≥2} (−u)^n/(n(n−1)) below |u| = 0.01 (10 terms: relative error < 1e-20)."""
    small = np.abs(u) < 0.01
    us = np.where(small, u, 0.0)
    acc = np.zeros_like(u)
    term = us * us
    for n in range(2, 12):
        acc = acc + term / (n * (n - 1))
        term = -term * us
    with np.errstate(invalid="ignore", divide="ignore"):
        direct = (1.0 + u) * np.log1p(u) - u
    return np.where(small, acc, direct)


_SMALL = 1e-5


def _expm1_mp(mp, x):
    """e^x − 1: series below |x| = 1e-5 (8 terms, error < 1e-44 relative), else exp(x) − 1
    (the cancellation costs ≤ 17 bits).  mpmath's own expm1 is ten times slower."""
    if abs(x) < _SMALL:
        acc, term = mp.mpf(0), x
        for n in range(2, 10):
            acc += term
            term = term * x / n
        return acc
    return mp.exp(x) - 1


def _log1p_mp(mp, u):
    """log(1 + u): series below |u| = 1e-5 (8 terms), else log(1 + u) (≤ 17 bits lost)."""
    if abs(u) < _SMALL:
        acc, term = mp.mpf(0), u
        for n in range(1, 9):
            acc += term / n
            term = -term * u
        return acc
    return mp.log(1 + u)


def _phi1_mp(mp, u):
    """φ₁ at mpmath precision: the series below |u| = 1e-4 (10 terms: error < 1e-40 relative),
    else directly (the cancellation costs at most 27 bits)."""
    if abs(u) < 1e-4:
        acc, term = mp.mpf(0), u * u
        for n in range(2, 12):
            acc += term / (n * (n - 1))
            term = -term * u
        return acc
    return (1 + u) * _log1p_mp(mp, u) - u


class HugeGroup:
    """δ(ε) of k copies of an ε₀-DP release (KOV 2015 Thm 3.3), bounded at O(1) cost in k.

    With B ~ Binomial(k, q), q = 1/(1+e^{ε₀}), p = 1 − q, the loss is L = ε₀(k − 2B) and

        δ(ε) = Σ_{0 ≤ l < λ} P(B = l)·(1 − e^{ε − ε₀(k−2l)}),     λ = (k − ε/ε₀)/2.

    The l = 0 term is exact (p^k).  For 1 ≤ l ≤ k−1, Robbins' Stirling bounds (1955) give
    log P(B = l) ≤ H(l) = ½·log(k/(2π l(k−l))) − k·D(l/k ‖ q) + 1/(12k) − 1/(12l+1) −
    1/(12(k−l)+1), with the binary relative entropy k·D = kq·φ₁(z/kq) + kp·φ₁(−z/kp), z = l − kq,
    φ₁(u) = (1+u)log(1+u) − u (no cancellation).  H is concave on [1, k−1] (its second derivative
    is ≤ −1/(2l) − 1/(2(k−l))), and so is g(l) = log(1 − e^{−2ε₀(λ−l)}) on l < λ; hence the
    log-terms h = H + g lie below every tangent line of h.  Over a run of n consecutive
    integers starting at an integer t and moving away from the maximiser of h, the terms are
    ≤ e^{h(t)}·Σ_{j<n} e^{−s·j}, s = |h'(t)|: a geometric series, exact when h is linear.  The
    window around the maximiser (out to where h has fallen by 40) is cut into runs that widen
    away from it (1 integer, then 15 % of the distance, at most σ_B/8 with σ_B the binomial's
    standard deviation there); the rest of [1, λ) is one geometric tail on each side.  The
    result bounds δ(ε) for any choice of runs; with these it exceeds the exact sum by at most
    ~0.03 in log δ in the cases tested (tests/test_accounting_rounding.py), which moves ε by
    ~0.002 standard deviations of the loss.

    Cost: O(1) in k (one vectorised pass over ≤ 2 × 320, typically ~150, points per δ(ε)).  The solver works in
    floats; its answer is then checked at 113-bit precision by
    :func:`~.numerics.verified_epsilon` (the same runs evaluated in mpmath, with k, ε and ε₀
    exact, λ and the last run's end recomputed exactly), and stepped up until it passes.
    """

    RUNS = 320          # at most this many runs per side of the maximiser
    GROWTH = 0.15       # each run at most 15 % of its distance from the maximiser
    DROP = 40.0

    def __init__(self, eps0: float, k: int):
        self.eps0, self.k = float(eps0), int(k)
        self._kf = float(self.k) if self.k < 1 << 1023 else math.inf
        e0 = self.eps0
        self._log_p = -math.log1p(math.exp(-e0))
        self._log_q = -e0 + self._log_p
        self._kq = self._kf * math.exp(self._log_q)
        self._kp = self._kf * math.exp(self._log_p)

    # -- float, vectorised ------------------------------------------------------------------
    def _h_np(self, lam: float, l: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(h(l), h'(l)) in floats for 1 ≤ l < λ (NaN / −∞ elsewhere)."""
        k, kq, kp, log_p, log_q, e0 = (self._kf, self._kq, self._kp, self._log_p, self._log_q,
                                       self.eps0)
        l = np.asarray(l, dtype=np.float64)
        with np.errstate(all="ignore"):
            z = l - kq
            use_phi = (kq > 0) & (np.abs(z) < 0.5 * kq) & (np.abs(z) < 0.5 * kp)
            u1 = np.where(use_phi, z / kq if kq > 0 else 0.0, 0.0)
            u2 = np.where(use_phi, -z / kp, 0.0)
            kd_phi = kq * _phi1_np(u1) + kp * _phi1_np(u2)
            dkd_phi = np.log1p(u1) - np.log1p(u2)
            lk = np.log(l / k)
            l1k = np.log1p(-l / k)
            kd_log = l * (lk - log_q) + (k - l) * (l1k - log_p)
            dkd_log = (lk - log_q) - (l1k - log_p)
            kd = np.where(use_phi, kd_phi, kd_log)
            dkd = np.where(use_phi, dkd_phi, dkd_log)
            kl = k - l
            big_h = (0.5 * np.log(k / (2.0 * math.pi * l * kl)) - kd
                     + 1.0 / (12.0 * k) - 1.0 / (12.0 * l + 1.0) - 1.0 / (12.0 * kl + 1.0))
            dh = (0.5 * (-1.0 / l + 1.0 / kl) - dkd + 12.0 / (12.0 * l + 1.0) ** 2
                  - 12.0 / (12.0 * kl + 1.0) ** 2)
            y = 2.0 * e0 * (lam - l)
            one_minus = -np.expm1(-y)
            g = np.log(one_minus)
            dg = -2.0 * e0 * np.exp(-y) / one_minus
        return big_h + g, dh + dg

    def _h_f(self, lam: float, l: float) -> tuple[float, float]:
        """(h(l), h'(l)) as plain floats, for the plan (1 ≤ l < λ; −∞ at λ)."""
        k, kq, kp, log_p, log_q, e0 = (self._kf, self._kq, self._kp, self._log_p, self._log_q,
                                       self.eps0)
        z = l - kq
        if kq > 0 and abs(z) < 0.5 * kq and abs(z) < 0.5 * kp:
            u1, u2 = z / kq, -z / kp
            kd = kq * _phi1_f(u1) + kp * _phi1_f(u2)
            dkd = math.log1p(u1) - math.log1p(u2)
        else:
            lk, l1k = math.log(l / k), math.log1p(-l / k)
            kd = l * (lk - log_q) + (k - l) * (l1k - log_p)
            dkd = (lk - log_q) - (l1k - log_p)
        kl = k - l
        big_h = (0.5 * math.log(k / (2.0 * math.pi * l * kl)) - kd
                 + 1.0 / (12.0 * k) - 1.0 / (12.0 * l + 1.0) - 1.0 / (12.0 * kl + 1.0))
        dh = (0.5 * (-1.0 / l + 1.0 / kl) - dkd + 12.0 / (12.0 * l + 1.0) ** 2
              - 12.0 / (12.0 * kl + 1.0) ** 2)
        y = 2.0 * e0 * (lam - l)
        if y <= 0:
            return -math.inf, -math.inf
        one_minus = -math.expm1(-y)
        return big_h + math.log(one_minus), dh - 2.0 * e0 * math.exp(-y) / one_minus

    # -- mpmath, scalar ---------------------------------------------------------------------
    def _h_mp(self, mp, C, l):
        k, kq, kp, log_p, log_q, e0, lam = C
        z = l - kq
        if kq > 0 and abs(z) < kq / 2 and abs(z) < kp / 2:
            kd = kq * _phi1_mp(mp, z / kq) + kp * _phi1_mp(mp, -z / kp)
            dkd = _log1p_mp(mp, z / kq) - _log1p_mp(mp, -z / kp)
        else:
            lk, l1k = mp.log(l / k), _log1p_mp(mp, -l / k)
            kd = l * (lk - log_q) + (k - l) * (l1k - log_p)
            dkd = (lk - log_q) - (l1k - log_p)
        kl = k - l
        big_h = (mp.log(k / (2 * mp.pi * l * kl)) / 2 - kd
                 + 1 / (12 * k) - 1 / (12 * l + 1) - 1 / (12 * kl + 1))
        dh = (-1 / l + 1 / kl) / 2 - dkd + 12 / (12 * l + 1) ** 2 - 12 / (12 * kl + 1) ** 2
        y = 2 * e0 * (lam - l)
        one_minus = -_expm1_mp(mp, -y)
        return big_h + mp.log(one_minus), dh - 2 * e0 * mp.exp(-y) / one_minus

    # -- the runs ---------------------------------------------------------------------------
    def _plan(self, epsilon: float):
        """(λ in floats, runs) with runs = [(t, n, side)]: n integers from the integer t away
        from the maximiser (side −1: t, t−1, …; +1: t, t+1, …); n = None for the right tail,
        whose count is taken up to λ in the evaluating arithmetic."""
        k = self._kf
        lam = (k - epsilon / self.eps0) / 2.0
        top = min(lam, k - 1.0)
        if not top > 1.0:
            return lam, []
        if self._h_f(lam, 1.0)[1] <= 0:
            m = 1.0
        else:
            lo, hi = 1.0, top
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                if not lo < mid < hi:
                    break
                if self._h_f(lam, mid)[1] > 0:
                    lo = mid
                else:
                    hi = mid
            m = lo
        binom = 1.0 / m + 1.0 / max(k - m, 1.0)
        sigma_b = 1.0 / math.sqrt(binom)
        step = max(1e-6 * m, 1e-3)
        a, b = max(1.0, m - step), min(m + step, 0.5 * (m + top))
        curv = (self._h_f(lam, a)[1] - self._h_f(lam, b)[1]) / (b - a) if b > a else math.nan
        sigma = 1.0 / math.sqrt(curv if math.isfinite(curv) and curv > binom else binom)
        hm = self._h_f(lam, m)[0]
        runs = []
        for side in (-1, 1):
            limit = 1.0 if side < 0 else top
            span = abs(limit - m)
            if not span > 0:
                if side < 0:                   # m = 1: the integer 1 itself (a run of one)
                    runs.append((1.0, 1, side))
                continue
            d = min(span, 9.0 * sigma)
            while d < span and self._h_f(lam, m + side * d)[0] > hm - self.DROP:
                d = min(span, 2.0 * d)
            # runs widen geometrically away from m (h bends fastest next to λ, where the
            # factor 1 − e^{−2ε₀(λ−l)} vanishes), up to σ_B/8 of the binomial's own scale
            cap = max(1.0, sigma_b / 8.0, d / self.RUNS)
            pts, x = [m], 0.0
            while x < d:
                x = min(d, x + min(cap, max(1.0, self.GROWTH * x)))
                pts.append(m + side * x)
            for t, u in pairwise(pts):
                if side < 0:                   # integers in (u, t]
                    runs.append((math.floor(t), math.floor(t) - math.floor(u), side))
                else:                          # integers in (t, u]
                    runs.append((math.floor(t) + 1, math.floor(u) - math.floor(t), side))
            end = pts[-1]
            if side < 0 and end >= 1.0:        # integers in [1, end]
                runs.append((math.floor(end), math.floor(end), side))
            if side > 0:                       # integers in (end, λ)
                runs.append((math.floor(end) + 1, None, side))
        return lam, runs

    @staticmethod
    def _geo_np(h_top, s, n):
        """log Σ_{j<n} e^{h_top − s·j}, s ≥ 0, n ≥ 1, elementwise."""
        with np.errstate(all="ignore"):
            geo = np.log(-np.expm1(-s * n)) - np.log(-np.expm1(-s))
            return h_top + np.where((n == 1) | (s * n < 1e-300), np.log(n), geo)

    def log_delta(self, epsilon: float) -> float:
        """Upper bound on log δ(ε) in floats, plus a margin (1e-9 + 1e-12 relative) for their
        rounding; :meth:`log_delta_hp` is the certified evaluation."""
        lam, runs = self._plan(float(epsilon))
        if not lam > 0:
            return -math.inf
        terms = [self._kf * self._log_p + math.log(-math.expm1(-2.0 * self.eps0 * lam))]
        if runs:
            t = np.array([r[0] for r in runs], dtype=np.float64)
            n = np.array([r[1] if r[1] is not None else max(0.0, math.ceil(lam) - r[0])
                          for r in runs], dtype=np.float64)
            side = np.array([r[2] for r in runs], dtype=np.float64)
            ok = (n > 0) & (t >= 1.0) & (t < lam)
            if np.any(ok):
                h, dh = self._h_np(lam, t[ok])
                slope = np.where(side[ok] < 0, dh, -dh)
                nn = n[ok]
                # a slope of the wrong sign (rounding near the maximiser): flat bound
                h_top = np.where(slope < 0, h - slope * (nn - 1.0), h)
                bounds = self._geo_np(h_top, np.maximum(slope, 0.0), nn)
                terms.extend(bounds[np.isfinite(bounds) | (bounds > 0)].tolist())
        m = max(terms)
        if m == -math.inf:
            return m
        value = m + math.log(math.fsum(math.exp(x - m) for x in terms))
        return value + 1e-9 + 1e-12 * abs(value)

    def log_delta_hp(self, epsilon: float):
        """The same bound at 113-bit precision (mpmath), with k, ε₀, ε and λ exact."""
        import mpmath as mp
        lam_f, runs = self._plan(float(epsilon))
        # 113 bits beyond k's own size: z = l − kq keeps 113 bits relative to √k-sized offsets
        with mp.workprec(113 + self.k.bit_length()):
            e0 = mp.mpf(self.eps0)
            k = mp.mpf(self.k)
            log_p = -_log1p_mp(mp, mp.exp(-e0))
            log_q = -e0 + log_p
            kq, kp = k * mp.exp(log_q), k * mp.exp(log_p)
            lam = (k - mp.mpf(epsilon) / e0) / 2
            if lam <= 0:
                return -mp.inf
            C = (k, kq, kp, log_p, log_q, e0, lam)
            terms = [k * log_p + mp.log(-_expm1_mp(mp, -2 * e0 * lam))]
            for t, n, side in runs:
                t = mp.mpf(t)
                if n is None:
                    n = int(mp.ceil(lam)) - int(t)          # integers t … ⌈λ⌉−1 (< λ)
                if n <= 0 or t < 1 or t >= lam:
                    continue
                h, dh = self._h_mp(mp, C, t)
                slope = dh if side < 0 else -dh
                if slope < 0:
                    h, slope = h - slope * (n - 1), mp.mpf(0)
                if n == 1 or slope == 0:
                    terms.append(h + mp.log(n))
                else:
                    terms.append(h + mp.log(-_expm1_mp(mp, -slope * n))
                                 - mp.log(-_expm1_mp(mp, -slope)))
            return mp.log(mp.fsum(mp.exp(x) for x in terms))

    def epsilon(self, delta: float) -> float:
        if not math.isfinite(144.0 * self._kf * self._kf * max(1.0, self.eps0)):
            return math.inf          # k beyond ~1e150: the float search would overflow
        target = log_target(delta)
        if self.log_delta(0.0) <= target:
            return 0.0
        e0 = self.eps0
        mean = self._kf * e0 * math.tanh(e0 / 2.0)
        sd = 2.0 * e0 * math.sqrt(self._kf * 0.25)
        hi = mean + sd * 8.0
        while self.log_delta(hi) > target:
            hi = mean + 2.0 * (hi - mean)
            if not math.isfinite(hi):
                return math.inf
        lo = 0.0
        # regula falsi (Illinois) on the decreasing log δ, bracket [lo, hi] with f(hi) ≤ 0
        flo, fhi = self.log_delta(lo) - target, self.log_delta(hi) - target
        side = 0
        for _ in range(200):
            if hi - lo <= 4 * ULP * abs(hi):
                break
            if math.isfinite(flo) and math.isfinite(fhi) and flo != fhi:
                mid = hi - fhi * (hi - lo) / (fhi - flo)
                if not lo < mid < hi:
                    mid = 0.5 * (lo + hi)
            else:
                mid = 0.5 * (lo + hi)
            fmid = self.log_delta(mid) - target
            if fmid <= 0:
                hi, fhi = mid, fmid
                if side == 1:
                    flo *= 0.5
                side = 1
            else:
                lo, flo = mid, fmid
                if side == -1:
                    fhi *= 0.5
                side = -1
            if -1e-7 < fhi <= 0:
                break
        return verified_epsilon(hi, self.log_delta_hp, target)
