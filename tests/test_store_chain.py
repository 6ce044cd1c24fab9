"""The ledger store's record chain (issue 25 §3): tampering by editing the SQLite file directly.

A store that forgets spending understates privacy.  Each test edits the file with the sqlite3
module (as the sqlite3 shell would) and checks that ``verify`` fails and names the first bad
batch or release, that reads refuse a store whose last records were deleted, that an auditor's
earlier head detects a consistently rewritten history, that version 1 stores are read and
migrated, and that reading a store leaves no -wal/-shm files behind.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from dpledger.accounting import store_chain as chain
from dpledger.accounting.releases import GaussianRelease, LaplaceRelease
from dpledger.accounting.store import LedgerStore, labels_text, verify_store
from dpledger.cli import main
from dpledger.errors import DpledgerError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _store(path, n: int = 5, budget: str | None = "eps=100,delta=1e-6") -> None:
    with LedgerStore.create(path, budget) as s:
        for i in range(n):
            rel = LaplaceRelease.from_epsilon(0.5) if i % 2 == 0 else GaussianRelease.from_mu(0.3)
            s.append(arm=i % 2, start=i, stop=i + 3, release=rel)


def _edit(path, *sql):
    conn = sqlite3.connect(path)
    for stmt in sql:
        if isinstance(stmt, tuple):
            conn.execute(*stmt)
        else:
            conn.execute(stmt)
    conn.commit()
    conn.close()


def test_clean_store_verifies_and_reads(tmp_path):
    p = tmp_path / "s.db"
    _store(p)
    assert verify_store(p) == []
    with LedgerStore.open(p, readonly=True) as s:
        assert s.head()["batches"] == 5 and s.head()["records"] == 5
        assert s.rows_array().shape == (5, 6)


def test_deleting_the_last_records_is_detected_and_refused(tmp_path, capsys):
    p = tmp_path / "s.db"
    _store(p)
    _edit(p, "DELETE FROM batches WHERE seq >= 4")
    problems = verify_store(p)
    assert len(problems) == 2 and "head says 5 batches" in problems[0]
    assert "anchor" in problems[1] and "records batch 5, the store holds 3" in problems[1]
    with LedgerStore.open(p, readonly=True) as s, pytest.raises(DpledgerError,
                                                               match="chain does not match"):
        s.status()
    with LedgerStore.open(p) as s, pytest.raises(DpledgerError, match="chain does not match"):
        s.append(arm=0, start=0, stop=1, release=LaplaceRelease.from_epsilon(0.5))
    r = subprocess.run([sys.executable, "-m", "dpledger", "verify", str(p)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert r.returncode == 1 and "head says 5 batches" in r.stderr
    assert main(["ledger", "status", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "chain does not match" in err


def test_deleting_a_middle_batch_names_it(tmp_path):
    p = tmp_path / "s.db"
    _store(p)
    _edit(p, "DELETE FROM batches WHERE seq = 3")
    problems = verify_store(p)
    assert any("batch 3 is missing" in x for x in problems)


def test_reordering_names_the_first_moved_batch(tmp_path):
    p = tmp_path / "s.db"
    _store(p)
    conn = sqlite3.connect(p)
    b2 = conn.execute("SELECT data, sha256 FROM batches WHERE seq = 2").fetchone()
    b4 = conn.execute("SELECT data, sha256 FROM batches WHERE seq = 4").fetchone()
    conn.execute("UPDATE batches SET data = ?, sha256 = ? WHERE seq = 2", b4)
    conn.execute("UPDATE batches SET data = ?, sha256 = ? WHERE seq = 4", b2)
    conn.commit()
    conn.close()
    problems = verify_store(p)
    assert problems[0].startswith("record chain: batch 2 ") and "does not link" in problems[0]


def test_an_edited_record_with_a_fresh_checksum_names_its_batch(tmp_path):
    p = tmp_path / "s.db"
    _store(p)
    blob = np.array([[0, 0, 2, 4, 0, 1]], dtype="<i8").tobytes()   # count 1 → a smaller range
    _edit(p, ("UPDATE batches SET data = ?, sha256 = ? WHERE seq = 3",
              (blob, hashlib.sha256(blob).hexdigest())))
    problems = verify_store(p)
    assert problems[0].startswith("record chain: batch 3 ")


def test_inserting_a_batch_in_the_middle(tmp_path):
    p = tmp_path / "s.db"
    _store(p)
    blob = np.array([[0, 0, 0, 1, 0, 1]], dtype="<i8").tobytes()
    _edit(p, "UPDATE batches SET seq = seq + 1 WHERE seq >= 3 AND seq = (SELECT MAX(seq) FROM "
             "batches)",
          "UPDATE batches SET seq = 5 WHERE seq = 4", "UPDATE batches SET seq = 4 WHERE seq = 3",
          ("INSERT INTO batches(seq, n, data, sha256, n_releases, link) VALUES (3, 1, ?, ?, 2, "
           "'00')", (blob, hashlib.sha256(blob).hexdigest())))
    problems = verify_store(p)
    assert problems and problems[0].startswith("record chain: batch 3 ")


def test_an_edited_release_or_budget_breaks_the_chain(tmp_path):
    p = tmp_path / "s.db"
    _store(p)
    weaker = json.dumps({"kind": "laplace", "scale": 20.0, "sensitivity": 1.0}, sort_keys=True)
    _edit(p, ("UPDATE releases SET json = ? WHERE id = 0", (weaker,)))
    assert verify_store(p)[0].startswith("record chain: batch 1 ")
    q = tmp_path / "b.db"
    _store(q)
    from dpledger.accounting.filters import Budget
    looser = json.dumps(Budget.parse("eps=1e6,delta=1e-6").to_json())
    _edit(q, ("UPDATE meta SET value = ? WHERE key = 'budget'", (looser,)))
    assert any(x.startswith("record chain: batch 1 ") for x in verify_store(q))


def _rewrite_consistently(path):
    """What a chain cannot stop: edit batch 1's data and recompute every later link and the
    head (anyone can: there is no secret)."""
    conn = sqlite3.connect(path)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    g = chain.genesis(meta.get("budget"),
                      labels_text({"anchor": meta["anchor"]}) if meta.get("anchor") == "heads"
                      else "")
    rel = chain.release_links(g, [t for _, t in conn.execute(
        "SELECT id, json FROM releases ORDER BY id")])
    blob = np.array([[0, 0, 0, 1, 0, 1]], dtype="<i8").tobytes()
    conn.execute("UPDATE batches SET data = ?, n = 1, sha256 = ? WHERE seq = 1",
                 (blob, hashlib.sha256(blob).hexdigest()))
    rows = conn.execute("SELECT seq, n, sha256, n_releases FROM batches ORDER BY seq").fetchall()
    prev = g
    for (seq, _n, _sha, _nr), link in zip(rows, chain.links(g, rel, rows), strict=True):
        conn.execute("UPDATE batches SET link = ? WHERE seq = ?", (link.hex(), seq))
        prev = link
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head'", (prev.hex(),))
    conn.commit()
    conn.close()


def test_an_earlier_head_shows_the_store_only_grew(tmp_path, capsys):
    p = tmp_path / "s.db"
    _store(p, n=3)
    assert main(["ledger", "head", str(p)]) == 0
    written = capsys.readouterr().out.splitlines()[0]
    with LedgerStore.open(p) as s:
        s.append(arm=0, start=9, stop=12, release=LaplaceRelease.from_epsilon(0.5))
    assert main(["verify", str(p), "--since", written]) == 0
    assert "grown from batch 3" in capsys.readouterr().out
    _rewrite_consistently(p)
    # the file alone cannot tell (no secret); its head anchor beside it can …
    problems = verify_store(p)
    assert len(problems) == 1 and "head anchor" in problems[0] and "rewritten" in problems[0]
    os.remove(str(p) + ".heads")
    n, head = written.split(":")
    problems = verify_store(p, (int(n), head))
    # … and so can the head written down, with the anchor gone too
    assert any("did not grow from it" in q for q in problems)
    assert main(["verify", str(p), "--since", "3:xyz"]) == 2
    assert main(["verify", str(p), "--since", "9:" + "0" * 64]) == 1
    capsys.readouterr()


def _v1_store(path):
    """A version 1 store as dpledger wrote it before the chain (same tables, no link columns,
    no head in meta)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE releases(id INTEGER PRIMARY KEY, json TEXT UNIQUE NOT NULL)")
    conn.execute("CREATE TABLE batches(seq INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
                 "data BLOB NOT NULL, sha256 TEXT NOT NULL)")
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [("format", "dpledger-store"),
                                                        ("version", "1")])
    conn.execute("INSERT INTO releases VALUES (0, ?)", (json.dumps(
        {"kind": "laplace", "scale": 2.0, "sensitivity": 1.0}, sort_keys=True),))
    for i in range(3):
        blob = np.array([[0, 0, i, i + 2, 0, 1]], dtype="<i8").tobytes()
        conn.execute("INSERT INTO batches(n, data, sha256) VALUES (1, ?, ?)",
                     (blob, hashlib.sha256(blob).hexdigest()))
    conn.commit()
    conn.close()


def test_version_1_stores_are_read_then_migrated(tmp_path):
    p = tmp_path / "v1.db"
    _v1_store(p)
    assert verify_store(p) == []
    with LedgerStore.open(p, readonly=True) as s:
        assert s.version == 1 and s.status()["records"] == 3
    with LedgerStore.open(p) as s:      # writable: the chain (and the checkpoints) are added
        assert s.version == 3
        s.append(arm=0, start=0, stop=1, release=LaplaceRelease.from_epsilon(0.5))
    assert verify_store(p) == []
    with LedgerStore.open(p, readonly=True) as s:
        assert s.head()["batches"] == 4 and s.head()["records"] == 4
    _edit(p, "DELETE FROM batches WHERE seq = 4")
    assert verify_store(p)


@pytest.mark.parametrize("damage", [None, "garbage", "delete"])
def test_reading_leaves_the_folder_as_it_was(tmp_path, damage, capsys):
    p = tmp_path / "s.db"
    _store(p)
    if damage == "garbage":
        with open(p, "r+b") as fh:
            fh.seek(4096 + 100)
            fh.write(b"\xff" * 200)
    elif damage == "delete":
        _edit(p, "DELETE FROM batches WHERE seq = 5")
    before = sorted(os.listdir(tmp_path))
    for argv in (["verify", str(p)], ["ledger", "status", str(p)], ["show", str(p)],
                 ["curve", str(p)], ["ledger", "head", str(p)]):
        main(argv)
        assert sorted(os.listdir(tmp_path)) == before, argv
    capsys.readouterr()
