"""Compiled passes for :meth:`RewardLedger.piece_totals` on the dense coordinate (every reward
its own piece), where a per-pull Gaussian ledger has tens of millions of rewards.

The numpy form of the same sums builds about ten temporaries the size of the reward count
(global indices, bincounts, a cumulative sum, per-piece stream ids); fresh memory is what costs
at that size, so these passes write each output once.  Imported lazily: the accounting package
itself does not need numba.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def dense_gaussian_mu2(keys, offsets, run, arm, start, stop, count, mu2, n_total):
    """Per-reward Σ count·μ² of Gaussian rows on the dense coordinate: a difference array added
    in row order (the order ``np.bincount`` adds its weights, so the sums are the same floats)
    and one running sum, each prefix clamped at 0 (the running sum itself is not)."""
    diff = np.zeros(n_total + 1)
    for i in range(run.shape[0]):
        base = offsets[np.searchsorted(keys, run[i] * (1 << 20) + arm[i])]
        w = count[i] * mu2[i]
        diff[base + start[i]] += w
        diff[base + stop[i]] -= w
    out = np.empty(n_total)
    acc = 0.0
    for j in range(n_total):
        acc += diff[j]
        out[j] = acc if acc > 0.0 else 0.0
    return out


@njit(cache=True)
def dense_piece_coordinates(keys, offsets):
    """(run, arm, start, stop) of every piece when each reward is its own piece."""
    n_total = offsets[-1]
    run = np.empty(n_total, np.int64)
    arm = np.empty(n_total, np.int64)
    start = np.empty(n_total, np.int64)
    for s in range(keys.shape[0]):
        r, a = keys[s] >> 20, keys[s] & ((1 << 20) - 1)
        for i in range(offsets[s + 1] - offsets[s]):
            j = offsets[s] + i
            run[j] = r
            arm[j] = a
            start[j] = i
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
