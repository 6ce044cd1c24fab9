"""Vector, matrix and approximate-DP releases (issue 22 §1), each checked independently.

* the symmetric-matrix Gaussian's μ = Δ_F/(√2·σ) against the Mahalanobis distance of the two
  output laws computed entry by entry, for random symmetric changes of Frobenius norm Δ_F, and
  its noise structure (off-diagonal variance σ², diagonal 2σ²) by a seeded sample;
* the Wishart theorem's ε recomputed in mpmath, and its range refused;
* the approx accountant's basic and advanced composition recomputed in mpmath from Kairouz, Oh &
  Viswanath 2015 Thm 3.5, its δ(ε) the inverse of its ε(δ), and never below PLD's optimal
  composition of the same (ε, δ) statements, which is checked against the exact closed form;
* every kind in ``compose``, JSON and the DpEvent export where dp-accounting has an event.
"""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpledger.accounting.accountants import ACCOUNTANTS, BestAccountant
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import (ApproxDpRelease, GaussianRelease, GaussianVectorRelease,
                                          LaplaceRelease, LaplaceVectorRelease, PureEpsilonRelease,
                                          SymmetricMatrixGaussianRelease, WishartRelease,
                                          parse_release_spec, release_from_json, release_to_json)
from dpledger.errors import DpledgerError


def _sym_noise_cov_mu2(delta: np.ndarray, sigma: float) -> float:
    """μ² between N(M, Σ) and N(M + Δ, Σ) on the upper triangle of a symmetric matrix with
    independent entries of variance σ² (off the diagonal) and 2σ² (on it): Σ Δ_e²/var_e."""
    d = delta.shape[0]
    iu = np.triu_indices(d)
    var = np.where(iu[0] == iu[1], 2.0 * sigma ** 2, sigma ** 2)
    return float(np.sum(delta[iu] ** 2 / var))


@pytest.mark.parametrize("dim", [1, 2, 6, 11])
def test_symmetric_matrix_gaussian_mu_against_entrywise_mahalanobis(dim):
    rng = np.random.default_rng(dim)
    sigma, frob = 1.7, 2.3
    rel = SymmetricMatrixGaussianRelease(sigma=sigma, sensitivity=frob, dim=dim)
    worst = 0.0
    for _ in range(200):
        a = rng.normal(size=(dim, dim))
        delta = a + a.T
        if rng.random() < 0.3:                      # also rank-one changes, x xᵀ − x′x′ᵀ
            x, y = rng.normal(size=dim), rng.normal(size=dim)
            delta = np.outer(x, x) - np.outer(y, y)
        delta *= frob / np.linalg.norm(delta)       # Frobenius norm exactly Δ_F (to rounding)
        worst = max(worst, _sym_noise_cov_mu2(delta, sigma))
    # every change of norm Δ_F gives the same μ²: the bound is attained, and tight
    assert worst == pytest.approx(frob ** 2 / (2 * sigma ** 2), rel=1e-12)
    assert rel.mu2 >= frob ** 2 / (2 * sigma ** 2) and rel.mu2 == pytest.approx(worst, rel=1e-12)
    assert rel.mu ** 2 >= rel.mu2_exact
    comp = Composition.of([(rel, 5)])
    assert comp.gdp_mu() == pytest.approx(math.sqrt(5) * frob / (math.sqrt(2) * sigma), rel=1e-14)
    assert comp.gdp_mu() ** 2 >= 5 * rel.mu2_exact


def test_symmetric_noise_structure_by_sampling():
    """Z = (Z′ + Z′ᵀ)/√2 has off-diagonal variance σ² and diagonal variance 2σ² — the law the
    release's μ assumes (seeded; each variance within 4 standard errors, error rate ~1e-4)."""
    rng = np.random.default_rng(22)
    d, n, sigma = 4, 40_000, 1.3
    zp = rng.normal(0.0, sigma, size=(n, d, d))
    z = (zp + np.transpose(zp, (0, 2, 1))) / math.sqrt(2.0)
    v = z.var(axis=0)
    se = lambda s2: s2 * math.sqrt(2.0 / n)          # noqa: E731 (std error of a variance)
    for i in range(d):
        for j in range(d):
            want = 2 * sigma ** 2 if i == j else sigma ** 2
            assert abs(v[i, j] - want) < 4 * se(want)
    assert np.allclose(z, np.transpose(z, (0, 2, 1)))


def test_vector_releases_are_their_scalar_mechanisms():
    g = GaussianVectorRelease(sigma=2.0, sensitivity=3.0, dim=7)
    assert Composition.of([g]) == Composition.of([GaussianRelease(sigma=2.0, sensitivity=3.0)])
    lap = LaplaceVectorRelease(scale=4.0, sensitivity=2.0, dim=5)
    assert Composition.of([lap]) == Composition.of([LaplaceRelease(scale=2.0)])
    assert Composition.of([lap]).pure_epsilon() == 0.5


def _wishart_eps_mp(p: int, k: int, delta: float):
    with mp.workdps(50):
        return mp.sqrt(28 * mp.log(4 / mp.mpf(delta)) / (k - p - 1))


@pytest.mark.parametrize("p, k, delta", [(7, 2000, 1e-3), (7, 20000, 1e-6), (11, 5000, 0.1),
                                         (65, 10 ** 6, 1e-9)])
def test_wishart_epsilon_is_the_theorem_solved_for_epsilon(p, k, delta):
    w = WishartRelease(dim=p, k=k, bound=1.0, delta=delta)
    exact = _wishart_eps_mp(p, k, delta)
    assert mp.mpf(w.epsilon) >= exact
    assert w.epsilon <= float(exact) * (1 + 1e-14)
    # its normal form is the (ε, δ) statement; no Rényi or Gaussian bound is claimed
    comp = Composition.of([(w, 3)])
    assert comp.items[0][0] == ApproxDpRelease(w.epsilon, delta)
    for cur in ("pure", "gdp", "zcdp", "rdp"):
        assert comp.status(cur) == "unbounded"


@pytest.mark.parametrize("kw, needle", [
    (dict(dim=7, k=8, bound=1.0, delta=1e-3), "k must exceed"),
    (dict(dim=7, k=200, bound=1.0, delta=1e-3), "ε < 1 only"),
    (dict(dim=7, k=2000, bound=1.0, delta=0.5), "1/e"),
    (dict(dim=7, k=2000, bound=-1.0, delta=1e-3), "bound"),
    (dict(dim=0, k=2000, bound=1.0, delta=1e-3), "dim"),
])
def test_wishart_outside_the_theorem_is_refused(kw, needle):
    with pytest.raises(DpledgerError, match=needle):
        WishartRelease(**kw)


def _kov_mp(items, delta):
    """Kairouz–Oh–Viswanath 2015 Thm 3.5 with δ̃ = δ − Σδ_i, in mpmath (independent)."""
    with mp.workdps(40):
        eps = [mp.mpf(e) for e, _, c in items for _ in range(c)]
        tilde = mp.mpf(delta) - sum(mp.mpf(d) * c for _, d, c in items)
        a = sum(e * (mp.e ** e - 1) / (mp.e ** e + 1) for e in eps)
        b = sum(e * e for e in eps)
        return min(sum(eps), a + mp.sqrt(2 * b * mp.log(mp.e + mp.sqrt(b) / tilde)),
                   a + mp.sqrt(2 * b * mp.log(1 / tilde)))


@pytest.mark.parametrize("items, delta", [
    ([(0.1, 0.0, 100)], 1e-6), ([(0.05, 1e-8, 400)], 1e-5), ([(0.3, 1e-7, 20), (0.1, 0.0, 50)], 1e-4),
    ([(1.0, 1e-9, 3)], 1e-6)])
def test_approx_accountant_is_advanced_composition(items, delta):
    rels = [((ApproxDpRelease(e, d) if d else PureEpsilonRelease(e)), c) for e, d, c in items]
    comp = Composition.of(rels)
    acc = ACCOUNTANTS["approx"]
    got = acc.epsilon(comp, delta)
    want = _kov_mp(items, delta)
    assert mp.mpf(got) >= want and got <= float(want) * (1 + 1e-12)
    back = acc.delta(comp, got)
    assert back <= delta * (1 + 1e-9)
    assert acc.epsilon(comp, delta, adaptive=True) == pytest.approx(sum(e * c for e, _, c in items))
    # PLD composes the same statements optimally: never above the advanced bound
    pld = ACCOUNTANTS["pld"].epsilon(comp, delta)
    assert pld <= got * (1 + 1e-9)
    best, src = BestAccountant().epsilon_and_source(comp, delta)
    assert best <= min(got, pld)


def test_pld_of_approx_statements_against_the_exact_optimal_composition():
    """k copies of the (ε, δ) dominating pair: δ_total(t) = 1 − (1 − δ)^k + (1 − δ)^k·δ_RR,k(t),
    δ_RR,k the k-fold randomized-response curve (a binomial sum, mpmath).  PLD's δ(t) is an
    upper bound, within 1e-3 relative."""
    e, d, k = 0.2, 1e-7, 30
    comp = Composition.of([(ApproxDpRelease(e, d), k)])
    with mp.workdps(40):
        E, D = mp.mpf(e), mp.mpf(d)
        p = mp.e ** E / (1 + mp.e ** E)
        for t in (0.5, 1.0, 2.0):
            rr = sum(mp.binomial(k, i) * (p ** i * (1 - p) ** (k - i)
                                          - mp.e ** t * (1 - p) ** i * p ** (k - i))
                     for i in range(k + 1) if (2 * i - k) * E > t)
            exact = 1 - (1 - D) ** k + (1 - D) ** k * rr
            got = ACCOUNTANTS["pld"].delta(comp, t)
            assert mp.mpf(got) >= exact and got <= float(exact) * (1 + 1e-3) + 1e-15


def test_no_epsilon_at_or_below_the_summed_delta():
    comp = Composition.of([(ApproxDpRelease(0.5, 1e-6), 10)])
    assert comp.delta_floor() >= 1e-5
    assert ACCOUNTANTS["approx"].epsilon(comp, 9e-6) == math.inf
    assert ACCOUNTANTS["approx"].epsilon(comp, 1e-5) == 5.0     # at Σδ_i: basic composition
    many = Composition.of([(ApproxDpRelease(0.1, 1e-8), 100)])
    assert ACCOUNTANTS["approx"].epsilon(many, 1e-5) < 6.0     # advanced beats basic (10)
    best, src = BestAccountant().epsilon_and_source(comp, 1e-6)
    assert math.isinf(best) and src == "unbounded"
    from dpledger.accounting.schema import privacy_block
    block = privacy_block([comp], [1e-6, 1e-3])
    assert block["epsilon_status"]["approx"]["1e-06"] == "unbounded"
    assert block["epsilon_at_delta"]["1e-06"] is None
    assert block["epsilon"]["approx"]["0.001"] is not None


@pytest.mark.parametrize("spec", ["laplace_vector:scale=2,sensitivity=3,dim=4",
                                  "gaussian_vector:sigma=2,sensitivity=3,dim=4",
                                  "gaussian_sym_matrix:sigma=2,sensitivity=1.5,dim=4",
                                  "approx_dp:eps=0.5,delta=1e-6",
                                  "wishart:dim=7,k=20000,bound=1.5,delta=1e-6"])
def test_every_kind_in_compose_json_and_dp_event(spec, capsys):
    from dpledger.cli import main
    rel, _ = parse_release_spec(spec)
    assert release_from_json(release_to_json(rel)) == rel
    assert main(["compose", spec, "--json"]) == 0
    capsys.readouterr()
    comp = Composition.of([(rel, 2)])
    if isinstance(rel, (ApproxDpRelease, WishartRelease)):
        with pytest.raises(DpledgerError, match="no event"):
            comp.to_dp_event()
    else:
        back = Composition.from_dp_event(comp.to_dp_event())
        assert back.gdp_mu2() >= comp.gdp_mu2() and back.pure_epsilon() >= comp.pure_epsilon()
