"""Posterior reads: the ledger's structured record for a Gaussian posterior sampled every round.

Ou, Avella Medina & Cummings 2024 (Algorithms 1–2; algorithms.md A8): in every round t of a
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
"""
from __future__ import annotations

READ_FIELDS = ("run", "arm", "first_round", "last_round", "c")


def posterior_read_mu2(k: float, c: float) -> float:
    """μ² of one posterior draw over a prefix of k ≥ 1 rewards: 1/(c(k+1)) (see module
    docstring; Ou, Avella Medina & Cummings 2024, Algorithms 1–2)."""
    return 1.0 / (c * (k + 1.0))
