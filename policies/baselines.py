"""Non-private baselines (docs/algorithms.md#ucb1, docs/algorithms.md#kl-ucb,
docs/algorithms.md#beta-thompson-sampling): UCB1, KL-UCB, Beta-Bernoulli Thompson sampling.

Their ledgers record every reward as read without noise (``NonPrivateRelease``): the privacy of a
non-private policy is reported as unbounded, and the ledger still says which rewards it exposed.
"""
from __future__ import annotations


import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Certificate
from dpledger.accounting.releases import NonPrivateRelease
from dpledger.policies.base import (POSTERIOR_DRAW, POSTERIOR_DRAW_CODE, KernelPolicy, Param,
                                   RunOutput)
from dpledger.policies.beta_max import (MAX_REJECT, beta_arm_stats, beta_joint_block,
                                        beta_max_round, beta_round, block_end, joint_bound,
                                        joint_product)
from dpledger.policies.environments import draw_reward
from dpledger.policies.sink import put_action
from dpledger.policies.rules import (argmax_first, argmax_random_tie, argmax_step,
                                     bernoulli_kl, kl_ucb_newton, tie_break)


class NonPrivatePolicy(KernelPolicy):
    private = False
    provenance = "faithful"     # docs/algorithms.md#provenance

    def releases(self, T, K):
        return [NonPrivateRelease()]

    def certificate(self, T, K):
        return Certificate.unbounded_because(f"{self.name} reads rewards without noise")

    def theorem(self, T, K):
        return theorems.non_private(self.name)

    def finish(self, out: RunOutput, T: int, K: int) -> RunOutput:
        """Every observed reward is read, un-noised, by the index of every later round."""
        counts = out.pull_counts(K)
        arms = np.flatnonzero(counts)
        out.rows = np.vstack([arms, np.zeros_like(arms), counts[arms], np.zeros_like(arms),
                              np.ones_like(arms)]).astype(np.int64)
        return out


@njit(cache=True, inline="always")
def ucb1_select(t, sums, n, index):
    """Round t's candidate (t > K): (a, tie) — the first argmax of μ̂ + √(2 ln t / n) and whether
    another arm equals it; on a tie the caller draws the arm with
    :func:`~dpledger.policies.rules.tie_break` (argmax_random_tie's comparisons and draw).  No
    Generator here: numba reference-counts one passed into an inlined helper whose body loops or
    branches, two atomic operations a round, 62 ns a round against 24 ns for the loop without
    them (issue 31; docs/design.md#performance-targets)."""
    K = index.size
    lt = 2.0 * np.log(t)
    best = sums[0] / n[0] + np.sqrt(lt / n[0])
    index[0] = best
    a = 0
    tie = False
    for j in range(1, K):
        v = sums[j] / n[j] + np.sqrt(lt / n[j])
        index[j] = v
        best, a, tie = argmax_step(v, j, best, a, tie)
    return a, tie


@njit(cache=True, inline="always")
def mean_push(a, x, sums, n):
    """Arm a's reward x joins its empirical mean (UCB1, IMED)."""
    sums[a] += x
    n[a] += 1.0


@njit(cache=True, nogil=True)
def _ucb1(rng, env, T, K, stop, params, actions, rows, capture):
    """UCB1 (Auer et al. 2002): pull each arm once, then argmax μ̂ + √(2 ln t / n)."""
    sums = np.zeros(K)
    n = np.zeros(K)
    index = np.zeros(K)
    for t in range(1, stop + 1):
        if t <= K:
            a = t - 1
        else:
            a, tie = ucb1_select(t, sums, n, index)
            if tie:
                a = tie_break(index, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        mean_push(a, x, sums, n)
        put_action(actions, t, a)
    return stop, 0, 0


class UCB1(NonPrivatePolicy):
    name = "ucb1"
    title = "UCB1 (Auer, Cesa-Bianchi, Fischer 2002)"
    kernel = _ucb1
    action_sink = True


@njit(cache=True, nogil=True)
def _klucb(rng, env, T, K, stop, params, actions, rows, capture):
    """KL-UCB (Garivier & Cappé 2011; docs/algorithms.md#kl-ucb): pull each arm once, then argmax
    of
    max{q : n·d(μ̂, q) ≤ ln t} (no c·ln ln t term), ties uniformly at random.

    ``params[0]`` (hidden, not on the CLI) selects the *threshold test* (1, default): solve the
    index of the previous round's arm (the leader) only, and solve another arm's index only if it
    can reach the leader's, i.e. μ̂_k ≥ I_L or n_k·d(μ̂_k, I_L) ≤ ln t (with a 1e-9 relative slack
    so that exact ties are solved and broken exactly as by a full recomputation); arms that fail
    have index < I_L and cannot be in the argmax.  ``params[0] = 0`` solves every index every
    round (the reference).  Both give the same argmax set, hence the same draws and actions.
    Indices by :func:`kl_ucb_newton` (within 1e-10 of the exact value).

    ``params[1]`` (1 whenever the threshold test is on; a test-only subclass sets 0 to run
    the threshold test alone, the kernel before issue 17) adds the *leader bound*
    (issue 17 §6): every other arm j keeps a cached index U_j solved at a threshold ℓ_j/n_j with
    ℓ_j = 1.001·ln t at solve time, valid while ln t ≤ ℓ_j and arm j is not played (the index
    grows with the threshold, so U_j ≥ root_j(ln t/n_j) ≥ kl_ucb_newton(...) − 1e-10).  With
    M = max_j U_j + 1e-9 < 1, the leader wins outright — strictly above every other arm's
    solved index, so no tie and no draw — when μ̂_L ≥ M or n_L·d(μ̂_L, M) < ln t·(1 − 1e-9)
    (then its root, hence its solved index, exceeds M): one divergence per round instead of a
    Newton solve.  Otherwise the round runs the threshold test above unchanged, so the actions
    are those of the threshold test for the same seed (tests/test_azize2025_speed.py)."""
    fast = params[0] != 0.0
    bound = fast and params.size > 1 and params[1] != 0.0
    sums = np.zeros(K)
    n = np.zeros(K)
    p = np.zeros(K)
    index = np.zeros(K)
    ucache = np.zeros(K)
    until = np.full(K, -1.0)        # ln t up to which ucache[j] is valid (−1: invalid)
    leader = np.zeros(1, np.int64)
    for t in range(1, stop + 1):
        if t <= K:
            a = t - 1
        else:
            a, tie = klucb_select(t, fast, bound, p, n, index, ucache, until, leader)
            if tie:
                a = tie_break(index, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        klucb_push(a, x, sums, n, p, until, leader)
        put_action(actions, t, a)
    return stop, 0, 0


@njit(cache=True, _nrt=False, forceinline=True)
def klucb_select(t, fast, bound, p, n, index, ucache, until, leader):
    """Round t's candidate (t > K) by the rule of :func:`_klucb` (threshold test and leader
    bound when ``fast``/``bound``; every index otherwise — the same argmax set): (a, tie), the
    caller breaking a tie over ``index`` (no Generator here, see :func:`ucb1_select`).

    Compiled on its own with ``_nrt=False`` (numba's switch for reference counting), not
    inlined by numba (``inline="always"``): its loops call functions that may raise, so numba's
    pruning cannot pair the increments of its array arguments — two atomic operations per array
    per call, 84 ns a round against 35 ns written out in the kernel, 44 ns as a call (issue 31;
    docs/design.md#performance-targets).  It allocates nothing, so it needs no counting.
    ``forceinline=True`` then has LLVM inline the compiled body into each caller (the kernel,
    the step form's wrapper), after the counting is settled: no call, no counting, the kernel
    within 1–3 % of 45ae753's written-out loop in one process (was 8–30 %)."""
    K = index.size
    lt = np.log(t)
    ld = leader[0]
    if bound:
        m = -1.0
        for j in range(K):
            if j != ld:
                if lt > until[j]:
                    until[j] = 1.001 * lt
                    ucache[j] = kl_ucb_newton(p[j], until[j] / n[j])
                m = max(m, ucache[j])
        m += 1e-9
        pl = p[ld]
        if m < 1.0 and (pl >= m or n[ld] * bernoulli_kl(pl, m) < lt * (1.0 - 1e-9)):
            return ld, False
    if fast:
        il = kl_ucb_newton(p[ld], lt / n[ld])
        for j in range(K):
            if j == ld:
                index[j] = il
            elif p[j] >= il or (il < 1.0 and n[j] * bernoulli_kl(p[j], il)
                                <= lt * (1.0 + 1e-9)):
                index[j] = kl_ucb_newton(p[j], lt / n[j])
            else:
                index[j] = -1.0
    else:
        for j in range(K):
            index[j] = kl_ucb_newton(p[j], lt / n[j])
    return argmax_first(index)


@njit(cache=True, inline="always")
def klucb_push(a, x, sums, n, p, until, leader):
    """Arm a's reward x: its mean, its cached index invalidated, a the leader."""
    sums[a] += x
    n[a] += 1.0
    p[a] = sums[a] / n[a]
    until[a] = -1.0             # its cached index is stale
    leader[0] = a


class KLUCB(NonPrivatePolicy):
    """KL-UCB with exploration ln t (docs/algorithms.md#kl-ucb); rewards in [0, 1] (Bernoulli KL
    as the divergence)."""

    name = "klucb"
    title = "KL-UCB (Garivier & Cappé 2011), exploration ln t"
    provenance = "faithful"
    params_spec = (Param("threshold_test", True, "bool",
                         "hidden speed switch: solve only indices that can beat the leader's "
                         "(same actions as solving all)", hidden=True),)
    kernel = _klucb
    action_sink = True


    def kernel_params(self, T, K):
        on = 1.0 if self.params["threshold_test"] else 0.0
        return np.array([on, on])      # the leader bound rides on the threshold test


@njit(cache=True, nogil=True)
def _beta_ts(rng, env, T, K, stop, params, actions, rows, capture):
    """Beta-Bernoulli Thompson sampling (Agrawal & Goyal 2012): θ_j ~ Beta(S_j + 1, F_j + 1) in arm
    order, argmax (ties at random), then the reward.  A reward x strictly inside (0, 1) is turned
    into a success with probability x (the Bernoulli trick of Agrawal & Goyal, one ``random``
    draw after the reward; none for rewards that are exactly 0 or 1).

    The round is :func:`beta_ts_select`'s, written out here with the same per-arm draw
    (:func:`beta_ts_draw`) and the same sweep: the Generator must not enter an inlined helper
    that loops (see :func:`ucb1_select`)."""
    s = np.zeros(K)
    f = np.zeros(K)
    theta = np.zeros(K)
    use_max = params.size > 0 and params[0] != 0.0
    joint = params.size > 0 and params[0] == 2.0
    al = np.ones(K)                         # the posteriors' parameters, their means and
    be = np.ones(K)                         # bound weights (posterior_draw="max")
    mu = np.full(K, 0.5)
    w = np.full(K, 6.0)
    t_end = 0                               # max-joint: the block's last round, τ, its leader,
    tau = P = 0.0                           # the bounds at τ and their product
    tau_lead = -1                           # (beta_joint_block)
    B = np.zeros(K)
    for t in range(1, stop + 1):
        if use_max:
            if not joint:                   # beta_max_select's round
                a = beta_max_round(rng, al, be, mu, w, theta, MAX_REJECT)
            else:                           # beta_joint_select's round
                if t > t_end:
                    t_end = block_end(t)
                    tau, P, tau_lead = beta_joint_block(mu, w, B)
                a = beta_round(rng, al, be, mu, w, theta, tau, tau_lead, B, P)
        else:
            for j in range(K):
                theta[j] = beta_ts_draw(rng, j, s, f)
            a, tie = argmax_first(theta)
            if tie:
                a = tie_break(theta, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        if x != 1.0 and x != 0.0:           # bernoulli_trick's draw, out of its helper
            x = 1.0 if rng.random() < x else 0.0
        beta_ts_push(a, x, s, f)
        al[a] = s[a] + 1.0
        be[a] = f[a] + 1.0
        beta_arm_stats(a, al, be, mu, w)
        if joint and a != tau_lead:         # its bound at τ moved with its mean
            B[a] = joint_bound(mu[a], w[a], tau)
            P = joint_product(B, tau_lead)
        put_action(actions, t, a)
    return stop, 0, 0


@njit(cache=True, inline="always")
def beta_ts_draw(rng, j, s, f):
    """Arm j's posterior sample θ_j ~ Beta(S_j + 1, F_j + 1) (straight-line: inlined with the
    Generator at no cost)."""
    return rng.beta(s[j] + 1.0, f[j] + 1.0)


@njit(cache=True)
def beta_ts_select(rng, s, f, theta):
    """θ_j ~ Beta(S_j + 1, F_j + 1) in arm order, argmax (ties at random): the step form's
    round (:mod:`dpledger.policies.step_rules`), the kernel's loop body."""
    for j in range(theta.size):
        theta[j] = beta_ts_draw(rng, j, s, f)
    return argmax_random_tie(theta, rng)


@njit(cache=True, inline="always")
def bernoulli_trick(rng, x):
    """The observation a reward x in [0, 1] becomes: x itself when 0 or 1, else a success with
    probability x (one ``random`` draw)."""
    y = x
    if x != 1.0 and x != 0.0:
        y = 1.0 if rng.random() < x else 0.0
    return y


@njit(cache=True, inline="always")
def beta_ts_push(a, y, s, f):
    """Arm a's observation y ∈ {0, 1} (after :func:`bernoulli_trick`): a success or a failure."""
    if y == 1.0:
        s[a] += 1.0
    else:
        f[a] += 1.0


class BetaTS(NonPrivatePolicy):
    """Beta-Bernoulli TS; non-binary rewards in [0, 1] through the Bernoulli trick (observe
    Bernoulli(x) instead of x), which keeps the Beta posterior conjugate."""

    name = "ts-beta"
    title = "Beta-Bernoulli Thompson sampling (Agrawal & Goyal 2012)"
    provenance = "faithful"
    params_spec = (POSTERIOR_DRAW,)
    kernel = _beta_ts
    action_sink = True

    def kernel_params(self, T, K):
        return np.array([POSTERIOR_DRAW_CODE[self.params["posterior_draw"]]])
