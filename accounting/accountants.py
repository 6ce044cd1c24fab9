"""Accountants: separate interpreters of a :class:`Composition`.

Protocol (every accountant):

``supports(comp, adaptive=False) -> status``
    ``"ok"``, ``"unbounded"`` (no finite guarantee exists in this currency),
    ``"not_applicable"`` (dpledger knows no sound value) or ``"skipped:<reason>"``.
``epsilon(comp, delta, adaptive=False) -> float``
    an upper bound on the smallest ε with the composition (ε, δ)-DP.
``delta(comp, epsilon, adaptive=False) -> float``
    an upper bound on δ(ε).
``holds_under_adaptive_parameters``
    whether the value stays valid when release parameters were chosen from the public history (a
    fully adaptive composition: pure Σε, Rogers et al. 2016; GDP, Smith & Thakurta 2022; RDP/zCDP
    filters, Feldman & Zrnic 2021).  With ``adaptive=True`` the pure accountant falls back to basic
    composition and PLD declines unless every release is Gaussian (docs/design.md#privacy-model).

``best`` reports, per δ, the smallest valid value and names the accountant that gave it; it
never uses PLD below its floor δ = 1e-15 (:data:`dpledger.accounting.pld.MIN_DELTA`), nor where
PLD declines with a status (too wide, overflow), and then answers with the others.
"""
from __future__ import annotations

import math
from typing import Protocol

from dpledger.accounting import pld as _pld
from dpledger.accounting import rdp as _rdp
from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import gdp_delta, gdp_epsilon
from fractions import Fraction

from dpledger.accounting.numerics import (div_up, exp_up, float_down, libm_up, mul_up, sqrt_up,
                                          sum_up, up)
from dpledger.accounting.pure import PureComposition, zcdp_of_pure
from dpledger.accounting.releases import EXACT, NOT_APPLICABLE, UNBOUNDED, ApproxDpRelease
from dpledger.errors import DpledgerError, check_delta, check_nonnegative

OK = "ok"


class Accountant(Protocol):
    name: str
    holds_under_adaptive_parameters: bool

    def supports(self, comp: Composition, adaptive: bool = False) -> str: ...
    def epsilon(self, comp: Composition, delta: float, adaptive: bool = False) -> float: ...
    def delta(self, comp: Composition, epsilon: float, adaptive: bool = False) -> float: ...


def _status_from(comp: Composition, currency: str) -> str:
    s = comp.status(currency)
    if s == UNBOUNDED:
        return "unbounded"
    if s == NOT_APPLICABLE:
        return "not_applicable"
    return OK


def _require(acc: "Accountant", comp: Composition, adaptive: bool) -> None:
    status = acc.supports(comp, adaptive)
    if status != OK:
        raise DpledgerError(f"accountant {acc.name!r} does not support this composition: {status}")


class PureAccountant:
    """Pure ε.  δ = 0: Σε_i.  δ > 0: the optimal composition of the releases seen as generic
    ε_i-DP mechanisms (KOV 2015 / Murtagh–Vadhan 2016, :mod:`.pure`), never above Σε_i; under
    adaptive parameters only Σε_i (Rogers et al. 2016)."""

    name = "pure"
    holds_under_adaptive_parameters = True

    def supports(self, comp: Composition, adaptive: bool = False) -> str:
        return _status_from(comp, "pure")

    def epsilon(self, comp: Composition, delta: float, adaptive: bool = False) -> float:
        check_delta(delta)
        _require(self, comp, adaptive)
        if adaptive:
            return comp.pure_epsilon()
        return _memo(("pure", comp, delta), lambda: _pure_curve(comp).epsilon(delta))

    def delta(self, comp: Composition, epsilon: float, adaptive: bool = False) -> float:
        check_nonnegative("epsilon", epsilon)
        _require(self, comp, adaptive)
        if epsilon >= comp.pure_epsilon():
            return 0.0
        if adaptive:
            return 1.0
        return min(1.0, exp_up(_pure_curve(comp).log_delta(epsilon)))


_PURE_CACHE: dict[Composition, PureComposition] = {}
_VALUES: dict[tuple, float] = {}


def _memo(key: tuple, compute) -> float:
    """Results of the two expensive accountants, per (accountant, composition, δ)."""
    value = _VALUES.get(key)
    if value is None:
        if len(_VALUES) > 20_000:
            _VALUES.clear()
        value = _VALUES[key] = compute()
    return value


def _pure_curve(comp: Composition) -> PureComposition:
    curve = _PURE_CACHE.get(comp)
    if curve is None:
        if len(_PURE_CACHE) > 256:
            _PURE_CACHE.clear()
        curve = _PURE_CACHE[comp] = PureComposition(comp.pure_groups())
    return curve


class GdpAccountant:
    """GDP μ = √(Σ count·μ_i²) (exact for Gaussians; the randomized-response bound
    −2Φ⁻¹(1/(1+e^ε)) for pure-ε releases), converted by the Dong–Roth–Su duality."""

    name = "gdp"
    holds_under_adaptive_parameters = True

    def supports(self, comp: Composition, adaptive: bool = False) -> str:
        return _status_from(comp, "gdp")

    def mu(self, comp: Composition) -> float:
        return comp.gdp_mu_bound()

    def epsilon(self, comp: Composition, delta: float, adaptive: bool = False) -> float:
        check_delta(delta)
        _require(self, comp, adaptive)
        mu = self.mu(comp)
        if math.isinf(mu):
            return math.inf                    # μ beyond the float range (huge counts)
        return 0.0 if mu == 0 else gdp_epsilon(mu, delta)

    def delta(self, comp: Composition, epsilon: float, adaptive: bool = False) -> float:
        check_nonnegative("epsilon", epsilon)
        _require(self, comp, adaptive)
        mu = self.mu(comp)
        if math.isinf(mu):
            return 1.0
        return 0.0 if mu == 0 else gdp_delta(epsilon, mu)


class RdpAccountant:
    """RDP curves summed order by order, converted with the improved bound (Balle et al. 2020,
    Thm 21) over :data:`dpledger.accounting.rdp.ORDERS`."""

    name = "rdp"
    holds_under_adaptive_parameters = True

    def supports(self, comp: Composition, adaptive: bool = False) -> str:
        return _status_from(comp, "rdp")

    def epsilon(self, comp: Composition, delta: float, adaptive: bool = False) -> float:
        check_delta(delta)
        _require(self, comp, adaptive)
        if comp.is_empty():
            return 0.0
        orders = comp.rdp_orders()          # listed orders only, when a release has them
        eps = _rdp.rdp_to_epsilon(comp.rdp(orders), delta, orders)[0]
        if comp.linear_rdp():               # ρα at every α: optimise α continuously too
            eps = min(eps, _rdp.zcdp_to_epsilon(comp.zcdp_rho(), delta)[0])
        return eps

    def delta(self, comp: Composition, epsilon: float, adaptive: bool = False) -> float:
        check_nonnegative("epsilon", epsilon)
        _require(self, comp, adaptive)
        if comp.is_empty():
            return 0.0
        orders = comp.rdp_orders()
        log_delta = _rdp.rdp_to_log_delta(comp.rdp(orders), epsilon, orders)
        if comp.linear_rdp():
            log_delta = min(log_delta, _rdp.zcdp_to_log_delta(comp.zcdp_rho(), epsilon))
        return min(1.0, exp_up(log_delta))


class PldAccountant:
    """PLD: dp-accounting's pessimistic Connect-the-Dots discretisation, composed by
    :mod:`.pld` (tilted FFT convolutions with a round-off bound, Chernoff tail cuts), an upper
    bound for δ ≥ 1e-15; statuses ``skipped:<reason>`` where it declines."""

    name = "pld"
    holds_under_adaptive_parameters = False

    def supports(self, comp: Composition, adaptive: bool = False) -> str:
        status = _status_from(comp, "pld")
        if status != OK:
            return status
        reason = _pld.skip_reason(comp)
        if reason is not None:
            return f"skipped:{reason}"
        if adaptive:
            return "skipped:adaptive-parameters"
        return OK

    def supports_delta(self, delta: float) -> str:
        return OK if delta >= _pld.MIN_DELTA else _pld.MIN_DELTA_STATUS

    def epsilon(self, comp: Composition, delta: float, adaptive: bool = False) -> float:
        check_delta(delta)
        _require(self, comp, adaptive)
        if self.supports_delta(delta) != OK:
            raise DpledgerError(f"pld: {self.supports_delta(delta)}")
        return _memo(("pld", comp, delta), lambda: _pld.pld_epsilon(comp, delta))

    def delta(self, comp: Composition, epsilon: float, adaptive: bool = False) -> float:
        check_nonnegative("epsilon", epsilon)
        _require(self, comp, adaptive)
        return _pld.pld_delta(comp, epsilon)


def _pure_or_approx(comp: Composition) -> list[tuple[float, float, int]]:
    """(ε_i, δ_i, count) of every item when each is an (ε, δ) statement — an approximate-DP
    release, or a release with a finite pure ε (δ_i = 0) — else []."""
    out = []
    for r, c in comp.items:
        if isinstance(r, ApproxDpRelease):
            out.append((r.epsilon, r.delta, c))
        elif r.statuses["pure"] in (EXACT,):
            out.append((r.epsilon, 0.0, c))
        else:
            return []
    return out


class ApproxAccountant:
    """(ε, δ) statements composed by basic composition (Σε_i, Σδ_i; valid under adaptive
    parameters, Rogers, Roth, Ullman & Vadhan 2016) and, with parameters fixed in advance, by
    the heterogeneous advanced composition theorem (Kairouz, Oh & Viswanath 2015, Thm 3.5;
    Dwork, Rothblum & Vadhan 2010 for the homogeneous case): for every δ̃ ∈ (0, 1) the
    k-fold adaptive composition of (ε_i, δ_i)-DP mechanisms is (ε̃, δ̃ + Σδ_i)-DP with

        ε̃ = min{ Σε_i,
                 Σ ε_i·tanh(ε_i/2) + √(2·Σε_i²·ln(e + √(Σε_i²)/δ̃)),
                 Σ ε_i·tanh(ε_i/2) + √(2·Σε_i²·ln(1/δ̃)) }

    ((e^ε − 1)/(e^ε + 1) = tanh(ε/2)); here δ̃ = δ − Σδ_i, which the theorem's
    1 − (1 − δ̃)Π(1 − δ_i) ≤ δ̃ + Σδ_i allows.  It supports compositions of pure-ε releases and
    approximate-DP ones (:class:`~.releases.ApproxDpRelease`, the Wishart theorem's statement)
    only; at δ = Σδ_i only basic composition applies, and below it no ε is licensed (status
    ``unbounded`` there).  For pure releases
    alone it is never tighter than the pure accountant's optimal composition — it is here for
    what nothing else composes, and ``best`` names it when it wins.  Every step rounds up."""

    name = "approx"
    holds_under_adaptive_parameters = True      # basic composition only, under the flag

    def supports(self, comp: Composition, adaptive: bool = False) -> str:
        if comp.is_empty() or _pure_or_approx(comp):
            return OK
        if any(r.statuses["pure"] == UNBOUNDED and not isinstance(r, ApproxDpRelease)
               and r.statuses["gdp"] == UNBOUNDED for r in comp.releases):
            return "unbounded"                  # a read without noise
        return "not_applicable"                 # Gaussian / Rényi releases: other accountants


    def epsilon(self, comp: Composition, delta: float, adaptive: bool = False) -> float:
        check_delta(delta)
        _require(self, comp, adaptive)
        items = _pure_or_approx(comp)
        if not items:
            return 0.0
        floor = Fraction(0)
        for _, d, c in items:
            floor += c * Fraction(d)
        if Fraction(delta) < floor:
            return math.inf                     # below Σδ_i no composition theorem applies
        basic = sum_up((c, e) for e, _, c in items)      # (Σε_i, Σδ_i)
        slack = float_down(Fraction(delta) - floor)      # δ̃ ≤ δ − Σδ_i exactly
        if adaptive or not slack > 0:
            return basic
        mean = sum_up((c, zcdp_of_pure(e)) for e, _, c in items)    # Σ ε·tanh(ε/2), up
        sq = sum_up((c, mul_up(e, e)) for e, _, c in items)          # Σ ε², up
        if not (math.isfinite(mean) and math.isfinite(sq)):
            return basic                        # beyond the float range: Σε (maybe ∞)
        log1 = libm_up(math.log(div_up(1, slack)))
        adv1 = sum_up([(1, mean), (1, sqrt_up(mul_up(2, sq, log1)))])
        inner = up(math.e + div_up(sqrt_up(sq), slack), 2)
        adv2 = sum_up([(1, mean), (1, sqrt_up(mul_up(2, sq, libm_up(math.log(inner)))))])
        return min(basic, adv1, adv2)

    def delta(self, comp: Composition, epsilon: float, adaptive: bool = False) -> float:
        """The smallest δ the bounds above license at ``epsilon``: Σδ_i when ε ≥ Σε_i, else
        Σδ_i + δ̃ with δ̃ = e^{−(ε − A)²/(2B)} (A = Σε·tanh(ε/2), B = Σε²) for ε > A, rounded up."""
        check_nonnegative("epsilon", epsilon)
        _require(self, comp, adaptive)
        items = _pure_or_approx(comp)
        if not items:
            return 0.0
        floor = comp.delta_floor()
        if epsilon >= sum_up((c, e) for e, _, c in items):
            return min(1.0, floor)
        if adaptive:
            return 1.0
        mean = sum_up((c, zcdp_of_pure(e)) for e, _, c in items)
        sq = sum_up((c, mul_up(e, e)) for e, _, c in items)
        if not (epsilon > mean and math.isfinite(sq)):
            return 1.0
        gap = float_down(Fraction(epsilon) - Fraction(mean))      # ε − A, rounded down
        expo = float_down(Fraction(gap) * Fraction(gap) / (2 * Fraction(sq)))
        tilde = exp_up(-expo)
        return min(1.0, sum_up([(1, floor), (1, tilde)]))


ACCOUNTANTS: dict[str, Accountant] = {
    a.name: a for a in (PureAccountant(), GdpAccountant(), RdpAccountant(), PldAccountant(),
                        ApproxAccountant())}


class BestAccountant:
    """The smallest valid value over the other accountants, naming which gave it."""

    name = "best"
    holds_under_adaptive_parameters = True   # it filters by the flag it is given

    def supports(self, comp: Composition, adaptive: bool = False) -> str:
        statuses = [a.supports(comp, adaptive) for a in ACCOUNTANTS.values()]
        if OK in statuses:
            return OK
        return "unbounded" if "unbounded" in statuses else statuses[0]

    def epsilon_and_source(self, comp: Composition, delta: float,
                           adaptive: bool = False) -> tuple[float, str]:
        check_delta(delta)
        best, source = math.inf, "none"
        if delta < comp.delta_floor():          # approximate-DP releases: no ε below Σδ_i
            return math.inf, "unbounded"
        for acc in ACCOUNTANTS.values():
            if acc.supports(comp, adaptive) != OK:
                continue
            if acc.name == "pld" and delta < _pld.MIN_DELTA:
                continue
            try:
                value = acc.epsilon(comp, delta, adaptive)
            except _pld.PldSkipped:
                continue
            if value < best:
                best, source = value, acc.name
            elif source == "none":
                source = "overflow"        # supported but beyond the float range (so far)
        if source == "none":
            raise DpledgerError("no accountant supports this composition")
        return best, source

    def epsilon(self, comp: Composition, delta: float, adaptive: bool = False) -> float:
        return self.epsilon_and_source(comp, delta, adaptive)[0]

    def delta(self, comp: Composition, epsilon: float, adaptive: bool = False) -> float:
        check_nonnegative("epsilon", epsilon)
        values = []
        for acc in ACCOUNTANTS.values():    # pld last: skipped when it cannot matter
            if acc.supports(comp, adaptive) != OK:
                continue
            if acc.name == "pld" and values and min(values) < _pld.MIN_DELTA:
                continue    # its value would be discarded below (under its floor)
            try:
                value = acc.delta(comp, epsilon, adaptive)
            except _pld.PldSkipped:
                continue
            if acc.name == "pld" and value < _pld.MIN_DELTA:
                continue    # under PLD's floor its float error is not known to be small
            values.append(value)
        if not values:
            raise DpledgerError("no accountant supports this composition")
        return min(values)


ACCOUNTANTS_WITH_BEST: dict[str, Accountant] = dict(ACCOUNTANTS, best=BestAccountant())


def get_accountant(name: str) -> Accountant:
    try:
        return ACCOUNTANTS_WITH_BEST[name]
    except KeyError:
        raise DpledgerError(
            f"unknown accountant {name!r}; known: {', '.join(ACCOUNTANTS_WITH_BEST)}") from None
