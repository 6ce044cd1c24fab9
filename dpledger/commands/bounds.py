"""``dpledger bounds POLICY …``: the regret bounds that speak about a policy on an instance.

The instance is given as ``run`` takes it (``--env``, ``--means`` / ``--rates`` / ``--ab``,
``--horizon``, ``--set``); the bounds are those of :mod:`dpledger.policies.regret_bounds`:
the upper bounds of the policy's papers, the lower bounds of its reward family and privacy
model, and the regime thresholds.  Text by default, ``--json`` for the records.
"""
from __future__ import annotations

import argparse
import math
import sys

from dpledger.commands.run import add_instance_options


def register(sub) -> None:
    p = sub.add_parser("bounds", help="regret bounds of a policy's papers on an instance",
                       description="Print the regret bounds that speak about POLICY on an "
                       "instance: the upper bounds of its papers (exact constants, order only "
                       "or asymptotic, as each paper states them), the lower bounds of its "
                       "reward family and privacy model, and the regime thresholds between high "
                       "and low privacy.  docs/bounds.md lists every bound.")
    p.add_argument("policy", help="policy name (see `dpledger policies`)")
    p.add_argument("--set", action="append", default=[], metavar="K=V",
                   help="policy parameter (repeatable; default: the policy's defaults), e.g. "
                        "--set epsilon=0.5")
    add_instance_options(p, table=False)
    p.add_argument("--horizon", type=str, default="10000",
                   help="T, the horizon the bounds are evaluated at (an integer in [K, 1e9]; "
                        "default 10000)")
    p.add_argument("--dimension", type=str, default=None,
                   help="also print Azize & Basu 2022's linear-bandit minimax lower bound "
                        "(Theorem 4, actions [-1, 1]^d) for this dimension d (an integer >= 1; "
                        "default: not printed)")
    p.add_argument("--json", action="store_true",
                   help="print the bounds as JSON instead of text (default: text)")
    # the instance is built by `run`'s code; the papers' bounds are for rewards in [0, 1]
    p.set_defaults(func=run, range="0,1")


def run(args: argparse.Namespace) -> int:
    from dpledger.accounting.schema import dumps
    from dpledger.commands.run import MAX_HORIZON, make_env, parse_params
    from dpledger.errors import DpledgerError
    from dpledger.inputs import parse_int
    from dpledger.policies.registry import make_policy_from_text
    from dpledger.policies.regret_bounds import bounds_for_policy
    from dpledger.policies.reward_families import RewardInstance

    from dpledger.policies.registry import is_contextual
    if is_contextual(args.policy):
        return _contextual(args)
    inst = RewardInstance.from_environment(make_env(args))
    policy = make_policy_from_text(args.policy, parse_params(args.set))
    T = parse_int("--horizon", args.horizon, 1, MAX_HORIZON)
    if T < inst.n_arms:
        raise DpledgerError(f"--horizon {args.horizon.strip()} is shorter than the number of "
                            f"arms {inst.n_arms}")
    if args.dimension is not None:
        raise DpledgerError(f"--dimension is for linear and contextual policies (Azize & Basu "
                            f"2022, Theorem 4 bounds linear bandits); {policy.name} is K-armed: "
                            "drop it, or name a contextual policy (e.g. `dpledger bounds linucb "
                            "--dimension 5`)")
    model, bounds = bounds_for_policy(policy, inst, T)
    if args.json:
        sys.stdout.write(dumps({
            "policy": {"name": policy.name, "params": policy.public_params()},
            "instance": inst.to_json(), "horizon": T,
            "privacy_model": {"kind": model.kind, "epsilon": model.epsilon,
                              "source": model.source},
            "bounds": [b.to_json() for b in bounds]}))
        return 0
    sys.stdout.write(format_bounds(policy, inst, T, model, bounds))
    return 0


def _number(x: float, fmt: str) -> str:
    """A bound's number as the text shows it: ∞ for an infinite one (never "inf")."""
    return format(x, fmt) if math.isfinite(x) else ("∞" if x > 0 else "−∞")


def _value(b) -> str:
    if b.value is not None:
        return _number(b.value, ".6g")
    if b.order_term is not None:
        return f"O({b.order_term:.3g})"
    return "—"


def _tag(b) -> str:
    if b.direction == "threshold":
        return "per arm: " + ", ".join(_number(t, ".4g") for t in b.terms) if b.terms else ""
    tag = {"exact_constants": "exact constants", "order_only": "order only",
           "asymptotic": "asymptotic"}[b.status]
    return f"minimax: the worst instance, {tag}" if b.scope == "minimax" else tag


def format_bounds(policy, inst, T, model, bounds) -> str:
    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in policy.public_params().items())
    lines = [f"{policy.name}({params}) on {inst.describe()}, T={T}, K={inst.n_arms}",
             f"lower bounds assume: {model.source}"]
    groups = (("upper bounds (the policy's papers)", "upper"),
              ("lower bounds", "lower"), ("regime thresholds (ε)", "threshold"))
    for title, direction in groups:
        mine = [b for b in bounds if b.direction == direction]
        rows = [b for b in mine if b.applies]
        if direction == "upper" and not rows:
            lines += ["", f"{title}:", "  none " + ("applies here (below)" if mine else
                                                  "coded for this policy (docs/bounds.md)")]
        if not rows:
            continue
        lines += ["", f"{title}:"]
        for b in rows:
            tag = _tag(b)
            lines.append(f"  {_value(b):>12}  {b.source}" + (f"  [{tag}]" if tag else ""))
            lines.append(f"  {'':>12}  {b.formula}")
            lines += [f"  {'':>12}  {note}" for note in b.notes if note.startswith("ε = ")]
    unmet = [b for b in bounds if not b.applies]
    if unmet:
        lines += ["", "not applicable here:"]
        lines += [f"  {b.source}: needs " + "; ".join(b.unmet) for b in unmet]
    lines += ["", "values: exact constants = the bound at T; O(x) = order only, x the argument "
              "of O(·) (a shape, not a bound); asymptotic = the slope × ln T, as T → ∞"]
    return "\n".join(lines) + "\n"


def _contextual(args) -> int:
    """A contextual policy: Azize & Basu 2022's linear minimax lower bound (Theorem 4) at the
    --dimension given, in its non-private form (ε = ∞).  Its ε term binds ε-global DP
    policies; the private contextual policies give joint DP of their released statistics
    (docs/concepts.md), which that theorem does not cover, so it is not evaluated for them."""
    from dpledger.accounting.schema import dumps
    from dpledger.commands.run import MAX_HORIZON
    from dpledger.errors import DpledgerError
    from dpledger.inputs import parse_int
    from dpledger.policies.regret_bounds import (azize_basu_2022_linear_minimax,
                                                 azize_basu_2022_linear_threshold)
    if args.dimension is None:
        raise DpledgerError(f"{args.policy} is a contextual policy: its bound is the linear "
                            "one; give --dimension d")
    for opt in ("means", "rates", "ab"):
        if getattr(args, opt) is not None:
            raise DpledgerError(f"--{opt} describes K-armed rewards; {args.policy} is contextual")
    if args.set:
        raise DpledgerError("--set does not change the linear lower bound (it holds for every "
                            "policy); drop it")
    d = parse_int("--dimension", args.dimension, 1, 10 ** 9)
    T = parse_int("--horizon", args.horizon, 1, MAX_HORIZON)
    bounds = [azize_basu_2022_linear_minimax(d, T), azize_basu_2022_linear_threshold(T)]
    note = ("the ε-dependent term binds ε-global DP policies; contextual policies here give "
            "none (non-private) or joint DP of their statistics, which Theorem 4 does not cover")
    if args.json:
        sys.stdout.write(dumps({"policy": {"name": args.policy}, "dimension": d, "horizon": T,
                                "note": note, "bounds": [b.to_json() for b in bounds]}))
        return 0
    b = bounds[0]
    sys.stdout.write(f"{args.policy}: linear bandit, d={d}, T={T}\n\nlower bound (minimax, the "
                     f"worst θ):\n  {_value(b):>12}  {b.source}\n  {'':>12}  {b.formula} at "
                     f"ε = ∞\n\nnote: {note}\n")
    return 0
