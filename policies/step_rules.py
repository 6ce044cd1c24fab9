"""The step rules: each registered policy's state and its module's compiled rule functions,
wired for :mod:`dpledger.policies.step` (one source: the whole-run kernels call the same
functions in their loops).

A rule holds ``state`` (named numpy arrays: everything a checkpoint must keep) and answers:

* ``select(box, t)``: round t's arm (``box.rng`` the run's generator) — after the K initial
  pulls for rules with ``initial_pulls``, which the engine plays itself (arm t − 1 at round t,
  as every such kernel does);
* ``push(a, x)``: arm a's next reward x (rescaled to [0, 1]); returns the releases now due,
  ``[(arm, release id, start, stop), …]`` over observations [start, stop) of the arm, in the
  order the kernel draws them;
* ``draw(engine, rid)`` and ``commit(a, rid, noise)``: the release's noise, drawn by the
  kernels' own helper, and the rule's update with it;
* ``release(rid)``: the release id's :class:`~dpledger.accounting.releases.Release` (as the
  float sampler records it; the engine maps it to the lattice one for the exact sampler);
* ``ready(a)``: arm a has a released statistic (the engine plays arms without one first);
* with ``select_releases`` (the policies whose selection itself draws noise: a read of every
  arm's posterior, a fresh sample of a model), ``select_due(t)``: the releases round t's
  ``select`` will draw, ``[(arm, release id, start, stop), …]`` — the engine records them
  before it calls ``select`` (the arms it froze, ``engine.live`` False, draw nothing).

What a refused release leaves behind is the engine's rule for every policy (the arm is frozen on
what it has released; :mod:`~dpledger.policies.step`).
"""
from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from dpledger._jit import njit

from dpledger.errors import DpledgerError
from dpledger.accounting.releases import NonPrivateRelease
from dpledger.accounting.releases import LaplaceRelease
from dpledger.accounting.posterior_reads import (posterior_read_lattice_sigma,
                                                 posterior_read_release)
from dpledger.mechanisms.counters import binary_new, binary_push, binary_state_size, log_new
from dpledger.accounting.releases import lattice_sigma
from dpledger.mechanisms.noise import lattice_gaussian, lattice_release
from dpledger.policies import (adac, anytime_lazy_ucb, azize2025, azize_basu, baselines,
                               beta_max, dp_se, hu2025, hu_hegde, mishra_thakurta, ou)
from dpledger.policies.rules import tie_break
from dpledger.policies.step import laplace_step


_NO_CAPTURE = np.zeros((0, 0))       # the kernels' capture argument, empty
_NO_TABLE = np.zeros(0)              # a kernel's precomputed table, empty: computed instead


class StepRule:
    """Base of the step rules (see the module docstring)."""

    name: ClassVar[str]
    anytime: ClassVar[bool] = True            # needs no horizon
    horizon_reason: ClassVar[str] = ""
    initial_pulls: ClassVar[bool] = True      # rounds 1 … K play arm t − 1
    select_releases: ClassVar[bool] = False   # select draws noise (select_due)
    contextual: ClassVar[bool] = False        # select(context=…), push_record
    # state keys added after checkpoints were written without them, whose initial value is
    # right for every such checkpoint (a served run resumed by a later version)
    added_state: ClassVar[frozenset] = frozenset()

    def __init__(self, policy, K: int, horizon: int | None):
        self.policy, self.K, self.horizon = policy, K, horizon
        self.state: dict[str, np.ndarray] = {}

    def bind(self, engine) -> None:
        """Called once by the engine (:class:`~dpledger.policies.step.OnlinePolicy`) that
        drives this rule: its pull counts, frozen arms (``live``), sampler bits and generator."""
        self.engine = engine
        self.pulls = engine.pulls

    def start(self, box) -> None:
        """Called once the engine's generator is set, before the first round (draws a rule
        makes before any data: none for the K-armed rules)."""

    def stream_of(self, a: int) -> int:
        """The ledger stream (the records' ``arm`` column) arm a's rewards join."""
        return a

    def draw_due(self, engine, due: list) -> None:
        """Draw and commit the recorded releases ``due``, in order."""
        for arm, rid, _, _ in due:
            self.commit(arm, rid, self.draw(engine, rid))

    @classmethod
    def needs_horizon(cls, policy) -> str:
        """Why ``policy`` needs a horizon ('' when it is anytime)."""
        return "" if cls.anytime else cls.horizon_reason

    def release(self, rid: int):
        raise NotImplementedError

    def recorded_release(self, rid: int, bits: int):
        """Release ``rid`` as the ledger records it: :meth:`release`, or with the exact
        sampler (``bits`` > 0) its lattice form, as the simulator records it."""
        rel = self.release(rid)
        return lattice_release(rel, bits) if bits else rel

    def draw(self, engine, rid: int) -> float:
        """Laplace noise of release ``rid`` (float, or lattice with the exact sampler)."""
        rel = self.release(rid)
        return laplace_step(engine.box, engine.env, float(rel.scale), float(rel.sensitivity))


# ---- Lazy-DP-TS (policies/hu_hegde.py) --------------------------------------------------------

@njit(cache=True)
def _lazy_select(box, eps, t, mu_tilde, O, theta, use_max):
    return hu_hegde.lazy_select(box.rng, eps, t, mu_tilde, O, theta, use_max)


@njit(cache=True)
def _lazy_joint_select(box, eps, t, mu_tilde, O, theta, blk):
    return hu_hegde.lazy_joint_select(box.rng, eps, t, mu_tilde, O, theta, blk)


def _joint_block() -> np.ndarray:
    """``posterior_draw="max-joint"``'s block of rounds in a step rule's state (last round,
    lowest and highest f, τ, τ's leader; hu_hegde.shifted_joint_step): none yet."""
    return np.array([0.0, 0.0, 0.0, 0.0, -1.0])


class LazyDPTSStep(StepRule):
    name = "lazy-dp-ts"
    added_state = frozenset({"blk"})         # posterior_draw=max-joint's block (2026-12-04)

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.eps = float(policy.params["epsilon"])
        self.state = dict(mu=np.zeros(K), O=np.zeros(K), r=np.zeros(K, np.int64),
                          buf_sum=np.zeros(K), buf_len=np.zeros(K, np.int64),
                          n_obs=np.zeros(K, np.int64), theta=np.zeros(K),
                          blk=_joint_block())
        self._rel = policy.releases(K, K)[0]

    def release(self, rid):
        return self._rel

    def ready(self, a):
        return self.state["O"][a] > 0

    def select(self, box, t):
        s = self.state
        if self.policy.params["posterior_draw"] == "max-joint":
            return _lazy_joint_select(box, self.eps, t, s["mu"], s["O"], s["theta"], s["blk"])
        return _lazy_select(box, self.eps, t, s["mu"], s["O"], s["theta"],
                            self.policy.params["posterior_draw"] == "max")

    def push(self, a, x):
        s = self.state
        due, start, stop = hu_hegde.lazy_push(a, x, s["r"], s["buf_sum"], s["buf_len"],
                                              s["n_obs"])
        return [(a, 0, int(start), int(stop))] if due else None

    def commit(self, a, rid, noise):
        s = self.state
        hu_hegde.lazy_commit(a, noise, s["mu"], s["O"], s["r"], s["buf_sum"], s["buf_len"],
                             s["n_obs"])


# ---- Anytime-Lazy-UCB (policies/anytime_lazy_ucb.py) -------------------------------------------

@njit(cache=True)
def _anytime_select(box, mu, O, eps, t, index):
    return anytime_lazy_ucb.anytime_select(box.rng, mu, O, eps, t, index)


class AnytimeLazyUCBStep(StepRule):
    """The per-round rule (the kernel's fast path jumps over rounds at which the argmax cannot
    change, drawing nothing there: the same actions and draws for a reward table).  The first
    reward of an arm is an epoch of one (``size`` starts at 1): the kernel's initial pull."""

    name = "anytime-lazy-ucb"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.eps = float(policy.params["epsilon"])
        self.state = dict(mu=np.zeros(K), O=np.ones(K), size=np.ones(K, np.int64),
                          buf=np.zeros(K), blen=np.zeros(K, np.int64), N=np.zeros(K, np.int64),
                          index=np.zeros(K))
        self._rel = policy.releases(K, K)[0]

    def release(self, rid):
        return self._rel

    def ready(self, a):
        return self.state["size"][a] > 1

    def select(self, box, t):
        s = self.state
        return _anytime_select(box, s["mu"], s["O"], self.eps, t, s["index"])

    def push(self, a, x):
        s = self.state
        due, start, stop = anytime_lazy_ucb.anytime_push(a, x, 1, s["buf"], s["blen"], s["N"],
                                                         s["size"])
        return [(a, 0, int(start), int(stop))] if due else None

    def commit(self, a, rid, noise):
        s = self.state
        anytime_lazy_ucb.anytime_commit(a, noise, s["mu"], s["O"], s["size"], s["buf"],
                                        s["blen"])


# ---- episodic rules: AdaP-UCB/KLUCB, DP-KLUCB/IMED ---------------------------------------------

class EpisodicStep(StepRule):
    """Rules that play one arm for a whole episode (phase) chosen at its first round and
    release the episode's statistic when it ends.

    Select side: an episode of arm a started with p pulls of a lasts ``length(p)`` pulls (the
    kernel's rule); the arm is played until they are issued.  Observe side: the episode ends,
    in the arm's observations, at the next boundary (1, then ``length``'s progression: the
    kernel's episode ends when every reward of it is in, whatever order they arrive in).  The
    index reads the released statistics only (released count ``Nrel``, which equals the pulls
    at an episode start when rewards come before the next round, as in the simulator).  An
    episode cut by the horizon makes no release (its boundary is never reached)."""

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.eps = float(policy.params["epsilon"])
        self.alpha = float(policy.params["alpha"])
        self.state = dict(cur=np.zeros(2, np.int64), S=np.zeros(K), cnt=np.zeros(K, np.int64),
                          start=np.zeros(K, np.int64), bound=np.ones(K, np.int64),
                          Nrel=np.zeros(K, np.int64), index=np.zeros(K), x=np.zeros(K))
        self.pulls = None                # the engine's pull counts (set by the engine)

    def ready(self, a):
        return self.state["Nrel"][a] > 0

    def select(self, box, t):
        cur = self.state["cur"]          # [arm, pulls left in its episode]
        if cur[1] > 0:
            cur[1] -= 1
            return int(cur[0])
        a = int(self.choose(box, t))
        p = int(self.pulls[a])
        cur[0], cur[1] = a, self.length(p) - 1
        return a

    def push(self, a, x):
        s = self.state
        s["S"][a] += x
        s["cnt"][a] += 1
        self.observed(a, x)
        if s["cnt"][a] == s["bound"][a]:
            return [(a, self.release_id(int(s["bound"][a] - s["start"][a])),
                     *self.release_range(a))]
        return None

    def observed(self, a, x):
        """Hook: a reward joined arm a's current episode."""

    def release_range(self, a):
        s = self.state
        return int(s["start"][a]), int(s["bound"][a])

    def commit(self, a, rid, noise):
        s = self.state
        n = int(s["bound"][a] - s["start"][a])
        self.apply(a, float(s["S"][a]), n, noise)
        s["Nrel"][a] = s["bound"][a]
        s["start"][a] = s["bound"][a]
        s["bound"][a] += self.length(int(s["bound"][a]))
        s["S"][a] = 0.0


@njit(cache=True)
def _adap_select(box, mu, n_last, eps, alpha, klucb, lt, index):
    return azize_basu.adap_select(box.rng, mu, n_last, eps, alpha, klucb, lt, index)


class DoublingStep(EpisodicStep):
    """Episodes that double the arm's count (p pulls → p more), release id log2 n: AdaP-*
    and AdaC-UCB."""

    def length(self, p):
        return max(p, 1)

    def release_id(self, n):
        return int(azize_basu.adap_release_id(n))


class AdaPStep(DoublingStep):
    """AdaP-UCB / AdaP-KLUCB: an episode doubles the arm's count (p pulls → p more); its mean
    is released with Lap(1/(ε·n)), release id log2 n."""

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.state.update(mu=np.zeros(K), n_last=np.ones(K))
        self.klucb = bool(policy.variant)

    def choose(self, box, t):
        s = self.state
        return _adap_select(box, s["mu"], s["n_last"], self.eps, self.alpha, self.klucb,
                            np.log(float(t)), s["index"])

    def release(self, rid):
        return azize_basu._episode_releases(self.eps, rid + 1)[rid]

    def apply(self, a, s, n, noise):
        st = self.state
        azize_basu.adap_commit(a, s, n, noise, st["mu"], st["n_last"])


class AdaPUCBStep(AdaPStep):
    name = "adap-ucb"


class AdaPKLUCBStep(AdaPStep):
    name = "adap-klucb"


@njit(cache=True)
def _adac_select(box, mu, n_last, ratio, alpha, lt, index):
    return adac.adac_select(box.rng, mu, n_last, ratio, alpha, lt, index)


@njit(cache=True)
def _adac_draw(box, bits, s_lat, sigma, total, n):
    """The released mean of an episode (:func:`~dpledger.policies.adac.adac_release`'s draw,
    the same operations on the same generator): total/n + N(0, σ²), or on the lattice."""
    if bits > 0:
        unit = 2.0 ** bits
        return lattice_gaussian(box.rng.bit_generator, total * unit, s_lat, n * unit)
    return total / n + box.rng.normal(0.0, sigma)


class AdaCUCBStep(DoublingStep):
    """AdaC-UCB (policies/adac.py): AdaP-UCB's episodes (an episode doubles the arm's count),
    the episode's mean released with N(0, (r/n)²), release id log2 n; the draw returns the
    released mean itself (the lattice form is computed from the integer sum)."""

    name = "adac-ucb"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.state.update(mu=np.zeros(K), n_last=np.ones(K))
        self.ratio = float(policy.ratio)

    def bind(self, engine):
        super().bind(engine)
        self.policy.bind_sampler(engine.bits)
        self.ratio = float(self.policy.ratio)
        self.s_lat = int(lattice_sigma(self.ratio, engine.bits)) if engine.bits else 1

    def choose(self, box, t):
        s = self.state
        return _adac_select(box, s["mu"], s["n_last"], self.ratio, self.alpha,
                            np.log(float(t)), s["index"])

    def release(self, rid):
        return self.policy.release(rid)

    def draw_due(self, engine, due):
        s = self.state
        for arm, rid, start, stop in due:
            value = _adac_draw(engine.box, engine.bits, self.s_lat, float(self.release(rid).sigma),
                               float(s["S"][arm]), float(stop - start))
            self.commit(arm, rid, value)

    def apply(self, a, s, n, value):
        st = self.state
        st["mu"][a] = value
        st["n_last"][a] = n


@njit(cache=True)
def _phase_select(box, priv, N, imed, eps, lt, x, val):
    return azize2025.phase_select(box.rng, priv, N, imed, eps, lt, x, val)


class PhaseStep(EpisodicStep):
    """DP-KLUCB / DP-IMED: a phase started at count n lasts until count max(n + 1, ⌈α·n⌉);
    its sum (or, renoise-cumulative, the whole cumulative sum) is released with Lap(1/ε)."""

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.state.update(priv=np.zeros(K), true_sum=np.zeros(K))
        self.imed = bool(policy.rule)
        self.renoise = bool(policy.renoise)
        self._rel = policy.releases(K, K)[0]

    def choose(self, box, t):
        s = self.state
        return _phase_select(box, s["priv"], s["Nrel"], self.imed, self.eps,
                             np.log(float(t)), s["x"], s["index"])

    def length(self, p):
        return int(azize2025.phase_target(p, self.alpha)) - p if p > 0 else 1

    def release_id(self, n):
        return 0

    def release(self, rid):
        return self._rel

    def observed(self, a, x):
        self.state["true_sum"][a] += x

    def release_range(self, a):
        s = self.state
        start, stop = azize2025.phase_range(int(s["start"][a]), int(s["bound"][a]),
                                            self.renoise)
        return int(start), int(stop)

    def apply(self, a, s, n, noise):
        st = self.state
        azize2025.phase_commit(a, s, noise, self.renoise, st["priv"], st["true_sum"])


class DPKLUCBStep(PhaseStep):
    name = "dp-klucb"


class DPIMEDStep(PhaseStep):
    name = "dp-imed"


# ---- tree policies: DP-UCB, DP-TS ---------------------------------------------------------------

@njit(cache=True)
def _dp_ucb_select(box, lt, sl, ca, cb, cc, idx):
    a, tie = mishra_thakurta.dp_ucb_argmax(lt, sl, ca, cb, cc, idx)
    return tie_break(idx, a, box.rng) if tie else a


@njit(cache=True)
def _binary_push_arm(bfs, bis, a, x):
    return binary_push(bfs[a], bis[a], x)


class DPUCBStep(StepRule):
    """DP-UCB: one T-bounded binary mechanism per arm; every reward closes one p-sum, released
    with Lap(levels/ε0) and recorded as one row over the p-sum's observations (the simulator
    keeps one tree record per arm; its nodes are these rows)."""

    name = "dp-ucb"
    anytime = False
    horizon_reason = "each arm's tree has ⌈log2(T + 1)⌉ levels"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        T = horizon
        fs0, is0 = binary_new(T, 0)
        self.gamma = float(policy.confidence_relaxation(T, K))
        self.experimental = policy.params["width"] == "experimental"
        self._rel = policy.releases(T, K)[0]
        self.state = dict(bfs=np.zeros((K, fs0.size)), bis=np.tile(is0, (K, 1)),
                          r=np.zeros(K), n=np.zeros(K), ca=np.zeros(K), cb=np.zeros(K),
                          cc=np.zeros(K), idx=np.zeros(K), value=np.zeros(K))

    def release(self, rid):
        return self._rel

    def ready(self, a):
        return self.state["n"][a] > 0

    def select(self, box, t):
        s = self.state
        lt = np.log(t)
        return _dp_ucb_select(box, lt, np.sqrt(lt), s["ca"], s["cb"], s["cc"], s["idx"])

    def push(self, a, x):
        s = self.state
        code, value, s0, s1 = _binary_push_arm(s["bfs"], s["bis"], a, x)
        s["value"][a] = value
        return [(a, 0, int(s0), int(s1))]

    def commit(self, a, rid, noise):
        s = self.state
        s["r"][a], s["n"][a], s["ca"][a], s["cb"][a], s["cc"][a] = \
            mishra_thakurta.dp_ucb_commit(s["bfs"][a], s["bis"][a], 0, s["value"][a] + noise,
                                          s["n"][a], self.gamma, self.experimental, _NO_TABLE)


@njit(cache=True)
def _dp_ts_select(box, eps, t, mu_tilde, O, theta, use_max):
    return hu_hegde.dp_ts_select(box.rng, eps, t, mu_tilde, O, theta, use_max)


@njit(cache=True)
def _dp_ts_joint_select(box, eps, t, mu_tilde, O, theta, blk):
    return hu_hegde.dp_ts_joint_select(box.rng, eps, t, mu_tilde, O, theta, blk)


class DPTSStep(StepRule):
    """DP-TS: per arm a modified logarithmic mechanism and, on the current epoch's buffer, a
    binary mechanism; every reward makes one release due (a log block, release id 0, or a
    p-sum of the buffer, release id r), one row each."""

    name = "dp-ts"
    added_state = frozenset({"blk"})         # as LazyDPTSStep

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.eps = float(policy.params["epsilon"])
        maxlev = 62                      # anytime: room for any epoch's buffer
        fs, ist = log_new(1, 0)
        self.state = dict(lfs=np.tile(fs, (K, 1)), lis=np.tile(ist, (K, 1)),
                          bfs=np.zeros((K, binary_state_size(maxlev + 1))),
                          bis=np.zeros((K, 4), np.int64), r=np.zeros(K, np.int64),
                          O=np.zeros(K), mu=np.zeros(K), theta=np.zeros(K),
                          kind=np.zeros(K, np.int64), value=np.zeros(K), blk=_joint_block())

    def release(self, rid):
        return LaplaceRelease(scale=2.0 * (rid + 1) / self.eps, sensitivity=1.0)

    def ready(self, a):
        return self.state["O"][a] > 0

    def select(self, box, t):
        s = self.state
        if self.policy.params["posterior_draw"] == "max-joint":
            return _dp_ts_joint_select(box, self.eps, t, s["mu"], s["O"], s["theta"], s["blk"])
        return _dp_ts_select(box, self.eps, t, s["mu"], s["O"], s["theta"],
                             self.policy.params["posterior_draw"] == "max")

    def push(self, a, x):
        s = self.state
        kind, value, start, stop = hu_hegde.dp_ts_push(a, x, s["O"], s["lfs"], s["lis"],
                                                        s["bfs"], s["bis"])
        s["kind"][a], s["value"][a] = kind, value
        return [(a, 0 if kind == 0 else int(s["r"][a]), int(start), int(stop))]

    def commit(self, a, rid, noise):
        s = self.state
        hu_hegde.dp_ts_commit(a, int(s["kind"][a]), s["value"][a], noise, s["O"], s["r"],
                              s["lfs"], s["lis"], s["bfs"], s["bis"], s["mu"])


# ---- non-private baselines: UCB1, KL-UCB, Beta TS, IMED ----------------------------------------

class NonPrivateStep(StepRule):
    """A non-private rule reads every reward as it is: each observation is recorded as a
    :class:`~dpledger.accounting.releases.NonPrivateRelease` over [n, n + 1) of its arm (the
    simulator records the same reads as one row per arm over [0, n)), and the reward joins
    the statistics only once that record is stored (``commit``), so a refused read leaves no
    trace.  No noise is drawn."""

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.state = dict(sums=np.zeros(K), n=np.zeros(K), index=np.zeros(K),
                          last_x=np.zeros(K), seen=np.zeros(K, np.int64))

    def release(self, rid):
        return NonPrivateRelease()

    def draw(self, engine, rid):
        return 0.0

    def ready(self, a):
        return self.state["n"][a] > 0

    def push(self, a, x):
        s = self.state
        s["last_x"][a] = x
        n = int(s["seen"][a])
        return [(a, 0, n, n + 1)]

    def commit(self, a, rid, noise):
        s = self.state
        s["seen"][a] += 1
        self.apply(a, float(s["last_x"][a]))


@njit(cache=True)
def _ucb1_select(box, t, sums, n, index):
    a, tie = baselines.ucb1_select(t, sums, n, index)
    return tie_break(index, a, box.rng) if tie else a


class UCB1Step(NonPrivateStep):
    name = "ucb1"

    def select(self, box, t):
        s = self.state
        return _ucb1_select(box, t, s["sums"], s["n"], s["index"])

    def apply(self, a, x):
        baselines.mean_push(a, x, self.state["sums"], self.state["n"])


@njit(cache=True)
def _klucb_select(box, t, fast, bound, p, n, index, ucache, until, leader):
    a, tie = baselines.klucb_select(t, fast, bound, p, n, index, ucache, until, leader)
    return tie_break(index, a, box.rng) if tie else a


class KLUCBStep(NonPrivateStep):
    name = "klucb"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.state.update(p=np.zeros(K), ucache=np.zeros(K), until=np.full(K, -1.0),
                          leader=np.zeros(1, np.int64))
        self.fast = bool(policy.params["threshold_test"])

    def select(self, box, t):
        s = self.state
        return _klucb_select(box, t, self.fast, self.fast, s["p"], s["n"], s["index"],
                             s["ucache"], s["until"], s["leader"])

    def apply(self, a, x):
        s = self.state
        baselines.klucb_push(a, x, s["sums"], s["n"], s["p"], s["until"], s["leader"])


@njit(cache=True)
def _beta_ts_select(box, s, f, theta, use_max):
    if use_max:                  # the kernel's posterior_draw="max" round, the same draws
        return beta_max.beta_max_select(box.rng, s + 1.0, f + 1.0, theta)
    return baselines.beta_ts_select(box.rng, s, f, theta)


@njit(cache=True)
def _beta_ts_joint_select(box, t, s, f, theta, blk):
    return beta_max.beta_joint_select(box.rng, t, s + 1.0, f + 1.0, theta, blk)


@njit(cache=True)
def _beta_ts_push(box, a, x, s, f):
    baselines.beta_ts_push(a, baselines.bernoulli_trick(box.rng, x), s, f)


class BetaTSStep(NonPrivateStep):
    name = "ts-beta"
    initial_pulls = False
    added_state = frozenset({"blk"})         # as LazyDPTSStep

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        # blk: max-joint's block (last round, τ, τ's leader; beta_max.beta_joint_select)
        self.state.update(s=np.zeros(K), f=np.zeros(K), blk=np.array([0.0, 0.0, -1.0]))

    def select(self, box, t):
        s = self.state
        if self.policy.params["posterior_draw"] == "max-joint":
            return _beta_ts_joint_select(box, t, s["s"], s["f"], s["index"], s["blk"])
        return _beta_ts_select(box, s["s"], s["f"], s["index"],
                               self.policy.params["posterior_draw"] == "max")

    def apply(self, a, x):
        _beta_ts_push(self.engine.box, a, x, self.state["s"], self.state["f"])


@njit(cache=True)
def _imed_select(box, p, n, val):
    a, tie = azize2025.imed_select(p, n, val)
    return tie_break(val, a, box.rng) if tie else a


class IMEDStep(NonPrivateStep):
    name = "imed"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.state.update(p=np.zeros(K))

    def select(self, box, t):
        s = self.state
        return _imed_select(box, s["p"], s["n"], s["index"])

    def apply(self, a, x):
        s = self.state
        azize2025.imed_push(a, x, s["sums"], s["n"], s["p"])


# ---- TS-Gaussian, M-TS-Gaussian (policies/ou.py): releases drawn at select -----------------------



@njit(cache=True)
def _mts_select(box, bits, unit, S, k, inv, sig, slat, live, theta, capture, t):
    return ou.mts_sweep(box.rng, bits, unit, S, k, inv, sig, slat, live, theta, capture, False,
                        False, t)[0]


@njit(cache=True)
def _mts_pull(a, x, c, bits, S, k, inv, sig, slat, tab):
    ou.mts_pull(a, x, S, k)
    ou.mts_scales(a, c, k, inv, sig)            # no tables in the step form
    if bits > 0:
        ou.mts_pull_lattice(a, c, bits, k, slat)


class MTSGaussianStep(StepRule):
    """M-TS-Gaussian (TS-Gaussian: b = 0): rounds 1 … bK play the pre-pulls in the policy's
    order (:func:`~dpledger.policies.ou.prepull_arm`); every later round draws one sample of
    every arm's posterior N(S/(k+1), c/(k+1)) — a read of the arm's k observed rewards (in
    arrival order) — so a selection records, before its draws, one row per arm with
    k ≥ 1 over observations [0, k), release id k (the posterior read of
    :func:`~dpledger.accounting.posterior_reads.posterior_read_release`; the simulator keeps the
    same reads as one posterior-read record per arm).  A read the budget refuses freezes its
    arm: it draws no more samples and is scored on its last one (a released value), and no
    later reward of it is read."""

    name = "mts-gaussian"
    initial_pulls = False
    select_releases = True

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.b, self.c = policy.b, policy.c
        self.blocks = policy.prepull == "arm-blocks"
        self.state = dict(S=np.zeros(K), k=np.zeros(K, np.int64), inv=np.ones(K),
                          sig=np.full(K, np.sqrt(self.c)), slat=np.ones(K, np.int64),
                          theta=np.zeros(K))

    def bind(self, engine):
        super().bind(engine)
        if engine.bits:              # s_k at k = 0, as the kernel starts
            self.state["slat"][:] = posterior_read_lattice_sigma(0.0, self.c, engine.bits)

    def release(self, rid):
        return posterior_read_release(rid, self.c)

    def recorded_release(self, rid, bits):
        return posterior_read_release(rid, self.c, bits)

    def select_due(self, t):
        if t <= self.b * self.K:
            return []
        k, live = self.state["k"], self.engine.live
        return [(j, int(k[j]), 0, int(k[j])) for j in range(self.K) if live[j] and k[j] >= 1]

    def select(self, box, t):
        if t <= self.b * self.K:
            return int(ou.prepull_arm(t, self.b, self.K, self.blocks))
        s, e = self.state, self.engine
        return _mts_select(box, e.bits, 2.0 ** e.bits, s["S"], s["k"], s["inv"], s["sig"],
                           s["slat"], e.live, s["theta"], _NO_CAPTURE, t)

    def push(self, a, x):
        s = self.state
        _mts_pull(a, x, self.c, self.engine.bits, s["S"], s["k"], s["inv"], s["sig"], s["slat"],
                  _NO_TABLE)
        return None


class TSGaussianStep(MTSGaussianStep):
    name = "ts-gaussian"


# ---- DP-TS-UCB (policies/hu2025.py): releases drawn at select ------------------------------------

@njit(cache=True)
def _ts_ucb_select(box, bits, unit, mu_hat, n, sig, slat, h, mx, live, theta, pending, start,
                   capture):
    return hu2025.ts_ucb_sweep(box.rng, bits, unit, mu_hat, n, sig, slat, h, mx, live, theta,
                               pending, start, capture, False)[0]


@njit(cache=True)
def _ts_ucb_observe(a, x, L, phi, bits, mu_hat, n, r, start, sig, slat, h, mx, buf_sum, buf_len,
                    obs):
    if n[a] == 0:
        hu2025.ts_ucb_first(a, x, L, phi, bits, mu_hat, n, r, start, sig, slat, h, mx, obs)
    elif hu2025.ts_ucb_push(a, x, r, buf_sum, buf_len, obs):
        hu2025.ts_ucb_new_model(a, L, phi, bits, mu_hat, n, r, start, sig, slat, h, mx, buf_sum,
                                buf_len, obs)


class DPTSUCBStep(StepRule):
    """DP-TS-UCB: an arm's first observed reward is its epoch-0 model, each later epoch of 2^r
    rewards replaces it; a selection draws one fresh sample of every model with budget left —
    one Gaussian release (id r) over the model's observations [start, start + 2^r) each,
    recorded before the draws (the simulator keeps one row per model with the count of its
    samples) — and reuses the running maximum of the others.  A sample the budget refuses
    freezes its arm on its running maximum (the policy's own rule once a budget φ is spent);
    no later reward of it is read."""

    name = "dp-ts-ucb"
    anytime = False
    horizon_reason = "its models' variance ln(T)^α and sampling budget φ depend on T"
    select_releases = True

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.L = hu2025.variance_scale(horizon, policy.params["alpha"])
        self.phi = policy.phi(horizon)
        self._rels = policy.releases(horizon, K)
        self.state = dict(mu_hat=np.zeros(K), sig=np.zeros(K), slat=np.ones(K, np.int64),
                          n=np.zeros(K, np.int64), r=np.zeros(K, np.int64),
                          start=np.zeros(K, np.int64), h=np.zeros(K, np.int64),
                          mx=np.full(K, -np.inf), buf_sum=np.zeros(K),
                          buf_len=np.zeros(K, np.int64), obs=np.zeros(K, np.int64),
                          pending=np.zeros(K, np.int64), theta=np.zeros(K))

    def release(self, rid):
        return self._rels[rid]

    def ready(self, a):
        return self.state["n"][a] > 0

    def select_due(self, t):
        s, live = self.state, self.engine.live
        return [(j, int(s["r"][j]), int(s["start"][j]), int(s["start"][j] + s["n"][j]))
                for j in range(self.K) if live[j] and s["h"][j] >= 1]

    def select(self, box, t):
        s, e = self.state, self.engine
        return _ts_ucb_select(box, e.bits, 2.0 ** e.bits, s["mu_hat"], s["n"], s["sig"],
                              s["slat"], s["h"], s["mx"], e.live, s["theta"], s["pending"],
                              s["start"], _NO_CAPTURE)

    def push(self, a, x):
        s = self.state
        _ts_ucb_observe(a, x, self.L, self.phi, self.engine.bits, s["mu_hat"], s["n"], s["r"],
                        s["start"], s["sig"], s["slat"], s["h"], s["mx"], s["buf_sum"],
                        s["buf_len"], s["obs"])
        return None


# ---- synchronised batches: DP-SE, private TS (DP-TS-MT) ------------------------------------------

class BatchStep(StepRule):
    """Rules whose releases come in synchronised batches: every arm of a set plays a fixed
    number of rounds, round robin in arm order, and when each has that many rewards the set's
    releases are drawn together, in arm order (the kernel's order).

    Select side: an arm of the set with the fewest pulls issued in the current batch, the
    lowest first (with rewards observed before the next select, as in the simulator: the
    kernel's round robin).  Observe side: a batch of n per arm covers an arm's first n
    observations after the batch started.  Late rewards (our choice): rounds selected while a
    batch waits for its last rewards go on round robin over the set; a reward arriving for an
    arm whose batch share is already in is not read (no release covers it: it costs utility,
    never privacy), and the next batch's pull counts start from zero when the batch is
    released.  A batch the budget refuses freezes its arms: their rewards are no longer read,
    so the batch never completes and play goes on round robin over the set — the last set
    chosen from released statistics."""

    initial_pulls = False

    def _round_robin(self, members):
        issued = self.state["issued"]
        a = min(members, key=lambda j: (issued[j], j))
        issued[a] += 1
        return a


@njit(cache=True)
def _dp_se_epoch(e, m, eps, beta):
    return dp_se.epoch_length(e, m, eps, beta)


@njit(cache=True)
def _dp_se_end(members, m, mu, alive, r_e, l8, l4, eps):
    return dp_se.dp_se_eliminate(members, m, mu, alive, r_e, l8, l4, eps)


class DPSEStep(BatchStep):
    """DP-SE: epoch e pulls every surviving arm n_e = ⌈R_e⌉ times and releases each arm's
    epoch sum with Lap(1/ε); the eliminations follow (:func:`~dpledger.policies.dp_se.
    dp_se_eliminate`); once one arm is left it is played to the end (see :class:`BatchStep`
    for late rewards).  An epoch the horizon cuts is never released (its rewards never
    complete it), as in the kernel.  β = 1/T by default: without ``beta`` the policy needs a
    horizon."""

    name = "dp-se"

    @classmethod
    def needs_horizon(cls, policy):
        return "its default β = 1/T; give beta=… to serve it without one" \
            if policy.params["beta"] is None else ""

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.eps = float(policy.params["epsilon"])
        self.beta = float(policy.params["beta"] if policy.params["beta"] is not None
                          else 1.0 / horizon)
        self._rel = policy.releases(horizon, K)[0]
        # ep: epoch e, survivors m, n_e, releases left to commit; fl: R_e, ln(8|S|e²/β),
        # ln(4|S|e²/β)
        self.state = dict(alive=np.ones(K, np.bool_), members=np.arange(K, dtype=np.int64),
                          ep=np.zeros(4, np.int64), fl=np.zeros(3), cnt=np.zeros(K, np.int64),
                          sums=np.zeros(K), start=np.zeros(K, np.int64),
                          seen=np.zeros(K, np.int64), mu=np.zeros(K),
                          issued=np.zeros(K, np.int64))
        self.state["ep"][1] = K
        self._next_epoch()

    def _next_epoch(self):
        s = self.state
        ep, fl = s["ep"], s["fl"]
        ep[0] += 1
        m = int(ep[1])
        k = 0
        for j in range(self.K):
            if s["alive"][j]:
                s["members"][k] = j
                k += 1
        r_e, l8, l4 = _dp_se_epoch(int(ep[0]), m, self.eps, self.beta)
        fl[:] = (r_e, l8, l4)
        ep[2] = int(math.ceil(r_e))
        s["cnt"][:] = 0
        s["sums"][:] = 0.0
        s["issued"][:] = 0
        s["start"][:] = s["seen"]

    def release(self, rid):
        return self._rel

    def select(self, box, t):
        s = self.state
        m = int(s["ep"][1])
        if m == 1:
            return int(s["members"][0])
        return self._round_robin([int(j) for j in s["members"][:m]])

    def push(self, a, x):
        s = self.state
        s["seen"][a] += 1
        m, n_e = int(s["ep"][1]), int(s["ep"][2])
        if m == 1 or not s["alive"][a] or s["cnt"][a] >= n_e:
            return None                      # the last arm, an eliminated one, or surplus
        s["sums"][a] += x
        s["cnt"][a] += 1
        members = [int(j) for j in s["members"][:m]]
        if any(s["cnt"][j] < n_e for j in members):
            return None
        s["ep"][3] = m
        return [(j, 0, int(s["start"][j]), int(s["start"][j]) + n_e) for j in members]

    def commit(self, a, rid, noise):
        s = self.state
        ep, fl = s["ep"], s["fl"]
        dp_se.dp_se_commit(a, s["sums"][a], noise, float(ep[2]), s["mu"])
        ep[3] -= 1
        if ep[3] == 0:                       # the epoch's last release: eliminate, go on
            ep[1] = _dp_se_end(s["members"], int(ep[1]), s["mu"], s["alive"], fl[0], fl[1],
                               fl[2], self.eps)
            k = 0
            for j in range(self.K):
                if s["alive"][j]:
                    s["members"][k] = j
                    k += 1
            if ep[1] > 1:
                self._next_epoch()


@njit(cache=True)
def _private_ts_select(box, rsum, n_tree, n_tot, tree_mode, theta):
    return mishra_thakurta.private_ts_select(box.rng, rsum, n_tree, n_tot, tree_mode, theta)


@njit(cache=True)
def _private_ts_commit(a, code, noisy, bfs, bis, rsum):
    mishra_thakurta.private_ts_commit(a, code, noisy, bfs, bis, rsum)


@njit(cache=True)
def _top_two_gap(mu):
    return mishra_thakurta._top_two_gap(mu)


@njit(cache=True)
def _psum_first_obs(s0, offset, P):
    return mishra_thakurta.psum_first_obs(s0, offset, P)


class PrivateTSStep(BatchStep):
    """Private Thompson sampling (Mishra & Thakurta 2015, Algorithm 2): gap-estimation batches
    of m_j pulls per arm, each arm's batch sum released with Lap(2K/ε) (release id 0) and
    Δ̂ halved until the top two private means differ by more than Δ̂; then P random pulls per
    arm, each arm's total inserted as its tree's first item; then Thompson sampling on the
    trees (one p-sum release per reward, one row each: the simulator keeps one tree record per
    arm plus a row for the random-pull item's first P − 1 observations).  Batches follow
    :class:`BatchStep` (late rewards); the horizon fixes m_j, P and the trees' bound T − τ,
    and a batch the horizon cuts is never released, as in the kernel."""

    name = "dp-ts-mt"
    anytime = False
    horizon_reason = ("its batch sizes m_j = ⌈192·K·ln T·4^j/ε⌉ and trees of T − τ leaves "
                      "depend on T")

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        T = horizon
        sch = policy.schedule(T, K)
        self.m = [int(m) for m in sch["m"]]
        self.exits = {x["e"]: x for x in sch["exits"]}
        self.levels = policy._tree_levels(T, K)
        self._rels = policy.releases(T, K)
        self.gap = bool(policy.params["gap_estimation"])
        self.tree_mode = policy.params["n_mode"] == "tree"
        self.T = T
        fs0, _ = binary_new(T, 0)
        # ph: phase (0 gap, 1 random pulls, 2 Thompson), gap iteration j, exit e, releases left
        self.state = dict(ph=np.zeros(4, np.int64), delta=np.ones(1), cnt=np.zeros(K, np.int64),
                          bsum=np.zeros(K), start=np.zeros(K, np.int64),
                          seen=np.zeros(K, np.int64), mu=np.zeros(K), n_tot=np.zeros(K),
                          n_tree=np.zeros(K), rsum=np.zeros(K), issued=np.zeros(K, np.int64),
                          bfs=np.zeros((K, fs0.size)), bis=np.zeros((K, 4), np.int64),
                          code=np.zeros(K, np.int64), value=np.zeros(K), theta=np.zeros(K))
        if not self.gap:
            self._exit(0)

    # the phases
    def _batch_size(self):
        ph = self.state["ph"]
        if ph[0] == 0:
            j = int(ph[1])
            return self.m[j] if j < len(self.m) else self.T + 1     # no batch fits any more
        return int(self.exits[int(ph[2])]["P"]) if ph[0] == 1 else 0

    def _exit(self, e):
        """Gap estimation ends after e iterations: the trees' bound T − τ_e, then the random
        pulls (or, with P = 0, the trees at once)."""
        s = self.state
        s["ph"][2] = e
        self._start_batch()
        x = self.exits.get(e)
        if x is None or x["L"] <= 0 or min(x["P"], self.T + 1) * self.K > x["L"]:
            s["ph"][0] = 1          # no tree item fits within T: round robin to the end
            s["ph"][2] = -1
            return
        self._new_trees(x)
        if self.P > 0:
            s["ph"][0] = 1
        else:
            for j in range(self.K):
                self._set_offset(j, int(s["seen"][j]))
            s["ph"][0] = 2

    # the trees (binary here; policies/step_rules_smooth.py overrides these five)
    def _new_trees(self, x):
        """Empty trees bounded by the exit ``x``'s T − τ leaves."""
        s = self.state
        fs0, is0 = binary_new(int(max(x["L"], 1)), 0)
        s["bfs"][:, :] = 0.0
        s["bis"][:, :] = is0

    def _set_offset(self, a, off):
        """Arm a's tree starts at observation ``off`` (its first item's index)."""
        self.state["bis"][a, 2] = off

    def _offset(self, a):
        return int(self.state["bis"][a, 2])

    def _tree_push(self, a, x):
        """Push ``x`` into arm a's tree: the range [s0, s1) of the node to release."""
        s = self.state
        code, value, s0, s1 = _binary_push_arm(s["bfs"], s["bis"], a, x)
        s["code"][a], s["value"][a] = code, value
        return int(s0), int(s1)

    def _tree_commit(self, a, noise):
        """The node pushed is released with ``noise``: arm a's noisy running sum."""
        s = self.state
        _private_ts_commit(a, int(s["code"][a]), s["value"][a] + noise, s["bfs"], s["bis"],
                           s["rsum"])

    @property
    def P(self) -> int:
        """The random pulls per arm of the exit taken (the tree's first item spans P)."""
        return min(int(self.exits[int(self.state["ph"][2])]["P"]), self.T + 1)

    @property
    def rid(self) -> int:
        """The release id of the trees' p-sums (by the exit's tree levels)."""
        return 1 + self.levels.index(self.exits[int(self.state["ph"][2])]["levels"])

    def _start_batch(self):
        s = self.state
        s["cnt"][:] = 0
        s["bsum"][:] = 0.0
        s["issued"][:] = 0
        s["start"][:] = s["seen"]

    def release(self, rid):
        return self._rels[rid]

    def select(self, box, t):
        s = self.state
        if s["ph"][0] == 2:
            return int(_private_ts_select(box, s["rsum"], s["n_tree"], s["n_tot"],
                                          self.tree_mode, s["theta"]))
        return self._round_robin(range(self.K))

    def push(self, a, x):
        s = self.state
        s["seen"][a] += 1
        ph = s["ph"]
        if ph[0] == 2:
            s["n_tot"][a] += 1.0
            s["n_tree"][a] += 1.0
            s0, s1 = self._tree_push(a, x)
            ph[3] = 1
            return [(a, self.rid, int(_psum_first_obs(s0, self._offset(a), self.P)), s1)]
        if ph[2] < 0:
            return None                      # nothing is released any more (see _exit)
        n = self._batch_size()
        if s["cnt"][a] >= n:
            return None                      # surplus of a batch share already in
        s["bsum"][a] += x
        s["cnt"][a] += 1
        if (s["cnt"] < n).any():
            return None
        s["n_tot"] += n
        ph[3] = self.K
        if ph[0] == 0:
            return [(j, 0, int(s["start"][j]), int(s["start"][j]) + n) for j in range(self.K)]
        due = []
        for j in range(self.K):              # each arm's total is its tree's first item
            self._set_offset(j, int(s["start"][j]) + n - 1)
            s0, s1 = self._tree_push(j, s["bsum"][j])
            due.append((j, self.rid, s0 - (self.P - 1), s1))
        return due

    def commit(self, a, rid, noise):
        s = self.state
        ph = s["ph"]
        ph[3] -= 1
        if ph[0] == 0:
            mishra_thakurta.gap_commit(a, s["bsum"][a], noise, float(self._batch_size()), s["mu"])
            if ph[3] == 0:                   # the batch's last release: halve Δ̂, exit or go on
                s["delta"][0] /= 2.0
                ph[1] += 1
                if _top_two_gap(s["mu"]) > s["delta"][0]:
                    self._exit(int(ph[1]))
                else:
                    self._start_batch()
            return
        self._tree_commit(a, noise)
        if ph[0] == 1:
            s["n_tree"][a] += self.P
            if ph[3] == 0:
                ph[0] = 2


RULES: dict[str, type[StepRule]] = {cls.name: cls for cls in (
    UCB1Step, KLUCBStep, BetaTSStep, IMEDStep, LazyDPTSStep, DPUCBStep, DPTSStep,
    AnytimeLazyUCBStep, AdaPUCBStep, AdaPKLUCBStep, AdaCUCBStep, DPKLUCBStep, DPIMEDStep,
    TSGaussianStep, MTSGaussianStep, DPTSUCBStep, DPSEStep, PrivateTSStep)}


def rule_for(policy) -> type[StepRule]:
    """The step rule of ``policy``, or a one-line refusal naming those that have one."""
    from dpledger.policies.step_rules_contextual import CONTEXTUAL_RULES
    from dpledger.policies.step_rules_episodes import EPISODE_RULES
    from dpledger.policies.step_rules_phased import PHASED_RULES
    cls = (getattr(policy, "step_rule", lambda: None)() or RULES.get(policy.name)
           or CONTEXTUAL_RULES.get(policy.name) or PHASED_RULES.get(policy.name)
           or EPISODE_RULES.get(policy.name))
    if cls is None:
        names = sorted(RULES) + sorted(CONTEXTUAL_RULES) + sorted(PHASED_RULES) \
            + sorted(EPISODE_RULES)
        raise DpledgerError(f"policy {policy.name!r} has no step form yet; step forms: "
                            f"{', '.join(names)}")
    return cls
