"""A step-form server for the kill -9 and racing-servers tests (tests/test_step_online.py):
opens (or resumes) Lazy-DP-TS (ε = 0.5) on STORE (a path or a ``postgresql://`` URL) and serves
Bernoulli rewards, late and out of order, printing the round after every step.  The kill test
also serves, with ``STEP_POLICY`` set, a tree-counter policy (``dp-ucb``, ε = 0.5, T = 4000)
or a record-private contextual one (``jdp-linucb``, accounted to (ε, δ) = (1, 0.1), d = 4,
T = 4000, unit-ball contexts).

    python tests/step_server.py STORE SEED             # "start T", then until killed (or T)
    python tests/step_server.py STORE SEED ROUNDS      # "ready", waits for a line on stdin,
                                                       # opens run 0: "lease-held …" (another
                                                       # server has it) or ROUNDS rounds, then
                                                       # "refused N" (the budget's refusals)
"""
from __future__ import annotations

import os
import sys

import numpy as np

from dpledger.accounting.filters import BudgetExceeded
from dpledger.accounting.store_checkpoint import LeaseHeld
from dpledger.policies import online
from dpledger.policies.contextual.environments import fit_to_bound

KILL_HORIZON = 4000


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else None
    which = os.environ.get("STEP_POLICY", "lazy-dp-ts")
    horizon, dim = None, None
    if rounds is None:        # the kill test: no budget, so a double spend would show
        if which == "dp-ucb":
            horizon = KILL_HORIZON
            p = online("dp-ucb", 3, horizon, store=path, seed=0, epsilon=0.5)
        elif which == "jdp-linucb":
            horizon, dim = KILL_HORIZON, 4
            p = online("jdp-linucb", 3, horizon, store=path, seed=0, dim=dim, epsilon=1.0,
                       delta=0.1, calibration="accounted")
        else:
            p = online("lazy-dp-ts", 3, store=path, seed=0, epsilon=0.5)
        print(f"start {p.t}", flush=True)
    else:                     # racing servers (the test made the store, with its budget)
        print("ready", flush=True)
        sys.stdin.readline()  # every server is started: they open run 0 at once
        try:
            p = online("lazy-dp-ts", 3, store=path, seed=seed, epsilon=0.5)
        except LeaseHeld as exc:
            print(f"lease-held {exc}", flush=True)
            return
        print(f"serving generation {p.generation}", flush=True)
    traffic = np.random.default_rng([seed, p.generation])
    means = (0.7, 0.5, 0.3)
    pending = []
    refused = 0
    stop = rounds if rounds is not None else horizon
    while stop is None or p.t < stop:
        if dim is None:
            ticket = p.select()
        else:
            x = traffic.normal(size=dim)
            ticket = p.select(fit_to_bound(x / max(1.0, float(np.linalg.norm(x))), 1.0)[0])
        pending.append(ticket)
        # rewards arrive late and out of order: observe a random outstanding ticket
        if len(pending) > 3 or traffic.random() < 0.5:
            k = int(traffic.integers(len(pending)))
            t = pending.pop(k)
            try:
                p.observe(t, float(traffic.random() < means[t.arm]))
            except BudgetExceeded:
                refused += 1
        print(p.t, flush=True)
    p.close()
    print(f"refused {refused}", flush=True)


if __name__ == "__main__":
    main()
