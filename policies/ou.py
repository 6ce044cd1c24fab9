"""Ou, Avella Medina & Cummings 2024, "Thompson Sampling Itself is Differentially Private":
TS-Gaussian (Algorithm 1, Agrawal–Goyal Gaussian TS) and Modified TS, M-TS-Gaussian
(Algorithm 2).  Provenance: reconstructed constants (docs/algorithms.md#ts-gaussian,
docs/algorithms.md#m-ts-gaussian).

Model per arm: ``N(S/(k+1), c/(k+1))`` with S the sum and k the count of the arm's rewards.
M-TS-Gaussian first pulls every arm ``b`` times (inside the horizon T): round-robin
(``prepull="round-robin"``, the default) or arm by arm in index order, arm 0's b pulls first
(``prepull="arm-blocks"``: Ou et al.'s experiments, whose instances list the arms from the
highest mean down, so the best arm is pre-pulled first — their Figure 2's convex pre-pull
regret; docs/algorithms.md#m-ts-gaussian).  The order draws no noise and reads no reward: after
round bK every arm has k = b in either order, so releases, ledger records and certificate are
the same; only the rounds at which each pre-pull reward is observed differ, and the ledger's
index → round segments follow the actions.  TS-Gaussian is b = 0, c = 1.

Privacy (docs/algorithms.md#m-ts-gaussian).  Every round after the pre-pulls, every arm's sample
θ_j = S_j/(k_j+1) + N(0,
c/(k_j+1)) is a Gaussian mechanism on the arm's prefix of k_j rewards: the mean S/(k+1) has
sensitivity 1/(k+1) and σ² = c/(k+1), so μ² = 1/(c(k+1)) per draw.  The ledger records these as
one posterior-read record per arm, (arm, first sampling round, last round, c)
(:mod:`dpledger.accounting.posterior_reads`): the prefix length at every round follows from the
arm's pull rounds, which the ledger keeps as segments, so a run costs O(segments), never one
row per round.  A draw at k = 0 reads no reward and records nothing.  σ depends on k, which depends on the (public) history: ``adaptive = True`` and the
realized ledger is an odometer reading.

Certificate: a reward is read by every later sample of its arm; pre-pull rewards are read by
all T − bK post-pull rounds at k ≥ b: μ² = (T − bK)/(c(b+1)) for b ≥ 1; for b = 0 the reward
of round 1 is read by rounds 2 … T at k ≥ 1: μ² = (T − 1)/(2c).
Theorem: √(T/(c(b+1)))-GDP (reconstructed constant, :func:`theorems.ou_2024_ts_gaussian`).

Capture: with ``capture.shape[1] ≥ stop·K`` the kernel records, per round t and arm j
(column (t−1)·K + j), row 0 the sample θ, row 1 the clean mean S/(k+1), row 2 (if present) σ —
NaN for rounds without samples (pre-pulls); otherwise, if ``capture.shape[1] > 0``, the
witness release: arm 0's first sample that reads a reward (θ, clean mean).
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.posterior_reads import posterior_read_mu2, posterior_read_release
from dpledger.accounting.read_kernels import lattice_sigma_k as _lattice_sigma_k
from dpledger.mechanisms.noise import lattice_gaussian
from dpledger.policies.base import KernelPolicy, Param, RunOutput, kernel_table_size
from dpledger.policies.environments import draw_reward, lattice_bits
from dpledger.policies.sink import put_action
from dpledger.policies.rules import argmax_step, tie_break


# ---- the rule as state updates (one source for the kernel and the step form) --------------------
# State per arm: the reward sum S, the count k, 1/(k+1) (inv), √(c/(k+1)) (sig), the exact
# sampler's s_k (slat), the last sample θ.  ``mts_sweep`` is a round's draws and argmax,
# ``mts_pull`` takes the played arm's reward.  The kernel below and the step form
# (:mod:`dpledger.policies.step_rules`) call the same two.

@njit(cache=True, inline="always")
def mts_draw(rng, j, mean, sig):
    """Arm j's sample θ_j ~ N(S_j/(k_j+1), c/(k_j+1)), float sampler: ``mean`` = S_j/(k_j+1)
    plus σ·z, numba's normal(0, σ) bit for bit.  Straight-line: inlined with the Generator at
    no cost (numba reference-counts a Generator passed into an inlined helper that loops, see
    :func:`dpledger.policies.baselines.ucb1_select`)."""
    return mean + sig[j] * rng.standard_normal()


@njit(cache=True, inline="always")
def mts_draw_lattice(rng, unit, j, S, k, slat):
    """Arm j's sample, exact sampler: (S·2^b + Z)/((k+1)·2^b), Z ~ N_ℤ(0, s_k²)."""
    return lattice_gaussian(rng.bit_generator, S[j] * unit, slat[j], (k[j] + 1.0) * unit)


@njit(cache=True, inline="always")
def mts_note(capture, full_capture, witness, t, j, K, v, mean, spread, k0):
    """Arm j's sample v in the capture (every sample with ``full_capture``, row 2 its
    ``spread``: σ, or s_k with the exact sampler; else the first witness: arm 0's first sample
    with k0 = k_0 ≥ 1); returns whether the witness is still wanted.  The sampler is branched on by the callers, never here: a
    branch that numba cannot prune inside an inlined helper (a call that may raise) makes it
    reference-count every array argument (ts-gaussian 340 ns a round instead of 44)."""
    if full_capture:
        col = (t - 1) * K + j
        capture[0, col] = v
        capture[1, col] = mean
        if capture.shape[0] > 2:
            capture[2, col] = spread
    elif witness and j == 0 and k0 > 0:
        capture[0, 0] = v
        capture[1, 0] = mean
        witness = False
    return witness


@njit(cache=True)
def mts_sweep(rng, bits, unit, S, k, inv, sig, slat, live, theta, capture, full_capture,
              witness, t):
    """Round t's samples and arm: every live arm j draws θ_j (:func:`mts_draw`) in arm order,
    and the argmax is taken in the same sweep (:func:`~dpledger.policies.rules.argmax_step`:
    argmax_random_tie's comparisons); ties uniformly at random.  An arm that is not ``live``
    (the step form's frozen arm: a read the budget refused) draws nothing and keeps its last
    sample.  Capture by :func:`mts_note`; returns (arm, witness still wanted).  The step form's
    round; the kernel writes the same loop out (the Generator must not enter an inlined helper
    that loops)."""
    best = 0.0
    a = 0
    tie = False
    K = theta.size
    for j in range(K):
        mean = S[j] * inv[j]
        if live[j]:
            if bits > 0:
                theta[j] = mts_draw_lattice(rng, unit, j, S, k, slat)
            else:
                theta[j] = mts_draw(rng, j, mean, sig)
        v = theta[j]
        if j == 0:
            best = v
        else:
            best, a, tie = argmax_step(v, j, best, a, tie)
        witness = mts_note(capture, full_capture, witness, t, j, K, v, mean,
                           slat[j] if bits > 0 else sig[j], k[0])
    if tie:
        a = tie_break(theta, a, rng)
    return a, witness


@njit(cache=True, inline="always")
def prepull_arm(t, b, K, blocks):
    """The arm of pre-pull round t ≤ bK: round robin (arm (t − 1) mod K), or with ``blocks``
    arm by arm in index order (arm ⌊(t − 1)/b⌋: Ou et al.'s pre-pull order)."""
    return (t - 1) // b if blocks else (t - 1) % K


@njit(cache=True, inline="always")
def mts_pull(a, x, S, k):
    """Arm a's reward x joins its posterior: S_a += x, k_a += 1; then its scales by
    :func:`mts_scales_table` while k < the tables' size, else :func:`mts_scales` (the same
    IEEE operations, so the same doubles), and with the exact sampler its s_k
    (:func:`mts_pull_lattice`).  The callers branch, the helpers do not (see :func:`mts_note`:
    inlined with a branch, this pull made ts-gaussian 2× slower)."""
    S[a] += x
    k[a] += 1


@njit(cache=True, inline="always")
def mts_scales_table(a, k, inv, sig, tab_inv, tab_sig):
    """1/(k+1) and √(c/(k+1)) of arm a from the run's tables (kernel_params)."""
    inv[a] = tab_inv[k[a]]
    sig[a] = tab_sig[k[a]]


@njit(cache=True, inline="always")
def mts_scales(a, c, k, inv, sig):
    """1/(k+1) and √(c/(k+1)) of arm a, computed."""
    inv[a] = 1.0 / (k[a] + 1.0)
    sig[a] = np.sqrt(c * inv[a])


@njit(cache=True, inline="always")
def mts_pull_lattice(a, c, bits, k, slat):
    """The exact sampler's s_k of arm a after :func:`mts_pull`."""
    slat[a] = _lattice_sigma_k(float(k[a]), c, bits)


@njit(cache=True, nogil=True)
def _mts_gaussian(rng, env, T, K, stop, params, actions, rows, capture):
    """params: b (pre-pulls per arm), c (variance scale), n and the two tables below, then the
    pre-pull order (0 round-robin, 1 arm blocks; absent: round-robin).

    Writes no ledger rows: every round after the pre-pulls, each arm with k ≥ 1 rewards draws
    once from N(S/(k+1), c/(k+1)), a Gaussian release reading its first k rewards, so the whole
    read schedule is a function of the actions; ``finish`` records it as one posterior-read
    record per arm (:mod:`dpledger.accounting.posterior_reads`), whose per-reward totals the
    ledger derives from the index → round segments.  The kernel counts its draws so the tests
    can hold the expanded reads against them.

    Exact sampler (a lattice environment, rewards on 2^-b): θ = (S·2^b + Z)/((k+1)·2^b) with
    Z ~ N_ℤ(0, s_k²) drawn exactly (:func:`~dpledger.mechanisms.noise.discrete_gaussian_int`),
    s_k = ``posterior_read_lattice_sigma(k, c, b)`` ≥ 2^b·√(c(k+1)); with full capture row 2
    holds s_k (lattice units) instead of σ.  The choice is made at compile time (the float
    path's draws are unchanged)."""
    b = np.int64(params[0])
    c = params[1]
    # 1/(k+1) and √(c/(k+1)) for k < n_tab, computed once per run (kernel_params): on the
    # round-to-round dependency chain a division and a square root cost ≈ 6 ns a round
    n_tab = np.int64(params[2]) if params.size > 2 else 0
    tab_inv = params[3:3 + n_tab]
    tab_sig = params[3 + n_tab:3 + 2 * n_tab]
    blocks = params.size > 3 + 2 * n_tab and params[3 + 2 * n_tab] != 0.0
    bits = lattice_bits(env)
    unit = 2.0 ** bits                   # lattice steps per unit of reward (exact)
    slat = np.ones(K, np.int64)          # s_k per arm (exact sampler)
    if bits > 0:
        slat[:] = _lattice_sigma_k(0.0, c, bits)
    S = np.zeros(K)
    k = np.zeros(K, np.int64)
    inv = np.ones(K)                     # 1/(k+1)
    sig = np.full(K, np.sqrt(c))         # √(c/(k+1))
    theta = np.zeros(K)
    draws = 0
    full_capture = capture.shape[1] >= stop * K and capture.shape[1] > 0
    witness = capture.shape[1] > 0 and not full_capture
    pre = b * K
    for t in range(1, stop + 1):
        if t <= pre:
            a = prepull_arm(t, b, K, blocks)
            if full_capture:
                for j in range(K):
                    for row in range(capture.shape[0]):
                        capture[row, (t - 1) * K + j] = np.nan
        else:
            best = 0.0                       # mts_sweep's round, every arm live
            a = 0
            tie = False
            for j in range(K):
                mean = S[j] * inv[j]
                if bits > 0:
                    v = mts_draw_lattice(rng, unit, j, S, k, slat)
                else:
                    v = mts_draw(rng, j, mean, sig)
                theta[j] = v
                if j == 0:
                    best = v
                else:
                    best, a, tie = argmax_step(v, j, best, a, tie)
                if full_capture or witness:     # (a call taken only then: see mts_note)
                    witness = mts_note(capture, full_capture, witness, t, j, K, v, mean,
                                       slat[j] if bits > 0 else sig[j], k[0])
            if tie:
                a = tie_break(theta, a, rng)
            draws += K                       # also at k = 0 (reads nothing, no record)
        x = draw_reward(rng, env, a, t - 1)
        mts_pull(a, x, S, k)
        if k[a] < tab_inv.size:
            mts_scales_table(a, k, inv, sig, tab_inv, tab_sig)
        else:
            mts_scales(a, c, k, inv, sig)
        if bits > 0:
            mts_pull_lattice(a, c, bits, k, slat)
        put_action(actions, t, a)
    return stop, 0, draws


class MTSGaussian(KernelPolicy):
    name = "mts-gaussian"
    title = "Modified Thompson sampling with Gaussian priors, M-TS-Gaussian (Ou et al. 2024, Alg. 2)"
    provenance = "reconstructed"
    params_spec = (Param("b", 0, "int", "pre-pulls of every arm (inside T)"),
                   Param("c", 1.0, "positive", "variance scale c of N(S/(k+1), c/(k+1))"),
                   Param("prepull", "round-robin", "choice",
                         "order of the b pre-pulls: round-robin, or arm-blocks (arm 0's b "
                         "pulls, then arm 1's, …: Ou et al.'s experiments, best arm first on "
                         "instances listed from the highest mean down)",
                         choices=("round-robin", "arm-blocks"), omit_at_default=True))
    adaptive = True
    exact_sampler = True
    lattice_certificate = True      # certificate(T, K, lattice_bits) states the discrete reads
    kernel = _mts_gaussian
    action_sink = True

    @property
    def b(self) -> int:
        return int(self.params.get("b", 0))

    @property
    def c(self) -> float:
        return float(self.params.get("c", 1.0))

    @property
    def prepull(self) -> str:
        return str(self.params.get("prepull", "round-robin"))

    def kernel_params(self, T, K):
        """[b, c, n, 1/(k+1) for k < n, √(c/(k+1)) for k < n, order], n =
        kernel_table_size(T): the kernel's per-pull division and square root, computed once
        (the same IEEE operations, so the same doubles as computing them in the kernel), and the
        pre-pull order (1 for arm blocks)."""
        n = kernel_table_size(T)
        inv = 1.0 / (np.arange(n, dtype=np.float64) + 1.0)
        order = 1.0 if self.prepull == "arm-blocks" else 0.0
        return np.concatenate([[float(self.b), self.c, float(n)], inv, np.sqrt(self.c * inv),
                               [order]])

    def row_capacity(self, T, K):
        return 1                   # no kernel rows: the reads are one record per arm

    def releases(self, T, K):
        return []                  # every release is a posterior read

    def finish(self, out: RunOutput, T: int, K: int) -> RunOutput:
        played = out.rounds_played()
        first = self.b * K + 1     # the first round that samples
        if played >= first:
            out.posterior_reads = {"arm": np.arange(K, dtype=np.int64), "first_round": first,
                                   "last_round": played, "c": self.c}
        return out

    def certificate_reads(self, T: int, K: int) -> tuple[int, float]:
        """(number of reads, μ² per read) of the worst-off reward
        (docs/algorithms.md#m-ts-gaussian); the accounting composes
        them."""
        b, c = self.b, self.c
        if b >= 1:
            return max(T - b * K, 0), float(posterior_read_mu2(float(b), c))   # all at k = b
        return max(T - 1, 0), float(posterior_read_mu2(1.0, c))                 # all at k = 1

    def certificate(self, T, K, lattice_bits: int = 0):
        """The worst reward's reads (docs/algorithms.md#m-ts-gaussian); with the exact sampler
        (``lattice_bits`` > 0) each
        read is the discrete Gaussian the kernel draws at that k (posterior_read_release), so
        the certificate is stated in zCDP, never with the continuous formulas."""
        reads, _ = self.certificate_reads(T, K)
        b = self.b
        k_read = b if b >= 1 else 1
        comp = Composition.of([(posterior_read_release(k_read, self.c, lattice_bits), reads)]) \
            if reads > 0 else Composition()
        if b >= 1:
            basis = (f"a pre-pull reward of an arm never pulled again is read by all T − bK = "
                     f"{reads} later samples of its arm, each at k = b: μ² = 1/(c(b+1)) per read "
                     f"(mean S/(k+1) of sensitivity 1/(k+1), σ² = c/(k+1)); later rewards are "
                     f"read fewer times at larger k")
            witness = Witness(arm=0, index=0, round=1)
        else:
            basis = ("the reward of round 1, its arm never pulled again, is read by the samples "
                     f"of rounds 2 … T ({reads} reads) at k = 1: μ² = 1/(2c) per read; every "
                     "other reward is read by fewer rounds at k ≥ 1")
            witness = Witness(arm=0, index=0, round=1)
        if lattice_bits:
            basis += (f"; exact sampler: rewards on the lattice 2^-{lattice_bits}, each read the "
                      f"discrete Gaussian N_Z(0, s_k^2) with s_k >= 2^{lattice_bits}·sqrt(c(k+1))")
            return Certificate(candidates=(Candidate(comp, witness, basis),), adaptive=True,
                               note="discrete Gaussian: zCDP composes under fully adaptive "
                                    "choice of σ (no GDP μ is claimed)")
        return Certificate(candidates=(Candidate(comp, witness, basis),), adaptive=True,
                           note="all-Gaussian: GDP composes under fully adaptive choice of σ")

    def theorem(self, T, K):
        return theorems.ou_2024_ts_gaussian(T, self.b, self.c)


class TSGaussian(MTSGaussian):
    name = "ts-gaussian"
    title = "Thompson sampling with Gaussian priors, TS-Gaussian (Ou et al. 2024, Alg. 1)"
    params_spec = ()
