"""White-box audits of the adaptive-episode policies (``episode-linucb``, ``adac-oful``) on the
contextual pair of :mod:`dpledger.audits.contextual` (both arms hold the same context and
reward in every row, so the records are a fixed sequence; the tables differ in their first
record).

The first record lies in exactly one release: the first episode of stream 0.  The auditor
captures that release (its noise and the policy's clean sum), recomputes the episode's clean
sum itself from D's table — the records [0, n₁) with n₁ the episode's length: the schedule's
first episode n₀ (``episode-linucb``), or the first n at which det(λI + Σ_{i<n} x_i x_iᵀ) ≥
(1 + C)·λ^d (``adac-oful``, numpy's log-determinant; the contexts are the same on both
sides) — and scores the likelihood ratio of the released sum minus that clean sum under the
release's noise law (:func:`~dpledger.audits.contextual.node_llr`), the Neyman–Pearson
statistic.  The certificate is that one release, and the pair's change attains its
sensitivity (:func:`~dpledger.audits.contextual.whitebox_records`: orthogonal [x; y] of norm
L̃ for the joint statistic, a reward 1 → 0 for Σ r·x), so the audit can reach it.  Trials are
seeded per side and chunk as every contextual audit (:func:`~dpledger.audits.policy.
chunk_generator`); float sampler only.
"""
from __future__ import annotations

import math

import numpy as np

from dpledger.audits.contextual import (CHUNK, NORM_BOUND, contextual_pair, item_of, node_llr,
                                        r_certified, whitebox_records, _stat)
from dpledger.audits.result import AuditResult, GDP_DELTA, certificate_summary, currency_of
from dpledger.audits.stats import audit_scores, ceiling
from dpledger.errors import DpledgerError


def first_episode_length(policy, env, problem, observed: int) -> int:
    """n₁: the records of stream 0's first episode, checked against the table (module
    docstring; the pair's records are its rows in order).  ``observed`` is the length the
    policy released (its first ledger row); it must be the schedule's n₀, or satisfy the
    determinant rule recomputed with numpy — det grown by 1 + C at n₁ and not before, to 1e-9
    in ln det (a tie at the threshold may fall either way in floating point)."""
    if policy.name == "episode-linucb":
        n0 = int(policy.params["first_episode"])
        if observed != n0:
            raise DpledgerError(f"the policy's first episode holds {observed} records, its "
                                f"schedule {n0}")
        return n0
    lam = policy.params["lambda"]
    d = problem.dim
    x = env.contexts[:, 0, :]
    target = d * math.log(lam) + policy.log_growth(problem)

    def ld(n):
        return np.linalg.slogdet(lam * np.eye(d) + x[:n].T @ x[:n])[1]
    if not (ld(observed) >= target - 1e-9 and (observed == 1 or ld(observed - 1)
                                               < target + 1e-9)):
        raise DpledgerError(f"the policy's first episode ({observed} records) does not follow "
                            "the determinant rule")
    return observed


def audit_episodes(policy, *, trials: int, T: int, dim: int, seed: int, confidence: float,
                   selection_fraction: float, progress=None) -> AuditResult:
    """The white-box audit (module docstring); argument checks are the caller's
    (:func:`~dpledger.audits.contextual.audit_contextual`)."""
    from dpledger.audits.policy import best_possible_for, chunk_generator
    from dpledger.policies.contextual.base import problem_of
    stat = _stat(policy)
    env0, env1, description = contextual_pair(policy, T, dim, "whitebox")
    problem = problem_of(env0, T, 0)
    plan = policy.plan(problem)
    cert_obj = policy.certificate(problem)
    cert = certificate_summary(cert_obj)
    currency = currency_of(cert)
    probe = policy.run_one(chunk_generator(seed, 0, 0), env0, problem)
    if probe.noise_draws < 1 or probe.rows[0, 0] != 0:
        raise DpledgerError(f"the pair's first episode does not close within T = {T}; use a "
                            "larger --horizon")
    n1 = first_episode_length(policy, env0, problem, int(probe.rows[2, 0]))
    (x0, r0), (x1, r1), _ = whitebox_records(policy, dim)
    delta = item_of(stat, x1, r1) - item_of(stat, x0, r0)
    ctx, rew = env0.contexts, env0.rewards
    cD = np.sum([item_of(stat, ctx[i, 0], (rew[i, 0] - env0.lo) / (env0.hi - env0.lo))
                 for i in range(n1)], axis=0)
    E = plan.width
    if cD.size != E:
        raise DpledgerError("the episode audit's pair has one model (a shared θ)")
    policy._capture_rows, policy._capture_clean = 1, True
    mismatch = [0.0]
    total = 2 * trials
    scores = []
    try:
        for side, (env, expected) in enumerate(((env0, cD), (env1, cD + delta))):
            out = np.empty(trials)
            for c in range(0, trials, CHUNK):
                rng = chunk_generator(seed, side, c // CHUNK)
                m = min(trials, c + CHUNK) - c
                z = np.empty((m, 1, E))
                for i in range(m):
                    run = policy.run_one(rng, env, problem)
                    got = run.extra["noise"][0]
                    if run.noise_draws < 1 or got[E] != 0:
                        raise DpledgerError("the pair's first episode was not released")
                    clean = got[E + 1:]
                    mismatch[0] = max(mismatch[0], float(np.max(np.abs(clean - expected))))
                    z[i, 0] = got[:E] + clean - cD
                out[c:c + m] = node_llr(plan.spec, z, delta)
                if progress is not None:
                    progress(side * trials + c + m, total)
            scores.append(out)
    finally:
        policy._capture_rows, policy._capture_clean = 0, False
    sa = audit_scores(scores[0], scores[1], confidence=confidence,
                      selection_fraction=selection_fraction, delta=GDP_DELTA,
                      currency=currency)
    extra: dict = {"policy": {"name": policy.name, "params": dict(policy.params)}, "horizon": T,
                   "dim": dim, "arms": 2, "seed": int(seed), "contextual": True,
                   "clean_sum_mismatch": mismatch[0], "first_episode_records": n1,
                   "whitebox_capture": ("the one release holding the first record (stream 0's "
                                        f"first episode, records [0, {n1})), released sum "
                                        "minus D's clean sum"),
                   "score": "log-likelihood ratio of the captured release",
                   "ceiling": ceiling(trials, confidence=confidence,
                                      selection_fraction=selection_fraction,
                                      currency=currency, delta=GDP_DELTA)}
    bp = best_possible_for(cert_obj, trials, confidence, selection_fraction, currency,
                           r_certified(cert))
    if bp is not None:
        extra["best_possible"] = bp
    pair = {"round": 1, "from": "D", "to": "D'", "description": description,
            "norm_bound": NORM_BOUND}
    return AuditResult(score_audit=sa, certificate=cert, pair=pair, trials=trials,
                       mode="whitebox", extra=extra)
