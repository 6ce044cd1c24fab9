"""``run.json``: a simulation's regret and its certified privacy ledger (docs/design.md#certificate,
docs/design.md#interfaces-and-json).

The privacy section holds four blocks kept apart:

* ``theorem``      the paper's bound (``accounting/theorems.py``);
* ``certificate``  the policy's release schedule at its worst (candidate compositions);
* ``realized``     the composition of the releases this run made, maximised over every reward
                   of every run through all the maximal per-reward compositions (no cap; a
                   value that is an upper bound rather than the exact maximum is named under
                   ``upper_bounds``) — labelled an *odometer reading* when release parameters
                   depend on the history;
* ``checks``       realized ≤ certificate and certificate ≤ theorem, per currency, within
                   a ≤ b·(1 + 1e-12); a realized upper bound above the certificate decides
                   nothing and is listed under ``inconclusive``, not counted as a violation.

Nothing here is stored that depends on the machine or the worker count (R4): no timestamps,
paths or timings.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from dpledger.accounting.accountants import OK
from dpledger.accounting.certificate import Certificate, Theorem
from dpledger.accounting.composition import Composition
from dpledger.accounting.numerics import le_tol
from dpledger.accounting.realized import realized_privacy as _realized_privacy
from dpledger.accounting.reward_queries import exact_front, worst_rewards_by_run
from dpledger.accounting.schema import (ACCOUNTANT_ORDER, SCHEMA_VERSION, delta_key, parse_deltas,
                                        privacy_block)
from dpledger.policies.simulator import SimulationResult, run_certificate

ODOMETER = ("odometer reading: release parameters depend on the public history, so this "
            "composition of the releases actually made is not by itself a DP guarantee; the "
            "certificate is")


def theorem_block(theorem: Theorem, deltas: Sequence[float]) -> dict:
    out: dict[str, Any] = dict(theorem.to_json())
    if theorem.unbounded:
        out.update(pure_epsilon=None, pure_epsilon_status="unbounded", gdp_mu=None,
                   gdp_mu_status="unbounded",
                   epsilon_at_delta={delta_key(d): None for d in deltas})
        return out
    out["pure_epsilon"] = theorem.pure_epsilon
    out["pure_epsilon_status"] = OK if theorem.pure_epsilon is not None else "not_applicable"
    out["gdp_mu"] = theorem.gdp_mu
    out["gdp_mu_status"] = OK if theorem.gdp_mu is not None else "not_applicable"
    out["epsilon_at_delta"] = {delta_key(d): _finite_or_none(theorem.epsilon_at_delta(d))
                               for d in deltas}
    return out


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def certificate_block(cert: Certificate, deltas: Sequence[float]) -> dict:
    block = privacy_block(cert.compositions, deltas, adaptive=cert.adaptive,
                          unbounded=cert.unbounded)
    block["candidates"] = [c.to_json() for c in cert.candidates]
    block["note"] = cert.note
    block["adaptive"] = cert.adaptive
    return block


def realized_privacy(compositions: Sequence[Composition], deltas: Sequence[float],
                     adaptive: bool) -> dict:
    """The privacy block of a ledger's maximal compositions: every value the maximum over every
    reward, exact or a sound upper bound named under ``upper_bounds``
    (:func:`dpledger.accounting.realized.realized_privacy`); ``verify`` recomputes exactly
    this from the stored compositions."""
    return _realized_privacy(compositions, deltas, adaptive)


def realized_block(compositions: Sequence[Composition], deltas: Sequence[float], adaptive: bool,
                   worst: dict | None, per_run: list[dict]) -> dict:
    block = realized_privacy(compositions, deltas, adaptive)
    block["label"] = ODOMETER if adaptive else "ledger: release parameters fixed by position"
    block["worst_reward"] = worst
    block["per_run"] = per_run
    block["compositions"] = [c.to_json() for c in _stored(compositions)]
    return block


def _stored(compositions: Sequence[Composition]) -> list[Composition]:
    """The compositions ``verify`` needs to recompute the realized block: the maximal ones,
    all of them."""
    return exact_front(compositions)


def checks(theorem: dict, certificate: dict, realized: dict) -> dict:
    """Per-currency comparisons; a currency missing on either side is not compared."""
    details = []
    bounds = realized.get("upper_bounds") or {}

    def cmp(kind: str, what: str, a, a_status, b, b_status, bound: str | None = None):
        if a_status == "not_applicable" or b_status == "not_applicable":
            return          # a side that states nothing in this currency bounds nothing
        if a_status == "unbounded" and b_status == "unbounded":
            ok = True
        elif b_status == "unbounded":
            ok = True
        elif a_status == "unbounded":
            ok = False
        elif a is None or b is None:
            return
        else:
            ok = le_tol(a, b)
        entry = {"check": kind, "what": what, "lhs": a, "rhs": b, "ok": bool(ok)}
        if bound and not ok:    # an upper bound above the certificate decides nothing
            entry["inconclusive"] = bound
        details.append(entry)

    for cur in ("pure_epsilon", "gdp_mu"):
        cmp("realized_le_certificate", cur, realized[cur], realized[f"{cur}_status"],
            certificate[cur], certificate[f"{cur}_status"])
    for acc in ACCOUNTANT_ORDER:
        for k, v in realized["epsilon"][acc].items():
            cmp("realized_le_certificate", f"epsilon.{acc}[{k}]", v,
                realized["epsilon_status"][acc][k], certificate["epsilon"][acc][k],
                certificate["epsilon_status"][acc][k], bounds.get(f"epsilon.{acc}"))
    for cur in ("pure_epsilon", "gdp_mu"):
        cmp("certificate_le_theorem", cur, certificate[cur], certificate[f"{cur}_status"],
            theorem[cur], theorem[f"{cur}_status"])
    stated = theorem.get("approx_dp")
    if stated:      # an (ε, δ) theorem: the certificate's best ε at the theorem's δ
        k = delta_key(stated["delta"])
        if k in certificate.get("epsilon_at_delta", {}):
            c = certificate["epsilon_at_delta"][k]
            details.append({"check": "certificate_le_theorem", "what": f"epsilon_at_delta[{k}]",
                            "lhs": c, "rhs": stated["epsilon"],
                            "ok": bool(c is not None and le_tol(c, stated["epsilon"]))})
    ratios = {}
    for cur in ("pure_epsilon", "gdp_mu"):
        c, t = certificate[cur], theorem[cur]
        if c is not None and t is not None and t > 0:
            ratios[cur] = c / t
    promise = theorem.get("promise")
    if isinstance(promise, dict):
        # a variant's own theorem is its certificate; the paper's promise for the mechanism it
        # misreads is checked beside it (a finding about the variant, not a failure of the code)
        for cur in ("pure_epsilon", "gdp_mu"):
            if promise.get(cur) is not None:
                cmp("certificate_le_promise", cur, certificate[cur],
                    certificate[f"{cur}_status"], promise[cur], OK)
    cert_ok = all(d["ok"] for d in details if d["check"] == "certificate_le_theorem")
    out = {
        "realized_le_certificate": all(d["ok"] for d in details
                                       if d["check"] == "realized_le_certificate"
                                       and "inconclusive" not in d),
        "certificate_le_theorem": cert_ok,
        "theorem_finding": theorem.get("finding", "") if not cert_ok else "",
        "certificate_over_theorem": ratios,
        "details": details,
    }
    broken = [d for d in details if d["check"] == "certificate_le_promise" and not d["ok"]]
    if isinstance(promise, dict):
        out["promise_kept"] = not broken
        if broken:
            d = broken[0]
            name = {"pure_epsilon": "pure ε", "gdp_mu": "GDP μ"}[d["what"]]
            got = ("unbounded" if d["lhs"] is None else
                   f"{d['lhs']:.6g}" + (f", {d['lhs'] / d['rhs']:.3g} times" if d["rhs"] else ""))
            out["promise_finding"] = (
                f"this variant breaks the paper's promise: certificate {name} {got} the "
                f"{name} = {d['rhs']:.6g} the paper proves for its mechanism "
                f"({promise['theorem']}; privacy.theorem.promise)")
    inconclusive = [d["what"] for d in details if "inconclusive" in d]
    if inconclusive:
        out["inconclusive"] = inconclusive
    return out


def code_ok(chk: dict) -> bool:
    """The invariants that implicate the code: realized ≤ certificate always; certificate ≤
    theorem unless the theorem declares why it can fall below (a finding about the theorem)."""
    return chk["realized_le_certificate"] and (chk["certificate_le_theorem"]
                                               or bool(chk.get("theorem_finding")))


def regret_block(points: np.ndarray, regret: np.ndarray) -> dict:
    R = regret.shape[0]
    mean = regret.mean(axis=0)
    std = regret.std(axis=0, ddof=1) if R > 1 else np.zeros_like(mean)
    band = 1.96 * std / math.sqrt(R)
    return {
        "final_mean": float(mean[-1]),
        "final_std": float(std[-1]) if R > 1 else None,
        "final_std_status": OK if R > 1 else "not_applicable",
        "curve": {"t": points.tolist(), "mean": mean.tolist(), "std": std.tolist(),
                  "lo": (mean - band).tolist(), "hi": (mean + band).tolist(),
                  "band": band.tolist()},
    }


def build_run_report(res: SimulationResult, deltas: Sequence[float] | None = None,
                     sampler: str = "float") -> dict:
    deltas = parse_deltas(deltas)
    policy, T, K = res.policy, res.horizon, res.env.n_arms
    theorem = theorem_block(policy.theorem(T, K), deltas)
    certificate = certificate_block(run_certificate(policy, T, K, res.env.lattice_bits), deltas)
    ledger = res.ledger
    realized = realized_from_ledger(ledger, deltas, policy.adaptive, res.run_indices,
                                    fixed_table=getattr(res.env, "kind", None) == 3)
    report = {
        "schema_version": SCHEMA_VERSION,
        "policy": {"name": policy.name, "params": policy.resolved_params(T, K),
                   "provenance": policy.provenance},
        "environment": res.env.to_json(),
        "horizon": T,
        "runs": res.runs,
        "seed": res.seed if getattr(res, "rng", "seeded") == "seeded" else None,
        "sampler": "exact" if res.env.lattice_bits else "float",
        **_rng_block(res),
        "regret": regret_block(res.points, res.regret),
        "privacy": privacy_section(deltas, theorem, certificate, realized),
        "ledger": _ledger_block(ledger, res),
    }
    report["ledger"].update(LEDGER_NOT_WRITTEN)
    return report


def privacy_section(deltas: Sequence[float], theorem: dict, certificate: dict,
                    realized: dict) -> dict:
    """run.json's ``privacy``: the δ grid, the three blocks and their checks."""
    return {"deltas": [delta_key(d) for d in deltas], "theorem": theorem,
            "certificate": certificate, "realized": realized,
            "checks": checks(theorem, certificate, realized)}


# What run.json says about the ledger file until the writer of the file fills in its name
# (relative to run.json), sha256 and size (``dpledger run``; ``verify`` checks them).
LEDGER_NOT_WRITTEN = {"file": None, "sha256": None, "bytes": None,
                      "file_status": "not_written:no ledger file was written with this run.json"}


def realized_from_ledger(ledger, deltas: Sequence[float], adaptive: bool,
                         run_indices: Sequence[int], fixed_table: bool = False) -> dict:
    """The realized block of run.json from a ledger (docs/design.md#realized): the maximal
    per-reward compositions, the worst reward, each run's worst, and on a fixed table the
    across-runs bound.  ``build_run_report`` and ``verify`` (re-deriving from the ledger file) both
    call this, so the two cannot drift apart."""
    comps = ledger.maximal_compositions() or [Composition()]
    worst = ledger.worst_reward(deltas)
    worst_json = None
    if worst is not None:
        worst_json = {"run": worst.reward.run, "round": worst.reward.round, "arm": worst.reward.arm,
                      "index": worst.reward.index, "ranked_by": worst.currency}
    per_run = []
    worst_of_run = worst_rewards_by_run(ledger, run_indices, deltas)
    maximal_of_run = maximal_by_run(ledger, run_indices)
    for run in run_indices:
        w = worst_of_run[run]
        entry = {"run": run, "pure_epsilon": None, "gdp_mu": None}
        if w is not None:
            # each number the maximum over the run's rewards (issue 26: the reward ranked
            # worst by one key can have a smaller pure ε or μ than another reward)
            run_comps = maximal_of_run[run]
            pe = max(c.pure_epsilon() for c in run_comps)
            entry["pure_epsilon"] = pe if math.isfinite(pe) else None
            mus = [c.gdp_mu() for c in run_comps]
            entry["gdp_mu"] = None if any(m is None for m in mus) else max(mus)
            entry["worst_round"] = w.reward.round       # the ranking's witness, for reading
            entry["worst_arm"] = w.reward.arm
        per_run.append(entry)
    realized = realized_block(comps, deltas, adaptive, worst_json, per_run)
    if fixed_table:             # fixed table: R mechanisms on one dataset
        realized["across_runs"] = _across_runs(maximal_of_run, run_indices, deltas)
    return realized


def maximal_by_run(ledger, runs: Sequence[int]) -> dict[int, list[Composition]]:
    """{run: the maximal compositions among that run's rewards} (pieces come in (run, arm)
    order, so each run's pieces are found by one sort)."""
    from dpledger.accounting.reward_queries import maximal_pieces
    pt = ledger.piece_totals()
    run = np.asarray(pt.run, dtype=np.int64)
    order = np.argsort(run, kind="stable")
    lo = np.searchsorted(run[order], np.asarray(list(runs), dtype=np.int64), side="left")
    hi = np.searchsorted(run[order], np.asarray(list(runs), dtype=np.int64), side="right")
    return {r: [c for c, _ in maximal_pieces(ledger, pt, order[a:b])]
            for r, a, b in zip(runs, lo.tolist(), hi.tolist(), strict=True)}
def _rng_block(res) -> dict:
    """``rng`` only when the bit source is not the seeded generator (``--rng os``): the run is
    then not reproducible and says so (``seed`` is null; ``verify --resimulate`` cannot apply)."""
    if getattr(res, "rng", "seeded") == "seeded":
        return {}
    from dpledger.policies.simulator import OS_RNG_DETAIL
    return {"rng": {"source": res.rng, "reproducible": False, "detail": OS_RNG_DETAIL}}


def _ledger_block(ledger, res) -> dict:
    """Sizes of the ledger.  Posterior reads give nearly every reward its own composition, so
    counting distinct compositions costs one value per reward: skipped above 2e6 rewards."""
    n_comp = ledger.n_distinct_compositions(limit=2_000_000)
    block = {"rows": ledger.n_rows(), "distinct_releases": len(ledger.releases),
             "distinct_compositions": n_comp}
    if n_comp is None:
        block["distinct_compositions_status"] = ("skipped:posterior reads give nearly every "
                                                 "reward its own composition; more than 2e6 "
                                                 "rewards to compare")
    block["noise_draws"] = int(sum(res.noise_draws))
    return block


def _across_runs(maximal_of_run: dict[int, list[Composition]], runs, deltas) -> dict:
    """On a fixed table every run reads the same rows: a row's privacy across R runs composes
    the R per-run compositions.  Bounded here by composing, for each run, the element-wise
    maximum of its maximal compositions (it dominates every reward of the run in every
    currency, so the sum dominates every row; a run's single worst reward by one ranking key
    would not — issue 26)."""
    from dpledger.accounting.realized import elementwise_max
    parts = []
    for run in runs:
        if maximal_of_run[run]:
            parts.extend(elementwise_max(maximal_of_run[run]).items)
    comp = Composition.of(parts) if parts else Composition()
    block = privacy_block([comp], deltas, adaptive=True)
    block["label"] = ("upper bound: for every run, the element-wise maximum of its rewards' "
                      "compositions, composed across runs")
    return block
