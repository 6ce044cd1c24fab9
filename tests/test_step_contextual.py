"""The contextual policies' step form (issue 24 §1): for a contextual table and a seed, serving
the table — select(context of row t), then observe the table's reward of the selected arm —
takes the same actions, consumes the same random stream and records the same releases as the
simulator's run 0 with no delay, for every contextual policy, both context shapes and both
samplers; one-line refusals of bad contexts; a restart resumes the outstanding contexts.

The records: LinUCB and linear TS read each record once (one row [n, n + 1) per record; the
simulator one row [0, n) per stream: the same reads); a private policy's rows are the p-sums
its trees closed — recomputed independently from the simulator's tree records (item t closes
the node [t − 2^i, t), i the lowest set bit of t) — each with the release the tree's record
names.
"""
from __future__ import annotations

import collections
import json

import numpy as np
import pytest

from contextual_data import serve_table, unit_rows
from dpledger.accounting.releases import release_to_json
from dpledger.accounting.store import LedgerStore, verify_store
from dpledger.errors import DpledgerError
from dpledger.mechanisms.noise import LATTICE_BITS
from dpledger.policies import online
from dpledger.policies.contextual import environments as CE
from dpledger.policies.contextual.base import problem_of
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import run_generator
from dpledger.policies.step_rules_contextual import CONTEXTUAL_RULES

T, K, D = 120, 3, 3


def _cases():
    for name in sorted(CONTEXTUAL_RULES):
        for params in ([{}, {"mode": "wishart"}] if name == "jdp-linucb" else [{}]):
            pol = make_policy(name, **params)
            exact = pol.private and pol.exact_sampler and params.get("mode") != "wishart"
            for sampler in (("float", "exact") if exact else ("float",)):
                for shared in (False, True):
                    yield pytest.param(name, params, sampler, shared,
                                       id=f"{name}-{sampler}-{'shared' if shared else 'disjoint'}"
                                       + ("-wishart" if params else ""))


def _key(rel) -> str:
    return json.dumps(release_to_json(rel), sort_keys=True)


def _table(shared: bool):
    rng = np.random.default_rng(3)
    x = unit_rows(rng, (T, K, D) if shared else (T, D))
    rw = rng.integers(0, 17, (T, K)) / 16.0
    return x, rw


def _nodes(trees, releases) -> collections.Counter:
    """The p-sums a tree record's items closed: item t closes [t − 2^i, t), i = lowest set bit
    of t; one per tree record (release)."""
    out = collections.Counter()
    for g, off, n, rid in zip(trees["arm"], trees["offset"], trees["n_items"],
                              trees["release_id"], strict=True):
        for t in range(1, int(n) + 1):
            i = (t & -t).bit_length() - 1
            out[(int(g), int(off) + t - (1 << i), int(off) + t, _key(releases[int(rid)]))] += 1
    return out


@pytest.mark.parametrize("name,params,sampler,shared", list(_cases()))
def test_contextual_step_form_equals_simulator(name, params, sampler, shared, tmp_path):
    x, rw = _table(shared)
    env = CE.contextual_table(x, rw)
    pol = make_policy(name, **params)
    bits = LATTICE_BITS if sampler == "exact" else 0
    problem = problem_of(env, T, 0, bits)
    g = run_generator(5, 0)
    out = pol.run_one(g, env, problem)

    p = online(name, K, T, store=tmp_path / "s.db", seed=5, sampler=sampler, dim=D,
               shared=shared, **params)
    actions = serve_table(p, x, rw)
    assert actions == out.actions.tolist()
    assert p.rng.bit_generator.state == g.bit_generator.state
    rels = p.store.releases
    mine = collections.Counter()
    for _, a, s, e, r, c in p.store.rows_array():
        mine[(int(a), int(s), int(e), _key(rels[int(r)]))] += int(c)
    if pol.private:
        assert mine == _nodes(out.trees, pol.releases(problem))
        assert sum(mine.values()) >= T // 2
    else:
        sim = collections.Counter()
        for a, s, e, _, c in out.rows.T:
            for i in range(int(s), int(e)):
                sim[(int(a), i, i + 1, _key(p.release(0)))] += int(c)
        assert mine == sim and sum(sim.values()) == T
    p.close()
    assert verify_store(tmp_path / "s.db") == []


def test_contextual_bad_input_is_one_line(tmp_path):
    p = online("jdp-linucb", K, 50, store=tmp_path / "s.db", seed=0, dim=D)
    for bad, words in [(None, "needs the round's context"), (np.ones(D + 1), "shape"),
                       (np.full(D, np.nan), "NaN"), (np.ones(D), "above the declared bound"),
                       ("abc", "must be numbers")]:
        with pytest.raises(DpledgerError) as exc:
            p.select(context=bad)
        msg = str(exc.value)
        assert words in msg and "\n" not in msg
    assert p.t == 0
    with pytest.raises(DpledgerError) as exc:
        online("jdp-linucb", K, store=tmp_path / "t.db", seed=0, dim=D)
    assert "needs a horizon" in str(exc.value)
    with pytest.raises(DpledgerError) as exc:
        online("lazy-dp-ts", K, dim=D)
    assert "K-armed" in str(exc.value)
    p.close()
    with pytest.raises(DpledgerError) as exc:        # a store made for another dimension
        online("jdp-linucb", K, 50, store=tmp_path / "s.db", seed=0, dim=D + 1)
    assert "\n" not in str(exc.value)


def test_contextual_late_rewards_and_restart(tmp_path):
    """Rewards observed late and out of order across a restart: the outstanding tickets keep
    their contexts (checkpointed), the ledger verifies, every record lies in at most ⌈log2(T +
    1)⌉ nodes of the one tree (record privacy), each node one row per release it makes."""
    path = tmp_path / "s.db"
    rng = np.random.default_rng(4)
    x = unit_rows(rng, (200, D))
    p = online("dp-linucb-mt", K, 200, store=path, seed=1, dim=D)
    pending = []
    for t in range(100):
        pending.append(p.select(context=x[t]))
        if len(pending) > 8:
            rng.shuffle(pending)
            tk = pending.pop()
            p.observe(tk, float(rng.random() < 0.5))
    p.checkpoint()
    p.store.close()
    q = online("dp-linucb-mt", K, 200, store=path, seed=1, dim=D, take_over=True)
    assert q.t == 100 and set(q.contexts) == {tk.round for tk in pending}
    for tk in pending:
        assert np.array_equal(q.contexts[tk.round], x[tk.round - 1])
        q.observe(tk, 1.0)
    for t in range(100, 200):
        q.observe(q.select(context=x[t]), 0.0)
    q.close()
    assert verify_store(path) == []
    with LedgerStore.open(path, readonly=True) as store:
        rows = store.rows_array()
    per_record = collections.Counter()
    for _, a, s, e, _, c in rows:
        assert a == 0
        for i in range(int(s), int(e)):
            per_record[i] += int(c)
    # a node makes one row per release of the tree's records (its entry groups, per block)
    n_rec = len(q.rule.plan.record_rids)
    assert len(per_record) > 150
    assert max(per_record.values()) <= n_rec * (200).bit_length()
