"""Where a ledger store lives: the backends behind :class:`~.store.LedgerStore` (issue 24 §2).

A store is named by a URL:

* ``sqlite:///abs/path.db``, ``sqlite://rel/path.db`` or a bare path — an SQLite file (the
  embedded default).  Everything after ``sqlite://`` is the file's path, taken literally (no
  percent-decoding: a name with ``%`` or ``#`` means what it says).  This is a choice: it reads
  three slashes as an absolute path, as ``file:`` URLs do, where SQLAlchemy would read four.
* ``postgresql://user:password@host:port/database?schema=NAME`` (or ``postgres://``) — a
  PostgreSQL database shared by several processes or machines.  ``schema`` (dpledger's own
  parameter, removed before connecting) names the PostgreSQL schema holding the store's tables,
  so one database can hold several stores; default ``public``.  Every other parameter goes to
  libpq as written (``host=/socket/dir``, ``sslmode=…``).

Everything about a ledger — the budget filter, the record chain, the privacy queries — lives
once, in :mod:`.store`, over the small protocol a backend gives it (:class:`Backend`): open a
connection, a write transaction holding the store's writer lock, a read snapshot, SQL with
``?`` placeholders, commit durably.  The two backends differ only in the SQL types of the
tables, in how they lock and in how they make a commit durable:

* **SQLite**: ``BEGIN IMMEDIATE`` takes the file's write lock for the whole transaction (check
  and insert); WAL journal, ``synchronous=FULL`` (the WAL is synced at every commit).
* **PostgreSQL**: the writer lock is a row lock — ``SELECT … FROM meta WHERE key = 'head' FOR
  UPDATE`` — taken first in every write transaction (READ COMMITTED) and held until it ends.
  Every append updates that row anyway (the chain's head), so appends are serial by the chain's
  nature and one row lock is the whole protocol: a second writer waits on it, and when it gets
  it, each of its later statements reads a snapshot taken after the first writer committed, so
  its budget check counts that writer's records.  Chosen over SERIALIZABLE isolation (which
  would abort one of two racing writers at commit and need a retry loop around Python code)
  and over an advisory lock (a number shared by everything in the database, not tied to the
  store's schema, and not visible in the store's own rows).
  **Durability**: the append transaction commits with ``synchronous_commit = off`` (so the lock
  is released without waiting for the disk), then, before the append is acknowledged, the same
  connection runs a one-statement transaction with ``synchronous_commit = on`` that writes a
  WAL record (``pg_logical_emit_message``, allowed to every user), whose commit flushes the WAL
  up to itself — past our commit record, which precedes it.  So an acknowledged append is on
  disk exactly as with a synchronous commit, and several writers' flushes are grouped by the
  server instead of each holding the lock through its own fsync (what makes four writers
  faster than one: ``benchmarks/bench_store_backends.py``).  What it changes: another writer
  or reader can see a record a moment before it is on disk; a server crash in that moment
  loses it, and with it every later record (the WAL is sequential), none of them
  acknowledged — the chain stays whole.  The server's own ``fsync = off`` would defeat any
  commit; :meth:`PostgresBackend.durability` reports the settings.
"""
from __future__ import annotations

import os
import sqlite3
import time
import urllib.parse
from typing import Any, Iterable, Sequence

from dpledger.errors import DpledgerError

SQLITE_MAGIC = b"SQLite format 3\x00"
_PG_SCHEMES = ("postgresql://", "postgres://")
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")
_AGG_RECORDS = 4_000_000       # string_agg of 48-byte rows stays far below PostgreSQL's 1 GB


class StoreUnreachable(DpledgerError):
    """The store's server could not be reached (not a problem of the store itself)."""


class StoreMissing(DpledgerError):
    """The server was reached and holds no ledger store at the URL (one can be created)."""


def is_postgres_url(url: Any) -> bool:
    return isinstance(url, str) and url.startswith(_PG_SCHEMES)


def sqlite_path(url: str | os.PathLike) -> str:
    """The file of an SQLite store URL or bare path (``sqlite://`` removed)."""
    text = os.fspath(url)
    if isinstance(text, str) and text.startswith("sqlite://"):
        text = text[len("sqlite://"):]
    if not isinstance(text, str) or "\0" in text or not text.strip():
        raise DpledgerError(f"a store path must be non-empty text without NUL bytes, got {url!r}")
    return text


def redact(url: str) -> str:
    """``url`` without its password (for every message that names a PostgreSQL store)."""
    if not is_postgres_url(url):
        return str(url)
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            cred, host = netloc.rsplit("@", 1)
            user, _, password = cred.partition(":")
            netloc = f"{user}:***@{host}" if password else f"{user}@{host}"
        query = urllib.parse.urlencode(
            [(k, "***" if k == "password" else v)
             for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)],
            safe="/:")
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return url.split("://", 1)[0] + "://…"     # unparseable: name the scheme only


def split_schema(url: str) -> tuple[str, str]:
    """(the libpq URL without dpledger's ``schema`` parameter, the schema name)."""
    try:
        parts = urllib.parse.urlsplit(url)
        params = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    except ValueError as exc:
        raise DpledgerError(f"{redact(url)}: not a valid PostgreSQL URL ({exc})") from None
    schemas = [v for k, v in params if k == "schema"]
    if len(schemas) > 1:
        raise DpledgerError(f"{redact(url)}: schema is given more than once")
    schema = schemas[0] if schemas else "public"
    if not schema or schema[0].isdigit() or set(schema) - _NAME_CHARS or len(schema) > 63:
        raise DpledgerError(f"{redact(url)}: schema must be a lower-case name of letters, digits "
                            f"and _ (at most 63, not starting with a digit), got {schema!r}")
    rest = urllib.parse.urlencode([(k, v) for k, v in params if k != "schema"], safe="/:")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, rest,
                                    parts.fragment)), schema


class Backend:
    """What :class:`~.store.LedgerStore` needs from a database (see the module docstring).

    SQL is written once, with ``?`` placeholders and types both databases accept; a backend
    translates placeholders and supplies its own table definitions."""

    kind = ""
    name = ""                     # the store as messages name it (no password)
    readonly = False
    db_errors: tuple[type[BaseException], ...] = ()

    def execute(self, sql: str, params: Sequence = ()):
        raise NotImplementedError

    def executemany(self, sql: str, rows: Iterable[Sequence]) -> None:
        raise NotImplementedError

    def create_tables(self, meta: list[tuple[str, str]], fill=None) -> None:
        """The store's tables and its ``meta`` rows, then ``fill()`` (more inserts), in one
        transaction; refuses (one line) when a store is already there."""
        raise NotImplementedError

    def begin_write(self, reads: Sequence[str]) -> list[list]:
        """Open a write transaction holding the store's writer lock, then run ``reads``
        (parameter-free SELECTs) and return their rows.  Writes issued in the transaction may
        be sent only at :meth:`commit` (their errors then surface there)."""
        raise NotImplementedError

    def begin_read(self) -> None:
        raise NotImplementedError

    def now(self) -> float:
        """The store's clock, in seconds since the epoch (leases, issue 30 §1): this host's for
        an SQLite file, the server's for PostgreSQL (so servers on several hosts agree)."""
        return time.time()

    def read_snapshot(self, reads: Sequence[str]) -> list[list]:
        """The rows of ``reads`` (parameter-free SELECTs), all from one snapshot."""
        self.begin_read()
        try:
            return [self.execute(sql).fetchall() for sql in reads]
        finally:
            self.commit()

    def commit(self) -> None:
        raise NotImplementedError

    def rollback(self) -> None:
        raise NotImplementedError

    @property
    def in_transaction(self) -> bool:
        raise NotImplementedError

    def concatenated_batches(self) -> tuple[int, int, bytes] | None:
        """(number of batches, of records, every batch's data concatenated in order) when the
        database can do it faster than fetching the batches one by one and every batch's size
        matches its row count; None: fetch them (and name a bad batch)."""
        return None

    def integrity_check(self) -> list[str]:
        return []

    def durability(self) -> dict:
        return {}

    def close(self) -> None:
        raise NotImplementedError


# -- SQLite ------------------------------------------------------------------------------------
class SqliteBackend(Backend):
    kind = "sqlite"
    db_errors = (sqlite3.DatabaseError,)

    def __init__(self, path: str, readonly: bool, create: bool = False):
        self.path = path
        self.name = path
        self.readonly = readonly
        self._building: str | None = None
        if create:
            if os.path.exists(path):
                raise DpledgerError(f"{path} already exists; not overwriting it")
            # built under a name of its own, then published whole (create_tables): a process
            # opening ``path`` meanwhile finds either nothing or a complete store, never the
            # empty file SQLite makes before its tables
            folder, base = os.path.split(os.path.abspath(path))
            self._building = os.path.join(
                folder, f".{base}.creating-{os.getpid()}-{os.urandom(4).hex()}")
            try:
                self.conn = _sqlite_connect(self._building, readonly)
            except DpledgerError as exc:         # name the store, not the building file
                raise DpledgerError(str(exc).replace(self._building, path)) from None
            return
        elif not os.path.exists(path):
            raise DpledgerError(f"no ledger store at {path}")
        elif not is_sqlite_file(path):
            from dpledger.inputs import refuse_special_file
            refuse_special_file(path, "a ledger store", path)     # a pipe or device, by name
            raise DpledgerError(f"{path} is not a ledger store (not an SQLite file)")
        self.conn = _sqlite_connect(path, readonly)

    def execute(self, sql, params=()):
        return self.conn.execute(sql, params)

    def executemany(self, sql, rows):
        self.conn.executemany(sql, rows)

    def create_tables(self, meta, fill=None):
        """Into the file being built, then :meth:`_publish`: the store appears at its path
        complete or not at all (several processes creating one store at once: one wins, the
        others are refused with "already exists" and can open it)."""
        self.enable_wal()
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self.conn.execute("CREATE TABLE releases(id INTEGER PRIMARY KEY, "
                              "json TEXT UNIQUE NOT NULL)")
            self.conn.execute("CREATE TABLE batches(seq INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
                              "data BLOB NOT NULL, sha256 TEXT NOT NULL, "
                              "n_releases INTEGER NOT NULL, link TEXT NOT NULL)")
            self.conn.execute(CHECKPOINTS_SQL)
            self.conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
            if fill is not None:
                fill()
        if self._building is not None:
            self._publish()

    def _publish(self) -> None:
        """Give the built file its path without ever replacing one there: a hard link
        (atomic, refused when the name exists), then the building name removed.  Closing first
        folds the WAL into the file, so the one file is the whole store."""
        building, self._building = self._building, None
        self.conn.close()
        try:
            try:
                os.link(building, self.path)
            except FileExistsError:
                raise DpledgerError(f"{self.path} already exists; not overwriting it") from None
            except OSError:
                # a file system without hard links: a no-overwrite rename is not portable, so
                # check and rename (the window is the only difference)
                if os.path.exists(self.path):
                    raise DpledgerError(f"{self.path} already exists; "
                                        "not overwriting it") from None
                os.replace(building, self.path)
        finally:
            _remove_building(building)
        self.conn = _sqlite_connect(self.path, self.readonly)
        self.enable_wal()

    def enable_wal(self) -> None:
        """Write-ahead logging with full syncs, for a writable connection to a checked store (a
        foreign SQLite file is refused before this, so it is never switched)."""
        try:
            mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise DpledgerError(f"{self.path}: cannot switch to WAL mode (got {mode})")
            self.conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise DpledgerError(f"cannot open {self.path} as a ledger store: {exc}") from None

    def begin_write(self, reads):
        self.conn.execute("BEGIN IMMEDIATE")
        return [self.conn.execute(sql).fetchall() for sql in reads]

    def begin_read(self):
        self.conn.execute("BEGIN")

    def commit(self):
        self.conn.execute("COMMIT")

    def rollback(self):
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    @property
    def in_transaction(self):
        return self.conn.in_transaction

    def integrity_check(self):
        qc = self.conn.execute("PRAGMA quick_check").fetchall()
        return [] if qc == [("ok",)] else [f"sqlite quick_check: {qc[:3]}"]

    def durability(self):
        return {"journal_mode": "wal",
                "synchronous": {0: "off", 1: "normal", 2: "full", 3: "extra"}.get(
                    self.conn.execute("PRAGMA synchronous").fetchone()[0], "?")}

    def close(self):
        self.conn.close()
        if self._building is not None:          # a creation that failed: leave nothing
            _remove_building(self._building)
            self._building = None


def _remove_building(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


CHECKPOINTS_SQL = ("CREATE TABLE checkpoints(name TEXT PRIMARY KEY, batches INTEGER NOT NULL, "
                   "data BLOB NOT NULL)")


def is_sqlite_file(path) -> bool:
    """True when ``path`` is an SQLite file; a device, pipe or socket is never one (opening a
    named pipe to read its header would block)."""
    import stat
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except (OSError, ValueError, TypeError):     # missing, a folder, a NUL in the name
        return False


def _ro_uri(path: str) -> str:
    """The read-only URI of ``path``: mode=ro, or — when this user cannot write the file and no
    -wal beside it holds records beyond it (no writer has it open) — immutable as well: SQLite
    then makes no -shm/-wal (a mode=ro reader in a writable folder left them, and in a folder
    it cannot write could not read a WAL-mode file at all: "attempt to write a readonly
    database", issue 34 §4).  The file is then read as it stands; a writer with the right to
    append that starts meanwhile is not seen by this reader."""
    import pathlib
    uri = pathlib.Path(path).absolute().as_uri() + "?mode=ro"
    wal = path + "-wal"
    if not os.access(path, os.W_OK) and not (os.path.exists(wal) and os.path.getsize(wal) > 0):
        uri += "&immutable=1"
    return uri


def _sqlite_connect(path, readonly: bool) -> sqlite3.Connection:
    """An SQLite connection.  ``readonly``: changing nothing in the store — a query-only
    connection where the file and its folder are writable (so SQLite removes the -wal/-shm
    files it made when the last connection closes), else a read-only ``file:`` URI
    (:func:`_ro_uri`, built by pathlib so that %, # and ? in a file name are escaped, not read
    as URI syntax)."""
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
            return sqlite3.connect(_ro_uri(path), uri=True, isolation_level=None, timeout=60.0,
                                   check_same_thread=False)
        if os.path.exists(path) and not os.access(path, os.W_OK):
            # refused before SQLite makes a -wal/-shm it could not remove (issue 34 §4)
            raise DpledgerError(f"{path} is read-only: nothing can be appended to it (reading "
                                "it works: dpledger ledger status, show, verify)")
        return sqlite3.connect(path, isolation_level=None, timeout=60.0,
                               check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise DpledgerError(f"cannot open {path} as a ledger store: {exc}") from None


# -- PostgreSQL ----------------------------------------------------------------------------------
def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise DpledgerError("a postgresql:// ledger store needs the psycopg driver: "
                            "pip install 'dpledger[postgres]'") from None
    return psycopg


class PostgresBackend(Backend):
    kind = "postgresql"

    def __init__(self, url: str, readonly: bool, create: bool = False,
                 connect_timeout: float = 10.0):
        psycopg = _psycopg()
        self.db_errors = (psycopg.Error,)
        self.name = redact(url)
        self.readonly = readonly
        conninfo, self.schema = split_schema(url)
        try:
            params = psycopg.conninfo.conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            raise DpledgerError(f"{self.name}: not a valid PostgreSQL URL "
                                f"({_first_line(exc)})") from None
        params.setdefault("connect_timeout", str(max(1, int(connect_timeout))))
        # the store's tables first on the search path; synchronous_commit on for the session
        # (a server default of off would otherwise make the flush below a no-op); readers
        # cannot write
        options = f"-c search_path={self.schema} -c synchronous_commit=on"
        if readonly:
            options += " -c default_transaction_read_only=on"
        params["options"] = (params.get("options", "") + " " + options).strip()
        try:
            self.conn = psycopg.connect(autocommit=True, **params)
        except psycopg.Error as exc:
            raise StoreUnreachable(f"cannot reach the ledger store {self.name}: "
                                   f"{_first_line(exc)}") from None
        self._in_tx, self._writing, self._deferred = False, False, []
        try:
            exists = self.conn.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name = 'meta'", (self.schema,)).fetchone() is not None
        except psycopg.Error as exc:
            self.conn.close()
            raise DpledgerError(f"{self.name}: {_first_line(exc)}") from None
        if create and exists:
            self.conn.close()
            raise DpledgerError(f"{self.name} already holds a ledger store (schema "
                                f"{self.schema}); not overwriting it")
        if not create and not exists:
            self.conn.close()
            raise StoreMissing(f"no ledger store at {self.name} (schema {self.schema} has no "
                                "dpledger tables; create one with `dpledger ledger init`)")

    def execute(self, sql, params=()):
        if self._in_tx and self._writing and sql.startswith(("INSERT", "UPDATE", "DELETE")):
            # sent with the COMMIT, in one pipeline (commit()): no round trip of its own while
            # the writer lock is held; nothing here reads its result
            self._deferred.append((sql.replace("?", "%s"), params or None))
            return None
        return self.conn.execute(sql.replace("?", "%s"), params or None)

    def executemany(self, sql, rows):
        with self.conn.cursor() as cur:
            cur.executemany(sql.replace("?", "%s"), list(rows))

    def create_tables(self, meta, fill=None):
        """One transaction (PostgreSQL's DDL is transactional): a store half-created by a
        crash or a concurrent ``init`` does not exist."""
        psycopg = _psycopg()
        try:
            with self.conn.transaction():
                self.conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
                self.conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                self.conn.execute("CREATE TABLE releases(id BIGINT PRIMARY KEY, "
                                  "json TEXT UNIQUE NOT NULL)")
                self.conn.execute("CREATE TABLE batches(seq BIGINT PRIMARY KEY, n BIGINT NOT NULL,"
                                  " data BYTEA NOT NULL, sha256 TEXT NOT NULL, "
                                  "n_releases BIGINT NOT NULL, link TEXT NOT NULL)")
                # packed int64 rows do not compress; stored as they are, reads copy them
                self.conn.execute("ALTER TABLE batches ALTER COLUMN data SET STORAGE EXTERNAL")
                self.conn.execute(CHECKPOINTS_SQL.replace("BLOB", "BYTEA")
                                  .replace("INTEGER", "BIGINT"))
                with self.conn.cursor() as cur:
                    cur.executemany("INSERT INTO meta VALUES (%s, %s)", meta)
                if fill is not None:
                    fill()
        except psycopg.errors.DuplicateTable:
            raise DpledgerError(f"{self.name} already holds a ledger store (schema "
                                f"{self.schema}); not overwriting it") from None

    def begin_write(self, reads):
        # one round trip: the transaction, its asynchronous commit (see commit()), the writer
        # lock — the head row, which the append will update — and the reads, each a statement
        # of the same simple query, run after the lock is granted (READ COMMITTED: each sees
        # every commit made before it)
        cur = self.conn.execute("; ".join(
            ["BEGIN", "SET LOCAL synchronous_commit = off",
             "SELECT 1 FROM meta WHERE key = 'head' FOR UPDATE", *reads]))
        self._in_tx, self._writing, self._deferred = True, True, []
        out = []
        for _ in range(3):              # BEGIN, SET, the lock: no rows wanted
            cur.nextset()
        for _ in reads:
            out.append(cur.fetchall())
            cur.nextset()
        return out

    def now(self):
        return float(self.conn.execute(
            "SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0])

    def begin_read(self):
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        self._in_tx, self._writing = True, False

    def read_snapshot(self, reads):
        # one round trip: the snapshot, the reads and its end in one simple query
        cur = self.conn.execute("; ".join(
            ["BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", *reads, "COMMIT"]))
        cur.nextset()
        out = []
        for _ in reads:
            out.append(cur.fetchall())
            cur.nextset()
        return out

    def commit(self):
        """The deferred writes, COMMIT and the flush in one simple query (one round trip; the
        parameters bound client-side by psycopg's ClientCursor): the COMMIT releases the writer
        lock, then the flush statement makes the WAL durable past it before the answer comes
        back (module docstring)."""
        if not self._writing:
            self._in_tx = False
            self.conn.execute("COMMIT")
            return
        deferred, self._deferred = self._deferred, []
        bind = _psycopg().ClientCursor(self.conn)
        text = "; ".join([bind.mogrify(sql, params) for sql, params in deferred]
                         + ["COMMIT", "SELECT pg_logical_emit_message(true, 'dpledger', '')"])
        self.conn.execute(text)
        self._in_tx = False

    def rollback(self):
        self._deferred = []
        if self._in_tx:
            self._in_tx = False
            try:
                self.conn.execute("ROLLBACK")
            except _psycopg().OperationalError:
                pass                    # the connection is gone: so is the transaction

    @property
    def in_transaction(self):
        return self._in_tx

    def concatenated_batches(self):
        """One aggregate, sent in binary: 10⁶ records in 10⁴-record batches are one 48 MB value
        instead of a hex text twice that size (``data`` is stored uncompressed, so the server
        only copies it).  Declined past 4·10⁶ records (a value must stay below 1 GB)."""
        count, total, bad = self.conn.execute(
            "SELECT count(*), COALESCE(sum(n), 0), "
            "min(CASE WHEN n < 1 OR octet_length(data) <> 48 * n THEN seq END) "
            "FROM batches").fetchone()
        if bad is not None or total > _AGG_RECORDS:
            return None
        row = self.conn.execute("SELECT string_agg(data, ''::bytea ORDER BY seq) FROM batches",
                                binary=True).fetchone()
        return int(count), int(total), (bytes(row[0]) if row[0] is not None else b"")

    def durability(self):
        return {k: self.conn.execute(f"SHOW {k}").fetchone()[0]
                for k in ("fsync", "synchronous_commit", "wal_sync_method", "full_page_writes")}

    def close(self):
        self.conn.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_backend(url, readonly: bool, create: bool = False) -> Backend:
    """The backend for a store URL or path (see the module docstring)."""
    if is_postgres_url(url):
        return PostgresBackend(url, readonly, create)
    return SqliteBackend(sqlite_path(url), readonly, create)
