"""The ledger's posterior-read records (accounting/posterior_reads.py) against a round-by-round
brute force: every round of the window, every arm with k ≥ 1 rewards adds 1/(c(k+1)) to each
of its first k rewards."""
from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest

from dpledger.accounting.composition import Composition
from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.releases import LaplaceRelease
from dpledger.errors import DpledgerError


def brute(actions, K, first, last, c):
    """{(arm, index): μ²} from the rounds, exact rational arithmetic rounded once."""
    from fractions import Fraction
    k = [0] * K
    acc: dict[tuple[int, int], Fraction] = {}
    for t, a in enumerate(actions, start=1):
        if first <= t <= last:
            for j in range(K):
                for i in range(k[j]):
                    acc[(j, i)] = acc.get((j, i), Fraction(0)) + 1 / (Fraction(c) * (k[j] + 1))
        k[a] += 1
    return {(j, i): float(acc.get((j, i), 0)) for j in range(K) for i in range(k[j])}


def ledger_of(actions, K, first, last, c, run=0, led=None):
    led = RewardLedger() if led is None else led
    led.add_actions(run, np.asarray(actions))
    led.add_posterior_reads(run, np.arange(K), first, last, c)
    return led


def random_play(rng, T, K):
    # long stretches and alternations, like a converging bandit
    acts = []
    while len(acts) < T:
        a = int(rng.integers(K))
        acts += [a] * int(rng.integers(1, 8)) if rng.random() < 0.5 else [a, int(rng.integers(K))]
    return acts[:T]


CASES = [(T, K, pre, c, seed) for seed, (T, K, pre, c) in enumerate(
    [(60, 2, 0, 1.0), (80, 3, 6, 4.0), (50, 4, 0, 0.3), (90, 3, 30, 2.0), (40, 1, 5, 1.0)])]


@pytest.mark.parametrize("T,K,pre,c,seed", CASES)
def test_per_reward_mu2_equals_round_by_round(T, K, pre, c, seed):
    rng = np.random.default_rng(seed)
    acts = random_play(rng, T, K)
    last = T - int(rng.integers(0, 5))          # also a window ending before the run does
    want = brute(acts, K, pre + 1, last, c)
    led = ledger_of(acts, K, pre + 1, last, c)
    for j in range(K):
        n = led.streams().get((0, j), 0)
        got = led.posterior_read_mu2(0, j, np.arange(n))
        exp = np.array([want[(j, i)] for i in range(n)])
        np.testing.assert_allclose(got, exp, rtol=4e-16 * 8, atol=0)
        # reversed and repeated queries answer the same
        np.testing.assert_array_equal(led.posterior_read_mu2(0, j, np.arange(n)[::-1]), got[::-1])
    # worst reward: the largest μ², ties by the earliest round
    top = max(want.values())
    rounds = {}
    seen = [0] * K
    for t, a in enumerate(acts, start=1):
        rounds[(a, seen[a])] = t
        seen[a] += 1
    best = min((rounds[key], key) for key, v in want.items() if v >= top * (1 - 1e-15))
    w = led.worst_reward()
    assert w.key == pytest.approx(math.sqrt(top), rel=1e-15)
    assert (w.reward.arm, w.reward.index, w.reward.round) == (best[1][0], best[1][1], best[0])
    # per-reward compositions and their multiset
    for (j, i), v in list(want.items())[::7]:
        assert led.composition_of(0, j, i).gdp_mu2() == pytest.approx(v, rel=1e-15)
    got_multiset = sorted(comp.gdp_mu2() for comp, n in led.distinct_compositions()
                          for _ in range(n))
    exp_sorted = sorted(want.values())
    np.testing.assert_allclose(got_multiset, exp_sorted, rtol=1e-14, atol=0)
    # equal values are structurally equal (unread rewards, pre-window rewards), distinct ones
    # differ by far more than rounding: count clusters of the exact values
    clusters = 1 + sum(1 for a, b in pairwise(exp_sorted) if b > a * (1 + 1e-12))
    assert led.n_distinct_compositions() == clusters
    assert led.n_distinct_compositions(limit=1) is None


def test_reads_with_rows_on_the_same_stream():
    """Laplace rows change the composition mid-stream: the pieces split there, and each piece's
    worst reward is its first; the run's worst reward is found across pieces."""
    rng = np.random.default_rng(9)
    T, K, c = 120, 2, 1.0
    acts = random_play(rng, T, K)
    led = ledger_of(acts, K, 1, T, c)
    n0 = led.streams()[(0, 0)]
    lap = LaplaceRelease(scale=1.0, sensitivity=1.0)
    lo, hi = n0 // 2, n0 - 1
    led.add(0, 0, lo, hi, lap, count=500)          # a late range gets a large Laplace charge
    want = brute(acts, K, 1, T, c)
    for i in (0, lo - 1, lo, hi - 1, hi):
        comp = led.composition_of(0, 0, i)
        base = Composition.gaussian_total(want[(0, i)], [(lap, 500)] if lo <= i < hi else [])
        assert comp.gdp_mu2() == pytest.approx(base.gdp_mu2(), rel=1e-14)
    # ranking by μ² (Laplace counted by its sound GDP bound μ = −2Φ⁻¹(1/(1+e^ε)))
    from dpledger.accounting.gdp import mu_of_pure_epsilon
    extra = 500 * mu_of_pure_epsilon(lap.epsilon) ** 2
    rounds, seen = {}, [0] * K
    for t, a in enumerate(acts, start=1):
        rounds[(a, seen[a])] = t
        seen[a] += 1
    keyed = {key: v + (extra if key[0] == 0 and lo <= key[1] < hi else 0.0)
             for key, v in want.items()}
    top = max(keyed.values())
    best = min((rounds[key], key) for key, v in keyed.items() if v >= top * (1 - 1e-15))
    w = led.worst_reward()
    assert (w.reward.arm, w.reward.index) == best[1] == (0, lo)
    pt = led.piece_totals()
    assert pt.varying and {0, lo, hi} <= set(pt.start[pt.arm == 0].tolist())


def test_certificate_case_is_exact_to_the_bit():
    """An arm pulled once at round 1 and never again is read T − 1 times at k = 1: the ledger
    gives (T − 1)·1/(2c) as one term, the certificate's value to the last bit."""
    from dpledger.accounting.posterior_reads import posterior_read_mu2
    from dpledger.policies.registry import make_policy
    T, c = 1000, 3.0
    acts = [0] + [1] * (T - 1)
    led = ledger_of(acts, 2, 1, T, c)
    reads, per = make_policy("mts-gaussian", b=0, c=c).certificate_reads(T, 2)
    mu2 = reads * per
    assert led.posterior_read_mu2(0, 0, [0])[0] == (T - 1) * posterior_read_mu2(1, c) == mu2


def test_json_merge_compact_keep_the_totals():
    rng = np.random.default_rng(3)
    led = RewardLedger()
    for run in (1, 0):
        ledger_of(random_play(rng, 70, 3), 3, 4, 70, 2.0, run=run, led=led)
    before = {(r, a): led.posterior_read_mu2(r, a, np.arange(n)).tolist()
              for (r, a), n in led.streams().items()}
    back = RewardLedger.from_json(led.to_json())
    merged = RewardLedger().merge(led)
    led.compact()
    assert led.posterior_reads["run"].tolist() == [0, 0, 0, 1, 1, 1]
    for other in (back, merged, led):
        for (r, a), n in other.streams().items():
            assert other.posterior_read_mu2(r, a, np.arange(n)).tolist() == before[(r, a)]
        assert other.worst_reward().key == back.worst_reward().key
    # the JSON holds one record per stream, no per-round rows
    js = led.to_json()
    assert len(js["posterior_reads"]["run"]) == 6 and js["gaussian_rows"]["run"] == []
    assert set(zip(js["streams"]["run"], js["streams"]["arm"], strict=True)) == set(led.streams())


@pytest.mark.parametrize("args,msg", [
    ((0, 0, 1, 5, 0.0), "c > 0"), ((0, 0, 1, 5, math.nan), "c > 0"),
    ((0, 0, 0, 5, 1.0), "first_round"), ((0, 0, 4, 3, 1.0), "first_round"),
    ((-1, 0, 1, 5, 1.0), r"run must lie in \[0, 2\^43\)"),
])
def test_bad_records_are_refused(args, msg):
    with pytest.raises(DpledgerError, match=msg):
        RewardLedger().add_posterior_reads(*args)


def test_reads_without_segments_are_an_error_not_a_zero():
    led = RewardLedger()
    led.add_posterior_reads(0, 0, 1, 10, 1.0)
    led.set_stream_length(0, 0, 4)
    with pytest.raises(DpledgerError, match="segments"):
        led.worst_reward()
    with pytest.raises(DpledgerError, match="segments"):
        led.posterior_read_rows()
