"""The served one-run audit (issue 33 §1, the store part; audits/one_run_served.py): canaries
sent through the step form to a live store on SQLite and PostgreSQL while the service keeps
serving; only the auditor's runs gain records, and they are labelled; bad input in one line."""
from __future__ import annotations

import json

import numpy as np

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
