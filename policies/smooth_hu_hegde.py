"""``dp-ts --set counter=smooth``: DP-TS (Hu & Hegde 2022, Algorithm 1; docs/algorithms.md#dp-ts)
with each epoch buffer's binary mechanism replaced by the smooth binary mechanism
(:mod:`dpledger.mechanisms.smooth`, docs/algorithms.md#smooth-binary-counter).  Provenance:
reconstructed (the paper runs Chan–Shi–Song's hybrid counter; the smooth tree's shape and
placement are this toolkit's choices).

Where DP-TS has a tree: per arm, the hybrid counter (docs/algorithms.md#hybrid-counter) is a
modified logarithmic mechanism (budget ε/2, one Lap(2/ε) per block, blocks closing at counts
2^{r+1} − 1) plus, for the current epoch r, a binary mechanism over the epoch's buffer of at
most L_r = 2^{r+1} − 1 items (budget ε/2).  Only that per-epoch part is a tree; it is what this
module replaces.  The logarithmic blocks, the optimism shift υ and the Beta draw are DP-TS's
own (:mod:`dpledger.policies.hu_hegde`).  ``lazy-dp-ts`` has no tree at all (each epoch sum is
released once with Lap(1/ε)), so it has no ``counter`` parameter.

* **Shape** (choice, as ``dp-ts-mt``'s): epoch r's tree has shape (h_r, w_r) =
  ``smooth_shape(L_r)`` — the Laplace rule, minimising w·(h − w)² — independent of T, so the
  policy stays anytime as the binary one (:func:`epoch_shapes`).
* **Scale**: every node holding items gets Lap(2·(h_r − w_r)/ε) with sensitivity 1
  (:func:`epoch_release`, the one place it is written), so a buffer item, in at most h_r − w_r
  nodes, pays at most ε/2 there, as in the binary mechanism's r + 1 p-sums of Lap(2(r + 1)/ε).
  Release id r names epoch r's node release (id 0, Lap(2/ε), is also the logarithmic blocks':
  epoch 0's shape is (2, 1)).
* **Ledger**: one row per released node that holds items, over its exact observation range,
  written before its draw; empty nodes are 0, no draw, no row.
* **Certificate**: the logarithmic block alone (the closing reward of each epoch) and, per
  reachable epoch r, one block plus ``smooth_worst_nodes(n_r, h_r, w_r)`` node releases for
  the buffer's first reward, n_r = min(L_r, T − K + 1 − L_r) the most items the buffer can
  hold within T (:meth:`DPTSSmooth.certificate`, accounting's
  :func:`~dpledger.accounting.smooth_tree.smooth_tree_candidate`).
* **Theorem**: Theorem 1 (ε-DP) is kept: its proof composes an ε/2 logarithmic mechanism with
  an ε/2 counter on the buffer, and the smooth tree is ε/2-DP on it.  Theorem 2's regret bound
  is withheld (its optimism shift bounds the binary mechanism's noise;
  :func:`dpledger.policies.regret_bounds.hu_hegde_2022_dp_ts`).

The kernel and the step form (:class:`dpledger.policies.step_rules_smooth.SmoothDPTSStep`) share
:func:`dp_ts_smooth_push` and :func:`dp_ts_smooth_commit`; the binary kernel
(``hu_hegde._dp_ts``) is not touched.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from dpledger._jit import njit
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.accounting.smooth_tree import smooth_tree_candidate
from dpledger.errors import DpledgerError
from dpledger.mechanisms.counters import log_commit, log_new, log_output, log_push
from dpledger.mechanisms.noise import laplace_noise
from dpledger.mechanisms.smooth import SLOT_NEW as _I_NNEW
from dpledger.mechanisms.smooth import (SMOOTH_MAX_HEIGHT, smooth_commit, smooth_new,
                                        smooth_node, smooth_output, smooth_push,
                                        smooth_sensitivity, smooth_shape, smooth_state_size)
from dpledger.policies.base import POSTERIOR_DRAW_CODE
from dpledger.policies.environments import draw_reward
from dpledger.policies.hu_hegde import (DPTS, SHIFTED_BOUND_ROWS, dp_ts_arm_moved,
                                        dp_ts_block_start, dp_ts_shape, shifted_joint_arm,
                                        shifted_joint_block, shifted_max_round, shifted_round)
from dpledger.policies.beta_max import MAX_REJECT
from dpledger.policies.rules import argmax_first, capture_release, tie_break
from dpledger.policies.sink import put_action


def epoch_items(r: int) -> int:
    """L_r = 2^{r+1} − 1: the most items epoch r's buffer holds (item 2^{r+2} − 1 of the arm
    closes the next logarithmic block instead)."""
    return (1 << (int(r) + 1)) - 1


@lru_cache(maxsize=None)
def _shape(r: int) -> tuple[int, int]:
    return smooth_shape(epoch_items(r))


def epoch_shapes(n: int) -> np.ndarray:
    """(n, 2) int64: epoch r's (h_r, w_r) = ``smooth_shape(L_r)`` for r < n."""
    if n < 1:
        raise DpledgerError(f"dp-ts counter=smooth: need at least one epoch, got {n}")
    return np.array([_shape(r) for r in range(int(n))], dtype=np.int64)


def epoch_release(epsilon: float, r: int) -> LaplaceRelease:
    """Epoch r's node release: Lap(2·(h_r − w_r)/ε), sensitivity 1 (ε/(2·(h_r − w_r)) per
    node, so ε/2 for an item in the most nodes)."""
    h, w = _shape(int(r))
    return LaplaceRelease(scale=2.0 * smooth_sensitivity(h, w) / float(epsilon),
                          sensitivity=1.0)


@njit(cache=True)
def dp_ts_smooth_push(a, x, O, lfs, lis, sfs, sis):
    """Arm a's next reward: (kind, value, start, stop) of the one release it makes due — kind 0
    a logarithmic block (release id 0), kind 1 the node of the epoch's smooth tree that holds
    items (release id r_a) — over observations [start, stop).  The tree's new empty nodes are
    committed with it (:func:`dp_ts_smooth_commit`)."""
    O[a] += 1.0
    code, value, start, stop = log_push(lfs[a], lis[a], x)
    if code >= 0:
        return 0, value, start, stop
    m = smooth_push(sfs[a], sis[a], x)
    for k in range(m):
        v, s0, s1 = smooth_node(sfs[a], sis[a], k)
        if s1 > s0:
            return 1, v, s0, s1
    raise ValueError("smooth mechanism: a push released no node holding items")


@njit(cache=True)
def dp_ts_smooth_commit(a, kind, value, noise, O, r, lfs, lis, sfs, sis, mu_tilde, shapes):
    """The release just made due, drawn.  A log block closes the epoch and opens the next
    buffer's smooth tree (shape ``shapes[r_a]``, from observation O_a; epochs beyond the table
    receive no item within the run); a node commits its noisy value (the new empty nodes 0,
    top level first, as :func:`~dpledger.mechanisms.smooth.smooth_step`).
    μ̃_a = (log output + tree output)/O_a."""
    if kind == 0:
        log_commit(lfs[a], lis[a], 0, value + noise)
        if O[a] > 1.0:
            r[a] += 1
        ra = r[a]
        if ra < shapes.shape[0]:
            fs, ist = smooth_new(shapes[ra, 0], shapes[ra, 1], (np.int64(1) << (ra + 1)) - 1,
                                 np.int64(O[a]))
            sfs[a, :] = 0.0
            sis[a, :] = 0
            sfs[a, :fs.size] = fs
            sis[a, :ist.size] = ist
        else:
            sis[a, :] = 0           # bound 0: a push would raise (none can come within T)
        b_out = 0.0
    else:
        for k in range(sis[a, _I_NNEW]):
            v, s0, s1 = smooth_node(sfs[a], sis[a], k)
            smooth_commit(sfs[a], sis[a], k, value + noise if s1 > s0 else 0.0)
        b_out = smooth_output(sfs[a], sis[a])
    mu_tilde[a] = (log_output(lfs[a], lis[a]) + b_out) / O[a]


@njit(cache=True, nogil=True)
def _dp_ts_smooth(rng, env, T, K, stop, params, actions, rows, capture):
    """DP-TS (hu_hegde._dp_ts's rounds) with a smooth tree on each epoch buffer.  params: ε,
    1 for ``posterior_draw="max"`` (2 ``max-joint``), the number n of epochs, their shapes h_0, w_0, …,
    h_{n−1}, w_{n−1}, then the noise scale of every release id (``noise_scales``)."""
    eps = params[0]
    use_max = params[1] != 0.0
    joint = params[1] == 2.0
    n_ep = np.int64(params[2])
    shapes = np.zeros((n_ep, 2), np.int64)
    hmax = 2
    for k in range(n_ep):
        shapes[k, 0] = np.int64(params[3 + 2 * k])
        shapes[k, 1] = np.int64(params[4 + 2 * k])
        hmax = max(hmax, shapes[k, 0])
    scales = params[3 + 2 * n_ep:]
    lfs = np.zeros((K, 2))
    lis = np.zeros((K, 4), np.int64)
    sfs = np.zeros((K, 1 + 2 * hmax))          # smooth_state_size(hmax)
    sis = np.zeros((K, 9 + 4 * hmax), np.int64)
    r = np.zeros(K, np.int64)
    O = np.zeros(K)
    mu_tilde = np.zeros(K)
    theta = np.zeros(K)
    c_o = np.zeros(K)                       # posterior_draw="max", as _dp_ts: dp_ts_shift_parts
    d_o = np.ones(K)                        # of each arm's O, the bounds and the block
    bnd = np.zeros((SHIFTED_BOUND_ROWS, K))
    t_end = 0
    f_lo = f_up = 0.0
    lead = -1
    B = np.zeros(K)                         # max-joint, as _dp_ts
    tau = P = 0.0
    tau_lead = -1
    n_rows = 0
    for a in range(K):
        fs, ist = log_new(1, 0)
        lfs[a] = fs
        lis[a] = ist
    for t in range(1, stop + 1):
        if t <= K:
            a = t - 1
        elif use_max:                       # _dp_ts's round
            if t > t_end:
                t_end, f_lo, f_up, lead = dp_ts_block_start(t, bnd)
                if joint:
                    tau, P = shifted_joint_block(bnd, lead, B)
                    tau_lead = lead
            if not joint:                   # as _dp_ts
                a = shifted_max_round(rng, np.log2(t), c_o, mu_tilde, O, d_o, bnd, lead, theta,
                                      MAX_REJECT)
            else:
                a = shifted_round(rng, np.log2(t), c_o, mu_tilde, O, d_o, bnd, lead, theta, joint,
                                  tau, tau_lead, B, P)
        else:
            for j in range(K):
                al, be = dp_ts_shape(eps, t, mu_tilde[j], O[j])   # as _dp_ts
                theta[j] = rng.beta(al, be)
            a, tie = argmax_first(theta)
            if tie:
                a = tie_break(theta, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        kind, value, start, stop_ = dp_ts_smooth_push(a, x, O, lfs, lis, sfs, sis)
        rid = 0 if kind == 0 else r[a]
        scale = scales[rid]
        noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, start, stop_, rid)
        n_rows += 1
        if kind == 0 and capture.shape[1] > 0 and a == 0 and t <= K:
            capture[0, 0] = value + noise
            capture[1, 0] = value
        capture_release(capture, value + noise, value, scale, a, start, stop_)
        dp_ts_smooth_commit(a, kind, value, noise, O, r, lfs, lis, sfs, sis, mu_tilde, shapes)
        if use_max:                         # μ̃_a and O_a moved
            lead = dp_ts_arm_moved(a, eps, mu_tilde, O, c_o, d_o, f_lo, f_up, bnd)
            if tau_lead >= 0 and a != tau_lead:
                P = shifted_joint_arm(a, tau, tau_lead, bnd, B)
        put_action(actions, t, a)
    return stop, n_rows, n_rows


class DPTSSmooth(DPTS):
    """DP-TS with ``counter=smooth`` (module docstring); built by ``DPTS(counter="smooth")``."""

    provenance = "reconstructed"
    kernel = _dp_ts_smooth

    def __init__(self, **params):
        super().__init__(**params)
        self.params["counter"] = "smooth"

    def n_epochs(self, T: int, K: int) -> int:
        """Epochs 0 … max_epoch(T, K): those whose buffer can receive an item within T."""
        return self.max_epoch(T, K) + 1

    def kernel_params(self, T, K):
        shapes = epoch_shapes(self.n_epochs(T, K))
        return np.concatenate([[self.params["epsilon"],
                                POSTERIOR_DRAW_CODE[self.params["posterior_draw"]],
                                float(shapes.shape[0])],
                               shapes.astype(np.float64).ravel(), self.noise_scales(T, K)])

    def row_capacity(self, T, K):
        # one row per reward: a log block or the one node holding items that its push releases
        return int(T)

    def releases(self, T, K):
        return [epoch_release(self.params["epsilon"], r) for r in range(self.n_epochs(T, K))]

    def certificate(self, T, K):
        eps = self.params["epsilon"]
        log_rel = LaplaceRelease(scale=2.0 / eps, sensitivity=1.0)
        cands = [Candidate(Composition.of([log_rel]), Witness(arm=0, index=0, round=1),
                           "the first reward of each arm (and the last of each epoch) enters one "
                           "logarithmic-mechanism block only: Lap(2/ε), ε/2")]
        seen = {cands[0].composition}
        n_max = T - K + 1
        for r in range(self.n_epochs(T, K)):
            n_r = min(epoch_items(r), n_max - epoch_items(r))
            if n_r < 1:
                continue
            h, w = _shape(r)
            cand = smooth_tree_candidate(
                n_r, h, w, epoch_release(eps, r), Witness(arm=0, index=epoch_items(r),
                                                          round=None),
                f"the first reward of epoch {r}'s buffer: one logarithmic-mechanism block "
                f"(Lap(2/ε), ε/2) and the nodes of the epoch's smooth tree, every node "
                f"Lap(2·(h − w)/ε) with sensitivity 1", also=[(log_rel, 1)])
            if cand.composition in seen:
                continue
            seen.add(cand.composition)
            cands.append(cand)
        return Certificate(candidates=tuple(cands),
                           note="counter = smooth: each epoch buffer's binary mechanism replaced "
                                "by a smooth tree of shape smooth_shape(2^{r+1} − 1); Theorem 1's "
                                "composition (ε/2 logarithmic + ε/2 buffer counter) holds for it")

    def theorem(self, T, K):
        """Theorem 1, kept: its proof is basic composition of the ε/2 logarithmic mechanism with
        an ε/2 counter on the epoch buffer, and the smooth tree is one (every item in at most
        h_r − w_r nodes of ε/(2·(h_r − w_r)))."""
        thm = super().theorem(T, K)
        return replace(thm, notes=thm.notes + (
            "counter=smooth: the buffer's binary mechanism is replaced by a smooth tree, also "
            "ε/2-DP on the buffer, so the theorem's composition holds unchanged",))

    def finish(self, out, T, K):
        return out              # rows only: no tree records

    def step_rule(self):
        """The step form's rule (policies/step_rules_smooth.py), in place of dp-ts's."""
        from dpledger.policies.step_rules_smooth import SmoothDPTSStep
        return SmoothDPTSStep


DPTSSmooth.smooth_counter = True


def step_state(K: int) -> dict:
    """The step form's smooth-tree state: room for a tree of the largest height
    (:data:`~dpledger.mechanisms.smooth.SMOOTH_MAX_HEIGHT`: the step form is anytime)."""
    nf, ni = smooth_state_size(SMOOTH_MAX_HEIGHT)
    return dict(sfs=np.zeros((K, nf)), sis=np.zeros((K, ni), np.int64))

