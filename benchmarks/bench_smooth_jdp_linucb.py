"""``jdp-linucb`` with the smooth binary mechanism against the padded binary tree at the same
certificate (issue 32 §3; mechanisms/matrix_smooth.py, docs/algorithms.md#smooth-binary-counter).
Run from the worktree: ``PYTHONPATH=. python benchmarks/bench_smooth_jdp_linucb.py
[--dim 5] [--arms 5] [--horizon 2000] [--runs 20] [--epsilon 1] [--delta 0.1]``.

Both counters use ``calibration=accounted`` at the same (ε, δ), so both certificates meet the
same target (σ solved by GDP at the nodes a record enters: bit_length(T) for the binary tree,
the smooth tree's first-record count).  Printed per counter: the certificate (μ and ε at δ,
from accounting), σ, the noise matrices in a prefix (binary: ``levels``, padded; smooth: at
most w), the closed-form variance of a prefix entry (binary levels·σ²; smooth mean over t of
(w − z_t)·σ²), and the mean cumulative regret at T on the linear environment over R runs with
its 95 % band (± 1.96·sd/√R).  Not a test.  CPU time (user + sys) is reported: the machine is
shared.
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


def _eps_at(cert: dict, delta: float) -> float:
    """The certificate's ε at the target δ (the report keys its δ grid by strings)."""
    return next(v for k, v in cert["epsilon_at_delta"].items() if float(k) == delta)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=5)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--horizon", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    env = CE.linear(a.dim, a.arms, seed=a.seed)
    T = a.horizon
    print(f"jdp-linucb on linear (d = {a.dim}, K = {a.arms}), T = {T}, {a.runs} runs, "
          f"target (ε, δ) = ({a.epsilon}, {a.delta}), calibration = accounted")
    for counter in ("binary", "smooth"):
        pol = make_policy("jdp-linucb", epsilon=a.epsilon, delta=a.delta,
                          calibration="accounted", counter=counter)
        t0 = sum(os.times()[:2])
        res = simulate_contextual(pol, env, T, seed=a.seed, runs=a.runs)
        cpu = sum(os.times()[:2]) - t0
        rep = build_contextual_report(res)
        cert = rep["privacy"]["certificate"]
        plan = pol.plan(res.problem)
        sigma = plan.drawn["sigma"]
        if plan.smooth:
            h, w, _ = plan.smooth
            # smooth_variances: 2·(w − z_t)·((h − w)/ε)² per step; at (h − w)/ε = 1/√2 it is
            # (w − z_t), the draws in the prefix after record t
            draws = smooth_variances(res.problem.max_observations, h, w,
                                     (h - w) * np.sqrt(2.0))
            shape = f"h = {h}, w = {w}, first record in {pol.nodes(res.problem)} nodes"
        else:
            draws = np.full(res.problem.max_observations, float(plan.levels))
            shape = f"levels = {plan.levels}, first record in {pol.nodes(res.problem)} nodes"
        final = res.regret[:, -1]
        band = 1.96 * final.std(ddof=1) / np.sqrt(final.size) if final.size > 1 else float("nan")
        print(f"{counter:>7}: {shape}; certificate μ = {cert['gdp_mu']:.6g}, "
              f"ε(δ = {a.delta:g}) = {_eps_at(cert, a.delta):.10g}; "
              f"σ = {sigma:.6g}; prefix draws mean {draws.mean():.3f} (max {draws.max():.0f}); "
              f"prefix entry variance (off-diagonal) mean {draws.mean() * sigma ** 2:.6g}; "
              f"regret at T {final.mean():.2f} ± {band:.2f}; CPU {cpu:.1f} s")


if __name__ == "__main__":
    main()
