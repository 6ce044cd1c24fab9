"""Private contextual policies through the command line (issue 22 §4–§6): run + verify
(--resimulate: same seed, same bytes) for every private policy on every contextual environment,
float and exact samplers; tampering with a certificate caught; bad input one line, exit 2."""
from __future__ import annotations

import json

import pytest

from dpledger.cli import main

pytest.importorskip("sklearn")          # the supervised environment reads scikit-learn's data


ENVS = {
    "linear": ["--env", "linear", "--dim", "3", "--arms", "4", "--horizon", "300", "--delay", "4"],
    "table-disjoint": ["--env", "contextual-table", "--table", "{d}/dis.npz"],
    "table-shared": ["--env", "contextual-table", "--table", "{d}/sh.npz", "--horizon", "150"],
    "supervised": ["--env", "supervised", "--dataset", "iris", "--horizon", "300"],
    "replay": ["--env", "replay", "--log", "{d}/log.csv", "--delay", "2"],
}
POLICIES = {
    "jdp-linucb": ["jdp-linucb"],
    "jdp-wishart-accounted": ["jdp-linucb", "--set", "mode=wishart", "--set",
                              "calibration=accounted"],
    "dp-linucb-mt": ["dp-linucb-mt"],
    "dp-lints-mt-exact": ["dp-lints-mt", "--sampler", "exact"],
    "reward-dp-linucb": ["reward-dp-linucb", "--set", "epsilon=2"],
    "jdp-accounted-exact": ["jdp-linucb", "--set", "calibration=accounted", "--sampler", "exact"],
}


@pytest.mark.parametrize("pol", sorted(POLICIES))
@pytest.mark.parametrize("env", sorted(ENVS))
def test_run_verify_resimulate(pol, env, data, tmp_path, capsys):
    args = POLICIES[pol] + [a.format(d=data) for a in ENVS[env]]
    out = tmp_path / "run.json"
    assert main(["run", *args, "--runs", "2", "--seed", "1", "--out", str(out), "--quiet"]) == 0
    rep = json.loads(out.read_text())
    chk = rep["privacy"]["checks"]
    assert chk["realized_le_certificate"] and chk["certificate_le_theorem"]
    assert rep["sampler"] == ("exact" if "--sampler" in args else "float")
    extra = []
    for opt in ("--table", "--log"):
        if opt in args:
            extra = [opt, args[args.index(opt) + 1]]
    capsys.readouterr()
    assert main(["verify", str(out), "--resimulate", *extra]) == 0
    assert "resimulation (run.json and ledger file bytes identical)" in capsys.readouterr().out


def test_tampered_certificate_is_caught(data, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["run", "jdp-linucb", "--env", "linear", "--dim", "2", "--arms", "3",
                 "--horizon", "200", "--runs", "1", "--out", str(out), "--quiet"]) == 0
    rep = json.loads(out.read_text())
    rep["privacy"]["certificate"]["gdp_mu"] *= 0.5
    out.write_text(json.dumps(rep))
    capsys.readouterr()
    code = main(["verify", str(out)])
    cap = capsys.readouterr()
    assert code != 0 and "privacy.certificate.gdp_mu" in cap.out + cap.err


@pytest.mark.parametrize("args,message", [
    (["jdp-linucb", "--set", "mode=wishart", "--sampler", "exact"], "no exact-sampler form"),
    (["linucb", "--sampler", "exact"], "no exact-sampler form"),
    (["jdp-linucb", "--set", "delta=1.5"], "delta must lie in (0, 1)"),
    (["dp-linucb-mt", "--set", "epsilon0=-1"], "epsilon0 must be > 0"),
    (["reward-dp-linucb", "--rng", "os"], "is for deployment with the exact sampler"),
])
def test_bad_input_one_line_exit_2(args, message, tmp_path, capsys):
    out = tmp_path / "run.json"
    code = main(["run", *args, "--env", "linear", "--dim", "2", "--arms", "3", "--horizon",
                 "100", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_show_says_why_a_wishart_run_has_no_per_reward_plot(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["run", "jdp-linucb", "--set", "mode=wishart", "--env", "linear", "--dim", "2",
                 "--arms", "3", "--horizon", "200", "--runs", "1", "--out", str(out),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    assert "(ε, δ) statements only" in capsys.readouterr().out
