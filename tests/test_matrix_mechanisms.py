"""The vector/matrix noise draws and the matrix/vector tree (issue 22 §1 noise side, §2).

* every draw's empirical law against the release it stands for (seeded; each statistical check
  states its false-alarm rate): Gaussian vector, symmetric Gaussian (the (Z′ + Z′ᵀ)/√2 law:
  off-diagonal σ², diagonal 2σ², entries uncorrelated; and in distribution against that
  construction), Laplace per entry, Wishart by Bartlett (first two moments against
  E W = k·L²·I, Var W_ij = k·L⁴·(1 + [i = j])), and the exact sampler's discrete Laplace and
  discrete Gaussian entries on the lattice (integers; pmf and variance);
* the tree: its noisy prefix equals the clean prefix plus the captured noise of exactly the
  nodes named by the set bits of t; every item lies in at most levels ≤ 1 + ⌈log₂ n⌉ nodes,
  and the ledger's tree record is at least that count for every item and equal for the first;
  padding makes every prefix carry ``levels`` noise draws (variance), the plain tree popcount(t);
* the exact sampler's zCDP bound (:mod:`dpledger.accounting.lattice`) is never below the ρ of
  any neighbouring pair of rounded records tried (adversarial and random), and close to the
  continuous law's;
* calibration: the paper's σ and k recomputed, the accounted σ and k meet the target and the
  next smaller value does not;
* same seed, same draws.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpledger.accounting.calibration import (accounted_sigma, accounted_wishart,
                                             shariff_sheffet_sigma, shariff_sheffet_wishart)
from dpledger.accounting.accountants import get_accountant
from dpledger.accounting.composition import Composition
from dpledger.accounting.lattice import sym_matrix_lattice, vector_lattice
from dpledger.accounting.ledger import RewardLedger
from dpledger.accounting.releases import (DiscreteLaplaceRelease, LaplaceRelease,
                                          SymmetricMatrixGaussianRelease, WishartRelease)
from dpledger.mechanisms import matrix as mx
from dpledger.mechanisms.exact import discrete_laplace_pmf
from dpledger.mechanisms.noise import lattice_release

ALPHA = 1e-4        # false-alarm rate of each seeded statistical check


def _draws(fn, n, size, seed=0):
    rng = np.random.default_rng(seed)
    out = np.zeros((n, size))
    for r in range(n):
        fn(rng, out[r])
    return out


def _var_ok(x, var, alpha=ALPHA):
    """Sample variance of x (n draws) against var: the chi-square interval at level alpha (for
    non-Gaussian x, a normal-theory band on the mean of squares with the sample's kurtosis)."""
    n = x.size
    m4 = np.mean(x ** 4)
    se = math.sqrt(max(m4 - var ** 2, 1e-300) / n)
    z = stats.norm.isf(alpha / 2)
    return abs(np.mean(x ** 2) - var) <= z * se


def test_packed_layout_and_outer():
    p = 5
    v = np.arange(1.0, p + 1)
    out = np.zeros(mx.packed_size(p))
    mx.add_outer_packed(v, out, 0)
    full = np.zeros((p, p))
    mx.unpack_sym(out, 0, p, 1.0, full)
    assert np.array_equal(full, np.outer(v, v))
    for i in range(p):
        for j in range(i, p):
            assert out[mx.packed_index(i, j, p)] == v[i] * v[j]
    assert np.flatnonzero(mx.diagonal_mask(p)).tolist() == [mx.packed_index(i, i, p) for i in range(p)]
    lat = np.zeros(mx.packed_size(p))
    mx.add_outer_packed_lattice(v / 10, 2.0 ** 16, lat, 0)
    assert np.array_equal(lat, np.floor(out / 100 * 2.0 ** 16 + 0.5))


def test_gaussian_vector_draw_law():
    x = _draws(lambda rng, o: mx.gaussian_vector_draw(rng, 1.5, o, 0, o.size), 20000, 3)
    for e in range(3):
        assert stats.kstest(x[:, e] / 1.5, "norm").pvalue > ALPHA


def test_sym_gaussian_draw_is_the_symmetrised_law():
    p, sigma, n = 4, 2.0, 20000
    x = _draws(lambda rng, o: mx.sym_gaussian_draw(rng, sigma, p, o, 0), n, mx.packed_size(p))
    diag = mx.diagonal_mask(p)
    for e in range(x.shape[1]):
        var = 2 * sigma ** 2 if diag[e] else sigma ** 2
        assert stats.kstest(x[:, e] / math.sqrt(var), "norm").pvalue > ALPHA
    # uncorrelated entries: every off-diagonal correlation within a Bonferroni band
    c = np.corrcoef(x.T)[np.triu_indices(x.shape[1], 1)]
    z = stats.norm.isf(ALPHA / (2 * c.size))
    assert np.all(np.abs(c) * math.sqrt(n) < z)
    # in distribution against the construction (Z′ + Z′ᵀ)/√2 itself
    rng = np.random.default_rng(99)
    zp = rng.normal(0, sigma, size=(n, p, p))
    sym = (zp + zp.transpose(0, 2, 1)) / math.sqrt(2)
    iu = np.triu_indices(p)
    ref = sym[:, iu[0], iu[1]]
    for e in range(x.shape[1]):
        assert stats.ks_2samp(x[:, e], ref[:, e]).pvalue > ALPHA


def test_laplace_entries_draw_law():
    scales = np.array([0.5, 3.0, 17.0])
    x = _draws(lambda rng, o: mx.laplace_entries_draw(rng, scales, o, 0), 20000, 3)
    for e, b in enumerate(scales):
        assert stats.kstest(x[:, e] / b, "laplace").pvalue > ALPHA


@pytest.mark.parametrize("p,k", [(3, 7), (6, 40)])
def test_wishart_bartlett_first_two_moments(p, k):
    L2, n = 2.0, 20000
    A = np.zeros((p, p))
    x = _draws(lambda rng, o: mx.wishart_draw(rng, L2, k, p, o, 0, A), n, mx.packed_size(p))
    diag = mx.diagonal_mask(p)
    mean = np.where(diag, k * L2, 0.0)
    var = np.where(diag, 2 * k * L2 ** 2, k * L2 ** 2)
    z = stats.norm.isf(ALPHA / (2 * x.shape[1]))
    assert np.all(np.abs(x.mean(0) - mean) <= z * np.sqrt(var / n))
    for e in range(x.shape[1]):
        assert _var_ok(x[:, e] - mean[e], var[e], ALPHA / x.shape[1])
    # PSD always (a Gram matrix of k Gaussian vectors)
    full = np.zeros((p, p))
    for r in range(50):
        mx.unpack_sym(x[r], 0, p, 1.0, full)
        assert np.linalg.eigvalsh(full).min() > 0


def test_discrete_laplace_entries_on_the_lattice():
    tnums = np.array([3 << 20, (5 << 20) + 12345], dtype=np.int64)
    x = _draws(lambda rng, o: mx.discrete_laplace_entries_draw(rng, tnums, o, 0), 20000, 2)
    assert np.array_equal(x, np.round(x))
    for e, t in enumerate(tnums):
        scale = t / 2 ** 20
        support = np.arange(-40, 41)
        pmf = discrete_laplace_pmf(support, scale)
        obs = np.array([(x[:, e] == z).sum() for z in support])
        keep = pmf * x.shape[0] >= 5
        exp_ = pmf[keep] * x.shape[0]
        obs_k = obs[keep]
        rest_o, rest_e = x.shape[0] - obs_k.sum(), x.shape[0] - exp_.sum()
        chi = np.sum((obs_k - exp_) ** 2 / exp_) + (rest_o - rest_e) ** 2 / rest_e
        assert stats.chi2.sf(chi, keep.sum()) > ALPHA


@pytest.mark.parametrize("s", [3, 5000])       # CKS20 Algorithm 3, and the staircase sampler
def test_discrete_gaussian_entries_on_the_lattice(s):
    sig = np.array([s, s], dtype=np.int64)
    x = _draws(lambda rng, o: mx.discrete_gaussian_entries_draw(rng, sig, o, 0), 20000, 2)
    assert np.array_equal(x, np.round(x))
    zs = np.arange(-60 * s, 60 * s + 1)
    w = np.exp(-zs.astype(float) ** 2 / (2 * s * s))
    var = float(np.sum(w * zs.astype(float) ** 2) / w.sum())
    for e in range(2):
        assert _var_ok(x[:, e], var)


# -- the tree ---------------------------------------------------------------------------------

def _spec_gauss_sym(p, sigma):
    return mx.noise_spec(mx.GAUSS_SYM, entries=mx.packed_size(p), sigma=sigma, p=p)


def _run_tree(n, p=3, blocks=2, pad=False, seed=0, sigma=1.0, capture=True):
    E = mx.packed_size(p)
    levels = int(n).bit_length()
    tr = mx.tree_new(1, levels, blocks, E, [7])
    spec = _spec_gauss_sym(p, sigma)
    rng = np.random.default_rng(seed)
    A = np.zeros((1, 1))
    cap = np.zeros((n if capture else 0, blocks * E + 1))
    if pad:
        mx.tree_pad_init(tr, 0, rng, spec, A)
    items = np.random.default_rng(seed + 1000).normal(size=(n, blocks * E))
    prefixes = []
    for t in range(n):
        mx.tree_push(tr, 0, items[t], rng, spec, pad, A, cap)
        prefixes.append(mx.tree_prefix(tr, 0).copy())
    return tr, items, cap, np.array(prefixes)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 37, 100])
def test_tree_prefix_is_clean_prefix_plus_set_bit_nodes(n):
    tr, items, cap, prefixes = _run_tree(n)
    for t in range(1, n + 1):
        expect = items[:t].sum(0)
        for ell in range(t.bit_length()):
            if (t >> ell) & 1:
                closed = (t >> ell) << ell          # the push that closed this node
                expect = expect + cap[closed - 1, :-1]
        assert np.allclose(prefixes[t - 1], expect, rtol=0, atol=1e-9)
        assert mx.tree_version(tr, 0) == n


@pytest.mark.parametrize("n", [1, 5, 16, 100, 1000])
def test_every_item_in_at_most_levels_nodes_against_the_ledger(n):
    tr, _, _, _ = _run_tree(n, capture=False)
    levels = int(n).bit_length()
    assert levels <= 1 + math.ceil(math.log2(n)) if n > 1 else levels == 1
    count = np.zeros(n, dtype=int)
    for t in range(1, n + 1):
        i = (t & -t).bit_length() - 1
        count[t - (1 << i): t] += 1             # node closed at push t: items (t − 2^i, t]
    assert count.max() <= levels and count[0] == levels
    led = RewardLedger()
    rel = SymmetricMatrixGaussianRelease(sigma=1.0, sensitivity=1.0, dim=3)
    led.intern(rel)
    recs = mx.tree_records(tr)
    assert recs["n_items"].tolist() == [n] and recs["levels"].tolist() == [levels]
    for arm, off, k, lev, _rid in zip(*(recs[c] for c in ("arm", "offset", "n_items", "levels",
                                                         "release_id")), strict=True):
        led.add_tree(0, int(arm), int(off), int(k), int(lev), 0)
    rows = led.expanded_rows()
    per_item = np.zeros(n, dtype=int)
    for s, e, c in zip(rows["start"], rows["stop"], rows["count"], strict=True):
        per_item[s:e] += c
    assert np.all(per_item >= count) and per_item[0] == count[0] == levels


@pytest.mark.parametrize("pad", [False, True])
def test_padding_puts_levels_noise_draws_in_every_prefix(pad):
    """Many independent trees with zero items: the variance of an off-diagonal prefix entry at
    t is σ²·(levels if padded else popcount(t))."""
    p, n, trees, sigma = 2, 11, 4000, 1.0
    levels = n.bit_length()
    E = mx.packed_size(p)
    tr = mx.tree_new(trees, levels, 1, E, [0])
    spec = _spec_gauss_sym(p, sigma)
    rng = np.random.default_rng(3)
    A, cap, zero = np.zeros((1, 1)), np.zeros((0, E + 1)), np.zeros(E)
    if pad:
        for g in range(trees):
            mx.tree_pad_init(tr, g, rng, spec, A)
    for t in range(1, n + 1):
        vals = np.zeros(trees)
        for g in range(trees):
            mx.tree_push(tr, g, zero, rng, spec, pad, A, cap)
            vals[g] = mx.tree_prefix(tr, g)[1]          # entry (0, 1)
        var = sigma ** 2 * (levels if pad else bin(t).count("1"))
        assert _var_ok(vals, var, ALPHA / n)


def test_tree_records_written_and_full_tree_refused():
    tr = mx.tree_new(2, 2, 1, 1, [4, 5])
    spec = mx.noise_spec(mx.GAUSS_VEC, entries=1, sigma=1.0)
    rng, A, cap = np.random.default_rng(0), np.zeros((1, 1)), np.zeros((0, 2))
    for _ in range(3):
        mx.tree_push(tr, 1, np.ones(1), rng, spec, False, A, cap)
    recs = mx.tree_records(tr)
    assert recs["arm"].tolist() == [1, 1] and recs["release_id"].tolist() == [4, 5]
    assert recs["n_items"].tolist() == [3, 3] and recs["levels"].tolist() == [2, 2]
    with pytest.raises(ValueError):
        mx.tree_push(tr, 1, np.ones(1), rng, spec, False, A, cap)


def test_same_seed_same_draws():
    a = _run_tree(50, pad=True, seed=5)
    b = _run_tree(50, pad=True, seed=5)
    c = _run_tree(50, pad=True, seed=6)
    assert np.array_equal(a[3], b[3]) and np.array_equal(a[2], b[2])
    assert not np.array_equal(a[3], c[3])


def test_exact_tree_prefix_stays_on_the_lattice():
    p, bits = 3, 16
    E = mx.packed_size(p)
    s_off, s_diag, rel = sym_matrix_lattice(0.7, math.sqrt(2) * 2.0, 2.0, p, bits)
    sig = np.where(mx.diagonal_mask(p), s_diag, s_off).astype(np.int64)
    spec = mx.noise_spec(mx.DGAUSS, entries=E, iscales=sig)
    tr = mx.tree_new(1, 6, 1, E, [0])
    rng, A, cap = np.random.default_rng(1), np.zeros((1, 1)), np.zeros((0, E + 1))
    vrng = np.random.default_rng(2)
    for _ in range(40):
        v = vrng.normal(size=p)
        v *= math.sqrt(2.0) * vrng.random() / np.linalg.norm(v)
        item = np.zeros(E)
        mx.add_outer_packed_lattice(v, 2.0 ** bits / 2.0, item, 0)
        mx.tree_push(tr, 0, item, rng, spec, False, A, cap)
        pre = mx.tree_prefix(tr, 0)
        assert np.array_equal(pre, np.round(pre))


# -- the exact sampler's zCDP bound --------------------------------------------------------------

def _rounded(v, unit_inv):
    out = np.zeros(mx.packed_size(v.size))
    mx.add_outer_packed_lattice(v, unit_inv, out, 0)
    return out


@pytest.mark.parametrize("p,blocks", [(2, 1), (4, 1), (4, 2)])
def test_sym_matrix_lattice_rho_bounds_every_pair_tried(p, blocks):
    Lt, sigma, bits = math.sqrt(2.0), 0.01, 6       # coarse lattice: the rounding term matters
    s_off, s_diag, rel = sym_matrix_lattice(sigma, math.sqrt(2) * Lt ** 2, Lt ** 2, p, bits,
                                            blocks_changed=blocks)
    s = np.where(mx.diagonal_mask(p), s_diag, s_off).astype(float)
    unit_inv = 2.0 ** bits / Lt ** 2
    rng = np.random.default_rng(p)
    worst = 0.0
    cands = [Lt * np.eye(p)[0], Lt * np.eye(p)[1], -Lt * np.eye(p)[0],
             Lt * np.ones(p) / math.sqrt(p), Lt * np.r_[1, -1, np.zeros(p - 2)] / math.sqrt(2)]
    for _ in range(3000):
        v = rng.normal(size=p)
        cands.append(v * Lt * rng.random() ** 0.1 / np.linalg.norm(v))
    rounded = [_rounded(v, unit_inv) for v in cands]
    for a in range(len(cands)):
        b = rng.integers(len(cands))
        for x, y in ((rounded[a], rounded[b]), (rounded[a], rounded[(a + 1) % len(cands)])):
            if blocks == 1:
                rho = np.sum((x - y) ** 2 / (2 * s * s))
            else:           # the record moves from one block to another
                rho = np.sum(x ** 2 / (2 * s * s)) + np.sum(y ** 2 / (2 * s * s))
            worst = max(worst, rho)
    assert worst <= rel.rho
    # never below the continuous law's ρ at the σ drawn (s_off lattice units)
    u = Lt ** 2 / 2.0 ** bits
    assert rel.rho >= (math.sqrt(2) * Lt ** 2) ** 2 / (4 * (s_off * u) ** 2)
    # on the default lattice (2^-16) within 1 % of the continuous release's ρ = μ²/2
    fine = sym_matrix_lattice(1.0, math.sqrt(2) * Lt ** 2, Lt ** 2, p, 16, blocks)[2]
    cont = SymmetricMatrixGaussianRelease(sigma=1.0, sensitivity=math.sqrt(2) * Lt ** 2,
                                          dim=p).mu2 / 2
    assert cont <= fine.rho <= 1.01 * cont


def test_vector_lattice_rho_bounds_reward_changes():
    d, L, sigma, bits = 5, 1.0, 0.02, 6
    s, rel = vector_lattice(sigma, L, L, d, bits)
    rng = np.random.default_rng(0)
    inv = 2.0 ** bits / L
    worst = 0.0
    for _ in range(5000):
        x = rng.normal(size=d)
        x *= L * rng.random() ** 0.2 / np.linalg.norm(x)
        r, r2 = rng.random(), rng.random()
        a, b = np.floor(r * x * inv + 0.5), np.floor(r2 * x * inv + 0.5)
        worst = max(worst, np.sum((a - b) ** 2) / (2 * s * s))
    assert worst <= rel.rho
    u = L / 2.0 ** bits
    assert rel.rho >= (L / (s * u)) ** 2 / 2
    fine = vector_lattice(1.0, L, L, d, 16)[1]
    assert (L / 1.0) ** 2 / 2 <= fine.rho <= 1.01 * (L / 1.0) ** 2 / 2


# -- calibration --------------------------------------------------------------------------------

def test_paper_sigma_and_k_recomputed():
    # Shariff & Sheffet: σ = √(16m)·L̃²·ln(4/δ)/ε; at ε = 1, δ = 0.1, m = 15, L̃² = 2: ≈ 114.3
    s = shariff_sheffet_sigma(1.0, 0.1, 15, math.sqrt(2.0))
    assert s == pytest.approx(math.sqrt(240) * 2 * math.log(40), rel=1e-14)
    assert 114 < s < 114.5
    k, dn = shariff_sheffet_wishart(1.0, 0.1, 15, 11)
    df = 0.1 / 16
    en = 1.0 / math.sqrt(8 * 15 * math.log(1 / df))
    assert dn == pytest.approx((0.1 - df) / 15, rel=1e-14)
    assert k == 11 + 1 + math.ceil(28 * math.log(4 / dn) / en ** 2)
    assert WishartRelease(dim=11, k=k, bound=1.0, delta=dn).epsilon <= en * (1 + 1e-12)


def test_accounted_sigma_meets_the_target_and_is_the_smallest():
    acc = get_accountant("best")
    frob = math.sqrt(2) * 2.0

    def rel(s):
        return SymmetricMatrixGaussianRelease(sigma=s, sensitivity=frob, dim=7)
    s = accounted_sigma(rel, 14, 1.0, 0.1)
    assert acc.epsilon(Composition.of([(rel(s), 14)]), 0.1) <= 1.0
    assert acc.epsilon(Composition.of([(rel(s * (1 - 1e-8)), 14)]), 0.1) > 1.0
    ratio = shariff_sheffet_sigma(1.0, 0.1, 15, math.sqrt(2)) / s
    assert 13 < ratio < 15          # the note's ≈ 13.6× (m = 15); 14 nodes here


def test_accounted_wishart_meets_the_target_and_is_the_smallest():
    acc = get_accountant("best")
    k, dn = accounted_wishart(1.0, 0.1, 6, 4, 1.0)

    def eps(kk):
        return acc.epsilon(Composition.of([(WishartRelease(dim=4, k=kk, bound=1.0, delta=dn),
                                            6)]), 0.1)
    assert eps(k) <= 1.0 < eps(k - 1)
    assert k < shariff_sheffet_wishart(1.0, 0.1, 6, 4)[0]


def test_lattice_laplace_release_for_an_entry():
    # the exact form of Lap(levels·Δ/ε₀) on entries of lattice sensitivity 2^b: ε ≤ ε₀/levels
    levels, eps0, bits = 14, 0.1, 16
    d = lattice_release(LaplaceRelease(scale=levels / eps0, sensitivity=1.0), bits)
    assert isinstance(d, DiscreteLaplaceRelease) and d.sensitivity == 1 << bits
    assert d.epsilon <= eps0 / levels * (1 + 1e-12)
