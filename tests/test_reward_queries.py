"""The per-reward query layer (accounting/reward_queries.py) against brute force.

The brute force expands every reward's composition straight from the raw records — plain rows
add ``count`` releases to each reward of [start, stop); a tree record adds one release per level
ℓ < levels to the items of its completed dyadic nodes, items 1 … ⌊n/2^ℓ⌋·2^ℓ; inline Gaussian
rows add count·μ² — and composes each reward on its own (the posterior reads' per-reward μ² is
the ledger's storage evaluation, itself checked round by round in test_posterior_reads.py).
The realized maxima are then taken over every reward, or over the maximal compositions found by
:func:`dpledger.accounting.composition.maximal_compositions` (the plain O(n²) definition) over
every distinct per-reward composition.

Also here: the issue's two repros (they fail before the caps were removed: realized GDP μ 11.74
against per_run's 16.60; realized pure ε 5.12 instead of 6.0), a tie set wider than the old
256-group cut, float ranking under cancellation, and the independent check ``verify`` runs
against the ledger.
"""
from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from dpledger.accounting import realized as rz
from dpledger.accounting import reward_queries as rq
from dpledger.accounting.accountants import ACCOUNTANTS
from dpledger.accounting.composition import Composition, maximal_compositions
from dpledger.accounting.numerics import float_up, sqrt_up, sum_up
from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.releases import (DiscreteLaplaceRelease, GaussianRelease,
                                          LaplaceRelease, PureEpsilonRelease)
from dpledger.accounting.schema import delta_key, privacy_block
from dpledger.report import checks, realized_privacy

POOL = [LaplaceRelease.from_epsilon(0.5), LaplaceRelease.from_epsilon(0.1),
        LaplaceRelease(scale=8.0, sensitivity=2.0),            # ε = 0.25
        LaplaceRelease(scale=4.0, sensitivity=1.0),            # ε = 0.25 again: one normal form
        PureEpsilonRelease(0.2), DiscreteLaplaceRelease(scale=4.0, sensitivity=1),
        GaussianRelease.from_mu(0.3), GaussianRelease.from_mu(0.05)]
DELTAS = (1e-5, 1e-9)


def random_ledger(seed: int, *, T: int, runs: int, n_rows: int, max_len: int, n_gauss: int,
                  reads: bool, pool=POOL) -> RewardLedger:
    """Two arms per run, played in random stretches (segments for the posterior reads); rows,
    trees, inline Gaussian rows and posterior reads over random ranges of every stream."""
    rng = np.random.default_rng(seed)
    led = RewardLedger()
    for run in range(runs):
        acts = np.repeat(rng.integers(0, 2, T), rng.integers(1, 4, T))[:T]
        led.add_actions(run, acts)
    for (run, arm), n in led.streams().items():
        if n == 0:
            continue
        start = rng.integers(0, n, n_rows)
        stop = np.minimum(start + rng.integers(1, max_len, n_rows), n)
        rid = rng.integers(0, len(pool), n_rows)
        for s, e, r, c in zip(start.tolist(), stop.tolist(), rid.tolist(),
                              rng.integers(1, 6, n_rows).tolist(), strict=True):
            led.add(run, arm, s, e, pool[r], c)
        for _ in range(3):
            off = int(rng.integers(0, n))
            items = int(rng.integers(1, n - off + 1))
            led.add_tree(run, arm, off, items, items.bit_length(), pool[int(rng.integers(0, 6))])
        if n_gauss:
            gs = rng.integers(0, n, n_gauss)
            ge = np.minimum(gs + rng.integers(1, max_len, n_gauss), n)
            led.add_growing_prefix(run, arm, ge, rng.integers(1, 4, n_gauss),
                                   rng.choice([1e-3, 0.01, 0.37, 2.0], n_gauss), starts=gs)
        if reads and arm == 0:
            led.add_posterior_reads(run, arm, 1 + run, T - run, 2.0 + run)
    return led


def brute_compositions(led: RewardLedger) -> dict[tuple[int, int, int], Composition]:
    """Every reward's composition from the raw records (module docstring)."""
    rows, trees, g = led.rows, led.trees, led.gaussian_rows
    out = {}
    for (run, arm), n in led.streams().items():
        counts = np.zeros((n, len(led.releases)), dtype=np.int64)
        terms: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        m = (rows["run"] == run) & (rows["arm"] == arm)
        for s, e, r, c in zip(*(rows[f][m].tolist() for f in ("start", "stop", "release_id",
                                                               "count")), strict=True):
            counts[s:e, r] += c
        m = (trees["run"] == run) & (trees["arm"] == arm)
        fields = ("offset", "n_items", "levels", "release_id")
        for off, items, levels, r in zip(*(trees[f][m].tolist() for f in fields), strict=True):
            for level in range(levels):
                full = (items >> level) << level
                counts[off:off + full, r] += 1
        m = (g["run"] == run) & (g["arm"] == arm)
        for s, e, c, mu2 in zip(*(g[f][m].tolist() for f in ("start", "stop", "count", "mu2")),
                                strict=True):
            for i in range(s, e):
                terms[i].append((c, mu2))
        reads = led.posterior_read_mu2(run, arm, np.arange(n)) if len(led.posterior_reads["run"]) \
            else np.zeros(n)
        memo: dict = {}
        for i in range(n):
            mu2 = sum_up(terms[i] + [(1, float(reads[i]))])   # exact, rounded up (R6)
            sig = (counts[i].tobytes(), mu2)
            if sig not in memo:
                memo[sig] = Composition.gaussian_total(
                    mu2, [(led.releases[r], int(c)) for r, c in enumerate(counts[i]) if c])
            out[(run, arm, i)] = memo[sig]
    return out


def features(comps, forms: dict) -> np.ndarray:
    """Rows (non-Gaussian counts by normal form…, Gaussian μ²): the coordinates of domination,
    as :func:`maximal_compositions` defines them."""
    rows = []
    for c in comps:
        feat, mu2 = {}, 0.0
        for r, n in c.items:
            if isinstance(r, GaussianRelease):
                mu2 += n * r.mu2
            else:
                feat[forms.setdefault(r.normal_form(), len(forms))] = n
        rows.append((feat, mu2))
    out = np.zeros((len(rows), 16))
    for i, (feat, mu2) in enumerate(rows):
        for k, v in feat.items():
            out[i, k] = v
        out[i, -1] = mu2
    return out


def dominated_by(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each row of ``b``: is it dominated by some row of ``a`` (≥ everywhere, > somewhere)?"""
    out = np.zeros(b.shape[0], dtype=bool)
    for s in range(0, b.shape[0], 256):
        bb = b[s:s + 256]
        ge = np.all(a[:, None, :] >= bb[None, :, :], axis=2)
        gt = np.any(a[:, None, :] > bb[None, :, :], axis=2)
        out[s:s + 256] = np.any(ge & gt, axis=0)
    return out


def is_the_front(got, distinct) -> bool:
    """``got`` is exactly the set of undominated compositions among ``distinct``: each member
    is one of them and undominated, and every other one is dominated by a member."""
    forms: dict = {}
    fd, fg = features(distinct, forms), features(got, forms)
    members = set(got)
    others = [i for i, c in enumerate(distinct) if c not in members]
    return (set(got) <= set(distinct) and not dominated_by(fd, fg).any()
            and bool(dominated_by(fg, fd[others]).all()))


CASES = {
    # every reward nearly its own piece (the dense coordinate), reads on arm 0 of every run
    "dense": dict(seed=1, T=6000, runs=2, n_rows=2500, max_len=400, n_gauss=60, reads=True),
    # long streams, few breakpoints (the compressed coordinate), no Gaussians: pure currency
    "compressed": dict(seed=2, T=60000, runs=1, n_rows=3000, max_len=4000, n_gauss=0,
                       reads=False, pool=POOL[:6]),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    led = random_ledger(**CASES[request.param])
    comps = brute_compositions(led)
    distinct = list(dict.fromkeys(comps.values()))
    return request.param, led, comps, distinct, led.maximal_compositions()


def test_ledgers_have_over_1e4_distinct_signatures(case):
    _, led, comps, distinct, _ = case
    assert len(distinct) >= 10_000
    assert led.n_distinct_compositions() == len(distinct)


def test_maximal_compositions_are_the_brute_force_front(case):
    _, led, _, distinct, got = case
    assert len(got) == len(set(got))
    assert is_the_front(got, distinct)
    # and the plain definition agrees on a slice (the full O(n²) pass takes ~12 s)
    part = distinct[::9]
    assert is_the_front(maximal_compositions(part), part)


def test_worst_reward_is_the_brute_force_maximum(case):
    _, led, comps, _, _ = case
    currency = "gdp" if len(led.gaussian_rows["run"]) or len(led.posterior_reads["run"]) \
        or any(isinstance(r, GaussianRelease) for r in led.releases) else "pure"

    def value(c):
        return c.pure_epsilon() if currency == "pure" else c.gdp_mu2()

    all_runs = sorted({k[0] for k in comps})
    by_run = rq.worst_rewards_by_run(led, all_runs, DELTAS)
    for r in all_runs:
        assert by_run[r] == led.worst_reward(DELTAS, runs=[r])
    for runs in [None] + [[r] for r in all_runs]:
        pool = {k: c for k, c in comps.items() if runs is None or k[0] in runs}
        top = max(value(c) for c in pool.values())
        w = led.worst_reward(DELTAS, runs=runs)
        assert w.currency == currency
        assert w.key == (top if currency == "pure" else math.sqrt(top))
        assert value(pool[(w.reward.run, w.reward.arm, w.reward.index)]) == top
        assert w.composition == pool[(w.reward.run, w.reward.arm, w.reward.index)]


def test_realized_block_is_the_maximum_over_every_reward(case):
    name, led, comps, distinct, front = case
    block = realized_privacy(front, DELTAS, adaptive=False)
    # the scalar currencies: the maximum over every reward, exactly
    pure = max(c.pure_epsilon() for c in distinct)
    assert block["pure_epsilon"] == (pure if math.isfinite(pure) else None)
    rho = max(c.zcdp_rho() for c in distinct)
    assert block["zcdp_rho"] == rho
    # GDP and RDP ε(δ): the accountants' maximum over the brute-force front, exactly
    k, d = delta_key(DELTAS[-1]), DELTAS[-1]
    assert block["epsilon"]["gdp"][k] == max(ACCOUNTANTS["gdp"].epsilon(c, d) for c in front)
    assert block["epsilon"]["rdp"][k] == max(ACCOUNTANTS["rdp"].epsilon(c, d) for c in front)
    if len(front) <= rz.EXACT_FRONT_LIMIT:
        assert "upper_bounds" not in block
        assert block == privacy_block(front, DELTAS)
    else:
        # labelled bounds, each at least every maximal composition's own value (a sample of
        # them: the worst few by pure ε and by μ², PLD being ~50 ms each)
        label = f"bound: elementwise max over {len(front)} maximal compositions"
        assert set(block["upper_bounds"].values()) == {label}
        worst = sorted(front, key=lambda c: -c.pure_epsilon())[:2] + \
            sorted(front, key=lambda c: -c.gdp_mu2())[:2]
        for d in DELTAS:
            k = delta_key(d)
            for acc in ("pure", "pld"):
                if block["epsilon_status"][acc][k] == "ok":
                    assert "epsilon." + acc in block["upper_bounds"]
                    for c in worst:
                        if ACCOUNTANTS[acc].supports(c) == "ok" and (acc != "pld" or d >= 1e-10):
                            assert block["epsilon"][acc][k] >= ACCOUNTANTS[acc].epsilon(c, d)
            if block["epsilon_at_delta"][k] is not None:
                from dpledger.accounting.accountants import BestAccountant
                for c in worst:
                    assert block["epsilon_at_delta"][k] >= BestAccountant().epsilon(c, d) * \
                        (1 - 1e-12)


def test_scalar_maxima_sweep_agrees_with_brute_force(case):
    _, led, _, distinct, _ = case
    ref = rz.scalar_maxima(led)
    pure = max(c.pure_epsilon() for c in distinct)
    mu2 = max(c.gdp_mu2() for c in distinct)
    if math.isinf(pure):
        assert ref["pure_epsilon"] == math.inf
    else:
        assert abs(ref["pure_epsilon"] - pure) <= ref["pure_err"]
    assert abs(ref["gdp_mu2"] - mu2) <= ref["gdp_err"]
    assert ref["gdp_err"] <= 1e-9 * mu2            # the bound is tight enough to catch a loss


def test_pareto_candidates_against_pairwise_definition():
    rng = np.random.default_rng(5)
    for d in (0, 1, 3):
        ints = rng.integers(0, 6, (700, d))
        g = rng.choice([0.0, 0.5, 1.0, 1.5], 700)
        keep = set(rq.pareto_candidates(ints, g, np.zeros(700), block=64).tolist())
        ge = np.all(ints[:, None, :] >= ints[None, :, :], axis=2) & (g[:, None] >= g[None, :])
        gt = np.any(ints[:, None, :] > ints[None, :, :], axis=2) | (g[:, None] > g[None, :])
        want = set(np.flatnonzero(~np.any(ge & gt, axis=0)).tolist())
        assert keep == want
        # a tolerance only keeps more: nothing is dropped that is within it
        wide = set(rq.pareto_candidates(ints, g, np.full(700, 0.3)).tolist())
        assert want <= wide


def test_pareto_candidates_with_many_copies_equals_the_plain_scan():
    """Inputs that are mostly copies of a few points (a tree counter's records: nearly all in
    the same nodes) — the scan over distinct points, every copy of a kept one returned, gives
    what the plain scan over every point gives (which keeps all copies in its front and was
    O(n²) on them); with and without a tolerance, below and above the pruning threshold."""
    rng = np.random.default_rng(8)
    for n in (3000, 12_000):
        base = rng.integers(0, 4, (40, 3))
        base[0] = 3                                           # the common point: maximal
        gs = rng.choice([0.0, 0.25, 1.0], 40)
        gs[0] = 1.0
        pick = rng.choice(40, n, p=np.r_[0.9, np.full(39, 0.1 / 39)])
        ints, g = base[pick], gs[pick]
        for tol in (np.zeros(n), 1e-9 * g):
            got = rq.pareto_candidates(ints, g, tol)
            want = rq._pareto_scan(ints, g, tol, 512)
            assert np.array_equal(got, want)
            assert np.any(np.bincount(pick[got]) > 1000)     # the copies are all there


def test_exact_front_equals_the_plain_definition():
    """:func:`rq.exact_front` (a Pareto scan) returns what composition.maximal_compositions
    (the O(n²) definition) does, in the same order — with repeated compositions, releases of
    one normal form under two parametrisations, and Gaussian parts of equal total μ² split
    differently (equal coordinates: both kept)."""
    rng = np.random.default_rng(11)
    pool = POOL[:6]
    comps = []
    for _ in range(900):
        pairs = [(pool[i], int(rng.integers(1, 4))) for i in rng.choice(6, rng.integers(0, 4),
                                                                        replace=False)]
        if rng.random() < 0.3:
            mu2 = float(rng.choice([0.5, 1.0]))
            pairs += ([(GaussianRelease.from_mu(math.sqrt(mu2)), 1)] if rng.random() < 0.5 else
                      [(GaussianRelease.from_mu(math.sqrt(mu2 / 4)), 4)])
        comps.append(Composition.of(pairs))
    comps += comps[:50]
    want = maximal_compositions(comps)
    assert 5 < len(want) < 200
    assert rq.exact_front(comps) == want


# -- the repros, and caps that were in the old code -------------------------------------
def test_600_rewards_with_growing_laplace_counts_realize_pure_epsilon_6():
    """Reward i carries i+1 copies of Lap(ε = 0.01): the worst is reward 599 with ε = 6.0 (the
    512-group cut reported 5.12)."""
    led = RewardLedger()
    lap = LaplaceRelease.from_epsilon(0.01)
    for i in range(600):
        led.add(0, 0, i, i + 1, lap, i + 1)
    led.set_stream_length(0, 0, 600)
    comps = led.maximal_compositions()
    assert comps == [Composition.of([(lap, 600)])]
    block = realized_privacy(comps, DELTAS, adaptive=False)
    # the exact sum 600 × fl(0.01) rounded up (R6): just above 6
    exact = float_up(600 * Fraction(0.01))
    assert block["pure_epsilon"] == exact == led.worst_reward().key
    assert block["pure_epsilon"] == pytest.approx(6.0, rel=1e-15)


def test_cli_dp_ts_ucb_realized_equals_the_worst_run(tmp_path):
    """`dpledger run dp-ts-ucb --set alpha=0 --horizon 20000 --runs 40`: realized.gdp_mu was
    11.74 while per_run and worst_reward gave 16.60.  Realized is now the worst run's value,
    and verify (given the ledger) agrees."""
    from dpledger.cli import main
    out = tmp_path / "run.json"
    assert main(["run", "dp-ts-ucb", "--set", "alpha=0", "--horizon", "20000", "--runs", "40",
                 "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    real = rep["privacy"]["realized"]
    worst_run = max(p["gdp_mu"] for p in real["per_run"])
    assert worst_run == pytest.approx(16.598, abs=1e-3)
    assert real["gdp_mu"] == worst_run
    led = RewardLedger.from_json(json.loads((tmp_path / "run.ledger.json").read_text()))
    assert led.worst_reward().key == worst_run
    assert rz.check_realized(led, real) == []
    assert main(["verify", str(out)]) == 0
    # a block with bounds says so in the summary
    from dpledger.commands.show_summary import summary_text
    label = "bound: elementwise max over 70 maximal compositions"
    rep["privacy"]["realized"]["upper_bounds"] = {"epsilon.pld": label}
    rep["privacy"]["checks"]["inconclusive"] = ["epsilon.pld['1e-05']"]
    text = summary_text(rep)
    assert "realized epsilon.pld is an upper bound (elementwise max over 70 maximal " \
           "compositions), not the exact maximum" in text
    assert "inconclusive (a realized upper bound above the certificate): epsilon.pld" in text


def test_verify_with_the_ledger_catches_a_lost_composition(tmp_path):
    """A realized block recomputed from compositions that miss the worst one re-derives from
    what is stored (verify without the ledger passes), but not from the ledger."""
    from dpledger.verify import verify_report
    led = RewardLedger()
    a, b = LaplaceRelease.from_epsilon(0.3), PureEpsilonRelease(0.2)
    for i in range(12):                       # a staircase: 12 maximal compositions
        led.add(0, 0, i, i + 1, a, i + 1)
        led.add(0, 0, i, i + 1, b, 12 - i)
    led.set_stream_length(0, 0, 12)
    comps = led.maximal_compositions()
    assert len(comps) == 12
    worst = max(comps, key=lambda c: c.pure_epsilon())
    # a realized block built without the worst composition: what the 512 cut produced
    kept = [c for c in comps if c != worst]
    real = dict(realized_privacy(kept, DELTAS, adaptive=False),
                compositions=[c.to_json() for c in kept])
    assert rz.check_realized(led, dict(realized_privacy(comps, DELTAS, False),
                                       compositions=[c.to_json() for c in comps])) == []
    problems = rz.check_realized(led, real)
    assert problems and "pure_epsilon" in problems[0]
    # the same through verify_report, on a real run.json whose realized block lost its worst
    # composition (and was recomputed from the rest, so it is self-consistent)
    from dpledger.cli import main as cli_main
    out = tmp_path / "run.json"
    assert cli_main(["run", "dp-ts", "--horizon", "3000", "--runs", "2", "--seed", "0",
                     "--out", str(out), "--quiet"]) == 0
    rep = json.loads(out.read_text())
    run_led = RewardLedger.from_json(json.loads((tmp_path / "run.ledger.json").read_text()))
    comps = run_led.maximal_compositions()
    assert len(comps) > 1
    worst = max(comps, key=lambda c: c.pure_epsilon())
    kept = [c for c in comps if c.pure_epsilon() < worst.pure_epsilon()]
    assert kept
    stored = rep["privacy"]["realized"]
    stored.update(realized_privacy(kept, DELTAS_OF(rep), adaptive=False),
                  compositions=[c.to_json() for c in kept])
    stored["checks"] = None
    rep["privacy"]["checks"] = checks(rep["privacy"]["theorem"], rep["privacy"]["certificate"],
                                      stored)
    del stored["checks"]
    assert verify_report(rep) == []
    problems = verify_report(rep, run_led)
    assert any(p.startswith("privacy.realized") and ("compositions" in p or "pure_epsilon" in p)
               for p in problems), problems


def DELTAS_OF(rep):
    return [float(d) for d in rep["privacy"]["deltas"]]


def test_worst_reward_over_more_than_256_near_tied_signatures():
    """300 rewards whose pure ε step by 3e-12 relative — apart beyond the 1e-12 tie rule, all
    within the old 1e-9 candidate window, so the old 256-group cut kept rewards 0 … 255 and
    named reward 255 instead of 299."""
    led = RewardLedger()
    big = LaplaceRelease.from_epsilon(1.0)
    for i in range(300):
        led.add(0, 0, i, i + 1, big, 1000)
        led.add(0, 0, i, i + 1, PureEpsilonRelease(3e-9 * (i + 1)))
    led.set_stream_length(0, 0, 300)
    w = led.worst_reward()
    assert w.reward.index == 299
    assert w.key == math.fsum([1000.0, 3e-9 * 300]) == led.composition_of(0, 0, 299).pure_epsilon()
    assert realized_privacy(led.maximal_compositions(), DELTAS, False)["pure_epsilon"] == w.key


def test_float_ranking_under_cancellation_keeps_the_exact_maximum():
    """Two rewards of one signature: B (stream 0) with μ² = 1e-3, A (stream 1) with μ² =
    1e-3·(1 + 1e-10) right after a reward of μ² = 1e12 — its running float sum lands on
    9.77e-4 (one ulp of 1e12 is 1.2e-4).  The old 1e-9 relative window dropped A, the true
    maximum; the summation bound keeps it."""
    led = RewardLedger()
    lap = LaplaceRelease.from_epsilon(0.5)
    a = 1e-3 * (1 + 1e-10)
    led.add_growing_prefix(0, 0, [1], [1], [1e-3], starts=[0])
    led.add_growing_prefix(0, 1, [1, 2], [1, 1], [1e12, a], starts=[0, 1])
    led.add(0, 0, 0, 1, lap)
    led.add(0, 1, 1, 2, lap)
    led.set_stream_length(0, 0, 1)
    led.set_stream_length(0, 1, 2)
    pt = led.piece_totals()
    assert pt.mu2_inline[2] < 1e-3 < a                 # the float ranks A below B
    assert pt.mu2_abs_err >= abs(pt.mu2_inline[2] - a)
    want = Composition.gaussian_total(a, [(lap, 1)])
    assert set(led.maximal_compositions()) == {want, Composition.gaussian_total(1e12)}
    # the composition's own μ, rounded up (σ is stored rounded down): 1e6 to within an ulp
    key = led.worst_reward().key
    assert key == Composition.gaussian_total(1e12).gdp_mu() >= sqrt_up(1e12)
    assert key == pytest.approx(1e6, rel=1e-15)


def test_checks_count_a_bound_above_the_certificate_as_inconclusive():
    real = privacy_block([Composition.of([(LaplaceRelease.from_epsilon(1.0), 3)])], DELTAS)
    cert = privacy_block([Composition.of([(LaplaceRelease.from_epsilon(1.0), 2)])], DELTAS)
    thm = dict(cert)
    assert not checks(thm, cert, real)["realized_le_certificate"]
    bounded = dict(real, upper_bounds={"epsilon.pld": "bound: elementwise max over 70 maximal "
                                                      "compositions"})
    # pure ε itself exceeds the certificate: still a violation
    assert not checks(thm, cert, bounded)["realized_le_certificate"]
    bounded.update(pure_epsilon=cert["pure_epsilon"], epsilon=dict(
        cert["epsilon"], pld=real["epsilon"]["pld"]))
    chk = checks(thm, cert, bounded)
    assert chk["realized_le_certificate"]
    assert chk["inconclusive"] == [f"epsilon.pld[{delta_key(d)}]" for d in sorted(DELTAS,
                                                                                 reverse=True)]


def test_round_of_is_the_pull_round():
    """round_of (a binary search in the stream's segments) against the action sequence; None
    past a stream's end and for a stream without segments."""
    rng = np.random.default_rng(4)
    led = RewardLedger()
    acts = {}
    for run in (0, 2):
        acts[run] = np.repeat(rng.integers(0, 3, 400), rng.integers(1, 5, 400))
        led.add_actions(run, acts[run], first_round=1 + run)
    for run, a in acts.items():
        for arm in range(3):
            rounds = np.flatnonzero(a == arm) + 1 + run
            got = [led.round_of(run, arm, i) for i in range(rounds.size)]
            assert got == rounds.tolist()
            assert led.round_of(run, arm, rounds.size) is None
    assert led.round_of(1, 0, 0) is None


def test_small_ledgers_maximal_compositions_and_scalars_equal_brute_force():
    """Hypothesis over small ledgers (rows, trees, inline Gaussian rows, empty streams; the
    strategy and the reward-by-reward brute force of test_ledger.py): the maximal compositions
    are those of every reward's composition; the realized scalar currencies and GDP / RDP ε(δ)
    are the maxima over every reward; the sweep check agrees."""
    from hypothesis import given
    from test_ledger import SETTINGS, brute, build, ledger_ops, normalise

    @SETTINGS
    @given(ledger_ops)
    def check(ops):
        ops = normalise(ops)
        led = build(ops)
        comps, _, _, _ = brute(ops)
        distinct = list(dict.fromkeys(comps.values()))
        front = led.maximal_compositions()
        assert set(front) == set(maximal_compositions(distinct))
        block = dict(realized_privacy(front, DELTAS, adaptive=True),
                     compositions=[c.to_json() for c in front])
        if block["pure_epsilon_status"] == "unbounded":
            return
        pure = max([c.pure_epsilon() for c in distinct] or [0.0])
        assert block["pure_epsilon"] == (pure if math.isfinite(pure) else None)
        assert block["zcdp_rho"] == max([c.zcdp_rho() for c in distinct] or [0.0])
        d, k = DELTAS[0], delta_key(DELTAS[0])
        for acc in ("gdp", "rdp"):
            if block["epsilon_status"][acc][k] == "ok" and distinct:
                assert block["epsilon"][acc][k] == max(ACCOUNTANTS[acc].epsilon(c, d, True)
                                                       for c in distinct)
        assert rz.check_realized(led, block) == []

    check()
