"""The exact sampler's vector and matrix releases: what independent discrete Gaussians on the
entries of a rounded statistic cost (issue 22 §1, the exact sampler where the noise is Gaussian).

A record's contribution to a vector or symmetric-matrix statistic is rounded entry by entry to
the lattice of step u (in lattice units: ⌊v/u + ½⌋, :mod:`dpledger.mechanisms.matrix`), so
every node sum is an integer vector whatever the data, and the noise added to entry e is
N_ℤ(0, s_e²) with an integer s_e, independently.  Two neighbouring records change the rounded
sum by an integer vector δ with |δ_e| ≤ |Δ_e|/u + 1 (each rounding moves a value by at most ½),
Δ the real change.

**zCDP of independent coordinates** (Canonne, Kamath & Steinke 2020, Theorem 14: a product of
discrete Gaussians N_ℤ(0, s_e²) with shift δ is ρ-zCDP with ρ = Σ_e δ_e²/(2s_e²)).  With
w_e = 1/s_e and Minkowski's inequality on the weighted vector (δ_e·w_e):

    ρ ≤ ½·(A + B)²,   A = sup ‖(Δ_e·w_e/u)_e‖₂  (the real change in lattice-σ units),
                       B = √(Σ_{e that can change} w_e²)  (the rounding's one unit each).

:func:`lattice_gaussian_rho` evaluates that bound exactly (rationals) and rounds it up; the
two builders below give A and B for a symmetric matrix under a Frobenius bound and for a vector
under an L2 bound, and return the integer σ's the kernels draw with.  The release recorded is a
:class:`~dpledger.accounting.releases.DiscreteGaussianTotal` of that ρ — zCDP and RDP only:
a multivariate discrete Gaussian is not known to be dominated by a scalar one, so no PLD, and
the continuous Gaussian's formulas are never used for it.
"""
from __future__ import annotations

import math
from fractions import Fraction

from dpledger.accounting.numerics import float_up, mul_up, sqrt_up
from dpledger.accounting.releases import DiscreteGaussianTotal, lattice_sigma
from dpledger.errors import DpledgerError, check_count, check_positive


def lattice_gaussian_rho(shift2: Fraction, inv_var: Fraction) -> float:
    """½·(√shift2 + √inv_var)² rounded up (module docstring: A² = shift2, B² = inv_var)."""
    if shift2 < 0 or inv_var < 0:
        raise DpledgerError("lattice rho needs non-negative squared norms")
    a, b = sqrt_up(shift2), sqrt_up(inv_var)
    s = float_up(Fraction(a) + Fraction(b))
    return mul_up(0.5, s, s)


def _checked(sigma, sensitivity, unit_scale, dim, bits) -> tuple:
    return (check_positive("sigma", sigma), check_positive("sensitivity", sensitivity),
            check_positive("lattice unit scale", unit_scale), check_count("dim", dim),
            check_count("lattice bits", bits, minimum=0))


def sym_matrix_lattice(sigma: float, frobenius: float, unit_scale: float, dim: int, bits: int,
                       blocks_changed: int = 1) -> tuple[int, int, DiscreteGaussianTotal]:
    """(s_off, s_diag, release) for the exact form of a symmetric Gaussian of σ
    (:class:`~dpledger.accounting.releases.SymmetricMatrixGaussianRelease`) on dim × dim blocks
    whose entries are rounded to u = unit_scale·2^-bits.

    s_off = ⌈σ/u⌉ and s_diag = ⌈√2·σ/u⌉ (:func:`~dpledger.accounting.releases.lattice_sigma`:
    never below the continuous law's σ and √2σ).  A change of Frobenius norm ≤ ``frobenius``
    puts Δ_ij (i < j) in two mirrored entries, so ‖Δ‖_F² = 2·Σ_{i<j} Δ_ij² + Σ_i Δ_ii² and

        A² = (frobenius/u)² · max(1/(2·s_off²), 1/s_diag²)

    (all of the change on the entry with the largest weight per unit of ‖Δ‖_F², a sound
    supremum); B² = blocks_changed·(dim(dim−1)/2/s_off² + dim/s_diag²) — the entries of every
    block the change can touch (two for a record that moves between per-arm blocks)."""
    sigma, frobenius, unit_scale, dim, bits = _checked(sigma, frobenius, unit_scale, dim, bits)
    s_off = lattice_sigma(sigma / unit_scale, bits)
    s_diag = lattice_sigma(math.sqrt(2.0) * sigma / unit_scale, bits)
    u = Fraction(unit_scale) / (1 << bits)
    shift2 = (Fraction(frobenius) / u) ** 2 * max(Fraction(1, 2 * s_off * s_off),
                                                  Fraction(1, s_diag * s_diag))
    inv = blocks_changed * (Fraction(dim * (dim - 1) // 2, s_off * s_off)
                            + Fraction(dim, s_diag * s_diag))
    return s_off, s_diag, DiscreteGaussianTotal(rho=lattice_gaussian_rho(shift2, inv))


def vector_lattice(sigma: float, l2: float, unit_scale: float, dim: int, bits: int,
                   blocks_changed: int = 1) -> tuple[int, DiscreteGaussianTotal]:
    """(s, release) for the exact form of N(0, σ²·I) on dim-vectors (per block) whose entries
    are rounded to u = unit_scale·2^-bits: s = ⌈σ/u⌉, A = (l2/u)/s for a change of L2 norm ≤
    ``l2``, B² = blocks_changed·dim/s²."""
    sigma, l2, unit_scale, dim, bits = _checked(sigma, l2, unit_scale, dim, bits)
    s = lattice_sigma(sigma / unit_scale, bits)
    u = Fraction(unit_scale) / (1 << bits)
    shift2 = (Fraction(l2) / u) ** 2 / (s * s)
    inv = Fraction(blocks_changed * dim, s * s)
    return s, DiscreteGaussianTotal(rho=lattice_gaussian_rho(shift2, inv))
