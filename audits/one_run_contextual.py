"""One-run audit of ``jdp-linucb`` (Shariff & Sheffet 2018) with canary records
(docs/audits.md#one-run-audits; the statistics are :mod:`dpledger.audits.one_run`'s).

The records are the rows of a ``contextual-table`` in which every arm holds the same context and
reward (so the record of round t does not depend on the actions, and record privacy puts every
record in one tree, :mod:`dpledger.audits.contextual`).  The m canaries sit in rows
1 + i·2^L (i = 0 … m − 1), T = m·2^L: each holds D's first record of the multi-run audit
((1, 0, …, 1) as [x; y]) or D′'s ((−1, 0, …, 1)) by a private fair coin — the Frobenius worst
case, attained; the other rows are the seeded filler of the multi-run pair (known).

The node pushed at round t holds records (t − lowbit(t), t].  A node of level ≤ L holds at most
one canary ("solo"), and canary i lies in L + 1 of them (levels 0 … L); higher nodes mix many
canaries and are not scored.  The white-box score of a canary is the sum, over its solo nodes,
of the node's exact log-likelihood ratio (:func:`~dpledger.audits.contextual.node_llr`) after
subtracting the node's known part (the auditor's own clean sum with the canary at D's record);
the released node is the policy's captured noise plus its clean sum, i.e. what it released.
The certificate composes bit_length(T) nodes per record, so the score sees at most
(L + 1)/bit_length(T) of the certificate's μ² — the method's structural limit, reported as
``solo_share``.
"""
from __future__ import annotations

import math
import time

import numpy as np

from dpledger.audits.one_run import (DEFAULT_CONFIDENCE, OneRunResult, _claim_check,
                                     bound_from_guesses, guess_grid, guesses_from_scores,
                                     method_ceiling)
from dpledger.errors import DpledgerError, check_count

DEFAULT_LEVELS = 3            # canary spacing 2^L: L + 1 solo nodes per canary
MAX_HORIZON = 1 << 18


def audit_one_run_contextual(policy, *, canaries: int, mode: str = "whitebox",
                             T: int | None = None, dim: int = 2, seed: int = 0,
                             confidence: float = DEFAULT_CONFIDENCE, guesses: int | None = None,
                             claim: float | None = None, levels: int = DEFAULT_LEVELS
                             ) -> OneRunResult:
    """One run of ``jdp-linucb`` (Gaussian mode) with ``canaries`` canary records (module
    docstring); T defaults to m·2^levels and must be at least that."""
    from dpledger.audits.contextual import (_filler, _stat, item_of, node_llr,
                                            whitebox_records, NORM_BOUND)
    from dpledger.audits.result import certificate_summary, currency_of
    from dpledger.policies.contextual.base import problem_of
    from dpledger.policies.contextual.environments import contextual_table
    from dpledger.policies.contextual.private_loop import STAT_JOINT
    m = check_count("canaries", canaries, minimum=1)
    levels = check_count("levels", levels, minimum=0)
    if policy.name != "jdp-linucb" or _stat(policy) != STAT_JOINT:
        raise DpledgerError(f"a contextual one-run audit covers jdp-linucb (one tree over all "
                            f"records), not {policy.name}")
    if policy.params.get("mode") != "gaussian":
        raise DpledgerError("the contextual one-run audit scores Gaussian nodes: jdp-linucb "
                            "--set mode=gaussian")
    if mode != "whitebox":
        raise DpledgerError("the contextual one-run audit is white-box (the captured nodes)")
    if not 0.0 < confidence < 1.0:
        raise DpledgerError(f"confidence must lie in (0, 1), got {confidence!r}")
    seed = check_count("seed", seed, minimum=0)
    dim = check_count("dim", dim, minimum=1)
    spacing = 1 << levels
    need = m * spacing
    T = need if T is None else check_count("horizon", T, minimum=1)
    if m > T:
        raise DpledgerError(f"--canaries {m} is larger than the horizon T = {T}: each canary "
                            "is one record")
    if T < need:
        raise DpledgerError(f"{m} canaries spaced 2^{levels} apart need T >= {need}, got {T}")
    if T > MAX_HORIZON:
        raise DpledgerError(f"T = {T} exceeds {MAX_HORIZON} (fewer --canaries)")
    K = 2
    (x0, r0), (x1, r1), what = whitebox_records(policy, dim)
    ss = np.random.SeedSequence(int(seed))
    c_ss, p_ss, r_ss = ss.spawn(3)
    coins = np.random.Generator(np.random.PCG64(c_ss)).integers(0, 2, size=m).astype(np.int8)
    order_key = np.random.Generator(np.random.PCG64(p_ss)).permutation(m)
    fx, fr = _filler(T, dim)
    crow = np.arange(m, dtype=np.int64) * spacing          # 0-based canary rows
    ctx = np.repeat(fx[:, None, :], K, axis=1)
    rew = np.repeat(fr[:, None], K, axis=1)
    ctx[crow] = np.where(coins[:, None, None] == 1, x1, x0)
    rew[crow] = np.where(coins == 1, r1, r0)[:, None]
    env = contextual_table(ctx, rew, norm_bound=NORM_BOUND)
    problem = problem_of(env, T, 0)
    plan = policy.plan(problem)
    E = plan.blocks * plan.entries
    cert = certificate_summary(policy.certificate(problem))
    currency = currency_of(cert)
    t0 = time.perf_counter()
    policy._capture_rows = T
    policy._capture_clean = True
    try:
        run = policy.run_one(np.random.Generator(np.random.PCG64(r_ss)), env, problem)
    finally:
        policy._capture_rows = 0
        policy._capture_clean = False
    cap = run.extra["noise"]
    released = cap[:, :E] + cap[:, E + 1:]
    # the auditor's known part: every canary at D's record, the filler as it is
    known_items = np.array([item_of(STAT_JOINT, fx[t], fr[t]) for t in range(T)])
    known_items[crow] = item_of(STAT_JOINT, x0, r0)
    delta = item_of(STAT_JOINT, x1, r1) - item_of(STAT_JOINT, x0, r0)
    pre = np.vstack([np.zeros(E), np.cumsum(known_items, axis=0)])
    is_can = np.zeros(T + 1, dtype=np.int64)
    is_can[crow + 1] = 1
    pre_c = np.cumsum(is_can)
    t = np.arange(1, T + 1)
    low = t & -t
    nc = pre_c[t] - pre_c[t - low]
    solo = np.flatnonzero((nc == 1) & (low <= spacing))
    z = released[solo] - (pre[t[solo]] - pre[t[solo] - low[solo]])
    llr = node_llr(plan.spec, z[:, None, :], delta)
    first = t[solo] - low[solo]                            # the node's records: (first, t]
    owner = (np.searchsorted(crow, first, side="left"))    # the one canary in (first, t]
    scores = np.zeros(m)
    np.add.at(scores, owner, llr)
    nodes = int(problem.max_observations.bit_length())
    grid = guess_grid(m, guesses)
    if guesses is not None and not 1 <= guesses <= m:
        raise DpledgerError(f"--guesses must lie in [1, {m}] (the canaries), got {guesses}")
    guess, _, top = guesses_from_scores(scores, 0.0, order_key, grid)
    right = guess == coins
    correct_at = {k: int(right[idx].sum()) for k, idx in top.items()}
    alpha = 1.0 - confidence
    bound, k_best, per_k = bound_from_guesses(m, correct_at, alpha, currency)
    ceil = method_ceiling(m, grid, alpha, currency)
    per_canary = np.bincount(owner, minlength=m)
    extra = {"policy": {"name": policy.name, "params": dict(policy.params)}, "seed": int(seed),
             "contextual": True,
             "design": {"horizon": int(T), "dim": int(dim), "arms": K, "canaries": m,
                        "rows": [1, int(crow[-1]) + 1], "spacing": spacing,
                        "rows_form": f"1 + i * {spacing}",
                        "description": f"canary records in rows 1 + i*2^{levels}; " + what},
             "score": (f"log-likelihood ratio of the canary's solo nodes (levels 0..{levels}, "
                       "each holding no other canary)"),
             "solo_nodes_per_canary": {"min": int(per_canary.min()),
                                       "max": int(per_canary.max())},
             "nodes_per_record": nodes,
             "solo_share": math.sqrt((levels + 1) / nodes) if currency == "mu" else
             (levels + 1) / nodes,
             "guess_grid": grid, "alpha_per_k": alpha / len(grid),
             "accuracy_of_all_guesses": float(right.mean())}
    extra.update(_claim_check(claim, bound, currency))
    res = OneRunResult(lower=float(bound), currency=currency, confidence=float(confidence),
                       certificate=cert, canaries=m, guesses=int(k_best),
                       correct=int(correct_at[k_best]), per_k=per_k, ceiling=float(ceil),
                       mode=mode, extra=extra)
    res.elapsed = time.perf_counter() - t0
    return res


__all__ = ["audit_one_run_contextual", "DEFAULT_LEVELS"]
