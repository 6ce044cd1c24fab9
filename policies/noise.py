"""Noise draws for compiled policy kernels, each writing its ledger row in the same call.

SPEC §5: noise is drawn only through helpers that also write the ledger row.  A kernel's row
buffer is an int64 array of shape (5, capacity) with columns (arm, start, stop, release_id,
count); ``n`` is the next free row and the helpers return the noise, the caller advances ``n``.
Release ids index the policy's interned release table (``Policy.releases``).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def write_row(rows, n, arm, start, stop, release_id, count):
    rows[0, n] = arm
    rows[1, n] = start
    rows[2, n] = stop
    rows[3, n] = release_id
    rows[4, n] = count


@njit(cache=True)
def laplace_noise(rng, scale, rows, n, arm, start, stop, release_id):
    """Lap(scale) for a statistic over observations [start, stop) of ``arm``; writes row n."""
    write_row(rows, n, arm, start, stop, release_id, 1)
    return rng.laplace(0.0, scale)


@njit(cache=True)
def gaussian_noise(rng, sigma, rows, n, arm, start, stop, release_id):
    """N(0, sigma²) for a statistic over observations [start, stop) of ``arm``; writes row n."""
    write_row(rows, n, arm, start, stop, release_id, 1)
    return rng.normal(0.0, sigma)


def new_rows(capacity: int) -> np.ndarray:
    return np.zeros((5, max(int(capacity), 1)), dtype=np.int64)
