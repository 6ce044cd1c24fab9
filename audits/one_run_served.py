"""The served one-run audit (``dpledger audit POLICY --store URL --canaries m``;
docs/audits.md#the-served-audit): the one-run audit of :mod:`dpledger.audits.one_run` against a
live ledger store, without stopping the service.

The auditor opens its own runs of the served policy on the store (step form,
:func:`dpledger.policies.online`; run ids above every run with rows and opened by no server,
one stream each, so
the service's streams and their rewards are untouched) and sends its canaries through them:
each auditor run plays its K initial pulls and answers arm a's ticket with the range's high end
(coin 1) or low end (coin 0) — the canary is arm a's first reward of that stream, and every
canary is its own reward of its own stream (⌈m/K⌉ runs).  The step form records each due
release in the store (budget check and append one transaction) before drawing its noise.

White-box score: for each canary the auditor reads the store's rows of its run and requires
the release that names the canary's observation (arm a, observations [0, 1)); a served policy
whose ledger misses it is refused (one line).  Its value is the released private mean the rule
holds (the step rule's ``mu``: the reward plus its Laplace noise, in the rule's rescaled units,
scale and sensitivity those of the recorded release), scored by the Laplace LLR
clip(2y − 1, −1, 1)/b.  Black-box: each auditor run then plays ``follow`` more rounds answered
with the midpoint, and a canary's score is its arm's pulls among them.

Labels: before any record, the auditor writes the store checkpoint
``auditor/one-run/<first run>-<last run>`` (a JSON note: the runs, the canaries, the seed, the
time) — every record the audit adds is in those runs.  Nothing else is written.
"""
from __future__ import annotations

import json
import math
import time

import numpy as np

from dpledger.audits.one_run import (DEFAULT_CONFIDENCE, OneRunResult, _claim_check,
                                     bound_from_guesses, guess_grid, guesses_from_scores,
                                     method_ceiling)
from dpledger.errors import DpledgerError, check_count

SERVED_POLICIES = ("lazy-dp-ts", "adap-ucb", "adap-klucb", "anytime-lazy-ucb")
LABEL_PREFIX = "auditor/one-run/"


def _generation_name(run: int) -> str:
    # the step form's per-run generation marker, as the store documents its checkpoints
    # (accounting/store_checkpoint.py: ``online/run-R/generation``, written when run R opens)
    return f"online/run-{int(run)}/generation"


def _free_runs(store, n: int) -> int:
    """The first of n consecutive run ids no one has used: above every run with rows, and none
    of them opened by a step-form server yet (a server that has opened its run but recorded
    nothing — the service's workers at start — holds it already)."""
    rows = store.rows_array()
    r0 = int(rows[:, 0].max()) + 1 if rows.size else 0
    r = r0
    while r < r0 + n:
        if store.checkpoint(_generation_name(r)) is not None:
            r0 = r + 1
        r += 1
    return r0


def audit_served(store_url: str, policy_name: str, *, canaries: int, arms: int = 2,
                 mode: str = "whitebox", seed: int = 0, confidence: float = DEFAULT_CONFIDENCE,
                 guesses: int | None = None, claim: float | None = None, follow: int = 8,
                 params: dict | None = None) -> OneRunResult:
    """The served audit (module docstring) of ``policy_name`` (with ``params``, as the service
    runs it) on the store at ``store_url``."""
    from dpledger.accounting.store import LedgerStore
    from dpledger.audits.result import certificate_summary, currency_of
    from dpledger.policies import online
    m = check_count("canaries", canaries, minimum=1)
    K = check_count("arms", arms, minimum=2)
    seed = check_count("seed", seed, minimum=0)
    follow = check_count("follow", follow, minimum=1)
    if policy_name not in SERVED_POLICIES:
        raise DpledgerError(f"the served audit covers {', '.join(SERVED_POLICIES)} (their first "
                            f"release of an arm is its first reward alone), not {policy_name}")
    if mode not in ("whitebox", "blackbox"):
        raise DpledgerError(f"mode must be 'whitebox' or 'blackbox', got {mode!r}")
    if not 0.0 < confidence < 1.0:
        raise DpledgerError(f"confidence must lie in (0, 1), got {confidence!r}")
    try:
        store = LedgerStore.open(store_url)
    except DpledgerError as exc:
        raise DpledgerError(f"the served store cannot be opened for the audit: {exc}") from None
    n_runs = math.ceil(m / K)
    try:
        r0 = _free_runs(store, n_runs)
        ss = np.random.SeedSequence(int(seed))
        c_ss, p_ss, r_ss = ss.spawn(3)
        coins = np.random.Generator(np.random.PCG64(c_ss)).integers(0, 2, size=m).astype(np.int8)
        order_key = np.random.Generator(np.random.PCG64(p_ss)).permutation(m)
        run_seed = int(np.random.Generator(np.random.PCG64(r_ss)).integers(0, 2 ** 62))
        note = {"auditor": True, "method": "one-run canaries", "policy": policy_name,
                "runs": [r0, r0 + n_runs - 1], "canaries": m, "arms": K, "seed": int(seed),
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        label = f"{LABEL_PREFIX}{r0}-{r0 + n_runs - 1}"
        try:
            store.save_checkpoint(label, json.dumps(note).encode())
        except DpledgerError as exc:
            raise DpledgerError(f"the auditor may not write the served store: {exc}") from None
        except Exception as exc:                     # noqa: BLE001 - a read-only file or role
            raise DpledgerError(f"the auditor may not write the served store: "
                                f"{type(exc).__name__}: {exc}") from None
        scores = np.zeros(m)
        where: list[tuple[int, int]] = [(-1, -1)] * m
        cert = None
        for j in range(n_runs):
            run = r0 + j
            pol = online(policy_name, K, store=store, run=run, seed=run_seed,
                         **(params or {}))
            if cert is None:
                cert = certificate_summary(pol.policy.certificate(K, K))
                rel = pol.release(0)
            idx = [j * K + a for a in range(K) if j * K + a < m]
            tickets = [pol.select() for _ in range(K)]
            for i, tk in enumerate(tickets):
                c = j * K + i
                reward = (pol.hi if coins[c] else pol.lo) if c < m else \
                    pol.lo + (pol.hi - pol.lo) / 2.0
                pol.observe(tk, reward)
            for c in idx:
                a = tickets[c - j * K].arm
                where[c] = (run, a)
                if mode == "whitebox":
                    y = float(pol.rule.state["mu"][a])
                    b = float(rel.scale)
                    scores[c] = min(1.0, max(-1.0, 2.0 * y - 1.0)) / b
            if mode == "blackbox":
                pulls = np.zeros(K)
                for _ in range(follow):
                    tk = pol.select()
                    pulls[tk.arm] += 1
                    pol.observe(tk, pol.lo + (pol.hi - pol.lo) / 2.0)
                for c in idx:
                    scores[c] = pulls[tickets[c - j * K].arm]
            pol.checkpoint()
        # one read of the store at the end (not one per run: a long read would hold up the
        # service's writers on a store without WAL): every canary's release must be named
        rows = store.rows_array()
        first = rows[(rows[:, 2] == 0) & (rows[:, 3] == 1)]
        named = set(zip(first[:, 0].tolist(), first[:, 1].tolist(), strict=True))
        for c, key in enumerate(where):
            if key not in named:
                raise DpledgerError(f"the served policy's ledger misses canary {c}'s release "
                                    f"(run {key[0]}, arm {key[1]}, observation 0)")
    finally:
        store.close()
    currency = currency_of(cert)
    centre = 0.0 if mode == "whitebox" else float(np.median(scores))
    grid = guess_grid(m, guesses)
    guess, _, top = guesses_from_scores(scores, centre, order_key, grid)
    right = guess == coins
    correct_at = {k: int(right[ix].sum()) for k, ix in top.items()}
    alpha = 1.0 - confidence
    bound, k_best, per_k = bound_from_guesses(m, correct_at, alpha, currency)
    extra = {"policy": {"name": policy_name, "params": dict(params or {})}, "seed": int(seed),
             "served": {"store": store_url if "@" not in store_url else "(postgresql URL)",
                        "auditor_runs": [r0, r0 + n_runs - 1], "label": label,
                        "records_added": "only in the auditor's runs"},
             "design": {"canaries": m, "arms": K, "runs": n_runs,
                        "description": "each canary is its arm's first reward in its own "
                                       "auditor run (stream) of the served policy"},
             "guess_grid": grid, "alpha_per_k": alpha / len(grid),
             "accuracy_of_all_guesses": float(right.mean())}
    extra.update(_claim_check(claim, bound, currency))
    return OneRunResult(lower=float(bound), currency=currency, confidence=float(confidence),
                        certificate=cert, canaries=m, guesses=int(k_best),
                        correct=int(correct_at[k_best]), per_k=per_k,
                        ceiling=float(method_ceiling(m, grid, alpha, currency)), mode=mode,
                        extra=extra)


__all__ = ["audit_served", "SERVED_POLICIES", "LABEL_PREFIX"]
