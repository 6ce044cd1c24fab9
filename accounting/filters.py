"""Per-reward privacy filters: budgets that stay valid under fully adaptive composition.

A *filter* (Rogers, Roth, Ullman & Vadhan 2016, "Privacy odometers and filters: pay-as-you-go
composition", NeurIPS 2016, arXiv 1605.08294) is a stopping rule: a release is admitted only
if, for every reward it touches, the reward's spend after it stays within the budget.  Each
release's parameters may depend on everything released before it (fully adaptive
composition), so a filter may only rely on theorems proven for that setting.  A budget is
enforced in exactly one *currency*, in which spends add.

Citations were checked against the papers' abstracts and introductions (the `search` corpora
hold no full texts); theorem numbers that could not be confirmed there are marked so.

``pure``  budget ``eps=E``: spend Σ ε_i ≤ E.  Rogers et al. 2016's basic-composition filter
          (theorem number unverified): with adaptively chosen (ε_i, δ_i), halting before
          Σ ε_i exceeds ε_g (and Σ δ_i exceeds δ_g) is a valid (ε_g, δ_g) filter; here every
          δ_i = 0, so the stopped interaction is E-DP.  Releases without a finite pure ε
          (Gaussian, discrete Gaussian, RDP/zCDP curves, non-private) are refused.
``gdp``   budget ``mu=M``: spend Σ μ_i² ≤ M².  Smith & Thakurta 2022 ("Fully adaptive
          composition for Gaussian differential privacy", arXiv 2210.17520; the paper's main
          result, theorem number unverified): GDP composes under a fully adaptive analyst with
          the nonadaptive parameters — the filter that sums the squared μ_i and compares them
          with M² yields M-GDP.  A pure-ε release counts with its randomized-response
          μ = −2Φ⁻¹(1/(1+e^ε)) (every ε-DP mechanism's trade-off curve lies above randomized
          response's, Kairouz–Oh–Viswanath 2015, and that curve lies above G_μ for this μ,
          Dong–Roth–Su; :func:`dpledger.accounting.gdp.mu_of_pure_epsilon`); the discrete
          Gaussian (no proven GDP), RDP/zCDP curves and non-private reads are refused.
``zcdp``  budget ``eps=E,delta=D``: spend Σ ρ_i ≤ ρ*.  Feldman & Zrnic 2021 ("Individual
          privacy accounting via a Rényi filter", NeurIPS 2021, arXiv 2008.11193; their
          Rényi-filter composition theorem, theorem number unverified): at a *fixed* order α,
          losses ε_i(α) chosen adaptively (each a function of the past outputs) and stopped
          before Σ ε_i(α) exceeds B give (α, B)-RDP — individually, per data point.  A
          ρ_i-zCDP release costs ε_i(α) ≤ αρ_i at every α; with B = αρ* the stopping rule
          Σ ρ_i ≤ ρ* is the same event at every α, so the theorem applied at each α separately
          makes the stopped interaction (α, αρ*)-RDP for all α > 1, i.e. ρ*-zCDP (Whitehouse,
          Ramdas, Rogers & Wu 2023, "Fully-adaptive composition in differential privacy",
          ICML 2023, arXiv 2203.05481, also derive a filter for approximate zCDP; section and
          theorem number unverified).  ρ* is the largest ρ (bisection, rounded down) whose
          RDP → (ε, δ) conversion (Balle et al. 2020, "Hypothesis testing interpretations and
          Rényi DP", Thm 21 of arXiv 1905.09982; Canonne–Kamath–Steinke 2020, Prop. 12 of
          arXiv 2004.00010 v4, the form dp-accounting implements;
          :func:`dpledger.accounting.rdp.rdp_to_epsilon`, itself an upper bound) is ≤ E at
          δ = D.  RDP curves known at listed orders only have no ρ and are refused.

Why an (ε, δ) budget is enforced in zCDP, not in (ε, δ) itself and never with PLD: an (ε, δ)
statement about a composition is a *conversion* taken after the fact (optimised over α, or read
off a numerically composed privacy-loss distribution), and such optimisations are not valid
when the parameters were chosen adaptively — the "natural" f-DP/PLD filter that composes
curves and stops when the target curve is crossed is invalid in general (Tran, Koskela, Räisä
& Honkela 2026, "f-Differential privacy filters: validity and approximate solutions", arXiv
2602.06756, characterise when).  zCDP is additive, has a filter theorem with no loss (above),
and every release kind of the vocabulary but the non-private read and the RDP curve known at
listed orders only has a ρ (Laplace and generic pure ε through their RDP curves), so a single
additive currency covers mixed Laplace/Gaussian ledgers; the conversion is fixed once, at
budget time, and never re-optimised on the realized sequence.

Per-reward (individual) budgets: a release that does not touch a reward has cost 0 for it,
so each reward's filter sees an adaptively chosen sequence with zeros — the setting of
Feldman & Zrnic's individual filters.  Refusing the whole release when one touched reward
would overflow (rather than dropping that reward from it) is stricter, hence also valid.

Costs are per-release upper bounds computed by :class:`~dpledger.accounting.composition.
Composition` (one formula in one place), multiplied by the count exactly and rounded up.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

from dpledger.accounting.composition import Composition
from dpledger.accounting.numerics import float_down, mul_up
from dpledger.accounting.releases import Release
from dpledger.errors import DpledgerError, check_delta, check_positive

CURRENCY_OF = {"pure": "ε", "gdp": "μ²", "zcdp": "ρ"}


class BudgetExceeded(DpledgerError):
    """A record was refused by the filter; nothing of it was stored."""

    def __init__(self, message: str, run: int, arm: int, index: int, spent: float,
                 cost: float, limit: float):
        super().__init__(message)
        self.run, self.arm, self.index = run, arm, index
        self.spent, self.cost, self.limit = spent, cost, limit


@dataclass(frozen=True)
class Budget:
    """A per-reward budget and the currency it is enforced in (see module docstring).

    ``limit`` is in the currency's additive unit: ε for ``pure``, μ² for ``gdp`` (μ² = M²
    rounded *down*, so the filter is never looser than M), ρ* for ``zcdp`` (rounded down).
    ``spec`` keeps what the user asked for (``{"eps": E}``, ``{"mu": M}``,
    ``{"eps": E, "delta": D}``)."""

    currency: str
    limit: float
    spec: tuple[tuple[str, float], ...]

    @classmethod
    def parse(cls, text: str) -> "Budget":
        """``eps=E`` | ``epsilon=E`` | ``mu=M`` | ``eps=E,delta=D``."""
        if not isinstance(text, str) or not text.strip():
            raise DpledgerError("a budget must look like eps=E, mu=M or eps=E,delta=D")
        params: dict[str, float] = {}
        for part in text.split(","):
            key, eq, value = part.strip().partition("=")
            key = {"epsilon": "eps"}.get(key.strip().lower(), key.strip().lower())
            if not eq or key not in ("eps", "mu", "delta") or key in params:
                raise DpledgerError(
                    f"cannot parse budget {text!r}; expected eps=E, mu=M or eps=E,delta=D")
            try:
                params[key] = float(value)
            except ValueError:
                raise DpledgerError(f"budget {key} must be a number, got {value.strip()!r}") from None
        return cls.from_params(params)

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> "Budget":
        keys = set(params)
        if keys == {"eps"}:
            e = check_positive("budget eps", params["eps"])
            return cls("pure", e, (("eps", e),))
        if keys == {"mu"}:
            m = check_positive("budget mu", params["mu"])
            return cls("gdp", float_down(Fraction(m) ** 2), (("mu", m),))
        if keys == {"eps", "delta"}:
            e = check_positive("budget eps", params["eps"])
            d = check_delta(params["delta"], "budget delta")
            return cls("zcdp", zcdp_budget(e, d), (("eps", e), ("delta", d)))
        raise DpledgerError("a budget is eps=E, mu=M or eps=E,delta=D; got "
                            + (", ".join(sorted(map(str, keys))) or "nothing"))

    def to_json(self) -> dict:
        return {"currency": self.currency, "limit": self.limit, **dict(self.spec)}

    @classmethod
    def from_json(cls, d: Mapping) -> "Budget":
        """Re-derives the limit from the user's parameters (never trusts a stored limit)."""
        b = cls.from_params({k: d[k] for k in ("eps", "mu", "delta") if k in d})
        if "limit" in d and (d.get("currency") != b.currency or float(d["limit"]) != b.limit):
            stored = ", ".join(f"{k}={d[k]!r}" for k in d if isinstance(d[k], (int, float, str)))
            raise DpledgerError(f"stored budget ({stored}) disagrees with its re-derivation "
                                f"({b.currency}, limit {b.limit!r})")
        return b

    def describe(self) -> str:
        spec = ",".join(f"{k}={v!r}" for k, v in self.spec)
        return f"{spec} (enforced as {self.currency} {CURRENCY_OF[self.currency]} ≤ {self.limit!r})"

    # -- costs --------------------------------------------------------------------------
    def unit_cost(self, release: Release) -> float:
        """The cost of one ``release`` in this budget's currency (an upper bound; ∞ when the
        release has no finite value in it, e.g. a Gaussian under an ε budget)."""
        return unit_cost(self.currency, release)

    def cost(self, release: Release, count: int) -> float:
        """count × unit cost, exact product rounded up."""
        c = self.unit_cost(release)
        return math.inf if math.isinf(c) else mul_up(int(count), c)


def unit_cost(currency: str, release: Release) -> float:
    """Per-release cost in ``currency`` from :class:`Composition`'s totals (∞ if none)."""
    comp = Composition.of([(release, 1)])
    if currency == "pure":
        return comp.pure_epsilon()
    if currency == "gdp":
        return comp.gdp_mu2()
    if currency == "zcdp":
        return comp.zcdp_rho()
    raise DpledgerError(f"unknown budget currency {currency!r}")


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε(δ) of ρ-zCDP by the improved conversion (CKS20 Prop. 12) on dpledger's order grid: an
    upper bound, at most 3.3e-4 relative above the value at the continuously optimised order
    (:func:`~dpledger.accounting.rdp.zcdp_to_epsilon`; ρ from 1e-6 to 100, δ from 1e-5 to
    1e-12), so a budget's ρ* is up to that much smaller than it could be — the safe side."""
    from dpledger.accounting import rdp as _rdp
    return _rdp.rdp_to_epsilon(_rdp.zcdp_rdp(rho), delta)[0]


def zcdp_budget(epsilon: float, delta: float) -> float:
    """The largest ρ (to 1e-12 relative, rounded down) with :func:`zcdp_epsilon` (ρ, δ) ≤ ε.

    :func:`zcdp_epsilon` is non-decreasing in ρ and an upper bound on the true conversion, so
    any ρ it admits is a sound zCDP budget for (ε, δ)."""
    lo, hi = 0.0, 1.0
    while zcdp_epsilon(hi, delta) <= epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e300:
            raise DpledgerError(f"budget eps={epsilon!r} is beyond the zCDP range")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi or (hi - lo) <= 1e-13 * hi:
            break
        if zcdp_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo <= 0.0:
        raise DpledgerError(f"budget eps={epsilon!r}, delta={delta!r} admits no zCDP spend")
    return lo
