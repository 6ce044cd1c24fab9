"""Draw noise and write its ledger row in the same call (SPEC §5: no noise without a row).

Two forms, one rule:

* compiled (``@njit``): :func:`laplace_row` / :func:`gaussian_row` take a numpy ``Generator``
  and the six int64 columns of a :class:`~dpledger.accounting.ledger.RowBuffer` (pass
  ``buf.columns()``, a tuple numba accepts), write row ``n`` and return the noise; the caller
  advances ``n`` and later calls ``ledger.extend(buf, n)``.  A full buffer is an error, never a
  silently dropped row.
* Python: :func:`draw_and_record` interns the release, adds the ledger row, then asks the
  sampler (float or exact) for the draw.

Ranges are half-open observation indices ``[start, stop)`` of one arm's stream.
"""
from __future__ import annotations

from numba import njit

from dpledger.accounting.ledger import RowBuffer, RewardLedger
from dpledger.accounting.releases import Release
from dpledger.errors import DpledgerError, check_count


@njit(cache=True, inline="always")
def write_row(cols, n, run, arm, start, stop, release_id, count):
    """Write row ``n`` of RowBuffer columns (run, arm, start, stop, release_id, count)."""
    if n >= cols[0].shape[0]:
        raise IndexError("ledger row buffer is full")
    cols[0][n] = run
    cols[1][n] = arm
    cols[2][n] = start
    cols[3][n] = stop
    cols[4][n] = release_id
    cols[5][n] = count


@njit(cache=True, inline="always")
def laplace_row(rng, scale, cols, n, run, arm, start, stop, release_id):
    """Lap(scale) for a statistic over observations [start, stop) of ``arm``; writes row ``n``
    first (so a full buffer fails before any noise exists)."""
    write_row(cols, n, run, arm, start, stop, release_id, 1)
    return rng.laplace(0.0, scale)


@njit(cache=True, inline="always")
def gaussian_row(rng, sigma, cols, n, run, arm, start, stop, release_id):
    """N(0, σ²) for a statistic over observations [start, stop) of ``arm``; writes row ``n``."""
    write_row(cols, n, run, arm, start, stop, release_id, 1)
    return rng.normal(0.0, sigma)


# -- the kernel layout ------------------------------------------------------------------------
# Policy kernels run one run at a time and write a (5, capacity) int64 block — columns arm,
# start, stop, release_id, count — that the simulator tags with the run index.  Same rule as
# above: the row is written first, then the noise is drawn; inlined so a draw costs no call.

@njit(cache=True, inline="always")
def write_kernel_row(rows, n, arm, start, stop, release_id, count):
    """Write row ``n`` of a kernel's (5, capacity) row block."""
    if n >= rows.shape[1]:
        raise IndexError("ledger row buffer is full")
    rows[0, n] = arm
    rows[1, n] = start
    rows[2, n] = stop
    rows[3, n] = release_id
    rows[4, n] = count


@njit(cache=True, inline="always")
def laplace_noise(rng, scale, rows, n, arm, start, stop, release_id):
    """Lap(scale) for a statistic over observations [start, stop) of ``arm``; writes row n."""
    write_kernel_row(rows, n, arm, start, stop, release_id, 1)
    return rng.laplace(0.0, scale)


@njit(cache=True, inline="always")
def gaussian_noise(rng, sigma, rows, n, arm, start, stop, release_id):
    """N(0, σ²) for a statistic over observations [start, stop) of ``arm``; writes row n."""
    write_kernel_row(rows, n, arm, start, stop, release_id, 1)
    return rng.normal(0.0, sigma)


def new_kernel_rows(capacity: int):
    import numpy as np
    return np.zeros((5, max(int(capacity), 1)), dtype=np.int64)


def new_buffer(capacity: int) -> RowBuffer:
    return RowBuffer(check_count("row buffer capacity", capacity))


def draw_and_record(sampler, release: Release, ledger: RewardLedger, run: int, arm: int,
                    start: int, stop: int):
    """One draw of ``release``'s noise from ``sampler``, recorded in ``ledger`` as touching
    observations ``[start, stop)`` of (run, arm).  The row is written first: a bad range raises
    before any noise is drawn."""
    if not isinstance(ledger, RewardLedger):
        raise DpledgerError(f"a RewardLedger is needed to record releases, got {type(ledger).__name__}")
    ledger.add(run, arm, start, stop, release)
    return sampler.noise(release)
