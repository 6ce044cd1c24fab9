"""The step rules of the adaptive-episode policies (``episode-linucb``, ``adac-oful``; issue 32
§2), wired for :mod:`dpledger.policies.step` from the same compiled functions as their
whole-run loop (:mod:`~dpledger.policies.contextual.episode_loop`).

``select(context=x)`` scores the released models (:func:`~dpledger.policies.contextual.
episode_loop.ep_select`, then the loop's tie-breaking pick); ``observe`` adds the record to its
open episode (:func:`~dpledger.policies.contextual.episode_loop.ep_push`, clean); when that
closes the episode, its one release — stream 0 under record privacy, the model's stream under
reward privacy, over the records [start, stop) the episode holds — is recorded, and only then
drawn and folded into the models (:func:`~dpledger.policies.contextual.episode_loop.
ep_release`).  With every reward observed before the next select this is the simulator's run
with no delay: the same actions, the same draws from the same generator, the same rows
(tests/test_episodes.py).  A refused release freezes its stream (the engine's rule): the models
stay on what was released.  Both are horizon-bound: ``episode-linucb``'s shift depends on T,
and the exact sampler's lattice sums are checked against the records T can deliver.
"""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.policies.contextual.episode_loop import (EP_JOINT, I_SEEN, I_START, ep_init,
                                                       ep_push, ep_release, ep_select,
                                                       E_BOUND, E_GROWTH, E_MEMORY)
from dpledger.policies.contextual.ridge import pick
from dpledger.policies.step_rules_contextual import ContextualStep


@njit(cache=True)
def _select(box, chol, theta, widths, ctx, shared, values, work):
    ep_select(chol, theta, widths, ctx, shared, values, work)
    return pick(values, box.rng)


@njit(cache=True)
def _release(box, kind, g, spec, acc, pre, ist, ld, chol, chol_cur, chol_ep, wmap, theta,
             widths, jstate, consts, units, A, scratch, capture, rows, nrow, b, W, work):
    return ep_release(kind, g, box.rng, spec, acc, pre, ist, ld, chol, chol_cur, chol_ep, wmap,
                      theta, widths, jstate, consts, units, A, scratch, capture, rows, nrow, b,
                      W, work)


class EpisodeStep(ContextualStep):
    """One open episode per statistic stream (module docstring)."""

    def __init__(self, policy, K, horizon, problem):
        super().__init__(policy, K, horizon, problem)
        self.plan = plan = policy.plan(problem)
        d, M = problem.dim, problem.n_streams
        s = policy.new_state(problem)
        s.update(jstate=np.zeros((M, 2), np.int64), nrow=np.zeros(1, np.int64),
                 info=np.zeros(1, np.int64))
        ep_init(plan.kind, s["chol"], s["chol_cur"], s["chol_ep"], s["theta"], s["widths"],
                s["ld"], s["consts"])
        self.state = s
        p = max(int(plan.spec[5]), 1)
        self._A, self._scratch = np.zeros((p, p)), np.zeros(plan.width)
        self._capture = np.zeros((0, plan.width + 1))
        self._rows = np.zeros((3, 0), np.int64)     # the engine records the rows
        self._values, self._b, self._W = np.zeros(K), np.zeros(d), np.zeros((d, d))
        self._work, self._vx = np.zeros(d), np.zeros(d + 1)

    def stream_of(self, a):
        return 0 if self.plan.kind == EP_JOINT else self.model_of(a)

    def release(self, rid):
        return self.plan.releases[rid]

    def recorded_release(self, rid, bits):
        return self.plan.releases[rid]          # the plan's release carries the sampler

    def select(self, box, t):
        s = self.state
        return _select(box, s["chol"], s["theta"], s["widths"], self.ctx, self.shared,
                       self._values, self._work)

    def push_record(self, a, x, r):
        s, plan = self.state, self.plan
        g = int(ep_push(plan.kind, self.model_of(a), np.ascontiguousarray(x, np.float64),
                        float(r), s["acc"], s["ist"], s["ld"], s["chol_cur"], s["chol_ep"],
                        s["wmap"], float(s["consts"][E_BOUND]), plan.units,
                        float(s["consts"][E_GROWTH]),
                        bool(s["consts"][E_MEMORY] > 0), self._vx, self._work))
        if g < 0:
            return []
        return [(g, 0, int(s["ist"][g, I_START]), int(s["ist"][g, I_SEEN]))]

    def draw_due(self, engine, due):
        s, plan = self.state, self.plan
        for g, _, _, _ in due:
            s["info"][0] += _release(engine.box, plan.kind, g, plan.spec, s["acc"], s["pre"],
                                     s["ist"], s["ld"], s["chol"], s["chol_cur"],
                                     s["chol_ep"], s["wmap"], s["theta"],
                                     s["widths"], s["jstate"], s["consts"], plan.units,
                                     self._A, self._scratch, self._capture, self._rows,
                                     s["nrow"], self._b, self._W, self._work)


class EpisodeLinUCBStep(EpisodeStep):
    name = "episode-linucb"
    anytime = False
    horizon_reason = "its shift after n episodes depends on T (ln 2T)"


class AdacOFULStep(EpisodeStep):
    name = "adac-oful"
    anytime = False
    horizon_reason = ("the exact sampler's lattice sums are checked against the records T "
                      "can deliver")


EPISODE_RULES = {cls.name: cls for cls in (EpisodeLinUCBStep, AdacOFULStep)}
