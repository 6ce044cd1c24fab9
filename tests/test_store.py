"""The persistent ledger store (issue 15 §2, §3): transactions, crashes, readers, budgets.

* per-reward spends and compositions against a brute force over every reward (hypothesis);
* atomic budget refusal: a refused batch stores nothing (not even its new releases) and the
  error names the reward and its spend; a second writer's records are seen by the first
  writer's filter;
* crash test: a writer killed with SIGKILL at random moments, many times; every acknowledged
  record is present, nothing half-written, ``verify`` clean each time;
* concurrency: one writer, several reader processes reading snapshots while it appends; the
  readers see consistent, non-decreasing snapshots and the writer is never blocked;
* tampering is found by ``verify`` (batch checksum; a spend beyond the budget);
* CLI: init / record / status / verify / curve / show, exit codes 0/1/2.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpledger.accounting.composition import Composition
from dpledger.accounting.filters import Budget, BudgetExceeded, unit_cost, zcdp_epsilon
from dpledger.accounting.releases import (GaussianRelease, LaplaceRelease, NonPrivateRelease,
                                          PureEpsilonRelease, RdpRelease, ZcdpRelease)
from dpledger.accounting.store import LedgerStore, is_store, max_spend, verify_store
from dpledger.errors import DpledgerError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT)
POOL = [LaplaceRelease.from_epsilon(0.25), PureEpsilonRelease(0.5),
        GaussianRelease.from_mu(0.3), GaussianRelease(sigma=2.0)]


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "dpledger", *args], capture_output=True,
                          text=True, env=ENV, timeout=120, **kw)


# -- per-reward state against a brute force ---------------------------------------------------
ops = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 12),
                         st.integers(1, 6), st.integers(0, len(POOL) - 1), st.integers(1, 3)),
               min_size=1, max_size=25)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, batch=st.integers(1, 5))
def test_store_matches_brute_force(tmp_path_factory, ops, batch):
    """Stored rows give every reward the composition a reward-by-reward walk gives, the
    status names a worst reward whose composition is the brute-force maximum, and the writer's
    ρ spends (zCDP budget) bound the exact rational spends from above."""
    path = tmp_path_factory.mktemp("s") / "s.db"
    store = LedgerStore.create(path, "eps=100,delta=1e-6")
    recs = [(r, a, s, s + ln, POOL[k], c) for r, a, s, ln, k, c in ops]
    for i in range(0, len(recs), batch):
        store.append_many(recs[i:i + batch])
    brute: dict[tuple, list] = {}
    for r, a, s, e, rel, c in recs:
        for i in range(s, e):
            brute.setdefault((r, a, i), []).append((rel, c))
    led = store.to_ledger()
    for (r, a, i), pairs in brute.items():
        assert led.composition_of(r, a, i) == Composition.of(pairs)
        exact = sum(Fraction(unit_cost("zcdp", rel)) * c for rel, c in pairs)
        st_ = store._spend[(r, a)]
        j = int(np.searchsorted(st_.bp, i, side="right")) - 1
        assert Fraction(float(st_.values[j])) >= exact
        assert float(st_.values[j]) <= float(exact) * (1 + 1e-12)
    status = store.status([1e-6])
    assert status["records"] == len(recs)
    comps = [Composition.of(p) for p in brute.values()]
    # every number is the brute-force maximum over every reward; each witness has it
    assert status["privacy"]["pure_epsilon"] == _finite_or_none(max(c.pure_epsilon()
                                                                    for c in comps))
    mu2 = max(c.gdp_mu2() for c in comps)
    for key, w in status["worst_for"].items():
        have = Composition.of(brute[(w["run"], w["arm"], w["index"])])
        assert Composition.from_json(status["compositions"][w["composition"]]["composition"]) \
            == have
        if key == "pure_epsilon":
            assert have.pure_epsilon() == max(c.pure_epsilon() for c in comps)
        if key == "zcdp_rho":
            assert have.zcdp_rho() == max(c.zcdp_rho() for c in comps)
    assert any(c.gdp_mu2() == mu2 for c in
               (Composition.from_json(x["composition"]) for x in status["compositions"]))
    from dpledger.accounting.numerics import float_up
    assert status["budget_spent"] == float_up(max(
        sum(Fraction(unit_cost("zcdp", rel)) * c for rel, c in p) for p in brute.values()))
    assert verify_store(path) == []
    store.close()


# -- the status query's fast route equals the ledger's own query ------------------------------
WIDE_POOL = POOL + [LaplaceRelease.from_epsilon(0.5), GaussianRelease.from_mu(0.21)]
wide_ops = st.lists(st.tuples(st.sampled_from([0, 1, 5]),
                              st.sampled_from([0, 1, 2, (1 << 20) - 1]),
                              st.sampled_from([0, 1, 3, 7, 10, 2 ** 40]),
                              st.integers(1, 9), st.integers(0, len(WIDE_POOL) - 1),
                              st.sampled_from([1, 1, 2, 3, 2 ** 52])),
                    min_size=1, max_size=30)


def _finite_or_none(x):
    return x if np.isfinite(x) else None


def _ledger_route(store, deltas):
    """The maximal compositions, their realized privacy block and the largest spend by the
    general route: the stored rows in a RewardLedger and the ledger's own queries."""
    from dpledger.accounting.realized import realized_privacy
    data = store.rows_array()
    led = store.to_ledger(data)
    comps = led.maximal_compositions()
    return comps, realized_privacy(comps, deltas, adaptive=True), \
        (max_spend(store, data, led)[0] if store.budget else None)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=wide_ops, budget=st.sampled_from([None, "eps=1e9,delta=1e-6", "curves"]),
       deltas=st.sampled_from([[1e-6], [1e-9, 1e-3]]))
def test_fast_status_equals_ledger_route(tmp_path_factory, ops, budget, deltas):
    """``status`` (one sort of the range ends, no ledger: ``reward_queries.
    worst_reward_of_rows``) names the same worst reward with the same composition, privacy
    block and budget spend as the RewardLedger route over the same rows — with ties, gaps,
    several runs, the largest arm, indices near 2^40 (the two-key sort) and counts of 2^52
    (the fast route declines: the general route answers)."""
    path = tmp_path_factory.mktemp("f") / "f.db"
    pool = WIDE_POOL
    if budget == "curves":      # releases known by a curve or not at all: ranked by ε(δ)
        budget, pool = None, [RdpRelease((2.0, 4.0), (0.1, 0.3)), ZcdpRelease(0.05),
                              LaplaceRelease.from_epsilon(0.25), GaussianRelease.from_mu(0.3),
                              RdpRelease((1.5, 8.0), (0.05, 0.6)), ZcdpRelease(0.02)]
        if ops[0][4] == 0:
            pool = pool[:5] + [NonPrivateRelease()]
    store = LedgerStore.create(path, budget)
    store.append_many([(r, a, s, s + ln, pool[k], 1 if budget and c > 3 else c)
                       for r, a, s, ln, k, c in ops])       # 2^52 releases overflow a budget
    st_ = store.status(deltas)
    comps, block, spent = _ledger_route(store, deltas)
    assert [Composition.from_json(x["composition"]) for x in st_["compositions"]] == comps
    assert st_["privacy"] == block
    assert st_.get("budget_spent") == spent
    led = store.to_ledger()
    for x in st_["compositions"]:            # each witness reward has its composition
        r = x["reward"]
        assert led.composition_of(r["run"], r["arm"], r["index"]) == \
            Composition.from_json(x["composition"])
    store.close()


def test_fast_route_pieces_are_exact_counts():
    """Every piece's counts equal a direct count of the rows covering its first reward, the
    pieces tile exactly the covered rewards, and a count sum of 2^52 makes the route decline."""
    from dpledger.accounting.reward_queries import piece_totals_of_rows
    rng = np.random.default_rng(7)
    n = 3000
    data = np.stack([rng.integers(0, 2, n), rng.integers(0, 4, n), rng.integers(0, 500, n),
                     np.zeros(n, np.int64), rng.integers(0, 3, n), rng.integers(1, 4, n)], 1)
    data[:, 3] = data[:, 2] + rng.integers(1, 60, n)
    far = data + np.array([0, (1 << 20) - 5, 1 << 45, 1 << 45, 0, 0])    # the two-key sort
    for d in (data, far):
        pt = piece_totals_of_rows(d, 3)
        covered = set()
        for p in range(pt.start.size):
            r, a, s, e = int(pt.run[p]), int(pt.arm[p]), int(pt.start[p]), int(pt.stop[p])
            m = (d[:, 0] == r) & (d[:, 1] == a)
            for i in (s, e - 1):
                hit = m & (d[:, 2] <= i) & (i < d[:, 3])
                assert [int(d[hit & (d[:, 4] == k), 5].sum()) for k in range(3)] == \
                    pt.counts[:, p].tolist()
            covered |= {(r, a, i) for i in range(s, e)}
        brute = {(int(r), int(a), i) for r, a, s, e, *_ in d.tolist() for i in range(s, e)}
        assert covered == brute
    big = data.copy()
    big[0, 5] = 1 << 52
    assert piece_totals_of_rows(big, 3) is None


# -- budgets: atomic refusal, naming the reward -------------------------------------------------
def test_refusal_is_atomic_and_names_reward(tmp_path):
    path = tmp_path / "b.db"
    store = LedgerStore.create(path, "eps=1")
    lap = LaplaceRelease.from_epsilon(0.25)
    store.append(arm=0, start=0, stop=10, release=lap, count=3)        # 0.75 on [0, 10)
    new_rel = PureEpsilonRelease(0.125)
    with pytest.raises(BudgetExceeded) as err:
        store.append_many([(0, 1, 0, 5, new_rel, 1),                   # fits (another arm)
                           (0, 0, 8, 12, lap, 1),                      # 1.0 on [8, 10): fits
                           (0, 0, 9, 11, new_rel, 1)])                 # 1.125 at index 9
    e = err.value
    assert (e.run, e.arm, e.index) == (0, 0, 9)
    # the spend stored before the (atomic) batch, and where the batch would take it
    assert e.spent == 0.75 and e.cost == 0.375 and e.limit == 1.0
    assert "run=0 arm=0 index=9" in str(e) and "spent 0.75" in str(e) and "1.125" in str(e)
    assert store.n_records() == 1
    assert len(store.releases) == 1                    # the new release was rolled back too
    reader = LedgerStore.open(path, readonly=True)
    assert reader.n_records() == 1 and len(reader.releases) == 1
    reader.close()
    # exactly the budget fits (dyadic costs: no rounding slack)
    store.append(arm=0, start=0, stop=10, release=lap, count=1)
    with pytest.raises(BudgetExceeded):
        store.append(arm=0, start=3, stop=4, release=new_rel)
    # a Gaussian has no pure ε: refused, with the reason
    with pytest.raises(BudgetExceeded, match="no finite pure cost"):
        store.append(arm=5, start=0, stop=1, release=GaussianRelease.from_mu(0.1))
    assert verify_store(path) == [] and store.n_records() == 2
    store.close()


def test_second_writer_is_seen_by_the_filter(tmp_path):
    """Two handles on one file (two clients): each one's filter counts the other's records."""
    path = tmp_path / "w.db"
    a = LedgerStore.create(path, "mu=1")
    b = LedgerStore.open(path)
    g = GaussianRelease.from_mu(0.5)                      # μ² = 0.25
    a.append(arm=0, start=0, stop=4, release=g, count=2)
    b.append(arm=0, start=2, stop=6, release=g, count=1)
    a.append(arm=0, start=5, stop=6, release=g, count=3)  # index 5: 0.25 + 0.75 = 1
    with pytest.raises(BudgetExceeded) as err:
        b.append(arm=0, start=0, stop=3, release=g, count=2)   # index 2: 0.75 + 0.5 > 1
    assert err.value.index == 2 and err.value.spent == 0.75
    b.append(arm=0, start=0, stop=2, release=g)           # indices 0, 1: 0.75 ≤ 1
    assert a.n_records() == b.n_records() == 4
    assert verify_store(path) == []
    a.close()
    b.close()


def test_zcdp_budget_is_the_largest_admissible_rho():
    for eps, delta in ((1.0, 1e-6), (0.1, 1e-9), (8.0, 1e-5)):
        b = Budget.parse(f"eps={eps},delta={delta}")
        assert b.currency == "zcdp"
        assert zcdp_epsilon(b.limit, delta) <= eps
        assert zcdp_epsilon(b.limit * (1 + 1e-9), delta) > eps
        # independent: CKS20 Prop. 12 in mpmath at the order the conversion chose: ≤ ε
        import mpmath as mp
        from dpledger.accounting import rdp as _rdp
        mp.mp.dps = 40
        alpha = mp.mpf(_rdp.rdp_to_epsilon(_rdp.zcdp_rdp(b.limit), delta)[1])
        rho = mp.mpf(b.limit)
        f = alpha * rho + mp.log1p(-1 / alpha) - (mp.log(delta) + mp.log(alpha)) / (alpha - 1)
        assert f <= eps and f > eps * (1 - 1e-6)


@pytest.mark.parametrize("text", ["", "eps", "eps=0", "mu=-1", "eps=1,delta=2", "delta=1e-6",
                                  "eps=1,mu=1", "eps=x", "eps=1,eps=2", "rho=1"])
def test_bad_budgets(text):
    with pytest.raises(DpledgerError):
        Budget.parse(text)


def test_bad_records(tmp_path):
    store = LedgerStore.create(tmp_path / "x.db")
    lap = LaplaceRelease.from_epsilon(1.0)
    for bad in [(0, 0, 5, 5, lap, 1), (0, 0, -1, 2, lap, 1), (0, 0, 0, 2, lap, 0),
                (0, "a", 0, 2, lap, 1), (0, 0, 0.5, 2, lap, 1), (0, 0, 0, 2, "lap", 1),
                (0, -1, 0, 2, lap, 1), (0, 0, 0, 2 ** 63, lap, 1), (0, 0, 0, 2)]:
        with pytest.raises(DpledgerError):
            store.append_many([bad])
    assert store.n_records() == 0
    with pytest.raises(DpledgerError, match="already exists"):
        LedgerStore.create(tmp_path / "x.db")
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(DpledgerError, match="not a ledger store"):
        LedgerStore.open(tmp_path / "run.json")
    assert not is_store(tmp_path / "run.json") and is_store(tmp_path / "x.db")
    store.close()


# -- crash safety --------------------------------------------------------------------------------
WRITER = textwrap.dedent("""
    import sys
    from dpledger.accounting.store import LedgerStore
    from dpledger.accounting.releases import LaplaceRelease
    store = LedgerStore.open(sys.argv[1])
    lap = LaplaceRelease.from_epsilon(1e-3)
    k = store.n_records()
    while True:
        # record k touches [k, k+1) of arm k % 3; batches of 1..4 records, one transaction
        n = 1 + k % 4
        store.append_many([(0, (k + j) % 3, k + j, k + j + 1, lap, 1) for j in range(n)])
        k += n
        sys.stdout.write(f"{k}\\n"); sys.stdout.flush()     # acknowledged: committed
""")


def test_kill9_writer_loses_nothing_acknowledged(tmp_path):
    path = tmp_path / "crash.db"
    LedgerStore.create(path, "eps=1000").close()
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = np.random.default_rng(15)
    acked = 0
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                                text=True, env=ENV)
        first = proc.stdout.readline()          # at least one commit in this life
        assert first.strip(), "writer did not start"
        time.sleep(float(rng.uniform(0.0, 0.3)))
        os.kill(proc.pid, signal.SIGKILL)
        out = first + proc.stdout.read()
        proc.wait()
        proc.stdout.close()                     # no unclosed-pipe ResourceWarning
        acked = max([acked] + [int(x) for x in out.split()])
        acked = check_after_kill(path, acked)   # the next life continues from what is stored


def check_after_kill(url, acked: int) -> int:
    """After a WRITER was killed: the store verifies, holds every acknowledged record and at
    most the batch in flight (whole), with no gap or duplicate; returns its record count."""
    assert verify_store(url) == []
    with LedgerStore.open(url, readonly=True) as s:
        data = s.rows_array()
    n = data.shape[0]
    assert n >= acked                        # every acknowledged record is there
    assert n <= acked + 4                    # at most the batch in flight, whole
    assert np.array_equal(data[:, 2], np.arange(n))          # no gap, no duplicate
    assert np.array_equal(data[:, 1], np.arange(n) % 3)
    return n


# -- concurrency: one writer, several readers ------------------------------------------------
READER = textwrap.dedent("""
    import sys, time
    from dpledger.accounting.store import LedgerStore
    s = LedgerStore.open(sys.argv[1], readonly=True)
    last, reads = 0, 0
    t_end = time.time() + float(sys.argv[2])
    while time.time() < t_end:
        with s.snapshot():
            n = s.n_records()
            rows = s.rows_array()
        assert rows.shape[0] == n, (rows.shape, n)       # one consistent snapshot
        assert n >= last, (n, last)                      # never goes back
        assert (rows[:, 2] == range(n)).all()
        last, reads = n, reads + 1
    print(reads, last)
""")


def test_one_writer_several_readers(tmp_path):
    path = tmp_path / "conc.db"
    writer = LedgerStore.create(path, "eps=1e6")
    (tmp_path / "reader.py").write_text(READER)
    readers = [subprocess.Popen([sys.executable, str(tmp_path / "reader.py"), str(path), "6"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=ENV) for _ in range(3)]
    time.sleep(1.5)                    # readers up and reading
    lap = LaplaceRelease.from_epsilon(0.5)
    worst = 0.0
    for k in range(300):
        t0 = time.perf_counter()
        writer.append(arm=k % 2, start=k, stop=k + 1, release=lap)
        worst = max(worst, time.perf_counter() - t0)
    outs = [p.communicate(timeout=60) for p in readers]
    for p, (out, err) in zip(readers, outs, strict=True):
        assert p.returncode == 0, err
        reads, last = map(int, out.split())
        assert reads > 5
    # readers hold read snapshots throughout: the writer was never made to wait for them
    # (a blocked append would wait up to the 60 s busy timeout; 2 s covers fsyncs under load)
    assert worst < 2.0, worst
    assert writer.n_records() == 300
    writer.close()


# -- verify finds tampering ----------------------------------------------------------------------
def test_verify_finds_tampering(tmp_path):
    path = tmp_path / "t.db"
    s = LedgerStore.create(path, "eps=1")
    lap = LaplaceRelease.from_epsilon(0.5)
    s.append(arm=0, start=0, stop=3, release=lap)
    s.append(arm=0, start=1, stop=2, release=lap)
    s.close()
    assert verify_store(path) == []
    conn = sqlite3.connect(path)
    blob = np.array([[0, 0, 0, 3, 0, 1]], dtype="<i8").tobytes()
    import hashlib
    conn.execute("INSERT INTO batches(n, data, sha256, n_releases, link) VALUES (1, ?, ?, 1, "
                 "'')", (blob, hashlib.sha256(blob).hexdigest()))   # a write around the filter
    conn.commit()
    problems = verify_store(path)
    assert len(problems) == 3
    assert any("index=1" in p and "> budget" in p for p in problems)
    assert any("batch 3" in p and "does not link" in p for p in problems)   # the chain
    assert any("head says 2 batches" in p for p in problems)
    conn.execute("UPDATE batches SET sha256 = 'x' WHERE seq = 1")
    conn.commit()
    conn.close()
    assert any("sha256 mismatch" in p for p in verify_store(path))
    r = _cli("verify", str(path))
    assert r.returncode == 1 and "sha256" in r.stderr


def test_arms_below_2_20(tmp_path):
    """RewardLedger keys a stream run·2^20 + arm: a store arm of 2^20 in run 0 would be read
    as arm 0 of run 1 (to_ledger, verify's spends).  Such records are refused, and verify
    reports one written around the API; the fast status route keeps the streams apart."""
    path = tmp_path / "a.db"
    s = LedgerStore.create(path)
    lap = LaplaceRelease.from_epsilon(1.0)
    with pytest.raises(DpledgerError, match="arm must be below 2\\^20"):
        s.append(arm=1 << 20, start=0, stop=2, release=lap)
    s.append(arm=(1 << 20) - 1, start=0, stop=2, release=lap)
    s.append(arm=0, start=1, stop=3, release=lap, run=1)
    st_ = s.status([1e-6])
    assert [Composition.from_json(x["composition"]) for x in st_["compositions"]] \
        == [Composition.of([lap])]
    assert {(x["reward"]["run"], x["reward"]["arm"]) for x in st_["compositions"]} <= \
        {(0, (1 << 20) - 1), (1, 0)}
    s.close()
    assert verify_store(path) == []
    import hashlib
    conn = sqlite3.connect(path)
    blob = np.array([[0, 1 << 20, 0, 3, 0, 1]], dtype="<i8").tobytes()
    conn.execute("INSERT INTO batches(n, data, sha256, n_releases, link) VALUES (1, ?, ?, 1, '')",
                 (blob, hashlib.sha256(blob).hexdigest()))
    conn.commit()
    conn.close()
    assert any("arm >= 2^20" in p for p in verify_store(path))


# -- CLI -------------------------------------------------------------------------------------------
def test_cli_round_trip(tmp_path):
    path = str(tmp_path / "c.db")
    assert _cli("ledger", "init", path, "--budget", "mu=1").returncode == 0
    r = _cli("ledger", "record", path, "--arm", "1", "--start", "0", "--stop", "4",
             "gaussian:mu=0.5,count=2", "laplace:eps=0.1")
    assert r.returncode == 0, r.stderr
    r = _cli("ledger", "record", path, "--arm", "1", "--start", "3", "--stop", "5",
             "gaussian:mu=0.5,count=4")
    assert r.returncode == 2 and "index=3" in r.stderr and "nothing was stored" in r.stderr
    r = _cli("ledger", "status", path, "--json", "--delta", "1e-6")
    assert r.returncode == 0, r.stderr
    st_ = json.loads(r.stdout)
    assert st_["records"] == 2 and st_["streams"] == 1
    comp = Composition.of([(GaussianRelease.from_mu(0.5), 2), (LaplaceRelease.from_epsilon(0.1), 1)])
    assert [Composition.from_json(x["composition"]) for x in st_["compositions"]] == [comp]
    assert set(json.loads(_cli("compose", "--json", "gaussian:mu=0.5,count=2", "laplace:eps=0.1",
                               "--delta", "1e-6").stdout)) <= set(st_["privacy"])
    assert st_["privacy"]["zcdp_rho"] == comp.zcdp_rho()
    assert _cli("ledger", "status", path).returncode == 0
    assert _cli("verify", path).returncode == 0
    assert _cli("curve", path).returncode == 0
    r = _cli("show", path)
    assert r.returncode == 0 and "worst reward" in r.stdout
    for bad in (["ledger", "record", path, "--arm", "x", "--start", "0", "--stop", "1", "pure:eps=1"],
                ["ledger", "record", path, "--arm", "0", "--start", "2", "--stop", "1", "pure:eps=1"],
                ["ledger", "record", path, "--arm", "0", "--start", "0", "--stop", "1", "bogus:x=1"],
                ["ledger", "init", path], ["ledger", "init", path + "2", "--budget", "eps=-1"],
                ["ledger", "status", str(tmp_path / "missing.db")],
                ["verify", path, "--resimulate"]):
        r = _cli(*bad)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (bad, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_show_plot(tmp_path):
    """``show STORE --plot FILE`` writes a PNG (per-reward spend against the observation
    index, budget line) and prints the per-range summary; a bad --plot path is one error
    line and exit 2, before any work; an empty store writes nothing and says so."""
    path = str(tmp_path / "p.db")
    assert _cli("ledger", "init", path, "--budget", "mu=1").returncode == 0
    assert _cli("ledger", "record", path, "--arm", "1", "--start", "0", "--stop", "4",
                "gaussian:mu=0.5,count=2", "laplace:eps=0.1").returncode == 0
    assert _cli("ledger", "record", path, "--arm", "0", "--start", "2", "--stop", "9",
                "gaussian:mu=0.3").returncode == 0
    out = tmp_path / "spend.png"
    r = _cli("show", path, "--plot", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    # spends: arm 1 [0, 4): 2·0.25 + μ(ε=0.1)² ; arm 0 [2, 9): 0.09 — min and max printed
    lap_mu2 = unit_cost("gdp", LaplaceRelease.from_epsilon(0.1))
    assert "per-reward gdp spend μ²: min 0.09," in r.stdout
    assert f"max {0.5 + lap_mu2:.4g} over 2 ranges" in r.stdout
    for bad in (str(tmp_path), str(tmp_path / "x.nosuchformat"), path + "/x.png"):
        r = _cli("show", path, "--plot", bad)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (bad, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "--plot" in r.stderr
    empty = str(tmp_path / "e.db")
    assert _cli("ledger", "init", empty).returncode == 0
    r = _cli("show", empty, "--plot", str(tmp_path / "e.png"))
    assert r.returncode == 0 and "not written" in r.stdout
    assert not (tmp_path / "e.png").exists()


def test_store_paths_with_uri_characters_and_foreign_files(tmp_path):
    """A read-only open reads the file it is given: %, # and ? in a file name are escaped in
    SQLite's file: URI (q%41.db once read qA.db; h#1.db created a file h).  A foreign SQLite
    file is refused before anything is written to it (it stays in its journal mode)."""
    import sqlite3
    odd = tmp_path / "q%41 #1?.db"
    with LedgerStore.create(odd, budget="eps=1") as s:
        s.append(0, 0, 1, LaplaceRelease.from_epsilon(0.3))
    LedgerStore.create(tmp_path / "qA.db").close()
    with LedgerStore.open(odd, readonly=True) as s:
        assert s.n_records() == 1
    assert sorted(p.name for p in tmp_path.iterdir()
                  if not p.name.endswith(("-wal", "-shm"))) == [
        "q%41 #1?.db", "q%41 #1?.db.heads", "qA.db", "qA.db.heads"]     # each its head anchor
    r = _cli("ledger", "status", str(odd))
    assert r.returncode == 0 and "records: 1" in r.stdout, r.stderr
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t(x)")
    conn.commit()
    conn.close()
    with pytest.raises(DpledgerError, match="not a ledger store"):
        LedgerStore.open(foreign)
    conn = sqlite3.connect(foreign)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


@pytest.mark.parametrize("damage,needle", [
    ("UPDATE meta SET value = '{not json' WHERE key = 'budget'", "damaged ledger store"),
    ("UPDATE meta SET value = '\"eps\"' WHERE key = 'budget'", "damaged ledger store"),
    ("UPDATE releases SET json = '{nope'", "does not parse"),
    ("UPDATE batches SET data = 'text'", "rows declared"),
    ("DROP TABLE batches", "no such table: batches"),
])
def test_damaged_stores_get_one_line_errors(tmp_path, damage, needle):
    """Each damage of a store's tables ends in one clear line (exit 2) from `ledger status`,
    and `verify` reports it as a failed check — never a traceback."""
    import sqlite3
    path = tmp_path / "s.db"
    with LedgerStore.create(path, budget="eps=1") as s:
        s.append(0, 0, 1, LaplaceRelease.from_epsilon(0.3))
    conn = sqlite3.connect(path)
    conn.execute(damage)
    conn.commit()
    conn.close()
    r = _cli("ledger", "status", str(path))
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    v = _cli("verify", str(path))
    assert v.returncode != 0 and "Traceback" not in v.stderr + v.stdout, v.stderr


def test_rebuilt_spend_error_bound_does_not_grow_with_history(tmp_path):
    """After a reopen the budget check rebuilds each stream from its whole history in one
    summation; its rounding allowance must scale with the largest piece total, not with the
    history's sum (2(k + 1)·u·Σcost refused a record whose exact total 0.999999999 is within
    ε = 1 after 1e5 disjoint records of 0.1).  The admitted spend still bounds the exact one."""
    from fractions import Fraction
    path = tmp_path / "s.db"
    small = LaplaceRelease.from_epsilon(0.1)
    with LedgerStore.create(path, budget="eps=1") as s:
        s.append_many([(0, 0, i, i + 1, small, 1) for i in range(100_000)])
    big = LaplaceRelease.from_epsilon(0.9 - 1e-9)
    with LedgerStore.open(path) as s:
        assert s.append(0, 0, 1, big) == 1
        spent, where = max_spend(s, s.rows_array())
    exact = Fraction(small.sensitivity) / Fraction(small.scale) \
        + Fraction(big.sensitivity) / Fraction(big.scale)
    assert where[:3] == (0, 0, 0)
    assert Fraction(spent) >= exact and spent <= 1.0
    with LedgerStore.open(path) as s:                # and one more ε = 0.2 there is refused
        with pytest.raises(BudgetExceeded):
            s.append(0, 0, 1, LaplaceRelease.from_epsilon(0.2))


def test_counts_past_2_to_the_53_are_summed_exactly(tmp_path):
    """Counts whose sum reaches 2^53 (a huge count of a tiny Gaussian) are summed in integers:
    float64 weights rounded 2^53 + 1 down to 2^53 and under-reported the reward's μ."""
    from dpledger.accounting.releases import GaussianRelease
    g = GaussianRelease.from_mu(1e-9)
    path = tmp_path / "s.db"
    with LedgerStore.create(path) as s:
        s.append(0, 0, 1, g, count=2 ** 53)
        s.append(0, 0, 1, g, count=1)
        status = s.status()
        led = s.to_ledger()
    assert [c["count"] for c in status["compositions"][0]["composition"]] == [2 ** 53 + 1]
    assert [c for _, c in led.worst_reward().composition.items] == [2 ** 53 + 1]


@pytest.mark.parametrize("field,value,needle", [(5, -3, "count < 1"),
                                                (4, 99, "release id"),
                                                (1, -5, "negative run or arm")])
def test_rows_edited_outside_dpledger_are_refused_on_read(tmp_path, field, value, needle):
    """A batch rewritten with a valid sha256 but a bad row (count −3, an unknown release id, a
    negative arm) is refused by every read — status, record, show — with one line (exit 2),
    not read as a negative spend or a traceback; verify lists it."""
    import hashlib
    import sqlite3
    path = tmp_path / "r.db"
    with LedgerStore.create(path, budget="eps=1") as s:
        s.append(0, 0, 1, LaplaceRelease.from_epsilon(0.3))
    conn = sqlite3.connect(path)
    seq, blob = conn.execute("SELECT seq, data FROM batches").fetchone()
    rows = np.frombuffer(blob, "<i8").copy()
    rows[field] = value
    new = rows.astype("<i8").tobytes()
    conn.execute("UPDATE batches SET data = ?, sha256 = ? WHERE seq = ?",
                 (new, hashlib.sha256(new).hexdigest(), seq))
    conn.commit()
    conn.close()
    with LedgerStore.open(path, readonly=True) as s:
        with pytest.raises(DpledgerError, match=needle):
            s.rows_array()
    for cmd in (["ledger", "status", str(path)], ["show", str(path)],
                ["ledger", "record", str(path), "--arm", "0", "--start", "0", "--stop", "1",
                 "laplace:eps=0.1"]):
        r = _cli(*cmd)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert any(needle in p for p in verify_store(path))


def test_curve_on_a_store_checks_its_plot_and_prints_delta_of_epsilon(tmp_path):
    """`curve STORE` goes through curve's own path: --plot is checked before any work (a .txt
    ended in a traceback after the table, an empty name was ignored) and the δ(ε) table of
    --epsilons is printed (it was computed and dropped)."""
    path = tmp_path / "c.db"
    with LedgerStore.create(path) as s:
        s.append(0, 0, 1, LaplaceRelease.from_epsilon(0.5))
    r = _cli("curve", str(path), "--epsilons", "0.1,1", "--deltas", "1e-5", "--wide")
    assert r.returncode == 0 and "δ(ε)" in r.stdout and "realized/pure" in r.stdout, r.stderr
    for bad in (str(tmp_path / "x.txt"), ""):
        r = _cli("curve", str(path), "--plot", bad)
        assert r.returncode == 2 and "--plot" in r.stderr and "Traceback" not in r.stderr
        assert "ε(δ)" not in r.stdout
