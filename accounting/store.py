"""A persistent per-reward ledger: an SQLite file a long-running client appends to as it runs.

Layout (SQLite from the standard library, WAL journal, so readers never block the writer and a
writer killed at any moment leaves the last committed state):

* ``meta(key, value)``: ``format`` = ``dpledger-store``, ``version``, ``budget`` (JSON, or
  absent);
* ``releases(id, json)``: the interned releases (``release_to_json``, ids 0, 1, … in order);
* ``batches(seq, n, data, sha256, n_releases, link)``: one row per append — ``n`` ledger rows
  packed as a little-endian int64 array of shape (n, 6) with columns (run, arm, start, stop,
  release_id, count) (``accounting.ledger.ROW_FIELDS``), the blob's sha256, the number of
  releases interned when it was committed, and its link in the record chain
  (:mod:`.store_chain`); ``meta`` holds the chain's ``head`` and the numbers of ``batches`` and
  ``records`` beside it, written in the same transaction.  Packing keeps reading a million rows
  a matter of ``np.frombuffer``.  Every read checks the head and counts against the last batch
  (a deleted last record is refused at once); ``verify`` recomputes every link.  Version 1
  stores (no chain) are read as they are and given a chain when opened for writing.

One append (:meth:`LedgerStore.append` or a batch, :meth:`LedgerStore.append_many`) is one
transaction: ``BEGIN IMMEDIATE`` … ``COMMIT`` with ``synchronous=FULL``; it is acknowledged
(the call returns) only after the commit, so an acknowledged record survives a kill -9 and a
half-written one is rolled back by SQLite's journal.

With a budget (:mod:`.filters`), every append is checked against each touched reward's spend
before it is written; a refused append raises :class:`~.filters.BudgetExceeded` naming the
reward and its spend, and stores nothing (the transaction is rolled back).  A batch is admitted
or refused as a whole: spends only grow, so the batch is admissible iff every reward's spend
*after* the whole batch is within the budget.

Per-reward spends are kept by the writer as piecewise-constant functions per (run, arm) stream
(breakpoints and values; cost grows with distinct range ends, never with indices).  They are
float upper bounds: count × cost stepped up when the float product fell short (Dekker's
error-free product); a batch of several ranges sums per piece by a difference array, exact
when the costs are dyadic on a common grid, otherwise with an error of at most 2·n·u·Σ cost
(γ_n bound of recursive summation, u = 2^-53) that is added and the piece stepped up once more; the addition to the old spend steps up exactly when it rounded down (Knuth's
TwoSum), so single records of dyadic costs (4 × ε = 0.25) keep their exact spend.  When another
process has written since (``PRAGMA data_version``, read inside the write transaction, where no
other writer can commit), the spends are rebuilt from the file inside that transaction.
``verify`` recomputes every spend independently from the rows (integer counts per release,
then an exact rational sum for every piece whose float spend comes near the limit).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import pathlib
import sqlite3
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from dpledger.accounting import store_chain as chain
from dpledger.accounting.filters import Budget, BudgetExceeded, CURRENCY_OF
from dpledger.accounting.ledger import ARM_LIMIT as _MAX_ARM
from dpledger.accounting.releases import Release, release_from_json, release_to_json
from dpledger.errors import DpledgerError

FORMAT = "dpledger-store"
VERSION = 2                   # 2: the record chain (issue 25 §3); 1 is read and migrated
_U = 2.0 ** -53
_MAX_INT = (1 << 62)          # counts, indices, runs and arms fit int64 with room for sums
_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_store(path: str | os.PathLike) -> bool:
    """True when ``path`` is an SQLite file (the dispatch used by verify/curve/show)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except (OSError, ValueError, TypeError):     # missing, a folder, a NUL in the name
        return False


def _release_key(release: Release) -> str:
    return json.dumps(release_to_json(release), sort_keys=True, allow_nan=False)


@dataclass
class _Stream:
    """Piecewise-constant spend of one (run, arm): ``values[j]`` on ``[bp[j], bp[j+1])``."""

    bp: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))


def _add_ranges(st: _Stream, start: np.ndarray, stop: np.ndarray,
                cost: np.ndarray) -> tuple[_Stream, np.ndarray, np.ndarray]:
    """The stream after adding ``cost[k]`` on ``[start[k], stop[k])`` (upper bounds, see module
    docstring), plus the new pieces' old values and a mask of the pieces covered."""
    ends = np.unique(np.concatenate([start, stop]))
    if st.bp.size:      # merge into the sorted breakpoints: O(m + k log m), no re-sort of m
        pos = np.searchsorted(st.bp, ends)
        fresh = (pos >= st.bp.size) | (st.bp[np.minimum(pos, st.bp.size - 1)] != ends)
        pts = np.insert(st.bp, pos[fresh], ends[fresh]) if fresh.any() else st.bp
    else:
        pts = ends
    n_old = st.values.size
    idx = np.searchsorted(st.bp, pts[:-1], side="right") - 1
    inside = (idx >= 0) & (idx < n_old)
    old = np.zeros(pts.size - 1)
    old[inside] = st.values[idx[inside]]
    i0 = np.searchsorted(pts, start)
    i1 = np.searchsorted(pts, stop)
    diff = np.zeros(pts.size)
    np.add.at(diff, i0, cost)
    np.add.at(diff, i1, -cost)
    cover = np.zeros(pts.size, dtype=np.int64)
    np.add.at(cover, i0, 1)
    np.add.at(cover, i1, -1)
    covered = np.cumsum(cover)[:-1] > 0
    add = np.cumsum(diff)[:-1]
    with np.errstate(over="ignore", invalid="ignore"):
        # exact when every partial sum is a float (one range; or dyadic costs on a common
        # grid); otherwise the rounding bound of the summation (:func:`_sum_error`)
        err = 0.0 if _sums_exact(cost) else _sum_error(start.size, add)
        inc = np.maximum(add, 0.0) + err
        s = old + inc
        # Knuth's TwoSum: e is the exact rounding error of old + inc; step up only if s fell
        # below the exact sum (so exactly representable spends, 4 × 0.25, stay exact)
        bb = s - old
        e = (old - (s - bb)) + (inc - bb)
        s = np.where(e > 0, np.nextafter(s, np.inf), s)
        if err > 0:
            s = np.nextafter(s, np.inf)
        new = np.where(covered, s, old)
    return _Stream(pts, new), old, covered


def _sum_error(k: int, add: np.ndarray) -> float:
    """A bound on |computed − exact| of every piece's added total in :func:`_add_ranges`.

    Each of the 2k signed costs enters one ``add.at`` cell sum (≤ 2k roundings) and the cells
    one cumulative sum (≤ 2k roundings); every intermediate is, exactly, a sum of costs of
    ranges covering one piece (a cell: ranges starting, or ending, at one breakpoint; a prefix:
    the piece's total), so it is at most A, the largest exact piece total.  Each rounding errs
    by at most u·(A + E) (Higham 2002, §4.2, with the model fl(a + b) = (a + b)(1 + δ),
    |δ| ≤ u), so the total error E ≤ N·u·(A + E), N = 4k; with A ≤ Â + E (Â the largest
    computed total), E ≤ N·u·Â/(1 − 2N·u).  Rounded up twice for its own arithmetic.  (The
    older bound 2(k + 1)·u·Σcost grew with the whole history, k² for a rebuilt stream.)"""
    n = 4.0 * (k + 1)
    top = float(np.max(np.abs(add))) if add.size else 0.0
    if not math.isfinite(top) or 2.0 * n * _U >= 0.5:
        return math.inf
    err = n * _U * top / (1.0 - 2.0 * n * _U)
    return float(np.nextafter(np.nextafter(err, np.inf), np.inf))


def _sums_exact(cost: np.ndarray) -> bool:
    """True when every signed partial sum of ±``cost`` is exactly a float: all costs are
    integer multiples of their smallest binary unit 2^k and 2·Σ|cost| < 2^53·2^k."""
    if cost.size <= 1:
        return True
    if not np.all(np.isfinite(cost)):
        return False
    m, ex = np.frexp(cost)
    mant = (m * 2.0 ** 53).astype(np.int64)              # exact: cost = mant · 2^(ex−53)
    low = mant & -mant
    nz = mant != 0
    if not nz.any():
        return True
    unit = np.min(np.ldexp(low[nz].astype(np.float64), (ex[nz] - 53).astype(np.int64)))
    return bool(2.0 * float(np.sum(cost)) / unit < 2.0 ** 52)


def _stream_keys(data: np.ndarray) -> np.ndarray:
    """One int64 per row naming its (run, arm): run·2^31 + arm (arm < 2^20 and run < 2^31 are
    checked on the way in)."""
    return data[:, 0] * (1 << 31) + data[:, 1]


def _by_stream(data: np.ndarray):
    """(run, arm) and the row indices of each stream in ``data`` (rows run, arm, …), streams in
    key order, rows in append order within a stream."""
    keys = _stream_keys(data)
    order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.r_[True, keys[order][1:] != keys[order][:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:]):
        sel = order[a:b]
        yield (int(data[sel[0], 0]), int(data[sel[0], 1])), sel


def _times_up(cost: np.ndarray, count: np.ndarray) -> np.ndarray:
    """count × cost for each row, rounded up: exact products stay exact (Dekker's
    error-free product by Veltkamp splitting tells whether the float product fell short)."""
    n = count.astype(np.float64)
    big = count >= (1 << 53)
    n = np.where(big, np.nextafter(n, np.inf), n)        # float(count) may have rounded down
    with np.errstate(over="ignore", invalid="ignore"):
        p = cost * n
        sa = 134217729.0 * cost
        ahi = sa - (sa - cost)
        alo = cost - ahi
        sb = 134217729.0 * n
        bhi = sb - (sb - n)
        blo = n - bhi
        err = ((ahi * bhi - p) + ahi * blo + alo * bhi) + alo * blo
        p = np.where((err > 0) | big | ~np.isfinite(err), np.nextafter(p, np.inf), p)
        return np.where(np.isfinite(cost), p, np.inf)


class LedgerStore:
    """A ledger store opened for reading and appending.  Use :meth:`create` or :meth:`open`."""

    def __init__(self, path: str | os.PathLike, conn: sqlite3.Connection, budget: Budget | None,
                 readonly: bool):
        self.path = os.fspath(path)
        self._conn = conn
        self.budget = budget
        self.readonly = readonly
        self._release_ids: dict[str, int] = {}
        self._releases: list[Release] = []
        self._unit_costs: list[float] = []
        self._spend: dict[tuple[int, int], _Stream] | None = None
        self._data_version: int | None = None
        self.version = VERSION
        self._genesis = chain.genesis(None)
        self._release_links: list[bytes] = []

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike, budget: Budget | str | None = None) -> "LedgerStore":
        """A new, empty store at ``path`` (refuses to overwrite an existing file)."""
        if isinstance(budget, str):
            budget = Budget.parse(budget)
        path = _check_path(path)
        if os.path.exists(path):
            raise DpledgerError(f"{os.fspath(path)} already exists; not overwriting it")
        conn = _connect(path, readonly=False)
        _enable_wal(conn, path)
        budget_json = json.dumps(budget.to_json(), allow_nan=False) if budget else None
        with conn:
            conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.execute("CREATE TABLE releases(id INTEGER PRIMARY KEY, json TEXT UNIQUE NOT NULL)")
            conn.execute("CREATE TABLE batches(seq INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
                         "data BLOB NOT NULL, sha256 TEXT NOT NULL, n_releases INTEGER NOT NULL, "
                         "link TEXT NOT NULL)")
            conn.executemany("INSERT INTO meta VALUES (?, ?)",
                             [("format", FORMAT), ("version", str(VERSION)),
                              ("head", chain.genesis(budget_json).hex()), ("batches", "0"),
                              ("records", "0")]
                             + ([("budget", budget_json)] if budget else []))
        store = cls(path, conn, budget, readonly=False)
        store._genesis = chain.genesis(budget_json)
        return store

    @classmethod
    def open(cls, path: str | os.PathLike, readonly: bool = False) -> "LedgerStore":
        path = _check_path(path)
        if not os.path.exists(path):
            raise DpledgerError(f"no ledger store at {os.fspath(path)}")
        if not is_store(path):
            raise DpledgerError(f"{os.fspath(path)} is not a ledger store (not an SQLite file)")
        conn = _connect(path, readonly=readonly)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            conn.close()
            folder = os.path.dirname(os.path.abspath(path))
            if readonly and "unable to open" in str(exc) and not os.access(folder, os.W_OK):
                raise DpledgerError(f"{os.fspath(path)}: cannot read a ledger store in a "
                                    f"read-only folder ({folder}): SQLite needs to create its "
                                    "-shm file beside it; copy the store to a writable "
                                    "folder") from None
            raise DpledgerError(f"{os.fspath(path)} is not a ledger store ({exc})") from None
        if meta.get("format") != FORMAT:
            conn.close()
            raise DpledgerError(f"{os.fspath(path)} is not a dpledger ledger store")
        if meta.get("version") not in ("1", str(VERSION)):
            conn.close()
            raise DpledgerError(f"{os.fspath(path)}: store version {meta.get('version')!r}, "
                                f"this dpledger reads versions 1 and {VERSION}")
        try:
            budget = Budget.from_json(json.loads(meta["budget"])) if "budget" in meta else None
            if not readonly:
                _enable_wal(conn, path)
            store = cls(path, conn, budget, readonly)
            store.version = int(meta["version"])
            store._genesis = chain.genesis(meta.get("budget"))
            store._load_releases()
            if store.version == 1 and not readonly:
                store._migrate_v1()
        except DpledgerError as exc:
            conn.close()
            if os.fspath(path) in str(exc):
                raise
            raise DpledgerError(f"{os.fspath(path)}: {exc}") from None
        except (sqlite3.DatabaseError, ValueError, TypeError, KeyError) as exc:
            conn.close()
            raise DpledgerError(f"{os.fspath(path)}: damaged ledger store ({exc})") from None
        return store

    def close(self) -> None:
        self._conn.close()

    @contextlib.contextmanager
    def snapshot(self):
        """One read transaction: every query inside sees the same state, while writers in
        other processes go on appending (WAL)."""
        self._conn.execute("BEGIN")
        try:
            yield self
        finally:
            self._conn.execute("COMMIT")

    def __enter__(self) -> "LedgerStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- releases --------------------------------------------------------------------------
    def _load_releases(self) -> None:
        rows = self._conn.execute(
            "SELECT id, json FROM releases WHERE id >= ? ORDER BY id",
            (len(self._releases),)).fetchall()
        for rid, text in rows:
            if rid != len(self._releases):
                raise DpledgerError(f"{self.path}: release ids are not 0, 1, … (found {rid})")
            try:
                release = release_from_json(json.loads(text))
            except (ValueError, TypeError, KeyError) as exc:
                raise DpledgerError(f"{self.path}: release {rid} does not parse ({exc})") from None
            self._releases.append(release)
            self._release_ids[text] = rid
            self._release_links.append(chain.release_link(
                self._release_links[-1] if self._release_links else self._genesis, text))
            if self.budget is not None:
                self._unit_costs.append(self.budget.unit_cost(release))

    @property
    def releases(self) -> list[Release]:
        return list(self._releases)

    def _intern(self, release: Release) -> int:
        """Inside a write transaction: the release's id, inserting it if new."""
        if not hasattr(release, "normal_form"):
            raise DpledgerError(f"not a release: {release!r}")
        key = _release_key(release)
        rid = self._release_ids.get(key)
        if rid is None:
            self._load_releases()           # another writer may have added it
            rid = self._release_ids.get(key)
        if rid is None:
            rid = len(self._releases)
            self._conn.execute("INSERT INTO releases(id, json) VALUES (?, ?)", (rid, key))
            self._releases.append(release)
            self._release_ids[key] = rid
            self._release_links.append(chain.release_link(
                self._release_links[-1] if self._release_links else self._genesis, key))
            if self.budget is not None:
                self._unit_costs.append(self.budget.unit_cost(release))
        return rid

    # -- appending ---------------------------------------------------------------------------
    def append(self, arm: int, start: int, stop: int, release: Release, count: int = 1,
               run: int = 0) -> int:
        """One record (one transaction): ``count`` releases of ``release`` over observations
        ``[start, stop)`` of ``arm`` in ``run``.  Returns 1, once committed."""
        return self.append_many([(run, arm, start, stop, release, count)])

    def append_many(self, records: Iterable[tuple], in_transaction=None) -> int:
        """A batch of ``(run, arm, start, stop, release, count)`` in one transaction: all
        stored, or (budget refusal, bad input, crash) none.  Returns the number of records
        appended, once committed.  ``in_transaction(conn)``, if given, runs inside that
        transaction after the records are written and before COMMIT (the step-form policies
        write their checkpoint there: :mod:`.store_checkpoint`)."""
        if self.readonly:
            raise DpledgerError("store opened read-only")
        recs = list(records)
        if not recs:
            return 0
        if any(not isinstance(r, (tuple, list)) or len(r) != 6 for r in recs):
            raise DpledgerError("records are (run, arm, start, stop, release, count) tuples")
        releases = [r[4] for r in recs]
        ints = np.empty((len(recs), 5), dtype=object)
        ints[:] = [(r[0], r[1], r[2], r[3], r[5]) for r in recs]
        cols = _int_columns(ints)
        uniq: dict[int, int] = {}
        distinct: list[Release] = []
        which = np.empty(len(recs), dtype=np.int64)
        for i, rel in enumerate(releases):
            k = uniq.get(id(rel))
            if k is None:
                k = uniq[id(rel)] = len(distinct)
                distinct.append(rel)
            which[i] = k
        return self._append(cols, distinct, which, in_transaction)

    def append_columns(self, arm, start, stop, releases: Sequence[Release], which=0, count=1,
                       run=0) -> int:
        """A batch given as columns (numpy arrays or scalars, broadcast): row i is
        ``count[i]`` releases of ``releases[which[i]]`` over ``[start[i], stop[i])`` of
        ``arm[i]`` in ``run[i]``.  One transaction, as :meth:`append_many`; the fast path
        for bulk appends (no Python object per row)."""
        if self.readonly:
            raise DpledgerError("store opened read-only")
        try:
            arrays = np.broadcast_arrays(*(np.asarray(x) for x in (run, arm, start, stop, count,
                                                                  which)))
        except ValueError:
            raise DpledgerError("append_columns: columns of different lengths") from None
        arrays = [np.atleast_1d(a) for a in arrays]
        for name, a in zip(("run", "arm", "start", "stop", "count", "which"), arrays):
            if a.dtype.kind not in "iu":
                raise DpledgerError(f"{name} must be an integer array, got dtype {a.dtype}")
        cols = _check_columns([a.astype(np.int64) for a in arrays[:5]])
        which = arrays[5].astype(np.int64)
        releases = list(releases)
        if which.size and (which.min() < 0 or which.max() >= len(releases)):
            raise DpledgerError("which must index the releases given")
        return self._append(cols, releases, which)

    def _append(self, cols: list[np.ndarray], distinct: list[Release], which: np.ndarray,
                in_transaction=None) -> int:
        if cols[0].size == 0:
            return 0
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            # the version inside the write lock: no other writer can commit until ours does,
            # and our own commit does not change it, so after COMMIT it names exactly the
            # state the new spends describe (read after COMMIT, it could already count another
            # writer's record that the spends lack: issue 26 §2)
            version = self._read_data_version()
            ids = np.array([self._intern(rel) for rel in distinct], dtype=np.int64)[which]
            data = np.stack([cols[0], cols[1], cols[2], cols[3], ids, cols[4]], axis=1)
            new_spend = self._check_budget(data, version) if self.budget is not None else None
            blob = data.astype("<i8", copy=False).tobytes()
            self._link_batch(data.shape[0], blob)
            if in_transaction is not None:
                in_transaction(conn)
            conn.execute("COMMIT")
            self._after_commit()
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # releases interned in the rolled-back transaction are gone from the file too
            self._releases, self._release_ids, self._unit_costs = [], {}, []
            self._release_links = []
            self._load_releases()
            raise
        if new_spend is not None:
            self._spend.update(new_spend)
        self._data_version = version
        return int(data.shape[0])

    def _meta(self) -> dict:
        return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    def _link_batch(self, n: int, blob: bytes) -> None:
        """Inside the write transaction: insert the batch with its link after the stored head,
        and move the head and counts (issue 25 §3).  The head is checked against the last
        batch first, so a store whose last records were deleted refuses further appends."""
        meta = self._meta()
        self._check_head(meta)
        seq = int(meta["batches"]) + 1
        sha = hashlib.sha256(blob).hexdigest()
        n_rel = len(self._releases)
        link = chain.batch_link(bytes.fromhex(meta["head"]), seq, n, sha,
                                self._release_links[-1] if n_rel else self._genesis, n_rel)
        self._conn.execute("INSERT INTO batches(seq, n, data, sha256, n_releases, link) "
                           "VALUES (?, ?, ?, ?, ?, ?)", (seq, n, blob, sha, n_rel, link.hex()))
        self._conn.executemany("UPDATE meta SET value = ? WHERE key = ?",
                               [(link.hex(), "head"), (str(seq), "batches"),
                                (str(int(meta["records"]) + n), "records")])

    def _check_head(self, meta: dict | None = None) -> None:
        """The stored head and counts agree with the last batch (O(1): an index lookup and a
        count); raises :class:`DpledgerError` naming the disagreement.  Version 1 stores have
        no chain and pass."""
        if self.version < 2:
            return
        meta = self._meta() if meta is None else meta
        try:
            head, n_batches, n_records = meta["head"], int(meta["batches"]), int(meta["records"])
        except (KeyError, ValueError):
            raise DpledgerError(f"{self.path}: damaged ledger store: the chain head or counts "
                                "are missing (dpledger verify lists every problem)") from None
        last = self._conn.execute(
            "SELECT seq, link FROM batches ORDER BY seq DESC LIMIT 1").fetchone()
        count, total = self._conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(n), 0) FROM batches").fetchone()
        if (count, total) != (n_batches, n_records) or (
                (last[1] if last else self._genesis.hex()) != head) or (
                last is not None and last[0] != n_batches):
            raise DpledgerError(
                f"{self.path}: the record chain does not match: the store says {n_batches} "
                f"batches ({n_records} records) ending at head {head[:16]}…, the file holds "
                f"{count} ({total} records) — records were deleted, inserted or edited outside "
                "dpledger (dpledger verify names the first bad one)")

    def _migrate_v1(self) -> None:
        """Give a version 1 store (no chain) its chain, in one transaction: the links of the
        existing batches in order, the head and counts, version 2."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            meta = self._meta()
            if meta.get("version") == "1":
                conn.execute("ALTER TABLE batches ADD COLUMN n_releases INTEGER NOT NULL "
                             "DEFAULT 0")
                conn.execute("ALTER TABLE batches ADD COLUMN link TEXT NOT NULL DEFAULT ''")
                rows = conn.execute("SELECT seq, n, sha256, data FROM batches ORDER BY seq"
                                    ).fetchall()
                # a version 1 batch does not say how many releases existed when it was
                # committed: link each to the releases its rows name (the largest id + 1)
                prev, total, updates = self._genesis, 0, []
                for i, (seq, n, sha, blob) in enumerate(rows, start=1):
                    if seq != i:
                        raise DpledgerError(f"batch numbers are not 1, 2, … (found {seq})")
                    ids = np.frombuffer(blob, dtype="<i8").reshape(-1, 6)[:, 4]
                    n_rel = int(ids.max()) + 1 if ids.size else 0
                    if n_rel > len(self._releases):
                        raise DpledgerError(f"batch {seq} names a release that does not exist")
                    head = self._release_links[n_rel - 1] if n_rel else self._genesis
                    prev = chain.batch_link(prev, seq, n, sha, head, n_rel)
                    updates.append((n_rel, prev.hex(), seq))
                    total += n
                conn.executemany("UPDATE batches SET n_releases = ?, link = ? WHERE seq = ?",
                                 updates)
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                 [("head", prev.hex()), ("batches", str(len(rows))),
                                  ("records", str(total)), ("version", str(VERSION))])
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self.version = VERSION

    def head(self) -> dict:
        """``{"batches", "records", "head"}``: what an auditor writes down to check later that
        the store only grew (:func:`verify_store` with ``since``)."""
        meta = self._meta()
        self._check_head(meta)
        return {"batches": int(meta.get("batches", 0)), "records": int(meta.get("records", 0)),
                "head": meta.get("head")}

    def _after_commit(self) -> None:
        """Called between an append's COMMIT and the update of the cached spends: nothing here;
        tests override it to force another writer into that window."""

    def _read_data_version(self) -> int:
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def _check_budget(self, data: np.ndarray, version: int) -> dict:
        """Inside the write transaction: the new spends of the streams ``data`` touches, or
        :class:`BudgetExceeded` naming the first reward (by run, arm, index) that overflows.
        ``version``: the store's data version read inside this transaction; the cached spends
        are rebuilt unless they were computed at that version."""
        if self._spend is None or self._data_version != version:
            self._spend = self._rebuild_spend()
            self._data_version = version        # kept even if this append is refused
        total = self._record_costs(data)
        limit = self.budget.limit
        for k in np.flatnonzero(~np.isfinite(total)).tolist()[:1]:
            rel = self._releases[int(data[k, 4])]
            raise BudgetExceeded(
                f"refused: release {rel.kind}{release_to_json(rel)} has no finite "
                f"{self.budget.currency} cost, so no record of it fits the budget "
                f"{self.budget.describe()}", int(data[k, 0]), int(data[k, 1]), int(data[k, 2]),
                math.nan, math.inf, limit)
        out = {}
        for sk, sel in _by_stream(data):
            st = self._spend.get(sk, _Stream())
            new, old, covered = _add_ranges(st, data[sel, 2], data[sel, 3], total[sel])
            over = covered & ~(new.values <= limit)
            if over.any():
                j = int(np.flatnonzero(over)[0])
                idx = int(new.bp[j])
                raise BudgetExceeded(
                    f"refused: reward run={sk[0]} arm={sk[1]} index={idx} has spent "
                    f"{float(old[j])!r} {CURRENCY_OF[self.budget.currency]} and this record "
                    f"would take it to {float(new.values[j])!r} > budget {self.budget.describe()}"
                    "; nothing was stored", sk[0], sk[1], idx, float(old[j]),
                    float(new.values[j] - old[j]), limit)
            out[sk] = new
        return out

    def _rebuild_spend(self) -> dict:
        self._load_releases()
        data = self.rows_array()
        spend: dict[tuple[int, int], _Stream] = {}
        if data.shape[0] == 0:
            return spend
        total = self._record_costs(data)
        for sk, sel in _by_stream(data):
            spend[sk] = _add_ranges(_Stream(), data[sel, 2], data[sel, 3], total[sel])[0]
        return spend

    def _record_costs(self, data: np.ndarray) -> np.ndarray:
        """Each row's cost in the budget's currency: its release's unit cost × its count,
        rounded up (:func:`_times_up`)."""
        costs = np.array(self._unit_costs, dtype=np.float64)[data[:, 4]]
        return _times_up(costs, data[:, 5])

    # -- reading ---------------------------------------------------------------------------
    def n_records(self) -> int:
        return int(self._conn.execute("SELECT COALESCE(SUM(n), 0) FROM batches").fetchone()[0])

    def rows_array(self, check: bool = False) -> np.ndarray:
        """Every stored row as an (N, 6) int64 array in append order (one read transaction,
        so a consistent snapshot while a writer appends).  ``check``: verify each batch's
        sha256 too; its size and type are always checked (raises :class:`DpledgerError` naming
        the batch)."""
        if not check:
            self._check_head()
        cur = self._conn.execute("SELECT seq, n, data, sha256 FROM batches ORDER BY seq")
        parts = []
        for seq, n, blob, sha in cur:
            if not isinstance(blob, bytes) or not isinstance(n, int) or n < 1 \
                    or len(blob) != 48 * n:
                size = len(blob) if isinstance(blob, (bytes, str)) else type(blob).__name__
                raise DpledgerError(f"batch {seq}: {n!r} rows declared, {size} bytes")
            if check:
                if hashlib.sha256(blob).hexdigest() != sha:
                    raise DpledgerError(f"batch {seq}: sha256 mismatch")
            parts.append(blob)
        if not parts:
            return np.zeros((0, 6), dtype=np.int64)
        data = np.frombuffer(b"".join(parts), dtype="<i8").reshape(-1, 6).astype(np.int64,
                                                                                  copy=False)
        if not check:                      # verify reports every problem itself
            self._load_releases()          # release ids written by another writer
            bad = row_problems(data, len(self._releases))
            if bad:
                raise DpledgerError(f"{self.path}: damaged ledger store: {bad[0]} "
                                    "(dpledger verify lists every problem)")
        return data

    def to_ledger(self, data: np.ndarray | None = None):
        """The stored rows as a :class:`~dpledger.accounting.ledger.RewardLedger` (one
        snapshot; streams' lengths are their largest stop)."""
        from dpledger.accounting.ledger import RewardLedger
        self._load_releases()
        if data is None:
            data = self.rows_array()
        try:
            led = RewardLedger.of_releases(self._releases)
        except DpledgerError as exc:
            raise DpledgerError(f"{self.path}: {exc}") from None
        if data.shape[0]:
            led.append_rows(*(np.ascontiguousarray(data[:, j]) for j in range(6)), owned=True)
            keys = _stream_keys(data)
            uk, inv = np.unique(keys, return_inverse=True)
            length = np.zeros(uk.size, dtype=np.int64)
            np.maximum.at(length, inv, data[:, 3])
            led.set_stream_lengths(uk >> 31, uk & ((1 << 31) - 1), length)
        return led

    def status(self, deltas: Sequence[float] | None = None) -> dict:
        """``{"records", "streams", "releases", "budget", "privacy", "compositions",
        "worst_for", …}``.  The privacy block is ``compose --json``'s schema, each number the
        maximum over every stored reward (through the store's maximal per-reward compositions,
        as a run's realized block: issue 26 §1 — one reward picked by a scalar key can be far
        from the worst in another number).  ``compositions``: those maximal compositions, each
        with a reward that has it; ``worst_for``: for each number, the reward attaining it (a
        witness: the numbers are not computed from it)."""
        from dpledger.accounting.realized import realized_privacy_witnessed
        from dpledger.accounting.schema import SCHEMA_VERSION, parse_deltas, privacy_block
        deltas = parse_deltas(deltas)
        data = self.rows_array()
        self._load_releases()
        out: dict = {"schema_version": SCHEMA_VERSION, "records": int(data.shape[0])}
        out["streams"] = _n_streams(data)
        out["releases"] = len(self._releases)
        out["budget"] = self.budget.to_json() if self.budget else None
        maximal, pt = self.maximal_rewards(data)
        if not maximal:
            out["privacy"] = privacy_block([], deltas, adaptive=True)
            out["compositions"], out["worst_for"] = [], {}
            out["budget_spent"] = 0.0 if self.budget else None
            return out
        # a live client chooses every release from the history: fully adaptive composition,
        # so only accountants valid under adaptive parameters (no PLD unless all-Gaussian)
        block, wit = realized_privacy_witnessed([c for c, _ in maximal], deltas, adaptive=True)
        out["privacy"] = block
        out["privacy_label"] = ("realized: the maximum over every reward so far, read as an "
                                "odometer (parameters chosen adaptively)"
                                + ("; the budget is the filter's guarantee" if self.budget else ""))
        out["compositions"] = [{"reward": ref, "composition": c.to_json()} for c, ref in maximal]
        out["worst_for"] = {k: dict(maximal[i][1], composition=i) for k, i in sorted(wit.items())}
        if self.budget:
            out["budget_spent"] = max_spend(self, data, pieces=pt)[0]
        return out

    def maximal_rewards(self, data: np.ndarray | None = None):
        """(the maximal per-reward compositions of the stored rows, each with a reward
        ``{"run", "arm", "index"}`` that has it; the piece totals they were found on).  Every
        reward's composition is dominated by one of them, so each privacy number's maximum over
        every reward is its maximum over these.  ``([], None)`` for an empty store."""
        from dpledger.accounting import reward_queries as rq
        from dpledger.accounting.ledger import RewardLedger
        if data is None:
            data = self.rows_array()
        if data.shape[0] == 0:
            return [], None
        self._load_releases()
        pt = rq.piece_totals_of_rows(data, len(self._releases))
        if pt is not None:
            led = RewardLedger.of_releases(self._releases)
        else:                          # counts too large for the fast route: the ledger's own
            led = self.to_ledger(data)
            pt = rq.piece_totals(led)
        pairs = rq.maximal_pieces(led, pt)
        return [(c, {"run": int(pt.run[p]), "arm": int(pt.arm[p]), "index": int(pt.start[p])})
                for c, p in pairs], pt

    def worst_reward(self, deltas: Sequence[float] = (1e-9,), data: np.ndarray | None = None):
        """(the worst reward by the ledger's ranking key — pure ε, or GDP μ once a Gaussian is
        present — and the piece totals it was found on); (None, None) for an empty store.  A
        ranking for reading, not a privacy statement: :meth:`status` reports every number's
        maximum over all rewards.  The fast route
        (:func:`~dpledger.accounting.reward_queries.worst_reward_of_rows`: one sort of the
        range ends, no ledger) unless it declines; then the ledger's own query."""
        from dpledger.accounting import reward_queries as rq
        if data is None:
            data = self.rows_array()
        if data.shape[0] == 0:
            return None, None
        self._load_releases()
        fast = rq.worst_reward_of_rows(data, self._releases, deltas)
        if fast is not None:
            return fast
        led = self.to_ledger(data)
        return led.worst_reward(deltas), rq.piece_totals(led)


def max_spend(store: LedgerStore, data: np.ndarray, ledger=None,
              pieces=None) -> tuple[float, tuple[int, int, int] | None]:
    """The largest per-reward spend in the budget's currency, recomputed from the rows alone
    (integer counts per release per piece, then an exact rational sum for every piece within
    1e-9 relative of the float maximum) and the reward attaining it.  ``pieces``: the piece
    totals of ``data`` already computed (by :meth:`LedgerStore.worst_reward`)."""
    from fractions import Fraction
    from dpledger.accounting import reward_queries as rq
    from dpledger.accounting.numerics import float_up
    if data.shape[0] == 0:
        return 0.0, None
    if pieces is not None:
        pt, releases = pieces, store._releases
    else:
        led = ledger if ledger is not None else store.to_ledger(data)
        pt, releases = rq.piece_totals(led), led.releases   # memoised on the ledger
    unit = [store.budget.unit_cost(r) for r in releases]
    with np.errstate(over="ignore"):
        approx = rq._weighted(np.asarray(unit, dtype=np.float64), pt.counts)   # 0·∞ = 0
    top = float(np.max(approx))
    if not math.isfinite(top):
        p = int(np.argmax(approx))
        return math.inf, (int(pt.run[p]), int(pt.arm[p]), int(pt.start[p]))
    cand = np.flatnonzero(approx >= top * (1 - 1e-9))
    best, where = Fraction(-1), None
    for p in cand.tolist():
        exact = sum((Fraction(int(c)) * Fraction(unit[i])
                     for i, c in enumerate(pt.counts[:, p].tolist()) if c), Fraction(0))
        if exact > best:
            best, where = exact, (int(pt.run[p]), int(pt.arm[p]), int(pt.start[p]))
    return float_up(best), where


def per_reward_values(store: LedgerStore, data: np.ndarray | None = None):
    """Per-piece privacy of a store's rewards, for reading and drawing (``show``): (pieces,
    values, name, limit).  A piece is a range of one (run, arm) stream whose rewards share one
    composition (:func:`~dpledger.accounting.reward_queries.piece_totals_of_rows`).  With a
    budget the value is each piece's spend in the budget's currency and ``limit`` the budget;
    without, pure ε, GDP μ (√ of the μ² sum, stepped up one float) or zCDP ρ as the ledger ranks
    rewards (∞ where a release has none, e.g. an rdp release), ``limit`` None.  Float sums
    (:func:`~dpledger.accounting.reward_queries.piece_keys`): the status line and ``verify``
    give the exact maximum."""
    from dpledger.accounting import reward_queries as rq
    from dpledger.accounting.ledger import RewardLedger
    if data is None:
        data = store.rows_array()
    releases = store.releases
    pt = rq.piece_totals_of_rows(data, len(releases))
    if pt is None:
        pt = rq.piece_totals(store.to_ledger(data))
    if store.budget is not None:
        unit = np.array([store.budget.unit_cost(r) for r in releases], dtype=np.float64)
        with np.errstate(over="ignore"):
            vals = rq._weighted(unit, pt.counts)
        name = f"{store.budget.currency} spend {CURRENCY_OF[store.budget.currency]}"
        return pt, vals, name, store.budget.limit
    key, currency = rq.piece_keys(RewardLedger.of_releases(releases), pt)
    if currency == "pure":
        vals = key
    elif currency == "zcdp":
        vals = key / 2.0
    else:
        with np.errstate(invalid="ignore"):
            vals = np.nextafter(np.sqrt(key), np.inf)
    return pt, vals, {"pure": "pure ε", "zcdp": "zCDP ρ"}.get(currency, "GDP μ"), None


def _n_streams(data: np.ndarray) -> int:
    """Distinct (run, arm) among the rows (a sort, not np.unique: 5x faster on 1e6 rows)."""
    if data.shape[0] == 0:
        return 0
    k = np.sort(_stream_keys(data))
    return int(1 + np.count_nonzero(k[1:] != k[:-1]))


def verify_store(path: str | os.PathLike, since: tuple[int, str] | None = None) -> list[str]:
    """Every problem found in the store at ``path`` (empty: clean).  Opens read-only: SQLite's
    quick_check, the format, every batch's size and sha256, the record chain (every link
    recomputed; the first bad batch or release named; the head and counts against the last
    batch), rows (0 ≤ start < stop, count ≥ 1, known release ids), releases that parse, the
    budget re-derived from its parameters, and every reward's spend recomputed from the rows
    within the budget.  ``since`` = (batches, head) written down earlier: the store must have
    grown from it (the recomputed link of that batch equals that head)."""
    problems: list[str] = []
    try:
        store = LedgerStore.open(path, readonly=True)
    except DpledgerError as exc:
        return [str(exc)]
    try:
        return _verify_open_store(store, problems, since)
    except (sqlite3.DatabaseError, DpledgerError) as exc:
        return problems + [f"damaged ledger store: {exc}"]
    finally:
        store.close()


def _chain_problems(store: "LedgerStore", since: tuple[int, str] | None) -> list[str]:
    """The record chain recomputed from the file (:mod:`.store_chain`): the first release and
    the first batch whose link does not match, and the head and counts against the last batch.
    A version 1 store has no chain: said once (``since`` cannot be checked)."""
    conn = store._conn
    if store.version < 2:
        return (["a version 1 store has no record chain: --since cannot be checked (opening it "
                 "for writing, e.g. `dpledger ledger record`, adds one)"] if since else [])
    out: list[str] = []
    texts = [t for _, t in conn.execute("SELECT id, json FROM releases ORDER BY id")]
    rel_links = chain.release_links(store._genesis, texts)
    prev, expect, n_rows, last_link = store._genesis, 1, 0, store._genesis.hex()
    since_link, broken = None, False
    rows = conn.execute("SELECT seq, n, sha256, n_releases, link FROM batches ORDER BY seq"
                        ).fetchall()
    for seq, n, sha, n_rel, link in rows:
        last_link = link
        if broken:
            n_rows += int(n)
            continue
        bad = None
        if seq != expect:
            bad = (f"record chain: batch {expect} is missing (the next is batch {seq}): "
                   "records were deleted or renumbered")
        elif not isinstance(n_rel, int) or not 0 <= n_rel <= len(rel_links):
            bad = (f"record chain: batch {seq} was committed with {n_rel!r} releases, the "
                   f"store holds {len(rel_links)}: releases were deleted")
        else:
            head = rel_links[n_rel - 1] if n_rel else store._genesis
            try:
                prev = chain.batch_link(prev, seq, int(n), str(sha), head, n_rel)
            except (ValueError, TypeError):
                bad = f"record chain: batch {seq} has a malformed sha256 or size"
            else:
                if prev.hex() != link:
                    bad = (f"record chain: batch {seq} (records {n_rows}–{n_rows + int(n) - 1})"
                           " does not link to what precedes it — it, a release it names, the "
                           "budget or an earlier batch was edited, inserted, reordered or "
                           "deleted (the first bad link)")
        if bad:
            out.append(bad)
            broken = True
        elif since is not None and seq == since[0]:
            since_link = prev.hex()
        expect += 1
        n_rows += int(n)
    total = len(rows)
    meta = store._meta()
    if meta.get("head") != last_link or meta.get("batches") != str(total) \
            or meta.get("records") != str(n_rows):
        out.append(f"record chain: the store's head says {meta.get('batches')} batches "
                   f"({meta.get('records')} records), the file holds {total} ({n_rows} records) "
                   "or another last link: batches were deleted or added at the end outside "
                   "dpledger, or the head was edited")
    if since is not None:
        n_since, head_since = since
        if n_since == 0:
            since_link = store._genesis.hex()
        if broken and since_link is None and n_since <= total:
            out.append("--since: not checked, the chain breaks before that batch")
        elif since_link is None:
            out.append(f"--since: the store has {total} batches, fewer than the {n_since} "
                       "written down: it did not grow from that head")
        elif since_link != head_since.lower():
            out.append(f"--since: batch {n_since}'s link is {since_link[:16]}…, not the head "
                       f"written down ({head_since[:16]}…): the store did not grow from it")
    return out


def row_problems(data: np.ndarray, n_releases: int) -> list[str]:
    """What is wrong with stored rows (run, arm, start, stop, release_id, count): the bounds
    every append checks, re-checked on every read (a file edited outside dpledger)."""
    out = []
    if data.size:
        if (data[:, 2] < 0).any() or (data[:, 3] <= data[:, 2]).any():
            out.append("a row has start < 0 or stop <= start")
        if (data[:, 5] < 1).any():
            out.append("a row has count < 1")
        if (data[:, 0] < 0).any() or (data[:, 1] < 0).any():
            out.append("a row has a negative run or arm")
        if (data[:, 1] >= _MAX_ARM).any() or (data[:, 0] >= 1 << 31).any():
            out.append("a row has an arm >= 2^20 or a run >= 2^31")
        if (data[:, 4] < 0).any() or (data[:, 4] >= n_releases).any():
            out.append("a row names a release id not in the releases table")
    return out


def _verify_open_store(store: "LedgerStore", problems: list[str],
                       since: tuple[int, str] | None = None) -> list[str]:
    """The checks of :func:`verify_store` on an open, read-only store (one snapshot)."""
    qc = store._conn.execute("PRAGMA quick_check").fetchall()
    if qc != [("ok",)]:
        problems.append(f"sqlite quick_check: {qc[:3]}")
    with store.snapshot():                  # one snapshot for every check below
        try:
            data = store.rows_array(check=True)
        except DpledgerError as exc:
            return problems + [str(exc)]
        rows_bad = row_problems(data, len(store._releases))
        problems += _chain_problems(store, since) + rows_bad
        if store.budget is not None and data.size and not rows_bad:
            spent, where = max_spend(store, data)
            if not spent <= store.budget.limit:
                problems.append(f"reward run={where[0]} arm={where[1]} index={where[2]} spent "
                                f"{spent!r} > budget {store.budget.describe()}")
    return problems


def _int_columns(ints: np.ndarray) -> list[np.ndarray]:
    names = ("run", "arm", "start", "stop", "count")
    out = []
    for j, name in enumerate(names):
        col = ints[:, j]
        for v in col:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                if isinstance(v, float) and v.is_integer():
                    continue
                raise DpledgerError(f"{name} must be an integer, got {v!r}")
        try:
            arr = np.array([int(v) for v in col], dtype=np.int64)
        except OverflowError:
            raise DpledgerError(f"{name} must be below 2^62") from None
        out.append(arr)
    return _check_columns(out)


def _check_columns(out: list[np.ndarray]) -> list[np.ndarray]:
    for name, arr in zip(("run", "arm", "start", "stop", "count"), out):
        bad = (arr < 0) | (arr >= _MAX_INT)
        if bad.any():
            raise DpledgerError(f"{name} must be in [0, 2^62), got {int(arr[bad][0])}")
    if (out[3] <= out[2]).any():
        k = int(np.flatnonzero(out[3] <= out[2])[0])
        raise DpledgerError(f"a record needs start < stop, got [{out[2][k]}, {out[3][k]})")
    if (out[4] < 1).any():
        raise DpledgerError("count must be >= 1")
    # arms below 2^20: RewardLedger keys a stream as run·2^20 + arm (to_ledger, verify's
    # spend recomputation; accounting.ledger.ARM_LIMIT); a larger arm would share a key
    if (out[0] >= 1 << 31).any():
        raise DpledgerError("run must be below 2^31")
    if (out[1] >= _MAX_ARM).any():
        raise DpledgerError(f"arm must be below 2^20, got {int(out[1][out[1] >= _MAX_ARM][0])}")
    return out


def _check_path(path) -> str:
    path = os.fspath(path)
    if not isinstance(path, str) or "\0" in path or not path.strip():
        raise DpledgerError(f"a store path must be non-empty text without NUL bytes, got {path!r}")
    return path


def _connect(path, readonly: bool) -> sqlite3.Connection:
    """An SQLite connection.  ``readonly``: changing nothing in the store — a query-only
    connection where the file and its folder are writable (so SQLite removes the -wal/-shm
    files it made when the last connection closes), else a read-only ``file:`` URI built by
    pathlib (so %, # and ? in a file name are escaped, not read as URI syntax)."""
    path = os.fspath(path)
    try:
        folder = os.path.dirname(os.path.abspath(path))
        if readonly and os.access(path, os.W_OK) and os.access(folder, os.W_OK):
            # a reader that may write makes its -wal/-shm beside the file and, closing as the
            # last connection, removes them again (a mode=ro reader cannot, and left them
            # behind: issue 25 §3); query_only keeps it a reader
            conn = sqlite3.connect(path, isolation_level=None, timeout=60.0,
                                   check_same_thread=False)
            conn.execute("PRAGMA query_only = ON")
            return conn
        if readonly:
            uri = pathlib.Path(path).absolute().as_uri() + "?mode=ro"
            return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=60.0,
                                   check_same_thread=False)
        return sqlite3.connect(path, isolation_level=None, timeout=60.0,
                               check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise DpledgerError(f"cannot open {path} as a ledger store: {exc}") from None


def _enable_wal(conn: sqlite3.Connection, path) -> None:
    """Write-ahead logging with full syncs, for a writable connection to a checked store (a
    foreign SQLite file is refused before this, so it is never switched)."""
    try:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise DpledgerError(f"{os.fspath(path)}: cannot switch to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise DpledgerError(f"cannot open {os.fspath(path)} as a ledger store: {exc}") from None