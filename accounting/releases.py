"""The release vocabulary: immutable descriptions of one draw of fresh noise.

A *release* (docs/design.md#accounting) is one draw of fresh noise added to a statistic that depends
on some rewards.  Its description here says only what an accountant needs: the noise family, its
scale and the statistic's sensitivity to any single reward.  Which rewards it touches is the
ledger's business (``dpledger.accounting.ledger``); how releases compose is the accountants'
(``dpledger.accounting.accountants``).

Every class states, in its docstring, the exact mathematics of its privacy cost in each currency
it supports, and reports a status per currency:

``exact``           the value is the release's true cost in that currency;
``bound``           a sound upper bound (e.g. the GDP μ of a Laplace release via randomized
                    response);
``unbounded``       the release gives no finite guarantee in that currency (Gaussian pure ε);
``not_applicable``  dpledger knows no sound value (e.g. GDP of the discrete Gaussian).

Normal forms: two releases with the same normal form have identical privacy in every currency
(Laplace: ε = Δ/b; Gaussian: μ = Δ/σ), so compositions group them.
"""
from __future__ import annotations

import functools
import math
import re
from itertools import pairwise
from dataclasses import dataclass
from typing import ClassVar, Mapping, Union

from fractions import Fraction

from dpledger.accounting.numerics import div_up, float_up
from dpledger.errors import DpledgerError, check_count, check_nonnegative, check_positive

EXACT, BOUND, UNBOUNDED, NOT_APPLICABLE = "exact", "bound", "unbounded", "not_applicable"
CURRENCIES = ("pure", "gdp", "zcdp", "rdp", "pld")


def _fmt(x: float) -> str:
    return repr(float(x))


@dataclass(frozen=True)
class LaplaceRelease:
    """Continuous Laplace mechanism: ``f(X) + Lap(b)`` with L1 sensitivity ``Δ``.

    * pure ε = Δ/b (exact; Dwork–Roth Thm 3.6).
    * GDP: no exact μ; the sound bound is that of a generic ε-DP mechanism,
      μ = −2Φ⁻¹(1/(1+e^ε)) (randomized response dominates every ε-DP pair).
    * zCDP ρ = sup_{α>1} ε(α)/α of the RDP curve below (Bun–Steinke 2016, Def. 1.1), computed
      as a certified upper bound from that curve (:func:`dpledger.accounting.rdp.laplace_zcdp`):
      within 1e-3 relative of the supremum, which numerically is the α → 1 limit, the KL
      divergence ε + e^{−ε} − 1 (0.3679 at ε = 1, against randomized response's ε·tanh(ε/2) =
      0.4621, the generic ε-DP value) — status ``bound``.
    * RDP ε(α) = (1/(α−1))·log( α/(2α−1)·e^{(α−1)ε} + (α−1)/(2α−1)·e^{−αε} )
      (Mironov 2017, Prop. 6; exact).
    * ``epsilon`` = Δ/b rounded up (an exact rational, rounded once toward less privacy).
    * PLD: ``dp_accounting`` Laplace PLD, noise_multiplier = b/Δ, ADD_OR_REMOVE_ONE.
    """

    scale: float
    sensitivity: float = 1.0
    kind: ClassVar[str] = "laplace"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": EXACT, "gdp": BOUND, "zcdp": BOUND, "rdp": EXACT, "pld": EXACT}

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", check_positive("laplace scale", self.scale))
        object.__setattr__(self, "sensitivity",
                           check_positive("laplace sensitivity", self.sensitivity))
        _finite_epsilon("laplace", self.scale, self.sensitivity)

    @classmethod
    def from_epsilon(cls, epsilon: float) -> "LaplaceRelease":
        """The Laplace release of scale 1/ε rounded up: its exact ε is at most the one asked
        (and its ``epsilon``, rounded up, equals it whenever 1/(1/ε) rounds back to ε)."""
        return cls(scale=div_up(1, check_positive("epsilon", epsilon)), sensitivity=1.0)

    @functools.cached_property   # frozen: computed once per instance
    def epsilon(self) -> float:
        """Δ/b, rounded up."""
        return div_up(self.sensitivity, self.scale)

    def normal_form(self) -> tuple:
        return (self.kind, self.epsilon)

    def params(self) -> dict:
        return {"scale": self.scale, "sensitivity": self.sensitivity}


def _listed(values) -> str:
    """Numbers as the command line writes them (``2;4;8``), not as a Python list."""
    return ";".join(f"{float(v):g}" for v in values)


def _finite_epsilon(kind: str, scale: float, sensitivity: float) -> None:
    """Refuse a Laplace-type release whose ε = Δ/b overflows double precision: no accountant can
    state it (a non-private release says "unbounded" honestly)."""
    if math.isinf(float(sensitivity) / float(scale)):
        raise DpledgerError(f"{kind} scale {float(scale)!r} with sensitivity "
                            f"{float(sensitivity)!r}: ε = Δ/b overflows double precision")


@dataclass(frozen=True)
class GaussianRelease:
    """Continuous Gaussian mechanism: ``f(X) + N(0, σ²)`` with L2 sensitivity ``Δ``.

    * pure ε: unbounded.
    * GDP μ = Δ/σ (exact; Dong–Roth–Su 2022, Thm 2.7).  Gaussians compose to the Gaussian of
      μ = √(Σμ_i²), also under fully adaptive choice of σ (Smith & Thakurta 2022).
    * zCDP ρ = μ²/2; RDP ε(α) = αμ²/2 (Mironov 2017, Prop. 7; exact).
    * PLD: ``dp_accounting`` Gaussian PLD (skipped when every release is Gaussian: GDP is exact).
    * ``mu`` = Δ/σ and ``mu2`` = Δ²/σ² are rounded up; ``mu2_exact`` is the exact rational.
    """

    sigma: float
    sensitivity: float = 1.0
    kind: ClassVar[str] = "gaussian"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": UNBOUNDED, "gdp": EXACT, "zcdp": EXACT, "rdp": EXACT, "pld": EXACT}

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive("gaussian sigma", self.sigma))
        object.__setattr__(self, "sensitivity",
                           check_positive("gaussian sensitivity", self.sensitivity))

    @classmethod
    def from_mu(cls, mu: float) -> "GaussianRelease":
        """σ = 1/μ rounded up: the exact μ is at most the one asked."""
        return cls(sigma=div_up(1, check_positive("mu", mu)), sensitivity=1.0)

    @functools.cached_property   # frozen: computed once per instance
    def mu(self) -> float:
        return div_up(self.sensitivity, self.sigma)

    @functools.cached_property   # frozen: computed once per instance
    def mu2_exact(self) -> Fraction:
        return (Fraction(self.sensitivity) / Fraction(self.sigma)) ** 2

    @functools.cached_property   # frozen: computed once per instance
    def mu2(self) -> float:
        return float_up(self.mu2_exact)

    def normal_form(self) -> tuple:
        return (self.kind, self.mu)

    def params(self) -> dict:
        return {"sigma": self.sigma, "sensitivity": self.sensitivity}


@dataclass(frozen=True)
class PureEpsilonRelease:
    """A generic ε-DP release whose mechanism is not further described.

    Accounted as its worst case, binary randomized response with ε (Kairouz–Oh–Viswanath 2015):
    pure ε exact; GDP μ = −2Φ⁻¹(1/(1+e^ε)) (tight for the class); zCDP ρ = ε·tanh(ε/2);
    RDP ε(α) = (1/(α−1))·log((e^{αε} + e^{(1−α)ε})/(1+e^ε)); PLD = that of randomized response.
    """

    epsilon: float
    kind: ClassVar[str] = "pure"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": EXACT, "gdp": EXACT, "zcdp": EXACT, "rdp": EXACT, "pld": EXACT}

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))

    def normal_form(self) -> tuple:
        return (self.kind, self.epsilon)

    def params(self) -> dict:
        return {"epsilon": self.epsilon}


@dataclass(frozen=True)
class DiscreteLaplaceRelease:
    """Exact discrete Laplace on a lattice: integer noise Z with P(Z = z) ∝ e^{−|z|/t}.

    The statistic is an integer in lattice units (rewards rounded to the lattice 2^-k before
    summing); ``sensitivity`` Δ is a positive integer in the same units and ``scale`` t > 0.
    * pure ε = Δ/t (exact: the loss ratio is e^{(|z−Δ|−|z|)/t} ≤ e^{Δ/t}), rounded up.
    * GDP, zCDP, RDP: the generic ε-DP bounds of :class:`PureEpsilonRelease` (status bound).
    * PLD: ``dp_accounting`` discrete-Laplace PLD with noise_parameter 1/t and sensitivity Δ.
    Never uses the continuous-Laplace formulas (Canonne–Kamath–Steinke 2020).
    """

    scale: float
    sensitivity: int = 1
    kind: ClassVar[str] = "discrete_laplace"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": EXACT, "gdp": BOUND, "zcdp": BOUND, "rdp": BOUND, "pld": EXACT}

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", check_positive("discrete laplace scale", self.scale))
        object.__setattr__(self, "sensitivity",
                           check_count("discrete laplace sensitivity", self.sensitivity))
        _finite_epsilon("discrete laplace", self.scale, self.sensitivity)

    @functools.cached_property   # frozen: computed once per instance
    def epsilon(self) -> float:
        return div_up(self.sensitivity, self.scale)

    def normal_form(self) -> tuple:
        return (self.kind, self.scale, self.sensitivity)

    def params(self) -> dict:
        return {"scale": self.scale, "sensitivity": self.sensitivity}


@dataclass(frozen=True)
class DiscreteGaussianRelease:
    """Exact discrete Gaussian N_Z(0, σ²) on the integers, integer sensitivity Δ.

    * zCDP ρ = Δ²/(2σ²) and RDP ε(α) = αρ (Canonne–Kamath–Steinke 2020, Thm 4 / Prop. 5: an
      upper bound, the discrete Gaussian is at least as private as the continuous one at these
      orders) — status bound.  ``rho`` is rounded up (``rho_exact`` the exact rational).
    * pure ε: unbounded.  GDP μ: not proven for the discrete Gaussian, not applicable.
    * PLD: ``dp_accounting`` discrete-Gaussian PLD (exact up to discretisation).
    """

    sigma: float
    sensitivity: int = 1
    kind: ClassVar[str] = "discrete_gaussian"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": UNBOUNDED, "gdp": NOT_APPLICABLE, "zcdp": BOUND, "rdp": BOUND, "pld": EXACT}

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive("discrete gaussian sigma", self.sigma))
        object.__setattr__(self, "sensitivity",
                           check_count("discrete gaussian sensitivity", self.sensitivity))

    @functools.cached_property   # frozen: computed once per instance
    def rho_exact(self) -> Fraction:
        return Fraction(self.sensitivity ** 2) / (2 * Fraction(self.sigma) ** 2)

    @functools.cached_property   # frozen: computed once per instance
    def rho(self) -> float:
        return float_up(self.rho_exact)

    def normal_form(self) -> tuple:
        return (self.kind, self.sigma, self.sensitivity)

    def params(self) -> dict:
        return {"sigma": self.sigma, "sensitivity": self.sensitivity}


def lattice_sigma(ratio: float, bits: int) -> int:
    """The discrete Gaussian's σ on the reward lattice 2^-bits for a statistic whose continuous
    release has noise ratio σ/Δ = ``ratio``: the integer s = ⌈2^bits·ratio·(1 + 2^-50)⌉ (lattice
    units, sensitivity 2^bits).  The padding makes s ≥ 2^bits·r for the exact r that ``ratio``
    rounds (a few ulps of ``sqrt``/products), so the drawn variance s² is never below the
    continuous one: ρ = 2^(2·bits)/(2s²) ≤ 1/(2·r²) (checked in rational arithmetic by
    tests/test_exact_gaussian.py).  The same function sizes the kernels' draws
    (:mod:`dpledger.mechanisms.noise`, compiled) and the ledger's accounting of them, so what is
    recorded is what is drawn; s ≤ 2^50 keeps every integer of CKS20 Alg. 3 exact in int64."""
    y = ratio * 2.0 ** bits * (1.0 + 2.0 ** -50)
    if not (y > 0.0 and y <= 2.0 ** 50):
        raise ValueError("discrete gaussian lattice sigma out of range (0, 2^50]")
    return max(int(math.ceil(y)), 1)


@dataclass(frozen=True)
class DiscreteGaussianTotal:
    """The composition of discrete Gaussian releases N_ℤ(0, σ_i²) (integer sensitivities Δ_i)
    known by its zCDP total ρ = Σ Δ_i²/(2σ_i²) — how the ledger states a reward's posterior reads
    under the exact sampler, one σ per prefix length (thousands of terms).

    * zCDP ρ: each term is Δ_i²/(2σ_i²)-zCDP (Canonne–Kamath–Steinke 2020, Thm 4) and zCDP adds
      under composition (Bun–Steinke 2016, Lemma 2.3) — status bound.
    * RDP ε(α) = αρ (the same bound, order by order) — status bound.
    * pure ε unbounded; GDP μ not applicable (not proven for the discrete Gaussian); PLD not
      applicable: one discrete Gaussian of the same ρ is not known to dominate the composition,
      and the continuous Gaussian's formulas are never used for it.
    """

    rho: float
    kind: ClassVar[str] = "discrete_gaussian_total"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": UNBOUNDED, "gdp": NOT_APPLICABLE, "zcdp": BOUND, "rdp": BOUND,
        "pld": NOT_APPLICABLE}

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_positive("discrete gaussian total rho", self.rho))

    def normal_form(self) -> tuple:
        return (self.kind, self.rho)

    def params(self) -> dict:
        return {"rho": self.rho}


@dataclass(frozen=True)
class RdpRelease:
    """A mechanism known only by its Rényi-DP curve at listed orders (subsampled, mixture, …).

    ``orders`` α_1 < … < α_n (all > 1) and ``values`` r_1 ≤ … ≤ r_n ≥ 0: the Rényi divergence
    of order α_i between the outputs on any two neighbouring inputs is at most r_i
    (Mironov 2017, Def. 4).  At an order α not listed, the value of the smallest listed order
    at or above it bounds the divergence (D_α is non-decreasing in α, van Erven–Harremoës 2014
    Thm 3); above α_n nothing is known.  Values must be non-decreasing in α for the same
    reason (a list that is not cannot be a Rényi curve and is refused).
    * RDP: the listed bound (status bound); composition adds curves order by order
      (Mironov 2017, Prop. 1), at the union of the listed orders
      (:meth:`dpledger.accounting.composition.Composition.rdp_orders`).
    * (ε, δ): the improved conversion (Balle et al. 2020, Thm 21; Canonne–Kamath–Steinke 2020,
      Prop. 12) minimised over the listed orders only — nothing is assumed between orders.
    * pure ε, GDP μ, zCDP ρ, PLD: unknown from finitely many orders (not_applicable).
    """

    orders: tuple
    values: tuple
    kind: ClassVar[str] = "rdp"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": NOT_APPLICABLE, "gdp": NOT_APPLICABLE, "zcdp": NOT_APPLICABLE, "rdp": BOUND,
        "pld": NOT_APPLICABLE}

    def __post_init__(self) -> None:
        try:
            orders = tuple(check_positive("rdp order", a) for a in self.orders)
            values = tuple(check_nonnegative("rdp value", v) for v in self.values)
        except TypeError:
            raise DpledgerError("rdp orders and values must be lists of numbers") from None
        if not orders or len(orders) != len(values):
            raise DpledgerError(f"rdp needs as many values as orders (≥ 1), got {len(orders)} "
                                f"orders and {len(values)} values")
        if any(not (a > 1.0 and math.isfinite(a)) for a in orders):
            raise DpledgerError(f"rdp orders must be finite and > 1, got {_listed(orders)}")
        if any(b <= a for a, b in pairwise(orders)):
            raise DpledgerError(f"rdp orders must be strictly increasing, got {_listed(orders)}")
        if any(not (v >= 0.0 and math.isfinite(v)) for v in values):
            raise DpledgerError(f"rdp values must be finite and >= 0, got {_listed(values)}")
        if any(b < a for a, b in pairwise(values)):
            raise DpledgerError(f"rdp values must be non-decreasing in the order (Rényi "
                                f"divergences are), got {list(values)}")
        object.__setattr__(self, "orders", orders)
        object.__setattr__(self, "values", values)

    def at(self, alphas):
        """The bound at each α of ``alphas``: the value of the smallest listed order ≥ α,
        ∞ above the largest listed order."""
        import numpy as np
        alphas = np.asarray(alphas, dtype=np.float64)
        idx = np.searchsorted(np.asarray(self.orders), alphas, side="left")
        vals = np.append(np.asarray(self.values), np.inf)
        return vals[idx]

    def normal_form(self) -> tuple:
        return (self.kind, self.orders, self.values)

    def params(self) -> dict:
        return {"orders": list(self.orders), "values": list(self.values)}


@dataclass(frozen=True)
class ZcdpRelease:
    """A ρ-zCDP mechanism (Bun–Steinke 2016, Def. 1.1): Rényi divergence ≤ ρα at every α > 1.

    * zCDP ρ (status exact, as given); RDP ε(α) = ρα; composition adds ρ (Bun–Steinke Lemma
      2.3), also as a filter under fully adaptive choices (:mod:`dpledger.accounting.filters`).
    * (ε, δ): the improved conversion minimised over α continuously
      (:func:`dpledger.accounting.rdp.zcdp_to_epsilon`) when every release of a composition
      is linear in α (Gaussian, discrete Gaussian, zCDP); else over the RDP order grid.
    * pure ε, GDP μ, PLD: not implied by zCDP (not_applicable).
    * dp-accounting: ``ZCDpEvent(rho, xi=0)``.
    """

    rho: float
    kind: ClassVar[str] = "zcdp"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": NOT_APPLICABLE, "gdp": NOT_APPLICABLE, "zcdp": EXACT, "rdp": EXACT,
        "pld": NOT_APPLICABLE}

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_positive("zcdp rho", self.rho))

    def normal_form(self) -> tuple:
        return (self.kind, self.rho)

    def params(self) -> dict:
        return {"rho": self.rho}


@dataclass(frozen=True)
class NonPrivateRelease:
    """A read of rewards with no noise at all (non-private baselines such as UCB1).

    Every currency is unbounded: a reward read without noise has no finite privacy guarantee.
    Recording these reads lets the ledger say *which* rewards a non-private policy exposed.
    """

    kind: ClassVar[str] = "non_private"
    statuses: ClassVar[Mapping[str, str]] = {c: UNBOUNDED for c in CURRENCIES}

    def normal_form(self) -> tuple:
        return (self.kind,)

    def params(self) -> dict:
        return {}


# -- vector and matrix releases (issue 22: contextual and linear bandits) ------------------------
@dataclass(frozen=True)
class LaplaceVectorRelease(LaplaceRelease):
    """Laplace noise Lap(b) added independently to each of the ``dim`` entries of a vector
    statistic whose L1 sensitivity is ``Δ₁`` (``sensitivity``).

    * pure ε = Δ₁/b (exact: the density ratio is e^{(‖z − Δ‖₁ − ‖z‖₁)/b} ≤ e^{Δ₁/b}, Dwork &
      Roth 2014, Thm 3.6 for vectors) — the scalar Laplace release of the same b and Δ, which is
      its normal form; every other currency as :class:`LaplaceRelease` (the vector's privacy loss
      has the same worst case as one coordinate moved by Δ₁).
    * ``dim`` says what was drawn (``dim`` Laplace variates); it does not enter the privacy.
    """

    dim: int = 1
    kind: ClassVar[str] = "laplace_vector"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "dim", check_count("laplace_vector dim", self.dim))

    def normal_form(self) -> tuple:
        return ("laplace", self.epsilon)

    def params(self) -> dict:
        return {"scale": self.scale, "sensitivity": self.sensitivity, "dim": self.dim}


@dataclass(frozen=True)
class GaussianVectorRelease(GaussianRelease):
    """N(0, σ²I_d) added to a ``dim``-vector statistic of L2 sensitivity Δ₂ (``sensitivity``).

    * GDP μ = Δ₂/σ (exact: the Gaussian mechanism in ℝ^d reduces to one dimension along the
      difference of the two means; Dong, Roth & Su 2022, Thm 2.7), every currency as the scalar
      :class:`GaussianRelease` of the same σ and Δ, its normal form.
    * ``dim`` says what was drawn; it does not enter the privacy.
    """

    dim: int = 1
    kind: ClassVar[str] = "gaussian_vector"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "dim", check_count("gaussian_vector dim", self.dim))

    def normal_form(self) -> tuple:
        return ("gaussian", self.mu)

    def params(self) -> dict:
        return {"sigma": self.sigma, "sensitivity": self.sensitivity, "dim": self.dim}


@dataclass(frozen=True)
class SymmetricMatrixGaussianRelease(GaussianRelease):
    """Symmetric Gaussian noise Z = (Z′ + Z′ᵀ)/√2, Z′ᵢⱼ i.i.d. N(0, σ²), added to a symmetric
    ``dim × dim`` matrix statistic whose neighbouring change Δ (a symmetric matrix) has
    Frobenius norm at most ``sensitivity`` = Δ_F (Shariff & Sheffet 2018, Gaussian mode; the
    noise of each node of their tree).

    Z's upper triangle is independent: off-diagonal entries N(0, σ²), diagonal entries
    N(0, 2σ²).  Dividing the diagonal by √2 makes the release an isotropic Gaussian mechanism
    on the d(d+1)/2 coordinates with mean shift (Δᵢⱼ for i < j, Δᵢᵢ/√2), whose squared norm is
    Σ_{i<j} Δᵢⱼ² + Σᵢ Δᵢᵢ²/2 = ‖Δ‖_F²/2.  So the release is μ-GDP with

        μ = Δ_F/(√2·σ),   μ² = Δ_F²/(2σ²)   (exact; the worst case is attained by any Δ of
        Frobenius norm Δ_F, e.g. a single diagonal change),

    and every other currency is the scalar Gaussian's of that μ (its normal form).  The
    formula is checked against a brute-force likelihood ratio over random symmetric changes in
    the tests.  ``mu2_exact`` is the exact rational Δ_F²/(2σ²); ``mu`` and ``mu2`` are rounded up.
    """

    dim: int = 1
    # independent dim × dim blocks drawn (one per arm of a disjoint model under record
    # privacy); ``sensitivity`` bounds the Frobenius norm of the change over all of them
    blocks: int = 1
    kind: ClassVar[str] = "gaussian_sym_matrix"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "dim", check_count("gaussian_sym_matrix dim", self.dim))
        object.__setattr__(self, "blocks", check_count("gaussian_sym_matrix blocks",
                                                       self.blocks))

    @functools.cached_property
    def mu2_exact(self) -> Fraction:
        return (Fraction(self.sensitivity) / Fraction(self.sigma)) ** 2 / 2

    @functools.cached_property
    def mu2(self) -> float:
        return float_up(self.mu2_exact)

    @functools.cached_property
    def mu(self) -> float:
        from dpledger.accounting.numerics import sqrt_up
        return sqrt_up(self.mu2_exact)

    def normal_form(self) -> tuple:
        return ("gaussian", self.mu)

    def params(self) -> dict:
        out = {"sigma": self.sigma, "sensitivity": self.sensitivity, "dim": self.dim}
        if self.blocks != 1:
            out["blocks"] = self.blocks
        return out


@dataclass(frozen=True)
class ApproxDpRelease:
    """A mechanism known only to be (ε, δ)-DP, δ > 0 — no pure, GDP, zCDP or RDP guarantee.

    * pure ε, GDP μ, zCDP ρ, RDP: unbounded (an (ε, δ) statement allows an infinite loss with
      probability δ; no Gaussian or Rényi bound follows from it).
    * PLD: exact for the class — the dominating pair of every (ε, δ)-DP mechanism (Kairouz, Oh
      & Viswanath 2015, Thm 2.4 / Murtagh & Vadhan 2016): privacy loss +∞ with probability δ,
      ±ε with probabilities (1 − δ)/(1 + e^{∓ε}).  Its compositions are therefore the optimal
      composition of (ε, δ) statements.
    * The ``approx`` accountant (basic and advanced composition, :mod:`.accountants`) composes
      it with pure-ε releases; a composition is (ε′, δ′)-DP only for δ′ ≥ Σ count·δ.
    """

    epsilon: float
    delta: float
    kind: ClassVar[str] = "approx_dp"
    statuses: ClassVar[Mapping[str, str]] = {
        "pure": UNBOUNDED, "gdp": UNBOUNDED, "zcdp": UNBOUNDED, "rdp": UNBOUNDED, "pld": EXACT}

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("approx_dp epsilon", self.epsilon))
        d = float(self.delta) if isinstance(self.delta, (int, float)) and not isinstance(
            self.delta, bool) else self.delta
        if not isinstance(d, float) or not 0.0 < d < 1.0:
            raise DpledgerError(f"approx_dp delta must lie in (0, 1), got {self.delta!r}")
        object.__setattr__(self, "delta", d)

    def normal_form(self) -> tuple:
        return (self.kind, self.epsilon, self.delta)

    def params(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta}


# The Wishart theorem's constant and range, as this project reads Sheffet 2015
# (docs/algorithms.md#vector-and-matrix-releases): W ~ W_p(L²·I, k) added to AᵀA, rows of A of
# L2 norm ≤ L, is (ε, δ)-DP for k ≥ p + 1 + 28·ln(4/δ)/ε², ε ∈ (0, 1), δ ∈ (0, 1/e).
WISHART_CONSTANT = 28


@dataclass(frozen=True)
class WishartRelease:
    """Wishart noise W ~ W_p(L²·I_p, k) added to a Gram matrix AᵀA whose rows (one per record)
    have L2 norm at most ``bound`` = L (Sheffet 2015, the Wishart mechanism; Shariff & Sheffet
    2018 use it per tree node on the (d+1)×(d+1) matrix of [x; y] rows).

    Its only guarantee is the theorem's: with ``dim`` = p and ``k`` degrees of freedom, the
    release is (ε, δ)-DP at the ``delta`` it is stated for, with

        ε = √(28·ln(4/δ)/(k − p − 1))       (the theorem's k ≥ p + 1 + 28·ln(4/δ)/ε², solved)

    rounded up, valid only inside the theorem's range ε < 1, δ < 1/e (refused outside it).
    Reconstructed reading (docs/algorithms.md#vector-and-matrix-releases): the published
    statement and the authors' code differ by one in the degrees of freedom (k ≥ p + … against
    k = p + …); the stricter is used.
    It composes only as an (ε, δ) statement — its normal form is the :class:`ApproxDpRelease`
    of that (ε, δ): basic and advanced composition, and the optimal composition of (ε, δ)
    statements through PLD — never through a Rényi or Gaussian bound the theorem does not give.
    """

    dim: int
    k: int
    bound: float
    delta: float
    kind: ClassVar[str] = "wishart"
    statuses: ClassVar[Mapping[str, str]] = ApproxDpRelease.statuses

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_count("wishart dim", self.dim))
        object.__setattr__(self, "k", check_count("wishart k", self.k))
        object.__setattr__(self, "bound", check_positive("wishart bound", self.bound))
        d = check_positive("wishart delta", self.delta)
        if not d < math.exp(-1.0):
            raise DpledgerError(f"wishart delta must lie in (0, 1/e) (the theorem's range), "
                                f"got {self.delta!r}")
        object.__setattr__(self, "delta", d)
        if self.k <= self.dim + 1:
            raise DpledgerError(f"wishart k must exceed dim + 1 = {self.dim + 1}, got {self.k}")
        if not self.epsilon < 1.0:
            raise DpledgerError(
                f"wishart(dim={self.dim}, k={self.k}, delta={d!r}) gives ε = {self.epsilon:.4g}; "
                f"the theorem holds for ε < 1 only: k must be at least "
                f"{self.dim + 1 + math.ceil(WISHART_CONSTANT * math.log(4.0 / d))}")

    @functools.cached_property
    def epsilon(self) -> float:
        """√(28·ln(4/δ)/(k − p − 1)), rounded up after every step."""
        from dpledger.accounting.numerics import libm_up, mul_up, sqrt_up
        log_term = libm_up(math.log(div_up(4, self.delta)))    # ln is increasing
        return sqrt_up(Fraction(mul_up(WISHART_CONSTANT, log_term))
                       / (self.k - self.dim - 1))

    def normal_form(self) -> tuple:
        return ("approx_dp", self.epsilon, self.delta)

    def params(self) -> dict:
        return {"dim": self.dim, "k": self.k, "bound": self.bound, "delta": self.delta}


Release = Union[LaplaceRelease, GaussianRelease, PureEpsilonRelease, DiscreteLaplaceRelease,
                DiscreteGaussianRelease, DiscreteGaussianTotal, RdpRelease, ZcdpRelease,
                NonPrivateRelease, LaplaceVectorRelease, GaussianVectorRelease,
                SymmetricMatrixGaussianRelease, ApproxDpRelease, WishartRelease]
RELEASE_TYPES: dict[str, type] = {
    cls.kind: cls for cls in (LaplaceRelease, GaussianRelease, PureEpsilonRelease,
                              DiscreteLaplaceRelease, DiscreteGaussianRelease,
                              DiscreteGaussianTotal, RdpRelease, ZcdpRelease, NonPrivateRelease,
                              LaplaceVectorRelease, GaussianVectorRelease,
                              SymmetricMatrixGaussianRelease, ApproxDpRelease, WishartRelease)}


def release_to_json(release: Release) -> dict:
    """``{"kind": ..., <params>}`` with floats written exactly (repr round-trips)."""
    out = {"kind": release.kind}
    out.update(release.params())
    return out


def release_from_json(d: Mapping) -> Release:
    if not isinstance(d, Mapping) or "kind" not in d:
        raise DpledgerError(f"a release must be an object with a 'kind', got {d!r}")
    kind = d["kind"]
    cls = RELEASE_TYPES.get(kind)
    if cls is None:
        raise DpledgerError(
            f"unknown release kind {kind!r}; known: {', '.join(sorted(RELEASE_TYPES))}")
    params = {k: v for k, v in d.items() if k != "kind"}
    try:
        return cls(**params)
    except TypeError as exc:
        raise DpledgerError(f"bad parameters for release {kind!r}: {params!r}") from exc


_ALIASES = {"eps": "epsilon", "b": "scale", "std": "sigma", "sens": "sensitivity", "n": "count"}
_KIND_ALIASES = {"lap": "laplace", "gauss": "gaussian", "dlaplace": "discrete_laplace",
                 "dgaussian": "discrete_gaussian", "epsilon": "pure"}


def parse_release_spec(spec: str) -> tuple[Release, int]:
    """Parse a CLI release such as ``laplace:eps=0.5`` or ``gaussian:sigma=2,sensitivity=1,count=100``.

    Returns ``(release, count)``.  ``eps=``/``epsilon=`` and ``mu=`` are normal-form shorthands
    (sensitivity 1); ``count`` defaults to 1.
    """
    if not isinstance(spec, str) or not re.fullmatch(r"[A-Za-z_]+(:.*)?", spec.strip()):
        raise DpledgerError(f"cannot parse release {spec!r}; expected e.g. laplace:eps=0.5")
    kind, _, rest = spec.strip().partition(":")
    kind = _KIND_ALIASES.get(kind.lower(), kind.lower())
    if kind not in RELEASE_TYPES:
        raise DpledgerError(
            f"unknown release kind {kind!r} in {spec!r}; known: {', '.join(sorted(RELEASE_TYPES))}")
    params: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        key = _ALIASES.get(key.strip().lower(), key.strip().lower())
        if not eq:
            raise DpledgerError(f"expected key=value in {spec!r}, got {part!r}")
        if key in params:       # the later one would silently win (issue 23 §5)
            raise DpledgerError(f"{spec.strip()} gives {key} twice")
        if key == "count":
            params[key] = _exact_count(value, spec)
            continue
        if kind == "rdp" and key in ("orders", "values"):
            params[key] = _number_list(key, value, spec)
            continue
        try:
            params[key] = float(value)
        except ValueError:
            raise DpledgerError(f"{key} must be a number in {spec!r}, got {value!r}") from None
        if math.isnan(params[key]):
            raise DpledgerError(f"{key} must not be NaN in {spec!r}")
    count = params.pop("count", 1.0)
    count = check_count("count", count)
    cls = RELEASE_TYPES[kind]
    try:
        if kind == "laplace" and "epsilon" in params:
            _only(params, {"epsilon"}, spec)
            release: Release = LaplaceRelease.from_epsilon(params["epsilon"])
        elif kind == "gaussian" and "mu" in params:
            _only(params, {"mu"}, spec)
            release = GaussianRelease.from_mu(params["mu"])
        else:
            if kind in ("discrete_laplace", "discrete_gaussian") and "sensitivity" in params:
                params["sensitivity"] = check_count("sensitivity", params["sensitivity"])
            for key in ("dim", "k", "blocks"):  # counts: dimensions, degrees of freedom
                if key in params:
                    params[key] = check_count(key, params[key])
            release = cls(**params)
    except TypeError:
        import inspect
        known = [p for p in inspect.signature(cls).parameters if p != "self"]
        raise DpledgerError(f"{spec.strip()}: {kind} takes "
                            f"{', '.join(known) if known else 'no parameters'}"
                            + (", or eps" if kind == "laplace" else ", or mu" if kind == "gaussian"
                               else "") + ", and count; got "
                            + ", ".join(sorted(params))) from None
    return release, count


def _number_list(key: str, text: str, spec: str) -> tuple:
    """``a1;a2;…`` as a tuple of floats (rdp orders and values)."""
    out = []
    for part in text.split(";"):
        try:
            v = float(part)
        except ValueError:
            raise DpledgerError(f"{key} must be numbers separated by ';' in {spec!r}, "
                                f"got {part.strip()!r}") from None
        if math.isnan(v):
            raise DpledgerError(f"{key} must not contain NaN in {spec!r}")
        out.append(v)
    return tuple(out)


def _exact_count(text: str, spec: str) -> int:
    """``count=1e30`` is the integer 10^30 exactly (through ``float`` it would be
    1000000000000000019884624838656)."""
    from decimal import Decimal, InvalidOperation
    try:
        d = Decimal(text.strip())
    except InvalidOperation:
        raise DpledgerError(f"count must be an integer in {spec!r}, got {text.strip()!r}") from None
    if not d.is_finite() or d != d.to_integral_value():
        raise DpledgerError(f"count must be an integer in {spec!r}, got {text.strip()!r}")
    if d > Decimal("1e300"):     # beyond, even the count itself is no float
        raise DpledgerError(f"count must be at most 1e300 in {spec!r}, got {text.strip()!r}")
    return int(d)


def _only(params: dict, allowed: set, spec: str) -> None:
    extra = set(params) - allowed
    if extra:
        raise DpledgerError(f"{spec.strip()}: {sorted(allowed)[0]} cannot be combined with "
                            + ", ".join(sorted(extra)))
