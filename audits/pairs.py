"""Neighbouring reward streams for audits (docs/design.md#privacy-model, docs/design.md#audits).

Two streams are neighbours when their reward tables differ in exactly one row.  An audit runs the
policy on a fixed table D and on D′ (the auditor controls the environment, so the only randomness is
the policy's).

**Default pair.**  Row t* — the witness round of the certificate's worst candidate, where the
per-reward composition is attained — goes from the range's low end in D to its high end in D′ *for
every arm* (legal: neighbours differ in one row, and only the reward of the arm played at t* is ever
observed).  The other rows come from the policy's **adversarial table**, chosen to make the changed
reward matter:

``lazy-dp-ts``, ``adap-klucb`` (black-box): all rewards at the low end, witness at round ⌈0.3·T⌉ in a late,
    unclipped epoch of whichever arm is played there (:func:`lazy_epoch_design`).
White-box designs (:data:`WHITEBOX_DESIGNS`): DP-TS at round K + 1, DP-UCB with a good
    witness arm; Lazy-DP-TS and AdaP-KLUCB keep the generic table (their captured release is
    round 1's); TS-Gaussian / M-TS-Gaussian, DP-TS-UCB and private TS keep the witness arm from
    the argmax (or, private TS without gap estimation, make it good) so that the trajectory
    attains the certificate's worst candidate (see each design's docstring).
``generic`` (adap-ucb, anytime-lazy-ucb, the white-box dp-ts-mt with gap estimation, and any
    policy without its own entry; dp-ts's black-box design is this table plus its limit reason):
    the witness arm is bad (every reward at the low end), every other arm good
    (high end).  The changed reward is the witness arm's first observation; whether and when the
    witness arm is pulled again depends on its noisy released mean, and the arm stays rarely
    pulled, so that release keeps steering decisions for as long as possible.
``dp-se``: successive elimination (Sajed & Sheffet).  Epoch 1 pulls every arm n₁ = ⌈R₁⌉ times
    and eliminates arm a when μ̃₀ − μ̃_a > 2h₁ + 2c₁.  The witness arm 0 gets epoch-1 rewards whose
    clean sum sits ``offset`` (default 0.95) below n₁·(2h₁ + 2c₁) in D, the other arms 0, so the
    changed reward carries arm 0's clean lead across the elimination threshold: without noise D
    never eliminates and D′ always does, and with noise the elimination event is a one-shot decision
    on L₀ − L_a.  Needs K·n₁ ≤ T for the epoch to complete (T = 3000 at ε = 1, β = 1/T, K = 2); the
    black-box score needs the rounds up to K·n₁ + 2K.
``dp-ts-mt`` (black-box): the same straddle on the exit of private TS's first gap-estimation
    test (:func:`private_ts_gap_design`; T = 1e4 and an integer ``random_pulls``).
``dp-ucb`` (black-box): the witness arm good, the others bad (:func:`tree_blackbox_design`).

Where a policy's actions provably reveal less than its releases, the design's
``limit_reason`` (in the pair's JSON) says why, with numbers: DP-TS (the clipped Beta means,
:func:`dp_ts_clipping_bound`), DP-UCB (one masked p-sum per decision), DP-TS-MT with the
printed random pulls (round-robin throughout), DP-SE (one difference-of-Laplace event).

``dp-klucb`` (black-box): every reward at the low end, witness at ⌈0.3·T⌉ in a late phase of
    the arm played there (:func:`dp_klucb_phase_design`); ``dp-imed`` keeps the generic pair
    (measured better for it).  White-box, both: the witness arm good, so the re-noising variant
    re-releases the witness at every phase end (:func:`azize_whitebox_design`).

Users can pass their own pair: two tables that differ in exactly one row
(:meth:`NeighbourPair.from_tables`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from dpledger.errors import DpledgerError, check_positive


@dataclass(frozen=True)
class NeighbourPair:
    """Two reward tables (T, K) that differ in exactly one row, ``round`` (1-based)."""

    table0: np.ndarray = field(compare=False)      # D
    table1: np.ndarray = field(compare=False)      # D′
    lo: float
    hi: float
    round: int
    arm: int | None = None                         # the witness arm, when known (−1: the arm
                                                   # played at the witness round)
    design: str = "custom"
    description: str = ""
    stop_hint: int | None = None                   # last round a black-box score needs
    notes: tuple[str, ...] = ()
    limit_reason: str = ""                         # why the actions reveal less than the
                                                   # releases (black-box designs), with numbers

    @classmethod
    def from_tables(cls, table0, table1, lo: float = 0.0, hi: float = 1.0, *, arm: int | None = None,
                    description: str = "user-supplied pair", design: str = "custom",
                    stop_hint: int | None = None, notes: tuple[str, ...] = (),
                    limit_reason: str = "") -> "NeighbourPair":
        from dpledger.policies.environments import table as make_table
        e0 = make_table(table0, lo, hi)          # validates shape, finiteness and range
        e1 = make_table(table1, lo, hi)
        t0, t1 = e0.table, e1.table
        if t0.shape != t1.shape:
            raise DpledgerError(f"the two tables must have the same shape, got {t0.shape} and {t1.shape}")
        rows = np.flatnonzero(np.any(t0 != t1, axis=1))
        if rows.size != 1:
            raise DpledgerError(f"neighbouring tables differ in exactly one row; these differ in "
                                f"{rows.size} rows" + (f" (first {[int(r) + 1 for r in rows[:5]]})"
                                                      if rows.size else ""))
        return cls(t0, t1, float(lo), float(hi), int(rows[0]) + 1, arm, design, description,
                   stop_hint, tuple(notes), str(limit_reason))

    @property
    def horizon(self) -> int:
        return int(self.table0.shape[0])

    @property
    def n_arms(self) -> int:
        return int(self.table0.shape[1])

    def envs(self):
        from dpledger.policies.environments import table as make_table
        return make_table(self.table0, self.lo, self.hi), make_table(self.table1, self.lo, self.hi)

    def to_json(self) -> dict:
        r0 = self.table0[self.round - 1]
        r1 = self.table1[self.round - 1]
        changed = np.flatnonzero(r0 != r1)
        out = {"round": self.round, "from": _row_value(r0), "to": _row_value(r1),
               "arms_changed": [int(a) for a in changed],
               "witness_arm": self.arm, "design": self.design, "description": self.description,
               "horizon": self.horizon, "arms": self.n_arms,
               "table_sha256": [_sha(self.table0), _sha(self.table1)],
               "notes": list(self.notes)}
        if self.limit_reason:
            out["limit_reason"] = self.limit_reason
        return out


def _row_value(row: np.ndarray):
    """One number when every arm has the same value in the row, else the list."""
    vals = [float(v) for v in row]
    return vals[0] if all(v == vals[0] for v in vals) else vals


def _sha(t: np.ndarray) -> str:
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(t, dtype=np.float64).tobytes()).hexdigest()


# ---- the certificate's witness ---------------------------------------------------------------

def worst_candidate(certificate):
    """The candidate attaining the certificate (largest pure ε, then largest GDP μ²)."""
    if certificate.unbounded or not certificate.candidates:
        return None
    return max(certificate.candidates,
               key=lambda c: (c.composition.pure_epsilon(), c.composition.gdp_mu2()))


def witness(certificate) -> tuple[int, int, object, tuple[str, ...]]:
    """(round t*, arm, candidate, notes): the worst candidate's witness round when it names one;
    else the worst candidate that names one (the audit then targets that weaker candidate, and a
    note says so); round 1, arm 0 when no candidate names a round (e.g. unbounded certificates)."""
    top = worst_candidate(certificate)
    if top is None:
        return 1, 0, None, ("no bounded certificate: round 1, arm 0 audited",)
    if top.witness.round is not None:
        return int(top.witness.round), int(top.witness.arm), top, ()
    ranked = sorted(certificate.candidates, key=lambda c: (c.composition.pure_epsilon(),
                                                           c.composition.gdp_mu2()), reverse=True)
    for c in ranked:
        if c.witness.round is not None:
            note = (f"the worst candidate's witness (arm {top.witness.arm}, observation "
                    f"{top.witness.index}) has a trajectory-dependent round; audited the worst "
                    f"candidate with a fixed round (round {c.witness.round}, arm {c.witness.arm})",)
            return int(c.witness.round), int(c.witness.arm), c, note
    return 1, 0, top, ("no candidate names its round: round 1 audited",)


# ---- adversarial tables ----------------------------------------------------------------------

@dataclass(frozen=True)
class Design:
    table: np.ndarray          # D's table on [0, 1] (rescaled to [lo, hi] by the caller)
    description: str
    stop_hint: int | None = None
    notes: tuple[str, ...] = ()
    round: int | None = None       # overrides the witness round t* (the design says why)
    played_arm: bool = False       # the witness arm is whichever arm is played at t* (arm −1)
    limit_reason: str = ""         # where the actions provably reveal less than the releases


def generic_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    tab = np.ones((T, K))
    tab[:, arm] = 0.0
    return Design(tab, f"arm {arm} (witness) bad: every reward at the low end; the other arms "
                       "good: every reward at the high end")


def laplace_difference_tail(u: float) -> float:
    """P(L₀ − L₁ > u) for independent L₀, L₁ ~ Lap(1): e^{−u}(2 + u)/4 for u ≥ 0 (the density
    of the difference is (1 + |z|)e^{−|z|}/4), 1 − e^{u}(2 − u)/4 for u < 0."""
    if u >= 0:
        return math.exp(-u) * (2.0 + u) / 4.0
    return 1.0 - math.exp(u) * (2.0 - u) / 4.0


def _witness_arm_table(T: int, K: int, arm: int, value: float,
                       others: float = 0.0) -> np.ndarray:
    """A (T, K) reward table: every reward of ``arm`` at ``value``, every other at ``others``."""
    tab = np.full((T, K), float(others))
    tab[:, arm] = value
    return tab


# DP-SE's default straddle (offset): just under one range, so that a policy drawing no noise is
# still caught (D never eliminates, D′ always does), as far from the threshold as that allows
# (the black-box bound grows with the offset: notes below).  0.95 leaves 0.05 of slack for the
# exact sampler's lattice rounding (≤ 2^-17 per reward, n₁ ≈ 1500 rewards: ≤ 0.012).
DP_SE_OFFSET = 0.95


def dp_se_design(policy, T: int, K: int, t_star: int, arm: int, offset: float = DP_SE_OFFSET,
                 **_) -> Design:
    """DP-SE (Sajed & Sheffet 2019), black-box: the elimination test of epoch 1.

    Arm 0 (the witness arm) gets epoch-1 rewards whose clean sum is n₁·(2h₁ + 2c₁) − ``offset``
    in D (one more in D′), every other arm 0.  With K = 2 the actions after epoch 1 reveal the
    event E = {arm 1 eliminated} = {L₁ − L₀ < −offset} in D and {… < 1 − offset} in D′ (L the
    two Lap(1/ε) epoch-sum noises; arm 0's own elimination is n₁·(4h₁ + 4c₁) away), so with
    u = ε·offset, P_D(E) = P(Z > u) and P_D′(E) = P(Z > u − ε) for Z the difference of two
    Lap(1) (:func:`laplace_difference_tail`); later epochs use fresh rewards and fresh noise and
    carry no information about the witness.  With P(Z > u) = (2 + u)e^{−u}/4 for u ≥ 0,
    ln P_D′(E)/P_D(E) = ε + ln((2 + u − ε)/(2 + u)) for u ≥ ε: it tends to ε only as u → ∞,
    where E becomes rare — the audit's bound is limited by the trial count, not by the policy.
    Offset 0.95 (default; a noise-free policy still acts differently on D and D′), at ε = 1:
    event log-ratio 0.586, expected bound ≈ 0.57 at 1e5 trials per side; offset ≈ 4.3 gives
    ε_E = 0.85 and ≈ 0.75 at 1e5, ≈ 5.8 gives ≈ 0.82 at 1e6 (all at ε = 1), but a policy
    drawing no noise then acts alike on D and D′.  Every reward lies in one
    epoch sum released once with Lap(1/ε), so the witness attains the certificate (ε).  Needs
    K·n₁ ≤ T (T = 3000 at ε = 1, β = 1/T, K = 2); the score reads the rounds up to K·n₁ + 2K."""
    from dpledger.policies.dp_se import epoch_length
    p = policy.resolved_params(T, K)
    eps, beta_ = float(p["epsilon"]), float(p["beta"])
    r1, l8, l4 = epoch_length(1, K, eps, beta_)
    n1 = int(math.ceil(r1))
    thr = 2.0 * math.sqrt(l8 / (2.0 * r1)) + 2.0 * l4 / (r1 * eps)
    notes = []
    if K * n1 > T:
        notes.append(f"epoch 1 needs K·n1 = {K * n1} rounds > T = {T}: DP-SE makes no release and "
                     "plays round-robin, so its actions do not depend on the rewards")
    offset = check_positive("offset", offset)
    target = n1 * thr - offset           # arm 0's clean epoch-1 sum in D (D′: + 1)
    v = target / (n1 - 1)
    if not 0.0 <= v <= 1.0:
        raise DpledgerError(f"dp-se adversarial table: offset {offset!r} puts the per-reward "
                            f"value {v} outside [0, 1]")
    if offset >= 1.0:
        notes.append(f"offset {offset:g} >= 1: without noise neither D nor D′ eliminates, so a "
                     "policy that draws no noise acts alike on both (the default offset "
                     f"{DP_SE_OFFSET} keeps that case visible)")
    tab = _witness_arm_table(T, K, arm, v)
    tab[t_star - 1, arm] = 0.0
    stop = min(T, K * n1 + 2 * K)
    u = eps * offset
    ratio = math.log(laplace_difference_tail(u - eps) / laplace_difference_tail(u))
    return Design(tab, f"arm {arm}: epoch-1 rewards {v:.6g} (clean sum n1·(2h1 + 2c1) − {offset:g} "
                       f"in D, {1 - offset:+g} in D′; n1 = {n1}, threshold {thr:.6g} per reward); "
                       "other arms 0.  The actions reveal one event, arm 1's elimination after "
                       f"epoch 1: P = {laplace_difference_tail(u):.4g} on D, "
                       f"{laplace_difference_tail(u - eps):.4g} on D′ (difference of two "
                       f"Lap(1/ε) noises), log-ratio {ratio:.4f}.  The witness (round {t_star}, "
                       "arm 0) lies in arm 0's epoch-1 sum, released once with Lap(1/ε): it "
                       "attains the certificate (ε)",
                  stop_hint=stop, notes=tuple(notes),
                  limit_reason=f"the actions reveal only the elimination event of epoch 1, a "
                               f"threshold on the difference Z of two Lap(1/ε) noises: its "
                               f"log-ratio ln P(Z > u − ε)/P(Z > u) is {ratio:.4f} at u = "
                               f"ε·offset = {u:g} and ε + ln((2 + u − ε)/(2 + u)) for u ≥ ε, "
                               "reaching ε only where the event gets rare (at ε = 1, offset "
                               "≈ 4.3 gives the best expected bound at 1e5 trials per side, "
                               "≈ 0.75·ε, but hides a policy that draws no noise)")


# DP-TS-MT's default straddle of the gap test, in noise scales of the batch sum (Lap(2K/ε)):
# the offset with the best expected bound at 1e5 trials per side, ≈ 0.61·ε/(2K), for the exit
# event seen in 91 % of the exits (measured with random_pulls = 400; laplace_difference_tail,
# one-sided Clopper–Pearson on 9e4 count trials).  At 1e6 the optimum is ≈ 3.5 scales (≈ 0.73).
DP_TS_MT_OFFSET_SCALES = 2.1


# Rounds of the trees' Thompson sampling the DP-TS-MT score reads after the random pulls: an exit
# shows in the first few dozen (arm 0 favoured), a longer window only adds noise to the score.
DP_TS_MT_WINDOW = 64


def private_ts_gap_design(policy, T: int, K: int, t_star: int, arm: int,
                          offset: float | None = None, **_) -> Design:
    """Private TS (Mishra & Thakurta 2015, Algorithm 2), black-box: the first gap-estimation
    test.  Gap estimation pulls every arm m = ⌈192·K·ln T/ε⌉ times round-robin, releases each
    arm's batch sum with Lap(2K/ε) (ε/(2K), the certificate's worst candidate) and exits when the
    two largest private means differ by more than Δ̂ = ½; when the next batch (4m per arm) does
    not fit in T, a run that does not exit plays round-robin to the end without another release.
    After an exit the policy plays Thompson sampling on its trees (with ``random_pulls`` an
    integer small enough to fit; the printed ⌈Γ/Δ̂²⌉ never fits below T ≈ 6e6, so with it every
    round is round-robin whatever the rewards — the actions then carry no information at all).

    Arm 0's gap rewards sum to m/2 − ``offset`` in D (one more in D′), the other arms' to 0, so
    the exit event is {L₀ − L₁ > offset} in D and {… > offset − 1} in D′, L ~ Lap(2K/ε) (the
    DP-SE event at a quarter of the scale, :func:`dp_se_design`); the witness is arm 0's last
    gap reward (round K·m − K + 1), in the same batch release: it attains ε/(2K).  After the
    batch arm 0's rewards are at the high end, the others low, so that after an exit the trees
    pull arm 0 more than round-robin's half.  The score reads the random pulls and
    DP_TS_MT_WINDOW rounds of Thompson sampling after them."""
    p = policy.params
    eps = float(p["epsilon"])
    sch = policy.schedule(T, K)
    notes, limit = [], ""
    if not p.get("gap_estimation", True) or not sch["m"]:
        why = ("gap estimation is off" if not p.get("gap_estimation", True) else
               f"the first gap batch (K·m = {K * policy.gap_batch(T, K)} rounds) does not fit "
               f"in T = {T}")
        d = generic_design(policy, T, K, t_star, arm)
        P0 = sch["exits"][0]["P"] if sch["exits"] else None
        if P0 is None:
            limit = (f"{why}: the policy plays round-robin from round 1 to T without a release, "
                     "so the actions are the same fixed sequence on D and D′ (total variation 0, "
                     "black-box bound 0 at any trial count)")
        elif K * P0 > T:
            limit = (f"{why}, and random_pulls = {p['random_pulls']!r} gives P = {P0} pulls per "
                     f"arm, more than T: every round is round-robin, so the actions are the same "
                     "fixed sequence on D and D′ (total variation 0, black-box bound 0 at any "
                     "trial count)")
        else:
            limit = (f"{why}: the witness reaches the actions only through its tree's p-sums, "
                     "each Lap(levels/ε0) of ε0/levels (composition-limited, as DP-UCB)")
        return Design(d.table, d.description + f" ({why}: no gap release to steer)",
                      notes=(f"{why}; the black-box design needs the gap test (K = 2, ε = 1: "
                             "T ≥ 7000, e.g. --horizon 10000 --set random_pulls=400)",),
                      limit_reason=limit)
    m = int(sch["m"][0])
    tau = K * m
    b = policy.gap_scale(K)
    offset = DP_TS_MT_OFFSET_SCALES * b if offset is None else check_positive("offset", offset)
    v = (m / 2.0 - offset) / (m - 1)
    if not 0.0 <= v <= 1.0:
        raise DpledgerError(f"dp-ts-mt adversarial table: offset {offset!r} puts the per-reward "
                            f"value {v} outside [0, 1]")
    ex = [x for x in sch["exits"] if x["e"] == 1]
    P = ex[0]["P"] if ex else T + 1
    if K * P > T - tau:
        limit = (f"random_pulls = {p['random_pulls']!r} gives P = {P} pulls per arm after an exit, "
                 f"more than the {T - tau} rounds left: exit or not, every round is round-robin, "
                 "so the actions are the same fixed sequence on D and D′ (total variation 0, "
                 "black-box bound 0 at any trial count); the design needs an integer "
                 "random_pulls with K·P well inside T − K·m (--set random_pulls=400 at T = 1e4)")
    tab = _witness_arm_table(T, K, arm, 1.0)
    tab[:tau, arm] = v
    ts = tau - K + 1
    # the score reads the random pulls (round-robin either way) and a window of Thompson
    # sampling after them
    stop = min(T, tau + K * min(P, T) + DP_TS_MT_WINDOW)
    u = offset / b
    pe0, pe1 = laplace_difference_tail(u), laplace_difference_tail(u - 1.0 / b)
    if offset >= 1.0:
        notes.append(f"offset {offset:g} >= 1: without noise neither D nor D′ exits, so a policy "
                     "that draws no noise acts alike on both")
    desc = (f"gap batch of m = {m} pulls per arm (rounds 1 … {tau}): arm {arm}'s rewards {v:.6g} "
            f"(clean sum m/2 − {offset:g} in D, one more in D′), the other arms 0; witness round "
            f"{ts}, arm {arm}'s last gap reward, in its batch sum released once with Lap(2K/ε) "
            f"(ε/(2K): the certificate's worst candidate).  Exit (the two private means more than "
            f"½ apart) has P = {pe0:.4g} on D, {pe1:.4g} on D′ (log-ratio "
            f"{math.log(pe1 / pe0):.4f}); without an exit every later round is round-robin, "
            f"after one the trees' Thompson sampling plays (arm {arm} high, others low)")
    if not limit:
        limit = (f"the actions reveal one event, the exit of the gap test, a threshold on the "
                 f"difference of two Lap(2K/ε) noises (log-ratio {math.log(pe1 / pe0):.4f} of "
                 f"ε/(2K) = {eps / (2 * K):g}, reaching it only where the event gets rare); "
                 "the rest of the run carries nothing about the witness (later rewards are "
                 "fresh, the gap rewards enter only the pull counts), and an exit shows in the "
                 "actions only when the trees' Thompson sampling leaves round-robin (≈ every "
                 "exit with random_pulls = 400 and arm 0 favoured)")
    return Design(tab, desc, stop_hint=stop, notes=tuple(notes), round=ts, limit_reason=limit)


def dp_ts_whitebox_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    """DP-TS, white-box: the certificate's worst candidates (ε in total) are the first reward
    of an epoch's buffer, whose round depends on the trajectory.  At round K + 1 every arm has
    exactly one observation (rounds 1 … K pull each arm once), so whichever arm a* is played
    there, the changed reward is a* 's observation 1 — the first item of epoch 0's buffer: one
    level-0 p-sum (ε/2) at once and one logarithmic-mechanism block (ε/2) at a* 's third pull.
    All rewards are at the high end on both arms, so a* is pulled again soon."""
    if T < K + 1:
        raise DpledgerError(f"dp-ts white-box design needs T > K, got T = {T}")
    return Design(np.ones((T, K)), "round K + 1 (every arm's observation 1, the first item of "
                                   "epoch 0's buffer: one p-sum and one log block, the "
                                   "certificate's worst candidate m = 1); every other reward at "
                                   "the high end", round=K + 1)


def tree_whitebox_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    """DP-UCB, white-box: the witness (arm 0's first reward) enters one p-sum per level of the
    arm's tree as the arm's pulls reach 1, 2, 4, …; the certificate counts every level, so the
    witness arm is made good (every reward at the high end) and the others bad, so that it is
    pulled often enough to close every level within T."""
    tab = _witness_arm_table(T, K, arm, 1.0)
    return Design(tab, f"arm {arm} (witness) good: every reward at the high end; the other arms "
                       "bad: every reward at the low end (the witness arm's tree closes every "
                       "level)")


def _late_witness_design(T: int, K: int, fraction: float, unit: str, release: str) -> Design:
    """Every reward at the low end on every arm, the witness at round ⌈fraction·T⌉ in the arm
    played there (a late ``unit`` of that arm); shared by the episodic policies' designs."""
    if not 0.0 < fraction < 1.0:
        raise DpledgerError(f"fraction must lie in (0, 1), got {fraction!r}")
    ts = max(K + 1, int(math.ceil(fraction * T)))
    return Design(np.zeros((T, K)), f"every reward at the low end on every arm; witness round "
                                    f"t* = ⌈{fraction}·T⌉ = {ts}, in a late {unit} of the arm "
                                    f"played there (every reward is released exactly once with "
                                    f"{release}: each attains the certificate)",
                  round=ts, played_arm=True)


def lazy_epoch_design(policy, T: int, K: int, t_star: int, arm: int, fraction: float = 0.3,
                      **_) -> Design:
    """Lazy-DP-TS and AdaP-KLUCB, black-box: every reward lies in exactly one epoch sum released
    once with Lap(1/ε), so every reward attains the certificate (ε); the one to change is the
    one whose release steers the most later decisions.  Early releases are clipped away by the
    optimistic terms (Lazy-DP-TS: m = clip(μ̃ + 3·log2(t)/(ε·O)) = 1 while O < 3·log2(t)/ε;
    AdaP-KLUCB: the KL index of a one-sample mean is 1 whatever it is), so the witness
    is placed at round t* = ⌈0.3·T⌉, inside an epoch of O ≈ 64 observations of whichever arm is
    played there (the changed row holds the witness for every arm; features are relabelled so
    that arm comes first).  All rewards are at the low end on every arm: both arms stay
    symmetric and unclipped, so the released mean of a* moves its Beta(mO + 1, (1 − m)O + 1)
    sample against the other arm's for all the rounds until a* 's next release; the fitted
    score pools the per-window pull counts."""
    return _late_witness_design(T, K, fraction, "epoch", "Lap(1/ε)")


def dp_ts_unclipped_from(eps: float, K: int, limit: int = 10 ** 8) -> int | None:
    """O*: the smallest observation count O whose DP-TS shift υ(ε, O, O + K) is at most 1 (the
    first state whose Beta mean can be unclipped by its clean sum alone), None if none ≤ limit.

    υ ∝ ln a·ln b/O with a = O + 1, b = O + K, whose derivative has the sign of
    O·ln b/a + O·ln a/b − ln a·ln b < ln a + ln b − ln a·ln b = 1 − (ln a − 1)(ln b − 1) ≤ 0
    once ln a, ln b ≥ 2 (O ≥ 7): so O ≤ 7 is scanned and beyond υ is decreasing — an
    exponential search and a bisection, O(log limit) evaluations."""
    from dpledger.policies.hu_hegde import dp_ts_shift

    def ok(o: int) -> bool:
        return float(dp_ts_shift(float(eps), float(o), float(o + K))) <= 1.0

    for o in range(1, min(7, limit) + 1):
        if ok(o):
            return o
    if limit <= 7 or not ok(limit):
        return None
    lo, hi = 7, 8                     # υ(lo) > 1, search for υ(hi) ≤ 1
    while not ok(hi):
        lo, hi = hi, min(limit, 2 * hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def dp_ts_clipping_bound(eps: float, T: int, K: int) -> tuple[float, int | None]:
    """(B, O*) for DP-TS (Hu & Hegde 2022, Algorithm 1; docs/algorithms.md#dp-ts) on any reward
    table
    in its declared range: B bounds the probability that some arm's Beta mean
    m = clip(μ̃ + υ(ε, O, t)) falls below 1 at some round of a run of T rounds; O* is the
    smallest observation count whose shift υ(ε, O, O + K) is at most 1
    (:func:`dp_ts_unclipped_from`; then B = 1, vacuous, when O* ≤ T − K + 1).

    While every m is 1, every arm is sampled from Beta(O + 1, 1), whatever the rewards and the
    noise, and the runs on D and D′ driven by one random stream make the same draws and the
    same actions; so the total variation between the two action laws is at most 2B.

    At O observations (2^k − 1 ≤ O < 2^{k+1} − 1) the arm's released sum O·μ̃ is its clean sum
    (≥ 0) plus k logarithmic-mechanism blocks of Lap(2/ε) and popcount(O − 2^k + 1) epoch
    p-sums of Lap(2k/ε); m < 1 needs that noise below −O·(υ − 1), and υ grows with t, while the
    state O exists only at rounds t ≥ O + K.  Each (arm, O) term is the exact Laplace tail for
    one noise, a Chernoff bound min_λ e^{−λx}·Π(1 − λ²b_i²)^{−1} over a grid of 255 values of λ
    in (0, 1/max b) for a sum (any λ gives a bound); B sums them (union bound), rounded up."""
    from dpledger.policies.hu_hegde import dp_ts_shift
    n_max = T - K + 1
    o_star = dp_ts_unclipped_from(eps, K, limit=max(n_max, 1))
    if o_star is not None:
        return 1.0, o_star
    if n_max < 1:
        return 0.0, None
    O = np.arange(1, n_max + 1, dtype=np.int64)
    x = O * (dp_ts_shift(float(eps), O.astype(np.float64), (O + K).astype(np.float64)) - 1.0)
    k = np.floor(np.log2(O + 1.0)).astype(np.int64)
    k = np.where((1 << (k + 1)) <= O + 1, k + 1, k)          # exact floor(log2(O + 1))
    k = np.where((1 << k) > O + 1, k - 1, k)
    items = O - (1 << k) + 1
    pc = np.zeros_like(items)
    for bit in range(63):
        pc += (items >> bit) & 1
    b_log = 2.0 / eps
    b_tree = np.where(pc > 0, 2.0 * k / eps, 0.0)          # no p-sum: no tree factor
    bmax = np.maximum(b_log, b_tree)
    rel = np.arange(1, 256) / 256.0
    logs = np.empty(O.size)
    for s0 in range(0, O.size, 4096):
        sl = slice(s0, s0 + 4096)
        lam = rel[None, :] / bmax[sl, None]
        v = (-lam * x[sl, None] - k[sl, None] * np.log1p(-(lam * b_log) ** 2)
             - pc[sl, None] * np.log1p(-(lam * b_tree[sl, None]) ** 2))
        logs[sl] = v.min(axis=1)
    single = (k == 1) & (pc == 0)                            # O = 1: one block, exact tail
    logs[single] = math.log(0.5) - x[single] / b_log
    logs = np.minimum(logs, 0.0)
    top = float(logs.max())
    total = K * math.exp(top) * float(np.exp(logs - top).sum())
    return min(1.0, math.nextafter(total * (1.0 + 1e-9), math.inf)), None


def dp_ts_blackbox_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    """DP-TS, black-box: the generic table (the witness arm bad, the others good), with the
    reason its actions reveal (almost) nothing at moderate horizons (:func:`dp_ts_clipping_bound`):
    the optimistic shift υ(ε, O, t) = 6√8·log2(O + 1)·log2(t)/(ε·O) exceeds 1 for every O below
    O* = 2056 (ε = 1, K = 2), so m = clip(μ̃ + υ) = 1 and the Beta(O + 1, 1) draws ignore the released
    means except when the noise alone is below −O(υ − 1) — a Laplace tail event of probability
    ≈ 1.2e-6 per arm at O = 1 (the witness's own first block, Lap(2/ε), against υ(1, 3) − 1 =
    25.9), far smaller beyond.  Hence the total variation between the action laws on D and D′
    is below 2B (B ≈ 2.4e-6 at T = 1000, K = 2, ε = 1)."""
    d = generic_design(policy, T, K, t_star, arm)
    eps = float(policy.params["epsilon"])
    B, o_star = dp_ts_clipping_bound(eps, T, K)
    o_any = dp_ts_unclipped_from(eps, K)
    n_tv = 2.0 * B
    if o_star is None:
        limit = (f"the shift υ(ε, O, t) = 6√8·log2(O+1)·log2(t)/(εO) exceeds 1 for every arm "
                 f"state reachable within T = {T}, so m = clip(μ̃ + υ) = 1 and the Beta(O + 1, 1) "
                 f"draws ignore the released means unless the noise alone is below −O(υ − 1): "
                 f"probability ≤ B = {B:.3g} per run (Laplace tails, union over arms and "
                 f"observation counts).  On the event that no m falls below 1 the runs on D and "
                 f"D′ make the same draws and actions, so the action laws are within total "
                 f"variation {n_tv:.3g}: with 1e5 trials per side any event's expected counts "
                 f"differ by ≤ {1e5 * n_tv:.2g} trials, and a positive bound needs about a dozen "
                 "more hits on one side than on the other — the black-box bound is 0.  An "
                 "unclipped state needs υ < 1, i.e. some arm with at least "
                 + (f"{o_any} observations" if o_any is not None else
                    "10^8 observations (none below)"))
    else:
        limit = (f"the shift υ(ε, O, t) exceeds 1 for every arm with fewer than O* = {o_star} "
                 f"observations (m = 1: the Beta(O + 1, 1) draws ignore the released means); "
                 f"beyond, the witness moves m by 1/O against Beta draws of spread "
                 f"√(m(1−m)/O) and the sums' other noises, and reaches the actions only through "
                 f"its epoch's p-sums (ε/(2(r+1)) each) and, after the epoch, its log block "
                 f"(ε/2), masked by the other blocks' noise.  Measured at ε = 1, K = 2, T = 1e4 "
                 "(all rewards low, witness at round 7000, O ≈ 3500, m ≈ 0.7): 0.00 at 5e3 "
                 "trials per side, event counts 3009 vs 3008")
    return Design(d.table, d.description, limit_reason=limit)


def tree_blackbox_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    """DP-UCB (Mishra & Thakurta 2015, Algorithm 1), black-box.  The witness, arm 0's first
    reward (round 1), is item 1 of arm 0's tree: it enters the p-sums [1, 1], [1, 2], [1, 4], …
    as the arm's pulls reach 1, 2, 4, …, each Lap(levels/ε0) of ε0/levels — the certificate's
    worst candidate counts ``nodes`` = bit_length(T − K + 1) of them, so arm 0 is made good
    (every reward at the high end) and the others bad (low end), and the witness arm is pulled
    as often as the index allows.

    Where the actions reveal less than the releases: a decision compares the arms' indices, i.e.
    the witness arm's current noisy sum (one witness p-sum, plus p-sums without it) against the
    other arms' noisy sums (independent noise of the same scale), and the reward range (1) is
    a fraction of the noise scale levels/ε0 ≥ 2/ε0, so a decision sees one witness p-sum, masked,
    mostly near the centre of its noise.  Small horizons work best: at T = 4 (levels 3, two
    witness p-sums of ε0/3, certificate 2ε0/3) the decisions at rounds 3 and 4 are the only
    ones, four outcomes.  The most revealing one, arm 1 at rounds 3 and 4, reads only the
    witness's first p-sum (the second is released only when arm 0 is pulled again), so its
    log-ratio is below ε0/3 = ½·certificate: exactly (numerical integral over the two arms'
    first noises) 0.4925·certificate at the default γ = 0.1 (per_tree_budget = full; 0.4904
    split), tending to ½ only as γ → 0, where the outcome gets rare; the outcomes that read both
    witness p-sums are masked by arm 1's noise (≈ 0.27·certificate, a Monte Carlo estimate with
    2e6 runs per side).  So no black-box score on this pair is expected to reach ½ even with
    unlimited trials (proven for the first outcome, estimated for the others); the audit
    at 1e5 trials per side certifies ≈ 0.43–0.45 (full) / 0.36–0.375 (split).  At T = 1000
    each of the witness's ten p-sums is ε0/10 and the measured black-box bound is 0 at 2e4
    trials per side; the white-box likelihood-ratio audit of all ten (the Neyman–Pearson
    statistic of the releases, of which the actions are post-processing) reaches
    0.56·certificate at 1e5, a ceiling no action-only score can beat."""
    tab = _witness_arm_table(T, K, arm, 1.0)
    levels = int(T).bit_length()
    nodes = int(T - K + 1).bit_length()
    return Design(tab, f"arm {arm} (witness) good: every reward at the high end; the other arms "
                       f"bad (low end).  The witness, arm {arm}'s round-1 reward, is item 1 of its "
                       f"tree: it enters the p-sums [1, 2^j] as the arm's pulls reach 2^j, {nodes} "
                       f"of them within T = {T} (Lap(levels/ε0) each, levels = {levels}) — the "
                       "certificate's candidate, once the arm holds 2^(nodes−1) items",
                  limit_reason=(
                      f"each decision compares the witness arm's noisy sum (one witness p-sum of "
                      f"ε0/{levels}) with the other arms' (independent Laplace noise of the same "
                      f"scale {levels}/ε0 against a reward range of 1), so it reads one witness "
                      f"p-sum, masked; the actions are post-processing of the p-sums, so the "
                      f"white-box likelihood-ratio audit bounds any black-box one (0.56·"
                      "certificate at T = 1000, 1e5 trials per side).  Best design: T = 4 "
                      "(certificate: two witness p-sums of ε0/3), whose most revealing action "
                      "outcome (arm 1 at rounds 3 and 4) reads only the first witness p-sum: "
                      "log-ratio 0.4925·certificate by numerical integration at γ = 0.1, "
                      "ε = 1 (full; 0.4904 split), → ½ only as γ → 0; the other three outcomes "
                      "≈ 0.27·certificate (a Monte Carlo estimate, 2e6 runs per side, not a "
                      "bound), so no event — a union of outcomes — is expected to reach "
                      "½·certificate at any trial count; ≈ 0.43–0.45 measured at 1e5 per side "
                      "(these figures at γ = 0.1, ε = 1; other parameters move them)"))


def azize_whitebox_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    """DP-KLUCB and DP-IMED (Azize et al. 2025; policies/azize2025.py), white-box: the witness is
    arm 0's first reward, round 1 (its initial pull, released alone with Lap(1/ε)).  The witness
    arm is made good (every reward at the high end) and the others bad (low end), so it is
    pulled through many phases: with ``mechanism=phase-sums`` its one release is still the
    initial one (ε), while ``mechanism=renoise-cumulative`` re-noises the arm's whole cumulative
    sum — witness included — at every phase end, and the captured vector holds every one of
    those releases (their LLR sum is what the variant's certificate, phases × ε, bounds)."""
    tab = _witness_arm_table(T, K, arm, 1.0)
    return Design(tab, f"arm {arm} (witness) good: every reward at the high end; the other arms "
                       "bad: every reward at the low end (the witness arm runs through many "
                       "phases; renoise-cumulative re-releases the witness at each phase end)",
                  round=1)


def dp_klucb_phase_design(policy, T: int, K: int, t_star: int, arm: int, fraction: float = 0.3,
                          **_) -> Design:
    """DP-KLUCB, black-box: every reward lies in exactly one phase sum released once with Lap(1/ε)
    (each attains the certificate), so the one to change is the one whose release steers the most
    later decisions.  The first releases are saturated away (the index is 1 while ln t / N ≥ ε(1 −
    x̃), docs/algorithms.md#dp-klucb), so the witness is placed at round t* = ⌈0.3·T⌉, inside a late
    phase of whichever arm is played there (features relabelled so that arm comes first, as in
    :func:`lazy_epoch_design`).  Every reward is at the low end on every arm: the arms stay
    symmetric, their private means x̃ = clip01(S̃/N) sit near 0, where the KL-UCB index (kl(x̃, μ) =
    ln t / N solved for μ) is steepest in x̃ (∂μ/∂x̃ grows like ln(μ/x̃)), so the witness's 1/N in
    x̃ moves the index most; its phase's release decides which arm gets the next phase, α·N pulls
    long.  Measured (K = 2, T = 1000, ε = 1, 1e4 trials per side, seed 0): ratio 0.67 against 0.34
    for the generic pair, 0.51 with every reward at ½, 0.31 at 0.05."""
    return _late_witness_design(T, K, fraction, "phase", "Lap(1/ε) in its phase sum")


def gaussian_ts_whitebox_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    """TS-Gaussian / M-TS-Gaussian, white-box: the certificate's worst candidate is one reward
    read by every later sample of its arm at the smallest k (k = 1 for b = 0, k = b for b ≥ 1),
    which the trajectory attains only while that arm is not pulled again.

    b ≥ 1: the witness is arm 0's round-1 pre-pull reward.  Arm 0's other pre-pull rewards are
    at the low end and every other arm's rewards at the high end, so in D′ the witness arm's
    samples N(1/(b+1), c/(b+1)) face K − 1 arms at N(b/(b+1), c/(b+1)) or better: for b ≥ 2
    and small c (e.g. b = 4, c = 0.2, K = 4: a gap of 2.1 standard deviations per other arm)
    the witness arm is almost never the argmax, and every read is at k = b.

    b = 0: round 1 samples every arm at k = 0 and plays a random arm a*, whose reward is the
    witness (the changed row holds it for every arm; arm −1 = the arm played at t*).  Every
    other reward is at the high end, so the arms pulled later have means k/(k+1) ≥ ½ while a*
    reads N(S/2, ½) with S ∈ {0, 1}; many arms (K = T = 19 at μ = 3: a horizon holds at least
    K rounds) keep a* from the argmax most of the time, so its reads stay at k = 1 (the
    certificate's count); 1e6 trials per side then certify 0.97·μ."""
    b = int(getattr(policy, "b", 0))
    if b >= 1:
        tab = _witness_arm_table(T, K, 0, 0.0, others=1.0)
        return Design(tab, f"arm 0's round-1 pre-pull reward is the witness (read at k = b = {b} "
                           "by every later sample while arm 0 is not pulled again); arm 0's "
                           "other rewards at the low end, every other arm's at the high end, "
                           "so arm 0 is almost never the argmax and every read of the witness "
                           "is at k = b, as the certificate counts", round=1)
    tab = np.ones((T, K))
    return Design(tab, "round 1 (every arm at k = 0: a random arm a* is played and its reward "
                       "is the witness, read at k = 1 by every later sample while a* is not "
                       "pulled again); every other reward at the high end, so the K − 1 other "
                       "arms' samples keep a* from the argmax and its reads stay at k = 1, as "
                       "the certificate counts", round=1, played_arm=True)


def dp_ts_ucb_whitebox_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    """DP-TS-UCB, white-box: the witness is arm 0's round-1 reward, its epoch-0 model (n = 1),
    sampled afresh every round from K + 1 while its budget φ lasts and until arm 0's buffer
    holds 2 new rewards; the certificate counts min(φ, T − K) such samples.  Arm 0's other
    rewards are at the low end and every other arm's at the high end: in D′ arm 0's model has
    the others' epoch-0 mean, so it is pulled about 1/K of the rounds and, with many arms, hardly
    ever twice within its budget (e.g. K = 64, 9 reads: under 1 %)."""
    tab = _witness_arm_table(T, K, 0, 0.0, others=1.0)
    return Design(tab, "arm 0's round-1 reward is the witness: its epoch-0 model (n = 1) is "
                       "sampled every round from K + 1 while its budget lasts (the certificate's "
                       "min(φ, T − K) samples) unless arm 0 is pulled twice first; arm 0's other "
                       "rewards at the low end, every other arm's at the high end", round=1)


def dp_ts_mt_whitebox_design(policy, T: int, K: int, t_star: int, arm: int, **_) -> Design:
    """Private TS (Mishra & Thakurta), white-box.  With gap estimation the worst candidate is a
    gap-batch reward (one release of ε/(2K)): round 1 is arm 0's first gap pull (the generic
    table).  Without it and with ``random_pulls`` P ≥ 1, round 1 is arm 0's first random pull,
    part of arm 0's first tree item (the batch total, sensitivity 1), which lies in one p-sum
    per level as arm 0's tree reaches 1, 2, 4, … items: arm 0 is made good (every reward at the
    high end) and the others bad, so that arm 0 is pulled on nearly every Thompson round and its
    tree reaches every level the certificate counts within T."""
    p = policy.params
    if p.get("gap_estimation", True) or p.get("random_pulls") in (0, "printed"):
        return generic_design(policy, T, K, t_star, arm)
    tab = _witness_arm_table(T, K, 0, 1.0)
    return Design(tab, "round 1 = arm 0's first random pull, inside arm 0's first tree item "
                       "(the certificate's witness: the first item of a tree, in one p-sum per "
                       "level it reaches); arm 0 good (every reward at the high end), the other "
                       "arms bad, so arm 0's tree reaches every level within T", round=1)


WHITEBOX_DESIGNS: dict[str, Callable[..., Design]] = {
    "lazy-dp-ts": generic_design,      # the single captured release is arm 0's round-1 release
    "adap-klucb": generic_design,
    "dp-ts": dp_ts_whitebox_design,
    "dp-ucb": tree_whitebox_design,
    "dp-klucb": azize_whitebox_design,
    "dp-imed": azize_whitebox_design,
    "ts-gaussian": gaussian_ts_whitebox_design,
    "mts-gaussian": gaussian_ts_whitebox_design,
    "dp-ts-ucb": dp_ts_ucb_whitebox_design,
    "dp-ts-mt": dp_ts_mt_whitebox_design,
}


# White-box configurations at which the trajectory attains the certificate's worst candidate
# almost surely and the certificate is within the 1e6 ceiling (issue 14 §1 goal: pure ε ≤ 2,
# μ ≤ 3): policy → (parameters, T, K, why).  ``dpledger audit NAME --mode whitebox --horizon T
# --arms K --set k=v …`` reproduces each; benchmarks and tests read them from here.
WHITEBOX_CONFIGS: dict[str, tuple[dict, int, int, str]] = {
    "ts-gaussian": ({}, 19, 19, "μ = √((T − 1)/2) = 3; K = T arms keep a* from the argmax"),
    "mts-gaussian": ({"b": 4, "c": 0.2}, 25, 4, "μ = √((T − bK)/(c(b+1))) = 3; reads at k = b, "
                                                "the witness arm 2.1 σ below every other arm"),
    "dp-ts-ucb": ({"alpha": 0.0}, 41, 32, "μ = √(min(φ, T − K)/ln(T)^α) = 3 (9 reads of σ = 1); "
                                          "32 arms: arm 0 hardly ever pulled twice in 9 rounds"),
    "dp-ucb": ({}, 3, 2, "ε = 0.5: 2 p-sums of ε0/levels = 0.25 each (the first item's 2 levels at T = 3)"),
    "dp-ts-mt": ({"gap_estimation": False, "random_pulls": 31, "epsilon": 14.0}, 64, 2,
                 "ε = 1: 2 p-sums of ε/(2K·levels) = 0.5 each (item 1 = the 31 random pulls' total)"),
}


DESIGNS: dict[str, Callable[..., Design]] = {
    "dp-se": dp_se_design,
    "lazy-dp-ts": lazy_epoch_design,
    "dp-ts": dp_ts_blackbox_design,
    "adap-ucb": generic_design,
    "adap-klucb": lazy_epoch_design,
    "anytime-lazy-ucb": generic_design,
    "dp-ts-mt": private_ts_gap_design,
    "dp-ucb": tree_blackbox_design,
    "dp-klucb": dp_klucb_phase_design,
    # DP-IMED: the generic pair (witness = the bad arm's initial release, alone in its private
    # sum; the IMED index N·d_ε(x̃, x̃*) + ln N compares it with the leader's at once) measured
    # best: ratio 0.86 against 0.48-0.56 for dp_klucb_phase_design at t* = 0.1-0.5·T (K = 2,
    # T = 1000, ε = 1, 1e4 trials per side)
    "dp-imed": generic_design,
}


def design_name(policy) -> str:
    """The name whose design a policy gets: its own, else the nearest class in its MRO with a
    design (a subclass — e.g. a test's mis-noised variant — is audited on its parent's pair)."""
    name = getattr(policy, "name", "")
    if name in DESIGNS or name in WHITEBOX_DESIGNS:
        return name
    for cls in type(policy).__mro__:
        n = cls.__dict__.get("name")
        if isinstance(n, str) and (n in DESIGNS or n in WHITEBOX_DESIGNS):
            return n
    return name


def default_pair(policy, T: int, K: int = 2, lo: float = 0.0, hi: float = 1.0,
                 whitebox: bool = False, **design_options) -> NeighbourPair:
    """The default pair of docs/design.md#audits for ``policy`` at horizon T with K arms: row t*
    (the certificate's witness round) from ``lo`` in D to ``hi`` in D′ for every arm, the other rows
    from the policy's adversarial table (module docstring)."""
    from dpledger.policies.base import validate_horizon
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 2:
        raise DpledgerError(f"K must be an integer >= 2, got {K!r}")
    T = validate_horizon(T, int(K))
    t_star, arm, cand, notes = witness(policy.certificate(T, K))
    if not 1 <= t_star <= T:
        raise DpledgerError(f"witness round {t_star} outside [1, {T}]")
    name = design_name(policy)
    design_fn = DESIGNS.get(name, generic_design)
    if whitebox and name in WHITEBOX_DESIGNS:
        design_fn = WHITEBOX_DESIGNS[name]
    design = design_fn(policy, T, K, t_star, arm, **design_options)
    if design.round is not None:
        t_star = design.round
        notes = tuple(n for n in notes if "trajectory-dependent" not in n
                      and "no candidate names its round" not in n) + (
            f"design: witness round {t_star} (see the description)",)
    if design.played_arm:
        arm = -1
    d0 = design.table.copy()
    d0[t_star - 1, :] = 0.0
    d1 = d0.copy()
    d1[t_star - 1, :] = 1.0
    scale = hi - lo
    t0 = lo + d0 * scale
    t1 = lo + d1 * scale
    t0[t_star - 1, :] = lo               # exact range ends in the changed row
    t1[t_star - 1, :] = hi
    label = "generic" if design_fn is generic_design else name + (
        "-whitebox" if whitebox and name in WHITEBOX_DESIGNS else "")
    return NeighbourPair.from_tables(t0, t1, lo, hi, arm=arm, design=label,
                                     description=design.description, stop_hint=design.stop_hint,
                                     notes=tuple(notes) + design.notes,
                                     limit_reason=design.limit_reason)


__all__ = ["NeighbourPair", "default_pair", "witness", "worst_candidate", "DESIGNS",
           "WHITEBOX_DESIGNS", "WHITEBOX_CONFIGS",
           "generic_design", "dp_se_design", "Design", "private_ts_gap_design",
           "tree_blackbox_design", "dp_ts_blackbox_design", "dp_ts_clipping_bound",
           "laplace_difference_tail", "dp_klucb_phase_design", "azize_whitebox_design"]
