"""What `dpledger verify` checks (issue 12 §6): run.json records its ledger file's sha256;
verify re-derives from the ledger file; `--resimulate` reruns and compares bytes; undeclared
parameters are refused.  Every tampering below passed `verify` with exit 0 before."""
from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

RUN = ["run", "lazy-dp-ts", "--set", "epsilon=0.5", "--means", "0.8,0.5,0.3", "--horizon", "2000",
       "--runs", "3", "--quiet"]


def _main(*args) -> int:
    from dpledger.cli import main
    try:
        return main([str(a) for a in args])
    except SystemExit as exc:
        return exc.code


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs of one configuration: seed 7 (the one tampered with), seed 8 (another run's
    ledger), and seed 7 at horizon 2100."""
    d = tmp_path_factory.mktemp("runs")
    for name, extra in (("base", ["--seed", "7"]), ("other", ["--seed", "8"]),
                        ("longer", ["--seed", "7", "--horizon", "2100"])):
        (d / name).mkdir()
        assert _main(*RUN, *extra, "--out", d / name / "run.json") == 0
    return d


def _copy(runs, tmp_path, name="base"):
    for f in ("run.json", "run.ledger.json"):
        shutil.copy(runs / name / f, tmp_path / f)
    return tmp_path / "run.json", json.loads((tmp_path / "run.json").read_text())


def _write(path, rep):
    path.write_text(json.dumps(rep, indent=1) + "\n")


def _verify(capsys, path, *extra):
    capsys.readouterr()
    code = _main("verify", path, *extra)
    out, err = capsys.readouterr()
    return code, out, err


# -- run.json's record of the ledger file ------------------------------------------------------
def test_run_json_records_the_ledger_files_name_sha256_and_size(runs, tmp_path):
    rep = json.loads((runs / "base" / "run.json").read_text())
    data = (runs / "base" / "run.ledger.json").read_bytes()
    led = rep["ledger"]
    assert led["file"] == "run.ledger.json"           # relative to run.json, no folder
    assert led["sha256"] == hashlib.sha256(data).hexdigest() and led["bytes"] == len(data)
    assert "file_status" not in led and str(runs) not in (runs / "base" / "run.json").read_text()
    # elsewhere: a relative path; not written: null with the reason
    (tmp_path / "sub").mkdir()
    assert _main(*RUN, "--out", tmp_path / "r.json", "--ledger-out", tmp_path / "sub" / "l.json") == 0
    led = json.loads((tmp_path / "r.json").read_text())["ledger"]
    assert led["file"] == "sub/l.json"
    assert led["sha256"] == hashlib.sha256((tmp_path / "sub" / "l.json").read_bytes()).hexdigest()
    assert _main(*RUN, "--out", tmp_path / "n.json", "--ledger-out", "none") == 0
    led = json.loads((tmp_path / "n.json").read_text())["ledger"]
    assert led["file"] is None and led["sha256"] is None and led["bytes"] is None
    assert led["file_status"] == "not_written:--ledger-out none"


# -- an untouched run passes, and says what was checked ---------------------------------------
def test_untouched_run_passes_verify_and_resimulate(runs, tmp_path, capsys):
    path, _ = _copy(runs, tmp_path)
    code, out, err = _verify(capsys, path)
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"{path}: ok — checked: ledger sha256")
    for item in ("realized from ledger file", "regret curve from ledger file", "theorem",
                 "certificate", "invariants", "public parameters"):
        assert item in last
    assert "not checked: environment parameters" in last and "(use --resimulate)" in last
    code, out, err = _verify(capsys, path, "--resimulate")
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert "resimulation (run.json and ledger file bytes identical)" in last
    assert last.endswith("not checked: nothing")


def test_ledger_file_absent_is_said_and_narrows_the_checks(runs, tmp_path, capsys):
    path, _ = _copy(runs, tmp_path)
    (tmp_path / "run.ledger.json").unlink()
    code, out, _ = _verify(capsys, path)
    last = out.strip().splitlines()[-1]
    assert code == 0
    assert "ledger file run.ledger.json not present: realized re-derived from stored " \
           "compositions only" in last
    assert "not checked: regret values" in last and "ledger sha256" not in last
    # --ledger points at it elsewhere
    shutil.copy(runs / "base" / "run.ledger.json", tmp_path / "moved.json")
    code, out, _ = _verify(capsys, path, "--ledger", tmp_path / "moved.json")
    assert code == 0 and "realized from ledger file" in out


# -- tampering with run.json -------------------------------------------------------------------
def test_horizon_edit_is_caught_by_the_ledger_and_by_the_curve(runs, tmp_path, capsys):
    from dpledger.policies.simulator import checkpoints
    path, rep = _copy(runs, tmp_path)
    rep["horizon"] = 2100           # Lazy-DP-TS: theorem and certificate do not depend on T
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1
    assert "run 0 observed 2000 rewards in all; run.json's horizon is 2100" in err
    assert "regret.curve.t: not the checkpoints of horizon 2100" in err
    # the curve's points made to fit: the ledger still sees it
    assert len(checkpoints(2100)) == len(rep["regret"]["curve"]["t"])
    rep["regret"]["curve"]["t"] = checkpoints(2100).tolist()
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1 and "horizon is 2100" in err and "regret.curve.t" not in err
    code, _, err = _verify(capsys, path, "--resimulate")    # refused before rerunning: failed
    assert code == 1


def test_means_edit(runs, tmp_path, capsys):
    path, rep = _copy(runs, tmp_path)
    rep["environment"]["means"][1] = 0.55       # a gap changes: the regret curve does not fit
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1 and "regret.curve (from the ledger file).mean" in err
    # every mean shifted alike keeps every gap: only the resimulation sees it
    path, rep = _copy(runs, tmp_path)
    rep["environment"]["means"] = [0.85, 0.55, 0.35]
    _write(path, rep)
    code, out, _ = _verify(capsys, path)
    assert code == 0 and "not checked: environment parameters" in out
    code, _, err = _verify(capsys, path, "--resimulate")
    assert code == 1
    # rerun on the stated means, the draws differ from the stored run's
    assert "resimulation differs from run.json, first at regret." in err
    assert "resimulation: ledger file sha256" in err


def test_regret_edit(runs, tmp_path, capsys):
    path, rep = _copy(runs, tmp_path)
    rep["regret"]["final_mean"] *= 0.5          # alone: inconsistent with the curve
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1 and "regret.final_mean" in err

    def halved(rep):
        reg = rep["regret"]
        for k in ("mean", "std", "lo", "hi", "band"):
            reg["curve"][k] = [x * 0.5 for x in reg["curve"][k]]
        reg["final_mean"] *= 0.5
        reg["final_std"] *= 0.5
        return rep

    path, rep = _copy(runs, tmp_path)
    _write(path, halved(rep))                   # consistent: the ledger's play contradicts it
    code, _, err = _verify(capsys, path)
    assert code == 1 and "regret.curve (from the ledger file)" in err
    (tmp_path / "run.ledger.json").unlink()     # without the ledger file only --resimulate
    code, out, _ = _verify(capsys, path)
    assert code == 0 and "not checked: regret values" in out
    code, _, err = _verify(capsys, path, "--resimulate")
    assert code == 1 and "first at regret.final_mean" in err


def test_realized_fields_only_the_ledger_gives_are_checked(runs, tmp_path, capsys):
    path, rep = _copy(runs, tmp_path)
    rep["privacy"]["realized"]["per_run"][1]["worst_round"] += 1
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1
    assert "privacy.realized (from the ledger file).per_run[1].worst_round" in err


# -- tampering with the ledger file ------------------------------------------------------------
@pytest.mark.parametrize("how", ["truncated", "byte flipped", "another run's"])
def test_tampered_ledger_file(runs, tmp_path, capsys, how):
    path, _ = _copy(runs, tmp_path)
    led = tmp_path / "run.ledger.json"
    data = led.read_bytes()
    if how == "truncated":
        led.write_bytes(data[: len(data) // 2])
    elif how == "byte flipped":
        i = data.index(b'"length":[') + 10          # a digit of a segment length
        led.write_bytes(data[:i] + bytes([data[i] ^ 1]) + data[i + 1:])
    else:
        shutil.copy(runs / "other" / "run.ledger.json", led)
    code, _, err = _verify(capsys, path)
    assert code == 1
    assert "ledger file run.ledger.json: sha256" in err and "run.json recorded" in err


@pytest.mark.parametrize("other,message", [
    ("other", "regret.curve (from the ledger file).mean"),      # same configuration, seed 8
    ("longer", "observed 2100 rewards in all; run.json's horizon is 2000"),
])
def test_another_runs_ledger_with_its_hash_copied_in(runs, tmp_path, capsys, other, message):
    """A forger who also rewrites run.json's record of the hash: the re-derivation sees it."""
    path, rep = _copy(runs, tmp_path)
    shutil.copy(runs / other / "run.ledger.json", tmp_path / "run.ledger.json")
    rep["ledger"].update(json.loads((runs / other / "run.json").read_text())["ledger"])
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1 and message in err


@pytest.mark.parametrize("name,mutate,message", [
    ("column lengths", lambda l: l["segments"]["length"].pop(), "columns differ in length"),
    ("text in a column", lambda l: l["segments"].__setitem__("length", "abc"),
     "not a valid ledger"),
    ("arm outside", lambda l: l["rows"]["arm"].__setitem__(0, 99), "stream for arm 99"),
    ("unknown release", lambda l: l["rows"]["release_id"].__setitem__(0, 5), "not interned"),
    ("a count inflated", lambda l: l["rows"]["count"].__setitem__(0, 10 ** 6),
     "privacy.realized (from the ledger file).pure_epsilon"),
])
def test_forged_ledger_with_matching_hash_is_a_finding_not_a_traceback(
        runs, tmp_path, capsys, name, mutate, message):
    path, rep = _copy(runs, tmp_path)
    led = json.loads((tmp_path / "run.ledger.json").read_text())
    mutate(led)
    data = (json.dumps(led) + "\n").encode()
    (tmp_path / "run.ledger.json").write_bytes(data)
    rep["ledger"].update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1 and message in err and "Traceback" not in err


def test_run_json_without_a_ledger_record_fails(runs, tmp_path, capsys):
    path, rep = _copy(runs, tmp_path)
    for k in ("file", "sha256", "bytes"):
        del rep["ledger"][k]
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1 and "records no ledger file entry" in err


# -- parameters the policy does not declare publicly -------------------------------------------
@pytest.mark.parametrize("name,value", [("noise", 0.0), ("fast", False), ("write_actions", False),
                                        ("anything", 1)])
def test_undeclared_parameters_are_refused(runs, tmp_path, capsys, name, value):
    path, rep = _copy(runs, tmp_path)
    rep["policy"]["params"][name] = value
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1
    assert f"policy.params: {name!r} is not a public parameter of 'lazy-dp-ts' (public: " \
           "epsilon, posterior_draw)" in err


def test_a_run_made_with_a_hidden_switch_is_refused(tmp_path, capsys):
    """Honestly recorded (a parameter that changes the run is in run.json) and refused."""
    path = tmp_path / "se.json"
    assert _main("run", "dp-se", "--set", "fast=false", "--horizon", "300", "--runs", "1",
                 "--quiet", "--out", path) == 0
    assert json.loads(path.read_text())["policy"]["params"]["fast"] is False
    code, _, err = _verify(capsys, path)
    assert code == 1 and "'fast' is not a public parameter of 'dp-se'" in err


def test_a_missing_public_parameter_is_a_mismatch(runs, tmp_path, capsys):
    path, rep = _copy(runs, tmp_path)
    del rep["policy"]["params"]["epsilon"]          # would default to 1.0
    _write(path, rep)
    code, _, err = _verify(capsys, path)
    assert code == 1 and "policy.params.epsilon: present on one side only" in err


# -- --resimulate refuses what it cannot reproduce ---------------------------------------------
def test_resimulate_refuses_os_entropy_and_absent_tables(runs, tmp_path, capsys):
    path, rep = _copy(runs, tmp_path)
    rep["rng"] = "os"
    _write(path, rep)
    code, _, err = _verify(capsys, path, "--resimulate")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "operating system's entropy (rng: os)" in err
    table = tmp_path / "t.npy"
    np.save(table, np.random.default_rng(0).random((300, 2)))
    path = tmp_path / "tab.json"
    assert _main("run", "dp-ucb", "--env", "table", "--table", table, "--horizon", "200",
                 "--runs", "2", "--quiet", "--out", path) == 0
    code, _, err = _verify(capsys, path, "--resimulate")
    assert code == 2 and "pass --table FILE" in err and len(err.strip().splitlines()) == 1
    code, out, err = _verify(capsys, path, "--resimulate", "--table", table)
    assert code == 0, err
    assert "reward table" in out and "resimulation (run.json and ledger file bytes identical)" in out
    other = tmp_path / "u.npy"
    np.save(other, np.random.default_rng(1).random((300, 2)))
    code, _, err = _verify(capsys, path, "--table", other)
    assert code == 1 and "environment.table_sha256 (from --table)" in err


def test_resimulate_other_environments_and_no_ledger_file(tmp_path, capsys):
    """Truncated-exponential with the exact sampler, and a Beta run that kept no ledger file
    (resimulated without writing one)."""
    a = tmp_path / "a.json"
    assert _main("run", "dp-se", "--env", "truncexp", "--rates", "1,3", "--sampler", "exact",
                 "--horizon", "500", "--runs", "2", "--seed", "4", "--quiet", "--out", a) == 0
    b = tmp_path / "b.json"
    assert _main("run", "mts-gaussian", "--set", "b=1", "--env", "beta", "--ab", "2:1,1:2",
                 "--horizon", "300", "--runs", "2", "--ledger-out", "none", "--quiet",
                 "--out", b) == 0
    code, out, err = _verify(capsys, a, "--resimulate")
    assert code == 0 and "ledger file bytes identical" in out, err
    code, out, err = _verify(capsys, b, "--resimulate")
    assert code == 0, err
    assert "ledger file not written (--ledger-out none)" in out
    assert "resimulation (run.json bytes identical)" in out


def test_pulls_from_segments_counts_the_actions():
    """The ledger-side pull counter against a direct count of random action sequences."""
    from dpledger.accounting.ledger import RewardLedger
    from dpledger.policies.simulator import checkpoints
    from dpledger.verify import pulls_from_segments
    rng = np.random.default_rng(12)
    R, K, T = 4, 3, 5000
    ledger = RewardLedger()
    acts = []
    for r in range(R):
        # stretches of one arm and alternations, so segments have strides 1 and > 1
        a = np.where(rng.random(T) < 0.5, rng.integers(0, K, T), np.arange(T) % K)
        a[1000:1800] = r % K
        ledger.add_actions(r, a)
        acts.append(a)
    pts = checkpoints(T)
    got = pulls_from_segments(ledger.segments, R, K, pts)
    for r in range(R):
        for k in range(K):
            want = np.cumsum(acts[r] == k)[pts - 1]
            assert np.array_equal(got[r, k], want)
