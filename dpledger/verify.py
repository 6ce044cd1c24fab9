"""``dpledger verify run.json``: re-derive every privacy number without trusting the file.

What is checked, and from what (docs/design.md#interfaces-and-json; issue 12 §6):

* **public parameters** — ``policy.params`` may name only parameters the policy declares
  publicly (a hidden test or speed switch, or an unknown name, makes the run something other
  than a run of the published policy: refused), and must equal the policy's resolved parameters;
* **environment** — rebuilt from its own description (rates, Beta pairs, range, lattice) and
  compared: derived fields such as truncated-exponential means cannot be edited alone;
* **theorem** and **certificate** — recomputed from (policy, parameters, T, K, range);
* **realized** — recomputed from the stored maximal compositions, and, when the ledger file is
  present, from the ledger file itself (its sha256 and size checked first against the values
  run.json recorded when it wrote it): the whole realized block (worst reward, per-run values,
  compositions) and the ledger's counts, with every run's stream lengths summing to T;
* **invariants** — realized ≤ certificate, certificate ≤ theorem (or the theorem's finding);
* **regret curve consistency** — points are the checkpoints of T, final values are the curve's
  last, band = 1.96·std/√R, 0 ≤ mean(t) ≤ t·(largest gap).

Regret values, environment means of a Bernoulli environment and the noise-draw count follow
from the simulation only: ``--resimulate`` reruns it from the stored configuration and seed
through the ``dpledger run`` code path and compares the bytes of run.json and of the ledger
file (R4 makes them identical).
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpledger.accounting.composition import Composition
from dpledger.accounting.schema import dumps, parse_deltas
from dpledger.errors import DpledgerError, InvariantViolation, counted
from dpledger.inputs import (check_run_counts, ledger_file_record,  # noqa: F401 (re-exported)
                             sha256_file)
from dpledger.policies.registry import make_policy, policy_class
from dpledger.policies.simulator import checkpoints, run_certificate
from dpledger.report import (certificate_block, checks, realized_from_ledger, realized_privacy,
                             theorem_block)

_REALIZED_DERIVED = ("pure_epsilon", "pure_epsilon_status", "gdp_mu", "gdp_mu_status", "zcdp_rho",
                     "zcdp_rho_status", "epsilon_at_delta", "epsilon_at_delta_source", "epsilon",
                     "epsilon_status", "composition", "upper_bounds")

# Keys a sweep adds to the run.json it writes (dpledger.sweep): annotations, not results;
# ``--resimulate`` carries them over to the rebuilt run.json.
_ANNOTATIONS = ("label", "tags", "experiment")

# Fields of run.json's ledger block that record where (and whether) the ledger file was
# written — a choice of output, not a result: ``--resimulate`` compares everything else.
_OUTPUT_CHOICE = ("file", "file_status")


# -- the ledger file's record in run.json: dpledger.inputs.sha256_file, ledger_file_record
# (``dpledger run`` writes it, ``verify`` checks it; they live where both import them)


# -- comparisons ------------------------------------------------------------------------------
def _same(a: Any, b: Any, path: str, problems: list[str]) -> None:
    """Recomputed ``a`` against stored ``b`` (numbers within a relative 1e-12)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                problems.append(f"{path}.{k}: present on one side only "
                                f"({'stored' if k in b else 'recomputed'})")
            else:
                _same(a[k], b[k], f"{path}.{k}", problems)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            problems.append(f"{path}: lengths differ (stored {len(b)}, recomputed {len(a)})")
        # the common prefix is compared too: its differences say more than the lengths alone
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _same(x, y, f"{path}[{i}]", problems)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        if not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300):
            problems.append(f"{path}: stored {b!r}, recomputed {a!r}")
    elif a != b:
        problems.append(f"{path}: stored {b!r}, recomputed {a!r}")


def first_difference(stored: Any, rebuilt: Any, path: str = "") -> str | None:
    """The first key path (in stored order) where two JSON values differ exactly, with both
    values; None when equal."""
    if isinstance(stored, dict) and isinstance(rebuilt, dict):
        for k in list(stored) + [k for k in rebuilt if k not in stored]:
            sub = f"{path}.{k}" if path else str(k)
            if k not in rebuilt:
                return f"{sub}: in run.json only"
            if k not in stored:
                return f"{sub}: in the rebuilt run.json only"
            d = first_difference(stored[k], rebuilt[k], sub)
            if d:
                return d
        if list(stored) != list(rebuilt):
            return f"{path or '(top level)'}: keys in another order"
        return None
    if isinstance(stored, list) and isinstance(rebuilt, list):
        # the first difference within the common prefix comes before a length difference
        for i, (x, y) in enumerate(zip(stored, rebuilt, strict=False)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(stored) != len(rebuilt):
            return f"{path}: length {len(stored)} in run.json, {len(rebuilt)} rebuilt"
        return None
    if type(stored) is not type(rebuilt) or stored != rebuilt:
        return f"{path}: run.json has {stored!r}, the resimulation {rebuilt!r}"
    return None


# -- the verdict ------------------------------------------------------------------------------
@dataclass
class Verification:
    """What ``verify`` found (``problems``: empty iff it passes), what it checked and what it
    could not, and notes (e.g. why the ledger file was not used)."""

    problems: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    report: Any = None          # the run.json content checked (verify_run)
    hint: str = " (use --resimulate)"

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """One line: what was checked and what was not."""
        parts = list(self.notes)
        parts.append("checked: " + (", ".join(self.checked) or "nothing"))
        if self.not_checked:
            parts.append("not checked: " + ", ".join(self.not_checked) + self.hint)
        else:
            parts.append("not checked: nothing")
        return "; ".join(parts)


def verify_report(report: Any, ledger=None) -> list[str]:
    """Problems found in a run.json's content (empty when every number re-derives and every
    invariant holds); with ``ledger`` (a :class:`RewardLedger`, the run's ledger file) the
    realized block is re-derived from it too."""
    return _verify(report, ledger, Verification()).problems


def _malformed(exc: Exception) -> DpledgerError:
    return DpledgerError(f"malformed run.json: {exc!r}")


def _verify(report: Any, ledger, v: Verification) -> Verification:
    if not isinstance(report, dict):
        raise DpledgerError("run.json must hold a JSON object")
    if isinstance(report.get("contextual"), dict):
        if report.get("schema_version") != 1:
            raise DpledgerError(f"unsupported schema_version {report.get('schema_version')!r}")
        from dpledger.verify_contextual import verify_contextual
        return verify_contextual(report, ledger, v)
    try:
        if report["schema_version"] != 1:
            raise DpledgerError(f"unsupported schema_version {report['schema_version']!r}")
        pol = report["policy"]
        name, params = pol["name"], pol["params"]
        if not isinstance(params, dict):
            raise TypeError("policy.params must be an object")
        env = report["environment"]
        # rng os: no seed
        T, R = check_run_counts(report, seed_optional=_not_reproducible(report) is not None)
        K = len(env["means"])
        lattice_bits = int(env.get("lattice_bits", 0))
        priv, deltas, stored_realized, comps = privacy_inputs(report)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, DpledgerError):
            raise DpledgerError(f"malformed run.json: {exc}") from None
        raise _malformed(exc) from None
    problems = v.problems

    if refuse_undeclared(name, params, v):
        return v
    policy = make_policy(name, **params)
    _same(policy.resolved_params(T, K), params, "policy.params", problems)
    v.checked.append("public parameters")

    _check_environment(report, env, T, lattice_bits, problems)
    v.checked.append("environment description")
    _check_regret(report, T, R, problems)
    v.checked.append("regret curve consistency")

    theorem = theorem_block(policy.theorem(T, K), deltas)
    _same(theorem, priv["theorem"], "privacy.theorem", problems)
    v.checked.append("theorem")
    certificate = certificate_block(run_certificate(policy, T, K, lattice_bits), deltas)
    _same(certificate, priv["certificate"], "privacy.certificate", problems)
    v.checked.append("certificate")
    realized = realized_from_stored(comps, deltas, policy.adaptive, stored_realized, v)
    if ledger is not None:
        try:
            _check_ledger(report, ledger, policy, T, R, K, deltas, problems)
        except (ValueError, IndexError, TypeError, KeyError, OverflowError) as exc:
            # its hash matched run.json's record, so run.json's record was forged too
            problems.append(f"ledger file: inconsistent, nothing re-derives from it ({exc})")
        else:
            # an independent route to the largest per-reward pure ε and GDP μ² (not the query
            # layer that built the block), so verify cannot agree with a wrong report by design
            from dpledger.accounting.realized import check_realized
            problems += check_realized(ledger, stored_realized)
        v.checked += ["ledger streams vs horizon and runs", "regret curve from ledger file",
                      "realized from ledger file"]

    check_invariants(theorem, certificate, stored_realized, realized, priv["checks"], v)
    v.not_checked[:] = (["environment parameters (beyond the regret curve they shape)",
                         "noise-draw and row counts"] if ledger is not None else
                        ["regret values", "environment parameters", "noise-draw and row counts"])
    return v


def privacy_inputs(report: dict) -> tuple[dict, list[float], dict, list[Composition]]:
    """(privacy block, δ grid, stored realized block, its compositions) of a run.json; a
    missing or malformed field raises KeyError, TypeError or ValueError for the caller."""
    priv = report["privacy"]
    deltas = parse_deltas([float(d) for d in priv["deltas"]])
    stored = priv["realized"]
    return priv, deltas, stored, [Composition.from_json(c) for c in stored["compositions"]]


def refuse_undeclared(name: str, params: dict, v: Verification) -> bool:
    """Public parameters only: a hidden switch (e.g. a noise multiplier, a speed path) or an
    unknown name makes this a run of something other than the published policy — a problem,
    and nothing else is checked (True)."""
    public = [p.name for p in policy_class(name).params_spec if not p.hidden]
    undeclared = [k for k in params if k not in public]
    if not undeclared:
        return False
    v.problems.append(f"policy.params: {', '.join(map(repr, undeclared))} "
                      f"{'is' if len(undeclared) == 1 else 'are'} not a public parameter of "
                      f"{name!r} (public: {', '.join(public) or 'none'}); refusing a run made "
                      "with undeclared parameters")
    v.not_checked[:] = ["anything else (refused at its parameters)"]
    v.hint = ""
    return True


def realized_from_stored(comps: list, deltas, adaptive: bool, stored: dict,
                         v: Verification) -> dict:
    """The realized privacy recomputed from the stored compositions, compared with run.json's."""
    realized = realized_privacy(comps, deltas, adaptive)
    _same({k: realized.get(k) for k in _REALIZED_DERIVED},
          {k: stored.get(k) for k in _REALIZED_DERIVED}, "privacy.realized", v.problems)
    v.checked.append("realized from stored compositions")
    return realized


def check_invariants(theorem: dict, certificate: dict, stored_realized: dict, realized: dict,
                     stored_checks: dict, v: Verification) -> None:
    """``privacy.checks`` recomputed and compared, and realized ≤ certificate ≤ theorem (unless
    the theorem declares a finding) required."""
    problems = v.problems
    recomputed = checks(theorem, certificate, dict(stored_realized, **realized))
    _same(recomputed, stored_checks, "privacy.checks", problems)
    for name_ in ("realized_le_certificate", "certificate_le_theorem"):
        if name_ == "certificate_le_theorem" and recomputed.get("theorem_finding"):
            continue        # reported by the command as a finding about the theorem
        if not recomputed[name_]:
            bad = [d for d in recomputed["details"] if d["check"] == name_ and not d["ok"]]
            problems.append(f"invariant {name_} violated: " +
                            "; ".join(f"{d['what']}: {d['lhs']!r} > {d['rhs']!r}" for d in bad))
    v.checked.append("invariants")


def env_from_json(env: dict, table: np.ndarray | None = None):
    """The environment a run.json describes (a reward table's values are not in run.json:
    ``table`` gives them)."""
    from dpledger.policies import environments as E
    try:
        lo, hi = (float(x) for x in env["range"])
        kind = env["name"]
        if kind == "bernoulli":
            out = E.bernoulli(env["means"], lo, hi)
        elif kind == "truncexp":
            out = E.truncated_exponential(env["rates"], lo, hi)
        elif kind == "beta":
            out = E.beta(env["ab"], lo, hi)
        elif kind == "table":
            if table is None:
                raise DpledgerError("the environment is a reward table, whose values run.json "
                                    "does not hold: pass --table FILE")
            out = E.table(table, lo, hi)
        else:
            raise DpledgerError(f"unknown environment {kind!r} in run.json")
        bits = int(env.get("lattice_bits", 0))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, DpledgerError):
            raise
        raise _malformed(exc) from None
    return out.with_lattice(bits) if bits else out


def _check_environment(report: dict, env: dict, T: int, lattice_bits: int,
                       problems: list[str]) -> None:
    sampler = report.get("sampler", "float")
    if sampler != ("exact" if lattice_bits else "float"):
        problems.append(f"sampler: {sampler!r} but the environment's lattice_bits is "
                        f"{lattice_bits}")
    if env.get("name") == "table":
        shape = env.get("table_shape")
        if not (isinstance(shape, list) and len(shape) == 2 and shape[1] == len(env["means"])
                and isinstance(shape[0], int) and shape[0] >= T):
            problems.append(f"environment.table_shape {shape!r} does not fit "
                            f"{len(env['means'])} arms and horizon {T}")
        return
    _same(env_from_json(env).to_json(), env, "environment", problems)


def _check_regret(report: dict, T: int, R: int, problems: list[str]) -> None:
    """The regret block's internal consistency (its values need the simulation)."""
    try:
        means = np.asarray(report["environment"]["means"], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed(exc) from None
    gap = float(means.max() - means.min()) if means.size else 0.0
    check_regret_curve(report, T, R, gap, "largest gap", problems)


def check_regret_curve(report: dict, T: int, R: int, per_round: float, per_round_name: str,
                       problems: list[str]) -> None:
    """A regret block against itself: the checkpoints of T, band = 1.96·std/√R, the final
    values the curve's last, the mean non-decreasing (every regret term is >= 0) and within
    [0, t·``per_round``] (the largest regret a round can add)."""
    try:
        reg = report["regret"]
        curve = reg["curve"]
        t = [int(x) for x in curve["t"]]
        mean = np.asarray(curve["mean"], dtype=np.float64)
        std = np.asarray(curve["std"], dtype=np.float64)
        stored = {k: curve[k] for k in ("lo", "hi", "band")}
        final_mean, final_std = reg["final_mean"], reg["final_std"]
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed(exc) from None
    pts = checkpoints(T).tolist()
    if t != pts:
        problems.append(f"regret.curve.t: not the checkpoints of horizon {T} "
                        f"(last point {t[-1] if t else None})")
        return
    if not mean.size == std.size == len(t):
        problems.append("regret.curve: mean, std and t differ in length")
        return
    band = 1.96 * std / math.sqrt(R)
    _same({"lo": (mean - band).tolist(), "hi": (mean + band).tolist(), "band": band.tolist()},
          stored, "regret.curve", problems)
    _same(float(mean[-1]), final_mean, "regret.final_mean", problems)
    if R > 1:
        _same(float(std[-1]), final_std, "regret.final_std", problems)
    elif final_std is not None or np.any(std != 0):
        problems.append("regret: one run has no standard deviation (final_std null, std 0)")
    bound = np.asarray(t, dtype=np.float64) * per_round * (1 + 1e-12)
    if np.any(mean < 0) or np.any(mean > bound) or np.any(std < 0):
        problems.append(f"regret.curve: a mean outside [0, t·({per_round_name})] or a negative "
                        "std")
    elif np.any(np.diff(mean) < -1e-9 * np.maximum(np.abs(mean[1:]), 1.0)):
        problems.append("regret.curve.mean decreases (pseudo-regret never does)")


def pulls_from_segments(seg: dict, R: int, K: int, points: np.ndarray) -> np.ndarray:
    """(R, K, P) pull counts N_a(t) of every run at ``points`` from a ledger's index → round
    segments (run, arm, first_index, first_round, stride, length), written independently of
    the simulator's compiled counter.  A segment adds min(length, ⌊(t − first_round)/stride⌋
    + 1) pulls at t ≥ first_round: its full length from the first point at or after its last
    round (a difference array), partial counts at the points inside its span — at most one
    segment of an arm spans a point, so O(S log P + R·K·P)."""
    P = points.size
    run, arm = (np.asarray(seg[c], dtype=np.int64) for c in ("run", "arm"))
    f, s_, n = (np.asarray(seg[c], dtype=np.int64) for c in ("first_round", "stride", "length"))
    stream = run * K + arm
    last = f + s_ * (n - 1)
    i_first = np.searchsorted(points, f, side="left")
    i_last = np.searchsorted(points, last, side="left")
    diff = np.zeros(R * K * (P + 1), dtype=np.int64)
    np.add.at(diff, stream * (P + 1) + i_last, n)
    full = np.cumsum(diff.reshape(R * K, P + 1), axis=1)[:, :P]
    inside = np.maximum(i_last - i_first, 0)
    rep = np.repeat(np.arange(f.size), inside)
    starts = np.cumsum(inside) - inside
    pidx = i_first[rep] + (np.arange(rep.size) - starts[rep])
    partial = np.zeros(R * K * P, dtype=np.int64)
    np.add.at(partial, stream[rep] * P + pidx, (points[pidx] - f[rep]) // s_[rep] + 1)
    return (full + partial.reshape(R * K, P)).reshape(R, K, P)


def _check_regret_from_ledger(report: dict, seg: dict, T: int, R: int, K: int,
                              problems: list[str]) -> None:
    """The regret curve from the ledger's record of the play: pseudo-regret Σ_a gap_a·N_a(t)
    per run (in arm order, as the simulator sums it), then mean and std over runs."""
    curve = report["regret"]["curve"]
    points = checkpoints(T)
    means = np.asarray(report["environment"]["means"], dtype=np.float64)
    gaps = means.max() - means
    pulls = pulls_from_segments(seg, R, K, points)
    regret = np.zeros((R, points.size))
    for a in range(K):
        regret += gaps[a] * pulls[:, a, :]
    mean = regret.mean(axis=0)
    std = regret.std(axis=0, ddof=1) if R > 1 else np.zeros_like(mean)
    # the counts are exact integers: the two sides differ by float rounding only, which is
    # relative to the curve's scale (a std of 1e-16 is a rounded 0), hence an absolute tolerance
    scale = 1e-9 * (1.0 + float(np.max(np.abs(mean), initial=0.0)))
    for k, recomputed in (("mean", mean), ("std", std)):
        stored = np.asarray(curve[k], dtype=np.float64)
        if stored.shape != recomputed.shape:
            problems.append(f"regret.curve.{k}: {stored.size} points, the horizon's "
                            f"checkpoints are {recomputed.size}")
            continue
        bad = np.flatnonzero(np.abs(stored - recomputed) > scale)
        if bad.size:
            i = int(bad[0])
            problems.append(f"regret.curve (from the ledger file).{k}[{i}] (t = {points[i]}): "
                            f"stored {stored[i]!r}, recomputed {recomputed[i]!r} "
                            f"({bad.size} point(s) differ)")


def _check_ledger(report: dict, ledger, policy, T: int, R: int, K: int, deltas,
                  problems: list[str]) -> None:
    """The ledger file against run.json: runs, stream lengths (every run plays T rounds), the
    realized block re-derived with the ledger's public API, and the ledger's counts."""
    streams = ledger.streams()
    runs = sorted({r for r, _ in streams})
    if runs != list(range(R)):
        problems.append(f"ledger file: runs {runs[:5]}{'…' if len(runs) > 5 else ''} "
                        f"(run.json: runs 0 … {R - 1})")
    per_run = np.zeros(max(R, max(runs, default=0) + 1), dtype=np.int64)
    for (r, a), n in streams.items():
        if not 0 <= a < K:
            problems.append(f"ledger file: run {r} has a stream for arm {a}; run.json has {K} "
                            "arms")
            return
        per_run[r] += n
    bad = np.flatnonzero(per_run[:R] != T)
    if bad.size:
        r = int(bad[0])
        problems.append(f"ledger file: run {r} observed {int(per_run[r])} rewards in all; "
                        f"run.json's horizon is {T} ({counted(bad.size, 'run')} differ)")
        return
    seg = ledger.segments
    key = np.asarray(seg["run"], dtype=np.int64) * K + np.asarray(seg["arm"], dtype=np.int64)
    if key.size and (key.min() < 0 or key.max() >= R * K):
        problems.append("ledger file: a segment names a run or arm outside run.json's")
        return
    seg_len = np.bincount(key, weights=np.asarray(seg["length"], dtype=np.float64),
                          minlength=R * K)
    declared = np.zeros(R * K)
    for (r, a), n in streams.items():
        declared[r * K + a] = n
    if not np.array_equal(seg_len, declared):
        problems.append(f"ledger file: the index → round segments do not match the stream "
                        f"lengths (every run must cover rounds 1 … {T})")
        return
    _check_regret_from_ledger(report, seg, T, R, K, problems)
    env = report["environment"]
    stored = report["privacy"]["realized"]
    realized = realized_from_ledger(ledger, deltas, policy.adaptive, list(range(R)),
                                    fixed_table=env.get("name") == "table")
    _same(realized, stored, "privacy.realized (from the ledger file)", problems)
    led = report.get("ledger", {})
    _same(len(ledger.releases), led.get("distinct_releases"),
          "ledger.distinct_releases (from the ledger file)", problems)
    if led.get("distinct_compositions") is not None:
        _same(ledger.n_distinct_compositions(), led.get("distinct_compositions"),
              "ledger.distinct_compositions (from the ledger file)", problems)


# -- the command's work ---------------------------------------------------------------------
def load_run(path: str) -> tuple[bytes, dict]:
    """run.json's bytes and content (bad input: DpledgerError naming the file and what it holds,
    through :func:`dpledger.inputs.load_run_json`; its field-by-field check is left to the
    verification, which reports a tampered field as a finding)."""
    from dpledger.inputs import load_run_json
    report = load_run_json(path, schema=False)
    with open(path, "rb") as fh:
        raw = fh.read()
    return raw, report


def verify_run(path: str, ledger_path: str | None = None, resimulate: bool = False,
               table_path: str | None = None, workers: int = 1,
               log_path: str | None = None) -> Verification:
    """Everything ``dpledger verify`` checks, for the run.json at ``path`` (``table_path``: the
    reward table or contextual .npz of a table run; ``log_path``: the log of a replay run)."""
    raw, report = load_run(path)
    v = Verification(report=report)
    ledger = _ledger_of(path, report, ledger_path, v)
    if isinstance(report.get("contextual"), dict):
        _verify(report, ledger, v)
        _check_data_files(report, table_path, log_path, v)
        if resimulate:
            if v.problems:
                v.notes.append("resimulation skipped: run.json already fails")
            else:
                _resimulate(path, raw, report, table_path, workers, v, log_path)
        return v
    if log_path is not None:
        raise DpledgerError("--log belongs to a replay run (--env replay); this run.json is not one")
    table = None
    if table_path is not None:
        from dpledger.inputs import load_table
        kind = report.get("environment", {}).get("name") if isinstance(
            report.get("environment"), dict) else None
        if kind != "table":       # it would be loaded and then silently not used
            raise DpledgerError(f"--table applies to a run on --env table; {path} is a run on "
                                f"--env {kind}")
        table = load_table(table_path, "--table")
    _verify(report, ledger, v)
    env = report["environment"]
    if table is not None and env.get("name") == "table":
        from dpledger.policies.environments import table as table_env
        rebuilt = table_env(table, *env["range"]).to_json()
        for k in ("table_shape", "table_sha256", "means"):
            _same(rebuilt[k], env.get(k), f"environment.{k} (from --table)", v.problems)
        v.checked.append("reward table")
    if resimulate:
        if v.problems:
            v.notes.append("resimulation skipped: run.json already fails")
        else:
            _resimulate(path, raw, report, table_path, workers, v)
    return v


def _check_data_files(report: dict, table_path: str | None, log_path: str | None,
                      v: Verification) -> None:
    """A contextual table's or a replay log's file against the sha256 run.json recorded."""
    from dpledger.policies.contextual.data import file_sha256, regular_file
    env = report.get("environment", {})
    for option, path, kind, key in (("--table", table_path, "contextual-table", "table_sha256"),
                                    ("--log", log_path, "replay", "log_sha256")):
        if path is None:
            continue
        if env.get("name") != kind:
            raise DpledgerError(f"{option} belongs to a run on --env {kind}; this run.json is "
                                f"on --env {env.get('name')}")
        regular_file(path, option, "the run's data file")
        sha = file_sha256(path)
        if sha != env.get(key):
            v.problems.append(f"{option} {path}: sha256 {sha[:16]}…, run.json recorded "
                              f"{str(env.get(key))[:16]}… (not the run's data)")
        else:
            v.checked.append(f"data file sha256 ({option})")


@dataclass(frozen=True)
class LedgerFile:
    """Where a run's ledger file is and whether it is the one run.json recorded
    (:func:`locate_ledger`): ``path`` the file to read (None: none), else ``problem`` (it is not
    the recorded file, or the record is missing or malformed) or ``note`` (none was written, or
    it is not beside run.json)."""

    path: str | None = None
    problem: str | None = None
    note: str | None = None
    mismatch: str | None = None     # the sha256 and sizes, when the file is not the recorded one


def locate_ledger(path: str, report: dict, ledger_path: str | None) -> LedgerFile:
    """The run's ledger file, after checking its sha256 and size against run.json's record
    (``verify`` reports a mismatch as a problem, ``show`` refuses it).  A ``--ledger`` given
    where run.json records that none was written, or that is not a regular file, is bad input
    (DpledgerError)."""
    from dpledger.inputs import check_input_file
    led = report.get("ledger") if isinstance(report, dict) else None
    if not isinstance(led, dict) or "file" not in led:
        return LedgerFile(problem="ledger: run.json records no ledger file entry (ledger.file, "
                                  "ledger.sha256); it was written by an older dpledger or "
                                  "edited: re-run it")
    if led["file"] is None:
        if ledger_path is not None:
            raise DpledgerError(f"run.json records that no ledger file was written; "
                                f"--ledger {ledger_path} cannot be checked against it")
        status = str(led.get("file_status", "not_written")).removeprefix("not_written:")
        return LedgerFile(note=f"ledger file not written ({status})")
    if not (isinstance(led["file"], str) and isinstance(led.get("sha256"), str)
            and isinstance(led.get("bytes"), int)):
        return LedgerFile(problem="ledger: run.json's record of the ledger file (file, sha256, "
                                  "bytes) is malformed")
    if ledger_path is None:
        file = os.path.join(os.path.dirname(os.path.abspath(path)), led["file"])
        if not os.path.isfile(file):
            return LedgerFile(note=f"ledger file {led['file']} not present")
    else:
        file = ledger_path
        check_input_file(file, "a ledger", option="--ledger")
    sha, size = sha256_file(file)
    if (sha, size) != (led["sha256"], led["bytes"]):
        detail = (f"sha256 {sha[:16]}… and {size} bytes, run.json recorded "
                  f"{led['sha256'][:16]}… and {led['bytes']} bytes (changed, truncated or "
                  "another run's ledger)")
        name = led["file"] if ledger_path is None else ledger_path
        return LedgerFile(problem=f"ledger file {name}: {detail}", mismatch=detail)
    return LedgerFile(path=file)


def _ledger_of(path: str, report: dict, ledger_path: str | None, v: Verification):
    """The run's ledger, read from its file after checking the file's sha256 and size against
    run.json's record (:func:`locate_ledger`); None (with a note or a problem) when there is no
    file to read."""
    from dpledger.accounting.ledger import RewardLedger
    from dpledger.accounting.schema import read_json
    from dpledger.inputs import JSON_READ_FACTOR, check_input_file
    where = locate_ledger(path, report, ledger_path)
    if where.problem:
        v.problems.append(where.problem + ("; not re-derived from it" if where.mismatch else ""))
        return None
    if where.path is None:
        v.notes.append(f"{where.note}: realized re-derived from stored compositions only")
        return None
    v.checked.append("ledger sha256")
    # too large to read here: refused (exit 2), before the try that reports a bad ledger
    check_input_file(where.path, "a ledger", JSON_READ_FACTOR)
    try:
        return RewardLedger.from_json(read_json(where.path))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        # the bytes run.json recorded, yet not a ledger (from_json lets some numpy errors out)
        v.problems.append(f"ledger file {report['ledger']['file']}: not a valid ledger: {exc}")
        return None


# -- --resimulate -----------------------------------------------------------------------------
def _not_reproducible(report: dict) -> str | None:
    """Why the run cannot be rerun to the same bytes (None: it can)."""
    rng = report.get("rng")
    if rng == "os" or (isinstance(rng, dict) and "os" in {str(x) for x in rng.values()}):
        return ("its noise came from the operating system's entropy (rng: os), which no seed "
                "reproduces")
    if report.get("reproducible") is False:
        return "run.json says it is not reproducible"
    env = report.get("environment")
    if isinstance(env, dict) and str(env.get("dataset", "")).startswith("digits6"):
        return (f"its environment is the {env['dataset']} instance, which only the experiment "
                "mishra-thakurta-2015-contextual builds (no `dpledger run` option names it); "
                "rerun that experiment with the same settings: its cells are byte-identical")
    return None


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def run_argv(report: dict, out: str, ledger_out: str, table_path: str | None,
             workers: int, log_path: str | None = None) -> list[str]:
    """The ``dpledger run`` command line that reproduces run.json's configuration."""
    pol, env = report["policy"], report["environment"]
    argv = ["run", str(pol["name"])]
    for k, val in pol["params"].items():
        if val is not None:
            argv += ["--set", f"{k}={_param_text(val)}"]
    kind = env["name"]
    argv += ["--env", str(kind)]
    if isinstance(report.get("contextual"), dict):
        return argv + _contextual_argv(report, table_path, log_path) + _common_argv(
            report, out, ledger_out, workers)
    if kind == "bernoulli":
        argv += ["--means", ",".join(repr(float(m)) for m in env["means"])]
    elif kind == "truncexp":
        argv += ["--rates", ",".join(repr(float(r)) for r in env["rates"])]
    elif kind == "beta":
        argv += ["--ab", ",".join(f"{float(a)!r}:{float(b)!r}" for a, b in env["ab"])]
    else:
        argv += ["--table", str(table_path)]
    argv += ["--sampler", str(report.get("sampler", "float"))]
    rng = report.get("rng")
    if isinstance(rng, str):
        argv += ["--rng", rng]
    return argv + _common_argv(report, out, ledger_out, workers)


def _common_argv(report: dict, out: str, ledger_out: str, workers: int) -> list[str]:
    lo, hi = (float(x) for x in report["environment"]["range"])
    argv = ["--range", f"{lo!r},{hi!r}", "--horizon", str(int(report["horizon"])),
            "--runs", str(int(report["runs"])), "--seed", str(int(report["seed"])),
            "--workers", str(int(workers))]
    for d in report["privacy"]["deltas"]:
        argv += ["--delta", str(d)]
    return argv + ["--out", out, "--ledger-out", ledger_out, "--quiet"]


def _contextual_argv(report: dict, table_path: str | None, log_path: str | None) -> list[str]:
    env, ctx = report["environment"], report["contextual"]
    argv = ["--norm-bound", repr(float(env["norm_bound"])), "--delay", str(int(ctx["delay"])),
            "--sampler", str(report.get("sampler", "float"))]
    if env.get("clip_contexts"):
        argv.append("--clip-contexts")
    kind = env["name"]
    if kind in ("linear", "linear-fixed"):
        argv += ["--dim", str(int(env["dim"])), "--arms", str(int(env["arms"]))]
        if env.get("theta_source") == "given":
            argv += ["--theta", ",".join(repr(float(x)) for x in env["theta"])]
        if env.get("noise_sd") is not None:
            argv += ["--noise-sd", repr(float(env["noise_sd"]))]
    elif kind == "contextual-table":
        argv += ["--table", str(table_path)]
    elif kind == "supervised":
        argv += ["--dataset", str(env["dataset"])]
    else:
        argv += ["--log", str(log_path), "--arms", str(int(env["arms"])),
                 "--context-columns", ",".join(env["context_columns"]),
                 "--replay-mode", str(env["replay_mode"])]
    return argv


def _resimulate(path: str, raw: bytes, report: dict, table_path: str | None, workers: int,
                v: Verification, log_path: str | None = None) -> None:
    """Rerun the simulation from run.json's configuration and seed with ``dpledger run`` in a
    temporary folder; compare run.json's bytes (and through its sha256 the ledger file's)."""
    reason = _not_reproducible(report)
    if reason:
        raise DpledgerError(f"cannot resimulate {path}: {reason}")
    kind = report["environment"].get("name")
    if kind == "contextual-table" and table_path is None:
        raise DpledgerError(f"cannot resimulate {path}: its contextual table is not in run.json; "
                            "pass --table FILE.npz")
    if kind == "replay" and log_path is None:
        raise DpledgerError(f"cannot resimulate {path}: its log is not in run.json; pass "
                            "--log FILE")
    if report["environment"].get("name") == "table" and table_path is None:
        raise DpledgerError(f"cannot resimulate {path}: its environment is a reward table "
                            f"(sha256 {report['environment'].get('table_sha256', '?')[:16]}…), "
                            "which run.json does not hold; pass --table FILE")
    from dpledger.cli import build_parser
    stored_led = report.get("ledger", {})
    with tempfile.TemporaryDirectory(prefix="dpledger-resim-") as tmp:
        out = os.path.join(tmp, os.path.basename(path))
        if stored_led.get("file") is None:
            ledger_out = "none"
        else:
            ledger_out = os.path.join(tmp, os.path.basename(stored_led["file"]))
            if os.path.abspath(ledger_out) == os.path.abspath(out):
                ledger_out = out + ".ledger.json"
        argv = run_argv(report, out, ledger_out, table_path, workers, log_path)
        try:
            args = build_parser("run").parse_args(argv)
        except SystemExit:
            raise DpledgerError(f"cannot resimulate {path}: its configuration is not a valid "
                                "`dpledger run` command (see the line above)") from None
        try:
            args.func(args)
        except InvariantViolation:
            pass            # run.json was written; the comparison says whether it matches
        with open(out, "rb") as fh:
            rebuilt_raw = fh.read()
    what = "run.json and ledger file bytes" if stored_led.get("file") else "run.json bytes"
    if rebuilt_raw == raw:
        v.checked.append(f"resimulation ({what} identical)")
        v.not_checked.clear()
        return
    stored = json.loads(raw)
    rebuilt = json.loads(rebuilt_raw)
    # carry over what is not a result: a sweep's annotations, where the ledger file was written
    carried = []
    for k in _ANNOTATIONS:
        if k in stored and k not in rebuilt:
            rebuilt[k] = stored[k]
            carried.append(k)
    if isinstance(rebuilt.get("ledger"), dict) and isinstance(stored.get("ledger"), dict):
        for k in _OUTPUT_CHOICE:
            if k in stored["ledger"] and k in rebuilt["ledger"] \
                    and stored["ledger"][k] != rebuilt["ledger"][k]:
                rebuilt["ledger"][k] = stored["ledger"][k]
                carried.append(f"ledger.{k}")
    if dumps(rebuilt).encode() == raw:
        v.checked.append(f"resimulation ({what} identical, {', '.join(carried)} carried over)")
        v.not_checked.clear()
        return
    diff = first_difference(stored, rebuilt) or "the bytes differ (formatting)"
    v.problems.append(f"resimulation differs from run.json, first at {diff}")
    s_sha = stored.get("ledger", {}).get("sha256")
    r_sha = rebuilt.get("ledger", {}).get("sha256")
    if s_sha != r_sha:
        v.problems.append(f"resimulation: ledger file sha256 {str(r_sha)[:16]}…, run.json "
                          f"recorded {str(s_sha)[:16]}…")
    v.not_checked.clear()
