"""One-run audits with canaries (docs/audits.md#one-run-audits).

Steinke, Nasr & Jagielski 2023 ("Privacy auditing with one (1) training run", NeurIPS), applied
to a bandit: **one** run of T rounds on a reward table in which m rows — the canary positions,
fixed before the run — each hold the range's high end (for every arm) or its low end, chosen by
a private fair coin per canary; every other row holds a known value.  Two tables that differ in
one canary's coin are neighbours (one row), so a per-reward ε-DP policy is ε-DP in each coin
given the others — the theorem's hypothesis.

The auditor scores each canary from what its mode lets it see, guesses the coins of the k
canaries it is most confident about, and counts the correct guesses v.  The theorem (§3; its
p-value as the paper's Appendix D evaluates it): under (ε, δ)-DP,

    P[v ≥ v₀] ≤ P[Binom(k, q) ≥ v₀] + 2mδ · max_{1≤i≤v₀} P[v₀ − i ≤ Binom(k, q) < v₀] / i,
    q = e^ε / (1 + e^ε),

exact binomial tails (no normal approximation).  The lower bound is the largest ε whose p-value
is ≤ α (bisection; the returned ε itself satisfies it).  Every k of the guess grid
(:data:`GUESS_FRACTIONS`, fixed in advance) is tested at α/|grid| (Bonferroni); the reported
bound is the largest.  A μ-GDP certificate is audited in μ: μ-GDP is (ε, δ_μ(ε))-DP for every ε
(Dong, Roth & Su 2022, Cor. 2.13), so inf_ε of the (ε, δ_μ(ε)) p-values (on a fixed ε grid) is a
valid p-value of "μ-GDP"; μ_lower is the largest μ it rejects.

**Scores.**  White-box: the releases the run made (the kernel's full capture: value, noise
scale, arm and the observation range [start, stop) it sums, the same call that writes the
ledger row, :func:`~dpledger.policies.rules.capture_release`).  The auditor maps observation j
of arm a to its round through the actions, subtracts the known rewards of every release, and
adds, per canary, the log-likelihood ratio of each release containing it with the other
canaries of that release at their mean: clip(2w − Δ, −Δ, Δ)/b for a Laplace release of scale b,
w = value − known part − Δ·(canaries in it − 1)/2, Δ = 1 (the kernels' rewards are rescaled
to [0, 1], and so are their releases); Δ(w − Δ/2)/s² for a Gaussian one of σ s — the
Gaussian-mean policies' releases (TS-Gaussian's posterior reads S/(k+1), DP-TS-UCB's epoch
means) taken back to sum space by their divisor (:class:`Releases`).  A canary alone in its releases
is scored by the exact Neyman–Pearson statistic; canaries sharing a release interfere (Keinan et
al. 2025, "How well can differential privacy be audited in one run?"), which lowers the power,
never the validity: any guess computed from the output is covered by the theorem.  Black-box:
the pulls of the canary's arm after its round, centred at the median over canaries.  Ties in
confidence are broken by a seeded permutation drawn independently of the coins.

**Design** (:func:`one_run_design`).  Default (DP-UCB: :data:`SPACED`): K = m arms and the canaries in rows 1 … m, the
initial pulls (round a + 1 plays arm a in every policy here), so each canary is its arm's first
reward (TS-Gaussian, which has no initial pulls: mapped to the arm played there); the other
rows hold the range's midpoint.  Each canary then lies in the releases of its
own arm only; T = m × the pulls per arm of :data:`PULLS_PER_ARM` (1 for the epoch policies, whose
first reward is its own release; more for the policies whose first reward enters several);
the Gaussian-mean policies: T = bK + :data:`EXTRA_ROUNDS` (M-TS-Gaussian's b ≥ 1 pre-pulls) or
m + EXTRA_ROUNDS, so a canary is read by the 16 rounds after the canary rows.

**Ceiling.**  The largest bound the method can give at m: every guess right at the grid's
largest k (k = m), at α/|grid|.  The result reports the bound as a fraction of the ceiling and
of the certificate.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpledger.errors import DpledgerError, check_count

GUESS_FRACTIONS = (0.01, 0.03, 0.1, 0.3, 1.0)
DEFAULT_CONFIDENCE = 0.95
# pulls per arm of the default design (T = m × pulls): the epoch policies release an arm's first
# reward alone at once; DP-UCB's first reward enters the p-sums at its arm's pulls 1, 2, 4, …;
# DP-KLUCB / DP-IMED re-release it (renoise-cumulative) at each phase end
PULLS_PER_ARM = {"dp-klucb": 64, "dp-imed": 64, "dp-ts": 16, "dp-ts-mt": 16}
# policies whose per-reward certificate shrinks with K (DP-UCB splits ε over the K trees: ε/K):
# K = 2 and canaries every s rows (row 1 + s·i, T = s·m), each mapped to its arm by the actions
SPACED = {"dp-ucb": 16}
# kernels that capture every Laplace release they make (capture_release), sums of rewards
LAPLACE_WHITEBOX = ("lazy-dp-ts", "adap-ucb", "adap-klucb", "anytime-lazy-ucb", "dp-ucb",
                    "dp-ts", "dp-klucb", "dp-imed")
# Gaussian-mean policies: TS-Gaussian / M-TS-Gaussian draw one posterior read per arm per round
# (the kernel's full (3, T·K) capture), DP-TS-UCB fresh samples of its epoch means
# (capture_release rows); their design is K = m arms and EXTRA_ROUNDS rounds of reads after the
# rows that hold the canaries, so the certificate (reads of the row-1 reward) stays small
GAUSSIAN_POSTERIOR = ("ts-gaussian", "mts-gaussian")
GAUSSIAN_SAMPLES = ("dp-ts-ucb",)
EXTRA_ROUNDS = 16
WHITEBOX_POLICIES = LAPLACE_WHITEBOX + GAUSSIAN_POSTERIOR + GAUSSIAN_SAMPLES
_BISECT_STEPS = 48
_MU_EPS_GRID = 400


# ---- the theorem's p-value and the bounds -----------------------------------------------------

def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float = 0.0) -> float:
    """P-value of v correct guesses out of r (m canaries) under (ε, δ)-DP: the module's bound,
    exact binomial tails (scipy's ``binom``), capped at 1."""
    from scipy.stats import binom
    if not 0 <= v <= r <= m:
        raise DpledgerError(f"one-run counts need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    if v == 0:
        return 1.0
    q = 1.0 / (1.0 + math.exp(-epsilon))
    p = float(binom.sf(v - 1, r, q))
    if delta > 0.0:
        # max over i of P[v − i ≤ B < v] / i: the partial sums of the pmf below v
        pmf = binom.pmf(np.arange(v - 1, -1, -1), r, q)       # B = v−1, v−2, …, 0
        p += 2.0 * m * delta * float(np.max(np.cumsum(pmf) / np.arange(1, v + 1)))
    return min(1.0, p)


def _largest_below(pvalue, alpha: float, hi0: float) -> float:
    """The largest x ≥ 0 with pvalue(x) ≤ α for a p-value increasing in x (0 if none): bisection
    keeping pvalue(lo) ≤ α, so the returned x is itself rejected (rounded toward less leakage)."""
    if pvalue(0.0) > alpha:
        return 0.0
    hi = hi0
    while pvalue(hi) <= alpha:
        hi *= 2.0
        if hi > 1e4:
            return hi          # every guess right at huge m: no finite cap (not reached here)
    lo = 0.0
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        if pvalue(mid) <= alpha:
            lo = mid
        else:
            hi = mid
    return lo


def epsilon_lower(m: int, r: int, v: int, alpha: float, delta: float = 0.0) -> float:
    """The largest ε that v correct guesses of r (m canaries) reject at level α under
    (ε, δ)-DP (:func:`one_run_p_value`)."""
    return _largest_below(lambda e: one_run_p_value(m, r, v, e, delta), alpha, 1.0)


def _p_values(m: int, r: int, v: int, eps: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """:func:`one_run_p_value` at every (ε, δ) pair of two equal-length arrays at once."""
    from scipy.stats import binom
    q = 1.0 / (1.0 + np.exp(-eps))
    p = binom.sf(v - 1, r, q)
    if np.any(deltas > 0.0):
        pmf = binom.pmf(np.arange(v - 1, -1, -1)[None, :], r, q[:, None])
        worst = np.max(np.cumsum(pmf, axis=1) / np.arange(1, v + 1)[None, :], axis=1)
        p = p + 2.0 * m * deltas * worst
    return np.minimum(1.0, p)


def gdp_p_value(m: int, r: int, v: int, mu: float) -> float:
    """P-value of "μ-GDP": the smallest (ε, δ_μ(ε)) p-value over a fixed ε grid (each is valid,
    so their minimum is; δ_μ rounded up by :func:`~dpledger.accounting.gdp.gdp_delta`)."""
    from dpledger.accounting.gdp import gdp_delta
    if v == 0:
        return 1.0
    if mu <= 0.0:
        return one_run_p_value(m, r, v, 0.0, 0.0)
    top = mu * mu / 2.0 + 8.0 * mu + 1.0
    eps = np.linspace(0.0, top, _MU_EPS_GRID)
    deltas = np.array([gdp_delta(float(e), mu) for e in eps])
    return float(np.min(_p_values(m, r, v, eps, deltas)))


def mu_lower(m: int, r: int, v: int, alpha: float) -> float:
    """The largest μ that v correct guesses of r reject at level α (:func:`gdp_p_value`)."""
    return _largest_below(lambda u: gdp_p_value(m, r, v, u), alpha, 1.0)


def guess_grid(m: int, guesses: int | None = None) -> list[int]:
    """The numbers of guesses tested: ``guesses`` alone, or ⌈f·m⌉ for f in GUESS_FRACTIONS."""
    if guesses is not None:
        return [int(guesses)]
    return sorted({max(1, math.ceil(f * m)) for f in GUESS_FRACTIONS})


def bound_from_guesses(m: int, correct_at: dict[int, int], alpha: float, currency: str,
                       delta: float = 0.0) -> tuple[float, int, list[dict]]:
    """(bound, k of the bound, per-k rows) for correct-guess counts {k: v}, each k at
    α/len(correct_at)."""
    a = alpha / len(correct_at)
    rows, best, best_k = [], 0.0, min(correct_at)
    for k, v in sorted(correct_at.items()):
        b = (mu_lower(m, k, v, a) if currency == "mu" else epsilon_lower(m, k, v, a, delta))
        rows.append({"guesses": int(k), "correct": int(v), "bound": float(b)})
        if b > best:
            best, best_k = b, k
    return best, best_k, rows


def method_ceiling(m: int, grid: list[int], alpha: float, currency: str,
                   delta: float = 0.0) -> float:
    """The largest bound at m: all of the grid's largest k guesses right, at α/|grid|."""
    k = max(grid)
    a = alpha / len(grid)
    return mu_lower(m, k, k, a) if currency == "mu" else epsilon_lower(m, k, k, a, delta)


def guesses_from_scores(scores: np.ndarray, centre: float, order_key: np.ndarray,
                        grid: list[int]) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """(guess per canary (1 = high end), confidence order, the top-k index sets): the guess is
    score > centre (ties: high), confidence |score − centre|, ties broken by ``order_key`` (a
    seeded permutation independent of the coins)."""
    guess = (scores >= centre).astype(np.int8)
    conf = np.abs(scores - centre)
    order = np.lexsort((order_key, -conf))
    return guess, order, {k: order[:k] for k in grid}


# ---- the bandit design and run ---------------------------------------------------------------

@dataclass(frozen=True)
class CanaryDesign:
    """Where the m canaries sit: rows (1-based) of a (T, K) table whose other rows hold
    ``rest``; a canary row holds ``hi`` (coin 1) or ``lo`` (coin 0) for every arm."""

    horizon: int
    arms: int
    rows: tuple[int, ...]
    lo: float
    hi: float
    rest: float
    description: str

    def table(self, coins: np.ndarray) -> np.ndarray:
        tab = np.full((self.horizon, self.arms), self.rest, dtype=np.float64)
        idx = np.asarray(self.rows, dtype=np.int64) - 1
        tab[idx, :] = np.where(coins[:, None] == 1, self.hi, self.lo)
        return tab

    def to_json(self) -> dict:
        r = self.rows
        step = r[1] - r[0] if len(r) > 1 else 1
        regular = r == tuple(range(r[0], r[0] + step * len(r), step))
        return {"horizon": self.horizon, "arms": self.arms, "canaries": len(r),
                "rows": ([int(r[0]), int(r[-1])] if regular else [int(x) for x in r]),
                "rows_form": (f"first, last (every {step})" if regular else "listed"),
                "range": [self.lo, self.hi], "rest": self.rest,
                "description": self.description}


def one_run_design(policy, m: int, T: int | None = None, K: int | None = None,
                   lo: float = 0.0, hi: float = 1.0) -> CanaryDesign:
    """The default design (module docstring): K = m, canaries in rows 1 … m (the initial pulls),
    T = m × PULLS_PER_ARM; with K < m given, the canaries are rows 1 … m all the same (each
    mapped to its arm through the actions).  Refuses m > T."""
    from dpledger.policies.base import validate_horizon
    m = check_count("canaries", m, minimum=1)
    name = getattr(policy, "name", "")
    if name in SPACED and K is None:
        s = SPACED[name]
        T = validate_horizon(s * m if T is None else T, 2)
        if s * (m - 1) + 1 > T:
            raise DpledgerError(f"--canaries {m} spaced {s} rows apart need T >= "
                                f"{s * (m - 1) + 1}, got {T}")
        return CanaryDesign(int(T), 2, tuple(range(1, s * (m - 1) + 2, s)), float(lo),
                            float(hi), float(lo + (hi - lo) / 2.0),
                            f"K = 2 (the per-reward certificate is split over K trees), "
                            f"canaries in rows 1 + {s}·i, i < {m}, each mapped to the arm "
                            f"played there; the other rows hold the range's midpoint; T = {T}")
    if K is None:
        K = max(2, m)
    K = check_count("arms", K, minimum=2)
    prepulls = int(getattr(policy, "b", 1)) if name in GAUSSIAN_POSTERIOR else 1
    if T is None:
        T = (max(m, K) * max(1, prepulls) + EXTRA_ROUNDS if name in GAUSSIAN_POSTERIOR
             + GAUSSIAN_SAMPLES else max(m, K) * PULLS_PER_ARM.get(name, 2))
    T = validate_horizon(T, K)
    if m > T:
        raise DpledgerError(f"--canaries {m} is larger than the horizon T = {T}: each canary "
                            "is one row of the reward table")
    if prepulls == 0:       # TS-Gaussian (b = 0): rounds 1 … m are argmaxes of the draws
        where = (f" of K = {K} arms, each mapped to the arm played there (no initial pulls: "
                 "an arm may hold several canaries)")
    elif K >= m:
        where = (f", the initial pulls of K = {K} arms (row a + 1 plays arm a): each canary is "
                 "its arm's first reward")
    else:
        where = f" of K = {K} arms (each mapped to the arm played there)"
    desc = f"canaries in rows 1 … {m}{where}; the other rows hold the range's midpoint; T = {T}"
    return CanaryDesign(int(T), int(K), tuple(range(1, m + 1)), float(lo), float(hi),
                        float(lo + (hi - lo) / 2.0), desc)


def _run_once(policy, env, T: int, K: int, rng, whitebox: bool):
    """One run of the policy's kernel with the full capture (white-box) and the actions."""
    from dpledger.audits.policy import _uses_kernel
    if not _uses_kernel(policy):
        raise DpledgerError(f"policy {policy.name!r} has no compiled kernel to run with canaries")
    rows = np.zeros((5, max(policy.row_capacity(T, K), 1)), dtype=np.int64)
    cap = np.zeros(capture_shape(policy.name, T, K)) if whitebox else np.zeros((2, 0))
    actions = np.zeros(T, dtype=np.int64)
    played, n_rows, _ = type(policy).kernel(rng, env.as_tuple(), T, K, T,
                                            policy.kernel_params(T, K), actions, rows, cap)
    if int(played) != T:
        raise DpledgerError(f"policy {policy.name!r} stopped at round {played} of {T}")
    if whitebox and cap.shape[0] >= 6 and cap[4, 0] != 0.0:
        raise DpledgerError("the run's releases overflowed the capture buffer")
    return actions, rows[:, :int(n_rows)], cap


def capture_shape(name: str, T: int, K: int) -> tuple[int, int]:
    """The white-box capture array a run needs, refused in one line when it does not fit in
    memory (with the scoring's working arrays, about 4 × the capture): TS-Gaussian's full
    capture is one (θ, mean, σ) column per round and arm; DP-TS-UCB makes at most one fresh
    sample per arm and round after the K initial pulls; the Laplace kernels at most one p-sum
    or block per pull, plus slack."""
    from dpledger.resources import check_fits
    if name in GAUSSIAN_POSTERIOR:
        shape = (3, T * K)
    elif name in GAUSSIAN_SAMPLES:
        shape = (6, K * max(T - K, 0) + K + 8)
    else:
        shape = (6, 2 * T + 2 * K + 8)
    check_fits(f"this white-box one-run audit (T = {T}, K = {K}: {shape[1]} captured "
               "releases)", 4 * 8 * shape[0] * shape[1], "use fewer --canaries")
    return shape


def _observations(actions: np.ndarray, K: int):
    """Per arm, its rounds (0-based) in order: observation j of arm a is round rounds[a][j]."""
    order = np.argsort(actions, kind="stable")
    counts = np.bincount(actions, minlength=K)
    starts = np.concatenate([[0], np.cumsum(counts)])
    return order, starts, counts


def _canary_index(actions, design: CanaryDesign, K: int):
    """(arm, observation index) of every canary, from the actions."""
    order, starts, _ = _observations(actions, K)
    pos = np.empty(actions.size, dtype=np.int64)
    pos[order] = np.arange(actions.size) - starts[actions[order]]
    r = np.asarray(design.rows, dtype=np.int64) - 1
    return actions[r], pos[r]


@dataclass(frozen=True)
class Releases:
    """The captured releases in sum space: ``value`` = the arm's reward sum over observations
    [start, stop) plus noise of scale ``scale`` (Laplace b or Gaussian σ), in the kernels'
    [0, 1] reward units.  A release of a mean (DP-TS-UCB's samples, a posterior's S/(k+1)) is
    multiplied back by its divisor, value and scale alike."""

    value: np.ndarray
    scale: np.ndarray
    arm: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    gaussian: bool

    @classmethod
    def from_capture(cls, cap: np.ndarray, gaussian: bool = False) -> Releases:
        """The (6, M) capture of :func:`~dpledger.policies.rules.capture_release`; with
        ``gaussian`` the released statistic is the mean of its n = stop − start observations."""
        n = int(cap[5, 0])
        y, b = cap[0, 1:n + 1], cap[2, 1:n + 1]
        start, stop = cap[4, 1:n + 1].astype(np.int64), cap[5, 1:n + 1].astype(np.int64)
        mult = (stop - start).astype(np.float64) if gaussian else 1.0
        return cls(y * mult, b * mult, cap[3, 1:n + 1].astype(np.int64), start, stop, gaussian)

    @classmethod
    def from_posterior(cls, cap: np.ndarray, actions: np.ndarray, K: int) -> Releases:
        """TS-Gaussian's full capture (column (t − 1)·K + j: θ, its clean mean, σ): each read
        at k ≥ 1 is N(S/(k+1), σ²) on the arm's first k observations (k from the actions)."""
        T = actions.size
        before = _pulls_before(actions, K)                         # (T, K): k at round t
        theta = cap[0].reshape(T, K)
        sig = cap[2].reshape(T, K)
        keep = (before >= 1) & np.isfinite(theta)
        t_idx, arm = np.nonzero(keep)
        k = before[t_idx, arm].astype(np.float64)
        return cls(theta[t_idx, arm] * (k + 1.0), sig[t_idx, arm] * (k + 1.0), arm,
                   np.zeros(arm.size, dtype=np.int64), k.astype(np.int64), True)


def _pulls_before(actions: np.ndarray, K: int) -> np.ndarray:
    """(T, K) array: pulls of each arm in the rounds before round t (row t − 1)."""
    T = actions.size
    onehot = np.zeros((T, K), dtype=np.int32)
    onehot[np.arange(T), actions] = 1
    before = np.cumsum(onehot, axis=0, dtype=np.int32)
    before -= onehot
    return before


def check_posterior_reads(policy, actions: np.ndarray, cap: np.ndarray, K: int) -> None:
    """Every captured read must be one the ledger's posterior-read record names
    (:mod:`dpledger.accounting.posterior_reads`: every arm, rounds bK + 1 … T, σ² = c/(k+1)):
    the rounds that sample and their σ, recomputed from the actions."""
    T = actions.size
    first = int(policy.b) * K + 1
    theta = cap[0].reshape(T, K)
    sampled = np.isfinite(theta)
    rounds = np.arange(1, T + 1)[:, None]
    if np.any(sampled != (rounds >= first)):
        raise DpledgerError("the run's posterior reads differ from the rounds its ledger "
                            f"record names ({first} … {T})")
    k = _pulls_before(actions, K)[first - 1:]
    want = np.sqrt(float(policy.c) / (k + 1.0))
    if not np.allclose(cap[2].reshape(T, K)[first - 1:], want, rtol=1e-12, atol=0.0):
        raise DpledgerError("a captured posterior read's sigma is not the sqrt(c/(k+1)) its "
                            "ledger record states")


def whitebox_scores(actions, cap, design: CanaryDesign, K: int,
                    releases: Releases | None = None) -> tuple[np.ndarray, dict]:
    """Per-canary LLR score from the captured releases (module docstring; Laplace sums unless
    ``releases`` says otherwise), computed from the release values, scales and ranges, the
    actions and the known rows only (never the captured clean statistics, which hold the
    coins)."""
    rel = Releases.from_capture(cap) if releases is None else releases
    T = actions.size
    n = rel.value.size
    y, b, arm, start, stop = rel.value, rel.scale, rel.arm, rel.start, rel.stop
    # the kernels see rewards rescaled to [0, 1] (policies/environments.py), so do the releases
    delta = 1.0
    known_tab = np.full(T, (design.rest - design.lo) / (design.hi - design.lo))
    crow = np.asarray(design.rows, dtype=np.int64) - 1
    known_tab[crow] = 0.0                             # a canary counts as lo in the known part
    order, starts, counts = _observations(actions, K)
    # per arm, prefix sums of the known rewards and of the canary indicator over its observations
    vals = known_tab[order]
    is_can = np.zeros(T, dtype=np.int64)
    is_can[crow] = 1
    can_in_order = is_can[order]
    pre = np.concatenate([[0.0], np.cumsum(vals)])
    pre_c = np.concatenate([[0], np.cumsum(can_in_order)])
    g0 = starts[arm] + start                           # global positions in ``order``
    g1 = starts[arm] + stop
    if np.any(stop > counts[arm]) or np.any(start < 0) or np.any(stop <= start):
        raise DpledgerError("a captured release names observations the run did not make")
    known = pre[g1] - pre[g0]
    nc = pre_c[g1] - pre_c[g0]
    w = y - known - delta * (nc - 1) / 2.0
    if rel.gaussian:
        # N(w; Δ, s²) against N(w; 0, s²): Δ(w − Δ/2)/s²
        llr = np.where(nc > 0, delta * (w - delta / 2.0) / (b * b), 0.0)
    else:
        llr = np.where(nc > 0, np.clip(2.0 * w - delta, -delta, delta) / b, 0.0)
    # canary c in order-position p: sum the llr of releases whose [g0, g1) holds p
    can_pos = np.flatnonzero(can_in_order)             # canaries' positions in ``order``
    diff = np.zeros(T + 1)
    np.add.at(diff, g0[nc > 0], llr[nc > 0])
    np.add.at(diff, g1[nc > 0], -llr[nc > 0])
    run = np.cumsum(diff)[:T]
    score_by_round = np.zeros(T)
    score_by_round[order[can_pos]] = run[can_pos]
    in_rel = np.zeros(T + 1, dtype=np.int64)
    np.add.at(in_rel, g0[nc > 0], 1)
    np.add.at(in_rel, g1[nc > 0], -1)
    rel_by_round = np.zeros(T, dtype=np.int64)
    rel_by_round[order[can_pos]] = np.cumsum(in_rel)[:T][can_pos]
    nrel = rel_by_round[crow]
    info = {"releases": n, "releases_per_canary": {"min": int(nrel.min()), "max": int(nrel.max()),
                                                   "mean": float(nrel.mean())},
            "canaries_per_release_max": int(nc.max()) if n else 0}
    return score_by_round[crow], info


def check_ledger_names_captures(rows: np.ndarray, cap: np.ndarray) -> None:
    """Every captured release that is not a tree p-sum must be a ledger row (arm, start, stop):
    the score reads only releases the ledger names."""
    ledger = {(int(rows[0, j]), int(rows[1, j]), int(rows[2, j]))
              for j in range(rows.shape[1]) if rows[3, j] >= 0}
    tree = bool(np.any(rows[3] < 0))
    if tree:
        return        # tree records name a whole tree; its p-sums are implied by (offset, items)
    n = int(cap[5, 0])
    for c in range(1, n + 1):
        key = (int(cap[3, c]), int(cap[4, c]), int(cap[5, c]))
        if key not in ledger:
            raise DpledgerError(f"the ledger misses the release of arm {key[0]} over observations "
                                f"[{key[1]}, {key[2]}) that the run made")


def blackbox_scores(actions, design: CanaryDesign, K: int) -> np.ndarray:
    """Pulls of each canary's arm after its round (the actions only)."""
    arm, obs = _canary_index(actions, design, K)
    counts = np.bincount(actions, minlength=K)
    return (counts[arm] - obs - 1).astype(np.float64)


# ---- the result ----------------------------------------------------------------------------

@dataclass
class OneRunResult:
    """A one-run audit: the bound, its ceiling and certificate, and what it rests on."""

    lower: float
    currency: str                      # "epsilon" or "mu"
    confidence: float
    certificate: dict
    canaries: int
    guesses: int
    correct: int
    per_k: list
    ceiling: float
    mode: str
    extra: dict = field(default_factory=dict)

    @property
    def certified(self) -> float | None:
        return self.certificate.get("gdp_mu" if self.currency == "mu" else "pure_epsilon")

    @property
    def epsilon_lower(self) -> float:
        if self.currency == "mu":
            from dpledger.audits.result import GDP_DELTA, gdp_epsilon_lower
            return gdp_epsilon_lower(self.lower, GDP_DELTA)
        return self.lower

    @property
    def ratio(self) -> float | None:
        c = self.certified
        return None if not c else self.lower / c

    @property
    def violation(self) -> bool | None:
        c = self.certified
        return None if c is None else bool(self.lower > c * (1 + 1e-12))

    def to_json(self) -> dict:
        from dpledger.audits.result import GDP_LABEL, PURE_LABEL
        out: dict[str, Any] = {"method": "one-run (Steinke, Nasr & Jagielski 2023)",
                               "mode": self.mode, "currency": self.currency,
                               "epsilon_lower": float(self.epsilon_lower),
                               "epsilon_lower_label": GDP_LABEL if self.currency == "mu"
                               else PURE_LABEL,
                               "lower": float(self.lower), "confidence": self.confidence,
                               "certificate": self.certificate,
                               "certified": self.certified,
                               "ratio": self.ratio, "ratio_currency": self.currency,
                               "ceiling": float(self.ceiling),
                               "ratio_of_ceiling": (float(self.lower / self.ceiling)
                                                    if self.ceiling > 0 else None),
                               "ceiling_over_certificate": (float(self.ceiling / self.certified)
                                                            if self.certified else None),
                               "violation": self.violation,
                               "counts": {"canaries": self.canaries, "guesses": self.guesses,
                                          "correct": self.correct},
                               "per_guess_count": self.per_k}
        if self.currency == "mu":
            out["mu_lower"] = float(self.lower)
        out.update(self.extra)
        return out


def _claim_check(claim: float | None, lower: float, currency: str) -> dict:
    if claim is None:
        return {}
    return {"claim": {"value": float(claim), "currency": currency,
                      "contradicted": bool(lower > claim * (1 + 1e-12))}}


def audit_one_run(policy, *, canaries: int, mode: str = "whitebox", T: int | None = None,
                  K: int | None = None, lo: float = 0.0, hi: float = 1.0, seed: int = 0,
                  confidence: float = DEFAULT_CONFIDENCE, guesses: int | None = None,
                  claim: float | None = None, design: CanaryDesign | None = None
                  ) -> OneRunResult:
    """One run of ``policy`` with ``canaries`` canaries (module docstring); ``claim`` is a
    stated certificate to test besides the policy's own (e.g. a paper's ε).

    Seeds: the coins from ``SeedSequence(seed, spawn_key=(0,))``, the tie-break permutation
    from ``(1,)``, the policy's run from ``(2,)`` — the same seed gives the same audit."""
    from dpledger.audits.result import certificate_summary, currency_of
    from dpledger.audits.stats import check_kernel_policy
    from dpledger.policies.environments import table as make_table
    from dpledger.policies.simulator import run_certificate
    check_kernel_policy(policy, mode, "its canaries are records "
                                      "(dpledger.audits.one_run_contextual)")
    if not 0.0 < confidence < 1.0:
        raise DpledgerError(f"confidence must lie in (0, 1), got {confidence!r}")
    seed = check_count("seed", seed, minimum=0)
    if not getattr(policy, "private", True):
        raise DpledgerError(f"{policy.name} makes no private release: its certificate is "
                            "unbounded, a one-run audit has nothing to test")
    if mode == "whitebox" and policy.name not in WHITEBOX_POLICIES:
        raise DpledgerError(f"{policy.name}: a white-box one-run audit scores captured Laplace "
                            "sums or Gaussian means, which its kernel does not capture; "
                            "white-box one-run "
                            f"policies: {', '.join(WHITEBOX_POLICIES)} (or use --mode blackbox)")
    if design is None:
        design = one_run_design(policy, canaries, T, K, lo, hi)
    m = len(design.rows)
    grid = guess_grid(m, guesses)
    if guesses is not None and not 1 <= guesses <= m:
        raise DpledgerError(f"--guesses must lie in [1, {m}] (the canaries), got {guesses}")
    Tn, Kn = design.horizon, design.arms
    cert = certificate_summary(run_certificate(policy, Tn, Kn, 0))
    currency = currency_of(cert)
    if currency not in ("epsilon", "mu"):
        raise DpledgerError(f"{policy.name}'s certificate states neither pure ε nor GDP μ")
    ss = np.random.SeedSequence(int(seed))
    c_ss, p_ss, r_ss = ss.spawn(3)
    coins = np.random.Generator(np.random.PCG64(c_ss)).integers(0, 2, size=m).astype(np.int8)
    order_key = np.random.Generator(np.random.PCG64(p_ss)).permutation(m)
    env = make_table(design.table(coins), design.lo, design.hi)
    t0 = time.perf_counter()
    actions, rows, cap = _run_once(policy, env, Tn, Kn, np.random.Generator(np.random.PCG64(r_ss)),
                                   mode == "whitebox")
    info: dict = {}
    if mode == "whitebox":
        if policy.name in GAUSSIAN_POSTERIOR:
            check_posterior_reads(policy, actions, cap, Kn)
            releases = Releases.from_posterior(cap, actions, Kn)
        else:
            check_ledger_names_captures(rows, cap)
            releases = Releases.from_capture(cap, gaussian=policy.name in GAUSSIAN_SAMPLES)
        del cap
        scores, info = whitebox_scores(actions, None, design, Kn, releases)
        centre = 0.0
    else:
        scores = blackbox_scores(actions, design, Kn)
        centre = float(np.median(scores))
    guess, _, top = guesses_from_scores(scores, centre, order_key, grid)
    right = guess == coins
    correct_at = {k: int(right[idx].sum()) for k, idx in top.items()}
    alpha = 1.0 - confidence
    bound, k_best, per_k = bound_from_guesses(m, correct_at, alpha, currency)
    ceil = method_ceiling(m, grid, alpha, currency)
    elapsed = time.perf_counter() - t0
    extra = {"policy": {"name": policy.name, "params": _params(policy)},
             "design": design.to_json(), "seed": int(seed),
             "score": ("likelihood ratio of the captured releases containing the canary"
                       if mode == "whitebox" else
                       "pulls of the canary's arm after its round, centred at the median"),
             "guess_grid": grid, "alpha_per_k": alpha / len(grid),
             "accuracy_of_all_guesses": float(right.mean())}
    extra.update(info)
    extra.update(_claim_check(claim, bound, currency))
    res = OneRunResult(lower=float(bound), currency=currency, confidence=float(confidence),
                       certificate=cert, canaries=m, guesses=int(k_best),
                       correct=int(correct_at[k_best]), per_k=per_k, ceiling=float(ceil),
                       mode=mode, extra=extra)
    res.elapsed = elapsed             # not written to JSON (reproducible bytes)
    return res


def _params(policy) -> dict:
    from dpledger.audits.policy import _jsonable
    return _jsonable(policy.recorded_params() if hasattr(policy, "recorded_params")
                     else policy.params)


__all__ = ["audit_one_run", "one_run_design", "one_run_p_value", "epsilon_lower", "mu_lower",
           "gdp_p_value", "OneRunResult", "CanaryDesign", "guess_grid", "method_ceiling",
           "bound_from_guesses", "guesses_from_scores", "GUESS_FRACTIONS"]
