"""The ``dpledger`` command line: a thin layer over the Python API (SPEC §7).

Exit status: 0 ok, 1 an invariant violated, 2 bad input (one line on stderr, no traceback).
Progress and warnings go to stderr only.  Each subcommand lives in ``dpledger.commands.<name>``
with ``register(subparsers)``; commands whose module is not present are simply not offered.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from dpledger.errors import DpledgerError, InvariantViolation

COMMANDS = ("compose", "policies", "run", "curve", "verify", "show", "audit", "experiment", "plot")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dpledger", description="Per-reward differential-privacy ledgers for "
                     "private bandit policies.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"dpledger.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"dpledger.commands.{name}":
                continue
            raise
        module.register(sub)
    return parser


def _version() -> str:
    from dpledger import __version__
    return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except DpledgerError as exc:
        sys.stderr.write(f"dpledger {args.command}: error: {exc}\n")
        return 2
    except InvariantViolation as exc:
        sys.stderr.write(f"dpledger {args.command}: invariant violated: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("dpledger: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
