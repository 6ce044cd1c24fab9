"""Ledger store backends (issue 24 §2): SQLite against PostgreSQL on the same machine.

Measured, each durable at commit (SQLite: WAL, ``synchronous=FULL``; PostgreSQL: ``fsync = on``,
``synchronous_commit = on`` for the flush that precedes every acknowledgement — see
``accounting/store_backends.py``):

1. **the disk**: one 8 kB write + ``fdatasync`` (what any durable commit pays at least once;
   on a shared machine it varies with the neighbours' I/O, so it is printed beside the rest);
2. **a step that records a release**: one ``append`` of one Laplace release on a budgeted store
   that already holds 10⁴ records (budget check, chain link, commit), median and 90th percentile
   over ``--steps`` appends, on each backend (targets: ≤ 2 ms SQLite, ≤ 5 ms PostgreSQL);
3. **several writers**: 1 and 4 processes appending single records to the same 8 rewards of an
   ε = 1 store, each record ε = 2⁻⁷ (dyadic: spends are exact), so the budget admits exactly
   8 · 128 = 1024 records whatever the interleaving; the processes start together and the
   aggregate rate is 1024 accepted records over the wall time.  After each run: exactly 1024
   accepted, every reward's spend exactly 1, ``verify`` clean (target on PostgreSQL: 4 ≥ 2 × 1);
   beside them the floor: 4 processes each on a store of its own (no shared lock at all), what
   the machine gives 4 writers whatever the locking;
   before them, one writer's share of the machine (its wall and CPU per append, and the cores
   busy meanwhile from /proc/stat): one writer keeping x of c cores busy bounds any number of
   writers, on any protocol, to c / x times one (on 2 cores the ×2 target needs x ≤ 1);
4. **status of a 10⁶-record PostgreSQL store** (batches of 10⁴, random ranges as
   ``bench_store.py``): the full privacy block over the maximal per-reward compositions, from a
   fresh read-only handle, and ``dpledger ledger status URL`` in a fresh process (target ≤ 2 s).

PostgreSQL is the ``pgserver`` wheel's server, started in a temporary folder (Unix socket).

    PYTHONPATH=. python benchmarks/bench_store_backends.py [--steps 300] [--records 1000000]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from dpledger.accounting.filters import BudgetExceeded  # noqa: E402
from bench_store import fill_store  # noqa: E402
from dpledger.accounting.releases import LaplaceRelease  # noqa: E402
from dpledger.accounting.store import LedgerStore, max_spend, verify_store  # noqa: E402

COST = 2.0 ** -7                 # ε per record in the writers' run: 128 per reward at ε = 1
REWARDS = [(a, i) for a in range(2) for i in range(4)]
ADMITTED = len(REWARDS) * 128


def fsync_ms(folder: str, n: int = 200) -> float:
    """Median milliseconds of one 8 kB write + fdatasync in ``folder``."""
    path = os.path.join(folder, "fsync.tmp")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.pwrite(fd, b"\0" * 8192, 0)
            os.fdatasync(fd)
            out.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    return 1e3 * statistics.median(out)


def step_latency(url: str, steps: int) -> tuple[float, float]:
    """(median, 90th percentile) milliseconds of one single-release append."""
    lap = LaplaceRelease.from_epsilon(1e-3)
    with LedgerStore.create(url, "eps=1000") as s:
        n0 = 10_000
        s.append_columns(np.arange(n0) % 5, np.arange(n0), np.arange(n0) + 1, [lap])
        for k in range(20):                            # warm the caches
            s.append(arm=k % 5, start=n0 + k, stop=n0 + k + 1, release=lap)
        times = []
        for k in range(steps):
            t0 = time.perf_counter()
            s.append(arm=k % 5, start=k, stop=k + 1, release=lap)
            times.append(time.perf_counter() - t0)
    times.sort()
    return 1e3 * statistics.median(times), 1e3 * times[int(0.9 * len(times))]


def _writer(url: str, offset: int, attempts: int, go, done) -> None:
    store = LedgerStore.open(url)
    rel = LaplaceRelease.from_epsilon(COST)
    ok = 0
    go.wait()
    for j in range(attempts):
        arm, i = REWARDS[(j + offset) % len(REWARDS)]
        try:
            store.append(arm=arm, start=i, stop=i + 1, release=rel)
            ok += 1
        except BudgetExceeded:
            pass
    store.close()
    done.put(ok)


def separate_writers(make_url, procs: int) -> float:
    """The floor of the writers' run (no shared lock at all): ``procs`` processes, each doing
    the one-process run on a store of its own (``make_url(k)``) at the same time; the
    aggregate rate of accepted records.  What the machine gives several writers whatever the
    locking — the most any scheme on one store could reach."""
    urls = [make_url(k) for k in range(procs)]
    total = 136 * len(REWARDS)
    ok, elapsed = _race([(url, 0, total) for url in urls])
    assert ok == procs * ADMITTED, ok
    return ok / elapsed


def _race(jobs: list) -> tuple[int, float]:
    """Start one writer process per (url, offset, attempts) on budget eps=1 stores (created
    here), let them go together; (records accepted, seconds)."""
    for url in sorted({job[0] for job in jobs}):
        LedgerStore.create(url, "eps=1").close()
    ctx = mp.get_context("fork")
    go, done = ctx.Event(), ctx.Queue()
    ps = [ctx.Process(target=_writer, args=(*job, go, done)) for job in jobs]
    for p in ps:
        p.start()
    time.sleep(2.0)                          # every writer has opened the store
    t0 = time.perf_counter()
    go.set()
    ok = sum(done.get(timeout=600) for _ in ps)
    elapsed = time.perf_counter() - t0
    for p in ps:
        p.join()
    return ok, elapsed


def writers(url: str, procs: int) -> float:
    """Accepted records per second with ``procs`` writers (checks the exact count after)."""
    # attempts: every reward is tried 128 + 8 times in all, so exactly 128 fit on each
    per_reward = 136
    total = per_reward * len(REWARDS)
    share = [total // procs + (1 if k < total % procs else 0) for k in range(procs)]
    offsets = np.cumsum([0] + share[:-1])
    ok, elapsed = _race([(url, int(offsets[k]), share[k]) for k in range(procs)])
    with LedgerStore.open(url, readonly=True) as s:
        data = s.rows_array()
        spent = max_spend(s, data)[0]
    assert ok == ADMITTED == data.shape[0], (ok, data.shape)
    assert spent == 1.0, spent
    assert verify_store(url) == []
    return ok / elapsed


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU jiffies of the whole machine so far (/proc/stat's first line)."""
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    idle = v[3] + v[4]                                    # idle + iowait
    return sum(v) - idle, sum(v)


def one_writer_cpu(url: str, n: int) -> dict:
    """One process appending ``n`` single records as fast as it can: wall time per append, its
    own CPU per append, and the machine's busy cores meanwhile (client, server backend, WAL
    writer, kernel: /proc/stat).  If one writer keeps ``x`` of the machine's ``c`` cores busy,
    no number of writers on any protocol can append faster than ``c / x`` times one — the
    bound the target ×2 meets only when ``x ≤ c / 2``.  Run on an idle machine: /proc/stat
    counts every process."""
    rel = LaplaceRelease.from_epsilon(COST)
    with LedgerStore.create(url, "eps=1000000") as s:
        for j in range(50):                                   # warm the caches
            a, i = REWARDS[j % len(REWARDS)]
            s.append(arm=a, start=i, stop=i + 1, release=rel)
        b0, t0 = _busy_jiffies()
        w0, c0 = time.perf_counter(), time.process_time()
        for j in range(n):
            a, i = REWARDS[j % len(REWARDS)]
            s.append(arm=a, start=i, stop=i + 1, release=rel)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        b1, t1 = _busy_jiffies()
    cores = os.cpu_count() or 1
    busy = cores * (b1 - b0) / max(1, t1 - t0)               # cores busy on average
    return {"wall_ms": 1e3 * wall / n, "client_cpu_ms": 1e3 * cpu / n, "busy_cores": busy,
            "cores": cores, "bound": cores / busy if busy > 0 else float("inf")}


def big_status(url: str, n: int, batch: int) -> dict:
    out = {"append_s": fill_store(url, n, batch, "eps=1000,delta=1e-6")}
    for label in ("first", "again"):
        t0, c0 = time.perf_counter(), time.process_time()
        with LedgerStore.open(url, readonly=True) as r:
            st = r.status([1e-6])
        out[f"{label}_s"], out[f"{label}_cpu_s"] = (time.perf_counter() - t0,
                                                    time.process_time() - c0)
    t0 = time.perf_counter()
    with LedgerStore.open(url, readonly=True) as r:
        r.rows_array()
    out["read_rows_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cli = subprocess.run([sys.executable, "-m", "dpledger", "ledger", "status", url],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    out["cli_s"] = time.perf_counter() - t0
    assert cli.returncode == 0, cli.stderr
    assert st["records"] == n
    out["maximal"] = len(st["compositions"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--cpu-appends", type=int, default=3000)
    args = ap.parse_args()
    import pg_server as pgs
    server = pgs.PgServer()
    try:
        with tempfile.TemporaryDirectory() as d:
            print(f"disk: 8 kB write + fdatasync, median {fsync_ms(d):.2f} ms "
                  f"(PostgreSQL's data folder is on the same disk)")
            for name, url in (("SQLite", os.path.join(d, "step.db")),
                              ("PostgreSQL", server.store_url("step"))):
                med, p90 = step_latency(url, args.steps)
                print(f"{name}: a step recording one release: median {med:.2f} ms, 90% "
                      f"{p90:.2f} ms ({args.steps} appends, budgeted store of 10^4 records)")
            print(f"disk again: {fsync_ms(d):.2f} ms")
            for name, url in (("PostgreSQL", server.store_url("cpu")),
                              ("SQLite", os.path.join(d, "cpu.db"))):
                c = one_writer_cpu(url, args.cpu_appends)
                print(f"{name}: one writer, {args.cpu_appends} appends: {c['wall_ms']:.2f} ms "
                      f"each, client CPU {c['client_cpu_ms']:.2f} ms; the machine "
                      f"{c['busy_cores']:.2f} of {c['cores']} cores busy meanwhile, so no "
                      f"number of writers can exceed x{c['bound']:.2f} of one")
            for name, mk in (("PostgreSQL", lambda k: server.store_url(f"w{k}_")),
                             ("SQLite", lambda k: os.path.join(d, f"w{k}.db"))):
                rates = {p: writers(mk(p), p) for p in (1, 4)}
                floor = separate_writers(lambda k, mk=mk: mk(f"s{k}_"), 4)
                print(f"{name}: {ADMITTED} accepted appends (exact budget, verified): 1 process "
                      f"{rates[1]:.0f}/s, 4 processes {rates[4]:.0f}/s "
                      f"(x{rates[4] / rates[1]:.2f}); floor, 4 processes on 4 stores (no "
                      f"shared lock): {floor:.0f}/s (x{floor / rates[1]:.2f})")
            r = big_status(server.store_url("big"), args.records, args.batch)
            print(f"PostgreSQL, {args.records} records in batches of {args.batch}: appended in "
                  f"{r['append_s']:.1f} s; status {r['again_s']:.2f} s (cpu "
                  f"{r['again_cpu_s']:.2f} s; first in the process {r['first_s']:.2f} s), rows "
                  f"read {r['read_rows_s']:.2f} s, `dpledger ledger status URL` in a fresh "
                  f"process {r['cli_s']:.2f} s; {r['maximal']} maximal compositions")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
