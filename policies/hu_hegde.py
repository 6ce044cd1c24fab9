"""Hu & Hegde 2022 (UAI): DP-TS (Algorithm 1) and Lazy-DP-TS (Algorithm 2).  Logarithms are
base 2 (docs/algorithms.md#logarithms).

Lazy-DP-TS keeps, per arm, a buffer of fresh rewards; when it holds 2^{r+1} rewards the arm's
private mean becomes (Σ buffer + Lap(1/ε)) / 2^{r+1} and the buffer is emptied
(docs/algorithms.md#lazy-dp-ts).  Each
reward enters exactly one released sum of sensitivity 1 — the certificate is one Laplace
release of ε — and the Beta sampling is post-processing (Theorem 3).

DP-TS (docs/algorithms.md#dp-ts, docs/algorithms.md#binary-tree-counter) keeps all observations:
per arm a modified logarithmic mechanism (budget
ε/2: the first reward, then blocks of 2, 4, … rewards each released once with Lap(2/ε)) and, on
the current epoch buffer, a 2^{r+1}-bounded binary mechanism (budget ε/2: levels r + 1, each
p-sum Lap(2(r+1)/ε)).  Both counters are the compiled state updates of
:mod:`dpledger.mechanisms.counters` (one source for the binary mechanism); the noise is drawn
here through helpers that write the ledger record in the same call.
"""
from __future__ import annotations

import math

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.policies.base import EPSILON, POSTERIOR_DRAW, POSTERIOR_DRAW_CODE, KernelPolicy
from dpledger.policies.beta_max import (JOINT_REJECT, MAX_REJECT, beta_above_tail,
                                        beta_arm_stats, block_end, joint_bound, joint_open,
                                        joint_product, joint_threshold,
                                        beta_max_select, beta_may_beat, beta_tail_may_exceed,
                                        beta_upper_tail)
from dpledger.policies.environments import draw_reward
from dpledger.policies.sink import put_action
from dpledger.mechanisms.counters import (binary_commit, binary_output, binary_push,
                                          binary_reset, log_commit, log_new, log_output, log_push)
from dpledger.policies.base import RunOutput
from dpledger.policies.mishra_thakurta import COUNTER, counter_class
from dpledger.mechanisms.noise import laplace_noise, tree_noise
from dpledger.policies.rules import (argmax_first, argmax_random_tie, capture_release, clip01,
                                     tie_break)



# ---- Lazy-DP-TS: the rule as state updates (one source for the kernel and the step form) ----
# State per arm: μ̃ (mu), the last released epoch size O, the epoch r, the buffer's sum and
# length, the observations n.  ``lazy_select`` is a round's choice, ``lazy_push`` takes the arm's
# next reward and says whether a release is due (and its range), ``lazy_commit`` stores the
# noisy sum.  The whole-run kernel below and :mod:`dpledger.policies.online` call the same three.

@njit(cache=True, inline="always")
def lazy_shape(shift, mu_j, o_j):
    """Arm j's posterior Beta(m·O_j + 1, (1 − m)·O_j + 1), m = clip(μ̃_j + shift/O_j), with
    shift = 3·log2(t)/ε, from its μ̃_j and O_j (scalars, see :func:`dp_ts_shape`): its two
    parameters."""
    m = clip01(mu_j + shift / o_j)
    return m * o_j + 1.0, (1.0 - m) * o_j + 1.0


@njit(cache=True, inline="always")
def lazy_draw(rng, shift, mu_j, o_j):
    """Arm j's sample θ_j from :func:`lazy_shape`'s Beta (straight-line: inlined with the
    Generator at no cost)."""
    al, be = lazy_shape(shift, mu_j, o_j)
    return rng.beta(al, be)


# ---- posterior_draw="max" for both policies' shifted posteriors ----------------------------------
# Both policies' arm j has the posterior Beta(m·O_j + 1, (1 − m)·O_j + 1), m = clip(μ̃_j + n_j/d_j),
# the optimistic term computed as n_j/d_j with n_j = g_j·f: Lazy-DP-TS's shift/O_j (g_j = 1,
# f = 3·log2(t)/ε, d_j = O_j), DP-TS's υ = (6√8·log2(O_j + 1)·log2 t)/(ε·O_j) (g_j its first
# factor, f = log2 t, d_j = ε·O_j; dp_ts_shift_parts).  In real arithmetic m·O_j = μ̃_j·O_j + s_j
# with s_j = k_j·f, k_j = g_j·O_j/d_j (1, and 6√8·log2(O_j + 1)/ε), so with c_j = (μ̃_j·O_j +
# 1)/(O_j + 2) and v_j = 1/(O_j + 2) the posterior mean is clamp(c_j + s_j·v_j, v_j, (O_j + 1)·v_j)
# (the mean (m·O + 1)/(O + 2) is increasing in m, so clipping m clamps the mean), and α + β =
# O_j + 2.  Both sides' rounding (this form's operations, the shape's and the mean's, with the
# few ulps of k_j and of n_j/d_j) is below 2e-15·(1 + |μ̃_j| + s_j/O_j); the margin kept is
# 1e-12·(1 + |μ̃_j|) + 3e-12·s_j·v_j (s/O ≤ 3·s·v for O ≥ 1), 500 times that, and the bound weight
# 2(α + β + 1) is taken 1e-12 low.  The mean increases with f, and f with t, so over a block of
# rounds [t0, t1] every round's exact mean lies in [form at the block's lowest f − margin, form at
# its highest f + margin] (the margin taken at the highest f): rows ``lo`` and ``up``, recomputed
# when a block starts or the arm's μ̃_j or O_j changes.  A block is t1 = t0 + ⌊t0/64⌋; its two
# values of f are widened by 1e-13 relative, so a log2 that is only faithfully rounded (within an
# ulp, not monotone to the last bit) stays inside them.
_LB_C, _LB_V, _LB_HI, _LB_ERR, _LB_W, _LB_LO, _LB_UP, _LB_K = range(8)
SHIFTED_BOUND_ROWS = 8


@njit(cache=True, inline="always")
def shifted_arm_bounds(j, mu_tilde, O, rate, bnd):
    """Arm j's columns of ``bnd`` that depend on its μ̃_j and O_j only (rows c, v, (O + 1)·v, the
    margin's fixed part, the low bound weight and k_j = ``rate``; see the comment above)."""
    o = O[j]
    v = 1.0 / (o + 2.0)
    bnd[_LB_C, j] = (mu_tilde[j] * o + 1.0) * v
    bnd[_LB_V, j] = v
    bnd[_LB_HI, j] = (o + 1.0) * v
    bnd[_LB_ERR, j] = 1e-12 * (1.0 + abs(mu_tilde[j]))
    bnd[_LB_W, j] = 2.0 * (o + 3.0) * (1.0 - 1e-12)
    bnd[_LB_K, j] = rate


@njit(cache=True, inline="always")
def shifted_arm_block(j, f_lo, f_up, bnd):
    """Arm j's rows ``lo`` and ``up`` of ``bnd``: an interval holding its exact posterior mean for
    every f in [f_lo, f_up] (comment above); after :func:`shifted_arm_bounds`."""
    v = bnd[_LB_V, j]
    k = bnd[_LB_K, j]
    rad = bnd[_LB_ERR, j] + 3e-12 * (k * f_up * v)
    bnd[_LB_LO, j] = min(max(bnd[_LB_C, j] + k * f_lo * v, v), bnd[_LB_HI, j]) - rad
    bnd[_LB_UP, j] = min(max(bnd[_LB_C, j] + k * f_up * v, v), bnd[_LB_HI, j]) + rad


@njit(cache=True, inline="always")
def shifted_block_leader(bnd):
    """The arm whose interval lies above every other arm's — then it is the leader (the first arm
    of largest exact mean) at every round of the block — or −1 when the intervals overlap."""
    K = bnd.shape[1]
    a = 0
    for j in range(1, K):
        if bnd[_LB_LO, j] > bnd[_LB_LO, a]:
            a = j
    for j in range(K):
        if j != a and bnd[_LB_UP, j] >= bnd[_LB_LO, a]:
            return -1
    return a


@njit(cache=True, inline="always")
def shifted_block(f_lo, f_up, bnd):
    """Every arm's interval for a block whose f runs over [f_lo, f_up] (:func:`shifted_arm_block`)
    and the block's leader (:func:`shifted_block_leader`)."""
    for j in range(bnd.shape[1]):
        shifted_arm_block(j, f_lo, f_up, bnd)
    return shifted_block_leader(bnd)


@njit(cache=True, inline="always")
def _shifted_exact(f, g_j, mu_j, o_j, d_j):
    """Arm j's exact parameters, mean and bound weight: m = clip(μ̃_j + g_j·f/d_j) and
    :func:`~dpledger.policies.beta_max.beta_arm_stats`'s operations — :func:`lazy_shape`'s and
    :func:`dp_ts_shape`'s doubles (g_j·f is f itself when g_j = 1; DP-TS's υ is
    (first · log2 t)/second of :func:`dp_ts_shift_parts`)."""
    m = clip01(mu_j + g_j * f / d_j)
    al = m * o_j + 1.0
    be = (1.0 - m) * o_j + 1.0
    n = al + be
    return al, be, al / n, 2.0 * (n + 1.0)


@njit(cache=True, _nrt=False, forceinline=True)
def shifted_arm_test(rng, u, j, f, g, mu_tilde, O, d, bnd, m, a, theta, reject_at):
    """Arm j's step of the per-arm round with its uniform u against the running maximum m of arm
    a: (m, a) after it.  Its block interval, then its exact shape, then the log-concave bound
    may say "does not beat"; otherwise the tail decides u < P(Beta > m), and an arm that beats
    gets its conditioned sample (:func:`~dpledger.policies.beta_max.beta_above_tail`, by
    rejection from ``reject_at``) in ``theta`` and becomes the running maximum.  Compiled as
    :func:`shifted_max_round`."""
    if beta_may_beat(u, bnd[_LB_UP, j], bnd[_LB_W, j], m):
        al, be, mu, w = _shifted_exact(f, g[j], mu_tilde[j], O[j], d[j])
        if beta_may_beat(u, mu, w, m) and beta_tail_may_exceed(u, al, be, m):
            p = beta_upper_tail(al, be, m)
            if u < p:
                m = beta_above_tail(rng, al, be, m, p, reject_at)
                theta[j] = m
                a = j
    return m, a


@njit(cache=True, _nrt=False, forceinline=True)
def shifted_max_round(rng, f, g, mu_tilde, O, d, bnd, lead, theta, reject_at):
    """``posterior_draw="max"``'s round for both policies: the arm and the samples of
    :func:`~dpledger.policies.beta_max.beta_max_round` on every arm's shifted posterior (comment
    above; f this round's, g and d per arm) — the same leader, uniforms, decisions and draws, so
    the same run — with most arms' shapes never computed.  ``bnd`` holds the intervals of the
    block of rounds this one belongs to (:func:`shifted_arm_bounds`, :func:`shifted_arm_block`);
    ``lead`` is :func:`shifted_block_leader`'s answer for them.  When it is −1 the leader (first
    arm of largest exact mean) is found among the arms whose interval reaches the largest lower
    end; an arm whose upper end and low weight already let the sub-Gaussian bound say "does not
    beat" is passed with its uniform drawn; the others get their exact shape and the round's full
    test (:func:`shifted_arm_test`).  The bounds only skip work: the decision stays u < P(Beta >
    M).  ``reject_at`` is :data:`~dpledger.policies.beta_max.MAX_REJECT` for ``max`` (and
    :data:`~dpledger.policies.beta_max.JOINT_REJECT` when ``max-joint`` falls back to this
    round).  No allocation (``_nrt=False`` and ``forceinline``, see
    :func:`~dpledger.policies.beta_max.beta_max_round`)."""
    K = theta.size
    if lead >= 0:
        a = lead
        al_a, be_a, _, _ = _shifted_exact(f, g[a], mu_tilde[a], O[a], d[a])
    else:
        floor = -np.inf
        for j in range(K):
            if bnd[_LB_LO, j] > floor:
                floor = bnd[_LB_LO, j]
        a = -1
        best = -np.inf
        al_a = be_a = 1.0
        for j in range(K):
            if bnd[_LB_UP, j] >= floor:
                al, be, mu, _ = _shifted_exact(f, g[j], mu_tilde[j], O[j], d[j])
                if mu > best:
                    a, best, al_a, be_a = j, mu, al, be
    m = rng.beta(al_a, be_a)
    theta[a] = m
    lead = a
    for j in range(K):
        if j != lead:
            m, a = shifted_arm_test(rng, rng.random(), j, f, g, mu_tilde, O, d, bnd, m, a,
                                    theta, reject_at)
    return a


@njit(cache=True, _nrt=False, forceinline=True)
def shifted_joint_round(rng, f, g, mu_tilde, O, d, bnd, lead, theta, tau, B, P):
    """``posterior_draw="max-joint"``'s round (beta_max.py's comment on it) when the block's
    intervals name a leader ``lead`` and it is the one τ, ``B`` and P = Π(1 − B_j) were set for
    (:func:`shifted_joint_block`): the leader's sample M; for M ≥ τ one uniform U, and U < P
    plays the leader; otherwise :func:`~dpledger.policies.beta_max.joint_first`'s arm is tested
    with its uniform read off U, and the arms after it — or, for M < τ, every other arm — with
    fresh uniforms (:func:`shifted_arm_test`, rejection from
    :data:`~dpledger.policies.beta_max.JOINT_REJECT`).  Compiled as :func:`shifted_max_round`."""
    K = theta.size
    a = lead
    al_a, be_a, _, _ = _shifted_exact(f, g[a], mu_tilde[a], O[a], d[a])
    m = rng.beta(al_a, be_a)
    theta[a] = m
    i, u = joint_open(rng, m, tau, B, P, lead)
    if i == -2:
        return a
    if i >= 0:
        m, a = shifted_arm_test(rng, u, i, f, g, mu_tilde, O, d, bnd, m, a, theta,
                                JOINT_REJECT)
    for j in range(i + 1, K):
        if j != lead:
            m, a = shifted_arm_test(rng, rng.random(), j, f, g, mu_tilde, O, d, bnd, m, a,
                                    theta, JOINT_REJECT)
    return a


@njit(cache=True, _nrt=False, forceinline=True)
def shifted_round(rng, f, g, mu_tilde, O, d, bnd, lead, theta, joint, tau, tau_lead, B, P):
    """The round of ``posterior_draw`` ``max`` (``joint`` False) or ``max-joint`` for both
    policies: :func:`shifted_joint_round` while the block's leader is the one τ was set for
    (``tau_lead``), else :func:`shifted_max_round`.  The kernels call it for ``max-joint`` and,
    for ``max``, its second branch directly with the constant ``MAX_REJECT``: compiled with the
    joint round beside it, DP-TS's ``max`` kernel was ≈ 4–7 % slower in median
    (docs/design.md#the-beta-family-p8)."""
    if joint and lead >= 0 and lead == tau_lead:
        return shifted_joint_round(rng, f, g, mu_tilde, O, d, bnd, lead, theta, tau, B, P)
    return shifted_max_round(rng, f, g, mu_tilde, O, d, bnd, lead, theta,
                             JOINT_REJECT if joint else MAX_REJECT)


@njit(cache=True)
def shifted_joint_block(bnd, lead, B):
    """(τ, P) of a new block whose intervals are in ``bnd`` and whose leader is ``lead``
    (:func:`shifted_block`'s answer), ``B`` filled
    (:func:`~dpledger.policies.beta_max.joint_threshold` on the leader's lower end and every
    arm's upper end and low weight); (0, 0) when there is no leader (the block then plays
    :func:`shifted_max_round`).  Once a block."""
    if lead < 0:
        B[:] = 0.0
        return 0.0, 0.0
    return joint_threshold(bnd[_LB_LO, lead], bnd[_LB_W, lead], bnd[_LB_UP], bnd[_LB_W], lead, B)


@njit(cache=True, inline="always")
def shifted_joint_arm(a, tau, tau_lead, bnd, B):
    """After arm a ≠ ``tau_lead``'s interval moved (its commit): its bound at τ and the new P."""
    B[a] = joint_bound(bnd[_LB_UP, a], bnd[_LB_W, a], tau)
    return joint_product(B, tau_lead)


@njit(cache=True)
def shifted_joint_step(rng, t, f, g, mu_tilde, O, d, bnd, t_end, f_lo, f_up, blk, theta):
    """The step forms' ``max-joint`` round (the kernels' :func:`shifted_round`, the same draws)
    from the arms' exact state, ``bnd`` holding every arm's columns of
    :func:`shifted_arm_bounds`.  ``blk`` is the kernel's block of rounds — (last round, lowest
    f, highest f, τ, τ's leader), kept in the step rule's state; when t is past its end a new
    block starts, (``t_end``, ``f_lo``, ``f_up``) the caller's for it, and τ and its leader
    are set as the kernel sets them (:func:`shifted_joint_block`).  Every arm's interval and
    the leader are then recomputed (:func:`shifted_block`: the same doubles as the kernel's,
    which recomputes only the moved arm's), and B_j is each arm's bound at τ from its present
    interval (the kernel recomputes it when the arm moves)."""
    K = mu_tilde.size
    B = np.zeros(K)
    if t > blk[0]:
        blk[0], blk[1], blk[2] = t_end, f_lo, f_up
        lead = shifted_block(f_lo, f_up, bnd)
        blk[3] = shifted_joint_block(bnd, lead, B)[0]
        blk[4] = lead
    else:
        lead = shifted_block(blk[1], blk[2], bnd)
    tau, tau_lead = blk[3], np.int64(blk[4])
    if tau_lead >= 0:
        for j in range(K):
            if j != tau_lead:
                B[j] = joint_bound(bnd[_LB_UP, j], bnd[_LB_W, j], tau)
    return shifted_round(rng, f, g, mu_tilde, O, d, bnd, lead, theta, True, tau, tau_lead, B,
                         joint_product(B, tau_lead))


@njit(cache=True, inline="always")
def lazy_block_shifts(eps, t0):
    """Lazy-DP-TS's block from round t0: its last round and the lowest and highest shift
    f = 3·log2(t)/ε over it, widened by 1e-13 relative (comment above)."""
    t1 = block_end(t0)
    return (t1, 3.0 * np.log2(t0) / eps * (1.0 - 1e-13),
            3.0 * np.log2(t1) / eps * (1.0 + 1e-13))


@njit(cache=True, inline="always")
def dp_ts_block_logs(t0):
    """DP-TS's block from round t0: its last round and the lowest and highest f = log2 t over
    it, widened by 1e-13 relative (comment above)."""
    t1 = block_end(t0)
    return t1, np.log2(t0) * (1.0 - 1e-13), np.log2(t1) * (1.0 + 1e-13)


@njit(cache=True, inline="always")
def dp_ts_block_start(t, bnd):
    """A new block of rounds from round t for DP-TS's ``max`` round (both counters' kernels):
    every arm's interval over it and its leader — (last round, lowest and highest log2 t,
    leader).  Once a block, so its cost does not matter."""
    t_end, f_lo, f_up = dp_ts_block_logs(t)
    return t_end, f_lo, f_up, shifted_block(f_lo, f_up, bnd)


@njit(cache=True, _nrt=False, forceinline=True)
def dp_ts_arm_moved(a, eps, mu_tilde, O, c_o, d_o, f_lo, f_up, bnd):
    """After arm a's commit (its μ̃_a and O_a moved), for DP-TS's ``max`` round in both
    counters' kernels: its factors of υ (:func:`dp_ts_shift_parts`), its columns and interval
    in ``bnd``, and the block's leader, returned.  Every round, so compiled as
    :func:`dp_ts_push`."""
    c_o[a], d_o[a] = dp_ts_shift_parts(eps, O[a])
    shifted_arm_bounds(a, mu_tilde, O, c_o[a] / eps, bnd)
    shifted_arm_block(a, f_lo, f_up, bnd)
    return shifted_block_leader(bnd)


@njit(cache=True)
def lazy_select(rng, eps, t, mu_tilde, O, theta, use_max=False):
    """Round t's arm: every arm's :func:`lazy_draw` in arm order, argmax (ties uniformly at
    random), or with ``use_max`` the same law by :func:`shifted_max_round`
    (``posterior_draw="max"``) — the step form's round; the kernel writes the same loop out (the
    Generator must not enter an inlined helper that loops: numba reference-counts it there, see
    :func:`dpledger.policies.baselines.ucb1_select`)."""
    shift = 3.0 * np.log2(t) / eps
    if use_max:
        K = theta.size
        bnd = np.empty((SHIFTED_BOUND_ROWS, K))
        for j in range(K):
            shifted_arm_bounds(j, mu_tilde, O, 1.0, bnd)
        lead = shifted_block(shift, shift, bnd)        # a block of one round: its own shift
        return shifted_max_round(rng, shift, np.ones(K), mu_tilde, O, O, bnd, lead, theta,
                                 MAX_REJECT)
    for j in range(theta.size):
        theta[j] = lazy_draw(rng, shift, mu_tilde[j], O[j])
    return argmax_random_tie(theta, rng)


@njit(cache=True)
def lazy_joint_select(rng, eps, t, mu_tilde, O, theta, blk):
    """The step form's round for ``posterior_draw="max-joint"``: the kernel's (the same block of
    rounds, τ and draws) by :func:`shifted_joint_step`; ``blk`` as there, kept in the step
    rule's state."""
    K = theta.size
    bnd = np.empty((SHIFTED_BOUND_ROWS, K))
    for j in range(K):
        shifted_arm_bounds(j, mu_tilde, O, 1.0, bnd)
    t_end, s_lo, s_up = lazy_block_shifts(eps, t)
    return shifted_joint_step(rng, t, 3.0 * np.log2(t) / eps, np.ones(K), mu_tilde, O, O, bnd,
                              t_end, s_lo, s_up, blk, theta)


@njit(cache=True, inline="always")
def lazy_push(a, x, r, buf_sum, buf_len, n_obs):
    """Arm a's next reward x (rescaled): (due, start, stop) — due when the buffer holds 2^{r+1}
    rewards (the first reward of an arm, n = 0, is its own epoch of one), the release then
    covering observations [start, stop) with value ``buf_sum[a]``."""
    buf_sum[a] += x
    buf_len[a] += 1
    n_obs[a] += 1
    size = 1 if n_obs[a] == 1 else 1 << (r[a] + 1)
    if buf_len[a] == size:
        return True, n_obs[a] - size, n_obs[a]
    return False, 0, 0


@njit(cache=True, inline="always")
def lazy_commit(a, noise, mu_tilde, O, r, buf_sum, buf_len, n_obs):
    """The noisy epoch sum becomes μ̃_a = (Σ buffer + noise)/size, O_a = size; the next epoch
    doubles (after the first reward, r stays 0: the next buffer holds 2)."""
    size = buf_len[a]
    mu_tilde[a] = (buf_sum[a] + noise) / size
    O[a] = size
    if n_obs[a] > 1:
        r[a] += 1
    buf_sum[a] = 0.0
    buf_len[a] = 0


@njit(cache=True, nogil=True)
def _lazy_dp_ts(rng, env, T, K, stop, params, actions, rows, capture):
    """params: ε (the index shift), release 0's noise scale 1/ε (``noise_scales``), then 1 for
    ``posterior_draw="max"``, 2 for ``max-joint`` (absent or 0: every arm's sample)."""
    eps = params[0]
    scale = params[1]
    use_max = params.size > 2 and params[2] != 0.0
    joint = params.size > 2 and params[2] == 2.0
    B = np.zeros(K)                         # max-joint: the block's τ, its leader, the bounds
    tau = P = 0.0                           # at τ and their product (shifted_joint_block)
    tau_lead = -1
    bnd = np.zeros((SHIFTED_BOUND_ROWS, K))  # posterior_draw="max": shifted_arm_bounds's columns
    ones = np.ones(K)                       # g_j of the shifted posterior: shift/O_j
    t_end = 0                               # the last round of bnd's block (lazy_block_shifts)
    s_lo = s_up = 0.0
    lead = -1
    mu_tilde = np.zeros(K)
    O = np.zeros(K)             # size of the last released epoch
    r = np.zeros(K, np.int64)
    buf_sum = np.zeros(K)
    buf_len = np.zeros(K, np.int64)
    n_obs = np.zeros(K, np.int64)
    theta = np.zeros(K)
    n_rows = 0
    for t in range(1, stop + 1):
        # rounds 1 … K: each arm once, its reward released with Lap(1/ε)
        if t <= K:
            a = t - 1
        elif use_max:                       # lazy_select's round
            if t > t_end:
                t_end, s_lo, s_up = lazy_block_shifts(eps, t)
                lead = shifted_block(s_lo, s_up, bnd)
                if joint:
                    tau, P = shifted_joint_block(bnd, lead, B)
                    tau_lead = lead
            if not joint:                   # shifted_round's max branch, its constant
                a = shifted_max_round(rng, 3.0 * np.log2(t) / eps, ones, mu_tilde, O, O, bnd,
                                      lead, theta, MAX_REJECT)
            else:
                a = shifted_round(rng, 3.0 * np.log2(t) / eps, ones, mu_tilde, O, O, bnd, lead,
                                  theta, joint, tau, tau_lead, B, P)
        else:                               # lazy_select's round
            shift = 3.0 * np.log2(t) / eps
            for j in range(K):
                theta[j] = lazy_draw(rng, shift, mu_tilde[j], O[j])
            a, tie = argmax_first(theta)
            if tie:
                a = tie_break(theta, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        due, start, stop_ = lazy_push(a, x, r, buf_sum, buf_len, n_obs)
        if due:
            noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, start, stop_, 0)
            n_rows += 1
            if capture.shape[1] > 0 and t == 1:
                capture[0, 0] = x + noise
                capture[1, 0] = x
            capture_release(capture, buf_sum[a] + noise, buf_sum[a], scale, a, start, stop_)
            lazy_commit(a, noise, mu_tilde, O, r, buf_sum, buf_len, n_obs)
            if use_max:                     # μ̃_a and O_a moved
                shifted_arm_bounds(a, mu_tilde, O, 1.0, bnd)
                shifted_arm_block(a, s_lo, s_up, bnd)
                lead = shifted_block_leader(bnd)
                if tau_lead >= 0 and a != tau_lead:
                    P = shifted_joint_arm(a, tau, tau_lead, bnd, B)
        put_action(actions, t, a)
    return stop, n_rows, n_rows


class LazyDPTS(KernelPolicy):
    name = "lazy-dp-ts"
    title = "Lazy-DP-TS (Hu & Hegde 2022, Algorithm 2)"
    provenance = "faithful"
    exact_sampler = True
    params_spec = (EPSILON, POSTERIOR_DRAW)
    kernel = _lazy_dp_ts
    action_sink = True

    def kernel_params(self, T, K):
        return np.concatenate([[self.params["epsilon"]], self.noise_scales(T, K),
                               [POSTERIOR_DRAW_CODE[self.params["posterior_draw"]]]])

    def row_capacity(self, T, K):
        # K initial releases plus at most one per completed epoch of each arm
        return K + K * (int(math.log2(T)) + 2)

    def releases(self, T, K):
        return [LaplaceRelease(scale=1.0 / self.params["epsilon"], sensitivity=1.0)]

    def certificate(self, T, K):
        lap = self.releases(T, K)[0]
        return Certificate(candidates=(Candidate(
            Composition.of([lap]), Witness(arm=0, index=0, round=1),
            "each reward lies in exactly one epoch sum (sensitivity 1) released once with "
            "Lap(1/ε); sampling from the private means is post-processing"),))

    def theorem(self, T, K):
        return theorems.hu_hegde_2022_lazy_dp_ts(self.params["epsilon"])


# ---- DP-TS -------------------------------------------------------------------------------

@njit(cache=True)
def dp_ts_shift(eps, o, t):
    """υ(ε, O, t) = 6·√8·log2(O+1)·log2(t) / (ε·O)  (the radical covers 8 only,
    docs/algorithms.md#dp-ts)."""
    return 6.0 * np.sqrt(8.0) * np.log2(o + 1.0) * np.log2(t) / (eps * o)


@njit(cache=True, inline="always")
def dp_ts_shift_parts(eps, o):
    """The factors of :func:`dp_ts_shift` that depend on O only, 6·√8·log2(O+1) and ε·O:
    υ = (first · log2 t) / second is the same operations in the same order, so the same double
    (the ``max`` kernel keeps them per arm and recomputes the played arm's only)."""
    return 6.0 * np.sqrt(8.0) * np.log2(o + 1.0), eps * o


@njit(cache=True, nogil=True)
def _dp_ts(rng, env, T, K, stop, params, actions, rows, capture):
    """params: ε (the index shift), 1 for ``posterior_draw="max"``, 2 for ``max-joint`` (0: every
    arm's sample), then the noise scale of every release id r (``noise_scales``: Lap(2(r+1)/ε); id 0 is also the
    logarithmic mechanism's Lap(1/(0.5ε))).

    Capture: a (6, M) array receives every release (log-mechanism blocks and binary-mechanism
    p-sums) through :func:`~dpledger.policies.rules.capture_release`; the two-row form keeps
    arm 0's first log block only."""
    eps = params[0]
    use_max = params[1] != 0.0
    joint = params[1] == 2.0
    scales = params[2:]
    log_scale = scales[0]
    maxlev = 1
    while (1 << maxlev) <= T:
        maxlev += 1
    lfs = np.zeros((K, 2))
    lis = np.zeros((K, 4), np.int64)
    bfs = np.zeros((K, 3 * (maxlev + 1) + 1))   # binary_state_size(maxlev + 1)
    bis = np.zeros((K, 4), np.int64)
    r = np.zeros(K, np.int64)
    O = np.zeros(K)
    slot = np.full(K, -1, np.int64)         # row of the current epoch buffer's tree record
    mu_tilde = np.zeros(K)
    theta = np.zeros(K)
    c_o = np.zeros(K)                       # posterior_draw="max": dp_ts_shift_parts of each
    d_o = np.ones(K)                        # arm's O, shifted_arm_bounds's columns, the block
    bnd = np.zeros((SHIFTED_BOUND_ROWS, K))
    t_end = 0
    f_lo = f_up = 0.0
    lead = -1
    B = np.zeros(K)                         # max-joint: as _lazy_dp_ts
    tau = P = 0.0
    tau_lead = -1
    n_rows = 0
    draws = 0
    for a in range(K):
        fs, ist = log_new(1, 0)             # modified logarithmic mechanism (Hu & Hegde)
        lfs[a] = fs
        lis[a] = ist
    for t in range(1, stop + 1):
        if t <= K:
            a = t - 1
        elif use_max:                       # dp_ts_select's round, by shifted_max_round
            if t > t_end:
                t_end, f_lo, f_up, lead = dp_ts_block_start(t, bnd)
                if joint:
                    tau, P = shifted_joint_block(bnd, lead, B)
                    tau_lead = lead
            if not joint:                   # shifted_round's max branch, its constant
                a = shifted_max_round(rng, np.log2(t), c_o, mu_tilde, O, d_o, bnd, lead, theta,
                                      MAX_REJECT)
            else:
                a = shifted_round(rng, np.log2(t), c_o, mu_tilde, O, d_o, bnd, lead, theta, joint,
                                  tau, tau_lead, B, P)
        else:                               # dp_ts_select's round
            for j in range(K):
                al, be = dp_ts_shape(eps, t, mu_tilde[j], O[j])   # see dp_ts_shape
                theta[j] = rng.beta(al, be)
            a, tie = argmax_first(theta)
            if tie:
                a = tie_break(theta, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        kind, value, start, stop_ = dp_ts_push(a, x, O, lfs, lis, bfs, bis)
        if kind == 0:                       # O = 2^{r+1} − 1: the log mechanism absorbs
            noise = laplace_noise(rng, env, log_scale, 1.0, rows, n_rows, a, start, stop_, 0)
            n_rows += 1
            draws += 1
            if capture.shape[1] > 0 and a == 0 and t <= K:
                capture[0, 0] = value + noise
                capture[1, 0] = value
            capture_release(capture, value + noise, value, log_scale, a, start, stop_)
            slot[a] = -1
        else:
            if slot[a] < 0:
                slot[a] = n_rows
                n_rows += 1
            noise = tree_noise(rng, env, scales[r[a]], rows, slot[a], a, bis[a, 2],
                               bis[a, 0], r[a] + 1, r[a])
            draws += 1
            capture_release(capture, value + noise, value, scales[r[a]], a, start, stop_)
        dp_ts_commit(a, kind, value, noise, O, r, lfs, lis, bfs, bis, mu_tilde)
        if use_max:                         # μ̃_a and O_a moved
            lead = dp_ts_arm_moved(a, eps, mu_tilde, O, c_o, d_o, f_lo, f_up, bnd)
            if tau_lead >= 0 and a != tau_lead:
                P = shifted_joint_arm(a, tau, tau_lead, bnd, B)
        put_action(actions, t, a)
    return stop, n_rows, draws


@njit(cache=True, inline="always")
def dp_ts_shape(eps, t, mu_j, o_j):
    """Arm j's posterior Beta(m·O_j + 1, (1 − m)·O_j + 1), m = clip(μ̃_j + υ(ε, O_j, t)), from
    its μ̃_j and O_j (scalars: an array argument would be reference-counted, ≈ 30 ns a round,
    issue 31): its two parameters.  Its callers draw θ_j = ``rng.beta`` of them themselves.
    With the Generator passed into a helper wrapping this one (``dp_ts_draw``, until
    2026-12-04) the ``all`` kernel ran at 357 ns a round, against 323 ns with the draw written
    in the kernel and 326 ns for 45ae753's loop (T = 1e6, best of 16, one process;
    docs/design.md#the-speed-guard-p7).  Reference counting of the Generator is the likely
    cause (see :func:`~dpledger.policies.baselines.ucb1_select`); it was not traced further."""
    m = clip01(mu_j + dp_ts_shift(eps, o_j, t))
    return m * o_j + 1.0, (1.0 - m) * o_j + 1.0


@njit(cache=True, _nrt=False, forceinline=True)
def dp_ts_shapes(eps, t, mu_tilde, O, al, be, mu, w):
    """Every arm's :func:`dp_ts_shape` into ``al``/``be`` with its mean and bound weight
    (:func:`~dpledger.policies.beta_max.beta_arm_stats`), for ``posterior_draw="max"``
    (compiled as :func:`dp_ts_push`)."""
    for j in range(al.size):
        al[j], be[j] = dp_ts_shape(eps, t, mu_tilde[j], O[j])
        beta_arm_stats(j, al, be, mu, w)


@njit(cache=True)
def dp_ts_select(rng, eps, t, mu_tilde, O, theta, use_max=False):
    """A round's arm (after the initial pulls): every arm's sample of :func:`dp_ts_shape` in arm
    order, argmax (ties uniformly at random), or with ``use_max`` the same law by
    :func:`~dpledger.policies.beta_max.beta_max_select` (``posterior_draw="max"``) — the step
    form's round; the kernel writes the same loop out (see :func:`lazy_select`)."""
    if use_max:
        K = theta.size
        al, be = np.empty(K), np.empty(K)
        dp_ts_shapes(eps, t, mu_tilde, O, al, be, np.empty(K), np.empty(K))
        return beta_max_select(rng, al, be, theta)
    for j in range(theta.size):
        a_j, b_j = dp_ts_shape(eps, t, mu_tilde[j], O[j])
        theta[j] = rng.beta(a_j, b_j)
    return argmax_random_tie(theta, rng)


@njit(cache=True)
def dp_ts_joint_select(rng, eps, t, mu_tilde, O, theta, blk):
    """The step form's round for ``posterior_draw="max-joint"`` (both counters): the kernels'
    (the same block of rounds, τ and draws) by :func:`shifted_joint_step`, every arm's factors of
    υ and columns as :func:`dp_ts_arm_moved` sets them; ``blk`` as there."""
    K = theta.size
    bnd = np.empty((SHIFTED_BOUND_ROWS, K))
    c_o = np.empty(K)
    d_o = np.empty(K)
    for j in range(K):
        c_o[j], d_o[j] = dp_ts_shift_parts(eps, O[j])
        shifted_arm_bounds(j, mu_tilde, O, c_o[j] / eps, bnd)
    t_end, f_lo, f_up = dp_ts_block_logs(t)
    return shifted_joint_step(rng, t, np.log2(t), c_o, mu_tilde, O, d_o, bnd, t_end, f_lo, f_up,
                              blk, theta)


@njit(cache=True, _nrt=False, forceinline=True)
def dp_ts_push(a, x, O, lfs, lis, bfs, bis):
    """Arm a's next reward: (kind, value, start, stop) of the release it makes due — kind 0 a
    logarithmic-mechanism block (release id 0), kind 1 a p-sum of the epoch buffer's binary
    mechanism (release id r_a) — over observations [start, stop).  No reference counting
    (``_nrt=False``, not inlined by numba) and LLVM's ``forceinline``, for the reasons given at
    :func:`dpledger.policies.baselines.klucb_select`."""
    O[a] += 1.0
    code, value, start, stop = log_push(lfs[a], lis[a], x)
    if code >= 0:
        return 0, value, start, stop
    bcode, value, start, stop = binary_push(bfs[a], bis[a], x)
    return 1, value, start, stop


@njit(cache=True, _nrt=False, forceinline=True)
def dp_ts_commit(a, kind, value, noise, O, r, lfs, lis, bfs, bis, mu_tilde):
    """The release just made due, drawn: a log block closes the epoch (the next buffer: L =
    2^{r+1} − 1 items, levels r + 1, from observation O; the arm's first block opens epoch 0);
    a p-sum updates the buffer's running sum.  μ̃_a = (log output + buffer output)/O_a.
    Compiled as :func:`dp_ts_push`."""
    if kind == 0:
        log_commit(lfs[a], lis[a], 0, value + noise)
        if O[a] > 1.0:
            r[a] += 1
        binary_reset(bfs[a], bis[a], r[a] + 1, (1 << (r[a] + 1)) - 1, np.int64(O[a]))
        b_out = 0.0
    else:
        binary_commit(bfs[a], bis[a], 0, value + noise)
        b_out = binary_output(bfs[a], bis[a])
    mu_tilde[a] = (log_output(lfs[a], lis[a]) + b_out) / O[a]


class DPTS(KernelPolicy):
    name = "dp-ts"
    title = "DP-TS (Hu & Hegde 2022, Algorithm 1)"
    provenance = "faithful"
    exact_sampler = True
    params_spec = (EPSILON, POSTERIOR_DRAW, COUNTER)
    kernel = _dp_ts
    action_sink = True

    def __new__(cls, **params):
        # counter=smooth runs another kernel on the epoch buffers: the policy is its subclass
        # (one name, dp-ts; policies/smooth_hu_hegde.py)
        return object.__new__(counter_class(cls, params))

    def kernel_params(self, T, K):
        return np.concatenate([[self.params["epsilon"],
                                POSTERIOR_DRAW_CODE[self.params["posterior_draw"]]],
                               self.noise_scales(T, K)])

    def row_capacity(self, T, K):
        return 2 * K * (int(math.log2(T)) + 3)

    @staticmethod
    def max_epoch(T, K):
        """Largest epoch r whose buffer can receive a binary-mechanism item within T rounds
        (one arm holds at most T − K + 1 observations; epoch r's buffer starts after
        2^{r+1} − 1 of them)."""
        n_max = T - K + 1
        r = 0
        while (1 << (r + 2)) <= n_max:
            r += 1
        return r

    @staticmethod
    def max_depth(T, K):
        """M: the most p-sums (levels) one reward can enter within T rounds.  Item 1 of epoch
        r's buffer enters the level-r p-sum once the buffer holds 2^r items, i.e. after
        2^{r+1} − 1 + 2^r observations of the arm."""
        n_max = T - K + 1
        m = 0
        while 3 * (1 << m) - 1 <= n_max:
            m += 1
        return m

    def releases(self, T, K):
        eps = self.params["epsilon"]
        # id 0: Lap(2/ε) — the log mechanism's blocks and epoch 0's p-sums; id r: Lap(2(r+1)/ε)
        return [LaplaceRelease(scale=2.0 * (k + 1) / eps, sensitivity=1.0)
                for k in range(self.max_epoch(T, K) + 1)]

    def certificate(self, T, K):
        eps = self.params["epsilon"]
        log_rel = LaplaceRelease(scale=2.0 / eps, sensitivity=1.0)
        cands = [Candidate(Composition.of([log_rel]), Witness(arm=0, index=0, round=1),
                           "the first reward of each arm (and the last of each epoch) enters one "
                           "logarithmic-mechanism block only: Lap(2/ε), ε/2")]
        for m in range(1, self.max_depth(T, K) + 1):
            cands.append(Candidate(
                Composition.of([(log_rel, 1),
                                (LaplaceRelease(scale=2.0 * m / eps, sensitivity=1.0), m)]),
                Witness(arm=0, index=(1 << m) - 1, round=None),
                f"the first reward of epoch {m - 1}'s buffer: one log-mechanism block (ε/2) and "
                f"the {m} p-sums of the {m}-level binary mechanism on its root path "
                f"(ε/(2·{m}) each)"))
        return Certificate(candidates=tuple(cands))

    def theorem(self, T, K):
        return theorems.hu_hegde_2022_dp_ts(self.params["epsilon"])

    def finish(self, out: RunOutput, T: int, K: int) -> RunOutput:
        """Split the kernel's rows into Laplace rows and binary-mechanism tree records.

        The ledger's tree record counts every completed node at levels 0 … r; the CSS binary
        mechanism releases only the p-sum closed by each item, so for items other than the
        buffer's first the record is an upper bound of their touches (exact for the first, the
        worst-off reward)."""
        rows = out.rows
        tree = rows[3] < 0
        tr = rows[:, tree]
        out.trees = {"arm": tr[0].copy(), "offset": tr[1].copy(), "n_items": tr[2].copy(),
                     "levels": tr[4].copy(), "release_id": (-tr[3] - 1).copy()}
        out.rows = rows[:, ~tree]
        return out
