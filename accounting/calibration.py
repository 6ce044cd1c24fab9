"""Calibration: the inverse direction (SPEC §3) — from a privacy target to a noise scale or a
policy parameter.

All searches are bisections on a monotone map and return the *safe* end of the final bracket:
the returned parameter always meets the target (never overshoots the budget).
"""
from __future__ import annotations

from typing import Callable

from dpledger.accounting.accountants import get_accountant
from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import gdp_mu_for
from dpledger.errors import DpledgerError, check_delta, check_positive


def laplace_scale(epsilon: float, sensitivity: float = 1.0) -> float:
    """b = Δ/ε (Dwork–Roth Thm 3.6)."""
    return check_positive("sensitivity", sensitivity) / check_positive("epsilon", epsilon)


def gaussian_sigma(*, mu: float | None = None, epsilon: float | None = None,
                   delta: float | None = None, sensitivity: float = 1.0) -> float:
    """σ = Δ/μ, with μ given or the largest μ whose GDP curve meets (ε, δ) (DRS Cor. 2.13)."""
    sensitivity = check_positive("sensitivity", sensitivity)
    if mu is None:
        if epsilon is None or delta is None:
            raise DpledgerError("give mu, or both epsilon and delta")
        mu = gdp_mu_for(epsilon, check_delta(delta))
    return sensitivity / check_positive("mu", mu)


def smallest_parameter(meets: Callable[[float], bool], lo: float, hi: float,
                       *, rel_tol: float = 1e-10, max_iter: int = 200) -> float:
    """Smallest p in [lo, hi] with ``meets(p)`` True, for ``meets`` monotone (False … True).

    Returns the upper end of the final bracket, so ``meets`` holds at the result.
    """
    lo, hi = float(lo), float(hi)
    if not meets(hi):
        raise DpledgerError(f"no parameter up to {hi!r} meets the target")
    if meets(lo):
        return lo
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if meets(mid):
            hi = mid
        else:
            lo = mid
        if hi - lo <= rel_tol * abs(hi):
            break
    return hi


def calibrate_to_epsilon(make_composition: Callable[[float], Composition], target_epsilon: float,
                         delta: float, lo: float, hi: float, accountant: str = "best") -> float:
    """Smallest parameter p (e.g. a noise scale, where larger p means more privacy) whose
    composition has ε(δ) ≤ target under ``accountant``."""
    target_epsilon = check_positive("target epsilon", target_epsilon)
    delta = check_delta(delta)
    acc = get_accountant(accountant)
    return smallest_parameter(lambda p: acc.epsilon(make_composition(p), delta) <= target_epsilon,
                              lo, hi)
