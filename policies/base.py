"""The policy interface (docs/design.md#policies-and-simulation).

A policy chooses arms and *describes* each release it makes; it never computes a privacy number.
It declares:

* ``releases(T, K)`` — the interned release table its kernel's ``release_id`` column indexes;
* ``certificate(T, K)`` — its release schedule's worst case, as candidate compositions
  (docs/design.md#privacy-model table; derivations in docs/algorithms.md#policies);
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
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np
from dpledger._jit import njit

from dpledger.accounting.certificate import Certificate, Theorem
from dpledger.accounting.releases import Release
from dpledger.errors import DpledgerError, shown


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    kind: str            # "float", "positive", "int", "bool", "choice", "fraction" ([0, 1]),
                         # "probability" ((0, 1))
    doc: str
    choices: tuple = ()
    hidden: bool = False    # a test or speed switch: not listed, not in run.json at its default
    # a public parameter added after run.json files were published: listed, but omitted from
    # run.json at its default, so that earlier runs keep their bytes (a parameter missing from
    # run.json is rebuilt at its default, which is the rule it then played)
    omit_at_default: bool = False

    def parse(self, value: Any) -> Any:
        """``value`` checked against the declared kind: a number where a number is declared (a
        string is refused, as the release classes refuse it; text from the command line goes
        through :meth:`from_text`), true/false, or one of the choices."""
        if _is_numpy_scalar(value):
            value = value.item()
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            raise DpledgerError(f"{self.name} must be true or false, got {shown(value)}")
        if self.kind == "choice":
            if value in self.choices:
                return value
            raise DpledgerError(f"{self.name} must be one of {', '.join(map(str, self.choices))}"
                                f", got {shown(value)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DpledgerError(f"{self.name} must be a number, got {shown(value)}")
        if isinstance(value, float) and math.isnan(value):
            raise DpledgerError(f"{self.name} must not be NaN")
        if self.kind == "int":
            if value != int(value) or value < 0:
                raise DpledgerError(f"{self.name} must be an integer >= 0, got {shown(value)}")
            return int(value)
        value = float(value)
        if math.isinf(value):
            raise DpledgerError(f"{self.name} must be finite, got {shown(value)}")
        if self.kind == "positive" and not value > 0:
            raise DpledgerError(f"{self.name} must be > 0, got {shown(value)}")
        if self.kind == "fraction" and not 0 <= value <= 1:
            raise DpledgerError(f"{self.name} must lie in [0, 1], got {shown(value)}")
        if self.kind == "probability" and not 0 < value < 1:
            raise DpledgerError(f"{self.name} must lie in (0, 1), got {shown(value)}")
        return value

    def from_text(self, text: str) -> Any:
        """The value of ``--set name=text``: read as the declared kind (numbers, true/false),
        then checked by :meth:`parse`; a refusal names the option as typed."""
        value = text.strip() if self.kind == "choice" else _from_text(text)
        try:
            return self.parse(value)
        except DpledgerError as exc:
            raise DpledgerError(f"--set {self.name}={text.strip()}: {exc}") from None


# Parameters several policies share, declared once.
EPSILON = Param("epsilon", 1.0, "positive", "privacy budget ε")
# the Beta-posterior policies' draw (dpledger.policies.beta_max): every arm's sample, or only the
# largest and its arm (the same law of the play, other draws: recorded when not the default), by
# one uniform per other arm (max) or mostly one uniform a round (max-joint)
POSTERIOR_DRAW = Param(
    "posterior_draw", "all", "choice",
    "every arm's Beta sample each round (all), or the largest only, same law (max: one Beta "
    "draw a round; max-joint: one Beta draw and mostly one uniform a round, "
    "docs/algorithms.md#beta-thompson-sampling)",
    choices=("all", "max", "max-joint"), omit_at_default=True)
# the kernels' params entry for each value
POSTERIOR_DRAW_CODE = {"all": 0.0, "max": 1.0, "max-joint": 2.0}

# Kernels that read per-round or per-pull constants (DP-UCB's ln t, TS-Gaussian's σ_k) get them
# in ``kernel_params`` for indices below this, computed once per run; above, they compute them.
KERNEL_TABLE_MAX = 4096


def kernel_table_size(T: int) -> int:
    """Entries of a kernel's lookup table for horizon T: indices 0 … min(T, 4095)."""
    return min(int(T) + 1, KERNEL_TABLE_MAX)
# No parameter scales the noise: a kernel draws the scales :meth:`KernelPolicy.noise_scales`
# reads off the declared releases, so whatever changes a draw changes the release that the
# ledger and the certificate name (issue 12 §1: a hidden ``noise`` multiplier, reachable from
# ``--set``, voided every certificate).  Tests that need a mis-noised policy build one from a
# test-only subclass (tests/planted.py).


def fast_switch(doc: str) -> Param:
    """The hidden switch between a policy's fast path and its per-round reference rule."""
    return Param("fast", True, "bool", f"hidden: {doc}", hidden=True)


PARAM_ALIASES = {"eps": "epsilon"}


def _is_numpy_scalar(value: Any) -> bool:
    return isinstance(value, np.generic)


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


class RunOutput:
    """What one run produces.  ``rows`` is the (5, n) block (arm, start, stop, release_id,
    count) the kernel wrote; ``gauss_rows`` optional (arm, start, stop, count, mu2) columns;
    ``trees`` optional (arm, offset, n_items, levels, release_id) columns;
    ``posterior_reads`` optional (arm, first_round, last_round, c) columns (scalars broadcast;
    :meth:`RewardLedger.add_posterior_reads`).

    The play is given either as ``actions`` (the arm of every round played) or as ``segments``,
    a (4, n) int64 array with rows (arm, first_round, stride, length): arithmetic runs of the
    (1-based) rounds at which one arm was played — arm ``arm`` at rounds first_round,
    first_round + stride, …, length rounds in all (stride 1 for a single pull).  Segments of
    one arm do not interleave (each one's rounds come after the previous one's); together they
    cover rounds 1 … rounds played exactly once.  Event-driven kernels give segments, so that a
    run costs O(events), not O(T); the simulator derives everything from them
    (:mod:`dpledger.policies.simulator`).  ``actions`` of a segments-only run is materialised
    (O(T)) on first access, for callers that want the sequence.
    """

    def __init__(self, actions: np.ndarray | None = None, rows: np.ndarray | None = None,
                 gauss_rows: dict | None = None, trees: dict | None = None,
                 noise_draws: int = 0, captured: dict | None = None,
                 extra: dict | None = None, segments: np.ndarray | None = None):
        if actions is None and segments is None:
            raise DpledgerError("a run output needs actions or segments")
        self._actions = actions
        self.segments = segments
        self.rows = rows if rows is not None else np.zeros((5, 0), dtype=np.int64)
        self.gauss_rows = gauss_rows
        self.trees = trees
        self.posterior_reads: dict | None = None
        self.noise_draws = noise_draws
        self.captured = captured
        self.extra = {} if extra is None else extra
        self.table: np.ndarray | None = None    # the (5, n) segment table, when a sink built it

    @property
    def actions(self) -> np.ndarray:
        """The arm of every round played (materialised from ``segments`` if not given)."""
        if self._actions is None:
            self._actions = actions_from_segments(self.segments)
        return self._actions

    @actions.setter
    def actions(self, value: np.ndarray) -> None:
        self._actions = value

    def rounds_played(self) -> int:
        """Rounds played, without materialising actions."""
        if self._actions is not None:
            return int(np.size(self._actions))
        segs = np.asarray(self.segments, dtype=np.int64).reshape(4, -1)
        return int(segs[3].sum())

    def pull_counts(self, K: int) -> np.ndarray:
        """Pulls of every arm (int64, length K), without materialising actions."""
        if self._actions is not None:
            return np.bincount(np.asarray(self._actions, dtype=np.int64), minlength=K)
        segs = np.asarray(self.segments, dtype=np.int64).reshape(4, -1)
        counts = np.zeros(K, dtype=np.int64)
        np.add.at(counts, segs[0], segs[3])         # integer sums (no float weights)
        return counts

    @property
    def has_actions(self) -> bool:
        """Whether ``actions`` is held (False: only segments, actions would be materialised)."""
        return self._actions is not None

    def __repr__(self) -> str:
        play = (f"segments={self.segments.shape[1]}" if self._actions is None
                else f"actions={self._actions.size}")
        return f"RunOutput({play}, rows={self.rows.shape[1]}, noise_draws={self.noise_draws})"


@njit(cache=True)
def push_segment(segs, n, last, arm, first_round, stride, length):
    """Append the segment (arm, first_round, stride, length) to ``segs[:, :n]``, growing the
    buffer by doubling when full; returns (buffer, n).  ``last[arm]`` is the column of the
    arm's latest segment (−1 if none): a segment continuing it with the same stride is merged
    into it.  Kernels call this in round order of their stretches."""
    if length <= 0:
        return segs, n
    if length == 1:
        stride = 1
    j = last[arm]
    if j >= 0 and segs[3, j] > 1 and length > 1 and segs[2, j] == stride \
            and segs[1, j] + stride * segs[3, j] == first_round:
        segs[3, j] += length
        return segs, n
    if j >= 0 and segs[3, j] >= 1 and stride == 1 and (segs[3, j] == 1 or segs[2, j] == 1) \
            and segs[1, j] + segs[3, j] == first_round:
        segs[2, j] = 1                      # contiguous: a stretch continued by the same arm
        segs[3, j] += length
        return segs, n
    if n == segs.shape[1]:
        grown = np.zeros((4, max(2 * n, 16)), np.int64)
        grown[:, :n] = segs[:, :n]
        segs = grown
    segs[0, n] = arm
    segs[1, n] = first_round
    segs[2, n] = stride
    segs[3, n] = length
    last[arm] = n
    return segs, n + 1


@njit(cache=True)
def _fill_actions(segs, out):
    for j in range(segs.shape[1]):
        a, r, s, m = segs[0, j], segs[1, j], segs[2, j], segs[3, j]
        for i in range(m):
            out[r - 1 + i * s] = a


def actions_from_segments(segs: np.ndarray) -> np.ndarray:
    """The action sequence (int64, one entry per round played) the segments describe."""
    segs = np.asarray(segs, dtype=np.int64).reshape(4, -1)
    if segs.shape[1] == 0:
        return np.zeros(0, dtype=np.int64)
    played = int(segs[3].sum())
    out = np.full(played, -1, dtype=np.int64)
    _fill_actions(segs, out)
    if played and out.min() < 0:
        raise DpledgerError("segments do not cover rounds 1 … rounds played exactly")
    return out


class Policy(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    provenance: ClassVar[str]
    params_spec: ClassVar[tuple[Param, ...]] = ()
    adaptive: ClassVar[bool] = False
    private: ClassVar[bool] = True
    exact_sampler: ClassVar[bool] = False    # draws its Laplace noise through laplace_noise/draw

    def __init__(self, **params: Any):
        known = {p.name: p for p in self.params_spec}
        values = {p.name: p.default for p in self.params_spec}
        for key, value in params.items():
            key = PARAM_ALIASES.get(key, key)
            if key == "rho" and key not in known and self.private:
                raise DpledgerError(f"policy {self.name!r} is certified in pure ε or GDP, not "
                                    f"zCDP: it takes no target rho; known: "
                                    f"{', '.join(known) or 'none'}")
            if key not in known:
                raise DpledgerError(f"policy {self.name!r} has no parameter {key!r}; "
                                    f"known: {', '.join(known) or 'none'}")
            values[key] = known[key].parse(value)
        self.params: dict[str, Any] = values

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def resolved_params(self, T: int, K: int) -> dict:
        """Parameters with horizon-dependent defaults filled in (e.g. DP-SE's β = 1/T); hidden
        switches and ``omit_at_default`` parameters only when they differ from their default
        (so ``verify`` can rebuild the run)."""
        return self.public_params()

    def public_params(self) -> dict:
        spec = {p.name: p for p in self.params_spec}
        return {k: v for k, v in self.params.items()
                if not (spec[k].hidden or spec[k].omit_at_default) or v != spec[k].default}

    def recorded_params(self) -> dict:
        """Every parameter, hidden switches included, except an ``omit_at_default`` one at its
        default: what audit.json records (so that earlier audits keep their bytes)."""
        spec = {p.name: p for p in self.params_spec}
        return {k: v for k, v in self.params.items()
                if not spec[k].omit_at_default or v != spec[k].default}

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
                "samplers": ["float", "exact"] if self.exact_sampler else ["float"],
                "params": [{"name": p.name, "default": p.default, "doc": p.doc,
                            **({"choices": list(p.choices)} if p.choices else {})}
                           for p in self.params_spec if not p.hidden]}


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
    """A policy whose rule is one numba kernel (one source per rule,
    docs/design.md#policies-and-simulation).

    ``kernel(rng, env, T, K, stop, params, actions, rows, capture)`` plays rounds 1 … stop,
    writes the arm of round t to ``actions[t−1]`` (kernels with ``action_sink = True`` write it
    with ``put_action(actions, t, a)`` in round order, so that ``actions`` may also be a sink,
    :mod:`dpledger.policies.sink`), ledger rows into ``rows`` (see
    :mod:`dpledger.mechanisms.noise`), and returns (rounds played, rows written, noise draws).
    The per-round reference run is ``kernel.py_func`` with the same Generator.

    Event-driven policies (arm fixed for a stretch) may also set ``segment_kernel``: the same
    rule with one more argument, a (4, capacity) int64 segment buffer, returning (rounds
    played, rows written, noise draws, segment buffer, segments written).  With a non-empty
    buffer it describes the play as segments (see :class:`RunOutput`) and writes no actions,
    so a run costs O(events) whatever T.  ``kernel`` is then a thin wrapper calling it with an
    empty buffer: the uniform signature above stays the one every caller (audits' compiled
    trial loop, the per-round reference) uses, and no other policy module changes.  The base
    ``run_one`` takes the segments route when :meth:`emits_segments` says so (never for
    ``reference=True``).
    """

    kernel: ClassVar[Any]
    segment_kernel: ClassVar[Any] = None
    # the kernel writes its play through ``put_action`` (:mod:`dpledger.policies.sink`), one
    # round at a time in round order, and is compiled nogil: set together with ``kernel``
    action_sink: ClassVar[bool] = False

    def kernel_params(self, T: int, K: int) -> np.ndarray:
        return np.zeros(1)

    def noise_scales(self, T: int, K: int) -> np.ndarray:
        """The noise scale of every release id, read off :meth:`releases` (the ``scale`` of each
        Laplace release): Laplace kernels get them in their parameters and draw release id
        ``r``'s noise with scale ``noise_scales[r]``, so a kernel's draw and the ledger row that
        names its release have one source."""
        return np.array([float(r.scale) for r in self.releases(T, K)], dtype=np.float64)

    def row_capacity(self, T: int, K: int) -> int:
        return K

    def emits_segments(self) -> bool:
        """Whether ``run_one`` describes the play by segments (a ``segment_kernel`` exists)."""
        return type(self).segment_kernel is not None

    def segment_capacity(self, T: int, K: int) -> int:
        """Initial size of the segment buffer (the kernel grows it when needed)."""
        return self.row_capacity(T, K) + K + 2

    def finish(self, out: RunOutput, T: int, K: int) -> RunOutput:
        """Hook for policies that add non-row ledger records (non-private reads, trees)."""
        return out

    def run_one(self, rng, env, T, stop_at=None, capture=False, reference=False, sink=None):
        """One run.  ``sink`` (from :func:`~dpledger.policies.sink.make_sink`, only for an
        ``action_sink`` kernel): the play is digested into its segment table while the kernel
        runs (``out.table``; ``out.segments`` its (arm, first_round, stride, length) rows) and
        no action array is made; may raise :class:`~dpledger.policies.sink.SinkOverflow`."""
        K = int(env[1].shape[0])
        stop = T if stop_at is None else int(stop_at)
        rows = np.zeros((5, max(self.row_capacity(T, K), 1)), dtype=np.int64)
        cap = np.zeros((2, 4)) if capture else np.zeros((2, 0))
        captured = None
        if not reference and self.emits_segments():
            segs = np.zeros((4, max(self.segment_capacity(T, K), 1)), dtype=np.int64)
            played, n_rows, draws, segs, n_segs = type(self).segment_kernel(
                rng, env, T, K, stop, self.kernel_params(T, K), _NO_ACTIONS, rows, cap, segs)
            if capture:
                captured = {"released": cap[0].tolist(), "clean": cap[1].tolist()}
            out = RunOutput(segments=segs[:, :n_segs], rows=rows[:, :n_rows],
                            noise_draws=int(draws), captured=captured)
            return self.finish(out, T, K)
        kernel = type(self).kernel
        if sink is not None:
            if reference or not type(self).action_sink:
                raise DpledgerError(f"policy {self.name!r}: an action sink needs an action_sink "
                                    "kernel and the compiled path")
            from dpledger.policies.sink import finish_sink
            played, n_rows, draws = kernel(rng, env, T, K, stop, self.kernel_params(T, K), sink,
                                           rows, cap)
            table = finish_sink(sink, played)
            out = RunOutput(segments=table[[0, 2, 3, 4]], rows=rows[:, :n_rows],
                            noise_draws=int(draws),
                            captured={"released": cap[0].tolist(), "clean": cap[1].tolist()}
                            if capture else None)
            out.table = table
            return self.finish(out, T, K)
        actions = np.zeros(stop, dtype=np.int64)
        fn = kernel.py_func if reference else kernel
        played, n_rows, draws = fn(rng, env, T, K, stop, self.kernel_params(T, K), actions, rows, cap)
        out = RunOutput(actions=actions[:played], rows=rows[:, :n_rows], noise_draws=int(draws),
                        captured={"released": cap[0].tolist(), "clean": cap[1].tolist()}
                        if capture else None)
        return self.finish(out, T, K)


_NO_ACTIONS = np.zeros(0, dtype=np.int64)
