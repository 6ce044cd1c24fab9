"""The simulator's segments path (event-driven kernels describe their play as segments) against
its actions path, and the segment helpers against brute-force expansion.

* For every fast policy, on a fixed table and on Bernoulli arms: the same seed simulated from
  segments (the default fast path, no actions materialised) and from the same runs' actions
  (materialised from the segments and handed to the simulator as actions) gives identical
  regret curves, ledger tables and totals, worst rewards, stream lengths and ``round_of``.
* Random segment lists: the canonical table, the index → round map, the pull counts and the
  regret at checkpoints equal those of the expanded action sequence.
"""
from __future__ import annotations

import numpy as np
import pytest

from dpledger.errors import DpledgerError
from dpledger.policies.base import RunOutput, actions_from_segments
from dpledger.policies.environments import bernoulli, table
from dpledger.policies.registry import policy_class
from dpledger.policies.simulator import (_canonical_many, _digest_many, _pulls_at, _segments,
                                         checkpoints, run_generator, simulate)

from policy_helpers import FAST, policy


def _as_actions(pol, every=1):
    """The same policy, but its runs hand the simulator materialised actions (the actions
    path), not segments — every ``every``-th call (others keep segments: a mixed chunk)."""
    class Materialised(type(pol)):
        calls = 0

        def run_one(self, rng, env, T, stop_at=None, capture=False, reference=False):
            out = super().run_one(rng, env, T, stop_at=stop_at, capture=capture)
            assert out.segments is not None and not out.has_actions
            self.calls += 1
            if self.calls % every:
                return out
            return RunOutput(actions=actions_from_segments(out.segments), rows=out.rows,
                             gauss_rows=out.gauss_rows, trees=out.trees,
                             noise_draws=out.noise_draws, captured=out.captured)

    Materialised.name = pol.name + ("" if every == 1 else "-mixed")
    return Materialised(**{k: v for k, v in pol.params.items() if v is not None})


def _envs():
    rng = np.random.default_rng(23)
    T = 30000
    yield "table", table(0.2 + 0.6 * rng.random((T, 3)) ** np.array([0.5, 1.0, 2.0])), T
    yield "bernoulli", bernoulli([0.7, 0.5, 0.45, 0.3]), T


def _same_ledger(a, b):
    for name in ("rows", "segments"):
        ta, tb = getattr(a, name), getattr(b, name)
        for f in ta:
            np.testing.assert_array_equal(ta[f], tb[f], err_msg=f"{name}.{f}")
    assert a.streams() == b.streams()
    assert a.to_json()["streams"] == b.to_json()["streams"]
    pa, pb = a.piece_totals(), b.piece_totals()
    for f in ("run", "arm", "start", "stop", "counts", "mu2_inline"):
        np.testing.assert_array_equal(getattr(pa, f), getattr(pb, f), err_msg=f)
    wa, wb = a.worst_reward(), b.worst_reward()
    assert wa.reward == wb.reward and wa.composition == wb.composition


@pytest.mark.parametrize("name", FAST)
def test_segments_path_equals_actions_path(name):
    for env_name, env, T in _envs():
        for stop_at in (None, 12345):
            seg_pol = policy(name, epsilon=0.5)
            act_pol = _as_actions(seg_pol)
            out = seg_pol.run_one(run_generator(4, 0), env.as_tuple(), T)
            assert out.segments is not None and not out.has_actions     # the fast path
            a = simulate(seg_pol, env, T, seed=4, runs=3, stop_at=stop_at)
            k = simulate(seg_pol, env, T, seed=4, runs=3, stop_at=stop_at, keep_actions=True)
            b = simulate(act_pol, env, T, seed=4, runs=3, stop_at=stop_at, keep_actions=True)
            m = simulate(_as_actions(seg_pol, every=2), env, T, seed=4, runs=3, stop_at=stop_at)
            msg = f"{name} on {env_name}, stop_at={stop_at}"
            for res in (a, k, m):
                np.testing.assert_array_equal(res.regret, b.regret, err_msg=msg)
                assert res.rounds_played == b.rounds_played == [stop_at or T] * 3, msg
                assert res.noise_draws == b.noise_draws, msg
                _same_ledger(res.ledger, b.ledger)
            for x, y in zip(k.actions, b.actions, strict=True):
                np.testing.assert_array_equal(x, y, err_msg=msg)
            rng = np.random.default_rng(1)
            for run in range(3):
                acts = b.actions[run].astype(np.int64)
                for arm in range(env.n_arms):
                    rounds = np.flatnonzero(acts == arm) + 1
                    assert a.ledger.streams().get((run, arm), 0) == rounds.size, msg
                    for idx in rng.integers(0, max(rounds.size, 1), 20).tolist() + [
                            0, rounds.size - 1, rounds.size]:
                        want = int(rounds[idx]) if 0 <= idx < rounds.size else None
                        assert a.ledger.round_of(run, arm, idx) == want, msg
                        assert b.ledger.round_of(run, arm, idx) == want, msg


@pytest.mark.parametrize("name", FAST)
def test_fast_run_one_segments_expand_to_uniform_kernel_actions(name):
    """``run_one``'s segments (fast path) and the uniform kernel's actions (what audits and the
    reference use) describe the same play."""
    env = bernoulli([0.6, 0.5, 0.5]).as_tuple()
    pol = policy(name)
    K, T = 3, 20000
    for i in range(3):
        out = pol.run_one(run_generator(8, i), env, T)
        acts = np.zeros(T, np.int64)
        rows = np.zeros((5, pol.row_capacity(T, K)), np.int64)
        played, n_rows, _ = type(pol).kernel(run_generator(8, i), env, T, K, T,
                                             pol.kernel_params(T, K), acts, rows, np.zeros((2, 0)))
        np.testing.assert_array_equal(out.actions, acts[:played])
        np.testing.assert_array_equal(out.rows, rows[:, :n_rows])
        # maximal: no two segments of one arm continue each other with stride 1
        s = out.segments
        ends = s[1] + s[2] * (s[3] - 1)
        for j in range(s.shape[1]):
            nxt = (s[0] == s[0, j]) & (s[1] == ends[j] + 1) & (s[2] == 1) & (s[2, j] == 1)
            assert not nxt.any()


# ---- random segment lists against brute-force expansion -------------------------------------

def _random_play(rng, K, T):
    """A random action sequence with long stretches and round-robin blocks (both shapes the
    kernels produce), and a random (non-maximal, shuffled) segment list describing it."""
    acts = []
    while len(acts) < T:
        if rng.random() < 0.5:
            acts += [int(rng.integers(K))] * int(rng.integers(1, 40))
        else:
            arms = rng.permutation(K)[:int(rng.integers(2, K + 1))]
            acts += list(arms) * int(rng.integers(1, 15))
    acts = np.array(acts[:T], dtype=np.int64)
    segs = []
    for a in range(K):
        rounds = np.flatnonzero(acts == a) + 1
        i = 0
        while i < rounds.size:
            if i + 1 == rounds.size:
                segs.append((a, rounds[i], 1, 1))
                break
            d = rounds[i + 1] - rounds[i]
            j = i + 1
            while j + 1 < rounds.size and rounds[j + 1] - rounds[j] == d:
                j += 1
            n = int(rng.integers(1, j - i + 2))          # a random prefix of the arithmetic run
            segs.append((a, rounds[i], d if n > 1 else 1, n))
            i += n
    segs = np.array(segs, dtype=np.int64).T
    return acts, segs[:, rng.permutation(segs.shape[1])]


def test_canonical_table_index_map_and_regret_match_expansion():
    rng = np.random.default_rng(2024)
    K = 4
    gaps = np.array([0.0, 0.1, 0.3, 0.7])
    plays = [_random_play(rng, K, int(rng.integers(1, 3000))) for _ in range(60)]
    offs = np.cumsum([0] + [s.shape[1] for _, s in plays]).astype(np.int64)
    tab, toffs, played = _canonical_many(np.concatenate([s for _, s in plays], axis=1), offs, K)
    for r, (acts, segs) in enumerate(plays):
        T = acts.size
        assert played[r] == T
        np.testing.assert_array_equal(actions_from_segments(segs), acts)
        mine = tab[:, toffs[r]:toffs[r + 1]]
        np.testing.assert_array_equal(mine, _segments(acts, K, 1))   # the table as from actions
        for j in range(mine.shape[1]):                                # index → round map
            a, fi, fr, st, ln = mine[:, j]
            rounds = np.flatnonzero(acts == a) + 1
            np.testing.assert_array_equal(fr + st * np.arange(ln), rounds[fi:fi + ln])
        assert sorted(np.bincount(mine[0], weights=mine[4], minlength=K).tolist()) == \
            sorted(np.bincount(acts, minlength=K).tolist())
        pts = np.unique(np.concatenate([rng.integers(1, T + 5, 30), [T], checkpoints(T)[:50]]))
        brute = np.stack([np.cumsum(acts == a)[np.minimum(pts, T) - 1] for a in range(K)])
        np.testing.assert_array_equal(_pulls_at(mine, K, pts), brute)
        regret, lengths = _digest_many(mine.copy(), np.array([0, mine.shape[1]]), K, gaps, pts)
        np.testing.assert_allclose(regret[0], gaps @ brute, rtol=1e-13, atol=1e-12)
        np.testing.assert_array_equal(lengths[0], brute[:, -1])


def test_bad_segments_are_refused():
    good = np.array([[0, 1], [1, 2], [1, 1], [1, 3]])            # arm 0 at 1, arm 1 at 2–4
    assert actions_from_segments(good).tolist() == [0, 1, 1, 1]

    class Bad(policy_class("adap-ucb")):
        def run_one(self, rng, env, T, stop_at=None, capture=False, reference=False):
            return RunOutput(segments=self.segs, rows=np.zeros((5, 0), np.int64))

    env = bernoulli([0.5, 0.4])
    for segs in (np.array([[0, 1], [1, 3], [1, 1], [1, 2]]),      # round 2 missing
                 np.array([[0, 0], [1, 2], [2, 1], [2, 1]]),      # one arm's segments interleave
                 np.array([[0, 2], [1, 2], [1, 1], [1, 3]])):     # arm out of range
        bad = Bad()
        bad.segs = segs
        with pytest.raises(DpledgerError, match="bad segments"):
            simulate(bad, env, 4, runs=1)
    with pytest.raises(DpledgerError):
        RunOutput(rows=np.zeros((5, 0), np.int64))
