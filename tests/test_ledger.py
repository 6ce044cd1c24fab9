"""The columnar RewardLedger against a brute-force per-reward sum (hypothesis).

The brute force walks every operation and every reward it touches, one reward at a time:
plain rows add ``count`` releases to each reward of [start, stop); a binary-mechanism record
adds one release per *completed dyadic node* containing the reward (node j of level ℓ covers
tree items (j−1)·2^ℓ+1 … j·2^ℓ and is released iff j·2^ℓ ≤ n_items); Gaussian prefix rows add
count·μ² to each reward of [start, stop).
"""
from __future__ import annotations

import json
import math
from fractions import Fraction
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpledger.accounting.composition import Composition
from dpledger.accounting.ledger import RewardLedger, RowBuffer
from dpledger.errors import DpledgerError
from dpledger.accounting.releases import (DiscreteLaplaceRelease, GaussianRelease,
                                          LaplaceRelease, PureEpsilonRelease)

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

PURE_POOL = [LaplaceRelease.from_epsilon(0.5), LaplaceRelease.from_epsilon(0.25),
             PureEpsilonRelease(1.0), DiscreteLaplaceRelease(scale=4.0, sensitivity=1)]
GAUSS_REL = GaussianRelease.from_mu(0.3)
MU2S = [1e-3, 0.01, 0.1, 0.37, 2.0]

run_ = st.integers(0, 2)
arm_ = st.integers(0, 2)


def ops_strategy(gaussian: bool):
    rel = st.integers(0, len(PURE_POOL) - (0 if gaussian else 1))   # index len(PURE_POOL) = Gaussian
    row = st.tuples(st.just("row"), run_, arm_, st.integers(0, 30), st.integers(1, 40), rel,
                    st.integers(1, 3))
    tree = st.tuples(st.just("tree"), run_, arm_, st.integers(0, 10), st.integers(1, 5),
                     st.floats(0, 1), rel)
    stream = st.tuples(st.just("stream"), run_, arm_, st.integers(0, 300))
    kinds = [row, row, tree, stream]
    if gaussian:
        gauss = st.tuples(st.just("gauss"), run_, arm_, st.integers(0, 20), st.integers(1, 30),
                          st.integers(1, 3), st.sampled_from(MU2S))
        kinds += [gauss, gauss]
    return st.lists(st.one_of(*kinds), min_size=1, max_size=10)


ledger_ops = st.booleans().flatmap(ops_strategy)


def _release(i):
    return GAUSS_REL if i == len(PURE_POOL) else PURE_POOL[i]


def normalise(ops):
    """Concrete ops: ('row', run, arm, start, stop, rel, count), ('tree', run, arm, offset,
    n_items, levels, rel), ('gauss', run, arm, start, stop, count, mu2), ('stream', run, arm, n)."""
    out = []
    for op in ops:
        if op[0] == "row":
            _, r, a, s, ln, i, c = op
            out.append(("row", r, a, s, s + ln, i, c))
        elif op[0] == "tree":
            _, r, a, off, lv, frac, i = op
            out.append(("tree", r, a, off, int(frac * (2 ** lv - 1)), lv, i))
        elif op[0] == "gauss":
            _, r, a, s, ln, c, m = op
            out.append(("gauss", r, a, s, s + ln, c, m))
        else:
            out.append(op)
    return out


def build(ops, bulk=None):
    led = RewardLedger()
    for op in ops:
        if op[0] == "row":
            led.add(op[1], op[2], op[3], op[4], _release(op[5]), op[6])
        elif op[0] == "tree":
            led.add_tree(op[1], op[2], op[3], op[4], op[5], _release(op[6]))
        elif op[0] == "gauss":
            led.add_growing_prefix(op[1], op[2], [op[4]], [op[5]], [op[6]], starts=[op[3]])
        else:
            led.set_stream_length(op[1], op[2], op[3])
    return led


def brute(ops):
    """{(run, arm, index): Composition} for every reward of every stream, and stream lengths."""
    counts: dict = {}
    mu2: dict = {}
    lengths: dict = {}

    def touch(key, n):
        lengths[key] = max(lengths.get(key, 0), n)

    for op in ops:
        if op[0] == "row":
            _, r, a, s, e, i, c = op
            touch((r, a), e)
            for idx in range(s, e):
                counts.setdefault((r, a, idx), Counter())[_release(i)] += c
        elif op[0] == "tree":
            _, r, a, off, n, lv, i = op
            touch((r, a), off + n)
            for level in range(lv):
                w = 1 << level
                for j in range(1, n // w + 1):                      # completed nodes only
                    for item in range((j - 1) * w + 1, j * w + 1):
                        counts.setdefault((r, a, off + item - 1), Counter())[_release(i)] += 1
        elif op[0] == "gauss":
            _, r, a, s, e, c, m = op
            touch((r, a), e)
            for idx in range(s, e):
                mu2.setdefault((r, a, idx), []).append(Fraction(c) * Fraction(m))
        else:
            touch((op[1], op[2]), op[3])
    comps = {}
    for (r, a), n in lengths.items():
        for idx in range(n):
            key = (r, a, idx)
            pairs = [(rel, c) for rel, c in counts.get(key, Counter()).items()]
            # Σ count·μ² exact, rounded up to a float (R6: the ledger certifies an upper bound)
            comps[key] = Composition.gaussian_total(_float_up(sum(mu2.get(key, []), Fraction(0))),
                                                    pairs)
    return comps, lengths, {k: float(sum(v)) for k, v in mu2.items()}, counts


def _float_up(q: Fraction) -> float:
    f = float(q)
    return math.nextafter(f, math.inf) if Fraction(f) < q else f


def piece_rewards(led):
    """Per-reward (counts by release, inline μ²) read off piece_totals()."""
    pt = led.piece_totals()
    out = {}
    streams = led.streams()
    covered = Counter()
    for p in range(pt.start.size):
        r, a = int(pt.run[p]), int(pt.arm[p])
        cnt = Counter({led.releases[i]: int(c) for i, c in enumerate(pt.counts[:, p]) if c})
        for idx in range(int(pt.start[p]), int(pt.stop[p])):
            out[(r, a, idx)] = (cnt, float(pt.mu2_inline[p]))
        covered[(r, a)] += int(pt.stop[p] - pt.start[p])
    assert dict(covered) == {k: v for k, v in streams.items() if v}   # pieces tile every stream
    return out


def assert_totals_equal(led, ops):
    comps, lengths, mu2, counts = brute(ops)
    assert led.streams() == {k: v for k, v in sorted(lengths.items())}
    got = piece_rewards(led)
    assert set(got) == set(comps)
    for key, (cnt, m) in got.items():
        assert cnt == +counts.get(key, Counter()), key
        assert m == pytest.approx(mu2.get(key, 0.0), rel=1e-9, abs=1e-15), key
    return comps


# -- per-reward totals ----------------------------------------------------------------------------
@SETTINGS
@given(ledger_ops)
def test_piece_totals_equal_brute_force(ops):
    ops = normalise(ops)
    assert_totals_equal(build(ops), ops)


@SETTINGS
@given(ledger_ops, st.data())
def test_composition_of_and_distinct_compositions(ops, data):
    ops = normalise(ops)
    led = build(ops)
    comps, _, _, _ = brute(ops)
    if comps:
        keys = sorted(comps)
        for key in data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=5)):
            assert led.composition_of(*key) == comps[key], key
    assert dict(led.distinct_compositions()) == dict(Counter(comps.values()))


@SETTINGS
@given(ledger_ops)
def test_worst_reward_is_brute_force_argmax(ops):
    ops = normalise(ops)
    led = build(ops)
    comps, _, _, _ = brute(ops)
    w = led.worst_reward(deltas=(1e-6,))
    if not comps:
        assert w is None
        return
    gaussian = any(isinstance(r, GaussianRelease) for r in led.releases) or any(
        op[0] == "gauss" for op in ops)
    key = (lambda c: math.sqrt(c.gdp_mu2())) if gaussian else (lambda c: c.pure_epsilon())
    top = max(key(c) for c in comps.values())
    assert w.currency == ("gdp" if gaussian else "pure")
    assert w.key == pytest.approx(top, rel=1e-12, abs=0)
    ref = (w.reward.run, w.reward.arm, w.reward.index)
    assert w.composition == comps[ref]
    assert key(comps[ref]) == pytest.approx(top, rel=1e-12)
    # no reward with the same composition comes earlier (run, round = index here, arm)
    same = [k for k, c in comps.items() if c == w.composition]
    assert min(same, key=lambda k: (k[0], k[2], k[1])) == ref


# -- maintenance never changes a total -----------------------------------------------------------
@SETTINGS
@given(ledger_ops)
def test_compact_preserves_totals(ops):
    ops = normalise(ops)
    led = build(ops)
    n_before = led.n_rows()
    led.compact()
    assert led.n_rows() <= n_before
    comps = assert_totals_equal(led, ops)
    assert dict(led.distinct_compositions()) == dict(Counter(comps.values()))
    led.compact()                                               # idempotent on totals
    assert_totals_equal(led, ops)


@SETTINGS
@given(ledger_ops, ledger_ops)
def test_merge_adds_totals(ops_a, ops_b):
    ops_a, ops_b = normalise(ops_a), normalise(ops_b)
    a, b = build(ops_a), build(ops_b)
    merged = a.merge(b)
    assert_totals_equal(merged, ops_a + ops_b)
    assert_totals_equal(a, ops_a)                                # inputs untouched
    assert_totals_equal(b, ops_b)


@SETTINGS
@given(ledger_ops)
def test_json_round_trip_preserves_totals(ops):
    ops = normalise(ops)
    led = build(ops)
    text = json.dumps(led.to_json(), allow_nan=False)
    back = RewardLedger.from_json(json.loads(text))
    comps = assert_totals_equal(back, ops)
    assert dict(back.distinct_compositions()) == dict(Counter(comps.values()))
    assert json.dumps(back.to_json()) == text


@SETTINGS
@given(ledger_ops)
def test_bulk_append_equals_row_by_row(ops):
    ops = [op for op in normalise(ops) if op[0] == "row"]
    if not ops:
        return
    ids_led = RewardLedger()
    ids = [ids_led.intern(_release(i)) for i in range(len(PURE_POOL) + 1)]
    cols = np.array([[op[1], op[2], op[3], op[4], ids[op[5]], op[6]] for op in ops], dtype=np.int64)
    # append_rows with arrays
    ids_led.append_rows(*cols.T)
    assert_totals_equal(ids_led, ops)
    # RowBuffer + extend, in two batches through one oversized buffer
    led = RewardLedger()
    for i in range(len(PURE_POOL) + 1):
        led.intern(_release(i))
    buf = RowBuffer(len(ops) + 5)
    half = len(ops) // 2
    for lo, hi in ((0, half), (half, len(ops))):
        for j, row in enumerate(cols[lo:hi]):
            buf.run[j], buf.arm[j], buf.start[j], buf.stop[j], buf.release_id[j], buf.count[j] = row
        led.extend(buf, hi - lo)
    assert_totals_equal(led, ops)
    # scalar broadcast: one release over many ranges
    led2 = RewardLedger()
    rid = led2.intern(PURE_POOL[0])
    led2.append_rows(0, 1, cols[:, 2], cols[:, 3], rid, 2)
    assert_totals_equal(led2, [("row", 0, 1, int(s), int(e), 0, 2) for s, e in cols[:, 2:4]])


# -- deterministic cases ------------------------------------------------------------------------
def test_tree_record_counts_per_level():
    # 5 items, 3 levels: level 0 nodes 1..5, level 1 nodes {1,2},{3,4}, level 2 node {1..4}
    led = RewardLedger()
    led.add_tree(0, 0, 2, 5, 3, LaplaceRelease.from_epsilon(0.1))
    expected = [0, 0, 3, 3, 3, 3, 1]                          # offsets 0, 1 are outside the tree
    for idx, n in enumerate(expected):
        comp = led.composition_of(0, 0, idx)
        assert comp.total_count == n, idx


def test_worst_reward_tie_breaks():
    lap1, lap_half = LaplaceRelease.from_epsilon(1.0), LaplaceRelease.from_epsilon(0.5)
    # equal compositions: the earliest round wins, whatever the arm
    led = RewardLedger()
    led.add(0, 0, 0, 1, lap1)
    led.add(0, 1, 0, 1, lap1)
    led.add_actions(0, np.array([1, 0, 1, 0]))                # arm 1 index 0 is round 1
    w = led.worst_reward()
    assert (w.reward.arm, w.reward.round) == (1, 1)
    # equal pure ε, different curves: one Laplace(1) is worse at δ = 1e-3 than two Laplace(0.5),
    # so it wins although it comes later
    led = RewardLedger()
    led.add(0, 0, 0, 1, lap_half, 2)
    led.add(1, 0, 0, 1, lap1)
    w = led.worst_reward(deltas=(1e-3,))
    assert w.reward.run == 1 and w.key == pytest.approx(1.0)
    assert RewardLedger().worst_reward() is None


def test_growing_prefix_matches_explicit_gaussians():
    # a growing prefix read every round: release j reads [0, j+1) with μ_j² = 0.01·(j+1)
    n = 50
    stops = np.arange(1, n + 1)
    mu2 = 0.01 * stops
    led = RewardLedger()
    led.add_growing_prefix(0, 0, stops, np.ones(n, dtype=np.int64), mu2)
    for idx in (0, 7, 49):
        exact = math.fsum(mu2[idx:].tolist())
        comp = led.composition_of(0, 0, idx)
        assert comp.gdp_mu2() == pytest.approx(exact, rel=1e-14)
    w = led.worst_reward()
    assert w.reward.index == 0 and w.key == pytest.approx(math.sqrt(math.fsum(mu2.tolist())), rel=1e-14)


def test_dp_event_export_of_worst_reward():
    led = RewardLedger()
    led.add(0, 0, 0, 10, LaplaceRelease.from_epsilon(0.5), 3)
    led.add(0, 0, 5, 6, LaplaceRelease.from_epsilon(0.25), 2)
    event = led.to_dp_event()
    assert Composition.from_dp_event(event) == led.composition_of(0, 0, 5)
    one = RewardLedger.from_dp_event(event)
    assert one.composition_of(0, 0, 0) == led.composition_of(0, 0, 5)
    assert one.streams() == {(0, 0): 1}


def test_distinct_compositions_merges_equivalent_releases():
    # regression: Laplace(2, sens 1) and Laplace(4, sens 2) have identical privacy and used to be
    # reported as two distinct compositions
    led = RewardLedger()
    led.add(0, 0, 0, 1, LaplaceRelease(scale=2.0, sensitivity=1.0))
    led.add(0, 0, 1, 2, LaplaceRelease(scale=4.0, sensitivity=2.0))
    assert len(led.distinct_compositions()) == 1


def test_streamed_ledger_json_equals_the_plain_dump(tmp_path):
    """The CLI streams bulk ledgers column by column; the text parses to exactly what the plain
    dump gives (small chunks force chunk joins), and a non-finite value leaves no file."""
    import io
    from dpledger.accounting import schema
    led = RewardLedger()
    rel = LaplaceRelease(scale=2.0, sensitivity=1.0)
    led.add(0, 1, 0, 3, rel)
    led.add(1, 0, 2, 5, rel)
    led.add_growing_prefix(0, 0, np.arange(1, 8), np.arange(1, 8), 1.0 / 3.0 / np.arange(2, 9))
    buf = io.StringIO()
    schema._stream(buf, led.to_json(arrays=True), chunk=3)
    assert json.loads(buf.getvalue()) == json.loads(json.dumps(led.to_json()))
    path = tmp_path / "l.json"
    schema.write_json_stream_atomic(path, led.to_json(arrays=True))
    assert RewardLedger.from_json(json.loads(path.read_text())).to_json() == led.to_json()
    with pytest.raises(DpledgerError):
        schema.write_json_stream_atomic(tmp_path / "bad.json", {"x": np.array([1.0, np.nan])})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.json"]


def test_large_ledgers_take_the_compiled_passes_with_the_same_results():
    """Above 1e5 rows, stream lengths and dense per-reward μ² come from compiled passes
    (accounting/piece_kernels.py); they equal a direct computation."""
    rng = np.random.default_rng(0)
    n = 150_000
    arm = rng.integers(0, 3, n)
    stop = rng.integers(1, 400, n)
    start = (stop * rng.random(n)).astype(np.int64)
    count = rng.integers(1, 4, n)
    mu2 = rng.random(n)
    led = RewardLedger()
    led.add_growing_prefix(0, arm, stop, count, mu2, starts=start)
    led.set_stream_lengths([0, 0, 0], [0, 1, 2], [1, 1, 1])
    assert led.streams() == {(0, a): int(stop[arm == a].max()) for a in range(3)}
    pt = led.piece_totals()
    for a in range(3):
        m = arm == a
        n_a = int(stop[m].max())
        diff = np.zeros(n_a + 1)
        np.add.at(diff, start[m], count[m] * mu2[m])
        np.add.at(diff, stop[m], -(count[m] * mu2[m]))
        expect = np.maximum(np.cumsum(diff)[:n_a], 0)
        sel = pt.arm == a
        assert np.array_equal(pt.start[sel], np.arange(n_a))
        assert np.allclose(pt.mu2_inline[sel], expect, rtol=1e-12, atol=1e-9)


def test_dense_piece_coordinates_keep_large_run_indices():
    from dpledger.accounting.piece_kernels import dense_piece_coordinates
    big = 2 ** 31 + 5
    keys = np.array([3 * (1 << 20) + 1, big * (1 << 20) + 2], dtype=np.int64)
    offsets = np.array([0, 2, 5], dtype=np.int64)
    run, arm, start, stop = dense_piece_coordinates(keys, offsets)
    assert run.tolist() == [3, 3, big, big, big] and arm.tolist() == [1, 1, 2, 2, 2]
    assert start.tolist() == [0, 1, 0, 1, 2] and stop.tolist() == [1, 2, 1, 2, 3]


def test_stream_key_range_refused_everywhere():
    """A stream is keyed run·2^20 + arm in one int64: an arm ≥ 2^20 (or < 0) or a run ≥ 2^43
    would collide with another stream and sum its releases in.  Every way into the ledger
    refuses it with a clear error, and the largest legal values are kept apart."""
    from dpledger.accounting import store
    from dpledger.accounting.ledger import ARM_LIMIT, RUN_LIMIT, RewardLedger
    from dpledger.accounting.releases import LaplaceRelease
    from dpledger.errors import DpledgerError
    assert store._MAX_ARM == ARM_LIMIT
    lap = LaplaceRelease(scale=1.0, sensitivity=1.0)
    for run, arm in ((0, ARM_LIMIT), (0, -1), (RUN_LIMIT, 0), (-1, 0)):
        calls = [lambda led, run=run, arm=arm: led.add(run, arm, 0, 1, lap),
                 lambda led, run=run, arm=arm: led.add_growing_prefix(run, arm, 2, 1, 0.5),
                 lambda led, run=run, arm=arm: led.add_tree(run, arm, 0, 3, 2, lap),
                 lambda led, run=run, arm=arm: led.add_posterior_reads(run, arm, 1, 5, 1.0),
                 lambda led, run=run, arm=arm: led.add_segments(run, arm, 0, 1, 1, 3),
                 lambda led, run=run, arm=arm: led.set_stream_length(run, arm, 3),
                 lambda led, run=run, arm=arm: led.set_stream_lengths([run], [arm], [3])]
        for call in calls:
            with pytest.raises(DpledgerError, match="must lie in"):
                call(RewardLedger())
    # the corners that are legal stay distinct streams
    led = RewardLedger()
    led.add(0, ARM_LIMIT - 1, 0, 1, lap)
    led.add(1, 0, 0, 1, lap, count=2)
    led.set_stream_lengths([0, 1], [ARM_LIMIT - 1, 0], [1, 1])
    worst = led.worst_reward()
    assert worst.key == pytest.approx(2.0)                     # run 1's two releases, not 3
    assert (worst.reward.run, worst.reward.arm) == (1, 0)
