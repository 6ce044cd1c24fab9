"""Hu & Hegde 2022 (UAI), Section 4 and Appendix F.2 (docs/algorithms.md#dp-ts,
docs/algorithms.md#lazy-dp-ts)."""
from __future__ import annotations

import os

from dpledger.experiments.common import (Claim, Summary, band, compare_less, final_regret,
                                         plot_regret_panels, plot_tradeoff, privacy_row)
from dpledger.experiments.overrides import (NO_OVERRIDES, Overrides, first_reason,
                                            outside_instance, outside_levels)
from dpledger.sweep import RunConfig

NAME = "hu-hegde-2022"
TITLE = "Hu & Hegde 2022: DP-TS, Lazy-DP-TS, DP-SE, Anytime-Lazy-UCB"
MAIN = [0.75, 0.625, 0.5, 0.375, 0.25]
APPENDIX = [0.8, 0.05, 0.05, 0.05, 0.05]
EPS_MAIN = [0.1, 0.25, 0.5, 1.0, 500.0]
EPS_APPENDIX = [0.5, 1.0, 500.0]
POLICIES = ["dp-ts", "lazy-dp-ts", "dp-se", "anytime-lazy-ucb"]
T_FULL = 100_000
R_FULL = 20
SEED = 2022
CHOICES = ["20 runs per setting (the paper does not state its number of runs)",
           "DP-SE with β = 1/T (as Azize & Basu); Anytime-Lazy-UCB with the reconstructed "
           "constants of docs/algorithms.md#anytime-lazy-ucb (the paper does not state either)",
           "master seed 2022; run i uses SeedSequence(seed, spawn_key=(i,))"]
# what the overrides address (dpledger.experiments.overrides)
LEVEL_OPTION = "epsilons"
INSTANCES = {"main": {"kind": "bernoulli", "means": MAIN},
             "appendix": {"kind": "bernoulli", "means": APPENDIX}}
GRIDS = {"main": EPS_MAIN, "appendix": EPS_APPENDIX}
POLICY_NAMES = POLICIES
PAPER_INSTANCES = "main 0.75, 0.625, 0.5, 0.375, 0.25 and appendix 0.8, 0.05×4"


def grids(quick: bool, ov: Overrides) -> dict[str, list[float]]:
    """instance → the ε grid it runs (an overridden grid on every instance)."""
    insts = ov.instances_or(INSTANCES)
    return {i: ov.levels_or(GRIDS.get(i, EPS_MAIN), quick) for i in insts}


def configs(quick: bool, ov: Overrides = NO_OVERRIDES) -> list[RunConfig]:
    T, R = ov.horizon_or(T_FULL, quick), ov.runs_or(R_FULL, quick)
    out = []
    for inst, grid in grids(quick, ov).items():
        env = ov.instances_or(INSTANCES)[inst]
        for eps in grid:
            for pol in POLICIES:
                if not ov.keeps(pol):
                    continue
                out.append(RunConfig(f"{inst}-{pol}-eps{eps:g}", pol, {"epsilon": eps},
                                     env, T, R, seed=ov.seed_or(SEED),
                                     tags={"instance": inst, "epsilon": eps, "policy": pol}))
    return out


def summarize(reports: dict, out: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> Summary:
    table, groups, trade = [], {}, {}
    first = next(iter(grids(quick, ov)))        # the instance of the trade-off plot
    for rep in reports.values():
        tg = rep["tags"]
        m, s = final_regret(rep)
        table.append({"instance": tg["instance"], "policy": tg["policy"], "epsilon": tg["epsilon"],
                      "T": rep["horizon"], "runs": rep["runs"], "regret_mean": m, "regret_std": s,
                      **privacy_row(rep)})
        groups.setdefault(f"{tg['instance']}, ε = {tg['epsilon']:g}", []).append((tg["policy"], rep))
        if tg["instance"] == first:
            trade.setdefault(tg["policy"], []).append((tg["epsilon"], m, band(rep)))
    plots = [plot_regret_panels(groups, os.path.join(out, "regret.png"), TITLE),
             plot_tradeoff(trade, os.path.join(out, "privacy_regret.png"), "ε",
                           f"{first} instance: regret at T against ε")]
    return Summary(table=table, plots=plots, claims=_claims(reports, quick, ov))


def _claims(reports: dict, quick: bool, ov: Overrides) -> list[Claim]:
    g = grids(quick, ov)
    inst_out = outside_instance(ov, PAPER_INSTANCES)
    main = "custom" if ov.instance is not None else "main"

    def rep(inst, pol, eps):
        return reports.get(f"{inst}-{pol}-eps{eps:g}")

    def judge(text, pairs, paper_eps, at):
        """``pairs``: (a, b, name_a, name_b) policy pairs on the main instance at ε = ``at``;
        the claim holds when a < b for every pair."""
        if main not in g:
            return Claim.missing(text, "the main instance not run (--instance)")
        missing = sorted({p for a, b, _, _ in pairs for p in (a, b)
                          if rep(main, p, at) is None})
        if missing:
            return Claim.missing(text, f"{', '.join(missing)} not run (--policies)")
        oks, evs = [], []
        for a, b, na, nb in pairs:
            ok, ev = compare_less(rep(main, a, at), rep(main, b, at), na, nb)
            oks.append(ok)
            evs.append(ev)
        lvl = None if at == paper_eps else (f"the paper states it at ε = {paper_eps:g}; this "
                                            f"run's ε is {at:g}")
        return Claim.judged(text, all(oks), "; ".join(evs), first_reason(inst_out, lvl))

    claims = []
    big = max(g.get(main, EPS_MAIN))
    claims.append(judge(f"at ε = {big:g}, DP-TS outperforms Lazy-DP-TS",
                        [("dp-ts", "lazy-dp-ts", "DP-TS", "Lazy-DP-TS")], max(EPS_MAIN), big))
    claims.append(judge(f"at ε = {big:g}, the Thompson-sampling policies outperform the UCB and "
                        "elimination policies",
                        [(ts, o, ts, o) for ts in ("dp-ts", "lazy-dp-ts")
                         for o in ("dp-se", "anytime-lazy-ucb")], max(EPS_MAIN), big))
    text = "Lazy-DP-TS always outperforms DP-SE and Anytime-Lazy-UCB (ε ≤ 1)"
    oks, evs, used = [], [], []
    for inst, grid in g.items():
        for eps in grid:
            if eps > 1:
                continue
            for other in ("dp-se", "anytime-lazy-ucb"):
                a, b = rep(inst, "lazy-dp-ts", eps), rep(inst, other, eps)
                if a is None or b is None:
                    continue
                ok, ev = compare_less(a, b, f"Lazy-DP-TS ({inst}, ε={eps:g})", other)
                oks.append(ok)
                evs.append(ev)
                used.append(eps)
    if not oks:
        claims.append(Claim.missing(text, "no ε ≤ 1 cell with Lazy-DP-TS and DP-SE or "
                                          "Anytime-Lazy-UCB"))
    else:
        claims.append(Claim.judged(text, all(oks), f"{sum(oks)}/{len(oks)} comparisons hold; "
                                   + "; ".join(evs),
                                   first_reason(inst_out, outside_levels(used, EPS_MAIN, "ε"))))
    small = min(g.get(main, EPS_MAIN))
    claims.append(judge(f"at ε = {small:g}, DP-TS is inferior to the other three",
                        [(o, "dp-ts", o, "DP-TS") for o in ("lazy-dp-ts", "dp-se",
                                                            "anytime-lazy-ucb")],
                        min(EPS_MAIN), small))
    return claims
