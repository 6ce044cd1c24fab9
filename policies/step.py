"""Step form of the registered policies: choose an arm now, learn from its reward later, every
release recorded in a ledger store before its noise is drawn (issue 24 §1).

``p = dpledger.policies.online("lazy-dp-ts", n_arms=5, epsilon=0.5, store="live.db", seed=0)``;
then ``ticket = p.select()`` names the round and the arm to play, and ``p.observe(ticket,
reward)`` takes the reward when it arrives — late and out of order are fine, one ticket per
select.

**One source.**  Each policy's rule is written once, as compiled state updates in its own module
(``select`` a round's arm from the released statistics, ``push`` an arm's next reward and say
which release is due, ``commit`` the noisy value), called in a loop by the simulator's kernel and
one step at a time here through a :class:`~dpledger.policies.step_rules.StepRule`.  For a reward
table, stepping through the table with the seed of run 0 takes the same actions, draws the same
noise from the same generator and records the same releases as ``dpledger run --env table``
(tests/test_step_equality.py, every policy with a step form, both samplers).

**Observations.**  Observation n of arm a is the n-th reward of a that reached :meth:`observe`
(arrival order, as the contextual simulator's delivered records); a release covers a range of
them.  Rewards arrive in any order; a release is due when the rule's statistic has all its
rewards.  Until every arm has a first release, a round after the K initial pulls plays, round
robin, an arm still waiting for one (our choice for late rewards; with rewards observed before
the next select, as in the simulator, it never happens).

**Arrival order is the relation.**  The certificate is about neighbouring streams with the same
arrival order: it holds when delays do not depend on the rewards (or are public).  A delay that
depends on a reward's value shifts the records delivered in between, and a tree then changes
about one node per shifted record (docs/concepts.md#privacy-unit; tests/test_arrival_order.py).
:attr:`OnlinePolicy.privacy_unit` says so.

**Record before draw.**  A due release is appended to the store — the budget check and the
append one transaction — and only then is its noise drawn.  A release the budget refuses is not
made (:class:`~dpledger.accounting.filters.BudgetExceeded`, one line): its arm is *frozen* — the
rule keeps scoring it on the statistics it has released and no later reward of it is read
(they are counted, so indices stay the arrival numbers).  This is the rule for every policy.
An arm refused its very first release has no statistic to score: from then on the rounds go,
round robin, to the arms that have one (our choice; it happens only when a store's budget is
spent before the policy starts).

**Restart.**  Every append carries a checkpoint (the policy's state after the reward that made
the release due, the generator state just before the noise, the outstanding tickets, the
releases recorded but not yet drawn), in the same transaction.  Opening the store again resumes
from the newest checkpoint: the recorded releases are finished with the noise the saved
generator state gives — the very values drawn before the crash if they were drawn (the same
release, not a new one) — and the generator then moves to a stream no earlier process used
(a new generation, taken durably at each opening).  Rewards observed after the checkpoint and
tickets issued after it are lost (utility, never privacy); a lost ticket is refused with one
line.  :meth:`OnlinePolicy.checkpoint` writes one on demand (e.g. at shutdown).
"""
from __future__ import annotations

import functools
import json
import math
import os
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import types
from numba.experimental import jitclass

from dpledger._jit import njit
from dpledger.accounting import store_checkpoint as ckpt
from dpledger.accounting.filters import BudgetExceeded
from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.store import LedgerStore
from dpledger.accounting.store_backends import (StoreMissing, StoreUnreachable,
                                                is_postgres_url, sqlite_path)
from dpledger.errors import DpledgerError
from dpledger.mechanisms.noise import LATTICE_BITS, laplace_draw
from dpledger.policies.environments import TABLE, Environment, to_lattice


@jitclass([("rng", types.NumPyRandomGeneratorType("rng"))])
class RngBox:
    """The run's Generator held on the compiled side: numba unboxes a Generator argument in
    ≈ 7 µs (three ctypes casts a call), a jitclass holding it in ≈ 0.5 µs.  Draws move the
    Python Generator's state (the same bit generator)."""

    def __init__(self, rng):
        self.rng = rng


@njit(cache=True)
def laplace_step(box, env, scale, sensitivity):
    """One Laplace draw (float, or lattice for an exact-sampler ``env``) — the kernels' draw
    (:func:`~dpledger.mechanisms.noise.laplace_draw`)."""
    return laplace_draw(box.rng, env, scale, sensitivity)


@dataclass(frozen=True)
class Ticket:
    """What :meth:`OnlinePolicy.select` hands out: play ``arm`` for round ``round`` (1-based) of
    run ``run``; give it back to :meth:`OnlinePolicy.observe` with the reward.  ``generation``
    names the server process that issued it (a restart starts a new one)."""

    run: int
    round: int
    arm: int
    generation: int


def run_seed_sequence(seed: int | None, run: int, generation: int) -> np.random.SeedSequence:
    """Generation 0 of run ``run``: the simulator's run generator (``SeedSequence(seed,
    spawn_key=(run,))``), so a first opening steps exactly as ``dpledger run``; generation
    g ≥ 1: the seed *and 128 fresh bits of the operating system's entropy*, ``spawn_key=(run,
    g)`` (issue 30 §1): reproducing a restart buys nothing, and a generation handed out again
    (a store restored from a backup) must never repeat an earlier process's noise.  ``seed``
    None: the operating system's entropy alone."""
    if seed is None:
        return np.random.SeedSequence(secrets.randbits(128))
    if generation == 0:
        return np.random.SeedSequence(entropy=int(seed), spawn_key=(int(run),))
    return np.random.SeedSequence(entropy=(int(seed), secrets.randbits(128)),
                                  spawn_key=(int(run), int(generation)))


class _MemorySink:
    """Records kept in memory (``store=None``): tests, benchmarks, simulation by steps."""

    def __init__(self):
        self.ledger = RewardLedger()

    def record(self, rows, checkpoint) -> None:
        for run, arm, start, stop, release, count in rows:
            self.ledger.add(run, arm, start, stop, release, count)


class _StoreSink:
    def __init__(self, store: LedgerStore, run: int):
        self.store, self.run = store, run
        self.lease: ckpt.Lease | None = None      # set once the run is bound

    def record(self, rows, checkpoint) -> None:
        self.store.append_many(rows, checkpoint=(
            None if checkpoint is None else ckpt.writer(self.run, checkpoint())),
            guard=None if self.lease is None else ckpt.guard(self.store, self.lease))


def _locked(method):
    """Run ``method`` holding the policy's lock: one select, observe or checkpoint at a time, so
    threads of one server may share a policy (its state and its generator are not safe to
    interleave)."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return call


class OnlinePolicy:
    """A policy in step form (see the module docstring).  Make one with :func:`online`.

    Thread-safe: :meth:`select`, :meth:`observe`, :meth:`checkpoint`, :meth:`renew_lease` and
    :meth:`close` hold one lock each, so a threaded server may share one policy (calls are
    serialised, which their shared state and generator need anyway)."""

    def __init__(self, policy, rule, K: int, horizon: int | None, sink, seed, sampler: str,
                 lo: float, hi: float, run: int, store: LedgerStore | None, identity: dict):
        self.policy, self.rule, self.K, self.horizon = policy, rule, K, horizon
        self.sampler, self.lo, self.hi, self.run = sampler, lo, hi, run
        self.store, self.identity, self._sink, self.seed = store, identity, sink, seed
        self.bits = LATTICE_BITS if sampler == "exact" else 0
        self.env = Environment(TABLE, np.zeros((K, 2)), np.zeros((0, 0)), lo, hi,
                               self.bits).as_tuple()
        self.t = 0                                   # rounds selected
        self.pulls = np.zeros(K, np.int64)
        self.arrived = np.zeros(K, np.int64)         # rewards observed per arm
        self.frozen = np.zeros(K, np.bool_)
        self.live = np.ones(K, np.bool_)             # ~frozen, as the compiled rules read it
        self.refusals = 0                            # releases the budget refused
        self.outstanding: dict[int, tuple[int, int]] = {}     # round → (arm, generation)
        self.contexts: dict[int, np.ndarray] = {}    # round → the played arm's context
        self.generation = 0
        self.n_recorded = 0                          # releases recorded by this process
        self._releases: dict[int, Any] = {}
        self._lock = threading.RLock()
        self.lease: ckpt.Lease | None = None         # the run's lease, with a store
        self._renew_at = math.inf                    # time.monotonic() to renew it at
        self._set_rng(run_seed_sequence(seed, run, 0))
        rule.bind(self)
        rule.start(self.box)

    # -- the generator -------------------------------------------------------------------
    def _set_rng(self, seq: np.random.SeedSequence) -> None:
        self.rng = np.random.Generator(np.random.PCG64(seq))
        self.box = RngBox(self.rng)

    # -- releases --------------------------------------------------------------------------
    def release(self, rid: int):
        """Release id ``rid`` of the rule as recorded (the lattice form with the exact
        sampler, as the simulator records it)."""
        rel = self._releases.get(rid)
        if rel is None:
            rel = self._releases[rid] = self.rule.recorded_release(rid, self.bits)
        return rel

    def _freeze(self, arm: int) -> None:
        self.frozen[arm] = True
        self.live[arm] = False

    # -- select ----------------------------------------------------------------------------
    privacy_unit = {
        "relation": "streams differing in one reward (record) of the stream as it reached "
                    "observe(), in its arrival order: the certificate holds when delays do not "
                    "depend on the rewards (docs/concepts.md#privacy-unit)"}

    @_locked
    def select(self, context=None) -> Ticket:
        """The next round's ticket: its round number and the arm to play.  A contextual
        policy takes the round's ``context``: one vector of its dimension d (one context per
        round), or K of them, one per arm (``shared=True``)."""
        if not self.rule.contextual and context is not None:
            raise DpledgerError(f"policy {self.policy.name!r} is K-armed: select() takes no "
                                "context")
        ctx = self.rule.check_context(context) if self.rule.contextual else None
        if time.monotonic() >= self._renew_at:
            self.renew_lease()
        if self.horizon is not None and self.t >= self.horizon:
            raise DpledgerError(f"the horizon {self.horizon} is reached: no round "
                                f"{self.t + 1} can be selected")
        t = self.t + 1
        if ctx is not None:
            self.rule.ctx = ctx
        a = self._choose(t)
        self.t = t
        self.pulls[a] += 1
        self.outstanding[t] = (a, self.generation)
        if ctx is not None:
            self.contexts[t] = np.array(ctx[a] if len(ctx) > 1 else ctx[0])
        return Ticket(self.run, t, a, self.generation)

    def _choose(self, t: int) -> int:
        rule, K = self.rule, self.K
        if rule.initial_pulls:
            if t <= K:
                return t - 1
            unready = [j for j in range(K) if not rule.ready(j)]
            if unready:
                waiting = [j for j in unready if not self.frozen[j]]
                if not waiting:            # a first release refused: no statistic to score
                    waiting = [j for j in range(K) if rule.ready(j)] or list(range(K))
                # a first release still missing (late rewards): play such arms first
                return min(waiting, key=lambda j: (self.pulls[j], j))
        if rule.select_releases:
            self._record_select(t)
        return int(rule.select(self.box, t))

    def _record_select(self, t: int) -> None:
        """The releases round t's selection draws (a posterior read of every arm, a fresh
        sample of a model), recorded before the draw with a checkpoint that finishes this
        selection on restart.  A refused one freezes its arm — it draws nothing and is scored
        on what it released before — and the others are recorded without it."""
        due = self.rule.select_due(t)
        while due:
            rows = [(self.run, arm, start, stop, self.release(rid), 1)
                    for arm, rid, start, stop in due]
            try:
                self._sink.record(rows, lambda: self._pack(select=t))
            except BudgetExceeded as exc:
                if self.frozen[exc.arm] or exc.arm not in {row[0] for row in due}:
                    raise
                self._freeze(exc.arm)
                self.refusals += 1
                due = self.rule.select_due(t)
                continue
            self.n_recorded += len(rows)
            return

    # -- observe ---------------------------------------------------------------------------
    @_locked
    def observe(self, ticket, reward) -> None:
        """The reward of ``ticket`` (a :class:`Ticket`, or an arm: its oldest outstanding
        ticket).  Due releases are recorded, then drawn."""
        t, a = self._take(ticket, reward)
        x = self._rescale(reward)
        del self.outstanding[t]
        ctx = self.contexts.pop(t, None)
        self.arrived[a] += 1
        if self.frozen[self.rule.stream_of(a)]:
            return
        due = self.rule.push(a, x) if ctx is None else self.rule.push_record(a, ctx, x)
        if due:
            self._release_due(due)

    def _release_due(self, due: list) -> None:
        rows = [(self.run, arm, start, stop, self.release(rid), 1)
                for arm, rid, start, stop in due]
        try:
            self._sink.record(rows, lambda: self._pack(pending=due))
        except BudgetExceeded:
            for arm, _, _, _ in due:
                self._freeze(arm)
            self.refusals += 1
            raise
        self.n_recorded += len(rows)
        self._draw(due)

    def _draw(self, due: list) -> None:
        self.rule.draw_due(self, due)

    def _take(self, ticket, reward) -> tuple[int, int]:
        if isinstance(ticket, Ticket):
            if ticket.run != self.run:
                raise DpledgerError(f"ticket of run {ticket.run} given to the policy of run "
                                    f"{self.run}")
            got = self.outstanding.get(ticket.round)
            if got is None or got[1] != ticket.generation:
                if ticket.generation != self.generation or ticket.round > self.t:
                    raise DpledgerError(
                        f"ticket for round {ticket.round} is not outstanding: issued before a "
                        "restart after the last checkpoint, or never issued")
                raise DpledgerError(f"ticket for round {ticket.round} was already observed "
                                    "(or never issued)")
            if got[0] != ticket.arm:
                raise DpledgerError(f"ticket for round {ticket.round} names arm {ticket.arm}, "
                                    f"but arm {got[0]} was selected")
            return ticket.round, got[0]
        if isinstance(ticket, (bool, np.bool_)) or not isinstance(ticket, (int, np.integer)):
            raise DpledgerError(f"observe() takes a ticket from select() or an arm, got "
                                f"{type(ticket).__name__} {ticket!r}")
        a = int(ticket)
        if not 0 <= a < self.K:
            raise DpledgerError(f"arm {a} is outside 0 … {self.K - 1}")
        rounds = [t for t, (arm, _) in self.outstanding.items() if arm == a]
        if not rounds:
            raise DpledgerError(f"arm {a} has no outstanding round to observe (every one "
                                "selected was observed)")
        return min(rounds), a

    def _rescale(self, reward) -> float:
        if isinstance(reward, (bool, np.bool_)) or not isinstance(
                reward, (int, float, np.integer, np.floating)):
            raise DpledgerError(f"a reward must be a number, got {type(reward).__name__} "
                                f"{reward!r}")
        r = float(reward)
        if math.isnan(r):
            raise DpledgerError("a reward must not be NaN")
        if not self.lo <= r <= self.hi:
            raise DpledgerError(f"reward {r!r} lies outside the declared range "
                                f"[{self.lo}, {self.hi}]")
        x = (r - self.lo) / (self.hi - self.lo)
        # the contextual rules round a record's statistic to the lattice themselves
        return float(to_lattice(x, self.bits)) if self.bits and not self.rule.contextual else x

    # -- checkpoints -----------------------------------------------------------------------
    def _pack(self, pending=(), select: int | None = None) -> bytes:
        """The checkpoint: a JSON head (counters, generator state, pending releases — or the
        round whose selection draws the releases just recorded — and the name, dtype and
        shape of every array), a newline, then the arrays' bytes in order."""
        rounds = np.array(sorted(self.outstanding), dtype=np.int64)
        arrays = {f"rule.{k}": v for k, v in self.rule.state.items()}
        arrays.update(pulls=self.pulls, arrived=self.arrived, frozen=self.frozen,
                      out_round=rounds,
                      out_arm=np.array([self.outstanding[r][0] for r in rounds], np.int64),
                      out_gen=np.array([self.outstanding[r][1] for r in rounds], np.int64))
        if self.rule.contextual:
            arrays["out_ctx"] = np.array([self.contexts[r] for r in rounds],
                                         np.float64).reshape(len(rounds), self.rule.dim)
        head = {"t": self.t, "generation": self.generation,
                "rng": self.rng.bit_generator.state, "pending": [list(p) for p in pending],
                "select": select,
                "arrays": [[k, v.dtype.str, list(v.shape)] for k, v in arrays.items()]}
        return b"".join([json.dumps(head).encode(), b"\n"]
                        + [np.ascontiguousarray(v).tobytes() for v in arrays.values()])

    @staticmethod
    def _unpack(data: bytes) -> tuple[dict, dict]:
        cut = data.index(b"\n")
        head = json.loads(data[:cut].decode())
        arrays, pos = {}, cut + 1
        for name, dtype, shape in head["arrays"]:
            dt = np.dtype(dtype)
            n = int(np.prod(shape)) * dt.itemsize
            arrays[name] = np.frombuffer(data[pos:pos + n], dtype=dt).reshape(shape)
            pos += n
        if pos != len(data):
            raise DpledgerError("checkpoint: its size does not match its head")
        return head, arrays

    @_locked
    def checkpoint(self) -> None:
        """Write the current state to the store (one transaction; nothing pending)."""
        if self.store is not None:
            ckpt.save(self.store, self.run, self._pack(), self.lease)

    @_locked
    def renew_lease(self) -> None:
        """Extend this server's lease on its run (``select`` does it every third of the
        lease's length; a server idle for longer should call it, or its run may be taken
        over — after which every write of this one is refused)."""
        if self.store is not None and self.lease is not None:
            ckpt.renew(self.store, self.lease)
            self._renew_at = time.monotonic() + self.lease.seconds / 3

    def _resume(self, data: bytes, generation: int) -> None:
        head, z = self._unpack(data)
        for k in self.rule.state:
            if f"rule.{k}" in z:
                self.rule.state[k][...] = z[f"rule.{k}"]
            elif k not in self.rule.added_state:
                raise DpledgerError(f"checkpoint: it holds no {k!r} for {self.rule.name}'s "
                                    "state: it was written by another rule")
            # else: a key added after the checkpoint was written, whose initial value is what
            # that version's rule held (step_rules.StepRule.added_state)
        self.pulls[:] = z["pulls"]
        self.arrived[:] = z["arrived"]
        self.frozen[:] = z["frozen"]
        self.live[:] = ~self.frozen
        self.outstanding = {int(r): (int(a), int(g)) for r, a, g in
                            zip(z["out_round"], z["out_arm"], z["out_gen"], strict=True)}
        if "out_ctx" in z:
            self.contexts = {int(r): np.array(x)
                             for r, x in zip(z["out_round"], z["out_ctx"], strict=True)}
        self.t = int(head["t"])
        # the releases recorded with this checkpoint, finished with the generator state saved
        # just before their noise: the values drawn before the crash, if they were drawn
        self.rng.bit_generator.state = head["rng"]
        self._draw([tuple(p) for p in head["pending"]])
        t = head.get("select")
        if t is not None:
            # the selection of round t, whose releases were recorded: drawn again from the
            # saved state, it takes the same samples and the same arm — its ticket (issued or
            # not before the crash) stays valid
            a = int(self.rule.select(self.box, t))
            self.t = t
            self.pulls[a] += 1
            self.outstanding[t] = (a, int(head["generation"]))
        self.generation = generation
        self._set_rng(run_seed_sequence(self.seed, self.run, generation))

    @_locked
    def close(self) -> None:
        """Checkpoint, give the run's lease back and close the store (if this policy opened
        it)."""
        if self.store is not None:
            try:
                self.checkpoint()
                if self.lease is not None:
                    ckpt.release(self.store, self.lease)
                    self.lease = None
            finally:
                if getattr(self, "_owns_store", False):
                    self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (f"OnlinePolicy({self.policy!r}, arms={self.K}, horizon={self.horizon}, "
                f"round={self.t}, run={self.run}, generation={self.generation})")

    @property
    def ledger(self) -> RewardLedger:
        """The records made so far (from the store, or the in-memory ledger)."""
        if self.store is not None:
            return self.store.to_ledger()
        return self._sink.ledger


def _check_int(name: str, value, lo: int = 0) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < lo:
        raise DpledgerError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(value)


def open_or_create_store(url: str, budget=None) -> LedgerStore:
    """The store at ``url`` (an SQLite path or ``sqlite://`` URL, or a ``postgresql://`` URL),
    created with ``budget`` if there is none yet.  Several servers starting at once on one
    fresh store: one creates it (PostgreSQL: one transaction; SQLite: built aside and linked
    into place whole), the others open it."""
    if not is_postgres_url(url):
        path = sqlite_path(url)
        if os.path.exists(path):
            return LedgerStore.open(path)
        try:
            return LedgerStore.create(path, budget=budget)
        except DpledgerError as exc:
            if not os.path.exists(path):
                raise
            try:
                return LedgerStore.open(path)     # created meanwhile by another process
            except DpledgerError:
                raise exc from None
    try:
        return LedgerStore.open(url)
    except StoreMissing:
        pass
    try:
        return LedgerStore.create(url, budget=budget)
    except StoreUnreachable:
        raise
    except DpledgerError as exc:
        try:
            return LedgerStore.open(url)      # created meanwhile by another server
        except StoreMissing:
            raise exc from None               # the creation's own reason


_ENGINE_ARM_BYTES = 18             # OnlinePolicy's pulls, arrived (int64), frozen, live (bool)
_STEP_SLACK = 1 << 20              # the engine's scalars, dicts and the rule's Python objects


def _array_bytes(obj, depth: int = 0) -> int:
    """Bytes of the numpy arrays an object holds (its attributes, dicts, tuples and lists,
    a few levels deep): what a step rule's state takes."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if depth > 3:
        return 0
    if isinstance(obj, dict):
        return sum(_array_bytes(v, depth + 1) for v in obj.values())
    if isinstance(obj, (tuple, list)):
        return sum(_array_bytes(v, depth + 1) for v in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return sum(_array_bytes(v, depth + 1) for k, v in vars(obj).items()
                   if k not in ("policy", "engine", "pulls"))
    return 0


def step_memory_estimate(policy, rule_cls, K: int, horizon: int | None,
                         problem=None) -> int:
    """Bytes a policy in step form holds, estimated before its state is allocated (issue 34
    §2: the step API is a boundary like the CLI).

    K-armed rules hold a fixed number of per-arm arrays (their size at most logarithmic in T):
    the rule's arrays are measured as built for 2 and 3 arms at the same horizon and extended
    linearly to K.  Contextual rules: the policy's models and trees
    (``model_bytes``, the simulator's estimate of one run) and a round's K contexts and scores
    — first a lower bound that needs no plan (M models of d² and one packed (d+1)-square
    item), since planning a private policy allocates its item."""
    if rule_cls.contextual:
        d, M = problem.dim, problem.n_streams
        floor = 8 * (M * d * d + (d + 1) * (d + 2) // 2)
        check_step_fits(policy, floor)
        need = policy.model_bytes(problem) + 8 * K * (d + 2)
    else:
        small = [_array_bytes(rule_cls(policy, k, horizon)) for k in (2, 3)]
        need = small[0] + (K - 2) * max(0, small[1] - small[0])
    return _STEP_SLACK + K * _ENGINE_ARM_BYTES + need


def check_step_fits(policy, need: int) -> None:
    """Refuse, in one line, a step-form policy whose state would not fit in memory."""
    from dpledger.resources import check_fits
    check_fits(f"policy {policy.name!r} in step form", need,
               "use fewer arms" + (" or a smaller dim" if getattr(policy, "contextual", False)
                                   else ""))


def online(name: str, n_arms: int, horizon: int | None = None, *, store=None, seed=None,
           sampler: str = "float", reward_range=(0.0, 1.0), run: int = 0, budget=None,
           dim: int | None = None, shared: bool = False, norm_bound: float = 1.0,
           lease_seconds: float = ckpt.LEASE_SECONDS, take_over: bool = False,
           clip_contexts: bool = False, **params) -> OnlinePolicy:
    """Policy ``name`` in step form over ``n_arms`` arms (see the module docstring).

    ``horizon``: the number of rounds, or None for an anytime policy (a horizon-bound one says
    so); ``store``: a :class:`LedgerStore`, a store path or URL (``sqlite:///path`` or
    ``postgresql://…``; created if missing, with ``budget``: :func:`open_or_create_store`), or
    None to keep the records in memory; ``seed``: the run's seed (the generator of run
    ``run`` in ``dpledger run --seed``), or None for the operating system's entropy;
    ``sampler``: "float" or "exact" (rewards on the lattice 2^-16 of the range, exact
    discrete noise); ``reward_range``: the declared (lo, hi); ``params``: the policy's
    parameters (``epsilon=…``).  Contextual policies (:mod:`~dpledger.policies.
    step_rules_contextual`): ``dim`` the context dimension d, ``shared`` True for one context
    per arm (one shared θ; else one context per round, a model per arm), ``norm_bound`` the
    declared bound L on every context's Euclidean norm (a context above it is refused, exactly;
    ``clip_contexts`` True scales it down to L instead, recorded in the store's identity).

    With a store, the opening takes run ``run``'s lease (one live server per run,
    :mod:`~dpledger.accounting.store_checkpoint`): ``lease_seconds`` its length (renewed by
    ``select``), ``take_over`` True to take it from a holder known to be gone (a crashed
    server on another host; a holder on this host whose process is gone is taken over
    without it).  A run served by another live process is refused in one line."""
    from dpledger.policies.registry import make_policy
    from dpledger.policies.step_rules import rule_for
    K = _check_int("n_arms", n_arms, 2)
    policy = make_policy(name, **params)
    rule_cls = rule_for(policy)
    if horizon is not None:
        horizon = _check_int("horizon", horizon, K)
    elif rule_cls.needs_horizon(policy):
        raise DpledgerError(f"policy {name!r} needs a horizon "
                            f"({rule_cls.needs_horizon(policy)})")
    if sampler not in ("float", "exact"):
        raise DpledgerError(f"sampler must be 'float' or 'exact', got {sampler!r}")
    if sampler == "exact" and not policy.exact_sampler:
        raise DpledgerError(f"policy {name!r} has no exact-sampler form")
    if seed is not None:
        seed = _check_int("seed", seed)
    run = _check_int("run", run)
    try:
        lease_seconds = float(lease_seconds)
    except (TypeError, ValueError):
        raise DpledgerError(f"lease_seconds must be a number > 0, got {lease_seconds!r}") \
            from None
    if not (math.isfinite(lease_seconds) and 0 < lease_seconds <= 86400 * 366):
        raise DpledgerError(f"lease_seconds must be a number from 0 (excluded) to a year, got "
                            f"{lease_seconds!r}")
    if not isinstance(take_over, (bool, np.bool_)):
        raise DpledgerError(f"take_over must be True or False, got {take_over!r}")
    try:
        lo, hi = (float(v) for v in reward_range)
    except (TypeError, ValueError):
        raise DpledgerError(f"reward_range must be (lo, hi), got {reward_range!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DpledgerError(f"reward_range must be finite with lo < hi, got {reward_range!r}")
    identity = {"policy": name, "arms": K, "params": policy.public_params(),
                "sampler": sampler, "range": [lo, hi], "horizon": horizon}
    if rule_cls.contextual:
        from dpledger.policies.step_rules_contextual import step_problem
        dim = _check_int("dim", dim, 1)
        if not isinstance(shared, (bool, np.bool_)):
            raise DpledgerError(f"shared must be True or False, got {shared!r}")
        try:
            L = float(norm_bound)
        except (TypeError, ValueError):
            raise DpledgerError(f"norm_bound must be a number > 0, got {norm_bound!r}") \
                from None
        if not (math.isfinite(L) and L > 0):
            raise DpledgerError(f"norm_bound must be a number > 0, got {norm_bound!r}")
        problem = step_problem(K, horizon, dim, bool(shared), L, lo, hi,
                               LATTICE_BITS if sampler == "exact" else 0)
        check_step_fits(policy, step_memory_estimate(policy, rule_cls, K, horizon, problem))
        rule = rule_cls(policy, K, horizon, problem)
        if not isinstance(clip_contexts, (bool, np.bool_)):
            raise DpledgerError(f"clip_contexts must be True or False, got {clip_contexts!r}")
        rule.clip = bool(clip_contexts)
        identity.update(dim=dim, shared=bool(shared), norm_bound=L)
        if clip_contexts:
            identity["clip_contexts"] = True
    else:
        if dim is not None or shared or clip_contexts:
            raise DpledgerError(f"policy {name!r} is K-armed: it takes no dim, shared or "
                                "clip_contexts")
        check_step_fits(policy, step_memory_estimate(policy, rule_cls, K, horizon))
        rule = rule_cls(policy, K, horizon)
    owns = False
    if store is None:
        if budget is not None:
            raise DpledgerError("a budget needs a store (store=PATH)")
        sink = _MemorySink()
    else:
        if isinstance(store, (str, os.PathLike)):
            store = open_or_create_store(os.fspath(store), budget)
            owns = True
        elif not isinstance(store, LedgerStore):
            raise DpledgerError(f"store must be a ledger store or a path, got {store!r}")
        elif budget is not None:
            raise DpledgerError("budget= is for a store path this call creates; an open store "
                                "keeps its own budget")
        sink = _StoreSink(store, run)
    pol = OnlinePolicy(policy, rule, K, horizon, sink, seed, sampler, lo, hi, run,
                       store, identity)
    pol._owns_store = owns
    if store is not None:
        try:
            gen, lease = ckpt.bind(store, identity, run, lease_seconds, bool(take_over))
            pol.lease = sink.lease = lease
            pol._renew_at = time.monotonic() + lease_seconds / 3
            if gen > 0:
                data = ckpt.latest(store, run)
                if data is not None:
                    pol._resume(data, gen)
                else:
                    pol.generation = gen
                    pol._set_rng(run_seed_sequence(seed, run, gen))
        except BaseException:
            if owns:
                store.close()
            raise
    return pol
