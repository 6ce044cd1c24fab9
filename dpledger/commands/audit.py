"""``dpledger audit POLICY ...``: a neighbouring-stream audit, written to audit.json (SPEC §6–§7).

    dpledger audit POLICY [--set k=v ...] --trials N [--confidence 0.95]
                   [--mode whitebox|blackbox] [--horizon 1000] [--arms 2] [--seed 0]
                   [--score auto|pulls|next|fitted] [--stop-at ROUND]
                   [--selection-fraction 0.1] [--range lo,hi] [--pair D.npy D2.npy]
                   [--workers 1] [--quiet] --out audit.json

``--trials`` counts runs per neighbouring stream.  Exit 0 when the lower bound stays at or below
the certificate, 1 when it exceeds it (an invariant violated: a bug in the code or the theorem;
audit.json is written first), 2 on bad input.  Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import sys
import time

from dpledger.errors import DpledgerError, InvariantViolation
from dpledger.progress import Bar


def register(sub) -> None:
    p = sub.add_parser("audit", help="neighbouring-stream audit: a lower bound on ε (or μ)")
    p.add_argument("policy")
    p.add_argument("--set", action="append", default=[], metavar="K=V",
                   help="policy parameter (repeatable), e.g. --set epsilon=0.5")
    p.add_argument("--trials", required=True, help="runs per neighbouring stream")
    p.add_argument("--confidence", default="0.95")
    p.add_argument("--mode", default="blackbox", choices=["whitebox", "blackbox"])
    p.add_argument("--horizon", default=None, help="T (default 1000)")
    p.add_argument("--arms", default="2", help="K (default 2)")
    p.add_argument("--seed", default="0")
    p.add_argument("--score", default="auto", choices=["auto", "pulls", "next", "fitted"],
                   help="black-box score (auto: chosen on the selection split)")
    p.add_argument("--stop-at", default=None, help="last round each run plays")
    p.add_argument("--selection-fraction", default="0.1")
    p.add_argument("--range", default="0,1", help="declared reward range lo,hi")
    p.add_argument("--pair", nargs=2, default=None, metavar=("D", "D_PRIME"),
                   help="your own neighbouring tables (.npy, .csv or .json), differing in one row")
    p.add_argument("--sampler", default="float", choices=["float", "exact"],
                   help="audit the float or the exact-sampler form (lattice noise)")
    p.add_argument("--workers", default="1")
    p.add_argument("--out", default="audit.json")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def _num(name: str, text: str, kind=float):
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise DpledgerError(f"--{name} must be a number, got {text!r}") from None
    if kind is int:
        if not v.is_integer():
            raise DpledgerError(f"--{name} must be an integer, got {text!r}")
        return int(v)
    return v


class _Progress:
    """Trials done on stderr (a tqdm :class:`~dpledger.progress.Bar`, made at the first tick,
    when the total is known; its clock starts there, so compilation is not in the ETA)."""

    def __init__(self, quiet: bool):
        self.quiet, self.bar = quiet, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = Bar(total, "trial", quiet=self.quiet, desc="trials")
        self.bar.set(done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(args: argparse.Namespace) -> int:
    from dpledger.accounting.schema import write_json_atomic
    from dpledger.audits.pairs import NeighbourPair
    from dpledger.audits.policy import audit_policy
    from dpledger.commands.run import load_table, parse_params
    from dpledger.policies.registry import make_policy

    policy = make_policy(args.policy, **parse_params(args.set))
    trials = _num("trials", args.trials, int)
    confidence = _num("confidence", args.confidence)
    fraction = _num("selection-fraction", args.selection_fraction)
    seed = _num("seed", args.seed, int)
    K = _num("arms", args.arms, int)
    workers = _num("workers", args.workers, int)
    T = None if args.horizon is None else _num("horizon", args.horizon, int)
    stop = None if args.stop_at is None else _num("stop-at", args.stop_at, int)
    lohi = [x for x in args.range.split(",") if x.strip()]
    if len(lohi) != 2:
        raise DpledgerError(f"--range expects lo,hi, got {args.range!r}")
    lo, hi = (_num("range", x) for x in lohi)
    pair = None
    if args.pair:
        pair = NeighbourPair.from_tables(load_table(args.pair[0]), load_table(args.pair[1]), lo, hi)
    if not args.quiet:
        sys.stderr.write(f"auditing {policy!r} ({args.mode}), {trials} trials per stream\n")
    t0 = time.monotonic()
    progress = _Progress(args.quiet)
    try:
        res = audit_policy(policy, trials=trials, mode=args.mode, T=T, K=K, pair=pair, lo=lo,
                           hi=hi, score=args.score, stop_at=stop, seed=seed,
                           confidence=confidence, selection_fraction=fraction, workers=workers,
                           progress=progress, sampler=args.sampler)
    finally:
        progress.close()
    out = res.to_json()
    write_json_atomic(args.out, out)
    if not args.quiet:
        cert = res.certified
        cur = "mu" if res.currency == "mu" else "epsilon"
        line = (f"{cur}_lower {res.lower:.4g} at {res.confidence:g} confidence; certificate "
                f"{'unbounded' if cert is None else f'{cert:.4g}'}"
                + (f", ratio {res.ratio:.3f}" if res.ratio is not None else "")
                + (f"; epsilon_lower {res.epsilon_lower:.4g} at delta=1e-05 (assumes GDP shape)"
                   if cur == "mu" else "")
                + f"  [{time.monotonic() - t0:.1f}s]\n")
        sys.stdout.write(line)
        sys.stdout.write(f"wrote {args.out}\n")
    if res.violation:
        raise InvariantViolation(f"audit lower bound {res.lower:.6g} exceeds the certificate "
                                 f"{res.certified:.6g} (see {args.out})")
    return 0
