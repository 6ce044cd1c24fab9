"""Non-private linear contextual policies: LinUCB and linear Thompson sampling.

Both keep ridge models (:mod:`~dpledger.policies.contextual.ridge`): one per arm for contexts
of shape (T, d) (Li et al. 2010's disjoint LinUCB), one shared θ for (T, K, d) (Chu et al.
2011's LinUCB; Agrawal & Goyal 2013's TS); the whole run is one compiled call of
:func:`~dpledger.policies.contextual.loop.run_ridge`.

Their ledgers record every delivered record as read without noise (``NonPrivateRelease``, one
row per stream over all its observations), as the K-armed non-private baselines do: the
privacy is unbounded and the ledger names which records (context and reward) they exposed.
"""
from __future__ import annotations

import numpy as np

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Certificate
from dpledger.accounting.releases import NonPrivateRelease
from dpledger.errors import DpledgerError
from dpledger.interrupt import stop_slot
from dpledger.policies.base import Param, RunOutput
from dpledger.policies.contextual.base import ContextualPolicy, ContextualProblem
from dpledger.policies.contextual.loop import LINTS, LINUCB, run_ridge
from dpledger.policies.contextual.ridge import new_models

LAMBDA = Param("lambda", 1.0, "positive", "ridge regulariser λ: A = λ·I + Σ x xᵀ")


class RidgePolicy(ContextualPolicy):
    """A non-private policy over ridge models; subclasses name the select rule and its width."""

    private = False
    provenance = "faithful"
    rule: int
    width_param: str

    def __init__(self, **params):
        super().__init__(**params)
        if self.params[self.width_param] < 0:
            raise DpledgerError(f"{self.width_param} must be >= 0, got "
                                f"{self.params[self.width_param]!r}")

    def releases(self, problem: ContextualProblem):
        return [NonPrivateRelease()]

    def certificate(self, problem: ContextualProblem):
        return Certificate.unbounded_because(f"{self.name} reads contexts and rewards without "
                                             "noise")

    def theorem(self, problem: ContextualProblem):
        return theorems.non_private(self.name)

    def run_one(self, rng, env, problem: ContextualProblem) -> RunOutput:
        T = problem.horizon
        chol, bvec, theta = new_models(problem.n_streams, problem.dim, self.params["lambda"])
        actions = np.zeros(T, dtype=np.int64)
        regret = np.zeros(T)
        obs_stream = np.zeros(T, dtype=np.int64)
        obs_round = np.zeros(T, dtype=np.int64)
        rounds, n_obs, reward_sum, uniform_sum = run_ridge(
            rng, env.as_kernel(), T, problem.shared, problem.delay, self.rule,
            float(self.params[self.width_param]), chol, bvec, theta, actions, regret,
            obs_stream, obs_round, stop_slot())
        out = RunOutput(actions=actions, extra={
            "regret": regret, "obs_stream": obs_stream[:n_obs], "obs_round": obs_round[:n_obs],
            "rounds": int(rounds), "reward_sum": float(reward_sum),
            "uniform_sum": float(uniform_sum)})
        return self.finish(out, problem)

    def finish(self, out: RunOutput, problem: ContextualProblem) -> RunOutput:
        """Every delivered record of a stream is read, un-noised, by every later selection: one
        row per stream over its observations [0, n)."""
        counts = np.bincount(out.extra["obs_stream"], minlength=problem.n_streams)
        streams = np.flatnonzero(counts)
        out.rows = np.vstack([streams, np.zeros_like(streams), counts[streams],
                              np.zeros_like(streams), np.ones_like(streams)]).astype(np.int64)
        return out


class LinUCB(RidgePolicy):
    """LinUCB: Li, Chu, Langford & Schapire 2010 (WWW), Algorithm 1 — disjoint per-arm ridge
    models, index θ̂_aᵀx + α·√(xᵀA_a⁻¹x) with A_a = λ·I + Σ x xᵀ (λ = 1 in the paper; a
    parameter here) — for one context per round; for one context per arm, the shared-θ form
    (Chu, Li, Reyzin & Schapire 2011, AISTATS: one A, one b over every round's chosen
    context).  Ties uniformly at random."""

    name = "linucb"
    title = "LinUCB (Li et al. 2010, Algorithm 1; shared θ: Chu et al. 2011)"
    params_spec = (Param("alpha", 1.0, "float", "confidence width α (>= 0): index θ̂ᵀx + "
                         "α·√(xᵀA⁻¹x)"), LAMBDA)
    rule = LINUCB
    width_param = "alpha"


class LinTS(RidgePolicy):
    """Linear Thompson sampling: Agrawal & Goyal 2013 (ICML), Algorithm 1 — θ̃ ~ N(θ̂, v²·B⁻¹)
    with B = λ·I + Σ x xᵀ (λ = 1 in the paper), play argmax_a θ̃ᵀx_a.  The paper's Theorem 1
    sets v = R·√(24·d·ln(1/δ)/ε); that value explores far more than practice needs, so the
    default is v = 1 (our choice, stated: set v to the paper's value to run its analysed
    version).  One context per round: independent per-arm models, each arm's score drawn from
    its exact marginal (see :func:`~dpledger.policies.contextual.ridge.lints_scores`).  Ties
    uniformly at random."""

    name = "lints"
    title = "Linear Thompson sampling (Agrawal & Goyal 2013, Algorithm 1)"
    params_spec = (Param("v", 1.0, "float", "posterior scale v (>= 0): θ̃ ~ N(θ̂, v²·A⁻¹); "
                         "the paper's Theorem 1 uses v = R·√(24·d·ln(1/δ)/ε)"), LAMBDA)
    rule = LINTS
    width_param = "v"
