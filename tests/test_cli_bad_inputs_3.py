"""Issue 34 §2–§4: what a new user still hit — tracebacks from policy parameters, experiment
files and the step API; silent waits and late refusals; silent or misleading answers.

Refusals run in process through ``dpledger.cli.main`` and must end in exit status 2 and one
line on stderr, with nothing written (as tests/test_cli_bad_inputs_2.py); the answers that were
wrong (a byte-order mark, a read-only store, ``--json`` errors, ``inf`` per arm, ``--rng os``)
are checked for what they say now.  Memory refusals are made deterministic by fixing the
memory the process sees (``dpledger.resources``' probes), so that they hold on any machine.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.errors import DpledgerError

LINUX = sys.platform.startswith("linux")
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

_TOML_HEAD = ('name = "t"\nruns = 2\nhorizons = [200]\n[privacy]\nparameter = "{p}"\n'
              'levels = [1.0]\n')
TOMLS = {
    "ragged_ab": _TOML_HEAD.format(p="epsilon") + '[[instances]]\nname = "b"\n'
    'ab = [[1, 2], [3]]\n[[policies]]\nname = "ucb1"\n',
    "contextual": _TOML_HEAD.format(p="epsilon") + '[[instances]]\nname = "b"\n'
    'means = [0.5, 0.3]\n[[policies]]\nname = "linucb"\n',
    "gdp_of_pure": _TOML_HEAD.format(p="mu") + '[[instances]]\nname = "b"\n'
    'means = [0.5, 0.3]\n[[policies]]\nname = "lazy-dp-ts"\ncalibrate = "epsilon"\n',
    "deep": "a = " + "[" * 3000 + "]" * 3000 + "\n",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs3")
    for name, text in TOMLS.items():
        (d / f"{name}.toml").write_text(text)
    return d


@pytest.fixture
def memory(monkeypatch):
    """Make the process see ``n`` bytes available (whatever the machine has)."""
    import dpledger.resources as R

    def fix(n: int) -> None:
        monkeypatch.setattr(R, "_meminfo_available", lambda: n)
        monkeypatch.setattr(R, "_rlimit_room", lambda status: None)
        monkeypatch.setattr(R, "_cgroup_room", lambda: None)
    return fix


# (id, argv, fragment of the one stderr line, bytes available or None)
BAD = [
    # §2: tracebacks
    ("jdp-linucb epsilon=1e300", ["run", "jdp-linucb", "--env", "linear", "--horizon", "100",
                                  "--set", "epsilon=1e300"], "beyond the range of floating", None),
    ("jdp-linucb wishart epsilon=1e300",
     ["run", "jdp-linucb", "--env", "linear", "--horizon", "100", "--set", "epsilon=1e300",
      "--set", "mode=wishart"], "use a smaller epsilon", None),
    ("toml ragged Beta pairs", ["experiment", "--config", "{F}/ragged_ab.toml"],
     "ragged_ab.toml: instances[0]: beta arms need (a, b) pairs", None),
    ("toml contextual policy", ["experiment", "--config", "{F}/contextual.toml"],
     "policies[0]: linucb is a contextual policy", None),
    ("toml GDP calibration of a pure-DP policy", ["experiment", "--config", "{F}/gdp_of_pure.toml"],
     "policies[0]: lazy-dp-ts states no GDP μ by its certificate", None),
    ("toml nested too deeply", ["experiment", "--config", "{F}/deep.toml"],
     "nests its arrays or tables too deeply", None),
    # §3: late refusals, estimated first (no output folder left)
    ("experiment 1e9 runs", ["experiment", "hu-hegde-2022", "--runs", "1000000000",
                             "--out", "{O}/exp"], "this experiment needs about", 8 << 30),
    ("contextual experiment 1e9 rounds",
     ["experiment", "mishra-thakurta-2015-contextual", "--horizon", "1e9", "--runs", "1000000",
      "--out", "{O}/exp"], "this contextual simulation needs about", 8 << 30),
]


@pytest.mark.parametrize("name,argv,fragment,avail", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, argv, fragment, avail, files, tmp_path, capsys, monkeypatch, memory):
    """Exit 2, one line naming the problem, no traceback, nothing written."""
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    if avail is not None:
        memory(avail)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)     # a warning printed is a defect too
        code = main([a.replace("{F}", str(files)).replace("{O}", str(out)) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]
    assert os.listdir(out) == [], os.listdir(out)


# ---- §2: the step API estimates before it allocates ---------------------------------------------

@pytest.mark.parametrize("name,kw", [
    ("lazy-dp-ts", dict(n_arms=10 ** 9)),
    ("adap-ucb", dict(n_arms=10 ** 9)),
    ("linucb", dict(n_arms=3, dim=10 ** 6)),
    ("jdp-linucb", dict(n_arms=3, dim=10 ** 6, horizon=100)),
    ("reward-dp-linucb", dict(n_arms=10 ** 9, dim=3, horizon=10 ** 9)),
])
def test_step_api_refuses_before_allocating(name, kw, memory):
    """7.45 GiB and 21.8 TiB were allocated before any check: now one line, the estimate."""
    from dpledger.policies.step import online
    memory(4 << 30)
    with pytest.raises(DpledgerError) as info:
        online(name, **kw)
    msg = str(info.value)
    assert "\n" not in msg and "in step form needs about" in msg and "4.0 GB available" in msg


@pytest.mark.parametrize("name,K,T", [("lazy-dp-ts", 1000, None), ("dp-se", 1000, 10 ** 6),
                                      ("adap-ucb", 1000, None), ("dp-ucb", 500, 10 ** 6)])
def test_step_estimate_covers_the_state(name, K, T):
    """The estimate (built from rules of 2 and 3 arms) is at least the state a rule of K arms
    really holds, and within the engine's slack of it."""
    from dpledger.policies.registry import make_policy
    from dpledger.policies.step import _STEP_SLACK, _array_bytes, step_memory_estimate
    from dpledger.policies.step_rules import rule_for
    pol = make_policy(name)
    cls = rule_for(pol)
    real = _array_bytes(cls(pol, K, T)) + 18 * K
    est = step_memory_estimate(pol, cls, K, T)
    assert real <= est <= real + _STEP_SLACK + 64 * K


# ---- §3: a mechanism audit draws what it was asked, with progress -------------------------------

def test_matrix_audit_draws_the_trials_asked_with_progress():
    """A 3000-square matrix trial is 4.5e6 entries: a chunk is one trial (it was 16 384, 16× the
    work of --trials 1000).  A smaller matrix audited with a progress callback: the totals
    count every entry of both sides, the counts only grow, and the trials do not depend on
    how they are batched."""
    from dpledger.audits.mechanisms import (audit_spec, entries_per_trial, spec_chunk,
                                            spec_items, spec_sampler)
    _, big = spec_items(["gaussian_sym_matrix:sigma=2,sensitivity=2.8,dim=3000"])
    assert entries_per_trial(big) == 3000 * 3001 // 2 and spec_chunk(big) == 1
    _, cheap = spec_items(["laplace:eps=1", "gaussian:mu=0.5"])
    assert spec_chunk(cheap) == 16_384            # scalar audits are drawn as before
    spec = ["gaussian_sym_matrix:sigma=2,sensitivity=2.8,dim=120"]
    _, items = spec_items(spec)
    E, C = entries_per_trial(items), spec_chunk(items)
    assert E == 120 * 121 // 2 and C == (1 << 20) // E
    seen = []
    audit_spec(spec, 2 * C + 3, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (2 * 3 * C * E, 2 * 3 * C * E)
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:], strict=False))
    s = spec_sampler(items, 5)
    whole = s(1, 0, C + 10)
    np.testing.assert_array_equal(whole, np.concatenate([s(1, 0, 7), s(1, 7, C + 3)]))


# ---- §4: answers that were wrong ---------------------------------------------------------------

def test_a_byte_order_mark_is_no_data(tmp_path, capsys):
    """A CSV log, a CSV table and a JSON table saved with a UTF-8 BOM are read as without it."""
    bom = "\ufeff"
    log = "action,reward,x1,x2\n0,1,0.5,0.1\n1,0,0.2,0.3\n0,0,0.1,0.1\n1,1,0.3,0.2\n"
    table = "0.5,0.2\n0.3,0.4\n"
    outs = []
    for mark in ("", bom):
        (tmp_path / "log.csv").write_text(mark + log, encoding="utf-8")
        (tmp_path / "t.csv").write_text(mark + table, encoding="utf-8")
        (tmp_path / "t.json").write_text(mark + "[[0.5, 0.2], [0.3, 0.4]]", encoding="utf-8")
        got = []
        for argv in (["run", "linucb", "--env", "replay", "--log", str(tmp_path / "log.csv")],
                     ["run", "ucb1", "--env", "table", "--table", str(tmp_path / "t.csv"),
                      "--horizon", "2"],
                     ["run", "ucb1", "--env", "table", "--table", str(tmp_path / "t.json"),
                      "--horizon", "2"]):
            assert main(argv + ["--quiet", "--out", str(tmp_path / "r.json")]) == 0, \
                capsys.readouterr().err
            rep = json.loads((tmp_path / "r.json").read_text())
            got.append((rep["regret"], rep["horizon"]))
        outs.append(got)
    assert outs[0] == outs[1]


def test_json_commands_refuse_in_json(capsys):
    for argv in (["bounds", "dp-ucb", "--json", "--horizon", "1"],
                 ["compose", "nonsense:x=1", "--json"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        doc = json.loads(err[0])
        assert doc["command"] == argv[0] and doc["error"]


def test_bounds_say_where_a_threshold_does_not_apply(capsys):
    """μ* = 1: kl(μ_a, 1) = ∞ for every suboptimal arm, so Theorem 3's thresholds (and the d_ε
    ones) separate no regimes: "not applicable", never "inf" per arm; the JSON is valid JSON
    (no Infinity) and the lower bound that does apply (slope Σ 1/(6ε)) is still given."""
    argv = ["bounds", "dp-ucb", "--means", "1,0.5"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert re.search(r"\binf\b", text) is None, text
    assert "Theorem 3 (consequence 3), eq. (4): needs a finite d_inf" in text
    assert main(argv + ["--json"]) == 0
    raw = capsys.readouterr().out
    assert "Infinity" not in raw and "NaN" not in raw
    doc = json.loads(raw)
    by_key = {b["key"]: b for b in doc["bounds"]}
    thm3 = by_key["azize-basu-2022/thm3"]
    assert math.isclose(thm3["value"], math.log(10_000) / 6.0, rel_tol=1e-12)
    for key in ("azize-basu-2022/thm3-thresholds", "azize-2025/thresholds"):
        assert by_key[key]["value"] is None and by_key[key]["unmet"], by_key[key]


def test_rng_os_runs_contextual_policies(tmp_path, capsys):
    """As the K-armed policies: with the exact sampler; no seed recorded, the rng block says
    why; two runs differ; verify accepts the file.  Without the exact sampler: refused as
    K-armed runs are."""
    out = tmp_path / "r.json"
    argv = ["run", "jdp-linucb", "--env", "linear", "--dim", "3", "--arms", "3",
            "--horizon", "300", "--runs", "2", "--quiet", "--rng", "os"]
    assert main(argv + ["--sampler", "exact", "--out", str(out)]) == 0, capsys.readouterr().err
    rep = json.loads(out.read_text())
    assert rep["seed"] is None and rep["rng"]["source"] == "os"
    assert rep["rng"]["reproducible"] is False
    assert main(["verify", str(out)]) == 0, capsys.readouterr()
    assert main(argv + ["--out", str(tmp_path / "f.json")]) == 2
    assert "exact sampler" in capsys.readouterr().err
    assert not (tmp_path / "f.json").exists()


def test_extreme_epsilon_is_handled_without_warnings(tmp_path, capsys):
    """DP-SE at ε = 1e-300: its epoch length (≈ 1e302) wrapped to a negative int64 round count
    ("ledger rows need 0 <= start < stop"); now the epoch is cut by the run's end, no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert main(["run", "dp-se", "--set", "epsilon=1e-300", "--horizon", "200", "--quiet",
                     "--out", str(tmp_path / "r.json")]) == 0, capsys.readouterr().err
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["regret"]["final_mean"] >= 0


# ---- §4: a read-only store ----------------------------------------------------------------------

def _as_reader(argv, cwd):
    """``dpledger ARGV`` as a user who cannot write the store: root ignores permission bits,
    so as root the child becomes nobody (uid 65534)."""
    pre = None
    if os.geteuid() == 0:
        def pre():
            os.setgid(65534)
            os.setuid(65534)
    env = dict(ENV, NUMBA_CACHE_DIR=str(cwd / "numba"), HOME=str(cwd))
    return subprocess.run([sys.executable, "-m", "dpledger"] + argv, capture_output=True,
                          text=True, env=env, cwd=cwd, preexec_fn=pre, timeout=300)


@pytest.mark.skipif(not LINUX, reason="POSIX permissions and setuid")
def test_read_only_store_reads_and_refuses_writes():
    """A valid store the user cannot write — in a folder the user cannot write either, and in
    one the user can: ``ledger status`` reads it; ``ledger record`` says it is read-only, in one
    line, and leaves no -wal/-shm beside it."""
    import pathlib
    import shutil
    import tempfile
    tmp_path = pathlib.Path(tempfile.mkdtemp(prefix="dpledger-ro-"))   # nobody can reach it
    try:
        _read_only_store(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _read_only_store(tmp_path):
    tmp_path.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    (work / "numba").mkdir()
    for folder_mode in (0o755, 0o777):
        folder = tmp_path / f"store-{folder_mode:o}"
        folder.mkdir()
        store = folder / "s.db"
        assert main(["ledger", "init", str(store)]) == 0
        assert main(["ledger", "record", str(store), "laplace:eps=1", "--arm", "0",
                     "--start", "0", "--stop", "1"]) == 0
        store.chmod(0o444)
        folder.chmod(folder_mode)
        for p in (work, work / "numba"):
            p.chmod(0o777)
        before = sorted(os.listdir(folder))
        st = _as_reader(["ledger", "status", str(store)], work)
        assert st.returncode == 0, st.stderr
        assert "1 record" in st.stdout or "records: 1" in st.stdout, st.stdout
        rec = _as_reader(["ledger", "record", str(store), "laplace:eps=1", "--arm", "0",
                          "--start", "1", "--stop", "2"], work)
        lines = rec.stderr.strip().splitlines()
        assert rec.returncode == 2 and len(lines) == 1, rec.stderr
        assert "is read-only: nothing can be appended" in lines[0]
        assert sorted(os.listdir(folder)) == before
