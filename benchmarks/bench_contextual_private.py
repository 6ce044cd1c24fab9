"""Private contextual policies: the calibration comparison and speed (issue 22 §4, Speed).
Run: ``python benchmarks/bench_contextual_private.py [--quick] [--only calibration|speed]``.

K1  the paper's σ (Shariff & Sheffet 2018: √(16m)·L̃²·ln(4/δ)/ε) against the σ solved with
    dpledger's accountant for the same certified (ε, δ) = (1, 0.1), T = 1e4, L = 1 (L̃² = 2);
    the same for the Wishart mode's k; each with the certificate's ε at δ = 0.1.
K2  the regret both calibrations reach at that certified (ε, δ): ``jdp-linucb`` (gaussian and
    wishart, paper and accounted) and non-private ``linucb`` on the synthetic linear bandit
    (d = 5, K = 10, T = 1e4, 20 runs, seed 0): mean regret at T ± its standard error.
S1  rounds per second (one core, warm, ``run_one``) of ``jdp-linucb`` at d = 10, K = 10,
    T = 1e5 on the linear bandit (shared θ), every mode and calibration.
S2  rounds per second on digits (supervised, d = 64, K = 10 disjoint models) of every
    contextual policy, T = 1e4 (T = 2e3 with --quick).
S3  microseconds per round against d (K = 10; shared and disjoint) and against T (d = 10) for
    ``jdp-linucb`` and ``reward-dp-linucb``: under record privacy every delivery closes a node
    whose noise touches every model's block, so all M models (M = K disjoint, 1 shared) are
    refactored every round: O(M·d³) for the factorisations plus O(M·d²) noise draws per
    round; the reward-private policy refactors nothing (its Gram matrix is exact: rank-1
    updates) and solves one model per delivery, O(K·d²) a round.  Flat in T.
S4  the floor of a record-private round at d = 64, K = 10 (digits), thread CPU time of one core,
    each piece in an otherwise empty compiled loop: the node noise a delivery must draw (K
    blocks: the symmetric Gaussian's (d+1)(d+2)/2 = 2145 entries, the per-entry Laplace's
    d(d+1)/2 + d = 2144, the latter both as sign·exponential — the policies' draw — and as
    ``laplace_bits``' one logarithm a draw), one LAPACK Cholesky (``np.linalg.cholesky`` in
    numba: dpotrf) of a 64×64 matrix, then a whole ``tree_push`` and K whole model refreshes
    (:func:`~dpledger.policies.contextual.private_loop.refresh_joint`).  The floor is noise + K
    factorisations: no sound implementation of these policies' law draws less or factors
    fewer (every delivery closes a node whose fresh noise moves every model's block).
Times are medians of repeats on a shared machine (S4: minima of thread CPU time); not a test.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from bench_policies import _median_time as _median  # noqa: E402
from dpledger.policies.contextual import environments as CE  # noqa: E402
from dpledger.policies.contextual.base import problem_of  # noqa: E402
from dpledger.policies.contextual.simulator import simulate_contextual  # noqa: E402
from dpledger.policies.registry import make_policy  # noqa: E402
from dpledger.policies.simulator import run_generator  # noqa: E402
from dpledger.report import certificate_block  # noqa: E402

CONTEXTUAL = ("linucb", "lints", "jdp-linucb", "dp-linucb-mt", "dp-lints-mt",
              "reward-dp-linucb")


def calibration(quick: bool) -> None:
    T, eps, delta = 10_000, 1.0, 0.1
    lin = CE.linear(5, 10, seed=0)
    # L = 1: L̃² = 2; σ does not depend on d, the Wishart k does (p = d + 1): the regret
    # table's d = 5, K = 10
    prob = problem_of(CE.linear(5, 10, seed=0), T, 0)
    print(f"K1  ε = {eps}, δ = {delta}, T = {T}, L̃² = 2: noise and certified ε at δ = {delta}")
    for mode, key in (("gaussian", "sigma"), ("wishart", "k")):
        vals = {}
        for cal in ("paper", "accounted"):
            pol = make_policy("jdp-linucb", mode=mode, calibration=cal)
            plan = pol.plan(prob)
            blk = certificate_block(pol.certificate(prob), [delta])
            cert = blk["epsilon_at_delta"]
            mu = f", GDP μ {blk['gdp_mu']:.4g}" if blk["gdp_mu"] is not None else ""
            vals[cal] = plan.drawn[key]
            print(f"    {mode:8s} {cal:9s} {key} = {plan.drawn[key]:<12.6g} certificate "
                  f"ε({delta}) = {cert[str(delta)]:.4g}{mu}  (nodes per record "
                  f"{pol.nodes(prob)}, noise draws per prefix {plan.levels})")
        print(f"    {mode:8s} paper/accounted {key}: {vals['paper'] / vals['accounted']:.3g}")
    rows = [("linucb", {})] + [("jdp-linucb", {"mode": m, "calibration": c})
                               for m in ("gaussian", "wishart") for c in ("paper", "accounted")]
    for horizon, runs in ((T, 4 if quick else 20), (10 * T, 2 if quick else 5)):
        print(f"K2  regret at T = {horizon} on the linear bandit d = 5, K = 10, {runs} runs, "
              f"seed 0 (mean ± s.e.; uniform play's expected regret beside), certified "
              f"(ε, δ) = ({eps}, {delta}) for every private row")
        for name, params in rows:
            res = simulate_contextual(make_policy(name, **params), lin, horizon, seed=0,
                                      runs=runs)
            final = res.regret[:, -1]
            se = final.std(ddof=1) / math.sqrt(final.size)
            label = name + ("" if not params else f" {params['mode']} {params['calibration']}")
            print(f"    {label:30s} {final.mean():9.1f} ± {se:.1f}")
        print(f"    {'uniform play':30s} {uniform_regret(lin, horizon):9.1f}")


def uniform_regret(env, T: int, n: int = 20_000) -> float:
    """T·E[max_a ⟨θ, x_a⟩ − mean_a ⟨θ, x_a⟩] on the linear bandit, by n context draws."""
    rng = np.random.default_rng(1)
    g = np.abs(rng.standard_normal((n, env.n_arms, env.dim)))
    x = env.norm_bound * g / np.linalg.norm(g, axis=2, keepdims=True)
    m = x @ env.theta
    return float(T * np.mean(m.max(1) - m.mean(1)))


def rate(pol, env, T, reps):
    pol.run_one(run_generator(0, 0), env, problem_of(env, min(T, 200), 0))     # compile
    prob = problem_of(env, T, 0)
    if hasattr(pol, "plan"):
        pol.plan(prob)                                   # calibration outside the timing
    return T / _median(lambda: pol.run_one(run_generator(0, 0), env, prob), reps)


def speed(quick: bool) -> None:
    reps = 1 if quick else 3
    T = 10_000 if quick else 100_000
    lin = CE.linear(10, 10, seed=0)
    print(f"S1  jdp-linucb, linear bandit d = 10, K = 10 (shared θ), T = {T}: rounds/s")
    for mode in ("gaussian", "wishart"):
        for cal in ("paper", "accounted"):
            r = rate(make_policy("jdp-linucb", mode=mode, calibration=cal), lin, T, reps)
            print(f"    {mode:8s} {cal:9s} {r:10.4g}")
    print(f"    linucb (reference)  {rate(make_policy('linucb'), lin, T, reps):10.4g}")
    try:
        from dpledger.policies.contextual.data import load_supervised
        dig = load_supervised("digits")
    except Exception as exc:        # scikit-learn missing: say so, skip S2
        print(f"S2  skipped: {exc}")
        dig = None
    if dig is not None:
        T2 = 2_000 if quick else 10_000
        print(f"S2  digits d = 64, K = 10 (disjoint), T = {T2}: rounds/s")
        for name in CONTEXTUAL:
            print(f"    {name:18s} {rate(make_policy(name), dig, T2, reps):10.4g}")
    T3 = 2_000 if quick else 10_000
    print(f"S3  microseconds per round, K = 10, T = {T3}")
    print("    d     jdp shared  jdp disjoint  reward shared  reward disjoint")
    rng = np.random.default_rng(0)
    for d in ((5, 20) if quick else (5, 10, 20, 40, 64)):
        x = rng.random((T3, d))
        x = CE.fit_to_bound(x / np.linalg.norm(x, axis=1, keepdims=True), 1.0)[0]
        dis = CE.contextual_table(x, (rng.random((T3, 10)) < 0.5) * 1.0)
        sh = CE.linear(d, 10, seed=0)
        us = [1e6 / rate(make_policy(name), env, T3, reps)
              for name in ("jdp-linucb", "reward-dp-linucb") for env in (sh, dis)]
        print(f"    {d:<5d} {us[0]:10.3g} {us[1]:13.3g} {us[2]:14.3g} {us[3]:16.3g}")
    print("    d = 10 shared, microseconds per round against T")
    for T4 in ((10_000, 100_000) if quick else (10_000, 100_000, 1_000_000)):
        us = [1e6 / rate(make_policy(n), lin, T4, reps) for n in ("jdp-linucb",
                                                                 "reward-dp-linucb")]
        print(f"    T={T4:<9d} jdp {us[0]:.3g}  reward {us[1]:.3g}")


def floor() -> None:
    from numba import njit

    from dpledger.mechanisms import matrix as mx
    from dpledger.mechanisms.noise import laplace_bits
    from dpledger.policies.contextual import private_loop as pl

    d, K = 64, 10
    p = d + 1
    E_joint, E_entries = p * (p + 1) // 2, d * (d + 1) // 2 + d

    @njit
    def sym_gauss(rng, reps):
        out = np.zeros(E_joint)
        for _ in range(reps):
            for _b in range(K):
                mx.sym_gaussian_draw(rng, 1.0, p, out, 0)
        return out[0]

    @njit
    def laplace_sign_exp(rng, scales, reps):
        out = np.zeros(scales.size)
        for _ in range(reps):
            for _b in range(K):
                mx.laplace_entries_draw(rng, scales, out, 0)
        return out[0]

    @njit
    def laplace_log(rng, scales, reps):
        out = np.zeros(scales.size)
        bg = rng.bit_generator
        for _ in range(reps):
            for _b in range(K):
                for e in range(scales.size):
                    out[e] = laplace_bits(bg, scales[e])
        return out[0]

    @njit
    def cholesky(W, reps):
        s = 0.0
        for _ in range(reps):
            s += np.linalg.cholesky(W)[0, 0]
        return s

    @njit
    def pushes(tr, rng, spec, A, cap, item, reps):
        for _ in range(reps):
            mx.tree_push(tr, 0, item, rng, spec, True, A, cap)

    @njit
    def refreshes(pre, consts, chol, theta, widths, jstate, b, W, work, reps):
        s = 0
        for _ in range(reps):
            for m in range(K):
                s += pl.refresh_joint(pre, m, E_joint, d, 1.0, consts, chol, theta, widths,
                                      jstate, b, W, work)
        return s

    def per_call_us(fn, *args, reps):
        fn(*args, 2)                                     # compile, warm
        best = math.inf
        for _ in range(3):
            c0 = time.thread_time()
            fn(*args, reps)
            best = min(best, time.thread_time() - c0)
        return 1e6 * best / reps

    rng = np.random.default_rng(0)
    g = rng.standard_normal((d, d))
    W = g @ g.T + d * np.eye(d)
    ones = np.ones(E_entries)
    noise_g = per_call_us(sym_gauss, rng, reps=300)
    noise_l = per_call_us(laplace_sign_exp, rng, ones, reps=300)
    noise_log = per_call_us(laplace_log, rng, ones, reps=300)
    chol = per_call_us(cholesky, W, reps=3000)
    spec = mx.noise_spec(mx.GAUSS_SYM, entries=E_joint, sigma=1.0, p=p)
    tr = mx.tree_new(1, 17, K, E_joint, [0])
    push = per_call_us(pushes, tr, rng, spec, np.zeros((p, p)), np.zeros((0, K * E_joint + 1)),
                       np.zeros(K * E_joint), reps=1000)
    pre = np.zeros(K * E_joint)
    for m in range(K):
        for i in range(d):
            pre[m * E_joint + mx.packed_index(i, i, p)] = 50.0
    consts = np.ones(pl.N_CONSTS)
    refresh = per_call_us(refreshes, pre, consts, np.zeros((K, d, d)), np.zeros((K, d)),
                          np.zeros(K), np.zeros((K, 2), np.int64), np.zeros(d), np.zeros((d, d)),
                          np.zeros(d), reps=300)
    print(f"S4  floor of a record-private round, d = {d}, K = {K}: µs (thread CPU time)")
    print(f"    node noise, symmetric Gaussian ({K}×{E_joint} draws)   {noise_g:8.1f}")
    print(f"    node noise, Laplace sign·exponential ({K}×{E_entries})  {noise_l:8.1f}")
    print(f"    node noise, Laplace by one log a draw ({K}×{E_entries}) {noise_log:8.1f}")
    print(f"    one LAPACK Cholesky, 64×64                          {chol:8.1f}")
    print(f"    tree_push (padded, Gaussian)                        {push:8.1f}")
    print(f"    {K} model refreshes (factor, ln det, solve)          {refresh:8.1f}")
    fl = noise_g + K * chol
    print(f"    floor = noise + {K} factorisations = {fl:.1f} µs: at most {1e6 / fl:.0f} "
          f"rounds/s; tree_push + refreshes = {push + refresh:.1f} µs: "
          f"{1e6 / (push + refresh):.0f} rounds/s before selection")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, one repeat")
    ap.add_argument("--only", choices=("calibration", "speed", "floor"), default=None)
    args = ap.parse_args()
    if args.only in (None, "calibration"):
        calibration(args.quick)
    if args.only in (None, "speed"):
        speed(args.quick)
    if args.only in (None, "floor"):
        floor()


if __name__ == "__main__":
    main()
