"""Audited trade-off curves (issue 33 §3; audits/tradeoff.py): the DKW band's coverage on
mechanisms whose trade-off curve is known exactly, the excluded μ and ε(δ), and the CLI figure.

Coverage: over seeded repetitions the band must contain the true curve at every threshold
(checked exactly: the empirical CDFs' largest deviations from Φ and the Laplace CDF, at the
sample points), failing at most α of the time — the count below the Binomial(n, α) 99.9 %
quantile.  Run at confidence 0.5, where DKW's guarantee is not vacuous, so the test can fail.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dpledger.audits import tradeoff as tr


def _sup_dev(sample, cdf):
    x = np.sort(sample)
    n = x.size
    F = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - F), np.max(F - np.arange(n) / n))


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_band_coverage_on_known_curves(kind):
    gen = np.random.default_rng(33 if kind == "gaussian" else 34)
    reps, n, conf = 300, 400, 0.5
    a = 1 - conf
    miss = 0
    over = 0
    for _ in range(reps):
        if kind == "gaussian":
            s0, s1 = gen.normal(0, 1, n), gen.normal(1, 1, n)
            c0, c1 = stats.norm(0, 1).cdf, stats.norm(1, 1).cdf
        else:
            s0, s1 = gen.laplace(0, 1, n), gen.laplace(1, 1, n)
            c0, c1 = stats.laplace(0, 1).cdf, stats.laplace(1, 1).cdf
        band = tr.empirical_band(s0, s1, conf)
        miss += (_sup_dev(s0, c0) > band["eta0"]) or (_sup_dev(s1, c1) > band["eta1"])
        # the excluded parameter passes the truth only when the band misses the curve
        lim = tr.mu_excluded(band) > 1.0 if kind == "gaussian" else \
            tr.epsilon_excluded(band, 0.0) > 1.0
        over += lim
    assert miss <= stats.binom.ppf(0.999, reps, a)
    assert over <= miss


def test_excluded_values_and_curves():
    """Closed forms: G_μ at α = ½ is Φ(−μ); the (ε, 0) curve is max(0, 1 − e^ε α,
    e^{−ε}(1 − α)); with 10⁵ samples of N(0,1) vs N(2,1) the band excludes μ close to 2 and
    never the true G_2."""
    assert tr.gdp_curve(1.5, np.array([0.5]))[0] == pytest.approx(stats.norm.cdf(-1.5))
    al = np.array([0.0, 0.1, 0.5, 1.0])
    assert np.allclose(tr.approx_curve([(1.0, 0.0)], al),
                       np.maximum.reduce([np.zeros(4), 1 - np.e * al, (1 - al) / np.e]))
    g = np.random.default_rng(5)
    s0, s1 = g.normal(0, 1, 100_000), g.normal(2, 1, 100_000)
    band = tr.empirical_band(s0, s1)
    mu = tr.mu_excluded(band)
    assert 1.85 < mu <= 2.0
    assert not np.any(band["beta_ub"] < tr.gdp_curve(2.0, band["alpha_ub"]) - 1e-12)
    assert tr.epsilon_excluded(band, 1e-5) > tr.epsilon_excluded(band, 0.1)


def test_cli_tradeoff_figure(tmp_path):
    from dpledger.cli import main
    out, png = tmp_path / "a.json", tmp_path / "t.png"
    assert main(["audit", "dp-ucb", "--mode", "whitebox", "--horizon", "3", "--trials", "4000",
                 "--tradeoff", str(png), "--quiet", "--out", str(out)]) == 0
    j = json.loads(out.read_text())
    t = j["tradeoff"]
    assert png.stat().st_size > 10_000
    assert 0 < t["epsilon_excluded"]["1e-06"] <= j["certificate"]["pure_epsilon"]
    assert not any(t["excludes_certified"].values())
