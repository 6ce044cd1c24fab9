"""The largest of independent Beta samples drawn one at a time (dpledger.policies.beta_max,
``posterior_draw="max"``): its tail function against scipy, its conditioned draw against the
exact conditional law, and its (arm, sample) against the plain sampler's — statistical tests
with stated error rates (each test at level 1e-3 under the hypothesis that the laws are equal;
seeded, so a given seed passes or fails every time)."""
from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from scipy import stats
from scipy.special import betaincc, betainccinv

from dpledger.policies import baselines
from dpledger.policies.beta_max import (_invert_tail, beta_above, beta_max_select,
                                       beta_tail_may_exceed, beta_upper_tail)
from dpledger.policies.environments import bernoulli
from dpledger.policies.registry import make_policy

LEVEL = 1e-3


def test_upper_tail_against_scipy():
    """P(Beta(a, b) > x) within 1e-8 (relative below 1/2, absolute above) of
    scipy.special.betaincc over a, b in [1, 1e7] (log-uniform; one of them below 60, or below
    1000, in a third of the cases each) and x from 3 standard deviations below the mean to 12 above."""
    rng = np.random.default_rng(11)
    worst = 0.0
    for lo, hi in ((0.0, np.log(1e7)), (0.0, np.log(60.0)), (np.log(40.0), np.log(1e3))):
        for _ in range(400):
            a = float(np.exp(rng.uniform(lo, hi)))
            b = float(np.exp(rng.uniform(0.0, np.log(1e7))))
            if rng.random() < 0.5:
                a, b = b, a
            mu = a / (a + b)
            sd = np.sqrt(mu * (1 - mu) / (a + b + 1))
            x = float(np.clip(mu + rng.uniform(-3, 12) * sd, 1e-12, 1 - 1e-12))
            ref = float(betaincc(a, b, x))
            got = beta_upper_tail(a, b, x)
            if ref > 1e-290:
                worst = max(worst, abs(got - ref) / ref if ref < 0.5 else abs(got - ref))
    assert worst < 1e-8, worst
    assert beta_upper_tail(2.0, 3.0, 0.0) == 1.0 and beta_upper_tail(2.0, 3.0, 1.0) == 0.0
    # closed forms: Beta(1, b) has tail (1 − x)^b, Beta(a, 1) tail 1 − x^a (computed so)
    assert beta_upper_tail(1.0, 7.5, 0.3) == pytest.approx(0.7 ** 7.5, rel=1e-13)
    for a, x in ((3.0, 0.4), (2.5e4, 0.99995), (1e7, 1 - 1e-9)):
        assert beta_upper_tail(a, 1.0, x) == pytest.approx(float(betaincc(a, 1.0, x)), rel=1e-12)


def _random_points(rng, n):
    """(a, b, x) with a, b log-uniform in [1, 1e7] (b below 60 in a third of the cases) and x
    from 2 standard deviations below the mean to 10 above."""
    for i in range(n):
        a = float(np.exp(rng.uniform(0.0, np.log(1e7))))
        b = float(np.exp(rng.uniform(0.0, np.log(60.0 if i % 3 == 0 else 1e7))))
        mu = a / (a + b)
        sd = np.sqrt(mu * (1 - mu) / (a + b + 1))
        yield a, b, float(np.clip(mu + rng.uniform(-2, 10) * sd, 1e-12, 1 - 1e-12))


def test_log_concave_bound_is_an_upper_bound():
    """beta_tail_may_exceed(u, a, b, x) is False only when u ≥ P(Beta(a, b) > x) (scipy's
    betaincc), for u just above the tail and at random, and it does decide somewhere (u well
    above a tail far out): the bound only skips work, never a beat."""
    rng = np.random.default_rng(12)
    decided = 0
    for a, b, x in _random_points(rng, 3000):
        p = float(betaincc(a, b, x))
        for u in (p * (1 - 1e-6), rng.random(), min(1.0, 3 * p)):
            if not beta_tail_may_exceed(u, a, b, x):
                decided += 1
                assert u >= p, (a, b, x, u, p)
    assert decided > 1000
    assert beta_tail_may_exceed(0.0, 0.5, 3.0, 0.5)      # not log-concave: never decides


def test_tail_inversion_against_scipy():
    """_invert_tail(a, b, x, q) (the conditioned draw's inversion) is the y with tail(y) = q:
    q within 1e-8 relative of scipy's betaincc at y ± 4 ulps (the accuracy asked of the tail in
    test_upper_tail_against_scipy; the ulps for y near 1, where a double resolves 1 − y
    coarsely), and y within 1e-6 relative of betainccinv where that is
    well conditioned (q above 1e-100)."""
    rng = np.random.default_rng(13)
    for a, b, x in _random_points(rng, 1500):
        if b == 1.0:
            continue
        p = float(betaincc(a, b, x))
        if not 1e-250 < p < 0.25:
            continue
        q = p * rng.random()
        y = _invert_tail(a, b, x, q)
        assert x < y < 1.0
        near = (y + 4 * np.spacing(y), y - 4 * np.spacing(y))   # y is a double: its 4 ulps
        assert (float(betaincc(a, b, near[0])) * (1 - 1e-8) <= q
                <= float(betaincc(a, b, near[1])) * (1 + 1e-8)), (a, b, x, q, y)
        if q > 1e-100:
            assert y == pytest.approx(float(betainccinv(a, b, q)), rel=1e-6)


@njit
def _above_many(rng, a, b, x, n):
    out = np.empty(n)
    for i in range(n):
        out[i] = beta_above(rng, a, b, x)
    return out


@pytest.mark.parametrize("a,b,x", [(3.0, 5.0, 0.2), (3.0, 5.0, 0.8), (620.0, 380.0, 0.70),
                                   (1.0, 30000.0, 0.002), (250.0, 750.0, 0.45),
                                   (4000.0, 1.0, 0.9997)])
def test_conditioned_draw_has_the_conditional_law(a, b, x):
    """beta_above(a, b, x) against P(θ ≤ y | θ > x) = 1 − tail(y)/tail(x) (scipy's betaincc):
    one-sample Kolmogorov–Smirnov, level 1e-3; the tails here go down to ~1e-11."""
    s = _above_many(np.random.default_rng(5), a, b, x, 4000)
    assert np.all(s > x) and np.all(s < 1.0)
    px = betaincc(a, b, x)
    res = stats.kstest(s, lambda y: 1.0 - betaincc(a, b, y) / px)
    assert res.pvalue > LEVEL, (a, b, x, res)


@njit
def _both(rng, al, be, n, use_max):
    K = al.size
    arms = np.empty(n, np.int64)
    vals = np.empty(n)
    theta = np.zeros(K)
    for i in range(n):
        if use_max:
            theta[:] = -1.0
            a = beta_max_select(rng, al, be, theta)
        else:
            for j in range(K):
                theta[j] = rng.beta(al[j], be[j])
            a = np.argmax(theta)
        arms[i] = a
        vals[i] = theta[a]
    return arms, vals


CONFIGS = {
    # small parameters: arms beat the leader often (exact tails and conditioned draws every round)
    "small": ([3.0, 5.0, 2.0, 4.0, 1.0], [4.0, 3.0, 2.0, 5.0, 1.0]),
    # a run's late state: a sharp leader, a close second, far arms (the bound decides nearly
    # always; the second beats in a few percent of rounds)
    "late": ([75001.0, 6201.0, 251.0, 38.0, 26.0], [25001.0, 3801.0, 251.0, 63.0, 76.0]),
    # leader by mean with a wide second (beats from below the mean, m ≤ μ paths)
    "wide": ([80.0, 2.0, 30.0], [20.0, 1.0, 30.0]),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_max_draw_has_the_plain_law(name):
    """(arm, its sample) from beta_max_select against argmax/max of K independent numpy Beta
    samples, 30 000 rounds each (independent seeds): the arms by a χ² test of homogeneity, the
    played arm's sample by a two-sample Kolmogorov–Smirnov test, each at level 1e-3 (six tests:
    at most 0.6 % false alarms over seeds)."""
    al, be = (np.array(v) for v in CONFIGS[name])
    n = 30_000
    arms_m, vals_m = _both(np.random.default_rng(1), al, be, n, True)
    arms_p, vals_p = _both(np.random.default_rng(2), al, be, n, False)
    same_round_law(arms_m, vals_m, arms_p, vals_p, al.size)


def same_round_law(arms_a, vals_a, arms_b, vals_b, K):
    """Two samplers' rounds: the arms by a χ² test of homogeneity (when more than one arm is
    played), the played arm's samples by a two-sample KS test, each at level ``LEVEL``; the
    number of arms played."""
    table = np.array([np.bincount(arms_a, minlength=K), np.bincount(arms_b, minlength=K)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] > 1:
        assert stats.chi2_contingency(table).pvalue > LEVEL, table
    assert stats.ks_2samp(vals_a, vals_b).pvalue > LEVEL
    return table.shape[1]


@pytest.mark.parametrize("name", ["ts-beta", "lazy-dp-ts", "dp-ts"])
def test_whole_runs_have_the_plain_law(name):
    """The policy's kernel with posterior_draw="max" and with "all" (the default): 3000 runs of
    T = 40 on three Bernoulli arms each; the pull counts of each arm at the end, χ² test of
    homogeneity over the values taken (rare values pooled), level 1e-3 each (three tests per
    policy: at most 0.3 % false alarms).  Each round's law given the past is the same, hence the
    law of the whole play."""
    same_run_law(name, "max", 40, 3000)


def same_run_law(name, draw, T, runs, seed_tag=()):
    """``runs`` kernel runs of T on three Bernoulli arms with ``posterior_draw`` "all" and
    ``draw``: each arm's pull count at the end, χ² homogeneity over the values taken (rare
    values pooled), level ``LEVEL`` per arm."""
    env = bernoulli([0.6, 0.5, 0.3]).as_tuple()
    K = 3
    out = {}
    for d in ("all", draw):
        pol = make_policy(name, posterior_draw=d)
        params = pol.kernel_params(T, K)
        counts = np.zeros((runs, K), np.int64)
        for r in range(runs):
            rng = np.random.default_rng([int(d != "all"), r, *seed_tag])
            actions = np.zeros(T, np.int64)
            rows = np.zeros((5, pol.row_capacity(T, K)), np.int64)
            type(pol).kernel(rng, env, T, K, T, params, actions, rows, np.zeros((2, 0)))
            counts[r] = np.bincount(actions, minlength=K)
        out[d] = counts
    for j in range(K):
        a, b = out["all"][:, j], out[draw][:, j]
        vals = np.union1d(a, b)
        table = np.array([[np.sum(a == v) for v in vals], [np.sum(b == v) for v in vals]])
        keep = table.sum(axis=0) >= 10          # χ² needs counts: pool the rare values
        table = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)])
        table = table[:, table.sum(axis=0) > 0]
        assert stats.chi2_contingency(table).pvalue > LEVEL, (name, draw, T, j, table)


def test_posterior_draw_is_recorded_and_changes_the_draws():
    """posterior_draw is recorded in run.json only when it is "max" (earlier runs keep their
    bytes and are rebuilt at "all", the rule they played); the two draw differently."""
    for name in ("ts-beta", "lazy-dp-ts", "dp-ts"):
        assert "posterior_draw" not in make_policy(name).public_params()
        assert make_policy(name, posterior_draw="max").public_params()["posterior_draw"] == "max"
    env = bernoulli([0.6, 0.5, 0.3]).as_tuple()
    acts = []
    for flag in (0.0, 1.0):
        actions = np.zeros(200, np.int64)
        baselines._beta_ts(np.random.default_rng(0), env, 200, 3, 200, np.array([flag]),
                           actions, np.zeros((5, 1), np.int64), np.zeros((2, 0)))
        acts.append(actions)
    assert not np.array_equal(acts[0], acts[1])


def _lazy_states(rng, n):
    """Random Lazy-DP-TS states: private means inside and outside [0, 1] (clipped shapes), epoch
    sizes from 1 to 1e6, early and late rounds and ε of 0.1, 1, 5, and ties (equal arms, copied
    arms); each with the first round t0 of a block holding the round t (t0 = t one time in
    four: the step form's block of one round)."""
    for i in range(n):
        K = int(rng.integers(2, 9))
        O = 2.0 ** rng.integers(0, 21, K)
        mu = rng.uniform(-1.5, 2.5, K)
        if i % 4 == 1:                               # every arm the same
            O[:], mu[:] = O[0], mu[0]
        elif i % 4 == 2:                             # two copies of the best-looking arm
            j, k = rng.choice(K, 2, replace=False)
            O[k], mu[k] = O[j], mu[j]
        elif i % 4 == 3:                             # near-ties: means 1e-9 apart
            mu = 0.5 + 1e-9 * rng.integers(0, 3, K)
        t0 = int(rng.integers(K + 1, 10**7)) if i % 3 else int(rng.integers(K + 1, 200))
        t = t0 if i % 4 == 0 else int(rng.integers(t0, t0 + (t0 >> 6) + 1))
        eps = float(rng.choice([0.1, 1.0, 5.0]))
        yield eps, t0, t, mu, O


def _lazy_block(eps, t0, t, mu_t, O):
    """bnd and the block leader for the block of t0 (t0 = t: the step form's, from t's shift)."""
    from dpledger.policies.hu_hegde import lazy_block_shifts
    if t0 == t:
        s_lo = s_up = 3.0 * np.log2(t) / eps
    else:
        t1, s_lo, s_up = lazy_block_shifts(eps, t0)
        assert t0 <= t <= t1 == t0 + t0 // 64
    return _shifted_block(s_lo, s_up, mu_t, O, np.ones(O.size))


def _shifted_block(f_lo, f_up, mu_t, O, rate):
    from dpledger.policies.hu_hegde import (SHIFTED_BOUND_ROWS, shifted_arm_block,
                                            shifted_arm_bounds, shifted_block_leader)
    K = O.size
    bnd = np.empty((SHIFTED_BOUND_ROWS, K))
    for j in range(K):
        shifted_arm_bounds(j, mu_t, O, rate[j], bnd)
        shifted_arm_block(j, f_lo, f_up, bnd)
    return bnd, shifted_block_leader(bnd)


def _same_round(n, tag, al, be, mu, w, bnd, lead, posterior):
    """beta_max_round on the exact shapes against shifted_max_round on ``posterior`` = (f, g,
    μ̃, O, d) and the block's ``bnd``, ``lead``, from the same Generator state: the same arm,
    samples and state after; every exact mean inside its block interval; the block leader, if
    any, the unique first arm of largest mean.  1 if there was a block leader."""
    from dpledger.policies.beta_max import beta_max_round
    from dpledger.policies.beta_max import MAX_REJECT
    from dpledger.policies.hu_hegde import shifted_max_round
    K = al.size
    r1, r2 = np.random.default_rng([n, tag]), np.random.default_rng([n, tag])
    th1, th2 = np.full(K, -1.0), np.full(K, -1.0)
    a1 = beta_max_round(r1, al, be, mu, w, th1, MAX_REJECT)
    a2 = shifted_max_round(r2, *posterior, bnd, lead, th2, MAX_REJECT)
    assert a1 == a2 and np.array_equal(th1, th2), (n, al, be)
    assert r1.random() == r2.random()
    lo, up = bnd[5], bnd[6]
    assert np.all(lo <= mu) and np.all(mu <= up), (n, lo - mu, up - mu)
    if lead < 0:
        return 0
    assert lead == int(np.argmax(mu)) and np.sum(mu == mu[lead]) == 1, (n, lead, mu)
    return 1


def test_lazy_round_is_the_max_round_on_its_shapes():
    """shifted_max_round (shapes computed only where the block's bounds cannot decide) against
    beta_max_round on every arm's lazy_shape at round t, from the same Generator state: the same
    arm, the same samples and the same Generator state after, on 3000 random states and blocks
    holding t; each arm's exact mean inside its block interval [lo, up]; and the block leader,
    when there is one, the first arm of largest exact mean."""
    from dpledger.policies.beta_max import beta_arm_stats
    from dpledger.policies.hu_hegde import lazy_shape
    states = np.random.default_rng(7)
    n_lead = 0
    for n, (eps, t0, t, mu_t, O) in enumerate(_lazy_states(states, 3000)):
        K = O.size
        shift = 3.0 * np.log2(t) / eps
        al, be, mu, w = np.empty(K), np.empty(K), np.empty(K), np.empty(K)
        for j in range(K):
            al[j], be[j] = lazy_shape(shift, mu_t[j], O[j])
            beta_arm_stats(j, al, be, mu, w)
        bnd, lead = _lazy_block(eps, t0, t, mu_t, O)
        n_lead += _same_round(n, 1, al, be, mu, w, bnd, lead, (shift, np.ones(K), mu_t, O, O))
    assert n_lead > 300            # the fixed-leader path is exercised, not only the search


def test_dp_ts_round_is_the_max_round_on_its_shapes():
    """The same for DP-TS's posteriors (dp_ts_shape: υ from dp_ts_shift_parts and log2 t) with
    blocks of log2 t (dp_ts_block_logs): shifted_max_round against beta_max_round on every arm's
    exact shape at round t — same arm, samples and Generator state — on 3000 random states, each
    exact mean inside its interval, the block leader the first arm of largest mean."""
    from dpledger.policies.beta_max import beta_arm_stats
    from dpledger.policies.hu_hegde import dp_ts_block_logs, dp_ts_shape, dp_ts_shift_parts
    states = np.random.default_rng(11)
    n_lead = 0
    for n, (eps, t0, t, mu_t, O) in enumerate(_lazy_states(states, 3000)):
        K = O.size
        al, be, mu, w = np.empty(K), np.empty(K), np.empty(K), np.empty(K)
        c_o, d_o = np.empty(K), np.empty(K)
        for j in range(K):
            al[j], be[j] = dp_ts_shape(eps, t, mu_t[j], O[j])
            beta_arm_stats(j, al, be, mu, w)
            c_o[j], d_o[j] = dp_ts_shift_parts(eps, O[j])
        if t0 == t:
            f_lo = f_up = np.log2(t)
        else:
            t1, f_lo, f_up = dp_ts_block_logs(t0)
            assert t0 <= t <= t1
        bnd, lead = _shifted_block(f_lo, f_up, mu_t, O, c_o / eps)
        n_lead += _same_round(n, 2, al, be, mu, w, bnd, lead, (np.log2(t), c_o, mu_t, O, d_o))
    assert n_lead > 300
