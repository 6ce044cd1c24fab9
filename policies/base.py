"""The policy interface (SPEC §5).

A policy chooses arms and *describes* each release it makes; it never computes a privacy number.
It declares:

* ``releases(T, K)`` — the interned release table its kernel's ``release_id`` column indexes;
* ``certificate(T, K)`` — its release schedule's worst case, as candidate compositions
  (SPEC §2 table; derivations in algorithms.md Part A);
* ``theorem(T, K)`` — the paper's statement, from :mod:`dpledger.accounting.theorems`;
* ``adaptive`` — whether release parameters depend on the (public) history, in which case the
  realized ledger is an odometer reading;
* ``run_one(rng, env, T, stop_at)`` — one run, returning a :class:`RunOutput`.

Parameters are declared once as :class:`Param` and validated at construction, so every entry
point (API, CLI ``--set``, ``verify``) shares one validation.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from dpledger.accounting.certificate import Certificate, Theorem
from dpledger.accounting.releases import Release
from dpledger.errors import DpledgerError


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    kind: str            # "float", "positive", "int", "bool", "choice", "fraction"
    doc: str
    choices: tuple = ()

    def parse(self, value: Any) -> Any:
        if isinstance(value, str):
            value = _from_text(value)
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            raise DpledgerError(f"{self.name} must be true or false, got {value!r}")
        if self.kind == "choice":
            if value in self.choices:
                return value
            raise DpledgerError(f"{self.name} must be one of {list(self.choices)}, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DpledgerError(f"{self.name} must be a number, got {value!r}")
        if isinstance(value, float) and math.isnan(value):
            raise DpledgerError(f"{self.name} must not be NaN")
        if self.kind == "int":
            if value != int(value) or value < 0:
                raise DpledgerError(f"{self.name} must be an integer >= 0, got {value!r}")
            return int(value)
        value = float(value)
        if math.isinf(value):
            raise DpledgerError(f"{self.name} must be finite, got {value!r}")
        if self.kind == "positive" and not value > 0:
            raise DpledgerError(f"{self.name} must be > 0, got {value!r}")
        if self.kind == "fraction" and not 0 <= value <= 1:
            raise DpledgerError(f"{self.name} must lie in [0, 1], got {value!r}")
        return value


def _from_text(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    try:
        return int(low)
    except ValueError:
        pass
    try:
        return float(low)
    except ValueError:
        return text.strip()


@dataclass
class RunOutput:
    """What one run produces.  ``rows`` is the (5, n) block (arm, start, stop, release_id,
    count) the kernel wrote; ``gauss_rows`` optional (arm, start, stop, count, mu2) columns;
    ``trees`` optional (arm, offset, n_items, levels, release_id) columns."""

    actions: np.ndarray                    # int arm per round played (length = rounds played)
    rows: np.ndarray
    gauss_rows: dict | None = None
    trees: dict | None = None
    noise_draws: int = 0
    captured: dict | None = None
    extra: dict = field(default_factory=dict)


class Policy(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    provenance: ClassVar[str]
    params_spec: ClassVar[tuple[Param, ...]] = ()
    adaptive: ClassVar[bool] = False
    private: ClassVar[bool] = True

    def __init__(self, **params: Any):
        known = {p.name: p for p in self.params_spec}
        aliases = {"eps": "epsilon"}
        values = {p.name: p.default for p in self.params_spec}
        for key, value in params.items():
            key = aliases.get(key, key)
            if key not in known:
                raise DpledgerError(f"policy {self.name!r} has no parameter {key!r}; "
                                    f"known: {', '.join(known) or 'none'}")
            values[key] = known[key].parse(value)
        self.params: dict[str, Any] = values

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def resolved_params(self, T: int, K: int) -> dict:
        """Parameters with horizon-dependent defaults filled in (e.g. DP-SE's β = 1/T)."""
        return dict(self.params)

    @abstractmethod
    def releases(self, T: int, K: int) -> list[Release]: ...

    @abstractmethod
    def certificate(self, T: int, K: int) -> Certificate: ...

    @abstractmethod
    def theorem(self, T: int, K: int) -> Theorem: ...

    @abstractmethod
    def run_one(self, rng: np.random.Generator, env, T: int, stop_at: int | None = None,
                capture: bool = False) -> RunOutput: ...

    def describe(self) -> dict:
        return {"name": self.name, "title": self.title, "provenance": self.provenance,
                "private": self.private, "adaptive": self.adaptive,
                "params": [{"name": p.name, "default": p.default, "doc": p.doc,
                            **({"choices": list(p.choices)} if p.choices else {})}
                           for p in self.params_spec]}


def validate_horizon(T: Any, K: int) -> int:
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) and not (
            isinstance(T, float) and T.is_integer()):
        raise DpledgerError(f"horizon must be an integer, got {T!r}")
    T = int(T)
    if T < K:
        raise DpledgerError(f"horizon {T} is shorter than the number of arms {K}")
    if T > 10 ** 9:
        raise DpledgerError(f"horizon {T} exceeds the supported maximum 1e9")
    return T


def mapping_or_empty(m: Mapping | None) -> dict:
    return dict(m) if m else {}


class KernelPolicy(Policy):
    """A policy whose rule is one numba kernel (one source per rule, SPEC §5).

    ``kernel(rng, env, T, K, stop, params, actions, rows, capture)`` plays rounds 1 … stop,
    writes the arm of round t to ``actions[t−1]``, ledger rows into ``rows`` (see
    :mod:`dpledger.mechanisms.noise`), and returns (rounds played, rows written, noise draws).
    The per-round reference run is ``kernel.py_func`` with the same Generator.
    """

    kernel: ClassVar[Any]

    def kernel_params(self, T: int, K: int) -> np.ndarray:
        return np.zeros(1)

    def row_capacity(self, T: int, K: int) -> int:
        return K

    def finish(self, out: RunOutput, T: int, K: int) -> RunOutput:
        """Hook for policies that add non-row ledger records (non-private reads, trees)."""
        return out

    def run_one(self, rng, env, T, stop_at=None, capture=False, reference=False):
        K = int(env[1].shape[0])
        stop = T if stop_at is None else int(stop_at)
        actions = np.zeros(stop, dtype=np.int64)
        rows = np.zeros((5, max(self.row_capacity(T, K), 1)), dtype=np.int64)
        cap = np.zeros((2, 4)) if capture else np.zeros((2, 0))
        kernel = type(self).kernel
        fn = kernel.py_func if reference else kernel
        played, n_rows, draws = fn(rng, env, T, K, stop, self.kernel_params(T, K), actions, rows, cap)
        out = RunOutput(actions=actions[:played], rows=rows[:, :n_rows], noise_draws=int(draws),
                        captured={"released": cap[0].tolist(), "clean": cap[1].tolist()}
                        if capture else None)
        return self.finish(out, T, K)
