"""Regression test for the floating-point leak of textbook Laplace sampling (Mironov 2012, "On
Significance of the Least Significant Bits for Differential Privacy", CCS 2012;
docs/design.md#reliability-targets R3).

The float sampler releases ``x + Lap(b)`` with numpy's inverse-CDF sampler: with U = m·2^-53
(m = the top 53 bits of a 64-bit word), ``y = loc + b·log(U + U)`` for U < ½ and
``y = loc − b·log(2 − U − U)`` otherwise.  The set of doubles reachable from loc = 0 differs
from the set reachable from loc = 1: outputs on input 0 that input 1 can never produce exist,
so the privacy loss is unbounded.  The exact sampler's outputs lie on the lattice 2^-k·ℤ and
every lattice point has positive probability under both inputs.

The replication relies on numpy and Python's ``math.log`` both calling the platform's libm
``log``.  Two self-consistency checks make a platform difference fail loudly instead of hiding
the leak: every float output is re-derived bit for bit from the generator's raw words, and
every output is found reachable from its own input by the search used for the other input.
"""
from __future__ import annotations

import math

import numpy as np

from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.releases import DiscreteLaplaceRelease, LaplaceRelease
from dpledger.mechanisms.basic import noisy_sum
from dpledger.mechanisms.exact import discrete_laplace_pmf
from dpledger.mechanisms.samplers import ExactSampler, FloatSampler

EPS = 0.5                      # scale b = 1/ε = 2
N = 2000
TWO53 = 2 ** 53
INV53 = 1.0 / 9007199254740992.0


def numpy_laplace_output(m: int, loc: float, b: float) -> float:
    """numpy's ``random_laplace`` arithmetic for U = m·2^-53 (m ≥ 1), then ``loc + noise`` as
    the mechanism adds it (noise drawn at loc 0)."""
    u = m * INV53
    if u >= 0.5:
        noise = 0.0 - b * math.log(2.0 - u - u)
    else:
        noise = 0.0 + b * math.log(u + u)
    return loc + noise


def reachable(y: float, loc: float, b: float) -> bool:
    """Whether some m ∈ [1, 2^53) gives exactly y.  The output is non-decreasing in m (log is
    monotone and both branches meet at loc), so binary-search the first m with output ≥ y."""
    lo, hi = 1, TWO53 - 1
    if numpy_laplace_output(hi, loc, b) < y:
        return False
    while lo < hi:
        mid = (lo + hi) // 2
        if numpy_laplace_output(mid, loc, b) >= y:
            hi = mid
        else:
            lo = mid + 1
    return numpy_laplace_output(lo, loc, b) == y


def float_outputs(x: float, seed: int) -> np.ndarray:
    s = FloatSampler(np.random.default_rng(seed))
    led = RewardLedger()
    out = np.array([noisy_sum(s, [x], ledger=led, run=0, arm=0, start=i, epsilon=EPS).value
                    for i in range(N)])
    assert led.releases == [LaplaceRelease(scale=1 / EPS, sensitivity=1.0)]
    return out


def test_float_laplace_leaks_through_unreachable_outputs():
    """On input 0 most outputs (≈ 80 %) cannot occur on input 1: an event of probability 0
    under one input and large under its neighbour, i.e. an infinite privacy loss.  Self-checks:
    the outputs equal numpy's arithmetic replayed on the raw generator words, and every output
    is reachable from its own input."""
    b = 1 / EPS
    y0 = float_outputs(0.0, seed=1)
    y1 = float_outputs(1.0, seed=2)
    for y, x, seed in ((y0, 0.0, 1), (y1, 1.0, 2)):
        raw = np.random.default_rng(seed).bit_generator.random_raw(N)
        m = (raw >> np.uint64(11)).astype(np.int64)
        assert np.all(m > 0), "a zero word makes numpy redraw; pick another seed"
        replay = np.array([numpy_laplace_output(int(v), x, b) for v in m])
        assert np.array_equal(replay, y), (
            "platform log differs from the one numpy used: the replication is invalid, fix it")
        assert all(reachable(v, x, b) for v in y[:300]), "reachability search is broken"
    unreachable0 = sum(not reachable(v, 1.0, b) for v in y0)
    unreachable1 = sum(not reachable(v, 1.0, b) for v in y1)
    assert unreachable1 == 0                       # the event never happens under input 1
    assert unreachable0 > 0.5 * N, unreachable0    # and mostly happens under input 0


def test_exact_sampler_has_no_unreachable_outputs():
    """Exact sampler on the same pair of inputs: every output is a lattice point m·2^-k, and
    every lattice point has positive probability under both inputs, with likelihood ratio
    within e^{±ε} (computed from the discrete Laplace pmf of the recorded release)."""
    k = 10
    led = RewardLedger()
    outs = {}
    for x, seed in ((0.0, 3), (1.0, 4)):
        s = ExactSampler(np.random.default_rng(seed), lattice_bits=k)
        outs[x] = np.array([noisy_sum(s, [x], ledger=led, run=0, arm=0, start=i, epsilon=EPS).value
                            for i in range(N)])
    (rel,) = led.releases
    assert isinstance(rel, DiscreteLaplaceRelease) and rel.sensitivity == 2 ** k
    for y in outs.values():
        z = y * 2 ** k
        assert np.all(z == np.round(z)), "exact outputs must lie on the lattice"
        z = np.round(z)
        p0 = discrete_laplace_pmf(z - 0, rel.scale)
        p1 = discrete_laplace_pmf(z - 2 ** k, rel.scale)
        assert np.all(p0 > 0) and np.all(p1 > 0)
        assert np.all(np.abs(np.log(p0) - np.log(p1)) <= rel.epsilon * (1 + 1e-9))
    # the attack that broke the float sampler finds nothing: lattice outputs never depend on
    # which input's floating-point grid they came from
    both = set(outs[0.0].tolist()) & set(outs[1.0].tolist())
    assert len(both) > 0
