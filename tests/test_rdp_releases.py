"""Releases given by a privacy curve (issue 15 §1): ``rdp:orders=…,values=…`` and ``zcdp:rho=ρ``.

* listed-order composition and conversion equal an independent mpmath computation (the
  union of the listed orders, each release at its smallest listed order ≥ α, orders above a
  release's largest dropped, Laplace/Gaussian curves in closed form; min over those orders);
* a Gaussian's RDP curve listed at many orders is never below its exact GDP ε, and within 1 %
  of the best the improved conversion can do (α continuous) for δ from 1e-6 to 1e-12;
* zCDP with ρ = μ²/2 is never below the exact Gaussian ε, and its conversion is the
  continuous optimum of CKS20 Prop. 12 (mpmath), never above dp-accounting's for ZCDpEvent;
* statuses, JSON round trip, ``compose`` with ``count=``, DpEvent export/import and refusal,
  a ledger holding them (worst reward ranked by ε(δ)), budgets (zCDP admits ρ, refuses RDP).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accounting.accountants import ACCOUNTANTS, BestAccountant
from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import gdp_epsilon
from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.releases import (GaussianRelease, LaplaceRelease, RdpRelease,
                                          ZcdpRelease, parse_release_spec, release_from_json,
                                          release_to_json)
from dpledger.accounting.schema import privacy_block
from dpledger.errors import DpledgerError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RDP = ACCOUNTANTS["rdp"]


def _mp_laplace_rdp(eps, a):
    eps, a = mp.mpf(eps), mp.mpf(a)
    return mp.log(a / (2 * a - 1) * mp.exp((a - 1) * eps) + (a - 1) / (2 * a - 1)
                  * mp.exp(-a * eps)) / (a - 1)


def _mp_epsilon(pairs, delta):
    """min over the union of listed orders (those ≤ every RdpRelease's largest) of the
    composed curve + log(1 − 1/α) − (log δ + log α)/(α − 1), all at 50 digits."""
    mp.mp.dps = 50
    rdps = [r for r, _ in pairs if isinstance(r, RdpRelease)]
    top = min(r.orders[-1] for r in rdps)
    orders = sorted({a for r in rdps for a in r.orders if a <= top})
    best = mp.inf
    for a in orders:
        total = mp.mpf(0)
        for r, c in pairs:
            if isinstance(r, RdpRelease):
                v = next(val for o, val in zip(r.orders, r.values, strict=True) if o >= a)
                total += c * mp.mpf(v)
            elif isinstance(r, GaussianRelease):
                total += c * mp.mpf(a) * (mp.mpf(r.sensitivity) / mp.mpf(r.sigma)) ** 2 / 2
            elif isinstance(r, ZcdpRelease):
                total += c * mp.mpf(a) * mp.mpf(r.rho)
            else:
                total += c * _mp_laplace_rdp(mp.mpf(r.sensitivity) / mp.mpf(r.scale), a)
        a_ = mp.mpf(a)
        best = min(best, total + mp.log1p(-1 / a_) - (mp.log(delta) + mp.log(a_)) / (a_ - 1))
    return max(best, mp.mpf(0))


@st.composite
def rdp_release(draw):
    n = draw(st.integers(1, 6))
    orders = sorted(draw(st.sets(st.sampled_from([1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0]),
                                 min_size=n, max_size=n)))
    incr = draw(st.lists(st.floats(0.0, 2.0), min_size=n, max_size=n))
    values = list(np.cumsum(incr) + 1e-3)
    return RdpRelease(tuple(orders), tuple(values))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(rdp_release(), st.integers(1, 5)), min_size=1, max_size=3),
       st.lists(st.tuples(st.sampled_from([LaplaceRelease.from_epsilon(0.3),
                                           GaussianRelease(sigma=2.0), ZcdpRelease(0.05)]),
                          st.integers(1, 4)), max_size=2),
       st.sampled_from([1e-3, 1e-6, 1e-10]))
def test_listed_order_conversion_equals_independent(rdps, others, delta):
    comp = Composition.of(rdps + others)
    ours = RDP.epsilon(comp, delta)
    exact = _mp_epsilon(list(comp.items), delta)
    assert ours >= exact                                   # an upper bound
    assert ours <= exact * (1 + 1e-9) + 1e-12              # and no looser than rounding


def test_union_rule_and_dropped_orders():
    a = RdpRelease((2.0, 8.0), (0.1, 0.4))
    b = RdpRelease((4.0, 16.0), (0.2, 0.9))
    comp = Composition.of([(a, 2), (b, 1)])
    assert list(comp.rdp_orders()) == [2.0, 4.0, 8.0]      # 16 > a's largest order: dropped
    # α = 2: a at 2 (0.1), b at 4 (0.2); α = 4: a at 8, b at 4; α = 8: a at 8, b at 16
    assert np.allclose(comp.rdp(), [2 * 0.1 + 0.2, 2 * 0.4 + 0.2, 2 * 0.4 + 0.9], rtol=1e-9)
    assert np.all(comp.rdp() >= [0.4, 1.0, 1.7])


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 3.0, 10.0])
def test_gaussian_curve_listed_at_many_orders(mu):
    orders = tuple(1.0 + np.geomspace(1e-3, 1e4, 4000))
    values = tuple(float(a) * mu * mu / 2 * (1 + 1e-15) for a in orders)
    listed = Composition.of([RdpRelease(orders, values)])
    for k in range(6, 13):
        delta = 10.0 ** -k
        e = RDP.epsilon(listed, delta)
        assert e >= gdp_epsilon(mu, delta)                             # never below exact
        best_possible = ACCOUNTANTS["rdp"].epsilon(
            Composition.of([ZcdpRelease(mu * mu / 2)]), delta)          # α continuous
        assert e <= best_possible * 1.01                               # within 1 %


@pytest.mark.parametrize("mu", [1e-3, 0.1, 1.0, 5.0, 100.0])
def test_zcdp_never_below_exact_gaussian_and_is_continuous_optimum(mu):
    from dp_accounting import dp_event as E
    from dp_accounting.rdp import rdp_privacy_accountant as R
    rho = mu * mu / 2
    comp = Composition.of([ZcdpRelease(rho)])
    mp.mp.dps = 40
    for delta in (1e-3, 1e-6, 1e-9, 1e-12):
        e = RDP.epsilon(comp, delta)
        assert e >= gdp_epsilon(mu, delta)
        def f(a, delta=delta):
            return a * rho + mp.log1p(-1 / a) - (mp.log(delta) + mp.log(a)) / (a - 1)
        x = mp.findroot(lambda s, f=f: mp.diff(lambda t: f(1 + mp.exp(t)), s), mp.log(
            mp.sqrt(-math.log(delta) / rho) + 1e-9))
        opt = max(f(1 + mp.exp(x)), 0)           # ε is clipped at 0
        assert e >= opt and e <= opt * (1 + 1e-9) + 1e-12
        acc = R.RdpAccountant()
        acc.compose(E.ZCDpEvent(rho))
        assert e <= acc.get_epsilon(delta) * (1 + 1e-12)


def test_statuses_json_compose_and_events():
    r = RdpRelease((2.0, 4.0), (0.5, 1.0))
    z = ZcdpRelease(0.25)
    for rel in (r, z):
        assert release_from_json(json.loads(json.dumps(release_to_json(rel)))) == rel
    block = privacy_block([Composition.of([(r, 3)])], [1e-6])
    assert block["pure_epsilon"] is None and block["pure_epsilon_status"] == "not_applicable"
    assert block["gdp_mu_status"] == "not_applicable" and block["zcdp_rho_status"] == "not_applicable"
    assert block["epsilon_status"]["pld"]["1e-06"] == "not_applicable"
    zb = privacy_block([Composition.of([(z, 4)])], [1e-6])
    assert zb["zcdp_rho"] == 1.0 and zb["gdp_mu_status"] == "not_applicable"
    rel, count = parse_release_spec("rdp:orders=2;4,values=0.5;1,count=3")
    assert rel == r and count == 3
    assert parse_release_spec("zcdp:rho=0.25") == (z, 1)
    out = subprocess.run([sys.executable, "-m", "dpledger", "compose", "--json", "--delta", "1e-6",
                          "rdp:orders=2;4,values=0.5;1,count=3", "zcdp:rho=0.25"],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)["epsilon"]["rdp"]["1e-06"]
    assert got == RDP.epsilon(Composition.of([(r, 3), (z, 1)]), 1e-6)
    # dp-accounting: zCDP exports as ZCDpEvent and back; listed-order RDP is refused
    comp = Composition.of([(z, 3)])
    assert Composition.from_dp_event(comp.to_dp_event()) == comp
    with pytest.raises(DpledgerError, match="no event for an RDP curve"):
        Composition.of([r]).to_dp_event()
    for bad in ("rdp:orders=2;1,values=1;2", "rdp:orders=2;4,values=2;1", "rdp:orders=1;2,values=1;2",
                "rdp:orders=2;4,values=1", "rdp:orders=2;x,values=1;2", "zcdp:rho=0",
                "zcdp:rho=nan", "rdp:orders=2;4,values=-1;1"):
        with pytest.raises(DpledgerError):
            parse_release_spec(bad)


def test_ledger_worst_reward_with_curve_releases():
    """Keys ∞ for releases with no GDP μ rank nothing: the worst reward is found by ε(δ)."""
    led = RewardLedger()
    led.add(0, 0, 0, 5, GaussianRelease.from_mu(1.0), count=100)      # μ = 10
    led.add(0, 0, 5, 6, ZcdpRelease(1e-4))
    led.add(0, 1, 0, 2, RdpRelease((2.0, 4.0), (1e-3, 2e-3)))
    led.set_stream_length(0, 0, 6)
    led.set_stream_length(0, 1, 2)
    w = led.worst_reward([1e-6])
    assert (w.reward.arm, w.reward.index) == (0, 0)
    led.add(0, 1, 0, 1, ZcdpRelease(80.0))                             # now arm 1 is worse
    w = led.worst_reward([1e-6])
    assert (w.reward.arm, w.reward.index) == (1, 0)
    best = BestAccountant()
    assert best.epsilon(w.composition, 1e-6, True) > best.epsilon(
        Composition.of([(GaussianRelease.from_mu(1.0), 100)]), 1e-6, True)


def test_budgets_with_curve_releases(tmp_path):
    from dpledger.accounting.filters import BudgetExceeded
    from dpledger.accounting.store import LedgerStore, verify_store
    s = LedgerStore.create(tmp_path / "z.db", "eps=1,delta=1e-6")
    s.append(arm=0, start=0, stop=3, release=ZcdpRelease(0.01), count=2)
    with pytest.raises(BudgetExceeded, match="no finite zcdp cost"):
        s.append(arm=0, start=0, stop=3, release=RdpRelease((2.0,), (0.01,)))
    with pytest.raises(BudgetExceeded, match="index=0"):
        s.append(arm=0, start=0, stop=1, release=ZcdpRelease(0.02))
    assert s.n_records() == 1 and verify_store(tmp_path / "z.db") == []
    st_ = s.status([1e-6])
    assert [Composition.from_json(c["composition"]) for c in st_["compositions"]] == \
        [Composition.of([(ZcdpRelease(0.01), 2)])]
    s.close()
