"""P5 of docs/design.md#performance-targets: per-reward accounting cost, and conversions, next to
dp-accounting.

    python benchmarks/bench_accounting.py [--rewards 1000000] [--releases 1000000]
                                          [--repeats 5] [--pld-n 1000] [--seed 0]

1. Per-reward Σμ² and its maximum for T rewards under R Gaussian releases over random ranges
   [start, stop) of one stream: ``RewardLedger.add_growing_prefix`` (ingest), then
   ``piece_totals()`` and the max (totals).  Cold = the first run in this process; warm = the
   median of the next ``--repeats`` runs on fresh ledgers.  Target ≤ 100 ms.  The maximum is
   checked against an independent numpy difference array.
2. GDP μ → ε(δ) and RDP → ε(δ) conversions, per call (target ≤ 1 ms each).
3. dp-accounting's PLDAccountant on ``--pld-n`` heterogeneous Gaussians (σ ~ U(5, 50)), composed
   one event at a time with value_discretization_interval 1e-3, timed and extrapolated linearly
   to R releases (a lower bound: each compose gets dearer as the support widens).

4. Huge counts (issue 13): ``compose`` of 1e9 and 1e12 copies of one release — the pure (KOV),
   GDP and RDP accountants at four δ, and the whole privacy block, time (wall and CPU) and
   peak traced memory; target < 1 s and < 200 MB each.

Timings are wall clock on this machine (CPU time where said); nothing here is a test.
"""
from __future__ import annotations

import functools
import argparse
import math
import statistics
import time

import numpy as np


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def ledger_totals(rewards: int, releases: int, seed: int):
    """One full P5 pass on a fresh ledger: (max Σμ², argmax index, ingest s, totals s)."""
    from dpledger.accounting.ledger import RewardLedger

    rng = np.random.default_rng(seed)
    a = rng.integers(0, rewards, size=releases)
    b = rng.integers(0, rewards, size=releases)
    starts = np.minimum(a, b)
    stops = np.maximum(a, b) + 1
    mu2 = rng.uniform(1e-6, 1e-4, size=releases)
    counts = np.ones(releases, dtype=np.int64)

    led = RewardLedger()
    _, t_ingest = _timed(lambda: led.add_growing_prefix(0, 0, stops, counts, mu2, starts=starts))

    def totals():
        pt = led.piece_totals()
        p = int(np.argmax(pt.mu2_inline))
        return float(pt.mu2_inline[p]), int(pt.start[p]), pt

    (top, where, pt), t_totals = _timed(totals)

    # independent check: a dense difference array over the T rewards
    diff = np.zeros(rewards + 1)
    np.add.at(diff, starts, mu2)
    np.add.at(diff, stops, -mu2)
    dense = np.cumsum(diff)[:rewards]
    ok = math.isclose(top, float(dense.max()), rel_tol=1e-9) and math.isclose(
        float(dense[where]), float(dense.max()), rel_tol=1e-9)
    return top, where, t_ingest, t_totals, ok


def conversions(repeats: int = 2000):
    from dpledger.accounting.accountants import ACCOUNTANTS
    from dpledger.accounting.composition import Composition
    from dpledger.accounting.gdp import gdp_epsilon
    from dpledger.accounting.rdp import rdp_to_epsilon
    from dpledger.accounting.releases import GaussianRelease, LaplaceRelease

    rng = np.random.default_rng(1)
    mus = 10 ** rng.uniform(-2, 2, size=repeats)
    deltas = 10 ** rng.uniform(-12, -3, size=repeats)
    gdp_epsilon(1.0, 1e-6)
    _, t_gdp = _timed(lambda: [gdp_epsilon(float(m), float(d)) for m, d in zip(mus, deltas,
                                                                               strict=True)])

    comp = Composition.of([(GaussianRelease.from_mu(0.3), 50), (LaplaceRelease.from_epsilon(0.2), 20)])
    curve = comp.rdp()
    rdp_to_epsilon(curve, 1e-6)
    _, t_rdp_curve = _timed(lambda: [rdp_to_epsilon(curve, float(d)) for d in deltas])
    acc = ACCOUNTANTS["rdp"]
    n_full = max(1, repeats // 10)
    _, t_rdp_full = _timed(lambda: [acc.epsilon(comp, float(d)) for d in deltas[:n_full]])
    return t_gdp / repeats, t_rdp_curve / repeats, t_rdp_full / n_full


def dp_accounting_pld(n: int, seed: int = 0):
    from dp_accounting import dp_event as E
    from dp_accounting.pld import pld_privacy_accountant as P

    from dpledger.accounting.gdp import gdp_epsilon

    sigmas = np.random.default_rng(seed).uniform(5.0, 50.0, size=n)
    acc = P.PLDAccountant(value_discretization_interval=1e-3)

    def run():
        for s in sigmas:
            acc.compose(E.GaussianDpEvent(noise_multiplier=float(s)))
        return acc.get_epsilon(1e-6)

    eps_pld, t = _timed(run)
    mu = math.sqrt(float(np.sum(1.0 / sigmas ** 2)))
    return t, eps_pld, gdp_epsilon(mu, 1e-6), mu


def huge_counts():
    """[(spec, wall s, cpu s, peak MB of the accountants; wall s of the privacy block)]."""
    import tracemalloc

    from dpledger.accounting import accountants as A
    from dpledger.accounting.composition import Composition
    from dpledger.accounting.releases import parse_release_spec
    from dpledger.accounting.schema import DEFAULT_DELTAS, privacy_block

    privacy_block([Composition.of([parse_release_spec("laplace:eps=1,count=3")])])   # imports
    rows = []
    for n in ("1e9", "1e12"):
        for spec in ("laplace:eps=1", "pure:eps=0.1", "gaussian:sigma=2"):
            comp = Composition.of([parse_release_spec(f"{spec},count={n}")])

            def accountants(comp=comp):
                A._VALUES.clear()
                A._PURE_CACHE.clear()
                return [A.ACCOUNTANTS[a].epsilon(comp, d) for a in ("pure", "gdp", "rdp")
                        if A.ACCOUNTANTS[a].supports(comp) == "ok" for d in DEFAULT_DELTAS]

            c0, w0 = time.process_time(), time.perf_counter()
            accountants()
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            tracemalloc.start()
            accountants()
            peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
            tracemalloc.stop()
            A._VALUES.clear()
            A._PURE_CACHE.clear()
            _, t_block = _timed(functools.partial(privacy_block, [comp]))
            rows.append((f"{spec},count={n}", wall, cpu, peak, t_block))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rewards", type=int, default=1_000_000)
    ap.add_argument("--releases", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pld-n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    print(f"P5 accounting benchmark: T = {args.rewards:.0e} rewards, {args.releases:.0e} Gaussian "
          f"releases over random ranges (one stream)\n")
    cold = ledger_totals(args.rewards, args.releases, args.seed)
    warm = [ledger_totals(args.rewards, args.releases, args.seed + 1 + i) for i in range(args.repeats)]
    w_ing = statistics.median(w[2] for w in warm)
    w_tot = statistics.median(w[3] for w in warm)
    checks = all(x[4] for x in [cold] + warm)
    t_gdp, t_rdp_curve, t_rdp_full = conversions()

    rows = [
        ("ledger ingest (add_growing_prefix)", cold[2], w_ing, None),
        ("per-reward sum mu2 + max (piece_totals)", cold[3], w_tot, None),
        ("P5 total: ingest + totals + max", cold[2] + cold[3], w_ing + w_tot, 0.100),
        ("GDP mu -> eps(delta), per call", None, t_gdp, 0.001),
        ("RDP curve -> eps(delta), per call", None, t_rdp_curve, 0.001),
        ("RDP accountant (curve + conversion), per call", None, t_rdp_full, 0.001),
    ]
    print(f"{'what':<48}{'cold':>11}{'warm':>11}{'target':>10}  ok")
    for name, c, w, target in rows:
        cs = f"{c * 1e3:8.2f} ms" if c is not None else f"{'':>11}"
        ws = f"{w * 1e3:8.3f} ms"
        ts = f"{target * 1e3:6.0f} ms" if target else f"{'':>9}"
        ok = "" if target is None else ("yes" if w <= target else "NO")
        print(f"{name:<48}{cs:>11}{ws:>11}{ts:>10}  {ok}")
    print(f"\nmax per-reward mu2 = {cold[0]:.6g} at index {cold[1]} (mu = {math.sqrt(cold[0]):.6g}); "
          f"matches an independent dense difference array: {checks}")

    print("\nhuge counts: pure/GDP/RDP accountants at 4 deltas (target < 1 s, < 200 MB); "
          "whole privacy block incl. PLD status")
    for spec, wall, cpu, peak, t_block in huge_counts():
        ok = "yes" if wall < 1.0 and peak < 200 else "NO"
        print(f"  {spec:<32} {wall * 1e3:8.1f} ms wall {cpu * 1e3:8.1f} ms cpu {peak:7.1f} MB  "
              f"block {t_block * 1e3:8.1f} ms  {ok}")

    if args.pld_n > 0:
        t, eps_pld, eps_exact, mu = dp_accounting_pld(args.pld_n, args.seed)
        per = t / args.pld_n
        extrap = per * args.releases
        print(f"\ndp-accounting PLDAccountant, {args.pld_n} heterogeneous Gaussians "
              f"(sigma ~ U(5, 50)), compose one at a time, interval 1e-3:")
        print(f"  {t:.2f} s ({per * 1e3:.2f} ms per release); extrapolated to "
              f"{args.releases:.0e} releases: >= {extrap:.0f} s ({extrap / 3600:.1f} h)")
        print(f"  eps(1e-6): dp-accounting {eps_pld:.6f}, dpledger GDP (exact, mu = {mu:.6f}) "
              f"{eps_exact:.6f}")
        print(f"  dpledger per-reward totals for {args.releases:.0e} releases: {w_ing + w_tot:.3f} s "
              f"warm (one ledger, all T rewards), {extrap / (w_ing + w_tot):.0f}x less")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
