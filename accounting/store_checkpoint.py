"""Step-form policy state kept in a ledger store beside its records (issue 24 §1).

A policy served online (:mod:`dpledger.policies.step`) keeps three things in the store it
records its releases in, in tables of their own (the record chain and the budget do not read
them; ``verify`` ignores them):

* ``online_identity(key, value)``: the policy the store serves — name, arms, parameters,
  sampler, reward range, horizon (JSON under key ``policy``), written by the first step-form
  policy that opens the store and compared by every later one (a store made for another policy
  or K is refused);
* ``online_runs(run, generation)``: how many times run ``run`` was opened by a step-form
  policy; each opening takes the next generation in its own transaction, so a restarted server
  never draws from a random stream an earlier process used;
* ``online_checkpoints(run, seq, batches, data, sha256)``: the policy's state (private
  statistics, counters, generator state, outstanding tickets, releases recorded but not yet
  drawn), written in the transaction of the record it goes with
  (:meth:`~dpledger.accounting.store.LedgerStore.append_many`'s ``in_transaction``), or alone
  (:func:`save`).  ``batches`` is the store's batch count when it was written.

The checkpoint holds private data (un-noised sums, the generator state): the store must be
protected as the rewards themselves are.
"""
from __future__ import annotations

import hashlib
import json

from dpledger.errors import DpledgerError

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS online_identity(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS online_runs(run INTEGER PRIMARY KEY, generation INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS online_checkpoints(run INTEGER NOT NULL, seq INTEGER NOT NULL, "
    "batches INTEGER NOT NULL, data BLOB NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY(run, seq))",
)


def _write(store, fn):
    """``fn(conn)`` in one write transaction of ``store`` (rolled back on any error)."""
    if store.readonly:
        raise DpledgerError(f"{store.path}: opened read-only; a step-form policy writes to it")
    conn = store._conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        out = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return out


def bind(store, identity: dict, run: int) -> int:
    """Check (or, on a store no step-form policy has used, write) the served policy's
    ``identity``, and take run ``run``'s next generation; returns it (0 at the first
    opening).  One transaction."""
    text = json.dumps(identity, sort_keys=True, allow_nan=False)

    def fn(conn):
        for sql in _SCHEMA:
            conn.execute(sql)
        row = conn.execute("SELECT value FROM online_identity WHERE key = 'policy'").fetchone()
        if row is None:
            conn.execute("INSERT INTO online_identity VALUES ('policy', ?)", (text,))
        elif row[0] != text:
            raise DpledgerError(f"{store.path} serves {describe(json.loads(row[0]))}, not "
                                f"{describe(identity)}; use another store")
        got = conn.execute("SELECT generation FROM online_runs WHERE run = ?", (run,)).fetchone()
        gen = 0 if got is None else int(got[0]) + 1
        conn.execute("INSERT OR REPLACE INTO online_runs VALUES (?, ?)", (run, gen))
        return gen
    return _write(store, fn)


def describe(identity: dict) -> str:
    """The identity in the user's terms (one line)."""
    params = ", ".join(f"{k}={v!r}" for k, v in sorted(identity.get("params", {}).items()))
    lo, hi = identity.get("range", (0, 1))
    horizon = identity.get("horizon")
    return (f"{identity.get('policy')}({params}) with {identity.get('arms')} arms, sampler "
            f"{identity.get('sampler')}, range [{lo}, {hi}], horizon "
            f"{'none' if horizon is None else horizon}")


def writer(run: int, data: bytes):
    """The ``in_transaction`` callable that stores checkpoint ``data`` of ``run`` beside an
    append's records."""
    sha = hashlib.sha256(data).hexdigest()

    def fn(conn):
        seq = conn.execute(
            "INSERT INTO online_checkpoints SELECT ?, COALESCE(MAX(seq), 0) + 1, "
            "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'batches'), ?, ? "
            "FROM online_checkpoints WHERE run = ? RETURNING seq", (run, data, sha, run)
        ).fetchone()[0]
        if seq % 64 == 0:
            # only the newest checkpoint of a run is ever read: keep the table small
            conn.execute("DELETE FROM online_checkpoints WHERE run = ? AND seq < ?", (run, seq))
    return fn


def save(store, run: int, data: bytes) -> None:
    """A checkpoint without records (one transaction)."""
    _write(store, writer(run, data))


def latest(store, run: int) -> bytes | None:
    """Run ``run``'s newest checkpoint (its sha256 checked), or None."""
    try:
        row = store._conn.execute("SELECT data, sha256, seq FROM online_checkpoints WHERE run = ? "
                                  "ORDER BY seq DESC LIMIT 1", (run,)).fetchone()
    except Exception:        # no table yet: never checkpointed
        return None
    if row is None:
        return None
    data, sha, seq = row
    if hashlib.sha256(data).hexdigest() != sha:
        raise DpledgerError(f"{store.path}: checkpoint {seq} of run {run} is damaged (sha256 "
                            "mismatch); the policy cannot resume from it")
    return bytes(data)
