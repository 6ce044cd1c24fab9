"""Policy names (docs/design.md#interfaces-and-json) → classes."""
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
    "dp-klucb": "azize2025:DPKLUCB",
    "dp-imed": "azize2025:DPIMED",
    "imed": "azize2025:IMED",
    "adac-ucb": "adac:AdaCUCB",
}

# Contextual policies (dpledger.policies.contextual): listed by `dpledger policies`, run on the
# contextual environments only; ``available()`` keeps naming the K-armed ones (the reward-stream
# tests and audits iterate over it), ``contextual_available()`` names these.
_CONTEXTUAL = {
    "linucb": "contextual.linear:LinUCB",
    "lints": "contextual.linear:LinTS",
    "jdp-linucb": "contextual.private:JdpLinUCB",
    "dp-linucb-mt": "contextual.private:DpLinUcbMT",
    "dp-lints-mt": "contextual.private:DpLinTsMT",
    "reward-dp-linucb": "contextual.private:RewardDpLinUCB",
    "adac-gope": "contextual.gope:AdaCGOPE",
    "dp-gope-hanna": "contextual.gope:HannaDPGOPE",
    "adac-oful": "contextual.episodes:AdacOFUL",
    "episode-linucb": "contextual.episodes:EpisodeLinUCB",
}


_USER: dict[str, type[Policy]] = {}


def register_policy(cls: type[Policy]) -> type[Policy]:
    """Make a user's policy class available by its ``name`` (API, ``verify``); usable as a
    class decorator.  Built-in names cannot be replaced."""
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise DpledgerError(f"register_policy needs a Policy subclass, got {cls!r}")
    if cls.name in _REGISTRY or cls.name in _CONTEXTUAL:
        raise DpledgerError(f"policy name {cls.name!r} is taken by a built-in policy")
    _USER[cls.name] = cls
    return cls


def policy_class(name: str) -> type[Policy]:
    if name in _USER:
        return _USER[name]
    target = _REGISTRY.get(name) or _CONTEXTUAL.get(name)
    if target is None:
        raise DpledgerError(f"unknown policy {name!r}; known: "
                            f"{', '.join(available() + contextual_available())}")
    module, cls = target.split(":")
    try:
        mod = importlib.import_module(f"dpledger.policies.{module}")
        return getattr(mod, cls)
    except (ModuleNotFoundError, AttributeError):
        raise DpledgerError(f"policy {name!r} is not implemented yet") from None


def make_policy(name: str, **params) -> Policy:
    """Policy ``name`` with typed parameter values (a number where a number is declared)."""
    return policy_class(name)(**params)


def make_policy_from_text(name: str, texts: dict[str, str]) -> Policy:
    """Policy ``name`` from ``--set key=value`` texts: each read as its declared kind
    (:meth:`~dpledger.policies.base.Param.from_text`); unknown keys are refused by the policy."""
    from dpledger.policies.base import PARAM_ALIASES
    cls = policy_class(name)
    known = {p.name: p for p in cls.params_spec}
    typed = {}
    for key, text in texts.items():
        spec = known.get(PARAM_ALIASES.get(key, key))
        typed[key] = spec.from_text(text) if spec is not None else text
    return cls(**typed)


def _importable(names) -> list[str]:
    out = []
    for name in names:
        try:
            policy_class(name)
        except DpledgerError:
            continue
        out.append(name)
    return out


def available() -> list[str]:
    """Names of the K-armed policies whose implementation can be imported."""
    return _importable(_REGISTRY)


def contextual_available() -> list[str]:
    """Names of the contextual policies whose implementation can be imported."""
    return _importable(_CONTEXTUAL)


def is_contextual(name: str) -> bool:
    """Whether ``name`` is a contextual policy (built in or registered by a user)."""
    return bool(getattr(policy_class(name), "contextual", False))


def exact_sampler_policies() -> list[str]:
    """Names of the registered policies that run with ``--sampler exact``."""
    return [name for name in available() if policy_class(name).exact_sampler]
