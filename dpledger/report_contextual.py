"""``run.json`` of a contextual run: regret (or, for replay, the replayed reward), the ledger of
records keyed (run, stream, observation), and the same privacy blocks as a K-armed run
(:mod:`dpledger.report`: theorem, certificate, realized, checks).

Beside the K-armed keys it holds ``contextual`` (model, streams, delay, privacy model, rounds and
observations per run) and ``reward`` (mean reward per run and over runs, uniform play's mean
reward, their ratio — the "CTR normalised to random" of replay experiments).  A replay has no
counterfactual rewards, so its ``regret`` is ``{"status": "not_applicable:…"}``.
"""
from __future__ import annotations

import math
from typing import Sequence

from dpledger.accounting.schema import SCHEMA_VERSION, parse_deltas
from dpledger.policies.contextual.simulator import ContextualResult
from dpledger.report import (LEDGER_NOT_WRITTEN, _ledger_block, _rng_block, certificate_block,
                             privacy_section, realized_from_ledger, regret_block, theorem_block)

REPLAY_NO_REGRET = ("not_applicable:replay has no counterfactual rewards (the log holds the "
                    "logged action's reward only); see reward")


def delay_note(delay: int, rounds: Sequence[int]) -> str | None:
    """What a delay at least as long as a run means (None when every run learned something)."""
    if rounds and delay >= max(rounds):
        return (f"delay {delay} >= the rounds played ({max(rounds)}): no reward reached the "
                "policy, nothing was learned (every round chosen from the prior model)")
    return None


def reward_block(res: ContextualResult) -> dict:
    """Mean reward per run (Σ reward / policy rounds; replay: over accepted rows), its mean over
    runs, uniform play's mean reward over the same rounds (replay: the log's estimate) and the
    ratio of the two."""
    per_run = [s / n if n else None for s, n in zip(res.reward_sum, res.rounds, strict=True)]
    if res.env.is_replay:
        uniform = res.env.info["uniform_mean_reward"]
    else:
        parts = [u / n for u, n in zip(res.uniform_sum, res.rounds, strict=True) if n]
        uniform = math.fsum(parts) / len(parts) if parts else None
    vals = [v for v in per_run if v is not None]
    mean = math.fsum(vals) / len(vals) if vals else None
    out = {"mean_reward": mean, "per_run": per_run, "uniform_mean_reward": uniform,
           "normalised_to_uniform": (mean / uniform if mean is not None and uniform
                                     else None)}
    if res.env.is_replay:
        out["accepted_rows"] = list(res.rounds)
        out["note"] = ("replay (Li, Chu, Langford & Wang 2011): a log row is a round of the "
                       "policy only when the policy picks its logged action; mean_reward is "
                       "over the accepted rows")
    return out


def report_deltas(policy, problem, deltas: Sequence[float] | None) -> list[float]:
    """The δ grid of a contextual run.json: the requested one, with the theorem's own δ added
    when it states an (ε, δ) (so certificate ≤ theorem is checked at that δ)."""
    deltas = list(parse_deltas(deltas))
    stated = policy.theorem(problem).approx_dp
    if stated is not None:
        deltas = list(parse_deltas(deltas + [stated[1]]))
    return deltas


def privacy_unit(policy, env) -> dict:
    """What one unit of privacy is in this run (issue 30 §3; docs/concepts.md#privacy-unit):
    ``unit`` (a reward, or a record: a round's context and reward), ``relation`` (the
    neighbouring streams the certificate is about) and, for a replay, ``log_rows`` (why the
    certificate is not one of the log's rows)."""
    record = policy.privacy_model == "record-private"
    unit = "record" if record else "reward"
    what = ("one record (a round's context and reward)" if record
            else "one reward (contexts public)")
    out = {"unit": unit,
           "relation": f"streams differing in {what} of the stream the policy observed, in "
                       "its arrival order"}
    if getattr(env, "is_replay", False):
        out["relation"] = (f"streams differing in {what} of the simulated online stream: the "
                           "log rows the policy accepted, in acceptance order")
        out["log_rows"] = (
            "not certified: whether a log row is accepted depends on the policy's action, "
            "which depends on that row's context, so one changed row can add or remove a "
            "record and shift every later record's position in the policy's statistics; no "
            "bound short of every later release is given (docs/concepts.md#privacy-unit)")
    return out


def build_contextual_report(res: ContextualResult, deltas: Sequence[float] | None = None) -> dict:
    policy, problem, env = res.policy, res.problem, res.env
    deltas = report_deltas(policy, problem, deltas)
    theorem = theorem_block(policy.theorem(problem), deltas)
    certificate = certificate_block(policy.certificate(problem), deltas)
    realized = realized_from_ledger(res.ledger, deltas, policy.adaptive, res.run_indices,
                                    fixed_table=env.rows is not None)
    ctx = {"model": "shared" if problem.shared else "disjoint",
           "streams": policy.ledger_streams(problem),
           "stream_meaning": policy.stream_meaning(problem),
           "delay": problem.delay,
           "privacy_model": policy.privacy_model,
           **({"lattice_bits": problem.lattice_bits} if problem.lattice_bits else {}),
           "rounds": list(res.rounds),
           "observations": list(res.observations)}
    note = delay_note(problem.delay, res.rounds)
    if note:
        ctx["delay_note"] = note
    report = {
        "schema_version": SCHEMA_VERSION,
        "policy": {"name": policy.name, "params": policy.public_params(),
                   "provenance": policy.provenance},
        "environment": env.to_json(),
        "contextual": ctx,
        "horizon": problem.horizon,
        "runs": res.runs,
        "seed": res.seed if res.rng == "seeded" else None,
        **_rng_block(res),
        "sampler": "exact" if problem.lattice_bits else "float",
        "regret": ({"status": REPLAY_NO_REGRET} if res.regret is None
                   else regret_block(res.points, res.regret)),
        "reward": reward_block(res),
        "privacy": privacy_section(deltas, theorem, certificate, realized),
        "privacy_unit": privacy_unit(policy, env),
        "ledger": _ledger_block(res.ledger, res),
    }
    report["ledger"].update(LEDGER_NOT_WRITTEN)
    return report
