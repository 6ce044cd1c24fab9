"""Phased elimination with a G-optimal design on a linear bandit with a fixed finite arm set,
private in the rewards (the arm vectors are public): AdaC-GOPE (Azize & Basu, "Concentrated
differential privacy for bandits", arXiv 2309.00557; ρ-zCDP, Gaussian noise) and Hanna,
Girgis, Fragouli & Diggavi's central-model algorithm ("Differentially private stochastic linear
bandits: (almost) for free", arXiv 2207.03445; ε-DP, Laplace noise).  Both RECONSTRUCTED
(docs/algorithms.md#adac-gope, docs/algorithms.md#dp-gope-hanna-et-al): the papers' phase constants
were not at hand; the skeleton is Lattimore & Szepesvári 2020, Algorithm 12 (§22).

**A phase** ℓ = 1, 2, … with accuracy β_ℓ = 2^-ℓ and active arms A_ℓ (A_1 = all):

1. π_ℓ = a G-optimal design on A_ℓ (:func:`~dpledger.policies.design.g_optimal_design`; g its
   reached max_a ‖a‖²_{V(π)⁻¹}, s its support size);
2. n_ℓ = the smallest n with w(n) = A/√n + B/n ≤ β_ℓ, where A/√n bounds the rewards' error
   and B/n the noise's in any direction x ∈ A_ℓ, with probability 1 − δ_ℓ each
   (conf = ln(2/δ_ℓ), δ_ℓ = 1/(T·K·ℓ(ℓ+1))):
   A = √(g·conf/2) (rewards in [0, 1] are ½-sub-Gaussian; ‖x‖²_{V⁻¹} ≤ g/n);
   Gaussian noise of σ: B = σ·g·√(2·s·conf) (the noise of θ̂ in direction x is
   Σ_a c_a Z_a with |c_a| = |xᵀV⁻¹a| ≤ g/n); Laplace of scale b: B = b·g·s·(conf + ln s)
   (every |Z_a| ≤ b·ln(2s/δ_ℓ));
3. play each support arm a, in arm order, T_ℓ(a) = ⌈π_ℓ(a)·n_ℓ⌉ times;
4. release the phase's per-arm reward sums S_a, each with its own noise: one release per
   (phase, arm) over the arm's observations of the phase (sensitivity 1: a reward in [0, 1]
   changes one sum by at most 1);
5. θ̂ = V⁻¹ Σ_a a·S̃_a, V = Σ_a T_ℓ(a)·a aᵀ (in the arms' span); keep the arms with
   ⟨θ̂, x⟩ ≥ max_b ⟨θ̂, b⟩ − 2·w(n_ℓ).

When one arm is left it is played to the end (no more releases).  A phase cut by the horizon
makes no release.  A first phase longer than T is refused (the schedule cannot finish one
phase: nothing would be learned).

**Privacy.**  Phases are disjoint in time and each phase's sums are disjoint in rewards, so each
reward is in exactly one release: the certificate is one release — Gaussian (ρ-zCDP at
ρ = 1/(2σ²), μ = 1/σ) or Laplace (ε = 1/b).  The actions are post-processing of the released
sums and of the public arm set.  Ledger streams: one per arm (the arm set is public; stream a
holds arm a's rewards in play order).

**Exact sampler.**  Rewards rounded to the lattice 2^-b; a sum is an integer number of steps;
Gaussian: the released sum is (S·2^b + Z)/2^b with Z ~ N_ℤ(0, s²), s = lattice_sigma(σ, b);
Laplace: :func:`~dpledger.mechanisms.noise.lattice_laplace` (both record the lattice release,
:func:`~dpledger.mechanisms.noise.lattice_release`).

Rewards must arrive before the next phase is planned: the simulator needs ``--delay 0`` (a
delay is refused, one line).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from dpledger._jit import njit

from dpledger.accounting import theorems
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import GaussianRelease, LaplaceRelease, Release, lattice_sigma
from dpledger.errors import DpledgerError
from dpledger.mechanisms.noise import lattice_gaussian, lattice_laplace, lattice_release
from dpledger.policies.adac import (DELTA_TARGET, EPSILON_TARGET, RHO_TARGET, ZcdpTarget,
                                    zcdp_rho_of, zcdp_target_ratio)
from dpledger.policies.base import EPSILON, RunOutput
from dpledger.policies.contextual.base import ContextualPolicy, ContextualProblem
from dpledger.policies.contextual.environments import LINEAR, TABLE
from dpledger.policies.design import Design, design_counts, g_optimal_design


@njit(cache=True)
def _dgauss_sum(rng, units, s, denom):
    return lattice_gaussian(rng.bit_generator, units, s, denom)


@njit(cache=True)
def _lattice_laplace(rng, scale, bits):
    return lattice_laplace(rng, scale, 1.0, bits)


def draw_release(rng, rel: Release, total: float, bits: int, s_lat: int) -> float:
    """The released value of one (phase, arm) sum ``total`` under declared release ``rel``
    (float: total + N(0, σ²) or total + Lap(b); exact: on the lattice 2^-bits, ``s_lat`` the
    discrete Gaussian's s).  The one draw of both the whole run and the step form."""
    if isinstance(rel, GaussianRelease):
        if bits:
            unit = 2.0 ** bits
            return float(_dgauss_sum(rng, total * unit, s_lat, unit))
        return total + rng.normal(0.0, rel.sigma)
    if bits:
        return total + float(_lattice_laplace(rng, float(rel.scale), int(bits)))
    return total + rng.laplace(0.0, rel.scale)


@dataclass(frozen=True, eq=False)
class Phase:
    """A phase's plan: the ``active`` arms, their ``design``, pulls ``counts`` per active arm,
    the phase size ``n`` and the error bound ``width`` = w(n) ≤ β."""

    index: int
    active: np.ndarray
    design: Design
    counts: np.ndarray
    n: int
    width: float

    @property
    def rounds(self) -> int:
        return int(self.counts.sum())

    def order(self) -> list[int]:
        """Positions (in ``active``) of the support arms, in arm order: the play order."""
        return [int(i) for i in self.design.support]


def phase_size(A: float, B: float, beta: float) -> int:
    """The smallest integer n with A/√n + B/n ≤ β (u = 1/√n solves B·u² + A·u = β)."""
    if B <= 0:
        return max(1, math.ceil((A / beta) ** 2))
    u = (-A + math.sqrt(A * A + 4.0 * B * beta)) / (2.0 * B)
    n = max(1, math.ceil(1.0 / (u * u)))
    while A / math.sqrt(n) + B / n > beta:      # rounding of the closed form
        n += 1
    return n


class PhasedElimination(ContextualPolicy):
    """Common part of the two policies (module docstring); subclasses name the noise."""

    private = True
    exact_sampler = True
    provenance = "reconstructed"
    privacy_model = "reward-private"
    record_private = False

    # -- the noise ------------------------------------------------------------------------------
    def release(self, bits: int = 0) -> Release:
        """The continuous release whose lattice form the exact sampler (``bits``) makes."""
        raise NotImplementedError

    def noise_width_coefficient(self, g: float, s: int, conf: float) -> float:
        raise NotImplementedError

    def releases(self, problem: ContextualProblem) -> list[Release]:
        bits = problem.lattice_bits
        rel = self.release(bits)
        return [lattice_release(rel, bits) if bits else rel]

    def lattice_s(self, bits: int) -> int:
        rel = self.release(bits)
        return int(lattice_sigma(rel.sigma, bits)) if bits and isinstance(rel, GaussianRelease) \
            else 0

    def certificate(self, problem: ContextualProblem) -> Certificate:
        rel = self.releases(problem)[0]
        return Certificate(candidates=(Candidate(
            Composition.of([rel]), Witness(0, 0, None),
            f"phases are disjoint and a phase's per-arm sums are disjoint: each reward is in "
            f"one release, 1× {rel.kind} (sensitivity 1 on a sum of rewards in [0, 1]); the "
            f"arm set is public, the actions post-processing"),), adaptive=False)

    def ledger_streams(self, problem: ContextualProblem) -> int:
        return problem.arms

    def stream_meaning(self, problem: ContextualProblem) -> str:
        return "stream a: the rewards of arm a, in play order (the arm set is public)"

    def row_capacity(self, problem: ContextualProblem) -> int:
        return problem.arms * (problem.horizon.bit_length() + 2)

    def model_bytes(self, problem: ContextualProblem) -> int:
        d, K = problem.dim, problem.arms
        return 8 * (K * d * 4 + d * d * 4)

    # -- the schedule ---------------------------------------------------------------------------
    def plan_phase(self, X: np.ndarray, active: np.ndarray, index: int, T: int) -> Phase:
        """Phase ``index``'s plan on the active arms (module docstring, steps 1–3); a function
        of public numbers only, kept per (arm set, active arms, phase, T) for later runs."""
        key = (X.shape, X.tobytes(), np.asarray(active, np.int64).tobytes(), int(index), int(T))
        cache = self.__dict__.setdefault("_plans", {})
        if key not in cache:
            if len(cache) > 4096:
                cache.clear()
            cache[key] = self._plan_phase(X, np.asarray(active, np.int64), index, T)
        return cache[key]

    def _plan_phase(self, X: np.ndarray, active: np.ndarray, index: int, T: int) -> Phase:
        K = X.shape[0]
        design = g_optimal_design(X[active])
        s = int(design.support.size)
        conf = math.log(2.0 * T * K * index * (index + 1))
        A = math.sqrt(design.g * conf / 2.0)
        B = self.noise_width_coefficient(design.g, s, conf)
        beta = 2.0 ** -index
        n = phase_size(A, B, beta)
        return Phase(index, active, design, design_counts(design, n), n,
                     A / math.sqrt(n) + B / n)

    def first_phase(self, X: np.ndarray, T: int) -> Phase:
        """Phase 1, refused with one line when it cannot finish within T."""
        ph = self.plan_phase(X, np.arange(X.shape[0]), 1, T)
        if ph.rounds > T:
            raise DpledgerError(f"policy {self.name!r}: its first phase needs {ph.rounds} rounds "
                                f"(design support {ph.design.support.size}, n = {ph.n}), more "
                                f"than the horizon {T}: the schedule cannot finish one phase "
                                "(a longer horizon, a weaker privacy target or fewer arms)")
        return ph

    @staticmethod
    def eliminate(ph: Phase, noisy: np.ndarray) -> np.ndarray:
        """The arms kept after phase ``ph`` from its released sums (step 5)."""
        Z = ph.design.coords
        idx = ph.order()
        Zs = Z[idx]
        m = ph.counts[idx].astype(np.float64)
        V = (Zs * m[:, None]).T @ Zs
        theta = np.linalg.solve(V, Zs.T @ noisy)
        est = Z @ theta
        return ph.active[est >= est.max() - 2.0 * ph.width]

    # -- one run ----------------------------------------------------------------------------------
    def arm_set(self, env) -> np.ndarray:
        """The fixed arm set of ``env`` (K, d), refused with one line when the arms change."""
        if env.kind == LINEAR and env.contexts.shape[0] == 1:
            return env.contexts[0]
        if env.kind == TABLE and env.shared and env.contexts.shape[0] >= 1 \
                and np.all(env.contexts == env.contexts[:1]):
            return env.contexts[0]
        raise DpledgerError(f"policy {self.name!r} plays a fixed arm set: --env linear-fixed "
                            "(or a contextual table whose every row holds the same K contexts)")

    def run_one(self, rng, env, problem: ContextualProblem, capture: bool = False,
                stop_at: int | None = None) -> RunOutput:
        """One run (module docstring).  ``capture``: ``extra["releases"]`` lists every
        release (stream, start, stop, clean sum, released sum); ``stop_at``: stop after that
        many rounds (the white-box audit stops after phase 1)."""
        if problem.delay:
            raise DpledgerError(f"policy {self.name!r} plans each phase from the previous "
                                f"one's released sums: it needs --delay 0, got {problem.delay}")
        X = self.arm_set(env)
        T = problem.horizon if stop_at is None else min(int(stop_at), problem.horizon)
        K = problem.arms
        bits = problem.lattice_bits
        rel = self.release(bits)
        s_lat = self.lattice_s(bits)
        lo, hi = problem.lo, problem.hi
        linear = env.kind == LINEAR
        if linear:
            means = X @ env.theta
            best = float(means.max())
        actions = np.zeros(T, np.int64)
        regret = np.zeros(T)
        n_obs = np.zeros(K, np.int64)
        rows, caps = [], []
        reward_sum = uniform_sum = 0.0
        t = 0
        ph = self.first_phase(X, problem.horizon)
        while t < T:
            if ph.active.size == 1:
                a = int(ph.active[0])
                r = self._rewards(rng, env, means if linear else None, a, t, T - t)
                reward_sum += float(r.sum())
                uniform_sum += self._uniform(env, means if linear else None, t, T - t)
                actions[t:] = a
                regret[t:] = (best - means[a]) if linear else (
                    env.rewards[t:T].max(axis=1) - env.rewards[t:T, a])
                n_obs[a] += T - t
                t = T
                break
            sums = np.zeros(ph.active.size)
            complete = True
            for i in ph.order():
                a = int(ph.active[i])
                m = int(ph.counts[i])
                mp = min(m, T - t)
                raw = self._rewards(rng, env, means if linear else None, a, t, mp)
                x = (raw - lo) / (hi - lo)
                if bits:
                    x = np.rint(x * 2.0 ** bits) * 2.0 ** -bits
                sums[i] = float(x.sum())
                reward_sum += float(raw.sum())
                uniform_sum += self._uniform(env, means if linear else None, t, mp)
                actions[t:t + mp] = a
                regret[t:t + mp] = (best - means[a]) if linear else (
                    env.rewards[t:t + mp].max(axis=1) - env.rewards[t:t + mp, a])
                t += mp
                if mp < m:
                    complete = False
                    break
            if not complete:
                break
            noisy = np.zeros(len(ph.order()))
            for j, i in enumerate(ph.order()):
                a = int(ph.active[i])
                m = int(ph.counts[i])
                rows.append((a, int(n_obs[a]), int(n_obs[a]) + m, 0, 1))
                noisy[j] = draw_release(rng, rel, sums[i], bits, s_lat)
                if capture:
                    caps.append((a, int(n_obs[a]), int(n_obs[a]) + m, sums[i], noisy[j]))
                n_obs[a] += m
            ph = self.plan_phase(X, self.eliminate(ph, noisy), ph.index + 1, problem.horizon)
        obs_stream = actions[:t].copy()
        out = RunOutput(actions=actions[:t], noise_draws=len(rows), extra={
            "regret": regret[:t], "obs_stream": obs_stream,
            "obs_round": np.arange(1, t + 1, dtype=np.int64), "rounds": int(t),
            "reward_sum": reward_sum, "uniform_sum": uniform_sum})
        out.rows = (np.array(rows, dtype=np.int64).T if rows
                    else np.zeros((5, 0), np.int64))
        if capture:
            out.extra["releases"] = caps
        return out

    @staticmethod
    def _rewards(rng, env, means, a: int, t: int, m: int) -> np.ndarray:
        """Raw rewards of m pulls of arm a at rounds t+1 … t+m: Bernoulli(⟨θ, x_a⟩) (one
        uniform a round, as the contextual loop draws them), ⟨θ, x_a⟩ + σ·N(0, 1) clipped to
        [lo, hi] (Gaussian noise: one standard normal a round), or the table's."""
        if means is not None and env.noise_sd > 0:
            return np.clip(means[a] + env.noise_sd * rng.standard_normal(m), env.lo, env.hi)
        if means is not None:
            return (rng.random(m) < means[a]).astype(np.float64)
        return np.asarray(env.rewards[t:t + m, a], dtype=np.float64)

    @staticmethod
    def _uniform(env, means, t: int, m: int) -> float:
        if means is not None:
            return float(means.mean()) * m
        return float(env.rewards[t:t + m].mean(axis=1).sum())


class AdaCGOPE(ZcdpTarget, PhasedElimination):
    """AdaC-GOPE (Azize & Basu, arXiv 2309.00557): Gaussian noise N(0, σ²) on each (phase, arm)
    sum, σ from ``rho`` (σ = 1/√(2ρ)) or solved for (ε, δ) by dpledger's accountant."""

    name = "adac-gope"
    title = "AdaC-GOPE (Azize & Basu, arXiv 2309.00557; reconstructed phase constants)"
    params_spec = (EPSILON_TARGET, DELTA_TARGET, RHO_TARGET)

    def __init__(self, **params):
        super().__init__(**params)
        self.float_ratio = self.ratio = zcdp_target_ratio(self, params)

    def release(self, bits=0):
        return GaussianRelease(sigma=self.ratio_for(bits), sensitivity=1.0)

    def noise_width_coefficient(self, g, s, conf):
        return self.ratio * g * math.sqrt(2.0 * s * conf)

    def theorem(self, problem):
        return theorems.azize_basu_2023_adac("AdaC-GOPE", zcdp_rho_of(self.ratio),
                                             self.params["delta"])


class HannaDPGOPE(PhasedElimination):
    """Hanna, Girgis, Fragouli & Diggavi 2022's central-model phased elimination
    (arXiv 2207.03445): Laplace noise Lap(1/ε) on each (phase, arm) sum: ε-DP."""

    name = "dp-gope-hanna"
    title = ("Central private phased elimination (Hanna, Girgis, Fragouli & Diggavi 2022; "
             "reconstructed)")
    params_spec = (EPSILON,)

    def release(self, bits=0):
        """Lap(b), b = 1/ε moved up ulp by ulp until the accountant's (outward-rounded) ε is at
        most the target (1/0.7 in floating point certified 0.7000000000000001)."""
        eps = self.params["epsilon"]
        b = 1.0 / eps
        while LaplaceRelease(scale=b, sensitivity=1.0).epsilon > eps:
            b = math.nextafter(b, math.inf)
        return LaplaceRelease(scale=b, sensitivity=1.0)

    def noise_width_coefficient(self, g, s, conf):
        return (1.0 / self.params["epsilon"]) * g * s * (conf + math.log(max(s, 1)))

    def theorem(self, problem):
        return theorems.hanna_2022_dp_gope(self.params["epsilon"])
