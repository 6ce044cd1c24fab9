"""``dpledger verify run.json [--resimulate]``: exit 0 iff every check passes (1: a problem
found; 2: input that cannot be checked).  The last line on stdout says what was checked and
what was not (see :mod:`dpledger.verify`)."""
from __future__ import annotations

import sys

from dpledger.errors import counted
from dpledger.verify import verify_run


def register(sub) -> None:
    p = sub.add_parser("verify", help="re-check a run.json's privacy numbers, its ledger file "
                       "and invariants; --resimulate reruns it and compares the bytes")
    p.add_argument("file", help="the run.json to check, or a ledger store (`dpledger ledger init`)")
    p.add_argument("--ledger", default=None, metavar="FILE",
                   help="the run's ledger file, when it is not where run.json's ledger.file "
                        "says (relative to run.json); its sha256 must match run.json's record "
                        "(default: the file run.json names)")
    p.add_argument("--resimulate", action="store_true",
                   help="rerun the simulation from run.json's configuration and seed (as "
                        "`dpledger run` does) and compare the bytes of run.json and of the "
                        "ledger file; exit 1 on any difference, naming the first (default: off)")
    p.add_argument("--table", default=None, metavar="FILE",
                   help="the reward table of a run on --env table, or the .npz of a run on "
                        "--env contextual-table (run.json keeps only its sha256): checked "
                        "against it, and needed by --resimulate (default: none)")
    p.add_argument("--log", default=None, metavar="FILE",
                   help="the log of a run on --env replay (run.json keeps only its sha256): "
                        "checked against it, and needed by --resimulate (default: none)")
    p.add_argument("--workers", type=str, default="1",
                   help="worker processes for --resimulate (an integer >= 1; default 1; the "
                        "bytes do not depend on it)")
    p.add_argument("--since", default=None, metavar="BATCHES:HEAD",
                   help="ledger stores only: the head printed earlier by `dpledger ledger "
                        "head`; the store must have grown from it (its record chain passes "
                        "through that head; default: no earlier head is checked)")
    p.add_argument("--head", default=None, metavar="DIGEST",
                   help="ledger stores only: a head (64 hex digits) an operator wrote down "
                        "from `dpledger ledger head`; some batch of the store must link to it "
                        "(the store only grew from it: docs/ledger-store.md#what-is-detected; "
                        "default: the head anchor alone)")
    p.set_defaults(func=run)


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _g(v) -> str:
    if v is None:
        return "—"
    if not _number(v):
        return "(not a number)"
    from dpledger.outward import up
    return up(v)              # privacy numbers round toward less privacy


def run(args) -> int:
    from dpledger.commands.ledger import store_dispatch
    from dpledger.inputs import refuse_special_file
    refuse_special_file(args.file, "a run.json or a ledger store")   # before anything opens it
    code = store_dispatch("verify", args)     # a ledger store, not a run.json
    if code is not None:
        return code
    from dpledger.commands.run import _int
    from dpledger.inputs import MAX_WORKERS
    from dpledger.errors import DpledgerError
    if args.since is not None:
        raise DpledgerError("--since applies to ledger stores only")
    if args.head is not None:
        raise DpledgerError("--head applies to ledger stores only")
    workers = _int("workers", args.workers, 1, MAX_WORKERS)
    if not args.resimulate and args.workers != "1":
        raise DpledgerError("--workers applies to --resimulate only")
    v = verify_run(args.file, ledger_path=args.ledger, resimulate=args.resimulate,
                   table_path=args.table, workers=workers, log_path=args.log)
    report = v.report
    priv = report.get("privacy") if isinstance(report, dict) else None
    priv = priv if isinstance(priv, dict) else {}
    chk = _dict(priv.get("checks"))
    for cur in _dict(chk.get("certificate_over_theorem")):
        cert = _dict(priv.get("certificate")).get(cur)
        thm = _dict(priv.get("theorem")).get(cur)
        # the file's own numbers, and their ratio computed from them (the stored ratio of an
        # edited file need not agree with them); one that does not re-derive is listed among
        # the problems as "stored …, recomputed …" (issue 13: say which is which)
        ratio = (cert / thm if _number(cert) and _number(thm) and thm > 0 else None)
        sys.stdout.write(f"{cur} as stored in the file: certificate {_g(cert)}, theorem "
                         f"{_g(thm)}, certificate/theorem = {_g(ratio)}\n")
    notes = _dict(priv.get("theorem")).get("notes", [])
    for note in (notes if isinstance(notes, list) else [notes]):
        sys.stdout.write(f"  theorem note: {note}\n")
    if chk.get("promise_finding"):
        sys.stdout.write(f"finding about the variant (not a failure of the code): "
                         f"{chk['promise_finding']}\n")
    if chk.get("theorem_finding"):
        sys.stdout.write("finding about the theorem (not a failure of the code): "
                         f"{chk['theorem_finding']}\n")
    if v.problems:
        sys.stderr.write(f"{args.file}: {counted(len(v.problems), 'problem')}\n")
        for p in v.problems[:50]:
            sys.stderr.write(f"  {p}\n")
        sys.stdout.write(f"{args.file}: FAILED — {v.summary()}\n")
        return 1
    sys.stdout.write(f"{args.file}: ok — {v.summary()}\n")
    return 0
