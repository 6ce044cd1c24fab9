"""DP-UCB and private Thompson sampling (Mishra & Thakurta 2015, A10/A11): invariants of
docs/design.md#invariants on every run, certificate/theorem values recomputed by hand, tree records
against the Laplace draws, hand-computed Γ, indices, gap-estimation schedule and Beta clipping."""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

from dpledger.policies.environments import bernoulli, table
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import simulate
from dpledger.report import build_run_report

sys.path.insert(0, os.path.dirname(__file__))
from policy_helpers import CountingRng, StubRng  # noqa: E402
from test_policies_gaussian import reference  # noqa: E402

TOL = 1 + 1e-12


def _ok(rep):
    return [d for d in rep["privacy"]["checks"]["details"] if not d["ok"]]


# ---- 1. invariants over the grid --------------------------------------------------------------

@pytest.mark.parametrize("budget", ["split", "full"])
@pytest.mark.parametrize("width", ["printed", "experimental"])
def test_dp_ucb_invariants(budget, width):
    T, K, eps = 300, 3, 1.0
    env = bernoulli([0.8, 0.5, 0.3])
    pol = make_policy("dp-ucb", epsilon=eps, per_tree_budget=budget, width=width)
    res = simulate(pol, env, T, seed=2, runs=2)
    rep = build_run_report(res, deltas=[1e-6])
    p = rep["privacy"]
    assert not _ok(rep), _ok(rep)
    assert p["checks"]["realized_le_certificate"] and p["checks"]["certificate_le_theorem"]
    eps0 = eps / K if budget == "split" else eps
    levels = 9                                   # ⌈log2(301)⌉
    nodes = 9                                    # bit length of T − K + 1 = 298
    assert p["certificate"]["pure_epsilon"] == pytest.approx(nodes * eps0 / levels, rel=1e-12)
    assert p["checks"]["certificate_over_theorem"]["pure_epsilon"] == pytest.approx(
        eps0 / eps, rel=1e-12)                   # 1/K for the printed split: reported
    assert p["theorem"]["pure_epsilon"] == eps
    # direct ledger checks: one tree record per arm, each arm's first reward in bit_length(n)
    led = res.ledger
    tr = led.trees
    assert tr["run"].size == 2 * K
    assert np.all(tr["levels"] == levels) and np.all(tr["offset"] == 0)
    assert led.rows["run"].size == 0             # no row per p-sum
    for run, arm, n in zip(tr["run"], tr["arm"], tr["n_items"], strict=True):
        comp = led.composition_of(int(run), int(arm), 0)
        assert comp.total_count == int(n).bit_length()
        assert comp.pure_epsilon() == pytest.approx(int(n).bit_length() * eps0 / levels)
        assert comp.pure_epsilon() <= p["certificate"]["pure_epsilon"] * TOL


@pytest.mark.parametrize("gap", [True, False])
def test_private_ts_invariants(gap):
    T, K = 1500, 2
    env = bernoulli([0.9, 0.2])
    eps = 60.0 if gap else 1.0
    pol = make_policy("dp-ts-mt", epsilon=eps, gap_estimation=gap, random_pulls=10)
    res = simulate(pol, env, T, seed=4, runs=2)
    rep = build_run_report(res, deltas=[1e-6])
    p = rep["privacy"]
    assert not _ok(rep), _ok(rep)
    assert p["checks"]["realized_le_certificate"] and p["checks"]["certificate_le_theorem"]
    assert p["certificate"]["pure_epsilon"] == pytest.approx(eps / (2 * K), rel=1e-12)
    assert p["checks"]["certificate_over_theorem"]["pure_epsilon"] == pytest.approx(1 / (2 * K))
    assert p["realized"]["label"].startswith("odometer") == gap
    led = res.ledger
    assert led.trees["run"].size == 2 * K        # the tree phase was reached in every run
    # the random-pull item's P observations share the node count of the tree's first item
    for run, arm, off, n in zip(led.trees["run"], led.trees["arm"], led.trees["offset"],
                                led.trees["n_items"], strict=True):
        first = led.composition_of(int(run), int(arm), int(off))
        for i in range(int(off) - 9, int(off)):
            assert led.composition_of(int(run), int(arm), i) == first
        assert first.total_count == int(n).bit_length()
        assert first.pure_epsilon() <= eps / (2 * K) * TOL


def test_private_ts_default_parameters_never_reach_the_tree():
    """Printed constants at T = 1e4: one gap batch per arm, then the horizon cuts the next."""
    T, K = 10 ** 4, 2
    pol = make_policy("dp-ts-mt")
    sch = pol.schedule(T, K)
    assert sch["m"] == [3537]                    # ⌈192·2·ln(1e4)/1⌉ = ⌈3536.77⌉
    res = simulate(pol, bernoulli([0.6, 0.5]), T, seed=0, runs=1)
    rows = res.ledger.rows
    assert sorted(zip(rows["arm"].tolist(), rows["start"].tolist(), rows["stop"].tolist(),
                      strict=True)) == \
        [(0, 0, 3537), (1, 0, 3537)]
    assert res.ledger.trees["run"].size == 0
    cert = pol.certificate(T, K)
    assert max(c.pure_epsilon() for c in cert.compositions) == pytest.approx(0.25)


# ---- 2. values by hand ------------------------------------------------------------------------

@pytest.mark.parametrize("T,K,budget,levels,nodes", [
    (1000, 3, "split", 10, 10),       # ⌈log2 1001⌉ = 10; 998 has 10 bits
    (1024, 2, "split", 11, 10),       # 1024 = 2^10 needs 11 levels; item 1 of 1023 items: 10
    (1024, 2, "full", 11, 10),
    (7, 3, "full", 3, 3),             # T − K + 1 = 5: 3 bits
    (9, 2, "split", 4, 4),            # T − K + 1 = 8 = 2^3: item 1 is in [1,1],[1,2],[1,4],[1,8]
])
def test_dp_ucb_certificate_by_hand(T, K, budget, levels, nodes):
    eps = 0.7
    pol = make_policy("dp-ucb", epsilon=eps, per_tree_budget=budget)
    eps0 = eps / K if budget == "split" else eps
    (cand,) = pol.certificate(T, K).candidates
    (rel, count), = cand.composition.items
    assert count == nodes
    assert rel.scale == pytest.approx(levels / eps0, rel=1e-14)
    assert cand.composition.pure_epsilon() == pytest.approx(nodes * eps0 / levels, rel=1e-12)
    assert pol.theorem(T, K).pure_epsilon == eps


def test_dp_ucb_gamma_by_hand():
    pol = make_policy("dp-ucb", epsilon=1.0)
    T, K = 10 ** 5, 5
    lnT = 11.512925464970229
    expected = lnT ** 2 * math.log(5 * 1e5 * lnT / 0.1) / 0.2      # ≈ 1.18e4 (A10: ≈ 1.2e4)
    assert pol.confidence_relaxation(T, K) == pytest.approx(expected, rel=1e-12)
    assert 1.15e4 < expected < 1.2e4
    full = make_policy("dp-ucb", epsilon=1.0, per_tree_budget="full", gamma=0.5)
    assert full.confidence_relaxation(T, K) == pytest.approx(
        lnT ** 2 * math.log(5 * 1e5 * lnT / 0.5), rel=1e-12)


def test_dp_ucb_index_by_hand():
    from dpledger.policies.mishra_thakurta import dp_ucb_index
    lt = math.log(10.0)
    assert dp_ucb_index(3.0, 4.0, lt, 2.0, False) == pytest.approx(
        0.75 + math.sqrt(2 * 2.302585092994046 / 4) + 0.5, rel=1e-14)
    assert dp_ucb_index(3.0, 4.0, lt, 2.0, True) == pytest.approx(
        0.75 + math.sqrt(3 * 2.302585092994046) / 4 + 2.302585092994046 / 4, rel=1e-14)
    # a negative noisy sum: the experimental root reads max(r, 0)
    assert dp_ucb_index(-2.0, 4.0, lt, 2.0, True) == pytest.approx(
        -0.5 + 2.302585092994046 / 4, rel=1e-14)


def test_dp_ucb_rule_on_a_tiny_table_without_noise():
    """Noise 0 (stub): rounds 1..K pull each arm; then the printed index picks by r/n + … ."""
    tab = np.array([[1, 0, 0]] * 3 + [[0, 1, 0]] * 5, dtype=float)
    T = tab.shape[0]
    pol = make_policy("dp-ucb", epsilon=1.0, width="experimental")
    rng = StubRng(lap=0.0)
    out = reference(pol, rng, table(tab), T)
    # t=1..3: arms 0,1,2 with rewards 1,0,0; t=4: index(0) = 1 + √(ln 4) + ln 4 is largest
    assert out.actions[:4].tolist() == [0, 1, 2, 0]
    # t=4 reward of arm 0 is 1 (row 3) → r=2, n=2; t=5: arm 0 again (2/2 + √(2 ln5)/2 + ln5/2)
    assert out.actions[4] == 0
    assert len(rng.laplace_scales) == T
    assert all(s == pytest.approx(4 / 1.0 * 3) for s in rng.laplace_scales)   # levels 4, ε0 = 1/3


def test_private_ts_schedule_by_hand():
    pol = make_policy("dp-ts-mt", epsilon=2.0, random_pulls="printed")
    T, K = 10 ** 7, 3
    lnT = math.log(T)
    sch = pol.schedule(T, K)
    m0 = math.ceil(192 * 3 * lnT / 2.0)          # ⌈4642.0⌉
    assert m0 == 4643
    assert sch["m"][:2] == [m0, math.ceil(192 * 3 * lnT * 4 / 2.0)]
    ex = sch["exits"][0]
    assert ex["tau"] == 3 * m0 and ex["L"] == T - 3 * m0
    assert ex["levels"] == (T - 3 * m0).bit_length()
    assert ex["P"] == math.ceil(192 * lnT ** 3 / 2.0 * 4)        # Γ/Δ̂² with Δ̂ = 1/2: 1.61e6
    assert pol.theorem(T, K).pure_epsilon == 2.0


# ---- 3. noise draws against ledger records ---------------------------------------------------

@pytest.mark.parametrize("budget", ["split", "full"])
def test_dp_ucb_draws_match_tree_records(budget):
    env = bernoulli([0.7, 0.4, 0.2])
    T = 200
    pol = make_policy("dp-ucb", per_tree_budget=budget)
    rng = CountingRng(np.random.default_rng(8))
    out = reference(pol, rng, env, T)
    # CSS11: one p-sum released per item, so Σ n_items draws; no other noise
    assert rng.laplace_calls == int(out.trees["n_items"].sum()) == out.noise_draws == T
    assert rng.normal_calls == 0 and out.rows.shape[1] == 0
    eps0 = 1.0 / 3 if budget == "split" else 1.0
    assert all(s == pytest.approx(8 / eps0) for s in rng.laplace_scales)    # levels ⌈log2 201⌉
    comp = pol.run_one(np.random.default_rng(8), env.as_tuple(), T)
    assert np.array_equal(comp.actions, out.actions)


@pytest.mark.parametrize("gap", [True, False])
def test_private_ts_draws_match_rows_and_trees(gap):
    env = bernoulli([0.9, 0.2])
    T = 600
    pol = make_policy("dp-ts-mt", epsilon=60.0, gap_estimation=gap, random_pulls=5)
    rng = CountingRng(np.random.default_rng(9))
    out = reference(pol, rng, env, T)
    gap_rows = out.rows[:, out.rows[3] == 0]
    assert np.all(gap_rows[4] == 1)
    assert rng.laplace_calls == gap_rows.shape[1] + int(out.trees["n_items"].sum())
    assert rng.laplace_calls == out.noise_draws
    assert (gap_rows.shape[1] > 0) == gap
    comp = pol.run_one(np.random.default_rng(9), env.as_tuple(), T)
    assert np.array_equal(comp.actions, out.actions)


# ---- 4. Beta parameters: clipping and n_mode --------------------------------------------------

@pytest.mark.parametrize("lap", [1000.0, -1000.0])
def test_private_ts_clips_noisy_sum_to_valid_beta(lap):
    tab = np.zeros((30, 2))
    tab[:, 0] = 1.0
    pol = make_policy("dp-ts-mt", gap_estimation=False, random_pulls=3)
    rng = StubRng(lap=lap)
    out = reference(pol, rng, table(tab), 30)
    assert rng.beta_args
    for a, b in rng.beta_args:
        assert a >= 1.0 and b >= 1.0
        if lap > 0:
            assert b == 1.0            # r clipped to n
        else:
            assert a == 1.0            # r clipped to 0
    assert out.actions[:6].tolist() == [0, 1] * 3


@pytest.mark.parametrize("mode", ["printed", "tree"])
def test_private_ts_n_mode(mode):
    """Noise 0, arm 0 always 1, arm 1 always 0.  Gap estimation (ε = 1000, T = 200): m = ⌈384·
    ln 200/1000⌉ = ⌈2.035⌉ = 3 pulls each, means (1, 0) differ by 1 > Δ̂ = 1/2: exit; random
    pulls 2 each; first combined round: r_0 = 2, n_0 = 3 + 2 (printed) or 2 (tree)."""
    T = 200
    tab = np.zeros((T, 2))
    tab[:, 0] = 1.0
    pol = make_policy("dp-ts-mt", epsilon=1000.0, random_pulls=2, n_mode=mode)
    assert pol.schedule(T, 2)["m"][0] == 3
    rng = StubRng(lap=0.0)
    out = reference(pol, rng, table(tab), T)
    assert out.actions[:10].tolist() == [0, 1] * 5
    first = rng.beta_args[:2]
    if mode == "printed":
        assert first == [(3.0, 4.0), (1.0, 6.0)]
    else:
        assert first == [(3.0, 1.0), (1.0, 3.0)]


@pytest.mark.parametrize("ca", [[0.3, 0.7, 0.7, 0.1], [0.5, 0.5, 0.5, 0.5], [0.9, 0.2, 0.9, 0.9],
                                [0.1, 0.2, 0.3, 0.4]])
def test_dp_ucb_argmax_draws_only_on_ties(ca):
    """DP-UCB's arm choice on its indices (the compiled argmax_random_tie) is A2 written out
    plainly: the unique maximum without a draw, else one uniform draw among the maxima (same
    arm, same Generator state afterwards)."""
    from dpledger.policies.mishra_thakurta import dp_ucb_from
    from dpledger.policies.rules import argmax_random_tie
    ca = np.array(ca)
    for seed in range(20):
        r1, r2 = np.random.default_rng(seed), np.random.default_rng(seed)
        idx = np.array([dp_ucb_from(a, 0.0, 0.0, 1.5, 2.25) for a in ca])
        got = argmax_random_tie(idx, r1)
        tops = [j for j in range(idx.size) if idx[j] == idx.max()]
        want = tops[0] if len(tops) == 1 else tops[int(r2.integers(0, len(tops)))]
        assert got == want and r1.random() == r2.random()


@pytest.mark.parametrize("width", ["printed", "experimental"])
def test_dp_ucb_tables_change_no_draw(width):
    """kernel_params carries ln t, √(ln t) and √(2/n) for t, n < 4096 (the kernel's per-round
    log and square roots); the kernel computes them inline beyond.  With and without the
    tables (the 4-value head only) DP-UCB must give the same actions and the same captured
    p-sums, bit for bit — past the table (T = 6000) and for both widths; the tables must hold
    the compiled expressions' own doubles."""
    import numpy as np

    from dpledger.policies.environments import bernoulli
    from dpledger.policies.mishra_thakurta import _dp_ucb, dp_ucb_root, dp_ucb_tables
    from dpledger.policies.registry import make_policy
    pol = make_policy("dp-ucb", width=width, per_tree_budget="full")
    T, K = 6000, 2
    full = pol.kernel_params(T, K)
    n = int(full[4])
    assert n == 4096 and full.size == 5 + 3 * n
    tab = dp_ucb_tables(n)
    assert np.array_equal(tab[1:n], [np.log(float(t)) for t in range(1, n)])
    assert np.array_equal(tab[2 * n + 1:], [dp_ucb_root.py_func(float(t)) for t in range(1, n)])
    outs = []
    for params in (full, full[:4].copy()):
        actions = np.zeros(T, dtype=np.int64)
        cap = np.zeros((6, 2 * T + 8))
        _dp_ucb(np.random.default_rng(3), bernoulli([0.8, 0.3]).as_tuple(), T, K, T, params,
                actions, np.zeros((5, K), np.int64), cap)
        outs.append((actions, cap))
    (a1, c1), (a2, c2) = outs
    assert np.bincount(a1, minlength=K).max() > n                   # the inline branch ran
    assert np.array_equal(a1, a2)
    assert np.array_equal(c1, c2)
