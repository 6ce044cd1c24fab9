"""Contextual policy benchmarks.  Run: ``python benchmarks/bench_contextual.py [--quick]``.

C1  rounds per second on one core for ``linucb`` and ``lints`` at d = 10, K = 10, T = 1e5 on the
    synthetic linear bandit (one context per arm: a shared θ), warm (compiled), through
    ``simulate_contextual`` (the loop, the regret curve, the segments and the ledger) and
    through the policy's ``run_one`` alone.
C2  the same on digits (supervised, d = 64, K = 10 disjoint per-arm models), T = 1e5.
C3  how the cost grows: seconds per round against d (shared and disjoint models, K = 10) and
    against T (d = 10): a round costs O(K·d²) (the K widths √(xᵀA⁻¹x) by forward substitution
    on the Cholesky factor, and one rank-1 Cholesky update of O(d²) per delivered record), so
    the time per round is flat in T and grows as d².
Times are medians of repeats; not a test.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from dpledger.policies.contextual import environments as CE  # noqa: E402
from dpledger.policies.contextual.base import problem_of  # noqa: E402
from dpledger.policies.contextual.simulator import simulate_contextual  # noqa: E402
from dpledger.policies.registry import make_policy  # noqa: E402
from dpledger.policies.simulator import run_generator  # noqa: E402


from bench_policies import _median_time as _median  # noqa: E402  (medians of repeats)


def rates(name: str, env, T: int, repeats: int) -> tuple[float, float]:
    """(rounds/s through simulate_contextual, rounds/s of run_one alone), one run, warm."""
    pol = make_policy(name)
    simulate_contextual(pol, env, min(T, 1000), seed=0, runs=1)        # compile
    sim = _median(lambda: simulate_contextual(pol, env, T, seed=0, runs=1), repeats)
    prob = problem_of(env, T, 0)
    one = _median(lambda: pol.run_one(run_generator(0, 0), env, prob), repeats)
    return T / sim, T / one


def digits_env():
    try:
        from dpledger.policies.contextual.data import load_supervised
        return load_supervised("digits")
    except Exception as exc:        # scikit-learn missing: say so, skip C2
        print(f"C2 skipped: {exc}")
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="T = 1e4, one repeat (default: off)")
    args = ap.parse_args()
    T = 10_000 if args.quick else 100_000
    reps = 1 if args.quick else 3
    print(f"C1  linear bandit d=10 K=10 (shared θ), T={T}: rounds/s (simulate / run_one)")
    lin = CE.linear(10, 10, seed=0)
    for name in ("linucb", "lints"):
        s, o = rates(name, lin, T, reps)
        print(f"    {name:7s} {s:12.4g} {o:12.4g}")
    dig = digits_env()
    if dig is not None:
        print(f"C2  digits d=64 K=10 (disjoint), T={T}: rounds/s (simulate / run_one)")
        for name in ("linucb", "lints"):
            s, o = rates(name, dig, T, reps)
            print(f"    {name:7s} {s:12.4g} {o:12.4g}")
    print("C3  microseconds per round of linucb (run_one), K=10, T=2e4")
    print("    d      shared   disjoint")
    rng = np.random.default_rng(0)
    for d in (5, 10, 20, 40, 80):
        x = rng.random((20_000, d))
        x = CE.fit_to_bound(x / np.linalg.norm(x, axis=1, keepdims=True), 1.0)[0]
        r = (rng.random((20_000, 10)) < 0.5) * 1.0
        dis = CE.contextual_table(x, r)
        sh = CE.linear(d, 10, seed=0)
        us = []
        for env in (sh, dis):
            pol = make_policy("linucb")
            prob = problem_of(env, 20_000, 0)
            pol.run_one(run_generator(0, 0), env, problem_of(env, 100, 0))
            us.append(1e6 * _median(lambda pol=pol, env=env, prob=prob:
                                    pol.run_one(run_generator(0, 0), env, prob), reps) / 20_000)
        print(f"    {d:<4d} {us[0]:9.3g} {us[1]:10.3g}")
    print("    linucb d=10 shared, microseconds per round against T")
    for T2 in ((10_000, 100_000) if args.quick else (10_000, 100_000, 1_000_000)):
        pol = make_policy("linucb")
        prob = problem_of(lin, T2, 0)
        t = _median(lambda pol=pol, prob=prob: pol.run_one(run_generator(0, 0), lin, prob), reps)
        print(f"    T={T2:<9d} {1e6 * t / T2:.3g}")


if __name__ == "__main__":
    main()
