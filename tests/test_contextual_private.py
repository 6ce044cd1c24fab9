"""Private contextual policies (issue 22 §4–§5): every draw against the release the ledger
names, certificates against theorems, realized against certificates, on every environment.

* **per-draw scale** (the project's pattern, tests/test_policies_draws.py, for vector and
  matrix releases): a run captures every node's noise; the captured nodes are exactly the
  ledger's (one per delivered record, the tree record's n_items), and their empirical law
  matches the recorded release — symmetric Gaussian (σ off the diagonal, √2σ on it), Wishart
  (first two moments), Laplace per entry (scale per statistic), Gaussian vector, and the exact
  sampler's discrete Laplace / discrete Gaussian integers (variance against the lattice σ or
  scale) — for the default parameters and each parameter that changes what is drawn;
* **theorem ≥ certificate ≥ realized** for every policy on the linear bandit, shared and
  disjoint tables, a supervised data set and a replayed log (float and exact samplers), and
  the paper's ε = 2.7 at d = 6 for the Mishra–Thakurta reconstruction;
* the calibrations: ``accounted`` meets (ε, δ) within 1 %, ``paper`` far below it;
* the ledger layout: one stream for record-private policies, one per model for reward-private;
* ties uniformly at random; same seed, same bytes; bad parameters refused in one line.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpledger.accounting.releases import (DiscreteGaussianTotal, DiscreteLaplaceRelease,
                                          GaussianVectorRelease, LaplaceVectorRelease,
                                          SymmetricMatrixGaussianRelease, WishartRelease)
from dpledger.errors import DpledgerError
from dpledger.mechanisms import matrix as mx
from dpledger.mechanisms.exact import discrete_laplace_variance
from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.base import problem_of
from dpledger.policies.contextual.simulator import simulate_contextual
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator
from dpledger.report_contextual import build_contextual_report

ALPHA = 1e-4                    # false-alarm rate of each seeded statistical check
PRIVATE = ("jdp-linucb", "dp-linucb-mt", "dp-lints-mt", "reward-dp-linucb")


def _table(seed, T=300, K=3, d=3, shared=False):
    rng = np.random.default_rng(seed)
    if shared:
        x = rng.random((T, K, d))
    else:
        x = rng.random((T, d))
    x = CE.fit_to_bound(x / np.linalg.norm(x, axis=-1, keepdims=True), 1.0)[0]
    r = (rng.random((T, K)) < 0.5).astype(float)
    return CE.contextual_table(x, r)


def _envs():
    rng = np.random.default_rng(4)
    n = 600
    ctx = rng.random((n, 3))
    ctx = CE.fit_to_bound(ctx / np.linalg.norm(ctx, axis=1, keepdims=True), 1.0)[0]
    log = CE.replay(ctx, rng.integers(0, 3, n), (rng.random(n) < 0.3).astype(float), None)
    feats = rng.random((150, 4))
    labels = rng.integers(0, 3, 150)
    return {"linear": CE.linear(3, 3, seed=0), "table-disjoint": _table(1, T=600),
            "table-shared": _table(2, T=600, shared=True), "replay": log,
            "supervised": CE.supervised(feats, labels, "synthetic")}


def _discrete_gaussian_var(s: float) -> float:
    m = int(40 * s) + 40
    z = np.arange(-m, m + 1, dtype=float)
    w = np.exp(-z * z / (2 * s * s))
    return float(np.sum(w * z * z) / w.sum())


def _var_ok(x, var, alpha=ALPHA):
    n = x.size
    se = math.sqrt(max(np.mean(x ** 4) - var ** 2, 1e-300) / n)
    return abs(np.mean(x ** 2) - var) <= stats.norm.isf(alpha / 2) * se


def _captured(name, params, env, T=400, bits=0, delay=0):
    pol = make_policy(name, **params)
    pol._capture_rows = T
    prob = problem_of(env, T, delay, bits)
    out = pol.run_one(run_generator(3, 0), env, prob)
    plan = pol.plan(prob)
    noise = out.extra["noise"][:out.noise_draws, :-1]      # one row per node drawn
    return pol, prob, plan, out, noise


def _check_tree_records(out, plan, prob, n_pushes):
    """Every node drawn is in the ledger: each tree record counts every delivered record of its
    stream, one record per release a node makes."""
    recs = out.trees
    obs = out.extra["obs_stream"]
    per_stream = np.bincount(obs, minlength=plan.n_trees)
    assert recs["n_items"].size == len(plan.record_rids) * np.count_nonzero(per_stream)
    for arm, k, lev, _rid in zip(recs["arm"], recs["n_items"], recs["levels"],
                                recs["release_id"], strict=True):
        assert k == per_stream[arm] and lev == plan.levels
    assert per_stream.sum() == n_pushes == out.noise_draws


# -- per-draw scale ---------------------------------------------------------------------------

@pytest.mark.parametrize("params", [{}, {"epsilon": 3.0}, {"delta": 0.01},
                                    {"calibration": "accounted"}])
@pytest.mark.parametrize("shared", [False, True])
def test_jdp_gaussian_draws_match_the_recorded_release(params, shared):
    env = _table(5, T=400, shared=shared)
    pol, prob, plan, out, noise = _captured("jdp-linucb", params, env)
    _check_tree_records(out, plan, prob, noise.shape[0])
    rel = plan.releases[0]
    assert isinstance(rel, SymmetricMatrixGaussianRelease)
    assert rel.sensitivity == pytest.approx(math.sqrt(2) * (prob.norm_bound ** 2 + 1))
    assert rel.blocks == prob.n_streams and rel.dim == prob.dim + 1
    diag = np.tile(mx.diagonal_mask(prob.dim + 1), plan.blocks)
    z = np.r_[noise[:, ~diag].ravel() / rel.sigma, noise[:, diag].ravel() / (math.sqrt(2) *
                                                                            rel.sigma)]
    assert stats.kstest(z, "norm").pvalue > ALPHA


def test_jdp_wishart_draws_match_the_recorded_release():
    env = _table(6, T=400)
    pol, prob, plan, out, noise = _captured("jdp-linucb", {"mode": "wishart"}, env)
    _check_tree_records(out, plan, prob, noise.shape[0])
    rel = plan.releases[0]
    assert isinstance(rel, WishartRelease) and len(plan.record_rids) == 2     # a record may move
    p = prob.dim + 1
    assert rel.dim == p and rel.bound ** 2 == pytest.approx(prob.norm_bound ** 2 + 1)
    diag = np.tile(mx.diagonal_mask(p), plan.blocks)
    L2 = rel.bound ** 2
    n = noise.shape[0]
    x = noise[:, diag].ravel()
    z = stats.norm.isf(ALPHA / 4)
    assert abs(x.mean() - rel.k * L2) <= z * math.sqrt(2 * rel.k * L2 ** 2 / x.size)
    assert _var_ok(x - rel.k * L2, 2 * rel.k * L2 ** 2)
    off = noise[:, ~diag].ravel()
    assert abs(off.mean()) <= z * math.sqrt(rel.k * L2 ** 2 / off.size)
    assert _var_ok(off, rel.k * L2 ** 2) and n == 400


@pytest.mark.parametrize("name", ["dp-linucb-mt", "dp-lints-mt"])
@pytest.mark.parametrize("params", [{}, {"epsilon0": 0.5}])
@pytest.mark.parametrize("shared", [False, True])
def test_mt_laplace_draws_match_the_recorded_releases(name, params, shared):
    env = _table(7, T=400, shared=shared)
    pol, prob, plan, out, noise = _captured(name, params, env)
    _check_tree_records(out, plan, prob, noise.shape[0])
    d = prob.dim
    kinds = np.array(plan.record_rids)
    assert kinds.size == d * (d + 1) // 2 + d
    eps0 = pol.params["epsilon0"]
    L = prob.norm_bound
    want = {0: L * L * (1 if shared else 2), 1: L * L, 2: 2 * L}      # L1 sensitivity per kind
    for kind in np.unique(kinds):
        rel = plan.releases[kind]
        assert isinstance(rel, LaplaceVectorRelease) and rel.dim == prob.n_streams
        assert rel.sensitivity == want[kind]
        assert rel.epsilon <= eps0 / plan.levels * (1 + 1e-12)
        cols = np.tile(kinds == kind, plan.blocks)
        assert stats.kstest(noise[:, cols].ravel() / rel.scale, "laplace").pvalue > ALPHA


def test_reward_private_draws_match_the_recorded_release():
    env = _table(8, T=600)
    pol, prob, plan, out, noise = _captured("reward-dp-linucb", {"epsilon": 2.0}, env, T=600)
    _check_tree_records(out, plan, prob, noise.shape[0])
    rel = plan.releases[0]
    assert isinstance(rel, GaussianVectorRelease) and rel.sensitivity == prob.norm_bound
    assert plan.n_trees == prob.arms and set(out.trees["arm"]) <= set(range(prob.arms))
    assert stats.kstest(noise.ravel() / rel.sigma, "norm").pvalue > ALPHA


@pytest.mark.parametrize("name,params", [("jdp-linucb", {}), ("jdp-linucb",
                                                            {"calibration": "accounted"}),
                                         ("dp-linucb-mt", {}), ("reward-dp-linucb", {})])
def test_exact_sampler_draws_lattice_integers_of_the_recorded_law(name, params):
    env = _table(9, T=300)
    pol, prob, plan, out, noise = _captured(name, params, env, T=300, bits=16)
    _check_tree_records(out, plan, prob, noise.shape[0])
    assert np.array_equal(noise, np.round(noise))
    kinds = plan.spec[0]
    if kinds == mx.DLAPLACE:
        k = np.array(plan.record_rids)
        for kind in np.unique(k):
            rel = plan.releases[kind]
            assert isinstance(rel, DiscreteLaplaceRelease)
            assert int(round(rel.scale * mx.LAPLACE_DEN)) == plan.spec[3][k == kind][0]
            cols = np.tile(k == kind, plan.blocks)
            assert _var_ok(noise[:, cols].ravel(), discrete_laplace_variance(rel.scale))
    else:
        rel = plan.releases[0]
        assert isinstance(rel, DiscreteGaussianTotal)
        sig = np.tile(plan.spec[3], plan.blocks)
        for s in np.unique(sig):
            assert _var_ok(noise[:, sig == s].ravel(), _discrete_gaussian_var(float(s)))


def test_wishart_has_no_exact_form():
    env = _table(1)
    pol = make_policy("jdp-linucb", mode="wishart")
    with pytest.raises(DpledgerError, match="no exact-sampler form"):
        pol.releases(problem_of(env, 100, 0, 16))
    with pytest.raises(DpledgerError, match="no exact-sampler form"):
        simulate_contextual(make_policy("linucb"), env, 50, runs=1, sampler="exact")


# -- theorem ≥ certificate ≥ realized -------------------------------------------------------------

@pytest.mark.parametrize("env_name", ["linear", "table-disjoint", "table-shared", "replay",
                                      "supervised"])
@pytest.mark.parametrize("name,params,sampler", [
    ("jdp-linucb", {}, "float"), ("jdp-linucb", {"calibration": "accounted"}, "float"),
    ("jdp-linucb", {"mode": "wishart"}, "float"),
    ("jdp-linucb", {"calibration": "accounted"}, "exact"),
    ("dp-linucb-mt", {}, "float"), ("dp-lints-mt", {}, "exact"),
    ("reward-dp-linucb", {}, "float"), ("reward-dp-linucb", {}, "exact")])
def test_certificate_within_theorem_and_realized_within_certificate(env_name, name, params,
                                                                    sampler):
    env = _envs()[env_name]
    T = 500
    res = simulate_contextual(make_policy(name, **params), env, T, seed=1, runs=2, delay=3,
                              sampler=sampler)
    rep = build_contextual_report(res)
    chk = rep["privacy"]["checks"]
    assert chk["realized_le_certificate"] and chk["certificate_le_theorem"], chk["details"]
    assert rep["contextual"]["streams"] == (res.problem.n_streams if name == "reward-dp-linucb"
                                            else 1)
    assert rep["contextual"]["privacy_model"] == ("reward-private" if name == "reward-dp-linucb"
                                                  else "record-private")
    assert rep["sampler"] == sampler
    # the certificate is attained when one tree holds every record (record-private, or one
    # shared stream): its first record is in a node of every level
    c, r = rep["privacy"]["certificate"], rep["privacy"]["realized"]
    one_tree = name != "reward-dp-linucb" or res.problem.shared
    for key in ("pure_epsilon", "gdp_mu", "zcdp_rho"):
        if c[key] is not None and env_name != "replay" and one_tree:
            assert r[key] == pytest.approx(c[key], rel=1e-12)


def test_mishra_thakurta_total_is_2_7_at_d_6():
    env = CE.linear(6, 4, seed=0)
    for name in ("dp-linucb-mt", "dp-lints-mt"):
        res = simulate_contextual(make_policy(name), env, 300, seed=0, runs=1)
        rep = build_contextual_report(res)
        assert rep["privacy"]["theorem"]["pure_epsilon"] == pytest.approx(2.7, rel=1e-12)
        assert rep["privacy"]["certificate"]["pure_epsilon"] == pytest.approx(2.7, rel=1e-12)
        assert rep["privacy"]["realized"]["pure_epsilon"] == pytest.approx(2.7, rel=1e-12)


@pytest.mark.parametrize("mode", ["gaussian", "wishart"])
def test_calibrations_against_the_target(mode):
    env = CE.linear(5, 3, seed=0)
    prob = problem_of(env, 10_000, 0)
    out = {}
    for cal in ("paper", "accounted"):
        pol = make_policy("jdp-linucb", mode=mode, calibration=cal)
        from dpledger.report import certificate_block
        blk = certificate_block(pol.certificate(prob), [0.1])
        out[cal] = blk["epsilon_at_delta"]["0.1"]
    assert 0.99 <= out["accounted"] <= 1.0
    assert out["paper"] < 0.5            # the paper's σ / k waste most of the budget


def test_paper_sigma_is_about_fourteen_times_the_accounted_one():
    env = CE.linear(1, 2, seed=0, norm_bound=1.0)      # L̃² = 2, as in the note's estimate
    prob = problem_of(env, 10_000, 0)
    s = {cal: make_policy("jdp-linucb", calibration=cal).plan(prob).drawn["sigma"]
         for cal in ("paper", "accounted")}
    assert 114 < s["paper"] < 114.5
    assert 13 < s["paper"] / s["accounted"] < 15


# -- structure ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["dp-linucb-mt", "reward-dp-linucb"])
def test_ties_broken_uniformly_before_any_record(name):
    # delay ≥ T: nothing is delivered; every arm's model is the prior (MT's prefix is zero,
    # the reward-private Gram is λI), so every round is a K-way tie
    env = _table(3, T=3000, K=4)
    out = make_policy(name).run_one(run_generator(0, 0), env, problem_of(env, 3000, 3000))
    counts = np.bincount(out.actions, minlength=4)
    assert stats.chisquare(counts).pvalue > ALPHA


@pytest.mark.parametrize("name", PRIVATE)
def test_same_seed_same_run(name):
    env = _table(4)
    a = simulate_contextual(make_policy(name), env, 200, seed=3, runs=2)
    b = simulate_contextual(make_policy(name), env, 200, seed=3, runs=2)
    ra, rb = build_contextual_report(a), build_contextual_report(b)
    assert ra == rb
    assert a.ledger.to_json() == b.ledger.to_json()


@pytest.mark.parametrize("name,params,match", [
    ("jdp-linucb", {"delta": 1.0}, "delta"), ("jdp-linucb", {"mode": "laplace"}, "mode"),
    ("jdp-linucb", {"calibration": "x"}, "calibration"), ("dp-linucb-mt", {"epsilon0": 0},
                                                          "epsilon0"),
    ("reward-dp-linucb", {"delta": 2.0}, "delta"), ("dp-lints-mt", {"v": -1}, "v")])
def test_bad_parameters_refused(name, params, match):
    with pytest.raises(DpledgerError, match=match):
        make_policy(name, **params)


def test_delay_at_least_horizon_delivers_nothing_and_certifies_nothing():
    env = _table(2, T=100)
    res = simulate_contextual(make_policy("jdp-linucb"), env, 100, seed=0, runs=1, delay=100)
    rep = build_contextual_report(res)
    assert rep["contextual"]["observations"] == [0]
    assert rep["privacy"]["certificate"]["gdp_mu"] == 0.0
    assert rep["privacy"]["checks"]["realized_le_certificate"]


# -- the positive-definiteness repair (LAPACK's factorisation) -----------------------------------

def _packed(V: np.ndarray) -> np.ndarray:
    """The upper triangle of symmetric V, row by row (the trees' block layout)."""
    p = V.shape[0]
    out = np.zeros(p * (p + 1) // 2)
    for i in range(p):
        for j in range(i, p):
            out[mx.packed_index(i, j, p)] = V[i, j]
    return out


@pytest.mark.parametrize("joint", [False, True])
def test_factor_psd_repairs_and_factors_the_shifted_matrix(joint):
    """factor_psd against numpy: a positive definite block is factored as V + base·I with no
    repair; an indefinite one gets the smallest extra = scale·2^(j−1) that makes it positive
    definite (checked against its smallest eigenvalue), the factor's L Lᵀ is that matrix, its
    ln det is numpy's, and L is lower triangular (zero above the diagonal, whatever it held).  ``joint``: the
    d×d block is the leading block of a (d+1)×(d+1) packed matrix (Shariff & Sheffet's layout)."""
    from dpledger.policies.contextual.private_loop import factor_psd
    rng = np.random.default_rng(5)
    d, base, scale, unit = 6, 0.5, 0.25, 2.0
    p = d + 1 if joint else d
    for shift in (3.0, -2.0):               # V's smallest eigenvalue: +3 (PD), −2 (not PD)
        G = rng.standard_normal((p, p))
        S = G @ G.T
        w, Q = np.linalg.eigh(S[:d, :d])
        S[:d, :d] = (Q * (w - w.min() + shift)) @ Q.T      # smallest eigenvalue = shift
        pre = _packed(S / unit)
        L = np.full((d, d), 7.0)            # stale values everywhere
        jstate = np.zeros((1, 2), np.int64)
        logdet, repairs = factor_psd(pre, 0, p, d, unit, L, base, scale, jstate, 0,
                                     np.zeros((d, d)))
        j = int(jstate[0, 0])
        extra = 0.0 if j == 0 else scale * 2.0 ** (j - 1)
        M = S[:d, :d] + (base + extra) * np.eye(d)
        assert np.all(np.triu(L, 1) == 0.0)
        assert np.allclose(L @ L.T, M, atol=1e-9)
        assert logdet == pytest.approx(np.linalg.slogdet(M)[1], abs=1e-9)
        assert repairs == j
        if shift > 0:
            assert j == 0
        else:                               # the smallest j: one step less is not PD
            assert shift + base + extra > 0
            prev = 0.0 if j == 1 else scale * 2.0 ** (j - 2)
            assert shift + base + prev <= 0
