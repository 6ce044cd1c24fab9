"""``dp-linucb-mt`` / ``dp-lints-mt`` with the smooth binary mechanism against their binary
trees at the same certificate (issue 32 §3; docs/algorithms.md#smooth-binary-counter).
Run from the worktree: ``PYTHONPATH=. python benchmarks/bench_smooth_mt.py [--policy
dp-linucb-mt] [--dim 3] [--arms 5] [--horizon 2000] [--runs 20] [--epsilon0 0.1]``.

Both counters run at the same ε₀ per statistic, so both certificates are the same pure
(d(d+1)/2 + d)·ε₀ (each entry's Laplace scale is nodes·Δ₁/ε₀, nodes = bit_length(T) for the
binary tree and the smooth tree's first-record count).  Printed per counter: the certificate,
the shape, the Σ r·x entries' scale b, the closed-form variance of a prefix entry (binary,
unpadded: mean over t of 2·popcount(t)·b²; smooth: mean over t of 2·(w − z_t)·b²), and the mean
cumulative regret at T on the linear environment over R runs with its 95 % band
(± 1.96·sd/√R).  Not a test.  CPU time (user + sys) is reported: the machine is shared.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from dpledger.mechanisms.smooth import smooth_variances
from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.simulator import simulate_contextual
from dpledger.policies.registry import make_policy
from dpledger.report_contextual import build_contextual_report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="dp-linucb-mt", choices=("dp-linucb-mt", "dp-lints-mt"))
    ap.add_argument("--dim", type=int, default=3)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--horizon", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--epsilon0", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    env = CE.linear(a.dim, a.arms, seed=a.seed)
    T = a.horizon
    print(f"{a.policy} on linear (d = {a.dim}, K = {a.arms}), T = {T}, {a.runs} runs, "
          f"ε₀ = {a.epsilon0}")
    for counter in ("binary", "smooth"):
        pol = make_policy(a.policy, epsilon0=a.epsilon0, counter=counter)
        t0 = sum(os.times()[:2])
        res = simulate_contextual(pol, env, T, seed=a.seed, runs=a.runs)
        cpu = sum(os.times()[:2]) - t0
        cert = build_contextual_report(res)["privacy"]["certificate"]
        plan = pol.plan(res.problem)
        n = res.problem.max_observations
        b = plan.drawn["scales"][-1]
        if plan.smooth:
            h, w, _ = plan.smooth
            # smooth_variances at ε = h − w is 2·(w − z_t): the draws in the prefix, times 2
            draws = smooth_variances(n, h, w, float(h - w)) / 2.0
            shape = f"h = {h}, w = {w}"
        else:
            draws = np.array([bin(t).count("1") for t in range(1, n + 1)], float)
            shape = f"levels = {plan.levels}"
        final = res.regret[:, -1]
        band = 1.96 * final.std(ddof=1) / np.sqrt(final.size) if final.size > 1 else float("nan")
        print(f"{counter:>7}: {shape}, first record in {pol.nodes(res.problem)} nodes; "
              f"certificate ε = {cert['pure_epsilon']:.10g}; b(Σ r·x) = {b:.6g}; prefix draws "
              f"mean {draws.mean():.3f} (max {draws.max():.0f}); prefix entry variance mean "
              f"{2.0 * draws.mean() * b * b:.6g}; regret at T {final.mean():.2f} ± {band:.2f}; "
              f"CPU {cpu:.1f} s")


if __name__ == "__main__":
    main()
