"""The betting sequential audit (issue 33 §2; audits/betting.py): its error rate under optional
stopping, its monotone lower confidence sequence, and the planted bug caught within 10³ trials.

The false-alarm test stops each audit at the first pair at which the (true) claim looks
contradicted — the most aggressive stopping rule — and counts how often that happens: at most
α in expectation by Ville's inequality; the count must stay below the Binomial(n, α) 99.9 %
quantile (a correct implementation fails with ≤ 0.1 %).  The full count over 1000 seeds is
``benchmarks/bench_one_run.py --betting-false-alarms``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpledger.audits.betting import betting_audit, e_value, lower_bound


def _laplace(eps: float, seed: int):
    """Trial i of side s: Lap(s, 1/ε) from its own stream, a fixed function of (seed, s, i)."""
    def sample(side, start, n):
        g = np.random.default_rng([seed, side])
        return g.laplace(float(side), 1.0 / eps, start + n)[start:]
    return sample


def test_e_value_monotone_in_epsilon():
    counts = [(0.3, 0.2, 5, 40, 3, 52), (0.4, 0.1, 7, 30, 9, 210)]
    vals = [e_value(counts, e) for e in np.linspace(0, 4, 41)]
    assert all(a >= b - 1e-12 for a, b in zip(vals, vals[1:], strict=False))
    lo = lower_bound(counts, 0.05)
    assert e_value(counts, lo) >= 20.0 > e_value(counts, lo + 1e-6)


@pytest.mark.audit_violations_expected(reason="counts false alarms at rate <= alpha = 0.2")
def test_false_alarm_rate_under_optional_stopping():
    """Laplace with ε = 1, claim 1 (true): 150 audits at α = 0.2, each stopping as soon as the
    claim is contradicted (up to 2000 trials per side)."""
    n, a = 150, 0.2
    hits, lows = 0, []
    for seed in range(n):
        r = betting_audit(_laplace(1.0, seed), first=100, max_trials=2000, claim=1.0,
                          target=None, confidence=1 - a)
        hits += r.stop_reason == "contradicted"
        lows.append(r.lower)
    assert hits <= stats.binom.ppf(0.999, n, a)
    assert sum(lo > 1.0 for lo in lows) == hits      # the bound passes ε exactly then
    assert np.mean(lows) > 0.5                       # and it has power


def test_detects_double_epsilon_quickly_and_reaches_target():
    """True ε = 2 against claim 1: contradicted within 10³ trials per side in 20 of 20 seeds;
    with target 0.5 (below the truth) and a claim of 3 it stops at 'reached'."""
    ns = []
    for seed in range(20):
        r = betting_audit(_laplace(2.0, seed), first=100, max_trials=1000, claim=1.0,
                          target=None)
        assert r.stop_reason == "contradicted" and r.lower > 1.0
        ns.append(r.trials)
    assert max(ns) <= 1000
    r = betting_audit(_laplace(2.0, 0), first=100, max_trials=5000, claim=3.0, target=0.5)
    assert r.stop_reason == "reached" and 0.5 <= r.lower < 3.0


def test_policy_planted_bug_sequential(tmp_path):
    """dp-klucb renoise-cumulative (stated ε = 0.5): white-box betting audit contradicts the
    claim within 10³ trials per side; its own certificate is not exceeded."""
    from dpledger.audits.policy import audit_policy
    from dpledger.policies.registry import make_policy
    res = audit_policy(make_policy("dp-klucb", epsilon=0.5, mechanism="renoise-cumulative"),
                       trials=100, max_trials=1000, mode="whitebox", betting=True, claim=0.5,
                       seed=0)
    j = res.to_json()
    assert j["sequential"]["kind"] == "betting"
    assert j["sequential"]["stop_reason"] == "contradicted" and j["claim"]["contradicted"]
    assert j["sequential"]["trials_drawn"] <= 1000
    assert 0.5 < j["epsilon_lower"] <= j["certificate"]["pure_epsilon"]
    assert not math.isnan(j["epsilon_lower"])


# ---- GDP certificates: μ-GDP as (ε, δ_μ(ε)) at a fixed ε grid, a mixture e-process ----------

def _gauss(mu: float, seed: int):
    """Trial i of side s: N(s·μ, 1) from its own stream (the Gaussian shift is exactly μ-GDP)."""
    def sample(side, start, n):
        g = np.random.default_rng([seed, side, 7])
        return g.normal(float(side) * mu, 1.0, start + n)[start:]
    return sample


def test_gdp_e_value_monotone_in_mu_and_grid_fixed_by_claim():
    from dpledger.accounting.gdp import gdp_delta
    from dpledger.audits.betting import Hypothesis, gdp_grid
    grid = gdp_grid(2.0)
    assert grid[0] == 0.0 and grid[-1] == pytest.approx(10.0) and len(grid) == 21
    hyp = Hypothesis("mu", grid)
    lam = np.linspace(0.05, 0.45, 21)
    counts = [(lam, lam[::-1], 60, 30, 2, 8), (lam / 2, lam, 150, 90, 1, 15)]
    vals = [e_value(counts, u, hyp) for u in np.linspace(0.0, 6.0, 61)]
    assert all(a >= b * (1 - 1e-12) for a, b in zip(vals, vals[1:], strict=False))
    lo = lower_bound(counts, 0.05, hyp)
    assert e_value(counts, lo, hyp) >= 20.0 > e_value(counts, lo + 1e-6, hyp)
    # the constraints are the accounting's δ_μ(ε) (one formula: accounting/gdp.py)
    w, d = hyp.constraints(1.5)
    assert d[3] == gdp_delta(grid[3], 1.5) and w[3] == math.exp(-grid[3])
    # recomputed by hand: component a of constraint j after one batch of counts
    za = lambda j, o: [w[j] * (1 - d[j]) - 1, w[j] * (1 - d[j]), -w[j] * d[j] - 1,
                       -w[j] * d[j]][o]
    one = [(lam, lam, 3, 4, 1, 2)]
    ka = [math.prod((1 + lam[j] * za(j, o)) ** n for o, n in enumerate((3, 4, 1, 2)))
          for j in range(21)]
    zb = lambda j, o: [-w[j] * d[j], w[j] * (1 - d[j]), -w[j] * d[j] - 1,
                       w[j] * (1 - d[j]) - 1][o]
    kb = [math.prod((1 + lam[j] * zb(j, o)) ** n for o, n in enumerate((3, 4, 1, 2)))
          for j in range(21)]
    assert e_value(one, 1.5, hyp) == pytest.approx((sum(ka) + sum(kb)) / 42, rel=1e-12)


@pytest.mark.audit_violations_expected(reason="counts false alarms at rate <= alpha = 0.2")
def test_gdp_false_alarm_rate_under_optional_stopping():
    """N(0, 1) against N(1, 1) (exactly 1-GDP), claim μ = 1 (true): 150 audits at α = 0.2,
    each stopping at its first contradiction (≤ 2000 trials per side); the count must stay
    below the Binomial(150, 0.2) 99.9 % quantile (the full count over 1000 seeds:
    benchmarks/bench_one_run.py --betting-false-alarms)."""
    n, a = 150, 0.2
    hits, lows = 0, []
    for seed in range(n):
        r = betting_audit(_gauss(1.0, seed), first=100, max_trials=2000, claim=1.0,
                          target=None, confidence=1 - a, currency="mu")
        hits += r.stop_reason == "contradicted"
        lows.append(r.lower)
    assert hits <= stats.binom.ppf(0.999, n, a)
    assert sum(lo > 1.0 for lo in lows) == hits
    assert np.mean(lows) > 0.4


def test_gdp_detects_double_mu_and_reaches_target():
    """True μ = 2 against the claim 1: contradicted within 10³ trials per side in 20 of 20
    seeds, the bound is then above 1; with target 0.5 and claim 4 it stops at 'reached'."""
    for seed in range(20):
        r = betting_audit(_gauss(2.0, seed), first=100, max_trials=1000, claim=1.0,
                          target=None, currency="mu")
        assert r.stop_reason == "contradicted" and r.lower > 1.0 and r.trials <= 1000
    r = betting_audit(_gauss(2.0, 0), first=100, max_trials=5000, claim=4.0, target=0.5,
                      currency="mu")
    assert r.stop_reason == "reached" and 0.5 <= r.lower < 4.0


@pytest.mark.audit_violations_expected(reason="planted defect: DP-TS-UCB drawing half its sigma")
def test_gdp_planted_bug_sequential():
    """DP-TS-UCB (α = 0, T = 41, K = 32: certificate μ 3) whose kernel draws half its declared
    σ (true μ 6): the white-box betting audit contradicts its certificate within 10³ trials
    per side; the correct policy, same seeds, is not contradicted."""
    from planted import PlantedHalfSigmaDPTSUCB
    from dpledger.audits.policy import audit_policy
    from dpledger.policies.registry import make_policy
    for planted_bug in (True, False):
        pol = PlantedHalfSigmaDPTSUCB(alpha=0.0) if planted_bug else make_policy("dp-ts-ucb",
                                                                                 alpha=0.0)
        j = audit_policy(pol, trials=100, max_trials=1000, mode="whitebox", T=41, K=32,
                         betting=True, seed=0).to_json()
        seq = j["sequential"]
        assert j["certificate"]["gdp_mu"] == pytest.approx(3.0)
        assert seq["kind"] == "betting" and seq["currency"] == "mu"
        assert len(seq["epsilon_grid"]) == 21 and j["epsilon_lower_direct"] is None
        if planted_bug:
            assert seq["stop_reason"] == "contradicted" and j["claim"]["contradicted"]
            assert seq["trials_drawn"] <= 1000 and j["mu_lower"] > 3.0 and j["violation"]
        else:
            assert seq["stop_reason"] == "max_trials" and not j["claim"]["contradicted"]
            assert 1.5 < j["mu_lower"] <= 3.0 and not j["violation"]


def test_cli_gdp_sequential(tmp_path, capsys):
    """`dpledger audit dp-ts-ucb --sequential` (GDP): exit 1 when a stated μ below the policy's
    (1.5 < 3) is contradicted, the line names the claim in μ; the audit file carries the grid."""
    import json
    from dpledger.cli import main
    out = tmp_path / "a.json"
    code = main(["audit", "dp-ts-ucb", "--set", "alpha=0", "--horizon", "41", "--arms", "32",
                 "--mode", "whitebox", "--sequential", "--trials", "100", "--max-trials", "1000",
                 "--claim", "1.5", "--out", str(out)])
    so = capsys.readouterr().out
    j = json.loads(out.read_text())
    assert code == 1 and "the claim mu 1.5 is contradicted" in so
    assert j["claim"] == {"value": 1.5, "currency": "mu", "contradicted": True}
    assert 1.5 < j["mu_lower"] <= j["certificate"]["gdp_mu"]
    assert j["sequential"]["epsilon_grid"][1] == pytest.approx(1.5 / 4)


@pytest.mark.audit_violations_expected(reason="counts false alarms at rate <= alpha = 0.2")
@pytest.mark.parametrize("name, params, design", [
    ("lazy-dp-ts", {"epsilon": 1.0}, {}),
    ("dp-ts-ucb", {"alpha": 0.0}, {"T": 41, "K": 32})])
def test_policy_false_alarms_under_optional_stopping(name, params, design):
    """Correct policies, white-box betting audits each stopping at its first contradiction of
    the certificate (≤ 1000 trials per side), 40 seeds at α = 0.2: the count must stay below
    the Binomial(40, 0.2) 99.9 % quantile (the full count over 1000 seeds at 95 %:
    benchmarks/bench_one_run.py --betting-policy-false-alarms)."""
    from dpledger.audits.policy import audit_policy
    from dpledger.policies.registry import make_policy
    n, a = 40, 0.2
    hits = 0
    for seed in range(n):
        j = audit_policy(make_policy(name, **params), trials=100, max_trials=1000,
                         mode="whitebox", betting=True, seed=seed, confidence=1 - a,
                         **design).to_json()
        seq = j["sequential"]
        hits += seq["stop_reason"] == "contradicted"
        assert (seq["lower"] > seq["claim"]) == (seq["stop_reason"] == "contradicted")
    assert hits <= stats.binom.ppf(0.999, n, a)
