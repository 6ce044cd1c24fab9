"""Hu et al. 2025 (ICML), Section 5.2: privacy and regret at *equal theoretical regret* —
DP-TS-UCB(α) against M-TS-Gaussian with b = c = ln^α T, which the paper's Table 1 gives the
same O(K·ln^α(T)·ln(TΔ²)/Δ) regret bound (docs/algorithms.md#dp-ts-ucb,
docs/algorithms.md#m-ts-gaussian).  The paper: "DP-TS-UCB incurs lower empirical regret than
M-TS-Gaussian, whereas [the second figure] shows that DP-TS-UCB achieves better privacy."

b must be an integer: b = ⌈ln^α T⌉ (c = ln^α T exactly), the rounding of hu-2025's b = ⌈ln T⌉.
Privacy is stated by theorem and by certificate for both policies.
"""
from __future__ import annotations

import math
import os

from dpledger.experiments.common import (MATCHINGS, Claim, Summary, band, compare_all,
                                         final_regret, finish_figure, gdp_mu_of, new_figure,
                                         plot_regret_panels, plot_tradeoff, privacy_row)
from dpledger.experiments.overrides import NO_OVERRIDES, Overrides, n_arms, outside_instance
from dpledger.sweep import RunConfig

NAME = "hu-2025-equal-regret"
TITLE = "Hu et al. 2025, §5.2: DP-TS-UCB(α) against M-TS-Gaussian with b = c = ln^α T"
MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]
ALPHAS = [0.0, 0.25, 0.5, 0.75, 1.0]
T_FULL = 100_000
R_FULL = 50
C0 = 1.0
SEED = 2025
CHOICES = ["instance: Bernoulli 0.75, 0.625, 0.5, 0.375, 0.25; T = 10⁵; α ∈ "
           f"{ALPHAS}; {R_FULL} runs (the paper's settings were lost in the stored text)",
           "M-TS-Gaussian: b = ⌈ln^α T⌉ pre-pulls (b must be an integer; hu-2025 rounds "
           "b = ⌈ln T⌉ the same way), c = ln^α T; DP-TS-UCB with c0 = 1 (reconstructed)",
           "privacy compared like for like: theorem against theorem and certificate against "
           "certificate",
           "master seed 2025"]
LEVEL_OPTION = "alphas"
INSTANCES = {"main": {"kind": "bernoulli", "means": MEANS}}
POLICY_NAMES = ["dp-ts-ucb", "mts-gaussian"]
NAMES = {"dp-ts-ucb": "DP-TS-UCB", "mts-gaussian": "M-TS-Gaussian"}


def mts_params(alpha: float, T: int) -> dict:
    """b = ⌈ln^α T⌉, c = ln^α T (the paper's Table 1 row of equal regret)."""
    c = math.log(T) ** alpha
    return {"b": math.ceil(c), "c": c}


def params(policy: str, alpha: float, T: int) -> dict:
    return {"alpha": alpha, "c0": C0} if policy == "dp-ts-ucb" else mts_params(alpha, T)


def check_overrides(ov: Overrides) -> None:
    from dpledger.experiments import hu_2025
    hu_2025.check_overrides(ov, NAME)          # b = ⌈ln^α T⌉ is largest at α = 1: ⌈ln T⌉


def configs(quick: bool, ov: Overrides = NO_OVERRIDES) -> list[RunConfig]:
    T, R, seed = ov.horizon_or(T_FULL, quick), ov.runs_or(R_FULL, quick), ov.seed_or(SEED)
    env = next(iter(ov.instances_or(INSTANCES).values()))
    return [RunConfig(f"{pol}-alpha{a:g}", pol, params(pol, a, T), env, T, R, seed=seed,
                      tags={"policy": pol, "alpha": a})
            for a in ov.levels_or(ALPHAS, quick) for pol in POLICY_NAMES if ov.keeps(pol)]


def summarize(reports: dict, out: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> Summary:
    alphas = ov.levels_or(ALPHAS, quick)
    T = ov.horizon_or(T_FULL, quick)
    K = n_arms(next(iter(ov.instances_or(INSTANCES).values())))
    pols = [p for p in POLICY_NAMES if ov.keeps(p)]
    mu = {(p, b, a): gdp_mu_of(p, params(p, a, T), T, K, b)
          for p in POLICY_NAMES for b in MATCHINGS for a in alphas}
    table = []
    for rep in reports.values():
        tg = rep["tags"]
        m, s = final_regret(rep)
        table.append({"policy": tg["policy"], "alpha": tg["alpha"],
                      **{k: v for k, v in rep["policy"]["params"].items()},
                      "T": T, "runs": rep["runs"], "regret_mean": m, "regret_std": s,
                      "mu_by_theorem": mu[(tg["policy"], "theorem", tg["alpha"])],
                      "mu_by_certificate": mu[(tg["policy"], "certificate", tg["alpha"])],
                      **privacy_row(rep)})
    plots = []
    if reports:
        plots.append(plot_regret_panels(
            {f"α = {a:g} (b = {mts_params(a, T)['b']}, c = {mts_params(a, T)['c']:.3g})":
             [(NAMES[p], reports[f"{p}-alpha{a:g}"]) for p in pols] for a in alphas},
            os.path.join(out, "regret.png"), TITLE))
        plots.append(plot_tradeoff({NAMES[p]: [(a, reports[f"{p}-alpha{a:g}"]["regret"]
                                                ["final_mean"], band(reports[f"{p}-alpha{a:g}"]))
                                               for a in alphas] for p in pols},
                                   os.path.join(out, "regret_vs_alpha.png"), "α",
                                   f"regret at T = {T:g} at equal theoretical regret",
                                   logx=False, logy=True))
        plots.append(_plot_mu(mu, alphas, os.path.join(out, "mu_vs_alpha.png"), T))
    return Summary(table=table, plots=plots, claims=_claims(reports, mu, alphas, pols, ov))


def _plot_mu(mu, alphas, path, T):
    fig, (ax,) = new_figure()
    for p in POLICY_NAMES:
        for b, style in zip(MATCHINGS, ("o-", "s--"), strict=True):
            ax.plot(alphas, [mu[(p, b, a)] for a in alphas], style, label=f"{NAMES[p]} ({b})")
    ax.set(yscale="log", xlabel="α", ylabel="GDP μ",
           title=f"GDP μ at equal theoretical regret, T = {T:g}")
    return finish_figure(fig, (ax,), path)


def _claims(reports, mu, alphas, pols, ov) -> list[Claim]:
    why = outside_instance(ov, "0.75, 0.625, 0.5, 0.375, 0.25")
    claims = []
    text = ("at equal theoretical regret DP-TS-UCB has lower empirical regret than M-TS-Gaussian "
            "(b = c = ln^α T), at every α")
    if len(pols) < 2:
        claims.append(Claim.missing(text, "DP-TS-UCB or M-TS-Gaussian not run (--policies)"))
    else:
        ok, ev = compare_all((reports[f"dp-ts-ucb-alpha{a:g}"],
                              reports[f"mts-gaussian-alpha{a:g}"], f"α={a:g}: DP-TS-UCB",
                              "M-TS-Gaussian") for a in alphas)
        claims.append(Claim.judged(text, ok, ev, why))
    for b in MATCHINGS:
        text = (f"at equal theoretical regret DP-TS-UCB has the better privacy (smaller GDP μ by "
                f"{b}), at every α")
        ok = all(mu[("dp-ts-ucb", b, a)] < mu[("mts-gaussian", b, a)] for a in alphas)
        claims.append(Claim(text, ok, "; ".join(
            f"α={a:g}: {mu[('dp-ts-ucb', b, a)]:.4g} vs {mu[('mts-gaussian', b, a)]:.4g}"
            for a in alphas)))
    return claims
