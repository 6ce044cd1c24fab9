"""Step-form policy state kept in a ledger store beside its records (issue 24 §1).

A policy served online (:mod:`dpledger.policies.step`) keeps, in the store's checkpoints
(:meth:`~dpledger.accounting.store.LedgerStore.save_checkpoint`; outside the record chain and
the budget, which do not read them; ``verify`` ignores them), on either backend:

* ``online/identity``: the policy the store serves — name, arms, parameters, sampler, reward
  range, horizon (JSON), written by the first step-form policy that opens the store and compared
  by every later one (a store made for another policy or K is refused);
* ``online/run-R/generation``: how many times run R was opened by a step-form policy; each
  opening takes the next generation, so a restarted server never draws from a random stream an
  earlier process used (a run is served by one process at a time);
* ``online/run-R``: the policy's state (private statistics, counters, generator state,
  outstanding tickets, releases recorded but not yet drawn), written in the transaction of the
  record it goes with (:meth:`~dpledger.accounting.store.LedgerStore.append_many`'s
  ``checkpoint``), or alone (:func:`save`), prefixed by its sha256.

The checkpoint holds private data (un-noised sums, the generator state): the store must be
protected as the rewards themselves are.
"""
from __future__ import annotations

import hashlib
import json

from dpledger.errors import DpledgerError

IDENTITY = "online/identity"


def _state(run: int) -> str:
    return f"online/run-{int(run)}"


def _generation(run: int) -> str:
    return f"online/run-{int(run)}/generation"


def _writable(store) -> None:
    if store.readonly:
        raise DpledgerError(f"{store.path}: opened read-only; a step-form policy writes to it")


def bind(store, identity: dict, run: int) -> int:
    """Check (or, on a store no step-form policy has used, write) the served policy's
    ``identity``, and take run ``run``'s next generation; returns it (0 at the first
    opening)."""
    _writable(store)
    text = json.dumps(identity, sort_keys=True, allow_nan=False)
    got = store.checkpoint(IDENTITY)
    if got is None:
        store.save_checkpoint(IDENTITY, text.encode())
    elif got[1].decode() != text:
        raise DpledgerError(f"{store.path} serves {describe(json.loads(got[1].decode()))}, not "
                            f"{describe(identity)}; use another store")
    prev = store.checkpoint(_generation(run))
    gen = 0 if prev is None else int(prev[1].decode()) + 1
    store.save_checkpoint(_generation(run), str(gen).encode())
    return gen


def describe(identity: dict) -> str:
    """The identity in the user's terms (one line)."""
    params = ", ".join(f"{k}={v!r}" for k, v in sorted(identity.get("params", {}).items()))
    lo, hi = identity.get("range", (0, 1))
    horizon = identity.get("horizon")
    return (f"{identity.get('policy')}({params}) with {identity.get('arms')} arms, sampler "
            f"{identity.get('sampler')}, range [{lo}, {hi}], horizon "
            f"{'none' if horizon is None else horizon}")


def writer(run: int, data: bytes) -> tuple[str, bytes]:
    """The ``checkpoint`` argument that stores ``data`` of ``run`` beside an append's records
    (its sha256 in front, checked when it is read back)."""
    return _state(run), hashlib.sha256(data).digest() + bytes(data)


def save(store, run: int, data: bytes) -> None:
    """A checkpoint without records (one transaction)."""
    _writable(store)
    store.save_checkpoint(*writer(run, data))


def latest(store, run: int) -> bytes | None:
    """Run ``run``'s newest checkpoint (its sha256 checked), or None."""
    got = store.checkpoint(_state(run))
    if got is None:
        return None
    blob = got[1]
    data = blob[32:]
    if len(blob) < 32 or hashlib.sha256(data).digest() != blob[:32]:
        raise DpledgerError(f"{store.path}: the checkpoint of run {run} is damaged (sha256 "
                            "mismatch); the policy cannot resume from it")
    return bytes(data)
