"""P3 (docs/design.md#performance-targets): Azize & Basu Fig. 2 end to end — DP-UCB, DP-SE,
AdaP-UCB, AdaP-KLUCB; ε = 1; 20 runs; T = 1e7; simulation, ledgers, run.json reports — timed from a
fresh process.

    python benchmarks/bench_p3.py [--workers 2] [--runs 20] [--horizon 10000000]

Target: ≤ 60 s on 2 cores.  Prints the time of each phase and the total.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

T0 = time.perf_counter()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--horizon", type=int, default=10_000_000)
    args = ap.parse_args()
    from dpledger.experiments.azize_basu_2022 import FIG2, FIG2_MEANS
    from dpledger.sweep import LocalExecutor, RunConfig, run_sweep
    t_import = time.perf_counter() - T0
    configs = [RunConfig(f"fig2-{p}", p, {"epsilon": 1.0, **params},
                         {"kind": "bernoulli", "means": FIG2_MEANS},
                         args.horizon, args.runs, seed=2022) for p, params in FIG2]
    out = tempfile.mkdtemp(prefix="p3-")
    t1 = time.perf_counter()
    reports = run_sweep(configs, out, LocalExecutor(args.workers), cell_runs=5, quiet=True)
    t_sweep = time.perf_counter() - t1
    total = time.perf_counter() - T0
    print(f"P3: Azize & Basu Fig. 2, T = {args.horizon:.0e}, {args.runs} runs, "
          f"{args.workers} workers")
    print(f"  imports {t_import:.1f} s; simulate + ledgers + reports {t_sweep:.1f} s; "
          f"total {total:.1f} s (target <= 60 s)")
    for label, rep in reports.items():
        print(f"  {label:18s} regret {rep['regret']['final_mean']:10.1f}  "
              f"certificate eps {rep['privacy']['certificate']['pure_epsilon']}")
    print(f"  outputs in {out} ({sum(len(f) for _, _, f in os.walk(out))} files)")


if __name__ == "__main__":
    main()
