"""The full audit of every private policy (issue #6, item 4): white-box and black-box lower
bounds next to each certificate, with audit / certificate ratios.

    python benchmarks/audit_all.py [--trials 100000] [--trials-blackbox 100000] [--workers 2]
                                   [--policies a,b,...] [--out audit_all.json]
                                   [--sizes 100000,1000000] [--modes whitebox,blackbox]

With ``--sizes`` (issue 14's table) every policy is audited at each size, white- and black-box,
and the table gives the ceiling (the largest bound that many trials can certify, zero errors)
beside each ratio, so a reader sees whether a ratio is limited by the policy or by n.
Horizons: T = 1000, except DP-SE (T = 3000, its first epoch must complete) and private TS
(dp-ts-mt, T = 10000: its first gap batch needs K·m₀ = 2·⌈192·2·ln T⌉ rounds).

Defaults (SPEC §6): the default pair of each policy (witness row t* from 0 to 1 for every arm,
the policy's adversarial table), K = 2, T = 1000 (DP-SE: T = 3000, the smallest round count at
which its first epoch completes with β = 1/T, so that it releases anything), seed 0, 95 %
confidence, selection fraction 0.1.  Laplace-family certificates are audited in ε (δ = 0),
Gaussian ones in μ.  Writes one JSON object {policy: {whitebox: audit.json, blackbox: audit.json}}
(atomically) and prints a table; a ratio above 1 is a bug found (exit 1).
"""
from __future__ import annotations

import argparse
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100_000, help="white-box trials per side")
    ap.add_argument("--trials-blackbox", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--policies", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="audit_all.json")
    ap.add_argument("--sizes", default=None, help="comma-separated trials per side (overrides "
                                                   "--trials and --trials-blackbox)")
    ap.add_argument("--modes", default="whitebox,blackbox")
    ap.add_argument("--horizon", type=int, default=None,
                    help="T for every listed policy (e.g. 19: TS-Gaussian's μ = 3)")
    args = ap.parse_args(argv)

    from dpledger.accounting.schema import write_json_atomic
    from dpledger.audits.policy import audit_policy
    from dpledger.errors import DpledgerError
    from dpledger.policies.registry import available, make_policy, policy_class

    names = args.policies.split(",") if args.policies else [
        n for n in available() if policy_class(n).private]
    results, rows, bad = {}, [], False
    modes = [m for m in args.modes.split(",") if m]
    if args.sizes:
        sizes = [int(float(x)) for x in args.sizes.split(",") if x]
        plan = [(m, n) for n in sizes for m in modes]
    else:
        plan = [(m, n) for m, n in (("whitebox", args.trials), ("blackbox", args.trials_blackbox))
                if m in modes]
    for name in names:
        T = args.horizon or {"dp-se": 3000, "dp-ts-mt": 10000}.get(name, 1000)
        results[name] = {}
        for mode, trials in plan:
            t = time.perf_counter()
            try:
                r = audit_policy(make_policy(name), trials=trials, mode=mode, T=T, seed=args.seed,
                                 workers=args.workers)
            except DpledgerError as exc:
                results[name][mode] = {"status": f"skipped:{exc}"}
                rows.append((name, mode, T, trials, None, None, None, None, str(exc)[:60]))
                sys.stderr.write(f"{name:18s} {mode:9s} skipped: {exc}\n")
                continue
            j = r.to_json()
            results[name][f"{mode}@{trials}" if args.sizes else mode] = j
            dt = time.perf_counter() - t
            bad |= bool(r.violation)
            rows.append((name, mode, T, trials, r.currency, r.lower, r.certified, r.ratio,
                         j.get("ceiling"),
                         f"{j['score']}/{j['counts']['score']} {j['counts']['direction']} "
                         f"{j['counts']['threshold']:.4g}; {dt:.0f}s"))
            sys.stderr.write(f"{name:18s} {mode:9s} {r.currency:7s} lower {r.lower:.4f} "
                             f"cert {r.certified} ratio {r.ratio} [{dt:.0f}s]\n")
            write_json_atomic(args.out, results)
    print(f"| {'policy':16s} | {'mode':8s} | {'T':>5s} | {'trials':>7s} | {'cur':3s} | "
          f"{'lower':>7s} | {'cert':>7s} | {'ratio':>6s} | {'ceiling':>7s} | score, event; time |")
    print("|" + "|".join(["---"] * 10) + "|")
    for name, mode, T, trials, cur, low, cert, ratio, ceil, note in rows:
        f = (lambda v: "-" if v is None else f"{v:.4f}")
        cur = {"epsilon": "ε", "mu": "μ"}.get(cur, "-")
        print(f"| {name:16s} | {mode:8s} | {T:5d} | {trials:7d} | {cur:3s} | {f(low):>7s} | "
              f"{f(cert):>7s} | {f(ratio):>6s} | {f(ceil):>7s} | {note} |")
    write_json_atomic(args.out, results)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
