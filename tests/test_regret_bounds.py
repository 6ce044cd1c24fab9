"""Issue 23 §2: the papers' regret bounds (dpledger.policies.regret_bounds).

Every bound with a value is recomputed here from the paper's formula, written again from the
paper (not from the module), at several instances; every order-only bound has no value and its
O(·) argument is recomputed the same way.  The distinguishability gaps of Azize & Basu 2022's
Theorem 3 are checked for each family against numerical integration and a minimisation done a
different way (dense grids over the alternative's parameters, with and without the boundary
the module reduces them to).  Deterministic: no random draws.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import integrate, special

from dpledger.errors import DpledgerError
from dpledger.policies import environments as E
from dpledger.policies import regret_bounds as rb
from dpledger.policies import reward_families as rf
from dpledger.policies.registry import available, make_policy
from dpledger.policies.reward_families import RewardInstance
from test_azize2025_policies import _kl as kl     # Bernoulli kl written out, 0·ln 0 = 0

BERNOULLI = [[0.75, 0.625, 0.5, 0.375, 0.25], [0.8, 0.1, 0.1, 0.1, 0.1], [0.9, 0.85],
             [0.55, 0.5, 0.45, 0.05]]
RATES = [[0.1, 1.0, 2.0, 5.0, 10.0], [0.5, 0.6], [3.0, 1.0, 20.0]]
BETAS = [[(2.0, 3.0), (3.0, 2.0), (1.0, 1.0)], [(0.5, 0.5), (5.0, 1.0)], [(20.0, 20.0), (30.0, 20.0)]]
HORIZONS = [100, 10 ** 4, 10 ** 7]


def bern(means):
    return RewardInstance.from_environment(E.bernoulli(means))


# ---- lower bounds with exact constants --------------------------------------------------------

@pytest.mark.parametrize("K,T,eps", [(2, 10, 0.01), (5, 10 ** 4, 0.5), (100, 10 ** 6, 0.05),
                                     (10, 10 ** 3, 3.0), (3, 2, 1.0)])
def test_minimax_lower_bound_theorem_2(K, T, eps):
    """Azize & Basu 2022, Thm 2, eq. (3): max{√(T(K−1))/27, (K−1)/(131ε)}; the regime
    threshold (131/27)√((K−1)/T) is where the two terms meet."""
    b = rb.azize_basu_2022_minimax(K, T, eps)
    assert b.status == "exact_constants" and b.scope == "minimax" and b.equation == "eq. (3)"
    assert b.value == pytest.approx(max((T * (K - 1)) ** 0.5 / 27, (K - 1) / (131 * eps)),
                                    rel=1e-15)
    thr = rb.azize_basu_2022_minimax_threshold(K, T, eps)
    assert thr.quantity == "epsilon"
    assert (T * (K - 1)) ** 0.5 / 27 == pytest.approx((K - 1) / (131 * thr.value), rel=1e-12)
    assert thr.notes[0] == f"ε = {eps:g}: {'high' if eps < thr.value else 'low'} privacy"
    high = rb.azize_basu_2022_minimax(K, T, thr.value * 0.99).value
    assert high == pytest.approx((K - 1) / (131 * thr.value * 0.99))     # private term wins
    # the non-private term alone at ε = ∞ (any policy)
    assert rb.azize_basu_2022_minimax(K, T).value == pytest.approx((T * (K - 1)) ** 0.5 / 27)


def test_theorem_2_printed_threshold_is_the_reciprocal_constant():
    """The paper's example (T = 1e6, K = 100: "equivalently hard for any ε ≥ 0.05") is the
    printed (131/27)·√((K−1)/T) = 0.0483; the terms of eq. (3) meet at (27/131)·√(99/1e6)."""
    thr = rb.azize_basu_2022_minimax_threshold(100, 10 ** 6)
    assert "= 0.04828," in thr.notes[0]      # 4.8519 × 0.0099499
    assert thr.value == pytest.approx(27 / 131 * (99 / 1e6) ** 0.5, rel=1e-15)
    assert rb.azize_basu_2022_minimax(100, 10 ** 6, 0.01).value == pytest.approx(
        (1e6 * 99) ** 0.5 / 27)       # ε = 0.01 < 0.0483 is already the non-private regime


@pytest.mark.parametrize("d,T,eps", [(1, 10, 0.1), (5, 10 ** 4, 1e-4), (20, 10 ** 6, 2.0)])
def test_linear_minimax_theorem_4(d, T, eps):
    """Azize & Basu 2022, Thm 4, eq. (5): max{e⁻²·d·√T/8, e⁻⁶·d/(4ε)}; threshold 2e⁻⁴/√T."""
    b = rb.azize_basu_2022_linear_minimax(d, T, eps)
    want = max(math.exp(-2) * d * T ** 0.5 / 8, math.exp(-6) * d / (4 * eps))
    assert b.value == pytest.approx(want, rel=1e-15) and b.equation == "eq. (5)"
    thr = rb.azize_basu_2022_linear_threshold(T).value
    assert math.exp(-2) * d * T ** 0.5 / 8 == pytest.approx(math.exp(-6) * d / (4 * thr), rel=1e-12)


@pytest.mark.parametrize("means", BERNOULLI)
@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 2.0])
def test_theorem_3_bernoulli_and_thresholds(means, eps):
    """Thm 3, eq. (4), Bernoulli: Σ Δ_a ln T / min(kl(μ_a, μ*), 6εΔ_a); per-arm thresholds
    kl/(6Δ); above the largest the bound is Lai–Robbins'."""
    mu = max(means)
    T = 10 ** 6
    want = sum((mu - m) / min(kl(m, mu), 6 * eps * (mu - m)) for m in means if m < mu)
    b = rb.azize_basu_2022_problem_dependent(means, T, eps)
    assert b.status == "asymptotic" and b.direction == "lower"
    assert b.value == pytest.approx(want * math.log(T), rel=1e-12)
    assert b.value == pytest.approx(rb.azize_basu_2022_lower_bound_constant(means, eps)
                                    * math.log(T), rel=1e-15)
    lr = rb.lai_robbins(means, T)
    assert lr.value == pytest.approx(sum((mu - m) / kl(m, mu) for m in means if m < mu)
                                     * math.log(T), rel=1e-12)
    assert b.value >= lr.value * (1 - 1e-15)
    thr = rb.azize_basu_2022_thresholds(means, eps)
    assert thr.terms == pytest.approx([kl(m, mu) / (6 * (mu - m)) for m in means if m < mu],
                                      rel=1e-12)
    above = rb.azize_basu_2022_problem_dependent(means, T, thr.value * (1 + 1e-9))
    assert above.value == pytest.approx(lr.value, rel=1e-12)
    below = rb.azize_basu_2022_problem_dependent(means, T, thr.value * 0.9)
    assert below.value > lr.value * (1 + 1e-6)


@pytest.mark.parametrize("means", BERNOULLI)
def test_azize_2025_lower_and_upper(means):
    """The d_ε bound (Azize et al. 2025): never below Thm 3; equal to Lai–Robbins once ε
    passes every arm's threshold logit(μ*) − logit(μ_a); DP-KLUCB's asymptotic upper bound is
    α times it."""
    mu = max(means)
    T = 10 ** 5
    thr = rb.azize_2025_thresholds(means, 0.1)
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    assert thr.terms == pytest.approx([logit(mu) - logit(m) for m in means if m < mu], rel=1e-12)
    for eps in (0.01, 0.3, 1.0):
        low = rb.azize_2025_lower(means, T, eps)
        assert low.value >= rb.azize_basu_2022_problem_dependent(means, T, eps).value * (1 - 1e-12)
        up = rb.azize_2025_upper(means, T, eps, 1.5)
        assert up.status == "asymptotic" and up.value == pytest.approx(1.5 * low.value, rel=1e-15)
    big = rb.azize_2025_lower(means, T, thr.value + 1e-9)
    assert big.value == pytest.approx(rb.lai_robbins(means, T).value, rel=1e-10)
    assert rb.azize_2025_upper(means, T, 1.0, 1.0).value is None      # α > 1 needed


# ---- upper bounds with exact constants ---------------------------------------------------------

@pytest.mark.parametrize("means", BERNOULLI)
@pytest.mark.parametrize("T", HORIZONS)
def test_adap_ucb_theorem_7(means, T):
    """Thm 7: Σ_{Δ_a > 0} (16α/min{Δ_a, ε}·log T + 3α/(α − 3)), α > 3."""
    mu = max(means)
    for eps, alpha in ((1.0, 3.1), (0.05, 4.0), (0.3, 10.0)):
        want = sum(16 * alpha / min(mu - m, eps) * math.log(T) + 3 * alpha / (alpha - 3)
                   for m in means if m < mu)
        b = rb.azize_basu_2022_adap_ucb(means, T, eps, alpha)
        assert b.status == "exact_constants" and b.value == pytest.approx(want, rel=1e-12)
    b = rb.azize_basu_2022_adap_ucb(means, T, 1.0, 3.0)
    assert b.value is None and b.unmet == ("α > 3 (α = 3)",)


@pytest.mark.parametrize("means", BERNOULLI)
def test_ucb1_auer(means):
    """Auer et al. 2002, Thm 1: 8·Σ ln n/Δ_i + (1 + π²/3)·Σ Δ_j."""
    mu = max(means)
    for T in HORIZONS:
        want = 8 * sum(math.log(T) / (mu - m) for m in means if m < mu) + \
            (1 + math.pi ** 2 / 3) * sum(mu - m for m in means)
        assert rb.auer_2002_ucb1(means, T).value == pytest.approx(want, rel=1e-12)


# ---- order-only bounds: no value, their O(·) argument recomputed -------------------------------

def _gaps(means):
    mu = max(means)
    return [mu - m for m in means if m < mu]


@pytest.mark.parametrize("means", BERNOULLI)
@pytest.mark.parametrize("T", HORIZONS)
def test_order_only_bounds(means, T):
    K, eps, L, ln = len(means), 0.5, math.log2(T), math.log(T)
    g = _gaps(means)
    cases = [
        (rb.hu_hegde_2022_dp_ts(means, T, eps),
         sum(max(L / d, L / eps * math.log2(L / (eps * d))) for d in g)),
        (rb.hu_hegde_2022_dp_ts_minimax(K, T, eps),
         (K * T * L) ** 0.5 + K * L / eps * math.log2((T * L) ** 0.5 / (K * eps) ** 0.5)),
        (rb.hu_hegde_2022_lazy_dp_ts(means, T, eps), sum(L / min(eps, d) for d in g)),
        (rb.hu_hegde_2022_lazy_dp_ts_minimax(K, T, eps), (K * T * L) ** 0.5 + K * L / eps),
        (rb.hu_2025_dp_ts_ucb(means, T, 0.5),
         sum(math.log(T ** 1.25 * d ** 2) * ln ** 0.5 / d for d in g)),
        (rb.hu_2025_dp_ts_ucb_minimax(K, T, 1.0), (K * T) ** 0.5 * ln),
        (rb.mishra_thakurta_2015_dp_ucb(means, T, eps / K, 0.1),
         sum(K * ln ** 2 * math.log(K * T / 0.1) / (eps * d) + d for d in g)),
        (rb.ou_2024_ts_gaussian(means, T), sum(math.log(T * d * d) / d for d in g)),
        (rb.ou_2024_ts_gaussian_minimax(K, T), (K * T * math.log(K)) ** 0.5),
        (rb.ou_2024_mts_gaussian(means, T, 3, 2.0),
         sum(2.0 * math.log(T * d * d) / d + 3 * d for d in g)),
        (rb.azize_basu_2022_adap_klucb(means, T, eps, 3.1),
         sum(d * ln / min(kl(max(means) - d, max(means)), eps * d) for d in g)),
        (rb.azize_basu_2022_adap_minimax(K, T, eps), (K * T * ln) ** 0.5 + K * ln / eps),
        (rb.sajed_sheffet_2019_dp_se(means, T, eps), K * ln / eps + sum(ln / d for d in g)),
        (rb.hu_huang_mehta_2021_anytime_lazy_ucb(means, T, eps), sum(ln / min(d, eps) for d in g)),
    ]
    for b, want in cases:
        assert b.status == "order_only" and b.value is None, b.key
        assert b.order_term == pytest.approx(want, rel=1e-12), b.key
        assert b.direction == "upper" and b.paper and b.theorem and b.formula


def test_private_ts_theorem_8_conditions():
    """M&T Thm 8: O(k log³T/(Δ²ε²)), Δ the two best arms' gap, for ε < 1 and
    T ≥ 8·max{log₂(1/Δ), 1}; outside them no order term, the reason in ``unmet``."""
    means = [0.9, 0.85, 0.2]
    b = rb.mishra_thakurta_2015_private_ts(means, 10 ** 5, 0.5)
    assert b.order_term == pytest.approx(3 * math.log(1e5) ** 3 / (0.05 ** 2 * 0.25), rel=1e-12)
    assert rb.mishra_thakurta_2015_private_ts(means, 10 ** 5, 1.0).unmet == ("ε < 1 (ε = 1)",)
    short = rb.mishra_thakurta_2015_private_ts(means, 20, 0.5)   # 8·log₂(20) = 34.6 > 20
    assert short.order_term is None and short.unmet[0].startswith("T ≥ 8·max")
    assert not rb.mishra_thakurta_2015_private_ts(means, 10 ** 5, 0.5, as_printed=False).applies


def test_order_only_cannot_carry_a_value():
    with pytest.raises(DpledgerError):
        rb.RegretBound("x", "upper", "problem-dependent", "order_only", 1.0, "p", "t", "e", "f",
                       ())
    with pytest.raises(DpledgerError):
        rb.RegretBound("x", "upper", "problem-dependent", "exact", 1.0, "p", "t", "e", "f", ())


# ---- the distinguishability gaps of each family, checked a different way -----------------------

def _truncexp_pdf(lam, x):
    return lam * np.exp(-lam * x) / -np.expm1(-lam)


def _simpson(y, x):
    return integrate.simpson(y, x=x, axis=-1)


@pytest.mark.parametrize("rates", RATES)
def test_truncexp_gaps_against_integration_and_grid(rates):
    """d_inf, t_inf of a truncated exponential: KL and TV by Simpson integration of the
    densities (4001 points), minimised over a dense grid of alternative rates λ′ < λ* (mean
    above μ*, 400 rates down to λ*/1000): the minimum sits at λ* and agrees to 1e-8."""
    inst = RewardInstance.from_environment(E.truncated_exponential(rates))
    gaps = rf.arm_gaps(inst)
    best = rates[int(np.argmax(inst.means))]
    x = np.linspace(0.0, 1.0, 4001)
    alts = np.r_[np.geomspace(best * 1e-3, best, 400)]
    assert np.all([E.truncexp_mean(a) >= max(inst.means) - 1e-15 for a in alts])
    q = _truncexp_pdf(alts[:, None], x[None, :])
    for g in gaps:
        p = _truncexp_pdf(rates[g.arm], x)
        kls = _simpson(p * np.log(p / q), x)
        tvs = 0.5 * _simpson(np.abs(p - q), x)
        assert int(np.argmin(kls)) == len(alts) - 1 and int(np.argmin(tvs)) == len(alts) - 1
        assert g.d_inf == pytest.approx(kls.min(), rel=1e-8, abs=1e-12)
        assert g.t_inf == pytest.approx(tvs.min(), rel=1e-6, abs=1e-9)   # |p − q| has a kink


def _beta_kl_integral(a, b, a2, b2):
    """KL = E_P[ln p − ln q] = [(a − a′)∫w ln x + (b − b′)∫w ln(1 − x)]/∫w − ln ∫w + ln ∫w′,
    w = x^(a−1)(1−x)^(b−1): every integral by QUADPACK's algebraic-logarithmic weights (QAWS),
    which integrate the end-point singularities exactly; no special function."""
    def weighted(kind, p, q):
        return integrate.quad(lambda x: 1.0, 0, 1, weight=kind, wvar=(p - 1, q - 1),
                              epsabs=1e-14, epsrel=1e-13)[0]
    w0, wlog, wlog1 = (weighted(k, a, b) for k in ("alg", "alg-loga", "alg-logb"))
    return ((a - a2) * wlog + (b - b2) * wlog1) / w0 - math.log(w0) + math.log(
        weighted("alg", a2, b2))


def _beta_tv_integral(a, b, a2, b2):
    f = lambda x: abs(math.exp((a - 1) * math.log(x) + (b - 1) * math.log1p(-x) - special.betaln(a, b))  # noqa
                      - math.exp((a2 - 1) * math.log(x) + (b2 - 1) * math.log1p(-x)
                                 - special.betaln(a2, b2)))
    return 0.5 * integrate.quad(f, 0, 1, limit=400, epsabs=1e-12, epsrel=1e-10)[0]


@pytest.mark.parametrize("a,b,a2,b2", [(2, 3, 3, 2), (2, 2, 2.1, 2), (5, 1, 1, 5),
                                       (0.5, 0.5, 2, 2), (20, 20, 30, 20), (1, 1, 1.5, 0.7)])
def test_beta_kl_and_tv_formulas_against_quadrature(a, b, a2, b2):
    assert rf.beta_kl(a, b, a2, b2) == pytest.approx(_beta_kl_integral(a, b, a2, b2), rel=1e-8)
    assert rf.beta_tv(a, b, a2, b2) == pytest.approx(_beta_tv_integral(a, b, a2, b2), abs=2e-8)


def _beta_kl_grid(a, b, a2, b2):
    """The closed form, vectorised, written from KL = −H(P) − E_P[ln q]."""
    elx, el1x = special.digamma(a) - special.digamma(a + b), special.digamma(b) - special.digamma(a + b)
    e_log_p = (a - 1) * elx + (b - 1) * el1x - special.betaln(a, b)
    e_log_q = (a2 - 1) * elx + (b2 - 1) * el1x - special.betaln(a2, b2)
    return e_log_p - e_log_q


@pytest.mark.parametrize("ab", BETAS)
def test_beta_d_inf_against_a_dense_grid(ab):
    """d_inf over all Beta(a′, b′) with mean ≥ μ*: a 61 × 4001 grid over (mean m′ ∈ [μ*, μ* +
    0.6(1 − μ*)], s′ = a′ + b′ log-spaced over 1e-2…1e4 × (a + b)) — interior points
    included, which the module's reduction to the boundary skips.  The module's value is
    never above the grid's (it is the minimum) and within 1e-5 of it (grid resolution)."""
    inst = RewardInstance.from_environment(E.beta(ab))
    mu = max(inst.means)
    for g in rf.arm_gaps(inst):
        a, b = ab[g.arm]
        m = mu + (1 - mu) * np.linspace(0, 0.6, 61)[:, None]
        s = np.geomspace(1e-2, 1e4, 4001)[None, :] * (a + b)
        grid = _beta_kl_grid(a, b, m * s, (1 - m) * s)
        assert g.d_inf <= grid.min() * (1 + 1e-12)
        assert g.d_inf == pytest.approx(grid.min(), rel=1e-5)
        assert int(np.unravel_index(np.argmin(grid), grid.shape)[0]) == 0   # on the boundary


@pytest.mark.parametrize("ab", BETAS)
def test_beta_t_inf_against_a_dense_grid(ab):
    """t_inf over all Beta(a′, b′) with mean ≥ μ*: TV as half the L1 distance of the two
    distributions' masses on 1999 logit-spaced bins (a binned TV, ≤ the true one, within 1e-4
    here), minimised over a 13 × 161 grid of (m′, s′) including interior means: the module's
    minimum agrees to 2e-4; and it is ≤ every exact TV of a 41 × 41 grid around that grid's
    best cell (to 1e-10)."""
    inst = RewardInstance.from_environment(E.beta(ab))
    mu = max(inst.means)
    edges = special.expit(np.linspace(-30, 30, 2000))
    edges[0], edges[-1] = 0.0, 1.0
    for g in rf.arm_gaps(inst):
        a, b = ab[g.arm]
        m = (mu + (1 - mu) * np.linspace(0, 0.6, 13))[:, None, None]
        s = (np.geomspace(1e-2, 1e3, 161) * (a + b))[None, :, None]
        cp = np.diff(special.betainc(a, b, edges))
        cq = np.diff(special.betainc(m * s, (1 - m) * s, edges[None, None, :]), axis=-1)
        binned = 0.5 * np.abs(cp - cq).sum(axis=-1)
        assert g.t_inf == pytest.approx(binned.min(), abs=2e-4)
        # around the best cell, a 41 × 41 grid of exact TVs (the TV formula is checked
        # against quadrature above): the module's minimum is at least as low as all of them
        i, j = np.unravel_index(np.argmin(binned), binned.shape)
        u = (float(m[i, 0, 0]) - mu) / (1 - mu)
        local = min(rf.beta_tv(a, b, mm * ss, (1 - mm) * ss)
                    for mm in mu + (1 - mu) * np.linspace(max(u - 0.05, 0), u + 0.05, 41)
                    for ss in float(s[0, j, 0]) * np.geomspace(0.9, 1.1, 41))
        assert g.t_inf <= local + 1e-10


def test_beta_parameters_outside_the_tested_range_are_refused():
    with pytest.raises(DpledgerError, match=r"\[0.001, 10000\]"):
        RewardInstance.from_environment(E.beta([(1e-5, 1.0), (2.0, 2.0)]))


def test_bernoulli_family_gaps_and_edge_means():
    """kl(·, 1) = ∞ and t_inf = Δ (consequence 2 of Thm 3); no suboptimal arm is refused."""
    g = rf.arm_gaps(bern([1.0, 0.5]))
    assert g[0].d_inf == math.inf and g[0].t_inf == 0.5
    assert rb.lai_robbins([1.0, 0.5], 100).value == 0.0
    with pytest.raises(DpledgerError, match="no suboptimal arm"):
        rb.lai_robbins([0.5, 0.5], 100)
    with pytest.raises(DpledgerError):
        rb.azize_basu_2022_problem_dependent([0.5, 0.2], 100, 0.0)


@pytest.mark.parametrize("family,params", [("truncexp", RATES[0]), ("beta", BETAS[0])])
def test_theorem_3_other_families_is_the_fold_of_the_gaps(family, params):
    """Thm 3 for truncated exponential and Beta rewards: Σ Δ/min(d_inf, 6ε·t_inf)·ln T from the
    gaps, recomputed; ≥ Lai–Robbins; equal to it above the per-arm thresholds."""
    env = E.truncated_exponential(params) if family == "truncexp" else E.beta(params)
    inst = RewardInstance.from_environment(env)
    gaps = rf.arm_gaps(inst)
    T = 10 ** 5
    for eps in (0.01, 0.2, 5.0):
        want = sum(g.gap / min(g.d_inf, 6 * eps * g.t_inf) for g in gaps) * math.log(T)
        assert rb.azize_basu_2022_problem_dependent(inst, T, eps).value == pytest.approx(
            want, rel=1e-12)
    thr = rb.azize_basu_2022_thresholds(inst)
    assert rb.azize_basu_2022_problem_dependent(inst, T, thr.value * 1.0001).value == \
        pytest.approx(rb.lai_robbins(inst, T).value, rel=1e-12)
    assert rb.azize_2025_lower(inst, T, 0.1).unmet        # the d_ε bound is Bernoulli-only


# ---- which bounds bind which policy ------------------------------------------------------------

def test_every_policy_gets_bounds_by_its_privacy_model():
    inst = bern(BERNOULLI[0])
    for name in available():
        policy = make_policy(name)
        model, bounds = rb.bounds_for_policy(policy, inst, 10 ** 4)
        keys = {b.key for b in bounds}
        assert "lai-robbins-1985" in keys and "azize-basu-2022/thm2" in keys
        # a zCDP policy (a rho target) takes epsilon too, for an (ε, δ) target: not pure
        private_pure = "epsilon" in policy.params and "rho" not in policy.params
        assert ("azize-basu-2022/thm3" in keys) == private_pure, name
        assert (model.kind == "pure") == private_pure, name
        if private_pure:
            assert model.epsilon == policy.theorem(10 ** 4, 5).pure_epsilon
        assert all(json.dumps(b.to_json(), allow_nan=False) for b in bounds)
        ups = [b for b in bounds if b.direction == "upper"]
        assert bool(ups) == (name in rb.UPPER_BOUNDS), name


def test_variants_outside_a_theorem_are_flagged():
    inst = bern(BERNOULLI[0])
    cases = [("dp-ucb", {"width": "experimental"}, "mishra-thakurta-2015/thm4"),
             ("dp-ts-mt", {"epsilon": 0.5, "gap_estimation": False}, "mishra-thakurta-2015/thm8"),
             ("dp-klucb", {"mechanism": "renoise-cumulative"}, "azize-2025/dp-klucb")]
    for name, params, key in cases:
        _, bounds = rb.bounds_for_policy(make_policy(name, **params), inst, 10 ** 4)
        b = next(b for b in bounds if b.key == key)
        assert b.unmet and b.value is None and b.order_term is None, (name, b)


def test_bound_curves_reevaluate_each_bound_along_t():
    inst = bern(BERNOULLI[0])
    policy = make_policy("adap-ucb", epsilon=0.2)
    curves = rb.bound_curves(policy, inst, 10 ** 5, [1, 3, 5, 50, 5000, 10 ** 5])
    got = {b.key: (xs, ys) for b, xs, ys in curves}
    assert set(got) == {"azize-basu-2022/thm7", "azize-basu-2022/thm3", "azize-2025/lower",
                        "lai-robbins-1985"}
    for key, fn in (("azize-basu-2022/thm7",
                     lambda t: rb.azize_basu_2022_adap_ucb(inst, t, 0.2, 3.1).value),
                    ("azize-basu-2022/thm3",
                     lambda t: rb.azize_basu_2022_problem_dependent(inst, t, 0.2).value)):
        xs, ys = got[key]
        assert xs == [5, 50, 5000, 10 ** 5]          # t ≥ K
        assert ys == [fn(t) for t in xs]


# ---- Azize & Basu 2022, Theorem 5 (the linear problem-dependent bound) -------------------------

def _thm5_basis_closed_form(gaps, eps=math.inf, rho=None):
    """On the standard basis H_α = diag(α): ‖e_a‖²_{H⁻¹} = 1/α(a), so α(a) = 1/min{Δ²/2, 3ερΔ}
    and c = Σ_a Δ_a·max{2/Δ_a², 1/(3ερΔ_a)} (the Gaussian Lai–Robbins 2/Δ when ε = ∞)."""
    return sum(max(2.0 / g, 1.0 / (3 * eps * rho) if rho is not None else 0.0) for g in gaps)


@pytest.mark.parametrize("eps, rho", [(math.inf, None), (0.1, 0.5), (2.0, 0.5), (0.1, None)])
def test_thm5_on_the_basis_is_the_closed_form(eps, rho):
    theta = np.array([1.0, 0.8, 0.5, 0.2])
    gaps = [0.2, 0.5, 0.8]
    b = rb.azize_basu_2022_linear_problem_dependent(np.eye(4), theta, 10 ** 6, eps, rho)
    want = _thm5_basis_closed_form(gaps, eps, rho)
    # a certified (dual) value: never above the program's infimum, within 1e-6 of it here
    assert b.value / math.log(10 ** 6) <= want * (1 + 1e-12)
    assert b.value / math.log(10 ** 6) == pytest.approx(want, rel=1e-6)
    assert b.status == "asymptotic" and b.key == "azize-basu-2022/thm5"
    if rho is not None:        # per-arm thresholds Δ_a/(6ρ)
        assert b.terms == pytest.approx([g / (6 * rho) for g in gaps])
    if math.isfinite(eps) and rho is None:
        assert any("ρ_a(A) is not stated" in n for n in b.notes)


def test_thm5_is_invariant_under_a_change_of_basis():
    """a → Ma, θ → M⁻ᵀθ keeps every gap and every ‖a‖²_{H⁻¹}: the constant of a non-orthogonal
    action set equals the basis one's closed form (the optimiser meets a full H here)."""
    theta = np.array([1.0, 0.7, 0.4, 0.1])
    rng = np.random.default_rng(20220)
    for _ in range(3):
        M = rng.normal(size=(4, 4)) + 2 * np.eye(4)
        b = rb.azize_basu_2022_linear_problem_dependent(np.eye(4) @ M.T,
                                                        np.linalg.solve(M.T, theta), 1000)
        assert b.value / math.log(1000) == pytest.approx(_thm5_basis_closed_form([0.3, 0.6, 0.9]),
                                                         rel=1e-5)


def test_thm5_certified_value_meets_its_primal():
    """The value is a dual point of the program (sound whatever the solver did); on a random
    12-action set in ℝ³ it is within 1e-5 of the primal, and the primal point is feasible."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(12, 3))
    b = rb.azize_basu_2022_linear_problem_dependent(A, np.array([0.5, -0.2, 0.3]), 100)
    dual, primal = (float(v) for v in
                    b.notes[-1].split("c = ")[1].split(" certified (dual), primal "))
    assert 0 < dual <= primal <= dual * (1 + 1e-5)


def test_thm5_assumptions_and_bad_input():
    theta = np.array([1.0, 1.0, 0.0])
    tie = rb.azize_basu_2022_linear_problem_dependent(np.eye(3), theta, 100)
    assert tie.value is None and any("unique optimal" in u for u in tie.unmet)
    flat = rb.azize_basu_2022_linear_problem_dependent(np.eye(3)[:2], np.ones(3), 100)
    assert flat.value is None and any("spanning" in u for u in flat.unmet)
    with pytest.raises(DpledgerError):
        rb.azize_basu_2022_linear_problem_dependent(np.eye(3), np.ones(2), 100)
    with pytest.raises(DpledgerError):
        rb.azize_basu_2022_linear_problem_dependent(np.eye(3), np.ones(3), 100, 1.0, rho=-1)
