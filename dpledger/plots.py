"""Plots (matplotlib, Agg backend): regret with its band, ε(δ) curves, per-reward privacy."""
from __future__ import annotations

import math
import os
import warnings
from typing import Sequence


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: str) -> None:
    """Write ``fig`` to ``path`` atomically (a temp file in the same folder, then a rename); on
    any failure the temp file is removed.  The CLI checks the path and its extension (one of
    :data:`dpledger.inputs.PLOT_EXTENSIONS`; none = PNG) before any work starts."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{os.path.basename(path)}")
    try:
        with warnings.catch_warnings():
            # a label character the font lacks (a user's --labels text) is drawn as a box;
            # matplotlib's per-glyph warning is noise in front of the user, not an error
            warnings.filterwarnings("ignore", message=r"Glyph .* missing from font")
            fig.savefig(tmp, dpi=120, bbox_inches="tight",
                        format=os.path.splitext(path)[1][1:].lower() or "png")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def plot_regret(reports: Sequence[dict], path: str, labels: Sequence[str] | None = None,
                bounds: bool = False) -> None:
    """Mean pseudo-regret against rounds with the 95 % band, one line per report.  With
    ``bounds``, also the regret bounds a plot may draw (:func:`~dpledger.policies.regret_bounds.
    drawable`: problem-dependent, with a value) re-evaluated along t: each report's upper
    bounds dotted in its colour, the lower bounds of its instance and privacy model dashed in
    grey (once per distinct bound), every asymptotic one labelled "(asymptotic)"."""
    for rep in reports:
        if "curve" not in rep["regret"]:      # a replay: the log has no counterfactual rewards
            from dpledger.errors import DpledgerError
            raise DpledgerError(f"{rep['policy']['name']} on {rep['environment']['name']} has no "
                                "regret curve to plot (" + str(rep["regret"].get("status", ""))
                                .split(":", 1)[-1].split(";")[0] + ")")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.2) if not bounds else (7.6, 4.6))
    curves = [_bound_curves(rep) for rep in reports] if bounds else []
    top = 0.0
    for i, rep in enumerate(reports):
        c = rep["regret"]["curve"]
        label = labels[i] if labels else _label(rep)
        line, = ax.plot(c["t"], c["mean"], label=label)
        ax.fill_between(c["t"], at_least_zero(c["lo"]), c["hi"], alpha=0.25)
        top = max(top, max(c["hi"]))
        for b, xs, ys in curves[i] if bounds else ():
            if b.direction == "upper":
                _bound_line(ax, xs, ys, 1.3 * top, f"{label}: {b.label}, upper", ":",
                            line.get_color())
    if bounds:
        _lower_lines(ax, curves, 1.3 * top)
        ax.set_ylim(0, 1.3 * top if top > 0 else None)
    ax.set_xscale("log")
    runs = sorted({int(rep["runs"]) for rep in reports})
    # the band's width depends on R: say how many runs each curve averages (issue 13)
    size = (f"{runs[0]} run{'s' if runs[0] != 1 else ''}" + (" each" if len(reports) > 1 else "")
            if len(runs) == 1 else "R = " + ", ".join(str(int(r["runs"])) for r in reports)
            + " runs (in legend order)")
    _finish(fig, ax, path, "round t", "pseudo-regret",
            f"{size}; band = mean ± 1.96·std/√R, cut at 0", fontsize=8 if not bounds else 6.5)


def report_bound_curves(rep: dict) -> list:
    """:func:`_bound_curves` of a run.json, or [] where it has none to draw — a contextual or
    replayed run, a fixed reward table, a policy whose bounds cannot be evaluated: what an
    experiment's figure draws for every policy it runs (issue 34 §5)."""
    from dpledger.errors import DpledgerError
    if "curve" not in rep.get("regret", {}):
        return []
    if rep.get("contextual") is not None:
        return _linear_curves(rep)
    try:
        return _bound_curves(rep)
    except (DpledgerError, KeyError):
        return []


def regret_over_bounds(rep: dict) -> list[tuple[object, float, float]]:
    """(bound, its value at T, measured mean regret at T ÷ that value) for every drawable bound
    of a run.json's policy on its instance ([] where :func:`report_bound_curves` has none):
    below 1 under an upper bound, above 1 over a lower one, asymptotic ones as T → ∞."""
    from dpledger.errors import DpledgerError
    if "curve" not in rep.get("regret", {}):
        return []
    m = float(rep["regret"]["final_mean"])
    if rep.get("contextual") is not None:
        return [(b, b.value, m / b.value) for b, _, _ in _linear_curves(rep) if b.value > 0]
    from dpledger.policies.registry import make_policy
    from dpledger.policies.regret_bounds import bounds_for_policy, drawable
    from dpledger.policies.reward_families import RewardInstance
    from dpledger.verify import env_from_json
    try:
        inst = RewardInstance.from_environment(env_from_json(rep["environment"]))
        policy = make_policy(rep["policy"]["name"], **rep["policy"]["params"])
        _, at_T = bounds_for_policy(policy, inst, int(rep["horizon"]))
    except (DpledgerError, KeyError):
        return []
    return [(b, b.value, m / b.value) for b in at_T if drawable(b) and b.value > 0]


def _linear_curves(rep: dict) -> list:
    """A contextual run's drawable bounds: Theorem 5 on a Gaussian linear-fixed run
    (:func:`~dpledger.policies.regret_bounds.linear_environment_bounds`), else none."""
    from dpledger.errors import DpledgerError
    from dpledger.policies.regret_bounds import linear_environment_bounds
    try:
        return linear_environment_bounds(rep["environment"], int(rep["horizon"]),
                                         rep["regret"]["curve"]["t"])
    except (DpledgerError, KeyError):
        return []


def draw_bounds(ax, lines: Sequence[tuple[str, object, list]], top: float) -> None:
    """On a regret axis: each line's upper bounds dotted in its colour, the distinct lower
    bounds dashed in greys (:func:`plot_regret`'s styles), the axis cut at ``top``."""
    for label, colour, curves in lines:
        for b, xs, ys in curves:
            if b.direction == "upper":
                _bound_line(ax, xs, ys, top, f"{label}: {b.label}, upper", ":", colour)
    _lower_lines(ax, [curves for _, _, curves in lines], top)
    if top > 0:
        ax.set_ylim(0, top)


def _bound_curves(rep: dict) -> list:
    """The drawable regret bounds of a run.json's policy and instance along its curve's t."""
    from dpledger.errors import DpledgerError
    from dpledger.policies.registry import make_policy
    from dpledger.policies.regret_bounds import bound_curves
    from dpledger.policies.reward_families import RewardInstance
    from dpledger.verify import env_from_json
    if rep["environment"].get("name") == "table":
        raise DpledgerError("--bounds: regret bounds need a stochastic reward family "
                            "(bernoulli, truncexp or beta); a fixed reward table has none")
    inst = RewardInstance.from_environment(env_from_json(rep["environment"]))
    try:
        policy = make_policy(rep["policy"]["name"], **rep["policy"]["params"])
    except DpledgerError as exc:
        raise DpledgerError(f"--bounds: {exc}") from None
    return bound_curves(policy, inst, int(rep["horizon"]), rep["regret"]["curve"]["t"])


_LOWER_STYLES = ("--", (0, (5, 2, 1, 2)), (0, (1, 1)), (0, (8, 3)))


def _bound_line(ax, xs, ys, top: float, label: str, style, colour) -> None:
    """One bound's curve; a curve entirely above the plotted range says so in its label (the
    axis stops at 1.3 × the highest regret band, so a loose bound does not flatten the data)."""
    finite = [y for y in ys if y == y]
    if finite and min(finite) > top:
        label += " (off scale)"
    ax.plot(xs, ys, ls=style, lw=1.1, color=colour, label=label)


def _lower_lines(ax, curves, top: float) -> None:
    """Each distinct lower bound once (reports on one instance and ε share them), in greys."""
    seen: dict[tuple, int] = {}
    for per_report in curves:
        for b, xs, ys in per_report:
            if b.direction != "lower":
                continue
            # a bound's curve identifies it (the same bound at another ε or instance differs)
            key = (b.key, tuple(xs), tuple(ys))
            if key in seen:
                continue
            n = seen[key] = len(seen)
            grey = str(0.15 + 0.12 * (n % 5))
            eps = f", ε = {b.epsilon:g}" if b.epsilon is not None else ""
            _bound_line(ax, xs, ys, top, f"{b.label}{eps}, lower", _LOWER_STYLES[n % 4], grey)


def _label(rep: dict) -> str:
    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in rep["policy"]["params"].items())
    return f"{rep['policy']['name']}({params})"


def at_least_zero(values):
    """A band's lower edge cut at 0: pseudo-regret is never negative, so neither is a band or
    an error bar drawn for it (a normal-approximation band dips below 0 early on)."""
    import numpy as np
    return np.maximum(np.asarray(values, dtype=float), 0.0)


def legend_outside(holder, **legend) -> None:
    """The legend right of the axes (or figure), where it covers no data; the figure is saved
    with a tight bounding box, which takes it in."""
    legend = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "frameon": False, **legend}
    holder.legend(**legend)


def _finish(fig, ax, path: str, xlabel: str, ylabel: str, title: str, **legend) -> None:
    """Labels, legend (outside the axes: :func:`legend_outside`), grid, then write ``path`` and
    close the figure: every plot's ending."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    legend_outside(ax, **legend)
    ax.grid(alpha=0.3, which="both")
    _save(fig, path)
    _plt().close(fig)


def _stream_steps(ax, xs, ys, i: int, many: bool) -> None:
    """One (run, arm) stream's per-reward privacy as a step line (thin and faint when many)."""
    ax.step(xs, ys, where="post", lw=0.8 if many else 1.2, alpha=0.5 if many else 0.8,
            color="tab:blue", label="rewards of one (run, arm) stream" if i == 0 else None)


def plot_curve(series: dict[str, tuple[list[float], list[float]]], path: str, title: str) -> None:
    """ε against δ (log δ axis).  ``series`` keys are ``block/accountant`` (e.g.
    ``certificate/pld``, ``realized/best``).  The best valid curve of each block is drawn thick;
    the individual accountants thin and dashed in the same colour, so the loose bounds do not hide
    the one that counts.  The ε axis stops a little above the best curves: a looser accountant
    that leaves it is cut off and its legend entry says "off scale"."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.6, 4.4))
    colours = {"certificate": "tab:blue", "realized": "tab:green"}
    styles = {"pure": ":", "gdp": "--", "rdp": "-.", "pld": (0, (1, 1))}

    def finite(deltas, eps):
        return [(d, e) for d, e in zip(deltas, eps,
                                       strict=True) if e is not None and math.isfinite(e)]

    best_top = [max(e for _, e in finite(*v)) for k, v in series.items()
                if k.endswith("/best") and finite(*v)]
    top = 1.25 * max(best_top) if best_top else None
    drawn: list[tuple[str, list]] = []      # (label, points) of the lines drawn so far
    for name, (deltas, eps) in series.items():
        pts = finite(deltas, eps)
        if not pts:
            continue
        block, _, acc = name.partition("/")
        colour = colours.get(block, None)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        label = f"{block}: best valid" if acc == "best" else f"{block}: {acc}"
        plain = label
        # a line that lies on one drawn before hides it: the legend says so (issue 25 §5)
        same = [lab for lab, other in drawn if _coincide(pts, other)]
        if same:
            label += f" (= {same[0]})"
        drawn.append((plain, pts))
        if acc == "best":       # realized drawn thinner on top, so an equal certificate shows
            thick = block != "realized"
            ax.plot(xs, ys, color=colour, lw=3.2 if thick else 1.6, marker="o" if thick else "s",
                    ms=3, label=label, zorder=3 if thick else 4)
        else:
            if top is not None and min(ys) > top:
                label += " (off scale)"
            ax.plot(xs, ys, color=colour, lw=0.9, alpha=0.7, ls=styles.get(acc, "--"),
                    label=label)
    ax.set_xscale("log")
    if top is not None:
        ax.set_ylim(0, top)
    _finish(fig, ax, path, "δ", "ε(δ) of the worst-off reward", title, fontsize=7)


def _coincide(a: list, b: list, rel: float = 1e-9) -> bool:
    """Whether two curves' (δ, ε) points are the same, to a relative 1e-9 (one line hides the
    other)."""
    return len(a) == len(b) and all(
        da == db and abs(ea - eb) <= rel * max(abs(ea), abs(eb), 1e-300)
        for (da, ea), (db, eb) in zip(a, b, strict=True))


def plot_per_reward(rounds, values, streams, worst_round, worst_value, path: str, ylabel: str,
                    title: str, cert: float | None) -> None:
    """Per-reward privacy against the round each reward was observed: one step line per
    (run, arm) stream — a value holds from a reward to the next point of its stream — with
    the worst reward marked and the certificate as a line.  Points come sorted by stream, then
    round (``dpledger show``'s ``per_reward``)."""
    import numpy as np
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    cuts = np.flatnonzero(np.diff(streams)) + 1
    many = cuts.size + 1 > 12
    for i, (xs, ys) in enumerate(zip(np.split(rounds, cuts), np.split(values, cuts), strict=True)):
        _stream_steps(ax, xs, ys, i, many)
    ax.scatter([worst_round], [worst_value], color="red", s=40, marker="x", zorder=4,
               label="worst reward")
    if cert is not None:
        ax.axhline(cert, color="black", ls="--", lw=1, label="certificate")
    ax.set_xscale("log")
    _finish(fig, ax, path, "round the reward was observed", ylabel, title, fontsize=8)


def plot_store_rewards(run, arm, start, stop, values, worst: tuple[int, int, int],
                       limit: float | None, path: str, ylabel: str, title: str,
                       max_points: int = 20_000) -> None:
    """A ledger store's per-reward privacy against the observation index: one step line per
    (run, arm) stream — value ``values[p]`` on ``[start[p], stop[p])``, 0 where no record
    touched a reward — with the worst reward marked and the budget as a line.  Beyond
    ``max_points`` ranges an even sample is drawn, plus the worst stream's first ``max_points``
    ranges (a drawing, not a privacy number: the status line gives the worst reward)."""
    import numpy as np
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    stream = np.asarray(run, dtype=np.int64) * (1 << 31) + np.asarray(arm, dtype=np.int64)
    wkey = worst[0] * (1 << 31) + worst[1]
    keep = np.arange(stream.size)
    if keep.size > max_points:
        keep = np.unique(np.r_[np.linspace(0, stream.size - 1, max_points).astype(np.int64),
                               np.flatnonzero(stream == wkey)[:max_points]])
    # a range is followed by 0 where no record touched the next rewards (a gap, or the end
    # of its stream); otherwise its value holds up to the next range drawn
    gap = np.r_[(stream[1:] != stream[:-1]) | (np.asarray(start)[1:] > np.asarray(stop)[:-1]),
                True]
    cuts = np.flatnonzero(np.diff(stream[keep])) + 1
    many = cuts.size + 1 > 12
    for i, sel in enumerate(np.split(keep, cuts)):
        g = sel[gap[sel]]
        xs = np.r_[start[sel], stop[g]]
        ys = np.r_[values[sel], np.zeros(g.size)]
        o = np.argsort(xs, kind="stable")
        xs, ys = xs[o], ys[o]
        _stream_steps(ax, xs, ys, i, many)
    p = np.flatnonzero((stream == wkey) & (start <= worst[2])
                       & (worst[2] < stop))
    if p.size:
        ax.scatter([worst[2]], [values[p[0]]], color="red", s=40, marker="x", zorder=4,
                   label=f"worst reward (run {worst[0]}, arm {worst[1]})")
    if limit is not None:
        ax.axhline(limit, color="black", ls="--", lw=1, label="budget")
    _finish(fig, ax, path, "observation index within its arm", ylabel, title, fontsize=8)
