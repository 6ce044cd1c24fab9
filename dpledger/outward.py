"""Printed privacy numbers round toward less privacy (issue 30 §4).

A certified ε, μ, ρ or δ printed to six significant digits must not claim more privacy than
the number computed: it is rounded *up* at its last printed digit (8.2690804 prints as 8.26909,
not 8.26908).  The value rounded is the float's shortest decimal (``repr``), which is the float
to within half an ulp — far below the last printed digit — so a float that is already short
(0.1, 1e-09) prints as it is.  Every larger number is less privacy for each of these
quantities; audit lower bounds are not certified numbers and are not printed through here.
"""
from __future__ import annotations

import math
from decimal import ROUND_CEILING, Decimal, localcontext


def up(value: float, digits: int = 6) -> str:
    """``value`` to ``digits`` significant digits, rounded up, in the style of ``format(v,
    '.6g')`` (so ``1e-09``, ``1.23457e+08``); ``inf`` and ``nan`` as Python prints them."""
    v = float(value)
    if not math.isfinite(v):
        return format(v, "g")
    with localcontext() as ctx:
        ctx.rounding = ROUND_CEILING
        ctx.prec = int(digits)
        q = +Decimal(repr(v))                 # rounded up to ``digits`` significant digits
    # q has at most ``digits`` digits, so the nearest float prints them back exactly
    return format(float(q), f".{int(digits)}g")
