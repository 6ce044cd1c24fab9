"""``dpledger compose RELEASE... [--delta D ...] [--json]``: the privacy calculator."""
from __future__ import annotations

from dpledger.outward import up

import argparse
import sys

from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import parse_release_spec, release_to_json
from dpledger.accounting.schema import ACCOUNTANT_ORDER, dumps, parse_deltas, privacy_block
from dpledger.inputs import parse_deltas as parse_delta_options


# Every release kind the CLI parses (``accounting.releases.RELEASE_TYPES``), its syntax and
# what it means: the help of every command taking release specs prints this table
# (tests/test_cli_help.py checks that no kind is missing).
RELEASE_SYNTAX = (
    ("laplace", "laplace:eps=E | laplace:scale=B,sensitivity=D",
     "Laplace, ε = D/B"),
    ("gaussian", "gaussian:mu=M | gaussian:sigma=S,sensitivity=D",
     "Gaussian, μ = D/S"),
    ("pure", "pure:eps=E", "generic ε-DP (as randomized response)"),
    ("discrete_laplace", "discrete_laplace:scale=T,sensitivity=D",
     "discrete Laplace, lattice units"),
    ("discrete_gaussian", "discrete_gaussian:sigma=S,sensitivity=D",
     "discrete Gaussian, lattice units"),
    ("discrete_gaussian_total", "discrete_gaussian_total:rho=R",
     "discrete Gaussians by total ρ"),
    ("rdp", "rdp:orders=A1;A2;...,values=R1;R2;...",
     "Rényi bound at listed orders"),
    ("zcdp", "zcdp:rho=R", "ρ-zCDP: Rényi ρα, every α > 1"),
    ("non_private", "non_private:", "read without noise"),
    ("laplace_vector", "laplace_vector:scale=B,sensitivity=D,dim=N",
     "Laplace per entry, L1 sensitivity D: ε = D/B"),
    ("gaussian_vector", "gaussian_vector:sigma=S,sensitivity=D,dim=N",
     "Gaussian vector, L2 sensitivity D: μ = D/S"),
    ("gaussian_sym_matrix", "gaussian_sym_matrix:sigma=S,sensitivity=F,dim=N",
     "symmetric Gaussian matrix, Frobenius F: μ = F/(√2·S)"),
    ("approx_dp", "approx_dp:eps=E,delta=X", "an (ε, δ)-DP statement, δ = X"),
    ("wishart", "wishart:dim=P,k=K,bound=L,delta=X",
     "Wishart W_P(L²I, K): (ε, δ) by its theorem"),
)


def release_kinds_help() -> str:
    """The release kinds as help text: one line per kind, syntax and meaning."""
    w = max(len(syntax) for _, syntax, _ in RELEASE_SYNTAX)
    return ("release kinds (each also takes count=N, N releases of it):\n" + "\n".join(
        f"  {syntax:<{w}s}  {meaning}" for _, syntax, meaning in RELEASE_SYNTAX))


def register(sub) -> None:
    p = sub.add_parser("compose", help="compose releases and print their privacy",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Compose releases and print their privacy, e.g.\n"
                       "  dpledger compose laplace:eps=0.5 gaussian:sigma=2,sensitivity=1,"
                       "count=100\n\n" + release_kinds_help())
    p.add_argument("releases", nargs="+", metavar="RELEASE",
                   help="a release KIND:k=v,... (kinds above); count=N repeats it N times")
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
        return up(value)       # certified numbers round toward less privacy
    return {"unbounded": "∞", "not_applicable": "n/a"}.get(status, status.replace("skipped:", "skip:"))


def format_block(comp: Composition, block: dict) -> str:
    return format_composition(comp, "composition:") + format_numbers(block)


def format_composition(comp: Composition, title: str, indent: str = "  ") -> str:
    lines = [title] if title else []
    for r, c in comp.items:
        params = ", ".join(f"{k}={v!r}" for k, v in release_to_json(r).items() if k != "kind")
        lines.append(f"{indent}{c} × {r.kind}({params})")
    return "\n".join(lines) + "\n"


def format_numbers(block: dict) -> str:
    lines = [f"pure ε = {_cell(block['pure_epsilon'], block['pure_epsilon_status'])}   "
             f"GDP μ = {_cell(block['gdp_mu'], block['gdp_mu_status'])}   "
             f"zCDP ρ = {_cell(block['zcdp_rho'], block['zcdp_rho_status'])}"]
    header = ["δ"] + list(ACCOUNTANT_ORDER) + ["best"]
    rows = []
    for k, best in block["epsilon_at_delta"].items():
        row = [k] + [_cell(block["epsilon"][a][k], block["epsilon_status"][a][k])
                     for a in ACCOUNTANT_ORDER]
        row.append(f"{_cell(best, 'unbounded')} ({block['epsilon_at_delta_source'][k]})")
        rows.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines.append("ε(δ) by accountant:")
    for row in [header] + rows:
        lines.append("  " + "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))
    return "\n".join(lines) + "\n"
