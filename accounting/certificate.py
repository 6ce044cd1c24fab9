"""Certificates and theorems (docs/design.md#privacy-model).

A **certificate** is the worst case, over every trajectory, of the per-reward composition of the
releases a policy is coded to make: a finite list of candidate compositions, each naming the
witness position (arm, observation index, and the round when known) where it is attained and the
argument that makes it valid.  Accountants report the pointwise maximum over candidates.

A **theorem** is the bound a paper states: its source (paper, theorem number, statement), its
provenance label (docs/algorithms.md#provenance) and its value in the currencies it speaks (pure ε,
GDP μ).
Theorem values are computed by the functions in :mod:`dpledger.accounting.theorems`; nothing
here does arithmetic beyond converting a stated value to (ε, δ).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import gdp_epsilon
from dpledger.errors import DpledgerError

PROVENANCES = ("faithful", "faithful to public implementations", "reconstructed", "baseline")


@dataclass(frozen=True)
class Witness:
    """Where a candidate composition is attained: arm, 0-based observation index, round."""

    arm: int
    index: int
    round: int | None = None

    def to_json(self) -> dict:
        return {"arm": self.arm, "index": self.index, "round": self.round}

    @classmethod
    def from_json(cls, d: Mapping) -> "Witness":
        return cls(arm=int(d["arm"]), index=int(d["index"]),
                   round=None if d.get("round") is None else int(d["round"]))


@dataclass(frozen=True)
class Candidate:
    composition: Composition
    witness: Witness
    basis: str      # why the composition bounds every reward (the derivation, in words)

    def to_json(self) -> dict:
        return {"composition": self.composition.to_json(), "witness": self.witness.to_json(),
                "basis": self.basis}

    @classmethod
    def from_json(cls, d: Mapping) -> "Candidate":
        return cls(composition=Composition.from_json(d["composition"]),
                   witness=Witness.from_json(d["witness"]), basis=str(d["basis"]))


@dataclass(frozen=True)
class Certificate:
    """Candidate compositions; ``unbounded`` for policies that read rewards without noise.

    ``adaptive`` says whether the release parameters at a given position may depend on the history;
    when it is False, every reward's i-th release has parameters fixed by its position, so PLD
    values are valid (docs/design.md#privacy-model).
    """

    candidates: tuple[Candidate, ...] = ()
    unbounded: bool = False
    adaptive: bool = False
    note: str = ""

    def __post_init__(self) -> None:
        if not self.unbounded and not self.candidates:
            raise DpledgerError("a bounded certificate needs at least one candidate")

    @classmethod
    def unbounded_because(cls, note: str) -> "Certificate":
        return cls(candidates=(), unbounded=True, note=note)

    @property
    def compositions(self) -> list[Composition]:
        return [c.composition for c in self.candidates]

    def to_json(self) -> dict:
        return {"unbounded": self.unbounded, "adaptive": self.adaptive, "note": self.note,
                "candidates": [c.to_json() for c in self.candidates]}

    @classmethod
    def from_json(cls, d: Mapping) -> "Certificate":
        return cls(candidates=tuple(Candidate.from_json(c) for c in d.get("candidates", [])),
                   unbounded=bool(d.get("unbounded", False)), adaptive=bool(d.get("adaptive", False)),
                   note=str(d.get("note", "")))


@dataclass(frozen=True)
class Theorem:
    """A paper's privacy theorem and its value in the currencies it speaks."""

    paper: str
    theorem: str
    statement: str
    provenance: str
    pure_epsilon: float | None = None
    gdp_mu: float | None = None
    # an (ε, δ) statement (ε, δ): the theorem bounds ε only at δ and above (Wishart, and the
    # Gaussian tree of Shariff & Sheffet 2018 as their paper states it)
    approx_dp: tuple[float, float] | None = None
    unbounded: bool = False
    notes: tuple[str, ...] = field(default=())
    # Non-empty when the theorem is known to fall below the certificate for these parameters
    # (e.g. DP-TS-UCB with ⌈φ⌉ > 2φ, docs/algorithms.md#dp-ts-ucb): the cause, reported as a
    # finding about the theorem rather than a failure of the code.
    finding: str = ""
    # For a variant whose theorem is only its own certificate (a documented misreading, e.g.
    # DP-KLUCB's renoise-cumulative): the paper's theorem for the mechanism it claims to be,
    # checked too — the run then says whether the variant keeps the paper's promise.
    promise: "Theorem | None" = None

    def __post_init__(self) -> None:
        if self.provenance not in PROVENANCES:
            raise DpledgerError(f"provenance must be one of {PROVENANCES}, got {self.provenance!r}")
        if not self.unbounded and self.pure_epsilon is None and self.gdp_mu is None \
                and self.approx_dp is None:
            raise DpledgerError("a bounded theorem must state a pure ε, a GDP μ or an (ε, δ)")

    def epsilon_at_delta(self, delta: float) -> float:
        """The theorem's ε at δ: its pure ε, its GDP μ through the DRS duality, or its (ε, δ)
        statement's ε when δ is at least the statement's (the smallest of those it states; ∞
        when it states nothing at δ)."""
        if self.unbounded:
            return math.inf
        values = [math.inf]
        if self.approx_dp is not None and delta >= self.approx_dp[1]:
            values.append(self.approx_dp[0])
        if self.pure_epsilon is not None:
            values.append(self.pure_epsilon)
        if self.gdp_mu is not None:
            values.append(gdp_epsilon(self.gdp_mu, delta) if self.gdp_mu > 0 else 0.0)
        return min(values)

    def to_json(self) -> dict:
        out = {"paper": self.paper, "theorem": self.theorem, "statement": self.statement,
               "provenance": self.provenance, "notes": list(self.notes),
               "finding": self.finding}
        if self.approx_dp is not None:
            out["approx_dp"] = {"epsilon": self.approx_dp[0], "delta": self.approx_dp[1]}
        if self.promise is not None:
            out["promise"] = {"paper": self.promise.paper, "theorem": self.promise.theorem,
                              "pure_epsilon": self.promise.pure_epsilon,
                              "gdp_mu": self.promise.gdp_mu}
        return out
