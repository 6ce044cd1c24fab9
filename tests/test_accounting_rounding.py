"""Issue 12 §3 (R6, safe-side rounding to the last bit) and issue 13 (a composition of `count`
identical releases costs O(1) in every non-PLD accountant).

Every certified ε, μ, ρ must be an upper bound *exactly*: the oracles here are exact rationals
(``fractions.Fraction``) and mpmath at 50 digits, never the float formula under test.

* regression tests for each repro of the issue (each failed before the fix);
* the outward-rounding primitives against exact arithmetic (hypothesis);
* the KOV bound for one group of many copies (:class:`HugeGroup`) against the exact binomial
  sum at 50 digits: never below, at most 0.06 in log δ above;
* a property test over random compositions: at every δ (down to 1e-300 for pure, 1e-15 for
  the others) the exact δ at each reported ε is ≤ δ (KOV for pure-ε releases, the GDP formula
  with the exact μ for Gaussians, and the RDP conversion recomputed in mpmath for RDP);
* counts 1e9, 1e12, 1e30: CPU time and memory of the accountants.
"""
from __future__ import annotations

import math
import time
import tracemalloc
from itertools import pairwise
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpledger.accounting import rdp as rdp_mod
from dpledger.accounting.accountants import ACCOUNTANTS_WITH_BEST as ACC
from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import mu_of_pure_epsilon
from dpledger.accounting.numerics import (VERIFY_MARGIN, float_down, float_up, mul_up, sqrt_up,
                                          sum_up, verified_epsilon)
from dpledger.accounting.pure import HugeGroup, PureComposition, zcdp_of_pure
from dpledger.accounting.releases import (DiscreteGaussianRelease, DiscreteLaplaceRelease,
                                          GaussianRelease, LaplaceRelease, PureEpsilonRelease,
                                          parse_release_spec)
from dpledger.accounting.schema import privacy_block

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _mp_precision():
    with mp.workdps(50):
        yield


def F(x) -> Fraction:
    return Fraction(x)


# -- independent oracles -------------------------------------------------------------------------
def mp_kov_log_delta(groups, eps):
    """log δ(ε) of the optimal composition of ε_i-DP groups (KOV / Murtagh–Vadhan): the exact
    randomized-response loss distribution, enumerated at 50 digits (small counts only)."""
    support = {mp.mpf(0): mp.mpf(1)}
    for e, k in groups:
        e = mp.mpf(e)
        q = 1 / (1 + mp.exp(e))
        new: dict = {}
        for l in range(k + 1):
            w = mp.binomial(k, l) * q ** l * (1 - q) ** (k - l)
            loss = e * (k - 2 * l)
            for s, p in support.items():
                new[s + loss] = new.get(s + loss, 0) + p * w
        support = new
    eps = mp.mpf(eps)
    d = mp.fsum(p * (1 - mp.exp(eps - s)) for s, p in support.items() if s > eps)
    return mp.log(d) if d > 0 else -mp.inf


def mp_binomial_kov_log_delta(eps0, k, eps, width=45):
    """log δ(ε) of k copies of ε₀-DP (KOV Thm 3.3) at 50 digits, summed over the binomial's
    terms within `width` standard deviations of the largest contributing term (ratios
    P(l+1)/P(l) = (k−l)/(l+1)·q/p, one loggamma); beyond, the terms are < e^{-1000} of it."""
    e0, eps = mp.mpf(eps0), mp.mpf(eps)
    q = 1 / (1 + mp.exp(e0))
    p = 1 - q
    lam = (k - eps / e0) / 2                      # contributing l < λ
    top = int(mp.ceil(lam)) - 1
    if top < 0:
        return -mp.inf
    sd = math.sqrt(k * float(q) * float(p)) + 1
    lo = max(0, min(top, int(k * float(q))) - int(width * sd) - 10)
    hi = min(top, k, int(k * float(q)) + int(width * sd) + 10)
    logw = (mp.loggamma(k + 1) - mp.loggamma(lo + 1) - mp.loggamma(k - lo + 1)
            + lo * mp.log(q) + (k - lo) * mp.log(p))
    w = mp.exp(logw)
    total = mp.mpf(0)
    for l in range(lo, hi + 1):
        total += w * (1 - mp.exp(eps - e0 * (k - 2 * l)))
        w = w * (k - l) / (l + 1) * q / p
    return mp.log(total) if total > 0 else -mp.inf


def mp_gdp_log_delta(eps, mu):
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    d = mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)
    return mp.log(d) if d > 0 else -mp.inf


def mp_rr_mu(eps):
    """GDP μ of randomized response with ε: −2Φ⁻¹(1/(1+e^ε)) = 2√2·erfinv(tanh(ε/2)), with
    enough digits that tanh(ε/2) = 1 − 2/(1+e^ε) stays below 1."""
    with mp.workdps(60 + int(float(eps) / 2.3)):
        return +(2 * mp.sqrt(2) * mp.erfinv(mp.tanh(mp.mpf(eps) / 2)))


def mp_release_rdp(release, alpha):
    """Mironov 2017's RDP at order α, at 50 digits, of one release (as dpledger accounts it)."""
    a = mp.mpf(alpha)
    if isinstance(release, GaussianRelease):
        return a * (mp.mpf(release.sensitivity) / mp.mpf(release.sigma)) ** 2 / 2
    if isinstance(release, DiscreteGaussianRelease):
        return a * mp.mpf(release.sensitivity) ** 2 / (2 * mp.mpf(release.sigma) ** 2)
    if isinstance(release, LaplaceRelease):
        e = mp.mpf(release.sensitivity) / mp.mpf(release.scale)
        v = mp.log(a / (2 * a - 1) * mp.exp((a - 1) * e) + (a - 1) / (2 * a - 1) * mp.exp(-a * e)) / (a - 1)
        return min(v, e)
    e = mp.mpf(release.epsilon) if isinstance(release, PureEpsilonRelease) else \
        mp.mpf(release.sensitivity) / mp.mpf(release.scale)
    v = mp.log((mp.exp(a * e) + mp.exp((1 - a) * e)) / (1 + mp.exp(e))) / (a - 1)
    return min(v, e)


def mp_rdp_log_delta(comp, eps, orders):
    """The RDP conversion (Balle et al. 2020 Thm 21) recomputed at 50 digits over `orders`."""
    best = mp.inf
    for alpha in orders:
        a = mp.mpf(alpha)
        curve = mp.fsum(c * mp_release_rdp(r, a) for r, c in comp.items)
        v = (a - 1) * (curve - mp.mpf(eps) + mp.log(1 - 1 / a)) - mp.log(a)
        best = min(best, v)
    return min(best, mp.mpf(0))


# -- the repros (each failed before the fix) ---------------------------------------------
def test_pure_sum_of_hundred_tenths_is_not_ten():
    """`compose pure:eps=0.1,count=100 --delta 1e-300` → 10.0, but 100 × fl(0.1) > 10."""
    comp = Composition.of([parse_release_spec("pure:eps=0.1,count=100")])
    exact = 100 * F(0.1)
    assert exact > 10
    assert F(comp.pure_epsilon()) >= exact
    assert comp.pure_epsilon() == float_up(exact)                    # and the next float only
    block = privacy_block([comp], [1e-300])
    got = block["epsilon"]["pure"]["1e-300"]
    assert F(got) >= exact or mp_kov_log_delta([(0.1, 100)], got) <= math.log(1e-300)
    assert F(block["pure_epsilon"]) >= exact
    assert F(block["epsilon_at_delta"]["1e-300"]) >= exact or \
        mp_kov_log_delta([(0.1, 100)], block["epsilon_at_delta"]["1e-300"]) <= math.log(1e-300)


def test_pure_composition_twenty_tenths_at_1e_30():
    """`PureComposition([(0.1, 20)]).epsilon(1e-30)` returned 2.0 (δ(2.0) = 2.8e-22)."""
    got = PureComposition([(0.1, 20)]).epsilon(1e-30)
    assert mp_kov_log_delta([(0.1, 20)], got) <= math.log(1e-30)
    assert mp_kov_log_delta([(0.1, 20)], 2.0) > math.log(1e-30)      # 2.0 is not valid
    assert got > 2.0


def test_gdp_mu_sqrt_rounds_up():
    """μ = √Σμ² rounded to nearest: σ = 3 gives 0.3333333333333333 < 1/3."""
    for sigma, count in ((3.0, 1), (7.0, 1), (0.3, 2), (1.7, 3), (2.9, 7)):
        comp = Composition.of([(GaussianRelease(sigma=sigma), count)])
        exact_mu2 = count / F(sigma) ** 2
        assert F(comp.gdp_mu()) ** 2 >= exact_mu2, (sigma, count)
        assert F(comp.gdp_mu2()) >= exact_mu2
        assert F(ACC["gdp"].mu(comp)) ** 2 >= exact_mu2
        # and the accountant's ε at δ satisfies the exact GDP curve of the exact μ
        mu = mp.sqrt(mp.mpf(exact_mu2.numerator) / exact_mu2.denominator)
        for d in (1e-3, 1e-15, 1e-300):
            assert mp_gdp_log_delta(ACC["gdp"].epsilon(comp, d), mu) <= math.log(d)


def test_zcdp_eps_tanh_rounds_up():
    """ε·tanh(ε/2) rounded to nearest: 0.6804775781208822 gave a ρ below the exact one."""
    for eps in (0.6804775781208822, 4.238694347316791, 3.821235348693304):
        exact = mp.mpf(eps) * mp.tanh(mp.mpf(eps) / 2)
        assert mp.mpf(zcdp_of_pure(eps)) >= exact
        assert mp.mpf(eps) * mp.tanh(mp.mpf(eps) / 2) > mp.mpf(eps * math.tanh(eps / 2))  # the bug
        comp = Composition.of([(PureEpsilonRelease(eps), 3)])
        assert mp.mpf(comp.zcdp_rho()) >= 3 * exact


def test_zcdp_sums_are_exact_then_rounded_up():
    comp = Composition.of([(GaussianRelease(sigma=3.0, sensitivity=1.5), 4),
                           (DiscreteGaussianRelease(sigma=7.0, sensitivity=3), 5)])
    exact = 4 * F(1.5) ** 2 / F(3.0) ** 2 / 2 + 5 * F(9) / (2 * F(7.0) ** 2)
    assert F(comp.zcdp_rho()) >= exact and comp.zcdp_rho() == float_up(exact)


def test_laplace_zcdp_is_its_own_not_randomized_response():
    """LaplaceRelease labelled ε·tanh(ε/2) "exact": that is randomized response's value; the
    Laplace mechanism's own ρ = sup_α ε(α)/α is smaller (0.368 vs 0.462 at ε = 1)."""
    comp = Composition.of([LaplaceRelease.from_epsilon(1.0)])
    assert comp.zcdp_rho() == pytest.approx(0.36788, abs=1e-3)
    assert comp.zcdp_rho() < 0.46
    assert LaplaceRelease.statuses["zcdp"] == "bound"
    for eps in (0.05, 0.3, 1.0, 2.0, 7.0, 30.0):
        rho = mp.mpf(rdp_mod.laplace_zcdp(eps))
        # an upper bound on Mironov's curve / α over a dense α grid, at 50 digits
        alphas = ([1 + mp.mpf(10) ** -j for j in range(2, 14)]
                  + [mp.mpf(1) + mp.mpf(x) / 100 for x in range(1, 400, 7)]
                  + [mp.mpf(x) for x in (5, 10, 30, 100, 1000, 10 ** 4, 10 ** 6)])
        lap = LaplaceRelease.from_epsilon(eps)
        ratios = [mp_release_rdp(lap, a) / a for a in alphas]
        assert max(ratios) <= rho, eps
        kl = mp.mpf(lap.epsilon) + mp.expm1(-mp.mpf(lap.epsilon))    # the α → 1 limit
        assert kl <= rho <= kl * (1 + 2e-3), eps
        assert rho <= mp.mpf(zcdp_of_pure(lap.epsilon))


def test_laplace_zcdp_against_dp_accounting_rdp():
    """dp-accounting's RDP of the Laplace mechanism / α never exceeds dpledger's ρ."""
    from dp_accounting import dp_event as E
    from dp_accounting.rdp import rdp_privacy_accountant as R

    for b in (0.5, 1.0, 4.0):
        acc = R.RdpAccountant(orders=[1.01, 1.1, 1.5, 2.0, 3.0, 8.0, 32.0, 256.0])
        acc.compose(E.LaplaceDpEvent(noise_multiplier=b))
        ratios = np.asarray(acc._rdp) / np.asarray(acc._orders)
        assert np.all(ratios <= rdp_mod.laplace_zcdp(1.0 / b) * (1 + 1e-9)), b


def test_count_is_an_exact_integer():
    assert parse_release_spec("laplace:eps=1,count=1e30")[1] == 10 ** 30
    assert parse_release_spec("laplace:eps=1,count=12345678901234567890123")[1] == \
        12345678901234567890123
    comp = Composition.of([parse_release_spec("pure:eps=0.1,count=1e30")])
    assert F(comp.pure_epsilon()) >= 10 ** 30 * F(0.1)


def test_overflow_is_a_status_not_a_traceback():
    comp = Composition.of([parse_release_spec("pure:eps=1e10,count=1e300")])
    block = privacy_block([comp], [1e-6])
    assert block["pure_epsilon"] is None and block["pure_epsilon_status"] == "skipped:overflow"
    assert block["zcdp_rho_status"] == "skipped:overflow"
    for name in ("pure", "gdp", "rdp"):
        assert block["epsilon_status"][name]["1e-06"] == "skipped:overflow", name
    assert block["epsilon_at_delta"]["1e-06"] is None
    assert block["epsilon_at_delta_source"]["1e-06"] == "overflow"


def test_theorem_values_round_up():
    from dpledger.accounting.theorems import hu_2025_dp_ts_ucb, ou_2024_ts_gaussian
    for T, b, c in ((10, 0, 3.0), (1000, 2, 0.7), (7, 1, 1.0)):
        mu = ou_2024_ts_gaussian(T, b, c).gdp_mu
        assert F(mu) ** 2 >= F(T) / (F(c) * (b + 1)), (T, b, c)
    for T, K, alpha, c0 in ((1000, 5, 0.5, 1.0), (10 ** 6, 10, 0.3, 0.01)):
        mu = mp.mpf(hu_2025_dp_ts_ucb(T, K, alpha, c0).gdp_mu)
        a = 1 - mp.mpf(alpha)
        assert mu ** 2 >= 2 * mp.mpf(c0) * mp.mpf(T) ** (a / 2) * mp.log(T) ** (3 * a / 2)


# -- primitives against exact arithmetic ---------------------------------------------------------
finite = st.floats(min_value=1e-300, max_value=1e300)


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 10 ** 30), finite), min_size=1, max_size=6))
def test_sum_up_is_the_next_float_above_the_exact_sum(pairs):
    exact = sum(F(c) * F(v) for c, v in pairs)
    got = sum_up(pairs)
    if math.isinf(got):
        assert exact > F(1.7976931348623157e308)
    else:
        assert F(got) >= exact and F(math.nextafter(got, 0.0)) < exact


@SETTINGS
@given(finite, finite)
def test_mul_div_sqrt_round_outward(a, b):
    p = mul_up(a, b)
    assert math.isinf(p) or F(p) >= F(a) * F(b)
    q = F(a) / F(b)
    lo, hi = float_down(q), float_up(q)
    assert math.isinf(hi) or F(hi) >= q
    assert F(lo) <= q
    assert math.isinf(hi) or lo == hi or math.nextafter(lo, math.inf) == hi   # adjacent floats
    s = sqrt_up(a)
    assert F(s) ** 2 >= F(a) and F(math.nextafter(s, 0.0)) ** 2 < F(a)


def test_float_up_of_mpmath_numbers():
    for text in ("-13.8155105589832431234", "1e-400", "-1e-400", "0.1", "-0.1", "3"):
        x = mp.mpf(text)
        up_, dn = float_up(x), float_down(x)
        assert mp.mpf(up_) >= x >= mp.mpf(dn) and (up_ == dn or math.nextafter(dn, math.inf) == up_)
    assert float_up(mp.mpf("-inf")) == -math.inf and float_up(mp.inf) == math.inf


def test_pure_delta_of_a_huge_group_is_certified():
    comp = Composition.of([(PureEpsilonRelease(0.1), 10 ** 9)])
    e = ACC["pure"].epsilon(comp, 1e-6)
    d = ACC["pure"].delta(comp, e)
    assert 1e-6 * 0.9 < d <= 1e-6                       # consistent with ε(δ), and tight
    assert ACC["pure"].delta(comp, e * 0.999) > d


def test_transcendental_margins_against_mpmath():
    """zcdp_of_pure (tanh + 4 ulps) and mu_of_pure_epsilon (1e-12 relative) are never below
    their exact values, over a sweep of ε from 1e-12 to 700."""
    rng = np.random.default_rng(20261124)
    for eps in np.concatenate([10.0 ** rng.uniform(-12, math.log10(700), 400), [1e-12, 700.0]]):
        eps = float(eps)
        assert mp.mpf(zcdp_of_pure(eps)) >= mp.mpf(eps) * mp.tanh(mp.mpf(eps) / 2), eps
        assert mp.mpf(mu_of_pure_epsilon(eps)) >= mp_rr_mu(eps), eps


def test_verified_epsilon_steps_up_until_the_exact_delta_clears():
    mu = mp.mpf(1)
    target = math.log(1e-6)
    # start below the exact ε: it must be raised to a float whose exact δ is ≤ 1e-6
    got = verified_epsilon(4.0, lambda e: mp_gdp_log_delta(e, mu), target)
    assert got > 4.0 and mp_gdp_log_delta(got, mu) <= target
    ok = verified_epsilon(got, lambda e: mp_gdp_log_delta(e, mu), target)
    assert ok == got


# -- one group of many copies ---------------------------------------------------------------------
@pytest.mark.parametrize("eps0,k", [(0.1, 70_000), (1e-3, 300_000), (2.0, 70_000), (0.5, 150_000),
                                    (15.0, 70_000), (9.0, 10 ** 6)])
def test_huge_group_bound_against_exact_binomial_sum(eps0, k):
    """ε₀ = 15 and 9: the binomial's mode is at l ≤ 1 (kq = 0.02 and 123), where a plan that
    starts at l = 1 must still count l = 1 (it did not, at first)."""
    hg = HugeGroup(eps0, k)
    mean = k * eps0 * math.tanh(eps0 / 2)
    sd = 2 * eps0 * math.sqrt(k) / 2
    points = [mean + z * sd for z in (-3.0, 0.0, 2.0, 5.0, 12.0, 30.0)]
    points += [k * eps0 - x * eps0 for x in (1.5, 3.0, 7.0, 20.0, 60.0)]    # the l ≈ 0 end
    for z, eps in enumerate(points):
        eps = max(0.0, eps)
        if eps >= k * eps0:
            continue
        exact = mp_binomial_kov_log_delta(eps0, k, eps)
        got = hg.log_delta(eps)
        hp = hg.log_delta_hp(eps)
        # a valid bound, up to mpmath's rounding at 113 bits, which the certified uses
        # (verified_epsilon, PureComposition.log_delta) cover with a margin of 1e-20
        assert hp + VERIFY_MARGIN >= exact, (eps0, k, z)
        assert got >= exact, (eps0, k, z)                        # and the float search's too
        assert hp <= exact + 0.06, (eps0, k, z, float(hp - exact))   # and tight
    for d in (1e-3, 1e-9, 1e-100):
        e = PureComposition([(eps0, k)]).epsilon(d)
        assert mp_binomial_kov_log_delta(eps0, k, e) <= math.log(d), (eps0, k, d)


def test_huge_group_epsilon_is_close_to_the_exact_path():
    """Above 2^16 copies the windowed bound replaces the exact support: its ε exceeds the
    exact-support ε (tight, and not below it) by at most a few thousandths of a σ of the loss."""
    import dpledger.accounting.pure as P
    for eps0, k in ((0.1, 70_000), (0.01, 100_000)):
        huge = PureComposition([(eps0, k)])
        assert huge._huge is not None
        old, P.EXACT_MAX_COUNT = P.EXACT_MAX_COUNT, 1 << 30
        try:
            exact_path = PureComposition([(eps0, k)])
        finally:
            P.EXACT_MAX_COUNT = old
        sd_loss = 2 * eps0 * math.sqrt(k / 4)
        for d in (1e-3, 1e-6, 1e-50):
            a, b = huge.epsilon(d), exact_path.epsilon(d)
            assert abs(a - b) <= 0.01 * sd_loss, (eps0, k, d, a, b)


def test_heterogeneous_with_a_huge_group_split_bound():
    """A huge group next to small ones: the split bound (each part at δ/2, added) is used when
    it beats coarsening (which merges everything into the larger ε), and it is valid: the exact
    δ at its ε, Σ_j P(L_small = l_j)·δ_huge(ε − l_j) at 50 digits, is ≤ δ."""
    groups = [(0.1, 70_000), (0.5, 30)]
    pc = PureComposition(groups)
    assert pc._split is not None
    q = 1 / (1 + mp.exp(mp.mpf(0.5)))
    small = [(mp.binomial(30, l) * q ** l * (1 - q) ** (30 - l), 0.5 * (30 - 2 * l))
             for l in range(31)]
    for d in (1e-3, 1e-9):
        e = pc.epsilon(d)
        assert e < pc._epsilon(d) and e <= pc.basic                   # the split helped
        # (terms beyond 25 σ of the binomial are below e^{-300} of its peak: negligible at d)
        exact = mp.fsum(w * mp.exp(mp_binomial_kov_log_delta(0.1, 70_000, e - l, width=25))
                        for w, l in small)
        assert exact <= d, (d, e)
        # and it is not looser than the parts' sum at δ/2 each
        alone = PureComposition([groups[0]]).epsilon(d / 2) + PureComposition([groups[1]]).epsilon(d / 2)
        assert e <= alone * (1 + 1e-12)


# -- random compositions: exact δ(ε_reported) ≤ δ ------------------------------------------------
PURE_POOL = [PureEpsilonRelease(0.1), PureEpsilonRelease(0.7), PureEpsilonRelease(2.0),
             LaplaceRelease(scale=3.0), LaplaceRelease(scale=0.7, sensitivity=0.3),
             DiscreteLaplaceRelease(scale=3.0, sensitivity=2)]
GAUSS_POOL = [GaussianRelease(sigma=3.0), GaussianRelease(sigma=0.7, sensitivity=1.3),
              GaussianRelease(sigma=10.0)]
DG_POOL = [DiscreteGaussianRelease(sigma=3.0, sensitivity=1)]

items = st.lists(st.tuples(st.sampled_from(PURE_POOL + GAUSS_POOL + DG_POOL), st.integers(1, 6)),
                 min_size=1, max_size=4)


def _pure_groups(comp):
    return [(r.epsilon, c) for r, c in comp.items]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items, st.sampled_from([1e-2, 1e-6, 1e-15]))
def test_reported_epsilons_satisfy_exact_delta(pairs, delta):
    comp = Composition.of(pairs)
    pure_only = all(not isinstance(r, (GaussianRelease, DiscreteGaussianRelease))
                    for r in comp.releases)
    gauss_only = all(isinstance(r, GaussianRelease) for r in comp.releases)
    deltas = [delta, 1e-300] if pure_only else [delta]
    for d in deltas:
        if pure_only:
            # KOV is the exact optimum for the releases seen as generic ε_i-DP (their
            # ε rounded up is ≥ the exact Δ/b): its δ at the pure accountant's ε is ≤ d
            e = ACC["pure"].epsilon(comp, d)
            assert mp_kov_log_delta(_pure_groups(comp), e) <= math.log(d)
            basic = sum(c * F(r.sensitivity) / F(r.scale) if not isinstance(r, PureEpsilonRelease)
                        else c * F(r.epsilon) for r, c in comp.items)
            assert F(comp.pure_epsilon()) >= basic
        if ACC["gdp"].supports(comp) == "ok":
            e = ACC["gdp"].epsilon(comp, d)
            mu2 = mp.fsum([c * (mp.mpf(r.sensitivity) / mp.mpf(r.sigma)) ** 2
                           if isinstance(r, GaussianRelease) else c * mp_rr_mu(r.epsilon) ** 2
                           for r, c in comp.items])
            assert mp_gdp_log_delta(e, mp.sqrt(mu2)) <= math.log(d)
            if gauss_only:
                assert mp.mpf(comp.gdp_mu()) ** 2 >= mu2
        if ACC["rdp"].supports(comp) == "ok":
            e = ACC["rdp"].epsilon(comp, d)
            # the RDP bound recomputed at 50 digits at the order the conversion chose (every
            # order's value bounds the exact δ)
            _, order = rdp_mod.rdp_to_epsilon(comp.rdp(), d)
            assert mp_rdp_log_delta(comp, e, [order]) <= math.log(d)
            if gauss_only:
                mu = mp.sqrt(mp.fsum([c * (mp.mpf(r.sensitivity) / mp.mpf(r.sigma)) ** 2
                                      for r, c in comp.items]))
                assert mp_gdp_log_delta(e, mu) <= math.log(d)     # the exact δ of Gaussians
        e, _ = ACC["best"].epsilon_and_source(comp, d)
        assert math.isfinite(e) or not pure_only


# -- huge counts: O(1) time and memory ------------------------------------------------------------
HUGE = [("laplace:eps=1,count={n}",), ("pure:eps=0.1,count={n}",),
        ("gaussian:sigma=2,count={n}",), ("discrete_gaussian:sigma=3,count={n}",),
        ("laplace:eps=0.5,count={n}", "gaussian:mu=0.1,count={n}")]


@pytest.mark.parametrize("n", ["1e9", "1e12"])
@pytest.mark.parametrize("specs", HUGE)
def test_huge_counts_cost_constant_time_and_memory(specs, n):
    """`compose … count=1e9` tried to allocate 7.45 GiB; now the pure, GDP and RDP blocks of
    1e9 and 1e12 copies take well under a second of CPU and under 200 MB."""
    from dpledger.accounting import accountants as A
    comp = Composition.of([parse_release_spec(s.format(n=n)) for s in specs])
    privacy_block([Composition.of([parse_release_spec("laplace:eps=1,count=3")])], [1e-6])  # warm
    deltas = (1e-3, 1e-5, 1e-6, 1e-9)

    def compute():
        A._VALUES.clear()
        A._PURE_CACHE.clear()
        values = {}
        for name in ("pure", "gdp", "rdp"):
            acc = A.ACCOUNTANTS[name]
            if acc.supports(comp) == "ok":
                values[name] = [acc.epsilon(comp, d) for d in deltas]
        for total in (comp.pure_epsilon(), comp.zcdp_rho(), comp.gdp_mu2()):
            assert total > 0
        return values

    t0 = time.process_time()                 # CPU time: robust to the machine's other load
    values = compute()
    cpu = time.process_time() - t0
    tracemalloc.start()                      # (tracemalloc slows Python down: measured apart)
    compute()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 200 * 2 ** 20, peak
    assert cpu < 1.0, cpu
    assert values and all(math.isfinite(v) and v > 0 for vs in values.values() for v in vs)
    for vs in values.values():
        assert all(a <= b for a, b in pairwise(vs))               # monotone in δ


@pytest.mark.parametrize("mu", [1e5, 5e5, 1e7])
def test_gdp_epsilon_safe_at_the_mu_of_huge_counts(mu):
    """1e12 Gaussians of σ = 2 give μ = 5e5: the GDP root solver stays on the safe side there
    (the extremes test stops at μ = 1e4)."""
    rel = GaussianRelease.from_mu(mu)
    exact_mu = 1 / mp.mpf(rel.sigma)
    for d in (1e-3, 1e-9, 1e-15, 1e-300):
        e = ACC["gdp"].epsilon(Composition.of([rel]), d)
        assert mp_gdp_log_delta(e, exact_mu) <= math.log(d), (mu, d)


def test_count_1e30_pure_is_finite_and_valid_against_gdp():
    """At 1e30 copies the pure (KOV) ε stays finite, below Σε and below the GDP bound of
    randomized response (which KOV, the exact optimum, can never exceed)."""
    comp = Composition.of([parse_release_spec("pure:eps=0.1,count=1e30")])
    for d in (1e-3, 1e-9):
        kov = ACC["pure"].epsilon(comp, d)
        assert math.isfinite(kov) and kov <= comp.pure_epsilon()
        assert kov <= ACC["gdp"].epsilon(comp, d) * (1 + 1e-9)
