"""The smooth binary mechanism (mechanisms/smooth.py, docs/algorithms.md#smooth-binary-counter):
its shape, its node counts against an independent enumeration, its ledger rows, its running
counts and the closed form of its noise variance."""
from __future__ import annotations

from math import comb

import numpy as np
import pytest

from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.smooth_tree import smooth_item_nodes, smooth_worst_nodes
from dpledger.errors import DpledgerError
from dpledger.mechanisms import counters as C
from dpledger.mechanisms import smooth as S
from dpledger.mechanisms.samplers import FloatSampler


def _release_steps(h, w):
    """For every item of a full smooth tree (h, w): the steps at which its released nodes are
    released — from the definition (nodes = 1-bits of the output leaves), not the kernel."""
    L = comb(h, w) - 1
    leaves = [(1 << w) - 1]
    for _ in range(L):
        x = leaves[-1] + 1
        while bin(x).count("1") != w:
            x += 1
        leaves.append(x)
    first = {}
    for s in range(1, L + 1):
        for p in range(h):
            if (leaves[s] >> p) & 1:
                first.setdefault((p, leaves[s] >> p), s)
    steps = np.full((L, h), L + 1, dtype=np.int64)
    for j in range(L):
        v = leaves[j]
        for p in range(h):
            if not (v >> p) & 1 and (p, (v >> p) + 1) in first:
                steps[j, p] = first[(p, (v >> p) + 1)]
    return L, steps


@pytest.mark.parametrize("h", range(2, 13))
def test_first_item_is_the_worst_and_its_count_is_the_closed_form(h):
    """For every w and every tree size n: max over items of the released nodes holding them
    equals the first item's and #{p ∈ [w, h): C(p, w) ≤ n}; the count never exceeds h − w."""
    for w in range(1, h):
        L, steps = _release_steps(h, w)
        ns = np.arange(1, L + 1)
        # counts[j, n−1]: item j's nodes released by step n (items j ≤ n)
        counts = (steps[:, :, None] <= ns[None, None, :]).sum(axis=1)
        counts = np.where(np.arange(L)[:, None] < ns[None, :], counts, 0)
        closed = np.array([smooth_worst_nodes(n, h, w) for n in ns])
        assert np.array_equal(counts.max(axis=0), closed), (h, w)
        assert np.array_equal(counts[0], closed), (h, w)
        assert closed.max() <= h - w


def test_item_enumeration_matches_the_release_steps():
    h, w = 10, 6
    L, steps = _release_steps(h, w)
    for n in (1, 7, 100, L):
        want = (steps[:n] <= n).sum(axis=1)
        assert np.array_equal(smooth_item_nodes(n, h, w), want)


def test_shape_minimises_the_laplace_variance():
    for L in (1, 10, 219, 1000, 10 ** 4, 10 ** 6):
        h, w = S.smooth_shape(L)
        assert comb(h, w) >= L + 1
        v = w * (h - w) ** 2
        for h2 in range(2, 40):
            for w2 in range(1, h2):
                if comb(h2, w2) >= L + 1:
                    assert w2 * (h2 - w2) ** 2 >= v
    assert S.smooth_shape(10 ** 6) == (33, 27)


@pytest.mark.parametrize("shape,L", [((12, 9), 219), ((10, 5), 251), ((11, 10), 10), (None, 300)])
def test_ledger_rows_are_every_released_node_and_exact_per_reward(shape, L):
    """One row per non-empty released node — n rows for n items — and each reward's row
    coverage equals its enumerated node count (so the per-reward totals are exact); with noise
    scale ~1e-12 the outputs are the running sums."""
    led = RewardLedger()
    c = S.SmoothCounter(FloatSampler(np.random.default_rng(1)), led, max_items=L,
                        epsilon=1e12, shape=shape)
    x = np.random.default_rng(2).random(L)
    out = np.concatenate([c.extend(x[:L // 3]), c.extend(x[L // 3:])])
    assert np.allclose(out, np.cumsum(x), atol=1e-8)
    r = led.rows
    assert r["start"].size == L
    cov = np.zeros(L + 1, dtype=np.int64)
    np.add.at(cov, r["start"], 1)
    np.add.at(cov, r["stop"], -1)
    cov = np.cumsum(cov)[:L]
    assert np.array_equal(cov, smooth_item_nodes(L, c.h, c.w))
    assert cov.max() == smooth_worst_nodes(L, c.h, c.w) <= c.h - c.w
    rel = led.releases[int(r["release_id"][0])]
    assert rel.scale == pytest.approx((c.h - c.w) / 1e12)


def _noise_at(kind, L, eps, reps, checkpoints, seed):
    """Noise of the running count at ``checkpoints`` (1-based) over ``reps`` runs of the
    compiled counter on an all-zero stream."""
    rng = np.random.default_rng(seed)
    x = np.zeros(L)
    out = np.empty(L)
    got = np.empty((reps, len(checkpoints)))
    cols = tuple(np.zeros(L + 1, dtype=np.int64) for _ in range(6))
    for i in range(reps):
        if kind == "smooth":
            h, w = S.smooth_shape(L)
            fs, ist = S.smooth_new(h, w, L, 0)
            S.smooth_run(fs, ist, x, rng, (h - w) / eps, 0, cols, 0, 0, 0, out)
        else:
            fs, ist = C.binary_new(L, 0)
            C.binary_run(fs, ist, x, rng, np.array([C.binary_levels(L) / eps]),
                         np.array([0]), cols, 0, 0, 0, out)
        got[i] = out[np.array(checkpoints) - 1]
    return got


def _trailing_ones_of_leaves(n, w):
    """z_t for t = 1 … n, from the leaves enumerated by popcount (not Gosper's rule)."""
    out, x = [], (1 << w) - 1
    while len(out) < n:
        x += 1
        if bin(x).count("1") == w:
            out.append(len(bin(x)) - len(bin(x).rstrip("1")))
    return np.array(out)


def test_variance_closed_forms_smooth_and_binary():
    """Seeded: the sample variance of the running count's noise at several steps against
    2·(w − z_t)·((h − w)/ε)² (smooth; z_t the trailing ones of leaf l_t, its empty nodes) and
    2·popcount(t)·(levels/ε)² (binary).  Tolerance 5 standard errors of a sample variance
    (kurtosis of a sum of m Laplaces is 3 + 3/m, so SE = σ²·√((2 + 3/m)/R)): two-sided error
    rate < 1e-6 per check."""
    L, eps, R = 1000, 2.0, 3000
    pts = [1, 2, 3, 4, 255, 256, 511, 777, 1000]
    h, w = S.smooth_shape(L)
    z = _trailing_ones_of_leaves(L, w)
    closed = S.smooth_variances(L, h, w, eps)
    assert np.array_equal(closed, 2.0 * (w - z) * ((h - w) / eps) ** 2)
    assert closed.max() == S.smooth_variance(h, w, eps) and set(z[np.array(pts) - 1]) != {0}
    sm = _noise_at("smooth", L, eps, R, pts, 11)
    want = closed[np.array(pts) - 1]
    se = want * np.sqrt((2 + 3 / (w - z[np.array(pts) - 1])) / R)
    assert np.all(np.abs(sm.var(axis=0, ddof=1) - want) < 5 * se)
    bi = _noise_at("binary", L, eps, R, pts, 12)
    for j, t in enumerate(pts):
        v = S.binary_variance(t, C.binary_levels(L), eps)
        m = bin(t).count("1")
        assert abs(bi[:, j].var(ddof=1) - v) < 5 * v * np.sqrt((2 + 3 / m) / R)
    # the ratio the benchmark reports, from the closed forms: ≥ 3 on average over t ≤ L
    avg_binary = np.mean([S.binary_variance(t, C.binary_levels(L), eps) for t in range(1, L + 1)])
    assert avg_binary / closed.mean() > 3.0


def test_bad_inputs_are_one_line_errors():
    led = RewardLedger()
    with pytest.raises(DpledgerError):
        S.SmoothCounter(FloatSampler(np.random.default_rng(0)), led, max_items=100, epsilon=1.0,
                        shape=(8, 4))                    # C(8, 4) = 70 < 101 leaves
    c = S.SmoothCounter(FloatSampler(np.random.default_rng(0)), led, max_items=3, epsilon=1.0)
    with pytest.raises(DpledgerError):
        c.extend([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(DpledgerError):
        smooth_worst_nodes(10 ** 6, 10, 5)


def test_tail_bound_holds_for_every_node_at_once():
    """smooth_tail_bound (h, w, ε, q) = w·b·ln(w/q): every one of the w nodes' Lap(b) is within
    b·ln(w/q) except with probability exactly 1 − (1 − q/w)^w ≤ q (seeded, 2·10⁵ draws: the
    rate of the max within 5 binomial sd of it), and so is their sum."""
    h, w, eps, q = 33, 27, 0.2, 0.05
    b = (h - w) / eps
    bound = S.smooth_tail_bound(h, w, eps, q)
    assert bound == pytest.approx(w * b * np.log(w / q), rel=1e-15)
    rng = np.random.default_rng(7)
    n = 200_000
    x = rng.laplace(0.0, b, (n, w))
    per_node = (np.abs(x) > b * np.log(w / q)).any(axis=1).mean()
    p = 1.0 - (1.0 - q / w) ** w
    assert p <= q and abs(per_node - p) <= 5 * np.sqrt(p * (1 - p) / n)
    assert (np.abs(x.sum(axis=1)) > bound).mean() <= p
    with pytest.raises(DpledgerError, match="failure probability"):
        S.smooth_tail_bound(h, w, eps, 1.0)


def test_dp_ucb_smooth_width_is_its_own_tail_bound():
    """dp-ucb counter=smooth: Γ = w·((h − w)/ε0)·ln(w·K·T/γ) (the tail bound at γ/(K·T));
    counter=binary keeps the printed Γ = ln²T·ln(K·T·ln T/γ)/ε0; κ scales both."""
    import math
    from dpledger.policies.registry import make_policy
    T, K = 10 ** 6, 5
    eps0 = 1.0 / K
    h, w = 33, 27                                  # smooth_shape(T − K + 1), docs table
    s = make_policy("dp-ucb", counter="smooth")
    assert s.shape(T, K) == (h, w)
    assert s.confidence_relaxation(T, K) == pytest.approx(
        w * (h - w) / eps0 * math.log(w * K * T / 0.1), rel=1e-12)
    lnT = math.log(T)
    assert make_policy("dp-ucb").confidence_relaxation(T, K) == pytest.approx(
        lnT ** 2 * math.log(K * T * lnT / 0.1) / eps0, rel=1e-15)
    k = make_policy("dp-ucb", counter="smooth", relaxation_scale=0.01)
    assert k.confidence_relaxation(T, K) == pytest.approx(0.01 * s.confidence_relaxation(T, K))
    # the smooth counter's smaller noise gives the smaller width at this T
    assert s.confidence_relaxation(T, K) < make_policy("dp-ucb").confidence_relaxation(T, K)
