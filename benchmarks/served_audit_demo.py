"""The served audit against ``examples/serve_bandit.py`` (issue 33 §1; docs/audits.md#the-served-audit).

    python benchmarks/served_audit_demo.py --backend sqlite --canaries 300
    python benchmarks/served_audit_demo.py --backend postgresql --canaries 300   # pgserver

Starts the example (two HTTP workers serving Lazy-DP-TS, ε = 0.5, K = 3, on one store) with
``--requests R``, waits until it serves, runs ``dpledger audit lazy-dp-ts --set epsilon=0.5
--arms 3 --mode whitebox --store STORE --canaries m`` while the load runs, then waits for the
example to finish (its own ``dpledger verify`` and ``ledger status`` on the store) and prints
both outputs.  PostgreSQL: a server from the pgserver wheel (tests/pg_server.py).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--canaries", type=int, default=300)
    ap.add_argument("--requests", type=int, default=8000)
    ap.add_argument("--mode", default="whitebox", choices=["whitebox", "blackbox"])
    a = ap.parse_args(argv)
    # the example and its workers import this checkout (not another installed copy): a store
    # written by one version of the step form is read by the same version
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    server = None
    if a.backend == "postgresql":
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from pg_server import PgServer
        server = PgServer()
        store = server.store_url("served")
        ready = None
    else:
        d = tempfile.mkdtemp(prefix="served-")
        store = os.path.join(d, "live.db")
        ready = store
    try:
        svc = subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", "serve_bandit.py"),
                                "--requests", str(a.requests), "--store", store],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               cwd=ROOT, env=env)
        t0 = time.time()
        while ready is not None and not os.path.exists(ready) and time.time() - t0 < 300:
            time.sleep(1)
        time.sleep(20)                        # the workers compile, then the load starts
        out = os.path.join(tempfile.mkdtemp(), "served.json")
        audit = subprocess.run([sys.executable, "-m", "dpledger", "audit", "lazy-dp-ts", "--set",
                                "epsilon=0.5", "--arms", "3", "--mode", a.mode, "--store", store,
                                "--canaries", str(a.canaries), "--out", out],
                               capture_output=True, text=True, cwd=ROOT, env=env)
        still = svc.poll() is None
        served, _ = svc.communicate(timeout=1800)
        print(f"audit (exit {audit.returncode}; the service was still serving when it ended: "
              f"{still}):\n{audit.stdout}{audit.stderr[-400:]}")
        print(f"service (exit {svc.returncode}):\n{served[-1500:]}")
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
