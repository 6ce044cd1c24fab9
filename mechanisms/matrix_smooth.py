"""The smooth binary mechanism over vectors and matrices (``jdp-linucb --set counter=smooth``;
docs/algorithms.md#smooth-binary-counter; Andersson & Pagh 2023, arXiv 2306.09666).
Provenance: reconstructed (the choices are the scalar counter's, :mod:`dpledger.mechanisms.smooth`).

The node structure is the scalar smooth counter's, unchanged: the scalar state (``sfs``,
``sist``) is pushed with a dummy 0 and keeps the leaves, the blocks and every node's record
range; beside it this state keeps, per level p, the clean sum ``acc[p]`` of the open block
(B·E numbers: every model's (Gram, Σ r·x) block, :mod:`dpledger.mechanisms.matrix`'s layout)
and the released ``noisy[p]``.  A record joins the levels where its leaf has a 0
(:func:`~dpledger.mechanisms.smooth.smooth_item_level`).

* **Release.**  A push makes exactly one new node that holds records (mechanisms/smooth.py):
  it is released once, the clean block sum plus **one** draw of the tree's node law over every
  block (:func:`~dpledger.mechanisms.matrix.block_draw` — the symmetric Gaussian of the binary
  tree, or the exact sampler's discrete Gaussians), after its ledger rows (one per release the
  node makes, over its exact record range).  The new empty nodes are the constant 0, with no
  noise and no row.
* **Output.**  The noisy prefix is the sum of the noisy nodes of the current leaf's w 1-bits,
  top level first; it holds w − z_t node draws (z_t the leaf's trailing 1-bits, its empty
  nodes), never more than w.  There is no padding: the binary tree pads so that every prefix
  carries ``levels`` draws; here the prefix carries at most w, and the regulariser of
  ``jdp-linucb`` is computed for m = w (a bound on the noise's norm that holds for fewer draws).
* **State** (a tuple, positions 1 and 3 as :mod:`~dpledger.mechanisms.matrix`'s tree, so the
  readers :func:`~dpledger.mechanisms.matrix.tree_prefix` and
  :func:`~dpledger.mechanisms.matrix.tree_version` read it unchanged): (acc (1, h, D),
  out (1, 1, D): the noisy prefix, noisy (1, h, D), ist (1, 3): item count, —, draws made,
  sist, scratch (D,), sfs).  One tree (record privacy: the tree runs over every record).
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.mechanisms.matrix import block_draw, capture_node
from dpledger.mechanisms.noise import write_kernel_row
from dpledger.mechanisms.smooth import (smooth_item_level, smooth_leaf, smooth_new,
                                        smooth_new_level, smooth_node, smooth_push)
from dpledger.mechanisms.smooth import SLOT_NEW as _I_NNEW


def smooth_tree_new(h: int, w: int, max_items: int, blocks: int, entries: int) -> tuple:
    """A zeroed smooth tree of shape (h, w) over at most ``max_items`` items of ``blocks`` ×
    ``entries`` numbers (module docstring)."""
    D = blocks * entries
    sfs, sist = smooth_new(int(h), int(w), int(max_items), 0)
    ist = np.zeros((1, 3), dtype=np.int64)
    ist[0, 1] = blocks
    return (np.zeros((1, h, D)), np.zeros((1, 1, D)), np.zeros((1, h, D)), ist, sist,
            np.zeros(D), sfs)


def smooth_tree_bytes(h: int, blocks: int, entries: int) -> int:
    """Bytes of a :func:`smooth_tree_new` state (memory estimates)."""
    return 8 * (2 * h + 2) * blocks * entries + 8 * (5 * h + 9)


@njit(cache=True, inline="always")
def smooth_tree_close(st, item):
    """The clean half of a push: ``item`` joins the open block of every level where its leaf
    has a 0 (opening it, or added to it); nothing is drawn.  Returns the record range
    [start, stop) of the one new node that holds records (the one the ledger rows name)."""
    acc, out, noisy, ist, sist, scratch, sfs = st
    D = acc.shape[2]
    h = acc.shape[1]
    m = smooth_push(sfs, sist, 0.0)
    for p in range(h):
        s = smooth_item_level(sist, p)
        if s == 2:
            for e in range(D):
                acc[0, p, e] = item[e]
        elif s == 1:
            for e in range(D):
                acc[0, p, e] += item[e]
    ist[0, 0] += 1
    lo = 0
    hi = 0
    for k in range(m):
        _, a, b = smooth_node(sfs, sist, k)
        if b > a:
            lo = a
            hi = b
    return lo, hi


@njit(cache=True, inline="always")
def smooth_tree_release(st, rng, spec, A, capture):
    """The noisy half: the new node holding records gets one draw of the node law over every
    block (:func:`~dpledger.mechanisms.matrix.block_draw`), the new empty ones are 0, and the
    prefix is re-summed over the leaf's 1-bits (top level first).  ``capture`` as
    :func:`~dpledger.mechanisms.matrix.tree_push`'s (the n-th draw's noise, and with 2D + 1
    columns its clean node sum)."""
    acc, out, noisy, ist, sist, scratch, sfs = st
    D = acc.shape[2]
    h = acc.shape[1]
    blocks = ist[0, 1]
    E = D // blocks
    for k in range(sist[_I_NNEW]):
        p = smooth_new_level(sist, k)
        _, a, b = smooth_node(sfs, sist, k)
        if b > a:
            for blk in range(blocks):
                block_draw(rng, spec, scratch, blk * E, A)
            n = ist[0, 2]
            ist[0, 2] = n + 1
            capture_node(capture, n, scratch, acc[0, p], 0)
            for e in range(D):
                noisy[0, p, e] = acc[0, p, e] + scratch[e]
        else:
            for e in range(D):
                noisy[0, p, e] = 0.0
    leaf = smooth_leaf(sist)
    for e in range(D):
        out[0, 0, e] = 0.0
    for p in range(h - 1, -1, -1):
        if (leaf >> p) & 1:
            for e in range(D):
                out[0, 0, e] += noisy[0, p, e]


@njit(cache=True)
def smooth_tree_push(st, item, rng, spec, A, capture, rows, n_rows, rids):
    """A push as a whole run makes it: close, the node's ledger rows (stream 0, its record
    range, one per release id in ``rids``) before its noise, release.  Returns the rows
    written so far."""
    lo, hi = smooth_tree_close(st, item)
    for r in range(rids.size):
        write_kernel_row(rows, n_rows, 0, lo, hi, rids[r], 1)
        n_rows += 1
    smooth_tree_release(st, rng, spec, A, capture)
    return n_rows
