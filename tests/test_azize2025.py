"""Azize et al. 2025 (issue 17): d_ε, the DP-KLUCB index and the regret lower-bound constants
against reference values computed independently (mpmath) from the paper's formulas, brute-force
minimisation, and the earlier (2022) bound they must never undercut."""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpledger.accounting.theorems import (azize_2025_lower_bound_constant,
                                          azize_basu_2022_lower_bound_constant,
                                          non_private_lower_bound_constant)
from dpledger.policies.rules import d_epsilon, dp_klucb_index, phase_target

EPS = (0.01, 0.1, 0.5, 1.0, 2.0)
# reference values: (x, y) → d_ε at ε = 0.01, 0.1, 0.5, 1, 2 (10 decimals)
GOLDEN = {
    (0.5, 0.75): (0.0024906094, 0.0240469825, 0.0997021749, 0.1426259805, 0.1438410362),
    (0.7, 0.75): (0.0004906094, 0.0040469825, 0.0064014570, 0.0064014570, 0.0064014570),
    (0.25, 0.75): (0.0049906094, 0.0490469825, 0.2247021749, 0.3926259805, 0.5455414072),
    (0.9, 0.3): (0.0059894860, 0.0589362381, 0.2721748861, 0.4842647782, 0.7295413897),
    (0.0, 0.5): (0.0049875001, 0.0487505205, 0.2190701964, 0.3798854930, 0.5662191695),
    (0.3, 1.0): (0.007, 0.07, 0.35, 0.7, 1.4),
}


def _kl_mp(p, q):
    p, q = mpmath.mpf(p), mpmath.mpf(q)
    out = mpmath.mpf(0)
    if p > 0:
        out += p * mpmath.log(p / q)
    if p < 1:
        out += (1 - p) * mpmath.log((1 - p) / (1 - q))
    return out


def _d_brute(x, y, eps):
    """min over z between x and y of ε|z − x| + kl(z, y), at 40 digits: a golden-section search
    on the convex objective, independent of the closed form (no sigmoid, no logits)."""
    with mpmath.workdps(40):
        lo, hi = mpmath.mpf(min(x, y)), mpmath.mpf(max(x, y))
        if y in (0.0, 1.0):       # kl(·, y) is finite only at z = y: the infimum is ε|y − x|
            return float(eps * abs(mpmath.mpf(y) - x))
        f = lambda z: eps * abs(z - x) + _kl_mp(z, y)  # noqa: E731
        g = (mpmath.sqrt(5) - 1) / 2
        a, b = lo, hi
        for _ in range(200):
            c, d = b - g * (b - a), a + g * (b - a)
            if f(c) <= f(d):
                b = d
            else:
                a = c
        return float(min(f((a + b) / 2), f(lo), f(hi)))


@pytest.mark.parametrize("xy", list(GOLDEN))
def test_d_eps_golden_values(xy):
    for eps, want in zip(EPS, GOLDEN[xy], strict=True):
        assert abs(d_epsilon(xy[0], xy[1], eps) - want) <= 1e-9, (xy, eps)


def test_d_eps_brute_force_random_triples():
    rng = np.random.default_rng(17)
    for _ in range(150):
        x, y = rng.random(2)
        eps = 10 ** rng.uniform(-3, 1.5)
        got, want = d_epsilon(x, y, eps), _d_brute(x, y, eps)
        assert abs(got - want) <= 1e-9 * max(1.0, want), (x, y, eps, got, want)


def test_d_eps_large_epsilon_no_overflow_and_bounds():
    # e^ε overflows a float at ε > 709: the logit form must not
    for eps in (800.0, 1e6):
        assert d_epsilon(0.2, 0.6, eps) == pytest.approx(float(_kl_mp(0.2, 0.6)), rel=1e-12)
        assert d_epsilon(0.9, 0.6, eps) == pytest.approx(float(_kl_mp(0.9, 0.6)), rel=1e-12)
    assert d_epsilon(0.4, 0.0, 0.3) == pytest.approx(0.12, rel=1e-15)
    assert d_epsilon(0.4, 0.4, 0.3) == 0.0


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.floats(1e-4, 50))
def test_d_eps_between_zero_and_min_of_kl_and_tv(x, y, eps):
    d = d_epsilon(x, y, eps)
    kl = math.inf if (y in (0.0, 1.0) and x != y) else float(_kl_mp(x, y))
    assert -1e-15 <= d <= min(kl, eps * abs(x - y)) * (1 + 1e-12) + 1e-15


# reference values: (raw private mean, n, t, ε) → index (8 decimals)
INDEX_GOLDEN = [(0.5, 100, 1000, 0.5, 0.69428744), (0.5, 100, 1000, 0.1, 1.0),
                (0.5, 1000, 1e5, 1.0, 0.57543669), (0.7, 5000, 1e6, 0.01, 0.97642567),
                (0.7, 20000, 1e6, 0.01, 0.76996474), (1.2, 50, 1000, 1.0, 1.0),
                (-0.3, 50, 1000, 1.0, 0.2041326)]


@pytest.mark.parametrize("x, n, t, eps, want", INDEX_GOLDEN)
def test_dp_klucb_index_golden(x, n, t, eps, want):
    xc = min(1.0, max(0.0, x))
    got = dp_klucb_index(xc, math.log(t) / n, eps)
    assert abs(got - want) <= 6e-8
    if got < 1.0:   # the index is the root: d_ε(x, index) = threshold (to the bisection's 1e-12)
        assert d_epsilon(xc, got, eps) >= math.log(t) / n >= d_epsilon(xc, got - 2e-12, eps)


def test_phase_target():
    assert [phase_target(n, 1.1) for n in (1, 5, 10, 11, 100)] == [2, 6, 11, 13, 110]
    assert [phase_target(n, 2.0) for n in (1, 2, 3)] == [2, 4, 6]
    assert phase_target(2, 1.5) == 3 and phase_target(3, 1.5) == 5


INSTANCES = {
    "mu1": [0.75, 0.7, 0.7, 0.7, 0.7],
    "mu2": [0.75, 0.625, 0.5, 0.375, 0.25],
    "mu3": [0.75, 0.53125, 0.375, 0.28125, 0.25],
    "mu4": [0.75, 0.71875, 0.625, 0.46875, 0.25],
}
# reference values: C_KL, then C(ν, ε) at ε = 0.01, 0.1, 0.5, 1 (3 decimals)
LB_TABLE = {"mu1": (31.243, 407.656, 49.420, 31.243, 31.243),
            "mu2": (7.128, 401.573, 41.677, 10.405, 7.708),
            "mu3": (5.042, 401.071, 41.118, 9.381, 5.934),
            "mu4": (18.071, 404.378, 45.758, 20.343, 18.491)}


@pytest.mark.parametrize("name", list(INSTANCES))
def test_lower_bound_constants_match_note_and_brute_force(name):
    means = INSTANCES[name]
    ckl, *cs = LB_TABLE[name]
    assert abs(non_private_lower_bound_constant(means) - ckl) <= 5e-4 + 1e-9
    for eps, want in zip((0.01, 0.1, 0.5, 1.0), cs, strict=True):
        c = azize_2025_lower_bound_constant(means, eps)
        assert abs(c - want) <= 5e-4 + 1e-9, (name, eps, c, want)
        brute = sum((max(means) - m) / _d_brute(m, max(means), eps)
                    for m in means if m < max(means))
        assert c == pytest.approx(brute, rel=1e-9)
        # ln T scaling as in the note's parentheses
        assert round(c * math.log(1e6)) == round(want * math.log(1e6)) or \
            abs(c * math.log(1e6) - want * math.log(1e6)) < 1.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=8), st.floats(1e-3, 30.0))
def test_2025_bound_never_undercuts_2022(means, eps):
    new = azize_2025_lower_bound_constant(means, eps)
    for factor in (1.0, 6.0):     # thesis form and Azize & Basu 2022 Table 2 form
        old = azize_basu_2022_lower_bound_constant(means, eps, factor)
        assert new >= old * (1 - 1e-12)
    # and it tends to the non-private bound once ε passes every arm's regime threshold
    mu_star = max(means)
    if 0 < mu_star < 1 and all(0 < m for m in means):
        big = max(math.log(mu_star / (1 - mu_star)) - math.log(m / (1 - m)) for m in means) + 1
        assert azize_2025_lower_bound_constant(means, big) == pytest.approx(
            non_private_lower_bound_constant(means), rel=1e-12)


def test_experiment_quick_tables_and_lower_bounds(tmp_path):
    """``dpledger experiment azize-2025 --quick``: every configuration's row carries the d_ε and
    2022 bounds recomputed here, the 2025 one never below the 2022 one; medians and stuck
    fractions recomputed from the per-run cells; the α ablation and every plot present."""
    import json
    import os

    from dpledger.experiments import experiment_module
    from dpledger.experiments.azize_2025 import MEANS, finals_by_run
    from dpledger.experiments.common import run_experiment
    mod = experiment_module("azize-2025")
    res = run_experiment(mod, str(tmp_path), quick=True, workers=1, quiet=True)
    cfgs = {c.label: c for c in mod.configs(True)}
    rows = res["summary"].table
    assert len(rows) == len(cfgs)
    assert {r["policy"] for r in rows} == {"dp-klucb", "dp-imed", "lazy-dp-ts", "adap-klucb",
                                           "dp-se", "imed"}
    assert {r["alpha"] for r in rows if r["part"] == "ablation"} >= {1.1, 3.0}
    for r in rows:
        if r["epsilon"] is None:
            continue
        lnT = math.log(r["T"])
        assert r["lb_2025_asymptotic"] == pytest.approx(
            azize_2025_lower_bound_constant(MEANS[r["instance"]], r["epsilon"]) * lnT,
            rel=1e-12)
        assert r["lb_2025_asymptotic"] >= r["lb_2022_asymptotic"]
    for label, c in cfgs.items():
        fin = finals_by_run(str(tmp_path), c.key())
        assert fin.size == c.runs
        with open(os.path.join(tmp_path, "runs", f"{label}.json")) as fh:
            rep = json.load(fh)
        assert rep["regret"]["final_mean"] == pytest.approx(fin.mean(), rel=1e-12)
        row = next(r for r in rows if r["instance"] == c.tags["instance"]
                   and r["policy"] == c.tags["policy"] and r["epsilon"] == c.tags["epsilon"]
                   and r["alpha"] == c.tags["alpha"])
        assert row["regret_median"] == np.median(fin)
        assert row["stuck_fraction"] == np.mean(fin > 5.0 * np.median(fin))
    names = {os.path.basename(p) for p in res["summary"].plots}
    assert {"regret_curves.png", "ablation_alpha.png"} <= names
    assert sum(n.startswith("regret_vs_eps_") for n in names) == 3
