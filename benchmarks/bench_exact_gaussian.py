"""Float vs exact (discrete-Gaussian) sampler for TS-Gaussian, M-TS-Gaussian and DP-TS-UCB at
T = 1e6, 5 Bernoulli arms: run_one after a warm-up (compile), best of 5, wall and CPU time
(the CPU time is the figure to read on a shared machine), and simulate with its ledger.
Issue 12 §5's goal: exact ≤ 3× float.
Run: python benchmarks/bench_exact_gaussian.py"""
import time

from dpledger.mechanisms.noise import LATTICE_BITS
from dpledger.policies.environments import bernoulli
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator, simulate

env = bernoulli([0.75, 0.625, 0.5, 0.375, 0.25])
T = 10 ** 6
REPEATS = 5
for name in ["ts-gaussian", "mts-gaussian", "dp-ts-ucb"]:
    pol = make_policy(name)
    cpu = {}
    for lab, e in [("float", env), ("exact", env.with_lattice(LATTICE_BITS))]:
        et = e.as_tuple()
        pol.run_one(run_generator(0, 99), et, 1000)
        walls, cpus = [], []
        for i in range(REPEATS):
            w, c = time.perf_counter(), time.process_time()
            out = pol.run_one(run_generator(0, i), et, T)
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
        cpu[lab] = min(cpus)
        print(f"{name:13s} {lab:5s} run_one T=1e6: cpu min {min(cpus):.3f}s  wall min "
              f"{min(walls):.3f}s  draws {out.noise_draws}", flush=True)
    print(f"{name:13s} exact/float (cpu): {cpu['exact'] / cpu['float']:.2f}x", flush=True)
    for lab in ["float", "exact"]:
        w, c = time.perf_counter(), time.process_time()
        simulate(pol, env, T, seed=1, runs=2, sampler=lab)
        print(f"{name:13s} {lab:5s} simulate 2 runs T=1e6 (incl. ledger): wall "
              f"{time.perf_counter() - w:.2f}s cpu {time.process_time() - c:.2f}s", flush=True)
