"""Issue 12 §1, "a public parameter voids the certificate": the regressions.

The hidden ``noise`` multiplier (``--set noise=…``, ``make_policy(..., noise=…)``, a run.json's
params) scaled every Laplace draw while the releases, the certificate and ``verify`` ignored it:
``run lazy-dp-ts --set noise=0`` reported certificate = realized = theorem = 1 with "checks
hold", ``dp-ts --set noise=0.001 --set epsilon=0.5`` certified 0.5 while drawing noise of ε ≈ 500,
``noise=-3`` was accepted.  No public path may change what is drawn without the releases
changing with it; the per-draw property over every registered policy and parameter is in
``test_policies_draws.py``, the planted-defect policy in ``planted.py``.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpledger.errors import DpledgerError
from dpledger.policies.registry import available, make_policy, policy_class


def _main(*args) -> int:
    from dpledger.cli import main
    try:
        return main(list(args))
    except SystemExit as exc:
        return exc.code


def _one_error_line(capsys, *words):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert all(w in err[0] for w in words), err[0]


@pytest.mark.parametrize("argv", [
    # the three repros, verbatim apart from the output path
    ["run", "lazy-dp-ts", "--set", "noise=0", "--horizon", "10000", "--runs", "5"],
    ["run", "dp-ts", "--set", "noise=0.001", "--set", "epsilon=0.5", "--horizon", "2000"],
    ["run", "lazy-dp-ts", "--set", "noise=-3", "--horizon", "2000"],
    # the same switch through the other commands that build a policy
    ["audit", "dp-se", "--set", "noise=0", "--trials", "500", "--horizon", "3000"],
    ["audit", "lazy-dp-ts", "--set", "noise=0.5", "--trials", "500", "--mode", "whitebox"],
])
def test_cli_refuses_the_noise_multiplier(argv, tmp_path, capsys):
    out = tmp_path / "n0.json"
    assert _main(*argv, "--out", str(out), "--quiet") == 2
    _one_error_line(capsys, "noise")
    assert not out.exists()


@pytest.mark.parametrize("name", available())
@pytest.mark.parametrize("value", [0, 0.001, -3, 1.0])
def test_api_refuses_the_noise_multiplier(name, value):
    """make_policy and the class constructor share Param validation: ``noise`` is no
    parameter of any registered policy, not even at its old default 1."""
    with pytest.raises(DpledgerError, match="no parameter 'noise'"):
        make_policy(name, noise=value)
    with pytest.raises(DpledgerError, match="no parameter 'noise'"):
        policy_class(name)(noise=value)
    assert "noise" not in {p.name for p in policy_class(name).params_spec}


def test_run_json_with_noise_param_does_not_verify(tmp_path, capsys):
    """A run.json whose params carry ``noise`` (as every n0.json did) no longer verifies."""
    path = tmp_path / "run.json"
    assert _main("run", "lazy-dp-ts", "--horizon", "200", "--runs", "2", "--out", str(path),
                 "--quiet") == 0
    assert _main("verify", str(path)) == 0
    capsys.readouterr()
    rep = json.loads(path.read_text())
    for value in (0, 0.001, -3):
        rep["policy"]["params"]["noise"] = value
        bad = tmp_path / f"n{value}.json"
        bad.write_text(json.dumps(rep))
        # a readable run.json that does not verify: a finding (exit 1), naming the parameter
        assert _main("verify", str(bad)) == 1, value
        err = capsys.readouterr().err
        assert "'noise' is not a public parameter" in err and "Traceback" not in err


def test_cli_subprocess_exit_status(tmp_path):
    """The real exit status and stderr of the first repro (no traceback)."""
    out = subprocess.run([sys.executable, "-m", "dpledger", "run", "lazy-dp-ts", "--set",
                          "noise=0", "--horizon", "10000", "--runs", "5", "--out",
                          str(tmp_path / "n0.json")], capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "noise" in out.stderr
    assert not (tmp_path / "n0.json").exists()


@pytest.mark.parametrize("name", ["adap-ucb", "adap-klucb", "dp-se", "anytime-lazy-ucb"])
def test_write_actions_switch_is_gone(name, tmp_path, capsys):
    """The other hidden switch with a public path: ``write_actions=false`` left the actions
    array unfilled in the uniform kernel that audits run, so ``audit adap-ucb --set
    write_actions=false`` scored all-zero action sequences on both streams and reported
    ε_lower = 0 — a vacuous audit that passed (measured: 0.33 with the switch on, 0.0 off, 2000
    trials, seed 1) — while ``run`` ignored it silently.  No benchmark used it; it is removed."""
    with pytest.raises(DpledgerError, match="no parameter 'write_actions'"):
        make_policy(name, write_actions=False)
    out = tmp_path / "a.json"
    assert _main("audit", name, "--set", "write_actions=false", "--trials", "100",
                 "--out", str(out), "--quiet") == 2
    _one_error_line(capsys, "write_actions")


def test_hidden_parameters_left():
    """What hidden parameters remain, and that each is a speed switch the per-draw test shows to
    draw identically (test_policies_draws.test_hidden_switches_draw_identically)."""
    hidden = sorted({(p.name) for n in available() for p in policy_class(n).params_spec
                     if p.hidden})
    assert hidden == ["fast", "threshold_test"]
