"""Safe-side numerics shared by every conversion (docs/design.md#safe-rounding).

All conversions work with log δ so that δ down to 1e-300 stays representable, and every root
solver returns the *upper* end of its final bracket, verified to satisfy
``log δ(ε) ≤ log(δ·(1 − 1e-12))`` — a plain solver lands one ulp on the wrong side.

Outward rounding (issue 12 §3): every certified ε, μ, ρ is rounded toward less privacy after
its last operation — exact sums and products (``sum_up``, ``mul_up``, ``div_up``), √ checked
exactly (``sqrt_up``), C-library transcendental results stepped up by ``LIBM_ULPS`` ulps
(``libm_up``, ``exp_up``), and ``verified_epsilon`` to certify a float solver's ε against a
high-precision (mpmath) upper bound on log δ(ε).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

SAFETY = 1e-12          # relative slack of every invariant comparison a <= b·(1 + SAFETY)
ULP = 2.0 ** -52


def log_target(delta: float) -> float:
    """log of the δ a solver must reach: δ·(1 − 1e-12)."""
    return math.log(delta) + math.log1p(-SAFETY)


def solve_decreasing(log_delta: Callable[[float], float], target: float, lo: float, hi: float,
                     *, max_iter: int = 200) -> float:
    """Smallest float ε (to bisection precision) with ``log_delta(ε) <= target``.

    ``log_delta`` must be non-increasing in ε, with ``log_delta(hi) <= target``.  Returns the
    upper end of the bracket, so the returned ε always satisfies the target: an upper bound on
    the exact ε(δ).
    """
    if log_delta(hi) > target:
        raise ArithmeticError("root bracket does not contain the target")
    if log_delta(lo) <= target:
        return lo
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if log_delta(mid) <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 4 * ULP * abs(hi):
            break
    return hi


def solve_increasing(fn: Callable[[float], float], target: float, lo: float, hi: float,
                     *, max_iter: int = 200) -> float:
    """Largest x (to bisection precision) with fn(x) <= target, fn non-decreasing; returns lo end."""
    if fn(lo) > target:
        raise ArithmeticError("root bracket does not contain the target")
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if fn(mid) <= target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 4 * ULP * abs(hi):
            break
    return lo


def le_tol(a: float, b: float) -> bool:
    """The invariant comparison of docs/design.md#accounting: a ≤ b·(1 + 1e-12) (∞ ≤ ∞ holds)."""
    if math.isinf(b) and b > 0:
        return True
    return a <= b * (1.0 + SAFETY) + 1e-300


# -- outward rounding (docs/design.md#safe-rounding: every certified ε, μ, ρ is an upper bound)
# -------------------------
#
# A certified number is rounded *up* after its last operation.  Sums and products of floats and
# integers are formed exactly (``fractions.Fraction`` holds every float and every count exactly)
# and rounded once to the smallest float ≥ the exact value; √ is IEEE correctly rounded, so one
# exact check decides whether one step up is needed.  Library transcendental functions (tanh,
# exp, log, log1p, expm1 from the C library; glibc documents ≤ 2 ulp for each of them on x86-64)
# are stepped up by ``LIBM_ULPS`` ulps, a margin that tests check against mpmath at 50 digits.

LIBM_ULPS = 4


def up(x: float, steps: int = 1) -> float:
    """``x`` moved ``steps`` floats toward +∞ (∞ and NaN unchanged)."""
    for _ in range(steps):
        x = math.nextafter(x, math.inf)
    return x


def down(x: float, steps: int = 1) -> float:
    """``x`` moved ``steps`` floats toward −∞."""
    for _ in range(steps):
        x = math.nextafter(x, -math.inf)
    return x


def _exact(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    if hasattr(x, "_mpf_"):                  # mpmath number: sign, mantissa, exponent (exact)
        sign, man, exp, _ = x._mpf_
        if not man and exp:                  # ±∞ or NaN
            raise OverflowError("not a finite mpmath number")
        man = -int(man) if sign else int(man)
        return Fraction(man * 2 ** exp) if exp >= 0 else Fraction(man, 2 ** -exp)
    return Fraction(float(x))


def float_up(x) -> float:
    """The smallest float ≥ ``x`` (a Fraction, int, float or mpmath mpf); +∞ beyond the range."""
    if isinstance(x, float) and not math.isfinite(x):
        return x
    if hasattr(x, "_mpf_") and not x._mpf_[1] and x._mpf_[2]:      # mpmath ±∞ / NaN
        return float(x)
    q = _exact(x)
    try:
        f = float(q)                       # correctly rounded to nearest
    except OverflowError:
        return math.inf if q > 0 else -1.7976931348623157e308
    if math.isinf(f):
        return f if f > 0 else -1.7976931348623157e308
    if Fraction(f) < q:
        f = up(f)
    return f


def float_down(x) -> float:
    """The largest float ≤ ``x``; −∞ below the range."""
    if isinstance(x, float) and not math.isfinite(x):
        return x
    if hasattr(x, "_mpf_") and not x._mpf_[1] and x._mpf_[2]:      # mpmath ±∞ / NaN
        return float(x)
    return -float_up(-_exact(x))


def sum_up(terms) -> float:
    """Σ count·value over ``(count, value)`` pairs, exact, then rounded up (∞ on overflow)."""
    total = Fraction(0)
    for count, value in terms:
        if math.isinf(value):
            return math.inf if value > 0 else -math.inf
        total += _exact(count) * _exact(value)
    return float_up(total)


def mul_up(*factors) -> float:
    """The exact product of floats/ints/Fractions, rounded up."""
    total = Fraction(1)
    for f in factors:
        if isinstance(f, float) and math.isinf(f):
            return math.inf
        total *= _exact(f)
    return float_up(total)


def div_up(a, b) -> float:
    """a / b (b ≠ 0) exact, rounded up."""
    return float_up(_exact(a) / _exact(b))


def div_down(a, b) -> float:
    """a / b (b ≠ 0) exact, rounded down."""
    return float_down(_exact(a) / _exact(b))


def sqrt_up(x) -> float:
    """The smallest float s (up to one step) with s² ≥ x exactly, for x ≥ 0 (float/int/Fraction)."""
    q = _exact(x)
    if q < 0:
        raise ValueError("sqrt_up of a negative number")
    f = float_up(q)
    if math.isinf(f):
        return math.inf
    s = math.sqrt(f)
    while Fraction(s) * Fraction(s) < q:
        s = up(s)
    return s


def sqrt_down(x) -> float:
    """The largest float s (up to one step) with s² ≤ x exactly, for x ≥ 0."""
    q = _exact(x)
    f = float_down(q)
    s = math.sqrt(max(f, 0.0))
    while s > 0 and Fraction(s) * Fraction(s) > q:
        s = down(s)
    return s


def libm_up(x: float) -> float:
    """A C-library transcendental result made an upper bound: ``LIBM_ULPS`` steps up."""
    return up(x, LIBM_ULPS)


def exp_up(x: float) -> float:
    """An upper bound on e^x: 0 only for x = −∞ (an underflow gives the smallest subnormals)."""
    if x == -math.inf:
        return 0.0
    return libm_up(math.exp(x))


def libm_down(x: float) -> float:
    return down(x, LIBM_ULPS)


# -- verification at high precision -----------------------------------------------------------
VERIFY_PREC = 113            # bits (quadruple precision): mpmath's few-ulp errors are ~1e-33
VERIFY_MARGIN = 1e-20        # log δ must clear the target by this much at VERIFY_PREC


def verified_epsilon(epsilon: float, log_delta_hp: Callable, log_delta_target: float,
                     *, max_steps: int = 60) -> float:
    """The first ε' ≥ ``epsilon`` (stepping up by growing relative amounts) whose δ, evaluated
    at 113-bit precision by ``log_delta_hp(ε')`` (an mpmath function returning an *upper bound*
    on log δ(ε')), satisfies log δ(ε') ≤ log_delta_target − 1e-20.

    The margin 1e-20 dominates mpmath's rounding at 113 bits by ten orders of magnitude, so the
    exact log δ(ε') lies below the target: the float ε' is a certified upper bound on ε(δ).  A
    float solver's answer usually passes at the first evaluation; each failure widens the step.
    Raises ArithmeticError when ``max_steps`` doublings do not reach the target.
    """
    import mpmath

    step = max(abs(epsilon), 1e-300) * 2.0 ** -40
    eps = epsilon
    with mpmath.workprec(VERIFY_PREC):
        bound = mpmath.mpf(log_delta_target) - VERIFY_MARGIN
        for _ in range(max_steps):
            if log_delta_hp(eps) <= bound:
                return eps
            eps = up(eps + step)
            step *= 4.0
    raise ArithmeticError(f"could not verify an ε near {epsilon!r} at log δ {log_delta_target!r}")
