"""Step form of the phased-elimination policies on a fixed arm set (AdaC-GOPE, Hanna et al.'s
central phased elimination: :mod:`~dpledger.policies.contextual.gope`), from the same functions
as the whole run (the plan, the draw, the elimination).

``p = online("adac-gope", n_arms=K, horizon=T, dim=d, shared=True, store=…, seed=…)``, then
``p.select(context=X)`` with X the K arm vectors — the same every round (a fixed arm set; round
1's are kept, a change is refused with one line) — and ``p.observe(ticket, reward)``.

Select: the current phase's support arms in arm order, each until its ⌈π(a)·n⌉ pulls are
issued (one arm left: that arm).  Observe: a reward joins its arm's phase sum; when every pull
of the phase has its reward, the phase's releases are due — one per support arm over its
observations of the phase, in arm order, recorded before their noise — then drawn, and the next
phase is planned from the released sums.  A select after every pull of the phase is issued but
before every reward is in is refused with one line (the next phase needs them; the simulator's
rewards arrive before the next round).  Horizon-bound: the phase confidence uses T.
"""
from __future__ import annotations

import numpy as np

from dpledger.errors import DpledgerError
from dpledger.mechanisms.noise import lattice_release
from dpledger.policies.contextual.gope import draw_release
from dpledger.policies.step_rules_contextual import ContextualStep


class PhasedStep(ContextualStep):
    """AdaC-GOPE / dp-gope-hanna in step form (module docstring)."""

    anytime = False
    horizon_reason = "each phase's confidence δ_ℓ = 1/(T·K·ℓ(ℓ+1)) uses T"

    def __init__(self, policy, K, horizon, problem):
        if not problem.shared:
            raise DpledgerError(f"policy {policy.name!r} plays a fixed arm set: serve it with "
                                "shared=True (select(context=…) takes the K arm vectors)")
        super().__init__(policy, K, horizon, problem)
        d = problem.dim
        self.state = dict(X=np.zeros((K, d)), have_x=np.zeros(1, np.int64),
                          active=np.ones(K, np.bool_), phase=np.ones(1, np.int64),
                          issued=np.zeros(K, np.int64), got=np.zeros(K, np.int64),
                          S=np.zeros(K), nobs=np.zeros(K, np.int64))
        self._plan = None
        bits = problem.lattice_bits
        self._rel = policy.release(bits)
        self._s_lat = policy.lattice_s(bits)
        self._recorded = lattice_release(self._rel, bits) if bits else self._rel

    def release(self, rid):
        return self._rel

    def recorded_release(self, rid, bits):
        return self._recorded

    def stream_of(self, a):
        return a

    def plan(self):
        """The current phase's plan (recomputed from the state: a restart restores it)."""
        s = self.state
        key = (int(s["phase"][0]), s["active"].tobytes())
        if self._plan is None or self._plan[0] != key:
            active = np.flatnonzero(s["active"])
            idx = int(s["phase"][0])
            ph = (self.policy.first_phase(s["X"], self.horizon) if idx == 1 else
                  self.policy.plan_phase(s["X"], active, idx, self.horizon))
            # the schedule: arm → pulls of this phase
            self._plan = (key, ph, {int(ph.active[i]): int(ph.counts[i]) for i in ph.order()})
        return self._plan[1], self._plan[2]

    def select(self, box, t):
        s = self.state
        if not s["have_x"][0]:
            s["X"][...] = self.ctx
            s["have_x"][0] = 1
        elif not np.array_equal(self.ctx, s["X"]):
            raise DpledgerError(f"policy {self.policy.name!r} plays a fixed arm set: round "
                                f"{t}'s contexts differ from round 1's")
        active = np.flatnonzero(s["active"])
        if active.size == 1:
            return int(active[0])
        _, want = self.plan()
        for a, m in want.items():
            if s["issued"][a] < m:
                s["issued"][a] += 1
                return a
        missing = sum(m - int(s["got"][a]) for a, m in want.items())
        raise DpledgerError(f"policy {self.policy.name!r}: phase {int(s['phase'][0])} waits for "
                            f"{missing} more rewards before round {t} can be chosen")

    def push_record(self, a, x, r):
        s = self.state
        if s["active"].sum() == 1:
            return None                       # the last arm: no more releases
        ph, want = self.plan()
        bits = self.problem.lattice_bits
        s["S"][a] += float(np.rint(r * 2.0 ** bits) * 2.0 ** -bits) if bits else r
        s["got"][a] += 1
        if any(int(s["got"][b]) < m for b, m in want.items()):
            return None
        return [(b, 0, int(s["nobs"][b]), int(s["nobs"][b]) + m) for b, m in want.items()]

    def draw_due(self, engine, due):
        s = self.state
        ph, want = self.plan()
        bits = self.problem.lattice_bits
        noisy = np.array([draw_release(engine.rng, self._rel, float(s["S"][b]), bits,
                                       self._s_lat) for b, _, _, _ in due])
        keep = self.policy.eliminate(ph, noisy)
        for b, m in want.items():
            s["nobs"][b] += m
        s["active"][:] = False
        s["active"][keep] = True
        s["phase"][0] += 1
        s["issued"][:] = 0
        s["got"][:] = 0
        s["S"][:] = 0.0


class AdaCGOPEStep(PhasedStep):
    name = "adac-gope"


class HannaDPGOPEStep(PhasedStep):
    name = "dp-gope-hanna"


PHASED_RULES: dict[str, type[PhasedStep]] = {cls.name: cls for cls in (AdaCGOPEStep,
                                                                      HannaDPGOPEStep)}
