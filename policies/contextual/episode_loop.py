"""The compiled loop of the adaptive-episode private linear policies (issue 32 §2):
``episode-linucb`` (record-private) and ``adac-oful`` (reward-private), one source for the
whole-run loop (:func:`run_episodes`) and the step form
(:mod:`~dpledger.policies.step_rules_episodes`).

**Episodes.**  A model reads only *released* statistics, and a statistic is released once per
episode, computed from that episode's records alone: each record enters exactly one release, so
a record's privacy is that of one Gaussian release whatever T (against ⌈log₂ T⌉ node releases
for a binary-mechanism tree).  The model is the sum of the released episodes.

* ``EP_JOINT`` (``episode-linucb``): the statistic is jdp-linucb's item, the upper triangle of
  [x; y][x; y]ᵀ ((d+1)×(d+1): Gram, Σ y·x, Σ y²), one block per model, every block noised at
  every release (which model a record joins depends on its private context).  Episodes follow
  a public schedule of delivered-record counts (doubling: episode j holds n₀·2^j records).  A
  release refreshes every model: V = noisy Gram + shift_n·I (n the episodes released,
  shift_n = λ + σ·√n·c: the policy's constant c), θ̂ = V⁻¹u, index θ̂ᵀx + α‖x‖_{V⁻¹} — one
  factorisation per model per episode (:func:`~dpledger.policies.contextual.private_loop.
  refresh_joint`, its positive-definiteness repair included).
* ``EP_REWARD`` (``adac-oful``): contexts are public, so each model keeps its exact Gram factor
  (rank-1 Cholesky updates of A = λ·I + Σ x xᵀ) and the current episode's clean Σ r·x; an
  episode of model m ends when det A_m has grown by the factor 1 + C since the episode began
  (ln det from the factor's diagonal: O(d) a record), which releases Σ r·x of the episode with
  Gaussian noise; the selection model (its factor and θ̂ = A⁻¹·Σ released) is frozen from one
  episode end to the next (rarely-switching OFUL, Abbasi-Yadkori, Pál & Szepesvári 2011 §5).

State (all arrays; the step form checkpoints them): ``acc`` the clean sums of the open
episodes, ``pre`` the released (noisy) sums, ``ist`` per statistic stream (episodes released,
first observation of the open episode, observations delivered, length of the open episode),
``ld`` per model (ln det at the episode's start, now), the models (``chol``, ``theta``,
``widths``; ``chol_cur`` the exact Gram factors under reward privacy), ``rows`` the ledger
rows written ((stream, start, stop) per release; ``nrow`` their count).
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.mechanisms.matrix import (add_outer_packed, add_outer_packed_lattice, block_draw,
                                        capture_node)
from dpledger.policies.contextual.environments import LINEAR
from dpledger.policies.contextual.loop import (queue_new, queue_pop, round_context,
                                               settle_round)
from dpledger.policies.contextual.private_loop import (C_SHIFT, C_XI, _solve_theta,
                                                      refresh_joint)
from dpledger.policies.contextual.ridge import (cholesky_rank1_update, linucb_scores_widths,
                                                pick)

EP_JOINT, EP_REWARD = 0, 1
# ep consts, by position: width α, ridge λ, shift coefficient σ·c (EP_JOINT), ln(1 + C)
# (EP_REWARD), the episode memory (EP_REWARD: 0 all, MEM_LAST memory=last, MEM_EPISODES
# estimate=episodes — both keep the open episode's own Gram factor), the noise variance per release over the reward variance σ²/R²
# (EP_REWARD, estimate=likelihood; 0: ridge), the width's noise coefficient γ_n/√n (EP_JOINT),
# then private_loop's refresh constants
# (EP_REWARD, noise_shape=data) the whitening floor κ·L² and the norm bound L,
E_ALPHA, E_LAMBDA, E_SHIFT_COEF, E_GROWTH, E_MEMORY, E_NOISE_VAR, E_WIDTH_COEF = range(7)
E_KAPPA, E_BOUND = 7, 8
E_REFRESH = 9
# ist columns
I_RELEASED, I_START, I_SEEN, I_LENGTH = 0, 1, 2, 3
# values of consts[E_MEMORY]
MEM_ALL, MEM_LAST, MEM_EPISODES = 0.0, 1.0, 2.0


@njit(cache=True)
def ep_init(kind, chol, chol_cur, chol_ep, theta, widths, ld, consts):
    """Models before any release: V = λ·I, θ̂ = 0, width α; the exact Gram factors (of all
    records, of the open episode's) √λ·I."""
    M, d = chol.shape[0], chol.shape[1]
    root = np.sqrt(consts[E_LAMBDA])
    for m in range(M):
        for i in range(d):
            for j in range(d):
                chol[m, i, j] = 0.0
            chol[m, i, i] = root
            theta[m, i] = 0.0
        widths[m] = consts[E_ALPHA]
        if kind == EP_REWARD:
            for i in range(d):
                for j in range(d):
                    chol_cur[m, i, j] = chol[m, i, j]
                    chol_ep[m, i, j] = chol[m, i, j]
            ld[m, 0] = d * np.log(consts[E_LAMBDA])
            ld[m, 1] = ld[m, 0]


@njit(cache=True, inline="always")
def ep_select(chol, theta, widths, ctx, shared, values, work):
    """The round's UCB indices from the released models (post-processing of releases and of
    the round's own context)."""
    linucb_scores_widths(chol, theta, ctx, shared, widths, values, work)


@njit(cache=True)
def ep_push(kind, s, x, r, acc, ist, ld, chol_cur, chol_ep, wmap, bound, units, growth, last,
            vx, work):
    """Record (x, r) of model s joins its open episode (clean).  Returns the statistic stream
    whose episode it closes (0 under record privacy; s under reward privacy, when ln det A_s
    has grown by ``growth`` = ln(1 + C) since its episode began), or −1.  ``last``: the
    open episode's own Gram factor is kept too (``memory=last``, ``estimate=episodes``).
    ``wmap`` (M, d, d), or (0, d, d) when off (``noise_shape=data``): the record enters as
    r·c·Wx, W = ``wmap[s]`` the episode's public whitening map and c = min(1, L/‖Wx‖) (L =
    ``bound``), so its L2 contribution stays ≤ L; the episode's Gram then holds c·x xᵀ (the
    mean of what was summed is W·Σ c x xᵀ θ)."""
    d = x.size
    if kind == EP_JOINT:
        p = d + 1
        E = p * (p + 1) // 2
        for i in range(d):
            vx[i] = x[i]
        vx[d] = r
        if units[2] > 0.0:
            add_outer_packed_lattice(vx, units[2], acc[0], s * E)
        else:
            add_outer_packed(vx, acc[0], s * E)
        ist[0, I_SEEN] += 1
        if ist[0, I_SEEN] - ist[0, I_START] >= ist[0, I_LENGTH]:
            return 0
        return -1
    inv = units[3]
    a = acc[s]
    if wmap.shape[0] > 0:
        Wm = wmap[s]
        nz = 0.0
        for i in range(d):
            v = 0.0
            for j in range(d):
                v += Wm[i, j] * x[j]
            vx[i] = v
            nz += v * v
        nz = np.sqrt(nz)
        c = 1.0 if nz <= bound else bound / nz
        rc = r * c
        for i in range(d):
            a[i] += np.floor(rc * vx[i] * inv + 0.5) if inv > 0.0 else rc * vx[i]
        rt = np.sqrt(c)
        for i in range(d):
            vx[i] = rt * x[i]
        cholesky_rank1_update(chol_ep[s], vx[:d], work)
    else:
        for i in range(d):
            a[i] += np.floor(r * x[i] * inv + 0.5) if inv > 0.0 else r * x[i]
        if last:
            cholesky_rank1_update(chol_ep[s], x, work)
    L = chol_cur[s]
    cholesky_rank1_update(L, x, work)
    lg = 0.0
    for i in range(d):
        lg += np.log(L[i, i])
    ld[s, 1] = 2.0 * lg
    ist[s, I_SEEN] += 1
    return s if ld[s, 1] >= ld[s, 0] + growth else -1


@njit(cache=True, inline="always")
def _symmetrize(M):
    """M ← (M + Mᵀ)/2: the products below are symmetric only up to rounding, and eigh and
    cholesky read one triangle."""
    d = M.shape[0]
    for i in range(d):
        for j in range(i):
            v = 0.5 * (M[i, j] + M[j, i])
            M[i, j] = v
            M[j, i] = v


@njit(cache=True, inline="always")
def _gram_of(Lf, lam, G):
    """G ← Lf·Lfᵀ − λI (symmetric): the Gram Σ x xᵀ whose ridge factor Lf (of λI + Σ x xᵀ)
    the model keeps."""
    G[:, :] = Lf @ Lf.T
    for i in range(G.shape[0]):
        G[i, i] -= lam
    _symmetrize(G)


@njit(cache=True, inline="always")
def _fold(chol, theta, dQ, dh):
    """One more independent observation of θ into a Gaussian model kept as (factor of its
    precision Q, mean θ̂): Q ← Q + dQ, Qθ̂ ← Qθ̂ + dh.  The running sums are read back from
    the model itself (Q = chol·cholᵀ, Qθ̂), so no state is added."""
    Q = chol @ chol.T
    h = Q @ theta + dh
    Q += dQ
    _symmetrize(Q)
    chol[:, :] = np.linalg.cholesky(Q)
    th = np.linalg.solve(Q, h)
    for i in range(theta.size):
        theta[i] = th[i]


@njit(cache=True)
def _likelihood_model(Lc, b, lam, s, chol, theta, W):
    """The model of the released statistic's own likelihood (``estimate=likelihood``,
    docs/algorithms.md#adac-oful).  With contexts public, G = Σ x xᵀ is exact and the released
    total is b = Gθ + ξ + Z, ξ ~ N(0, R²G) (R-sub-Gaussian rewards, taken Gaussian), Z ~ N(0,
    nσ²I) (n releases of σ): b ~ N(Gθ, R²(G + sI)), s = nσ²/R².  Under the prior θ ~ N(0,
    (R²/λ)I) (ridge λ's) the posterior has precision Q/R², Q = G(G + sI)⁻¹G + λI, and mean
    Q⁻¹G(G + sI)⁻¹b (the generalised least squares of Bernstein & Sheldon 2019's sufficient-
    statistic perturbation); s = 0 gives ridge's A = G + λI and A⁻¹b.  G, (G + sI)⁻¹ and Q share
    G's eigenvectors: one eigendecomposition per release.  ``chol`` ← Q's factor (the width
    α‖x‖_{Q⁻¹} is read from it), ``theta`` ← the mean; ``Lc`` is the factor of G + λI."""
    d = b.size
    _gram_of(Lc, lam, W)
    w, U = np.linalg.eigh(W)
    q = np.empty(d)
    c = np.empty(d)
    for i in range(d):
        g = max(w[i], 0.0)           # G is PSD: a negative eigenvalue is rounding
        q[i] = g * g / (g + s) + lam
        c[i] = g / (g + s) / q[i]
    ub = U.T @ b
    for i in range(d):
        ub[i] *= c[i]
    th = U @ ub
    for i in range(d):
        theta[i] = th[i]
    Q = (U * q) @ U.T
    _symmetrize(Q)
    chol[:, :] = np.linalg.cholesky(Q)


@njit(cache=True)
def _episode_likelihood_model(Le, b, lam, s, chol, theta, W):
    """Fold one released episode into its model (``estimate=episodes``,
    docs/algorithms.md#adac-oful).  The episodes' records are disjoint, so their released sums
    b_e = G_eθ + ξ_e + Z_e are independent given θ, each with its own law N(G_eθ, R²(G_e + sI)),
    s = σ²/R² (one release's noise): the posterior precision (over R²) is Q = λI + Σ_e
    G_e(G_e + sI)⁻¹G_e and its mean Q⁻¹·Σ_e G_e(G_e + sI)⁻¹b_e.  Against the total's law
    (:func:`_likelihood_model`, noise ns beside G) a short early episode, whose G_e is small
    against s, no longer adds its full noise to every later estimate.  The running sums are
    read back from the model itself — Q = chol·cholᵀ, Q⁻¹-weighted total = Q·θ̂ — so the state
    is unchanged; ``Le`` is the factor of G_e + λI (the closed episode's own Gram)."""
    d = b.size
    _gram_of(Le, lam, W)
    w, U = np.linalg.eigh(W)
    q = np.empty(d)
    c = np.empty(d)
    for i in range(d):
        g = max(w[i], 0.0)           # G_e is PSD: a negative eigenvalue is rounding
        f = g / (g + s) if g > 0.0 else 0.0      # a direction no record reached: no weight
        q[i] = g * f
        c[i] = f
    ub = U.T @ b
    for i in range(d):
        ub[i] *= c[i]
    _fold(chol, theta, (U * q) @ U.T, U @ ub)


@njit(cache=True)
def _whitened_episode_model(Le, Wm, y, lam, s, chol, theta, W):
    """``noise_shape=data``: fold one released episode whose sum was whitened.  The release is
    y = W·Σ c r x + Z, Z ~ N(0, σ²I), so b̃ = W⁻¹y has mean G̃θ (G̃ = Σ c x xᵀ, ``Le`` the
    factor of G̃ + λI) and covariance R²(G̃ + sW⁻²) (the clipped rewards' c² ≤ c taken as c: the
    reward noise is overstated, never understated), s = σ²/R².  Precision and mean grow by
    G̃P⁻¹G̃ and G̃P⁻¹b̃, P = G̃ + sW⁻² (the same posterior as :func:`_episode_likelihood_model`
    with the released noise's own covariance)."""
    G = W
    _gram_of(Le, lam, G)
    Wi = np.linalg.inv(Wm)
    bt = Wi @ y
    P = G + s * (Wi @ Wi.T)
    _symmetrize(P)
    X = np.linalg.solve(P, G)          # P⁻¹G̃
    _fold(chol, theta, G @ X, X.T @ bt)


@njit(cache=True)
def whitening_map(Lc, n, lam, kappa, bound, Wm):
    """The next episode's whitening map from the model's public Gram (``Lc`` the factor of
    λI + Σ x xᵀ over its n records): Ḡ = Σ x xᵀ/n = UΛUᵀ, W = ν·U(Λ + κL²)^(-1/2)Uᵀ with ν =
    L/√d_eff, d_eff = Σ λ_j/(λ_j + κL²), so that E‖Wx‖² = L² over the records so far — the
    released noise is shaped like the contexts (small where they carry little mass: a record's
    reach there is small too) and the typical record is not clipped
    (docs/algorithms.md#adac-oful).  Before any record W = I."""
    d = Wm.shape[0]
    if n <= 0:
        for i in range(d):
            for j in range(d):
                Wm[i, j] = 0.0
            Wm[i, i] = 1.0
        return
    G = np.empty((d, d))
    _gram_of(Lc, lam, G)
    G /= n
    w, U = np.linalg.eigh(G)
    ka = kappa * bound * bound
    deff = 0.0
    f = np.empty(d)
    for i in range(d):
        g = max(w[i], 0.0)
        deff += g / (g + ka)
        f[i] = 1.0 / np.sqrt(g + ka)
    nu = bound / np.sqrt(max(deff, 1e-12))
    M = (U * (nu * f)) @ U.T
    _symmetrize(M)
    Wm[:, :] = M


@njit(cache=True)
def ep_release(kind, g, rng, spec, acc, pre, ist, ld, chol, chol_cur, chol_ep, wmap, theta,
               widths, jstate, consts, units, A, scratch, capture, rows, nrow, b, W, work):
    """Close stream g's episode: its ledger row (stream, start, stop) is written, then its
    noise is drawn (every block under record privacy), the noisy episode sum is added to the
    released total, and the models reading it are refreshed.  ``capture`` ((n, D + 1) or
    (n, 2D + 1), tests and audits): the noise of the n-th release (and its clean sum), the
    stream in column D.  Returns the PSD repairs made."""
    D = acc.shape[1]
    k = nrow[0]
    if k < rows.shape[1]:
        rows[0, k] = g
        rows[1, k] = ist[g, I_START]
        rows[2, k] = ist[g, I_SEEN]
    nrow[0] = k + 1
    if kind == EP_JOINT:
        M = chol.shape[0]
        E = D // M
        for m in range(M):
            block_draw(rng, spec, scratch, m * E, A)
    else:
        block_draw(rng, spec, scratch, 0, A)
    capture_node(capture, k, scratch, acc[g], g)
    last = consts[E_MEMORY] == MEM_LAST
    perep = consts[E_MEMORY] == MEM_EPISODES
    for e in range(D):
        if (last or perep) and kind == EP_REWARD:
            b[e] = (acc[g, e] + scratch[e]) * units[1]     # this episode's noisy sum only
        pre[g, e] += acc[g, e] + scratch[e]
        acc[g, e] = 0.0
    ist[g, I_RELEASED] += 1
    ist[g, I_START] = ist[g, I_SEEN]
    rep = 0
    d = chol.shape[1]
    if kind == EP_JOINT:
        ist[0, I_LENGTH] *= 2
        rc = consts[E_REFRESH:]
        rn = np.sqrt(ist[0, I_RELEASED])
        rc[C_SHIFT] = consts[E_LAMBDA] + consts[E_SHIFT_COEF] * rn
        if consts[E_WIDTH_COEF] > 0.0:
            # Shariff & Sheffet's noise term of the radius, ‖h‖_{V⁻¹} ≤ γ_n/√shift_n
            rc[C_XI] = consts[E_ALPHA] + consts[E_WIDTH_COEF] * rn / np.sqrt(rc[C_SHIFT])
        M = chol.shape[0]
        E = D // M
        for m in range(M):
            rep += refresh_joint(pre[0], m, E, d, units[0], rc, chol, theta, widths, jstate,
                                 b, W, work)
    elif last:
        # memory=last: the model is the closed episode's alone — its Gram factor and its one
        # noisy Σ r·x (b, above); the next episode's factor restarts at √λ·I
        root = np.sqrt(consts[E_LAMBDA])
        for i in range(d):
            for j in range(d):
                chol[g, i, j] = chol_ep[g, i, j]
                chol_ep[g, i, j] = 0.0
            chol_ep[g, i, i] = root
        _solve_theta(chol[g], b, theta[g], work)
        ld[g, 0] = ld[g, 1]
    elif perep:
        if wmap.shape[0] > 0:
            _whitened_episode_model(chol_ep[g], wmap[g], b, consts[E_LAMBDA],
                                    consts[E_NOISE_VAR], chol[g], theta[g], W)
            whitening_map(chol_cur[g], ist[g, I_SEEN], consts[E_LAMBDA], consts[E_KAPPA],
                          consts[E_BOUND], wmap[g])
        else:
            _episode_likelihood_model(chol_ep[g], b, consts[E_LAMBDA], consts[E_NOISE_VAR],
                                      chol[g], theta[g], W)
        root = np.sqrt(consts[E_LAMBDA])
        for i in range(d):
            for j in range(d):
                chol_ep[g, i, j] = 0.0
            chol_ep[g, i, i] = root
        ld[g, 0] = ld[g, 1]
    elif consts[E_NOISE_VAR] > 0.0:
        for i in range(d):
            b[i] = pre[g, i] * units[1]
        _likelihood_model(chol_cur[g], b, consts[E_LAMBDA],
                          consts[E_NOISE_VAR] * ist[g, I_RELEASED], chol[g], theta[g], W)
        ld[g, 0] = ld[g, 1]
    else:
        extra = consts[E_SHIFT_COEF] * np.sqrt(ist[g, I_RELEASED])
        if extra > 0.0:
            # the estimate's ridge grows with the released noise (n draws of σ per entry):
            # A + κσ√n·I, one factorisation per episode
            Lc = chol_cur[g]
            W[:, :] = Lc @ Lc.T
            for i in range(d):
                W[i, i] += extra
            chol[g, :, :] = np.linalg.cholesky(W)
        else:
            for i in range(d):
                for j in range(i + 1):
                    chol[g, i, j] = chol_cur[g, i, j]
        for i in range(d):
            b[i] = pre[g, i] * units[1]
        _solve_theta(chol[g], b, theta[g], work)
        ld[g, 0] = ld[g, 1]
    return rep


@njit(cache=True, nogil=True)
def run_episodes(rng, env, T, shared, delay, kind, spec, acc, pre, ist, ld, chol, chol_cur,
                 chol_ep, wmap, theta, widths, consts, units, capture, rows, nrow, actions,
                 regret, obs_stream, obs_round, info):
    """One run (module docstring) over T rounds (replay: log rows) with delay ``delay``: the
    environment, delay queue and outcomes are the non-private loop's; ``info`` ← (PSD repairs,
    releases).  Returns (policy rounds, observations, Σ reward, Σ uniform)."""
    K = env.n_arms
    M = chol.shape[0]
    d = chol.shape[1]
    p = int(spec[5])
    A = np.zeros((max(p, 1), max(p, 1)))
    values = np.zeros(K)
    work = np.zeros(d)
    W = np.zeros((d, d))
    b = np.zeros(d)
    vx = np.zeros(d + 1)
    scratch = np.zeros(acc.shape[1])
    jstate = np.zeros((M, 2), np.int64)
    sc = np.zeros((K if env.kind == LINEAR else 1, d))
    store = delay < T
    q = queue_new(delay if store else 0, T, d)
    ep_init(kind, chol, chol_cur, chol_ep, theta, widths, ld, consts)
    last = consts[E_MEMORY] > 0.0
    k = 0
    n_obs = 0
    sums = np.zeros(2)
    for t in range(1, T + 1):
        ctx, row = round_context(env, rng, t, sc)
        ep_select(chol, theta, widths, ctx, shared, values, work)
        k, due = settle_round(env, rng, ctx, row, pick(values, rng), t, shared, delay, store, q,
                              k, actions, regret, sums)
        if due:
            s, rnd, rs, xs = queue_pop(q)
            g = ep_push(kind, s, xs, rs, acc, ist, ld, chol_cur, chol_ep, wmap,
                        consts[E_BOUND], units, consts[E_GROWTH], last, vx, work)
            obs_stream[n_obs] = 0 if kind == EP_JOINT else s
            obs_round[n_obs] = rnd
            n_obs += 1
            if g >= 0:
                info[0] += ep_release(kind, g, rng, spec, acc, pre, ist, ld, chol, chol_cur,
                                      chol_ep, wmap, theta, widths, jstate, consts, units, A,
                                      scratch, capture, rows, nrow, b, W, work)
                info[1] += 1
    return k, n_obs, sums[0], sums[1]
