"""Contextual runs through the command line: every environment end to end with verify
(--resimulate: same seed, same bytes), bad input (one line, exit 2, nothing written), the Open
Bandit Dataset conversion, and `dpledger data fetch obd` against the real registry."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from contextual_data import unit_rows
from dpledger.cli import main


def _run(args, tmp_path, name="run.json"):
    out = tmp_path / name
    code = main(["run", *args, "--runs", "2", "--seed", "1", "--out", str(out), "--quiet"])
    return code, out


CASES = {
    "linear": ["linucb", "--env", "linear", "--dim", "3", "--arms", "4", "--horizon", "300"],
    "linear-theta": ["lints", "--env", "linear", "--dim", "2", "--arms", "3", "--theta",
                     "0.6,0.8", "--horizon", "300", "--delay", "5"],
    "table-disjoint": ["linucb", "--env", "contextual-table", "--table", "{d}/dis.npz"],
    "table-shared": ["lints", "--env", "contextual-table", "--table", "{d}/sh.npz",
                     "--horizon", "150", "--delay", "3"],
    "replay": ["linucb", "--env", "replay", "--log", "{d}/log.csv"],
    "replay-rejection": ["lints", "--env", "replay", "--log", "{d}/log.csv", "--replay-mode",
                         "rejection", "--arms", "4", "--delay", "2"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_verify_resimulate(case, data, tmp_path, capsys):
    args = [a.format(d=data) for a in CASES[case]]
    code, out = _run(args, tmp_path)
    assert code == 0
    rep = json.loads(out.read_text())
    assert rep["contextual"]["privacy_model"] == "none"
    assert rep["privacy"]["certificate"]["pure_epsilon_status"] == "unbounded"
    extra = []
    if "--table" in args:
        extra = ["--table", args[args.index("--table") + 1]]
    if "--log" in args:
        extra = ["--log", args[args.index("--log") + 1]]
    capsys.readouterr()
    assert main(["verify", str(out), "--resimulate", *extra]) == 0
    assert "resimulation (run.json and ledger file bytes identical)" in capsys.readouterr().out
    assert main(["show", str(out)]) == 0
    assert main(["curve", str(out)]) == 0
    # issue 30 §3: the privacy unit; a replay certifies the simulated stream, not log rows
    assert rep["privacy_unit"]["unit"] == "reward"
    assert ("log_rows" in rep["privacy_unit"]) == case.startswith("replay")
    if case.startswith("replay"):
        assert "accepted" in rep["privacy_unit"]["relation"]
        assert rep["privacy_unit"]["log_rows"].startswith("not certified")
        assert rep["regret"]["status"].startswith("not_applicable")
        assert rep["reward"]["accepted_rows"] == rep["contextual"]["rounds"]
        assert rep["reward"]["uniform_mean_reward"] == pytest.approx(
            float(np.loadtxt(str(data / "log.csv"), delimiter=",", skiprows=1)[:, 2].mean())
            / (4 / 3 if "rejection" in case else 1.0))


def test_supervised_run_verifies(tmp_path, capsys):
    pytest.importorskip("sklearn")
    code, out = _run(["linucb", "--env", "supervised", "--dataset", "wine", "--horizon", "400",
                      "--delay", "10"], tmp_path)
    assert code == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--resimulate"]) == 0


def test_same_seed_same_bytes_whatever_the_workers(data, tmp_path):
    args = ["linucb", "--env", "contextual-table", "--table", str(data / "dis.npz"), "--runs",
            "3", "--seed", "4", "--quiet"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["run", *args, "--out", str(a)]) == 0
    assert main(["run", *args, "--out", str(b), "--workers", "2"]) == 0
    assert a.read_bytes() == b.read_bytes().replace(b"b.ledger.json", b"a.ledger.json")
    assert (tmp_path / "a.ledger.json").read_bytes() == (tmp_path / "b.ledger.json").read_bytes()


def test_verify_catches_tampering(data, tmp_path, capsys):
    code, out = _run(["linucb", "--env", "linear", "--dim", "3", "--arms", "3", "--horizon",
                      "200", "--delay", "4"], tmp_path)
    rep = json.loads(out.read_text())
    for edit in (lambda r: r["contextual"]["observations"].__setitem__(0, 200),
                 lambda r: r["regret"].__setitem__("final_mean", r["regret"]["final_mean"] + 1),
                 lambda r: r["environment"]["theta"].__setitem__(0, 0.0),
                 lambda r: r["reward"].__setitem__("mean_reward", 0.5),
                 lambda r: r["contextual"].__setitem__("privacy_model", "record-private")):
        bad = json.loads(json.dumps(rep))
        edit(bad)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(bad))
        (tmp_path / "bad.ledger.json").write_bytes((tmp_path / "run.ledger.json").read_bytes())
        bad["ledger"]["file"] = "bad.ledger.json"
        p.write_text(json.dumps(bad))
        assert main(["verify", str(p)]) == 1
    capsys.readouterr()


def test_delay_at_least_the_horizon_is_allowed_and_said(tmp_path, capsys):
    code, out = _run(["linucb", "--env", "linear", "--dim", "2", "--arms", "3", "--horizon",
                      "50", "--delay", "50"], tmp_path)
    assert code == 0
    rep = json.loads(out.read_text())
    assert rep["contextual"]["observations"] == [0, 0]
    assert "nothing was learned" in rep["contextual"]["delay_note"]
    assert main(["verify", str(out)]) == 0


def _bad(tmp_path, capsys, argv, match):
    out = tmp_path / "never.json"
    code = main(["run", *argv, "--runs", "1", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert match in err, err
    assert not out.exists() and not (tmp_path / "never.ledger.json").exists()


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def test_bad_inputs_one_line_exit_2(data, tmp_path, capsys):
    rng = np.random.default_rng(1)
    x, r = unit_rows(rng, (20, 3)), rng.random((20, 2))
    nan_x = x.copy()
    nan_x[5, 1] = np.nan
    cases = [
        (["linucb", "--env", "contextual-table", "--table",
          _npz(tmp_path / "a.npz", contexts=x[:10], rewards=r)], "contexts have 10 rows"),
        (["linucb", "--env", "contextual-table", "--table",
          _npz(tmp_path / "b.npz", contexts=unit_rows(rng, (20, 3, 3)), rewards=r)],
         "do not match"),
        (["linucb", "--env", "contextual-table", "--table",
          _npz(tmp_path / "c.npz", contexts=nan_x, rewards=r)], "NaN or infinity"),
        (["linucb", "--env", "contextual-table", "--table",
          _npz(tmp_path / "d.npz", contexts=2 * x, rewards=r)], "above the declared bound"),
        (["linucb", "--env", "contextual-table", "--table",
          _npz(tmp_path / "e.npz", contexts=x)], "no array 'rewards'"),
        (["linucb", "--env", "contextual-table", "--table",
          _npz(tmp_path / "f.npz", contexts=x.astype(complex), rewards=r)], "real numbers"),
        (["linucb", "--env", "contextual-table", "--table",
          _npz(tmp_path / "g.npz", contexts=x, rewards=r[:, :1])], "K >= 2"),
        (["linucb", "--env", "contextual-table", "--table",
          _npz(tmp_path / "h.npz", contexts=x, rewards=r + 1)], "outside the declared range"),
        (["linucb", "--env", "contextual-table", "--table", "/dev/zero"], "not a regular file"),
        (["linucb", "--env", "contextual-table", "--table", str(tmp_path)], "is a directory"),
        (["linucb", "--env", "contextual-table", "--table", str(data / "log.csv")],
         "not a .npz"),
        (["linucb", "--env", "contextual-table", "--table", str(data / "dis.npz"), "--horizon",
          "201"], "fewer than the horizon"),
        (["linucb", "--env", "linear", "--dim", "3", "--theta", "0.5,0.5"], "--theta has 2"),
        (["linucb", "--env", "linear", "--dim", "2", "--theta=-0.5,0.5"], ">= 0"),
        (["linucb", "--env", "replay"], "needs --log"),
        (["linucb", "--env", "replay", "--log", "/dev/zero"], "not a regular file"),
        (["linucb", "--env", "replay", "--log", str(tmp_path)], "is a directory"),
        (["linucb", "--env", "linear", "--delay=-1"], "--delay must be >= 0"),
        (["linucb", "--env", "linear", "--delay", "x"], "--delay"),
        (["ucb1", "--delay", "3"], "--delay describes"),
        (["ucb1", "--env", "linear"], "needs a contextual policy"),
        (["linucb"], "is contextual"),
        (["linucb", "--env", "linear", "--means", "0.5,0.5"], "--means describes"),
        (["linucb", "--env", "linear", "--dataset", "wine"], "--dataset describes"),
        (["linucb", "--env", "linear", "--sampler", "exact"], "no exact-sampler form"),
        (["linucb", "--env", "linear", "--set", "alpha=-1"], "alpha must be >= 0"),
        (["linucb", "--env", "linear", "--norm-bound", "0"], "--norm-bound must be > 0"),
        (["linucb", "--env", "supervised", "--dataset", "mnist"], "--dataset must be one of"),
    ]
    for argv, match in cases:
        _bad(tmp_path, capsys, argv, match)


def _log(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_bad_logs_one_line_exit_2(tmp_path, capsys):
    cases = [
        (_log(tmp_path, "empty.csv", ""), [], "is empty"),
        (_log(tmp_path, "one.csv", "action\n1\n2\n"), [], "one column"),
        (_log(tmp_path, "head.csv", "action,reward,x\n"), [], "no data rows"),
        (_log(tmp_path, "noreward.csv", "action,x,y\n0,0.1,0.2\n"), [], "no column 'reward'"),
        (_log(tmp_path, "noctx.csv", "action,reward,propensity\n0,1,0.5\n1,0,0.5\n"), [],
         "no context columns"),
        (_log(tmp_path, "outside.csv", "action,reward,x\n0,1,0.5\n5,0,0.5\n"), ["--arms", "3"],
         "outside 0 … 2"),
        (_log(tmp_path, "negative.csv", "action,reward,x\n0,1,0.5\n-1,0,0.5\n"), [],
         "not an integer >= 0"),
        (_log(tmp_path, "frac.csv", "action,reward,x\n0,1,0.5\n1.5,0,0.5\n"), [],
         "not an integer >= 0"),
        (_log(tmp_path, "nonuni.csv", "action,reward,x,propensity\n0,1,0.5,0.5\n1,0,0.5,0.25\n"),
         [], "propensities vary"),
        (_log(tmp_path, "noprop.csv", "action,reward,x\n0,1,0.5\n1,0,0.5\n"),
         ["--replay-mode", "rejection"], "needs a propensity column"),
        (_log(tmp_path, "nan.csv", "action,reward,x\n0,1,nan\n1,0,0.5\n"), [], "NaN or infinite"),
        (_log(tmp_path, "text.csv", "action,reward,x\n0,1,abc\n1,0,0.5\n"), [],
         "'abc' is not a number"),
        (_log(tmp_path, "ragged.csv", "action,reward,x\n0,1\n1,0,0.5\n"), [], "has 2 fields"),
        (_log(tmp_path, "norm.csv", "action,reward,x,y\n0,1,0.9,0.9\n1,0,0.5,0.1\n"), [],
         "above the declared bound"),
        (_log(tmp_path, "range.csv", "action,reward,x\n0,2,0.5\n1,0,0.5\n"), [],
         "outside the declared range"),
        (_log(tmp_path, "cols.csv", "action,reward,x,y\n0,1,0.5,0.1\n1,0,0.5,0.1\n"),
         ["--context-columns", "x,z"], "'z'"),
        (_log(tmp_path, "dup.csv", "action,reward,x,x\n0,1,0.5,0.1\n"), [], "twice"),
        (_log(tmp_path, "short.csv", "action,reward,x\n0,1,0.5\n1,1,0.5\n"), ["--horizon", "5"],
         "fewer than the horizon"),
        (_log(tmp_path, "single.csv", "action,reward,x\n0,1,0.5\n"), [], "fewer than 2 actions"),
    ]
    (tmp_path / "bin.csv").write_bytes(b"action,reward,x\n0,1,\xff\n")
    cases.append((str(tmp_path / "bin.csv"), [], "not UTF-8"))
    for path, extra, match in cases:
        _bad(tmp_path, capsys, ["linucb", "--env", "replay", "--log", path, *extra], match)


def test_supervised_without_scikit_learn(tmp_path, capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "sklearn", None)
    _bad(tmp_path, capsys, ["linucb", "--env", "supervised"], "pip install 'dpledger[contextual]'")


def test_policies_lists_the_contextual_policies(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    assert "linucb" in out and "lints" in out and "privacy model: none" in out


# -- the Open Bandit Dataset -------------------------------------------------------------------

OBD_HEAD = (",timestamp,item_id,position,click,propensity_score,user_feature_0,user_feature_1,"
            "user_feature_2,user_feature_3,user-item_affinity_0\n")


def _fake_campaign(path, rows=60, items=4, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        fh.write(OBD_HEAD)
        for i in range(rows):
            f = [f"{'abcdef'[rng.integers(0, k)]}{j}hash" for j, k in enumerate((2, 3, 2, 4))]
            fh.write(f"{i},2019-11-24,{rng.integers(0, items)},1,{int(rng.random() < 0.2)},"
                     f"{1 / items},{','.join(f)},0.0\n")


def test_obd_conversion_is_a_replay_log(tmp_path, capsys):
    from dpledger.policies.contextual.obd import convert
    _fake_campaign(tmp_path / "all.csv")
    text, info = convert(str(tmp_path / "all.csv"))
    log = tmp_path / "obd.csv"
    log.write_text(text)
    arr = np.loadtxt(str(log), delimiter=",", skiprows=1)
    assert info["rows"] == 60 and arr.shape[0] == 60
    # one-hot of 4 features scaled by 1/2: every context has norm 1
    assert np.allclose(np.linalg.norm(arr[:, 3:], axis=1), 1.0)
    assert np.array_equal(np.count_nonzero(arr[:, 3:], axis=1), np.full(60, 4))
    code, out = _run(["linucb", "--env", "replay", "--log", str(log), "--arms", "4"], tmp_path)
    assert code == 0


def test_obd_fetch_refuses_a_wheel_with_another_sha256(tmp_path, capsys, monkeypatch):
    from dpledger.policies.contextual import obd

    def fake(folder):
        p = os.path.join(folder, obd.OBP_WHEEL)
        with open(p, "wb") as fh:
            fh.write(b"not the wheel")
        return p
    monkeypatch.setattr(obd, "download_wheel", fake)
    target = tmp_path / "cache"
    assert main(["data", "fetch", "obd", "--dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert "refusing to use it" in err and len(err.strip().splitlines()) == 1
    assert not target.exists()


def test_obd_fetch_from_the_registry(tmp_path, capsys):
    """The real download (1.3 MB; fails when the package registry cannot be reached, skipped then only with DPLEDGER_TESTS_OFFLINE=1)."""
    from dpledger.errors import DpledgerError
    from dpledger.policies.contextual import obd
    try:
        info = obd.fetch_obd(str(tmp_path), "all")
    except DpledgerError as exc:
        if "could not download" in str(exc) or "download of" in str(exc):
            from conftest import missing_service
            missing_service(f"package registry unreachable: {exc}", "DPLEDGER_TESTS_OFFLINE")
        raise
    assert info["rows"] == 10000 and info["items"] == 80 and info["propensities"] == [0.0125]
    code, out = _run(["lints", "--env", "replay", "--log", info["log"], "--arms", "80"],
                     tmp_path)
    assert code == 0
    rep = json.loads(out.read_text())
    assert 50 < min(rep["reward"]["accepted_rows"]) <= max(rep["reward"]["accepted_rows"]) < 250


def test_run_prints_the_privacy_unit(data, tmp_path, capsys):
    """``run`` says what one unit of privacy is: a record-private run reports per record, and a
    replay says its certificate is the simulated stream's, not the log's rows (issue 30)."""
    capsys.readouterr()
    assert main(["run", "linucb", "--env", "replay", "--log", str(data / "log.csv"), "--seed",
                 "1", "--out", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "privacy unit: streams differing in one reward (contexts public) of the simulated " \
        "online stream" in out
    assert "the log's rows: not certified" in out
    assert main(["run", "jdp-linucb", "--env", "linear", "--dim", "3", "--arms", "3",
                 "--horizon", "200", "--seed", "1", "--out", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "privacy (per record, worst case):" in out and "worst-off record:" in out
    assert json.loads((tmp_path / "b.json").read_text())["privacy_unit"]["unit"] == "record"
