"""Per-reward privacy filters (issue 15 §3).

* a fully adaptive Gaussian analyst stopped by the GDP filter Σμ_t² ≤ M² (the store's budget
  costs and limit): its exact privacy-loss transcript, simulated, gives δ(ε) within the
  M-GDP curve of Smith & Thakurta's theorem (Hoeffding bound, error rate 1e-6 per check) —
  and the same check has power: it rejects the curve of a smaller μ;
* a sequence built to slip past a naive per-record filter (one that checks the reward a
  record starts at) drives a reward past its budget; the store's filter stops it, at the
  reward the naive one missed;
* an adaptive sequence admitted by a naive "(ε, δ) after the fact" filter (best accountant,
  PLD included, on the realized composition) is stopped by the zCDP filter, whose guarantee
  at the stopping point is checked (spent ρ ≤ ρ*, conversion of ρ* ≤ ε);
* costs: a filter's unit costs are Composition's per-currency totals (one formula).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accounting.composition import Composition
from dpledger.accounting.filters import Budget, BudgetExceeded, zcdp_epsilon
from dpledger.accounting.gdp import gdp_delta
from dpledger.accounting.releases import (DiscreteGaussianRelease, GaussianRelease,
                                          LaplaceRelease, NonPrivateRelease, PureEpsilonRelease)
from dpledger.accounting.store import LedgerStore


def _adaptive_gaussian_losses(budget: Budget, n: int, seed: int, neighbour: bool) -> np.ndarray:
    """Privacy losses L = log dP_D/dP_D' of the whole transcript of a fully adaptive
    analyst, ``n`` independent trials, data D (mean 0) or D' (mean 1, ``neighbour``).

    Each step releases the count plus N(0, 1/μ_t²) (sensitivity 1).  The analyst picks μ_t
    from the last output: 0.7 when it exceeded 0.5, else 0.3; when that does not fit the
    budget it tries 0.3; when nothing fits it stops.  Admission is the store's rule with the
    store's numbers: spent + cost ≤ limit, cost = ``budget.cost(Gaussian(μ), 1)``."""
    rng = np.random.default_rng(seed)
    mus = {m: budget.cost(GaussianRelease.from_mu(m), 1) for m in (0.3, 0.7)}
    mu_of = {c: math.sqrt(c) for c in mus.values()}          # μ actually used: √(μ²) ≥ asked
    spent = np.zeros(n)
    loss = np.zeros(n)
    last = np.zeros(n)
    active = np.ones(n, dtype=bool)
    while active.any():
        want = np.where(last > 0.5, mus[0.7], mus[0.3])
        fits = spent + want <= budget.limit
        want = np.where(fits, want, mus[0.3])
        active &= spent + want <= budget.limit
        if not active.any():
            break
        mu = np.where(want == mus[0.7], mu_of[mus[0.7]], mu_of[mus[0.3]])
        z = rng.standard_normal(n) + (mu if neighbour else 0.0)     # z = μ·y, y the output
        step = mu * mu / 2.0 - mu * z                                # log-likelihood ratio
        loss = np.where(active, loss + step, loss)
        spent = np.where(active, spent + want, spent)
        last = np.where(active, z / mu, last)
    return loss


def test_gdp_filter_matches_smith_thakurta_bound():
    """δ(ε) = E_D[(1 − e^{ε−L})⁺] (and the other direction with −L under D'), each a mean of
    values in [0, 1]: Hoeffding gives |mean − δ| ≤ t = √(log(1/α)/(2n)), α = 1e-6."""
    budget = Budget.parse("mu=1")
    n, alpha = 400_000, 1e-6
    t = math.sqrt(math.log(1 / alpha) / (2 * n))
    l_d = _adaptive_gaussian_losses(budget, n, 1, neighbour=False)
    l_dp = _adaptive_gaussian_losses(budget, n, 2, neighbour=True)
    for eps in (0.25, 0.5, 1.0, 2.0):
        for est in (np.mean(np.maximum(0.0, -np.expm1(eps - l_d))),
                    np.mean(np.maximum(0.0, -np.expm1(eps + l_dp)))):
            assert est - t <= gdp_delta(eps, 1.0), (eps, est)
            # power: the transcript is not 0.8-GDP, and the check sees it
            assert est - t > gdp_delta(eps, 0.8) or eps >= 2.0, (eps, est)


def test_naive_per_record_filter_is_slipped_valid_one_stops_it(tmp_path):
    """Overlapping ranges: a filter that only checks the reward a record starts at admits a
    record that takes a reward *inside* its range past the budget."""
    budget = Budget.parse("eps=1")
    lap = LaplaceRelease.from_epsilon(0.5)
    seq = [(0, 0, 5, 10, lap, 1), (0, 0, 5, 10, lap, 1), (0, 0, 0, 6, lap, 1)]

    naive: dict[int, float] = {}
    for _, _, s, e, rel, c in seq:                      # naive: start reward only
        if naive.get(s, 0.0) + budget.cost(rel, c) <= budget.limit:
            for i in range(s, e):
                naive[i] = naive.get(i, 0.0) + budget.cost(rel, c)
    assert max(naive.values()) == 1.5                   # reward 5 is past the budget

    store = LedgerStore.create(tmp_path / "f.db", budget)
    store.append_many([seq[0]])
    store.append_many([seq[1]])
    with pytest.raises(BudgetExceeded) as err:
        store.append_many([seq[2]])
    assert err.value.index == 5 and err.value.spent == 1.0
    assert store.status()["budget_spent"] == 1.0
    store.close()


def test_after_the_fact_filter_is_stopped_by_the_zcdp_filter(tmp_path):
    """The analyst adds Laplace releases while the best non-adaptive accountant (PLD
    included) says the realized composition is (ε, δ)-DP — a filter with no fully adaptive
    theorem behind it.  The zCDP filter stops the same sequence earlier, and where it stops
    its guarantee holds: spent ρ ≤ ρ*, and ρ*-zCDP converts to ≤ ε at δ."""
    from dpledger.accounting.accountants import BestAccountant
    eps, delta = 1.0, 1e-6
    budget = Budget.parse(f"eps={eps},delta={delta}")
    best = BestAccountant()
    lap = LaplaceRelease.from_epsilon(0.2)
    naive_seq = []
    while best.epsilon(Composition.of([(lap, len(naive_seq) + 1)]), delta) <= eps:
        naive_seq.append(lap)
    assert len(naive_seq) >= 5
    store = LedgerStore.create(tmp_path / "z.db", budget)
    admitted = 0
    with pytest.raises(BudgetExceeded) as err:
        for rel in naive_seq:
            store.append(arm=0, start=0, stop=1, release=rel)
            admitted += 1
    assert admitted < len(naive_seq)
    spent = store.status()["budget_spent"]
    assert spent <= budget.limit < spent + err.value.cost
    assert zcdp_epsilon(budget.limit, delta) <= eps
    # the naive transcript is beyond what the zCDP filter theorem certifies at (ε, δ)
    assert Composition.of([(lap, len(naive_seq))]).zcdp_rho() > budget.limit
    store.close()


def test_unit_costs_are_compositions_totals():
    rels = [LaplaceRelease.from_epsilon(0.3), GaussianRelease.from_mu(0.4),
            PureEpsilonRelease(0.7), DiscreteGaussianRelease(sigma=3.0), NonPrivateRelease()]
    b_pure, b_gdp, b_z = (Budget.parse(x) for x in ("eps=1", "mu=1", "eps=1,delta=1e-5"))
    for r in rels:
        c = Composition.of([(r, 1)])
        assert b_pure.unit_cost(r) == c.pure_epsilon()
        assert b_gdp.unit_cost(r) == c.gdp_mu2()
        assert b_z.unit_cost(r) == c.zcdp_rho()
        # count × cost is the exact product rounded up: equal to the composition of count
        assert b_z.cost(r, 7) >= Composition.of([(r, 7)]).zcdp_rho() or math.isinf(b_z.cost(r, 7))
    assert math.isinf(b_pure.unit_cost(GaussianRelease.from_mu(0.1)))
    assert math.isinf(b_gdp.unit_cost(DiscreteGaussianRelease(sigma=3.0)))
    assert math.isinf(b_z.unit_cost(NonPrivateRelease()))
    assert Budget.parse("mu=0.5").limit == 0.25
