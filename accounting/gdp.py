"""Gaussian differential privacy (Dong, Roth, Su 2022).

* Duality (Cor. 2.13): μ-GDP ⇔ (ε, δ_μ(ε))-DP for all ε ≥ 0 with
  δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2).
* ε-DP ⇒ μ-GDP with μ = −2Φ⁻¹(1/(1+e^ε)) (tight for randomized response).

Evaluated in log space: log δ = logΦ(a) + log(−expm1(ε + logΦ(b) − logΦ(a))).  The cancellation
inside expm1 is bounded explicitly and δ is inflated by it, so every returned δ is an upper
bound on the exact value (R6); when the bound would be vacuous we fall back to δ ≤ Φ(a).
"""
from __future__ import annotations

import math


from dpledger.accounting.numerics import (ULP, exp_up, log_target, solve_decreasing,
                                         solve_increasing)
from dpledger.errors import check_delta, check_nonnegative, check_positive


def gdp_log_delta(epsilon: float, mu: float) -> float:
    """Upper bound on log δ_μ(ε) (DRS Cor. 2.13), safe against cancellation."""
    if epsilon < 0:
        epsilon = 0.0
    from scipy.special import log_ndtr     # imported on use: 0.2 s a run without Gaussians skips
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    la = float(log_ndtr(a))
    lb = float(log_ndtr(b))
    x = epsilon + lb - la           # log(e^ε Φ(b) / Φ(a)) < 0 in exact arithmetic
    err = 16.0 * ULP * (abs(epsilon) + abs(la) + abs(lb) + 1.0)
    if x >= -2.0 * err:
        return la                   # cancellation swamps the difference: use δ ≤ Φ(a)
    return la + math.log(-math.expm1(x)) + math.log1p(err / -x)


def gdp_delta(epsilon: float, mu: float) -> float:
    """δ_μ(ε), rounded up."""
    check_nonnegative("epsilon", epsilon)
    check_positive("mu", mu)
    return min(1.0, exp_up(gdp_log_delta(epsilon, mu)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε (rounded up) with δ_μ(ε) ≤ δ; 0 when δ ≥ δ_μ(0) = 2Φ(μ/2) − 1.

    Data-dependent bracket [0, μ²/2 + μ·Φ⁻¹(1−δ)], valid because δ_μ(ε) ≤ Φ(−ε/μ + μ/2).
    """
    mu = check_positive("mu", mu)
    delta = check_delta(delta)
    target = log_target(delta)
    if gdp_log_delta(0.0, mu) <= target:
        return 0.0
    from scipy.special import ndtri
    hi = mu * mu / 2.0 + mu * float(-ndtri(delta)) + 1e-12
    while gdp_log_delta(hi, mu) > target:   # the bracket is exact in theory; guard rounding
        hi = hi * 1.01 + 1e-9
    return solve_decreasing(lambda e: gdp_log_delta(e, mu), target, 0.0, hi)


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """Largest μ with δ_μ(ε) ≤ δ (calibration; δ_μ(ε) increases in μ)."""
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    target = log_target(delta)
    hi = 1.0
    while gdp_log_delta(epsilon, hi) <= target:
        hi *= 2.0
        if hi > 1e8:
            break
    return solve_increasing(lambda m: gdp_log_delta(epsilon, m), target, 1e-12, hi)


def mu_of_pure_epsilon(epsilon: float) -> float:
    """GDP μ of a generic ε-DP release: −2Φ⁻¹(1/(1+e^ε)), rounded up by 1e-12 relative.

    For ε < 1 computed as 2√2·erfinv(tanh(ε/2)) (relative error ~4e-16 down to ε = 1e-14);
    above, as −2·ndtri_exp(−log1p(e^ε)) so that ε up to 1e4 does not underflow.  (The
    ndtri_exp form alone loses ~1e-16/ε relative for small ε: 1e-7 below exact at ε = 1e-10.)
    """
    epsilon = check_positive("epsilon", epsilon)
    from scipy.special import erfinv, ndtri_exp
    if epsilon < 1.0:
        return 2.0 * math.sqrt(2.0) * float(erfinv(math.tanh(epsilon / 2.0))) * (1.0 + 1e-12)
    log_q = -(epsilon + math.log1p(math.exp(-epsilon)))
    return -2.0 * float(ndtri_exp(log_q)) * (1.0 + 1e-12)


def pure_epsilon_for_mu(mu: float) -> float:
    """Largest ε (rounded down) whose ε-DP guarantee implies μ-GDP: the inverse of
    :func:`mu_of_pure_epsilon`, ε = ln(Φ(μ/2)/Φ(−μ/2)) (randomized response with this ε has
    trade-off curve above G_μ, and every ε-DP mechanism is dominated by it: Kairouz, Oh &
    Viswanath 2015; Dong, Roth & Su 2022, Prop. 2.5 / Cor. 2.13).  An ε-DP policy run at this ε
    is at least as private as a μ-GDP one at every (ε′, δ) — the currency matching that favours
    neither side's conversion.  Checked against the forward map: mu_of_pure_epsilon(ε) ≤ μ."""
    mu = check_positive("mu", mu)
    from scipy.special import log_ndtr
    eps = float(log_ndtr(mu / 2.0) - log_ndtr(-mu / 2.0)) * (1.0 - 1e-11)
    while eps > 0.0 and mu_of_pure_epsilon(eps) > mu:   # the forward map rounds up by 1e-12
        eps *= 1.0 - 1e-10
    return eps
