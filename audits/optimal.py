"""The best bound any threshold test on the likelihood ratio could reach (issue 14: "composition-
limited: best possible X").

An audit of a composition of m releases that all contain the witness is limited by n even when the
transcript attains the certificate's worst candidate: the Neyman–Pearson statistic is the summed
privacy loss L, its extreme values are rare when m is large, and Clopper–Pearson at a rare event is
loose.  :func:`best_possible` states, for the worst candidate's composition and the audit's
statistics (docs/design.md#audits: one-sided Clopper–Pearson at α/2 per rate on the count split),
the largest bound of an event {L ≥ τ} (or its complement) at the *expected* counts n·P_D and n·P_D′,
maximised over τ — what a test that knew the optimal threshold would report on a typical run, with
the trajectory attaining every release of the composition (a trajectory that attains fewer releases
can only make the pair harder to tell apart).

* **Laplace releases**: the two distributions of the summed loss come from
  :func:`dpledger.accounting.pld.composed_laplace_loss` (exact cell masses on a grid of step h,
  convolved); L is then the grid-rounded loss, a statistic whose two distributions are exact up
  to the FFT's round-off, so the bound is that of a real (slightly coarsened) test.
* **Gaussian releases**: L ~ N(∓μ²/2, μ²) under D / D′ with μ the composition's GDP μ
  (Dong, Roth & Su 2022, the Gaussian trade-off function G_μ; Composition.gdp_mu), closed
  form.
"""
from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from dpledger.accounting.pld import composed_laplace_loss, laplace_loss_pmf  # noqa: F401
from dpledger.audits.stats import (DEFAULT_CONFIDENCE, DEFAULT_SELECTION_FRACTION, check_options,
                                   epsilon_from_rates, mu_from_rates, rates_upper, split_sizes)

_BASIS = ("largest one-sided Clopper-Pearson bound (alpha/2 per rate, count split) of a "
          "likelihood-ratio threshold event at its expected counts, with every release of the "
          "worst candidate attained; a single audit's bound scatters around it by its binomial "
          "noise (audits/optimal.py)")


def best_threshold_bound(t0: np.ndarray, t1: np.ndarray, n: int, alpha: float,
                         currency: str) -> tuple[float, int]:
    """max over i of the bound of the event {L ≥ x_i} at the expected counts n·t0_i and n·t1_i,
    t0/t1 its probabilities under D/D′ (both directions: the rates take the event and its
    complement); (bound, i)."""
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
    alpha, fraction = check_options(confidence, selection_fraction)
    _, n = split_sizes(int(trials), fraction)
    if all(isinstance(r, LaplaceRelease) for r, _ in items):
        groups = composition.pure_groups()
        x, p0, p1 = composed_laplace_loss(groups)
        t0 = np.cumsum(p0[::-1])[::-1]          # P_D(L ≥ x_i)
        t1 = np.cumsum(p1[::-1])[::-1]
        best, i = best_threshold_bound(t0, t1, n, alpha, "epsilon")
        return {"currency": "epsilon", "value": best, "trials": int(trials),
                "threshold_loss": float(x[i]), "grid_step": float(x[1] - x[0]),
                "releases": [[float(e), int(c)] for e, c in groups], "basis": _BASIS}
    if all(isinstance(r, GaussianRelease) for r, _ in items):
        mu = composition.gdp_mu()
        mu2 = mu * mu
        tau = np.linspace(-mu2 / 2 - 8 * mu, mu2 / 2 + 8 * mu, 20001)
        t0 = ndtr(-(tau + mu2 / 2) / mu)       # P_D(L ≥ τ), L ~ N(−μ²/2, μ²)
        t1 = ndtr(-(tau - mu2 / 2) / mu)
        best, i = best_threshold_bound(t0, t1, n, alpha, "mu")
        return {"currency": "mu", "value": best, "trials": int(trials),
                "threshold_loss": float(tau[i]), "gdp_mu": mu,
                "basis": _BASIS + "; L ~ N(-mu^2/2, mu^2) vs N(mu^2/2, mu^2)"}
    return None


__all__ = ["best_possible", "composed_laplace_loss", "laplace_loss_pmf", "best_threshold_bound"]
