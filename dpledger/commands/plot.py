"""``dpledger plot run1.json run2.json … --out plot.png``: overlay regret curves."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("plot", help="overlay the regret curves of several runs")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="run.json files written by `dpledger run` (one curve each)")
    p.add_argument("--out", default="regret.png",
                   help="figure to write (.png, .pdf, .svg, …; default regret.png)")
    p.add_argument("--labels", default=None,
                   help="comma-separated legend labels, one per file (default: each run's policy "
                        "and parameters)")
    p.add_argument("--bounds", action="store_true",
                   help="also draw each run's regret bounds: the upper bounds of its policy's "
                        "papers and the lower bounds of its reward family and privacy model, "
                        "asymptotic ones labelled so (see `dpledger bounds`; default: off)")
    p.set_defaults(func=run)


def run(args) -> int:
    import sys

    from dpledger.errors import DpledgerError
    from dpledger.inputs import PLOT_EXTENSIONS, check_output_file, load_run_json, split_list
    from dpledger.plots import plot_regret

    check_output_file(args.out, "--out", PLOT_EXTENSIONS)
    labels = split_list("--labels", args.labels) if args.labels is not None else None
    if labels and len(labels) != len(args.files):
        raise DpledgerError(f"--labels has {len(labels)} names for {len(args.files)} files")
    reports = [load_run_json(f) for f in args.files]
    plot_regret(reports, args.out, labels, bounds=args.bounds)
    sys.stdout.write(f"wrote {args.out}\n")
    return 0
