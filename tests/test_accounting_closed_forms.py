"""Closed-form anchors for the accounting layer (docs/design.md#accounting).

Every reference value is recomputed here, independently of dpledger, in mpmath (50+ digits) from
the formula in the notes; published 4-digit values are checked as well so that a wrong oracle
cannot go unnoticed.
"""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpledger.accounting import rdp as rdp_mod
from dpledger.accounting.accountants import ACCOUNTANTS_WITH_BEST as ACC
from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import gdp_delta, gdp_epsilon, mu_of_pure_epsilon
from dpledger.accounting.pure import kov_epsilon, zcdp_of_pure
from dpledger.accounting.releases import (DiscreteGaussianRelease, DiscreteLaplaceRelease,
                                          GaussianRelease, LaplaceRelease, PureEpsilonRelease)


@pytest.fixture(autouse=True)
def _mp_precision():
    """mpmath's precision is global: set it for each test of this module, restore after."""
    with mp.workdps(50):
        yield


# -- independent oracles (mpmath) -------------------------------------------------------------
def mp_gdp_delta(eps, mu):
    """δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong–Roth–Su Cor. 2.13)."""
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def mp_laplace_delta(eps, eps0):
    """δ(ε) = 1 − e^{(ε−ε₀)/2} for 0 ≤ ε ≤ ε₀, 0 beyond."""
    eps, eps0 = mp.mpf(eps), mp.mpf(eps0)
    return 1 - mp.exp((eps - eps0) / 2) if eps < eps0 else mp.mpf(0)


def mp_laplace_rdp(eps, a):
    """Mironov 2017 Prop. 6."""
    a, eps = mp.mpf(a), mp.mpf(eps)
    return mp.log(a / (2 * a - 1) * mp.exp((a - 1) * eps)
                  + (a - 1) / (2 * a - 1) * mp.exp(-a * eps)) / (a - 1)


def mp_rr_rdp(eps, a):
    """RDP of binary randomized response (worst case of ε-DP) (Mironov 2017, randomized
    response)."""
    a, eps = mp.mpf(a), mp.mpf(eps)
    return mp.log((mp.exp(a * eps) + mp.exp((1 - a) * eps)) / (1 + mp.exp(eps))) / (a - 1)


def mp_kov_log_delta(eps0, k, eps):
    """KOV Thm 3.3 at 50 digits: δ(ε) = Σ_l C(k,l) p^{k−l} q^l (1 − e^{ε−(k−2l)ε₀})₊."""
    eps0, eps = mp.mpf(eps0), mp.mpf(eps)
    p = mp.exp(eps0) / (1 + mp.exp(eps0))
    q = 1 - p
    total = mp.mpf(0)
    for l in range(k + 1):
        loss = (k - 2 * l) * eps0
        if loss <= eps:
            break
        total += mp.binomial(k, l) * p ** (k - l) * q ** l * (1 - mp.exp(eps - loss))
    return mp.log(total) if total > 0 else -mp.inf


# -- GDP ----------------------------------------------------------------------------------------
GDP_ANCHORS = [(1.0, 0.5, 0.2384), (1.0, 1.0, 0.1269), (1.0, 2.0, 0.0209), (0.5, 1.0, 0.00683)]


@pytest.mark.parametrize("mu,eps,published", GDP_ANCHORS)
def test_gdp_delta_closed_form(mu, eps, published):
    exact = mp_gdp_delta(eps, mu)
    # the oracle agrees with the published anchor (to its printed digits)
    assert abs(float(exact) - published) <= 0.5 * 10 ** -(len(repr(published).split(".")[1]))
    got = gdp_delta(eps, mu)
    assert got >= float(exact) * (1 - 1e-15)          # never below exact (R6)
    assert got == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize("mu,eps,published", GDP_ANCHORS)
def test_gdp_accountant_on_composed_gaussians(mu, eps, published):
    # 4 Gaussians of μ/2 compose to μ exactly (Σμ_i² = μ²)
    comp = Composition.of([(GaussianRelease.from_mu(mu / 2.0), 4)])
    assert comp.gdp_mu() == pytest.approx(mu, rel=1e-15)
    exact = float(mp_gdp_delta(eps, mu))
    got = ACC["gdp"].delta(comp, eps)
    assert got == pytest.approx(exact, rel=1e-9) and got >= exact * (1 - 1e-12)
    # and the inverse: ε at δ = exact lands on eps from above
    e = ACC["gdp"].epsilon(comp, exact)
    assert mp_gdp_delta(e, mu) <= exact
    assert e == pytest.approx(eps, rel=1e-8) and e >= eps * (1 - 1e-12)


@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0])
def test_gdp_epsilon_zero_iff_delta_above_delta0(mu):
    d0 = float(2 * mp.ncdf(mp.mpf(mu) / 2) - 1)        # δ_μ(0)
    assert gdp_epsilon(mu, min(0.999, d0 * 1.001)) == 0.0
    assert gdp_epsilon(mu, d0 * 0.999) > 0.0


@pytest.mark.parametrize("eps", [1e-12, 3.3e-10, 1e-7, 2.7e-5, 1e-3, 0.1, 0.5, 1.0, 2.0, 5.0])
def test_mu_of_pure_epsilon_is_randomized_response(eps):
    # μ = 2Φ⁻¹(e^ε/(1+e^ε)) (Dong, Roth & Su 2022); dp-accounting's test expects ≈ 2.358 at ε = 2
    exact = 2 * mp.sqrt(2) * mp.erfinv(2 * mp.exp(eps) / (1 + mp.exp(eps)) - 1)
    got = mu_of_pure_epsilon(eps)
    assert got >= float(exact) and got == pytest.approx(float(exact), rel=1e-11)
    if eps == 2.0:
        assert got == pytest.approx(2.358, abs=5e-4)


def test_mu_of_pure_epsilon_small_epsilon_sweep():
    # 40 log-spaced ε in [1e-12, 1e-2]: the μ bound must never fall below exact (R6)
    for eps in np.geomspace(1e-12, 1e-2, 40):
        exact = 2 * mp.sqrt(2) * mp.erfinv(mp.tanh(mp.mpf(float(eps)) / 2))
        got = mu_of_pure_epsilon(float(eps))
        assert got >= exact, eps
        assert float((got - exact) / exact) < 1e-11, eps


# -- Laplace δ(ε) -------------------------------------------------------------------------------
@pytest.mark.parametrize("eps0", [0.5, 1.0, 3.0])
def test_laplace_delta_closed_form_pld_and_best(eps0):
    comp = Composition.of([LaplaceRelease.from_epsilon(eps0)])
    for frac in (0.0, 0.1, 0.3, 0.5, 0.8, 0.95):
        eps = frac * eps0
        exact = float(mp_laplace_delta(eps, eps0))
        pld = ACC["pld"].delta(comp, eps)
        best = ACC["best"].delta(comp, eps)
        assert pld >= exact * (1 - 1e-9), (eps, pld, exact)          # PLD ≥ exact
        assert pld == pytest.approx(exact, rel=1e-3)
        assert best >= exact * (1 - 1e-9), (eps, best, exact)
        assert best <= pld * (1 + 1e-12)                               # best is the min
        # every other accountant is a valid (looser) bound too
        for name in ("pure", "gdp", "rdp"):
            assert ACC[name].delta(comp, eps) >= exact * (1 - 1e-9), name
    # beyond ε₀ the exact δ is 0 and the pure accountant says so
    assert ACC["pure"].delta(comp, eps0) == 0.0


@pytest.mark.parametrize("eps0", [0.5, 2.0])
def test_laplace_epsilon_inverse_closed_form(eps0):
    # ε(δ) = ε₀ + 2 log(1 − δ) for δ ≤ 1 − e^{−ε₀/2}
    comp = Composition.of([LaplaceRelease.from_epsilon(eps0)])
    for delta in (1e-1, 1e-3, 1e-6):
        exact = eps0 + 2 * math.log1p(-delta)
        for name in ("pld", "best", "pure", "rdp"):
            e = ACC[name].epsilon(comp, delta)
            assert e >= exact * (1 - 1e-9), (name, delta, e, exact)
        assert ACC["pld"].epsilon(comp, delta) == pytest.approx(exact, rel=1e-3)


# -- RDP curves ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mu", [1e-3, 0.5, 1.0, 7.0])
def test_gaussian_rdp_is_alpha_mu2_over_2(mu):
    comp = Composition.of([(GaussianRelease(sigma=2.0 / mu, sensitivity=2.0), 3)])
    curve = comp.rdp()
    exact = rdp_mod.ORDERS * 3 * mu * mu / 2.0
    assert np.all(curve >= exact * (1 - 1e-15))
    np.testing.assert_allclose(curve, exact, rtol=1e-9)


@pytest.mark.parametrize("eps", [1e-9, 1e-6, 0.05, 1.0, 4.0])
def test_laplace_and_rr_rdp_against_mpmath(eps):
    orders = rdp_mod.ORDERS[::11]
    lap = rdp_mod.laplace_rdp(eps, orders)
    rr = rdp_mod.pure_rdp(eps, orders)
    for a, x, y in zip(orders, lap, rr, strict=True):
        ex_l = min(mp_laplace_rdp(eps, float(a)), mp.mpf(eps))
        ex_r = min(mp_rr_rdp(eps, float(a)), mp.mpf(eps))
        assert x >= ex_l and float((x - ex_l) / ex_l) < 1e-9, (a, x, ex_l)
        assert y >= ex_r and float((y - ex_r) / ex_r) < 1e-9, (a, y, ex_r)
    # Laplace is strictly more private than generic ε-DP at every order
    assert np.all(lap <= rr * (1 + 1e-9))


def test_rdp_accountant_gaussian_matches_independent_conversion():
    # ε = min_α [αρ + log((α−1)/α) − (log δ + log α)/(α−1)], minimised here by a fine scalar
    # search (mpmath) over continuous α: the grid minimum can only be above it, and by < 1e-3.
    mu, delta = 1.3, 1e-6
    rho = mp.mpf(mu) ** 2 / 2

    def f(a):
        return a * rho + mp.log((a - 1) / a) - (mp.log(delta) + mp.log(a)) / (a - 1)

    a_star = mp.findroot(lambda a: mp.diff(f, a), 4.0)
    exact = float(f(a_star))
    got = ACC["rdp"].epsilon(Composition.of([GaussianRelease.from_mu(mu)]), delta)
    assert exact * (1 - 1e-12) <= got <= exact * (1 + 1e-3)
    # and RDP is never below the exact GDP value
    assert got >= gdp_epsilon(mu, delta)


# -- zCDP ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 8.0])
def test_zcdp_of_pure_epsilon_is_eps_tanh(eps):
    rho = float(mp.mpf(eps) * mp.tanh(mp.mpf(eps) / 2))
    assert zcdp_of_pure(eps) == pytest.approx(rho, rel=1e-14)
    for rel, c in ((PureEpsilonRelease(eps), 3),
                   (DiscreteLaplaceRelease(scale=2.0 / eps, sensitivity=2), 5)):
        assert Composition.of([(rel, c)]).zcdp_rho() == pytest.approx(c * rho, rel=1e-14)
    # issue 12 §3: the continuous Laplace has its own, smaller ρ (its KL, ε + e^{−ε} − 1),
    # no longer randomized response's ε·tanh(ε/2)
    lap = Composition.of([(LaplaceRelease.from_epsilon(eps), 2)]).zcdp_rho()
    kl = float(mp.mpf(eps) + mp.expm1(-mp.mpf(eps)))
    assert 2 * kl <= lap <= 2 * rho and lap == pytest.approx(2 * kl, rel=2e-3)
    assert rho <= eps * eps / 2                            # tighter than Bun–Steinke


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_zcdp_is_sup_of_rr_rdp_over_alpha(eps):
    rho = mp.mpf(eps) * mp.tanh(mp.mpf(eps) / 2)
    # mpmath: the ratio RDP(α)/α over a dense α grid never exceeds ρ and approaches it as α → 1
    alphas = [1 + mp.mpf(10) ** -k for k in range(1, 16)] + [mp.mpf(x) for x in (1.5, 2, 3, 10, 100)]
    ratios = [mp_rr_rdp(eps, a) / a for a in alphas]
    assert max(ratios) <= rho
    assert abs(ratios[14] - rho) / rho < 1e-13                     # α = 1 + 1e-15
    # dpledger's own RR curve: max over its grid / α ≤ ρ, and within 1e-4 of it (grid starts at
    # α = 1 + 1e-5)
    ratio = float(np.max(rdp_mod.pure_rdp(eps) / rdp_mod.ORDERS))
    comp = Composition.of([PureEpsilonRelease(eps)])
    assert ratio <= comp.zcdp_rho() * (1 + 1e-9)
    assert ratio == pytest.approx(float(rho), rel=1e-4)
    assert comp.zcdp_rho() == pytest.approx(float(rho), rel=1e-14)


def test_zcdp_gaussian_and_discrete_gaussian():
    comp = Composition.of([(GaussianRelease(sigma=3.0, sensitivity=1.5), 4),
                           (DiscreteGaussianRelease(sigma=5.0, sensitivity=2), 3)])
    assert comp.zcdp_rho() == pytest.approx(4 * 1.5 ** 2 / (2 * 9.0) + 3 * 4 / (2 * 25.0), rel=1e-14)


# -- KOV ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps0,k,published", [(0.1, 100, 4.774568), (0.1, 1000, 19.344671),
                                              (1.0, 1000, 591.0797)])
def test_kov_values(eps0, k, published):
    delta = 1e-6
    # independent oracle: δ at the published value (50-digit binomial sum) brackets δ
    digits = len(repr(published).split(".")[1])
    lo, hi = published - 0.5 * 10 ** -digits, published + 0.5 * 10 ** -digits
    assert mp_kov_log_delta(eps0, k, lo) > math.log(delta) > mp_kov_log_delta(eps0, k, hi)
    for comp in (Composition.of([(PureEpsilonRelease(eps0), k)]),
                 Composition.of([(LaplaceRelease.from_epsilon(eps0), k)])):
        got = ACC["pure"].epsilon(comp, delta)
        assert mp_kov_log_delta(eps0, k, got) <= math.log(delta)      # valid: ≥ exact
        assert got >= lo and got <= published * (1 + 1e-6)
    assert kov_epsilon(eps0, k, delta) == pytest.approx(published, rel=1e-6)
