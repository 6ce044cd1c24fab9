"""``dpledger plot run1.json run2.json … --out plot.png``: overlay regret curves."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("plot", help="overlay the regret curves of several runs")
    p.add_argument("files", nargs="+")
    p.add_argument("--out", default="regret.png")
    p.add_argument("--labels", default=None, help="comma-separated labels")
    p.set_defaults(func=run)


def run(args) -> int:
    import sys

    from dpledger.accounting.schema import read_json
    from dpledger.errors import DpledgerError
    from dpledger.plots import plot_regret

    reports = [read_json(f) for f in args.files]
    for f, rep in zip(args.files, reports):
        if not isinstance(rep, dict) or "regret" not in rep or "curve" not in rep["regret"]:
            raise DpledgerError(f"{f} is not a run.json (no regret curve)")
    labels = args.labels.split(",") if args.labels else None
    if labels and len(labels) != len(reports):
        raise DpledgerError(f"--labels has {len(labels)} names for {len(reports)} files")
    plot_regret(reports, args.out, labels)
    sys.stdout.write(f"wrote {args.out}\n")
    return 0
