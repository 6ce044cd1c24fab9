"""The best bound any threshold test on the likelihood ratio could reach (issue 14: "composition-
limited: best possible X").

An audit of a composition of m releases that all contain the witness is limited by n even when
the transcript attains the certificate's worst candidate: the Neyman–Pearson statistic is the
summed privacy loss L, its extreme values are rare when m is large, and Clopper–Pearson at a
rare event is loose.  :func:`best_possible` states, for the worst candidate's composition and the
audit's statistics (SPEC §6: one-sided Clopper–Pearson at α/2 per rate on the count split),
the largest bound of an event {L ≥ τ} (or its complement) at the *expected* counts n·P_D and
n·P_D′, maximised over τ — what a test that knew the optimal threshold would report on a
typical run, with the trajectory attaining every release of the composition (a trajectory that
attains fewer releases can only make the pair harder to tell apart).

* **Laplace releases** (ε_i = Δ/b_i): the loss of one release is −ε_i with probability ½ under
  D (y below the clean value), +ε_i with probability ½e^{−ε_i} (y above the clean value + Δ)
  and, between, X = (2u − Δ)/b with density ¼e^{−x/2 − ε_i/2} on (−ε_i, ε_i) under D
  (¼e^{x/2 − ε_i/2} under D′: the densities differ by e^x).  The masses are integrated exactly
  over the cells of a grid of step h and the per-release distributions convolved (FFT; binary
  powering for counts); L is then the grid-rounded loss, a statistic whose two distributions
  are exact up to the FFT's round-off, so the bound is that of a real (slightly coarsened) test.
* **Gaussian releases**: L ~ N(∓μ²/2, μ²) under D / D′ (μ² = Σ d_i²/σ_i²), closed form.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.signal import fftconvolve
from scipy.special import ndtr

from dpledger.audits.stats import (DEFAULT_CONFIDENCE, DEFAULT_SELECTION_FRACTION, _alpha,
                                   epsilon_from_rates, mu_from_rates, rates_upper, split_sizes)

GRID_POINTS = 1000          # grid cells per smallest ε_i (h = min ε_i / 1000)


def laplace_loss_pmf(epsilon: float, h: float) -> tuple[np.ndarray, np.ndarray, int]:
    """(P_D, P_D′, N): the privacy loss of one Laplace release of ε = Δ/b on the grid
    k·h, k = −N … N (N = round(ε/h)); cell k is [(k − ½)h, (k + ½)h] ∩ [−ε, ε], its continuous
    mass integrated in closed form, the atoms ±ε at the nearest grid point."""
    n = max(1, int(round(epsilon / h)))
    k = np.arange(-n, n + 1, dtype=np.float64)
    a = np.clip((k - 0.5) * h, -epsilon, epsilon)
    b = np.clip((k + 0.5) * h, -epsilon, epsilon)
    c = 0.5 * math.exp(-0.5 * epsilon)
    p0 = c * (np.exp(-0.5 * a) - np.exp(-0.5 * b))          # ∫ ¼e^{−x/2−ε/2}
    p1 = c * (np.exp(0.5 * b) - np.exp(0.5 * a))            # ∫ ¼e^{x/2−ε/2}
    p0[0] += 0.5
    p0[-1] += 0.5 * math.exp(-epsilon)
    p1[0] += 0.5 * math.exp(-epsilon)
    p1[-1] += 0.5
    return p0, p1, n


def _conv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.maximum(fftconvolve(x, y), 0.0)


def _power(p: np.ndarray, count: int) -> np.ndarray:
    out = None
    base = p
    while count:
        if count & 1:
            out = base if out is None else _conv(out, base)
        count >>= 1
        if count:
            base = _conv(base, base)
    return out


def composed_laplace_loss(groups, h: float | None = None):
    """(grid values, P_D, P_D′) of the summed loss of Laplace releases given as (ε_i, count)."""
    groups = [(float(e), int(c)) for e, c in groups if c > 0]
    if not groups:
        raise ValueError("no releases")
    if h is None:
        h = min(e for e, _ in groups) / GRID_POINTS
        # at most ~4e6 grid points for the composed loss (its range is ±Σ count·ε_i)
        h = max(h, 2.0 * sum(e * c for e, c in groups) / 4e6)
    q0 = q1 = None
    lo = 0
    for eps, count in groups:
        p0, p1, n = laplace_loss_pmf(eps, h)
        r0, r1 = _power(p0, count), _power(p1, count)
        q0 = r0 if q0 is None else _conv(q0, r0)
        q1 = r1 if q1 is None else _conv(q1, r1)
        lo -= n * count
    x = (lo + np.arange(q0.size)) * h
    return x, q0 / q0.sum(), q1 / q1.sum()


def _count_split(trials: int, selection_fraction: float) -> int:
    _, n = split_sizes(int(trials), float(selection_fraction))
    return n


def best_threshold_bound(p0: np.ndarray, p1: np.ndarray, n: int, alpha: float,
                         currency: str) -> tuple[float, int]:
    """max over i of the bound of the event {L ≥ x_i} at the expected counts n·P(L ≥ x_i)
    (both directions: epsilon_from_rates takes the event and its complement)."""
    t0 = np.cumsum(p0[::-1])[::-1]          # P_D(L ≥ x_i)
    t1 = np.cumsum(p1[::-1])[::-1]
    k0 = np.clip(n * t0, 0.0, n)
    k1 = np.clip(n * t1, 0.0, n)
    fpr, fnr = rates_upper(n, k0, n, k1, alpha)
    b = mu_from_rates(fpr, fnr) if currency == "mu" else epsilon_from_rates(fpr, fnr, 0.0)
    b = np.atleast_1d(b)
    i = int(np.argmax(b))
    return float(b[i]), i


def best_possible(composition, trials: int, *, confidence: float = DEFAULT_CONFIDENCE,
                  selection_fraction: float = DEFAULT_SELECTION_FRACTION) -> dict | None:
    """The best bound a likelihood-ratio threshold test could certify on ``trials`` trials per
    side for ``composition`` (module docstring); None unless the composition is all Laplace
    (ε, pure) or all Gaussian (μ)."""
    from dpledger.accounting.releases import GaussianRelease, LaplaceRelease
    items = list(getattr(composition, "items", ()))
    if not items:
        return None
    alpha = _alpha(confidence)
    n = _count_split(trials, selection_fraction)
    if all(isinstance(r, LaplaceRelease) for r, _ in items):
        groups = [(r.sensitivity / r.scale, c) for r, c in items]
        x, p0, p1 = composed_laplace_loss(groups)
        best, i = best_threshold_bound(p0, p1, n, alpha, "epsilon")
        return {"currency": "epsilon", "value": best, "trials": int(trials),
                "threshold_loss": float(x[i]),
                "releases": [[float(e), int(c)] for e, c in groups],
                "basis": "largest one-sided Clopper-Pearson bound (alpha/2 per rate, count split) "
                         "of a likelihood-ratio threshold event at its expected counts, with every "
                         "release of the worst candidate attained; a single audit's bound scatters "
                         "around it by its binomial noise (audits/optimal.py)"}
    if all(isinstance(r, GaussianRelease) for r, _ in items):
        mu2 = float(sum(c * float(r.mu2) for r, c in items))
        mu = math.sqrt(mu2)
        tau = np.linspace(-mu2 / 2 - 8 * mu, mu2 / 2 + 8 * mu, 20001)
        t0 = ndtr(-(tau + mu2 / 2) / mu)       # P_D(L ≥ τ), L ~ N(−μ²/2, μ²)
        t1 = ndtr(-(tau - mu2 / 2) / mu)
        fpr, fnr = rates_upper(n, n * t0, n, n * t1, alpha)
        b = np.atleast_1d(mu_from_rates(fpr, fnr))
        i = int(np.argmax(b))
        return {"currency": "mu", "value": float(b[i]), "trials": int(trials),
                "threshold_loss": float(tau[i]), "gdp_mu": mu,
                "basis": "largest one-sided Clopper-Pearson bound (alpha/2 per rate, count split) "
                         "of a likelihood-ratio threshold event at its expected counts, "
                         "L ~ N(-mu^2/2, mu^2) vs N(mu^2/2, mu^2); a single audit's bound scatters "
                         "around it by its binomial noise (audits/optimal.py)"}
    return None


__all__ = ["best_possible", "composed_laplace_loss", "laplace_loss_pmf", "best_threshold_bound"]
