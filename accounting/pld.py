"""Privacy-loss distributions: dp-accounting (0.6.0) discretises each release, dpledger composes.

What this module computes, and why each piece is an upper bound
---------------------------------------------------------------
The (ε, δ) curve of a composition is the hockey-stick curve of its privacy-loss distribution
(PLD) L = Σ L_i:  δ(ε) = P(L = ∞) + E[(1 − e^{ε−L})₊]  (Sommer, Meiser, Mohammadi 2019;
Koskela et al. 2020).  It is increasing in the distribution of L for the stochastic order and
linear (with non-negative weights) in its mass, so moving mass *up*, adding mass, or adding
mass at +∞ can only raise it.  Every approximation below is one of those three moves.

1. **Discretisation** (dp-accounting, docs/design.md#calling-dp-accounting: ADD_OR_REMOVE_ONE, noise
   parameter = noise scale / sensitivity): each distinct release is discretised on a grid of
   interval h by the pessimistic Connect-the-Dots algorithm (Doroshenko, Ghazi, Kamath, Kumar,
   Manurangsi 2022, Alg. 1), whose hockey-stick curve dominates the release's at every ε and
   equals it on the grid; compositions of dominating pairs dominate.  Laplace, Gaussian and the
   discrete Laplace/Gaussian use dp-accounting's mechanism constructors with
   ``use_connect_dots=True``; a generic pure-ε release (randomized response, losses ±ε with
   masses 1/(1+e^{∓ε})) goes through ``create_pmf_pessimistic_connect_dots`` with its exact
   curve at the grid points (dp-accounting's ``from_privacy_parameters`` rounds each loss up to
   the grid instead, which shifts ``count`` copies by up to count·h).
2. **Composition** (here, not in dp-accounting): dp-accounting's FFT convolution has an absolute
   round-off of ~1e-17 per bin, which at δ ≤ 1e-12 is no longer small against the tail being
   measured (it gave ε 8e-5 *below* exact for ``laplace:eps=1 gaussian:mu=1`` at δ = 1e-15 and
   h = 2^-14), and its ``self_compose`` of a two-point PMF evaluates size**count.  So the
   discretised PMFs are composed here by FFT convolution of *exponentially tilted* arrays
   p̃_j = p_j·e^{λL_j − s} (the convolution of tilted arrays is the tilted convolution, exactly),
   with λ the minimiser of the hockey-stick Chernoff bound δ(ε) ≤ c(λ)M(λ)e^{−λε} at the δ
   (or ε) asked (:func:`_chernoff_tilt`), so the bins that decide δ are the largest ones and
   the round-off is relative to them.  After every convolution each bin is raised by a bound
   on the FFT round-off, E = (3ρ + 4u)(‖a‖₁‖b‖₂ + ‖a‖₂‖b‖₁) with ρ = 10·u·⌈log₂ n⌉ the
   relative 2-norm error of one length-n transform (Higham, *Accuracy and Stability of
   Numerical Algorithms*, 2nd ed., Thm 24.2, with its constant η ≈ 6.7u rounded up to 10u),
   and negative values are clipped to 0: the stored bins dominate the exact ones.
   ``count`` copies of one release take O(log count) convolutions (binary powering); distinct
   releases are combined by a balanced tree.
3. **Tail truncation**: after each convolution the array is cut to a window [t_L, t_R] where
   the Chernoff bounds P(L > t_R) ≤ M(λ)e^{−λt_R} and P(L < t_L) ≤ M(−θ)e^{θt_L} (M the exact
   moment generating function of the discretised partial composition, the product of the
   releases' ones, rounded up) are at most τ; the cut mass
   (≤ τ per side) is added at +∞, which bounds its contribution to δ at every ε.  The τ of
   all cuts together is TAIL_SHARE·δ, so tails cost a relative 1e-4 of δ.
4. **Reading ε off**: ε is the smallest value with δ̂(ε) ≤ δ·(1 − DELTA_MARGIN), δ̂ evaluated
   term by term (non-negative terms, no cancellation) and verified after solving; the margin
   1e-6 covers the floating-point error of dp-accounting's discretisation (second differences
   of δ on the grid: relative ≲ u/h² ≈ 1e-8 at h = 2^-14) and of the sums (≲ n·u).  The result
   is rounded up by one ulp.

Limits (each answered by a status ``skipped:<reason>``, and ``best`` uses the other accountants):

* ``delta-below-1e-15``: below δ = MIN_DELTA the discretisation's own float error (item 4) is no
  longer known to be small against δ; tests check the values against exact ones down to 1e-15.
* ``all-gaussian``: GDP is exact (docs/design.md#accounting).
* ``too-wide``: the loss window needs more than MAX_POINTS grid points even at h = ε_min/4
  (e.g. ``count`` = 1e9 Laplace releases), so the answer would be slow or loose; the cost check
  uses the Hoeffding/Gaussian width, before any work, so it answers in microseconds.
* ``overflow``: a release's loss bound exceeds OVERFLOW_LOSS (e^{loss} overflows inside
  dp-accounting, e.g. ``laplace:eps=1e8``); such a release gives essentially its pure ε anyway.
* ``discrete-gaussian-sigma-above-1e4``: its support is too large to discretise in seconds.
* ``non-private``.

Discretisation interval h: min(1e-4, ε_min/4) (ε_min the smallest per-release loss scale, ε or
μ), coarsened to width/MAX_POINTS when the window needs it, rounded down to a power of two.
dp-accounting is imported lazily (its import alone takes about 1.7 s) and its PMFs are read
through ``_pmf_remove`` (``_lower_loss``, ``_probs``, ``_infinity_mass``: dp-accounting 0.6.0).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dpledger.accounting import pld_cache as _pld_cache
from dpledger.accounting.composition import Composition
from dpledger.accounting.numerics import up as round_up
from dpledger.accounting.releases import (ApproxDpRelease, DiscreteGaussianRelease,
                                          DiscreteLaplaceRelease, GaussianRelease, LaplaceRelease,
                                          NonPrivateRelease, PureEpsilonRelease)

MIN_DELTA = 1e-15           # floor: below it PLD is skipped (status delta-below-1e-15)
MIN_DELTA_STATUS = "skipped:delta-below-1e-15"
MAX_POINTS = 2 ** 20        # grid points of any array (memory 8 MB, an FFT ~50 ms)
DELTA_MARGIN = 1e-6         # relative share of δ kept for floating-point error (item 4)
TAIL_SHARE = 1e-4           # relative share of δ given to all tail cuts together (item 3)
OVERFLOW_LOSS = 500.0       # per-release loss scale above which dp-accounting overflows
FINEST = 1e-4               # the default discretisation interval
# a discrete Gaussian's PLD needs its loss at every support point within its truncation bound
# (~28σ points; dp-accounting's constructor, in Python, beyond _DG_MAX_SUPPORT): 2e7 points and
# ~45 s for the exact sampler's σ ≈ 2^16; beyond this σ PLD declines (zCDP/RDP still apply)
MAX_DISCRETE_GAUSSIAN_SIGMA = 1e4
_U = 2.0 ** -53
_Z_TAIL = math.sqrt(2.0 * math.log(2.0 / 1e-40))   # sub-Gaussian width factor of the cost check
_TILTS = np.geomspace(1e-3, 1e4, 57)                # Chernoff / tilt orders λ, θ > 0


class PldSkipped(Exception):
    """The PLD accountant declines this composition; the message is the status reason."""


# -- cost check (no dp-accounting, no arrays) ---------------------------------------------------
def _loss_scale(release) -> float:
    """The release's loss scale: ε for the pure-ε families, μ = Δ/σ for the Gaussians."""
    if isinstance(release, GaussianRelease):
        return release.mu
    if isinstance(release, DiscreteGaussianRelease):
        return release.sensitivity / release.sigma
    return release.epsilon


def _widths(comp: Composition) -> tuple[float, float, float]:
    """(estimated width of the loss window, smallest per-release loss scale, largest).

    The window is mean ± z·√(Σ count·scale²): Hoeffding for losses in [−ε, ε] (variance proxy
    ε²), the Gaussian tail for Gaussian losses N(μ²/2, μ²), z for a tail of 1e-40; bounded
    families never need more than 2Σ count·ε."""
    var, mean, bounded, smallest, largest = 0.0, 0.0, 0.0, math.inf, 0.0
    unbounded = False
    for r, c in comp.items:
        s = _loss_scale(r)
        smallest, largest = min(smallest, s), max(largest, s)
        var += c * s * s
        mean += c * min(s * s / 2.0, s)
        if isinstance(r, (GaussianRelease, DiscreteGaussianRelease)):
            unbounded = True
        else:
            bounded += c * s
    width = 2.0 * _Z_TAIL * math.sqrt(var) + (mean if unbounded else 0.0)
    if not unbounded:
        width = min(width, 2.0 * bounded)
    return width, smallest, largest


def skip_reason(comp: Composition) -> str | None:
    if comp.is_empty():
        return None
    if any(isinstance(r, NonPrivateRelease) for r in comp.releases):
        return "non-private"
    if comp.all_gaussian():
        return "all-gaussian"
    if any(isinstance(r, DiscreteGaussianRelease) and r.sigma > MAX_DISCRETE_GAUSSIAN_SIGMA
           for r in comp.releases):
        return "discrete-gaussian-sigma-above-1e4"
    width, smallest, largest = _widths(comp)
    if largest > OVERFLOW_LOSS:
        return "overflow"
    if not math.isfinite(width) or interval(comp) > smallest / 4.0:
        return "too-wide"
    return None


def interval(comp: Composition) -> float:
    """The discretisation interval h, a power of two: min(FINEST, ε_min/4) rounded down, or
    the window's width / MAX_POINTS rounded up when that is coarser."""
    width, smallest, _ = _widths(comp)
    h = 2.0 ** math.floor(math.log2(min(FINEST, smallest / 4.0)))
    if width / h > MAX_POINTS:
        h = 2.0 ** math.ceil(math.log2(width / MAX_POINTS))
    return h


# -- discretised single releases (dp-accounting) ------------------------------------------------
@dataclass(frozen=True)
class _Pmf:
    """A discretised PLD: mass ``p[j]`` at loss (lo + j)·h, ``inf`` at +∞."""
    lo: int
    p: np.ndarray
    inf: float
    h: float


def _dense(pmf, h: float) -> _Pmf:
    pmf = pmf.to_dense_pmf()
    return _Pmf(int(pmf._lower_loss), np.asarray(pmf._probs, dtype=float),
                float(pmf._infinity_mass), h)


def _laplace_connect_dots(eps0: float, h: float) -> _Pmf:
    """Connect-the-Dots PMF of the Laplace PLD of ε₀ = Δ/b from its exact curve δ(e) = 1 −
    e^{(e−ε₀)/2} on [−ε₀, ε₀], 1 − e^{e} below, 0 above (the exact PLD of the Laplace mechanism),
    evaluated with expm1 so every grid value is accurate to a few ulps *relative* (dp-accounting's
    own Laplace curve is 1 − exp(·), whose absolute error ~u/2 near ε₀ becomes mass at +∞ and, over
    ``count`` copies, count·5.6e-17 of δ)."""
    from dp_accounting.pld import pld_pmf

    k_lo, k_hi = math.floor(-eps0 / h), math.ceil(eps0 / h)
    e = np.arange(k_lo, k_hi + 1) * h
    with np.errstate(over="ignore"):
        d = np.where(e >= eps0, 0.0,
                     np.where(e >= -eps0, -np.expm1(np.minimum(e - eps0, 0.0) / 2.0),
                              -np.expm1(np.minimum(e, 0.0))))
    return _dense(pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(h, k_lo, k_hi, d), h)


def _finite_connect_dots(losses: np.ndarray, masses: np.ndarray, inf: float,
                         h: float) -> _Pmf:
    """Connect-the-Dots PMF of a PLD with finitely many losses ``losses`` (masses ``masses``
    under the first distribution) and ``inf`` at +∞, on the grid points next to each loss;
    the curve δ(e) = inf + Σ_{L>e} m·(1 − e^{e−L}) is summed term by term (non-negative terms,
    relative accuracy)."""
    from dp_accounting.pld import pld_pmf

    pts = np.unique(np.concatenate([np.floor(losses / h), np.ceil(losses / h)])).astype(np.int64)
    deltas = np.empty(len(pts))
    for i in range(0, len(pts), 512):
        e = pts[i:i + 512, None] * h
        deltas[i:i + 512] = inf + np.sum(
            masses[None, :] * -np.expm1(np.minimum(e - losses[None, :], 0.0)), axis=1)
    return _dense(pld_pmf.create_pmf_pessimistic_connect_dots(h, pts, deltas), h)


def _discrete_laplace_loss(scale: float, sens: int) -> tuple[np.ndarray, np.ndarray]:
    """Losses and masses of the discrete Laplace PLD — the two-sided geometric mechanism
    (Ghosh, Roughgarden & Sundararajan 2009; CKS20, "The Discrete Gaussian for Differential
    Privacy", Definition 2): P(x) = (1−r)/(1+r)·r^{|x|}, r = e^{−1/t}, against the shift by Δ: loss (|x−Δ| − |x|)/t, i.e. Δ/t with mass 1/(1+r) (x ≤ 0), −Δ/t with
    mass r^Δ/(1+r) (x ≥ Δ), (Δ − 2x)/t with mass (1−r)/(1+r)·r^x for 0 < x < Δ."""
    r = math.exp(-1.0 / scale)
    xs = np.arange(1, sens)
    losses = np.concatenate([[sens / scale], (sens - 2.0 * xs) / scale, [-sens / scale]])
    masses = np.concatenate([[1.0 / (1.0 + r)], -math.expm1(-1.0 / scale) / (1.0 + r)
                             * np.exp(-xs / scale), [math.exp(-sens / scale) / (1.0 + r)]])
    return losses, masses


_DG_MAX_SUPPORT = 20_001


def _discrete_gaussian_loss(sigma: float, sens: int) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Losses and masses of the discrete Gaussian PLD (Canonne, Kamath & Steinke 2020,
    Definition 1: P(x) ∝ e^{−x²/2σ²} on the integers; against the shift by Δ the privacy loss
    is log P(x)/P(x − Δ) = (Δ² − 2xΔ)/(2σ²)) on |x| ≤ K, with the mass of |x| > K (a bound,
    ≤ 1e-40) put at +∞; None when the support is too large (dp-accounting then).  The tail
    bound: for x ≥ K successive terms shrink by e^{−(2x+1)/2σ²} ≤ e^{−K/σ²}, a geometric
    series from e^{−K²/2σ²}."""
    k = math.ceil(sigma * math.sqrt(2.0 * math.log(1e42)) + sens + 1)
    if 2 * k + 1 > _DG_MAX_SUPPORT:
        return None
    xs = np.arange(-k, k + 1)
    w = np.exp(-(xs.astype(float) ** 2) / (2.0 * sigma * sigma))
    z = math.fsum(w)
    # mass of |x| > K under P, bounded by 2·Σ_{x>K} e^{−x²/2σ²}/Z ≤ 2·e^{−K²/2σ²}/(1 − e^{−K/σ²})/Z
    tail = 2.0 * math.exp(-k * k / (2.0 * sigma * sigma)) / -math.expm1(-k / (sigma * sigma)) / z
    losses = (sens * sens - 2.0 * xs * sens) / (2.0 * sigma * sigma)
    keep = w > 0
    return losses[keep], w[keep] / z, tail * (1.0 + 1e-9)


def _rr_connect_dots(epsilon: float, h: float) -> _Pmf:
    """Randomized response with losses ±ε, masses 1/(1+e^{∓ε}): the dominating pair of every
    ε-DP mechanism."""
    losses = np.array([epsilon, -epsilon])
    masses = np.array([1.0 / (1.0 + math.exp(-epsilon)), 1.0 / (1.0 + math.exp(epsilon))])
    return _finite_connect_dots(losses, masses, 0.0, h)


def _approx_connect_dots(epsilon: float, delta: float, h: float) -> _Pmf:
    """The dominating pair of every (ε, δ)-DP mechanism (Kairouz, Oh & Viswanath 2015,
    Thm 2.4): loss +∞ with probability δ, ±ε with (1 − δ)/(1 + e^{∓ε})."""
    losses = np.array([epsilon, -epsilon])
    masses = (1.0 - delta) * np.array([1.0 / (1.0 + math.exp(-epsilon)),
                                       1.0 / (1.0 + math.exp(epsilon))])
    return _finite_connect_dots(losses, masses, delta, h)


def _single(release, count: int, h: float) -> _Pmf:
    """The discretised PLD of one release on grid h (of ``count`` Gaussians at once: they are
    exactly one Gaussian with σ/√count)."""
    from dp_accounting.pld import privacy_loss_distribution as P

    r = release
    try:
        if isinstance(r, GaussianRelease):
            pld = P.from_gaussian_mechanism(
                standard_deviation=r.sigma / r.sensitivity / math.sqrt(count), sensitivity=1.0,
                value_discretization_interval=h, log_mass_truncation_bound=-80.0,
                use_connect_dots=True)
        elif isinstance(r, LaplaceRelease):
            return _laplace_connect_dots(r.epsilon, h)
        elif isinstance(r, DiscreteLaplaceRelease):
            if int(r.sensitivity) + 1 <= _DG_MAX_SUPPORT:
                return _finite_connect_dots(*_discrete_laplace_loss(r.scale, int(r.sensitivity)),
                                            0.0, h)
            # the exact-sampler lattice (Δ = 2^16 … 2^20 units) has Δ + 1 distinct losses: the
            # term-by-term curve would cost (grid points × losses); dp-accounting's own
            # pessimistic constructor is what every large discrete release used before
            pld = P.from_discrete_laplace_mechanism(parameter=1.0 / r.scale,
                                                    sensitivity=int(r.sensitivity),
                                                    value_discretization_interval=h)
        elif isinstance(r, DiscreteGaussianRelease):
            loss = _discrete_gaussian_loss(r.sigma, int(r.sensitivity))
            if loss is not None:
                return _finite_connect_dots(*loss, h)
            pld = P.from_discrete_gaussian_mechanism(sigma=r.sigma,
                                                     sensitivity=int(r.sensitivity),
                                                     value_discretization_interval=h,
                                                     use_connect_dots=True)
        elif isinstance(r, PureEpsilonRelease):
            return _rr_connect_dots(r.epsilon, h)
        elif isinstance(r, ApproxDpRelease):
            return _approx_connect_dots(r.epsilon, r.delta, h)
        else:  # pragma: no cover - skip_reason rejects the rest
            raise PldSkipped(f"unsupported-{r.kind}")
    except (OverflowError, FloatingPointError, MemoryError) as exc:
        raise PldSkipped("overflow") from exc
    if not pld._symmetric:  # pragma: no cover - both are symmetric at sampling_prob 1
        raise PldSkipped(f"asymmetric-{r.kind}")
    return _dense(pld._pmf_remove, h)


def _log_mgf_bounds(pmf: _Pmf) -> tuple[np.ndarray, np.ndarray]:
    """log E[e^{λL}; L finite] and log E[e^{−θL}; L finite] over _TILTS (θ = λ), summed over
    the non-zero bins, rounded up (they size the tail windows: any upper bound is sound,
    and an exact one keeps the windows of ``count`` copies from drifting by count·error)."""
    nz = np.nonzero(pmf.p > 0)[0]
    logm = np.log(pmf.p[nz])
    loss = (pmf.lo + nz) * pmf.h
    up = np.empty(len(_TILTS))
    down = np.empty(len(_TILTS))
    step = max(1, 2_000_000 // max(1, len(nz)))
    for i in range(0, len(_TILTS), step):
        lam = _TILTS[i:i + step, None]
        up[i:i + step] = _logsumexp_rows(logm[None, :] + lam * loss[None, :])
        down[i:i + step] = _logsumexp_rows(logm[None, :] - lam * loss[None, :])
    return up, down


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=1)
    m = np.where(np.isfinite(m), m, 0.0)
    return m + np.log(np.sum(np.exp(x - m[:, None]), axis=1)) + 1e-12


def _single_with_mgf(release, count: int, h: float) -> tuple:
    pmf = _single(release, count, h)
    return (pmf,) + _log_mgf_bounds(pmf)


_single_with_mgf_cached = functools.lru_cache(maxsize=64)(_single_with_mgf)


@functools.lru_cache(maxsize=32)
def _singles(comp: Composition, h: float) -> tuple:
    """Per item of ``comp``: (discretised PMF, log-MGF bounds up, down, copies to compose);
    the Gaussians' count is folded into one release.  Cached per release while a composition
    has few distinct ones (a run's compositions share them)."""
    get = _single_with_mgf_cached if len(comp.items) <= 64 else _single_with_mgf
    out = []
    for r, c in comp.items:
        k = c if isinstance(r, GaussianRelease) else 1
        out.append(get(r, k, h) + (c // k,))
    return tuple(out)


# -- composition of tilted arrays ---------------------------------------------------------------
@dataclass
class _Tilted:
    """Mass at loss (lo + j)·h is ``q[j]·exp(s − λ(lo + j)h)``; ``inf`` at +∞; ``up``/``down``
    the log-MGF bounds of the exact discretised partial composition this array stands for."""
    lo: int
    q: np.ndarray
    s: float
    inf: float
    up: np.ndarray
    down: np.ndarray
    lam: float


def _tilt(pmf: _Pmf, lam: float, up, down) -> _Tilted:
    losses = (pmf.lo + np.arange(len(pmf.p))) * pmf.h
    with np.errstate(divide="ignore"):
        logq = np.log(pmf.p) + lam * losses
    s = float(np.max(logq))
    # bins below 2^-900 of the largest are raised to it (more mass: pessimistic, and far
    # below the round-off bound every convolution adds): subnormal floats make numpy ~100×
    # slower
    q = np.maximum(np.exp(logq - s), 2.0 ** -900)
    return _Tilted(pmf.lo, q, s, pmf.inf, up, down, lam)


def _fft_error(a: np.ndarray, b: np.ndarray, n: int) -> float:
    """Bound on max |computed − exact| of the FFT convolution of non-negative a and b
    (module docstring, item 2)."""
    rho = 10.0 * _U * math.ceil(math.log2(n))
    n1a, n1b = float(np.sum(a)), float(np.sum(b))
    # 2-norms of max(·, 1e-150): an upper bound whose squares stay normal floats
    # (subnormal products make the dot product ~100× slower)
    a2, b2 = np.maximum(a, 1e-150), np.maximum(b, 1e-150)
    # (and no np.dot: its BLAS call took ~20 ms per 16k values on the loaded 2-core VM)
    n2a, n2b = math.sqrt(float(np.sum(a2 * a2))), math.sqrt(float(np.sum(b2 * b2)))
    return (3.0 * rho + 4.0 * _U) * (n1a * n2b + n2a * n1b) * (1.0 + 1e-10) + 1e-300


def _convolve(x: _Tilted, y: _Tilted, lam: float, h: float, tau: float) -> _Tilted:
    from scipy import fft

    up, down = x.up + y.up, x.down + y.down
    n_out = len(x.q) + len(y.q) - 1
    n = fft.next_fast_len(n_out, real=True)
    c = fft.irfft(fft.rfft(x.q, n) * fft.rfft(y.q, n), n)[:n_out]
    err = _fft_error(x.q, y.q, n)
    lo, inf = x.lo + y.lo, x.inf + y.inf          # ≥ 1 − (1 − a)(1 − b)
    # the Chernoff window of the exact discretised partial composition (item 3)
    log_tau = math.log(tau)
    t_right = float(np.min((up - log_tau) / _TILTS))
    t_left = float(np.max((log_tau - down) / _TILTS))
    first = max(0, math.floor(t_left / h) - lo)
    last = min(n_out, math.ceil(t_right / h) - lo + 1)
    if first > 0:
        inf += tau
    if last < n_out:
        inf += tau
    if last <= first:       # pragma: no cover - the window always holds the mass
        raise PldSkipped("empty-window")
    c = np.maximum(c[first:last], 0.0) + err
    if len(c) > MAX_POINTS:
        raise PldSkipped("too-wide")
    scale = math.floor(math.log2(float(np.max(c))))
    c = np.ldexp(c, -scale)                          # exact rescaling
    return _Tilted(lo + first, c, x.s + y.s + scale * math.log(2.0), inf, up, down, lam)


def _power(base: _Tilted, count: int, lam: float, h: float, tau: float) -> _Tilted:
    """``count``-fold self-composition by binary powering: ≤ 2·log₂(count) convolutions."""
    result = None
    while True:
        if count & 1:
            result = base if result is None else _convolve(result, base, lam, h, tau)
        count >>= 1
        if not count:
            return result
        base = _convolve(base, base, lam, h, tau)


def _n_cuts(comp: Composition) -> int:
    n = len(comp.items)
    for r, c in comp.items:
        if not isinstance(r, GaussianRelease):
            n += 2 * max(1, c.bit_length())
    return 2 * n


def _chernoff_tilt(comp: Composition, h: float, *, delta: float | None = None,
                   epsilon: float | None = None) -> tuple[float, float]:
    """(λ, δ scale): the tilt minimising the hockey-stick Chernoff bound
    δ(ε) ≤ c(λ)·M(λ)·e^{−λε},  c(λ) = max_x (1 − e^{−x})e^{−λx} = λ^λ/(λ+1)^{λ+1}
    (from (1 − e^{ε−L})₊ ≤ c(λ)e^{λ(L−ε)}), over ε at the δ asked or over δ at the ε asked; the
    bound's value is the δ scale the tail budget is measured against.  Unlike the plain
    Chernoff tilt it stays finite (≈ 1/(L_max − ε)) when a bounded loss has an atom at its top."""
    up = sum(item[1] * item[3] for item in _singles(comp, h))
    log_c = -_TILTS * np.log1p(1.0 / _TILTS) - np.log1p(_TILTS)
    if delta is not None:
        k = int(np.argmin((log_c + up - math.log(delta)) / _TILTS))
        return float(_TILTS[k]), delta
    vals = log_c + up - _TILTS * epsilon
    k = int(np.argmin(vals))
    return float(_TILTS[k]), min(1.0, math.exp(min(0.0, float(vals[k]))))


@functools.lru_cache(maxsize=128)
def _composed(comp: Composition, lam: float, tau: float) -> tuple[_Tilted, float]:
    h = interval(comp)
    parts = []
    for pmf, up, down, copies in _singles(comp, h):
        parts.append(_power(_tilt(pmf, lam, up, down), copies, lam, h, tau))
    # distinct releases are combined pairwise (a balanced tree, in canonical order): the
    # cost is that of the last few convolutions, not (number of distinct releases) × final size
    while len(parts) > 1:
        parts = [_convolve(parts[i], parts[i + 1], lam, h, tau) if i + 1 < len(parts)
                 else parts[i] for i in range(0, len(parts), 2)]
    return parts[0], h


def build(comp: Composition, *, delta: float | None = None, epsilon: float | None = None):
    """The composed tilted PLD of ``comp`` for the δ (or ε) asked, and its grid h."""
    reason = skip_reason(comp)
    if reason is not None:
        raise PldSkipped(reason)
    h = interval(comp)
    lam, scale = _chernoff_tilt(comp, h, delta=delta, epsilon=epsilon)
    lam = float(2.0 ** (round(2 * math.log2(lam)) / 2))   # a coarse grid: builds are shared
    share = TAIL_SHARE if delta is not None else TAIL_SHARE * 1e-4
    tau = float(2.0 ** math.floor(math.log2(max(scale * share / _n_cuts(comp), 1e-40))))
    return _composed(comp, lam, tau)


def _terms(t: _Tilted, h: float, lam: float, epsilon: float) -> float:
    """δ̂(ε) − inf = Σ_{L_j > ε} p_j (1 − e^{ε − L_j}), term by term (all terms ≥ 0)."""
    j0 = max(0, math.floor(epsilon / h) - t.lo)
    q = t.q[j0:]
    losses = (t.lo + j0 + np.arange(len(q))) * h
    keep = (losses > epsilon) & (q > 0)
    if not np.any(keep):
        return 0.0
    with np.errstate(divide="ignore"):
        logs = np.log(q[keep]) + t.s - lam * losses[keep] + np.log(-np.expm1(epsilon - losses[keep]))
    m = float(np.max(logs))
    if m > 700.0:           # far below the tilt point the round-off bound swamps everything
        return math.inf
    return math.exp(m) * float(np.sum(np.exp(logs - m))) * (1.0 + 1e-12 + len(q) * _U)


def _delta_hat(t: _Tilted, h: float, lam: float, epsilon: float) -> float:
    return t.inf + _terms(t, h, lam, epsilon)


def _epsilon_hat(t: _Tilted, h: float, lam: float, delta: float) -> float:
    """Smallest ε (to float precision, rounded up) with δ̂(ε) ≤ target; ∞ if none."""
    target = delta * (1.0 - DELTA_MARGIN)
    if t.inf >= target:
        return math.inf
    losses = (t.lo + np.arange(len(t.q))) * h
    if _delta_hat(t, h, lam, 0.0) <= target:
        return 0.0
    # grid bracket: δ̂ at grid losses is non-increasing; bisection on indices
    lo_i, hi_i = 0, len(t.q) - 1         # δ̂(L_hi) = inf < target
    while hi_i - lo_i > 1:
        mid = (lo_i + hi_i) // 2
        if _delta_hat(t, h, lam, float(losses[mid])) <= target:
            hi_i = mid
        else:
            lo_i = mid
    a, b = max(0.0, float(losses[lo_i])), float(losses[hi_i])
    if _delta_hat(t, h, lam, a) <= target:
        return a
    # on (a, b) no loss is crossed: δ̂(ε) = inf + U − e^ε·W with U = Σ_{j>lo} p_j and
    # W = Σ_{j>lo} p_j e^{−L_j}; solve that, then verify term by term and bisect if the
    # closed form (a difference) landed on the wrong side
    q, L = t.q[lo_i + 1:], losses[lo_i + 1:]
    with np.errstate(divide="ignore"):
        logp = np.log(q) + t.s - lam * L
    m = float(np.max(logp))
    guess = b
    if m < 700.0:
        u = math.exp(m) * float(np.sum(np.exp(logp - m)))
        w = math.exp(m) * float(np.sum(np.exp(logp - m - L)))
    else:
        u = w = 0.0
    if w > 0 and u + t.inf - target > 0:
        guess = min(b, max(a, math.log(u + t.inf - target) - math.log(w)))
    guess = round_up(guess)
    step = max(abs(guess), h) * 2.0 ** -52
    while guess < b:            # the closed form is a difference: step up until verified
        if _delta_hat(t, h, lam, guess) <= target:
            return guess
        guess, step = guess + step, 2.0 * step
    return b


# -- public API ---------------------------------------------------------------------------------
def single_laplace_epsilon(comp: Composition, delta: float) -> float | None:
    """One Laplace release of ε₀: its exact curve δ(ε) = 1 − e^{(ε−ε₀)/2} on [0, ε₀] (notes
    §4.5), inverted as ε = ε₀ + 2·log(1 − δ), rounded up; None for any other composition."""
    if len(comp.items) != 1 or comp.items[0][1] != 1 or not isinstance(comp.items[0][0], LaplaceRelease):
        return None
    eps0 = comp.items[0][0].epsilon
    value = eps0 + 2.0 * math.log1p(-delta)
    return min(eps0, max(0.0, value + 1e-12 * abs(value) + 1e-15))


def pld_epsilon(comp: Composition, delta: float) -> float:
    """An upper bound on ε(δ) of ``comp`` (module docstring); PldSkipped with the reason when
    PLD declines."""
    if comp.is_empty():
        return 0.0
    if delta < MIN_DELTA:
        raise PldSkipped("delta-below-1e-15")
    exact = single_laplace_epsilon(comp, delta)
    if exact is not None:
        return exact

    def compute() -> float:
        t, h = build(comp, delta=delta)
        return _epsilon_hat(t, h, t.lam, delta)
    # `dpledger run` only: the same double from the content-keyed cache (accounting/pld_cache.py)
    return _pld_cache.remembered("pld_epsilon", comp, delta, compute, PldSkipped)


def pld_delta(comp: Composition, epsilon: float) -> float:
    """An upper bound on δ(ε) of ``comp``."""
    if comp.is_empty():
        return 0.0
    t, h = build(comp, epsilon=epsilon)
    return min(1.0, _delta_hat(t, h, t.lam, epsilon) * (1.0 + DELTA_MARGIN))


# -- the exact Laplace loss pair (for the audits' "best possible" bound) -------------------------
# Not the pessimistic Connect-the-Dots PMFs above: the two *distributions* of the privacy loss
# L = log p_D′(y)/p_D(y) of Laplace releases, under D and under D′, integrated exactly over grid
# cells, which :mod:`dpledger.audits.optimal` thresholds as a real (grid-rounded) statistic.

EXACT_GRID_POINTS = 1000    # grid cells per smallest ε_i (h = min ε_i / 1000)


def laplace_loss_pmf(epsilon: float, h: float) -> tuple[np.ndarray, np.ndarray, int]:
    """(P_D, P_D′, N): the privacy loss of one Laplace release of ε = Δ/b (Lap(b) noise on a
    statistic of sensitivity Δ; Dwork & Roth 2014, Def. 3.3) on the grid k·h, k = −N … N
    (N = round(ε/h)).  With y the release and c_D its clean value, L = (|y − c_D| −
    |y − c_D − Δ|)/b: −ε with probability ½ under D (y ≤ c_D), +ε with probability ½e^{−ε}
    (y ≥ c_D + Δ), and between x = (2(y − c_D) − Δ)/b with density ¼e^{−x/2 − ε/2} on (−ε, ε)
    (the Laplace density changed variables).  Cell k is [(k − ½)h, (k + ½)h] ∩ [−ε, ε], its
    mass integrated in closed form, the atoms at the end cells.  Under D′ the loss is the
    mirror image (its density ¼e^{x/2 − ε/2} = e^x times D's), so P_D′ is P_D reversed."""
    n = max(1, int(round(epsilon / h)))
    k = np.arange(-n, n + 1, dtype=np.float64)
    a = np.clip((k - 0.5) * h, -epsilon, epsilon)
    b = np.clip((k + 0.5) * h, -epsilon, epsilon)
    p0 = 0.5 * math.exp(-0.5 * epsilon) * (np.exp(-0.5 * a) - np.exp(-0.5 * b))
    p0[0] += 0.5
    p0[-1] += 0.5 * math.exp(-epsilon)
    return p0, p0[::-1].copy(), n


def _fft_conv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.signal import fftconvolve
    return np.maximum(fftconvolve(x, y), 0.0)


def _fft_power(p: np.ndarray, count: int) -> np.ndarray:
    """``count``-fold self-convolution by binary powering."""
    out = None
    while count:
        if count & 1:
            out = p if out is None else _fft_conv(out, p)
        count >>= 1
        if count:
            p = _fft_conv(p, p)
    return out


def composed_laplace_loss(groups, h: float | None = None):
    """(grid values, P_D, P_D′) of the summed privacy loss of independent Laplace releases
    given as (ε_i, count) (losses add under composition; their distributions convolve).  The
    grid step h is min ε_i/1000, coarsened so the composed support has at most ~4e6 points;
    P_D′ is P_D mirrored (each factor's is, :func:`laplace_loss_pmf`)."""
    groups = [(float(e), int(c)) for e, c in groups if c > 0]
    if not groups:
        raise ValueError("no releases")
    if h is None:
        h = min(e for e, _ in groups) / EXACT_GRID_POINTS
        h = max(h, 2.0 * sum(e * c for e, c in groups) / 4e6)
    q = None
    lo = 0
    for eps, count in groups:
        p0, _, n = laplace_loss_pmf(eps, h)
        r = _fft_power(p0, count)
        q = r if q is None else _fft_conv(q, r)
        lo -= n * count
    x = (lo + np.arange(q.size)) * h
    q = q / q.sum()
    return x, q, q[::-1].copy()
