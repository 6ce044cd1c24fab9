"""``counter=smooth``: the K-armed tree policies with the smooth binary mechanism
(:mod:`dpledger.mechanisms.smooth`, docs/algorithms.md#smooth-binary-counter) in place of
Chan–Shi–Song's binary tree.  Provenance: reconstructed (the mechanism's shape and placement
are this toolkit's choices, named in docs/algorithms.md#smooth-binary-counter).

* **DP-UCB** (:class:`DPUCBSmooth`, ``dp-ucb --set counter=smooth``): one smooth tree per arm
  bounded by L = T − K + 1 items (an arm is pulled at most that often), shape
  (h, w) = ``smooth_shape(L)``, every node ``Lap((h − w)/ε0)`` with sensitivity 1 — so a
  reward in the most nodes (h − w) pays ε0, as a binary tree's does.  The index and its
  parameters are DP-UCB's (:mod:`dpledger.policies.mishra_thakurta`); only the running sum r
  comes from the smooth tree.  Ledger: one row per released node that holds rewards (its exact
  range), so the per-reward totals are exact for every reward; the certificate is the first
  item's count (:func:`dpledger.accounting.smooth_tree.smooth_worst_nodes`), computed by
  accounting.
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.accounting.certificate import Certificate, Witness
from dpledger.accounting.releases import LaplaceRelease
from dpledger.accounting.smooth_tree import smooth_tree_candidate
from dpledger.mechanisms.noise import laplace_draw, write_kernel_row
from dpledger.mechanisms.smooth import (smooth_commit, smooth_new, smooth_node, smooth_output,
                                        smooth_push, smooth_sensitivity, smooth_shape,
                                        smooth_variance)
from dpledger.policies.environments import draw_reward
from dpledger.policies.mishra_thakurta import (DPUCB, dp_ucb_coefficients, dp_ucb_root,
                                               dp_ucb_round)
from dpledger.policies.rules import capture_release, tie_break
from dpledger.policies.sink import put_action


def tree_bound(T: int, K: int) -> int:
    """The most items one arm's tree can hold: every other arm is pulled once."""
    return max(int(T) - int(K) + 1, 1)


@njit(cache=True, inline="always")
def smooth_arm_release(rng, env, fs, ist, x, scale, rows, n_rows, a, capture):
    """Push reward ``x`` into arm ``a``'s smooth tree and release its new nodes: the non-empty
    one writes kernel row ``n_rows`` (range, release id 0), gets Lap(scale) (``laplace_draw``)
    and is captured (:func:`capture_release`); the empty ones are 0.  Returns (noisy running
    sum, rows written, draws, the released value and its clean value for the two-row
    capture)."""
    m = smooth_push(fs, ist, x)
    first_noisy = 0.0
    first_clean = 0.0
    draws = 0
    for k in range(m):
        value, s0, s1 = smooth_node(fs, ist, k)
        if s1 > s0:
            write_kernel_row(rows, n_rows, a, s0, s1, 0, 1)
            n_rows += 1
            noise = laplace_draw(rng, env, scale, 1.0)
            draws += 1
            capture_release(capture, value + noise, value, scale, a, s0, s1)
            first_noisy = value + noise
            first_clean = value
            smooth_commit(fs, ist, k, value + noise)
        else:
            smooth_commit(fs, ist, k, 0.0)
    return smooth_output(fs, ist), n_rows, draws, first_noisy, first_clean


@njit(cache=True, nogil=True)
def _dp_ucb_smooth(rng, env, T, K, stop, params, actions, rows, capture):
    """DP-UCB (mishra_thakurta._dp_ucb's rule and tables) with one smooth tree per arm.
    params: ε0, Γ, experimental (0/1), node scale (h − w)/ε0, n_tab, the three tables, then
    h, w, L."""
    gamma_ = params[1]
    experimental = params[2] != 0.0
    scale = params[3]
    n_tab = np.int64(params[4])
    tab_lt = params[5:5 + n_tab]
    tab_slt = params[5 + n_tab:5 + 2 * n_tab]
    tab_s2n = params[5 + 2 * n_tab:5 + 3 * n_tab]
    h = np.int64(params[5 + 3 * n_tab])
    w = np.int64(params[6 + 3 * n_tab])
    L = np.int64(params[7 + 3 * n_tab])
    fs0, is0 = smooth_new(h, w, L, 0)
    sfs = np.zeros((K, fs0.size))
    sis = np.zeros((K, is0.size), np.int64)
    for a in range(K):
        sis[a] = is0
    n = np.zeros(K)
    ca = np.zeros(K)
    cb = np.zeros(K)
    cc = np.zeros(K)
    idx = np.zeros(K)
    draws = 0
    n_rows = 0
    for t in range(1, stop + 1):
        a, tie = dp_ucb_round(t, K, n_tab, tab_lt, tab_slt, ca, cb, cc, idx)
        if tie:
            a = tie_break(idx, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        r, n_rows, m, v_noisy, v_clean = smooth_arm_release(rng, env, sfs[a], sis[a], x, scale,
                                                           rows, n_rows, a, capture)
        draws += m
        if capture.shape[1] > 0 and a == 0 and sis[0, 0] == 1:
            capture[0, 0] = v_noisy
            capture[1, 0] = v_clean
        n[a] += 1.0
        mi = np.int64(n[a])
        root = tab_s2n[mi] if mi < tab_s2n.size else dp_ucb_root(n[a])
        ca[a], cb[a], cc[a] = dp_ucb_coefficients(r, n[a], gamma_, experimental, root)
        put_action(actions, t, a)
    return stop, n_rows, draws


class DPUCBSmooth(DPUCB):
    """DP-UCB with ``counter=smooth`` (module docstring); built by ``DPUCB(counter="smooth")``."""

    provenance = "reconstructed"
    kernel = _dp_ucb_smooth

    def __init__(self, **params):
        super().__init__(**params)
        self.params["counter"] = "smooth"

    def shape(self, T: int, K: int) -> tuple[int, int]:
        return smooth_shape(tree_bound(T, K))

    def kernel_params(self, T, K):
        h, w = self.shape(T, K)
        return np.concatenate([super().kernel_params(T, K), [float(h), float(w),
                                                             float(tree_bound(T, K))]])

    def row_capacity(self, T, K):
        return int(T)              # one non-empty node per item (mechanisms/smooth.py)

    def releases(self, T, K):
        h, w = self.shape(T, K)
        return [LaplaceRelease(scale=smooth_sensitivity(h, w) / self.epsilon0(K),
                               sensitivity=1.0)]

    def running_sum_variance(self, T: int, K: int) -> float:
        """The largest noise variance of a running sum an arm's tree publishes (normalised
        reward units): 2·w·((h − w)/ε0)²."""
        h, w = self.shape(T, K)
        return smooth_variance(h, w, self.epsilon0(K))

    def certificate(self, T, K):
        h, w = self.shape(T, K)
        eps0 = self.epsilon0(K)
        cand = smooth_tree_candidate(
            tree_bound(T, K), h, w, self.releases(T, K)[0], Witness(arm=0, index=0, round=1),
            "each reward enters one arm's smooth tree (parallel composition across arms); "
            "every node Lap((h − w)/ε0) with sensitivity 1 (ε0/(h − w)); reading the running "
            "sums is post-processing")
        return Certificate(candidates=(cand,),
                           note=f"per-tree budget ε0 = {eps0!r} ({self.params['per_tree_budget']}); "
                                f"counter = smooth (h = {h}, w = {w})")

    def finish(self, out, T, K):
        return out

    def step_rule(self):
        """The step form's rule (policies/step_rules_smooth.py), in place of dp-ucb's."""
        from dpledger.policies.step_rules_smooth import SmoothDPUCBStep
        return SmoothDPUCBStep


DPUCBSmooth.smooth_counter = True
SMOOTH_CLASSES = {"dp-ucb": DPUCBSmooth}
