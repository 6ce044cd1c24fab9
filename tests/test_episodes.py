"""The adaptive-episode policies ``episode-linucb`` and ``adac-oful`` (issue 32 §2): every
release's noise against the release the ledger names, each record in exactly one release,
certificates that meet their (ε, δ) or ρ target and sit within the theorem, realized = the
certificate, the step form equal to the whole run, and one-line refusals of bad input."""
from __future__ import annotations

import collections
import json
import math
import numpy as np
import pytest
from scipy import stats

from contextual_data import serve_table, unit_rows
from dpledger.accounting.releases import (DiscreteGaussianTotal, GaussianVectorRelease,
                                          SymmetricMatrixGaussianRelease, release_to_json)
from dpledger.accounting.store import verify_store
from dpledger.audits.contextual import audit_contextual
from dpledger.cli import main
from dpledger.errors import DpledgerError
from dpledger.mechanisms import matrix as mx
from dpledger.mechanisms.noise import LATTICE_BITS
from dpledger.policies import online
from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.base import problem_of
from dpledger.policies.contextual.simulator import simulate_contextual
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator
from dpledger.report import certificate_block
from dpledger.report_contextual import build_contextual_report

ALPHA = 1e-4                   # false-alarm rate of each seeded statistical check
NAMES = ("episode-linucb", "adac-oful")


def _table(seed, T=300, K=3, d=3, shared=False, levels=None):
    rng = np.random.default_rng(seed)
    x = unit_rows(rng, (T, K, d) if shared else (T, d))
    r = (rng.integers(0, 17, (T, K)) / 16.0 if levels else
         (rng.random((T, K)) < 0.5).astype(float))
    return x, r


def _env(seed, **kw):
    return CE.contextual_table(*_table(seed, **kw))


def _captured(name, params, env, T, bits=0, delay=0):
    pol = make_policy(name, **params)
    pol._capture_rows = T
    prob = problem_of(env, T, delay, bits)
    out = pol.run_one(run_generator(3, 0), env, prob)
    return pol, prob, pol.plan(prob), out, out.extra["noise"][:out.noise_draws]


def _check_rows(out, prob, record_private):
    """One ledger row per release; per stream the rows tile [0, n) of its delivered records in
    order, the open episode's records (never released) after the last row."""
    rows = out.rows
    assert rows.shape == (5, out.noise_draws)
    assert np.all(rows[3] == 0) and np.all(rows[4] == 1)
    obs = out.extra["obs_stream"]
    if record_private:
        assert np.all(obs == 0)
    for s in np.unique(rows[0]):
        r = rows[:, rows[0] == s]
        assert r[1, 0] == 0 and np.all(r[1, 1:] == r[2, :-1]) and np.all(r[2] > r[1])
        assert r[2, -1] <= np.count_nonzero(obs == s)


def _captured_checked(name, params, seed, T, shared):
    """A captured run on a table of T rows, its ledger rows checked (:func:`_check_rows`)."""
    env = _env(seed, T=T, shared=shared)
    pol, prob, plan, out, noise = _captured(name, params, env, T)
    _check_rows(out, prob, name == "episode-linucb")
    return pol, prob, plan, out, noise, env


# -- per-draw law ---------------------------------------------------------------------------------

@pytest.mark.parametrize("params", [{}, {"epsilon": 3.0}, {"delta": 0.01}, {"rho": 0.5}])
@pytest.mark.parametrize("shared", [False, True])
def test_episode_linucb_draws_match_the_recorded_release(params, shared):
    pol, prob, plan, out, noise, env = _captured_checked("episode-linucb", params, 5, 4000,
                                                         shared)
    # the doubling schedule: episode j holds 2^j records, so 4000 records close 11 episodes
    assert out.noise_draws == 11
    assert np.array_equal(out.rows[2] - out.rows[1], 2 ** np.arange(11))
    rel = plan.releases[0]
    assert isinstance(rel, SymmetricMatrixGaussianRelease)
    assert rel.sensitivity == pytest.approx(math.sqrt(2) * (prob.norm_bound ** 2 + 1))
    assert rel.blocks == prob.n_streams and rel.dim == prob.dim + 1
    z = noise[:, :-1]
    assert np.all(noise[:, -1] == 0)
    diag = np.tile(mx.diagonal_mask(prob.dim + 1), prob.n_streams)
    w = np.r_[z[:, ~diag].ravel() / rel.sigma, z[:, diag].ravel() / (math.sqrt(2) * rel.sigma)]
    assert stats.kstest(w, "norm").pvalue > ALPHA


@pytest.mark.parametrize("params", [{}, {"epsilon": 0.5, "delta": 1e-3}, {"rho": 0.2},
                                    {"growth": 3.0}])
@pytest.mark.parametrize("shared", [False, True])
def test_adac_oful_draws_match_the_recorded_release(params, shared):
    pol, prob, plan, out, noise, env = _captured_checked("adac-oful", params, 6, 3000, shared)
    rel = plan.releases[0]
    assert isinstance(rel, GaussianVectorRelease) and rel.sensitivity == prob.norm_bound
    assert rel.dim == prob.dim
    assert out.noise_draws >= 10 and noise.shape[0] == out.noise_draws
    assert np.array_equal(noise[:, -1], out.rows[0])          # each draw names its stream
    assert stats.kstest(noise[:, :-1].ravel() / rel.sigma, "norm").pvalue > ALPHA
    # the episode rule, recomputed: det A grows by 1 + C within each episode, not before its
    # last record (A = λI + the stream's contexts so far)
    lam, lg = pol.params["lambda"], pol.log_growth(prob)
    x = env.contexts[:, 0, :] if not shared else None
    if not shared:
        for s in np.unique(out.rows[0]):
            rounds = out.extra["obs_round"][out.extra["obs_stream"] == s]
            xs = x[rounds - 1]
            r = out.rows[:, out.rows[0] == s]
            start_ld = prob.dim * math.log(lam)
            for a, b in zip(r[1], r[2], strict=True):
                lds = [np.linalg.slogdet(lam * np.eye(prob.dim) + xs[:n].T @ xs[:n])[1]
                       for n in (b - 1, b)]
                assert lds[1] >= start_ld + lg - 1e-9
                assert b - 1 == a or lds[0] < start_ld + lg + 1e-9
                start_ld = lds[1]


@pytest.mark.parametrize("name", NAMES)
def test_exact_sampler_draws_lattice_integers_of_the_recorded_law(name):
    T = 3000
    env = _env(9, T=T, levels=True)
    pol, prob, plan, out, noise = _captured(name, {}, env, T, bits=LATTICE_BITS)
    z = noise[:, :-1]
    assert np.array_equal(z, np.round(z))
    rel = plan.releases[0]
    assert isinstance(rel, DiscreteGaussianTotal)
    sig = np.tile(plan.spec[3], z.shape[1] // plan.spec[3].size)
    for s in np.unique(sig):
        v = z[:, sig == s].ravel()
        m = int(40 * s) + 40
        k = np.arange(-m, m + 1, dtype=float)
        wt = np.exp(-k * k / (2.0 * float(s) ** 2))
        var = float(np.sum(wt * k * k) / wt.sum())
        se = math.sqrt(max(np.mean(v ** 4) - var ** 2, 1e-300) / v.size)
        assert abs(np.mean(v ** 2) - var) <= stats.norm.isf(ALPHA / 2) * se


# -- certificates ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name,target", [("episode-linucb", (2.7, 0.1)),
                                         ("episode-linucb", (1.0, 1e-6)),
                                         ("adac-oful", (1.0, 1e-6)), ("adac-oful", (0.3, 0.01))])
def test_accounted_sigma_meets_the_target(name, target):
    eps, delta = target
    env = CE.linear(4, 3, seed=0)
    for bits in (0, LATTICE_BITS):
        pol = make_policy(name, epsilon=eps, delta=delta)
        prob = problem_of(env, 5000, 0, bits)
        got = certificate_block(pol.certificate(prob), [delta])["epsilon_at_delta"][str(delta)]
        assert 0.99 * eps <= got <= eps


@pytest.mark.parametrize("name", NAMES)
def test_rho_target_is_met_and_mu_is_exact(name):
    env = CE.linear(4, 3, seed=0)
    pol = make_policy(name, rho=0.125)
    prob = problem_of(env, 5000, 0)
    rel = pol.plan(prob).releases[0]
    assert rel.mu ** 2 / 2 == pytest.approx(0.125, rel=1e-8) and rel.mu ** 2 / 2 <= 0.125
    # σ from the closed form: one Gaussian of L2 sensitivity Δ is (Δ²/2σ²)-zCDP (vector), and
    # the symmetric matrix's μ is Δ_F/(√2σ)
    L = prob.norm_bound
    want = (L / math.sqrt(2 * 0.125) if name == "adac-oful"
            else math.sqrt(2) * (L * L + 1) / math.sqrt(2) / math.sqrt(2 * 0.125))
    assert pol.plan(prob).drawn["sigma"] == pytest.approx(want, rel=1e-8)
    th = pol.theorem(prob)
    assert th.gdp_mu >= rel.mu and th.gdp_mu == pytest.approx(0.5, rel=1e-12)


@pytest.mark.parametrize("env_name", ["linear", "table-disjoint", "table-shared"])
@pytest.mark.parametrize("name,sampler", [(n, s) for n in NAMES for s in ("float", "exact")])
def test_certificate_within_theorem_and_realized_equals_certificate(env_name, name, sampler):
    env = {"linear": CE.linear(3, 3, seed=0), "table-disjoint": _env(1, T=600),
           "table-shared": _env(2, T=600, shared=True)}[env_name]
    res = simulate_contextual(make_policy(name), env, 500, seed=1, runs=2, delay=3,
                              sampler=sampler)
    rep = build_contextual_report(res)
    chk = rep["privacy"]["checks"]
    assert chk["realized_le_certificate"] and chk["certificate_le_theorem"], chk["details"]
    assert rep["contextual"]["streams"] == (1 if name == "episode-linucb"
                                            else res.problem.n_streams)
    c, r = rep["privacy"]["certificate"], rep["privacy"]["realized"]
    for key in ("gdp_mu", "zcdp_rho"):
        if c[key] is not None:
            assert r[key] == pytest.approx(c[key], rel=1e-12)     # record 0 is released


def test_same_seed_same_bytes():
    env = _env(4)
    for name in NAMES:
        a = simulate_contextual(make_policy(name), env, 200, seed=3, runs=2)
        b = simulate_contextual(make_policy(name), env, 200, seed=3, runs=2)
        assert build_contextual_report(a) == build_contextual_report(b)
        assert a.ledger.to_json() == b.ledger.to_json()


# -- step form = whole run --------------------------------------------------------------------------

T_STEP, K_STEP, D_STEP = 160, 3, 3


def _key(rel) -> str:
    return json.dumps(release_to_json(rel), sort_keys=True)


@pytest.mark.parametrize("name,params", [
    ("episode-linucb", {}), ("adac-oful", {}), ("adac-oful", {"estimate": "ridge", "growth": 1.0}),
    ("adac-oful", {"memory": "last", "growth": 3.0, "estimate": "ridge"}),
    ("adac-oful", {"estimate": "likelihood"}), ("adac-oful", {"noise_shape": "isotropic"})])
@pytest.mark.parametrize("sampler", ["float", "exact"])
@pytest.mark.parametrize("shared", [False, True])
def test_step_form_equals_the_whole_run(name, params, sampler, shared, tmp_path):
    """Serving the table (select(context of row t), observe the selected arm's reward) takes the
    simulator's run-0 actions, leaves the generator where the run left it, and records the
    run's rows (stream, [start, stop), release) — the same release, recorded before its draw."""
    x, rw = _table(3, T=T_STEP, K=K_STEP, d=D_STEP, shared=shared, levels=True)
    env = CE.contextual_table(x, rw)
    pol = make_policy(name, **params)
    problem = problem_of(env, T_STEP, 0, LATTICE_BITS if sampler == "exact" else 0)
    g = run_generator(5, 0)
    out = pol.run_one(g, env, problem)
    p = online(name, K_STEP, T_STEP, store=tmp_path / "s.db", seed=5, sampler=sampler,
               dim=D_STEP, shared=shared, **params)
    actions = serve_table(p, x, rw)
    assert actions == out.actions.tolist()
    assert p.rng.bit_generator.state == g.bit_generator.state
    rels = p.store.releases
    mine = collections.Counter((int(a), int(s), int(e), _key(rels[int(r)]))
                               for _, a, s, e, r, _ in p.store.rows_array())
    sim = collections.Counter((int(a), int(s), int(e), _key(pol.releases(problem)[int(r)]))
                              for a, s, e, r, _ in out.rows.T)
    assert mine == sim and sum(sim.values()) == out.noise_draws >= 5
    p.close()
    assert verify_store(tmp_path / "s.db") == []


def test_step_form_restart_resumes_the_open_episode(tmp_path):
    """A checkpoint mid-episode, reopened: the open episode's clean sum and the models are
    restored, so the continued run is the uninterrupted one (same actions, same rows)."""
    x, rw = _table(8, T=T_STEP, K=K_STEP, d=D_STEP, levels=True)

    p = online("episode-linucb", K_STEP, T_STEP, seed=2, dim=D_STEP)
    ref = serve_table(p, x, rw)
    q = online("episode-linucb", K_STEP, T_STEP, store=tmp_path / "s.db", seed=2, dim=D_STEP)
    got = serve_table(q, x, rw, 0, 50)       # 50 records: the episode of 32 is open
    q.checkpoint()
    state = q.rng.bit_generator.state
    q.store.close()
    r = online("episode-linucb", K_STEP, T_STEP, store=tmp_path / "s.db", seed=2, dim=D_STEP,
               take_over=True)
    assert r.t == 50 and int(r.rule.state["ist"][0, 2]) == 50
    r.rng.bit_generator.state = state        # continue the same stream to compare
    got += serve_table(r, x, rw, 50)
    assert got == ref
    r.close()
    assert verify_store(tmp_path / "s.db") == []


# -- white-box audits -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,params", [("episode-linucb", {}),
                                         ("adac-oful", {"epsilon": 4.0, "delta": 1e-3})])
def test_whitebox_audit_reaches_the_certificate(name, params):
    """The pair's change attains the one release's sensitivity, so at 2·10⁴ trials per side the
    lower bound is ≥ 0.85 of the certified μ (and never above it: the suite's guard); the
    policy's clean episode sums are the auditor's."""
    j = audit_contextual(make_policy(name, **params), trials=20_000, mode="whitebox",
                         seed=1).to_json()
    assert j["clean_sum_mismatch"] < 1e-9
    assert 0.85 <= j["ratio"] <= 1.0, j["ratio"]
    assert j["first_episode_records"] >= 1


@pytest.mark.audit_violations_expected(reason="planted defect: the release draws half its σ")
def test_whitebox_audit_catches_a_planted_defect():
    """A plan whose noise law draws σ/2 while the ledger names σ: the audit's lower bound
    exceeds the certificate."""
    pol = make_policy("episode-linucb")
    from dpledger.audits.contextual import contextual_pair
    e0, _, _ = contextual_pair(pol, 8, 2, "whitebox")     # the audit's pair and problem
    prob = problem_of(e0, 8, 0)
    plan = pol.plan(prob)
    spec = list(plan.spec)
    spec[1] = spec[1] / 2.0
    object.__setattr__(plan, "spec", tuple(spec))
    j = audit_contextual(pol, trials=5000, mode="whitebox", seed=2).to_json()
    assert j["ratio"] > 1.0


# -- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,params,match", [
    ("episode-linucb", {"rho": 0.0}, "rho must be > 0"), ("adac-oful", {"rho": -1.0}, "rho"),
    ("episode-linucb", {"delta": 1.0}, "delta"), ("episode-linucb", {"first_episode": 0},
                                                  "first_episode"),
    ("adac-oful", {"growth": -1.0}, "growth"), ("adac-oful", {"alpha": -1.0}, "alpha")])
def test_bad_parameters_refused(name, params, match):
    with pytest.raises(DpledgerError, match=match):
        make_policy(name, **params)


def test_schedule_that_cannot_finish_is_refused():
    env = CE.linear(3, 3, seed=0)
    pol = make_policy("episode-linucb", first_episode=200)
    with pytest.raises(DpledgerError, match="cannot finish"):
        pol.certificate(problem_of(env, 100, 0))
    with pytest.raises(DpledgerError, match="cannot finish"):
        pol.certificate(problem_of(env, 300, 150))      # 150 records delivered at most


@pytest.mark.parametrize("args,words", [
    (["episode-linucb", "--set", "rho=0"], "rho must be > 0"),
    (["episode-linucb", "--set", "first_episode=500", "--horizon", "100"], "cannot finish"),
    (["adac-oful", "--set", "rho=-0.5"], "rho must be > 0")])
def test_cli_bad_input_is_one_line_exit_2(args, words, tmp_path, capsys):
    cmd = ["run", *args, "--env", "linear", "--dim", "3", "--arms", "3", "--runs", "1",
           "--quiet", "--out", str(tmp_path / "o.json")]
    if "--horizon" not in args:
        cmd += ["--horizon", "200"]
    assert main(cmd) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
    assert not (tmp_path / "o.json").exists()


def test_private_contextual_experiment_writes_its_files(tmp_path):
    """`dpledger experiment private-contextual` at a tiny size on the linear instance: every
    private policy certified at the common target (claim 3 confirmed), lift ratios in the
    table, the figure written; the digits claims are reported as not run."""
    from dpledger.experiments import experiment_module
    from dpledger.experiments.common import run_experiment
    from dpledger.experiments.overrides import Overrides
    mod = experiment_module("private-contextual")
    ov = Overrides(horizon=150, runs=2, levels=(2.7,), level_option="epsilons",
                   instances=("linear",))
    res = run_experiment(mod, str(tmp_path), quick=True, workers=1, quiet=True, overrides=ov)
    rows = res["summary"].table
    assert {r["variant"] for r in rows} == set(mod.VARIANTS)
    for r in rows:
        if r["epsilon"] is not None:
            assert r["checks_ok"] and "lift_ratio_vs_nonprivate" in r
    claims = (tmp_path / "claims.md").read_text()
    assert "[linear] every private policy's certified" in claims and "**confirmed**" in claims
    assert (tmp_path / "regret-linear.png").stat().st_size > 0


def test_private_contextual_digits6_instance_and_undefined_numbers_as_null(tmp_path):
    """The §5.1-shaped instance runs with d = 6 and 20 arms; with one run the bands are
    undefined and are written as null (JSON has no NaN: NaN failed the whole write), and every
    lift ratio is a number or null — never NaN — in experiment.json."""
    pytest.importorskip("sklearn")
    from dpledger.experiments import experiment_module
    from dpledger.experiments.common import run_experiment
    from dpledger.experiments.overrides import Overrides
    mod = experiment_module("private-contextual")
    assert mod.instance_specs()["digits6"]["dim"] == 6
    ov = Overrides(horizon=120, runs=1, levels=(2.7,), level_option="epsilons",
                   instances=("digits6",), policies=("linucb", "dp-linucb-mt"))
    res = run_experiment(mod, str(tmp_path), quick=True, workers=1, quiet=True, overrides=ov)
    rows = res["summary"].table
    assert {r["instance"] for r in rows} == {"digits6"} and len(rows) == 2
    mt = next(r for r in rows if r["variant"] == "dp-linucb-mt")
    # ε₀ = 2.7 / (6·7/2 + 6) = 0.1, the paper's
    assert mt["certificate_pure_eps"] == pytest.approx(2.7, rel=1e-9)
    assert all(r["normalised_band95"] is None for r in rows)
    text = (tmp_path / "experiment.json").read_text()
    assert "NaN" not in text
    json.loads(text)
    lr = mt["lift_ratio_vs_nonprivate"]
    assert lr is None or math.isfinite(lr)


@pytest.mark.parametrize("args", [
    ["episode-linucb", "--sampler", "exact", "--env", "linear", "--dim", "3", "--arms", "4",
     "--horizon", "300", "--delay", "4"],
    ["adac-oful", "--set", "rho=0.3", "--env", "supervised", "--dataset", "iris",
     "--horizon", "300"]])
def test_cli_run_and_verify_resimulate(args, tmp_path, capsys):
    """run → verify --resimulate: theorem, certificate, realized and the ledger recomputed,
    the same seed giving the same bytes."""
    pytest.importorskip("sklearn")
    out = tmp_path / "run.json"
    assert main(["run", *args, "--runs", "2", "--seed", "1", "--out", str(out), "--quiet"]) == 0
    rep = json.loads(out.read_text())
    assert rep["privacy"]["checks"]["realized_le_certificate"]
    assert rep["privacy"]["checks"]["certificate_le_theorem"]
    capsys.readouterr()
    assert main(["verify", str(out), "--resimulate"]) == 0
    assert "resimulation (run.json and ledger file bytes identical)" in capsys.readouterr().out


# -- the likelihood estimate of adac-oful ----------------------------------------------------------

@pytest.mark.parametrize("s", [0.0, 0.3, 40.0])
def test_likelihood_model_is_the_posterior_of_the_released_sum(s):
    """θ̂ and Q of :func:`_likelihood_model` against the Gaussian posterior written directly:
    b ~ N(Gθ, R²(G + sI)), θ ~ N(0, (R²/λ)I) ⇒ precision (G(G + sI)⁻¹G + λI)/R², mean
    Q⁻¹G(G + sI)⁻¹b (the standard conjugate update, numpy's solve); s = 0 is ridge's A⁻¹b."""
    from dpledger.policies.contextual.episode_loop import _likelihood_model
    rng = np.random.default_rng(3)
    d, lam = 5, 0.7
    X = rng.normal(size=(8, d))
    X[:, -1] = 0.0                                   # a direction no record covers
    G = X.T @ X
    b = rng.normal(size=d)
    chol, theta, W = np.zeros((d, d)), np.zeros(d), np.zeros((d, d))
    _likelihood_model(np.linalg.cholesky(G + lam * np.eye(d)), b, lam, s, chol, theta, W)
    C = np.linalg.inv(G + s * np.eye(d)) if s else np.linalg.pinv(G)
    Q = G @ C @ G + lam * np.eye(d) if s else G + lam * np.eye(d)
    mean = np.linalg.solve(Q, G @ C @ b) if s else np.linalg.solve(G + lam * np.eye(d), b)
    assert np.allclose(chol @ chol.T, Q, atol=1e-9)
    assert np.allclose(theta, mean, atol=1e-9)


def test_adac_oful_doubling_rule_for_growth():
    """growth = 0: ln(1 + C) = d·ln(1 + nL²/(dλ))/⌈log₂(n + 1)⌉, n = ⌈(T − D)/M⌉, halved under
    estimate=episodes (written out
    here for d = 4, K = 3 disjoint models, T = 5000, D = 0: n = 1667, ⌈log₂ 1668⌉ = 11)."""
    env = CE.linear(4, 3, seed=0)
    prob = problem_of(env, 5000, 0)
    pol = make_policy("adac-oful")
    M = prob.n_streams
    n = -(-prob.max_observations // M)
    want = 4 * math.log(1 + n * prob.norm_bound ** 2 / 4) / math.ceil(math.log2(n + 1))
    # the default estimate=episodes spreads the growth over twice as many episodes
    assert pol.log_growth(prob) == pytest.approx(want / 2, rel=1e-12)
    assert make_policy("adac-oful", estimate="likelihood").log_growth(prob) == pytest.approx(
        want, rel=1e-12)
    assert make_policy("adac-oful", growth=3.0).log_growth(prob) == math.log1p(3.0)


# -- adac-oful's per-episode posterior and its whitened releases -----------------------------------

def _posterior_direct(blocks, lam):
    """The Gaussian posterior of θ ~ N(0, I/λ) (units of R²) from independent observations
    b_e ~ N(G_eθ, C_e), written in information form with numpy's inverse: precision λI +
    Σ G_e C_e⁻¹ G_e, mean its inverse times Σ G_e C_e⁻¹ b_e."""
    d = blocks[0][0].shape[0]
    prec, lin = lam * np.eye(d), np.zeros(d)
    for G, C, b in blocks:
        Ci = np.linalg.inv(C)
        prec += G @ Ci @ G
        lin += G @ Ci @ b
    return prec, np.linalg.solve(prec, lin)


def _episode_grams(rng, d, sizes):
    out = []
    for n in sizes:
        X = rng.normal(size=(n, d)) * np.linspace(1.0, 0.05, d)
        out.append(X.T @ X)
    return out


@pytest.mark.parametrize("s", [0.0, 0.5, 30.0])
def test_episode_likelihood_model_is_the_posterior_of_every_release(s):
    """Folding released episodes one by one (:func:`_episode_likelihood_model`) gives the
    posterior of all of them at once: each b_e ~ N(G_eθ, G_e + sI) independently (disjoint
    records), prior precision λI — against the information form written directly.  With s = 0
    it is ridge's (λI + Σ G_e)⁻¹ Σ b_e."""
    from dpledger.policies.contextual.episode_loop import _episode_likelihood_model
    rng = np.random.default_rng(5)
    d, lam = 5, 0.8
    grams = _episode_grams(rng, d, [3, 7, 20])
    chol, theta, W = np.sqrt(lam) * np.eye(d), np.zeros(d), np.zeros((d, d))
    blocks = []
    for G in grams:
        b = G @ rng.normal(size=d) + (s > 0) * rng.normal(size=d)   # a clean sum lies in G's range
        _episode_likelihood_model(np.linalg.cholesky(G + lam * np.eye(d)), b, lam, s, chol,
                                  theta, W)
        blocks.append((G, G + s * np.eye(d) if s else G + 1e-300 * np.eye(d), b))
    if s:
        prec, mean = _posterior_direct(blocks, lam)
    else:
        prec = lam * np.eye(d) + sum(grams)
        mean = np.linalg.solve(prec, sum(b for _, _, b in blocks))
    assert np.allclose(chol @ chol.T, prec, atol=1e-8)
    assert np.allclose(theta, mean, atol=1e-8)


def test_whitened_episode_model_is_the_posterior_of_the_whitened_releases():
    """:func:`_whitened_episode_model`: the release y = W·Σcrx + N(0, σ²I) read as b̃ = W⁻¹y ~
    N(G̃θ, G̃ + sW⁻²) (units of R²), folded over episodes each with its own W, equals the
    information-form posterior written directly; with W = I it equals the isotropic fold."""
    from dpledger.policies.contextual.episode_loop import (_episode_likelihood_model,
                                                           _whitened_episode_model)
    rng = np.random.default_rng(6)
    d, lam, s = 4, 1.3, 7.0
    grams = _episode_grams(rng, d, [5, 9, 30])
    chol, theta, W = np.sqrt(lam) * np.eye(d), np.zeros(d), np.zeros((d, d))
    chol2, theta2 = chol.copy(), theta.copy()
    blocks = []
    for k, G in enumerate(grams):
        A = rng.normal(size=(d, d))
        Wm = A @ A.T + 0.5 * np.eye(d)               # symmetric positive definite map
        y = rng.normal(size=d)
        Le = np.linalg.cholesky(G + lam * np.eye(d))
        _whitened_episode_model(Le, Wm, y, lam, s, chol, theta, W)
        Wi = np.linalg.inv(Wm)
        blocks.append((G, G + s * Wi @ Wi.T, Wi @ y))
        _whitened_episode_model(Le, np.eye(d), y, lam, s, chol2, theta2, W)
        if k == 0:
            c3, t3 = np.sqrt(lam) * np.eye(d), np.zeros(d)
        _episode_likelihood_model(Le, y, lam, s, c3, t3, W)
    prec, mean = _posterior_direct(blocks, lam)
    assert np.allclose(chol @ chol.T, prec, atol=1e-8)
    assert np.allclose(theta, mean, atol=1e-8)
    assert np.allclose(chol2 @ chol2.T, c3 @ c3.T, atol=1e-8)
    assert np.allclose(theta2, t3, atol=1e-8)


def test_whitening_map_puts_the_records_mean_square_norm_at_the_bound():
    """whitening_map: W is symmetric, shares the moments' eigenvectors, and the records'
    mean ‖Wx‖² is L² exactly (W²'s trace against Ḡ = Σxxᵀ/n is ν²·d_eff = L²); before any
    record W = I."""
    from dpledger.policies.contextual.episode_loop import whitening_map
    rng = np.random.default_rng(7)
    d, lam, kappa, L = 6, 1.0, 0.01, 2.0
    X = rng.normal(size=(50, d)) * np.linspace(1.0, 0.02, d)
    X *= L / np.linalg.norm(X, axis=1).max()
    Lc = np.linalg.cholesky(lam * np.eye(d) + X.T @ X)
    Wm = np.zeros((d, d))
    whitening_map(Lc, 50, lam, kappa, L, Wm)
    assert np.allclose(Wm, Wm.T)
    assert np.mean(np.sum((X @ Wm) ** 2, axis=1)) == pytest.approx(L * L, rel=1e-9)
    Gb = X.T @ X / 50
    assert np.allclose(Wm @ Gb, Gb @ Wm, atol=1e-9)
    whitening_map(Lc, 0, lam, kappa, L, Wm)
    assert np.array_equal(Wm, np.eye(d))


@pytest.mark.parametrize("lattice", [False, True])
def test_whitened_push_keeps_every_record_within_the_bound(lattice):
    """ep_push under noise_shape=data: a record's contribution to its episode's sum, r·c·Wx,
    has L2 norm ≤ L whatever W (c = min(1, L/‖Wx‖)) — the release's sensitivity, so the
    certificate (one Gaussian release of sensitivity L) is unchanged — and the episode's Gram
    factor holds λI + Σ c x xᵀ."""
    from dpledger.policies.contextual.episode_loop import EP_REWARD, ep_push
    rng = np.random.default_rng(8)
    d, M, lam, L = 5, 2, 1.0, 1.0
    bits = 16
    u = L * 2.0 ** -bits
    units = np.array([u, u, 1 / u, 1 / u]) if lattice else np.array([1.0, 1.0, 0.0, 0.0])
    A = rng.normal(size=(d, d))
    wmap = np.stack([3.0 * (A @ A.T + np.eye(d)), np.eye(d)])     # model 0 amplifies
    acc, ist, ld = np.zeros((M, d)), np.zeros((M, 4), np.int64), np.zeros((M, 2))
    chol_cur = np.tile(np.sqrt(lam) * np.eye(d), (M, 1, 1))
    chol_ep = chol_cur.copy()
    vx, work = np.zeros(d + 1), np.zeros(d)
    gram = lam * np.eye(d)
    for _ in range(40):
        x = rng.normal(size=d)
        x *= rng.uniform(0.1, 1.0) * L / np.linalg.norm(x)
        r = rng.uniform()
        before = acc[0].copy()
        ep_push(EP_REWARD, 0, x, r, acc, ist, ld, chol_cur, chol_ep, wmap, L, units, 1e9,
                False, vx, work)
        step = (acc[0] - before) * units[1]
        z = wmap[0] @ x
        c = min(1.0, L / np.linalg.norm(z))
        assert np.linalg.norm(step) <= L * (1 + 1e-12) + (np.sqrt(d) * u if lattice else 0)
        assert np.allclose(step, r * c * z, atol=u if lattice else 1e-12)
        gram += c * np.outer(x, x)
    assert np.allclose(chol_ep[0] @ chol_ep[0].T, gram, atol=1e-9)


def test_adac_oful_noise_shape_refusals_and_what_run_json_records():
    """noise_shape=data needs estimate=episodes (one line, exit 2 on the command line); the
    default resolves to data under estimate=episodes and to isotropic otherwise, and the
    plan records it."""
    env = CE.linear(3, 3, seed=0)
    prob = problem_of(env, 500, 0)
    with pytest.raises(DpledgerError, match="noise_shape=data needs estimate=episodes"):
        make_policy("adac-oful", noise_shape="data", estimate="likelihood").plan(prob)
    assert make_policy("adac-oful").plan(prob).drawn["noise_shape"] == "data"
    assert make_policy("adac-oful").plan(prob).whiten
    assert not make_policy("adac-oful", estimate="likelihood").plan(prob).whiten
    assert not make_policy("adac-oful", noise_shape="isotropic").plan(prob).whiten
