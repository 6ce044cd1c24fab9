"""The exact discrete-Gaussian sampler of TS-Gaussian, M-TS-Gaussian and DP-TS-UCB
(``--sampler exact``, issue 12 §5): CKS20 Algorithm 3 in int64 inside the kernels, the lattice σ
rounded up, discrete releases in the ledger and the certificate (zCDP, never a continuous μ),
run + verify, same seed → same bytes, and ``--rng os``."""
from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from numba import njit
from scipy import stats

from dpledger.accounting.composition import Composition
from dpledger.accounting.posterior_reads import (posterior_read_lattice_sigma,
                                                 posterior_read_release, posterior_read_weight)
from dpledger.accounting.releases import (DiscreteGaussianRelease, DiscreteGaussianTotal,
                                          GaussianRelease, lattice_sigma)
from dpledger.cli import main
from dpledger.errors import DpledgerError
from dpledger.mechanisms.exact import discrete_gaussian_pmf
from dpledger.mechanisms.noise import LATTICE_BITS, discrete_gaussian_int, lattice_release
from dpledger.policies.environments import bernoulli, table
from dpledger.policies.hu2025 import max_epoch, variance_scale
from dpledger.policies.ou import _mts_gaussian
from dpledger.policies.registry import make_policy
from dpledger.policies.simulator import kernel_releases, run_certificate, run_generator, simulate

GAUSS = ["ts-gaussian", "mts-gaussian", "dp-ts-ucb"]
B = LATTICE_BITS


@njit(cache=True)
def _draws(rng, s, n):
    out = np.empty(n, np.int64)
    for i in range(n):
        out[i] = discrete_gaussian_int(rng.bit_generator, s)
    return out


def _chi_square_p(z: np.ndarray, sigma: float) -> float:
    """Pearson's χ² p-value of integer samples against N_ℤ(0, σ²), cells with at least 5
    expected draws, both tails pooled into one cell each."""
    n = z.size
    m = 0
    while n * discrete_gaussian_pmf(np.array([m + 1]), sigma)[0] >= 5:
        m += 1
    inner = np.arange(-m, m + 1)
    p_inner = discrete_gaussian_pmf(inner, sigma)
    p_tail = (1.0 - p_inner.sum()) / 2.0
    expected = n * np.concatenate([[p_tail], p_inner, [p_tail]])
    mid = z[(z >= -m) & (z <= m)] + m
    observed = np.concatenate([[np.sum(z < -m)], np.bincount(mid, minlength=inner.size),
                               [np.sum(z > m)]])
    keep = expected > 0
    chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    return float(stats.chi2.sf(chi2, keep.sum() - 1))


# five χ² tests at α = 2e-5 each: a correct sampler fails one of them with probability ≤ 1e-4
# (Bonferroni); the draws are seeded, so a pass or a failure is reproducible
@pytest.mark.parametrize("s", [1, 2, 3, 7, 40])
def test_compiled_discrete_gaussian_matches_its_pmf(s):
    """χ² goodness of fit of 60000 compiled draws against the discrete Gaussian pmf, σ = s
    (the kernels draw integer lattice σ only: σ² = s²; rational σ with non-integer σ² is the
    Python sampler's, tests/test_mechanisms_samplers.py::test_discrete_gaussian)."""
    z = _draws(np.random.default_rng(1000 + s), s, 60000)
    assert _chi_square_p(z, float(s)) > 2e-5


def test_compiled_discrete_gaussian_large_sigma_moments():
    """At a lattice σ (2^16·√2) the pmf is too wide for χ² cells to matter: the mean and
    variance z-scores of 40000 draws stay within 5 (false failure < 1e-5 with the normal
    approximation; the discrete Gaussian's variance differs from σ² by < e^{-10^9})."""
    s = 92682
    z = _draws(np.random.default_rng(5), s, 40000).astype(np.float64)
    n = z.size
    assert abs(z.mean() / math.sqrt(s * s / n)) < 5
    assert abs((z.var(ddof=1) - s * s) / math.sqrt(2 * s ** 4 / n)) < 5


def test_same_generator_state_same_draws():
    a = _draws(np.random.default_rng(3), 11, 1000)
    b = _draws(np.random.default_rng(3), 11, 1000)
    assert np.array_equal(a, b)


# -- recorded vs drawn, in rational arithmetic ----------------------------------------------

def test_lattice_sigma_never_below_the_continuous_noise_rational():
    """For TS-Gaussian draws over k rewards (ratio σ/Δ = √(c(k+1))) and DP-TS-UCB's epoch
    models (√(L/n)·n), the drawn lattice σ satisfies s² ≥ ratio²·2^(2b) exactly, i.e. the
    drawn variance is at least the continuous one, and the recorded ρ weight (2^b/s)² rounded
    up is at least the exact 2^(2b)/s² — checked with Fractions; s is also tight (s − 1 is
    not enough, or s exceeds the exact value by at most 1 + 2^-45 relative)."""
    rng = np.random.default_rng(0)
    ks = np.r_[0, 1, 2, 3, rng.integers(1, 10 ** 9, 300)]
    cs = [1.0, 0.1, 3.0, 1e-3, 7.25, 0.3333333333333333] + list(rng.uniform(1e-3, 50, 20))
    for bits in (1, 8, B):
        for c in cs:
            for k in ks[::7].tolist():
                s = posterior_read_lattice_sigma(float(k), c, bits)
                exact_var = Fraction(c) * (k + 1) * 4 ** bits
                assert Fraction(s) ** 2 >= exact_var
                assert Fraction(s - 1) ** 2 < exact_var * (1 + Fraction(1, 2 ** 45)) or s == 1
                w = posterior_read_weight(float(k), c, bits)
                assert Fraction(w) >= Fraction(4 ** bits, s * s)
                assert Fraction(w) <= Fraction(4 ** bits, s * s) * (1 + Fraction(1, 2 ** 48))
                assert posterior_read_release(int(k), c, bits) == DiscreteGaussianRelease(
                    sigma=float(s), sensitivity=2 ** bits)
    for T in (100, 10 ** 4, 10 ** 6):
        for alpha in (0.0, 0.5, 1.0):
            L = variance_scale(T, alpha)
            for rel in make_policy("dp-ts-ucb", alpha=alpha).releases(T, 2):
                lat = lattice_release(rel, B)
                n = round(1 / rel.sensitivity)
                assert isinstance(lat, DiscreteGaussianRelease) and lat.sensitivity == 2 ** B
                assert Fraction(lat.sigma) ** 2 >= Fraction(L) * n * 4 ** B


def test_compiled_sigma_and_weight_equal_the_accounting_formulas():
    """The kernels' compiled s_k and the ledger's compiled weight are the accounting's Python
    formulas bit for bit (one formula, two compilations)."""
    from dpledger.accounting.read_kernels import _mu2, lattice_sigma_k
    from dpledger.mechanisms.noise import gaussian_lattice_sigma

    @njit
    def weight(k, c, bits):
        return _mu2(k, c, bits)

    rng = np.random.default_rng(2)
    for _ in range(300):
        k = float(rng.integers(0, 10 ** 7))
        c = float(rng.uniform(0.01, 10))
        bits = int(rng.integers(0, 20))
        if bits:
            assert lattice_sigma_k(k, c, bits) == posterior_read_lattice_sigma(k, c, bits)
            r = math.sqrt(c * (k + 1.0))
            assert gaussian_lattice_sigma(r, bits) == lattice_sigma(r, bits)
        assert weight(k, c, bits) == posterior_read_weight(k, c, bits)


def test_kernel_draws_with_the_recorded_sigma_and_on_the_lattice():
    """Full capture of an exact TS-Gaussian run: every sample's lattice σ (capture row 2) is
    the s_k the ledger accounts for at that arm's k, and every released θ is m/((k+1)·2^b)
    for an integer m — on a lattice fixed by the public k, whatever the rewards (two tables
    with unrelated rewards give the same kind of set)."""
    T, K, c = 400, 3, 1.0
    r = np.random.default_rng(4)
    tables = [r.uniform(0, 1, (T, K)), np.round(r.uniform(0, 1, (T, K)) ** 3, 7)]
    for tab in tables:
        env = table(tab).with_lattice(B)
        rng = run_generator(9, 0)
        cap = np.zeros((3, T * K))
        actions = np.zeros(T, np.int64)
        _mts_gaussian(rng, env.as_tuple(), T, K, T, np.array([0.0, c]), actions,
                      np.zeros((5, 1), np.int64), cap)
        k = np.zeros(K, np.int64)
        for t in range(T):
            for j in range(K):
                theta, s = cap[0, t * K + j], cap[2, t * K + j]
                assert s == posterior_read_lattice_sigma(float(k[j]), c, B)
                den = (k[j] + 1.0) * 2.0 ** B
                m = round(theta * den)
                assert m / den == theta
            k[actions[t]] += 1


def test_dp_ts_ucb_witness_sample_on_the_lattice():
    """DP-TS-UCB's first sample of arm 0 (epoch 0, n = 1) is an integer number of lattice
    steps, for rewards that are not on any coarse grid."""
    tab = np.random.default_rng(6).uniform(0, 1, (300, 2))
    res = simulate(make_policy("dp-ts-ucb"), table(tab), 300, seed=1, runs=3, capture=True,
                   sampler="exact")
    for cap in res.captured:
        theta = cap["released"][0]
        assert theta * 2.0 ** B == round(theta * 2.0 ** B)


# -- ledger, certificate, run + verify --------------------------------------------------------

def test_ledger_and_certificate_are_discrete():
    """Exact TS-Gaussian: posterior reads carry bits = 16, the per-reward composition is a
    discrete-Gaussian zCDP total (never a Gaussian μ); the certificate is the discrete Gaussian
    of k = 1, T − 1 times; DP-TS-UCB: its rows name discrete Gaussian releases."""
    T, env = 500, bernoulli([0.7, 0.4])
    res = simulate(make_policy("ts-gaussian"), env, T, seed=2, runs=2, sampler="exact")
    led = res.ledger
    assert set(led.posterior_reads["bits"].tolist()) == {B}
    worst = led.worst_reward()
    assert worst.currency == "zcdp"
    (rel, n), = worst.composition.items
    assert isinstance(rel, DiscreteGaussianTotal) and n == 1
    assert worst.composition.gdp_mu() is None
    # the worst reward's ρ is the exact sum over its reads of 2^(2b)/(2 s_k²)
    rows = led.posterior_read_rows()
    m = (rows["run"] == worst.reward.run) & (rows["arm"] == worst.reward.arm) \
        & (rows["stop"] > worst.reward.index)
    exact = sum(Fraction(int(cnt)) * Fraction(4 ** B, 2 * posterior_read_lattice_sigma(
        float(k), 1.0, B) ** 2) for k, cnt in zip(rows["stop"][m], rows["count"][m], strict=True))
    assert Fraction(rel.rho) >= exact * (1 - Fraction(1, 10 ** 12))
    assert rel.rho <= float(exact) * (1 + 1e-12)
    cert = run_certificate(make_policy("ts-gaussian"), T, 2, B)
    (crel, cn), = cert.candidates[0].composition.items
    assert crel == DiscreteGaussianRelease(sigma=float(posterior_read_lattice_sigma(1.0, 1.0, B)),
                                           sensitivity=2 ** B) and cn == T - 1
    assert worst.composition.zcdp_rho() <= cert.candidates[0].composition.zcdp_rho()
    pol = make_policy("dp-ts-ucb")
    rels = kernel_releases(pol, env.with_lattice(B), T, 2)
    assert all(isinstance(r, DiscreteGaussianRelease) for r in rels)
    assert len(rels) == max_epoch(T, 2) + 1
    dres = simulate(pol, env, T, seed=2, runs=2, sampler="exact")
    assert all(isinstance(r, DiscreteGaussianRelease) for r in dres.ledger.releases)
    dcert = run_certificate(pol, T, 2, B)
    assert dcert.candidates[0].composition.items[0][0] == rels[0]   # epoch 0: same σ


def test_ledger_refuses_mixed_gaussian_reads():
    from dpledger.accounting.ledger import RewardLedger
    led = RewardLedger()
    led.add_actions(0, np.array([0, 1, 0, 1]))
    led.add_posterior_reads(0, [0, 1], 2, 4, 1.0, [B, 0])
    with pytest.raises(DpledgerError, match="mix"):
        led.worst_reward()
    with pytest.raises(DpledgerError, match="bits"):
        led.add_posterior_reads(0, 0, 1, 2, 1.0, 31)


def test_discrete_gaussian_total_is_zcdp_only():
    tot = Composition.discrete_gaussian_total(2.0, [(DiscreteGaussianRelease(sigma=4.0,
                                                                             sensitivity=2), 3)])
    assert tot.zcdp_rho() == pytest.approx(2.0 + 3 * 4 / 32, rel=1e-15)
    assert tot.gdp_mu() is None and math.isinf(tot.pure_epsilon())
    assert tot.status("pld") == "not_applicable"
    assert Composition.from_json(tot.to_json()) == tot
    assert not any(isinstance(r, GaussianRelease) for r in tot.releases)


def _run(tmp_path, name, *extra, seed="3"):
    out = tmp_path / f"{name}.json"
    args = ["run", name, "--sampler", "exact", "--horizon", "600", "--runs", "2",
            "--out", str(out), "--quiet", *extra]
    if seed is not None:
        args += ["--seed", seed]
    return main(args), out


@pytest.mark.parametrize("name", GAUSS)
def test_run_and_verify_exact(tmp_path, name, capsys):
    """``run --sampler exact`` then ``verify``: exit 0 both; the stored compositions name only
    discrete releases; ``show`` states per-reward zCDP ρ (no μ); a tampered certificate ρ is
    found by verify."""
    code, out = _run(tmp_path, name)
    assert code == 0
    assert main(["verify", str(out)]) == 0
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    assert "per-reward zCDP ρ" in capsys.readouterr().out
    rep = json.loads(out.read_text())
    assert rep["sampler"] == "exact" and rep["environment"]["lattice_bits"] == B
    kinds = {item["release"]["kind"] for block in ("certificate", "realized")
             for item in rep["privacy"][block]["composition"]}
    assert kinds <= {"discrete_gaussian", "discrete_gaussian_total"} and kinds
    rep["privacy"]["certificate"]["zcdp_rho"] *= 0.5
    out.write_text(json.dumps(rep))
    assert main(["verify", str(out)]) != 0


@pytest.mark.parametrize("name", GAUSS)
def test_same_seed_same_bytes(tmp_path, name):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    assert _run(a, name)[0] == 0 and _run(b, name)[0] == 0
    for f in (f"{name}.json", f"{name}.ledger.json"):
        assert (a / f).read_bytes() == (b / f).read_bytes()


def test_rng_os(tmp_path, capsys):
    """``--rng os``: recorded (seed null, rng.reproducible false), two runs differ; refused
    with the float sampler and with ``--seed`` (exit 2, one line)."""
    code, out = _run(tmp_path, "ts-gaussian", "--rng", "os", seed=None)
    assert code == 0
    rep = json.loads(out.read_text())
    assert rep["seed"] is None and rep["rng"]["source"] == "os"
    assert rep["rng"]["reproducible"] is False
    assert main(["verify", str(out)]) == 0
    (tmp_path / "second").mkdir()
    code2, out2 = _run(tmp_path / "second", "ts-gaussian", "--rng", "os", seed=None)
    assert code2 == 0
    assert json.loads(out2.read_text())["regret"] != rep["regret"]   # P(equal) ≈ 0
    capsys.readouterr()
    assert main(["run", "ts-gaussian", "--rng", "os", "--horizon", "50", "--runs", "1",
                 "--out", str(tmp_path / "f.json"), "--quiet"]) == 2
    assert main(["run", "ts-gaussian", "--sampler", "exact", "--rng", "os", "--seed", "1",
                 "--horizon", "50", "--runs", "1", "--out", str(tmp_path / "g.json"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error:") == 2


def test_float_ts_gaussian_verifies(tmp_path):
    """The float sampler's posterior reads (Gaussian, no finite pure ε) verify too: verify's
    independent sweep counted them as pure ε 0 against the report's ∞ (found while rebasing)."""
    out = tmp_path / "f.json"
    assert main(["run", "ts-gaussian", "--horizon", "600", "--runs", "2", "--out", str(out),
                 "--quiet"]) == 0
    assert main(["verify", str(out)]) == 0
