"""The realized privacy block of a ledger (docs/design.md#realized): every value the maximum over
every reward of every run, computed over the ledger's maximal compositions
(:func:`dpledger.accounting.reward_queries.maximal_compositions`), and a check of it against the
ledger by a separate route.

**The realized block** (:func:`realized_privacy`).  Up to :data:`EXACT_FRONT_LIMIT` maximal
compositions, every value is the exact maximum over them (:func:`privacy_block`).  Beyond it, the
values that are linear in the counts or monotone in one scalar stay exact maxima over all of
them — pure ε, GDP μ and its ε(δ), zCDP ρ, the adaptive pure ε(δ) = Σε, and RDP ε(δ) (per
composition: its curve is counts × per-release curves, converted order by order; the top ones
recomputed by the accountant) — while the optimal pure composition at δ > 0, PLD, and the best
accountant's ε(δ) are *sound upper bounds*: PLD and pure ε(δ) of the element-wise maximum
composition (every non-Gaussian release at its largest count over the maximal set, the largest
Gaussian μ²), which dominates every reward's, and best = the smallest of the per-accountant
maxima (max_r min_a ≤ min_a max_r).  The block then names those values under ``upper_bounds``.

**Independent check** (:func:`check_realized`).  ``verify`` recomputes the block from the stored
maximal compositions with :func:`realized_privacy` — the same function — so it re-derives, but
cannot notice a query layer that lost a reward.  :func:`scalar_maxima` recomputes the per-reward
maximum pure ε and GDP μ² by another route (one sorted sweep of signed per-row weights per stream,
no counts, groups or fronts) and :func:`check_realized` compares them with the block.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

from dpledger.accounting.composition import Composition, costlier
from dpledger.accounting.releases import (NOT_APPLICABLE, UNBOUNDED, GaussianRelease,
                                          NonPrivateRelease, Release)
from dpledger.accounting.reward_queries import (KEY_REL_TOL, _ledger_currency, rank_weight,
                                                summation_bound,
                                                exact_front)

if TYPE_CHECKING:       # pragma: no cover
    from dpledger.accounting.ledger import RewardLedger

EXACT_FRONT_LIMIT = 64


# -- the realized block --------------------------------------------------------------------------
def elementwise_max(compositions: Sequence[Composition]) -> Composition:
    """The composition holding every non-Gaussian release at its largest count over
    ``compositions`` and one Gaussian of their largest total μ²: it dominates each of them."""
    counts: dict[tuple, tuple[Release, int]] = {}
    mu2 = 0.0
    for c in compositions:
        gterms = []
        for r, n in c.items:
            if isinstance(r, GaussianRelease):
                gterms.append(n * r.mu2)
            else:
                nf = r.normal_form()
                if nf in counts:        # the costlier member and the larger count (issue 26)
                    counts[nf] = (costlier(counts[nf][0], r), max(counts[nf][1], n))
                else:
                    counts[nf] = (r, n)
        mu2 = max(mu2, math.fsum(gterms))
    return Composition.gaussian_total(mu2, list(counts.values()))


def realized_privacy(compositions: Sequence[Composition], deltas: Sequence[float],
                     adaptive: bool) -> dict:
    """The realized privacy block: each value the maximum over ``compositions`` (a ledger's
    maximal compositions), exact up to :data:`EXACT_FRONT_LIMIT` of them, beyond that exact where
    cheap and a labelled upper bound elsewhere (module docstring).  ``upper_bounds`` maps each
    value that is a bound (``"epsilon.pld"``, ``"epsilon.pure"``, ``"epsilon_at_delta"``) to its
    label; it is present only when some value is one.  ``unbounded`` when a reward was read
    without noise."""
    return realized_privacy_witnessed(compositions, deltas, adaptive)[0]


def _read_without_noise(comp: Composition) -> bool:
    return any(isinstance(r, NonPrivateRelease) for r in comp.releases)


def realized_privacy_witnessed(compositions: Sequence[Composition], deltas: Sequence[float],
                               adaptive: bool) -> tuple[dict, dict[str, int]]:
    """:func:`realized_privacy` and a witness for each exact maximum it reports (the keys of
    :func:`~dpledger.accounting.schema.privacy_block_witnessed`, values indices into
    ``compositions``); a value reported as an upper bound over a large front has none."""
    from dpledger.accounting.schema import privacy_block_witnessed
    given = list(compositions)
    unbounded = any(_read_without_noise(c) for c in given)
    if unbounded or len(given) <= 1:
        block, wit = privacy_block_witnessed(given or [Composition()], deltas, adaptive=adaptive,
                                             unbounded=unbounded)
        if unbounded:
            first = next(i for i, c in enumerate(given) if _read_without_noise(c))
            wit = {"pure_epsilon": first, "gdp_mu": first}
        return block, wit if given else {}
    comps = exact_front(given)
    first: dict[Composition, int] = {}
    for i, c in enumerate(given):
        first.setdefault(c, i)
    back = [first[c] for c in comps]
    if len(comps) <= EXACT_FRONT_LIMIT:
        block, wit = privacy_block_witnessed(comps, deltas, adaptive=adaptive)
    else:
        block, wit = _large_front_block(comps, deltas, adaptive)
    return block, {k: back[i] for k, i in wit.items()}


def _finite(x: float | None) -> tuple[float | None, str]:
    if x is None:
        return None, NOT_APPLICABLE
    if math.isinf(x):
        return None, UNBOUNDED
    return float(x), "ok"


def _large_front_block(comps: list[Composition], deltas: Sequence[float],
                       adaptive: bool) -> tuple[dict, dict[str, int]]:
    from dpledger.accounting.accountants import ACCOUNTANTS
    from dpledger.accounting.pld import MIN_DELTA
    from dpledger.accounting.schema import ACCOUNTANT_ORDER, delta_key, parse_deltas, privacy_block
    deltas = parse_deltas(deltas)
    label = f"bound: elementwise max over {len(comps)} maximal compositions"
    top = elementwise_max(comps)
    out = privacy_block([top], deltas, adaptive=adaptive)      # statuses, and the bounds
    bounds: dict[str, str] = {}
    wit: dict[str, int] = {}

    def argmax(values) -> int:
        return max(range(len(values)), key=lambda i: values[i])

    # exact scalar maxima
    pure = [c.pure_epsilon() for c in comps]
    wit["pure_epsilon"] = argmax(pure)
    out["pure_epsilon"], out["pure_epsilon_status"] = _finite(max(pure))
    if any(c.status("gdp") == UNBOUNDED for c in comps):
        out["gdp_mu"], out["gdp_mu_status"] = None, UNBOUNDED
    elif any(c.gdp_mu() is None for c in comps):
        out["gdp_mu"], out["gdp_mu_status"] = None, NOT_APPLICABLE
    else:
        mus = [c.gdp_mu() for c in comps]
        wit["gdp_mu"] = argmax(mus)
        out["gdp_mu"], out["gdp_mu_status"] = float(max(mus)), "ok"
    rhos = [c.zcdp_rho() for c in comps]
    out["zcdp_rho"], out["zcdp_rho_status"] = _finite(max(rhos))
    wit["zcdp_rho"] = argmax(rhos)
    if any(c.status("zcdp") == NOT_APPLICABLE for c in comps):
        out["zcdp_rho"], out["zcdp_rho_status"] = None, NOT_APPLICABLE
        del wit["zcdp_rho"]
    table, status = out["epsilon"], out["epsilon_status"]
    keys = [delta_key(d) for d in deltas]
    g_top = argmax([c.gdp_mu2() for c in comps])
    for d, k in zip(deltas, keys, strict=True):
        if status["gdp"][k] == "ok":
            table["gdp"][k] = float(ACCOUNTANTS["gdp"].epsilon(comps[g_top], d, adaptive))
            wit[f"epsilon.gdp.{k}"] = g_top
        if status["rdp"][k] == "ok":
            table["rdp"][k], wit[f"epsilon.rdp.{k}"] = _rdp_max(comps, d)
        if status["pure"][k] == "ok":
            if adaptive:        # Σε under adaptive parameters: a scalar, exact
                per = [ACCOUNTANTS["pure"].epsilon(c, d, True) for c in comps]
                table["pure"][k] = max(per)
                wit[f"epsilon.pure.{k}"] = argmax(per)
            else:
                bounds["epsilon.pure"] = label
        if status["pld"][k] == "ok":
            bounds["epsilon.pld"] = label
    # best: the smallest per-accountant maximum (≥ the maximum of the per-reward minima)
    for d, k in zip(deltas, keys, strict=True):
        vals = [(table[a][k], a) for a in ACCOUNTANT_ORDER
                if status[a][k] == "ok" and table[a][k] is not None
                and not (a == "pld" and d < MIN_DELTA)]
        if vals:
            v, a = min(vals)
            out["epsilon_at_delta"][k], out["epsilon_at_delta_source"][k] = v, a
            bounds["epsilon_at_delta"] = label
        else:
            out["epsilon_at_delta"][k], out["epsilon_at_delta_source"][k] = None, "unbounded"
    out["composition"] = max(comps, key=lambda c: (c.pure_epsilon(), c.gdp_mu2())).to_json()
    if bounds:
        out["upper_bounds"] = dict(sorted(bounds.items()))
    return out, wit


def _rdp_max(comps: Sequence[Composition], delta: float) -> tuple[float, int]:
    """max over ``comps`` of the RDP accountant's ε(δ), exactly, and where it is attained:
    every composition's curve as
    counts × per-release curves (one matrix product) converted order by order to rank them,
    then the accountant itself on each within 1e-9 of the top — the ranking's error (≤ a few
    hundred ulps per order, sums of non-negative terms) is far inside that window."""
    from dpledger.accounting import rdp as _rdp
    from dpledger.accounting.accountants import ACCOUNTANTS
    col: dict[Release, int] = {}
    for c in comps:
        for r, _ in c.items:
            col.setdefault(r, len(col))
    X = np.zeros((len(comps), len(col)))
    for i, c in enumerate(comps):
        for r, n in c.items:
            X[i, col[r]] += n
    acc = ACCOUNTANTS["rdp"]
    if any(isinstance(c.rdp_orders(), np.ndarray) and c.rdp_orders() is not _rdp.ORDERS
           for c in comps):     # listed-order releases: no common grid to rank on
        per = [float(acc.epsilon(c, delta, True)) for c in comps]
        i = max(range(len(per)), key=lambda j: per[j])
        return per[i], i
    orders = _rdp.ORDERS
    curves = np.array([Composition(((r, 1),)).rdp(orders) for r in col])
    conv = np.log1p(-1.0 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1.0)
    with np.errstate(invalid="ignore"):
        approx = np.nanmin(X @ curves + conv[None, :], axis=1)
    approx = np.maximum(approx, 0.0)
    cut = approx.max() - 1e-9 * abs(approx.max()) - 1e-12
    value, where = max((float(acc.epsilon(comps[i], delta, True)), -i)
                       for i in np.flatnonzero(approx >= cut).tolist())
    return value, -where


# -- independent check -------------------------------------------------------------------------
def scalar_maxima(ledger: "RewardLedger") -> dict:
    """The largest per-reward pure ε and GDP μ² bound over every reward, by a route that shares
    nothing with :func:`piece_totals` beyond the stored records: per stream, one sorted sweep of
    the rows' signed per-release weights (count·ε_i, count·μ_i², count·μ² inline), with the
    rows of releases lacking a finite value counted apart; the posterior reads evaluated at
    every breakpoint (the running sums are constant between breakpoints and the reads never
    increase).  Returns {"pure_epsilon", "gdp_mu2", "pure_err", "gdp_err"}: the maxima (∞ when
    some reward has no finite value) and bounds on their floating-point error."""
    streams = ledger.streams()
    if sum(streams.values()) == 0:          # no rewards: the empty composition's values
        return {"pure_epsilon": 0.0, "gdp_mu2": 0.0, "pure_err": 0.0, "gdp_err": 0.0}
    keys = np.array([r * (1 << 20) + a for r, a in streams], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(list(streams.values()))]).astype(np.int64)
    rel = ledger.releases
    eps = np.array([math.inf if r.statuses["pure"] == UNBOUNDED else r.epsilon for r in rel])
    # GDP μ² per release, or 2ρ when the ledger holds discrete Gaussians (the exact sampler:
    # its posterior reads' weights are 2ρ too, and no GDP μ exists)
    cur = "zcdp" if _ledger_currency(ledger) == "zcdp" else "gdp"
    mu2 = np.array([rank_weight(r, cur) for r in rel])
    rows = ledger.expanded_rows()
    g = ledger.gaussian_rows
    pos, w_pure, w_gdp, inf_pure, inf_gdp = [], [], [], [], []

    def add(table, wp, wg, ip, ig):
        k = np.searchsorted(keys, table["run"] * (1 << 20) + table["arm"])
        for where, sign in ((table["start"], 1.0), (table["stop"], -1.0)):
            pos.append(offsets[k] + where)
            w_pure.append(sign * wp)
            w_gdp.append(sign * wg)
            inf_pure.append(int(sign) * ip)
            inf_gdp.append(int(sign) * ig)

    if rows["run"].size:
        rid, cnt = rows["release_id"], rows["count"].astype(np.float64)
        ep, mg = eps[rid], mu2[rid]
        add(rows, np.where(np.isfinite(ep), cnt * np.where(np.isfinite(ep), ep, 0), 0.0),
            np.where(np.isfinite(mg), cnt * np.where(np.isfinite(mg), mg, 0), 0.0),
            (~np.isfinite(ep)).astype(np.int64), (~np.isfinite(mg)).astype(np.int64))
    if g["run"].size:
        add(g, np.zeros(g["run"].size), g["count"] * g["mu2"],
            np.ones(g["run"].size, np.int64), np.zeros(g["run"].size, np.int64))
    pos.append(offsets[:-1])                   # every stream's first reward is a breakpoint
    for lst in (w_pure, w_gdp):
        lst.append(np.zeros(keys.size))
    for lst in (inf_pure, inf_gdp):
        lst.append(np.zeros(keys.size, np.int64))
    p = np.concatenate(pos)
    order = np.argsort(p, kind="stable")
    p = p[order]
    at = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    bpos = p[at]
    inside = bpos < offsets[-1]
    sums = {}
    for name, lst in (("pure", w_pure), ("gdp", w_gdp), ("ipure", inf_pure), ("igdp", inf_gdp)):
        v = np.concatenate(lst)[order]
        sums[name] = np.cumsum(np.add.reduceat(v, at))[inside]
    bpos = bpos[inside]
    n_terms = p.size + 2
    abs_pure = float(np.abs(np.concatenate(w_pure)).sum()) * (1 + 1e-12)
    abs_gdp = float(np.abs(np.concatenate(w_gdp)).sum()) * (1 + 1e-12)
    gdp_vals = sums["gdp"].copy()
    read = np.zeros(bpos.size, dtype=bool)
    if ledger.n_posterior_reads():
        s = np.searchsorted(offsets, bpos, side="right") - 1
        reads = np.zeros(bpos.size)
        for j in np.unique(s).tolist():
            m = np.flatnonzero(s == j)
            reads[m] = ledger.posterior_read_mu2(int(keys[j] >> 20), int(keys[j] & ((1 << 20) - 1)),
                                                 bpos[m] - offsets[j])
        gdp_vals = gdp_vals + reads
        read = reads > 0            # a (Gaussian) posterior read has no finite pure ε
    pure = np.where((sums["ipure"] > 0) | read, np.inf, sums["pure"])
    gdp = np.where(sums["igdp"] > 0, np.inf, gdp_vals)
    top_p, top_g = float(pure.max()), float(gdp.max())
    return {"pure_epsilon": max(top_p, 0.0), "gdp_mu2": max(top_g, 0.0),
            "pure_err": summation_bound(n_terms, abs_pure) + KEY_REL_TOL * abs(top_p),
            "gdp_err": summation_bound(n_terms, abs_gdp) + KEY_REL_TOL * abs(top_g)}


def check_realized(ledger: "RewardLedger", realized: dict) -> list[str]:
    """Problems found comparing a realized block (its ``pure_epsilon`` and the largest GDP μ²
    among its stored ``compositions``) with :func:`scalar_maxima` of the ledger it came from;
    empty when they agree within the sweep's error bound."""
    ref = scalar_maxima(ledger)
    problems = []
    stored = [Composition.from_json(c) for c in realized.get("compositions", [])] or [Composition()]
    pure = realized.get("pure_epsilon")
    if realized.get("pure_epsilon_status") == UNBOUNDED:
        pure = math.inf
    zcdp = _ledger_currency(ledger) == "zcdp"
    mu2 = max(2.0 * c.zcdp_rho() if zcdp else c.gdp_mu2() for c in stored)
    name = "zCDP 2*rho" if zcdp else "GDP mu^2"
    for what, got, want, err in (("pure_epsilon", pure, ref["pure_epsilon"], ref["pure_err"]),
                                 (f"{name} of the stored compositions", mu2, ref["gdp_mu2"],
                                  ref["gdp_err"])):
        if got is None:
            continue            # not applicable in this currency
        if math.isinf(got) or math.isinf(want):
            if got != want:
                problems.append(f"realized {what} {got!r}, the ledger's per-reward maximum "
                                f"{want!r}")
        elif abs(got - want) > err:
            problems.append(f"realized {what} {got!r}, the ledger's per-reward maximum "
                            f"{want!r} (recomputed by a sweep over the ledger's rows)")
    return problems
