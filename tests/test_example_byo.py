"""The README's bring-your-own-policy example runs and is certified end to end."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from dpledger.errors import DpledgerError

PATH = pathlib.Path(__file__).resolve().parents[1] / "examples" / "bring_your_own_policy.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("byo_example", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_report_is_certified(example, capsys):
    report = example.main()
    priv = report["privacy"]
    assert priv["checks"]["realized_le_certificate"] and priv["checks"]["certificate_le_theorem"]
    assert priv["certificate"]["pure_epsilon"] == 0.5 == priv["realized"]["pure_epsilon"]
    assert "all numbers re-derived" in capsys.readouterr().out
    # the audit has power (Laplace ε = 0.5 releases are visible) yet stays below the certificate
    assert 0.2 < report["audit"]["epsilon_lower"] <= report["audit"]["certificate"] == 0.5


def test_example_ledger_matches_its_rule(example):
    from dpledger.policies.environments import bernoulli
    from dpledger.policies.simulator import simulate
    pol = example.PrivateExploreThenCommit(epsilon=1.0, m=10)
    res = simulate(pol, bernoulli([0.6, 0.5]), 200, seed=3, runs=2)
    rows = res.ledger.rows
    # one release per arm per run, over exactly the first m observations of that arm
    assert sorted(zip(rows["run"].tolist(), rows["arm"].tolist(),
                      strict=True)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert set(rows["start"].tolist()) == {0} and set(rows["stop"].tolist()) == {10}
    assert res.noise_draws == [2, 2]
    # rewards after exploration are touched by nothing
    assert res.ledger.composition_of(0, 0, 10).is_empty() or \
        res.ledger.composition_of(0, 1, 10).is_empty()


def test_registration_rules(example):
    from dpledger.policies.registry import make_policy, register_policy
    register_policy(example.PrivateExploreThenCommit)
    assert make_policy("private-etc", epsilon=2.0).params["epsilon"] == 2.0
    with pytest.raises(DpledgerError, match="taken by a built-in"):
        class Clash(example.PrivateExploreThenCommit):
            name = "ucb1"
        register_policy(Clash)
    with pytest.raises(DpledgerError, match="Policy subclass"):
        register_policy(np.ndarray)
