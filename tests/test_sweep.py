"""Sweeps: resume after an interruption (R5) and identical results on Dask (R4)."""
from __future__ import annotations

import os

import pytest

from dpledger.sweep import LocalExecutor, RunConfig, run_sweep

CONFIGS = [
    RunConfig("lazy", "lazy-dp-ts", {"epsilon": 0.5}, {"kind": "bernoulli", "means": [0.9, 0.4]},
              horizon=600, runs=6, seed=11),
    RunConfig("ucb", "ucb1", {}, {"kind": "bernoulli", "means": [0.7, 0.5, 0.2]},
              horizon=400, runs=4, seed=12),
]


def _run_files(folder):
    return {f: open(os.path.join(folder, "runs", f), "rb").read()
            for f in sorted(os.listdir(os.path.join(folder, "runs")))}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ref"))
    run_sweep(CONFIGS, out, LocalExecutor(1), cell_runs=2, quiet=True)
    return out


def test_interrupted_sweep_resumes_without_recomputing(reference, tmp_path):
    out = str(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(CONFIGS, out, LocalExecutor(1), cell_runs=2, quiet=True, stop_after=2)
    cells = sorted(os.listdir(os.path.join(out, "cells")))
    assert len(cells) == 2 and not os.path.exists(os.path.join(out, "runs"))
    stamps = {c: os.stat(os.path.join(out, "cells", c)).st_mtime_ns for c in cells}
    run_sweep(CONFIGS, out, LocalExecutor(1), cell_runs=2, quiet=True)
    for c, t in stamps.items():     # finished cells were not recomputed
        assert os.stat(os.path.join(out, "cells", c)).st_mtime_ns == t
    assert len(os.listdir(os.path.join(out, "cells"))) == 5
    assert _run_files(out) == _run_files(reference)
    assert not [f for f in os.listdir(os.path.join(out, "cells")) if f.startswith(".tmp")]


def test_cell_size_and_pool_do_not_change_results(reference, tmp_path):
    run_sweep(CONFIGS, str(tmp_path), LocalExecutor(2), cell_runs=3, quiet=True)
    assert _run_files(str(tmp_path)) == _run_files(reference)


def test_dask_local_cluster_matches_local_pool(reference, tmp_path):
    import distributed

    from dpledger.sweep import DaskExecutor
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        run_sweep(CONFIGS, str(tmp_path), DaskExecutor(client=client), cell_runs=2, quiet=True)
    assert _run_files(str(tmp_path)) == _run_files(reference)


def test_contextual_configs_sweep_to_the_same_bytes_as_one_simulation(tmp_path):
    """A contextual config (supervised digits, a reward delay) split into cells and joined is
    the run.json one direct simulation gives, byte for byte."""
    import json
    from dpledger.policies.contextual.simulator import simulate_contextual
    from dpledger.policies.registry import make_policy
    from dpledger.report_contextual import build_contextual_report
    from dpledger.sweep import RunConfig, make_env, run_sweep
    pytest.importorskip("sklearn")
    cfg = RunConfig("c", "lints", {"v": 0.5}, {"kind": "supervised", "dataset": "iris",
                                               "delay": 7}, 600, 5, seed=11)
    rep = run_sweep([cfg], str(tmp_path), cell_runs=2)["c"]
    res = simulate_contextual(make_policy("lints", v=0.5), make_env(cfg.env), 600, seed=11,
                              runs=5, delay=7)
    direct = build_contextual_report(res)
    got = {k: v for k, v in rep.items() if k not in ("label", "tags")}
    assert json.dumps(got, sort_keys=True) == json.dumps(direct, sort_keys=True)
    assert rep["contextual"]["delay"] == 7


@pytest.mark.parametrize("which", ["k-armed", "contextual"])
def test_private_configs_sweep_to_the_bytes_of_one_simulation(tmp_path, which):
    """A private config whose ledger rows merge on compaction (lazy-dp-ts's per-observation
    rows; adac-gope's per-phase rows on a fixed arm set) split into cells and joined is the
    run.json a direct simulation gives, byte for byte — so `verify --resimulate` of an
    experiment's run passes (its ledger.rows counted compacted rows before)."""
    import json
    from dpledger.policies.registry import make_policy
    from dpledger.sweep import make_env
    if which == "k-armed":
        from dpledger.policies.simulator import simulate
        from dpledger.report import build_run_report
        cfg = CONFIGS[0]
        res = simulate(make_policy("lazy-dp-ts", epsilon=0.5), make_env(cfg.env), cfg.horizon,
                       seed=cfg.seed, runs=cfg.runs)
        direct = build_run_report(res)
    else:
        from dpledger.policies.contextual.simulator import simulate_contextual
        from dpledger.report_contextual import build_contextual_report
        env = {"kind": "linear", "fixed": True, "dim": 3, "arms": 6, "seed": 5}
        cfg = RunConfig("c", "adac-gope", {"epsilon": 1.0, "delta": 1e-6}, env, 3000, 3, seed=4)
        res = simulate_contextual(make_policy("adac-gope", epsilon=1.0, delta=1e-6),
                                  make_env(env), 3000, seed=4, runs=3)
        direct = build_contextual_report(res)
    rep = run_sweep([cfg], str(tmp_path), cell_runs=2, quiet=True)[cfg.label]
    assert res.ledger.n_rows() > res.ledger.compact().n_rows()     # compaction merges rows here
    got = {k: v for k, v in rep.items() if k not in ("label", "tags")}
    assert json.dumps(got, sort_keys=True) == json.dumps(direct, sort_keys=True)


def test_a_cell_is_named_by_the_resolved_parameters(monkeypatch):
    """A cell's key reads the policy's parameters with its defaults filled in: writing a
    default out names the same cell, and changing a default (what the policy draws) names a
    new one, so a sweep never reuses the runs of the old default."""
    from dpledger.policies.contextual.episodes import AdacOFUL
    env = {"kind": "linear", "dim": 3, "arms": 3, "seed": 0}
    bare = RunConfig("a", "adac-oful", {"epsilon": 1.0}, env, 100, 2)
    spelt = RunConfig("a", "adac-oful", {"epsilon": 1.0, "estimate": "episodes"}, env, 100, 2)
    assert bare.key() == spelt.key()
    before = bare.key()
    import dataclasses
    spec = tuple(p if p.name != "estimate" else dataclasses.replace(p, default="likelihood")
                 for p in AdacOFUL.params_spec)
    monkeypatch.setattr(AdacOFUL, "params_spec", spec)
    assert bare.key() != before
    assert bare.key() == RunConfig("a", "adac-oful", {"epsilon": 1.0, "estimate": "likelihood"},
                                   env, 100, 2).key()
