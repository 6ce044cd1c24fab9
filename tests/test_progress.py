"""Long work (issue 13): action sinks (no per-round array), progress inside a run, the
compile-free ETA, the memory estimate and its refusal, and R4 whatever the chunking/progress."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from itertools import pairwise

import numpy as np
import pytest
from numba import njit

from dpledger.errors import DpledgerError
from dpledger.policies import environments as E
from dpledger.policies import simulator as S
from dpledger.policies import sink as SK
from dpledger.policies.registry import make_policy
from dpledger.progress import Bar, SimulationProgress

MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]
SINK_POLICIES = ["ucb1", "klucb", "ts-beta", "dp-ucb", "dp-ts-mt", "mts-gaussian", "ts-gaussian",
                 "dp-ts-ucb", "lazy-dp-ts", "dp-ts"]


@njit(cache=True)
def _replay(actions, out):
    """A stand-in kernel: writes a given play through put_action, round by round."""
    for t in range(1, actions.size + 1):
        SK.put_action(out, t, actions[t - 1])
    return actions.size


def _ledger_json(res) -> str:
    return json.dumps(res.ledger.to_json(arrays=True), default=str, sort_keys=True)


# -- the sink --------------------------------------------------------------------------------
_C = SK.SINK_CHUNK


@pytest.mark.parametrize("n,K,switchy", [(1, 1, False), (_C, 3, False), (_C + 1, 3, True),
                                         (3 * _C - 7, 4, False), (5 * _C + 11, 7, True)])
def test_sink_table_equals_whole_array_pass(n, K, switchy):
    """Fed chunk by chunk (flushes at every SINK_CHUNK rounds, a partial last chunk), the sink
    builds exactly the table the greedy pass builds from the whole array; the array form of
    put_action writes the actions themselves."""
    rng = np.random.default_rng(n)
    if switchy:
        actions = rng.integers(0, K, n)
    else:   # long stretches, strided round-robin and a few switches: runs span chunk borders
        actions = np.repeat(rng.integers(0, K, n // 997 + 1), 997)[:n]
        actions[: min(n, 50)] = np.arange(min(n, 50)) % K
    actions = actions.astype(np.int64)
    sink = SK.make_sink(K, columns=n + K)       # room for any play (at most n + K runs)
    assert _replay(actions, sink) == n
    table = SK.finish_sink(sink, n)
    whole = S._segments(actions, K, 1)
    assert table.shape == whole.shape and np.array_equal(table, whole)
    assert sink[5, SK.SLOT_DONE] == n
    plain = np.full(n, -1, dtype=np.int64)
    _replay(actions, plain)
    assert np.array_equal(plain, actions)
    # independent check of the table: expanding the runs gives back the actions
    back = np.full(n, -1, dtype=np.int64)
    for a, _, r0, s, L in table.T:
        back[r0 - 1 + s * np.arange(L)] = a
    assert np.array_equal(back, actions)


def test_sink_overflow_counts_exactly():
    """A play needing more columns than the sink holds is counted, not truncated: SinkOverflow
    carries the exact column count of the whole-array pass."""
    K, n = 3, 3 * SK.SINK_CHUNK
    actions = np.random.default_rng(1).integers(0, K, n).astype(np.int64)
    need = S._segments(actions, K, 1).shape[1]
    sink = SK.make_sink(K, columns=10)          # width is at least chunk + state
    assert need > sink.shape[1]
    _replay(actions, sink)
    with pytest.raises(SK.SinkOverflow) as exc:
        SK.finish_sink(sink, n)
    assert exc.value.columns == need
    big = SK.make_sink(K, columns=need)
    _replay(actions, big)
    assert np.array_equal(SK.finish_sink(big, n), S._segments(actions, K, 1))


@pytest.mark.parametrize("name", SINK_POLICIES)
def test_sink_path_equals_action_path(name):
    """Every action-sink policy: the run without per-round actions gives the same regret,
    ledger, draws and rounds as the run that keeps them (T spans several chunks)."""
    env = E.bernoulli(MEANS, 0, 1)
    pol = make_policy(name)
    assert type(pol).action_sink
    T = 2 * SK.SINK_CHUNK + 123
    a = S.simulate(pol, env, T, seed=5, runs=2)
    b = S.simulate(pol, env, T, seed=5, runs=2, keep_actions=True)
    assert a.actions is None and b.actions is not None
    assert np.array_equal(a.regret, b.regret)
    assert a.noise_draws == b.noise_draws and a.rounds_played == b.rounds_played == [T, T]
    assert _ledger_json(a) == _ledger_json(b)


@pytest.mark.parametrize("name", ["dp-ucb", "dp-ts", "lazy-dp-ts"])
def test_sink_path_equals_action_path_exact_sampler(name):
    """The same with the exact sampler (lattice rewards, discrete Laplace noise)."""
    env = E.bernoulli(MEANS, 0, 1)
    pol = make_policy(name)
    T = SK.SINK_CHUNK + 77
    a = S.simulate(pol, env, T, seed=9, runs=2, sampler="exact")
    b = S.simulate(pol, env, T, seed=9, runs=2, sampler="exact", keep_actions=True)
    assert np.array_equal(a.regret, b.regret) and a.noise_draws == b.noise_draws
    assert _ledger_json(a) == _ledger_json(b)


def test_overflow_replays_the_same_run(monkeypatch):
    """Equal means make TS switch arms nearly every round: the run overflows the sink, is
    replayed into an exact table, and equals the action-keeping run."""
    env = E.bernoulli([0.5, 0.5, 0.5], 0, 1)
    pol = make_policy("ts-beta")
    sizes = []
    real = SK.make_sink

    def spy(K, columns=None, out=None):
        sizes.append(columns)
        return real(K, columns, out)

    monkeypatch.setattr(S, "make_sink", spy)
    T = 8 * SK.SINK_CHUNK
    a = S.simulate(pol, env, T, seed=2, runs=2)
    replays = [c for c in sizes if c is not None]
    assert len(replays) == 2 and all(c > SK.sink_width(3) for c in replays)
    b = S.simulate(pol, env, T, seed=2, runs=2, keep_actions=True)
    assert np.array_equal(a.regret, b.regret) and _ledger_json(a) == _ledger_json(b)


def test_overflow_replay_refused_without_memory(monkeypatch):
    monkeypatch.setattr(S, "available_memory", lambda: 1 << 20)
    env = E.bernoulli([0.5, 0.5, 0.5], 0, 1)
    monkeypatch.setattr(S, "check_memory", lambda *a, **k: None)
    with pytest.raises(DpledgerError, match="switches arms too often.*smaller --horizon"):
        S.simulate(make_policy("ts-beta"), env, 8 * SK.SINK_CHUNK, seed=2, runs=1)


# -- memory ----------------------------------------------------------------------------------
def test_memory_estimate_does_not_grow_with_T_for_kernels():
    env = E.bernoulli(MEANS, 0, 1)
    ucb = make_policy("ucb1")
    small = S.memory_estimate(ucb, env, 10 ** 4, runs=1)
    big = S.memory_estimate(ucb, env, 10 ** 9, runs=1)
    assert small["play"] == big["play"] == "sink"
    assert big["bytes"] - small["bytes"] < 1 << 20           # only O(log T) rows differ
    kept = S.memory_estimate(ucb, env, 10 ** 9, runs=3, keep_actions=True)
    assert kept["play"] == "actions" and kept["bytes"] >= 8 * 10 ** 9 + 2 * 3 * 10 ** 9
    ev = S.memory_estimate(make_policy("adap-ucb"), env, 10 ** 9, runs=1)
    assert ev["play"] == "segments" and ev["bytes"] < 1 << 30


def test_memory_refusal_names_estimate_and_fix():
    env = E.bernoulli(MEANS, 0, 1)
    sys.path.insert(0, "examples")
    try:
        from bring_your_own_policy import PrivateExploreThenCommit
    finally:
        sys.path.pop(0)
    etc = PrivateExploreThenCommit()
    est = S.memory_estimate(etc, env, 10 ** 8, runs=4, workers=4)
    assert est["play"] == "actions" and est["per_run"] >= 8 * 10 ** 8 and est["concurrent"] == 4
    with pytest.raises(DpledgerError, match=r"needs about .* GB.*available; use fewer --workers"):
        S.check_memory(etc, env, 10 ** 8, runs=4, workers=4, available=2 << 30)
    with pytest.raises(DpledgerError, match="smaller --horizon .*one action per round"):
        S.check_memory(etc, env, 10 ** 8, runs=1, workers=1, available=100 << 20)
    with pytest.raises(DpledgerError, match="keep_actions=False"):
        S.check_memory(make_policy("ucb1"), env, 10 ** 9, runs=2, keep_actions=True,
                       available=4 << 30)
    assert S.check_memory(make_policy("ucb1"), env, 10 ** 9, runs=2, available=4 << 30)


def test_cli_refuses_before_work(monkeypatch, tmp_path, capsys):
    """Too little memory: exit 2, one line on stderr with the estimate, nothing written."""
    from dpledger.cli import main
    monkeypatch.setattr(S, "available_memory", lambda: 64 << 20)
    out = tmp_path / "run.json"
    try:
        code = main(["run", "ucb1", "--horizon", "1e9", "--runs", "1", "--out", str(out)])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "needs about" in err and "available" in err and not out.exists()


# -- progress --------------------------------------------------------------------------------
class _Recorder:
    def __init__(self):
        self.values, self.runs = [], 0

    def __call__(self, n):
        self.runs += n

    def rounds(self, n):
        self.values.append(n)


@pytest.mark.parametrize("workers,runs", [(1, 1), (2, 2)])
def test_rounds_counted_inside_a_run(workers, runs):
    """A single long run reports rounds while it runs (the kernel releases the GIL; the sink
    publishes every SINK_CHUNK rounds), in pool workers too, and ends at T·runs."""
    T = 4 * 10 ** 7
    rec = _Recorder()
    res = S.simulate(make_policy("ucb1"), E.bernoulli(MEANS, 0, 1), T, seed=0, runs=runs,
                     workers=workers, progress=rec)
    inside = [v for v in rec.values if 0 < v < T]
    assert inside, rec.values
    assert all(v % SK.SINK_CHUNK == 0 for v in inside)
    assert rec.values[-1] == T * runs and rec.runs == runs
    assert all(b >= a for a, b in pairwise(rec.values))
    assert res.rounds_played == [T] * runs


def test_eta_excludes_time_before_first_tick():
    """30 s of compilation before the first tick, then 1e6 rounds per second: rate 1e6/s and
    ETA (total − n)/1e6, as computed and as drawn; the 30 s appear nowhere."""
    now = [0.0]
    buf = io.StringIO()
    bar = Bar(10 ** 8, "round", file=buf, delay=0, clock=lambda: now[0])
    now[0] = 30.0                                   # compiling: no tick yet
    bar.set(SK.SINK_CHUNK)                          # first tick: the clock starts
    assert bar.rate_eta() == (None, None)
    now[0] = 32.0
    n = SK.SINK_CHUNK + 2 * 10 ** 6
    bar.set(n)
    rate, eta = bar.rate_eta()
    assert rate == pytest.approx(1e6) and eta == pytest.approx((10 ** 8 - n) / 1e6)
    from tqdm import tqdm
    line = bar.line()
    assert tqdm.format_interval(eta) in line and "00:02<" in line and "1.00Mround/s" in line
    bar.close()
    assert "round" in buf.getvalue()


def test_quiet_bar_draws_nothing():
    buf = io.StringIO()
    p = SimulationProgress(10 ** 6, 2, quiet=True, file=buf, delay=0)
    p.rounds(5 * 10 ** 5)
    p(1)
    p.close()
    assert buf.getvalue() == "" and p.bar.bar is None


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dpledger", *args], capture_output=True,
                          text=True)


def test_cli_progress_on_stderr_only_and_quiet(tmp_path):
    """A run of a few seconds (Beta-TS: ~2e-7 s per round, so ~4 s, well over the bar's 1 s
    delay) draws its bar on stderr, never on stdout; --quiet prints nothing at all; both write
    the same bytes."""
    T = "2e7"
    # same file names in two folders: run.json records its ledger file's name
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "run.json", tmp_path / "b" / "run.json"
    loud = _cli("run", "ts-beta", "--horizon", T, "--runs", "1", "--out", str(a))
    assert loud.returncode == 0, loud.stderr
    assert "round" in loud.stderr and "%|" in loud.stderr
    assert "%|" not in loud.stdout and "round/s" not in loud.stdout
    quiet = _cli("run", "ts-beta", "--horizon", T, "--runs", "1", "--out", str(b), "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    assert a.read_bytes() == b.read_bytes()
    assert (tmp_path / "a" / "run.ledger.json").read_bytes() == \
        (tmp_path / "b" / "run.ledger.json").read_bytes()


def test_same_seed_same_bytes_whatever_split(tmp_path):
    """R4 on the chunked/progress path: sinks in one process or shared with pool workers give
    byte-identical run.json and ledger."""
    outs = []
    for workers in ("1", "2"):
        (tmp_path / f"w{workers}").mkdir()       # same names: run.json names its ledger file
        out = tmp_path / f"w{workers}" / "run.json"
        r = _cli("run", "dp-ucb", "--horizon", str(2 * SK.SINK_CHUNK + 5), "--runs", "3",
                 "--seed", "11", "--workers", workers, "--out", str(out), "--quiet")
        assert r.returncode == 0, r.stderr
        outs.append((out.read_bytes(), (tmp_path / f"w{workers}" / "run.ledger.json").read_bytes()))
    assert outs[0] == outs[1]


def test_sweep_checks_memory_before_any_cell(monkeypatch, tmp_path):
    from dpledger.sweep import LocalExecutor, RunConfig, run_sweep
    cfg = RunConfig("ucb", "ucb1", {}, {"kind": "bernoulli", "means": [0.7, 0.5]}, horizon=400,
                    runs=2, seed=1)
    monkeypatch.setattr(S, "available_memory", lambda: 64 << 20)
    with pytest.raises(DpledgerError, match="needs about"):
        run_sweep([cfg], str(tmp_path), LocalExecutor(1), cell_runs=1, quiet=True)
    assert not (tmp_path / "cells").exists()


def test_sweep_bar_counts_rounds_of_cells(monkeypatch, tmp_path):
    """The sweep's bar totals the rounds of its cells and reaches them (drawn, with no delay)."""
    import dpledger.sweep as SW
    from dpledger.sweep import LocalExecutor, RunConfig, run_sweep
    bars = []

    class Spy(Bar):
        def __init__(self, *a, **k):
            k.update(delay=0, file=io.StringIO())
            super().__init__(*a, **k)
            bars.append(self)

    monkeypatch.setattr(SW, "Bar", Spy)
    cfgs = [RunConfig("a", "ucb1", {}, {"kind": "bernoulli", "means": [0.7, 0.5]}, horizon=400,
                      runs=3, seed=1),
            RunConfig("b", "ucb1", {}, {"kind": "bernoulli", "means": [0.7, 0.5]}, horizon=900,
                      runs=2, seed=1)]
    run_sweep(cfgs, str(tmp_path), LocalExecutor(1), cell_runs=2, quiet=False)
    (bar,) = bars
    assert bar.total == 3 * 400 + 2 * 900 and bar.n == bar.total
    assert "cells 3/3" in bar.file.getvalue()
