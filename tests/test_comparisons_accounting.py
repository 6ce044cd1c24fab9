"""The arithmetic behind the papers' comparisons (issue 23 §3): the currency matchings
(gdp.pure_epsilon_for_mu, experiments.matched), Ou et al.'s three privacy statements
(accounting.ou_statements), tuning on separate streams, and DP-UCB's tuned confidence
relaxation.  Each is held against an independent recomputation or a property that must hold
(a valid statement is never below the exact privacy curve of the mechanism it describes).
"""
from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from dpledger.accounting import ou_statements as S
from dpledger.accounting.gdp import gdp_delta, gdp_epsilon, mu_of_pure_epsilon, pure_epsilon_for_mu
from dpledger.cli import main
from dpledger.errors import DpledgerError
from dpledger.experiments import matched
from dpledger.policies import regret_bounds
from dpledger.policies.registry import make_policy

MUS = [1e-3, 0.1, 1.0, 5.0, 10.0, 40.0]


# -- currency matching --------------------------------------------------------------------------

@pytest.mark.parametrize("mu", MUS)
def test_pure_epsilon_for_mu_closed_form_and_tight(mu):
    """ε = ln(Φ(μ/2)/Φ(−μ/2)) (mpmath, 40 digits), rounded down; the forward map gives ≤ μ and
    a 1e-8 larger ε gives more than μ."""
    eps = pure_epsilon_for_mu(mu)
    with mpmath.workdps(40):
        exact = mpmath.log(mpmath.ncdf(mu / 2) / mpmath.ncdf(-mu / 2))
    assert eps <= exact and eps == pytest.approx(float(exact), rel=1e-9)
    assert mu_of_pure_epsilon(eps) <= mu
    assert mu_of_pure_epsilon(eps * (1 + 1e-8)) > mu


@pytest.mark.parametrize("mu", [0.5, 1.0, 5.0, 10.0])
def test_gdp_dominance_matching_is_dominated_everywhere(mu):
    """At ε = pure_epsilon_for_mu(μ) every ε-DP mechanism's δ(ε′) = max(0, (e^ε − e^ε′)/(1 + e^ε))
    (randomized response, the worst ε-DP pair) lies below the μ-GDP curve at every ε′ ≥ 0."""
    eps = pure_epsilon_for_mu(mu)
    for e1 in np.linspace(0.0, eps, 41):
        rr = max(0.0, (math.exp(eps) - math.exp(e1)) / (1.0 + math.exp(eps)))
        assert rr <= gdp_delta(float(e1), mu) * (1 + 1e-9) + 1e-300, (mu, e1)


@pytest.mark.parametrize("mu", [1.0, 5.0, 10.0, 157.2])
def test_epsilon_at_delta_matching(mu):
    eps = matched.matched_epsilon(mu, "epsilon-at-delta")
    assert eps == gdp_epsilon(mu, matched.DELTA)
    assert gdp_delta(eps, mu) <= matched.DELTA < gdp_delta(eps * (1 - 1e-6), mu)
    assert matched.matched_epsilon(mu, "gdp-dominance") < eps    # the stricter matching
    with pytest.raises(DpledgerError, match="unknown currency matching"):
        matched.matched_epsilon(mu, "nope")


# -- tuning on separate streams -----------------------------------------------------------------

def _rep(mean):
    return {"regret": {"final_mean": mean}}


def test_select_uses_only_the_tuning_streams():
    reports = {"p-1-tune": _rep(5.0), "p-1": _rep(1.0), "p-3-tune": _rep(2.0), "p-3": _rep(9.0),
               "p-10-tune": _rep(2.0), "p-10": _rep(0.5)}
    t = matched.select(reports, "p", [1, 3, 10])
    assert t.value == 3                     # the first of the tied tuning minima, not hindsight
    assert t.report is reports["p-3"] and t.label == "p-3"
    assert t.reported == {1: 1.0, 3: 9.0, 10: 0.5}
    assert "best on the reported streams in hindsight: 10" in t.evidence()


def test_tuned_configs_use_disjoint_streams():
    env = {"kind": "bernoulli", "means": [0.6, 0.4]}
    cfgs = matched.tuned_configs("x", [1, 2.5], lambda v: ("mts-gaussian", {"b": 1, "c": v}),
                                 env, 100, 3, 7, {"policy": "mts-gaussian"})
    assert [c.label for c in cfgs] == ["x-1-tune", "x-1", "x-2.5-tune", "x-2.5"]
    assert {c.seed for c in cfgs if c.tags["part"] == "tuning"} == {matched.tuning_seed(7)}
    assert {c.seed for c in cfgs if c.tags["part"] == "candidate"} == {7}
    assert matched.tuning_seed(7) != 7 and len({c.key() for c in cfgs}) == 4


# -- Ou et al.'s three statements ---------------------------------------------------------------

SETTINGS = [(1000, 0, 1000.0), (10_000, 0, 400.0), (10_000, 10, 50.0), (100_000, 0, 4000.0)]


@pytest.mark.parametrize("T,b,c", SETTINGS)
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_rdp_statement_is_mironovs_conversion_at_the_best_order(T, b, c, delta):
    """ρ + 2√(ρ ln(1/δ)) against a numerical minimisation of ρλ + ln(1/δ)/(λ − 1) over λ > 1,
    ρ = T/(2c(b+1)); never below the exact GDP curve of the same Gaussian composition."""
    rho = T / (2 * c * (b + 1))
    f = lambda lam: rho * lam + math.log(1 / delta) / (lam - 1)     # noqa: E731
    num = minimize_scalar(f, bounds=(1 + 1e-9, 1e7), method="bounded",
                          options={"xatol": 1e-12}).fun
    val = S.rdp_statement(T, b, c, delta)
    assert val >= num * (1 - 1e-9) and val == pytest.approx(num, rel=1e-7)
    assert val >= S.gdp_statement(T, b, c, delta)


def test_corollary1_is_dwork_rothblum_vadhan():
    for T, e0, dp in ((100, 0.1, 1e-6), (10_000, 0.01, 1e-9), (5, 2.0, 1e-3)):
        want = math.sqrt(2 * T * math.log(1 / dp)) * e0 + T * e0 * math.expm1(e0)
        got = S.corollary1_epsilon(T, e0, dp)
        assert got >= want * (1 - 1e-12) and got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("mu,sig0,sig1", [(0.3, 1.0, 0.2), (1.0, 0.5, 2.0), (2.0, 0.25, 0.25),
                                         (1.0, 1.0, 1e-9)])
def test_rnm_round_statement_holds_for_heterogeneous_noise(mu, sig0, sig1):
    """Theorems 6–7 as reconstructed: K = 2 noisy means with different σ, arm 0's mean moved by
    Δ = μ·σ0 between neighbours; the argmax's exact hockey-stick divergence at ε0 is at most
    the δ0 the statement pairs with ε0 (the Gaussian curve of μ = Δ/σ0), for every gap m0 − m1.
    With the other arm noiseless (σ1 → 0) the argmax is a threshold on arm 0's noisy mean and
    the statement is tight: some gap attains δ0 within 2 %."""
    delta = mu * sig0                       # arm 0's mean moves by Δ = μ·σ0
    s = math.hypot(sig0, sig1)
    for d0 in (1e-2, 1e-4, 1e-6):
        eps0 = S.rnm_round_epsilon(mu, d0)
        gap = np.linspace(-8 * s, 8 * s, 4001)
        p, q = norm.cdf(gap / s), norm.cdf((gap + delta) / s)       # P(arm 0 wins) on D, D'
        worst = 0.0
        for a, b in ((p, q), (q, p)):
            hs = np.maximum(a - math.exp(eps0) * b, (1 - a) - math.exp(eps0) * (1 - b))
            assert np.all(hs <= d0 * (1 + 1e-9)), (d0, hs.max())
            worst = max(worst, float(hs.max()))
        if sig1 < 1e-6:
            assert worst >= 0.98 * d0, (d0, worst)


@pytest.mark.parametrize("T,b,c", SETTINGS)
def test_standard_dp_statement_properties(T, b, c):
    """Every composer's value is a valid statement about the T-fold composition of μ_r-Gaussians,
    so it is never below that composition's exact curve (the GDP statement); the approx
    accountant (Kairouz–Oh–Viswanath) is never looser than Corollary 1 at the split Corollary
    1 chose; and the reported split adds up to δ."""
    for delta in (1e-3, 1e-6, 1e-9):
        gdp = S.gdp_statement(T, b, c, delta)
        cor = S.standard_dp_statement(T, b, c, delta, "corollary1")
        app = S.standard_dp_statement(T, b, c, delta, "approx")
        assert cor.epsilon >= gdp and app.epsilon >= gdp
        assert T * Fraction(cor.delta0) + Fraction(cor.delta_prime) <= Fraction(delta)
        assert T * cor.delta0 + cor.delta_prime == pytest.approx(delta, rel=1e-12)
        assert cor.epsilon0 == S.rnm_round_epsilon(S.round_mu(b, c), cor.delta0)
        same_split = S._compose(T, cor.epsilon0, cor.delta0, delta, "approx")
        assert same_split <= cor.epsilon * (1 + 1e-12)
        assert app.epsilon <= same_split * (1 + 1e-12)     # the search can only improve it
    with pytest.raises(DpledgerError, match="composer must be one of"):
        S.standard_dp_statement(100, 0, 1.0, 1e-6, "basic")


def test_round_mu_is_the_theorems_per_round_bound():
    from dpledger.accounting.theorems import ou_2024_ts_gaussian
    for T, b, c in SETTINGS:
        assert S.round_mu(b, c) == pytest.approx(1 / math.sqrt(c * (b + 1)), rel=1e-15)
        assert ou_2024_ts_gaussian(T, b, c).gdp_mu == pytest.approx(
            math.sqrt(T) * S.round_mu(b, c), rel=1e-12)


# -- DP-UCB's tuned confidence relaxation -------------------------------------------------------

def test_relaxation_scale_scales_gamma_only():
    T, K = 10_000, 5
    base, tuned = make_policy("dp-ucb", epsilon=1.0), make_policy("dp-ucb", epsilon=1.0,
                                                                  relaxation_scale=0.01)
    assert tuned.confidence_relaxation(T, K) == pytest.approx(
        0.01 * base.confidence_relaxation(T, K), rel=1e-15)
    assert tuned.releases(T, K) == base.releases(T, K)
    assert tuned.certificate(T, K) == base.certificate(T, K)
    inst = regret_bounds._instance([0.9, 0.4, 0.4, 0.4, 0.4])
    (bound,) = regret_bounds.UPPER_BOUNDS["dp-ucb"](tuned, inst, T)
    assert bound.value is None and any("relaxation_scale = 0.01" in u for u in bound.unmet)
    (plain,) = regret_bounds.UPPER_BOUNDS["dp-ucb"](base, inst, T)
    assert not plain.unmet


def test_relaxation_scale_bad_input_and_run_json(tmp_path, capsys):
    with pytest.raises(DpledgerError, match="width=experimental has no Γ to scale"):
        make_policy("dp-ucb", width="experimental", relaxation_scale=0.5)
    base = ["run", "dp-ucb", "--horizon", "400", "--runs", "2", "--seed", "1"]
    assert main(base + ["--out", str(tmp_path / "a.json")]) == 0
    assert main(base + ["--set", "relaxation_scale=0.01", "--out", str(tmp_path / "b.json")]) == 0
    a, b = (json.load(open(tmp_path / f)) for f in ("a.json", "b.json"))
    assert "relaxation_scale" not in a["policy"]["params"]
    assert b["policy"]["params"]["relaxation_scale"] == 0.01
    assert main(["verify", str(tmp_path / "b.json"), "--resimulate"]) == 0
    capsys.readouterr()
    code = main(base + ["--set", "relaxation_scale=0", "--out", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "relaxation_scale must be > 0" in err
