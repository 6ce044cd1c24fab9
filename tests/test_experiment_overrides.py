"""Issue 23 §1: open experiments.  Every ``dpledger experiment NAME`` takes ``--horizon``,
``--runs``, its privacy levels (``--epsilons``, ``--mus`` or ``--alphas``), ``--instance`` or a
custom instance, ``--policies`` and ``--seed``; run.json and experiment.json record what was
overridden; claims are re-judged on the run that was made, and one that an override takes
outside the paper's setting is "not applicable", never confirmed.  Bad values: one line, exit 2,
nothing written.  A custom TOML experiment (examples/custom_experiment.toml) runs at quick size.
"""
from __future__ import annotations

import glob
import json
import os

import pytest

from dpledger.cli import main
from dpledger.experiments import EXPERIMENTS, experiment_module
from dpledger.experiments.common import Claim, gdp_mu_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "custom_experiment.toml")

# per experiment: its level flag, two levels, a subset of its policies, one of its instances
OVERRIDES = {
    "hu-hegde-2022": ("--epsilons", "0.5,1", "lazy-dp-ts,dp-se", "main"),
    "azize-basu-2022": ("--epsilons", "0.5,1", "adap-klucb,dp-se", "fig3"),
    "ou-2024": ("--mus", "1,3", "mts-gaussian", "truncexp"),
    "hu-2025": ("--alphas", "0.5,1", "dp-ts-ucb,mts-gaussian", "main"),
    "mishra-thakurta-2015": ("--epsilons", "0.5,1", "dp-ucb-experimental,ucb1", "main"),
    "azize-2025": ("--epsilons", "0.5,1", "dp-klucb,imed", "mu3"),
    "hu-hegde-2022-nonprivate": ("--epsilons", "0.5,1", "dp-ts,ts-beta", "main"),
    "hu-2025-horizons": ("--alphas", "0.5,1", "dp-ts-ucb", "main"),
    "hu-2025-equal-regret": ("--alphas", "0,1", "dp-ts-ucb,mts-gaussian", "main"),
    "hu-2025-equal-privacy": ("--alphas", "0,1", "dp-ts-ucb,mts-gaussian,lazy-dp-ts", "main"),
    "ou-2024-matched": ("--mus", "1,5", "mts-gaussian,anytime-lazy-ucb", "main"),
    "mishra-thakurta-2015-tuned": ("--epsilons", "0.5,1", "dp-ucb-tuned,ucb1", "main"),
    "ou-2024-prepull": ("--mus", "1,2", "mts-gaussian", "bernoulli"),
    "ou-2024-privacy": ("--mus", "1,5", "mts-gaussian", "bernoulli"),
    "mishra-thakurta-2015-contextual": ("--epsilons", "1,2.7", "dp-linucb-mt,linucb", "digits"),
    "private-contextual": ("--epsilons", "0.5,1", "episode-linucb,linucb", "linear"),
    "azize-basu-2022-linear": ("--epsilons", "0.5,1", "reward-dp-linucb,linucb", "gaussian"),
}
# the tag that holds a run's privacy level (default "epsilon")
LEVEL_TAG = {"ou-2024": "budget_mu", "hu-2025": "alpha", "hu-2025-horizons": "alpha",
             "hu-2025-equal-regret": "alpha", "hu-2025-equal-privacy": "alpha",
             "ou-2024-matched": "budget_mu", "ou-2024-prepull": "budget_mu",
             "ou-2024-privacy": "budget_mu",
             "mishra-thakurta-2015-contextual": "epsilon_total"}
T, R, SEED = 300, 2, 11


def _load(path):
    with open(path) as fh:
        return json.load(fh)


def test_every_experiment_declares_what_the_overrides_address():
    assert set(OVERRIDES) == set(EXPERIMENTS)
    for name in EXPERIMENTS:
        mod = experiment_module(name)
        assert mod.LEVEL_OPTION in ("epsilons", "mus", "alphas")
        assert OVERRIDES[name][0] == f"--{mod.LEVEL_OPTION}"
        assert mod.INSTANCES and mod.POLICY_NAMES
        assert all("kind" in spec for spec in mod.INSTANCES.values())


@pytest.fixture(scope="module", params=sorted(OVERRIDES))
def overridden(request, tmp_path_factory):
    name = request.param
    flag, levels, policies, instance = OVERRIDES[name]
    out = str(tmp_path_factory.mktemp(name.replace("-", "_")))
    argv = ["experiment", name, "--quick", "--horizon", str(T), "--runs", str(R), "--seed",
            str(SEED), flag, levels, "--policies", policies, "--instance", instance, "--out",
            out, "--quiet"]
    assert main(argv) == 0
    runs = {os.path.basename(f)[:-5]: _load(f) for f in glob.glob(os.path.join(out, "runs",
                                                                             "*.json"))}
    return {"name": name, "out": out, "meta": _load(os.path.join(out, "experiment.json")),
            "runs": runs, "levels": [float(v) for v in levels.split(",")],
            "policies": policies.split(","), "instance": instance, "flag": flag}


def test_overrides_reach_every_run(overridden):
    """T, R and the seed of every simulated setting are the overridden ones (tuning runs: the
    tuning seed derived from it); only the chosen policies ran; the level of every run that has
    one is among the given levels (an ablation, and a fixed ε → ∞ reference run, excepted)."""
    from dpledger.experiments.matched import tuning_seed
    runs = overridden["runs"]
    assert runs
    for label, rep in runs.items():
        seed = tuning_seed(SEED) if rep["tags"].get("part") == "tuning" else SEED
        assert rep["horizon"] == T and rep["runs"] == R and rep["seed"] == seed, label
        tg = rep["tags"]
        pol = tg.get("variant") or tg.get("policy") or rep["policy"]["name"]
        assert pol in overridden["policies"], (label, pol)
        level = tg[LEVEL_TAG.get(overridden["name"], "epsilon")]
        if level is not None and tg.get("part") not in ("ablation", "reference"):
            assert level in overridden["levels"], (label, level)


def test_overrides_are_recorded(overridden):
    """experiment.json and every run.json record the overrides, in flag names."""
    rec = overridden["meta"]["overrides"]
    assert rec["--horizon"] == T and rec["--runs"] == R and rec["--seed"] == SEED
    assert rec[overridden["flag"]] == overridden["levels"]
    assert rec["--policies"] == overridden["policies"]
    assert rec["--instance"] == [overridden["instance"]]
    for rep in overridden["runs"].values():
        assert rep["experiment"] == {"name": overridden["name"], "quick": True,
                                     "overrides": rec}
    text = open(os.path.join(overridden["out"], "claims.md")).read()
    assert "Overridden: --horizon 300; --runs 2;" in text


def test_overridden_runs_verify(overridden):
    from dpledger.verify import verify_report
    for label, rep in overridden["runs"].items():
        assert verify_report(rep) == [], label


def test_claims_rejudged(overridden):
    """Every claim is judged on this run: confirmed or not with numbers, not testable here
    (a policy left out), or not applicable outside the paper's setting — never confirmed while
    outside it."""
    claims = overridden["meta"]["claims"]
    assert claims
    for c in claims:
        assert c["evidence"] and any(ch.isdigit() for ch in c["evidence"]), c
        if c["outside"]:
            assert c["confirmed"] is None
            assert "(on this run it " in c["evidence"]
    text = open(os.path.join(overridden["out"], "claims.md")).read()
    for c in claims:
        if c["outside"]:
            assert f"not applicable: outside the paper's setting ({c['outside']})" in text


def test_levels_outside_the_paper_are_not_applicable(tmp_path):
    """hu-hegde-2022 at ε = 0.5, 1: the claims the paper states at ε = 500 and at ε = 0.1 are
    not applicable (this run's largest ε is 1, its smallest 0.5); the ε ≤ 1 claim, inside the
    paper's range, is judged."""
    out = str(tmp_path / "o")
    assert main(["experiment", "hu-hegde-2022", "--horizon", "200", "--runs", "1",
                 "--epsilons", "0.5,1", "--instance", "main", "--out", out, "--quiet"]) == 0
    claims = _load(os.path.join(out, "experiment.json"))["claims"]
    by = {c["text"]: c for c in claims}
    c1 = by["at ε = 1, DP-TS outperforms Lazy-DP-TS"]
    assert c1["confirmed"] is None
    assert c1["outside"] == "the paper states it at ε = 500; this run's ε is 1"
    c4 = by["at ε = 0.5, DP-TS is inferior to the other three"]
    assert c4["outside"] == "the paper states it at ε = 0.1; this run's ε is 0.5"
    c3 = by["Lazy-DP-TS always outperforms DP-SE and Anytime-Lazy-UCB (ε ≤ 1)"]
    assert c3["outside"] is None and c3["confirmed"] in (True, False)


def test_custom_instance_takes_instance_claims_outside(tmp_path):
    """A custom instance (--means) replaces the experiment's; a claim about the paper's
    instance is then not applicable, naming both instances."""
    out = str(tmp_path / "o")
    assert main(["experiment", "mishra-thakurta-2015", "--quick", "--horizon", "200",
                 "--runs", "1", "--means", "0.8,0.3,0.3", "--out", out, "--quiet"]) == 0
    meta = _load(os.path.join(out, "experiment.json"))
    assert meta["overrides"]["instance"] == {"kind": "bernoulli", "means": [0.8, 0.3, 0.3]}
    for c in meta["configs"]:
        assert c["env"] == {"kind": "bernoulli", "means": [0.8, 0.3, 0.3]}
    judged = [c for c in meta["claims"] if c["outside"] or c["confirmed"] is not None]
    assert judged
    for c in judged:
        assert c["confirmed"] is None
        assert c["outside"] == ("this run's instance is --means 0.8,0.3,0.3; the paper's is "
                                "0.9, 0.4, 0.4, 0.4, 0.4")


def test_left_out_policy_makes_claim_untestable(tmp_path):
    out = str(tmp_path / "o")
    assert main(["experiment", "hu-2025", "--quick", "--horizon", "300", "--runs", "1",
                 "--policies", "dp-ts-ucb", "--out", out, "--quiet"]) == 0
    claims = _load(os.path.join(out, "experiment.json"))["claims"]
    equal_mu = [c for c in claims if "at equal μ" in c["text"]]
    assert len(equal_mu) == 4
    for c in equal_mu:
        assert c["confirmed"] is None and c["outside"] is None
        assert c["evidence"].startswith("DP-TS-UCB or M-TS-Gaussian not run (--policies)")
    assert {os.path.basename(p) for p in glob.glob(os.path.join(out, "runs", "*.json"))} == {
        "dp-ts-ucb-alpha0.json", "dp-ts-ucb-alpha0.5.json", "dp-ts-ucb-alpha1.json"}


def test_no_override_keeps_the_paper_setting():
    """Without overrides every experiment's settings are exactly the paper reproduction's
    (same labels, same cell keys, so finished cells are reused)."""
    from dpledger.experiments.overrides import NO_OVERRIDES
    for name in EXPERIMENTS:
        mod = experiment_module(name)
        for quick in (True, False):
            a = [(c.label, c.key()) for c in mod.configs(quick)]
            b = [(c.label, c.key()) for c in mod.configs(quick, NO_OVERRIDES)]
            assert a == b and len({k for _, k in a}) == len(a)


# -- bad values: one line, exit 2, nothing written ------------------------------------------------

BAD = [
    (["hu-hegde-2022", "--epsilons", "0"], "--epsilons must be > 0, got 0"),
    (["hu-hegde-2022", "--epsilons", "0.5,,1"], "--epsilons has an empty item"),
    (["hu-hegde-2022", "--epsilons", "nan"], "--epsilons must be a finite number"),
    (["hu-hegde-2022", "--epsilons", "1,1.0"], "--epsilons lists 1 twice"),
    (["hu-hegde-2022", "--epsilons", "0.1,0.1000001"], "print alike (0.1)"),
    (["hu-hegde-2022", "--mus", "1"], "hu-hegde-2022 sweeps ε: give its privacy levels with "
                                      "--epsilons, not --mus"),
    (["ou-2024", "--epsilons", "1"], "ou-2024 sweeps μ: give its privacy levels with --mus"),
    (["hu-2025", "--alphas", "1.5"], "--alphas must lie in [0, 1], got 1.5"),
    (["hu-2025", "--epsilons", "1", "--mus", "1"], "--epsilons and --mus both give privacy "
                                                   "levels"),
    (["hu-hegde-2022", "--horizon", "0"], "--horizon must be >= 1, got '0'"),
    (["hu-hegde-2022", "--horizon", "3"], "--horizon 3 is shorter than the number of arms 5"),
    (["hu-hegde-2022", "--horizon", "1e30"], "--horizon must be <= 1e9"),
    (["hu-2025", "--horizon", "12"], "--horizon 12 is too short for hu-2025"),
    (["hu-2025-equal-regret", "--horizon", "12"],
     "--horizon 12 is too short for hu-2025-equal-regret"),
    (["ou-2024-privacy", "--epsilons", "1"], "ou-2024-privacy sweeps μ: give its privacy levels "
                                             "with --mus"),
    (["ou-2024-prepull", "--horizon", "20"], "ou-2024-prepull: these overrides leave nothing to "
                                             "run"),
    (["mishra-thakurta-2015-tuned", "--policies", "dp-ucb-printed"],
     "--policies dp-ucb-printed is not a policy of mishra-thakurta-2015-tuned"),
    (["hu-hegde-2022", "--runs", "0"], "--runs must be >= 1, got '0'"),
    (["hu-hegde-2022", "--runs", "2.5"], "--runs must be an integer, got '2.5'"),
    (["hu-hegde-2022", "--seed", "-1"], "--seed must be >= 0, got '-1'"),
    (["hu-hegde-2022", "--instance", "nope"], "--instance nope is not an instance of "
                                              "hu-hegde-2022; its instances: main, appendix"),
    (["hu-hegde-2022", "--instance", "main,main"], "--instance names main twice"),
    (["azize-2025", "--policies", "ucb1"], "--policies ucb1 is not a policy of azize-2025"),
    (["hu-hegde-2022", "--means", "1.5,0.2"], "Bernoulli means must lie in [0, 1]"),
    (["hu-hegde-2022", "--means", "0.5"], "need at least 2 arms"),
    (["hu-hegde-2022", "--env", "truncexp"], "--env truncexp needs --rates"),
    (["hu-hegde-2022", "--means", "0.5,0.2", "--instance", "main"],
     "--instance picks among the experiment's instances; --means, --rates and --ab replace "
     "them: give one or the other"),
    (["mishra-thakurta-2015-contextual", "--means", "0.5,0.4"],
     "mishra-thakurta-2015-contextual runs contextual data (--instance digits, digits6, digits6-online or obd)"),
    (["mishra-thakurta-2015-contextual", "--instance", "digits", "--horizon", "5"],
     "--horizon 5 is shorter than the number of arms 10"),
    (["mishra-thakurta-2015-contextual", "--delays", "50"],
     "--delays 50 is not a delay of mishra-thakurta-2015-contextual; its delays: 0, 100, 1000"),
    (["mishra-thakurta-2015-contextual", "--delays", "-1"], "--delays must be >= 0, got '-1'"),
    (["mishra-thakurta-2015-contextual", "--delays", "0,0"], "--delays lists 0 twice"),
    (["mishra-thakurta-2015-contextual", "--delays", "0,"], "--delays has an empty item"),
    (["hu-hegde-2022", "--delays", "0"], "hu-hegde-2022 has no grid of delays to choose from"),
    (["hu-hegde-2022", "--accepted", "1e4"], "hu-hegde-2022 has no grid of accepted"),
    (["mishra-thakurta-2015-contextual", "--instance", "digits6", "--accepted", "1e4",
      "--horizon", "1e4"], "--horizon N runs n = N alone and --accepted lists the n run"),
    (["mishra-thakurta-2015-contextual", "--accepted", "1e4"],
     "--accepted sets the swept sizes of digits6, digits6-online; digits is not swept"),
    (["mishra-thakurta-2015-contextual", "--instance", "digits6", "--accepted", "5,100"],
     "--accepted 5 is fewer events than the arms 20"),
    (["mishra-thakurta-2015-contextual", "--instance", "digits6", "--accepted", "1e4,x"],
     "--accepted must be an integer, got 'x' (in '1e4,x')"),
    (["--config", "x.toml", "hu-2025"], "give an experiment NAME or --config FILE, not both"),
    ([], "name an experiment (e.g. hu-hegde-2022) or give --config FILE.toml"),
    (["--config", "{D}/missing.toml"], "no such file"),
]


def _one_line_exit_2(argv, expected, capsys, tmp_path):
    out = tmp_path / "out"
    code = main(["experiment", *argv, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, (argv, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and ": error: " in lines[0], err
    assert expected in lines[0], (expected, lines[0])
    assert not out.exists()


@pytest.mark.parametrize("argv,expected", BAD, ids=[" ".join(a) or "none" for a, _ in BAD])
def test_bad_override_one_line_exit_2(argv, expected, capsys, tmp_path):
    argv = [a.replace("{D}", str(tmp_path)) for a in argv]
    _one_line_exit_2(argv, expected, capsys, tmp_path)


# -- the custom TOML experiment ------------------------------------------------------------------

def test_custom_example_runs_at_quick_size(tmp_path):
    """examples/custom_experiment.toml at quick size (overridden down to T = 400, 2 runs for
    CI): every (instance, horizon, policy, ε) setting ran, the non-private baseline once per
    instance and horizon; the TOML is recorded with its sha256; every run.json verifies."""
    from dpledger.experiments.custom import load_custom
    from dpledger.verify import verify_report
    exp = load_custom(EXAMPLE)
    out = str(tmp_path / "c")
    assert main(["experiment", "--config", EXAMPLE, "--quick", "--horizon", "400", "--runs", "2",
                 "--out", out, "--quiet"]) == 0
    meta = _load(os.path.join(out, "experiment.json"))
    assert meta["experiment"] == exp.NAME == "custom-example"
    assert meta["config"]["file"] == "custom_experiment.toml"
    assert meta["config"]["content"]["privacy"]["levels"] == [0.25, 1.0]
    private = [e for e in exp.entries.values() if e["level_param"] == "epsilon"]
    fixed = [e for e in exp.entries.values() if e["level_param"] is None]
    assert len(private) == 3 and len(fixed) == 1
    n = len(exp.INSTANCES) * (len(private) * 2 + len(fixed))
    assert len(meta["configs"]) == len(meta["table"]) == n
    runs = glob.glob(os.path.join(out, "runs", "*.json"))
    assert len(runs) == n
    for f in runs:
        rep = _load(f)
        assert rep["horizon"] == 400 and rep["runs"] == 2
        assert verify_report(rep) == []
        eps = rep["policy"]["params"].get("epsilon")
        assert (eps in (0.25, 1.0)) == (rep["policy"]["name"] != "ucb1")
    assert "No claims" in open(os.path.join(out, "claims.md")).read()
    plots = [p for p in os.listdir(out) if p.endswith(".png")]
    assert "regret_T400.png" in plots and sum(p.startswith("tradeoff_") for p in plots) == 2


MU_TOML = """
name = "mu-study"
runs = 2
horizons = [300]
seed = 3
[privacy]
parameter = "mu"
levels = [1.0, 2.0]
match = "{match}"
[[instances]]
name = "b"
means = [0.7, 0.4, 0.3]
[[policies]]
name = "mts-gaussian"
params = {{ b = 2 }}
calibrate = "c"
[[policies]]
name = "dp-ts-ucb"
params = {{ alpha = 1.0 }}
[[policies]]
name = "ucb1"
"""


@pytest.mark.parametrize("match", ["certificate", "theorem"])
def test_custom_mu_experiment_calibrates_to_each_budget(match, tmp_path):
    """parameter = "mu": a policy with calibrate runs once per μ with the smallest c whose μ
    (by ``match``) meets it — recomputed here, and 1e-6 less misses it; policies without
    calibrate run once."""
    path = tmp_path / "mu.toml"
    path.write_text(MU_TOML.format(match=match))
    out = str(tmp_path / "o")
    assert main(["experiment", "--config", str(path), "--out", out, "--quiet"]) == 0
    meta = _load(os.path.join(out, "experiment.json"))
    rows = meta["table"]
    mts = [r for r in rows if r["policy"] == "mts-gaussian"]
    assert sorted(r["mu"] for r in mts) == [1.0, 2.0]
    for r in mts:
        c = r["calibrated_c"]
        assert gdp_mu_of("mts-gaussian", {"b": 2, "c": c}, 300, 3, match) <= r["mu"]
        assert gdp_mu_of("mts-gaussian", {"b": 2, "c": c * (1 - 1e-6)}, 300, 3, match) > r["mu"]
        assert r[f"mu_by_{match}"] <= r["mu"]
    assert [r["mu"] for r in rows if r["policy"] != "mts-gaussian"] == [None, None]


TOML_BAD = [
    ('name = "x"\n', "runs is missing"),
    ('name = "a b"\nruns = 1\n', "name must be 1–64 letters"),
    ('name = "x"\nruns = 1\nhorizons = [100]\ncolour = 1\n', "unknown key 'colour'"),
    ('name = "x"\nruns = 0\n', "runs must lie in [1, 1000000000], got 0"),
    ('name = "x"\nruns = 1\nhorizons = []\n', "horizons needs at least one T"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "delta"\nlevels = [1]\n',
     "parameter must be \"epsilon\" or \"mu\""),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "epsilon"\n'
     'levels = [0]\n', "each level must be a finite number > 0, got 0"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "epsilon"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [1.5, 0.2]\n', "instances[0]: Bernoulli means must "
                                                       "lie in [0, 1]"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "epsilon"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [0.5, 0.2]\nrates = [1, 2]\n',
     "needs exactly one of means"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "epsilon"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [0.5, 0.2]\n[[policies]]\nname = "nope"\n',
     "policies[0]: unknown policy 'nope'"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "epsilon"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [0.5, 0.2]\n[[policies]]\nname = "lazy-dp-ts"\n'
     'params = { epsilon = 2 }\n', "params sets epsilon, which the privacy levels set"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "epsilon"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [0.5, 0.2]\n[[policies]]\nname = "dp-klucb"\n'
     'params = { alpha = -1 }\n', "policies[0]: alpha"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "mu"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [0.5, 0.2]\n[[policies]]\nname = "mts-gaussian"\n'
     'calibrate = "b"\n', "calibrate needs a real-valued parameter; b of mts-gaussian is int"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "mu"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [0.5, 0.2]\n[[policies]]\nname = "dp-ts-ucb"\n'
     'calibrate = "c0"\n', "the GDP μ of dp-ts-ucb does not fall as c0 grows"),
    ('name = "x"\nruns = 1\nhorizons = [100]\n[privacy]\nparameter = "epsilon"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [0.5, 0.2]\n[[policies]]\nname = "lazy-dp-ts"\n'
     '[[policies]]\nname = "lazy-dp-ts"\n', "label 'lazy-dp-ts' is used twice"),
    ('name = "x"\nruns = 1\nhorizons = [1]\n[privacy]\nparameter = "epsilon"\nlevels = [1]\n'
     '[[instances]]\nname = "i"\nmeans = [0.5, 0.2]\n[[policies]]\nname = "ucb1"\n',
     "horizon 1 is shorter than the number of arms 2"),
    ('name = "x"\nruns = 1\nhorizons = [100\n', "malformed TOML"),
]


@pytest.mark.parametrize("text,expected", TOML_BAD, ids=[e for _, e in TOML_BAD])
def test_bad_toml_one_line_exit_2(text, expected, capsys, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    _one_line_exit_2(["--config", str(path)], expected, capsys, tmp_path)


def test_toml_overrides_apply(tmp_path):
    """The overrides address a TOML experiment too: --policies by label, --instance by name,
    --epsilons replacing its levels (the wrong flag refused)."""
    from dpledger.errors import DpledgerError
    from dpledger.experiments.custom import load_custom
    from dpledger.experiments.overrides import Overrides, check_overrides
    exp = load_custom(EXAMPLE)
    ov = Overrides(levels=(0.5,), level_option="epsilons", instances=("truncexp",),
                   policies=("dp-se", "ucb1"), horizon=100)
    check_overrides(exp, ov)
    cfgs = exp.configs(False, ov)
    assert {c.label for c in cfgs} == {"truncexp-T100-dp-se-eps0.5", "truncexp-T100-ucb1"}
    with pytest.raises(DpledgerError, match="custom-example sweeps ε: give its privacy levels "
                                            "with --epsilons, not --mus"):
        check_overrides(exp, Overrides(levels=(1.0,), level_option="mus"))


def test_claim_outside_is_never_confirmed():
    c = Claim.judged("x", True, "1 < 2", outside="ε = 3 is not among the paper's ε = 1")
    assert c.confirmed is None and c.evidence == "1 < 2 (on this run it holds)"
    assert c.line() == ("- x — **not applicable: outside the paper's setting (ε = 3 is not among "
                        "the paper's ε = 1)**: 1 < 2 (on this run it holds)")
    with pytest.raises(ValueError):
        Claim("x", True, "1", outside="why")
