"""``dpledger run POLICY ...``: simulate, record ledgers, write run.json (SPEC §7)."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from dpledger.accounting.schema import write_json_atomic, write_json_stream_atomic
from dpledger.errors import DpledgerError, InvariantViolation
from dpledger.progress import SimulationProgress
from dpledger.policies import environments as E
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import simulate

DEFAULT_MEANS = "0.75,0.625,0.5,0.375,0.25"


AUTO_LEDGER_RECORDS = 2_000_000     # larger ledgers are written only on request


def register(sub) -> None:
    p = sub.add_parser("run", help="simulate a policy and write run.json")
    p.add_argument("policy")
    p.add_argument("--set", action="append", default=[], metavar="K=V",
                   help="policy parameter (repeatable), e.g. --set epsilon=0.5")
    p.add_argument("--env", default="bernoulli", choices=["bernoulli", "truncexp", "beta", "table"])
    p.add_argument("--means", default=None, help=f"Bernoulli means (default {DEFAULT_MEANS})")
    p.add_argument("--rates", default=None, help="truncated-exponential rates")
    p.add_argument("--ab", default=None, help="Beta parameters a1:b1,a2:b2,...")
    p.add_argument("--table", default=None, help="reward table file (.npy, .csv or .json)")
    p.add_argument("--range", default="0,1", help="declared reward range lo,hi")
    p.add_argument("--horizon", type=str, default="10000")
    p.add_argument("--runs", type=str, default="10")
    p.add_argument("--seed", type=str, default=None, help="master seed (default 0; not with --rng os)")
    p.add_argument("--workers", type=str, default="1")
    p.add_argument("--sampler", default="float", choices=["float", "exact"])
    p.add_argument("--rng", default="seeded", choices=["seeded", "os"],
                   help="bit source: 'seeded' (default; reproducible from --seed) or 'os' "
                        "(deployment, needs --sampler exact: each run seeded from the operating "
                        "system's entropy, not reproducible, recorded in run.json)")
    p.add_argument("--delta", action="append", type=str)
    p.add_argument("--out", default="run.json")
    p.add_argument("--ledger-out", default=None,
                   help="also write the full ledger (default: <out stem>.ledger.json when it has "
                        f"at most {AUTO_LEDGER_RECORDS:.0e} records; a path always writes, "
                        "'none' never — run.json keeps the worst-reward compositions either way)")
    p.add_argument("--plot", default=None, help="regret plot (PNG)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar on stderr and no summary on stdout")
    p.set_defaults(func=run)


def _int(name: str, text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise DpledgerError(f"--{name} must be an integer, got {text!r}") from None
    if not value.is_integer():
        raise DpledgerError(f"--{name} must be an integer, got {text!r}")
    return int(value)


def _floats(name: str, text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise DpledgerError(f"--{name} must be comma-separated numbers, got {text!r}") from None


def parse_params(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise DpledgerError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def load_table(path: str) -> np.ndarray:
    if not os.path.exists(path):
        raise DpledgerError(f"no such table file: {path}")
    try:
        if path.endswith(".npy"):
            return np.load(path, allow_pickle=False)
        if path.endswith(".json"):
            import json
            with open(path) as fh:
                return np.array(json.load(fh), dtype=np.float64)
        return np.loadtxt(path, delimiter=",", ndmin=2)
    except (ValueError, OSError) as exc:
        raise DpledgerError(f"malformed reward table {path}: {exc}") from None


def make_env(args) -> E.Environment:
    lohi = _floats("range", args.range)
    if len(lohi) != 2:
        raise DpledgerError(f"--range expects lo,hi, got {args.range!r}")
    lo, hi = lohi
    if args.env == "bernoulli":
        return E.bernoulli(_floats("means", args.means or DEFAULT_MEANS), lo, hi)
    if args.env == "truncexp":
        if not args.rates:
            raise DpledgerError("--env truncexp needs --rates")
        return E.truncated_exponential(_floats("rates", args.rates), lo, hi)
    if args.env == "beta":
        if not args.ab:
            raise DpledgerError("--env beta needs --ab a1:b1,a2:b2,...")
        try:
            pairs = [[float(v) for v in p.split(":")] for p in args.ab.split(",")]
        except ValueError:
            raise DpledgerError(f"--ab must be a:b pairs, got {args.ab!r}") from None
        if any(len(p) != 2 for p in pairs):
            raise DpledgerError(f"--ab must be a:b pairs, got {args.ab!r}")
        return E.beta(pairs, lo, hi)
    if not args.table:
        raise DpledgerError("--env table needs --table FILE")
    return E.table(load_table(args.table), lo, hi)


def run(args: argparse.Namespace) -> int:
    from dpledger.report import build_run_report
    from dpledger.commands.show_summary import summary_text

    env = make_env(args)
    policy = make_policy(args.policy, **parse_params(args.set))
    T, R = _int("horizon", args.horizon), _int("runs", args.runs)
    if args.rng == "os" and args.seed is not None:
        raise DpledgerError("--seed cannot be combined with --rng os (the OS entropy replaces it)")
    seed, workers = _int("seed", args.seed or "0"), _int("workers", args.workers)
    if workers < 1:
        raise DpledgerError(f"--workers must be >= 1, got {workers}")
    deltas = [float(d) for d in args.delta] if args.delta else None
    # rounds (inside runs too) on stderr, ETA from the first tick on (compilation excluded)
    with SimulationProgress(T, R, quiet=args.quiet) as progress:
        res = simulate(policy, env, T, seed=seed, runs=R, workers=workers, progress=progress,
                       sampler=args.sampler, rng=args.rng)
    report = build_run_report(res, deltas, sampler=args.sampler)
    ledger_out = args.ledger_out or os.path.splitext(args.out)[0] + ".ledger.json"
    records = res.ledger.n_rows() + len(res.ledger.segments["run"])
    not_written = "not_written:--ledger-out none"
    if args.ledger_out is None and records > AUTO_LEDGER_RECORDS:
        # a ledger of 4e7 records (e.g. per-pull rows of a custom policy, or the segments of a
        # long run that switches arms every round) is ~1.5 GB of JSON and takes longer to
        # write than the simulation
        sys.stderr.write(f"note: the ledger has {records} records; not writing {ledger_out} "
                         "(pass --ledger-out FILE to write it)\n")
        ledger_out = "none"
        not_written = (f"not_written:{records} records, more than {AUTO_LEDGER_RECORDS:.0e} "
                       "(pass --ledger-out FILE to write it)")
    # the ledger file first: run.json records its name (relative to run.json), sha256 and size,
    # which `verify` checks before re-deriving the realized block from it
    if ledger_out != "none":
        from dpledger.verify import ledger_file_record
        write_json_stream_atomic(ledger_out, res.ledger.compact().to_json(arrays=True))
        report["ledger"].update(ledger_file_record(ledger_out, args.out))
        del report["ledger"]["file_status"]
    else:
        report["ledger"]["file_status"] = not_written
    write_json_atomic(args.out, report)
    if args.plot:
        from dpledger.plots import plot_regret
        plot_regret([report], args.plot)
    if not args.quiet:
        sys.stdout.write(summary_text(report))
        sys.stdout.write(f"wrote {args.out}" + (f" and {ledger_out}" if ledger_out != "none" else "") +
                         (f" and {args.plot}" if args.plot else "") + "\n")
    from dpledger.report import code_ok
    if not code_ok(report["privacy"]["checks"]):
        raise InvariantViolation("see privacy.checks in " + args.out)
    return 0
