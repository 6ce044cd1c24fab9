"""Mishra & Thakurta 2015 (UAI), "(Nearly) Optimal Differentially Private Stochastic Multi-Arm
Bandits": private UCB (Algorithm 1, DP-UCB, docs/algorithms.md#dp-ucb) and private Thompson sampling
(Algorithm 2, docs/algorithms.md#private-thompson-sampling).  Natural logarithms
(docs/algorithms.md#logarithms).  Provenance: faithful (docs/algorithms.md#provenance).

Both read rewards only through one binary (tree) mechanism per arm (Chan–Shi–Song 2011), run
with the numba state updates of :mod:`dpledger.mechanisms.counters` (``binary_new`` /
``binary_push`` / ``binary_commit`` / ``binary_output``: one source for the tree).  The noise
of each p-sum is drawn by :func:`tree_noise`, which updates the arm's tree record in the same
call; the ledger holds tree records (``RunOutput.trees``: arm, offset, n_items, levels,
release id), never one row per p-sum.  CSS11's mechanism releases one p-sum per item; the
ledger's tree record counts every completed node at each level, which is exact for an arm's
first tree item (the worst-off reward) and an upper bound for the others.

**DP-UCB.**  One T-bounded tree per arm (``levels = ⌈log2(T+1)⌉``, each p-sum
``Lap(levels/ε0)``), ``ε0 = ε/K`` (``per_tree_budget="split"``, as printed) or ``ε``
(``"full"``, Azize & Basu's description).  Pull each arm once, then the argmax of
``r/n + √(2 ln t/n) + Γ/n`` with ``Γ = ln²T·ln(K·T·ln T/γ)/ε0`` (``width="printed"``) or
``r/n + √(max(r, 0)·ln t)/n + ln t/n`` (``width="experimental"``, the width of the paper's own
experiments), r the tree's noisy running sum.  Certificate: ``n × Lap(ε0/levels)`` with
n = bit length of T − K + 1 (the item-1 nodes of an arm pulled T − K + 1 times).

**Private TS.**  Gap estimation (``gap_estimation=True``): Δ̂ ← 1; repeat: pull every arm
``m = ⌈192·K·ln T/(ε·Δ̂²)⌉`` times (round-robin), release each arm's batch mean with
``Lap(2K/(ε·m))`` (one release of ε/(2K) per batch), Δ̂ ← Δ̂/2, until the two largest private
means differ by more than Δ̂.  Then trees with ``T − τ`` leaves and ``ε0 = ε/(2K)``; random
pulls: every arm ``random_pulls`` times (default the printed ``⌈Γ/Δ̂²⌉``, ``Γ = 192·ln³T/ε``),
each arm's total inserted as ONE tree item; then Thompson sampling with
``Beta(r + 1, n − r + 1)``, r the tree's noisy sum clipped to [0, n] (post-processing), n the
arm's pulls including gap-estimation pulls (``n_mode="printed"``) or the tree's rewards only
(``"tree"``).  A batch (gap or random) that the horizon cuts makes no release; the remaining
rounds go round-robin.  The random-pull item spans P observations: the ledger gets the tree
record from the batch's last observation plus one row for its first P − 1 observations with the
item's node count.  With gap estimation the tree depth depends on τ (data-dependent), so the
policy is adaptive; without, it is not.  Certificate: one Lap(ε/(2K)) for gap rewards and, for
each reachable exit τ, ``n_τ × Lap(ε0/levels_τ)`` — ε/(2K) against the theorem's ε.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.errors import DpledgerError
from dpledger.mechanisms.counters import (binary_commit, binary_new, binary_output, binary_push)
from dpledger.policies.base import EPSILON, KernelPolicy, Param, RunOutput, kernel_table_size
from dpledger.policies.environments import draw_reward
from dpledger.policies.sink import put_action
from dpledger.mechanisms.noise import laplace_noise, tree_noise
from dpledger.policies.rules import argmax_first, tie_break, capture_release

COUNTER = Param("counter", "binary", "choice",
                "the continual counter of every arm: binary (Chan–Shi–Song's tree, as printed) "
                "or smooth (Andersson & Pagh 2023's smooth binary mechanism, reconstructed: "
                "docs/algorithms.md#smooth-binary-counter)", choices=("binary", "smooth"),
                omit_at_default=True)


def counter_class(cls, params):
    """``cls`` or, for ``counter=smooth``, its smooth subclass (policies/smooth_trees.py).
    The value is checked here as the Param checks it, so a bad one is one line, exit 2."""
    value = params.get("counter", "binary")
    if isinstance(value, str):
        value = value.strip()
    COUNTER.parse(value)
    if value == "binary" or cls.__dict__.get("smooth_counter", False):
        return cls
    from dpledger.policies import smooth_trees
    return smooth_trees.SMOOTH_CLASSES[cls.name]


BATCH_ROW = 0              # count placeholder of a random-pull batch row (filled in finish)


def bit_length(n: int) -> int:
    """⌈log2(n+1)⌉: the binary mechanism's levels for bound n; also the number of nodes item 1
    of a tree holding n items lies in."""
    return int(n).bit_length()


def split_tree_records(out: RunOutput) -> RunOutput:
    rows = out.rows
    tree = rows[3] < 0
    tr = rows[:, tree]
    keep = tr[2] > 0
    tr = tr[:, keep]
    out.trees = {"arm": tr[0].copy(), "offset": tr[1].copy(), "n_items": tr[2].copy(),
                 "levels": tr[4].copy(), "release_id": (-tr[3] - 1).copy()}
    out.rows = rows[:, ~tree]
    return out


# ---- DP-UCB --------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def dp_ucb_root(n):
    """√(2/n), the printed width's coefficient of √(ln t)."""
    return np.sqrt(2.0 / n)


@njit(cache=True, inline="always")
def dp_ucb_coefficients(r, n, gamma_, experimental, root):
    """(A, B, C) with index = A + B·√(ln t) + C·ln t, the DP-UCB index of Mishra & Thakurta
    2015 (Algorithm 1 as printed; Section 5's width as "experimental";
    docs/algorithms.md#dp-ucb) —
    printed: r/n + √(2 ln t/n) + Γ/n, i.e.
    ((r + Γ)/n, √(2/n), 0); experimental: r/n + √(max(r,0)·ln t)/n + ln t/n, i.e.
    (r/n, √max(r,0)/n, 1/n).  They change only when the arm is pulled, so a round costs a
    multiply-add per arm instead of a square root and three divisions (DP-UCB +10 %).
    ``root`` is √(2/n) (:func:`dp_ucb_root`; the kernel reads it from a table)."""
    if experimental:
        return r / n, np.sqrt(max(r, 0.0)) / n, 1.0 / n
    return (r + gamma_) / n, root, 0.0


@njit(cache=True, inline="always")
def dp_ucb_from(a, b, c, sqrt_lt, lt):
    return a + b * sqrt_lt + c * lt


@njit(cache=True, inline="always")
def dp_ucb_index(r, n, lt, gamma_, experimental):
    """r/n + √(2 ln t/n) + Γ/n (printed) or r/n + √(max(r,0)·ln t)/n + ln t/n (experimental)."""
    a, b, c = dp_ucb_coefficients(r, n, gamma_, experimental, dp_ucb_root(n))
    return dp_ucb_from(a, b, c, np.sqrt(lt), lt)


@njit(cache=True)
def dp_ucb_tables(n):
    """ln t, √(ln t) and √(2/m) for t, m < n (entry 0 unused), computed by the kernel's own
    expressions in compiled code, so a table entry is the double the kernel would compute
    (numpy's vectorised log may differ from libm's in the last place)."""
    out = np.zeros(3 * n)
    for t in range(1, n):
        lt = np.log(t)
        out[t] = lt
        out[n + t] = np.sqrt(lt)
        out[2 * n + t] = dp_ucb_root(float(t))
    return out


@njit(cache=True, nogil=True)
def _dp_ucb(rng, env, T, K, stop, params, actions, rows, capture):
    """params: ε0, Γ, experimental width (0/1), the p-sums' noise scale levels/ε0 (release 0,
    ``noise_scales``).  Capture: a (6, M) array receives every p-sum released
    (:func:`~dpledger.policies.rules.capture_release`); the two-row form arm 0's first."""
    gamma_ = params[1]
    experimental = params[2] != 0.0
    scale = params[3]
    # ln t and √(ln t) for t < n_tab, and √(2/n) for n < n_tab, computed once per run
    # (kernel_params; the same IEEE operations, so the same doubles): ≈ 3 ns a round
    n_tab = np.int64(params[4]) if params.size > 4 else 0
    tab_lt = params[5:5 + n_tab]
    tab_slt = params[5 + n_tab:5 + 2 * n_tab]
    tab_s2n = params[5 + 2 * n_tab:5 + 3 * n_tab]
    fs0, is0 = binary_new(T, 0)
    levels = is0[1]
    bfs = np.zeros((K, fs0.size))
    bis = np.zeros((K, 4), np.int64)
    for a in range(K):
        bis[a] = is0
        rows[0, a] = a
        rows[1, a] = 0
        rows[2, a] = 0
        rows[3, a] = -1
        rows[4, a] = levels
    r = np.zeros(K)
    n = np.zeros(K)
    ca = np.zeros(K)                      # index coefficients (dp_ucb_coefficients) per arm
    cb = np.zeros(K)
    cc = np.zeros(K)
    idx = np.zeros(K)
    draws = 0
    for t in range(1, stop + 1):
        a, tie = dp_ucb_round(t, K, n_tab, tab_lt, tab_slt, ca, cb, cc, idx)
        if tie:
            a = tie_break(idx, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        code, value, s0, s1 = binary_push(bfs[a], bis[a], x)
        noise = tree_noise(rng, env, scale, rows, a, a, 0, bis[a, 0], levels, 0)
        draws += 1
        if capture.shape[1] > 0 and a == 0 and bis[0, 0] == 1:
            capture[0, 0] = value + noise
            capture[1, 0] = value
        capture_release(capture, value + noise, value, scale, a, s0, s1)
        r[a], n[a], ca[a], cb[a], cc[a] = dp_ucb_commit(bfs[a], bis[a], code, value + noise,
                                                        n[a], gamma_, experimental, tab_s2n)
        put_action(actions, t, a)
    return stop, K, draws


@njit(cache=True, inline="always")
def dp_ucb_round(t, K, n_tab, tab_lt, tab_slt, ca, cb, cc, idx):
    """Round t's arm before a tie-break, (a, tie): arm t − 1 in rounds 1 … K, then
    :func:`dp_ucb_argmax` at ln t and √(ln t) (read from the tables below ``n_tab``).  Shared
    by the binary and the smooth DP-UCB kernels (policies/smooth_trees.py)."""
    if t <= K:
        return t - 1, False
    if t < n_tab:
        lt = tab_lt[t]
        sl = tab_slt[t]
    else:
        lt = np.log(t)
        sl = np.sqrt(lt)
    return dp_ucb_argmax(lt, sl, ca, cb, cc, idx)


@njit(cache=True, inline="always")
def dp_ucb_argmax(lt, sl, ca, cb, cc, idx):
    """A round's indices A + B·√(ln t) + C·ln t (:func:`dp_ucb_coefficients`) into ``idx`` and
    (their first argmax, whether it ties); the caller breaks a tie uniformly at random
    (:func:`~dpledger.policies.rules.tie_break`).  No Generator argument: numba counts a
    reference to a Generator passed into an inlined call at every round (≈ 5 ns here)."""
    for j in range(idx.size):
        idx[j] = dp_ucb_from(ca[j], cb[j], cc[j], sl, lt)
    return argmax_first(idx)


@njit(cache=True, inline="always")
def dp_ucb_commit(fs, ist, code, noisy, n_a, gamma_, experimental, tab_s2n):
    """An arm's p-sum just pushed into its tree (``fs``, ``ist``) is released as ``noisy``:
    returns the arm's new (r, n, A, B, C) — the tree's noisy running sum, the count n + 1 and
    the index coefficients (:func:`dp_ucb_coefficients`), with √(2/n) read from ``tab_s2n``
    while n is below its size (the same IEEE operations as :func:`dp_ucb_root`, so the same
    doubles; an empty table computes it).  Scalars in and out: numba counts a reference to
    every array passed into an inlined call at every round (≈ 10 ns for the arrays of the
    arms' state)."""
    binary_commit(fs, ist, code, noisy)
    r = binary_output(fs, ist)
    n = n_a + 1.0
    m = np.int64(n)
    root = tab_s2n[m] if m < tab_s2n.size else dp_ucb_root(n)
    ca, cb, cc = dp_ucb_coefficients(r, n, gamma_, experimental, root)
    return r, n, ca, cb, cc


class DPUCB(KernelPolicy):
    name = "dp-ucb"
    title = "DP-UCB, private UCB sampling (Mishra & Thakurta 2015, Algorithm 1)"
    provenance = "faithful"
    exact_sampler = True
    params_spec = (EPSILON,
                   Param("gamma", 0.1, "positive", "failure probability γ of the confidence "
                                                   "relaxation Γ"),
                   Param("per_tree_budget", "split", "choice",
                         "ε0 = ε/K per tree (split, as printed) or ε (full, Azize & Basu)",
                         choices=("split", "full")),
                   Param("width", "printed", "choice",
                         "confidence width: printed √(2 ln t/n) + Γ/n, or experimental "
                         "√(r ln t)/n + ln t/n (the paper's experiments)",
                         choices=("printed", "experimental")),
                   Param("relaxation_scale", 1.0, "positive",
                         "multiplies the printed width's confidence relaxation Γ (1: as "
                         "printed; the paper's experiments tune this 'confidence parameter')",
                         omit_at_default=True),
                   COUNTER)
    adaptive = False
    kernel = _dp_ucb

    def __new__(cls, **params):
        # counter=smooth runs another kernel: the policy is its subclass (one name, dp-ucb)
        return object.__new__(counter_class(cls, params))

    def __init__(self, **params):
        super().__init__(**params)
        if self.params["width"] == "experimental" and self.params["relaxation_scale"] != 1.0:
            raise DpledgerError("relaxation_scale scales the printed width's Γ; "
                                "width=experimental has no Γ to scale")
    action_sink = True

    def epsilon0(self, K: int) -> float:
        eps = self.params["epsilon"]
        return eps / K if self.params["per_tree_budget"] == "split" else eps

    def confidence_relaxation(self, T: int, K: int) -> float:
        """κ·Γ with Γ = ln²T·ln(K·T·ln T/γ)/ε0 (= the printed K·ln²T·ln(…)/ε for ε0 = ε/K)
        and κ = ``relaxation_scale`` (1 as printed; Mishra & Thakurta Section 5 tune this
        "confidence parameter" of Algorithm 1's line 9, docs/algorithms.md#dp-ucb).  It enters
        the index only: no draw depends on it."""
        lnT = math.log(T)
        gamma_ = lnT ** 2 * math.log(K * T * lnT / self.params["gamma"]) / self.epsilon0(K)
        scale = self.params["relaxation_scale"]
        return gamma_ if scale == 1.0 else gamma_ * scale

    def kernel_params(self, T, K):
        """[ε0, Γ, width, p-sum scale, n, ln t for t < n, √(ln t) for t < n, √(2/m) for
        m < n], n = kernel_table_size(T): the kernel's per-round log and square roots, computed
        once (the same IEEE operations, so the same doubles)."""
        n = kernel_table_size(T)
        head = np.concatenate([[self.epsilon0(K), self.confidence_relaxation(T, K),
                                1.0 if self.params["width"] == "experimental" else 0.0],
                               self.noise_scales(T, K)])
        assert head.size == 4
        return np.concatenate([head, [float(n)], dp_ucb_tables(n)])

    def row_capacity(self, T, K):
        return K

    def releases(self, T, K):
        return [LaplaceRelease(scale=bit_length(T) / self.epsilon0(K), sensitivity=1.0)]

    def certificate(self, T, K):
        levels = bit_length(T)
        nodes = bit_length(T - K + 1)
        eps0 = self.epsilon0(K)
        lap = LaplaceRelease(scale=levels / eps0, sensitivity=1.0)
        return Certificate(candidates=(Candidate(
            Composition.of([(lap, nodes)]), Witness(arm=0, index=0, round=1),
            f"each reward enters one arm's tree (parallel composition across arms); the first "
            f"item of a tree holding T − K + 1 = {T - K + 1} items lies in {nodes} of its "
            f"{levels} levels' p-sums, each Lap(levels/ε0) with sensitivity 1 (ε0/levels); "
            f"reading the running sums is post-processing"),),
            note=f"per-tree budget ε0 = {eps0!r} ({self.params['per_tree_budget']})")

    def theorem(self, T, K):
        return theorems.mishra_thakurta_2015_dp_ucb(self.params["epsilon"],
                                                    self.params["per_tree_budget"])

    def finish(self, out, T, K):
        return split_tree_records(out)


# ---- private Thompson sampling -------------------------------------------------------------

class _PullsParam(Param):
    """``random_pulls``: "printed" (⌈Γ/Δ̂²⌉) or an integer ≥ 0."""

    def parse(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "printed":
            return "printed"
        return Param("random_pulls", 0, "int", self.doc).parse(value)


def _ceil_capped(x: float, cap: int) -> int:
    return cap if not x < cap else int(math.ceil(x))


@njit(cache=True)
def _top_two_gap(v):
    best = -np.inf
    second = -np.inf
    for i in range(v.size):
        if v[i] > best:
            second = best
            best = v[i]
        elif v[i] > second:
            second = v[i]
    return best - second


@njit(cache=True)
def _round_robin_batch(rng, env, K, T, stop, m, t, bsum, obs, n_tot, actions):
    """Every arm pulled ``m`` times round-robin from round t (0-based), the sums into ``bsum``.
    Returns (rounds played, whole): ``whole`` is False when the run ends first — at ``stop``, or
    because the horizon cuts the batch, in which case the remaining rounds are played
    round-robin and the batch is never released (Mishra & Thakurta Alg. 2, lines 4 and 12)."""
    if t + K * m > T:
        while t < stop:
            a = t % K
            draw_reward(rng, env, a, t)
            obs[a] += 1
            put_action(actions, t + 1, a)
            t += 1
        return t, False
    for a in range(K):
        bsum[a] = 0.0
    for s in range(K * m):
        if t >= stop:
            return t, False
        a = s % K
        bsum[a] += draw_reward(rng, env, a, t)
        obs[a] += 1
        n_tot[a] += 1.0
        put_action(actions, t + 1, a)
        t += 1
    return t, True


@njit(cache=True)
def private_ts_start(rng, env, T, K, stop, params, per_exit, actions, rows, capture):
    """The kernels' common start (binary here, smooth in policies/smooth_trees.py, whose exits
    take ``per_exit`` parameters each): the per-arm counts, then :func:`private_ts_gap`.
    Returns (noise scales by release id, base of the exits' parameters, obs, n_tot, n_tree,
    bsum, rounds played, rows, draws, exit e, whole)."""
    J = np.int64(params[3])
    base = 4 + J
    scales = params[base + per_exit * (J + 1):]
    obs = np.zeros(K, np.int64)
    n_tot = np.zeros(K)
    n_tree = np.zeros(K)
    bsum = np.zeros(K)
    t, n_rows, draws, e, whole = private_ts_gap(rng, env, T, K, stop, params, scales[0], obs,
                                                n_tot, bsum, actions, rows, capture)
    return scales, base, obs, n_tot, n_tree, bsum, t, n_rows, draws, e, whole


@njit(cache=True, inline="always")
def private_ts_pull(rng, env, t, rsum, n_tree, n_tot, tree_mode, theta, obs):
    """One Thompson round (:func:`private_ts_select`), its reward and the arm's counts:
    (arm, reward)."""
    a = private_ts_select(rng, rsum, n_tree, n_tot, tree_mode, theta)
    x = draw_reward(rng, env, a, t)
    obs[a] += 1
    n_tot[a] += 1.0
    n_tree[a] += 1.0
    return a, x


@njit(cache=True)
def private_ts_gap(rng, env, T, K, stop, params, gap_scale, obs, n_tot, bsum, actions, rows,
                   capture):
    """Algorithm 2's gap estimation (with ``params[1]`` set; none otherwise): batches of
    m_j = ``params[4 + j]`` pulls per arm, each arm's batch sum released with Lap(2K/ε) =
    ``gap_scale`` (release id 0, one row each), until the two largest private means differ by
    more than Δ̂.  Returns (rounds played, rows, draws, completed iterations e, whole):
    ``whole`` False when the run ends inside a batch (:func:`_round_robin_batch`)."""
    J = np.int64(params[3])
    mu = np.zeros(K)
    n_rows = 0
    draws = 0
    t = 0
    if params[1] == 0.0:
        return t, n_rows, draws, 0, True
    j = 0
    delta = 1.0
    while True:
        m = T + 1 if j >= J else np.int64(params[4 + j])   # T + 1: no batch fits any more
        t, whole = _round_robin_batch(rng, env, K, T, stop, m, t, bsum, obs, n_tot, actions)
        if not whole:
            return t, n_rows, draws, j, False
        for a in range(K):
            noise = laplace_noise(rng, env, gap_scale, 1.0, rows, n_rows, a, obs[a] - m, obs[a], 0)
            n_rows += 1
            draws += 1
            if capture.shape[1] > 0 and a == 0 and j == 0:
                # the witness in the release's own units: the batch sum + Lap(2K/ε)
                capture[0, 0] = bsum[a] + noise
                capture[1, 0] = bsum[a]
            capture_release(capture, bsum[a] + noise, bsum[a], gap_scale, a, obs[a] - m, obs[a])
            gap_commit(a, bsum[a], noise, m, mu)
        delta = delta / 2.0
        j += 1
        if _top_two_gap(mu) > delta:
            return t, n_rows, draws, j, True


@njit(cache=True, nogil=True)
def _private_ts(rng, env, T, K, stop, params, actions, rows, capture):
    """params: ε, gap estimation (0/1), n_mode tree (0/1), J, m_0 … m_{J−1}, then for each exit
    e = 0 … J: P_e, release id of the tree, tree bound L_e = T − τ_e; then the noise scale of
    every release id (``noise_scales``: id 0 the gap batches' Lap(2K/ε) on the batch sum, id
    r ≥ 1 a tree's p-sums, Lap(levels/ε0)).

    Capture: the two-row form receives arm 0's first gap-batch release; a (6, M) array every
    release (:func:`~dpledger.policies.rules.capture_release`): the gap batches' sums and every
    tree p-sum, with the arm's observations it sums — the random-pull item counts as its P
    observations, so a p-sum containing item 1 starts at the batch's first observation."""
    tree_mode = params[2] != 0.0
    scales, base, obs, n_tot, n_tree, bsum, t, n_rows, draws, e, whole = private_ts_start(
        rng, env, T, K, stop, params, 3, actions, rows, capture)
    if not whole:
        return t, n_rows, draws
    P = np.int64(params[base + 3 * e])
    rid = np.int64(params[base + 3 * e + 1])
    L = np.int64(params[base + 3 * e + 2])
    fs0, is0 = binary_new(L, 0)
    levels = is0[1]
    scale = scales[rid]         # Lap(levels/ε0), ε0 = ε/(2K)
    bfs = np.zeros((K, fs0.size))
    bis = np.zeros((K, 4), np.int64)
    slot = np.zeros(K, np.int64)
    rsum = np.zeros(K)
    # random pulls: every arm P times round-robin; each arm's total is one tree item
    if P > 0:
        t, whole = _round_robin_batch(rng, env, K, T, stop, P, t, bsum, obs, n_tot, actions)
        if not whole:
            return t, n_rows, draws
    for a in range(K):
        off = obs[a] - 1 if P > 0 else obs[a]
        bis[a] = is0
        bis[a, 2] = off
        slot[a] = n_rows
        rows[0, n_rows] = a
        rows[1, n_rows] = off
        rows[2, n_rows] = 0
        rows[3, n_rows] = -(rid + 1)
        rows[4, n_rows] = levels
        n_rows += 1
    if P > 0:
        for a in range(K):
            if P > 1:           # the item's first P − 1 observations (count set in finish)
                rows[0, n_rows] = a
                rows[1, n_rows] = obs[a] - P
                rows[2, n_rows] = obs[a] - 1
                rows[3, n_rows] = rid
                rows[4, n_rows] = 0
                n_rows += 1
            code, value, s0, s1 = binary_push(bfs[a], bis[a], bsum[a])
            noise = tree_noise(rng, env, scale, rows, slot[a], a, bis[a, 2], bis[a, 0], levels, rid)
            draws += 1
            # item 1 (tree index off = obs − 1) is the batch total of observations
            # [obs − P, obs): its p-sum starts at the batch's first observation
            capture_release(capture, value + noise, value, scale, a, s0 - (P - 1), s1)
            private_ts_commit(a, code, value + noise, bfs, bis, rsum)
            n_tree[a] += P
    theta = np.zeros(K)
    while t < stop:
        a, x = private_ts_pull(rng, env, t, rsum, n_tree, n_tot, tree_mode, theta, obs)
        code, value, s0, s1 = binary_push(bfs[a], bis[a], x)
        noise = tree_noise(rng, env, scale, rows, slot[a], a, bis[a, 2], bis[a, 0], levels, rid)
        draws += 1
        capture_release(capture, value + noise, value, scale, a, psum_first_obs(s0, bis[a, 2], P),
                        s1)
        private_ts_commit(a, code, value + noise, bfs, bis, rsum)
        put_action(actions, t + 1, a)
        t += 1
    return t, n_rows, draws


# the rule's pieces as state updates (one source for the kernel above and the step form,
# :mod:`dpledger.policies.step_rules`)

@njit(cache=True, inline="always")
def gap_commit(a, bsum, noise, m, mu):
    """Arm a's gap batch released: its private mean (Σ of the batch's m rewards + noise)/m."""
    mu[a] = (bsum + noise) / m


@njit(cache=True, inline="always")
def psum_first_obs(s0, offset, P):
    """The first observation a p-sum starting at tree index ``s0`` covers: the tree's first item
    (index ``offset``) is the random-pull batch's total of P observations, so a p-sum containing
    it also covers the batch's first P − 1."""
    return s0 - (P - 1) if (P > 0 and s0 == offset) else s0


@njit(cache=True, inline="always")
def private_ts_select(rng, rsum, n_tree, n_tot, tree_mode, theta):
    """A round of the Thompson phase: θ_j ~ Beta(r + 1, n − r + 1) in arm order, r the tree's
    noisy sum clipped to [0, n] (post-processing), n the arm's pulls (all of them, or the
    tree's rewards with ``tree_mode``); argmax, ties uniformly at random."""
    for j in range(theta.size):
        nn = n_tree[j] if tree_mode else n_tot[j]
        rr = min(max(rsum[j], 0.0), nn)
        theta[j] = rng.beta(rr + 1.0, nn - rr + 1.0)
    a, tie = argmax_first(theta)
    if tie:
        a = tie_break(theta, a, rng)
    return a


@njit(cache=True, inline="always")
def private_ts_commit(a, code, noisy, bfs, bis, rsum):
    """The p-sum just pushed into arm a's tree is released as ``noisy``; r_a ← the tree's
    noisy running sum."""
    binary_commit(bfs[a], bis[a], code, noisy)
    rsum[a] = binary_output(bfs[a], bis[a])


class PrivateTS(KernelPolicy):
    name = "dp-ts-mt"
    title = "Private Thompson sampling (Mishra & Thakurta 2015, Algorithm 2)"
    provenance = "faithful"
    exact_sampler = True
    params_spec = (EPSILON,
                   Param("gap_estimation", True, "bool",
                         "run the gap-estimation phase (their experiments skipped it)"),
                   _PullsParam("random_pulls", "printed", "int",
                               "random pulls per arm: 'printed' = ⌈Γ/Δ̂²⌉ with Γ = 192 ln³T/ε, "
                               "or an integer ≥ 0 (their experiments used a smaller m)"),
                   Param("n_mode", "printed", "choice",
                         "n of the Beta posterior: all pulls (printed) or the tree's rewards",
                         choices=("printed", "tree")),
                   COUNTER)
    kernel = _private_ts
    action_sink = True

    def __new__(cls, **params):
        # counter=smooth runs another kernel: the policy is its subclass (one name, dp-ts-mt)
        return object.__new__(counter_class(cls, params))

    def __init__(self, **params):
        super().__init__(**params)
        # with gap estimation the tree depth depends on τ (data-dependent): adaptive
        self.adaptive = bool(self.params["gap_estimation"])

    def gap_batch(self, T: int, K: int, j: int = 0) -> int:
        """m_j = ⌈192·K·ln T·4^j/ε⌉ pulls per arm in gap iteration j (Algorithm 2; capped at
        T + 1, which never fits)."""
        return _ceil_capped(192.0 * K * math.log(T) * 4.0 ** j / self.params["epsilon"], T + 1)

    def gap_scale(self, K: int) -> float:
        """The Laplace scale 2K/ε of a gap batch's sum (ε/(2K) per batch release)."""
        return 2.0 * K / self.params["epsilon"]

    def schedule(self, T: int, K: int) -> dict:
        """The deterministic skeleton: gap batch sizes m_j (for the iterations whose batch fits
        within T), and for each exit e (number of completed gap iterations; e = 0 without gap
        estimation) τ_e, P_e, the tree bound L_e = T − τ_e and its levels."""
        eps = self.params["epsilon"]
        lnT = math.log(T)
        cap = T + 1
        ms, taus = [], [0]
        if self.params["gap_estimation"]:
            j = 0
            while True:
                m = self.gap_batch(T, K, j)
                if taus[-1] + K * m > T:
                    break
                ms.append(m)
                taus.append(taus[-1] + K * m)
                j += 1
            exits = list(range(1, len(ms) + 1))
        else:
            exits = [0]
        gamma_ = 192.0 * lnT ** 3 / eps
        out = []
        for e in exits:
            tau = taus[e]
            if self.params["random_pulls"] == "printed":
                P = _ceil_capped(gamma_ * 4.0 ** e, cap)
            else:
                P = int(self.params["random_pulls"])
            out.append({"e": e, "tau": tau, "P": P, "L": T - tau,
                        "levels": bit_length(T - tau) if T - tau > 0 else 1})
        return {"m": ms, "exits": out}

    def _tree_levels(self, T, K) -> list[int]:
        return sorted({x["levels"] for x in self.schedule(T, K)["exits"]})

    # the trees' part of the releases and kernel parameters (the smooth trees override these
    # four: policies/smooth_trees.py)
    def _node_counts(self, T, K) -> list[int]:
        """The distinct per-item node counts c of the exits' trees: each node Lap(c/ε0)."""
        return self._tree_levels(T, K)

    def _exits(self, T, K) -> list[dict]:
        return self.schedule(T, K)["exits"]

    def _exit_params(self, x, T, counts) -> list[float]:
        """Exit x's kernel parameters: P, the release id of its trees, their bound."""
        return [float(min(x["P"], T + 1)), float(1 + counts.index(x["levels"])),
                float(max(x["L"], 1))]

    def _unused_exit(self, T) -> list[float]:
        return [0.0, 1.0, float(max(T, 1))]

    def releases(self, T, K):
        eps0 = self.params["epsilon"] / (2 * K)
        return ([LaplaceRelease(scale=self.gap_scale(K), sensitivity=1.0)]
                + [LaplaceRelease(scale=c / eps0, sensitivity=1.0)
                   for c in self._node_counts(T, K)])

    def kernel_params(self, T, K):
        sch = self.schedule(T, K)
        counts = self._node_counts(T, K)
        J = len(sch["m"])
        vals = [self.params["epsilon"], 1.0 if self.params["gap_estimation"] else 0.0,
                1.0 if self.params["n_mode"] == "tree" else 0.0, float(J)]
        vals += [float(m) for m in sch["m"]]
        by_e = {x["e"]: x for x in self._exits(T, K)}
        for e in range(J + 1):
            x = by_e.get(e)     # None: e = 0 with gap estimation, never used
            vals += self._unused_exit(T) if x is None else self._exit_params(x, T, counts)
        return np.concatenate([vals, self.noise_scales(T, K)])

    def row_capacity(self, T, K):
        return K * (len(self.schedule(T, K)["m"]) + 3) + 1

    def finish(self, out, T, K):
        out = split_tree_records(out)
        batch = out.rows[4] == BATCH_ROW
        if batch.any():
            trees = out.trees
            nodes = {int(a): bit_length(int(n)) for a, n in zip(trees["arm"], trees["n_items"],
                                                                strict=True)}
            cnt = np.array([nodes.get(int(a), 0) for a in out.rows[0, batch]], dtype=np.int64)
            fixed = out.rows.copy()
            fixed[4, batch] = cnt
            keep = np.ones(fixed.shape[1], bool)
            keep[np.flatnonzero(batch)[cnt == 0]] = False
            out.rows = fixed[:, keep]
        return out

    def _tree_candidate(self, x, K, eps0) -> Candidate | None:
        """The worst reward of exit x's trees (None when no tree item fits within T): the first
        item of a tree of 1 + T − τ − K·P items (T − τ without random pulls)."""
        rem, P = x["L"], x["P"]
        if rem <= 0 or (P > 0 and K * P > rem):
            return None
        items = 1 + rem - K * P if P > 0 else rem
        nodes = bit_length(items)
        comp = Composition.of([(LaplaceRelease(scale=x["levels"] / eps0, sensitivity=1.0),
                                nodes)])
        return Candidate(
            comp, Witness(arm=0, index=x["tau"] // K + (P - 1 if P > 0 else 0), round=None),
            f"exit after {x['e']} gap iterations (τ = {x['tau']}): trees of T − τ = {rem} "
            f"leaves, {x['levels']} levels, Lap(levels/ε0) per p-sum, ε0 = ε/(2K); the "
            f"first item of a tree holding {items} items lies in {nodes} p-sums")

    counter_note = ""

    def certificate(self, T, K):
        eps0 = self.params["epsilon"] / (2 * K)
        cands = []
        if self.schedule(T, K)["m"]:
            cands.append(Candidate(
                Composition.of([LaplaceRelease(scale=self.gap_scale(K), sensitivity=1.0)]),
                Witness(arm=0, index=0, round=1),
                "a gap-estimation reward lies in one batch mean released once with "
                "Lap(2K/(εm)) (sensitivity 1/m): ε/(2K); batches are disjoint"))
        seen = set()
        for x in self._exits(T, K):
            cand = self._tree_candidate(x, K, eps0)
            if cand is None or cand.composition in seen:
                continue
            seen.add(cand.composition)
            cands.append(cand)
        if not cands:
            cands.append(Candidate(Composition(), Witness(arm=0, index=0, round=None),
                                   "no release can complete within T"))
        return Certificate(candidates=tuple(cands), adaptive=self.adaptive,
                           note="ε/(2K) per reward against the theorem's ε (parallel "
                                "composition over arms and phases)" + self.counter_note)

    def theorem(self, T, K):
        return theorems.mishra_thakurta_2015_private_ts(self.params["epsilon"])
