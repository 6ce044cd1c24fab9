"""The suite-wide audit guard (issue 14: "no audit of a correct policy ever exceeds its
certificate anywhere in the suite"), used by ``tests/conftest.py``.

How it works.  :func:`install` wraps ``AuditResult.__init__`` for the test session so that every
audit result built in the pytest process — by ``audit_policy``, ``audit_laplace``,
``audit_gaussian``, ``audit_spec``, the ``dpledger audit`` command run in-process, or anything
else — is appended to :data:`RECORDED`.  After each test, the conftest fixture hands the recorded
results (and every ``audit.json``-shaped object in JSON files the test wrote under its
``tmp_path``, which covers the CLI run in a subprocess) to :func:`excesses`; a non-empty answer
fails the test, unless the test is marked ``audit_violations_expected`` — the explicit list of
tests that audit planted defects or count violations of a statistical guarantee.

A result exceeds its certificate when any of these lower bounds is above the matching
certificate value (each is a valid lower bound on the corresponding quantity, so any excess
is a bug in the code or the theorem, or a (≤ α) statistical accident that the test's fixed seed
must not hit):

* the audited bound (``violation``: ε_lower over pure ε, or μ_lower over GDP μ);
* μ_lower over the certificate's GDP μ whenever that is finite (μ_lower is valid for any
  mechanism, whatever the audit currency);
* the KOV bound at each δ the certificate states ε(δ) for, recomputed from the audit's counts at
  the confidence its bound used (α/J per checkpoint for sequential audits).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

RECORDED: list = []
_installed = False
REL_TOL = 1e-12              # AuditResult.violation's tolerance
REL_TOL_DELTA = 1e-9         # ε(δ) certificates are solved numerically and rounded up


def install() -> None:
    """Record every AuditResult built in this process (idempotent)."""
    global _installed
    if _installed:
        return
    from dpledger.audits.result import AuditResult
    original = AuditResult.__init__

    def recording_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        RECORDED.append(self)

    recording_init.__wrapped__ = original
    AuditResult.__init__ = recording_init
    # one-run audits (audits/one_run.py) are held to their certificates the same way
    from dpledger.audits.one_run import OneRunResult
    original_one = OneRunResult.__init__

    def recording_one(self, *args, **kwargs):
        original_one(self, *args, **kwargs)
        RECORDED.append(self)

    recording_one.__wrapped__ = original_one
    OneRunResult.__init__ = recording_one
    _installed = True


def _count_confidence(j: dict) -> float:
    seq = j.get("sequential")
    if isinstance(seq, dict) and seq.get("alpha_per_checkpoint") is not None:
        return 1.0 - float(seq["alpha_per_checkpoint"])
    return float(j["confidence"])


def excesses_of_json(j: dict, label: str = "") -> list[str]:
    """Why the audit.json object ``j`` exceeds its certificate (empty: it does not)."""
    from dpledger.audits.stats import bounds_from_counts
    out = []
    cert = j.get("certificate") or {}
    if j.get("violation") is True:
        out.append(f"{label}: lower bound above the certificate (ratio {j.get('ratio')}, "
                   f"currency {j.get('ratio_currency')})")
    mu_c = cert.get("gdp_mu")
    tr = j.get("tradeoff")
    if isinstance(tr, dict) and mu_c is not None and tr.get("mu_excluded", 0) > mu_c * (1 + REL_TOL):
        out.append(f"{label}: trade-off band excludes mu {tr['mu_excluded']} > certificate {mu_c}")
    if isinstance(tr, dict) and any((tr.get("excludes_certified") or {}).values()):
        out.append(f"{label}: trade-off band excludes a certified curve")
    mu_l = j.get("mu_lower")
    if mu_c is not None and mu_l is not None and mu_l > mu_c * (1 + REL_TOL):
        out.append(f"{label}: mu_lower {mu_l} > certificate mu {mu_c}")
    c = j.get("counts") or {}
    seq = j.get("sequential")
    # a betting audit's counts were collected under optional stopping: a Clopper–Pearson bound
    # from them is not a valid bound to hold against the certificate (its e-process bound is)
    betting = isinstance(seq, dict) and seq.get("kind") == "betting"
    if (not betting and all(k in c for k in ("n0", "k0", "n1", "k1"))
            and j.get("confidence") is not None):
        conf = _count_confidence(j)
        for d, e in (cert.get("epsilon_at_delta") or {}).items():
            if e is None or not math.isfinite(float(e)):
                continue
            low = bounds_from_counts(c["n0"], c["k0"], c["n1"], c["k1"], confidence=conf,
                                     delta=float(d))["epsilon_lower"]
            if low > float(e) * (1 + REL_TOL_DELTA):
                out.append(f"{label}: epsilon_lower {low} at delta {d} > certificate {e}")
    return out


def excesses(results) -> list[str]:
    """Why any of these AuditResults exceeds its certificate."""
    out = []
    for r in results:
        j = r.to_json()
        name = (j.get("policy") or {}).get("name") or j.get("mode", "audit")
        out += excesses_of_json(j, f"{name} (seed {j.get('seed', (j.get('mechanism') or {}).get('seed'))})")
    return out


def _audit_objects(obj):
    if isinstance(obj, dict):
        if "counts" in obj and "certificate" in obj and "epsilon_lower" in obj:
            yield obj
        else:
            for v in obj.values():
                yield from _audit_objects(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _audit_objects(v)


def excesses_in_files(folder) -> list[str]:
    """Why any audit.json-shaped object in a JSON file under ``folder`` exceeds its certificate."""
    out = []
    for p in sorted(Path(folder).rglob("*.json")):
        try:
            if p.stat().st_size > 50_000_000:
                continue
            data = json.loads(p.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        for j in _audit_objects(data):
            out += excesses_of_json(j, str(p.name))
    return out
