"""Two noise samplers behind one interface (docs/design.md#mechanisms-and-samplers).

* :class:`FloatSampler` — numpy ``Generator`` floating-point Laplace/Gaussian, for simulation.
  Fast, and vulnerable to the floating-point attack of Mironov (2012): the set of doubles it can
  output is porous and depends on the input (``tests/test_mechanisms_fp_leak.py``).
* :class:`ExactSampler` — for deployment: statistics live on the lattice 2^-k·ℤ, held as
  integers in lattice units; noise is the exact discrete Laplace / discrete Gaussian of
  Canonne–Kamath–Steinke (2020) (:mod:`dpledger.mechanisms.exact`).  Rewards are rounded to
  the lattice *before* summing by the deterministic, monotone, translation-equivariant rule
  ``m = ⌊x·2^k + ½⌋``, so one reward in [0, 1] moves a lattice sum by at most 2^k units and a
  statistic of real sensitivity Δ moves by at most ⌈Δ·2^k⌉ units; the rounding bias is
  returned with every encoding.  Its releases are recorded as
  ``DiscreteLaplaceRelease``/``DiscreteGaussianRelease`` in lattice units, never with the
  continuous formulas.

The protocol works in *sampler units*: a float for :class:`FloatSampler`, an integer number of
lattice steps for :class:`ExactSampler`.  ``encode`` maps reward-unit values to sampler units,
``noise`` draws for a release, ``decode`` maps back.  Mechanisms never compute privacy totals:
they build a release from (sensitivity, ε or σ) and hand it to the ledger.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol, Sequence, Union, runtime_checkable

import numpy as np

from dpledger.accounting.releases import (DiscreteGaussianRelease, DiscreteLaplaceRelease,
                                          GaussianRelease, LaplaceRelease, Release)
from dpledger.errors import DpledgerError, check_count, check_positive
from dpledger.mechanisms import exact as _exact

Number = Union[int, float]
DEFAULT_LATTICE_BITS = 20
MAX_LATTICE_BITS = 50          # x·2^k + ½ must stay exact in float64 for x ∈ [0, 1]


@runtime_checkable
class Sampler(Protocol):
    name: str

    def laplace_release(self, sensitivity: float, epsilon: float | None = None, *,
                        scale: float | None = None) -> Release:
        """The Laplace-family release for a statistic of real sensitivity Δ, given ε (scale
        Δ/ε) or the noise scale b in reward units."""

    def gaussian_release(self, sensitivity: float, sigma: float) -> Release:
        """The Gaussian-family release with noise std ``sigma`` (reward units)."""

    def encode(self, values: Sequence[float] | np.ndarray | float) -> tuple[Number, float]:
        """(Σ values in sampler units, rounding bias in reward units)."""

    def noise(self, release: Release) -> Number:
        """One draw of the release's noise, in sampler units."""

    def decode(self, value: Number) -> float:
        """Sampler units → reward units."""


class FloatSampler:
    """Floating-point Laplace and Gaussian from a seeded ``numpy.random.Generator``.

    ``Generator.laplace`` is the inverse-CDF textbook sampler (``loc ± b·log(2U)``) — the one
    Mironov (2012) attacks; use :class:`ExactSampler` where that matters.
    """

    name = "float"

    def __init__(self, rng: np.random.Generator):
        if not isinstance(rng, np.random.Generator):
            raise DpledgerError(f"FloatSampler needs a numpy.random.Generator, got {type(rng).__name__}")
        self.rng = rng

    def laplace_release(self, sensitivity: float, epsilon: float | None = None, *,
                        scale: float | None = None) -> LaplaceRelease:
        d = check_positive("sensitivity", sensitivity)
        return LaplaceRelease(scale=_scale_of(d, epsilon, scale), sensitivity=d)

    def gaussian_release(self, sensitivity: float, sigma: float) -> GaussianRelease:
        return GaussianRelease(sigma=check_positive("sigma", sigma),
                               sensitivity=check_positive("sensitivity", sensitivity))

    def encode(self, values) -> tuple[float, float]:
        return math.fsum(np.atleast_1d(np.asarray(values, dtype=np.float64)).tolist()), 0.0

    def noise(self, release: Release) -> float:
        if isinstance(release, LaplaceRelease):
            return float(self.rng.laplace(0.0, release.scale))
        if isinstance(release, GaussianRelease):
            return float(self.rng.normal(0.0, release.sigma))
        raise DpledgerError(f"FloatSampler draws Laplace or Gaussian releases, got {release!r}")

    def laplace(self, scale: float, size: int | None = None):
        """Raw draws (benchmarks, statistical tests)."""
        return self.rng.laplace(0.0, check_positive("scale", scale), size)

    def gaussian(self, sigma: float, size: int | None = None):
        return self.rng.normal(0.0, check_positive("sigma", sigma), size)

    def decode(self, value: Number) -> float:
        return float(value)


class ExactSampler:
    """Exact discrete Laplace / discrete Gaussian on the lattice 2^-k·ℤ (CKS20).

    ``randomness``: a seeded ``numpy.random.Generator`` (tests), a
    :class:`~dpledger.mechanisms.exact.BitSource`, or ``"secrets"`` (deployment).  All sampling
    arithmetic is on Python ints and Fractions; scales given as floats are converted exactly,
    so the recorded release describes the law actually sampled.
    """

    name = "exact"

    def __init__(self, randomness, lattice_bits: int = DEFAULT_LATTICE_BITS):
        self.bits = _exact.as_bits(randomness)
        k = check_count("lattice_bits", lattice_bits, minimum=0)
        if k > MAX_LATTICE_BITS:
            raise DpledgerError(f"lattice_bits must be <= {MAX_LATTICE_BITS}, got {k}")
        self.lattice_bits = k
        self.unit = 1 << k                      # lattice steps per reward unit

    # -- lattice ----------------------------------------------------------------------------
    def lattice_sensitivity(self, sensitivity: float) -> int:
        """⌈Δ·2^k⌉: the most a monotone, translation-equivariant rounding of a statistic of
        real sensitivity Δ can move, in lattice units."""
        d = _exact.to_rational("sensitivity", check_positive("sensitivity", sensitivity))
        return math.ceil(d * self.unit)

    def round_to_lattice(self, values) -> np.ndarray:
        """``⌊x·2^k + ½⌋`` as int64 (x·2^k is exact in float64: a power-of-two scaling)."""
        x = np.asarray(values, dtype=np.float64)
        if x.size and (not np.all(np.isfinite(x)) or np.max(np.abs(x)) >= 2.0 ** (52 - self.lattice_bits)):
            raise DpledgerError("values to round to the lattice must be finite and below "
                                f"2^{52 - self.lattice_bits} in magnitude")
        return np.floor(x * float(self.unit) + 0.5).astype(np.int64)

    def encode(self, values) -> tuple[int, float]:
        x = np.atleast_1d(np.asarray(values, dtype=np.float64))
        m = self.round_to_lattice(x)
        total = sum(int(v) for v in m.tolist())          # Python ints: no overflow
        bias = math.fsum((m.astype(np.float64) / self.unit - x).tolist())
        return total, bias

    def decode(self, value: Number) -> float:
        return float(Fraction(int(value), self.unit))

    # -- releases and noise --------------------------------------------------------------------
    def laplace_release(self, sensitivity: float, epsilon: float | None = None, *,
                        scale: float | None = None) -> DiscreteLaplaceRelease:
        """Discrete Laplace with integer Δ = ⌈sensitivity·2^k⌉ (lattice units) and scale
        t = Δ/ε, or t = b·2^k for a given reward-unit scale b (exact: a power-of-two scaling).

        t is rounded once to a float, and that float is the scale sampled (exactly) and recorded.
        """
        d = self.lattice_sensitivity(sensitivity)
        if scale is None:
            if epsilon is None:
                raise DpledgerError("give epsilon or scale")
            return DiscreteLaplaceRelease(scale=d / check_positive("epsilon", epsilon), sensitivity=d)
        if epsilon is not None:
            raise DpledgerError("give epsilon or scale, not both")
        return DiscreteLaplaceRelease(scale=check_positive("scale", scale) * self.unit, sensitivity=d)

    def gaussian_release(self, sensitivity: float, sigma: float) -> DiscreteGaussianRelease:
        """Discrete Gaussian with σ·2^k (exact: a power-of-two scaling) and Δ = ⌈sensitivity·2^k⌉."""
        s = check_positive("sigma", sigma)
        return DiscreteGaussianRelease(sigma=s * self.unit,
                                       sensitivity=self.lattice_sensitivity(sensitivity))

    def noise(self, release: Release) -> int:
        if isinstance(release, DiscreteLaplaceRelease):
            return _exact.discrete_laplace(Fraction(release.scale), self.bits)
        if isinstance(release, DiscreteGaussianRelease):
            return _exact.discrete_gaussian(Fraction(release.sigma), self.bits)
        raise DpledgerError(
            f"ExactSampler draws DiscreteLaplaceRelease or DiscreteGaussianRelease, got {release!r}")

    def laplace(self, scale, size: int | None = None):
        """Raw discrete-Laplace draws in lattice units (benchmarks, statistical tests)."""
        t = _exact.to_rational("scale", scale)
        if t <= 0:
            raise DpledgerError(f"scale must be > 0, got {scale!r}")
        if size is None:
            return _exact.discrete_laplace(t, self.bits)
        return np.array([_exact.discrete_laplace(t, self.bits) for _ in range(size)], dtype=np.int64)

    def gaussian(self, sigma, size: int | None = None):
        s = _exact.to_rational("sigma", sigma)
        if s <= 0:
            raise DpledgerError(f"sigma must be > 0, got {sigma!r}")
        if size is None:
            return _exact.discrete_gaussian(s, self.bits)
        return np.array([_exact.discrete_gaussian(s, self.bits) for _ in range(size)], dtype=np.int64)


def _scale_of(sensitivity: float, epsilon, scale) -> float:
    if (epsilon is None) == (scale is None):
        raise DpledgerError("give exactly one of epsilon or scale")
    if scale is None:
        return sensitivity / check_positive("epsilon", epsilon)
    return check_positive("scale", scale)


def make_sampler(kind: str, randomness, **kw) -> Sampler:
    """``"float"`` or ``"exact"`` (the CLI's ``--sampler``)."""
    if kind == "float":
        return FloatSampler(randomness)
    if kind == "exact":
        return ExactSampler(randomness, **kw)
    raise DpledgerError(f"sampler must be 'float' or 'exact', got {kind!r}")
