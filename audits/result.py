"""The audit result record and ``audit.json`` (docs/design.md#audits,
docs/design.md#interfaces-and-json).

Keys, in this order: ``epsilon_lower``, ``mu_lower`` (or null), ``confidence``, ``trials``,
``counts`` {n0, k0, n1, k1, direction, threshold, selection_fraction, …}, ``certificate``
{pure_epsilon, gdp_mu, epsilon_at_delta, …}, ``ratio``, ``pair`` {round, from, to, …}, then
``violation``, ``delta``, labels and provenance (mode, score, policy, horizon, stop, seed).

Currency.  A certificate whose worst composition is all-Gaussian (``gdp_mu`` not null) is audited in
μ: the selection maximises μ_lower, ``ratio`` = μ_lower / μ, and ``epsilon_lower`` is ε(δ = 1e-5) of
μ_lower-GDP (Dong–Roth–Su Cor. 2.13), labelled "assumes GDP shape": it is a lower bound on ε only if
the trade-off curve is Gaussian-shaped (Dong, Roth & Su 2022); ``epsilon_lower_direct`` is the KOV
bound at the same δ, valid without that assumption. Otherwise δ = 0: ``epsilon_lower`` is a pure-ε
lower bound and ``ratio`` = ε_lower / ε — except for a certificate that is only an (ε, δ) statement
(a Wishart release; its summary carries ``approx`` = {epsilon, delta}): there ``epsilon_lower`` is
the KOV bound at that δ and ``ratio`` = ε_lower / ε, ``delta`` in audit.json says which δ.
``mu_lower`` is reported in both cases — a valid lower bound on μ for any mechanism. Every number is
finite or null with a sibling ``*_status`` (docs/design.md#interfaces-and-json); no wall times are
stored, so an audit with the same inputs writes the same bytes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpledger.audits.stats import ScoreAudit

GDP_DELTA = 1e-5
GDP_LABEL = "assumes GDP shape"
PURE_LABEL = "pure epsilon (delta = 0)"


def certificate_summary(certificate, deltas=None) -> dict:
    """{pure_epsilon, gdp_mu, epsilon_at_delta, statuses, witness candidate} of a policy's
    :class:`~dpledger.accounting.certificate.Certificate` (the pointwise maximum over its
    candidates, as every accountant reports it)."""
    from dpledger.accounting.schema import DEFAULT_DELTAS, privacy_block
    from dpledger.audits.pairs import witness
    deltas = DEFAULT_DELTAS if deltas is None else deltas
    block = privacy_block(certificate.compositions, deltas, adaptive=certificate.adaptive,
                          unbounded=certificate.unbounded)
    out = _summary_of_block(block)
    _, _, cand, _ = witness(certificate)
    if cand is not None:
        comp = cand.composition
        pe = comp.pure_epsilon()
        mu = comp.gdp_mu()
        out["witness_candidate"] = {
            "witness": cand.witness.to_json(),
            "pure_epsilon": pe if math.isfinite(pe) else None,
            "gdp_mu": mu}
    return out


def composition_summary(composition, deltas=None) -> dict:
    """The same summary for one composition (a mechanism's release)."""
    from dpledger.accounting.schema import DEFAULT_DELTAS, privacy_block
    block = privacy_block([composition], DEFAULT_DELTAS if deltas is None else deltas)
    return _summary_of_block(block)


def _summary_of_block(block: dict) -> dict:
    return {"pure_epsilon": block["pure_epsilon"], "pure_epsilon_status": block["pure_epsilon_status"],
            "gdp_mu": block["gdp_mu"], "gdp_mu_status": block["gdp_mu_status"],
            "epsilon_at_delta": block["epsilon_at_delta"]}


APPROX_LABEL = "epsilon at the certificate's delta (KOV bound)"


def currency_of(cert: dict) -> str:
    """"mu" for Gaussian (GDP) certificates — a finite μ and no finite pure ε — else "epsilon"
    (pure ε, or ε at δ for a certificate that is an (ε, δ) statement: its ``approx`` entry)."""
    if cert.get("approx") is not None:
        return "epsilon"
    return "mu" if cert.get("gdp_mu") is not None and cert.get("pure_epsilon") is None else "epsilon"


def gdp_epsilon_lower(mu_lower: float, delta: float = GDP_DELTA) -> float:
    """ε at δ of μ_lower-GDP (DRS Cor. 2.13), nudged down by 1e-9 relative: the accounting
    solver rounds ε up (it certifies upper bounds), a lower bound must not."""
    if not mu_lower > 0:
        return 0.0
    from dpledger.accounting.gdp import gdp_epsilon
    return gdp_epsilon(mu_lower, delta) * (1.0 - 1e-9)


@dataclass
class AuditResult:
    score_audit: ScoreAudit
    certificate: dict
    pair: dict
    trials: int
    mode: str                       # "whitebox" or "blackbox" (policies), "mechanism"
    extra: dict = field(default_factory=dict)
    plot_data: dict | None = field(default=None, repr=False)   # in memory only (``--plot``)

    @property
    def currency(self) -> str:
        return currency_of(self.certificate)

    @property
    def mu_lower(self) -> float:
        return self.score_audit.mu_lower

    @property
    def epsilon_lower(self) -> float:
        if self.currency == "mu":
            return gdp_epsilon_lower(self.score_audit.mu_lower, GDP_DELTA)
        return self.score_audit.epsilon_lower

    @property
    def confidence(self) -> float:
        return self.score_audit.confidence

    @property
    def certified(self) -> float | None:
        """The certificate's value in the audited currency (None when unbounded)."""
        if self.certificate.get("approx") is not None:
            return self.certificate["approx"]["epsilon"]
        key = "gdp_mu" if self.currency == "mu" else "pure_epsilon"
        return self.certificate.get(key)

    @property
    def lower(self) -> float:
        """The lower bound in the audited currency."""
        return self.mu_lower if self.currency == "mu" else self.epsilon_lower

    @property
    def ratio(self) -> float | None:
        c = self.certified
        if c is None:
            return None
        if c == 0:
            return None if self.lower == 0 else math.inf
        return self.lower / c

    @property
    def violation(self) -> bool | None:
        """True when the lower bound exceeds the certificate: a bug, in the code or the theorem."""
        c = self.certified
        return None if c is None else bool(self.lower > c * (1 + 1e-12))

    def to_json(self) -> dict:
        sa = self.score_audit
        out: dict[str, Any] = {}
        out["epsilon_lower"] = float(self.epsilon_lower)
        approx = self.certificate.get("approx")
        out["epsilon_lower_label"] = (GDP_LABEL if self.currency == "mu" else
                                      APPROX_LABEL if approx is not None else PURE_LABEL)
        out["mu_lower"] = float(self.mu_lower)
        out["mu_lower_status"] = "ok"
        out["confidence"] = float(sa.confidence)
        out["trials"] = int(self.trials)
        out["counts"] = sa.counts_json()
        out["certificate"] = self.certificate
        ratio = self.ratio
        if ratio is None:
            out["ratio"], out["ratio_status"] = None, ("unbounded" if self.certified is None
                                                       else "not_applicable")
        elif math.isinf(ratio):
            out["ratio"], out["ratio_status"] = None, "unbounded"
        else:
            out["ratio"], out["ratio_status"] = float(ratio), "ok"
        out["ratio_currency"] = self.currency
        out["pair"] = self.pair
        out["violation"] = self.violation
        out["delta"] = (GDP_DELTA if self.currency == "mu" else
                        float(approx["delta"]) if approx is not None else 0.0)
        if self.currency == "mu":
            if (self.extra.get("sequential") or {}).get("kind") == "betting":
                # counts collected under optional stopping: a Clopper–Pearson bound from them
                # is not valid at the stopping time (the e-process's bound is)
                out["epsilon_lower_direct"] = None
                out["epsilon_lower_direct_status"] = "not_applicable"
            else:
                out["epsilon_lower_direct"] = float(_direct(sa, GDP_DELTA))
        out["mode"] = self.mode
        out.update(self.extra)
        return out


def _direct(sa: ScoreAudit, delta: float) -> float:
    from dpledger.audits.stats import bounds_from_counts
    return bounds_from_counts(sa.n0, sa.k0, sa.n1, sa.k1, confidence=sa.confidence,
                              delta=delta)["epsilon_lower"]


def plot_data_fixed(s0, s1, sa, trials: int, currency: str) -> dict:
    """In-memory data for ``--plot`` of a fixed-n audit (:mod:`dpledger.audits.plots`)."""
    from dpledger.audits.plots import prefix_path
    from dpledger.audits.stats import split_sizes
    d0 = s0 if isinstance(s0, dict) else {"value": s0}
    d1 = s1 if isinstance(s1, dict) else {"value": s1}
    m, _ = split_sizes(trials, sa.selection_fraction)
    c0 = np.asarray(d0[sa.event.score], float)[m:]
    c1 = np.asarray(d1[sa.event.score], float)[m:]
    path = prefix_path(c0, c1, sa.event, confidence=sa.confidence, delta=sa.delta,
                       currency=currency)
    for p in path:
        p["trials"] = p["count_trials"] + m
    return {"s0": c0, "s1": c1, "path": path, "alpha_divisor": 1,
            "path_kind": "fixed-n bound on prefixes, not a sequential bound"}


def plot_data_sequential(seq) -> dict:
    c0, c1 = seq.first_counts
    return {"s0": c0, "s1": c1, "path": seq.path, "alpha_divisor": len(seq.checkpoints),
            "path_kind": "sequential checkpoints, jointly valid"}


__all__ = ["AuditResult", "certificate_summary", "composition_summary", "currency_of",
           "gdp_epsilon_lower", "GDP_DELTA", "GDP_LABEL"]
