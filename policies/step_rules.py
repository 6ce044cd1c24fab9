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
* ``ready(a)``: arm a has a released statistic (the engine plays arms without one first).

What a refused release leaves behind is the engine's rule for every policy (the arm is frozen on
what it has released; :mod:`~dpledger.policies.step`).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from dpledger.errors import DpledgerError
from dpledger.accounting.releases import NonPrivateRelease
from dpledger.accounting.releases import LaplaceRelease
from dpledger.mechanisms.counters import binary_new, binary_push, binary_state_size, log_new
from dpledger.policies import (anytime_lazy_ucb, azize2025, azize_basu, baselines, hu_hegde,
                               mishra_thakurta)
from dpledger.policies.step import laplace_step


class StepRule:
    """Base of the step rules (see the module docstring)."""

    name: ClassVar[str]
    anytime: ClassVar[bool] = True            # needs no horizon
    horizon_reason: ClassVar[str] = ""
    initial_pulls: ClassVar[bool] = True      # rounds 1 … K play arm t − 1

    def __init__(self, policy, K: int, horizon: int | None):
        self.policy, self.K, self.horizon = policy, K, horizon
        self.state: dict[str, np.ndarray] = {}

    def release(self, rid: int):
        raise NotImplementedError

    def draw(self, engine, rid: int) -> float:
        """Laplace noise of release ``rid`` (float, or lattice with the exact sampler)."""
        rel = self.release(rid)
        return laplace_step(engine.box, engine.env, float(rel.scale), float(rel.sensitivity))


# ---- Lazy-DP-TS (policies/hu_hegde.py) --------------------------------------------------------

@njit(cache=True)
def _lazy_select(box, eps, t, mu_tilde, O, theta):
    return hu_hegde.lazy_select(box.rng, eps, t, mu_tilde, O, theta)


class LazyDPTSStep(StepRule):
    name = "lazy-dp-ts"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.eps = float(policy.params["epsilon"])
        self.state = dict(mu=np.zeros(K), O=np.zeros(K), r=np.zeros(K, np.int64),
                          buf_sum=np.zeros(K), buf_len=np.zeros(K, np.int64),
                          n_obs=np.zeros(K, np.int64), theta=np.zeros(K))
        self._rel = policy.releases(K, K)[0]

    def release(self, rid):
        return self._rel

    def ready(self, a):
        return self.state["O"][a] > 0

    def select(self, box, t):
        s = self.state
        return _lazy_select(box, self.eps, t, s["mu"], s["O"], s["theta"])

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


class AdaPStep(EpisodicStep):
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

    def length(self, p):
        return max(p, 1)

    def release_id(self, n):
        return int(azize_basu.adap_release_id(n))

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
    return mishra_thakurta.dp_ucb_select(box.rng, lt, sl, ca, cb, cc, idx)


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
        root = mishra_thakurta.dp_ucb_root(s["n"][a] + 1.0)
        mishra_thakurta.dp_ucb_commit(a, 0, s["value"][a], noise, s["bfs"], s["bis"], s["r"],
                                      s["n"], s["ca"], s["cb"], s["cc"], self.gamma,
                                      self.experimental, root)


@njit(cache=True)
def _dp_ts_select(box, eps, t, mu_tilde, O, theta):
    return hu_hegde.dp_ts_select(box.rng, eps, t, mu_tilde, O, theta)


class DPTSStep(StepRule):
    """DP-TS: per arm a modified logarithmic mechanism and, on the current epoch's buffer, a
    binary mechanism; every reward makes one release due (a log block, release id 0, or a
    p-sum of the buffer, release id r), one row each."""

    name = "dp-ts"

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.eps = float(policy.params["epsilon"])
        maxlev = 62                      # anytime: room for any epoch's buffer
        fs, ist = log_new(1, 0)
        self.state = dict(lfs=np.tile(fs, (K, 1)), lis=np.tile(ist, (K, 1)),
                          bfs=np.zeros((K, binary_state_size(maxlev + 1))),
                          bis=np.zeros((K, 4), np.int64), r=np.zeros(K, np.int64),
                          O=np.zeros(K), mu=np.zeros(K), theta=np.zeros(K),
                          kind=np.zeros(K, np.int64), value=np.zeros(K))

    def release(self, rid):
        return LaplaceRelease(scale=2.0 * (rid + 1) / self.eps, sensitivity=1.0)

    def ready(self, a):
        return self.state["O"][a] > 0

    def select(self, box, t):
        s = self.state
        return _dp_ts_select(box, self.eps, t, s["mu"], s["O"], s["theta"])

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
    return baselines.ucb1_select(box.rng, t, sums, n, index)


class UCB1Step(NonPrivateStep):
    name = "ucb1"

    def select(self, box, t):
        s = self.state
        return _ucb1_select(box, t, s["sums"], s["n"], s["index"])

    def apply(self, a, x):
        baselines.mean_push(a, x, self.state["sums"], self.state["n"])


@njit(cache=True)
def _klucb_select(box, t, fast, bound, p, n, index, ucache, until, leader):
    return baselines.klucb_select(box.rng, t, fast, bound, p, n, index, ucache, until, leader)


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
def _beta_ts_select(box, s, f, theta):
    return baselines.beta_ts_select(box.rng, s, f, theta)


@njit(cache=True)
def _beta_ts_push(box, a, x, s, f):
    baselines.beta_ts_push(box.rng, a, x, s, f)


class BetaTSStep(NonPrivateStep):
    name = "ts-beta"
    initial_pulls = False

    def __init__(self, policy, K, horizon):
        super().__init__(policy, K, horizon)
        self.state.update(s=np.zeros(K), f=np.zeros(K))

    def select(self, box, t):
        s = self.state
        return _beta_ts_select(box, s["s"], s["f"], s["index"])

    def apply(self, a, x):
        _beta_ts_push(self.engine.box, a, x, self.state["s"], self.state["f"])


@njit(cache=True)
def _imed_select(box, p, n, val):
    return azize2025.imed_select(box.rng, p, n, val)


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


RULES: dict[str, type[StepRule]] = {cls.name: cls for cls in (
    UCB1Step, KLUCBStep, BetaTSStep, IMEDStep, LazyDPTSStep, DPUCBStep, DPTSStep, AnytimeLazyUCBStep, AdaPUCBStep, AdaPKLUCBStep, DPKLUCBStep, DPIMEDStep)}


def rule_for(policy) -> type[StepRule]:
    """The step rule of ``policy``, or a one-line refusal naming those that have one."""
    cls = RULES.get(policy.name)
    if cls is None:
        raise DpledgerError(f"policy {policy.name!r} has no step form yet; step forms: "
                            f"{', '.join(sorted(RULES))}")
    return cls
