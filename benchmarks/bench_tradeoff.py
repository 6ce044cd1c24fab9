"""Trade-off-curve figures and the band's coverage (issue 33 §3; docs/audits.md#trade-off-curves).

    python benchmarks/bench_tradeoff.py --figures --trials 100000     # docs/tradeoff-*.png
    python benchmarks/bench_tradeoff.py --coverage --reps 2000        # known curves

``--figures``: white-box audits of ts-gaussian (T = K = 19), dp-ts-ucb (α = 0, T = 41, K = 32)
and jdp-linucb (accounted, T = 8) with the trade-off figure (``dpledger audit --tradeoff``), the
largest μ and ε(δ) the band excludes printed as JSON.  ``--coverage``: N(0,1) vs N(1,1) and
Lap(0,1) vs Lap(1,1), n = 2000 per side, confidence 0.95 and 0.5: how often the band misses
the true curve (at most α by DKW), and the mean excluded μ / ε.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

ROWS = (("ts-gaussian", ["--horizon", "19", "--arms", "19"]),
        ("dp-ts-ucb", ["--set", "alpha=0", "--horizon", "41", "--arms", "32"]),
        ("jdp-linucb", ["--set", "calibration=accounted"]))


def figures(trials: int, outdir: str) -> None:
    from dpledger.cli import main
    for name, extra in ROWS:
        png = os.path.join(outdir, f"tradeoff-{name}.png")
        out = f"/tmp/tradeoff-{name}.json"
        n = trials if name != "jdp-linucb" else min(trials, 20000)
        main(["audit", name, "--mode", "whitebox", *extra, "--trials", str(n), "--tradeoff",
              png, "--quiet", "--out", out])
        j = json.load(open(out))
        print(json.dumps({"policy": name, "trials": n, "certificate": j["certificate"].get(
            "gdp_mu") or j["certificate"].get("pure_epsilon"), "mu_lower": j["mu_lower"],
            "tradeoff": j["tradeoff"]}), flush=True)


def coverage(reps: int) -> None:
    import numpy as np
    from scipy import stats
    from dpledger.audits import tradeoff as tr
    g = np.random.default_rng(2026)
    for kind in ("gaussian", "laplace"):
        for conf in (0.95, 0.5):
            miss, vals = 0, []
            for _ in range(reps):
                if kind == "gaussian":
                    s0, s1 = g.normal(0, 1, 2000), g.normal(1, 1, 2000)
                    c0, c1 = stats.norm(0, 1).cdf, stats.norm(1, 1).cdf
                else:
                    s0, s1 = g.laplace(0, 1, 2000), g.laplace(1, 1, 2000)
                    c0, c1 = stats.laplace(0, 1).cdf, stats.laplace(1, 1).cdf
                b = tr.empirical_band(s0, s1, conf)
                dev = []
                for s, c in ((s0, c0), (s1, c1)):
                    x = np.sort(s)
                    F = c(x)
                    n = x.size
                    dev.append(max(np.max(np.arange(1, n + 1) / n - F),
                                   np.max(F - np.arange(n) / n)))
                miss += dev[0] > b["eta0"] or dev[1] > b["eta1"]
                vals.append(tr.mu_excluded(b) if kind == "gaussian"
                            else tr.epsilon_excluded(b, 0.0))
            print(json.dumps({"mechanism": kind, "true": 1.0, "confidence": conf, "reps": reps,
                              "band_misses": int(miss), "alpha": 1 - conf,
                              "mean_excluded": float(np.mean(vals)),
                              "max_excluded": float(np.max(vals))}), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--figures", action="store_true")
    ap.add_argument("--coverage", action="store_true")
    ap.add_argument("--trials", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--outdir", default=os.path.join(os.path.dirname(__file__), "..", "docs"))
    a = ap.parse_args(argv)
    if a.figures:
        figures(a.trials, a.outdir)
    if a.coverage:
        coverage(a.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
