"""The served one-run audit (issue 33 §1, the store part; audits/one_run_served.py): canaries
sent through the step form to a live store on SQLite and PostgreSQL while the service keeps
serving; only the auditor's runs gain records, and they are labelled; bad input in one line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dpledger.accounting.store import LedgerStore
from dpledger.audits.one_run_served import LABEL_PREFIX, audit_served
from dpledger.cli import main
from dpledger.policies import online


def test_served_audit_on_both_backends(store_url):
    idle = online("lazy-dp-ts", 2, store=store_url, run=5, seed=4, epsilon=1.0)  # opened,
    svc = online("lazy-dp-ts", 2, store=store_url, run=0, seed=3, epsilon=1.0)     # no rows yet
    for _ in range(12):
        t = svc.select()
        svc.observe(t, 0.25)
    before = LedgerStore.open(store_url)
    rows0 = before.rows_array().copy()
    before.close()
    r = audit_served(store_url, "lazy-dp-ts", canaries=30, params={"epsilon": 1.0}, seed=2)
    j = r.to_json()
    for _ in range(4):                      # the service keeps serving, undisturbed
        t = svc.select()
        svc.observe(t, 0.25)
    svc.close()
    st = LedgerStore.open(store_url)
    rows = st.rows_array()
    lo, hi = j["served"]["auditor_runs"]
    assert lo == 6 and hi == 20           # past run 5, which a server holds without rows
    idle.close()
    new = rows[rows0.shape[0]:]
    assert set(np.unique(new[:, 0])) <= set(range(lo, hi + 1)) | {0}
    assert np.array_equal(rows[rows[:, 0] == 0][:rows0.shape[0]], rows0)   # service rows kept
    seq, note = st.checkpoint(j["served"]["label"])
    assert j["served"]["label"].startswith(LABEL_PREFIX)
    assert json.loads(note)["auditor"] is True
    st.close()
    assert 0.0 <= j["lower"] <= j["certified"] == 1.0


def test_served_bad_inputs(tmp_path, capsys):
    out = tmp_path / "a.json"
    for argv, frag in ((["lazy-dp-ts", "--store", str(tmp_path / "none.db"), "--canaries", "4"],
                        "cannot be opened"),
                       (["dp-ucb", "--store", str(tmp_path / "none.db"), "--canaries", "4"],
                        "served audit covers"),
                       (["lazy-dp-ts", "--store", str(tmp_path / "x.db")], "needs --canaries"),
                       (["lazy-dp-ts", "--store", str(tmp_path / "x.db"), "--canaries", "4",
                         "--trials", "10"], "--trials does not")):
        code = main(["audit", *argv, "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and frag in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert not out.exists()


def _store_bytes(path) -> dict:
    """The store's files (the SQLite file and its sidecars) as bytes, to compare."""
    import glob
    return {p: open(p, "rb").read() for p in sorted(glob.glob(str(path) + "*"))}


def _service(url, n=6):
    svc = online("lazy-dp-ts", 2, store=url, run=0, seed=3, epsilon=1.0)
    for _ in range(n):
        t = svc.select()
        svc.observe(t, 0.25)
    svc.close()


def test_served_sqlite_store_the_auditor_may_not_write(tmp_path, capsys):
    """A store file the auditor may not write: one line on stderr, exit 2, no audit file, the
    store's bytes unchanged.  As root (who may write any file) the command runs as the
    unprivileged user ``nobody``, the file owned by root with mode 0644."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    folder = tempfile.mkdtemp(prefix="dpledger-ro-")    # a folder ``nobody`` may enter
    try:
        os.chmod(folder, 0o777)
        db = os.path.join(folder, "live.db")
        _service(db)
        before = _store_bytes(db)
        out = os.path.join(folder, "a.json")
        argv = ["audit", "lazy-dp-ts", "--store", db, "--canaries", "4", "--out", out]
        if os.geteuid() == 0:
            import pwd
            try:
                pwd.getpwnam("nobody")
            except KeyError:
                pytest.skip("no unprivileged user 'nobody' to run the auditor as")
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(folder, "numba"), HOME=folder)
            p = subprocess.run([sys.executable, "-m", "dpledger", *argv], cwd=root, env=env,
                               user="nobody", capture_output=True, text=True, timeout=300)
            code, err = p.returncode, p.stderr
        else:
            for f in before:
                os.chmod(f, 0o444)
            code = main(argv)
            err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "read-only" in err or "may not write" in err
        assert not os.path.exists(out)
        assert _store_bytes(db) == before
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_served_postgres_role_without_write(pg_server, capsys, tmp_path):
    """A PostgreSQL role that may read the store's tables but not write them: one line,
    exit 2, no audit file, every table of the store's schema unchanged."""
    import urllib.parse

    import psycopg

    from dpledger.accounting.store_backends import split_schema
    url = pg_server.store_url()
    _service(url)
    conninfo, schema = split_schema(url)
    role = f"ro_{schema}"

    def contents(c):
        tables = [r[0] for r in c.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name", (schema,)).fetchall()]
        return {t: c.execute(f'SELECT * FROM "{schema}"."{t}" ORDER BY 1').fetchall()
                for t in tables}
    with psycopg.connect(conninfo, autocommit=True) as c:
        c.execute(f'CREATE ROLE "{role}" LOGIN')
        c.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        c.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        before = contents(c)
    u = urllib.parse.urlsplit(url)
    ro_url = urllib.parse.urlunsplit((u.scheme, f"{role}@" + u.netloc.split("@")[-1], u.path,
                                      u.query, u.fragment))
    out = tmp_path / "a.json"
    code = main(["audit", "lazy-dp-ts", "--store", ro_url, "--canaries", "4", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "may not write" in err, err
    assert not out.exists()
    with psycopg.connect(conninfo, autocommit=True) as c:
        assert contents(c) == before and before


def test_served_policy_whose_ledger_misses_a_canary(tmp_path, capsys, monkeypatch):
    """A served policy that serves without registering one canary's release (its store sink
    drops the row of arm 1, observation 0, in the auditor's second run): one line, exit 2, no
    audit file; the store holds the service's rows as they were and, besides them, only the
    auditor's records, in its labelled runs."""
    from dpledger.policies import step
    db = str(tmp_path / "live.db")
    _service(db)
    st = LedgerStore.open(db)
    rows0 = st.rows_array().copy()
    st.close()
    record = step._StoreSink.record
    dropped = []

    def lossy(self, rows, checkpoint):
        keep = []
        for r in rows:
            if r[0] == 2 and r[1] == 1 and r[2] == 0:     # auditor runs start at 1
                dropped.append(tuple(r))
            else:
                keep.append(r)
        return record(self, keep, checkpoint)
    monkeypatch.setattr(step._StoreSink, "record", lossy)
    out = tmp_path / "a.json"
    code = main(["audit", "lazy-dp-ts", "--store", db, "--canaries", "6", "--out", str(out)])
    err = capsys.readouterr().err
    assert dropped and code == 2 and len(err.strip().splitlines()) == 1, err
    assert "misses canary 3's release (run 2, arm 1, observation 0)" in err
    assert not out.exists()
    st = LedgerStore.open(db)
    rows = st.rows_array()
    assert np.array_equal(rows[rows[:, 0] == 0], rows0)            # the service's rows
    assert set(np.unique(rows[:, 0])) == {0, 1, 2, 3}               # + the auditor's runs
    seq, note = st.checkpoint(f"{LABEL_PREFIX}1-3")
    assert json.loads(note)["auditor"] is True and json.loads(note)["runs"] == [1, 3]
    st.close()
