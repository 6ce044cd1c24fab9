"""Float vs exact (discrete-Gaussian) sampler for TS-Gaussian, M-TS-Gaussian and DP-TS-UCB at
T = 1e6, 5 Bernoulli arms: one run_one per call after a warm-up (compile), and simulate with
its ledger.  Run: PYTHONPATH=. python benchmarks/bench_exact_gaussian.py"""
import time, numpy as np
from dpledger.policies.registry import make_policy
from dpledger.policies.environments import bernoulli
from dpledger.policies.simulator import run_generator, simulate
from dpledger.mechanisms.noise import LATTICE_BITS
env = bernoulli([0.75,0.625,0.5,0.375,0.25])
T = 10**6
for name in ["ts-gaussian", "mts-gaussian", "dp-ts-ucb"]:
    pol = make_policy(name)
    for lab, e in [("float", env), ("exact", env.with_lattice(LATTICE_BITS))]:
        et = e.as_tuple()
        pol.run_one(run_generator(0, 99), et, 1000)
        ts = []
        for i in range(3):
            t = time.perf_counter(); out = pol.run_one(run_generator(0, i), et, T); ts.append(time.perf_counter() - t)
        print(f"{name:13s} {lab:5s} run_one T=1e6: min {min(ts):.3f}s  median {sorted(ts)[1]:.3f}s  draws {out.noise_draws}", flush=True)
    for lab in ["float", "exact"]:
        t = time.perf_counter(); simulate(pol, env, T, seed=1, runs=2, sampler=lab); print(f"{name:13s} {lab:5s} simulate 2 runs T=1e6 (incl. ledger): {time.perf_counter()-t:.2f}s", flush=True)
