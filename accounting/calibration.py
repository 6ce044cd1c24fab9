"""Calibration: the inverse direction (docs/design.md#accounting) — from a privacy target to a noise
scale or a policy parameter.

All searches are bisections on a monotone map and return the *safe* end of the final bracket:
the returned parameter always meets the target (never overshoots the budget).
"""
from __future__ import annotations

import math
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


# -- contextual bandits: the noise of a tree of matrix or vector releases (issue 22 §4) ----------

def shariff_sheffet_sigma(epsilon: float, delta: float, nodes: int, l_tilde: float) -> float:
    """The paper's σ of the symmetric Gaussian added to each tree node (Shariff & Sheffet 2018,
    NeurIPS, §4 Gaussian noise; their code, ``GaussianMechanism``): σ = √(16m)·L̃²·ln(4/δ)/ε,
    m the nodes a record enters, L̃ the bound on ‖[x; y]‖.  The paper's calibration, as
    printed — the certificate of what it draws comes from the ledger, not from this formula."""
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    return math.sqrt(16.0 * nodes) * check_positive("L̃", l_tilde) ** 2 \
        * math.log(4.0 / delta) / epsilon


def shariff_sheffet_wishart(epsilon: float, delta: float, nodes: int,
                            dim: int) -> tuple[int, float]:
    """(k, δ′) of the paper's Wishart mode (Shariff & Sheffet 2018, §4 Wishart noise; their
    code, ``WishartMechanism`` with ``advanced_composition``): each of the m nodes of a record
    is (ε′, δ′)-DP with ε′ = ε/√(8m·ln(1/δ_f)), δ_f = δ/(m + 1), δ′ = (δ − δ_f)/m, so that
    advanced composition (Dwork, Rothblum & Vadhan 2010) gives (ε, δ); and k is the smallest
    number of degrees of freedom Sheffet 2015's theorem allows for (ε′, δ′) on p = ``dim``:
    k = p + 1 + ⌈28·ln(4/δ′)/ε′²⌉ (their code writes p + ⌊…⌋, one fewer than the statement:
    the stricter reading, as :class:`~dpledger.accounting.releases.WishartRelease` does)."""
    from dpledger.accounting.releases import WISHART_CONSTANT
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    m = int(nodes)
    d_fail = delta / (m + 1)
    eps_node = epsilon / math.sqrt(8.0 * m * math.log(1.0 / d_fail))
    d_node = (delta - d_fail) / m
    k = dim + 1 + math.ceil(WISHART_CONSTANT * math.log(4.0 / d_node) / eps_node ** 2)
    return int(k), float(d_node)


def accounted_sigma(make_release: Callable[[float], object], nodes: int, epsilon: float,
                    delta: float) -> float:
    """The smallest σ (to 1e-10 relative) whose ``nodes``-fold composition of
    ``make_release(σ)`` (a Gaussian or discrete-Gaussian release) has ε(δ) ≤ ε under dpledger's best
    accountant — the per-record certificate of a tree whose records enter ``nodes`` nodes meets
    (ε, δ).  The bracket starts from the exact GDP answer (μ = √nodes·μ(σ=1)/σ)."""
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    unit = make_release(1.0)
    # μ of a Gaussian release; a discrete Gaussian's (exact sampler) from its ρ = μ²/2
    mu1 = unit.mu if hasattr(unit, "mu") else math.sqrt(2.0 * unit.rho)
    guess = math.sqrt(nodes) * mu1 / gdp_mu_for(epsilon, delta)
    return calibrate_to_epsilon(lambda s: Composition.of([(make_release(s), int(nodes))]),
                                epsilon, delta, 0.5 * guess, 2.0 * guess)


def accounted_sigma_rho(make_release: Callable[[float], object], nodes: int, rho: float) -> float:
    """The smallest σ (to 1e-10 relative) whose ``nodes``-fold composition of
    ``make_release(σ)`` (a Gaussian or discrete-Gaussian release) is ρ-zCDP: a Gaussian release
    of μ is μ²/2-zCDP (Bun & Steinke 2016, Prop. 1.6) and zCDP adds up, so the target is
    nodes·ρ(σ) ≤ ρ; a discrete Gaussian's ρ is its recorded (rounded-up) one.  The zCDP targets
    of the adaptive-episode policies (docs/algorithms.md#adac-oful)."""
    rho = check_positive("rho", rho)
    nodes = int(nodes)

    def rho_of(s: float) -> float:
        rel = make_release(s)
        return 0.5 * rel.mu * rel.mu if hasattr(rel, "mu") else float(rel.rho)
    unit = make_release(1.0)
    mu1 = unit.mu if hasattr(unit, "mu") else math.sqrt(2.0 * unit.rho)
    guess = math.sqrt(nodes) * mu1 / math.sqrt(2.0 * rho)
    return smallest_parameter(lambda s: nodes * rho_of(s) <= rho, 0.5 * guess, 2.0 * guess)


def accounted_wishart(epsilon: float, delta: float, nodes: int, dim: int,
                      bound: float) -> tuple[int, float]:
    """(k, δ′): the smallest k, over a grid of per-node δ′ = f·δ/m (f ∈ {0.1, 0.25, 0.5, 0.75,
    0.9}), such that m = ``nodes`` Wishart releases W_p(L²I, k) — each only the (ε_k, δ′)
    statement of Sheffet 2015's theorem — compose to ε(δ) ≤ ε under dpledger's best accountant
    (basic and advanced composition; PLD of the (ε, δ) statements' dominating pairs).  Integer
    bisection on k, whose certificate decreases in k; values where the theorem does not apply
    (ε_k ≥ 1) are skipped."""
    from dpledger.accounting.releases import WISHART_CONSTANT, WishartRelease
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    acc = get_accountant("best")
    best = None
    for f in (0.1, 0.25, 0.5, 0.75, 0.9):
        d_node = f * delta / nodes
        if not d_node < math.exp(-1.0):
            continue
        # ε_k < 1 (the theorem's range) from k − p − 1 > 28·ln(4/δ′) on
        lo = dim + 2 + math.floor(WISHART_CONSTANT * math.log(4.0 / d_node))

        def meets(k: int, d_node: float = d_node) -> bool:
            rel = WishartRelease(dim=dim, k=int(k), bound=bound, delta=d_node)
            return acc.epsilon(Composition.of([(rel, int(nodes))]), delta) <= epsilon
        hi = lo
        while not meets(hi):
            hi *= 2
            if hi > 1 << 50:
                raise DpledgerError("no Wishart degrees of freedom meet the target")
        while lo < hi:
            mid = (lo + hi) // 2
            if meets(mid):
                hi = mid
            else:
                lo = mid + 1
        if best is None or hi < best[0]:
            best = (int(hi), float(d_node))
    if best is None:
        raise DpledgerError("the Wishart theorem needs δ/m below 1/e")
    return best


# -- a per-record privacy target → a Gaussian's σ/Δ (issue 32: the adaptive-episode policies) ----

def gaussian_ratio_for(*, rho: float | None = None, epsilon: float | None = None,
                       delta: float | None = None, reads: int = 1) -> float:
    """σ/Δ of a Gaussian release that a record enters ``reads`` times, so that the record's
    composition meets the target: ρ-zCDP (``rho``: σ/Δ = √(reads/(2ρ)), then moved up ulp by ulp
    until the accountant's rounded-up zCDP ρ = reads·μ²/2 is at most ``rho``), or (ε, δ)-DP
    (:func:`accounted_sigma`: the smallest σ whose exact GDP curve meets it).  A record read once
    (the adaptive-episode policies: each reward in one release) is ρ-zCDP exactly at μ = √(2ρ)
    (Bun & Steinke 2016, Prop. 1.6)."""
    from dpledger.accounting.releases import GaussianRelease
    reads = int(reads)
    if rho is not None:
        rho = check_positive("rho", rho)
        ratio = math.sqrt(reads / (2.0 * rho))
        while Composition.of([(GaussianRelease(sigma=ratio, sensitivity=1.0), reads)]
                             ).zcdp_rho() > rho:
            ratio = math.nextafter(ratio, math.inf)
        return ratio
    if epsilon is None or delta is None:
        raise DpledgerError("give rho, or both epsilon and delta")
    return accounted_sigma(lambda s: GaussianRelease(sigma=s, sensitivity=1.0), reads,
                           epsilon, delta)
