"""Draws per second of each sampler, float and exact (a command, not a timed test).

    python benchmarks/bench_samplers.py [--seconds 1.0] [--json]

Float: numpy Generator Laplace/Gaussian, vectorised (``size=1e6``) and one draw per call, and
the compiled kernel path (``laplace_row`` inside ``@njit``, which also writes a ledger row per
draw, and a binary-mechanism counter step).  Exact: CKS20 discrete Laplace / discrete Gaussian
on Python ints and Fractions, at lattice scales typical of deployment (2^20 lattice units per
reward) and small integer scales, from a seeded Generator bit source and from ``secrets``.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from fractions import Fraction

import numpy as np
from numba import njit

from dpledger.accounting.ledger import RowBuffer
from dpledger.mechanisms import counters as C
from dpledger.mechanisms import exact as E
from dpledger.mechanisms.noise import laplace_row
from dpledger.mechanisms.samplers import ExactSampler, FloatSampler


def rate(fn, per_call: int, seconds: float) -> float:
    fn()                                  # warm up (compilation, caches)
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return calls * per_call / dt


@njit
def _kernel_laplace(rng, n, cols):
    s = 0.0
    for i in range(n):
        s += laplace_row(rng, 1.0, cols, i, 0, 0, i, i + 1, 0)
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sec = args.seconds
    rng = np.random.default_rng(0)
    fsamp = FloatSampler(rng)
    results: dict[str, float] = {}

    results["float laplace, vectorised (size 1e6)"] = rate(lambda: fsamp.laplace(1.0, 1_000_000), 1_000_000, sec)
    results["float gaussian, vectorised (size 1e6)"] = rate(lambda: fsamp.gaussian(1.0, 1_000_000), 1_000_000, sec)
    results["float laplace, one per Python call"] = rate(lambda: fsamp.laplace(1.0), 1, sec)
    buf = RowBuffer(100_000)
    cols = buf.columns()
    results["float laplace in @njit + ledger row"] = rate(lambda: _kernel_laplace(rng, 100_000, cols), 100_000, sec)
    x = np.random.default_rng(1).random(2 ** 17 - 1)
    out = np.empty(x.size)
    cbuf = RowBuffer(x.size)

    def counter():
        fs, ist = C.binary_new(x.size, 0)
        C.binary_run(fs, ist, x, rng, np.array([17.0]), np.array([0]), cbuf.columns(), 0, 0, 0, out)

    results["binary counter step in @njit (1 draw + row each)"] = rate(counter, x.size, sec)

    for label, src in (("generator bits", np.random.default_rng(2)), ("secrets", "secrets")):
        bits = E.as_bits(src)
        for name, fn, arg in (
                ("discrete laplace, scale 3", E.discrete_laplace, Fraction(3)),
                ("discrete laplace, scale 2^20/0.3 (ε=0.3, k=20)", E.discrete_laplace, Fraction(2 ** 20 / 0.3)),
                ("discrete gaussian, sigma 2.5", E.discrete_gaussian, Fraction(2.5)),
                ("discrete gaussian, sigma 2^20 (k=20)", E.discrete_gaussian, Fraction(2 ** 20)),
                ("bernoulli(exp(-0.7))", E.bernoulli_exp, Fraction(7, 10))):
            results[f"exact {name} [{label}]"] = rate(
                lambda fn=fn, arg=arg, bits=bits: [fn(arg, bits) for _ in range(200)], 200, sec)
    es = ExactSampler(np.random.default_rng(3), lattice_bits=20)
    rel = es.laplace_release(1.0, 1.0)
    results["exact sampler .noise(DiscreteLaplaceRelease), k=20"] = rate(
        lambda: [es.noise(rel) for _ in range(200)], 200, sec)

    if args.json:
        print(json.dumps({"draws_per_second": results, "python": sys.version.split()[0],
                          "numpy": np.__version__, "machine": platform.machine()}, indent=2))
    else:
        width = max(map(len, results))
        for k, v in results.items():
            print(f"{k:<{width}}  {v:>14,.0f} draws/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
