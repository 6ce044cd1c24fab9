"""Fast paths against the per-round rules; compiled kernels against their py_func; regret sanity.

Statistical tests (each states its error rate; all runs are seeded, so each test is deterministic
and its α is the chance that a correct implementation would have been rejected for these seeds):

* fast vs per-round on Bernoulli arms (the Binomial stretch draw changes the random stream):
  final regret of R runs each, two-sided Mann–Whitney U and Welch t tests, reject at α = 1e-3.
* regret growth: D_i = regret_i(10T) − 5·regret_i(T), one-sided t test of mean D < 0, α = 1e-3.
* monotonicity in ε: mean regret at ε_{k+1} ≤ mean at ε_k + 4·√(se_k² + se_{k+1}²) (a one-sided
  z-test at α ≈ 3e-5 under normal means; se = std/√R).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpledger.policies.environments import bernoulli, table
from dpledger.policies.simulator import run_generator, simulate

from planted import noiseless
from policy_helpers import FAST, FULL, MINE, PRIVATE, policy, reference_run

ALPHA = 1e-3


# ---- same random stream: identical actions ------------------------------------------------

@pytest.mark.parametrize("name", FAST)
def test_fast_path_equals_per_round_on_tables(name):
    rng = np.random.default_rng(17)
    T = 30000 if name == "dp-se" else 5000
    for i in range(6):
        lo = rng.random(3) * 0.5
        tab = lo + rng.random((T, 3)) * 0.5
        env = table(tab).as_tuple()
        a = policy(name, fast=True, epsilon=[0.3, 1.0, 5.0][i % 3]).run_one(run_generator(3, i), env, T)
        b = policy(name, fast=False, epsilon=[0.3, 1.0, 5.0][i % 3]).run_one(run_generator(3, i), env, T)
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.rows, b.rows)
        assert a.noise_draws == b.noise_draws


@pytest.mark.parametrize("name", FAST)
def test_fast_path_stop_at_is_a_prefix(name):
    env = table(np.random.default_rng(2).random((20000, 2))).as_tuple()
    full = policy(name).run_one(run_generator(1, 0), env, 20000)
    part = policy(name).run_one(run_generator(1, 0), env, 20000, stop_at=7777)
    np.testing.assert_array_equal(part.actions, full.actions[:7777])


@pytest.mark.parametrize("name", MINE)
def test_compiled_kernel_equals_reference(name):
    env = bernoulli([0.7, 0.5, 0.45])
    T = 12000 if name == "dp-se" else 1500
    for i in range(2):
        a = policy(name).run_one(run_generator(9, i), env.as_tuple(), T)
        b = reference_run(policy(name), run_generator(9, i), env, T)
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.rows, b.rows)
        if name in FAST:
            c = reference_run(policy(name, fast=False), run_generator(9, i), env, T)
            d = policy(name, fast=False).run_one(run_generator(9, i), env.as_tuple(), T)
            np.testing.assert_array_equal(c.actions, d.actions)


# ---- different random stream: same distribution --------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", FAST)
def test_fast_path_distribution_on_bernoulli(name):
    runs = 200
    T = 30000 if name == "dp-se" else 10000
    env = bernoulli([0.7, 0.6, 0.4])
    fast = simulate(policy(name, fast=True), env, T, seed=101, runs=runs).regret[:, -1]
    slow = simulate(policy(name, fast=False), env, T, seed=202, runs=runs).regret[:, -1]
    if np.ptp(np.concatenate([fast, slow])) == 0:
        return                                  # identical constant regret (a staircase)
    assert stats.mannwhitneyu(fast, slow).pvalue > ALPHA
    assert stats.ttest_ind(fast, slow, equal_var=False).pvalue > ALPHA


# ---- regret sanity -------------------------------------------------------------------------

def _final(name, T, seed, runs=20, quiet=False, **params):
    pol = noiseless(name, **params) if quiet else policy(name, **params)
    return simulate(pol, bernoulli([0.9, 0.4]), T, seed=seed, runs=runs).regret[:, -1]


@pytest.mark.slow
@pytest.mark.parametrize("name", MINE)
def test_regret_grows_sublinearly(name):
    T = 10 ** 4
    r1 = _final(name, T, seed=31)
    r10 = _final(name, 10 * T, seed=32)
    d = r10 - 5 * r1
    if np.ptp(d) == 0:
        assert d[0] < 0
        return
    assert stats.ttest_1samp(d, 0.0, alternative="less").pvalue < ALPHA
    assert r10.mean() / r1.mean() < 5


@pytest.mark.slow
@pytest.mark.parametrize("name", PRIVATE)
def test_regret_non_increasing_in_epsilon_and_noise_off_limit(name):
    T = 30000 if name == "dp-se" else 10 ** 4
    runs = 40 if FULL else 20
    means, ses = [], []
    for eps in (0.1, 1.0, 10.0, 1e3):
        r = _final(name, T, seed=41, runs=runs, epsilon=eps)
        means.append(r.mean())
        ses.append(r.std(ddof=1) / np.sqrt(runs))
    for k in range(3):
        tol = 4 * np.hypot(ses[k], ses[k + 1])
        assert means[k + 1] <= means[k] + tol, (means, ses)
    on = _final(name, T, seed=43, runs=runs, epsilon=1e6)
    off = _final(name, T, seed=43, runs=runs, epsilon=1e6, quiet=True)   # tests/planted.py
    tol = 4 * np.hypot(on.std(ddof=1), off.std(ddof=1)) / np.sqrt(runs) + 1e-9
    assert abs(on.mean() - off.mean()) <= tol, (on.mean(), off.mean())
