"""``dpledger show run.json [--plot FILE]``: the run's summary and its per-reward privacy.

The per-reward view needs the ledger written next to run.json (``<stem>.ledger.json``); the plot
draws each reward's pure ε (μ for Gaussian ledgers, zCDP ρ for the exact sampler's discrete
Gaussians) against the round it was observed, with the
worst reward marked and the certificate as a line.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

from dpledger.accounting.ledger import RewardLedger
from dpledger.commands.show_summary import summary_text
from dpledger.errors import DpledgerError
from dpledger.inputs import PLOT_EXTENSIONS, check_output_file, load_ledger, load_run_json

MAX_POINTS = 20_000


def register(sub) -> None:
    p = sub.add_parser("show", help="summary and per-reward privacy of a run")
    p.add_argument("file", help="a run.json written by `dpledger run`, or a ledger store")
    p.add_argument("--ledger", default=None,
                   help="its ledger file (default <stem>.ledger.json next to the run.json; "
                        "without one the per-reward view is skipped)")
    p.add_argument("--plot", default=None,
                   help="also plot each reward's privacy against its round to this file (.png, "
                        ".pdf, .svg, …; needs the ledger; for a ledger store: against the "
                        "observation index, with the budget; default: no plot)")
    p.set_defaults(func=run)


def per_reward(ledger: RewardLedger):
    """(rounds, values, streams, currency): per-reward privacy as steps.  Without posterior
    reads a piece's rewards share one value, so each piece gives its first reward (and each
    stream its last reward, closing the last step); with posterior reads values change reward
    by reward and a sample of rewards is given (every piece's first, its worst, among them).
    ``streams`` names each point's (run, arm) stream as one integer, for drawing steps."""
    pt = ledger.piece_totals()
    key, currency = ledger._piece_keys(pt)
    if pt.varying:
        piece, index, mu2 = ledger._per_reward(pt, sample=MAX_POINTS)
        key = key[piece] - pt.mu2_inline[piece] + mu2     # the other records' part unchanged
        run, arm = pt.run[piece], pt.arm[piece]
        vals = key
    else:
        idx = np.arange(pt.start.size)
        if idx.size > MAX_POINTS:       # drawing only: the summary line gives exact quantiles
            idx = np.unique(np.r_[np.linspace(0, idx.size - 1, MAX_POINTS).astype(int),
                                  np.argmax(key)])
        # each stream's last reward closes its last step
        last = np.r_[pt.run[1:] != pt.run[:-1], True] | np.r_[pt.arm[1:] != pt.arm[:-1], True]
        ends = np.flatnonzero(last)
        run = np.r_[pt.run[idx], pt.run[ends]]
        arm = np.r_[pt.arm[idx], pt.arm[ends]]
        index = np.r_[pt.start[idx], pt.stop[ends] - 1]
        vals = np.r_[key[idx], key[ends]]
    rounds = np.array([ledger.round_of(int(r), int(a), int(i)) or 0
                       for r, a, i in zip(run, arm, index, strict=True)], dtype=np.int64)
    streams = run.astype(np.int64) * (int(arm.max()) + 1 if arm.size else 1) + arm
    order = np.lexsort((rounds, streams))
    values = vals if currency == "pure" else vals / 2.0 if currency == "zcdp" \
        else np.sqrt(np.maximum(vals, 0.0))     # zcdp (exact sampler): the key is 2ρ
    return rounds[order], values[order], streams[order], currency


def _summary(rep: dict, path: str) -> str:
    """The summary text; a value of the wrong type deep inside the file (the loader checks the
    structure, not every leaf) is one clear error, not a traceback."""
    try:
        return summary_text(rep)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise DpledgerError(f"{path}: malformed run.json: {exc!r}") from None


def _ledger_path(args, rep: dict) -> tuple[str | None, str]:
    """The ledger file to show (None, and why, when there is none): the one run.json records
    (``ledger.file``, relative to run.json) or ``--ledger``, checked against run.json's sha256
    and size as ``verify`` checks it — another run's ledger is refused, not shown; a run.json
    that records no ledger entry (older files) falls back to ``<stem>.ledger.json``."""
    from dpledger.verify import locate_ledger
    led = rep.get("ledger")
    if not (isinstance(led, dict) and "file" in led):
        path = args.ledger or os.path.splitext(args.file)[0] + ".ledger.json"
        if args.ledger is None and not os.path.exists(path):
            return None, f"no ledger file {path}"
        return path, ""
    where = locate_ledger(args.file, rep, args.ledger)
    if where.mismatch:
        if args.ledger:
            load_ledger(args.ledger, "--ledger")    # not a ledger at all: say what it is
        name = f"--ledger {args.ledger}" if args.ledger else f"the ledger file {led['file']}"
        raise DpledgerError(f"{name} is not the ledger {args.file} recorded: {where.mismatch}")
    if where.problem:
        raise DpledgerError(f"{args.file}: {where.problem}")
    return where.path, where.note or ""


def run(args) -> int:
    from dpledger.commands.ledger import store_dispatch
    from dpledger.inputs import refuse_special_file
    refuse_special_file(args.file, "a run.json or a ledger store")   # before anything opens it
    code = store_dispatch("show", args)     # a ledger store, not a run.json
    if code is not None:
        return code
    if args.plot is not None:
        check_output_file(args.plot, "--plot", PLOT_EXTENSIONS)
    rep = load_run_json(args.file)
    path, missing = _ledger_path(args, rep)
    if path is None:
        if args.plot is not None:       # the plot would silently not be drawn
            raise DpledgerError(f"--plot needs the ledger, and {missing}; pass --ledger FILE "
                                "(`dpledger run` writes ledgers above 2e6 records only with "
                                "--ledger-out FILE)")
        sys.stdout.write(_summary(rep, args.file))
        sys.stdout.write(f"({missing}: per-reward view unavailable; `dpledger run` writes "
                         "ledgers above 2e6 records only with --ledger-out FILE)\n")
        return 0
    ledger = load_ledger(path, "--ledger" if args.ledger else None)
    sys.stdout.write(_summary(rep, args.file))
    rounds, values, streams, currency = per_reward(ledger)
    finite = np.isfinite(values)
    if not finite.any():
        kinds = {r.kind for r in ledger.releases}
        if kinds and kinds <= {"approx_dp", "wishart"}:
            # (ε, δ) statements have no pure, GDP or zCDP key to draw per reward
            what = ("every observed reward is covered by (ε, δ) statements only: no per-reward "
                    "pure ε, GDP μ or zCDP ρ to show; see the certificate and realized ε at δ")
        else:
            what = "every observed reward was read without noise: privacy unbounded"
        sys.stdout.write(what + (f" (nothing to plot: {args.plot} not written)" if args.plot
                                 else "") + "\n")
        return 0
    qs = np.quantile(values[finite], [0.0, 0.5, 0.9, 1.0])
    name = {"pure": "pure ε", "zcdp": "zCDP ρ"}.get(currency, "GDP μ")
    pt = ledger.piece_totals()
    groups = int(np.where(pt.mu2_reads > 0, pt.stop - pt.start, 1).sum()) if pt.varying \
        else pt.start.size
    shown = values.size if pt.varying else min(values.size, groups)
    over = (f"over {groups} reward groups" if shown >= groups else
            f"over an even sample of {shown} of {groups} reward groups (min, median and 90% of "
            "the sample; the max is exact: every group's worst reward is in it)")
    sys.stdout.write(f"per-reward {name}: min {qs[0]:.4g}, median {qs[1]:.4g}, "
                     f"90% {qs[2]:.4g}, max {qs[3]:.4g} {over}\n")
    if args.plot:
        from dpledger.plots import plot_per_reward
        w = rep["privacy"]["realized"].get("worst_reward")
        cert = rep["privacy"]["certificate"][{"pure": "pure_epsilon", "zcdp": "zcdp_rho"}.get(
            currency, "gdp_mu")]
        i = int(np.nanargmax(np.where(finite, values, -np.inf)))
        wr = w["round"] if isinstance(w, dict) and w.get("round") else rounds[i]
        plot_per_reward(rounds[finite], values[finite], streams[finite], wr,
                        float(np.nanmax(values[finite])),
                        args.plot, f"per-reward {name}", f"{rep['policy']['name']}: per-reward "
                        f"privacy ({rep['runs']} runs)", cert if cert is not None and
                        math.isfinite(cert) else None)
        sys.stdout.write(f"wrote {args.plot}\n")
    return 0
