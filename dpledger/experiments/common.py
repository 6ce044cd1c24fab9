"""The experiment runner and shared helpers (thinning grids, tables, plots, claims)."""
from __future__ import annotations

import csv
import io
import itertools
import math
import os
import sys
from itertools import pairwise
from dataclasses import dataclass, field
from typing import Any, Sequence

from dpledger.accounting.schema import write_json_atomic
from dpledger.errors import DpledgerError
from dpledger.experiments.claims_table import claims_markdown
from dpledger.experiments.overrides import NO_OVERRIDES, Overrides, check_overrides
from dpledger.plots import at_least_zero, draw_bounds, legend_outside, report_bound_curves
from dpledger.sweep import RunConfig, executor_for, run_sweep

QUICK_T = 20_000
QUICK_R = 3


def thin(grid: Sequence, quick: bool) -> list:
    """Ends and middle of a grid in quick mode."""
    grid = list(grid)
    if not quick or len(grid) <= 3:
        return grid
    return [grid[0], grid[len(grid) // 2], grid[-1]]


def horizon(T: int, quick: bool) -> int:
    return min(T, QUICK_T) if quick else T


def runs(R: int, quick: bool) -> int:
    return min(R, QUICK_R) if quick else R


@dataclass
class Claim:
    """A qualitative claim of the paper, and whether the reproduction confirms it.

    ``outside``: why the run that was made lies outside the setting the paper states the claim
    in (an override: a custom instance, a privacy level the paper did not run); such a claim is
    never reported as confirmed or not, only as not applicable, with what this run showed."""

    text: str
    confirmed: bool | None          # None: not testable at this size, or outside (below)
    evidence: str
    outside: str | None = None
    decides: str | None = None      # the one number that decides it (the claims table's
                                    # column); default: the first clause of the evidence

    def __post_init__(self):
        if self.outside and self.confirmed is not None:
            raise ValueError("a claim outside the paper's setting is neither confirmed nor not")

    @classmethod
    def judged(cls, text: str, ok: bool, evidence: str, outside: str | None = None) -> "Claim":
        """The claim judged on this run: confirmed or not, or — outside the paper's setting —
        not applicable, with whether it held on this run in its evidence."""
        if outside:
            return cls(text, None, f"{evidence} (on this run it {'holds' if ok else 'fails'})",
                       outside)
        return cls(text, bool(ok), evidence)

    @classmethod
    def missing(cls, text: str, what: str) -> "Claim":
        """A claim this run cannot judge: ``what`` was not run (e.g. a policy left out by
        --policies)."""
        return cls(text, None, f"{what} (0 cells to judge)")

    def line(self) -> str:
        if self.outside:
            mark = f"not applicable: outside the paper's setting ({self.outside})"
        else:
            mark = {True: "confirmed", False: "NOT confirmed",
                    None: "not testable here"}[self.confirmed]
        return f"- {self.text} — **{mark}**: {self.evidence}"


@dataclass
class Summary:
    table: list[dict]
    plots: list[str]
    claims: list[Claim]
    notes: list[str] = field(default_factory=list)


def final_regret(rep: dict) -> tuple[float, float]:
    r = rep["regret"]
    return r["final_mean"], (r["final_std"] or 0.0)


def ratio_band(num: float, half_num: float, den: float, half_den: float) -> tuple[float, float]:
    """num/den and its 95 % half-band by the delta method, num and den independent estimates
    with 95 % half-bands ``half_num``, ``half_den``: half = √(h_num² + (num/den)²·h_den²)/|den|
    (first order; it understates when den's band reaches 0).  NaN when den is 0."""
    if den == 0 or not math.isfinite(den):
        return math.nan, math.nan
    r = num / den
    return r, math.sqrt(half_num ** 2 + (r * half_den) ** 2) / abs(den)


def privacy_row(rep: dict, delta: str = "1e-06") -> dict:
    p = rep["privacy"]
    return {
        "theorem_pure_eps": p["theorem"]["pure_epsilon"],
        "theorem_gdp_mu": p["theorem"]["gdp_mu"],
        "certificate_pure_eps": p["certificate"]["pure_epsilon"],
        "certificate_gdp_mu": p["certificate"]["gdp_mu"],
        "certificate_eps_at_1e-6": p["certificate"]["epsilon_at_delta"].get(delta),
        "realized_pure_eps": p["realized"]["pure_epsilon"],
        "realized_gdp_mu": p["realized"]["gdp_mu"],
        "checks_ok": p["checks"]["realized_le_certificate"] and (
            p["checks"]["certificate_le_theorem"] or bool(p["checks"].get("theorem_finding"))),
    }


def run_experiment(module, out: str, quick: bool = False, workers: int = 1,
                   scheduler: str | None = None, quiet: bool = False,
                   cell_runs: int | None = None, overrides: Overrides | None = None) -> dict:
    """Run ``module``'s sweep (its paper setting, with ``overrides`` applied) and write
    experiment.json, table.csv, table.md, claims.md and the plots into ``out``.  Every run.json
    and experiment.json record the overrides (``"overrides"``, in flag names)."""
    ov = overrides or NO_OVERRIDES
    check_overrides(module, ov)
    configs: list[RunConfig] = module.configs(quick, ov)
    if not configs:
        raise DpledgerError(f"{module.NAME}: these overrides leave nothing to run "
                            f"({ov.describe()})")
    executor = executor_for(workers, scheduler)     # a bad scheduler: refused before any folder
    made = not os.path.exists(out)
    os.makedirs(out, exist_ok=True)
    cell = cell_runs or (1 if quick else 5)
    try:
        reports = run_sweep(configs, out, executor, cell_runs=cell, quiet=quiet,
                            extra={"experiment": {"name": module.NAME, "quick": quick,
                                                  "overrides": ov.to_json()}})
    except BaseException:
        if made:
            _remove_if_empty(out)       # refused (memory) or stopped before its first cell
        raise
    summary: Summary = module.summarize(reports, out, quick, ov)
    meta = {"experiment": module.NAME, "title": module.TITLE, "quick": quick,
            "overrides": ov.to_json(),
            **({"config": module.CONFIG} if getattr(module, "CONFIG", None) else {}),
            "configs": [c.to_json() for c in configs], "choices": getattr(module, "CHOICES", []),
            "notes": summary.notes, "claims": [c.__dict__ for c in summary.claims],
            "table": summary.table}
    write_json_atomic(os.path.join(out, "experiment.json"), meta)
    _write_table(summary.table, out)
    with open(os.path.join(out, ".claims.md.tmp"), "w") as fh:
        fh.write(f"# {module.TITLE}{' (quick)' if quick else ''}\n\n")
        # one table first (claim, verdict, the deciding number, a link), the numbers below
        top, full = claims_markdown(summary.claims) if summary.claims else ("", "")
        fh.write(top + "\nFull numbers:\n\n" if top else "")
        fh.write(f"Size of this reproduction: {_sizes(configs)}.\n\n")
        if ov.any():
            fh.write(f"Overridden: {ov.describe()}. Claims are judged on this run; a claim "
                     "judged outside the setting the paper states it in is reported as not "
                     "applicable, with what this run showed.\n\n")
        fh.write(full or "No claims: this experiment states none to check (see the notes).\n")
        if getattr(module, "CHOICES", None):
            # the choices describe the full experiment; a quick run's sizes are the line above
            fh.write("\nSettings the paper does not state (our choices"
                     + (" for the full experiment; this --quick run used the sizes stated above"
                        if quick else "")
                     + ("; the overrides above replace some of them" if ov.any() else "")
                     + "):\n")
            fh.write("\n".join(f"- {c}" for c in module.CHOICES) + "\n")
        if summary.notes:
            fh.write("\nNotes:\n" + "\n".join(f"- {n}" for n in summary.notes) + "\n")
        ratios = _bound_ratios(reports)
        if ratios:
            fh.write("\nMeasured regret at T ÷ each bound the figures draw (an upper bound "
                     "holds where the ratio is ≤ 1, a lower bound is met where it is ≥ 1; "
                     "asymptotic ones speak of T → ∞):\n" + "\n".join(ratios) + "\n")
    os.replace(os.path.join(out, ".claims.md.tmp"), os.path.join(out, "claims.md"))
    if not quiet:
        # a short summary on the terminal (the claims); the full table goes to the files
        sys.stdout.write(f"{module.TITLE}{' (quick)' if quick else ''}: {_sizes(configs)}\n")
        if ov.any():
            sys.stdout.write(f"overridden: {ov.describe()}\n")
        for c in summary.claims:
            sys.stdout.write(c.line() + "\n")
        if summary.table:
            sys.stdout.write(f"full table ({len(summary.table)} rows, "
                             f"{len(_columns(summary.table))} columns): {out}/table.md, "
                             "table.csv\n")
        sys.stdout.write(f"wrote {out}/experiment.json, table.csv, table.md, claims.md, runs/*.json"
                         + "".join(f", {os.path.basename(p)}" for p in summary.plots) + "\n")
    return {"reports": reports, "summary": summary, "meta": meta}


def _bound_ratios(reports: dict) -> list[str]:
    """One line per setting: its mean regret at T and that regret ÷ each drawable bound."""
    from dpledger.plots import regret_over_bounds
    out = []
    for label, rep in reports.items():
        parts = [f"{r:.3g} × {b.label} ({b.direction}, {v:.4g})"
                 for b, v, r in regret_over_bounds(rep)]
        if parts:
            out.append(f"- {label}: regret {rep['regret']['final_mean']:.4g} = "
                       + "; ".join(parts))
    return out


def _remove_if_empty(folder: str) -> None:
    """Remove ``folder`` and its subfolders if no file is in them (a refused or interrupted
    experiment leaves no empty output folder; finished cells are kept, to be reused)."""
    for _root, _, files in os.walk(folder):
        if files:
            return
    for root, _dirs, _ in sorted(os.walk(folder), key=lambda w: -len(w[0])):
        try:
            os.rmdir(root)
        except OSError:
            return


def _sizes(configs: Sequence[RunConfig]) -> str:
    """T and runs per setting as actually simulated (claims.md states them, issue 13)."""
    def span(values):
        vs = sorted(set(values))
        return f"{vs[0]:,}" if len(vs) == 1 else f"{vs[0]:,} to {vs[-1]:,}"
    return (f"{len(configs)} setting{'s' if len(configs) != 1 else ''}, T = "
            f"{span(c.horizon for c in configs)} rounds, "
            f"{span(c.runs for c in configs)} runs per setting")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    return "" if v is None else str(v)


def _columns(rows: list[dict]) -> list[str]:
    """Union of the rows' keys, in first-seen order (rows of one table may differ)."""
    return list(dict.fromkeys(k for r in rows for k in r))


def _markdown(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = _columns(rows)
    out = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    for r in rows:
        out += "| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |\n"
    return out


def _write_table(rows: list[dict], out: str) -> None:
    if not rows:
        return
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=_columns(rows))
    w.writeheader()
    for r in rows:
        w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    for name, text in (("table.csv", buf.getvalue()), ("table.md", _markdown(rows))):
        tmp = os.path.join(out, f".{name}.tmp")
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, os.path.join(out, name))


def plot_regret_panels(groups: dict[str, list[tuple[str, dict]]], path: str, title: str,
                       bounds: bool = True) -> str:
    """One panel per group (e.g. per ε), one line per policy with its 95 % band; with
    ``bounds`` (default), the regret bounds of each policy on its instance
    (:func:`dpledger.plots.report_bound_curves`: upper dotted in its colour, lower dashed in
    grey, asymptotic ones labelled), the axis cut at 1.3 × the highest band."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(groups)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    colours: dict[str, str] = {}         # one colour per label in every panel: one legend
    # the grid may hold more axes than groups (the last row's spare ones stay empty)
    for ax, (gname, lines) in zip(axes.ravel(), groups.items(), strict=False):
        top, drawn = 0.0, []
        for label, rep in lines:
            c = rep["regret"]["curve"]
            colour = colours.setdefault(label, f"C{len(colours) % 10}")
            ax.plot(c["t"], c["mean"], label=label, color=colour)
            ax.fill_between(c["t"], at_least_zero(c["lo"]), c["hi"], alpha=0.2, color=colour)
            top = max(top, max(c["hi"]))
            if bounds:
                drawn.append((label, colour, report_bound_curves(rep)))
        if bounds:
            draw_bounds(ax, drawn, 1.3 * top)
        ax.set_xscale("log")
        ax.set_title(gname, fontsize=9)
        ax.set_xlabel("round t")
        ax.set_ylabel("pseudo-regret")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    fig.suptitle(title + "; bands cut at 0", fontsize=10)
    fig.tight_layout()
    handles = {}
    for ax in axes.ravel()[:n]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    legend_outside(fig, handles=list(handles.values()), labels=list(handles), fontsize=7,
                   bbox_to_anchor=(1.0, 0.95))
    _save(fig, path)
    plt.close(fig)
    return path


def plot_tradeoff(series: dict[str, list[tuple[float, float, float]]], path: str, xlabel: str,
                  title: str, logx: bool = True, extra: dict | None = None,
                  logy: bool = False) -> str:
    """Final regret (mean ± 1.96·std/√R) against a privacy parameter, one line per series."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for name, pts in series.items():
        pts = sorted(pts)
        # the lower bar stops at 0 (regret is never negative)
        low = [min(p[2], max(p[1], 0.0)) for p in pts]
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[low, [p[2] for p in pts]],
                    marker="o", capsize=3, label=name)
    for style, (name, (xs, ys)) in zip(itertools.cycle(("k--", "k:", "k-.")), (extra or {}).items()):
        ax.plot(xs, ys, style, label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("pseudo-regret at T")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    legend_outside(ax, fontsize=7)
    _save(fig, path)
    plt.close(fig)
    return path


def _save(fig, path: str) -> None:
    tmp = path + ".tmp.png"
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)
    finally:                    # a failed save leaves no temp file behind
        if os.path.exists(tmp):
            os.unlink(tmp)


def new_figure(ncols: int = 1, width: float = 6.0, height: float = 4.0):
    """A figure with ``ncols`` axes side by side (Agg backend): (figure, list of axes)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, list(axes[0])


def finish_figure(fig, axes, path: str, title: str | None = None, legend: int = 7) -> str:
    """A grid and a legend on every axis, an optional title, saved atomically and closed."""
    import matplotlib.pyplot as plt
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=legend)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def compare_all(pairs) -> tuple[bool, str]:
    """:func:`compare_less` over (a, b, name_a, name_b) pairs: (every a below its b, "k/n; "
    followed by each pair's evidence)."""
    results = [compare_less(*p) for p in pairs]
    oks = [ok for ok, _ in results]
    return all(oks), f"{sum(oks)}/{len(oks)}; " + "; ".join(ev for _, ev in results)


def non_increasing(points) -> bool:
    """(level, mean, band) points sorted by level: each mean at most the previous one plus both
    95 % bands, and the last below the first (a trend the bands do not contradict)."""
    return (all(a[1] >= b[1] - a[2] - b[2] for a, b in pairwise(points))
            and points[0][1] > points[-1][1])


def band(rep: dict) -> float:
    R = rep["runs"]
    std = rep["regret"]["final_std"] or 0.0
    return 1.96 * std / math.sqrt(R)


def compare_less(a: dict, b: dict, name_a: str, name_b: str) -> tuple[bool, str]:
    """Is a's final regret below b's?  Evidence with means, 95 % bands and whether they separate."""
    ma, mb = a["regret"]["final_mean"], b["regret"]["final_mean"]
    ba, bb = band(a), band(b)
    sep = "bands separate" if (ma + ba < mb - bb or mb + bb < ma - ba) else "bands overlap"
    return ma < mb, f"{name_a} {ma:.4g} ± {ba:.2g} vs {name_b} {mb:.4g} ± {bb:.2g} ({sep})"


# -- calibration to a GDP budget (issue #7: ou-2024, hu-2025) -----------------------------------
MATCHINGS = ("theorem", "certificate")


def gdp_mu_of(policy: str, params: dict, T: int, K: int, basis: str) -> float:
    """GDP μ of ``policy(params)`` at (T, K) by its ``basis``: "theorem" (the paper's bound,
    ``theorem(T, K).gdp_mu``) or "certificate" (the ledger's worst case: the largest μ over the
    certificate's candidate compositions, as ``privacy.certificate.gdp_mu`` of run.json)."""
    from dpledger.policies.registry import make_policy
    pol = make_policy(policy, **params)
    if basis == "theorem":
        mu = pol.theorem(T, K).gdp_mu
    elif basis == "certificate":
        cert = pol.certificate(T, K)
        mus = [c.gdp_mu() for c in cert.compositions if not c.is_empty()]
        mu = max(mus) if mus else 0.0
    else:
        raise ValueError(f"basis must be 'theorem' or 'certificate', got {basis!r}")
    if mu is None:
        # a user's choice (a TOML's calibrate, a comparison's policy): one line, exit 2
        raise DpledgerError(f"{policy} states no GDP μ by its {basis}: a μ budget calibrates "
                            "only policies whose privacy is Gaussian (GDP), e.g. mts-gaussian "
                            "or dp-ts-ucb")
    return float(mu)


def calibrate_gdp(policy: str, params: dict, name: str, budget: float, basis: str, T: int,
                  K: int, lo: float = 1e-6, hi: float = 1e12) -> float:
    """The smallest value of parameter ``name`` (μ decreasing in it, e.g. M-TS-Gaussian's c) whose
    μ by ``basis`` meets ``budget`` (bisection; the result always meets it)."""
    from dpledger.accounting.calibration import smallest_parameter
    return smallest_parameter(
        lambda v: gdp_mu_of(policy, {**params, name: v}, T, K, basis) <= budget, lo, hi)


def curve_at(rep: dict, t: float) -> float:
    """Mean regret at round t, interpolated on the stored (log-spaced) curve."""
    import numpy as np
    c = rep["regret"]["curve"]
    return float(np.interp(t, c["t"], c["mean"]))
