"""Issue 34 §1: Ctrl-C in contextual runs and in experiments.

The contextual kernels (LinUCB, linear TS, the private linear policies) read a stop slot every
round (:func:`dpledger.interrupt.stop_slot`); the simulator runs them off the main thread, or in
an interruptible pool, so a real SIGINT ends a run within a few seconds: exit 130, one line,
nothing written.  The issue's three commands, a run in two worker processes, and an experiment
(whose cells finished before the signal stay; no file is half-written) are each run in a real
subprocess; the kernels' stop is checked in process.
"""
from __future__ import annotations

import json
import os
import time

import pytest

from test_reliability import LINUX, _interrupt, warm_kernels

# seconds from the signal to the exit: the promise is 3 s (issue 34 §1); measured 0.2–0.3 s with
# the 2 cores lightly loaded, 1.2–3.6 s at a load average of 9–14 (K-armed ucb1 alike), so the
# test allows the same 5 s as tests/test_reliability.py
LIMIT = 5.0

CASES = [
    # (id, argv, workers>1 so the signal goes to the process group, slow)
    ("jdp-linucb linear d=64", ["run", "jdp-linucb", "--env", "linear", "--dim", "64", "--arms",
                                "10", "--horizon", "1000000"], False, False),
    ("linucb 5e7 rounds, 2 workers", ["run", "linucb", "--env", "linear", "--horizon", "50000000",
                                      "--runs", "2", "--workers", "2", "--dim", "5", "--arms",
                                      "5"], True, False),
    ("linucb 5e7 rounds", ["run", "linucb", "--env", "linear", "--horizon", "50000000", "--runs",
                           "1", "--dim", "5", "--arms", "5"], False, True),
    ("jdp-linucb digits", ["run", "jdp-linucb", "--env", "supervised", "--dataset", "digits",
                           "--horizon", "100000", "--runs", "2"], False, True),
]


@pytest.mark.skipif(not LINUX, reason="POSIX signals and process groups")
@pytest.mark.parametrize("name,argv,group,slow", [
    pytest.param(*c, marks=[pytest.mark.slow] if c[3] else []) for c in CASES],
    ids=[c[0] for c in CASES])
def test_sigint_stops_a_contextual_run(tmp_path, name, argv, group, slow):
    code, err, elapsed, out = _interrupt(
        tmp_path, "dpledger.policies.contextual.simulator:simulate_contextual",
        argv + ["--quiet"], group)
    assert code == 130, err
    assert err.strip().splitlines()[-1].endswith("interrupted (no file is left half-written)")
    assert "Traceback" not in err
    assert elapsed < LIMIT, elapsed
    assert os.listdir(out) == []


@pytest.mark.skipif(not LINUX, reason="POSIX signals and process groups")
def test_sigint_stops_an_experiment_in_two_workers(tmp_path):
    """A contextual experiment in two worker processes, signalled as a terminal's Ctrl-C does:
    exit 130 (not −2) within the limit; what is in its folder is whole (cells finished before
    the signal, every one a complete JSON file; no temporary file left)."""
    for policy in ("linucb", "lints", "dp-linucb-mt", "dp-lints-mt", "jdp-linucb"):
        warm_kernels(["run", policy, "--env", "supervised", "--dataset", "digits", "--horizon",
                      "400"], tmp_path)         # the experiment's kernels, cached first
    code, err, elapsed, out = _interrupt(
        tmp_path, "dpledger.experiments.common:run_sweep",
        ["experiment", "mishra-thakurta-2015-contextual", "--workers", "2", "--quiet"],
        group=True)
    assert code == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert elapsed < LIMIT, elapsed
    for folder, _, names in os.walk(out):
        for n in names:
            assert not n.startswith(".") and not n.endswith(".tmp"), n
            if n.endswith(".json"):
                json.loads(open(os.path.join(folder, n)).read())


@pytest.mark.parametrize("policy", ["linucb", "lints", "jdp-linucb", "dp-lints-mt", "reward-dp-linucb"])
def test_a_pending_stop_ends_a_contextual_kernel(policy):
    """A stop requested before the run: the kernel's first round raises Stopped (a slot made
    after the request is set at once), so a 1e8-round run returns at once; cleared, the
    same run starts normally."""
    from dpledger.interrupt import Stopped, clear_stop, request_stop
    from dpledger.policies.contextual import environments as CE
    from dpledger.policies.contextual.base import problem_of
    from dpledger.policies.registry import make_policy
    from dpledger.policies.simulator import run_generator
    pol = make_policy(policy)
    env = CE.linear(3, 2, seed=0)
    pol.run_one(run_generator(0, 0), env, problem_of(env, 50, 0, 0))   # compiled first: the
    request_stop()                                                       # time is the stop's
    try:
        t0 = time.monotonic()
        with pytest.raises(Stopped):
            pol.run_one(run_generator(0, 0), env, problem_of(env, 10 ** 8, 0, 0))
        # 1 ms idle (stop 38); the bound is the Ctrl-C target, 3 s: the 10⁸ rounds would take
        # minutes, and a 1 s bound failed twice under the suite's load (1.86 s, 2.26 s)
        assert time.monotonic() - t0 < 3.0
    finally:
        clear_stop()
    out = pol.run_one(run_generator(0, 0), env, problem_of(env, 50, 0, 0))
    assert out.extra["rounds"] == 50
