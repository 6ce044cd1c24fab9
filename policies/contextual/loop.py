"""The compiled whole-run loop of the contextual policies: environment, delays, observations.

One round (online environments), or one log row (replay), in this order:

1. the round's contexts (:func:`round_context`: drawn, read from the table, or a resampled row);
2. the policy's arm (its select rule over its current model; ties uniformly at random);
3. the outcome (:func:`round_outcome`): the reward, the regret term, and for replay whether the
   row is accepted — only accepted rows are rounds of the policy;
4. the record (stream, context, rescaled reward, round) joins the delay queue, and the record of
   policy round k − D is delivered to the model (D = ``delay``): *the reward of round k reaches
   the policy after round k + D*, so the model that chooses round k holds exactly the records of
   rounds ≤ k − D − 1.  D = 0 is no delay; D ≥ the rounds played delivers nothing (the policy
   learns nothing: every round is chosen from the prior model).  In replay, rounds are accepted
   rows (policy time), so the replayed history is that of an online run with delay D (our
   choice: Li et al. 2011 has no delays; a delay counted in log rows would make the online
   delay random).

Delivered records are the ledger's *observations*: observation n of stream s is the n-th record
of s in the order it reached the policy (``obs_stream``, ``obs_round``: the round — for replay
the 1-based log row — whose record it is).  The queue holds at most min(D, rounds) + 1 records
of d + 3 numbers each.

A step form (issue 24), or another policy's loop, calls the same functions: ``round_context``
and ``round_outcome`` for the environment, ``queue_new``/``queue_push``/``queue_pop`` for the
delay, the policy's select and observe functions (:mod:`~dpledger.policies.contextual.ridge`).
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.interrupt import Stopped
from dpledger.policies.contextual.environments import CLICKS, LINEAR, REPLAY, SUPERVISED
from dpledger.policies.contextual.ridge import (dot, linucb_scores, lints_scores, pick,
                                                ridge_observe)

LINUCB, LINTS = 0, 1        # the select rules of :func:`run_ridge`


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True, inline="always")
def splitmix64(x):
    """splitmix64's output function on a uint64 (Steele, Lea & Flood 2014; the twin of
    :func:`~dpledger.policies.contextual.environments.splitmix64_py`)."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def log_draw(key, row, j):
    """h_j of row ``row`` (0-based) of a generated log: splitmix64(key + 3·row + j)."""
    return splitmix64(np.uint64(key) + np.uint64(3) * np.uint64(row) + np.uint64(j))


@njit(cache=True)
def generated_row(key, n_users, n_arms, row):
    """(user, logged arm, the click's uniform in [0, 1)) of row ``row`` of a generated log
    (:func:`~dpledger.policies.contextual.environments.generated_log`)."""
    u = np.int64(log_draw(key, row, 0) % np.uint64(n_users))
    a = np.int64(log_draw(key, row, 1) % np.uint64(n_arms))
    c = np.float64(log_draw(key, row, 2) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    return u, a, c


@njit(cache=True)
def round_context(env, rng, t, scratch):
    """(contexts, row) of round t (1-based): a (Kc, d) array — Kc = K for one context per arm,
    1 for one per round — and the data row it came from (−1 for drawn contexts).

    linear: per arm d standard normals in coordinate order, x = L·|g|/‖g‖ shrunk by the
    factor 1 − (d+8)·2⁻⁵³ that keeps ‖x‖ ≤ L exact under rounding (into ``scratch``);
    supervised, click-model: a row drawn uniformly (one ``integers`` draw); table and replay:
    row t − 1 (a
    generated log: row t − 1's user, from the log's key)."""
    if env.kind == LINEAR:
        if env.contexts.shape[0] > 0:          # a fixed arm set (environments.linear_fixed)
            return env.contexts[0], -1
        K, d = scratch.shape
        for a in range(K):
            s = 0.0
            for j in range(d):
                g = abs(rng.standard_normal())
                scratch[a, j] = g
                s += g * g
            # x = L·|g|/‖g‖ in floats can land a few ulps above L; the sensitivities assume
            # ‖x‖ ≤ L exactly.  The sum, root, quotient and products err by at most
            # (1+u)³/((1−u)·√(1−γ_d)) ≈ 1 + (4 + d/2)·u (u = 2⁻⁵³, γ_d = du/(1−du)), so the
            # factor 1 − (d+8)·u (exact in floats) keeps every drawn context inside the ball.
            f = env.norm_bound / np.sqrt(s) * (1.0 - (d + 8) * 2.0 ** -53)
            for j in range(d):
                scratch[a, j] *= f
        return scratch, -1
    if env.kind == SUPERVISED or env.kind == CLICKS:
        row = rng.integers(0, env.contexts.shape[0])
    else:
        row = t - 1
        if env.log_key != 0:        # a generated log: row t − 1's user (no rng draw)
            u = generated_row(env.log_key, env.contexts.shape[0], env.n_arms, row)[0]
            return env.contexts[u], row
    return env.contexts[row], row


@njit(cache=True)
def round_outcome(env, rng, ctx, row, a):
    """(accepted, reward, regret term, uniform play's mean reward) of arm ``a`` this round, on
    the raw reward scale.

    linear: reward Bernoulli(⟨θ, x_a⟩) (one ``random`` draw) — or, with Gaussian noise,
    ⟨θ, x_a⟩ + σ·N(0, 1) clipped to [lo, hi] (one ``standard_normal`` draw) — regret
    max_b ⟨θ, x_b⟩ − ⟨θ, x_a⟩;
    table, supervised: reward rewards[row, a], regret max_b rewards[row, b] − rewards[row, a];
    click-model: reward Bernoulli(rewards[row, a]) (one ``random`` draw), the same regret;
    replay: accepted iff ``a`` is the logged action (rejection mode: and a ``random`` draw below
    q/p), reward the logged one, no regret (replay has no counterfactual rewards); a generated
    log computes row ``row``'s logged arm and click from its key."""
    if env.kind == REPLAY and env.log_key != 0:     # a generated log (no rng draw)
        u, logged, c = generated_row(env.log_key, env.contexts.shape[0], env.n_arms, row)
        if a != logged:
            return False, 0.0, 0.0, 0.0
        return True, 1.0 if c < env.rewards[u, a] else 0.0, 0.0, 0.0
    if env.kind == REPLAY:
        if a != env.logged[row]:
            return False, 0.0, 0.0, 0.0
        if env.accept_q > 0.0 and not rng.random() < env.accept_q / env.propensity[row]:
            return False, 0.0, 0.0, 0.0
        return True, env.rewards[row, 0], 0.0, 0.0
    K = env.n_arms
    if env.kind == LINEAR:
        best = -np.inf
        total = 0.0
        mine = 0.0
        for b in range(K):
            m = dot(env.theta, ctx[b])
            total += m
            if m > best:
                best = m
            if b == a:
                mine = m
        if env.noise_sd > 0.0:
            r = min(max(mine + env.noise_sd * rng.standard_normal(), env.lo), env.hi)
        else:
            r = 1.0 if rng.random() < mine else 0.0
        return True, r, best - mine, total / K
    rw = env.rewards[row]
    best = rw[0]
    total = 0.0
    for b in range(K):
        total += rw[b]
        if rw[b] > best:
            best = rw[b]
    if env.kind == CLICKS:          # a click of probability rw[a]; pseudo-regret
        return True, 1.0 if rng.random() < rw[a] else 0.0, best - rw[a], total / K
    return True, rw[a], best - rw[a], total / K


@njit(cache=True, inline="always")
def check_stop(stop):
    """Raise :class:`~dpledger.interrupt.Stopped` once the stop slot is set (Ctrl-C, see
    :mod:`dpledger.interrupt`).  Read every round: one load and a branch that is never taken
    against at least K·d² operations of a contextual round, and a round of a private policy at
    d = 64 takes milliseconds, so a coarser check would make Ctrl-C wait."""
    if stop[0] != 0:
        raise Stopped()


@njit(cache=True)
def queue_new(delay, T, d):
    """The delay queue of a run of T rounds with delay ``delay`` and contexts of dimension d: at
    most min(D, T) + 1 pending records (stream, round, rescaled reward, context), as arrays
    (streams, rounds, rewards, contexts, [head, pending])."""
    cap = min(delay, T) + 1
    return (np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap), np.zeros((cap, d)),
            np.zeros(2, np.int64))


@njit(cache=True, inline="always")
def queue_push(q, stream, rnd, r, x):
    """Append a record (its context ``x`` copied) behind the pending ones."""
    streams, rounds, rewards, xs, st = q
    slot = (st[0] + st[1]) % streams.size
    streams[slot] = stream
    rounds[slot] = rnd
    rewards[slot] = r
    for j in range(x.size):
        xs[slot, j] = x[j]
    st[1] += 1


@njit(cache=True, inline="always")
def queue_pop(q):
    """The oldest pending record (stream, round, reward, context — the context a view valid
    until the next push), removed from the queue."""
    streams, rounds, rewards, xs, st = q
    h = st[0]
    st[0] = (h + 1) % streams.size
    st[1] -= 1
    return streams[h], rounds[h], rewards[h], xs[h]


@njit(cache=True, inline="always")
def settle_round(env, rng, ctx, row, a, t, shared, delay, store, q, k, actions, regret, sums):
    """Arm ``a`` played at round (log row) t: its outcome (:func:`round_outcome`), the arm and
    regret term written, and for an accepted round the sums (``sums`` = [Σ reward, Σ uniform
    play's mean]) and the record pushed on the delay queue.  Returns (policy rounds so far,
    whether the record of policy round k − D is due for delivery now)."""
    actions[t - 1] = a
    accepted, r, reg, unif = round_outcome(env, rng, ctx, row, a)
    regret[t - 1] = reg
    if not accepted:
        return k, False
    k += 1
    sums[0] += r
    sums[1] += unif
    if not store:
        return k, False
    queue_push(q, 0 if shared else a, t, (r - env.lo) / (env.hi - env.lo),
               ctx[a] if shared else ctx[0])
    return k, k - delay >= 1        # the record of policy round k − D reaches the policy


@njit(cache=True, nogil=True)
def run_ridge(rng, env, T, shared, delay, rule, width, chol, bvec, theta, actions, regret,
              obs_stream, obs_round, stop):
    """One run of LinUCB (``rule`` LINUCB, ``width`` = α) or linear TS (LINTS, ``width`` = v)
    over T rounds (replay: T log rows) with delay ``delay``, on the models (chol, bvec, theta)
    of :func:`~dpledger.policies.contextual.ridge.new_models`.

    Writes the arm of every round (row) into ``actions``, the regret term of every round into
    ``regret`` (0 for replay), the delivered observations into ``obs_stream``/``obs_round``;
    returns (policy rounds, observations delivered, Σ reward, Σ uniform play's mean reward),
    the sums on the raw scale over the policy rounds.  ``stop``: the stop slot
    (:func:`dpledger.interrupt.stop_slot`), read every round (:func:`check_stop`)."""
    K = env.n_arms
    d = chol.shape[1]
    values = np.zeros(K)
    work = np.zeros(d)
    work2 = np.zeros(d)
    scratch = np.zeros((K if env.kind == LINEAR else 1, d))
    store = delay < T           # D >= T: nothing would ever be delivered
    q = queue_new(delay if store else 0, T, d)
    k = 0                       # policy rounds so far
    n_obs = 0
    sums = np.zeros(2)          # Σ reward, Σ uniform play's mean reward
    for t in range(1, T + 1):
        check_stop(stop)
        ctx, row = round_context(env, rng, t, scratch)
        if rule == LINUCB:
            linucb_scores(chol, theta, ctx, shared, width, values, work)
        else:
            lints_scores(chol, theta, ctx, shared, width, values, work, work2, rng)
        k, due = settle_round(env, rng, ctx, row, pick(values, rng), t, shared, delay, store, q,
                              k, actions, regret, sums)
        if due:
            s, rnd, rs, xs = queue_pop(q)
            ridge_observe(chol, bvec, theta, s, xs, rs, work, work2)
            obs_stream[n_obs] = s
            obs_round[n_obs] = rnd
            n_obs += 1
    return k, n_obs, sums[0], sums[1]
