"""The largest of K independent Beta samples and its arm, exact in law, with one Beta draw a
round (docs/algorithms.md#beta-thompson-sampling, ``posterior_draw="max"``).

Thompson sampling on Beta posteriors plays argmax_j θ_j, θ_j ~ Beta(α_j, β_j) independent, and
only the arm and its sample matter.  The largest can be found one arm at a time: draw the
*leader*'s sample (the arm of largest posterior mean, fixed before any draw), M = θ_L; for each
other arm j in index order, θ_j > M with probability p_j(M) = P(Beta(α_j, β_j) > M) — decided
by one uniform u (``u < p_j``) — and given that it does, θ_j is a Beta(α_j, β_j) sample
conditioned on (M, 1), which becomes the new M.  By induction over the arms, the arm and the
value kept have the law of (argmax, max) of the K independent samples (ties have probability 0:
the laws are continuous).

The tail p_j is almost never computed: Beta(α, β) is sub-Gaussian with variance proxy at most
1/(4(α + β + 1)) (Marchal & Arbel 2017, Theorem 1), so p_j ≤ B_j = exp(−2(α + β + 1)(M − μ_j)²)
for M > μ_j = α/(α + β), and u ≥ B_j already says "does not beat".  The test u ≥ B_j is first
made without the exponential: e^x ≥ Σ_{i≤6} x^i/i! for x ≥ 0, so u·Σ_{i≤6} E^i/i! ≥ 1 implies
u ≥ e^{−E}.  When it cannot decide, the log-concave (Mills-ratio) bound p_j ≤ f(M)/|(ln f)'(M)|
is tried (:func:`beta_tail_may_exceed`: one log-density against the continued fraction's
√max(α, β) steps; DP-TS's optimistic posteriors overlap, and there it decides more than half of
what the first bound leaves).  The bounds only skip work: the arm beats iff u < p_j either way,
so they do not change what is drawn.  Only when neither bound decides is p_j computed
(:func:`beta_upper_tail`, the incomplete beta function's continued fraction), and only when the
arm beats is its conditioned sample drawn (:func:`beta_above`, by inversion: Newton's method on
the log tail).  "Exact in law" holds up to the floating-point accuracy of those two functions
(relative 1e-13 at most parameters of a run, 1.3e-10 seen at α ≈ 1.35, β ≈ 2.5e6; the tests
ask 1e-8) and of numpy's own Beta sampler.

Compiled helpers that take the Generator are straight-line, called only on the rare path, or
compiled without reference counting (:func:`beta_max_round`, the round every kernel and the
step forms call): numba reference-counts a Generator and arrays passed into an inlined helper
that loops (see :func:`dpledger.policies.baselines.klucb_select`).
"""
from __future__ import annotations

import math

import numpy as np
from dpledger._jit import njit

from dpledger.errors import DpledgerError
from dpledger.policies.rules import argmax_first

_CF_EPS = 1e-16          # relative change at which the continued fraction has converged
_CF_MAX = 10_000_000     # iterations before giving up (needs ~√max(α, β): never at T ≤ 1e9)
_TINY = 1e-300


@njit(cache=True)
def _beta_cf(a, b, x):
    """The continued fraction of I_x(a, b) (x < (a + 1)/(a + b + 2)), modified Lentz."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    if abs(d) < _TINY:
        d = _TINY
    d = 1.0 / d
    h = d
    m = 1
    while m < _CF_MAX:
        m2 = 2 * m
        num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2))
        d = 1.0 + num * d
        d = _TINY if abs(d) < _TINY else d
        c = 1.0 + num / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        h *= d * c
        num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))
        d = 1.0 + num * d
        d = _TINY if abs(d) < _TINY else d
        c = 1.0 + num / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        step = d * c
        h *= step
        if abs(step - 1.0) < _CF_EPS:
            return h
        m += 1
    raise DpledgerError("the incomplete beta continued fraction did not converge")


@njit(cache=True, inline="always")
def _stirling_rest(z):
    """ln Γ(z) − ((z − ½)ln z − z + ½ ln 2π) for z ≥ 50: 1/(12z) − 1/(360z³) + 1/(1260z⁵),
    the first omitted term below 1/(1680z⁷) < 1e-15."""
    r = 1.0 / (z * z)
    return (1.0 / 12.0 - r * (1.0 / 360.0 - r * (1.0 / 1260.0))) / z


@njit(cache=True)
def _ln_beta_small(a, b):
    """ln B(a, b) when one of a, b is below 50: lgamma's terms when both are (sizes below
    ~150, no cancellation to speak of); else ln Γ(s) − [ln Γ(s + L) − ln Γ(L)] with the
    bracket by Stirling's series in closed form, (L − ½)·log1p(s/L) + s·ln(s + L) − s + rests,
    instead of a difference of two terms of size L ln L."""
    if a < 50.0 and b < 50.0:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    sm, lg = (a, b) if a < b else (b, a)
    n = sm + lg
    rise = ((lg - 0.5) * math.log1p(sm / lg) + sm * math.log(n) - sm
            + _stirling_rest(n) - _stirling_rest(lg))
    return math.lgamma(sm) - rise


@njit(cache=True)
def _ln_front(a, b, x):
    """ln(x^a (1−x)^b / B(a, b)).  Large a and b (≥ 50): by Stirling's series with the a ln a,
    b ln b, (a+b) ln(a+b) terms cancelled in closed form — a·ln(x/μ) + b·ln((1−x)/(1−μ)),
    μ = a/(a+b), through log1p — so the result keeps its relative accuracy where lgamma's
    difference of terms of size a ln a would lose it (3e-9 relative at a, b ~ 1e6 measured)."""
    if a < 50.0 or b < 50.0:
        return a * math.log(x) + b * math.log1p(-x) - _ln_beta_small(a, b)
    n = a + b
    mu = a / n
    d = x - mu
    return (a * math.log1p(d / mu) + b * math.log1p(-d / (1.0 - mu))
            + 0.5 * math.log(a * b / n) - 0.5 * math.log(2.0 * math.pi)
            - _stirling_rest(a) - _stirling_rest(b) + _stirling_rest(n))


@njit(cache=True)
def beta_upper_tail(a, b, x):
    """P(Beta(a, b) > x) = I_{1−x}(b, a): the continued fraction on the side where it is small
    (no cancellation), 1 − I_x(a, b) on the other.  The front x^a (1−x)^b / B(a, b) is the
    same on both sides and is always computed from x itself (1 − x, rounded, would cost
    b·ulp/(1 − x) of relative accuracy)."""
    if x <= 0.0:
        return 1.0
    if x >= 1.0:
        return 0.0
    if b == 1.0:                # closed form 1 − x^a: the posterior of a mean clipped to 1
        return -math.expm1(a * math.log(x))
    front = math.exp(_ln_front(a, b, x))
    y = 1.0 - x
    if y < (b + 1.0) / (a + b + 2.0):
        return front * _beta_cf(b, a, y) / b
    return 1.0 - front * _beta_cf(a, b, x) / a


@njit(cache=True)
def _ln_density(a, b, x):
    """ln of the Beta(a, b) density at x in (0, 1): :func:`_ln_front` less ln x(1 − x)."""
    return _ln_front(a, b, x) - math.log(x) - math.log1p(-x)


@njit(cache=True)
def beta_tail_may_exceed(u, a, b, m):
    """False when the log-concave bound already says u ≥ P(Beta(a, b) > m): the arm does not
    beat m.  For a, b ≥ 1 the density f is log-concave, so beyond the mode it lies below its
    tangent in the log, ln f(t) ≤ ln f(m) + g·(t − m), g = (ln f)'(m) = (a−1)/m − (b−1)/(1−m),
    and for g < 0 the tail is at most f(m)/(−g) (the Mills-ratio bound; its ratio to the tail
    tends to 1 far out, where the sub-Gaussian bound of :func:`beta_may_beat` is loose by the
    ratio of the variance proxy 1/(4(a+b+1)) to the variance and a polynomial factor).  Called
    only when :func:`beta_may_beat` cannot decide; costs one :func:`_ln_front` against the
    continued fraction's √max(a, b) steps.  The bound is raised by 1e-9 relative, far above the
    floating-point error of ln f (≤ 1e-13 relative), so "False" is never wrong: the decision
    stays u < tail, and the run's draws are the same as without this test."""
    if a < 1.0 or b <= 1.0 or m <= 0.0 or m >= 1.0:
        return True
    g = (a - 1.0) / m - (b - 1.0) / (1.0 - m)
    if g >= 0.0:
        return True
    return u < math.exp(_ln_density(a, b, m)) / -g * (1.0 + 1e-9)


@njit(cache=True)
def _invert_tail(a, b, x, target):
    """The y in (x, 1) with P(Beta(a, b) > y) = target < P(Beta(a, b) > x), b ≠ 1, to the
    accuracy of :func:`beta_upper_tail`: Newton's method on h(y) = ln P(Beta > y), safeguarded
    by the bracket (lo, hi) and bisection.  For a, b ≥ 1 the tail is log-concave (the density
    is), so after the first step every Newton iterate lies right of the root and they decrease
    to it quadratically (about 5–8 tail evaluations against bisection's ~50 to adjacent
    doubles).  Stops when the tail at y is the target to 1e-10 relative (after one more step),
    when a step is below 4 ulps of y, or when lo and hi are adjacent."""
    lt = math.log(target)
    lo, hi = x, 1.0
    y = x
    for _ in range(200):
        s = beta_upper_tail(a, b, y)
        if s > target:
            lo = y
        else:
            hi = y
        if s > 0.0:
            r = math.log(s) - lt
            step = r * s / math.exp(_ln_density(a, b, y))
            yn = y + step
            # |r| ≤ 1e-10: the step left is ~1e-10 of the tail's scale S/f and the one after it
            # ~1e-20, below the tail's own floating-point error (which stalls the iteration)
            if abs(r) <= 1e-10 or abs(step) <= 4.0 * np.spacing(y):
                return yn if lo < yn < hi else y
        else:
            yn = hi
        if not (lo < yn < hi):
            yn = 0.5 * (lo + hi)
            if yn <= lo or yn >= hi:
                return hi if hi < 1.0 else lo
        y = yn
    return y


# From which tail the conditioned draw is by rejection (numpy's Beta draws until one exceeds x,
# 1/p of them on average) rather than by inverting the tail (≈ 5 tail evaluations of ≈ 0.6 µs at
# a run's shapes): ``posterior_draw="max"`` keeps 1/4, as it always drew; ``max-joint``, a new
# draw, takes 1/64 (a Beta draw ≈ 35 ns, so rejection is the cheaper below 1/4 down to ≈ 1/90).
MAX_REJECT = 0.25
JOINT_REJECT = 1.0 / 64.0


@njit(cache=True)
def beta_above_tail(rng, a, b, x, p, reject_at):
    """:func:`beta_above` given the tail p = P(Beta(a, b) > x) already computed (the round
    computed it to decide the arm beats), by rejection when p ≥ ``reject_at``
    (:data:`MAX_REJECT` or :data:`JOINT_REJECT`)."""
    if p >= reject_at:
        while True:
            y = rng.beta(a, b)
            if y > x:
                return y
    target = rng.random() * p
    if b == 1.0:
        return max(x, min(1.0, math.exp(math.log1p(-target) / a)))
    return _invert_tail(a, b, x, target)


@njit(cache=True)
def beta_above(rng, a, b, x):
    """One sample of Beta(a, b) conditioned on (x, 1): the y with P(Beta > y) = v·P(Beta > x),
    v uniform (one ``random`` draw), by :func:`_invert_tail` (Newton's method on the log tail,
    to the accuracy of :func:`beta_upper_tail`; until 2026-12-02 by bisection to adjacent
    doubles, ~50 tail evaluations — the same y but in its last bits, drawn with the same
    uniform).  For b = 1 (DP-TS's and Lazy-DP-TS's
    posterior when the optimistic mean is clipped to 1) the same y in closed form,
    (1 − v·(1 − x^a))^{1/a}.  When the tail is at least 1/4 (an arm close to the running
    maximum: DP-TS's optimistic posteriors, often), numpy's Beta draws repeated until one
    exceeds x instead — the same conditional law by rejection, at most 4 draws on average."""
    return beta_above_tail(rng, a, b, x, beta_upper_tail(a, b, x), MAX_REJECT)


@njit(cache=True, inline="always")
def beta_may_beat(u, mu, w, m):
    """False when the sub-Gaussian bound already says u ≥ P(Beta(a, b) > m), for the arm's
    mean ``mu`` = a/(a + b) and ``w`` = 2(a + b + 1) (:func:`beta_arm_stats`): the arm does not
    beat m.  True when it cannot say (then compare u with :func:`beta_upper_tail`)."""
    if m <= mu:
        return True
    s = m - mu
    e = w * s * s
    # Σ_{i≤k} e^i/i! ≤ e^e: u times it ≥ 1 ⇒ u ≥ e^{−e} ≥ the tail; k = 2 first (two
    # multiply-adds decide the far arms), then k = 6
    if u * (1.0 + e * (1.0 + 0.5 * e)) >= 1.0:
        return False
    poly = 1.0 + e * (1.0 + e * (0.5 + e * (1.0 / 6.0 + e * (1.0 / 24.0 + e * (
        1.0 / 120.0 + e * (1.0 / 720.0))))))
    if u * poly >= 1.0:
        return False
    return u < math.exp(-e)


@njit(cache=True, inline="always")
def beta_arm_stats(j, al, be, mu, w):
    """Arm j's mean α/(α + β) and bound weight 2(α + β + 1) from its parameters, kept beside
    them (recomputed only when they change)."""
    n = al[j] + be[j]
    mu[j] = al[j] / n
    w[j] = 2.0 * (n + 1.0)


@njit(cache=True, _nrt=False, forceinline=True)
def beta_arm_test(rng, u, j, al, be, mu, w, m, a, theta, reject_at):
    """Arm j's step of the round with its uniform u against the running maximum m of arm a:
    (m, a) after it — the sub-Gaussian and log-concave bounds may say "does not beat", else
    the tail decides u < p_j(m), and an arm that beats gets its conditioned sample (by
    rejection from ``reject_at``) in ``theta``.  Compiled as :func:`beta_max_round`."""
    if beta_may_beat(u, mu[j], w[j], m) and beta_tail_may_exceed(u, al[j], be[j], m):
        p = beta_upper_tail(al[j], be[j], m)
        if u < p:
            m = beta_above_tail(rng, al[j], be[j], m, p, reject_at)
            theta[j] = m
            a = j
    return m, a


@njit(cache=True, _nrt=False, forceinline=True)
def beta_max_round(rng, al, be, mu, w, theta, reject_at):
    """One round of the scheme (module docstring) from the arms' parameters ``al``/``be``,
    means ``mu`` and bound weights ``w`` (:func:`beta_arm_stats`): the arm kept; ``theta`` gets
    the samples kept (the leader's — the first arm of largest mean — then each arm's that beat
    the running maximum; other entries are left as they were).  ``reject_at``:
    :data:`MAX_REJECT` for ``max``, :data:`JOINT_REJECT` when ``max-joint`` falls back to this
    round.  The one source of the round for the kernels and :func:`beta_max_select`; compiled
    on its own without reference counting (``_nrt=False``, it allocates nothing): its loop takes
    the Generator and calls functions that may raise, which inlined by numba would cost two
    atomic operations per array argument a round (see
    :func:`dpledger.policies.baselines.klucb_select`).  ``forceinline`` has LLVM inline the
    compiled body into each caller after that: no call (≈ 10 ns a round; ts-beta ``max``'s
    kernel 106 → 81 ns best in one process, docs/design.md#the-beta-family-p8)."""
    a = argmax_first(mu)[0]
    m = rng.beta(al[a], be[a])
    theta[a] = m
    lead = a
    for j in range(al.size):
        if j != lead:
            m, a = beta_arm_test(rng, rng.random(), j, al, be, mu, w, m, a, theta, reject_at)
    return a


@njit(cache=True)
def beta_max_select(rng, al, be, theta):
    """The arm of argmax of independent Beta(al_j, be_j) samples, exact in law (module
    docstring), by :func:`beta_max_round`; ``theta`` as there.  The step forms' round."""
    K = al.size
    mu = np.empty(K)
    w = np.empty(K)
    for j in range(K):
        beta_arm_stats(j, al, be, mu, w)
    return beta_max_round(rng, al, be, mu, w, theta, MAX_REJECT)


# ---- posterior_draw="max-joint": one uniform for "no arm beats the leader" ----------------------
# The per-arm round above spends one uniform u_j and one test per other arm j, almost always to
# learn that u_j ≥ B_j ≥ p_j(M).  Fix, for a block of rounds, a threshold τ and for each other arm
# a bound B_j ≥ p_j(M') for every M' ≥ τ (the sub-Gaussian bound at τ from an upper end of the
# arm's mean and a lower end of its weight, valid over the block: :func:`joint_bound`).  Given
# M ≥ τ — and the running maximum only grows — "u_j ≥ B_j for every j" has probability
# P = Π_j (1 − B_j) and then no arm beats: one uniform U < P decides it.  Otherwise the first
# arm i with u_i < B_i has P(i) = Π_{j<i}(1 − B_j)·B_i, which is U falling in
# [Π_{j≤i}, Π_{j<i}); given that, u_i is uniform on [0, B_i), read off U as
# (U − Π_{j≤i})/(Π_{j<i} − Π_{j≤i})·B_i (:func:`joint_first`), and arms j < i did not beat.
# Arm i is then tested with u_i as in the per-arm round, and arms after it with fresh uniforms
# (they are independent of what was decided for arms up to i).  A leader sample below τ takes
# the per-arm round.  So the round keeps the law of (argmax, max) exactly, up to the granularity
# of the doubles (u_i has the resolution of U over an interval of length P(i), an error of at
# most 2^−53 in total variation per arm).  It draws differently from ``max`` (one uniform where
# that drew K − 1), so it is another recorded value.

_JOINT_TRIES = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)


@njit(cache=True, inline="always")
def joint_bound(up, w, tau):
    """B ≥ P(Beta(α, β) > M') for every M' ≥ τ, for an arm whose mean is at most ``up`` and whose
    bound weight 2(α + β + 1) is at least ``w``: exp(−w(τ − up)²) (the sub-Gaussian bound of
    :func:`beta_may_beat`, decreasing in M'), raised 1e-12 relative above the exponential's
    rounding; 1 when τ ≤ up."""
    s = tau - up
    if s <= 0.0:
        return 1.0
    return min(1.0, math.exp(-w * s * s) * (1.0 + 1e-12))


@njit(cache=True, inline="always")
def joint_product(B, lead):
    """P = Π_{j ≠ lead} (1 − B_j), in index order (the order :func:`joint_first` walks, so the
    last partial product there is this double)."""
    P = 1.0
    for j in range(B.size):
        if j != lead:
            P *= 1.0 - B[j]
    return P


@njit(cache=True)
def joint_threshold(lo, wl, up, w, lead, B):
    """(τ, P) for a block whose leader ``lead`` has mean at least ``lo`` and weight at least
    ``wl``, the other arms' upper ends ``up`` and weights ``w``; fills ``B`` (0 at the leader).
    τ = lo − √(c/wl) for the c of :data:`_JOINT_TRIES` that maximises P·(1 − e^{−c}), the
    sub-Gaussian lower bound on "M ≥ τ and U < P".  Any τ keeps the law; this one only makes the
    one-uniform decision frequent.  Once a block, so its K·8 exponentials do not matter."""
    K = B.size
    best = -1.0
    tau = lo
    for c in _JOINT_TRIES:
        cand = lo - math.sqrt(c / wl)
        P = 1.0
        for j in range(K):
            if j != lead:
                P *= 1.0 - joint_bound(up[j], w[j], cand)
        score = P * -math.expm1(-c)
        if score > best:
            best, tau = score, cand
    for j in range(K):
        B[j] = 0.0 if j == lead else joint_bound(up[j], w[j], tau)
    return tau, joint_product(B, lead)


@njit(cache=True, inline="always")
def joint_first(U, B, lead):
    """For U ≥ :func:`joint_product` (B, lead): the first arm i with U ≥ Π_{j≤i, j≠lead}(1 − B_j)
    and its uniform on [0, B_i), (U − Π_{j≤i})/(Π_{j<i} − Π_{j≤i})·B_i (comment above).  The
    denominator is positive: U < Π_{j<i} (else an earlier arm) and U ≥ Π_{j≤i}."""
    Pc = 1.0
    for j in range(B.size):
        if j != lead:
            Pn = Pc * (1.0 - B[j])
            if U >= Pn:
                return j, (U - Pn) / (Pc - Pn) * B[j]
            Pc = Pn
    return -1, 0.0      # U < P: not called so


_BLOCK = 6              # a block of rounds is t0 … t0 + (t0 >> 6)


@njit(cache=True, inline="always")
def block_end(t0):
    """The last round t1 = t0 + ⌊t0/64⌋ of the block of rounds that starts at round t0 (the
    blocks of DP-TS's and Lazy-DP-TS's intervals, and of every ``max-joint`` τ)."""
    return t0 + (t0 >> _BLOCK)


@njit(cache=True, _nrt=False, forceinline=True)
def joint_open(rng, m, tau, B, P, lead):
    """The one-uniform step of every ``max-joint`` round after the leader's sample m: −2 when
    it decides that no arm beats (m ≥ τ and U < P); −1 when m < τ (the per-arm round goes on
    with fresh uniforms from the first arm, no U drawn); else :func:`joint_first`'s arm and its
    uniform read off U.  Straight-line, one ``random`` draw at most; compiled as the rounds."""
    if m < tau:
        return -1, 0.0
    U = rng.random()
    if U < P:
        return -2, 0.0
    return joint_first(U, B, lead)


@njit(cache=True, _nrt=False, forceinline=True)
def beta_joint_round(rng, al, be, mu, w, theta, lead, tau, B, P):
    """ts-beta's ``max-joint`` round (comment above) on the exact posteriors, while the first
    arm of largest mean is ``lead``, the arm τ, ``B`` and P were set for
    (:func:`beta_joint_block`): the leader's sample M; for M ≥ τ one uniform U, U < P plays the
    leader, else :func:`joint_first`'s arm is tested with its uniform read off U and the arms
    after it — or, for M < τ, every other arm — with fresh ones (:func:`beta_arm_test`,
    rejection from :data:`JOINT_REJECT`).  Compiled as :func:`beta_max_round`."""
    K = al.size
    a = lead
    m = rng.beta(al[a], be[a])
    theta[a] = m
    i, u = joint_open(rng, m, tau, B, P, lead)
    if i == -2:
        return a
    if i >= 0:
        m, a = beta_arm_test(rng, u, i, al, be, mu, w, m, a, theta, JOINT_REJECT)
    for j in range(i + 1, K):
        if j != lead:
            m, a = beta_arm_test(rng, rng.random(), j, al, be, mu, w, m, a, theta,
                                 JOINT_REJECT)
    return a


@njit(cache=True, _nrt=False, forceinline=True)
def beta_round(rng, al, be, mu, w, theta, tau, tau_lead, B, P):
    """ts-beta's ``max-joint`` round for its kernel and step form: :func:`beta_joint_round`
    while the first arm of largest mean is τ's leader, else :func:`beta_max_round` with
    :data:`JOINT_REJECT`."""
    lead = argmax_first(mu)[0]
    if lead == tau_lead:
        return beta_joint_round(rng, al, be, mu, w, theta, lead, tau, B, P)
    return beta_max_round(rng, al, be, mu, w, theta, JOINT_REJECT)


@njit(cache=True)
def beta_joint_block(mu, w, B):
    """(τ, P, τ's leader) of a block of ts-beta's rounds from the exact means and weights: the
    leader is the first arm of largest mean and :func:`joint_threshold` takes its mean and
    weight (a block of exact posteriors is its own interval).  Once a block."""
    lead = argmax_first(mu)[0]
    tau, P = joint_threshold(mu[lead], w[lead], mu, w, lead, B)
    return tau, P, lead


@njit(cache=True)
def beta_joint_select(rng, t, al, be, theta, blk):
    """The step form's ``max-joint`` round (the kernel's, the same block, τ and draws) from the
    exact posteriors; ``blk`` = (last round of the block, τ, τ's leader), kept in the step
    rule's state; B_j is each arm's bound at τ from its present mean (the kernel recomputes it
    when the arm moves)."""
    K = al.size
    mu = np.empty(K)
    w = np.empty(K)
    for j in range(K):
        beta_arm_stats(j, al, be, mu, w)
    B = np.zeros(K)
    if t > blk[0]:
        blk[0] = block_end(t)
        blk[1], _, blk[2] = beta_joint_block(mu, w, B)
    tau, tau_lead = blk[1], np.int64(blk[2])
    for j in range(K):
        if j != tau_lead:
            B[j] = joint_bound(mu[j], w[j], tau)
    return beta_round(rng, al, be, mu, w, theta, tau, tau_lead, B, joint_product(B, tau_lead))


__all__ = ["beta_upper_tail", "beta_above", "beta_above_tail", "beta_may_beat",
           "beta_tail_may_exceed", "beta_arm_stats", "beta_max_round",
           "beta_max_select", "joint_bound", "joint_product", "joint_threshold",
           "joint_first", "joint_open", "MAX_REJECT", "JOINT_REJECT", "block_end", "beta_arm_test",
           "beta_joint_round", "beta_round", "beta_joint_block", "beta_joint_select"]

