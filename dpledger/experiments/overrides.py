"""Overrides of an experiment's setting (issue 23 §1): ``--horizon``, ``--runs``, the privacy
levels (``--epsilons``, ``--mus`` or ``--alphas``, whichever the experiment sweeps), the
instance (``--instance`` picks among the experiment's named instances, ``--means`` /
``--rates`` / ``--ab`` replace them by one custom instance), ``--policies`` and ``--seed``;
``--delays`` and ``--accepted`` (a subset of the delays, the swept sizes n) for an experiment
that declares ``DELAYS`` / ``ACCEPTED_FULL`` (mishra-thakurta-2015-contextual).

An :class:`Overrides` is a frozen record of what the user typed, already parsed; an experiment
module reads its setting through the helpers below (the paper's value unless overridden), so
that one rule holds everywhere:

* an override wins over ``--quick`` for its own dimension (``--quick --horizon 50000`` runs
  T = 50 000; the grids that are not overridden are still thinned);
* an overridden privacy grid is run as given (sorted, never thinned);
* ``--policies`` keeps a subset of the experiment's own policies (custom sets of registered
  policies are what a TOML experiment is for, :mod:`dpledger.experiments.custom`).

Claims are re-judged on the run that was made.  :class:`PaperSetting` helpers say when a claim
is judged outside the setting the paper stated it in — a custom instance, a privacy level the
paper did not run — and :meth:`Claim.judged <dpledger.experiments.common.Claim.judged>` then
reports it as "not applicable: outside the paper's setting (…)", never as confirmed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from dpledger.errors import DpledgerError

# the option that names an experiment's privacy levels, its symbol and its admissible range
LEVEL_OPTIONS = {
    "epsilons": ("ε", "epsilon", "a number > 0"),
    "mus": ("μ", "mu", "a number > 0"),
    "alphas": ("α", "alpha", "a number in [0, 1]"),
}


@dataclass(frozen=True)
class Overrides:
    """What the user overrode, parsed (None: the experiment's own value)."""

    horizon: int | None = None
    runs: int | None = None
    levels: tuple[float, ...] | None = None
    level_option: str | None = None          # "epsilons", "mus" or "alphas"
    instances: tuple[str, ...] | None = None  # --instance: names among the experiment's own
    instance: dict | None = None              # --means / --rates / --ab: one custom env spec
    policies: tuple[str, ...] | None = None
    seed: int | None = None
    delays: tuple[int, ...] | None = None     # --delays: a subset of the experiment's delays
    accepted: tuple[int, ...] | None = None   # --accepted: the swept sizes n run

    def any(self) -> bool:
        return bool(self.to_json())

    def to_json(self) -> dict:
        """The overrides in the user's terms (flag names), only those given."""
        out: dict = {}
        if self.horizon is not None:
            out["--horizon"] = self.horizon
        if self.runs is not None:
            out["--runs"] = self.runs
        if self.levels is not None:
            out[f"--{self.level_option}"] = list(self.levels)
        if self.instances is not None:
            out["--instance"] = list(self.instances)
        if self.instance is not None:
            out["instance"] = dict(self.instance)
        if self.policies is not None:
            out["--policies"] = list(self.policies)
        if self.seed is not None:
            out["--seed"] = self.seed
        if self.delays is not None:
            out["--delays"] = list(self.delays)
        if self.accepted is not None:
            out["--accepted"] = list(self.accepted)
        return out

    def describe(self) -> str:
        """One line for claims.md and the console."""
        parts = []
        for key, value in self.to_json().items():
            if key == "instance":
                parts.append("instance " + instance_text(value))
            elif isinstance(value, list):
                parts.append(f"{key} {','.join(_num(v) for v in value)}")
            else:
                parts.append(f"{key} {value}")
        return "; ".join(parts)

    # -- the setting an experiment reads --------------------------------------------------------
    def horizon_or(self, T: int, quick: bool) -> int:
        from dpledger.experiments.common import horizon
        return self.horizon if self.horizon is not None else horizon(T, quick)

    def runs_or(self, R: int, quick: bool) -> int:
        from dpledger.experiments.common import runs
        return self.runs if self.runs is not None else runs(R, quick)

    def seed_or(self, seed: int) -> int:
        return self.seed if self.seed is not None else seed

    def levels_or(self, grid: Sequence[float], quick: bool) -> list[float]:
        from dpledger.experiments.common import thin
        return list(self.levels) if self.levels is not None else thin(grid, quick)

    def instances_or(self, named: dict[str, dict], quick: bool = False,
                     thin_quick: bool = False) -> dict[str, dict]:
        """name → env spec: the custom instance alone, the ``--instance`` subset, or the
        experiment's own instances (thinned to ends and middle in quick mode when
        ``thin_quick``)."""
        from dpledger.experiments.common import thin
        if self.instance is not None:
            return {"custom": dict(self.instance)}
        if self.instances is not None:
            return {k: named[k] for k in named if k in self.instances}
        names = thin(list(named), quick) if thin_quick else list(named)
        return {k: named[k] for k in names}

    def keeps(self, policy: str) -> bool:
        return self.policies is None or policy in self.policies


NO_OVERRIDES = Overrides()


def _num(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def instance_text(spec: dict) -> str:
    """A custom instance as the user typed it: ``--means 0.9,0.4``."""
    kind = spec.get("kind")
    if kind == "bernoulli":
        return "--means " + ",".join(_num(float(v)) for v in spec["means"])
    if kind == "truncexp":
        return "--env truncexp --rates " + ",".join(_num(float(v)) for v in spec["rates"])
    if kind == "beta":
        return "--env beta --ab " + ",".join(f"{_num(float(a))}:{_num(float(b))}"
                                             for a, b in spec["ab"])
    return str(spec)


def n_arms(spec: dict) -> int:
    """K of an env spec (:class:`dpledger.sweep.RunConfig`'s form); a contextual spec's from its
    "arms" or from the environment it names."""
    from dpledger.sweep import CONTEXTUAL_KINDS, make_env
    if spec.get("kind") in CONTEXTUAL_KINDS:
        return int(spec["arms"]) if spec.get("arms") else int(make_env(spec).n_arms)
    for key in ("means", "rates", "ab"):
        if key in spec:
            return len(spec[key])
    raise DpledgerError(f"an instance needs means, rates or ab, got {sorted(spec)}")


def env_spec(env) -> dict:
    """The sweep's env spec of an :class:`~dpledger.policies.environments.Environment`
    (validated already)."""
    from dpledger.policies import environments as E
    spec: dict = {"kind": env.name}
    if env.kind == E.BERNOULLI:
        spec["means"] = env.params[:, 0].tolist()
    elif env.kind == E.TRUNCEXP:
        spec["rates"] = env.params[:, 0].tolist()
    elif env.kind == E.BETA:
        spec["ab"] = env.params.tolist()
    else:
        raise DpledgerError("an experiment needs a stochastic instance (bernoulli, truncexp or "
                            "beta), not a reward table")
    if (env.lo, env.hi) != (0.0, 1.0):
        spec["range"] = [env.lo, env.hi]
    return spec


def check_overrides(module, ov: Overrides) -> None:
    """Refuse, in one line, an override the experiment ``module`` cannot take.

    The module declares ``LEVEL_OPTION`` (its privacy grid's flag), ``INSTANCES`` (name → env
    spec) and ``POLICY_NAMES`` (the names ``--policies`` selects among)."""
    name = module.NAME
    if ov.levels is not None and ov.level_option != module.LEVEL_OPTION:
        sym = LEVEL_OPTIONS[module.LEVEL_OPTION][0]
        raise DpledgerError(f"{name} sweeps {sym}: give its privacy levels with "
                            f"--{module.LEVEL_OPTION}, not --{ov.level_option}")
    if ov.instances is not None and ov.instance is not None:
        raise DpledgerError("--instance picks among the experiment's instances; --means, "
                            "--rates and --ab replace them: give one or the other")
    if ov.instances is not None:
        unknown = [i for i in ov.instances if i not in module.INSTANCES]
        if unknown:
            raise DpledgerError(f"--instance {unknown[0]} is not an instance of {name}; its "
                                f"instances: {', '.join(module.INSTANCES)}")
    if ov.policies is not None:
        unknown = [p for p in ov.policies if p not in module.POLICY_NAMES]
        if unknown:
            raise DpledgerError(f"--policies {unknown[0]} is not a policy of {name}; its "
                                f"policies: {', '.join(module.POLICY_NAMES)} (a TOML "
                                "experiment, --config, runs any registered policy)")
    if ov.horizon is not None:
        insts = ov.instances_or(module.INSTANCES)
        K = max(n_arms(s) for s in insts.values())
        if ov.horizon < K:
            raise DpledgerError(f"--horizon {ov.horizon} is shorter than the number of arms {K}")
    for option, value, attr in (("--delays", ov.delays, "DELAYS"),
                                ("--accepted", ov.accepted, "ACCEPTED_FULL")):
        if value is not None and getattr(module, attr, None) is None:
            raise DpledgerError(f"{name} has no grid of {option[2:]} to choose from: {option} "
                                "applies to mishra-thakurta-2015-contextual")
    check = getattr(module, "check_overrides", None)
    if check is not None:           # a dimension only that experiment constrains
        check(ov)


def parse_names(option: str, text: str) -> tuple[str, ...]:
    """Comma-separated names, none twice."""
    from dpledger.inputs import split_list
    items = split_list(option, text)
    seen = set()
    for item in items:
        if item in seen:
            raise DpledgerError(f"{option} names {item} twice")
        seen.add(item)
    return tuple(items)


def parse_counts(option: str, text: str, minimum: int, maximum: int) -> tuple[int, ...]:
    """Comma-separated integers in [minimum, maximum] (``--delays``, ``--accepted``), none
    twice, sorted."""
    from dpledger.inputs import parse_int, split_list
    vals = []
    for item in split_list(option, text):
        try:
            vals.append(parse_int(option, item, minimum, maximum))
        except DpledgerError as exc:
            raise DpledgerError(f"{exc} (in {text!r})" if item != text.strip() else str(exc)) \
                from None
    for v in vals:
        if vals.count(v) > 1:
            raise DpledgerError(f"{option} lists {v} twice")
    return tuple(sorted(vals))


def parse_levels(option: str, text: str) -> tuple[float, ...]:
    """Privacy levels of ``--epsilons`` / ``--mus`` (> 0) or ``--alphas`` (in [0, 1]), sorted;
    two levels that print alike (labels use ``%g``) are refused."""
    from dpledger.inputs import parse_floats
    if option == "--alphas":
        vals = parse_floats(option, text, minimum=0.0, maximum=1.0)
    else:
        vals = parse_floats(option, text, minimum=0.0, open_interval=True)
    seen: dict[str, float] = {}
    for v in vals:
        key = f"{v:g}"
        if key in seen:
            raise DpledgerError(f"{option} lists {key} twice" if seen[key] == v else
                                f"{option}: {seen[key]!r} and {v!r} print alike ({key}); "
                                "give levels that differ in their first 6 digits")
        seen[key] = v
    return tuple(sorted(vals))


# -- the paper's setting, for claims ------------------------------------------------------------

def level_text(values: Sequence[float]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def outside_levels(used: Sequence[float], paper: Sequence[float], symbol: str,
                   exact: bool = False) -> str | None:
    """Why privacy levels ``used`` lie outside the paper's ``paper`` grid, or None.  ``exact``:
    every level must be one the paper ran (a claim stated at those levels); otherwise levels
    inside the paper's range count (a trend the paper's figure shows over that range)."""
    lo, hi = min(paper), max(paper)
    if exact:
        bad = [v for v in used if v not in paper]
        if bad:
            return (f"{symbol} = {level_text(bad)} is not among the paper's {symbol} = "
                    f"{level_text(paper)}")
        return None
    bad = [v for v in used if not lo <= v <= hi]
    if bad:
        return f"{symbol} = {level_text(bad)} lies outside the paper's range [{lo:g}, {hi:g}]"
    return None


def outside_instance(ov: Overrides, paper_text: str) -> str | None:
    """Why a custom instance takes a claim outside the paper's setting, or None."""
    if ov.instance is None:
        return None
    return f"this run's instance is {instance_text(ov.instance)}; the paper's is {paper_text}"


def first_reason(*reasons: str | None) -> str | None:
    reasons_ = [r for r in reasons if r]
    return "; ".join(reasons_) if reasons_ else None
