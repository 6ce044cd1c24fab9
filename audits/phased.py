"""White-box audit of the phased-elimination policies on a fixed arm set (AdaC-GOPE, Hanna et
al.'s central phased elimination: :mod:`dpledger.policies.contextual.gope`).

**The pair.**  The arm set is the standard basis e_0 … e_{d−1} of R^d (K = d arms, norm 1): its
G-optimal design is uniform, every arm is in phase 1's support and arm 0 is played first, so
round 1's reward is observation 0 of stream 0 — the certificate's witness.  The reward table
holds seeded filler on the grid 1/16 in [0, 1] in every row but row 1, which is 0 for every arm
on D and 1 on D′.  Phase 1's plan is computed from the public arm set alone, so on both sides
the same rounds are played and arm 0's phase-1 sum differs by exactly 1: the one release that
holds the witness is a shift of the release's noise law (Gaussian N(0, σ²) or Laplace Lap(b)),
and its released value is the Neyman–Pearson statistic.

**A trial** is one run of the policy's own ``run_one`` (capture on), stopped at the end of
phase 1, on the chunk generator of its side (:func:`~dpledger.audits.policy.chunk_generator`):
the released value of the captured (stream 0, start 0) release is the score.  The certificate
is that one release, so the audit can reach it; ``limit_reason`` is empty.
"""
from __future__ import annotations

import numpy as np

from dpledger.audits.result import AuditResult, GDP_DELTA, certificate_summary, currency_of
from dpledger.audits.stats import (DEFAULT_CONFIDENCE, DEFAULT_SELECTION_FRACTION,
                                   audit_scores, ceiling)
from dpledger.errors import DpledgerError, check_count

CHUNK = 1024
FILLER_SEED = 11


def phased_pair(dim: int, T: int):
    """(env D, env D′, the arm set): contextual tables over the basis arms (module docstring)."""
    from dpledger.policies.contextual import environments as CE
    K = dim
    X = np.eye(dim)
    ctx = np.repeat(X[None], T, axis=0)
    fill = np.random.default_rng(FILLER_SEED).integers(0, 17, (T, K)) / 16.0
    d0, d1 = fill.copy(), fill.copy()
    d0[0, :] = 0.0
    d1[0, :] = 1.0
    return CE.contextual_table(ctx, d0), CE.contextual_table(ctx, d1), X


def _side(policy, env, problem, stop, trials, seed, side, progress, before, total):
    from dpledger.audits.policy import chunk_generator
    out = np.zeros(trials)
    clean = np.zeros(trials)
    done = 0
    for c in range(-(-trials // CHUNK)):
        rng = chunk_generator(seed, side, c)
        for i in range(c * CHUNK, min(trials, (c + 1) * CHUNK)):
            run = policy.run_one(rng, env, problem, capture=True, stop_at=stop)
            hit = [r for r in run.extra["releases"] if r[0] == 0 and r[1] == 0]
            if len(hit) != 1:
                raise DpledgerError("the pair's witness release was not made in phase 1")
            clean[i], out[i] = hit[0][3], hit[0][4]
            done += 1
        if progress is not None:
            progress(before + done, total)
    return out, clean


def audit_phased(policy, *, trials: int, mode: str = "whitebox", dim: int = 2, seed: int = 0,
                 confidence: float = DEFAULT_CONFIDENCE,
                 selection_fraction: float = DEFAULT_SELECTION_FRACTION,
                 progress=None) -> AuditResult:
    """White-box audit of a phased policy on :func:`phased_pair` (module docstring): T = the
    rounds of phase 1 (the horizon the policy plans with is that T)."""
    from dpledger.policies.contextual.base import problem_of
    trials = check_count("trials", trials, minimum=2)
    if mode != "whitebox":
        raise DpledgerError(f"policy {policy.name!r}: only the white-box audit of the phased "
                            "policies is built (--mode whitebox)")
    dim = check_count("dim", dim, minimum=2)
    # phase 1 planned at a horizon of its own length: the fixed point T = rounds(T)
    X = np.eye(dim)
    T = 1
    for _ in range(64):
        rounds = policy.plan_phase(X, np.arange(dim), 1, T).rounds
        if rounds <= T:
            break
        T = rounds
    env0, env1, _ = phased_pair(dim, T)
    problem = problem_of(env0, T, 0, 0)
    stop = policy.first_phase(X, T).rounds
    cert_obj = policy.certificate(problem)
    cert = certificate_summary(cert_obj)
    currency = currency_of(cert)
    audit_delta = GDP_DELTA if currency == "mu" else 0.0
    s0, c0 = _side(policy, env0, problem, stop, trials, seed, 0, progress, 0, 2 * trials)
    s1, c1 = _side(policy, env1, problem, stop, trials, seed, 1, progress, trials, 2 * trials)
    shift = np.unique(c1 - c0)
    sa = audit_scores(s0, s1, confidence=confidence, selection_fraction=selection_fraction,
                      delta=audit_delta, currency=currency)
    pair = {"design": "phased-whitebox", "round": 1, "arms": dim, "horizon": T,
            "description": "basis arms e_0 … e_{d−1}; row 1 of the reward table 0 on D and 1 "
                           "on D′ for every arm, the other rows seeded filler on the grid 1/16",
            "limit_reason": None}
    extra = {"policy": {"name": policy.name, "params": policy.recorded_params()},
             "horizon": int(T), "stop_at": int(stop), "seed": int(seed),
             "score": "released value of arm 0's phase-1 sum (the only release holding the "
                      "witness)",
             "whitebox_capture": "arm 0's phase-1 release (stream 0, observations [0, T_1(0)))",
             "clean_shift": [float(v) for v in shift],
             "ceiling": ceiling(trials, confidence=confidence,
                                selection_fraction=selection_fraction, currency=currency,
                                delta=audit_delta)}
    return AuditResult(score_audit=sa, certificate=cert, pair=pair, trials=trials, mode=mode,
                       extra=extra)
