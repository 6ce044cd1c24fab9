"""Shared steps of the comparison experiments (issue 23 §3): matching privacy across currencies,
and tuning a parameter on streams separate from the reported ones
(docs/algorithms.md#currency-matching, docs/algorithms.md#tuning-on-separate-streams).

**Currency matching.**  A GDP policy at μ against an ε-DP policy needs one ε for the latter.
Two tight conversions exist, and they bracket the comparison, so both are run and labelled:

* ``epsilon-at-delta``: ε = ε_μ(δ) on the exact GDP curve (Dong, Roth & Su 2022, Cor. 2.13;
  :func:`~dpledger.accounting.gdp.gdp_epsilon`) at δ = :data:`DELTA` — the papers' way (Ou et
  al. 2024, App. D: "privacy parameters ε and δ … which corresponds to 1-, 5- and 10-GDP").
  Both policies are then (ε, δ)-DP at that δ; below it the ε-DP policy is more private, and in
  GDP it is less (its tight μ, randomized response's, is larger than μ).
* ``gdp-dominance``: the largest ε whose ε-DP implies μ-GDP, ε = ln(Φ(μ/2)/Φ(−μ/2))
  (:func:`~dpledger.accounting.gdp.pure_epsilon_for_mu`, the inverse of randomized response's
  tight μ = −2Φ⁻¹(1/(1 + e^ε))).  The ε-DP policy is then at least as private as the GDP one at
  every (ε′, δ′): the comparison gives the ε-DP side no budget the GDP side lacks.

δ = 10⁻⁶: below 1/T at every horizon these experiments run (T ≤ 10⁵; the usual requirement
δ ≪ 1/n for n records), and the δ at which every experiment table reports ε.  The papers' own
δ was lost in the stored texts.

**Tuning on separate streams.**  A tuned parameter (M-TS-Gaussian's b, DP-UCB's confidence
relaxation, private TS's random pulls) is chosen by the mean regret at T of runs on *tuning*
streams — master seed :func:`tuning_seed` — and the reported number is the chosen value's run on
the experiment's own seed, which the choice never saw.  Every candidate is also run on the
reported seed (tagged ``part = "candidate"``), so that the table shows how much the selection's
own optimism (the tuning-stream minimum) differs from what the chosen value gives on fresh
streams.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from dpledger.accounting.gdp import gdp_epsilon, pure_epsilon_for_mu
from dpledger.errors import DpledgerError
from dpledger.sweep import RunConfig

DELTA = 1e-6
CURRENCY_MATCHINGS = ("epsilon-at-delta", "gdp-dominance")
MATCHING_TEXT = {
    "epsilon-at-delta": f"ε = ε_μ(δ) on the exact GDP curve at δ = {DELTA:g}",
    "gdp-dominance": "ε-DP ⇒ μ-GDP: ε = ln(Φ(μ/2)/Φ(−μ/2)), randomized response's tight μ",
}


def matched_epsilon(mu: float, matching: str) -> float:
    """The ε an ε-DP policy runs at to face a μ-GDP policy, by ``matching``
    (:data:`CURRENCY_MATCHINGS`)."""
    if matching == "epsilon-at-delta":
        return gdp_epsilon(mu, DELTA)
    if matching == "gdp-dominance":
        return pure_epsilon_for_mu(mu)
    raise DpledgerError(f"unknown currency matching {matching!r}; known: "
                        f"{', '.join(CURRENCY_MATCHINGS)}")


def matched_configs(label: Callable[[str, str], str], mu: float, policies: Sequence[str],
                    env: dict, T: int, R: int, seed: int, tags: dict) -> list[RunConfig]:
    """Each ε-DP policy of ``policies`` at the ε of ``mu`` by each of
    :data:`CURRENCY_MATCHINGS` (label ``label(policy, matching)``, tagged with the matching,
    the budget and the ε, ``part = "compared"``)."""
    out = []
    for matching in CURRENCY_MATCHINGS:
        eps = matched_epsilon(mu, matching)
        out += [RunConfig(label(pol, matching), pol, {"epsilon": eps}, env, T, R, seed=seed,
                          tags={"policy": pol, **tags, "part": "compared",
                                "currency_matching": matching, "budget_mu": mu,
                                "epsilon": eps})
                for pol in policies]
    return out


def tuning_seed(seed: int) -> int:
    """The master seed of the tuning streams of an experiment run with master seed ``seed``:
    a different SeedSequence entropy, so tuning and reported runs share no stream."""
    return seed + 1


def tuned_configs(prefix: str, values: Sequence, make: Callable[[Any], tuple[str, dict]],
                  env: dict, T: int, R: int, seed: int, tags: dict) -> list[RunConfig]:
    """Every candidate value twice: on the tuning streams (label ``<prefix>-<value>-tune``, tag
    ``part = "tuning"``) and on the reported streams (``<prefix>-<value>``, ``part =
    "candidate"``).  ``make(value)`` gives (policy, params)."""
    out = []
    for v in values:
        policy, params = make(v)
        base = {**tags, "tuned_value": v}
        out.append(RunConfig(f"{prefix}-{_fmt(v)}-tune", policy, params, env, T, R,
                             seed=tuning_seed(seed), tags={**base, "part": "tuning"}))
        out.append(RunConfig(f"{prefix}-{_fmt(v)}", policy, params, env, T, R, seed=seed,
                             tags={**base, "part": "candidate"}))
    return out


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Tuned:
    """The outcome of one tuning: the value chosen on the tuning streams, the regret of every
    candidate on the tuning and on the reported streams, and the chosen run (reported
    streams)."""

    prefix: str
    value: Any
    tuning: dict           # value → mean regret at T on the tuning streams
    reported: dict         # value → mean regret at T on the reported streams
    report: dict           # the chosen value's run.json (reported streams)

    @property
    def label(self) -> str:
        return f"{self.prefix}-{_fmt(self.value)}"

    def evidence(self) -> str:
        """One line: the choice, its tuning-stream and reported-stream regret, and the value
        the reported streams alone would have chosen."""
        hind = min(self.reported, key=self.reported.get)
        return (f"chosen on tuning streams: {_fmt(self.value)} (tuning {self.tuning[self.value]:.4g}"
                f", reported {self.reported[self.value]:.4g}; best on the reported streams in "
                f"hindsight: {_fmt(hind)}, {self.reported[hind]:.4g})")


def tuned_row(label: str, rep: dict, tuned, **fields) -> dict:
    """A table row for run ``label``: ``fields``, its part (``tuning``, ``candidate`` — marked
    ``(chosen)`` when one of the ``tuned`` outcomes chose it — or ``compared``), size, seed,
    regret and privacy."""
    from dpledger.experiments.common import final_regret, privacy_row
    m, s = final_regret(rep)
    chosen = any(t.label == label for t in tuned)
    return {"label": label, **fields,
            "part": rep["tags"].get("part", "compared") + (" (chosen)" if chosen else ""),
            "T": rep["horizon"], "runs": rep["runs"], "seed": rep["seed"],
            "regret_mean": m, "regret_std": s, **privacy_row(rep)}


def select(reports: dict, prefix: str, values: Sequence) -> Tuned:
    """The candidate with the smallest mean regret at T on the tuning streams (ties: the first
    value listed)."""
    tuning, reported = {}, {}
    for v in values:
        tuning[v] = reports[f"{prefix}-{_fmt(v)}-tune"]["regret"]["final_mean"]
        reported[v] = reports[f"{prefix}-{_fmt(v)}"]["regret"]["final_mean"]
    best = min(values, key=lambda v: (tuning[v], list(values).index(v)))
    return Tuned(prefix, best, tuning, reported, reports[f"{prefix}-{_fmt(best)}"])


# M-TS-Gaussian's pre-pulls b, tuned at a GDP budget (Hu et al. 2025 App. E.1; Ou et al. 2024
# App. D "set via grid search"): roughly ×3 steps, kept where bK ≤ T/4 (ou-2024's largest b)
MTS_B_GRID = (0, 1, 3, 10, 30, 100, 300, 1000, 3000)


def mts_b_grid(T: int, K: int, quick: bool) -> list[int]:
    """:data:`MTS_B_GRID` where bK ≤ T/4, thinned to ends and middle in --quick."""
    from dpledger.experiments.common import thin
    return thin([b for b in MTS_B_GRID if b * K <= T // 4], quick)


def tuned_mts_configs(prefix: str, mu: float, basis: str, env: dict, T: int, R: int, seed: int,
                      quick: bool, tags: dict) -> list[RunConfig]:
    """M-TS-Gaussian at GDP budget ``mu`` for every b of :func:`mts_b_grid`, c the smallest
    meeting it by ``basis`` ("theorem" or "certificate",
    :func:`~dpledger.experiments.common.calibrate_gdp`), on tuning and reported streams
    (:func:`tuned_configs`)."""
    from dpledger.experiments.common import calibrate_gdp
    from dpledger.experiments.overrides import n_arms
    K = n_arms(env)

    def make(b):
        return "mts-gaussian", {"b": b, "c": calibrate_gdp("mts-gaussian", {"b": b}, "c", mu,
                                                            basis, T, K)}
    return tuned_configs(prefix, mts_b_grid(T, K, quick), make, env, T, R, seed,
                         {"policy": "mts-gaussian", "matching": basis, "budget_mu": mu, **tags})
