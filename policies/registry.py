"""Policy names (SPEC §7) → classes."""
from __future__ import annotations

import importlib

from dpledger.errors import DpledgerError
from dpledger.policies.base import Policy

# name → "module:Class"; modules are imported on first use so that a policy being written does
# not break the others.
_REGISTRY = {
    "ucb1": "baselines:UCB1",
    "klucb": "baselines:KLUCB",
    "ts-beta": "baselines:BetaTS",
    "ts-gaussian": "ou:TSGaussian",
    "mts-gaussian": "ou:MTSGaussian",
    "dp-ts-ucb": "hu2025:DPTSUCB",
    "dp-ucb": "mishra_thakurta:DPUCB",
    "dp-ts-mt": "mishra_thakurta:PrivateTS",
    "dp-ts": "hu_hegde:DPTS",
    "lazy-dp-ts": "hu_hegde:LazyDPTS",
    "adap-ucb": "azize_basu:AdaPUCB",
    "adap-klucb": "azize_basu:AdaPKLUCB",
    "dp-se": "dp_se:DPSE",
    "anytime-lazy-ucb": "anytime_lazy_ucb:AnytimeLazyUCB",
}


def policy_class(name: str) -> type[Policy]:
    target = _REGISTRY.get(name)
    if target is None:
        raise DpledgerError(f"unknown policy {name!r}; known: {', '.join(available())}")
    module, cls = target.split(":")
    try:
        mod = importlib.import_module(f"dpledger.policies.{module}")
        return getattr(mod, cls)
    except (ModuleNotFoundError, AttributeError):
        raise DpledgerError(f"policy {name!r} is not implemented yet") from None


def make_policy(name: str, **params) -> Policy:
    return policy_class(name)(**params)


def available() -> list[str]:
    """Names whose implementation can be imported."""
    out = []
    for name in _REGISTRY:
        try:
            policy_class(name)
        except DpledgerError:
            continue
        out.append(name)
    return out
