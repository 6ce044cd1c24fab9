"""``dpledger run POLICY ...``: simulate, record ledgers, write run.json
(docs/design.md#interfaces-and-json)."""
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
DEFAULT_HORIZON = "10000"
CONTEXTUAL_ENVS = ("linear", "linear-fixed", "contextual-table", "supervised", "replay")


AUTO_LEDGER_RECORDS = 2_000_000     # larger ledgers are written only on request


def register(sub) -> None:
    p = sub.add_parser("run", help="simulate a policy and write run.json")
    p.add_argument("policy", help="policy name (see `dpledger policies`)")
    p.add_argument("--set", action="append", default=[], metavar="K=V",
                   help="policy parameter (repeatable; default: the policy's defaults, listed "
                        "by `dpledger policies`), e.g. --set epsilon=0.5")
    add_instance_options(p, contextual=True)
    p.add_argument("--range", default="0,1",
                   help="declared reward range lo,hi that every reward lies in (default 0,1)")
    p.add_argument("--horizon", type=str, default=None,
                   help="T, rounds per run (an integer in [K, 1e9]; default 10000; --env "
                        "contextual-table: default all its rows; --env replay: log rows "
                        "walked, default the whole log)")
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
    p.add_argument("--bounds", action="store_true",
                   help="with --plot, also draw the regret bounds of the policy's papers and of "
                        "its reward family (lower bounds labelled asymptotic where they are; "
                        "see `dpledger bounds`; default: off)")
    p.add_argument("--quiet", action="store_true",
                   help="print nothing on stdout and no progress on stderr (default: off)")
    p.set_defaults(func=run)


def add_instance_options(p, table: bool = True, contextual: bool = False) -> None:
    """--env and the options that describe its arms (``bounds`` takes them without --table;
    ``run`` also with the contextual environments and their options)."""
    envs = ["bernoulli", "truncexp", "beta"] + (["table"] if table else []) \
        + (list(CONTEXTUAL_ENVS) if contextual else [])
    p.add_argument("--env", default="bernoulli", choices=envs,
                   help="reward distribution (default bernoulli): bernoulli takes --means (or "
                        "the default means), truncexp --rates, beta --ab"
                        + (", table --table" if table else "")
                        + ("; contextual (for linucb, lints and the private contextual "
                           "policies): linear takes --dim, --arms, --theta, contextual-table "
                           "--table FILE.npz, supervised --dataset, replay --log"
                           if contextual else ""))
    p.add_argument("--means", default=None,
                   help=f"--env bernoulli: comma-separated arm means inside the range, one per "
                        f"arm (default {DEFAULT_MEANS})")
    p.add_argument("--rates", default=None,
                   help="--env truncexp: comma-separated exponential rates (> 0), one per arm; "
                        "no default")
    p.add_argument("--ab", default=None,
                   help="--env beta: Beta parameters a1:b1,a2:b2,... (each > 0), one pair per "
                        "arm; no default")
    if table:
        p.add_argument("--table", default=None,
                       help="--env table: reward table file (.npy, .csv or .json; one row per "
                            "round, one column per arm)"
                            + ("; --env contextual-table: a .npz with 'contexts' (T, d) or "
                               "(T, K, d) and 'rewards' (T, K)" if contextual else "")
                            + "; no default")
    else:
        p.set_defaults(table=None)
    if contextual:
        _add_contextual_options(p)
    else:                   # the shared readers of these options see "not given"
        p.set_defaults(dim=None, arms=None, theta=None, noise_sd=None, norm_bound=None,
                       dataset=None, log=None,
                       context_columns=None, replay_mode=None, delay=None, clip_contexts=None)


def _add_contextual_options(p) -> None:
    p.add_argument("--dim", default=None,
                   help="--env linear: context dimension d (an integer >= 1; default 10)")
    p.add_argument("--arms", default=None,
                   help="--env linear: number of arms K (an integer >= 2; default 10); --env "
                        "replay: K when the log's largest action + 1 is fewer (default: that)")
    p.add_argument("--theta", default=None,
                   help="--env linear: comma-separated θ (d entries >= 0, norm <= 1/norm "
                        "bound; default: drawn from the seed)")
    p.add_argument("--noise-sd", default=None,
                   help="--env linear or linear-fixed: Gaussian reward noise, rewards "
                        "⟨θ, x⟩ + σ·N(0, 1) (the noise of Azize & Basu 2022's linear lower "
                        "bounds, σ = 1), clipped to --range for the policy, which must contain "
                        "[0, 1] (a number > 0; default: Bernoulli(⟨θ, x⟩) rewards)")
    p.add_argument("--norm-bound", default=None,
                   help="contextual environments: declared bound L > 0 on every context's "
                        "Euclidean norm (a larger context is refused — exactly, no slack — "
                        "unless --clip-contexts; default 1)")
    p.add_argument("--clip-contexts", default=None, action="store_const", const=True,
                   help="--env contextual-table or replay: scale every context of norm above "
                        "L down to norm L (recorded in run.json's environment, with how many "
                        "were scaled; the certificate holds for what the policy reads: "
                        "docs/usage.md; default: refuse such a context)")
    p.add_argument("--dataset", default=None,
                   help="--env supervised: digits, wine, breast_cancer or iris (shipped with "
                        "scikit-learn: pip install 'dpledger[contextual]'; default digits)")
    p.add_argument("--log", default=None,
                   help="--env replay: logged data, a CSV with a header: action (0 … K−1), "
                        "reward, optional propensity, context columns; no default")
    p.add_argument("--context-columns", default=None,
                   help="--env replay: comma-separated context columns of the log (default: "
                        "every column but action, reward and propensity)")
    p.add_argument("--replay-mode", default=None, choices=["uniform", "rejection"],
                   help="--env replay: uniform (Li et al. 2011; propensities, if any, must be "
                        "constant) or rejection (rejection sampling with the logged "
                        "propensities); default uniform")
    p.add_argument("--delay", default=None,
                   help="contextual environments: the reward of round t reaches the policy "
                        "after round t + D (an integer >= 0; default 0: no delay)")


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


# options of the contextual environments: which environments each one describes
_CONTEXTUAL_OPTION = {"dim": ("linear", "linear-fixed"), "theta": ("linear", "linear-fixed"),
                      "noise_sd": ("linear", "linear-fixed"),
                      "arms": ("linear", "linear-fixed", "replay"),
                      "dataset": ("supervised",), "log": ("replay",),
                      "context_columns": ("replay",), "replay_mode": ("replay",),
                      "norm_bound": CONTEXTUAL_ENVS, "delay": CONTEXTUAL_ENVS,
                      "clip_contexts": ("contextual-table", "replay")}


def _flag(opt: str) -> str:
    return "--" + opt.replace("_", "-")


def _check_env_options(args) -> None:
    """An option that describes another environment than ``--env`` is an error, not ignored."""
    for opt, envs in _CONTEXTUAL_OPTION.items():
        if getattr(args, opt) is not None and args.env not in envs:
            raise DpledgerError(f"{_flag(opt)} describes --env {' or '.join(envs)}, but this run "
                                f"uses --env {args.env}")
    if args.env in CONTEXTUAL_ENVS:
        for env, opt in _ENV_OPTION.items():
            if getattr(args, opt) is not None and not (opt == "table"
                                                       and args.env == "contextual-table"):
                raise DpledgerError(f"--{opt} describes --env {env}, but this run uses --env "
                                    f"{args.env}")


def _range(args) -> tuple[float, float]:
    return parse_range("--range", args.range)


def make_contextual_env(args, seed: int):
    """The contextual environment ``args`` describe (``seed`` draws θ when not given)."""
    from dpledger.policies.contextual import data as CD
    from dpledger.policies.contextual import environments as CE
    lo, hi = _range(args)
    L = 1.0 if args.norm_bound is None else parse_float("--norm-bound", args.norm_bound)
    if args.env in ("linear", "linear-fixed"):
        d = _int("dim", "10" if args.dim is None else args.dim, 1, 4096)
        K = _int("arms", "10" if args.arms is None else args.arms, 2, 1 << 20)
        theta = None if args.theta is None else _floats("theta", args.theta)
        make = CE.linear if args.env == "linear" else CE.linear_fixed
        sd = (None if args.noise_sd is None else
              parse_float("--noise-sd", args.noise_sd, minimum=0.0, open_interval=True))
        return make(d, K, theta, seed, L, lo, hi, sd)
    if args.env == "contextual-table":
        if not args.table:
            raise DpledgerError("--env contextual-table needs --table FILE.npz")
        return CD.load_npz_table(args.table, L, lo, hi, clip=bool(args.clip_contexts))
    if args.env == "supervised":
        return CD.load_supervised("digits" if args.dataset is None else args.dataset, L, lo, hi)
    if not args.log:
        raise DpledgerError("--env replay needs --log FILE (a CSV with columns action, reward, "
                            "optional propensity and contexts)")
    K = None if args.arms is None else _int("arms", args.arms, 2, 1 << 20)
    cols = None if args.context_columns is None else split_list("--context-columns",
                                                                args.context_columns)
    return CD.load_replay(args.log, K, cols, args.replay_mode or "uniform", L, lo, hi,
                          clip=bool(args.clip_contexts))


def make_env(args) -> E.Environment:
    _check_env_options(args)
    for env, opt in _ENV_OPTION.items():
        if env != args.env and getattr(args, opt) is not None:
            raise DpledgerError(f"--{opt} describes --env {env}, but this run uses --env "
                                f"{args.env}" + (" (the default); add --env " + env
                                                 if args.env == "bernoulli" else ""))
    lo, hi = _range(args)
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
    from dpledger.accounting import pld_cache
    from dpledger.report import build_run_report

    check_outputs(args)
    _check_env_options(args)
    from dpledger.policies.registry import is_contextual
    contextual_env = args.env in CONTEXTUAL_ENVS
    if is_contextual(args.policy) != contextual_env:
        from dpledger.policies.registry import contextual_available
        if contextual_env:
            raise DpledgerError(f"policy {args.policy!r} plays K-armed reward streams; --env "
                                f"{args.env} needs a contextual policy "
                                f"({', '.join(contextual_available())})")
        raise DpledgerError(f"policy {args.policy!r} is contextual: give a contextual "
                            f"environment (--env {', '.join(CONTEXTUAL_ENVS)})")
    if contextual_env:
        if getattr(args, "bounds", False):
            raise DpledgerError("--bounds draws the K-armed papers' regret bounds; for a "
                                "contextual run only Theorem 5 of Azize & Basu 2022 is coded, "
                                "drawn by `dpledger experiment azize-basu-2022-linear`")
        return run_contextual(args)
    env = make_env(args)
    policy = make_policy_from_text(args.policy, parse_params(args.set))
    if args.bounds:     # refused before the simulation, not after it
        if args.plot is None:
            raise DpledgerError("--bounds draws on the regret plot: add --plot FILE")
        from dpledger.policies.reward_families import RewardInstance
        RewardInstance.from_environment(env)
    # the horizon's upper bound is validate_horizon's (policies/base.py), checked here first so
    # that the message echoes the number as typed
    T = _int("horizon", DEFAULT_HORIZON if args.horizon is None else args.horizon, 1,
             MAX_HORIZON)
    R = _int("runs", args.runs, 1, MAX_COUNT)
    if args.rng == "os" and args.seed is not None:
        raise DpledgerError("--seed cannot be combined with --rng os (the OS entropy replaces it)")
    seed = _int("seed", "0" if args.seed is None else args.seed, 0)
    workers = _int("workers", args.workers, 1, MAX_WORKERS)
    deltas = parse_deltas("--delta", args.delta) if args.delta else None
    # rounds (inside runs too) on stderr, ETA from the first tick on (compilation excluded)
    with SimulationProgress(T, R, quiet=args.quiet) as progress:
        res = simulate(policy, env, T, seed=seed, runs=R, workers=workers, progress=progress,
                       sampler=args.sampler, rng=args.rng)
    with pld_cache.enabled():           # the certificate's PLD numbers, content-keyed
        report = build_run_report(res, deltas, sampler=args.sampler)
    return write_run(args, report, res.ledger)


def write_run(args, report: dict, ledger) -> int:
    """Write the ledger file (unless too large or 'none'), run.json and the plot; print the
    summary; exit 1 when an invariant fails."""
    from dpledger.commands.show_summary import summary_text
    ledger_out = _ledger_path(args) or "none"
    records = ledger.n_rows() + len(ledger.segments["run"])
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
        write_json_stream_atomic(ledger_out, ledger.compact().to_json(arrays=True))
        report["ledger"].update(ledger_file_record(ledger_out, args.out))
        del report["ledger"]["file_status"]
    else:
        report["ledger"]["file_status"] = not_written
    write_json_atomic(args.out, report)
    if args.plot:
        from dpledger.plots import plot_regret
        plot_regret([report], args.plot, bounds=args.bounds)
    if not args.quiet:
        sys.stdout.write(summary_text(report))
        sys.stdout.write(f"wrote {args.out}" + (f" and {ledger_out}" if ledger_out != "none" else "") +
                         (f" and {args.plot}" if args.plot else "") + "\n")
    from dpledger.report import code_ok
    if not code_ok(report["privacy"]["checks"]):
        raise InvariantViolation("see privacy.checks in " + args.out)
    return 0


def run_contextual(args) -> int:
    """``dpledger run`` on a contextual environment (linucb, lints, …)."""
    from dpledger.policies.contextual.simulator import simulate_contextual
    from dpledger.report_contextual import build_contextual_report
    if args.rng == "os" and args.seed is not None:
        raise DpledgerError("--seed cannot be combined with --rng os (the OS entropy replaces it)")
    policy = make_policy_from_text(args.policy, parse_params(args.set))
    R = _int("runs", args.runs, 1, MAX_COUNT)
    seed = _int("seed", "0" if args.seed is None else args.seed, 0)
    workers = _int("workers", args.workers, 1)
    deltas = parse_deltas("--delta", args.delta) if args.delta else None
    delay = _int("delay", "0" if args.delay is None else args.delay, None)
    if delay < 0:
        raise DpledgerError(f"--delay must be >= 0, got {args.delay!r} (a reward cannot arrive "
                            "before its round)")
    env = make_contextual_env(args, seed)
    if args.horizon is None:        # a table or log: all its rows
        T = env.rows if env.rows is not None else int(DEFAULT_HORIZON)
    else:
        T = _int("horizon", args.horizon, 1, MAX_HORIZON)
    with SimulationProgress(T, R, quiet=args.quiet) as progress:
        def tick(n: int) -> None:
            progress(n)
            progress.rounds(progress.done * T)
        res = simulate_contextual(policy, env, T, seed=seed, runs=R, delay=delay,
                                  workers=workers, progress=tick, sampler=args.sampler,
                                  rng=args.rng)
    return write_run(args, build_contextual_report(res, deltas), res.ledger)
