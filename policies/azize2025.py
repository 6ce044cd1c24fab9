"""Azize, Wu, Honda, Orabona, Ito & Basu 2025 (NeurIPS; arXiv 2505.05613): DP-KLUCB and DP-IMED, and
the non-private IMED of Honda & Takemura 2015 (docs/algorithms.md#dp-klucb; natural log).

RECONSTRUCTED (provenance ``reconstructed``): the paper's body was not read.  Sourced: d_ε
(slides), the DP-KLUCB index max{μ ∈ [0, 1] : d_ε([μ̃_a]_0^1, μ) ≤ ln t_ℓ / N_a} (slides), the
phase rule "play A_ℓ until its count is α × its count at the phase start", all samples kept
(slides), Laplace noise (abstract).  Our choices, as the note proposes:

* mechanism (reconstructed, docs/algorithms.md#dp-klucb): each phase's reward sum P gets one fresh
Lap(1/ε) added to the
  arm's running private sum, S̃_a ← S̃_a + P + Lap(1/ε); the private mean is S̃_a / N_a;
* phase schedule (§5.5 [R]): a phase started at count N ends at count max(N + 1, ⌈α·N⌉)
  (:func:`~dpledger.policies.rules.phase_target`); one initial pull per arm, each its own first
  phase with its own Lap(1/ε) (§5.6 [R]); t_ℓ = t + 1, the phase's first round;
* ties broken uniformly at random (§6.2 [U]);
* DP-IMED (§7.2 [S], §7.3 [R]): play argmin_a N_a·d_ε(x_a, x*) + ln N_a, x_a = clip01(S̃_a/N_a),
  x* = max_j x_j, then a whole phase as DP-KLUCB.

Release: ``LaplaceRelease(scale=1/ε, sensitivity=1)`` on the sum of one phase's rewards, a
ledger row over exactly that phase's observations [N, target) of the arm; phases of an arm are
disjoint, so every reward lies in one release: ε per reward by the ledger's own composition (the
paper's Proposition 2, parallel composition).  A phase cut by the end of the run makes no
release (nothing reads it).

``mechanism = "renoise-cumulative"``: the naive reading of "fresh noise added to the cumulative sum"
(the pitfall named in docs/algorithms.md#dp-klucb), NOT the paper's algorithm: at every phase end
the arm's whole true cumulative sum is released with a fresh Lap(1/ε) (ledger row over [0, target)),
and the private mean is that release / N.  Each reward enters every later release of its arm, so its
certificate is (number of phases)·ε — recorded honestly, and what this toolkit exists to show.

White-box capture (issue 14): every release goes through
:func:`~dpledger.policies.rules.capture_release` (value, clean sum, scale, arm, observation
range), so the audit's likelihood-ratio score sees every release containing the witness — one
for phase-sums, one per later phase end of the arm for renoise-cumulative; the two-row form
keeps arm 0's initial release.

Draw order: at a phase start the tie-break draw (only on a tie), then the phase's rewards, then
its noise.  Fast path (default): one :func:`draw_sum` per phase and one segment per phase, so a
run costs O(phases) ≈ K·(1/(α−1) + log_α T), not O(T).  ``fast = False`` draws reward by reward.
"""
from __future__ import annotations

import functools

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.errors import DpledgerError
from dpledger.mechanisms.noise import laplace_noise
from dpledger.policies.base import EPSILON, KernelPolicy, Param, fast_switch, push_segment
from dpledger.policies.baselines import NonPrivatePolicy
from dpledger.policies.environments import draw_reward
from dpledger.policies.rules import (argmax_first, bernoulli_kl, capture_release, clip01,
                                     d_epsilon, dp_klucb_index, phase_target, play_stretch,
                                     tie_break)
from dpledger.policies.sink import put_action

ALPHA = Param("alpha", 1.5, "positive",
              "phase factor α > 1: a phase multiplies the chosen arm's count by α "
              "(regret ≤ α × the lower bound asymptotically)")
MECHANISM = Param("mechanism", "phase-sums", "choice",
                  "phase-sums: one Lap(1/ε) per phase sum added to a running private sum (ε per "
                  "reward); renoise-cumulative: the naive variant re-noising the whole cumulative "
                  "sum at every phase end (≈ phases × ε per reward)",
                  choices=("phase-sums", "renoise-cumulative"))
HIDDEN = (fast_switch("one draw_sum per phase (False: reward by reward)"),)


@njit(cache=True)
def _dp_phase(rng, env, T, K, stop, params, actions, rows, capture):
    """The uniform kernel (actions out): :func:`_dp_phase_segments` with an empty buffer."""
    played, n_rows, draws, _, _ = _dp_phase_segments(rng, env, T, K, stop, params, actions,
                                                      rows, capture, np.zeros((4, 0), np.int64))
    return played, n_rows, draws


@njit(cache=True, inline="always")
def phase_select(rng, priv, N, imed, eps, lt, x, val):
    """The arm of the phase starting at round t_ℓ (lt = ln t_ℓ): argmax of the DP-KLUCB index,
    or argmin of DP-IMED's N_a·d_ε(x_a, x*) + ln N_a (module docstring); ties at random."""
    K = val.size
    if imed:
        best = 0.0
        for j in range(K):
            x[j] = clip01(priv[j] / N[j])
            best = max(best, x[j])
        for j in range(K):          # argmin of the index = argmax of its negation
            val[j] = -(N[j] * d_epsilon(x[j], best, eps) + np.log(N[j]))
    else:
        for j in range(K):
            val[j] = dp_klucb_index(clip01(priv[j] / N[j]), lt / N[j], eps)
    a, tie = argmax_first(val)
    if tie:
        a = tie_break(val, a, rng)
    return a


@njit(cache=True, inline="always")
def phase_range(n0, target, renoise):
    """Observations [start, stop) of a completed phase's release: the phase's own [n0, target),
    or the whole [0, target) for renoise-cumulative."""
    return (0 if renoise else n0), target


@njit(cache=True, inline="always")
def phase_commit(a, s, noise, renoise, priv, true_sum):
    """The phase's release: S̃_a += phase sum + noise (phase-sums), or S̃_a = the cumulative sum
    + noise (renoise-cumulative; ``true_sum`` already holds it).  Returns (released value, its
    clean value) for the capture."""
    if renoise:
        priv[a] = true_sum[a] + noise
        return priv[a], true_sum[a]
    priv[a] += s + noise
    return s + noise, s


@njit(cache=True)
def _dp_phase_segments(rng, env, T, K, stop, params, actions, rows, capture, segs):
    """params: ε, α, rule (0 DP-KLUCB, 1 DP-IMED), renoise (0/1), fast, then the noise scale of
    every release id (``noise_scales``: release 0, Lap(1/ε) on a sum of sensitivity 1).
    A non-empty ``segs`` buffer: the play goes there as segments (no actions written)."""
    eps = params[0]
    alpha = params[1]
    imed = params[2] != 0.0
    renoise = params[3] != 0.0
    fast = params[4] != 0.0
    scale = params[5]
    emit = segs.shape[1] > 0
    last = np.full(K, -1, np.int64)
    priv = np.zeros(K)             # S̃_a: the running private sum (renoise: the latest release)
    true_sum = np.zeros(K)         # only read by the renoise variant
    N = np.zeros(K, np.int64)
    val = np.zeros(K)
    x = np.zeros(K)
    n_rows = 0
    n_segs = 0
    t = min(K, stop)
    for a in range(t):             # initial pulls: each arm's first phase, one reward
        r = draw_reward(rng, env, a, a)
        noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, 0, 1, 0)
        n_rows += 1
        if capture.shape[1] > 0 and a == 0:
            capture[0, 0] = r + noise
            capture[1, 0] = r
        capture_release(capture, r + noise, r, scale, a, 0, 1)
        priv[a] = r + noise
        true_sum[a] = r
        N[a] = 1
        if emit:
            segs, n_segs = push_segment(segs, n_segs, last, a, a + 1, 1, 1)
        else:
            actions[a] = a
    while t < stop:
        a = phase_select(rng, priv, N, imed, eps, np.log(t + 1.0), x, val)
        n0 = N[a]
        target = phase_target(n0, alpha)
        m = target - n0
        m_ep = min(m, stop - t)
        s, segs, n_segs = play_stretch(rng, env, a, t, m_ep, fast, emit, segs, n_segs, last,
                                       actions)
        true_sum[a] += s
        if m_ep == m:               # completed phase: its release
            start, stop_ = phase_range(n0, target, renoise)
            noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, start, stop_, 0)
            released, clean = phase_commit(a, s, noise, renoise, priv, true_sum)
            capture_release(capture, released, clean, scale, a, start, stop_)
            n_rows += 1
        N[a] += m_ep
        t += m_ep
    return t, n_rows, n_rows, segs, n_segs


def max_phases(T: int, alpha: float) -> int:
    """The most phases one arm can complete within T pulls: the initial pull, then every phase
    whose target count is ≤ T (an upper bound: the arm gets at most T − K + 1 pulls)."""
    n, m = 1, 1
    while True:
        n = int(phase_target(n, float(alpha)))
        if n > T:
            return m
        m += 1


@functools.lru_cache(maxsize=64)
def _phase_release(eps: float) -> LaplaceRelease:
    return LaplaceRelease(scale=1.0 / eps, sensitivity=1.0)


class _AzizePhased(KernelPolicy):
    provenance = "reconstructed"
    exact_sampler = True
    params_spec = (EPSILON, ALPHA, MECHANISM) + HIDDEN
    kernel = _dp_phase
    segment_kernel = _dp_phase_segments
    rule: int = 0
    label: str = ""

    def __init__(self, **params):
        super().__init__(**params)
        if not self.params["alpha"] > 1.0:
            raise DpledgerError(f"alpha must be > 1 (a phase multiplies the count by α), got "
                                f"{self.params['alpha']!r}")

    def emits_segments(self):
        return bool(self.params["fast"])

    @property
    def renoise(self) -> bool:
        return self.params["mechanism"] == "renoise-cumulative"

    def kernel_params(self, T, K):
        p = self.params
        return np.concatenate([[p["epsilon"], p["alpha"], float(self.rule), float(self.renoise),
                                float(p["fast"])], self.noise_scales(T, K)])

    def row_capacity(self, T, K):
        return K * max_phases(T, self.params["alpha"]) + K

    def releases(self, T, K):
        return [_phase_release(float(self.params["epsilon"]))]

    def certificate(self, T, K):
        lap = self.releases(T, K)[0]
        if self.renoise:
            m = max_phases(T, self.params["alpha"])
            return Certificate(candidates=(Candidate(
                Composition.of([(lap, m)]), Witness(arm=0, index=0, round=1),
                f"renoise-cumulative: an arm's first reward enters every release of that arm, "
                f"at most {m} (the phases one arm can complete within T = {T} pulls; an upper "
                f"bound), each Lap(1/ε) on a sum of sensitivity 1"),))
        return Certificate(candidates=(Candidate(
            Composition.of([lap]), Witness(arm=0, index=0, round=1),
            "phases of one arm are disjoint: each reward lies in exactly one phase sum "
            "(sensitivity 1) released once with Lap(1/ε), i.e. ε; the running private sum, "
            "means and indices are post-processing"),))

    def theorem(self, T, K):
        if self.renoise:
            return theorems.azize_2025_renoise(self.params["epsilon"],
                                               max_phases(T, self.params["alpha"]), self.label)
        return theorems.azize_2025_dp(self.params["epsilon"], self.label)


class DPKLUCB(_AzizePhased):
    name = "dp-klucb"
    title = "DP-KLUCB (Azize, Wu, Honda, Orabona, Ito & Basu 2025; reconstructed)"
    rule = 0
    label = "DP-KLUCB"


class DPIMED(_AzizePhased):
    name = "dp-imed"
    title = "DP-IMED (Azize, Wu, Honda, Orabona, Ito & Basu 2025; reconstructed)"
    rule = 1
    label = "DP-IMED"


@njit(cache=True, nogil=True)
def _imed(rng, env, T, K, stop, params, actions, rows, capture):
    """IMED (Honda & Takemura 2015) for rewards in [0, 1] with the Bernoulli KL_inf: pull each
    arm once, then argmin_a N_a·kl(μ̂_a, μ̂*) + ln N_a (μ̂* = max_j μ̂_j; the leader's index is
    ln N), ties uniformly at random.  kl(p, q) with q clipped to ≤ 1 − 1e-15 so that an
    empirical best mean of exactly 1 leaves the other indices finite (≈ 34.5·N_a), as in common
    implementations (our choice; the paper's KL_inf is +∞ there)."""
    sums = np.zeros(K)
    n = np.zeros(K)
    p = np.zeros(K)
    val = np.zeros(K)
    for t in range(1, stop + 1):
        if t <= K:
            a = t - 1
        else:
            a, tie = imed_select(p, n, val)
            if tie:
                a = tie_break(val, a, rng)
        r = draw_reward(rng, env, a, t - 1)
        imed_push(a, r, sums, n, p)
        put_action(actions, t, a)
    return stop, 0, 0


@njit(cache=True, _nrt=False, forceinline=True)
def imed_select(p, n, val):
    """IMED's candidate (after the initial pulls): (a, tie) for argmin N_a·kl(μ̂_a, μ̂*) + ln N_a
    over ``val`` (its negation), the caller breaking a tie at random (no Generator here, see
    :func:`dpledger.policies.baselines.ucb1_select`).  Compiled as
    :func:`dpledger.policies.baselines.klucb_select` (``_nrt=False``, not inlined by numba;
    ``forceinline=True``: LLVM inlines the compiled body into the callers)."""
    K = val.size
    best = p[0]
    for j in range(1, K):
        best = max(best, p[j])
    q = min(best, 1.0 - 1e-15)
    for j in range(K):
        d = bernoulli_kl(p[j], q) if p[j] < best else 0.0
        val[j] = -(n[j] * d + np.log(n[j]))
    return argmax_first(val)


@njit(cache=True, inline="always")
def imed_push(a, r, sums, n, p):
    """Arm a's reward r joins its empirical mean."""
    sums[a] += r
    n[a] += 1.0
    p[a] = sums[a] / n[a]


class IMED(NonPrivatePolicy):
    """IMED (Honda & Takemura 2015), the non-private baseline of Azize et al. 2025's plots."""

    name = "imed"
    title = "IMED (Honda & Takemura 2015)"
    provenance = "faithful"
    kernel = _imed
    action_sink = True
