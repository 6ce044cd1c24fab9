"""The simulator (SPEC §5): many independent runs of one policy on one environment.

Seeding: one master seed; run ``i`` owns the Generator ``PCG64(SeedSequence(seed,
spawn_key=(i,)))``, so any split of ``run_indices`` across workers gives the same runs, and
aggregates reduce in run-index order (R4).  Each run's ledger rows are tagged with its run
index; the index → round map is derived from the action sequence.

Pseudo-regret at round t is Σ_{s ≤ t} (μ* − μ_{J_s}) with the environment's true means (column
means for a fixed table), reported on about 200 log-spaced rounds including T.
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from numba import njit

from dpledger.accounting.ledger import RewardLedger
from dpledger.errors import DpledgerError
from dpledger.policies.base import Policy, RunOutput, validate_horizon
from dpledger.policies.environments import Environment


def run_generator(seed: int, run_index: int) -> np.random.Generator:
    """The Generator of run ``run_index`` under master ``seed``."""
    return np.random.Generator(np.random.PCG64(
        np.random.SeedSequence(entropy=int(seed), spawn_key=(int(run_index),))))


def checkpoints(T: int, n: int = 200) -> np.ndarray:
    """About ``n`` distinct log-spaced rounds in [1, T], T included (all rounds when T ≤ n)."""
    def pts(m: int) -> np.ndarray:
        return np.unique(np.concatenate([np.round(np.geomspace(1, T, m)).astype(np.int64), [T]]))

    if T <= n:
        return np.arange(1, T + 1, dtype=np.int64)
    lo, hi = n, 64 * n          # the distinct count grows with m: bisect for ≈ n points
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pts(mid).size > n:
            hi = mid
        else:
            lo = mid
    return pts(lo)


@njit(cache=True)
def _regret_at(actions, gaps, points):
    out = np.zeros(points.size)
    total = 0.0
    j = 0
    for t in range(actions.size):
        total += gaps[actions[t]]
        while j < points.size and points[j] == t + 1:
            out[j] = total
            j += 1
    while j < points.size:      # a run stopped early keeps its last value
        out[j] = total
        j += 1
    return out


@njit(cache=True)
def _segments(actions, K, first_round):
    """Per-arm arithmetic runs of the rounds each arm was played: two passes (count, fill)."""
    out = np.zeros((6, 1), dtype=np.int64)
    for fill in range(2):
        first_idx = np.zeros(K, np.int64)
        first_rnd = np.zeros(K, np.int64)
        stride = np.zeros(K, np.int64)
        length = np.zeros(K, np.int64)
        count = np.zeros(K, np.int64)
        n = 0
        for i in range(actions.size):
            a = actions[i]
            t = first_round + i
            if length[a] == 0:
                first_idx[a], first_rnd[a], stride[a], length[a] = count[a], t, 1, 1
            elif length[a] == 1:
                stride[a] = t - first_rnd[a]
                length[a] = 2
            elif t == first_rnd[a] + stride[a] * length[a]:
                length[a] += 1
            else:
                if fill == 1:
                    out[0, n], out[1, n], out[2, n] = a, first_idx[a], first_rnd[a]
                    out[3, n], out[4, n] = stride[a], length[a]
                n += 1
                first_idx[a], first_rnd[a], stride[a], length[a] = count[a], t, 1, 1
            count[a] += 1
        for a in range(K):
            if length[a] > 0:
                if fill == 1:
                    out[0, n], out[1, n], out[2, n] = a, first_idx[a], first_rnd[a]
                    out[3, n], out[4, n] = stride[a], length[a]
                n += 1
        if fill == 0:
            out = np.zeros((6, n), dtype=np.int64)
    return out


@dataclass
class SimulationResult:
    policy: Policy
    env: Environment
    horizon: int
    seed: int
    run_indices: list[int]
    points: np.ndarray
    regret: np.ndarray                 # (runs, points)
    ledger: RewardLedger
    noise_draws: list[int]
    rounds_played: list[int]
    actions: list[np.ndarray] | None = None
    captured: list[dict | None] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len(self.run_indices)


def run_chunk(policy: Policy, env: Environment, T: int, seed: int, indices: Sequence[int],
              stop_at: int | None = None, capture: bool = False, keep_actions: bool = False,
              progress: Callable[[int], None] | None = None) -> dict:
    """The runs ``indices`` of one simulation: the unit of work any executor ships (a local
    process, a Dask worker, a resumed sweep); :func:`assemble` joins chunks in run order."""
    K = env.n_arms
    ledger = RewardLedger()
    for r in policy.releases(T, K):
        ledger.intern(r)
    gaps = (env.means.max() - env.means).astype(np.float64)
    pts = checkpoints(T)
    regret, draws, played, acts, caps = [], [], [], [], []
    et = env.as_tuple()
    for i in indices:
        rng = run_generator(seed, i)
        out: RunOutput = policy.run_one(rng, et, T, stop_at=stop_at, capture=capture)
        actions = np.asarray(out.actions, dtype=np.int64)
        _record(ledger, i, K, out, actions)
        regret.append(_regret_at(actions, gaps, pts))
        draws.append(int(out.noise_draws))
        played.append(int(actions.size))
        acts.append(actions.astype(np.int16) if keep_actions else None)
        caps.append(out.captured)
        if progress is not None:
            progress(1)
    return dict(indices=list(indices), regret=regret, ledger=ledger, draws=draws, played=played,
                actions=acts, captured=caps)


def _record(ledger: RewardLedger, run: int, K: int, out: RunOutput, actions: np.ndarray) -> None:
    rows = out.rows
    if rows.shape[1]:
        ledger.append_rows(run, rows[0], rows[1], rows[2], rows[3], rows[4])
    if out.gauss_rows is not None and np.size(out.gauss_rows["arm"]):
        g = out.gauss_rows
        ledger.add_growing_prefix(run, g["arm"], g["stop"], g["count"], g["mu2"], starts=g["start"])
    if out.trees is not None:
        tr = out.trees
        for arm, off, n, lev, rid in zip(tr["arm"], tr["offset"], tr["n_items"], tr["levels"],
                                         tr["release_id"]):
            if n > 0:
                ledger.add_tree(run, int(arm), int(off), int(n), int(lev), int(rid))
    seg = _segments(actions, K, 1)
    if seg.shape[1]:
        ledger.add_segments(run, seg[0], seg[1], seg[2], seg[3], seg[4])
    counts = np.bincount(actions, minlength=K)
    for arm in range(K):
        if counts[arm]:
            ledger.set_stream_length(run, arm, int(counts[arm]))


def simulate(policy: Policy, env: Environment, horizon: int, *, seed: int = 0,
             runs: int | None = None, run_indices: Sequence[int] | None = None,
             stop_at: int | None = None, capture: bool = False, keep_actions: bool = False,
             workers: int = 1, progress: Callable[[int], None] | None = None) -> SimulationResult:
    """Run ``policy`` on ``env`` for ``horizon`` rounds, once per run index."""
    if not isinstance(policy, Policy):
        raise DpledgerError(f"not a policy: {policy!r}")
    if not isinstance(env, Environment):
        raise DpledgerError(f"not an environment: {env!r}")
    T = validate_horizon(horizon, env.n_arms)
    if env.table.size and env.table.shape[0] < T:
        raise DpledgerError(f"the reward table has {env.table.shape[0]} rows, fewer than the "
                            f"horizon {T}")
    if run_indices is None:
        if runs is None or isinstance(runs, bool) or int(runs) != runs or runs < 1:
            raise DpledgerError(f"runs must be an integer >= 1, got {runs!r}")
        run_indices = list(range(int(runs)))
    run_indices = [int(i) for i in run_indices]
    if not run_indices or len(set(run_indices)) != len(run_indices) or min(run_indices) < 0:
        raise DpledgerError("run_indices must be distinct integers >= 0")
    if stop_at is not None and not 1 <= int(stop_at) <= T:
        raise DpledgerError(f"stop_at must lie in [1, {T}], got {stop_at!r}")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise DpledgerError(f"seed must be an integer >= 0, got {seed!r}")
    workers = max(1, int(workers))
    if workers == 1 or len(run_indices) == 1:
        parts = [run_chunk(policy, env, T, seed, run_indices, stop_at, capture, keep_actions,
                           progress)]
    else:
        chunks = [run_indices[k::workers] for k in range(workers) if run_indices[k::workers]]
        with ProcessPoolExecutor(max_workers=len(chunks)) as pool:
            futs = [pool.submit(run_chunk, policy, env, T, seed, c, stop_at, capture,
                                keep_actions) for c in chunks]
            parts = []
            for f in futs:
                parts.append(f.result())
                if progress is not None:
                    progress(len(parts[-1]["indices"]))
    return assemble(policy, env, T, seed, parts, keep_actions)


def assemble(policy: Policy, env: Environment, T: int, seed: int, parts: Sequence[dict],
             keep_actions: bool = False) -> SimulationResult:
    """Join :func:`run_chunk` outputs in run-index order (independent of how runs were split)."""
    by_run: dict[int, tuple[dict, int]] = {}
    for part in parts:
        for j, i in enumerate(part["indices"]):
            if i in by_run:
                raise DpledgerError(f"run {i} appears in two chunks")
            by_run[i] = (part, j)
    order = sorted(by_run)
    ledger = RewardLedger()
    for r in policy.releases(T, env.n_arms):
        ledger.intern(r)
    for part in sorted(parts, key=lambda p: min(p["indices"])):
        ledger = ledger.merge(part["ledger"])
    return SimulationResult(
        policy=policy, env=env, horizon=T, seed=int(seed), run_indices=order,
        points=checkpoints(T),
        regret=np.array([by_run[i][0]["regret"][by_run[i][1]] for i in order]),
        ledger=ledger,
        noise_draws=[by_run[i][0]["draws"][by_run[i][1]] for i in order],
        rounds_played=[by_run[i][0]["played"][by_run[i][1]] for i in order],
        actions=[by_run[i][0]["actions"][by_run[i][1]] for i in order] if keep_actions else None,
        captured=[by_run[i][0]["captured"][by_run[i][1]] for i in order])


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


__all__ = ["simulate", "SimulationResult", "run_generator", "checkpoints", "default_workers"]
