"""Statistics of an audit: Clopper–Pearson bounds, the ε and μ lower bounds, and the selection split
(docs/design.md#audits; docs/audits.md).

Setting.  D and D′ are neighbours; each trial of the audited mechanism on D (side 0) or D′
(side 1) is reduced to a real **score**.  An event S = {score > t} or {score < t} is a test that
"guesses D′ when the output is in S"; with p0 = P[S | D] (the false-positive rate, FPR) and
p1 = P[S | D′] (so FNR = 1 − p1):

* **(ε, δ)-DP** implies FPR + e^ε·FNR ≥ 1 − δ and e^ε·FPR + FNR ≥ 1 − δ for every test
  (Kairouz, Oh & Viswanath 2015).  From upper confidence bounds FPR_ub, FNR_ub::

      ε_lower = max(log((1 − δ − FNR_ub) / FPR_ub),     # guess D′ when in S
                    log((1 − δ − FPR_ub) / FNR_ub),     # the reverse rule
                    0)                                  # a term counts only if its numerator > 0

  (Kairouz, Oh & Viswanath 2015; the DP-Sniper / Delta-Siege estimator).
* **μ-GDP** implies FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ) for every test (Dong, Roth & Su 2022), so::

      μ_lower = max(Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub), 0)

  which is symmetric in (FPR, FNR), hence covers both rules at once (Dong, Roth & Su 2022).  It is a
  valid lower bound on μ for *any* output distribution.

Confidence.  FPR_ub and FNR_ub are one-sided Clopper–Pearson bounds at level α/2 each (α = 1 −
confidence), so by the union bound both hold with probability ≥ 1 − α, and then *both* terms of
ε_lower, and μ_lower, hold simultaneously.  One-sided CP with k successes of n (Clopper & Pearson
1934)::

      p_lcb = Beta.ppf(a, k, n − k + 1)       (0 if k = 0)
      p_ucb = Beta.ppf(1 − a, k + 1, n − k)   (1 if k = n)

Selection (docs/design.md#audits; StatDP's and Delta-Siege's design).  The first
``selection_fraction`` (default 0.1) of each side's trials choose the event — the direction (> or <)
and the threshold, from a grid of 200 quantiles of the pooled selection scores (and, for black-box
audits, which score) — by the bound the same formula would give on the count trials at the rates the
selection trials vouch for (:func:`candidate_bounds`).  The remaining trials, disjoint from the
selection trials, give the counts n0, k0, n1, k1 of the one chosen event, and only those counts
enter the reported bound.  No α is spent on selection, and none is lost to the maximum over
candidates: the reported bound is one pre-specified test on fresh data.  Trials are i.i.d., so
taking the first part of each side is a valid random split.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri
from scipy.stats import beta

from dpledger.errors import DpledgerError, check_count, check_positive

GRID_SIZE = 200
DEFAULT_SELECTION_FRACTION = 0.1
DEFAULT_CONFIDENCE = 0.95
GREATER, LESS = "greater", "less"


# ---- Clopper–Pearson -------------------------------------------------------------------------

def cp_upper(k, n, a):
    """One-sided Clopper–Pearson upper bound on a binomial rate: P[p ≤ p_ucb] ≥ 1 − a.

    ``Beta.ppf(1 − a, k + 1, n − k)``, and 1 when k = n (Clopper & Pearson 1934).  Vectorised over
    k, n."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    full = k >= n
    out = beta.ppf(1.0 - a, k + 1.0, np.where(full, 1.0, n - k))
    out = np.where(full, 1.0, out)
    return float(out) if out.ndim == 0 else out


def cp_lower(k, n, a):
    """One-sided Clopper–Pearson lower bound: P[p ≥ p_lcb] ≥ 1 − a.

    ``Beta.ppf(a, k, n − k + 1)``, and 0 when k = 0 (Clopper & Pearson 1934).  Vectorised over k,
    n."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    none = k <= 0
    out = beta.ppf(a, np.where(none, 1.0, k), n - k + 1.0)
    out = np.where(none, 0.0, out)
    return float(out) if out.ndim == 0 else out


# ---- bounds from rates -----------------------------------------------------------------------

def epsilon_from_rates(fpr_ub, fnr_ub, delta: float = 0.0):
    """ε lower bound from upper bounds on FPR and FNR (Kairouz, Oh & Viswanath 2015): max(log((1 − δ
    − FNR_ub)/FPR_ub), log((1 − δ − FPR_ub)/FNR_ub), 0); a term counts only when its numerator is
    positive.  Vectorised."""
    fpr = np.asarray(fpr_ub, dtype=np.float64)
    fnr = np.asarray(fnr_ub, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        num1 = 1.0 - delta - fnr
        num2 = 1.0 - delta - fpr
        t1 = np.where((num1 > 0) & (fpr > 0), np.log(np.where(num1 > 0, num1, 1.0) /
                                                     np.where(fpr > 0, fpr, 1.0)), -np.inf)
        t2 = np.where((num2 > 0) & (fnr > 0), np.log(np.where(num2 > 0, num2, 1.0) /
                                                     np.where(fnr > 0, fnr, 1.0)), -np.inf)
    out = np.maximum(np.maximum(t1, t2), 0.0)
    return float(out) if out.ndim == 0 else out


def mu_from_rates(fpr_ub, fnr_ub):
    """μ lower bound from upper bounds on FPR and FNR (Dong, Roth & Su 2022): max(Φ⁻¹(1 − FPR_ub) −
    Φ⁻¹(FNR_ub), 0), computed as −Φ⁻¹(FPR_ub) − Φ⁻¹(FNR_ub)."""
    fpr = np.asarray(fpr_ub, dtype=np.float64)
    fnr = np.asarray(fnr_ub, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = -ndtri(fpr) - ndtri(fnr)
    out = np.where(np.isnan(out), 0.0, np.maximum(out, 0.0))
    return float(out) if out.ndim == 0 else out


def rates_upper(n0, k0, n1, k1, alpha: float):
    """(FPR_ub, FNR_ub) for event counts k0 of n0 on D and k1 of n1 on D′, each one-sided CP at α/2
    (the union bound over the two rates)."""
    a = alpha / 2.0
    fpr_ub = cp_upper(k0, n0, a)
    fnr_ub = cp_upper(np.asarray(n1) - np.asarray(k1), n1, a)
    return fpr_ub, fnr_ub


def bounds_from_counts(n0: int, k0: int, n1: int, k1: int, *, confidence: float = DEFAULT_CONFIDENCE,
                       delta: float = 0.0) -> dict:
    """ε_lower (at δ) and μ_lower from the counts of one event fixed before the counts were taken,
    valid jointly at ``confidence``; also the rate bounds and point estimates."""
    alpha = _alpha(confidence)
    fpr_ub, fnr_ub = rates_upper(n0, k0, n1, k1, alpha)
    return {"epsilon_lower": float(epsilon_from_rates(fpr_ub, fnr_ub, delta)),
            "mu_lower": float(mu_from_rates(fpr_ub, fnr_ub)),
            "fpr_upper": float(fpr_ub), "fnr_upper": float(fnr_ub),
            "p0": k0 / n0, "p1": k1 / n1}


def _alpha(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)):
        raise DpledgerError(f"confidence must be a number, got {confidence!r}")
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise DpledgerError(f"confidence must lie in (0, 1), got {confidence!r}")
    return 1.0 - c


# ---- selection and the audit of two score samples -------------------------------------------

@dataclass(frozen=True)
class Event:
    """S = {score > threshold} (``greater``) or {score < threshold} (``less``) of score ``score``."""

    direction: str
    threshold: float
    score: str = "value"

    def contains(self, s: np.ndarray) -> np.ndarray:
        return s > self.threshold if self.direction == GREATER else s < self.threshold


def split_sizes(n: int, fraction: float) -> tuple[int, int]:
    """(selection, count) sizes of one side: ⌈fraction·n⌉ selection trials, at least one of each."""
    m = int(math.ceil(fraction * n))
    m = min(max(m, 1), n - 1)
    return m, n - m


def threshold_grid(pooled: np.ndarray, size: int = GRID_SIZE) -> np.ndarray:
    """``size`` pooled quantiles at levels (i + ½)/size, as observed values (inverted CDF), unique."""
    pooled = np.asarray(pooled, dtype=np.float64)
    levels = (np.arange(size) + 0.5) / size
    return np.unique(np.quantile(pooled, levels, method="inverted_cdf"))


def event_counts(sorted_scores: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(#{s > t}, #{s < t}) for every t of ``grid``; ``sorted_scores`` ascending."""
    n = sorted_scores.size
    greater = n - np.searchsorted(sorted_scores, grid, side="right")
    less = np.searchsorted(sorted_scores, grid, side="left")
    return greater, less


def candidate_bounds(n0, k0, n1, k1, alpha: float, currency: str, delta: float,
                     project: int | tuple[int, int] | None = None,
                     selection_level: float | None = None):
    """The selection criterion of each candidate event, then a tie-break.

    Criterion: without ``project``, the event's bound (in the audited currency) on the
    selection trials.  With ``project`` = N, or (N0, N1) per side — the count trials the chosen
    event will be counted on — the bound the event would give on those count trials, at rates
    read from the selection trials:

    * ``selection_level`` None (sequential audits, whose count trials may grow to
      ``max_trials``): the smoothed plug-in rates (k + ½)/(n + 1).  A small selection split
      otherwise favours central thresholds, which a large count split no longer needs.
    * ``selection_level`` a (fixed-n audits, a = α): the rates the selection trials vouch for
      at one-sided level a — the rate on D at its Clopper–Pearson upper bound, the rate on D′
      at its lower bound — so a candidate is credited only with the separation its own
      selection counts support.  Plug-in rates are not used there: the maximum over hundreds
      of candidates then rewards whichever rare event was lucky on the selection split (a
      handful of counts on D′, almost none on D), and the reported bound collapses on the
      count split (issue 23 §5; tests/test_audits_selection.py has the cases and numbers).
      The level α (not α/2 per rate) is a choice, measured on 170 black- and white-box
      audits at 2·10⁴ trials: α/2 and 0.16 did no better.

    Tie-break: a smoothed plug-in log-ratio in the direction that can give a bound (the event
    more likely on D′ than on D), largest first; when every criterion is 0 (a selection split
    too small to show anything) it still never prefers an event whose rates point the wrong
    way, which gives 0 whatever the count split shows."""
    if project is not None:
        N0, N1 = (project, project) if np.ndim(project) == 0 else project
        N0, N1 = float(N0), float(N1)
        if selection_level is None:
            q0 = (np.asarray(k0) + 0.5) / (np.asarray(n0) + 1.0)
            q1 = (np.asarray(k1) + 0.5) / (np.asarray(n1) + 1.0)
        else:
            q0 = cp_upper(k0, n0, selection_level)
            q1 = cp_lower(k1, n1, selection_level)
        pk0 = np.floor(q0 * N0) if selection_level is None else np.ceil(q0 * N0)
        pk1 = np.ceil(q1 * N1) if selection_level is None else np.floor(q1 * N1)
        fpr_ub, fnr_ub = rates_upper(N0, pk0, N1, np.minimum(pk1, N1), alpha)
    else:
        fpr_ub, fnr_ub = rates_upper(n0, k0, n1, k1, alpha)
    if currency == "mu":
        main = mu_from_rates(fpr_ub, fnr_ub)
    else:
        main = epsilon_from_rates(fpr_ub, fnr_ub, delta)
    p0 = (np.asarray(k0) + 0.5) / (np.asarray(n0) + 1.0)
    p1 = (np.asarray(k1) + 0.5) / (np.asarray(n1) + 1.0)
    p0, p1 = np.broadcast_arrays(p0, p1)
    plug = np.maximum(np.log(p1 / p0), np.log((1 - p0) / (1 - p1)))
    return np.atleast_1d(main), np.atleast_1d(plug)


@dataclass
class Selection:
    event: Event
    criterion: float           # the chosen event's criterion (candidate_bounds)
    candidates: int            # number of (score, direction, threshold) candidates compared
    n0: int                    # selection trials per side
    n1: int


def select_event(sel0: dict[str, np.ndarray], sel1: dict[str, np.ndarray], *, alpha: float,
                 currency: str, delta: float, grid_size: int = GRID_SIZE,
                 project: int | tuple[int, int] | None = None,
                 selection_level: float | None = None) -> Selection:
    """Pick (score, direction, threshold) on the selection trials only, by
    :func:`candidate_bounds` (``project``, ``selection_level``: see there).

    ``sel0``/``sel1`` map score names to the selection trials' scores on D and D′ (the same keys,
    in a fixed order).  Ties go to the earlier candidate, so the choice is deterministic."""
    best = None
    total = 0
    for name in sel0:
        s0 = np.sort(np.asarray(sel0[name], dtype=np.float64))
        s1 = np.sort(np.asarray(sel1[name], dtype=np.float64))
        grid = threshold_grid(np.concatenate([s0, s1]), grid_size)
        g0, l0 = event_counts(s0, grid)
        g1, l1 = event_counts(s1, grid)
        for direction, c0, c1 in ((GREATER, g0, g1), (LESS, l0, l1)):
            main, plug = candidate_bounds(s0.size, c0, s1.size, c1, alpha, currency, delta,
                                          project, selection_level)
            total += main.size
            i = int(np.lexsort((-np.arange(main.size), plug, main))[-1])  # max main, then plug
            key = (float(main[i]), float(plug[i]))
            if best is None or key > best[0]:
                best = (key, Event(direction, float(grid[i]), name))
    (crit, _), event = best
    return Selection(event=event, criterion=crit, candidates=total,
                     n0=len(next(iter(sel0.values()))), n1=len(next(iter(sel1.values()))))


@dataclass
class ScoreAudit:
    """The outcome of :func:`audit_scores`: the bounds and everything needed to re-check them."""

    epsilon_lower: float        # at ``delta`` (δ = 0: pure ε)
    mu_lower: float
    delta: float
    confidence: float
    n0: int
    k0: int
    n1: int
    k1: int
    event: Event
    selection: Selection
    selection_fraction: float
    fpr_upper: float
    fnr_upper: float

    def counts_json(self) -> dict:
        return {"n0": self.n0, "k0": self.k0, "n1": self.n1, "k1": self.k1,
                "direction": self.event.direction, "threshold": self.event.threshold,
                "selection_fraction": self.selection_fraction, "score": self.event.score,
                "fpr_upper": self.fpr_upper, "fnr_upper": self.fnr_upper,
                "selection_trials": [self.selection.n0, self.selection.n1],
                "selection_candidates": self.selection.candidates,
                "selection_criterion": self.selection.criterion}


def check_kernel_policy(policy, mode: str, contextual_hint: str) -> None:
    """The K-armed audits' entry check: a policy, not a contextual one (``contextual_hint``
    names where its records are audited), and a mode of 'whitebox' or 'blackbox'."""
    from dpledger.policies.base import Policy
    if not isinstance(policy, Policy):
        raise DpledgerError(f"not a policy: {policy!r}")
    if getattr(policy, "contextual", False):
        raise DpledgerError(f"{policy.name} is contextual: {contextual_hint}")
    if mode not in ("whitebox", "blackbox"):
        raise DpledgerError(f"mode must be 'whitebox' or 'blackbox', got {mode!r}")


def check_options(confidence, selection_fraction) -> tuple[float, float]:
    """(α, selection fraction) after validation: confidence and fraction in (0, 1)."""
    alpha = _alpha(confidence)
    if isinstance(selection_fraction, bool) or not isinstance(selection_fraction, (int, float)) \
            or not 0.0 < float(selection_fraction) < 1.0:
        raise DpledgerError(f"selection_fraction must lie in (0, 1), got {selection_fraction!r}")
    return alpha, float(selection_fraction)


def audit_scores(scores0, scores1, *, confidence: float = DEFAULT_CONFIDENCE,
                 selection_fraction: float = DEFAULT_SELECTION_FRACTION, delta: float = 0.0,
                 currency: str = "epsilon", grid_size: int = GRID_SIZE) -> ScoreAudit:
    """Audit two samples of scores: trials of the mechanism on D (``scores0``) and on D′.

    Each argument is an array (one score) or a dict {name: array} of candidate scores of the same
    trials (the selection picks one).  ``currency`` ("epsilon" or "mu") is what the selection
    maximises; both bounds are reported from the same counts.  See the module docstring for the
    statistics and their sources."""
    alpha, selection_fraction = check_options(confidence, selection_fraction)
    if currency not in ("epsilon", "mu"):
        raise DpledgerError(f"currency must be 'epsilon' or 'mu', got {currency!r}")
    if not (isinstance(delta, (int, float)) and 0.0 <= delta < 1.0):
        raise DpledgerError(f"delta must lie in [0, 1), got {delta!r}")
    grid_size = check_count("grid size", grid_size, minimum=1)
    d0 = scores0 if isinstance(scores0, dict) else {"value": scores0}
    d1 = scores1 if isinstance(scores1, dict) else {"value": scores1}
    if list(d0) != list(d1) or not d0:
        raise DpledgerError("both sides need the same score names")
    d0 = {k: _as_scores(v, "scores of D") for k, v in d0.items()}
    d1 = {k: _as_scores(v, "scores of D′") for k, v in d1.items()}
    n0s = {v.size for v in d0.values()}
    n1s = {v.size for v in d1.values()}
    if len(n0s) != 1 or len(n1s) != 1:
        raise DpledgerError("every score must have one value per trial")
    n0, n1 = n0s.pop(), n1s.pop()
    if min(n0, n1) < 2:
        raise DpledgerError(f"an audit needs at least 2 trials per side, got {n0} and {n1}")
    m0, _ = split_sizes(n0, float(selection_fraction))
    m1, _ = split_sizes(n1, float(selection_fraction))
    # each candidate scored by the bound it would give on the count split, at the rates its
    # selection counts vouch for (issue 23 §5)
    sel = select_event({k: v[:m0] for k, v in d0.items()}, {k: v[:m1] for k, v in d1.items()},
                       alpha=alpha, currency=currency, delta=float(delta), grid_size=grid_size,
                       project=(n0 - m0, n1 - m1), selection_level=alpha)
    c0 = d0[sel.event.score][m0:]
    c1 = d1[sel.event.score][m1:]
    k0 = int(np.count_nonzero(sel.event.contains(c0)))
    k1 = int(np.count_nonzero(sel.event.contains(c1)))
    b = bounds_from_counts(c0.size, k0, c1.size, k1, confidence=confidence, delta=float(delta))
    return ScoreAudit(epsilon_lower=b["epsilon_lower"], mu_lower=b["mu_lower"], delta=float(delta),
                      confidence=float(confidence), n0=int(c0.size), k0=k0, n1=int(c1.size), k1=k1,
                      event=sel.event, selection=sel, selection_fraction=float(selection_fraction),
                      fpr_upper=b["fpr_upper"], fnr_upper=b["fnr_upper"])


def _as_scores(v, name: str) -> np.ndarray:
    try:
        arr = np.asarray(v, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise DpledgerError(f"{name} must be numbers") from None
    if np.isnan(arr).any():
        raise DpledgerError(f"{name} contain NaN")
    return arr


__all__ = ["cp_upper", "cp_lower", "epsilon_from_rates", "mu_from_rates", "rates_upper",
           "bounds_from_counts", "audit_scores", "check_options", "select_event", "threshold_grid", "Event",
           "ScoreAudit", "Selection", "split_sizes", "GRID_SIZE", "DEFAULT_SELECTION_FRACTION",
           "DEFAULT_CONFIDENCE"]


# ---- the statistical ceiling -------------------------------------------------------------------

def ceiling(trials: int, *, confidence: float = DEFAULT_CONFIDENCE,
            selection_fraction: float = DEFAULT_SELECTION_FRACTION, currency: str = "epsilon",
            delta: float = 0.0, alpha_divisor: int = 1) -> float:
    """The largest bound ``trials`` trials per side can certify: the bound of a perfect test,
    zero errors on the count trials (k0 = 0 of n0, k1 = n1 of n1, n0 = n1 the count split).

    Then FPR_ub = FNR_ub = 1 − (α/2)^(1/n) (one-sided CP at α/2 with k = 0), so
    ε_ceiling = log((1 − δ − FNR_ub)/FPR_ub) and μ_ceiling = −2·Φ⁻¹(FPR_ub).  Any audit with
    these options reports at most this value, whatever the mechanism: a ratio near
    ceiling/certificate is limited by n, not by the policy.  ``alpha_divisor`` J spends α/J (the
    share of one checkpoint of a sequential audit, :func:`sequential_alpha`)."""
    trials = check_count("trials", trials, minimum=2)
    alpha, fraction = check_options(confidence, selection_fraction)
    _, n = split_sizes(trials, fraction)
    fpr_ub, fnr_ub = rates_upper(n, 0, n, n, alpha / alpha_divisor)
    if currency == "mu":
        return float(mu_from_rates(fpr_ub, fnr_ub))
    return float(epsilon_from_rates(fpr_ub, fnr_ub, delta))


# ---- sequential, anytime-valid audits ----------------------------------------------------------

SEQUENTIAL_BATCH = 1 << 18      # trials per side drawn at once after the first batch (a few MB)

def checkpoints(first: int, max_trials: int) -> list[int]:
    """The geometric grid of checkpoints (trials per side): first, 2·first, 4·first, …, capped
    at and ending with ``max_trials``.  Fixed before any trial is drawn."""
    first = check_count("first batch", first, minimum=2)
    max_trials = check_count("max trials", max_trials, minimum=2)
    first = min(first, max_trials)
    out = [first]
    while out[-1] < max_trials:
        out.append(min(max_trials, 2 * out[-1]))
    return out


@dataclass
class SequentialAudit:
    """The outcome of :func:`sequential_audit`: the final :class:`ScoreAudit` (counts at the
    stopping checkpoint, bounds at α/J), and the path of bounds over the checkpoints."""

    final: ScoreAudit
    trials: int                 # trials per side drawn when it stopped
    checkpoints: list[int]      # the planned grid
    path: list[dict]            # {trials, n0, k0, n1, k1, lower} at each checkpoint reached
    stop_reason: str            # "reached", "cannot_reach", "max_trials"
    alpha_per_checkpoint: float
    first_counts: tuple = ()    # the first batch's count-trial scores (D, D′), for plots

    def to_json(self) -> dict:
        return {"method": "union bound over a geometric grid of checkpoints (Bonferroni): "
                          "alpha/J per checkpoint, J fixed before sampling; valid at any "
                          "stopping time on the grid",
                "checkpoints": list(self.checkpoints), "alpha_per_checkpoint": self.alpha_per_checkpoint,
                "stop_reason": self.stop_reason, "trials_drawn": self.trials,
                "path": list(self.path)}


def sequential_target(cert: dict, currency: str, until_ratio: float | None,
                      max_trials: int | None, trials: int) -> tuple[float | None, int]:
    """The sequential audit's stopping target (``until_ratio`` × the certificate in the audit's
    currency, None without a ratio or a finite certificate) and its trial cap per side
    (default 100 × the first batch, never below it)."""
    cval = cert.get("gdp_mu" if currency == "mu" else "pure_epsilon")
    target = None
    if until_ratio is not None:
        until_ratio = check_positive("until_ratio", until_ratio)
        target = None if cval is None else until_ratio * cval
    mx = check_count("max_trials", max_trials if max_trials is not None else 100 * trials,
                     minimum=trials)
    return target, mx


def sequential_audit(sample, *, first: int, max_trials: int, target: float | None,
                     confidence: float = DEFAULT_CONFIDENCE,
                     selection_fraction: float = DEFAULT_SELECTION_FRACTION, delta: float = 0.0,
                     currency: str = "epsilon", scorer=None,
                     grid_size: int = GRID_SIZE, batch: int | None = None) -> SequentialAudit:
    """Draw trials in batches until the lower bound reaches ``target`` (e.g. R × certificate),
    or can no longer, or ``max_trials`` per side are drawn — with a bound valid at that
    data-dependent stopping time.

    Validity (anytime, on the grid).  The checkpoints c_1 < … < c_J (:func:`checkpoints`) are
    fixed before sampling; at checkpoint j the one-sided CP bounds are taken at α/(2J) each, so
    by the union bound over the 2J rate bounds, with probability ≥ 1 − α *every* checkpoint's
    bound holds simultaneously — hence also the bound at whatever checkpoint the rule stops,
    however the rule looks at the data.  (The fixed-n interval at α applied at every checkpoint
    would not be valid: that is repeated testing.)  The event (score, direction, threshold) is
    selected once, on the selection split of the first batch, and never revised; the count
    trials are all later trials of each side, cumulated.

    ``sample(side, start, n)`` returns trials start … start + n − 1 of side 0 (D) or 1 (D′):
    an array of scores, or a dict of candidate score arrays (or raw features, when ``scorer``
    is given: ``scorer(raw0_sel, raw1_sel)`` is called once on the selection trials and returns
    the function raw → dict of scores applied to every later batch).  Trials must be a fixed
    function of (side, index), so the result does not depend on the batching.

    After the first batch, trials are drawn ``batch`` at a time (default
    :data:`SEQUENTIAL_BATCH`) and reduced to counts at once.

    Futility ("cannot_reach"): stop when even the plug-in rates of the counts so far, observed
    over ``max_trials`` count trials, would not give ``target`` — a heuristic that affects only
    when sampling stops, never the validity of the bound."""
    alpha, fraction = check_options(confidence, selection_fraction)
    batch = check_count("batch", SEQUENTIAL_BATCH if batch is None else batch, minimum=1)
    grid = checkpoints(first, max_trials)
    J = len(grid)
    a_j = alpha / J
    conf_j = 1.0 - a_j
    m, _ = split_sizes(grid[0], fraction)

    def as_dict(x):
        return x if isinstance(x, dict) else {"value": np.asarray(x, dtype=np.float64)}

    raw0, raw1 = sample(0, 0, grid[0]), sample(1, 0, grid[0])
    if scorer is None:
        to_scores = as_dict
    else:
        sel_raw0 = {k: v[:m] for k, v in raw0.items()}
        sel_raw1 = {k: v[:m] for k, v in raw1.items()}
        to_scores = scorer(sel_raw0, sel_raw1)
    d0, d1 = to_scores(raw0), to_scores(raw1)
    sel = select_event({k: np.asarray(v[:m], float) for k, v in d0.items()},
                       {k: np.asarray(v[:m], float) for k, v in d1.items()},
                       alpha=a_j, currency=currency, delta=float(delta), grid_size=grid_size,
                       project=split_sizes(max_trials, fraction)[1] if max_trials > grid[0] else None)
    ev = sel.event
    n0 = k0 = n1 = k1 = 0
    c0 = np.asarray(d0[ev.score][m:], float)
    c1 = np.asarray(d1[ev.score][m:], float)
    n0, k0 = c0.size, int(np.count_nonzero(ev.contains(c0)))
    n1, k1 = c1.size, int(np.count_nonzero(ev.contains(c1)))
    path = []
    drawn = grid[0]
    reason = "max_trials"
    b = None
    for j, cj in enumerate(grid):
        # later batches are drawn in pieces of at most ``batch`` trials: only their counts are
        # kept, so memory stays bounded whatever max_trials (trials are a fixed function of
        # (side, index): the pieces give the counts the whole batch would)
        for start in range(drawn, cj, batch):
            n = min(batch, cj - start)
            for side in (0, 1):
                s = np.asarray(to_scores(as_dict(sample(side, start, n)))[ev.score], float)
                k = int(np.count_nonzero(ev.contains(s)))
                if side == 0:
                    n0, k0 = n0 + s.size, k0 + k
                else:
                    n1, k1 = n1 + s.size, k1 + k
        drawn = max(drawn, cj)
        b = bounds_from_counts(n0, k0, n1, k1, confidence=conf_j, delta=float(delta))
        lower = b["mu_lower"] if currency == "mu" else b["epsilon_lower"]
        path.append({"trials": int(cj), "n0": n0, "k0": k0, "n1": n1, "k1": k1,
                     "lower": float(lower)})
        if target is not None and lower >= target:
            reason = "reached"
            break
        if j == J - 1:
            break
        if target is not None and _futile(n0, k0, n1, k1, max_trials - m, conf_j, delta,
                                          currency, target):
            reason = "cannot_reach"
            break
    final = ScoreAudit(epsilon_lower=b["epsilon_lower"], mu_lower=b["mu_lower"], delta=float(delta),
                       confidence=float(confidence), n0=n0, k0=k0, n1=n1, k1=k1, event=ev,
                       selection=sel, selection_fraction=fraction, fpr_upper=b["fpr_upper"],
                       fnr_upper=b["fnr_upper"])
    return SequentialAudit(final=final, trials=drawn, checkpoints=grid, path=path,
                           stop_reason=reason, alpha_per_checkpoint=a_j, first_counts=(c0, c1))


def _futile(n0, k0, n1, k1, N, conf, delta, currency, target) -> bool:
    """Could N count trials per side plausibly reach ``target``?  Both rates are moved three
    standard errors in each favourable direction (the bound grows with p1 − p0 for the event
    and with p0 − p1 for its reverse) and projected to N trials; futile when neither reaches
    the target.  It decides only when sampling stops, never the validity of the bound."""
    p0, p1 = (k0 + 0.5) / (n0 + 1.0), (k1 + 0.5) / (n1 + 1.0)
    se0, se1 = math.sqrt(p0 * (1 - p0) / n0), math.sqrt(p1 * (1 - p1) / n1)
    for q0, q1 in ((p0 - 3 * se0, p1 + 3 * se1), (p0 + 3 * se0, p1 - 3 * se1)):
        q0, q1 = min(max(q0, 0.0), 1.0), min(max(q1, 0.0), 1.0)
        b = bounds_from_counts(N, int(math.floor(q0 * N)), N, int(math.ceil(q1 * N)),
                               confidence=conf, delta=float(delta))
        if (b["mu_lower"] if currency == "mu" else b["epsilon_lower"]) >= target:
            return False
    return True


__all__ += ["ceiling", "checkpoints", "sequential_audit", "SequentialAudit"]
