"""The smooth binary mechanism against the binary tree at the same certificate
(docs/algorithms.md#smooth-binary-counter; issue 32 §3).  Run:
``python benchmarks/bench_smooth_counter.py [--quick] [--part variance|regret|speed]``.

variance  the noise variance of a running count, smooth (step t: 2·(w − z_t)·((h − w)/ε)²) against
          the binary tree (step t: 2·popcount(t)·(levels/ε)²), both certified ε per item (the
          worst item's nodes × per-node ε), for L = 1e4 … 1e7 items: the average over
          t ≤ L and the worst t — closed forms, plus the empirical variance over ``reps`` runs
          of the compiled counters at L = 1e4 (all-zero stream).
regret    DP-UCB on Azize & Basu's Fig. 2 instance (Bernoulli 0.75, 0.625, 0.5, 0.375, 0.25),
          ε = 1 split over K arms, T = 1e6, counter=binary vs counter=smooth, at CONFIGS
          (printed width, κ = 1 and 0.01; experimental width): mean pseudo-regret over R runs with its 95 % band
          (± 1.96·sd/√R), the certificate of each (pure ε, from accounting).
ts        dp-ts-mt (no gap estimation, ``--pulls`` random pulls per arm) on the same instance,
          binary vs smooth trees at the same certificate: regret over R runs, and the closed-form
          running-sum variance of an arm's tree at the policy's shapes.
hh        dp-ts (Hu & Hegde, Algorithm 1) with counter=smooth on its epoch buffers against the
          binary mechanism, at the same certificate (ε): the noise variance of an arm's private
          sum after O observations (the logarithmic blocks, the same in both, plus the buffer's
          counter), closed forms averaged over O ≤ N and an empirical check over ``reps`` runs of
          the policies' own compiled push/commit (all-zero stream); then regret over R runs on
          the same instance at ``--epsilon``.
Not a test.  CPU time (user + sys of this process) is reported: the machine is shared.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from dpledger.accounting.smooth_tree import smooth_worst_nodes
from dpledger.mechanisms import counters as C
from dpledger.mechanisms import smooth as S
from dpledger.policies.environments import bernoulli
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator

MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]
# (width, relaxation_scale κ): as printed; printed with Γ scaled down (the tuning Mishra &
# Thakurta describe, docs/algorithms.md#dp-ucb), where the noise rather than Γ sets the regret;
# the paper's experimental width
CONFIGS = (("printed", 1.0), ("printed", 0.01), ("experimental", 1.0))


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def variance_table(eps: float = 1.0) -> list[dict]:
    rows = []
    for L in (10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7):
        levels = C.binary_levels(L)
        t = np.arange(1, L + 1, dtype=np.int64)
        pop = np.zeros(L, dtype=np.int64)
        x = t.copy()
        while x.any():
            pop += x & 1
            x >>= 1
        vb = 2.0 * pop * (levels / eps) ** 2
        h, w = S.smooth_shape(L)
        vs = S.smooth_variances(L, h, w, eps)
        rows.append(dict(L=L, levels=levels, h=h, w=w,
                         binary_eps=levels * (1 / levels) * eps,
                         smooth_eps=smooth_worst_nodes(L, h, w) * eps / (h - w),
                         binary_avg=float(vb.mean()), binary_max=float(vb.max()),
                         smooth_avg=float(vs.mean()), smooth_max=float(vs.max()),
                         ratio_avg=float(vb.mean() / vs.mean()),
                         ratio_max=float(vb.max() / vs.max())))
    return rows


def empirical(L: int, reps: int, eps: float = 1.0, seed: int = 0) -> dict:
    """Sample variance of the running count's noise over ``reps`` runs, averaged over t ≤ L."""
    rng = np.random.default_rng(seed)
    x = np.zeros(L)
    out = np.empty(L)
    cols = tuple(np.zeros(L + 1, dtype=np.int64) for _ in range(6))
    h, w = S.smooth_shape(L)
    acc_s, acc_b = np.zeros(L), np.zeros(L)
    for _ in range(reps):
        fs, ist = S.smooth_new(h, w, L, 0)
        S.smooth_run(fs, ist, x, rng, (h - w) / eps, 0, cols, 0, 0, 0, out)
        acc_s += out ** 2
        fs, ist = C.binary_new(L, 0)
        C.binary_run(fs, ist, x, rng, np.array([C.binary_levels(L) / eps]), np.array([0]),
                     cols, 0, 0, 0, out)
        acc_b += out ** 2
    vs, vb = acc_s / reps, acc_b / reps
    return dict(L=L, reps=reps, smooth_avg=float(vs.mean()), binary_avg=float(vb.mean()),
                ratio_avg=float(vb.mean() / vs.mean()),
                smooth_closed=float(S.smooth_variances(L, h, w, eps).mean()))


def _pseudo_regret(actions, means) -> float:
    gaps = max(means) - np.asarray(means)
    return float(np.bincount(actions, minlength=len(means)) @ gaps)


def _runs(name: str, params: dict, T: int, R: int, seed: int = 0) -> dict:
    """Mean pseudo-regret of ``name`` with ``params`` over R runs on MEANS, with its 95 % band
    (± 1.96·sd/√R), median, share of runs with regret ≥ T/20 (locked onto a worse arm), the
    certificate's pure ε (from accounting) and rounds per CPU-second."""
    env = bernoulli(MEANS)
    K = len(MEANS)
    pol = make_policy(name, **params)
    cert = pol.certificate(T, K)
    regs = []
    cpu0 = _cpu()
    for i in range(R):
        o = pol.run_one(run_generator(seed, i), env.as_tuple(), T)
        regs.append(_pseudo_regret(o.actions, MEANS))
    cpu = _cpu() - cpu0
    regs = np.array(regs)
    return dict(mean=float(regs.mean()), band=float(1.96 * regs.std(ddof=1) / np.sqrt(R)),
                median=float(np.median(regs)), stuck=float(np.mean(regs >= T / 20)),
                certificate_eps=max(c.composition.pure_epsilon() for c in cert.candidates),
                cpu_s=cpu, rounds_per_cpu_s=R * T / cpu)


def regret(T: int, R: int, width: str, eps: float = 1.0, seed: int = 0,
           relaxation_scale: float = 1.0, budget: str = "split") -> dict:
    kw = {"relaxation_scale": relaxation_scale} if relaxation_scale != 1.0 else {}
    return {counter: _runs("dp-ucb", dict(epsilon=eps, width=width, counter=counter,
                                          per_tree_budget=budget, **kw), T, R, seed)
            for counter in ("binary", "smooth")}


def private_ts(T: int, R: int, eps: float, pulls: int, seed: int = 0) -> dict:
    """dp-ts-mt without gap estimation (as the paper's experiments), ``pulls`` random pulls per
    arm, binary against smooth trees at the same certificate; and the closed-form noise
    variance of an arm's running sum, averaged over the t ≤ L items its tree can hold (binary:
    Lap(levels/ε0) p-sums, levels of T − τ; smooth: its shape for L), ε0 = ε/(2K)."""
    params = dict(epsilon=eps, gap_estimation=False, random_pulls=pulls)
    out = {c: _runs("dp-ts-mt", dict(params, counter=c), T, R, seed)
           for c in ("binary", "smooth")}
    K = len(MEANS)
    pol = make_policy("dp-ts-mt", counter="smooth", **params)
    x = pol.tree_shapes(T, K)[0]
    L, eps0 = x["items"], eps / (2 * K)
    t = np.arange(1, L + 1, dtype=np.int64)
    pop = np.array([bin(int(v)).count("1") for v in t])
    vb = 2.0 * pop * (x["levels"] / eps0) ** 2
    vs = S.smooth_variances(L, x["h"], x["w"], eps0)
    out["variance"] = dict(L=L, levels=x["levels"], h=x["h"], w=x["w"],
                           binary_avg=float(vb.mean()), smooth_avg=float(vs.mean()),
                           ratio_avg=float(vb.mean() / vs.mean()),
                           ratio_max=float(vb.max() / vs.max()))
    return out


def _hh_buffer_variances(n_obs: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """dp-ts: closed-form noise variance of an arm's private sum after O = 1 … n_obs
    observations — the closed logarithmic blocks' 2·(2/ε)² each plus the current epoch buffer's
    counter after j items: binary popcount(j)·2·(2(r + 1)/ε)², smooth 2·(w_r − z_j)·(2(h_r −
    w_r)/ε)² (``smooth_variances`` at the per-node ε/2 budget's scale)."""
    from dpledger.policies.smooth_hu_hegde import epoch_items, epoch_shapes
    vb = np.zeros(n_obs)
    vs = np.zeros(n_obs)
    r, lo = -1, 0
    for O in range(1, n_obs + 1):
        if O & (O + 1) == 0:               # O = 2^{k+1} − 1: a block closes, a new epoch opens
            r = r + 1 if O > 1 else 0
            lo = O
            continue
        j = O - lo
        vb[O - 1] = 2.0 * bin(j).count("1") * (2.0 * (r + 1) / eps) ** 2
    # smooth, per epoch
    r = 0
    while epoch_items(r) < n_obs:
        lo = epoch_items(r)
        n = min(lo, n_obs - lo)
        h, w = (int(v) for v in epoch_shapes(r + 1)[r])
        vs[lo:lo + n] = S.smooth_variances(n, h, w, eps / 2.0)
        r += 1
    closed = np.floor(np.log2(np.arange(2, n_obs + 2, dtype=np.float64)))
    log = closed * 2.0 * (2.0 / eps) ** 2        # floor(log2(O + 1)) closed blocks
    return log + vb, log + vs


def hh_variance(N: int, eps: float = 1.0) -> dict:
    vb, vs = _hh_buffer_variances(N, eps)
    return dict(N=N, binary_avg=float(vb.mean()), smooth_avg=float(vs.mean()),
                ratio_avg=float(vb.mean() / vs.mean()), binary_max=float(vb.max()),
                smooth_max=float(vs.max()), ratio_max=float(vb.max() / vs.max()))


def hh_empirical(N: int, reps: int, eps: float = 1.0, seed: int = 0) -> dict:
    """Sample variance of O·μ̃ (the private sum's noise on an all-zero stream) after each O ≤ N,
    over ``reps`` runs of dp-ts's own compiled push/commit (binary: hu_hegde.dp_ts_push/commit;
    smooth: smooth_hu_hegde.dp_ts_smooth_push/commit), averaged over O ≤ N."""
    from dpledger._jit import njit
    from dpledger.policies import hu_hegde as H
    from dpledger.policies import smooth_hu_hegde as SH

    shapes = SH.epoch_shapes(max(1, N.bit_length()))

    @njit(cache=False)
    def one(N, eps, shapes, seed, smooth, out):
        np.random.seed(seed)
        O = np.zeros(1)
        r = np.zeros(1, np.int64)
        mu = np.zeros(1)
        lfs = np.zeros((1, 2))
        lis = np.zeros((1, 4), np.int64)
        fs, ist = C.log_new(1, 0)
        lfs[0] = fs
        lis[0] = ist
        hmax = 2
        for k in range(shapes.shape[0]):
            hmax = max(hmax, shapes[k, 0])
        sfs = np.zeros((1, 1 + 2 * hmax))
        sis = np.zeros((1, 9 + 4 * hmax), np.int64)
        bfs = np.zeros((1, 3 * 64 + 1))
        bis = np.zeros((1, 4), np.int64)
        for i in range(N):
            if smooth:
                kind, value, s0, s1 = SH.dp_ts_smooth_push(0, 0.0, O, lfs, lis, sfs, sis)
                b = 2.0 / eps if kind == 0 else 2.0 * (shapes[r[0], 0] - shapes[r[0], 1]) / eps
                SH.dp_ts_smooth_commit(0, kind, value, np.random.laplace(0.0, b), O, r, lfs,
                                       lis, sfs, sis, mu, shapes)
            else:
                kind, value, s0, s1 = H.dp_ts_push(0, 0.0, O, lfs, lis, bfs, bis)
                b = 2.0 / eps if kind == 0 else 2.0 * (r[0] + 1) / eps
                H.dp_ts_commit(0, kind, value, np.random.laplace(0.0, b), O, r, lfs, lis, bfs,
                               bis, mu)
            out[i] = mu[0] * O[0]

    acc_b, acc_s, out = np.zeros(N), np.zeros(N), np.zeros(N)
    for i in range(reps):
        one(N, eps, shapes, seed + 2 * i, False, out)
        acc_b += out ** 2
        one(N, eps, shapes, seed + 2 * i + 1, True, out)
        acc_s += out ** 2
    vb, vs = _hh_buffer_variances(N, eps)
    return dict(N=N, reps=reps, binary_avg=float((acc_b / reps).mean()),
                smooth_avg=float((acc_s / reps).mean()), binary_closed=float(vb.mean()),
                smooth_closed=float(vs.mean()),
                ratio_avg=float((acc_b / reps).mean() / (acc_s / reps).mean()))


def hu_hegde_ts(T: int, R: int, eps: float, seed: int = 0) -> dict:
    """dp-ts binary vs counter=smooth on MEANS over R runs (same seeds), certificate of each."""
    return {c: _runs("dp-ts", dict(epsilon=eps, counter=c), T, R, seed)
            for c in ("binary", "smooth")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", choices=("variance", "regret", "ts", "hh", "all"), default="all")
    ap.add_argument("--pulls", type=int, default=10, help="dp-ts-mt random pulls per arm")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--horizon", type=int, default=None)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--budget", choices=("split", "full"), default="split")
    ap.add_argument("--config", default="", help="comma-separated width:κ among "
                    + ", ".join(f"{w}:{k:g}" for w, k in CONFIGS) + " (default all)")
    a = ap.parse_args()
    if a.part in ("variance", "all"):
        print("closed forms, ε = 1 per item (same certificate), variance of a running count:")
        print("| L | binary levels | smooth (h, w) | ε binary | ε smooth | binary avg over t | binary worst t | smooth avg over t | smooth worst t | ratio avg | ratio worst |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in variance_table():
            print(f"| {r['L']:.0e} | {r['levels']} | ({r['h']}, {r['w']}) | {r['binary_eps']:.3g} | {r['smooth_eps']:.3g} | "
                  f"{r['binary_avg']:.0f} | {r['binary_max']:.0f} | {r['smooth_avg']:.0f} | {r['smooth_max']:.0f} | "
                  f"{r['ratio_avg']:.2f} | {r['ratio_max']:.2f} |")
        e = empirical(10 ** 4, 200 if a.quick else 2000)
        print(f"empirical at L = {e['L']}, {e['reps']} runs: binary avg {e['binary_avg']:.0f}, smooth avg "
              f"{e['smooth_avg']:.0f} (closed form {e['smooth_closed']:.0f}), ratio {e['ratio_avg']:.2f}")
    if a.part in ("regret", "all"):
        T = a.horizon or (10 ** 5 if a.quick else 10 ** 6)
        R = a.runs or (4 if a.quick else 20)
        for width, kappa in CONFIGS:
            if a.config and f"{width}:{kappa:g}" not in a.config.split(","):
                continue
            res = regret(T, R, width, eps=a.epsilon, relaxation_scale=kappa, budget=a.budget)
            for counter, r in res.items():
                print(f"DP-UCB ε={a.epsilon:g} {a.budget} width={width} κ={kappa:g} counter={counter} "
                      f"T={T} R={R}: regret {r['mean']:.0f} ± "
                      f"{r['band']:.0f} (95 %), median {r['median']:.0f}, runs with regret ≥ T/20 "
                      f"{r['stuck']:.2f}, certificate ε = {r['certificate_eps']:.4g}, "
                      f"{r['rounds_per_cpu_s']:.3g} rounds/CPU-s")
    if a.part in ("ts", "all"):
        T = a.horizon or (10 ** 4 if a.quick else 10 ** 5)
        R = a.runs or (4 if a.quick else 20)
        res = private_ts(T, R, a.epsilon, a.pulls)
        v = res.pop("variance")
        print(f"dp-ts-mt running-sum variance (closed forms, ε0 = ε/(2K)), t ≤ L = {v['L']}: "
              f"binary ({v['levels']} levels) {v['binary_avg']:.4g}, smooth ({v['h']}, {v['w']}) "
              f"{v['smooth_avg']:.4g}, ratio {v['ratio_avg']:.2f} (worst t: {v['ratio_max']:.2f})")
        for counter, r in res.items():
            print(f"dp-ts-mt ε={a.epsilon:g} gap_estimation=false random_pulls={a.pulls} "
                  f"counter={counter} T={T} R={R}: regret {r['mean']:.0f} ± {r['band']:.0f} "
                  f"(95 %), median {r['median']:.0f}, runs with regret ≥ T/20 {r['stuck']:.2f}, "
                  f"certificate ε = {r['certificate_eps']:.4g}, {r['rounds_per_cpu_s']:.3g} "
                  f"rounds/CPU-s")
    if a.part in ("hh", "all"):
        eps = a.epsilon
        print(f"dp-ts private-sum noise variance (closed forms, ε = {eps:g}; log blocks + the "
              "epoch buffer's counter), averaged over O ≤ N and at the worst O:")
        for N in (10 ** 4, 10 ** 5, 10 ** 6):
            v = hh_variance(N, eps)
            print(f"  N = {N:.0e}: binary {v['binary_avg']:.4g}, smooth {v['smooth_avg']:.4g}, "
                  f"ratio {v['ratio_avg']:.2f}; worst O: {v['binary_max']:.4g} vs "
                  f"{v['smooth_max']:.4g}, ratio {v['ratio_max']:.2f}")
        e = hh_empirical(4095, 100 if a.quick else 1000, eps)
        print(f"  empirical N = {e['N']}, {e['reps']} runs: binary {e['binary_avg']:.4g} (closed "
              f"{e['binary_closed']:.4g}), smooth {e['smooth_avg']:.4g} (closed "
              f"{e['smooth_closed']:.4g}), ratio {e['ratio_avg']:.2f}")
        if a.runs != 0:
            T = a.horizon or (10 ** 4 if a.quick else 10 ** 5)
            R = a.runs or (4 if a.quick else 20)
            for counter, r in hu_hegde_ts(T, R, eps).items():
                print(f"dp-ts ε={eps:g} counter={counter} T={T} R={R}: regret {r['mean']:.0f} ± "
                      f"{r['band']:.0f} (95 %), median {r['median']:.0f}, runs with regret ≥ "
                      f"T/20 {r['stuck']:.2f}, certificate ε = {r['certificate_eps']:.4g}, "
                      f"{r['rounds_per_cpu_s']:.3g} rounds/CPU-s")
    t = time.strftime("%Y-%m-%d %H:%M")
    print(f"({t}; CPU seconds of this process; machine shared with other jobs)")


if __name__ == "__main__":
    main()
