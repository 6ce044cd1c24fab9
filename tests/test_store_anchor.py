"""The head anchor (issue 30 §2): what is detected, with the anchor and without it, on both
backends (docs/ledger-store.md#what-is-detected).

Each test builds a store of six batches, changes it with SQL around dpledger (as the sqlite3
shell or psql would), and checks ``verify``, ``status`` and ``append``:

* an edited batch, two batches reordered, a batch deleted in the middle: the chain alone finds
  them (the anchor is not needed);
* a consistent rewrite (an edit with every later link and the head recomputed), a truncation
  (the last batches deleted and the head set back: the three UPDATEs of the issue) and a
  rollback to an older copy: the chain alone cannot tell — the anchor does, and every append
  and ``status`` refuse the store in one line, writing nothing;
* the store and its anchor rolled back together: only a head written down (``verify --head``)
  tells.
"""
from __future__ import annotations

import hashlib
import os
import shutil

import numpy as np
import pytest

from dpledger.accounting import store_chain as chain
from dpledger.accounting.releases import LaplaceRelease
from dpledger.accounting.store import LedgerStore, labels_text, verify_store
from dpledger.cli import main
from dpledger.errors import DpledgerError
from test_store_backends import _rows, _sql

REL = LaplaceRelease.from_epsilon(0.25)


def _build(url, n=6):
    with LedgerStore.create(url, "eps=1") as s:
        for i in range(n):
            s.append(arm=0, start=i, stop=i + 1, release=REL)
        return s.anchor_path, [s.head() for _ in range(1)][0]


def _heads_after_each(url) -> list[str]:
    return [r[0] for r in _rows(url, "SELECT link FROM batches ORDER BY seq")]


def _truncate_to(url, k: int) -> None:
    """The issue's truncation: delete the batches after k, set the head and counts back."""
    link = _rows(url, f"SELECT link FROM batches WHERE seq = {k}")[0][0]
    _sql(url, f"DELETE FROM batches WHERE seq > {k}",
         ("UPDATE meta SET value = ? WHERE key = 'head'", (link,)),
         ("UPDATE meta SET value = ? WHERE key = 'batches'", (str(k),)),
         ("UPDATE meta SET value = ? WHERE key = 'records'", (str(k),)))


def _rewrite(url) -> None:
    """Edit batch 2 and recompute every link after it and the head (no secret stops this)."""
    meta = dict(_rows(url, "SELECT key, value FROM meta"))
    g = chain.genesis(meta.get("budget"), labels_text({"anchor": "heads"}))
    rel = chain.release_links(g, [t for _, t in _rows(url, "SELECT id, json FROM releases "
                                                           "ORDER BY id")])
    blob = np.array([[0, 0, 40, 41, 0, 1]], dtype="<i8").tobytes()
    _sql(url, ("UPDATE batches SET data = ?, sha256 = ? WHERE seq = 2",
               (blob, hashlib.sha256(blob).hexdigest())))
    rows = _rows(url, "SELECT seq, n, sha256, n_releases FROM batches ORDER BY seq")
    stmts, prev = [], g
    for (seq, *_), link in zip(rows, chain.links(g, rel, rows), strict=True):
        stmts.append(("UPDATE batches SET link = ? WHERE seq = ?", (link.hex(), seq)))
        prev = link
    stmts.append(("UPDATE meta SET value = ? WHERE key = 'head'", (prev.hex(),)))
    _sql(url, *stmts)


def _refused_everywhere(url, needle: str, capsys) -> None:
    """status and append refuse in one line; the append wrote nothing; verify names it."""
    problems = verify_store(url)
    assert any(needle in p for p in problems), problems
    n = len(_rows(url, "SELECT seq FROM batches"))
    with LedgerStore.open(url) as s:
        with pytest.raises(DpledgerError, match="anchor"):
            s.append(arm=1, start=0, stop=1, release=REL)
    assert len(_rows(url, "SELECT seq FROM batches")) == n
    assert main(["ledger", "status", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "anchor" in err
    assert main(["ledger", "record", url, "--arm", "1", "--start", "0", "--stop", "1",
                 "laplace:eps=0.25"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "anchor" in err
    assert len(_rows(url, "SELECT seq FROM batches")) == n


@pytest.mark.parametrize("damage, needle", [
    ("UPDATE batches SET sha256 = 'ab' || substr(sha256, 3) WHERE seq = 3", "batch 3"),
    ("DELETE FROM batches WHERE seq = 3", "batch 3 is missing"),
])
def test_edits_and_deletions_in_the_middle_the_chain_finds(store_url, damage, needle):
    _build(store_url)
    _sql(store_url, damage)
    problems = verify_store(store_url)
    assert problems and needle in problems[0]


def test_reordering_the_chain_finds(store_url):
    _build(store_url)
    _sql(store_url, "UPDATE batches SET seq = 100 WHERE seq = 2",
         "UPDATE batches SET seq = 2 WHERE seq = 3", "UPDATE batches SET seq = 3 WHERE seq = 100")
    # the two batches have different data (different ranges): the links no longer follow
    problems = verify_store(store_url)
    assert problems and "batch 2" in problems[0] and "does not link" in problems[0]


def test_a_consistent_rewrite_only_the_anchor_finds(store_url, capsys):
    _build(store_url)
    _rewrite(store_url)
    problems = verify_store(store_url)
    assert len(problems) == 1 and "rewritten" in problems[0]   # the chain itself is whole
    _refused_everywhere(store_url, "rewritten", capsys)


def test_truncation_only_the_anchor_finds(store_url, capsys):
    _build(store_url)
    _truncate_to(store_url, 4)
    problems = verify_store(store_url)
    assert len(problems) == 1 and "records batch 6, the store holds 4" in problems[0]
    _refused_everywhere(store_url, "records batch 6", capsys)


def test_the_issue_s_spend_is_refused_after_truncation(store_url):
    """The issue's case: a budget of 1, a reward at 1 already; truncated, the store would
    admit a record taking it to 1.25.  The anchor refuses the append."""
    with LedgerStore.create(store_url, "eps=1") as s:
        for _ in range(4):
            s.append(arm=0, start=0, stop=1, release=REL)
    _truncate_to(store_url, 3)
    with LedgerStore.open(store_url) as s, pytest.raises(DpledgerError, match="anchor"):
        s.append(arm=0, start=0, stop=1, release=REL)
        s.append(arm=0, start=0, stop=1, release=REL)


def test_rollback_to_an_older_copy_only_the_anchor_finds(store_url, tmp_path, capsys):
    _build(store_url, n=3)
    if store_url.startswith("postgresql://"):
        old = {t: _rows(store_url, f"SELECT * FROM {t}") for t in ("meta", "batches")}
    else:
        shutil.copy(store_url, tmp_path / "old.db")
    with LedgerStore.open(store_url) as s:
        for i in range(3):
            s.append(arm=1, start=i, stop=i + 1, release=REL)
    if store_url.startswith("postgresql://"):
        _sql(store_url, "DELETE FROM meta", "DELETE FROM batches",
             *[("INSERT INTO meta VALUES (?, ?)", r) for r in old["meta"]],
             *[("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?)", r) for r in old["batches"]])
    else:
        for f in (store_url + "-wal", store_url + "-shm"):
            if os.path.exists(f):
                os.remove(f)
        shutil.copy(tmp_path / "old.db", store_url)
    problems = verify_store(store_url)
    assert len(problems) == 1 and "records batch 6, the store holds 3" in problems[0]
    _refused_everywhere(store_url, "records batch 6", capsys)


def test_store_and_anchor_rolled_back_together_only_a_written_head_finds(store_url, capsys):
    path, _ = _build(store_url)
    heads = _heads_after_each(store_url)
    _truncate_to(store_url, 4)
    with open(path) as fh:                            # the anchor cut back consistently
        lines = fh.read().splitlines()[:5]
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    assert verify_store(store_url) == []              # neither the chain nor the anchor tells
    assert verify_store(store_url, head=heads[-1]) != []
    assert main(["verify", store_url, "--head", heads[-1]]) == 1
    assert "did not grow from that head" in capsys.readouterr().err
    assert main(["verify", store_url, "--head", heads[3]]) == 0      # batch 4's head: grown
    assert "grown from the head given" in capsys.readouterr().out
    assert main(["verify", store_url, "--head", "xyz"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_missing_anchor_refuses_on_sqlite(tmp_path, capsys):
    url = str(tmp_path / "s.db")
    path, _ = _build(url)
    os.remove(path)
    _refused_everywhere(url, "is missing", capsys)
    assert not os.path.exists(path)                   # nothing written, not even an anchor


def test_postgres_host_without_an_anchor_starts_one(pg_url, monkeypatch, tmp_path):
    """A host opening a PostgreSQL store for writing for the first time starts its anchor at
    the head it finds (trust on first use, said by ``anchor_note``); from then on it checks."""
    _build(pg_url, n=2)
    monkeypatch.setenv("DPLEDGER_ANCHOR_DIR", str(tmp_path / "other-host"))
    with LedgerStore.open(pg_url, readonly=True) as s:
        assert s.anchor_path is None and "no head anchor on this host" in s.anchor_note
    with LedgerStore.open(pg_url) as s:
        assert "started at batch 2" in s.anchor_note
        s.append(arm=0, start=5, stop=6, release=REL)
    _truncate_to(pg_url, 2)
    assert any("records batch 3" in p for p in verify_store(pg_url))


def test_legacy_store_gets_an_anchor_when_opened_for_writing(tmp_path):
    url = str(tmp_path / "s.db")
    path, _ = _build(url)
    # a store from before anchors: no setting (its genesis without it), no anchor file
    os.remove(path)
    meta = dict(_rows(url, "SELECT key, value FROM meta"))
    g = chain.genesis(meta["budget"])
    rel = chain.release_links(g, [t for _, t in _rows(url, "SELECT id, json FROM releases")])
    rows = _rows(url, "SELECT seq, n, sha256, n_releases FROM batches ORDER BY seq")
    stmts, prev = ["DELETE FROM meta WHERE key = 'anchor'"], g
    for (seq, *_), link in zip(rows, chain.links(g, rel, rows), strict=True):
        stmts.append(("UPDATE batches SET link = ? WHERE seq = ?", (link.hex(), seq)))
        prev = link
    stmts.append(("UPDATE meta SET value = ? WHERE key = 'head'", (prev.hex(),)))
    _sql(url, *stmts)
    assert verify_store(url) == []
    with LedgerStore.open(url) as s:
        assert "before anchors" in s.anchor_note and os.path.exists(path)
    _truncate_to(url, 5)
    assert any("records batch 6" in p for p in verify_store(url))


def test_deleting_the_anchor_and_its_setting_breaks_the_genesis(tmp_path):
    url = str(tmp_path / "s.db")
    path, _ = _build(url)
    _truncate_to(url, 4)
    os.remove(path)
    _sql(url, "DELETE FROM meta WHERE key = 'anchor'")
    problems = verify_store(url)
    assert problems and "batch 1" in problems[0] and "does not link" in problems[0]
