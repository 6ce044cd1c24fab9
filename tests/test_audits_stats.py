"""Audit statistics: Clopper–Pearson bounds, the ε/μ formulas, the selection split, coverage.

Coverage (issue #6, item 1): repeated seeded audits of mechanisms with known ε (or μ) exceed the
truth no more often than α allows.  Each check runs N audits and fails when the number of
exceedances is above the 0.999 quantile of Binomial(N, α) — the count a procedure whose
exceedance probability is exactly α would pass 99.9 % of the time.  A negative control shows the
check can fail: selecting the event and counting on the *same* trials (no split) is rejected.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, norm

from dpledger.audits.stats import (audit_scores, bounds_from_counts, cp_lower, cp_upper,
                                   epsilon_from_rates, mu_from_rates, select_event, split_sizes,
                                   threshold_grid)
from dpledger.errors import DpledgerError

ALPHA = 0.05


# ---- Clopper–Pearson ---------------------------------------------------------------------------

def test_cp_zero_successes_closed_form():
    # k = 0: p_ucb = 1 − a^{1/n} (the "rule of three" bound)
    for n in (10, 1000, 10 ** 6):
        assert cp_upper(0, n, ALPHA / 2) == pytest.approx(1 - (ALPHA / 2) ** (1 / n), rel=1e-9)
        assert cp_lower(n, n, ALPHA / 2) == pytest.approx((ALPHA / 2) ** (1 / n), rel=1e-9)


def test_cp_edges_and_symmetry():
    assert cp_upper(7, 7, 0.025) == 1.0
    assert cp_lower(0, 7, 0.025) == 0.0
    for k, n in ((3, 20), (500, 1000), (1, 10 ** 5)):
        assert cp_lower(k, n, 0.025) == pytest.approx(1 - cp_upper(n - k, n, 0.025), rel=1e-9)
        assert cp_lower(k, n, 0.025) < k / n < cp_upper(k, n, 0.025)


def test_cp_exact_coverage_against_binomial_tail():
    # the CP upper bound is the p at which P[Bin(n, p) <= k] = a
    for k, n in ((0, 50), (12, 50), (49, 50)):
        p = cp_upper(k, n, 0.025)
        assert binom.cdf(k, n, p) == pytest.approx(0.025, rel=1e-6)
        q = cp_lower(k + 1, n, 0.025)
        assert binom.sf(k, n, q) == pytest.approx(0.025, rel=1e-6)


# ---- the bounds -------------------------------------------------------------------------------

def test_epsilon_formula_both_directions():
    # Kairouz, Oh & Viswanath 2015: max(log((1 − δ − FNR)/FPR), log((1 − δ − FPR)/FNR), 0)
    assert epsilon_from_rates(0.1, 0.3) == pytest.approx(math.log(0.7 / 0.1))
    assert epsilon_from_rates(0.3, 0.1) == pytest.approx(math.log(0.7 / 0.1))
    assert epsilon_from_rates(0.1, 0.3, 0.05) == pytest.approx(math.log(0.65 / 0.1))
    assert epsilon_from_rates(0.6, 0.6) == 0.0          # numerators ≤ 0 → clipped at 0


def test_mu_formula_symmetric():
    f, g = 0.1, 0.3
    expect = norm.ppf(1 - f) - norm.ppf(g)
    assert mu_from_rates(f, g) == pytest.approx(expect)
    assert mu_from_rates(g, f) == pytest.approx(expect)
    assert mu_from_rates(0.5, 0.5) == 0.0
    assert mu_from_rates(1.0, 1.0) == 0.0


def test_bounds_use_alpha_over_two_per_rate():
    b = bounds_from_counts(10_000, 500, 10_000, 9_000, confidence=0.95)
    assert b["fpr_upper"] == pytest.approx(cp_upper(500, 10_000, 0.025))
    assert b["fnr_upper"] == pytest.approx(cp_upper(1_000, 10_000, 0.025))
    assert b["epsilon_lower"] == pytest.approx(math.log((1 - b["fnr_upper"]) / b["fpr_upper"]))
    # higher confidence → wider bounds → smaller ε
    assert bounds_from_counts(10_000, 500, 10_000, 9_000, confidence=0.999)["epsilon_lower"] \
        < b["epsilon_lower"]


def test_ceiling_with_zero_errors():
    # zero errors on n trials per side cap ε at about log(n / 3.69) at 95 %
    n = 10 ** 5
    b = bounds_from_counts(n, 0, n, n)
    assert b["epsilon_lower"] == pytest.approx(math.log(1 - (1 - 0.025 ** (1 / n))) -
                                               math.log(1 - 0.025 ** (1 / n)), rel=1e-9)
    assert 10.1 < b["epsilon_lower"] < 10.3


# ---- selection split ------------------------------------------------------------------------

def test_split_sizes_and_grid():
    assert split_sizes(1000, 0.1) == (100, 900)
    assert split_sizes(10, 0.01) == (1, 9)
    g = threshold_grid(np.arange(10_000, dtype=float))
    assert g.size == 200 and np.all(np.diff(g) > 0)
    assert threshold_grid(np.array([0.0, 1.0] * 50)).tolist() == [0.0, 1.0]


def test_counts_come_only_from_the_count_split():
    rng = np.random.default_rng(5)
    n = 4000
    a, b = rng.laplace(0, 1, n), rng.laplace(1, 1, n)
    base = audit_scores(a, b)
    m, _ = split_sizes(n, 0.1)
    assert base.n0 == n - m and base.n1 == n - m
    # changing count trials never changes the selected event …
    a2, b2 = a.copy(), b.copy()
    a2[m:] = rng.laplace(0, 1, n - m)
    b2[m:] = rng.laplace(1, 1, n - m)
    other = audit_scores(a2, b2)
    assert other.event == base.event
    # … and changing selection trials never changes the counts of a given event
    a3, b3 = a.copy(), b.copy()
    a3[:m] = rng.laplace(0, 1, m)
    b3[:m] = rng.laplace(1, 1, m)
    third = audit_scores(a3, b3)
    ev = third.event
    assert third.k0 == int(ev.contains(a[m:]).sum()) and third.k1 == int(ev.contains(b[m:]).sum())


def test_reverse_direction_null_scores_give_zero():
    # jax_privacy PR #270: identical score distributions must give 0 in both directions
    rng = np.random.default_rng(11)
    for _ in range(5):
        x = rng.normal(size=20_000)
        r = audit_scores(x[:10_000], x[10_000:])
        assert r.epsilon_lower == 0.0 and r.mu_lower == 0.0


def test_selection_picks_the_better_score():
    rng = np.random.default_rng(3)
    n = 20_000
    s0 = {"noise": rng.normal(size=n), "signal": rng.laplace(0, 1, n)}
    s1 = {"noise": rng.normal(size=n), "signal": rng.laplace(1, 1, n)}
    r = audit_scores(s0, s1)
    assert r.event.score == "signal" and r.epsilon_lower > 0.8


@pytest.mark.parametrize("bad", [
    dict(confidence=1.0), dict(confidence=0), dict(confidence="x"), dict(selection_fraction=0.0),
    dict(selection_fraction=1.0), dict(delta=-0.1), dict(currency="rho"),
])
def test_bad_input(bad):
    with pytest.raises(DpledgerError):
        audit_scores(np.zeros(10), np.ones(10), **bad)


def test_bad_scores():
    with pytest.raises(DpledgerError):
        audit_scores(np.zeros(1), np.ones(1))
    with pytest.raises(DpledgerError):
        audit_scores(np.array([0.0, np.nan, 1.0]), np.ones(3))
    with pytest.raises(DpledgerError):
        audit_scores({"a": np.zeros(5)}, {"b": np.zeros(5)})


# ---- coverage ---------------------------------------------------------------------------------

def _limit(reps: int) -> int:
    return int(binom.ppf(0.999, reps, ALPHA))


def test_coverage_null_laplace_gaussian():
    """N = 400 audits each at n = 2000 per side, seed 2024, 95 % confidence:
    true ε = 0 (identical Laplace), Laplace ε = 1, Gaussian μ = 1.  Exceedances must stay within
    Binomial(400, 0.05)'s 0.999 quantile (35); observed rates are far lower (conservative CP)."""
    rng = np.random.default_rng(2024)
    reps, n = 400, 2000
    null = lap = gauss = 0
    for _ in range(reps):
        null += audit_scores(rng.laplace(0, 1, n), rng.laplace(0, 1, n)).epsilon_lower > 0
        lap += audit_scores(rng.laplace(0, 1, n), rng.laplace(1, 1, n)).epsilon_lower > 1.0
        gauss += audit_scores(rng.normal(0, 1, n), rng.normal(1, 1, n),
                              currency="mu").mu_lower > 1.0
    limit = _limit(reps)
    assert null <= limit and lap <= limit and gauss <= limit, (null, lap, gauss, limit)


def test_coverage_check_rejects_selection_on_count_data():
    """Negative control: choosing the event on all trials and reporting its bound on the same
    trials (the uncorrected maximum over the grid) exceeds the true ε = 0 too often; the same
    check as above rejects it."""
    rng = np.random.default_rng(7)
    reps, n = 1000, 1000
    bad = sum(select_event({"v": rng.laplace(0, 1, n)}, {"v": rng.laplace(0, 1, n)}, alpha=ALPHA,
                           currency="epsilon", delta=0.0).criterion > 0 for _ in range(reps))
    assert bad > _limit(reps), bad
