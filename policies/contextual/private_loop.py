"""The compiled whole-run loop of the private linear contextual policies (issue 22 §4).

The environment, the delay queue and the select rules are the non-private loop's
(:mod:`~dpledger.policies.contextual.loop`, :mod:`~dpledger.policies.contextual.ridge`); what
differs is where the models come from.  Three statistics (``stat``):

* ``STAT_JOINT`` — Shariff & Sheffet 2018: one tree over the delivered records whose item is
  the upper triangle of [x; y][x; y]ᵀ ((d+1)×(d+1): the Gram matrix, Σ y·x in its last column,
  Σ y² in the corner), one block per model.  A model reads V = (noisy Gram block) + shift·I and
  u = the noisy Σ y·x, θ̂ = V⁻¹u, and its width β = ξ + R·√max(0, ln det V + κ) (their
  ``Ellipsoid``; constants from the policy).
* ``STAT_ENTRIES`` — Mishra & Thakurta 2015 as reconstructed: one tree whose item is the upper
  triangle of x xᵀ followed by r·x, Laplace noise per entry; V = λ·I + the noisy Gram block,
  θ̂ = V⁻¹·(noisy Σ r·x); width α (UCB) or the posterior scale v (TS).
* ``STAT_REWARD`` — reward-private (contexts public): the Gram matrix is exact (rank-1
  Cholesky updates of λ·I + Σ x xᵀ, as the non-private loop) and one tree per stream releases
  Σ r·x; θ̂ = A⁻¹·(noisy Σ r·x).

**Record privacy and the streams.**  Under record privacy (``STAT_JOINT``, ``STAT_ENTRIES``)
the tree runs over *every* delivered record, in delivery order, and each node releases every
model's block: which arm's model a record joins depends on its own (private) context, so a
per-arm tree indexed by that arm's own records would shift every later record of two arms when
one context changes, and no tree-per-arm bound would hold.  The ledger therefore keys these
records as one stream (``obs_stream`` 0, observation n = the n-th delivered record).  Under
reward privacy the arm played is a function of public contexts and released statistics, so
per-arm trees over each arm's own records are sound, and stream s is model s's records.

**Refreshing a model** (:func:`refresh_joint`, :func:`refresh_entries`): a model is refactored
only when the tree it reads has a new item since its cached factorisation
(:func:`~dpledger.mechanisms.matrix.tree_version`) — under record privacy every delivery moves
every block's prefix (a node closes), so every model is refactored once per delivery:
O(M·d³) per round for M models, against O(K·d²) for the non-private loop.

**Positive definiteness.**  A noisy Gram matrix need not be positive definite (Mishra &
Thakurta do not maintain it, says Shariff & Sheffet 2018).  :func:`factor_psd` factors
V + extra·I with extra = 0, then scale·2^(j−1), j = 1, 2, … until the Cholesky factorisation
succeeds, starting from the block's last j and trying one step below it every 32nd refresh
(our choice, reconstructed; a function of released values, so post-processing).  Shariff & Sheffet's shift makes this rare
(probability ≤ α); the count is returned (``psd_repairs``).
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.mechanisms.matrix import (add_outer_packed, add_outer_packed_lattice,
                                        packed_index, tree_prefix, tree_push, tree_version)
from dpledger.mechanisms.matrix_smooth import smooth_tree_push
from dpledger.policies.contextual.environments import LINEAR
from dpledger.policies.contextual.loop import (check_stop, queue_new, queue_pop,
                                               round_context, settle_round)
from dpledger.policies.contextual.ridge import (backward_solve, cholesky_rank1_update,
                                                forward_solve, linucb_scores_widths,
                                                lints_scores, pick)

STAT_JOINT, STAT_ENTRIES, STAT_REWARD = 0, 1, 2
UCB, TS = 0, 1
# consts: the policy's constants, by position
C_SHIFT, C_PSD_SCALE, C_XI, C_REWARD_SD, C_KAPPA, C_WIDTH = 0, 1, 2, 3, 4, 5
N_CONSTS = 6


@njit(cache=True)
def gram_lower_into(pre, off, p, d, unit, diag, W):
    """W's lower triangle (C order) ← unit · the leading d×d block of the symmetric p×p matrix
    packed at pre[off:], plus ``diag`` on the diagonal; the upper triangle is left as it is
    (the factorisation reads the lower one only)."""
    for i in range(d):
        row = off + packed_index(i, i, p)
        for c in range(i, d):
            W[c, i] = pre[row + c - i] * unit
        W[i, i] += diag


@njit(cache=True)
def factor_psd(pre, off, p, d, unit, L, base, scale, jstate, m, W):
    """Factor V + (base + extra)·I into L, V = unit · the d×d Gram block packed at pre[off:]
    (p×p packed, p = d or d + 1), extra = 0, scale·2^(j−1), … (module docstring), by LAPACK's
    Cholesky (``np.linalg.cholesky``: dpotrf) on W (d×d scratch); returns (ln det of the
    factored matrix, repairs made).  ``jstate[m]`` = (the last j of model m, refreshes since a
    smaller j was last tried): the search starts at the last j and tries one step below it every
    32nd refresh (the noise is full rank and the data grow, so the shift needed shrinks slowly;
    trying below at every refresh doubled the factorisations).  LAPACK's factorisation replaced
    a hand-written right-looking Cholesky: ``jdp-linucb`` on digits (d = 64, K = 10) went from
    about 1.6·10³ to 3.0·10³ rounds/s (thread CPU time); one factorisation costs about 12 µs,
    the floor of a round is benchmarks/bench_contextual_private.py S4.  The rounding differs
    from the hand-written one; the factored matrix is the same.  The call allocates its result
    (numba's ``np.linalg.cholesky``); calling dpotrf in place through numba's private LAPACK
    binding saved about 8 % of a refresh, not worth a private API."""
    j = jstate[m, 0]
    jstate[m, 1] += 1
    if j > 0 and jstate[m, 1] >= 32:
        j -= 1
        jstate[m, 1] = 0
    repairs = 0
    while True:
        extra = 0.0 if j == 0 else scale * 2.0 ** (j - 1)
        gram_lower_into(pre, off, p, d, unit, base + extra, W)
        ok = True
        try:
            F = np.linalg.cholesky(W)
        except Exception:       # not positive definite (LAPACK's info > 0)
            ok = False
        if ok:
            L[:, :] = F
            break
        j += 1
        repairs += 1
        if j > 2000:
            raise ValueError("no shift makes the noisy Gram matrix positive definite")
    jstate[m, 0] = j
    ld = 0.0
    for r in range(d):
        ld += np.log(L[r, r])
    return 2.0 * ld, repairs


@njit(cache=True)
def _solve_theta(L, b, th, work):
    forward_solve(L, b, work)
    backward_solve(L, work, th)


@njit(cache=True)
def refresh_joint(pre, m, E, d, unit, consts, chol, theta, widths, jstate, b, W, work):
    """Model m from the Shariff & Sheffet statistic's noisy block m (``pre``: the tree's noisy
    prefix; ``unit``: lattice step, 1 for the float sampler): V = Gram block + shift·I, u = the
    last column, the width from ln det V."""
    p = d + 1
    off = m * E
    for i in range(d):
        b[i] = pre[off + packed_index(i, d, p)] * unit
    logdet, rep = factor_psd(pre, off, p, d, unit, chol[m], consts[C_SHIFT],
                             consts[C_PSD_SCALE], jstate, m, W)
    widths[m] = consts[C_XI] + consts[C_REWARD_SD] * np.sqrt(max(0.0, logdet + consts[C_KAPPA]))
    _solve_theta(chol[m], b, theta[m], work)
    return rep


@njit(cache=True)
def refresh_entries(pre, m, E, d, unit_g, unit_r, consts, chol, theta, widths, jstate, b, W,
                    work):
    """Model m from the per-entry statistic's noisy block m: V = λ·I + Gram, b = Σ r·x."""
    off = m * E
    gram = d * (d + 1) // 2
    for i in range(d):
        b[i] = pre[off + gram + i] * unit_r
    rep = factor_psd(pre, off, d, d, unit_g, chol[m], consts[C_SHIFT], consts[C_PSD_SCALE],
                     jstate, m, W)[1]
    widths[m] = consts[C_WIDTH]
    _solve_theta(chol[m], b, theta[m], work)
    return rep


@njit(cache=True)
def fill_item(stat, item, s, E, x, r, inv_g, inv_r, vx):
    """Write record (x, r)'s contribution into block s of ``item`` (zero elsewhere): lattice
    rounded entry by entry when the inverse units are > 0 (the exact sampler)."""
    d = x.size
    off = s * E
    if stat == STAT_JOINT:
        for i in range(d):
            vx[i] = x[i]
        vx[d] = r
        if inv_g > 0.0:
            add_outer_packed_lattice(vx, inv_g, item, off)
        else:
            add_outer_packed(vx, item, off)
    elif stat == STAT_ENTRIES:
        if inv_g > 0.0:
            add_outer_packed_lattice(x, inv_g, item, off)
        else:
            add_outer_packed(x, item, off)
        g = off + d * (d + 1) // 2
        for i in range(d):
            item[g + i] = np.floor(r * x[i] * inv_r + 0.5) if inv_r > 0.0 else r * x[i]
    else:
        for i in range(d):
            item[off + i] = np.floor(r * x[i] * inv_r + 0.5) if inv_r > 0.0 else r * x[i]


@njit(cache=True, nogil=True)
def run_private(rng, env, T, shared, delay, rule, stat, tr, spec, pad, A, capture, units,
                consts, lam, chol, theta, widths, actions, regret, obs_stream, obs_round, info,
                stop, st, smooth, rows, rids):
    """One run of a private policy (module docstring) over T rounds (replay: log rows) with
    delay ``delay``.  ``tr``: the tree state (one tree, or one per stream for STAT_REWARD);
    ``units`` = (gram or joint unit, reward unit, their inverses — 0 for the float sampler);
    ``chol``, ``theta``, ``widths``: the M models.  Writes actions, regret terms and delivered
    observations as :func:`~dpledger.policies.contextual.loop.run_ridge`; ``info`` ← (PSD
    repairs, model refreshes); ``stop`` the stop slot, read every round.  ``smooth``: the
    records go to the smooth trees ``st`` (:mod:`~dpledger.mechanisms.matrix_smooth`: one
    under record privacy, one per stream under reward privacy, as ``tr``) instead of ``tr``,
    each released node writing its ledger rows into ``rows`` (one per release id in ``rids``,
    naming the tree's stream).  Returns (policy rounds, observations,
    Σ reward, Σ uniform, ledger rows written)."""
    K = env.n_arms
    M = chol.shape[0]
    d = chol.shape[1]
    D = tr[1].shape[2]
    E = D if stat == STAT_REWARD else D // M
    values = np.zeros(K)
    work = np.zeros(d)
    work2 = np.zeros(d)
    W = np.zeros((d, d))
    b = np.zeros(d)
    vx = np.zeros(d + 1)
    item = np.zeros(D)
    jstate = np.zeros((M, 2), np.int64)
    cached = np.full(M, -1, np.int64)
    scratch = np.zeros((K if env.kind == LINEAR else 1, d))
    store = delay < T
    q = queue_new(delay if store else 0, T, d)
    init_models(stat, chol, lam)
    k = 0
    n_obs = 0
    n_rows = 0
    sums = np.zeros(2)
    for t in range(1, T + 1):
        check_stop(stop)
        ctx, row = round_context(env, rng, t, scratch)
        if smooth:
            private_select(rng, stat, rule, st, ctx, shared, units, consts, chol, theta,
                           widths, jstate, cached, info, values, b, W, work, work2)
        else:
            private_select(rng, stat, rule, tr, ctx, shared, units, consts, chol, theta,
                           widths, jstate, cached, info, values, b, W, work, work2)
        k, due = settle_round(env, rng, ctx, row, pick(values, rng), t, shared, delay, store, q,
                              k, actions, regret, sums)
        if due:
            s, rnd, rs, xs = queue_pop(q)
            g = stage_record(stat, tr, s, xs, rs, item, units, chol, vx, work)
            if smooth:
                n_rows = smooth_tree_push(st, g, item, rng, spec, A, capture, rows, n_rows,
                                          rids)
            else:
                tree_push(tr, g, item, rng, spec, pad, A, capture)
            clear_record(stat, s, E, item)
            obs_stream[n_obs] = g
            obs_round[n_obs] = rnd
            n_obs += 1
    return k, n_obs, sums[0], sums[1], n_rows


# the rule's pieces (one source for run_private above and the step form,
# :mod:`dpledger.policies.step_rules`)

@njit(cache=True, inline="always")
def init_models(stat, chol, lam):
    """Reward privacy: every model's exact Gram factor starts at √λ·I (A = λ·I); the record-
    private models are factored from their trees at the first refresh."""
    if stat == STAT_REWARD:
        root = np.sqrt(lam)
        for m in range(chol.shape[0]):
            for i in range(chol.shape[1]):
                chol[m, i, i] = root


@njit(cache=True, inline="always")
def private_select(rng, stat, rule, tr, ctx, shared, units, consts, chol, theta, widths, jstate,
                   cached, info, values, b, W, work, work2):
    """A round's scores (into ``values``; the arm is :func:`pick` of them): every model whose
    tree has a new item since its cached factorisation is refreshed from the tree's noisy
    prefix (:func:`refresh_joint`, :func:`refresh_entries`, or the reward-private θ̂ =
    A⁻¹·(noisy Σ r·x)), then the UCB indices with each model's width, or the linear TS
    samples (post-processing of released statistics)."""
    M = chol.shape[0]
    d = chol.shape[1]
    D = tr[1].shape[2]
    E = D if stat == STAT_REWARD else D // M
    unit_g, unit_r = units[0], units[1]
    for m in range(M):
        g = m if stat == STAT_REWARD else 0
        ver = tree_version(tr, g)
        if ver == cached[m]:
            continue
        cached[m] = ver
        info[1] += 1
        pre = tree_prefix(tr, g)
        if stat == STAT_JOINT:
            info[0] += refresh_joint(pre, m, E, d, unit_g, consts, chol, theta, widths,
                                     jstate, b, W, work)
        elif stat == STAT_ENTRIES:
            info[0] += refresh_entries(pre, m, E, d, unit_g, unit_r, consts, chol, theta,
                                       widths, jstate, b, W, work)
        else:
            for i in range(d):
                b[i] = pre[i] * unit_r
            _solve_theta(chol[m], b, theta[m], work)
            widths[m] = consts[C_WIDTH]
    if rule == UCB:
        linucb_scores_widths(chol, theta, ctx, shared, widths, values, work)
    else:
        lints_scores(chol, theta, ctx, shared, consts[C_WIDTH], values, work, work2, rng)


@njit(cache=True, inline="always")
def stage_record(stat, tr, s, xs, rs, item, units, chol, vx, work):
    """Record (xs, rs) of stream s (its model) written into ``item`` for its tree; under
    reward privacy the model's exact Gram factor takes x first (contexts are public).  Returns
    the tree g the item goes to (the ledger's stream: s under reward privacy, 0 under record
    privacy)."""
    M = chol.shape[0]
    D = tr[1].shape[2]
    E = D if stat == STAT_REWARD else D // M
    if stat == STAT_REWARD:
        cholesky_rank1_update(chol[s], xs, work)
        fill_item(stat, item, 0, E, xs, rs, units[2], units[3], vx)
        return s
    fill_item(stat, item, s, E, xs, rs, units[2], units[3], vx)
    return 0


@njit(cache=True, inline="always")
def clear_record(stat, s, E, item):
    """Zero the block (E numbers) of ``item`` that :func:`stage_record` wrote for stream s."""
    lo = 0 if stat == STAT_REWARD else s * E
    for e in range(lo, lo + E):
        item[e] = 0.0
