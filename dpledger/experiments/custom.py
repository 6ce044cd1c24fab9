"""A custom experiment from a TOML file (issue 23 §1): instances × policies × privacy levels ×
horizons, run on the local pool or Dask like the paper reproductions
(``dpledger experiment --config FILE.toml``; example: ``examples/custom_experiment.toml``).

The file (read with the standard library's :mod:`tomllib`)::

    name = "my-study"                  # the output folder's name: letters, digits, . _ -
    title = "…"                        # optional
    runs = 10                          # R per setting
    horizons = [10000, 100000]         # T values
    seed = 0                           # optional master seed (default 0)

    [privacy]
    parameter = "epsilon"              # or "mu" (GDP budgets)
    levels = [0.5, 1.0]
    match = "certificate"              # mu only: calibrate on "certificate" (default) or
                                       # "theorem"

    [[instances]]                      # one table per instance
    name = "five"
    means = [0.75, 0.625, 0.5]         # Bernoulli; or rates = [...] (truncated exponential)
                                       # or ab = [[a, b], ...] (Beta)

    [[policies]]                       # one table per policy
    name = "lazy-dp-ts"                # a registered policy
    label = "lazy"                     # optional (default: name); distinct
    params = { }                       # optional fixed parameters
    calibrate = "c"                    # mu only: the parameter set, per budget, to the
                                       # smallest value whose μ meets it (μ must fall as it
                                       # grows)

How the privacy level reaches a policy:

* ``parameter = "epsilon"``: a policy that declares an ``epsilon`` parameter runs once per ε
  with ``epsilon`` = ε; any other policy (a non-private baseline, a GDP policy with fixed
  parameters) runs once per instance and horizon, its privacy whatever its parameters give.
* ``parameter = "mu"``: a policy with ``calibrate`` runs once per μ, with that parameter the
  smallest value whose GDP μ (by ``match``: the ledger's certificate, or the paper's theorem)
  meets μ (:func:`dpledger.experiments.common.calibrate_gdp`, a bisection that never
  overshoots); any other policy runs once, as above.

Every bad entry is refused in one line naming the file and the key.  A custom experiment has no
paper and so no claims: claims.md says so, and the table and plots carry the numbers.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
from typing import Any

from dpledger.errors import DpledgerError
from dpledger.experiments.common import (Summary, band, calibrate_gdp, final_regret, gdp_mu_of,
                                         plot_regret_panels, plot_tradeoff, privacy_row, thin)
from dpledger.experiments.overrides import NO_OVERRIDES, Overrides, env_spec, n_arms
from dpledger.sweep import RunConfig

TOP_KEYS = ("name", "title", "runs", "horizons", "seed", "privacy", "instances", "policies")
PRIVACY_KEYS = ("parameter", "levels", "match")
INSTANCE_KEYS = ("name", "means", "rates", "ab", "range")
POLICY_KEYS = ("name", "label", "params", "calibrate")
LEVELS = {"epsilon": "epsilons", "mu": "mus"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_SETTINGS = 10_000          # more configurations is a typo in a grid, not a plan


class CustomExperiment:
    """An experiment described by a TOML file; the module interface of
    :mod:`dpledger.experiments` (NAME, TITLE, configs, summarize, and what the overrides
    address)."""

    def __init__(self, path: str, doc: dict):
        self.path = path
        where = os.path.basename(path)
        _keys(doc, TOP_KEYS, where)
        self.NAME = _name(_get(doc, "name", str, where), f"{where}: name")
        self.TITLE = _get(doc, "title", str, where, f"Custom experiment {self.NAME}")
        self.runs = _int(_get(doc, "runs", int, where), f"{where}: runs", 1, 10 ** 9)
        hs = _get(doc, "horizons", list, where)
        if not hs:
            raise DpledgerError(f"{where}: horizons needs at least one T")
        self.horizons = sorted({_int(h, f"{where}: horizons", 1, 10 ** 9) for h in hs})
        self.seed = _int(_get(doc, "seed", int, where, 0), f"{where}: seed", 0, None)
        priv = _get(doc, "privacy", dict, where)
        _keys(priv, PRIVACY_KEYS, f"{where}: [privacy]")
        self.parameter = _get(priv, "parameter", str, f"{where}: [privacy]")
        if self.parameter not in LEVELS:
            raise DpledgerError(f"{where}: [privacy] parameter must be \"epsilon\" or \"mu\", "
                                f"got {self.parameter!r}")
        self.LEVEL_OPTION = LEVELS[self.parameter]
        levels = _get(priv, "levels", list, f"{where}: [privacy]")
        if not levels:
            raise DpledgerError(f"{where}: [privacy] levels needs at least one value")
        self.levels = _levels(levels, f"{where}: [privacy] levels")
        self.match = _get(priv, "match", str, f"{where}: [privacy]", "certificate")
        if self.match not in ("certificate", "theorem"):
            raise DpledgerError(f"{where}: [privacy] match must be \"certificate\" or "
                                f"\"theorem\", got {self.match!r}")
        if self.parameter != "mu" and "match" in priv:
            raise DpledgerError(f"{where}: [privacy] match is for parameter = \"mu\"")
        self.INSTANCES = self._instances(_get(doc, "instances", list, where), where)
        self.entries = self._policies(_get(doc, "policies", list, where), where)
        self.POLICY_NAMES = list(self.entries)
        K = max(n_arms(s) for s in self.INSTANCES.values())
        if self.horizons[0] < K:
            raise DpledgerError(f"{where}: horizon {self.horizons[0]} is shorter than the number "
                                f"of arms {K}")
        n = len(self.INSTANCES) * len(self.horizons) * len(self.entries) * len(self.levels)
        if n > MAX_SETTINGS:
            raise DpledgerError(f"{where}: {n} settings (instances × horizons × policies × "
                                f"levels), more than {MAX_SETTINGS}")
        with open(path, "rb") as fh:
            sha = hashlib.sha256(fh.read()).hexdigest()
        self.CONFIG = {"file": where, "sha256": sha, "content": doc}
        self.CHOICES: list[str] = []

    # -- parsing ---------------------------------------------------------------------------------
    def _instances(self, items: list, where: str) -> dict[str, dict]:
        from dpledger.policies import environments as E
        out: dict[str, dict] = {}
        for at, item in _tables(items, "instances", INSTANCE_KEYS, where):
            name = _name(_get(item, "name", str, at), f"{at}: name")
            if name in out:
                raise DpledgerError(f"{at}: instance name {name!r} is used twice")
            kinds = [k for k in ("means", "rates", "ab") if k in item]
            if len(kinds) != 1:
                raise DpledgerError(f"{at} needs exactly one of means (Bernoulli), rates "
                                    "(truncated exponential) or ab (Beta)")
            lo, hi = _range(item.get("range", [0.0, 1.0]), f"{at}: range")
            arms = item[kinds[0]]
            if not isinstance(arms, list):
                raise DpledgerError(f"{at}: {kinds[0]} must be a list")
            try:
                env = {"means": E.bernoulli, "rates": E.truncated_exponential,
                       "ab": E.beta}[kinds[0]](arms, lo, hi)
            except DpledgerError as exc:
                raise DpledgerError(f"{at}: {exc}") from None
            out[name] = env_spec(env)
        return out

    def _policies(self, items: list, where: str) -> dict[str, dict]:
        from dpledger.policies.registry import policy_class
        out: dict[str, dict] = {}
        for at, item in _tables(items, "policies", POLICY_KEYS, where):
            name = _get(item, "name", str, at)
            try:
                cls = policy_class(name)
            except DpledgerError as exc:
                raise DpledgerError(f"{at}: {exc}") from None
            if getattr(cls, "contextual", False):
                from dpledger.policies.registry import available
                raise DpledgerError(f"{at}: {name} is a contextual policy; a custom experiment "
                                    "runs K-armed policies on K-armed instances ("
                                    + ", ".join(available()) + ")")
            label = _name(_get(item, "label", str, at, name), f"{at}: label")
            if label in out:
                raise DpledgerError(f"{at}: label {label!r} is used twice (give each entry its "
                                    "own label)")
            params = dict(_get(item, "params", dict, at, {}))
            spec = {p.name: p for p in cls.params_spec}
            calibrate = _get(item, "calibrate", str, at, None)
            level_param = None
            if self.parameter == "epsilon":
                if calibrate is not None:
                    raise DpledgerError(f"{at}: calibrate is for [privacy] parameter = \"mu\"")
                if "epsilon" in spec:
                    level_param = "epsilon"
            elif calibrate is not None:
                p = spec.get(calibrate)
                if p is None or p.hidden:
                    raise DpledgerError(f"{at}: {name} has no parameter {calibrate!r} to "
                                        "calibrate")
                if p.kind not in ("positive", "fraction", "float"):
                    raise DpledgerError(f"{at}: calibrate needs a real-valued parameter; "
                                        f"{calibrate} of {name} is {p.kind}")
                level_param = calibrate
            if level_param is not None and level_param in params:
                raise DpledgerError(f"{at}: params sets {level_param}, which the privacy "
                                    "levels set")
            try:                                 # every parameter checked now, not mid-sweep
                cls(**params)
            except DpledgerError as exc:
                raise DpledgerError(f"{at}: {exc}") from None
            if calibrate is not None:
                self._check_monotone(name, params, p, at)
            out[label] = {"policy": name, "params": params, "level_param": level_param,
                          "calibrate": calibrate is not None}
        return out

    def _check_monotone(self, name: str, params: dict, p, at: str) -> None:
        """μ must fall as the calibrated parameter grows (the bisection's premise)."""
        lo, hi = _search_range(p)
        T = self.horizons[0]
        K = min(n_arms(s) for s in self.INSTANCES.values())
        try:
            a = gdp_mu_of(name, {**params, p.name: lo}, T, K, self.match)
            b = gdp_mu_of(name, {**params, p.name: hi}, T, K, self.match)
        except DpledgerError as exc:
            raise DpledgerError(f"{at}: {exc}") from None
        if not b < a:
            raise DpledgerError(f"{at}: the GDP μ of {name} does not fall as {p.name} grows "
                                f"({a:.4g} → {b:.4g}); calibrate a parameter that adds noise")

    # -- the experiment interface ----------------------------------------------------------------
    def setting(self, quick: bool, ov: Overrides):
        from dpledger.experiments.common import QUICK_R, QUICK_T
        if ov.horizon is not None:
            hs = [ov.horizon]
        else:
            hs = sorted({min(h, QUICK_T) for h in self.horizons}) if quick else self.horizons
        R = ov.runs if ov.runs is not None else (min(self.runs, QUICK_R) if quick else self.runs)
        levels = list(ov.levels) if ov.levels is not None else thin(self.levels, quick)
        return ov.instances_or(self.INSTANCES), hs, R, levels

    def configs(self, quick: bool, ov: Overrides = NO_OVERRIDES) -> list[RunConfig]:
        insts, hs, R, levels = self.setting(quick, ov)
        seed = ov.seed_or(self.seed)
        sym = "eps" if self.parameter == "epsilon" else "mu"
        out = []
        for inst, env in insts.items():
            K = n_arms(env)
            for T in hs:
                for label, e in self.entries.items():
                    if not ov.keeps(label):
                        continue
                    base = {"instance": inst, "horizon": T, "policy": label}
                    if e["level_param"] is None:
                        out.append(RunConfig(f"{inst}-T{T}-{label}", e["policy"], e["params"],
                                             env, T, R, seed=seed, tags={**base, "level": None}))
                        continue
                    for lv in levels:
                        params = dict(e["params"])
                        if e["calibrate"]:
                            params[e["level_param"]] = self._calibrated(e, lv, T, K, label)
                        else:
                            params[e["level_param"]] = lv
                        out.append(RunConfig(f"{inst}-T{T}-{label}-{sym}{lv:g}", e["policy"],
                                             params, env, T, R, seed=seed,
                                             tags={**base, "level": lv,
                                                   "calibrated": params[e["level_param"]]
                                                   if e["calibrate"] else None}))
        return out

    def _calibrated(self, e: dict, mu: float, T: int, K: int, label: str) -> float:
        from dpledger.policies.registry import policy_class
        p = {q.name: q for q in policy_class(e["policy"]).params_spec}[e["level_param"]]
        lo, hi = _search_range(p)
        try:
            return calibrate_gdp(e["policy"], e["params"], e["level_param"], mu, self.match, T,
                                 K, lo=lo, hi=hi)
        except DpledgerError:
            raise DpledgerError(f"{os.path.basename(self.path)}: no {e['level_param']} in "
                                f"[{lo:g}, {hi:g}] gives {label} a GDP μ ≤ {mu:g} by "
                                f"{self.match} at T = {T}, K = {K}") from None

    def summarize(self, reports: dict, out: str, quick: bool,
                  ov: Overrides = NO_OVERRIDES) -> Summary:
        sym = "ε" if self.parameter == "epsilon" else "μ"
        table, panels, trades, fixed = [], {}, {}, {}
        for rep in reports.values():
            tg = rep["tags"]
            m, s = final_regret(rep)
            row = {"instance": tg["instance"], "T": tg["horizon"], "policy": tg["policy"],
                   self.parameter: tg["level"], "runs": rep["runs"], "regret_mean": m,
                   "regret_std": s}
            if tg.get("calibrated") is not None:
                row[f"calibrated_{self.entries[tg['policy']]['level_param']}"] = tg["calibrated"]
                row[f"mu_by_{self.match}"] = gdp_mu_of(
                    rep["policy"]["name"], rep["policy"]["params"], tg["horizon"],
                    len(rep["environment"]["means"]), self.match)
            row.update(privacy_row(rep))
            table.append(row)
            where = f"{tg['instance']}, T = {tg['horizon']}"
            if tg["level"] is None:
                fixed.setdefault(where, []).append((tg["policy"], rep))
                continue
            panels.setdefault(tg["horizon"], {}).setdefault(
                f"{where}, {sym} = {tg['level']:g}", []).append((tg["policy"], rep))
            trades.setdefault(where, {}).setdefault(tg["policy"], []).append(
                (tg["level"], m, band(rep)))
        plots = []
        for T, groups in sorted(panels.items()):
            for key, lines in groups.items():       # fixed-privacy policies in every panel
                where = key.rsplit(",", 1)[0]
                lines += fixed.get(where, [])
            plots.append(plot_regret_panels(groups, os.path.join(out, f"regret_T{T}.png"),
                                            f"{self.TITLE}, T = {T:g}"))
        for T in sorted({tg["horizon"] for tg in (r["tags"] for r in reports.values())}):
            if T in panels:
                continue
            groups = {w: lines for w, lines in fixed.items() if w.endswith(f"T = {T}")}
            plots.append(plot_regret_panels(groups, os.path.join(out, f"regret_T{T}.png"),
                                            f"{self.TITLE}, T = {T:g}"))
        for where, series in trades.items():
            levels = sorted({x for pts in series.values() for x, _, _ in pts})
            extra = {f"{name} (fixed)": ([levels[0], levels[-1]],
                                         [r["regret"]["final_mean"]] * 2)
                     for name, r in fixed.get(where, [])}
            inst, T = where.split(", T = ")
            plots.append(plot_tradeoff(series, os.path.join(out, f"tradeoff_{inst}_T{T}.png"),
                                       sym, f"{where}: regret at T against {sym}", extra=extra))
        notes = [f"custom experiment from {self.CONFIG['file']} (sha256 "
                 f"{self.CONFIG['sha256'][:16]}…): no paper, so no claims to check"]
        return Summary(table=table, plots=plots, claims=[], notes=notes)


# -- helpers ----------------------------------------------------------------------------------

def load_custom(path: str) -> CustomExperiment:
    """The custom experiment in TOML file ``path``, every entry validated (one line each)."""
    import tomllib
    if not isinstance(path, str) or path.strip() == "":
        raise DpledgerError("--config needs a file name")
    if os.path.isdir(path):
        raise DpledgerError(f"--config {path} is a directory; a TOML file was expected")
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise DpledgerError(f"no such file: {path} (--config, a TOML experiment)") from None
    except OSError as exc:
        raise DpledgerError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DpledgerError(f"{path} is not UTF-8 text; a TOML experiment was expected") from None
    except tomllib.TOMLDecodeError as exc:
        raise DpledgerError(f"malformed TOML in {path}: {exc}") from None
    except RecursionError:      # arrays or tables nested thousands deep (tomllib recurses)
        raise DpledgerError(f"{path} nests its arrays or tables too deeply to be a TOML "
                            "experiment") from None
    return CustomExperiment(path, doc)


_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "a table"}


def _get(doc: dict, key: str, kind: type, where: str, default: Any = ...) -> Any:
    if key not in doc:
        if default is ...:
            raise DpledgerError(f"{where}: {key} is missing")
        return default
    value = doc[key]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise DpledgerError(f"{where}: {key} must be {_TYPE_NAMES[kind]}, got {value!r}")
    return value


def _tables(items: list, key: str, allowed: tuple[str, ...], where: str):
    """(where-label, table) of each ``[[key]]`` table, each checked for its allowed keys."""
    if not items:
        raise DpledgerError(f"{where}: {key} needs at least one [[{key}]] table")
    for i, item in enumerate(items):
        at = f"{where}: {key}[{i}]"
        if not isinstance(item, dict):
            raise DpledgerError(f"{at} must be a table ([[{key}]])")
        _keys(item, allowed, at)
        yield at, item


def _keys(doc: dict, allowed: tuple[str, ...], where: str) -> None:
    extra = [k for k in doc if k not in allowed]
    if extra:
        raise DpledgerError(f"{where}: unknown key {extra[0]!r} (allowed: {', '.join(allowed)})")


def _name(text: str, where: str) -> str:
    if not _NAME.fullmatch(text):
        raise DpledgerError(f"{where} must be 1–64 letters, digits, '.', '_' or '-' (it names "
                            f"files), got {text!r}")
    return text


def _int(value: Any, where: str, lo: int, hi: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DpledgerError(f"{where} must be an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise DpledgerError(f"{where} must lie in [{lo}, {hi if hi is not None else '∞'}], got "
                            f"{value}")
    return value


def _levels(values: list, where: str) -> list[float]:
    out: dict[str, float] = {}
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not v > 0:
            raise DpledgerError(f"{where}: each level must be a finite number > 0, got {v!r}")
        key = f"{float(v):g}"
        if key in out:
            raise DpledgerError(f"{where}: {key} is given twice (or two levels print alike)")
        out[key] = float(v)
    return sorted(out.values())


def _range(value: Any, where: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise DpledgerError(f"{where} must be [lo, hi], got {value!r}")
    return float(value[0]), float(value[1])


def _search_range(p) -> tuple[float, float]:
    """Where a calibrated parameter is searched: [0, 1] for a fraction, else (0, 1e12]."""
    return (0.0, 1.0) if p.kind == "fraction" else (1e-6, 1e12)
