"""``dpledger curve run.json``: ε(δ) and δ(ε) of the worst reward under each accountant."""
from __future__ import annotations

from dpledger.outward import up

import sys


from dpledger.accounting.accountants import ACCOUNTANTS, OK, BestAccountant
from dpledger.accounting.composition import Composition
from dpledger.accounting.pld import MIN_DELTA as PLD_MIN_DELTA
from dpledger.errors import DpledgerError
from dpledger.inputs import (PLOT_EXTENSIONS, check_output_file, load_run_json, parse_floats,
                             refuse_special_file)

DEFAULT_GRID = [10.0 ** -k for k in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 30)]


def register(sub) -> None:
    p = sub.add_parser("curve", help="ε(δ) and δ(ε) curves of a run's worst reward")
    p.add_argument("file", help="a run.json written by `dpledger run`, or a ledger store "
                                "(`dpledger ledger init`)")
    p.add_argument("--deltas", default=None,
                   help="comma-separated δ grid for ε(δ), each in (0, 1) (default 1e-1 … 1e-30)")
    p.add_argument("--epsilons", default=None,
                   help="comma-separated ε values (>= 0) for δ(ε) (default 0.1,0.5,1,2,5)")
    p.add_argument("--which", default="both", choices=["realized", "certificate", "both"],
                   help="which compositions to draw: the run's realized ones, the certificate's "
                        "candidates, or both (default both)")
    p.add_argument("--wide", action="store_true",
                   help="a column per accountant (pure, gdp, rdp, pld, best) of each block "
                        "(default: the best valid value of each block and the accountant that "
                        "gives it, 80 columns wide)")
    p.add_argument("--plot", default=None,
                   help="also write the ε(δ) curves to this file (.png, .pdf, .svg, …; "
                        "default: no plot)")
    p.set_defaults(func=run)


def _grid(option: str, text, default, **bounds):
    if text is None:
        return default
    return parse_floats(option, text, **bounds)


def curves(rep: dict, which: str, deltas, epsilons):
    priv = rep["privacy"]
    adaptive_real = not priv["realized"]["label"].startswith("ledger")
    blocks = []
    if which in ("certificate", "both"):
        comps = [Composition.from_json(c["composition"]) for c in priv["certificate"]["candidates"]]
        blocks.append(("certificate", comps, priv["certificate"].get("adaptive", False)))
    if which in ("realized", "both"):
        comps = [Composition.from_json(c) for c in priv["realized"]["compositions"]]
        blocks.append(("realized", comps, adaptive_real))
    out = {}
    for name, comps, adaptive in blocks:
        if not comps:
            continue
        for acc in list(ACCOUNTANTS.values()) + [BestAccountant()]:
            if any(acc.supports(c, adaptive) != OK for c in comps):
                continue
            eps = []
            for d in deltas:
                if acc.name == "pld" and d < PLD_MIN_DELTA:
                    eps.append(None)
                    continue
                eps.append(max(acc.epsilon(c, d, adaptive) for c in comps))
            dl = [max(acc.delta(c, e, adaptive) for c in comps) for e in epsilons]
            out[f"{name}/{acc.name}"] = (eps, dl)
    return out


def wide_table(data: dict, deltas, epsilons) -> str:
    """Every curve as a column (``--wide``): ε(δ), then δ(ε)."""
    names = list(data)
    w = max(12, *(len(n) for n in names))
    out = ["ε(δ)", f"{'δ':>8s}  " + "  ".join(f"{n:>{w}s}" for n in names)]
    for i, d in enumerate(deltas):
        out.append(f"{d:8.0e}  " + "  ".join(_cell(data[n][0][i], w, ".6g") for n in names))
    out += ["δ(ε)", f"{'ε':>8s}  " + "  ".join(f"{n:>{w}s}" for n in names)]
    for i, e in enumerate(epsilons):
        out.append(f"{e:8.3g}  " + "  ".join(_cell(data[n][1][i], w, ".4g") for n in names))
    return "\n".join(out) + "\n"


def narrow_table(data: dict, deltas, epsilons) -> str:
    """The default table, within 80 columns: per block (certificate, realized) the ``best``
    accountant's value (per composition the smallest valid one, then the largest over the
    compositions) and the accountant that gives it ("mixed" when the compositions' best come
    from different accountants)."""
    blocks = list(dict.fromkeys(n.partition("/")[0] for n in data))
    cols = "".join(f"  {b:>12s}  {'by':<5s}" for b in blocks)
    out = ["ε(δ) of the worst-off reward, best valid accountant per block (--wide: each)",
           f"{'δ':>8s}" + cols]
    for i, d in enumerate(deltas):
        out.append(f"{d:8.0e}" + "".join(_best_cell(data, b, 0, i, ".6g") for b in blocks))
    out += ["δ(ε)", f"{'ε':>8s}" + cols]
    for i, e in enumerate(epsilons):
        out.append(f"{e:8.3g}" + "".join(_best_cell(data, b, 1, i, ".4g") for b in blocks))
    return "\n".join(line.rstrip() for line in out) + "\n"


def _cell(v, w: int, fmt: str) -> str:
    # privacy numbers round toward less privacy at the last printed digit (dpledger.outward)
    return f"{up(v, int(fmt[1:-1])):>{w}s}" if v is not None else f"{'—':>{w}s}"


def _best_cell(data: dict, block: str, which: int, i: int, fmt: str) -> str:
    """``block``'s best value at row ``i`` and the accountant whose curve gives it."""
    best = data.get(f"{block}/best")
    v = best[which][i] if best is not None else None
    if v is None:
        return f"  {'—':>12s}  {'':<5s}"
    by = next((n.partition("/")[2] for n in data if n.startswith(block + "/")
               and not n.endswith("/best") and data[n][which][i] is not None
               and abs(data[n][which][i] - v) <= 1e-12 * max(abs(v), 1e-300)), "mixed")
    return f"  {up(v, int(fmt[1:-1])):>12s}  {by:<5s}"


def run(args) -> int:
    from dpledger.accounting.store import is_store
    deltas = _grid("--deltas", args.deltas, DEFAULT_GRID, minimum=0.0, maximum=1.0,
                   open_interval=True)
    epsilons = _grid("--epsilons", args.epsilons, [0.1, 0.5, 1.0, 2.0, 5.0], minimum=0.0)
    if args.plot is not None:
        check_output_file(args.plot, "--plot", PLOT_EXTENSIONS)
    which = args.which
    refuse_special_file(args.file, "a run.json or a ledger store")   # before anything opens it
    if is_store(args.file):                  # a ledger store: its worst reward's composition
        from dpledger.commands.ledger import store_report
        rep = store_report(args.file, which)
        if rep is None:
            sys.stdout.write("no releases recorded\n")
            return 0
        which = "realized"
    else:
        rep = load_run_json(args.file)
    try:
        data = curves(rep, which, deltas, epsilons)
    except DpledgerError as exc:
        raise DpledgerError(f"{args.file}: {exc}") from None
    except (KeyError, TypeError, IndexError) as exc:     # a composition the loader does not parse
        raise DpledgerError(f"{args.file}: malformed run.json: bad composition ({exc!r})") \
            from None
    if not data:
        sys.stdout.write("no accountant gives a finite curve (unbounded privacy)\n")
        return 0
    names = list(data)
    sys.stdout.write(wide_table(data, deltas, epsilons) if args.wide
                     else narrow_table(data, deltas, epsilons))
    if args.plot:
        from dpledger.plots import plot_curve
        plot_curve({n: (deltas, data[n][0]) for n in names}, args.plot,
                   f"{rep['policy']['name']}: worst reward's ε(δ)")
        sys.stdout.write(f"wrote {args.plot}\n")
    return 0



