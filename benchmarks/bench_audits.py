"""P6 of docs/design.md#performance-targets: audit speed (a command, never a timed test).

    python benchmarks/bench_audits.py [--trials-whitebox 1000000] [--trials-blackbox 100000]
                                      [--workers 2] [--stop-also 64] [--json]

* white-box Laplace, ε = 1, 1e6 trials per side (target ≤ 1 s): all noise of a side drawn at
  once, selection on 10 %, counts on 90 %.  Reported cold (first call in the process: imports
  of the accounting code and the certificate's privacy block) and warm (median of 3).
* black-box Lazy-DP-TS, ε = 1, K = 2, T = 1000, 1e5 trials per side (target ≤ 60 s): the
  compiled trial loop over the policy's numba kernel, full runs (stop = T); reported with 1 and
  with ``--workers`` processes, compile time separate.  ``--stop-also R`` adds a run stopped at
  round R (what a score that needs only the first R rounds costs).
* ``--p6`` (issue 14 §6): the P6 rows instead — black-box Lazy-DP-TS, T = 1000, ``--p6-trials``
  per side (default 1e6; target ≤ 120 s on 2 cores) and white-box every private policy at
  T = 1000 (target ≤ 10 s each), each run with ``--workers`` threads after a small warm-up
  audit (compile time reported apart).  Every row gives wall seconds and the process's CPU
  seconds (all threads: what one core would need), the rounds each trial ran (``stop_at``)
  and the load average, since the machine is shared.  ``--p6-policies a,b`` restricts the
  white-box rows; ``--p6-skip-blackbox`` drops the black-box row.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials-whitebox", type=int, default=1_000_000)
    ap.add_argument("--trials-blackbox", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--stop-also", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--p6", action="store_true", help="the P6 rows (issue 14 §6) only")
    ap.add_argument("--p6-trials", type=int, default=1_000_000)
    ap.add_argument("--p6-policies", default=None)
    ap.add_argument("--p6-skip-blackbox", action="store_true")
    args = ap.parse_args(argv)
    out = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_average_1m": os.getloadavg()[0]}}
    if args.p6:
        out["p6"] = p6(args.p6_trials, args.workers, args.p6_policies, args.p6_skip_blackbox)
        if args.json:
            sys.stdout.write(json.dumps(out, indent=1) + "\n")
        return 0

    t = time.perf_counter()
    from dpledger.audits.mechanisms import audit_laplace
    r = audit_laplace(1.0, args.trials_whitebox, seed=0)
    cold = time.perf_counter() - t
    warm = []
    for s in range(3):
        t = time.perf_counter()
        r = audit_laplace(1.0, args.trials_whitebox, seed=s)
        warm.append(time.perf_counter() - t)
    out["whitebox_laplace"] = {"trials_per_side": args.trials_whitebox, "epsilon_lower": r.epsilon_lower,
                               "seconds_cold": cold, "seconds_warm_median": statistics.median(warm),
                               "target_seconds": 1.0}
    _say(f"white-box Laplace eps=1, {args.trials_whitebox:g}/side: eps_lower {r.epsilon_lower:.4f}; "
         f"cold {cold:.3f} s, warm {statistics.median(warm):.3f} s (target <= 1 s)")

    from dpledger.audits.pairs import default_pair
    from dpledger.audits.policy import audit_policy, run_trials
    from dpledger.policies.registry import make_policy
    p = make_policy("lazy-dp-ts")
    pair = default_pair(p, 1000, 2)
    e0, _ = pair.envs()
    t = time.perf_counter()
    run_trials(p, e0, 1000, 8, seed=0, side=0, stop=1000, capture=False, arm=0, t_star=1)
    compile_s = time.perf_counter() - t
    bb = {"trials_per_side": args.trials_blackbox, "T": 1000, "compile_seconds": compile_s,
          "target_seconds": 60.0, "runs": []}
    configs = [(1, None), (args.workers, None)] if args.workers > 1 else [(1, None)]
    if args.stop_also:
        configs.append((args.workers, args.stop_also))
    for workers, stop in configs:
        t = time.perf_counter()
        res = audit_policy(p, trials=args.trials_blackbox, mode="blackbox", T=1000, seed=0,
                           workers=workers, stop_at=stop)
        dt = time.perf_counter() - t
        bb["runs"].append({"workers": workers, "stop_at": res.to_json()["stop_at"], "seconds": dt,
                           "epsilon_lower": res.epsilon_lower,
                           "runs_per_second": 2 * args.trials_blackbox / dt})
        _say(f"black-box Lazy-DP-TS T=1000, {args.trials_blackbox:g}/side, workers={workers}, "
             f"stop={res.to_json()['stop_at']}: {dt:.1f} s, eps_lower {res.epsilon_lower:.4f} "
             f"(target <= 60 s; compile {compile_s:.1f} s)")
    out["blackbox_lazy_dp_ts"] = bb
    if args.json:
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
    return 0


def _timed_audit(policy, trials: int, mode: str, T: int, workers: int) -> dict:
    from dpledger.audits.policy import audit_policy
    from dpledger.errors import DpledgerError
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        res = audit_policy(policy, trials=trials, mode=mode, T=T, seed=0, workers=workers)
    except DpledgerError as exc:
        return {"error": str(exc)}
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    j = res.to_json()
    return {"seconds": wall, "cpu_seconds": cpu, "stop_at": j["stop_at"], "score": j["score"],
            "lower": res.lower, "ratio": res.ratio, "load_average_1m_before": load}


def p6(trials: int, workers: int, policies: str | None, skip_blackbox: bool) -> dict:
    """The P6 rows of issue 14 §6 (see the module docstring)."""
    from dpledger.policies.registry import available, make_policy, policy_class
    rows = {"trials_per_side": trials, "workers": workers, "T": 1000, "blackbox": None,
            "whitebox": {}}
    if not skip_blackbox:
        p = make_policy("lazy-dp-ts")
        t = time.perf_counter()
        _timed_audit(p, 200, "blackbox", 1000, workers)
        warm = time.perf_counter() - t
        r = _timed_audit(p, trials, "blackbox", 1000, workers)
        r.update(warmup_seconds=warm, target_seconds=120.0)
        rows["blackbox"] = r
        _say(f"P6 black-box lazy-dp-ts T=1000 {trials:g}/side workers={workers}: "
             + _row_text(r, 120.0))
    names = (policies.split(",") if policies else
             [n for n in available() if policy_class(n).private])
    unknown = [n for n in names if n not in available()]
    if unknown:
        raise SystemExit(f"bench_audits: unknown policy {', '.join(unknown)}; known: "
                         f"{', '.join(available())}")
    for name in names:
        p = make_policy(name)
        t = time.perf_counter()
        _timed_audit(p, 200, "whitebox", 1000, workers)
        warm = time.perf_counter() - t
        r = _timed_audit(p, trials, "whitebox", 1000, workers)
        r.update(warmup_seconds=warm, target_seconds=10.0)
        rows["whitebox"][name] = r
        _say(f"P6 white-box {name} T=1000 {trials:g}/side workers={workers}: "
             + _row_text(r, 10.0))
    return rows


def _row_text(r: dict, target: float) -> str:
    if "error" in r:
        return f"not run: {r['error']}"
    return (f"{r['seconds']:.1f} s wall, {r['cpu_seconds']:.1f} s CPU (target <= {target:g} s), "
            f"stop {r['stop_at']}, {r['score']} lower {r['lower']:.3f} ratio "
            f"{r['ratio'] if r['ratio'] is None else round(r['ratio'], 3)}, warm-up "
            f"{r['warmup_seconds']:.1f} s, load {r['load_average_1m_before']:.1f}")


def _say(msg: str) -> None:
    sys.stderr.write(msg + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
