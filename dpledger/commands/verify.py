"""``dpledger verify run.json``: exit 0 iff every number re-derives and every invariant holds."""
from __future__ import annotations

import sys

from dpledger.accounting.schema import read_json
from dpledger.verify import verify_report


def register(sub) -> None:
    p = sub.add_parser("verify", help="re-check a run.json's privacy numbers and invariants")
    p.add_argument("file")
    p.set_defaults(func=run)


def run(args) -> int:
    problems = verify_report(read_json(args.file))
    if problems:
        sys.stderr.write(f"{args.file}: {len(problems)} problem(s)\n")
        for p in problems[:50]:
            sys.stderr.write(f"  {p}\n")
        return 1
    sys.stdout.write(f"{args.file}: theorem, certificate and realized re-derived; invariants hold\n")
    return 0
