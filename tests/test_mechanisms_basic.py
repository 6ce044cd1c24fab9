"""Laplace/Gaussian releases of sums, means and declared-sensitivity statistics; the noise-and-row
helpers; bad input at the boundary (docs/design.md#reliability-targets R2)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpledger.accounting.ledger import RewardLedger, RowBuffer
from dpledger.accounting.releases import (DiscreteGaussianRelease, DiscreteLaplaceRelease,
                                          GaussianRelease, LaplaceRelease)
from dpledger.errors import DpledgerError
from dpledger.mechanisms import noise as N
from dpledger.mechanisms.basic import noisy_mean, noisy_sum, release_value
from dpledger.mechanisms.samplers import ExactSampler, FloatSampler, Sampler, make_sampler


def test_both_samplers_satisfy_the_protocol():
    for s in (FloatSampler(np.random.default_rng(0)), ExactSampler(np.random.default_rng(0))):
        assert isinstance(s, Sampler)
    assert make_sampler("exact", np.random.default_rng(0), lattice_bits=3).unit == 8


def test_float_sum_and_mean_releases():
    """Sum: Lap(1/ε), Δ = 1; mean of n: Lap(1/(nε)), Δ = 1/n; both ε-DP per the release
    formulas, rows over the observations they touch.  The noise is what the Generator draws."""
    led = RewardLedger()
    x = [0.2, 0.4, 1.0, 0.0]
    r = noisy_sum(FloatSampler(np.random.default_rng(1)), x, ledger=led, run=2, arm=1, start=10,
                  epsilon=0.5)
    assert r.release == LaplaceRelease(scale=2.0, sensitivity=1.0)
    assert r.value == pytest.approx(1.6 + np.random.default_rng(1).laplace(0, 2.0), abs=1e-15)
    m = noisy_mean(FloatSampler(np.random.default_rng(1)), x, ledger=led, run=2, arm=1, start=10,
                   epsilon=0.5)
    assert m.release.sensitivity == 0.25 and m.release.scale == 1 / (4 * 0.5)
    assert math.isclose(m.release.epsilon, 0.5, rel_tol=1e-15)
    assert m.value == pytest.approx(0.4 + np.random.default_rng(1).laplace(0, 0.5), abs=1e-15)
    rows = led.rows
    assert rows["start"].tolist() == [10, 10] and rows["stop"].tolist() == [14, 14]
    assert rows["run"].tolist() == [2, 2] and rows["arm"].tolist() == [1, 1]
    g = noisy_mean(FloatSampler(np.random.default_rng(1)), x, ledger=led, run=0, arm=0, start=0,
                   sigma=0.1)
    assert g.release == GaussianRelease(sigma=0.1, sensitivity=0.25)
    worst = led.worst_reward()
    assert worst.currency == "gdp"     # a Gaussian row is present; accounting decides the currency


def test_range_normalisation():
    """Rewards in [lo, hi] are counted as (x − lo)/(hi − lo) (A3); sensitivity stays 1."""
    led = RewardLedger()
    r = noisy_sum(FloatSampler(np.random.default_rng(2)), [-1.0, 3.0, 1.0], ledger=led, run=0,
                  arm=0, start=0, epsilon=1.0, lo=-1.0, hi=3.0)
    assert r.clean == pytest.approx(1.5) and r.release.sensitivity == 1.0


def test_exact_sum_rounds_then_sums_and_records_bias():
    """Exact: each reward rounded to ⌊x·2^k + ½⌋·2^-k before summing; the bias is recorded;
    the release is the discrete Laplace with Δ = 2^k lattice units and scale 2^k/ε."""
    k = 4
    x = np.array([0.03, 0.5, 0.97, 0.3125, 0.7])
    led = RewardLedger()
    r = noisy_sum(ExactSampler(np.random.default_rng(3), lattice_bits=k), x, ledger=led, run=0,
                  arm=0, start=0, epsilon=0.8)
    rounded = np.floor(x * 16 + 0.5) / 16
    assert r.clean == rounded.sum()
    assert r.rounding_bias == pytest.approx(float(np.sum(rounded - x)), abs=1e-15)
    assert r.release == DiscreteLaplaceRelease(scale=16 / 0.8, sensitivity=16)
    assert (r.value * 16) == round(r.value * 16)
    mean = noisy_mean(ExactSampler(np.random.default_rng(3), lattice_bits=k), x, ledger=led,
                      run=0, arm=0, start=0, epsilon=0.8)
    assert mean.value == pytest.approx(r.value / 5) and mean.release == r.release
    gm = noisy_mean(ExactSampler(np.random.default_rng(3), lattice_bits=k), x, ledger=led,
                    run=0, arm=0, start=0, sigma=0.25)
    # noise std σ on the mean = σ·n on the sum; ρ = Δ²/(2σ_lattice²) = 1/(2(σn)²)
    assert gm.release == DiscreteGaussianRelease(sigma=0.25 * 5 * 16, sensitivity=16)
    assert math.isclose(gm.release.rho, 1 / (2 * (0.25 * 5) ** 2))


def test_lattice_rounding_sensitivity():
    """Rounding ⌊x·2^k + ½⌋ is monotone and commutes with integer shifts, so two statistics
    within Δ move by at most ⌈Δ·2^k⌉ lattice units (checked on random pairs, including exact
    half-way points where round-half-to-even would break it)."""
    s = ExactSampler(np.random.default_rng(0), lattice_bits=3)
    rng = np.random.default_rng(5)
    for delta in (1.0, 0.3, 2.5):
        a = np.r_[rng.uniform(-4, 4, 5000), np.arange(-16, 16) / 16 + 1 / 16]
        b = a + rng.uniform(-delta, delta, a.size)
        b[-32:] = a[-32:] + delta
        d = np.abs(s.round_to_lattice(a) - s.round_to_lattice(b))
        assert d.max() <= s.lattice_sensitivity(delta)


def test_release_value_declared_sensitivity():
    led = RewardLedger()
    r = release_value(FloatSampler(np.random.default_rng(6)), 3.0, sensitivity=2.0, ledger=led,
                      run=0, arm=0, start=0, stop=7, epsilon=0.5)
    assert r.release == LaplaceRelease(scale=4.0, sensitivity=2.0)
    e = release_value(ExactSampler(np.random.default_rng(6), lattice_bits=2), 3.1, sensitivity=0.3,
                      ledger=led, run=0, arm=0, start=0, stop=7, epsilon=0.5)
    assert e.release.sensitivity == math.ceil(0.3 * 4) and e.clean == 3.0
    assert e.rounding_bias == pytest.approx(-0.1)
    assert led.rows["stop"].tolist() == [7, 7]


def test_draw_and_record_writes_row_before_drawing():
    """A bad touch range raises before any noise is drawn (the generator does not move)."""
    rng = np.random.default_rng(7)
    state = rng.bit_generator.state
    with pytest.raises(DpledgerError):
        N.draw_and_record(FloatSampler(rng), LaplaceRelease(1.0), RewardLedger(), 0, 0, 5, 5)
    assert rng.bit_generator.state == state


def test_njit_helpers_write_rows_and_draw():
    """``laplace_row``/``gaussian_row`` write the RowBuffer row and return the Generator's draw;
    ``ledger.extend`` takes the rows; a full buffer raises instead of dropping a row."""
    buf = RowBuffer(3)
    rng, twin = np.random.default_rng(8), np.random.default_rng(8)
    a = N.laplace_row(rng, 2.0, buf.columns(), 0, 1, 2, 3, 9, 0)
    b = N.gaussian_row(rng, 0.5, buf.columns(), 1, 1, 2, 9, 10, 1)
    assert a == twin.laplace(0.0, 2.0) and b == twin.normal(0.0, 0.5)
    led = RewardLedger()
    led.intern(LaplaceRelease(2.0))
    led.intern(GaussianRelease(0.5))
    led.extend(buf, 2)
    assert led.rows["start"].tolist() == [3, 9] and led.rows["release_id"].tolist() == [0, 1]
    N.laplace_row(rng, 1.0, buf.columns(), 2, 0, 0, 0, 1, 0)
    with pytest.raises(IndexError):
        N.laplace_row(rng, 1.0, buf.columns(), 3, 0, 0, 0, 1, 0)


def test_float_noisy_sum_law():
    """2000 seeded noisy sums of fixed rewards minus the clean sum are Lap(1/ε): KS at 1e-4
    (false-failure rate 1e-4)."""
    s = FloatSampler(np.random.default_rng(9))
    led = RewardLedger()
    e = [noisy_sum(s, [0.3, 0.9], ledger=led, run=0, arm=0, start=0, epsilon=2.0).value - 1.2
         for _ in range(2000)]
    assert stats.kstest(e, stats.laplace(scale=0.5).cdf).pvalue > 1e-4


def _f(**kw):
    base = dict(ledger=RewardLedger(), run=0, arm=0, start=0, epsilon=1.0)
    base.update(kw)
    return base


_FS = lambda: FloatSampler(np.random.default_rng(0))
_ES = lambda: ExactSampler(np.random.default_rng(0))

BAD = [
    ("eps zero", lambda: noisy_sum(_FS(), [0.5], **_f(epsilon=0.0)), "epsilon"),
    ("eps negative", lambda: noisy_sum(_FS(), [0.5], **_f(epsilon=-1.0)), "epsilon"),
    ("eps nan", lambda: noisy_sum(_FS(), [0.5], **_f(epsilon=float("nan"))), "NaN"),
    ("eps inf", lambda: noisy_sum(_FS(), [0.5], **_f(epsilon=float("inf"))), "finite"),
    ("eps string", lambda: noisy_sum(_FS(), [0.5], **_f(epsilon="1")), "number"),
    ("eps exact zero", lambda: noisy_sum(_ES(), [0.5], **_f(epsilon=0.0)), "epsilon"),
    ("both eps and sigma", lambda: noisy_sum(_FS(), [0.5], **_f(sigma=1.0)), "exactly one"),
    ("neither", lambda: noisy_sum(_FS(), [0.5], **_f(epsilon=None)), "exactly one"),
    ("sigma zero", lambda: noisy_mean(_FS(), [0.5], **_f(epsilon=None, sigma=0.0)), "sigma"),
    ("sigma exact nan", lambda: noisy_mean(_ES(), [0.5], **_f(epsilon=None, sigma=float("nan"))), "NaN"),
    ("reward above", lambda: noisy_sum(_FS(), [0.5, 1.01], **_f()), "outside the declared range"),
    ("reward below", lambda: noisy_sum(_ES(), [-0.1], **_f()), "outside the declared range"),
    ("reward nan", lambda: noisy_mean(_FS(), [float("nan")], **_f()), "outside the declared range"),
    ("reward inf", lambda: noisy_sum(_FS(), [float("inf")], **_f()), "outside the declared range"),
    ("custom range", lambda: noisy_sum(_FS(), [5.0], **_f(lo=-1, hi=2)), "outside"),
    ("empty range", lambda: noisy_sum(_FS(), [0.5], **_f(lo=1.0, hi=1.0)), "lo < hi"),
    ("nan range", lambda: noisy_sum(_FS(), [0.5], **_f(lo=float("nan"))), "NaN"),
    ("2-d rewards", lambda: noisy_sum(_FS(), [[0.5]], **_f()), "1-d"),
    ("no rewards", lambda: noisy_sum(_FS(), [], **_f()), "at least one"),
    ("no rewards mean", lambda: noisy_mean(_ES(), [], **_f()), "at least one"),
    ("negative start", lambda: noisy_sum(_FS(), [0.5], **_f(start=-1)), "start"),
    ("float start", lambda: noisy_sum(_FS(), [0.5], **_f(start=1.5)), "start"),
    ("not a ledger", lambda: noisy_sum(_FS(), [0.5], **_f(ledger={})), "RewardLedger"),
    ("negative sensitivity", lambda: release_value(_FS(), 1.0, sensitivity=-1.0, ledger=RewardLedger(),
                                                   run=0, arm=0, start=0, stop=1, epsilon=1.0), "sensitivity"),
    ("nan sensitivity", lambda: release_value(_ES(), 1.0, sensitivity=float("nan"), ledger=RewardLedger(),
                                              run=0, arm=0, start=0, stop=1, epsilon=1.0), "NaN"),
    ("empty touch range", lambda: release_value(_FS(), 1.0, sensitivity=1.0, ledger=RewardLedger(),
                                                run=0, arm=0, start=3, stop=3, epsilon=1.0), "stop"),
    ("nan value", lambda: release_value(_FS(), float("nan"), sensitivity=1.0, ledger=RewardLedger(),
                                        run=0, arm=0, start=0, stop=1, epsilon=1.0), "NaN"),
    ("sampler from int", lambda: FloatSampler(0), "Generator"),
    ("exact from int", lambda: ExactSampler(0), "randomness"),
    ("lattice bits negative", lambda: ExactSampler(np.random.default_rng(0), lattice_bits=-1), "lattice_bits"),
    ("lattice bits too many", lambda: ExactSampler(np.random.default_rng(0), lattice_bits=60), "lattice_bits"),
    ("unknown sampler", lambda: make_sampler("quantum", np.random.default_rng(0)), "sampler"),
    ("float draws discrete", lambda: _FS().noise(DiscreteLaplaceRelease(2.0, 1)), "FloatSampler"),
    ("exact draws continuous", lambda: _ES().noise(LaplaceRelease(2.0)), "ExactSampler"),
    ("exact raw scale zero", lambda: _ES().laplace(0), "scale"),
    ("exact raw sigma nan", lambda: _ES().gaussian(float("nan")), "finite"),
    ("float raw scale negative", lambda: _FS().laplace(-1.0), "scale"),
    ("lattice overflow", lambda: ExactSampler(np.random.default_rng(0), lattice_bits=50).encode([8.0]), "lattice"),
    ("scale and eps", lambda: _ES().laplace_release(1.0, 1.0, scale=1.0), "not both"),
]


@pytest.mark.parametrize("name,call,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_clear_error(name, call, match):
    """R2: each bad input raises DpledgerError (a ValueError) naming the problem."""
    with pytest.raises(DpledgerError, match=match):
        call()


def test_bad_input_table_is_large_enough():
    assert len(BAD) >= 30
