"""The papers' regret bounds, one function each, beside the privacy theorems.

Regret is not accounting: :mod:`dpledger.accounting.theorems` holds the privacy theorems, this
module the regret theorems.  Every function returns a :class:`RegretBound` naming the paper,
theorem and equation, the formula as text, what it assumes, and its **status**:

* ``exact_constants`` — the paper states the bound with its constants; ``value`` is it.
* ``order_only`` — the paper states an order O(·) (or constants it does not give): ``value``
  is ``None`` (no constant is made up); ``order_term`` is the argument of O(·) evaluated, a
  *shape*, not a bound.
* ``asymptotic`` — a statement as T → ∞ (liminf Reg_T/ln T ≥ C, or an upper bound up to
  o(ln T)); ``value`` is C·ln T, what a plot can draw, labelled so.

A bound whose assumptions the instance or the policy's parameters do not meet has ``value`` and
``order_term`` ``None`` and says why in ``unmet``.  Logarithms are the papers': base 2 in Hu &
Hegde 2022 (they define log as base 2), natural elsewhere.  Regret quantities, not certified
privacy numbers: nothing is rounded outward.

Lower bounds for ε-global DP (Azize & Basu 2022, Azize et al. 2025) bind only policies that are
ε-DP — :func:`bounds_for_policy` takes the ε of the policy's privacy theorem; GDP policies (no
finite pure ε) and non-private ones get the non-private bounds only.  Problem-dependent lower
bounds bind *consistent* policies (regret o(T^p) for every p > 0 on every instance of the
family), minimax ones the worst instance of the family, not the instance at hand.

Which bound a paper states where (the stored texts of Ou et al. 2024 and Hu et al. 2025 lost
their formulas in conversion; their regret forms are recovered from secondary sources and
marked so in ``notes``) is listed in docs/bounds.md.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from dpledger.errors import DpledgerError, check_count, check_positive, check_real
from dpledger.policies.reward_families import ArmGap, RewardInstance, arm_gaps

STATUSES = ("exact_constants", "order_only", "asymptotic")
DIRECTIONS = ("upper", "lower", "threshold")
SCOPES = ("problem-dependent", "minimax", "regime")

HU_HEGDE_2022 = "Hu & Hegde 2022 (UAI)"
HU_2025 = "Hu, Huang, Zhang, Lécuyer & Hegde 2025 (ICML)"
MISHRA_THAKURTA_2015 = "Mishra & Thakurta 2015 (UAI)"
OU_2024 = "Ou, Avella Medina & Cummings 2024 (arXiv 2407.14879)"
AZIZE_BASU_2022 = "Azize & Basu 2022 (NeurIPS)"
AZIZE_2025 = "Azize, Wu, Honda, Orabona, Ito & Basu 2025 (NeurIPS; arXiv 2505.05613)"
AUER_2002 = "Auer, Cesa-Bianchi & Fischer 2002 (Machine Learning 47)"
UNNUMBERED = "unnumbered display"
LOST = ("the stored copy of the paper lost this formula in conversion; the form is the one "
        "recovered from secondary sources (paper notes), not read in the paper")


@dataclass(frozen=True)
class RegretBound:
    """One regret bound (or regime threshold) of one paper, evaluated at one instance."""

    key: str                         # stable id, e.g. "azize-basu-2022/thm7"
    direction: str                   # upper | lower | threshold
    scope: str                       # problem-dependent | minimax | regime
    status: str                      # exact_constants | order_only | asymptotic
    value: float | None              # regret at T (or ε, for a threshold); None: see status
    paper: str
    theorem: str
    equation: str
    formula: str
    assumes: tuple[str, ...]
    quantity: str = "regret"         # regret | epsilon
    epsilon: float | None = None     # the ε it was evaluated at (None: it does not depend on ε)
    order_term: float | None = None  # order_only: the argument of O(·), a shape, not a bound
    terms: tuple[float, ...] = ()    # per suboptimal arm: its part of the sum / its threshold
    unmet: tuple[str, ...] = ()      # assumptions not met here (value is None then)
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise DpledgerError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.direction not in DIRECTIONS or self.scope not in SCOPES:
            raise DpledgerError(f"bad direction/scope {self.direction!r}/{self.scope!r}")
        if self.status == "order_only" and self.value is not None:
            raise DpledgerError("an order-only bound has no value (no constant is made up)")

    @property
    def applies(self) -> bool:
        return not self.unmet

    @property
    def source(self) -> str:
        """Short paper name (first author et al. beyond two), theorem and equation."""
        name = self.paper.split(" (")[0]
        if name.count(",") >= 1:
            name = f"{name.split(',')[0]} et al. {name.rsplit(' ', 1)[-1]}"
        eq = "" if self.equation == UNNUMBERED else f", {self.equation}"
        return f"{name}, {self.theorem}{eq}"

    @property
    def label(self) -> str:
        """:attr:`source`, with "(asymptotic)" where the statement is one (plot legends)."""
        return self.source + (" (asymptotic)" if self.status == "asymptotic" else "")

    def to_json(self) -> dict:
        """A JSON-ready dict; a non-finite number becomes null with a note (JSON has no ∞)."""
        out = asdict(self)
        for k in ("value", "order_term"):
            v = out[k]
            if v is not None and not math.isfinite(v):
                out[k] = None
                out["notes"] = list(out["notes"]) + [f"{k} is {'+' if v > 0 else '-'}∞"]
        out["terms"] = [t if math.isfinite(t) else None for t in out["terms"]]
        for k in ("assumes", "unmet", "notes"):
            out[k] = list(out[k])
        return out


def _with(bound: RegretBound, unmet: Sequence[str]) -> RegretBound:
    """``bound`` with assumptions not met: no value, no order term."""
    if not unmet:
        return bound
    return replace(bound, value=None, order_term=None, unmet=tuple(unmet))


def _horizon(T) -> int:
    return check_count("horizon T", T, minimum=1)


def _eps(epsilon, allow_inf: bool = False) -> float:
    return check_positive("ε", epsilon, allow_inf=allow_inf)


def _instance(instance) -> RewardInstance:
    """A :class:`RewardInstance`, or Bernoulli means given as a sequence."""
    if isinstance(instance, RewardInstance):
        return instance
    from dpledger.policies import environments as E
    return RewardInstance.from_environment(E.bernoulli(list(instance)))


def _bernoulli_only(inst: RewardInstance) -> list[str]:
    return [] if inst.family == "bernoulli" else [
        f"Bernoulli rewards (this instance is {inst.family})"]


def _suboptimal(inst: RewardInstance) -> tuple[ArmGap, ...]:
    gaps = arm_gaps(inst)
    if not gaps:
        raise DpledgerError("every arm has the best mean: no suboptimal arm, no regret to bound")
    return gaps


# ---- the problem-dependent constants (one fold for every family) -------------------------------

def distinguishability_constant(gaps: Sequence[ArmGap], epsilon: float,
                                tv_factor: float = 6.0) -> tuple[float, tuple[float, ...]]:
    """Σ_a Δ_a / min(d_inf(a), c·ε·t_inf(a)) and its per-arm terms: the slope of Azize & Basu
    2022, Theorem 3, eq. (4) (c = 6); ε = ∞ gives Σ Δ_a/d_inf (Lai–Robbins).  A zero divisor
    (an underflowed divergence) makes the term ∞."""
    terms = []
    for g in gaps:
        d = min(g.d_inf, tv_factor * epsilon * g.t_inf) if math.isfinite(epsilon) else g.d_inf
        terms.append(g.gap / d if d > 0 else math.inf)
    return float(sum(terms)), tuple(terms)


def azize_basu_2022_lower_bound_constant(means, epsilon: float, tv_factor: float = 6.0) -> float:
    """Σ_{a: μ_a < μ*} Δ_a / min(kl(μ_a, μ*), c·ε·Δ_a): the ε-global-DP lower-bound slope of
    Azize & Basu 2022, Theorem 3, eq. (4), for Bernoulli arms (d_inf = kl, t_inf = Δ_a, their
    consequence 2).  c = 6 is the paper's (Table 2); c = 1 is the thesis form Σ Δ_a /
    min{KL_inf, ε·TV_inf}.  Since d_ε ≤ min(kl, ε·Δ_a) (take z = x or z = y), the 2025 constant
    is never below either (tests/test_azize2025.py checks it).  Asymptotic."""
    from dpledger.policies.reward_families import bernoulli_gaps
    mu_star, means = _gaps(means)
    gaps = [ArmGap(i, m, mu_star - m, *bernoulli_gaps(m, mu_star))
            for i, m in enumerate(means) if mu_star - m > 0]
    return distinguishability_constant(gaps, epsilon, tv_factor)[0]


def non_private_lower_bound_constant(means) -> float:
    """Lai–Robbins: Σ_{a: μ_a < μ*} Δ_a / kl(μ_a, μ*) (the ε → ∞ limit of both private ones)."""
    return azize_basu_2022_lower_bound_constant(means, math.inf)


def azize_2025_lower_bound_constant(means, epsilon: float) -> float:
    """C(ν, ε) = Σ_{a: μ_a < μ*} (μ* − μ_a) / d_ε(μ_a, μ*): the slope of the ε-global-DP regret
    lower bound liminf Reg_T / ln T ≥ C(ν, ε) for Bernoulli instances (Azize et al. 2025,
    Theorem 1 as stated in the first author's slides).  ASYMPTOTIC.  d_ε by its closed form
    (:func:`dpledger.policies.rules.d_epsilon`, the one place it is computed)."""
    from dpledger.policies.rules import d_epsilon
    mu_star, means = _gaps(means)
    if not epsilon > 0:
        raise ValueError("ε must be > 0")
    total = 0.0
    for m in means:
        if m < mu_star:
            d = d_epsilon(m, mu_star, float(epsilon))
            total += (mu_star - m) / d if d > 0 else math.inf    # d underflowed: unbounded
    return float(total)


def _gaps(means) -> tuple[float, list[float]]:
    means = [float(m) for m in means]
    if not means or any(not 0.0 <= m <= 1.0 for m in means):
        raise ValueError("Bernoulli means must lie in [0, 1]")
    return max(means), means


# ---- lower bounds ------------------------------------------------------------------------------

def azize_basu_2022_minimax(K: int, T: int, epsilon: float = math.inf) -> RegretBound:
    """Azize & Basu 2022, Theorem 2, eq. (3): for K > 1, T ≥ K − 1, ε > 0, the minimax regret of
    ε-global DP policies is ≥ max{√(T(K−1))/27, (K−1)/(131ε)}.  ε = ∞ leaves the first term,
    the non-private minimax bound (any policy).  A bound on the worst instance, not this one."""
    K, T, epsilon = check_count("K", K, minimum=2), _horizon(T), _eps(epsilon, allow_inf=True)
    value = max(math.sqrt(T * (K - 1)) / 27.0, (K - 1) / (131.0 * epsilon))
    unmet = [] if T >= K - 1 else [f"T ≥ K − 1 (T = {T}, K = {K})"]
    return _with(RegretBound(
        "azize-basu-2022/thm2", "lower", "minimax", "exact_constants", value, AZIZE_BASU_2022,
        "Theorem 2", "eq. (3)", "max{√(T(K−1))/27, (K−1)/(131ε)}",
        ("ε-global DP policy" if math.isfinite(epsilon) else "any policy (ε = ∞: the "
         "non-private term)", "K > 1, T ≥ K − 1",
         "the worst instance of the family (sup over environments), not this instance"),
        epsilon=epsilon if math.isfinite(epsilon) else None), unmet)


def azize_basu_2022_minimax_threshold(K: int, T: int, epsilon: float | None = None) -> RegretBound:
    """The regime threshold of Theorem 2: the private term of eq. (3) dominates (high privacy)
    for ε below the point where the two terms meet, √(T(K−1))/27 = (K−1)/(131ε), i.e.
    ε* = (27/131)·√((K−1)/T).  FINDING: the paper's consequences of Theorem 2 print the
    reciprocal constant, (131/27)·√((K−1)/T) — (131/27)² ≈ 23.5 times larger — and its example
    (T = 10⁶, K = 100: "equivalently hard for any ε ≥ 0.05") uses the printed form; the terms
    of eq. (3) cross at ε ≈ 0.0021 there.  ``value`` is the crossing; the printed value is in
    ``notes``."""
    K, T = check_count("K", K, minimum=2), _horizon(T)
    value = 27.0 / 131.0 * math.sqrt((K - 1) / T)
    printed = 131.0 / 27.0 * math.sqrt((K - 1) / T)
    notes = (f"the paper prints ε* = (131/27)·√((K−1)/T) = {printed:.4g}, the reciprocal "
             "constant: the two terms of eq. (3) meet at (27/131)·√((K−1)/T) (a finding)",)
    if epsilon is not None:
        notes = (f"ε = {_eps(epsilon):g}: {'high' if epsilon < value else 'low'} privacy",) + notes
    return RegretBound("azize-basu-2022/thm2-threshold", "threshold", "regime",
                       "exact_constants", value, AZIZE_BASU_2022, "Theorem 2 (consequences)",
                       "eq. (3)", "ε* = (27/131)·√((K−1)/T), where the terms of eq. (3) meet",
                       ("the minimax bound of eq. (3)",), quantity="epsilon", notes=notes,
                       epsilon=epsilon)


def azize_basu_2022_problem_dependent(instance, T: int, epsilon: float) -> RegretBound:
    """Azize & Basu 2022, Theorem 3, eq. (4): a consistent ε-global DP policy has
    liminf Reg_T/ln T ≥ Σ_{Δ_a > 0} Δ_a / min(d_inf(P_a, μ*, 𝓜_a), 6ε·t_inf(P_a, μ*, 𝓜_a)).
    d_inf and t_inf per family: :mod:`dpledger.policies.reward_families` (numerical for Beta
    t_inf; accuracy there).  ASYMPTOTIC: value = C·ln T."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    c, terms = distinguishability_constant(_suboptimal(inst), epsilon)
    notes = (f"family {inst.family}: " + _FAMILY_NOTE[inst.family],)
    return RegretBound(
        "azize-basu-2022/thm3", "lower", "problem-dependent", "asymptotic", c * math.log(T),
        AZIZE_BASU_2022, "Theorem 3", "eq. (4)",
        "liminf Reg_T / ln T ≥ Σ_a Δ_a / min(d_inf(P_a, μ*), 6ε·t_inf(P_a, μ*))",
        ("consistent ε-global DP policy over the family", "reward distributions with finite "
         "means", "T → ∞ (a slope, not a finite-T bound)"),
        terms=terms, notes=notes, epsilon=epsilon)


_FAMILY_NOTE = {
    "bernoulli": "d_inf = kl(μ_a, μ*), t_inf = Δ_a (consequence 2 of Theorem 3)",
    "truncexp": "𝓜 = truncated exponentials on [0, 1]; d_inf, t_inf at the best arm's rate "
                "(closed forms, monotone likelihood ratio)",
    "beta": "𝓜 = all Beta(a, b); d_inf by a 1-D convex root (relative 1e-13), t_inf by 2-D "
            "numerical minimisation (a feasible point: ≥ the infimum, so this bound is never "
            "above the theorem's; within 2e-4 of a global grid, ≤ a dense local one)",
}


def _regimes(gaps: Sequence[ArmGap], terms: Sequence[float],
             epsilon: float | None) -> tuple[str, ...]:
    """A note saying which arms ``epsilon`` leaves in the high-privacy regime."""
    if epsilon is None:
        return ()
    high = [g.arm for g, t in zip(gaps, terms, strict=True) if _eps(epsilon) < t]
    return (f"ε = {epsilon:g}: " + ("low privacy for every arm" if not high else
                                    "high privacy for arm" + ("s " if len(high) > 1 else " ")
                                    + ", ".join(map(str, high))),)


def azize_basu_2022_thresholds(instance, epsilon: float | None = None) -> RegretBound:
    """The per-arm regime thresholds of Theorem 3 (consequence 3): arm a is in the low-privacy
    regime (privacy costs nothing in eq. (4)) for ε ≥ d_inf/(6·t_inf), high privacy below.
    ``value`` is the largest, above which the whole bound equals the non-private one."""
    inst = _instance(instance)
    gaps = _suboptimal(inst)
    terms = tuple(g.d_inf / (6.0 * g.t_inf) if g.t_inf > 0 else math.inf for g in gaps)
    return _finite_somewhere(RegretBound(
        "azize-basu-2022/thm3-thresholds", "threshold", "regime", "exact_constants", max(terms),
        AZIZE_BASU_2022, "Theorem 3 (consequence 3)", "eq. (4)",
        "ε_a = d_inf(P_a, μ*)/(6·t_inf(P_a, μ*)); the bound is non-private for ε ≥ max_a ε_a",
        ("the bound of eq. (4)",), quantity="epsilon", terms=terms,
        notes=_regimes(gaps, terms, epsilon), epsilon=epsilon), "d_inf(P_a, μ*)")


def azize_basu_2022_linear_minimax(d: int, T: int, epsilon: float = math.inf) -> RegretBound:
    """Azize & Basu 2022, Theorem 4, eq. (5): linear bandits with A = [−1, 1]^d, Θ = ℝ^d and
    N(0, 1) reward noise: the minimax regret of an ε-global DP policy is
    ≥ max{e⁻²·d·√T/8, e⁻⁶·d/(4ε)}."""
    d, T, epsilon = check_count("dimension d", d), _horizon(T), _eps(epsilon, allow_inf=True)
    value = max(math.exp(-2) * d * math.sqrt(T) / 8.0, math.exp(-6) * d / (4.0 * epsilon))
    return RegretBound(
        "azize-basu-2022/thm4", "lower", "minimax", "exact_constants", value, AZIZE_BASU_2022,
        "Theorem 4", "eq. (5)", "max{e⁻²·d·√T/8, e⁻⁶·d/(4ε)}",
        ("linear bandit, actions A = [−1, 1]^d, parameters Θ = ℝ^d",
         "rewards ⟨A_t, θ⟩ + N(0, 1) noise",
         "ε-global DP policy" if math.isfinite(epsilon) else "any policy (ε = ∞)",
         "the worst θ, not a given one"), epsilon=epsilon if math.isfinite(epsilon) else None)


def azize_basu_2022_linear_threshold(T: int) -> RegretBound:
    """The regime threshold of Theorem 4 (the paper's remarks): high privacy for
    ε < 2e⁻⁴/√T, where the two terms of eq. (5) cross."""
    T = _horizon(T)
    return RegretBound("azize-basu-2022/thm4-threshold", "threshold", "regime",
                       "exact_constants", 2.0 * math.exp(-4) / math.sqrt(T), AZIZE_BASU_2022,
                       "Theorem 4 (remarks)", "eq. (5)", "ε* = 2e⁻⁴/√T",
                       ("the linear minimax bound of eq. (5)",), quantity="epsilon")


def _graves_lai_program(actions: np.ndarray, gaps: np.ndarray, best: int,
                        caps: np.ndarray) -> tuple[float, float]:
    """(certified lower value, primal value) of inf_α Σ_a α(a)Δ_a subject to
    ‖a‖²_{H_α⁻¹} ≤ caps[a] for every suboptimal a, H_α = Σ_a α(a)·a·aᵀ, α ≥ 0.

    The best action's α is free (Δ = 0): its infimum is the limit α(a*) → ∞, in which
    ‖a‖²_{H⁻¹} becomes ã^T H̃⁻¹ ã in the coordinates of a*^⊥ (ã = Qᵀa).  The primal is solved
    by SLSQP from a scaled feasible start; the value reported is a *dual* one, sound whatever
    the solver did: for x_i ⊥ a* and λ ≥ 0 with Σ_i λ_i⟨a_j, x_i⟩² ≤ Δ_j for every action j,
    every feasible α has Σ α_jΔ_j ≥ Σ_i λ_i x_iᵀH x_i ≥ Σ_i λ_i (2⟨x_i, a_i⟩ − caps_i)
    (a_iᵀH⁻¹a_i = sup_x 2⟨x, a_i⟩ − xᵀHx); x_i = H̃⁻¹ã_i at the primal point, λ by a linear
    program, then shrunk until the inequalities hold in floating point."""
    from scipy.optimize import linprog, minimize
    d = actions.shape[1]
    q = np.linalg.svd(actions[best][None, :])[2][1:].T          # orthonormal basis of a*^⊥
    sub = [i for i in range(len(actions)) if i != best]
    A = actions[sub] @ q                                          # (m, d − 1)
    g, c = gaps[sub], caps[sub]
    if d == 1:
        return 0.0, 0.0
    def norms(alpha):
        H = A.T @ (alpha[:, None] * A)
        return np.einsum("ij,ij->i", A, np.linalg.solve(H, A.T).T), H
    start = np.ones(len(sub))
    start *= float(np.max(norms(start)[0] / c)) * (1 + 1e-9)    # constraints scale as 1/t
    res = minimize(lambda a: float(a @ g), start, jac=lambda a: g, method="SLSQP",
                   bounds=[(1e-12, None)] * len(sub),
                   constraints=[{"type": "ineq", "fun": lambda a: 1.0 - norms(a)[0] / c,
                                 "jac": lambda a: -_norm_jacobian(A, a) / c[:, None]}],
                   options={"maxiter": 500, "ftol": 1e-12})
    alpha = res.x if res.success and np.all(norms(res.x)[0] <= c * (1 + 1e-6)) else start
    H = norms(alpha)[1]
    X = np.linalg.solve(H, A.T).T                                 # x_i, row i
    gain = 2.0 * np.einsum("ij,ij->i", X, A) - c
    load = (A @ X.T) ** 2                                         # load[j, i] = ⟨ã_j, x_i⟩²
    lp = linprog(-gain, A_ub=load, b_ub=g, bounds=[(0, None)] * len(sub), method="highs")
    lam = np.clip(lp.x, 0.0, None) if lp.status == 0 else np.zeros(len(sub))
    worst = float(np.max(load @ lam / g)) if lam.any() else 0.0
    if worst > 1.0:
        lam /= worst
    dual = float(max(lam @ gain, 0.0)) * (1 - 1e-9)
    return dual, float(alpha @ g)


def _norm_jacobian(A: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """∂(ã_iᵀH⁻¹ã_i)/∂α_j = −⟨ã_j, H⁻¹ã_i⟩², row i."""
    H = A.T @ (alpha[:, None] * A)
    return -((A @ np.linalg.solve(H, A.T)) ** 2).T


def azize_basu_2022_linear_problem_dependent(actions, theta, T: int,
                                             epsilon: float = math.inf,
                                             rho: float | None = None) -> RegretBound:
    """Azize & Basu 2022, Theorem 5, eq. (6): for a finite action set A ⊂ ℝ^d spanning ℝ^d, θ
    with a unique optimal action and N(0, 1) reward noise, a consistent ε-global DP policy has
    liminf Reg_T/ln T ≥ c_ε(A, θ) = inf_{α ≥ 0} Σ_a α(a)Δ_a subject to, for every a with
    Δ_a > 0, ‖a‖²_{H_α⁻¹} ≤ min{Δ_a²/2, 3ε·ρ_a(A)·Δ_a}, H_α = Σ_a α(a)·a·aᵀ (Table 2's
    form; the theorem's display prints the norm ‖a‖²_{H_α} without the inverse, which the
    Graves–Lai program it extends does not have: a finding).  ASYMPTOTIC.

    ρ_a(A) is "a structure-dependent constant" the paper's main text does not define: with
    ``rho`` None the private constraint is dropped, which only loosens the program, so the value
    is c_∞(A, θ) — Graves & Lai's non-private constant, Theorem 5 at its weakest (sound for every
    ρ, never tight in the high-privacy regime) — and the notes say so.  With ``rho`` given (one
    ρ for every action, the table's ρ(A)), the full c_ε; arm a's constraint is the private one
    for ε < Δ_a/(6ρ) (its regime threshold, in ``terms`` then).  The value is a certified
    *lower* value of the program (a dual point; :func:`_graves_lai_program`), the primal in the
    notes."""
    T, epsilon = _horizon(T), _eps(epsilon, allow_inf=True)
    A = np.asarray(actions, dtype=np.float64)
    th = np.asarray(theta, dtype=np.float64).ravel()
    if A.ndim != 2 or A.shape[0] < 2 or A.shape[1] != th.size or not (
            np.all(np.isfinite(A)) and np.all(np.isfinite(th))):
        raise DpledgerError("Theorem 5 needs a finite (K, d) action array, K ≥ 2, and a finite θ "
                            f"of d entries; got actions {A.shape}, θ {th.shape}")
    if rho is not None:
        rho = check_positive("ρ", rho)
    means = A @ th
    best = int(np.argmax(means))
    gaps = means[best] - means
    unmet = []
    if np.linalg.matrix_rank(A) < A.shape[1]:
        unmet.append(f"an action set spanning ℝ^{A.shape[1]} (rank {np.linalg.matrix_rank(A)})")
    if np.sum(gaps <= 1e-12 * max(1.0, abs(means[best]))) > 1:
        unmet.append("a unique optimal action (ties at the best mean)")
    private = math.isfinite(epsilon) and rho is not None
    caps = 0.5 * gaps ** 2
    if private:
        caps = np.minimum(caps, 3.0 * epsilon * rho * gaps)
    notes = []
    if math.isfinite(epsilon) and rho is None:
        notes.append("ρ_a(A) is not stated in the paper's main text: the private constraint is "
                     "dropped (c_ε ≥ c_∞), so the value is the non-private Graves–Lai constant, "
                     "sound for every ρ")
    terms: tuple[float, ...] = ()
    value = None
    if not unmet:
        dual, primal = _graves_lai_program(A, gaps, best, caps)
        value = dual * math.log(T)
        notes.append(f"c = {dual:.6g} certified (dual), primal {primal:.6g}")
        if rho is not None:
            terms = tuple(float(gaps[i]) / (6.0 * rho) for i in range(len(gaps)) if i != best)
    return _with(RegretBound(
        "azize-basu-2022/thm5", "lower", "problem-dependent", "asymptotic", value,
        AZIZE_BASU_2022, "Theorem 5", "eq. (6)",
        "liminf Reg_T / ln T ≥ inf_α Σ_a α(a)Δ_a s.t. ‖a‖²_{H_α⁻¹} ≤ min{Δ_a²/2, 3ερ_a(A)Δ_a}",
        ("linear bandit, finite action set spanning ℝ^d, a unique optimal action",
         "rewards ⟨a, θ⟩ + N(0, 1) noise", "consistent ε-global DP policy" if
         math.isfinite(epsilon) else "consistent policy (ε = ∞: Graves–Lai)",
         "T → ∞ (a slope, not a finite-T bound)"), terms=terms, notes=tuple(notes),
        epsilon=epsilon if math.isfinite(epsilon) else None), unmet)


def linear_environment_bounds(environment: dict, T: int,
                              ts: Sequence[int]) -> list[tuple[RegretBound, list[int], list[float]]]:
    """The drawable lower bound of a linear run (a run.json ``environment``): Theorem 5 of Azize
    & Basu 2022 at ε = ∞ (:func:`azize_basu_2022_linear_problem_dependent`, the Graves–Lai
    constant c, which binds every consistent policy, private or not — ρ_a(A) of the private
    constraint is not stated), on the fixed arm set with the theorem's N(0, 1) noise only: [] for
    another environment (Bernoulli rewards, σ ≠ 1, drawn contexts).  An asymptotic slope, so
    the curve along ``ts`` is c·ln t from the one program solved at T."""
    if (environment.get("name") != "linear-fixed" or environment.get("noise") != "gaussian"
            or environment.get("noise_sd") != 1.0):
        return []
    bound = azize_basu_2022_linear_problem_dependent(environment["arm_set"],
                                                     environment["theta"], T)
    if bound.value is None:
        return []
    xs = sorted({int(t) for t in ts if 1 <= t <= T})
    slope = bound.value / math.log(T) if T > 1 else 0.0
    return [(bound, xs, [slope * math.log(t) for t in xs])]


def azize_2025_lower(instance, T: int, epsilon: float) -> RegretBound:
    """Azize et al. 2025, the ε-global DP lower bound (Theorem 1 as stated in the first author's
    slides): liminf Reg_T/ln T ≥ Σ Δ_a / d_ε(μ_a, μ*), d_ε(x, y) = inf_{z between x, y}
    ε|z − x| + kl(z, y), for Bernoulli instances.  ASYMPTOTIC.  Never below Theorem 3 of
    Azize & Basu 2022 (d_ε ≤ min(kl, εΔ))."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    base = RegretBound(
        "azize-2025/lower", "lower", "problem-dependent", "asymptotic", None, AZIZE_2025,
        "Theorem 1", UNNUMBERED,
        "liminf Reg_T / ln T ≥ Σ_a Δ_a / d_ε(μ_a, μ*), d_ε(x, y) = inf_z ε|z − x| + kl(z, y)",
        ("consistent ε-global DP policy", "Bernoulli rewards", "T → ∞"),
        notes=("the paper's body was not read; statement from the first author's slides",),
        epsilon=epsilon)
    unmet = _bernoulli_only(inst)
    if unmet:
        return _with(base, unmet)
    from dpledger.policies.rules import d_epsilon
    mu = max(inst.means)
    terms = tuple(g.gap / d if (d := d_epsilon(g.mean, mu, epsilon)) > 0 else math.inf
                  for g in _suboptimal(inst))
    return replace(base, value=sum(terms) * math.log(T), terms=terms)


def _finite_somewhere(bound: RegretBound, what: str) -> RegretBound:
    """A regime threshold whose every per-arm term is infinite (μ* = 1, or μ_a = 0, on
    Bernoulli arms: ``what`` is infinite) separates no regimes: every ε is high privacy for
    every arm.  It is reported as not applicable, with that reason, not as ε = ∞ per arm."""
    if bound.terms and not any(math.isfinite(t) for t in bound.terms):
        return _with(replace(bound, terms=(), notes=()), (
            f"a finite {what} for some suboptimal arm (here every one is infinite, so no ε "
            "reaches the low-privacy regime)",))
    return bound


def azize_2025_thresholds(instance, epsilon: float | None = None) -> RegretBound:
    """The per-arm regime thresholds of the d_ε bound (the slides): d_ε(μ_a, μ*) = kl(μ_a, μ*)
    — privacy is free for arm a — iff ε ≥ logit(μ*) − logit(μ_a).  Bernoulli only."""
    inst = _instance(instance)
    base = RegretBound("azize-2025/thresholds", "threshold", "regime", "exact_constants", None,
                       AZIZE_2025, "Theorem 1 (regimes)", UNNUMBERED,
                       "ε_a = logit(μ*) − logit(μ_a) = ln(μ*/μ_a) + ln((1−μ_a)/(1−μ*))",
                       ("Bernoulli rewards",), quantity="epsilon")
    unmet = _bernoulli_only(inst)
    if unmet:
        return _with(base, unmet)
    mu = max(inst.means)

    def logit(p: float) -> float:
        return math.inf if p >= 1 else -math.inf if p <= 0 else math.log(p) - math.log1p(-p)
    gaps = _suboptimal(inst)
    terms = tuple(logit(mu) - logit(g.mean) for g in gaps)
    return _finite_somewhere(replace(base, value=max(terms), terms=terms,
                                     notes=_regimes(gaps, terms, epsilon), epsilon=epsilon),
                             "logit(μ*) − logit(μ_a)")


def lai_robbins(instance, T: int) -> RegretBound:
    """The non-private asymptotic lower bound, liminf Reg_T/ln T ≥ Σ_a Δ_a/d_inf(P_a, μ*) (Lai
    & Robbins 1985): the ε → ∞ limit of Azize & Basu 2022, Theorem 3, eq. (4), which cites it.
    ASYMPTOTIC; binds every consistent policy, private or not."""
    inst, T = _instance(instance), _horizon(T)
    c, terms = distinguishability_constant(_suboptimal(inst), math.inf)
    return RegretBound("lai-robbins-1985", "lower", "problem-dependent", "asymptotic",
                       c * math.log(T), "Lai & Robbins 1985 (Adv. Appl. Math. 6)",
                       "non-private lower bound", UNNUMBERED,
                       "liminf Reg_T / ln T ≥ Σ_a Δ_a / d_inf(P_a, μ*)",
                       ("consistent policy over the family", "T → ∞"), terms=terms,
                       notes=("Azize & Basu 2022, eq. (4) at ε = ∞",
                              f"family {inst.family}: " + _FAMILY_NOTE[inst.family]))


# ---- upper bounds ------------------------------------------------------------------------------

def _upper(key, scope, status, value, paper, theorem, formula, assumes, *, order_term=None,
           terms=(), notes=(), equation=UNNUMBERED, epsilon=None) -> RegretBound:
    return RegretBound(key, "upper", scope, status, value, paper, theorem, equation, formula,
                       tuple(assumes), order_term=order_term, terms=tuple(terms),
                       notes=tuple(notes), epsilon=epsilon)


def _hu_hegde_counter(counter: str) -> list[str]:
    """Theorem 2's proof bounds the binary mechanism's noise (its optimism shift υ): outside
    it with ``counter=smooth`` (policies/smooth_hu_hegde.py)."""
    if counter == "binary":
        return []
    return ["the binary mechanism on the epoch buffers (this policy runs counter=smooth: the "
            "proof and its shift υ bound the binary mechanism's noise, outside the theorem)"]


def hu_hegde_2022_dp_ts(instance, T: int, epsilon: float,
                        counter: str = "binary") -> RegretBound:
    """Hu & Hegde 2022, Theorem 2 (DP-TS): R(T) ≤ Σ_{Δ_j > 0} O(max{log T/Δ_j,
    (log T/ε)·log(log T/(ε·Δ_j))}), log base 2 (their notation).  Order only; withheld for
    ``counter="smooth"`` (:func:`_hu_hegde_counter`)."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    L = math.log2(T)
    terms = tuple(max(L / g.gap, L / epsilon * math.log2(L / (epsilon * g.gap)))
                  for g in _suboptimal(inst))
    return _with(_upper("hu-hegde-2022/thm2", "problem-dependent", "order_only", None,
                        HU_HEGDE_2022, "Theorem 2",
                        "Σ_j O(max{log T/Δ_j, (log T/ε)·log(log T/(ε·Δ_j))}), log = log₂",
                        ("rewards in [0, 1]", "DP-TS (Algorithm 1)"), order_term=sum(terms),
                        terms=terms, epsilon=epsilon), _hu_hegde_counter(counter))


def hu_hegde_2022_dp_ts_minimax(K: int, T: int, epsilon: float,
                                counter: str = "binary") -> RegretBound:
    """Hu & Hegde 2022, Remark (c) after Theorem 2 (DP-TS, problem-independent):
    O(√(K·T·log T) + (K·log T/ε)·log(√(T·log T)/√(K·ε))), log base 2.  Order only; withheld
    for ``counter="smooth"``."""
    K, T, epsilon = check_count("K", K, minimum=2), _horizon(T), _eps(epsilon)
    L = math.log2(T)
    term = math.sqrt(K * T * L) + K * L / epsilon * math.log2(math.sqrt(T * L) /
                                                              math.sqrt(K * epsilon))
    return _with(_upper("hu-hegde-2022/thm2-minimax", "minimax", "order_only", None,
                        HU_HEGDE_2022, "Theorem 2, remark (c)",
                        "O(√(K·T·log T) + (K·log T/ε)·log(√(T·log T)/√(K·ε))), log = log₂",
                        ("rewards in [0, 1]", "DP-TS (Algorithm 1)"), order_term=term,
                        epsilon=epsilon), _hu_hegde_counter(counter))


def hu_hegde_2022_lazy_dp_ts(instance, T: int, epsilon: float) -> RegretBound:
    """Hu & Hegde 2022, Theorem 4 (Lazy-DP-TS): R(T) ≤ Σ_{Δ_j > 0} O(log T/min{ε, Δ_j}), log
    base 2.  Order only."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    L = math.log2(T)
    terms = tuple(L / min(epsilon, g.gap) for g in _suboptimal(inst))
    return _upper("hu-hegde-2022/thm4", "problem-dependent", "order_only", None, HU_HEGDE_2022,
                  "Theorem 4", "Σ_j O(log T / min{ε, Δ_j}), log = log₂",
                  ("rewards in [0, 1]", "Lazy-DP-TS (Algorithm 2)"), order_term=sum(terms),
                  terms=terms, epsilon=epsilon)


def hu_hegde_2022_lazy_dp_ts_minimax(K: int, T: int, epsilon: float) -> RegretBound:
    """Hu & Hegde 2022, Remark (b) after Theorem 4 (Lazy-DP-TS, problem-independent):
    O(√(K·T·log T) + K·log T/ε), log base 2.  Order only."""
    K, T, epsilon = check_count("K", K, minimum=2), _horizon(T), _eps(epsilon)
    L = math.log2(T)
    return _upper("hu-hegde-2022/thm4-minimax", "minimax", "order_only", None, HU_HEGDE_2022,
                  "Theorem 4, remark (b)", "O(√(K·T·log T) + K·log T/ε), log = log₂",
                  ("rewards in [0, 1]", "Lazy-DP-TS (Algorithm 2)"),
                  order_term=math.sqrt(K * T * L) + K * L / epsilon, epsilon=epsilon)


def hu_2025_dp_ts_ucb(instance, T: int, alpha: float) -> RegretBound:
    """Hu et al. 2025, Theorem 4.2 (DP-TS-UCB, problem-dependent):
    Σ_{Δ_i > 0} O(ln(T^{0.5(3−α)}·Δ_i²)·ln^α(T)/Δ_i).  Order only; recovered from secondary
    sources (the stored text lost the formula)."""
    inst, T = _instance(instance), _horizon(T)
    alpha = _fraction("α", alpha)
    lnT = math.log(T)
    terms = tuple((0.5 * (3 - alpha) * lnT + 2 * math.log(g.gap)) * lnT ** alpha / g.gap
                  for g in _suboptimal(inst))
    return _upper("hu-2025/thm4.2", "problem-dependent", "order_only", None, HU_2025,
                  "Theorem 4.2", "Σ_i O(ln(T^{0.5(3−α)}·Δ_i²)·ln^α(T)/Δ_i)",
                  ("rewards in [0, 1]", "DP-TS-UCB with trade-off α ∈ [0, 1]"),
                  order_term=sum(terms), terms=terms, notes=(LOST,))


def hu_2025_dp_ts_ucb_minimax(K: int, T: int, alpha: float) -> RegretBound:
    """Hu et al. 2025, Theorem 4.2 (DP-TS-UCB, worst case): O(√(K·T)·ln^{0.5(1+α)}(T)).  Order
    only; recovered from secondary sources."""
    K, T, alpha = check_count("K", K, minimum=2), _horizon(T), _fraction("α", alpha)
    return _upper("hu-2025/thm4.2-minimax", "minimax", "order_only", None, HU_2025,
                  "Theorem 4.2 (worst case)", "O(√(K·T)·ln^{0.5(1+α)}(T))",
                  ("rewards in [0, 1]", "DP-TS-UCB with trade-off α ∈ [0, 1]"),
                  order_term=math.sqrt(K * T) * math.log(T) ** (0.5 * (1 + alpha)),
                  notes=(LOST,))


def mishra_thakurta_2015_dp_ucb(instance, T: int, epsilon0: float, gamma: float,
                                printed: bool = True,
                                relaxation_scale: float = 1.0,
                                counter: str = "binary") -> RegretBound:
    """Mishra & Thakurta 2015, Theorem 4 (private UCB, Algorithm 1): with probability ≥ 1 − γ
    over the algorithm, E[Regret(T)] = O(Σ_{μ_a < μ*} k·log²T·log(kT/γ)/(ε·Δ_a) + Δ_a).
    k/ε is 1/ε0 with ε0 = ε/k the printed per-tree budget (``epsilon0`` is the policy's; with
    ε0 = ε — Azize & Basu's reading — the same proof gives 1/ε0, reconstructed).  Order only.
    ``printed=False`` (the experimental confidence width) and a tuned Γ (``relaxation_scale``
    ≠ 1) are outside the theorem, as is ``counter="smooth"`` (the proof bounds the binary
    tree's noise)."""
    inst, T = _instance(instance), _horizon(T)
    epsilon0, gamma = _eps(epsilon0), check_positive("γ", gamma)
    K, lnT = inst.n_arms, math.log(T)
    terms = tuple(lnT ** 2 * math.log(K * T / gamma) / (epsilon0 * g.gap) + g.gap
                  for g in _suboptimal(inst))
    bound = _upper("mishra-thakurta-2015/thm4", "problem-dependent", "order_only", None,
                   MISHRA_THAKURTA_2015, "Theorem 4",
                   "O(Σ_a k·log²T·log(kT/γ)/(ε·Δ_a) + Δ_a), w.p. ≥ 1 − γ over the algorithm",
                   ("rewards in [0, 1]", "Algorithm 1 with the printed width Γ/n",
                    "per-tree budget ε0 = ε/k (k/ε = 1/ε0)"), order_term=sum(terms),
                   terms=terms, notes=("its proof (Lemma 6) gives E[n_a(T)] ≤ 8Γ/Δ_a² + ζ, "
                                       "ζ an unstated constant",), epsilon=epsilon0)
    unmet = [] if printed else ["the printed confidence width (this policy uses "
                                "width=experimental, outside the theorem)"]
    if relaxation_scale != 1.0:
        unmet.append(f"the printed confidence relaxation Γ (this policy scales it by "
                     f"relaxation_scale = {relaxation_scale:g}, outside the theorem)")
    if counter != "binary":
        unmet.append("the binary tree counter (this policy runs counter=smooth: its proof "
                     "bounds the binary tree's noise, outside the theorem)")
    return _with(bound, unmet)


def mishra_thakurta_2015_private_ts(instance, T: int, epsilon: float,
                                    as_printed: bool = True,
                                    counter: str = "binary") -> RegretBound:
    """Mishra & Thakurta 2015, Theorem 8 (private TS, Algorithm 2): for T ≥ 8·max{log₂(1/Δ), 1}
    and ε < 1, E[Regret(T)] = O(k·log³T/(Δ²ε²)), Δ the gap between the two best arms.  Order
    only.  ``as_printed=False`` (gap estimation off or other random pulls) is outside it, as is
    ``counter="smooth"`` (the proof bounds the binary tree's noise)."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    means = sorted(inst.means, reverse=True)
    delta = means[0] - means[1]
    unmet = []
    if not epsilon < 1:
        unmet.append(f"ε < 1 (ε = {epsilon:g})")
    if delta <= 0:
        unmet.append("a unique best arm (Δ = gap of the two best arms > 0)")
    elif T < 8 * max(math.log2(1 / delta), 1):
        unmet.append(f"T ≥ 8·max{{log₂(1/Δ), 1}} = {8 * max(math.log2(1 / delta), 1):g}")
    if not as_printed:
        unmet.append("Algorithm 2 as printed (gap estimation, Γ/Δ̂² random pulls)")
    if counter != "binary":
        unmet.append("the binary tree counter (this policy runs counter=smooth: its proof "
                     "bounds the binary tree's noise, outside the theorem)")
    term = inst.n_arms * math.log(T) ** 3 / (delta ** 2 * epsilon ** 2) if delta > 0 else None
    return _with(_upper("mishra-thakurta-2015/thm8", "problem-dependent", "order_only", None,
                        MISHRA_THAKURTA_2015, "Theorem 8", "O(k·log³T/(Δ²·ε²)), Δ = μ_(1) − μ_(2)",
                        ("rewards in [0, 1] (Bernoulli in the analysis)",
                         "T ≥ 8·max{log₂(1/Δ), 1}", "ε < 1"), order_term=term,
                        epsilon=epsilon), unmet)


def ou_2024_ts_gaussian(instance, T: int) -> RegretBound:
    """Ou et al. 2024, Theorem 2 (quoting Agrawal & Goyal 2017): TS with Gaussian priors has
    regret O(Σ_i ln(T·Δ_i²)/Δ_i) (and O(√(K·T·ln K)) problem-independent).  Order only;
    recovered from secondary sources (the stored text lost the formula)."""
    inst, T = _instance(instance), _horizon(T)
    terms = tuple(math.log(T * g.gap ** 2) / g.gap for g in _suboptimal(inst))
    return _upper("ou-2024/thm2", "problem-dependent", "order_only", None, OU_2024,
                  "Theorem 2 (Agrawal & Goyal 2017)", "Σ_i O(ln(T·Δ_i²)/Δ_i)",
                  ("rewards in [0, 1]", "TS-Gaussian (Algorithm 1)"), order_term=sum(terms),
                  terms=terms, notes=(LOST,))


def ou_2024_ts_gaussian_minimax(K: int, T: int) -> RegretBound:
    """Ou et al. 2024, Theorem 2 (Agrawal & Goyal 2017), problem-independent: O(√(K·T·ln K))."""
    K, T = check_count("K", K, minimum=2), _horizon(T)
    return _upper("ou-2024/thm2-minimax", "minimax", "order_only", None, OU_2024,
                  "Theorem 2 (Agrawal & Goyal 2017)", "O(√(K·T·ln K))",
                  ("rewards in [0, 1]", "TS-Gaussian (Algorithm 1)"),
                  order_term=math.sqrt(K * T * math.log(K)), notes=(LOST,))


def ou_2024_mts_gaussian(instance, T: int, b: int, c: float) -> RegretBound:
    """Ou et al. 2024, Theorem 5 (M-TS-Gaussian, b pre-pulls, variance scale c), problem-
    dependent: O(Σ_i (c·ln(T·Δ_i²)/Δ_i + b·Δ_i)).  RECONSTRUCTED form, order only: the stored
    text lost the formula; its proof says regret grows by the factor c over Theorem 2 and adds
    back the pre-pull regret (at most b·Σ Δ_i), which Hu et al. 2025's Table 1 (secondary
    sources) agrees with for b = c = ln^α T and b = c = T^γ."""
    inst, T = _instance(instance), _horizon(T)
    b, c = check_count("b", b, minimum=0), check_positive("c", c)
    terms = tuple(c * math.log(T * g.gap ** 2) / g.gap + b * g.gap for g in _suboptimal(inst))
    return _upper("ou-2024/thm5", "problem-dependent", "order_only", None, OU_2024,
                  "Theorem 5", "Σ_i O(c·ln(T·Δ_i²)/Δ_i + b·Δ_i)",
                  ("rewards in [0, 1]", "M-TS-Gaussian (Algorithm 2); the theorem's condition "
                   "on c was lost in the stored text"), order_term=sum(terms), terms=terms,
                  notes=(LOST, "form reconstructed: c·(Theorem 2) + the pre-pull regret"))


def azize_basu_2022_adap_ucb(instance, T: int, epsilon: float, alpha: float) -> RegretBound:
    """Azize & Basu 2022, Theorem 7 (AdaP-UCB), rewards in [0, 1], α > 3:
    Reg_T ≤ Σ_{Δ_a > 0} (16α/min{Δ_a, ε}·log T + 3α/(α − 3)).  Exact constants (the additive
    term as printed in the NeurIPS paper; an earlier draft has α/(α − 3))."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    alpha = check_positive("α", alpha)
    gaps = _suboptimal(inst)
    unmet = [] if alpha > 3 else [f"α > 3 (α = {alpha:g})"]
    terms = () if unmet else tuple(16 * alpha / min(g.gap, epsilon) * math.log(T)
                                   + 3 * alpha / (alpha - 3) for g in gaps)
    return _with(_upper("azize-basu-2022/thm7", "problem-dependent", "exact_constants",
                        sum(terms), AZIZE_BASU_2022, "Theorem 7",
                        "Σ_a (16α/min{Δ_a, ε}·ln T + 3α/(α − 3))",
                        ("rewards in [0, 1]", "α > 3"), terms=terms,
                        notes=("an earlier draft prints the additive term α/(α − 3)",),
                        epsilon=epsilon), unmet)


def azize_basu_2022_adap_klucb(instance, T: int, epsilon: float, alpha: float) -> RegretBound:
    """Azize & Basu 2022, Theorem 8 (AdaP-KLUCB), Bernoulli rewards, α > 3: Reg_T ≤ Σ_{Δ_a > 0}
    (C1(α)·Δ_a/min{d_inf(μ_a, μ*), C2·ε·Δ_a}·log T + 3α/(α − 3)) with constants C1(α), C2 > 0
    the paper does not give: order only (the order term takes C1 = C2 = 1)."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    alpha = check_positive("α", alpha)
    unmet = _bernoulli_only(inst) + ([] if alpha > 3 else [f"α > 3 (α = {alpha:g})"])
    terms = tuple(g.gap * math.log(T) / min(g.d_inf, epsilon * g.gap)
                  for g in _suboptimal(inst))
    return _with(_upper("azize-basu-2022/thm8", "problem-dependent", "order_only", None,
                        AZIZE_BASU_2022, "Theorem 8",
                        "Σ_a (C1(α)·Δ_a/min{d_inf(μ_a, μ*), C2·ε·Δ_a}·ln T + 3α/(α − 3)), "
                        "C1(α), C2 not given", ("Bernoulli rewards", "α > 3"),
                        order_term=sum(terms), terms=terms, epsilon=epsilon), unmet)


def azize_basu_2022_adap_minimax(K: int, T: int, epsilon: float) -> RegretBound:
    """Azize & Basu 2022, Appendix E.4 (AdaP-UCB and AdaP-KLUCB, problem-independent):
    O(√(K·T·log T) + K·log T/ε).  Order only."""
    K, T, epsilon = check_count("K", K, minimum=2), _horizon(T), _eps(epsilon)
    lnT = math.log(T)
    return _upper("azize-basu-2022/adap-minimax", "minimax", "order_only", None,
                  AZIZE_BASU_2022, "Appendix E.4",
                  "O(√(K·T·ln T) + K·ln T/ε)", ("rewards in [0, 1]", "α > 3"),
                  order_term=math.sqrt(K * T * lnT) + K * lnT / epsilon, epsilon=epsilon)


def azize_2025_upper(instance, T: int, epsilon: float, alpha: float,
                     variant: str = "DP-KLUCB") -> RegretBound:
    """Azize et al. 2025 (DP-KLUCB; DP-IMED by the summarised Theorem 2): for α > 1 and
    Bernoulli bandits, Reg_T ≤ α·Σ_{a ≠ a*} Δ_a·log T/d_ε(μ_a, μ*) + o(log T).  ASYMPTOTIC: the
    o(log T) term is not made explicit; value = α·C(ν, ε)·ln T."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    alpha = check_positive("α", alpha)
    unmet = _bernoulli_only(inst) + ([] if alpha > 1 else [f"α > 1 (α = {alpha:g})"])
    base = _upper(f"azize-2025/{variant.lower()}", "problem-dependent", "asymptotic", None,
                  AZIZE_2025, f"Theorem 2 ({variant})",
                  "Reg_T ≤ α·Σ_a Δ_a·ln T/d_ε(μ_a, μ*) + o(ln T)",
                  ("Bernoulli rewards", "α > 1", "T → ∞ (o(ln T) not explicit)"),
                  notes=("the paper's body was not read: stated for DP-KLUCB in the first "
                         "author's slides, for both algorithms in a summary's Theorem 2",),
                  epsilon=epsilon)
    if unmet:
        return _with(base, unmet)
    lower = azize_2025_lower(inst, T, epsilon)
    return replace(base, value=alpha * lower.value,
                   terms=tuple(alpha * t * math.log(T) for t in lower.terms))


def sajed_sheffet_2019_dp_se(instance, T: int, epsilon: float) -> RegretBound:
    """DP-SE (Sajed & Sheffet 2019): O(K·log T/ε + Σ_{a ≠ a*} log T/Δ_a), as Azize & Basu 2022
    quote it in their Table 1 (the paper itself is not among the sources).  Order only."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    lnT = math.log(T)
    term = inst.n_arms * lnT / epsilon + sum(lnT / g.gap for g in _suboptimal(inst))
    return _upper("sajed-sheffet-2019", "problem-dependent", "order_only", None,
                  "Sajed & Sheffet 2019 (ICML)", "regret bound (quoted in Azize & Basu 2022, "
                  "Table 1)", "O(K·ln T/ε + Σ_a ln T/Δ_a)", ("rewards in [0, 1]",),
                  order_term=term, epsilon=epsilon)


def hu_huang_mehta_2021_anytime_lazy_ucb(instance, T: int, epsilon: float) -> RegretBound:
    """Anytime-Lazy-UCB (Hu, Huang & Mehta 2021): O(Σ_j ln T/min{Δ_j, ε}) — the guarantee Hu &
    Hegde 2022 say Lazy-DP-TS shares (remark (a) after their Theorem 4).  Order only; dpledger's
    index constants are reconstructed, so the policy run is not the paper's."""
    inst, T, epsilon = _instance(instance), _horizon(T), _eps(epsilon)
    terms = tuple(math.log(T) / min(g.gap, epsilon) for g in _suboptimal(inst))
    return _upper("hu-huang-mehta-2021", "problem-dependent", "order_only", None,
                  "Hu, Huang & Mehta 2021 (arXiv 2102.07929)",
                  "regret bound (as quoted by Hu & Hegde 2022, remark (a) after Theorem 4)",
                  "Σ_j O(ln T/min{Δ_j, ε})", ("rewards in [0, 1]",), order_term=sum(terms),
                  terms=terms, notes=("dpledger's index constants are reconstructed",),
                  epsilon=epsilon)


def auer_2002_ucb1(instance, T: int) -> RegretBound:
    """Auer, Cesa-Bianchi & Fischer 2002, Theorem 1 (UCB1, rewards in [0, 1]): after n plays,
    regret ≤ 8·Σ_{Δ_i > 0} ln n/Δ_i + (1 + π²/3)·Σ_j Δ_j.  Exact constants, any n.  (Mishra &
    Thakurta 2015 quote it as their Theorem 2, in O(·) form.)"""
    inst, T = _instance(instance), _horizon(T)
    gaps = _suboptimal(inst)
    terms = tuple(8 * math.log(T) / g.gap + (1 + math.pi ** 2 / 3) * g.gap for g in gaps)
    return _upper("auer-2002/thm1", "problem-dependent", "exact_constants", sum(terms),
                  AUER_2002, "Theorem 1", "8·Σ_i ln T/Δ_i + (1 + π²/3)·Σ_j Δ_j",
                  ("rewards in [0, 1]", "UCB1 index μ̂ + √(2 ln t/n)"), terms=terms,
                  notes=("not among the five papers; quoted in O(·) form by Mishra & "
                         "Thakurta 2015, Theorem 2",))


def _fraction(name: str, value) -> float:
    v = check_real(name, value)
    if not 0 <= v <= 1:
        raise DpledgerError(f"{name} must lie in [0, 1], got {value!r}")
    return v


# ---- which bounds bind which policy ------------------------------------------------------------

UpperBounds = Callable[[object, RewardInstance, int], list[RegretBound]]


def _eps_of(policy) -> float:
    return float(policy.params["epsilon"])


UPPER_BOUNDS: dict[str, UpperBounds] = {
    "ucb1": lambda p, inst, T: [auer_2002_ucb1(inst, T)],
    "ts-gaussian": lambda p, inst, T: [ou_2024_ts_gaussian(inst, T),
                                       ou_2024_ts_gaussian_minimax(inst.n_arms, T)],
    "mts-gaussian": lambda p, inst, T: [ou_2024_mts_gaussian(inst, T, p.params["b"],
                                                             p.params["c"])],
    "dp-ts-ucb": lambda p, inst, T: [hu_2025_dp_ts_ucb(inst, T, p.params["alpha"]),
                                     hu_2025_dp_ts_ucb_minimax(inst.n_arms, T, p.params["alpha"])],
    "dp-ucb": lambda p, inst, T: [mishra_thakurta_2015_dp_ucb(
        inst, T, p.epsilon0(inst.n_arms), p.params["gamma"], p.params["width"] == "printed",
        p.params.get("relaxation_scale", 1.0), p.params.get("counter", "binary"))],
    "dp-ts-mt": lambda p, inst, T: [mishra_thakurta_2015_private_ts(
        inst, T, _eps_of(p), p.params["gap_estimation"] and p.params["random_pulls"] == "printed",
        p.params.get("counter", "binary"))],
    "dp-ts": lambda p, inst, T: [
        hu_hegde_2022_dp_ts(inst, T, _eps_of(p), p.params.get("counter", "binary")),
        hu_hegde_2022_dp_ts_minimax(inst.n_arms, T, _eps_of(p), p.params.get("counter", "binary"))],
    "lazy-dp-ts": lambda p, inst, T: [hu_hegde_2022_lazy_dp_ts(inst, T, _eps_of(p)),
                                      hu_hegde_2022_lazy_dp_ts_minimax(inst.n_arms, T, _eps_of(p))],
    "adap-ucb": lambda p, inst, T: [azize_basu_2022_adap_ucb(inst, T, _eps_of(p), p.params["alpha"]),
                                    azize_basu_2022_adap_minimax(inst.n_arms, T, _eps_of(p))],
    "adap-klucb": lambda p, inst, T: [
        azize_basu_2022_adap_klucb(inst, T, _eps_of(p), p.params["alpha"]),
        azize_basu_2022_adap_minimax(inst.n_arms, T, _eps_of(p))],
    "dp-se": lambda p, inst, T: [sajed_sheffet_2019_dp_se(inst, T, _eps_of(p))],
    "anytime-lazy-ucb": lambda p, inst, T: [hu_huang_mehta_2021_anytime_lazy_ucb(inst, T, _eps_of(p))],
    "dp-klucb": lambda p, inst, T: [_azize_2025_for(p, inst, T, "DP-KLUCB")],
    "dp-imed": lambda p, inst, T: [_azize_2025_for(p, inst, T, "DP-IMED")],
}


def _azize_2025_for(policy, inst, T, variant) -> RegretBound:
    bound = azize_2025_upper(inst, T, _eps_of(policy), policy.params["alpha"], variant)
    if policy.params.get("mechanism", "phase-sums") != "phase-sums":
        return _with(bound, ["the paper's mechanism (mechanism=phase-sums); this policy "
                             "re-noises the cumulative sum"])
    return bound


def register_upper_bounds(name: str, fn: UpperBounds) -> None:
    """Attach regret upper bounds to a policy name (a user's policy, or a new module's):
    ``fn(policy, instance, T)`` returns its :class:`RegretBound` list."""
    if not callable(fn):
        raise DpledgerError("register_upper_bounds needs a callable (policy, instance, T)")
    UPPER_BOUNDS[name] = fn


@dataclass(frozen=True)
class PrivacyModel:
    """What the lower bounds may assume of a policy: ``kind`` pure (ε-DP at ``epsilon``, its
    privacy theorem's pure ε), gdp (μ-GDP: no finite pure ε) or none (non-private)."""

    kind: str
    epsilon: float | None
    source: str

    @classmethod
    def of(cls, policy, T: int, K: int) -> "PrivacyModel":
        th = policy.theorem(T, K)
        if th.unbounded or not getattr(policy, "private", True):
            return cls("none", None, "a non-private policy: the non-private lower bounds only")
        if th.pure_epsilon is not None:
            return cls("pure", float(th.pure_epsilon),
                       f"ε = {th.pure_epsilon:g}, the pure ε of the policy's privacy theorem "
                       f"({th.paper}, {th.theorem})")
        stated = (f"μ-GDP (μ = {th.gdp_mu:g}, {th.theorem})" if th.gdp_mu is not None else
                  f"an (ε, δ) statement ({th.theorem})")
        return cls("gdp", None, f"{stated}: Gaussian noise gives no finite pure ε, so the "
                   "ε-global DP lower bounds do not apply; the non-private ones do")


def lower_bounds(instance: RewardInstance, T: int, model: PrivacyModel) -> list[RegretBound]:
    """The lower bounds and regime thresholds that bind a policy of privacy ``model`` on
    ``instance``: problem-dependent (Lai–Robbins always; Azize & Basu 2022 Thm 3 and Azize et
    al. 2025 for ε-DP), minimax (Thm 2, private or not) and the regime thresholds."""
    K = instance.n_arms
    out = [lai_robbins(instance, T)]
    if model.kind == "pure":
        eps = model.epsilon
        out = [azize_basu_2022_problem_dependent(instance, T, eps),
               azize_2025_lower(instance, T, eps)] + out
        out.append(azize_basu_2022_minimax(K, T, eps))
        out += [azize_basu_2022_minimax_threshold(K, T, eps),
                azize_basu_2022_thresholds(instance, eps), azize_2025_thresholds(instance, eps)]
    else:
        out.append(azize_basu_2022_minimax(K, T))
    return out


def bounds_for_policy(policy, instance: RewardInstance, T: int, dimension: int | None = None,
                      model: PrivacyModel | None = None) -> tuple[PrivacyModel, list[RegretBound]]:
    """Every bound that speaks about ``policy`` on ``instance`` at horizon T: the upper bounds of
    its papers (none for a policy without a regret theorem here), then the lower bounds of its
    reward family and privacy model (``model``, default the policy's at T); with
    ``dimension``, also Azize & Basu 2022's linear minimax bound (Theorem 4) and its threshold
    for A = [−1, 1]^dimension."""
    from dpledger.policies.base import validate_horizon
    T = validate_horizon(T, instance.n_arms)
    model = model or PrivacyModel.of(policy, T, instance.n_arms)
    fn = UPPER_BOUNDS.get(policy.name)
    out = list(fn(policy, instance, T)) if fn else []
    out += lower_bounds(instance, T, model)
    if dimension is not None:
        eps = model.epsilon if model.kind == "pure" else math.inf
        out += [azize_basu_2022_linear_minimax(dimension, T, eps),
                azize_basu_2022_linear_threshold(T)]
    return model, out


def drawable(bound: RegretBound) -> bool:
    """Whether a regret plot of this instance may draw ``bound`` as a curve: a problem-dependent
    regret bound with a value (minimax bounds speak of the worst instance, not this one;
    order-only bounds have no constant)."""
    return (bound.quantity == "regret" and bound.scope == "problem-dependent"
            and bound.value is not None)


def bound_curves(policy, instance: RewardInstance, T: int,
                 ts: Sequence[int]) -> list[tuple[RegretBound, list[int], list[float]]]:
    """The :func:`drawable` bounds of ``policy`` at horizon T, each re-evaluated at every t of
    ``ts`` with t ≥ K (the privacy model stays the one at T): (bound at T, ts, values), for a
    regret plot.  A value the bound has not at some t (an assumption unmet there) is NaN."""
    model, at_T = bounds_for_policy(policy, instance, T)
    keep = {b.key: b for b in at_T if drawable(b)}
    xs = sorted({int(t) for t in ts if instance.n_arms <= t <= T})
    values: dict[str, list[float]] = {k: [] for k in keep}
    for t in xs:
        found = {b.key: b.value for b in bounds_for_policy(policy, instance, t, model=model)[1]}
        for k in keep:
            v = found.get(k)
            values[k].append(math.nan if v is None else v)
    return [(keep[k], xs, values[k]) for k in keep]
