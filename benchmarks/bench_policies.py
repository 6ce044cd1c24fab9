"""Policy benchmarks (docs/design.md#performance-targets P1, P2, P4).  Run: ``python
benchmarks/bench_policies.py [--quick]``.

P1  run-rounds per second per core, in process (warm compile), for UCB1, Beta-TS and KL-UCB,
    beside a batched-numpy per-round reference (R runs advanced together, one numpy op per
    round) in the same command.  5 Bernoulli arms {0.75, 0.625, 0.5, 0.375, 0.25}.
P2  one run at T = 1e7 for AdaP-UCB, AdaP-KLUCB, DP-SE, Anytime-Lazy-UCB (warm): ``run_one``
    (the fast path: play returned as segments, no actions), the uniform kernel filling an
    actions array (as audits call it), and the per-round loop (``fast`` off).
P4  simulator overhead (ledger recording, segment tables, regret): ``simulate`` against the
    kernels alone over the same runs, for per-round and event-driven policies.
Times are medians of repeats; not a test (docs/design.md#performance-targets).
"""
from __future__ import annotations

import functools
import argparse

import dpledger.policies.simulator as simmod
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from dpledger.policies.environments import bernoulli
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator, simulate

MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]


def _median_time(fn, repeats):
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return float(np.median(out))


def _numpy_ucb1(R, T, means, rng):
    K = len(means)
    s, n = np.zeros((R, K)), np.zeros((R, K))
    rows = np.arange(R)
    for t in range(1, T + 1):
        if t <= K:
            a = np.full(R, t - 1)
        else:
            a = np.argmax(s / n + np.sqrt(2 * np.log(t) / n), axis=1)
        x = rng.random(R) < means[a]
        s[rows, a] += x
        n[rows, a] += 1


def _numpy_beta_ts(R, T, means, rng):
    K = len(means)
    s, f = np.zeros((R, K)), np.zeros((R, K))
    rows = np.arange(R)
    for _t in range(T):
        a = np.argmax(rng.beta(s + 1, f + 1), axis=1)
        x = rng.random(R) < means[a]
        s[rows, a] += x
        f[rows, a] += ~x


def _numpy_klucb(R, T, means, rng, steps=25):
    K = len(means)
    s, n = np.zeros((R, K)), np.zeros((R, K))
    rows = np.arange(R)
    for t in range(1, T + 1):
        if t <= K:
            a = np.full(R, t - 1)
        else:
            p = np.clip(s / n, 1e-15, 1 - 1e-15)
            b = np.log(t) / n
            lo, hi = p.copy(), np.ones_like(p)
            for _ in range(steps):         # vectorised bisection (1e-7.5: coarser than ours)
                q = 0.5 * (lo + hi)
                with np.errstate(divide="ignore"):
                    d = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
                big = d > b
                hi = np.where(big, q, hi)
                lo = np.where(big, lo, q)
            a = np.argmax(hi, axis=1)
        x = rng.random(R) < means[a]
        s[rows, a] += x
        n[rows, a] += 1


def p1(quick):
    T = 10 ** 5 if quick else 10 ** 6
    runs = 2 if quick else 4
    env = bernoulli(MEANS).as_tuple()
    means = np.array(MEANS)
    rows = []
    for name, ref, target in (("ucb1", _numpy_ucb1, 1e7), ("ts-beta", _numpy_beta_ts, 2e6),
                              ("klucb", _numpy_klucb, 2e6)):
        pol = make_policy(name)
        pol.run_one(run_generator(0, 0), env, 1000)                # warm compile
        dt = _median_time(lambda pol=pol: [pol.run_one(run_generator(1, i), env, T)
                                           for i in range(runs)], 3)
        rate = runs * T / dt
        R, Tn = 100, (2000 if quick else 10000)
        rng = np.random.default_rng(0)
        dtn = _median_time(functools.partial(ref, R, Tn, means, rng), 1)
        rows.append((name, rate, R * Tn / dtn, target))
    print(f"\nP1  run-rounds/s per core (K = 5, T = {T:.0e}, in process, warm)")
    print(f"{'policy':<10}{'numba kernel':>16}{'batched numpy':>16}{'target':>10}  ok")
    for name, rate, nrate, target in rows:
        print(f"{name:<10}{rate:>16.3e}{nrate:>16.3e}{target:>10.0e}  {'yes' if rate >= target else 'NO'}")
    return rows


def p2(quick):
    T = 10 ** 7
    env = bernoulli(MEANS).as_tuple()
    K = len(MEANS)
    out = []
    for name in ("adap-ucb", "adap-klucb", "dp-se", "anytime-lazy-ucb"):
        pol = make_policy(name)
        slow = make_policy(name, fast=False)
        pol.run_one(run_generator(0, 0), env, 1000)
        slow.run_one(run_generator(0, 0), env, 1000)
        assert not pol.run_one(run_generator(0, 0), env, 1000).has_actions    # segments only
        kern = type(pol).kernel
        params = pol.kernel_params(T, K)
        rows = np.zeros((5, pol.row_capacity(T, K)), np.int64)
        cap = np.zeros((2, 0))
        seeds = iter(range(10 ** 6))
        reps = 5 if quick else 20
        acts = np.zeros(T, np.int64)

        def run(pol=pol, seeds=seeds):
            return pol.run_one(run_generator(2, next(seeds)), env, T)

        def with_actions(kern=kern, seeds=seeds, params=params, acts=acts, rows=rows, cap=cap):
            return kern(run_generator(3, next(seeds)), env, T, K, T, params, acts, rows, cap)

        def unsegmented(slow=slow, seeds=seeds):
            return slow.run_one(run_generator(4, next(seeds)), env, T)
        t_run = _median_time(run, reps)
        t_acts = _median_time(with_actions, 2 if quick else 5)
        t_slow = _median_time(unsegmented, 1)
        out.append((name, t_run, t_acts, t_slow))
    print("\nP2  one run at T = 1e7 (K = 5, warm; target ≤ 10 ms)")
    print(f"{'policy':<18}{'run_one':>12}{'+actions':>12}{'per-round':>12}  ok")
    for name, a, b, c in out:
        print(f"{name:<18}{a * 1e3:>10.3f}ms{b * 1e3:>10.1f}ms{c * 1e3:>10.0f}ms  "
              f"{'yes' if a <= 0.01 else 'NO'}")
    print("    run_one = the fast path as the simulator calls it (generator made outside, play "
          "returned as segments, no actions written); +actions = the uniform kernel filling a "
          "preallocated 1e7-entry actions array (what audits call); per-round = fast off")
    return out


def p4(quick):
    """The simulator's total time (``simulate``, one worker: runs, segment tables, regret,
    ledger recording, assembly) against the kernels alone (``run_one`` of the same runs with
    their Generators), interleaved, best of several repeats each."""
    env_obj = bernoulli(MEANS)
    env = env_obj.as_tuple()
    out = []
    for name, T, runs in (("lazy-dp-ts", 10 ** 5, 10), ("dp-ts", 10 ** 5, 10),
                          ("klucb", 10 ** 5, 10), ("adap-ucb", 10 ** 7, 20),
                          ("adap-klucb", 10 ** 7, 20), ("dp-se", 10 ** 7, 20),
                          ("anytime-lazy-ucb", 10 ** 7, 20), ("adap-ucb", 10 ** 7, 1000)):
        if quick:
            T //= 10
        pol = make_policy(name)
        simulate(pol, env_obj, T, seed=0, runs=1)          # warm every compiled piece
        reps = 3 if T * runs >= 10 ** 6 and name not in FAST_NAMES else 15
        if runs >= 1000:
            reps = 3
        t_kern, t_sim, t_led = [], [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            for i in range(runs):
                pol.run_one(run_generator(5, i), env, T)
            t_kern.append(time.perf_counter() - t0)
            spent = [0.0]
            original = simmod._record

            def timed(*a, original=original, spent=spent, **k):  # time spent writing the ledger
                t = time.perf_counter()
                try:
                    return original(*a, **k)
                finally:
                    spent[0] += time.perf_counter() - t
            simmod._record = timed
            try:
                t0 = time.perf_counter()
                res = simulate(pol, env_obj, T, seed=5, runs=runs)
                t_sim.append(time.perf_counter() - t0)
            finally:
                simmod._record = original
            t_led.append(spent[0])
        seg = res.ledger.segments["run"].size
        i = int(np.argmin(t_sim))
        out.append((name, T, runs, min(t_kern), t_sim[i], t_led[i], res.ledger.n_rows(), seg))
    print("\nP4  ledger share of a simulation (target ≤ 10 %), and simulate() against the "
          "kernels alone")
    print(f"{'policy':<18}{'T':>7}{'runs':>6}{'kernels':>11}{'simulate':>11}{'ledger':>10}"
          f"{'ledger %':>9}{'sim/kern':>9}{'rows':>8}{'segments':>10}")
    for name, T, runs, a, b, c, n, g in out:
        print(f"{name:<18}{T:>7.0e}{runs:>6}{a * 1e3:>9.2f}ms{b * 1e3:>9.2f}ms{c * 1e3:>8.2f}ms"
              f"{c / b * 100:>8.1f}%{(b / a - 1) * 100:>8.1f}%{n:>8}{g:>10}")
    print("    ledger = time inside the simulator's ledger recording (rows, trees, Gaussian "
          "prefix rows, index→round segments, stream lengths); sim/kern = everything simulate() "
          "adds over run_one of the same runs (ledger, segment tables, regret, assembly)")
    print("    rows / segments: ledger rows and index→round segments of the whole simulation "
          "(memory grows with releases and events, not with T)")
    return out


FAST_NAMES = ("adap-ucb", "adap-klucb", "dp-se", "anytime-lazy-ucb")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a few seconds)")
    args = ap.parse_args(argv)
    p1(args.quick)
    p2(args.quick)
    p4(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
