"""The Beta-posterior draw against its floors (issue 31 §3; docs/design.md#performance-targets).

    python benchmarks/bench_beta_floor.py [--horizon 10000000] [--repeats 3]

Times, in one process and alternating (CPU seconds of the process, best of ``--repeats``), one
run of K = 5 arms on `dpledger run`'s default Bernoulli instance (means 0.75 … 0.25) of:

* ``all``: the ts-beta kernel with ``posterior_draw=all`` (K Beta draws a round);
* ``max``: the ts-beta kernel with ``posterior_draw=max`` (policies/beta_max.py: the leader's
  Beta draw, one uniform and a bound for each other arm, the exact tail and conditioned draw
  only when the bound cannot decide or the arm beats);
* ``floor-scheme``: the leader's Beta draw and K − 1 uniforms a round, the reward and the
  posterior update, no decision made — what the ``max`` scheme costs if every bound test were
  free;
* ``floor-any``: one Beta draw a round, the reward and the update — the least any sampler exact
  in law for the played arm's sample can do (it must draw a value with the law of the maximum:
  one Beta-like draw), the floor the issue measures against.

Prints ns a round and run-rounds per CPU-second (kernel only: the CLI adds about 1 s of CPU a
process for the interpreter, imports and cache loading, `benchmarks/bench_p1_cli.py` measures
end to end) and the ratios max / floor.

``--end-to-end`` also times `dpledger run POLICY --set posterior_draw=max --horizon T --runs 4
--seed 0 --quiet` for ts-beta, lazy-dp-ts and dp-ts in fresh processes (CPU of the child, best
of ``--repeats``), and the same command at T = 1000 (the start-up: interpreter, numba, imports,
cache loading, ledger and run.json), and compares each with the end-to-end floor of any
exact-in-law draw: start-up + 4·T·(floor-any per round).
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout

from dpledger.policies import baselines  # noqa: E402
from dpledger.policies.environments import bernoulli, draw_reward  # noqa: E402
from dpledger.policies.sink import make_sink, put_action  # noqa: E402

K = 5


@njit(nogil=True)
def _floor(rng, env, T, K, stop, params, actions, rows, capture):
    """One Beta draw and ``params[0]`` uniforms a round, the reward and the update of arm 0."""
    s = np.zeros(K)
    f = np.zeros(K)
    n_uniforms = int(params[0])
    acc = 0.0
    for t in range(1, stop + 1):
        a = 0
        acc += rng.beta(s[a] + 1.0, f[a] + 1.0)
        for _ in range(n_uniforms):
            acc += rng.random()
        x = draw_reward(rng, env, a, t - 1)
        if x == 1.0:
            s[a] += 1.0
        else:
            f[a] += 1.0
        put_action(actions, t, a)
    return stop, 0, int(acc) & 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--horizon", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--end-to-end", action="store_true",
                    help="also time the CLI with posterior_draw=max against the end-to-end floor")
    args = ap.parse_args()
    env = bernoulli([0.75, 0.625, 0.5, 0.375, 0.25]).as_tuple()
    kinds = {"all": (baselines._beta_ts, np.zeros(1)), "max": (baselines._beta_ts, np.ones(1)),
             "floor-scheme": (_floor, np.array([K - 1.0])), "floor-any": (_floor, np.zeros(1))}

    def once(fn, params, T, seed):
        rng = np.random.default_rng(seed)
        c = time.process_time()
        fn(rng, env, T, K, T, params, make_sink(K), np.zeros((5, K), np.int64), np.zeros((2, 0)))
        return time.process_time() - c

    for fn, params in kinds.values():                       # compile
        once(fn, params, 1000, 0)
    best = {k: float("inf") for k in kinds}
    for r in range(args.repeats):
        for k, (fn, params) in kinds.items():
            best[k] = min(best[k], once(fn, params, args.horizon, r))
    T = args.horizon
    print(f"Beta draw, K = {K}, T = {T:.0e}, best of {args.repeats} (CPU, one process)")
    for k, v in best.items():
        print(f"  {k:13s} {v / T * 1e9:7.1f} ns a round  {T / v:10.3g} run-rounds per CPU-second")
    print(f"  max / floor-scheme {best['max'] / best['floor-scheme']:.2f}, "
          f"max / floor-any {best['max'] / best['floor-any']:.2f}, "
          f"all / max {best['all'] / best['max']:.2f}")
    if args.end_to_end:
        end_to_end(T, args.repeats, best["floor-any"] / T)


def _cli_cpu(pol: str, T: int, out: str) -> float:
    """CPU seconds (user + sys) of one fresh `dpledger run` of this checkout."""
    cmd = [sys.executable, "-m", "dpledger", "run", pol, "--set", "posterior_draw=max",
           "--horizon", str(T), "--runs", "4", "--seed", "0", "--quiet", "--out", out]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   check=True, capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def end_to_end(T: int, repeats: int, floor_round: float) -> None:
    out = os.path.join(tempfile.mkdtemp(prefix="beta-floor-"), "run.json")
    print(f"End to end, posterior_draw=max, 4 runs of T = {T:.0e} (CPU of the process, best of "
          f"{repeats}); floor = start-up (T = 1000) + 4·T·{floor_round * 1e9:.1f} ns")
    for pol in ("ts-beta", "lazy-dp-ts", "dp-ts"):
        _cli_cpu(pol, 1000, out)                            # compile / load the cache
        start = min(_cli_cpu(pol, 1000, out) for _ in range(repeats))
        full = min(_cli_cpu(pol, T, out) for _ in range(repeats))
        floor = start + 4 * T * floor_round
        print(f"  {pol:11s} start-up {start:5.2f} s  run {full:6.2f} s  "
              f"{4 * T / full:10.3g} run-rounds per CPU-second  floor {floor:5.2f} s  "
              f"run / floor {full / floor:.2f}", flush=True)


if __name__ == "__main__":
    main()
