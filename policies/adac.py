"""Azize & Basu, "Concentrated differential privacy for bandits" (arXiv 2309.00557): AdaC-UCB —
RECONSTRUCTED (docs/algorithms.md#adac-ucb).  Natural log.

The AdaP-UCB skeleton (:mod:`dpledger.policies.azize_basu`) under ρ-zCDP: after one pull of
each arm (an episode of size 1), episode ℓ starts at round t_ℓ and plays
A_ℓ = argmax_a I_a(t_ℓ) until the arm's count doubles.  When an episode of n rewards ends, the
mean of *its* rewards only is released once with Gaussian noise:

    μ̃_a = (episode mean) + N(0, σ_n²),  σ_n = r/n,  r = σ/Δ solved from the target,

``GaussianRelease(sigma=r/n, sensitivity=1/n)`` (μ = 1/r for every n).  Episodes of one arm do
not overlap, so each reward is in exactly one release: ρ-zCDP with ρ = 1/(2r²), and μ-GDP with
μ = 1/r (a single Gaussian; the paper's theorem states the zCDP).  An episode cut by the end of
the run makes no release.

Index (our reading: the paper's own text was not at hand): the AdaP-UCB index with the Laplace
term replaced by the Gaussian tail of the released mean's noise,

    I = μ̃ + √(α·ln t_ℓ / (2n)) + r·√(2α·ln t_ℓ) / n,

which for r = 1/√(2ρ) is √(α·ln t_ℓ/(ρ·n²)).  Ties uniformly at random.

Privacy target: ``rho`` (ρ-zCDP per reward: r = 1/√(2ρ), rounded up), or ``epsilon`` and
``delta`` (r the smallest whose exact GDP curve meets (ε, δ), solved by dpledger's accountant,
:func:`~dpledger.accounting.calibration.gaussian_ratio_for`); ``rho`` and an explicit
``epsilon`` together are refused.

Exact sampler (rewards on the lattice 2^-b): the released mean is (S·2^b + Z)/(n·2^b) with
Z ~ N_ℤ(0, s²), s = lattice_sigma(r, b) (the same for every n), what
:func:`~dpledger.mechanisms.noise.lattice_release` records for release id log2 n: certified in
zCDP (discrete Gaussian, Canonne–Kamath–Steinke 2020), never less private than the float form
at ρ; an (ε, δ) target is solved against that recorded release (:func:`lattice_target_ratio`:
its ε(δ) is its zCDP conversion, so r is larger than the float sampler's), so that the exact
form's certificate meets the target too.

Draw order: at an episode start the tie-break draw (only on a tie), then the episode's rewards
(one :func:`~dpledger.policies.environments.draw_sum` on the fast path), then its noise.
"""
from __future__ import annotations

import math

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.calibration import accounted_sigma, gaussian_ratio_for
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import DiscreteGaussianRelease, GaussianRelease, lattice_sigma
from dpledger.errors import DpledgerError
from dpledger.mechanisms.noise import (gaussian_lattice_sigma, gaussian_noise, lattice_gaussian,
                                       write_kernel_row)
from dpledger.policies.azize_basu import adap_release_id
from dpledger.policies.base import KernelPolicy, Param, fast_switch, push_segment
from dpledger.policies.environments import draw_reward, lattice_bits
from dpledger.policies.rules import argmax_first, play_stretch, tie_break
from dpledger.policies.sink import put_action

# the privacy target, shared by the zCDP policies of issue 32 (AdaC-UCB, AdaC-GOPE)
EPSILON_TARGET = Param("epsilon", 1.0, "positive",
                       "privacy target ε per reward (with delta; σ solved by the accountant)")
DELTA_TARGET = Param("delta", 1e-6, "probability",
                     "privacy target δ (with epsilon); with rho, the δ at which the paper's "
                     "zCDP theorem is stated in (ε, δ)")
RHO_TARGET = Param("rho", None, "positive",
                   "privacy target ρ-zCDP per reward (replaces epsilon: σ/Δ = 1/√(2ρ))",
                   omit_at_default=True)


def zcdp_target_ratio(policy, given: dict, reads: int = 1) -> float:
    """σ/Δ of ``policy``'s Gaussian releases from its target (``rho`` or ``epsilon``/``delta``;
    ``given`` the parameters passed explicitly): ``reads`` releases per record."""
    p = policy.params
    if p["rho"] is not None:
        if "epsilon" in given or "eps" in given:
            raise DpledgerError(f"policy {policy.name!r}: give rho (a zCDP target) or epsilon "
                                "(an (ε, δ) target), not both")
        return gaussian_ratio_for(rho=p["rho"], reads=reads)
    return gaussian_ratio_for(epsilon=p["epsilon"], delta=p["delta"], reads=reads)


def lattice_target_ratio(policy, bits: int) -> float:
    """σ/Δ of the exact sampler's release for ``policy``'s target: the recorded release is
    the discrete Gaussian of s = lattice_sigma(σ/Δ, bits) lattice units at sensitivity 2^bits
    (:func:`~dpledger.mechanisms.noise.lattice_release`), accounted through its zCDP ρ
    (Canonne–Kamath–Steinke 2020), not the continuous Gaussian's exact GDP curve; so an (ε, δ)
    target is solved against that release (the smallest σ/Δ whose recorded release meets it,
    dpledger's accountant).  A ρ target needs no solve: s ≥ 2^bits·σ/Δ gives ρ ≤ 1/(2(σ/Δ)²)."""
    p = policy.params
    if not bits or p["rho"] is not None:
        return policy.float_ratio
    unit = 1 << int(bits)
    return accounted_sigma(lambda r: DiscreteGaussianRelease(
        sigma=float(lattice_sigma(r, int(bits))), sensitivity=unit), 1, p["epsilon"], p["delta"])


class ZcdpTarget:
    """Mixin of the policies with a ``rho`` / ``epsilon``+``delta`` target: with ``rho`` set,
    ``epsilon`` is not used, so run.json (and a rebuilt policy) leaves it out.  ``ratio_for``
    (bits): σ/Δ for the sampler (0: float) whose release the ledger records, so that the
    certificate meets the target for either sampler."""

    def ratio_for(self, bits: int) -> float:
        cache = self.__dict__.setdefault("_ratio_cache", {})
        if bits not in cache:
            cache[bits] = lattice_target_ratio(self, bits)
        return cache[bits]

    def public_params(self) -> dict:
        out = super().public_params()
        if self.params["rho"] is not None:
            out.pop("epsilon", None)
        return out


def zcdp_rho_of(ratio: float, reads: int = 1) -> float:
    """ρ of a record read ``reads`` times by Gaussians of σ/Δ = ``ratio`` (rounded up)."""
    return Composition.of([(GaussianRelease(sigma=ratio, sensitivity=1.0), reads)]).zcdp_rho()


@njit(cache=True, inline="always")
def adac_select(rng, mu, n_last, ratio, alpha, lt, index):
    """The arm of the episode starting at round t_ℓ (lt = ln t_ℓ): argmax of
    μ̃ + √(α·lt/(2n)) + r·√(2α·lt)/n (module docstring), ties uniformly at random."""
    for j in range(index.size):
        n = n_last[j]
        index[j] = mu[j] + np.sqrt(alpha * lt / (2.0 * n)) + ratio * np.sqrt(2.0 * alpha * lt) / n
    a, tie = argmax_first(index)
    if tie:
        a = tie_break(index, a, rng)
    return a


@njit(cache=True)
def adac_release(rng, bits, s_lat, sigma, total, n_ep, rows, n_rows, a, start, k):
    """The released mean of an episode of ``n_ep`` rewards summing to ``total`` (release id k,
    observations [start, start + n_ep) of arm a), its ledger row written first: float,
    total/n_ep + N(0, σ²) (σ = r/n_ep); exact, (total·2^b + Z)/(n_ep·2^b), Z ~ N_ℤ(0, s²)."""
    if bits > 0:
        write_kernel_row(rows, n_rows, a, start, start + n_ep, k, 1)
        unit = 2.0 ** bits
        return lattice_gaussian(rng.bit_generator, total * unit, s_lat, n_ep * unit)
    return total / n_ep + gaussian_noise(rng, sigma, rows, n_rows, a, start, start + n_ep, k)


@njit(cache=True)
def _adac(rng, env, T, K, stop, params, actions, rows, capture):
    """The uniform kernel (actions out): :func:`_adac_segments` with an empty segment buffer."""
    played, n_rows, draws, _, _ = _adac_segments(rng, env, T, K, stop, params, actions, rows,
                                                  capture, np.zeros((4, 0), np.int64))
    return played, n_rows, draws


@njit(cache=True)
def _adac_segments(rng, env, T, K, stop, params, actions, rows, capture, segs):
    """params: α, fast, r = σ/Δ, then σ of every release id k (r/2^k, the declared releases').
    Capture (two-row form): arm 0's initial release (released, clean reward)."""
    alpha = params[0]
    fast = params[1] != 0.0
    ratio = params[2]
    sigmas = params[3:]
    bits = lattice_bits(env)
    s_lat = gaussian_lattice_sigma(ratio, bits) if bits > 0 else np.int64(1)
    emit = segs.shape[1] > 0
    last = np.full(K, -1, np.int64)
    mu = np.zeros(K)
    n_last = np.ones(K)
    N = np.zeros(K, np.int64)
    index = np.zeros(K)
    n_rows = 0
    n_segs = 0
    t = min(K, stop)
    for a in range(t):                        # episodes of size 1: arm a at round a + 1
        x = draw_reward(rng, env, a, a)
        mu[a] = adac_release(rng, bits, s_lat, sigmas[0], x, 1, rows, n_rows, a, 0, 0)
        n_rows += 1
        N[a] = 1
        if capture.shape[1] > 0 and a == 0:
            capture[0, 0] = mu[a]
            capture[1, 0] = x
        if emit:
            segs, n_segs = push_segment(segs, n_segs, last, a, a + 1, 1, 1)
        else:
            put_action(actions, a + 1, a)
    while t < stop:
        a = adac_select(rng, mu, n_last, ratio, alpha, np.log(t + 1.0), index)
        n_ep = N[a]
        m_ep = min(n_ep, stop - t)
        s, segs, n_segs = play_stretch(rng, env, a, t, m_ep, fast, emit, segs, n_segs, last,
                                       actions)
        if m_ep == n_ep:
            k = adap_release_id(n_ep)
            mu[a] = adac_release(rng, bits, s_lat, sigmas[k], s, n_ep, rows, n_rows, a, N[a], k)
            n_rows += 1
            n_last[a] = n_ep
        N[a] += m_ep
        t += m_ep
    return t, n_rows, n_rows, segs, n_segs


class AdaCUCB(ZcdpTarget, KernelPolicy):
    name = "adac-ucb"
    title = "AdaC-UCB (Azize & Basu, arXiv 2309.00557; reconstructed index)"
    provenance = "reconstructed"
    exact_sampler = True
    params_spec = (EPSILON_TARGET, DELTA_TARGET, RHO_TARGET,
                   Param("alpha", 3.1, "positive", "exploration parameter α (> 3, as AdaP-UCB)"),
                   fast_switch("one draw_sum per episode (False: reward by reward)"))
    kernel = _adac
    segment_kernel = _adac_segments

    def __init__(self, **params):
        super().__init__(**params)
        self.float_ratio = self.ratio = zcdp_target_ratio(self, params)

    def bind_sampler(self, bits: int) -> None:
        """σ/Δ of the sampler about to run or be certified (0: float; the kernel's and the
        releases' signatures name no sampler, so the simulator, the certificate and the step
        form set it first)."""
        self.ratio = self.ratio_for(bits)

    def emits_segments(self):
        return bool(self.params["fast"])

    def kernel_params(self, T, K):
        return np.concatenate([[self.params["alpha"], float(self.params["fast"]), self.ratio],
                               [r.sigma for r in self.releases(T, K)]])

    def row_capacity(self, T, K):
        return K + K * (int(math.log2(T)) + 2)

    def release(self, k: int) -> GaussianRelease:
        """Release id k: N(0, (r/2^k)²) on a mean of 2^k rewards (sensitivity 2^-k)."""
        return GaussianRelease(sigma=math.ldexp(self.ratio, -k), sensitivity=math.ldexp(1.0, -k))

    def releases(self, T, K):
        return [self.release(k) for k in range(int(math.log2(T)) + 1)]

    def certificate(self, T, K):
        return Certificate(candidates=(Candidate(
            Composition.of([self.release(0)]), Witness(arm=0, index=0, round=1),
            "episodes of one arm do not overlap: each reward lies in exactly one episode mean "
            "(sensitivity 1/n) released once with N(0, (r/n)²), μ = 1/r; the index is "
            "post-processing"),), note="all-Gaussian: GDP composes under fully adaptive choice")

    def theorem(self, T, K):
        # the paper's theorem at the target's float σ (whatever sampler is bound: the exact
        # sampler's σ is larger, so the statement holds for it too, and it reads no state)
        return theorems.azize_basu_2023_adac("AdaC-UCB", zcdp_rho_of(self.float_ratio),
                                             self.params["delta"])
