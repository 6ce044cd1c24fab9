"""A per-reward composition: the multiset of releases that touched one reward.

Normal form (canonical, so equal compositions compare and serialise equal):
* releases with the same normal form are merged and their counts added;
* items are sorted by (kind, normal form);
* when more than ``MAX_GAUSSIAN_TERMS`` distinct Gaussian releases appear (a growing prefix read
  every round gives one per round), they collapse into the single Gaussian of
  μ = √(Σ count·μ_i²) — exact in every currency, since composed Gaussians are the Gaussian of
  that μ (Dong–Roth–Su 2022, Cor. 3.3).

Per-currency totals (docs/design.md#accounting table) live here, each computed once from the release
formulas: pure ε = Σ count·ε_i; GDP μ² = Σ count·μ_i²; zCDP ρ = Σ count·ρ_i; RDP curves add order by
order.  Every total is certified (docs/design.md#safe-rounding): the sum is formed exactly
(``Fraction`` of the per-release values, themselves upper bounds rounded up by :mod:`.releases`;
floats are dyadic rationals, so the exact sum stays cheap with thousands of distinct releases) and
rounded up once; μ = √μ² is rounded up so that μ² ≤ (reported μ)² holds exactly.  ``count`` is an
exact integer of any size, so each total costs O(number of distinct releases), whatever the counts;
a total beyond the float range is ∞ (reported with status ``skipped:overflow``, not as unbounded).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from dpledger.accounting import rdp as _rdp
from fractions import Fraction

from dpledger.accounting.gdp import mu_of_pure_epsilon
from dpledger.accounting.numerics import div_down, div_up, float_up, sqrt_up, sum_up
from dpledger.accounting.pure import zcdp_of_pure
from dpledger.accounting.releases import (
    BOUND, EXACT, NOT_APPLICABLE, UNBOUNDED, DiscreteGaussianRelease, DiscreteGaussianTotal,
    DiscreteLaplaceRelease, GaussianRelease, LaplaceRelease, NonPrivateRelease, PureEpsilonRelease,
    RdpRelease, Release, ZcdpRelease, release_from_json, release_to_json, ApproxDpRelease,
    SymmetricMatrixGaussianRelease, WishartRelease)
from dpledger.errors import DpledgerError, check_count

MAX_GAUSSIAN_TERMS = 64


def canonical(release: Release) -> Release:
    """The representative of a release's normal form, so that equal normal forms give equal
    (and equally serialised) compositions whatever order or parametrisation they came in:
    continuous Laplace and Gaussian releases (vector ones included) are rewritten as the scalar
    release with sensitivity 1 and noise scale = scale/sensitivity (the noise multiplier, which
    is what their privacy depends on), rounded down; a symmetric-matrix Gaussian as the scalar
    Gaussian of its exact μ² = Δ_F²/(2σ²) (σ rounded down); a Wishart release as the
    :class:`ApproxDpRelease` its theorem states."""
    if isinstance(release, LaplaceRelease) and (type(release) is not LaplaceRelease
                                                or release.sensitivity != 1.0):
        return LaplaceRelease(scale=div_down(release.scale, release.sensitivity), sensitivity=1.0)
    if isinstance(release, SymmetricMatrixGaussianRelease):
        return _gaussian_of_mu2(release.mu2_exact)
    if isinstance(release, GaussianRelease) and (type(release) is not GaussianRelease
                                                 or release.sensitivity != 1.0):
        return GaussianRelease(sigma=div_down(release.sigma, release.sensitivity), sensitivity=1.0)
    if isinstance(release, WishartRelease):
        return ApproxDpRelease(epsilon=release.epsilon, delta=release.delta)
    return release


def _gaussian_of_mu2(mu2) -> "GaussianRelease":
    """The Gaussian release of total μ² (a float or exact Fraction): σ = 1/√μ² rounded down,
    so its μ is at least the exact √μ² (a smaller σ never understates the cost)."""
    return GaussianRelease(sigma=div_down(1, sqrt_up(mu2)), sensitivity=1.0)


def costlier(a: Release, b: Release) -> Release:
    """Of two releases with one normal form, the one whose exact privacy cost is the larger.

    Normal forms hold rounded values (a continuous Laplace's ε = Δ/b rounded up, a Gaussian's
    μ = Δ/σ rounded up), so noise multipliers one ulp apart share a form; the member with the
    smaller multiplier (scale/Δ or σ/Δ; :func:`canonical` makes Δ = 1, rounding the multiplier
    down) costs more under the accountants that read the multiplier itself (PLD, the Gaussian's
    exact μ²).  Every other kind's normal form is its exact parameters."""
    if isinstance(a, LaplaceRelease) and isinstance(b, LaplaceRelease):
        return b if Fraction(b.scale) / Fraction(b.sensitivity) \
            < Fraction(a.scale) / Fraction(a.sensitivity) else a
    if isinstance(a, GaussianRelease) and isinstance(b, GaussianRelease):
        return b if b.mu2_exact > a.mu2_exact else a
    return a


def _smallest_safe(start: float, safe, up: bool) -> float:
    """The float nearest ``start`` on the costly side (above it when ``up``, below otherwise)
    for which ``safe`` holds; ``safe`` is monotone (false toward the cheap side, true toward
    the costly side).  An exponential search, then bisection."""
    if safe(start):
        return start
    sign = 1.0 if up else -1.0
    step = max(abs(start), 5e-324) * 2.0 ** -52
    bad, good = start, start + sign * step
    while not safe(good):
        bad, step = good, step * 2.0
        good = start + sign * step
    while True:
        mid = 0.5 * (bad + good)
        if mid in (bad, good):
            return good
        if safe(mid):
            good = mid
        else:
            bad = mid


def _snap(value: float, forward, target: float, safe, up: bool) -> float:
    """The release parameter an import should use for an exported ``target = forward(x)``.

    ``safe(c)`` is an exact check that the release of parameter ``c`` costs at least what the
    event states (issue 26 §3: the float preimage alone can sit below the exact value); ``up``
    says whether larger parameters cost more.  First the shortest decimal near ``value`` with
    ``forward(c) == target`` that is safe (the value a user most likely wrote, so exports round
    trip); otherwise the safe float nearest ``value`` on the costly side.
    """
    for digits in range(1, 18):
        c = float(f"{value:.{digits}g}")
        if c > 0 and forward(c) == target and safe(c):
            return c
    return _smallest_safe(value, safe, up)


def _decimal_exp_cmp(x: float, factor: float, rhs) -> int:
    """The sign of factor·e^x − rhs (floats and an exact Decimal), exactly: decimal arithmetic
    at growing precision until the difference clears the rounding error."""
    from decimal import Decimal, localcontext
    for prec in (60, 200, 1000):
        with localcontext() as ctx:
            ctx.prec = prec
            lhs = Decimal(factor) * Decimal(x).exp()
            diff = lhs - rhs
            if abs(diff) > abs(rhs) * Decimal(10) ** (8 - prec):
                return 1 if diff > 0 else -1
    return 0


def _two_minus(p: float):
    """2 − p as an exact Decimal (a float in (0, 2) has at most 1075 decimal digits)."""
    from decimal import Decimal, Inexact, localcontext
    with localcontext() as ctx:
        ctx.prec = 1200
        ctx.traps[Inexact] = True
        return Decimal(2) - Decimal(p)


def _rr_parameter(epsilon: float) -> float:
    """2/(1 + e^ε), the 2-bucket randomized-response noise parameter of ε, rounded down so the
    exported event is never more private than the release (exact check: p·(1 + e^ε) ≤ 2)."""
    e = math.exp(-epsilon)
    p = 2.0 * e / (1.0 + e)                  # = 2/(1 + e^ε), without overflow at large ε
    while p > 0 and _decimal_exp_cmp(epsilon, p, _two_minus(p)) > 0:
        p = math.nextafter(p, 0.0)          # p·e^ε > 2 − p: p above the exact value
    return p


def _rr_epsilon_safe(p: float):
    """The exact check that ε is at least the randomized-response event's ε = ln((2 − p)/p):
    p·e^ε ≥ 2 − p."""
    rhs = _two_minus(p)
    return lambda eps: _decimal_exp_cmp(eps, p, rhs) >= 0


def _sort_key(item: tuple[Release, int]) -> tuple:
    nf = item[0].normal_form()
    return (nf[0],) + tuple(tuple(map(float, x)) if isinstance(x, tuple) else (float(x),)
                            for x in nf[1:])


@dataclass(frozen=True)
class Composition:
    """Releases with counts, in normal form.  Build with :meth:`of`."""

    items: tuple[tuple[Release, int], ...] = ()

    def __post_init__(self) -> None:
        # built directly, a composition is checked as :meth:`of` checks its pairs (a count of
        # −1 gave ε = −1); normal form (merging, canonical releases) is :meth:`of`'s to give
        if not isinstance(self.items, tuple):
            raise DpledgerError("Composition items must be a tuple of (release, count) pairs; "
                                "build compositions with Composition.of")
        for pair in self.items:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise DpledgerError(f"Composition items must be (release, count) pairs, got "
                                    f"{type(pair).__name__}")
            if not hasattr(pair[0], "normal_form"):
                raise DpledgerError(f"not a release: {type(pair[0]).__name__}")
            check_count("count", pair[1])

    # -- construction -------------------------------------------------------------------
    @classmethod
    def of(cls, pairs: Iterable[tuple[Release, int]] | Iterable[Release]) -> "Composition":
        groups: dict[tuple, list] = {}
        for pair in pairs:
            if isinstance(pair, tuple):
                release, count = pair
            else:
                release, count = pair, 1
            if not hasattr(release, "normal_form"):
                raise DpledgerError(f"not a release: {release!r}")
            count = check_count("count", count)
            release = canonical(release)
            nf = release.normal_form()
            if nf in groups:
                # one normal form, parameters possibly an ulp apart: keep the costlier
                groups[nf][0] = costlier(groups[nf][0], release)
                groups[nf][1] += count
            else:
                groups[nf] = [release, count]
        items = [(r, c) for r, c in groups.values()]
        gauss = [(r, c) for r, c in items if isinstance(r, GaussianRelease)]
        if len(gauss) > MAX_GAUSSIAN_TERMS:
            mu2 = sum(c * Fraction(r.mu2) for r, c in gauss)     # dyadic: exact and fast
            items = [(r, c) for r, c in items if not isinstance(r, GaussianRelease)]
            items.append((_gaussian_of_mu2(mu2), 1))
        return cls(tuple(sorted(items, key=_sort_key)))

    @classmethod
    def gaussian_total(cls, mu2: float, others: Iterable[tuple[Release, int]] = ()) -> "Composition":
        """A composition whose Gaussian part is given by its total μ² (from a ledger)."""
        pairs = list(others)
        if mu2 > 0:
            pairs.append((_gaussian_of_mu2(mu2), 1))
        return cls.of(pairs)

    @classmethod
    def discrete_gaussian_total(cls, rho: float,
                                others: Iterable[tuple[Release, int]] = ()) -> "Composition":
        """A composition whose discrete-Gaussian part is given by its zCDP total ρ (a ledger's
        posterior reads under the exact sampler, :class:`DiscreteGaussianTotal`); totals among
        ``others`` merge into it (ρ added exactly, rounded up)."""
        pairs = list(others)
        rho = sum_up([(1, rho)] + [(c, r.rho) for r, c in pairs
                                   if isinstance(r, DiscreteGaussianTotal)])
        pairs = [(r, c) for r, c in pairs if not isinstance(r, DiscreteGaussianTotal)]
        if rho > 0:
            pairs.append((DiscreteGaussianTotal(rho=rho), 1))
        return cls.of(pairs)

    def __add__(self, other: "Composition") -> "Composition":
        return Composition.of(list(self.items) + list(other.items))

    @property
    def releases(self) -> tuple[Release, ...]:
        return tuple(r for r, _ in self.items)

    @property
    def total_count(self) -> int:
        return sum(c for _, c in self.items)

    def is_empty(self) -> bool:
        return not self.items

    def all_gaussian(self) -> bool:
        return bool(self.items) and all(isinstance(r, GaussianRelease) for r in self.releases)

    def status(self, currency: str) -> str:
        """Worst status over the releases: unbounded > not_applicable > bound > exact."""
        order = {EXACT: 0, BOUND: 1, NOT_APPLICABLE: 2, UNBOUNDED: 3}
        worst = EXACT
        for r in self.releases:
            s = r.statuses[currency]
            if order[s] > order[worst]:
                worst = s
        return worst

    # -- per-currency totals ------------------------------------------------------------
    def pure_epsilon(self) -> float:
        """Σ count·ε_i (basic composition; valid under fully adaptive choices, Rogers et al. 2016),
        exact then rounded up; ∞ when unbounded or beyond the float range."""
        if self.status("pure") in (UNBOUNDED, NOT_APPLICABLE):
            return math.inf
        return sum_up((c, r.epsilon) for r, c in self.items)

    def pure_groups(self) -> list[tuple[float, int]]:
        return [(r.epsilon, c) for r, c in self.items]

    def _gdp_mu2_exact(self) -> Fraction | float:
        """Σ count·μ_i² exactly over each release's rounded-up μ² (the value the ledger's
        per-reward keys sum too); ∞ when one overflows float64 (a finite σ can give
        μ² > 1.8e308)."""
        total = Fraction(0)
        for r, c in self.items:
            if isinstance(r, GaussianRelease):
                if math.isinf(r.mu2):
                    return math.inf
                total += c * Fraction(r.mu2)
            else:   # μ of randomized response, itself an upper bound; its square exact
                mu = mu_of_pure_epsilon(r.epsilon)
                total += c * Fraction(mu) * Fraction(mu)
        return total

    def gdp_mu2(self) -> float:
        """Σ count·μ_i², using the randomized-response bound for pure releases (GDP composition,
        DRS Thm 3.2), exact then rounded up.  ∞ when a release has no GDP guarantee."""
        if self.status("gdp") in (UNBOUNDED, NOT_APPLICABLE):
            return math.inf
        total = self._gdp_mu2_exact()
        return math.inf if total == math.inf else float_up(total)

    def delta_floor(self) -> float:
        """Σ count·δ_i over the approximate-DP releases (an (ε, δ) statement each: the Wishart
        theorem's), rounded up: no ε is licensed at a δ at or below it (0 without them)."""
        return sum_up((c, r.delta) for r, c in self.items if isinstance(r, ApproxDpRelease))

    def gdp_mu_bound(self) -> float:
        """√(Σ count·μ_i²) rounded up (the GDP accountant's μ, a bound for non-Gaussians)."""
        if self.status("gdp") in (UNBOUNDED, NOT_APPLICABLE):
            return math.inf
        total = self._gdp_mu2_exact()
        return math.inf if total == math.inf else sqrt_up(total)

    def gdp_mu(self) -> float | None:
        """Exact GDP μ when every release is Gaussian (rounded up); None otherwise
        (docs/design.md#accounting)."""
        if not self.items:
            return 0.0
        if self.status("gdp") != EXACT or not self.all_gaussian():
            return None
        return self.gdp_mu_bound()

    def zcdp_rho(self) -> float:
        """Σ count·ρ_i, exact then rounded up (Gaussian μ²/2 and discrete-Gaussian ρ rounded up
        per release; Laplace its own ρ, :func:`.rdp.laplace_zcdp`; other pure releases
        ε·tanh(ε/2), :func:`.pure.zcdp_of_pure`, all upper bounds)."""
        if self.status("zcdp") in (UNBOUNDED, NOT_APPLICABLE):
            return math.inf
        total = Fraction(0)
        for r, c in self.items:
            # the rounded-up per-release value (as everywhere); ∞ when it overflows float64
            if isinstance(r, GaussianRelease):
                if math.isinf(r.mu2):
                    return math.inf
                total += c * Fraction(r.mu2) / 2
            elif isinstance(r, (DiscreteGaussianRelease, DiscreteGaussianTotal, ZcdpRelease)):
                if math.isinf(r.rho):
                    return math.inf
                total += c * Fraction(r.rho)
            elif isinstance(r, LaplaceRelease):
                total += c * Fraction(_rdp.laplace_zcdp(r.epsilon))
            else:
                total += c * Fraction(zcdp_of_pure(r.epsilon))
        return float_up(total)

    def rdp_orders(self) -> np.ndarray:
        """The orders the RDP accountant uses: :data:`.rdp.ORDERS`, or — when a release is
        known only at listed orders (:class:`RdpRelease`) — the union of the listed orders,
        without those above any such release's largest listed order (unknown there)."""
        listed = [r for r in self.releases if isinstance(r, RdpRelease)]
        if not listed:
            return _rdp.ORDERS
        top = min(r.orders[-1] for r in listed)
        union = np.unique(np.concatenate([np.asarray(r.orders) for r in listed]))
        return union[union <= top]

    def linear_rdp(self) -> bool:
        """A zCDP release is present and every release has RDP ε(α) = ρα exactly or as its
        bound (Gaussian, discrete Gaussian, zCDP): the composition is ``zcdp_rho()``-zCDP and
        the RDP accountant also optimises α continuously (issue 15).  Compositions without a
        zCDP release keep the order grid alone (their reported ε is pinned to a grid order)."""
        return any(isinstance(r, ZcdpRelease) for r in self.releases) and all(
            isinstance(r, (GaussianRelease, DiscreteGaussianRelease, DiscreteGaussianTotal,
                           ZcdpRelease)) for r in self.releases)

    def rdp(self, orders: np.ndarray | None = None) -> np.ndarray:
        """Σ count·ε_i(α) at ``orders`` (default :meth:`rdp_orders`)."""
        if orders is None:
            orders = self.rdp_orders()
        total = np.zeros_like(orders)
        if self.status("rdp") == UNBOUNDED:
            return total + np.inf
        for r, c in self.items:
            c = float_up(c)     # exact for counts below 2^53; rounded up beyond
            if isinstance(r, GaussianRelease):
                curve = _rdp.gaussian_rdp(r.mu2, orders)
            elif isinstance(r, (DiscreteGaussianRelease, DiscreteGaussianTotal, ZcdpRelease)):
                curve = _rdp.zcdp_rdp(r.rho, orders)
            elif isinstance(r, RdpRelease):
                curve = r.at(orders) * _rdp.INFLATE   # the float sums' slack, as other curves
            elif isinstance(r, LaplaceRelease):
                curve = _rdp.laplace_rdp(r.epsilon, orders)
            else:   # generic pure and discrete Laplace: randomized-response bound
                curve = _rdp.pure_rdp(r.epsilon, orders)
            with np.errstate(over="ignore"):   # huge counts: ∞ at some orders, still a bound
                total = total + c * curve
        return total

    # -- serialisation ------------------------------------------------------------------
    def to_json(self) -> list[dict]:
        return [{"release": release_to_json(r), "count": int(c)} for r, c in self.items]

    @classmethod
    def from_json(cls, data: Sequence[Mapping]) -> "Composition":
        if not isinstance(data, (list, tuple)):
            raise DpledgerError(f"a composition must be a list of {{release, count}}, got {data!r}")
        pairs = []
        for item in data:
            if not isinstance(item, Mapping) or "release" not in item or "count" not in item:
                raise DpledgerError(f"composition entries need 'release' and 'count', got {item!r}")
            pairs.append((release_from_json(item["release"]), item["count"]))
        return cls.of(pairs)

    # -- dp_accounting interchange --------------------------------------------------------
    def to_dp_event(self):
        """A ``dp_accounting.DpEvent`` for this composition, under ADD_OR_REMOVE_ONE.

        noise_multiplier = noise scale / sensitivity (docs/design.md#calling-dp-accounting). Generic
        pure-ε releases become *explicit* copies of 2-bucket randomized response (noise_parameter
        2/(1+e^ε)): dp-accounting's PLD ignores the count of a self-composed RR event, and its RR
        accounting needs the REPLACE_ONE relation.
        """
        from dp_accounting import dp_event as E

        events = []
        for r, c in self.items:
            # every exported parameter is rounded toward less privacy (never a more private
            # event than the release): noise multipliers down, the discrete Laplace's 1/t up
            if isinstance(r, LaplaceRelease):
                ev = E.LaplaceDpEvent(noise_multiplier=div_down(r.scale, r.sensitivity))
            elif isinstance(r, GaussianRelease):
                ev = E.GaussianDpEvent(noise_multiplier=div_down(r.sigma, r.sensitivity))
            elif isinstance(r, DiscreteLaplaceRelease):
                ev = E.DiscreteLaplaceDpEvent(noise_parameter=div_up(1, r.scale),
                                              sensitivity=int(r.sensitivity))
            elif isinstance(r, PureEpsilonRelease):
                if c > 10_000:
                    raise DpledgerError("refusing to export more than 10000 explicit RR events")
                rr = E.RandomizedResponseDpEvent(noise_parameter=_rr_parameter(r.epsilon),
                                                 num_buckets=2)
                events.extend([rr] * c)
                continue
            elif isinstance(r, NonPrivateRelease):
                ev = E.NonPrivateDpEvent()
            elif isinstance(r, ZcdpRelease):
                ev = E.ZCDpEvent(rho=r.rho, xi=0.0)
            elif isinstance(r, RdpRelease):
                raise DpledgerError(
                    "dp-accounting 0.6.0 has no event for an RDP curve given at listed orders; "
                    "this composition cannot be exported as a DpEvent")
            elif isinstance(r, ApproxDpRelease):
                raise DpledgerError(
                    "dp-accounting 0.6.0 has no event for an (ε, δ) statement (a Wishart "
                    "release's theorem); this composition cannot be exported as a DpEvent")
            else:
                ev = E.UnsupportedDpEvent()
            events.append(ev if c == 1 else E.SelfComposedDpEvent(ev, c))
        if len(events) == 1:
            return events[0]
        return E.ComposedDpEvent(events)

    @classmethod
    def from_dp_event(cls, event) -> "Composition":
        """Inverse of :meth:`to_dp_event` (events it does not know raise)."""
        from dp_accounting import dp_event as E

        pairs: list[tuple[Release, int]] = []

        def walk(ev, mult: int) -> None:
            if isinstance(ev, E.ComposedDpEvent):
                for sub in ev.events:
                    walk(sub, mult)
            elif isinstance(ev, E.SelfComposedDpEvent):
                walk(ev.event, mult * int(ev.count))
            elif isinstance(ev, E.LaplaceDpEvent):
                pairs.append((LaplaceRelease(scale=ev.noise_multiplier, sensitivity=1.0), mult))
            elif isinstance(ev, E.GaussianDpEvent):
                pairs.append((GaussianRelease(sigma=ev.noise_multiplier, sensitivity=1.0), mult))
            elif isinstance(ev, E.DiscreteLaplaceDpEvent):
                a, sens = ev.noise_parameter, int(ev.sensitivity)
                # the release's ε = Δ/t rounded up must be at least the event's Δ·a, exactly
                t = _snap(1.0 / a, lambda x: div_up(1, x), a,
                          lambda x: Fraction(div_up(sens, x)) >= sens * Fraction(a), up=False)
                pairs.append((DiscreteLaplaceRelease(scale=t, sensitivity=sens), mult))
            elif isinstance(ev, E.RandomizedResponseDpEvent) and ev.num_buckets == 2:
                p = ev.noise_parameter
                eps = _snap(math.log((2.0 - p) / p), _rr_parameter, p, _rr_epsilon_safe(p),
                            up=True)
                pairs.append((PureEpsilonRelease(epsilon=eps), mult))
            elif isinstance(ev, E.NonPrivateDpEvent):
                pairs.append((NonPrivateRelease(), mult))
            elif isinstance(ev, E.ZCDpEvent):
                if ev.xi != 0:
                    raise DpledgerError(f"cannot import ZCDpEvent with xi = {ev.xi!r} != 0")
                pairs.append((ZcdpRelease(rho=ev.rho), mult))
            elif isinstance(ev, E.NoOpDpEvent):
                pass
            else:
                raise DpledgerError(f"cannot import dp_accounting event {type(ev).__name__}")

        walk(event, 1)
        return cls.of(pairs)


def maximal_compositions(compositions: Sequence[Composition]) -> list[Composition]:
    """The distinct compositions not dominated by another, in a canonical order.

    B is dominated by A when A holds every release of B at least as often (Gaussian parts
    compared by total μ²): every accountant's bound for A is then at least B's (each composes
    monotonically; a PLD value for A is an upper bound on A's exact curve, which is at least
    B's), so the pointwise maximum over the remaining compositions bounds every reward.
    """
    import json

    distinct = sorted(set(compositions), key=lambda c: json.dumps(c.to_json()))
    if len(distinct) <= 1:
        return distinct
    keys: dict[tuple, int] = {}
    rows = []
    for c in distinct:
        feat: dict[int, float] = {}
        mu2 = 0.0
        for r, n in c.items:
            if isinstance(r, GaussianRelease):
                mu2 += n * r.mu2
            else:
                feat[keys.setdefault(r.normal_form(), len(keys))] = float(n)
        rows.append((feat, mu2))
    m = np.zeros((len(distinct), len(keys) + 1))
    for i, (feat, mu2) in enumerate(rows):
        for k, v in feat.items():
            m[i, k] = v
        m[i, -1] = mu2
    keep = []
    for i in range(len(distinct)):
        ge = np.all(m >= m[i], axis=1)
        gt = np.any(m > m[i], axis=1)
        if not np.any(ge & gt):
            keep.append(distinct[i])
    return keep
