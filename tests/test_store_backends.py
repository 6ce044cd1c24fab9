"""Ledger stores on both backends (issue 24 §2): SQLite files and PostgreSQL databases behind one
``LedgerStore``.  The PostgreSQL server is real (the ``pgserver`` wheel, started once per session
by ``tests/conftest.py``); tests parametrized by ``store_url`` run on both backends.

* the same API answers alike on both (records, budget refusal, status, head, verify);
* URLs: ``sqlite:///…``, bare paths, ``postgresql://…?schema=``; an unreachable server is one
  line naming the URL without its password; a missing driver is one line;
* labels (policy, arms) set at init and checked at open; checkpoints written with the records;
* the record chain on PostgreSQL: rows deleted or edited with SQL are found by ``verify``;
* copy SQLite → PostgreSQL → SQLite: byte-equal rows, same head;
* racing writers: several processes spending the same rewards' budget (exact count), a forced
  interleaving that holds the writer lock, and a writer killed with SIGKILL (also the server
  process serving it) losing nothing acknowledged.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import pg_server as pgs
import test_store
from dpledger.accounting.releases import GaussianRelease, LaplaceRelease
from dpledger.accounting.filters import Budget, BudgetExceeded
from dpledger.accounting.store import (LedgerStore, copy_store, is_store, max_spend,
                                       per_reward_values, verify_store)
from dpledger.accounting.store_backends import redact, split_schema
from dpledger.cli import main
from dpledger.errors import DpledgerError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT)
EIGHTH = LaplaceRelease.from_epsilon(0.125)      # dyadic: spends are exact sums


def _sql(url: str, *statements):
    """Run SQL on a store around dpledger (as psql or the sqlite3 shell would); ``?`` params."""
    if url.startswith("postgresql://"):
        with pgs.connect(url) as conn:
            for st in statements:
                sql, params = st if isinstance(st, tuple) else (st, ())
                conn.execute(sql.replace("?", "%s"), params or None)
        return
    conn = sqlite3.connect(url)
    for st in statements:
        conn.execute(*(st if isinstance(st, tuple) else (st,)))
    conn.commit()
    conn.close()


def _rows(url: str, sql: str) -> list:
    if url.startswith("postgresql://"):
        with pgs.connect(url) as conn:
            return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                    for r in conn.execute(sql).fetchall()]
    conn = sqlite3.connect(url)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# -- one API, two backends -------------------------------------------------------------------
def test_same_answers_on_both_backends(store_url, tmp_path):
    """The same appends give the same rows, refusals, status, head and verify on either
    backend (the head is the chain over the same bytes: equal across backends)."""
    heads = []
    for url in (store_url, str(tmp_path / "twin.db")):
        with LedgerStore.create(url, "eps=1", policy="lazy-dp-ts", arms=3) as s:
            s.append(0, 0, 4, EIGHTH, count=4)
            s.append_many([(0, 1, 0, 2, LaplaceRelease.from_epsilon(0.3), 1),
                           (1, 2, 5, 9, EIGHTH, 2)])
            with pytest.raises(BudgetExceeded, match="index=3") as err:
                s.append(0, 3, 5, EIGHTH, count=5)           # 0.5 + 0.625 at index 3
            assert err.value.spent == 0.5
            assert s.n_records() == 3
            st = s.status([1e-6])
            heads.append((s.head(), s.rows_array().tolist(), st["budget_spent"],
                          st["privacy"], s.backend))
        assert verify_store(url) == []
        assert is_store(url)
    (h1, rows1, spent1, priv1, kind), (h2, rows2, spent2, priv2, _) = heads
    assert kind == ("postgresql" if store_url.startswith("postgresql") else "sqlite")
    assert h1 == h2 and rows1 == rows2 and priv1 == priv2
    assert spent1 == spent2 == 0.5


def test_sqlite_urls_and_paths(tmp_path):
    p = tmp_path / "u.db"
    with LedgerStore.create(f"sqlite://{p}") as s:         # sqlite:// + /abs/path
        s.append(0, 0, 1, EIGHTH)
    for url in (str(p), f"sqlite://{p}"):
        assert is_store(url)
        with LedgerStore.open(url, readonly=True) as s:
            assert s.n_records() == 1 and s.backend == "sqlite"
    assert main(["ledger", "status", f"sqlite://{p}"]) == 0
    assert not is_store(f"sqlite://{tmp_path}/missing.db")


def test_redaction_and_schema_parameter():
    url = "postgresql://alice:s3cret@db.example:5433/ledger?schema=live&sslmode=require"
    assert "s3cret" not in redact(url) and "alice:***@db.example:5433" in redact(url)
    assert "s3cret" not in redact("postgresql://u@h/d?password=s3cret")
    conninfo, schema = split_schema(url)
    assert schema == "live" and "schema" not in conninfo and "sslmode=require" in conninfo
    assert split_schema("postgresql://h/d")[1] == "public"
    for bad in ("postgresql://h/d?schema=Bad-Name", "postgresql://h/d?schema=1x",
                "postgresql://h/d?schema=a&schema=b"):
        with pytest.raises(DpledgerError, match="schema"):
            split_schema(bad)


def test_unreachable_server_is_one_line_without_the_password(tmp_path, capsys):
    """A server that does not answer: one line naming the URL (password masked), exit 2."""
    url = f"postgresql://bob:hunter2@/nodb?host={tmp_path}&connect_timeout=2"
    with pytest.raises(DpledgerError) as err:
        LedgerStore.open(url)
    msg = str(err.value)
    assert "cannot reach the ledger store postgresql://bob:***@" in msg and "hunter2" not in msg
    for argv in (["ledger", "status", url], ["ledger", "init", url], ["verify", url],
                 ["curve", url], ["show", url]):
        assert main(argv) == 2, argv
        out = capsys.readouterr()
        assert out.err.count("\n") == 1 and "hunter2" not in out.err + out.out, (argv, out)
        assert "bob:***@" in out.err


def test_missing_driver_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)      # import psycopg → ImportError
    with pytest.raises(DpledgerError, match=r"pip install 'dpledger\[postgres\]'"):
        LedgerStore.open("postgresql://u@h/d")


def test_missing_store_and_existing_store(pg_url):
    with pytest.raises(DpledgerError, match="no ledger store at"):
        LedgerStore.open(pg_url)
    LedgerStore.create(pg_url).close()
    with pytest.raises(DpledgerError, match="already holds a ledger store"):
        LedgerStore.create(pg_url)


# -- labels and checkpoints --------------------------------------------------------------------
def test_labels_are_checked_at_open(store_url, capsys):
    LedgerStore.create(store_url, "eps=1", policy="lazy-dp-ts", arms=5).close()
    with LedgerStore.open(store_url, policy="lazy-dp-ts", arms=5) as s:
        assert (s.policy, s.arms) == ("lazy-dp-ts", 5)
    with pytest.raises(DpledgerError, match="created for policy 'lazy-dp-ts', not 'dp-ucb'"):
        LedgerStore.open(store_url, policy="dp-ucb")
    with pytest.raises(DpledgerError, match="created for arms 5, not 4"):
        LedgerStore.open(store_url, arms=4)
    for bad in ({"policy": "a b"}, {"arms": 0}, {"arms": True}, {"arms": 2.0}):
        with pytest.raises(DpledgerError):
            LedgerStore.open(store_url, **bad)
    assert verify_store(store_url) == []
    # the labels are in the chain's genesis: an edited label is found by verify
    with LedgerStore.open(store_url) as s:
        s.append(0, 0, 1, EIGHTH)
    _sql(store_url, "UPDATE meta SET value = 'dp-ucb' WHERE key = 'policy'")
    assert verify_store(store_url)[0].startswith("record chain: batch 1 ")
    capsys.readouterr()


def test_checkpoints_are_written_with_the_records(store_url):
    with LedgerStore.create(store_url, "eps=1") as s:
        assert s.checkpoint("w") is None
        s.append_many([(0, 0, 0, 1, EIGHTH, 4)], checkpoint=("w", b"after 1"))
        assert s.checkpoint("w") == (1, b"after 1")
        with pytest.raises(BudgetExceeded):          # refused: the checkpoint is not written
            s.append_many([(0, 0, 0, 1, EIGHTH, 5)], checkpoint=("w", b"never"))
        assert s.checkpoint("w") == (1, b"after 1")
        s.save_checkpoint("w", b"observed")          # state changed without a release
        s.append_many([], checkpoint=("other", b"\x00\xff"))
        assert s.checkpoint("w") == (1, b"observed")
        assert s.checkpoint("other") == (1, b"\x00\xff")
        for bad in (("", b"x"), ("w", "text"), ("w",), "w"):
            with pytest.raises(DpledgerError):
                s.append_many([], checkpoint=bad)
    with LedgerStore.open(store_url, readonly=True) as r:
        assert r.checkpoint("w") == (1, b"observed")
        with pytest.raises(DpledgerError, match="read-only"):
            r.save_checkpoint("w", b"x")


# -- the record chain on PostgreSQL -------------------------------------------------------------
def _five(url):
    with LedgerStore.create(url, "eps=100,delta=1e-6") as s:
        for i in range(5):
            rel = LaplaceRelease.from_epsilon(0.5) if i % 2 == 0 else GaussianRelease.from_mu(0.3)
            s.append(arm=i % 2, start=i, stop=i + 3, release=rel)


@pytest.mark.parametrize("damage,needle", [
    ("DELETE FROM batches WHERE seq = 5", "head says 5 batches"),
    ("DELETE FROM batches WHERE seq = 3", "batch 3 is missing"),
    ("UPDATE releases SET json = '{\"kind\": \"laplace\", \"scale\": 20.0, \"sensitivity\": 1.0}'"
     " WHERE id = 0", "record chain: batch 1 "),
    (("UPDATE meta SET value = ? WHERE key = 'budget'",
      (json.dumps(Budget.parse("eps=1e6,delta=1e-6").to_json()),)), "record chain: batch 1 "),
    ("UPDATE meta SET value = '0000' WHERE key = 'head'", "head says 5 batches"),
])
def test_postgres_chain_finds_sql_edits(pg_url, damage, needle):
    _five(pg_url)
    assert verify_store(pg_url) == []
    _sql(pg_url, damage)
    problems = verify_store(pg_url)
    assert any(needle in p for p in problems), problems


def test_postgres_edited_record_with_fresh_checksum_is_named(pg_url):
    import hashlib
    _five(pg_url)
    blob = np.array([[0, 0, 2, 4, 0, 1]], dtype="<i8").tobytes()
    _sql(pg_url, ("UPDATE batches SET data = ?, sha256 = ? WHERE seq = 3",
                  (blob, hashlib.sha256(blob).hexdigest())))
    assert verify_store(pg_url)[0].startswith("record chain: batch 3 ")


def test_postgres_deleted_last_records_refuse_reads_and_appends(pg_url, capsys):
    _five(pg_url)
    _sql(pg_url, "DELETE FROM batches WHERE seq >= 4")
    with LedgerStore.open(pg_url, readonly=True) as s, \
            pytest.raises(DpledgerError, match="chain does not match"):
        s.status()
    with LedgerStore.open(pg_url) as s, pytest.raises(DpledgerError, match="chain does not"):
        s.append(0, 0, 1, EIGHTH)
    assert main(["ledger", "status", pg_url]) == 2
    assert main(["verify", pg_url]) == 1
    err = capsys.readouterr().err
    assert "chain does not match" in err and "head says 5 batches" in err


# -- copy between backends -------------------------------------------------------------------
def test_copy_sqlite_to_postgres_and_back(tmp_path, pg_url, capsys):
    src = str(tmp_path / "src.db")
    with LedgerStore.create(src, "mu=2", policy="dp-ts", arms=2) as s:
        rng = np.random.default_rng(3)
        for k in range(40):
            a = int(rng.integers(0, 2))
            st = int(rng.integers(0, 30))
            s.append_many([(0, a, st, st + int(rng.integers(1, 5)),
                            GaussianRelease.from_mu(float(rng.choice([0.05, 0.1]))), 1)],
                          checkpoint=("w", bytes([k])))
    back = str(tmp_path / "back.db")
    assert main(["ledger", "copy", src, pg_url]) == 0
    assert main(["ledger", "copy", pg_url, f"sqlite://{back}"]) == 0
    capsys.readouterr()
    q_batches = "SELECT seq, n, data, sha256, n_releases, link FROM batches ORDER BY seq"
    q_rel = "SELECT id, json FROM releases ORDER BY id"
    q_meta = ("SELECT key, value FROM meta WHERE key <> 'version' ORDER BY key")
    q_cp = "SELECT name, batches, data FROM checkpoints"
    for q in (q_batches, q_rel, q_meta, q_cp):
        a, b, c = _rows(src, q), _rows(pg_url, q), _rows(back, q)
        assert a == b == c and a, q
    heads = []
    for url in (src, pg_url, back):
        with LedgerStore.open(url, readonly=True) as s:
            heads.append((s.head(), s.status()["privacy"], s.policy, s.arms))
        assert verify_store(url) == []
    assert heads[0] == heads[1] == heads[2]
    # the copies go on growing like the original
    with LedgerStore.open(pg_url) as s:
        s.append(0, 0, 1, GaussianRelease.from_mu(0.1))
    assert verify_store(pg_url) == []
    # never over an existing store; a tampered source is not copied
    with pytest.raises(DpledgerError, match="already exists"):
        copy_store(src, back)
    with pytest.raises(DpledgerError, match="already holds"):
        copy_store(src, pg_url)
    _sql(back, "DELETE FROM batches WHERE seq = 7")
    with pytest.raises(DpledgerError, match="does not verify, not copied"):
        copy_store(back, str(tmp_path / "never.db"))
    assert sorted(os.listdir(tmp_path)) == ["back.db", "back.db.heads", "src.db", "src.db.heads"]


# -- racing writers ----------------------------------------------------------------------------
HAMMER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from dpledger.accounting.store import LedgerStore
    from dpledger.accounting.filters import Budget, BudgetExceeded
    from dpledger.accounting.releases import LaplaceRelease
    url, seed, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = LedgerStore.open(url)
    eighth = LaplaceRelease.from_epsilon(0.125)
    rng = np.random.default_rng(seed)
    tries = [(a, i) for a in range(2) for i in range(4)] * 10
    order = rng.permutation(len(tries))
    open(f"{go}.ready{seed}", "w").close()
    while not os.path.exists(go):
        time.sleep(0.005)
    ok = no = 0
    for k in order:
        a, i = tries[k]
        try:
            store.append(arm=a, start=i, stop=i + 1, release=eighth)
            ok += 1
        except BudgetExceeded:
            no += 1
    print(ok, no)
""")


def _start_together(tmp_path, source: str, store_url: str, n: int) -> list:
    """Run ``source`` as ``n`` processes (arguments: the store, k, the go file), each
    announcing itself ready (``go.ready{k}``) and then waiting for the go file, so that they
    all start at once; their (stdout, stderr) once every one exited 0."""
    script = tmp_path / f"script{n}.py"
    script.write_text(source)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, str(script), store_url, str(k), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
             for k in range(n)]
    t_end = time.time() + 120
    while not all(os.path.exists(f"{go}.ready{k}") for k in range(n)):
        assert time.time() < t_end and all(p.poll() is None for p in procs), "processes died"
        time.sleep(0.02)
    go.write_text("")
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    return outs


def test_racing_writers_spend_exactly_the_budget(store_url, tmp_path):
    """Four processes each try 10 records of ε = 1/8 on each of 8 rewards of an ε = 1 store, in
    their own random orders, all at once.  Every reward admits exactly 8 (the costs are dyadic,
    so the spends are exact): exactly 64 records are accepted and 256 refused, whatever the
    interleaving; every reward's spend is exactly 1; verify is clean."""
    LedgerStore.create(store_url, "eps=1").close()
    outs = _start_together(tmp_path, HAMMER, store_url, 4)
    ok = sum(int(o.split()[0]) for o, _ in outs)
    no = sum(int(o.split()[1]) for o, _ in outs)
    assert (ok, no) == (64, 256)
    assert verify_store(store_url) == []
    with LedgerStore.open(store_url, readonly=True) as s:
        data = s.rows_array()
        assert data.shape[0] == 64
        assert max_spend(s, data)[0] == 1.0
        pt, values, _, limit = per_reward_values(s, data)
        assert pt.start.size == 8 and np.all(values == 1.0) and limit == 1.0


CREATOR = textwrap.dedent("""
    import os, sys, time
    from dpledger.policies.step import open_or_create_store
    from dpledger.accounting.releases import LaplaceRelease
    url, k, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    open(f"{go}.ready{k}", "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    store = open_or_create_store(url, budget="eps=1")
    store.append(arm=k, start=0, stop=1, release=LaplaceRelease.from_epsilon(0.5))
    store.close()
""")


def test_racing_creators_of_one_fresh_store(store_url, tmp_path):
    """Six processes start at once on a store that does not exist yet and each creates or opens
    it (``open_or_create_store``, as six servers started together would), then appends one
    record.  Every process succeeds, the store holds exactly 6 records under one budget and
    verifies clean, and nothing is left beside an SQLite store.  (Before the SQLite store was
    built aside and linked into place, a process opening it between the file's creation and its
    tables was refused with "not a ledger store" or "database is locked".)"""
    _start_together(tmp_path, CREATOR, store_url, 6)
    assert verify_store(store_url) == []
    with LedgerStore.open(store_url, readonly=True) as s:
        assert s.rows_array().shape[0] == 6
        assert s.budget.to_json() == Budget.parse("eps=1").to_json()
    if not store_url.startswith("postgresql://"):
        assert [f for f in os.listdir(os.path.dirname(store_url)) if "store.db" in f and f != "store.db.heads"] \
            == ["store.db"]


def test_failed_sqlite_creation_leaves_nothing(tmp_path, monkeypatch):
    """A creation interrupted inside its transaction leaves no file at the path nor beside it."""
    from dpledger.accounting import store_backends

    def boom(self, meta, fill=None):
        self.conn.execute("CREATE TABLE meta(key TEXT)")
        raise KeyboardInterrupt
    monkeypatch.setattr(store_backends.SqliteBackend, "create_tables", boom)
    with pytest.raises(KeyboardInterrupt):
        LedgerStore.create(str(tmp_path / "s.db"), "eps=1")
    assert os.listdir(tmp_path) == []


class _HoldingStore(LedgerStore):
    """A writer that, inside its write transaction (budget checked, batch inserted, not yet
    committed), announces it and waits to be let go."""
    holding: threading.Event
    release: threading.Event

    def _before_commit(self) -> None:
        self.holding.set()
        assert self.release.wait(30)


def test_forced_interleaving_waits_for_the_writer_lock(store_url):
    """Writer A checks the budget (0.5 spent + 0.5 → exactly ε = 1) and inserts, then holds
    its transaction open.  Writer B, trying 0.5 on the same reward meanwhile, must wait for A's
    lock (not read the 0.5 before A's commit and pass), and once A commits, be refused."""
    with LedgerStore.create(store_url, "eps=1") as s:
        s.append(0, 0, 1, LaplaceRelease.from_epsilon(0.5))
    a = _HoldingStore.open(store_url)
    a.holding, a.release = threading.Event(), threading.Event()
    b = LedgerStore.open(store_url)
    b.append(0, 1, 2, EIGHTH)                      # B's cache is warm and current
    half = LaplaceRelease.from_epsilon(0.5)
    ta = threading.Thread(target=a.append, args=(0, 0, 1, half))
    ta.start()
    assert a.holding.wait(30)
    result: dict = {}

    def b_append():
        t0 = time.perf_counter()
        try:
            b.append(0, 0, 1, half)
            result["outcome"] = "accepted"
        except BudgetExceeded as exc:
            result["outcome"] = exc
        result["waited"] = time.perf_counter() - t0

    tb = threading.Thread(target=b_append)
    tb.start()
    time.sleep(0.5)
    assert "outcome" not in result                 # B is waiting for A's lock
    a.release.set()
    ta.join(30)
    tb.join(30)
    assert isinstance(result["outcome"], BudgetExceeded), result
    assert result["outcome"].spent == 1.0 and result["waited"] >= 0.5
    a.close()
    b.close()
    assert verify_store(store_url) == []
    with LedgerStore.open(store_url, readonly=True) as s:
        assert s.n_records() == 3 and s.status()["budget_spent"] == 1.0


class _RacedStore(LedgerStore):
    """Right after this writer's COMMIT, before it updates its cached spends, another
    writer appends (issue 26 §2's window)."""
    other: "LedgerStore | None" = None

    def _after_commit(self) -> None:
        other, self.other = self.other, None
        if other is not None:
            other.append(0, 0, 1, LaplaceRelease.from_epsilon(0.5))


def test_forced_race_between_two_writers_cannot_pass_the_budget(store_url):
    """Writer A commits 0.25 + 0.25 on reward (0, 0, 0) of an ε = 1 budget; right after A's
    second COMMIT, before A updates its cached spends, writer B (another connection) commits
    0.5 on the same reward, so the reward has spent 1.0.  A's next 0.5 must be refused (issue
    26 §2: before its fix A took its stale cache as current and accepted a spend of 1.5)."""
    LedgerStore.create(store_url, "eps=1").close()
    a = _RacedStore.open(store_url)
    b = LedgerStore.open(store_url)
    a.append(0, 0, 1, LaplaceRelease.from_epsilon(0.25))
    a.other = b
    a.append(0, 0, 1, LaplaceRelease.from_epsilon(0.25))      # B commits 0.5 in the window
    assert a.other is None
    with pytest.raises(BudgetExceeded):
        a.append(0, 0, 1, LaplaceRelease.from_epsilon(0.5))
    a.close()
    b.close()
    assert verify_store(store_url) == []


def test_cache_catches_up_from_other_writers_batches(store_url):
    """A writer's spends follow the batches other writers add (read incrementally) and are
    rebuilt when the store it knew was rewritten: both give the exact spend."""
    LedgerStore.create(store_url, "eps=1").close()
    a, b = LedgerStore.open(store_url), LedgerStore.open(store_url)
    a.append(0, 0, 1, EIGHTH)
    for _ in range(6):
        b.append(0, 0, 1, EIGHTH)
    a.append(0, 0, 1, EIGHTH)                                 # 8/8: exactly the budget
    assert a._spend_at[0] == 8
    with pytest.raises(BudgetExceeded) as err:
        a.append(0, 0, 1, EIGHTH)
    assert err.value.spent == 1.0
    a.close()
    b.close()


# -- kill -9 -------------------------------------------------------------------------------------
# test_store.py's writer, telling first which PostgreSQL process serves it
WRITER = test_store.WRITER.replace(
    "store = LedgerStore.open(sys.argv[1])\n",
    "store = LedgerStore.open(sys.argv[1])\n"
    "pid = store._db.conn.execute('SELECT pg_backend_pid()').fetchone()[0]\n"
    "sys.stdout.write(f'pid {pid}\\n'); sys.stdout.flush()\n")


def _wait_until_connectable(url: str, timeout: float = 30.0) -> None:
    t_end = time.time() + timeout
    while True:
        try:
            with LedgerStore.open(url, readonly=True) as s:
                s.n_records()
            return
        except DpledgerError:
            if time.time() > t_end:
                raise
            time.sleep(0.2)


@pytest.mark.parametrize("victim", ["client", "server"])
def test_kill9_postgres_writer_loses_nothing_acknowledged(pg_url, tmp_path, victim):
    """A writer killed with SIGKILL at random moments (``client``: the Python process;
    ``server``: the PostgreSQL process serving it, which makes the server crash-restart and
    replay its WAL): every acknowledged record is there, nothing half-written, verify clean.
    The server kill checks the durability of the asynchronous commit + flush: a record is
    acknowledged only once the WAL holding it is on disk."""
    LedgerStore.create(pg_url, "eps=1000").close()
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = np.random.default_rng(24 if victim == "client" else 25)
    acked = 0
    for _ in range(5 if victim == "client" else 3):     # a server crash-restart takes ~3 s
        proc = subprocess.Popen([sys.executable, str(script), pg_url], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=ENV)
        backend = int(proc.stdout.readline().split()[1])
        first = proc.stdout.readline()              # at least one commit in this life
        assert first.strip(), "writer did not start"
        time.sleep(float(rng.uniform(0.0, 0.3)))
        os.kill(proc.pid if victim == "client" else backend, signal.SIGKILL)
        out = first + proc.stdout.read()
        proc.wait(60)
        proc.stdout.close()
        acked = max([acked] + [int(x) for x in out.split()])
        if victim == "server":
            _wait_until_connectable(pg_url)
        acked = test_store.check_after_kill(pg_url, acked)


# -- the CLI on a PostgreSQL URL ---------------------------------------------------------------
def test_cli_on_a_postgres_url(pg_url, tmp_path, capsys):
    """init/record/status/head/verify/curve/show take a URL as they take a path; a refusal and
    bad labels are one line, exit 2; nothing printed names a password."""
    assert main(["ledger", "init", pg_url, "--budget", "eps=1", "--policy", "dp-ucb",
                 "--arms", "4"]) == 0
    assert "postgresql; eps=1.0" in capsys.readouterr().out
    rec = ["ledger", "record", pg_url, "--arm", "1", "--start", "0", "--stop", "4"]
    assert main(rec + ["laplace:eps=0.5,count=2"]) == 0
    assert main(rec + ["laplace:eps=0.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "index=0" in err and "nothing was stored" in err
    for argv in (["ledger", "status", pg_url], ["ledger", "status", pg_url, "--json"],
                 ["ledger", "head", pg_url], ["verify", pg_url], ["curve", pg_url],
                 ["show", pg_url, "--plot", str(tmp_path / "p.png")]):
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert "records: 1" in out and ": ok — store format" in out and "wrote" in out
    for bad in (["ledger", "init", pg_url + "x", "--arms", "0"],
                ["ledger", "init", pg_url + "x", "--policy", "a b"],
                ["ledger", "init", pg_url]):
        assert main(bad) == 2, bad
        assert capsys.readouterr().err.count("\n") == 1
