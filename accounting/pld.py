"""Privacy-loss distributions through ``dp_accounting`` (0.6.0), under SPEC §3's rules.

* Always the ADD_OR_REMOVE_ONE relation with noise parameter = noise scale / sensitivity.
* Built directly from the ``pld`` module, composed in the composition's canonical order; generic
  pure-ε releases use ``from_privacy_parameters`` and an explicit ``self_compose(count)`` (never a
  randomized-response event with a count, whose count the accountant ignores).
* Skipped (status ``skipped:<reason>``) when every release is Gaussian (GDP is exact and PLD
  takes minutes at μ ≥ 30), when the loss is too wide to discretise finely enough, and below
  δ = 1e-10 (dp-accounting returns ∞ or optimistic values there).
* Discretisation interval h: min(1e-4, ε_min/4), coarsened to (loss width)/5e4 when needed,
  then rounded down to a power of two (so single-release PLDs are shared between
  compositions); if h exceeds ε_min the PLD would be uselessly loose and is skipped.  A
  coarser grid is still pessimistic (an upper bound), only looser.
* dp-accounting is imported lazily (its import alone takes about 1.7 s).
"""
from __future__ import annotations

import functools
import math

from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import (DiscreteGaussianRelease, DiscreteLaplaceRelease,
                                          GaussianRelease, LaplaceRelease, NonPrivateRelease,
                                          PureEpsilonRelease)

MIN_DELTA = 1e-10
MAX_GRID_POINTS = 5e4
# dp-accounting builds a discrete Gaussian's PLD by evaluating the loss at every support point
# within its truncation bound (~20σ points, in Python): 2e7 points and ~45 s for the exact
# sampler's σ ≈ 2^16; beyond this σ the PLD accountant declines (zCDP/RDP still apply)
MAX_DISCRETE_GAUSSIAN_SIGMA = 1e4


class PldSkipped(Exception):
    """The PLD accountant declines this composition; the message is the status reason."""


def _widths(comp: Composition) -> tuple[float, float]:
    """(total loss width, smallest per-release loss scale)."""
    width, smallest = 0.0, math.inf
    for r, c in comp.items:
        if isinstance(r, GaussianRelease):
            mu = r.mu * math.sqrt(c)
            width += mu * mu / 2.0 + 12.0 * mu
            smallest = min(smallest, mu)
        elif isinstance(r, DiscreteGaussianRelease):
            mu = r.sensitivity / r.sigma * math.sqrt(c)
            width += mu * mu / 2.0 + 12.0 * mu
            smallest = min(smallest, r.sensitivity / r.sigma)
        else:
            width += c * r.epsilon
            smallest = min(smallest, r.epsilon)
    return width, smallest


def skip_reason(comp: Composition) -> str | None:
    if comp.is_empty():
        return None
    if any(isinstance(r, NonPrivateRelease) for r in comp.releases):
        return "non-private"
    if comp.all_gaussian():
        return "all-gaussian"
    if any(isinstance(r, DiscreteGaussianRelease) and r.sigma > MAX_DISCRETE_GAUSSIAN_SIGMA
           for r in comp.releases):
        return "discrete-gaussian-sigma-above-1e4"
    width, smallest = _widths(comp)
    h = min(1e-4, smallest / 4.0)
    if width / h > MAX_GRID_POINTS:
        h = width / MAX_GRID_POINTS
        if h > smallest:
            return "too-wide"
    return None


def interval(comp: Composition) -> float:
    width, smallest = _widths(comp)
    h = min(1e-4, smallest / 4.0)
    if width / h > MAX_GRID_POINTS:
        h = width / MAX_GRID_POINTS
    return 2.0 ** math.floor(math.log2(h))


@functools.lru_cache(maxsize=512)
def _single(release, count: int, h: float):
    """PLD of ``count`` copies of one release on grid h (cached across compositions)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as P

    r, c = release, count
    if isinstance(r, GaussianRelease):
        # c identical Gaussians are exactly one Gaussian with σ/√c.
        return P.from_gaussian_mechanism(standard_deviation=r.sigma / r.sensitivity / math.sqrt(c),
                                         sensitivity=1.0, value_discretization_interval=h)
    if isinstance(r, LaplaceRelease):
        one = P.from_laplace_mechanism(parameter=r.scale, sensitivity=r.sensitivity,
                                       value_discretization_interval=h)
    elif isinstance(r, DiscreteLaplaceRelease):
        one = P.from_discrete_laplace_mechanism(parameter=1.0 / r.scale,
                                                sensitivity=int(r.sensitivity),
                                                value_discretization_interval=h)
    elif isinstance(r, DiscreteGaussianRelease):
        one = P.from_discrete_gaussian_mechanism(sigma=r.sigma, sensitivity=int(r.sensitivity),
                                                 value_discretization_interval=h)
    elif isinstance(r, PureEpsilonRelease):
        one = P.from_privacy_parameters(common.DifferentialPrivacyParameters(r.epsilon, 0.0),
                                        value_discretization_interval=h)
    else:  # pragma: no cover - skip_reason rejects the rest
        raise PldSkipped(f"unsupported-{r.kind}")
    return one.self_compose(c) if c > 1 else one


@functools.lru_cache(maxsize=256)
def build(comp: Composition):
    """The composed ``PrivacyLossDistribution`` of ``comp`` (cached per composition), composed in
    the composition's canonical order."""
    reason = skip_reason(comp)
    if reason is not None:
        raise PldSkipped(reason)
    h = interval(comp)
    total = None
    for r, c in comp.items:
        part = _single(r, c, h)
        total = part if total is None else total.compose(part)
    return total


def single_laplace_epsilon(comp: Composition, delta: float) -> float | None:
    """One Laplace release of ε₀: its exact curve δ(ε) = 1 − e^{(ε−ε₀)/2} on [0, ε₀] (notes
    §4.5), inverted as ε = ε₀ + 2·log(1 − δ), rounded up; None for any other composition."""
    if len(comp.items) != 1 or comp.items[0][1] != 1 or not isinstance(comp.items[0][0], LaplaceRelease):
        return None
    eps0 = comp.items[0][0].epsilon
    value = eps0 + 2.0 * math.log1p(-delta)
    return min(eps0, max(0.0, value + 1e-12 * abs(value) + 1e-15))


def pld_epsilon(comp: Composition, delta: float) -> float:
    if comp.is_empty():
        return 0.0
    if delta < MIN_DELTA:
        raise PldSkipped("delta-below-1e-10")
    exact = single_laplace_epsilon(comp, delta)
    if exact is not None:
        return exact
    return max(0.0, float(build(comp).get_epsilon_for_delta(delta)))


def pld_delta(comp: Composition, epsilon: float) -> float:
    if comp.is_empty():
        return 0.0
    return min(1.0, float(build(comp).get_delta_for_epsilon(epsilon)))
