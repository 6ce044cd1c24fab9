"""A private bandit serving live traffic, recording every release in a ledger store as it happens.

Run it:  python examples/live_bandit.py [--horizon 2000] [--epsilon 0.5] [--store live.db]

The policy is Lazy-DP-TS (Hu & Hegde 2022, Algorithm 2) in the library's *step form*
(``dpledger.policies.online``): ``select()`` returns a ticket naming the round and the arm to
play, ``observe(ticket, reward)`` takes the reward when it arrives.  Rewards come one at a time
from a generator standing in for live traffic.  Every noise release is recorded in the store
*before* its noise is drawn: the store's per-reward budget (the filter, ``eps=ε``) must accept
the record first, so a release the budget refuses is never made.  The rule is the one the
simulator runs (the same compiled functions; tests/test_step_equality.py): each reward lies in
exactly one released sum of sensitivity 1, so each reward's spend is one Laplace release of ε —
the budget eps=ε is met exactly, never exceeded.

At the end the example asks the command line what a user would: ``dpledger ledger status
STORE --json`` and ``dpledger verify STORE``, and ``dpledger run lazy-dp-ts`` for the same
policy; the store's worst reward has the certificate's composition and pure ε.

The noise here is the float sampler's, as in simulation; a deployment passes ``sampler="exact"``
(rewards on a lattice, exact discrete Laplace noise: Mironov 2012) and ``seed=None`` (the
operating system's entropy).  A served version with HTTP workers: examples/serve_bandit.py.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from dpledger.policies import online


def live_traffic(means, seed: int):
    """Bernoulli rewards, one per request, as they would arrive: ``gen.send(arm)`` → reward."""
    rng = np.random.default_rng(seed)
    arm = yield
    while True:
        arm = yield float(rng.random() < means[arm])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpledger", *args], capture_output=True,
                          text=True)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--horizon", type=int, default=2000)
    ap.add_argument("--epsilon", type=float, default=0.5)
    ap.add_argument("--means", default="0.3,0.5,0.6")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--store", default=None, help="store path (default: a temporary one)")
    args = ap.parse_args(argv)
    means = [float(x) for x in args.means.split(",")]
    tmp = tempfile.TemporaryDirectory()
    path = args.store or os.path.join(tmp.name, "live.db")

    # 1. the live client: a store with a per-reward budget, rewards one at a time
    r = _cli("ledger", "init", path, "--budget", f"eps={args.epsilon!r}")
    if r.returncode:
        raise SystemExit(r.stderr.strip())
    with online("lazy-dp-ts", len(means), args.horizon, store=path, seed=args.seed,
                epsilon=args.epsilon) as policy:
        traffic = live_traffic(means, seed=args.seed + 1)
        next(traffic)
        pulls = np.zeros(len(means), dtype=np.int64)
        for _ in range(args.horizon):
            ticket = policy.select()
            reward = traffic.send(ticket.arm)
            policy.observe(ticket, reward)
            pulls[ticket.arm] += 1
    print(f"served {args.horizon} requests; pulls per arm {pulls.tolist()}")

    # 2. what the command line says about the store
    status = json.loads(_cli("ledger", "status", path, "--json").stdout)
    ver = _cli("verify", path)
    print(f"ledger status: {status['records']} records over {status['streams']} streams; worst "
          f"reward's pure ε = {status['privacy']['pure_epsilon']!r}; budget spent "
          f"{status['budget_spent']!r} of {status['budget']['limit']!r}")
    print(ver.stdout.strip())

    # 3. the same policy from `dpledger run`, and the comparison
    run_json = os.path.join(tmp.name, "run.json")
    rr = _cli("run", "lazy-dp-ts", "--set", f"epsilon={args.epsilon!r}", "--means", args.means,
              "--horizon", str(args.horizon), "--runs", "1", "--seed", str(args.seed),
              "--out", run_json)
    if rr.returncode:
        raise SystemExit(rr.stderr.strip())
    with open(run_json) as fh:
        cert = json.load(fh)["privacy"]["certificate"]
    agree = {
        "composition": [c["composition"] for c in status["compositions"]]
        == [cert["composition"]],
        "pure_epsilon": status["privacy"]["pure_epsilon"] == cert["pure_epsilon"],
        "rdp": status["privacy"]["epsilon"]["rdp"] == cert["epsilon"]["rdp"],
        "verify": ver.returncode == 0,
        "budget": status["budget_spent"] <= status["budget"]["limit"],
    }
    print("store vs `dpledger run` certificate: "
          + ", ".join(f"{k} {'agrees' if v else 'DIFFERS'}" for k, v in agree.items()))
    tmp.cleanup()
    return {"status": status, "certificate": cert, "agree": agree, "pulls": pulls.tolist()}


if __name__ == "__main__":
    out = main()
    raise SystemExit(0 if all(out["agree"].values()) else 1)
