"""Sweeps: many simulations split into cells of run indices, on a local process pool or a Dask
cluster, resumable.

* A :class:`RunConfig` names one simulation (policy, parameters, environment, T, runs, seed).
* It is split into cells of run indices; a cell is computed by :func:`compute_cell` — a plain
  top-level function, so any executor can ship it — and saved atomically as
  ``<out>/cells/<config key>-<first>-<last>.json`` the moment it arrives.
* An interrupted sweep restarted with the same output folder finds the finished cells and
  recomputes only the rest (R5); nothing is half-written, because every file is written to a
  temporary name and renamed.
* Once every cell of a config exists, the cells are joined in run-index order
  (:func:`dpledger.policies.simulator.assemble`), so the run.json of a config is the same bytes
  whichever executor or cell size produced it (R4).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from dpledger.accounting.schema import read_json, write_json_atomic
from dpledger.errors import DpledgerError
from dpledger.interrupt import in_worker_thread, interruptible_pool
from dpledger.progress import Bar

CELL_SCHEMA = 2     # 2: a cell records its ledger's rows before compaction ("ledger_rows")


@dataclass(frozen=True)
class RunConfig:
    """One simulation of a sweep.  ``env`` is a spec: {"kind": "bernoulli", "means": [...]} or
    {"kind": "truncexp", "rates": [...]}, {"kind": "beta", "ab": [[a, b], ...]}, optional
    "range": [lo, hi]."""

    label: str
    policy: str
    params: dict
    env: dict
    horizon: int
    runs: int
    seed: int = 0
    tags: dict = field(default_factory=dict, compare=False)

    def key(self) -> str:
        """The cell's identity: the policy's *resolved* parameters (its defaults filled in), so
        a changed default names a new cell instead of reusing the old one's runs."""
        try:
            params = self.make_policy().params
        except DpledgerError:
            params = self.params           # refused later, where the sweep builds the policy
        body = json.dumps({"policy": self.policy, "params": params, "env": self.env,
                           "horizon": self.horizon, "runs": self.runs, "seed": self.seed,
                           "cell_schema": CELL_SCHEMA}, sort_keys=True, default=str)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        return asdict(self)

    def make_policy(self):
        from dpledger.policies.registry import make_policy
        return make_policy(self.policy, **self.params)

    def make_env(self):
        return make_env(self.env)


CONTEXTUAL_KINDS = ("linear", "supervised", "replay", "digits6", "digits6-online")


def make_env(spec: dict):
    """The environment a spec names.  Contextual kinds: {"kind": "linear", "dim", "arms",
    "seed"}, {"kind": "supervised", "dataset"}, {"kind": "replay", "log", "arms"?},
    {"kind": "digits6" or "digits6-online", "seed"?} (:mod:`~dpledger.policies.contextual.
    digits6`: a generated log, or its online form), each with optional "norm_bound" and "range"; their reward delay is the spec's
    "delay" (default 0), read by :func:`delay_of`."""
    from dpledger.policies import environments as E
    lo, hi = spec.get("range", [0.0, 1.0])
    kind = spec.get("kind")
    if kind in CONTEXTUAL_KINDS:
        from dpledger.policies.contextual import data as CD
        from dpledger.policies.contextual import environments as CE
        L = spec.get("norm_bound", 1.0)
        if kind == "linear":
            make = CE.linear_fixed if spec.get("fixed") else CE.linear
            sd = spec.get("noise_sd")
            env = make(spec["dim"], spec["arms"], spec.get("theta"), spec.get("seed", 0),
                       L, lo, hi, sd)
            # θ belongs to the instance (its own seed), not to a cell's run seed: recorded as
            # given, so that verify rebuilds this θ whatever seed the run was made with
            return env if spec.get("theta") is not None or spec.get("fixed") else make(
                spec["dim"], spec["arms"], env.theta, 0, L, lo, hi, sd)
        if kind == "supervised":
            return CD.load_supervised(spec["dataset"], L, lo, hi)
        if kind in ("digits6", "digits6-online"):
            from dpledger.policies.contextual import digits6
            seed = spec.get("seed", digits6.SEED)
            return digits6.environment(seed) if kind == "digits6" else digits6.online(seed)
        return CD.load_replay(spec["log"], spec.get("arms"), spec.get("context_columns"),
                              spec.get("mode", "uniform"), L, lo, hi)
    if kind == "bernoulli":
        return E.bernoulli(spec["means"], lo, hi)
    if kind == "truncexp":
        return E.truncated_exponential(spec["rates"], lo, hi)
    if kind == "beta":
        return E.beta(spec["ab"], lo, hi)
    raise DpledgerError(f"unknown environment kind {kind!r}")


def delay_of(spec: dict) -> int:
    return int(spec.get("delay", 0))


def _contextual_problem(cfg: "RunConfig", env):
    from dpledger.policies.contextual.base import check_delay, problem_of
    return problem_of(env, cfg.horizon, check_delay(delay_of(cfg.env)))


def compute_cell(config: dict, indices: Sequence[int]) -> dict:
    """Simulate runs ``indices`` of ``config``; JSON-ready (floats round-trip exactly)."""
    cfg = RunConfig(**config)
    if cfg.env.get("kind") in CONTEXTUAL_KINDS:
        from dpledger.policies.contextual.simulator import run_chunk as contextual_chunk
        env = cfg.make_env()
        part = contextual_chunk(cfg.make_policy(), env, _contextual_problem(cfg, env), cfg.seed,
                                list(indices))
        return {"cell_schema": CELL_SCHEMA, "config_key": cfg.key(), "contextual": True,
                "indices": list(part["indices"]),
                "regret": [None if r is None else r.tolist() for r in part["regret"]],
                "draws": part["draws"], "rounds": part["rounds"],
                "observations": part["observations"], "reward_sum": part["reward_sum"],
                "uniform_sum": part["uniform_sum"], "ledger_rows": part["ledger"].n_rows(),
                "ledger": part["ledger"].compact().to_json()}
    from dpledger.policies.simulator import run_chunk
    part = run_chunk(cfg.make_policy(), cfg.make_env(), cfg.horizon, cfg.seed, list(indices))
    return {"cell_schema": CELL_SCHEMA, "config_key": cfg.key(), "indices": list(part["indices"]),
            "regret": [r.tolist() for r in part["regret"]], "draws": part["draws"],
            "played": part["played"], "ledger_rows": part["ledger"].n_rows(),
            "ledger": part["ledger"].compact().to_json()}


def _cell_part(cell: dict) -> dict:
    from dpledger.accounting.ledger import RewardLedger
    part = {"indices": cell["indices"], "draws": cell["draws"],
            "ledger": RewardLedger.from_json(cell["ledger"])}
    if cell.get("contextual"):
        part.update(regret=[None if r is None else np.array(r) for r in cell["regret"]],
                    **{k: cell[k] for k in ("rounds", "observations", "reward_sum",
                                            "uniform_sum")})
        return part
    part.update(regret=[np.array(r) for r in cell["regret"]], played=cell["played"],
                actions=[None] * len(cell["indices"]), captured=[None] * len(cell["indices"]))
    return part


# -- executors -------------------------------------------------------------------------------
class LocalExecutor:
    """A local process pool (``workers`` processes; 1 = in this process)."""

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise DpledgerError(f"workers must be >= 1, got {workers}")
        self.workers = workers

    def map_unordered(self, fn: Callable, tasks: Sequence[tuple]) -> Iterator[tuple[tuple, Any]]:
        """(task, fn(*task)) as tasks finish.  Ctrl-C stops the cell being computed within a
        flush of its kernel (:mod:`dpledger.interrupt`): in this process, the task runs off the
        main thread; in a pool, the workers are told to stop and joined."""
        if self.workers == 1:
            for t in tasks:
                yield t, in_worker_thread(functools.partial(fn, *t))
            return
        with interruptible_pool("process", self.workers) as pool:
            pending = {pool.submit(fn, *t): t for t in tasks}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    yield pending.pop(f), f.result()


class DaskExecutor:
    """Tasks on a Dask distributed cluster at ``address`` (e.g. tcp://127.0.0.1:8786), or on a
    given ``client``."""

    def __init__(self, address: str | None = None, client=None):
        try:
            from distributed import Client
        except ImportError:
            raise DpledgerError("--scheduler needs the 'distributed' package "
                                "(pip install 'dask[distributed]')") from None
        if client is None:
            if not address:
                raise DpledgerError("a Dask executor needs a scheduler address")
            try:
                client = Client(address, timeout="10s")
            except (OSError, TimeoutError) as exc:
                raise DpledgerError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
            except (ValueError, TypeError) as exc:    # not an address at all
                raise DpledgerError(f"--scheduler {address}: not a scheduler address "
                                    f"({' '.join(str(exc).split())}); e.g. "
                                    "tcp://127.0.0.1:8786") from None
        self.client = client

    def map_unordered(self, fn: Callable, tasks: Sequence[tuple]) -> Iterator[tuple[tuple, Any]]:
        from distributed import as_completed
        futures = {}
        for t in tasks:
            futures[self.client.submit(fn, *t, pure=False)] = t
        for fut in as_completed(list(futures)):
            yield futures[fut], fut.result()


def executor_for(workers: int = 1, scheduler: str | None = None):
    return DaskExecutor(scheduler) if scheduler else LocalExecutor(workers)


# -- the sweep --------------------------------------------------------------------------------
def cells_of(config: RunConfig, cell_runs: int) -> list[list[int]]:
    idx = list(range(config.runs))
    return [idx[i:i + cell_runs] for i in range(0, len(idx), cell_runs)]


def cell_path(out: str, config: RunConfig, indices: Sequence[int]) -> str:
    # run_sweep lists the finished cells by these names
    return os.path.join(out, "cells", f"{config.key()}-{indices[0]}-{indices[-1]}.json")


_CELL_TASK_BYTES = 512          # a cell to compute, as listed: its (config, indices) tuple, the
                                # index list, the set and path strings of the plan


def config_memory(cfg: "RunConfig", runs: int, workers: int, check: bool = False) -> dict:
    """The simulator's memory estimate of ``runs`` runs of ``cfg`` (K-armed or contextual);
    with ``check``, refused as a run would be."""
    env = cfg.make_env()
    if cfg.env.get("kind") in CONTEXTUAL_KINDS:
        from dpledger.policies.contextual import simulator as CS
        fn = CS.check_memory if check else CS.memory_estimate
        return fn(cfg.make_policy(), env, _contextual_problem(cfg, env), runs, workers)
    from dpledger.policies import simulator as S
    fn = S.check_memory if check else S.memory_estimate
    return fn(cfg.make_policy(), env, cfg.horizon, runs, workers=workers)


def check_sweep_memory(configs: Sequence["RunConfig"], cell_runs: int, workers: int) -> None:
    """Refuse a sweep whose plan or reports cannot fit, before any cell is listed (issue 34
    §3: ``--runs 1e6`` listed 4·10⁶ cells and reached 3 GB before failing): the list of cells
    to compute, and the report of a setting — every run's regret curve and records, joined —
    in each of ``workers`` processes building reports at once."""
    from dpledger.policies.simulator import _MEMORY_SLACK
    from dpledger.resources import check_fits, fmt_bytes
    n_cells = sum(-(-int(c.runs) // int(cell_runs)) for c in configs)
    held = {c.label: config_memory(c, int(c.runs), 1)["held"] for c in configs}
    worst = max(held, key=held.get)
    at_once = max(1, min(int(workers), len(configs)))
    need = _MEMORY_SLACK + n_cells * _CELL_TASK_BYTES + at_once * held[worst]
    check_fits("this experiment", need,
               f"use fewer --runs (the report of setting {worst!r} joins every run: "
               f"{fmt_bytes(held[worst])}; {n_cells:,} cells of {cell_runs} runs are listed)")


def run_sweep(configs: Sequence[RunConfig], out: str, executor=None, cell_runs: int = 5,
              deltas: Sequence[float] | None = None, quiet: bool = False,
              stop_after: int | None = None, extra: dict | None = None) -> dict[str, dict]:
    """Compute every config (resuming from ``out``), write ``out/runs/<label>.json`` and return
    {label: run report}.  ``stop_after`` cells: stop early (simulates an interruption; tests).
    ``extra``: top-level fields added to every run report (an experiment's name and overrides);
    they describe the sweep, not the simulation, so cells are reused whatever they say."""
    labels = [c.label for c in configs]
    if len(set(labels)) != len(labels):
        raise DpledgerError("sweep labels must be distinct")
    executor = executor or LocalExecutor(1)
    w = executor.workers if isinstance(executor, LocalExecutor) else 1
    check_sweep_memory(configs, cell_runs, w)       # before the list of cells exists
    if isinstance(executor, LocalExecutor):     # each of `workers` processes holds one cell
        for cfg in {c.key(): c for c in configs}.values():
            config_memory(cfg, min(cell_runs, cfg.runs) * w, w, check=True)
    try:
        done = set(os.listdir(os.path.join(out, "cells")))
    except OSError:                             # no cells yet
        done = set()
    todo = []
    for cfg in configs:
        as_json, key = cfg.to_json(), cfg.key()     # once per config, not once per cell
        todo += [(as_json, idx) for idx in cells_of(cfg, cell_runs)
                 if f"{key}-{idx[0]}-{idx[-1]}.json" not in done]
    by_key = {c.key(): c for c in configs}
    # rounds of the finished cells on stderr (cells differ in horizon, so rounds say more about
    # the time left than cells); the clock starts at the first cell, which carries compilation
    total = sum(len(idx) * c["horizon"] for c, idx in todo)
    # closing: Ctrl-C while a cell is being saved leaves the executor's generator at its yield;
    # closing it there stops and joins its pool now, not at interpreter exit
    with Bar(total, "round", quiet=quiet, desc="sweep") as progress, \
            contextlib.closing(executor.map_unordered(compute_cell, todo)) as cells:
        for n, ((_cfg_json, idx), cell) in enumerate(cells):
            cfg = by_key[cell["config_key"]]
            write_json_atomic(cell_path(out, cfg, idx), cell, compact=True)
            progress.add(len(idx) * cfg.horizon,
                         postfix=f"cells {n + 1}/{len(todo)}, {cfg.label}")
            if stop_after is not None and n + 1 >= stop_after:
                raise KeyboardInterrupt("sweep stopped after %d cells" % (n + 1))
    # Reports: one task per config, in local processes (they read the cells from this disk).
    tasks = [(cfg.to_json(), out, cell_runs, list(deltas) if deltas else None, extra)
             for cfg in configs]
    local = LocalExecutor(getattr(executor, "workers", 1) if isinstance(executor, LocalExecutor)
                          else 2)
    reports = {}
    with contextlib.closing(local.map_unordered(build_config_report, tasks)) as built:
        for _, rep in built:
            reports[rep["label"]] = rep
    return {cfg.label: reports[cfg.label] for cfg in configs}


def build_config_report(config: dict, out: str, cell_runs: int,
                        deltas: Sequence[float] | None, extra: dict | None = None) -> dict:
    """Join a config's cells in run order, build its run.json, write ``out/runs/<label>.json``."""
    from dpledger.policies.simulator import assemble
    from dpledger.report import build_run_report

    cfg = RunConfig(**config)
    cells = [read_json(cell_path(out, cfg, idx)) for idx in cells_of(cfg, cell_runs)]
    parts = [_cell_part(cell) for cell in cells]
    if cfg.env.get("kind") in CONTEXTUAL_KINDS:
        from dpledger.policies.contextual.simulator import assemble as contextual_assemble
        from dpledger.report_contextual import build_contextual_report
        env = cfg.make_env()
        res = contextual_assemble(cfg.make_policy(), env, _contextual_problem(cfg, env),
                                  cfg.seed, parts)
        rep = build_contextual_report(res, deltas)
    else:
        res = assemble(cfg.make_policy(), cfg.make_env(), cfg.horizon, cfg.seed, parts)
        rep = build_run_report(res, deltas)
    # run.json's ledger.rows counts the rows as the policy wrote them (what `dpledger run`, and
    # so `verify --resimulate`, reports); the cells hold compacted ledgers, whose row count
    # depends on how the rows merged
    rep["ledger"]["rows"] = sum(int(cell["ledger_rows"]) for cell in cells)
    rep["label"] = cfg.label
    rep["tags"] = cfg.tags
    rep.update(extra or {})
    write_json_atomic(os.path.join(out, "runs", f"{cfg.label}.json"), rep)
    return rep
