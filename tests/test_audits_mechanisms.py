"""White-box audits of single mechanisms (issue #6, items 2, 3c-style under-noising, 3d).

* Tightness with 1e6 trials per side (cheap: vectorised draws): Laplace ε = 1 → ε_lower ≥ 0.98;
  Gaussian μ = 1 → μ_lower ≥ 0.98 (expected about 0.995 at this size).
* Under-noised Laplace (scale halved, true ε = 2, certificate 1) is flagged.
* Floating-point attack (Mironov 2012): numpy's float Laplace claimed at ε = 1
  audits far above 1; the exact CKS20 sampler does not.  A replay self-check guards the
  attack's reconstruction of numpy's arithmetic.
"""
from __future__ import annotations


import numpy as np
import pytest

from dpledger.accounting.schema import dumps
from dpledger.audits.mechanisms import (audit_gaussian, audit_laplace, float_attack_score,
                                        self_check, unreachable)
from dpledger.errors import DpledgerError


def test_laplace_tight_at_1e6():
    r = audit_laplace(1.0, 10 ** 6, seed=0)
    assert r.certificate["pure_epsilon"] == 1.0
    assert 0.98 <= r.epsilon_lower <= 1.0
    assert r.violation is False
    assert r.to_json()["ratio"] == pytest.approx(r.epsilon_lower)


def test_gaussian_tight_at_1e6():
    r = audit_gaussian(1.0, 10 ** 6, seed=0)
    j = r.to_json()
    assert j["certificate"]["gdp_mu"] == pytest.approx(1.0)
    assert 0.98 <= r.mu_lower <= 1.0
    assert j["ratio_currency"] == "mu" and j["delta"] == 1e-5
    assert j["epsilon_lower_label"] == "assumes GDP shape"
    # ε(δ = 1e-5) of 1-GDP is 4.377; the converted bound sits just below it
    assert 4.2 < j["epsilon_lower"] < 4.377
    assert 0 <= j["epsilon_lower_direct"] < j["epsilon_lower"]


def test_laplace_small_epsilon_stays_below():
    for eps in (0.25, 2.0):
        r = audit_laplace(eps, 20_000, seed=1)
        assert 0.5 * eps < r.epsilon_lower <= eps


@pytest.mark.audit_violations_expected(reason="an under-noised Laplace mechanism")
def test_under_noised_laplace_flagged():
    # noise scale 1/2 while the certificate claims ε = 1: true ε = 2
    r = audit_laplace(1.0, 10_000, scale=0.5, claimed=1.0, seed=2)
    assert r.certificate["pure_epsilon"] == 1.0
    assert r.epsilon_lower > 1.5 and r.violation is True


def test_mironov_replay_self_check():
    chk = self_check(n=2000, seed=99)
    assert chk["ok"], chk     # a failure means numpy's log/arithmetic differs on this platform


@pytest.mark.audit_violations_expected(reason="the floating-point attack on the float sampler")
def test_float_sampler_flagged_exact_sampler_not():
    n = 10_000
    flo = audit_laplace(1.0, n, sampler="float", attack=True, seed=3)
    # D′'s outputs are never in S (every output of loc = 1 is reachable at loc = 1) …
    counts = flo.to_json()["counts"]
    assert flo.epsilon_lower > 6.0, counts          # log(9000/3.69) ≈ 7.8 is the ceiling
    assert flo.violation is True
    exact = audit_laplace(1.0, n, sampler="exact", attack=True, seed=3, lattice_bits=20)
    assert exact.certificate["pure_epsilon"] == pytest.approx(1.0)
    assert exact.epsilon_lower <= 1.0 and exact.violation is False
    # the exact sampler's values audited directly also stay below ε
    assert audit_laplace(1.0, 5000, sampler="exact", seed=4).epsilon_lower <= 1.0


def test_attack_event_definition():
    rng = np.random.default_rng(8)
    y0 = rng.laplace(0.0, 1.0, 3000)
    y1 = 1.0 + rng.laplace(0.0, 1.0, 3000)
    assert not unreachable(y1, 1.0).any()
    assert unreachable(y0, 1.0).mean() > 0.5
    assert float_attack_score(y0, 1.0).tolist() == unreachable(y0, 1.0).astype(float).tolist()


def test_attack_needs_power_of_two_scale():
    with pytest.raises(DpledgerError):
        audit_laplace(3.0, 100, attack=True)


def test_mechanism_json_is_finite_and_reproducible():
    a = dumps(audit_laplace(1.0, 3000, seed=5).to_json())
    b = dumps(audit_laplace(1.0, 3000, seed=5).to_json())
    assert a == b
    c = dumps(audit_laplace(1.0, 3000, seed=6).to_json())
    assert a != c


@pytest.mark.parametrize("kw", [dict(epsilon=0.0), dict(epsilon=-1.0), dict(trials=1),
                                dict(trials=2.5), dict(sampler="bogus"), dict(confidence=2.0)])
def test_mechanism_bad_input(kw):
    args = dict(epsilon=1.0, trials=100)
    args.update(kw)
    with pytest.raises(DpledgerError):
        audit_laplace(**args)
