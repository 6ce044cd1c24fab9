"""``dp-ts --set counter=smooth`` (policies/smooth_hu_hegde.py, DPTSSmooth): the step form equals
the whole run (actions, generator state, records, as tests/test_step_equality.py), every release
the kernel draws has its row and nothing else is drawn, each reward's rows are its logarithmic
block (once closed) plus its smooth node count in its epoch's tree (enumeration), the certificate
is the ledger's worst reward and every full epoch's first reward attains its candidate, the node
noises follow Lap(2·(h_r − w_r)/ε), run.json names the counter only when set, the CLI run
resimulates byte for byte, and a bad counter (or one on lazy-dp-ts, which has no tree) is one
line, exit 2."""
from __future__ import annotations

import collections

import numpy as np
import pytest
from scipy import stats

from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import LaplaceRelease
from dpledger.accounting.smooth_tree import smooth_item_nodes
from dpledger.errors import DpledgerError
from dpledger.policies import environments as E
from dpledger.policies import online
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import simulate
from dpledger.policies.smooth_hu_hegde import epoch_items, epoch_release, epoch_shapes

from tests.test_step_equality import _key, _per_reward, _sim_records, _store_records, reward_table
from tests.test_step_smooth import _play, kernel_capture

ALPHA = 1e-3        # false-failure rate of each seeded distribution test for a fresh seed


def expected_reads(n: int, eps: float) -> list[collections.Counter]:
    """Per observation of an arm observed n times: its releases (by key) under DP-TS with the
    smooth tree — the logarithmic block k (observations [2^k − 1, 2^{k+1} − 1), released once
    closed, Lap(2/ε)) and, for epoch r's buffer (observations [L_r, 2·L_r), L_r = 2^{r+1} − 1),
    ``smooth_item_nodes`` copies of epoch r's node release over the items it received."""
    out = [collections.Counter() for _ in range(n)]
    log = _key(LaplaceRelease(scale=2.0 / eps, sensitivity=1.0))
    k = 0
    while (1 << (k + 1)) - 1 <= n:
        for i in range((1 << k) - 1, (1 << (k + 1)) - 1):
            out[i][log] += 1
        k += 1
    r = 0
    while epoch_items(r) < n:
        lo = epoch_items(r)
        items = min(lo, n - lo)
        h, w = epoch_shapes(r + 1)[r]
        key = _key(epoch_release(eps, r))
        for j, c in enumerate(smooth_item_nodes(items, int(h), int(w))):
            if c:
                out[lo + j][key] += int(c)
        r += 1
    return out


CASES = [(2, 400, {"epsilon": 50.0}), (3, 300, {}), (2, 300, {"posterior_draw": "max",
                                                                 "epsilon": 20.0})]


@pytest.mark.parametrize("K,T,params,sampler", [c + ("float",) for c in CASES]
                         + [CASES[0] + ("exact",)])
def test_smooth_dp_ts_step_form_equals_simulator(K, T, params, sampler, tmp_path):
    params = dict(params, counter="smooth")
    table = reward_table(T, K)
    env = E.table(table)
    seed = 5
    pol = make_policy("dp-ts", **params)
    assert type(pol).__name__ == "DPTSSmooth" and pol.params["counter"] == "smooth"
    res = simulate(pol, env, T, seed=seed, runs=1, keep_actions=True, sampler=sampler)
    g, cap, (played, n_rows, draws) = kernel_capture(pol, env, T, K, seed, sampler)
    assert played == n_rows == draws == T          # one release per reward, one draw per row
    p = online("dp-ts", K, None, store=tmp_path / "s.db", seed=seed, sampler=sampler, **params)
    assert _play(p, table) == res.actions[0].tolist()
    assert p.rng.bit_generator.state == g.bit_generator.state
    sim, mine = _sim_records(res.ledger), _store_records(p.store)
    assert mine == sim and len(mine) == T
    captured = collections.Counter((int(a), int(s), int(e)) for a, s, e in
                                   cap[3:6, 1:1 + int(cap[5, 0])].T)
    assert collections.Counter((a, s, e) for a, s, e, _, _ in mine) == captured
    if sampler == "float":
        # every observation's reads: its closed log block and its smooth node count (exact)
        eps = pol.params["epsilon"]
        per = _per_reward(mine)
        pulls = np.bincount(res.actions[0], minlength=K)
        for a in range(K):
            want = expected_reads(int(pulls[a]), eps)
            for i in range(int(pulls[a])):
                got = collections.Counter({r: c for (b, j, r), c in per.items()
                                           if b == a and j == i})
                assert got == want[i], (a, i)
    p.close()


def test_smooth_dp_ts_certificate_is_the_worst_reward_and_each_epoch_attains_its_candidate():
    T, K, eps = 3000, 2, 50.0
    pol = make_policy("dp-ts", counter="smooth", epsilon=eps)
    cert = pol.certificate(T, K)
    top = max(c.composition.pure_epsilon() for c in cert.candidates)
    res = simulate(pol, E.bernoulli([0.9, 0.1]), T, seed=3, runs=1, keep_actions=True)
    worst = res.ledger.worst_reward().composition.pure_epsilon()
    assert worst <= top * (1 + 1e-12) and top == pytest.approx(eps)   # ε/2 + ε/2, as binary
    assert worst == pytest.approx(top)
    binary = max(c.composition.pure_epsilon()
                 for c in make_policy("dp-ts", epsilon=eps).certificate(T, K).candidates)
    assert top == pytest.approx(binary)
    # the good arm's full epochs: each buffer's first reward's reads are the candidate's
    rels = res.ledger.releases
    rows = res.ledger.expanded_rows()
    n0 = int(np.sum(res.actions[0] == 0))
    reads = collections.Counter()
    for a, s, e, rid, c in zip(rows["arm"], rows["start"], rows["stop"], rows["release_id"],
                               rows["count"], strict=True):
        if a == 0:
            for i in range(int(s), int(e)):
                reads[(i, int(rid))] += int(c)
    comps = {c.composition for c in cert.candidates}
    r, hit = 0, 0
    while 2 * epoch_items(r) + 1 <= n0:             # epoch r's buffer full and its block closed
        i = epoch_items(r)
        comp = Composition.of([(rels[rid], c) for (j, rid), c in reads.items() if j == i])
        assert comp in comps, r
        hit += 1
        r += 1
    assert hit >= 8                                  # epochs 0 … 7 at least: shapes (2,1) … (24,22)


def test_smooth_dp_ts_node_noise_is_laplace_of_its_epoch_scale():
    """Every captured release's scale is its epoch's 2·(h_r − w_r)/ε (log blocks 2/ε) and the
    noises divided by it are Lap(1) (KS, seeded; false failure ALPHA for a fresh seed)."""
    T, K, eps = 20000, 2, 5.0
    pol = make_policy("dp-ts", counter="smooth", epsilon=eps)
    env = E.bernoulli([0.8, 0.3])
    g, cap, (played, n_rows, draws) = kernel_capture(pol, env, T, K, 1, "float")
    n = int(cap[5, 0])
    assert n == T and cap[4, 0] == 0
    noisy, clean, scale, _, start, stop = cap[:, 1:1 + n]
    for s, e, sc in zip(start, stop, scale, strict=True):
        s, e = int(s), int(e)
        r = 0
        while epoch_items(r + 1) <= s:
            r += 1
        in_buffer = epoch_items(r) <= s and e <= 2 * epoch_items(r)   # a node of epoch r
        is_log = (s + 1) & s == 0 and e == 2 * s + 1                  # block [2^k − 1, 2^{k+1} − 1)
        assert in_buffer != is_log
        assert sc == pytest.approx(2.0 / eps if is_log else epoch_release(eps, r).scale)
    z = (noisy - clean) / scale
    assert stats.kstest(z, "laplace").pvalue > ALPHA
    assert len(set(np.round(scale, 12))) >= 3       # several epochs' scales drawn


def test_counter_recorded_only_when_set_and_theorems():
    from dpledger.policies.regret_bounds import hu_hegde_2022_dp_ts, hu_hegde_2022_dp_ts_minimax
    assert "counter" not in make_policy("dp-ts").public_params()
    pol = make_policy("dp-ts", counter="smooth")
    assert pol.public_params()["counter"] == "smooth"
    with pytest.raises(DpledgerError, match="counter must be one of binary, smooth"):
        make_policy("dp-ts", counter="fenwick")
    with pytest.raises(DpledgerError, match="no parameter 'counter'"):
        make_policy("lazy-dp-ts", counter="smooth")
    thm = pol.theorem(1000, 2)
    assert thm.pure_epsilon == 1.0 and any("counter=smooth" in n for n in thm.notes)
    inst = [0.75, 0.5]
    for f, args in ((hu_hegde_2022_dp_ts, (inst, 1000, 1.0)),
                    (hu_hegde_2022_dp_ts_minimax, (2, 1000, 1.0))):
        assert f(*args).order_term is not None and not f(*args).unmet
        s = f(*args, counter="smooth")
        assert s.order_term is None and any("counter=smooth" in u for u in s.unmet)


def test_cli_run_resimulates_and_bad_counter_is_one_line(tmp_path, capsys):
    import json

    from dpledger.cli import main
    out = tmp_path / "run.json"
    assert main(["run", "dp-ts", "--set", "counter=smooth", "--means", "0.7,0.5",
                 "--horizon", "400", "--runs", "2", "--out", str(out), "--quiet"]) == 0
    rep = json.loads(out.read_text())
    assert rep["policy"]["params"]["counter"] == "smooth"
    assert rep["privacy"]["checks"]["realized_le_certificate"]
    capsys.readouterr()
    assert main(["verify", str(out), "--resimulate"]) == 0
    assert "resimulation (run.json and ledger file bytes identical)" in capsys.readouterr().out
    for name, value, message in (("dp-ts", "fenwick", "counter must be one of binary, smooth"),
                                 ("lazy-dp-ts", "smooth", "has no parameter 'counter'")):
        bad = tmp_path / f"{name}.json"
        code = main(["run", name, "--set", f"counter={value}", "--means", "0.7,0.5",
                     "--horizon", "50", "--out", str(bad), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1
        assert not bad.exists()


@pytest.mark.slow
def test_smooth_dp_ts_whitebox_audit_nine_tenths():
    """Issue 32: ≥ 0.9 of the certificate.  The dp-ts white-box design (audits/pairs.py) changes
    round K + 1's reward, the first item of epoch 0's buffer: one node Lap(2/ε) at once and one
    logarithmic block Lap(2/ε) at the arm's third pull — ε, the certificate.  1e5 per side."""
    from dpledger.audits.policy import audit_policy
    pol = make_policy("dp-ts", counter="smooth")
    r = audit_policy(pol, trials=100_000, mode="whitebox", T=20, K=2, seed=0)
    assert r.certified == pytest.approx(1.0)
    assert 0.9 <= r.ratio <= 1.0 and r.violation is False


def test_smooth_dp_ts_realized_within_certificate_at_every_short_horizon():
    """Every horizon T = K … 140 (K = 2, 3), truncated last epochs included: the ledger's worst
    reward never exceeds the certificate, and the certificate never exceeds the binary one's
    (both ε once an epoch-0 buffer item and its block fit)."""
    means = [0.9, 0.4, 0.2]
    for K in (2, 3):
        for T in range(K, 141, 7):
            pol = make_policy("dp-ts", counter="smooth", epsilon=50.0)
            cert = max(c.composition.pure_epsilon() for c in pol.certificate(T, K).candidates)
            binary = max(c.composition.pure_epsilon()
                         for c in make_policy("dp-ts", epsilon=50.0).certificate(T, K).candidates)
            res = simulate(pol, E.bernoulli(means[:K]), T, seed=T, runs=1)
            worst = res.ledger.worst_reward()
            worst = worst.composition.pure_epsilon() if worst is not None else 0.0
            assert worst <= cert * (1 + 1e-12), (K, T)
            assert cert <= binary * (1 + 1e-12), (K, T)


def test_smooth_dp_ts_step_state_survives_a_restart(tmp_path):
    """Closing and reopening the store restores the step rule's whole state (the smooth trees'
    arrays among it) and the run goes on, its epochs' shapes recomputed as reached."""
    table = reward_table(600, 3)
    p = online("dp-ts", 3, store=tmp_path / "s.db", seed=4, epsilon=20.0, counter="smooth")
    for _ in range(250):
        t = p.select()
        p.observe(t, table[t.round - 1, t.arm])
    state = {k: v.copy() for k, v in p.rule.state.items()}
    p.close()
    q = online("dp-ts", 3, store=tmp_path / "s.db", seed=4, epsilon=20.0, counter="smooth")
    assert type(q.rule).__name__ == "SmoothDPTSStep" and set(q.rule.state) == set(state)
    assert all(np.array_equal(state[k], q.rule.state[k]) for k in state)
    for _ in range(350):
        t = q.select()
        q.observe(t, table[t.round - 1, t.arm])
    assert q.n_recorded + p.n_recorded == 600        # one release per reward, across the restart
    q.close()
