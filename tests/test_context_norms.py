"""Context norms are checked exactly (issue 30 §4): the sensitivities assume ‖x‖ ≤ L with no
slack, so a context an ulp above L is refused and its norm printed to 17 digits, or — with
``--clip-contexts`` (``online(clip_contexts=True)``) — scaled down to L, recorded in run.json
and covered by the certificate."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.errors import DpledgerError
from dpledger.policies import online
from dpledger.policies.contextual.environments import (check_contexts, fit_to_bound,
                                                       scale_features)


def _exact_norm2(x) -> Fraction:
    return sum(Fraction(float(v)) ** 2 for v in np.ravel(x))


def test_one_ulp_above_the_bound_is_refused_with_its_digits():
    x = np.array([[1.0, 0.0], [np.nextafter(1.0, 2.0), 0.0]])
    with pytest.raises(DpledgerError) as err:
        check_contexts(x, 1.0, "t")
    assert "row 1" in str(err.value) and "norm 1.0000000000000002" in str(err.value)
    check_contexts(x[:1], 1.0, "t")                         # exactly L is fine


def test_a_unit_vector_written_with_six_decimals():
    v = np.round(np.array([[0.6, 0.8001], [1 / 3, 2 ** 0.5 * 2 / 3]]), 6)
    assert _exact_norm2(v[0]) > 1
    with pytest.raises(DpledgerError) as err:
        check_contexts(v, 1.0, "t")
    assert f"norm {float(np.sqrt(np.dot(v[0], v[0])))!r}" in str(err.value)


def test_fitting_to_the_bound_is_exact():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 7))
    x /= np.linalg.norm(x, axis=1, keepdims=True)          # float norms just around 1
    x[::3] *= 1.0 + 1e-13
    fitted, n = fit_to_bound(x, 1.0)
    assert n > 600
    assert all(_exact_norm2(r) <= 1 for r in fitted)
    inside = np.array([_exact_norm2(r) <= 1 for r in x])
    assert np.array_equal(fitted[inside], x[inside])      # the others are untouched
    z = scale_features(rng.random((500, 64)), 1.0)
    assert all(_exact_norm2(r) <= 1 for r in z)


def test_clip_contexts_on_the_command_line(tmp_path, capsys):
    rng = np.random.default_rng(1)
    ctx = np.round(rng.dirichlet(np.ones(4), size=300) ** 0.5, 6)     # norms about 1 ± 1e-6
    table = tmp_path / "t.npz"
    np.savez(table, contexts=ctx, rewards=(rng.random((300, 3)) < 0.5).astype(float))
    args = ["run", "reward-dp-linucb", "--env", "contextual-table", "--table", str(table),
            "--seed", "0", "--runs", "1", "--quiet"]
    assert main(args + ["--out", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--clip-contexts" in err and "has norm 1.0000" in err
    out = tmp_path / "b.json"
    assert main(args + ["--clip-contexts", "--out", str(out)]) == 0
    env = json.loads(out.read_text())["environment"]
    over = sum(_exact_norm2(r) > 1 for r in ctx)
    assert env["clip_contexts"] is True and env["contexts_clipped"] == over > 0
    capsys.readouterr()
    assert main(["verify", str(out), "--resimulate", "--table", str(table)]) == 0
    assert main(["run", "linucb", "--env", "linear", "--clip-contexts", "--horizon", "10"]) == 2
    assert "--clip-contexts" in capsys.readouterr().err


def test_clip_contexts_in_the_step_form(tmp_path):
    x = np.array([0.6, 0.8000001, 0.0])
    p = online("jdp-linucb", 3, 50, dim=3, seed=0)
    with pytest.raises(DpledgerError, match="norm 1.00000"):
        p.select(context=x)
    q = online("jdp-linucb", 3, 50, dim=3, seed=0, clip_contexts=True,
               store=tmp_path / "s.db")
    q.select(context=x)
    assert q.rule.clipped == 1 and q.identity["clip_contexts"] is True
    q.close()
    with pytest.raises(DpledgerError, match="clip_contexts"):
        online("lazy-dp-ts", 3, clip_contexts=True)


@pytest.mark.parametrize("L", [1.0, 0.3, 7.0, 1e-5, 3e5])
def test_integer_square_sums_agree_with_fractions(L):
    """The exact check (integer mantissas) decides every near-bound row as Fraction arithmetic
    does: rows scaled to L in floating point (so half land an ulp above), with zeros, negative
    entries, entries 10⁻⁹ of the others and subnormal ones."""
    from dpledger.policies.contextual.environments import _exact_square_sums_over, _exactly_over
    rng = np.random.default_rng(int(L * 1000) % 2 ** 32)
    y = rng.standard_normal((400, 5)) * rng.choice([1e-3, 1.0, 1e3], size=(400, 1))
    y[:, 2] *= 1e-9
    y = y / np.linalg.norm(y, axis=1, keepdims=True) * L
    y[::7, 1] = 0.0
    y[::11, 3] = 5e-324
    want = np.array([_exact_norm2(r) > Fraction(L) ** 2 for r in y])
    assert 0 < want.sum() < len(want)            # both answers occur
    assert (_exact_square_sums_over(y, L) == want).all()
    assert (_exactly_over(y, L) == want).all()
    assert (_exactly_over(y, L) == want).all()   # the second call answers from the cache
    z = y.copy()                                 # other bytes, another answer: not the cache's
    z[~want] = z[~want] * (1 + 2.0 ** -50)
    want_z = np.array([_exact_norm2(r) > Fraction(L) ** 2 for r in z])
    assert want_z.sum() > want.sum()
    assert (_exactly_over(z, L) == want_z).all() and (_exactly_over(y, L) == want).all()


@pytest.mark.parametrize("d,L", [(1, 1.0), (2, 0.3), (5, 1.0), (64, 7.0)])
def test_linear_environment_contexts_never_exceed_the_bound(d, L):
    """The linear environment's drawn contexts (the compiled ``round_context``) have exact norm
    ≤ L in every one of 3·10⁴ draws, while the same draws scaled by L/‖g‖ without the kernel's
    shrink factor exceed it for some d (so the check has something to catch)."""
    from dpledger.policies.contextual import environments as CE
    from dpledger.policies.contextual.environments import _exactly_over
    from dpledger.policies.contextual.loop import round_context
    K = 6
    env = CE.linear(d, K, seed=3, norm_bound=L).as_kernel()
    rng, replay = np.random.default_rng(11), np.random.default_rng(11)
    scratch = np.zeros((K, d))
    drawn, plain = [], []
    for t in range(1, 5001):
        ctx, _ = round_context(env, rng, t, scratch)
        drawn.append(ctx.copy())
        for _ in range(K):                   # the kernel's arithmetic, in its order, unshrunk
            g = [abs(replay.standard_normal()) for _ in range(d)]
            s = 0.0
            for v in g:
                s += v * v
            f = L / np.sqrt(s)
            plain.append([v * f for v in g])
    drawn, plain = np.concatenate(drawn), np.array(plain)
    assert not _exactly_over(drawn, L).any()
    assert np.allclose(drawn, plain, rtol=1e-13, atol=0)
    if d > 1:
        assert _exactly_over(plain, L).any()
