"""Issue 13: every bad input to the command line is answered by exit status 2 and one clear line
on stderr — never a traceback, never a half-written file — and output paths are checked before
any work starts.

The table runs in process through ``dpledger.cli.main`` (fast); a few rows run as real
subprocesses to check the process's exit status and stderr as a user sees them.
"""
from __future__ import annotations

import json
import errno
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from dpledger.cli import main


# ---- files every row may refer to --------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    run = d / "run.json"
    assert main(["run", "lazy-dp-ts", "--horizon", "300", "--runs", "2", "--out", str(run),
                 "--quiet"]) == 0
    audit = d / "audit.json"
    assert main(["audit", "lazy-dp-ts", "--trials", "20", "--horizon", "100", "--out",
                 str(audit), "--quiet"]) == 0
    (d / "empty_object.json").write_text("{}")
    (d / "list.json").write_text("[1, 2]")
    (d / "empty.json").write_text("")
    (d / "nan.json").write_text('{"a": NaN}')
    (d / "latin1.json").write_bytes(b'{"name": "caf\xe9"}')
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "folder").mkdir()
    (d / "clash.ledger.json").mkdir()       # the default ledger path of --out clash.json
    (d / "plain.txt").write_text("not a folder")
    table = np.zeros((50, 2))
    table[:, 1] = 1.0
    np.save(d / "d0.npy", table)
    t1 = table.copy()
    t1[0, 0] = 1.0
    np.save(d / "d1.npy", t1)
    np.save(d / "d_far.npy", 1.0 - table)
    (d / "t.csv").write_text("0.5,0.2\n0.3,0.4\n0.1,0.9\n")
    # a run.json whose structure is right but whose regret curve was cut short
    rep = json.loads(run.read_text())
    rep["regret"]["curve"]["mean"] = rep["regret"]["curve"]["mean"][:-1]
    (d / "cut.json").write_text(json.dumps(rep))
    rep = json.loads(run.read_text())
    del rep["privacy"]["checks"]
    (d / "nochecks.json").write_text(json.dumps(rep))
    rep = json.loads(run.read_text())
    rep["environment"]["means"] = ["a", "b"]
    (d / "badmeans.json").write_text(json.dumps(rep))
    return d


def _readonly_dir(tmp_path, monkeypatch) -> str:
    """A folder nobody may write in: a chmod 0555 folder for a normal user; for root (which
    ignores permission bits) /sys, a read-only file system on Linux; where neither holds, a
    folder whose write probe fails as a read-only mount's would (EROFS from mkstemp)."""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
        return str(ro)
    if os.path.isdir("/sys"):
        try:
            fd = os.open("/sys/.dpledger-probe", os.O_CREAT | os.O_WRONLY)
        except OSError:
            return "/sys"
        os.close(fd)
        os.unlink("/sys/.dpledger-probe")
    ro = tmp_path / "ro"
    ro.mkdir()
    import tempfile
    import dpledger.inputs as inputs_mod
    real = tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if os.path.realpath(str(kwargs.get("dir", ""))) == os.path.realpath(str(ro)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real(*args, **kwargs)
    monkeypatch.setattr(inputs_mod.tempfile, "mkstemp", mkstemp)
    return str(ro)


# ---- the table ---------------------------------------------------------------------------------
# (id, argv, a fragment the one stderr line must contain).  In argv, {F} is the folder of the
# module's input files, {O} a fresh empty output folder for the row (it must stay empty),
# {RO} a read-only folder.
RUN = ["run", "lazy-dp-ts", "--horizon", "50", "--runs", "1"]
BAD = [
    # -- output paths, checked before the simulation
    ("run --out a directory", RUN + ["--out", "{O}"], "is a directory"),
    ("run --plot a directory", RUN + ["--out", "{O}/r.json", "--plot", "{O}"], "is a directory"),
    ("run --ledger-out a directory", RUN + ["--out", "{O}/r.json", "--ledger-out", "{O}"],
     "is a directory"),
    ("run --plot .xyz", RUN + ["--out", "{O}/r.json", "--plot", "{O}/r.xyz"],
     "unsupported file type .xyz"),
    ("run --out under a file", RUN + ["--out", "{F}/plain.txt/r.json"], "is not a directory"),
    ("run --plot under a file", RUN + ["--out", "{O}/r.json", "--plot", "{F}/plain.txt/p.png"],
     "is not a directory"),
    ("run --ledger-out under a file",
     RUN + ["--out", "{O}/r.json", "--ledger-out", "{F}/plain.txt/l.json"], "is not a directory"),
    ("run --out read-only", RUN + ["--out", "{RO}/r.json"], "cannot write in"),
    ("run --plot read-only", RUN + ["--out", "{O}/r.json", "--plot", "{RO}/p.png"],
     "cannot write in"),
    ("run --out empty", RUN + ["--out", ""], "--out needs a file name"),
    ("run --out = --ledger-out", RUN + ["--out", "{O}/r.json", "--ledger-out", "{O}/r.json"],
     "name the same file"),
    ("run --plot = --out", RUN + ["--out", "{O}/r.json", "--plot", "{O}/r.json"],
     "unsupported file type .json"),
    ("run default ledger is a directory", RUN + ["--out", "{F}/clash.json"],
     "clash.ledger.json is a directory"),
    # -- environment options that do not apply
    ("--rates without --env truncexp", RUN + ["--rates", "1,2", "--out", "{O}/r.json"],
     "--rates describes --env truncexp"),
    ("--ab without --env beta", RUN + ["--ab", "1:1,2:2", "--out", "{O}/r.json"],
     "--ab describes --env beta"),
    ("--env beta with --means", RUN + ["--env", "beta", "--ab", "1:1,2:2", "--means", "0.5,0.4",
                                       "--out", "{O}/r.json"], "--means describes --env bernoulli"),
    ("--table without --env table", RUN + ["--table", "{F}/t.csv", "--out", "{O}/r.json"],
     "--table describes --env table"),
    ("--env truncexp with --means", RUN + ["--env", "truncexp", "--rates", "1,2", "--means",
                                           "0.5,0.4", "--out", "{O}/r.json"], "--means describes"),
    ("--means empty item", RUN + ["--means", "0.9,,0.4", "--out", "{O}/r.json"], "empty item"),
    ("--means trailing comma", RUN + ["--means", "0.9,0.4,", "--out", "{O}/r.json"],
     "empty item"),
    ("--means empty", RUN + ["--means", "", "--out", "{O}/r.json"], "needs comma-separated"),
    ("--ab empty item", RUN + ["--env", "beta", "--ab", "1:1,,2:2", "--out", "{O}/r.json"],
     "empty item"),
    ("--ab not a number", RUN + ["--env", "beta", "--ab", "1:x,2:2", "--out", "{O}/r.json"],
     "--ab must be a number"),
    ("--range one number", RUN + ["--range", "0", "--out", "{O}/r.json"], "lo,hi"),
    ("--range words", RUN + ["--range", "a,b", "--out", "{O}/r.json"], "--range must be a number"),
    ("--set twice", RUN + ["--set", "epsilon=1", "--set", "epsilon=2", "--out", "{O}/r.json"],
     "given twice"),
    # -- numbers
    ("--horizon 1e30 echoed as typed", ["run", "ucb1", "--horizon", "1e30", "--out", "{O}/r.json"],
     "got '1e30'"),
    ("--horizon text", ["run", "ucb1", "--horizon", "abc", "--out", "{O}/r.json"],
     "--horizon must be an integer"),
    ("--horizon empty", ["run", "ucb1", "--horizon", "", "--out", "{O}/r.json"],
     "--horizon must be an integer"),
    ("--horizon 1e999999999", ["run", "ucb1", "--horizon", "1e999999999", "--out", "{O}/r.json"],
     "--horizon must be <="),
    ("--runs fractional", ["run", "ucb1", "--horizon", "50", "--runs", "1.5", "--out",
                           "{O}/r.json"], "--runs must be an integer"),
    ("--runs inf", ["run", "ucb1", "--horizon", "50", "--runs", "inf", "--out", "{O}/r.json"],
     "finite"),
    ("--seed negative", RUN + ["--seed", "-3", "--out", "{O}/r.json"], "--seed must be >= 0"),
    ("--workers zero", RUN + ["--workers", "0", "--out", "{O}/r.json"], "--workers must be >= 1"),
    ("--delta zero", RUN + ["--delta", "0", "--out", "{O}/r.json"], "--delta must lie in (0, 1)"),
    ("--delta two", RUN + ["--delta", "2", "--out", "{O}/r.json"], "--delta must lie in (0, 1)"),
    ("--delta underflow", RUN + ["--delta", "1e-400", "--out", "{O}/r.json"], "too small"),
    ("--delta text", RUN + ["--delta", "small", "--out", "{O}/r.json"], "must be a number"),
    ("--delta nan", RUN + ["--delta", "nan", "--out", "{O}/r.json"], "finite"),
    # -- show
    ("show {}", ["show", "{F}/empty_object.json"], "a run.json was expected; this is an empty"),
    ("show audit.json", ["show", "{F}/audit.json"],
     "a run.json was expected; this is an audit result"),
    ("show a ledger", ["show", "{F}/run.ledger.json"], "a run.json was expected; this is a ledger"),
    ("show a JSON array", ["show", "{F}/list.json"], "this is a JSON array"),
    ("show a directory", ["show", "{F}/folder"], "is a directory; a run.json was expected"),
    ("show missing", ["show", "{F}/missing.json"], "no such file"),
    ("show non-UTF-8", ["show", "{F}/latin1.json"], "not UTF-8"),
    ("show NUL in the name", ["show", "{F}/run\0.json"], "contains a NUL character"),
    ("run --out NUL in the name", RUN + ["--out", "{O}/r\0.json"], "contains a NUL character"),
    ("show empty file", ["show", "{F}/empty.json"], "is empty"),
    ("show NaN in JSON", ["show", "{F}/nan.json"], "malformed JSON"),
    ("show nesting too deep", ["show", "{F}/deep.json"], "malformed JSON"),
    ("show --ledger a directory", ["show", "{F}/run.json", "--ledger", "{F}/folder"],
     "is a directory; a ledger was expected"),
    ("show --ledger missing", ["show", "{F}/run.json", "--ledger", "{F}/missing.json"],
     "no such file"),
    ("show --ledger a run.json", ["show", "{F}/run.json", "--ledger", "{F}/run.json"],
     "a ledger was expected; this is a run.json"),
    ("show --plot .xyz", ["show", "{F}/run.json", "--plot", "{O}/p.xyz"], "unsupported file type"),
    ("show --plot a directory", ["show", "{F}/run.json", "--plot", "{O}"], "is a directory"),
    ("show --plot without a ledger", ["show", "{F}/audit.json", "--plot", "{O}/p.png"],
     "this is an audit result"),
    ("show a cut regret curve", ["show", "{F}/cut.json"], "malformed run.json"),
    ("show without checks", ["show", "{F}/nochecks.json"], "privacy.checks is missing"),
    ("show means of the wrong type", ["show", "{F}/badmeans.json"], "malformed run.json"),
    # -- curve
    ("curve {}", ["curve", "{F}/empty_object.json"], "a run.json was expected"),
    ("curve audit.json", ["curve", "{F}/audit.json"], "this is an audit result"),
    ("curve --deltas 0,2", ["curve", "{F}/run.json", "--deltas", "0,2"],
     "--deltas must lie in (0, 1), got 0"),
    ("curve --deltas 1e-400", ["curve", "{F}/run.json", "--deltas", "1e-400"], "too small"),
    ("curve --deltas text", ["curve", "{F}/run.json", "--deltas", "a,b"], "must be a number"),
    ("curve --deltas empty item", ["curve", "{F}/run.json", "--deltas", "0.1,,0.2"], "empty item"),
    ("curve --epsilons negative", ["curve", "{F}/run.json", "--epsilons", "-1"],
     "--epsilons must be >= 0"),
    ("curve --plot .xyz", ["curve", "{F}/run.json", "--plot", "{O}/c.xyz"],
     "unsupported file type"),
    ("curve --plot read-only", ["curve", "{F}/run.json", "--plot", "{RO}/c.png"],
     "cannot write in"),
    # -- verify
    ("verify a directory", ["verify", "{F}/folder"], "is a directory"),
    ("verify non-UTF-8", ["verify", "{F}/latin1.json"], "not UTF-8"),
    ("verify {}", ["verify", "{F}/empty_object.json"], "a run.json was expected"),
    ("verify audit.json", ["verify", "{F}/audit.json"], "this is an audit result"),
    ("verify a JSON array", ["verify", "{F}/list.json"], "a run.json was expected"),
    # -- plot
    ("plot with an audit.json", ["plot", "{F}/run.json", "{F}/audit.json", "--out", "{O}/p.png"],
     "audit.json: a run.json was expected; this is an audit result"),
    ("plot --out a directory", ["plot", "{F}/run.json", "--out", "{O}"], "is a directory"),
    ("plot --out .xyz", ["plot", "{F}/run.json", "--out", "{O}/p.xyz"], "unsupported file type"),
    ("plot --out read-only", ["plot", "{F}/run.json", "--out", "{RO}/p.png"], "cannot write in"),
    ("plot --labels count", ["plot", "{F}/run.json", "{F}/run.json", "--labels", "a",
                             "--out", "{O}/p.png"], "--labels has 1 names for 2 files"),
    ("plot --labels empty item", ["plot", "{F}/run.json", "--labels", ",", "--out", "{O}/p.png"],
     "empty item"),
    # -- audit
    ("audit --trials 0", ["audit", "lazy-dp-ts", "--trials", "0", "--out", "{O}/a.json"],
     "--trials must be >= 2"),
    ("audit --trials 1e30", ["audit", "lazy-dp-ts", "--trials", "1e30", "--out", "{O}/a.json"],
     "--trials must be <= 1e9, got '1e30'"),
    ("run --runs 1e30", ["run", "ucb1", "--horizon", "50", "--runs", "1e30", "--out",
                         "{O}/r.json"], "--runs must be <= 1e9"),
    ("audit white-box ucb1", ["audit", "ucb1", "--trials", "50", "--mode", "whitebox",
                              "--out", "{O}/a.json"], "makes no private release"),
    ("audit --out a directory", ["audit", "lazy-dp-ts", "--trials", "50", "--out", "{O}"],
     "is a directory"),
    ("audit --out read-only", ["audit", "lazy-dp-ts", "--trials", "50", "--out", "{RO}/a.json"],
     "cannot write in"),
    ("audit --confidence 1", ["audit", "lazy-dp-ts", "--trials", "50", "--confidence", "1",
                              "--out", "{O}/a.json"], "--confidence must lie in (0, 1)"),
    ("audit --horizon 1e30", ["audit", "lazy-dp-ts", "--trials", "50", "--horizon", "1e30",
                              "--out", "{O}/a.json"], "got '1e30'"),
    ("audit --arms 1", ["audit", "lazy-dp-ts", "--trials", "50", "--arms", "1",
                        "--out", "{O}/a.json"], "--arms must be >= 2"),
    ("audit --workers 0", ["audit", "lazy-dp-ts", "--trials", "50", "--workers", "0",
                           "--out", "{O}/a.json"], "--workers must be >= 1"),
    ("audit --workers many", ["audit", "lazy-dp-ts", "--trials", "50", "--workers", "many",
                              "--out", "{O}/a.json"], "--workers"),
    ("audit --range three", ["audit", "lazy-dp-ts", "--trials", "50", "--range", "0,1,2",
                             "--out", "{O}/a.json"], "lo,hi"),
    ("audit --stop-at text", ["audit", "lazy-dp-ts", "--trials", "50", "--stop-at", "late",
                              "--out", "{O}/a.json"], "--stop-at must be an integer"),
    ("audit --pair a directory", ["audit", "lazy-dp-ts", "--trials", "50", "--pair", "{F}/folder",
                                  "{F}/d1.npy", "--out", "{O}/a.json"], "is a directory"),
    ("audit --pair a run.json", ["audit", "lazy-dp-ts", "--trials", "50", "--pair",
                                 "{F}/run.json", "{F}/d1.npy", "--out", "{O}/a.json"],
     "a reward table (a JSON array of rows) was expected; this is a run.json"),
    ("audit --pair not neighbours", ["audit", "lazy-dp-ts", "--trials", "50", "--pair",
                                     "{F}/d0.npy", "{F}/d_far.npy", "--out", "{O}/a.json"],
     "differ in exactly one row"),
    # -- experiment, compose, policies, the command itself
    ("experiment unknown", ["experiment", "nobody-2030", "--out", "{O}/x"], "unknown experiment"),
    ("experiment --workers 0", ["experiment", "hu-2025", "--workers", "0", "--out", "{O}/x"],
     "--workers must be >= 1"),
    ("experiment --out a file", ["experiment", "hu-2025", "--quick", "--out", "{F}/plain.txt"],
     "exists and is not a folder"),
    ("experiment --out read-only", ["experiment", "hu-2025", "--quick", "--out", "{RO}/x"],
     "cannot write in"),
    ("experiment --scheduler empty", ["experiment", "hu-2025", "--scheduler", "", "--out",
                                      "{O}/x"], "--scheduler needs an address"),
    ("compose zero epsilon", ["compose", "laplace:eps=0"], "epsilon must be > 0"),
    ("compose --delta 2", ["compose", "laplace:eps=1", "--delta", "2"], "(0, 1)"),
    ("compose --delta underflow", ["compose", "laplace:eps=1", "--delta", "1e-400"], "too small"),
    ("compose unknown kind", ["compose", "poisson:rate=1"], "poisson"),
    ("policies extra argument", ["policies", "all"], "unrecognized arguments"),
    ("no command", [], "a command is needed"),
    ("unknown command", ["simulate"], "invalid choice"),
    ("run without a policy", ["run"], "the following arguments are required"),
    ("unknown policy", ["run", "ucb9", "--out", "{O}/r.json"], "ucb9"),
    ("unknown option", ["run", "ucb1", "--horizons", "5"], "unrecognized arguments"),
]


def _fill(argv, files, out, ro):
    return [a.replace("{F}", str(files)).replace("{O}", str(out)).replace("{RO}", ro or "")
            for a in argv]


def _run_main(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:           # argparse's own errors
        code = exc.code
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_the_table_has_60_rows():
    assert len(BAD) >= 60
    assert len({b[0] for b in BAD}) == len(BAD)


@pytest.mark.parametrize("name,argv,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, argv, fragment, files, tmp_path, capsys, monkeypatch):
    """Exit 2, one line on stderr naming the problem, no traceback, nothing written."""
    ro = _readonly_dir(tmp_path, monkeypatch) if any("{RO}" in a for a in argv) else ""
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)              # defaults such as run.json land here too
    before = sorted(os.listdir(files))
    code, stdout, err = _run_main(_fill(argv, files, out, ro), capsys)
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0], lines[0]
    assert os.listdir(out) == [], os.listdir(out)                # nothing half-written
    assert sorted(os.listdir(files)) == before
    if name.startswith("audit"):
        assert "auditing" not in err                              # no banner before the error


SUBPROCESS = ["show audit.json", "run --plot .xyz", "curve --deltas 0,2", "no command",
              "verify non-UTF-8"]


@pytest.mark.parametrize("name", SUBPROCESS)
def test_bad_input_subprocess(name, files, tmp_path):
    """The real process: exit status 2 and one stderr line (no traceback from interpreter exit)."""
    argv = next(b[1] for b in BAD if b[0] == name)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-m", "dpledger", *_fill(argv, files, out, "")],
                       capture_output=True, text=True, cwd=out, env=env)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert os.listdir(out) == []


# ---- outputs checked before any work -----------------------------------------------------------

@pytest.mark.parametrize("where", ["directory", "under a file", "read-only"])
def test_unwritable_output_fails_before_the_simulation(where, files, tmp_path, monkeypatch,
                                                       capsys):
    """The simulation (and the audit, and the experiment) is never called, and no file is left
    behind, when an output cannot be written."""
    import dpledger.commands.run as run_cmd
    import dpledger.audits.policy as audit_mod
    import dpledger.experiments.common as exp_common
    called = []
    monkeypatch.setattr(run_cmd, "simulate", lambda *a, **k: called.append("simulate"))
    monkeypatch.setattr(audit_mod, "audit_policy", lambda *a, **k: called.append("audit"))
    monkeypatch.setattr(exp_common, "run_experiment", lambda *a, **k: called.append("experiment"))
    if where == "directory":
        target = tmp_path / "d"
        target.mkdir()
        bad = str(target)
    elif where == "under a file":
        bad = str(files / "plain.txt" / "x")
    else:
        ro = _readonly_dir(tmp_path, monkeypatch)
        bad = os.path.join(ro, "x")
    listing = sorted(os.listdir(tmp_path))
    ok = str(tmp_path / "ok.json")
    for argv in (["run", "ucb1", "--horizon", "1e9", "--runs", "1000", "--out", bad + ".json"],
                 ["run", "ucb1", "--out", ok, "--plot", bad + ".png"],
                 ["run", "ucb1", "--out", ok, "--ledger-out", bad + ".json"],
                 ["audit", "lazy-dp-ts", "--trials", "100000", "--out", bad + ".json"],
                 ["experiment", "hu-2025", "--out", bad if where != "directory"
                  else str(files / "plain.txt")]):
        if where == "directory":
            argv = [a if not a.startswith(bad) else bad for a in argv]
        code, _, err = _run_main(argv, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, (argv, err)
    assert called == []
    assert sorted(os.listdir(tmp_path)) == listing
    assert not any(n.startswith((".tmp-", ".dpledger-probe")) for n in os.listdir(tmp_path))


def test_plot_extensions_are_all_written(tmp_path):
    """Every extension the checks accept is one matplotlib's Agg canvas really writes."""
    from dpledger.inputs import PLOT_EXTENSIONS
    from dpledger.plots import _plt, _save
    plt = _plt()
    for ext in PLOT_EXTENSIONS:
        fig, ax = plt.subplots(figsize=(1, 1))
        ax.plot([1, 2], [1, 2])
        path = tmp_path / f"f.{ext}"
        _save(fig, str(path))
        plt.close(fig)
        assert path.stat().st_size > 0, ext
    assert sorted(os.listdir(tmp_path)) == sorted(f"f.{e}" for e in PLOT_EXTENSIONS)


def test_failed_plot_leaves_no_temp_file(tmp_path):
    from dpledger.plots import _plt, _save
    plt = _plt()
    fig, ax = plt.subplots(figsize=(1, 1))

    def broken(path, **kw):
        with open(path, "w") as fh:     # a partly written file, then a failure
            fh.write("partial")
        raise RuntimeError("renderer failed")

    fig.savefig = broken
    with pytest.raises(RuntimeError):
        _save(fig, str(tmp_path / "p.png"))
    plt.close(fig)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_json_files_follow_the_umask(tmp_path, mask):
    """write_json_atomic's file gets 0666 & ~umask, like any file the user writes (mkstemp alone
    gives 0600)."""
    from dpledger.accounting.schema import write_json_atomic, write_json_stream_atomic
    old = os.umask(mask)
    try:
        write_json_atomic(tmp_path / "a.json", {"x": 1})
        write_json_stream_atomic(tmp_path / "b.json", {"x": np.arange(3)})
        (tmp_path / "c.txt").write_text("plain open()")
    finally:
        os.umask(old)
    want = 0o666 & ~mask
    for name in ("a.json", "b.json", "c.txt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == want, name


# ---- numbers and messages ----------------------------------------------------------------------

def test_horizon_limit_matches_validate_horizon():
    """The CLI checks the horizon's upper bound before validate_horizon does (to echo the typed
    text); the two limits are the same number."""
    from dpledger.commands.audit import MAX_HORIZON as AUDIT_MAX
    from dpledger.commands.run import MAX_HORIZON
    from dpledger.errors import DpledgerError
    from dpledger.policies.base import validate_horizon
    assert MAX_HORIZON == AUDIT_MAX
    assert validate_horizon(MAX_HORIZON, 2) == MAX_HORIZON
    with pytest.raises(DpledgerError, match="maximum"):
        validate_horizon(MAX_HORIZON + 1, 2)


@pytest.mark.parametrize("text,value", [("1e5", 100000), ("10", 10), ("+7", 7), ("2.0", 2),
                                        ("1e30", 10 ** 30), (" 3 ", 3)])
def test_parse_int_is_exact(text, value):
    from dpledger.inputs import parse_int
    got = parse_int("--n", text)
    assert got == value and type(got) is int


@pytest.mark.parametrize("text", ["0.1", "1e-300", "5e-324", "1.7976931348623157e308", "-2.5"])
def test_parse_float_agrees_with_float(text):
    from dpledger.inputs import parse_float
    assert parse_float("--x", text) == float(text)


def test_plot_title_states_each_files_runs(files, tmp_path, monkeypatch):
    """Three runs of 5, 20 and 3 runs: the title names all three, not the first one's."""
    import dpledger.plots as plots
    rep = json.loads((files / "run.json").read_text())
    reps = [dict(rep, runs=r) for r in (5, 20, 3)]
    titles = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: titles.append(fig.axes[0].get_title()))
    plots.plot_regret(reps, str(tmp_path / "p.png"))
    plots.plot_regret(reps[:1] * 2, str(tmp_path / "p.png"))
    assert "R = 5, 20, 3 runs" in titles[0] and titles[0].count("runs") == 1
    assert titles[1].startswith("5 runs each")


def test_quick_claims_state_the_runs_used(tmp_path, monkeypatch):
    """claims.md states the T and R actually simulated; the choices of the full experiment are
    labelled as such in a --quick run."""
    import types

    from dpledger.experiments.common import Summary, run_experiment
    from dpledger.sweep import RunConfig
    mod = types.SimpleNamespace(
        NAME="tiny", TITLE="Tiny", CHOICES=["20 runs per setting"],
        configs=lambda quick, ov: [RunConfig("a", "ucb1", {}, {"kind": "bernoulli",
                                                               "means": [0.6, 0.4]}, 40, 3)],
        summarize=lambda reports, out, quick, ov: Summary([], [], []))
    run_experiment(mod, str(tmp_path / "q"), quick=True, quiet=True)
    text = (tmp_path / "q" / "claims.md").read_text()
    assert "T = 40 rounds, 3 runs per setting" in text
    assert "for the full experiment; this --quick run used the sizes stated above" in text


@pytest.mark.parametrize("argv,zero", [
    (["audit", "lazy-dp-ts", "--trials", "20", "--horizon", "100"], True),
    (["audit", "ucb1", "--trials", "50", "--horizon", "100"], False)])
def test_zero_lower_bound_is_explained(argv, zero, tmp_path, capsys):
    """An audit whose lower bound is 0 (20 trials: no power) says what that means — not a pass,
    not a failure; one with a positive bound (UCB1 leaks) does not say it."""
    out = tmp_path / "a.json"
    assert main(argv + ["--out", str(out)]) == 0
    text = capsys.readouterr().out
    lower = json.loads(out.read_text())["epsilon_lower"]
    assert (lower == 0) == zero
    assert ("no evidence of leakage at its power: neither a pass nor a failure" in text) == zero


def test_show_summary_states_its_numbering(files, capsys):
    """The worst-off reward line follows docs/concepts.md (rounds from 1; runs, arms and
    observations from 0, as in run.json) and says so in place; counts are singular at 1."""
    rep = json.loads((files / "run.json").read_text())
    w = rep["privacy"]["realized"]["worst_reward"]
    assert main(["show", str(files / "run.json")]) == 0
    text = capsys.readouterr().out
    assert (f"worst-off reward: observation {w['index']} of arm {w['arm']} in run {w['run']} "
            f"(these count from 0), observed at round {w['round']} (rounds count from 1)") in text
    from dpledger.commands.show_summary import summary_text
    one = dict(rep, runs=1, ledger=dict(rep["ledger"], distinct_releases=1, rows=1, noise_draws=1))
    text = summary_text(one)
    assert "1 run, seed" in text and "1 record, 1 distinct release, " in text
    assert text.rstrip().count("1 noise draw") == 1 and "1 noise draws" not in text


def test_show_without_ledger_explains_and_exits_0(files, tmp_path, capsys):
    """No --ledger and no default ledger file: the summary and a note, exit 0; the same with
    --plot is an error (the plot would silently be missing)."""
    alone = tmp_path / "alone.json"
    alone.write_text((files / "run.json").read_text())
    assert main(["show", str(alone)]) == 0
    assert "per-reward view unavailable" in capsys.readouterr().out
    assert main(["show", str(alone), "--plot", str(tmp_path / "p.png")]) == 2
    assert "--plot needs the ledger" in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists()


def test_verify_labels_stored_numbers(files, tmp_path, capsys):
    """An edited certificate: the printed numbers are labelled as the file's, the mismatch is
    listed as stored vs recomputed, exit 1."""
    rep = json.loads((files / "run.json").read_text())
    rep["privacy"]["certificate"]["pure_epsilon"] *= 0.5
    p = tmp_path / "edited.json"
    p.write_text(json.dumps(rep))
    assert main(["verify", str(p)]) == 1
    cap = capsys.readouterr()
    assert "pure_epsilon as stored in the file: certificate" in cap.out
    assert "privacy.certificate.pure_epsilon: stored" in cap.err and "recomputed" in cap.err


def test_audit_workers_default_auto_gives_the_same_bytes(tmp_path):
    """``audit --workers`` defaults to auto (the CPUs this process may use); a white-box and a
    black-box audit.json are byte-identical with auto, 1 and 3 workers (chunk c of side s
    draws from its own seed stream, whichever thread runs it)."""
    from dpledger.policies.simulator import available_cpus
    assert available_cpus() >= 1
    for mode, extra in (("whitebox", []), ("blackbox", ["--horizon", "200"])):
        outs = []
        for workers in (None, "1", "3"):
            out = tmp_path / f"{mode}-{workers}.json"
            argv = ["audit", "dp-ts", "--trials", "5000", "--mode", mode, "--seed", "4",
                    "--out", str(out), "--quiet", *extra]
            if workers is not None:
                argv += ["--workers", workers]
            assert main(argv) == 0
            outs.append(out.read_bytes())
        assert outs[0] == outs[1] == outs[2], mode


@pytest.mark.parametrize("argv,want", [
    (["compose", "gaussian:mu=1e300"], 0),
    (["compose", "discrete_gaussian:sigma=1e-300,sensitivity=1"], 0),
    (["audit", "pure:eps=710", "--trials", "200"], 0),
    (["audit", "gaussian:mu=1e160", "--trials", "200"], 2),
    (["audit", "discrete_gaussian:sigma=1e-300,sensitivity=1", "--trials", "200"], 2),
])
def test_huge_release_parameters_get_answers_not_tracebacks(tmp_path, capsys, argv, want):
    """Finite parameters whose μ², ρ or e^ε overflow float64: compose reports ∞, the
    randomized-response audit uses the logistic function, and a Gaussian audit whose LLR cannot
    be scored says so in one line."""
    if argv[0] == "audit":
        argv = argv + ["--out", str(tmp_path / "a.json"), "--quiet"]
    assert main(argv) == want
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if want == 2:
        assert "overflows float64" in err


def test_gaussian_composition_keeps_exact_rationals():
    """GDP μ² and zCDP ρ of Gaussians whose float μ² overflows are ∞, not a traceback
    (Fraction(∞)); a small one is unchanged: ρ = μ²/2, an upper bound within one rounding."""
    from fractions import Fraction

    from dpledger.accounting.composition import Composition
    from dpledger.accounting.releases import GaussianRelease
    big = Composition.of([(GaussianRelease(sigma=1e-200), 1)])
    assert big.gdp_mu() == float("inf") or big.gdp_mu() >= 1e200
    g = GaussianRelease(sigma=3.0)
    comp = Composition.of([(g, 5)])
    assert Fraction(comp.zcdp_rho()) >= 5 * Fraction(1, 9) / 2
    assert comp.zcdp_rho() == pytest.approx(5 / 18, rel=1e-15)


def test_workers_checked_for_spec_audits_and_refused_for_stores(tmp_path, capsys):
    """A release-spec audit accepts any valid --workers (the old default 1 was refused as
    "applies to policy audits") and refuses a bad one with its own message; verify refuses
    --workers on a ledger store (no simulation) instead of ignoring it."""
    out = str(tmp_path / "a.json")
    assert main(["audit", "laplace:eps=1", "--trials", "200", "--workers", "1", "--out", out,
                 "--quiet"]) == 0
    assert main(["audit", "laplace:eps=1", "--trials", "200", "--workers", "0", "--out",
                 out]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err
    store = str(tmp_path / "s.db")
    assert main(["ledger", "init", store]) == 0
    assert main(["verify", store]) == 0
    assert main(["verify", store, "--workers", "nan"]) == 2
    assert "--workers does not apply to a ledger store" in capsys.readouterr().err
