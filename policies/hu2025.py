"""Hu, Huang, Zhang, Lécuyer & Hegde 2025 (ICML), "Connecting Thompson Sampling and UCB":
DP-TS-UCB (Algorithm 1) — RECONSTRUCTED (docs/algorithms.md#dp-ts-ucb): c0 (the paper's constant
was
not recovered), the epoch rule and the theorem's factor 2 are ours or from secondary sources.

* Budget ``φ = ⌈c0 · T^{0.5(1−α)} · ln(T)^{0.5(3−α)}⌉`` (natural log,
docs/algorithms.md#logarithms).
* Start: pull each arm once; that reward is epoch 0 (n = 1).  Epochs then collect 2, 4, 8, …
  fresh rewards; when an arm's buffer reaches its epoch size its model becomes
  ``N(mean of the epoch's n rewards, ln(T)^α / n)``, older rewards are dropped, the budget
  resets to φ and the running maximum to −∞.
* Each round, each arm: with budget left, one fresh sample (used, budget −1, running max
  updated); otherwise the running maximum (no new noise: post-processing).

Ledger: each fresh sample is a Gaussian release on the epoch mean (sensitivity 1/n, σ² =
ln(T)^α/n, μ² = 1/(n·ln(T)^α)) touching that epoch's n rewards; the kernel counts the samples
drawn from each model and writes one row per model (arm, epoch start, start + n, release id =
log2 n, count).  A reward's i-th release has parameters fixed by its position (its epoch), so
``adaptive = False``.
Certificate: the first reward of an arm (n = 1) is read by at most min(φ, T − K) samples:
``μ = √(min(φ, T − K)/ln(T)^α)``.  Theorem (secondary sources):
``√(2·c0·T^{0.5(1−α)}·ln(T)^{1.5(1−α)})``-GDP, :func:`theorems.hu_2025_dp_ts_ucb`.
"""
from __future__ import annotations

import math

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import GaussianRelease
from dpledger.policies.base import KernelPolicy, Param
from dpledger.mechanisms.noise import gaussian_lattice_sigma, lattice_gaussian
from dpledger.policies.environments import draw_reward, lattice_bits
from dpledger.policies.sink import put_action
from dpledger.policies.rules import argmax_first, tie_break, capture_release


def sampling_budget(T: int, alpha: float, c0: float) -> int:
    """φ = ⌈c0 · T^{0.5(1−α)} · ln(T)^{0.5(3−α)}⌉ (docs/algorithms.md#dp-ts-ucb), at least
    1."""
    lnT = math.log(T)
    return max(1, math.ceil(c0 * T ** (0.5 * (1.0 - alpha)) * lnT ** (0.5 * (3.0 - alpha))))


def variance_scale(T: int, alpha: float) -> float:
    """ln(T)^α, the numerator of the model variance ln(T)^α / n."""
    return math.log(T) ** alpha


def max_epoch(T: int, K: int) -> int:
    """Largest epoch r (n = 2^r) whose model can exist within T rounds: an arm holds at most
    T − K + 1 rewards and epoch r completes at its (2^{r+1} − 1)-th."""
    n_max = T - K + 1
    r = 0
    while (1 << (r + 2)) - 1 <= n_max:
        r += 1
    return r


@njit(cache=True, inline="always")
def epoch_gaussian_noise(rng, sigma, count):
    """N(0, σ²) for an arm's current epoch mean, recorded in the same call: returns (noise,
    count + 1), ``count`` the samples drawn from the arm's current model (the caller keeps it in
    ``pending[arm]``); they become one ledger row (arm, epoch start, start + n, log2 n, count)
    when the model is replaced or the run ends."""
    return rng.normal(0.0, sigma), count + 1


@njit(cache=True, inline="always")
def _flush(rows, n, pending, arm, start, size, rid):
    if pending[arm] > 0:
        rows[0, n] = arm
        rows[1, n] = start
        rows[2, n] = start + size
        rows[3, n] = rid
        rows[4, n] = pending[arm]
        pending[arm] = 0
        return n + 1
    return n


# ---- the rule as state updates (one source for the kernel and the step form) --------------------
# State per arm: the model's mean μ̂, size n = 2^r, epoch r, first observation ``start``, σ (and
# the exact sampler's s), the budget h left, the running maximum, the epoch buffer (sum,
# length), the observations.  ``ts_ucb_first`` makes an arm's first reward its epoch-0 model,
# ``ts_ucb_sweep`` is a round's samples and arm, ``ts_ucb_push`` takes a reward and says
# whether the epoch is complete, ``ts_ucb_new_model`` replaces the model.  The kernel below
# and the step form (:mod:`dpledger.policies.step_rules`) call the same four.

@njit(cache=True, inline="always")
def ts_ucb_first(a, x, L, phi, bits, mu_hat, n, r, start, sig, slat, h, mx, obs):
    """Arm a's first reward x is its epoch-0 model N(x, ln(T)^α) (n = 1), with budget φ."""
    mu_hat[a] = x
    n[a] = 1
    r[a] = 0
    start[a] = 0
    sig[a] = np.sqrt(L)
    if bits > 0:
        slat[a] = gaussian_lattice_sigma(sig[a], bits)
    h[a] = phi
    mx[a] = -np.inf
    obs[a] = 1


@njit(cache=True, inline="always")
def ts_ucb_sweep(rng, bits, unit, mu_hat, n, sig, slat, h, mx, live, theta, pending, start,
                 capture, witness):
    """A round's arm (after the initial pulls): each arm j in order with budget left (and
    ``live``: not frozen by a refused release in the step form) draws one fresh sample of its
    model (float: μ̂ + N(0, σ²) through :func:`epoch_gaussian_noise`; exact: (n·μ̂·2^b + Z)/
    (n·2^b), Z ~ N_ℤ(0, s²)), spends one unit of budget and updates the running maximum; the
    others reuse the maximum (post-processing).  Argmax, ties uniformly at random.  Capture as
    the kernel's docstring says.  Returns (arm, fresh samples drawn, witness still wanted)."""
    draws = 0
    for j in range(theta.size):
        if h[j] >= 1 and live[j]:
            if bits > 0:
                theta[j] = lattice_gaussian(rng.bit_generator, mu_hat[j] * n[j] * unit, slat[j],
                                            n[j] * unit)
                pending[j] += 1
            else:
                noise, pending[j] = epoch_gaussian_noise(rng, sig[j], pending[j])
                theta[j] = mu_hat[j] + noise
            draws += 1
            h[j] -= 1
            if theta[j] > mx[j]:
                mx[j] = theta[j]
            if witness and j == 0:
                capture[0, 0] = theta[j]
                capture[1, 0] = mu_hat[j]
                witness = False
            # full capture (a (6, M) array): every fresh sample, its clean epoch mean,
            # σ and the observations [start, start + n) the mean averages
            capture_release(capture, theta[j], mu_hat[j], sig[j], j, start[j], start[j] + n[j])
        else:
            theta[j] = mx[j]
    a, tie = argmax_first(theta)
    if tie:
        a = tie_break(theta, a, rng)
    return a, draws, witness


@njit(cache=True, inline="always")
def ts_ucb_push(a, x, r, buf_sum, buf_len, obs):
    """Arm a's next reward x joins its epoch buffer; True when the buffer holds 2^{r+1}
    rewards (the epoch is complete: :func:`ts_ucb_new_model`)."""
    obs[a] += 1
    buf_sum[a] += x
    buf_len[a] += 1
    return buf_len[a] == (np.int64(1) << (r[a] + 1))


@njit(cache=True, inline="always")
def ts_ucb_new_model(a, L, phi, bits, mu_hat, n, r, start, sig, slat, h, mx, buf_sum, buf_len,
                     obs):
    """The complete epoch's n = 2^{r+1} rewards become arm a's model N(mean, ln(T)^α/n); older
    rewards are dropped, the budget resets to φ and the running maximum to −∞."""
    size = np.int64(1) << (r[a] + 1)
    mu_hat[a] = buf_sum[a] / size
    n[a] = size
    r[a] += 1
    start[a] = obs[a] - size
    sig[a] = np.sqrt(L / size)
    if bits > 0:
        slat[a] = gaussian_lattice_sigma(sig[a] * size, bits)
    h[a] = phi
    mx[a] = -np.inf
    buf_sum[a] = 0.0
    buf_len[a] = 0


@njit(cache=True, nogil=True)
def _dp_ts_ucb(rng, env, T, K, stop, params, actions, rows, capture):
    """params: ln(T)^α, φ (integer budget).

    Capture: the two-row form receives arm 0's first fresh sample (θ, clean mean); a (6, M)
    array receives every fresh sample of every arm (:func:`~dpledger.policies.rules.
    capture_release`: θ, the clean epoch mean μ̂, σ = √(ln(T)^α/n), arm, observations
    [start, start + n)) — a Gaussian release of sensitivity 1/n on the mean, so the auditor
    scores its log-likelihood ratio with d = Δ/n (:func:`dpledger.audits.policy.
    gaussian_release_llr`).  Samples reused from the running maximum draw no noise and are
    not captured (post-processing).

    Exact sampler (a lattice environment, rewards on 2^-b): a fresh sample is
    θ = (n·μ̂·2^b + Z)/(n·2^b), Z ~ N_ℤ(0, s²) drawn exactly, s = lattice_sigma(σ·n, b) for the
    model's σ = √(L/n) and sensitivity 1/n — what :func:`~dpledger.mechanisms.noise.
    lattice_release` records for release id log2 n (chosen at compile time; the float path's
    draws are unchanged)."""
    L = params[0]
    phi = np.int64(params[1])
    bits = lattice_bits(env)
    unit = 2.0 ** bits
    slat = np.ones(K, np.int64)
    mu_hat = np.zeros(K)
    sig = np.zeros(K)
    n = np.zeros(K, np.int64)            # model size (2^r)
    r = np.zeros(K, np.int64)            # model epoch (release id)
    start = np.zeros(K, np.int64)        # first observation of the model's epoch
    h = np.zeros(K, np.int64)            # remaining budget
    mx = np.full(K, -np.inf)
    buf_sum = np.zeros(K)
    buf_len = np.zeros(K, np.int64)
    obs = np.zeros(K, np.int64)
    pending = np.zeros(K, np.int64)
    theta = np.zeros(K)
    live = np.ones(K, np.bool_)
    n_rows = 0
    draws = 0
    witness = capture.shape[1] > 0
    for t in range(1, stop + 1):
        if t <= K:
            a = t - 1
            x = draw_reward(rng, env, a, t - 1)
            ts_ucb_first(a, x, L, phi, bits, mu_hat, n, r, start, sig, slat, h, mx, obs)
        else:
            a, fresh, witness = ts_ucb_sweep(rng, bits, unit, mu_hat, n, sig, slat, h, mx, live,
                                             theta, pending, start, capture, witness)
            draws += fresh
            x = draw_reward(rng, env, a, t - 1)
            if ts_ucb_push(a, x, r, buf_sum, buf_len, obs):
                n_rows = _flush(rows, n_rows, pending, a, start[a], n[a], r[a])
                ts_ucb_new_model(a, L, phi, bits, mu_hat, n, r, start, sig, slat, h, mx,
                                 buf_sum, buf_len, obs)
        put_action(actions, t, a)
    for j in range(K):
        n_rows = _flush(rows, n_rows, pending, j, start[j], n[j], r[j])
    return stop, n_rows, draws


ALPHA = Param("alpha", 0.5, "fraction", "trade-off α ∈ [0, 1] (α = 1: constant GDP)")
C0 = Param("c0", 1.0, "positive",
           "constant c0 of the budget φ (the paper's value was not recovered; ours)")


class DPTSUCB(KernelPolicy):
    name = "dp-ts-ucb"
    title = "DP-TS-UCB (Hu, Huang, Zhang, Lécuyer & Hegde 2025, Algorithm 1; reconstructed)"
    provenance = "reconstructed"
    params_spec = (ALPHA, C0)
    adaptive = False
    exact_sampler = True
    kernel = _dp_ts_ucb
    action_sink = True

    def phi(self, T: int) -> int:
        return sampling_budget(T, self.params["alpha"], self.params["c0"])

    def witness_last_round(self, T: int, K: int) -> int:
        """The last round whose fresh samples can read an arm's first reward (the certificate's
        witness): that epoch-0 model is sampled once per round from round K + 1 while its
        budget φ lasts, so by round K + φ at the latest (the white-box audit stops there)."""
        return min(T, K + self.phi(T))

    def kernel_params(self, T, K):
        return np.array([variance_scale(T, self.params["alpha"]), float(self.phi(T))])

    def row_capacity(self, T, K):
        return K * (max_epoch(T, K) + 2) + 1

    def releases(self, T, K):
        """Release id r: one sample of the epoch-r model, N(0, ln(T)^α/2^r) on a mean of 2^r
        rewards (sensitivity 2^{−r})."""
        L = variance_scale(T, self.params["alpha"])
        return [GaussianRelease(sigma=math.sqrt(L / 2 ** r), sensitivity=1.0 / 2 ** r)
                for r in range(max_epoch(T, K) + 1)]

    def certificate(self, T, K):
        L = variance_scale(T, self.params["alpha"])
        reads = min(self.phi(T), T - K)
        comp = (Composition.of([(GaussianRelease(sigma=math.sqrt(L), sensitivity=1.0), reads)])
                if reads > 0 else Composition())
        return Certificate(candidates=(Candidate(
            comp, Witness(arm=0, index=0, round=1),
            f"the first reward of an arm is its epoch-0 mean (n = 1), read by at most "
            f"min(φ, T − K) = {reads} samples of N(·, ln(T)^α) with sensitivity 1 (μ² = "
            f"1/ln(T)^α each); later epochs have n ≥ 2 and at most φ samples; the UCB phase "
            f"reuses the maximum (post-processing)"),),
            note="all-Gaussian: GDP composes under fully adaptive choice")

    def theorem(self, T, K):
        return theorems.hu_2025_dp_ts_ucb(T, K, self.params["alpha"], self.params["c0"])
