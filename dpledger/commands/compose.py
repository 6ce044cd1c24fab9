"""``dpledger compose RELEASE... [--delta D ...] [--json]``: the privacy calculator."""
from __future__ import annotations

import argparse
import sys

from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import parse_release_spec, release_to_json
from dpledger.accounting.schema import ACCOUNTANT_ORDER, dumps, parse_deltas, privacy_block
from dpledger.inputs import parse_deltas as parse_delta_options


def register(sub) -> None:
    p = sub.add_parser("compose", help="compose releases and print their privacy",
                       description="Compose releases such as laplace:eps=0.5, "
                       "laplace:scale=2,sensitivity=1,count=10, gaussian:mu=0.3, "
                       "gaussian:sigma=2,sensitivity=1,count=100, pure:eps=1, "
                       "discrete_laplace:scale=4,sensitivity=1, discrete_gaussian:sigma=3.")
    p.add_argument("releases", nargs="+", metavar="RELEASE",
                   help="a release KIND:k=v,... (see above); count=N repeats it N times")
    p.add_argument("--delta", action="append", type=str, metavar="DELTA",
                   help="δ in (0, 1) at which ε(δ) is reported (repeatable or comma-separated; "
                        "default 1e-3, 1e-5, 1e-6, 1e-9)")
    p.add_argument("--json", action="store_true",
                   help="print the privacy block as JSON instead of text (default: text)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    comp = Composition.of([parse_release_spec(s) for s in args.releases])
    deltas = parse_deltas(parse_delta_options("--delta", args.delta) if args.delta else None)
    block = privacy_block([comp], deltas)
    if args.json:
        sys.stdout.write(dumps(block))
        return 0
    sys.stdout.write(format_block(comp, block))
    return 0


def _cell(value, status) -> str:
    if value is not None:
        return f"{value:.6g}"
    return {"unbounded": "∞", "not_applicable": "n/a"}.get(status, status.replace("skipped:", "skip:"))


def format_block(comp: Composition, block: dict) -> str:
    lines = ["composition:"]
    for r, c in comp.items:
        params = ", ".join(f"{k}={v!r}" for k, v in release_to_json(r).items() if k != "kind")
        lines.append(f"  {c} × {r.kind}({params})")
    lines.append(f"pure ε = {_cell(block['pure_epsilon'], block['pure_epsilon_status'])}   "
                 f"GDP μ = {_cell(block['gdp_mu'], block['gdp_mu_status'])}   "
                 f"zCDP ρ = {_cell(block['zcdp_rho'], block['zcdp_rho_status'])}")
    header = ["δ"] + list(ACCOUNTANT_ORDER) + ["best"]
    rows = []
    for k, best in block["epsilon_at_delta"].items():
        row = [k] + [_cell(block["epsilon"][a][k], block["epsilon_status"][a][k])
                     for a in ACCOUNTANT_ORDER]
        row.append(f"{_cell(best, 'unbounded')} ({block['epsilon_at_delta_source'][k]})")
        rows.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines.append("ε(δ) by accountant:")
    for row in [header] + rows:
        lines.append("  " + "  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    return "\n".join(lines) + "\n"
