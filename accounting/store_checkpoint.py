"""Step-form policy state kept in a ledger store beside its records (issue 24 §1).

A policy served online (:mod:`dpledger.policies.step`) keeps, in the store's checkpoints
(:meth:`~dpledger.accounting.store.LedgerStore.save_checkpoint`; outside the record chain and
the budget, which do not read them; ``verify`` ignores them), on either backend:

* ``online/identity``: the policy the store serves — name, arms, parameters, sampler, reward
  range, horizon (JSON), written by the first step-form policy that opens the store and compared
  by every later one (a store made for another policy or K is refused);
* ``online/run-R/generation``: how many times run R was opened by a step-form policy, as JSON
  ``{"generation": g, "entropy": …}``; each opening takes the next generation *in the same
  write transaction as it reads the previous one* (:meth:`~dpledger.accounting.store.
  LedgerStore.update_checkpoints`, under the writer lock), so two processes opening run R at
  once are ordered and never take the same one (issue 30 §1).  Generation 0 draws from the
  run's seed alone (so it equals ``dpledger run``); every generation g ≥ 1 mixes 128 fresh bits
  of the operating system's entropy into the seed (``"entropy": "seed+os"``): a restarted
  server, and a store restored from a backup that hands out a generation again, never repeat
  noise an earlier process drew;
* ``online/run-R/lease``: the one live server of run R (JSON: a random token, pid, host, the
  time it expires on the store's clock).  An opening refuses, in one line, a run whose lease
  is held and unexpired — unless its holder is a process of this host that no longer exists
  (a crashed server), or the caller takes it over on purpose.  The holder renews it (every
  third of its length, at ``select``), every write of the holder checks in its transaction
  that the lease is still its own (a server that lost its run to another writes nothing), and
  ``close`` gives it back.  One server per run: replicas of one run would hold copies of one
  tree state and draw correlated noise on different records (docs/online.md);
The checkpoint holds private data (un-noised sums, the generator state): the store must be
protected as the rewards themselves are.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass

from dpledger.errors import DpledgerError

IDENTITY = "online/identity"


def _state(run: int) -> str:
    return f"online/run-{int(run)}"


def _generation(run: int) -> str:
    return f"online/run-{int(run)}/generation"


def _writable(store) -> None:
    if store.readonly:
        raise DpledgerError(f"{store.path}: opened read-only; a step-form policy writes to it")


LEASE_SECONDS = 60.0


def _lease(run: int) -> str:
    return f"online/run-{int(run)}/lease"


class LeaseHeld(DpledgerError):
    """Another live server holds the run's lease."""


class LeaseLost(DpledgerError):
    """This server's lease was taken over (it had expired): it may write nothing more."""


@dataclass(frozen=True)
class Lease:
    """The lease a server took on ``run`` (``token``: its secret; ``seconds``: its length)."""
    run: int
    token: str
    seconds: float


def generation_of(blob: bytes | None) -> int | None:
    """The generation a ``online/run-R/generation`` checkpoint holds (JSON, or the plain
    integer of stores written before issue 30)."""
    if blob is None:
        return None
    text = blob.decode()
    return int(json.loads(text)["generation"]) if text.startswith("{") else int(text)


def _holder_alive(held: dict) -> bool:
    """False only when the holder was a process of this host that no longer exists."""
    if held.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(held.get("pid", -1)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _lease_json(token: str, expires: float) -> bytes:
    return json.dumps({"token": token, "pid": os.getpid(), "host": socket.gethostname(),
                       "expires": expires}, sort_keys=True).encode()


def bind(store, identity: dict, run: int, lease_seconds: float = LEASE_SECONDS,
         take_over: bool = False) -> tuple[int, Lease]:
    """In one write transaction: check (or, on a store no step-form policy has used, write) the
    served policy's ``identity``, take run ``run``'s lease and its next generation.  Returns
    (the generation, 0 at the first opening; the lease).  Refuses (:class:`LeaseHeld`, one
    line) when another live server holds the lease; ``take_over``: the caller knows the holder
    is gone (a process crashed on another host, or an in-process restart)."""
    _writable(store)
    text = json.dumps(identity, sort_keys=True, allow_nan=False)
    token = secrets.token_hex(16)

    def update(get, now):
        writes: dict[str, bytes | None] = {}
        got = get(IDENTITY)
        if got is None:
            writes[IDENTITY] = text.encode()
        elif got.decode() != text:
            raise DpledgerError(f"{store.path} serves {describe(json.loads(got.decode()))}, "
                                f"not {describe(identity)}; use another store")
        t = now()
        held = get(_lease(run))
        if held is not None and not take_over:
            h = json.loads(held.decode())
            if float(h.get("expires", 0)) > t and _holder_alive(h):
                if h.get("host") == socket.gethostname() and h.get("pid") == os.getpid():
                    raise LeaseHeld(
                        f"{store.path}: run {run} is served by another policy of this process "
                        f"(lease until {_when(float(h['expires']))}); close it first, or pass "
                        "take_over=True if it is abandoned (docs/online.md#one-server-per-run)")
                raise LeaseHeld(
                    f"{store.path}: run {run} is served by another live process (pid "
                    f"{h.get('pid')} on {h.get('host')}, lease until "
                    f"{_when(float(h['expires']))}); one server per run — serve another "
                    "run, stop that server, or wait for its lease to expire "
                    "(docs/online.md#one-server-per-run)")
        prev = generation_of(get(_generation(run)))
        gen = 0 if prev is None else prev + 1
        writes[_generation(run)] = json.dumps(
            {"generation": gen, "entropy": "seed" if gen == 0 else "seed+os"}).encode()
        writes[_lease(run)] = _lease_json(token, t + lease_seconds)
        return writes, gen
    gen = store.update_checkpoints(update)
    return gen, Lease(int(run), token, float(lease_seconds))


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _check_held(store, lease: Lease, get) -> None:
    held = get(_lease(lease.run))
    if held is None or json.loads(held.decode()).get("token") != lease.token:
        who = "nobody" if held is None else (
            f"pid {json.loads(held.decode()).get('pid')} on "
            f"{json.loads(held.decode()).get('host')}")
        raise LeaseLost(f"{store.path}: this server's lease on run {lease.run} has passed to "
                        f"{who} (it expired); nothing was written — this server must stop")


def guard(store, lease: Lease):
    """The check every write of the lease's holder runs in its transaction: the lease is still
    its own (no renewal: writes stay one read dearer, not one clock read)."""
    def check(get, now):
        _check_held(store, lease, get)
        return {}, None
    return check


def renew(store, lease: Lease) -> float:
    """Extend the lease by its length from now (refused when it was lost); returns the new
    expiry on the store's clock."""
    def update(get, now):
        _check_held(store, lease, get)
        until = now() + lease.seconds
        return {_lease(lease.run): _lease_json(lease.token, until)}, until
    return store.update_checkpoints(update)


def release(store, lease: Lease) -> None:
    """Give the lease back (nothing when it was lost meanwhile)."""
    def update(get, now):
        held = get(_lease(lease.run))
        mine = held is not None and json.loads(held.decode()).get("token") == lease.token
        return ({_lease(lease.run): None} if mine else {}), None
    store.update_checkpoints(update)


def served_runs(store) -> list[dict]:
    """Every run a step-form policy opened: run, generation, entropy, and the lease (holder
    pid and host, expiry; ``None`` when free) — for ``dpledger ledger status``."""
    if store.version < 3:
        return []
    rows = store._db.execute("SELECT name, data FROM checkpoints WHERE name LIKE "
                             "'online/run-%/generation' ORDER BY name").fetchall()
    out = []
    for name, blob in rows:
        run = int(name.split("/")[1][4:])
        gen_text = bytes(blob).decode()
        info = json.loads(gen_text) if gen_text.startswith("{") else {
            "generation": int(gen_text), "entropy": "seed"}
        held = store.checkpoint(_lease(run))
        lease = None
        if held is not None:
            h = json.loads(held[1].decode())
            lease = {"pid": h.get("pid"), "host": h.get("host"),
                     "expires": _when(float(h.get("expires", 0))), "alive": _holder_alive(h)}
        out.append({"run": run, "generation": int(info["generation"]),
                    "entropy": info.get("entropy", "seed"), "lease": lease})
    return sorted(out, key=lambda r: r["run"])


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


def save(store, run: int, data: bytes, lease: Lease | None = None) -> None:
    """A checkpoint without records (one transaction; refused when ``lease`` was lost)."""
    _writable(store)
    store.save_checkpoint(*writer(run, data),
                          guard=None if lease is None else guard(store, lease))


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
