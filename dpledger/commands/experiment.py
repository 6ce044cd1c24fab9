"""``dpledger experiment NAME [--quick] [--out DIR] [--workers N] [--scheduler tcp://…]``."""
from __future__ import annotations

import os


def register(sub) -> None:
    p = sub.add_parser("experiment", help="reproduce a paper's experiment")
    from dpledger.experiments import EXPERIMENTS     # the one list (azize-2025 was missing)
    p.add_argument("name", help=", ".join(EXPERIMENTS))
    p.add_argument("--quick", action="store_true",
                   help="T ≤ 2e4, R ≤ 3, thinned grids (default: the full experiment)")
    p.add_argument("--out", default=None,
                   help="output folder (default out/<name>, or out/<name>-quick); a finished "
                        "cell found there is reused")
    p.add_argument("--workers", default="1",
                   help="local processes (an integer >= 1; default 1)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address, e.g. tcp://127.0.0.1:8786 (default: none, "
                        "local processes)")
    p.add_argument("--quiet", action="store_true",
                   help="print nothing on stdout and no progress on stderr (default: off)")
    p.set_defaults(func=run)


def run(args) -> int:
    from dpledger.errors import DpledgerError
    from dpledger.experiments import experiment_module
    from dpledger.experiments.common import run_experiment
    from dpledger.inputs import MAX_WORKERS, check_output_dir, parse_int

    module = experiment_module(args.name)
    if args.scheduler is not None and not args.scheduler.strip():
        raise DpledgerError("--scheduler needs an address, e.g. tcp://127.0.0.1:8786")
    workers = parse_int("--workers", args.workers, minimum=1, maximum=MAX_WORKERS)
    out = args.out or os.path.join("out", args.name + ("-quick" if args.quick else ""))
    check_output_dir(out, "--out")
    run_experiment(module, out, quick=args.quick, workers=workers,
                   scheduler=args.scheduler, quiet=args.quiet)
    return 0
