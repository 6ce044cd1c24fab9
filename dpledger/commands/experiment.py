"""``dpledger experiment NAME [--quick] [--out DIR] [--workers N] [--scheduler tcp://…]``."""
from __future__ import annotations

import os


def register(sub) -> None:
    p = sub.add_parser("experiment", help="reproduce a paper's experiment")
    p.add_argument("name", help="hu-hegde-2022, azize-basu-2022, ou-2024, hu-2025, "
                               "mishra-thakurta-2015")
    p.add_argument("--quick", action="store_true", help="T ≤ 2e4, R ≤ 3, thinned grids")
    p.add_argument("--out", default=None, help="output folder (default out/<name>[-quick])")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://127.0.0.1:8786")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from dpledger.errors import DpledgerError
    from dpledger.experiments import experiment_module
    from dpledger.experiments.common import run_experiment

    module = experiment_module(args.name)
    if args.workers < 1:
        raise DpledgerError(f"--workers must be >= 1, got {args.workers}")
    out = args.out or os.path.join("out", args.name + ("-quick" if args.quick else ""))
    run_experiment(module, out, quick=args.quick, workers=args.workers,
                   scheduler=args.scheduler, quiet=args.quiet)
    return 0
