"""Step-form policies (issue 24, "Speed and scale"): the cost of one step.

1. In process, no release in the step: ``select`` + ``observe`` of every policy with a step
   form at K = 5, records kept in memory (``store=None``), median over the steps that made no
   release (target ≤ 20 µs).  Non-private policies record a read at every step: their median is
   over all steps, a read included.
2. A step that records a release, on SQLite (WAL, ``synchronous=FULL``: durable at commit)
   and on PostgreSQL (the ``pgserver`` wheel's server in a temporary folder, Unix socket,
   ``synchronous_commit`` on for the flush before the acknowledgement; or ``--postgres URL``):
   median and 90th percentile of the steps that made one (targets ≤ 2 ms SQLite, ≤ 5 ms
   PostgreSQL), for Lazy-DP-TS and for DP-UCB (a release at every step); the checkpoint goes
   in the same transaction.

Rewards are Bernoulli(0.3 … 0.7), observed right after their select; wall clock
(``perf_counter_ns``) on a shared machine: compare runs on one machine only.

    PYTHONPATH=. python benchmarks/bench_online.py [--steps 20000] [--postgres URL]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from dpledger.policies import online  # noqa: E402
from dpledger.policies.step_rules import RULES  # noqa: E402

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


def recorded(name: str, steps: int, url: str) -> tuple:
    """(name, median ms, 90th percentile ms, recorded steps) of ``steps`` steps on a fresh
    store at ``url``, after 200 warm-up steps."""
    p = online(name, K, horizon=steps + 300, store=url, seed=0)
    _steps(p, 200, np.random.default_rng(1))
    times, rec = _steps(p, steps, np.random.default_rng(2))
    t = times[rec] / 1e6
    p.close()
    return name, float(np.median(t)), float(np.percentile(t, 90)), int(rec.sum())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--postgres", default=None,
                    help="a postgresql:// URL prefix to use (default: start pgserver's server)")
    ap.add_argument("--skip-in-process", action="store_true")
    args = ap.parse_args(argv)
    if not args.skip_in_process:
        print(f"in process, K = {K}, {args.steps} steps, memory records (target ≤ 20 µs):")
        print(f"{'policy':<18} {'median µs':>10}  steps without a release")
        for name, us, n, private in in_process(args.steps):
            note = "" if private else "  (non-private: every step records a read)"
            print(f"{name:<18} {us:>10.2f}  {n}{note}")
    server = None
    if args.postgres is None:
        import pg_server as pgs
        server = pgs.PgServer()
    try:
        with tempfile.TemporaryDirectory() as d:
            from bench_store_backends import fsync_ms
            print(f"\ndisk: 8 kB write + fdatasync, median {fsync_ms(d):.2f} ms (the floor of "
                  "a durable commit; PostgreSQL's data folder is on the same disk)")
            for backend, target in (("SQLite", 2), ("PostgreSQL", 5)):
                print(f"\nsteps that record a release on {backend} (durable at commit; "
                      f"target ≤ {target} ms):")
                for k, (name, n) in enumerate((("lazy-dp-ts", 20000), ("dp-ucb", 2000))):
                    if backend == "SQLite":
                        url = os.path.join(d, f"s{k}.db")
                    elif server is not None:
                        url = server.store_url(f"online{k}_")
                    else:
                        url = pg_server_url(args.postgres, f"online{k}_{os.getpid()}")
                    name, med, p90, m = recorded(name, min(n, args.steps), url)
                    print(f"{name:<18} median {med:.3f} ms, 90% {p90:.3f} ms over {m} "
                          "recorded steps")
    finally:
        if server is not None:
            server.stop()


def pg_server_url(url: str, schema: str) -> str:
    from pg_server import with_schema
    return with_schema(url, schema)


if __name__ == "__main__":
    main()
