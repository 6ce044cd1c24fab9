"""``dpledger run POLICY ...``: simulate, record ledgers, write run.json (SPEC §7)."""
from __future__ import annotations

import argparse
import os
import sys


from dpledger.accounting.schema import write_json_atomic, write_json_stream_atomic
from dpledger.errors import DpledgerError, InvariantViolation, counted
from dpledger.inputs import (MAX_WORKERS, PLOT_EXTENSIONS, check_distinct, check_output_file,
                             ledger_file_record, load_table, parse_deltas, parse_float,
                             parse_floats, parse_int, parse_range, split_list)
from dpledger.progress import SimulationProgress
from dpledger.policies import environments as E
from dpledger.policies.registry import make_policy_from_text
from dpledger.policies.simulator import simulate

DEFAULT_MEANS = "0.75,0.625,0.5,0.375,0.25"


AUTO_LEDGER_RECORDS = 2_000_000     # larger ledgers are written only on request


def register(sub) -> None:
    p = sub.add_parser("run", help="simulate a policy and write run.json")
    p.add_argument("policy", help="policy name (see `dpledger policies`)")
    p.add_argument("--set", action="append", default=[], metavar="K=V",
                   help="policy parameter (repeatable; default: the policy's defaults, listed "
                        "by `dpledger policies`), e.g. --set epsilon=0.5")
    p.add_argument("--env", default="bernoulli", choices=["bernoulli", "truncexp", "beta", "table"],
                   help="reward distribution (default bernoulli): bernoulli takes --means (or "
                        "the default means), truncexp --rates, beta --ab, table --table")
    p.add_argument("--means", default=None,
                   help=f"--env bernoulli: comma-separated arm means inside the range, one per "
                        f"arm (default {DEFAULT_MEANS})")
    p.add_argument("--rates", default=None,
                   help="--env truncexp: comma-separated exponential rates (> 0), one per arm; "
                        "no default")
    p.add_argument("--ab", default=None,
                   help="--env beta: Beta parameters a1:b1,a2:b2,... (each > 0), one pair per "
                        "arm; no default")
    p.add_argument("--table", default=None,
                   help="--env table: reward table file (.npy, .csv or .json; one row per round, "
                        "one column per arm); no default")
    p.add_argument("--range", default="0,1",
                   help="declared reward range lo,hi that every reward lies in (default 0,1)")
    p.add_argument("--horizon", type=str, default="10000",
                   help="T, rounds per run (an integer in [K, 1e9]; default 10000)")
    p.add_argument("--runs", type=str, default="10",
                   help="R, independent runs (an integer in [1, 1e9]; default 10)")
    p.add_argument("--seed", type=str, default=None,
                   help="master seed (an integer >= 0; default 0; not with --rng os); run i "
                        "uses SeedSequence(seed, spawn_key=(i,))")
    p.add_argument("--workers", type=str, default="1",
                   help="processes that simulate runs in parallel (an integer >= 1; default 1); "
                        "the output does not depend on it")
    p.add_argument("--sampler", default="float", choices=["float", "exact"],
                   help="noise sampler (default float); exact: lattice rewards and exact "
                        "discrete noise, for the policies `dpledger policies` marks")
    p.add_argument("--rng", default="seeded", choices=["seeded", "os"],
                   help="bit source: 'seeded' (default; reproducible from --seed) or 'os' "
                        "(deployment, needs --sampler exact: each run seeded from the operating "
                        "system's entropy, not reproducible, recorded in run.json)")
    p.add_argument("--delta", action="append", type=str, metavar="DELTA",
                   help="δ in (0, 1) at which ε(δ) is reported (repeatable or comma-separated; "
                        "default 1e-3, 1e-5, 1e-6, 1e-9)")
    p.add_argument("--out", default="run.json",
                   help="run.json to write (default run.json); checked before the simulation")
    p.add_argument("--ledger-out", default=None,
                   help="also write the full ledger (default: <out stem>.ledger.json when it has "
                        f"at most {AUTO_LEDGER_RECORDS:.0e} records; a path always writes, "
                        "'none' never — run.json keeps the worst-reward compositions either way)")
    p.add_argument("--plot", default=None,
                   help="also write a regret plot to this file (.png, .pdf, .svg, …; "
                        "default: no plot)")
    p.add_argument("--quiet", action="store_true",
                   help="print nothing on stdout and no progress on stderr (default: off)")
    p.set_defaults(func=run)


def _int(name: str, text: str, minimum: int | None = None, maximum: int | None = None) -> int:
    return parse_int(f"--{name}", text, minimum, maximum)


def _floats(name: str, text: str) -> list[float]:
    return parse_floats(f"--{name}", text)


def parse_params(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise DpledgerError(f"--set expects key=value, got {item!r}")
        if key.strip() in out:      # the later one would silently win
            raise DpledgerError(f"--set {key.strip()} is given twice")
        out[key.strip()] = value.strip()
    return out


# which option describes the arms of each environment; the others must not be given
_ENV_OPTION = {"bernoulli": "means", "truncexp": "rates", "beta": "ab", "table": "table"}


def make_env(args) -> E.Environment:
    for env, opt in _ENV_OPTION.items():
        if env != args.env and getattr(args, opt) is not None:
            raise DpledgerError(f"--{opt} describes --env {env}, but this run uses --env "
                                f"{args.env}" + (" (the default); add --env " + env
                                                 if args.env == "bernoulli" else ""))
    lo, hi = parse_range("--range", args.range)
    if args.env == "bernoulli":
        return E.bernoulli(_floats("means", DEFAULT_MEANS if args.means is None else args.means), lo, hi)
    if args.env == "truncexp":
        if not args.rates:
            raise DpledgerError("--env truncexp needs --rates")
        return E.truncated_exponential(_floats("rates", args.rates), lo, hi)
    if args.env == "beta":
        if not args.ab:
            raise DpledgerError("--env beta needs --ab a1:b1,a2:b2,...")
        items = split_list("--ab", args.ab)
        if any(len(p.split(":")) != 2 for p in items):
            raise DpledgerError(f"--ab must be a:b pairs, got {args.ab!r}")
        pairs = [[parse_float("--ab", v) for v in p.split(":")] for p in items]
        return E.beta(pairs, lo, hi)
    if not args.table:
        raise DpledgerError("--env table needs --table FILE")
    return E.table(load_table(args.table, "--table"), lo, hi)


MAX_HORIZON = 10 ** 9          # validate_horizon's maximum (a test keeps the two equal)
MAX_COUNT = 10 ** 9            # runs (or audit trials): more is a typo, not a plan; 1e30 would
                               # otherwise be accepted and fill the memory before failing


def check_outputs(args) -> None:
    """Every file this run will write, checked before the simulation starts (issue 13): a
    writable folder, not a directory, a plot extension matplotlib writes, no two the same."""
    check_output_file(args.out, "--out")
    ledger = _ledger_path(args)
    if ledger is not None:
        check_output_file(ledger, "--ledger-out")
    if args.plot is not None:
        check_output_file(args.plot, "--plot", PLOT_EXTENSIONS)
    check_distinct([("--out", args.out), ("--ledger-out", ledger), ("--plot", args.plot)])


def _ledger_path(args) -> str | None:
    if args.ledger_out == "none":
        return None
    return args.ledger_out or os.path.splitext(args.out)[0] + ".ledger.json"


def run(args: argparse.Namespace) -> int:
    from dpledger.report import build_run_report
    from dpledger.commands.show_summary import summary_text

    check_outputs(args)
    env = make_env(args)
    policy = make_policy_from_text(args.policy, parse_params(args.set))
    # the horizon's upper bound is validate_horizon's (policies/base.py), checked here first so
    # that the message echoes the number as typed
    T, R = _int("horizon", args.horizon, 1, MAX_HORIZON), _int("runs", args.runs, 1, MAX_COUNT)
    if args.rng == "os" and args.seed is not None:
        raise DpledgerError("--seed cannot be combined with --rng os (the OS entropy replaces it)")
    seed = _int("seed", "0" if args.seed is None else args.seed, 0)
    workers = _int("workers", args.workers, 1, MAX_WORKERS)
    deltas = parse_deltas("--delta", args.delta) if args.delta else None
    # rounds (inside runs too) on stderr, ETA from the first tick on (compilation excluded)
    with SimulationProgress(T, R, quiet=args.quiet) as progress:
        res = simulate(policy, env, T, seed=seed, runs=R, workers=workers, progress=progress,
                       sampler=args.sampler, rng=args.rng)
    report = build_run_report(res, deltas, sampler=args.sampler)
    ledger_out = _ledger_path(args) or "none"
    records = res.ledger.n_rows() + len(res.ledger.segments["run"])
    not_written = "not_written:--ledger-out none"
    if args.ledger_out is None and records > AUTO_LEDGER_RECORDS:
        # a ledger of 4e7 records (e.g. per-pull rows of a custom policy, or the segments of a
        # long run that switches arms every round) is ~1.5 GB of JSON and takes longer to
        # write than the simulation
        sys.stderr.write(f"note: the ledger has {counted(records, 'record')}; not writing "
                         f"{ledger_out} "
                         "(pass --ledger-out FILE to write it)\n")
        ledger_out = "none"
        not_written = (f"not_written:{records} records, more than {AUTO_LEDGER_RECORDS:.0e} "
                       "(pass --ledger-out FILE to write it)")
    # the ledger file first: run.json records its name (relative to run.json), sha256 and size,
    # which `verify` checks before re-deriving the realized block from it
    if ledger_out != "none":
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
