"""Audit the contextual releases and the private contextual policies, and write the rows of
the audit table (README "Audits against the certificates", docs/audits.md).

    python benchmarks/audit_contextual.py --sizes 100000,1000000 --out ctx_audits.json \\
        --markdown ctx_table.md
    python benchmarks/audit_contextual.py --table-only --out ctx_audits.json --markdown t.md

Releases: ``dpledger.audits.mechanisms.audit_spec`` of one spec each (drawn by the policies'
compiled samplers, :mod:`dpledger.audits.vector_releases`).  Policies: ``dpledger.audits.
contextual.audit_contextual`` on the built-in pair (white-box T = 8, black-box T = 64, d = 2,
K = 2).  Seed 0, 95 %, selection fraction 0.1.  Each entry is *audit / certificate (≤ ceiling
/ certificate)*; a ratio above 1 is marked **VIOLATION** and the exit status is 1.  The JSON
is rewritten atomically after every audit and ``--merge`` keeps the entries already there.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

RELEASES = {
    "gaussian_vector (d = 6)": "gaussian_vector:sigma=1,sensitivity=1,dim=6",
    "gaussian_sym_matrix (p = 7)": "gaussian_sym_matrix:sigma=2,sensitivity=2.8284271247461903,dim=7",
    "gaussian_sym_matrix (p = 7, 2 blocks)":
        "gaussian_sym_matrix:sigma=2,sensitivity=2.8284271247461903,dim=7,blocks=2",
    "laplace_vector (d = 10)": "laplace_vector:scale=2,sensitivity=2,dim=10",
    "wishart (p = 7, k = 200)": "wishart:dim=7,k=200,bound=1.4142135623730951,delta=0.01",
}
POLICIES = {
    "jdp-linucb (accounted)": ("jdp-linucb", {"calibration": "accounted"}),
    "jdp-linucb (paper)": ("jdp-linucb", {}),
    "jdp-linucb (wishart, accounted)": ("jdp-linucb", {"mode": "wishart",
                                                        "calibration": "accounted"}),
    "dp-linucb-mt": ("dp-linucb-mt", {}),
    "dp-linucb-mt (WB: T = 1)": ("dp-linucb-mt", {}, 1),
    "dp-lints-mt": ("dp-lints-mt", {}),
    "reward-dp-linucb": ("reward-dp-linucb", {}),
    # issue 32: one release per record (audits/contextual_episodes.py)
    "episode-linucb": ("episode-linucb", {}),
    "adac-oful": ("adac-oful", {}),
}
BLACKBOX = ("jdp-linucb (accounted)", "dp-linucb-mt", "dp-lints-mt", "reward-dp-linucb")


def _audit(row: str, mode: str, n: int) -> dict:
    if row in RELEASES:
        from dpledger.audits.mechanisms import audit_spec
        return audit_spec([RELEASES[row]], n).to_json()
    from dpledger.audits.contextual import audit_contextual
    from dpledger.policies.registry import make_policy
    name, params, *T = POLICIES[row]
    return audit_contextual(make_policy(name, **params), trials=n, mode=mode,
                            T=T[0] if T else None).to_json()


def _cert_text(j: dict) -> str:
    c = j["certificate"]
    if c.get("approx"):
        return f"ε {c['approx']['epsilon']:.3g} at δ {c['approx']['delta']:g}"
    if j["ratio_currency"] == "mu":
        return f"μ {c['gdp_mu']:.3g}"
    return f"ε {c['pure_epsilon']:.3g}"


def _entry(e: dict | None) -> str:
    if e is None:
        return "–"
    j = e["audit"]
    ceil = j["ceiling"]
    c = j["certificate"]
    certified = (c["approx"]["epsilon"] if c.get("approx") else
                 c["gdp_mu"] if j["ratio_currency"] == "mu" else c["pure_epsilon"])
    flag = " **VIOLATION**" if j.get("violation") else ""
    return f"{int(j['ratio'] * 100) / 100:.2f} (≤ {ceil / certified:.3g}){flag}"


def table(results: dict, sizes: list[int]) -> str:
    cols = [(m, n) for n in sizes for m in ("whitebox", "blackbox")]
    head = "| row | T | certificate | " + " | ".join(
        f"{'WB' if m == 'whitebox' else 'BB'} {n:.0e}".replace("e+0", "e") for m, n in cols) \
        + " | note |"
    lines = [head, "|" + "---|" * (len(cols) + 4)]
    for row, r in results.items():
        ents = r["entries"]
        any_j = next(iter(ents.values()))["audit"]
        T = "–" if any_j.get("mode") == "mechanism" else (
            f"{any_j['horizon']} (BB 64)" if any(k.startswith("blackbox") for k in ents)
            else f"{any_j['horizon']}")
        note = []
        for key in ("whitebox", "blackbox"):
            e = next((v for k, v in ents.items() if k.startswith(key)), None)
            if e and e["audit"].get("ratio_limit") is not None:
                note.append(f"{'WB' if key == 'whitebox' else 'BB'} limit "
                            f"{e['audit']['ratio_limit']:.3f}")
            if e and e["audit"].get("pair_exact_ratio") is not None:
                note.append(f"WB pair exact {e['audit']['pair_exact_ratio']:.3f}")
        m = next((v for v in ents.values() if v["audit"].get("pair_exact_epsilon")), None)
        if m:
            ex = m["audit"]["pair_exact_epsilon"]
            note.append(f"pair's exact ε {ex:.3g} ({ex / m['audit']['certificate']['approx']['epsilon']:.3f})")
        lines.append(f"| {row} | {T} | {_cert_text(any_j)} | "
                     + " | ".join(_entry(ents.get(f"{m}@{n}")) if not (
                         row in RELEASES and m == "blackbox") else "–" for m, n in cols)
                     + f" | {'; '.join(note)} |")
    return "\n".join(lines) + "\n"


def _write(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--out", default="ctx_audits.json")
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--merge", action="store_true")
    ap.add_argument("--rows", default=None, help="row labels separated by ; (default: all)")
    ap.add_argument("--modes", default="whitebox,blackbox")
    ap.add_argument("--table-only", action="store_true")
    a = ap.parse_args(argv)
    unknown = [r for r in (a.rows.split(";") if a.rows else []) if r not in RELEASES
               and r not in POLICIES]
    if unknown:
        ap.error(f"unknown rows: {unknown}; known: {list(RELEASES) + list(POLICIES)}")
    sizes = [int(float(s)) for s in a.sizes.split(",")]
    results = {}
    if (a.merge or a.table_only) and os.path.exists(a.out):
        with open(a.out) as f:
            results = json.load(f)
    if not a.table_only:
        rows = list(RELEASES) + list(POLICIES) if a.rows is None else a.rows.split(";")
        for n in sizes:
            for row in rows:
                for mode in a.modes.split(","):
                    if mode == "blackbox" and row not in BLACKBOX:
                        continue
                    if row in RELEASES and mode == "blackbox":
                        continue
                    t0 = time.monotonic()
                    j = _audit(row, mode, n)
                    dt = time.monotonic() - t0
                    results.setdefault(row, {"entries": {}})["entries"][f"{mode}@{n}"] = {
                        "audit": j, "seconds": dt}
                    _write(a.out, results)
                    print(f"{row} {mode} {n}: ratio {j['ratio']} [{dt:.0f}s]", file=sys.stderr)
    all_sizes = sorted({int(k.split("@")[1]) for r in results.values() for k in r["entries"]})
    md = table(results, all_sizes)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)
    else:
        sys.stdout.write(md)
    bad = any(e["audit"].get("violation") for r in results.values() for e in r["entries"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
