"""``dpledger audit --plot``: the score distributions under D and D′ with the chosen threshold,
and the lower bound against trials (issue 14 §5).

The data come from the audit itself (:attr:`AuditResult.plot_data`, kept in memory, never in
audit.json): the count trials' scores of both sides, the event, and the path of the bound.
For a fixed-n audit the path is the bound the same event gives on the first n count trials for
n on a geometric grid — drawn to show how the bound grows with n, labelled "not a sequential
bound" (each point is a fixed-n interval, valid on its own, not jointly); a sequential audit
draws its checkpoints' bounds, which are valid jointly (α/J each).  The ceiling (largest bound
the trials can certify) and the certificate are drawn as horizontal lines.
"""
from __future__ import annotations

import numpy as np

from dpledger.audits.stats import bounds_from_counts, ceiling


def prefix_path(c0: np.ndarray, c1: np.ndarray, event, *, confidence: float, delta: float,
                currency: str, points: int = 20) -> list[dict]:
    """The fixed-n bound of ``event`` on the first n count trials of each side, n on a geometric
    grid of about ``points`` values up to the full count split."""
    n = min(c0.size, c1.size)
    if n < 2:
        return []
    grid = np.unique(np.geomspace(min(50, n), n, points).astype(np.int64))
    in0 = np.cumsum(event.contains(c0[:n]))
    in1 = np.cumsum(event.contains(c1[:n]))
    out = []
    for m in grid:
        b = bounds_from_counts(int(m), int(in0[m - 1]), int(m), int(in1[m - 1]),
                               confidence=confidence, delta=delta)
        out.append({"count_trials": int(m),
                    "lower": b["mu_lower"] if currency == "mu" else b["epsilon_lower"]})
    return out


def legend_below(ax) -> None:
    """A panel's legend under its x label, where it covers no bar or line."""
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
              frameon=False)


def plot_audit(res, path: str) -> None:
    """Two panels: histograms of the count trials' scores (D, D′) with the threshold; the bound
    against trials with the certificate and the ceiling."""
    from dpledger.plots import _plt, _save
    pd = getattr(res, "plot_data", None)
    if not pd:
        from dpledger.errors import DpledgerError
        raise DpledgerError("this audit kept no scores to plot")
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    s0, s1 = np.asarray(pd["s0"], float), np.asarray(pd["s1"], float)
    both = np.concatenate([s0, s1])
    lo, hi = np.quantile(both, [0.0005, 0.9995]) if both.size else (0.0, 1.0)
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    bins = np.linspace(lo, hi, 80)
    ax1.hist(np.clip(s0, lo, hi), bins=bins, alpha=0.55, density=True, label="D")
    ax1.hist(np.clip(s1, lo, hi), bins=bins, alpha=0.55, density=True, label="D′")
    ev = res.score_audit.event
    ax1.axvline(ev.threshold, color="k", ls="--",
                label=f"threshold ({'>' if ev.direction == 'greater' else '<'} {ev.threshold:.4g})")
    ax1.set_xlabel(f"score: {ev.score}")
    ax1.set_ylabel("density (count trials)")
    ax1.set_yscale("log")
    legend_below(ax1)
    ax1.set_title(f"{res.extra.get('score', ev.score)}; {s0.size} + {s1.size} count trials")
    path_pts = pd["path"]
    cur = "μ" if res.currency == "mu" else "ε"
    if path_pts:
        x = [p["trials"] for p in path_pts]
        y = [p["lower"] for p in path_pts]
        ax2.plot(x, y, "o-", label=f"{cur}_lower ({pd['path_kind']})")
    if res.certified is not None:
        ax2.axhline(res.certified, color="r", label=f"certificate {res.certified:.4g}")
    # the panel is scaled to the certificate and the bounds, not to the ceiling (which can be
    # ten times the certificate and would flatten what matters); the ceiling leaves the top
    top = 1.3 * max([res.certified or 0.0] + [p["lower"] for p in path_pts] + [1e-9])
    if path_pts:
        xs = np.unique(np.geomspace(max(2, min(x)), max(x), 30).astype(np.int64))
        cur_name = "mu" if res.currency == "mu" else "epsilon"
        ceil = [ceiling(int(v), confidence=res.confidence,
                        selection_fraction=res.score_audit.selection_fraction, currency=cur_name,
                        delta=res.score_audit.delta, alpha_divisor=pd.get("alpha_divisor", 1))
                for v in xs]
        off = max(ceil) > top
        ax2.plot(xs, ceil, ":", color="gray", label="ceiling (zero errors)"
                 + (f"; above {top:.3g}: off the panel" if off else ""))
        ax2.set_xscale("log")
    ax2.set_ylim(0, top)
    ax2.set_xlabel("trials per side")
    ax2.set_ylabel(f"{cur} lower bound at {res.confidence:g}")
    legend_below(ax2)
    ax2.grid(alpha=0.3)
    _save(fig, path)
    plt.close(fig)


__all__ = ["plot_audit", "prefix_path"]
