"""A step-form server for the kill -9 and racing-servers tests (tests/test_step_online.py):
opens (or resumes) Lazy-DP-TS (ε = 0.5) on STORE (a path or a ``postgresql://`` URL) and serves
Bernoulli rewards, late and out of order, printing the round after every step.

    python tests/step_server.py STORE SEED             # forever (until killed)
    python tests/step_server.py STORE SEED ROUNDS      # "ready", waits for a line on stdin,
                                                       # ROUNDS rounds, then "refused N"
                                                       # (releases the budget refused)
"""
from __future__ import annotations

import sys

import numpy as np

from dpledger.accounting.filters import BudgetExceeded
from dpledger.policies import online


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else None
    if rounds is None:        # the kill test: no budget, so a double spend would show
        p = online("lazy-dp-ts", 3, store=path, seed=0, epsilon=0.5)
    else:                     # racing servers (the test made the store, with its budget)
        p = online("lazy-dp-ts", 3, store=path, seed=seed, epsilon=0.5)
        print("ready", flush=True)
        sys.stdin.readline()  # every server has opened the store: none resumes another's state
    traffic = np.random.default_rng([seed, p.generation])
    means = (0.7, 0.5, 0.3)
    pending = []
    refused = 0
    while rounds is None or p.t < rounds:
        ticket = p.select()
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
