"""Sequential audits by betting (``--sequential``; docs/audits.md#sequential-audits-by-betting).

**The construction: a test martingale (e-process) for the two Bernoulli rates of one event,
by betting** (Waudby-Smith & Ramdas 2023, "Estimating means of bounded random variables by
betting", JRSS-B; the same supermartingale argument in Shafer & Vovk's game-theoretic terms).
The event E (score, direction, threshold) is chosen once on the selection split of the first
batch (:func:`~dpledger.audits.stats.select_event`); the count trials are then read in pairs,
trial i of D with trial i of D′ (independent).  With X_i = 1[E on D′], Y_i = 1[E on D]
(rates p₁, p₀), pure ε-DP implies p₁ ≤ e^ε p₀ and (1 − p₀) ≤ e^ε (1 − p₁) (Kairouz, Oh &
Viswanath 2015).  For each form

    Z_i(ε) = e^{−ε}·X_i − Y_i            (form a)
    Z_i(ε) = e^{−ε}·(1 − Y_i) − (1 − X_i)  (form b)

E[Z_i] ≤ 0 under "ε-DP", Z_i ≥ −1, and K_n(ε) = Π_{i≤n} (1 + λ_i Z_i(ε)) with a predictable bet
λ_i ∈ [0, ½] is a nonnegative supermartingale with K_0 = 1; the average of the two forms' K is
one too.  Ville's inequality: P[∃n: K_n(ε) ≥ 1/α] ≤ α — under **any** stopping rule.

* The bets do not depend on ε (they are fitted at the reference ε_ref, the claim under test,
  from earlier batches only: λ = clip(m/(v + m²), 0, ½) for the mean m and variance v of the
  past Z(ε_ref), Waudby-Smith & Ramdas's aGRAPA), so K_n(ε) is nonincreasing in ε on every
  path.  Hence the lower confidence sequence L_n = sup{ε : K_n(ε) ≥ 1/α} is valid at any
  stopping time with no union over ε: L_τ > ε_true forces K_τ(ε_true) ≥ 1/α.
* It stops at the first pair at which the claim (default: the certificate) is contradicted,
  K_n(claim) ≥ 1/α, or the requested bound is reached, K_n(target) ≥ 1/α (target = R ×
  certificate), or at ``max_trials`` per side.
* Within a batch the bet is constant, so K is a function of the batch's counts of the pair
  outcomes (1, 1), (1, 0), (0, 1): the final bound is computed from those counts (bisection,
  the returned ε itself rejected).
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
_BISECT = 60


def _log_growth(counts: list[tuple], eps: float) -> tuple[float, float]:
    """(log K_a, log K_b) at ε from per-batch (λ_a, λ_b, n11, n10, n01, n00)."""
    w = math.exp(-eps)
    la_tot = lb_tot = 0.0
    for la, lb, n11, n10, n01, n00 in counts:
        # form a: Z = w X − Y; form b: Z = w (1 − Y) − (1 − X)
        la_tot += (n11 * math.log1p(la * (w - 1.0)) + n10 * math.log1p(la * w)
                   + n01 * math.log1p(-la))
        lb_tot += (n00 * math.log1p(lb * (w - 1.0)) + n10 * math.log1p(lb * w)
                   + n01 * math.log1p(-lb))
    return la_tot, lb_tot


def e_value(counts: list[tuple], eps: float) -> float:
    """K_n(ε): the average of the two forms' products."""
    a, b = _log_growth(counts, eps)
    return 0.5 * (math.exp(min(a, 700.0)) + math.exp(min(b, 700.0)))


def lower_bound(counts: list[tuple], alpha: float) -> float:
    """sup{ε ≥ 0 : K_n(ε) ≥ 1/α} (K nonincreasing in ε), by bisection keeping K(lo) ≥ 1/α."""
    thr = 1.0 / alpha
    if e_value(counts, 0.0) < thr:
        return 0.0
    hi = 1.0
    while e_value(counts, hi) >= thr:
        hi *= 2.0
        if hi > 1e3:
            return hi
    lo = 0.0
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        if e_value(counts, mid) >= thr:
            lo = mid
        else:
            hi = mid
    return lo


def _bet(z: np.ndarray) -> float:
    if z.size < 2:
        return 0.0
    m = float(z.mean())
    v = float(z.var())
    return float(min(MAX_BET, max(0.0, m / (v + m * m + 1e-12))))


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

    def to_json(self) -> dict:
        return {"kind": "betting",
                "method": ("test supermartingale by betting on the two Bernoulli rates of one "
                           "event (Waudby-Smith & Ramdas 2023, aGRAPA bets fitted at the claim "
                           "on earlier batches; Ville's inequality): valid under any stopping "
                           "rule"),
                "claim": self.claim, "target": self.target, "stop_reason": self.stop_reason,
                "trials_drawn": self.trials, "e_value_at_claim": self.e_value_at_claim,
                "lower": self.lower, "path": self.path, "checkpoints": [self.trials]}


def betting_audit(sample, *, first: int, max_trials: int, claim: float, target: float | None,
                  confidence: float = DEFAULT_CONFIDENCE,
                  selection_fraction: float = DEFAULT_SELECTION_FRACTION, scorer=None,
                  batch: int = BATCH) -> BettingAudit:
    """The module's sequential test.  ``sample(side, start, n)`` as for
    :func:`~dpledger.audits.stats.sequential_audit` (scores, a dict of them, or raw features
    with ``scorer``); trials are a fixed function of (side, index)."""
    alpha, fraction = check_options(confidence, selection_fraction)
    first = check_count("first batch", first, minimum=4)
    max_trials = check_count("max trials", max_trials, minimum=first)
    batch = check_count("batch", batch, minimum=1)
    if not claim > 0:
        raise DpledgerError(f"the claim under test must be a positive epsilon, got {claim!r}")
    m, _ = split_sizes(first, fraction)

    def as_dict(x):
        return x if isinstance(x, dict) else {"value": np.asarray(x, dtype=np.float64)}

    raw0, raw1 = sample(0, 0, first), sample(1, 0, first)
    if scorer is None:
        to_scores = as_dict
    else:
        to_scores = scorer({k: v[:m] for k, v in raw0.items()}, {k: v[:m] for k, v in raw1.items()})
    d0, d1 = to_scores(raw0), to_scores(raw1)
    sel = select_event({k: np.asarray(v[:m], float) for k, v in d0.items()},
                       {k: np.asarray(v[:m], float) for k, v in d1.items()},
                       alpha=alpha, currency="epsilon", delta=0.0,
                       project=split_sizes(max_trials, fraction)[1])
    ev = sel.event
    w_ref = math.exp(-claim)
    hist_a = [w_ref * ev.contains(np.asarray(d1[ev.score][:m], float))
              - ev.contains(np.asarray(d0[ev.score][:m], float))]
    hist_b = [w_ref * (1 - ev.contains(np.asarray(d0[ev.score][:m], float)))
              - (1 - ev.contains(np.asarray(d1[ev.score][:m], float)))]
    counts: list[tuple] = []
    thr = 1.0 / alpha
    la_log = lb_log = 0.0                     # running log K at the claim
    ta_log = tb_log = 0.0                     # and at the target
    w_t = math.exp(-target) if target is not None else None
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
        x = ev.contains(pending1[:batch]).astype(np.float64)
        y = ev.contains(pending0[:batch]).astype(np.float64)
        pending0, pending1 = pending0[batch:], pending1[batch:]
        ha, hb = np.concatenate(hist_a), np.concatenate(hist_b)
        lam_a, lam_b = _bet(ha), _bet(hb)
        # per-pair running log K at the claim and at the target: stop at the first crossing
        ga = np.log1p(lam_a * (w_ref * x - y))
        gb = np.log1p(lam_b * (w_ref * (1 - y) - (1 - x)))
        ca, cb = la_log + np.cumsum(ga), lb_log + np.cumsum(gb)
        kc = 0.5 * (np.exp(np.minimum(ca, 700)) + np.exp(np.minimum(cb, 700)))
        hit = np.flatnonzero(kc >= thr)
        ic = int(hit[0]) + 1 if hit.size else math.inf
        it = math.inf
        if w_t is not None:
            gta = np.log1p(lam_a * (w_t * x - y))
            gtb = np.log1p(lam_b * (w_t * (1 - y) - (1 - x)))
            kt = 0.5 * (np.exp(np.minimum(ta_log + np.cumsum(gta), 700))
                        + np.exp(np.minimum(tb_log + np.cumsum(gtb), 700)))
            hit_t = np.flatnonzero(kt >= thr)
            it = int(hit_t[0]) + 1 if hit_t.size else math.inf
        stop_at = x.size
        if min(ic, it) < math.inf:
            stop_at = int(min(ic, it))
            reason = "contradicted" if ic <= it else "reached"
            done = True
        if w_t is not None:
            ta_log += float(np.sum(gta[:stop_at]))
            tb_log += float(np.sum(gtb[:stop_at]))
        x, y = x[:stop_at], y[:stop_at]
        la_log += float(np.sum(ga[:stop_at]))
        lb_log += float(np.sum(gb[:stop_at]))
        n11 = int(np.sum(x * y))
        n10 = int(np.sum(x * (1 - y)))
        n01 = int(np.sum((1 - x) * y))
        counts.append((lam_a, lam_b, n11, n10, n01, x.size - n11 - n10 - n01))
        n0 += x.size
        n1 += x.size
        k0 += int(y.sum())
        k1 += int(x.sum())
        pos += x.size
        hist_a.append(w_ref * x - y)
        hist_b.append(w_ref * (1 - y) - (1 - x))
        path.append({"trials": int(pos), "e_value_at_claim": float(
            0.5 * (math.exp(min(la_log, 700)) + math.exp(min(lb_log, 700))))})
    low = lower_bound(counts, alpha)
    final = ScoreAudit(epsilon_lower=low, mu_lower=0.0, delta=0.0, confidence=float(confidence),
                       n0=n0, k0=k0, n1=n1, k1=k1, event=ev, selection=sel,
                       selection_fraction=fraction, fpr_upper=1.0,
                       fnr_upper=1.0)     # trivial (valid) rate bounds: the bound is the e-process's
    return BettingAudit(final=final, trials=int(pos), stop_reason=reason, claim=float(claim),
                        target=None if target is None else float(target), lower=low,
                        e_value_at_claim=float(e_value(counts, claim)), path=path[-50:])


__all__ = ["betting_audit", "BettingAudit", "e_value", "lower_bound"]
