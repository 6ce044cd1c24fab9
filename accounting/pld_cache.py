"""A content-keyed on-disk cache of the PLD accountant's ε(δ) (accounting/pld.py), for
``dpledger run`` only (issue 31 §3; docs/design.md#the-beta-family-p8).

A run's certificate asks PLD for ε(δ) of the same compositions every time it is run with the
same policy, parameters, horizon and arms (DP-TS: its worst composition's Laplace releases at
four δ), and answering costs dp-accounting's import (≈ 1 s of CPU) and the discretisation.  The
answer is a pure function of the composition, δ and the code, so it is stored under the hash
of exactly those: the composition's JSON form (releases and counts, in order), δ as a hex float,
the source bytes of the accounting modules that compute it and dp-accounting's version.  A hit
returns the same double (stored as a hex float) or the same ``PldSkipped`` reason — the
number in run.json is the one the computation gives, bit for bit; a change of any of that code
changes the key.

Only ``dpledger run`` turns it on (:func:`enabled`); ``verify``, ``compose``, the audits and the
tests always compute.  The directory is ``$DPLEDGER_PLD_CACHE`` if set (``0`` or ``off``: no
cache), else ``~/.cache/dpledger/pld``; an unreadable or unwritable entry is computed, never an
error.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path

from dpledger.accounting.composition import Composition

_ON = False
# the modules whose code decides a PLD answer (pld.py's imports from the accounting package)
_SOURCES = ("pld.py", "composition.py", "releases.py", "numerics.py")


@contextlib.contextmanager
def enabled() -> Iterator[None]:
    """Use the cache inside the block (``dpledger run``'s report)."""
    global _ON
    old, _ON = _ON, True
    try:
        yield
    finally:
        _ON = old


def _directory() -> Path | None:
    env = os.environ.get("DPLEDGER_PLD_CACHE")
    if env is not None:
        return None if env.strip().lower() in ("", "0", "off") else Path(env)
    return Path.home() / ".cache" / "dpledger" / "pld"


@functools.lru_cache(maxsize=1)
def _code_key() -> str:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        h.update((here / name).read_bytes())
    try:
        h.update(metadata.version("dp-accounting").encode())
    except metadata.PackageNotFoundError:
        h.update(b"no dp-accounting")
    return h.hexdigest()


def remembered(kind: str, comp: Composition, x: float, compute: Callable[[], float],
               skipped: type[Exception]) -> float:
    """``compute()`` (a PLD number of ``comp`` at ``x``), from the cache when on and stored
    there; ``skipped`` (PldSkipped) is stored as its reason and raised again on a hit."""
    where = _directory() if _ON else None
    if where is None:
        return compute()
    key = hashlib.sha256(json.dumps([kind, comp.to_json(), float(x).hex(), _code_key()],
                                    sort_keys=True).encode()).hexdigest()
    path = where / f"{key}.json"
    try:
        entry = json.loads(path.read_text())
        if "skipped" in entry:
            raise skipped(entry["skipped"])
        return float.fromhex(entry["value"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        value = compute()
        entry = {"value": float(value).hex()}
    except skipped as exc:
        entry = {"skipped": str(exc)}
        _store(where, path, entry)
        raise
    _store(where, path, entry)
    return value


def _store(where: Path, path: Path, entry: dict) -> None:
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
        os.replace(tmp, path)
    except OSError:
        pass


__all__ = ["enabled", "remembered"]
