"""Printed privacy numbers round toward less privacy at their last printed digit (issue 30 §4):
checked against exact decimal arithmetic, and on the commands that print them."""
from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.outward import up


def test_rounds_up_against_exact_decimals():
    rng = np.random.default_rng(0)
    values = np.concatenate([10.0 ** rng.uniform(-12, 9, 3000), rng.uniform(0, 10, 1000),
                             [8.2690804, 0.1, 1.0, 1e-9, 2.0 / 3.0, 123456.5]])
    for v in values:
        text = up(float(v))
        exact = Decimal(repr(float(v)))
        printed = Decimal(text)
        assert printed >= exact, (v, text)
        # and by less than one unit of the sixth significant digit
        unit = Decimal(10) ** (exact.adjusted() - 5)
        assert printed - exact < unit, (v, text)
        assert len(text.split("e")[0].replace(".", "").lstrip("0")) <= 6
    assert up(8.2690804) == "8.26909" and up(0.1) == "0.1" and up(1e-9) == "1e-09"
    assert up(float("inf")) == "inf"


def test_curve_and_status_on_a_store_print_upward(tmp_path, capsys):
    url = str(tmp_path / "s.db")
    assert main(["ledger", "init", url]) == 0
    assert main(["ledger", "record", url, "--arm", "0", "--start", "0", "--stop", "1",
                 "gaussian:mu=1.02"]) == 0
    capsys.readouterr()
    assert main(["curve", url]) == 0
    text = capsys.readouterr().out
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("1e-09"))
    printed = Decimal(row.split()[1])
    # the exact GDP ε(δ) of μ = 1.02 (Dong, Roth & Su) in mpmath: 6.3105129…, which the old
    # rounding to nearest printed as 6.31051
    import mpmath
    mpmath.mp.dps = 40
    mu = mpmath.mpf("1.02")
    delta = lambda e: (mpmath.ncdf(-e / mu + mu / 2)                       # noqa: E731
                       - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2))
    eps = mpmath.findroot(lambda e: delta(e) - mpmath.mpf("1e-9"), 6.3)
    exact = Decimal(mpmath.nstr(eps, 30))
    assert printed >= exact and printed - exact < Decimal("1e-5")
    assert main(["ledger", "status", url]) == 0
    out = capsys.readouterr().out
    mu = Decimal(out.split("GDP μ = ")[1].split()[0])
    assert mu == Decimal("1.02")


@pytest.mark.parametrize("v", [0.3, 2.5e-7, 99999.5])
def test_short_floats_print_as_they_are(v):
    assert float(up(v)) == v
