"""Posterior reads: the ledger's structured record for a Gaussian posterior sampled every round.

Ou, Avella Medina & Cummings 2024 (Algorithms 1–2; docs/algorithms.md#posterior-reads): in every
round t of a
window [first_round, last_round], the policy draws θ ~ N(S/(k+1), c/(k+1)) from each arm's
posterior, where S and k are the sum and the number of the arm's rewards observed before round
t.  The draw is a Gaussian mechanism on those k rewards: the mean S/(k+1) has sensitivity
1/(k+1) to any one of them and σ² = c/(k+1), so by GDP's μ = Δ/σ (Dong, Roth, Su 2022) one
draw costs

    μ²(k) = (1/(k+1))² / (c/(k+1)) = 1/(c(k+1))                       (:func:`posterior_read_mu2`)

to each of the k rewards it reads; a draw at k = 0 reads nothing.

**What a record stores.**  ``(run, arm, first_round, last_round, c)`` and nothing per round: the
value of k at every round is a function of the arm's pull rounds q_0 < q_1 < … < q_{n−1},
which the ledger already holds as index → round segments.  The arm holds k rewards at the draws
of rounds (q_{k−1}, q_k] (with q_n = ∞), so

    count_k = |(q_{k−1}, q_k] ∩ [first_round, last_round]|,   k = 1 … n,

and reward i (observed at round q_i) is read by the draws at every k ≥ i+1:

    μ²(i) = Σ_{k=i+1}^{n} count_k · μ²(k).

Cost: O(1) memory per (run, arm) instead of one row per distinct prefix length (48 bytes per
round of a TS-Gaussian run); evaluating μ²(i) is one backward pass over the stream's pulls
(O(n) arithmetic, no memory), done only for the rewards asked about.

**Per-reward shape.**  μ²(i) is a suffix sum of non-negative terms, so it never increases with
i: within a stream (and within any range of it on which the other records are constant) the
first reward is the worst off.  The ledger ranks pieces by their first reward and evaluates the
rest only for per-reward views (``distinct_compositions``, ``dpledger show``).

**Rounding.**  The passes sum count_k · μ²(k) backwards with Neumaier's compensation, so the
reported μ² is within a few ulps of the exact sum of the rounded terms (the same terms
``math.fsum`` would sum); the certificate's worst case (one term: an arm read T − bK times at
k = b) is reproduced to the last bit.

**Exact sampler** (``bits`` > 0; :mod:`dpledger.mechanisms.noise`).  Rewards lie on the lattice
2^-bits and the draw is θ = (S·2^bits + Z)/((k+1)·2^bits) with Z ~ N_ℤ(0, s_k²) drawn exactly
(CKS20 Alg. 3): a discrete Gaussian release of the integer S·2^bits (sensitivity 2^bits) whose
lattice σ is s_k = :func:`~dpledger.accounting.releases.lattice_sigma`(√(c(k+1)), bits) ≥
2^bits·√(c(k+1)).  It is not μ-GDP; it is ρ_k-zCDP with ρ_k = 2^(2·bits)/(2s_k²) (CKS20 Thm 4),
so a record with ``bits`` > 0 carries the weight 2ρ_k in place of μ²(k) — the same suffix sums,
read as zCDP: twice the reward's ρ (:func:`posterior_read_weight`); the ledger states the total
as a :class:`~dpledger.accounting.releases.DiscreteGaussianTotal`, never as a Gaussian μ.
"""
from __future__ import annotations

import math

from dpledger.accounting.releases import DiscreteGaussianRelease, GaussianRelease, lattice_sigma

READ_FIELDS = ("run", "arm", "first_round", "last_round", "c", "bits")


def posterior_read_mu2(k: float, c: float) -> float:
    """μ² of one posterior draw over a prefix of k ≥ 1 rewards: 1/(c(k+1)) (see module
    docstring; Ou, Avella Medina & Cummings 2024, Algorithms 1–2)."""
    return 1.0 / (c * (k + 1.0))


def posterior_read_lattice_sigma(k: float, c: float, bits: int) -> int:
    """s_k: the exact sampler's lattice σ of a draw over k rewards (lattice units): the continuous
    draw's σ/Δ = √(c/(k+1))·(k+1) = √(c(k+1)), rounded up by :func:`lattice_sigma`.  The kernels
    of :mod:`dpledger.policies.ou` call this very function (compiled) to size their draws."""
    return lattice_sigma(math.sqrt(c * (k + 1.0)), bits)


def posterior_read_weight(k: float, c: float, bits: int) -> float:
    """The per-draw weight the ledger sums: μ²(k) = 1/(c(k+1)) for the float sampler (bits = 0);
    2ρ_k = (2^bits/s_k)² for the exact sampler, rounded up (two roundings of at most 2^-53
    each, covered by the factor 1 + 2^-50)."""
    if bits == 0:
        return posterior_read_mu2(k, c)
    s = float(posterior_read_lattice_sigma(k, c, bits))
    return 4.0 ** bits / (s * s) * (1.0 + 2.0 ** -50)


def posterior_read_release(k: int, c: float, bits: int = 0):
    """One posterior draw over k ≥ 1 rewards as a release description: the Gaussian of μ² =
    1/(c(k+1)) (sensitivity 1 in units of the mean's noise ratio), or with the exact sampler the
    discrete Gaussian N_ℤ(0, s_k²) of sensitivity 2^bits that the kernel draws."""
    if bits == 0:
        return GaussianRelease(sigma=1.0 / math.sqrt(posterior_read_mu2(k, c)), sensitivity=1.0)
    return DiscreteGaussianRelease(sigma=float(posterior_read_lattice_sigma(k, c, bits)),
                                   sensitivity=1 << int(bits))
