"""One policy's whole-run kernel timed in this process (the child of ``bench_p1_cli.py --kernel``).

    python /path/to/benchmarks/kernel_time.py POLICY HORIZON REPEATS [KEY=VALUE ...]

Imports the dpledger of the working directory (so the guard can run it inside an exported
revision), builds POLICY with the ``--set`` texts, compiles its kernel on a short run, then runs
the kernel ``REPEATS`` times on `dpledger run`'s default instance (K = 5 Bernoulli arms, means
0.75 … 0.25), seeds 0, 1, …, and prints one line: ``ns-per-round`` and each repeat's CPU
nanoseconds a round (``time.process_time`` around the kernel call alone: no interpreter start,
imports, cache loading, ledger or accounting — what ``bench_p1_cli.py`` without ``--kernel``
includes).
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.getcwd())           # the side's own dpledger, not this file's checkout

import numpy as np  # noqa: E402

from dpledger.policies.environments import bernoulli  # noqa: E402
from dpledger.policies.registry import make_policy  # noqa: E402
from dpledger.policies.sink import make_sink  # noqa: E402

K = 5


def main() -> None:
    name, horizon, repeats = sys.argv[1], int(float(sys.argv[2])), int(sys.argv[3])
    texts = dict(kv.split("=", 1) for kv in sys.argv[4:])
    try:
        from dpledger.policies.registry import make_policy_from_text
        pol = make_policy_from_text(name, texts)
    except ImportError:                  # a revision from before make_policy_from_text
        pol = make_policy(name, **texts)
    env = bernoulli([0.75, 0.625, 0.5, 0.375, 0.25]).as_tuple()
    kernel = type(pol).kernel

    def once(T: int, seed: int) -> float:
        rng = np.random.default_rng(seed)
        rows = np.zeros((5, pol.row_capacity(T, K) + K), np.int64)
        params = pol.kernel_params(T, K)
        c = time.process_time()
        kernel(rng, env, T, K, T, params, make_sink(K), rows, np.zeros((2, 0)))
        return (time.process_time() - c) / T * 1e9

    once(1000, 0)
    print("ns-per-round", *(f"{once(horizon, r):.2f}" for r in range(repeats)), flush=True)


if __name__ == "__main__":
    main()
