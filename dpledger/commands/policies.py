"""``dpledger policies [--json]``: names, parameters, provenance and theorem of each policy."""
from __future__ import annotations

import json
import sys

from dpledger.policies.registry import _CONTEXTUAL, _REGISTRY, policy_class
from dpledger.errors import DpledgerError


def register(sub) -> None:
    p = sub.add_parser("policies", help="list policies")
    p.add_argument("--json", action="store_true",
                   help="print the list as JSON (name, parameters with defaults, provenance, "
                        "theorem) instead of text (default: text)")
    p.set_defaults(func=run)


def describe_all() -> list[dict]:
    out = []
    for name in [*_REGISTRY, *_CONTEXTUAL]:
        try:
            cls = policy_class(name)
        except DpledgerError:
            out.append({"name": name, "implemented": False})
            continue
        pol = cls()
        d = pol.describe()
        if getattr(cls, "contextual", False):
            from dpledger.policies.contextual.base import default_problem
            th = pol.theorem(default_problem())
        else:
            th = pol.theorem(10_000, 2)
        d["theorem"] = {"paper": th.paper, "theorem": th.theorem, "statement": th.statement}
        d["implemented"] = True
        out.append(d)
    return out


def run(args) -> int:
    info = describe_all()
    if args.json:
        sys.stdout.write(json.dumps(info, indent=1) + "\n")
        return 0
    for d in info:
        if not d["implemented"]:
            sys.stdout.write(f"{d['name']:18s} (not implemented yet)\n")
            continue
        params = ", ".join(f"{p['name']}={p['default']}" for p in d["params"]) or "—"
        exact = "  [--sampler exact]" if "exact" in d.get("samplers", ()) else ""
        ctx = (f"  [contextual; privacy model: {d['privacy_model']}]" if d.get("contextual")
               else "")
        sys.stdout.write(f"{d['name']:18s} {d['provenance']:36s} {params}{exact}{ctx}\n"
                         f"{'':18s} {d['title']}; {d['theorem']['paper']}, {d['theorem']['theorem']}\n")
    return 0
