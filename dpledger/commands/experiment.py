"""``dpledger experiment NAME [--quick] [overrides] [--out DIR] [--workers N] [--scheduler …]``
and ``dpledger experiment --config FILE.toml`` (a custom experiment).

The overrides (``--horizon``, ``--runs``, ``--epsilons`` / ``--mus`` / ``--alphas``,
``--instance`` or ``--means`` / ``--rates`` / ``--ab``, ``--policies``, ``--seed``, and for the
contextual Mishra–Thakurta experiment ``--delays`` and ``--accepted``) are
validated here, in the user's terms, before any work starts (dpledger.experiments.overrides).
"""
from __future__ import annotations

import os

from dpledger.commands.run import add_instance_options


def register(sub) -> None:
    p = sub.add_parser("experiment", help="reproduce a paper's experiment, or run a custom one",
                       description="Reproduce a paper's experiment (NAME), with any of its "
                       "settings overridden, or run a custom experiment described by a TOML "
                       "file (--config; see examples/custom_experiment.toml).  Claims are "
                       "judged on the run that was made; a claim an override takes outside the "
                       "paper's setting is reported as not applicable.")
    from dpledger.experiments import EXPERIMENTS     # the one list (azize-2025 was missing)
    p.add_argument("name", nargs="?", default=None,
                   help=", ".join(EXPERIMENTS) + " (omit it with --config)")
    p.add_argument("--config", default=None, metavar="FILE.toml",
                   help="a custom experiment: instances × policies × privacy levels × horizons "
                        "in a TOML file (default: none; the paper's experiment NAME)")
    p.add_argument("--quick", action="store_true",
                   help="T ≤ 2e4, R ≤ 3, thinned grids (default: the full experiment); an "
                        "override below wins over --quick for its own setting")
    p.add_argument("--horizon", default=None,
                   help="T, rounds per run (an integer in [K, 1e9]; default: the paper's)")
    p.add_argument("--runs", default=None,
                   help="R, runs per setting (an integer in [1, 1e9]; default: the paper's)")
    p.add_argument("--epsilons", default=None,
                   help="privacy levels ε of an ε-DP experiment, comma-separated (each a "
                        "number > 0; default: the paper's grid)")
    p.add_argument("--mus", default=None,
                   help="GDP budgets μ of a GDP experiment (ou-2024 and its comparisons, a "
                        "TOML with parameter = \"mu\"), comma-separated (each a number > 0; "
                        "default: the paper's)")
    p.add_argument("--alphas", default=None,
                   help="hu-2025 and its comparisons: DP-TS-UCB's trade-off α, which sets its "
                        "GDP μ, comma-separated (each in [0, 1]; default: the paper's grid)")
    p.add_argument("--instance", default=None,
                   help="run only these of the experiment's named instances, comma-separated "
                        "(the error for an unknown name lists them; default: all)")
    add_instance_options(p, table=False)
    p.set_defaults(range="0,1")
    for a in p._actions:        # run's wording names run's defaults; an experiment's are its own
        if a.dest == "env":
            a.help = ("reward distribution of a custom instance replacing the experiment's "
                      "(default: the experiment's instances): bernoulli takes --means, truncexp "
                      "--rates, beta --ab")
        elif a.dest == "means":
            a.help = ("a custom Bernoulli instance replacing the experiment's: comma-separated "
                      "arm means in [0, 1] (default: the experiment's instances)")
    p.add_argument("--policies", default=None,
                   help="run only these of the experiment's policies, comma-separated (the "
                        "error for an unknown name lists them; default: all)")
    p.add_argument("--seed", default=None,
                   help="master seed of every setting (an integer >= 0; default: the paper "
                        "experiment's, e.g. 2022)")
    p.add_argument("--delays", default=None,
                   help="mishra-thakurta-2015-contextual: run only these of its reward delays "
                        "(rounds), comma-separated, among 0, 100, 1000 (default: all)")
    p.add_argument("--accepted", default=None,
                   help="mishra-thakurta-2015-contextual on digits6 / digits6-online: the "
                        "accepted events n swept, comma-separated (each an integer >= the arms "
                        "20; default: 1e4, 1e5, 1e6, 2e6; --horizon N is n = N alone)")
    p.add_argument("--out", default=None,
                   help="output folder (default out/<name>, out/<name>-overrides with an "
                        "override, plus -quick with --quick); a finished cell found there is "
                        "reused")
    p.add_argument("--workers", default="1",
                   help="local processes (an integer >= 1; default 1)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address, e.g. tcp://127.0.0.1:8786 (default: none, "
                        "local processes)")
    p.add_argument("--quiet", action="store_true",
                   help="print nothing on stdout and no progress on stderr (default: off)")
    p.set_defaults(func=run)


def parse_overrides(args):
    """The :class:`~dpledger.experiments.overrides.Overrides` the command line gives, each value
    validated in the user's terms (one line, exit 2)."""
    from dpledger.commands.run import MAX_COUNT, MAX_HORIZON, make_env
    from dpledger.errors import DpledgerError
    from dpledger.experiments.overrides import (Overrides, env_spec, parse_counts, parse_levels,
                                                parse_names)
    from dpledger.inputs import parse_int

    given = [o for o in ("epsilons", "mus", "alphas") if getattr(args, o) is not None]
    if len(given) > 1:
        raise DpledgerError(f"--{given[0]} and --{given[1]} both give privacy levels; an "
                            "experiment sweeps one of them")
    level_option = given[0] if given else None
    custom = any(getattr(args, o) is not None for o in ("means", "rates", "ab")) \
        or args.env != "bernoulli"
    return Overrides(
        horizon=None if args.horizon is None else parse_int("--horizon", args.horizon, 1,
                                                            MAX_HORIZON),
        runs=None if args.runs is None else parse_int("--runs", args.runs, 1, MAX_COUNT),
        levels=(parse_levels(f"--{level_option}", getattr(args, level_option))
                if level_option else None),
        level_option=level_option,
        instances=None if args.instance is None else parse_names("--instance", args.instance),
        instance=env_spec(make_env(args)) if custom else None,
        policies=None if args.policies is None else parse_names("--policies", args.policies),
        seed=None if args.seed is None else parse_int("--seed", args.seed, 0),
        delays=None if args.delays is None else parse_counts("--delays", args.delays, 0,
                                                             MAX_HORIZON),
        accepted=None if args.accepted is None else parse_counts("--accepted", args.accepted,
                                                                 1, MAX_HORIZON))


def run(args) -> int:
    from dpledger.errors import DpledgerError
    from dpledger.experiments import experiment_module
    from dpledger.experiments.common import run_experiment
    from dpledger.experiments.overrides import check_overrides
    from dpledger.inputs import MAX_WORKERS, check_output_dir, parse_int

    if args.config is not None and args.name is not None:
        raise DpledgerError(f"give an experiment NAME or --config FILE, not both (got "
                            f"{args.name!r} and --config {args.config})")
    if args.config is None and args.name is None:
        raise DpledgerError("name an experiment (e.g. hu-hegde-2022) or give --config FILE.toml")
    if args.config is not None:
        from dpledger.experiments.custom import load_custom
        module = load_custom(args.config)
    else:
        module = experiment_module(args.name)
    if args.scheduler is not None and not args.scheduler.strip():
        raise DpledgerError("--scheduler needs an address, e.g. tcp://127.0.0.1:8786")
    workers = parse_int("--workers", args.workers, minimum=1, maximum=MAX_WORKERS)
    ov = parse_overrides(args)
    check_overrides(module, ov)
    out = args.out or os.path.join("out", module.NAME + ("-overrides" if ov.any() else "")
                                   + ("-quick" if args.quick else ""))
    check_output_dir(out, "--out")
    run_experiment(module, out, quick=args.quick, workers=workers,
                   scheduler=args.scheduler, quiet=args.quiet, overrides=ov)
    return 0
