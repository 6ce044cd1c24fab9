"""Checks shared by the contextual ``counter=smooth`` tests (tests/test_smooth_jdp_linucb.py,
tests/test_smooth_mt.py, tests/test_smooth_reward_dp_linucb.py; not a test module)."""
from __future__ import annotations

import collections
import itertools
import json

import numpy as np

from contextual_data import serve_table, unit_rows
from dpledger.accounting.releases import release_to_json
from dpledger.accounting.store import verify_store
from dpledger.mechanisms import matrix as mx
from dpledger.mechanisms.matrix_smooth import smooth_tree_new, smooth_tree_push
from dpledger.mechanisms.noise import LATTICE_BITS
from dpledger.policies import online
from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.base import problem_of
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator


def table(seed, T=300, K=3, d=3):
    """A T × K table of unit-norm contexts in the positive orthant and Bernoulli(½) rewards."""
    rng = np.random.default_rng(seed)
    x = rng.random((T, d))
    x = CE.fit_to_bound(x / np.linalg.norm(x, axis=-1, keepdims=True), 1.0)[0]
    r = (rng.random((T, K)) < 0.5).astype(float)
    return CE.contextual_table(x, r)


def rows_per_record(rows, n, rid=None, stream=None):
    """How many ledger rows (of release ``rid``, or all) cover each of observations
    0 … n − 1 of stream 0 — every row must name stream 0 (one tree over every record) — or,
    given ``stream``, of that stream's rows only (a tree per stream)."""
    sel = np.ones(rows.shape[1], bool) if rid is None else rows[3] == rid
    if stream is None:
        assert np.all(rows[0] == 0)
    else:
        sel &= rows[0] == stream
    cover = np.zeros(n + 1, np.int64)
    np.add.at(cover, rows[1][sel], rows[4][sel])
    np.add.at(cover, rows[2][sel], -rows[4][sel])
    return np.cumsum(cover)[:n]


def prefix_noise_smooth(h, w, n, D, spec, seed):
    """The n prefixes of a seeded smooth tree (h, w) over zero items: pure noise."""
    st = smooth_tree_new(h, w, n, 1, D)
    rows = np.zeros((5, n), np.int64)
    rng = np.random.default_rng(seed)
    item, A = np.zeros(D), np.zeros((1, 1))
    out = np.empty((n, D))
    nr = 0
    for t in range(n):
        nr = smooth_tree_push(st, 0, item, rng, spec, A, np.zeros((0, D + 1)), rows, nr,
                              np.zeros(1, np.int64))
        out[t] = st[1][0, 0]
    return out


def prefix_noise_binary(levels, n, D, spec, seed, pad):
    """The n prefixes of a seeded binary tree (padded or not) over zero items."""
    tr = mx.tree_new(1, levels, 1, D, (0,))
    rng = np.random.default_rng(seed)
    item, A = np.zeros(D), np.zeros((1, 1))
    if pad:
        mx.tree_pad_init(tr, 0, rng, spec, A)
    out = np.empty((n, D))
    for t in range(n):
        mx.tree_push(tr, 0, item, rng, spec, pad, A, np.zeros((0, D + 1)))
        out[t] = mx.tree_prefix(tr, 0)
    return out


def trailing_ones(T, h, w):
    """z_t, the trailing 1-bits of the leaves l_1 … l_T (the h-bit integers of weight w in
    increasing order, after l_0 = 2^w − 1), enumerated from the combinations, independently of
    mechanisms/smooth.py."""
    leaves = sorted(sum(1 << p for p in c) for c in itertools.combinations(range(h), w))
    assert leaves[0] == (1 << w) - 1 and len(leaves) > T
    return np.array([len(bin(v)) - len(bin(v).rstrip("1")) for v in leaves[1:T + 1]])


def _key(rel) -> str:
    return json.dumps(release_to_json(rel), sort_keys=True)


def check_step_form_equals_whole_run(name, params, sampler, shared, tmp_path):
    """Serving a table — select(context of row t), observe its reward — takes the kernel's
    actions, leaves its generator in the same state and records the same rows (one per release
    of every released node, its exact range, the recorded release) as the whole run with no
    delay; the store verifies."""
    T, K, d = 120, 3, 3
    rng = np.random.default_rng(3)
    x = unit_rows(rng, (T, K, d) if shared else (T, d))
    rw = rng.integers(0, 17, (T, K)) / 16.0
    env = CE.contextual_table(x, rw)
    pol = make_policy(name, **params)
    problem = problem_of(env, T, 0, LATTICE_BITS if sampler == "exact" else 0)
    g = run_generator(5, 0)
    out = pol.run_one(g, env, problem)
    p = online(name, K, T, store=tmp_path / "s.db", seed=5, sampler=sampler, dim=d,
               shared=shared, **params)
    assert serve_table(p, x, rw) == out.actions.tolist()
    assert p.rng.bit_generator.state == g.bit_generator.state
    rels = p.store.releases
    mine = collections.Counter((int(a), int(s), int(e), _key(rels[int(r)]), int(c))
                               for _, a, s, e, r, c in p.store.rows_array())
    releases = pol.releases(problem)
    sim = collections.Counter((int(a), int(s), int(e), _key(releases[int(r)]), int(c))
                              for a, s, e, r, c in out.rows.T)
    assert mine == sim and sum(sim.values()) == T * len(pol.plan(problem).record_rids)
    p.close()
    assert verify_store(tmp_path / "s.db") == []


LINEAR = ["--env", "linear", "--dim", "2", "--arms", "3", "--horizon", "150"]


def check_cli_run_and_resimulate(name, tmp_path, capsys):
    """``run NAME --set counter=smooth`` records the counter in run.json, and ``verify
    --resimulate`` reproduces run.json and the ledger byte for byte."""
    from dpledger.cli import main
    out = tmp_path / "run.json"
    assert main(["run", name, "--set", "counter=smooth", *LINEAR, "--runs", "2",
                 "--out", str(out), "--quiet"]) == 0
    rep = json.loads(out.read_text())
    assert rep["policy"]["params"]["counter"] == "smooth"
    assert rep["privacy"]["checks"]["realized_le_certificate"]
    capsys.readouterr()
    assert main(["verify", str(out), "--resimulate"]) == 0
    assert "resimulation (run.json and ledger file bytes identical)" in capsys.readouterr().out


def check_cli_refused(name, args, message, tmp_path, capsys):
    """``run NAME ARGS``: one line on stderr containing ``message``, exit 2, no run.json."""
    from dpledger.cli import main
    out = tmp_path / "run.json"
    code = main(["run", name, *args, *LINEAR, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
