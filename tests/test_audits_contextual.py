"""Audits of the contextual releases and policies (audits/vector_releases.py,
audits/contextual.py): the pairs attain what they claim (closed forms, brute force), the audits
come close to the certificate where the worst case is reachable and never above it (the
suite-wide guard), the limits are computed, and a planted defect is caught."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpledger.accounting.releases import (GaussianVectorRelease, LaplaceVectorRelease,
                                          SymmetricMatrixGaussianRelease, WishartRelease)
from dpledger.audits import contextual as ca
from dpledger.audits import vector_releases as vr
from dpledger.audits.mechanisms import audit_spec
from dpledger.cli import main
from dpledger.policies.registry import make_policy

ALPHA = 1e-3      # error rate of each seeded statistical check below


@pytest.mark.parametrize("p,blocks", [(1, 1), (2, 1), (5, 1), (3, 2), (1, 3)])
def test_sym_matrix_change_attains_the_release_mu(p, blocks):
    """Brute force: μ of the pair computed entry by entry (δ_e²/s_e², diagonal variance 2σ²)
    equals the release's μ = Δ_F/(√2σ), and the change has Frobenius norm Δ_F."""
    rel = SymmetricMatrixGaussianRelease(sigma=1.7, sensitivity=2.3, dim=p, blocks=blocks)
    delta = vr.worst_change(rel)
    E = p * (p + 1) // 2
    frob2 = 0.0
    for b in range(blocks):
        blk = delta[b * E:(b + 1) * E]
        M = np.zeros((p, p))
        M[np.triu_indices(p)] = blk
        M = M + M.T - np.diag(np.diag(M))
        frob2 += float(np.sum(M * M))
    assert math.isclose(math.sqrt(frob2), 2.3, rel_tol=1e-12)
    assert math.isclose(vr.change_mu(rel), rel.mu, rel_tol=1e-12)


def test_vector_changes_attain_their_sensitivities():
    g = GaussianVectorRelease(sigma=0.7, sensitivity=1.3, dim=5)
    assert math.isclose(float(np.linalg.norm(vr.worst_change(g))), 1.3, rel_tol=1e-12)
    assert math.isclose(vr.change_mu(g), g.mu, rel_tol=1e-12)
    lap = LaplaceVectorRelease(scale=2.0, sensitivity=1.5, dim=4)
    assert math.isclose(float(np.abs(vr.worst_change(lap)).sum()), 1.5, rel_tol=1e-12)


def test_vector_llr_law_is_the_gaussian_pair():
    """The LLR of the drawn symmetric matrix is N(∓μ²/2, μ²) on D / D′ (KS, α = 1e-3 each)."""
    rel = SymmetricMatrixGaussianRelease(sigma=1.3, sensitivity=2.0, dim=4, blocks=2)
    mu = rel.mu
    rng = np.random.default_rng(11)
    for side, mean in ((0, -mu * mu / 2), (1, mu * mu / 2)):
        s = vr.vector_scores(rel, side, rng, 4000)
        assert stats.kstest(s, stats.norm(mean, mu).cdf).pvalue > ALPHA


def test_wishart_score_is_a_shifted_chi_square():
    """q = 1/(vᵀY⁻¹v) from the Bartlett sampler: χ²_ν on D, 1 + χ²_ν on D′, ν = k − p + 1."""
    rel = WishartRelease(dim=3, k=300, bound=1.5, delta=0.01)
    nu = 300 - 3 + 1
    rng = np.random.default_rng(5)
    q0 = vr.vector_scores(rel, 0, rng, 3000)
    q1 = vr.vector_scores(rel, 1, rng, 3000)
    assert stats.kstest(q0, stats.chi2(nu).cdf).pvalue > ALPHA
    assert stats.kstest(q1 - 1.0, stats.chi2(nu).cdf).pvalue > ALPHA


def test_wishart_profile_matches_numerical_integration():
    """δ(ε) of the χ² pair in closed form (χ² tails) against ∫ (f_D′ − e^ε f_D)_+ and the
    reverse, integrated numerically from the two densities."""
    nu = 20
    f0 = stats.chi2(nu).pdf

    def f1(q):
        return stats.chi2(nu).pdf(q - 1.0) if q > 1.0 else 0.0

    def excess(a, b, w):
        return integrate.quad(lambda q: max(a(q) - w * b(q), 0.0), 0, 200, limit=400,
                              points=[1.0])[0]

    for eps in (0.05, 0.3, 0.8):
        fwd = excess(f1, f0, math.exp(eps))
        rev = excess(f0, f1, math.exp(eps))
        assert math.isclose(vr._delta_of(eps, nu), max(fwd, rev), rel_tol=1e-6, abs_tol=1e-9)
    rel = WishartRelease(dim=3, k=400, bound=1.0, delta=0.01)
    e = vr.wishart_pair_epsilon(rel)
    assert vr._delta_of(e, 398) <= 0.01 < vr._delta_of(e * (1 - 1e-6), 398)
    assert e < rel.epsilon


def test_release_audits_reach_the_certificate():
    """Worst case reachable: ≥ 0.85 of the certificate at 2·10⁴ trials per side (≤ 1 by the
    guard); the draws are the policies' compiled samplers (not the scalar normal form)."""
    for spec in ("gaussian_vector:sigma=1,sensitivity=1,dim=6",
                 "gaussian_sym_matrix:sigma=2,sensitivity=2.8284271247461903,dim=7,blocks=2",
                 "laplace_vector:scale=2,sensitivity=2,dim=10"):
        j = audit_spec([spec], 20_000, seed=3).to_json()
        assert 0.85 <= j["ratio"] <= 1.0, (spec, j["ratio"])


def test_wishart_release_audit_has_a_computed_limit():
    j = audit_spec(["wishart:dim=3,k=200,bound=1,delta=0.01"], 5000).to_json()
    rel = WishartRelease(dim=3, k=200, bound=1.0, delta=0.01)
    assert j["certificate"]["approx"] == pytest.approx(
        {"epsilon": rel.epsilon, "delta": 0.01, "basis": j["certificate"]["approx"]["basis"]})
    assert j["delta"] == 0.01 and j["epsilon_lower"] <= rel.epsilon
    assert j["pair_exact_epsilon"] == vr.wishart_pair_epsilon(rel)
    assert f"{vr.wishart_pair_epsilon(rel):.4g}" in j["limit_reason"]
    with pytest.raises(Exception, match="audited alone"):
        audit_spec(["wishart:dim=3,k=200,bound=1,delta=0.01", "laplace:eps=1"], 100)


@pytest.mark.audit_violations_expected(reason="planted defect: half the declared σ")
def test_planted_defect_in_the_matrix_sampler_is_caught(monkeypatch):
    """A sampler drawing σ/2 where the release declares σ: the audit exceeds the certificate."""
    real = vr.noise_spec_of

    def half(release):
        kind, sigma, f, i, k, p = real(release)
        return (kind, sigma / 2.0, f, i, k, p)

    monkeypatch.setattr(vr, "noise_spec_of", half)
    r = audit_spec(["gaussian_sym_matrix:sigma=2,sensitivity=2.8284271247461903,dim=4"], 20_000)
    assert r.violation


def _wb(name, trials=4000, **params):
    return ca.audit_contextual(make_policy(name, **params), trials=trials, mode="whitebox")


@pytest.mark.parametrize("name,params", [("jdp-linucb", {"calibration": "accounted"}),
                                         ("reward-dp-linucb", {})])
def test_gaussian_policies_whitebox_reach_the_certificate(name, params):
    r = _wb(name, **params)
    j = r.to_json()
    assert j["ratio_currency"] == "mu"
    assert 0.75 <= j["ratio"] <= 1.0
    assert j["clean_sum_mismatch"] < 1e-12       # the policy's nodes hold what the auditor says


def test_jdp_pair_attains_the_frobenius_sensitivity():
    pol = make_policy("jdp-linucb")
    (x0, r0), (x1, r1), _ = ca.whitebox_records(pol, 3)
    d = ca.item_of(0, x1, r1) - ca.item_of(0, x0, r0)
    v, w = np.r_[x0, r0], np.r_[x1, r1]
    assert math.isclose(float(np.linalg.norm(np.outer(w, w) - np.outer(v, v))),
                        math.sqrt(2.0) * 2.0, rel_tol=1e-12)      # √2·L̃², L̃² = L² + 1 = 2
    assert d.size == 4 * 5 // 2


def test_entries_limit_bounds_every_change():
    """The per-entry statistic: random record changes never move more sensitivities than
    :func:`entries_limit`, and the searched pair moves what it says."""
    rng = np.random.default_rng(2)
    for d in (1, 2, 4):
        sens = np.r_[np.full(d * (d + 1) // 2, 1.0), np.full(d, 2.0)]
        lim = ca.entries_limit(d)
        for _ in range(2000):
            x = rng.standard_normal((2, d))
            x *= rng.random((2, 1)) ** 0.2 / np.linalg.norm(x, axis=1, keepdims=True)
            r = rng.random(2)
            v = np.sum(np.abs(ca.item_of(1, x[1], r[1]) - ca.item_of(1, x[0], r[0])) / sens)
            assert v <= lim + 1e-12
        ((a, ra), (b, rb)), best = ca.entries_pair(d)
        assert math.isclose(best, float(np.sum(np.abs(ca.item_of(1, b, rb)
                                                      - ca.item_of(1, a, ra)) / sens)))
        assert best <= lim + 1e-12


def test_mt_whitebox_reports_its_limit():
    j = _wb("dp-linucb-mt", trials=3000, epsilon0=0.5).to_json()
    assert j["ratio"] <= j["pair_exact_ratio"] <= j["ratio_limit"] < 1.0
    assert "no record change attains the certificate" in j["pair"]["limit_reason"]


def test_blackbox_limits_in_closed_form():
    """jdp-linucb: the one-hot pair moves one Σ y·x entry (variance σ²) and the corner y²
    (2σ²) against the certificate's √2·L̃² = 2√2 in Frobenius norm: √(1 + ½)/2.  MT: one
    Σ r·x entry by 1 of its sensitivity 2L, ½ of one of the five entries: 0.1."""
    r = ca.audit_contextual(make_policy("jdp-linucb", calibration="accounted"), trials=500,
                            mode="blackbox", T=16)
    assert math.isclose(r.extra["ratio_limit"], math.sqrt(1.5) / 2.0, rel_tol=1e-6)
    r = ca.audit_contextual(make_policy("dp-linucb-mt"), trials=500, mode="blackbox", T=16)
    assert math.isclose(r.extra["ratio_limit"], 0.1, rel_tol=1e-6)
    r = ca.audit_contextual(make_policy("reward-dp-linucb"), trials=3000, mode="blackbox",
                            T=16)
    assert "ratio_limit" not in r.extra      # the one-hot reward change is the worst case


def test_wishart_policy_whitebox_limit():
    j = _wb("jdp-linucb", trials=500, mode="wishart", calibration="accounted").to_json()
    assert j["delta"] == 0.1 and j["certificate"]["approx"]["delta"] == 0.1
    assert j["ratio_limit"] < 0.5 and "basic composition" in j["pair"]["limit_reason"]


def test_cli_contextual_audit(tmp_path, capsys):
    out = tmp_path / "a.json"
    assert main(["audit", "reward-dp-linucb", "--mode", "whitebox", "--trials", "2000",
                 "--dim", "3", "--out", str(out), "--quiet"]) == 0
    j = json.loads(out.read_text())
    assert j["dim"] == 3 and j["mode"] == "whitebox" and j["ratio"] <= 1.0
    for argv, match in ((["jdp-linucb", "--arms", "3"], "--arms does not apply"),
                        (["linucb"], "makes no private release"),
                        (["jdp-linucb", "--sampler", "exact"], "--sampler does not apply"),
                        (["ucb1", "--dim", "3"], "--dim applies to contextual"),
                        (["dp-linucb-mt", "--mode", "blackbox", "--dim", "1"], "--dim >= 2")):
        capsys.readouterr()
        assert main(["audit", *argv, "--trials", "100", "--out", str(tmp_path / "b.json")]) == 2
        err = capsys.readouterr().err.strip()
        assert match in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "b.json").exists()


def test_memory_is_estimated_before_any_trial(monkeypatch):
    """One chunk's captured nodes and the scores, estimated and refused with one line."""
    import dpledger.resources as res
    assert ca.memory_estimate(10 ** 6, 4, 2145, 0) > ca.memory_estimate(10 ** 6, 4, 5, 0)
    monkeypatch.setattr(res, "available_memory", lambda: 300 << 20)
    with pytest.raises(Exception, match="this audit needs about .* use fewer --trials"):
        ca.audit_contextual(make_policy("jdp-linucb"), trials=10 ** 6, mode="whitebox", dim=64)
