"""The private contextual policies with the smooth binary mechanism against their binary trees
at the same certificate (issue 32 §3; mechanisms/matrix_smooth.py,
docs/algorithms.md#smooth-binary-counter).  Run from the worktree:
``PYTHONPATH=. python benchmarks/bench_smooth_contextual.py [--policy jdp-linucb |
dp-linucb-mt | dp-lints-mt | reward-dp-linucb] [--dim 5]
[--arms 5] [--horizon 2000] [--runs 20] [--epsilon 1] [--delta 0.1] [--epsilon0 0.1]``.

``jdp-linucb``: both counters use ``calibration=accounted`` at the same (ε, δ), so both
certificates meet the same target (σ solved by GDP at the nodes a record enters:
bit_length(T) for the binary tree, the smooth tree's first-record count); a prefix entry (off
the diagonal) has variance levels·σ² (binary, padded) or (w − z_t)·σ² (smooth).
``reward-dp-linucb``: σ is always solved by GDP at the nodes a reward enters, so both counters
at the same (ε, δ) meet the same target; a stream's prefix entry has variance popcount(t)·σ²
(binary, unpadded) or (w − z_t)·σ² (smooth), t the stream's records (the linear environment
has one context per arm: one stream).
``dp-linucb-mt`` / ``dp-lints-mt``: both counters at the same ε₀ per statistic, so both
certificates are the same pure (d(d+1)/2 + d)·ε₀ (each entry's Laplace scale b is
nodes·Δ₁/ε₀); a Σ r·x prefix entry has variance 2·popcount(t)·b² (binary, unpadded) or
2·(w − z_t)·b² (smooth).  Printed per counter: the certificate, the shape, σ or b, the noise
draws in a prefix (mean over t and max), the mean prefix-entry variance in closed form, and the
mean cumulative regret at T on the linear environment over R runs with its 95 % band
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

MT = ("dp-linucb-mt", "dp-lints-mt")
GAUSS = ("jdp-linucb", "reward-dp-linucb")


def _eps_at(cert: dict, delta: float) -> float:
    """The certificate's ε at the target δ (the report keys its δ grid by strings)."""
    return next(v for k, v in cert["epsilon_at_delta"].items() if float(k) == delta)


def _prefix_draws(pol, plan, n: int) -> np.ndarray:
    """The node draws in the prefix after record t = 1 … n: smooth w − z_t
    (smooth_variances at ε = (h − w)·√2 is w − z_t); binary padded ``levels`` (jdp-linucb),
    unpadded popcount(t) (Mishra & Thakurta, reward-dp-linucb)."""
    if plan.smooth:
        h, w, _ = plan.smooth
        return smooth_variances(n, h, w, (h - w) * np.sqrt(2.0))
    if plan.pad:
        return np.full(n, float(plan.levels))
    return np.array([bin(t).count("1") for t in range(1, n + 1)], float)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="jdp-linucb", choices=(*GAUSS, *MT))
    ap.add_argument("--dim", type=int, default=5)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--horizon", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=1.0,
                    help="the target ε of jdp-linucb / reward-dp-linucb")
    ap.add_argument("--delta", type=float, default=0.1,
                    help="the target δ of jdp-linucb / reward-dp-linucb")
    ap.add_argument("--epsilon0", type=float, default=0.1, help="the MT policies' ε₀")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    env = CE.linear(a.dim, a.arms, seed=a.seed)
    T = a.horizon
    mt = a.policy in MT
    target = (f"ε₀ = {a.epsilon0}" if mt else
              f"target (ε, δ) = ({a.epsilon}, {a.delta}), σ by the accountant (GDP)")
    # reward-dp-linucb has no calibration parameter: its σ is always the accountant's
    calib = {"calibration": "accounted"} if a.policy == "jdp-linucb" else {}
    print(f"{a.policy} on linear (d = {a.dim}, K = {a.arms}), T = {T}, {a.runs} runs, {target}")
    for counter in ("binary", "smooth"):
        params = ({"epsilon0": a.epsilon0} if mt else
                  {"epsilon": a.epsilon, "delta": a.delta, **calib})
        pol = make_policy(a.policy, counter=counter, **params)
        t0 = sum(os.times()[:2])
        res = simulate_contextual(pol, env, T, seed=a.seed, runs=a.runs)
        cpu = sum(os.times()[:2]) - t0
        cert = build_contextual_report(res)["privacy"]["certificate"]
        plan = pol.plan(res.problem)
        draws = _prefix_draws(pol, plan, res.problem.max_observations)
        shape = (f"h = {plan.smooth[0]}, w = {plan.smooth[1]}" if plan.smooth
                 else f"levels = {plan.levels}")
        if mt:
            b = plan.drawn["scales"][-1]
            noise = (f"certificate ε = {cert['pure_epsilon']:.10g}; b(Σ r·x) = {b:.6g}",
                     2.0 * b * b)
        else:
            sigma = plan.drawn["sigma"]
            noise = (f"certificate μ = {cert['gdp_mu']:.6g}, ε(δ = {a.delta:g}) = "
                     f"{_eps_at(cert, a.delta):.10g}; σ = {sigma:.6g}", sigma ** 2)
        final = res.regret[:, -1]
        band = 1.96 * final.std(ddof=1) / np.sqrt(final.size) if final.size > 1 else float("nan")
        print(f"{counter:>7}: {shape}, first record in {pol.nodes(res.problem)} nodes; "
              f"{noise[0]}; prefix draws mean {draws.mean():.3f} (max {draws.max():.0f}); "
              f"prefix entry variance mean {draws.mean() * noise[1]:.6g}; "
              f"regret at T {final.mean():.2f} ± {band:.2f}; CPU {cpu:.1f} s")


if __name__ == "__main__":
    main()
