"""Compiled passes over posterior-read records (:mod:`dpledger.accounting.posterior_reads`).

Each pass walks one stream's pulls backwards through its index → round segments, so it needs
no per-reward memory.  Imported lazily: the accounting package itself does not need numba.
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import posterior_reads as _pr
from dpledger.accounting.releases import lattice_sigma

# the accounting's own formulas, compiled (one source each)
_lattice_sigma = njit(cache=True, inline="always")(lattice_sigma)
_mu2_of = njit(cache=True, inline="always")(_pr.posterior_read_mu2)


@njit(cache=True)
def lattice_sigma_k(k, c, bits):
    """:func:`~dpledger.accounting.posterior_reads.posterior_read_lattice_sigma` compiled (the
    same operations; tests hold the two equal): s_k of a draw over k rewards, lattice units.
    The TS-Gaussian kernels size their exact draws with this very function."""
    return np.int64(_lattice_sigma(np.sqrt(c * (k + 1.0)), bits))


@njit(cache=True, inline="always")
def _mu2(k, c, bits):
    """:func:`~dpledger.accounting.posterior_reads.posterior_read_weight`, compiled (the same
    operations: μ² for bits = 0, the rounded-up 2ρ_k of the discrete Gaussian otherwise)."""
    if bits == 0:
        return _mu2_of(k, c)
    s = float(lattice_sigma_k(k, c, bits))
    return 4.0 ** bits / (s * s) * (1.0 + 2.0 ** -50)


@njit(cache=True, inline="always")
def _round_of(fi, fr, st, s, idx):
    return fr[s] + st[s] * (idx - fi[s])


@njit(cache=True)
def suffix_mu2(fi, fr, st, n, first, last, c, bits, queries, out):
    """Add μ²(i) of the stream's rewards i = ``queries`` (ascending, in [0, n)) to ``out``.

    ``fi, fr, st``: the stream's segments (first index, first round, stride) in index order,
    covering indices 0 … n−1.  Backward pass k = n … 1 with Neumaier summation, one segment
    at a time (the pull rounds inside a segment are an arithmetic run)."""
    acc = 0.0
    comp = 0.0
    qi = queries.shape[0] - 1
    if qi < 0 or n <= 0:
        return
    hi_round = last                      # q_n = ∞: the window's end bounds the last stretch
    k = n
    for s in range(fi.shape[0] - 1, -1, -1):
        f0 = fi[s]
        if f0 >= k:
            continue
        r0 = fr[s]
        step = st[s]
        # indices idx = k−1 … f0 of this segment; q_lo = round of idx
        for idx in range(k - 1, f0 - 1, -1):
            q_lo = r0 + step * (idx - f0)
            lo = q_lo + 1 if q_lo + 1 > first else first
            hi = hi_round if hi_round < last else last
            cnt = hi - lo + 1
            if cnt > 0:
                term = cnt * _mu2(idx + 1, c, bits)
                t = acc + term
                if abs(acc) >= abs(term):
                    comp += (acc - t) + term
                else:
                    comp += (term - t) + acc
                acc = t
            while qi >= 0 and queries[qi] == idx:
                out[qi] += acc + comp
                qi -= 1
            if qi < 0:
                return
            hi_round = q_lo
        k = f0


@njit(cache=True)
def read_counts(fi, fr, st, n, first, last, out_k, out_count):
    """The stream's draws per prefix length: fills (k, count_k) for every k with count_k > 0,
    k ascending; returns how many."""
    m = 0
    s = 0
    for k in range(1, n + 1):
        idx = k - 1
        while s + 1 < fi.shape[0] and fi[s + 1] <= idx:
            s += 1
        lo = _round_of(fi, fr, st, s, idx) + 1
        if k < n:
            s2 = s
            while s2 + 1 < fi.shape[0] and fi[s2 + 1] <= k:
                s2 += 1
            hi = _round_of(fi, fr, st, s2, k)
        else:
            hi = last
        if lo < first:
            lo = first
        if hi > last:
            hi = last
        if hi >= lo:
            out_k[m] = k
            out_count[m] = hi - lo + 1
            m += 1
    return m


@njit(cache=True)
def suffix_mu2_many(fi, fr, st, seg_lo, seg_hi, n, first, last, c, bits, q_lo, q_hi, queries,
                    out):
    """:func:`suffix_mu2` for many records (``bits[r]`` > 0: discrete-Gaussian weights 2ρ_k,
    see :func:`~dpledger.accounting.posterior_reads.posterior_read_weight`): record r reads the stream whose segments are
    ``seg_lo[r] … seg_hi[r]−1`` (in index order) and answers ``queries[q_lo[r]:q_hi[r]]`` into
    the same slice of ``out``."""
    for r in range(seg_lo.shape[0]):
        if q_hi[r] > q_lo[r] and n[r] > 0:
            a, b = seg_lo[r], seg_hi[r]
            suffix_mu2(fi[a:b], fr[a:b], st[a:b], n[r], first[r], last[r], c[r], bits[r],
                       queries[q_lo[r]:q_hi[r]], out[q_lo[r]:q_hi[r]])
