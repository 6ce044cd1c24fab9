"""The Beta-posterior draw against its floors (issue 31 §3; docs/design.md#performance-targets).

    python benchmarks/bench_beta_floor.py [--horizon 10000000] [--repeats 3]

Times, in one process and alternating (CPU seconds of the process, best of ``--repeats``), one
run of K = 5 arms on `dpledger run`'s default Bernoulli instance (means 0.75 … 0.25) of:

* ``all``: the ts-beta kernel with ``posterior_draw=all`` (K Beta draws a round);
* ``max``: the ts-beta kernel with ``posterior_draw=max`` (policies/beta_max.py: the leader's
  Beta draw, one uniform and a bound for each other arm, the exact tail and conditioned draw
  only when the bound cannot decide or the arm beats), and ``max-joint`` (mostly one uniform
  for "no arm beats the leader");
* ``floor-scheme``: the leader's Beta draw and K − 1 uniforms a round, the reward and the
  posterior update, no decision made — what the ``max`` scheme costs if every bound test were
  free;
* ``floor-any``: one Beta draw a round, the reward and the update — the least any sampler exact
  in law for the played arm's sample can do (it must draw a value with the law of the maximum:
  one Beta-like draw), the floor the issue measures against;
* ``lazy-dp-ts max`` and ``dp-ts max``: those kernels with ``posterior_draw=max``, and with
  ``max-joint`` (one uniform deciding "no arm beats the leader", policies/beta_max.py);
* ``floor-dp-ts``: floor-any plus what DP-TS itself must do a round, whatever its draw (added
  2026-12-02, issue 31 §3's "floor of any exact-in-law scheme" for *that policy*): the played
  arm's posterior shape, and its counters — every reward enters a logarithmic-mechanism block
  or a binary-mechanism p-sum released with fresh Laplace noise (one Laplace draw a round: the
  private mean's law is that of the sum of those noises, so they must be drawn), the ledger
  row, the private mean's update (``_floor_dp_ts``).  Lazy-DP-TS's noise is drawn once an epoch,
  so its floor is floor-any's.

Prints ns a round and run-rounds per CPU-second (kernel only: the CLI adds about 1 s of CPU a
process for the interpreter, imports and cache loading, `benchmarks/bench_p1_cli.py` measures
end to end) and the ratios max / floor.

``--end-to-end`` also times `dpledger run POLICY --set posterior_draw=max --horizon T --runs 4
--seed 0 --quiet` for ts-beta, lazy-dp-ts and dp-ts in fresh processes (CPU of the child, best
of ``--repeats``), and the same command at T = 1000 (the start-up: interpreter, numba, imports,
cache loading, ledger and run.json; the policy's certificate), alternating the policies, and
compares each with its end-to-end floor: start-up + 4·T·(floor-any per round; floor-dp-ts for
dp-ts).  The first (warm-up) run of each policy fills `dpledger run`'s PLD cache
(accounting/pld_cache.py; ``DPLEDGER_PLD_CACHE``), so the timed runs read the certificate's
PLD numbers from it — set ``DPLEDGER_PLD_CACHE=off`` to time them computed (dp-ts: ≈ 1 s more).
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout

from dpledger.policies import baselines  # noqa: E402
from dpledger.policies.environments import bernoulli, draw_reward  # noqa: E402
from dpledger.policies.sink import make_sink, put_action  # noqa: E402
from dpledger.policies.hu_hegde import (dp_ts_commit, dp_ts_push, dp_ts_shape,  # noqa: E402
                                        DPTS)
from dpledger.mechanisms.counters import log_new  # noqa: E402
from dpledger.mechanisms.noise import laplace_noise, tree_noise  # noqa: E402
from dpledger.policies.registry import make_policy  # noqa: E402

K = 5


@njit(nogil=True)
def _floor(rng, env, T, K, stop, params, actions, rows, capture):
    """One Beta draw and ``params[0]`` uniforms a round, the reward and the update of arm 0."""
    s = np.zeros(K)
    f = np.zeros(K)
    n_uniforms = int(params[0])
    acc = 0.0
    for t in range(1, stop + 1):
        a = 0
        acc += rng.beta(s[a] + 1.0, f[a] + 1.0)
        for _ in range(n_uniforms):
            acc += rng.random()
        x = draw_reward(rng, env, a, t - 1)
        if x == 1.0:
            s[a] += 1.0
        else:
            f[a] += 1.0
        put_action(actions, t, a)
    return stop, 0, int(acc) & 0


@njit(nogil=True)
def _floor_dp_ts(rng, env, T, K, stop, params, actions, rows, capture):
    """What any exact-in-law DP-TS must do a round: the played arm's posterior shape and one
    Beta draw from it (floor-any), and — DP-TS's own — the arm's counters: the reward enters a
    logarithmic-mechanism block or a binary-mechanism p-sum released with fresh Laplace noise
    (one draw every round: the private mean's law is that of the sum of those noises), its
    ledger row, and the private mean's update.  ``_dp_ts``'s bookkeeping with arm 0 played.
    params as ``_dp_ts``'s."""
    eps = params[0]
    scales = params[2:]
    maxlev = 1
    while (1 << maxlev) <= T:
        maxlev += 1
    lfs = np.zeros((K, 2))
    lis = np.zeros((K, 4), np.int64)
    bfs = np.zeros((K, 3 * (maxlev + 1) + 1))
    bis = np.zeros((K, 4), np.int64)
    r = np.zeros(K, np.int64)
    O = np.zeros(K)
    slot = np.full(K, -1, np.int64)
    mu_tilde = np.zeros(K)
    for a in range(K):
        fs, ist = log_new(1, 0)
        lfs[a] = fs
        lis[a] = ist
    n_rows = 0
    acc = 0.0
    for t in range(1, stop + 1):
        a = 0
        if t > 1:
            al, be = dp_ts_shape(eps, t, mu_tilde[a], O[a])
            acc += rng.beta(al, be)
        x = draw_reward(rng, env, a, t - 1)
        kind, value, start, stop_ = dp_ts_push(a, x, O, lfs, lis, bfs, bis)
        if kind == 0:
            noise = laplace_noise(rng, env, scales[0], 1.0, rows, n_rows, a, start, stop_, 0)
            n_rows += 1
            slot[a] = -1
        else:
            if slot[a] < 0:
                slot[a] = n_rows
                n_rows += 1
            noise = tree_noise(rng, env, scales[r[a]], rows, slot[a], a, bis[a, 2],
                               bis[a, 0], r[a] + 1, r[a])
        dp_ts_commit(a, kind, value, noise, O, r, lfs, lis, bfs, bis, mu_tilde)
        put_action(actions, t, a)
    return stop, n_rows, int(acc) & 0


@njit(cache=False, _nrt=False, forceinline=True)
def _floor_round(rng, al, be, theta):
    """The least round of any exact-in-law draw of ts-beta: arm 0's Beta draw, compiled as the
    kernels' rounds are (``_nrt=False``, ``forceinline``: no reference counting of the
    Generator, which the plain floors' loops pay)."""
    theta[0] = rng.beta(al[0], be[0])
    return 0


@njit(cache=False, _nrt=False, forceinline=True)
def _floor_shaped_round(rng, shape_a, shape_b, theta):
    """The same for a shape computed by the caller (Lazy-DP-TS, DP-TS)."""
    theta[0] = rng.beta(shape_a, shape_b)
    return 0


def _production_floor(kernel, edits):
    """``kernel`` (a policy's whole-run kernel) with its ``max`` round replaced (``edits``: text
    pairs) by arm 0's shape and one Beta draw (:func:`_floor_round`), the rest of the loop as it
    runs: the same compiled helpers for the reward, the update, the counters, the noise and the
    ledger, and the round compiled as the kernels' are.  The floor of any exact-in-law draw for
    that policy measured the way its kernel is (added 2026-12-04: ts-beta's max-joint ran below
    floor-any, whose loop pays reference counting the kernels' rounds do not)."""
    import inspect
    import textwrap
    src = textwrap.dedent(inspect.getsource(kernel.py_func))
    src = src[src.index("def "):].replace(f"def {kernel.__name__}(", "def _floor_kernel(", 1)
    for old, new in edits:
        assert src.count(old) == 1, (kernel.__name__, old)
        src = src.replace(old, new)
    scope = dict(vars(sys.modules[kernel.__module__]))
    scope.update(_floor_round=_floor_round, _floor_shaped_round=_floor_shaped_round)
    exec(src, scope)
    return njit(nogil=True)(scope["_floor_kernel"])


_KERNEL_FLOORS = {
    "kernel-floor ts-beta": (baselines._beta_ts, [(
        "                a = beta_max_round(rng, al, be, mu, w, theta, MAX_REJECT)\n",
        "                a = _floor_round(rng, al, be, theta)\n")]),
    "kernel-floor lazy": (None, [(
        "                a = shifted_max_round(rng, 3.0 * np.log2(t) / eps, ones, mu_tilde, O, O, "
        "bnd,\n                                      lead, theta, MAX_REJECT)\n",
        "                sa, sb = lazy_shape(3.0 * np.log2(t) / eps, mu_tilde[0], O[0])\n"
        "                a = _floor_shaped_round(rng, sa, sb, theta)\n")]),
    # DP-TS: also without the max round's own bookkeeping after each commit (its intervals)
    "kernel-floor dp-ts": (None, [(
        "                a = shifted_max_round(rng, np.log2(t), c_o, mu_tilde, O, d_o, bnd, lead, "
        "theta,\n                                      MAX_REJECT)\n",
        "                sa, sb = dp_ts_shape(eps, t, mu_tilde[0], O[0])\n"
        "                a = _floor_shaped_round(rng, sa, sb, theta)\n"), (
        "            lead = dp_ts_arm_moved(a, eps, mu_tilde, O, c_o, d_o, f_lo, f_up, bnd)\n",
        "            pass\n")]),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--horizon", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--end-to-end", action="store_true",
                    help="also time the CLI with posterior_draw=max and max-joint against the "
                         "end-to-end floor")
    args = ap.parse_args()
    env = bernoulli([0.75, 0.625, 0.5, 0.375, 0.25]).as_tuple()
    pols = {(name, draw): make_policy(name, posterior_draw=draw)
            for name in ("lazy-dp-ts", "dp-ts") for draw in ("max", "max-joint")}

    def fixed(v):
        return lambda T: np.asarray(v, float)

    def of(name, draw="max"):
        return lambda T: pols[name, draw].kernel_params(T, K)

    kinds = {"all": (baselines._beta_ts, fixed([0.0])), "max": (baselines._beta_ts, fixed([1.0])),
             "max-joint": (baselines._beta_ts, fixed([2.0])),
             "floor-scheme": (_floor, fixed([K - 1.0])), "floor-any": (_floor, fixed([0.0])),
             "lazy-dp-ts max": (type(pols["lazy-dp-ts", "max"]).kernel, of("lazy-dp-ts")),
             "lazy-dp-ts max-joint": (type(pols["lazy-dp-ts", "max"]).kernel,
                                      of("lazy-dp-ts", "max-joint")),
             "dp-ts max": (type(pols["dp-ts", "max"]).kernel, of("dp-ts")),
             "dp-ts max-joint": (type(pols["dp-ts", "max"]).kernel, of("dp-ts", "max-joint")),
             "floor-dp-ts": (_floor_dp_ts, of("dp-ts"))}
    kernels = {"kernel-floor ts-beta": baselines._beta_ts,
               "kernel-floor lazy": type(pols["lazy-dp-ts", "max"]).kernel,
               "kernel-floor dp-ts": type(pols["dp-ts", "max"]).kernel}
    kinds["kernel-floor ts-beta"] = (_production_floor(
        kernels["kernel-floor ts-beta"], _KERNEL_FLOORS["kernel-floor ts-beta"][1]), fixed([1.0]))
    kinds["kernel-floor lazy"] = (_production_floor(
        kernels["kernel-floor lazy"], _KERNEL_FLOORS["kernel-floor lazy"][1]), of("lazy-dp-ts"))
    kinds["kernel-floor dp-ts"] = (_production_floor(
        kernels["kernel-floor dp-ts"], _KERNEL_FLOORS["kernel-floor dp-ts"][1]), of("dp-ts"))

    def once(fn, params, T, seed):
        rng = np.random.default_rng(seed)
        rows = np.zeros((5, DPTS().row_capacity(T, K) + K), np.int64)
        p = params(T)
        c = time.process_time()
        fn(rng, env, T, K, T, p, make_sink(K), rows, np.zeros((2, 0)))
        return time.process_time() - c

    for fn, params in kinds.values():                       # compile
        once(fn, params, 1000, 0)
    times = {k: [] for k in kinds}
    for r in range(args.repeats):
        for k, (fn, params) in kinds.items():
            times[k].append(once(fn, params, args.horizon, r))
    best = {k: min(v) for k, v in times.items()}
    T = args.horizon
    print(f"Beta draw, K = {K}, T = {T:.0e}, best and median of {args.repeats} (CPU, one process, "
          "alternating)")
    for k, v in best.items():
        med = float(np.median(times[k]))
        print(f"  {k:20s} {v / T * 1e9:7.1f} ns a round (median {med / T * 1e9:7.1f})  "
              f"{T / v:10.3g} run-rounds per CPU-second")
    print(f"  max / floor-scheme {best['max'] / best['floor-scheme']:.2f}, "
          f"max / floor-any {best['max'] / best['floor-any']:.2f}, "
          f"all / max {best['all'] / best['max']:.2f}, "
          f"lazy-dp-ts max / floor-any {best['lazy-dp-ts max'] / best['floor-any']:.2f}, "
          f"lazy-dp-ts max-joint / floor-any "
          f"{best['lazy-dp-ts max-joint'] / best['floor-any']:.2f}, "
          f"dp-ts max / floor-dp-ts {best['dp-ts max'] / best['floor-dp-ts']:.2f}, "
          f"dp-ts max-joint / floor-dp-ts {best['dp-ts max-joint'] / best['floor-dp-ts']:.2f}")
    kf = {"max": "kernel-floor ts-beta", "max-joint": "kernel-floor ts-beta",
          "lazy-dp-ts max": "kernel-floor lazy", "lazy-dp-ts max-joint": "kernel-floor lazy",
          "dp-ts max": "kernel-floor dp-ts", "dp-ts max-joint": "kernel-floor dp-ts"}
    print("  against the kernel floors: " + ", ".join(
        f"{k} / {v} {best[k] / best[v]:.2f}" for k, v in kf.items()))
    if args.end_to_end:
        floors = {"ts-beta": min(best["floor-any"], best["kernel-floor ts-beta"]) / T,
                  "lazy-dp-ts": min(best["floor-any"], best["kernel-floor lazy"]) / T,
                  "dp-ts": min(best["floor-dp-ts"], best["kernel-floor dp-ts"]) / T}
        end_to_end(T, args.repeats, floors)


def _cli_cpu(pol: str, draw: str, T: int, out: str) -> float:
    """CPU seconds (user + sys) of one fresh `dpledger run` of this checkout."""
    cmd = [sys.executable, "-m", "dpledger", "run", pol, "--set", f"posterior_draw={draw}",
           "--horizon", str(T), "--runs", "4", "--seed", "0", "--quiet", "--out", out]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   check=True, capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def end_to_end(T: int, repeats: int, floor_round: dict[str, float]) -> None:
    out = os.path.join(tempfile.mkdtemp(prefix="beta-floor-"), "run.json")
    print(f"End to end, posterior_draw=max or max-joint, 4 runs of T = {T:.0e} (CPU of the "
          f"process, best and median of {repeats}, alternating policies); floor = start-up "
          "(T = 1000) + 4·T·(the policy's floor a round: the lower of floor-any, for dp-ts "
          "floor-dp-ts, and its kernel floor)")
    pols = (("ts-beta", "max"), ("ts-beta", "max-joint"), ("lazy-dp-ts", "max"),
            ("lazy-dp-ts", "max-joint"),
            ("dp-ts", "max"), ("dp-ts", "max-joint"))
    for pol in pols:
        _cli_cpu(*pol, 1000, out)                           # compile / load the cache
    start = {p: [] for p in pols}
    full = {p: [] for p in pols}
    for _ in range(repeats):
        for pol in pols:
            start[pol].append(_cli_cpu(*pol, 1000, out))
            full[pol].append(_cli_cpu(*pol, T, out))
    for pol in pols:
        s0, f0 = min(start[pol]), min(full[pol])
        floor = s0 + 4 * T * floor_round[pol[0]]
        print(f"  {pol[0] + ' ' + pol[1]:20s} start-up {s0:5.2f} s  run {f0:6.2f} s (median "
              f"{float(np.median(full[pol])):6.2f})  {4 * T / f0:10.3g} run-rounds per CPU-second  "
              f"floor {floor:5.2f} s ({floor_round[pol[0]] * 1e9:.1f} ns a round)  "
              f"run / floor {f0 / floor:.2f}", flush=True)


if __name__ == "__main__":
    main()
