"""Sequential audits by betting (``--sequential``; docs/audits.md#sequential-audits-by-betting).

**The construction: a test martingale (e-process) for the two Bernoulli rates of one event,
by betting** (Waudby-Smith & Ramdas 2023, "Estimating means of bounded random variables by
betting", JRSS-B; the same supermartingale argument in Shafer & Vovk's game-theoretic terms).
The event E (score, direction, threshold) is chosen once on the selection split of the first
batch (:func:`~dpledger.audits.stats.select_event`); the count trials are then read in pairs,
trial i of D with trial i of D′ (independent).  With X_i = 1[E on D′], Y_i = 1[E on D]
(rates p₁, p₀), (ε, δ)-DP implies p₁ ≤ e^ε p₀ + δ and (1 − p₀) ≤ e^ε (1 − p₁) + δ (Kairouz,
Oh & Viswanath 2015).  For each form, with w = e^{−ε},

    Z_i(ε, δ) = w·(X_i − δ) − Y_i              (form a)
    Z_i(ε, δ) = w·(1 − Y_i − δ) − (1 − X_i)    (form b)

E[Z_i] ≤ 0 under "(ε, δ)-DP", Z_i ≥ −1 − wδ, and K_n = Π_{i≤n} (1 + λ_i Z_i) with a
predictable bet λ_i ∈ [0, ½/(1 + wδ_claim)] is a nonnegative supermartingale with K_0 = 1.

* **Pure ε** (δ = 0): one constraint, K_n(ε) = the average of the two forms' products.
* **μ-GDP** (Dong, Roth & Su 2022, Cor. 2.13: μ-GDP ⇔ (ε, δ_μ(ε))-DP for every ε, δ_μ from
  :func:`~dpledger.accounting.gdp.gdp_delta`): the constraints at a grid of ε fixed before any
  trial from the claim μ_c alone (:func:`gdp_grid`: ε_j = j·μ_c/4, j = 0 … 20, i.e. the
  thresholds μ_c/2 … μ_c/2 + 5 of the Gaussian shift), and M_n(μ) = the **mixture** (plain
  average) of the 2J products.  Every component is a nonnegative supermartingale under μ-GDP,
  so their average is one too (a mixture e-process; it rejects whenever Bonferroni over the 2J
  components, each at 2J/α, would, and more often).
* Either way Ville's inequality bounds P[∃n: M_n ≥ 1/α] by α — under **any** stopping rule.
* The bets do not depend on the parameter θ (ε or μ) under test: component j's bet is fitted at
  the claim (and, given a target, a second set at the target: the mixture averages both sets,
  so it can stop at either), from earlier batches only (λ = clip(m/(v + m²), 0, cap) for the mean m and
  variance v of the past Z(claim), Waudby-Smith & Ramdas's aGRAPA).  Z decreases in θ on every
  outcome (w falls with ε; δ_μ(ε) grows with μ), so M_n(θ) is nonincreasing in θ on every path
  and the lower confidence sequence L_n = sup{θ : M_n(θ) ≥ 1/α} is valid at any stopping time
  with no union over θ: L_τ > θ_true forces M_τ(θ_true) ≥ 1/α.  L is the largest ε (μ)
  the audit contradicts, through the same grid.
* It stops at the first pair at which the claim (default: the certificate) is contradicted,
  M_n(claim) ≥ 1/α, or the requested bound is reached, M_n(target) ≥ 1/α (target = R ×
  certificate), or at ``max_trials`` per side.
* Within a batch the bets are constant, so M is a function of the batch's counts of the pair
  outcomes (1, 1), (1, 0), (0, 1), (0, 0): the final bound is computed from those counts
  (bisection, the returned θ itself rejected).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpledger.audits.stats import (DEFAULT_CONFIDENCE, DEFAULT_SELECTION_FRACTION, ScoreAudit,
                                   check_options, select_event, split_sizes)
from dpledger.errors import DpledgerError, check_count

MAX_BET = 0.5
BATCH = 256                  # pairs per bet (the bet is refitted between batches)
GDP_GRID_STEPS = 21          # ε_j = j·μ_c/4, j < 21: Gaussian-shift thresholds μ_c/2 … μ_c/2 + 5
_BISECT = 60
_LOG_CAP = 700.0


def gdp_grid(mu_claim: float) -> tuple[float, ...]:
    """The ε grid of a GDP sequential audit, fixed from the claim μ_c before any trial:
    ε_j = j·μ_c/4, j = 0 … 20.  For a Gaussian shift of μ_c the (ε, δ_μc(ε)) constraint is
    tight at the threshold h = ε/μ_c + μ_c/2 (DRS Cor. 2.13), so the grid spans the
    thresholds μ_c/2 … μ_c/2 + 5 in quarter-μ_c steps of ε."""
    return tuple(j * mu_claim / 4.0 for j in range(GDP_GRID_STEPS))


@dataclass(frozen=True)
class Hypothesis:
    """The family of claims tested: "θ-pure-ε" (one constraint (θ, 0)) or "θ-GDP" (the
    constraints (ε_j, δ_θ(ε_j)) over ``grid``); :meth:`constraints` gives (w_j, δ_j)."""

    currency: str                         # "epsilon" or "mu"
    grid: tuple[float, ...] = ()

    def constraints(self, theta: float) -> tuple[np.ndarray, np.ndarray]:
        if self.currency == "epsilon":
            return np.array([math.exp(-theta)]), np.zeros(1)
        from dpledger.accounting.gdp import gdp_delta
        w = np.exp(-np.asarray(self.grid, dtype=np.float64))
        if not theta > 0.0:
            return w, np.zeros(w.size)     # 0-GDP: the two sides' laws coincide
        return w, np.array([gdp_delta(float(e), float(theta)) for e in self.grid])


PURE = Hypothesis("epsilon")


def _z_table(w: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Z of forms a and b per constraint (rows) and pair outcome (columns: (X, Y) = (1, 1),
    (1, 0), (0, 1), (0, 0))."""
    wd = w * d
    hi = w * (1.0 - d)
    za = np.stack([hi - 1.0, hi, -wd - 1.0, -wd], axis=1)
    zb = np.stack([-wd, hi, -wd - 1.0, hi - 1.0], axis=1)
    return za, zb


def _log_components(counts: list[tuple], theta: float, hyp: Hypothesis) -> np.ndarray:
    """log K of every component (2J: form a of each constraint, then form b) at θ, from
    per-batch (λ_a, λ_b, n11, n10, n01, n00)."""
    w, d = hyp.constraints(theta)
    za, zb = _z_table(w, d)
    if not counts:
        return np.zeros(2 * w.size)
    la = np.array([np.atleast_1d(np.asarray(c[0], np.float64)) for c in counts])
    lb = np.array([np.atleast_1d(np.asarray(c[1], np.float64)) for c in counts])
    n = np.array([c[2:6] for c in counts], dtype=np.float64)          # (batches, 4)
    sets = max(1, la.shape[1] // w.size)          # bet sets (claim, target), each J bets
    za_t, zb_t = np.tile(za, (sets, 1)), np.tile(zb, (sets, 1))
    la = np.broadcast_to(la, (n.shape[0], za_t.shape[0]))
    lb = np.broadcast_to(lb, (n.shape[0], zb_t.shape[0]))
    # Σ_batches Σ_outcomes n·log(1 + λZ); 1 + λZ > 0 always (the bets' caps)
    ga = np.einsum("bo,bco->c", n, np.log1p(la[:, :, None] * za_t[None, :, :]))
    gb = np.einsum("bo,bco->c", n, np.log1p(lb[:, :, None] * zb_t[None, :, :]))
    return np.concatenate([ga, gb])


def _log_mixture(logs: np.ndarray) -> float:
    """log of the average of exp(logs), overflow-safe (each term capped at e^700)."""
    x = np.minimum(logs, _LOG_CAP)
    top = float(np.max(x))
    return top + math.log(float(np.mean(np.exp(x - top))))


def e_value(counts: list[tuple], theta: float, hyp: Hypothesis = PURE) -> float:
    """M_n(θ): the average of the components' products (pure ε: the two forms')."""
    return math.exp(min(_log_mixture(_log_components(counts, theta, hyp)), _LOG_CAP))


def lower_bound(counts: list[tuple], alpha: float, hyp: Hypothesis = PURE) -> float:
    """sup{θ ≥ 0 : M_n(θ) ≥ 1/α} (M nonincreasing in θ), by bisection keeping M(lo) ≥ 1/α."""
    thr = math.log(1.0 / alpha)

    def ok(theta):
        return _log_mixture(_log_components(counts, theta, hyp)) >= thr
    if not ok(0.0):
        return 0.0
    hi = 1.0
    while ok(hi):
        hi *= 2.0
        if hi > 1e3:
            return hi
    lo = 0.0
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _bet(counts: np.ndarray, z: np.ndarray) -> float:
    """aGRAPA's bet from the outcome counts so far (4,) and one component's Z per outcome."""
    n = float(counts.sum())
    if n < 2:
        return 0.0
    m = float(counts @ z) / n
    v = max(0.0, float(counts @ (z * z)) / n - m * m)
    return float(min(MAX_BET, max(0.0, m / (v + m * m + 1e-12))))


def _outcomes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pair outcome code per pair: 0 = (1, 1), 1 = (1, 0), 2 = (0, 1), 3 = (0, 0)."""
    return (2 * (1 - x) + (1 - y)).astype(np.int64)


@dataclass
class BettingAudit:
    final: ScoreAudit
    trials: int
    stop_reason: str            # "contradicted", "reached", "max_trials"
    claim: float
    target: float | None
    lower: float
    e_value_at_claim: float
    path: list
    currency: str = "epsilon"
    grid: tuple = ()

    def to_json(self) -> dict:
        out = {"kind": "betting",
               "method": ("test supermartingale by betting on the two Bernoulli rates of one "
                          "event (Waudby-Smith & Ramdas 2023, aGRAPA bets fitted at the claim "
                          "on earlier batches; Ville's inequality): valid under any stopping "
                          "rule"),
               "claim": self.claim, "target": self.target, "stop_reason": self.stop_reason,
               "trials_drawn": self.trials, "e_value_at_claim": self.e_value_at_claim,
               "lower": self.lower, "currency": self.currency, "path": self.path,
               "checkpoints": [self.trials]}
        if self.currency == "mu":
            out["method"] += (": mu-GDP as (eps, delta_mu(eps))-DP at a fixed eps grid "
                              "(Dong, Roth & Su 2022, Cor. 2.13), the average of the grid's "
                              "e-processes (a mixture e-process)")
            out["epsilon_grid"] = [float(e) for e in self.grid]
        return out


def betting_audit(sample, *, first: int, max_trials: int, claim: float, target: float | None,
                  confidence: float = DEFAULT_CONFIDENCE,
                  selection_fraction: float = DEFAULT_SELECTION_FRACTION, scorer=None,
                  batch: int = BATCH, currency: str = "epsilon") -> BettingAudit:
    """The module's sequential test of "claim-pure-ε" (``currency="epsilon"``) or
    "claim-GDP" (``currency="mu"``).  ``sample(side, start, n)`` as for
    :func:`~dpledger.audits.stats.sequential_audit` (scores, a dict of them, or raw features
    with ``scorer``); trials are a fixed function of (side, index)."""
    alpha, fraction = check_options(confidence, selection_fraction)
    first = check_count("first batch", first, minimum=4)
    max_trials = check_count("max trials", max_trials, minimum=first)
    batch = check_count("batch", batch, minimum=1)
    if currency not in ("epsilon", "mu"):
        raise DpledgerError(f"currency must be 'epsilon' or 'mu', got {currency!r}")
    if not claim > 0:
        raise DpledgerError(f"the claim under test must be a positive {currency}, got {claim!r}")
    hyp = PURE if currency == "epsilon" else Hypothesis("mu", gdp_grid(float(claim)))
    m, _ = split_sizes(first, fraction)

    def as_dict(x):
        return x if isinstance(x, dict) else {"value": np.asarray(x, dtype=np.float64)}

    raw0, raw1 = sample(0, 0, first), sample(1, 0, first)
    if scorer is None:
        to_scores = as_dict
    else:
        to_scores = scorer({k: v[:m] for k, v in raw0.items()}, {k: v[:m] for k, v in raw1.items()})
    d0, d1 = to_scores(raw0), to_scores(raw1)
    from dpledger.audits.result import GDP_DELTA
    sel = select_event({k: np.asarray(v[:m], float) for k, v in d0.items()},
                       {k: np.asarray(v[:m], float) for k, v in d1.items()},
                       alpha=alpha, currency=currency,
                       delta=0.0 if currency == "epsilon" else GDP_DELTA,
                       project=split_sizes(max_trials, fraction)[1])
    ev = sel.event
    # bet sets: fitted at the claim, and (with a target) at the target too — the mixture
    # averages both, so it has power for "contradicted" and for "reached"; a bet set's cap
    # keeps 1 + λZ > 0 at every θ ≥ 0 (Z ≥ −1 − wδ ≥ −2, and wδ > 0 at its θ in the GDP case;
    # MAX_BET for pure ε)
    bet_at = [float(claim)] + ([float(target)] if target is not None and target != claim
                               else [])
    tabs = [_z_table(*hyp.constraints(t)) for t in bet_at]
    za_c, zb_c = _z_table(*hyp.constraints(float(claim)))
    za_c, zb_c = np.tile(za_c, (len(bet_at), 1)), np.tile(zb_c, (len(bet_at), 1))
    J = za_c.shape[0]
    fit_a = np.concatenate([ta for ta, _ in tabs])
    fit_b = np.concatenate([tb for _, tb in tabs])
    cap = np.concatenate([MAX_BET / (1.0 + np.prod(hyp.constraints(t), axis=0))
                          for t in bet_at])
    zt = None if target is None else tuple(np.tile(z, (len(bet_at), 1)) for z in
                                           _z_table(*hyp.constraints(float(target))))
    # outcome counts of the selection split (the bets' history before the first batch)
    hist = np.bincount(_outcomes(ev.contains(np.asarray(d1[ev.score][:m], float)),
                                 ev.contains(np.asarray(d0[ev.score][:m], float))),
                       minlength=4).astype(np.float64)
    counts: list[tuple] = []
    thr = math.log(1.0 / alpha)
    log_c = np.zeros(2 * J)                   # running log K of every component at the claim
    log_t = np.zeros(2 * J)                   # and at the target
    n0 = k0 = n1 = k1 = 0
    reason = "max_trials"
    path: list = []
    pending0 = np.asarray(d0[ev.score][m:], float)
    pending1 = np.asarray(d1[ev.score][m:], float)
    drawn = first
    pos = m                                   # trials per side consumed as pairs so far
    done = False
    while not done:
        while pending0.size < batch and drawn < max_trials:
            n = min(max(batch, 4096), max_trials - drawn)
            pending0 = np.r_[pending0, np.asarray(to_scores(as_dict(sample(0, drawn, n)))[ev.score], float)]
            pending1 = np.r_[pending1, np.asarray(to_scores(as_dict(sample(1, drawn, n)))[ev.score], float)]
            drawn += n
        if pending0.size == 0:
            break
        x = ev.contains(pending1[:batch]).astype(np.int64)
        y = ev.contains(pending0[:batch]).astype(np.int64)
        pending0, pending1 = pending0[batch:], pending1[batch:]
        lam_a = np.minimum(cap, [_bet(hist, fit_a[j]) for j in range(J)])
        lam_b = np.minimum(cap, [_bet(hist, fit_b[j]) for j in range(J)])
        lam = np.concatenate([lam_a, lam_b])[:, None]
        code = _outcomes(x, y)
        # per-pair running log K of every component at the claim (and the target): stop at
        # the first pair whose mixture crosses 1/α
        g = np.log1p(lam * np.concatenate([za_c, zb_c])[:, code])
        cum = log_c[:, None] + np.cumsum(g, axis=1)
        mix = _mixture_columns(cum)
        hit = np.flatnonzero(mix >= thr)
        ic = int(hit[0]) + 1 if hit.size else math.inf
        it = math.inf
        if zt is not None:
            gt = np.log1p(lam * np.concatenate(zt)[:, code])
            hit_t = np.flatnonzero(_mixture_columns(log_t[:, None] + np.cumsum(gt, axis=1))
                                   >= thr)
            it = int(hit_t[0]) + 1 if hit_t.size else math.inf
        stop_at = x.size
        if min(ic, it) < math.inf:
            stop_at = int(min(ic, it))
            reason = "contradicted" if ic <= it else "reached"
            done = True
        if zt is not None:
            log_t += gt[:, :stop_at].sum(axis=1)
        log_c += g[:, :stop_at].sum(axis=1)
        oc = np.bincount(code[:stop_at], minlength=4)
        counts.append((lam_a, lam_b, int(oc[0]), int(oc[1]), int(oc[2]), int(oc[3])))
        hist += oc
        n0 += stop_at
        n1 += stop_at
        k0 += int(y[:stop_at].sum())
        k1 += int(x[:stop_at].sum())
        pos += stop_at
        path.append({"trials": int(pos),
                     "e_value_at_claim": math.exp(min(_log_mixture(log_c), _LOG_CAP))})
    low = lower_bound(counts, alpha, hyp)
    if currency == "mu":
        from dpledger.audits.result import gdp_epsilon_lower
        eps_low, mu_low, delta = gdp_epsilon_lower(low, GDP_DELTA), low, GDP_DELTA
    else:
        eps_low, mu_low, delta = low, 0.0, 0.0
    final = ScoreAudit(epsilon_lower=eps_low, mu_lower=mu_low, delta=delta,
                       confidence=float(confidence), n0=n0, k0=k0, n1=n1, k1=k1, event=ev,
                       selection=sel, selection_fraction=fraction, fpr_upper=1.0,
                       fnr_upper=1.0)     # trivial (valid) rate bounds: the bound is the e-process's
    return BettingAudit(final=final, trials=int(pos), stop_reason=reason, claim=float(claim),
                        target=None if target is None else float(target), lower=low,
                        e_value_at_claim=float(e_value(counts, claim, hyp)), path=path[-50:],
                        currency=currency, grid=hyp.grid)


def _mixture_columns(logs: np.ndarray) -> np.ndarray:
    """:func:`_log_mixture` of every column of a (components, pairs) array."""
    x = np.minimum(logs, _LOG_CAP)
    top = x.max(axis=0)
    return top + np.log(np.mean(np.exp(x - top), axis=0))


__all__ = ["betting_audit", "BettingAudit", "e_value", "lower_bound", "gdp_grid", "Hypothesis"]
