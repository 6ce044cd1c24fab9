"""Azize & Basu 2022 (NeurIPS): AdaP-UCB and AdaP-KLUCB (docs/algorithms.md#adap-ucb,
docs/algorithms.md#adap-klucb).  Natural log.

Episodes with doubling: after one pull of each arm (each a first "episode" of size 1), episode ℓ
starts at round t_ℓ, plays A_ℓ = argmax_a I_a(t_ℓ) until the arm's count doubles.  An arm's index
uses only its last completed episode, of size n = ½N_a (n = 1 after the initial pull), through the
private mean μ̃ = (episode mean) + Lap(1/(ε·n)), drawn once when the episode ends:

* AdaP-UCB   I = μ̃ + √(α·ln t_ℓ / (2n)) + α·ln t_ℓ / (ε·n)   (the Laplace term outside the root)
* AdaP-KLUCB I = max{q ∈ [0, 1] : d(μ̆, q) ≤ α·ln t_ℓ / n},  μ̆ = clip01(μ̃ + α·ln t_ℓ/(ε·n)),
  solved to 1e-10 (:func:`~dpledger.policies.rules.kl_ucb_newton`).

Release: Lap(1/(εn)) on a mean of n rewards, ``LaplaceRelease(scale=1/(εn), sensitivity=1/n)``
(normal form ε); episodes of one arm do not overlap, so every reward is in exactly one release
(Theorem 6: ε-global DP).  An episode cut by the end of the run makes no release.

Draw order: at an episode start the tie-break draw (only on a tie), then the episode's rewards,
then its noise.  Fast path (default): one :func:`draw_sum` per episode (one Binomial draw for
Bernoulli arms) and one segment (arm, first round, stride 1, length) per episode through
``run_one`` (:func:`_adap_segments`; the uniform ``kernel`` fills actions by a slice instead) —
cost grows with episodes, not rounds.
``fast = False`` draws reward by reward (the per-round reference; the same random stream for
fixed reward tables, a different but equally distributed one for Bernoulli arms).
The noise of episode release k is drawn with ``noise_scales[k]``, the declared release's scale
(no parameter scales it).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.policies.base import EPSILON, KernelPolicy, Param, fast_switch
from dpledger.mechanisms.noise import laplace_noise
from dpledger.policies.rules import (argmax_first, capture_release, tie_break, clip01,
                                     kl_ucb_newton, play_stretch, private_initial_pulls)

ALPHA = Param("alpha", 3.1, "positive", "exploration parameter α (> 3 in the regret theorem)")
HIDDEN = (fast_switch("one draw_sum per episode (False: reward by reward)"),)


@njit(cache=True)
def _adap(rng, env, T, K, stop, params, actions, rows, capture):
    """The uniform kernel (actions out): :func:`_adap_segments` with an empty segment buffer."""
    played, n_rows, draws, _, _ = _adap_segments(rng, env, T, K, stop, params, actions, rows,
                                                  capture, np.zeros((4, 0), np.int64))
    return played, n_rows, draws


@njit(cache=True, inline="always")
def adap_select(rng, mu, n_last, eps, alpha, klucb, lt, index):
    """The arm of the episode starting at round t_ℓ (lt = ln t_ℓ): argmax of the AdaP-UCB or
    AdaP-KLUCB index (module docstring), ties uniformly at random."""
    for j in range(index.size):
        n = n_last[j]
        if klucb:
            m = clip01(mu[j] + alpha * lt / (eps * n))
            index[j] = kl_ucb_newton(m, alpha * lt / n)
        else:
            index[j] = mu[j] + np.sqrt(alpha * lt / (2.0 * n)) + alpha * lt / (eps * n)
    a, tie = argmax_first(index)
    if tie:
        a = tie_break(index, a, rng)
    return a


@njit(cache=True, inline="always")
def adap_release_id(n_ep):
    """Release id k of an episode of n_ep = 2^k rewards (Lap(1/(ε·2^k)) on their mean)."""
    k = 0
    while (1 << k) < n_ep:
        k += 1
    return k


@njit(cache=True, inline="always")
def adap_commit(a, s, n_ep, noise, mu, n_last):
    """A completed episode of n_ep rewards summing to s: μ̃_a = s/n_ep + noise."""
    mu[a] = s / n_ep + noise
    n_last[a] = n_ep


@njit(cache=True)
def _adap_segments(rng, env, T, K, stop, params, actions, rows, capture, segs):
    """params: ε, α, variant (0 UCB, 1 KLUCB), fast, then the noise scale of
    every release id k (``noise_scales``: Lap(1/(ε·2^k)) on a mean of 2^k rewards).
    A non-empty ``segs`` buffer: the play goes there as segments (no actions written)."""
    eps = params[0]
    alpha = params[1]
    klucb = params[2] != 0.0
    fast = params[3] != 0.0
    scales = params[4:]
    emit = segs.shape[1] > 0
    last = np.full(K, -1, np.int64)
    mu = np.zeros(K)
    n_last = np.ones(K)
    N = np.zeros(K, np.int64)
    index = np.zeros(K)
    # initial pulls: episodes of size 1; t = rounds played
    t, n_rows, segs, n_segs = private_initial_pulls(rng, env, K, stop, scales[0], rows,
                                                    capture, mu, N, actions, emit, segs, last)
    while t < stop:
        # ln t_ℓ, t_ℓ = t + 1 the episode's first round
        a = adap_select(rng, mu, n_last, eps, alpha, klucb, np.log(t + 1.0), index)
        n_ep = N[a]                         # the episode doubles the arm's count
        m_ep = min(n_ep, stop - t)
        s, segs, n_segs = play_stretch(rng, env, a, t, m_ep, fast, emit, segs, n_segs, last,
                                       actions)
        if m_ep == n_ep:                    # completed episode: release its private mean
            k = adap_release_id(n_ep)
            noise = laplace_noise(rng, env, scales[k], 1.0 / n_ep, rows, n_rows, a, N[a],
                                  N[a] + n_ep, k)
            n_rows += 1
            # captured in sum form (the convention of capture_release: Laplace releases are
            # sums): n·(mean + noise) = s + n·noise, of scale n·scales[k] = 1/ε
            capture_release(capture, s + n_ep * noise, s, n_ep * scales[k], a, N[a], N[a] + n_ep)
            adap_commit(a, s, n_ep, noise, mu, n_last)
        N[a] += m_ep
        t += m_ep
    return t, n_rows, n_rows, segs, n_segs


@functools.lru_cache(maxsize=256)
def _episode_releases(eps: float, n: int) -> tuple:
    """Lap(1/(ε·2^k)) on a mean of 2^k rewards, k = 0 … n−1 (frozen, so shared across calls:
    the simulator interns them once per chunk)."""
    return tuple(LaplaceRelease(scale=1.0 / (eps * 2.0 ** k), sensitivity=1.0 / 2.0 ** k)
                 for k in range(n))


class _AdaP(KernelPolicy):
    provenance = "faithful"
    exact_sampler = True
    params_spec = (EPSILON, ALPHA) + HIDDEN
    kernel = _adap
    segment_kernel = _adap_segments

    def emits_segments(self):
        return bool(self.params["fast"])
    variant: int = 0


    def kernel_params(self, T, K):
        p = self.params
        return np.concatenate([[p["epsilon"], p["alpha"], float(self.variant), float(p["fast"])],
                               self.noise_scales(T, K)])

    def row_capacity(self, T, K):
        return K + K * (int(math.log2(T)) + 2)

    def releases(self, T, K):
        return list(_episode_releases(float(self.params["epsilon"]), int(math.log2(T)) + 1))

    def certificate(self, T, K):
        lap = self.releases(T, K)[0]
        return Certificate(candidates=(Candidate(
            Composition.of([lap]), Witness(arm=0, index=0, round=1),
            "episodes of one arm do not overlap: each reward lies in exactly one episode mean "
            "(sensitivity 1/n) released once with Lap(1/(εn)), i.e. ε; the index is "
            "post-processing"),))


class AdaPUCB(_AdaP):
    name = "adap-ucb"
    title = "AdaP-UCB (Azize & Basu 2022)"
    variant = 0

    def theorem(self, T, K):
        return theorems.azize_basu_2022_adap(self.params["epsilon"], "AdaP-UCB")


class AdaPKLUCB(_AdaP):
    name = "adap-klucb"
    title = "AdaP-KLUCB (Azize & Basu 2022)"
    variant = 1

    def theorem(self, T, K):
        return theorems.azize_basu_2022_adap(self.params["epsilon"], "AdaP-KLUCB")
