"""P1 end to end (docs/design.md#performance-targets): `dpledger run` from a fresh process with a
warm compile cache.

    python benchmarks/bench_p1_cli.py [--horizon 10000000] [--runs 4] [--policies ucb1,...]

For each policy: one warm-up run (fills numba's on-disk cache), then ``--repeats`` timed runs,
each in a new process (best and median: the VM's timings vary by ±20 %).  Run-rounds per second = runs × T / wall time, everything included (interpreter start,
imports, cache loading, simulation, ledger, accounting, run.json).  Single worker: per core.
Also reported: run-rounds per CPU-second of the child (user + sys from ``getrusage``), which a
second busy thread could not flatter and which wanders less with the VM's wall-clock noise.

Goals (printed beside each policy, judged on the best wall time and on CPU time):
docs/design.md#performance-targets P1 (UCB1, TS-Gaussian, DP-UCB ≥ 1e7; Beta-TS ≥ 2e6) and issue 17
§6 (DP-KLUCB, DP-IMED ≥ 1e7 at K = 5, T = 1e7; KL-UCB raised from the design target's 2e6 to 1e7).
The default environment of `dpledger run` is the K = 5 Bernoulli instance, so the defaults measure
issue 17's setting.
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time

DEFAULT = "ucb1,ts-beta,klucb,ts-gaussian,dp-ucb,lazy-dp-ts,dp-klucb,dp-imed"
# run-rounds per second per core, end to end (see the module docstring for where each comes from)
GOALS = {"ucb1": 1e7, "ts-gaussian": 1e7, "dp-ucb": 1e7, "ts-beta": 2e6, "klucb": 1e7,
         "dp-klucb": 1e7, "dp-imed": 1e7}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizon", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--policies", default=DEFAULT)
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed fresh-process runs per policy (best and median reported)")
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="p1-")
    print(f"P1 end to end: T = {args.horizon:.0e}, {args.runs} runs, 1 worker, fresh process")
    for pol in args.policies.split(","):
        cmd = [sys.executable, "-m", "dpledger", "run", pol, "--horizon", str(args.horizon),
               "--runs", str(args.runs), "--seed", "0", "--quiet", "--out", f"{out}/{pol}.json"]
        warm = cmd[:]
        warm[warm.index(str(args.horizon))] = "1000"
        subprocess.run(warm, check=True, capture_output=True)
        times, cpus, status = [], [], "ok"
        for _ in range(args.repeats):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            if res.returncode != 0:
                status = f"exit {res.returncode}"
        best, med = min(times), sorted(times)[len(times) // 2]
        n = args.runs * args.horizon
        goal = GOALS.get(pol)
        verdict = "" if goal is None or status != "ok" else (
            f"  goal >= {goal:.0e}: wall {'met' if n / best >= goal else 'NOT met'}, "
            f"CPU {'met' if n / min(cpus) >= goal else 'NOT met'}")
        print(f"  {pol:14s} best {best:7.2f} s  {n / best:10.3g} run-rounds/s"
              f"   median {med:7.2f} s  {n / med:10.3g}   per CPU-second best {n / min(cpus):10.3g}"
              f"  ({status}){verdict}", flush=True)


if __name__ == "__main__":
    main()
