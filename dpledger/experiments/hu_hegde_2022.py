"""Hu & Hegde 2022 (UAI), Section 4 and Appendix F.2 (algorithms.md B §4.3)."""
from __future__ import annotations

import os

from dpledger.experiments.common import (Claim, Summary, band, compare_less, final_regret, horizon,
                                         plot_regret_panels, plot_tradeoff, privacy_row, runs, thin)
from dpledger.sweep import RunConfig

NAME = "hu-hegde-2022"
TITLE = "Hu & Hegde 2022: DP-TS, Lazy-DP-TS, DP-SE, Anytime-Lazy-UCB"
MAIN = [0.75, 0.625, 0.5, 0.375, 0.25]
APPENDIX = [0.8, 0.05, 0.05, 0.05, 0.05]
EPS_MAIN = [0.1, 0.25, 0.5, 1.0, 500.0]
EPS_APPENDIX = [0.5, 1.0, 500.0]
POLICIES = ["dp-ts", "lazy-dp-ts", "dp-se", "anytime-lazy-ucb"]
CHOICES = ["20 runs per setting (the paper does not state its number of runs)",
           "DP-SE with β = 1/T (as Azize & Basu); Anytime-Lazy-UCB with the reconstructed "
           "constants of algorithms.md A9 (the paper does not state either)",
           "master seed 2022; run i uses SeedSequence(seed, spawn_key=(i,))"]


def configs(quick: bool) -> list[RunConfig]:
    T, R = horizon(100_000, quick), runs(20, quick)
    out = []
    for inst, means, grid in (("main", MAIN, EPS_MAIN), ("appendix", APPENDIX, EPS_APPENDIX)):
        for eps in thin(grid, quick):
            for pol in POLICIES:
                out.append(RunConfig(f"{inst}-{pol}-eps{eps:g}", pol, {"epsilon": eps},
                                     {"kind": "bernoulli", "means": means}, T, R, seed=2022,
                                     tags={"instance": inst, "epsilon": eps, "policy": pol}))
    return out


def summarize(reports: dict, out: str, quick: bool) -> Summary:
    table, groups, trade = [], {}, {}
    for label, rep in reports.items():
        tg = rep["tags"]
        m, s = final_regret(rep)
        table.append({"instance": tg["instance"], "policy": tg["policy"], "epsilon": tg["epsilon"],
                      "T": rep["horizon"], "runs": rep["runs"], "regret_mean": m, "regret_std": s,
                      **privacy_row(rep)})
        groups.setdefault(f"{tg['instance']}, ε = {tg['epsilon']:g}", []).append((tg["policy"], rep))
        if tg["instance"] == "main":
            trade.setdefault(tg["policy"], []).append((tg["epsilon"], m, band(rep)))
    plots = [plot_regret_panels(groups, os.path.join(out, "regret.png"), TITLE),
             plot_tradeoff(trade, os.path.join(out, "privacy_regret.png"), "ε",
                           "main instance: regret at T against ε")]

    def rep(inst, pol, eps):
        return reports[f"{inst}-{pol}-eps{eps:g}"]

    claims = []
    big = max(thin(EPS_MAIN, quick))
    ok, ev = compare_less(rep("main", "dp-ts", big), rep("main", "lazy-dp-ts", big), "DP-TS",
                          "Lazy-DP-TS")
    claims.append(Claim(f"at ε = {big:g}, DP-TS outperforms Lazy-DP-TS", ok, ev))
    evs, oks = [], []
    for ts in ("dp-ts", "lazy-dp-ts"):
        for other in ("dp-se", "anytime-lazy-ucb"):
            ok, ev = compare_less(rep("main", ts, big), rep("main", other, big), ts, other)
            oks.append(ok)
            evs.append(ev)
    claims.append(Claim(f"at ε = {big:g}, the Thompson-sampling policies outperform the UCB and "
                        "elimination policies", all(oks), "; ".join(evs)))
    oks, evs = [], []
    for inst, grid in (("main", EPS_MAIN), ("appendix", EPS_APPENDIX)):
        for eps in thin(grid, quick):
            if eps > 1:
                continue
            for other in ("dp-se", "anytime-lazy-ucb"):
                ok, ev = compare_less(rep(inst, "lazy-dp-ts", eps), rep(inst, other, eps),
                                      f"Lazy-DP-TS ({inst}, ε={eps:g})", other)
                oks.append(ok)
                evs.append(ev)
    claims.append(Claim("Lazy-DP-TS always outperforms DP-SE and Anytime-Lazy-UCB (ε ≤ 1)",
                        all(oks), f"{sum(oks)}/{len(oks)} comparisons hold; " + "; ".join(evs)))
    small = min(EPS_MAIN)
    ok_all, evs = [], []
    for other in ("lazy-dp-ts", "dp-se", "anytime-lazy-ucb"):
        ok, ev = compare_less(rep("main", other, small), rep("main", "dp-ts", small), other, "DP-TS")
        ok_all.append(ok)
        evs.append(ev)
    claims.append(Claim(f"at ε = {small:g}, DP-TS is inferior to the other three", all(ok_all),
                        "; ".join(evs)))
    return Summary(table=table, plots=plots, claims=claims)
