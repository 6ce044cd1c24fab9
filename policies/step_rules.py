"""The step rules: each registered policy's state and its module's compiled rule functions,
wired for :mod:`dpledger.policies.step` (one source: the whole-run kernels call the same
functions in their loops).

A rule holds ``state`` (named numpy arrays: everything a checkpoint must keep) and answers:

* ``select(box, t)``: round t's arm (``box.rng`` the run's generator) — after the K initial
  pulls for rules with ``initial_pulls``, which the engine plays itself (arm t − 1 at round t,
  as every such kernel does);
* ``push(a, x)``: arm a's next reward x (rescaled to [0, 1]); returns the releases now due,
  ``[(arm, release id, start, stop), …]`` over observations [start, stop) of the arm, in the
  order the kernel draws them;
* ``draw(engine, rid)`` and ``commit(a, rid, noise)``: the release's noise, drawn by the
  kernels' own helper, and the rule's update with it;
* ``release(rid)``: the release id's :class:`~dpledger.accounting.releases.Release` (as the
  float sampler records it; the engine maps it to the lattice one for the exact sampler);
* ``ready(a)``: arm a has a released statistic (the engine plays arms without one first).

What a refused release leaves behind is the engine's rule for every policy (the arm is frozen on
what it has released; :mod:`~dpledger.policies.step`).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from dpledger.errors import DpledgerError
from dpledger.policies import hu_hegde
from dpledger.policies.step import laplace_step


class StepRule:
    """Base of the step rules (see the module docstring)."""

    name: ClassVar[str]
    anytime: ClassVar[bool] = True            # needs no horizon
    horizon_reason: ClassVar[str] = ""
    initial_pulls: ClassVar[bool] = True      # rounds 1 … K play arm t − 1

    def __init__(self, policy, K: int, horizon: int | None):
        self.policy, self.K, self.horizon = policy, K, horizon
        self.state: dict[str, np.ndarray] = {}

    def release(self, rid: int):
        raise NotImplementedError

    def draw(self, engine, rid: int) -> float:
        """Laplace noise of release ``rid`` (float, or lattice with the exact sampler)."""
        rel = self.release(rid)
        return laplace_step(engine.box, engine.env, float(rel.scale), float(rel.sensitivity))


# ---- Lazy-DP-TS (policies/hu_hegde.py) --------------------------------------------------------

@njit(cache=True)
def _lazy_select(box, eps, t, mu_tilde, O, theta):
    return hu_hegde.lazy_select(box.rng, eps, t, mu_tilde, O, theta)


class LazyDPTSStep(StepRule):
    name = "lazy-dp-ts"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.eps = float(policy.params["epsilon"])
        self.state = dict(mu=np.zeros(K), O=np.zeros(K), r=np.zeros(K, np.int64),
                          buf_sum=np.zeros(K), buf_len=np.zeros(K, np.int64),
                          n_obs=np.zeros(K, np.int64), theta=np.zeros(K))
        self._rel = policy.releases(K, K)[0]

    def release(self, rid):
        return self._rel

    def ready(self, a):
        return self.state["O"][a] > 0

    def select(self, box, t):
        s = self.state
        return _lazy_select(box, self.eps, t, s["mu"], s["O"], s["theta"])

    def push(self, a, x):
        s = self.state
        due, start, stop = hu_hegde.lazy_push(a, x, s["r"], s["buf_sum"], s["buf_len"],
                                              s["n_obs"])
        return [(a, 0, int(start), int(stop))] if due else None

    def commit(self, a, rid, noise):
        s = self.state
        hu_hegde.lazy_commit(a, noise, s["mu"], s["O"], s["r"], s["buf_sum"], s["buf_len"],
                             s["n_obs"])


RULES: dict[str, type[StepRule]] = {cls.name: cls for cls in (LazyDPTSStep,)}


def rule_for(policy) -> type[StepRule]:
    """The step rule of ``policy``, or a one-line refusal naming those that have one."""
    cls = RULES.get(policy.name)
    if cls is None:
        raise DpledgerError(f"policy {policy.name!r} has no step form yet; step forms: "
                            f"{', '.join(sorted(RULES))}")
    return cls
