"""The §5.1-shaped instance ``digits6`` (issue 32 §1): its shape and click rate, the generated
log's law (uniform logging, clicks of the model's probability, the kernel's generator equal to
its Python twin), the online form, the lift ratio's arithmetic, the per-entry noise against
signal, and a tiny run of the experiment on it."""
from __future__ import annotations

import glob
import json
import math
import os

import numpy as np
import pytest

from dpledger.errors import DpledgerError
from dpledger.experiments import experiment_module
from dpledger.experiments.common import run_experiment
from dpledger.experiments.overrides import Overrides
from dpledger.policies.contextual import digits6
from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.loop import generated_row, splitmix64

MOD = experiment_module("mishra-thakurta-2015-contextual")


def test_shape_and_click_rate():
    """d = 6 with ‖x‖ ≤ 1, 20 arms, a click rate of a few per cent (uniform play's, the mean of
    the model's probabilities), every probability in [0, 1], and the click model exactly the
    linear model ⟨θ_a, x⟩."""
    env = digits6.environment()
    assert (env.n_arms, env.dim, env.is_replay, env.shared) == (20, 6, True, False)
    x = env.contexts[:, 0, :]
    assert x.shape == (1797, 6) and np.linalg.norm(x, axis=1).max() <= 1.0 + 1e-12
    assert np.allclose(x[:, 0], 1 / math.sqrt(2))
    p = env.rewards
    assert p.shape == (1797, 20) and p.min() >= 0.0 and p.max() <= 1.0
    uni = env.info["uniform_mean_reward"]
    assert uni == pytest.approx(p.mean()) and 0.02 <= uni <= 0.05
    assert np.allclose(x @ digits6.theta().T, p, rtol=0, atol=1e-15)
    d = digits6.describe()
    assert d["oracle_lift"] == pytest.approx(p.max(axis=1).mean() / p.mean())
    assert 1.5 < d["oracle_lift"] < 2.5


def test_splitmix_twins_agree():
    """The kernel's splitmix64 and its Python twin are the same function (spot values, and the
    published first output of splitmix64 seeded with 0: 0xE220A8397B1DCDAF)."""
    for x in (0, 1, 12345, 2**63 + 7, 2**64 - 1):
        assert int(splitmix64(np.uint64(x))) == CE.splitmix64_py(x)
    # the generator's first output from state 0 is the output function at 0
    assert CE.splitmix64_py(0) == 0xE220A8397B1DCDAF


def test_generated_log_law():
    """Rows of the generated log: logged arms uniform (χ² over 20 arms below its 99.9 %
    quantile 43.8, df = 19), users uniform over the 1 797 (mean index within 4 standard errors),
    and the click rate equal to uniform play's mean probability within 4 standard errors
    (seeded: each check fails with probability < 10⁻³ for a correct generator)."""
    env = digits6.environment()
    n, P, K = 200_000, env.contexts.shape[0], env.n_arms
    rows = np.array([generated_row(env.log_key, P, K, r) for r in range(n)])
    users, arms, coins = rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2]
    counts = np.bincount(arms, minlength=K)
    assert ((counts - n / K) ** 2 / (n / K)).sum() < 43.8
    assert abs(users.mean() - (P - 1) / 2) < 4 * math.sqrt((P * P - 1) / 12 / n)
    clicks = coins < env.rewards[users, arms]
    uni = env.info["uniform_mean_reward"]
    assert abs(clicks.mean() - uni) < 4 * math.sqrt(uni * (1 - uni) / n)
    # the same log for every key's holder: a function of (seed, row) only
    again = digits6.environment()
    assert again.log_key == env.log_key
    assert generated_row(again.log_key, P, K, 12345) == tuple(rows[12345][:2].astype(int)) + (
        rows[12345][2],)


def test_replay_accepts_one_row_in_k_and_online_matches():
    """Replaying the generated log accepts about one row in 20 (binomial, within 4 standard
    errors), whatever the policy plays; the online form runs every round."""
    from dpledger.policies.contextual.simulator import simulate_contextual
    from dpledger.policies.registry import make_policy
    T = 20_000
    res = simulate_contextual(make_policy("linucb"), digits6.environment(), T, seed=3, runs=2)
    for k in res.rounds:
        assert abs(k - T / 20) < 4 * math.sqrt(T * (1 / 20) * (19 / 20))
    on = simulate_contextual(make_policy("linucb"), digits6.online(), 1_000, seed=3, runs=1)
    assert on.rounds == [1_000] and on.regret is not None


def test_lift_ratio_arithmetic():
    """(p − 1)/(b − 1) on rewards normalised to uniform play's: a private policy at uniform
    play keeps no lift (0) though its ratio of means is 1/b; equal policies keep all (1); no
    ratio when the non-private policy has no lift."""
    assert MOD.lift_ratio(1.5, 2.0) == pytest.approx(0.5)
    assert MOD.lift_ratio(1.0, 9.8) == 0.0
    assert MOD.lift_ratio(1.3, 1.3) == pytest.approx(1.0)
    assert MOD.lift_ratio(0.9, 1.2) == pytest.approx(-0.5)
    assert MOD.lift_ratio(1.5, 1.0) is None and MOD.lift_ratio(1.5, 0.8) is None
    assert MOD.lift_ratio(math.nan, 2.0) is None


def test_pair_bands_delta_method():
    """The bands of the ratio of means and of the lift ratio: the delta method's half-band
    equals 1.96·√(Σ (∂f/∂xᵢ)²·seᵢ²) with the partial derivatives taken numerically; a policy at
    uniform play (p = 1) has lift-ratio band h_p/(b − 1), its own band only; and on 20 000
    seeded normal draws the band covers the true value 95 % of the time (|coverage − 0.95| <
    0.01: 6.5 binomial standard errors, fails with probability < 10⁻⁹ for a correct band)."""
    p, hp, b, hb = 1.04, 0.006, 1.84, 0.010
    got = MOD.pair_bands((p, hp), (b, hb))
    for f, key in ((lambda x, y: x / y, "ratio"), (lambda x, y: (x - 1) / (y - 1),
                                                   "lift_ratio")):
        e = 1e-7
        dx = (f(p + e, b) - f(p - e, b)) / (2 * e)
        dy = (f(p, b + e) - f(p, b - e)) / (2 * e)
        assert got[key] == pytest.approx(f(p, b))
        assert got[key + "_band95"] == pytest.approx(math.hypot(dx * hp, dy * hb), rel=1e-6)
    at_uniform = MOD.pair_bands((1.0, 0.02), (1.84, 0.5))
    assert at_uniform["lift_ratio"] == 0.0
    assert at_uniform["lift_ratio_band95"] == pytest.approx(0.02 / 0.84)
    none = MOD.pair_bands((1.1, 0.1), (0.95, 0.1))
    assert none["lift_ratio"] is None and none["lift_ratio_band95"] is None
    rng = np.random.default_rng(32)
    P = rng.normal(p, hp / 1.96, 20_000)
    B = rng.normal(b, hb / 1.96, 20_000)
    for key, truth in (("ratio", p / b), ("lift_ratio", (p - 1) / (b - 1))):
        hits = 0
        for x, y in zip(P, B, strict=True):
            r = MOD.pair_bands((float(x), hp), (float(y), hb))
            hits += abs(r[key] - truth) <= r[key + "_band95"]
        assert abs(hits / P.size - 0.95) < 0.01, (key, hits / P.size)


def test_noise_signal_recomputed():
    """Digits at T = 10⁵, ε₀ = 2.7/2144: the Laplace scales are levels·Δ₁/ε₀ (levels = bit
    length of 10⁵ = 17; Δ₁ = 2L² diagonal, L² off-diagonal, 2L for Σ r·x, L = 1), the noise sd
    √(2·popcount(n))·scale, and the signals recomputed from scikit-learn's digits: noise
    dwarfs signal (the reason the claim fails on digits)."""
    from sklearn.datasets import load_digits
    from dpledger.policies.contextual.environments import scale_features
    eps0 = 2.7 / 2144
    n = 100_000
    ns = MOD.noise_signal({"kind": "supervised", "dataset": "digits"}, eps0, n, n)
    assert ns["levels"] == 17 and ns["nodes"] == bin(n).count("1") == 6
    for key, sens in (("gram_diagonal", 2.0), ("gram_off_diagonal", 1.0),
                      ("reward_times_context", 2.0)):
        e = ns[key]
        assert e["laplace_scale"] == pytest.approx(17 * sens / eps0, rel=1e-12)
        assert e["noise_sd"] == pytest.approx(math.sqrt(12) * e["laplace_scale"])
    data = load_digits()
    x = scale_features(data.data, 1.0)
    diag = (x ** 2).mean(axis=0).mean() * n / 10
    assert ns["gram_diagonal"]["signal"] == pytest.approx(diag)
    rx = np.array([(x * (data.target == a)[:, None]).mean(axis=0) for a in range(10)])
    assert ns["reward_times_context"]["signal"] == pytest.approx(
        np.sqrt((rx ** 2).mean()) * n / 10)
    assert ns["reward_times_context"]["noise_over_signal"] > 100
    assert "Σ r·x noise sd" in MOD.noise_signal_text(ns)


def test_sizes_and_variants():
    """digits6 sweeps n = 10⁴ … 2·10⁶ accepted events over 20·n log rows; digits6-online over n
    rounds; at d = 6 the per-parameter variants are the total reading and are not run twice."""
    assert MOD.ACCEPTED_FULL[0] == 10_000 and MOD.ACCEPTED_FULL[-1] >= 2_000_000
    assert MOD.sizes("digits6", False) == [(n, 20 * n) for n in MOD.ACCEPTED_FULL]
    assert MOD.sizes("digits6-online", False) == [(n, n) for n in MOD.ACCEPTED_FULL]
    assert MOD.sizes("digits6", False, Overrides(horizon=500)) == [(500, 10_000)]
    cfgs = [c for c in MOD.configs(False) if c.tags["instance"] == "digits6"]
    assert {c.tags["variant"] for c in cfgs} == {"linucb", "lints", "dp-linucb-mt",
                                                 "dp-lints-mt", "jdp-linucb-accounted"}
    assert all(c.params.get("epsilon0", 0.1) == pytest.approx(0.1) for c in cfgs)
    assert len(cfgs) == 5 * 3 * len(MOD.ACCEPTED_FULL)


def test_delay_and_size_subsets(tmp_path):
    """--delays and --accepted run a subset of the grid and no more: the settings are exactly
    the chosen (delay, n) pairs, with the same labels and seeds as the full grid's (so a cell
    is the full sweep's cell), the overrides are recorded in every run.json and
    experiment.json, and a claim that needs two delays says so instead of being judged.  One
    run a setting has no band, and the experiment still writes its files."""
    full = {c.label: c for c in MOD.configs(False, Overrides(instances=("digits6-online",)))}
    ov = Overrides(instances=("digits6-online",), delays=(0,), accepted=(10_000, 2_000_000))
    sub = MOD.configs(False, ov)
    assert {(c.tags["delay"], c.tags["accepted_target"]) for c in sub} == {
        (0, 10_000), (0, 2_000_000)}
    assert len(sub) == 2 * 5
    assert all(c.key() == full[c.label].key() for c in sub)
    out = str(tmp_path / "sub")
    ov = Overrides(runs=1, instances=("digits6-online",), policies=("linucb", "dp-linucb-mt"),
                   delays=(0,), accepted=(200, 400))
    res = run_experiment(MOD, out, quick=False, workers=1, quiet=True, overrides=ov)
    assert {(r["delay"], r["accepted_target"]) for r in res["summary"].table} == {
        (0, 200), (0, 400)}
    # one run has no band: recorded as none (experiment.json holds no NaN), said in the claims
    assert all(r["normalised_band95"] is None for r in res["summary"].table)
    assert all(r.get("lift_ratio_band95") is None for r in res["summary"].table)
    with open(os.path.join(out, "experiment.json")) as fh:
        meta = json.load(fh)
    assert meta["overrides"]["--delays"] == [0]
    assert meta["overrides"]["--accepted"] == [200, 400]
    for f in glob.glob(os.path.join(out, "runs", "*.json")):
        with open(f) as fh:
            rec = json.load(fh)["experiment"]["overrides"]
        assert rec["--delays"] == [0] and rec["--accepted"] == [200, 400]
    first, second = res["summary"].claims
    assert "every delay run (D = 0 of 0, 100, 1000)" in first.text
    assert "at n = 400 accepted events" in first.text and "n = 200:" in first.evidence
    assert "(one run: no band)" in first.evidence
    assert second.confirmed is None and "needs delay 0 and a later delay" in second.evidence
    with open(os.path.join(out, "claims.md")) as fh:
        assert "--delays 0; --accepted 200,400" in fh.read()


def test_tiny_experiment_on_digits6(tmp_path):
    """A tiny run on the replayed log (n = 400 accepted events aimed at, 2 runs): every run
    verifies, the table's lift ratio is (p − 1)/(b − 1) of its own normalised rewards, and the
    claims print the lift ratio and the noise against the signal."""
    from dpledger.verify import verify_run
    out = str(tmp_path / "mt")
    ov = Overrides(horizon=400, runs=2, instances=("digits6",),
                   policies=("linucb", "dp-linucb-mt"))
    res = run_experiment(MOD, out, quick=True, workers=1, quiet=True, overrides=ov)["summary"]
    rows = {(r["variant"], r["delay"]): r for r in res.table}
    assert len(rows) == 6
    for delay in MOD.DELAYS:
        p, b = rows[("dp-linucb-mt", delay)], rows[("linucb", delay)]
        assert p["T"] == 8_000 and p["accepted_target"] == 400
        want = MOD.lift_ratio(p["normalised_to_uniform"], b["normalised_to_uniform"])
        assert p["lift_ratio_to_nonprivate"] == (None if want is None else pytest.approx(want))
        assert p["ratio_to_nonprivate"] == pytest.approx(
            p["normalised_to_uniform"] / b["normalised_to_uniform"])
    text = " ".join(c.evidence for c in res.claims)
    assert "lift ratio" in text and "Σ r·x noise sd" in text
    for f in glob.glob(os.path.join(out, "runs", "*.json")):
        with open(f) as fh:
            assert json.load(fh)["environment"]["log"].startswith("generated")
        assert not verify_run(f).problems, f
    with pytest.raises(DpledgerError, match="only the experiment mishra-thakurta-2015-"):
        verify_run(f, resimulate=True)     # one line on the CLI, not a traceback
