"""Issue 13: a property-based fuzz of the command line.  Argument lists are built from each
command's own grammar (its argparse options, their choices and arities), with values drawn from
pools of good, bad and strange inputs; whatever the list, ``dpledger`` answers with exit status
0, 1 or 2, never a traceback, and exit 2 comes with exactly one line on stderr.

Sizes stay tiny (horizons and run counts ≤ 50, one worker) so that the examples that are valid
finish in milliseconds; an experiment that would really run is replaced by a stub (its CLI layer
is what is fuzzed).  ``max_examples`` is bounded for CI.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dpledger.cli import COMMANDS, _present, build_parser, main

PRESENT = [n for n in COMMANDS if _present(n)]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-inputs")
    run = d / "run.json"
    assert main(["run", "lazy-dp-ts", "--horizon", "200", "--runs", "2", "--out", str(run),
                 "--quiet"]) == 0
    audit = d / "audit.json"
    assert main(["audit", "lazy-dp-ts", "--trials", "20", "--horizon", "100", "--out",
                 str(audit), "--quiet"]) == 0
    (d / "empty_object.json").write_text("{}")
    (d / "list.json").write_text("[[0.5, 0.2], [0.1, 0.9]]")
    (d / "latin1.json").write_bytes(b"\xff\xfe{}")
    (d / "folder").mkdir()
    (d / "plain.txt").write_text("text")
    (d / "t.csv").write_text("0.5,0.2\n0.3,0.4\n0.1,0.9\n")
    (d / "log.csv").write_text("action,reward,x\n" + "".join(f"{i % 3},{i % 2},0.5\n"
                                                             for i in range(80)))
    t0 = np.zeros((40, 2))
    t0[:, 1] = 1.0
    t1 = t0.copy()
    t1[0, 0] = 1.0
    np.save(d / "d0.npy", t0)
    np.save(d / "d1.npy", t1)
    return d


def _in(d):
    return [str(d / n) for n in ("run.json", "run.ledger.json", "audit.json", "empty_object.json",
                                 "list.json", "latin1.json", "folder", "plain.txt", "t.csv",
                                 "d0.npy", "d1.npy", "missing.json", "log.csv")]


def _out(d, o):
    return [os.path.join(o, n) for n in ("o.json", "o.png", "o.pdf", "o.xyz", "sub/new/o.json",
                                          "")] + [o, str(d / "plain.txt" / "x.json"), "none",
                                                  str(d / "folder")]


INTS = ["0", "1", "2", "3", "20", "50", "-1", "1.5", "1e1", "1e30", "1e999999", "abc", "", " ",
        "nan", "inf", "-inf", "0x10", "٣", "1_0"]
FLOATS = ["0.5", "0.95", "1e-5", "0", "1", "2", "-0.1", "1e-400", "1e400", "nan", "x", "",
          "0.1,0.2"]
LISTS = ["0.9,0.4", "0.9,,0.4", "", ",", "0,1", "1,0", "a,b", "0.5", "0.25,0.5,0.75",
         "1e-3,1e-6", "nan,0.5", "1:1,2:2", "1:1,,2:2", "1:x", "2,3", "0,2", "1e-400", "-1,1"]
SETS = ["epsilon=0.5", "epsilon=-1", "epsilon", "=1", "foo=bar", "epsilon=1e400", "epsilon=",
        "epsilon=nan"]
POLICIES = ["ucb1", "lazy-dp-ts", "dp-se", "ts-gaussian", "linucb", "lints", "nope", ""]
RELEASES = ["laplace:eps=0.5", "gaussian:mu=1", "laplace:eps=0", "pure:eps=1,count=3", "x",
            "laplace:", ":", "gaussian:sigma=2,sensitivity=1,count=1000", "laplace:eps=1,count=0",
            "discrete_laplace:scale=4,sensitivity=1", "laplace:eps=1,count=1.5"]
EXPERIMENTS = ["hu-2025", "nobody-2030", ""]

INT_OPTIONS = {"--horizon", "--runs", "--seed", "--trials", "--arms", "--stop-at", "--dim",
               "--delay"}
FLOAT_OPTIONS = {"--confidence", "--selection-fraction", "--delta", "--norm-bound"}
LIST_OPTIONS = {"--means", "--rates", "--ab", "--range", "--deltas", "--epsilons", "--labels",
                "--theta", "--context-columns"}
OUT_OPTIONS = {"--out", "--plot", "--ledger-out", "--dir"}
IN_OPTIONS = {"--ledger", "--table", "--pair", "--log"}
# random text without decimal digits: "999999" would be a valid --runs or --trials, and a
# million runs is a long job, not a bad input (the pools hold the big and strange numbers)
ODD = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Nd")), max_size=6)


def _subparser(name):
    parser = build_parser(name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


# values that are valid for an option (drawn 3 times in 4, so that valid command lines — and the
# code after the checks — are reached too)
GOOD = {"--horizon": ["50", "20", "1e1"], "--runs": ["1", "2", "3"], "--seed": ["0", "3"],
        "--trials": ["20", "40"], "--arms": ["2", "3"], "--stop-at": ["50", "1e1"],
        "--confidence": ["0.95", "0.5"], "--selection-fraction": ["0.1", "0.5"],
        "--delta": ["1e-5", "0.5", "1e-3,1e-6"], "--means": ["0.9,0.4", "0.25,0.5,0.75"],
        "--rates": ["1,2"], "--ab": ["1:1,2:2"], "--range": ["0,1"],
        "--deltas": ["1e-3,1e-6", "0.5"], "--epsilons": ["0.5,1", "0"], "--labels": ["a", "a,b"],
        "--set": ["epsilon=0.5", "epsilon=2"], "--workers": ["1"], "--scheduler": [],
        "--ledger": ["run.ledger.json"], "--table": ["t.csv"], "--pair": ["d0.npy", "d1.npy"],
        "--dim": ["2", "3"], "--delay": ["0", "3", "60"], "--norm-bound": ["1", "2"],
        "--theta": ["0.5,0.5"], "--dataset": ["iris", "wine"], "--log": ["log.csv"],
        "--context-columns": ["x"],
        "file": ["run.json"], "files": ["run.json"],
        "policy": ["ucb1", "lazy-dp-ts", "dp-se", "linucb", "lints"],
        "releases": RELEASES[:4], "name": ["hu-2025"]}


def _value_strategy(cmd, action, d, o):
    opt = action.option_strings[0] if action.option_strings else action.dest
    if action.choices:
        return st.sampled_from(list(action.choices) * 6 + ["bogus"])
    if opt == "--workers":
        pool = ["1", "0", "-1", "x", "1.5"]        # no process pools: they take seconds to start
    elif opt == "--scheduler":
        pool = ["", "tcp://"]
    elif opt in INT_OPTIONS:
        pool = INTS
    elif opt in FLOAT_OPTIONS:
        pool = FLOATS
    elif opt in LIST_OPTIONS:
        pool = LISTS
    elif opt == "--set":
        pool = SETS
    elif opt in OUT_OPTIONS:
        pool = _out(d, o)
    elif opt in IN_OPTIONS or action.dest in ("file", "files"):
        pool = _in(d)
    elif action.dest == "policy":
        pool = POLICIES
    elif action.dest == "releases":
        pool = RELEASES
    elif action.dest == "name":
        pool = EXPERIMENTS
    else:
        pool = INTS + LISTS
    good = GOOD.get(opt, [])
    if opt in OUT_OPTIONS:
        good = [os.path.join(o, n) for n in ("o.json", "o.png", "o.pdf", "sub/new/o.svg")]
    elif opt in IN_OPTIONS or action.dest in ("file", "files"):
        good = [str(d / n) for n in good]
    bad = st.one_of(st.sampled_from(pool), ODD)
    if not good:
        return bad
    return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(good), bad)


@st.composite
def argv_of(draw, d, o):
    cmd = draw(st.sampled_from(PRESENT + ["bogus"]))
    if cmd == "bogus":
        return draw(st.lists(st.sampled_from(["bogus", "--help", "-x", "run"]), max_size=2))
    p = _subparser(cmd)
    argv = [cmd]
    for a in p._actions:
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            continue
        if a.option_strings:
            keep = a.required and draw(st.integers(0, 9)) > 0 or draw(st.integers(0, 4)) == 0
            if not keep:
                continue
            if isinstance(a, argparse._StoreTrueAction):
                argv.append(a.option_strings[0])
                continue
            n = a.nargs if isinstance(a.nargs, int) else 1
            reps = draw(st.integers(1, 2)) if isinstance(a, argparse._AppendAction) else 1
            for _ in range(reps):
                vals = [draw(_value_strategy(cmd, a, d, o)) for _ in range(n)]
                # "--opt=value" keeps values that start with "-" from being read as options
                argv += [f"{a.option_strings[0]}={vals[0]}"] if n == 1 else [a.option_strings[0],
                                                                            *vals]
        else:
            count = {None: 1, "+": draw(st.integers(1, 3)), "*": draw(st.integers(0, 2))}.get(
                a.nargs, 1)
            if draw(st.integers(0, 15)) == 0:
                count = 0                                   # a missing positional
            argv += [draw(_value_strategy(cmd, a, d, o)) for _ in range(count)]
    if cmd in ("run",) and not any(x.startswith("--horizon") for x in argv):
        argv.append("--horizon=50")                        # keep valid runs small
    if cmd in ("run",) and not any(x.startswith("--runs") for x in argv):
        argv.append("--runs=2")
    if cmd == "audit" and not any(x.startswith("--horizon") for x in argv):
        argv.append("--horizon=100")
    return argv


PROGRESS = ("auditing ", "  trials ", "  runs ", "  cells ", "note: ")


@pytest.fixture(scope="module")
def stub_download():
    """``dpledger data fetch obd`` would download 1.3 MB per example: its CLI layer is fuzzed
    with a download that fails as an unreachable registry does."""
    from dpledger.errors import DpledgerError
    from dpledger.policies.contextual import obd
    real = obd.download_wheel

    def unreachable(folder):
        raise DpledgerError("pip could not download obp==0.4.1 (stub: no network in the fuzz)")
    obd.download_wheel = unreachable
    yield
    obd.download_wheel = real


@pytest.fixture(scope="module")
def stub_experiment():
    import dpledger.experiments.common as common
    real = common.run_experiment
    common.run_experiment = lambda module, out, **kw: {}
    yield
    common.run_experiment = real


@settings(max_examples=int(os.environ.get("DPLEDGER_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_no_traceback_ever(inputs, stub_experiment, stub_download, data):
    with tempfile.TemporaryDirectory() as o:
        argv = data.draw(argv_of(inputs, o), label="argv")
        err, out = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(o)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                try:
                    code = main(argv)
                except SystemExit as exc:       # argparse: --help (0) or a usage error (2)
                    code = exc.code
        finally:
            os.chdir(cwd)
        text = err.getvalue()
        event(f"{argv[0] if argv else '(none)'} exit {code}")
        assert "Traceback" not in text, text
        assert code in (0, 1, 2), (code, text)
        if code == 2:
            # one error line, the last; before it only progress lines, which a refusal found
            # after the work began (e.g. an audit whose witness release never came before
            # --stop-at) may follow when that work took more than a second
            lines = [ln for ln in text.strip().splitlines() if ln.strip()]
            if lines and lines[-1].startswith('{"error": '):     # a --json command's refusal
                import json
                assert set(json.loads(lines[-1])) >= {"error", "command"}, text
                lines[-1] = "dpledger: error: " + json.loads(lines[-1])["error"]
            assert lines and ": error: " in lines[-1], text
            assert all(ln.startswith(PROGRESS) or "%|" in ln or ": error: " not in ln
                       for ln in lines[:-1]), text
            assert sum(": error: " in ln for ln in lines) == 1, text
        leftovers = [n for _, _, fs in os.walk(o) for n in fs
                     if n.startswith((".tmp-", ".dpledger-probe")) or n.endswith(".tmp.png")]
        assert leftovers == []
