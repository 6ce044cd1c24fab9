"""Hu et al. 2025 (ICML), Section 5.3 with Appendices E.1 and E.2: regret at *equal privacy*.

* §5.3 / E.1: DP-TS-UCB(α) against M-TS-Gaussian whose c, for each b, is the smallest meeting
  DP-TS-UCB's μ, and whose b is chosen from a grid to minimise its regret — here on *tuning
  streams* separate from the reported ones (:mod:`dpledger.experiments.matched`), where
  hu-2025 fixes b = ⌈ln T⌉.  μ is matched by theorem (the papers' way) and by certificate.
* E.2: the ε-DP algorithms DP-SE, Anytime-Lazy-UCB and Lazy-DP-TS at the ε of DP-TS-UCB's μ
  (by theorem), by the two named currency matchings of :mod:`dpledger.experiments.matched`.

Two privacy settings, as in hu-2025: weak privacy α = 0 and strong privacy α = 1 (the paper's
two settings were lost in the stored text).  docs/algorithms.md#dp-ts-ucb,
docs/algorithms.md#m-ts-gaussian, docs/algorithms.md#dp-se,
docs/algorithms.md#anytime-lazy-ucb, docs/algorithms.md#lazy-dp-ts.
"""
from __future__ import annotations

import os

from dpledger.experiments.common import (MATCHINGS, Claim, Summary, compare_all, compare_less,
                                         finish_figure, gdp_mu_of, new_figure,
                                         plot_regret_panels)
from dpledger.experiments.matched import (CURRENCY_MATCHINGS, MATCHING_TEXT, MTS_B_GRID,
                                          matched_configs, mts_b_grid, select,
                                          tuned_mts_configs, tuned_row, tuning_seed)
from dpledger.experiments.overrides import (NO_OVERRIDES, Overrides, first_reason, n_arms,
                                            outside_instance)
from dpledger.sweep import RunConfig

NAME = "hu-2025-equal-privacy"
TITLE = ("Hu et al. 2025, §5.3 and App. E: DP-TS-UCB against tuned M-TS-Gaussian and the ε-DP "
         "bandits at equal privacy")
MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]
ALPHAS = [0.0, 1.0]
T_FULL = 100_000
R_FULL = 50
C0 = 1.0
SEED = 2025
EPS_POLICIES = ["dp-se", "anytime-lazy-ucb", "lazy-dp-ts"]
SMALL_GAP = 0.5
CHOICES = ["instance: Bernoulli 0.75, 0.625, 0.5, 0.375, 0.25; T = 10⁵; "
           f"{R_FULL} runs (the paper's settings were lost in the stored text)",
           "weak privacy α = 0, strong privacy α = 1 (hu-2025's reading of the paper's two "
           "settings); DP-TS-UCB with c0 = 1 (reconstructed)",
           f"M-TS-Gaussian: b from {list(MTS_B_GRID)} (bK ≤ T/4; the paper's grid was lost), c the "
           "smallest meeting DP-TS-UCB's μ for that b, by theorem and by certificate "
           "(calibration.smallest_parameter); b chosen by the mean regret at T on tuning "
           "streams (master seed + 1), reported on the experiment's streams",
           "ε-DP algorithms at the ε of DP-TS-UCB's μ by theorem: "
           + "; ".join(f"{k}: {v}" for k, v in MATCHING_TEXT.items()),
           "DP-SE β = 1/T, Anytime-Lazy-UCB's reconstructed constants, Lazy-DP-TS as published",
           f"'slightly outperforms … small gap': lower mean regret and a relative gap ≤ "
           f"{SMALL_GAP:g}; 'significantly': lower with the 95 % bands separate",
           "master seed 2025"]
LEVEL_OPTION = "alphas"
INSTANCES = {"main": {"kind": "bernoulli", "means": MEANS}}
POLICY_NAMES = ["dp-ts-ucb", "mts-gaussian", *EPS_POLICIES]
NAMES = {"dp-ts-ucb": "DP-TS-UCB", "mts-gaussian": "M-TS-Gaussian", "dp-se": "DP-SE",
         "anytime-lazy-ucb": "Anytime-Lazy-UCB", "lazy-dp-ts": "Lazy-DP-TS"}


def mts_prefix(basis: str, alpha: float) -> str:
    return f"mts-{basis}-alpha{alpha:g}"


def dp_mu(alpha: float, T: int, K: int, basis: str) -> float:
    return gdp_mu_of("dp-ts-ucb", {"alpha": alpha, "c0": C0}, T, K, basis)


def configs(quick: bool, ov: Overrides = NO_OVERRIDES) -> list[RunConfig]:
    T, R, seed = ov.horizon_or(T_FULL, quick), ov.runs_or(R_FULL, quick), ov.seed_or(SEED)
    env = next(iter(ov.instances_or(INSTANCES).values()))
    K = n_arms(env)
    out = []
    for a in ov.levels_or(ALPHAS, quick):
        if ov.keeps("dp-ts-ucb"):
            out.append(RunConfig(f"dp-ts-ucb-alpha{a:g}", "dp-ts-ucb", {"alpha": a, "c0": C0},
                                 env, T, R, seed=seed,
                                 tags={"policy": "dp-ts-ucb", "alpha": a, "part": "compared"}))
        if ov.keeps("mts-gaussian"):
            for basis in MATCHINGS:
                out += tuned_mts_configs(mts_prefix(basis, a), dp_mu(a, T, K, basis), basis, env,
                                         T, R, seed, quick, {"alpha": a})
        out += matched_configs(lambda pol, m, a=a: f"{pol}-{m}-alpha{a:g}",
                               dp_mu(a, T, K, "theorem"),
                               [p for p in EPS_POLICIES if ov.keeps(p)], env, T, R, seed,
                               {"alpha": a})
    return out


def summarize(reports: dict, out: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> Summary:
    alphas = ov.levels_or(ALPHAS, quick)
    env = next(iter(ov.instances_or(INSTANCES).values()))
    T, K = ov.horizon_or(T_FULL, quick), n_arms(env)
    grid = mts_b_grid(T, K, quick)
    tuned = {(basis, a): select(reports, mts_prefix(basis, a), grid)
             for basis in MATCHINGS for a in alphas if ov.keeps("mts-gaussian")}
    table = [tuned_row(lab, rep, tuned.values(), policy=rep["tags"]["policy"],
                       alpha=rep["tags"]["alpha"],
                       matching=rep["tags"].get("matching") or rep["tags"].get(
                           "currency_matching", ""),
                       budget_mu=rep["tags"].get("budget_mu"), epsilon=rep["tags"].get("epsilon"),
                       **{k: rep["policy"]["params"][k] for k in ("b", "c")
                          if k in rep["policy"]["params"]})
             for lab, rep in reports.items()]
    plots = []
    panels = {}
    for a in alphas:
        for matching in CURRENCY_MATCHINGS:
            lines = []
            if ov.keeps("dp-ts-ucb"):
                lines.append(("DP-TS-UCB", reports[f"dp-ts-ucb-alpha{a:g}"]))
            for basis in MATCHINGS:
                if (basis, a) in tuned:
                    t = tuned[(basis, a)]
                    lines.append((f"M-TS-Gaussian by {basis} (b={t.value}, c="
                                  f"{t.report['policy']['params']['c']:.3g})", t.report))
            for pol in EPS_POLICIES:
                if ov.keeps(pol):
                    rep = reports[f"{pol}-{matching}-alpha{a:g}"]
                    lines.append((f"{NAMES[pol]} (ε={rep['tags']['epsilon']:.3g})", rep))
            panels[f"α = {a:g}, μ (theorem) = {dp_mu(a, T, K, 'theorem'):.3g}; ε-DP by "
                   f"{matching}"] = lines
    if reports:
        plots.append(plot_regret_panels(panels, os.path.join(out, "regret.png"), TITLE))
    if tuned:
        plots.append(_plot_tuning(tuned, grid, alphas, os.path.join(out, "b_grid.png"), T))
    return Summary(table=table, plots=plots,
                   claims=_claims(reports, tuned, alphas, ov, T, K),
                   notes=[f"tuned M-TS-Gaussian, {basis}, α = {a:g}: " + t.evidence()
                          for (basis, a), t in tuned.items()]
                   + [f"tuning streams: master seed {tuning_seed(ov.seed_or(SEED))}; reported "
                      f"streams: {ov.seed_or(SEED)}"])


def _plot_tuning(tuned, grid, alphas, path, T):
    """App. E.1: regret at T against b, on the tuning and on the reported streams."""
    fig, axes = new_figure(len(alphas), 5.5, 4)
    for ax, a in zip(axes, alphas, strict=True):
        for basis in MATCHINGS:
            if (basis, a) not in tuned:
                continue
            t = tuned[(basis, a)]
            line, = ax.plot([b + 1 for b in grid], [t.tuning[b] for b in grid], "o-",
                            label=f"by {basis}: tuning streams")
            ax.plot([b + 1 for b in grid], [t.reported[b] for b in grid], "s--",
                    color=line.get_color(), label=f"by {basis}: reported streams")
            ax.plot([t.value + 1], [t.tuning[t.value]], "k*", markersize=12)
        ax.set(xscale="log", yscale="log", xlabel="b + 1", ylabel="pseudo-regret at T",
               title=f"M-TS-Gaussian at DP-TS-UCB's μ, α = {a:g} (★ chosen)")
    return finish_figure(fig, axes, path, f"App. E.1: choosing b (T = {T:g})")


def _claims(reports, tuned, alphas, ov, T, K) -> list[Claim]:
    why = outside_instance(ov, "0.75, 0.625, 0.5, 0.375, 0.25")
    weak, strong = min(alphas), max(alphas)
    out_weak = None if weak == 0.0 else (f"'weak privacy' is α = 0 in this reproduction; this "
                                         f"run's smallest α is {weak:g}")
    out_strong = None if strong == 1.0 else (f"'strong privacy' is α = 1 in this reproduction; "
                                             f"this run's largest α is {strong:g}")
    dp = {a: reports.get(f"dp-ts-ucb-alpha{a:g}") for a in alphas}
    claims = []
    for basis in MATCHINGS:
        text = (f"§5.3, weak privacy (α = {weak:g}, μ by {basis}): tuned M-TS-Gaussian slightly "
                "outperforms DP-TS-UCB (small gap)")
        if dp[weak] is None or (basis, weak) not in tuned:
            claims.append(Claim.missing(text, "DP-TS-UCB or M-TS-Gaussian not run (--policies)"))
        else:
            t = tuned[(basis, weak)]
            ok, ev = compare_less(t.report, dp[weak], f"M-TS-Gaussian (b={t.value})", "DP-TS-UCB")
            d_, m_ = dp[weak]["regret"]["final_mean"], t.report["regret"]["final_mean"]
            gap = abs(d_ - m_) / max(d_, m_)
            claims.append(Claim.judged(text, bool(ok and gap <= SMALL_GAP),
                                       f"{ev}; relative gap {gap:.2f}; {t.evidence()}",
                                       first_reason(why, out_weak)))
        text = (f"§5.3, strong privacy (α = {strong:g}, μ by {basis}): DP-TS-UCB significantly "
                "outperforms tuned M-TS-Gaussian")
        if dp[strong] is None or (basis, strong) not in tuned:
            claims.append(Claim.missing(text, "DP-TS-UCB or M-TS-Gaussian not run (--policies)"))
        else:
            t = tuned[(basis, strong)]
            ok, ev = compare_less(dp[strong], t.report, "DP-TS-UCB", f"M-TS-Gaussian (b={t.value})")
            claims.append(Claim.judged(text, bool(ok and "bands separate" in ev),
                                       f"{ev}; {t.evidence()}", first_reason(why, out_strong)))
    text = "App. E.1: the best b depends on the privacy level (the tuned b differs between α)"
    chosen = {(basis, a): t.value for (basis, a), t in tuned.items()}
    if len(alphas) < 2 or not tuned:
        claims.append(Claim.missing(text, f"{len(alphas)} α level or M-TS-Gaussian not run"))
    else:
        ok = all(len({chosen[(basis, a)] for a in alphas}) > 1 for basis in MATCHINGS)
        claims.append(Claim.judged(text, ok, "; ".join(
            f"by {basis}: " + ", ".join(f"α={a:g} b={chosen[(basis, a)]}" for a in alphas)
            for basis in MATCHINGS), why))
    eps_run = [p for p in EPS_POLICIES if ov.keeps(p)]
    for matching in CURRENCY_MATCHINGS:
        def eps_rep(pol, a, matching=matching):
            return reports[f"{pol}-{matching}-alpha{a:g}"]

        def eps_name(pol, a):
            return f"{NAMES[pol]} (ε={eps_rep(pol, a)['tags']['epsilon']:.4g})"
        text = (f"App. E.2 ({matching}), weak privacy (α = {weak:g}): DP-TS-UCB and M-TS-Gaussian "
                "both outperform DP-SE, Anytime-Lazy-UCB and Lazy-DP-TS")
        if dp[weak] is None or ("theorem", weak) not in tuned or not eps_run:
            claims.append(Claim.missing(text, "a GDP policy or every ε-DP policy not run "
                                              "(--policies)"))
        else:
            gdp_side = [("DP-TS-UCB", dp[weak]),
                        ("M-TS-Gaussian (tuned, theorem)", tuned[("theorem", weak)].report)]
            ok, ev = compare_all((rep, eps_rep(pol, weak), name, eps_name(pol, weak))
                                 for name, rep in gdp_side for pol in eps_run)
            claims.append(Claim.judged(text, ok, ev, first_reason(why, out_weak)))
        text = (f"App. E.2 ({matching}), strong privacy (α = {strong:g}): M-TS-Gaussian performs "
                "worse than the ε-DP algorithms")
        if ("theorem", strong) not in tuned or not eps_run:
            claims.append(Claim.missing(text, "M-TS-Gaussian or every ε-DP policy not run "
                                              "(--policies)"))
        else:
            t = tuned[("theorem", strong)]
            ok, ev = compare_all((eps_rep(pol, strong), t.report, eps_name(pol, strong),
                                  f"M-TS-Gaussian (tuned, theorem, b={t.value})")
                                 for pol in eps_run)
            claims.append(Claim.judged(text, ok, ev, first_reason(why, out_strong)))
        text = (f"App. E.2 ({matching}), strong privacy (α = {strong:g}): DP-TS-UCB still "
                "outperforms Anytime-Lazy-UCB")
        if dp[strong] is None or not ov.keeps("anytime-lazy-ucb"):
            claims.append(Claim.missing(text, "DP-TS-UCB or Anytime-Lazy-UCB not run "
                                              "(--policies)"))
        else:
            ok, ev = compare_less(dp[strong], eps_rep("anytime-lazy-ucb", strong), "DP-TS-UCB",
                                  eps_name("anytime-lazy-ucb", strong))
            claims.append(Claim.judged(text, ok, ev, first_reason(why, out_strong)))
    return claims
