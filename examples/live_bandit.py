"""A private bandit serving live traffic, recording every release in a ledger store as it happens.

Run it:  python examples/live_bandit.py [--horizon 2000] [--epsilon 0.5] [--store live.db]

The policy is Lazy-DP-TS (Hu & Hegde 2022, Algorithm 2; algorithms.md A6) in *step form*:
``select()`` returns the arm to play, ``observe(arm, reward)`` takes the reward when it arrives.
Rewards come one at a time from a generator standing in for live traffic.  Every noise release
is recorded in the store *before* its noise is drawn: the store's per-reward budget (the
filter, ``eps=ε``) must accept the record first, so a release the budget refuses is never made.

Lazy-DP-TS, per arm: the first reward is released once as x + Lap(1/ε); afterwards a buffer
collects 2, 4, 8, … fresh rewards and when it holds 2^{r+1} of them the arm's private mean
becomes (Σ buffer + Lap(1/ε))/2^{r+1}.  Each round every arm's model is
Beta(m·O + 1, (1 − m)·O + 1) with m = clip(μ̃ + 3·log2(t)/(ε·O)), O the last released epoch
size; the arm with the largest draw is played (ties uniformly at random).  Each reward lies in
exactly one released sum of sensitivity 1, so each reward's spend is one Laplace release of ε:
the budget eps=ε is met exactly, never exceeded.

At the end the example asks the command line what a user would: ``dpledger ledger status
STORE --json`` and ``dpledger verify STORE``, and ``dpledger run lazy-dp-ts`` for the same
policy; the store's worst reward has the certificate's composition and pure ε.

The noise here is numpy's floating-point Laplace, as in simulation; a deployment would draw
it with the exact samplers of ``dpledger.mechanisms.exact`` (Mironov 2012).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

from dpledger.accounting.releases import LaplaceRelease
from dpledger.accounting.store import LedgerStore


class LiveLazyDPTS:
    """Lazy-DP-TS in step form, recording each release in ``store`` (run ``run``)."""

    def __init__(self, n_arms: int, epsilon: float, store: LedgerStore, seed: int, run: int = 0):
        self.K, self.eps, self.store, self.run = n_arms, float(epsilon), store, run
        self.release = LaplaceRelease(scale=1.0 / self.eps, sensitivity=1.0)
        self.rng = np.random.default_rng(np.random.SeedSequence(seed))
        self.mu_tilde = np.zeros(n_arms)
        self.O = np.zeros(n_arms)
        self.r = np.zeros(n_arms, dtype=np.int64)
        self.buf_sum = np.zeros(n_arms)
        self.buf_len = np.zeros(n_arms, dtype=np.int64)
        self.n_obs = np.zeros(n_arms, dtype=np.int64)
        self.t = 0                              # rounds played so far

    def select(self) -> int:
        """The arm of round t + 1."""
        t = self.t + 1
        if t <= self.K:                         # initial pulls: arm t − 1
            return t - 1
        shift = 3.0 * math.log2(t) / self.eps
        theta = np.empty(self.K)
        for j in range(self.K):
            m = min(1.0, max(0.0, self.mu_tilde[j] + shift / self.O[j]))
            theta[j] = self.rng.beta(m * self.O[j] + 1.0, (1.0 - m) * self.O[j] + 1.0)
        best = np.flatnonzero(theta == theta.max())
        return int(best[0] if best.size == 1 else best[self.rng.integers(best.size)])

    def _release(self, arm: int, start: int, stop: int, value: float) -> float:
        """Record the release over observations [start, stop) of ``arm`` (the budget must
        accept it), then draw its noise: the ledger row and the draw are one step."""
        self.store.append(arm=arm, start=start, stop=stop, release=self.release, run=self.run)
        return value + self.rng.laplace(0.0, self.release.scale)

    def observe(self, arm: int, reward: float) -> None:
        if not 0.0 <= reward <= 1.0:
            raise ValueError(f"reward {reward!r} outside the declared range [0, 1]")
        self.t += 1
        a = arm
        self.n_obs[a] += 1
        if self.O[a] == 0:                      # the arm's first reward: released alone
            self.mu_tilde[a] = self._release(a, 0, 1, reward)
            self.O[a] = 1.0
            return
        self.buf_sum[a] += reward
        self.buf_len[a] += 1
        size = 2 ** (int(self.r[a]) + 1)
        if self.buf_len[a] == size:
            stop = int(self.n_obs[a])
            self.mu_tilde[a] = self._release(a, stop - size, stop, self.buf_sum[a]) / size
            self.O[a] = size
            self.r[a] += 1
            self.buf_sum[a] = 0.0
            self.buf_len[a] = 0


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
    with LedgerStore.open(path) as store:
        policy = LiveLazyDPTS(len(means), args.epsilon, store, seed=args.seed)
        traffic = live_traffic(means, seed=args.seed + 1)
        next(traffic)
        pulls = np.zeros(len(means), dtype=np.int64)
        for _ in range(args.horizon):
            arm = policy.select()
            reward = traffic.send(arm)
            policy.observe(arm, reward)
            pulls[arm] += 1
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
