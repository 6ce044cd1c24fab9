"""Text summary of a run.json (used by ``run`` and ``show``)."""
from __future__ import annotations


def _fmt(v) -> str:
    if v is None:
        return "—"
    return f"{v:.6g}"


def _up(v) -> str:
    """A privacy number, rounded toward less privacy (dpledger.outward)."""
    from dpledger.outward import up
    return "—" if v is None else up(v)


from dpledger.errors import counted as _n


def summary_text(rep: dict) -> str:
    """The text a user reads.  Numbering (docs/concepts.md, "Numbering"): rounds count from 1,
    runs, arms and an arm's observations from 0, as in run.json; the line that shows all four
    says so."""
    pol, env, priv = rep["policy"], rep["environment"], rep["privacy"]
    params = ", ".join(f"{k}={v!r}" for k, v in pol["params"].items())
    reg = rep["regret"]
    seed = (f"seed {rep['seed']}" if rep.get("seed") is not None
            else "bits from the OS entropy (not reproducible)")
    ctx = rep.get("contextual")
    unit = "arm"
    if isinstance(ctx, dict):
        lines = _contextual_head(rep, params, seed)
        unit = "stream"
    else:
        lines = [f"{pol['name']}({params}) [{pol['provenance']}] on {env['name']} "
                 f"means={[round(m, 4) for m in env['means']]}, T={rep['horizon']}, "
                 f"{_n(rep['runs'], 'run')}, " + seed,
                 f"regret at T: mean {reg['final_mean']:.6g}, std {_fmt(reg['final_std'])}"]
    deltas = priv["deltas"]
    d = min(deltas, key=float)
    real = priv["realized"]
    w = real.get("worst_reward")
    if w:
        where = ("log row" if env.get("name") == "replay" and unit == "stream" else "round")
        noun = (rep.get("privacy_unit") or {}).get("unit", "reward")
        lines.append(f"worst-off {noun}: observation {w.get('index')} of {unit} {w.get('arm')} in "
                     f"run {w.get('run')} (these count from 0), observed at {where} "
                     f"{w.get('round')} ({where}s count from 1)")
    cols = [d]
    stated = priv["theorem"].get("approx_dp")      # an (ε, δ) theorem: its δ's column too
    if stated:
        from dpledger.accounting.schema import delta_key
        k = delta_key(stated["delta"])
        if k in deltas and k != d:
            cols.append(k)
    header = f"  {'':12s} {'pure ε':>10s} {'GDP μ':>10s}" + "".join(
        f" {'ε(δ=' + c + ')':>16s}" for c in cols)
    pu = rep.get("privacy_unit") or {}
    lines.append(f"privacy (per {pu.get('unit', 'reward')}, worst case):")
    lines.append(header)
    for name in ("theorem", "certificate", "realized"):
        b = priv[name]
        lines.append(f"  {name:12s} {_up(b['pure_epsilon']):>10s} {_up(b['gdp_mu']):>10s}"
                     + "".join(f" {_up(b['epsilon_at_delta'][c]):>16s}" for c in cols))
    lines.append(f"  realized: {real['label'].split(':')[0]}")
    for what, label in (real.get("upper_bounds") or {}).items():
        lines.append(f"  realized {what} is an upper bound ({label.removeprefix('bound: ')}), "
                     "not the exact maximum")
    chk = priv["checks"]
    mark = {True: "holds", False: "VIOLATED"}
    lines.append(f"checks: realized ≤ certificate {mark[chk['realized_le_certificate']]}; "
                 f"certificate ≤ theorem {mark[chk['certificate_le_theorem']]}")
    if chk.get("promise_finding"):
        lines.append(f"  {chk['promise_finding']}")
    elif chk.get("promise_kept"):
        lines.append("  the paper's promise holds too (certificate ≤ the paper's theorem)")
    if chk.get("inconclusive"):
        lines.append("  inconclusive (a realized upper bound above the certificate): "
                     + ", ".join(chk["inconclusive"]))
    for cur, ratio in chk.get("certificate_over_theorem", {}).items():
        if ratio < 1 - 1e-9:
            lines.append(f"  note: certificate/theorem = {ratio:.4g} in {cur} (the paper's bound "
                         "is looser than the release schedule needs)")
    led = rep["ledger"]
    n_comp = led.get("distinct_compositions")
    comps = (_n(n_comp, "distinct per-reward composition") if n_comp is not None else
             "per-reward compositions not counted (" + led.get("distinct_compositions_status", "")
             .removeprefix("skipped:") + ")")
    lines.append(f"ledger: {_n(led['rows'], 'record')}, "
                 f"{_n(led['distinct_releases'], 'distinct release')}, {comps}, "
                 f"{_n(led['noise_draws'], 'noise draw')}")
    comp = real["composition"]
    if comp:
        parts = ", ".join(f"{c['count']}× {c['release']['kind']}("
                          + ", ".join(f"{k}={v:.4g}" for k, v in c['release'].items() if k != 'kind')
                          + ")" for c in comp)
        lines.append(f"worst reward's releases: {parts}")
    return "\n".join(lines) + "\n"


def _contextual_head(rep: dict, params: str, seed: str) -> list[str]:
    """The first lines of a contextual run's summary: policy, environment, model, delay and
    privacy model; regret (or the replayed reward) and the mean reward against uniform play."""
    pol, env, ctx, reg, rew = (rep["policy"], rep["environment"], rep["contextual"],
                               rep["regret"], rep.get("reward") or {})
    what = env.get("dataset") or env["name"]
    lines = [f"{pol['name']}({params}) [{pol['provenance']}] on {env['name']} ({what}), "
             f"K={env['arms']}, d={env['dim']}, {ctx['model']} model "
             f"({_n(ctx['streams'], 'stream')}), delay {ctx['delay']}, T={rep['horizon']}, "
             f"{_n(rep['runs'], 'run')}, {seed}",
             f"privacy model: {ctx['privacy_model']}"]
    pu = rep.get("privacy_unit") or {}
    if pu.get("relation"):
        lines.append(f"privacy unit: {pu['relation']}")
    if pu.get("log_rows"):
        lines.append(f"  the log's rows: {pu['log_rows'].split(':')[0]} (one changed row can "
                     "move every later record: docs/concepts.md#privacy-unit)")
    if "final_mean" in reg:
        lines.append(f"regret at T: mean {reg['final_mean']:.6g}, std {_fmt(reg['final_std'])}")
    else:
        lines.append("regret: " + str(reg.get("status", "")).split(":", 1)[-1].split(";")[0])
    if rew.get("accepted_rows") is not None:
        acc = rew["accepted_rows"]
        lines.append(f"replay: accepted rows per run {min(acc)}–{max(acc)} (mean "
                     f"{sum(acc) / len(acc):.6g}) of {rep['horizon']}")
    if rew:
        lines.append(f"mean reward {_fmt(rew.get('mean_reward'))}, uniform play "
                     f"{_fmt(rew.get('uniform_mean_reward'))}, normalised to uniform "
                     f"{_fmt(rew.get('normalised_to_uniform'))}")
    if ctx.get("delay_note"):
        lines.append("note: " + ctx["delay_note"])
    return lines
