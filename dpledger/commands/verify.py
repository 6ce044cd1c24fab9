"""``dpledger verify run.json``: exit 0 iff every number re-derives and every invariant holds."""
from __future__ import annotations

import os
import sys

from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.schema import read_json
from dpledger.verify import verify_report


def register(sub) -> None:
    p = sub.add_parser("verify", help="re-check a run.json's privacy numbers and invariants")
    p.add_argument("file")
    p.set_defaults(func=run)


def run(args) -> int:
    report = read_json(args.file)
    # the run's ledger, when written next to it, lets verify check realized against it too
    ledger_path = os.path.splitext(args.file)[0] + ".ledger.json"
    ledger = (RewardLedger.from_json(read_json(ledger_path)) if os.path.exists(ledger_path)
              else None)
    problems = verify_report(report, ledger)
    chk = report.get("privacy", {}).get("checks", {}) if isinstance(report, dict) else {}
    for cur, ratio in chk.get("certificate_over_theorem", {}).items():
        cert = report["privacy"]["certificate"][cur]
        thm = report["privacy"]["theorem"][cur]
        sys.stdout.write(f"{cur}: certificate {cert:.6g}, theorem {thm:.6g}, "
                         f"certificate/theorem = {ratio:.6g}\n")
    for note in report.get("privacy", {}).get("theorem", {}).get("notes", []) \
            if isinstance(report, dict) else []:
        sys.stdout.write(f"  theorem note: {note}\n")
    if chk.get("theorem_finding"):
        sys.stdout.write("finding about the theorem (not a failure of the code): "
                         f"{chk['theorem_finding']}\n")
    if problems:
        sys.stderr.write(f"{args.file}: {len(problems)} problem(s)\n")
        for p in problems[:50]:
            sys.stderr.write(f"  {p}\n")
        return 1
    sys.stdout.write(f"{args.file}: theorem, certificate and realized re-derived; invariants hold\n")
    return 0
