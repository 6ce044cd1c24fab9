"""Hu & Hegde 2022 (UAI), Appendix F.1: private against non-private Thompson sampling — DP-TS and
Lazy-DP-TS over ε beside the non-private Beta-Bernoulli Thompson sampling of Agrawal & Goyal
(``ts-beta``), on the main instance (docs/algorithms.md#dp-ts, docs/algorithms.md#lazy-dp-ts,
docs/algorithms.md#beta-thompson-sampling).

The appendix's own text is not in the stored paper; the claims checked are those its main text
makes about the comparison: Remark (b) of Theorem 2 (as ε → ∞ DP-TS becomes Agrawal & Goyal's
algorithm) and the price of privacy it discusses (Ω(K·log T/ε), Shariff & Sheffet 2018).
"""
from __future__ import annotations

import os

from dpledger.experiments.common import (Claim, Summary, band, compare_all, compare_less,
                                         final_regret, non_increasing, plot_regret_panels,
                                         plot_tradeoff, privacy_row)
from dpledger.experiments.overrides import (NO_OVERRIDES, Overrides, first_reason,
                                            outside_instance, outside_levels)
from dpledger.sweep import RunConfig

NAME = "hu-hegde-2022-nonprivate"
TITLE = "Hu & Hegde 2022, App. F.1: DP-TS and Lazy-DP-TS against non-private Thompson sampling"
MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]
EPS = [0.1, 0.25, 0.5, 1.0, 500.0]
PRIVATE = ["dp-ts", "lazy-dp-ts"]
NONPRIVATE = "ts-beta"
T_FULL = 100_000
QUICK_T = 5_000          # --quick: DP-TS's per-round mechanisms make it the slow one
R_FULL = 20
SEED = 2022
CLOSE = 1.25            # "DP-TS at ε = 500 is the non-private algorithm": within 25 %
CHOICES = ["the main instance 0.75, 0.625, 0.5, 0.375, 0.25 and ε ∈ {0.1, 0.25, 0.5, 1, 500} "
           "(the appendix lists them); T = 10⁵ as in Section 4; 20 runs per setting (not stated)",
           "non-private Thompson sampling = Beta-Bernoulli TS with a uniform prior (Agrawal & "
           "Goyal 2017; registry name ts-beta), run once (it has no ε)",
           f"'DP-TS becomes the non-private algorithm as ε grows': at the largest ε its regret "
           f"is within a factor {CLOSE:g} of ts-beta's (our threshold; the appendix's words "
           "were not recovered)",
           "master seed 2022 (that of hu-hegde-2022: the private runs use the same streams)"]
LEVEL_OPTION = "epsilons"
INSTANCES = {"main": {"kind": "bernoulli", "means": MEANS}}
POLICY_NAMES = PRIVATE + [NONPRIVATE]
NAMES = {"dp-ts": "DP-TS", "lazy-dp-ts": "Lazy-DP-TS", "ts-beta": "non-private TS"}


def configs(quick: bool, ov: Overrides = NO_OVERRIDES) -> list[RunConfig]:
    T = ov.horizon if ov.horizon is not None else (QUICK_T if quick else T_FULL)
    R, seed = ov.runs_or(R_FULL, quick), ov.seed_or(SEED)
    env = next(iter(ov.instances_or(INSTANCES).values()))
    out = [RunConfig(f"{pol}-eps{eps:g}", pol, {"epsilon": eps}, env, T, R, seed=seed,
                     tags={"policy": pol, "epsilon": eps})
           for eps in ov.levels_or(EPS, quick) for pol in PRIVATE if ov.keeps(pol)]
    if ov.keeps(NONPRIVATE):
        out.append(RunConfig(NONPRIVATE, NONPRIVATE, {}, env, T, R, seed=seed,
                             tags={"policy": NONPRIVATE, "epsilon": None}))
    return out


def summarize(reports: dict, out: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> Summary:
    grid = ov.levels_or(EPS, quick)
    table, panels, trade = [], {}, {}
    base = reports.get(NONPRIVATE)
    for rep in reports.values():
        tg = rep["tags"]
        m, s = final_regret(rep)
        row = {"policy": tg["policy"], "epsilon": tg["epsilon"], "T": rep["horizon"],
               "runs": rep["runs"], "regret_mean": m, "regret_std": s, **privacy_row(rep)}
        if base is not None:
            row["regret_over_nonprivate"] = m / base["regret"]["final_mean"]
        table.append(row)
        if tg["epsilon"] is not None:
            trade.setdefault(NAMES[tg["policy"]], []).append((tg["epsilon"], m, band(rep)))
    for eps in grid:
        panels[f"ε = {eps:g}"] = ([(NAMES[p], reports[f"{p}-eps{eps:g}"]) for p in PRIVATE
                                   if ov.keeps(p)] + ([(NAMES[NONPRIVATE], base)] if base else []))
    plots = [plot_regret_panels(panels, os.path.join(out, "regret.png"), TITLE)]
    if trade:
        extra = None
        if base is not None:
            extra = {f"non-private TS ({base['regret']['final_mean']:.4g})":
                     ([min(grid), max(grid)], [base["regret"]["final_mean"]] * 2)}
        plots.append(plot_tradeoff(trade, os.path.join(out, "privacy_regret.png"), "ε",
                                   "regret at T against ε, non-private TS dashed", extra=extra,
                                   logy=True))
    return Summary(table=table, plots=plots, claims=_claims(reports, grid, ov))


def _claims(reports: dict, grid: list[float], ov: Overrides) -> list[Claim]:
    why = outside_instance(ov, "0.75, 0.625, 0.5, 0.375, 0.25")
    base = reports.get(NONPRIVATE)
    private = [p for p in PRIVATE if ov.keeps(p)]

    def rep(p, eps):
        return reports[f"{p}-eps{eps:g}"]

    claims = []
    text = "privacy costs regret: non-private TS has the lowest regret at every ε"
    if base is None or not private:
        claims.append(Claim.missing(text, "non-private TS or both private policies not run "
                                          "(--policies)"))
    else:
        ok, ev = compare_all((base, rep(p, eps), "non-private TS", f"{NAMES[p]} (ε={eps:g})")
                             for eps in grid for p in private)
        claims.append(Claim.judged(text, ok, ev,
                                   first_reason(why, outside_levels(grid, EPS, "ε"))))
    big = max(grid)
    text = (f"as ε grows DP-TS becomes non-private TS (Remark (b) of Theorem 2): at ε = {big:g} "
            f"its regret is within ×{CLOSE:g} of non-private TS")
    if base is None or not ov.keeps("dp-ts"):
        claims.append(Claim.missing(text, "DP-TS or non-private TS not run (--policies)"))
    else:
        r, rb = rep("dp-ts", big)["regret"]["final_mean"], base["regret"]["final_mean"]
        _, ev = compare_less(rep("dp-ts", big), base, f"DP-TS (ε={big:g})", "non-private TS")
        lvl = None if big == max(EPS) else (f"the appendix's largest ε is {max(EPS):g}; this "
                                            f"run's is {big:g}")
        claims.append(Claim.judged(text, r <= CLOSE * rb, f"{ev}; ratio {r / rb:.3g}",
                                   first_reason(why, lvl)))
    text = ("the price of privacy shrinks as ε grows: each private policy's regret falls from the "
            "smallest to the largest ε, and its ratio to non-private TS with it")
    if len(grid) < 2 or not private:
        claims.append(Claim.missing(text, f"{len(grid)} ε level, {len(private)} private "
                                          "policies run"))
    else:
        oks, evs = [], []
        for p in private:
            pts = [(e, rep(p, e)["regret"]["final_mean"], band(rep(p, e))) for e in grid]
            oks.append(non_increasing(pts))
            ratios = ("" if base is None else " (×" + ", ×".join(
                f"{m / base['regret']['final_mean']:.3g}" for _, m, _ in pts) + " of non-private)")
            evs.append(f"{NAMES[p]}: " + ", ".join(f"ε={e:g} {m:.4g}" for e, m, _ in pts)
                       + ratios)
        claims.append(Claim.judged(text, all(oks), f"{sum(oks)}/{len(oks)} policies "
                                   "non-increasing within their 95 % bands and lower at the "
                                   "largest ε; " + "; ".join(evs), why))
    return claims
