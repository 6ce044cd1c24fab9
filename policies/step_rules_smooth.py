"""Step form of the ``counter=smooth`` tree policies (policies/smooth_trees.py,
docs/algorithms.md#smooth-binary-counter): the same compiled state updates as their kernels
(:mod:`dpledger.mechanisms.smooth`), one reward at a time (policies/step.py).

A reward pushed into an arm's smooth tree makes exactly one non-empty node due — the one
recorded, its exact observation range, the one noise drawn — and new empty nodes, which are 0
(no reward, no draw); :meth:`SmoothDPUCBStep.draw_due` commits them in the kernel's order (top
level first), so the generator moves as in the kernel.
"""
from __future__ import annotations

import numpy as np

from dpledger._jit import njit
from dpledger.mechanisms.smooth import SLOT_NEW as _I_NNEW
from dpledger.mechanisms.smooth import SLOT_OFFSET as _I_OFF
from dpledger.mechanisms.smooth import (smooth_commit, smooth_new, smooth_node, smooth_output,
                                        smooth_push)
from dpledger.policies import mishra_thakurta, smooth_hu_hegde
from dpledger.policies.smooth_trees import tree_bound
from dpledger.policies.step_rules import DPTSStep, DPUCBStep, PrivateTSStep



@njit(cache=True)
def smooth_push_arm(sfs, sis, a, x):
    """Push ``x`` into arm a's tree: (new nodes, start, stop of the non-empty one)."""
    m = smooth_push(sfs[a], sis[a], x)
    s0 = 0
    s1 = 0
    for k in range(m):
        _, lo, hi = smooth_node(sfs[a], sis[a], k)
        if hi > lo:
            s0 = lo
            s1 = hi
    return m, s0, s1


@njit(cache=True)
def _commit_arm(sfs, sis, a, k, noisy):
    smooth_commit(sfs[a], sis[a], k, noisy)
    return smooth_output(sfs[a], sis[a])


def smooth_commit_arm(sfs, sis, a, k, noise):
    """Node k of arm a's new nodes released — its clean value + ``noise``, or 0 for an empty
    node (``noise`` None: no draw) — and the arm's running sum."""
    value, lo, hi = smooth_node(sfs[a], sis[a], k)
    return _commit_arm(sfs, sis, a, k, 0.0 if noise is None else value + noise)


class SmoothDPUCBStep(DPUCBStep):
    """DP-UCB with ``counter=smooth``: one smooth tree per arm bounded by T − K + 1 items
    (DP-UCB's step rule for the index; the trees' state replaced)."""

    horizon_reason = "each arm's smooth tree is shaped for T − K + 1 items"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        h, w = policy.shape(horizon, K)
        fs0, is0 = smooth_new(h, w, tree_bound(horizon, K), 0)
        binary = self.state
        self.state = dict(sfs=np.zeros((K, fs0.size)), sis=np.tile(is0, (K, 1)),
                          **{k: binary[k] for k in ("r", "n", "ca", "cb", "cc", "idx")})

    def push(self, a, x):
        s = self.state
        m, s0, s1 = smooth_push_arm(s["sfs"], s["sis"], a, x)
        return [(a, 0, int(s0), int(s1))]

    def draw_due(self, engine, due):
        s = self.state
        for a, rid, _, _ in due:
            r = 0.0
            for k in range(int(s["sis"][a, _I_NNEW])):
                _, lo, hi = smooth_node(s["sfs"][a], s["sis"][a], k)
                r = smooth_commit_arm(s["sfs"], s["sis"], a, k,
                                      self.draw(engine, rid) if hi > lo else None)
            n = s["n"][a] + 1.0
            s["r"][a], s["n"][a] = r, n
            s["ca"][a], s["cb"][a], s["cc"][a] = mishra_thakurta.dp_ucb_coefficients(
                r, n, self.gamma, self.experimental, mishra_thakurta.dp_ucb_root(n))


class SmoothPrivateTSStep(PrivateTSStep):
    """Private TS with ``counter=smooth``: dp-ts-mt's step rule (gap batches, random pulls,
    Thompson sampling; policies/step_rules.py) with each arm's tree a smooth tree of the exit's
    shape (``PrivateTSSmooth.tree_shapes``).  A push makes one non-empty node due (its row, its
    one draw) and new empty nodes, committed as 0 with it (no draw), in the kernel's order."""

    horizon_reason = ("its batch sizes m_j = ⌈192·K·ln T·4^j/ε⌉ and the smooth trees' shapes "
                      "depend on T")

    def __init__(self, policy, K, horizon):
        # before the base's __init__, which opens the trees at once without gap estimation
        self._shapes = {x["e"]: x for x in policy.tree_shapes(horizon, K)}
        self._sens = policy._node_counts(horizon, K)
        super().__init__(policy, K, horizon)

    def _new_trees(self, x):
        y = self._shapes[x["e"]]
        fs0, is0 = smooth_new(y["h"], y["w"], y["items"], 0)
        self.state["sfs"] = np.zeros((self.K, fs0.size))
        self.state["sis"] = np.tile(is0, (self.K, 1))

    def _set_offset(self, a, off):
        self.state["sis"][a, _I_OFF] = off

    def _offset(self, a):
        return int(self.state["sis"][a, _I_OFF])

    @property
    def rid(self) -> int:
        y = self._shapes[int(self.state["ph"][2])]
        return 1 + self._sens.index(y["h"] - y["w"])

    def _tree_push(self, a, x):
        _, s0, s1 = smooth_push_arm(self.state["sfs"], self.state["sis"], a, x)
        return int(s0), int(s1)

    def _tree_commit(self, a, noise):
        s = self.state
        for k in range(int(s["sis"][a, _I_NNEW])):
            _, lo, hi = smooth_node(s["sfs"][a], s["sis"][a], k)
            s["rsum"][a] = smooth_commit_arm(s["sfs"], s["sis"], a, k,
                                             noise if hi > lo else None)


class SmoothDPTSStep(DPTSStep):
    """DP-TS with ``counter=smooth`` (policies/smooth_hu_hegde.py): dp-ts's step rule (its
    select and logarithmic blocks) with each epoch buffer a smooth tree of shape
    ``smooth_shape(2^{r+1} − 1)``; anytime, as dp-ts (a shape per epoch, none depends on T).
    Every reward makes one release due — a log block (release id 0) or the one node holding
    items its push releases (release id r) — through the kernel's push and commit
    (:func:`~dpledger.policies.smooth_hu_hegde.dp_ts_smooth_push`, ``dp_ts_smooth_commit``)."""

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        for k in ("bfs", "bis"):
            del self.state[k]
        self.state.update(smooth_hu_hegde.step_state(K))
        self._shapes = smooth_hu_hegde.epoch_shapes(1)

    def release(self, rid):
        return smooth_hu_hegde.epoch_release(self.eps, rid)

    def push(self, a, x):
        s = self.state
        kind, value, start, stop = smooth_hu_hegde.dp_ts_smooth_push(
            a, x, s["O"], s["lfs"], s["lis"], s["sfs"], s["sis"])
        s["kind"][a], s["value"][a] = kind, value
        return [(a, 0 if kind == 0 else int(s["r"][a]), int(start), int(stop))]

    def commit(self, a, rid, noise):
        s = self.state
        kind = int(s["kind"][a])
        if kind == 0 and self._shapes.shape[0] < int(s["r"][a]) + 2:
            # the next epoch's shape (r + 1 at most), computed once per epoch reached
            self._shapes = smooth_hu_hegde.epoch_shapes(int(s["r"][a]) + 2)
        smooth_hu_hegde.dp_ts_smooth_commit(a, kind, s["value"][a], noise, s["O"], s["r"],
                                            s["lfs"], s["lis"], s["sfs"], s["sis"], s["mu"],
                                            self._shapes)
