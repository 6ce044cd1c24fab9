"""The batched audit trial loop (issue 14 §6, P6): the compiled chunk loops, their thread
parallelism and the segment route of event-driven policies give exactly the trials of the
per-trial path — the same Generator streams, so the same scores bit for bit and the same
audit.json — whatever the worker count or batching.

The per-trial references here are independent of the batched code: the policy's own
``run_one`` (one Python call per trial, the same chunk Generator), the features counted with
numpy from the action array, the likelihood-ratio scores recomputed with scipy's densities.
"""
from __future__ import annotations


import numpy as np
import pytest
from scipy.stats import laplace, norm

from dpledger.accounting.schema import dumps
from dpledger.audits.pairs import default_pair
from dpledger.audits.policy import (CHUNK, _features, _segment_features, audit_policy,
                                    chunk_generator, run_trials, windows)
from dpledger.policies.base import actions_from_segments
from dpledger.policies.registry import make_policy, policy_class

SEGMENT_POLICIES = ["adap-ucb", "adap-klucb", "dp-se", "anytime-lazy-ucb", "dp-klucb", "dp-imed"]


def _reference_features(actions: np.ndarray, edges: np.ndarray, arm: int, t_star: int,
                        stop: int, K: int) -> tuple[np.ndarray, int]:
    """Per-window pulls of every arm after t* (arms relabelled (a − a*) mod K when arm = −1)
    and the first round > t* that plays ``arm`` — plain numpy on the whole action array."""
    rounds = np.arange(1, actions.size + 1)
    shift = 0
    if arm < 0:
        shift = int(actions[t_star - 1])
        arm = shift
    counts = np.zeros((edges.size - 1, K), np.int64)
    for w in range(edges.size - 1):
        sel = (rounds > edges[w]) & (rounds <= edges[w + 1])
        counts[w] = np.bincount((actions[sel] - shift) % K, minlength=K)
    hit = rounds[(rounds > t_star) & (actions == arm)]
    return counts, int(hit[0]) if hit.size else stop + 1


def _per_trial(policy, env, T, n, seed, side, stop, capture, arm, t_star):
    """The trials of chunk 0 one ``run_one`` call at a time (the per-trial Python path)."""
    K = env.n_arms
    edges = windows(t_star, stop)
    rng = chunk_generator(seed, side, 0)
    feats, nxt, rel = [], [], []
    for _ in range(n):
        out = policy.run_one(rng, env.as_tuple(), T, stop_at=stop, capture=capture)
        c, x = _reference_features(np.asarray(out.actions), edges, arm, t_star, stop, K)
        feats.append(c)
        nxt.append(x)
        rel.append(out.captured["released"][0] if capture else np.nan)
    return np.array(feats), np.array(nxt), np.array(rel)


@pytest.mark.parametrize("name,T", [("lazy-dp-ts", 400), ("dp-ts", 300), ("dp-ucb", 200)]
                         + [(n, 600) for n in SEGMENT_POLICIES])
def test_batched_blackbox_features_equal_per_trial_path(name, T):
    """Black-box: the compiled batch (action kernel, or segment kernel for event-driven
    policies, where the features are read off the segments) gives every trial's per-window
    counts and next-pull round exactly as the per-trial run_one path, on both sides."""
    p = make_policy(name)
    pair = default_pair(p, T, 2)
    stop = int(pair.stop_hint or T)
    arm = pair.arm if pair.arm is not None else 0
    for side, env in enumerate(pair.envs()):
        f = run_trials(p, env, T, 40, seed=11, side=side, stop=stop, capture=False, arm=arm,
                       t_star=pair.round)
        c, nxt, _ = _per_trial(p, env, T, 40, 11, side, stop, False, arm, pair.round)
        np.testing.assert_array_equal(f["counts"], c)
        np.testing.assert_array_equal(f["next"], nxt)


@pytest.mark.parametrize("name", SEGMENT_POLICIES)
def test_segment_features_equal_action_features(name):
    """_segment_features on a run's segments equals _features on the same run's actions, for
    every t* (relabelled arm −1 and a fixed arm) and stops before and at the rounds played."""
    p = make_policy(name)
    T, K = 700, 3
    env = default_pair(p, T, K).envs()[0]
    rng = np.random.default_rng(5)
    for trial in range(6):
        out = p.run_one(rng, env.as_tuple(), T)
        segs = np.ascontiguousarray(out.segments, dtype=np.int64)
        acts = actions_from_segments(segs)
        played = acts.size
        for t_star in (1, 2, 17, 255, played - 1):
            for stop in (t_star, min(played, t_star + 40), played):
                edges = windows(t_star, stop)
                for arm in (-1, 0, K - 1):
                    c1 = np.zeros((1, edges.size - 1, K), np.int32)
                    c2 = np.zeros((1, edges.size - 1, K), np.int32)
                    n1 = _features(acts, stop, edges, arm, t_star, stop, c1, 0)
                    n2 = _segment_features(segs, segs.shape[1], stop, edges, arm, t_star, stop,
                                           c2, 0)
                    assert n1 == n2, (trial, t_star, stop, arm)
                    np.testing.assert_array_equal(c1, c2)


@pytest.mark.parametrize("name", ["adap-ucb", "dp-ts-ucb", "lazy-dp-ts"])
def test_batched_whitebox_single_capture_equals_per_trial_path(name):
    p = make_policy(name)
    T = 300
    pair = default_pair(p, T, 2, whitebox=True)
    arm = pair.arm if pair.arm is not None else 0
    stop = T
    for side, env in enumerate(pair.envs()):
        f = run_trials(p, env, T, 30, seed=2, side=side, stop=stop, capture=True, arm=arm,
                       t_star=pair.round)
        _, _, rel = _per_trial(p, env, T, 30, 2, side, stop, True, arm, pair.round)
        np.testing.assert_array_equal(f["released"], rel)
        assert f["counts"].shape[1] == 0      # white-box: no black-box features computed


def _laplace_llr_reference(acts, cap, t_star, delta, side):
    """Sum over the captured releases containing the witness of log p_D′(y)/p_D(y), with
    scipy's Laplace density (clean sum under D: captured on side 0, captured − Δ on side 1)."""
    a = acts[t_star - 1]
    w = int(np.sum(acts[:t_star - 1] == a))
    s = 0.0
    for c in range(1, int(cap[5, 0]) + 1):
        if int(cap[3, c]) == a and cap[4, c] <= w < cap[5, c]:
            y, b = cap[0, c], cap[2, c]
            cd = cap[1, c] - side * delta
            s += laplace.logpdf(y, cd + delta, b) - laplace.logpdf(y, cd, b)
    return s


def _gauss_llr_reference(acts, cap, K, t_star, delta, c_prior, side):
    a = acts[t_star - 1]
    s = 0.0
    for t in range(t_star + 1, acts.size + 1):
        col = (t - 1) * K + a
        y, m, sig = cap[0, col], cap[1, col], cap[2, col]
        d = delta * sig * sig / c_prior
        m_d = m - side * d
        s += norm.logpdf(y, m_d + d, sig) - norm.logpdf(y, m_d, sig)
    return s


@pytest.mark.parametrize("name", ["dp-ucb", "dp-ts", "ts-gaussian"])
def test_batched_whitebox_lr_scores_equal_per_trial_recomputation(name):
    """White-box likelihood-ratio scores of the batch = the kernel run one trial at a time from
    Python (same chunk Generator, a fresh full capture per trial) scored with scipy's
    densities, on both sides."""
    p = make_policy(name)
    T, n = 120, 25
    pair = default_pair(p, T, 2, whitebox=True)
    lr = {"dp-ucb": "laplace-releases", "dp-ts": "laplace-releases",
          "ts-gaussian": "gaussian-posterior"}[name]
    arm = pair.arm if pair.arm is not None else 0
    K, t_star = 2, pair.round
    for side, env in enumerate(pair.envs()):
        f = run_trials(p, env, T, n, seed=7, side=side, stop=T, capture=True, arm=arm,
                       t_star=t_star, lr=lr, delta=1.0)
        rng = chunk_generator(7, side, 0)
        want = []
        for _ in range(n):
            actions = np.zeros(T, np.int64)
            rows = np.zeros((5, max(p.row_capacity(T, K), 1)), np.int64)
            cap = (np.zeros((6, 2 * T + 2 * K + 8)) if lr == "laplace-releases"
                   else np.full((3, T * K), np.nan))
            played, _, _ = type(p).kernel(rng, env.as_tuple(), T, K, T, p.kernel_params(T, K),
                                          actions, rows, cap)
            acts = actions[:played]
            want.append(_laplace_llr_reference(acts, cap, t_star, 1.0, side)
                        if lr == "laplace-releases"
                        else _gauss_llr_reference(acts, cap, K, t_star, 1.0, float(p.c), side))
        np.testing.assert_allclose(f["released"], want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name,mode,T", [("lazy-dp-ts", "blackbox", 300),
                                         ("adap-klucb", "blackbox", 500),
                                         ("dp-ucb", "whitebox", 100),
                                         ("ts-gaussian", "whitebox", 40)])
def test_threads_give_the_same_trials_as_one_worker(name, mode, T):
    """workers = 3 (compiled chunks in threads) and workers = 1 give the same audit.json bytes,
    and a run started mid-way (a sequential audit's later batch) the same trials."""
    p = make_policy(name)
    n = 2 * CHUNK + 300
    a = audit_policy(p, trials=n, mode=mode, T=T, seed=5, workers=1)
    b = audit_policy(p, trials=n, mode=mode, T=T, seed=5, workers=3)
    assert dumps(a.to_json()) == dumps(b.to_json())
    pair = default_pair(p, T, 2, whitebox=mode == "whitebox")
    env = pair.envs()[1]
    kw = dict(seed=5, side=1, stop=T, capture=mode == "whitebox",
              arm=pair.arm if pair.arm is not None else 0, t_star=pair.round,
              lr={"dp-ucb": "laplace-releases", "ts-gaussian": "gaussian-posterior"}.get(name)
              if mode == "whitebox" else None)
    whole = run_trials(p, env, T, n, workers=1, **kw)
    tail = run_trials(p, env, T, n - CHUNK - 100, workers=2, start=CHUNK + 100, **kw)
    for k in whole:
        np.testing.assert_array_equal(whole[k][CHUNK + 100:], tail[k])


class _PerTrialLazyDPTS(policy_class("lazy-dp-ts")):
    """Lazy-DP-TS with its own ``run_one`` (the same kernel): the audit runner then takes its
    generic per-trial Python path instead of the compiled batch."""

    def run_one(self, rng, env, T, stop_at=None, capture=False, reference=False, sink=None):
        return super().run_one(rng, env, T, stop_at=stop_at, capture=capture)


class _PerTrialAdaPUCB(policy_class("adap-ucb")):
    def run_one(self, rng, env, T, stop_at=None, capture=False, reference=False, sink=None):
        return super().run_one(rng, env, T, stop_at=stop_at, capture=capture)


@pytest.mark.parametrize("cls,mode", [(_PerTrialLazyDPTS, "blackbox"),
                                      (_PerTrialAdaPUCB, "blackbox"),
                                      (_PerTrialAdaPUCB, "whitebox")])
def test_audit_result_equals_per_trial_path(cls, mode):
    """The whole audit (fixed-n): the batched runner's audit.json equals, byte for byte, the
    one the per-trial Python path gives for the same seed (same streams, same scores)."""
    T = 400
    slow = cls()
    fast = make_policy(cls.name)
    a = audit_policy(slow, trials=700, mode=mode, T=T, seed=3)
    b = audit_policy(fast, trials=700, mode=mode, T=T, seed=3, workers=2)
    assert dumps(a.to_json()) == dumps(b.to_json())
