"""Certificates, theorems and realized ledgers of the policies; noise draws against ledger rows."""
from __future__ import annotations

import numpy as np
import pytest

from dpledger.accounting.accountants import ACCOUNTANTS_WITH_BEST
from dpledger.policies.environments import bernoulli, beta
from dpledger.policies.hu_hegde import DPTS
from dpledger.policies.simulator import simulate

from policy_helpers import MINE, NONPRIVATE, PRIVATE, CountingRng, policy, reference_run, tree_psums

BEST = ACCOUNTANTS_WITH_BEST["best"]
DELTA = 1e-6
TOL = 1 + 1e-12


def _cert_values(cert):
    pure = max(c.pure_epsilon() for c in cert.compositions)
    at_delta = max(BEST.epsilon(c, DELTA, cert.adaptive) for c in cert.compositions)
    return pure, at_delta


@pytest.mark.parametrize("name", ["lazy-dp-ts", "adap-ucb", "adap-klucb", "dp-se",
                                  "anytime-lazy-ucb"])
@pytest.mark.parametrize("eps", [0.1, 1.0, 7.0])
def test_one_laplace_release_of_epsilon(name, eps):
    pol = policy(name, epsilon=eps)
    cert = pol.certificate(10 ** 5, 3)
    assert len(cert.candidates) == 1 and not cert.unbounded
    comp = cert.compositions[0]
    assert comp.total_count == 1
    assert comp.pure_epsilon() == pytest.approx(eps, rel=1e-14)
    assert pol.theorem(10 ** 5, 3).pure_epsilon == eps


@pytest.mark.parametrize("T,K", [(2, 2), (10, 2), (1000, 5), (10 ** 6, 3)])
def test_dp_ts_certificate_each_part_half_epsilon(T, K):
    eps = 0.8
    pol = policy("dp-ts", epsilon=eps)
    cert = pol.certificate(T, K)
    M = DPTS.max_depth(T, K)
    assert len(cert.candidates) == M + 1
    for m, comp in enumerate(cert.compositions):
        log_part = [(r, c) for r, c in comp.items if r.scale == 2.0 / eps]
        # Lap(2/ε) once (m = 1: the single p-sum is also Lap(2/ε), so the two merge)
        assert sum(c for _, c in log_part) == (2 if m == 1 else 1)
        assert comp.pure_epsilon() <= eps * TOL
        if m == 0:
            assert comp.pure_epsilon() == pytest.approx(eps / 2)
        else:
            assert comp.total_count == m + 1
            # one log-mechanism block (ε/2) and m p-sums of ε/(2m): ε/2 from each part
            binary = sum(c * r.epsilon for r, c in comp.items) - eps / 2
            assert binary == pytest.approx(eps / 2, rel=1e-12)
            assert all(r.scale in (2.0 / eps, 2.0 * m / eps) for r, _ in comp.items)
    assert pol.theorem(T, K).pure_epsilon == eps


@pytest.mark.parametrize("name", NONPRIVATE)
def test_nonprivate_unbounded(name):
    pol = policy(name)
    assert pol.certificate(100, 2).unbounded
    assert pol.theorem(100, 2).unbounded
    res = simulate(pol, bernoulli([0.9, 0.4]), 200, seed=1, runs=2)
    assert res.ledger.worst_reward().key == np.inf


@pytest.mark.parametrize("name", PRIVATE)
@pytest.mark.parametrize("env", ["bern", "beta"])
def test_realized_le_certificate_le_theorem(name, env):
    e = bernoulli([0.9, 0.4, 0.5]) if env == "bern" else beta([[4, 1], [1, 3], [2, 2]])
    T = 30000 if name == "dp-se" else 3000
    for eps in (0.5, 2.0):
        pol = policy(name, epsilon=eps)
        res = simulate(pol, e, T, seed=5, runs=4)
        cert = pol.certificate(T, e.n_arms)
        thm = pol.theorem(T, e.n_arms)
        c_pure, c_delta = _cert_values(cert)
        assert c_pure <= thm.pure_epsilon * TOL
        assert c_delta <= thm.epsilon_at_delta(DELTA) * TOL
        worst = res.ledger.worst_reward(deltas=(DELTA,), adaptive=pol.adaptive)
        assert worst is not None and worst.key <= c_pure * TOL
        n_checked = 0
        for comp, count in res.ledger.distinct_compositions():
            if comp.is_empty():
                continue
            n_checked += count
            assert comp.pure_epsilon() <= c_pure * TOL
            assert BEST.epsilon(comp, DELTA, pol.adaptive) <= c_delta * TOL
        assert n_checked > 0
        # the worst reward's own composition, recomputed from the rows that touch it
        w = worst.reward
        assert res.ledger.composition_of(w.run, w.arm, w.index).pure_epsilon() == \
            pytest.approx(worst.key)


def test_dp_ts_realized_reaches_a_binary_candidate():
    pol = policy("dp-ts", epsilon=1.0)
    res = simulate(pol, bernoulli([0.9, 0.4]), 4000, seed=2, runs=2)
    comps = [c for c, _ in res.ledger.distinct_compositions() if not c.is_empty()]
    cert = pol.certificate(4000, 2).compositions
    deepest = max(c.total_count for c in comps)
    assert deepest >= 5          # the played arm's later buffers are deep
    for c in comps:
        assert c.pure_epsilon() <= 1.0 * TOL
        # every realized composition is dominated by the candidate of its depth
        m = c.total_count - 1
        assert any(c.pure_epsilon() <= k.pure_epsilon() * TOL and k.total_count >= c.total_count
                   for k in cert), (m, c)


@pytest.mark.parametrize("name", MINE)
def test_noise_draws_equal_ledger_releases(name):
    env = bernoulli([0.9, 0.4, 0.6])
    T = 20000 if name == "dp-se" else 700
    pol = policy(name)
    for seed in range(2):
        rng = CountingRng(np.random.default_rng(seed))
        out = reference_run(pol, rng, env, T)
        releases = 0 if not pol.private else int(out.rows[4].sum()) + tree_psums(out.trees)
        assert rng.laplace_calls + rng.normal_calls == releases == out.noise_draws
        if name == "dp-ts":
            # every observation enters exactly one release: a log block end or a p-sum
            assert releases == T
    if pol.private:
        assert releases > 0
