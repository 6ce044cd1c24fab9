"""``digits6``: a click log with the shape of Mishra & Thakurta 2015 §5.1's (issue 32 §1) —
6-dimensional contexts, 20 arms, a click rate of a few per cent, uniform logging, replayed —
built from scikit-learn's digits and a seed (our construction; their Yahoo! log is not public).

* **Users.**  The 1 797 digit images (64 pixels), centred, projected on their first five
  principal components (numpy's SVD of the centred data; each component's sign fixed so that
  its largest-magnitude loading is positive, which makes the projection deterministic), divided
  by the largest projected norm, so u ∈ R⁵ with ‖u‖ ≤ 1.  The context is x = (1, u)/√2: five
  projected coordinates and a constant (an intercept, which a linear click model needs for a
  base rate), ‖x‖ ≤ 1, d = 6.
* **Arms and clicks.**  Arm a (a = 0 … 19) has a base rate b_a ~ U[0.02, 0.05], a direction
  v_a = g/‖g‖ (g ~ N(0, I₅)) and the click probability p(x, a) = b_a·(1 + c·⟨v_a, u⟩) with
  c = 0.9, i.e. ⟨θ_a, x⟩ with θ_a = √2·(b_a, c·b_a·v_a): exactly linear in the context (the
  models LinUCB fits are well specified) and inside [0.1·b_a, 1.9·b_a] ⊂ [0, 1] with no
  clipping.  b and v are drawn from the instance seed's own generator, in that order.
* **The log.**  :func:`~dpledger.policies.contextual.environments.generated_log`: row r's user
  uniform over the 1 797, its logged arm uniform over the 20 (propensity 1/20), its click
  Bernoulli(p(x_u, a)); rows generated on demand from the seed, the same log in every run.  A
  replay accepts about one row in 20, so 2·10⁶ accepted events take about 4·10⁷ log rows (the
  paper's log had 4.6·10⁷ visits).

Printed by :func:`describe`: the click rate of uniform play (the log's mean, ≈ 3.5 %) and the
best arm's in expectation (the lift an oracle would have over uniform play).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from dpledger.errors import DpledgerError
from dpledger.policies.contextual import environments as CE

ARMS = 20
COMPONENTS = 5
DIM = COMPONENTS + 1
BASE_RATE = (0.02, 0.05)
SLOPE = 0.9
SEED = 51


def users() -> np.ndarray:
    """The (1797, 6) contexts x = (1, u)/√2 (module docstring): a fresh copy of one projection
    per process (an experiment builds the instance for every cell; the SVD took ~1 s each)."""
    return _projected_users().copy()


@functools.lru_cache(maxsize=1)
def _projected_users() -> np.ndarray:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise DpledgerError("the digits6 instance projects scikit-learn's digits; install it: "
                            "pip install 'dpledger[contextual]'") from None
    X = load_digits().data.astype(np.float64)
    Xc = X - X.mean(axis=0)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    comps = vt[:COMPONENTS]
    signs = np.sign(comps[np.arange(COMPONENTS), np.argmax(np.abs(comps), axis=1)])
    Z = Xc @ (comps * signs[:, None]).T
    u = Z / np.linalg.norm(Z, axis=1).max()
    return np.hstack([np.ones((u.shape[0], 1)), u]) / math.sqrt(2.0)


def arms(seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """(b, v): the 20 base rates and unit directions, from the seed's generator (the
    environment's own SeedSequence (seed, 0x6436), apart from every run's)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 0x6436])))
    b = rng.uniform(BASE_RATE[0], BASE_RATE[1], ARMS)
    g = rng.standard_normal((ARMS, COMPONENTS))
    return b, g / np.linalg.norm(g, axis=1, keepdims=True)


def click_probabilities(x: np.ndarray, seed: int = SEED) -> np.ndarray:
    """p(x, a) = b_a·(1 + c·⟨v_a, u⟩) for every context row of ``x`` (P, 6) and arm: (P, 20)."""
    b, v = arms(seed)
    u = x[:, 1:] * math.sqrt(2.0)
    return b[None, :] * (1.0 + SLOPE * (u @ v.T))


def theta(seed: int = SEED) -> np.ndarray:
    """θ_a (20, 6) with p(x, a) = ⟨θ_a, x⟩ (the click model written as the linear model)."""
    b, v = arms(seed)
    return math.sqrt(2.0) * np.hstack([b[:, None], SLOPE * b[:, None] * v])


def environment(seed: int = SEED) -> CE.ContextualEnvironment:
    """The generated, uniformly logged replay log of the instance (module docstring)."""
    x = users()
    p = click_probabilities(x, seed)
    return CE.generated_log(x, p, seed, 1.0, source={
        "dataset": "digits6", "instance_seed": int(seed),
        "users": "scikit-learn digits, centred, first 5 principal components scaled to "
                 "norm <= 1, x = (1, u)/sqrt(2)",
        "click_model": f"p(x, a) = b_a (1 + {SLOPE} <v_a, u>), b_a ~ U{list(BASE_RATE)}, "
                       "v_a uniform on the unit sphere of R^5",
        "oracle_mean_reward": float(p.max(axis=1).mean())})


def online(seed: int = SEED) -> CE.ContextualEnvironment:
    """The instance's online form (``click-model``): a uniformly drawn user every round and a
    Bernoulli click — on its accepted rows, a replay of the generated log has this law (Li,
    Chu, Langford & Wang 2011, Theorem 1); the difference is what the run's horizon counts
    (rounds here, log rows in the replay, which sizes the private trees)."""
    x = users()
    p = click_probabilities(x, seed)
    return CE.click_model(x, p, 1.0, source={
        "dataset": "digits6-online", "instance_seed": int(seed),
        "uniform_mean_reward": float(p.mean()), "oracle_mean_reward": float(
            p.max(axis=1).mean())})


def describe(seed: int = SEED) -> dict:
    """The instance's shape and rates: arms, d, uniform play's click rate, the oracle's."""
    x = users()
    p = click_probabilities(x, seed)
    uni = float(p.mean())
    best = float(p.max(axis=1).mean())
    return {"arms": ARMS, "dim": DIM, "users": int(x.shape[0]), "uniform_click_rate": uni,
            "oracle_click_rate": best, "oracle_lift": best / uni,
            "click_range": [float(p.min()), float(p.max())]}
