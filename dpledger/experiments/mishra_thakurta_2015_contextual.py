"""Mishra & Thakurta 2015 (UAI), Section 5.1: private contextual UCB and Thompson sampling
against their non-private counterparts, with feedback delays of 0, 100 and 1000 rounds, at a
total ε of 2.7 (issue 22 §7).

The paper's only real-data experiment replays logged news-recommendation traffic (6-dimensional
features, ε₀ = 0.1 per released parameter: 21 Gram entries + 6 entries of Σ r·x = 27 parameters,
27 × 0.1 = 2.7) and reports the click-through rate normalised to uniform play.  Their log is not
public; we run the same comparison on two data sets the toolkit can read:

* **digits** (scikit-learn's 8×8 handwritten digits, supervised-to-bandit: 10 arms = classes,
  reward 1 when the arm is the label, d = 64, contexts resampled i.i.d.; exact regret);
* **digits6** (and **digits6-online**, its online form), the paper's shape (issue 32 §1; :mod:`dpledger.policies.contextual.digits6`): a
  uniformly logged click log generated from a seed and replayed — 6-dimensional contexts (the
  digits projected by a fixed PCA on 5 components, plus a constant), 20 arms, a click rate of
  3.4 % (an oracle would reach 1.89× that), the log's rows generated on demand so that a run
  can accept 10⁴ … 2·10⁶ events (20 log rows per accepted event; the paper's log had 4.6·10⁷
  visits).  At d = 6 the two readings of ε = 2.7 coincide (ε₀ = 2.7/27 = 0.1), so the
  per-parameter variants are not run there.  Swept over the accepted events n; the claims are
  judged at the largest n;
* **obd**, the Open Bandit Dataset sample (Saito, Aihara, Matsutani & Narita, arXiv 2008.07146;
  ``dpledger data fetch obd``): 10 000 uniformly logged rows, 80 items, d = 24, replayed (Li,
  Chu, Langford & Wang 2011).  A replay accepts about one row in 80: **about 125 accepted rows
  per run**, with clicks rare (38 in the whole log): an end-to-end case on real logged data, not
  a test with statistical power.

**What ε = 2.7 means at d = 64.**  The record-private policies (``dp-linucb-mt``,
``dp-lints-mt``, reconstructed: :mod:`dpledger.policies.contextual.private`) release
S = d(d+1)/2 + d statistics, each at ε₀ (basic composition: ε = S·ε₀ per record).  At d = 6,
"ε₀ = 0.1 per parameter" and "ε = 2.7 in total" are the same setting; at d = 64 (S = 2144) and
d = 24 (S = 324) they part.  We call **the total ε = 2.7 "the paper's" reading** — it is the
privacy guarantee the paper's experiment states — so ε₀ = 2.7/S (0.00126 on digits, 0.00833 on
OBD), and run **the per-parameter reading ε₀ = 0.1** beside it (total ε = 214.4 on digits,
32.4 on OBD: a much weaker guarantee).  ``jdp-linucb`` (Shariff & Sheffet 2018, Gaussian mode,
σ solved with dpledger's accountant, ``calibration=accounted``) runs beside them at
(ε, δ) = (2.7, 0.1).

**Lifts.**  Beside the ratio of mean rewards, every pair's *lift ratio* (p − 1)/(b − 1), p and
b the private and non-private mean rewards normalised to uniform play's (:func:`lift_ratio`): the
share of the non-private policy's gain over uniform play that the private one keeps.  Uniform
play is 1, so a private policy that learns nothing has ratio of means 1/b but lift ratio 0.

**Noise against signal** (:func:`noise_signal`): per statistic entry, the standard deviation of
the Laplace noise a tree prefix carries against the entry's expected value per arm after n
records under uniform play — printed with the claims, it says why the reconstruction cannot
learn on digits (d = 64) and how far it is from learning on digits6.

**The paper's two claims, and what we count as confirming them** (fixed before any run):

1. "private not much worse than non-private": for each pair (``dp-linucb-mt``, ``linucb``) and
   (``dp-lints-mt``, ``lints``) and each delay, the private policy's mean reward is at least
   0.9 × its non-private counterpart's (equivalently, on rewards normalised to uniform play);
   judged at the paper's reading, the per-parameter reading and ``jdp-linucb`` reported beside.
2. "delay hurts the non-private more": for each pair and each delay D ∈ {100, 1000}, the loss of
   normalised mean reward from delay 0 to delay D is larger for the non-private policy than for
   the private one.  A private policy that learns nothing at delay 0 (its normalised reward's
   95 % band reaches 1) cannot lose anything to delay: the claim is then vacuous and reported as
   not testable, not as confirmed.

On digits6 the claims are judged at the largest n run (the paper's regime, n = 2·10⁶ at full
size) with the same rules, fixed before its runs; the smaller n are reported beside.

**Subsets** (``--delays``, ``--accepted``): a setting's label, seed and cells do not depend on
which other settings run, so a sweep too long for one sitting runs in parts into one ``--out``
folder and a last command over the union reuses every finished cell.  With a subset of the
delays, "not much worse" is judged at the delays run (the claim says which) and "delay hurts
the non-private more" needs delay 0 and a later one.
"""
from __future__ import annotations

import math
import os

import numpy as np

from dpledger.errors import DpledgerError
from dpledger.experiments.common import (Claim, Summary, final_regret, new_figure,
                                         finish_figure, privacy_row, ratio_band)
from dpledger.experiments.overrides import NO_OVERRIDES, Overrides, outside_levels
from dpledger.sweep import RunConfig

NAME = "mishra-thakurta-2015-contextual"
TITLE = ("Mishra & Thakurta 2015: private vs non-private contextual UCB and TS under delay "
         "(digits, Open Bandit sample)")
T_FULL = 100_000
R_FULL = 20
T_QUICK = 1_000          # CI: the record-private loops run ~3·10³ rounds/s at d = 64, K = 10
R_QUICK = 2
EPS = [2.7]              # total ε per record (the paper's)
EPS0_PER_PARAMETER = 0.1
JDP_DELTA = 0.1
DELAYS = [0, 100, 1000]
SEED = 2015
# digits6: the sweep of accepted events n (log rows = arms × n: uniform logging accepts one row
# in K in expectation, whatever the policy plays)
ACCEPTED_FULL = [10_000, 100_000, 1_000_000, 2_000_000]
ACCEPTED_QUICK = [1_000]         # 20 000 log rows replayed: the quick size bound
R_FULL_DIGITS6 = 10
OBD_FILE = "obd-random-all.replay.csv"
OBD_ARMS = 80

# variant → (policy, how its privacy parameter is set): "total" = ε₀ = ε/S (ε the total),
# "per-parameter" = ε₀ = 0.1 whatever d, "jdp" = (ε, δ) = (ε, 0.1), None = non-private
VARIANTS = {
    "linucb": ("linucb", None),
    "lints": ("lints", None),
    "dp-linucb-mt": ("dp-linucb-mt", "total"),
    "dp-lints-mt": ("dp-lints-mt", "total"),
    "dp-linucb-mt-eps0-0.1": ("dp-linucb-mt", "per-parameter"),
    "dp-lints-mt-eps0-0.1": ("dp-lints-mt", "per-parameter"),
    "jdp-linucb-accounted": ("jdp-linucb", "jdp"),
}
PAIRS = (("dp-linucb-mt", "linucb"), ("dp-lints-mt", "lints"))
# the non-private counterpart of every private variant (the table's lift ratio)
COUNTERPART = {"dp-linucb-mt": "linucb", "dp-lints-mt": "lints",
               "dp-linucb-mt-eps0-0.1": "linucb", "dp-lints-mt-eps0-0.1": "lints",
               "jdp-linucb-accounted": "linucb"}
BESIDE = {"dp-linucb-mt": ("dp-linucb-mt-eps0-0.1", "jdp-linucb-accounted"),
          "dp-lints-mt": ("dp-lints-mt-eps0-0.1",)}
NOT_MUCH_WORSE = 0.9

LEVEL_OPTION = "epsilons"
POLICY_NAMES = list(VARIANTS)
DIMS = {"digits": 64, "obd": 24, "digits6": 6, "digits6-online": 6}
ARMS = {"digits": 10, "obd": OBD_ARMS, "digits6": 20, "digits6-online": 20}
SWEPT = ("digits6", "digits6-online")      # the instances swept over the accepted events n
DIGITS6_SEED = 51


def obd_path() -> str:
    """Where ``dpledger data fetch obd`` writes the replay log of the ``all`` campaign."""
    from dpledger.policies.contextual.obd import default_dir
    return os.path.join(default_dir(), OBD_FILE)


def instance_specs() -> dict[str, dict]:
    return {"digits": {"kind": "supervised", "dataset": "digits"},
            "obd": {"kind": "replay", "log": obd_path(), "arms": OBD_ARMS},
            "digits6": {"kind": "digits6", "seed": DIGITS6_SEED},
            "digits6-online": {"kind": "digits6-online", "seed": DIGITS6_SEED}}


INSTANCES = instance_specs()
CHOICES = [
    f"digits: T = {T_FULL:,} rounds, {R_FULL} runs (full size); contexts = the 64 pixel "
    "features scaled to norm ≤ 1, resampled i.i.d.; reward 1 when the arm is the label",
    f"obd: the 'all' uniform-random campaign, every one of its 10 000 rows replayed, {R_FULL} "
    "runs (the runs differ in the policies' randomness only); ~125 accepted rows a run; "
    "--horizon applies to digits only",
    f"digits6 (seed {DIGITS6_SEED}): n = {', '.join(f'{n:,}' for n in ACCEPTED_FULL)} accepted "
    f"events, {R_FULL_DIGITS6} runs each (full size), the log replayed for 20·n rows (the "
    "horizon of the run, which sizes the private trees: acceptances are not known in advance); "
    "every run replays the same generated log (runs differ in the policies' randomness only); "
    "--horizon N runs n = N alone, --accepted N1,N2,… those n; --delays picks among 0, 100, "
    "1000 (each setting's seed and cells are the full grid's, so subsets join one folder)",
    "digits6-online: the same users and click model online (a uniformly drawn user a round, "
    "a Bernoulli click; n rounds, fresh draws in every run) — the law of the replay's accepted "
    "rows (Li et al. 2011, Theorem 1) at 1/20 of its policy decisions; its private trees are "
    "sized by n, the replay's by its 20·n log rows",
    f"--quick: digits at T = {T_QUICK:,}, {R_QUICK} runs; digits6 at n = "
    f"{', '.join(f'{n:,}' for n in ACCEPTED_QUICK)}, {R_QUICK} runs (digits6-online only when "
    "--instance names it); obd as the full size "
    "(fast: ~125 model updates a run) when its log is present, skipped with a note when it is "
    "not",
    "ε = 2.7 in total per record is 'the paper's' reading (ε₀ = 2.7/S, S = d(d+1)/2 + d "
    "statistics); ε₀ = 0.1 per parameter (total S·0.1) runs beside it (variants "
    "'-eps0-0.1')",
    f"jdp-linucb: Gaussian mode, calibration accounted, (ε, δ) = (2.7, {JDP_DELTA}); "
    "non-private linucb / lints and the private ones: α = 1, v = 1, λ = 1 (the policies' "
    "defaults)",
    f"'not much worse': private mean reward ≥ {NOT_MUCH_WORSE} × the non-private "
    "counterpart's at the same delay; 'delay hurts the non-private more': its loss of "
    "normalised reward from delay 0 to D exceeds the private policy's, D = 100 and 1000 "
    "(both fixed before any run); the lift ratio (p − 1)/(b − 1) of normalised mean rewards "
    "is reported beside the ratio of means, not judged",
    f"master seed {SEED}"]


def check_overrides(ov: Overrides) -> None:
    if ov.instance is not None:
        raise DpledgerError(f"{NAME} runs contextual data (--instance digits, digits6, "
                            "digits6-online or obd), not a custom K-armed instance (--means, "
                            "--rates, --ab)")
    if ov.delays is not None:
        # the claims' delays are the paper's (0 against 100 and 1000): a subset, not new ones
        other = [d for d in ov.delays if d not in DELAYS]
        if other:
            raise DpledgerError(f"--delays {other[0]} is not a delay of {NAME}; its delays: "
                                f"{', '.join(map(str, DELAYS))}")
    if ov.accepted is not None:
        if ov.horizon is not None:
            raise DpledgerError("--horizon N runs n = N alone and --accepted lists the n run: "
                                "give one or the other")
        others = [i for i in ov.instances_or(INSTANCES) if i not in SWEPT]
        if others:
            raise DpledgerError(f"--accepted sets the swept sizes of {', '.join(SWEPT)}; "
                                f"{others[0]} is not swept (pick the instances with --instance "
                                f"{','.join(SWEPT)})")
        K = min(ARMS[i] for i in SWEPT)
        if ov.accepted[0] < K:
            raise DpledgerError(f"--accepted {ov.accepted[0]} is fewer events than the arms "
                                f"{K}")


def delays_of(ov: Overrides = NO_OVERRIDES) -> list[int]:
    """The delays run: the paper's 0, 100, 1000, or the ``--delays`` subset."""
    return list(ov.delays) if ov.delays is not None else list(DELAYS)


def statistics(d: int) -> int:
    """S: the released parameters of the reconstructed private contextual UCB/TS at dimension
    d (the distinct Gram entries and Σ r·x)."""
    return d * (d + 1) // 2 + d


def variant_params(variant: str, eps: float, d: int) -> dict:
    _, how = VARIANTS[variant]
    if how == "total":
        return {"epsilon0": eps / statistics(d)}
    if how == "per-parameter":
        return {"epsilon0": EPS0_PER_PARAMETER}
    if how == "jdp":
        return {"mode": "gaussian", "calibration": "accounted", "epsilon": eps,
                "delta": JDP_DELTA}
    return {}


def depends_on_eps(variant: str) -> bool:
    return VARIANTS[variant][1] in ("total", "jdp")


def label(variant: str, eps: float, inst: str, delay: int, n: int | None = None) -> str:
    lev = f"-eps{eps:g}" if depends_on_eps(variant) else ""
    return f"{variant}{lev}-{inst}-delay{delay}" + ("" if n is None else f"-n{n}")


def runs_on(variant: str, inst: str) -> bool:
    """Whether ``variant`` runs on ``inst``: at d = 6 the per-parameter reading is the paper's
    total (ε₀ = 2.7/27 = 0.1), so digits6 runs it once."""
    return not (DIMS[inst] == 6 and VARIANTS[variant][1] == "per-parameter")


def sizes(inst: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> list[tuple[int | None, int]]:
    """(n, T) of every size run on ``inst``: n the accepted events aimed at (digits6; None
    elsewhere) and T the run's horizon (rounds; replay: log rows — 20·n on digits6)."""
    if inst in SWEPT:
        ns = ([ov.horizon] if ov.horizon is not None else list(ov.accepted)
              if ov.accepted is not None else ACCEPTED_QUICK if quick else ACCEPTED_FULL)
        return [(n, (ARMS[inst] if inst == "digits6" else 1) * n) for n in ns]
    if inst == "digits":
        return [(None, ov.horizon if ov.horizon is not None else (T_QUICK if quick else T_FULL))]
    return [(None, 10_000)]


def runs_of(inst: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> int:
    if ov.runs is not None:
        return ov.runs
    return R_QUICK if quick else (R_FULL_DIGITS6 if inst in SWEPT else R_FULL)


def _instances(ov: Overrides, quick: bool = False) -> dict[str, dict]:
    """The instances run: --quick leaves digits6-online out unless --instance names it (the
    replay it stands in for runs the same code at quick size)."""
    insts = ov.instances_or(instance_specs())
    if quick and ov.instances is None:
        insts.pop("digits6-online", None)
    return insts


def _obd_missing(insts: dict) -> str | None:
    if "obd" in insts and not os.path.isfile(insts["obd"]["log"]):
        return (f"obd skipped: its replay log {insts['obd']['log']} is absent (run `dpledger "
                "data fetch obd` to download the Open Bandit sample)")
    return None


def configs(quick: bool, ov: Overrides = NO_OVERRIDES) -> list[RunConfig]:
    insts = _instances(ov, quick)
    if _obd_missing(insts):
        insts = {k: v for k, v in insts.items() if k != "obd"}
    seed = ov.seed_or(SEED)
    eps_grid = list(ov.levels) if ov.levels is not None else EPS
    out = []
    for inst, spec in insts.items():
        d, R = DIMS[inst], runs_of(inst, quick, ov)
        for n, T in sizes(inst, quick, ov):
            for delay in delays_of(ov):
                env = {**spec, "delay": delay}
                for var, (pol, _) in VARIANTS.items():
                    if not ov.keeps(var) or not runs_on(var, inst):
                        continue
                    for eps in (eps_grid if depends_on_eps(var) else [None]):
                        out.append(RunConfig(
                            label(var, eps, inst, delay, n), pol, variant_params(var, eps, d),
                            env, T, R, seed=seed,
                            tags={"variant": var, "policy": pol, "instance": inst,
                                  "delay": delay, "epsilon_total": eps, "accepted_target": n}))
    return out


# -- arithmetic -----------------------------------------------------------------------------------

def lift_ratio(private: float, nonprivate: float) -> float | None:
    """(p − 1)/(b − 1): the share of the non-private policy's lift over uniform play that the
    private one keeps, p and b mean rewards normalised to uniform play's (uniform play is 1).
    None when b ≤ 1 (no lift to share) or either is not finite."""
    if not (math.isfinite(private) and math.isfinite(nonprivate)) or not nonprivate > 1.0:
        return None
    return (private - 1.0) / (nonprivate - 1.0)


def pair_bands(a: tuple[float, float], b: tuple[float, float]) -> dict:
    """The ratio of means and the lift ratio of a private policy's normalised reward ``a`` =
    (mean, 95 % half-band) against its counterpart's ``b``, each with its 95 % half-band by the
    delta method (:func:`~dpledger.experiments.common.ratio_band`; the two settings' runs taken
    as independent).  None where undefined (b ≤ 0; for the lift ratio b ≤ 1)."""
    (p, hp), (q, hq) = a, b
    out = {"ratio": None, "ratio_band95": None, "lift_ratio": None, "lift_ratio_band95": None}
    if q > 0:
        out["ratio"], out["ratio_band95"] = ratio_band(p, hp, q, hq)
    if lift_ratio(p, q) is not None:
        out["lift_ratio"], out["lift_ratio_band95"] = ratio_band(p - 1.0, hp, q - 1.0, hq)
    return out


def noise_signal(spec: dict, epsilon0: float, n: int, horizon: int) -> dict | None:
    """Per statistic entry of the reconstructed Mishra–Thakurta policies (``dp-linucb-mt``'s
    plan: the Laplace scale b of each kind of entry and the tree's levels), the noise of the
    model after n delivered records against its signal:

    * noise: the standard deviation √(2m)·b of the prefix sum of m nodes, m = popcount(n) (the
      nodes the binary mechanism sums for the first n records), and at most √(2·levels)·b;
    * signal: the entry's expected value in one arm's statistic after n records under uniform
      play (n/K records per arm): the mean of E[x_i²] over i (Gram diagonal), the root mean
      square of E[x_i x_j] over i < j (off-diagonal) and of E[r·x_i | arm a] over (a, i) (Σ r·x),
      expectations over the instance's context rows (drawn uniformly) and its rewards.

    None for a stored replay log (its rewards are the logged arm's only)."""
    from dpledger.policies.contextual.base import problem_of
    from dpledger.policies.registry import make_policy
    from dpledger.sweep import make_env
    env = make_env(spec)
    if env.is_replay and env.log_key == 0:
        return None
    plan = make_policy("dp-linucb-mt", epsilon0=epsilon0).plan(problem_of(env, horizon, 0))
    levels = int(plan.drawn["levels"])
    b_diag, b_off, b_rx = plan.drawn["scales"]
    x = env.contexts[:, 0, :]
    r = env.rewards
    K, d = env.n_arms, env.dim
    per_arm = n / K
    second = x.T @ x / x.shape[0]
    iu = np.triu_indices(d, 1)
    rx = r.T @ x / x.shape[0]                        # (K, d): E[r·x | arm a]
    m = bin(int(n)).count("1")

    def entry(scale: float, signal: float) -> dict:
        sd = math.sqrt(2.0 * m) * scale
        return {"laplace_scale": scale, "noise_sd": sd,
                "noise_sd_max": math.sqrt(2.0 * levels) * scale, "signal": signal,
                "noise_over_signal": sd / signal if signal > 0 else math.inf}

    return {"records": int(n), "records_per_arm": per_arm, "levels": levels, "nodes": m,
            "epsilon0": epsilon0, "dim": d, "arms": K,
            "gram_diagonal": entry(b_diag, per_arm * float(np.mean(np.diag(second)))),
            "gram_off_diagonal": entry(b_off, per_arm * float(np.sqrt(np.mean(
                second[iu] ** 2)))),
            "reward_times_context": entry(b_rx, per_arm * float(np.sqrt(np.mean(rx ** 2))))}


def noise_signal_text(ns: dict) -> str:
    parts = []
    for key, name in (("gram_diagonal", "Gram diagonal"), ("gram_off_diagonal",
                                                            "Gram off-diagonal"),
                      ("reward_times_context", "Σ r·x")):
        e = ns[key]
        if e["signal"] < 1e-9 * ns["gram_diagonal"]["signal"]:
            vs = "signal 0 (uncorrelated coordinates)"
        else:
            vs = f"signal {e['signal']:.3g} (noise/signal {e['noise_over_signal']:.3g})"
        parts.append(f"{name} noise sd {e['noise_sd']:.3g} (Laplace scale "
                     f"{e['laplace_scale']:.3g}) vs {vs}")
    return (f"per entry after n = {ns['records']:,} records ({ns['records_per_arm']:,.0f} per "
            f"arm under uniform play; d = {ns['dim']}, ε₀ = {ns['epsilon0']:.3g}; the final prefix "
            f"sums {ns['nodes']} of the tree's {ns['levels']} levels' nodes): " + "; ".join(parts))


# -- summary --------------------------------------------------------------------------------------

def _reward(rep: dict) -> tuple[float, float, float]:
    """(normalised mean reward, its 95 % half-band, uniform play's mean reward)."""
    rw = rep["reward"]
    uni = rw["uniform_mean_reward"]
    runs = [v for v in rw["per_run"] if v is not None]
    if not uni or not runs:
        return math.nan, math.nan, uni or math.nan
    mean = math.fsum(runs) / len(runs)
    if len(runs) > 1:
        var = math.fsum((v - mean) ** 2 for v in runs) / (len(runs) - 1)
        half = 1.96 * math.sqrt(var / len(runs))
    else:
        half = math.nan
    return mean / uni, half / uni, uni


def _privacy_total(rep: dict) -> str:
    cert = rep["privacy"]["certificate"]
    if cert["pure_epsilon"] is not None:
        return f"ε = {cert['pure_epsilon']:.4g}"
    at = cert["epsilon_at_delta"].get(str(JDP_DELTA))
    return f"ε({JDP_DELTA}) = {at:.4g}" if at is not None else ""


def _key(tags: dict) -> tuple:
    return (tags["variant"], tags["epsilon_total"], tags["instance"], tags["delay"],
            tags.get("accepted_target"))


def _fmt_opt(x: float | None) -> str:
    return "undefined (no non-private lift)" if x is None else f"{x:.3g}"


def summarize(reports: dict, out: str, quick: bool, ov: Overrides = NO_OVERRIDES) -> Summary:
    insts = _instances(ov, quick)
    skipped = _obd_missing(insts)
    eps_grid = list(ov.levels) if ov.levels is not None else EPS
    table, notes, claims = [], [], []
    if skipped:
        notes.append(skipped)
    by_key = {_key(rep["tags"]): rep for rep in reports.values()}
    for rep in reports.values():
        tg = rep["tags"]
        norm, half, uni = _reward(rep)
        row = {"instance": tg["instance"], "variant": tg["variant"], "policy": tg["policy"],
               "epsilon_total": tg["epsilon_total"], "delay": tg["delay"],
               "accepted_target": tg.get("accepted_target"),
               "T": rep["horizon"], "runs": rep["runs"],
               "epsilon0": rep["policy"]["params"].get("epsilon0"),
               "mean_reward": rep["reward"]["mean_reward"], "uniform_mean_reward": uni,
               "normalised_to_uniform": norm,
               "normalised_band95": half if math.isfinite(half) else None,   # one run: none
               "lift_over_uniform": norm - 1.0,
               "accepted_rows_mean": (math.fsum(rep["reward"]["accepted_rows"])
                                      / len(rep["reward"]["accepted_rows"])
                                      if "accepted_rows" in rep["reward"] else None)}
        base = COUNTERPART.get(tg["variant"])
        b = _get(by_key, base, None, tg["instance"], tg["delay"],
                 tg.get("accepted_target")) if base else None
        if b is not None:
            pb = pair_bands((norm, half), _reward(b)[:2])
            row["ratio_to_nonprivate"] = pb["ratio"]
            row["lift_ratio_to_nonprivate"] = pb["lift_ratio"]
            for k in ("ratio_band95", "lift_ratio_band95"):
                row[k] = pb[k] if pb[k] is not None and math.isfinite(pb[k]) else None
        if rep["regret"].get("final_mean") is not None:
            row["regret_mean"], row["regret_std"] = final_regret(rep)
        row.update(privacy_row(rep))
        row["certificate"] = _privacy_total(rep)
        table.append(row)
    table.sort(key=lambda r: (r["instance"], r["variant"], r["accepted_target"] or 0,
                              r["delay"]))
    why = outside_levels(eps_grid, EPS, "ε", exact=True)
    plots = []
    for inst, spec in insts.items():
        if inst == "obd" and skipped:
            claims.append(Claim("[obd] the paper's claims on the replayed Open Bandit sample",
                                None, skipped))
            continue
        ns = [n for n, _ in sizes(inst, quick, ov)]
        for eps in eps_grid:
            claims.extend(_claims(by_key, inst, spec, eps, ov, why, ns, quick))
        plots.append(_plot(by_key, inst, eps_grid, ov, ns[-1],
                           os.path.join(out, f"reward-{inst}.png")))
    if ov.delays is not None:
        notes.append(f"--delays {','.join(map(str, ov.delays))}: only these of the delays "
                     f"{', '.join(map(str, DELAYS))} were run; 'not much worse' is judged at "
                     "them, 'delay hurts the non-private more' needs delay 0 and a later one")
        if inst in SWEPT and len(ns) > 1:
            plots.append(_plot_sweep(by_key, inst, eps_grid, ov, ns,
                                     os.path.join(out, f"reward-{inst}-sweep.png")))
    if quick:
        notes.append(f"--quick: digits at T = {T_QUICK:,}, digits6 at n = "
                     f"{', '.join(f'{n:,}' for n in ACCEPTED_QUICK)}, {R_QUICK} runs — far "
                     f"below the full size (digits T = {T_FULL:,}, {R_FULL} runs; digits6 n up "
                     f"to {ACCEPTED_FULL[-1]:,}, {R_FULL_DIGITS6} runs); claims judged at this "
                     "size are indicative only")
    return Summary(table=table, plots=plots, claims=claims, notes=notes)


def _get(by_key, var, eps, inst, delay, n=None):
    return by_key.get((var, eps if depends_on_eps(var) else None, inst, delay, n))


def _fmt(rep) -> str:
    n, h, _ = _reward(rep)
    return f"{n:.3g} (one run: no band)" if math.isnan(h) else f"{n:.3g} ± {h:.2g}"


def _pair_text(a, b) -> str:
    pb = pair_bands(_reward(a)[:2], _reward(b)[:2])

    def pm(x, h, undefined):
        return undefined if x is None else f"{x:.3g}" + ("" if math.isnan(h) else f" ± {h:.2g}")

    ratio = pm(pb["ratio"], pb["ratio_band95"], "undefined: no reward for the non-private")
    lift = pm(pb["lift_ratio"], pb["lift_ratio_band95"], _fmt_opt(None))
    return f"ratio of means {ratio}, lift ratio {lift}"


def _where(inst: str, n: int | None) -> str:
    return "" if n is None else f" at n = {n:,} accepted events"


def _claims(by_key, inst, spec, eps, ov, why, ns, quick) -> list[Claim]:
    tag = f"[{inst}{'' if eps == EPS[0] else f', ε = {eps:g}'}]"
    extra = " (~125 accepted rows a run: no statistical power)" if inst == "obd" else ""
    n = ns[-1]                      # judged at the largest size run
    out = []
    S = statistics(DIMS[inst])
    delays = delays_of(ov)
    every = "every delay" if delays == DELAYS else (
        f"every delay run (D = {', '.join(map(str, delays))} of {', '.join(map(str, DELAYS))})")
    # 1. private not much worse than non-private
    text = (f"{tag} private not much worse than non-private{_where(inst, n)}: private mean "
            f"reward ≥ {NOT_MUCH_WORSE} × the non-private counterpart's, {every} (ε = "
            f"{eps:g} in total, ε₀ = {eps:g}/{S}){extra}")
    cells, evs = [], []
    for priv, base in PAIRS:
        for delay in delays:
            a, b = _get(by_key, priv, eps, inst, delay, n), _get(by_key, base, eps, inst,
                                                                  delay, n)
            if a is None or b is None:
                continue
            na, nb = _reward(a)[0], _reward(b)[0]
            cells.append(na >= NOT_MUCH_WORSE * nb)
            beside = "; ".join(f"{v} {_fmt(r)} ({_pair_text(r, b)})" for v in BESIDE[priv]
                               if (r := _get(by_key, v, eps, inst, delay, n)) is not None)
            evs.append(f"D={delay}: {priv} {_fmt(a)} vs {base} {_fmt(b)} ({_pair_text(a, b)})"
                       + (f" [beside: {beside}]" if beside else ""))
    smaller = _smaller_sizes(by_key, inst, eps, ns, delays)
    ns_text = ""
    if inst == "digits" or inst in SWEPT:
        info = noise_signal(spec, eps / S, n if n is not None else sizes(inst, quick, ov)[0][1],
                            sizes(inst, quick, ov)[-1][1])
        if info is not None:
            ns_text = noise_signal_text(info)
    if not cells:
        out.append(Claim.missing(text, "a private policy or its counterpart not run"))
    else:
        lead = ""
        if inst == "digits" and not all(cells):
            lead = (f"not reproduced on digits (d = {DIMS[inst]}): {S} statistics share ε = "
                    f"{eps:g}, so ε₀ = {eps / S:.3g} each — {ns_text}. ")
        elif ns_text:
            lead = ns_text + ". "
        out.append(Claim.judged(text, all(cells), lead + f"{sum(cells)}/{len(cells)} cells; "
                                "normalised mean reward ± 95 % band: " + "; ".join(evs)
                                + smaller, why))
    # 2. delay hurts the non-private more
    text = (f"{tag} delay hurts the non-private more{_where(inst, n)}: its loss of normalised "
            f"mean reward from delay 0 to D = 100, 1000 exceeds the private policy's{extra}")
    cells, evs, vacuous = [], [], []
    for priv, base in PAIRS:
        a0, b0 = _get(by_key, priv, eps, inst, 0, n), _get(by_key, base, eps, inst, 0, n)
        if a0 is None or b0 is None:
            continue
        n_a0, h_a0, _ = _reward(a0)
        n_b0 = _reward(b0)[0]
        if not n_a0 - h_a0 > 1.0:
            vacuous.append(f"{priv} at delay 0 {_fmt(a0)} (band reaches uniform play's 1)")
        for delay in [dl for dl in delays if dl != 0]:
            a, b = _get(by_key, priv, eps, inst, delay, n), _get(by_key, base, eps, inst,
                                                                  delay, n)
            if a is None or b is None:
                continue
            loss_p, loss_b = n_a0 - _reward(a)[0], n_b0 - _reward(b)[0]
            cells.append(loss_b > loss_p)
            evs.append(f"{base} loses {loss_b:.3g} ({_fmt(b0)} → {_fmt(b)}), {priv} "
                       f"{loss_p:.3g} ({_fmt(a0)} → {_fmt(a)}) at D={delay}"
                       + _loss_beside(by_key, priv, eps, inst, delay, n))
    if not cells and (0 not in delays or len(delays) < 2):
        out.append(Claim.missing(text, "needs delay 0 and a later delay; --delays ran D = "
                                 + ", ".join(map(str, delays))))
    elif not cells:
        out.append(Claim.missing(text, "a private policy or its counterpart not run"))
    elif vacuous and not why:
        out.append(Claim(text, None, "vacuous: a private policy that learns nothing cannot lose "
                         "to delay — " + "; ".join(vacuous) + f". Losses: {sum(cells)}/"
                         f"{len(cells)} cells larger for the non-private; " + "; ".join(evs)))
    else:
        out.append(Claim.judged(text, all(cells), f"{sum(cells)}/{len(cells)} cells; "
                                + "; ".join(evs), why))
    return out


def _smaller_sizes(by_key, inst, eps, ns, delays) -> str:
    """The pairs at the sizes below the judged one (digits6's sweep), reported, not judged."""
    parts = []
    for n in ns[:-1]:
        cells = []
        for priv, base in PAIRS:
            for delay in delays:
                a, b = _get(by_key, priv, eps, inst, delay, n), _get(by_key, base, eps, inst,
                                                                      delay, n)
                if a is not None and b is not None:
                    cells.append(f"{priv} D={delay} {_fmt(a)} vs {base} {_fmt(b)} "
                                 f"({_pair_text(a, b)})")
        if cells:
            parts.append(f"n = {n:,}: " + "; ".join(cells))
    return (" — smaller n (reported, not judged): " + " | ".join(parts)) if parts else ""


def _loss_beside(by_key, priv, eps, inst, delay, n=None) -> str:
    """The per-parameter reading's loss from delay 0 to ``delay`` (reported, not judged)."""
    var = BESIDE[priv][0]
    r0, r = _get(by_key, var, eps, inst, 0, n), _get(by_key, var, eps, inst, delay, n)
    if r0 is None or r is None:
        return ""
    return (f" [beside: {var} loses {_reward(r0)[0] - _reward(r)[0]:.3g} ({_fmt(r0)} → "
            f"{_fmt(r)})]")


def _series(ov, eps_grid):
    for var in VARIANTS:
        if not ov.keeps(var):
            continue
        for eps in (eps_grid if depends_on_eps(var) else [None]):
            yield var, eps, var + (f" ε={eps:g}" if eps is not None and len(eps_grid) > 1
                                   else "")


def _errorbar(ax, xs, pts, name):
    ax.errorbar(xs, [p[0] for p in pts], yerr=[0.0 if math.isnan(p[1]) else p[1] for p in pts],
                marker="o", capsize=3, label=name)


def _plot(by_key, inst, eps_grid, ov, n, path) -> str:
    fig, axes = new_figure(1)
    ax = axes[0]
    for var, eps, name in _series(ov, eps_grid):
        pts = [(dl, _reward(r)) for dl in delays_of(ov)
               if (r := by_key.get((var, eps, inst, dl, n))) is not None]
        if pts:
            _errorbar(ax, [str(p[0]) for p in pts], [p[1] for p in pts], name)
    ax.axhline(1.0, color="k", linestyle=":", label="uniform play")
    ax.set_xlabel("delay D (rounds)")
    ax.set_ylabel("mean reward / uniform play's")
    return finish_figure(fig, axes, path, f"{inst}{_where(inst, n)}: mean reward normalised "
                         "to uniform play (± 95 % band)")


def _plot_sweep(by_key, inst, eps_grid, ov, ns, path) -> str:
    """digits6: normalised mean reward against the accepted events n, one panel per delay."""
    fig, axes = new_figure(len(delays_of(ov)), width=4.5)
    for ax, dl in zip(axes, delays_of(ov), strict=True):
        for var, eps, name in _series(ov, eps_grid):
            pts = [(n, _reward(r)) for n in ns
                   if (r := by_key.get((var, eps, inst, dl, n))) is not None]
            if pts:
                _errorbar(ax, [p[0] for p in pts], [p[1] for p in pts], name)
        ax.axhline(1.0, color="k", linestyle=":", label="uniform play")
        ax.set_xscale("log")
        ax.set_xlabel("accepted events n")
        ax.set_ylabel("mean reward / uniform play's")
        ax.set_title(f"delay D = {dl}", fontsize=9)
    return finish_figure(fig, axes, path, f"{inst}: mean reward normalised to uniform play "
                         "against n (± 95 % band)")
