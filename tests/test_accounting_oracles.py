"""Independent oracles for composed releases, and the dp-accounting interchange.

Oracles (none of them uses dp-accounting or dpledger):

* one release: the closed forms of Dong, Roth & Su 2022 (GDP) and the Laplace mechanism's exact PLD;
* two or three releases: numerical integration (mpmath) of the privacy loss,
  δ(ε) = E_P[(1 − e^{ε−L})₊] with L the sum of the single-release losses.  A Laplace loss of
  ε₀ has atoms +ε₀ (mass ½) and −ε₀ (mass e^{−ε₀}/2) and density ¼e^{(ℓ−ε₀)/2} on (−ε₀, ε₀)
 ; a Gaussian loss of μ is N(μ²/2, μ²).  The composition is computed as
  E_{L₁}[δ_{2..n}(ε − L₁)], one quadrature per Laplace, breakpoints at every kink;
* k identical releases: the KOV binomial sum (randomized response), the exact lattice
  convolution of discrete-Laplace losses, and GDP for Gaussians.

Then every accountant must be sound (δ ≥ exact·(1 − 1e-9), exact δ(ε_acc) ≤ δ·(1 + 1e-9)) and
PLD must be within 1e-3 of exact.  RDP ≥ PLD is not a theorem and is not tested.
"""
from __future__ import annotations

import functools
import math
import os
from itertools import pairwise

import mpmath as mp
import pytest
from scipy.integrate import quad

from dpledger.accounting.accountants import ACCOUNTANTS_WITH_BEST as ACC
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import (DiscreteLaplaceRelease, GaussianRelease,
                                          LaplaceRelease, PureEpsilonRelease)


@pytest.fixture(autouse=True)
def _mp_precision():
    """mpmath's precision is global: set it for each test of this module, restore after."""
    with mp.workdps(30):
        yield
SOUND = 1e-9       # relative slack allowed for float rounding in soundness checks
PLD_REL = 1e-3     # PLD accuracy against exact


# -- single-release hockey-stick functions at any real argument c ------------------------------
def lap_hockey(c, e):
    """E[(1 − e^{c−L})₊] for one Laplace loss of ε₀ = e, closed form from its PLD:
    0 for c ≥ e; 1 − e^{(c−e)/2} for −e < c < e; 1 − e^c for c ≤ −e."""
    c, e = mp.mpf(c), mp.mpf(e)
    if c >= e:
        return mp.mpf(0)
    if c > -e:
        return 1 - mp.exp((c - e) / 2)
    return 1 - mp.exp(c)


def lap_hockey_quad(c, e):
    """The same by quadrature of the PLD (atoms + density), to validate the closed form."""
    c, e = mp.mpf(c), mp.mpf(e)
    atoms = (max(0, 1 - mp.exp(c - e)) / 2 + mp.exp(-e) / 2 * max(0, 1 - mp.exp(c + e)))
    lo = max(c, -e)
    cont = mp.quad(lambda l: mp.exp((l - e) / 2) / 4 * (1 - mp.exp(c - l)), [lo, e]) if lo < e else 0
    return atoms + cont


def gauss_hockey(c, mu):
    """E[(1 − e^{c−L})₊] for L ~ N(μ²/2, μ²): Φ(−c/μ + μ/2) − e^c Φ(−c/μ − μ/2), any real c."""
    c, mu = mp.mpf(c), mp.mpf(mu)
    return mp.ncdf(-c / mu + mu / 2) - mp.exp(c) * mp.ncdf(-c / mu - mu / 2)


def gauss_hockey_quad(c, mu):
    c, mu = mp.mpf(c), mp.mpf(mu)
    dens = lambda g: mp.npdf(g, mu * mu / 2, mu)                        # noqa: E731
    return mp.quad(lambda g: dens(g) * (1 - mp.exp(c - g)), [c, c + 1, mp.inf])


def _kinks(eps_list):
    ks = {mp.mpf(0)}
    for e in eps_list:
        ks = {k + s * mp.mpf(e) for k in ks for s in (1, -1)}
    return sorted(ks)


def exact_delta(eps, laplaces=(), gauss_mu=None):
    """δ(ε) of Laplace(ε_i) for ε_i in ``laplaces`` composed with an optional Gaussian(μ):
    mpmath for up to two releases, scipy (double precision, relative error ~1e-13) for three
    Laplaces."""
    laplaces = tuple(float(e) for e in laplaces)
    if gauss_mu is None and len(laplaces) >= 3:
        return mp.mpf(exact_delta_scipy(eps, laplaces))
    return _exact_delta(mp.mpf(eps), laplaces, None if gauss_mu is None else float(gauss_mu))


def _exact_delta(c, laplaces, gauss_mu):
    if gauss_mu is not None and not laplaces:
        return gauss_hockey(c, gauss_mu)
    if gauss_mu is None and len(laplaces) == 1:
        return lap_hockey(c, laplaces[0])
    e, rest = mp.mpf(laplaces[0]), laplaces[1:]
    inner = lambda x: _exact_delta(x, rest, gauss_mu)                    # noqa: E731
    # kinks of the inner function: ±ε sums of the remaining Laplaces; a Gaussian's hockey stick
    # bends around 0 (a kink in the limit μ → 0)
    kinks = _kinks(rest) if gauss_mu is None else [mp.mpf(0)]
    pts = [-e] + sorted(c - k for k in kinks if -e < c - k < e) + [e]
    cont = mp.quad(lambda l: mp.exp((l - e) / 2) / 4 * inner(c - l), pts)
    return inner(c - e) / 2 + mp.exp(-e) / 2 * inner(c + e) + cont


# the same recursion in double precision with scipy's adaptive Gauss–Kronrod (used for three
# releases, where nested mpmath quadrature takes seconds); cross-checked against mpmath below
def _lap_hockey_f(c, e):
    if c >= e:
        return 0.0
    if c > -e:
        return -math.expm1((c - e) / 2.0)
    return -math.expm1(c)


def exact_delta_scipy(eps, laplaces):
    laplaces = tuple(float(e) for e in laplaces)
    if len(laplaces) == 1:
        return _lap_hockey_f(float(eps), laplaces[0])
    e, rest = laplaces[0], laplaces[1:]
    kinks = [float(k) for k in _kinks(rest)]
    c = float(eps)
    pts = [-e] + sorted(c - k for k in kinks if -e < c - k < e) + [e]
    cont = math.fsum(
        quad(lambda l: 0.25 * math.exp((l - e) / 2.0) * exact_delta_scipy(c - l, rest), a, b,
             epsabs=0.0, epsrel=1e-13, limit=200)[0]
        for a, b in pairwise(pts) if b > a)
    return (0.5 * exact_delta_scipy(c - e, rest) + 0.5 * math.exp(-e) * exact_delta_scipy(c + e, rest)
            + cont)


def kov_delta(eps0, k, eps):
    """Randomized response ε₀, k-fold (KOV Thm 3.3), 30 digits."""
    eps0, eps = mp.mpf(eps0), mp.mpf(eps)
    p = mp.exp(eps0) / (1 + mp.exp(eps0))
    total = mp.mpf(0)
    for l in range(k + 1):
        loss = (k - 2 * l) * eps0
        if loss <= eps:
            break
        total += mp.binomial(k, l) * p ** (k - l) * (1 - p) ** l * (1 - mp.exp(eps - loss))
    return total


@functools.lru_cache(maxsize=None)
def dlap_loss_pmf(scale, sens, k):
    """Exact PMF of the k-fold discrete-Laplace loss, in units of 1/scale (integers m):
    one release has z ~ P(z) ∝ e^{−|z|/t}, loss m(z) = |z − Δ| − |z|."""
    t, d = mp.mpf(scale), int(sens)
    r = mp.exp(-1 / t)
    norm = (1 - r) / (1 + r)
    one = {d: norm / (1 - r), -d: norm * r ** d / (1 - r)}          # z ≤ 0 and z ≥ Δ
    for z in range(1, d):
        one[d - 2 * z] = one.get(d - 2 * z, 0) + norm * r ** z
    assert abs(sum(one.values()) - 1) < mp.mpf(10) ** -25
    pmf = {0: mp.mpf(1)}
    for _ in range(k):
        nxt: dict = {}
        for m1, p1 in pmf.items():
            for m2, p2 in one.items():
                nxt[m1 + m2] = nxt.get(m1 + m2, 0) + p1 * p2
        pmf = nxt
    return pmf


def dlap_delta(scale, sens, k, eps):
    t = mp.mpf(scale)
    return sum((p * (1 - mp.exp(eps - m / t)) for m, p in dlap_loss_pmf(scale, sens, k).items()
                if m / t > eps), mp.mpf(0))


# -- the oracles themselves are right ---------------------------------------------------------
@pytest.mark.parametrize("c", [-3.0, -1.0, -0.4, 0.0, 0.3, 0.99, 1.5])
def test_single_release_hockey_sticks_match_quadrature(c):
    assert abs(lap_hockey(c, 1.0) - lap_hockey_quad(c, 1.0)) < mp.mpf(10) ** -20
    assert abs(gauss_hockey(c, 0.8) - gauss_hockey_quad(c, 0.8)) < mp.mpf(10) ** -15
    # at c ≥ 0 the Laplace closed form is the notes' 1 − e^{(ε−ε₀)/2}
    if 0 <= c <= 1:
        assert abs(lap_hockey(c, 1.0) - (1 - mp.exp((mp.mpf(c) - 1) / 2))) < mp.mpf(10) ** -25


def test_composition_oracle_limits():
    es = (0.5, 1.2)
    assert exact_delta(1.7, es) < mp.mpf(10) ** -20                 # δ = 0 at ε ≥ Σε
    # δ(0) is the total variation distance of the product measures: E_P[(1 − e^{−L})₊] equals
    # ∫ (p − q)₊ dx; with one Laplace it is 1 − e^{−ε₀/2}; composition can only increase it.
    assert exact_delta(0.0, es) > lap_hockey(0, 1.2)
    # a Gaussian with vanishing μ changes nothing
    assert abs(exact_delta(0.3, (0.9,), gauss_mu=1e-6) - lap_hockey(0.3, 0.9)) < mp.mpf(10) ** -9


@pytest.mark.slow
def test_scipy_and_mpmath_integrations_agree():
    # two independent quadratures of the same composition (2 and 3 Laplaces); the nested
    # mpmath quadrature for 3 Laplaces takes ~1 s per point, so one point unless DPLEDGER_FULL=1
    full = os.environ.get("DPLEDGER_FULL") == "1"
    for es in ((0.5, 1.2), (0.3, 0.6, 1.0)):
        for eps in ((0.0, 0.4, 1.1, 1.6) if full or len(es) == 2 else (0.4,)):
            a = exact_delta_scipy(eps, es)
            b = _exact_delta(mp.mpf(eps), es, None)
            assert abs(a - b) <= 1e-12 * b + 1e-300, (es, eps, a, b)


def test_kov_oracle_equals_recursive_randomized_response():
    # the same recursion with randomized-response losses (atoms only) reproduces KOV
    def rr(c, es):
        e = mp.mpf(es[0])
        p = mp.exp(e) / (1 + mp.exp(e))
        if len(es) == 1:
            return p * max(0, 1 - mp.exp(c - e)) + (1 - p) * max(0, 1 - mp.exp(c + e))
        return p * rr(c - e, es[1:]) + (1 - p) * rr(c + e, es[1:])
    for eps in (0.0, 0.3, 1.0):
        assert abs(rr(mp.mpf(eps), (0.4,) * 5) - kov_delta(0.4, 5, eps)) < mp.mpf(10) ** -25


# -- compositions of two or three releases -----------------------------------------------------
CASES = {
    "lap0.5+lap1.2": dict(releases=[(LaplaceRelease.from_epsilon(0.5), 1),
                                    (LaplaceRelease(scale=2.0 / 1.2, sensitivity=2.0), 1)],
                          laplaces=(0.5, 1.2), mu=None),
    "lap0.7x2": dict(releases=[(LaplaceRelease.from_epsilon(0.7), 2)], laplaces=(0.7, 0.7), mu=None),
    "lap0.8+gauss0.7": dict(releases=[(LaplaceRelease.from_epsilon(0.8), 1),
                                      (GaussianRelease(sigma=3.0 / 0.7, sensitivity=3.0), 1)],
                            laplaces=(0.8,), mu=0.7),
    "lap0.3+lap0.6+lap1.0": dict(releases=[(LaplaceRelease.from_epsilon(0.3), 1),
                                           (LaplaceRelease.from_epsilon(0.6), 1),
                                           (LaplaceRelease.from_epsilon(1.0), 1)],
                                 laplaces=(0.3, 0.6, 1.0), mu=None),
}


def _accountants_for(comp):
    return [n for n in ("pure", "gdp", "rdp", "pld", "best") if ACC[n].supports(comp) == "ok"]


@pytest.mark.parametrize("name", list(CASES))
def test_delta_of_composition_against_integration(name):
    case = CASES[name]
    comp = Composition.of(case["releases"])
    names = _accountants_for(comp)
    assert "pld" in names and "rdp" in names and "gdp" in names
    assert ("pure" in names) == (case["mu"] is None)
    total = sum(case["laplaces"]) + (case["mu"] or 0) * 3
    for frac in (0.0, 0.2, 0.45, 0.7):
        eps = frac * total
        exact = float(exact_delta(eps, case["laplaces"], case["mu"]))
        assert exact > 1e-8
        for n in names:
            got = ACC[n].delta(comp, eps)
            assert got >= exact * (1 - SOUND), (n, eps, got, exact)
        assert ACC["pld"].delta(comp, eps) == pytest.approx(exact, rel=PLD_REL), eps


@pytest.mark.parametrize("name", list(CASES))
def test_epsilon_of_composition_against_integration(name):
    case = CASES[name]
    comp = Composition.of(case["releases"])
    exact_at = lambda e: exact_delta(e, case["laplaces"], case["mu"])   # noqa: E731
    for delta in (1e-2, 1e-5):
        for n in _accountants_for(comp):
            e = ACC[n].epsilon(comp, delta)
            assert math.isfinite(e) and e > 0
            assert exact_at(e) <= delta * (1 + SOUND), (n, delta, e)    # sound: ε_acc ≥ ε_exact
        pld = ACC["pld"].epsilon(comp, delta)
        assert exact_at(pld / (1 + PLD_REL)) >= delta                    # and tight to 1e-3
        if case["mu"] is None:                                           # KOV is valid for Laplace
            assert ACC["pure"].epsilon(comp, delta) <= sum(case["laplaces"]) * (1 + 1e-12)


# -- k identical releases: exact oracles ---------------------------------------------------------
def test_randomized_response_composition_exact():
    comp = Composition.of([(PureEpsilonRelease(0.4), 12)])
    for eps in (0.0, 0.8, 2.0, 3.5):
        exact = float(kov_delta(0.4, 12, eps))
        for n in _accountants_for(comp):
            assert ACC[n].delta(comp, eps) >= exact * (1 - SOUND), (n, eps)
        assert ACC["pld"].delta(comp, eps) == pytest.approx(exact, rel=PLD_REL)
        assert ACC["pure"].delta(comp, eps) == pytest.approx(exact, rel=1e-9)


def test_discrete_laplace_composition_exact():
    comp = Composition.of([(DiscreteLaplaceRelease(scale=3.0, sensitivity=2), 6)])
    for eps in (0.0, 0.9, 2.2, 3.3):
        exact = float(dlap_delta(3.0, 2, 6, eps))
        for n in _accountants_for(comp):
            assert ACC[n].delta(comp, eps) >= exact * (1 - SOUND), (n, eps)
        assert ACC["pld"].delta(comp, eps) == pytest.approx(exact, rel=PLD_REL)
    for delta in (1e-3, 1e-6):
        for n in _accountants_for(comp):
            assert dlap_delta(3.0, 2, 6, ACC[n].epsilon(comp, delta)) <= delta * (1 + SOUND), n


# -- dp-accounting interchange -----------------------------------------------------------------
def _dp_acc():
    from dp_accounting import dp_event, privacy_accountant
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant
    return dp_event, privacy_accountant.NeighboringRelation, pld_privacy_accountant, rdp_privacy_accountant


EXPORT_CASES = {
    # name: (composition, exact δ(ε) oracle, exact ε check available)
    "laplace": (Composition.of([(LaplaceRelease(scale=4.0 / 0.6, sensitivity=4.0), 3)]),
                lambda e: exact_delta(e, (0.6, 0.6, 0.6))),
    "gaussian": (Composition.of([(GaussianRelease(sigma=3.0, sensitivity=1.5), 10)]),
                 lambda e: gauss_hockey(e, math.sqrt(10) * 0.5)),
    "discrete_laplace": (Composition.of([(DiscreteLaplaceRelease(scale=3.0, sensitivity=2), 10)]),
                         lambda e: dlap_delta(3.0, 2, 10, e)),
    "pure_rr": (Composition.of([(PureEpsilonRelease(0.5), 10)]),
                lambda e: kov_delta(0.5, 10, e)),
}


@pytest.mark.parametrize("name", list(EXPORT_CASES))
def test_dp_event_export_through_dp_accounting(name):
    comp, exact_at = EXPORT_CASES[name]
    E, NR, PLD, RDP = _dp_acc()
    event = comp.to_dp_event()
    rel = NR.REPLACE_ONE if name == "pure_rr" else NR.ADD_OR_REMOVE_ONE
    pld_acc = PLD.PLDAccountant(rel, value_discretization_interval=1e-4)
    pld_acc.compose(event)
    rdp_acc = RDP.RdpAccountant(neighboring_relation=rel)
    rdp_ok = rdp_acc.supports(event)
    if rdp_ok:
        rdp_acc.compose(event)
    else:
        assert name == "discrete_laplace"        # dp-accounting has no discrete-Laplace RDP
    for delta in (1e-3, 1e-6):
        theirs = pld_acc.get_epsilon(delta)
        ours = (ACC["gdp"] if comp.all_gaussian() else ACC["pld"]).epsilon(comp, delta)
        assert ours == pytest.approx(theirs, rel=PLD_REL), (delta, ours, theirs)
        assert exact_at(ours) <= delta * (1 + SOUND)
        ours_rdp = ACC["rdp"].epsilon(comp, delta)
        assert exact_at(ours_rdp) <= delta * (1 + SOUND)                 # ≥ exact
        if rdp_ok:
            assert ours_rdp <= rdp_acc.get_epsilon(delta) * (1 + 1e-6), delta


ROUND_TRIP = [
    Composition.of([(LaplaceRelease(scale=2.0), 10)]),
    Composition.of([(GaussianRelease(sigma=3.0), 7), (LaplaceRelease(scale=0.5), 2)]),
    Composition.of([(DiscreteLaplaceRelease(scale=3.0, sensitivity=2), 4)]),
    Composition.of([GaussianRelease(sigma=1.5)]),
]


@pytest.mark.parametrize("comp", ROUND_TRIP, ids=range(len(ROUND_TRIP)))
def test_dp_event_round_trip(comp):
    back = Composition.from_dp_event(comp.to_dp_event())
    assert back == comp
    assert back.pure_epsilon() == comp.pure_epsilon() and back.gdp_mu2() == comp.gdp_mu2()


@pytest.mark.parametrize("release", [LaplaceRelease(scale=4.0, sensitivity=2.0),
                                     GaussianRelease(sigma=3.0, sensitivity=1.5)])
def test_dp_event_round_trip_sensitivity_not_one(release):
    comp = Composition.of([(release, 3)])
    assert Composition.from_dp_event(comp.to_dp_event()) == comp


def _rr_event_epsilon(p: float):
    """The exact ε of 2-bucket randomized response with noise parameter p, ln((2 − p)/p), at 80
    digits (mpmath: independent of the decimal check the import uses)."""
    with mp.workdps(80):
        return mp.log((2 - mp.mpf(p)) / mp.mpf(p))


def _rr_step(eps: float) -> float:
    """How far ε moves when the RR parameter 2/(1 + e^ε) moves by one ulp (its slope is
    −2e^ε/(1 + e^ε)²): the granularity with which a float parameter can name an ε."""
    p = 2.0 / (1.0 + math.exp(eps))
    return math.ulp(p) * (1.0 + math.exp(eps)) ** 2 / (2.0 * math.exp(eps))


@pytest.mark.parametrize("eps", [1e-4, 3e-6, 0.01, 0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 1.0, 2.0, 7.3])
def test_dp_event_round_trip_pure_epsilon_is_on_the_safe_side(eps):
    """Export rounds the RR parameter down (the event is never more private than ε), import
    takes the smallest float ε at least the event's exact ε (issue 26 §3: the float preimage
    alone fell up to 2.3e-13 relative below it).  So a round trip can only move ε up, by at most
    the two roundings: a few ulps of p in ε units.  Each step checked in mpmath at 80 digits."""
    comp = Composition.of([(PureEpsilonRelease(eps), 3)])
    ev = comp.to_dp_event()
    p = ev.events[0].noise_parameter
    with mp.workdps(80):
        assert mp.mpf(p) * (1 + mp.exp(mp.mpf(eps))) <= 2          # exported p ≤ exact
    got = Composition.from_dp_event(ev).items[0][0].epsilon
    exact = _rr_event_epsilon(p)
    assert mp.mpf(got) >= exact                                    # never below the event
    assert eps <= got <= eps + 4 * _rr_step(eps)


def test_rr_import_is_never_below_the_exact_epsilon():
    """Parameters drawn across twelve decades of ε, each imported: the ε is at least the
    event's exact ε, and above it by at most the width of the parameter's float preimage (the
    import is the tight safe value, or a shorter decimal that round-trips)."""
    from dp_accounting import dp_event as E
    import numpy as np
    rng = np.random.default_rng(26)
    for p in np.concatenate([rng.uniform(1e-6, 1.0, 300), 1.0 - 10.0 ** rng.uniform(-12, -1, 300)]):
        p = float(p)
        got = Composition.from_dp_event(E.RandomizedResponseDpEvent(p, 2)).items[0][0].epsilon
        exact = _rr_event_epsilon(p)
        assert mp.mpf(got) >= exact, p
        e = float(exact)
        assert got <= e + 2 * _rr_step(e) * (1 + 1e-9) + 2 * math.ulp(e), p


def test_discrete_laplace_import_is_never_below_the_exact_epsilon():
    """The event's ε is Δ·a exactly; the imported release's (Δ/t rounded up) is never below it,
    for parameters and sensitivities drawn at random (exact rationals)."""
    from fractions import Fraction
    from dp_accounting import dp_event as E
    import numpy as np
    rng = np.random.default_rng(263)
    for a, sens in zip(10.0 ** rng.uniform(-4, 2, 400), rng.integers(1, 2 ** 16, 400), strict=True):
        ev = E.DiscreteLaplaceDpEvent(noise_parameter=float(a), sensitivity=int(sens))
        rel = Composition.from_dp_event(ev).items[0][0]
        assert Fraction(rel.epsilon) >= int(sens) * Fraction(float(a))
        assert rel.epsilon <= int(sens) * float(a) * (1 + 1e-12)


@pytest.mark.parametrize("scale", [49.0, 93.0, 98.0, 0.7, 123.0])
def test_dp_event_round_trip_discrete_laplace_scale(scale):
    comp = Composition.of([(DiscreteLaplaceRelease(scale=scale, sensitivity=1), 2)])
    assert Composition.from_dp_event(comp.to_dp_event()) == comp
