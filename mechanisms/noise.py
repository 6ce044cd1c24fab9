"""Draw noise and write its ledger row in the same call (docs/design.md#policies-and-simulation: no
noise without a row).

Two forms, one rule:

* compiled (``@njit``): :func:`laplace_row` / :func:`gaussian_row` take a numpy ``Generator``
  and the six int64 columns of a :class:`~dpledger.accounting.ledger.RowBuffer` (pass
  ``buf.columns()``, a tuple numba accepts), write row ``n`` and return the noise; the caller
  advances ``n`` and later calls ``ledger.extend(buf, n)``.  A full buffer is an error, never a
  silently dropped row.
* Python: :func:`draw_and_record` interns the release, adds the ledger row, then asks the
  sampler (float or exact) for the draw.

Ranges are half-open observation indices ``[start, stop)`` of one arm's stream.
"""
from __future__ import annotations

import math

import numpy as np
from dpledger._jit import njit
from numba.core.extending import overload

from dpledger.accounting.ledger import RowBuffer, RewardLedger
from dpledger.accounting.releases import (DiscreteGaussianRelease, DiscreteLaplaceRelease,
                                          GaussianRelease, LaplaceRelease, Release, lattice_sigma)
from dpledger.errors import DpledgerError, check_count
from dpledger.mechanisms.staircase import S_MIN, fair_bit, staircase_draw, u53
from numba.np.random.generator_core import next_double as _next_double


@njit(cache=True)
def laplace_bits(bg, scale):
    """Lap(scale) from a bit generator, bit for bit what ``Generator.laplace(0, scale)`` returns
    (numpy's ``random_laplace``: U = next_double, retried while U ≤ 0; then −b·log(2 − U − U)
    for U ≥ ½ and b·log(U + U) below).  The two branches become one log of a selected
    argument: the sign of a Laplace draw is a coin flip, so the branch was mispredicted half the
    time (≈ 5 ns a draw), and the Generator is not passed in (numba reference-counts it at
    every inlined call).  A function of its own, not IR-inlined (LLVM inlines it): numba's IR
    inliner warns about the retry loop's variable.  The same IEEE operations on the same
    operands give the same double (``tests/test_policies_rules.py`` holds it to
    ``Generator.laplace`` draw for draw)."""
    u = _next_double(bg)
    while u <= 0.0:
        u = _next_double(bg)
    upper = u >= 0.5
    arg = (2.0 - u - u) if upper else (u + u)
    b = -scale if upper else scale
    return 0.0 + b * np.log(arg)


@njit(cache=True, inline="always")
def write_row(cols, n, run, arm, start, stop, release_id, count):
    """Write row ``n`` of RowBuffer columns (run, arm, start, stop, release_id, count)."""
    if n >= cols[0].shape[0]:
        raise IndexError("ledger row buffer is full")
    cols[0][n] = run
    cols[1][n] = arm
    cols[2][n] = start
    cols[3][n] = stop
    cols[4][n] = release_id
    cols[5][n] = count


@njit(cache=True, inline="always")
def laplace_row(rng, scale, cols, n, run, arm, start, stop, release_id):
    """Lap(scale) for a statistic over observations [start, stop) of ``arm``; writes row ``n``
    first (so a full buffer fails before any noise exists)."""
    write_row(cols, n, run, arm, start, stop, release_id, 1)
    return laplace_bits(rng.bit_generator, scale)


@njit(cache=True, inline="always")
def gaussian_row(rng, sigma, cols, n, run, arm, start, stop, release_id):
    """N(0, σ²) for a statistic over observations [start, stop) of ``arm``; writes row ``n``."""
    write_row(cols, n, run, arm, start, stop, release_id, 1)
    return rng.normal(0.0, sigma)


# -- the kernel layout ------------------------------------------------------------------------
# Policy kernels run one run at a time and write a (5, capacity) int64 block — columns arm,
# start, stop, release_id, count — that the simulator tags with the run index.  Same rule as
# above: the row is written first, then the noise is drawn; inlined so a draw costs no call.

@njit(cache=True, inline="always")
def write_kernel_row(rows, n, arm, start, stop, release_id, count):
    """Write row ``n`` of a kernel's (5, capacity) row block."""
    if n >= rows.shape[1]:
        raise IndexError("ledger row buffer is full")
    rows[0, n] = arm
    rows[1, n] = start
    rows[2, n] = stop
    rows[3, n] = release_id
    rows[4, n] = count


# -- exact (lattice) Laplace for the kernels ----------------------------------------------------
# ``--sampler exact`` (docs/design.md#mechanisms-and-samplers): the environment rounds every
# rescaled reward to the lattice 2^-b (b = the environment's ``bits``), so a sum of rewards is an
# integer number of steps 2^-b and a mean of n rewards (n a power of two, AdaP) one of 2^-b/n: the
# step of a statistic is ``sensitivity · 2^-b``, its sensitivity Δ = 2^b steps.  The noise is Z ·
# step with Z discrete Laplace of scale t = 2^b·(scale/sensitivity) steps, drawn exactly (CKS20
# Algorithm 2 in integer arithmetic on exact uniform integers), so statistic + noise is exact in
# float64 — sensitivities must be powers of two, which :func:`lattice_release` checks — and
# neighbouring streams put their outputs on the same lattice (the float sampler's Mironov leak
# cannot happen).  t is rounded *up* to a multiple of 2^-SCALE_DEN_BITS: the release is
# ``DiscreteLaplaceRelease(t', 2^b)`` with ε' = 2^b/t' ≤ ε, below ε by a relative 2^-20/t at most.
# :func:`lattice_release` gives the ledger the same t'.

SCALE_DEN_BITS = 20
LATTICE_BITS = 16            # default reward lattice 2^-16 of the declared range


@njit(cache=True)
def lattice_scale_num(scale, sensitivity, bits):
    """Numerator of t' = ⌈t·2^20⌉/2^20, t = 2^bits·scale/sensitivity (lattice units), padded
    by 2^-50 so float rounding of the quotient can never make t' smaller than the exact t."""
    t = (2.0 ** bits) * (scale / sensitivity) * (1.0 + 2.0 ** -50)
    x = np.ceil(t * 2.0 ** SCALE_DEN_BITS)
    if not (x >= 1.0 and x < 2.0 ** 53):
        raise ValueError("lattice Laplace scale out of range (epsilon too small or too large)")
    return np.int64(x)


@njit(cache=True, inline="always")
def uniform_below(rng, n):
    """An exactly uniform integer in [0, n), 1 ≤ n ≤ 2^53: ``rng.random()`` is k·2^-53 with k
    uniform on 53 bits (numpy: the top 53 bits of one 64-bit draw), so k is recovered exactly;
    k's beyond the last whole multiple of n are rejected.  (numba's ``Generator.integers``
    costs 62 ns a call; this about 6.)"""
    limit = (np.int64(1) << 53) // n * n
    while True:
        k = np.int64(rng.random() * 9007199254740992.0)
        if k < limit:
            return k % n


@njit(cache=True)
def bernoulli_exp_ratio(rng, num, den):
    """Exactly Bernoulli(e^{−num/den}) for integers 0 ≤ num ≤ den (Canonne, Kamath, Steinke
    2020, "The discrete Gaussian for differential privacy", Algorithm 1): K = 1,
    2, … while Bernoulli(γ/K) succeeds; success iff the final K is odd.  Bernoulli(num/(den·K))
    is Bernoulli(num/den) and Bernoulli(1/K), so no product can overflow."""
    k = 1
    while True:
        if num < den and uniform_below(rng, den) >= num:    # Bernoulli(1) needs no draw
            break
        if k > 1 and uniform_below(rng, k) != 0:
            break
        k += 1
    return k % 2 == 1


@njit(cache=True)
def discrete_laplace_int(rng, t_num, t_den):
    """Z on ℤ with P(Z = z) ∝ e^{−|z|·t_den/t_num} (scale t_num/t_den) — CKS20 Algorithm 2 in
    int64 (t_num < 2^53), the compiled twin of :func:`dpledger.mechanisms.exact.discrete_laplace`;
    the sign is a fair bit (random() < 1/2 is exactly probability 1/2)."""
    while True:
        u = uniform_below(rng, t_num)
        if not bernoulli_exp_ratio(rng, u, t_num):
            continue
        v = 0
        while bernoulli_exp_ratio(rng, 1, 1):
            v += 1
        if v > ((np.int64(1) << 62) - u) // t_num:
            # u + t_num·v would leave int64 (P(V ≥ 2^62/t_num) = e^(−2^62/t_num) < e^(−4096)
            # for t_num ≤ 2^50): an error, never a wrapped sample
            raise OverflowError("discrete laplace sample beyond int64")
        y = (u + t_num * v) // t_den
        negative = rng.random() < 0.5
        if negative and y == 0:
            continue
        return -y if negative else y


@njit(cache=True)
def lattice_laplace(rng, scale, sensitivity, bits):
    """Z · sensitivity·2^-bits, Z discrete Laplace of scale t' (see the section note)."""
    z = discrete_laplace_int(rng, lattice_scale_num(scale, sensitivity, bits),
                             np.int64(1) << SCALE_DEN_BITS)
    return z * (sensitivity * 2.0 ** -bits)


# -- exact (lattice) Gaussian for the kernels ---------------------------------------------------
# ``--sampler exact`` for the Gaussian policies (TS-Gaussian, M-TS-Gaussian, DP-TS-UCB): a
# Gaussian release of a statistic f with noise ratio σ/Δ = r, f/Δ a sum of lattice rewards,
# becomes the integer f·2^b/Δ plus Z ~ N_ℤ(0, s²), s = lattice_sigma(r, b) ≥ 2^b·r (lattice
# units, sensitivity 2^b; accounting/releases.py), drawn exactly by :func:`discrete_gaussian_int`
# and scaled back: θ = (f·2^b/Δ + Z)·Δ/2^b — a function of an integer and public quantities, so
# the output set does not depend on the rewards.  The release recorded is
# ``DiscreteGaussianRelease(s, 2^b)``: exactly what is drawn, at least as noisy as σ.

# Every Bernoulli below is exact and costs one 53-bit uniform K (``staircase.u53``: the top 53
# bits of one 64-bit draw of the bit generator ``bg``, numpy's ⌊2^53·random()⌋) and no division: for a denominator den with m = ⌊2^53/den⌋,
# K is accepted when K < m·den, and then ⌊K/m⌋ is uniform on [0, den), so
# Bernoulli(num/den) = [⌊K/m⌋ < num] = [K < num·m].  A sample draws about 20 of them
# (uniform_below's two int64 divisions per draw made it 10× slower).

_INV53 = np.array([0] + [(1 << 53) // k for k in range(1, 257)], dtype=np.int64)


@njit(cache=True, inline="always")
def _bern(bg, num, m, lim):
    """Bernoulli(num/den) exactly, given m = ⌊2^53/den⌋, lim = m·den and 0 ≤ num ≤ den."""
    while True:
        k = u53(bg)
        if k < lim:
            return k < num * m


@njit(cache=True, inline="always")
def _bern_inv(bg, k):
    """Bernoulli(1/k) exactly, k ≥ 1."""
    m = _INV53[k] if k < _INV53.size else (np.int64(1) << 53) // k
    return _bern(bg, 1, m, m * k)


@njit(cache=True, inline="always")
def _bexp_frac(bg, num, m, lim):
    """Bernoulli(e^{−num/den}) for 0 ≤ num < den (m, lim as in :func:`_bern`) — CKS20
    Algorithm 1: K = 1, 2, … while A_K ~ Bernoulli(γ/K) = Bernoulli(γ)·Bernoulli(1/K)
    succeeds; success iff the final K is odd."""
    k = 1
    while True:
        if not _bern(bg, num, m, lim):
            break
        if k > 1 and not _bern_inv(bg, k):
            break
        k += 1
    return k % 2 == 1


@njit(cache=True, inline="always")
def _bexp_one(bg):
    """Bernoulli(e^{−1}) — CKS20 Algorithm 1 with γ = 1 (A_1 = 1 needs no draw)."""
    k = 2
    while _bern_inv(bg, k):
        k += 1
    return k % 2 == 1


@njit(cache=True, inline="always")
def _bexp_half(bg):
    """Bernoulli(e^{−1/2}) — CKS20 Algorithm 1 with γ = 1/2: A_K ~ Bernoulli(1/(2K))."""
    k = 1
    while _bern_inv(bg, 2 * k):
        k += 1
    return k % 2 == 1


@njit(cache=True, inline="always")
def _bexp_square(bg, f, m1, lim1, m2, lim2):
    """Bernoulli(e^{−f²/(2s²)}) for 0 ≤ f < s (m1, lim1 for den s; m2, lim2 for den 2s):
    Algorithm 1 with each A_K ~ Bernoulli(f²/(2s²K)) drawn as Bernoulli(f/s)·Bernoulli(f/(2s))·
    Bernoulli(1/K), so no product of integers is formed."""
    k = 1
    while True:
        if not _bern(bg, f, m1, lim1):
            break
        if not _bern(bg, f, m2, lim2):
            break
        if k > 1 and not _bern_inv(bg, k):
            break
        k += 1
    return k % 2 == 1


@njit(cache=True, inline="always")
def discrete_gaussian_int(bg, s):
    """Z on ℤ with P(Z = z) ∝ e^{−z²/(2s²)}, integer 1 ≤ s ≤ 2^50, exactly, from the bit
    generator ``bg`` of the run's Generator (``rng.bit_generator``; why not the Generator:
    :mod:`dpledger.mechanisms.staircase`): the staircase sampler (two uniforms a draw) from
    s = 2^12 up, CKS20 Algorithm 3 (:func:`discrete_gaussian_cks`) below."""
    if s >= S_MIN:
        return staircase_draw(bg, s)
    return discrete_gaussian_cks(bg, s)


@njit(cache=True)
def discrete_gaussian_cks(bg, s):
    """Z on ℤ with P(Z = z) ∝ e^{−z²/(2s²)}, integer 1 ≤ s ≤ 2^50 — Canonne, Kamath, Steinke
    2020, Algorithm 3, in int64 on exact uniform integers.

    Proposal Y ~ discrete Laplace of scale t = s (Algorithm 2 with t/s = s/1: U uniform on
    [0, s) kept with Bernoulli(e^{−U/s}), V ~ Geometric by Bernoulli(e^{−1}), magnitude U + sV,
    a fair sign, "−0" rejected).  Any t > 0 gives the same law; CKS20 take t = ⌊σ⌋ + 1, and for
    an integer σ, t = σ is as efficient.  Y is accepted with probability
    exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−d²/(2s²)), d = ||Y| − s|; with d = e·s + f (0 ≤ f < s)
    the exponent is e²/2 + e·f/s + f²/(2s²), drawn as independent exact Bernoullis: e² of
    Bernoulli(e^{−1/2}), e of Bernoulli(e^{−f/s}) and one of Bernoulli(e^{−f²/(2s²)}) (each
    loop stops at its first failure)."""
    m1 = (np.int64(1) << 53) // s
    lim1 = m1 * s
    m2 = (np.int64(1) << 53) // (2 * s)
    lim2 = m2 * (2 * s)
    while True:
        # -- Y ~ discrete Laplace(s)
        while True:
            k = u53(bg)
            if k >= lim1:
                continue
            u = k // m1                                  # uniform on [0, s)
            if not _bexp_frac(bg, u, m1, lim1):
                continue
            v = 0
            while _bexp_one(bg):
                v += 1
            if v > ((np.int64(1) << 62) - u) // s:
                raise OverflowError("discrete gaussian proposal beyond int64")
            y = u + s * v
            if fair_bit(bg):
                if y == 0:
                    continue
                y = -y
            break
        # -- accept with probability exp(−(|Y| − s)²/(2s²))
        d = abs(y) - s
        if d < 0:
            d = -d
        e = d // s
        f = d - e * s
        ok = True
        for _ in range(e):
            for _ in range(e):
                if not _bexp_half(bg):
                    ok = False
                    break
            if not ok:
                break
        if not ok:
            continue
        for _ in range(e):
            if not _bexp_frac(bg, f, m1, lim1):
                ok = False
                break
        if not ok:
            continue
        if _bexp_square(bg, f, m1, lim1, m2, lim2):
            return y


_lattice_sigma = njit(cache=True, inline="always")(lattice_sigma)


@njit(cache=True, inline="always")
def gaussian_lattice_sigma(ratio, bits):
    """:func:`~dpledger.accounting.releases.lattice_sigma` compiled: s for noise ratio σ/Δ."""
    return np.int64(_lattice_sigma(ratio, bits))


@njit(cache=True, inline="always")
def lattice_gaussian(bg, units, s, denom):
    """(units + Z)/denom with Z ~ N_ℤ(0, s²) drawn from the bit generator ``bg``
    (``rng.bit_generator``): ``units`` the statistic in lattice units (an
    integer-valued float below 2^53), ``denom`` = 2^b/Δ (exact); every value is computed from
    an integer and public numbers."""
    return (units + discrete_gaussian_int(bg, s)) / denom


def lattice_release(release: Release, bits: int) -> Release:
    """The release an exact-sampler kernel makes where the float kernel makes ``release``."""
    if isinstance(release, LaplaceRelease):
        if math.frexp(float(release.sensitivity))[0] != 0.5:
            # a step sensitivity·2^-bits that is not dyadic is not exact in float64
            raise DpledgerError(f"the exact sampler needs power-of-two sensitivities, got "
                                f"{release.sensitivity!r}")
        num = int(lattice_scale_num(float(release.scale), float(release.sensitivity), int(bits)))
        return DiscreteLaplaceRelease(scale=math.ldexp(num, -SCALE_DEN_BITS),
                                      sensitivity=1 << int(bits))
    if isinstance(release, GaussianRelease):
        # σ/Δ as the kernels form it (DP-TS-UCB: √(L/2^r)·2^r, exact division by a power of 2)
        s = lattice_sigma(float(release.sigma) / float(release.sensitivity), int(bits))
        return DiscreteGaussianRelease(sigma=float(s), sensitivity=1 << int(bits))
    raise DpledgerError(f"the exact sampler has no lattice form of {type(release).__name__}")


def laplace_draw(rng, env, scale, sensitivity):
    """Laplace noise for a statistic of the given sensitivity: Lap(scale) from the float sampler,
    or lattice noise when ``env`` is a lattice environment (a ``bits`` field).  Compiled kernels
    get the overload below, chosen at compile time by the environment's class."""
    bits = getattr(env, "bits", 0)
    if bits:
        return lattice_laplace(rng, scale, sensitivity, bits)
    return rng.laplace(0.0, scale)


@overload(laplace_draw, inline="always")
def _laplace_draw_compiled(rng, env, scale, sensitivity):
    if "bits" in getattr(env, "fields", ()):
        def impl(rng, env, scale, sensitivity):
            return lattice_laplace(rng, scale, sensitivity, env.bits)
    else:
        def impl(rng, env, scale, sensitivity):
            return laplace_bits(rng.bit_generator, scale)
    return impl


@njit(cache=True, inline="always")
def laplace_noise(rng, env, scale, sensitivity, rows, n, arm, start, stop, release_id):
    """Laplace noise (see :func:`laplace_draw`) for a statistic of ``sensitivity`` over
    observations [start, stop) of ``arm``; writes row n first."""
    write_kernel_row(rows, n, arm, start, stop, release_id, 1)
    return laplace_draw(rng, env, scale, sensitivity)


@njit(cache=True, inline="always")
def tree_noise(rng, env, scale, rows, slot, arm, offset, n_items, levels, release_id):
    """Laplace noise (:func:`laplace_draw`: float, or lattice for the exact sampler) for one
    binary-mechanism p-sum of sensitivity 1; writes (updates) the tree record in row ``slot`` in
    the same call: columns (arm, offset, n_items, −(release_id + 1), levels) — the negative
    release id marks a tree record, which the policy's ``finish`` turns into
    ``RunOutput.trees``.  One record per tree, so the ledger grows with trees, not rounds."""
    rows[0, slot] = arm
    rows[1, slot] = offset
    rows[2, slot] = n_items
    rows[3, slot] = -(release_id + 1)
    rows[4, slot] = levels
    return laplace_draw(rng, env, scale, 1.0)


@njit(cache=True, inline="always")
def gaussian_noise(rng, sigma, rows, n, arm, start, stop, release_id):
    """N(0, σ²) for a statistic over observations [start, stop) of ``arm``; writes row n."""
    write_kernel_row(rows, n, arm, start, stop, release_id, 1)
    return rng.normal(0.0, sigma)


def new_kernel_rows(capacity: int):
    import numpy as np
    return np.zeros((5, max(int(capacity), 1)), dtype=np.int64)


def new_buffer(capacity: int) -> RowBuffer:
    return RowBuffer(check_count("row buffer capacity", capacity))


def draw_and_record(sampler, release: Release, ledger: RewardLedger, run: int, arm: int,
                    start: int, stop: int):
    """One draw of ``release``'s noise from ``sampler``, recorded in ``ledger`` as touching
    observations ``[start, stop)`` of (run, arm).  The row is written first: a bad range raises
    before any noise is drawn."""
    if not isinstance(ledger, RewardLedger):
        raise DpledgerError(f"a RewardLedger is needed to record releases, got {type(ledger).__name__}")
    ledger.add(run, arm, start, stop, release)
    return sampler.noise(release)
