"""Time of the regret bounds (a command, not a timed test).

    python benchmarks/bench_bounds.py [--repeat 5] [--json]

Per reward family, the distinguishability gaps of one instance (uncached: d_inf and t_inf of
every suboptimal arm; Beta's t_inf is the 2-D minimisation), every policy's bounds once the gaps
are cached (``dpledger bounds``), and a regret plot's re-evaluation of one policy's drawable
bounds at 200 log-spaced rounds (``--bounds``).  Median wall time of ``--repeat`` calls.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

from dpledger.policies import environments as E
from dpledger.policies.registry import available, make_policy
from dpledger.policies.regret_bounds import bound_curves, bounds_for_policy
from dpledger.policies.reward_families import RewardInstance, arm_gaps

INSTANCES = {
    "bernoulli": E.bernoulli([0.75, 0.625, 0.5, 0.375, 0.25]),
    "truncexp": E.truncated_exponential([0.1, 1.0, 2.0, 5.0, 10.0]),
    "beta": E.beta([(2.0, 3.0), (3.0, 2.0), (1.0, 1.0), (5.0, 5.0), (0.5, 0.5)]),
}


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="calls per measurement (default 5)")
    ap.add_argument("--json", action="store_true", help="print JSON (default: a table)")
    args = ap.parse_args()
    policies = [make_policy(n) for n in available()]
    ts = np.unique(np.geomspace(1, 10 ** 6, 200).astype(int)).tolist()
    bounds_for_policy(policies[0], RewardInstance.from_environment(INSTANCES["bernoulli"]), 100)
    rows = []
    for family, env in INSTANCES.items():
        inst = RewardInstance.from_environment(env)

        def gaps(inst=inst):
            arm_gaps.cache_clear()
            arm_gaps(inst)
        t_gaps = median_time(gaps, args.repeat)
        t_all = median_time(lambda inst=inst: [bounds_for_policy(p, inst, 10 ** 6)
                                               for p in policies], args.repeat)
        t_curve = median_time(lambda inst=inst: bound_curves(make_policy("adap-ucb"), inst,
                                                             10 ** 6, ts), args.repeat)
        rows.append({"family": family, "arms": inst.n_arms, "gaps_s": t_gaps,
                     "all_policies_s": t_all, "policies": len(policies),
                     "plot_curves_s": t_curve, "rounds": len(ts)})
    if args.json:
        print(json.dumps({"machine": platform.processor() or platform.machine(), "rows": rows},
                         indent=1))
        return
    print(f"{'family':<10} {'gaps (uncached)':>16} {'bounds of all policies':>23} "
          f"{'plot curves (adap-ucb)':>23}")
    for r in rows:
        print(f"{r['family']:<10} {r['gaps_s'] * 1e3:>13.1f} ms {r['all_policies_s'] * 1e3:>20.1f} "
              f"ms {r['plot_curves_s'] * 1e3:>17.1f} ms ({r['rounds']} t)")


if __name__ == "__main__":
    main()
