"""The columnar per-reward ledger (docs/design.md#ledger).

Units of privacy are rewards, addressed as (run, arm, index): the ``index``-th observation
(0-based) of ``arm`` in ``run``.  A release touches a half-open range ``[start, stop)`` of one
arm's observation indices.

Storage, all numpy columns, appended in bulk:

* **rows** ``(run, arm, start, stop, release_id, count)``: ``count`` releases of the interned
  release ``release_id`` each touching ``[start, stop)``;
* **Gaussian prefix rows** ``(run, arm, start, stop, count, mu2)``: Gaussian releases given by
  their μ² inline, for families with a different σ per range — no release object per round
  (a posterior sampled every round is better described by a posterior-read record, below);
* **tree records** ``(run, arm, offset, n_items, levels, release_id)``: a tree over items
  ``offset … offset+n_items−1`` of the arm's stream in which every completed dyadic node at
  levels ``0 … levels−1`` counts as one release.  Item ``i`` (1-based in the tree) lies in the
  level-ℓ node completed by ``n_items`` iff ``i ≤ ⌊n_items/2^ℓ⌋·2^ℓ``, so a record is
  ``levels`` range rows of count 1 — O(log n) per tree.  The Chan–Shi–Song binary mechanism
  releases fewer nodes (one p-sum per item: level ℓ only for odd ⌈i/2^ℓ⌉), so for it a record
  is a sound *upper bound* per reward, exact for the tree's first item — the worst-off reward,
  in every node of every level — hence exact for the run's maximum and for certificates; the
  exact per-reward CSS counts would need O(n) rows per tree;
* **posterior reads** ``(run, arm, first_round, last_round, c, bits)``: a Gaussian posterior of
  the arm sampled every round of a window, each draw a release of μ² = 1/(c(k+1)) over the k
  rewards observed before it (:mod:`~dpledger.accounting.posterior_reads`) — one record per
  stream, its per-reward totals derived from the segments; ``bits`` > 0: the exact sampler's
  discrete Gaussian on the lattice 2^-bits, totalled in zCDP (a ledger holds one kind);
* **segments** ``(run, arm, first_index, first_round, stride, length)``: the index → round map;
* **streams**: the number of observations of each (run, arm).

This module holds the storage (the tables above, appends, segments, trees, the posterior
reads' per-reward μ²) and its serialisation (JSON, compact, merge, dp_accounting).  The
per-reward queries — piece totals, signature groups, maximal compositions, the worst reward,
the realized block — read it from :mod:`dpledger.accounting.reward_queries`; the ledger's
methods of those names delegate there.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from dpledger.accounting import reward_queries as rq
from dpledger.accounting.composition import Composition
from dpledger.accounting.posterior_reads import READ_FIELDS
from dpledger.accounting.releases import Release, release_from_json, release_to_json
from dpledger.accounting.reward_queries import (PieceTotals, RewardRef,  # noqa: F401 (re-exported)
                                                WorstReward)
from dpledger.errors import DpledgerError

ROW_FIELDS = ("run", "arm", "start", "stop", "release_id", "count")
GAUSS_FIELDS = ("run", "arm", "start", "stop", "count", "mu2")
TREE_FIELDS = ("run", "arm", "offset", "n_items", "levels", "release_id")
SEGMENT_FIELDS = ("run", "arm", "first_index", "first_round", "stride", "length")
_INT_DTYPES = {"run": np.int64, "arm": np.int64, "start": np.int64, "stop": np.int64,
               "release_id": np.int64, "count": np.int64, "offset": np.int64,
               "n_items": np.int64, "levels": np.int64, "first_index": np.int64,
               "first_round": np.int64, "stride": np.int64, "length": np.int64,
               "last_round": np.int64, "bits": np.int64}
_FLOAT_FIELDS = ("mu2", "c")
# A stream (run, arm) is keyed run·2^20 + arm in one int64 (sorting, grouping, joins): arms
# must lie in [0, 2^20) and runs in [0, 2^43), or two streams would share a key and their
# releases would be summed together.
ARM_LIMIT = 1 << 20
RUN_LIMIT = 1 << 43


def check_streams(run, arm) -> None:
    """Refuse a run or arm outside the stream key's range (a clear error, never a collision)."""
    run, arm = np.asarray(run), np.asarray(arm)
    if arm.size and (arm.min() < 0 or arm.max() >= ARM_LIMIT):
        bad = arm[(arm < 0) | (arm >= ARM_LIMIT)].ravel()[0]
        raise DpledgerError(f"arm must lie in [0, 2^20), got {int(bad)}")
    if run.size and (run.min() < 0 or run.max() >= RUN_LIMIT):
        bad = run[(run < 0) | (run >= RUN_LIMIT)].ravel()[0]
        raise DpledgerError(f"run must lie in [0, 2^43), got {int(bad)}")


class RowBuffer:
    """Preallocated row columns that compiled kernels fill; ``ledger.extend(buf, n)`` takes the
    first ``n`` rows in one copy."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        for f in ROW_FIELDS:
            setattr(self, f, np.zeros(self.capacity, dtype=np.int64))

    def columns(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, f) for f in ROW_FIELDS)


def _as_col(name: str, values, n: int | None = None, owned: bool = False) -> np.ndarray:
    dtype = np.float64 if name in _FLOAT_FIELDS else _INT_DTYPES[name]
    arr = np.asarray(values)
    if arr.dtype == dtype and arr.ndim == 1 and (n is None or arr.size == n):
        if owned and arr.flags.c_contiguous and arr.flags.writeable:
            return arr          # the caller hands the array over (fresh kernel output)
        return arr.copy()       # already the column type: one copy, no checks to redo
    if arr.ndim == 0:
        arr = np.full(1 if n is None else n, arr)
    if dtype is not np.float64 and arr.size and arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise DpledgerError(f"ledger column {name!r} must hold integers")
    return arr.astype(dtype, copy=True).ravel()


class _Table:
    """A growable set of equal-length numpy columns, kept as chunks until read."""

    def __init__(self, fields: Sequence[str]):
        self.fields = tuple(fields)
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._cache: dict[str, np.ndarray] | None = None
        self.version = 0            # bumped by every change (memo keys)

    def append(self, cols: Mapping[str, np.ndarray], owned: bool = False) -> None:
        """Add rows; ``owned``: the caller hands its (fresh, unshared) arrays over, no copy."""
        n = max(np.size(cols[f]) for f in self.fields)
        arrays = tuple(_as_col(f, cols[f], n, owned) for f in self.fields)
        sizes = {a.size for a in arrays}
        if len(sizes) != 1:
            raise DpledgerError(f"ledger columns differ in length: {sorted(sizes)}")
        if arrays[0].size:
            self._chunks.append(arrays)
            self._cache = None
            self.version += 1

    def parts(self) -> list[dict[str, np.ndarray]]:
        """The rows as their appended blocks, in order, without concatenating them (a per-run
        block of a 1e7-round Gaussian ledger is 480 MB; joining them is mostly page faults)."""
        return [dict(zip(self.fields, c, strict=True)) for c in self._chunks]

    def columns(self) -> dict[str, np.ndarray]:
        if self._cache is None:
            if len(self._chunks) == 1:      # already one block: no copy (fresh pages are dear)
                cols = list(self._chunks[0])
            elif self._chunks:
                cols = [np.concatenate([c[i] for c in self._chunks]) for i in range(len(self.fields))]
            else:
                cols = [np.zeros(0, dtype=np.float64 if f in _FLOAT_FIELDS else np.int64)
                        for f in self.fields]
            self._cache = dict(zip(self.fields, cols, strict=True))
            self._chunks = [tuple(cols)] if cols[0].size else []
        return self._cache

    def replace(self, cols: Mapping[str, np.ndarray]) -> None:
        self._chunks = []
        self._cache = None
        self.version += 1
        self.append(cols)

    def __len__(self) -> int:
        return sum(c[0].size for c in self._chunks)


class RewardLedger:
    """Per-reward ledger of releases (see module docstring)."""

    def __init__(self) -> None:
        self.releases: list[Release] = []
        self._ids: dict[Release, int] = {}
        self._rows = _Table(ROW_FIELDS)
        self._gauss = _Table(GAUSS_FIELDS)
        self._trees = _Table(TREE_FIELDS)
        self._reads = _Table(READ_FIELDS)
        self._segments = _Table(SEGMENT_FIELDS)
        self._streams: dict[tuple[int, int], int] = {}

    @classmethod
    def of_releases(cls, releases: Sequence[Release]) -> "RewardLedger":
        """A ledger whose interned releases are ``releases``, in order (ids 0 … n − 1), and no
        rows: the reading side of a stored ledger.  Two equal releases would share an id and
        shift every later one, so they are refused."""
        led = cls()
        for r in releases:
            led.intern(r)
        if len(led.releases) != len(releases):
            raise DpledgerError("two interned releases are equal")
        return led

    # -- writing ------------------------------------------------------------------------
    def intern(self, release: Release) -> int:
        """The id of ``release`` in the interned table (added on first use)."""
        rid = self._ids.get(release)
        if rid is None:
            if not hasattr(release, "normal_form"):
                raise DpledgerError(f"not a release: {release!r}")
            rid = self._ids[release] = len(self.releases)
            self.releases.append(release)
        return rid

    def add(self, run: int, arm: int, start: int, stop: int, release: Release | int,
            count: int = 1) -> None:
        """One row: ``count`` releases of ``release`` over observations ``[start, stop)``."""
        rid = release if isinstance(release, (int, np.integer)) else self.intern(release)
        self.append_rows(run, arm, start, stop, rid, count)

    def append_rows(self, run, arm, start, stop, release_id, count, owned: bool = False) -> None:
        """Bulk append (arrays or scalars, broadcast together); ``owned``: fresh arrays the
        ledger may keep without copying."""
        arrays = tuple(map(np.asarray, (run, arm, start, stop, release_id, count)))
        if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1:
            arrays = tuple(np.atleast_1d(a) for a in np.broadcast_arrays(*arrays))
            owned = False
        cols = dict(zip(ROW_FIELDS, arrays, strict=True))
        self._check_rows(cols)
        self._rows.append(cols, owned=owned)

    def extend(self, buffer: RowBuffer, n: int) -> None:
        """Take the first ``n`` rows a kernel wrote into ``buffer``."""
        if not 0 <= n <= buffer.capacity:
            raise DpledgerError(f"row count {n} outside buffer capacity {buffer.capacity}")
        cols = {f: getattr(buffer, f)[:n] for f in ROW_FIELDS}
        self._check_rows(cols)
        self._rows.append(cols)

    def add_growing_prefix(self, run, arm, stops, counts, mu2, starts=0,
                           owned: bool = False) -> None:
        """Gaussian releases reading observations ``[start, stop)``: ``counts[j]`` releases of
        μ² = ``mu2[j]`` each, per row j (one row per distinct prefix length).  ``owned``: the
        arrays are fresh and the ledger may keep them without a copy."""
        arrays = np.broadcast_arrays(*map(np.asarray, (run, arm, starts, stops, counts, mu2)))
        cols = dict(zip(GAUSS_FIELDS, arrays, strict=True))
        cols = {k: np.atleast_1d(v) for k, v in cols.items()}
        mu2a = np.asarray(cols["mu2"], dtype=np.float64)
        if mu2a.size and (not np.all(np.isfinite(mu2a)) or np.any(mu2a < 0)):
            raise DpledgerError("Gaussian prefix rows need finite mu2 >= 0")
        self._check_rows(cols, has_release=False)
        self._gauss.append(cols, owned=owned)

    def add_tree(self, run: int, arm: int, offset: int, n_items: int, levels: int,
                 release: Release | int) -> None:
        """A binary mechanism over ``n_items`` items starting at observation ``offset``."""
        rid = release if isinstance(release, (int, np.integer)) else self.intern(release)
        check_streams(run, arm)
        if n_items < 0 or levels < 1 or offset < 0:
            raise DpledgerError("tree records need offset >= 0, n_items >= 0, levels >= 1")
        if n_items >= 2 ** levels:
            raise DpledgerError(f"a tree of {levels} levels holds at most {2 ** levels - 1} items")
        self._check_release_ids(np.array([rid]))
        self._trees.append(dict(run=run, arm=arm, offset=offset, n_items=n_items, levels=levels,
                                release_id=rid))

    def add_posterior_reads(self, run, arm, first_round, last_round, c, bits=0) -> None:
        """Posterior reads of arm ``arm``: every round ``first_round … last_round`` draws once
        from N(S/(k+1), c/(k+1)) over the arm's k rewards observed before it (arrays or
        scalars, broadcast together; see :mod:`~dpledger.accounting.posterior_reads`).  The
        per-reward totals need the stream's segments and length.  ``bits`` > 0: the exact
        sampler's discrete Gaussian draws on the lattice 2^-bits."""
        arrays = [np.atleast_1d(a) for a in np.broadcast_arrays(
            *map(np.asarray, (run, arm, first_round, last_round, c, bits)))]
        cols = dict(zip(READ_FIELDS, arrays, strict=True))
        cv = np.asarray(cols["c"], dtype=np.float64)
        if cv.size and (not np.all(np.isfinite(cv)) or np.any(cv <= 0)):
            raise DpledgerError("posterior reads need a finite variance scale c > 0")
        fr, lr = np.asarray(cols["first_round"]), np.asarray(cols["last_round"])
        if fr.size and (np.any(fr < 1) or np.any(lr < fr)):
            raise DpledgerError("posterior reads need 1 <= first_round <= last_round")
        check_streams(cols["run"], cols["arm"])
        bv = np.asarray(cols["bits"])
        if bv.size and (np.any(bv < 0) or np.any(bv > 30) or np.any(bv != np.round(bv))):
            raise DpledgerError("posterior reads need lattice bits in 0 … 30")
        self._reads.append(cols)

    def add_segments(self, run, arm, first_index, first_round, stride, length,
                     owned: bool = False) -> None:
        arrays = tuple(map(np.asarray, (run, arm, first_index, first_round, stride, length)))
        if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1:
            arrays = tuple(np.atleast_1d(a) for a in np.broadcast_arrays(*arrays))
            owned = False
        check_streams(arrays[0], arrays[1])
        self._segments.append(dict(zip(SEGMENT_FIELDS, arrays, strict=True)), owned=owned)

    def add_actions(self, run: int, actions: np.ndarray, first_round: int = 1) -> None:
        """Segments and stream lengths from a run's action sequence (round t = first_round + i)."""
        actions = np.asarray(actions, dtype=np.int64)
        for arm in np.unique(actions):
            rounds = np.flatnonzero(actions == arm) + first_round
            fi, fr, st, ln = _arithmetic_runs(rounds)
            self.add_segments(run, int(arm), fi, fr, st, ln)
            self.set_stream_length(run, int(arm), rounds.size)

    def set_stream_lengths(self, runs, arms, lengths) -> None:
        """Bulk :meth:`set_stream_length` (arrays of equal length; entries with length 0 are
        skipped)."""
        runs, arms, lengths = (np.asarray(x, dtype=np.int64).ravel() for x in (runs, arms, lengths))
        if not runs.size == arms.size == lengths.size:
            raise DpledgerError("stream length columns differ in length")
        if lengths.size and lengths.min() < 0:
            raise DpledgerError("stream lengths must be >= 0")
        check_streams(runs, arms)
        streams = self._streams
        keys = runs * (1 << 20) + arms
        if not streams and (keys.size < 2 or bool(np.all(keys[1:] > keys[:-1]))):
            # a fresh ledger and distinct keys (the simulator's case): no max to take
            pairs = zip(zip(runs.tolist(), arms.tolist(),
                            strict=True), lengths.tolist(), strict=True)
            if lengths.size and lengths.min() > 0:
                streams.update(pairs)
            else:
                streams.update((k, n) for k, n in pairs if n)
            return
        for key, n in zip(zip(runs.tolist(), arms.tolist(),
                              strict=True), lengths.tolist(), strict=True):
            if n and n > streams.get(key, 0):
                streams[key] = n

    def set_stream_length(self, run: int, arm: int, n: int) -> None:
        check_streams(run, arm)
        key = (int(run), int(arm))
        self._streams[key] = max(int(n), self._streams.get(key, 0))

    def _check_release_ids(self, ids: np.ndarray) -> None:
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.releases)):
            raise DpledgerError("release_id not interned in this ledger")

    def _check_rows(self, cols: Mapping[str, np.ndarray], has_release: bool = True) -> None:
        check_streams(cols["run"], cols["arm"])
        start, stop = np.asarray(cols["start"]), np.asarray(cols["stop"])
        count = np.asarray(cols["count"])
        if start.size and ((start < 0) | (stop <= start) | (count < 1)).any():
            if np.any(count < 1):
                raise DpledgerError("ledger row counts must be >= 1")
            raise DpledgerError("ledger rows need 0 <= start < stop")
        if has_release:
            self._check_release_ids(np.asarray(cols["release_id"], dtype=np.int64))

    # -- reading ------------------------------------------------------------------------
    @property
    def rows(self) -> dict[str, np.ndarray]:
        return self._rows.columns()

    @property
    def gaussian_rows(self) -> dict[str, np.ndarray]:
        return self._gauss.columns()

    @property
    def trees(self) -> dict[str, np.ndarray]:
        return self._trees.columns()

    @property
    def posterior_reads(self) -> dict[str, np.ndarray]:
        return self._reads.columns()

    @property
    def segments(self) -> dict[str, np.ndarray]:
        return self._segments.columns()

    def n_rows(self) -> int:
        return len(self._rows) + len(self._gauss) + len(self._trees) + len(self._reads)

    def runs(self) -> list[int]:
        return sorted({r for r, _ in self.streams()})

    def streams(self) -> dict[tuple[int, int], int]:
        """Observation count of every (run, arm) stream: declared, or the largest stop."""
        out = dict(self._streams)
        tag = (len(self._rows), len(self._gauss), len(self._trees), tuple(out.items()))
        if getattr(self, "_streams_cache", (None,))[0] == tag:
            return dict(self._streams_cache[1])
        tables = [(t, lambda c: c["stop"]) for t in self._rows.parts() + self._gauss.parts()]
        tables += [(t, lambda c: c["offset"] + c["n_items"]) for t in self._trees.parts()]
        for table, stop_of in tables:
            if table["run"].size == 0:
                continue
            keys = table["run"] * (1 << 20) + table["arm"]
            stops = stop_of(table)
            known = np.array(sorted(r * (1 << 20) + a for r, a in out), dtype=np.int64)
            pos = np.searchsorted(known, keys) if known.size else None
            if keys.min() == keys.max():
                uniq, maxes = keys[:1], stops.max(keepdims=True)
            elif pos is not None and bool(np.all(known[np.minimum(pos, known.size - 1)] == keys)):
                # every row's stream is declared (the simulator's case): no sort of the rows
                if keys.size > 100_000:     # np.maximum.at: 1.1 s on 2e7 rows; compiled: 0.05 s
                    from dpledger.accounting.piece_kernels import max_stop_per_key
                    maxes = max_stop_per_key(known, table["run"], table["arm"],
                                             np.ascontiguousarray(stops, dtype=np.int64))
                else:
                    maxes = np.zeros(known.size, dtype=np.int64)
                    np.maximum.at(maxes, pos, stops)
                uniq = known
            else:
                uniq, inv = np.unique(keys, return_inverse=True)
                maxes = np.zeros(uniq.size, dtype=np.int64)
                np.maximum.at(maxes, inv, stops)
            for k, s in zip(uniq.tolist(), maxes.tolist(), strict=True):
                key = (k >> 20, k & ((1 << 20) - 1))
                out[key] = max(out.get(key, 0), s)
        out = dict(sorted(out.items()))
        self._streams_cache = (tag, out)
        return dict(out)

    def expanded_rows(self) -> dict[str, np.ndarray]:
        """Rows with tree records expanded to their per-level ranges."""
        rows, trees = self.rows, self.trees
        if trees["run"].size == 0:
            return rows
        parts = [rows]
        for level in range(int(trees["levels"].max())):
            live = trees["levels"] > level
            full = (trees["n_items"] >> level) << level
            keep = live & (full > 0)
            if keep.any():
                parts.append(dict(run=trees["run"][keep], arm=trees["arm"][keep],
                                  start=trees["offset"][keep],
                                  stop=trees["offset"][keep] + full[keep],
                                  release_id=trees["release_id"][keep],
                                  count=np.ones(int(keep.sum()), dtype=np.int64)))
        return {f: np.concatenate([p[f] for p in parts]) for f in ROW_FIELDS}

    def round_of(self, run: int, arm: int, index: int) -> int | None:
        """The round of reward (run, arm, index), from the segments; None when no segment
        holds it.  A binary search in the stream's segments (the worst-reward tie rule asks
        this once per tied piece; a scan of the whole table took 0.3 ms each)."""
        ukeys, lo, hi, fi, fr, st, ln = self._segment_index()
        key = int(run) * (1 << 20) + int(arm)
        j = int(np.searchsorted(ukeys, key))
        if j >= ukeys.size or ukeys[j] != key:
            return None
        i = int(lo[j]) + int(np.searchsorted(fi[lo[j]:hi[j]], index, side="right")) - 1
        if i < lo[j] or not index < fi[i] + ln[i]:
            return None
        return int(fr[i] + st[i] * (index - fi[i]))

    # -- posterior reads ----------------------------------------------------------------
    def _segment_index(self):
        """Segments in (run, arm, first_index) order: (stream keys, block start, block end,
        first_index, first_round, stride, length); memoised by the segment table's version."""
        tag = (id(self._segments), self._segments.version)
        cached = getattr(self, "_seg_index", None)
        if cached is not None and cached[0] == tag:
            return cached[1]
        seg = self.segments
        keys = seg["run"] * (1 << 20) + seg["arm"]
        if keys.size > 1 and not bool(np.all((keys[1:] > keys[:-1]) | (
                (keys[1:] == keys[:-1]) & (seg["first_index"][1:] > seg["first_index"][:-1])))):
            order = np.lexsort((seg["first_index"], keys))
            keys = keys[order]
            seg = {k: v[order] for k, v in seg.items()}
        ukeys, lo = np.unique(keys, return_index=True)
        hi = np.r_[lo[1:], keys.size].astype(np.int64)
        index = (ukeys, lo.astype(np.int64), hi, seg["first_index"], seg["first_round"],
                 seg["stride"], seg["length"])
        self._seg_index = (tag, index)
        return index

    def reads_mu2(self, run: np.ndarray, arm: np.ndarray, q_lo: np.ndarray, q_hi: np.ndarray,
                  queries: np.ndarray) -> np.ndarray:
        """Posterior-read μ² of rewards ``queries``: the block ``q_lo[s] … q_hi[s]−1`` (indices
        ascending) belongs to stream (run[s], arm[s]); streams without reads give 0."""
        out = np.zeros(queries.size, dtype=np.float64)
        reads = self.posterior_reads
        if reads["run"].size == 0 or queries.size == 0:
            return out
        skeys = np.asarray(run, dtype=np.int64) * (1 << 20) + np.asarray(arm, dtype=np.int64)
        rkeys = reads["run"] * (1 << 20) + reads["arm"]
        pos = np.searchsorted(skeys, rkeys)
        hit = (pos < skeys.size) & (skeys[np.minimum(pos, skeys.size - 1)] == rkeys)
        if not hit.any():
            return out
        rec = np.flatnonzero(hit)
        pos = pos[rec]
        streams = self.streams()
        n = np.array([streams.get((int(r), int(a)), 0) for r, a in
                      zip(reads["run"][rec].tolist(), reads["arm"][rec].tolist(),
                          strict=True)], dtype=np.int64)
        ukeys, lo, hi, fi, fr, st, ln = self._segment_index()
        seg_lo = np.zeros(rec.size, np.int64)
        seg_hi = np.zeros(rec.size, np.int64)
        if ukeys.size:
            spos = np.minimum(np.searchsorted(ukeys, rkeys[rec]), ukeys.size - 1)
            found = ukeys[spos] == rkeys[rec]
            seg_lo[found], seg_hi[found] = lo[spos[found]], hi[spos[found]]
        cum = np.r_[0, np.cumsum(ln)]
        covered = cum[seg_hi] - cum[seg_lo]
        starts_at_0 = np.zeros(rec.size, bool)
        if fi.size:
            starts_at_0 = (seg_hi > seg_lo) & (fi[np.minimum(seg_lo, fi.size - 1)] == 0)
        bad = (n > 0) & ((covered != n) | ~starts_at_0)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise DpledgerError(
                f"posterior reads of run {int(reads['run'][rec[r]])}, arm "
                f"{int(reads['arm'][rec[r]])} need index → round segments covering its "
                f"{int(n[r])} observations")
        from dpledger.accounting.read_kernels import suffix_mu2_many
        suffix_mu2_many(fi, fr, st, seg_lo, seg_hi, n, reads["first_round"][rec],
                        reads["last_round"][rec], reads["c"][rec], reads["bits"][rec],
                        np.asarray(q_lo, dtype=np.int64)[pos], np.asarray(q_hi, dtype=np.int64)[pos],
                        np.ascontiguousarray(queries, dtype=np.int64), out)
        return out

    _reads_mu2 = reads_mu2          # the name callers used before the query layer moved out

    def posterior_read_mu2(self, run: int, arm: int, indices) -> np.ndarray:
        """The posterior reads' μ² of rewards ``indices`` of stream (run, arm)."""
        idx = np.atleast_1d(np.asarray(indices, dtype=np.int64))
        order = np.argsort(idx, kind="stable")
        vals = self.reads_mu2(np.array([run]), np.array([arm]), np.array([0]),
                               np.array([idx.size]), idx[order])
        out = np.empty_like(vals)
        out[order] = vals
        return out

    def posterior_read_rows(self) -> dict[str, np.ndarray]:
        """The posterior reads expanded to growing-prefix rows (run, arm, start = 0, stop = k,
        count, mu2): one row per stream and prefix length k with draws — the per-round view,
        O(rewards); for tests and inspection, never used by the totals."""
        from dpledger.accounting.posterior_reads import posterior_read_weight
        from dpledger.accounting.read_kernels import read_counts
        reads = self.posterior_reads
        streams = self.streams()
        parts = {f: [] for f in GAUSS_FIELDS}
        if reads["run"].size:
            ukeys, lo, hi, fi, fr, st, _ = self._segment_index()
        for r, a, f, l, c, bits in zip(*(reads[x].tolist() for x in READ_FIELDS), strict=True):
            n = streams.get((r, a), 0)
            if n == 0:
                continue
            j = int(np.searchsorted(ukeys, r * (1 << 20) + a))
            if j >= ukeys.size or ukeys[j] != r * (1 << 20) + a:
                raise DpledgerError(f"posterior reads of run {r}, arm {a} need index → round "
                                    f"segments covering its {n} observations")
            ks = np.zeros(n, np.int64)
            cnt = np.zeros(n, np.int64)
            m = read_counts(fi[lo[j]:hi[j]], fr[lo[j]:hi[j]], st[lo[j]:hi[j]], n, f, l, ks, cnt)
            parts["run"].append(np.full(m, r, np.int64))
            parts["arm"].append(np.full(m, a, np.int64))
            parts["start"].append(np.zeros(m, np.int64))
            parts["stop"].append(ks[:m])
            parts["count"].append(cnt[:m])
            parts["mu2"].append(np.array([posterior_read_weight(k, c, bits)
                                          for k in ks[:m].tolist()],
                                         dtype=np.float64))
        return {f: (np.concatenate(v) if v else
                    np.zeros(0, np.float64 if f == "mu2" else np.int64)) for f, v in parts.items()}

    # -- per-reward queries (accounting/reward_queries.py) ---------------------------------
    # The query layer reads this storage and lives in its own module; these delegations keep
    # the ledger's public interface.
    def storage_versions(self) -> tuple:
        """A tag that changes whenever a record is added or replaced (memo keys)."""
        return (id(self._rows), self._rows.version, id(self._gauss), self._gauss.version,
                id(self._trees), self._trees.version, id(self._reads), self._reads.version,
                id(self._segments), self._segments.version)

    def gaussian_row_parts(self) -> list[dict[str, np.ndarray]]:
        """The inline Gaussian rows as their appended blocks (see :meth:`_Table.parts`)."""
        return self._gauss.parts()

    def n_gaussian_rows(self) -> int:
        return len(self._gauss)

    def n_posterior_reads(self) -> int:
        return len(self._reads)

    def discrete_reads(self) -> bool:
        """Whether the inline weights are the exact sampler's discrete-Gaussian 2ρ (posterior
        reads with bits > 0, :mod:`~dpledger.accounting.posterior_reads`) rather than Gaussian
        μ²; a ledger mixing the two kinds is refused."""
        bits = self.posterior_reads["bits"]
        if not bits.size or not np.any(bits > 0):
            return False
        if np.any(bits == 0) or len(self._gauss):
            raise DpledgerError("a ledger cannot mix discrete-Gaussian posterior reads (exact "
                                "sampler) with continuous Gaussian reads")
        return True

    def piece_totals(self) -> PieceTotals:
        """:func:`~dpledger.accounting.reward_queries.piece_totals` (memoised)."""
        return rq.piece_totals(self)

    def _piece_keys(self, pt: PieceTotals) -> tuple[np.ndarray, str]:
        return rq.piece_keys(self, pt)

    def _per_reward(self, pt: PieceTotals, limit: int | None = None, sample: int | None = None):
        return rq.per_reward(self, pt, limit, sample)

    def _signature_groups(self, pt: PieceTotals) -> np.ndarray:
        return rq.signature_groups(pt, self.releases)

    def _inline_mu2_exact(self, run: int, arm: int, index: int) -> float:
        return rq.inline_mu2_exact(self, run, arm, index)

    def piece_composition(self, pt: PieceTotals, p: int) -> Composition:
        return rq.piece_composition(self, pt, p)

    def composition_of(self, run: int, arm: int, index: int) -> Composition:
        """Exact composition of one reward, by scanning the rows that touch it."""
        return rq.composition_of(self, run, arm, index)

    def n_distinct_compositions(self, limit: int = 2_000_000) -> int | None:
        """:func:`~dpledger.accounting.reward_queries.n_distinct_compositions`."""
        return rq.n_distinct_compositions(self, limit)

    def maximal_compositions(self) -> list[Composition]:
        """Every maximal per-reward composition, no cap
        (:func:`~dpledger.accounting.reward_queries.maximal_compositions`)."""
        return rq.maximal_compositions(self)

    def distinct_compositions(self) -> list[tuple[Composition, int]]:
        """Each distinct per-reward composition with the number of rewards that have it."""
        return rq.distinct_compositions(self)

    def worst_reward(self, deltas: Sequence[float] = (1e-9,), runs: Iterable[int] | None = None,
                     adaptive: bool = True) -> WorstReward | None:
        """:func:`~dpledger.accounting.reward_queries.worst_reward`."""
        return rq.worst_reward(self, deltas, runs, adaptive)

    # -- maintenance --------------------------------------------------------------------
    def compact(self) -> "RewardLedger":
        """Merge rows in place; per-reward totals never change.

        Rows with equal (run, arm, start, stop, release) add their counts; then rows with equal
        (run, arm, release, count) whose ranges are consecutive in the arm's stream join.
        Segments, trees and stream lengths are put in (run, arm, position) order.
        """
        rows = self.rows
        if rows["run"].size:
            self._rows.replace(_coalesce(rows, ("run", "arm", "release_id"), "count"))
        g = self.gaussian_rows
        if g["run"].size:
            order = np.lexsort((g["mu2"], g["stop"], g["start"], g["arm"], g["run"]))
            g = {k: v[order] for k, v in g.items()}
            same = np.r_[False, (g["run"][1:] == g["run"][:-1]) & (g["arm"][1:] == g["arm"][:-1])
                         & (g["start"][1:] == g["start"][:-1]) & (g["stop"][1:] == g["stop"][:-1])
                         & (g["mu2"][1:] == g["mu2"][:-1])]
            grp = np.cumsum(~same) - 1
            first = np.flatnonzero(~same)
            out = {k: v[first] for k, v in g.items()}
            out["count"] = np.bincount(grp, weights=g["count"]).astype(np.int64)
            self._gauss.replace(out)
        # canonical order for the rest too, so the JSON does not depend on how runs were split
        # over workers (chunks are appended in completion order)
        seg = self.segments
        if seg["run"].size:
            order = np.lexsort((seg["first_index"], seg["arm"], seg["run"]))
            self._segments.replace({k: v[order] for k, v in seg.items()})
        tr = self.trees
        if tr["run"].size:
            order = np.lexsort((tr["offset"], tr["arm"], tr["run"]))
            self._trees.replace({k: v[order] for k, v in tr.items()})
        rd = self.posterior_reads
        if rd["run"].size:
            order = np.lexsort((rd["bits"], rd["c"], rd["last_round"], rd["first_round"],
                                rd["arm"], rd["run"]))
            self._reads.replace({k: v[order] for k, v in rd.items()})
        self._streams = dict(sorted(self._streams.items()))
        return self

    def merge(self, other: "RewardLedger") -> "RewardLedger":
        """A new ledger holding both (release ids re-interned; runs are kept as they are)."""
        out = RewardLedger()
        for led in (self, other):
            remap = np.array([out.intern(r) for r in led.releases], dtype=np.int64)
            rows = led.rows
            if rows["run"].size:
                out._rows.append(dict(rows, release_id=remap[rows["release_id"]]))
            if led.gaussian_rows["run"].size:
                out._gauss.append(led.gaussian_rows)
            trees = led.trees
            if trees["run"].size:
                out._trees.append(dict(trees, release_id=remap[trees["release_id"]]))
            if led.segments["run"].size:
                out._segments.append(led.segments)
            if led.posterior_reads["run"].size:
                out._reads.append(led.posterior_reads)
            for (r, a), n in led._streams.items():
                out.set_stream_length(r, a, n)
        return out

    # -- JSON and dp_accounting -----------------------------------------------------------
    def to_json(self, arrays: bool = False) -> dict:
        """The ledger as JSON data; ``arrays=True`` leaves the columns as numpy arrays (for
        :func:`~dpledger.accounting.schema.write_json_stream_atomic`, which streams them)."""
        def table(cols, fields):
            if arrays:
                return {f: np.asarray(cols[f]) for f in fields}
            return {f: (cols[f].tolist() if f not in _FLOAT_FIELDS else [float(x) for x in cols[f]])
                    for f in fields}

        return {
            "releases": [release_to_json(r) for r in self.releases],
            "rows": table(self.rows, ROW_FIELDS),
            "gaussian_rows": table(self.gaussian_rows, GAUSS_FIELDS),
            "trees": table(self.trees, TREE_FIELDS),
            "posterior_reads": table(self.posterior_reads, READ_FIELDS),
            "segments": table(self.segments, SEGMENT_FIELDS),
            "streams": {"run": [r for r, _ in self._streams], "arm": [a for _, a in self._streams],
                        "length": list(self._streams.values())},
        }

    @classmethod
    def from_json(cls, data: Mapping) -> "RewardLedger":
        if not isinstance(data, Mapping):
            raise DpledgerError("a ledger must be a JSON object")
        try:
            out = cls()
            for r in data["releases"]:
                out.intern(release_from_json(r))
            for name, fields, table in (("rows", ROW_FIELDS, out._rows),
                                        ("gaussian_rows", GAUSS_FIELDS, out._gauss),
                                        ("trees", TREE_FIELDS, out._trees),
                                        ("segments", SEGMENT_FIELDS, out._segments)):
                cols = {f: np.asarray(data[name][f]) for f in fields}
                if name in ("rows", "gaussian_rows") and cols["run"].size:
                    out._check_rows(cols, has_release=name == "rows")
                table.append(cols)
            if "posterior_reads" in data:
                pr = dict(data["posterior_reads"])
                pr.setdefault("bits", np.zeros(np.size(pr["run"]), np.int64))  # older files
                cols = {f: np.asarray(pr[f]) for f in READ_FIELDS}
                if cols["run"].size:
                    out.add_posterior_reads(*(cols[f] for f in READ_FIELDS))
            s = data.get("streams", {"run": [], "arm": [], "length": []})
            for r, a, n in zip(s["run"], s["arm"], s["length"], strict=True):
                out.set_stream_length(r, a, n)
        except (KeyError, TypeError) as exc:
            raise DpledgerError(f"malformed ledger JSON: missing or bad field {exc}") from None
        return out

    def to_dp_event(self, deltas: Sequence[float] = (1e-9,)):
        """A ``dp_accounting.DpEvent`` that dominates every reward's composition: the maximal
        composition when one dominates all (then exact), otherwise their element-wise maximum
        (every non-Gaussian release at its largest count, the largest Gaussian μ²), an upper
        bound.  (The worst reward by one ranking key would not bound the others: issue 26.)
        ``deltas`` is unused and kept for callers of the older signature."""
        from dpledger.accounting.realized import elementwise_max
        comps = self.maximal_compositions()
        if not comps:
            from dp_accounting import dp_event as E
            return E.NoOpDpEvent()
        return (comps[0] if len(comps) == 1 else elementwise_max(comps)).to_dp_event()

    @classmethod
    def from_dp_event(cls, event, run: int = 0, arm: int = 0) -> "RewardLedger":
        """A one-reward ledger whose reward received every release of ``event``."""
        out = cls()
        for release, count in Composition.from_dp_event(event).items:
            out.add(run, arm, 0, 1, release, count)
        out.set_stream_length(run, arm, 1)
        return out


def _coalesce(rows: Mapping[str, np.ndarray], group: tuple[str, ...], count: str) -> dict:
    order = np.lexsort((rows["stop"], rows["start"]) + tuple(rows[g] for g in reversed(group)))
    r = {k: v[order] for k, v in rows.items()}
    same = np.r_[False, np.all([r[g][1:] == r[g][:-1] for g in group], axis=0)
                 & (r["start"][1:] == r["start"][:-1]) & (r["stop"][1:] == r["stop"][:-1])]
    grp = np.cumsum(~same) - 1
    first = np.flatnonzero(~same)
    out = {k: v[first] for k, v in r.items()}
    out[count] = np.bincount(grp, weights=r[count]).astype(np.int64)
    # join consecutive ranges with equal key and count
    joinable = np.r_[False, np.all([out[g][1:] == out[g][:-1] for g in group], axis=0)
                     & (out[count][1:] == out[count][:-1]) & (out["start"][1:] == out["stop"][:-1])]
    if joinable.any():
        grp = np.cumsum(~joinable) - 1
        first = np.flatnonzero(~joinable)
        last = np.r_[first[1:] - 1, grp.size - 1]
        joined = {k: v[first] for k, v in out.items()}
        joined["stop"] = out["stop"][last]
        out = joined
    return out


def _arithmetic_runs(rounds: np.ndarray) -> tuple[np.ndarray, ...]:
    """Split increasing rounds into maximal arithmetic runs: (first_index, first_round, stride,
    length) per run."""
    n = rounds.size
    if n == 0:
        return (np.zeros(0, np.int64),) * 4
    if n == 1:
        return np.array([0]), rounds[:1], np.array([1]), np.array([1])
    d = np.diff(rounds)
    firsts, i = [], 0
    # a run starts at i and extends while the stride stays d[i]; one Python step per run.
    change = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
    ci = 0
    while i < n:
        firsts.append(i)
        if i == n - 1:
            break
        # next change point strictly after i in d
        while ci < change.size and change[ci] <= i:
            ci += 1
        end = change[ci] if ci < change.size else n - 1   # last index included in run
        i = end + 1 if end > i else i + 1
    firsts = np.array(firsts, dtype=np.int64)
    lengths = np.diff(np.r_[firsts, n])
    strides = np.where(lengths > 1, np.r_[d, 1][firsts], 1)
    return firsts, rounds[firsts], strides, lengths
