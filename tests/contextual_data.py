"""Small contextual data shared by the tests (not a test module)."""
from __future__ import annotations

import numpy as np


def unit_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform [0, 1) entries, each last-axis row scaled to unit L2 norm."""
    from dpledger.policies.contextual.environments import fit_to_bound
    x = rng.random(shape)
    # rounding leaves some rows an ulp above 1, which the exact norm check refuses
    return fit_to_bound(x / np.linalg.norm(x, axis=-1, keepdims=True), 1.0)[0]


def serve_table(p, x: np.ndarray, rw: np.ndarray, lo: int = 0, hi: int | None = None) -> list:
    """Serve rows lo … hi − 1 of a contextual table to the step-form policy ``p``: select with
    row t's context, observe the table's reward of the arm selected.  Returns the arms."""
    arms = []
    for t in range(lo, len(x) if hi is None else hi):
        ticket = p.select(context=x[t])
        arms.append(ticket.arm)
        p.observe(ticket, float(rw[t, ticket.arm]))
    return arms
