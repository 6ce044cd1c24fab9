"""Reward families and their distinguishability gaps, for the regret lower bounds.

Azize & Basu 2022 (NeurIPS), §3, define for an arm's distribution P in a family 𝓜 and the best
mean μ*, the *KL-distinguishability gap* and the *TV-distinguishability gap*

    d_inf(P, μ*, 𝓜) = inf { KL(P ‖ P′) : P′ ∈ 𝓜, mean(P′) > μ* },
    t_inf(P, μ*, 𝓜) = inf { TV(P, P′)  : P′ ∈ 𝓜, mean(P′) > μ* },

which enter their Theorem 3, eq. (4) (and, with ε → ∞, the Lai–Robbins bound).  This module
computes both for the three stochastic reward families dpledger simulates
(:mod:`dpledger.policies.environments`).  The family 𝓜 of an arm is the family of its
environment — a choice (*reconstructed*: the theorem holds for any family 𝓔 the policy is
consistent over; the paper does not fix one for these rewards):

* **bernoulli** — {Bernoulli(p)}: d_inf = kl(μ_a, μ*) and t_inf = Δ_a (the paper's
  consequence 2 of Theorem 3).  kl(·, 1) = ∞: no Bernoulli mean exceeds 1.
* **truncexp** — {Exp(λ) truncated to [0, 1], λ > 0}: a one-parameter exponential family in
  θ = −λ (sufficient statistic x, log-partition A(θ) = ln((e^θ − 1)/θ)) with monotone
  likelihood ratio, so KL(P_a ‖ P_θ′) and TV(P_a, P_θ′) both grow as θ′ moves away from θ_a:
  the infima over {mean > μ*} = {λ′ < λ*} are attained at the best arm's own rate λ* (closed
  forms below; no minimisation).
* **beta** — {Beta(a′, b′) : a′, b′ > 0}, a two-parameter exponential family.  KL(P ‖ Q_θ′) is
  convex in the natural parameters θ′ = (a′ − 1, b′ − 1) and {mean ≥ μ*} = {a′(1 − μ*) ≥
  b′μ*} is a half-plane in them, so d_inf lies on the line a′ = μ*s, b′ = (1 − μ*)s: one
  convex variable s, whose stationarity condition is solved by bracketing to a relative
  1e-13 in s.  t_inf has no such structure (TV is not convex in the parameters): it is a
  2-D numerical minimisation over (mean m′ ≥ μ*, concentration s′), a grid then a bounded
  quasi-Newton polish.  **Accuracy**: every point evaluated is feasible, so the value returned
  is the TV of an actual alternative, ≥ t_inf — the lower bound computed from it is never
  above the theorem's (a sound side); tests/test_regret_bounds.py finds it within 2e-4 of a
  global grid of binned TVs and at or below every exact TV of a dense local grid (to 1e-10).  TV itself is exact up to special-function accuracy
  (~1e-14): the two densities cross at most twice (their log-ratio is α ln x + β ln(1−x) + c),
  so TV = Σ (P − Q)(I) over the intervals I where P's density is the larger, from the
  regularised incomplete beta function.

A regret quantity, not a certified privacy number: nothing here is rounded outward.
"""
from __future__ import annotations

import math
from itertools import pairwise
from dataclasses import dataclass
from functools import lru_cache

from dpledger.errors import DpledgerError

FAMILIES = ("bernoulli", "truncexp", "beta")
# Beta parameters the gap computations are tested on (tests/test_regret_bounds.py); outside
# them the special functions lose the digits the minimisation needs: refused, not guessed.
BETA_PARAM_RANGE = (1e-3, 1e4)


@dataclass(frozen=True)
class RewardInstance:
    """A bandit instance: a reward family and each arm's parameters (rewards in [0, 1]).

    ``params[a]`` is (p,) for bernoulli, (λ,) for truncexp, (a, b) for beta.  Build it from an
    environment (:meth:`from_environment`), so that it is validated once, where environments
    are (a run.json's block: :func:`dpledger.verify.env_from_json` first)."""

    family: str
    params: tuple[tuple[float, ...], ...]

    @property
    def n_arms(self) -> int:
        return len(self.params)

    @property
    def means(self) -> tuple[float, ...]:
        return tuple(arm_mean(self.family, p) for p in self.params)

    def describe(self) -> str:
        if self.family == "bernoulli":
            return f"bernoulli means=[{', '.join(f'{p[0]:g}' for p in self.params)}]"
        if self.family == "truncexp":
            return f"truncexp rates=[{', '.join(f'{p[0]:g}' for p in self.params)}]"
        return f"beta ab=[{', '.join(f'{a:g}:{b:g}' for a, b in self.params)}]"

    def to_json(self) -> dict:
        return {"family": self.family, "params": [list(p) for p in self.params],
                "means": list(self.means)}

    @classmethod
    def from_environment(cls, env) -> "RewardInstance":
        """The instance of a :class:`~dpledger.policies.environments.Environment` (already
        validated).  A fixed table has no reward family, and the papers' bounds are stated for
        rewards in [0, 1]: both are refused."""
        from dpledger.policies import environments as E
        if env.kind == E.TABLE:
            raise DpledgerError("regret bounds need a stochastic reward family (bernoulli, "
                                "truncexp or beta); a fixed reward table has none")
        if (env.lo, env.hi) != (0.0, 1.0):
            raise DpledgerError(f"regret bounds are stated for rewards in [0, 1]; this instance "
                                f"declares the range [{env.lo:g}, {env.hi:g}]")
        family = E.KIND_NAMES[env.kind]
        cols = 2 if env.kind == E.BETA else 1
        params = tuple(tuple(float(v) for v in row[:cols]) for row in env.params)
        lo, hi = BETA_PARAM_RANGE
        if family == "beta" and any(not lo <= v <= hi for p in params for v in p):
            raise DpledgerError(f"regret bounds for Beta rewards are computed for parameters in "
                                f"[{lo:g}, {hi:g}]; got {', '.join(f'{a:g}:{b:g}' for a, b in params)}")
        return cls(family, params)


@dataclass(frozen=True)
class ArmGap:
    """One arm's gaps to the best mean μ*: Δ = μ* − μ_a and the two distinguishability gaps
    (∞ where no alternative of the family has a mean above μ*)."""

    arm: int
    mean: float
    gap: float
    d_inf: float
    t_inf: float


def arm_mean(family: str, p: tuple[float, ...]) -> float:
    if family == "bernoulli":
        return float(p[0])
    if family == "truncexp":
        from dpledger.policies.environments import truncexp_mean
        return truncexp_mean(p[0])
    if family == "beta":
        return p[0] / (p[0] + p[1])
    raise DpledgerError(f"unknown reward family {family!r}; known: {', '.join(FAMILIES)}")


@lru_cache(maxsize=256)
def arm_gaps(instance: RewardInstance) -> tuple[ArmGap, ...]:
    """Every suboptimal arm's (Δ, d_inf, t_inf), in arm order (cached: plots evaluate the
    bounds at hundreds of horizons, and only T changes)."""
    means = instance.means
    mu_star = max(means)
    best = instance.params[means.index(mu_star)]
    out = []
    for a, (p, m) in enumerate(zip(instance.params, means, strict=True)):
        gap = mu_star - m
        if not gap > 0:
            continue
        if instance.family == "bernoulli":
            d, t = bernoulli_gaps(m, mu_star)
        elif instance.family == "truncexp":
            d, t = truncexp_kl(p[0], best[0]), truncexp_tv(p[0], best[0])
        else:
            d, t = beta_d_inf(p[0], p[1], mu_star), beta_t_inf(p[0], p[1], mu_star)
        out.append(ArmGap(a, m, gap, d, t))
    return tuple(out)


# ---- Bernoulli ---------------------------------------------------------------------------------

def bernoulli_gaps(mean: float, mu_star: float) -> tuple[float, float]:
    """(kl(μ_a, μ*), Δ_a): Azize & Basu 2022, consequence 2 of Theorem 3; kl(·, 1) = ∞."""
    from dpledger.policies.rules import kl_log1p
    kl = math.inf if mu_star >= 1.0 else float(kl_log1p(mean, mu_star))
    return kl, mu_star - mean


# ---- truncated exponential on [0, 1] -----------------------------------------------------------

def truncexp_log_partition(rate: float) -> float:
    """A(−λ) = ln((1 − e^{−λ})/λ) for the density λe^{−λx}/(1 − e^{−λ}) = exp(−λx − A(−λ))
    on [0, 1] (λ > 0), without cancellation for small or large λ."""
    return math.log(-math.expm1(-rate)) - math.log(rate)


def truncexp_kl(rate: float, rate_alt: float) -> float:
    """KL(Exp_[0,1](λ) ‖ Exp_[0,1](λ′)) = (λ′ − λ)·mean(λ) − A(−λ) + A(−λ′) (exponential
    family, natural parameter −λ)."""
    from dpledger.policies.environments import truncexp_mean
    return max(0.0, (rate_alt - rate) * truncexp_mean(rate) - truncexp_log_partition(rate)
               + truncexp_log_partition(rate_alt))


def truncexp_tv(rate: float, rate_alt: float) -> float:
    """TV between two truncated exponentials: their densities cross once, at
    x0 = (A(−λ) − A(−λ′))/(λ′ − λ), so TV = |F_λ(x0) − F_λ′(x0)| with
    F_λ(x) = (1 − e^{−λx})/(1 − e^{−λ})."""
    if rate == rate_alt:
        return 0.0
    x0 = (truncexp_log_partition(rate) - truncexp_log_partition(rate_alt)) / (rate_alt - rate)
    x0 = min(1.0, max(0.0, x0))

    def cdf(lam: float) -> float:
        return math.expm1(-lam * x0) / math.expm1(-lam)
    return abs(cdf(rate) - cdf(rate_alt))


# ---- Beta --------------------------------------------------------------------------------------

def beta_kl(a: float, b: float, a2: float, b2: float) -> float:
    """KL(Beta(a, b) ‖ Beta(a′, b′)) = ln B(a′, b′) − ln B(a, b) + (a − a′)ψ(a) + (b − b′)ψ(b)
    + (a′ − a + b′ − b)ψ(a + b)."""
    from scipy.special import betaln, digamma
    return max(0.0, float(betaln(a2, b2) - betaln(a, b) + (a - a2) * digamma(a)
                          + (b - b2) * digamma(b) + (a2 - a + b2 - b) * digamma(a + b)))


def beta_d_inf(a: float, b: float, mu_star: float) -> float:
    """inf {KL(Beta(a, b) ‖ Beta(a′, b′)) : a′/(a′ + b′) ≥ μ*} for a/(a + b) < μ* < 1.

    On the line a′ = μ*s, b′ = (1 − μ*)s, d/ds KL = μ*ψ(μ*s) + (1 − μ*)ψ((1 − μ*)s) − ψ(s)
    − [μ*ψ(a) + (1 − μ*)ψ(b) − ψ(a + b)], increasing in s, → −∞ as s → 0 and → −H(μ*) −
    E[μ* ln X + (1 − μ*) ln(1 − X)] > 0 as s → ∞ (Gibbs: μ* ln x + (1 − μ*) ln(1 − x) ≤ −H(μ*)):
    its one root is the minimiser, found by bracketing (brentq) to a relative 1e-13."""
    from scipy.optimize import brentq
    from scipy.special import digamma
    if mu_star >= 1.0:
        return math.inf
    target = float(mu_star * digamma(a) + (1 - mu_star) * digamma(b) - digamma(a + b))

    def slope(log_s: float) -> float:
        s = math.exp(log_s)
        return float(mu_star * digamma(mu_star * s) + (1 - mu_star) * digamma((1 - mu_star) * s)
                     - digamma(s) - target)
    lo = hi = math.log(a + b)
    for _ in range(400):        # the slope runs from −∞ to a positive limit (docstring)
        if slope(lo) <= 0:
            break
        lo -= 2.0
    for _ in range(400):
        if slope(hi) >= 0:
            break
        hi += 2.0
    if not slope(lo) <= 0 <= slope(hi):
        raise DpledgerError(f"the Beta KL gap of Beta({a:g}, {b:g}) to mean {mu_star:g} could "
                            "not be bracketed (parameters outside the supported range)")
    log_s = brentq(slope, lo, hi, xtol=1e-13, rtol=1e-13) if lo < hi else lo
    s = math.exp(log_s)
    return beta_kl(a, b, mu_star * s, (1 - mu_star) * s)


def beta_tv(a: float, b: float, a2: float, b2: float) -> float:
    """TV(Beta(a, b), Beta(a′, b′)), exact up to the incomplete beta function's accuracy.

    In the logit y = ln(x/(1 − x)) the log density ratio g(y) = α ln x + β ln(1 − x) + c (α =
    a − a′, β = b − b′, c = ln B(a′, b′) − ln B(a, b)) has at most one stationary point (at x =
    α/(α + β), when α and β have one sign), so at most two roots; TV is the sum of P(I) − Q(I)
    over the pieces I between them where g > 0."""
    from scipy.optimize import brentq
    from scipy.special import betainc, betaln, expit
    al, be = a - a2, b - b2
    c = float(betaln(a2, b2) - betaln(a, b))

    def g(y: float) -> float:
        return al * -math.log1p(math.exp(-y)) + be * -math.log1p(math.exp(y)) + c \
            if -700 < y < 700 else (al * min(y, 0.0) + be * -max(y, 0.0) + c)
    cuts = [-745.0, 745.0]
    if al != 0 and be != 0 and (al > 0) == (be > 0):
        xm = al / (al + be)
        cuts.insert(1, math.log(xm) - math.log1p(-xm))
    roots = [brentq(g, lo, hi, xtol=1e-14, rtol=1e-15) for lo, hi in pairwise(cuts)
             if (g(lo) < 0) != (g(hi) < 0) and g(lo) != 0 and g(hi) != 0]

    def cdf(p: float, q: float, y: float) -> float:
        if y == -math.inf:
            return 0.0
        if y == math.inf:
            return 1.0
        # the lower tail from the smaller side keeps its digits near x = 1
        return float(betainc(p, q, expit(y))) if y <= 0 else 1.0 - float(betainc(q, p, expit(-y)))
    edges = [-math.inf] + roots + [math.inf]
    tv = 0.0
    for lo, hi in pairwise(edges):
        mid = 0.0 if (lo, hi) == (-math.inf, math.inf) else (
            hi - 1.0 if lo == -math.inf else lo + 1.0 if hi == math.inf else (lo + hi) / 2)
        if g(mid) > 0:
            tv += (cdf(a, b, hi) - cdf(a, b, lo)) - (cdf(a2, b2, hi) - cdf(a2, b2, lo))
    return min(1.0, max(0.0, tv))


# the search box of beta_t_inf: mean offsets u = (m′ − μ*)/(1 − μ*) and ln s′ around ln(a + b)
_TV_U_GRID = (0.0, 1e-3, 1e-2, 0.03, 0.1, 0.2, 0.4, 0.7, 0.9)
_TV_LOG_S_SPAN, _TV_LOG_S_POINTS = 12.0, 97


def beta_t_inf(a: float, b: float, mu_star: float) -> float:
    """inf {TV(Beta(a, b), Beta(a′, b′)) : a′/(a′ + b′) ≥ μ*} by numerical minimisation over
    (m′ = μ* + (1 − μ*)u, s′ = a′ + b′): a 9 × 97 grid (u ∈ [0, 0.9], ln s′ within ±12 of
    ln(a + b)), then L-BFGS-B from the best grid point inside the box (u ∈ [0, 0.999]); the
    smallest TV seen.  Every point is a feasible alternative, so the result is ≥ the infimum
    (module docstring: accuracy)."""
    from scipy.optimize import minimize
    if mu_star >= 1.0:
        return math.inf
    centre = math.log(a + b)

    def tv_at(u: float, log_s: float) -> float:
        m, s = mu_star + (1 - mu_star) * float(u), math.exp(float(log_s))
        return beta_tv(a, b, m * s, (1 - m) * s)
    best = (math.inf, 0.0, centre)
    step = 2 * _TV_LOG_S_SPAN / (_TV_LOG_S_POINTS - 1)
    for u in _TV_U_GRID:
        for i in range(_TV_LOG_S_POINTS):
            log_s = centre - _TV_LOG_S_SPAN + i * step
            v = tv_at(u, log_s)
            if v < best[0]:
                best = (v, u, log_s)
    res = minimize(lambda z: tv_at(z[0], z[1]), [best[1], best[2]], method="L-BFGS-B",
                   bounds=[(0.0, 0.999), (centre - _TV_LOG_S_SPAN - 2, centre + _TV_LOG_S_SPAN + 2)],
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 500})
    polished = tv_at(float(res.x[0]), float(res.x[1]))
    return min(best[0], polished)
