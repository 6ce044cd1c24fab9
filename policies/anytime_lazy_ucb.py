"""Anytime-Lazy-UCB (Hu, Huang, Mehta 2021, arXiv 2102.07929) — **reconstructed**
(docs/algorithms.md#anytime-lazy-ucb): the paper's index constants were not recovered; the
constants below are ours.

Per-arm doubling epochs exactly as in Lazy-DP-TS: each arm is pulled once (μ̃ = x + Lap(1/ε),
O = 1); afterwards an arm's fresh rewards fill a buffer, and when it holds 2^{r+1} rewards the
private mean becomes (Σ buffer + Lap(1/ε)) / 2^{r+1}, O = 2^{r+1}, and the buffer is emptied.
Index (natural log):  μ̃_j + √(3·ln t / (2·O_j)) + 3·ln t / (ε·O_j).  Each reward lies in one
released epoch sum of sensitivity 1: ε-DP by the Lazy-DP-TS argument.

Fast path (default): between events every arm's μ̃ and O are fixed, so the argmax can change only
when the played arm's epoch ends or when another arm's index — whose difference to the played
arm's is monotone in ln t — catches up.  From an event round s the kernel computes the argmax as
the per-round rule does, then finds, for every other arm, the first integer round u at which its
index (the same floating-point expression) is ≥ the played arm's, by bisection; the arm is
played up to the earliest such u (or its epoch end), with one :func:`draw_sum` for the stretch
and, through ``run_one``, one segment (arm, first round, stride 1, length) per stretch
(:func:`_anytime_lazy_ucb_segments`; the uniform ``kernel`` fills actions by a slice instead).
Between events the per-round argmax is unique (no tie draw), so for fixed reward tables the fast
path and the per-round reference (``fast=False``) make the same draws and the same actions.
"""
from __future__ import annotations

import math

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.policies.base import (EPSILON, KernelPolicy, fast_switch,
                                    push_segment)
from dpledger.policies.environments import draw_reward, draw_sum
from dpledger.mechanisms.noise import laplace_noise
from dpledger.policies.rules import (capture_release, private_initial_pulls, argmax_first,
                                     tie_break)

HIDDEN = (fast_switch("jump to the next event (False: per round)"),)


@njit(cache=True, inline="always")
def ucb_index(mu, o, eps, t):
    """μ̃ + √(3 ln t / (2 O)) + 3 ln t / (ε O) — the one expression both paths evaluate."""
    lt = np.log(t)
    return mu + np.sqrt(3.0 * lt / (2.0 * o)) + 3.0 * lt / (eps * o)


@njit(cache=True)
def first_overtake(mu_k, o_k, mu_a, o_a, eps, lo, hi):
    """First integer round u in [lo, hi] with index_k(u) ≥ index_a(u), or hi + 1 if none.
    index_k − index_a is monotone in ln t (increasing if O_k < O_a, else non-increasing), so the
    predicate is a step on [lo, hi] and bisection finds it."""
    if lo > hi:
        return hi + 1
    if ucb_index(mu_k, o_k, eps, lo) >= ucb_index(mu_a, o_a, eps, lo):
        return lo
    if ucb_index(mu_k, o_k, eps, hi) < ucb_index(mu_a, o_a, eps, hi):
        return hi + 1
    # predicate false at lo, true at hi
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        if ucb_index(mu_k, o_k, eps, mid) >= ucb_index(mu_a, o_a, eps, mid):
            hi = mid
        else:
            lo = mid
    return hi


@njit(cache=True)
def _anytime_lazy_ucb(rng, env, T, K, stop, params, actions, rows, capture):
    """The uniform kernel (actions out): :func:`_anytime_lazy_ucb_segments` with an empty
    segment buffer."""
    played, n_rows, draws, _, _ = _anytime_lazy_ucb_segments(
        rng, env, T, K, stop, params, actions, rows, capture, np.zeros((4, 0), np.int64))
    return played, n_rows, draws


@njit(cache=True, inline="always")
def anytime_select(rng, mu, O, eps, s, index):
    """Round s's arm: the argmax of :func:`ucb_index` (ties uniformly at random)."""
    for j in range(index.size):
        index[j] = ucb_index(mu[j], O[j], eps, s)
    a, tie = argmax_first(index)
    if tie:
        a = tie_break(index, a, rng)
    return a


@njit(cache=True, inline="always")
def anytime_push(a, x, m, buf, blen, N, size):
    """Arm a's next m rewards, summing to x: (due, start, stop) — due when the epoch buffer
    holds ``size[a]`` rewards, the release then covering observations [start, stop)."""
    buf[a] += x
    blen[a] += m
    N[a] += m
    if blen[a] == size[a]:
        return True, N[a] - size[a], N[a]
    return False, 0, 0


@njit(cache=True, inline="always")
def anytime_commit(a, noise, mu, O, size, buf, blen):
    """μ̃_a = (Σ buffer + noise)/size, O_a = size; the next epoch doubles."""
    mu[a] = (buf[a] + noise) / size[a]
    O[a] = size[a]
    size[a] *= 2
    buf[a] = 0.0
    blen[a] = 0


@njit(cache=True)
def _anytime_lazy_ucb_segments(rng, env, T, K, stop, params, actions, rows, capture, segs):
    """params: ε, fast, release 0's noise scale 1/ε (``noise_scales``).  A
    non-empty ``segs`` buffer: the play goes there as segments (no actions written)."""
    eps = params[0]
    fast = params[1] != 0.0
    scale = params[2]
    emit = segs.shape[1] > 0
    last = np.full(K, -1, np.int64)
    mu = np.zeros(K)
    O = np.ones(K)
    size = np.full(K, 2, np.int64)          # buffer size that closes the current epoch
    buf = np.zeros(K)
    blen = np.zeros(K, np.int64)
    N = np.zeros(K, np.int64)
    index = np.zeros(K)
    _, n_rows, segs, n_segs = private_initial_pulls(rng, env, K, stop, scale, rows,
                                                    capture, mu, N, actions, emit, segs, last)
    s = K + 1                               # the next round to play (1-based)
    while s <= stop:
        a = anytime_select(rng, mu, O, eps, s, index)
        need = size[a] - blen[a]
        if fast:
            end = min(stop, s + need - 1)   # the stretch's last round if nothing overtakes
            nxt = end + 1
            for k in range(K):
                if k != a:
                    u = first_overtake(mu[k], O[k], mu[a], O[a], eps, s + 1, nxt - 1)
                    if u < nxt:
                        nxt = u
            m = nxt - s
            x = draw_sum(rng, env, a, s - 1, m)
            if emit:
                segs, n_segs = push_segment(segs, n_segs, last, a, s, 1, m)
            else:
                actions[s - 1:s - 1 + m] = a
        else:
            m = 1
            x = draw_reward(rng, env, a, s - 1)
            if emit:
                segs, n_segs = push_segment(segs, n_segs, last, a, s, 1, 1)
            else:
                actions[s - 1] = a
        due, start, stop_ = anytime_push(a, x, m, buf, blen, N, size)
        if due:
            noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, start, stop_, 0)
            n_rows += 1
            capture_release(capture, buf[a] + noise, buf[a], scale, a, start, stop_)
            anytime_commit(a, noise, mu, O, size, buf, blen)
        s += m
    return stop, n_rows, n_rows, segs, n_segs


class AnytimeLazyUCB(KernelPolicy):
    name = "anytime-lazy-ucb"
    title = "Anytime-Lazy-UCB (Hu, Huang, Mehta 2021), reconstructed index constants"
    provenance = "reconstructed"
    exact_sampler = True
    params_spec = (EPSILON,) + HIDDEN
    kernel = _anytime_lazy_ucb
    segment_kernel = _anytime_lazy_ucb_segments

    def emits_segments(self):
        return bool(self.params["fast"])


    def kernel_params(self, T, K):
        p = self.params
        return np.concatenate([[p["epsilon"], float(p["fast"])], self.noise_scales(T, K)])

    def row_capacity(self, T, K):
        return K + K * (int(math.log2(T)) + 2)

    def releases(self, T, K):
        return [LaplaceRelease(scale=1.0 / self.params["epsilon"], sensitivity=1.0)]

    def certificate(self, T, K):
        return Certificate(candidates=(Candidate(
            Composition.of([self.releases(T, K)[0]]), Witness(arm=0, index=0, round=1),
            "each reward lies in exactly one epoch sum (sensitivity 1) released once with "
            "Lap(1/ε); the index is post-processing"),))

    def theorem(self, T, K):
        return theorems.hu_huang_mehta_2021_anytime_lazy_ucb(self.params["epsilon"])
