"""Audit every private policy, white- and black-box, and write the table of audit / certificate
with the statistical ceiling beside each entry (issue 14, "what must be shown").

    python benchmarks/audit_all.py --sizes 100000,1000000 --markdown audit_table.md
    python benchmarks/audit_all.py --sizes 100000 --policies dp-ts,lazy-dp-ts --merge
    python benchmarks/audit_all.py --table-only --markdown audit_table.md     # from the JSON

Every row of :data:`POLICY_CONFIGS` (the thirteen private policies, plus extra rows such as
TS-Gaussian at T = 19) is audited in each mode at each size (trials per side) with
``dpledger.audits.policy.audit_policy``: its default pair (docs/design.md#audits) or the row's pair
options, K = 2, seed 0, 95 % confidence, selection fraction 0.1.  Laplace-family certificates are
audited in ε (δ = 0), Gaussian ones in μ.  A private policy in the registry that has no row is
audited with the defaults (and named on stderr), so no policy is left out silently.

Output: a JSON object ``{row: {"policy", "T", "K", "params", "entries": {"whitebox@100000":
{"audit": audit.json, "seconds": s}, …}}}`` written atomically after every audit (``--merge``
keeps the entries already in ``--out`` and replaces only those re-run, so a table can be built
size by size), and a markdown table — one line per row, one column per (mode, size), each
entry ``ratio (≤ c)``: audit / certificate and, beside it, c = ceiling / certificate, the
largest ratio that many trials can show with zero errors (``audits.stats.ceiling``), so a reader
sees whether a ratio is limited by the policy or by n.  A ratio above 1 is a bug found: it is
marked **VIOLATION** and the exit status is 1.

``--budget S`` skips (and labels so) an audit whose time, extrapolated from two small pilot
audits of the same configuration, exceeds S seconds.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

# ---- per-policy configuration: one row per table line ------------------------------------------
# Key: the row label (a policy name, or any label with "policy": name).  Every field is optional:
#   policy    registered policy name (default: the label)
#   T, K      horizon and arms (default 1000, 2)
#   params    make_policy keyword arguments (default: the policy's defaults, ε = 1)
#   whitebox, blackbox   overrides for that mode only: audit_policy keywords (design_options:
#             pair options passed to audits.pairs.default_pair; score, stop_at, whitebox_score,
#             T, K) and "params" (merged over the row's params)
#   modes     the modes this row is audited in (default both)
#   note      one line for the table's note column
# Helpers adding a design or a capture for a policy extend its row here (and nothing else).
# The white-box configurations of ``audits.pairs.WHITEBOX_CONFIGS`` (those at which the
# trajectory attains the worst candidate within the ceiling) are added as white-box-only rows
# by :func:`whitebox_config_rows`: one source for them.
POLICY_CONFIGS: dict[str, dict] = {
    "ts-gaussian": {"note": "certificate above the 1e5/1e6 ceilings"},
    "mts-gaussian": {"note": "as ts-gaussian (b = 0)"},
    "dp-ts-ucb": {"note": "WB: single capture"},
    "dp-ucb": {"note": "WB: 10 p-sums of ε/20, composition-limited; BB: limit_reason (one "
                       "p-sum per decision, masked)"},
    "dp-ucb (T = 4)": {"policy": "dp-ucb", "T": 4, "params": {"per_tree_budget": "full"},
                       "note": "BB limit 0.4925 × certificate (exact integral, pairs.py)"},
    "dp-ts-mt": {"T": 10_000, "blackbox": {"params": {"random_pulls": 400}},
                 "note": "T = 10⁴ (first gap batch needs K·m₀ = 2·⌈192·2·ln T⌉ rounds); WB: "
                         "single capture; BB: gap-exit straddle, random_pulls = 400 (the "
                         "printed value plays round-robin throughout: TV 0)"},
    "dp-ts": {"note": "BB: limit_reason, the shift clips every Beta mean to 1 (TV ≤ {dp_ts_tv})"},
    "lazy-dp-ts": {"note": "BB: late-epoch design"},
    "adap-ucb": {},
    "adap-klucb": {"note": "BB: late-epoch design"},
    "dp-se": {"T": 3000, "note": "T = 3000: the smallest T at which epoch 1 completes "
                                 "(β = 1/T); BB: threshold-straddling design"},
    "anytime-lazy-ucb": {},
    "dp-klucb": {},
    "dp-imed": {},
}
DEFAULT_T = 1000
DEFAULT_K = 2
MODES = ("whitebox", "blackbox")
PILOT = (2000, 10_000)


def whitebox_config_rows() -> dict[str, dict]:
    """One white-box row per entry of ``audits.pairs.WHITEBOX_CONFIGS`` (params, T, K, why)."""
    from dpledger.audits.pairs import WHITEBOX_CONFIGS
    return {f"{name} (WB: T = {T}; K = {K})": {"policy": name, "params": dict(params), "T": T,
                                               "K": K, "modes": ["whitebox"], "note": why}
            for name, (params, T, K, why) in WHITEBOX_CONFIGS.items()}


def rows_to_run(selected: list[str] | None) -> dict[str, dict]:
    """The rows of POLICY_CONFIGS (plus default rows for registered private policies without
    one), restricted to ``selected`` labels or policy names."""
    from dpledger.policies.registry import available, policy_class
    from dpledger.audits.pairs import dp_ts_clipping_bound
    rows = {label: dict(cfg, policy=cfg.get("policy", label)) for label, cfg in POLICY_CONFIGS.items()}
    # DP-TS's total-variation bound at its row's T, K and ε = 1, computed, not copied
    dp_ts = rows["dp-ts"]
    tv = 2.0 * dp_ts_clipping_bound(1.0, dp_ts.get("T", DEFAULT_T), dp_ts.get("K", DEFAULT_K))[0]
    dp_ts["note"] = dp_ts["note"].replace("{dp_ts_tv}", f"{tv:.2g}")
    rows.update(whitebox_config_rows())
    covered = {r["policy"] for r in rows.values()}
    for name in available():
        if policy_class(name).private and name not in covered:
            sys.stderr.write(f"audit_all: {name} has no row in POLICY_CONFIGS; audited with "
                             "the defaults\n")
            rows[name] = {"policy": name}
    if selected:
        unknown = [s for s in selected if s not in rows and
                   s not in {r["policy"] for r in rows.values()}]
        if unknown:
            raise ValueError(f"unknown row or policy {', '.join(unknown)}")
        rows = {k: v for k, v in rows.items() if k in selected or v["policy"] in selected}
    return rows


def audit_kwargs(row: dict, mode: str) -> dict:
    """audit_policy keyword arguments of a row in one mode (mode overrides win)."""
    kw = {"T": row.get("T", DEFAULT_T), "K": row.get("K", DEFAULT_K)}
    kw.update({k: v for k, v in row.get(mode, {}).items() if k != "params"})
    return kw


def policy_params(row: dict, mode: str) -> dict:
    """make_policy keyword arguments of a row in one mode (mode "params" win)."""
    return {**row.get("params", {}), **row.get(mode, {}).get("params", {})}


def _run(row, mode, trials, seed, workers):
    from dpledger.audits.policy import audit_policy
    from dpledger.policies.registry import make_policy
    pol = make_policy(row["policy"], **policy_params(row, mode))
    t = time.perf_counter()
    r = audit_policy(pol, trials=trials, mode=mode, seed=seed, workers=workers,
                     **audit_kwargs(row, mode))
    return r, time.perf_counter() - t


# pilot slopes measured so far, per (policy, mode): each pair is piloted once per invocation
_PILOT_SLOPES: dict = {}


def estimate_seconds(row, mode, trials, seed, workers, _slopes: dict = _PILOT_SLOPES) -> float:
    """Seconds an audit of ``trials`` per side should take: the slope between two pilot audits
    (PILOT trials per side; the first also pays the kernel's compilation) times ``trials``.
    The pilots run once per (row, mode, seed, workers); every size reuses their slope."""
    key = (json.dumps(row, sort_keys=True, default=str), mode, seed, workers)
    if key not in _slopes:
        _run(row, mode, PILOT[0], seed, workers)
        _, t0 = _run(row, mode, PILOT[0], seed, workers)
        _, t1 = _run(row, mode, PILOT[1], seed, workers)
        # a non-positive slope is timing noise (a loaded machine): fall back to the pessimistic
        # proportional estimate, which also charges the fixed costs per trial
        slope = (t1 - t0) / (PILOT[1] - PILOT[0])
        _slopes[key] = slope if slope > 0 else t1 / PILOT[1]
    return _slopes[key] * trials


def entry_key(mode: str, trials: int) -> str:
    return f"{mode}@{trials}"


def _fmt_size(n: int) -> str:
    e = int(round(math.log10(n))) if n > 0 else 0
    return f"1e{e}" if 10 ** e == n else f"{n:g}"


def _fmt(v: float) -> str:
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def cell(entry: dict | None) -> str:
    """``ratio (≤ ceiling/cert)``, "–" when not run, the reason when skipped."""
    if entry is None:
        return "–"
    if "skipped" in entry:
        est = entry.get("estimated_seconds")
        return f"– (~{est:.0f} s)" if est is not None else f"skipped ({entry['skipped']})"
    j = entry["audit"]
    cert = j["certificate"].get("gdp_mu" if j["ratio_currency"] == "mu" else "pure_epsilon")
    ceil = j.get("ceiling")
    if j.get("ratio") is None or cert is None:
        return "n/a"
    c = f" (≤ {_fmt(ceil / cert)})" if ceil is not None and cert else ""
    flag = " **VIOLATION**" if j.get("violation") else ""
    # truncated, not rounded: 0.9985 shows as 0.99, so "1.00" appears only at a real excess
    return f"{math.floor(j['ratio'] * 100) / 100:.2f}{c}{flag}"


def markdown(results: dict, seed: int = 0) -> str:
    """The table: one line per row, one column per (mode, size) present in ``results``."""
    keys = sorted({k for v in results.values() for k in v.get("entries", {})},
                  key=lambda k: (int(k.split("@")[1]), MODES.index(k.split("@")[0])))
    head = ["row", "T", "certificate"] + [
        f"{'WB' if k.startswith('white') else 'BB'} {_fmt_size(int(k.split('@')[1]))}" for k in keys]
    lines = ["| " + " | ".join(head + ["note"]) + " |", "|" + "---|" * (len(head) + 1)]
    first: dict = {}
    for i, (label, v) in enumerate(results.items()):
        first.setdefault(v.get("policy", label), i)
    order = sorted(results, key=lambda lab: (first[results[lab].get("policy", lab)],
                                             list(results).index(lab)))
    for label in order:                      # a policy's rows together
        v = results[label]
        cert = "–"
        for e in v.get("entries", {}).values():
            if "audit" in e:
                j = e["audit"]
                cur = j["ratio_currency"]
                val = j["certificate"].get("gdp_mu" if cur == "mu" else "pure_epsilon")
                cert = "unbounded" if val is None else f"{'μ' if cur == 'mu' else 'ε'} {val:.3g}"
                break
        cells = [cell(v.get("entries", {}).get(k)) for k in keys]
        lines.append("| " + " | ".join([label, str(v.get("T", "")), cert] + cells +
                                       [v.get("note", "")]) + " |")
    sizes = sorted({int(k.split("@")[1]) for k in keys})
    from dpledger.audits.stats import ceiling
    ce = ", ".join(f"{_fmt_size(n)}: ε {ceiling(n):.2f}, μ {ceiling(n, currency='mu'):.2f}"
                   for n in sizes)
    lines.append("")
    lines.append(f"Entries: audit / certificate, and in parentheses the ceiling / certificate (the "
                 f"largest ratio the trials can show, zero errors). Ceilings per side: {ce}. "
                 f"K = 2 unless the row says, seed {seed}, 95 %, selection fraction 0.1; WB = white-box, BB = "
                 "black-box; – = not run (~s: the time estimated from pilots when it was skipped).")
    return "\n".join(lines) + "\n"


def load_results(path: str, ap: argparse.ArgumentParser) -> dict:
    """The results JSON written by an earlier run: a dict of rows, each a dict; anything else
    is a clear error (exit 2), never a traceback."""
    try:
        with open(path) as fh:
            results = json.load(fh)
    except (OSError, ValueError) as exc:
        ap.error(f"--out {path}: cannot read it as JSON ({exc})")
    if not isinstance(results, dict) or not all(isinstance(v, dict) for v in results.values()):
        ap.error(f"--out {path}: not an audit_all results file (a JSON object of rows)")
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000",
                    help="comma-separated trials per side (default 100000)")
    ap.add_argument("--modes", default="whitebox,blackbox")
    ap.add_argument("--policies", default=None,
                    help="comma-separated row labels or policy names (default: every row)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="audit_all.json")
    ap.add_argument("--markdown", default=None, help="write the markdown table here too")
    ap.add_argument("--merge", action="store_true",
                    help="keep the entries already in --out; replace only those re-run")
    ap.add_argument("--table-only", action="store_true",
                    help="run nothing: print (and write) the table of the entries in --out")
    ap.add_argument("--budget", type=float, default=None,
                    help="skip an audit whose extrapolated time exceeds this many seconds")
    ap.add_argument("--horizon", type=int, default=None, help="T for every selected row")
    args = ap.parse_args(argv)

    from dpledger.accounting.schema import write_json_atomic
    from dpledger.errors import DpledgerError

    if args.markdown:
        parent = os.path.dirname(os.path.abspath(args.markdown))
        if not os.path.isdir(parent):
            ap.error(f"--markdown: no folder {parent}")
    results: dict = {}
    if args.table_only and not os.path.exists(args.out):
        ap.error(f"--table-only: no results file {args.out} (run the audits first)")
    if (args.merge or args.table_only) and os.path.exists(args.out):
        results = load_results(args.out, ap)
    bad = False
    if not args.table_only:
        try:
            sizes = [int(float(x)) for x in args.sizes.split(",") if x]
        except ValueError:
            ap.error(f"--sizes must be comma-separated trial counts, got {args.sizes!r}")
        if not sizes or min(sizes) < 2:
            ap.error("--sizes needs trial counts of at least 2")
        modes = [m for m in args.modes.split(",") if m]
        for m in modes:
            if m not in MODES:
                ap.error(f"unknown mode {m!r}; known: {', '.join(MODES)}")
        try:
            rows = rows_to_run(args.policies.split(",") if args.policies else None)
        except ValueError as exc:
            ap.error(str(exc))
        for label, row in rows.items():
            if args.horizon:
                row = dict(row, T=args.horizon)
            slot = results.setdefault(label, {})
            slot.update({"policy": row["policy"], "T": row.get("T", DEFAULT_T),
                         "K": row.get("K", DEFAULT_K), "params": row.get("params", {}),
                         "note": row.get("note", "")})
            entries = slot.setdefault("entries", {})
            for n in sizes:
                for mode in modes:
                    if mode not in row.get("modes", MODES):
                        continue
                    key = entry_key(mode, n)
                    try:
                        if args.budget is not None and n > PILOT[1]:
                            est = estimate_seconds(row, mode, n, args.seed, args.workers)
                            if est > args.budget:
                                entries[key] = {"skipped": f"estimated {est:.0f} s > budget "
                                                           f"{args.budget:.0f} s",
                                                "estimated_seconds": round(est)}
                                sys.stderr.write(f"{label:24s} {mode:9s} {n:>8d} skipped: "
                                                 f"estimated {est:.0f} s\n")
                                write_json_atomic(args.out, results)
                                continue
                        r, dt = _run(row, mode, n, args.seed, args.workers)
                    except DpledgerError as exc:
                        entries[key] = {"skipped": str(exc)[:120]}
                        sys.stderr.write(f"{label:24s} {mode:9s} {n:>8d} skipped: {exc}\n")
                        write_json_atomic(args.out, results)
                        continue
                    j = r.to_json()
                    entries[key] = {"audit": j, "seconds": round(dt, 2)}
                    bad |= bool(r.violation)
                    sys.stderr.write(f"{label:24s} {mode:9s} {n:>8d} {r.currency:7s} lower "
                                     f"{r.lower:.4f} cert {r.certified} ratio {r.ratio} "
                                     f"ceiling {j.get('ceiling')} [{dt:.0f}s]\n")
                    write_json_atomic(args.out, results)
    else:
        bad = any(e.get("audit", {}).get("violation") for v in results.values()
                  for e in v.get("entries", {}).values())
    table = markdown(results, args.seed)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(table)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
