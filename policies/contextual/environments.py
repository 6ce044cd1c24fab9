"""Contextual environments: where a round's contexts and rewards come from.

Four kinds, one kernel form (:class:`ContextualArms`), so that one compiled loop serves all:

* ``linear`` — a synthetic linear bandit: K arms, one context per arm (a shared θ), contexts
  x = L·|g|/‖g‖ with g ~ N(0, I_d) per arm (uniform on the positive orthant of the sphere of
  the declared norm bound L, shrunk by 1 − (d+8)·2⁻⁵³ so that rounding never leaves it), θ ≥ 0 with ‖θ‖₂·L ≤ 1, and Bernoulli(⟨θ, x⟩) rewards: ⟨θ, x⟩ ∈
  [0, 1] by construction, so rewards lie in {0, 1} with no clipping and E[r | x] = ⟨θ, x⟩ is
  exactly linear (reconstructed: the law is our choice).  Regret is the pseudo-regret
  Σ_t (max_a ⟨θ, x_{t,a}⟩ − ⟨θ, x_{t,A_t}⟩).
* ``contextual-table`` — full-information data: contexts (T, d) (one per round: disjoint
  per-arm models) or (T, K, d) (one per arm: a shared θ), rewards (T, K); exact regret
  Σ_t (max_a rewards[t, a] − rewards[t, A_t]).
* ``supervised`` — a classification data set: arms = classes, reward 1 when the arm is the
  label; a row drawn uniformly (i.i.d., from the run's generator) every round; exact regret as
  for a table (it is Σ_t 1[A_t ≠ y_t]).
* ``replay`` — logged data evaluated by replay (Li, Chu, Langford & Wang 2011): the log is
  walked in order; a row is *accepted* (a round of the policy) only when the policy picks the
  logged action (and, in rejection mode, a coin of probability q/p accepts it, q the smallest
  logged propensity: Dudík et al. 2012's rejection sampling, so that every accepted row was
  accepted with probability q whatever its context and action).  A replay log may also be
  *generated* (:func:`generated_log`): row r of a uniformly logged log drawn on demand from a
  counter-based generator keyed by the log's seed, so a log of 10⁷–10⁸ rows (the size of the
  news logs Mishra & Thakurta 2015 replayed) costs no memory and is the same log in every run.
* ``click-model`` — the online form of a generated log (:func:`click_model`): a user row drawn
  uniformly every round (one ``integers`` draw), the chosen arm's click Bernoulli(p[u, a]) (one
  ``random`` draw); pseudo-regret max_b p[u, b] − p[u, a].  Replaying an i.i.d. uniformly logged
  log yields, on its accepted rows, exactly the law of this online run (Li, Chu, Langford & Wang
  2011, Theorem 1), at a twentieth of the policy decisions for 20 arms.

Every context's Euclidean norm is at most the declared bound ``norm_bound`` (checked: a larger
one is refused, never clipped) and every reward lies in the declared range [lo, hi] (checked).
Policies see rewards rescaled to [0, 1] by (r − lo)/(hi − lo), as the K-armed ones do; regret
and mean rewards are reported on the raw scale.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from dpledger.errors import DpledgerError, check_real

LINEAR, TABLE, SUPERVISED, REPLAY, CLICKS = 0, 1, 2, 3, 4
KIND_NAMES = {LINEAR: "linear", TABLE: "contextual-table", SUPERVISED: "supervised",
              REPLAY: "replay", CLICKS: "click-model"}
REPLAY_MODES = ("uniform", "rejection")
# the linear bandit with a fixed arm set (:func:`linear_fixed`): kind LINEAR whose one row of
# contexts is every round's
LINEAR_FIXED = "linear-fixed"


class ContextualArms(NamedTuple):
    """The kernel form of every contextual environment (one numba type for all kinds)."""
    kind: int
    contexts: np.ndarray        # (rows, Kc, d): Kc = 1 (one context per round) or K
    rewards: np.ndarray         # (rows, K) full information; replay: (rows, 1) logged reward
    logged: np.ndarray          # replay: (rows,) logged action; else empty
    propensity: np.ndarray      # replay: (rows,) logged propensity; else empty
    theta: np.ndarray           # linear: (d,); else empty
    n_arms: int
    norm_bound: float
    lo: float
    hi: float
    accept_q: float             # replay, rejection mode: q = the smallest propensity; else 0
    log_key: int                # generated replay log (:func:`generated_log`): its key; else 0
    noise_sd: float             # linear with Gaussian noise: σ; 0: Bernoulli rewards


@dataclass(frozen=True)
class ContextualEnvironment:
    """A contextual reward source with its declared context norm bound and reward range.

    ``shared``: one context per arm and one shared θ (True), or one context per round and one
    model per arm (False).  ``rows``: the data rows a run may walk (None: unlimited — the
    synthetic linear bandit and the resampled classification data).  ``info``: what run.json
    records about where the data came from (file sha256, data set name, θ and its source)."""

    kind: int
    n_arms: int
    dim: int
    shared: bool
    norm_bound: float
    lo: float
    hi: float
    contexts: np.ndarray = field(compare=False, repr=False)
    rewards: np.ndarray = field(compare=False, repr=False)
    logged: np.ndarray = field(compare=False, repr=False)
    propensity: np.ndarray = field(compare=False, repr=False)
    theta: np.ndarray = field(compare=False, repr=False)
    rows: int | None = None
    accept_q: float = 0.0
    info: dict = field(default_factory=dict, compare=False)
    log_key: int = 0
    noise_sd: float = 0.0

    @property
    def name(self) -> str:
        if self.kind == LINEAR and self.contexts.shape[0] > 0:
            return LINEAR_FIXED
        return KIND_NAMES[self.kind]

    @property
    def n_streams(self) -> int:
        """Statistic streams: one per arm (disjoint models) or one (a shared θ)."""
        return 1 if self.shared else self.n_arms

    @property
    def is_replay(self) -> bool:
        return self.kind == REPLAY

    def as_kernel(self) -> ContextualArms:
        return ContextualArms(self.kind, self.contexts, self.rewards, self.logged,
                              self.propensity, self.theta, int(self.n_arms),
                              float(self.norm_bound), float(self.lo), float(self.hi),
                              float(self.accept_q), int(self.log_key), float(self.noise_sd))

    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.contexts, self.rewards, self.logged,
                                          self.propensity, self.theta)))

    def to_json(self) -> dict:
        out = {"name": self.name, "arms": self.n_arms, "dim": self.dim,
               "contexts": "one per arm (shared θ)" if self.shared else
               "one per round (one model per arm)",
               "norm_bound": self.norm_bound, "range": [self.lo, self.hi]}
        if self.rows is not None:
            out["rows"] = self.rows
        out.update(self.info)
        return out


def _range(lo, hi) -> tuple[float, float]:
    lo, hi = check_real("range low end", lo), check_real("range high end", hi)
    if not lo < hi:
        raise DpledgerError(f"reward range must have lo < hi, got [{lo}, {hi}]")
    return lo, hi


def _norm_bound(L) -> float:
    L = check_real("--norm-bound", L)
    if not L > 0:
        raise DpledgerError(f"--norm-bound must be > 0, got {L:g}")
    return L


def _exact_square_sums_over(rows: np.ndarray, norm_bound: float) -> np.ndarray:
    """For each row (a 2-D float array), whether Σ v² > L² in exact arithmetic.  Every finite
    double is n·2^(e−53) with an integer n < 2^53 (``np.frexp``), so Σ v² = 2^(2(E−53))·S with
    E the row's smallest exponent and S = Σ n²·4^(e−E) a Python integer: no rounding anywhere,
    and about 20 times faster than summing ``Fraction`` squares."""
    mant, exp = np.frexp(rows)
    ints = (mant * 2.0 ** 53).astype(np.int64)          # exact: mant·2^53 is an integer
    lm, le = np.frexp(norm_bound)
    ln = int(lm * 2.0 ** 53)
    out = np.zeros(rows.shape[0], dtype=bool)
    for i in range(rows.shape[0]):
        n_row, e_row = ints[i].tolist(), exp[i].tolist()
        low = min(e_row)
        total = sum((n * n) << (2 * (e - low)) for n, e in zip(n_row, e_row, strict=True))
        shift = 2 * (low - int(le))                      # compare 4^low·total with 4^le·ln²
        out[i] = (total << shift) > ln * ln if shift >= 0 else total > (ln * ln) << -shift
    return out


# One data set is checked once per process and bound (an experiment builds its environment for
# every cell, for the memory estimate and again for the run): the answer keyed by the contexts'
# bytes.
_EXACT_CHECKS: dict[tuple, np.ndarray] = {}


def _exactly_over(ctx: np.ndarray, norm_bound: float) -> np.ndarray:
    """Where a context's *exact* Euclidean norm exceeds ``norm_bound`` (the sensitivities assume
    ‖x‖ ≤ L exactly: no slack).  The float sum of squares decides every row far from the bound
    (its error is below (d + 2)·2⁻⁵² relative); rows within that of L² are decided in exact
    integer arithmetic (:func:`_exact_square_sums_over`)."""
    ctx = np.ascontiguousarray(ctx, dtype=np.float64)
    sq = np.einsum("...j,...j->...", ctx, ctx)
    L2 = norm_bound * norm_bound
    tol = (ctx.shape[-1] + 4) * 2.0 ** -52
    over = sq > L2 * (1 + tol)
    near = (sq >= L2 * (1 - tol)) & ~over
    if near.any():
        key = (hashlib.sha256(ctx.data).digest(), ctx.shape, float(norm_bound))
        cached = _EXACT_CHECKS.get(key)
        if cached is None:
            cached = np.zeros(sq.shape, dtype=bool)
            cached[near] = _exact_square_sums_over(ctx[near], norm_bound)
            if len(_EXACT_CHECKS) >= 16:
                _EXACT_CHECKS.pop(next(iter(_EXACT_CHECKS)))
            _EXACT_CHECKS[key] = cached
        over = over | cached
    return over


def fit_to_bound(ctx: np.ndarray, norm_bound: float) -> tuple[np.ndarray, int]:
    """``--clip-contexts``: every context of exact norm above L scaled to norm ≤ L (x·L/‖x‖,
    then shrunk by a few ulps where rounding left it above); returns (the contexts, how many
    were scaled).  The certificate's ‖x‖ ≤ L then holds exactly for what the policy reads."""
    out = np.array(ctx, dtype=np.float64, copy=True)
    if out.ndim == 1:                        # one context
        fitted, n = fit_to_bound(out[None], norm_bound)
        return fitted[0], n
    over = _exactly_over(out, norm_bound)
    n = int(over.sum())
    if n:
        rows = out[over]
        rows *= (norm_bound / np.sqrt(np.einsum("...j,...j->...", rows, rows)))[..., None]
        out[over] = rows
        for _ in range(64):
            still = _exactly_over(out, norm_bound)
            if not still.any():
                break
            out[still] = out[still] * np.nextafter(1.0, 0.0) ** 4
    return out, n


def check_contexts(ctx: np.ndarray, norm_bound: float, what: str, row_name: str = "row",
                   first: int = 0) -> None:
    """Every context finite and of exact Euclidean norm ≤ ``norm_bound`` (no slack: the
    sensitivities include none); the first offender is named, with its norm to 17 digits (rows
    numbered from ``first``: 0 for arrays, 1 for a log's data rows).  Nothing is clipped here;
    :func:`fit_to_bound` (``--clip-contexts``) scales offenders down instead."""
    bad = ~np.isfinite(ctx)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DpledgerError(f"{what}: a context holds NaN or infinity ({row_name} "
                            f"{idx[0] + first}" + (f", arm {idx[1]}" if ctx.ndim == 3 else "")
                            + ")")
    over = _exactly_over(ctx, norm_bound)
    if over.any():
        from fractions import Fraction
        idx = tuple(int(i) for i in np.argwhere(over)[0])
        norm = float(np.sqrt(np.dot(ctx[idx], ctx[idx])))
        excess = sum(Fraction(float(v)) ** 2 for v in ctx[idx]) - Fraction(norm_bound) ** 2
        raise DpledgerError(
            f"{what}: the context of {row_name} {idx[0] + first}" + (
                f", arm {idx[1]}" if ctx.ndim == 3 else "")
            + f" has norm {norm!r} (its exact squared norm exceeds the bound's square by "
            f"{float(excess):.3g}), above the declared bound --norm-bound {norm_bound!r} "
            "(the certificate allows no slack: rescale the data, declare a larger bound, or "
            "pass --clip-contexts to scale such contexts down to the bound)")


def checked_contexts(ctx: np.ndarray, norm_bound: float, clip: bool, what: str,
                     row_name: str = "row", first: int = 0) -> tuple[np.ndarray, int]:
    """The contexts to use: checked (refused above the bound), or with ``clip`` scaled down to
    it (:func:`fit_to_bound`); returns (contexts, how many were scaled)."""
    if not clip:
        check_contexts(ctx, norm_bound, what, row_name, first)
        return ctx, 0
    bad = ~np.isfinite(ctx)
    if bad.any():
        check_contexts(ctx, norm_bound, what, row_name, first)      # names the NaN
    fitted, n = fit_to_bound(ctx, norm_bound)
    return fitted, n


def check_rewards(rewards: np.ndarray, lo: float, hi: float, what: str, row_name: str = "row",
                  first: int = 0) -> None:
    """Every reward finite and inside the declared range (rows numbered from ``first``)."""
    if not np.all(np.isfinite(rewards)):
        raise DpledgerError(f"{what}: a reward is NaN or infinite")
    bad = (rewards < lo) | (rewards > hi)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DpledgerError(f"{what}: reward {float(rewards[idx]):g} at {row_name} "
                            f"{idx[0] + first} lies outside the declared range --range "
                            f"{lo:g},{hi:g}")


def sha256_of(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


_EMPTY_F = np.zeros(0)
_EMPTY_I = np.zeros(0, dtype=np.int64)


def theta_generator(seed: int) -> np.random.Generator:
    """The generator θ is drawn from when not given: a SeedSequence of its own, (seed, 0x7468),
    apart from every run's (seed, spawn_key=(i,)) — θ belongs to the environment, the same in
    every run of a simulation."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 0x7468])))


def noise_sd_of(noise_sd) -> float:
    """σ of Gaussian reward noise: finite and > 0 (None: Bernoulli rewards, 0.0)."""
    if noise_sd is None:
        return 0.0
    v = check_real("noise σ (--noise-sd)", noise_sd)
    if not 0 < v < float("inf"):
        raise DpledgerError(f"noise σ (--noise-sd) must be finite and > 0, got {noise_sd!r}")
    return v


def linear(dim: int, arms: int, theta=None, seed: int = 0, norm_bound: float = 1.0,
           lo: float = 0.0, hi: float = 1.0, noise_sd: float | None = None
           ) -> ContextualEnvironment:
    """The synthetic linear bandit (module docstring).  θ given (non-negative, ‖θ‖·L ≤ 1) or
    drawn from ``seed`` as |g|/(‖g‖·L), g ~ N(0, I_d).

    ``noise_sd`` σ: rewards ⟨θ, x⟩ + σ·η, η ~ N(0, 1) (one ``standard_normal`` draw a round)
    instead of Bernoulli(⟨θ, x⟩) — the noise of Azize & Basu 2022's linear lower bounds
    (Theorems 4 and 5 take σ = 1; docs/bounds.md).  A Gaussian reward is unbounded; the policy
    sees it clipped to the declared range [lo, hi] (a per-reward map, so a reward-private
    policy's certificate, which assumes rewards in [lo, hi], holds for the raw rewards), while
    regret stays the pseudo-regret of the means.  How many rewards were clipped is not counted;
    the range is recorded."""
    lo, hi = _range(lo, hi)
    L = _norm_bound(norm_bound)
    sd = noise_sd_of(noise_sd)
    if not sd and (lo > 0 or hi < 1):
        raise DpledgerError(f"--env linear draws Bernoulli rewards in {{0, 1}}, outside the "
                            f"declared range [{lo:g}, {hi:g}]")
    if not isinstance(dim, int) or dim < 1:
        raise DpledgerError(f"--dim must be an integer >= 1, got {dim!r}")
    if not isinstance(arms, int) or arms < 2:
        raise DpledgerError(f"--arms must be an integer >= 2, got {arms!r}")
    if theta is None:
        g = np.abs(theta_generator(seed).standard_normal(dim))
        th = g / (np.linalg.norm(g) * L)
        source = "drawn from the seed: |g|/(‖g‖·L), g ~ N(0, I_d)"
    else:
        th = np.asarray(theta, dtype=np.float64).ravel()
        if th.size != dim:
            raise DpledgerError(f"--theta has {th.size} entries, but --dim is {dim}")
        if not np.all(np.isfinite(th)) or np.any(th < 0):
            raise DpledgerError("--theta entries must be finite and >= 0 (contexts are "
                                "non-negative, so ⟨θ, x⟩ ∈ [0, 1] needs θ >= 0)")
        if np.linalg.norm(th) * L > 1 + 1e-12:
            raise DpledgerError(f"--theta has norm {np.linalg.norm(th):.6g}; with --norm-bound "
                                f"{L:g} the norm must be at most {1 / L:.6g} so that every mean "
                                "reward ⟨θ, x⟩ lies in [0, 1]")
        source = "given"
    info = {"theta": th.tolist(), "theta_source": source,
            "context_law": "L·|g|/‖g‖, g ~ N(0, I_d), per arm and round",
            "reward_law": "Bernoulli(⟨θ, x⟩), in {0, 1} by construction"}
    if sd:
        if lo > 0 or hi < 1:
            raise DpledgerError(f"--range [{lo:g}, {hi:g}] must contain [0, 1], where every "
                                "mean reward ⟨θ, x⟩ lies")
        info.update(noise="gaussian", noise_sd=sd,
                    reward_law=f"⟨θ, x⟩ + {sd:g}·N(0, 1) (one standard normal a round), "
                               f"clipped to the declared range [{lo:g}, {hi:g}] before the "
                               "policy sees it (not counted); regret is the means' pseudo-regret")
    return ContextualEnvironment(LINEAR, arms, dim, True, L, lo, hi,
                                 np.zeros((0, arms, dim)), np.zeros((0, arms)), _EMPTY_I,
                                 _EMPTY_F, th, None, 0.0, info, noise_sd=sd)


def arm_set_generator(seed: int) -> np.random.Generator:
    """The generator a fixed arm set is drawn from: SeedSequence (seed, 0x6172), apart from θ's
    and every run's (the arm set belongs to the environment)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 0x6172])))


def linear_fixed(dim: int, arms: int, theta=None, seed: int = 0, norm_bound: float = 1.0,
                 lo: float = 0.0, hi: float = 1.0, noise_sd: float | None = None
                 ) -> ContextualEnvironment:
    """The linear bandit with a fixed finite arm set (issue 32: the phased-elimination
    policies): :func:`linear`'s θ and Bernoulli(⟨θ, x⟩) rewards, but the K arm vectors
    x_a = L·|g|/‖g‖ (g ~ N(0, I_d)) are drawn once, from :func:`arm_set_generator`, and are
    every round's contexts (reconstructed: the law is our choice); ``noise_sd`` as there."""
    env = linear(dim, arms, theta, seed, norm_bound, lo, hi, noise_sd)
    g = np.abs(arm_set_generator(seed).standard_normal((arms, dim)))
    # fitted: rounding can leave an arm an ulp above L, which the exact norm check refuses
    X = fit_to_bound(env.norm_bound * g / np.linalg.norm(g, axis=1, keepdims=True),
                     env.norm_bound)[0]
    info = dict(env.info, context_law="fixed arm set: L·|g|/‖g‖, g ~ N(0, I_d) per arm, drawn "
                "once from (seed, 0x6172)", arm_set=X.tolist())
    return ContextualEnvironment(LINEAR, arms, dim, True, env.norm_bound, env.lo, env.hi,
                                 X[None], np.zeros((0, arms)), _EMPTY_I, _EMPTY_F, env.theta,
                                 None, 0.0, info, noise_sd=env.noise_sd)


def contextual_table(contexts: np.ndarray, rewards: np.ndarray, norm_bound: float = 1.0,
                     lo: float = 0.0, hi: float = 1.0, source: dict | None = None,
                     clip: bool = False) -> ContextualEnvironment:
    """Full-information contextual data: ``contexts`` (T, d) or (T, K, d), ``rewards`` (T, K)."""
    lo, hi = _range(lo, hi)
    L = _norm_bound(norm_bound)
    ctx = np.asarray(contexts)
    rew = np.asarray(rewards)
    if rew.ndim != 2 or rew.shape[1] < 2 or rew.shape[0] < 1:
        raise DpledgerError(f"rewards must have shape (T, K) with K >= 2, got {rew.shape}")
    T, K = rew.shape
    if ctx.ndim == 2:
        shared = False
        if ctx.shape[0] != T:
            raise DpledgerError(f"contexts have {ctx.shape[0]} rows, rewards {T}")
        ctx3 = ctx.reshape(T, 1, ctx.shape[1])
    elif ctx.ndim == 3:
        shared = True
        if ctx.shape[0] != T or ctx.shape[1] != K:
            raise DpledgerError(f"contexts of shape (T, K, d) = {ctx.shape} do not match "
                                f"rewards of shape (T, K) = {rew.shape}")
        ctx3 = ctx
    else:
        raise DpledgerError(f"contexts must have shape (T, d) or (T, K, d), got {ctx.shape}")
    if ctx3.shape[2] < 1:
        raise DpledgerError("contexts have dimension 0")
    ctx3 = np.ascontiguousarray(ctx3, dtype=np.float64)
    rew = np.ascontiguousarray(rew, dtype=np.float64)
    got, n_clipped = checked_contexts(ctx3 if shared else ctx3[:, 0, :], L, clip,
                                      "contextual table")
    ctx3 = np.ascontiguousarray(got if shared else got[:, None, :])
    check_rewards(rew, lo, hi, "contextual table")
    info = dict(source or {})
    info.update(_clip_info(clip, n_clipped))
    info.setdefault("data_sha256", sha256_of(ctx3, rew))
    return ContextualEnvironment(TABLE, K, ctx3.shape[2], shared, L, lo, hi, ctx3, rew,
                                 _EMPTY_I, _EMPTY_F, _EMPTY_F, T, 0.0, info)


def scale_features(x: np.ndarray, norm_bound: float) -> np.ndarray:
    """Features → contexts of norm L: each feature min-max scaled to [0, 1] over the data set
    (a constant feature becomes 0), then each row scaled to Euclidean norm L (an all-zero row
    stays 0).  Non-negative features, like digits' pixel intensities, so a model without an
    intercept still separates the classes; every context has norm exactly L (or 0)."""
    x = np.asarray(x, dtype=np.float64)
    lo, hi = x.min(axis=0), x.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    z = np.where(hi > lo, (x - lo) / span, 0.0)
    n = np.linalg.norm(z, axis=1, keepdims=True)
    # rounding can leave a row an ulp above L: shrink those, so ‖x‖ ≤ L holds exactly
    return fit_to_bound(np.where(n > 0, z * (norm_bound / np.where(n > 0, n, 1.0)), 0.0),
                        norm_bound)[0]


def supervised(features: np.ndarray, labels: np.ndarray, name: str, norm_bound: float = 1.0,
               lo: float = 0.0, hi: float = 1.0, source: dict | None = None
               ) -> ContextualEnvironment:
    """Supervised-to-bandit: arms = classes (labels 0 … K−1), reward 1 when the arm is the
    label; contexts :func:`scale_features` of the features."""
    lo, hi = _range(lo, hi)
    L = _norm_bound(norm_bound)
    if lo > 0 or hi < 1:
        raise DpledgerError(f"--env supervised rewards are 0 or 1, outside the declared range "
                            f"[{lo:g}, {hi:g}]")
    y = np.asarray(labels, dtype=np.int64)
    K = int(y.max()) + 1
    ctx = scale_features(features, L)
    check_contexts(ctx, L, f"data set {name}")
    onehot = np.zeros((y.size, K))
    onehot[np.arange(y.size), y] = 1.0
    info = {"dataset": name, "dataset_rows": int(y.size),
            "features": "min-max scaled to [0, 1] per feature, then each row to norm L",
            "data_sha256": sha256_of(ctx, onehot)}
    info.update(source or {})
    return ContextualEnvironment(SUPERVISED, K, ctx.shape[1], False, L, lo, hi,
                                 np.ascontiguousarray(ctx.reshape(y.size, 1, -1)), onehot,
                                 _EMPTY_I, _EMPTY_F, _EMPTY_F, None, 0.0, info)


def _clip_info(clip: bool, n: int) -> dict:
    """What run.json's environment says of ``--clip-contexts`` (nothing when it is off)."""
    return {"clip_contexts": True, "contexts_clipped": int(n)} if clip else {}


def replay(contexts: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
           propensity: np.ndarray | None, arms: int | None = None, mode: str = "uniform",
           norm_bound: float = 1.0, lo: float = 0.0, hi: float = 1.0,
           source: dict | None = None, clip: bool = False) -> ContextualEnvironment:
    """A log for replay: contexts (n, d), logged actions (n,) in 0 … K−1, rewards (n,),
    propensities (n,) or None.  ``mode="uniform"`` (Li et al. 2011) needs uniform logging:
    propensities, if given, must be constant; ``mode="rejection"`` needs propensities in (0, 1]
    and accepts a matching row with probability q/p (q the smallest propensity)."""
    lo, hi = _range(lo, hi)
    L = _norm_bound(norm_bound)
    if mode not in REPLAY_MODES:
        raise DpledgerError(f"--replay-mode must be one of {', '.join(REPLAY_MODES)}, got {mode!r}")
    ctx = np.ascontiguousarray(contexts, dtype=np.float64)
    act = np.asarray(actions)
    n = act.size
    if n == 0:
        raise DpledgerError("the log has no rows")
    if np.any(act < 0) or np.any(act != np.round(act)):
        raise DpledgerError("logged actions must be integers >= 0")
    act = act.astype(np.int64)
    K = int(act.max()) + 1
    if arms is not None:
        if act.max() >= arms:
            i = int(np.argmax(act >= arms))
            raise DpledgerError(f"the log's action {int(act[i])} (row {i + 1}) lies outside "
                                f"0 … {arms - 1} (--arms {arms})")
        K = int(arms)
    if K < 2:
        raise DpledgerError("the log names fewer than 2 actions; give --arms K")
    rew = np.asarray(rewards, dtype=np.float64)
    check_rewards(rew.reshape(-1, 1), lo, hi, "the log", "data row", 1)
    ctx, n_clipped = checked_contexts(ctx, L, clip, "the log", "data row", 1)
    ctx = np.ascontiguousarray(ctx)
    info = {"replay_mode": mode, "log_rows": int(n), **_clip_info(clip, n_clipped)}
    q = 0.0
    if propensity is not None:
        p = np.asarray(propensity, dtype=np.float64)
        if not np.all(np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
            raise DpledgerError("logged propensities must lie in (0, 1]")
        pmin, pmax = float(p.min()), float(p.max())
        if mode == "uniform" and pmax > pmin * (1 + 1e-9):
            raise DpledgerError(
                f"the log's propensities vary (from {pmin:.6g} to {pmax:.6g}): replay is "
                "unbiased only for uniform logging; use --replay-mode rejection (rejection "
                "sampling with the logged propensities)")
        info["propensity"] = {"min": pmin, "max": pmax}
        if mode == "rejection":
            q = pmin
            info["accept_q"] = q
    else:
        if mode == "rejection":
            raise DpledgerError("--replay-mode rejection needs a propensity column in the log")
        p = _EMPTY_F
    info["uniform_mean_reward"] = uniform_mean_reward(rew, p, K, mode)
    info["uniform_mean_reward_estimator"] = (
        "the log's mean reward (uniform logging is uniform play)" if mode == "uniform" else
        "inverse propensity: mean of r/(K·p)")
    info.update(source or {})
    return ContextualEnvironment(REPLAY, K, ctx.shape[1], False, L, lo, hi,
                                 ctx.reshape(n, 1, -1), rew.reshape(n, 1), act,
                                 p if mode == "rejection" else _EMPTY_F, _EMPTY_F, n, q, info)


def uniform_mean_reward(rewards: np.ndarray, propensity: np.ndarray, K: int, mode: str) -> float:
    """Uniform play's mean reward as the log estimates it: under uniform logging the log's mean
    reward; with propensities (rejection mode) the inverse-propensity mean Σ r/(K·p) / n."""
    if mode == "uniform" or propensity.size == 0:
        return float(np.mean(rewards))
    return float(np.mean(rewards / (K * propensity)))


_MASK64 = (1 << 64) - 1


def splitmix64_py(x: int) -> int:
    """splitmix64's output function (Steele, Lea & Flood 2014, "Fast splittable pseudorandom
    number generators", OOPSLA) on a 64-bit integer: the Python twin of the kernel's
    :func:`~dpledger.policies.contextual.loop.splitmix64` (tests compare them)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def log_key_of(seed: int) -> int:
    """The generated log's key from its seed: splitmix64 of the seed with the top bit cleared
    (the kernel holds it as int64) and the low bit set (0 means "a stored log")."""
    return (splitmix64_py(int(seed) & _MASK64) >> 1) | 1


def _click_arrays(users, click, norm_bound, what: str):
    """(L, users, click probabilities) checked: users (P, d) of norm ≤ L, probabilities (P, K)
    in [0, 1], K ≥ 2."""
    L = _norm_bound(norm_bound)
    ctx = np.ascontiguousarray(users, dtype=np.float64)
    p = np.ascontiguousarray(click, dtype=np.float64)
    if ctx.ndim != 2 or p.ndim != 2 or p.shape[0] != ctx.shape[0] or p.shape[1] < 2:
        raise DpledgerError(f"a {what} needs users (P, d) and click probabilities (P, K), "
                            f"K >= 2; got {ctx.shape} and {p.shape}")
    check_contexts(ctx, L, what)
    check_rewards(p, 0.0, 1.0, f"{what} (click probabilities)")
    return L, ctx, p


def generated_log(users: np.ndarray, click: np.ndarray, seed: int, norm_bound: float = 1.0,
                  source: dict | None = None) -> ContextualEnvironment:
    """A uniformly logged click log generated on demand, for replay (Li, Chu, Langford & Wang
    2011).  ``users`` (P, d): the contexts a visit can have; ``click`` (P, K): the click
    probability of showing arm a to user u.  Row r (0-based) of the log is a pure function of
    (key, r), key = :func:`log_key_of` (seed), with h_j = splitmix64(key + 3r + j) (64-bit
    wrap-around): the visit's user u = h_0 mod P (uniform over the users), the logged arm
    a = h_1 mod K (uniform logging, propensity 1/K), the logged click = 1 when
    (h_2 >> 11)·2⁻⁵³ < click[u, a].  So the log is i.i.d. rows with uniform logging, unbounded
    in length, and the same log in every run (runs differ in the policy's randomness only, as
    in a replay of a stored log).  Uniform play's mean reward is the log's expectation,
    mean over u and a of click[u, a] (exact: no estimate from a prefix)."""
    L, ctx, p = _click_arrays(users, click, norm_bound, "generated log")
    P, K = p.shape
    info = {"replay_mode": "uniform", "log": "generated on demand (row r a function of the "
            "log's seed and r: splitmix64 counter-based draws; propensity 1/K)",
            "log_seed": int(seed), "log_users": int(P),
            "propensity": {"min": 1.0 / K, "max": 1.0 / K},
            "uniform_mean_reward": float(p.mean()),
            "uniform_mean_reward_estimator": "exact: the mean click probability over users "
            "and arms (the generated log's expectation)",
            "data_sha256": sha256_of(ctx, p)}
    info.update(source or {})
    return ContextualEnvironment(REPLAY, K, ctx.shape[1], False, L, 0.0, 1.0,
                                 ctx.reshape(P, 1, -1), p, _EMPTY_I, _EMPTY_F, _EMPTY_F, None,
                                 0.0, info, log_key_of(seed))


def click_model(users: np.ndarray, click: np.ndarray, norm_bound: float = 1.0,
                source: dict | None = None) -> ContextualEnvironment:
    """Online rounds of a click model: ``users`` (P, d) drawn uniformly each round,
    ``click`` (P, K) the click probabilities (module docstring: the online form of
    :func:`generated_log`).  Uniform play's mean reward per round is the row's mean click
    probability."""
    L, ctx, p = _click_arrays(users, click, norm_bound, "click model")
    P, K = p.shape
    info = {"users": int(P), "reward_law": "Bernoulli(click[u, a]) for the round's user u, "
            "drawn uniformly", "data_sha256": sha256_of(ctx, p)}
    info.update(source or {})
    return ContextualEnvironment(CLICKS, K, ctx.shape[1], False, L, 0.0, 1.0,
                                 ctx.reshape(P, 1, -1), p, _EMPTY_I, _EMPTY_F, _EMPTY_F, None,
                                 0.0, info)
