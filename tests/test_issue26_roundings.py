"""Roundings toward less privacy where releases merge and where DpEvents are exported
(issue 26 §3), checked in exact rational arithmetic.

Releases whose noise multipliers differ by an ulp can share a normal form (the rounded-up ε of a
Laplace, the rounded-up μ of a Gaussian); a merged composition must cost at least the exact sum of
its members, and an exported noise multiplier must be at most every member's exact one.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpledger.accounting.composition import Composition, costlier
from dpledger.accounting.realized import elementwise_max
from dpledger.accounting.releases import GaussianRelease, LaplaceRelease


def _ulp_neighbours(rng, n, lo=1e-3, hi=1e3):
    """n bases x and, for each, x and the floats up to 3 ulps above it, shuffled."""
    out = []
    for x in 10.0 ** rng.uniform(math.log10(lo), math.log10(hi), n):
        family = [float(x)]
        for _ in range(3):
            family.append(math.nextafter(family[-1], math.inf))
        rng.shuffle(family)
        out.append(family)
    return out


def _events(ev):
    from dp_accounting import dp_event as E
    if isinstance(ev, E.ComposedDpEvent):
        for sub in ev.events:
            yield from _events(sub)
    elif isinstance(ev, E.SelfComposedDpEvent):
        yield from _events(ev.event)
    else:
        yield ev


def _groups(comp, members):
    """Each item of ``comp`` with the members that share its normal form."""
    out = []
    for r, _ in comp.items:
        out.append((r, [m for m, _ in members if Composition.of([m]).items[0][0].normal_form()
                        == r.normal_form()]))
    return out


def _multiplier(r) -> Fraction:
    return Fraction(r.scale if isinstance(r, LaplaceRelease) else r.sigma) / Fraction(r.sensitivity)


def test_merged_gaussians_never_compose_below_the_exact_sum():
    rng = np.random.default_rng(2601)
    merged = 0
    for family in _ulp_neighbours(rng, 300):
        sens = float(rng.choice([1.0, 0.5, 3.0, 0.7]))
        counts = rng.integers(1, 50, len(family)).tolist()
        members = [(GaussianRelease(sigma=s, sensitivity=sens), c) for s, c in zip(family, counts,
                                                                                   strict=True)]
        comp = Composition.of(members)
        merged += len(comp.items) < len(members)
        exact = sum(c * (Fraction(sens) / Fraction(s)) ** 2 for s, c in zip(family, counts,
                                                                            strict=True))
        assert Fraction(comp.gdp_mu2()) >= exact
        assert Fraction(comp.gdp_mu_bound()) ** 2 >= exact
        assert Fraction(comp.zcdp_rho()) >= exact / 2
        # each kept release, and its exported noise multiplier, at most its group's smallest
        events = list(_events(comp.to_dp_event()))
        for (r, group), e in zip(_groups(comp, members), events, strict=True):
            smallest = min(_multiplier(m) for m in group)
            assert _multiplier(r) <= smallest
            assert Fraction(e.noise_multiplier) <= smallest
    assert merged > 100           # the case the issue names is exercised


def test_merged_laplaces_keep_the_smallest_noise_multiplier():
    rng = np.random.default_rng(2602)
    merged = 0
    for family in _ulp_neighbours(rng, 300):
        sens = float(rng.choice([1.0, 0.5, 3.0, 0.7]))
        members = [(LaplaceRelease(scale=s, sensitivity=sens), 2) for s in family]
        comp = Composition.of(members)
        merged += len(comp.items) < len(members)
        assert Fraction(comp.pure_epsilon()) >= sum(2 * Fraction(sens) / Fraction(s)
                                                    for s in family)
        events = list(_events(comp.to_dp_event()))
        for (r, group), e in zip(_groups(comp, members), events, strict=True):
            smallest = min(_multiplier(m) for m in group)
            assert _multiplier(r) <= smallest
            assert Fraction(e.noise_multiplier) <= smallest
    assert merged > 100


def _sharing_pair(cls, field):
    """Two releases of ``cls`` one ulp apart in ``field`` that share a normal form."""
    x = 0.9         # ulp(Δ/x) > ulp(x)/x²: neighbouring scales often share a rounded-up ε
    for _ in range(10_000):
        y = math.nextafter(x, 0.0)
        a, b = cls(**{field: x}), cls(**{field: y})
        if a.normal_form() == b.normal_form():
            return a, b
        x = math.nextafter(y, 0.0)
    raise AssertionError("no pair found")


@pytest.mark.parametrize("cls, field", [(GaussianRelease, "sigma"), (LaplaceRelease, "scale")])
def test_merge_order_does_not_matter(cls, field):
    """The costlier member (smaller multiplier) is kept whichever comes first."""
    a, b = _sharing_pair(cls, field)
    assert a != b
    assert Composition.of([a, b]) == Composition.of([b, a])
    assert costlier(a, b) == costlier(b, a) == b
    assert Composition.of([(a, 3), (b, 1)]).items == ((b, 4),)


def test_elementwise_max_keeps_the_costlier_member():
    a, b = _sharing_pair(LaplaceRelease, "scale")
    top = elementwise_max([Composition.of([(a, 5)]), Composition.of([(b, 2)])])
    assert top.items == ((b, 5),)
    top = elementwise_max([Composition.of([(b, 2)]), Composition.of([(a, 5)])])
    assert top.items == ((b, 5),)
