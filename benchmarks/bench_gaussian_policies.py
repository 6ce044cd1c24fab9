"""docs/design.md#performance-targets P1 and P4 for the Gaussian and tree policies (a command, never
a timed test).

    python benchmarks/bench_gaussian_policies.py [--horizon 1000000] [--runs 3] [--arms 5]

P1: run-rounds per second per core, in process, warm compile: the policy kernel alone
(``policy.run_one``) and ``simulate`` (kernel + ledger ingestion), for TS-Gaussian, DP-UCB (both
widths), M-TS-Gaussian (b = 10), DP-TS-UCB and private TS (gap estimation off).
P4: ledger overhead = (a) in the kernel: for DP-UCB the same rule with its ledger writes
stripped (a benchmark-only copy below, never used by the package) against the real kernel; for
TS-Gaussian, whose kernel writes nothing and whose ``finish`` adds one posterior-read record per
arm, ``run_one`` against the bare kernel; (b) outside ``run_one``: ``simulate`` time minus
``run_one`` time (segments, row ingestion, stream lengths, and the regret digest, which shares
the segment table); (c) for TS-Gaussian, the per-reward accounting a report does on that ledger
(``piece_totals`` and the worst reward), timed separately.
Target: P1 ≥ 1e7 run-rounds/s for TS-Gaussian and DP-UCB; P4 ≤ 10 %.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from dpledger.mechanisms.counters import binary_commit, binary_new, binary_output, binary_push
from dpledger.policies.environments import bernoulli, draw_reward
from dpledger.mechanisms.noise import laplace_bits
from dpledger.policies.mishra_thakurta import (dp_ucb_coefficients, dp_ucb_from, dp_ucb_root,
                                               dp_ucb_tables)
from dpledger.policies.registry import make_policy
from dpledger.policies.rules import argmax_first, tie_break
from dpledger.policies.simulator import run_generator, simulate


# ---- benchmark-only copies of the rules without ledger writes (for P4 (a)) ----------------------

@njit(cache=True)
def _dp_ucb_no_ledger(rng, env, T, K, eps0, gamma_, experimental, actions, tab):
    """``policies.mishra_thakurta._dp_ucb`` without its ledger rows and capture: the same
    tables (``tab`` = ``dp_ucb_tables(n)``), argmax and Laplace draw, so the difference is the
    ledger's share."""
    n_tab = tab.size // 3
    fs0, is0 = binary_new(T, 0)
    levels = is0[1]
    scale = levels / eps0
    bfs = np.zeros((K, fs0.size))
    bis = np.zeros((K, 4), np.int64)
    for a in range(K):
        bis[a] = is0
    r = np.zeros(K)
    n = np.zeros(K)
    ca = np.zeros(K)
    cb = np.zeros(K)
    cc = np.zeros(K)
    idx = np.zeros(K)
    acc = 0
    for t in range(1, T + 1):
        if t <= K:
            a = t - 1
        else:
            if t < n_tab:
                lt = tab[t]
                sl = tab[n_tab + t]
            else:
                lt = np.log(t)
                sl = np.sqrt(lt)
            for j in range(K):
                idx[j] = dp_ucb_from(ca[j], cb[j], cc[j], sl, lt)
            a, tie = argmax_first(idx)
            if tie:
                a = tie_break(idx, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        code, value, s0, s1 = binary_push(bfs[a], bis[a], x)
        noise = laplace_bits(rng.bit_generator, scale)
        binary_commit(bfs[a], bis[a], code, value + noise)
        r[a] = binary_output(bfs[a], bis[a])
        n[a] += 1.0
        m = np.int64(n[a])
        root = tab[2 * n_tab + m] if m < n_tab else dp_ucb_root(n[a])
        ca[a], cb[a], cc[a] = dp_ucb_coefficients(r[a], n[a], gamma_, experimental, root)
        actions[t - 1] = a
        acc += a
    return acc


def _best(fn, reps):
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=int, default=10 ** 6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    T, R, K = args.horizon, args.runs, args.arms
    means = np.linspace(0.9, 0.3, K)
    env = bernoulli(means)
    et = env.as_tuple()
    cases = [("ts-gaussian", {}), ("mts-gaussian", {"b": 10, "c": 2.0}),
             ("dp-ts-ucb", {"alpha": 0.5}), ("dp-ucb", {}),
             ("dp-ucb", {"width": "experimental", "per_tree_budget": "full"}),
             ("dp-ts-mt", {"gap_estimation": False, "random_pulls": 50})]
    print(f"T = {T}, runs = {R}, K = {K}, best of {args.reps}; one core")
    print(f"{'policy':44s} {'kernel r-r/s':>14s} {'simulate r-r/s':>15s} {'ledger outside':>15s}")
    kernel_time = {}
    for name, params in cases:
        pol = make_policy(name, **params)
        pol.run_one(run_generator(0, 0), et, min(T, 1000))          # warm the compile cache

        def kernels(pol=pol):
            for i in range(R):
                pol.run_one(run_generator(0, i), et, T)

        tk = _best(kernels, args.reps)
        ts = _best(lambda pol=pol: simulate(pol, env, T, seed=0, runs=R), args.reps)
        label = name + (" " + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")
        kernel_time[(name, tuple(sorted(params.items())))] = tk
        print(f"{label:44s} {R * T / tk:14.3e} {R * T / ts:15.3e} {(ts - tk) / ts:14.1%}")

    print("\nP4 (a): ledger work inside run_one")
    acts = np.zeros(T, np.int64)
    cap = np.zeros((2, 0))
    pol = make_policy("ts-gaussian")
    kern, kp = type(pol).kernel, pol.kernel_params(T, K)
    rows = np.zeros((5, 1), np.int64)

    def ts_kernel():
        for i in range(R):
            kern(run_generator(0, i), et, T, K, T, kp, acts, rows, cap)

    def ts_run_one():
        for i in range(R):
            pol.run_one(run_generator(0, i), et, T)

    t_plain, t_real = _best(ts_kernel, args.reps), _best(ts_run_one, args.reps)
    print(f"  ts-gaussian  run_one (kernel + posterior-read records) {t_real:.3f} s "
          f"({R * T / t_real:.3e} r-r/s), kernel alone {t_plain:.3f} s "
          f"({R * T / t_plain:.3e} r-r/s), ledger share {(t_real - t_plain) / t_real:.1%}")
    res = simulate(pol, env, T, seed=0, runs=R)

    def accounting():
        res.ledger._piece_cache = None           # recompute, as a fresh report would
        res.ledger._seg_index = None
        res.ledger.worst_reward()

    t_acc = _best(accounting, args.reps)
    n_rec = res.ledger.n_rows() + len(res.ledger.segments["run"])
    print(f"  ts-gaussian  per-reward accounting (piece totals + worst reward) {t_acc:.3f} s "
          f"= {t_acc / t_real:.1%} of run_one; ledger {n_rec} records (reads + segments) for "
          f"{R * T} rounds")
    pol = make_policy("dp-ucb")
    kern, kp = type(pol).kernel, pol.kernel_params(T, K)
    tab = dp_ucb_tables(int(kp[4]))
    rows = np.zeros((5, pol.row_capacity(T, K)), np.int64)
    _dp_ucb_no_ledger(run_generator(0, 0), et, 1000, K, kp[0], kp[1], False, acts, tab)

    def real():
        for i in range(R):
            kern(run_generator(0, i), et, T, K, T, kp, acts, rows, cap)

    def stripped():
        for i in range(R):
            _dp_ucb_no_ledger(run_generator(0, i), et, T, K, kp[0], kp[1], False, acts, tab)

    t_real, t_plain = _best(real, args.reps), _best(stripped, args.reps)
    print(f"  dp-ucb       real {t_real:.3f} s ({R * T / t_real:.3e} r-r/s), without ledger "
          f"{t_plain:.3f} s ({R * T / t_plain:.3e} r-r/s), ledger share "
          f"{(t_real - t_plain) / t_real:.1%}")


if __name__ == "__main__":
    main()
