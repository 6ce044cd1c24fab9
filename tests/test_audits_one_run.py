"""One-run audits with canaries (issue 33 §1; audits/one_run.py, docs/audits.md#one-run-audits).

* the theorem's p-value against closed forms (δ = 0: every guess right is q^k) and against an
  independent evaluation of the δ term (a double loop over the binomial pmf);
* validity by simulation of the theorem's own extreme case (randomized response, where the
  number of correct guesses is exactly Binomial(k, q)): the bound exceeds ε at most α of the
  time (seeded; the count must stay below the Binomial(n, α) 99.9 % quantile);
* no false alarm on correct policies over seeds (reduced size here; the full count is
  ``benchmarks/bench_one_run.py --false-alarms``);
* the scores never read the captured clean sums (which hold the coins);
* the planted bug (dp-klucb renoise-cumulative, stated ε = 0.5) caught by one run;
* bad input: one line, exit 2.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from dpledger.audits import one_run as orun
from dpledger.cli import main
from dpledger.policies.registry import make_policy


def test_p_value_closed_form_all_right():
    """δ = 0, v = r = k: P[Binom(k, q) ≥ k] = q^k, so the bound is logit(α^{1/k})."""
    for k, a in ((10, 0.05), (300, 0.01), (1000, 0.05)):
        e = orun.epsilon_lower(1000, k, k, a)
        q = a ** (1.0 / k)
        exact = math.log(q / (1.0 - q))
        assert orun.one_run_p_value(1000, k, k, e) <= a          # the returned ε is rejected
        assert e == pytest.approx(exact, abs=1e-9)
        assert orun.one_run_p_value(1000, k, k, exact) == pytest.approx(a, rel=1e-9)


def test_p_value_delta_term_independent_evaluation():
    """The δ term, 2mδ·max_i P[v − i ≤ B < v]/i, by a plain double loop."""
    m, r, v, e, d = 500, 40, 31, 0.7, 1e-4
    q = math.exp(e) / (1 + math.exp(e))
    pmf = [math.comb(r, j) * q ** j * (1 - q) ** (r - j) for j in range(r + 1)]
    tail = sum(pmf[v:])
    worst = max(sum(pmf[v - i:v]) / i for i in range(1, v + 1))
    assert orun.one_run_p_value(m, r, v, e, d) == pytest.approx(tail + 2 * m * d * worst,
                                                                rel=1e-10)
    # the vectorised form used for GDP agrees
    assert orun._p_values(m, r, v, np.array([e]), np.array([d]))[0] == pytest.approx(
        orun.one_run_p_value(m, r, v, e, d), rel=1e-12)


def test_gdp_p_value_is_monotone_and_valid_at_ceiling():
    """μ-GDP's p-value grows with μ (its δ_μ(ε) does), so μ_lower is well defined; all guesses
    right at k = m is the ceiling, and the ceiling grows with m."""
    ps = [orun.gdp_p_value(1000, 100, 80, mu) for mu in (0.2, 0.5, 1.0, 2.0)]
    assert ps == sorted(ps)
    assert orun.method_ceiling(100, [100], 0.05, "mu") < orun.method_ceiling(1000, [1000], 0.05,
                                                                              "mu")


def test_randomized_response_false_alarm_rate():
    """The theorem's extreme case: ε-randomized response per canary makes the correct count
    exactly Binomial(k, q).  Over 4000 seeded draws at α = 0.2 the bound exceeds ε no more often
    than the Binomial(4000, 0.2) 99.9 % quantile (a correct implementation fails with ≤ 0.1 %)."""
    gen = np.random.default_rng(20261202)
    eps, k, n, a = 1.0, 200, 4000, 0.2
    q = math.exp(eps) / (1 + math.exp(eps))
    vs = gen.binomial(k, q, size=n)
    # the bound exceeds ε exactly when the p-value at ε is ≤ α (p increases with ε)
    over = sum(orun.one_run_p_value(k, k, int(v), eps) <= a for v in vs)
    assert over <= stats.binom.ppf(0.999, n, a)
    assert over > 0           # the test can fail: at α = 0.2 some draws do reject ε
    lows = [orun.epsilon_lower(k, k, int(v), a) for v in vs[:20]]
    assert sum(lo > eps for lo in lows) == sum(orun.one_run_p_value(k, k, int(v), eps) <= a
                                               for v in vs[:20])


@pytest.mark.audit_violations_expected(reason="counts violations at rate <= alpha = 0.2")
@pytest.mark.parametrize("name", ["lazy-dp-ts", "adap-ucb"])
def test_no_false_alarm_over_seeds(name):
    """30 seeds of a correct policy (m = 100 canaries, confidence 0.8): the count of bounds
    above the certificate stays below the Binomial(30, 0.2) 99.9 % quantile; the full count
    (1000 seeds) is benchmarks/bench_one_run.py --false-alarms."""
    pol = make_policy(name, epsilon=1.0)
    over = 0
    lows = []
    for seed in range(30):
        r = orun.audit_one_run(pol, canaries=100, seed=seed, confidence=0.8)
        lows.append(r.lower)
        over += r.lower > r.certified
    assert over <= stats.binom.ppf(0.999, 30, 0.2)
    assert max(lows) > 0.0                  # the audit has power at all


def test_scores_ignore_the_clean_sums():
    """The captured clean sums hold the coins; the score must not read them: wiping them leaves
    every score unchanged."""
    pol = make_policy("lazy-dp-ts", epsilon=1.0)
    design = orun.one_run_design(pol, 50)
    coins = np.random.default_rng(1).integers(0, 2, 50).astype(np.int8)
    from dpledger.policies.environments import table
    env = table(design.table(coins))
    actions, rows, cap = orun._run_once(pol, env, design.horizon, design.arms,
                                        np.random.default_rng(2), True)
    s1, info = orun.whitebox_scores(actions, cap, design, design.arms)
    cap2 = cap.copy()
    cap2[1] = np.nan
    s2, _ = orun.whitebox_scores(actions, cap2, design, design.arms)
    assert np.array_equal(s1, s2)
    assert info["releases_per_canary"] == {"min": 1, "max": 1, "mean": 1.0}
    # each canary alone in its release: the score is the exact Laplace LLR, ±ε at the atoms
    assert np.all(np.abs(s1) <= 1.0 + 1e-12)
    assert np.mean((s1 > 0) == (coins == 1)) > 0.55
    orun.check_ledger_names_captures(rows, cap)
    # another declared range: the kernels rescale rewards to [0, 1], the scores are unchanged
    d10 = orun.one_run_design(pol, 50, lo=0.0, hi=10.0)
    env10 = table(d10.table(coins), 0.0, 10.0)
    a10, _, cap10 = orun._run_once(pol, env10, d10.horizon, d10.arms, np.random.default_rng(2),
                                   True)
    assert np.allclose(orun.whitebox_scores(a10, cap10, d10, d10.arms)[0], s1)
    with pytest.raises(Exception, match="ledger misses"):
        orun.check_ledger_names_captures(rows[:, 1:], cap)


def test_planted_bug_caught_by_one_run():
    """dp-klucb renoise-cumulative at ε = 0.5: the paper states 0.5 per reward; each canary (an
    arm's first reward) enters every later release of its arm, and one run with 300 canaries
    puts the lower bound far above 0.5 — below the variant's own (honest) certificate.  The
    paper's mechanism, same design and seed, is not contradicted."""
    bug = orun.audit_one_run(make_policy("dp-klucb", epsilon=0.5, mechanism="renoise-cumulative"),
                             canaries=300, seed=0, claim=0.5)
    j = bug.to_json()
    assert j["claim"]["contradicted"] and j["lower"] > 1.0
    assert j["lower"] <= j["certified"] and j["releases_per_canary"]["min"] >= 5
    ok = orun.audit_one_run(make_policy("dp-klucb", epsilon=0.5), canaries=300, seed=0,
                            claim=0.5).to_json()
    assert not ok["claim"]["contradicted"] and ok["releases_per_canary"]["max"] == 1
    assert ok["ratio_of_ceiling"] < 0.2 and 0 < j["ratio_of_ceiling"] <= 1


def test_contextual_one_run_jdp_linucb():
    """jdp-linucb (accounted): canary records spaced 2^3 apart; every canary alone in 3–4 nodes;
    the bound stays below the certificate's μ."""
    from dpledger.audits.one_run_contextual import audit_one_run_contextual
    r = audit_one_run_contextual(make_policy("jdp-linucb", calibration="accounted"),
                                 canaries=60, seed=1)
    j = r.to_json()
    assert j["currency"] == "mu" and j["solo_nodes_per_canary"]["min"] >= 3
    assert 0.0 <= j["lower"] <= j["certified"]
    assert j["design"]["horizon"] == 480


def _cli(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _gaussian_run(name, m, **params):
    """One white-box run of a Gaussian-mean policy on its one-run design: (policy, design,
    coins, actions, rows, capture)."""
    from dpledger.policies.environments import table
    pol = make_policy(name, **params)
    design = orun.one_run_design(pol, m)
    coins = np.random.default_rng(3).integers(0, 2, m).astype(np.int8)
    actions, rows, cap = orun._run_once(pol, table(design.table(coins)), design.horizon,
                                        design.arms, np.random.default_rng(4), True)
    return pol, design, coins, actions, rows, cap


@pytest.mark.parametrize("name, params, mu2", [
    # M-TS-Gaussian b = 1: a canary is its arm's first reward (round-robin pre-pull), read by
    # each of the 16 rounds after the pre-pulls at k = 1 while its arm is not pulled again:
    # μ² = 16 · 1/(c(k+1)) = 8
    ("mts-gaussian", {"b": 1}, 8.0),
    # DP-TS-UCB α = 0.5: the canary is its arm's n = 1 epoch model, sampled fresh in each of
    # the 16 rounds after the initial pulls (budget φ ≥ 16): μ² = 16 / ln(T)^α
    ("dp-ts-ucb", {}, None)])
def test_gaussian_whitebox_score_is_the_exact_llr(name, params, mu2):
    """For a canary whose arm is never pulled again the score is the Neyman–Pearson statistic
    of its reads: N(±μ²/2, μ²) given its coin, μ² recomputed here from the design — a KS test
    of the standardised scores (seeded; fails with probability 10⁻³ if correct).  The captured
    clean means hold the coins and are never read."""
    m = 400
    pol, design, coins, actions, rows, cap = _gaussian_run(name, m, **params)
    T, K = design.horizon, design.arms
    assert (T, K) == (m + 16, m) and np.array_equal(actions[:m], np.arange(m))
    if mu2 is None:
        mu2 = 16.0 / math.log(T) ** 0.5
    if name == "mts-gaussian":
        orun.check_posterior_reads(pol, actions, cap, K)
        rel = orun.Releases.from_posterior(cap, actions, K)
        wiped = cap.copy()
        wiped[1] = np.nan
        rel2 = orun.Releases.from_posterior(wiped, actions, K)
    else:
        orun.check_ledger_names_captures(rows, cap)
        rel = orun.Releases.from_capture(cap, gaussian=True)
        wiped = cap.copy()
        wiped[1, 1:] = np.nan
        rel2 = orun.Releases.from_capture(wiped, gaussian=True)
    s, info = orun.whitebox_scores(actions, None, design, K, rel)
    assert np.array_equal(s, orun.whitebox_scores(actions, None, design, K, rel2)[0])
    alone = np.bincount(actions[m:], minlength=K) == 0          # never pulled again
    assert alone.sum() > 0.8 * m and info["canaries_per_release_max"] == 1
    z = (s[alone] - (2.0 * coins[alone] - 1.0) * mu2 / 2.0) / math.sqrt(mu2)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # the certificate's worst reward is read as often at k = 1 (b = 1) or as one n = 1 model:
    j = orun.audit_one_run(pol, canaries=m, seed=0).to_json()
    assert j["certified"] == pytest.approx(math.sqrt(mu2), rel=1e-9)
    assert 0.0 < j["lower"] <= j["ceiling"] and j["lower"] <= j["certified"]


def test_posterior_reads_checked_against_the_ledger_record():
    """TS-Gaussian: a captured read whose σ is not √(c/(k+1)) (or a round its record does not
    name) is refused; TS-Gaussian has no initial pulls, so canaries share arms."""
    pol, design, coins, actions, rows, cap = _gaussian_run("ts-gaussian", 60)
    orun.check_posterior_reads(pol, actions, cap, design.arms)
    bad = cap.copy()
    bad[2, 5 * design.arms + 3] *= 0.5
    with pytest.raises(Exception, match="sigma"):
        orun.check_posterior_reads(pol, actions, bad, design.arms)
    bad = cap.copy()
    bad[0, :design.arms] = np.nan
    with pytest.raises(Exception, match="posterior reads differ"):
        orun.check_posterior_reads(pol, actions, bad, design.arms)
    assert "mapped to the arm played there" in design.description


def test_gaussian_capture_refused_when_it_does_not_fit(monkeypatch):
    """The full posterior capture is T·K reads: refused in one line when it does not fit."""
    import dpledger.resources as res
    monkeypatch.setattr(res, "available_memory", lambda: 50 << 20)
    with pytest.raises(Exception, match="needs about .* available; use fewer --canaries"):
        orun.audit_one_run(make_policy("ts-gaussian"), canaries=1000)


def test_cli_one_run_and_claim(tmp_path, capsys):
    out = tmp_path / "a.json"
    code, so, se = _cli(capsys, "audit", "dp-klucb", "--set", "epsilon=0.5", "--set",
                        "mechanism=renoise-cumulative", "--mode", "whitebox", "--one-run",
                        "--canaries", "200", "--claim", "0.5", "--quiet", "--out", str(out))
    j = json.loads(out.read_text())
    assert code == 1 and j["claim"]["contradicted"] and "claim" in se
    code, so, _ = _cli(capsys, "audit", "lazy-dp-ts", "--mode", "whitebox", "--one-run",
                       "--canaries", "100", "--out", str(out))
    assert code == 0 and "from one run" in so and "ceiling at m = 100" in so


@pytest.mark.parametrize("argv, fragment", [
    (["lazy-dp-ts", "--one-run", "--canaries", "500", "--horizon", "100", "--arms", "2"],
     "larger than the horizon"),
    (["lazy-dp-ts", "--canaries", "10", "--trials", "100"], "add --one-run"),
    (["lazy-dp-ts", "--one-run"], "needs --canaries"),
    (["lazy-dp-ts", "--one-run", "--canaries", "10", "--trials", "100"], "--trials does not"),
    (["dp-se", "--mode", "whitebox", "--one-run", "--canaries", "10"],
     "does not capture"),
    (["lazy-dp-ts", "--one-run", "--canaries", "10", "--guesses", "11"], "--guesses must"),
    (["lazy-dp-ts"], "--trials is required"),
    # m > T, and canaries for policies with no such position
    (["dp-ucb", "--mode", "whitebox", "--one-run", "--canaries", "100", "--horizon", "50"],
     "need T >= 1585"),
    (["jdp-linucb", "--mode", "whitebox", "--one-run", "--canaries", "100", "--horizon", "50"],
     "larger than the horizon T = 50"),
    (["dp-ts-ucb", "--mode", "whitebox", "--one-run", "--canaries", "100", "--horizon", "60",
      "--arms", "2"], "larger than the horizon T = 60"),
    (["ucb1", "--one-run", "--canaries", "10"], "makes no private release"),
    (["laplace:eps=1", "--one-run", "--canaries", "10"], "not release specs"),
])
def test_cli_bad_inputs(tmp_path, capsys, argv, fragment):
    out = tmp_path / "a.json"
    code, so, se = _cli(capsys, "audit", *argv, "--out", str(out))
    assert code == 2 and fragment in se and len(se.strip().splitlines()) == 1
    assert not out.exists()
