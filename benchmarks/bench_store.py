"""Ledger store (issue 15): 1e6 records appended through the Python API, then the status (every
number the maximum over all rewards, issue 26).

Targets: appending 1e6 records ≤ 30 s; ``status`` (the maximal per-reward compositions and
their privacy block, from a fresh read-only handle) ≤ 1 s; also timed: the first status in the process (imports),
and ``dpledger ledger status`` in a fresh process.  Timings are wall clock (cpu where said):
on a shared machine compare them with the cpu figure.  Records: random ranges [s, s + L) with L ≤ 1000 over
5 arms × 2e5 observations, 4 distinct releases (Laplace and Gaussian), in batches
(``append_columns``, one transaction each).  Run with and without a budget (the budget path
also maintains per-reward spends and checks every batch).

    PYTHONPATH=. python benchmarks/bench_store.py [--records 1000000] [--batch 10000]
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

from dpledger.accounting.releases import GaussianRelease, LaplaceRelease
from dpledger.accounting.store import LedgerStore, verify_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fill_store(url: str, n: int, batch: int, budget: str | None) -> float:
    """Create a store at ``url`` holding the benchmark's ``n`` records, appended in batches of
    ``batch`` (one transaction each); returns the seconds the appends took."""
    releases, arm, start, stop, which = random_records(n)
    store = LedgerStore.create(url, budget)
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        store.append_columns(arm[i:i + batch], start[i:i + batch], stop[i:i + batch],
                             releases, which[i:i + batch])
    elapsed = time.perf_counter() - t0
    store.close()
    return elapsed


def random_records(n: int):
    """The benchmark's records: (releases, arm, start, stop, which) columns, seeded."""
    rng = np.random.default_rng(15)
    releases = [LaplaceRelease.from_epsilon(1e-4), LaplaceRelease.from_epsilon(2e-4),
                GaussianRelease.from_mu(1e-3), GaussianRelease.from_mu(3e-3)]
    arm = rng.integers(0, 5, n)
    start = rng.integers(0, 200_000, n)
    stop = start + rng.integers(1, 1000, n)
    return releases, arm, start, stop, rng.integers(0, len(releases), n)


def bench(n: int, batch: int, budget: str | None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.db")
        t_append = fill_store(path, n, batch, budget)
        t0, c0 = time.perf_counter(), time.process_time()
        with LedgerStore.open(path, readonly=True) as reader:
            st = reader.status([1e-6])
        # includes one-off imports / numba cache load
        t_first, c_first = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        with LedgerStore.open(path, readonly=True) as reader:
            st = reader.status([1e-6])
        t_status, c_status = time.perf_counter() - t0, time.process_time() - c0
        # what a user waits for: `dpledger ledger status` in a fresh process (imports included)
        t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([sys.executable, "-m", "dpledger", "ledger", "status", path],
                             capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=ROOT))
        t_cli = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        c_cli = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        assert out.returncode == 0, out.stderr
        t0 = time.perf_counter()
        problems = verify_store(path)
        t_verify = time.perf_counter() - t0
        size = os.path.getsize(path)
    assert st["records"] == n and not problems, problems
    return {"append_s": t_append, "status_s": t_status, "status_cpu_s": c_status,
            "cli_s": t_cli, "cli_cpu_s": c_cli, "first_s": t_first, "first_cpu_s": c_first,
            "verify_s": t_verify,
            "mb": size / 1e6, "maximal": len(st["compositions"]),
            "eps_1e-6": st["privacy"]["epsilon_at_delta"]["1e-06"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=10_000)
    args = ap.parse_args()
    for budget in (None, "eps=1000,delta=1e-6"):
        r = bench(args.records, args.batch, budget)
        print(f"budget={budget}: {args.records} records in batches of {args.batch}: append "
              f"{r['append_s']:.2f} s (target ≤ 30), status {r['status_s']:.2f} s (cpu "
              f"{r['status_cpu_s']:.2f} s; target ≤ 1; first call in the process "
              f"{r['first_s']:.2f} s, cpu {r['first_cpu_s']:.2f} s; `dpledger ledger status` "
              f"in a fresh process {r['cli_s']:.2f} s, cpu {r['cli_cpu_s']:.2f} s), "
              f"verify {r['verify_s']:.2f} s, file {r['mb']:.1f} MB, {r['maximal']} maximal "
              f"compositions, worst ε(1e-6) {r['eps_1e-6']:.4g}")


if __name__ == "__main__":
    main()
