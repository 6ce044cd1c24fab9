"""Kernel building blocks shared by the policy rules (compiled with numba)."""
from __future__ import annotations

import numpy as np
from dpledger._jit import njit

from dpledger.mechanisms.noise import laplace_noise
from dpledger.policies.base import push_segment
from dpledger.policies.environments import draw_reward, draw_sum
from dpledger.policies.sink import put_action



@njit(cache=True, inline="always")
def play_stretch(rng, env, a, t, m, fast, emit, segs, n_segs, last, actions):
    """Play arm ``a`` for the ``m`` rounds t + 1 … t + m of an episode or phase whose arm is
    fixed, and return (sum of its rewards, segs, n_segs).  Fast path: one ``draw_sum`` for the
    stretch and one segment; reference path: reward by reward.  The rounds go to the segment
    table (``emit``) or to ``actions``.  Shared by the episodic policies (AdaP-*, DP-KLUCB,
    DP-IMED), so the draw order of a stretch is written once."""
    if fast:
        s = draw_sum(rng, env, a, t, m)
        if emit:
            segs, n_segs = push_segment(segs, n_segs, last, a, t + 1, 1, m)
        else:
            actions[t:t + m] = a
    else:
        s = 0.0
        for i in range(m):
            s += draw_reward(rng, env, a, t + i)
            if emit:
                segs, n_segs = push_segment(segs, n_segs, last, a, t + i + 1, 1, 1)
            else:
                actions[t + i] = a
    return s, segs, n_segs


@njit(cache=True, inline="always")
def argmax_random_tie(values, rng):
    """Index of the largest value; ties broken uniformly at random (docs/algorithms.md#ties).

    The tie-break draw happens only when there is a tie (docs/design.md#policies-and-simulation draw
    order).  The sweep is :func:`argmax_first` (selects, not branches: the comparisons of random
    samples are unpredictable); the tie-break is out of line.  Hot kernels call the two parts
    themselves (see :func:`argmax_first`)."""
    a, tie = argmax_first(values)
    if not tie:
        return a
    return tie_break(values, a, rng)


@njit(cache=True, inline="always")
def argmax_first(values):
    """(a, tie): the index of the first largest value, and whether another value equals it —
    :func:`argmax_random_tie`'s sweep without the Generator.  Hot kernels call this and, only
    on a tie, :func:`tie_break` (the same comparisons and the same draw): numba
    reference-counts a Generator at every inlined call that receives it, two atomic operations
    a round that cost DP-UCB ≈ 10 ns of its ≈ 45 ns a round."""
    best = values[0]
    a = 0
    tie = False
    for i in range(1, values.size):
        best, a, tie = argmax_step(values[i], i, best, a, tie)
    return a, tie


@njit(cache=True)
def tie_break(values, a, rng):
    """:func:`argmax_random_tie`'s tie-break for the sweep result ``a`` (the first index holding
    the largest value): a uniform choice among the indices holding ``values[a]`` (one
    ``integers`` draw); ``a`` is the first of them, so the count starts there."""
    best = values[a]
    n_best = 0
    for i in range(a, values.size):
        if values[i] == best:
            n_best += 1
    k = rng.integers(0, n_best)
    for i in range(a, values.size):
        if values[i] == best:
            if k == 0:
                return i
            k -= 1
    return values.size - 1


@njit(cache=True, inline="always")
def argmax_step(v, j, best, a, tie):
    """One step of :func:`argmax_random_tie`'s comparison sweep, for kernels that compute the
    values and their argmax in one loop: start from (values[0], 0, False), feed values 1 … K−1,
    and on ``tie`` call :func:`tie_break` on the filled array with the sweep's arm — the same
    comparisons, hence the same arm and the same tie-break draw as :func:`argmax_random_tie`."""
    if v > best:
        return v, j, False
    if v == best:
        return best, a, True
    return best, a, tie


@njit(cache=True, inline="always")
def clip01(x):
    return min(1.0, max(0.0, x))


@njit(cache=True)
def bernoulli_kl(p, q):
    """d(p, q) = p ln(p/q) + (1−p) ln((1−p)/(1−q)), with 0·ln 0 = 0."""
    out = 0.0
    if p > 0.0:
        out += p * np.log(p / q)
    if p < 1.0:
        out += (1.0 - p) * np.log((1.0 - p) / (1.0 - q))
    return out


@njit(cache=True)
def kl_ucb_index(p, bound, tol=1e-10):
    """max{q ∈ [p, 1] : d(p, q) ≤ bound} by bisection to ``tol``
    (docs/algorithms.md#adap-klucb).

    Returns the upper end of the final bracket (never below the exact index)."""
    if p >= 1.0 or bound <= 0.0:
        return min(1.0, max(p, 0.0))
    lo = max(p, 0.0)
    hi = 1.0
    if bernoulli_kl(lo, 1.0 - 1e-15) <= bound:
        return 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if bernoulli_kl(p, mid) > bound:
            hi = mid
        else:
            lo = mid
    return hi


@njit(cache=True)
def kl_ucb_newton(p, bound, tol=1e-10):
    """max{q ∈ [p, 1] : d(p, q) ≤ bound} by safeguarded Newton (same value as
    :func:`kl_ucb_index` to within ``tol``; a deterministic function of (p, bound)).

    f(q) = d(p, q) − bound is convex and increasing on [p, 1), so Newton steps taken from the
    right of the root stay right of it; the iteration starts at the smaller of two upper bounds
    (Pinsker: q ≤ p + √(bound/2); entropy: q ≤ 1 − exp(−(bound + H(p))/(1 − p))), keeps a bracket
    [lo, hi] and bisects whenever a step leaves it.  On convergence it checks f(x − tol/4) ≤ 0,
    so the returned x satisfies root ≤ x ≤ root + tol/4 (up to one rounding)."""
    if bound <= 0.0 or p >= 1.0:
        return min(1.0, max(p, 0.0))
    if p <= 0.0:
        return -np.expm1(-bound)          # d(0, q) = −ln(1 − q): closed form
    if 1.0 - p <= tol:
        return 1.0
    tol = 0.25 * tol                      # inner tolerance: the answer is within tol/4 above
    lo = p
    hi = 1.0
    h = -(p * np.log(p) + (1.0 - p) * np.log1p(-p))
    q = min(p + np.sqrt(0.5 * bound), -np.expm1(-(bound + h) / (1.0 - p)))
    if not (q > lo and q < hi):
        q = 0.5 * (lo + hi)
    for _ in range(200):
        f = bernoulli_kl(p, q) - bound
        if f > 0.0:
            hi = q
        else:
            lo = q
        if hi - lo <= tol:
            return hi
        step = f * q * (1.0 - q) / (q - p)
        qn = q - step
        if f > 0.0 and step < 0.25 * tol:
            # converged from the right: the root lies in [qn − (small), qn]; confirm the bracket
            x = qn if qn > lo else q
            chk = x - tol
            if chk <= lo or bernoulli_kl(p, chk) - bound <= 0.0:
                return x
            hi = chk
            qn = chk
        if not (qn > lo and qn < hi):
            qn = 0.5 * (lo + hi)
        q = qn
    return hi


@njit(cache=True)
def private_initial_pulls(rng, env, K, stop, scale, rows, capture, mu, N, actions, emit,
                          segs, last):
    """Rounds 1…K of the epoch-based Laplace policies (Lazy-DP-TS, AdaP-*, Anytime-Lazy-UCB):
    arm a at round a+1; its one reward is released once as x + Lap(scale) — a ledger row of
    release id 0 over observation [0, 1) — into ``mu[a]``, ``N[a] = 1``; arm 0's release is the
    captured witness.  ``scale`` is release 0's (the caller's ``noise_scales[0]``).  The play
    goes to ``segs`` (when ``emit``) or ``actions``.  Returns (rounds played, rows written,
    segs, segments written)."""
    n_rows = 0
    n_segs = 0
    played = min(K, stop)
    for a in range(played):
        x = draw_reward(rng, env, a, a)
        noise = laplace_noise(rng, env, scale, 1.0, rows, n_rows, a, 0, 1, 0)
        n_rows += 1
        if capture.shape[1] > 0 and a == 0:
            capture[0, 0] = x + noise
            capture[1, 0] = x
        capture_release(capture, x + noise, x, scale, a, 0, 1)
        mu[a] = x + noise
        N[a] = 1
        if emit:
            segs, n_segs = push_segment(segs, n_segs, last, a, a + 1, 1, 1)
        else:
            put_action(actions, a + 1, a)
    return played, n_rows, segs, n_segs


# ---- Azize, Wu, Honda, Orabona, Ito & Basu 2025 (NeurIPS): d_ε and the DP-KLUCB index ---------
# (Azize et al. 2025; docs/algorithms.md#dp-klucb).  The one place d_ε is computed: the kernels call
# it, and :func:`dpledger.policies.regret_bounds.azize_2025_lower_bound_constant` calls the compiled
# form.

@njit(cache=True, inline="always")
def sigmoid(u):
    """1/(1 + e^{−u}) without overflow for any finite u (the exponent is always ≤ 0)."""
    if u >= 0.0:
        return 1.0 / (1.0 + np.exp(-u))
    e = np.exp(u)
    return e / (1.0 + e)


@njit(cache=True)
def kl_log1p(p, q):
    """Bernoulli kl(p, q) as p·ln(p/q) + (1−p)·(ln1p(−p) − ln1p(−q)), 0·ln 0 = 0: the form of
    :func:`bernoulli_kl` that keeps its accuracy for tiny p, q (where 1 − q rounds to 1).  Used
    by d_ε and the lower-bound constants; KL-UCB keeps :func:`bernoulli_kl` (its actions are
    pinned by tests)."""
    out = 0.0
    if p > 0.0:
        out += p * np.log(p / q)
    if p < 1.0:
        out += (1.0 - p) * (np.log1p(-p) - np.log1p(-q))
    return out


@njit(cache=True)
def d_epsilon(x, y, eps):
    """d_ε(x, y) = inf_{z between x and y} ε|z − x| + kl(z, y) (Azize et al. 2025, the slides'
    definition), for x, y ∈ [0, 1], ε > 0, by its closed form in logits: the unconstrained minimiser
    z* = sigmoid(logit(y) ∓ ε) (− when x < y, + when x > y), clipped to the interval between x and
    y.  Computed from logits, so a large ε never overflows e^ε; y = 1 (x < 1) gives ε(1 − x), y = 0
    (x > 0) gives ε·x; 0·ln 0 = 0."""
    if x == y:
        return 0.0
    if x < y:
        if y >= 1.0:
            return eps * (1.0 - x)
        z = max(sigmoid(np.log(y) - np.log1p(-y) - eps), x)
        return eps * (z - x) + kl_log1p(z, y)
    if y <= 0.0:
        return eps * x
    z = min(sigmoid(np.log(y) - np.log1p(-y) + eps), x)
    return eps * (x - z) + kl_log1p(z, y)


@njit(cache=True)
def dp_klucb_index(x, thr, eps, tol=1e-12):
    """DP-KLUCB's index max{μ ∈ [x, 1] : d_ε(x, μ) ≤ thr} (Azize et al. 2025;
    docs/algorithms.md#dp-klucb) for a clipped private mean x ∈ [0, 1] and threshold thr = ln t / N.

    μ ↦ d_ε(x, μ) increases on [x, 1] up to ε(1 − x), so thr ≥ ε(1 − x) gives exactly 1
    (saturation); otherwise bisection on [x, 1] to ``tol``, returning the upper end of the final
    bracket (never below the exact index)."""
    if thr <= 0.0 or x >= 1.0:
        return x
    if thr >= eps * (1.0 - x):
        return 1.0
    lo = x
    hi = 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if d_epsilon(x, mid, eps) > thr:
            hi = mid
        else:
            lo = mid
    return hi


@njit(cache=True)
def phase_target(n, alpha):
    """The count at which a phase started at count n ends: max(n + 1, ⌈α·n⌉) (reconstructed:
    docs/algorithms.md#dp-klucb). A product within 1e-12 (relative) of an integer counts as that
    integer, so α = 1.1, n = 10 gives 11, not the float artefact 12 of ⌈11.000000000000002⌉."""
    c = alpha * n
    k = np.int64(np.floor(c))
    if c - k > 1e-12 * c:
        k += 1
    return max(n + 1, k)


@njit(cache=True, inline="always")
def capture_release(capture, released, clean, scale, arm, start, stop):
    """Full white-box capture (docs/design.md#policies-and-simulation ``capture=True``; issue 14):
    with a (6, M) capture array, append one release — row 0 the released value, 1 its clean
    statistic (a Laplace release's sum of rewards, or a Gaussian one's mean, as DP-TS-UCB's fresh
    samples), 2 its noise scale (Laplace b or Gaussian σ), 3 the arm, 4 and 5 the range [start,
    stop) of the arm's observation indices it reads — in column 1 + n, where n = capture[5, 0]
    counts the releases so far (column 0 stays the single witness capture of the two-row form). When
    the array is full, capture[4, 0] is set to 1 (overflow: the auditor refuses the trial rather
    than score an incomplete vector).  A no-op for the two-row form, so kernels call it
    unconditionally."""
    if capture.shape[0] >= 6:
        n = np.int64(capture[5, 0])
        col = n + 1
        if col < capture.shape[1]:
            capture[0, col] = released
            capture[1, col] = clean
            capture[2, col] = scale
            capture[3, col] = arm
            capture[4, col] = start
            capture[5, col] = stop
            capture[5, 0] = n + 1
        else:
            capture[4, 0] = 1.0
