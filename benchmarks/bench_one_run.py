"""One-run audits (issue 33 §1; docs/audits.md#one-run-audits).

    python benchmarks/bench_one_run.py --bounds --sizes 1000,10000       # the table
    python benchmarks/bench_one_run.py --planted                         # dp-klucb renoise
    python benchmarks/bench_one_run.py --false-alarms --seeds 1000       # no false alarm
    python benchmarks/bench_one_run.py --betting-false-alarms --seeds 1000   # --sequential
    python benchmarks/bench_one_run.py --gaussian --sizes 1000,10000     # Gaussian-mean WB
    python benchmarks/bench_one_run.py --betting-policy-false-alarms --seeds 1000

``--bounds``: white-box one-run bounds at ε = 1 (μ for jdp-linucb, accounted calibration) for
lazy-dp-ts, adap-ucb, dp-ucb and jdp-linucb at each m, seed 0, 95 %: the bound, the
certificate, the method's ceiling at m, and the two fractions.  ``--planted``: dp-klucb at
ε = 0.5, the paper's mechanism and renoise-cumulative, white- and black-box, against the
stated 0.5.  ``--false-alarms``: S seeds of each correct policy (m = 100, confidence 0.95):
how often the bound exceeds the certificate (at most α in expectation; the count and its
Binomial(S, α) 99.9 % quantile are printed).  ``--gaussian``: the white-box one-run bounds of
the Gaussian-mean policies (ts-gaussian, mts-gaussian b = 1, dp-ts-ucb; their certificates in
μ) at each m; a size whose capture does not fit is printed as refused.
``--betting-false-alarms`` also runs the GDP form on N(0, 1) against N(μ, 1).
``--betting-policy-false-alarms``: S seeds of the sequential (betting) audit of correct policies
— white-box Lazy-DP-TS (ε 1) and DP-TS-UCB (α = 0, T = 41, K = 32: μ 3) — each stopping at its
first contradiction of the certificate (≤ 2000 trials per side).  CPU seconds (user + sys of this process) per
entry; the machine is shared, wall times are noisy.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from dpledger.audits.one_run import audit_one_run                       # noqa: E402
from dpledger.audits.one_run_contextual import audit_one_run_contextual  # noqa: E402
from dpledger.policies.registry import make_policy                       # noqa: E402

POLICIES = ("lazy-dp-ts", "adap-ucb", "dp-ucb", "jdp-linucb")
GAUSSIAN = (("ts-gaussian", {}), ("mts-gaussian", {"b": 1}), ("dp-ts-ucb", {}))
MAX_POSTERIOR_READS = 2 * 10 ** 7      # --gaussian skips a larger TS-Gaussian capture (480 MB)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _one(name: str, m: int, seed: int = 0, confidence: float = 0.95, **kw):
    if name == "jdp-linucb":
        return audit_one_run_contextual(make_policy(name, calibration="accounted"),
                                        canaries=m, seed=seed, confidence=confidence)
    return audit_one_run(make_policy(name, epsilon=1.0, **kw), canaries=m, seed=seed,
                         confidence=confidence)


def _row(r, cpu: float) -> dict:
    j = r.to_json()
    return {"policy": j["policy"]["name"], "m": j["counts"]["canaries"],
            "horizon": j["design"]["horizon"], "arms": j["design"]["arms"],
            "currency": j["currency"], "lower": j["lower"], "certified": j["certified"],
            "ratio": j["ratio"], "ceiling": j["ceiling"], "ratio_of_ceiling": j["ratio_of_ceiling"],
            "guesses": j["counts"]["guesses"], "correct": j["counts"]["correct"],
            "claim": j.get("claim"), "mode": j["mode"], "cpu_s": round(cpu, 1),
            "releases_per_canary": j.get("releases_per_canary") or j.get("solo_nodes_per_canary")}


def bounds(sizes, out):
    rows = []
    for m in sizes:
        for name in POLICIES:
            c0 = _cpu()
            r = _one(name, m)
            rows.append(_row(r, _cpu() - c0))
            print(json.dumps(rows[-1]), flush=True)
    print("\n| policy | m | T, K | certificate | bound | / certificate | ceiling at m | / ceiling "
          "| right / guesses | CPU s |\n|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        cur = "μ" if x["currency"] == "mu" else "ε"
        print(f"| {x['policy']} | {x['m']} | {x['horizon']}, {x['arms']} | {cur} "
              f"{x['certified']:.3g} | {x['lower']:.3f} | {x['ratio']:.2f} | {x['ceiling']:.2f} "
              f"| {x['ratio_of_ceiling']:.2f} | {x['correct']} / {x['guesses']} | {x['cpu_s']} |")
    return rows


def gaussian(sizes):
    from dpledger.errors import DpledgerError
    from dpledger.audits.one_run import GAUSSIAN_POSTERIOR, one_run_design
    from dpledger.resources import fmt_bytes
    rows = []
    for m in sizes:
        for name, kw in GAUSSIAN:
            d = one_run_design(make_policy(name, **kw), m)
            if name in GAUSSIAN_POSTERIOR and d.horizon * d.arms > MAX_POSTERIOR_READS:
                # the kernel's full capture is one (θ, mean, σ) column per round and arm
                need = 24 * d.horizon * d.arms
                rows.append({"policy": name, "params": kw, "m": m,
                             "skipped": f"full capture of T·K = {d.horizon * d.arms} reads "
                                        f"({fmt_bytes(need)}) on a shared machine"})
                print(json.dumps(rows[-1]), flush=True)
                continue
            c0 = _cpu()
            try:
                r = audit_one_run(make_policy(name, **kw), canaries=m, seed=0)
            except DpledgerError as exc:
                rows.append({"policy": name, "params": kw, "m": m, "refused": str(exc)})
                print(json.dumps(rows[-1]), flush=True)
                continue
            x = _row(r, _cpu() - c0)
            x["params"] = kw
            rows.append(x)
            print(json.dumps(x), flush=True)
    return rows


def betting_policy_false_alarms(seeds, confidence=0.95):
    """Sequential (betting) audits of correct policies, each stopping at its first
    contradiction of the certificate (≤ 2000 trials per side)."""
    from scipy.stats import binom
    from dpledger.audits.policy import audit_policy
    rows = []
    for name, kw, design in (("lazy-dp-ts", {"epsilon": 1.0}, {}),
                             ("dp-ts-ucb", {"alpha": 0.0}, {"T": 41, "K": 32})):
        c0, hits, lows, ns = _cpu(), 0, [], []
        for s in range(seeds):
            j = audit_policy(make_policy(name, **kw), trials=100, max_trials=2000,
                             mode="whitebox", betting=True, seed=s, confidence=confidence,
                             **design).to_json()
            hits += j["sequential"]["stop_reason"] == "contradicted"
            lows.append(j["sequential"]["lower"])
            ns.append(j["sequential"]["trials_drawn"])
        x = {"policy": name, "params": kw, **design, "seeds": seeds,
             "currency": j["ratio_currency"], "certified": j["sequential"]["claim"],
             "contradicted": hits,
             "binomial_999_quantile": int(binom.ppf(0.999, seeds, 1 - confidence)),
             "mean_lower": sum(lows) / seeds, "max_lower": max(lows),
             "median_trials": sorted(ns)[seeds // 2], "cpu_s": round(_cpu() - c0, 1)}
        rows.append(x)
        print(json.dumps(x), flush=True)
    return rows


def planted(m, out):
    rows = []
    for mech in ("phase-sums", "renoise-cumulative"):
        for mode in ("whitebox", "blackbox"):
            c0 = _cpu()
            r = audit_one_run(make_policy("dp-klucb", epsilon=0.5, mechanism=mech),
                              canaries=m, mode=mode, seed=0, claim=0.5)
            x = _row(r, _cpu() - c0)
            x["mechanism"] = mech
            rows.append(x)
            print(json.dumps(x), flush=True)
    return rows


def false_alarms(seeds, out, m=100, confidence=0.95):
    from scipy.stats import binom
    rows = []
    for name in ("lazy-dp-ts", "adap-ucb", "dp-ucb", "dp-klucb"):
        over, lows, c0 = 0, [], _cpu()
        for s in range(seeds):
            r = _one(name, m, seed=s, confidence=confidence)
            lows.append(r.lower)
            over += r.lower > r.certified * (1 + 1e-12)
        q = int(binom.ppf(0.999, seeds, 1 - confidence))
        x = {"policy": name, "seeds": seeds, "m": m, "confidence": confidence,
             "over_certificate": int(over), "binomial_999_quantile": q,
             "max_lower": max(lows), "mean_lower": sum(lows) / len(lows),
             "certified": r.certified, "cpu_s": round(_cpu() - c0, 1)}
        rows.append(x)
        print(json.dumps(x), flush=True)
    return rows


def betting_false_alarms(seeds, confidence=0.95):
    """The betting sequential audit (audits/betting.py) of a correct Laplace mechanism (ε = 1,
    claim 1), each audit stopping at the first contradiction (≤ 2000 trials per side): how
    often it is contradicted (≤ α by Ville's inequality), and how often ε = 2 is caught."""
    import numpy as np
    from scipy.stats import binom
    from dpledger.audits.betting import betting_audit

    def lap(eps, seed):
        def sample(side, start, n):
            return np.random.default_rng([seed, side]).laplace(float(side), 1 / eps,
                                                               start + n)[start:]
        return sample
    def gauss(mu, seed):
        def sample(side, start, n):
            return np.random.default_rng([seed, side, 7]).normal(float(side) * mu, 1.0,
                                                                 start + n)[start:]
        return sample
    rows = []
    for cur, true in (("epsilon", 1.0), ("epsilon", 2.0), ("mu", 1.0), ("mu", 2.0)):
        c0, hits, lows, ns = _cpu(), 0, [], []
        for s in range(seeds):
            r = betting_audit((lap if cur == "epsilon" else gauss)(true, s), first=100,
                              max_trials=2000, claim=1.0, target=None, confidence=confidence,
                              currency=cur)
            hits += r.stop_reason == "contradicted"
            lows.append(r.lower)
            ns.append(r.trials)
        x = {"currency": cur, "true": true, "claim": 1.0, "seeds": seeds, "contradicted": hits,
             "binomial_999_quantile": int(binom.ppf(0.999, seeds, 1 - confidence)),
             "mean_lower": sum(lows) / seeds, "median_trials": sorted(ns)[seeds // 2],
             "max_trials_used": max(ns), "cpu_s": round(_cpu() - c0, 1)}
        rows.append(x)
        print(json.dumps(x), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bounds", action="store_true")
    ap.add_argument("--planted", action="store_true")
    ap.add_argument("--false-alarms", action="store_true")
    ap.add_argument("--betting-false-alarms", action="store_true")
    ap.add_argument("--betting-policy-false-alarms", action="store_true")
    ap.add_argument("--gaussian", action="store_true")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--canaries", type=int, default=1000, help="--planted: m")
    ap.add_argument("--out", default=None, help="JSON of every row (default: none)")
    a = ap.parse_args(argv)
    res = {}
    if a.bounds:
        res["bounds"] = bounds([int(s) for s in a.sizes.split(",")], a.out)
    if a.planted:
        res["planted"] = planted(a.canaries, a.out)
    if a.false_alarms:
        res["false_alarms"] = false_alarms(a.seeds, a.out)
    if a.betting_false_alarms:
        res["betting_false_alarms"] = betting_false_alarms(a.seeds)
    if a.betting_policy_false_alarms:
        res["betting_policy_false_alarms"] = betting_policy_false_alarms(a.seeds)
    if a.gaussian:
        res["gaussian"] = gaussian([int(x) for x in a.sizes.split(",")])
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
