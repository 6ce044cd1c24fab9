"""The smooth binary mechanism over vectors and matrices (``jdp-linucb``, ``dp-linucb-mt``,
``dp-lints-mt``, ``reward-dp-linucb --set counter=smooth``; docs/algorithms.md#smooth-binary-counter; Andersson & Pagh 2023, arXiv 2306.09666).
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
  :func:`~dpledger.mechanisms.matrix.tree_version` read it unchanged): (acc (G, h, D),
  out (G, 1, D): the noisy prefix, noisy (G, h, D), ist (G, 3): item count, blocks, and in
  row 0 the draws made by all trees, sist (G, ·), scratch (D,), sfs (G, ·)) for G trees
  indexed by g, as the binary tree's ``n_trees``.  Record privacy runs one tree over every
  record (g = 0); reward privacy (``reward-dp-linucb``) one per stream, tree g's ledger rows
  naming stream g and its own record indices.
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.mechanisms.matrix import block_draw, capture_node
from dpledger.mechanisms.noise import write_kernel_row
from dpledger.mechanisms.smooth import (smooth_item_level, smooth_leaf, smooth_new,
                                        smooth_new_level, smooth_node, smooth_push)
from dpledger.mechanisms.smooth import SLOT_NEW as _I_NNEW


def smooth_tree_new(h: int, w: int, max_items: int, blocks: int, entries: int,
                    n_trees: int = 1) -> tuple:
    """``n_trees`` zeroed smooth trees of shape (h, w), each over at most ``max_items`` items of
    ``blocks`` × ``entries`` numbers (module docstring)."""
    D = blocks * entries
    G = int(n_trees)
    one_fs, one_ist = smooth_new(int(h), int(w), int(max_items), 0)
    sfs = np.tile(one_fs, (G, 1))
    sist = np.tile(one_ist, (G, 1))
    ist = np.zeros((G, 3), dtype=np.int64)
    ist[:, 1] = blocks
    return (np.zeros((G, h, D)), np.zeros((G, 1, D)), np.zeros((G, h, D)), ist, sist,
            np.zeros(D), sfs)


def smooth_tree_bytes(h: int, blocks: int, entries: int, n_trees: int = 1) -> int:
    """Bytes of a :func:`smooth_tree_new` state (memory estimates)."""
    return (8 * n_trees * ((2 * h + 1) * blocks * entries + 6 * h + 13)
            + 8 * blocks * entries)


@njit(cache=True, inline="always")
def smooth_tree_close(st, g, item):
    """The clean half of a push to tree g: ``item`` joins the open block of every level where
    its leaf has a 0 (opening it, or added to it); nothing is drawn.  Returns the record range
    [start, stop) (tree g's own record indices) of the one new node that holds records (the one
    the ledger rows name)."""
    acc, out, noisy, ist, sist, scratch, sfs = st
    D = acc.shape[2]
    h = acc.shape[1]
    fs_g = sfs[g]
    ist_g = sist[g]
    m = smooth_push(fs_g, ist_g, 0.0)
    for p in range(h):
        s = smooth_item_level(ist_g, p)
        if s == 2:
            for e in range(D):
                acc[g, p, e] = item[e]
        elif s == 1:
            for e in range(D):
                acc[g, p, e] += item[e]
    ist[g, 0] += 1
    lo = 0
    hi = 0
    for k in range(m):
        _, a, b = smooth_node(fs_g, ist_g, k)
        if b > a:
            lo = a
            hi = b
    return lo, hi


@njit(cache=True, inline="always")
def smooth_tree_release(st, g, rng, spec, A, capture):
    """The noisy half of tree g's push: the new node holding records gets one draw of the node
    law over every block (:func:`~dpledger.mechanisms.matrix.block_draw`), the new empty ones
    are 0, and the prefix is re-summed over the leaf's 1-bits (top level first).  ``capture``
    as :func:`~dpledger.mechanisms.matrix.tree_push`'s (the n-th draw of all trees' noise, g
    in column D, and with 2D + 1 columns its clean node sum)."""
    acc, out, noisy, ist, sist, scratch, sfs = st
    D = acc.shape[2]
    h = acc.shape[1]
    blocks = ist[0, 1]
    E = D // blocks
    fs_g = sfs[g]
    ist_g = sist[g]
    for k in range(ist_g[_I_NNEW]):
        p = smooth_new_level(ist_g, k)
        _, a, b = smooth_node(fs_g, ist_g, k)
        if b > a:
            for blk in range(blocks):
                block_draw(rng, spec, scratch, blk * E, A)
            n = ist[0, 2]
            ist[0, 2] = n + 1
            capture_node(capture, n, scratch, acc[g, p], g)
            for e in range(D):
                noisy[g, p, e] = acc[g, p, e] + scratch[e]
        else:
            for e in range(D):
                noisy[g, p, e] = 0.0
    leaf = smooth_leaf(ist_g)
    for e in range(D):
        out[g, 0, e] = 0.0
    for p in range(h - 1, -1, -1):
        if (leaf >> p) & 1:
            for e in range(D):
                out[g, 0, e] += noisy[g, p, e]


@njit(cache=True)
def smooth_tree_push(st, g, item, rng, spec, A, capture, rows, n_rows, rids):
    """A push to tree g as a whole run makes it: close, the node's ledger rows (stream g, its
    record range, one per release id in ``rids``) before its noise, release.  Returns the rows
    written so far."""
    lo, hi = smooth_tree_close(st, g, item)
    for r in range(rids.size):
        write_kernel_row(rows, n_rows, g, lo, hi, rids[r], 1)
        n_rows += 1
    smooth_tree_release(st, g, rng, spec, A, capture)
    return n_rows
