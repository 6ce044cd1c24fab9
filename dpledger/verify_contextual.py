"""``dpledger verify`` of a contextual run.json (the ``contextual`` block marks one).

What is re-derived, and from what — as for K-armed runs (:mod:`dpledger.verify`), with the
contextual facts in place of the arm means:

* **public parameters** of a contextual policy, and its privacy model;
* **environment** — the synthetic linear bandit is rebuilt from its description (θ re-drawn from
  the seed when it was drawn); data environments are checked for what run.json holds (rows
  against the horizon; the data file's sha256 against ``--table``/``--log`` when given);
* **theorem, certificate, realized** — recomputed from (policy, parameters, the problem: T, K,
  d, context shape, norm bound, range, delay) and from the ledger file;
* **ledger streams** — runs 0 … R−1, streams 0 … S−1, each run's observations summing to the
  records run.json says were delivered, max(rounds − D, 0), and (online environments) their
  rounds tiling 1 … observations exactly once (the record of round t reaches the policy after
  round t + D); replay rounds are distinct log rows within the horizon;
* **regret curve consistency** — as for K-armed runs, within [0, t·(hi − lo)]; replay:
  ``not_applicable``;
* **reward block consistency** — the mean over runs of the per-run means, the ratio to
  uniform play, the accepted rows equal to the policy rounds.

Regret and reward values need the data and the run: ``--resimulate`` reruns it.
"""
from __future__ import annotations

import math

import numpy as np

from dpledger.errors import DpledgerError
from dpledger.policies.contextual.base import ContextualProblem
from dpledger.policies.registry import make_policy, policy_class
from dpledger.report import certificate_block, realized_from_ledger, theorem_block
from dpledger.report_contextual import REPLAY_NO_REGRET, delay_note


def problem_from_json(report: dict) -> ContextualProblem:
    env, ctx = report["environment"], report["contextual"]
    lo, hi = (float(x) for x in env["range"])
    return ContextualProblem(int(report["horizon"]), int(env["arms"]), int(env["dim"]),
                             ctx["model"] == "shared", float(env["norm_bound"]), lo, hi,
                             int(ctx["delay"]), str(env["name"]),
                             int(ctx.get("lattice_bits", 0)))


def verify_contextual(report: dict, ledger, v):
    """Fill the :class:`~dpledger.verify.Verification` ``v``."""
    from dpledger.inputs import check_run_counts
    from dpledger.verify import (_same as same, _malformed as malformed, _not_reproducible,
                                 check_invariants, privacy_inputs, realized_from_stored,
                                 refuse_undeclared)
    try:
        pol = report["policy"]
        name, params = pol["name"], pol["params"]
        if not isinstance(params, dict):
            raise TypeError("policy.params must be an object")
        # rng os: no seed (the runs' bits came from OS entropy)
        T, R = check_run_counts(report,
                                seed_optional=_not_reproducible(report) is not None)
        ctx = report["contextual"]
        problem = problem_from_json(report)
        rounds = [int(x) for x in ctx["rounds"]]
        observations = [int(x) for x in ctx["observations"]]
        priv, deltas, stored_realized, comps = privacy_inputs(report)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, DpledgerError):
            raise
        raise malformed(exc) from None
    problems = v.problems
    cls = policy_class(name)
    if not getattr(cls, "contextual", False):
        problems.append(f"policy {name!r} is not a contextual policy, but run.json has a "
                        "contextual block")
        return v
    if refuse_undeclared(name, params, v):
        return v
    policy = make_policy(name, **params)
    same(policy.public_params(), params, "policy.params", problems)
    same(policy.privacy_model, ctx.get("privacy_model"), "contextual.privacy_model", problems)
    v.checked.append("public parameters and privacy model")

    _check_environment(report, problem, problems)
    if problem.lattice_bits and not policy.exact_sampler:
        problems.append(f"sampler: exact, but {name} has no exact-sampler form")
    v.checked.append("environment description")
    _check_counts(report, problem, policy, rounds, observations, R, problems)
    _check_regret(report, problem, R, problems)
    _check_reward(report, rounds, problems)
    v.checked += ["rounds and observations per run", "regret curve consistency",
                  "reward block consistency"]

    theorem = theorem_block(policy.theorem(problem), deltas)
    same(theorem, priv["theorem"], "privacy.theorem", problems)
    certificate = certificate_block(policy.certificate(problem), deltas)
    same(certificate, priv["certificate"], "privacy.certificate", problems)
    v.checked += ["theorem", "certificate"]
    realized = realized_from_stored(comps, deltas, policy.adaptive, stored_realized, v)
    if ledger is not None:
        try:
            _check_ledger(report, ledger, policy, problem, R, observations, deltas, same,
                          problems)
        except (ValueError, IndexError, TypeError, KeyError, OverflowError) as exc:
            problems.append(f"ledger file: inconsistent, nothing re-derives from it ({exc})")
        else:
            from dpledger.accounting.realized import check_realized
            problems += check_realized(ledger, stored_realized)
        v.checked += ["ledger streams vs rounds, delay and runs", "realized from ledger file"]
    check_invariants(theorem, certificate, stored_realized, realized, priv["checks"], v)
    v.not_checked[:] = ["regret and reward values (they need the data and the run)",
                        "noise-draw and row counts"]
    return v


def _check_environment(report: dict, problem: ContextualProblem, problems: list[str]) -> None:
    env = report["environment"]
    sampler = report.get("sampler", "float")
    if sampler != ("exact" if problem.lattice_bits else "float"):
        problems.append(f"sampler: {sampler!r} but contextual.lattice_bits is "
                        f"{problem.lattice_bits}")
    shared = env.get("contexts", "").startswith("one per arm")
    if shared != problem.shared:
        problems.append(f"environment.contexts {env.get('contexts')!r} but contextual.model "
                        f"{report['contextual'].get('model')!r}")
    if problem.env in ("linear", "linear-fixed"):
        from dpledger.policies.contextual.environments import linear, linear_fixed
        given = env.get("theta_source") == "given"
        make = linear if problem.env == "linear" else linear_fixed
        try:
            # rng os records no seed; its θ was drawn from seed 0 (--seed is refused with it)
            seed = 0 if report.get("seed") is None else int(report["seed"])
            rebuilt = make(problem.dim, problem.arms, env["theta"] if given else None,
                           seed, problem.norm_bound, problem.lo,
                           problem.hi, env.get("noise_sd")).to_json()
        except DpledgerError as exc:
            problems.append(f"environment: {exc}")
            return
        for k in rebuilt:
            if k in env and isinstance(rebuilt[k], list) and k == "theta":
                if not np.array_equal(np.asarray(env[k], float), np.asarray(rebuilt[k])):
                    problems.append("environment.theta: not the θ its source gives "
                                    f"({rebuilt['theta_source']})")
            elif env.get(k) != rebuilt[k]:
                problems.append(f"environment.{k}: stored {env.get(k)!r}, rebuilt "
                                f"{rebuilt[k]!r}")
        return
    rows = env.get("rows")
    if rows is not None and (not isinstance(rows, int) or rows < problem.horizon):
        problems.append(f"environment.rows {rows!r} fewer than the horizon {problem.horizon}")


def _check_counts(report, problem, policy, rounds, observations, R, problems) -> None:
    ctx = report["contextual"]
    if len(rounds) != R or len(observations) != R:
        problems.append(f"contextual: rounds and observations must list {R} runs")
        return
    S = policy.ledger_streams(problem)
    if ctx.get("streams") != S:
        problems.append(f"contextual.streams {ctx.get('streams')!r}: {policy.name} with a "
                        f"{ctx.get('model')} model over {problem.arms} arms has {S}")
    replay = problem.env == "replay"
    for r, (k, n) in enumerate(zip(rounds, observations, strict=True)):
        if not replay and k != problem.horizon:
            problems.append(f"contextual.rounds[{r}] = {k}: an online run plays every one of "
                            f"its {problem.horizon} rounds")
            return
        if not 0 <= k <= problem.horizon:
            problems.append(f"contextual.rounds[{r}] = {k} outside 0 … {problem.horizon}")
            return
        if n != max(k - problem.delay, 0):
            problems.append(f"contextual.observations[{r}] = {n}: with delay {problem.delay} "
                            f"and {k} rounds, max(rounds − delay, 0) = "
                            f"{max(k - problem.delay, 0)} records reach the policy")
            return
    note = delay_note(problem.delay, rounds)
    if note != ctx.get("delay_note"):
        problems.append(f"contextual.delay_note: stored {ctx.get('delay_note')!r}, "
                        f"recomputed {note!r}")


def _check_regret(report, problem, R, problems) -> None:
    if problem.env == "replay":
        if report["regret"] != {"status": REPLAY_NO_REGRET}:
            problems.append("regret: a replay has no regret (status not_applicable expected)")
        return
    from dpledger.verify import check_regret_curve
    check_regret_curve(report, problem.horizon, R, problem.hi - problem.lo, "hi − lo", problems)


def _check_reward(report, rounds, problems) -> None:
    rew = report.get("reward")
    if not isinstance(rew, dict):
        problems.append("reward: missing")
        return
    per_run = rew.get("per_run")
    if not isinstance(per_run, list) or len(per_run) != len(rounds):
        problems.append("reward.per_run: one mean per run expected")
        return
    vals = [x for x in per_run if x is not None]
    if any(x is None for x, k in zip(per_run, rounds, strict=True) if k) or \
            any(x is not None for x, k in zip(per_run, rounds, strict=True) if not k):
        problems.append("reward.per_run: a mean exactly for the runs with rounds expected")
    lo, hi = (float(x) for x in report["environment"]["range"])
    if any(not lo - 1e-12 <= x <= hi + 1e-12 for x in vals):
        problems.append("reward.per_run: a mean reward outside the declared range")
    mean = math.fsum(vals) / len(vals) if vals else None
    from dpledger.verify import _same
    _same(mean, rew.get("mean_reward"), "reward.mean_reward", problems)
    u = rew.get("uniform_mean_reward")
    _same(mean / u if mean is not None and u else None, rew.get("normalised_to_uniform"),
          "reward.normalised_to_uniform", problems)
    env = report["environment"]
    if env.get("name") == "replay":
        _same(rounds, rew.get("accepted_rows"), "reward.accepted_rows", problems)
        _same(env.get("uniform_mean_reward"), u, "reward.uniform_mean_reward", problems)


def observation_rounds(seg: dict, R: int, S: int):
    """Per (run, stream) the rounds of its observations in index order, from the ledger's
    segments (an independent expansion: first_round + stride·i for i < length)."""
    run, arm = (np.asarray(seg[c], dtype=np.int64) for c in ("run", "arm"))
    fi, fr, st, ln = (np.asarray(seg[c], dtype=np.int64)
                      for c in ("first_index", "first_round", "stride", "length"))
    if ln.size and (ln.min() < 1 or st.min() < 1 or fi.min() < 0):
        raise ValueError("a segment with length, stride or first index out of range")
    rep = np.repeat(np.arange(ln.size), ln)
    offset = np.arange(rep.size) - np.repeat(np.cumsum(ln) - ln, ln)
    return run[rep], arm[rep], fi[rep] + offset, fr[rep] + st[rep] * offset


def _check_ledger(report, ledger, policy, problem, R, observations, deltas, same,
                  problems) -> None:
    S = policy.ledger_streams(problem)
    streams = ledger.streams()
    runs_seen = sorted({r for r, _ in streams})
    if any(r < 0 or r >= R for r in runs_seen):
        problems.append(f"ledger file: runs {runs_seen[:5]} (run.json: runs 0 … {R - 1})")
        return
    per_run = np.zeros(R, dtype=np.int64)
    for (r, s), n in streams.items():
        if not 0 <= s < S:
            problems.append(f"ledger file: run {r} has stream {s}; the model has {S}")
            return
        per_run[r] += n
    if per_run.tolist() != list(observations):
        r = int(np.flatnonzero(per_run != np.asarray(observations))[0])
        problems.append(f"ledger file: run {r} has {int(per_run[r])} observations, run.json "
                        f"says {observations[r]} records reached the policy")
        return
    run, stream, index, rnd = observation_rounds(ledger.segments, R, S)
    if np.any((run < 0) | (run >= R) | (stream < 0) | (stream >= S)):
        problems.append("ledger file: a segment names a run or stream outside run.json's")
        return
    key = (run * S + stream) * (problem.horizon + 1)
    order = np.lexsort((index, key))
    k_sorted, i_sorted = key[order], index[order]
    starts = np.r_[True, k_sorted[1:] != k_sorted[:-1]]
    expect = np.arange(k_sorted.size) - np.maximum.accumulate(
        np.where(starts, np.arange(k_sorted.size), 0))
    lengths = np.bincount(run * S + stream, minlength=R * S)
    declared = np.zeros(R * S, dtype=np.int64)
    for (r, s), n in streams.items():
        declared[r * S + s] = n
    if not np.array_equal(i_sorted, expect) or not np.array_equal(lengths, declared):
        problems.append("ledger file: the index → round segments do not cover each stream's "
                        "observations 0 … n−1 exactly once")
        return
    if rnd.size and (rnd.min() < 1 or rnd.max() > problem.horizon):
        problems.append(f"ledger file: an observation's round lies outside 1 … {problem.horizon}")
        return
    for r in range(R):
        mine = np.sort(rnd[run == r])
        if problem.env == "replay":
            ok = mine.size < 2 or bool(np.all(np.diff(mine) > 0))
        else:
            ok = np.array_equal(mine, np.arange(1, mine.size + 1))
        if not ok:
            problems.append(f"ledger file: run {r}'s observations are not "
                            + ("distinct log rows" if problem.env == "replay" else
                               f"rounds 1 … {mine.size}, each once (delay {problem.delay})"))
            return
    stored = report["privacy"]["realized"]
    realized = realized_from_ledger(ledger, deltas, policy.adaptive, list(range(R)),
                                    fixed_table=report["environment"].get("rows") is not None)
    same(realized, stored, "privacy.realized (from the ledger file)", problems)
    led = report.get("ledger", {})
    same(len(ledger.releases), led.get("distinct_releases"),
         "ledger.distinct_releases (from the ledger file)", problems)
    if led.get("distinct_compositions") is not None:
        same(ledger.n_distinct_compositions(), led.get("distinct_compositions"),
             "ledger.distinct_compositions (from the ledger file)", problems)
