"""``dpledger audit POLICY ...``: a neighbouring-stream audit, written to audit.json
(docs/design.md#audits, docs/design.md#interfaces-and-json).

    dpledger audit POLICY [--set k=v ...] --trials N [--confidence 0.95]
                   [--mode whitebox|blackbox] [--horizon 1000] [--arms 2] [--seed 0]
                   [--score auto|pulls|next|fitted] [--stop-at ROUND]
                   [--selection-fraction 0.1] [--range lo,hi] [--pair D.npy D2.npy]
                   [--until-ratio R] [--max-trials N]
                   [--workers auto] [--quiet] [--plot audit.png] --out audit.json
    dpledger audit POLICY --sequential --trials N [--max-trials M] [--until-ratio R] [--claim E]
    dpledger audit POLICY --one-run --canaries m [--mode whitebox|blackbox] [--horizon T]
                   [--arms K] [--guesses k] [--claim E] [--seed 0] [--confidence 0.95]
    dpledger audit RELEASE [RELEASE ...] --trials N [--until-ratio R] [--max-trials N]
    dpledger audit CONTEXTUAL_POLICY [--set k=v ...] --trials N [--mode whitebox|blackbox]
                   [--horizon T] [--dim d] [--seed 0]

A contextual policy (``jdp-linucb``, ``dp-linucb-mt``, ``dp-lints-mt``, ``reward-dp-linucb``,
``episode-linucb``, ``adac-oful``) is audited on the built-in pair of
:mod:`dpledger.audits.contextual`: two contextual tables (K = 2, one context per arm) that
differ in their first record (the episode policies' white-box audit:
:mod:`dpledger.audits.contextual_episodes`).

A first argument containing ``:`` (or naming a release kind) is a release spec, as ``compose``
accepts them (``laplace:eps=1``, ``gaussian:mu=0.5``, ``laplace:scale=2,count=3``): the
white-box audit of that composition (:func:`dpledger.audits.mechanisms.audit_spec`).
``--until-ratio R`` makes the audit sequential: batches from ``--trials`` per side, doubling up
to ``--max-trials`` (default 100 × trials), until the lower bound reaches R × certificate or can
no longer, with a bound valid at that stopping time (union bound over the checkpoint grid).
``--sequential`` is the betting e-process of :mod:`dpledger.audits.betting` (valid under any
stopping rule); ``--one-run`` the canary audit of :mod:`dpledger.audits.one_run`
(docs/audits.md#one-run-audits).  ``--claim E`` tests a stated certificate besides the policy's
own (exit 1 when contradicted).
``--plot`` draws the score distributions under D and D′ with the threshold, and the bound
against trials.
``--trials`` counts runs per neighbouring stream.  Exit 0 when the lower bound stays at or below
the certificate, 1 when it exceeds it (an invariant violated: a bug in the code or the theorem;
audit.json is written first), 2 on bad input.  Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import sys
import time

from dpledger.errors import DpledgerError, InvariantViolation
from dpledger.inputs import (MAX_WORKERS, PLOT_EXTENSIONS, check_output_file, in_flag_terms,
                             load_table, parse_float, parse_int, parse_range)
from dpledger.progress import Bar


def register(sub) -> None:
    p = sub.add_parser("audit", help="neighbouring-stream audit: a lower bound on ε (or μ)")
    p.add_argument("policy", help="policy name (see `dpledger policies`), or release specs such "
                                  "as laplace:eps=1 (as `dpledger compose` takes them)")
    p.add_argument("releases", nargs="*",
                   help="more release specs, composed with the first (release audits only)")
    p.add_argument("--set", action="append", default=[], metavar="K=V",
                   help="policy parameter (repeatable; default: the policy's defaults), e.g. "
                        "--set epsilon=0.5")
    p.add_argument("--trials", default=None,
                   help="runs per neighbouring stream (an integer in [2, 1e9]; no default: required, "
                        "except with --one-run)")
    p.add_argument("--confidence", default="0.95",
                   help="confidence of the lower bound, in (0, 1) (default 0.95)")
    p.add_argument("--mode", default="blackbox", choices=["whitebox", "blackbox"],
                   help="blackbox (default): the auditor sees the actions only; whitebox: it "
                        "sees every noisy release containing the witness reward (where the "
                        "policy's kernel captures them; else its first release of the witness "
                        "arm)")
    p.add_argument("--horizon", default=None,
                   help="T, rounds per run (an integer; default 1000, or the pair's table "
                        "length with --pair)")
    p.add_argument("--arms", default=None, help="K, arms of the default pair (an integer >= 2; "
                                                "default 2; with --one-run, default --canaries)")
    p.add_argument("--seed", default="0", help="master seed (an integer >= 0; default 0)")
    p.add_argument("--score", default="auto", choices=["auto", "pulls", "next", "fitted"],
                   help="black-box score (default auto: chosen on the selection split)")
    p.add_argument("--stop-at", default=None,
                   help="last round each run plays (an integer in [witness round, T]; default: "
                        "found by pilot trials in whitebox mode, the pair's hint or T in "
                        "blackbox mode)")
    p.add_argument("--selection-fraction", default="0.1",
                   help="share of the trials used to choose the threshold (and score), in "
                        "(0, 1) (default 0.1)")
    p.add_argument("--range", default="0,1", help="declared reward range lo,hi (default 0,1)")
    p.add_argument("--pair", nargs=2, default=None, metavar=("D", "D_PRIME"),
                   help="your own neighbouring reward tables (.npy, .csv or .json), differing in "
                        "one row (default: the policy's built-in pair)")
    p.add_argument("--sampler", default="float", choices=["float", "exact"],
                   help="audit the float (default) or the exact-sampler form (lattice noise)")
    p.add_argument("--until-ratio", default=None,
                   help="sequential audit: stop once the lower bound reaches R x certificate "
                        "(a number > 0; default: a fixed-n audit)")
    p.add_argument("--max-trials", default=None,
                   help="sequential audit: at most this many trials per side (an integer >= "
                        "--trials; default 100 x --trials)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="draw the score distributions under D and D' with the threshold, and "
                        "the bound against trials (default: no plot)")
    p.add_argument("--tradeoff", default=None, metavar="PNG",
                   help="white-box fixed-n audits: draw the empirical trade-off curve of the "
                        "likelihood-ratio test with its simultaneous DKW band beside the "
                        "certified curves, and add the largest mu and epsilon(delta) the band "
                        "excludes to the audit file (default: none)")
    p.add_argument("--workers", default="auto",
                   help="threads that run trials in parallel (processes for a policy without a "
                        "compiled kernel; a release-spec audit uses one): an integer >= 1, or "
                        "auto = the CPUs this process may use (default auto); the result does "
                        "not depend on it")
    p.add_argument("--sequential", action="store_true",
                   help="sequential audit by betting (an e-process for the event's two rates, "
                        "valid under optional stopping): stops when the certificate (or "
                        "--claim) is contradicted, --until-ratio R x certificate is reached, "
                        "or at --max-trials (default 100 x --trials); a GDP certificate is "
                        "tested in mu through a fixed epsilon grid (default: off)")
    p.add_argument("--one-run", action="store_true",
                   help="one-run audit (Steinke, Nasr & Jagielski 2023): one run with "
                        "--canaries rows whose rewards a private fair coin each sets to the "
                        "range's ends; lower bound from the correct guesses (default: off)")
    p.add_argument("--store", default=None, metavar="URL",
                   help="served one-run audit: send --canaries through the step form of "
                        "POLICY to this live ledger store (SQLite path or postgresql:// URL), "
                        "in auditor runs of their own, labelled in the store (default: none)")
    p.add_argument("--canaries", default=None,
                   help="--one-run: the number m of canaries (an integer in [1, T]; no default: "
                        "required with --one-run)")
    p.add_argument("--guesses", default=None,
                   help="--one-run: guess only the k most confident canaries (an integer in "
                        "[1, m]; default: the grid m x (0.01, 0.03, 0.1, 0.3, 1), Bonferroni)")
    p.add_argument("--claim", default=None,
                   help="--one-run, --store and --sequential: a stated certificate (epsilon, "
                        "or mu for a GDP policy) to test besides the policy's "
                        "own, e.g. a paper's; exit 1 when contradicted (default: none)")
    p.add_argument("--dim", default=None,
                   help="contextual policies: the context dimension d of the built-in pair "
                        "(an integer >= 1; default 2)")
    p.add_argument("--out", default="audit.json",
                   help="audit result to write (default audit.json); checked before the trials")
    p.add_argument("--quiet", action="store_true",
                   help="print nothing on stdout and no progress on stderr (default: off)")
    p.set_defaults(func=run)


MAX_HORIZON = 10 ** 9          # validate_horizon's maximum, as in `dpledger run`
MAX_COUNT = 10 ** 9            # trials per stream: 1e30 would build 5e26 chunk tasks first


class _Progress:
    """Trials done on stderr (a tqdm :class:`~dpledger.progress.Bar`, made at the first tick,
    when the total is known; its clock starts there, so compilation is not in the ETA)."""

    def __init__(self, quiet: bool, banner: str = ""):
        self.quiet, self.bar, self.banner = quiet, None, banner

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            # the banner comes with the first trials, not before: an input the audit refuses
            # early (a pair, a horizon too short for the witness release) gets its one error
            # line alone
            if self.banner and not self.quiet:
                sys.stderr.write(self.banner + "\n")
            self.bar = Bar(total, "trial", quiet=self.quiet, desc="trials")
        self.bar.set(done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(args: argparse.Namespace) -> int:
    from dpledger.accounting.schema import write_json_atomic
    from dpledger.audits.pairs import NeighbourPair
    from dpledger.audits.policy import audit_policy

    check_output_file(args.out, "--out")
    if args.plot:
        check_output_file(args.plot, "--plot", PLOT_EXTENSIONS)
    if args.store is not None:
        return _run_served(args)
    if args.one_run:
        if args.tradeoff is not None or args.sequential:
            raise DpledgerError("--tradeoff and --sequential do not apply to a one-run audit")
        return _run_one_run(args)
    _check_tradeoff(args)
    stray = [f for f, v in (("--canaries", args.canaries), ("--guesses", args.guesses))
             if v is not None]
    if stray:
        raise DpledgerError(f"{', '.join(stray)} {'applies' if len(stray) == 1 else 'apply'} "
                            "to a one-run audit; add --one-run")
    if args.claim is not None and not args.sequential:
        raise DpledgerError("--claim applies to --one-run and --sequential audits")
    if args.trials is None:
        raise DpledgerError("--trials is required (runs per neighbouring stream), except with "
                            "--one-run")
    trials = parse_int("--trials", args.trials, minimum=2, maximum=MAX_COUNT)
    until = None if args.until_ratio is None else parse_float("--until-ratio", args.until_ratio,
                                                              minimum=0.0, open_interval=True)
    if args.max_trials is not None and until is None and not args.sequential:
        # alone it would silently turn a fixed-n audit sequential
        raise DpledgerError("--max-trials applies to a sequential audit; add --until-ratio R "
                            "(or drop --max-trials for a fixed-n audit of --trials)")
    max_trials = None if args.max_trials is None else parse_int(
        "--max-trials", args.max_trials, minimum=trials, maximum=MAX_COUNT)
    # checked for both kinds of audit (a release-spec audit is one vectorised draw and uses
    # one worker whatever the count: the result never depends on it)
    workers = parse_workers(args.workers)
    if args.sequential and (_is_release_spec(args.policy) or _is_contextual(args.policy)):
        raise DpledgerError("--sequential audits a policy on its neighbouring pair (not release "
                            "specs or contextual policies; for those use --until-ratio)")
    if _is_release_spec(args.policy):
        return _run_spec(args, trials, until, max_trials)
    from dpledger.policies.registry import is_contextual
    if is_contextual(args.policy):
        return _run_contextual(args, trials, until, max_trials)
    if args.dim is not None:
        raise DpledgerError("--dim applies to contextual policies (their pair's context "
                            "dimension)")
    policy, confidence, fraction, seed = _policy_options(args)
    K = parse_int("--arms", "2" if args.arms is None else args.arms, minimum=2)
    T = None if args.horizon is None else parse_int("--horizon", args.horizon, 1, MAX_HORIZON)
    stop = None if args.stop_at is None else parse_int("--stop-at", args.stop_at, minimum=1)
    lo, hi = parse_range("--range", args.range)
    if args.mode == "whitebox" and args.score != "auto":
        raise DpledgerError("--score chooses the black-box score; a white-box audit scores the "
                            "captured releases (drop --score, or use --mode blackbox)")
    if args.mode == "whitebox" and not getattr(policy, "private", True):
        raise DpledgerError(f"{args.policy} makes no private release (it reads rewards without "
                            "noise), so a white-box audit has no noisy release to look at; "
                            "use --mode blackbox (its certificate is unbounded either way)")
    pair = None
    if args.pair:
        pair = NeighbourPair.from_tables(load_table(args.pair[0], "--pair"),
                                         load_table(args.pair[1], "--pair"), lo, hi)
    t0 = time.monotonic()
    progress = _Progress(args.quiet, f"auditing {policy!r} ({args.mode}), {trials} trials per "
                                      "stream")
    try:
        res = audit_policy(policy, trials=trials, mode=args.mode, T=T, K=K, pair=pair, lo=lo,
                           hi=hi, score=args.score, stop_at=stop, seed=seed,
                           confidence=confidence, selection_fraction=fraction, workers=workers,
                           progress=progress, sampler=args.sampler, until_ratio=until,
                           max_trials=max_trials, betting=args.sequential,
                           claim=None if args.claim is None else parse_float(
                               "--claim", args.claim, minimum=0.0, open_interval=True))
    except DpledgerError as exc:
        raise in_flag_terms(exc) from None          # stop_at → --stop-at
    finally:
        progress.close()
    out = res.to_json()
    _tradeoff(args, res, out)
    write_json_atomic(args.out, out)
    if args.plot:
        from dpledger.audits.plots import plot_audit
        plot_audit(res, args.plot)
    if not args.quiet:
        cert = res.certified
        cur = "mu" if res.currency == "mu" else "epsilon"
        unbounded = "unbounded" + ("" if getattr(policy, "private", True) else
                                   f" ({args.policy} makes no private release)")
        line = (f"{cur}_lower {res.lower:.4g} at {res.confidence:g} confidence; certificate "
                f"{unbounded if cert is None else f'{cert:.4g}'}"
                + (f", ratio {res.ratio:.3f}" if res.ratio is not None else "")
                + (f"; epsilon_lower {res.epsilon_lower:.4g} at delta=1e-05 (assumes GDP shape)"
                   if cur == "mu" else "")
                + f"  [{time.monotonic() - t0:.1f}s]\n")
        sys.stdout.write(line)
        bp = out.get("best_possible")
        if bp is not None:
            # the composition's limit at this n (audits/optimal.py): tells a composition-limited
            # ratio from a policy-limited one.  It is a typical value, at expected counts: one
            # audit's bound scatters around it, above as well as below
            sys.stdout.write(f"typical bound of the best test at this n: {bp['value']:.4g}"
                             + (f" (ratio {bp['ratio']:.3f})" if "ratio" in bp else "")
                             + " — at expected counts, so one audit's bound may fall above or "
                             f"below it; ceiling {out['ceiling']:.4g} (no audit of this n can "
                             "exceed it)\n")
        _sequential_line(out, until)
        _limit_line(out)
        if res.lower == 0:
            more = ("a --pair of your own" if args.mode == "whitebox" else
                    "--mode whitebox (the auditor then sees the noisy release) or a --pair of "
                    "your own")
            sys.stdout.write("note: a lower bound of 0 means this audit found no evidence of "
                             "leakage at its power: neither a pass nor a failure. More --trials "
                             f"give more power; so can {more}.\n")
        sys.stdout.write(f"wrote {args.out}\n")
    return _finish(res, args)


_STOP_REASONS = {
    "reached": "the lower bound reached {target}",
    "cannot_reach": "the bound could no longer reach {target} within --max-trials (its counts "
                    "so far, projected, fall short)",
    "max_trials": "--max-trials was drawn without the bound reaching {target}",
}


def _sequential_line(out: dict, until: float | None) -> None:
    """Why a sequential audit stopped, and where."""
    seq = out.get("sequential")
    if not isinstance(seq, dict):
        return
    if seq.get("kind") == "betting":
        cur = "mu " if seq.get("currency") == "mu" else ""
        why = {"contradicted": f"the claim {cur}{seq['claim']:.4g} is contradicted (e-value "
                               f"{seq['e_value_at_claim']:.3g} >= 1/alpha)",
               "reached": f"the lower bound reached {seq['target']}",
               "max_trials": "--max-trials was drawn"}[seq["stop_reason"]]
        sys.stdout.write(f"sequential (betting e-process): stopped at {seq['trials_drawn']} "
                         f"trials per side: {why} (stop_reason {seq['stop_reason']})\n")
        return
    target = (f"{until:g} × the certificate" if until is not None else "its target")
    why = _STOP_REASONS.get(seq.get("stop_reason"), str(seq.get("stop_reason")))
    sys.stdout.write(f"sequential: stopped at {seq.get('trials_drawn')} trials per side of at "
                     f"most {seq['checkpoints'][-1]}: " + why.format(target=target)
                     + f" (stop_reason {seq.get('stop_reason')})\n")


def _limit_line(out: dict) -> None:
    """A black-box design's stated limit (the pair's ``limit_reason``): its first sentence."""
    pair = out.get("pair") if isinstance(out.get("pair"), dict) else {}
    reason = out.get("limit_reason") or pair.get("limit_reason")
    if reason:
        first = reason.split(". ")[0].rstrip(".")
        sys.stdout.write(f"note: the actions reveal less than the releases here: {first} "
                         "(limit_reason in the audit file has the computed bound)\n")


def _check_tradeoff(args) -> None:
    if args.tradeoff is None:
        return
    check_output_file(args.tradeoff, "--tradeoff", PLOT_EXTENSIONS)
    if args.mode != "whitebox" or args.sequential or args.until_ratio is not None:
        raise DpledgerError("--tradeoff draws the white-box likelihood-ratio test of a fixed-n "
                            "audit (--mode whitebox, no --sequential or --until-ratio)")


def _tradeoff(args, res, out: dict) -> None:
    """``--tradeoff PNG``: the trade-off figure, and its block in the audit file."""
    if args.tradeoff is None:
        return
    from dpledger.audits.tradeoff import plot_tradeoff
    pd = res.plot_data or {}
    title = (f"{args.policy} white-box, {len(pd['s0'])} count trials per side; "
             f"certificate {res.certified:.3g} {res.currency}")
    out["tradeoff"] = plot_tradeoff(pd["s0"], pd["s1"], getattr(res, "certificate_object", None),
                                    args.tradeoff, title, confidence=res.confidence)
    if not args.quiet:
        t = out["tradeoff"]
        sys.stdout.write(f"trade-off band ({t['confidence']:g}, DKW): excludes mu <= "
                         f"{t['mu_excluded']:.4g}; epsilon at delta=1e-05 <= "
                         f"{t['epsilon_excluded']['1e-05']:.4g}; wrote {args.tradeoff}\n")


def _is_contextual(name: str) -> bool:
    from dpledger.policies.registry import is_contextual
    return is_contextual(name)


def _finish(res, args) -> int:
    claim = res.to_json().get("claim") if getattr(args, "sequential", False) else None
    if claim and claim["contradicted"] and not res.violation:
        raise InvariantViolation(f"sequential audit contradicts the claimed certificate "
                                 f"{claim['value']:.6g} (see {args.out})")
    if res.violation:
        raise InvariantViolation(f"audit lower bound {res.lower:.6g} exceeds the certificate "
                                 f"{res.certified:.6g} (see {args.out})")
    return 0


def _is_release_spec(text: str) -> bool:
    from dpledger.accounting.releases import RELEASE_TYPES, _KIND_ALIASES
    kind = text.strip().partition(":")[0].lower()
    return ":" in text or kind in RELEASE_TYPES or kind in _KIND_ALIASES


def parse_workers(text) -> int:
    """``--workers``: an integer ≥ 1, or auto = every CPU this process may use
    (:func:`~dpledger.policies.simulator.available_cpus`)."""
    from dpledger.policies.simulator import available_cpus
    if str(text).strip().lower() == "auto":
        return available_cpus()
    return parse_int("--workers", text, minimum=1, maximum=MAX_WORKERS)


def _policy_options(args):
    """(policy, confidence, selection fraction, seed) of a policy audit's command line."""
    from dpledger.commands.run import parse_params
    from dpledger.policies.registry import make_policy_from_text
    if args.releases:
        raise DpledgerError(f"unexpected arguments after the policy name: {' '.join(args.releases)}")
    policy = make_policy_from_text(args.policy, parse_params(args.set))
    confidence = parse_float("--confidence", args.confidence, minimum=0.0, maximum=1.0,
                             open_interval=True)
    fraction = parse_float("--selection-fraction", args.selection_fraction, minimum=0.0,
                           maximum=1.0, open_interval=True)
    return policy, confidence, fraction, parse_int("--seed", args.seed, minimum=0)


def _run_contextual(args, trials, until, max_trials) -> int:
    """``dpledger audit jdp-linucb ...``: the contextual pair of
    :mod:`dpledger.audits.contextual` (two tables differing in their first record)."""
    from dpledger.accounting.schema import write_json_atomic
    from dpledger.audits.contextual import audit_contextual
    ignored = [flag for flag, val, default in (
        ("--arms", args.arms, None), ("--score", args.score, "auto"),
        ("--stop-at", args.stop_at, None), ("--range", args.range, "0,1"),
        ("--pair", args.pair, None), ("--sampler", args.sampler, "float"),
        ("--until-ratio", until, None), ("--max-trials", max_trials, None),
        ("--plot", args.plot, None)) if val != default]
    if ignored:
        raise DpledgerError(f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not "
                            "apply to a contextual audit (its pair "
                            "is built in: K = 2, rewards in [0, 1], float sampler, fixed n)")
    policy, confidence, fraction, seed = _policy_options(args)
    T = None if args.horizon is None else parse_int("--horizon", args.horizon, 1, 1 << 16)
    dim = 2 if args.dim is None else parse_int("--dim", args.dim, 1, 64)
    t0 = time.monotonic()
    progress = _Progress(args.quiet, f"auditing {policy!r} ({args.mode}, contextual pair), "
                                      f"{trials} trials per stream")
    try:
        if hasattr(policy, "plan_phase"):        # phased elimination on a fixed arm set
            from dpledger.audits.phased import audit_phased
            if T is not None:
                raise DpledgerError("--horizon does not apply to a phased audit (T is its "
                                    "first phase's length)")
            res = audit_phased(policy, trials=trials, mode=args.mode, dim=dim, seed=seed,
                               confidence=confidence, selection_fraction=fraction,
                               progress=progress)
        else:
            res = audit_contextual(policy, trials=trials, mode=args.mode, T=T, dim=dim,
                                   seed=seed, confidence=confidence,
                                   selection_fraction=fraction, progress=progress)
    except DpledgerError as exc:
        raise in_flag_terms(exc) from None
    finally:
        progress.close()
    out = res.to_json()
    _tradeoff(args, res, out)
    write_json_atomic(args.out, out)
    if not args.quiet:
        cert = res.certified
        cur = "mu" if res.currency == "mu" else "epsilon"
        at = "" if out["delta"] in (0.0, 1e-5) or cur == "mu" else f" at delta={out['delta']:g}"
        sys.stdout.write(f"{cur}_lower{at} {res.lower:.4g} at {res.confidence:g} confidence; "
                         f"certificate {'unbounded' if cert is None else f'{cert:.4g}'}"
                         + (f", ratio {res.ratio:.3f}" if res.ratio is not None else "")
                         + f"; ceiling {out['ceiling']:.4g}  [{time.monotonic() - t0:.1f}s]\n")
        reason = out["pair"].get("limit_reason")
        if reason:
            sys.stdout.write(f"note: this pair cannot reach the certificate: "
                             f"{reason.split('. ')[0].rstrip('.')} (limit_reason in the audit "
                             "file has the computed bound)\n")
        sys.stdout.write(f"wrote {args.out}\n")
    return _finish(res, args)


def _run_served(args) -> int:
    """``dpledger audit POLICY --store URL --canaries m``: :func:`dpledger.audits.
    one_run_served.audit_served`."""
    from dpledger.accounting.schema import write_json_atomic
    from dpledger.audits.one_run_served import audit_served
    ignored = [flag for flag, val, default in (
        ("--trials", args.trials, None), ("--score", args.score, "auto"),
        ("--stop-at", args.stop_at, None), ("--pair", args.pair, None),
        ("--horizon", args.horizon, None), ("--sequential", args.sequential, False),
        ("--sampler", args.sampler, "float"), ("--until-ratio", args.until_ratio, None),
        ("--max-trials", args.max_trials, None), ("--plot", args.plot, None),
        ("--tradeoff", args.tradeoff, None), ("--dim", args.dim, None),
        ("--range", args.range, "0,1")) if val != default]
    if ignored:
        raise DpledgerError(f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not "
                            "apply to a served audit (--store URL --canaries m)")
    if args.canaries is None:
        raise DpledgerError("--store needs --canaries m (the canaries to send)")
    m = parse_int("--canaries", args.canaries, minimum=1, maximum=10 ** 6)
    K = 2 if args.arms is None else parse_int("--arms", args.arms, minimum=2)
    guesses = None if args.guesses is None else parse_int("--guesses", args.guesses, minimum=1,
                                                         maximum=10 ** 6)
    claim = None if args.claim is None else parse_float("--claim", args.claim, minimum=0.0,
                                                        open_interval=True)
    confidence = parse_float("--confidence", args.confidence, minimum=0.0, maximum=1.0,
                             open_interval=True)
    seed = parse_int("--seed", args.seed, minimum=0)
    if args.releases:
        raise DpledgerError(f"unexpected arguments after the policy name: {' '.join(args.releases)}")
    t0 = time.monotonic()
    try:
        res = audit_served(args.store, args.policy, canaries=m, arms=K, mode=args.mode,
                           seed=seed, confidence=confidence, guesses=guesses, claim=claim,
                           params=_typed_params(args))
    except DpledgerError as exc:
        raise in_flag_terms(exc) from None
    out = res.to_json()
    write_json_atomic(args.out, out)
    if not args.quiet:
        cert = res.certified
        sv = out["served"]
        sys.stdout.write(
            f"epsilon_lower {res.lower:.4g} at {res.confidence:g} confidence from the served "
            f"store ({res.correct} of {res.guesses} guesses right, {res.canaries} canaries in "
            f"auditor runs {sv['auditor_runs'][0]}-{sv['auditor_runs'][1]}, labelled "
            f"{sv['label']}); certificate {'unbounded' if cert is None else f'{cert:.4g}'}"
            f"; ceiling {res.ceiling:.4g}  [{time.monotonic() - t0:.1f}s]\n"
            f"wrote {args.out}\n")
    claim_j = out.get("claim")
    if claim_j and claim_j["contradicted"] and not res.violation:
        raise InvariantViolation(f"served one-run lower bound {res.lower:.6g} exceeds the "
                                 f"claimed certificate {claim_j['value']:.6g} (see {args.out})")
    return _finish(res, args)


def _typed_params(args) -> dict:
    """The --set parameters as the policy parses them (typed), the given keys only."""
    from dpledger.commands.run import parse_params
    from dpledger.policies.registry import make_policy_from_text
    given = parse_params(args.set)
    policy = make_policy_from_text(args.policy, given)
    return {k: policy.params[k] for k in given}


def _run_one_run(args) -> int:
    """``dpledger audit POLICY --one-run --canaries m``: :func:`dpledger.audits.one_run.
    audit_one_run` (or its contextual form), written to ``--out``."""
    from dpledger.accounting.schema import write_json_atomic
    from dpledger.audits.one_run import audit_one_run
    from dpledger.policies.registry import is_contextual
    if _is_release_spec(args.policy):
        raise DpledgerError("--one-run audits a policy (its canaries are reward rows), not "
                            "release specs")
    ignored = [flag for flag, val, default in (
        ("--trials", args.trials, None), ("--score", args.score, "auto"),
        ("--stop-at", args.stop_at, None), ("--pair", args.pair, None),
        ("--sampler", args.sampler, "float"), ("--until-ratio", args.until_ratio, None),
        ("--max-trials", args.max_trials, None), ("--plot", args.plot, None),
        ("--selection-fraction", args.selection_fraction, "0.1")) if val != default]
    if ignored:
        raise DpledgerError(f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not "
                            "apply to a one-run audit (one run, no trials, no selection split)")
    if args.canaries is None:
        raise DpledgerError("--one-run needs --canaries m (the number of canary rows)")
    m = parse_int("--canaries", args.canaries, minimum=1, maximum=MAX_COUNT)
    guesses = None if args.guesses is None else parse_int("--guesses", args.guesses, minimum=1,
                                                         maximum=MAX_COUNT)
    claim = None if args.claim is None else parse_float("--claim", args.claim, minimum=0.0,
                                                        open_interval=True)
    policy, confidence, _, seed = _policy_options(args)
    T = None if args.horizon is None else parse_int("--horizon", args.horizon, 1, MAX_HORIZON)
    t0 = time.monotonic()
    try:
        if is_contextual(args.policy):
            from dpledger.audits.one_run_contextual import audit_one_run_contextual
            if args.arms is not None or args.range != "0,1":
                raise DpledgerError("--arms and --range do not apply to a contextual one-run "
                                    "audit (its records are built in: K = 2, rewards in [0, 1])")
            dim = 2 if args.dim is None else parse_int("--dim", args.dim, 1, 64)
            res = audit_one_run_contextual(policy, canaries=m, mode=args.mode, T=T, dim=dim,
                                           seed=seed, confidence=confidence, guesses=guesses,
                                           claim=claim)
        else:
            if args.dim is not None:
                raise DpledgerError("--dim applies to contextual policies")
            K = None if args.arms is None else parse_int("--arms", args.arms, minimum=2)
            lo, hi = parse_range("--range", args.range)
            res = audit_one_run(policy, canaries=m, mode=args.mode, T=T, K=K, lo=lo, hi=hi,
                                seed=seed, confidence=confidence, guesses=guesses, claim=claim)
    except DpledgerError as exc:
        raise in_flag_terms(exc) from None
    out = res.to_json()
    write_json_atomic(args.out, out)
    if not args.quiet:
        cur = "mu" if res.currency == "mu" else "epsilon"
        cert = res.certified
        sys.stdout.write(
            f"{cur}_lower {res.lower:.4g} at {res.confidence:g} confidence from one run "
            f"({res.correct} of {res.guesses} guesses right, {res.canaries} canaries); "
            f"certificate {'unbounded' if cert is None else f'{cert:.4g}'}"
            + (f", ratio {res.ratio:.3f}" if res.ratio is not None else "")
            + f"; ceiling at m = {res.canaries}: {res.ceiling:.4g}"
            + (f" (bound = {out['ratio_of_ceiling']:.3f} of it)" if out["ratio_of_ceiling"]
               is not None else "") + f"  [{time.monotonic() - t0:.1f}s]\n")
        c = out.get("claim")
        if c:
            sys.stdout.write(f"claim {c['value']:g}: "
                             + ("CONTRADICTED by this run" if c["contradicted"] else
                                "not contradicted at this power") + "\n")
        sys.stdout.write(f"wrote {args.out}\n")
    claim = out.get("claim")
    if claim and claim["contradicted"] and not res.violation:
        raise InvariantViolation(f"one-run lower bound {res.lower:.6g} exceeds the claimed "
                                 f"certificate {claim['value']:.6g} (see {args.out})")
    return _finish(res, args)


def _audit_spec(args, trials, until, max_trials):
    from dpledger.audits.mechanisms import audit_spec
    draws = _Draws(args.quiet)
    try:
        return audit_spec([args.policy] + list(args.releases), trials,
                          seed=parse_int("--seed", args.seed, minimum=0),
                          confidence=parse_float("--confidence", args.confidence, minimum=0.0,
                                                 maximum=1.0, open_interval=True),
                          selection_fraction=parse_float("--selection-fraction",
                                                         args.selection_fraction, minimum=0.0,
                                                         maximum=1.0, open_interval=True),
                          until_ratio=until, max_trials=max_trials, progress=draws)
    finally:
        draws.close()


class _Draws:
    """Noise entries drawn, on stderr (a :class:`~dpledger.progress.Bar` shown after a
    second): a mechanism audit of a large matrix draws billions (issue 34 §3)."""

    def __init__(self, quiet: bool):
        self.quiet, self.bar = quiet, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = Bar(total, "entry", quiet=self.quiet, desc="noise entries drawn")
        self.bar.set(done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_spec(args, trials, until, max_trials) -> int:
    """``dpledger audit laplace:eps=1 ...``: the white-box audit of a composition of releases."""
    from dpledger.accounting.schema import write_json_atomic
    ignored = [flag for flag, val, default in (
        ("--set", args.set, []), ("--mode", args.mode, "blackbox"), ("--horizon", args.horizon, None),
        ("--arms", args.arms, None), ("--score", args.score, "auto"), ("--stop-at", args.stop_at, None),
        ("--range", args.range, "0,1"), ("--pair", args.pair, None),
        ("--sampler", args.sampler, "float")) if val != default]
    if ignored:
        raise DpledgerError(f"{', '.join(ignored)} apply to policy audits, not to release specs")
    try:
        res = _audit_spec(args, trials, until, max_trials)
    except DpledgerError as exc:
        raise in_flag_terms(exc) from None
    write_json_atomic(args.out, res.to_json())
    if args.plot:
        from dpledger.audits.plots import plot_audit
        plot_audit(res, args.plot)
    if not args.quiet:
        cert = res.certified
        cur = "mu" if res.currency == "mu" else "epsilon"
        sys.stdout.write(f"{cur}_lower {res.lower:.4g} at {res.confidence:g} confidence; certificate "
                         f"{'unbounded' if cert is None else f'{cert:.4g}'}"
                         + (f", ratio {res.ratio:.3f}" if res.ratio is not None else "")
                         + f"; ceiling {res.extra['ceiling']:.4g} ({res.trials} trials per side)\n")
        _sequential_line(res.to_json(), until)
        _limit_line(res.to_json())
        sys.stdout.write(f"wrote {args.out}\n")
    return _finish(res, args)

