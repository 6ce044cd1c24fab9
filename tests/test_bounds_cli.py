"""``dpledger bounds`` and ``--bounds`` on the regret plots (issue 23 §2): the printed and JSON
bounds are the functions' values (recomputed here from the papers' formulas for two of them),
and every bad input is one line on stderr with exit status 2, before any simulation."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from dpledger.cli import main


def _json(capsys, argv) -> dict:
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_values_are_the_papers_formulas(capsys):
    out = _json(capsys, ["bounds", "adap-ucb", "--horizon", "1e6", "--set", "epsilon=0.5"])
    assert out["horizon"] == 10 ** 6 and out["privacy_model"]["kind"] == "pure"
    assert out["privacy_model"]["epsilon"] == 0.5
    by = {b["key"]: b for b in out["bounds"]}
    means = [0.75, 0.625, 0.5, 0.375, 0.25]
    lnT = math.log(1e6)
    thm7 = sum(16 * 3.1 / min(0.75 - m, 0.5) * lnT + 3 * 3.1 / 0.1 for m in means[1:])
    assert by["azize-basu-2022/thm7"]["value"] == pytest.approx(thm7, rel=1e-12)
    assert by["azize-basu-2022/thm7"]["status"] == "exact_constants"
    thm2 = max((1e6 * 4) ** 0.5 / 27, 4 / (131 * 0.5))
    assert by["azize-basu-2022/thm2"]["value"] == pytest.approx(thm2, rel=1e-12)
    assert by["azize-basu-2022/adap-minimax"]["value"] is None
    assert by["azize-basu-2022/adap-minimax"]["status"] == "order_only"
    assert by["azize-basu-2022/thm3"]["status"] == "asymptotic"
    assert by["azize-basu-2022/thm3"]["epsilon"] == 0.5
    assert len(by["azize-basu-2022/thm3"]["terms"]) == 4
    assert out["instance"] == {"family": "bernoulli", "params": [[m] for m in means],
                               "means": means}


def test_text_output_names_status_and_source(capsys):
    assert main(["bounds", "lazy-dp-ts", "--set", "epsilon=0.1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("lazy-dp-ts(epsilon=0.1) on bernoulli means=[0.75, 0.625, 0.5, "
                           "0.375, 0.25], T=10000, K=5\n")
    assert "Hu & Hegde 2022, Theorem 4  [order only]" in text
    assert "Azize & Basu 2022, Theorem 3, eq. (4)  [asymptotic]" in text
    assert "Theorem 4, eq. (5)" not in text          # the linear bound is for linear policies
    assert "ε = 0.1: high privacy for arms 3, 4" in text
    assert "the paper prints ε* = (131/27)" not in text      # notes other than regimes: JSON


def test_gdp_and_non_private_policies_get_non_private_lower_bounds(capsys):
    for name, kind in (("dp-ts-ucb", "gdp"), ("ts-gaussian", "gdp"), ("klucb", "none")):
        out = _json(capsys, ["bounds", name, "--env", "truncexp", "--rates", "0.1,1,2"])
        keys = {b["key"] for b in out["bounds"]}
        assert out["privacy_model"]["kind"] == kind and out["privacy_model"]["epsilon"] is None
        assert "azize-basu-2022/thm3" not in keys and "lai-robbins-1985" in keys


def test_beta_instance(capsys):
    out = _json(capsys, ["bounds", "dp-se", "--env", "beta", "--ab", "2:3,3:2,1:1",
                         "--set", "epsilon=0.05"])
    by = {b["key"]: b for b in out["bounds"]}
    assert by["azize-basu-2022/thm3"]["value"] > by["lai-robbins-1985"]["value"]
    assert by["azize-2025/lower"]["value"] is None and by["azize-2025/lower"]["unmet"]


BAD = [
    (["bounds", "nope"], "unknown policy"),
    (["bounds", "lazy-dp-ts", "--set", "epsilon=-1"], "epsilon must be > 0"),
    (["bounds", "lazy-dp-ts", "--set", "eps"], "--set expects key=value"),
    (["bounds", "lazy-dp-ts", "--horizon", "3"], "--horizon 3 is shorter than the number of arms"),
    (["bounds", "lazy-dp-ts", "--horizon", "1e30"], "--horizon must be <= 1e9"),
    (["bounds", "lazy-dp-ts", "--horizon", "2.5"], "--horizon must be an integer"),
    (["bounds", "lazy-dp-ts", "--means", "0.5,0.5"], "no suboptimal arm"),
    (["bounds", "lazy-dp-ts", "--means", "0.5,1.5"], "must lie in [0, 1]"),
    (["bounds", "lazy-dp-ts", "--means", "0.5"], "at least 2 arms"),
    (["bounds", "lazy-dp-ts", "--env", "truncexp"], "needs --rates"),
    (["bounds", "lazy-dp-ts", "--rates", "1,2"], "--rates describes --env truncexp"),
    (["bounds", "lazy-dp-ts", "--env", "beta", "--ab", "1:1,2:x"], "--ab must be a number"),
    (["bounds", "lazy-dp-ts", "--env", "beta", "--ab", "1e-5:1,2:2"], "computed for parameters"),
    (["bounds", "lazy-dp-ts", "--env", "table"], "invalid choice"),
    (["bounds", "linucb", "--dimension", "0"], "--dimension must be >= 1"),
    (["bounds", "linucb", "--dimension", "x"], "--dimension must be an integer"),
    (["bounds", "lazy-dp-ts", "--dimension", "3"], "--dimension is for linear and contextual"),
]


@pytest.mark.parametrize("argv,fragment", BAD, ids=[" ".join(a[1:]) for a, _ in BAD])
def test_bad_values_one_line_exit_2(argv, fragment, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:       # argparse's own refusals
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and fragment in lines[0], err
    assert "Traceback" not in err


def test_bad_value_as_a_process():
    res = subprocess.run([sys.executable, "-m", "dpledger", "bounds", "dp-ucb", "--set",
                          "epsilon=0"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpledger bounds: error: --set epsilon=0: epsilon must be > 0")


# ---- --bounds on the regret plots ---------------------------------------------------------------

def test_run_bounds_needs_plot_and_a_family_before_simulating(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "lazy-dp-ts", "--horizon", "50", "--runs", "1", "--out", str(out),
                 "--bounds"]) == 2
    assert "add --plot FILE" in capsys.readouterr().err
    table = tmp_path / "t.csv"
    table.write_text("0.5,0.2\n0.3,0.4\n0.1,0.9\n")
    assert main(["run", "lazy-dp-ts", "--horizon", "3", "--runs", "1", "--env", "table",
                 "--table", str(table), "--out", str(out), "--plot", str(tmp_path / "p.png"),
                 "--bounds"]) == 2
    assert "a fixed reward table has none" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["t.csv"]


def test_plot_bounds(tmp_path, capsys):
    runs = []
    for name, eps in (("adap-ucb", "0.5"), ("lazy-dp-ts", "0.5"), ("dp-klucb", "0.2")):
        path = tmp_path / f"{name}.json"
        assert main(["run", name, "--horizon", "2000", "--runs", "2", "--set", f"epsilon={eps}",
                     "--out", str(path), "--quiet", "--ledger-out", "none"]) == 0
        runs.append(str(path))
    png = tmp_path / "p.png"
    assert main(["plot", *runs, "--out", str(png), "--bounds"]) == 0
    assert png.stat().st_size > 0
    # run --plot --bounds writes the same kind of figure in one go
    assert main(["run", "adap-ucb", "--horizon", "300", "--runs", "1", "--out",
                 str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png"), "--bounds",
                 "--quiet"]) == 0
    assert (tmp_path / "r.png").stat().st_size > 0


def test_plot_bounds_refuses_a_table_run_in_one_line(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("0.5,0.2\n0.3,0.4\n0.1,0.9\n")
    run = tmp_path / "r.json"
    assert main(["run", "lazy-dp-ts", "--horizon", "3", "--runs", "1", "--env", "table",
                 "--table", str(table), "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["plot", str(run), "--out", str(tmp_path / "p.png"), "--bounds"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a fixed reward table" in err[0]
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("edit,fragment", [
    (lambda r: r["environment"].update(range=[0]), "malformed run.json"),
    (lambda r: r["environment"].update(range=[-1, 2]), "stated for rewards in [0, 1]"),
    (lambda r: r["environment"].update(name="truncexp"), "malformed run.json"),
    (lambda r: r["policy"]["params"].update(alpha="zz"), "--bounds: alpha must be a number"),
    (lambda r: r["policy"].update(name="mine"), "--bounds: unknown policy 'mine'"),
])
def test_plot_bounds_refuses_a_run_it_cannot_read(edit, fragment, tmp_path, capsys):
    run = tmp_path / "r.json"
    assert main(["run", "adap-ucb", "--horizon", "100", "--runs", "1", "--out", str(run),
                 "--quiet"]) == 0
    rep = json.loads(run.read_text())
    edit(rep)
    run.write_text(json.dumps(rep))
    capsys.readouterr()
    assert main(["plot", str(run), "--out", str(tmp_path / "p.png"), "--bounds"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not (tmp_path / "p.png").exists()
