"""The smooth binary mechanism (Andersson & Pagh, "A Smooth Binary Mechanism for Efficient
Private Continual Observation", NeurIPS 2023, arXiv 2306.09666; docs/algorithms.md#smooth-binary-counter).
Provenance: reconstructed (the paper's text was not at hand; the choices are named below and in
docs/algorithms.md#smooth-binary-counter).

The binary tree of :mod:`dpledger.mechanisms.counters` puts item t at leaf t, so the running
count at t sums popcount(t) nodes — between 1 and ``levels`` of them — and its noise varies
from step to step.  The smooth mechanism keeps the dyadic tree of height h but uses only the
leaves whose h-bit index has exactly w ones, in increasing order: l_0 = 2^w − 1 < l_1 < l_2 < ….

* **Placement** (choice): item j (1-based) sits at leaf l_{j−1}; the running count after item
  t is the sum over the positions below l_t, i.e. the dyadic decomposition of [0, l_t): one
  node per 1-bit p of l_t (the node at level p covers the positions that agree with l_t above
  p and have a 0 at p).  Every step sums exactly **w nodes**, so every step has the same noise
  law (the paper's "smooth" property).
* **Sensitivity**: an item at a weight-w position lies in a node only at a level where its
  position has a 0, so in at most **h − w** nodes; the first item lies in the most (exactly
  #{p ∈ [w, h): C(p, w) ≤ n} nodes after n items,
  :func:`dpledger.accounting.smooth_tree.smooth_worst_nodes`).
* **Noise** (choice): every node that holds items gets Lap(b) with b = (h − w)/ε; a node of
  the decomposition that holds none is the constant 0, released without noise (it depends on
  no reward; noise there would touch no reward and have no ledger row, which this toolkit does
  not draw).  The empty nodes of step t are the z_t trailing 1-bits of l_t (below them every bit
  is 1, so no weight-w index fits), so the running count's noise is a sum of w − z_t
  independent Lap(b), variance 2·(w − z_t)·b² (:func:`smooth_variances`), at most 2·w·b²
  (:func:`smooth_variance`).  The paper noises every node, so that the law is the same at every
  step; here it varies with z_t and is never larger.
* **Shape** (choice): for Gaussian noise the paper balances w = h/2 (variance ∝ w·(h − w));
  for Laplace noise the per-step variance is 2·w·(h − w)²/ε², and :func:`smooth_shape` takes
  the (h, w) with C(h, w) ≥ L + 1 (leaves l_0 … l_L) that minimises it (ties: the smaller h).
  At L = 10⁶ that is h = 33, w = 27: variance at most 1944/ε² (1655/ε² on average over
  t ≤ 10⁶) against the binary tree's 2·20²·popcount(t)/ε² (7908/ε² on average, 15200/ε² at
  the worst t).

Each step releases exactly one node that holds items (the node containing the item just
pushed; the others are new empty nodes or nodes already released), so a tree of n items draws n
Laplace noises and writes n ledger rows, one per released node, each its exact range of items:
the per-reward certificate read off the ledger is exact for every reward, not only the worst.

Protocol (state: float64 ``fs`` and int64 ``ist``; h ≤ 62):

``smooth_push(fs, ist, x) -> n_new``
    take item ``x``, move to the next leaf; ``n_new`` nodes of the new leaf's decomposition are
    new (all w at the first item).
``smooth_node(fs, ist, k) -> (value, start, stop)``
    the k-th new node (k < n_new): its clean sum and the stream range [start, stop) it covers
    (start = stop for an empty node).
``smooth_commit(fs, ist, k, noisy)``
    store the k-th new node's noisy value; after the last one the output is re-summed.
``smooth_output(fs, ist) -> float``
    the noisy running count: the sum of the w noisy nodes of the current leaf.
``smooth_step(...)``, ``smooth_run(...)``
    push, draw ``Lap(scale)`` for the new non-empty node (after its ledger row), commit.
"""
from __future__ import annotations

import math
from math import comb

import numpy as np
from dpledger._jit import njit

from dpledger.accounting.ledger import RewardLedger, RowBuffer
from dpledger.errors import DpledgerError, check_count
from dpledger.mechanisms.counters import Counter
from dpledger.mechanisms.noise import laplace_bits, write_row
from dpledger.mechanisms.samplers import Sampler

SMOOTH_MAX_HEIGHT = 62          # leaf indices stay below 2^62 in int64

# ist layout: [t, h, w, offset, max_items, leaf, prev_leaf, n_new, pending levels (h)]
# fs layout : [out, acc (h), noisy (h)]; int per level in ist after pending: blk (h), first (h),
# cnt (h).
_I_T, _I_H, _I_W, _I_OFF, _I_MAX, _I_LEAF, _I_PREV, _I_NNEW, _I_PEND = range(9)
SLOT_OFFSET, SLOT_NEW = _I_OFF, _I_NNEW   # for callers: a tree's stream offset, its new nodes


def _best_shape(max_items: int, cost) -> tuple[int, int]:
    """The (h, w), h ≤ SMOOTH_MAX_HEIGHT, with C(h, w) ≥ L + 1 and ``cost(h, w)`` smallest
    (ties: smaller h, then smaller w), by searching every shape."""
    L = int(check_count("max_items", max_items))
    best = None
    for h in range(2, SMOOTH_MAX_HEIGHT + 1):
        for w in range(1, h):
            if comb(h, w) >= L + 1:
                key = (cost(h, w), h, w)
                if best is None or key < best:
                    best = key
    if best is None:
        raise DpledgerError(f"smooth mechanism: no tree of height ≤ {SMOOTH_MAX_HEIGHT} holds "
                            f"{L} items")
    return best[1], best[2]


def smooth_shape(max_items: int) -> tuple[int, int]:
    """(h, w) for a stream of at most L = ``max_items`` items: C(h, w) ≥ L + 1 and the Laplace
    per-step variance factor w·(h − w)² smallest (ties: smaller h, then smaller w).
    Reconstructed choice (docs/algorithms.md#smooth-binary-counter)."""
    return _best_shape(max_items, lambda h, w: w * (h - w) ** 2)


def smooth_shape_gaussian(max_items: int) -> tuple[int, int]:
    """(h, w) for Gaussian node noise (``jdp-linucb --set counter=smooth``): C(h, w) ≥ L + 1
    and w·(h − w) smallest (ties: smaller h, then smaller w).  A record in h − w nodes at
    one GDP budget needs σ² ∝ h − w, and a running sum adds at most w node draws, so its
    variance is ∝ w·(h − w) — the balance the paper gives for Gaussian noise (w ≈ h/2).
    Reconstructed choice (docs/algorithms.md#smooth-binary-counter)."""
    return _best_shape(max_items, lambda h, w: w * (h - w))


def smooth_sensitivity(h: int, w: int) -> int:
    """The most nodes an item lies in: the zeros of a weight-w h-bit leaf index, h − w."""
    return int(h) - int(w)


def smooth_variance(h: int, w: int, epsilon: float) -> float:
    """The largest noise variance of a running count (a step whose leaf ends in 0: w non-empty
    nodes of Lap((h − w)/ε)), 2·w·((h − w)/ε)²."""
    b = (h - w) / float(epsilon)
    return 2.0 * w * b * b


def smooth_tail_bound(h: int, w: int, epsilon: float, failure: float) -> float:
    """A bound that the noise of one running count exceeds with probability at most
    ``failure``: w·b·ln(w/failure), b = (h − w)/ε.  The count's noise is a sum of at most w
    independent Lap(b) (w − z_t of them, module docstring), and P(|Lap(b)| > b·ln(1/q)) = q, so
    a union bound over its w nodes at q = failure/w bounds every one of them by b·ln(w/failure)
    at once.  This is the derivation of Mishra & Thakurta's printed Γ for the binary tree (ln T
    nodes of Lap(ln T/ε0), docs/algorithms.md#dp-ucb) applied to this counter's own nodes; it
    is the one place the smooth counter's tail is computed (DP-UCB's width with
    ``counter=smooth``, docs/algorithms.md#smooth-binary-counter)."""
    if not 0.0 < failure < 1.0:
        raise DpledgerError(f"smooth tail bound: failure probability must lie in (0, 1), "
                            f"got {failure!r}")
    b = (h - w) / float(epsilon)
    return w * b * math.log(w / failure)


@njit(cache=True)
def _trailing_ones(n, w):
    out = np.zeros(n, dtype=np.int64)
    leaf = (np.int64(1) << w) - 1
    for t in range(n):
        leaf = next_leaf(leaf)
        z = 0
        while (leaf >> z) & 1:
            z += 1
        out[t] = z
    return out


def smooth_variances(n: int, h: int, w: int, epsilon: float) -> np.ndarray:
    """Noise variance of the running count after item t = 1 … n: 2·(w − z_t)·((h − w)/ε)², z_t
    the trailing 1-bits of the leaf l_t (its empty nodes)."""
    b = (h - w) / float(epsilon)
    return 2.0 * (w - _trailing_ones(int(n), int(w))) * b * b


def smooth_first_item_nodes(n_items: int, h: int, w: int) -> list[tuple[int, int]]:
    """The released nodes holding the first item of a smooth tree after ``n_items`` items, in
    release order, as (push, stop): released at push ``push`` (1-based; each push releases one
    node holding items, so it is that push's draw) over items [0, stop).  Replays this
    module's state (white-box audits: which draws to capture)."""
    fs, ist = smooth_new(int(h), int(w), int(n_items), 0)
    out = []
    for t in range(1, int(n_items) + 1):
        for k in range(smooth_push(fs, ist, 0.0)):
            _, lo, hi = smooth_node(fs, ist, k)
            if hi > lo and lo == 0:
                out.append((t, int(hi)))
    return out


def binary_variance(t: int, levels: int, epsilon: float) -> float:
    """Variance of the binary tree's running count after item t (counters.py's binary
    mechanism): popcount(t) p-sums of Lap(levels/ε), 2·popcount(t)·(levels/ε)²."""
    b = levels / float(epsilon)
    return 2.0 * bin(int(t)).count("1") * b * b


def smooth_state_size(h: int) -> tuple[int, int]:
    """(len(fs), len(ist)) of a smooth mechanism of height h."""
    return 1 + 2 * h, 9 + 4 * h


@njit(cache=True, inline="always")
def next_leaf(x):
    """The next larger integer with the same number of ones (Gosper's rule)."""
    c = x & -x
    r = x + c
    return (((r ^ x) >> 2) // c) | r


@njit(cache=True)
def smooth_new(h, w, max_items, offset):
    fs = np.zeros(1 + 2 * h)
    ist = np.zeros(9 + 4 * h, dtype=np.int64)
    ist[_I_H] = h
    ist[_I_W] = w
    ist[_I_OFF] = offset
    ist[_I_MAX] = max_items
    ist[_I_LEAF] = (np.int64(1) << w) - 1
    for p in range(h):
        ist[9 + h + p] = -1          # no open block at level p yet
    return fs, ist


@njit(cache=True, inline="always")
def smooth_push(fs, ist, x):
    h = ist[_I_H]
    t = ist[_I_T]
    if t >= ist[_I_MAX]:
        raise ValueError("smooth mechanism: more items than its bound L")
    v = ist[_I_LEAF]                 # item t + 1 sits at the current leaf
    blk = 9 + h
    first = 9 + 2 * h
    cnt = 9 + 3 * h
    for p in range(h):
        if (v >> p) & 1 == 0:
            b = v >> p
            if ist[blk + p] != b:    # a new left block at level p opens with this item
                ist[blk + p] = b
                ist[first + p] = ist[_I_OFF] + t
                ist[cnt + p] = 0
                fs[1 + p] = 0.0
            fs[1 + p] += x
            ist[cnt + p] += 1
    nxt = next_leaf(v)
    ist[_I_PREV] = v
    ist[_I_LEAF] = nxt
    ist[_I_T] = t + 1
    # the nodes of nxt's decomposition at levels ≤ the highest bit where nxt and v differ are
    # new; above it the prefix is shared (at the first item every node is new)
    if t == 0:
        top = h - 1
    else:
        d = v ^ nxt
        top = 0
        while d >> (top + 1):
            top += 1
    n_new = 0
    for p in range(top, -1, -1):
        if (nxt >> p) & 1:
            ist[_I_PEND + n_new] = p
            n_new += 1
    ist[_I_NNEW] = n_new
    return n_new


@njit(cache=True, inline="always")
def smooth_node(fs, ist, k):
    h = ist[_I_H]
    p = ist[_I_PEND + k]
    left = (ist[_I_LEAF] >> p) - 1   # the left block at level p below the leaf's 1-bit
    if ist[9 + h + p] == left:
        s = ist[9 + 2 * h + p]
        return fs[1 + p], s, s + ist[9 + 3 * h + p]
    return 0.0, 0, 0


@njit(cache=True, inline="always")
def smooth_commit(fs, ist, k, noisy):
    h = ist[_I_H]
    fs[1 + h + ist[_I_PEND + k]] = noisy
    if k == ist[_I_NNEW] - 1:
        leaf = ist[_I_LEAF]
        out = 0.0
        for p in range(h - 1, -1, -1):   # top level first: one summation order everywhere
            if (leaf >> p) & 1:
                out += fs[1 + h + p]
        fs[0] = out


@njit(cache=True, inline="always")
def smooth_output(fs, ist):
    return fs[0]


@njit(cache=True, inline="always")
def smooth_item_level(ist, p):
    """After a push: 0 if the item just pushed lies in no node at level p (its position has a
    1 there), 1 if it joined the open block at level p, 2 if it opened it (the first item of
    that block).  Lets a caller keep its own per-level sums (vectors, matrices) beside this
    state's ranges (:mod:`dpledger.mechanisms.matrix_smooth`)."""
    if (ist[_I_PREV] >> p) & 1:
        return 0
    return 2 if ist[9 + 3 * ist[_I_H] + p] == 1 else 1


@njit(cache=True, inline="always")
def smooth_new_level(ist, k):
    """The level of the k-th new node of the last push."""
    return ist[_I_PEND + k]


@njit(cache=True, inline="always")
def smooth_leaf(ist):
    """The current leaf l_t: its 1-bits name the w nodes of the running sum."""
    return ist[_I_LEAF]


@njit(cache=True, inline="always")
def smooth_step(fs, ist, x, rng, scale, rid, cols, n, run, arm):
    """One item: the new node holding items writes ledger row ``n`` and gets Lap(scale)
    (numpy's Laplace, :func:`laplace_bits`); the new empty ones are 0.  Returns (output, rows
    written so far)."""
    m = smooth_push(fs, ist, x)
    for k in range(m):
        value, start, stop = smooth_node(fs, ist, k)
        if stop > start:
            write_row(cols, n, run, arm, start, stop, rid, 1)
            n += 1
            smooth_commit(fs, ist, k, value + laplace_bits(rng.bit_generator, scale))
        else:
            smooth_commit(fs, ist, k, 0.0)
    return smooth_output(fs, ist), n


@njit(cache=True)
def smooth_run(fs, ist, xs, rng, scale, rid, cols, n, run, arm, out):
    for j in range(xs.shape[0]):
        out[j], n = smooth_step(fs, ist, xs[j], rng, scale, rid, cols, n, run, arm)
    return n


class SmoothCounter(Counter):
    """Smooth binary mechanism bounded by ``max_items`` = L (module docstring): shape
    (h, w) = :func:`smooth_shape` (L) unless given; every node Lap((h − w)/ε), sensitivity 1
    (release code 0).  Float sampler only (the exact lattice path is not built for it)."""

    def __init__(self, sampler: Sampler, ledger: RewardLedger, *, max_items: int, epsilon: float,
                 shape: tuple[int, int] | None = None, **kw):
        from dpledger.mechanisms.samplers import FloatSampler
        if not isinstance(sampler, FloatSampler):
            raise DpledgerError("the smooth counter draws float Laplace noise only; "
                                "use a FloatSampler")
        super().__init__(sampler, ledger, epsilon=epsilon, **kw)
        self.max_items = check_count("max_items", max_items)
        self.h, self.w = shape if shape is not None else smooth_shape(self.max_items)
        if not (1 <= self.w < self.h <= SMOOTH_MAX_HEIGHT) or comb(self.h, self.w) < self.max_items + 1:
            raise DpledgerError(f"smooth shape (h={self.h}, w={self.w}) has fewer than "
                                f"{self.max_items + 1} leaves")
        self.fs, self.ist = smooth_new(self.h, self.w, self.max_items, self.offset)
        self._set_release_scales([smooth_sensitivity(self.h, self.w) / self.epsilon])

    def extend(self, rewards) -> np.ndarray:
        from dpledger.mechanisms.basic import normalise
        x = normalise(rewards, self.lo, self.hi)
        if self.n_items + x.size > self.max_items:
            raise DpledgerError(f"smooth mechanism bounded by L = {self.max_items} items was fed "
                                f"{self.n_items + x.size}")
        out = np.empty(x.size)
        buf = RowBuffer(max(x.size, 1))
        n = smooth_run(self.fs, self.ist, x, self.sampler.rng, float(self._scales[0]),
                       int(self._rids[0]), buf.columns(), 0, self.run, self.arm, out)
        self.ledger.extend(buf, n)
        self.n_items += x.size
        self.ledger.set_stream_length(self.run, self.arm, self.offset + self.n_items)
        return out

    @property
    def output(self) -> float:
        return float(smooth_output(self.fs, self.ist))
