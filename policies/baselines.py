"""Non-private baselines (algorithms.md A14): UCB1.

Their ledgers record every reward as read without noise (``NonPrivateRelease``): the privacy of a
non-private policy is reported as unbounded, and the ledger still says which rewards it exposed.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Certificate
from dpledger.accounting.releases import NonPrivateRelease
from dpledger.policies.base import KernelPolicy, RunOutput
from dpledger.policies.environments import draw_reward
from dpledger.policies.rules import argmax_random_tie


class NonPrivatePolicy(KernelPolicy):
    private = False
    provenance = "baseline"

    def releases(self, T, K):
        return [NonPrivateRelease()]

    def certificate(self, T, K):
        return Certificate.unbounded_because(f"{self.name} reads rewards without noise")

    def theorem(self, T, K):
        return theorems.non_private(self.name)

    def finish(self, out: RunOutput, T: int, K: int) -> RunOutput:
        """Every observed reward is read, un-noised, by the index of every later round."""
        counts = np.bincount(out.actions, minlength=K)
        arms = np.flatnonzero(counts)
        out.rows = np.vstack([arms, np.zeros_like(arms), counts[arms], np.zeros_like(arms),
                              np.ones_like(arms)]).astype(np.int64)
        return out


@njit(cache=True)
def _ucb1(rng, env, T, K, stop, params, actions, rows, capture):
    """UCB1 (Auer et al. 2002): pull each arm once, then argmax μ̂ + √(2 ln t / n)."""
    sums = np.zeros(K)
    n = np.zeros(K)
    index = np.zeros(K)
    for t in range(1, stop + 1):
        if t <= K:
            a = t - 1
        else:
            lt = 2.0 * np.log(t)
            for j in range(K):
                index[j] = sums[j] / n[j] + np.sqrt(lt / n[j])
            a = argmax_random_tie(index, rng)
        x = draw_reward(rng, env, a, t - 1)
        sums[a] += x
        n[a] += 1.0
        actions[t - 1] = a
    return stop, 0, 0


class UCB1(NonPrivatePolicy):
    name = "ucb1"
    title = "UCB1 (Auer, Cesa-Bianchi, Fischer 2002)"
    kernel = _ucb1
