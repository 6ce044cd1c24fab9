"""``dpledger verify run.json``: re-derive every privacy number without trusting the file.

Theorem and certificate are recomputed from (policy, parameters, T, K, range); the realized
block is recomputed from the stored per-reward compositions; the invariants are re-checked.
Any mismatch (a tampered number, a stale file, a violated invariant) is a finding.
"""
from __future__ import annotations

import math
from typing import Any

from dpledger.accounting.composition import Composition
from dpledger.accounting.schema import parse_deltas
from dpledger.errors import DpledgerError
from dpledger.policies.simulator import run_certificate
from dpledger.report import certificate_block, checks, realized_privacy, theorem_block
from dpledger.policies.registry import make_policy

_REALIZED_DERIVED = ("pure_epsilon", "pure_epsilon_status", "gdp_mu", "gdp_mu_status", "zcdp_rho",
                     "zcdp_rho_status", "epsilon_at_delta", "epsilon_at_delta_source", "epsilon",
                     "epsilon_status", "composition", "upper_bounds")


def _same(a: Any, b: Any, path: str, problems: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in set(a) | set(b):
            if k not in a or k not in b:
                problems.append(f"{path}.{k}: present on one side only")
            else:
                _same(a[k], b[k], f"{path}.{k}", problems)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            problems.append(f"{path}: lengths differ ({len(a)} vs {len(b)})")
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]", problems)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        if not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300):
            problems.append(f"{path}: stored {b!r}, recomputed {a!r}")
    elif a != b:
        problems.append(f"{path}: stored {b!r}, recomputed {a!r}")


def verify_report(report: Any, ledger=None) -> list[str]:
    """Problems found (empty when every number re-derives and every invariant holds).  With the
    run's ``ledger`` (a RewardLedger), the realized block's largest pure ε and GDP μ² are also
    checked against the ledger by an independent route
    (:func:`dpledger.accounting.realized.check_realized`): recomputing from the stored
    compositions alone cannot notice compositions missing from them."""
    if not isinstance(report, dict):
        raise DpledgerError("run.json must hold a JSON object")
    try:
        if report["schema_version"] != 1:
            raise DpledgerError(f"unsupported schema_version {report['schema_version']!r}")
        pol = report["policy"]
        env = report["environment"]
        T = int(report["horizon"])
        K = len(env["means"])
        lattice_bits = int(env.get("lattice_bits", 0))
        priv = report["privacy"]
        deltas = parse_deltas([float(d) for d in priv["deltas"]])
        stored_realized = priv["realized"]
        comps = [Composition.from_json(c) for c in stored_realized["compositions"]]
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, DpledgerError):
            raise
        raise DpledgerError(f"malformed run.json: {exc!r}") from None
    policy = make_policy(pol["name"], **pol["params"])
    problems: list[str] = []
    theorem = theorem_block(policy.theorem(T, K), deltas)
    _same(theorem, priv["theorem"], "privacy.theorem", problems)
    certificate = certificate_block(run_certificate(policy, T, K, lattice_bits), deltas)
    _same(certificate, priv["certificate"], "privacy.certificate", problems)
    realized = realized_privacy(comps, deltas, policy.adaptive)
    _same({k: realized.get(k) for k in _REALIZED_DERIVED},
          {k: stored_realized.get(k) for k in _REALIZED_DERIVED}, "privacy.realized", problems)
    if ledger is not None:
        from dpledger.accounting.realized import check_realized
        problems += check_realized(ledger, stored_realized)
    recomputed = checks(theorem, certificate, dict(stored_realized, **realized))
    _same(recomputed, priv["checks"], "privacy.checks", problems)
    for name in ("realized_le_certificate", "certificate_le_theorem"):
        if name == "certificate_le_theorem" and recomputed.get("theorem_finding"):
            continue        # reported by the command as a finding about the theorem
        if not recomputed[name]:
            bad = [d for d in recomputed["details"] if d["check"] == name and not d["ok"]]
            problems.append(f"invariant {name} violated: " +
                            "; ".join(f"{d['what']}: {d['lhs']!r} > {d['rhs']!r}" for d in bad))
    return problems
