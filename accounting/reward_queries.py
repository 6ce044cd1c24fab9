"""Per-reward queries on a :class:`~dpledger.accounting.ledger.RewardLedger`
(docs/design.md#realized, docs/design.md#ledger): piece totals, signature groups, maximal
compositions, the worst reward.

The ledger module stores records and serialises them; everything here only *reads* a ledger
(its columns, ``expanded_rows``, ``streams``, the posterior reads' per-reward μ²) and folds it.
``RewardLedger``'s query methods (``piece_totals``, ``maximal_compositions``, ``worst_reward``,
…) delegate to the functions below.

**Pieces.**  A piece is a maximal range of one stream on which every record but the posterior
reads is constant (:class:`PieceTotals`).  Totals use difference arrays over the breakpoints of
each stream, so their cost grows with rows, not with rewards: exact integer counts per interned
release and a float64 Σμ² of the inline Gaussian rows.

**Ranking, then exact recomputation.**  The float keys (pure ε = Σ count·ε_i, GDP μ² =
Σ count·μ_i² + inline μ²) only *select*; every value that is reported is recomputed exactly (a
:class:`Composition` built from the piece's integer counts and its μ² summed by ``math.fsum``).
The selection is sound, never a cap: a piece is dropped only when its float key plus its error
bound is below another piece's float key minus that one's bound.  The bound of a key is
``mu2_abs_err + KEY_REL_TOL·|key|``: ``mu2_abs_err`` is the recursive-summation bound
γ_N·Σ|terms| of the inline μ² difference array (N the depth of any summation chain: rows per
breakpoint plus pieces, Higham 2002 Thm 4.4/eq. 4.4), and ``KEY_REL_TOL`` = 1e-12 (≈ 9000 ulps)
covers the rest — sums of ≤ a few hundred non-negative per-release terms, the compensated
posterior-read sums, and the σ ↔ μ² round trips inside :class:`Composition`.

**Maximal compositions, no cap.**  Reward B's composition is dominated by A's when A holds every
non-Gaussian release at least as often and at least B's Gaussian μ²; each accountant is monotone
under domination, so the realized maximum over every reward equals the maximum over the maximal
(undominated) compositions.  :func:`maximal_compositions` finds them all: a float Pareto filter
that drops only pieces dominated beyond their error bounds (large inputs pruned first against a
few members of a sample's front), one representative per equal (release counts, μ²), exact
compositions of the survivors, then the exact filter (:func:`exact_front`: the set
:func:`dpledger.accounting.composition.maximal_compositions` defines, in O(n·|front|)).

The realized block over these compositions, and an independent check of it against the ledger,
are in :mod:`dpledger.accounting.realized`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from dpledger.accounting.composition import Composition
from dpledger.accounting.gdp import mu_of_pure_epsilon
from dpledger.accounting.numerics import sqrt_up, sum_up
from dpledger.errors import DpledgerError
from dpledger.accounting.releases import (ApproxDpRelease, WishartRelease,
                                          DiscreteGaussianRelease, DiscreteGaussianTotal,
                                          GaussianRelease, NonPrivateRelease, RdpRelease,
                                          Release, ZcdpRelease)

if TYPE_CHECKING:       # pragma: no cover
    from dpledger.accounting.ledger import RewardLedger

KEY_REL_TOL = 1e-12
_U = 2.0 ** -53          # unit roundoff of float64


# -- result types ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RewardRef:
    run: int
    arm: int
    index: int
    round: int | None


@dataclass(frozen=True)
class WorstReward:
    """The worst-off reward (docs/design.md#certificate tie rules) and its exact composition."""

    reward: RewardRef
    composition: Composition
    key: float                  # pure ε, or GDP μ when the ledger holds Gaussian releases
    currency: str               # "pure", "gdp" or "zcdp" (discrete Gaussians: no GDP μ)


@dataclass
class PieceTotals:
    """Per-piece totals: a piece is a maximal range of one stream on which every record but
    the posterior reads is constant.  ``counts[i, p]`` counts interned release ``i``;
    ``mu2_inline[p]`` is Σμ² of the inline Gaussian rows plus ``mu2_reads[p]``, the posterior
    reads' μ² of the piece's *first* reward.  Posterior reads never increase along a stream, so
    ``mu2_inline[p]`` is the piece's maximum, attained at its first reward; without posterior
    reads every reward of a piece has the same composition (``varying`` is False).
    ``mu2_abs_err`` bounds |float − exact| of the inline rows' part of ``mu2_inline`` (the
    recursive-summation bound of its difference array; 0 without inline Gaussian rows)."""

    run: np.ndarray
    arm: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    counts: np.ndarray
    mu2_inline: np.ndarray
    mu2_reads: np.ndarray | None = None
    mu2_abs_err: float = 0.0

    @property
    def varying(self) -> bool:
        return self.mu2_reads is not None and bool(np.any(self.mu2_reads > 0))

    def select(self, keep: np.ndarray) -> "PieceTotals":
        return PieceTotals(self.run[keep], self.arm[keep], self.start[keep], self.stop[keep],
                           self.counts[:, keep], self.mu2_inline[keep],
                           None if self.mu2_reads is None else self.mu2_reads[keep],
                           self.mu2_abs_err)


def column_groups(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Group ids of the columns of ``keys`` (k, N) — equal columns share an id, ids ordered
    like the sorted columns — and the number of groups.  A lexsort: ``np.unique(axis=…)``
    sorts a void view and took 7 s for 2 × 2e6 floats (this takes 0.3 s)."""
    n = keys.shape[1]
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    if keys.shape[0] > 1 and bool(np.all(keys[0] == keys[0, 0])):
        return column_groups(keys[1:])          # a constant first key: sort the rest only
    order = np.lexsort(keys[::-1]) if keys.shape[0] > 1 else np.argsort(keys[0], kind="stable")
    sk = keys[:, order]
    new = np.ones(n, dtype=bool)
    new[1:] = np.any(sk[:, 1:] != sk[:, :-1], axis=0)
    ids_sorted = np.cumsum(new) - 1
    ids = np.empty(n, dtype=np.int64)
    ids[order] = ids_sorted
    return ids, int(ids_sorted[-1]) + 1


def signature_groups(pt: PieceTotals, releases: Sequence[Release] | None = None) -> np.ndarray:
    """Group id per piece by its release counts (inline Gaussian μ² aside); with the ledger's
    ``releases``, interned releases of one normal form count as one (as in a
    :class:`Composition`), so equal groups are equal compositions."""
    counts = pt.counts if releases is None else _form_counts(pt.counts, releases)
    if counts.shape[0] == 0:
        return np.zeros(pt.start.size, dtype=np.int64)
    return column_groups(counts)[0]


def _form_counts(counts: np.ndarray, releases: Sequence[Release]) -> np.ndarray:
    """``counts`` (ids × pieces) with the rows of interned releases of one normal form added."""
    from dpledger.accounting.composition import canonical
    forms: dict[tuple, int] = {}
    form = np.array([forms.setdefault(canonical(r).normal_form(), len(forms)) for r in releases],
                    dtype=np.int64)
    if len(forms) == len(releases):
        return counts
    out = np.zeros((len(forms), counts.shape[1]), dtype=np.int64)
    np.add.at(out, form, counts)
    return out


def summation_bound(n_terms_depth: int, abs_sum: float) -> float:
    """γ_N·Σ|x| (Higham 2002, eq. 3.8 and Thm 4.4), N = the depth of the summation, inflated by
    1 % for the rounding of the bound itself; 0 for no terms."""
    if abs_sum == 0.0:
        return 0.0
    nu = n_terms_depth * _U
    if nu >= 0.5:
        return math.inf
    return 1.01 * nu / (1.0 - nu) * abs_sum


# -- piece totals ------------------------------------------------------------------------------
def piece_totals(ledger: "RewardLedger") -> PieceTotals:
    """Totals on the compressed coordinate (see module docstring); O(rows log rows).
    Memoised on the ledger until it changes (a report asks for them five times)."""
    versions = ledger.storage_versions()
    streams = ledger.streams()
    cached = getattr(ledger, "_piece_cache", None)
    if cached is not None and cached[0] == versions and cached[1] == streams:
        return cached[2]
    out = _piece_totals(ledger, streams)
    if ledger.n_posterior_reads():
        out = _with_reads(ledger, out)
    ledger._piece_cache = (versions, streams, out)
    return out


def _piece_totals(ledger: "RewardLedger", streams) -> PieceTotals:
    keys = np.array([r * (1 << 20) + a for r, a in streams], dtype=np.int64)
    lengths = np.array(list(streams.values()), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rows = ledger.expanded_rows()
    gauss_parts = ledger.gaussian_row_parts()
    n_gauss = sum(p["run"].size for p in gauss_parts)

    def glob(table, col):
        k = table["run"] * (1 << 20) + table["arm"]
        pos = np.searchsorted(keys, k)
        return offsets[pos] + table[col]

    n_total = int(offsets[-1])
    n_break = 2 * (rows["run"].size + n_gauss) + offsets.size
    dense = n_total <= 4 * n_break
    # the compressed path needs the Gaussian columns joined; the dense one reads the parts
    gauss = ledger.gaussian_rows if not dense else None
    if dense:   # every reward its own piece: no sort needed
        bp = np.arange(n_total + 1, dtype=np.int64)

        def piece(t, col):
            return glob(t, col)
    else:       # compress to the breakpoints of each stream
        parts = [offsets]
        for t in (rows, gauss):
            if t["run"].size:
                parts += [glob(t, "start"), glob(t, "stop")]
        bp = np.unique(np.concatenate(parts))

        def piece(t, col):
            return np.searchsorted(bp, glob(t, col))
    n_pieces = max(bp.size - 1, 0)
    n_ids = len(ledger.releases)
    counts = np.zeros((n_ids, n_pieces), dtype=np.int64)
    if rows["run"].size and n_pieces:
        ps, pe = piece(rows, "start"), piece(rows, "stop")
        size = n_ids * (n_pieces + 1)
        i0 = rows["release_id"] * (n_pieces + 1) + ps
        i1 = rows["release_id"] * (n_pieces + 1) + pe
        cnt = np.asarray(rows["count"], dtype=np.int64)
        if float(cnt.sum(dtype=np.float64)) < 2.0 ** 52 and int(cnt.max()) < 1 << 52:
            # float64 weights: exact, every partial sum is an integer below 2^53
            w = cnt.astype(np.float64)
            diff = (np.bincount(i0, weights=w, minlength=size)
                    - np.bincount(i1, weights=w, minlength=size))
            counts = np.cumsum(diff.reshape(n_ids, n_pieces + 1), axis=1)[:, :n_pieces]
            counts = np.rint(counts).astype(np.int64)
        else:
            # counts whose sums reach 2^52: integer arithmetic (float64 would round them down)
            if sum(int(c) for c in cnt.tolist()) >= 1 << 62:
                raise DpledgerError("the counts of one release sum beyond 2^62")
            idiff = np.zeros(size, dtype=np.int64)
            np.add.at(idiff, i0, cnt)
            np.add.at(idiff, i1, -cnt)
            counts = np.cumsum(idiff.reshape(n_ids, n_pieces + 1), axis=1)[:, :n_pieces]
    mu2 = np.zeros(n_pieces, dtype=np.float64)
    abs_err = 0.0
    if n_gauss and n_pieces:
        # every weight enters twice (+ at start, − at stop); a chain of sums is at most the
        # rows of one breakpoint (≤ all rows) plus the running sum over the pieces long
        weight = math.fsum(math.fsum((g["count"] * g["mu2"]).tolist()) for g in gauss_parts)
        abs_err = summation_bound(2 * n_gauss + n_pieces + 2, 2.0 * weight * (1 + 1e-12))
    if dense and n_gauss and n_pieces:
        from dpledger.accounting.piece_kernels import (add_gaussian_diff,
                                                       clamped_running_sum,
                                                       dense_piece_coordinates)
        diff = np.zeros(n_total + 1)
        for g in gauss_parts:
            add_gaussian_diff(diff, keys, offsets, g["run"], g["arm"], g["start"], g["stop"],
                              g["count"], g["mu2"])
        mu2 = clamped_running_sum(diff, n_total)
        run, arm, start, stop = dense_piece_coordinates(keys, offsets)
        return PieceTotals(run=run, arm=arm, start=start, stop=stop, counts=counts,
                           mu2_inline=mu2, mu2_abs_err=abs_err)
    if gauss is not None and gauss["run"].size and n_pieces:
        ps, pe = piece(gauss, "start"), piece(gauss, "stop")
        w = gauss["count"] * gauss["mu2"]
        diff = (np.bincount(ps, weights=w, minlength=n_pieces + 1)
                - np.bincount(pe, weights=w, minlength=n_pieces + 1))
        # a float64 running sum, within ``abs_err`` of the exact one: it only ranks rewards;
        # reported values are recomputed exactly (math.fsum)
        mu2 = np.maximum(np.cumsum(diff)[:n_pieces], 0)
    # map pieces back to (run, arm, start, stop)
    starts = bp[:-1]
    sid = np.searchsorted(offsets, starts, side="right") - 1
    run = keys[sid] >> 20 if keys.size else np.zeros(0, np.int64)
    arm = keys[sid] & ((1 << 20) - 1) if keys.size else np.zeros(0, np.int64)
    return PieceTotals(run=run, arm=arm, start=starts - offsets[sid], stop=bp[1:] - offsets[sid],
                       counts=counts, mu2_inline=mu2, mu2_abs_err=abs_err)


def piece_totals_of_rows(data: np.ndarray, n_releases: int) -> PieceTotals | None:
    """Piece totals straight from plain ledger rows — an (N, 6) int64 array with the columns
    (run, arm, start, stop, release_id, count) of ``accounting.ledger.ROW_FIELDS``, as a
    ledger store holds them — without building a :class:`RewardLedger`: one sort of the 2N
    range ends, no per-stream lengths, no compiled kernels (the store's status query, issue
    15: 1e6 records in well under a second from a fresh process).

    Pieces are the maximal ranges between consecutive distinct range ends of each stream that
    some row covers (a stretch no row covers has the empty composition and is left out), in
    (run, arm, start) order.  ``counts[i, p]`` are exact: integer counts summed in float64
    are exact while every partial sum stays below 2^53, so this returns None (the caller
    takes the general route) when Σ count ≥ 2^52.  ``mu2_inline`` is 0 (no inline rows).
    The worst reward and every composition agree with :func:`piece_totals` of the same rows
    in a ledger (``tests/test_store.py::test_fast_status_equals_ledger_route``): a piece
    here is a union of that function's pieces with one count vector."""
    data = np.asarray(data, dtype=np.int64)
    n = data.shape[0]
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return PieceTotals(empty, empty, empty, empty, np.zeros((n_releases, 0), np.int64),
                           np.zeros(0))
    run, arm, start, stop, rid, cnt = (data[:, j] for j in range(6))
    if float(cnt.sum(dtype=np.float64)) >= 2.0 ** 52 or int(cnt.max()) >= 1 << 52:
        return None
    n_arms, span = int(arm.max()) + 1, int(stop.max()) + 1
    bits = int(2 * n - 1).bit_length()
    if (int(run.max()) + 1) * n_arms * span < 1 << (63 - bits):
        # one sort of int64 words (stream, position, end number): a plain sort is 3-5x
        # faster than an argsort, and the end number recovers the permutation
        key = np.empty(2 * n, dtype=np.int64)
        np.multiply(run * n_arms + arm, span, out=key[:n])
        key[n:] = key[:n]
        key[:n] += start
        key[n:] += stop
        key <<= bits
        key |= np.arange(2 * n, dtype=np.int64)
        key.sort()
        order = key & ((1 << bits) - 1)
        key >>= bits
        new = np.empty(2 * n, dtype=bool)
        new[0] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
        bp_key = key[new]
        bp_pos, bp_stream = bp_key % span, bp_key // span
        stream_run, stream_arm = bp_stream // n_arms, bp_stream % n_arms
    else:       # huge runs, arms or indices: sort (stream, position) pairs
        ends_pos = np.concatenate([start, stop])
        ends_run, ends_arm = np.concatenate([run, run]), np.concatenate([arm, arm])
        order = np.lexsort((ends_pos, ends_arm, ends_run))
        sp, sr, sa = ends_pos[order], ends_run[order], ends_arm[order]
        new = np.r_[True, (sp[1:] != sp[:-1]) | (sr[1:] != sr[:-1]) | (sa[1:] != sa[:-1])]
        bp_pos, stream_run, stream_arm = sp[new], sr[new], sa[new]
        bp_stream = stream_run * (1 << 31) + stream_arm        # run, arm < 2^31
    m = bp_pos.size                  # distinct ends; piece j is [bp[j], bp[j+1]) in a stream
    rank = np.empty(2 * n, dtype=np.int64)
    rank[order] = np.cumsum(new) - 1          # each end's distinct-end number
    # a piece runs to the next end of its own stream (the last end of a stream opens none),
    # and a stretch that no row covers holds nothing: the number of rows covering piece j is
    # the running sum of +1 (starts) / −1 (stops) over the ends sorted up to end j
    depth = np.cumsum(np.where(order < n, 1, -1))[np.r_[np.flatnonzero(new)[1:] - 1, 2 * n - 1]]
    keep = np.r_[bp_stream[1:] == bp_stream[:-1], False] & (depth > 0)
    idx = np.flatnonzero(keep)
    slot = np.concatenate([rid, rid]) * m + rank
    # the difference arrays are summed in place: at 1e6 rows every (ids × ends) temporary is
    # tens of MB, and fresh pages cost as much as the arithmetic on a first call
    if int(cnt.min()) == int(cnt.max()) == 1:  # integer counts of ends, exact
        counts = np.bincount(slot[:n], minlength=n_releases * m)
        counts -= np.bincount(slot[n:], minlength=n_releases * m)
    else:       # float sums of integers < 2^52: exact
        counts = np.bincount(slot, weights=np.concatenate([cnt, -cnt]).astype(np.float64),
                             minlength=n_releases * m)
    counts = counts.reshape(n_releases, m)
    np.cumsum(counts, axis=1, out=counts)
    counts = counts.take(idx, axis=1)       # C order (counts[:, idx] is not)
    if counts.dtype != np.int64:
        counts = np.rint(counts).astype(np.int64)
    return PieceTotals(run=stream_run[idx], arm=stream_arm[idx], start=bp_pos[idx],
                       stop=bp_pos[idx + 1], counts=counts,
                       mu2_inline=np.zeros(idx.size))


def reads_of_pieces(ledger: "RewardLedger", pt: PieceTotals, q_first: np.ndarray,
                    queries: np.ndarray) -> np.ndarray:
    """Posterior-read μ² of rewards ``queries``, laid out piece by piece: piece p's (indices
    ascending) start at ``q_first[p]``.  Pieces come in stream order, so each stream's
    queries form one block."""
    run = np.asarray(pt.run, dtype=np.int64)
    arm = np.asarray(pt.arm, dtype=np.int64)
    keys = run * (1 << 20) + arm
    fp = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else keys
    q_hi = np.r_[q_first[fp[1:]], queries.size].astype(np.int64)
    return ledger.reads_mu2(run[fp], arm[fp], q_first[fp], q_hi, queries)


def _with_reads(ledger: "RewardLedger", pt: PieceTotals) -> PieceTotals:
    """Add the posterior reads' μ² of each piece's first reward (see :class:`PieceTotals`)."""
    reads = reads_of_pieces(ledger, pt, np.arange(pt.start.size, dtype=np.int64), pt.start)
    return PieceTotals(pt.run, pt.arm, pt.start, pt.stop, pt.counts, pt.mu2_inline + reads,
                       reads, pt.mu2_abs_err)


# -- keys ----------------------------------------------------------------------------------------
def mu2_bound(release: Release) -> float:
    if isinstance(release, GaussianRelease):
        return release.mu2
    if release.statuses["gdp"] in ("exact", "bound"):
        return mu_of_pure_epsilon(release.epsilon) ** 2
    return math.inf


def _ledger_currency(ledger: "RewardLedger") -> str:
    """"pure"; "gdp" when Gaussians are present; "zcdp" when discrete Gaussians are (the exact
    sampler's releases and posterior reads: no GDP μ exists, keys are 2ρ)."""
    has_gauss = ledger.n_gaussian_rows() > 0 or ledger.n_posterior_reads() > 0 or any(
        r.statuses["pure"] in ("unbounded", "not_applicable")     # not_applicable: RDP/zCDP
        and not isinstance(r, NonPrivateRelease) for r in ledger.releases)
    if not has_gauss:
        return "pure"
    if ledger.discrete_reads() or any(isinstance(r, (DiscreteGaussianRelease,
                                                     DiscreteGaussianTotal, ZcdpRelease))
                                      for r in ledger.releases):
        return "zcdp"
    return "gdp"


def rank_weight(release: Release, currency: str) -> float:
    """Per-release key weight: μ² (``gdp``, :func:`mu2_bound`) or 2ρ (``zcdp``)."""
    if currency == "zcdp":
        return 2.0 * Composition.of([release]).zcdp_rho()
    return mu2_bound(release)


def inline_total(ledger: "RewardLedger", mu2: float, pairs) -> Composition:
    """A composition from a reward's inline total: the Gaussian of total μ², or with the exact
    sampler's posterior reads (weights 2ρ_k) the discrete-Gaussian zCDP total ρ = Σ/2 — never a
    continuous μ for discrete draws."""
    if ledger.discrete_reads():
        return Composition.discrete_gaussian_total(mu2 / 2.0, pairs)
    return Composition.gaussian_total(mu2, pairs)


def piece_keys(ledger: "RewardLedger", pt: PieceTotals) -> tuple[np.ndarray, str]:
    """Primary worst-reward key per piece: pure ε, or GDP μ² when Gaussians are present (∞
    for a piece read without noise).  Float sums, for ranking only (see :func:`key_tolerance`)."""
    n = pt.start.size
    releases = ledger.releases
    nonpriv = np.array([isinstance(r, NonPrivateRelease) for r in releases], bool)
    currency = _ledger_currency(ledger)
    if currency in ("gdp", "zcdp"):
        per_id = np.array([rank_weight(r, currency) for r in releases], dtype=np.float64)
        key = pt.mu2_inline.astype(np.float64) + _weighted(per_id, pt.counts) \
            if releases else pt.mu2_inline.astype(np.float64)
    else:
        per_id = np.array([0.0 if isinstance(r, NonPrivateRelease) else r.epsilon
                           for r in releases], dtype=np.float64)
        key = _weighted(per_id, pt.counts) if releases else np.zeros(n)
    if nonpriv.any():
        key = np.where(pt.counts[nonpriv].sum(axis=0) > 0, np.inf, key)
    return np.asarray(key, dtype=np.float64), currency


def _weighted(per_id: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Σ_i per_id[i]·counts[i, p], one release at a time (no ids × pieces temporary), with
    0·∞ = 0: a release a piece never received costs it nothing."""
    out = np.zeros(counts.shape[1])
    for i, v in enumerate(per_id.tolist()):
        if v == 0.0:
            continue
        if math.isinf(v):
            out[counts[i] > 0] = math.inf
        else:
            out += v * counts[i]
    return out


def key_tolerance(pt: PieceTotals, key: np.ndarray, currency: str) -> np.ndarray:
    """A bound on |float key − exact value| per piece (module docstring, "Ranking")."""
    tol = KEY_REL_TOL * np.abs(key)
    if currency in ("gdp", "zcdp"):
        tol = tol + pt.mu2_abs_err
    return np.where(np.isfinite(key), tol, 0.0)


def _candidates(key: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """Indices whose exact value can be the maximum: key + tol ≥ max(key − tol); the pieces at
    +∞ when there are any."""
    if key.size == 0:
        return np.zeros(0, dtype=np.int64)
    if np.isinf(key.max()):
        return np.flatnonzero(key == np.inf)
    return np.flatnonzero(key + tol >= np.max(key - tol))


# -- exact per-reward compositions -----------------------------------------------------------
def inline_mu2_exact(ledger: "RewardLedger", run: int, arm: int, index: int) -> float:
    """Σ count·μ² of the inline Gaussian rows and posterior reads touching one reward: the
    exact sum of the exact products, rounded up once (R6; ``math.fsum`` of rounded products
    could land below the exact sum)."""
    return float(inline_mu2_exact_many(ledger, [run], [arm], [index])[0])


def inline_mu2_exact_many(ledger: "RewardLedger", run, arm, index) -> np.ndarray:
    """:func:`inline_mu2_exact` of many rewards at once: each stream's rows are gathered once
    (cost Σ_query rows-of-its-stream, not queries × all rows)."""
    run = np.atleast_1d(np.asarray(run, dtype=np.int64))
    arm = np.atleast_1d(np.asarray(arm, dtype=np.int64))
    index = np.atleast_1d(np.asarray(index, dtype=np.int64))
    out = np.zeros(index.size, dtype=np.float64)
    if index.size == 0:
        return out
    qkeys = run * (1 << 20) + arm
    order = np.lexsort((index, qkeys))
    sk, si = qkeys[order], index[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    ends = np.r_[starts[1:], sk.size]
    reads = np.zeros(sk.size, dtype=np.float64)
    if ledger.n_posterior_reads():
        reads = ledger.reads_mu2(sk[starts] >> 20, sk[starts] & ((1 << 20) - 1),
                                 starts.astype(np.int64), ends.astype(np.int64), si)
    terms_of: list[list[tuple[int, float]]] = [[] for _ in range(sk.size)]
    if ledger.n_gaussian_rows():
        g = ledger.gaussian_rows
        gk = g["run"] * (1 << 20) + g["arm"]
        gorder = np.argsort(gk, kind="stable")
        gk_sorted = gk[gorder]
        cnt, m2 = g["count"], g["mu2"]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            lo, hi = np.searchsorted(gk_sorted, [sk[a], sk[a] + 1])
            if lo == hi:
                continue
            rows = gorder[lo:hi]
            st, sp, cr, mr = g["start"][rows], g["stop"][rows], cnt[rows], m2[rows]
            for j in range(a, b):
                m = (st <= si[j]) & (si[j] < sp)
                terms_of[j] = list(zip(cr[m].tolist(), mr[m].tolist(), strict=True))
    vals = np.array([sum_up(t + [(1, r)]) if r else sum_up(t)
                     for t, r in zip(terms_of, reads.tolist(), strict=True)], dtype=np.float64)
    out[order] = vals
    return out


def _pairs(ledger: "RewardLedger", counts: np.ndarray) -> list[tuple[Release, int]]:
    return [(ledger.releases[i], int(c)) for i, c in enumerate(counts) if c > 0]


def piece_composition(ledger: "RewardLedger", pt: PieceTotals, p: int) -> Composition:
    """The exact composition of piece ``p``'s first reward (its worst)."""
    mu2 = inline_mu2_exact(ledger, int(pt.run[p]), int(pt.arm[p]), int(pt.start[p]))
    return inline_total(ledger, mu2, _pairs(ledger, pt.counts[:, p]))


def piece_compositions(ledger: "RewardLedger", pt: PieceTotals,
                       pieces: np.ndarray) -> list[Composition]:
    """:func:`piece_composition` of many pieces; equal (counts, exact μ²) share one object."""
    pieces = np.asarray(pieces, dtype=np.int64)
    if ledger.n_gaussian_rows() or ledger.n_posterior_reads():
        mu2 = inline_mu2_exact_many(ledger, pt.run[pieces], pt.arm[pieces], pt.start[pieces])
    else:
        mu2 = np.zeros(pieces.size)
    memo: dict[tuple, Composition] = {}
    out = []
    for p, m in zip(pieces.tolist(), mu2.tolist(), strict=True):
        sig = (pt.counts[:, p].tobytes(), m)
        comp = memo.get(sig)
        if comp is None:
            comp = memo[sig] = inline_total(ledger, m, _pairs(ledger, pt.counts[:, p]))
        out.append(comp)
    return out


def composition_of(ledger: "RewardLedger", run: int, arm: int, index: int) -> Composition:
    """Exact composition of one reward, by scanning the rows that touch it."""
    rows = ledger.expanded_rows()
    m = (rows["run"] == run) & (rows["arm"] == arm) & (rows["start"] <= index) & (index < rows["stop"])
    pairs: dict[int, int] = {}
    for rid, c in zip(rows["release_id"][m].tolist(), rows["count"][m].tolist(), strict=True):
        pairs[rid] = pairs.get(rid, 0) + c
    return inline_total(ledger, inline_mu2_exact(ledger, run, arm, index),
                        [(ledger.releases[i], c) for i, c in pairs.items()])


# -- per-reward views --------------------------------------------------------------------------
def per_reward(ledger: "RewardLedger", pt: PieceTotals, limit: int | None = None,
               sample: int | None = None):
    """(piece, index, μ²) of every reward of the pieces with posterior reads, one entry
    (its first reward) per other piece; None if that is more than ``limit`` entries.
    ``sample``: about that many rewards spread evenly instead, plus every piece's first (so
    the maximum is still exact; other statistics of a sample are labelled so by the caller)."""
    reads_p = pt.mu2_reads > 0
    sizes = np.where(reads_p, pt.stop - pt.start, 1).astype(np.int64)
    total = int(sizes.sum())
    if limit is not None and total > limit:
        return None
    first = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    if sample is not None and total > sample:
        pos = np.unique(np.r_[np.linspace(0, total - 1, sample).astype(np.int64), first])
        piece = np.searchsorted(first, pos, side="right") - 1
        index = pt.start[piece] + (pos - first[piece])
        first = np.searchsorted(pos, first)    # each piece's first query among pos
    else:
        piece = np.repeat(np.arange(pt.start.size), sizes)
        index = pt.start[piece] + (np.arange(total) - first[piece])
    base = (pt.mu2_inline - pt.mu2_reads)[piece]
    reads = reads_of_pieces(ledger, pt, first, index)
    return piece, index, np.where(reads_p[piece], base + reads, pt.mu2_inline[piece])


def n_distinct_compositions(ledger: "RewardLedger", limit: int = 2_000_000) -> int | None:
    """Number of distinct per-reward compositions (inline μ² compared as floats).  With
    posterior reads nearly every reward has its own μ², so counting means one value per
    reward: None when that is more than ``limit`` values (the caller labels it skipped)."""
    pt = piece_totals(ledger)
    if pt.start.size == 0:
        return 0
    grp = signature_groups(pt, ledger.releases)
    mu2 = pt.mu2_inline
    if pt.varying:
        expanded = per_reward(ledger, pt, limit)
        if expanded is None:
            return None
        piece, _, mu2 = expanded
        grp = grp[piece]
    if grp.min() == grp.max():      # one release signature: count the distinct μ² values
        s = np.sort(mu2)
        return int(1 + np.count_nonzero(s[1:] != s[:-1]))
    return column_groups(np.stack([grp.astype(np.float64), mu2]))[1]


def distinct_compositions(ledger: "RewardLedger") -> list[tuple[Composition, int]]:
    """Each distinct per-reward composition with the number of rewards that have it."""
    pt = piece_totals(ledger)
    out: dict[Composition, int] = {}
    by_reward = pt.mu2_reads > 0 if pt.varying else np.zeros(pt.start.size, dtype=bool)
    for p in range(pt.start.size):
        if by_reward[p]:                          # posterior reads: reward by reward
            pairs = _pairs(ledger, pt.counts[:, p])
            run, arm = int(pt.run[p]), int(pt.arm[p])
            idx = np.arange(int(pt.start[p]), int(pt.stop[p]))
            for m in inline_mu2_exact_many(ledger, np.full(idx.size, run), np.full(idx.size, arm),
                                           idx).tolist():
                comp = inline_total(ledger, m, pairs)
                out[comp] = out.get(comp, 0) + 1
            continue
        comp = piece_composition(ledger, pt, p)
        out[comp] = out.get(comp, 0) + int(pt.stop[p] - pt.start[p])
    return list(out.items())


# -- maximal compositions ----------------------------------------------------------------------
def _release_columns(releases: Sequence[Release]) -> tuple[np.ndarray, np.ndarray, int]:
    """(column of each interned release among the non-Gaussian normal forms, or −1 for a
    Gaussian; μ² of each Gaussian (0 elsewhere); number of non-Gaussian columns)."""
    from dpledger.accounting.composition import canonical
    col = np.full(len(releases), -1, dtype=np.int64)
    g_mu2 = np.zeros(len(releases), dtype=np.float64)
    forms: dict[tuple, int] = {}
    for i, r in enumerate(releases):
        r = canonical(r)
        if isinstance(r, GaussianRelease):
            g_mu2[i] = r.mu2
        else:
            col[i] = forms.setdefault(r.normal_form(), len(forms))
    return col, g_mu2, len(forms)


_SENTINEL_POOL = 2048      # points whose front is computed first, to prune the rest
_SENTINELS = 32            # front members every point is compared with in the pruning pass


def pareto_candidates(ints: np.ndarray, g: np.ndarray, tol: np.ndarray,
                      block: int = 512) -> np.ndarray:
    """Indices of the points not *surely* dominated: point b is dropped only when some a has
    ``ints[a] ≥ ints[b]`` element-wise and ``g[a] − tol[a] ≥ g[b] + tol[b]``, strictly in one
    coordinate.  ``ints`` (n, d) exact integers, ``g`` floats within ``tol`` of their exact
    values; equal points are all kept.

    Large inputs are pruned first: the front of the points largest by Σ ints and by g, then
    every point compared with up to :data:`_SENTINELS` of its members (spread along it) and
    dropped when one surely dominates it — the same rule as the scan, so the result is the
    same set; it only costs O(n·32·d) instead of O(n·|front|·d) for the bulk.  (A store of 1e6
    random records: 6.8e5 candidates, a front of 294; the scan alone took 2.1 s.)"""
    n = g.size
    if n > 1:
        # equal points are never dropped, so a scan over many copies of one point kept them
        # all in its front: O(n²) (2·10⁶ records of a tree counter, nearly all with the same
        # nodes, ran for hours).  Scan one copy of each distinct (ints, g, tol) and keep every
        # copy of a kept one: the same set, since a point and its copies are dominated alike.
        rows = np.column_stack([ints.astype(np.int64, copy=False),
                                np.ascontiguousarray(g, dtype=np.float64).view(np.int64),
                                np.ascontiguousarray(tol, dtype=np.float64).view(np.int64)])
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        if first.size < n:
            kept = _pareto_distinct(ints[first], g[first], tol[first], block)
            mask = np.zeros(first.size, dtype=bool)
            mask[kept] = True
            return np.flatnonzero(mask[inverse.reshape(-1)])
    return _pareto_distinct(ints, g, tol, block)


def _pareto_distinct(ints: np.ndarray, g: np.ndarray, tol: np.ndarray,
                     block: int) -> np.ndarray:
    """:func:`pareto_candidates` on points without exact copies (copies would still be
    handled correctly, only slowly)."""
    n = g.size
    if n > 4 * _SENTINEL_POOL:
        by_sum = np.argsort(-ints.sum(axis=1), kind="stable")[:_SENTINEL_POOL] \
            if ints.shape[1] else np.zeros(0, dtype=np.int64)
        pool = np.unique(np.concatenate([by_sum, np.argsort(-g, kind="stable")[:_SENTINEL_POOL]]))
        front = pool[_pareto_scan(ints[pool], g[pool], tol[pool], block)]
        front = front[np.argsort(g[front], kind="stable")]
        pick = front[np.unique(np.linspace(0, front.size - 1, _SENTINELS).astype(np.int64))]
        alive = np.ones(n, dtype=bool)
        slo = (g - tol)[pick]
        for s in range(0, n, 65536):
            e = min(n, s + 65536)
            hi = (g + tol)[s:e]
            ge = slo[:, None] >= hi[None, :]
            gt = slo[:, None] > hi[None, :]
            for j in range(ints.shape[1]):
                a, b = ints[pick, j, None], ints[None, s:e, j]
                ge &= a >= b
                gt |= a > b
            alive[s:e] = ~np.any(ge & gt, axis=0)
        idx = np.flatnonzero(alive)
        return idx[_pareto_scan(ints[idx], g[idx], tol[idx], block)]
    return _pareto_scan(ints, g, tol, block)


def _pareto_scan(ints: np.ndarray, g: np.ndarray, tol: np.ndarray, block: int) -> np.ndarray:
    """:func:`pareto_candidates` by one scan: points by decreasing (Σ ints, g) — a dominator
    always comes first — against the kept front: O(n·|front|·d)."""
    n = g.size
    if n <= 1:
        return np.arange(n)
    order = np.lexsort((-g, -ints.sum(axis=1))) if ints.shape[1] else np.argsort(-g,
                                                                                 kind="stable")
    X, lo, hi = ints[order], (g - tol)[order], (g + tol)[order]
    keep_idx: list[np.ndarray] = []
    fX = np.zeros((0, X.shape[1]), dtype=X.dtype)
    flo = np.zeros(0)
    for s in range(0, n, block):
        bX, blo, bhi = X[s:s + block], lo[s:s + block], hi[s:s + block]
        cX, clo = np.concatenate([fX, bX]), np.concatenate([flo, blo])
        # (front + block) × block comparisons, one column at a time (no 3-d temporaries)
        ge = clo[:, None] >= bhi[None, :]
        gt = clo[:, None] > bhi[None, :]
        for j in range(X.shape[1]):
            a, b = cX[:, j, None], bX[None, :, j]
            ge &= a >= b
            gt |= a > b
        keep = np.flatnonzero(~np.any(ge & gt, axis=0))
        keep_idx.append(order[s + keep])
        fX, flo = np.concatenate([fX, bX[keep]]), np.concatenate([flo, blo[keep]])
    return np.sort(np.concatenate(keep_idx))


def exact_front(compositions: Sequence[Composition]) -> list[Composition]:
    """The distinct compositions not dominated by another, in canonical (JSON) order: the set
    :func:`dpledger.accounting.composition.maximal_compositions` defines (non-Gaussian counts by
    normal form, Gaussian parts by total μ²), found by :func:`pareto_candidates` with zero
    tolerance — O(n·|front|) instead of its O(n²)."""
    import json
    distinct = list(dict.fromkeys(compositions))
    if len(distinct) <= 1:
        return distinct
    forms: dict[tuple, int] = {}
    feats, g = [], np.zeros(len(distinct))
    for i, c in enumerate(distinct):
        feat: dict[int, int] = {}
        mu2 = 0.0
        for r, n in c.items:
            if isinstance(r, GaussianRelease):
                mu2 += n * r.mu2
            else:
                feat[forms.setdefault(r.normal_form(), len(forms))] = n
        feats.append(feat)
        g[i] = mu2
    ints = np.zeros((len(distinct), len(forms)), dtype=np.int64)
    for i, feat in enumerate(feats):
        for k, v in feat.items():
            ints[i, k] = v
    keep = pareto_candidates(ints, g, np.zeros(len(distinct)))
    return sorted((distinct[i] for i in keep.tolist()), key=lambda c: json.dumps(c.to_json()))


def maximal_compositions(ledger: "RewardLedger") -> list[Composition]:
    """Every maximal per-reward composition of the ledger, exactly, with no cap (module
    docstring): the realized maximum over every reward of every run is the maximum over
    these.  Cost: the pieces once, a Pareto scan over the per-signature candidates, one exact
    composition per survivor."""
    return [c for c, _ in maximal_pieces(ledger, piece_totals(ledger))]


def maximal_pieces(ledger: "RewardLedger", pt: PieceTotals,
                   pieces: np.ndarray | None = None) -> list[tuple[Composition, int]]:
    """The maximal compositions among ``pieces`` (indices into ``pt``; all by default), each
    with a witness: a piece whose first reward has exactly that composition.  ``ledger`` may
    hold the releases only when ``pt`` came from plain rows
    (:func:`worst_reward_of_rows`'s argument).  In :func:`exact_front`'s order."""
    if pieces is None:
        pieces = np.arange(pt.start.size)
    pieces = np.asarray(pieces, dtype=np.int64)
    if pieces.size == 0:
        return []
    col, g_mu2, n_cols = _release_columns(ledger.releases)
    # Gaussian μ² per piece: inline (reads included) + interned Gaussians (float, to rank)
    g = (pt.mu2_inline + (_weighted(g_mu2, pt.counts) if len(ledger.releases) else 0.0))[pieces]
    tol = KEY_REL_TOL * g + pt.mu2_abs_err
    # 1. float Pareto filter over (non-Gaussian counts by normal form, Gaussian μ²): drops
    # only pieces surely dominated (within the keys' error bounds); equal pieces all stay
    ints = np.zeros((pieces.size, n_cols), dtype=np.int64)
    for i in np.flatnonzero(col >= 0).tolist():
        ints[:, col[i]] += pt.counts[i, pieces]
    cand = pareto_candidates(ints, g, tol)
    # 2. one representative per (signature, float μ²): equal counts and μ² are one composition
    counts = _form_counts(pt.counts[:, pieces[cand]], ledger.releases)
    grp = column_groups(counts)[0] if counts.shape[0] else np.zeros(cand.size, dtype=np.int64)
    ids, _ = column_groups(np.stack([grp.astype(np.float64), g[cand]]))
    _, first = np.unique(ids, return_index=True)
    keep = pieces[cand[np.sort(first)]]
    # 3. exact compositions of the survivors, then the exact filter
    comps = piece_compositions(ledger, pt, keep)
    witness: dict[Composition, int] = {}
    for c, p in zip(comps, keep.tolist(), strict=True):
        witness.setdefault(c, p)
    return [(c, witness[c]) for c in exact_front(list(witness))]


# -- worst reward ------------------------------------------------------------------------------
def worst_reward(ledger: "RewardLedger", deltas: Sequence[float] = (1e-9,),
                 runs: Iterable[int] | None = None, adaptive: bool = True) -> WorstReward | None:
    """argmax of pure ε (of μ when Gaussian releases are present) over the rewards of ``runs``
    (all by default); ties by the larger ε at the smallest δ, then by the earliest (run,
    round).  None for an empty ledger.  Every piece whose float key can reach the maximum
    (:func:`_candidates`) is recomputed exactly; no cap."""
    pt = piece_totals(ledger)
    key, currency = _memo_keys(ledger, pt)
    if runs is None:
        pieces = np.arange(pt.start.size)
    else:
        pieces = np.flatnonzero(np.isin(pt.run, np.fromiter(runs, dtype=np.int64)))
    return _worst_among(ledger, pt, key, currency, pieces, deltas, adaptive)


def worst_reward_of_rows(data: np.ndarray, releases: Sequence[Release],
                         deltas: Sequence[float] = (1e-9,), adaptive: bool = True
                         ) -> tuple[WorstReward | None, PieceTotals] | None:
    """:func:`worst_reward` of plain rows (a ledger store's (N, 6) array over the interned
    ``releases``) through :func:`piece_totals_of_rows`, and the piece totals used; None when
    that function declines (counts too large to sum exactly in float64).  The ranking, the
    exact recomputation and the tie rules are :func:`worst_reward`'s own; the ledger passed to
    them holds the releases only (no rows: every query they make of it — currency, release
    weights, rounds, inline μ² — depends on the releases alone when there are no inline
    Gaussian rows, trees, posterior reads or segments)."""
    from dpledger.accounting.ledger import RewardLedger
    pt = piece_totals_of_rows(data, len(releases))
    if pt is None:
        return None
    led = RewardLedger.of_releases(releases)
    key, currency = piece_keys(led, pt)
    worst = _worst_among(led, pt, key, currency, np.arange(pt.start.size), deltas, adaptive)
    return worst, pt


def worst_rewards_by_run(ledger: "RewardLedger", runs: Iterable[int],
                         deltas: Sequence[float] = (1e-9,),
                         adaptive: bool = True) -> dict[int, WorstReward | None]:
    """``{run: worst_reward(ledger, deltas, runs=[run], adaptive)}`` with the keys computed
    once (pieces come in (run, arm) order, so each run's pieces are one slice)."""
    pt = piece_totals(ledger)
    key, currency = _memo_keys(ledger, pt)
    run = np.asarray(pt.run, dtype=np.int64)
    ordered = run.size < 2 or bool(np.all(run[1:] >= run[:-1]))
    out = {}
    for r in runs:
        if ordered:
            lo, hi = np.searchsorted(run, [r, r + 1])
            pieces = np.arange(lo, hi)
        else:
            pieces = np.flatnonzero(run == r)
        out[r] = _worst_among(ledger, pt, key, currency, pieces, deltas, adaptive)
    return out


def _memo_keys(ledger: "RewardLedger", pt: PieceTotals) -> tuple[np.ndarray, str]:
    """:func:`piece_keys` of the ledger's memoised piece totals, memoised with them."""
    cached = getattr(ledger, "_key_cache", None)
    if cached is not None and cached[0] is pt:
        return cached[1], cached[2]
    key, currency = piece_keys(ledger, pt)
    ledger._key_cache = (pt, key, currency)
    return key, currency


def _worst_among(ledger: "RewardLedger", pt: PieceTotals, key: np.ndarray, currency: str,
                 pieces: np.ndarray, deltas: Sequence[float],
                 adaptive: bool) -> WorstReward | None:
    """The worst reward among ``pieces`` (indices into ``pt``), by the rules of
    :func:`worst_reward`."""
    if pieces.size == 0:
        return None
    k = key[pieces]
    # releases known only by RDP/zCDP (issue 15) have no GDP μ: their pieces' keys are ∞ and
    # rank nothing, so they and the top finite keys are all ranked by ε at the smallest δ
    by_rdp = any(isinstance(r, (RdpRelease, ZcdpRelease, ApproxDpRelease, WishartRelease))
                 for r in ledger.releases) and not any(
        isinstance(r, NonPrivateRelease) for r in ledger.releases)
    fin = np.isfinite(k)
    if by_rdp and fin.any() and not fin.all():
        top = pieces[fin][_candidates(k[fin], key_tolerance(pt, k[fin], currency))]
        tied = np.concatenate([pieces[~fin], top])
    else:
        tied = pieces[_candidates(k, key_tolerance(pt, k, currency))]
    comps = dict(zip(tied.tolist(), piece_compositions(ledger, pt, tied), strict=True))
    value_of: dict[Composition, float] = {}
    for c in comps.values():
        if c not in value_of:
            value_of[c] = c.pure_epsilon() if currency == "pure" else \
                2.0 * c.zcdp_rho() if currency == "zcdp" else c.gdp_mu2()
    exact_key = {p: value_of[c] for p, c in comps.items()}
    best = max(exact_key.values())
    if not by_rdp:
        tied = [p for p, v in exact_key.items() if v >= best * (1 - 1e-12) or v == best]
    else:
        tied = list(exact_key)
    distinct = list(dict.fromkeys(comps[p] for p in tied))
    if len(distinct) > 1 and (math.isfinite(best) or by_rdp):
        from dpledger.accounting.accountants import BestAccountant
        acc, dmin = BestAccountant(), min(deltas)
        eps = {c: acc.epsilon(c, dmin, adaptive) for c in distinct}
        top_eps = max(eps.values())
        tied = [p for p in tied if eps[comps[p]] >= top_eps * (1 - 1e-12)]

    def round_of(p: int):
        return ledger.round_of(int(pt.run[p]), int(pt.arm[p]), int(pt.start[p]))

    def order(p: int) -> tuple:
        rnd = round_of(p)
        return (int(pt.run[p]), rnd if rnd is not None else int(pt.start[p]), int(pt.arm[p]))

    p = min(tied, key=order)
    ref = RewardRef(run=int(pt.run[p]), arm=int(pt.arm[p]), index=int(pt.start[p]),
                    round=round_of(p))
    value = exact_key[p]
    return WorstReward(reward=ref, composition=comps[p],
                       key=value if currency == "pure" or math.isinf(value) else value / 2.0
                       if currency == "zcdp" else sqrt_up(value), currency=currency)
