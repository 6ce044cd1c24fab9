"""R2 for the accounting layer and the compose CLI: every bad input is a clear error."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from dpledger.accounting import calibration, gdp
from dpledger.accounting.accountants import get_accountant
from dpledger.accounting.certificate import Certificate, Theorem
from dpledger.accounting.composition import Composition
from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.releases import (DiscreteLaplaceRelease, GaussianRelease, LaplaceRelease,
                                          PureEpsilonRelease, parse_release_spec, release_from_json)
from dpledger.accounting.schema import PrivacySummary, parse_deltas
from dpledger.errors import DpledgerError

LAP = Composition.of([(LaplaceRelease.from_epsilon(1.0), 2)])


def _ledger_bad_range():
    RewardLedger().add(0, 0, 5, 3, LaplaceRelease.from_epsilon(1.0))


def _ledger_bad_id():
    RewardLedger().append_rows(0, 0, 0, 1, 7, 1)


def _ledger_zero_count():
    RewardLedger().add(0, 0, 0, 1, LaplaceRelease.from_epsilon(1.0), 0)


def _tree_too_many():
    RewardLedger().add_tree(0, 0, 0, 8, 3, LaplaceRelease.from_epsilon(1.0))


def _prefix_nan():
    RewardLedger().add_growing_prefix(0, 0, [3], [1], [math.nan])


BAD = [
    ("epsilon zero", lambda: LaplaceRelease.from_epsilon(0.0), "epsilon must be > 0"),
    ("epsilon negative", lambda: PureEpsilonRelease(-1.0), "epsilon must be > 0"),
    ("epsilon NaN", lambda: LaplaceRelease.from_epsilon(math.nan), "NaN"),
    ("epsilon string", lambda: PureEpsilonRelease("1"), "must be a number"),
    ("scale inf", lambda: LaplaceRelease(scale=math.inf), "finite"),
    ("negative sensitivity", lambda: LaplaceRelease(scale=1.0, sensitivity=-1.0), "> 0"),
    ("sigma zero", lambda: GaussianRelease(sigma=0.0), "> 0"),
    ("fractional discrete sensitivity", lambda: DiscreteLaplaceRelease(scale=2.0, sensitivity=1.5),
     "integer"),
    ("delta zero", lambda: get_accountant("gdp").epsilon(LAP, 0.0), r"delta must lie in \(0, 1\)"),
    ("delta one", lambda: get_accountant("pure").epsilon(LAP, 1.0), r"\(0, 1\)"),
    ("delta NaN", lambda: gdp.gdp_epsilon(1.0, math.nan), "NaN"),
    ("mu negative", lambda: gdp.gdp_delta(1.0, -1.0), "mu must be > 0"),
    ("negative epsilon in delta()", lambda: get_accountant("rdp").delta(LAP, -0.5), ">= 0"),
    ("unknown accountant", lambda: get_accountant("moments"), "unknown accountant"),
    ("unknown release name", lambda: parse_release_spec("cauchy:scale=1"), "unknown release kind"),
    ("malformed release spec", lambda: parse_release_spec("laplace:eps"), "key=value"),
    ("non-numeric parameter", lambda: parse_release_spec("laplace:eps=abc"), "must be a number"),
    ("fractional count", lambda: parse_release_spec("laplace:eps=1,count=2.5"), "integer"),
    ("zero count", lambda: Composition.of([(LaplaceRelease.from_epsilon(1.0), 0)]), ">= 1"),
    ("eps with scale", lambda: parse_release_spec("laplace:eps=1,scale=2"), "cannot be combined"),
    ("release JSON without kind", lambda: release_from_json({"scale": 1.0}), "kind"),
    ("release JSON unknown param", lambda: release_from_json({"kind": "laplace", "b": 1}),
     "bad parameters"),
    ("composition JSON not a list", lambda: Composition.from_json({"release": 1}), "list"),
    ("privacy block malformed", lambda: PrivacySummary.from_json({"pure_epsilon": 1.0}),
     "malformed"),
    ("privacy block non-number", lambda: PrivacySummary.from_json(
        {"pure_epsilon": "x", "gdp_mu": None, "epsilon_at_delta": {}}), "expected a number"),
    ("empty delta list", lambda: parse_deltas([]), "at least one delta"),
    ("inverted ledger range", _ledger_bad_range, "start < stop"),
    ("release id not interned", _ledger_bad_id, "not interned"),
    ("zero row count", _ledger_zero_count, ">= 1"),
    ("tree holding too many items", _tree_too_many, "at most 7 items"),
    ("NaN mu2 in prefix rows", _prefix_nan, "finite mu2"),
    ("malformed ledger JSON", lambda: RewardLedger.from_json({"releases": []}), "malformed ledger"),
    ("bounded certificate without candidates", lambda: Certificate(), "at least one candidate"),
    ("theorem without value", lambda: Theorem("p", "Thm 1", "s", "faithful"), "must state"),
    ("unknown provenance", lambda: Theorem("p", "Thm 1", "s", "guess", pure_epsilon=1.0),
     "provenance"),
    ("calibration impossible", lambda: calibration.calibrate_to_epsilon(
        lambda b: Composition.of([LaplaceRelease(scale=b)]), 1e-3, 1e-6, 1.0, 2.0),
     "no parameter"),
    ("gaussian sigma needs a target", lambda: calibration.gaussian_sigma(epsilon=1.0), "give mu"),
]


@pytest.mark.parametrize("name,call,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_clear_error(name, call, message):
    with pytest.raises(DpledgerError, match=message):
        call()


def test_table_is_large_enough():
    assert len(BAD) >= 30


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dpledger", *args], capture_output=True, text=True)


CLI_BAD = [
    ("compose", "laplace:eps=0"),
    ("compose", "laplace:eps=nan"),
    ("compose", "laplace:eps=1", "--delta", "0"),
    ("compose", "laplace:eps=1", "--delta", "abc"),
    ("compose", "bogus:eps=1"),
    ("compose",),
    ("nonexistent-command",),
]


@pytest.mark.parametrize("args", CLI_BAD, ids=[" ".join(a) for a in CLI_BAD])
def test_cli_bad_input_exits_2_with_one_line(args):
    out = _cli(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stdout == ""


def test_cli_compose_json_keys_and_values():
    out = _cli("compose", "laplace:eps=0.5", "gaussian:sigma=2,sensitivity=1,count=4",
               "--delta", "1e-6", "--delta", "1e-3", "--json")
    assert out.returncode == 0, out.stderr
    block = json.loads(out.stdout)
    assert list(block)[:6] == ["pure_epsilon", "pure_epsilon_status", "gdp_mu", "gdp_mu_status",
                               "zcdp_rho", "zcdp_rho_status"]
    assert block["pure_epsilon"] is None and block["pure_epsilon_status"] == "unbounded"
    assert block["gdp_mu"] is None and block["gdp_mu_status"] == "not_applicable"
    # zCDP: Gaussian 4·(1/2)²/2 + Laplace's own ρ, its KL ε + e^{−ε} − 1 (issue 12 §3: no
    # longer randomized response's ε·tanh(ε/2)), certified within 2e-3 above
    exact = 4 * 0.25 / 2 + 0.5 + math.expm1(-0.5)
    assert exact <= block["zcdp_rho"] <= exact * (1 + 2e-3)
    assert set(block["epsilon"]) == {"pure", "gdp", "rdp", "pld", "approx"}
    assert list(block["epsilon_at_delta"]) == ["0.001", "1e-06"]
    for k, v in block["epsilon_at_delta"].items():
        finite = [x for x in (block["epsilon"][a][k] for a in block["epsilon"]) if x is not None]
        assert v == min(finite)
    assert PrivacySummary.from_json(block).composition == Composition.of(
        [(LaplaceRelease.from_epsilon(0.5), 1), (GaussianRelease(sigma=2.0), 4)])


def test_cli_compose_table():
    out = _cli("compose", "laplace:eps=1,count=3")
    assert out.returncode == 0
    assert "pure ε = 3" in out.stdout and "best" in out.stdout
