"""`dpledger run` / `verify` / `curve` / `show` end to end: keys, invariants, tampering, R2, R4."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dpledger", *args], capture_output=True,
                          text=True, cwd=cwd)


def _main(*args) -> int:
    from dpledger.cli import main
    try:
        return main(list(args))
    except SystemExit as exc:
        return exc.code


@pytest.fixture(scope="module")
def lazy_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    out = _cli("run", "lazy-dp-ts", "--set", "epsilon=0.5", "--horizon", "3000", "--runs", "3",
               "--seed", "7", "--out", str(d / "run.json"), "--quiet")
    assert out.returncode == 0, out.stderr
    return d


def test_run_json_keys(lazy_run):
    rep = json.loads((lazy_run / "run.json").read_text())
    for key in ("schema_version", "policy", "environment", "horizon", "runs", "seed", "regret",
                "privacy"):
        assert key in rep
    assert rep["policy"]["name"] == "lazy-dp-ts" and rep["policy"]["provenance"] == "faithful"
    assert rep["policy"]["params"]["epsilon"] == 0.5
    for block in ("theorem", "certificate", "realized"):
        b = rep["privacy"][block]
        assert {"pure_epsilon", "gdp_mu", "epsilon_at_delta"} <= set(b)
        assert list(b["epsilon_at_delta"]) == ["0.001", "1e-05", "1e-06", "1e-09"]
    assert rep["privacy"]["certificate"]["pure_epsilon"] == 0.5
    assert set(rep["privacy"]["realized"]["worst_reward"]) >= {"run", "round", "arm"}
    assert rep["privacy"]["checks"]["realized_le_certificate"] is True
    assert rep["privacy"]["checks"]["certificate_le_theorem"] is True
    curve = rep["regret"]["curve"]
    assert curve["t"][-1] == 3000 and 150 <= len(curve["t"]) <= 201
    mean, std = np.array(curve["mean"]), np.array(curve["std"])
    assert np.allclose(np.array(curve["hi"]) - mean, 1.96 * std / np.sqrt(3))
    text = (lazy_run / "run.json").read_text()
    assert "NaN" not in text and "Infinity" not in text and "/tmp" not in text


def test_verify_accepts_and_rejects_tampering(lazy_run):
    path = lazy_run / "run.json"
    assert _cli("verify", str(path)).returncode == 0
    rep = json.loads(path.read_text())
    tampered = [
        ("certificate", lambda r: r["privacy"]["certificate"].__setitem__("pure_epsilon", 0.4)),
        ("theorem", lambda r: r["privacy"]["theorem"].__setitem__("pure_epsilon", 0.25)),
        ("realized value", lambda r: r["privacy"]["realized"]["epsilon_at_delta"].__setitem__(
            "1e-06", 0.1)),
        ("realized composition", lambda r: r["privacy"]["realized"]["compositions"][-1][0]
         .__setitem__("count", 3)),
        ("checks", lambda r: r["privacy"]["checks"].__setitem__("certificate_le_theorem", False)),
        ("params", lambda r: r["policy"]["params"].__setitem__("epsilon", 0.6)),
    ]
    for name, change in tampered:
        bad = json.loads(json.dumps(rep))
        change(bad)
        p = lazy_run / f"bad-{name.replace(' ', '-')}.json"
        p.write_text(json.dumps(bad))
        assert _main("verify", str(p)) == 1, name
    out = _cli("verify", str(lazy_run / "bad-checks.json"))      # the real exit status
    assert out.returncode == 1 and "problem" in out.stderr


def test_curve_and_show(lazy_run):
    out = _cli("curve", str(lazy_run / "run.json"), "--deltas", "1e-3,1e-6")
    # 80 columns by default: each block's best valid value and its accountant
    assert out.returncode == 0 and "certificate  by" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 80
    out = _cli("curve", str(lazy_run / "run.json"), "--deltas", "1e-3,1e-6", "--wide")
    assert out.returncode == 0 and "certificate/best" in out.stdout
    out = _cli("show", str(lazy_run / "run.json"), "--plot", str(lazy_run / "show.png"))
    assert out.returncode == 0, out.stderr
    assert (lazy_run / "show.png").stat().st_size > 1000


def test_same_seed_same_bytes_also_with_two_workers(tmp_path):
    # one file name in three folders: run.json records its ledger file's name
    args = ["run", "lazy-dp-ts", "--horizon", "2000", "--runs", "4", "--seed", "3", "--quiet"]
    for d in "abc":
        (tmp_path / d).mkdir()
    assert _main(*args, "--out", str(tmp_path / "a" / "run.json")) == 0
    assert _main(*args, "--out", str(tmp_path / "b" / "run.json")) == 0
    c = _cli(*args, "--workers", "2", "--out", str(tmp_path / "c" / "run.json"))  # a fresh process
    assert c.returncode == 0, c.stderr
    ta, tb, tc = ((tmp_path / d / "run.json").read_bytes() for d in "abc")
    assert ta == tb == tc
    # the ledger files too, whatever the split of runs over workers (dp-ts: trees and segments)
    la, lc = ((tmp_path / d / "run.ledger.json").read_bytes() for d in "ac")
    assert la == lc
    dargs = ["run", "dp-ts", "--horizon", "3000", "--runs", "5", "--seed", "3", "--quiet"]
    assert _main(*dargs, "--out", str(tmp_path / "e.json")) == 0
    f = _cli(*dargs, "--workers", "2", "--out", str(tmp_path / "f.json"))
    assert f.returncode == 0, f.stderr
    assert (tmp_path / "e.ledger.json").read_bytes() == (tmp_path / "f.ledger.json").read_bytes()
    assert _main(*args[:-3], "--seed", "4", "--quiet", "--out", str(tmp_path / "d.json")) == 0
    assert (tmp_path / "d.json").read_bytes() != ta


BAD_RUNS = [
    ("unknown policy", ["run", "ucb2"]),
    ("unknown parameter", ["run", "lazy-dp-ts", "--set", "delta=0.1"]),
    ("epsilon zero", ["run", "lazy-dp-ts", "--set", "epsilon=0"]),
    ("epsilon NaN", ["run", "lazy-dp-ts", "--set", "epsilon=nan"]),
    ("epsilon text", ["run", "lazy-dp-ts", "--set", "epsilon=big"]),
    ("set without =", ["run", "lazy-dp-ts", "--set", "epsilon"]),
    ("horizon < arms", ["run", "ucb1", "--horizon", "3"]),
    ("horizon fractional", ["run", "ucb1", "--horizon", "10.5"]),
    ("runs zero", ["run", "ucb1", "--runs", "0"]),
    ("negative seed", ["run", "ucb1", "--seed", "-1"]),
    ("means outside range", ["run", "ucb1", "--means", "0.5,1.5"]),
    ("means NaN", ["run", "ucb1", "--means", "0.5,nan"]),
    ("one arm", ["run", "ucb1", "--means", "0.5"]),
    ("range inverted", ["run", "ucb1", "--range", "1,0"]),
    ("range excludes Bernoulli", ["run", "ucb1", "--range", "0.2,1"]),
    ("truncexp without rates", ["run", "ucb1", "--env", "truncexp"]),
    ("negative rate", ["run", "ucb1", "--env", "truncexp", "--rates", "1,-2"]),
    ("beta malformed", ["run", "ucb1", "--env", "beta", "--ab", "1:2:3,1:1"]),
    ("table missing", ["run", "ucb1", "--env", "table", "--table", "/nonexistent.csv"]),
    ("unknown env", ["run", "ucb1", "--env", "poisson"]),
    ("exact sampler unavailable", ["run", "ts-beta", "--sampler", "exact"]),
    ("os bits with the float sampler", ["run", "ts-gaussian", "--rng", "os"]),
    ("exact sampler on a noiseless policy", ["run", "ucb1", "--sampler", "exact"]),
    ("workers zero", ["run", "ucb1", "--workers", "0"]),
    ("verify missing file", ["verify", "/nonexistent/run.json"]),
]


@pytest.mark.parametrize("name,args", BAD_RUNS, ids=[b[0] for b in BAD_RUNS])
def test_run_bad_input_exits_2(name, args, tmp_path, capsys):
    """In process (the CLI's own error path; a subprocess test below covers the real exit)."""
    from dpledger.cli import main
    extra = []
    if args[0] == "run":
        if "--horizon" not in args and "--runs" not in args:
            extra += ["--horizon", "100", "--runs", "1"]
        extra += ["--out", str(tmp_path / "x.json")]
    try:
        code = main([*args, *extra])
    except SystemExit as exc:      # argparse errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "x.json").exists()


def test_run_bad_input_subprocess(tmp_path):
    out = _cli("run", "lazy-dp-ts", "--set", "epsilon=-1", "--out", str(tmp_path / "x.json"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "epsilon must be > 0" in out.stderr and not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("content,msg", [("0.5,0.2\n0.3,nan\n", "NaN"),
                                         ("0.5,0.2\n0.3,1.7\n", "outside the declared range"),
                                         ("0.5\n0.3\n", "at least 2 arms"),
                                         ("a,b\n", "malformed")])
def test_malformed_tables(tmp_path, content, msg):
    p = tmp_path / "t.csv"
    p.write_text(content)
    out = _cli("run", "ucb1", "--env", "table", "--table", str(p), "--horizon", "2", "--runs", "1",
               "--out", str(tmp_path / "x.json"))
    assert out.returncode == 2 and msg in out.stderr, out.stderr


def test_corrupt_run_json_is_exit_2(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("{not json")
    out = _cli("verify", str(p))
    assert out.returncode == 2 and "malformed JSON" in out.stderr
    p.write_text(json.dumps({"schema_version": 1}))
    out = _cli("verify", str(p))
    assert out.returncode == 2 and "malformed run.json" in out.stderr
