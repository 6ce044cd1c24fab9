"""``counter=smooth``: the K-armed tree policies with the smooth binary mechanism
(:mod:`dpledger.mechanisms.smooth`, docs/algorithms.md#smooth-binary-counter) in place of
Chan–Shi–Song's binary tree.  Provenance: reconstructed (the mechanism's shape and placement
are this toolkit's choices, named in docs/algorithms.md#smooth-binary-counter).

* **DP-UCB** (:class:`DPUCBSmooth`, ``dp-ucb --set counter=smooth``): one smooth tree per arm
  bounded by L = T − K + 1 items (an arm is pulled at most that often), shape
  (h, w) = ``smooth_shape(L)``, every node ``Lap((h − w)/ε0)`` with sensitivity 1 — so a
  reward in the most nodes (h − w) pays ε0, as a binary tree's does.  The index is DP-UCB's
  (:mod:`dpledger.policies.mishra_thakurta`) with r from the smooth tree and, in the printed
  width, Γ from the smooth counter's own tail bound (:meth:`DPUCBSmooth.confidence_relaxation`)
  in place of the printed Γ, which bounds the binary tree's noise.  Ledger: one row per released node that holds rewards (its exact
  range), so the per-reward totals are exact for every reward; the certificate is the first
  item's count (:func:`dpledger.accounting.smooth_tree.smooth_worst_nodes`), computed by
  accounting.
* **Private TS** (:class:`PrivateTSSmooth`, ``dp-ts-mt --set counter=smooth``): Algorithm 2 as
  :mod:`~dpledger.policies.mishra_thakurta` runs it (the same gap phase, random pulls and
  Thompson rule), each arm's tree after exit e a smooth tree bounded by the most items it can
  hold (1 + T − τ_e − K·P_e with P_e random pulls, the batch total being item 1; T − τ_e
  without), every node ``Lap((h − w)/ε0)``, ε0 = ε/(2K).  A node holding item 1 is recorded
  over the batch's P observations.  The certificate is the gap release and, per reachable
  exit, the first item's node count (:meth:`PrivateTSSmooth.certificate`).
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
                                        smooth_tail_bound, smooth_variance)
from dpledger.mechanisms.smooth import SLOT_OFFSET as _I_OFF
from dpledger.policies.environments import draw_reward
from dpledger.policies.mishra_thakurta import (DPUCB, PrivateTS, _round_robin_batch,
                                               dp_ucb_coefficients, dp_ucb_root, dp_ucb_round,
                                               private_ts_pull, private_ts_start)
from dpledger.policies.rules import capture_release, tie_break
from dpledger.policies.sink import put_action
from dpledger.policies.smooth_hu_hegde import DPTSSmooth


def tree_bound(T: int, K: int) -> int:
    """The most items one arm's tree can hold: every other arm is pulled once."""
    return max(int(T) - int(K) + 1, 1)


@njit(cache=True, inline="always")
def smooth_arm_release(rng, env, fs, ist, x, scale, rows, n_rows, a, capture, rid, lead):
    """Push reward ``x`` into arm ``a``'s smooth tree and release its new nodes: the non-empty
    one writes kernel row ``n_rows`` (its observation range, release id ``rid``), gets
    Lap(scale) (``laplace_draw``) and is captured (:func:`capture_release`); the empty ones
    are 0.  ``lead``: observations before the tree's first item that the item also sums (the
    private TS random-pull item is P observations, ``lead`` = P − 1), so a node holding it
    starts ``lead`` earlier.  Returns (noisy running sum, rows written, draws, the released
    value and its clean value for the two-row capture)."""
    m = smooth_push(fs, ist, x)
    first_noisy = 0.0
    first_clean = 0.0
    draws = 0
    for k in range(m):
        value, s0, s1 = smooth_node(fs, ist, k)
        if s1 > s0:
            if s0 == ist[_I_OFF]:
                s0 -= lead
            write_kernel_row(rows, n_rows, a, s0, s1, rid, 1)
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
                                                           rows, n_rows, a, capture, 0, 0)
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


@njit(cache=True, nogil=True)
def _private_ts_smooth(rng, env, T, K, stop, params, actions, rows, capture):
    """Private TS (mishra_thakurta._private_ts's rule, its start
    :func:`~dpledger.policies.mishra_thakurta.private_ts_start`) with one smooth tree per arm.
    params: ε, gap (0/1), n_mode tree (0/1), J, m_0 … m_{J−1}, then for each exit e = 0 … J:
    P_e, release id, the tree bound L_e, h_e, w_e; then the noise scale of every release id
    (id 0 the gap batches' Lap(2K/ε), id r ≥ 1 a node's Lap((h − w)/ε0))."""
    tree_mode = params[2] != 0.0
    scales, base, obs, n_tot, n_tree, bsum, t, n_rows, draws, e, whole = private_ts_start(
        rng, env, T, K, stop, params, 5, actions, rows, capture)
    if not whole:
        return t, n_rows, draws
    P = np.int64(params[base + 5 * e])
    rid = np.int64(params[base + 5 * e + 1])
    L = np.int64(params[base + 5 * e + 2])
    h = np.int64(params[base + 5 * e + 3])
    w = np.int64(params[base + 5 * e + 4])
    scale = scales[rid]
    fs0, is0 = smooth_new(h, w, L, 0)
    sfs = np.zeros((K, fs0.size))
    sis = np.zeros((K, is0.size), np.int64)
    rsum = np.zeros(K)
    lead = P - 1 if P > 0 else 0
    if P > 0:                   # random pulls: each arm's total is its tree's first item
        t, whole = _round_robin_batch(rng, env, K, T, stop, P, t, bsum, obs, n_tot, actions)
        if not whole:
            return t, n_rows, draws
    for a in range(K):
        sfs[a], sis[a] = smooth_new(h, w, L, obs[a] - 1 if P > 0 else obs[a])
    if P > 0:
        for a in range(K):
            rsum[a], n_rows, m, _, _ = smooth_arm_release(rng, env, sfs[a], sis[a], bsum[a],
                                                          scale, rows, n_rows, a, capture,
                                                          rid, lead)
            draws += m
            n_tree[a] += P
    theta = np.zeros(K)
    while t < stop:
        a, x = private_ts_pull(rng, env, t, rsum, n_tree, n_tot, tree_mode, theta, obs)
        rsum[a], n_rows, m, _, _ = smooth_arm_release(rng, env, sfs[a], sis[a], x, scale, rows,
                                                      n_rows, a, capture, rid, lead)
        draws += m
        put_action(actions, t + 1, a)
        t += 1
    return t, n_rows, draws


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

    def confidence_relaxation(self, T: int, K: int) -> float:
        """κ·Γ_smooth, Γ_smooth = w·((h − w)/ε0)·ln(w·K·T/γ): the smooth counter's own tail
        bound (:func:`~dpledger.mechanisms.smooth.smooth_tail_bound`) at failure γ/(K·T), a
        union over the K arms and T rounds, as the printed Γ = ln²T·ln(K·T·ln T/γ)/ε0 bounds
        the binary tree's ln T nodes of Lap(ln T/ε0) (docs/algorithms.md#dp-ucb).  Index
        only: no draw depends on it."""
        h, w = self.shape(T, K)
        gamma_ = smooth_tail_bound(h, w, self.epsilon0(K), self.params["gamma"] / (K * T))
        scale = self.params["relaxation_scale"]
        return gamma_ if scale == 1.0 else gamma_ * scale

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


class PrivateTSSmooth(PrivateTS):
    """Private TS with ``counter=smooth`` (module docstring); built by
    ``PrivateTS(counter="smooth")``."""

    provenance = "reconstructed"
    kernel = _private_ts_smooth

    def __init__(self, **params):
        super().__init__(**params)
        self.params["counter"] = "smooth"

    def tree_shapes(self, T: int, K: int) -> list[dict]:
        """Per exit e (:meth:`schedule`): the most items an arm's tree can hold — 1 + T − τ −
        K·P with random pulls (the batch total, then every Thompson round on one arm), T − τ
        without — its shape ``smooth_shape`` and whether a tree item fits within T."""
        out = []
        for x in self.schedule(T, K)["exits"]:
            rem, P = x["L"], x["P"]
            reach = rem > 0 and not (P > 0 and K * P > rem)
            items = (1 + rem - K * P if P > 0 else rem) if reach else 1
            h, w = smooth_shape(items)
            out.append(dict(x, items=items, h=h, w=w, reach=reach))
        return out

    def _node_counts(self, T, K) -> list[int]:
        return sorted({smooth_sensitivity(x["h"], x["w"]) for x in self.tree_shapes(T, K)})

    def _exits(self, T, K) -> list[dict]:
        return self.tree_shapes(T, K)

    def _exit_params(self, x, T, counts) -> list[float]:
        """P, the release id, the tree bound, h, w."""
        return [float(min(x["P"], T + 1)),
                float(1 + counts.index(smooth_sensitivity(x["h"], x["w"]))),
                float(x["items"]), float(x["h"]), float(x["w"])]

    def _unused_exit(self, T) -> list[float]:
        return [0.0, 1.0, 1.0, 2.0, 1.0]

    def row_capacity(self, T, K):
        # one row per gap batch and arm, one per reward's new non-empty node (mechanisms/smooth.py)
        return K * len(self.schedule(T, K)["m"]) + int(T) + 1

    def finish(self, out, T, K):
        return out

    counter_note = "; counter = smooth"

    def _tree_candidate(self, x, K, eps0):
        """The first item of exit x's smooth tree (shape and bound from :meth:`tree_shapes`)."""
        if not x["reach"]:
            return None             # no tree item can be inserted within T
        P = x["P"]
        rel = LaplaceRelease(scale=smooth_sensitivity(x["h"], x["w"]) / eps0, sensitivity=1.0)
        return smooth_tree_candidate(
            x["items"], x["h"], x["w"], rel,
            Witness(arm=0, index=x["tau"] // K + (P - 1 if P > 0 else 0), round=None),
            f"exit after {x['e']} gap iterations (τ = {x['tau']}): every node "
            f"Lap((h − w)/ε0), ε0 = ε/(2K), sensitivity 1; the random-pull item's P "
            f"observations share its nodes")

    def step_rule(self):
        """The step form's rule (policies/step_rules_smooth.py), in place of dp-ts-mt's."""
        from dpledger.policies.step_rules_smooth import SmoothPrivateTSStep
        return SmoothPrivateTSStep


DPUCBSmooth.smooth_counter = True
PrivateTSSmooth.smooth_counter = True
SMOOTH_CLASSES = {"dp-ucb": DPUCBSmooth, "dp-ts-mt": PrivateTSSmooth, "dp-ts": DPTSSmooth}
