"""Action sinks: per-round kernels whose play is digested as it is made (issue 13, "Long work").

A per-round kernel writes the arm of round t with ``put_action(actions, t, a)``.  Given a plain
int64 array (the per-round reference, the audits' compiled trial loop, ``keep_actions``) that is
``actions[t − 1] = a``.  Given a *sink* — the (6, W) int64 array :func:`make_sink` builds: rows
0–4 the run's segment table (capacity W columns), row 5 the progress slots, the state of the
pass and, in its last :data:`SINK_CHUNK` columns, a ring buffer — the arm goes to the ring
buffer, and every time it is full (one predictable branch per round) :func:`_flush` digests it
into the table and publishes the rounds done in ``sink[5, SLOT_DONE]``.  (One array, not a
tuple of arrays: with a tuple the UCB1 kernel measured 2× slower, with one 2-D array as fast
as with the plain action array.)  So a run of T rounds holds
O(chunk + segments) memory, not O(T), and a thread can read the rounds done while the kernel
runs (the kernels are compiled ``nogil=True`` so that the thread gets the GIL).

The digest is the greedy per-arm pass that defines the segment table (arm, first_index,
first_round, stride, length) — per-arm arithmetic runs of the rounds each arm was played, a run
closed by the first pull of its arm that does not continue it, runs listed in the order they
close, then the runs still open in arm order (:func:`digest` / :func:`close_open`; the
simulator's ``_segments`` is the same two calls on a whole action array).  Feeding the actions
chunk by chunk gives the table the whole array gives, bit for bit: the pass carries its whole
state (per arm: first index, first round, stride, length, pulls) in ``state``.

A sink's table has a fixed capacity (a kernel cannot hand a grown array back).  When the play
needs more columns, the pass goes on counting the columns it would write without storing them;
:func:`finish_sink` then raises :class:`SinkOverflow` with the exact count, and the simulator
replays the run (same Generator seed, so the same play) into a table of that size.  No column
is silently dropped.

``put_action`` is compiled into every kernel that calls it.  numba's on-disk cache of a kernel
is keyed on the kernel's own file only; :mod:`dpledger._jit` adds a hash of every compiled
module of the package, so changing the sink's layout here recompiles its callers.  A stale
kernel would still be caught, not silent: :func:`finish_sink` checks that the rounds digested
account for the rounds played.
"""
from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from dpledger._jit import njit
from dpledger.interrupt import Stopped, watch

SINK_CHUNK = 1 << 15            # rounds per digest (a power of two: the flush test is a mask)
SINK_COLUMNS = 1 << 16          # initial segment-table capacity of a sink (3 MB in all)
_MASK = SINK_CHUNK - 1
SLOT_DONE = 0                   # row 5: rounds done, those of the finished runs included (one
                                # slot, written whole, so a reader sees it only grow)
SLOT_FINISHED = 1               # row 5: rounds of the runs finished before (the caller's)
_ST = 2                         # row 5: the state of the pass from here on; the ring buffer is
                                # the last SINK_CHUNK columns
_HEAD = 4                       # state: [0] columns (written or counted), [1] K,
                                # [2] rounds digested, [3] the stop slot; then 5 blocks of K
SLOT_STOP = _ST + 3             # row 5: nonzero = stop at the next flush (Ctrl-C, see
                                # dpledger.interrupt); kept when a sink is reused


class SinkOverflow(Exception):
    """The sink's table was too small: ``columns`` is the exact number the play needs."""

    def __init__(self, columns: int):
        super().__init__(f"segment table needs {columns} columns")
        self.columns = int(columns)


def new_state(K: int) -> np.ndarray:
    """Fresh state of the greedy pass for K arms (see the module docstring)."""
    st = np.zeros(_HEAD + 5 * K, dtype=np.int64)
    st[1] = K
    return st


def sink_width(K: int, columns: int | None = None) -> int:
    """Columns of a sink for K arms holding a table of at least ``columns`` columns (default
    :data:`SINK_COLUMNS`)."""
    return max(int(SINK_COLUMNS if columns is None else columns),
               _ST + _HEAD + 5 * int(K) + SINK_CHUNK)


def make_sink(K: int, columns: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """A fresh sink for one run of a K-armed kernel (see the module docstring).  ``out``: reuse
    this (6, W) int64 array (e.g. in memory shared with a progress reader) if it is wide
    enough — its state is reset, its ``SLOT_FINISHED`` kept."""
    W = sink_width(K, columns)
    if out is not None and out.shape[0] == 6 and out.shape[1] >= W:
        out[5, SLOT_DONE] = out[5, SLOT_FINISHED]
        stop = out[5, SLOT_STOP]
        out[5, _ST:_ST + _HEAD + 5 * K] = 0
        out[5, _ST + 1] = K
        out[5, SLOT_STOP] = stop
        watch(out, (5, SLOT_STOP))
        return out
    sink = np.zeros((6, W), dtype=np.int64)
    sink[5, _ST + 1] = K
    watch(sink, (5, SLOT_STOP))
    return sink


@njit(cache=True, nogil=True)
def digest(actions, lo, hi, first_round, st, table, grow):
    """The greedy pass over ``actions[lo:hi]`` (rounds first_round, first_round + 1, …),
    continuing from ``st``; closed runs go to ``table`` (doubled when full if ``grow``, else
    only counted in ``st[0]``).  Returns the table (a new array if it grew)."""
    K = st[1]
    n = st[0]
    fi = st[_HEAD:_HEAD + K]                # views of the per-arm state blocks
    fr = st[_HEAD + K:_HEAD + 2 * K]
    sd = st[_HEAD + 2 * K:_HEAD + 3 * K]
    ln = st[_HEAD + 3 * K:_HEAD + 4 * K]
    ct = st[_HEAD + 4 * K:_HEAD + 5 * K]
    for i in range(lo, hi):
        a = actions[i]
        t = first_round + (i - lo)
        if ln[a] == 0:
            fi[a], fr[a], sd[a], ln[a] = ct[a], t, 1, 1
        elif ln[a] == 1:
            sd[a] = t - fr[a]
            ln[a] = 2
        elif t == fr[a] + sd[a] * ln[a]:
            ln[a] += 1
        else:
            table = _store(table, n, grow, a, fi[a], fr[a], sd[a], ln[a])
            n += 1
            fi[a], fr[a], sd[a], ln[a] = ct[a], t, 1, 1
        ct[a] += 1
    st[0] = n
    st[2] += hi - lo
    return table


@njit(cache=True, nogil=True)
def close_open(st, table, grow):
    """Close the runs still open, in arm order (the end of the pass); returns the table."""
    K = st[1]
    n = st[0]
    for a in range(K):
        if st[_HEAD + 3 * K + a] > 0:
            table = _store(table, n, grow, a, st[_HEAD + a], st[_HEAD + K + a],
                           st[_HEAD + 2 * K + a], st[_HEAD + 3 * K + a])
            n += 1
            st[_HEAD + 3 * K + a] = 0
    st[0] = n
    return table


@njit(cache=True, inline="always")
def _store(table, n, grow, a, first_idx, first_rnd, stride, length):
    if n >= table.shape[1]:
        if not grow:
            return table                    # counted in st[0] by the caller, not stored
        bigger = np.zeros((5, 2 * table.shape[1]), dtype=np.int64)
        bigger[:, :n] = table[:, :n]
        table = bigger
    table[0, n], table[1, n], table[2, n], table[3, n], table[4, n] = \
        a, first_idx, first_rnd, stride, length
    return table


@njit(cache=True)
def _flush(sink, t):
    """Digest the full ring buffer (rounds t − chunk + 1 … t) and publish t; stop (raise
    :class:`~dpledger.interrupt.Stopped`) when the stop slot is set — every 2^15 rounds, a few
    milliseconds, so Ctrl-C is heard inside a long run."""
    if sink[5, SLOT_STOP] != 0:
        raise Stopped()
    W = sink.shape[1]
    digest(sink[5, W - SINK_CHUNK:], 0, SINK_CHUNK, t - SINK_CHUNK + 1,
           sink[5, _ST:W - SINK_CHUNK], sink[:5], False)
    sink[5, SLOT_DONE] = sink[5, SLOT_FINISHED] + t


def put_action(actions, t, a):
    """Record arm ``a`` for round ``t`` (1-based): ``actions[t − 1] = a`` for an action array,
    the chunked digest for a sink (compiled code dispatches on the array's dimension)."""
    actions[t - 1] = a


@overload(put_action, inline="always")
def _put_action(actions, t, a):
    if isinstance(actions, types.Array) and actions.ndim == 1:
        def impl(actions, t, a):
            actions[t - 1] = a
        return impl
    if isinstance(actions, types.Array) and actions.ndim == 2:
        def impl_sink(actions, t, a):
            actions[5, actions.shape[1] - SINK_CHUNK + ((t - 1) & _MASK)] = a
            if (t & _MASK) == 0:
                _flush(actions, t)
        return impl_sink
    return None


def rounds_done(sink: np.ndarray) -> int:
    """Rounds of the finished runs plus those published by the running one."""
    return int(sink[5, SLOT_DONE])


def finish_sink(sink: np.ndarray, played: int) -> np.ndarray:
    """After the kernel played ``played`` rounds: digest the rest of the buffer, close the open
    runs, and return (a copy of) the segment table (5, n); :class:`SinkOverflow` if it did not
    fit."""
    W = sink.shape[1]
    st = sink[5, _ST:W - SINK_CHUNK]
    done = int(st[2])
    rest = int(played) - done
    if not 0 <= rest <= SINK_CHUNK:
        raise AssertionError(f"sink: {played} rounds played, {done} digested")
    digest(sink[5, W - SINK_CHUNK:], 0, rest, done + 1, st, sink[:5], False)
    close_open(st, sink[:5], False)
    sink[5, SLOT_DONE] = sink[5, SLOT_FINISHED] + played
    n = int(st[0])
    if n > sink.shape[1]:
        raise SinkOverflow(n)
    return sink[:5, :n].copy()


__all__ = ["put_action", "make_sink", "finish_sink", "SinkOverflow", "digest", "close_open",
           "new_state", "rounds_done", "sink_width", "SINK_CHUNK", "SINK_COLUMNS", "SLOT_DONE",
           "SLOT_FINISHED", "SLOT_STOP"]
