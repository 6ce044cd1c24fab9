"""The staircase discrete-Gaussian sampler (mechanisms/staircase.py): its tables checked in
exact arithmetic, its integer steps against Python integers, its law by χ² against the pmf on
every path (fast accept, float screen, the exact decision, the tail), and the dispatch in
noise.py."""
from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from numba import njit
from scipy import stats

from dpledger.mechanisms import staircase as st
from dpledger.mechanisms.noise import discrete_gaussian_int
from dpledger.mechanisms.staircase import (S_MIN, U_BITS, _below, decide_exactly,
                                           exp_neg_bounds, staircase_gaussian, staircase_tables)

mpmath.mp.prec = 200


def _exp(num, den):
    return mpmath.exp(-mpmath.mpf(num) / den)


# -- tables -------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_bins", [st.N_BINS, 32])
def test_tables_bound_the_gaussian_and_sum_exactly(n_bins):
    c, h, cut, alias, fast, ratio = staircase_tables(n_bins)
    assert h[0] == c
    for j in range(1, n_bins):                      # envelope: h_j/C ≥ e^{-j²/2048}, tight
        e = _exp(j * j, 2048)
        assert h[j] >= c * e and h[j] - 1 < c * e
    assert h[n_bins] >= c * _exp(n_bins * n_bins, 2048)
    # the alias table gives every piece exactly its weight (integers, 2^33 a slot)
    cap = 1 << st.CUT_BITS
    got = np.zeros(cut.size, dtype=object)
    for slot in range(cut.size):
        got[slot] += int(cut[slot])
        got[int(alias[slot])] += cap - int(cut[slot])
    weights = [int(x) for x in h[:n_bins]] + [64 * int(h[n_bins])]
    assert list(got[:n_bins + 1]) == weights
    assert sum(got) == 1 << st.TOTAL_BITS
    assert got[n_bins + 1] == (1 << st.TOTAL_BITS) - sum(weights) >= 0
    assert all(g == 0 for g in got[n_bins + 2:])
    # fast accept: A_j/2^63 ≤ C·e^{-x_j²/2}/h_j ≤ C·ρ(m)/h_j for every m of bin j, any s ≥ S_MIN
    for j in range(n_bins):
        x = mpmath.mpf(j + 1) * (mpmath.mpf(1) / 32 + mpmath.mpf(1) / S_MIN)
        assert fast[j] <= mpmath.mpf(2) ** U_BITS * c * mpmath.exp(-x * x / 2) / int(h[j])
        assert fast[j] >= 0


def test_tail_envelope_dominates():
    """ρ(m) ≤ h_T·2^{-g}/C for every m of tail sub-bin g: m/s ≥ n_bins/32 + g."""
    for n_bins in (st.N_BINS, 32, 23):
        c, h, *_ = staircase_tables(n_bins)
        x0 = mpmath.mpf(n_bins) / 32
        for g in range(0, 60):
            x = x0 + g
            assert mpmath.exp(-x * x / 2) <= mpmath.mpf(int(h[n_bins])) / c * mpmath.mpf(2) ** -g


def test_exp_neg_bounds_bracket():
    rng = np.random.default_rng(0)
    for _ in range(300):
        num, den = int(rng.integers(0, 10 ** 12)), int(rng.integers(1, 10 ** 11))
        lo, hi = exp_neg_bounds(num, den, 30)
        e = _exp(num, den)
        assert mpmath.mpf(lo.numerator) / lo.denominator <= e <= mpmath.mpf(hi.numerator) / hi.denominator
        assert hi - lo < Fraction(1, 10 ** 25)


# -- integer steps ------------------------------------------------------------------------------

@njit(cache=True)
def _below_many(rng, n, size):
    out = np.empty(size, np.int64)
    for i in range(size):
        out[i] = _below(rng.bit_generator, n)
    return out


def test_lemire_product_split_is_exact():
    """_below's q = ⌊k·n/2^53⌋ for the k it drew: replay the same uniforms in Python integers."""
    for n in [1, 2, 3, 1000, 4097, (1 << 45) + 12345, (1 << 50) - 1, (1 << 52) + 7]:
        a = _below_many(np.random.default_rng(7), n, 2000)
        r = np.random.default_rng(7)
        expect = []
        while len(expect) < 2000:
            k = int(r.random() * 2.0 ** 53)       # the bits u53 reads: next 64-bit >> 11
            q, low = divmod(k * n, 1 << 53)
            if low >= n or low >= (1 << 53) % n:
                expect.append(q)
        assert a.tolist() == expect


def test_below_uniform():
    n = 37
    z = _below_many(np.random.default_rng(3), n, 37000)
    counts = np.bincount(z, minlength=n)
    assert counts.size == n
    assert stats.chisquare(counts).pvalue > 1e-4          # false failure 1e-4


# -- the exact decision -------------------------------------------------------------------------

def test_decide_exactly_against_mpmath():
    """Random (m, s, g, h) and prefixes of U straddling p: the answer is p's side, or 0 only
    when U's bits cannot tell (then one more word settles it)."""
    rng = np.random.default_rng(11)
    c, h, *_ = staircase_tables()
    seen = {1: 0, -1: 0, 0: 0}
    for _ in range(200):
        s = int(rng.integers(S_MIN, 1 << 30))
        j = int(rng.integers(0, 300))
        L = -(-s // 32)
        m = j * L + int(rng.integers(0, L))
        p = mpmath.mpf(c) * mpmath.exp(-mpmath.mpf(m) ** 2 / (2 * mpmath.mpf(s) ** 2)) / int(h[j])
        # a prefix just below, at, or just above p·2^63
        u = int(mpmath.floor(p * mpmath.mpf(2) ** U_BITS)) + int(rng.integers(-1, 2))
        words = np.zeros(4, np.int64)
        words[0] = u
        r = decide_exactly(m, s, 0, int(h[j]), c, words, 1)
        seen[r] += 1
        lo, hi = mpmath.mpf(u) / 2 ** U_BITS, mpmath.mpf(u + 1) / 2 ** U_BITS
        if r == 1:
            assert hi <= p
        elif r == -1:
            assert lo >= p
        else:
            assert lo < p < hi
            words[1] = int(rng.integers(0, 1 << 53))
            r2 = decide_exactly(m, s, 0, int(h[j]), c, words, 2)
            u2 = (u << 53) | int(words[1])
            assert r2 == (1 if mpmath.mpf(u2 + 1) / 2 ** (U_BITS + 53) <= p else -1)
    assert seen[0] > 0 and seen[1] > 0 and seen[-1] > 0


# -- the law ------------------------------------------------------------------------------------

@njit(cache=True)
def _draws(rng, s, size, margin, fast_path, h, cut, alias, fast, ratio, c, n_bins):
    out = np.empty(size, np.int64)
    for i in range(size):
        out[i] = staircase_gaussian(rng.bit_generator, s, margin, fast_path, h, cut, alias, fast, ratio, c,
                                    n_bins)
    return out


def _chi2_p(z: np.ndarray, s: int, cells: int = 60) -> float:
    """Pearson χ² p-value of integer draws against N_ℤ(0, s²) on `cells` cells of nearly equal
    mass.  Cell masses: summed over their integers in float64 for s ≤ 1e5; above, the normal
    cdf at half-integers (by Poisson summation the discrete Gaussian's cdf differs from it by
    far less than 1e-100 there)."""
    if s <= 100_000:
        half = int(8 * s)
        support = np.arange(-half, half + 1)
        w = np.exp(-(support.astype(np.float64) / s) ** 2 / 2)
        cdf = np.cumsum(w / w.sum())    # mass beyond 8σ (< 1e-14) pooled into the end cells
        edges = np.searchsorted(cdf, np.linspace(0, 1, cells + 1)[1:-1])
        upper = support[edges]           # cell i holds z ≤ upper[i] (and above upper[i-1])
        inner = cdf[edges]
    else:
        upper = np.round(stats.norm.ppf(np.linspace(0, 1, cells + 1)[1:-1]) * s).astype(np.int64)
        inner = stats.norm.cdf((upper + 0.5) / s)
    idx = np.searchsorted(upper, z, side="left")
    observed = np.bincount(idx, minlength=cells)
    expected = z.size * np.diff(np.concatenate([[0.0], inner, [1.0]]))
    return float(stats.chisquare(observed, expected).pvalue)


# eight χ² tests at α = 1e-5 each: a correct sampler fails one with probability < 1e-4;
# seeded, so a pass or a failure is reproducible
@pytest.mark.parametrize("s", [S_MIN, 5000, 92682, 3 * (1 << 40) + 1])
def test_production_law(s):
    tables = (st.HEIGHTS, st.ALIAS_CUT, st.ALIAS_INDEX, st.FAST_ACCEPT, st.RATIO, st.C_SCALE,
              st.N_BINS)
    z = _draws(np.random.default_rng(s), s, 200_000, st.MARGIN, True, *tables)
    assert _chi2_p(z, s) > 1e-5
    assert abs(z.mean()) < 5 * s / math.sqrt(z.size)


def test_law_through_screen_and_exact_decision():
    """No fast accept and a screen margin of 1/64: every attempt goes through the float screen
    and about 3 % through decide_exactly (objmode) — the same law."""
    tables = (st.HEIGHTS, st.ALIAS_CUT, st.ALIAS_INDEX, st.FAST_ACCEPT, st.RATIO, st.C_SCALE,
              st.N_BINS)
    z = _draws(np.random.default_rng(21), 6000, 20_000, 1.0 / 64, False, *tables)
    assert _chi2_p(z, 6000, cells=40) > 1e-5


@pytest.mark.parametrize("margin", [2.0 ** -40, 1.0 / 64])
def test_law_with_the_tail_exercised(margin):
    """Tables with 32 bins (tail from 1σ): a third of the draws come from the tail's halving
    sub-bins; the law is still N_ℤ(0, s²)."""
    tables = staircase_tables(32)
    c, h, cut, alias, fast, ratio = tables
    z = _draws(np.random.default_rng(5), 7777, 40_000 if margin < 1e-3 else 10_000, margin,
               True, h, cut, alias, fast, ratio, c, 32)
    assert np.mean(np.abs(z) >= 32 * (-(-7777 // 32))) > 0.25
    assert _chi2_p(z, 7777, cells=40) > 1e-5


def test_sign_and_zero():
    """s at the smallest value: the two signs are equally likely (binomial, 6σ) and 0 has
    the pmf's probability within a binomial 6σ."""
    tables = (st.HEIGHTS, st.ALIAS_CUT, st.ALIAS_INDEX, st.FAST_ACCEPT, st.RATIO, st.C_SCALE,
              st.N_BINS)
    z = _draws(np.random.default_rng(9), S_MIN, 400_000, st.MARGIN, True, *tables)
    n = z.size
    assert abs(np.sum(z > 0) - np.sum(z < 0)) < 6 * math.sqrt(n)
    support = np.arange(-8 * S_MIN, 8 * S_MIN + 1)
    p0 = 1.0 / np.exp(-(support / S_MIN) ** 2 / 2).sum()
    assert abs(np.sum(z == 0) - n * p0) < 6 * math.sqrt(n * p0) + 1


def test_dispatch_and_range():
    """noise.discrete_gaussian_int: CKS20 below S_MIN, the staircase from S_MIN; the staircase
    refuses s outside [S_MIN, 2^50]."""
    tables = (st.HEIGHTS, st.ALIAS_CUT, st.ALIAS_INDEX, st.FAST_ACCEPT, st.RATIO, st.C_SCALE,
              st.N_BINS)
    a = discrete_gaussian_int(np.random.default_rng(4).bit_generator, S_MIN)
    b = _draws(np.random.default_rng(4), S_MIN, 1, st.MARGIN, True, *tables)[0]
    assert a == b
    with pytest.raises(ValueError):
        _draws(np.random.default_rng(4), S_MIN - 1, 1, st.MARGIN, True, *tables)
    with pytest.raises(ValueError):
        _draws(np.random.default_rng(4), (1 << 50) + 1, 1, st.MARGIN, True, *tables)


@njit(cache=True)
def _prod_draws(bg, s, size):
    out = np.empty(size, np.int64)
    for i in range(size):
        out[i] = st.staircase_draw(bg, s)
    return out


def test_production_body_equals_the_parametrised_one():
    """staircase_draw (tables as module constants) and staircase_gaussian given the production
    tables draw the same integers from the same bits."""
    tables = (st.HEIGHTS, st.ALIAS_CUT, st.ALIAS_INDEX, st.FAST_ACCEPT, st.RATIO, st.C_SCALE,
              st.N_BINS)
    for s in (S_MIN, 70001, 1 << 40):
        a = _prod_draws(np.random.default_rng(s).bit_generator, s, 20000)
        b = _draws(np.random.default_rng(s), s, 20000, st.MARGIN, True, *tables)
        assert np.array_equal(a, b)


@njit(cache=True)
def _u53_many(bg, size):
    out = np.empty(size, np.int64)
    for i in range(size):
        out[i] = st.u53(bg)
    return out


def test_bits_are_numpys_random_bits():
    """u53 (compiled and Python) reads k = 2^53·random() of the same stream: a kernel mixing
    rng.random() with the samplers' draws reads one sequence."""
    ref = np.random.default_rng(8)
    k = [int(ref.random() * 2.0 ** 53) for _ in range(1000)]
    assert _u53_many(np.random.default_rng(8).bit_generator, 1000).tolist() == k
    bg = np.random.default_rng(8).bit_generator
    assert [int(st.u53(bg)) for _ in range(1000)] == k
