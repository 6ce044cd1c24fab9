"""A private bandit served over HTTP by two worker processes sharing one ledger store (issue 24 §3).

Run it:  python examples/serve_bandit.py [--requests 10000] [--epsilon 0.5] [--store STORE]

``STORE`` is an SQLite path (default: a temporary file) or a ``postgresql://`` URL (one schema
of a PostgreSQL database, e.g. ``postgresql://user@host/db?schema=bandit``): the same workers
then share the store across machines.

Each worker process serves one step-form policy (``dpledger.policies.online``; Lazy-DP-TS, run
id = the worker's number, so the two workers' rewards are distinct streams of one store and one
per-reward budget) on its own loopback port:

* ``POST /select`` (empty body) → ``{"run", "round", "arm", "generation"}``: a ticket;
* ``POST /reward`` with the ticket and ``"reward"`` → ``{"ok": true}``, or status 400 and
  ``{"error": "<one line>"}`` for bad input (a reward outside [0, 1], a ticket observed twice).

Every release is recorded in the store (budget check and append one transaction, the policy's
checkpoint in it) before its noise is drawn.  A load generator then sends the requests — half
selects, half rewards, alternating between the workers, over persistent loopback connections,
bounded in count (``--requests``) and time (``--timeout``) — the workers are stopped (SIGTERM:
each writes a last checkpoint and closes), and the example runs ``dpledger verify`` and
``dpledger ledger status`` on the store.

**Why the standard library's server.**  ``http.server.ThreadingHTTPServer`` with HTTP/1.1
keep-alive is enough for two endpoints on loopback: each worker is one process with one policy
(state in memory, compiled rule), so a framework's routing, validation layers or async loop
would add a dependency for nothing the example shows; the cost per request is dominated by the
policy step and, for a release, by the durable commit.  A service behind a real front end would
run the same two handlers in any WSGI/ASGI framework.  The store is created by
``dpledger ledger init STORE --budget eps=ε`` before the workers start (either backend), so its
budget is set once, by the operator; workers given a missing store would create it themselves
(one of them wins; docs/online.md).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from dpledger.errors import DpledgerError
from dpledger.policies import online
from dpledger.policies.step import Ticket


def serve(store: str, run: int, port_file: str, epsilon: float, arms: int, seed: int) -> None:
    """One worker: the policy of run ``run`` on ``store``, served on a free loopback port
    written to ``port_file`` once it listens."""
    policy = online("lazy-dp-ts", arms, store=store, run=run, seed=seed, epsilon=epsilon)
    lock = threading.Lock()                       # one policy: one step at a time

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True    # headers and body leave at once (no 40 ms stall)

        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):            # noqa: N802 (the standard library's name)
            n = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
                with lock:
                    if self.path == "/select":
                        t = policy.select()
                        self._reply(200, {"run": t.run, "round": t.round, "arm": t.arm,
                                          "generation": t.generation})
                    elif self.path == "/reward":
                        t = Ticket(int(body["run"]), int(body["round"]), int(body["arm"]),
                                   int(body["generation"]))
                        policy.observe(t, body["reward"])
                        self._reply(200, {"ok": True})
                    else:
                        self._reply(404, {"error": f"no endpoint {self.path}"})
            except DpledgerError as exc:
                self._reply(400, {"error": str(exc)})
            except (ValueError, KeyError, TypeError) as exc:
                self._reply(400, {"error": f"bad request: {exc}"})

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    with open(port_file + ".tmp", "w") as fh:
        fh.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)     # the port appears whole
    server.serve_forever()
    with lock:
        policy.close()                            # last checkpoint


def _post(conn: http.client.HTTPConnection, path: str, body: dict) -> tuple[int, dict]:
    data = json.dumps(body).encode()
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read())


def load(ports: list[int], requests: int, timeout: float, means, seed: int) -> dict:
    """Send ``requests`` requests (a select, then its reward, alternating workers) over one
    keep-alive connection per worker; stops at ``timeout`` seconds.  Returns counts and
    latencies."""
    rng = np.random.default_rng(seed)
    conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=30) for p in ports]
    sent, refused, pulls, lat = 0, 0, np.zeros(len(means), np.int64), []
    start = time.perf_counter()
    k = 0
    while sent + 2 <= requests and time.perf_counter() - start < timeout:
        conn = conns[k % len(conns)]
        k += 1
        t0 = time.perf_counter()
        code, ticket = _post(conn, "/select", {})
        assert code == 200, ticket
        reward = float(rng.random() < means[ticket["arm"]])
        code, out = _post(conn, "/reward", dict(ticket, reward=reward))
        lat.append(time.perf_counter() - t0)
        refused += code != 200
        pulls[ticket["arm"]] += 1
        sent += 2
    # one bad request per worker: refused with one line, nothing recorded
    bad = [_post(c, "/reward", {"run": 0, "round": 1, "arm": 0, "generation": 0,
                                "reward": 7.0}) for c in conns]
    for c in conns:
        c.close()
    wall = time.perf_counter() - start
    return {"requests": sent, "seconds": wall, "refused": int(refused), "pulls": pulls.tolist(),
            "bad_request": bad[0], "median_pair_ms": 1e3 * float(np.median(lat)) if lat else 0.0}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpledger", *args], capture_output=True,
                          text=True)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds, at most")
    ap.add_argument("--epsilon", type=float, default=0.5)
    ap.add_argument("--means", default="0.3,0.5,0.6")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--store", default=None,
                    help="store path or postgresql:// URL (default: a temporary SQLite file)")
    ap.add_argument("--worker", nargs=3, metavar=("STORE", "RUN", "PORT_FILE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    means = [float(x) for x in args.means.split(",")]
    if args.worker:
        serve(args.worker[0], int(args.worker[1]), args.worker[2], args.epsilon, len(means),
              args.seed)
        return {}
    tmp = tempfile.TemporaryDirectory()
    path = args.store or os.path.join(tmp.name, "live.db")
    r = _cli("ledger", "init", path, "--budget", f"eps={args.epsilon!r}")
    if r.returncode:
        raise SystemExit(r.stderr.strip())
    procs, ports = [], []
    try:
        for w in range(args.workers):
            port_file = os.path.join(tmp.name, f"port{w}")
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", path, str(w), port_file,
                 "--epsilon", repr(args.epsilon), "--means", args.means, "--seed",
                 str(args.seed)]))
            deadline = time.time() + 120
            while not os.path.exists(port_file):
                if procs[-1].poll() is not None or time.time() > deadline:
                    raise SystemExit(f"worker {w} did not start")
                time.sleep(0.05)
            with open(port_file) as fh:
                ports.append(int(fh.read()))
        stats = load(ports, args.requests, args.timeout, means, args.seed + 1)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
    print(f"served {stats['requests']} requests ({stats['requests'] // 2} rounds) in "
          f"{stats['seconds']:.1f} s by {args.workers} workers; median select + reward "
          f"{stats['median_pair_ms']:.2f} ms; pulls {stats['pulls']}; bad request → "
          f"{stats['bad_request'][0]}: {stats['bad_request'][1].get('error')}")
    ver = _cli("verify", path)
    status = json.loads(_cli("ledger", "status", path, "--json").stdout)
    print(ver.stdout.strip())
    print(f"ledger status: {status['records']} records over {status['streams']} streams; "
          f"worst reward's pure ε = {status['privacy']['pure_epsilon']!r}; budget spent "
          f"{status['budget_spent']!r} of {status['budget']['limit']!r}")
    tmp.cleanup()
    return {"stats": stats, "verify": ver.returncode, "verify_out": ver.stdout,
            "status": status}


if __name__ == "__main__":
    out = main()
    raise SystemExit(0 if not out or out["verify"] == 0 else 1)
