"""Ou, Avella Medina & Cummings 2024's three privacy statements for (M-)TS-Gaussian, as
functions of (T, b, c, δ): the GDP statement of the body (Lemma 5, Theorem 4), the RDP
statement (Appendix C.2, Theorem 8) and the standard-DP statement (Appendix C.1: Report Noisy
Max with heterogeneous Gaussian noise, Algorithm 4, Theorems 6–7, composed over T rounds by
advanced composition, Corollary 1).  Their Appendix C.3 (Figures 6 and 7) compares the three;
``dpledger experiment ou-2024-privacy`` redraws that comparison beside the ledger's certificate
(docs/algorithms.md#three-privacy-statements-of-m-ts-gaussian).

All three start from one per-round bound, μ_r² = 1/(c(b+1))
(:func:`~dpledger.accounting.theorems.ou_2024_round_mu2`): a round's output is the argmax of K
noisy means of which one, the changed reward's arm, moves, by at most 1/(k+1) against noise
σ² = c/(k+1), k ≥ b.

What was lost, and what is reconstructed (labelled in every docstring below):

* The stored text lost every formula of Theorems 6–8 and Corollary 1.  Theorem 6's proof
  survives in words: it conditions on all noise but one coordinate's and applies a tail bound
  for a shifted standard normal (their Lemma 13, from Nissim, Raskhodnikova & Smith 2007).  We
  do not restate that lemma's constants (not in the stored text); we derive the *tight*
  per-round statement the same conditioning gives — the one noisy value that moves is a
  Gaussian mechanism with μ_r and the argmax is post-processing, so a round is (ε0, δ0)-DP
  for every point of the Gaussian curve δ0 = δ_{μ_r}(ε0) (Dong, Roth & Su 2022, Cor. 2.13).
  Any tail-bound route gives an ε0 at least this large at the same δ0, so the standard-DP
  statement computed here is a *lower envelope* of the paper's: where it is already far above
  GDP, the paper's is too.
* Corollary 1 is advanced composition as the paper cites it (Dwork, Rothblum & Vadhan 2010):
  T rounds of (ε0, δ0) are (√(2T·ln(1/δ′))·ε0 + T·ε0·(e^{ε0} − 1), T·δ0 + δ′)-DP.  The split
  of the total δ between T·δ0 and δ′ is free in the statement; we take the best split on a grid
  (our choice: the paper's was lost).  The project's ``approx`` accountant (Kairouz, Oh &
  Viswanath 2015, Thm 3.5: never looser than Dwork–Rothblum–Vadhan) composes the same per-round
  statements as a second reading.
* Theorem 8 is the T-fold RDP composition of the Gaussian mechanism, (λ, λ·T·μ_r²/2), converted
  by Mironov 2017, Prop. 3: ε = T·μ_r²·λ/2 + ln(1/δ)/(λ − 1), minimised over λ > 1 in closed
  form: ε = ρ + 2√(ρ·ln(1/δ)) with ρ = T·μ_r²/2.  The project's RDP accountant uses the
  improved conversion (Balle et al. 2020) and is tighter; the statement here is the paper's.

Every ε is rounded up after its last operation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpledger.accounting.accountants import ApproxAccountant
from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import gdp_epsilon
from dpledger.accounting.numerics import float_down, float_up, sqrt_up
from dpledger.accounting.releases import ApproxDpRelease
from dpledger.accounting.theorems import ou_2024_round_mu2, ou_2024_ts_gaussian
from dpledger.errors import DpledgerError, check_count, check_delta, check_positive

# logit grid of the share f of δ spent on the T per-round δ0 (the rest is δ′): 31 points from
# f ≈ 6e-6 to 1 − 6e-6, refined once (±0.4 in steps of 0.04) around the best
_SPLIT_LOGITS = tuple(-12.0 + 0.8 * i for i in range(31))


def _mp_up(fn) -> float:
    """``fn()`` in mpmath at 50 digits, rounded up past its own error."""
    import mpmath
    with mpmath.workdps(50):
        return float_up(fn() * (1 + mpmath.mpf(10) ** -40))


def round_mu(b: int, c: float) -> float:
    """μ_r = 1/√(c(b+1)), rounded up (:func:`~dpledger.accounting.theorems.ou_2024_round_mu2`)."""
    return sqrt_up(ou_2024_round_mu2(check_count("b", b, minimum=0), check_positive("c", c)))


def gdp_statement(T: int, b: int, c: float, delta: float) -> float:
    """Theorem 4 (Lemma 5 composed, converted by the exact GDP curve): ε at δ of
    √(T/(c(b+1)))-GDP (:func:`~dpledger.accounting.theorems.ou_2024_ts_gaussian`)."""
    mu = ou_2024_ts_gaussian(check_count("T", T), b, c).gdp_mu
    return gdp_epsilon(mu, check_delta(delta))


def rdp_statement(T: int, b: int, c: float, delta: float) -> float:
    """Theorem 8 (Appendix C.2) at the best order: ρ + 2√(ρ·ln(1/δ)), ρ = T·μ_r²/2 — the
    T-fold RDP of the per-round Gaussian mechanism, (λ, λρ), through Mironov 2017, Prop. 3.
    RECONSTRUCTED: the stored text states it for Algorithm 1 (b = 0, c = 1) and lost its
    formula; the (b, c) form is the same argument at μ_r² = 1/(c(b+1))."""
    T, delta = check_count("T", T), check_delta(delta)
    rho = T * ou_2024_round_mu2(check_count("b", b, minimum=0), check_positive("c", c)) / 2

    def value():
        import mpmath
        r = mpmath.mpf(rho.numerator) / rho.denominator
        return r + 2 * mpmath.sqrt(r * mpmath.log(1 / mpmath.mpf(delta)))
    return _mp_up(value)


def rnm_round_epsilon(mu_r: float, delta0: float) -> float:
    """Theorems 6–7 per round, RECONSTRUCTED (their constants were lost; see the module
    docstring): Report Noisy Max with heterogeneous Gaussian noise in which only one coordinate
    moves, by at most Δ, against its σ, is (ε0, δ0)-DP for ε0 on the Gaussian curve of
    μ_r = Δ/σ at δ0 — the tightest statement its conditioning argument allows."""
    return gdp_epsilon(check_positive("mu_r", mu_r), check_delta(delta0))


def corollary1_epsilon(T: int, epsilon0: float, delta_prime: float) -> float:
    """Corollary 1's composition (Dwork, Rothblum & Vadhan 2010, as Dwork & Roth 2014,
    Thm 3.20 state it): T rounds of (ε0, δ0)-DP are (ε, T·δ0 + δ′)-DP with
    ε = √(2T·ln(1/δ′))·ε0 + T·ε0·(e^{ε0} − 1), rounded up."""
    T = check_count("T", T)
    epsilon0, delta_prime = check_positive("epsilon0", epsilon0), check_delta(delta_prime)

    def value():
        import mpmath
        e0 = mpmath.mpf(epsilon0)
        return (mpmath.sqrt(2 * T * mpmath.log(1 / mpmath.mpf(delta_prime))) * e0
                + T * e0 * mpmath.expm1(e0))
    return _mp_up(value)


@dataclass(frozen=True)
class StandardDpStatement:
    """The standard-DP statement at a total δ: the per-round (ε0, δ0), the slack δ′ and the
    composed ε, by the paper's Corollary 1 (``composer="corollary1"``) or the ``approx``
    accountant (``composer="approx"``)."""

    epsilon: float
    epsilon0: float
    delta0: float
    delta_prime: float
    composer: str


COMPOSERS = ("corollary1", "approx")


def _slack(T: int, delta0: float, delta: float) -> float:
    """δ′ = δ − T·δ0, rounded down, so that T·δ0 + δ′ ≤ δ exactly."""
    return float_down(Fraction(delta) - T * Fraction(delta0))


def _compose(T: int, epsilon0: float, delta0: float, delta: float, composer: str) -> float:
    if composer == "corollary1":
        return corollary1_epsilon(T, epsilon0, _slack(T, delta0, delta))
    comp = Composition.of([(ApproxDpRelease(epsilon0, delta0), T)])
    return ApproxAccountant().epsilon(comp, delta)


def standard_dp_statement(T: int, b: int, c: float, delta: float,
                          composer: str = "corollary1") -> StandardDpStatement:
    """Appendix C.1's statement at total δ: each round (ε0, δ0)-DP by
    :func:`rnm_round_epsilon` at μ_r = 1/√(c(b+1)), T rounds composed by ``composer``, with
    T·δ0 = f·δ and δ′ = (1 − f)·δ for the f of a logit grid (refined once) that gives the
    smallest ε — a choice the statement leaves free (the paper's was lost).  Every point of
    the search is a valid statement, so the minimum is one too."""
    T, delta = check_count("T", T), check_delta(delta)
    if composer not in COMPOSERS:
        raise DpledgerError(f"composer must be one of {list(COMPOSERS)}, got {composer!r}")
    mu_r = round_mu(b, c)

    def at(logit: float) -> StandardDpStatement:
        f = 1.0 / (1.0 + math.exp(-logit))
        delta0 = f * delta / T
        eps0 = rnm_round_epsilon(mu_r, delta0)
        eps = _compose(T, eps0, delta0, delta, composer)
        return StandardDpStatement(eps, eps0, delta0, _slack(T, delta0, delta), composer)

    best = min((at(x) for x in _SPLIT_LOGITS), key=lambda s: s.epsilon)
    f = T * best.delta0 / delta
    center = math.log(f / (1.0 - f))
    fine = [at(center + 0.04 * i) for i in range(-10, 11)]
    return min([best, *fine], key=lambda s: s.epsilon)
