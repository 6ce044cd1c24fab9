"""Gaussian reward noise for the linear environments (``--noise-sd``, issue 34 §5): the noise of
Azize & Basu 2022's linear lower bounds (Theorems 4 and 5), drawn as stated, recorded in
run.json, refused in one line when bad.

Statistical tests are seeded; each has a stated false-alarm rate under a correct law (a KS test
at level 1e-3; a binomial count outside 4.5 standard deviations, < 1e-5)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from dpledger.cli import main
from dpledger.errors import DpledgerError
from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.gope import PhasedElimination
from dpledger.policies.contextual.loop import round_outcome

N = 20_000


def _kernel_rewards(env, arm: int, n: int, seed: int) -> np.ndarray:
    k = env.as_kernel()
    rng = np.random.default_rng(seed)
    ctx = env.contexts[0]
    return np.array([round_outcome(k, rng, ctx, -1, arm)[1] for _ in range(n)])


def test_kernel_rewards_are_the_mean_plus_sigma_normal():
    env = CE.linear_fixed(3, 4, seed=3, lo=-60.0, hi=60.0, noise_sd=2.5)
    arm = 2
    mean = float(env.theta @ env.contexts[0][arm])
    r = _kernel_rewards(env, arm, N, seed=11)
    # unclipped here (|r − mean| ≥ 59 has probability < 1e-100): N(mean, 2.5²) exactly
    assert stats.kstest(r, "norm", args=(mean, 2.5)).pvalue > 1e-3


def test_rewards_are_clipped_to_the_declared_range():
    env = CE.linear_fixed(3, 4, seed=3, noise_sd=1.0)          # range [0, 1]
    arm = 0
    mean = float(env.theta @ env.contexts[0][arm])
    r = _kernel_rewards(env, arm, N, seed=12)
    assert r.min() >= 0.0 and r.max() <= 1.0
    for count, p in ((np.sum(r == 0.0), stats.norm.cdf(-mean)),
                     (np.sum(r == 1.0), stats.norm.sf(1.0 - mean))):
        assert abs(count - N * p) < 4.5 * math.sqrt(N * p * (1 - p))


def test_phased_elimination_draws_the_same_law():
    env = CE.linear_fixed(3, 4, seed=3, lo=-60.0, hi=60.0, noise_sd=0.5)
    means = env.contexts[0] @ env.theta
    r = PhasedElimination._rewards(np.random.default_rng(13), env, means, 1, 0, N)
    assert stats.kstest(r, "norm", args=(means[1], 0.5)).pvalue > 1e-3


def test_bernoulli_stays_the_default():
    env = CE.linear_fixed(3, 4, seed=3)
    assert env.noise_sd == 0.0 and "noise_sd" not in env.to_json()
    r = _kernel_rewards(env, 1, 200, seed=1)
    assert set(np.unique(r)) <= {0.0, 1.0}


@pytest.mark.parametrize("sd", [0.0, -1.0, math.nan, math.inf])
def test_bad_sigma_refused(sd):
    with pytest.raises(DpledgerError, match="noise σ"):
        CE.linear(3, 4, noise_sd=sd)


def test_noise_recorded_in_run_json_and_resimulated(tmp_path, capsys):
    base = ["run", "linucb", "--env", "linear-fixed", "--dim", "3", "--arms", "4",
            "--horizon", "200", "--runs", "1", "--seed", "5", "--quiet"]
    plain, noisy = tmp_path / "p.json", tmp_path / "g.json"
    assert main(base + ["--out", str(plain)]) == 0
    assert main(base + ["--noise-sd", "1", "--range=-3,4", "--out", str(noisy)]) == 0
    env = json.loads(noisy.read_text())["environment"]
    assert env["noise"] == "gaussian" and env["noise_sd"] == 1.0 and env["range"] == [-3.0, 4.0]
    assert "N(0, 1)" in env["reward_law"] and "clipped" in env["reward_law"]
    assert "noise_sd" not in json.loads(plain.read_text())["environment"]
    capsys.readouterr()
    assert main(["verify", str(noisy), "--resimulate"]) == 0
    # the experiments' figures and claims measure such a run against Theorem 5 (ε = ∞ program)
    from dpledger.plots import regret_over_bounds
    from dpledger.policies.regret_bounds import azize_basu_2022_linear_problem_dependent
    rep = json.loads(noisy.read_text())
    [(bound, value, ratio)] = regret_over_bounds(rep)
    assert bound.key == "azize-basu-2022/thm5"
    assert value == azize_basu_2022_linear_problem_dependent(env["arm_set"], env["theta"],
                                                             200).value
    assert ratio == pytest.approx(rep["regret"]["final_mean"] / value)
    assert regret_over_bounds(json.loads(plain.read_text())) == []     # Bernoulli: not its noise


@pytest.mark.parametrize("extra, says", [
    (["--noise-sd", "0"], "--noise-sd must be > 0"),
    (["--noise-sd", "nan"], "--noise-sd"),
    (["--noise-sd", "1", "--range=0.2,1"], "must contain [0, 1]"),
    (["--env", "supervised", "--noise-sd", "1"], "--noise-sd describes --env linear"),
])
def test_bad_noise_options_one_line_exit_2(extra, says, capsys):
    argv = ["run", "linucb", "--env", "linear-fixed", "--horizon", "50", "--quiet"] + extra
    if "supervised" in extra:
        argv = ["run", "linucb", "--horizon", "50", "--quiet"] + extra
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
