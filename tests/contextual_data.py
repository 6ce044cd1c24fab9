"""Small contextual data shared by the tests (not a test module)."""
from __future__ import annotations

import numpy as np


def unit_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform [0, 1) entries, each last-axis row scaled to unit L2 norm."""
    x = rng.random(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)
