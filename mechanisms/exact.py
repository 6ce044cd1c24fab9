"""Exact samplers for deployment: Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for
Differential Privacy" (NeurIPS 2020; arXiv 2004.00010), Section 5 "Sampling".

Every probability here is a rational number held exactly (``fractions.Fraction`` and Python
ints); the only randomness consumed is uniform integers from a :class:`BitSource`.  Floating
point never touches a sample, so the output law is exactly the stated one and the
floating-point attack of Mironov (2012) has nothing to exploit.

Pieces (numbered as in CKS20):

* :func:`bernoulli_exp` — Bernoulli(exp(−γ)) for rational γ ≥ 0 (Algorithm 1: for γ ∈ [0, 1]
  the alternating-series trick; for γ > 1, ⌊γ⌋ draws of Bernoulli(e^{−1}) and one of
  Bernoulli(e^{−(γ−⌊γ⌋)})).
* :func:`geometric_exp` — P(Y = y) = (1 − e^{−s/t})·e^{−ys/t}, y ≥ 0 (the first half of
  Algorithm 2: uniform remainder U accepted with Bernoulli(e^{−U/t}), geometric quotient V by
  repeated Bernoulli(e^{−1}), then Y = ⌊(U + tV)/s⌋).
* :func:`discrete_laplace` — P(Z = z) ∝ e^{−|z|/scale} on ℤ (Algorithm 2, with the sign draw
  that rejects "−0").
* :func:`discrete_gaussian` — P(Z = z) ∝ e^{−z²/(2σ²)} on ℤ (Algorithm 3: rejection from the
  discrete Laplace of scale t = ⌊σ⌋ + 1 with acceptance Bernoulli(e^{−(|Y| − σ²/t)²/(2σ²)})).

**Out of scope: timing side channels.**  The number of loop iterations (hence the running
time) depends on the sample; Jin et al. (S&P 2022) show such timing leaks can be exploited.
These samplers defend against floating-point attacks only; constant-time sampling is not
attempted.
"""
from __future__ import annotations

import math
import secrets
from fractions import Fraction
from typing import Protocol, Union

import numpy as np

from dpledger.errors import DpledgerError

Rational = Union[int, Fraction]


class BitSource(Protocol):
    """A source of uniform random integers."""

    def randbits(self, k: int) -> int:
        """A uniform integer in [0, 2^k)."""

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), n ≥ 1."""


class GeneratorBits:
    """Uniform bits from a seeded ``numpy.random.Generator`` (tests and reproducible runs).

    Bits are taken from a pool refilled with ``Generator.bytes`` so one draw costs a shift, not a
    numpy call; ``randbelow`` is rejection sampling on ``bit_length(n−1)`` bits, so it is exactly
    uniform for any n (no modulo bias).
    """

    _REFILL_BYTES = 1024

    def __init__(self, rng: np.random.Generator):
        if not isinstance(rng, np.random.Generator):
            raise DpledgerError(f"GeneratorBits needs a numpy.random.Generator, got {type(rng).__name__}")
        self.rng = rng
        self._pool = 0
        self._nbits = 0

    def randbits(self, k: int) -> int:
        while self._nbits < k:
            self._pool |= int.from_bytes(self.rng.bytes(self._REFILL_BYTES), "little") << self._nbits
            self._nbits += 8 * self._REFILL_BYTES
        out = self._pool & ((1 << k) - 1)
        self._pool >>= k
        self._nbits -= k
        return out

    def randbelow(self, n: int) -> int:
        k = (n - 1).bit_length()
        while True:
            x = self.randbits(k)
            if x < n:
                return x


class SecretsBits:
    """Uniform bits from the operating system's CSPRNG (``secrets``): for deployment."""

    def randbits(self, k: int) -> int:
        return secrets.randbits(k) if k > 0 else 0

    def randbelow(self, n: int) -> int:
        return secrets.randbelow(n)


def as_bits(source) -> BitSource:
    """A :class:`BitSource` from a Generator (wrapped), a bit source, or ``"secrets"``."""
    if isinstance(source, np.random.Generator):
        return GeneratorBits(source)
    if source == "secrets":
        return SecretsBits()
    if hasattr(source, "randbelow") and hasattr(source, "randbits"):
        return source
    raise DpledgerError(
        f"randomness must be a numpy.random.Generator, a BitSource or 'secrets', got {source!r}")


def to_rational(name: str, x) -> Fraction:
    """``x`` as an exact Fraction (a float converts exactly: it is a dyadic rational)."""
    if isinstance(x, bool):
        raise DpledgerError(f"{name} must be a number, got {x!r}")
    if isinstance(x, (int, Fraction, np.integer)):
        return Fraction(int(x)) if isinstance(x, np.integer) else Fraction(x)
    if isinstance(x, (float, np.floating)):
        if not math.isfinite(float(x)):
            raise DpledgerError(f"{name} must be finite, got {x!r}")
        return Fraction(float(x))
    raise DpledgerError(f"{name} must be a number, got {type(x).__name__} {x!r}")


def bernoulli(p: Fraction, bits: BitSource) -> bool:
    """Bernoulli(p) for rational p ∈ [0, 1]: exact, one uniform integer below the denominator."""
    return bits.randbelow(p.denominator) < p.numerator


def bernoulli_exp(gamma: Rational, bits: BitSource) -> bool:
    """Bernoulli(exp(−γ)) for rational γ ≥ 0 — CKS20 Algorithm 1.

    For γ ∈ [0, 1]: draw A_k ~ Bernoulli(γ/k) for k = 1, 2, … until the first A_k = 0; return
    whether that K is odd (P = Σ_k (−γ)^k/k! = e^{−γ}).  For γ > 1, e^{−γ} = (e^{−1})^{⌊γ⌋}·
    e^{−(γ−⌊γ⌋)}, each factor an independent draw of the γ ≤ 1 case.
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise DpledgerError(f"bernoulli_exp needs gamma >= 0, got {gamma}")
    whole = gamma.numerator // gamma.denominator
    for _ in range(whole):
        if not _bernoulli_exp_le1(Fraction(1), bits):
            return False
    return _bernoulli_exp_le1(gamma - whole, bits)


def _bernoulli_exp_le1(gamma: Fraction, bits: BitSource) -> bool:
    num, den = gamma.numerator, gamma.denominator
    k = 1
    while bits.randbelow(den * k) < num:     # A_k ~ Bernoulli(γ/k)
        k += 1
    return k % 2 == 1


def geometric_exp(s: int, t: int, bits: BitSource) -> int:
    """Y ≥ 0 with P(Y = y) = (1 − e^{−s/t})·e^{−ys/t}, integers s, t ≥ 1 — CKS20 Algorithm 2,
    lines 1–8.

    U uniform on {0, …, t−1} accepted with probability e^{−U/t} and V ~ Geometric(1 − e^{−1})
    make X = U + tV geometric with ratio e^{−1/t}; Y = ⌊X/s⌋ is geometric with ratio e^{−s/t}.
    """
    while True:
        u = bits.randbelow(t)
        if not bernoulli_exp(Fraction(u, t), bits):
            continue
        v = 0
        while _bernoulli_exp_le1(Fraction(1), bits):
            v += 1
        return (u + t * v) // s


def discrete_laplace(scale: Rational, bits: BitSource) -> int:
    """Z on ℤ with P(Z = z) = (1 − e^{−1/scale})/(1 + e^{−1/scale})·e^{−|z|/scale} — CKS20
    Algorithm 2 (written there as Lap_ℤ(t/s) with scale = t/s in lowest terms).

    A fair sign B and a geometric magnitude Y; (B = 1, Y = 0) is rejected so zero is not
    counted twice.
    """
    scale = Fraction(scale)
    if scale <= 0:
        raise DpledgerError(f"discrete laplace scale must be > 0, got {scale}")
    t, s = scale.numerator, scale.denominator
    while True:
        y = geometric_exp(s, t, bits)
        negative = bits.randbits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(sigma: Rational, bits: BitSource) -> int:
    """Z on ℤ with P(Z = z) ∝ e^{−z²/(2σ²)} — CKS20 Algorithm 3.

    Proposal: discrete Laplace of scale t = ⌊σ⌋ + 1; accept Y with probability
    exp(−(|Y| − σ²/t)²/(2σ²)) (CKS20 Prop. 31: acceptance probability ≥ ~0.6 per loop).
    σ² is formed exactly from the rational σ.
    """
    sigma = Fraction(sigma)
    if sigma <= 0:
        raise DpledgerError(f"discrete gaussian sigma must be > 0, got {sigma}")
    sigma2 = sigma * sigma
    t = sigma.numerator // sigma.denominator + 1
    shift = sigma2 / t
    two_sigma2 = 2 * sigma2
    while True:
        y = discrete_laplace(t, bits)
        d = abs(y) - shift
        if bernoulli_exp(d * d / two_sigma2, bits):
            return y


# ---- closed forms the statistical tests compare against -------------------------------------

def discrete_laplace_pmf(z, scale: float) -> np.ndarray:
    """P(Z = z) of :func:`discrete_laplace` in float64 (for tests and audits, never sampling)."""
    q = math.exp(-1.0 / scale)
    return (1 - q) / (1 + q) * np.exp(-np.abs(np.asarray(z, dtype=np.float64)) / scale)


def discrete_laplace_variance(scale: float) -> float:
    """Var Z = 2q/(1 − q)² with q = e^{−1/scale}."""
    q = math.exp(-1.0 / scale)
    return 2 * q / (1 - q) ** 2


def discrete_gaussian_pmf(z, sigma: float) -> np.ndarray:
    """P(Z = z) of :func:`discrete_gaussian`, normalised over |z| ≤ ⌈40σ⌉ + 40 (the tail beyond
    is below e^{−800})."""
    m = int(math.ceil(40 * sigma)) + 40
    support = np.arange(-m, m + 1, dtype=np.float64)
    norm = math.fsum(np.exp(-support ** 2 / (2 * sigma ** 2)).tolist())
    return np.exp(-np.asarray(z, dtype=np.float64) ** 2 / (2 * sigma ** 2)) / norm
