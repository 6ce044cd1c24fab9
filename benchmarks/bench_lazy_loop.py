"""Lazy-DP-TS's round loop (posterior_draw="all") against the loop of 45ae753, in one process
(issue 31 §1; docs/design.md#performance-targets).

    python benchmarks/bench_lazy_loop.py [T] [REPEATS]

``current`` is the policy's kernel; ``oldhelp`` is 45ae753's loop structure (the initial pulls
peeled, one unconditional round body) calling the current ``lazy_draw`` helper; ``old`` is
45ae753's loop with the Beta shape written out.  Prints best and median ns a round (CPU,
alternating).  A diagnostic, not a test: the three draw the same law with the same helpers'
arithmetic, so what differs is only the loop's shape.
"""
import sys
import time

import numpy as np
from numba import njit
from dpledger.policies.environments import bernoulli, draw_reward
from dpledger.policies.sink import make_sink, put_action
from dpledger.policies.hu_hegde import (_lazy_dp_ts, lazy_draw, LazyDPTS)
from dpledger.mechanisms.noise import laplace_noise
from dpledger.policies.rules import argmax_first, tie_break, clip01

@njit(nogil=True)
def v_old(rng, env, T, K, stop, params, actions, rows, capture):
    eps = params[0]
    scale = params[1]
    mu_tilde = np.zeros(K)
    O = np.zeros(K)
    r = np.zeros(K, np.int64)
    buf_sum = np.zeros(K)
    buf_len = np.zeros(K, np.int64)
    n_obs = np.zeros(K, np.int64)
    theta = np.zeros(K)
    n_rows = 0
    for a in range(K):
        x = draw_reward(rng, env, a, a)
        noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, 0, 1, 0)
        n_rows += 1
        mu_tilde[a] = x + noise
        n_obs[a] = 1
        put_action(actions, a + 1, a)
    O[:] = 1.0
    for t in range(K + 1, stop + 1):
        shift = 3.0 * np.log2(t) / eps
        for j in range(K):
            m = clip01(mu_tilde[j] + shift / O[j])
            theta[j] = rng.beta(m * O[j] + 1.0, (1.0 - m) * O[j] + 1.0)
        a, tie = argmax_first(theta)
        if tie:
            a = tie_break(theta, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        buf_sum[a] += x
        buf_len[a] += 1
        n_obs[a] += 1
        size = 2 ** (r[a] + 1)
        if buf_len[a] == size:
            start = n_obs[a] - size
            noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, start, n_obs[a], 0)
            n_rows += 1
            mu_tilde[a] = (buf_sum[a] + noise) / size
            O[a] = size
            r[a] += 1
            buf_sum[a] = 0.0
            buf_len[a] = 0
        put_action(actions, t, a)
    return stop, n_rows, n_rows


@njit(nogil=True)
def v_oldhelp(rng, env, T, K, stop, params, actions, rows, capture):
    eps = params[0]
    scale = params[1]
    mu_tilde = np.zeros(K)
    O = np.zeros(K)
    r = np.zeros(K, np.int64)
    buf_sum = np.zeros(K)
    buf_len = np.zeros(K, np.int64)
    n_obs = np.zeros(K, np.int64)
    theta = np.zeros(K)
    n_rows = 0
    for a in range(K):
        x = draw_reward(rng, env, a, a)
        noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, 0, 1, 0)
        n_rows += 1
        mu_tilde[a] = x + noise
        n_obs[a] = 1
        put_action(actions, a + 1, a)
    O[:] = 1.0
    for t in range(K + 1, stop + 1):
        shift = 3.0 * np.log2(t) / eps
        for j in range(K):
            theta[j] = lazy_draw(rng, shift, mu_tilde[j], O[j])
        a, tie = argmax_first(theta)
        if tie:
            a = tie_break(theta, a, rng)
        x = draw_reward(rng, env, a, t - 1)
        buf_sum[a] += x
        buf_len[a] += 1
        n_obs[a] += 1
        size = 2 ** (r[a] + 1)
        if buf_len[a] == size:
            start = n_obs[a] - size
            noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, start, n_obs[a], 0)
            n_rows += 1
            mu_tilde[a] = (buf_sum[a] + noise) / size
            O[a] = size
            r[a] += 1
            buf_sum[a] = 0.0
            buf_len[a] = 0
        put_action(actions, t, a)
    return stop, n_rows, n_rows

K = 5
env = bernoulli([0.75, 0.625, 0.5, 0.375, 0.25]).as_tuple()
pol = LazyDPTS()
kinds = {"current": _lazy_dp_ts, "oldhelp": v_oldhelp, "old": v_old}
T = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
def once(fn, T, seed):
    rng = np.random.default_rng(seed)
    rows = np.zeros((5, pol.row_capacity(T, K) + K), np.int64)
    p = pol.kernel_params(T, K)
    sink = make_sink(K)
    c = time.process_time()
    fn(rng, env, T, K, T, p, sink, rows, np.zeros((2, 0)))
    return time.process_time() - c, sink
for fn in kinds.values():
    once(fn, 1000, 0)
times = {k: [] for k in kinds}
for rep in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
    for k, fn in kinds.items():
        dt, sink = once(fn, T, rep)
        times[k].append(dt)
for k, v in times.items():
    print(f"{k:10s} best {min(v)/T*1e9:6.1f} ns  median {np.median(v)/T*1e9:6.1f} ns")
