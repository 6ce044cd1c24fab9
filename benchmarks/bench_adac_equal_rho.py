"""Issue 32 §2: AdaC-UCB against DP-TS-UCB and M-TS-Gaussian at equal ρ (a command, not a
test; writes the markdown table it prints with ``--out``).

    python benchmarks/bench_adac_equal_rho.py [--horizon 100000] [--runs 20] [--out FILE.md]

Instance: Bernoulli 0.75, 0.625, 0.5, 0.375, 0.25 (Hu et al. 2025's, as the
hu-2025-equal-privacy experiment).  The budgets are DP-TS-UCB's (c0 = 1) certified μ at
α ∈ {0, 0.5, 1}; all three policies are all-Gaussian, so equal ρ-zCDP is equal GDP μ (ρ = μ²/2)
and each is set to meet it by its *certificate*: AdaC-UCB with rho = μ²/2 (its certificate is
μ = √(2ρ), exactly one release per reward); M-TS-Gaussian with b = ⌈ln T⌉ (the fixed choice of
hu-2025) and c the smallest whose certified μ meets the budget
(:func:`~dpledger.experiments.common.calibrate_gdp`).  Regret at T: mean over runs and the 95 %
band of the mean (1.96 standard errors); seed 2025.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpledger.experiments.common import calibrate_gdp, gdp_mu_of
from dpledger.policies.environments import bernoulli
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import simulate

MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]
ALPHAS = (0.0, 0.5, 1.0)


def row(name, params, env, T, R, seed):
    pol = make_policy(name, **params)
    t0 = time.process_time()
    res = simulate(pol, env, T, seed=seed, runs=R)
    cpu = time.process_time() - t0
    reg = np.asarray(res.regret)[:, -1]
    comp = pol.certificate(T, len(MEANS)).candidates
    mu = max(c.composition.gdp_mu() for c in comp)
    return reg.mean(), 1.96 * reg.std(ddof=1) / math.sqrt(R), mu, cpu


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--horizon", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    T, R, K = a.horizon, a.runs, len(MEANS)
    env = bernoulli(MEANS)
    b = math.ceil(math.log(T))
    lines = [f"Regret at T = {T} on Bernoulli {MEANS}, {R} runs, seed {a.seed}; budgets: "
             "DP-TS-UCB's certified μ (c0 = 1), ρ = μ²/2; each policy meets it by its "
             "certificate (`python benchmarks/bench_adac_equal_rho.py`).", "",
             "| α (DP-TS-UCB) | ρ | policy | parameters | certified μ | regret at T | 95 % band "
             "| CPU s |", "|---|---|---|---|---|---|---|---|"]
    for alpha in ALPHAS:
        mu = gdp_mu_of("dp-ts-ucb", {"alpha": alpha, "c0": 1.0}, T, K, "certificate")
        rho = mu * mu / 2
        c = calibrate_gdp("mts-gaussian", {"b": b}, "c", mu, "certificate", T, K)
        cases = [("dp-ts-ucb", {"alpha": alpha, "c0": 1.0}),
                 ("adac-ucb", {"rho": rho}),
                 ("mts-gaussian", {"b": b, "c": c})]
        for name, params in cases:
            m, band, mu_c, cpu = row(name, params, env, T, R, a.seed)
            shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in params.items())
            lines.append(f"| {alpha:g} | {rho:.4g} | {name} | {shown} | {mu_c:.4g} | {m:.1f} | "
                         f"± {band:.1f} | {cpu:.1f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
