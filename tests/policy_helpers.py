"""Shared helpers for the policy tests: pure-Python reference runs with proxy/stub generators."""
from __future__ import annotations

import contextlib
import importlib
import os

import numpy as np
from numba.core.registry import CPUDispatcher

from dpledger.policies import registry

FULL = os.environ.get("DPLEDGER_FULL") == "1"

PRIVATE = ["dp-ts", "lazy-dp-ts", "adap-ucb", "adap-klucb", "dp-se", "anytime-lazy-ucb"]
NONPRIVATE = ["ucb1", "klucb", "ts-beta"]
MINE = NONPRIVATE + PRIVATE
FAST = ["adap-ucb", "adap-klucb", "dp-se", "anytime-lazy-ucb", "adac-ucb"]

_MODULES = ["dpledger.policies." + m for m in
            ("baselines", "hu_hegde", "azize_basu", "dp_se", "anytime_lazy_ucb", "rules",
             "environments")] + ["dpledger.mechanisms.counters", "dpledger.mechanisms.noise"]


@contextlib.contextmanager
def pure_python():
    """Replace every numba dispatcher in the policy modules' globals by its ``py_func`` so that a
    kernel's ``py_func`` runs entirely in Python and accepts any generator-like object."""
    saved = []
    for name in _MODULES:
        mod = importlib.import_module(name)
        for key, val in list(vars(mod).items()):
            if isinstance(val, CPUDispatcher):
                saved.append((mod, key, val))
                setattr(mod, key, val.py_func)
    try:
        yield
    finally:
        for mod, key, val in saved:
            setattr(mod, key, val)


class CountingRng:
    """Wraps a numpy Generator; counts ``laplace`` and Gaussian (``normal`` and
    ``standard_normal``) calls, forwards the rest."""

    def __init__(self, rng):
        self._rng = rng
        self.laplace_calls = 0
        self.normal_calls = 0
        self.laplace_scales = []

    def laplace(self, loc=0.0, scale=1.0, size=None):
        self.laplace_calls += 1
        self.laplace_scales.append(scale)
        return self._rng.laplace(loc, scale, size)

    def normal(self, loc=0.0, scale=1.0, size=None):
        self.normal_calls += 1
        return self._rng.normal(loc, scale, size)

    def standard_normal(self, size=None):
        self.normal_calls += 1
        return self._rng.standard_normal(size)

    def __getattr__(self, name):
        return getattr(self._rng, name)


class StubRng:
    """A scripted generator: Laplace returns ``lap`` (recording scales), ``integers`` returns its
    lower end, ``beta`` returns the mean (recording its arguments); ``random`` 0.5."""

    def __init__(self, lap=0.0):
        self.lap = lap
        self.laplace_scales = []
        self.beta_args = []

    def laplace(self, loc=0.0, scale=1.0):
        self.laplace_scales.append(scale)
        return loc + self.lap

    def integers(self, lo, hi=None):
        return lo if hi is not None else 0

    def beta(self, a, b):
        self.beta_args.append((a, b))
        return a / (a + b)

    def random(self):
        return 0.5

    def binomial(self, n, p):
        return int(round(n * p))


def policy(name, **params):
    return registry.make_policy(name, **params)


def reference_run(pol, rng, env, T, stop_at=None):
    """``run_one(..., reference=True)`` with every helper in Python (works with proxy rngs)."""
    # compile first, so that no compilation happens while the globals are patched
    pol.run_one(np.random.default_rng(0), env.as_tuple(), T, stop_at=min(T, env.n_arms + 2))
    with pure_python():
        return pol.run_one(rng, env.as_tuple(), T, stop_at=stop_at, reference=True)


def tree_psums(trees) -> int:
    """Number of p-sums a run's binary mechanisms released: CSS11's binary mechanism releases one
    p-sum per item, so n_items per tree record."""
    if not trees:
        return 0
    return int(np.sum(trees["n_items"]))
