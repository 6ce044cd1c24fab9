"""Azize & Basu 2022 (NeurIPS), Theorem 5: linear policies' regret against the problem-dependent
linear lower bound (issue 34 §5; docs/bounds.md, docs/algorithms.md#adac-gope).

The theorem's setting: a finite action set spanning ℝ^d, a unique optimal action, rewards
⟨a, θ⟩ + N(0, 1).  The instance is ``linear-fixed`` (d = 5, K = 20 arms drawn once from the
seed) with Gaussian noise σ = 1 (``--noise-sd 1``); the policies see rewards clipped to
[−3, 4] (their privacy assumes bounded rewards; regret is the means' pseudo-regret).

The bound drawn is c(A, θ)·ln t, c the program of eq. (6) at ε = ∞ (Graves–Lai), which binds
every consistent policy, private or not: the private constraint needs ρ_a(A), which the paper's
main text does not state, so the ε-dependent part is not drawn
(:func:`~dpledger.policies.regret_bounds.azize_basu_2022_linear_problem_dependent`).  The bound
is asymptotic (liminf Reg_T/ln T ≥ c): the claims report regret ÷ bound and Reg_T/ln T against
c at the run's T, a finite-T comparison only.

Policies: LinUCB (non-private), DP-GOPE of Hanna et al. (pure ε-DP: the class Theorem 5 is
about), AdaC-GOPE and reward-DP LinUCB (zCDP / (ε, δ): no finite pure ε, so only the
non-private bound binds them, which is the one drawn).
"""
from __future__ import annotations

import math
import os

from dpledger.errors import DpledgerError
from dpledger.experiments.common import Claim, Summary, final_regret, plot_regret_panels
from dpledger.experiments.overrides import NO_OVERRIDES, Overrides
from dpledger.sweep import RunConfig

NAME = "azize-basu-2022-linear"
TITLE = ("Azize & Basu 2022, Theorem 5: linear policies on a Gaussian linear bandit against "
         "the problem-dependent lower bound")
T_FULL = 100_000
R_FULL = 10
SEED = 2022
EPS = [1.0]
DELTA = 1e-6
LEVEL_OPTION = "epsilons"
# policy → how its privacy level is set: "pure" ε, "ed" (ε, δ = DELTA), None non-private
POLICIES = {"linucb": None, "dp-gope-hanna": "pure", "adac-gope": "ed",
            "reward-dp-linucb": "ed"}
POLICY_NAMES = list(POLICIES)
INSTANCES = {"gaussian": {"kind": "linear", "fixed": True, "dim": 5, "arms": 20, "seed": SEED,
                          "noise_sd": 1.0, "range": [-3.0, 4.0]}}
CHOICES = [f"T = {T_FULL:,}, {R_FULL} runs (full size); --quick: T ≤ 2·10⁴, R ≤ 3",
           "instance: linear-fixed, d = 5, K = 20, θ and the arm set drawn from seed 2022, "
           "N(0, 1) reward noise (the theorem's), rewards clipped to [−3, 4] for the policies",
           f"privacy: ε = 1 (pure for dp-gope-hanna; (ε, δ = {DELTA:g}) for adac-gope and "
           "reward-dp-linucb)",
           "the bound at ε = ∞ (ρ_a(A) of the private constraint is not stated by the paper)",
           f"master seed {SEED}"]


def check_overrides(ov: Overrides) -> None:
    if ov.instance is not None:
        raise DpledgerError(f"{NAME} runs a linear instance (--instance "
                            f"{', '.join(INSTANCES)}), not a custom K-armed instance")


def _params(policy: str, eps: float) -> dict:
    how = POLICIES[policy]
    return {} if how is None else {"epsilon": eps} if how == "pure" else {"epsilon": eps,
                                                                         "delta": DELTA}


def label(policy: str, eps: float | None) -> str:
    return policy if eps is None else f"{policy}-eps{eps:g}"


def configs(quick: bool, ov: Overrides = NO_OVERRIDES) -> list[RunConfig]:
    check_overrides(ov)
    T, R = ov.horizon_or(T_FULL, quick), ov.runs_or(R_FULL, quick)
    seed = ov.seed_or(SEED)
    grid = list(ov.levels) if ov.levels is not None else EPS
    out = []
    for inst, spec in ov.instances_or(INSTANCES).items():
        for pol, how in POLICIES.items():
            if not ov.keeps(pol):
                continue
            for eps in ([None] if how is None else grid):
                # the environment's seed is the run's, so verify rebuilds the same arm set
                out.append(RunConfig(label(pol, eps), pol, _params(pol, eps) if eps else {},
                                     dict(spec, seed=seed), T, R, seed=seed,
                                     tags={"policy": pol, "epsilon": eps, "instance": inst}))
    return out


def summarize(reports: dict, out: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> Summary:
    from dpledger.plots import regret_over_bounds
    table, claims = [], []
    for lab, rep in reports.items():
        m, s = final_regret(rep)
        row = {"policy": rep["tags"]["policy"], "epsilon": rep["tags"]["epsilon"],
               "T": rep["horizon"], "runs": rep["runs"], "regret_mean": m, "regret_std": s}
        ratios = regret_over_bounds(rep)
        if ratios:
            b, v, r = ratios[0]
            c = v / math.log(rep["horizon"])
            row.update(thm5_c=c, thm5_bound=v, regret_over_bound=r,
                       regret_over_lnT=m / math.log(rep["horizon"]))
            claims.append(_claim(lab, rep, m, c, v, r))
        else:
            claims.append(Claim.missing(f"{lab}: regret ≥ Theorem 5's c·ln T (asymptotic)",
                                        "no Theorem 5 bound for this environment (Gaussian "
                                        "noise σ = 1 on linear-fixed only)"))
        table.append(row)
    groups = {"all policies": [(lab, rep) for lab, rep in sorted(reports.items())]}
    plots = [plot_regret_panels(groups, os.path.join(out, "regret.png"),
                                "Azize & Basu 2022, Theorem 5 on a Gaussian linear bandit")]
    notes = ["Theorem 5's bound is asymptotic (a liminf of Reg_T/ln T): regret ÷ bound at the "
             "run's T is a finite-T comparison, not a test of the theorem",
             "the private constraint of eq. (6) needs ρ_a(A), which the paper's main text does "
             "not state: the bound drawn is the ε = ∞ program (Graves–Lai), sound for every ε"]
    return Summary(table=table, plots=plots, claims=claims, notes=notes)


def _claim(lab: str, rep: dict, m: float, c: float, v: float, r: float) -> Claim:
    """Regret against the bound, reported (asymptotic: not judged at finite T); the first clause,
    regret ÷ bound, is the deciding number of the claims table."""
    T = rep["horizon"]
    claim = Claim(f"{lab}: regret at least Theorem 5's c(A, θ)·ln T (asymptotic; a finite-T "
                  "comparison only)", None,
                  f"regret ÷ bound = {r:.3g}; regret {m:.4g}, bound c·ln T = {v:.4g} with "
                  f"c = {c:.4g}; Reg_T/ln T = {m / math.log(T):.4g} against c = {c:.4g}")
    return claim
