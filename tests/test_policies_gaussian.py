"""TS-Gaussian / M-TS-Gaussian (Ou et al. 2024, A8) and DP-TS-UCB (Hu et al. 2025, A7): invariants
of docs/design.md#invariants on every run, theorem and certificate values recomputed from the
formulas, the posterior sample = the Gaussian mechanism the ledger records, noise draws against
ledger rows, and hand-computed steps (φ, epochs)."""
from __future__ import annotations

import contextlib
import importlib
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

from dpledger.accounting.ledger import RewardLedger
from dpledger.policies.environments import bernoulli, table
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import simulate
from dpledger.report import build_run_report

sys.path.insert(0, os.path.dirname(__file__))
from policy_helpers import CountingRng, pure_python  # noqa: E402

FULL = os.environ.get("DPLEDGER_FULL") == "1"
TOL = 1 + 1e-12
MY_MODULES = ["dpledger.policies.ou", "dpledger.policies.hu2025",
              "dpledger.policies.mishra_thakurta"]


@contextlib.contextmanager
def all_python():
    """Every dispatcher in the shared modules and in these policies' modules → py_func, so the
    reference kernel accepts a proxy generator."""
    saved = []
    for name in MY_MODULES:
        mod = importlib.import_module(name)
        for key, val in list(vars(mod).items()):
            if isinstance(val, CPUDispatcher):
                saved.append((mod, key, val))
                setattr(mod, key, val.py_func)
    try:
        with pure_python():
            yield
    finally:
        for mod, key, val in saved:
            setattr(mod, key, val)


def reference(pol, rng, env, T, capture=None):
    """The per-round reference: kernel.py_func with every helper in Python."""
    pol.run_one(np.random.default_rng(0), env.as_tuple(), T, stop_at=min(T, env.n_arms + 2))
    K = env.n_arms
    with all_python():
        if capture is None:
            return pol.run_one(rng, env.as_tuple(), T, reference=True)
        actions = np.zeros(T, dtype=np.int64)
        rows = np.zeros((5, pol.row_capacity(T, K)), dtype=np.int64)
        played, n_rows, draws = type(pol).kernel.py_func(
            rng, env.as_tuple(), T, K, T, pol.kernel_params(T, K), actions, rows, capture)
    from dpledger.policies.base import RunOutput
    return pol.finish(RunOutput(actions=actions[:played], rows=rows[:, :n_rows],
                                noise_draws=draws), T, K)


def checks_hold(report):
    """docs/design.md#invariants from run.json's checks.  A certificate pure ε that is unbounded
    while the theorem states no pure ε (a GDP theorem) is not a comparison: report.checks currently
    used to count it as a failure; it is skipped here as well."""
    p = report["privacy"]
    th = p["theorem"]
    bad = []
    for d in p["checks"]["details"]:
        if d["ok"]:
            continue
        if (d["check"] == "certificate_le_theorem"
                and th[f"{d['what']}_status"] == "not_applicable"):
            continue
        bad.append(d)
    return bad


# ---- 1. invariants on every run over the grid ----------------------------------------------

MTS_GRID = [(b, c) for b in (0, 1, 10) for c in (1.0, 4.0)]


def _brute_mu2(g, run, arm, index):
    """Σ count·μ² of the expanded read rows (run, arm, 0, k, count, μ²) with k > index."""
    m = (g["run"] == run) & (g["arm"] == arm) & (g["start"] <= index) & (index < g["stop"])
    return math.fsum((g["count"][m] * g["mu2"][m]).tolist())


def _read_rows_of(out, K):
    """The growing-prefix rows (arm, k, count, μ²) a run's posterior-read records expand to,
    through a one-run ledger built from its actions (the simulator's path)."""
    led = RewardLedger()
    led.add_actions(0, out.actions)
    pr = out.posterior_reads
    if pr is not None:
        led.add_posterior_reads(0, pr["arm"], pr["first_round"], pr["last_round"], pr["c"])
    return led.posterior_read_rows()


def _reads_from_actions(actions, K, pre, c):
    """The posterior reads of one run straight from its actions, round by round (independent
    of the ledger): {(arm, k): draws at prefix length k ≥ 1} and each reward's μ²."""
    k = np.zeros(K, int)
    counts = {}
    for t, a in enumerate(actions, start=1):
        if t > pre:
            for j in range(K):
                if k[j] > 0:
                    counts[(j, int(k[j]))] = counts.get((j, int(k[j])), 0) + 1
        k[a] += 1
    return counts


@pytest.mark.parametrize("b,c", MTS_GRID)
def test_mts_gaussian_invariants(b, c):
    T, env = 400, bernoulli([0.8, 0.5, 0.3])
    pol = make_policy("mts-gaussian", b=b, c=c)
    res = simulate(pol, env, T, seed=11, runs=2)
    rep = build_run_report(res, deltas=[1e-6])
    p = rep["privacy"]
    assert not checks_hold(rep), checks_hold(rep)
    assert p["checks"]["realized_le_certificate"]
    assert p["realized"]["label"].startswith("odometer")
    cert_mu = p["certificate"]["gdp_mu"]
    assert p["realized"]["gdp_mu"] <= cert_mu * TOL
    assert cert_mu <= p["theorem"]["gdp_mu"] * TOL
    # direct ledger check: every reward's μ² from the expanded reads, brute force, against
    # the ledger's per-reward values and its worst reward
    led = res.ledger
    g = led.posterior_read_rows()
    worst = 0.0
    for (run, arm), n in led.streams().items():
        brute = [_brute_mu2(g, run, arm, i) for i in range(n)]
        got = led.posterior_read_mu2(run, arm, np.arange(n))
        assert np.allclose(got, brute, rtol=1e-13, atol=0)
        worst = max([worst] + brute)
    assert worst <= cert_mu ** 2 * TOL
    assert led.worst_reward().key == pytest.approx(math.sqrt(worst), rel=1e-12)
    # the expansion is the read schedule of the actions, and the ledger holds one record per
    # (run, arm), not one row per round
    res2 = simulate(pol, env, T, seed=11, runs=2, keep_actions=True)
    for run in range(2):
        exp = _reads_from_actions(res2.actions[run], 3, b * 3, c)
        m = g["run"] == run
        got = {(int(a), int(k)): int(n) for a, k, n in zip(g["arm"][m], g["stop"][m], g["count"][m],
                                                           strict=True)}
        assert got == exp
    assert len(led.posterior_reads["run"]) <= 2 * 3 and led.gaussian_rows["run"].size == 0


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_dp_ts_ucb_invariants(alpha):
    T, env = 3000, bernoulli([0.8, 0.5, 0.3])
    pol = make_policy("dp-ts-ucb", alpha=alpha)
    res = simulate(pol, env, T, seed=3, runs=2)
    rep = build_run_report(res, deltas=[1e-6])
    p = rep["privacy"]
    assert not checks_hold(rep), checks_hold(rep)
    gdp = [d for d in p["checks"]["details"]
           if d["check"] == "certificate_le_theorem" and d["what"] == "gdp_mu"]
    assert len(gdp) == 1 and gdp[0]["ok"]
    assert p["realized"]["gdp_mu"] <= p["certificate"]["gdp_mu"] * TOL
    ratio = p["checks"]["certificate_over_theorem"]["gdp_mu"]
    assert ratio == pytest.approx(p["certificate"]["gdp_mu"] / p["theorem"]["gdp_mu"])
    assert any("Lemma 5" in n for n in p["theorem"]["notes"])     # A7's caution is shown
    # direct: every row reads one epoch [2^r − 1, 2^{r+1} − 1) with ≤ φ samples
    phi = math.ceil(T ** (0.5 * (1 - alpha)) * math.log(T) ** (0.5 * (3 - alpha)))
    rows = res.ledger.rows
    for s, e, rid, cnt in zip(rows["start"], rows["stop"], rows["release_id"], rows["count"],
                              strict=True):
        assert (s, e) == (2 ** rid - 1, 2 ** (rid + 1) - 1)
        assert 1 <= cnt <= phi


def test_dp_ts_ucb_finding_when_budget_rounds_up():
    """Tiny c0: ⌈φ⌉ = 1 > 2φ — the certificate exceeds the theorem; a declared finding."""
    T, env = 500, bernoulli([0.8, 0.3])
    pol = make_policy("dp-ts-ucb", alpha=1.0, c0=0.01)
    rep = build_run_report(simulate(pol, env, T, seed=1, runs=1), deltas=[1e-6])
    chk = rep["privacy"]["checks"]
    gdp = [d for d in chk["details"]
           if d["check"] == "certificate_le_theorem" and d["what"] == "gdp_mu"]
    assert len(gdp) == 1 and not gdp[0]["ok"]
    assert not chk["certificate_le_theorem"]
    assert "2φ" in chk["theorem_finding"]
    assert chk["realized_le_certificate"]


def test_report_checks_gaussian_theorem_without_pure_epsilon():
    pol = make_policy("ts-gaussian")
    rep = build_run_report(simulate(pol, bernoulli([0.8, 0.3]), 200, seed=1, runs=1),
                           deltas=[1e-6])
    assert rep["privacy"]["checks"]["certificate_le_theorem"]


# ---- 2. theorem and certificate values from the formulas ------------------------------------

def test_mts_gaussian_values_worked_example():
    pol = make_policy("mts-gaussian", b=10, c=2.0)
    T, K = 10 ** 4, 5
    assert pol.theorem(T, K).gdp_mu == pytest.approx(math.sqrt(1e4 / 22), rel=1e-12)
    assert round(pol.theorem(T, K).gdp_mu, 3) == 21.320
    cert = pol.certificate(T, K).compositions[0]
    assert cert.gdp_mu() == pytest.approx(math.sqrt((1e4 - 50) / 22), rel=1e-12)
    assert round(cert.gdp_mu(), 3) == 21.267


def test_ts_gaussian_values_worked_example():
    pol = make_policy("ts-gaussian")
    assert pol.params == {}
    T, K = 10 ** 4, 5
    assert pol.theorem(T, K).gdp_mu == pytest.approx(100.0, rel=1e-12)
    cert = pol.certificate(T, K).compositions[0]
    assert cert.gdp_mu() == pytest.approx(math.sqrt(9999 / 2), rel=1e-12)
    assert round(cert.gdp_mu(), 2) == 70.71


@pytest.mark.parametrize("b,c,T,K", [(0, 1.0, 7, 2), (0, 3.0, 50, 4), (2, 1.5, 30, 3),
                                     (5, 0.5, 1000, 7)])
def test_mts_certificate_closed_form(b, c, T, K):
    pol = make_policy("mts-gaussian", b=b, c=c)
    mu2 = (T - b * K) / (c * (b + 1)) if b >= 1 else (T - 1) / (2 * c)
    assert pol.certificate(T, K).compositions[0].gdp_mu2() == pytest.approx(mu2, rel=1e-12)
    assert pol.theorem(T, K).gdp_mu == pytest.approx(math.sqrt(T / (c * (b + 1))), rel=1e-12)


def test_dp_ts_ucb_values_worked_example():
    T, K = 10 ** 5, 5
    pol = make_policy("dp-ts-ucb", alpha=1.0, c0=1.0)
    lnT = math.log(T)
    assert pol.theorem(T, K).gdp_mu == pytest.approx(math.sqrt(2), rel=1e-12)
    assert pol.theorem(T, K).finding == ""
    cert = pol.certificate(T, K).compositions[0]
    assert cert.gdp_mu() == pytest.approx(math.sqrt(math.ceil(lnT) / lnT), rel=1e-12)
    assert math.ceil(lnT) == 12


@pytest.mark.parametrize("T,alpha,c0,phi", [
    # φ = ⌈c0·T^{0.5(1−α)}·ln(T)^{0.5(3−α)}⌉ worked by hand:
    (10 ** 5, 1.0, 1.0, 12),          # ln 1e5 = 11.513 → 12
    (10 ** 5, 0.5, 1.0, 378),         # 1e5^0.25 = 17.783, 11.513^1.25 = 21.24 → 377.7
    (10 ** 5, 0.0, 1.0, 12354),       # 316.23 · 11.513^1.5 = 316.23 · 39.06 = 12353.5
    (100, 1.0, 0.5, 3),               # 0.5 · ln 100 = 2.303 → 3
])
def test_phi_by_hand(T, alpha, c0, phi):
    from dpledger.policies.hu2025 import sampling_budget
    assert sampling_budget(T, alpha, c0) == phi
    pol = make_policy("dp-ts-ucb", alpha=alpha, c0=c0)
    L = math.log(T) ** alpha
    assert pol.certificate(T, 3).compositions[0].gdp_mu2() == pytest.approx(
        min(phi, T - 3) / L, rel=1e-12)


# ---- 3. the posterior sample is exactly the recorded Gaussian mechanism ---------------------

@pytest.mark.parametrize("b,c", [(0, 1.0), (2, 3.0)])
def test_posterior_is_the_recorded_gaussian_mechanism(b, c):
    rng0 = np.random.default_rng(7)
    T, K = 120, 3
    tab = (rng0.random((T, K)) < np.array([0.7, 0.5, 0.4])).astype(float)
    env = table(tab)
    pol = make_policy("mts-gaussian", b=b, c=c)
    cap = np.zeros((3, T * K))
    out = reference(pol, np.random.default_rng(5), env, T, capture=cap)
    acts = out.actions
    # replay: per round, each arm's (S, k) before the round
    S, k = np.zeros(K), np.zeros(K, int)
    expected_counts = {}
    for t in range(T):
        cols = cap[:, t * K:(t + 1) * K]
        if t < b * K:
            assert np.all(np.isnan(cols))
        else:
            for j in range(K):
                mean, sigma = cols[1, j], cols[2, j]
                assert mean == pytest.approx(S[j] / (k[j] + 1), rel=1e-14, abs=1e-15)
                assert sigma == pytest.approx(math.sqrt(c / (k[j] + 1)), rel=1e-14)
                if k[j] > 0:
                    # the release: mean of sensitivity 1/(k+1), noise σ → μ² = 1/(c(k+1))
                    sens = 1.0 / (k[j] + 1)
                    key = (j, k[j])
                    expected_counts[key] = expected_counts.get(key, 0) + 1
                    assert (sens / sigma) ** 2 == pytest.approx(1 / (c * (k[j] + 1)), rel=1e-12)
        a = acts[t]
        S[a] += tab[t, a]
        k[a] += 1
    g = _read_rows_of(out, K)
    got = {(int(a), int(s)): int(n) for a, s, n in zip(g["arm"], g["stop"], g["count"],
                                                       strict=True)}
    assert got == expected_counts
    assert np.all(g["start"] == 0)
    for s, mu2 in zip(g["stop"], g["mu2"], strict=True):
        assert mu2 == pytest.approx(1.0 / (c * (s + 1)), rel=1e-14)
    # and the compiled kernel gives the same actions (one source)
    comp = pol.run_one(np.random.default_rng(5), env.as_tuple(), T)
    assert np.array_equal(comp.actions, acts)


# ---- 4. noise draws against ledger rows ----------------------------------------------------

@pytest.mark.parametrize("b", [0, 2])
def test_ts_gaussian_draws_match_rows(b):
    env = bernoulli([0.7, 0.5, 0.2])
    T, K = 150, 3
    pol = make_policy("mts-gaussian", b=b, c=1.0)
    rng = CountingRng(np.random.default_rng(3))
    out = reference(pol, rng, env, T)
    # draws at k = 0 read no reward and write no row: count them from the actions
    k = np.zeros(K, int)
    prior_draws = 0
    for t, a in enumerate(out.actions):
        if t >= b * K:
            prior_draws += int(np.sum(k == 0))
        k[a] += 1
    assert rng.normal_calls == int(_read_rows_of(out, K)["count"].sum()) + prior_draws
    assert rng.normal_calls == out.noise_draws == (T - b * K) * K
    assert rng.laplace_calls == 0


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_dp_ts_ucb_draws_match_rows(alpha):
    env = bernoulli([0.7, 0.5, 0.2])
    T = 400
    pol = make_policy("dp-ts-ucb", alpha=alpha, c0=0.3)
    rng = CountingRng(np.random.default_rng(4))
    out = reference(pol, rng, env, T)
    assert rng.normal_calls == int(out.rows[4].sum()) == out.noise_draws
    assert rng.laplace_calls == 0
    comp = pol.run_one(np.random.default_rng(4), env.as_tuple(), T)
    assert np.array_equal(comp.actions, out.actions)


# ---- 5. hand-computed steps on tiny tables --------------------------------------------------

def test_dp_ts_ucb_epochs_and_budget_on_a_table():
    """K = 2, arm 0 always wins (reward 1, arm 1 reward 0, ln(T)^α tiny via α = 0 and c0 small):
    arm 0's epochs are [0,1), [1,3), [3,7), [7,15), …; each model draws min(φ, rounds active)."""
    T, K = 40, 2
    tab = np.zeros((T, K))
    tab[:, 0] = 1.0
    pol = make_policy("dp-ts-ucb", alpha=1.0, c0=0.5)    # φ = ⌈0.5·ln 40⌉ = ⌈1.84⌉ = 2
    phi = 2
    assert pol.phi(T) == phi
    out = reference(pol, np.random.default_rng(0), table(tab), T)
    rows = out.rows
    assert set(rows[3].tolist()) <= set(range(6))
    for _arm, s, e, rid, cnt in rows.T:
        assert (s, e) == (2 ** rid - 1, 2 ** (rid + 1) - 1)     # epoch boundaries
        assert 1 <= cnt <= phi
    # every model present at round K+1 onwards draws exactly φ samples if it lives ≥ φ rounds
    arm1 = rows[:, rows[0] == 1]
    assert arm1[4, 0] == phi          # arm 1's epoch-0 model: φ samples, then the max


def test_mts_prepulls_round_robin_and_no_draws():
    pol = make_policy("mts-gaussian", b=3, c=1.0)
    rng = CountingRng(np.random.default_rng(1))
    out = reference(pol, rng, bernoulli([0.5, 0.5, 0.5, 0.5]), 12)
    assert out.actions.tolist() == [0, 1, 2, 3] * 3
    assert rng.normal_calls == 0 and _read_rows_of(out, 4)["count"].size == 0


# ---- PLD is skipped for all-Gaussian: run/curve do not hang ---------------------------------

def _cli(*args, timeout):
    return subprocess.run([sys.executable, "-m", "dpledger", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_cli_run_ts_gaussian_small(tmp_path):
    """A Gaussian run finishes quickly with PLD skipped and every check holding."""
    import json
    out = tmp_path / "run.json"
    t0 = time.time()
    r = _cli("run", "mts-gaussian", "--set", "b=2", "--set", "c=2", "--means", "0.9,0.5",
             "--horizon", "2000", "--runs", "2", "--seed", "0", "--out", str(out), timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    assert rep["privacy"]["checks"]["certificate_le_theorem"]
    assert rep["privacy"]["checks"]["realized_le_certificate"]
    assert rep["privacy"]["certificate"]["epsilon_status"]["pld"]["1e-06"].startswith("skipped")
    assert rep["privacy"]["realized"]["epsilon_status"]["pld"]["1e-06"].startswith("skipped")
    assert time.time() - t0 < 120


@pytest.mark.slow
def test_cli_run_ts_gaussian_1e5_finishes_quickly(tmp_path):
    T = 10 ** 5 if FULL else 5000
    t0 = time.time()
    r = _cli("run", "ts-gaussian", "--means", "0.9,0.5", "--horizon", str(T), "--runs", "2",
             "--seed", "0", "--out", str(tmp_path / "run.json"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert time.time() - t0 < 30


@pytest.mark.parametrize("name", ["ts-gaussian", "mts-gaussian"])
def test_posterior_tables_change_no_draw(name):
    """kernel_params carries 1/(k+1) and √(c/(k+1)) for k < 4096 (the kernel's per-pull
    division and square root, taken off its dependency chain); the kernel computes them inline
    beyond.  With and without the tables ([b, c] only) the kernel must give the same actions,
    the same samples and the same means, bit for bit — at a horizon past the table (T = 6000:
    an arm reaches k ≥ 4096) and with c ≠ 1."""
    from dpledger.policies.base import KERNEL_TABLE_MAX as READ_TABLE_MAX
    from dpledger.policies.ou import _mts_gaussian
    pol = make_policy(name, **({"b": 2, "c": 0.7} if name == "mts-gaussian" else {}))
    T, K = 6000, 2
    env = bernoulli([0.9, 0.2])
    full = pol.kernel_params(T, K)
    assert full[2] == READ_TABLE_MAX
    bare = full[:2].copy()
    outs = []
    for params in (full, bare):
        actions = np.zeros(T, dtype=np.int64)
        cap = np.full((3, T * K), np.nan)
        _mts_gaussian(np.random.default_rng(5), env.as_tuple(), T, K, T, params, actions,
                      np.zeros((5, 1), np.int64), cap)
        outs.append((actions, cap))
    (a1, c1), (a2, c2) = outs
    assert np.bincount(a1, minlength=K).max() > READ_TABLE_MAX        # the inline branch ran
    assert np.array_equal(a1, a2)
    assert np.array_equal(c1, c2, equal_nan=True)
