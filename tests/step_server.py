"""A step-form server for the kill -9 test (tests/test_step_online.py): opens (or resumes) the
policy on STORE and serves Bernoulli rewards forever, printing the round after every step.

    python tests/step_server.py STORE SEED
"""
from __future__ import annotations

import sys

import numpy as np

from dpledger.policies import online


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    p = online("lazy-dp-ts", 3, store=path, seed=0, epsilon=0.5)
    traffic = np.random.default_rng([seed, p.generation])
    means = (0.7, 0.5, 0.3)
    pending = []
    while True:
        ticket = p.select()
        pending.append(ticket)
        # rewards arrive late and out of order: observe a random outstanding ticket
        if len(pending) > 3 or traffic.random() < 0.5:
            k = int(traffic.integers(len(pending)))
            t = pending.pop(k)
            p.observe(t, float(traffic.random() < means[t.arm]))
        print(p.t, flush=True)


if __name__ == "__main__":
    main()
