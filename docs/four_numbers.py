"""Draw docs/four-numbers.png: theorem, certificate, realized and audit of one configuration.

Runs ``dpledger run`` and ``dpledger audit`` for DP-TS-UCB (α = 0.5, K = 2, T = 1000) and puts
their four GDP μ values on one axis.  Usage: ``python docs/four_numbers.py [OUT.png]``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

POLICY, T, K, RUNS, TRIALS = "dp-ts-ucb", 1000, 2, 20, 100_000


def _dpledger(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "dpledger", *args], check=True,
                   stdout=subprocess.DEVNULL)


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_json, audit_json = os.path.join(tmp, "run.json"), os.path.join(tmp, "audit.json")
        _dpledger("run", POLICY, "--means", ",".join(["0.9", "0.6"][:K]), "--horizon", str(T),
                  "--runs", str(RUNS), "--seed", "0", "--out", run_json, "--ledger-out", "none",
                  "--quiet")
        _dpledger("audit", POLICY, "--mode", "whitebox", "--trials", str(TRIALS), "--horizon",
                  str(T), "--arms", str(K), "--seed", "0", "--out", audit_json, "--quiet")
        with open(run_json, encoding="utf-8") as f:
            priv = json.load(f)["privacy"]
        with open(audit_json, encoding="utf-8") as f:
            audit = json.load(f)
    values = [("audit (95 % lower bound)", audit["mu_lower"]),
              ("realized (this run's worst reward)", priv["realized"]["gdp_mu"]),
              ("certificate (worst case, the guarantee)", priv["certificate"]["gdp_mu"]),
              ("theorem (the paper's bound)", priv["theorem"]["gdp_mu"])]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.0, 2.6))
    colours = ["tab:purple", "tab:green", "tab:blue", "tab:grey"]
    top = max(v for _, v in values)
    for i, ((name, v), c) in enumerate(zip(values, colours, strict=True)):
        ax.plot([v], [0], marker="o", ms=10, color=c, zorder=3)
        ax.annotate(f"{name}\nμ = {v:.3g}", (v, 0), xytext=(0, 18 if i % 2 == 0 else -34),
                    textcoords="offset points", ha="center", fontsize=8, color=c)
    ax.axhline(0, color="black", lw=0.8)
    ax.axvspan(0, values[0][1], color="tab:purple", alpha=0.08)
    ax.set_xlim(0, top * 1.15)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    ax.set_xlabel("GDP μ of the worst-off reward (larger = less private)")
    ax.set_title(f"{POLICY}, K = {K}, T = {T}: the four numbers of one configuration", fontsize=9)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print("\n".join(f"{name}: {v!r}" for name, v in values))
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                             "four-numbers.png"))
