"""The contextual policy interface.

A contextual policy, like a K-armed one, chooses arms and *describes* its releases; accounting
does the arithmetic.  What changes is the data: a round observes a *record* (its contexts and
the chosen arm's reward), and a release touches records of a *stream* — a statistic's data
sequence, one per arm for disjoint models, one for a shared θ.  The ledger keys a record as
(run, stream, observation): the ``arm`` column of :class:`~dpledger.accounting.ledger.RewardLedger`
holds the stream, and observation n of a stream is its n-th record in the order it reached the
policy (after the delay).

A policy declares, from the run's :class:`ContextualProblem` (T, K, d, context shape, norm
bound, range, delay):

* ``releases(problem)`` — the interned release table its rows index;
* ``certificate(problem)``, ``theorem(problem)`` — as for K-armed policies;
* ``privacy_model`` — ``none`` (non-private), ``reward-private`` (contexts public, rewards
  private: Neel & Roth 2018) or ``record-private`` (context and reward private; the certificate
  is DP of the released statistics, and the actions of other rounds are post-processing of them
  and of those rounds' own contexts: joint DP by the billboard lemma, Hsu et al. 2014);
* ``run_one(rng, env, problem)`` — one run, a :class:`~dpledger.policies.base.RunOutput` whose
  ``actions`` are the arm of every round (replay: of every log row), ``rows`` the (5, n) ledger
  rows (stream, start, stop, release_id, count) it made and ``trees`` any tree records, and
  ``extra`` the loop's outputs (:data:`EXTRA_KEYS`).

A private policy writes one ledger row per noise draw through the same helpers as the K-armed
kernels (:func:`dpledger.mechanisms.noise.gaussian_noise`, ``write_kernel_row``, ``tree_noise``)
with ``arm`` = the stream and [start, stop) the observation indices of that stream its statistic
covers; the simulator tags rows with the run and adds the index → round map from the delivered
observations.
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dpledger.accounting.certificate import Certificate, Theorem
from dpledger.accounting.releases import Release
from dpledger.errors import DpledgerError
from dpledger.policies.base import Policy, RunOutput

PRIVACY_MODELS = ("none", "reward-private", "record-private")
# RunOutput.extra of a contextual run: per-round regret terms (T,), observations delivered
# (stream and round of each, in delivery order), policy rounds, Σ reward, Σ uniform mean reward
EXTRA_KEYS = ("regret", "obs_stream", "obs_round", "rounds", "reward_sum", "uniform_sum")


@dataclass(frozen=True)
class ContextualProblem:
    """The public facts of a contextual run that a policy's releases and certificate may use:
    horizon T (rounds; replay: log rows walked), arms K, context dimension d, whether contexts
    are one per arm (``shared`` θ) or one per round, the context norm bound L, the reward range,
    the delay D and the environment's name."""

    horizon: int
    arms: int
    dim: int
    shared: bool
    norm_bound: float
    lo: float
    hi: float
    delay: int
    env: str
    # the exact sampler's lattice 2^-lattice_bits (0: the float sampler), which changes what a
    # private policy draws and records
    lattice_bits: int = 0

    @property
    def n_streams(self) -> int:
        """Models: one per arm (disjoint) or one (shared θ)."""
        return 1 if self.shared else self.arms

    @property
    def max_observations(self) -> int:
        """The most records a run can deliver: max(T − D, 0) (replay: accepted rows ≤ T)."""
        return max(self.horizon - self.delay, 0)

    def to_json(self) -> dict:
        out = {"horizon": self.horizon, "arms": self.arms, "dim": self.dim,
               "shared": self.shared, "norm_bound": self.norm_bound,
               "range": [self.lo, self.hi], "delay": self.delay, "env": self.env}
        if self.lattice_bits:
            out["lattice_bits"] = self.lattice_bits
        return out


def problem_of(env, horizon: int, delay: int, lattice_bits: int = 0) -> ContextualProblem:
    """The problem a run of ``horizon`` rounds with ``delay`` on ``env`` poses."""
    return ContextualProblem(int(horizon), int(env.n_arms), int(env.dim), bool(env.shared),
                             float(env.norm_bound), float(env.lo), float(env.hi), int(delay),
                             env.name, int(lattice_bits))


class ContextualPolicy(Policy):
    """Base of the contextual policies (module docstring).  Parameters are declared and parsed
    as for every policy (:class:`~dpledger.policies.base.Param`)."""

    contextual: ClassVar[bool] = True
    privacy_model: ClassVar[str] = "none"

    @abstractmethod
    def releases(self, problem: ContextualProblem) -> list[Release]: ...

    @abstractmethod
    def certificate(self, problem: ContextualProblem) -> Certificate: ...

    @abstractmethod
    def theorem(self, problem: ContextualProblem) -> Theorem: ...

    @abstractmethod
    def run_one(self, rng: np.random.Generator, env, problem: ContextualProblem) -> RunOutput: ...

    def ledger_streams(self, problem: ContextualProblem) -> int:
        """Streams of the ledger's records: one per model (the default), or one for a
        record-private policy whose trees run over every delivered record."""
        return problem.n_streams

    def stream_meaning(self, problem: ContextualProblem) -> str:
        """What a stream of this policy's ledger holds (run.json ``contextual``)."""
        return ("one stream: the shared model's records" if problem.shared else
                "stream a: the records of the rounds arm a was played")

    def row_capacity(self, problem: ContextualProblem) -> int:
        """Ledger rows one run may write (the simulator's memory estimate)."""
        return problem.n_streams

    def model_bytes(self, problem: ContextualProblem) -> int:
        """Bytes of the policy's models and scratch for one run (memory estimate)."""
        return 8 * problem.n_streams * (problem.dim * problem.dim + 2 * problem.dim)

    def describe(self) -> dict:
        out = super().describe()
        out["contextual"] = True
        out["privacy_model"] = self.privacy_model
        return out


def run_arrays(T: int) -> tuple[np.ndarray, ...]:
    """A compiled loop's per-round outputs for T rounds: (actions, regret terms, delivered
    streams, delivered rounds, info counters (2,))."""
    return (np.zeros(T, dtype=np.int64), np.zeros(T), np.zeros(T, dtype=np.int64),
            np.zeros(T, dtype=np.int64), np.zeros(2, dtype=np.int64))


def default_problem() -> ContextualProblem:
    """A problem for listing a policy's theorem without a run (``dpledger policies``)."""
    return ContextualProblem(10_000, 2, 2, False, 1.0, 0.0, 1.0, 0, "linear")


def check_delay(delay) -> int:
    """The delay D: an integer >= 0 (D >= T is allowed: nothing is learned)."""
    if isinstance(delay, bool) or not isinstance(delay, (int, np.integer)):
        raise DpledgerError(f"--delay must be an integer >= 0, got {delay!r}")
    if delay < 0:
        raise DpledgerError(f"--delay must be >= 0, got {int(delay)} (a reward cannot arrive "
                            "before its round)")
    return int(delay)
