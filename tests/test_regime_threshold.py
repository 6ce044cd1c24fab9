"""Azize & Basu 2022's location of the regime threshold (Fig. 3, ε ≈ 0.3): the empirical rule
and the predicted threshold it is judged beside (issue 34 §5)."""
from __future__ import annotations

import math

from dpledger.experiments import azize_basu_2022 as ab
from dpledger.experiments.claims_table import decider
from dpledger.experiments.overrides import NO_OVERRIDES


def _pts(pairs):
    return [(e, m, 0.0) for e, m in pairs]


def test_empirical_threshold_is_where_the_plateau_begins():
    ref = 100.0
    # falls, then within 1.25 × the reference from ε = 0.3 on
    assert ab.empirical_threshold(_pts([(0.1, 900), (0.3, 124), (1, 110), (10, 101)]), ref) == 0.3
    # a dip inside the high-privacy side does not count: the plateau must hold up to the end
    assert ab.empirical_threshold(_pts([(0.1, 120), (0.3, 400), (1, 110), (10, 101)]), ref) == 1
    # not even the largest ε within the factor: no plateau on this grid
    assert ab.empirical_threshold(_pts([(0.1, 900), (10, 126)]), ref) is None


def test_predicted_threshold_is_theorem_3s_kl_over_6_delta():
    """The predicted ε of Fig. 3's instance, recomputed: kl(0.1, 0.8)/(6·0.7)."""
    from dpledger.policies import regret_bounds
    kl = 0.1 * math.log(0.1 / 0.8) + 0.9 * math.log(0.9 / 0.2)
    got = regret_bounds.azize_basu_2022_thresholds(ab.FIG3_MEANS).value
    assert math.isclose(got, kl / (6 * 0.7), rel_tol=1e-12)



def _ref(regret: float):
    # the fields final_regret reads
    return {"final": {"mean": regret, "std": 0.0}, "runs": 20, "horizon": 10_000_000}


def test_claim_confirms_a_plateau_from_0_3_and_refutes_one_from_10(monkeypatch):
    monkeypatch.setattr(ab, "final_regret", lambda rep: (rep["final"]["mean"], 0.0))
    spec = ab.INSTANCES["fig3"]
    near = ab.threshold_claim(_pts([(0.05, 900), (0.2, 300), (0.3, 120), (1, 110), (10, 101)]),
                              _ref(100.0), spec, NO_OVERRIDES)
    assert near.confirmed is True and "ε̂ = 0.3" in decider(near.evidence)
    far = ab.threshold_claim(_pts([(0.05, 11470), (0.3, 2867), (5, 627), (10, 385)]),
                             _ref(354.0), spec, NO_OVERRIDES)
    assert far.confirmed is False and "ε̂ = 10" in decider(far.evidence)
    assert "0.273" in far.evidence          # Theorem 3's prediction, beside the measurement
    none = ab.threshold_claim(_pts([(0.05, 900), (10, 500)]), _ref(100.0), spec, NO_OVERRIDES)
    assert none.confirmed is False and "above the grid" in decider(none.evidence)
