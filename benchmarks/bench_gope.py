"""Issue 32 §2: the phased-elimination policies on a fixed arm set (a command, not a test;
writes the markdown table it prints with ``--out``).

    python benchmarks/bench_gope.py [--horizon 100000] [--runs 10] [--out FILE.md]

Instance: ``--env linear-fixed`` (d = 5, K = 20, seed 0: arms and θ drawn from the seed).
Policies: AdaC-GOPE at ρ = 0.5 and at (ε, δ) = (1, 10⁻⁶), dp-gope-hanna at ε = 1, and for
reference LinUCB (non-private) and reward-dp-linucb at (1, 10⁻⁶) on the same instance.  Regret
at T: mean and the 95 % band of the mean.  Speed: rounds per CPU second of ``run_one`` at
d = 64, K = 10 (one run of T rounds; the machine is shared, so CPU time, not wall time).
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.base import problem_of
from dpledger.policies.contextual.simulator import simulate_contextual
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator

CASES = [("adac-gope", {"rho": 0.5}), ("adac-gope", {"epsilon": 1.0, "delta": 1e-6}),
         ("dp-gope-hanna", {"epsilon": 1.0}), ("linucb", {}),
         ("reward-dp-linucb", {"epsilon": 1.0, "delta": 1e-6})]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--horizon", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    T, R = a.horizon, a.runs
    env = CE.linear_fixed(5, 20, seed=a.seed)
    lines = [f"Regret at T = {T} on linear-fixed (d = 5, K = 20, seed {a.seed}), {R} runs "
             "(`python benchmarks/bench_gope.py`).", "",
             "| policy | parameters | certificate | regret at T | 95 % band | mean reward / "
             "uniform |", "|---|---|---|---|---|---|"]
    for name, params in CASES:
        pol = make_policy(name, **params)
        res = simulate_contextual(pol, env, T, seed=a.seed, runs=R)
        reg = np.asarray(res.regret)[:, -1]
        cert = pol.certificate(res.problem)
        if cert.unbounded:
            shown_cert = "unbounded"
        else:
            comp = cert.candidates[0].composition
            mu = comp.gdp_mu()
            shown_cert = (f"μ = {mu:.4g} (ρ = {comp.zcdp_rho():.4g})" if mu is not None
                          and math.isfinite(mu) and comp.all_gaussian()
                          else f"ε = {comp.pure_epsilon():.4g}" if math.isfinite(
                              comp.pure_epsilon()) else "(ε, δ)")
        lift = float(np.sum(res.reward_sum) / np.sum(res.uniform_sum))
        shown = ", ".join(f"{k}={v:g}" for k, v in params.items()) or "—"
        lines.append(f"| {name} | {shown} | {shown_cert} | {reg.mean():.1f} | "
                     f"± {1.96 * reg.std(ddof=1) / math.sqrt(R):.1f} | {lift:.4f} |")
        print(lines[-1], flush=True)
    lines += ["", "Speed at d = 64, K = 10 (one run, `run_one`, CPU time; machine shared):", "",
              "| policy | T | rounds / CPU s |", "|---|---|---|"]
    big = CE.linear_fixed(64, 10, seed=a.seed)
    for name, params in CASES[:3]:
        pol = make_policy(name, **params)
        prob = problem_of(big, T, 0)
        pol.run_one(run_generator(a.seed, 0), big, prob)            # plans cached, warm
        t0 = time.process_time()
        out = pol.run_one(run_generator(a.seed, 1), big, prob)
        cpu = time.process_time() - t0
        lines.append(f"| {name} | {out.extra['rounds']} | {out.extra['rounds'] / cpu:.3g} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
