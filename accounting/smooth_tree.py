"""Node counts of the smooth binary mechanism (docs/algorithms.md#smooth-binary-counter;
Andersson & Pagh 2023, arXiv 2306.09666; the mechanism is :mod:`dpledger.mechanisms.smooth`).

A policy running smooth trees describes each tree by its shape (h, w), its bound and its
per-node release; the arithmetic of which reward lies in how many released nodes lives here,
once:

* :func:`smooth_worst_nodes` — the most released nodes any item of a tree of ``n`` items lies
  in: the first item's, #{p ∈ [w, h): C(p, w) ≤ n} (its position 2^w − 1 has its zeros at
  levels w … h − 1, and the level-p node over [0, 2^p) is released at the first leaf ≥ 2^p,
  step C(p, w));
* :func:`smooth_item_nodes` — every item's count, by enumerating the released nodes
  (O(n·h), for checks: ``tests/test_smooth_counter.py`` holds the closed form to it, and the
  first item to the maximum, for every shape with h ≤ 12 and every n);
* :func:`smooth_tree_candidate` — the certificate candidate of the worst reward of the largest
  tree a policy can grow.
"""
from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

from dpledger.accounting.certificate import Candidate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import Release
from dpledger.errors import DpledgerError


def smooth_worst_nodes(n_items: int, h: int, w: int) -> int:
    """Released nodes holding the first item of a smooth tree (h, w) after ``n_items`` items:
    #{p ∈ [w, h) : C(p, w) ≤ n}; 0 for an empty tree."""
    n = int(n_items)
    if n < 0 or not 1 <= w < h:
        raise DpledgerError(f"smooth tree needs n >= 0 and 1 <= w < h, got n={n}, h={h}, w={w}")
    if n > comb(h, w) - 1:
        raise DpledgerError(f"a smooth tree (h={h}, w={w}) holds at most {comb(h, w) - 1} items")
    return sum(1 for p in range(w, h) if comb(p, w) <= n) if n else 0


def _next(x: int) -> int:
    c = x & -x
    r = x + c
    return (((r ^ x) >> 2) // c) | r


def smooth_item_nodes(n_items: int, h: int, w: int) -> np.ndarray:
    """Every item's count of released nodes holding it (index j − 1 for item j), by
    enumeration: the leaves l_0 … l_n of weight w, the nodes (p, l_s >> p) for every 1-bit p
    of every output leaf l_s (s = 1 … n), and for item j at l_{j−1} the levels p where its
    position has a 0 and the node (p, (l_{j−1} >> p) + 1) was released."""
    n = int(n_items)
    leaves = [(1 << w) - 1]
    for _ in range(n):
        leaves.append(_next(leaves[-1]))
    released = set()
    for s in range(1, n + 1):
        leaf = leaves[s]
        for p in range(h):
            if (leaf >> p) & 1:
                released.add((p, leaf >> p))
    out = np.zeros(n, dtype=np.int64)
    for j in range(n):
        v = leaves[j]
        out[j] = sum(1 for p in range(h) if not (v >> p) & 1 and (p, (v >> p) + 1) in released)
    return out


def smooth_tree_candidate(n_items: int, h: int, w: int,
                          release: Release | Sequence[tuple[Release, int]], witness: Witness,
                          basis: str,
                          also: Sequence[tuple[Release, int]] = ()) -> Candidate:
    """The worst reward of a smooth tree of ``n_items`` items: :func:`smooth_worst_nodes`
    copies of the per-node ``release`` (a sensitivity-1 statistic per node), or of every
    (release, count) of a node that makes several releases (``dp-linucb-mt``: one Laplace
    release per distinct entry of its statistics); ``also``: the (release, count) the same
    reward pays outside the tree (``dp-ts``: its logarithmic-mechanism block)."""
    nodes = smooth_worst_nodes(n_items, h, w)
    per_node = [(release, 1)] if isinstance(release, Release) else list(release)
    outside = list(also)
    return Candidate(Composition.of(outside + [(r, c * nodes) for r, c in per_node])
                     if nodes or outside else Composition.of([]),
                     witness, f"{basis}; the first item of a smooth tree (h = {h}, w = {w}) "
                              f"holding {n_items} items lies in {nodes} released nodes "
                              f"(#{{p ∈ [w, h): C(p, w) ≤ n}}), each "
                              + ("one release" if len(per_node) == 1 and per_node[0][1] == 1
                                 else "the releases " + ", ".join(
                                     f"{c}× {r.kind}" for r, c in per_node)))
