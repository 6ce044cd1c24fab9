"""Compiled passes for :meth:`RewardLedger.piece_totals` on the dense coordinate (every reward
its own piece), where a per-pull Gaussian ledger has tens of millions of rewards.

The numpy form of the same sums builds about ten temporaries the size of the reward count
(global indices, bincounts, a cumulative sum, per-piece stream ids); fresh memory is what costs
at that size, so these passes write each output once.  Imported lazily: the accounting package
itself does not need numba.
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit


@njit(cache=True)
def add_gaussian_diff(diff, keys, offsets, run, arm, start, stop, count, mu2):
    """Add Gaussian rows (one chunk) to the difference array of per-reward Σ count·μ² on the
    dense coordinate, in row order — the order ``np.bincount`` adds its weights, so over the
    chunks in order the sums are the same floats as on the concatenated columns."""
    for i in range(run.shape[0]):
        base = offsets[np.searchsorted(keys, run[i] * (1 << 20) + arm[i])]
        w = count[i] * mu2[i]
        diff[base + start[i]] += w
        diff[base + stop[i]] -= w


@njit(cache=True)
def clamped_running_sum(diff, n_total):
    """The running sum of ``diff`` with each prefix clamped at 0 (the sum itself is not)."""
    out = np.empty(n_total)
    acc = 0.0
    for j in range(n_total):
        acc += diff[j]
        out[j] = acc if acc > 0.0 else 0.0
    return out


@njit(cache=True)
def _fill_dense_coordinates(keys, offsets, run, arm, start):
    for s in range(keys.shape[0]):
        r, a = keys[s] >> 20, keys[s] & ((1 << 20) - 1)
        for i in range(offsets[s + 1] - offsets[s]):
            j = offsets[s] + i
            run[j] = r
            arm[j] = a
            start[j] = i


def dense_piece_coordinates(keys, offsets):
    """(run, arm, start, stop) of every piece when each reward is its own piece; run and arm
    as int32 when they fit (every byte written here is a page fault)."""
    n_total = int(offsets[-1])
    small = keys.size == 0 or int(keys.max()) >> 20 < 2 ** 31
    run = np.empty(n_total, np.int32 if small else np.int64)
    arm = np.empty(n_total, np.int32)
    start = np.empty(n_total, np.int64)
    _fill_dense_coordinates(keys, offsets, run, arm, start)
    return run, arm, start, start + 1


@njit(cache=True)
def max_stop_per_key(known, run, arm, stops):
    """Largest stop of the rows of each stream ``known[s]`` (sorted run·2^20 + arm keys that
    include every row's); 0 for streams without rows."""
    out = np.zeros(known.shape[0], np.int64)
    for i in range(run.shape[0]):
        s = np.searchsorted(known, run[i] * (1 << 20) + arm[i])
        if stops[i] > out[s]:
            out[s] = stops[i]
    return out
