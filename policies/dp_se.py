"""DP-SE: differentially private successive elimination (Sajed & Sheffet 2019;
docs/algorithms.md#dp-se).  Natural log.  Provenance: faithful to public implementations (two
agree).

Epoch e (Δ_e = 2^{−e}, S the surviving arms at the epoch start, β = 1/T by default):

    R_e = max{32·ln(8|S|e²/β)/Δ_e², 8·ln(4|S|e²/β)/(ε·Δ_e)} + 1     (real-valued)
    every arm of S is pulled n_e = ⌈R_e⌉ times, round-robin in arm order;
    μ̃_a = (Σ of a's n_e epoch rewards + Lap(1/ε)) / n_e          (one release per arm)
    h_e = √(ln(8|S|e²/β)/(2R_e)),  c_e = ln(4|S|e²/β)/(R_e·ε)
    S ← {a ∈ S : max_b μ̃_b − μ̃_a ≤ 2h_e + 2c_e}

An epoch cut by the end of the run continues round-robin and makes no release; once one arm is
left it is played to the end.  Every reward lies in one epoch sum of sensitivity 1 released
once with Lap(1/ε): the certificate is one Laplace release of ε.

Draw order: at the end of an epoch, the noise of each surviving arm in arm order.  Fast path
(default): each arm's epoch rewards as one strided :func:`draw_sum`-style draw (one Binomial for
Bernoulli arms), the final commit as one draw; ``run_one`` gets one segment (arm, first round,
stride = |S|, count) per surviving arm per epoch (:func:`_dp_se_segments`; the uniform
``kernel`` fills actions by strided slices instead).  ``fast=False``
is the per-round reference (one reward per round).  Hidden switches as in ``azize_basu``.
"""
from __future__ import annotations

import math

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.policies.base import (EPSILON, KernelPolicy, Param,
                                    fast_switch, push_segment)
from dpledger.policies.environments import BERNOULLI, draw_reward, draw_sum
from dpledger.mechanisms.noise import laplace_noise
from dpledger.policies.rules import play_stretch

BETA = Param("beta", None, "probability", "failure probability β ∈ (0, 1) (default 1/T)")
HIDDEN = (fast_switch("one draw per arm per epoch (False: per round)"),)


@njit(cache=True)
def strided_sum(rng, env, arm, t0, stride, n):
    """Sum of ``n`` rewards of ``arm`` at rounds t0, t0+stride, … (0-based): one Binomial draw
    for Bernoulli arms (through :func:`draw_sum`), else reward by reward (table rows as played)."""
    if n <= 0:
        return 0.0
    if env[0] == BERNOULLI or stride == 1:
        return draw_sum(rng, env, arm, t0, n)
    total = 0.0
    for i in range(n):
        total += draw_reward(rng, env, arm, t0 + i * stride)
    return total


@njit(cache=True)
def epoch_length(e, m, eps, beta):
    """(R_e, ln(8|S|e²/β), ln(4|S|e²/β)) for epoch e with m surviving arms."""
    delta = 0.5 ** e
    l8 = np.log(8.0 * m * e * e / beta)
    l4 = np.log(4.0 * m * e * e / beta)
    r = max(32.0 * l8 / (delta * delta), 8.0 * l4 / (eps * delta)) + 1.0
    # an epoch longer than any horizon (T <= 1e9) is cut by the run's end whatever its length;
    # held below 2^62 so that its conversion to int64 cannot wrap (ε = 1e-300 gave R_e ≈ 1e302
    # and a negative round count)
    return min(r, 4.0e18), l8, l4


@njit(cache=True, inline="always")
def dp_se_commit(a, s, noise, n_e, mu):
    """Arm a's epoch release: μ̃_a = (Σ of its n_e epoch rewards + noise)/n_e."""
    mu[a] = (s + noise) / n_e


@njit(cache=True, inline="always")
def dp_se_eliminate(members, m, mu, alive, r_e, l8, l4, eps):
    """The end of an epoch of R_e (:func:`epoch_length`) over the m arms ``members[:m]``:
    h_e = √(ln(8|S|e²/β)/(2R_e)), c_e = ln(4|S|e²/β)/(R_e·ε); arm a survives iff
    max_b μ̃_b − μ̃_a ≤ 2h_e + 2c_e.  Clears ``alive`` of the eliminated; returns the
    survivors' number.  The kernel and the step form (:mod:`dpledger.policies.step_rules`)
    call this one rule."""
    h = np.sqrt(l8 / (2.0 * r_e))
    c = l4 / (r_e * eps)
    best = -np.inf
    for pos in range(m):
        best = max(best, mu[members[pos]])
    left = m
    for pos in range(m):
        a = members[pos]
        if best - mu[a] > 2.0 * h + 2.0 * c:
            alive[a] = False
            left -= 1
    return left


@njit(cache=True)
def _dp_se(rng, env, T, K, stop, params, actions, rows, capture):
    """The uniform kernel (actions out): :func:`_dp_se_segments` with an empty segment buffer."""
    played, n_rows, draws, _, _ = _dp_se_segments(rng, env, T, K, stop, params, actions, rows,
                                                   capture, np.zeros((4, 0), np.int64))
    return played, n_rows, draws


@njit(cache=True)
def _dp_se_segments(rng, env, T, K, stop, params, actions, rows, capture, segs):
    """params: ε, β, fast, release 0's noise scale 1/ε (``noise_scales``).  A
    non-empty ``segs`` buffer: the play goes there as segments (no actions written)."""
    eps = params[0]
    beta = params[1]
    fast = params[2] != 0.0
    scale = params[3]
    emit = segs.shape[1] > 0
    n_segs = 0
    last = np.full(K, -1, np.int64)
    alive = np.ones(K, np.bool_)
    members = np.zeros(K, np.int64)
    sums = np.zeros(K)
    mu = np.zeros(K)
    N = np.zeros(K, np.int64)
    n_rows = 0
    m = K
    t = 0
    e = 0
    while t < stop and m > 1:
        e += 1
        k = 0
        for j in range(K):
            if alive[j]:
                members[k] = j
                k += 1
        r_e, l8, l4 = epoch_length(e, m, eps, beta)
        n_e = np.int64(math.ceil(r_e))
        rem = stop - t
        complete = n_e * m <= rem
        span = n_e * m if complete else rem
        for pos in range(m):
            sums[members[pos]] = 0.0
        if fast:
            for pos in range(m):
                a = members[pos]
                cnt = (span - pos + m - 1) // m if span > pos else 0
                sums[a] = strided_sum(rng, env, a, t + pos, m, cnt)
                if emit:
                    segs, n_segs = push_segment(segs, n_segs, last, a, t + pos + 1, m, cnt)
                else:
                    actions[t + pos:t + span:m] = a
        else:
            for i in range(span):
                a = members[i % m]
                sums[a] += draw_reward(rng, env, a, t + i)
                if emit:
                    segs, n_segs = push_segment(segs, n_segs, last, a, t + i + 1, 1, 1)
                else:
                    actions[t + i] = a
        if not complete:                    # cut by the end of the run: no release
            for pos in range(m):
                a = members[pos]
                N[a] += (span - pos + m - 1) // m if span > pos else 0
            t += span
            break
        for pos in range(m):
            a = members[pos]
            noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, N[a], N[a] + n_e, 0)
            n_rows += 1
            if capture.shape[1] > 0 and a == 0 and e == 1:
                capture[0, 0] = sums[a] + noise
                capture[1, 0] = sums[a]
            dp_se_commit(a, sums[a], noise, n_e, mu)
            N[a] += n_e
        t += span
        m = dp_se_eliminate(members, m, mu, alive, r_e, l8, l4, eps)
    if t < stop:                            # one arm left: commit to it
        a = 0
        for j in range(K):
            if alive[j]:
                a = j
        rem = stop - t
        _, segs, n_segs = play_stretch(rng, env, a, t, rem, fast, emit, segs, n_segs, last,
                                       actions)
        N[a] += rem
        t = stop
    return t, n_rows, n_rows, segs, n_segs


class DPSE(KernelPolicy):
    name = "dp-se"
    title = "DP-SE (Sajed & Sheffet 2019)"
    provenance = "faithful to public implementations"
    exact_sampler = True
    params_spec = (EPSILON, BETA) + HIDDEN
    kernel = _dp_se
    segment_kernel = _dp_se_segments

    def emits_segments(self):
        return bool(self.params["fast"])


    def resolved_params(self, T, K):
        out = self.public_params()
        if out["beta"] is None:
            out["beta"] = 1.0 / T
        return out

    def kernel_params(self, T, K):
        p = dict(self.params, beta=self.resolved_params(T, K)["beta"])
        return np.concatenate([[p["epsilon"], p["beta"], float(p["fast"])],
                               self.noise_scales(T, K)])

    def row_capacity(self, T, K):
        return K * (int(math.log2(T)) + 2)

    def releases(self, T, K):
        return [LaplaceRelease(scale=1.0 / self.params["epsilon"], sensitivity=1.0)]

    def certificate(self, T, K):
        return Certificate(candidates=(Candidate(
            Composition.of([self.releases(T, K)[0]]), Witness(arm=0, index=0, round=1),
            "each reward lies in exactly one epoch sum of one arm (sensitivity 1) released once "
            "with Lap(1/ε); elimination and the final commit are post-processing"),))

    def theorem(self, T, K):
        return theorems.sajed_sheffet_2019_dp_se(self.params["epsilon"])
