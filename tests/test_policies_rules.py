"""Rules of the policies against hand-computed steps (tiny reward tables, scripted generators)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.policies.anytime_lazy_ucb import ucb_index
from dpledger.policies.dp_se import epoch_length
from dpledger.policies.environments import bernoulli, table
from dpledger.policies.hu_hegde import DPTS, dp_ts_shift
from dpledger.policies.rules import bernoulli_kl, kl_ucb_index, kl_ucb_newton
from dpledger.policies.simulator import run_generator

from policy_helpers import StubRng, policy, reference_run


# ---- KL-UCB index ---------------------------------------------------------------------------

def _exact_kl_index(p, bound):
    """High-precision bisection (60 halvings beyond 1e-13 are meaningless in float64)."""
    return kl_ucb_index(p, bound, 1e-14)


@pytest.mark.parametrize("p", [0.0, 1e-12, 1e-6, 0.01, 0.3, 0.5, 0.77, 0.99, 1 - 1e-9,
                               1 - 1e-15, 1.0])
@pytest.mark.parametrize("bound", [1e-12, 1e-8, 1e-4, 0.01, 0.5, 3.0, 40.0])
def test_kl_newton_within_1e_10_of_bisection(p, bound):
    got = kl_ucb_newton(p, bound)
    assert abs(got - _exact_kl_index(p, bound)) <= 1e-10
    assert p <= got <= 1.0


def test_kl_newton_random_grid():
    rng = np.random.default_rng(7)
    p = np.concatenate([rng.random(3000), rng.random(1000) ** 8, 1 - rng.random(1000) ** 8])
    b = 10 ** rng.uniform(-10, 1.5, p.size)
    err = max(abs(kl_ucb_newton(x, y) - _exact_kl_index(x, y)) for x, y in zip(p, b, strict=True))
    assert err <= 1e-10


def test_kl_index_hand_value():
    # p = 0: d(0, q) = −ln(1 − q)  ⇒  q = 1 − e^{−bound}
    assert kl_ucb_newton(0.0, math.log(2)) == pytest.approx(0.5, abs=1e-12)
    # d(0.5, q) at the answer equals the bound
    q = kl_ucb_newton(0.5, 0.2)
    assert bernoulli_kl(0.5, q) == pytest.approx(0.2, abs=1e-9)


def _klucb_reference(env_table, T):
    """Independent per-round KL-UCB on a fixed table (no randomness unless tied)."""
    K = env_table.shape[1]
    s, n, acts = np.zeros(K), np.zeros(K), []
    for t in range(1, T + 1):
        if t <= K:
            a = t - 1
        else:
            idx = [kl_ucb_index(s[j] / n[j], math.log(t) / n[j], 1e-13) for j in range(K)]
            a = int(np.argmax(idx))
        s[a] += env_table[t - 1, a]
        n[a] += 1
        acts.append(a)
    return np.array(acts)


def test_klucb_matches_independent_reference_on_table():
    rng = np.random.default_rng(3)
    tab = np.clip(rng.random((400, 3)) * np.array([0.5, 0.4, 0.3]) + [0.3, 0.3, 0.3], 0, 1)
    env = table(tab)
    for thr in (True, False):
        out = policy("klucb", threshold_test=thr).run_one(run_generator(0, 0), env.as_tuple(), 400)
        np.testing.assert_array_equal(out.actions, _klucb_reference(tab, 400))


def test_klucb_threshold_test_same_actions_as_full_recomputation():
    env = bernoulli([0.9, 0.85, 0.5, 0.4, 0.1]).as_tuple()
    for i in range(5):
        a = policy("klucb").run_one(run_generator(11, i), env, 20000).actions
        b = policy("klucb", threshold_test=False).run_one(run_generator(11, i), env, 20000).actions
        np.testing.assert_array_equal(a, b)


# ---- Beta-TS ---------------------------------------------------------------------------------

def test_beta_ts_matches_independent_reference_and_bernoulli_trick():
    tab = np.array([[0.25, 1.0], [1.0, 0.0], [0.5, 0.75]] * 20)
    env = table(tab)
    out = policy("ts-beta").run_one(run_generator(5, 0), env.as_tuple(), 60)
    rng = run_generator(5, 0)
    s, f, acts = np.zeros(2), np.zeros(2), []
    for t in range(60):
        th = np.array([rng.beta(s[j] + 1, f[j] + 1) for j in range(2)])
        a = int(np.argmax(th)) if th[0] != th[1] else int(rng.integers(0, 2))
        x = tab[t, a]
        if x in (0.0, 1.0):
            ok = x == 1.0
        else:
            ok = rng.random() < x          # the Bernoulli trick
        s[a] += ok
        f[a] += not ok
        acts.append(a)
    np.testing.assert_array_equal(out.actions, acts)


# ---- Lazy-DP-TS / DP-TS shifts (base-2 logs, A1) ---------------------------------------------

def test_dp_ts_shift_base2():
    # υ = 6·√8·log2(O+1)·log2(t)/(ε·O); O = 3, t = 8, ε = 2: 6·√8·2·3/(2·3) = 6√8
    assert dp_ts_shift(2.0, 3.0, 8.0) == pytest.approx(6 * math.sqrt(8), rel=1e-14)
    assert dp_ts_shift(1.0, 1.0, 4.0) == pytest.approx(6 * math.sqrt(8) * 1 * 2, rel=1e-14)


def test_lazy_dp_ts_first_beta_parameters():
    env = table(np.array([[0.2, 0.6]] * 10))
    stub = StubRng()
    reference_run(policy("lazy-dp-ts", epsilon=100.0), stub, env, 3)
    # round 3: μ = clip(x + 3·log2(3)/ε), Beta(μ·1 + 1, (1 − μ)·1 + 1)
    for j, x in enumerate((0.2, 0.6)):
        m = x + 3 * math.log2(3) / 100.0
        assert stub.beta_args[j] == pytest.approx((m + 1, 2 - m), rel=1e-13)


def test_dp_ts_first_beta_parameters_and_noise_scales():
    env = table(np.array([[0.2, 0.6]] * 10))
    stub = StubRng()
    reference_run(policy("dp-ts", epsilon=1000.0), stub, env, 3)
    for j, x in enumerate((0.2, 0.6)):
        m = x + 6 * math.sqrt(8) * math.log2(2) * math.log2(3) / 1000.0
        assert stub.beta_args[j] == pytest.approx((m + 1, 2 - m), rel=1e-13)
    # two initial log-mechanism releases Lap(2/ε), then a binary p-sum of epoch 0: Lap(2·1/ε)
    assert stub.laplace_scales == pytest.approx([2e-3, 2e-3, 2e-3])


def test_dp_ts_epoch_boundaries_and_trees():
    # arm 0 always wins (reward 1 vs 0, no noise): its log blocks are [0,1), [1,3), [3,7), …
    env = table(np.array([[1.0, 0.0]] * 40))
    out = reference_run(policy("dp-ts", epsilon=1e6), StubRng(), env, 40)
    r = out.rows
    arm0 = r[:, r[0] == 0]
    np.testing.assert_array_equal(arm0[1], [0, 1, 3, 7, 15])
    np.testing.assert_array_equal(arm0[2], [1, 3, 7, 15, 31])
    tr = out.trees
    m = tr["arm"] == 0
    # arm 0 has 39 observations: buffers at offsets 1, 3, 7, 15, 31 (the last holds 8 items)
    np.testing.assert_array_equal(tr["offset"][m], [1, 3, 7, 15, 31])
    np.testing.assert_array_equal(tr["n_items"][m], [1, 3, 7, 15, 8])
    np.testing.assert_array_equal(tr["levels"][m], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(tr["release_id"][m], [0, 1, 2, 3, 4])


def test_dp_ts_depth_matches_brute_force():
    for T in range(2, 200):
        K = 2
        n_max = T - K + 1
        depth = 0
        for r in range(12):
            start = 2 ** (r + 1) - 1                 # observations before epoch r's buffer
            items = min(max(n_max - start, 0), 2 ** (r + 1) - 1)
            # item 1 lies in the level-ℓ p-sum once the buffer holds 2^ℓ items
            depth = max(depth, sum(1 for l in range(r + 1) if items >= 2 ** l))
        assert DPTS.max_depth(T, K) == depth, T


# ---- Lazy epochs (Lazy-DP-TS, Anytime-Lazy-UCB) ----------------------------------------------

@pytest.mark.parametrize("name", ["lazy-dp-ts", "anytime-lazy-ucb"])
def test_lazy_epoch_boundaries(name):
    env = table(np.array([[1.0, 0.0]] * 40))
    out = reference_run(policy(name, epsilon=1e6), StubRng(), env, 40)
    r = out.rows[:, out.rows[0] == 0]
    np.testing.assert_array_equal(r[1], [0, 1, 3, 7, 15])
    np.testing.assert_array_equal(r[2], [1, 3, 7, 15, 31])


def test_anytime_lazy_ucb_index_and_first_choice():
    eps = 0.5
    # μ̃ + √(3 ln t /(2 O)) + 3 ln t /(ε O) at t = 10, O = 4, μ̃ = 0.3
    want = 0.3 + math.sqrt(3 * math.log(10) / 8) + 3 * math.log(10) / (eps * 4)
    assert ucb_index(0.3, 4.0, eps, 10) == pytest.approx(want, rel=1e-15)
    env = table(np.array([[0.2, 0.7, 0.1]] * 10))
    stub = StubRng()
    out = reference_run(policy("anytime-lazy-ucb", epsilon=eps), stub, env, 5)
    assert list(out.actions) == [0, 1, 2, 1, 1]   # equal O: the larger μ̃ wins at t = 4, 5
    assert stub.laplace_scales == [2.0, 2.0, 2.0, 2.0]   # 3 initial + arm 1's epoch of 2


# ---- DP-SE -----------------------------------------------------------------------------------

def test_dp_se_epoch_length_hand_values():
    beta = 1e-3
    r, l8, l4 = epoch_length(1, 2, 1.0, beta)
    assert l8 == pytest.approx(math.log(8 * 2 / beta))
    assert l4 == pytest.approx(math.log(4 * 2 / beta))
    assert r == pytest.approx(max(32 * l8 / 0.25, 8 * l4 / 0.5) + 1)
    # the privacy term dominates for small ε
    r2, _, l4b = epoch_length(2, 3, 1e-3, beta)
    assert r2 == pytest.approx(8 * l4b / (1e-3 * 0.25) + 1)


def test_dp_se_elimination_and_commit():
    T = 5000
    env = table(np.array([[1.0, 0.0]] * T))
    pol = policy("dp-se", epsilon=1.0)
    stub = StubRng()
    out = reference_run(pol, stub, env, T)
    r_e, l8, l4 = epoch_length(1, 2, 1.0, 1.0 / T)
    n1 = math.ceil(r_e)
    acts = out.actions
    np.testing.assert_array_equal(acts[:2 * n1], np.tile([0, 1], n1))   # round-robin
    assert (acts[2 * n1:] == 0).all()                                     # arm 1 eliminated
    h, c = math.sqrt(l8 / (2 * r_e)), l4 / (r_e * 1.0)
    assert 1.0 > 2 * h + 2 * c
    np.testing.assert_array_equal(out.rows[:4].T, [[0, 0, n1, 0], [1, 0, n1, 0]])
    assert stub.laplace_scales == [1.0, 1.0]


def test_dp_se_cut_epoch_makes_no_release():
    T = 1000               # epoch 1 needs 2·⌈R_1⌉ > 1000 rounds
    r_e, _, _ = epoch_length(1, 2, 1.0, 1.0 / T)
    assert 2 * math.ceil(r_e) > T
    out = policy("dp-se").run_one(run_generator(0, 0), bernoulli([0.9, 0.4]).as_tuple(), T)
    assert out.rows.shape[1] == 0
    np.testing.assert_array_equal(out.actions, np.tile([0, 1], T // 2))


def test_dp_se_beta_default_resolves_to_one_over_T():
    assert policy("dp-se").resolved_params(1234, 2)["beta"] == pytest.approx(1 / 1234)
    assert policy("dp-se", beta=0.01).resolved_params(1234, 2)["beta"] == 0.01


# ---- AdaP: the K = 2 worked example of B §6.1 ------------------------------------------------

@pytest.mark.parametrize("name", ["adap-ucb", "adap-klucb"])
def test_adap_first_episodes(name):
    eps, alpha = 1.0, 3.1
    tab = np.array([[1.0, 0.0]] * 6 + [[0.5, 0.5]] * 30)
    env = table(tab)
    stub = StubRng()
    out = reference_run(policy(name, epsilon=eps, alpha=alpha), stub, env, 10)

    def index(mu, n, t):
        lt = math.log(t)
        if name == "adap-ucb":
            return mu + math.sqrt(alpha * lt / (2 * n)) + alpha * lt / (eps * n)
        m = min(1.0, max(0.0, mu + alpha * lt / (eps * n)))
        return kl_ucb_index(m, alpha * lt / n, 1e-13)

    # hand-run: t=1 arm 0 (r=1), t=2 arm 1 (r=0); episodes start at t_ℓ = 3, 4, 6, 7
    mu, n, N, acts, t = [1.0, 0.0], [1, 1], [1, 1], [0, 1], 2
    expect_rows = [(0, 0, 1, 0), (1, 0, 1, 0)]
    while t < 10:
        i0, i1 = index(mu[0], n[0], t + 1), index(mu[1], n[1], t + 1)
        a = 0 if i0 > i1 else 1 if i1 > i0 else 0          # stub tie-break: the first
        L = N[a]
        m = min(L, 10 - t)
        acts += [a] * m
        if m == L:
            mu[a] = tab[t:t + L, a].mean()
            n[a] = L
            expect_rows.append((a, N[a], N[a] + L, int(math.log2(L))))
        N[a] += m
        t += m
    np.testing.assert_array_equal(out.actions, acts)
    np.testing.assert_array_equal(out.rows[:4].T, expect_rows)
    if name == "adap-ucb":
        # the B §6.1 pattern: arm 0 (size 1), arm 0 (size 2), arm 1 (size 1), then at t₄ = 7
        # arm 0 uses its 2-reward episode mean with Lap(1/(2ε)), arm 1 its r₆ with Lap(1/ε)
        assert acts[:6] == [0, 1, 0, 0, 0, 1]
        assert stub.laplace_scales[:5] == [1.0, 1.0, 1.0, 0.5, 1.0]


def _argmax_reference(values, rng):
    """A2 written out plainly: count the maxima while sweeping (reset on a strict improvement),
    draw only on a tie, take the k-th maximum."""
    best, best_i, n_best = values[0], 0, 1
    for i in range(1, len(values)):
        if values[i] > best:
            best, best_i, n_best = values[i], i, 1
        elif values[i] == best:
            n_best += 1
    if n_best == 1:
        return best_i
    k = rng.integers(0, n_best)
    return [i for i in range(len(values)) if values[i] == best][k]


def test_argmax_step_sweep_is_argmax_random_tie():
    """The one-loop argmax of the kernels (argmax_step, then argmax_random_tie on a tie) picks
    the arm argmax_random_tie picks and draws the tie-break exactly when it does: values with
    and without ties, NaN in first and later places."""
    from dpledger.policies.rules import argmax_random_tie, argmax_step
    gen = np.random.default_rng(0)
    cases = [gen.integers(0, 3, size=int(gen.integers(1, 7))).astype(float) for _ in range(300)]
    cases += [np.array([np.nan, 1.0, 2.0]), np.array([1.0, np.nan, 1.0]), np.array([0.5])]
    for vals in cases:
        for seed in range(3):
            r1, r2, r3 = (np.random.default_rng(seed) for _ in range(3))
            best, a, tie = vals[0], 0, False
            for j in range(1, vals.size):
                best, a, tie = argmax_step(vals[j], j, best, a, tie)
            if tie:
                a = argmax_random_tie(vals, r1)
            assert a == argmax_random_tie(vals, r2) == _argmax_reference(vals, r3), vals
            assert r1.random() == r2.random() == r3.random()


def test_argmax_first_then_tie_break_is_argmax_random_tie():
    """The kernels' Generator-free sweep (argmax_first, then tie_break only on a tie) picks the
    arm argmax_random_tie picks and draws exactly when it does (compiled, as the kernels run
    it; ties, NaN, one value)."""
    from numba import njit

    from dpledger.policies.rules import argmax_first, argmax_random_tie, tie_break

    @njit
    def pick(values, rng):
        a, tie = argmax_first(values)
        if tie:
            a = tie_break(values, a, rng)
        return a

    gen = np.random.default_rng(1)
    cases = [gen.integers(0, 3, size=int(gen.integers(1, 7))).astype(float) for _ in range(300)]
    cases += [np.array([np.nan, 1.0, 2.0]), np.array([1.0, np.nan, 1.0]), np.array([0.5])]
    n_ties = 0
    for vals in cases:
        n_ties += int(np.sum(vals == np.nanmax(vals)) > 1) if not np.isnan(vals).all() else 0
        for seed in range(3):
            r1, r2, r3 = (np.random.default_rng(seed) for _ in range(3))
            assert pick(vals, r1) == argmax_random_tie(vals, r2) == _argmax_reference(vals, r3)
            assert r1.random() == r2.random() == r3.random()
    assert n_ties > 50                      # the tie-break path was exercised


def test_laplace_bits_is_generator_laplace_draw_for_draw():
    """Compiled kernels draw Laplace noise with laplace_bits (one log of a selected argument,
    no branch on the sign); it must return Generator.laplace(0, b)'s doubles, bit for bit, and
    leave the stream where Generator.laplace leaves it."""
    from numba import njit

    from dpledger.mechanisms.noise import laplace_bits

    @njit
    def draws(bg, scale, n):
        out = np.empty(n)
        for i in range(n):
            out[i] = laplace_bits(bg, scale)
        return out

    for scale in (1.0, 0.37, 20.0, 2.0 ** -30):
        a = np.random.default_rng(11)
        b = np.random.default_rng(11)
        got = draws(a.bit_generator, scale, 200_000)
        want = b.laplace(0.0, scale, 200_000)
        assert np.array_equal(got.view(np.int64), want.view(np.int64))
        assert (got > 0).mean() == pytest.approx(0.5, abs=0.01)   # both branches taken
        assert a.random() == b.random()
