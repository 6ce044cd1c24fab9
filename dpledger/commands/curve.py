"""``dpledger curve run.json``: ε(δ) and δ(ε) of the worst reward under each accountant."""
from __future__ import annotations

import sys


from dpledger.accounting.accountants import ACCOUNTANTS, OK, BestAccountant
from dpledger.accounting.composition import Composition
from dpledger.accounting.schema import read_json
from dpledger.errors import DpledgerError, check_delta

DEFAULT_GRID = [10.0 ** -k for k in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 30)]


def register(sub) -> None:
    p = sub.add_parser("curve", help="ε(δ) and δ(ε) curves of a run's worst reward")
    p.add_argument("file")
    p.add_argument("--deltas", default=None, help="comma-separated δ grid")
    p.add_argument("--epsilons", default=None, help="comma-separated ε values for δ(ε)")
    p.add_argument("--which", default="both", choices=["realized", "certificate", "both"])
    p.add_argument("--plot", default=None)
    p.set_defaults(func=run)


def _grid(text, default, check):
    if text is None:
        return default
    try:
        return [check(float(x)) for x in text.split(",") if x.strip()]
    except ValueError:
        raise DpledgerError(f"expected comma-separated numbers, got {text!r}") from None


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
                if acc.name == "pld" and d < 1e-10:
                    eps.append(None)
                    continue
                eps.append(max(acc.epsilon(c, d, adaptive) for c in comps))
            dl = [max(acc.delta(c, e, adaptive) for c in comps) for e in epsilons]
            out[f"{name}/{acc.name}"] = (eps, dl)
    return out


def run(args) -> int:
    rep = read_json(args.file)
    deltas = _grid(args.deltas, DEFAULT_GRID, check_delta)
    epsilons = _grid(args.epsilons, [0.1, 0.5, 1.0, 2.0, 5.0], lambda e: e if e >= 0 else
                     (_ for _ in ()).throw(DpledgerError("ε must be >= 0")))
    data = curves(rep, args.which, deltas, epsilons)
    if not data:
        sys.stdout.write("no accountant gives a finite curve (unbounded privacy)\n")
        return 0
    names = list(data)
    w = max(12, *(len(n) for n in names))
    sys.stdout.write("ε(δ)\n" + f"{'δ':>8s}  " + "  ".join(f"{n:>{w}s}" for n in names) + "\n")
    for i, d in enumerate(deltas):
        cells = [data[n][0][i] for n in names]
        sys.stdout.write(f"{d:8.0e}  " + "  ".join(
            f"{c:>{w}.6g}" if c is not None else f"{'—':>{w}s}" for c in cells) + "\n")
    sys.stdout.write("δ(ε)\n" + f"{'ε':>8s}  " + "  ".join(f"{n:>{w}s}" for n in names) + "\n")
    for i, e in enumerate(epsilons):
        sys.stdout.write(f"{e:8.3g}  " + "  ".join(f"{data[n][1][i]:>{w}.4g}" for n in names) + "\n")
    if args.plot:
        from dpledger.plots import plot_curve
        plot_curve({n: (deltas, data[n][0]) for n in names}, args.plot,
                   f"{rep['policy']['name']}: worst reward's ε(δ)")
        sys.stdout.write(f"wrote {args.plot}\n")
    return 0



