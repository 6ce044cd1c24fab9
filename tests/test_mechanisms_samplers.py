"""Statistical tests of every sampler, float and exact.

Each test is seeded (so it is deterministic in CI) and its acceptance region is chosen so that,
for a *random* seed and a correct sampler, it fails with probability at most the rate stated in
its docstring: exact binomial tests and chi-square/KS tests at significance 1e-4, and moment
z-tests at |z| ≤ 4.9 (two-sided normal tail ≈ 1e-6; the CLT approximation is accurate at these
sample sizes).  A wrong law (off by a scale factor of a few percent, a missing sign, an
unrenormalised pmf) fails them.
"""
from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpledger.mechanisms import exact as E
from dpledger.mechanisms.samplers import ExactSampler, FloatSampler

ALPHA = 1e-4
Z_MAX = 4.9
FULL = os.environ.get("DPLEDGER_FULL") == "1"


def _bits(seed: int) -> E.GeneratorBits:
    return E.GeneratorBits(np.random.default_rng(seed))


def chi_square_pooled(samples: np.ndarray, pmf, min_expected: float = 5.0) -> float:
    """p-value of Pearson's chi-square over integer cells, the two tails pooled into one cell
    each so that every cell expects at least ``min_expected`` draws."""
    n = samples.size
    lo_cut, hi_cut = 0, 0
    while n * pmf(np.array([lo_cut - 1]))[0] >= min_expected:
        lo_cut -= 1
    while n * pmf(np.array([hi_cut + 1]))[0] >= min_expected:
        hi_cut += 1
    inner = np.arange(lo_cut, hi_cut + 1)
    p_inner = pmf(inner)
    p_left = pmf(np.arange(lo_cut - 4000, lo_cut)).sum()
    p_right = pmf(np.arange(hi_cut + 1, hi_cut + 4001)).sum()
    expected = n * np.concatenate([[p_left], p_inner, [p_right]])
    mid = samples[(samples >= lo_cut) & (samples <= hi_cut)] - lo_cut
    observed = np.concatenate([[np.sum(samples < lo_cut)], np.bincount(mid, minlength=inner.size),
                               [np.sum(samples > hi_cut)]])
    assert observed.sum() == n
    keep = expected > 0
    assert abs(expected.sum() - n) < 1e-6 * n
    chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    return float(stats.chi2.sf(chi2, keep.sum() - 1))


def moment_z(samples: np.ndarray, mean: float, var: float, mu4: float) -> tuple[float, float]:
    """z-scores of the sample mean and the sample variance against their true values."""
    n = samples.size
    z_mean = (samples.mean() - mean) / math.sqrt(var / n)
    z_var = (samples.var(ddof=1) - var) / math.sqrt((mu4 - var ** 2) / n)
    return float(z_mean), float(z_var)


# ---- exact primitives ------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2),
                                   Fraction(7, 1)])
def test_bernoulli_exp(gamma):
    """Bernoulli(exp(−γ)) (CKS20 Alg. 1) against an exact two-sided binomial test; false-failure
    rate ≤ 1e-4 per γ (γ = 0 must give 1 every time)."""
    n = 20000
    b = _bits(11)
    k = sum(E.bernoulli_exp(gamma, b) for _ in range(n))
    p = math.exp(-float(gamma))
    if gamma == 0:
        assert k == n
    else:
        assert stats.binomtest(k, n, p).pvalue > ALPHA, (k, n * p)


@pytest.mark.parametrize("s,t", [(1, 1), (1, 3), (2, 7), (5, 3)])
def test_geometric_exp(s, t):
    """P(Y = y) = (1 − q)q^y with q = e^{−s/t} (CKS20 Alg. 2 lines 1–8): chi-square with the
    upper tail pooled, plus mean/variance z-tests; false-failure rate ≤ 1e-4 + 2e-6."""
    n = 20000
    b = _bits(12)
    y = np.array([E.geometric_exp(s, t, b) for _ in range(n)])
    q = math.exp(-s / t)

    def pmf(v):
        v = np.asarray(v)
        return np.where(v >= 0, (1 - q) * q ** np.maximum(v, 0).astype(float), 0.0)

    assert y.min() >= 0
    assert chi_square_pooled(y, pmf) > ALPHA
    support = np.arange(0, 4000)
    p = pmf(support)
    mean = float(np.sum(support * p))
    var = float(np.sum((support - mean) ** 2 * p))
    mu4 = float(np.sum((support - mean) ** 4 * p))
    assert abs(mean - q / (1 - q)) < 1e-9 * max(1, mean)
    zm, zv = moment_z(y.astype(float), mean, var, mu4)
    assert abs(zm) < Z_MAX and abs(zv) < Z_MAX, (zm, zv)


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3), Fraction(10, 3), 7.3])
def test_discrete_laplace(scale):
    """Discrete Laplace P(z) ∝ e^{−|z|/scale} (CKS20 Alg. 2): chi-square with pooled tails,
    mean/variance z-tests against the closed form Var = 2q/(1−q)², and symmetry (exact binomial
    test of the signs); false-failure rate ≤ 2e-4 + 2e-6."""
    n = 20000
    b = _bits(13)
    sc = float(scale)
    z = np.array([E.discrete_laplace(E.to_rational("scale", scale), b) for _ in range(n)])
    assert chi_square_pooled(z, lambda v: E.discrete_laplace_pmf(v, sc)) > ALPHA
    var = E.discrete_laplace_variance(sc)
    support = np.arange(-4000, 4001)
    p = E.discrete_laplace_pmf(support, sc)
    assert abs(p.sum() - 1) < 1e-12 and abs(np.sum(support ** 2 * p) - var) < 1e-9 * var
    mu4 = float(np.sum(support.astype(float) ** 4 * p))
    zm, zv = moment_z(z.astype(float), 0.0, var, mu4)
    assert abs(zm) < Z_MAX and abs(zv) < Z_MAX, (zm, zv)
    pos, neg = int(np.sum(z > 0)), int(np.sum(z < 0))
    assert stats.binomtest(pos, pos + neg, 0.5).pvalue > ALPHA


@pytest.mark.parametrize("sigma", [Fraction(1, 2), Fraction(1), 2.5, Fraction(20, 3)])
def test_discrete_gaussian(sigma):
    """Discrete Gaussian P(z) ∝ e^{−z²/(2σ²)} (CKS20 Alg. 3): chi-square with pooled tails and
    mean/variance z-tests against the pmf's own moments (CKS20 show its variance is below σ²;
    checked too); false-failure rate ≤ 1e-4 + 2e-6."""
    n = 12000
    b = _bits(14)
    sg = float(sigma)
    z = np.array([E.discrete_gaussian(E.to_rational("sigma", sigma), b) for _ in range(n)])
    assert chi_square_pooled(z, lambda v: E.discrete_gaussian_pmf(v, sg)) > ALPHA
    support = np.arange(-2000, 2001)
    p = E.discrete_gaussian_pmf(support, sg)
    var = float(np.sum(support ** 2 * p))
    mu4 = float(np.sum(support.astype(float) ** 4 * p))
    assert abs(p.sum() - 1) < 1e-12 and var <= sg ** 2 * (1 + 1e-12)
    zm, zv = moment_z(z.astype(float), 0.0, var, mu4)
    assert abs(zm) < Z_MAX and abs(zv) < Z_MAX, (zm, zv)


def test_exact_sampler_interface_lattice_scales():
    """ExactSampler at a realistic lattice scale (t = 2^20/ε lattice units, σ·2^20): variance
    z-tests against the closed forms; false-failure rate ≤ 4e-6."""
    s = ExactSampler(np.random.default_rng(15), lattice_bits=20)
    lap = s.laplace_release(1.0, 0.7)
    assert lap.sensitivity == 2 ** 20 and lap.scale == 2 ** 20 / 0.7
    n = 8000
    z = np.array([s.noise(lap) for _ in range(n)], dtype=float)
    var = E.discrete_laplace_variance(lap.scale)
    # for large scales the discrete Laplace is the continuous one on integers: μ4 → 24 b^4
    zm, zv = moment_z(z, 0.0, var, 24 * lap.scale ** 4)
    assert abs(zm) < Z_MAX and abs(zv) < Z_MAX, (zm, zv)
    gau = s.gaussian_release(1.0, 0.5)
    assert gau.sigma == 0.5 * 2 ** 20 and gau.sensitivity == 2 ** 20
    g = np.array([s.noise(gau) for _ in range(n)], dtype=float)
    zm, zv = moment_z(g, 0.0, gau.sigma ** 2, 3 * gau.sigma ** 4)
    assert abs(zm) < Z_MAX and abs(zv) < Z_MAX, (zm, zv)


def test_secrets_bit_source_runs():
    """The deployment bit source (``secrets``) plugs into the same samplers: 2000 discrete
    Laplace draws of scale 2 have a sample variance within 6 standard errors of the closed form
    (false-failure rate < 1e-8; this test is not seeded, by design)."""
    s = ExactSampler("secrets", lattice_bits=0)
    z = np.array([s.laplace(2.0) for _ in range(2000)], dtype=float)
    var = E.discrete_laplace_variance(2.0)
    support = np.arange(-400, 401)
    mu4 = float(np.sum(support.astype(float) ** 4 * E.discrete_laplace_pmf(support, 2.0)))
    _, zv = moment_z(z, 0.0, var, mu4)
    assert abs(zv) < 6


def test_generator_bits_uniform():
    """randbelow(n) for n across a 64-bit boundary is uniform: chi-square over 7 cells of
    ⌊x·7/n⌋, n = 3·2^64 + 1; false-failure rate 1e-4."""
    b = _bits(16)
    n = 3 * 2 ** 64 + 1
    x = np.array([b.randbelow(n) * 7 // n for _ in range(14000)])
    obs = np.bincount(x, minlength=7)
    assert stats.chisquare(obs).pvalue > ALPHA
    assert all(0 <= b.randbelow(5) < 5 for _ in range(200))


# ---- float sampler ---------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [0.1, 1.0, 3.7])
def test_float_laplace(scale):
    """FloatSampler Laplace: KS test against Lap(scale) at 1e-4 and mean/variance z-tests
    (μ4 = 24b⁴); false-failure rate ≤ 1e-4 + 2e-6."""
    s = FloatSampler(np.random.default_rng(17))
    x = s.laplace(scale, 50000)
    assert stats.kstest(x, stats.laplace(scale=scale).cdf).pvalue > ALPHA
    zm, zv = moment_z(x, 0.0, 2 * scale ** 2, 24 * scale ** 4)
    assert abs(zm) < Z_MAX and abs(zv) < Z_MAX


@pytest.mark.parametrize("sigma", [0.2, 1.0, 5.0])
def test_float_gaussian(sigma):
    """FloatSampler Gaussian: KS test against N(0, σ²) at 1e-4 and mean/variance z-tests
    (μ4 = 3σ⁴); false-failure rate ≤ 1e-4 + 2e-6."""
    s = FloatSampler(np.random.default_rng(18))
    x = s.gaussian(sigma, 50000)
    assert stats.kstest(x, stats.norm(scale=sigma).cdf).pvalue > ALPHA
    zm, zv = moment_z(x, 0.0, sigma ** 2, 3 * sigma ** 4)
    assert abs(zm) < Z_MAX and abs(zv) < Z_MAX


def test_release_noise_follows_release_description():
    """``noise(release)`` draws the law the release describes, for both samplers: KS (float) and
    chi-square (exact, lattice_bits = 0 so lattice units are integers) at 1e-4 each."""
    fs = FloatSampler(np.random.default_rng(19))
    rel = fs.laplace_release(0.5, 0.25)          # scale 2
    x = np.array([fs.noise(rel) for _ in range(20000)])
    assert rel.scale == 2.0 and stats.kstest(x, stats.laplace(scale=2.0).cdf).pvalue > ALPHA
    es = ExactSampler(np.random.default_rng(20), lattice_bits=0)
    rel = es.laplace_release(1.0, 0.5)           # Δ = 1, t = 2
    assert rel.sensitivity == 1 and rel.scale == 2.0
    z = np.array([es.noise(rel) for _ in range(20000)])
    assert chi_square_pooled(z, lambda v: E.discrete_laplace_pmf(v, 2.0)) > ALPHA


def test_chi_square_has_power():
    """The pooled chi-square used above rejects a discrete Laplace whose scale is 5 % off
    (guards against a test that cannot fail)."""
    b = _bits(21)
    z = np.array([E.discrete_laplace(Fraction(21, 5), b) for _ in range(20000)])
    assert chi_square_pooled(z, lambda v: E.discrete_laplace_pmf(v, 4.0)) < ALPHA
