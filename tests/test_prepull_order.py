"""M-TS-Gaussian's pre-pull order (issue 23 §3): ``prepull=arm-blocks`` pulls arm 0 b times,
then arm 1 b times, … (Ou et al.'s experiments: the best arm first on instances listed from
the highest mean down, their Figure 2's convex pre-pull regret).  The order draws no noise, so
releases, certificate and theorem are those of round-robin; run.json records the order only
when it is not the default, so that earlier runs keep their bytes.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.policies.environments import bernoulli
from dpledger.policies.registry import make_policy

MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]


def _actions(order, T=200, b=6, seed=3):
    pol = make_policy("mts-gaussian", b=b, c=2.0, prepull=order)
    out = pol.run_one(np.random.default_rng(seed), bernoulli(MEANS).as_tuple(), T)
    return out.actions


def test_arm_blocks_order():
    b, K = 6, len(MEANS)
    blocks = _actions("arm-blocks", b=b)
    rr = _actions("round-robin", b=b)
    assert blocks[:b * K].tolist() == [a for a in range(K) for _ in range(b)]
    assert rr[:b * K].tolist() == [t % K for t in range(b * K)]


def test_prepull_regret_is_convex_with_arm_blocks():
    """Pre-pull regret is deterministic: with arm blocks it grows by Δ_a over arm a's block
    (slopes 0, Δ_1, …, Δ_4: convex), with round-robin it grows by the mean gap per K rounds
    (a straight line at the end of each cycle), and both reach b·ΣΔ at round bK."""
    b, K = 40, len(MEANS)
    gaps = np.max(MEANS) - np.array(MEANS)
    curves = {order: np.cumsum(gaps[_actions(order, T=b * K, b=b)])
              for order in ("arm-blocks", "round-robin")}
    blocks = curves["arm-blocks"]
    assert np.allclose(blocks, np.cumsum(np.repeat(gaps, b)))
    slopes = np.diff(np.concatenate([[0.0], blocks[b - 1::b]])) / b
    assert np.allclose(slopes, gaps) and np.all(np.diff(slopes) > 0)      # convex
    rr = curves["round-robin"]
    assert np.allclose(rr[K - 1::K], np.arange(1, b + 1) * gaps.sum())
    assert blocks[-1] == pytest.approx(rr[-1]) == pytest.approx(b * gaps.sum())


def test_order_changes_no_privacy_statement():
    for T, K, b in ((1000, 5, 4), (50_000, 3, 100)):
        a = make_policy("mts-gaussian", b=b, c=3.0)
        blk = make_policy("mts-gaussian", b=b, c=3.0, prepull="arm-blocks")
        assert a.certificate(T, K) == blk.certificate(T, K)
        assert a.theorem(T, K) == blk.theorem(T, K)
        assert a.releases(T, K) == blk.releases(T, K)


def test_run_json_records_the_order_only_when_set(tmp_path):
    base = ["run", "mts-gaussian", "--horizon", "500", "--runs", "2", "--seed", "2",
            "--set", "b=3", "--set", "c=2"]
    assert main(base + ["--out", str(tmp_path / "rr.json")]) == 0
    assert main(base + ["--set", "prepull=arm-blocks", "--out", str(tmp_path / "bl.json")]) == 0
    rr = json.load(open(tmp_path / "rr.json"))
    bl = json.load(open(tmp_path / "bl.json"))
    assert "prepull" not in rr["policy"]["params"]
    assert bl["policy"]["params"]["prepull"] == "arm-blocks"
    # the certificate is the same; the regret curves differ (the pre-pull phase is convex)
    assert rr["privacy"]["certificate"] == bl["privacy"]["certificate"]
    assert rr["regret"]["final_mean"] != bl["regret"]["final_mean"]
    assert main(["verify", str(tmp_path / "bl.json"), "--resimulate"]) == 0
    assert main(["verify", str(tmp_path / "rr.json"), "--resimulate"]) == 0


def test_bad_order_is_one_line(capsys, tmp_path):
    code = main(["run", "mts-gaussian", "--horizon", "100", "--set", "prepull=best",
                 "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "prepull must be one of round-robin, arm-blocks, got 'best'" in err
    assert not (tmp_path / "x.json").exists()


def test_audit_json_records_the_order_only_when_set(tmp_path):
    """audit.json lists every parameter (hidden switches too) but an added one only when set,
    so that earlier audits keep their bytes."""
    base = ["audit", "mts-gaussian", "--trials", "200", "--horizon", "60", "--seed", "1",
            "--set", "b=2", "--set", "c=0.5"]
    assert main(base + ["--out", str(tmp_path / "rr.json")]) == 0
    assert main(base + ["--set", "prepull=arm-blocks", "--out", str(tmp_path / "bl.json")]) == 0
    rr = json.load(open(tmp_path / "rr.json"))
    bl = json.load(open(tmp_path / "bl.json"))
    assert "prepull" not in rr["policy"]["params"] and rr["policy"]["params"]["b"] == 2
    assert bl["policy"]["params"]["prepull"] == "arm-blocks"
