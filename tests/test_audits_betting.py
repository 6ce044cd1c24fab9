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
