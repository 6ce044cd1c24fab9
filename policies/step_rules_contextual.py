"""The step rules of the linear contextual policies (issue 24 §1): LinUCB and linear TS
(:mod:`~dpledger.policies.contextual.linear`) and the private ones
(:mod:`~dpledger.policies.contextual.private`), wired for :mod:`dpledger.policies.step` from
the same compiled functions as the whole-run loops (:mod:`~dpledger.policies.contextual.loop`,
:mod:`~dpledger.policies.contextual.private_loop`, :mod:`~dpledger.mechanisms.matrix`).

``p = online("jdp-linucb", n_arms=K, horizon=T, dim=d, store=…, seed=…)``, then
``p.select(context=x)`` — x one vector of dimension d (one context per round: a model per arm)
or K of them (``shared=True``: one per arm, one shared θ) — and ``p.observe(ticket, reward)``:
the record (the played arm's context, the reward) goes to its model when the reward arrives.

**Streams.**  A record joins the ledger stream the simulator gives it: the played arm's (a
model per arm) or stream 0 (a shared θ; and under record privacy every record, in arrival
order: the tree runs over all records — :mod:`~dpledger.policies.contextual.private_loop`).
Observation n of a stream is the n-th of its records to reach ``observe``, as the contextual
simulator's delivered records; rewards observed before the next select are the simulator with
no delay, later ones a delay (the simulator's is a fixed D; here any).

**Releases.**  LinUCB and linear TS read every record as it is (a
:class:`~dpledger.accounting.releases.NonPrivateRelease` over [n, n + 1) of its stream,
recorded before the record joins the model; the simulator records the same reads as one row per
stream over [0, n)).  A private policy's record closes one node of its tree (the binary
mechanism over its statistic: :func:`~dpledger.mechanisms.matrix.tree_close`): one row per
release the node makes (the tree's ``record_rids``) over the records [t − 2^i, t) the node
sums, recorded before the node's noise is drawn (:func:`~dpledger.mechanisms.matrix.
tree_release`); the simulator keeps one tree record per stream, whose nodes these rows are.
Padded trees (Shariff & Sheffet 2018) draw their padding at the start, as the loop does before
its first round (data-free draws: no record).  A refused release freezes the stream: no later
record of it is read, and its model stays on what was released (the engine's rule).  The
private policies are horizon-bound: their trees have ⌈log2(T + 1)⌉ levels and their constants
depend on T.
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.accounting.releases import NonPrivateRelease
from dpledger.errors import DpledgerError
from dpledger.mechanisms import matrix as mx
from dpledger.mechanisms.matrix_smooth import (smooth_tree_close, smooth_tree_new,
                                               smooth_tree_release)
from dpledger.policies.contextual.base import ContextualProblem
from dpledger.policies.contextual.environments import checked_contexts
from dpledger.policies.contextual.loop import LINTS
from dpledger.policies.contextual.private_loop import (STAT_REWARD, clear_record, init_models,
                                                       private_select, stage_record)
from dpledger.policies.contextual.ridge import (linucb_scores, lints_scores, new_models, pick,
                                                ridge_observe)
from dpledger.policies.step_rules import StepRule


def step_problem(K: int, horizon: int | None, dim: int, shared: bool, norm_bound: float,
                 lo: float, hi: float, bits: int) -> ContextualProblem:
    """The public facts of a served contextual policy: as a simulated run's
    (:func:`~dpledger.policies.contextual.base.problem_of`) with no fixed delay (rewards
    arrive when they arrive) and the environment "online"."""
    return ContextualProblem(int(horizon or 0), int(K), int(dim), bool(shared),
                             float(norm_bound), float(lo), float(hi), 0, "online", int(bits))


class ContextualStep(StepRule):
    """Common part: the round's context (checked), the streams, the records."""

    contextual = True
    initial_pulls = False

    def __init__(self, policy, K, horizon, problem: ContextualProblem):
        super().__init__(policy, K, horizon)
        self.problem = problem
        self.dim, self.shared = problem.dim, problem.shared
        self.ctx = np.zeros((K if problem.shared else 1, problem.dim))
        self.clip = False          # online(clip_contexts=True): scale contexts down to L
        self.clipped = 0           # how many were

    def check_context(self, context) -> np.ndarray:
        """The round's contexts as a (Kc, d) array — Kc = K (shared θ) or 1 — refused with one
        line when of another shape, not finite, or above the norm bound."""
        if context is None:
            raise DpledgerError(f"policy {self.policy.name!r} is contextual: select(context=…) "
                                "needs the round's context")
        try:
            x = np.asarray(context, dtype=np.float64)
        except (TypeError, ValueError):
            raise DpledgerError(f"a context must be numbers, got {type(context).__name__}") \
                from None
        want = (self.K, self.dim) if self.shared else (self.dim,)
        if x.shape == (1, self.dim) and not self.shared:
            x = x[0]
        if x.shape != want:
            what = (f"{self.K} contexts of dimension {self.dim} (one per arm)" if self.shared
                    else f"one context of dimension {self.dim}")
            raise DpledgerError(f"select() takes {what}, got shape {x.shape}")
        x = x.reshape(-1, self.dim)
        got, n = checked_contexts(x[None] if self.shared else x, self.problem.norm_bound,
                                  self.clip, "select()", "round")
        self.clipped += n
        return got.reshape(-1, self.dim)

    def model_of(self, a: int) -> int:
        """The model arm a's records join: its own (one context per round) or the shared one."""
        return 0 if self.shared else a

    def stream_of(self, a):
        return self.model_of(a)

    def ready(self, a):
        return True


# ---- LinUCB, linear TS ---------------------------------------------------------------------------

@njit(cache=True)
def _ridge_select(box, rule, chol, theta, ctx, shared, width, values, work, work2):
    if rule == LINTS:
        lints_scores(chol, theta, ctx, shared, width, values, work, work2, box.rng)
    else:
        linucb_scores(chol, theta, ctx, shared, width, values, work)
    return pick(values, box.rng)


class RidgeStep(ContextualStep):
    """LinUCB / linear TS: the loop's scores and pick (:func:`~dpledger.policies.contextual.
    loop.run_ridge`); a record is read (recorded, then :func:`~dpledger.policies.contextual.
    ridge.ridge_observe`) when its reward arrives."""

    def __init__(self, policy, K, horizon, problem):
        super().__init__(policy, K, horizon, problem)
        d, M = problem.dim, problem.n_streams
        chol, bvec, theta = new_models(M, d, policy.params["lambda"])
        self.width = float(policy.params[policy.width_param])
        self.state = dict(chol=chol, bvec=bvec, theta=theta, seen=np.zeros(M, np.int64),
                          last_x=np.zeros((M, d)), last_r=np.zeros(M))
        self._values, self._work, self._work2 = np.zeros(K), np.zeros(d), np.zeros(d)

    def release(self, rid):
        return NonPrivateRelease()

    def recorded_release(self, rid, bits):
        return NonPrivateRelease()

    def select(self, box, t):
        s = self.state
        return _ridge_select(box, self.policy.rule, s["chol"], s["theta"], self.ctx,
                             self.shared, self.width, self._values, self._work, self._work2)

    def push_record(self, a, x, r):
        s, m = self.state, self.model_of(a)
        s["last_x"][m] = x
        s["last_r"][m] = r
        n = int(s["seen"][m])
        return [(m, 0, n, n + 1)]

    def draw_due(self, engine, due):
        s = self.state
        for m, _, _, _ in due:
            s["seen"][m] += 1
            ridge_observe(s["chol"], s["bvec"], s["theta"], m, s["last_x"][m],
                          s["last_r"][m], self._work, self._work2)


class LinUCBStep(RidgeStep):
    name = "linucb"


class LinTSStep(RidgeStep):
    name = "lints"


# ---- the private policies ------------------------------------------------------------------------

@njit(cache=True)
def _private_select(box, stat, rule, tr, ctx, shared, units, consts, chol, theta, widths,
                    jstate, cached, info, values, b, W, work, work2):
    private_select(box.rng, stat, rule, tr, ctx, shared, units, consts, chol, theta, widths,
                   jstate, cached, info, values, b, W, work, work2)
    return pick(values, box.rng)


@njit(cache=True)
def _stage_and_close(stat, tr, s, x, r, item, units, chol, vx, work):
    g = stage_record(stat, tr, s, x, r, item, units, chol, vx, work)
    level = mx.tree_close(tr, g, item)
    D = tr[1].shape[2]
    clear_record(stat, s, D if stat == STAT_REWARD else D // chol.shape[0], item)
    return g, level


@njit(cache=True)
def _tree_release(box, tr, g, level, spec, pad, A, capture):
    mx.tree_release(tr, g, level, box.rng, spec, pad, A, capture)


@njit(cache=True)
def _pad_all(box, tr, spec, A):
    for g in range(tr[0].shape[0]):
        mx.tree_pad_init(tr, g, box.rng, spec, A)


@njit(cache=True)
def _stage_and_close_smooth(stat, tr, st, s, x, r, item, units, chol, vx, work):
    g = stage_record(stat, tr, s, x, r, item, units, chol, vx, work)
    lo, hi = smooth_tree_close(st, g, item)
    D = tr[1].shape[2]
    clear_record(stat, s, D if stat == STAT_REWARD else D // chol.shape[0], item)
    return g, lo, hi


@njit(cache=True)
def _smooth_release(box, st, g, spec, A, capture):
    smooth_tree_release(st, g, box.rng, spec, A, capture)


_TREE_PARTS = ("clean", "h", "padn", "ist", "rec", "scratch")
_SMOOTH_PARTS = ("acc", "out", "noisy", "ist", "sist", "scratch", "sfs")


class PrivateRidgeStep(ContextualStep):
    """JDP-LinUCB, DP-LinUCB/DP-LinTS (Mishra & Thakurta), reward-DP-LinUCB: the loop's
    :func:`~dpledger.policies.contextual.private_loop.private_select` (models refreshed from
    their trees' noisy prefixes, then the scores), and per record
    :func:`~dpledger.policies.contextual.private_loop.stage_record` then the tree's node,
    recorded before its noise (module docstring)."""

    anytime = False
    horizon_reason = "its trees have ⌈log2(T + 1)⌉ levels and its constants depend on T"

    def __init__(self, policy, K, horizon, problem):
        super().__init__(policy, K, horizon, problem)
        self.plan = plan = policy.plan(problem)
        d, M = problem.dim, problem.n_streams
        # counter=smooth: the smooth tree takes the records; the binary tree is a one-level
        # stand-in of the statistic's width (as the whole-run loop, private.py)
        tr = mx.tree_new(plan.n_trees, 1 if plan.smooth else plan.levels, plan.blocks,
                         plan.entries, plan.record_rids)
        self.n_rec = tr[6]
        p = max(int(plan.spec[5]), 1)
        D = plan.blocks * plan.entries
        chol = np.zeros((M, d, d))
        init_models(plan.stat, chol, plan.lam)
        self.state = dict({f"tree_{k}": v for k, v in zip(_TREE_PARTS, tr[:6], strict=True)},
                          chol=chol, theta=np.zeros((M, d)), widths=np.zeros(M),
                          jstate=np.zeros((M, 2), np.int64), cached=np.full(M, -1, np.int64),
                          info=np.zeros(2, np.int64), level=np.zeros(plan.n_trees, np.int64))
        if plan.smooth:
            h, w, L = plan.smooth
            st = smooth_tree_new(h, w, max(L, 1), plan.blocks, plan.entries, plan.n_trees)
            self.state.update({f"stree_{k}": v for k, v in zip(_SMOOTH_PARTS, st, strict=True)})
        self._A = np.zeros((p, p))
        self._capture = np.zeros((0, D + 1))
        self._values, self._b = np.zeros(K), np.zeros(d)
        self._W, self._work, self._work2 = np.zeros((d, d)), np.zeros(d), np.zeros(d)
        self._vx, self._item = np.zeros(d + 1), np.zeros(D)

    @property
    def tree(self) -> tuple:
        """The tree state as :mod:`~dpledger.mechanisms.matrix` reads it (views of ``state``,
        so a checkpoint restored in place is the tree)."""
        return tuple(self.state[f"tree_{k}"] for k in _TREE_PARTS) + (self.n_rec,)

    @property
    def smooth_tree(self) -> tuple:
        """counter=smooth: the smooth tree state (:mod:`~dpledger.mechanisms.matrix_smooth`),
        views of ``state`` as :attr:`tree`."""
        return tuple(self.state[f"stree_{k}"] for k in _SMOOTH_PARTS)

    def start(self, box):
        if self.plan.pad and not self.plan.smooth:
            _pad_all(box, self.tree, self.plan.spec, self._A)

    def stream_of(self, a):
        return self.model_of(a) if self.plan.stat == STAT_REWARD else 0

    def release(self, rid):
        return self.plan.releases[rid]

    def recorded_release(self, rid, bits):
        return self.plan.releases[rid]          # the plan's releases carry the sampler

    def select(self, box, t):
        s, plan = self.state, self.plan
        tree = self.smooth_tree if plan.smooth else self.tree
        return _private_select(box, plan.stat, plan.rule, tree, self.ctx, self.shared,
                               plan.units, plan.consts, s["chol"], s["theta"], s["widths"],
                               s["jstate"], s["cached"], s["info"], self._values, self._b,
                               self._W, self._work, self._work2)

    def push_record(self, a, x, r):
        s, plan = self.state, self.plan
        if plan.smooth:     # one released node holding records: its exact range
            g, lo, hi = _stage_and_close_smooth(plan.stat, self.tree, self.smooth_tree,
                                                self.model_of(a), x, r, self._item, plan.units,
                                                s["chol"], self._vx, self._work)
            return [(int(g), int(rid), int(lo), int(hi)) for rid in plan.record_rids]
        g, level = _stage_and_close(plan.stat, self.tree, self.model_of(a), x, r, self._item,
                                    plan.units, s["chol"], self._vx, self._work)
        s["level"][g] = level
        stop = int(s["tree_ist"][g, 0])
        start = stop - (1 << int(level))
        return [(int(g), int(rid), start, stop) for rid in plan.record_rids]

    def draw_due(self, engine, due):
        if not due:
            return
        g = due[0][0]
        if self.plan.smooth:
            _smooth_release(engine.box, self.smooth_tree, g, self.plan.spec, self._A,
                            self._capture)
            return
        _tree_release(engine.box, self.tree, g, int(self.state["level"][g]), self.plan.spec,
                      self.plan.pad, self._A, self._capture)


class JdpLinUCBStep(PrivateRidgeStep):
    name = "jdp-linucb"


class DpLinUcbMTStep(PrivateRidgeStep):
    name = "dp-linucb-mt"


class DpLinTsMTStep(PrivateRidgeStep):
    name = "dp-lints-mt"


class RewardDpLinUCBStep(PrivateRidgeStep):
    name = "reward-dp-linucb"


CONTEXTUAL_RULES: dict[str, type[ContextualStep]] = {cls.name: cls for cls in (
    LinUCBStep, LinTSStep, JdpLinUCBStep, DpLinUcbMTStep, DpLinTsMTStep, RewardDpLinUCBStep)}
