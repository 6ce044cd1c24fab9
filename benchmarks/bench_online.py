"""Step-form policies (issue 24, "Speed and scale"): the cost of one step.

1. In process, no release in the step: ``select`` + ``observe`` of every policy with a step
   form at K = 5, records kept in memory (``store=None``), median over the steps that made no
   release (target ≤ 20 µs).  Non-private policies record a read at every step: their median is
   over all steps, a read included.
2. A step that records a release, on SQLite (WAL, ``synchronous=FULL``: durable at commit):
   median and 90th percentile of the steps that made one (target ≤ 2 ms), for Lazy-DP-TS and
   for DP-UCB (a release at every step); the checkpoint goes in the same transaction.

Rewards are Bernoulli(0.3 … 0.7), observed right after their select; wall clock
(``perf_counter_ns``) on a shared machine: compare runs on one machine only.

    PYTHONPATH=. python benchmarks/bench_online.py [--steps 20000]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from dpledger.policies import online
from dpledger.policies.step_rules import RULES

K = 5
MEANS = np.linspace(0.3, 0.7, K)


def _steps(p, n, rng):
    """(step times in ns, whether the step recorded) for n steps."""
    times = np.zeros(n, np.int64)
    rec = np.zeros(n, np.bool_)
    draws = rng.random(n)
    for i in range(n):
        before = p.n_recorded
        t0 = time.perf_counter_ns()
        t = p.select()
        p.observe(t, 1.0 if draws[i] < MEANS[t.arm] else 0.0)
        times[i] = time.perf_counter_ns() - t0
        rec[i] = p.n_recorded != before
    return times, rec


def in_process(steps: int) -> list[tuple]:
    out = []
    for name in sorted(RULES):
        p = online(name, K, horizon=steps + 10, seed=0)
        _steps(p, 200, np.random.default_rng(1))        # compile and warm up
        p = online(name, K, horizon=steps + 10, seed=0)
        times, rec = _steps(p, steps, np.random.default_rng(2))
        quiet = times[~rec] if (~rec).sum() >= 100 else times
        out.append((name, float(np.median(quiet)) / 1e3, int((~rec).sum()), p.policy.private))
    return out


def recorded(name: str, steps: int) -> tuple:
    with tempfile.TemporaryDirectory() as d:
        p = online(name, K, horizon=steps + 300, store=os.path.join(d, "s.db"), seed=0)
        _steps(p, 200, np.random.default_rng(1))
        times, rec = _steps(p, steps, np.random.default_rng(2))
        t = times[rec] / 1e6
        p.close()
    return name, float(np.median(t)), float(np.percentile(t, 90)), int(rec.sum())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20000)
    args = ap.parse_args(argv)
    print(f"in process, K = {K}, {args.steps} steps, memory records (target ≤ 20 µs):")
    print(f"{'policy':<18} {'median µs':>10}  steps without a release")
    for name, us, n, private in in_process(args.steps):
        note = "" if private else "  (non-private: every step records a read)"
        print(f"{name:<18} {us:>10.2f}  {n}{note}")
    print("\nsteps that record a release on SQLite WAL, synchronous=FULL (target ≤ 2 ms):")
    for name, n in (("lazy-dp-ts", 20000), ("dp-ucb", 2000)):
        name, med, p90, k = recorded(name, min(n, args.steps))
        print(f"{name:<18} median {med:.3f} ms, 90% {p90:.3f} ms over {k} recorded steps")


if __name__ == "__main__":
    main()
