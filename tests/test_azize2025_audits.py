"""Audits of DP-KLUCB and DP-IMED (issue 17 §5): the white-box capture of every release, the
re-noising variant's audit exceeding ε where its certificate says it should, and the black-box
neighbour pairs.

Seeds are fixed, so every audit here is reproducible; the statistical check (the captured score
against an independent simulation) rejects at p < 1e-3, a false alarm at most 0.1 % of the time
for a correct kernel.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpledger.accounting.releases import LaplaceRelease
from dpledger.audits.pairs import default_pair
from dpledger.audits.policy import audit_policy, run_trials
from dpledger.policies.azize2025 import max_phases
from dpledger.policies.registry import make_policy

T = 1000


def _renoise(name, eps=1.0):
    return make_policy(name, epsilon=eps, mechanism="renoise-cumulative")


@pytest.mark.parametrize("name", ["dp-klucb", "dp-imed"])
def test_renoise_whitebox_audit_exceeds_epsilon(name):
    """The naive variant re-releases the witness (the good arm's first reward) at every phase end:
    max_phases(1000, 1.5) = 16 releases in every trial, the certificate's count exactly; the
    audit's lower bound is far above ε (the paper mechanism's certificate) and below the
    variant's own certificate 16·ε."""
    j = audit_policy(_renoise(name), trials=4000, mode="whitebox", T=T, seed=3).to_json()
    lap = LaplaceRelease(scale=1.0, sensitivity=1.0).epsilon
    m = max_phases(T, 1.5)
    assert m == 16
    assert j["certificate"]["pure_epsilon"] == pytest.approx(m * lap, rel=1e-12)
    assert j["score"] == "likelihood-ratio"
    assert j["witness_releases_mean"] == [m, m]          # every trial: all 16 releases
    assert 3.0 < j["epsilon_lower"] <= j["certificate"]["pure_epsilon"]
    assert j["epsilon_lower"] > 3 * 1.0                   # > 3 × ε


@pytest.mark.parametrize("name", ["dp-klucb", "dp-imed"])
def test_phase_sums_whitebox_audit_stays_below_epsilon(name):
    """The paper's mechanism, same pair: the witness lies in one release (the initial pull), so
    the LR score is that release's, and the bound is close to — never above — ε."""
    j = audit_policy(make_policy(name, epsilon=1.0), trials=4000, mode="whitebox", T=T,
                     seed=3).to_json()
    assert j["witness_releases_mean"] == [1.0, 1.0]
    assert 0.7 < j["epsilon_lower"] <= j["certificate"]["pure_epsilon"] == 1.0


def test_renoise_captured_score_matches_independent_simulation():
    """Under D the 16 captured releases are clean sum + Lap(1) each (the witness arm's cumulative
    sums), so the LR score is a sum of 16 independent clip(2X − 1, −1, 1), X ~ Laplace(1):
    two-sample KS against a numpy simulation of that sum (ties make KS conservative)."""
    pol = _renoise("dp-klucb")
    pair = default_pair(pol, T, 2, whitebox=True)
    env0, _ = pair.envs()
    f = run_trials(pol, env0, T, 3000, seed=11, side=0, stop=T, capture=True, arm=pair.arm,
                   t_star=pair.round, lr="laplace-releases", delta=1.0)
    assert np.all(f["clean"] == 16)                       # releases containing the witness
    gen = np.random.default_rng(12345)
    x = gen.laplace(0.0, 1.0, size=(20000, 16))
    ref = np.clip(2 * x - 1, -1, 1).sum(axis=1)
    assert stats.ks_2samp(f["released"], ref).pvalue > 1e-3
    assert abs(f["released"].mean() - ref.mean()) < 5 * ref.std() / np.sqrt(3000)


def test_dp_klucb_blackbox_pair_and_audit():
    pol = make_policy("dp-klucb", epsilon=1.0)
    pair = default_pair(pol, T, 2)
    js = pair.to_json()
    assert js["design"] == "dp-klucb" and js["round"] == 300 and js["witness_arm"] == -1
    diff = np.flatnonzero(np.any(pair.table0 != pair.table1, axis=1))
    assert diff.tolist() == [299]
    assert np.all(np.delete(pair.table0, 299, axis=0) == 0.0)
    j = audit_policy(pol, trials=4000, mode="blackbox", T=T, seed=5).to_json()
    assert 0.2 < j["epsilon_lower"] <= j["certificate"]["pure_epsilon"] == 1.0


def test_dp_imed_blackbox_uses_generic_pair_and_whitebox_the_good_witness_arm():
    pol = make_policy("dp-imed", epsilon=1.0)
    assert default_pair(pol, T, 2).to_json()["design"] == "generic"
    wb = default_pair(pol, T, 2, whitebox=True)
    assert wb.to_json()["design"] == "dp-imed-whitebox" and wb.round == 1 and wb.arm == 0
    assert np.all(wb.table0[1:, 0] == 1.0) and np.all(wb.table0[:, 1] == 0.0)
