"""A persistent per-reward ledger that long-running clients append to as they run: an SQLite
file, or a PostgreSQL database several processes or machines share (:mod:`.store_backends`
holds the two backends; everything here is written once over them).

Layout (the same tables on both backends):

* ``meta(key, value)``: ``format`` = ``dpledger-store``, ``version``, ``budget`` (JSON, or
  absent), ``policy`` and ``arms`` (the labels a store was made for, or absent);
* ``releases(id, json)``: the interned releases (``release_to_json``, ids 0, 1, … in order);
* ``batches(seq, n, data, sha256, n_releases, link)``: one row per append — ``n`` ledger rows
  packed as a little-endian int64 array of shape (n, 6) with columns (run, arm, start, stop,
  release_id, count) (``accounting.ledger.ROW_FIELDS``), the blob's sha256, the number of
  releases interned when it was committed, and its link in the record chain
  (:mod:`.store_chain`); ``meta`` holds the chain's ``head`` and the numbers of ``batches`` and
  ``records`` beside it, written in the same transaction.  Packing keeps reading a million rows
  a matter of ``np.frombuffer``.  Every read checks the head and counts against the batches it
  read (a deleted last record is refused at once); every append checks the head against the
  last batch; ``verify`` recomputes every link;
* ``checkpoints(name, batches, data)``: a writer's own state (a step-form policy's statistics
  and generator), written in the same transaction as its records; outside the chain (it
  carries no privacy).

Versions: 3 (labels, checkpoints); 2 (the record chain) and 1 (no chain) are read as they are
and brought to 3 when opened for writing.

One append (:meth:`LedgerStore.append` or a batch, :meth:`LedgerStore.append_many`) is one
transaction holding the store's writer lock from before the budget check to the commit (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: a row lock on the head, see :mod:`.store_backends`); it is
acknowledged (the call returns) only once the commit is on disk, so an acknowledged record
survives a kill -9 and a half-written one is rolled back.

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
TwoSum), so single records of dyadic costs (4 × ε = 0.25) keep their exact spend.  The cached
spends remember the (batches, head) they describe; under the writer lock, when other writers
have committed since, only their batches are read and added (the chain vouches that everything
before is unchanged), else everything is rebuilt (:meth:`LedgerStore._catch_up`; issue 26 §2's
rule — the state is read inside the write transaction — kept).
``verify`` recomputes every spend independently from the rows (integer counts per release,
then an exact rational sum for every piece whose float spend comes near the limit).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from dpledger.accounting import store_anchor as anchor
from dpledger.accounting import store_chain as chain
from dpledger.accounting.filters import Budget, BudgetExceeded, CURRENCY_OF
from dpledger.accounting.ledger import ARM_LIMIT as _MAX_ARM
from dpledger.accounting.releases import Release, release_from_json, release_to_json
from dpledger.accounting.store_backends import (CHECKPOINTS_SQL, Backend, SqliteBackend,
                                                StoreUnreachable, _first_line, is_postgres_url, is_sqlite_file,
                                                open_backend, sqlite_path)
from dpledger.errors import DpledgerError

# A check run inside a write transaction: (get a checkpoint's bytes, the database's clock) ->
# (checkpoint writes, result); it may raise to refuse (LedgerStore.update_checkpoints)
Guard = Callable[[Callable[[str], "bytes | None"], Callable[[], float]],
                 "tuple[dict[str, bytes | None], Any]"]

FORMAT = "dpledger-store"
# the store's ``anchor`` setting (meta): a store made with its head anchor (the genesis covers
# the setting), or one made before anchors whose anchor was added later (store_anchor)
ANCHOR_HEADS, ANCHOR_ADDED = "heads", "added"
VERSION = 3        # 3: labels (policy, arms) and checkpoints (issue 24); 2: the record chain
READ_VERSIONS = (1, 2, 3)     # (issue 25 §3); older versions are read, and migrated on a
_U = 2.0 ** -53               # writable open
_MAX_INT = (1 << 62)          # counts, indices, runs and arms fit int64 with room for sums
_POLICY_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_CHECKPOINT_BYTES = 64 << 20  # one checkpoint: a policy's state, not a data set


def is_store(url: str | os.PathLike) -> bool:
    """True when ``url`` names a ledger store rather than a run.json: a PostgreSQL URL, or an
    SQLite file (bare path or ``sqlite://``) — the dispatch used by verify/curve/show."""
    if is_postgres_url(url):
        return True
    try:
        return is_sqlite_file(sqlite_path(url))
    except (DpledgerError, TypeError):
        return False


def _check_labels(policy, arms) -> dict:
    """The labels a store is made for, checked: ``policy`` a name of letters, digits, ``._-``;
    ``arms`` an integer in [1, 2^20)."""
    out: dict = {}
    if policy is not None:
        if not isinstance(policy, str) or not policy or len(policy) > 100 \
                or set(policy) - _POLICY_CHARS:
            raise DpledgerError(f"--policy must be a policy name (letters, digits, '.', '_', "
                                f"'-'), got {policy!r}")
        out["policy"] = policy
    if arms is not None:
        if isinstance(arms, bool) or not isinstance(arms, (int, np.integer)) \
                or not 1 <= arms < _MAX_ARM:
            raise DpledgerError(f"--arms must be an integer from 1 to {_MAX_ARM - 1}, got {arms!r}")
        out["arms"] = int(arms)
    return out


def labels_text(labels: dict) -> str:
    """The labels as the chain's genesis covers them ('' for none)."""
    return json.dumps(labels, sort_keys=True) if labels else ""


def _check_checkpoint(checkpoint) -> tuple[str, bytes] | None:
    if checkpoint is None:
        return None
    if not isinstance(checkpoint, (tuple, list)) or len(checkpoint) != 2:
        raise DpledgerError("checkpoint must be (name, bytes)")
    name, data = checkpoint
    if not isinstance(name, str) or not name or len(name) > 200:
        raise DpledgerError(f"a checkpoint name must be non-empty text, got {name!r}")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DpledgerError(f"a checkpoint is bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > _CHECKPOINT_BYTES:
        raise DpledgerError(f"a checkpoint of {len(data)} bytes is larger than the "
                            f"{_CHECKPOINT_BYTES >> 20} MiB a store keeps for one")
    return name, data


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
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
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
    """A ledger store opened for reading and appending.  Use :meth:`create` or :meth:`open`
    with a URL or path (:mod:`.store_backends`: SQLite or PostgreSQL — everything below is the
    same on both)."""

    def __init__(self, backend: Backend, budget: Budget | None, readonly: bool):
        self._db = backend
        self.path = backend.name          # the store as messages name it (no password)
        self.budget = budget
        self.readonly = readonly
        self.policy: str | None = None
        self.arms: int | None = None
        self._release_ids: dict[str, int] = {}
        self._releases: list[Release] = []
        self._unit_costs: list[float] = []
        self._spend: dict[tuple[int, int], _Stream] | None = None
        self._spend_at: tuple[int, str] | None = None    # (batches, head) the spends describe
        self._others_wrote = False      # the last catch-up added other writers' batches
        self._snapshot_depth = 0
        self.version = VERSION
        self._genesis = chain.genesis(None)
        self._release_links: list[bytes] = []
        # the head anchor (store_anchor): its file, and a note for status (e.g. "started on
        # this host at batch N")
        self.anchor_path: str | None = None
        self.anchor_note: str | None = None
        self._anchor_pending = False    # a read inside a snapshot left the check to its end

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._db.kind

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def create(cls, url: str | os.PathLike, budget: Budget | str | None = None,
               policy: str | None = None, arms: int | None = None) -> "LedgerStore":
        """A new, empty store at ``url`` (refuses to overwrite an existing one).  ``policy``
        and ``arms``: what the store is for, checked by :meth:`open` for callers that pass
        them (a step-form policy refuses a store made for another policy or K)."""
        if isinstance(budget, str):
            budget = Budget.parse(budget)
        labels = _check_labels(policy, arms)
        db = open_backend(url, readonly=False, create=True)
        budget_json = json.dumps(budget.to_json(), allow_nan=False) if budget else None
        # the genesis covers the anchor setting: a store whose anchor and setting were both
        # removed no longer verifies
        g = chain.genesis(budget_json, labels_text({**labels, "anchor": ANCHOR_HEADS}))
        try:
            db.create_tables([("format", FORMAT), ("version", str(VERSION)), ("head", g.hex()),
                              ("batches", "0"), ("records", "0")]
                             + ([("budget", budget_json)] if budget else [])
                             + [(k, str(v)) for k, v in labels.items()]
                             + [("anchor", ANCHOR_HEADS)])
        except db.db_errors as exc:
            db.close()
            raise DpledgerError(f"{db.name}: cannot create a ledger store ({exc})") from None
        except BaseException:
            db.close()
            raise
        store = cls(db, budget, readonly=False)
        store._genesis = g
        store.policy, store.arms = labels.get("policy"), labels.get("arms")
        store.anchor_path = _anchor_path(db)
        try:
            anchor.replace(store.anchor_path, 0, 0, g.hex())
        except OSError as exc:
            store.close()
            raise DpledgerError(f"{db.name}: created, but its head anchor "
                                f"{store.anchor_path} cannot be written ({exc})") from None
        return store

    @classmethod
    def open(cls, url: str | os.PathLike, readonly: bool = False, policy: str | None = None,
             arms: int | None = None) -> "LedgerStore":
        """An existing store.  ``policy``/``arms`` given: the store must not have been made for
        another policy or number of arms (a store made without them accepts any)."""
        want = _check_labels(policy, arms)
        db = open_backend(url, readonly=readonly)
        name = db.name
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        except db.db_errors as exc:
            db.close()
            if isinstance(db, SqliteBackend):
                folder = os.path.dirname(os.path.abspath(db.path))
                if readonly and "unable to open" in str(exc) and not os.access(folder, os.W_OK):
                    raise DpledgerError(f"{name}: cannot read a ledger store in a read-only "
                                        f"folder ({folder}): SQLite needs to create its -shm "
                                        "file beside it; copy the store to a writable "
                                        "folder") from None
            raise DpledgerError(f"{name} is not a ledger store ({exc})") from None
        if meta.get("format") != FORMAT:
            db.close()
            raise DpledgerError(f"{name} is not a dpledger ledger store")
        if meta.get("version") not in {str(v) for v in READ_VERSIONS}:
            db.close()
            raise DpledgerError(f"{name}: store version {meta.get('version')!r}, this "
                                f"dpledger reads versions {', '.join(map(str, READ_VERSIONS))}")
        try:
            budget = Budget.from_json(json.loads(meta["budget"])) if "budget" in meta else None
            have = _check_labels(meta.get("policy"),
                                 int(meta["arms"]) if "arms" in meta else None)
            for key, value in want.items():
                if key in have and have[key] != value:
                    raise DpledgerError(
                        f"this store was created for {key} {have[key]!r}, not {value!r} "
                        f"(a store holds one policy's ledger: create another store)")
            if not readonly and isinstance(db, SqliteBackend):
                db.enable_wal()
            store = cls(db, budget, readonly)
            store.version = int(meta["version"])
            store.policy, store.arms = have.get("policy"), have.get("arms")
            genesis_labels = dict(have)
            if meta.get("anchor") == ANCHOR_HEADS:
                genesis_labels["anchor"] = ANCHOR_HEADS
            store._genesis = chain.genesis(meta.get("budget"), labels_text(genesis_labels))
            store._load_releases()
            if store.version < VERSION and not readonly:
                store._migrate()
                meta = store._meta()
            store._open_anchor(meta, readonly)
        except DpledgerError as exc:
            db.close()
            if name in str(exc):
                raise
            raise DpledgerError(f"{name}: {exc}") from None
        except (*db.db_errors, ValueError, TypeError, KeyError) as exc:
            db.close()
            raise DpledgerError(f"{name}: damaged ledger store ({exc})") from None
        return store

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def snapshot(self):
        """One read transaction: every query inside sees the same state, while writers in
        other processes go on appending (SQLite WAL; PostgreSQL REPEATABLE READ).  Nested
        snapshots, and a snapshot inside a write transaction, use the outer one."""
        if self._snapshot_depth or self._db.in_transaction:
            self._snapshot_depth += 1
            try:
                yield self
            finally:
                self._snapshot_depth -= 1
            return
        self._db.begin_read()
        self._snapshot_depth = 1
        try:
            yield self
        finally:
            self._snapshot_depth = 0
            if self._db.in_transaction:
                self._db.commit()
        if self._anchor_pending:
            self._check_anchor_now()

    def __enter__(self) -> "LedgerStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- releases --------------------------------------------------------------------------
    def _load_releases(self, rows: list | None = None) -> None:
        """Parse the releases added since the last call (``rows``: those rows, already read)."""
        if rows is None:
            rows = self._db.execute(
                "SELECT id, json FROM releases WHERE id >= ? ORDER BY id",
                (len(self._releases),)).fetchall()
        for rid, text in rows:
            if rid < len(self._releases):
                continue
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
            self._db.execute("INSERT INTO releases(id, json) VALUES (?, ?)", (rid, key))
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

    def append_many(self, records: Iterable[tuple],
                    checkpoint: tuple[str, bytes] | None = None, guard: Guard | None = None
                    ) -> int:
        """A batch of ``(run, arm, start, stop, release, count)`` in one transaction: all
        stored, or (budget refusal, bad input, crash) none.  Returns the number of records
        appended, once committed (durable).  ``checkpoint`` = (name, bytes): the caller's state
        after these releases, stored under ``name`` in the same transaction (a policy server
        that restarts reads it back with :meth:`checkpoint` and never re-draws the noise of a
        release it recorded); with no records, only the checkpoint is written.  ``guard``:
        checked inside the transaction, as :meth:`update_checkpoints`'s ``update`` (it may
        refuse, and its writes go with the records) — a step-form server's lease, so that a
        server that lost its run to another writes nothing."""
        if self.readonly:
            raise DpledgerError("store opened read-only")
        recs = list(records)
        if any(not isinstance(r, (tuple, list)) or len(r) != 6 for r in recs):
            raise DpledgerError("records are (run, arm, start, stop, release, count) tuples")
        checkpoint = _check_checkpoint(checkpoint)
        if not recs:
            if checkpoint is not None:
                self.save_checkpoint(*checkpoint, guard=guard)
            elif guard is not None:
                self.update_checkpoints(guard)
            return 0
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
        return self._append(cols, distinct, which, checkpoint, guard)

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
        for name, a in zip(("run", "arm", "start", "stop", "count", "which"), arrays, strict=True):
            if a.dtype.kind not in "iu":
                raise DpledgerError(f"{name} must be an integer array, got dtype {a.dtype}")
        cols = _check_columns([a.astype(np.int64) for a in arrays[:5]])
        which = arrays[5].astype(np.int64)
        releases = list(releases)
        if which.size and (which.min() < 0 or which.max() >= len(releases)):
            raise DpledgerError("which must index the releases given")
        return self._append(cols, releases, which)

    def _append(self, cols: list[np.ndarray], distinct: list[Release], which: np.ndarray,
                checkpoint: tuple[str, bytes] | None = None, guard: Guard | None = None
                ) -> int:
        if cols[0].size == 0:
            return 0
        db = self._db
        if self.budget is not None and self._spend is not None and self._others_wrote \
                and self._db.kind != "sqlite":
            self._prefetch_spends()
        try:
            # under the writer lock: the head read here is the store's state until our
            # commit, so the budget check below sees every record any writer committed
            meta, recent = self._begin_append()
            guarded = guard(self._checkpoint_data, db.now)[0] if guard is not None else {}
            ids = np.array([self._intern(rel) for rel in distinct], dtype=np.int64)[which]
            data = np.stack([cols[0], cols[1], cols[2], cols[3], ids, cols[4]], axis=1)
            new_spend = self._check_budget(data, meta, recent) if self.budget is not None \
                else None
            blob = data.astype("<i8", copy=False).tobytes()
            seq, link = self._link_batch(meta, data.shape[0], blob)
            if checkpoint is not None:
                self._write_checkpoint(checkpoint[0], seq, checkpoint[1])
            for name, blob_ in guarded.items():
                self._put_checkpoint(name, seq, blob_)
            self._before_commit()
            db.commit()
            self._after_commit()
        except BaseException as exc:
            db.rollback()
            # releases interned in the rolled-back transaction are gone from the store too
            self._releases, self._release_ids, self._unit_costs = [], {}, []
            self._release_links = []
            if isinstance(exc, db.db_errors):
                raise DpledgerError(f"{self.path}: the append failed, nothing was stored "
                                    f"({_first_line(exc)})") from None
            self._load_releases()
            raise
        if new_spend is not None:
            self._spend.update(new_spend)
            self._spend_at = (seq, link)
        self._anchor_commit(seq, int(meta["records"]) + int(data.shape[0]), link)
        return int(data.shape[0])

    def _meta(self) -> dict:
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def _prefetch_spends(self) -> None:
        """Before taking the writer lock: bring the cached spends up to the store's current
        state (one read snapshot of the meta and the batches since), so that under the lock
        only what was committed in between is left to add — with several writers, most of the
        catching up leaves the serial section.  (On SQLite the catch-up is a local read and
        this buys nothing.)"""
        got = self._db.read_snapshot([
            "SELECT key, value FROM meta",
            f"SELECT id, json FROM releases WHERE id >= {len(self._releases):d} ORDER BY id",
            f"SELECT seq, n, data, link FROM batches WHERE seq >= "
            f"{max(int(self._spend_at[0]), 1):d} ORDER BY seq"])
        self._load_releases(got[1])
        self._catch_up(*self._head_fields(dict(got[0]))[:2], got[2])

    def _begin_append(self) -> tuple[dict, list | None]:
        """Open the write transaction and read, under the writer lock and in one request to
        the database (one round trip on PostgreSQL, while the lock is held: what bounds the
        rate of several writers), what an append needs: the meta rows, the last batch (checked
        against the head), the releases added by other writers, and — when the cached spends
        describe an earlier state — the batches since (for :meth:`_catch_up`).  Returns (meta,
        those batches or None)."""
        since = None
        if self.budget is not None and self._spend is not None and self._spend_at is not None:
            since = max(int(self._spend_at[0]), 1)
        reads = ["SELECT key, value FROM meta",
                 "SELECT seq, link FROM batches ORDER BY seq DESC LIMIT 1",
                 f"SELECT id, json FROM releases WHERE id >= {len(self._releases):d} ORDER BY id"]
        if since is not None:
            reads.append(f"SELECT seq, n, data, link FROM batches WHERE seq >= {since:d} "
                         "ORDER BY seq")
        got = self._db.begin_write(reads)
        meta = dict(got[0])
        self._check_last_batch(meta, got[1][0] if got[1] else None)
        self._check_anchor(meta)
        self._load_releases(got[2])
        return meta, (got[3] if since is not None else None)

    def _link_batch(self, meta: dict, n: int, blob: bytes) -> tuple[int, str]:
        """Inside the write transaction: insert the batch with its link after the stored head,
        and move the head and counts (issue 25 §3); returns (its number, its link)."""
        seq = int(meta["batches"]) + 1
        sha = hashlib.sha256(blob).hexdigest()
        n_rel = len(self._releases)
        link = chain.batch_link(bytes.fromhex(meta["head"]), seq, n, sha,
                                self._release_links[-1] if n_rel else self._genesis, n_rel).hex()
        self._db.execute("INSERT INTO batches(seq, n, data, sha256, n_releases, link) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (seq, n, blob, sha, n_rel, link))
        self._db.execute("UPDATE meta SET value = CASE key WHEN 'head' THEN ? WHEN 'batches' "
                         "THEN ? ELSE ? END WHERE key IN ('head', 'batches', 'records')",
                         (link, str(seq), str(int(meta["records"]) + n)))
        return seq, link

    def _head_fields(self, meta: dict) -> tuple[str, int, int]:
        try:
            return meta["head"], int(meta["batches"]), int(meta["records"])
        except (KeyError, ValueError):
            raise DpledgerError(f"{self.path}: damaged ledger store: the chain head or counts "
                                "are missing (dpledger verify lists every problem)") from None

    def _last_batch(self) -> tuple[int, str] | None:
        return self._db.execute("SELECT seq, link FROM batches ORDER BY seq DESC LIMIT 1"
                                ).fetchone()

    def _check_last_batch(self, meta: dict, last=False) -> None:
        """The stored head names the last batch (two index lookups, so every append can
        afford it): a store whose last records were deleted refuses further appends.
        ``last``: the last batch's (seq, link) already read (None: no batch)."""
        if self.version < 2:
            return
        head, n_batches, n_records = self._head_fields(meta)
        if last is False:
            last = self._last_batch()
        if (tuple(last) if last else (0, self._genesis.hex())) != (n_batches, head):
            self._head_mismatch(head, n_batches, n_records)

    def _check_head(self, meta: dict, count: int, total: int) -> None:
        """The stored head and counts agree with the last batch and with the batches read
        (``count`` batches, ``total`` records); raises :class:`DpledgerError` naming the
        disagreement.  Version 1 stores have no chain and pass."""
        if self.version < 2:
            return
        head, n_batches, n_records = self._head_fields(meta)
        last = self._last_batch()
        if (count, total) != (n_batches, n_records) or (
                (last[1] if last else self._genesis.hex()) != head) or (
                last is not None and last[0] != n_batches):
            self._head_mismatch(head, n_batches, n_records, (count, total))

    def _head_mismatch(self, head, n_batches, n_records, held=None):
        held = (f"the store holds {held[0]} ({held[1]} records)" if held else
                "its last batch is another")
        raise DpledgerError(
            f"{self.path}: the record chain does not match: the store says {n_batches} "
            f"batches ({n_records} records) ending at head {head[:16]}…, {held} — records "
            "were deleted, inserted or edited outside dpledger (dpledger verify names the "
            "first bad one)")

    def _migrate(self) -> None:
        """Bring an older store to :data:`VERSION`, in one transaction: version 1 (no chain)
        gets its chain; version 2 gets the checkpoints table."""
        db = self._db
        db.begin_write([])
        try:
            meta = self._meta()
            if meta.get("version") == "1":
                self._add_chain_v1()
                meta["version"] = "2"
            if meta.get("version") == "2":
                db.execute(CHECKPOINTS_SQL)
                db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(VERSION),))
            db.commit()
        except BaseException:
            db.rollback()
            raise
        self.version = VERSION

    def _add_chain_v1(self) -> None:
        """Inside the migration's transaction: the links of a version 1 store's batches in
        order, the head and counts."""
        db = self._db
        db.execute("ALTER TABLE batches ADD COLUMN n_releases INTEGER NOT NULL DEFAULT 0")
        db.execute("ALTER TABLE batches ADD COLUMN link TEXT NOT NULL DEFAULT ''")
        rows = db.execute("SELECT seq, n, sha256, data FROM batches ORDER BY seq").fetchall()
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
        db.executemany("UPDATE batches SET n_releases = ?, link = ? WHERE seq = ?", updates)
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                       [("head", prev.hex()), ("batches", str(len(rows))),
                        ("records", str(total))])

    def head(self) -> dict:
        """``{"batches", "records", "head"}``: what an auditor writes down to check later that
        the store only grew (:func:`verify_store` with ``since``)."""
        with self.snapshot():
            meta = self._meta()
            self._check_last_batch(meta)
        self._check_anchor_now()
        return {"batches": int(meta.get("batches", 0)), "records": int(meta.get("records", 0)),
                "head": meta.get("head")}

    # -- the head anchor (issue 30 §2) ---------------------------------------------------------
    def _open_anchor(self, meta: dict, readonly: bool) -> None:
        """Find the anchor; start one where the store may have none yet: a store made before
        anchors (its setting ``added``, not covered by its genesis), an empty store, or a
        PostgreSQL store this host has not written to (trust on first use)."""
        if self.version < 2:
            return
        path = _anchor_path(self._db)
        setting = meta.get("anchor")
        exists = os.path.exists(path)
        if setting is None and not readonly:
            head, n_batches, n_records = self._head_fields(meta)
            anchor.start(path, n_batches, n_records, head)
            self._db.begin_write([])
            try:
                self._db.execute("INSERT INTO meta VALUES ('anchor', ?)", (ANCHOR_ADDED,))
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise
            setting = ANCHOR_ADDED
            self.anchor_note = (f"head anchor started at batch {n_batches} (a store made "
                                "before anchors)")
        elif setting is not None and not exists and not readonly and (
                self.backend != "sqlite" or meta.get("batches") == "0"):
            head, n_batches, n_records = self._head_fields(meta)
            anchor.start(path, n_batches, n_records, head)
            exists = True
            if self.backend != "sqlite":
                self.anchor_note = (f"this host's head anchor started at batch {n_batches} "
                                    "(its first writing opening of this store)")
        if setting is None:
            self.anchor_note = "no head anchor (a store made before anchors, opened read-only)"
            return
        if self.backend != "sqlite" and not os.path.exists(path):
            self.anchor_note = ("no head anchor on this host (no writer here); only the chain "
                                "and --head can be checked")
            return
        self.anchor_path = path

    def _anchor_problem(self, meta: dict, got=False) -> str | None:
        """Whether the store continues its anchor's newest head (one line), under the writer
        lock or in a snapshot begun after the anchor was read (``got``: the anchor's newest
        head, already read): the anchored batch must be there with that link."""
        if self.anchor_path is None:
            return None
        try:
            if got is False or got is None:
                got = anchor.newest(self.anchor_path)
        except FileNotFoundError:
            return (f"{self.path}: its head anchor {self.anchor_path} is missing: the store's "
                    "truncation or rollback could not be told (restore the anchor, or check the"
                    " store with `dpledger verify --head DIGEST`: docs/ledger-store.md"
                    "#what-is-detected)")
        except (OSError, DpledgerError) as exc:
            return f"{self.path}: its head anchor cannot be read ({_first_line(exc)})"
        if got is None:
            return f"{self.path}: its head anchor {self.anchor_path} is empty"
        head, n_batches, _ = self._head_fields(meta)
        if got.batches == n_batches:
            link = head
        elif got.batches == 0:
            link = self._genesis.hex()
        elif got.batches < n_batches:
            row = self._db.execute("SELECT link FROM batches WHERE seq = ?",
                                   (got.batches,)).fetchone()
            link = None if row is None else str(row[0])
        else:
            link = None
        return anchor.mismatch(self.path, self.anchor_path, got, n_batches, link)

    def _check_anchor_now(self) -> None:
        """The anchor check for a reader: the anchor read first, then the store in a snapshot
        begun after it (an anchor line is written after its commit, so that snapshot holds
        every batch the anchor names; a reader's older snapshot may not)."""
        if self.anchor_path is None:
            return
        if self._snapshot_depth or self._db.in_transaction:
            self._anchor_pending = True     # inside a caller's snapshot: checked as it ends
            return
        self._anchor_pending = False
        try:
            got = anchor.newest(self.anchor_path)
        except (OSError, DpledgerError):
            got = None              # _anchor_problem says what
        with self.snapshot():
            self._check_anchor(self._meta(), got)

    def _check_anchor(self, meta: dict, got: "anchor.Anchored | None | bool" = False) -> None:
        problem = self._anchor_problem(meta, got)
        if problem:
            raise DpledgerError(problem)

    def _anchor_commit(self, seq: int, records: int, link: str) -> None:
        """After a commit: its head onto the anchor (the store is durable already: a failure
        here is said, and the next append still accepts the store one batch ahead)."""
        if self.anchor_path is None:
            return
        try:
            anchor.append(self.anchor_path, seq, records, link)
        except OSError as exc:
            raise DpledgerError(f"{self.path}: batch {seq} is stored, but its head anchor "
                                f"{self.anchor_path} could not be written ({exc})") from None

    # -- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, name: str, data: bytes, guard: Guard | None = None) -> None:
        """Store ``data`` under ``name`` (one transaction, under the writer lock), beside the
        number of batches committed so far.  Checkpoints are a writer's own state, outside the
        record chain: they carry no privacy (the records do).  ``guard``: as in
        :meth:`append_many`."""
        name, data = _check_checkpoint((name, data))

        def update(get, now):
            writes = dict(guard(get, now)[0]) if guard is not None else {}
            writes[name] = data
            return writes, None
        self.update_checkpoints(update)

    def update_checkpoints(self, update: Guard) -> Any:
        """A read-modify-write of checkpoints in one write transaction, under the writer lock
        (SQLite ``BEGIN IMMEDIATE``, PostgreSQL the head row's lock), so that two processes
        doing it at once are ordered: the second reads what the first wrote (issue 30 §1).
        ``update(get, now)`` reads checkpoints with ``get(name)`` (the bytes or None) and the
        database's clock with ``now()`` (seconds since the epoch; PostgreSQL's own, so several
        hosts agree), and returns (writes, result): ``writes`` maps names to new bytes (None
        deletes); the result is returned once committed.  An exception from ``update``
        (a refusal) rolls everything back."""
        if self.readonly:
            raise DpledgerError("store opened read-only")
        self._require_checkpoints()
        db = self._db
        try:
            meta, _ = self._begin_append()
            writes, result = update(self._checkpoint_data, db.now)
            batches = int(meta["batches"])
            for name, data in writes.items():
                self._put_checkpoint(name, batches, data)
            db.commit()
        except BaseException as exc:
            db.rollback()
            if isinstance(exc, db.db_errors):
                raise DpledgerError(f"{self.path}: the checkpoint failed, nothing was stored "
                                    f"({_first_line(exc)})") from None
            raise
        return result

    def _checkpoint_data(self, name: str) -> bytes | None:
        got = self.checkpoint(name)
        return None if got is None else got[1]

    def _put_checkpoint(self, name: str, batches: int, data: bytes | None) -> None:
        if data is None:
            self._db.execute("DELETE FROM checkpoints WHERE name = ?", (str(name),))
        else:
            name, data = _check_checkpoint((name, data))
            self._write_checkpoint(name, batches, data)

    def checkpoint(self, name: str) -> tuple[int, bytes] | None:
        """(the number of batches committed when it was written, the bytes) of the checkpoint
        ``name``, or None."""
        if self.version < 3:
            return None
        row = self._db.execute("SELECT batches, data FROM checkpoints WHERE name = ?",
                               (str(name),)).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def _write_checkpoint(self, name: str, batches: int, data: bytes) -> None:
        self._require_checkpoints()
        self._db.execute("DELETE FROM checkpoints WHERE name = ?", (name,))
        self._db.execute("INSERT INTO checkpoints(name, batches, data) VALUES (?, ?, ?)",
                         (name, batches, data))

    def _require_checkpoints(self) -> None:
        if self.version < 3:
            raise DpledgerError(f"{self.path}: a version {self.version} store has no "
                                "checkpoints (open it for writing to migrate it)")

    def _before_commit(self) -> None:
        """Called inside the write transaction, after the budget check and the insert, just
        before COMMIT: nothing here; tests override it to hold the writer lock."""

    def _after_commit(self) -> None:
        """Called between an append's COMMIT and the update of the cached spends: nothing here;
        tests override it to force another writer into that window."""

    def _check_budget(self, data: np.ndarray, meta: dict, recent: list | None = None) -> dict:
        """Inside the write transaction: the new spends of the streams ``data`` touches, or
        :class:`BudgetExceeded` naming the first reward (by run, arm, index) that overflows.
        ``meta``: the store's meta row read under the writer lock; the cached spends are
        brought up to its head first (:meth:`_catch_up`, with ``recent``: the batches from the
        cache's batch number on, if already read)."""
        self._catch_up(*self._head_fields(meta)[:2], recent)
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

    def _catch_up(self, head: str, n_batches: int, recent: list | None = None) -> None:
        """Inside the write transaction: make the cached spends describe the store at
        (``n_batches``, ``head``).  The cache remembers the (batches, head) it describes; if
        the store grew from there (the batch at that number still has that link — the chain
        vouches for everything before it), only the batches added since are read and added
        (each addition an upper bound, as every spend); otherwise everything is rebuilt.  So a
        writer among several reads what the others wrote, not the whole store, per append.
        Kept even if this append is refused: it describes committed records."""
        if self._spend is not None and self._spend_at == (n_batches, head):
            self._others_wrote = False
            return
        if self._spend is not None and self._spend_at is not None \
                and self._spend_at[0] < n_batches:
            b, h = self._spend_at
            rows = recent if recent is not None else self._db.execute(
                "SELECT seq, n, data, link FROM batches WHERE seq >= ? ORDER BY seq",
                (max(b, 1),)).fetchall()
            rows = [(r[0], r[1], bytes(r[2]), r[3]) for r in rows]
            if b == 0:
                ok = h == self._genesis.hex()
            else:
                ok = bool(rows) and (rows[0][0], rows[0][3]) == (b, h)
                rows = rows[1:]
            ok = ok and [r[0] for r in rows] == list(range(b + 1, n_batches + 1)) \
                and rows[-1][3] == head and all(
                    isinstance(r[1], int) and r[1] >= 1 and len(r[2]) == 48 * r[1] for r in rows)
            self._others_wrote = ok
            if ok:
                self._load_releases()
                data = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype="<i8"
                                     ).reshape(-1, 6).astype(np.int64)
                bad = row_problems(data, len(self._releases))
                if bad:
                    raise DpledgerError(f"{self.path}: damaged ledger store: {bad[0]} "
                                        "(dpledger verify lists every problem)")
                total = self._record_costs(data)
                for sk, sel in _by_stream(data):
                    self._spend[sk] = _add_ranges(self._spend.get(sk, _Stream()), data[sel, 2],
                                                  data[sel, 3], total[sel])[0]
                self._spend_at = (n_batches, head)
                return
        self._spend = self._rebuild_spend()
        self._spend_at = (n_batches, head)

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
        return int(self._db.execute("SELECT COALESCE(SUM(n), 0) FROM batches").fetchone()[0])

    def rows_array(self, check: bool = False) -> np.ndarray:
        """Every stored row as an (N, 6) int64 array in append order (one read snapshot, so a
        consistent state while writers append), after checking the head and counts against
        the batches read.  ``check``: verify each batch's sha256 too (and leave the head to
        the caller: verify reports every problem itself); each batch's size and type are
        always checked (raises :class:`DpledgerError` naming the batch)."""
        with self.snapshot():
            meta = None if check else self._meta()
            fast = None if check else self._db.concatenated_batches()
            if fast is not None:
                count, total, blob = fast
            else:
                count, total, parts = 0, 0, []
                for seq, n, blob, sha in self._db.execute(
                        "SELECT seq, n, data, sha256 FROM batches ORDER BY seq"):
                    if isinstance(blob, memoryview):
                        blob = bytes(blob)
                    if not isinstance(blob, bytes) or not isinstance(n, int) or n < 1 \
                            or len(blob) != 48 * n:
                        size = len(blob) if isinstance(blob, (bytes, str)) else \
                            type(blob).__name__
                        raise DpledgerError(f"batch {seq}: {n!r} rows declared, {size} bytes")
                    if check and hashlib.sha256(blob).hexdigest() != sha:
                        raise DpledgerError(f"batch {seq}: sha256 mismatch")
                    parts.append(blob)
                    count, total = count + 1, total + n
                blob = b"".join(parts)
            if not check:
                self._check_head(meta, count, total)
                self._load_releases()          # release ids written by another writer
        if not check:
            self._check_anchor_now()
        if not blob:
            return np.zeros((0, 6), dtype=np.int64)
        data = np.frombuffer(blob, dtype="<i8").reshape(-1, 6).astype(np.int64, copy=False)
        if not check:                      # verify reports every problem itself
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


def verify_store(path: str | os.PathLike, since: tuple[int, str] | None = None,
                 head: str | None = None) -> list[str]:
    """Every problem found in the store at ``path`` (a URL or path; empty: clean).  Opens
    read-only: SQLite's quick_check (an SQLite store), the format, every batch's size and sha256, the record chain (every link
    recomputed; the first bad batch or release named; the head and counts against the last
    batch), rows (0 ≤ start < stop, count ≥ 1, known release ids), releases that parse, the
    budget re-derived from its parameters, and every reward's spend recomputed from the rows
    within the budget.  ``since`` = (batches, head) written down earlier: the store must have
    grown from it (the recomputed link of that batch equals that head).  ``head``: a digest
    written down earlier (``dpledger ledger head``), without its batch number: some batch's
    recomputed link must equal it.  The head anchor (:mod:`.store_anchor`): every head it
    records must be the recomputed link of its batch (a store truncated or rolled back below
    an anchored head, or rewritten, is named); a store made with an anchor that has lost it
    is named too."""
    problems: list[str] = []
    try:
        store = LedgerStore.open(path, readonly=True)
    except StoreUnreachable:
        raise                              # nothing was checked: not a finding about the store
    except DpledgerError as exc:
        return [str(exc)]
    try:
        return _verify_open_store(store, problems, since, head)
    except (*store._db.db_errors, DpledgerError) as exc:
        return problems + [f"damaged ledger store: {_first_line(exc)}"]
    finally:
        store.close()


def _anchored_heads(store: "LedgerStore") -> tuple[dict[int, str], list[str]]:
    """Every head the store's anchor records (batch → link), and what is wrong with the anchor
    itself (missing where the store was made with one and holds batches)."""
    path = store.anchor_path
    if path is None:
        return {}, []
    try:
        lines = anchor.read_all(path)
    except FileNotFoundError:
        if store.backend == "sqlite" and store._meta().get("batches", "0") != "0":
            return {}, [f"head anchor: {path} is missing — this store was made with one, so "
                        "its truncation or rollback cannot be told (docs/ledger-store.md"
                        "#what-is-detected)"]
        return {}, []
    except (OSError, DpledgerError) as exc:
        return {}, [f"head anchor: {_first_line(exc)}"]
    out: dict[int, str] = {}
    problems: list[str] = []
    for a in lines:
        if out.setdefault(a.batches, a.head) != a.head:
            problems.append(f"head anchor: {path} records two heads for batch {a.batches}: "
                            "the store was replaced by another")
    return out, problems


def _chain_problems(store: "LedgerStore", since: tuple[int, str] | None,
                    head_digest: str | None = None) -> list[str]:
    """The record chain recomputed from the file (:mod:`.store_chain`): the first release and
    the first batch whose link does not match, and the head and counts against the last batch.
    A version 1 store has no chain: said once (``since`` cannot be checked)."""
    conn = store._db
    if store.version < 2:
        return (["a version 1 store has no record chain: --since cannot be checked (opening it "
                 "for writing, e.g. `dpledger ledger record`, adds one)"] if since else [])
    out: list[str] = []
    anchored, anchor_bad = _anchored_heads(store)
    head_digest = None if head_digest is None else head_digest.lower()
    digest_at = 0 if head_digest == store._genesis.hex() else None
    late: list[str] = []          # the anchor's findings, after the chain's own
    if anchored.pop(0, store._genesis.hex()) != store._genesis.hex():
        late.append(f"head anchor: {store.anchor_path} records another store's genesis: the "
                   "store was replaced by another (docs/ledger-store.md#what-is-detected)")
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
        else:
            if since is not None and seq == since[0]:
                since_link = prev.hex()
            if head_digest is not None and digest_at is None and prev.hex() == head_digest:
                digest_at = seq
            want = anchored.get(seq)
            if want is not None and want != prev.hex():
                late.append(f"head anchor: batch {seq}'s recomputed link is not the head its "
                           f"anchor ({store.anchor_path}) records: the store was rewritten or "
                           "rolled back to another copy (docs/ledger-store.md#what-is-detected)")
                anchored = {}
            elif want is not None:
                anchored.pop(seq)
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
    if anchored and not broken:
        top = max(anchored)
        if top > 0:
            late.append(f"head anchor: {store.anchor_path} records batch {top}, the store holds "
                       f"{total}: batches were deleted at the end, or the store was restored "
                       "from an older copy (docs/ledger-store.md#what-is-detected)")
    out += anchor_bad + late
    if head_digest is not None and not broken and digest_at is None:
        out.append(f"--head: no batch of the store links to {head_digest[:16]}…: the store did "
                   "not grow from that head (truncated, rolled back or rewritten)")
    elif head_digest is not None and broken and digest_at is None:
        out.append("--head: not checked past the chain's first bad link")
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
                       since: tuple[int, str] | None = None, head: str | None = None
                       ) -> list[str]:
    """The checks of :func:`verify_store` on an open, read-only store (one snapshot)."""
    problems += store._db.integrity_check()
    with store.snapshot():                  # one snapshot for every check below
        try:
            data = store.rows_array(check=True)
        except DpledgerError as exc:
            return problems + [str(exc)]
        rows_bad = row_problems(data, len(store._releases))
        problems += _chain_problems(store, since, head) + rows_bad
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
    for name, arr in zip(("run", "arm", "start", "stop", "count"), out, strict=True):
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


def copy_store(src: str | os.PathLike, dst: str | os.PathLike) -> dict:
    """Copy the store at ``src`` to a new store at ``dst`` (any backend to any backend: SQLite
    into PostgreSQL and back), row for row: the same releases (ids and JSON text), batches (
    number, size, data bytes, checksum, link), head and counts, budget and labels, and
    checkpoints; the copy is written at this dpledger's version.  The source is verified first
    (a store that fails ``verify`` is not copied) and the copy after; the copy appears whole or
    not at all (one transaction; an SQLite copy is written beside ``dst`` and linked into place,
    never over an existing file).  Returns the copy's ``head()``."""
    problems = verify_store(src)
    if problems:
        raise DpledgerError(f"{_name(src)} does not verify, not copied: {problems[0]}")
    with LedgerStore.open(src, readonly=True) as s, s.snapshot():
        if s.version < 2:
            raise DpledgerError(f"{s.path}: a version 1 store has no record chain; open it for "
                                "writing once (e.g. `dpledger ledger record`) before copying")
        meta = s._meta()
        releases = [(int(i), str(t)) for i, t in
                    s._db.execute("SELECT id, json FROM releases ORDER BY id")]
        batches = [(int(q), int(n), bytes(d), str(h), int(r), str(k)) for q, n, d, h, r, k in
                   s._db.execute("SELECT seq, n, data, sha256, n_releases, link FROM batches "
                                 "ORDER BY seq")]
        points = [] if s.version < 3 else [
            (str(a), int(b), bytes(c)) for a, b, c in
            s._db.execute("SELECT name, batches, data FROM checkpoints ORDER BY name")]
    keys = ("format", "head", "batches", "records", "budget", "policy", "arms", "anchor")
    rows = [(k, meta[k]) for k in keys if k in meta] + [("version", str(VERSION))]
    if "anchor" not in meta:
        rows.append(("anchor", ANCHOR_ADDED))       # not covered by the copied genesis
    final = None if is_postgres_url(dst) else sqlite_path(dst)
    if final is not None:
        if os.path.exists(final):
            raise DpledgerError(f"{final} already exists; not overwriting it")
        target = f"{final}.copy-{os.getpid()}.tmp"
    else:
        target = dst
    db = open_backend(target, readonly=False, create=True)

    def fill() -> None:
        db.executemany("INSERT INTO releases(id, json) VALUES (?, ?)", releases)
        db.executemany("INSERT INTO batches(seq, n, data, sha256, n_releases, link) "
                       "VALUES (?, ?, ?, ?, ?, ?)", batches)
        db.executemany("INSERT INTO checkpoints(name, batches, data) VALUES (?, ?, ?)", points)

    done = False
    try:
        db.create_tables(rows, fill)
        done = True
    except db.db_errors as exc:
        raise DpledgerError(f"{db.name}: the copy failed, nothing was written "
                            f"({_first_line(exc)})") from None
    finally:
        db.close()
        if final is not None:
            try:
                if done:
                    os.link(target, final)  # fails, leaving ``final`` alone, if it appeared
            except FileExistsError:
                raise DpledgerError(f"{final} already exists; not overwriting it") from None
            finally:
                for leftover in (target, target + "-wal", target + "-shm"):
                    if os.path.exists(leftover):
                        os.unlink(leftover)
    anchor.replace(anchor.path_for("sqlite", final, final) if final else _anchor_path(db),
                   int(meta.get("batches", 0)),
                   int(meta.get("records", 0)), str(meta.get("head")))
    problems = verify_store(dst)
    if problems:
        raise DpledgerError(f"{_name(dst)}: the copy does not verify: {problems[0]}")
    with LedgerStore.open(dst, readonly=True) as d:
        return d.head()


def _anchor_path(db: Backend) -> str:
    return anchor.path_for(db.kind, db.name, db.path if db.kind == "sqlite" else None)


def _name(url) -> str:
    from dpledger.accounting.store_backends import redact
    return redact(os.fspath(url))
