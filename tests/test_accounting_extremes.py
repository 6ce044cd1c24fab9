"""R1 and R6 of docs/design.md#reliability-targets: conversions at the extremes are finite, monotone
and safe-side.

Inputs: δ down to 1e-300, μ from 1e-4 to 1e4, ε up to 1e4, k up to 1e6.  GDP is compared with
an mpmath evaluation of δ_μ(ε) at 60 digits: the returned ε must satisfy exact δ(ε) ≤ δ.
dp-accounting returns ∞ below δ ≈ 1e-15; dpledger's `best` must stay finite at 1e-300.
"""
from __future__ import annotations

import math
import os
from itertools import pairwise

import mpmath as mp
import numpy as np
import pytest

from dpledger.accounting.accountants import ACCOUNTANTS_WITH_BEST as ACC
from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import gdp_delta, gdp_epsilon, gdp_log_delta, mu_of_pure_epsilon
from dpledger.accounting.pure import kov_epsilon
from dpledger.accounting.releases import GaussianRelease, LaplaceRelease, PureEpsilonRelease

FULL = os.environ.get("DPLEDGER_FULL") == "1"
MUS = [1e-4, 1e-2, 0.5, 1.0, 10.0, 100.0, 1e3, 1e4]
DELTAS = [0.5, 1e-3, 1e-6, 1e-10, 1e-15, 1e-50, 1e-100, 1e-200, 1e-300]


@pytest.fixture(autouse=True)
def _mp_precision():
    with mp.workdps(60):
        yield


def mp_log_gdp_delta(eps, mu):
    """log δ_μ(ε) at 60 digits (Dong–Roth–Su Cor. 2.13)."""
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    d = mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)
    return mp.log(d) if d > 0 else -mp.inf


def _non_increasing(xs):
    return all(a >= b for a, b in pairwise(xs))


def _non_decreasing(xs):
    """ε over a *decreasing* δ grid must not decrease."""
    return all(a <= b for a, b in pairwise(xs))


# -- GDP ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mu", MUS)
def test_gdp_epsilon_safe_against_mpmath(mu):
    values = []
    for delta in DELTAS:
        e = gdp_epsilon(mu, delta)
        assert math.isfinite(e) and e >= 0.0
        exact_log = mp_log_gdp_delta(e, mu)
        assert exact_log <= math.log(delta), (mu, delta, e)             # never below exact ε
        if e > 0:                                                         # and not loose
            assert exact_log >= math.log(delta) + math.log(0.99), (mu, delta, e)
        else:
            assert mp_log_gdp_delta(0, mu) <= math.log(delta)
        values.append(e)
    assert _non_decreasing(values)                                        # monotone in δ


@pytest.mark.parametrize("delta", DELTAS)
def test_gdp_epsilon_monotone_in_mu(delta):
    values = [gdp_epsilon(mu, delta) for mu in MUS]
    assert all(a <= b for a, b in pairwise(values))


@pytest.mark.parametrize("mu", [1e-4, 1e-2, 1.0, 30.0, 1e4])
def test_gdp_log_delta_upper_bound_against_mpmath(mu):
    for eps in [0.0, 1e-3, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4]:
        got = gdp_log_delta(eps, mu)
        exact = mp_log_gdp_delta(eps, mu)
        if exact == -mp.inf:
            continue
        assert got >= exact, (mu, eps, got, exact)                          # δ rounded up
        if exact > -700:                                                    # representable
            assert gdp_delta(eps, mu) >= float(mp.exp(exact)) * (1 - 1e-15)
        assert got - exact <= 1e-6 * max(1.0, abs(float(exact))), (mu, eps)


def test_mu_of_pure_epsilon_large_epsilon():
    for eps in (50.0, 700.0, 1e3, 1e4):
        mu = mu_of_pure_epsilon(eps)
        assert math.isfinite(mu)
        # exact: Φ(−μ/2) = 1/(1+e^ε) ⇔ log Φ(−μ/2) = −ε − log1p(e^{−ε}); μ rounded up
        target = -mp.mpf(eps) - mp.log1p(mp.exp(-mp.mpf(eps)))
        assert mp.log(mp.ncdf(-mp.mpf(mu) / 2)) <= target
        assert mp.log(mp.ncdf(-mp.mpf(mu) / 2 * (1 - 1e-9))) > target


# -- RDP and pure accountants over the δ grid ------------------------------------------------------
COMPS = {
    "gauss_1e-4": Composition.of([GaussianRelease.from_mu(1e-4)]),
    "gauss_1e4": Composition.of([GaussianRelease.from_mu(1e4)]),
    "gauss_1e-3_x1e6": Composition.of([(GaussianRelease.from_mu(1e-3), 10 ** 6)]),
    "laplace_1e4": Composition.of([LaplaceRelease.from_epsilon(1e4)]),
    "laplace_0.1_x1000": Composition.of([(LaplaceRelease.from_epsilon(0.1), 1000)]),
    "rr_2_x50": Composition.of([(PureEpsilonRelease(2.0), 50)]),
    "mixed": Composition.of([(GaussianRelease.from_mu(0.5), 3), (LaplaceRelease.from_epsilon(5.0), 2)]),
}


@pytest.mark.parametrize("name", list(COMPS))
def test_rdp_finite_monotone_and_safe(name):
    comp = COMPS[name]
    values = [ACC["rdp"].epsilon(comp, d) for d in DELTAS]
    assert all(math.isfinite(v) and v >= 0 for v in values)
    assert _non_decreasing(values)
    deltas = [ACC["rdp"].delta(comp, e) for e in sorted(values)]
    assert _non_increasing(deltas)
    mu = comp.gdp_mu()
    if mu:                                           # all-Gaussian: exact GDP is the floor
        for d, v in zip(DELTAS, values, strict=True):
            assert mp_log_gdp_delta(v, mu) <= math.log(d), (d, v)
    if name == "laplace_1e4":                        # one Laplace: exact ε = ε₀ + 2 log(1 − δ)
        for d, v in zip(DELTAS, values, strict=True):
            assert v >= (1e4 + 2 * math.log1p(-d)) * (1 - 1e-12)


@pytest.mark.parametrize("name", ["laplace_1e4", "laplace_0.1_x1000", "rr_2_x50"])
def test_pure_finite_monotone_and_below_basic(name):
    comp = COMPS[name]
    values = [ACC["pure"].epsilon(comp, d) for d in DELTAS]
    assert all(math.isfinite(v) for v in values)
    assert _non_decreasing(values)
    assert values[0] >= 0 and values[-1] <= comp.pure_epsilon() * (1 + 1e-12)
    if name == "rr_2_x50":
        # for randomized response KOV is the exact optimum: at most every other valid bound
        for d, v in zip(DELTAS, values, strict=True):
            assert v <= ACC["rdp"].epsilon(comp, d) * (1 + 1e-9)
            assert v <= ACC["gdp"].epsilon(comp, d) * (1 + 1e-9)
    if name == "laplace_1e4":
        for d, v in zip(DELTAS, values, strict=True):
            assert v >= 1e4 + 2 * math.log1p(-d)


def _kov_k1e6_deltas():
    return DELTAS if FULL else [1e-6, 1e-300]            # decreasing, like DELTAS


@pytest.mark.slow
@pytest.mark.parametrize("eps0", [1e-3, 1.0, 1e4])
def test_kov_k_1e6(eps0):
    k = 10 ** 6
    comp = Composition.of([(PureEpsilonRelease(eps0), k)])
    values = [kov_epsilon(eps0, k, d) for d in _kov_k1e6_deltas()]
    assert all(math.isfinite(v) for v in values)
    assert _non_decreasing(values)
    assert values[-1] <= k * eps0 * (1 + 1e-12)
    # the exact optimum for k randomized responses is below every valid bound
    for d, v in zip(_kov_k1e6_deltas(), values, strict=True):
        assert v <= ACC["rdp"].epsilon(comp, d) * (1 + 1e-9)
        assert v <= ACC["gdp"].epsilon(comp, d) * (1 + 1e-9)
    if eps0 == 1e-3:
        # CLT sanity: the loss is ≈ N(kε₀tanh(ε₀/2), kε₀²), so ε(1e-6) is near GDP μ = √k·ε₀ = 1
        at = dict(zip(_kov_k1e6_deltas(), values, strict=True))[1e-6]
        assert at == pytest.approx(gdp_epsilon(1.0, 1e-6), rel=0.05)


# -- best accountant at tiny δ ------------------------------------------------------------------
def test_dp_accounting_pld_is_infinite_below_1e15():
    """The defect this layer works around: dp-accounting gives ∞ at δ = 1e-20."""
    from dp_accounting import dp_event as E
    from dp_accounting.pld import pld_privacy_accountant as P

    acc = P.PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(E.LaplaceDpEvent(noise_multiplier=2.0), 10)
    assert math.isinf(acc.get_epsilon(1e-20))
    comp = Composition.of([(LaplaceRelease(scale=2.0), 10)])
    best, source = ACC["best"].epsilon_and_source(comp, 1e-20)
    assert math.isfinite(best) and source != "pld" and best <= 5.0 * (1 + 1e-12)


@pytest.mark.parametrize("name", ["gauss_1e-4", "gauss_1e4", "gauss_1e-3_x1e6", "laplace_1e4",
                                  "laplace_0.1_x1000", "rr_2_x50", "mixed"])
def test_best_finite_at_1e_300(name):
    comp = COMPS[name]
    values = [ACC["best"].epsilon(comp, d) for d in (1e-12, 1e-50, 1e-300)]
    assert all(math.isfinite(v) for v in values) and _non_decreasing(values)
    mu = comp.gdp_mu()
    if mu:
        assert mp_log_gdp_delta(values[-1], mu) <= math.log(1e-300)
        assert values[-1] == pytest.approx(gdp_epsilon(mu, 1e-300), rel=1e-12)
    if name != "laplace_1e4":      # best.delta builds the PLD of Laplace(ε₀ = 1e4): ~8 s
        d = ACC["best"].delta(comp, values[-1])
        assert 0.0 <= d <= 1e-300 * (1 + 1e-9)


def test_extreme_inputs_never_nan():
    for mu in (1e-4, 1e4):
        for eps in (0.0, 1e-12, 1e4):
            assert not math.isnan(gdp_delta(eps, mu))
    curve = Composition.of([(LaplaceRelease.from_epsilon(1e4), 10 ** 6)]).rdp()
    assert np.all(np.isfinite(curve)) and np.all(curve >= 0)
    e = ACC["rdp"].epsilon(Composition.of([(LaplaceRelease.from_epsilon(1e4), 10 ** 6)]), 1e-300)
    assert math.isfinite(e) and e <= 1e10 * (1 + 1e-9) + 1e3
