"""DP-KLUCB, DP-IMED, IMED and the re-noising variant through `dpledger run` + `dpledger verify`
(issue 17, "what must be shown"): certificates ε, ε, none, and the composed value.

The composed value of ``mechanism=renoise-cumulative`` is checked two independent ways: against
the phase chain 1 → max(n + 1, ⌈αn⌉) → … recomputed here from each arm's pull count (a reward
of an arm with n pulls enters one release per completed phase of that arm), and against a count
of the ledger rows covering each reward, read from the ledger file.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpledger.accounting.releases import LaplaceRelease

T, R, EPS, ALPHA = 20_000, 2, 0.5, 1.5


def _main(*args) -> int:
    from dpledger.cli import main
    try:
        return main(list(args))
    except SystemExit as exc:
        return exc.code


def _chain_phases(n: int, alpha: float) -> int:
    """Completed phases of an arm pulled n times: the initial pull, then every phase whose
    target count max(m + 1, ⌈αm⌉) is ≤ n (independent of policies/rules.phase_target)."""
    m, k = 1, 1
    while True:
        nxt = max(m + 1, math.ceil(round(alpha * m, 9)))
        if nxt > n:
            return k
        m, k = nxt, k + 1


def _run_and_verify(tmp_path, *args):
    out = tmp_path / "run.json"
    assert _main("run", *args, "--horizon", str(T), "--runs", str(R), "--seed", "1",
                 "--quiet", "--out", str(out)) == 0
    assert _main("verify", str(out)) == 0
    rep = json.loads(out.read_text())
    ledger = json.loads((tmp_path / rep["ledger"]["file"]).read_text())
    return rep, ledger


def _coverage(ledger) -> dict:
    """{(run, arm): array of how many Laplace ledger rows cover each observation index}."""
    streams = ledger["streams"]
    cov = {(r, a): np.zeros(n, np.int64)
           for r, a, n in zip(streams["run"], streams["arm"], streams["length"], strict=True)}
    rows = ledger["rows"]
    for r, a, s, e in zip(rows["run"], rows["arm"], rows["start"], rows["stop"], strict=True):
        cov[(r, a)][s:e] += 1
    return cov


@pytest.mark.parametrize("name", ["dp-klucb", "dp-imed"])
def test_phase_sums_certificate_is_epsilon(name, tmp_path):
    rep, ledger = _run_and_verify(tmp_path, name, "--set", f"epsilon={EPS}")
    lap = LaplaceRelease(scale=1.0 / EPS, sensitivity=1.0).epsilon
    p = rep["privacy"]
    assert p["certificate"]["pure_epsilon"] == lap == p["theorem"]["pure_epsilon"] == EPS
    assert p["realized"]["pure_epsilon"] == lap
    assert p["checks"]["realized_le_certificate"] and p["checks"]["certificate_le_theorem"]
    # each reward in at most one release (exactly one, but for the tail of a phase cut by T)
    assert ledger["releases"] == [{"kind": "laplace", "scale": 1.0 / EPS, "sensitivity": 1.0}]
    for (r, a), c in _coverage(ledger).items():
        assert c.max() == 1, (r, a)
        done = np.flatnonzero(c == 0)
        assert done.size == 0 or done[0] > 0 and np.all(c[done[0]:] == 0), (r, a)


def test_imed_has_no_certificate(tmp_path):
    rep, ledger = _run_and_verify(tmp_path, "imed")
    p = rep["privacy"]
    for block in ("theorem", "certificate", "realized"):
        assert p[block]["pure_epsilon"] is None
        assert p[block]["pure_epsilon_status"] == "unbounded", block
    assert p["certificate"]["gdp_mu_status"] == "unbounded"
    # the ledger says so honestly: one non-private release over each arm's whole stream
    assert ledger["releases"] == [{"kind": "non_private"}]
    for (r, a), c in _coverage(ledger).items():
        assert np.all(c == 1), (r, a)


@pytest.mark.parametrize("name", ["dp-klucb", "dp-imed"])
def test_renoise_cumulative_certificate_is_the_composed_value(name, tmp_path):
    rep, ledger = _run_and_verify(tmp_path, name, "--set", f"epsilon={EPS}",
                                  "--set", "mechanism=renoise-cumulative")
    lap = LaplaceRelease(scale=1.0 / EPS, sensitivity=1.0).epsilon
    p = rep["privacy"]
    m_cert = _chain_phases(T, ALPHA)           # the most phases one arm can complete
    assert m_cert == 24
    assert p["certificate"]["pure_epsilon"] == pytest.approx(m_cert * lap, rel=1e-12)
    assert p["certificate"]["pure_epsilon"] >= m_cert * EPS        # rounded outward, never in
    assert p["theorem"]["pure_epsilon"] >= p["certificate"]["pure_epsilon"]
    # realized: the worst reward is an arm's first, read once per completed phase of its arm
    cov = _coverage(ledger)
    st = ledger["streams"]
    worst = max(_chain_phases(n, ALPHA) for n in st["length"])
    assert max(int(c.max()) for c in cov.values()) == worst
    for c in cov.values():                        # observation 0 lies in every release
        assert c[0] == _chain_phases(c.size, ALPHA)
        assert np.all(np.diff(c) <= 0)            # prefixes: earlier rewards in more releases
    assert p["realized"]["pure_epsilon"] == pytest.approx(worst * lap, rel=1e-12)
    assert worst * EPS > 10 * EPS                 # far above the paper mechanism's ε
    wr = p["realized"]["worst_reward"]
    assert wr["index"] == 0
    assert p["checks"]["realized_le_certificate"] and p["checks"]["certificate_le_theorem"]
