"""The simulator (docs/design.md#policies-and-simulation): many independent runs of one policy on
one environment.

Seeding: one master seed; run ``i`` owns the Generator ``PCG64(SeedSequence(seed,
spawn_key=(i,)))``, so any split of ``run_indices`` across workers gives the same runs, and
aggregates reduce in run-index order (R4).  Each run's ledger rows are tagged with its run
index.

One description of the play per run, the segment table (arm, first_index, first_round, stride,
length) — per-arm arithmetic runs of rounds, as :func:`_segments` builds them greedily from an
action sequence.  A per-round kernel marked ``action_sink`` builds it while it runs, through
an action sink (:mod:`dpledger.policies.sink`: chunks of 2^15 rounds, memory O(chunk +
segments) not O(T), the rounds done published for a progress thread); another run that gives
actions is converted by :func:`_segments` (O(rounds)); a run that gives segments (event-driven
kernels, see :class:`~dpledger.policies.base.RunOutput`) by :func:`_canonical`, which builds
the same table in O(segments log segments).  From the table alone, with one implementation
each: the ledger's index → round map, the stream lengths, rounds played, and the pull counts
N_a(t) at the checkpoints (:func:`_pulls_at`, O(segments·log P + K·P)).  Actions are
materialised only for ``keep_actions=True``.  Before any work, :func:`check_memory` compares
:func:`memory_estimate` with the memory available and refuses (with the estimate and what
avoids it) a simulation that cannot fit.

Pseudo-regret at round t is Σ_a (μ* − μ_a)·N_a(t) with the environment's true means (column
means for a fixed table), reported on about 200 log-spaced rounds including T; N_a(t) is an
exact integer, so the only rounding is the K products and their sum (in arm order).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from dpledger._jit import njit

from dpledger.accounting.composition import Composition
from dpledger.accounting.ledger import RewardLedger
from dpledger.errors import DpledgerError, counted
from dpledger.interrupt import in_worker_thread, interruptible_pool, raise_if_stopped
from dpledger.resources import available_memory, fmt_bytes, largest_fitting
from dpledger.policies.base import KernelPolicy, Policy, RunOutput, validate_horizon
from dpledger.policies.environments import Environment
from dpledger.policies.sink import (SLOT_DONE, SLOT_FINISHED, SinkOverflow, close_open, digest,
                                    make_sink, new_state, rounds_done, sink_width)


def run_generator(seed: int, run_index: int) -> np.random.Generator:
    """The Generator of run ``run_index`` under master ``seed``."""
    return np.random.Generator(np.random.PCG64(
        np.random.SeedSequence(entropy=int(seed), spawn_key=(int(run_index),))))


RNG_SOURCES = ("seeded", "os")
OS_RNG_DETAIL = ("each run's bits come from a PCG64 generator seeded with 128 bits of the "
                 "operating system's entropy (secrets.randbits); not reproducible")


def check_rng_source(rng: str, exact: bool) -> None:
    """``rng`` is "seeded" or "os", and "os" comes with the exact sampler (K-armed and
    contextual runs alike)."""
    if rng not in RNG_SOURCES:
        raise DpledgerError(f"rng must be 'seeded' or 'os', got {rng!r}")
    if rng == "os" and not exact:
        raise DpledgerError("the OS bit source (rng 'os') is for deployment with the exact "
                            "sampler; the float sampler's outputs leak the rewards through "
                            "their floating-point set whatever the bit source")


def _os_entropy() -> int:
    """``--rng os`` (deployment): 128 bits from the operating system's CSPRNG (:mod:`secrets`),
    drawn once per run; the run's PCG64 Generator is seeded with them, the exact samplers draw
    their uniform integers from it, and the run cannot be reproduced (no seed is recorded)."""
    import secrets
    return secrets.randbits(128)


def _generator(seed: int, run_index: int, entropy: int | None = None) -> np.random.Generator:
    """Run ``run_index``'s Generator: :func:`run_generator`, or seeded with OS ``entropy``."""
    if entropy is None:
        return run_generator(seed, run_index)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def checkpoints(T: int, n: int = 200) -> np.ndarray:
    """About ``n`` distinct log-spaced rounds in [1, T], T included (all rounds when T ≤ n)."""
    return _checkpoints(int(T), int(n)).copy()


@functools.lru_cache(maxsize=64)
def _checkpoints(T: int, n: int) -> np.ndarray:
    def pts(m: int) -> np.ndarray:
        return np.unique(np.concatenate([np.round(np.geomspace(1, T, m)).astype(np.int64), [T]]))

    if T <= n:
        return np.arange(1, T + 1, dtype=np.int64)
    lo, hi = n, 64 * n          # the distinct count grows with m: bisect for ≈ n points
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pts(mid).size > n:
            hi = mid
        else:
            lo = mid
    return pts(lo)


def _segments(actions, K, first_round):
    """Per-arm arithmetic runs of the rounds each arm was played, as the (5, n) table (arm,
    first_index, first_round, stride, length): one greedy pass (a run is closed by the first
    pull of its arm that does not continue it), runs listed in the order they close, then the
    runs still open in arm order — :func:`dpledger.policies.sink.digest` over the whole array,
    into a doubling buffer (the sinks of per-round kernels run the same pass chunk by chunk)."""
    st = new_state(int(K))
    table = np.zeros((5, 64), dtype=np.int64)
    table = digest(actions, 0, actions.size, int(first_round), st, table, True)
    table = close_open(st, table, True)
    return table[:, :int(st[0])].copy()


@njit(cache=True)
def _canonical(segs, lo, hi, K, out, pos, key):
    """The table :func:`_segments` would build from the actions that the segments ``segs[:,
    lo:hi]`` — (arm, first_round, stride, length), any order, one arm's segments not
    interleaved — describe, in O(n log n) for n segments, never O(rounds).  The greedy
    per-arm pass of :func:`_segments` is replayed one input segment at a time: at most three
    of its rounds are taken singly, after which the open run has the segment's stride and
    swallows the rest at once.  A run is keyed by the round that closed it (the order
    :func:`_segments` lists runs in; runs still open come last, in arm order).

    Writes the table into ``out[:, pos:pos+m]`` (``key`` is scratch of the same width) and
    returns (m, rounds played); raises on malformed segments (a cheap check: one arm's
    segments must not interleave, and the last round must equal the number of rounds)."""
    if hi - lo > 1 and np.any(segs[1, lo + 1:hi] < segs[1, lo:hi - 1]):
        order = np.argsort(segs[1, lo:hi], kind="mergesort") + lo
    else:
        order = np.arange(lo, hi)
    first_idx = np.zeros(K, np.int64)
    first_rnd = np.zeros(K, np.int64)
    stride = np.zeros(K, np.int64)
    length = np.zeros(K, np.int64)
    count = np.zeros(K, np.int64)
    m = pos
    played = 0
    last_round = 0
    for j in order:
        a, r0, s, rem = segs[0, j], segs[1, j], segs[2, j], segs[3, j]
        if a < 0 or a >= K or r0 < 1 or s < 1 or rem < 1:
            raise ValueError("malformed segment")
        if length[a] > 0 and r0 <= first_rnd[a] + stride[a] * (length[a] - 1):
            raise ValueError("segments of one arm interleave")
        played += rem
        last_round = max(last_round, r0 + s * (rem - 1))
        r = r0
        while rem > 0:
            if length[a] == 0:
                first_idx[a], first_rnd[a], stride[a], length[a] = count[a], r, 1, 1
            elif length[a] == 1:
                stride[a] = r - first_rnd[a]
                length[a] = 2
            elif r == first_rnd[a] + stride[a] * length[a]:
                if stride[a] == s:          # the run continues with the segment's stride
                    length[a] += rem
                    count[a] += rem
                    break
                length[a] += 1
            else:
                out[0, m], out[1, m], out[2, m] = a, first_idx[a], first_rnd[a]
                out[3, m], out[4, m] = stride[a], length[a]
                key[m] = r
                m += 1
                first_idx[a], first_rnd[a], stride[a], length[a] = count[a], r, 1, 1
            count[a] += 1
            rem -= 1
            r += s
    if last_round != played:
        raise ValueError("segments do not tile rounds 1 … rounds played")
    for a in range(K):
        if length[a] > 0:
            out[0, m], out[1, m], out[2, m] = a, first_idx[a], first_rnd[a]
            out[3, m], out[4, m] = stride[a], length[a]
            key[m] = played + 1 + a
            m += 1
    if m - pos > 1 and np.any(key[pos + 1:m] < key[pos:m - 1]):
        idx = np.argsort(key[pos:m]) + pos
        tmp = out[:, idx].copy()
        out[:, pos:m] = tmp
    return m - pos, played


@njit(cache=True)
def _canonical_many(segs, offs, K):
    """:func:`_canonical` of every run's columns ``offs[r] … offs[r+1]−1`` of ``segs``: the
    tables side by side, their offsets, and the rounds played per run."""
    R = offs.size - 1
    width = segs.shape[1] + R * K          # at most one closed run per segment, K open ones
    out = np.zeros((5, width), np.int64)
    key = np.zeros(width, np.int64)
    toffs = np.zeros(R + 1, np.int64)
    played = np.zeros(R, np.int64)
    for r in range(R):
        m, played[r] = _canonical(segs, offs[r], offs[r + 1], K, out, toffs[r], key)
        toffs[r + 1] = toffs[r] + m
    return out[:, :toffs[R]], toffs, played


@njit(cache=True)
def _pulls_into(table, lo, hi, K, points, out, diff):
    """Pull counts N_a(t) = Σ over runs of arm a of clip(⌊(t − first_round)/stride⌋ + 1, 0,
    length) at every checkpoint t, into ``out`` (K, P), from the table columns lo … hi−1
    (arm, first_index, first_round, stride, length) — runs of one arm do not interleave.  A
    run adds its length from the first point at or after its last round on (a difference
    array: ``diff`` (K, P+1), all zero on entry and left so) and partial counts at the points
    inside its span — at most K runs span a point — so O(n log P + K·P)."""
    P = points.size
    for j in range(lo, hi):
        a, f, s, L = table[0, j], table[2, j], table[3, j], table[4, j]
        last = f + s * (L - 1)
        i = np.searchsorted(points, f)
        while i < P and points[i] < last:
            k = points[i] - f + 1 if s == 1 else (points[i] - f) // s + 1
            diff[a, i] += k                 # at this point only: undone at the next
            diff[a, i + 1] -= k
            i += 1
        diff[a, i] += L
    for a in range(K):
        c = 0
        for i in range(P):
            c += diff[a, i]
            diff[a, i] = 0
            out[a, i] = c
        diff[a, P] = 0


@njit(cache=True)
def _pulls_at(table, K, points):
    """(K, P) pull counts at ``points`` of a whole table (see :func:`_pulls_into`)."""
    out = np.empty((K, points.size), np.int64)
    _pulls_into(table, 0, table.shape[1], K, points, out, np.zeros((K, points.size + 1), np.int64))
    return out


@njit(cache=True)
def _digest_many(table, toffs, K, gaps, points):
    """Per run r (table columns toffs[r] … toffs[r+1]−1): the pseudo-regret Σ_a gap_a · N_a(t)
    at ``points`` (summed in arm order) and the pulls of every arm by the last point (the
    stream lengths, the last point being T)."""
    R = toffs.size - 1
    P = points.size
    regret = np.zeros((R, P))
    lengths = np.zeros((R, K), np.int64)
    pulls = np.empty((K, P), np.int64)
    diff = np.zeros((K, P + 1), np.int64)
    for r in range(R):
        _pulls_into(table, toffs[r], toffs[r + 1], K, points, pulls, diff)
        for a in range(K):                  # Σ_a gap_a·N_a(t), in arm order
            g = gaps[a]
            for i in range(P):
                regret[r, i] += g * pulls[a, i]
        if P:
            lengths[r] = pulls[:, P - 1]
    return regret, lengths


@dataclass
class SimulationResult:
    policy: Policy
    env: Environment
    horizon: int
    seed: int
    run_indices: list[int]
    points: np.ndarray
    regret: np.ndarray                 # (runs, points)
    ledger: RewardLedger
    noise_draws: list[int]
    rounds_played: list[int]
    actions: list[np.ndarray] | None = None
    captured: list[dict | None] = field(default_factory=list)
    rng: str = "seeded"                # "os": seeded from OS entropy per run, not reproducible

    @property
    def runs(self) -> int:
        return len(self.run_indices)


def bind_sampler(policy: Policy, bits: int) -> None:
    """Tell a policy whose noise is solved against the recorded release (AdaC-UCB) which
    sampler runs: 0 float, else the exact sampler's lattice bits."""
    if hasattr(policy, "bind_sampler"):
        policy.bind_sampler(int(bits))


def kernel_releases(policy: Policy, env: Environment, T: int, K: int) -> list:
    """The releases the kernel's rows name by index: the policy's own, or with the exact
    sampler (a lattice environment) their discrete-Laplace / discrete-Gaussian forms
    (mechanisms.noise.lattice_release)."""
    bind_sampler(policy, env.lattice_bits)
    releases = policy.releases(T, K)
    if env.lattice_bits:
        from dpledger.mechanisms.noise import lattice_release
        return [lattice_release(r, env.lattice_bits) for r in releases]
    return releases


def run_certificate(policy: Policy, T: int, K: int, lattice_bits: int = 0):
    """The policy's certificate for a run: as declared, or with the exact sampler (rewards on
    the lattice 2^-bits) every release replaced by the discrete release the kernel makes in its
    place — same schedule and witness, ε' ≤ ε each (mechanisms.noise.lattice_release)."""
    bind_sampler(policy, lattice_bits)
    if lattice_bits and getattr(policy, "lattice_certificate", False):
        return policy.certificate(T, K, lattice_bits=lattice_bits)   # states its own reads
    cert = policy.certificate(T, K)
    if not lattice_bits or cert.unbounded:
        return cert
    from dataclasses import replace
    from dpledger.accounting.certificate import Candidate
    from dpledger.mechanisms.noise import lattice_release
    cands = tuple(Candidate(Composition.of([(lattice_release(r, lattice_bits), c)
                                            for r, c in cand.composition.items]),
                            cand.witness,
                            cand.basis + f"; exact sampler: rewards on the lattice 2^-{lattice_bits}, "
                            "discrete noise (Laplace or Gaussian) of at least the same scale")
                  for cand in cert.candidates)
    return replace(cert, candidates=cands)


_WORKER_SINKS: np.ndarray | None = None     # a pool worker's view of the shared sinks


def _attach_sinks(raw, shape) -> None:
    """Pool initializer: the sinks of this simulation's chunks, in memory shared with the
    parent (whose progress thread reads their rounds-done slots)."""
    global _WORKER_SINKS
    _WORKER_SINKS = np.frombuffer(raw, dtype=np.int64).reshape(shape)


def _sunk(policy: Policy, keep_actions: bool) -> bool:
    """Whether the simulator runs ``policy`` through an action sink."""
    return (not keep_actions and isinstance(policy, KernelPolicy)
            and bool(getattr(type(policy), "action_sink", False)))


def _chunk_sink(K: int, where, sunk: bool) -> np.ndarray | None:
    """The sink of a chunk (``sunk``), or just its progress slots (a (6, 2) array, or None
    when nobody reads them): ``where`` a (6, W) array, the slot of the chunk among a pool
    worker's shared sinks, or None (a private one)."""
    if isinstance(where, np.ndarray):
        out = where
    elif where is not None and _WORKER_SINKS is not None:
        out = _WORKER_SINKS[int(where)]
    else:
        out = None
    return make_sink(K, out=out) if sunk else out


def _played_of(segs: np.ndarray) -> int:
    return int(np.asarray(segs)[3].sum()) if np.size(segs) else 0


def _run_sunk(policy: "KernelPolicy", et: tuple, T: int, seed: int, i: int,
              stop_at: int | None, capture: bool, sink: np.ndarray,
              entropy: int | None = None) -> RunOutput:
    """Run ``i`` of a per-round kernel through the chunk's action ``sink``.  A play that needs
    more table columns than the sink holds is replayed (same Generator, hence the same play)
    into a private sink of the exact size the first pass counted — after checking that it
    fits in memory (the chunk's sink then shows no progress until the replay ends)."""
    K = int(et[1].shape[0])
    try:
        return policy.run_one(_generator(seed, i, entropy), et, T, stop_at=stop_at,
                              capture=capture, sink=make_sink(K, out=sink))
    except SinkOverflow as exc:
        columns = exc.columns
    need = 6 * 8 * sink_width(K, columns)
    avail = available_memory()
    if avail is not None and need > avail:
        raise DpledgerError(
            f"run {i} of {policy.name!r} switches arms too often to compress: its segment table "
            f"needs {fmt_bytes(need)} ({columns} arithmetic runs of rounds), more than the "
            f"{fmt_bytes(avail)} available; use a smaller --horizon")
    try:
        return policy.run_one(_generator(seed, i, entropy), et, T, stop_at=stop_at,
                              capture=capture, sink=make_sink(K, columns))
    except SinkOverflow:
        raise AssertionError("the replayed run did not fit the table its first pass "
                             "counted") from None


class _Poller:
    """While the block runs, call ``report(read())`` every ``interval`` seconds from a daemon
    thread (the kernels release the GIL, so the thread runs while they do), and once at the
    end.  ``report=None``: nothing."""

    def __init__(self, report, read, interval: float = 0.2):
        self.report, self.read, self.interval = report, read, interval

    def __enter__(self):
        if self.report is not None:
            import threading
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.report(self.read())

    def __exit__(self, exc_type, exc, tb):
        if self.report is not None:
            self._stop.set()
            self._thread.join()
            if exc_type is None:
                self.report(self.read())
        return False


def run_chunk(policy: Policy, env: Environment, T: int, seed: int, indices: Sequence[int],
              stop_at: int | None = None, capture: bool = False, keep_actions: bool = False,
              progress: Callable[[int], None] | None = None,
              progress_sink: np.ndarray | int | None = None, rng: str = "seeded") -> dict:
    """The runs ``indices`` of one simulation: the unit of work any executor ships (a local
    process, a Dask worker, a resumed sweep); :func:`assemble` joins chunks in run order.

    Each run's play becomes its segment table at once: per-round kernels that take an action
    sink (``KernelPolicy.action_sink``) digest it chunk by chunk while they run, so no O(T)
    array exists (:mod:`dpledger.policies.sink`); other runs given as actions are digested
    after the run (the actions are then dropped unless kept); runs given as segments are
    turned into tables together after the loop, and the regret and ledger records of all runs
    are made in bulk — a few compiled calls and one ledger append per table per chunk, so that
    recording stays small next to event-driven kernels of tens of microseconds per run.

    ``progress_sink`` (a sink array, or the slot of this chunk among a pool worker's shared
    sinks): the chunk's sink, whose rounds-done slot a progress thread reads (rounds of the
    finished runs plus those of the running one, published every
    :data:`~dpledger.policies.sink.SINK_CHUNK` rounds).  Progress never changes what is
    drawn."""
    K = env.n_arms
    sunk = _sunk(policy, keep_actions)
    sink = _chunk_sink(K, progress_sink, sunk)
    ledger = RewardLedger()
    # kernel rows name releases by position; equal releases intern once (the exact sampler maps
    # AdaP's per-episode Laplace releases, equal in ε, to one discrete release), so map ids
    id_map = np.array([ledger.intern(r) for r in kernel_releases(policy, env, T, K)] or [0],
                      dtype=np.int64)
    if np.array_equal(id_map, np.arange(id_map.size)):
        id_map = None                       # positions are the ledger ids (the float sampler)
    gaps = (env.means.max() - env.means).astype(np.float64)
    pts = checkpoints(T)
    et = env.as_tuple()
    indices = [int(i) for i in indices]
    runs = []                               # (out without its play, table or None, played)
    seg_parts = []
    acts = []
    rng_source = rng
    for i in indices:
        raise_if_stopped()                  # Ctrl-C between runs (inside one: the sink's flush)
        # the run's Generator: seeded from (seed, i), or with rng "os" from 128 bits of OS
        # entropy drawn once per run (a sink overflow replays the run with the same bits)
        entropy = _os_entropy() if rng_source == "os" else None
        if sunk:
            out = _run_sunk(policy, et, T, seed, i, stop_at, capture, sink, entropy)
        else:
            out = policy.run_one(_generator(seed, i, entropy), et, T, stop_at=stop_at,
                                 capture=capture)
        if getattr(out, "table", None) is not None:
            table_i = out.table
            runs.append((out, table_i, int(table_i[4].sum())))
            actions = None
        elif out.has_actions:
            actions = np.asarray(out.actions, dtype=np.int64)
            runs.append((out, _segments(actions, K, 1), int(actions.size)))
        else:
            segs = out.segments
            if not (isinstance(segs, np.ndarray) and segs.dtype == np.int64 and segs.ndim == 2
                    and segs.shape[0] == 4):
                segs = np.asarray(segs, dtype=np.int64).reshape(4, -1)
            seg_parts.append(segs)
            runs.append((out, None, 0))
            actions = None
        acts.append((actions if actions is not None else out.actions).astype(np.int16)
                    if keep_actions else None)
        out.actions = None                  # keep no O(T) array past its run
        out.segments = None
        out.table = None
        if sink is not None:
            sink[5, SLOT_FINISHED] += runs[-1][2] if runs[-1][1] is not None else \
                _played_of(seg_parts[-1])
            sink[5, SLOT_DONE] = sink[5, SLOT_FINISHED]     # one write: never seen to shrink
        if progress is not None:
            progress(1)
    tables = [t for _, t, _ in runs]
    played = [n for _, _, n in runs]
    table = None
    if seg_parts:
        offs = np.concatenate([[0], np.cumsum([p.shape[1] for p in seg_parts])]).astype(np.int64)
        try:
            tab, toffs, n_played = _canonical_many(np.concatenate(seg_parts, axis=1), offs, K)
        except ValueError as exc:
            raise DpledgerError(f"policy {policy.name!r} returned bad segments: {exc}") from None
        if len(seg_parts) == len(runs):     # every run gave segments: tables already in order
            table, played = tab, n_played.tolist()
        else:
            k = 0
            for j, t in enumerate(tables):
                if t is None:
                    tables[j] = tab[:, toffs[k]:toffs[k + 1]]
                    played[j] = int(n_played[k])
                    k += 1
    if table is None:
        sizes = np.array([t.shape[1] for t in tables], dtype=np.int64)
        table = np.concatenate(tables, axis=1) if tables else np.zeros((5, 0), np.int64)
        toffs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    sizes = np.diff(toffs)
    regret, lengths = _digest_many(table, toffs, K, gaps, pts)
    _record(ledger, indices, K, [o for o, _, _ in runs], table, sizes, lengths, id_map,
            env.lattice_bits)
    return dict(indices=indices, regret=list(regret), ledger=ledger,
                draws=[int(o.noise_draws) for o, _, _ in runs], played=played, actions=acts,
                captured=[o.captured for o, _, _ in runs])


def _mapped_ids(id_map: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Kernel release positions → ledger ids (a position outside the policy's list is an
    error of the policy, reported as the ledger would)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= id_map.size):
        raise DpledgerError("release_id not interned in this ledger")
    return id_map[ids]


def _record(ledger: RewardLedger, indices: Sequence[int], K: int, outs: Sequence[RunOutput],
            table: np.ndarray, sizes: np.ndarray, lengths: np.ndarray,
            id_map: np.ndarray | None = None, lattice_bits: int = 0) -> None:
    """The ledger records of runs ``indices`` (in that order): their rows, Gaussian prefix rows,
    posterior reads (drawn from the discrete Gaussian on the lattice 2^-``lattice_bits`` when
    that is > 0: a policy with an exact-sampler form draws its posterior reads so) and trees, the index → round map (``table``: the runs' segment tables side by side,
    ``sizes[r]`` columns each) and the stream lengths (``lengths[r, arm]`` pulls).  Rows and
    segments go in as one append each; the tables equal run-by-run appends."""
    runs = np.asarray(indices, dtype=np.int64)
    n_rows = np.array([o.rows.shape[1] for o in outs], dtype=np.int64)
    if n_rows.sum():
        rows = np.concatenate([o.rows for o in outs], axis=1)
        rids = rows[3] if id_map is None else _mapped_ids(id_map, rows[3])
        ledger.append_rows(np.repeat(runs, n_rows), rows[0], rows[1], rows[2], rids, rows[4],
                           owned=True)
    for run, out in zip(indices, outs, strict=True):
        if out.gauss_rows is not None and np.size(out.gauss_rows["arm"]):
            g = out.gauss_rows
            ledger.add_growing_prefix(run, g["arm"], g["stop"], g["count"], g["mu2"],
                                      starts=g["start"], owned=True)
        if out.posterior_reads is not None:
            pr = out.posterior_reads
            ledger.add_posterior_reads(run, pr["arm"], pr["first_round"], pr["last_round"],
                                       pr["c"], pr.get("bits", lattice_bits))
        if out.trees is not None:
            tr = out.trees
            for arm, off, n, lev, rid in zip(tr["arm"], tr["offset"], tr["n_items"],
                                             tr["levels"], tr["release_id"], strict=True):
                if n > 0:
                    rid = int(rid) if id_map is None else int(_mapped_ids(id_map, np.array([rid]))[0])
                    ledger.add_tree(run, int(arm), int(off), int(n), int(lev), rid)
    if table.shape[1]:
        ledger.add_segments(np.repeat(runs, sizes), table[0], table[1], table[2], table[3],
                            table[4], owned=True)
    lengths = np.asarray(lengths, dtype=np.int64)
    ledger.set_stream_lengths(np.repeat(np.asarray(indices, dtype=np.int64), lengths.shape[1]),
                              np.tile(np.arange(lengths.shape[1]), len(indices)), lengths.ravel())


def count_runs(runs: int | None, run_indices: Sequence[int] | None, seed: int) -> int:
    """How many runs a simulation asks for, checked (``runs`` an integer >= 1 when no
    ``run_indices``; the master ``seed`` an integer >= 0) without building the list of indices:
    the memory check comes first (1e9 runs would fill the memory building it)."""
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise DpledgerError(f"seed must be an integer >= 0, got {seed!r}")
    if run_indices is None:
        if runs is None or isinstance(runs, bool) or int(runs) != runs or runs < 1:
            raise DpledgerError(f"runs must be an integer >= 1, got {runs!r}")
        return int(runs)
    return len(run_indices)


def check_runs(runs: int | None, run_indices: Sequence[int] | None, seed: int) -> list[int]:
    """The run indices of a simulation (``runs`` → 0 … runs − 1, or distinct ``run_indices``
    >= 0), after checking the master ``seed`` is an integer >= 0."""
    count_runs(runs, run_indices, seed)
    if run_indices is None:
        run_indices = list(range(int(runs)))
    run_indices = [int(i) for i in run_indices]
    if not run_indices or len(set(run_indices)) != len(run_indices) or min(run_indices) < 0:
        raise DpledgerError("run_indices must be distinct integers >= 0")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise DpledgerError(f"seed must be an integer >= 0, got {seed!r}")
    return run_indices


def simulate(policy: Policy, env: Environment, horizon: int, *, seed: int = 0,
             runs: int | None = None, run_indices: Sequence[int] | None = None,
             stop_at: int | None = None, capture: bool = False, keep_actions: bool = False,
             workers: int = 1, progress: Callable[[int], None] | None = None,
             sampler: str = "float", rng: str = "seeded") -> SimulationResult:
    """Run ``policy`` on ``env`` for ``horizon`` rounds, once per run index.

    ``sampler="exact"`` (docs/design.md#mechanisms-and-samplers) runs the policy on
    ``env.with_lattice(LATTICE_BITS)``: rewards on the lattice 2^-16 of the range, exact
    discrete-Laplace noise, discrete releases in the ledger (see :mod:`dpledger.mechanisms.noise`);
    policies that support it say ``exact_sampler = True``.

    ``rng="os"`` (deployment) draws each run's bits from a generator seeded with the operating
    system's entropy (:func:`_os_entropy`) instead of ``seed``; it is only accepted with the
    exact sampler — the float sampler's output set leaks the data whatever its bit source."""
    if not isinstance(policy, Policy):
        raise DpledgerError(f"not a policy: {policy!r}")
    if getattr(policy, "contextual", False):
        raise DpledgerError(f"policy {policy.name!r} is contextual: simulate it with "
                            "dpledger.policies.contextual.simulator.simulate_contextual")
    if not isinstance(env, Environment):
        raise DpledgerError(f"not an environment: {env!r}")
    if sampler not in ("float", "exact"):
        raise DpledgerError(f"sampler must be 'float' or 'exact', got {sampler!r}")
    check_rng_source(rng, sampler == "exact" or bool(env.lattice_bits))
    if sampler == "exact" and not env.lattice_bits:
        from dpledger.mechanisms.noise import LATTICE_BITS
        env = env.with_lattice(LATTICE_BITS)
    if env.lattice_bits and not policy.exact_sampler:
        from dpledger.policies.registry import exact_sampler_policies
        raise DpledgerError(f"policy {policy.name!r} has no exact-sampler form; the exact "
                            f"sampler runs {', '.join(exact_sampler_policies())}")
    bind_sampler(policy, env.lattice_bits)
    T = validate_horizon(horizon, env.n_arms)
    if env.table.size and env.table.shape[0] < T:
        raise DpledgerError(f"the reward table has {counted(env.table.shape[0], 'row')}, "
                            "fewer than the "
                            f"horizon {T}")
    n_runs = count_runs(runs, run_indices, seed)
    if stop_at is not None and not 1 <= int(stop_at) <= T:
        raise DpledgerError(f"stop_at must lie in [1, {T}], got {stop_at!r}")
    workers = max(1, int(workers))
    # before the list of run indices exists: 1e9 runs would fill the memory building it
    check_memory(policy, env, T, n_runs, workers, keep_actions)
    run_indices = check_runs(runs, run_indices, seed)
    workers = min(workers, len(run_indices))     # a worker holds at least one run
    # progress in rounds (``progress.rounds``): a thread reads the chunks' sinks (or, for runs
    # without a sink, their two progress slots); without it, sinks are private to the chunks
    rounds = getattr(progress, "rounds", None)
    K = env.n_arms
    width = sink_width(K) if _sunk(policy, keep_actions) else 2
    if workers == 1 or len(run_indices) == 1:
        sink = np.zeros((6, width), dtype=np.int64) if rounds is not None else None

        def work():
            return run_chunk(policy, env, T, seed, run_indices, stop_at, capture, keep_actions,
                             progress, sink, rng)
        with _Poller(rounds, lambda: rounds_done(sink)):
            # compiled kernels run off the main thread, which hears Ctrl-C and stops them at
            # their next flush (dpledger.interrupt); a Python policy hears it itself
            parts = [in_worker_thread(work) if isinstance(policy, KernelPolicy) else work()]
    else:
        import multiprocessing
        chunks = [run_indices[k::workers] for k in range(workers) if run_indices[k::workers]]
        shape = (len(chunks), 6, width) if rounds is not None else (0, 6, 2)
        raw = multiprocessing.RawArray("q", int(np.prod(shape)))   # zeroed, shared with workers
        sinks = np.frombuffer(raw, dtype=np.int64).reshape(shape)
        with _Poller(rounds, lambda: sum(rounds_done(s) for s in sinks)), \
                interruptible_pool("process", len(chunks), _attach_sinks, (raw, shape)) as pool:
            futs = [pool.submit(run_chunk, policy, env, T, seed, c, stop_at, capture,
                                keep_actions, None, k if rounds is not None else None, rng)
                    for k, c in enumerate(chunks)]
            parts = []
            for f in futs:
                parts.append(f.result())
                if progress is not None:
                    progress(len(parts[-1]["indices"]))
    res = assemble(policy, env, T, seed, parts, keep_actions)
    res.rng = rng
    return res


def assemble(policy: Policy, env: Environment, T: int, seed: int, parts: Sequence[dict],
             keep_actions: bool = False) -> SimulationResult:
    """Join :func:`run_chunk` outputs in run-index order (independent of how runs were split)."""
    by_run: dict[int, tuple[dict, int]] = {}
    for part in parts:
        for j, i in enumerate(part["indices"]):
            if i in by_run:
                raise DpledgerError(f"run {i} appears in two chunks")
            by_run[i] = (part, j)
    order = sorted(by_run)
    if len(parts) == 1:     # a chunk's ledger interns the policy's releases first: as merged
        ledger = parts[0]["ledger"]
    else:
        ledger = RewardLedger()
        for r in kernel_releases(policy, env, T, env.n_arms):
            ledger.intern(r)
        for part in sorted(parts, key=lambda p: min(p["indices"])):
            ledger = ledger.merge(part["ledger"])
    return SimulationResult(
        policy=policy, env=env, horizon=T, seed=int(seed), run_indices=order,
        points=checkpoints(T),
        regret=np.array([by_run[i][0]["regret"][by_run[i][1]] for i in order]),
        ledger=ledger,
        noise_draws=[by_run[i][0]["draws"][by_run[i][1]] for i in order],
        rounds_played=[by_run[i][0]["played"][by_run[i][1]] for i in order],
        actions=[by_run[i][0]["actions"][by_run[i][1]] for i in order] if keep_actions else None,
        captured=[by_run[i][0]["captured"][by_run[i][1]] for i in order])


_SEGMENT_BYTES = 5 * 8          # one column of a segment table
_MEMORY_SLACK = 256 << 20       # interpreter, numba, compiled kernels, ledger and report
                                # (peak RSS of `run ucb1 --horizon 1e8 --runs 1`: 174 MB)
_RUN_OVERHEAD = 4096            # what a run keeps besides its records (measured, peak RSS
                                # over runs: 6.5 kB per run for `run ucb1 --horizon 10`, K = 5,
                                # 10 records; 43 kB for adap-ucb at T = 1e4, 167 records)
_RECORD_BYTES = 256             # a ledger row or segment kept to the end, with the report's
                                # accounting temporaries (measured as above)


def memory_estimate(policy: Policy, env: Environment, T: int, runs: int, workers: int = 1,
                    keep_actions: bool = False) -> dict:
    """Bytes a simulation needs at least, before it starts, as {"bytes", "per_run", "held",
    "concurrent", "play"}: ``concurrent`` runs at once (one per worker process) each holding
    ``per_run`` bytes while it plays, plus ``held`` bytes kept for all runs to the end.

    Per run: the kernel's row buffer (5 int64 per row of ``row_capacity``) and its play — an
    action sink (chunk + initial table, O(1) in T; ``play = "sink"``), a segment buffer
    (event-driven kernels, O(events); ``"segments"``), or the int64 action array of T rounds
    (``"actions"``: keep_actions, policies without a kernel).  Held, per run: the regret
    checkpoints (twice: the per-chunk rows and the joined array), the run's bookkeeping
    (:data:`_RUN_OVERHEAD`), its ledger records (rows up to ``row_capacity``, segments up to
    ``segment_capacity`` or one per arm, :data:`_RECORD_BYTES` each), and with keep_actions 2
    bytes per round.  Segments of a sink beyond one per arm are not in the estimate (they are
    O(switches of arm), unknown in advance; a sink that needs more columns checks again before
    replaying, :func:`_run_sunk`): the estimate is a lower bound."""
    K = env.n_arms
    T = int(T)
    per_run = 0
    if isinstance(policy, KernelPolicy):
        per_run += _SEGMENT_BYTES * max(int(policy.row_capacity(T, K)), 1)
    if isinstance(policy, KernelPolicy) and not keep_actions and policy.emits_segments():
        play = "segments"
        per_run += 4 * 8 * max(int(policy.segment_capacity(T, K)), 1)
    elif (isinstance(policy, KernelPolicy) and not keep_actions
          and getattr(type(policy), "action_sink", False)):
        play = "sink"
        per_run += 6 * 8 * sink_width(K)
    else:
        play = "actions"
        per_run += 8 * T + (2 * T if keep_actions else 0)
    records = K                             # at least one segment per arm
    if isinstance(policy, KernelPolicy):
        records += int(policy.row_capacity(T, K))
        if policy.emits_segments():
            records += int(policy.segment_capacity(T, K))
    held_per_run = (2 * 8 * len(_checkpoints(T, 200)) + _RUN_OVERHEAD + _RECORD_BYTES * records
                    + (2 * T if keep_actions else 0))
    held = int(runs) * held_per_run
    concurrent = max(1, min(int(workers), int(runs)))
    return {"bytes": _MEMORY_SLACK + concurrent * per_run + held, "per_run": per_run,
            "held": held, "held_per_run": held_per_run, "concurrent": concurrent, "play": play}


def check_memory(policy: Policy, env: Environment, T: int, runs: int, workers: int = 1,
                 keep_actions: bool = False, available: int | None = None) -> dict:
    """:func:`memory_estimate`, refused (DpledgerError, exit 2 on the CLI) with the estimate and
    what avoids it when it exceeds the memory available (``available``, default
    :func:`available_memory`; unknown → no refusal)."""
    est = memory_estimate(policy, env, T, runs, workers, keep_actions)
    avail = available_memory() if available is None else int(available)
    if avail is None or est["bytes"] <= avail:
        return est
    if keep_actions:
        fix = "do not keep the actions (keep_actions=False)"
    elif est["concurrent"] > 1 and est["concurrent"] * est["per_run"] > est["held"]:
        fix = "use fewer --workers (each worker holds a run)"
    elif est["held"] > est["concurrent"] * est["per_run"]:
        fits = largest_fitting(est["held_per_run"],
                               est["bytes"] - est["held"], avail)
        fix = (f"use fewer --runs (each run keeps about {fmt_bytes(est['held_per_run'])}; "
               f"at most {fits} fit)")
    else:
        fix = "use a smaller --horizon"
        if est["play"] == "actions":
            fix += (f" (policy {policy.name!r} returns one action per round; kernel policies "
                    "keep no per-round array)")
    raise DpledgerError(
        f"this simulation needs about {fmt_bytes(est['bytes'])} "
        f"({counted(est['concurrent'], 'run')} at once of {fmt_bytes(est['per_run'])} each, "
        f"{fmt_bytes(est['held'])} kept), more than "
        f"the {fmt_bytes(avail)} available; {fix}")


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def default_workers() -> int:
    """Worker processes of ``run`` by default: at most 2 (each holds a chunk's arrays)."""
    return min(2, available_cpus())


__all__ = ["simulate", "SimulationResult", "run_generator", "checkpoints", "default_workers",
           "available_cpus",
           "memory_estimate", "check_memory", "available_memory"]
