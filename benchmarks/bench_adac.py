"""Issue 32 §2 (a command, not a test; each part prints a markdown table and writes it with
``--out``):

    python benchmarks/bench_adac.py equal-rho [--horizon 100000] [--runs 20] [--out FILE.md]
    python benchmarks/bench_adac.py gope [--horizon 100000] [--runs 10] [--out FILE.md]

**equal-rho**: AdaC-UCB against DP-TS-UCB and M-TS-Gaussian at equal ρ.  Instance: Bernoulli
0.75, 0.625, 0.5, 0.375, 0.25 (Hu et al. 2025's, as the hu-2025-equal-privacy experiment).  The
budgets are DP-TS-UCB's (c0 = 1) certified μ at α ∈ {0, 0.5, 1}; all three policies are
all-Gaussian, so equal ρ-zCDP is equal GDP μ (ρ = μ²/2) and each is set to meet it by its
*certificate*: AdaC-UCB with rho = μ²/2 (its certificate is μ = √(2ρ), one release per reward);
M-TS-Gaussian with b = ⌈ln T⌉ (the fixed choice of hu-2025) and c the smallest whose certified
μ meets the budget (:func:`~dpledger.experiments.common.calibrate_gdp`).  Seed 2025.

**gope**: the phased-elimination policies on ``--env linear-fixed`` (d = 5, K = 20, seed 0):
AdaC-GOPE at ρ = 0.5 and at (ε, δ) = (1, 10⁻⁶), dp-gope-hanna at ε = 1, and for reference
LinUCB (non-private) and reward-dp-linucb at (1, 10⁻⁶).  Speed: rounds per CPU second of
``run_one`` at d = 64, K = 10 (one run of T rounds, plans warm; the machine is shared, so CPU
time, not wall time).

Regret at T: mean over runs and the 95 % band of the mean (1.96 standard errors).
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpledger.experiments.common import calibrate_gdp, gdp_mu_of
from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.base import problem_of
from dpledger.policies.contextual.simulator import simulate_contextual
from dpledger.policies.environments import bernoulli
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator, simulate

MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]
ALPHAS = (0.0, 0.5, 1.0)
GOPE_CASES = [("adac-gope", {"rho": 0.5}), ("adac-gope", {"epsilon": 1.0, "delta": 1e-6}),
              ("dp-gope-hanna", {"epsilon": 1.0}), ("linucb", {}),
              ("reward-dp-linucb", {"epsilon": 1.0, "delta": 1e-6})]


def band(reg: np.ndarray) -> tuple[float, float]:
    """(mean, 1.96 standard errors) of the regrets at T."""
    return float(reg.mean()), 1.96 * float(reg.std(ddof=1)) / math.sqrt(reg.size)


def equal_rho(T: int, R: int, seed: int) -> list[str]:
    K = len(MEANS)
    env = bernoulli(MEANS)
    b = math.ceil(math.log(T))
    lines = [f"Regret at T = {T} on Bernoulli {MEANS}, {R} runs, seed {seed}; budgets: "
             "DP-TS-UCB's certified μ (c0 = 1), ρ = μ²/2; each policy meets it by its "
             "certificate (`PYTHONPATH=. python benchmarks/bench_adac.py equal-rho`).", "",
             "| α (DP-TS-UCB) | ρ | policy | parameters | certified μ | regret at T | 95 % band "
             "| CPU s |", "|---|---|---|---|---|---|---|---|"]
    for alpha in ALPHAS:
        mu = gdp_mu_of("dp-ts-ucb", {"alpha": alpha, "c0": 1.0}, T, K, "certificate")
        rho = mu * mu / 2
        c = calibrate_gdp("mts-gaussian", {"b": b}, "c", mu, "certificate", T, K)
        for name, params in [("dp-ts-ucb", {"alpha": alpha, "c0": 1.0}), ("adac-ucb", {"rho": rho}),
                             ("mts-gaussian", {"b": b, "c": c})]:
            pol = make_policy(name, **params)
            t0 = time.process_time()
            res = simulate(pol, env, T, seed=seed, runs=R)
            cpu = time.process_time() - t0
            m, w = band(np.asarray(res.regret)[:, -1])
            mu_c = max(cand.composition.gdp_mu() for cand in pol.certificate(T, K).candidates)
            shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in params.items())
            lines.append(f"| {alpha:g} | {rho:.4g} | {name} | {shown} | {mu_c:.4g} | {m:.1f} | "
                         f"± {w:.1f} | {cpu:.1f} |")
            print(lines[-1], flush=True)
    return lines


def _certificate_text(pol, problem) -> str:
    cert = pol.certificate(problem)
    if cert.unbounded:
        return "unbounded"
    comp = cert.candidates[0].composition
    if comp.all_gaussian():
        return f"μ = {comp.gdp_mu():.4g} (ρ = {comp.zcdp_rho():.4g})"
    return f"ε = {comp.pure_epsilon():.4g}"


def gope(T: int, R: int, seed: int) -> list[str]:
    env = CE.linear_fixed(5, 20, seed=seed)
    lines = [f"Regret at T = {T} on linear-fixed (d = 5, K = 20, seed {seed}), {R} runs "
             "(`PYTHONPATH=. python benchmarks/bench_adac.py gope`).", "",
             "| policy | parameters | certificate | regret at T | 95 % band | mean reward / "
             "uniform |", "|---|---|---|---|---|---|"]
    for name, params in GOPE_CASES:
        pol = make_policy(name, **params)
        res = simulate_contextual(pol, env, T, seed=seed, runs=R)
        m, w = band(np.asarray(res.regret)[:, -1])
        lift = float(np.sum(res.reward_sum) / np.sum(res.uniform_sum))
        shown = ", ".join(f"{k}={v:g}" for k, v in params.items()) or "—"
        lines.append(f"| {name} | {shown} | {_certificate_text(pol, res.problem)} | {m:.1f} | "
                     f"± {w:.1f} | {lift:.4f} |")
        print(lines[-1], flush=True)
    lines += ["", "Speed at d = 64, K = 10 (one run, `run_one`, CPU time; machine shared):", "",
              "| policy | parameters | rounds | rounds / CPU s |", "|---|---|---|---|"]
    big = CE.linear_fixed(64, 10, seed=seed)
    prob = problem_of(big, T, 0)
    for name, params in GOPE_CASES[:3]:
        pol = make_policy(name, **params)
        pol.run_one(run_generator(seed, 0), big, prob)            # plans cached: warm
        t0 = time.process_time()
        out = pol.run_one(run_generator(seed, 1), big, prob)
        cpu = time.process_time() - t0
        shown = ", ".join(f"{k}={v:g}" for k, v in params.items())
        lines.append(f"| {name} | {shown} | {out.extra['rounds']} | "
                     f"{out.extra['rounds'] / cpu:.3g} |")
        print(lines[-1], flush=True)
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=("equal-rho", "gope"))
    ap.add_argument("--horizon", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.part == "equal-rho":
        lines = equal_rho(a.horizon, a.runs or 20, 2025 if a.seed is None else a.seed)
    else:
        lines = gope(a.horizon, a.runs or 10, 0 if a.seed is None else a.seed)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
