"""KL-UCB's leader bound (issue 17 §6) keeps today's actions: the same seed gives the same action
sequence as the threshold-test kernel (``ThresholdOnlyKLUCB``, the kernel before issue 17) and as the
solve-every-index reference (threshold_test=False), on Bernoulli instances with near-ties, equal
means, means 0 and 1, and on continuous reward tables."""
from __future__ import annotations

import numpy as np
import pytest

from dpledger.policies.baselines import KLUCB
from dpledger.policies.environments import bernoulli, table
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator

class ThresholdOnlyKLUCB(KLUCB):
    """Test-only: the KL-UCB kernel as it was before issue 17 (threshold test, no leader bound)."""

    def kernel_params(self, T, K):
        return np.array([1.0, 0.0])


INSTANCES = [[0.75, 0.625, 0.5, 0.375, 0.25], [0.75, 0.7, 0.7, 0.7, 0.7], [0.5, 0.5, 0.5],
             [0.9, 0.9001, 0.2], [1.0, 0.99, 0.5], [0.0, 0.0, 0.01], [1.0, 1.0]]


@pytest.mark.parametrize("means", INSTANCES)
def test_leader_bound_same_actions_bernoulli(means):
    env = bernoulli(means).as_tuple()
    T = 40_000
    for i in range(4):
        a = make_policy("klucb").run_one(run_generator(31, i), env, T)
        b = ThresholdOnlyKLUCB().run_one(run_generator(31, i), env, T)
        np.testing.assert_array_equal(a.actions, b.actions)
        if i == 0 and len(means) > 1:
            c = make_policy("klucb", threshold_test=False).run_one(run_generator(31, i), env,
                                                                 T // 4)
            np.testing.assert_array_equal(a.actions[:T // 4], c.actions)


def test_leader_bound_same_actions_tables():
    gen = np.random.default_rng(4)
    for i in range(6):
        K = 2 + i % 4
        tab = gen.random((20_000, K)) * gen.uniform(0.3, 1.0, K)
        if i % 2:
            tab = np.round(tab * 4) / 4          # few distinct values: ties of empirical means
        env = table(tab).as_tuple()
        a = make_policy("klucb").run_one(run_generator(7, i), env, 20_000)
        b = ThresholdOnlyKLUCB().run_one(run_generator(7, i), env, 20_000)
        np.testing.assert_array_equal(a.actions, b.actions)
