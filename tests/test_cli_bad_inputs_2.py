"""Issue 25: a second list of bad inputs — files that never end or block (devices, pipes),
inputs that would exhaust the memory, options that do not apply, parameters outside their
meaning, and messages in the user's terms.  Each must end in exit status 2 and one line on
stderr: never a traceback, a hang, a leftover file or a silent acceptance.

Rows run in process through ``dpledger.cli.main`` (the memory and signal cases under real
limits are in tests/test_reliability.py).  A row that accepted its input would exit 0 and
write its output: both are checked.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import pytest

from dpledger.cli import main

LINUX = sys.platform.startswith("linux")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs2")
    for seed, name in ((0, "run"), (1, "other")):
        assert main(["run", "lazy-dp-ts", "--horizon", "300", "--runs", "2", "--seed", str(seed),
                     "--quiet", "--out", str(d / f"{name}.json")]) == 0
    rep = json.loads((d / "run.json").read_text())
    for name, key, value in (("runs_neg", "runs", -3), ("runs_zero", "runs", 0),
                             ("horizon_zero", "horizon", 0), ("seed_neg", "seed", -1)):
        bad = dict(rep, **{key: value})
        (d / f"{name}.json").write_text(json.dumps(bad))
    # a copy of run.json beside another run's ledger under its recorded name
    (d / "swapped").mkdir()
    (d / "swapped" / "run.json").write_text((d / "run.json").read_text())
    (d / "swapped" / "run.ledger.json").write_text((d / "other.ledger.json").read_text())
    if hasattr(os, "mkfifo"):
        os.mkfifo(d / "pipe")
    (d / "ragged.csv").write_text("0.5,0.2\n0.3,0.4,0.1\n")
    (d / "word.csv").write_text("0.5,abc\n")
    (d / "blank.csv").write_text("")
    (d / "nan.csv").write_text("0.5,nan\n0.2,0.3\n")
    (d / "above.csv").write_text("0.5,2\n0.2,0.3\n")
    (d / "short.csv").write_text("0.5,0.2\n")
    np.save(d / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (d / "garbage.npy").write_bytes(b"not a numpy file at all")
    np.save(d / "text.npy", np.array(["a", "b"]))
    np.save(d / "complex.npy", np.array([[1 + 2j, 0.5]]))
    np.save(d / "cube.npy", np.zeros((2, 2, 2)))
    (d / "ragged.json").write_text("[[0.5, 0.2], [0.3]]")
    (d / "word.json").write_text('[[0.5, "a"]]')
    (d / "object.json").write_text('{"rows": []}')
    (d / "flat.json").write_text("[0.5, 0.2]")
    table = np.zeros((50, 2))
    table[:, 1] = 1.0
    np.save(d / "d0.npy", table)
    np.save(d / "d3.npy", np.zeros((50, 3)))
    return d


DEV = pytest.mark.skipif(not LINUX, reason="/dev/zero, /dev/urandom, /dev/null as on Linux")
RUN = ["run", "lazy-dp-ts", "--horizon", "50", "--runs", "1"]
AUDIT = ["audit", "lazy-dp-ts", "--trials", "20", "--horizon", "100"]
TABLE = ["run", "ucb1", "--env", "table", "--horizon", "2", "--table"]

# (id, argv, fragment of the one stderr line); {F} the input folder, {O} an empty output folder
BAD = [
    # -- files that never end, block, or are not files (issue 25 §1, §4)
    ("table /dev/zero", TABLE + ["/dev/zero"], "/dev/zero is a character device"),
    ("table /dev/null", TABLE + ["/dev/null"], "/dev/null is a character device"),
    ("table a pipe", TABLE + ["{F}/pipe"], "is a named pipe"),
    ("show --ledger /dev/urandom", ["show", "{F}/run.json", "--ledger", "/dev/urandom"],
     "--ledger /dev/urandom is a character device"),
    ("show --ledger a pipe", ["show", "{F}/run.json", "--ledger", "{F}/pipe"], "named pipe"),
    ("show a pipe", ["show", "{F}/pipe"], "is a named pipe"),
    ("show /dev/zero", ["show", "/dev/zero"], "is a character device"),
    ("verify a pipe", ["verify", "{F}/pipe"], "is a named pipe"),
    ("verify /dev/urandom", ["verify", "/dev/urandom"], "is a character device"),
    ("verify --ledger /dev/zero", ["verify", "{F}/run.json", "--ledger", "/dev/zero"],
     "character device"),
    ("curve a pipe", ["curve", "{F}/pipe"], "is a named pipe"),
    ("curve /dev/zero", ["curve", "/dev/zero"], "is a character device"),
    ("plot a pipe", ["plot", "{F}/pipe", "--out", "{O}/p.png"], "is a named pipe"),
    ("audit --pair /dev/zero", AUDIT + ["--pair", "/dev/zero", "{F}/d0.npy"],
     "--pair /dev/zero is a character device"),
    ("verify --table /dev/zero", ["verify", "{F}/run.json", "--table", "/dev/zero"],
     "--table applies to a run on --env table"),
    ("run --out /dev/null", RUN + ["--out", "/dev/null"], "/dev/null is a character device"),
    ("run --plot /dev/null", RUN + ["--out", "{O}/r.json", "--plot", "/dev/null"],
     "is a character device"),
    ("audit --out /dev/null", AUDIT + ["--out", "/dev/null"], "is a character device"),
    ("experiment --out /dev/null", ["experiment", "hu-2025", "--out", "/dev/null"],
     "is not a folder (it is a character device)"),
    ("run --ledger-out a pipe", RUN + ["--out", "{O}/r.json", "--ledger-out", "{F}/pipe"],
     "is a named pipe"),
    # -- reward tables refused in words (no numpy advice, no dtype reprs)
    ("table ragged csv", TABLE + ["{F}/ragged.csv"], "line 2 has 3 columns"),
    ("table word in csv", TABLE + ["{F}/word.csv"], "line 1, column 2 holds 'abc'"),
    ("table empty csv", TABLE + ["{F}/blank.csv"], "it holds no numbers"),
    ("table NaN", TABLE + ["{F}/nan.csv"], "must not contain NaN"),
    ("table above the range", TABLE + ["{F}/above.csv"], "row 1, column 2 holds 2.0, outside"),
    ("table too short", ["run", "ucb1", "--env", "table", "--horizon", "5", "--table",
                         "{F}/short.csv"], "has 1 row, fewer than the horizon 5"),
    ("table pickled npy", TABLE + ["{F}/objects.npy"], "holds Python objects"),
    ("table not npy", TABLE + ["{F}/garbage.npy"], "not a NumPy .npy file"),
    ("table text npy", TABLE + ["{F}/text.npy"], "it holds text, not numbers"),
    ("table complex npy", TABLE + ["{F}/complex.npy"], "holds complex numbers"),
    ("table cube npy", TABLE + ["{F}/cube.npy"], "got 2 × 2 × 2"),
    ("table ragged json", TABLE + ["{F}/ragged.json"], "row 2 has 1 values"),
    ("table word json", TABLE + ["{F}/word.json"], "row 1, column 2 is a JSON string"),
    ("table object json", TABLE + ["{F}/object.json"], "a JSON array of rows"),
    ("table flat json", TABLE + ["{F}/flat.json"], "row 1 is a JSON float"),
    ("audit --pair shapes differ", AUDIT + ["--pair", "{F}/d0.npy", "{F}/d3.npy"],
     "same shape"),
    # -- inputs that would exhaust the memory: refused with the estimate (issue 25 §1)
    ("run --runs 1e9", ["run", "ucb1", "--runs", "1e9"], "this simulation needs about"),
    ("run --runs 1e9 --workers 2", ["run", "ucb1", "--runs", "1e9", "--workers", "2"],
     "use fewer --runs"),
    ("audit --horizon 1e9", ["audit", "lazy-dp-ts", "--trials", "100", "--horizon", "1e9"],
     "use a smaller --horizon"),
    ("audit --trials 1e9", ["audit", "lazy-dp-ts", "--trials", "1e9"], "use fewer --trials"),
    ("audit laplace --trials 1e9", ["audit", "laplace:eps=1", "--trials", "1e9"],
     "this audit needs about"),
    ("audit discrete gaussian huge sigma", ["audit", "discrete_gaussian:sigma=1e12", "--trials",
                                            "10"], "holds its whole support"),
    ("run --workers 1e30", RUN + ["--workers", "1e30"], "--workers must be <= 1024"),
    ("audit --workers 1e30", AUDIT + ["--workers", "1e30"], "--workers must be <= 1024"),
    ("experiment --workers 1e30", ["experiment", "hu-2025", "--workers", "1e30", "--out",
                                   "{O}/x"], "--workers must be <= 1024"),
    # -- options that do not apply are refused, never ignored (issue 25 §4)
    ("verify --table on a Bernoulli run", ["verify", "{F}/run.json", "--table", "{F}/d0.npy"],
     "--table applies to a run on --env table"),
    ("audit --score in white-box", AUDIT + ["--mode", "whitebox", "--score", "pulls"],
     "--score chooses the black-box score"),
    ("audit --max-trials without --until-ratio", AUDIT + ["--max-trials", "100"],
     "--max-trials applies to a sequential audit"),
    ("audit spec --max-trials alone", ["audit", "laplace:eps=1", "--trials", "20",
                                       "--max-trials", "100"], "add --until-ratio"),
    ("audit spec --score", ["audit", "laplace:eps=1", "--trials", "20", "--score", "pulls"],
     "--score apply to policy audits"),
    ("audit spec --stop-at", ["audit", "laplace:eps=1", "--trials", "20", "--stop-at", "5"],
     "--stop-at apply to policy audits"),
    ("verify --workers without --resimulate", ["verify", "{F}/run.json", "--workers", "2"],
     "--workers applies to --resimulate only"),
    # -- parameters outside their meaning (issue 25 §4, issue 23 §5)
    ("dp-se beta above 1", RUN[:1] + ["dp-se", "--set", "beta=1.5"], "beta must lie in (0, 1)"),
    ("dp-se beta 1", RUN[:1] + ["dp-se", "--set", "beta=1"], "beta must lie in (0, 1)"),
    ("dp-se beta 0", RUN[:1] + ["dp-se", "--set", "beta=0"], "beta must lie in (0, 1)"),
    ("run --range width overflows", RUN + ["--range", "-1e308,1e308"],
     "its width hi − lo overflows"),
    ("audit --range width overflows", AUDIT + ["--range", "-1e308,1e308"],
     "its width hi − lo overflows"),
    ("run --range reversed", RUN + ["--range", "1,0"],
     "--range 1,0: reward range must have lo < hi"),
    ("run --range empty width", RUN + ["--range", "1,1"], "reward range must have lo < hi"),
    ("compose repeated key", ["compose", "laplace:eps=1,eps=2"], "gives epsilon twice"),
    ("compose repeated key by alias", ["compose", "laplace:eps=1,epsilon=2"],
     "gives epsilon twice"),
    ("compose repeated mu", ["compose", "gaussian:mu=1,mu=2"], "gives mu twice"),
    ("compose repeated scale", ["compose", "laplace:scale=1,scale=2"], "gives scale twice"),
    ("audit repeated key", ["audit", "laplace:eps=1,eps=2", "--trials", "20"],
     "gives epsilon twice"),
    ("compose scale 1e-320", ["compose", "laplace:scale=1e-320,sensitivity=1"],
     "ε = Δ/b overflows double precision"),
    ("compose discrete scale 1e-320", ["compose", "discrete_laplace:scale=1e-320,sensitivity=1"],
     "ε = Δ/b overflows double precision"),
    ("compose unknown parameter", ["compose", "laplace:foo=1"],
     "laplace takes scale, sensitivity, or eps, and count; got foo"),
    ("compose eps with scale", ["compose", "laplace:scale=1,eps=1"],
     "epsilon cannot be combined with scale"),
    ("compose rdp orders decreasing", ["compose", "rdp:orders=3;2,values=1;2"],
     "strictly increasing, got 3;2"),
    ("--set text for a number", RUN[:1] + ["dp-ucb", "--set", "epsilon=abc"],
     "--set epsilon=abc: epsilon must be a number"),
    ("--set empty number", RUN[:1] + ["dp-ucb", "--set", "epsilon="],
     "--set epsilon=: epsilon must be a number"),
    ("--set nan", RUN[:1] + ["lazy-dp-ts", "--set", "epsilon=nan"], "must not be NaN"),
    ("--set negative epsilon", RUN[:1] + ["lazy-dp-ts", "--set", "epsilon=-1"],
     "epsilon must be > 0, got -1"),
    ("--set bad choice", RUN[:1] + ["dp-klucb", "--set", "mechanism=foo"],
     "mechanism must be one of phase-sums, renoise-cumulative"),
    ("--set alpha above 1", RUN[:1] + ["dp-ts-ucb", "--set", "alpha=2"],
     "alpha must lie in [0, 1]"),
    ("--set on a policy without parameters", RUN[:1] + ["ucb1", "--set", "epsilon=1"],
     "has no parameter 'epsilon'"),
    # -- messages in the user's terms (issue 25 §4)
    ("--means negative read as a value", RUN + ["--means", "-0.1,0.5"],
     "Bernoulli means must lie in [0, 1]"),
    ("--rates negative read as a value", RUN + ["--env", "truncexp", "--rates", "-1,2"],
     "rates must be > 0"),
    ("audit --stop-at beyond T", AUDIT + ["--stop-at", "99999"], "--stop-at must lie in"),
    ("experiment --scheduler garbage", ["experiment", "hu-2025", "--scheduler", "garbage",
                                        "--out", "{O}/x"], "not a scheduler address"),
    ("experiment --scheduler no port", ["experiment", "hu-2025", "--scheduler", "tcp://",
                                        "--out", "{O}/x"], "not a scheduler address"),
    # -- show refuses what verify refuses, and checks the ledger's sha256 (issue 25 §4)
    ("show runs -3", ["show", "{F}/runs_neg.json"], "runs must be an integer >= 1, got -3"),
    ("show runs 0", ["show", "{F}/runs_zero.json"], "runs must be an integer >= 1, got 0"),
    ("show horizon 0", ["show", "{F}/horizon_zero.json"], "horizon must be an integer >= 1"),
    ("show seed -1", ["show", "{F}/seed_neg.json"], "seed must be an integer >= 0"),
    ("curve runs -3", ["curve", "{F}/runs_neg.json"], "runs must be an integer >= 1"),
    ("verify runs -3", ["verify", "{F}/runs_neg.json"], "runs must be an integer >= 1"),
    ("verify runs 0", ["verify", "{F}/runs_zero.json"], "runs must be an integer >= 1"),
    ("show --ledger of another run", ["show", "{F}/run.json", "--ledger",
                                      "{F}/other.ledger.json"],
     "is not the ledger"),
    ("show a swapped ledger file", ["show", "{F}/swapped/run.json"], "is not the ledger"),
    # -- more numbers and options
    ("audit --until-ratio 0", AUDIT + ["--until-ratio", "0"], "--until-ratio must be > 0"),
    ("audit --max-trials below --trials", AUDIT + ["--until-ratio", "0.5", "--max-trials", "5"],
     "--max-trials must be >= 20"),
    ("audit --selection-fraction 1", AUDIT + ["--selection-fraction", "1"],
     "--selection-fraction must lie in (0, 1)"),
    ("curve --epsilons text", ["curve", "{F}/run.json", "--epsilons", "a"],
     "--epsilons must be a number"),
    ("compose --delta 0", ["compose", "laplace:eps=1", "--delta", "0"], "--delta must lie in"),
    ("run --env beta three numbers", RUN + ["--env", "beta", "--ab", "1:2:3"], "a:b pairs"),
    ("run --env truncexp without rates", RUN + ["--env", "truncexp"], "needs --rates"),
    ("run --rng os with --seed", RUN + ["--sampler", "exact", "--rng", "os", "--seed", "3"],
     "--seed cannot be combined with --rng os"),
    ("run --rng os with the float sampler", RUN + ["--rng", "os"], "exact sampler"),
]


def _fill(argv, files, out):
    return [a.replace("{F}", str(files)).replace("{O}", str(out)) for a in argv]


def test_the_table_has_80_rows():
    assert len(BAD) >= 80
    assert len({b[0] for b in BAD}) == len(BAD)


@pytest.mark.parametrize("name,argv,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, argv, fragment, files, tmp_path, capsys, monkeypatch):
    """Exit 2, one line on stderr naming the problem, no traceback, nothing written, quickly."""
    if any("/dev/" in a for a in argv) and not LINUX:
        pytest.skip("device files as on Linux")
    if any("{F}/pipe" in a for a in argv) and not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)              # defaults such as run.json would land here
    before = sorted(os.listdir(files))
    t0 = time.monotonic()
    try:
        code = main(_fill(argv, files, out))
    except SystemExit as exc:           # argparse's own errors
        code = exc.code
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err and "np.float64" not in err and "usecols" not in err
    assert fragment in lines[0], lines[0]
    assert os.listdir(out) == [], os.listdir(out)                # nothing half-written
    assert sorted(os.listdir(files)) == before
    assert elapsed < 60, elapsed                                  # no hang
