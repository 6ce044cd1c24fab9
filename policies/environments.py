"""Reward environments (docs/design.md#policies-and-simulation): Bernoulli, truncated exponential on
[0, 1], Beta, fixed table.

Every environment declares its reward range ``[lo, hi]`` (default [0, 1]); a reward outside it
is an error, never a silent clip (docs/algorithms.md#reward-range): the privacy proofs assume the
range.
Policies see rewards rescaled to [0, 1] by ``(x − lo)/(hi − lo)``.

For compiled kernels an environment is a named tuple ``(kind, params, table, lo, hi)``:
``kind`` an int code, ``params`` a (K, 2) float array, ``table`` a (T, K) array (empty unless
kind is TABLE).  Each kind has its own named-tuple class, so numba compiles a kernel once per
kind and :func:`draw_reward` picks the kind's draw at compile time: a Bernoulli kernel holds no
Beta sampler.  (Measured: with all four draws in one inlined function, a TS-Gaussian round on
Bernoulli arms took 1.7× as long — 9.8e6 against 1.7e7 run-rounds/s — although the other
branches never run.)  :func:`draw_reward` and :func:`draw_sum` are the only places rewards are
drawn.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from dpledger._jit import njit
from numba.core.extending import overload

from dpledger.errors import DpledgerError, check_real

BERNOULLI, TRUNCEXP, BETA, TABLE = 0, 1, 2, 3
KIND_NAMES = {BERNOULLI: "bernoulli", TRUNCEXP: "truncexp", BETA: "beta", TABLE: "table"}


def truncexp_mean(rate: float) -> float:
    """Mean of Exp(λ) truncated to [0, 1]: 1/λ − e^{−λ}/(1 − e^{−λ}); below λ = 1e-4 its series
    1/2 − λ/12 + λ³/720 (error < 1e-20), as the difference of two ~1/λ terms loses ~1/λ ulps."""
    if rate < 1e-4:
        return 0.5 - rate / 12.0 + rate ** 3 / 720.0
    return 1.0 / rate - math.exp(-rate) / -math.expm1(-rate)


@dataclass(frozen=True)
class Environment:
    """A stochastic or fixed reward source over K arms with a declared range."""

    kind: int
    params: np.ndarray = field(compare=False)
    table: np.ndarray = field(compare=False)
    lo: float = 0.0
    hi: float = 1.0
    lattice_bits: int = 0           # > 0: rewards rounded to 2^-bits of the range (exact sampler)

    @property
    def name(self) -> str:
        return KIND_NAMES[self.kind]

    def with_lattice(self, bits: int) -> "Environment":
        """This environment for the exact sampler: every rescaled reward rounded to the nearest
        multiple of 2^-bits (deterministic, so one reward's change moves a sum by at most one
        range; bias ≤ 2^-(bits+1) of the range per reward, none for Bernoulli on [0, 1])."""
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 30:
            raise DpledgerError(f"lattice bits must be an integer in [1, 30], got {bits!r}")
        return Environment(self.kind, self.params, self.table, self.lo, self.hi, int(bits))

    @property
    def n_arms(self) -> int:
        return int(self.params.shape[0])

    @property
    def means(self) -> np.ndarray:
        """True arm means on the raw scale (table: column means)."""
        if self.kind == BERNOULLI:
            return self.params[:, 0].copy()
        if self.kind == TRUNCEXP:
            return np.array([truncexp_mean(r) for r in self.params[:, 0]])
        if self.kind == BETA:
            a, b = self.params[:, 0], self.params[:, 1]
            return a / (a + b)
        return self.table.mean(axis=0)

    def as_tuple(self):
        """The kernel form: a named tuple whose class says the kind (see the module note)."""
        if self.lattice_bits:
            return LATTICE_ENVS[self.kind](self.kind, self.params, self.table, float(self.lo),
                                           float(self.hi), int(self.lattice_bits))
        return KERNEL_ENVS[self.kind](self.kind, self.params, self.table, float(self.lo),
                                      float(self.hi))

    def to_json(self) -> dict:
        out = {"name": self.name, "range": [self.lo, self.hi]}
        if self.lattice_bits:
            out["lattice_bits"] = self.lattice_bits
        if self.kind == BERNOULLI:
            out["means"] = self.params[:, 0].tolist()
        elif self.kind == TRUNCEXP:
            out["rates"] = self.params[:, 0].tolist()
            out["means"] = self.means.tolist()
        elif self.kind == BETA:
            out["ab"] = self.params.tolist()
            out["means"] = self.means.tolist()
        else:
            out["table_shape"] = list(self.table.shape)
            out["table_sha256"] = _sha(self.table)
            out["means"] = self.means.tolist()
        return out


def _sha(table: np.ndarray) -> str:
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(table, dtype=np.float64).tobytes()).hexdigest()


def check_range(lo, hi) -> tuple[float, float]:
    """A declared reward range [lo, hi]: finite, lo < hi, and a finite width (every release's
    sensitivity)."""
    lo, hi = check_real("range low end", lo), check_real("range high end", hi)
    if not lo < hi:
        raise DpledgerError(f"reward range must have lo < hi, got [{lo:g}, {hi:g}]")
    if not math.isfinite(hi - lo):
        # the sensitivity of every release is the width: an infinite one certifies nothing
        # and rescales every reward to 0 or NaN
        raise DpledgerError(f"reward range [{lo:g}, {hi:g}]: its width hi − lo overflows double "
                            "precision")
    return lo, hi


def _arms(values, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise DpledgerError(f"{name} must be numbers, got {values!r}") from None
    if arr.size < 2:
        raise DpledgerError(f"need at least 2 arms, got {arr.size} {name}")
    if not np.all(np.isfinite(arr)):
        raise DpledgerError(f"{name} must be finite numbers, got {values!r}")
    return arr


def bernoulli(means, lo: float = 0.0, hi: float = 1.0) -> Environment:
    lo, hi = check_range(lo, hi)
    p = _arms(means, "means")
    if np.any((p < 0) | (p > 1)):
        raise DpledgerError(f"Bernoulli means must lie in [0, 1], got {p.tolist()}")
    if lo > 0 or hi < 1:
        raise DpledgerError(f"Bernoulli rewards are 0 or 1, outside the declared range [{lo}, {hi}]")
    return Environment(BERNOULLI, np.stack([p, np.zeros_like(p)], axis=1), np.zeros((0, 0)), lo, hi)


def truncated_exponential(rates, lo: float = 0.0, hi: float = 1.0) -> Environment:
    lo, hi = check_range(lo, hi)
    r = _arms(rates, "rates")
    if np.any(r <= 0):
        raise DpledgerError(f"rates must be > 0, got {r.tolist()}")
    if lo > 0 or hi < 1:
        raise DpledgerError(f"truncated-exponential rewards lie in [0, 1], outside [{lo}, {hi}]")
    return Environment(TRUNCEXP, np.stack([r, np.zeros_like(r)], axis=1), np.zeros((0, 0)), lo, hi)


def beta(ab, lo: float = 0.0, hi: float = 1.0) -> Environment:
    lo, hi = check_range(lo, hi)
    try:
        arr = np.asarray(ab, dtype=np.float64)
    except (TypeError, ValueError):         # ragged pairs, words: no (K, 2) array of numbers
        raise DpledgerError("beta arms need (a, b) pairs of numbers for at least 2 arms, got "
                            f"{ab!r}"[:200]) from None
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] < 2:
        raise DpledgerError("beta arms need (a, b) pairs for at least 2 arms")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise DpledgerError(f"beta parameters must be finite and > 0, got {arr.tolist()}")
    if lo > 0 or hi < 1:
        raise DpledgerError(f"Beta rewards lie in [0, 1], outside [{lo}, {hi}]")
    return Environment(BETA, arr.copy(), np.zeros((0, 0)), lo, hi)


def table(values, lo: float = 0.0, hi: float = 1.0) -> Environment:
    """A fixed reward table (T, K): row t holds every arm's reward at round t (replay, audits)."""
    lo, hi = check_range(lo, hi)
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DpledgerError("a reward table must be a (T, K) array of numbers") from None
    if arr.ndim != 2 or arr.shape[1] < 2 or arr.shape[0] < 1:
        raise DpledgerError("a reward table must have rounds as rows and at least 2 arms as "
                            f"columns, got {' × '.join(map(str, arr.shape)) or 'a single value'}")
    if not np.all(np.isfinite(arr)):
        raise DpledgerError("a reward table must not contain NaN or infinity")
    bad = (arr < lo) | (arr > hi)
    if bad.any():
        t, k = map(int, np.argwhere(bad)[0])
        raise DpledgerError(f"the reward table's row {t + 1}, column {k + 1} holds "
                            f"{float(arr[t, k])!r}, outside the declared range [{lo:g}, {hi:g}]")
    return Environment(TABLE, np.zeros((arr.shape[1], 2)), arr, lo, hi)


class BernoulliArms(NamedTuple):
    kind: int
    params: np.ndarray
    table: np.ndarray
    lo: float
    hi: float


class TruncExpArms(NamedTuple):
    kind: int
    params: np.ndarray
    table: np.ndarray
    lo: float
    hi: float


class BetaArms(NamedTuple):
    kind: int
    params: np.ndarray
    table: np.ndarray
    lo: float
    hi: float


class TableArms(NamedTuple):
    kind: int
    params: np.ndarray
    table: np.ndarray
    lo: float
    hi: float


KERNEL_ENVS = {BERNOULLI: BernoulliArms, TRUNCEXP: TruncExpArms, BETA: BetaArms, TABLE: TableArms}


def _lattice_class(name: str):
    return NamedTuple(name, [("kind", int), ("params", np.ndarray), ("table", np.ndarray),
                             ("lo", float), ("hi", float), ("bits", int)])


# the exact sampler's environments: the same draws rounded to the lattice 2^-bits; the ``bits``
# field also tells mechanisms.noise.laplace_draw to draw lattice noise
LatticeBernoulliArms = _lattice_class("LatticeBernoulliArms")
LatticeTruncExpArms = _lattice_class("LatticeTruncExpArms")
LatticeBetaArms = _lattice_class("LatticeBetaArms")
LatticeTableArms = _lattice_class("LatticeTableArms")
LATTICE_ENVS = {BERNOULLI: LatticeBernoulliArms, TRUNCEXP: LatticeTruncExpArms,
                BETA: LatticeBetaArms, TABLE: LatticeTableArms}


@njit(cache=True)
def _bernoulli_draw(rng, params, tab, arm, t):
    return 1.0 if rng.random() < params[arm, 0] else 0.0


@njit(cache=True)
def _truncexp_draw(rng, params, tab, arm, t):
    lam = params[arm, 0]
    return -np.log1p(rng.random() * np.expm1(-lam)) / lam     # inverse CDF on [0, 1]


@njit(cache=True)
def _beta_draw(rng, params, tab, arm, t):
    return rng.beta(params[arm, 0], params[arm, 1])


@njit(cache=True)
def _table_draw(rng, params, tab, arm, t):
    return tab[t, arm]


_DRAWS = {BERNOULLI: _bernoulli_draw, TRUNCEXP: _truncexp_draw, BETA: _beta_draw,
          TABLE: _table_draw}


def draw_reward(rng, env, arm, t):
    """One reward of ``arm`` at round ``t`` (0-based), rescaled to [0, 1].

    This Python body serves the per-round reference runs (``kernel.py_func``); compiled kernels
    get the overload below, which is inlined and specialised on the environment's class (the
    same per-kind draw functions, so both give the same draws for the same Generator)."""
    kind, params, tab, lo, hi = env[:5]
    if kind == BERNOULLI:           # module globals, not _DRAWS: tests swap them for py_func
        x = _bernoulli_draw(rng, params, tab, arm, t)
    elif kind == TRUNCEXP:
        x = _truncexp_draw(rng, params, tab, arm, t)
    elif kind == BETA:
        x = _beta_draw(rng, params, tab, arm, t)
    else:
        x = _table_draw(rng, params, tab, arm, t)
    bits = getattr(env, "bits", 0)
    if bits:
        return to_lattice((x - lo) / (hi - lo), bits)
    return (x - lo) / (hi - lo)


def lattice_bits(env) -> int:
    """The environment's lattice bits (0: float sampler)."""
    return getattr(env, "bits", 0)


@overload(lattice_bits, inline="always")
def _lattice_bits_compiled(env):
    if "bits" in getattr(env, "fields", ()):
        return lambda env: env.bits
    return lambda env: 0


@njit(cache=True)
def to_lattice(y, bits):
    """The nearest multiple of 2^-bits (ties to even): exact in float64."""
    return np.rint(y * 2.0 ** bits) * 2.0 ** -bits


def _rescaled(draw):
    """The compiled reward of one environment kind, rescaled to [0, 1] (a factory, so that each
    kind's implementation closes over its own draw function)."""
    def impl(rng, env, arm, t):
        return (draw(rng, env.params, env.table, arm, t) - env.lo) / (env.hi - env.lo)
    return impl


def _rescaled_lattice(draw):
    """As ``_rescaled``, then rounded to the environment's lattice."""
    def impl(rng, env, arm, t):
        return to_lattice((draw(rng, env.params, env.table, arm, t) - env.lo)
                          / (env.hi - env.lo), env.bits)
    return impl


@overload(draw_reward, inline="always")
def _draw_reward_compiled(rng, env, arm, t):
    cls = getattr(env, "instance_class", None)
    for kind, env_cls in KERNEL_ENVS.items():
        if cls is env_cls:
            return _rescaled(_DRAWS[kind])
    for kind, env_cls in LATTICE_ENVS.items():
        if cls is env_cls:
            return _rescaled_lattice(_DRAWS[kind])
    return None


@njit(cache=True)
def draw_sum(rng, env, arm, t0, n):
    """Sum of ``n`` rewards of ``arm`` at rounds t0 … t0+n−1, rescaled: one Binomial draw for
    Bernoulli arms (the stretch-jump of docs/design.md#performance-targets P2), a table slice, or n
    draws otherwise."""
    kind, params, lo, hi = env.kind, env.params, env.lo, env.hi
    if n <= 0:
        return 0.0
    if kind == 0:
        s = float(rng.binomial(n, params[arm, 0]))
        bits = lattice_bits(env)
        if bits:                    # each reward rounded on its own: s ones, n − s zeros
            return (s * to_lattice((1.0 - lo) / (hi - lo), bits)
                    + (n - s) * to_lattice(-lo / (hi - lo), bits))
        return (s - n * lo) / (hi - lo)
    total = 0.0
    for i in range(n):
        total += draw_reward(rng, env, arm, t0 + i)
    return total
