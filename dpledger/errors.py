"""Error types raised at dpledger's public boundary.

Every public entry point validates its input and raises one of these (both subclass
``ValueError`` so callers that expect the standard type still catch them); the CLI turns them
into one line on stderr and exit status 2.
"""
from __future__ import annotations

import math
from typing import Any


class DpledgerError(ValueError):
    """Bad input to a dpledger entry point."""


class InvariantViolation(RuntimeError):
    """A privacy invariant (realized <= certificate <= theorem) does not hold."""


def counted(n: Any, word: str, plural: str | None = None) -> str:
    """"1 record", "2 records" (``plural`` when adding "s" is wrong); a count that is not an
    int (e.g. null in a file) is shown as it is, with the plural."""
    return f"{n} {word if n == 1 and not isinstance(n, bool) else plural or word + 's'}"


def shown(value: Any) -> str:
    """A value as a message shows it: numbers as Python writes them (a numpy scalar as its
    Python value — ``5.0``, never ``np.float64(5.0)``), text quoted, anything else by its type
    name (no object reprs)."""
    if _is_numpy_real(value):
        value = value.item()
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:60]) + "…"
    return f"a {type(value).__name__}"


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float, or raise if it is not a finite number > 0."""
    v = check_real(name, value, allow_inf=allow_inf)
    if not v > 0:
        raise DpledgerError(f"{name} must be > 0, got {shown(value)}")
    return v


def check_nonnegative(name: str, value: Any) -> float:
    v = check_real(name, value)
    if v < 0:
        raise DpledgerError(f"{name} must be >= 0, got {shown(value)}")
    return v


def check_real(name: str, value: Any, *, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not _is_numpy_real(value):
        raise DpledgerError(f"{name} must be a number, got {shown(value)}")
    v = float(value)
    if math.isnan(v):
        raise DpledgerError(f"{name} must not be NaN")
    if math.isinf(v) and not allow_inf:
        raise DpledgerError(f"{name} must be finite, got {shown(value)}")
    return v


def check_delta(value: Any, name: str = "delta") -> float:
    """δ must lie in the open interval (0, 1)."""
    v = check_real(name, value)
    if not 0.0 < v < 1.0:
        raise DpledgerError(f"{name} must lie in (0, 1), got {shown(value)}")
    return v


def check_count(name: str, value: Any, *, minimum: int = 1) -> int:
    if isinstance(value, bool):
        raise DpledgerError(f"{name} must be an integer, got {shown(value)}")
    try:
        iv = int(value)
    except (TypeError, ValueError, OverflowError):
        raise DpledgerError(f"{name} must be an integer, got {shown(value)}") from None
    if iv != value:
        raise DpledgerError(f"{name} must be an integer, got {shown(value)}")
    if iv < minimum:
        raise DpledgerError(f"{name} must be >= {minimum}, got {shown(value)}")
    return iv


def _is_numpy_real(value: Any) -> bool:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return False
    return isinstance(value, (np.integer, np.floating))
