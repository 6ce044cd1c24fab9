"""Many independent runs of a contextual policy: regret, mean reward and the ledger.

Seeding as for K-armed runs (:func:`~dpledger.policies.simulator.run_generator`): run i owns
the generator of SeedSequence(seed, spawn_key=(i,)), so any split of the runs over workers
gives the same runs and the same bytes.

Per run the policy's loop returns the arm of every round, the regret term of every round and
the observations it delivered (stream and round of each).  From those, with one implementation
each: the regret curve (cumulative regret at the checkpoints of T, :func:`regret_at`), the
index → round segments of every stream (:func:`observation_segments`), the stream lengths, and
the ledger records (the policy's rows and trees, tagged with the run, through the K-armed
simulator's recorder with the stream in the ledger's ``arm`` column).

Memory: O(T) per run at once (the arm, the regret term and the delivered observations of every
round: 32 bytes a round), the environment's data, the delay queue and the models; estimated and
refused before anything is allocated (:func:`memory_estimate`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from dpledger._jit import njit

from dpledger.accounting.ledger import RewardLedger
from dpledger.errors import DpledgerError
from dpledger.interrupt import in_worker_thread, interruptible_pool, raise_if_stopped
from dpledger.policies.contextual.base import ContextualPolicy, ContextualProblem, check_delay, \
    problem_of
from dpledger.policies.contextual.environments import ContextualEnvironment
from dpledger.resources import available_memory, fmt_bytes
from dpledger.policies.simulator import (_MEMORY_SLACK, _generator, _os_entropy, _record,
                                         check_rng_source, check_runs, count_runs, checkpoints)


@dataclass
class ContextualResult:
    policy: ContextualPolicy
    env: ContextualEnvironment
    problem: ContextualProblem
    seed: int
    run_indices: list[int]
    points: np.ndarray
    regret: np.ndarray | None          # (runs, points); None for replay
    ledger: RewardLedger
    noise_draws: list[int]
    rounds: list[int]                   # policy rounds per run (replay: accepted rows)
    observations: list[int]             # records delivered per run
    reward_sum: list[float]
    uniform_sum: list[float]
    rng: str = "seeded"

    @property
    def runs(self) -> int:
        return len(self.run_indices)

    @property
    def horizon(self) -> int:
        return self.problem.horizon


@njit(cache=True)
def observation_segments(obs_stream, obs_round, n_streams):
    """The index → round map of the delivered observations as segments (stream, first_index,
    first_round, stride, length): per stream, maximal arithmetic runs of the rounds of its
    observations in delivery order, built greedily (a run is closed by the first observation
    that does not continue it; runs listed in the order they close, then the open ones in
    stream order)."""
    n = obs_stream.size
    out = np.zeros((5, n + n_streams), np.int64)
    first_idx = np.zeros(n_streams, np.int64)
    first_rnd = np.zeros(n_streams, np.int64)
    stride = np.zeros(n_streams, np.int64)
    length = np.zeros(n_streams, np.int64)
    count = np.zeros(n_streams, np.int64)
    m = 0
    for i in range(n):
        s = obs_stream[i]
        r = obs_round[i]
        if length[s] == 0:
            first_idx[s], first_rnd[s], stride[s], length[s] = count[s], r, 1, 1
        elif length[s] == 1:
            stride[s] = r - first_rnd[s]
            length[s] = 2
        elif r == first_rnd[s] + stride[s] * length[s]:
            length[s] += 1
        else:
            out[0, m], out[1, m], out[2, m] = s, first_idx[s], first_rnd[s]
            out[3, m], out[4, m] = stride[s], length[s]
            m += 1
            first_idx[s], first_rnd[s], stride[s], length[s] = count[s], r, 1, 1
        count[s] += 1
    for s in range(n_streams):
        if length[s] > 0:
            out[0, m], out[1, m], out[2, m] = s, first_idx[s], first_rnd[s]
            out[3, m], out[4, m] = stride[s], length[s]
            m += 1
    return out[:, :m].copy(), count


def regret_at(terms: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Cumulative regret Σ_{t ≤ p} terms[t − 1] at every checkpoint p (summed in round order)."""
    return np.cumsum(terms)[points - 1]


def memory_estimate(policy: ContextualPolicy, env: ContextualEnvironment,
                    problem: ContextualProblem, runs: int, workers: int = 1) -> dict:
    """Bytes a contextual simulation needs at least: per run at once 32 bytes a round (arm,
    regret term, delivered stream and round), the delay queue (min(D, T) + 1 records of d + 3
    numbers), a round's K contexts and scores, the policy's models and ledger rows; the
    environment's data once per process; the regret checkpoints of every run kept to the
    end."""
    T, d = problem.horizon, problem.dim
    queue = (min(problem.delay, T) + 1) * (d + 3) * 8
    parts = {"rounds": 32 * T, "delay queue": queue,
             # a round's K contexts and K scores, the models
             "arms and dimension": 8 * problem.arms * (problem.dim + 1) + policy.model_bytes(problem),
             "ledger rows": 40 * max(policy.row_capacity(problem), 1)}
    per_run = sum(parts.values())
    concurrent = max(1, min(int(workers), int(runs)))
    held = runs * 8 * len(checkpoints(T)) + concurrent * env.nbytes()
    return {"bytes": _MEMORY_SLACK + concurrent * per_run + held, "per_run": per_run,
            "held": held, "concurrent": concurrent, "largest": max(parts, key=parts.get)}


def check_memory(policy, env, problem, runs, workers=1, available: int | None = None) -> dict:
    est = memory_estimate(policy, env, problem, runs, workers)
    avail = available_memory() if available is None else int(available)
    if avail is None or est["bytes"] <= avail:
        return est
    fix = {"rounds": "use a smaller --horizon", "delay queue": "use a smaller --delay",
           "arms and dimension": "use fewer --arms or a smaller --dim",
           "ledger rows": "use a smaller --horizon"}[est["largest"]]
    if est["concurrent"] > 1:
        fix = "use fewer --workers (each worker holds a run) or " + fix.removeprefix("use ")
    raise DpledgerError(
        f"this contextual simulation needs about {fmt_bytes(est['bytes'])} "
        f"({est['concurrent']} run(s) at once of {fmt_bytes(est['per_run'])} each, mostly "
        + ("32 bytes a round" if est["largest"] == "rounds" else est["largest"])
        + f", and {fmt_bytes(est['held'])} kept), more than the {fmt_bytes(avail)} "
        f"available; {fix}")


def run_chunk(policy: ContextualPolicy, env: ContextualEnvironment, problem: ContextualProblem,
              seed: int, indices: Sequence[int],
              progress: Callable[[int], None] | None = None, rng: str = "seeded") -> dict:
    """The runs ``indices``: their regret at the checkpoints, sums, and one ledger.  ``rng``
    "os": each run's generator seeded with 128 bits of OS entropy, as K-armed runs."""
    ledger = RewardLedger()
    id_map = np.array([ledger.intern(r) for r in policy.releases(problem)] or [0], np.int64)
    if np.array_equal(id_map, np.arange(id_map.size)):
        id_map = None
    pts = checkpoints(problem.horizon)
    S = policy.ledger_streams(problem)
    outs, tables, lengths, regrets = [], [], [], []
    rounds, observations, rsum, usum, draws = [], [], [], [], []
    for i in indices:
        raise_if_stopped()          # Ctrl-C between runs (inside one: the kernel's stop slot)
        entropy = _os_entropy() if rng == "os" else None
        out = policy.run_one(_generator(seed, i, entropy), env, problem)
        ex = out.extra
        table, count = observation_segments(ex["obs_stream"], ex["obs_round"], S)
        tables.append(table)
        lengths.append(count)
        regrets.append(None if env.is_replay else regret_at(ex["regret"], pts))
        rounds.append(int(ex["rounds"]))
        observations.append(int(ex["obs_stream"].size))
        rsum.append(float(ex["reward_sum"]))
        usum.append(float(ex["uniform_sum"]))
        draws.append(int(out.noise_draws))
        out.actions = None          # keep no O(T) array past its run
        out.extra = {}
        outs.append(out)
        if progress is not None:
            progress(1)
    sizes = np.array([t.shape[1] for t in tables], dtype=np.int64)
    table = np.concatenate(tables, axis=1) if tables else np.zeros((5, 0), np.int64)
    _record(ledger, list(indices), S, outs, table, sizes, np.array(lengths, dtype=np.int64),
            id_map)
    return dict(indices=list(indices), regret=regrets, ledger=ledger, rounds=rounds,
                observations=observations, reward_sum=rsum, uniform_sum=usum, draws=draws)


def simulate_contextual(policy: ContextualPolicy, env: ContextualEnvironment, horizon: int, *,
                        seed: int = 0, runs: int | None = None,
                        run_indices: Sequence[int] | None = None, delay: int = 0,
                        workers: int = 1, progress: Callable[[int], None] | None = None,
                        sampler: str = "float", rng: str = "seeded") -> ContextualResult:
    """Run ``policy`` on ``env`` for ``horizon`` rounds (replay: log rows walked, at most the
    log's rows) with reward delay ``delay``, once per run index.  ``sampler="exact"``: a
    private policy with an exact-sampler form draws lattice noise on statistics rounded to the
    lattice 2^-LATTICE_BITS of their range (the problem's ``lattice_bits``).  ``rng="os"``
    (deployment, with the exact sampler): each run's bits from OS entropy, not reproducible."""
    if not isinstance(policy, ContextualPolicy):
        raise DpledgerError(f"policy {getattr(policy, 'name', policy)!r} is not a contextual "
                            "policy")
    if not isinstance(env, ContextualEnvironment):
        raise DpledgerError(f"not a contextual environment: {env!r}")
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise DpledgerError(f"horizon must be an integer >= 1, got {horizon!r}")
    T = int(horizon)
    if env.rows is not None and T > env.rows:
        what = "log" if env.is_replay else "contextual table"
        raise DpledgerError(f"the {what} has {env.rows} rows, fewer than the horizon {T}")
    delay = check_delay(delay)
    n_runs = count_runs(runs, run_indices, seed)
    if sampler not in ("float", "exact"):
        raise DpledgerError(f"sampler must be 'float' or 'exact', got {sampler!r}")
    check_rng_source(rng, sampler == "exact")
    bits = 0
    if sampler == "exact":
        if not (policy.private and policy.exact_sampler):
            from dpledger.policies.registry import contextual_available, make_policy
            names = [n for n in contextual_available()
                     if getattr(make_policy(n), "exact_sampler", False)]
            raise DpledgerError(f"policy {policy.name!r} has no exact-sampler form; the exact "
                                f"sampler runs {', '.join(names)}")
        from dpledger.mechanisms.noise import LATTICE_BITS
        bits = LATTICE_BITS
    problem = problem_of(env, T, delay, bits)
    workers = max(1, int(workers))
    check_memory(policy, env, problem, n_runs, workers)    # before the list of indices exists
    run_indices = check_runs(runs, run_indices, seed)
    if workers == 1 or len(run_indices) == 1:
        # the compiled loop runs off the main thread, which hears Ctrl-C and sets the loop's
        # stop slot (dpledger.interrupt); in a pool, each process's watcher does
        parts = [in_worker_thread(lambda: run_chunk(policy, env, problem, seed, run_indices,
                                                    progress, rng))]
    else:
        chunks = [run_indices[k::workers] for k in range(workers) if run_indices[k::workers]]
        with interruptible_pool("process", len(chunks)) as pool:
            futs = [pool.submit(run_chunk, policy, env, problem, seed, c, None, rng)
                    for c in chunks]
            parts = []
            for f in futs:
                parts.append(f.result())
                if progress is not None:
                    progress(len(parts[-1]["indices"]))
    res = assemble(policy, env, problem, int(seed), parts)
    res.rng = rng
    return res


def assemble(policy, env, problem, seed: int, parts: Sequence[dict]) -> ContextualResult:
    """Join chunks in run-index order (independent of how the runs were split)."""
    by_run = {}
    for part in parts:
        for j, i in enumerate(part["indices"]):
            if i in by_run:
                raise DpledgerError(f"run {i} appears in two chunks")
            by_run[i] = (part, j)
    order = sorted(by_run)
    if len(parts) == 1:
        ledger = parts[0]["ledger"]
    else:
        ledger = RewardLedger()
        for r in policy.releases(problem):
            ledger.intern(r)
        for part in sorted(parts, key=lambda p: min(p["indices"])):
            ledger = ledger.merge(part["ledger"])

    def col(key):
        return [by_run[i][0][key][by_run[i][1]] for i in order]

    regret = None if env.is_replay else np.array(col("regret"))
    return ContextualResult(policy=policy, env=env, problem=problem, seed=seed,
                            run_indices=order, points=checkpoints(problem.horizon),
                            regret=regret, ledger=ledger, noise_draws=col("draws"),
                            rounds=col("rounds"), observations=col("observations"),
                            reward_sum=col("reward_sum"), uniform_sum=col("uniform_sum"))
