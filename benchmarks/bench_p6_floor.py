"""Why P6's 10 s is out of reach for white-box DP-UCB and TS-Gaussian at T = 1000 (issue 14 §6):
the cost of one simulated round, measured from below.

    python benchmarks/bench_p6_floor.py            # ≈ 1 min; CPU time of one core

Their likelihood-ratio scores read every round to T (docs/audits.md, "Speed (P6)"), so an audit
of 1e6 trials per side plays 2·10⁹ rounds; 10 s of wall time on two cores (the trial loop's
threads scale ≈ 1.9×) allows **9.5 ns a round**.  This script measures, CPU time of one core:

1. the draws a round cannot skip, each in an otherwise empty compiled loop: DP-UCB's Laplace
   draw (``laplace_bits``: numpy's bit generator and one log) and TS-Gaussian's two normals;
2. *stripped lockstep prototypes* — NOT the policies' code: M trials advanced round by round
   together, so one trial's round-to-round dependency chain hides behind the others', with
   table-driven updates, a branch-free argmax, no capture arrays and the likelihood-ratio score
   kept online.  They are what a rewrite of the kernels for speed could at best become.  DP-UCB
   is also run with a free random source (xorshift, no log) to show what the rest of its round
   costs once the decisions are random.

Each line prints ns a round and the wall time 2·10⁹ such rounds would take on two cores.
"""
from __future__ import annotations

import time

import numpy as np
from numba import njit
from numba.np.random.distributions import random_standard_normal

from dpledger.mechanisms.noise import laplace_bits
from dpledger.policies.mishra_thakurta import dp_ucb_tables
from dpledger.policies.registry import make_policy

ROUNDS = 2e9                 # 1e6 trials per side × 2 sides × T = 1000
SCALING = 1.9                # two threads of the trial loop


@njit(nogil=True)
def _laplace_loop(bg, n):
    s = 0.0
    for _ in range(n):
        s += laplace_bits(bg, 20.0)
    return s


@njit(nogil=True)
def _normal_pair_loop(bg, n):
    s = 0.0
    for _ in range(n):
        s += random_standard_normal(bg) + random_standard_normal(bg)
    return s


@njit(nogil=True)
def _xorshift(x):
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    return x


@njit(nogil=True)
def dp_ucb_lanes(bg, tab, T, gamma_, scale, M, ntrials, free_noise):
    """M DP-UCB trials (K = 2, printed width, rewards 0) in lockstep; the score is the sum of
    the Laplace log-likelihood ratios of the p-sums holding arm 0's first reward."""
    n_tab = tab.size // 3
    L = 0
    m = T
    while m > 0:
        L += 1
        m >>= 1
    fs = np.zeros((M, 2, 3 * L + 1))
    cnt = np.zeros((M, 2), np.int64)
    n = np.zeros((M, 2))
    ca = np.zeros((M, 2))
    cb = np.zeros((M, 2))
    llr = np.zeros(M)
    xs = np.uint64(88172645463325252)
    total = 0.0
    for _ in range(0, ntrials, M):
        fs[:] = 0.0
        cnt[:] = 0
        n[:] = 0.0
        ca[:] = 0.0
        cb[:] = 0.0
        llr[:] = 0.0
        for t in range(1, T + 1):
            sl = tab[n_tab + t]
            for lane in range(M):
                a = t - 1 if t <= 2 else (1 if ca[lane, 1] + cb[lane, 1] * sl
                                          > ca[lane, 0] + cb[lane, 0] * sl else 0)
                c = cnt[lane, a] + 1
                i = 0
                while (c >> i) & 1 == 0:
                    i += 1
                s = 0.0
                for j in range(i):
                    s += fs[lane, a, j]
                    fs[lane, a, j] = 0.0
                fs[lane, a, i] = s
                cnt[lane, a] = c
                if free_noise:
                    xs = _xorshift(xs)
                    noise = (np.float64(xs >> np.uint64(11)) * 2.0 ** -53 - 0.5) * 4.0 * scale
                else:
                    noise = laplace_bits(bg, scale)
                noisy = s + noise
                hit = (a == 0) & ((c >> i) == 1)
                u = min(1.0, max(-1.0, 2.0 * noise - 1.0))
                llr[lane] += u / scale if hit else 0.0
                for j in range(i):
                    fs[lane, a, L + j] = 0.0
                fs[lane, a, L + i] = noisy
                h = 2 * L
                o = fs[lane, a, h + i + 1] + noisy
                for j in range(i + 1):
                    fs[lane, a, h + j] = o
                n[lane, a] += 1.0
                ca[lane, a] = (o + gamma_) / n[lane, a]
                cb[lane, a] = tab[2 * n_tab + np.int64(n[lane, a])]
        total += llr.sum()
    return total


@njit(nogil=True)
def ts_gaussian_lanes(bg, tinv, tsig, T, M, ntrials):
    """M TS-Gaussian trials (K = 2, c = 1, arm 0 pays 1) in lockstep; the score is the
    Gaussian log-likelihood ratio of every later posterior read of the arm played at round 1."""
    S = np.zeros((M, 2))
    k = np.zeros((M, 2), np.int64)
    inv = np.ones((M, 2))
    sig = np.ones((M, 2))
    llr = np.zeros(M)
    astar = np.zeros(M, np.int64)
    total = 0.0
    for _ in range(0, ntrials, M):
        S[:] = 0.0
        k[:] = 0
        inv[:] = 1.0
        sig[:] = 1.0
        llr[:] = 0.0
        for t in range(1, T + 1):
            for lane in range(M):
                z0 = random_standard_normal(bg)
                z1 = random_standard_normal(bg)
                v0 = S[lane, 0] * inv[lane, 0] + sig[lane, 0] * z0
                v1 = S[lane, 1] * inv[lane, 1] + sig[lane, 1] * z1
                if t > 1:
                    first = astar[lane] == 0
                    z = z0 if first else z1
                    sd = sig[lane, 0] if first else sig[lane, 1]
                    d = sd * sd
                    llr[lane] += (sd * z * d - 0.5 * d * d) / d
                a = 1 if v1 > v0 else 0
                if t == 1:
                    astar[lane] = a
                S[lane, a] += 1.0 if a == 0 else 0.0
                kk = k[lane, a] + 1
                k[lane, a] = kk
                inv[lane, a] = tinv[kk]
                sig[lane, a] = tsig[kk]
        total += llr.sum()
    return total


def _cpu(f, *args) -> float:
    t0 = time.process_time()
    f(*args)
    return time.process_time() - t0


def _say(label: str, ns: float) -> None:
    wall = ROUNDS * ns * 1e-9 / SCALING
    print(f"{label:62s} {ns:6.1f} ns a round  -> {wall:5.1f} s for 2e9 rounds on 2 cores")


def main() -> None:
    rng = np.random.default_rng(1)
    bg = rng.bit_generator
    n = 20_000_000
    _laplace_loop(bg, 10)
    _normal_pair_loop(bg, 10)
    _say("draw: one Laplace (laplace_bits), empty loop", _cpu(_laplace_loop, bg, n) / n * 1e9)
    _say("draw: two normals, empty loop", _cpu(_normal_pair_loop, bg, n) / n * 1e9)

    T = 1000
    pol = make_policy("dp-ucb")
    kp = pol.kernel_params(T, 2)
    tab = dp_ucb_tables(min(T + 1, 4096))
    trials = 20_000
    for free in (False, True):
        for M in (1, 2, 4, 8):
            dp_ucb_lanes(bg, tab, T, kp[1], kp[3], M, M, free)
            ns = _cpu(dp_ucb_lanes, bg, tab, T, kp[1], kp[3], M, trials, free) / trials / T * 1e9
            _say(f"DP-UCB lockstep prototype, M = {M}, "
                 f"{'free xorshift noise' if free else 'Laplace draws'}", ns)
    tinv = 1.0 / (np.arange(T + 2) + 1.0)
    tsig = np.sqrt(tinv)
    for M in (1, 2, 4, 8):
        ts_gaussian_lanes(bg, tinv, tsig, T, M, M)
        ns = _cpu(ts_gaussian_lanes, bg, tinv, tsig, T, M, trials) / trials / T * 1e9
        _say(f"TS-Gaussian lockstep prototype, M = {M}", ns)
    print(f"target: {10 * SCALING / ROUNDS * 1e9:.1f} ns a round (10 s on 2 cores)")


if __name__ == "__main__":
    main()
