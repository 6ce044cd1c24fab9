"""The step form's live-serving guarantees (issue 24 §1): record before draw, restart without
double spending (a kill -9 test at random points), late and out-of-order rewards, and one-line
refusals of bad input."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from dpledger.accounting.filters import BudgetExceeded
from dpledger.accounting import store_checkpoint as ckpt
from dpledger.accounting.store import LedgerStore, verify_store
from dpledger.errors import DpledgerError
from dpledger.policies.registry import make_policy
from dpledger.policies import online
from dpledger.policies import step as step_mod

HERE = os.path.dirname(os.path.abspath(__file__))


class Killed(BaseException):
    """A process dying at a chosen point (raised by a patched method)."""


def _serve_late(p, rounds: int, lag: int, reward, last: float, seed: int) -> None:
    """Serve ``rounds`` selections with rewards late and out of order: once more than 2·lag
    tickets are outstanding, lag of them, shuffled, are observed (``reward(rng, arm)``); the
    rest at the end, with reward ``last``."""
    rng = np.random.default_rng(seed)
    pending = []
    for _ in range(rounds):
        pending.append(p.select())
        if len(pending) > 2 * lag:
            rng.shuffle(pending)
            for t in pending[:lag]:
                p.observe(t, reward(rng, t.arm))
            pending = pending[lag:]
    for t in pending:
        p.observe(t, last)


def _serve(p, table, rounds):
    for _ in range(rounds):
        t = p.select()
        p.observe(t, table[t.round - 1, t.arm])


def test_records_are_stored_before_the_noise_is_drawn(tmp_path, monkeypatch):
    """At every draw, the release being drawn is already committed to the store (read by a
    second connection)."""
    path = tmp_path / "s.db"
    p = online("lazy-dp-ts", 3, store=path, seed=1, epsilon=1.0)
    reader = LedgerStore.open(path, readonly=True)
    seen = []
    real = step_mod.laplace_step

    def spy(box, env, scale, sens):
        seen.append(reader.n_records())
        return real(box, env, scale, sens)
    monkeypatch.setattr("dpledger.policies.step_rules.laplace_step", spy)
    table = np.random.default_rng(0).random((200, 3))
    _serve(p, table, 200)
    assert len(seen) >= 10
    assert seen == list(range(1, len(seen) + 1))    # draw k happens after record k committed
    reader.close()
    p.close()


def test_crash_between_record_and_draw_resumes_with_the_same_release(tmp_path, monkeypatch):
    """A process dying after a record is committed and before its noise is drawn: the resumed
    policy finishes that release with the noise the saved generator gives — the very value an
    uninterrupted run draws — and records nothing twice."""
    table = np.random.default_rng(3).random((120, 3))
    ref = online("lazy-dp-ts", 3, seed=4, epsilon=0.5)
    _serve(ref, table, 120)

    path = tmp_path / "s.db"
    p = online("lazy-dp-ts", 3, store=path, seed=4, epsilon=0.5)
    _serve(p, table, 60)
    n_before = p.store.n_records()

    def die(self, due):
        raise Killed
    monkeypatch.setattr(step_mod.OnlinePolicy, "_draw", die)
    with pytest.raises(Killed):
        _serve(p, table, 60)                 # stops at the next release, after its record
    assert p.store.n_records() == n_before + 1
    rounds = p.t
    p.store.close()
    monkeypatch.undo()

    q = online("lazy-dp-ts", 3, store=path, seed=4, epsilon=0.5, take_over=True)
    assert q.generation == 1 and q.t == rounds
    assert q.store.n_records() == n_before + 1              # nothing recorded again
    # the interrupted release was finished with the uninterrupted run's noise: same statistics
    mu_ref = None
    ref2 = online("lazy-dp-ts", 3, seed=4, epsilon=0.5)
    _serve(ref2, table, rounds)
    mu_ref = ref2.rule.state["mu"]
    assert np.array_equal(q.rule.state["mu"], mu_ref)
    # and the generator moved on to a stream no earlier generation used
    assert q.rng.bit_generator.state != ref2.rng.bit_generator.state
    q.close()
    assert verify_store(path) == []


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["lazy-dp-ts", "dp-ucb", "jdp-linucb"])
def test_kill_9_at_random_points_never_double_spends(store_url, policy):
    """CI: 3 restarts (≈ 10 s) on each backend, for a lazy policy (one release per reward), a
    tree counter (each reward in up to 1 + ⌈log₂ T⌉ nodes, resumed mid-tree) and a
    record-private contextual policy (one tree over all records); DPLEDGER_FULL=1: 12."""
    _kill_test(store_url, restarts=12 if os.environ.get("DPLEDGER_FULL") else 3, policy=policy)


def _server_env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(HERE)] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))


def _kill_test(path, restarts, policy="lazy-dp-ts"):
    """A server killed with SIGKILL at random moments and restarted: the ledger verifies, no
    release was recorded twice (same stream, range and release), and no record lost more
    privacy than one uninterrupted run lets it: Lazy-DP-TS, every reward in at most one release
    (pure ε ≤ 0.5); DP-UCB, pure ε ≤ its certificate at T = 4000; jdp-linucb, ε(δ = 0.1) ≤ the
    requested 1 (its accounted σ meets it exactly); every restart took a new generation."""
    rng = np.random.default_rng(17)
    env = dict(_server_env(), STEP_POLICY=policy)
    for k in range(restarts):
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "step_server.py"), path,
                                 str(k)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, cwd=os.path.dirname(HERE))
        first = proc.stdout.readline()        # "start T": resumed
        assert first.startswith(b"start"), proc.stderr.read().decode()[-2000:]
        # a few steps served (compiled, and past the first releases, however loaded the
        # machine), or the horizon; then killed at a random moment
        for _ in range(8):
            if not proc.stdout.readline():
                break
        time.sleep(float(rng.uniform(0.05, 0.6)))
        proc.kill()
        proc.wait()
    assert verify_store(path) == []
    with LedgerStore.open(path, readonly=True) as store:
        st = store.status([0.1])
        assert st["records"] > 3
        # no release made twice: every (run, stream, first, last observation, release) once
        keys = store.rows_array()[:, :5]
        assert np.unique(keys, axis=0).shape[0] == keys.shape[0]
        if policy == "lazy-dp-ts":
            assert st["privacy"]["pure_epsilon"] <= 0.5        # one Lap(2) release per reward
        elif policy == "dp-ucb":
            cert = make_policy("dp-ucb", epsilon=0.5).certificate(4000, 3)
            bound = max(c.pure_epsilon() for c in cert.compositions)
            assert 0 < st["privacy"]["pure_epsilon"] <= bound
        else:
            assert 0 < st["privacy"]["epsilon_at_delta"]["0.1"] <= 1.0
        gen = store.checkpoint("online/run-0/generation")
        assert gen is not None and ckpt.generation_of(gen[1]) == restarts - 1


def test_racing_servers_on_one_run_one_serves(store_url):
    """Three servers started at once on one store (made by ``ledger init`` first, as a
    deployment does), all opening run 0 with the *same* seed (issue 30 §1: replicas of one run
    would hold copies of one tree state and generator, and draw the same noise on different
    records).  Exactly one takes the run's lease and serves; the other two are refused with one
    line naming the live server, having written nothing; the ledger verifies and no reward's
    spend passes the budget."""
    LedgerStore.create(store_url, budget="eps=0.5").close()
    env = _server_env()
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "step_server.py"), store_url,
                               "7", "150"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, cwd=os.path.dirname(HERE))
             for _ in range(3)]
    for proc in procs:
        assert proc.stdout.readline().strip() == b"ready", proc.stderr.read().decode()[-2000:]
    for proc in procs:
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
        outs.append(out.decode().splitlines())
    served = [o for o in outs if o[0].startswith("serving")]
    held = [o for o in outs if o[0].startswith("lease-held")]
    assert len(served) == 1 and len(held) == 2
    assert served[0][0] == "serving generation 0"
    for o in held:
        assert len(o) == 1 and "run 0 is served by another live process" in o[0]
    assert verify_store(store_url) == []
    with LedgerStore.open(store_url, readonly=True) as store:
        st = store.status()
        assert st["records"] > 3
        assert st["privacy"]["pure_epsilon"] <= 0.5 and st["budget_spent"] <= 0.5
        gen = store.checkpoint("online/run-0/generation")
        assert ckpt.generation_of(gen[1]) == 0            # the refused took no generation
        assert store.checkpoint("online/run-0/lease") is None    # given back at close


def test_late_and_out_of_order_rewards(tmp_path):
    """Tickets observed in a shuffled order, several rounds late: every reward still lies in
    exactly one release (pure ε = ε per reward), the ledger verifies."""
    p = online("adap-ucb", 4, store=tmp_path / "s.db", seed=2, epsilon=0.5)
    _serve_late(p, 600, 10, lambda rng, arm: float(rng.random() < 0.3 + 0.1 * arm), 1.0, seed=0)
    st = p.store.status()
    assert st["privacy"]["pure_epsilon"] == 0.5
    assert p.store.n_records() > 12
    p.close()
    assert verify_store(tmp_path / "s.db") == []


def test_budget_refusal_freezes_the_arm_and_records_nothing(tmp_path):
    """A per-reward budget below one release: the first release is refused (BudgetExceeded, a
    DpledgerError), nothing is stored, the arm is frozen and play goes on."""
    p = online("lazy-dp-ts", 2, store=tmp_path / "s.db", budget="eps=0.4", seed=0,
               epsilon=0.5)
    t = p.select()
    with pytest.raises(BudgetExceeded) as exc:
        p.observe(t, 1.0)
    assert isinstance(exc.value, DpledgerError) and "\n" not in str(exc.value)
    assert p.store.n_records() == 0 and p.frozen[t.arm]
    t2 = p.select()
    assert t2.arm == 1
    with pytest.raises(BudgetExceeded):
        p.observe(t2, 0.0)
    for _ in range(10):                    # both frozen: select still answers, nothing recorded
        p.observe(p.select(), 0.5)
    assert p.store.n_records() == 0
    p.close()


def _one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and msg
    return msg


def test_bad_input_is_refused_with_one_line(tmp_path):
    p = online("lazy-dp-ts", 3, horizon=5, store=tmp_path / "s.db", seed=0)
    t = p.select()
    for bad, words in [(float("nan"), "NaN"), (1.5, "outside the declared range"),
                       ("1", "must be a number"), (True, "must be a number")]:
        with pytest.raises(DpledgerError) as exc:
            p.observe(t, bad)
        assert words in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        p.observe(7, 0.5)
    assert "outside 0 … 2" in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        p.observe(step_mod.Ticket(0, 3, 0, 0), 0.5)
    assert "never issued" in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        p.observe(step_mod.Ticket(0, 1, 2, 0), 0.5)
    assert "names arm 2" in _one_line(exc)
    p.observe(t, 0.5)
    with pytest.raises(DpledgerError) as exc:
        p.observe(t, 0.5)
    assert "already observed" in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        p.observe(1, 0.5)
    assert "no outstanding round" in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        p.select(context=[1.0])
    assert "takes no context" in _one_line(exc)
    n = p.store.n_records()
    for _ in range(4):
        p.observe(p.select(), 0.25)
    with pytest.raises(DpledgerError) as exc:
        p.select()
    assert "horizon 5 is reached" in _one_line(exc)
    assert p.store.n_records() > n
    p.close()
    # a store made for another policy, K, parameter or range
    for kwargs in [dict(name="adap-ucb", n=3), dict(name="lazy-dp-ts", n=4),
                   dict(name="lazy-dp-ts", n=3, epsilon=0.5)]:
        with pytest.raises(DpledgerError) as exc:
            online(kwargs.pop("name"), kwargs.pop("n"), horizon=5, store=tmp_path / "s.db",
                   seed=0, **kwargs)
        assert "serves lazy-dp-ts" in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        online("dp-ucb", 3)
    assert "needs a horizon" in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        online("lazy-dp-ts", 1)
    assert "n_arms" in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        online("lazy-dp-ts", 3, reward_range=(1, 0))
    assert "lo < hi" in _one_line(exc)
    with pytest.raises(DpledgerError) as exc:
        online("ucb1", 3, sampler="exact")
    assert "exact-sampler" in _one_line(exc)


def test_reward_range_and_exact_sampler_rescale(tmp_path):
    """Rewards on [−1, 3] are rescaled to [0, 1] (and, exact sampler, to its lattice) as the
    simulator's environments do: the same releases as rewards given on [0, 1]."""
    table = np.random.default_rng(1).random((80, 3))
    a = online("lazy-dp-ts", 3, seed=9, sampler="exact")
    b = online("lazy-dp-ts", 3, seed=9, sampler="exact", reward_range=(-1.0, 3.0))
    for t in range(80):
        ta, tb = a.select(), b.select()
        assert ta.arm == tb.arm
        a.observe(ta, table[t, ta.arm])
        b.observe(tb, -1.0 + 4.0 * table[t, tb.arm])
    assert np.array_equal(a.rule.state["mu"], b.rule.state["mu"])


def test_crash_after_a_selections_records_resumes_the_same_selection(tmp_path, monkeypatch):
    """M-TS-Gaussian draws its releases at select (a read of every arm's posterior): a process
    dying after the selection's reads are committed and before their samples are drawn resumes
    that selection from the saved generator — the uninterrupted run's arm for that round, its
    ticket outstanding — and records nothing twice."""
    table = np.random.default_rng(5).random((60, 3))
    ref = online("mts-gaussian", 3, seed=2, b=1)
    arms = []
    for t in range(41):
        tk = ref.select()
        arms.append(tk.arm)
        ref.observe(tk, table[t, tk.arm])
    path = tmp_path / "s.db"
    p = online("mts-gaussian", 3, store=path, seed=2, b=1)
    _serve(p, table, 40)
    n_before = p.store.n_records()

    def die(self, box, t):
        raise Killed
    monkeypatch.setattr(type(p.rule), "select", die)
    with pytest.raises(Killed):
        p.select()                        # round 41: its reads recorded, then killed
    assert p.store.n_records() == n_before + 3
    p.store.close()
    monkeypatch.undo()
    q = online("mts-gaussian", 3, store=path, seed=2, b=1, take_over=True)
    assert q.t == 41 and q.outstanding[41][0] == arms[40]
    assert q.store.n_records() == n_before + 3
    q.observe(step_mod.Ticket(0, 41, arms[40], 0), 0.5)   # the ticket issued before the crash
    _serve(q, table, 10)
    q.close()
    assert verify_store(path) == []


def test_select_time_reads_refused_freeze_their_arms(tmp_path):
    """TS-Gaussian under a per-reward budget: once a reward's reads would exceed it, its arm's
    read is refused — nothing stored for it, the arm frozen on its last sample — and the other
    arms keep being read; every reward's spend stays within the budget."""
    p = online("ts-gaussian", 2, store=tmp_path / "s.db", budget="mu=1.0", seed=3)
    rng = np.random.default_rng(1)
    for _ in range(300):
        tk = p.select()
        p.observe(tk, float(rng.random() < 0.5))
    assert p.frozen.all() and p.refusals == 2
    st = p.store.status()
    assert st["budget_spent"] <= 1.0
    n = p.store.n_records()
    for _ in range(20):                   # both frozen: select still answers, nothing recorded
        p.observe(p.select(), 1.0)
    assert p.store.n_records() == n
    p.close()
    assert verify_store(tmp_path / "s.db") == []


@pytest.mark.parametrize("name,params", [
    ("dp-se", {"epsilon": 4.0, "beta": 0.5}),
    ("dp-ts-mt", {"epsilon": 1.0, "gap_estimation": False, "random_pulls": 4}),
])
def test_batches_with_late_and_out_of_order_rewards(tmp_path, name, params):
    """Synchronised batches served with rewards up to 30 rounds late, shuffled: a batch is
    released when every arm's share is in, surplus rewards are not read, so every reward lies
    in at most the releases an uninterrupted run gives it (pure ε ≤ ε); the ledger verifies."""
    p = online(name, 3, 2000, store=tmp_path / "s.db", seed=4, **params)
    _serve_late(p, 2000, 15, lambda rng, arm: float(rng.random() < 0.8 - 0.25 * arm), 0.5,
                seed=2)
    st = p.store.status()
    assert p.store.n_records() >= 3
    assert st["privacy"]["pure_epsilon"] <= params["epsilon"] * (1 + 1e-12)
    p.close()
    assert verify_store(tmp_path / "s.db") == []
