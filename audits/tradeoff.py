"""Audited trade-off curves (docs/audits.md#trade-off-curves): the empirical type-I / type-II
curve of the white-box likelihood-ratio test with a simultaneous confidence band, the certified
curves, and the largest μ and ε(δ) the band excludes.

The test "guess D′ when the score exceeds t" has type-I error α(t) = P_D[s > t] and type-II
error β(t) = P_D′[s ≤ t].  On n₀, n₁ count trials the empirical CDFs of the two score
distributions each lie within η_s = √(ln(4/a)/(2n_s)) of the true ones *for every t at once*
with probability ≥ 1 − a/2 (Dvoretzky–Kiefer–Wolfowitz with Massart's constant), so with
probability ≥ 1 − a the true curve lies, at every threshold, in the box
[α̂(t) ± η₀] × [β̂(t) ± η₁].

A trade-off function f (f-DP, Dong, Roth & Su 2022) requires β ≥ f(α) for every test; f is
decreasing, so the band **excludes** f when some t has β̂(t) + η₁ < f(α̂(t) + η₀).  Because the
band is simultaneous, the largest excluded parameter over all thresholds is a valid lower bound
(no selection split, no Bonferroni over thresholds):

* μ_excluded = max_t Φ⁻¹(1 − α_ub(t)) − Φ⁻¹(β_ub(t))   (G_μ(α) = Φ(Φ⁻¹(1 − α) − μ));
* ε_excluded(δ) = max_t max(ln((1 − δ − β_ub)/α_ub), ln((1 − δ − α_ub)/β_ub))   ((ε, δ)-DP
  as the trade-off curve max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)), Kairouz, Oh & Viswanath).

Certified curves drawn beside it: G_μ of the certificate's GDP μ, the pure-ε curve, and the
curve of the certificate's ε(δ) profile (its accountants' best — the PLD's where it applies):
sup over the profile's (ε, δ) of the (ε, δ) curve above.
"""
from __future__ import annotations

import math

import numpy as np

from dpledger.errors import DpledgerError

DELTA_GRID = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
# small δ matter at small α, δ up to δ(0) at central α: log-spaced below 1e-2, linear above
PROFILE_DELTAS = tuple(sorted({float(d) for d in np.r_[np.geomspace(1e-10, 1e-2, 17),
                                                        np.linspace(0.02, 0.98, 49)]}))


def dkw_width(n: int, a: float) -> float:
    """η with P[sup_t |F̂_n(t) − F(t)| > η] ≤ a/2 (two-sided DKW, Massart's constant)."""
    return math.sqrt(math.log(4.0 / a) / (2.0 * n))


def empirical_band(s0, s1, confidence: float = 0.95) -> dict:
    """α̂, β̂ at every pooled threshold (and ±∞) with the simultaneous band's corners."""
    s0 = np.sort(np.asarray(s0, dtype=np.float64))
    s1 = np.sort(np.asarray(s1, dtype=np.float64))
    if s0.size < 2 or s1.size < 2 or not (np.all(np.isfinite(s0)) and np.all(np.isfinite(s1))):
        raise DpledgerError("a trade-off band needs at least 2 finite scores per side")
    a = 1.0 - confidence
    t = np.unique(np.concatenate([[-np.inf], s0, s1]))
    alpha = 1.0 - np.searchsorted(s0, t, side="right") / s0.size     # P0[s > t]
    beta = np.searchsorted(s1, t, side="right") / s1.size            # P1[s ≤ t]
    e0, e1 = dkw_width(s0.size, a), dkw_width(s1.size, a)
    return {"alpha": alpha, "beta": beta, "eta0": e0, "eta1": e1, "confidence": confidence,
            "alpha_ub": np.minimum(1.0, alpha + e0), "beta_ub": np.minimum(1.0, beta + e1),
            "alpha_lb": np.maximum(0.0, alpha - e0), "beta_lb": np.maximum(0.0, beta - e1),
            "n0": int(s0.size), "n1": int(s1.size)}


def mu_excluded(band: dict) -> float:
    from scipy.special import ndtri
    au, bu = band["alpha_ub"], band["beta_ub"]
    ok = (au < 1.0) & (bu < 1.0) & (au > 0.0) & (bu > 0.0)
    if not np.any(ok):
        return 0.0
    v = ndtri(1.0 - au[ok]) - ndtri(bu[ok])
    return float(max(0.0, np.max(v)))


def epsilon_excluded(band: dict, delta: float) -> float:
    au, bu = band["alpha_ub"], band["beta_ub"]
    best = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for num, den in ((1.0 - delta - bu, au), (1.0 - delta - au, bu)):
            ok = (num > 0) & (den > 0)
            if np.any(ok):
                best = max(best, float(np.max(np.log(num[ok] / den[ok]))))
    return best


def gdp_curve(mu: float, alphas: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr, ndtri
    return ndtr(ndtri(1.0 - np.clip(alphas, 0.0, 1.0)) - mu)


def approx_curve(pairs, alphas: np.ndarray) -> np.ndarray:
    """sup over (ε, δ) of max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α))."""
    out = np.zeros_like(alphas, dtype=np.float64)
    for e, d in pairs:
        if e is None or not math.isfinite(e):
            continue
        out = np.maximum(out, np.maximum(1.0 - d - math.exp(e) * alphas,
                                         math.exp(-e) * (1.0 - d - alphas)))
    return np.clip(out, 0.0, 1.0)


def certified_curves(certificate, alphas: np.ndarray) -> dict:
    """The certificate's curves at ``alphas``: GDP (when it states μ), pure ε (when finite), and
    its ε(δ) profile's (``PROFILE_DELTAS``)."""
    from dpledger.audits.result import certificate_summary
    summ = certificate_summary(certificate, deltas=list(PROFILE_DELTAS))
    out = {}
    mu = summ.get("gdp_mu")
    if mu is not None and math.isfinite(mu):
        out[f"G_mu (certified mu {mu:.3g})"] = gdp_curve(mu, alphas)
    pe = summ.get("pure_epsilon")
    if pe is not None and math.isfinite(pe):
        out[f"pure epsilon {pe:.3g}"] = approx_curve([(pe, 0.0)], alphas)
    prof = [(float(v), float(d)) for d, v in (summ.get("epsilon_at_delta") or {}).items()
            if v is not None]
    if prof:
        out["epsilon(delta) profile (accountants' best)"] = approx_curve(prof, alphas)
    return out


def tradeoff_summary(s0, s1, certificate, confidence: float = 0.95,
                     deltas=DELTA_GRID) -> dict:
    """The JSON block: band widths, μ_excluded, ε_excluded on the δ grid, and whether the band
    excludes each certified curve (a violation of the certificate)."""
    band = empirical_band(s0, s1, confidence)
    out = {"method": "DKW simultaneous band (Massart), alpha/2 per score distribution",
           "confidence": confidence, "n0": band["n0"], "n1": band["n1"],
           "eta0": band["eta0"], "eta1": band["eta1"], "mu_excluded": mu_excluded(band),
           "epsilon_excluded": {f"{d:g}": epsilon_excluded(band, d) for d in deltas}}
    if certificate is not None:
        curves = certified_curves(certificate, band["alpha_ub"])
        out["excludes_certified"] = {k: bool(np.any(band["beta_ub"] < v - 1e-12))
                                     for k, v in curves.items()}
    return out


def plot_tradeoff(s0, s1, certificate, path: str, title: str, confidence: float = 0.95) -> dict:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    band = empirical_band(s0, s1, confidence)
    summ = tradeoff_summary(s0, s1, certificate, confidence)
    fig, ax = plt.subplots(figsize=(5.6, 5.4))
    ax.plot(band["alpha"], band["beta"], color="k", lw=1.2, label="empirical (LR test)")
    ax.fill(np.r_[band["alpha_lb"], band["alpha_ub"][::-1]],
            np.r_[band["beta_lb"], band["beta_ub"][::-1]], color="0.8", alpha=0.6,
            label=f"{confidence:.0%} simultaneous band (DKW)")
    grid = np.linspace(0.0, 1.0, 401)
    for (name, curve), style in zip(certified_curves(certificate, grid).items(),
                                    ("--", ":", "-."), strict=False):
        ax.plot(grid, curve, style, lw=1.4, label=name)
    mu = summ["mu_excluded"]
    if mu > 0:
        ax.plot(grid, gdp_curve(mu, grid), color="tab:red", lw=0.9,
                label=f"G_mu, mu = {mu:.3g}: largest the band excludes")
    ax.plot([0, 1], [1, 0], color="0.6", lw=0.6)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("type I error (guess D' on D)")
    ax.set_ylabel("type II error (guess D on D')")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return summ


__all__ = ["empirical_band", "mu_excluded", "epsilon_excluded", "gdp_curve", "approx_curve",
           "certified_curves", "tradeoff_summary", "plot_tradeoff", "dkw_width", "DELTA_GRID"]
