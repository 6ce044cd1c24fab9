"""Hu & Hegde 2022 (UAI): Lazy-DP-TS (Algorithm 2).  Logarithms are base 2 (algorithms.md A1).

Lazy-DP-TS keeps, per arm, a buffer of fresh rewards; when it holds 2^{r+1} rewards the arm's
private mean becomes (Σ buffer + Lap(1/ε)) / 2^{r+1} and the buffer is emptied (B §4.2).  Each
reward enters exactly one released sum of sensitivity 1 — the certificate is one Laplace
release of ε — and the Beta sampling is post-processing (Theorem 3).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.policies.base import KernelPolicy, Param
from dpledger.policies.environments import draw_reward
from dpledger.policies.noise import laplace_noise
from dpledger.policies.rules import argmax_random_tie, clip01

EPSILON = Param("epsilon", 1.0, "positive", "privacy budget ε")


@njit(cache=True)
def _lazy_dp_ts(rng, env, T, K, stop, params, actions, rows, capture):
    eps = params[0]
    scale = 1.0 / eps
    mu_tilde = np.zeros(K)
    O = np.zeros(K)             # size of the last released epoch
    r = np.zeros(K, np.int64)
    buf_sum = np.zeros(K)
    buf_len = np.zeros(K, np.int64)
    n_obs = np.zeros(K, np.int64)
    theta = np.zeros(K)
    n_rows = 0
    for t in range(1, stop + 1):
        if t <= K:
            a = t - 1
            x = draw_reward(rng, env, a, t - 1)
            noise = laplace_noise(rng, scale, rows, n_rows, a, 0, 1, 0)
            n_rows += 1
            if capture.shape[1] > 0 and a == 0:
                capture[0, 0] = x + noise
                capture[1, 0] = x
            mu_tilde[a] = x + noise
            O[a] = 1.0
            n_obs[a] = 1
        else:
            shift = 3.0 * np.log2(t) / eps
            for j in range(K):
                m = clip01(mu_tilde[j] + shift / O[j])
                theta[j] = rng.beta(m * O[j] + 1.0, (1.0 - m) * O[j] + 1.0)
            a = argmax_random_tie(theta, rng)
            x = draw_reward(rng, env, a, t - 1)
            buf_sum[a] += x
            buf_len[a] += 1
            n_obs[a] += 1
            size = 2 ** (r[a] + 1)
            if buf_len[a] == size:
                start = n_obs[a] - size
                noise = laplace_noise(rng, scale, rows, n_rows, a, start, n_obs[a], 0)
                n_rows += 1
                mu_tilde[a] = (buf_sum[a] + noise) / size
                O[a] = size
                r[a] += 1
                buf_sum[a] = 0.0
                buf_len[a] = 0
        actions[t - 1] = a
    return stop, n_rows, n_rows


class LazyDPTS(KernelPolicy):
    name = "lazy-dp-ts"
    title = "Lazy-DP-TS (Hu & Hegde 2022, Algorithm 2)"
    provenance = "faithful"
    params_spec = (EPSILON,)
    kernel = _lazy_dp_ts

    def kernel_params(self, T, K):
        return np.array([self.params["epsilon"]])

    def row_capacity(self, T, K):
        # K initial releases plus at most one per completed epoch of each arm
        return K + K * (int(math.log2(T)) + 2)

    def releases(self, T, K):
        return [LaplaceRelease(scale=1.0 / self.params["epsilon"], sensitivity=1.0)]

    def certificate(self, T, K):
        lap = self.releases(T, K)[0]
        return Certificate(candidates=(Candidate(
            Composition.of([lap]), Witness(arm=0, index=0, round=1),
            "each reward lies in exactly one epoch sum (sensitivity 1) released once with "
            "Lap(1/ε); sampling from the private means is post-processing"),))

    def theorem(self, T, K):
        return theorems.hu_hegde_2022_lazy_dp_ts(self.params["epsilon"])
