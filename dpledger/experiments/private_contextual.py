"""Every private contextual policy at the same certified (ε, δ) (issue 32 §4): mean reward over
uniform play, and the *lift* over uniform play against the non-private policy's, on digits and
the linear environment; regret against ε.

**The common target.**  Each policy is set so that dpledger's certificate of a record (or, for
the reward-private ones, of a reward) is (ε, δ) at δ = 10⁻⁶: ``jdp-linucb`` with
``calibration=accounted``, ``episode-linucb``, ``reward-dp-linucb`` and ``adac-oful`` solve
their σ for (ε, δ); ``dp-linucb-mt`` / ``dp-lints-mt`` are pure ε-DP with ε₀ = ε/S
(S = d(d+1)/2 + d statistics, basic composition), and a pure ε certifies (ε, δ) for every δ.
Record-private and reward-private policies protect different things (docs/concepts.md): the
table says which, and each is compared with the non-private policy it privatises (LinUCB; LinTS
for ``dp-lints-mt``).

**Numbers.**  Normalised mean reward = mean reward / uniform play's (uniform = 1); lift =
normalised − 1; lift ratio = private lift / non-private lift (what "not much worse" means when
uniform play is 1), its band by the delta method from the two ± 1.96·sd/√R bands.

**Instances.**  ``digits`` (scikit-learn's handwritten digits, d = 64, K = 10,
supervised-to-bandit) and ``linear`` (the synthetic linear bandit, d = 10, K = 10).  Further
instances go in :data:`EXTRA_INSTANCES` (a spec of :func:`dpledger.sweep.make_env` with its
context dimension under ``"dim"``): it holds the Mishra–Thakurta §5.1-shaped 6-dimensional
instance ``digits6`` (issue 32 §1; its online form, the same seed as
``mishra-thakurta-2015-contextual``), which runs with every policy and level here.

**Claims** (fixed before any run; the policies at their defaults):

1. [digits] ``episode-linucb``'s lift ≥ 1.5 × ``jdp-linucb``'s at every ε (record-private,
   same certificate);
2. [digits] ``adac-oful``'s mean reward ≥ 0.9 × LinUCB's at ε = 1 (reward-private);
3. [every instance] every private policy's certified ε at δ is at most the target.
"""
from __future__ import annotations

import math
import os

from dpledger.experiments.common import (Claim, Summary, final_regret, plot_tradeoff,
                                         privacy_row, ratio_band)
from dpledger.experiments.mishra_thakurta_2015_contextual import DIGITS6_SEED
from dpledger.experiments.overrides import NO_OVERRIDES, Overrides, outside_levels
from dpledger.errors import DpledgerError
from dpledger.sweep import RunConfig

NAME = "private-contextual"
TITLE = ("Private contextual policies at the same certified (ε, δ): mean reward over uniform "
         "play and lift against the non-private policy (digits, digits6, linear)")
T_FULL = 100_000
R_FULL = 10
T_QUICK = 1_000          # the tree policies run ~3·10³ rounds/s at d = 64, K = 10
R_QUICK = 2
EPS = [1.0, 2.7, 8.0]
DELTA = 1e-6
SEED = 32
LIFT_RATIO = 1.5
NOT_MUCH_WORSE = 0.9

# variant → (policy, how its target is set, privacy model): "ed" = (ε, δ), "jdp" = (ε, δ) with
# calibration=accounted, "total" = ε₀ = ε/S; None = non-private
VARIANTS = {
    "linucb": ("linucb", None, "none"),
    "lints": ("lints", None, "none"),
    "jdp-linucb": ("jdp-linucb", "jdp", "record-private"),
    "dp-linucb-mt": ("dp-linucb-mt", "total", "record-private"),
    "dp-lints-mt": ("dp-lints-mt", "total", "record-private"),
    "episode-linucb": ("episode-linucb", "ed", "record-private"),
    "reward-dp-linucb": ("reward-dp-linucb", "ed", "reward-private"),
    "adac-oful": ("adac-oful", "ed", "reward-private"),
}
BASELINE = {"dp-lints-mt": "lints"}          # otherwise linucb
LEVEL_OPTION = "epsilons"
POLICY_NAMES = list(VARIANTS)
BUILTIN_INSTANCES = {"digits": {"kind": "supervised", "dataset": "digits", "dim": 64},
                     "linear": {"kind": "linear", "dim": 10, "arms": 10, "seed": SEED}}
# issue 32 §1's Mishra–Thakurta §5.1-shaped instance (name → spec with "dim"): digits6's online
# form (d = 6, 20 arms, click rates of a few per cent; policies/contextual/digits6.py), whose
# rounds have the law of a uniformly logged replay's accepted events; at ε = 2.7 the
# Mishra–Thakurta pair runs the paper's ε₀ = 2.7 / 27 = 0.1
EXTRA_INSTANCES: dict[str, dict] = {
    "digits6": {"kind": "digits6-online", "seed": DIGITS6_SEED, "dim": 6}}


def instance_specs() -> dict[str, dict]:
    return {**BUILTIN_INSTANCES, **EXTRA_INSTANCES}


INSTANCES = instance_specs()
CHOICES = [
    f"T = {T_FULL:,} rounds, {R_FULL} runs per cell (full size); --quick: T = {T_QUICK:,}, "
    f"{R_QUICK} runs",
    f"one certified target per level: (ε, δ = {DELTA:g}), ε ∈ {EPS}; pure-ε policies at "
    "ε₀ = ε/S",
    "every policy at its defaults (jdp-linucb: calibration=accounted); tuned settings are "
    "benchmarks/bench_episodes.py's, not this experiment's",
    "digits: contexts the 64 pixel features scaled to norm 1, resampled i.i.d.; linear: d = 10, "
    f"K = 10, θ drawn from seed {SEED}",
    f"claims: lift ratio ≥ {LIFT_RATIO} (episode-linucb / jdp-linucb, digits, every ε); mean "
    f"reward ≥ {NOT_MUCH_WORSE} × LinUCB's (adac-oful, digits, ε = 1)",
    f"master seed {SEED}"]


def check_overrides(ov: Overrides) -> None:
    if ov.instance is not None:
        raise DpledgerError(f"{NAME} runs contextual instances (--instance "
                            f"{', '.join(INSTANCES)}), not a custom K-armed instance")


def statistics(d: int) -> int:
    return d * (d + 1) // 2 + d


def variant_params(variant: str, eps: float | None, d: int) -> dict:
    how = VARIANTS[variant][1]
    if how == "total":
        return {"epsilon0": eps / statistics(d)}
    if how == "jdp":
        return {"calibration": "accounted", "epsilon": eps, "delta": DELTA}
    if how == "ed":
        return {"epsilon": eps, "delta": DELTA}
    return {}


def label(variant: str, eps: float | None, inst: str) -> str:
    return f"{variant}{'' if eps is None else f'-eps{eps:g}'}-{inst}"


def _env_spec(spec: dict) -> dict:
    """The sweep's environment spec: the instance's, less the "dim" only the linear kind reads."""
    return {k: v for k, v in spec.items() if not (k == "dim" and spec["kind"] != "linear")}


def configs(quick: bool, ov: Overrides = NO_OVERRIDES) -> list[RunConfig]:
    insts = ov.instances_or(instance_specs())
    R = ov.runs if ov.runs is not None else (R_QUICK if quick else R_FULL)
    T = ov.horizon if ov.horizon is not None else (T_QUICK if quick else T_FULL)
    seed = ov.seed_or(SEED)
    eps_grid = list(ov.levels) if ov.levels is not None else EPS
    cells = [(inst, spec, var, eps) for inst, spec in insts.items()
             for var, (_, how, _) in VARIANTS.items() if ov.keeps(var)
             for eps in (eps_grid if how else [None])]
    return [RunConfig(label(var, eps, inst), VARIANTS[var][0],
                      variant_params(var, eps, spec["dim"]), _env_spec(spec), T, R, seed=seed,
                      tags={"variant": var, "policy": VARIANTS[var][0], "instance": inst,
                            "epsilon": eps, "privacy_model": VARIANTS[var][2]})
            for inst, spec, var, eps in cells]


# -- summary --------------------------------------------------------------------------------------

def _reward(rep: dict) -> tuple[float, float]:
    """(normalised mean reward, its 95 % half-band)."""
    rw = rep["reward"]
    uni = rw["uniform_mean_reward"]
    runs = [v for v in rw["per_run"] if v is not None]
    if not uni or not runs:
        return math.nan, math.nan
    mean = math.fsum(runs) / len(runs)
    half = (1.96 * math.sqrt(math.fsum((v - mean) ** 2 for v in runs) / (len(runs) - 1)
                             / len(runs)) if len(runs) > 1 else math.nan)
    return mean / uni, half / uni


def lift_ratio(a: dict, b: dict) -> tuple[float, float]:
    """(lift of a / lift of b, its half-band by the delta method)."""
    na, ha = _reward(a)
    nb, hb = _reward(b)
    if not nb > 1.0:
        return math.nan, math.nan
    return ratio_band(na - 1.0, ha, nb - 1.0, hb)


def summarize(reports: dict, out: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> Summary:
    insts = ov.instances_or(instance_specs())
    eps_grid = list(ov.levels) if ov.levels is not None else EPS
    by_key = {(r["tags"]["variant"], r["tags"]["epsilon"], r["tags"]["instance"]): r
              for r in reports.values()}
    table = []
    for (var, eps, inst), rep in sorted(by_key.items(), key=lambda kv: (
            kv[0][2], kv[0][0], kv[0][1] or 0.0)):
        norm, half = _reward(rep)
        row = {"instance": inst, "variant": var, "privacy_model": rep["tags"]["privacy_model"],
               "epsilon": eps, "delta": DELTA if eps is not None else None,
               "T": rep["horizon"], "runs": rep["runs"],
               "mean_reward": rep["reward"]["mean_reward"], "normalised_to_uniform": norm,
               "normalised_band95": half, "lift": norm - 1.0}
        base = by_key.get((BASELINE.get(var, "linucb"), None, inst))
        if eps is not None and base is not None:
            row["lift_ratio_vs_nonprivate"], row["lift_ratio_band95"] = lift_ratio(rep, base)
        if rep["regret"].get("final_mean") is not None:
            row["regret_mean"], row["regret_std"] = final_regret(rep)
        row.update(privacy_row(rep, f"{DELTA:g}"))
        # an undefined number (a lift ratio whose non-private lift is not above 0, a band of one
        # run) is written as null, not NaN (JSON has no NaN)
        table.append({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                      for k, v in row.items()})
    why = outside_levels(eps_grid, EPS, "ε", exact=True)
    claims = _claims(by_key, insts, eps_grid, why)
    plots = [_plot(by_key, inst, eps_grid, os.path.join(out, f"regret-{inst}.png"))
             for inst in insts]
    notes = []
    if quick:
        notes.append(f"--quick: T = {T_QUICK:,}, {R_QUICK} runs — claims judged at this size "
                     "are indicative only")
    return Summary(table=table, plots=plots, claims=claims, notes=notes)


def _fmt(rep) -> str:
    n, h = _reward(rep)
    return f"{n:.3g} ± {h:.2g}"


def _claims(by_key, insts, eps_grid, why) -> list[Claim]:
    out = []
    text = (f"[digits] episode-linucb's lift over uniform play ≥ {LIFT_RATIO} × jdp-linucb's at "
            f"the same certified (ε, δ = {DELTA:g}), every ε")
    cells, evs = [], []
    for eps in eps_grid:
        a = by_key.get(("episode-linucb", eps, "digits"))
        b = by_key.get(("jdp-linucb", eps, "digits"))
        if a is None or b is None:
            continue
        r, h = lift_ratio(a, b)
        la, lb = _reward(a)[0] - 1.0, _reward(b)[0] - 1.0
        # jdp-linucb no better than uniform play: any positive lift is "≥ 1.5×" its lift
        cells.append(la >= LIFT_RATIO * lb if lb > 0 else la > 0)
        ratio = (f"lift ratio {r:.3g} ± {h:.2g}" if lb > 0 else
                 "lift ratio undefined: jdp-linucb's lift is not above 0")
        evs.append(f"ε={eps:g}: {_fmt(a)} vs {_fmt(b)} ({ratio})")
    out.append(Claim.judged(text, all(cells), f"{sum(cells)}/{len(cells)} cells; normalised "
                            "mean reward ± 95 % band: " + "; ".join(evs), why) if cells
               else Claim.missing(text, "episode-linucb or jdp-linucb not run on digits"))
    text = (f"[digits] adac-oful's mean reward ≥ {NOT_MUCH_WORSE} × LinUCB's at ε = 1 "
            f"(δ = {DELTA:g}, rewards private)")
    a, b = by_key.get(("adac-oful", 1.0, "digits")), by_key.get(("linucb", None, "digits"))
    if a is None or b is None:
        out.append(Claim.missing(text, "adac-oful at ε = 1 or linucb not run on digits"))
    else:
        ra, rb = a["reward"]["mean_reward"], b["reward"]["mean_reward"]
        out.append(Claim.judged(text, ra >= NOT_MUCH_WORSE * rb,
                                f"{ra:.4g} vs {rb:.4g} (ratio {ra / rb:.3g}); normalised "
                                f"{_fmt(a)} vs {_fmt(b)}", None))
    for inst in insts:
        text = (f"[{inst}] every private policy's certified ε at δ = {DELTA:g} is at most the "
                "target ε")
        bad, n = [], 0
        for (var, eps, i), rep in by_key.items():
            if i != inst or eps is None:
                continue
            n += 1
            got = rep["privacy"]["certificate"]["epsilon_at_delta"].get(f"{DELTA:g}")
            pure = rep["privacy"]["certificate"]["pure_epsilon"]
            val = pure if pure is not None else got
            if val is None or val > eps * (1 + 1e-9):
                bad.append(f"{var} at ε={eps:g}: {val}")
        out.append(Claim.judged(text, not bad, f"{n - len(bad)}/{n} cells"
                                + (": " + "; ".join(bad) if bad else ""), None) if n
                   else Claim.missing(text, "no private policy run"))
    return out


def _plot(by_key, inst, eps_grid, path) -> str:
    series = {}
    for var, (_, how, _) in VARIANTS.items():
        if how is None:
            continue
        pts = []
        for eps in eps_grid:
            rep = by_key.get((var, eps, inst))
            if rep is not None and rep["regret"].get("final_mean") is not None:
                m, s = final_regret(rep)
                pts.append((eps, m, 1.96 * s / math.sqrt(rep["runs"])))
        if pts:
            series[var] = pts
    extra = {}
    for base in ("linucb", "lints"):
        rep = by_key.get((base, None, inst))
        if rep is not None and rep["regret"].get("final_mean") is not None and eps_grid:
            m = final_regret(rep)[0]
            extra[f"{base} (non-private)"] = ([min(eps_grid), max(eps_grid)], [m, m])
    return plot_tradeoff(series, path, "certified ε (δ = 1e-6)",
                         f"{inst}: regret at T against the certified ε", extra=extra)
