"""Laplace and Gaussian releases of sums and means of rewards (docs/algorithms.md#laplace-release,
docs/algorithms.md#gaussian-release).

Rewards lie in a declared range [lo, hi] and statistics are computed on the normalised values
(x − lo)/(hi − lo) ∈ [0, 1] (docs/algorithms.md#reward-range; a reward outside the range is an
error, never a
clip).  Declared sensitivities, to one reward, in normalised units:

* sum of n rewards: Δ = 1;  mean of n rewards: Δ = 1/n (Dwork–Roth Thm 3.6 for Laplace,
  Dong–Roth–Su 2022 Thm 2.7 for Gaussian).

With the float sampler the mean is released as ``mean + Lap(1/(nε))`` (LaplaceRelease of scale
1/(nε), sensitivity 1/n).  With the exact sampler every reward is first rounded to the lattice,
the integer sum gets discrete noise of integer sensitivity 2^k, and the mean is the noisy sum
divided by n (post-processing).  :func:`release_value` releases any statistic with a
caller-declared sensitivity.

Each function draws its noise through :func:`~dpledger.mechanisms.noise.draw_and_record`, so
the ledger row (touch range, release) is written in the same call; nothing here computes a
privacy total.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.releases import Release
from dpledger.errors import DpledgerError, check_count, check_positive, check_real
from dpledger.mechanisms.noise import draw_and_record
from dpledger.mechanisms.samplers import Sampler


@dataclass(frozen=True)
class NoisyStatistic:
    """One release's result, in normalised reward units.

    ``clean`` is the statistic the noise was added to (after lattice rounding for the exact
    sampler); ``rounding_bias`` = clean − (the unrounded statistic), 0 for the float sampler.
    """

    value: float
    clean: float
    rounding_bias: float
    release: Release


def normalise(values, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    """(x − lo)/(hi − lo), refusing values outside [lo, hi] or non-finite
    (docs/algorithms.md#reward-range)."""
    lo = check_real("lo", lo)
    hi = check_real("hi", hi)
    if not hi > lo:
        raise DpledgerError(f"reward range needs lo < hi, got [{lo}, {hi}]")
    x = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if x.ndim != 1:
        raise DpledgerError(f"rewards must be a 1-d sequence, got shape {x.shape}")
    bad = ~np.isfinite(x) | (x < lo) | (x > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DpledgerError(f"reward {float(x[i])!r} at position {i} lies outside the declared "
                            f"range [{lo:g}, {hi:g}]")
    return (x - lo) / (hi - lo) if (lo, hi) != (0.0, 1.0) else x


def _check_noise(epsilon, sigma):
    if (epsilon is None) == (sigma is None):
        raise DpledgerError("give exactly one of epsilon (Laplace) or sigma (Gaussian)")


def _release_sum(sampler: Sampler, x: np.ndarray, sensitivity: float, epsilon, sigma, ledger,
                 run: int, arm: int, start: int, divide: float) -> NoisyStatistic:
    _check_noise(epsilon, sigma)
    stop = start + x.size
    if epsilon is not None:
        release = sampler.laplace_release(sensitivity, epsilon)
    else:
        release = sampler.gaussian_release(sensitivity, sigma)
    clean, bias = sampler.encode(x)
    noise = draw_and_record(sampler, release, ledger, run, arm, start, stop)
    value = sampler.decode(clean + noise)
    clean_f = sampler.decode(clean)
    return NoisyStatistic(value=value / divide, clean=clean_f / divide,
                          rounding_bias=bias / divide, release=release)


def noisy_sum(sampler: Sampler, rewards, *, ledger: RewardLedger, run: int, arm: int, start: int,
              epsilon: float | None = None, sigma: float | None = None, lo: float = 0.0,
              hi: float = 1.0) -> NoisyStatistic:
    """Σ normalised rewards + noise; the rewards are observations [start, start+n) of ``arm``.

    Laplace (``epsilon``): scale 1/ε, Δ = 1.  Gaussian (``sigma``): N(0, σ²) on the sum, Δ = 1.
    """
    x = normalise(rewards, lo, hi)
    if x.size == 0:
        raise DpledgerError("a noisy sum needs at least one reward")
    return _release_sum(sampler, x, 1.0, epsilon, sigma, ledger, run, arm,
                        check_count("start", start, minimum=0), 1.0)


def noisy_mean(sampler: Sampler, rewards, *, ledger: RewardLedger, run: int, arm: int, start: int,
               epsilon: float | None = None, sigma: float | None = None, lo: float = 0.0,
               hi: float = 1.0) -> NoisyStatistic:
    """Mean of n normalised rewards + noise (Δ = 1/n).

    Float sampler: Lap(1/(nε)) or N(0, σ²) added to the mean, recorded with sensitivity 1/n.
    Exact sampler: the lattice sum's noise (Δ = 2^k lattice units, scale 2^k/ε; or σ·n on the
    sum, so the mean's noise has std σ) divided by n.
    """
    x = normalise(rewards, lo, hi)
    n = x.size
    if n == 0:
        raise DpledgerError("a noisy mean needs at least one reward")
    start = check_count("start", start, minimum=0)
    if sampler.name == "exact":
        sig = None if sigma is None else check_positive("sigma", sigma) * n
        return _release_sum(sampler, x, 1.0, epsilon, sig, ledger, run, arm, start, float(n))
    _check_noise(epsilon, sigma)
    if epsilon is not None:
        release = sampler.laplace_release(1.0 / n, epsilon)
    else:
        release = sampler.gaussian_release(1.0 / n, sigma)
    clean, _ = sampler.encode(x)
    clean /= n
    noise = draw_and_record(sampler, release, ledger, run, arm, start, start + n)
    return NoisyStatistic(value=clean + noise, clean=clean, rounding_bias=0.0, release=release)


def release_value(sampler: Sampler, value: float, *, sensitivity: float, ledger: RewardLedger,
                  run: int, arm: int, start: int, stop: int, epsilon: float | None = None,
                  sigma: float | None = None) -> NoisyStatistic:
    """Any statistic over observations [start, stop) with a caller-declared sensitivity Δ.

    Exact sampler: the value is rounded to the lattice (monotone and translation-equivariant,
    so its sensitivity becomes ⌈Δ·2^k⌉ lattice units) before the discrete noise is added.
    """
    v = check_real("value", value)
    d = check_positive("sensitivity", sensitivity)
    start = check_count("start", start, minimum=0)
    stop = check_count("stop", stop, minimum=start + 1)
    _check_noise(epsilon, sigma)
    release = sampler.laplace_release(d, epsilon) if epsilon is not None else \
        sampler.gaussian_release(d, sigma)
    clean, bias = sampler.encode(v)
    noise = draw_and_record(sampler, release, ledger, run, arm, start, stop)
    return NoisyStatistic(value=sampler.decode(clean + noise), clean=sampler.decode(clean),
                          rounding_bias=bias, release=release)
