"""``dpledger ledger init|record|status|head|copy STORE``: a persistent ledger a live client
appends to.  STORE is a path or ``sqlite:///path`` (an SQLite file) or a
``postgresql://user@host/db?schema=NAME`` URL (a PostgreSQL database several processes share).

* ``ledger init STORE [--budget eps=E | --budget mu=M | --budget eps=E,delta=D] [--policy NAME]
  [--arms K]``
* ``ledger record STORE [--run R] --arm A --start S --stop E SPEC...``: the releases SPEC (as in
  ``compose``, with ``count=``) touched observations [S, E) of arm A — one transaction; with a
  budget, refused atomically (exit 2, naming the reward and its spend) if any touched reward
  would exceed it.
* ``ledger status STORE [--json] [--delta D ...]``: records, streams, the worst reward and its
  privacy block (``compose --json``'s schema) plus ``"records": N``.
* ``ledger copy SRC DST``: a verified copy, row for row, between any two stores (SQLite into
  PostgreSQL and back).

``dpledger verify|curve|show STORE`` accept a store too (:func:`store_dispatch`).
"""
from __future__ import annotations

import argparse
import sys

from dpledger.errors import DpledgerError


def register(sub) -> None:
    p = sub.add_parser("ledger", help="a persistent ledger store: init, record, status, head, "
                                      "copy",
                       description=__doc__.split("\n\n")[0])
    lsub = p.add_subparsers(dest="ledger_command", metavar="ACTION", parser_class=type(p),
                            help="init, record, status, head or copy")
    lsub.required = True          # `dpledger ledger` alone: one error line, exit 2
    pi = lsub.add_parser("init", help="create an empty store")
    pi.add_argument("store", help="the store to create: a path or sqlite:///PATH (an SQLite "
                                  "file), or postgresql://USER@HOST/DB?schema=NAME")
    pi.add_argument("--budget", default=None,
                    help="per-reward budget: eps=E (pure, summed), mu=M (GDP, Σμ² ≤ M²) or "
                         "eps=E,delta=D (enforced as zCDP ρ ≤ ρ*(E, D))")
    pi.add_argument("--policy", default=None,
                    help="the policy this store is for (a step-form policy refuses a store "
                         "made for another; default: none, any policy may use it)")
    pi.add_argument("--arms", default=None, help="the number of arms K this store is for "
                                                 "(default: none, any K)")
    pi.set_defaults(func=run_init)
    pc = lsub.add_parser("copy", help="copy a store, row for row, to a new store (SQLite into "
                                      "PostgreSQL and back); both verified")
    pc.add_argument("source", help="an existing store")
    pc.add_argument("destination", help="where to create the copy (must not exist)")
    pc.set_defaults(func=run_copy)
    from dpledger.commands.compose import release_kinds_help
    pr = lsub.add_parser("record", help="append one record (one transaction)",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description="Append one record: the releases SPEC touched observations "
                                     "[START, STOP) of ARM.\n\n" + release_kinds_help())
    pr.add_argument("store", help="an existing store")
    pr.add_argument("--run", default="0", help="run id (default 0)")
    pr.add_argument("--arm", required=True, help="the arm whose observations were touched")
    pr.add_argument("--start", required=True, help="first observation index touched (0-based)")
    pr.add_argument("--stop", required=True, help="one past the last observation touched")
    pr.add_argument("releases", nargs="+", metavar="SPEC",
                    help="releases as in compose (kinds above), e.g. laplace:eps=0.5,count=2")
    pr.set_defaults(func=run_record)
    ph = lsub.add_parser("head", help="the record chain's head, to check later that the store "
                                      "only grew (dpledger verify STORE --since BATCHES:HEAD)")
    ph.add_argument("store", help="an existing store")
    ph.add_argument("--json", action="store_true", help="print it as JSON")
    ph.set_defaults(func=run_head)
    ps = lsub.add_parser("status", help="records, streams, the worst reward and its privacy")
    ps.add_argument("store", help="an existing store")
    ps.add_argument("--json", action="store_true", help="print the status as JSON")
    ps.add_argument("--delta", action="append", type=str, help="δ to report (repeatable)")
    ps.set_defaults(func=run_status)


def _int(name: str, text: str) -> int:
    from dpledger.inputs import parse_int
    return parse_int(f"--{name}", text, minimum=0)


def run_init(args: argparse.Namespace) -> int:
    from dpledger.accounting.store import LedgerStore
    from dpledger.inputs import parse_int
    arms = parse_int("--arms", args.arms, minimum=1) if args.arms is not None else None
    store = LedgerStore.create(args.store, args.budget, policy=args.policy, arms=arms)
    desc = store.budget.describe() if store.budget else "no budget"
    if store.policy or store.arms:
        desc += f"; for policy {store.policy or 'any'}, {store.arms or 'any number of'} arms"
    store.close()
    sys.stdout.write(f"created {store.path} ({store.backend}; {desc})\n")
    return 0


def run_copy(args: argparse.Namespace) -> int:
    from dpledger.accounting.store import copy_store
    from dpledger.accounting.store_backends import redact
    h = copy_store(args.source, args.destination)
    sys.stdout.write(f"copied {redact(args.source)} to {redact(args.destination)}: "
                     f"{h['batches']} batches, {h['records']} records, head {h['head']}; both "
                     "verified\n")
    return 0


def run_record(args: argparse.Namespace) -> int:
    from dpledger.accounting.releases import parse_release_spec
    from dpledger.accounting.store import LedgerStore
    run_, arm = _int("run", args.run), _int("arm", args.arm)
    start, stop = _int("start", args.start), _int("stop", args.stop)
    specs = [parse_release_spec(s) for s in args.releases]
    with LedgerStore.open(args.store) as store:
        # a refusal (BudgetExceeded, a DpledgerError) is one line and exit 2: nothing stored
        store.append_many([(run_, arm, start, stop, r, c) for r, c in specs])
        n = store.n_records()
    from dpledger.errors import counted
    sys.stdout.write(f"recorded; {counted(n, 'record')}\n")
    return 0


def run_head(args: argparse.Namespace) -> int:
    from dpledger.accounting.schema import dumps
    from dpledger.accounting.store import LedgerStore
    with LedgerStore.open(args.store, readonly=True) as store:
        if store.version < 2:
            raise DpledgerError(f"{store.path}: a version 1 store has no record chain (opening "
                                "it for writing, e.g. `dpledger ledger record`, adds one)")
        h = store.head()
    if args.json:
        sys.stdout.write(dumps(h))
        return 0
    sys.stdout.write(f"{h['batches']}:{h['head']}\n({h['batches']} batches, {h['records']} "
                     f"records; later, `dpledger verify {store.path} --since "
                     f"{h['batches']}:{h['head']}` checks that the store only grew from here)\n")
    return 0


def run_status(args: argparse.Namespace) -> int:
    from dpledger.accounting.schema import dumps
    from dpledger.accounting.store import LedgerStore
    from dpledger.inputs import parse_deltas
    deltas = parse_deltas("--delta", args.delta) if args.delta else None
    from dpledger.accounting.store_checkpoint import served_runs
    with LedgerStore.open(args.store, readonly=True) as store:
        st = store.status(deltas)
        st["head_anchor"] = {"path": store.anchor_path, "note": store.anchor_note}
        st["served_runs"] = served_runs(store)
    if args.json:
        sys.stdout.write(dumps(st))
        return 0
    sys.stdout.write(format_status(st) + format_serving(st))
    return 0


def format_serving(st: dict) -> str:
    """The head anchor and the runs step-form servers opened (generation, its noise's
    entropy, the lease), for ``ledger status``."""
    a = st.get("head_anchor") or {}
    lines = [f"head anchor: {a['path']}" + (f" ({a['note']})" if a.get("note") else "")
             if a.get("path") else f"head anchor: none ({a.get('note') or 'not kept'})"]
    for r in st.get("served_runs") or []:
        noise = {"seed": "the seed alone", "seed+os": "the seed and fresh OS entropy"}.get(
            r["entropy"], r["entropy"])
        lease = r["lease"]
        held = (f"lease held by pid {lease['pid']} on {lease['host']} until {lease['expires']}"
                + ("" if lease.get("alive", True) else " (that process is gone: the next "
                   "opening on this host takes it over)") if lease else "lease free")
        lines.append(f"served run {r['run']}: generation {r['generation']} (noise from "
                     f"{noise}); {held}")
    return "\n".join(lines) + "\n"


_NUMBER_NAMES = {"pure_epsilon": "pure ε", "gdp_mu": "GDP μ", "zcdp_rho": "zCDP ρ"}


def _number_name(key: str) -> str:
    """A ``worst_for`` key in words: ``epsilon.rdp.1e-09`` → ``ε(δ=1e-09) rdp``."""
    if key in _NUMBER_NAMES:
        return _NUMBER_NAMES[key]
    kind, _, rest = key.partition(".")
    if kind == "epsilon_at_delta":
        return f"ε(δ={rest}) best"
    acc, _, d = rest.partition(".")
    return f"ε(δ={d}) {acc}"


def _number_order(key: str) -> tuple:
    """pure ε, GDP μ, zCDP ρ, then ε(δ) by δ, accountant (in the table's order), best last."""
    from dpledger.accounting.schema import ACCOUNTANT_ORDER
    if key in _NUMBER_NAMES:
        return (0, list(_NUMBER_NAMES).index(key))
    kind, _, rest = key.partition(".")
    if kind == "epsilon_at_delta":
        return (1, -float(rest), len(ACCOUNTANT_ORDER))
    acc, _, d = rest.partition(".")
    return (1, -float(d), ACCOUNTANT_ORDER.index(acc))


def format_status(st: dict) -> str:
    from dpledger.accounting.composition import Composition
    from dpledger.commands.compose import format_composition, format_numbers
    lines = [f"records: {st['records']}   streams: {st['streams']}   "
             f"distinct releases: {st['releases']}"]
    b = st["budget"]
    if b:
        lines.append(f"budget: {b['currency']} limit {b['limit']!r}; worst spend "
                     f"{st['budget_spent']!r}")
    comps = st["compositions"]
    if not comps:
        lines.append("no releases recorded")
        return "\n".join(lines) + "\n"
    n = len(comps)
    lines.append("privacy: each number is its maximum over every reward ("
                 + (f"{n} maximal per-reward compositions; every other reward's is "
                    "dominated by one of them)"
                    if n > 1 else "one maximal per-reward composition dominates every reward's)"))
    text = "\n".join(lines) + "\n" + format_numbers(st["privacy"])
    for what, label in (st["privacy"].get("upper_bounds") or {}).items():
        text += f"  {what} is an upper bound ({label.removeprefix('bound: ')})\n"
    by_comp: dict[int, list[str]] = {}
    for key, w in sorted(st["worst_for"].items(), key=lambda kv: _number_order(kv[0])):
        by_comp.setdefault(w["composition"], []).append(_number_name(key))
    text += "worst reward for each number (a reward attaining it; rewards count from 0):\n"
    for i, names in sorted(by_comp.items()):
        r = comps[i]["reward"]
        text += (f"  run {r['run']}, arm {r['arm']}, observation {r['index']}: "
                 + ("every number" if len(by_comp) == 1 else ", ".join(names)) + "\n")
        text += format_composition(Composition.from_json(comps[i]["composition"]), "",
                                   indent="      ")
    return text


# -- verify / curve / show on a store -------------------------------------------------------
def store_dispatch(command: str, args: argparse.Namespace) -> int | None:
    """When ``args.file`` is a ledger store, run ``command`` on it and return the exit code;
    None for any other file (the caller goes on with run.json)."""
    from dpledger.accounting.store import is_store
    if not is_store(args.file):
        return None
    return {"verify": _verify, "show": _show}[command](args)


def parse_since(text: str) -> tuple[int, str]:
    """``BATCHES:HEAD`` as printed by ``dpledger ledger head``."""
    n, sep, head = str(text).strip().partition(":")
    head = head.strip().lower()
    if not sep or not n.strip().isdigit() or len(head) != 64 or any(
            c not in "0123456789abcdef" for c in head):
        raise DpledgerError(f"--since must be BATCHES:HEAD as `dpledger ledger head` prints it "
                            f"(a count, a colon, 64 hex digits), got {text!r}")
    return int(n), head


def parse_head(text: str) -> str:
    """A chain head (64 hex digits) as ``dpledger ledger head`` prints it (``BATCHES:HEAD``
    is taken too: the count is then not needed)."""
    head = str(text).strip().lower().rpartition(":")[2]
    if len(head) != 64 or any(c not in "0123456789abcdef" for c in head):
        raise DpledgerError(f"--head must be the 64 hex digits `dpledger ledger head` prints, "
                            f"got {text!r}")
    return head


def _anchor_words(url: str) -> str:
    """What the head anchor added to a clean verify, in a few words."""
    from dpledger.accounting.store import LedgerStore
    with LedgerStore.open(url, readonly=True) as store:
        if store.anchor_path is not None:
            return f", head anchor ({store.anchor_path})"
        return f" ({store.anchor_note})" if store.anchor_note else ""


def _verify(args) -> int:
    from dpledger.accounting.store import verify_store
    from dpledger.accounting.store_backends import redact
    for opt in ("ledger", "table"):
        if getattr(args, opt, None):
            raise DpledgerError(f"--{opt} does not apply to a ledger store")
    if getattr(args, "workers", "1") != "1":
        raise DpledgerError("--workers does not apply to a ledger store (no simulation)")
    if getattr(args, "resimulate", False):
        raise DpledgerError("--resimulate does not apply to a ledger store (no simulation)")
    since = parse_since(args.since) if getattr(args, "since", None) is not None else None
    head = parse_head(args.head) if getattr(args, "head", None) is not None else None
    problems = verify_store(args.file, since, head)
    name = redact(args.file)
    if problems:
        sys.stderr.write(f"{name}: {len(problems)} problem(s)\n")
        for p in problems[:50]:
            sys.stderr.write(f"  {p}\n")
        sys.stdout.write(f"{name}: FAILED\n")
        return 1
    sys.stdout.write(f"{name}: ok — store format, record chain"
                     + (f" (grown from batch {since[0]}'s head)" if since else "")
                     + (" (grown from the head given)" if head else "")
                     + _anchor_words(args.file)
                     + ", batch checksums, rows, releases and every reward's spend within the "
                     "budget checked\n")
    return 0


def store_report(path: str, which: str) -> dict | None:
    """A store's rewards as the privacy block ``curve`` reads from a run.json: every maximal
    per-reward composition (``curve`` takes each accountant's maximum over them, so every
    point of a curve is the maximum over all rewards; a store has no certificate), or None when
    nothing is recorded."""
    from dpledger.accounting.store import LedgerStore
    from dpledger.accounting.store_backends import redact
    if which not in ("both", "realized"):
        raise DpledgerError("a ledger store has no certificate: use --which realized")
    with LedgerStore.open(path, readonly=True) as store:
        maximal, _ = store.maximal_rewards()
    if not maximal:
        return None
    return {"privacy": {"realized": {"label": "store: fully adaptive parameters (an odometer "
                                              "reading)",
                                     "compositions": [c.to_json() for c, _ in maximal]}},
            "policy": {"name": redact(path)}}


def _show(args) -> int:
    import numpy as np
    from dpledger.accounting.store import LedgerStore, per_reward_values
    from dpledger.inputs import PLOT_EXTENSIONS, check_output_file
    if getattr(args, "ledger", None):
        raise DpledgerError("--ledger does not apply to a ledger store")
    if args.plot is not None:
        check_output_file(args.plot, "--plot", PLOT_EXTENSIONS)
    with LedgerStore.open(args.file, readonly=True) as store, store.snapshot():
        data = store.rows_array()               # one snapshot for the status and the pieces
        st = store.status()
        pt, values, name, limit = per_reward_values(store, data)
    sys.stdout.write(format_status(st))
    if not st["compositions"]:
        if args.plot is not None:
            sys.stdout.write(f"nothing to plot: {args.plot} not written\n")
        return 0
    finite = np.isfinite(values)
    if finite.any():
        qs = np.quantile(values[finite], [0.0, 0.5, 0.9, 1.0])
        sys.stdout.write(f"per-reward {name}: min {qs[0]:.4g}, median {qs[1]:.4g}, "
                         f"90% {qs[2]:.4g}, max {qs[3]:.4g} over {pt.start.size} ranges of "
                         "rewards sharing one composition (rewards no record touched left out)"
                         + ("" if finite.all() else f"; {int((~finite).sum())} ranges have no "
                            f"finite {name}") + "\n")
    if args.plot is None:
        return 0
    if not finite.any():
        sys.stdout.write(f"no reward has a finite {name} (nothing to plot: {args.plot} not "
                         "written)\n")
        return 0
    from dpledger.plots import plot_store_rewards
    top = int(np.argmax(np.where(finite, values, -np.inf)))    # the plotted number's worst
    plot_store_rewards(pt.run[finite], pt.arm[finite], pt.start[finite], pt.stop[finite],
                       values[finite], (int(pt.run[top]), int(pt.arm[top]),
                                        int(pt.start[top])), limit, args.plot,
                       f"per-reward {name}", f"{store.path}: per-reward privacy "
                       f"({st['records']} records)")
    sys.stdout.write(f"wrote {args.plot}\n")
    return 0
