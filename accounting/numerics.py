"""Safe-side numerics shared by every conversion (SPEC §3 "Tolerance and safe rounding").

All conversions work with log δ so that δ down to 1e-300 stays representable, and every root
solver returns the *upper* end of its final bracket, verified to satisfy
``log δ(ε) ≤ log(δ·(1 − 1e-12))`` — a plain solver lands one ulp on the wrong side.
"""
from __future__ import annotations

import math
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
    """The invariant comparison of SPEC §3: a ≤ b·(1 + 1e-12) (∞ ≤ ∞ holds)."""
    if math.isinf(b) and b > 0:
        return True
    return a <= b * (1.0 + SAFETY) + 1e-300
