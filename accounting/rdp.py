"""Rényi DP curves of single releases and the conversion of a composed curve to (ε, δ).

Orders: ``ORDERS`` is α = 1 + s for 600 values of s log-spaced on [1e-5, 1e7] — dense enough near
α = 1 for μ up to 1e4 and reaching far enough for δ down to 1e-300 at μ = 1e-4 — joined with
dp-accounting's ``DEFAULT_RDP_ORDERS`` (1.1, 1.2, …, 10.9, 11, …, 63, 128, 256, 512, 1024), so
that dpledger's RDP ε is never looser than dp-accounting's on the same curve.  Every order gives
a valid bound, so the grid only affects tightness, never soundness.

* Gaussian, μ = Δ/σ: ε(α) = αμ²/2 (Mironov 2017, Prop. 7).
* Laplace, ε = Δ/b: ε(α) = (1/(α−1))·log(α/(2α−1)·e^{(α−1)ε} + (α−1)/(2α−1)·e^{−αε})
  (Mironov 2017, Prop. 6), evaluated as log1p of expm1 terms near α = 1, capped at ε.
* generic ε-DP (randomized response): ε(α) = (1/(α−1))·log(p·e^{(α−1)ε} + q·e^{−(α−1)ε}) with
  p = e^ε/(1+e^ε), q = 1 − p (equivalent to Mironov's form), capped at ε.
* zCDP ρ: ε(α) = αρ (Bun–Steinke 2016).
* conversion (Balle et al. 2020, Thm 21; Canonne–Kamath–Steinke 2020, Prop. 12):
  ε = min_α [ε(α) + log((α−1)/α) − (log δ + log α)/(α−1)];
  log δ = min_α [(α−1)(ε(α) − ε + log(1 − 1/α)) − log α].

Each single-release curve is inflated by a relative 1e-10 to cover its floating-point error
(a few ulps per curve, and the products count·curve and the sums over at most 1e5 distinct
releases).  The conversions add an explicit bound on their own rounding error (16 ulps of the
magnitudes they combine), so the ε and log δ they return are upper bounds for the curve given.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from dpledger.accounting.numerics import ULP, up

# dp-accounting 0.6.0 ``rdp_privacy_accountant.DEFAULT_RDP_ORDERS`` (copied: importing
# dp-accounting takes ~1.7 s).
_DP_ACCOUNTING_ORDERS = np.array([1.0 + x / 10.0 for x in range(1, 100)]
                                 + list(range(11, 64)) + [128, 256, 512, 1024], dtype=np.float64)
ORDERS = np.unique(np.concatenate([1.0 + np.geomspace(1e-5, 1e7, 600), _DP_ACCOUNTING_ORDERS]))
_S = ORDERS - 1.0
INFLATE = 1.0 + 1e-10


def _phi(x: np.ndarray) -> np.ndarray:
    """φ(x) = e^x − 1 − x, accurate to a few ulps for every x (Taylor series for |x| < 0.5)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    small = np.abs(x) < 0.5
    xs = x[small]
    term = xs * xs / 2.0
    acc = term.copy()
    for n in range(3, 24):          # |x|^n/n! < 1e-17·x²/2 beyond n = 23 for |x| < 0.5
        term = term * xs / n
        acc = acc + term
    out[small] = acc
    with np.errstate(over="ignore"):
        out[~small] = np.expm1(x[~small]) - x[~small]
    return out


def gaussian_rdp(mu2: float, orders: np.ndarray = ORDERS) -> np.ndarray:
    return orders * (mu2 / 2.0) * INFLATE


def zcdp_rdp(rho: float, orders: np.ndarray = ORDERS) -> np.ndarray:
    return orders * rho * INFLATE


def laplace_rdp(epsilon: float, orders: np.ndarray = ORDERS) -> np.ndarray:
    s = orders - 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        small = s * epsilon < 30.0
        # log[(1+s)e^{sε} + s e^{−(1+s)ε}] − log(1+2s) = log1p(A/(1+2s)),
        # A = (1+s)·expm1(sε) + s·expm1(−(1+s)ε) = (1+s)·φ(sε) + s·φ(−(1+s)ε) > 0 with
        # φ(x) = e^x − 1 − x ≥ 0: the first-order terms cancel exactly, so A is summed from
        # non-negative terms (the expm1 form loses ~1e-16/ε relative to cancellation).
        a = (1.0 + s) * _phi(s * epsilon) + s * _phi(-(1.0 + s) * epsilon)
        near = np.log1p(a / (1.0 + 2.0 * s)) / s
        far = (np.logaddexp(np.log1p(s) + s * epsilon,
                            np.log(s) - (1.0 + s) * epsilon) - np.log1p(2.0 * s)) / s
    out = np.where(small, near, far)
    return np.minimum(out * INFLATE, epsilon)


def pure_rdp(epsilon: float, orders: np.ndarray = ORDERS) -> np.ndarray:
    s = orders - 1.0
    log_p = -np.log1p(np.exp(-epsilon))
    log_q = -epsilon + log_p
    with np.errstate(over="ignore", invalid="ignore"):
        small = s * epsilon < 30.0
        # p·e^x + q·e^{−x} − 1 = 2·sinh²(x/2) + tanh(ε/2)·sinh(x) with x = sε: a sum of
        # non-negative terms (p·expm1(x) + q·expm1(−x) cancels to first order for small ε).
        x = s * epsilon
        near = np.log1p(2.0 * np.sinh(x / 2.0) ** 2 + np.tanh(epsilon / 2.0) * np.sinh(x)) / s
        far = np.logaddexp(log_p + s * epsilon, log_q - s * epsilon) / s
    out = np.where(small, near, far)
    return np.minimum(out * INFLATE, epsilon)


def rdp_to_epsilon(rdp: np.ndarray, delta: float, orders: np.ndarray = ORDERS) -> tuple[float, float]:
    """(ε, optimal order) from a composed RDP curve at δ, ε clipped at 0.

    Every order gives a valid ε; the chosen one is raised by a bound on its rounding error:
    each of its three terms carries at most a few ulps of its own magnitude (log, log1p, the
    division and the sums), and 16 ulps of the sum of magnitudes dominates them all."""
    s = orders - 1.0
    a = np.log1p(-1.0 / orders)
    b = (np.log(delta) + np.log(orders)) / s
    eps = rdp + a - b
    i = int(np.nanargmin(eps))
    value = float(eps[i])
    if not math.isfinite(value):
        return value, float(orders[i])
    err = 16.0 * ULP * (abs(float(rdp[i])) + abs(float(a[i])) + abs(float(b[i])))
    value = up(value + err + 1e-12 * abs(value))
    return max(0.0, value), float(orders[i])


def rdp_to_log_delta(rdp: np.ndarray, epsilon: float, orders: np.ndarray = ORDERS) -> float:
    """An upper bound on log δ(ε) from a composed RDP curve (min over orders, each raised by
    a bound on its rounding error, as in :func:`rdp_to_epsilon`)."""
    s = orders - 1.0
    a = np.log1p(-1.0 / orders)
    log_delta = s * (rdp - epsilon + a) - np.log(orders)
    with np.errstate(invalid="ignore", over="ignore"):
        err = 16.0 * ULP * (s * (np.abs(rdp) + abs(epsilon) + np.abs(a)) + np.log(orders))
    log_delta = log_delta + err
    value = float(np.nanmin(log_delta))
    return min(0.0, up(value + 1e-12 * abs(value)))


# zCDP: conversion over α continuously ---------------------------------------------------------
def _best_order(objective) -> float:
    """The α > 1 minimising ``objective(α)`` (bounded Brent on log(α − 1) ∈ [−25, 25], after
    a coarse scan): any α gives a valid bound, the search only makes it tight."""
    from scipy.optimize import minimize_scalar
    grid = np.linspace(-25.0, 25.0, 201)
    vals = [objective(1.0 + math.exp(x)) for x in grid]
    i = int(np.nanargmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(lambda x: objective(1.0 + math.exp(x)), bounds=(lo, hi),
                          method="bounded", options={"xatol": 1e-12})
    x = float(res.x) if vals[i] >= res.fun else float(grid[i])
    return 1.0 + math.exp(x)


def zcdp_to_epsilon(rho: float, delta: float) -> tuple[float, float]:
    """(ε, α) for ρ-zCDP at δ: the improved conversion (CKS20 Prop. 12) at the α minimising
    ε(α) = αρ + log(1 − 1/α) − (log δ + log α)/(α − 1) over α > 1 continuously, evaluated with
    :func:`rdp_to_epsilon`'s rounding-error bound (so an upper bound)."""
    log_d = math.log(delta)

    def f(a: float) -> float:
        return a * rho + math.log1p(-1.0 / a) - (log_d + math.log(a)) / (a - 1.0)

    alpha = np.array([_best_order(f)])
    return rdp_to_epsilon(zcdp_rdp(rho, alpha), delta, alpha)


def zcdp_to_log_delta(rho: float, epsilon: float) -> float:
    """An upper bound on log δ(ε) for ρ-zCDP, α optimised continuously."""
    def g(a: float) -> float:
        return (a - 1.0) * (a * rho - epsilon + math.log1p(-1.0 / a)) - math.log(a)

    alpha = np.array([_best_order(g)])
    return rdp_to_log_delta(zcdp_rdp(rho, alpha), epsilon, alpha)


# zCDP of the Laplace mechanism from its RDP curve ------------------------------------------------
_ZCDP_S = np.geomspace(1e-7, 1e5, 25_000)        # α − 1; consecutive α differ by ≤ 0.11 %


@functools.lru_cache(maxsize=1024)
def laplace_zcdp(epsilon: float) -> float:
    """A certified upper bound on the Laplace mechanism's own zCDP ρ = sup_{α>1} ε(α)/α
    (Bun–Steinke 2016, Def. 1.1) from its RDP curve ε(α) (Mironov 2017, Prop. 6).

    ε(α) is non-decreasing in α, so on [α_i, α_{i+1}] the ratio is ≤ ε(α_{i+1})/α_i; on
    (1, α_0] it is ≤ ε(α_0); beyond the last order α_N it is ≤ min(ε/α_N, ε·tanh(ε/2)) (ε(α) ≤ ε,
    and the randomized-response bound holds at every order).  The maximum of these pieces is
    an upper bound on the supremum, loose by at most the grid's ratio α_{i+1}/α_i (≤ 1.1e-3)
    and by ε(α_0) − KL at α_0 = 1 + 1e-7.  Numerically the supremum is the α → 1 limit, the KL
    divergence ε + e^{−ε} − 1 (0.3679 at ε = 1; randomized response: ε·tanh(ε/2) = 0.4621).
    Never above the generic ε·tanh(ε/2) (:func:`dpledger.accounting.pure.zcdp_of_pure`).
    """
    from dpledger.accounting.pure import zcdp_of_pure

    generic = zcdp_of_pure(epsilon)
    alphas = 1.0 + _ZCDP_S
    curve = laplace_rdp(epsilon, alphas)             # inflated by 1e-10: an upper bound
    pieces = np.empty(curve.size + 1)
    pieces[0] = curve[0]
    pieces[1:-1] = curve[1:] / alphas[:-1]
    pieces[-1] = min(epsilon / alphas[-1], generic)
    value = float(np.max(pieces)) * (1.0 + 4.0 * ULP)  # the division's rounding
    return min(generic, up(value))
