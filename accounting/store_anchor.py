"""The head anchor: the store's chain head kept outside the store (issue 30 §2).

The record chain (:mod:`.store_chain`) finds any edit, insertion, reordering or deletion *inside*
the chain, but a store whose last batches are deleted and whose head row is set back to an
earlier link is again a valid chain — shorter.  Nothing inside the file can tell that it was
longer (an attacker who can write the file can write everything in it), so the head is also
written where the store's own writes do not reach:

* **SQLite**: an append-only text file beside the store, ``STORE.heads`` (``STORE`` the
  store's path): one line ``batches records head`` per committed batch, appended right after
  the commit (the store is never behind its anchor; a crash between the two leaves the store
  one batch ahead, which is accepted).
* **PostgreSQL**: the same file on each writing host, ``$DPLEDGER_ANCHOR_DIR/<sha256 of the
  store's URL without its password>.heads`` (default ``~/.local/state/dpledger/anchors``): the
  database holds everything else, and a host that wrote a batch keeps its own record of it.
  A host that opens the store for writing for the first time starts its anchor at the head it
  finds (trust on first use; ``status`` says so).

Checked (:func:`check`): by every append (under the writer lock: the newest anchored batch must
be in the store with that link), by ``status`` (the same) and by ``verify`` (every anchored
batch's link against the recomputed chain).  The anchor is a claim that the store *had* these
heads; a store holding fewer batches than its anchor names, or another link at an anchored
batch, was truncated or rolled back to an older copy.  What it cannot catch is said in
docs/ledger-store.md#what-is-detected: a store and its anchor restored together, or an anchor
deleted with the store's anchor setting (that breaks the chain's genesis, which covers the
setting, so ``verify`` names it).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from dpledger.errors import DpledgerError

SUFFIX = ".heads"
_TAIL = 1024          # the newest lines (about a dozen): concurrent writers append in commit
#                       order, give or take the few that commit at the same moment


@dataclass(frozen=True)
class Anchored:
    """One anchored head: after batch ``batches`` (``records`` rows) the chain's head was
    ``head``."""
    batches: int
    records: int
    head: str


def anchor_dir() -> str:
    return os.environ.get("DPLEDGER_ANCHOR_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                          "state"), "dpledger", "anchors")


def path_for(kind: str, name: str, sqlite_file: str | None = None) -> str:
    """Where a store's anchor lives: beside an SQLite file; in :func:`anchor_dir` for
    PostgreSQL (``name``: the URL as messages give it, without a password)."""
    if kind == "sqlite":
        return os.path.abspath(sqlite_file) + SUFFIX
    return os.path.join(anchor_dir(), hashlib.sha256(name.encode()).hexdigest() + SUFFIX)


_HEX = frozenset("0123456789abcdef")


def _parse(line: str, path: str, number: int) -> Anchored:
    try:
        b, r, h = line.split()
        if len(h) != 64 or not _HEX.issuperset(h):
            raise ValueError
        return Anchored(int(b), int(r), h)
    except ValueError:
        raise DpledgerError(f"{path}: line {number} of the head anchor is not 'batches records "
                            "head'") from None


def read_all(path: str) -> list[Anchored]:
    """Every complete line (a last line cut short by a crash is ignored)."""
    with open(path, "rb") as fh:
        text = fh.read().decode("ascii", "replace")
    lines = text.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]                   # not finished when the writer stopped
    return [_parse(ln, path, i + 1) for i, ln in enumerate(lines) if ln]


def newest(path: str) -> Anchored | None:
    """The anchored head with the most batches among the newest lines (concurrent writers may
    append two lines out of commit order), or None for an empty anchor."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - _TAIL))
        tail = fh.read().decode("ascii", "replace")
    lines = tail.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]
    if size > _TAIL:
        lines = lines[1:]                    # the first may be cut by the seek
    best, top = None, -1
    for ln in lines:                         # only the newest line is parsed whole
        first = ln.split(" ", 1)[0]
        if first.isdigit() and int(first) > top:
            best, top = ln, int(first)
        elif ln and not first.isdigit():
            _parse(ln, path, 0)              # raises: a line that is not an anchor line
    return None if best is None else _parse(best, path, 0)


def append(path: str, batches: int, records: int, head: str) -> None:
    """One line, appended whole (O_APPEND) after the commit it names."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{int(batches)} {int(records)} {head}\n".encode())
    finally:
        os.close(fd)


def start(path: str, batches: int, records: int, head: str) -> None:
    """A new anchor holding one head (made beside a new store, or on a host's first writing
    opening of a PostgreSQL store); refuses to replace an existing one."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, f"{int(batches)} {int(records)} {head}\n".encode())
    finally:
        os.close(fd)


def replace(path: str, batches: int, records: int, head: str) -> None:
    """A new anchor for a store just created at its path, replacing one a deleted store left
    there (written aside and renamed into place, so a reader never sees half of it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}-{os.urandom(4).hex()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(f"{int(batches)} {int(records)} {head}\n")
    os.replace(tmp, path)


def mismatch(store_name: str, path: str, anchored: Anchored, have_batches: int,
             link_at: str | None) -> str | None:
    """The problem, in one line, when the store (``have_batches`` batches; ``link_at`` its link
    at the anchored batch, None when it has none) is not a continuation of ``anchored``."""
    if anchored.batches > have_batches:
        return (f"{store_name}: the store holds {have_batches} batches, but its head anchor "
                f"({path}) records batch {anchored.batches} ({anchored.records} records): "
                "batches were deleted at the end, or the store was restored from an older "
                "copy (docs/ledger-store.md#what-is-detected)")
    if link_at is None or link_at.lower() != anchored.head:
        return (f"{store_name}: batch {anchored.batches}'s link is not the head its anchor "
                f"({path}) records ({anchored.head[:16]}…): the store was rewritten or replaced "
                "by another (docs/ledger-store.md#what-is-detected)")
    return None
