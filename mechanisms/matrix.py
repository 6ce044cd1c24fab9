"""Vector and symmetric-matrix noise, and the binary mechanism over vectors and matrices
(issue 22 §1 noise side, §2): what the private contextual policies draw.

**Layout.**  A statistic is ``B`` *blocks* of ``E`` entries each, held flat (length D = B·E):
a block is a vector (E = d) or a symmetric p×p matrix stored as its upper triangle, row by row
(E = p(p+1)/2; entry (i, j), i ≤ j, at :func:`packed_index`).  Disjoint per-arm models under
record privacy release one block per arm in every node; a shared model one block.

**Noise draws** (one source each; compiled).  Each fills one block of ``out``:

* :func:`gaussian_vector_draw` — N(0, σ²) per entry (the law of
  :class:`~dpledger.accounting.releases.GaussianVectorRelease`);
* :func:`sym_gaussian_draw` — the symmetric Gaussian Z = (Z′ + Z′ᵀ)/√2, Z′ᵢⱼ i.i.d. N(0, σ²)
  (Shariff & Sheffet 2018, Gaussian mode), drawn as its upper triangle: the entries are
  independent, off-diagonal N(0, σ²) and diagonal N(0, 2σ²) — the same law
  (:class:`~dpledger.accounting.releases.SymmetricMatrixGaussianRelease`);
* :func:`laplace_entries_draw` — Lap(b_e) per entry, scale b_e per entry, drawn as a random
  sign times an exponential (:class:`~dpledger.accounting.releases.LaplaceVectorRelease`, one
  per entry group);
* :func:`wishart_draw` — W ~ W_p(L²·I, k) by the **Bartlett decomposition** (Bartlett 1933;
  Smith & Hocking 1972, Algorithm AS 53): W = L²·A·Aᵀ with A lower triangular, A_ii =
  √χ²_{k−i} (i = 0 … p−1) and A_ij ~ N(0, 1) below the diagonal, all independent — O(p³)
  whatever k, where a sum of k outer products would cost O(k·p²) with k in the thousands
  (:class:`~dpledger.accounting.releases.WishartRelease`; first two moments tested:
  E W = k·L²·I, Var W_ij = k·L⁴·(1 + [i = j]));
* the exact sampler's forms, on the lattice (integers held in float64, |x| < 2^52):
  :func:`discrete_laplace_entries_draw` (CKS20 Algorithm 2 per entry, scale t_e = tnum_e/2^20
  lattice units, :func:`~dpledger.mechanisms.noise.discrete_laplace_int`) and
  :func:`discrete_gaussian_entries_draw` (N_ℤ(0, s_e²) per entry, integer s_e,
  :func:`~dpledger.mechanisms.noise.discrete_gaussian_int`).  For the symmetric matrix the
  upper triangle gets independent discrete Gaussians with s_off ≥ σ·2^b/unit and s_diag ≥
  √2·σ·2^b/unit (rounded up); their zCDP ρ is bounded by
  :func:`dpledger.accounting.lattice.lattice_gaussian_rho` and recorded as a
  ``discrete_gaussian_total`` release whose ρ is never below the drawn one.

**The tree** (:func:`tree_new`, :func:`tree_push`, :func:`tree_prefix`).  The binary mechanism
of Chan, Shi & Song 2011 (Algorithm 2) and Dwork, Naor, Pitassi & Rothblum 2010 over D-vectors,
with the scalar counter's node-closing rule (:mod:`dpledger.mechanisms.counters`): item t (1-based)
closes the p-sum at level i = the lowest set bit of t over items (t − 2^i, t], which gets one
fresh noise draw; the noisy prefix after t items is the sum of the noisy p-sums named by the set
bits of t.  With ``levels`` levels a tree holds at most 2^levels − 1 items and every item lies in
at most ``levels`` nodes (the p-sums containing it are nested, one per level at most).  The noisy
prefix is kept as ``h_j`` = Σ of the noisy p-sums over the set bits ≥ j (top level first, as the
scalar counter), so a push costs O(D) amortised plus one node's draws, and the prefix is read in
O(1) (a view of ``h_0``).

*Padding* (``pad``; Shariff & Sheffet's tree, their code's pan-private accumulator): every prefix
carries exactly ``levels`` noise draws — for each unset bit ℓ a padding draw P_ℓ of the same
law, drawn once per level when the tree is created.  Their regulariser (and the Wishart mode's
negative shift) assumes a fixed number m of noise matrices in every prefix; with the plain tree
the count is popcount(t).  Padding is independent of every record and of the nodes' noise, so
the prefixes are post-processing of the node releases and of data-free draws: reusing P_ℓ each
time bit ℓ is unset reveals nothing (what must never be reused is a *node's* noise once its
p-sum is folded into a larger node).  Padding draws touch no record and write no ledger record;
each prefix still carries ``levels`` independent draws of the node law.

*The ledger.*  A push writes the tree's records (``rec``: columns arm = the tree's stream,
offset, n_items, levels, release_id; one per release the node makes, e.g. one per entry group)
with the new item count **before** drawing the node's noise, as
:func:`~dpledger.mechanisms.noise.tree_noise` does for the scalar counter: a tree record of
:class:`~dpledger.accounting.ledger.RewardLedger` counts every completed dyadic node as one
release, which is exact for the first item of the tree, the worst-off one.

*Change detection.*  ``ist[g, 0]`` is tree g's item count t; its noisy prefix changes exactly
when t does (a push closes one node), so a policy caches its factorisation of a block together
with the t it was computed at and refactors only when t moved (:func:`tree_version`).

*Several trees* (``n_trees``) share one state, indexed by g: per-arm streams of a reward-private
policy each own a tree (its items are that arm's records), and tree g's records name stream g.
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from numba.np.random.distributions import random_standard_exponential as _standard_exponential
from numba.np.random.generator_core import next_uint64 as _next_uint64

from dpledger.mechanisms.noise import discrete_gaussian_int, discrete_laplace_int

# noise kinds of a tree's node releases
GAUSS_VEC, GAUSS_SYM, LAPLACE, WISHART, DLAPLACE, DGAUSS = 0, 1, 2, 3, 4, 5
KIND_NAMES = {GAUSS_VEC: "gaussian_vector", GAUSS_SYM: "gaussian_sym_matrix",
              LAPLACE: "laplace_entries", WISHART: "wishart",
              DLAPLACE: "discrete_laplace_entries", DGAUSS: "discrete_gaussian_entries"}
LAPLACE_DEN = 1 << 20          # discrete Laplace scales are tnum / 2^20 lattice units (noise.py)
EXACT_LIMIT = 2.0 ** 52        # float64 holds lattice integers exactly below this


# -- layout --------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def packed_index(i, j, p):
    """Index of entry (i, j), i ≤ j, of a symmetric p×p matrix stored as its upper triangle row
    by row: row i starts at i·p − i(i−1)/2."""
    return i * p - (i * (i - 1)) // 2 + (j - i)


def packed_size(p: int) -> int:
    return p * (p + 1) // 2


def diagonal_mask(p: int) -> np.ndarray:
    """True at the diagonal entries of the packed layout."""
    m = np.zeros(packed_size(p), dtype=np.bool_)
    for i in range(p):
        m[i * p - (i * (i - 1)) // 2] = True
    return m


@njit(cache=True)
def unpack_sym(packed, off, p, scale, out):
    """out (p×p, full) = scale · the symmetric matrix stored at packed[off : off + p(p+1)/2]."""
    k = off
    for i in range(p):
        for j in range(i, p):
            v = packed[k] * scale
            out[i, j] = v
            out[j, i] = v
            k += 1


@njit(cache=True)
def add_outer_packed(v, out, off):
    """out[off:] += the upper triangle of v vᵀ (the rank-one factor v; v vᵀ is never formed)."""
    p = v.size
    k = off
    for i in range(p):
        vi = v[i]
        for j in range(i, p):
            out[k] += vi * v[j]
            k += 1


@njit(cache=True)
def add_outer_packed_lattice(v, inv_unit, out, off):
    """out[off:] += ⌊v_i v_j·inv_unit + ½⌋ entry by entry: the exact sampler rounds each
    record's contribution to the lattice before it is summed (the rule of
    :class:`~dpledger.mechanisms.samplers.ExactSampler`: deterministic, monotone,
    translation-equivariant), so every node sum is an integer whatever the data."""
    p = v.size
    k = off
    for i in range(p):
        vi = v[i]
        for j in range(i, p):
            out[k] += np.floor(vi * v[j] * inv_unit + 0.5)
            k += 1


# -- noise draws (one block each) -----------------------------------------------------------------

@njit(cache=True)
def gaussian_vector_draw(rng, sigma, out, off, n):
    """out[off : off + n] = n independent N(0, σ²) draws, in index order."""
    for e in range(n):
        out[off + e] = sigma * rng.standard_normal()


@njit(cache=True)
def sym_gaussian_draw(rng, sigma, p, out, off):
    """The upper triangle of Z = (Z′ + Z′ᵀ)/√2, Z′ᵢⱼ i.i.d. N(0, σ²): independent entries,
    N(0, σ²) off the diagonal and N(0, 2σ²) on it (Z_ii = √2·Z′_ii), row by row (each row's
    diagonal entry first, then its off-diagonal run: no per-entry branch)."""
    diag = sigma * np.sqrt(2.0)
    k = off
    for i in range(p):
        out[k] = diag * rng.standard_normal()
        for e in range(k + 1, k + p - i):
            out[e] = sigma * rng.standard_normal()
        k += p - i


@njit(cache=True)
def laplace_entries_draw(rng, scales, out, off):
    """out[off + e] = Lap(scales[e]), in entry order, drawn as s·E·b: E a standard exponential
    (numpy's ziggurat, one 64-bit word in the common case) and s = ±1 one bit of a 64-bit word
    drawn once per 64 entries.  This is the Laplace law exactly — |Lap(b)|/b is Exp(1) and its
    sign an independent fair coin — at about 4 ns a draw where one logarithm per draw
    (``Generator.laplace``'s inverse CDF, :func:`~dpledger.mechanisms.noise.laplace_bits`)
    costs 8.5 (benchmarks/bench_contextual_private.py S4); the sign is applied arithmetically,
    since a coin-flip branch is mispredicted half the time."""
    bg = rng.bit_generator
    bits = np.uint64(0)
    for e in range(scales.size):
        k = e & 63
        if k == 0:
            bits = _next_uint64(bg)
        sign = 1.0 - 2.0 * np.float64((bits >> np.uint64(k)) & np.uint64(1))
        out[off + e] = sign * scales[e] * _standard_exponential(bg)


@njit(cache=True)
def wishart_draw(rng, scale2, k, p, out, off, A):
    """The upper triangle of W ~ W_p(scale2·I, k), k > p − 1, by the Bartlett decomposition
    (module docstring): A (p×p scratch) lower triangular with A_ii = √χ²_{k−i} and A_ij ~ N(0, 1)
    for i > j, drawn row by row (diagonal first in each row); W = scale2·A·Aᵀ."""
    for i in range(p):
        A[i, i] = np.sqrt(rng.chisquare(k - i))
        for j in range(i):
            A[i, j] = rng.standard_normal()
    kk = off
    for i in range(p):
        for j in range(i, p):
            s = 0.0
            for c in range(i + 1):          # A is lower triangular: columns ≤ min(i, j) = i
                s += A[i, c] * A[j, c]
            out[kk] = scale2 * s
            kk += 1


@njit(cache=True)
def discrete_laplace_entries_draw(rng, tnums, out, off):
    """out[off + e] = Z_e ~ discrete Laplace of scale tnums[e]/2^20 lattice units (CKS20
    Algorithm 2, exact integer arithmetic), as float64 integers."""
    for e in range(tnums.size):
        out[off + e] = float(discrete_laplace_int(rng, tnums[e], LAPLACE_DEN))


@njit(cache=True)
def discrete_gaussian_entries_draw(rng, sigmas, out, off):
    """out[off + e] = Z_e ~ N_ℤ(0, sigmas[e]²), integer sigmas[e] ≥ 1 (exact: staircase or CKS20
    Algorithm 3, :func:`~dpledger.mechanisms.noise.discrete_gaussian_int`), as float64."""
    bg = rng.bit_generator
    for e in range(sigmas.size):
        out[off + e] = float(discrete_gaussian_int(bg, sigmas[e]))


@njit(cache=True)
def block_draw(rng, spec, out, off, A):
    """One block of node noise of the law ``spec`` = (kind, sigma, fscales, iscales, k, p)."""
    kind, sigma, fscales, iscales, k, p = spec
    if kind == GAUSS_VEC:
        gaussian_vector_draw(rng, sigma, out, off, fscales.size)
    elif kind == GAUSS_SYM:
        sym_gaussian_draw(rng, sigma, p, out, off)
    elif kind == LAPLACE:
        laplace_entries_draw(rng, fscales, out, off)
    elif kind == WISHART:
        wishart_draw(rng, sigma, k, p, out, off, A)
    elif kind == DLAPLACE:
        discrete_laplace_entries_draw(rng, iscales, out, off)
    else:
        discrete_gaussian_entries_draw(rng, iscales, out, off)


def noise_spec(kind: int, *, entries: int, sigma: float = 0.0, scales=None, iscales=None,
               k: int = 0, p: int = 0) -> tuple:
    """The compiled-form description of one block's noise law: (kind, sigma, fscales (E,),
    iscales (E,) int64, k, p).  ``sigma``: the Gaussian σ, or L² for Wishart; ``scales``: the
    Laplace scale of each entry; ``iscales``: the discrete Laplace numerators (2^-20 units) or
    the discrete Gaussian σ of each entry; ``k``, ``p``: Wishart degrees of freedom and matrix
    size (also p of a symmetric Gaussian)."""
    f = np.zeros(entries) if scales is None else np.ascontiguousarray(scales, dtype=np.float64)
    i = (np.zeros(entries, dtype=np.int64) if iscales is None
         else np.ascontiguousarray(iscales, dtype=np.int64))
    if f.size != entries or i.size != entries:
        raise ValueError("noise spec: one scale per entry of the block")
    return (np.int64(kind), float(sigma), f, i, np.int64(k), np.int64(p))


# -- the tree ---------------------------------------------------------------------------------------

def tree_new(n_trees: int, levels: int, blocks: int, entries: int, records) -> tuple:
    """A zeroed state of ``n_trees`` trees of ``levels`` levels over items of ``blocks`` ×
    ``entries`` numbers.  ``records``: the release ids of the ledger records one node makes
    (one per release: e.g. one per entry group); tree g's records name stream g.  Memory:
    (3·levels + 3)·blocks·entries floats per tree (p-sums, prefix sums, padding, scratch)."""
    D = blocks * entries
    rids = np.asarray(records, dtype=np.int64).ravel()
    n_rec = rids.size
    rec = np.zeros((5, n_trees * n_rec), dtype=np.int64)
    for g in range(n_trees):
        for r in range(n_rec):
            c = g * n_rec + r
            rec[0, c] = g                   # stream
            rec[3, c] = levels
            rec[4, c] = rids[r]
    clean = np.zeros((n_trees, levels, D))
    h = np.zeros((n_trees, levels + 1, D))
    padn = np.zeros((n_trees, levels, D))
    ist = np.zeros((n_trees, 3), dtype=np.int64)      # t, blocks; ist[0, 2]: pushes of all trees
    ist[:, 1] = blocks
    return (clean, h, padn, ist, rec, np.zeros(D), np.int64(n_rec))


@njit(cache=True, inline="always")
def lowest_set_bit(t):
    i = 0
    while (t >> i) & 1 == 0:
        i += 1
    return i


@njit(cache=True)
def _draw_node(rng, spec, tr, out, A):
    clean, h, padn, ist, rec, scratch, n_rec = tr
    blocks = ist[0, 1]
    E = out.size // blocks
    for b in range(blocks):
        block_draw(rng, spec, out, b * E, A)


@njit(cache=True)
def tree_pad_init(tr, g, rng, spec, A):
    """Padded trees: draw the padding of every level of tree g (before its first item), so the
    empty prefix already carries ``levels`` noise draws; h_j = Σ_{ℓ ≥ j} padding_ℓ."""
    clean, h, padn, ist, rec, scratch, n_rec = tr
    levels = clean.shape[1]
    D = clean.shape[2]
    for j in range(levels - 1, -1, -1):
        _draw_node(rng, spec, tr, padn[g, j], A)
        for e in range(D):
            h[g, j, e] = h[g, j + 1, e] + padn[g, j, e]


@njit(cache=True)
def tree_push(tr, g, item, rng, spec, pad, A, capture):
    """Add ``item`` (D numbers) to tree g: close the p-sum at level i = lowest set bit of the new
    count t, write the tree's ledger records (n_items = t), then draw that node's noise (one
    block draw per block); with ``pad``, the levels below i (now unset) carry their padding.
    ``capture`` ((rows, D + 1), tests): if it has rows, the noise of the n-th push over all
    trees (n from 0) is stored in row n, with g in column D; a capture of 2D + 1 columns also
    holds the node's clean p-sum in columns D + 1 … 2D (white-box audits: the released node is
    clean + noise).  Returns the level closed.  :func:`tree_close` then :func:`tree_release`
    (a step form records the node between the two)."""
    i = tree_close(tr, g, item)
    tree_release(tr, g, i, rng, spec, pad, A, capture)
    return i


@njit(cache=True, inline="always")
def tree_close(tr, g, item):
    """The clean half of a push: ``item`` closes the p-sum of tree g at level i = the lowest
    set bit of the new count t (over items (t − 2^i, t]), the tree's ledger records name
    n_items = t; nothing is drawn.  Returns i."""
    clean, h, padn, ist, rec, scratch, n_rec = tr
    levels = clean.shape[1]
    D = clean.shape[2]
    t = ist[g, 0] + 1
    if t >= (np.int64(1) << levels):
        raise ValueError("tree: more items than its 2^levels - 1")
    i = lowest_set_bit(t)
    node = clean[g, i]
    for e in range(D):
        node[e] = item[e]
    for j in range(i):
        cj = clean[g, j]
        for e in range(D):
            node[e] += cj[e]
            cj[e] = 0.0
    ist[g, 0] = t
    for r in range(n_rec):              # the record first, then the noise
        rec[2, g * n_rec + r] = t
    return i


@njit(cache=True, inline="always")
def capture_node(capture, n, noise, node, g):
    """Tests and white-box audits: the n-th node draw of a run (``noise``, D numbers) into
    row n of ``capture`` if it has that row, with the tree g in column D; a capture of 2D + 1
    columns also holds the node's clean sum in columns D + 1 … 2D."""
    D = noise.size
    if n < capture.shape[0]:
        for e in range(D):
            capture[n, e] = noise[e]
        capture[n, D] = g
        if capture.shape[1] > D + 1:
            for e in range(D):
                capture[n, D + 1 + e] = node[e]


@njit(cache=True, inline="always")
def tree_release(tr, g, i, rng, spec, pad, A, capture):
    """The noisy half of a push: the node tree_close closed at level i gets its noise draw,
    and the prefix sums h_j (j ≤ i) are rebuilt (padding below i with ``pad``)."""
    clean, h, padn, ist, rec, scratch, n_rec = tr
    D = clean.shape[2]
    node = clean[g, i]
    _draw_node(rng, spec, tr, scratch, A)
    n = ist[0, 2]
    ist[0, 2] = n + 1
    capture_node(capture, n, scratch, node, g)
    hi = h[g, i]
    above = h[g, i + 1]
    for e in range(D):
        hi[e] = above[e] + node[e] + scratch[e]
    for j in range(i - 1, -1, -1):
        hj = h[g, j]
        if pad:
            nxt = h[g, j + 1]
            pj = padn[g, j]
            for e in range(D):
                hj[e] = nxt[e] + pj[e]
        else:
            for e in range(D):
                hj[e] = hi[e]


@njit(cache=True, inline="always")
def tree_prefix(tr, g):
    """Tree g's noisy prefix (a view of h_0): the noisy sum of its items so far."""
    return tr[1][g, 0]


@njit(cache=True, inline="always")
def tree_version(tr, g):
    """Tree g's item count t: its noisy prefix changed since a cached read iff t did."""
    return tr[3][g, 0]


def tree_records(tr) -> dict:
    """The ledger's tree records of a state (``RunOutput.trees``: arm, offset, n_items,
    levels, release_id), the empty trees left out."""
    rec = tr[4]
    keep = rec[2] > 0
    return {"arm": rec[0][keep].copy(), "offset": rec[1][keep].copy(),
            "n_items": rec[2][keep].copy(), "levels": rec[3][keep].copy(),
            "release_id": rec[4][keep].copy()}


def tree_bytes(n_trees: int, levels: int, blocks: int, entries: int) -> int:
    """Bytes of a :func:`tree_new` state (memory estimates)."""
    return 8 * n_trees * (3 * levels + 2) * blocks * entries + 8 * blocks * entries
